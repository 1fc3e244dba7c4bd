// write_padded_model (rootspec-make-model --pad-from): a model grown to more layers and a wider MLP
// computes its source's function. On the loop reference, whose sums run in index order, the
// added terms are exact zeros at the ends of the sums: its logits are the source's bit for bit.
// On the fused kernels and TorchOps, whose sums are blocked by the matrices' sizes, they are the
// source's up to summation order, and the greedy tokens are the same. Bad sizes are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "model_fixtures.h"
#include "model_runtime.h"
#include "model_config.h"
#include "safetensors.h"

namespace rootspec {
namespace {

using testing::TempDir;

struct Padded {
  Padded() : dir("padded-model") {
    source = testing::make_model(dir, "source", testing::tiny_config(ModelArch::Llama, 2), 71);
    padded = dir.sub("padded");
    write_padded_model(source, padded, /*layers=*/5, /*intermediate=*/160);
  }
  TempDir dir;
  std::string source, padded;
};

// The largest |difference| of the two models' logits over a prompt prefilled a token at a time,
// relative to the largest |logit|; and at how many positions the most probable token differs.
void compare_logits(const std::string& a_dir, const std::string& b_dir, RuntimeOptions o, double* relative,
                    int* argmax_differs) {
  ModelRuntime a(a_dir, o), b(b_dir, o);
  std::mt19937 gen(5);
  const std::vector<int32_t> prompt = testing::random_tokens(gen, 24, a.vocab_size());
  double worst = 0, largest = 0;
  *argmax_differs = 0;
  for (int32_t t : prompt) {
    const RowsView ra = a.prefill({t});
    std::vector<float> row(ra.row(0), ra.row(0) + a.vocab_size());
    const RowsView rb = b.prefill({t});
    for (int v = 0; v < a.vocab_size(); ++v) {
      worst = std::max(worst, static_cast<double>(std::abs(row[v] - rb.row(0)[v])));
      largest = std::max(largest, static_cast<double>(std::abs(rb.row(0)[v])));
    }
    *argmax_differs += std::max_element(row.begin(), row.end()) - row.begin() !=
                       std::max_element(rb.row(0), rb.row(0) + a.vocab_size()) - rb.row(0);
  }
  *relative = worst / largest;
}

TEST(PaddedModel, ConfigHasTheNewSizesAndAddedLayersHaveZeroOutputProjections) {
  Padded p;
  const ModelConfig c = load_config(p.padded + "/config.json");
  EXPECT_EQ(c.num_hidden_layers, 5);
  EXPECT_EQ(c.intermediate_size, 160);
  SafetensorsFolder f(p.padded);
  for (int layer : {2, 3, 4}) {
    const std::string l = "model.layers." + std::to_string(layer) + ".";
    for (const char* zero : {"self_attn.o_proj.weight", "mlp.down_proj.weight"}) {
      const TensorView& v = f.get(l + zero);
      const float* x = static_cast<const float*>(v.data);
      EXPECT_TRUE(std::all_of(x, x + v.nbytes / sizeof(float), [](float y) { return y == 0.0f; })) << l << zero;
    }
    EXPECT_EQ(f.get(l + "mlp.up_proj.weight").shape, (std::vector<int64_t>{160, 32}));
  }
  // A source layer's down projection: its columns, then zeros.
  SafetensorsFolder s(p.source);
  const TensorView& down = f.get("model.layers.1.mlp.down_proj.weight");  // [32, 160]
  const TensorView& was = s.get("model.layers.1.mlp.down_proj.weight");   // [32, 64]
  ASSERT_EQ(down.shape, (std::vector<int64_t>{32, 160}));
  const float* d = static_cast<const float*>(down.data);
  const float* w = static_cast<const float*>(was.data);
  for (int r = 0; r < 32; ++r)
    for (int k = 0; k < 160; ++k) ASSERT_EQ(d[r * 160 + k], k < 64 ? w[r * 64 + k] : 0.0f) << r << ", " << k;
}

TEST(PaddedModel, LoopReferenceLogitsEqualTheSourcesBitForBit) {
  Padded p;
  RuntimeOptions o;
  o.cpu_loops = true;
  double relative = 1;
  int differs = -1;
  compare_logits(p.padded, p.source, o, &relative, &differs);
  EXPECT_EQ(relative, 0.0);
  EXPECT_EQ(differs, 0);
}

TEST(PaddedModel, FusedAndTorchOpsLogitsEqualTheSourcesUpToSummationOrder) {
  Padded p;
  for (bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused" : "TorchOps");
    RuntimeOptions o;
    o.cpu_kernels = fused;
    double relative = 1;
    int differs = -1;
    compare_logits(p.padded, p.source, o, &relative, &differs);
    EXPECT_LE(relative, 1e-5);  // float32 sums of 64 against 160 terms, blocked differently
    EXPECT_EQ(differs, 0);
  }
}

TEST(PaddedModel, FewerLayersOrANarrowerMlpAreRefused) {
  Padded p;
  EXPECT_THROW(write_padded_model(p.source, p.dir.sub("fewer"), 1, 160), std::invalid_argument);
  EXPECT_THROW(write_padded_model(p.source, p.dir.sub("narrower"), 5, 32), std::invalid_argument);
}

}  // namespace
}  // namespace rootspec
