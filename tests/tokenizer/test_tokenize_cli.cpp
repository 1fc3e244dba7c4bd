// rootspec-tokenize as a user runs it, on the peer's Llama-3 tokenizer.json: --encode/--decode
// agree with the library, --chat renders the template, bad input gets a clear error.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include "peer_fixture.h"
#include "programs.h"
#include "tokenizer.h"

namespace {

struct CliRun {
  int code;
  std::string out;
};

CliRun run_cli(const std::vector<std::string>& args) {
  std::string cmd = peer::quote(rootspec::testing::program_path("rootspec-tokenize"));
  for (const auto& a : args) cmd += " " + peer::quote(a);
  cmd += " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(TokenizeCli, EncodeDecodeAndChatAgreeWithTheLibrary) {
  const std::string dir = peer::model_dir("llama3");
  const std::string text = "Hello, world! Ünïcödé and  spaces\tand 12345.";
  const auto tok = rootspec::load_tokenizer(dir);
  const CliRun enc = run_cli({"--model", dir, "--encode", text, "--json"});
  ASSERT_EQ(enc.code, 0) << enc.out;
  const auto ids = nlohmann::json::parse(enc.out)["ids"].get<std::vector<int32_t>>();
  EXPECT_EQ(ids, tok->encode(text, false));
  std::string id_list;
  for (int32_t id : ids) id_list += std::to_string(id) + ",";
  id_list.pop_back();
  const CliRun dec = run_cli({"--model", dir, "--decode", id_list, "--json"});
  ASSERT_EQ(dec.code, 0) << dec.out;
  EXPECT_EQ(nlohmann::json::parse(dec.out)["text"], text);
  const CliRun chat = run_cli({"--model", dir, "--chat", "hi", "--json"});
  ASSERT_EQ(chat.code, 0) << chat.out;
  const auto j = nlohmann::json::parse(chat.out);
  EXPECT_EQ(j["template"].get<std::string>().rfind("llama3", 0), 0u) << j["template"];
  EXPECT_NE(j["text"].get<std::string>().find("<|start_header_id|>user<|end_header_id|>"), std::string::npos);
}

TEST(TokenizeCli, BadInputGetsAClearError) {
  const CliRun none = run_cli({"--model", peer::model_dir("llama3")});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.out.find("one of --encode, --decode, --chat is required"), std::string::npos) << none.out;
  const CliRun missing = run_cli({"--model", "/nonexistent/model", "--encode", "x"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("/nonexistent/model"), std::string::npos) << missing.out;
  const CliRun bad_ids = run_cli({"--model", peer::model_dir("llama3"), "--decode", "12,abc"});
  EXPECT_NE(bad_ids.code, 0) << bad_ids.out;
}

}  // namespace
