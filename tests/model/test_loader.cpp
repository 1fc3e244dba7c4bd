// Loader: config.json fields, safetensors forms (single, sharded, F32/F16/BF16), and the
// errors for bad folders, each naming the file and the problem.
#include <cstdint>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model_fixtures.h"

namespace rootspec {
namespace {

using testing::TempDir;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json j;
  in >> j;
  return j;
}

void write_json(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(2); }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Every tensor of a folder as TensorToWrite, optionally converted to F32.
std::vector<TensorToWrite> read_all(const std::string& dir, bool to_f32) {
  SafetensorsFile f(dir + "/model.safetensors");
  std::vector<TensorToWrite> out;
  for (const auto& kv : f.tensors()) {
    const TensorView& v = kv.second;
    TensorToWrite t;
    t.name = v.name;
    t.shape = v.shape;
    t.dtype = v.dtype;
    const auto* b = static_cast<const uint8_t*>(v.data);
    if (to_f32 && v.dtype != TensorDtype::F32) {
      const size_t n = v.nbytes / 2;
      t.dtype = TensorDtype::F32;
      t.data.resize(4 * n);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, b + 2 * i, 2);
        const float x = v.dtype == TensorDtype::F16 ? half_to_float(h) : bf16_to_float(h);
        std::memcpy(t.data.data() + 4 * i, &x, 4);
      }
    } else {
      t.data.assign(b, b + v.nbytes);
    }
    out.push_back(std::move(t));
  }
  return out;
}

// The message of the exception `fn` throws (empty when it does not throw).
template <typename F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

RuntimeOptions opts() {
  RuntimeOptions o;
  o.max_context = 64;
  return o;
}

std::vector<float> logits_of(const std::string& dir, const std::vector<int32_t>& prompt) {
  ModelRuntime rt(dir, opts());
  const RowsView r = rt.prefill(prompt);
  return std::vector<float>(r.row(0), r.row(0) + r.vocab);
}

class Loader : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { set_torch_threads(1); }
  TempDir dir{"loader"};
  std::string good() { return testing::make_model(dir, "good", testing::tiny_config(ModelArch::Qwen3), 3); }
};

TEST_F(Loader, ConfigFieldsAndTokenIds) {
  nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}},
                      {"vocab_size", 128},
                      {"hidden_size", 64},
                      {"intermediate_size", 96},
                      {"num_hidden_layers", 3},
                      {"num_attention_heads", 8},
                      {"num_key_value_heads", 2},
                      {"rms_norm_eps", 1e-5},
                      {"rope_theta", 500000.0},
                      {"attention_bias", true},
                      {"tie_word_embeddings", true},
                      {"bos_token_id", 128000},
                      {"eos_token_id", {128001, 128008, 128009}},
                      {"torch_dtype", "bfloat16"},
                      {"rope_scaling",
                       {{"rope_type", "llama3"},
                        {"factor", 32.0},
                        {"low_freq_factor", 1.0},
                        {"high_freq_factor", 4.0},
                        {"original_max_position_embeddings", 8192}}}};
  const ModelConfig c = config_from_json(j, "config.json");
  EXPECT_EQ(c.arch, ModelArch::Llama);
  EXPECT_EQ(c.head_dim, 8);  // hidden / heads
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.tie_word_embeddings && c.rope_scaling.llama3);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.bos_token_ids, std::vector<int32_t>({128000}));
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>({128001, 128008, 128009}));
  EXPECT_EQ(c.torch_dtype, "bfloat16");

  j["architectures"] = {"Qwen2ForCausalLM"};
  j.erase("attention_bias");
  j["rope_scaling"] = nullptr;
  j["bos_token_id"] = nullptr;
  j["eos_token_id"] = 151645;
  const ModelConfig q2 = config_from_json(j, "config.json");
  EXPECT_TRUE(q2.qkv_bias);
  EXPECT_FALSE(q2.o_bias);
  EXPECT_TRUE(q2.bos_token_ids.empty());
  EXPECT_EQ(q2.eos_token_ids, std::vector<int32_t>({151645}));

  j["architectures"] = {"Qwen3ForCausalLM"};
  j["head_dim"] = 16;  // Qwen3: head_dim independent of hidden / heads
  const ModelConfig q3 = config_from_json(j, "config.json");
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_FALSE(q3.qkv_bias);
  EXPECT_EQ(q3.head_dim, 16);
}

// transformers ≥ 5 saves rope_theta and the scaling in one "rope_parameters" object and the
// dtype as "dtype" (hf_compare.py's folders come from such a save_pretrained).
TEST_F(Loader, TransformersFiveRopeParametersAndDtypeAreRead) {
  nlohmann::json j = config_to_json(testing::tiny_config(ModelArch::Llama));
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j.erase("torch_dtype");
  j["dtype"] = "bfloat16";
  j["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                          {"factor", 8.0},           {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  const ModelConfig llama = config_from_json(j, "config.json");
  EXPECT_DOUBLE_EQ(llama.rope_theta, 500000.0);
  EXPECT_TRUE(llama.rope_scaling.llama3);
  EXPECT_DOUBLE_EQ(llama.rope_scaling.factor, 8.0);
  EXPECT_EQ(llama.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(llama.torch_dtype, "bfloat16");

  j["architectures"] = {"Qwen3ForCausalLM"};
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  const ModelConfig qwen3 = config_from_json(j, "config.json");
  EXPECT_DOUBLE_EQ(qwen3.rope_theta, 1000000.0);
  EXPECT_FALSE(qwen3.rope_scaling.llama3);

  j["rope_parameters"] = {{"full_attention", {{"rope_theta", 1e6}}}};
  EXPECT_NE(error_of([&] { config_from_json(j, "config.json"); }).find("has no \"rope_theta\""),
            std::string::npos);
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}};
  EXPECT_NE(error_of([&] { config_from_json(j, "config.json"); }).find("rope_parameters type \"yarn\""),
            std::string::npos);
}

TEST_F(Loader, ConfigErrorsNameTheProblem) {
  nlohmann::json base = config_to_json(testing::tiny_config(ModelArch::Llama));
  auto msg = [&](nlohmann::json j) { return error_of([&] { config_from_json(j, "dir/config.json"); }); };
  nlohmann::json j = base;
  j["architectures"] = {"GPT2LMHeadModel"};
  EXPECT_NE(msg(j).find("architecture \"GPT2LMHeadModel\" is not supported"), std::string::npos) << msg(j);
  EXPECT_NE(msg(j).find("dir/config.json"), std::string::npos);
  j = base;
  j.erase("hidden_size");
  EXPECT_NE(msg(j).find("missing key \"hidden_size\""), std::string::npos) << msg(j);
  j = base;
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_NE(msg(j).find("rope_scaling type \"yarn\" is not supported"), std::string::npos) << msg(j);
  j = base;
  j["torch_dtype"] = "int8";
  EXPECT_NE(msg(j).find("\"torch_dtype\" \"int8\" is not supported"), std::string::npos) << msg(j);
  j = base;
  j["eos_token_id"] = "two";
  EXPECT_NE(msg(j).find("eos_token_id"), std::string::npos) << msg(j);
  j = base;
  j["num_key_value_heads"] = 3;
  EXPECT_NE(msg(j).find("not a multiple of \"num_key_value_heads\""), std::string::npos) << msg(j);
  // Integers are never converted from floats or narrowed (a fuzzing finding).
  j = base;
  j["hidden_size"] = 2.5e20;
  EXPECT_NE(msg(j).find("bad value for \"hidden_size\": must be an integer"), std::string::npos) << msg(j);
  j = base;
  j["num_hidden_layers"] = 4294967300LL;
  EXPECT_NE(msg(j).find("bad value for \"num_hidden_layers\": 4294967300 is out of range"), std::string::npos)
      << msg(j);
  j = base;
  j["eos_token_id"] = {2, 3000000000LL};
  EXPECT_NE(msg(j).find("\"eos_token_id\": 3000000000 is out of range"), std::string::npos) << msg(j);
}

TEST_F(Loader, UnsupportedArchitectureInFolder) {
  const std::string d = good();
  nlohmann::json j = read_json(d + "/config.json");
  j["architectures"] = {"MistralForCausalLM"};
  write_json(d + "/config.json", j);
  const std::string m = error_of([&] { ModelRuntime(d, opts()); });
  EXPECT_NE(m.find(d + "/config.json"), std::string::npos) << m;
  EXPECT_NE(m.find("MistralForCausalLM"), std::string::npos) << m;
}

TEST_F(Loader, MissingTensor) {
  const std::string d = good();
  auto t = read_all(d, false);
  t.erase(
      std::remove_if(t.begin(), t.end(),
                     [](const TensorToWrite& x) { return x.name == "model.layers.1.mlp.up_proj.weight"; }),
      t.end());
  write_safetensors(d + "/model.safetensors", t);
  const std::string m = error_of([&] { ModelRuntime(d, opts()); });
  EXPECT_NE(m.find(d + "/model.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("tensor 'model.layers.1.mlp.up_proj.weight' is missing"), std::string::npos) << m;
}

TEST_F(Loader, WrongShape) {
  const std::string d = good();
  auto t = read_all(d, false);
  for (auto& x : t)
    if (x.name == "model.layers.0.self_attn.k_proj.weight") x.shape = {8, 64};  // was [16, 32]
  write_safetensors(d + "/model.safetensors", t);
  const std::string m = error_of([&] { ModelRuntime(d, opts()); });
  EXPECT_NE(m.find("tensor 'model.layers.0.self_attn.k_proj.weight' has shape [8, 64], expected [16, 32]"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find(d + "/model.safetensors"), std::string::npos) << m;
}

TEST_F(Loader, TruncatedFile) {
  const std::string d = good();
  const std::string f = d + "/model.safetensors";
  std::filesystem::resize_file(f, std::filesystem::file_size(f) - 100);
  std::string m = error_of([&] { ModelRuntime(d, opts()); });
  EXPECT_NE(m.find(f + ": truncated file"), std::string::npos) << m;
  std::filesystem::resize_file(f, 5);  // not even the header length
  m = error_of([&] { ModelRuntime(d, opts()); });
  EXPECT_NE(m.find(f + ": truncated file"), std::string::npos) << m;
  std::filesystem::resize_file(f, 0);
  spit(f, std::string("\xff\x00\x00\x00\x00\x00\x00\x00{", 9));  // header of 255 bytes, 1 present
  m = error_of([&] { ModelRuntime(d, opts()); });
  EXPECT_NE(m.find(f + ": truncated file: header"), std::string::npos) << m;
}

TEST_F(Loader, UnsupportedDtype) {
  const std::string d = good();
  const std::string f = d + "/model.safetensors";
  std::string bytes = slurp(f);
  const size_t at = bytes.find("\"dtype\":\"F32\"");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 13, "\"dtype\":\"I32\"");  // same length: offsets stay valid
  spit(f, bytes);
  const std::string m = error_of([&] { ModelRuntime(d, opts()); });
  EXPECT_NE(m.find(f + ": tensor '"), std::string::npos) << m;
  EXPECT_NE(m.find("has dtype I32; supported: F32, F16, BF16"), std::string::npos) << m;
}

TEST_F(Loader, NoWeightsAndMissingShard) {
  const std::string d = good();
  std::filesystem::remove(d + "/model.safetensors");
  std::string m = error_of([&] { ModelRuntime(d, opts()); });
  EXPECT_NE(m.find("no model.safetensors or model.safetensors.index.json"), std::string::npos) << m;
  const std::string s =
      testing::make_model(dir, "sharded", testing::tiny_config(ModelArch::Llama), 4, TensorDtype::F32, 3);
  std::filesystem::remove(s + "/model-00002-of-00003.safetensors");
  m = error_of([&] { ModelRuntime(s, opts()); });
  EXPECT_NE(
      m.find(s + "/model.safetensors.index.json: shard 'model-00002-of-00003.safetensors' does not exist"),
      std::string::npos)
      << m;
  std::filesystem::remove(s + "/config.json");
  m = error_of([&] { ModelRuntime(s, opts()); });
  EXPECT_NE(m.find(s + "/config.json: cannot open"), std::string::npos) << m;
}

TEST_F(Loader, ShardedEqualsSingleFile) {
  const ModelConfig c = testing::tiny_config(ModelArch::Qwen2, 3);
  const std::string one = testing::make_model(dir, "one", c, 9, TensorDtype::F32, 1);
  const std::string three = testing::make_model(dir, "three", c, 9, TensorDtype::F32, 3);
  ASSERT_TRUE(std::filesystem::exists(three + "/model.safetensors.index.json"));
  ASSERT_FALSE(std::filesystem::exists(three + "/model.safetensors"));
  const std::vector<int32_t> p = {5, 17, 3, 90, 44};
  EXPECT_EQ(logits_of(one, p), logits_of(three, p));  // bit-identical
}

TEST_F(Loader, HalfPrecisionFilesLoadAsTheirValues) {
  for (TensorDtype dt : {TensorDtype::BF16, TensorDtype::F16}) {
    const ModelConfig c = testing::tiny_config(ModelArch::Llama);
    const std::string half = testing::make_model(dir, std::string("h") + dtype_name(dt), c, 21, dt);
    // The same values written as F32: the runtime (fp32) must see identical weights.
    const std::string f32 = dir.sub(std::string("f") + dtype_name(dt));
    std::filesystem::create_directories(f32);
    std::filesystem::copy_file(half + "/config.json", f32 + "/config.json");
    write_safetensors(f32 + "/model.safetensors", read_all(half, true));
    const std::vector<int32_t> p = {1, 2, 3, 50, 60};
    const auto a = logits_of(half, p), b = logits_of(f32, p);
    EXPECT_EQ(a, b) << dtype_name(dt);
    // And the half file is not the F32 model of the same seed (values were rounded).
    const auto full = logits_of(testing::make_model(dir, std::string("full") + dtype_name(dt), c, 21), p);
    EXPECT_NE(a, full);
    EXPECT_LT(testing::max_abs_diff(a.data(), full.data(), static_cast<int>(a.size())), 0.5f);
  }
}

TEST_F(Loader, HalfFloatConversions) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_to_float(0x0001), 5.960464477539063e-08f);  // smallest subnormal
  EXPECT_EQ(float_to_half(5.960464477539063e-08f), 0x0001);
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
  for (float x : {0.1f, -7.25f, 1000.5f, 3e-5f}) {
    EXPECT_NEAR(half_to_float(float_to_half(x)), x, std::abs(x) * 1e-3f + 1e-7f);
    EXPECT_NEAR(bf16_to_float(float_to_bf16(x)), x, std::abs(x) * 8e-3f);
  }
}

TEST_F(Loader, TruncatedDrafterKeepsSharedTensors) {
  const std::string t = testing::make_model(dir, "target", testing::tiny_config(ModelArch::Qwen3, 4), 8);
  write_truncated_model(t, dir.sub("drafter"), 1);
  const ModelConfig c = load_config(dir.sub("drafter") + "/config.json");
  EXPECT_EQ(c.num_hidden_layers, 1);
  SafetensorsFile a(t + "/model.safetensors"), b(dir.sub("drafter") + "/model.safetensors");
  for (const char* name : {"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
                           "model.layers.0.self_attn.q_norm.weight"}) {
    const TensorView* x = a.find(name);
    const TensorView* y = b.find(name);
    ASSERT_TRUE(x && y) << name;
    ASSERT_EQ(x->nbytes, y->nbytes);
    EXPECT_EQ(std::memcmp(x->data, y->data, x->nbytes), 0) << name;
  }
  EXPECT_EQ(b.find("model.layers.1.mlp.up_proj.weight"), nullptr);
  ModelRuntime rt(dir.sub("drafter"), opts());
  EXPECT_EQ(rt.config().num_hidden_layers, 1);
  EXPECT_NE(error_of([&] { write_truncated_model(t, dir.sub("bad"), 5); }).find("--keep-layers 5"),
            std::string::npos);
}

}  // namespace
}  // namespace rootspec

// Fuzzing findings: a negative dimension, or a shape whose element count wraps
// around 2^64 to a byte count that matches, is refused.
TEST(SafetensorsHeader, NegativeAndOverflowingShapesAreRefused) {
  auto parse = [](const std::string& header, size_t data_bytes) -> std::string {
    std::string file(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(file.data(), &n, 8);
    file += header + std::string(data_bytes, '\0');
    try {
      rootspec::parse_safetensors(reinterpret_cast<const uint8_t*>(file.data()), file.size(),
                                  "w.safetensors");
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  // [-1, -4] F32: the product, 4 times 4 bytes = 16, matches the data.
  std::string e = parse(R"({"t":{"dtype":"F32","shape":[-1,-4],"data_offsets":[0,16]}})", 16);
  EXPECT_NE(e.find("w.safetensors: tensor 't': negative dimension -1"), std::string::npos) << e;
  // 2^62 * 4 * 4 bytes wraps to 0; so does 2^32 * 2^32.
  e = parse(R"({"t":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", 0);
  EXPECT_NE(e.find("w.safetensors: tensor 't': its shape has more elements than 2^64"), std::string::npos)
      << e;
  e = parse(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0);
  EXPECT_NE(e.find("more elements than 2^64"), std::string::npos) << e;
  e = parse(R"({"t":{"dtype":"F16","shape":[4611686018427387904,2],"data_offsets":[0,0]}})", 0);
  EXPECT_NE(e.find("w.safetensors: tensor 't': 0 bytes do not match its shape and dtype"), std::string::npos)
      << e;
  // A float dimension (the fuzzer's 4.6e20) is refused, not converted (undefined behaviour).
  e = parse(R"({"t":{"dtype":"F32","shape":[461168601842738790444],"data_offsets":[8,0]}})", 0);
  EXPECT_NE(e.find("w.safetensors: tensor 't': shape holds 4.611686018427388e+20, not a 64-bit integer"),
            std::string::npos)
      << e;
  e = parse(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4);
  EXPECT_NE(e.find("negative data offset"), std::string::npos) << e;
  // A well-formed header still parses.
  EXPECT_EQ(parse(R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 16), "");
  EXPECT_NE(parse("", 0).find("w.safetensors"), std::string::npos);
}
