// rootspec-sim as a user runs it: JSON output, [TPR] App. B.1 through `analyze`, and bad
// input → exit code 2 with one line on stderr naming the problem.
#include <gtest/gtest.h>
#include <cstdint>

#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include "programs.h"

namespace {

struct SimRun {
  int code;
  std::string out, err;
};

// Per process: ctest runs each test of this file as its own process, possibly in parallel.
std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "rootspec_sim_cli_" + std::to_string(getpid()) + "_" + name;
}

SimRun run_sim(const std::string& args) {
  const std::string err_path = temp_path("stderr.txt");
  const std::string cmd = rootspec::testing::program_path("rootspec-sim") + " " + args + " 2>" + err_path;
  FILE* pipe = popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  std::ifstream f(err_path);
  std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, err};
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

const char* kBinaryUniform = R"({"vocab_size": 2, "order": 1, "context": [0],
  "target": {"0": [0.5, 0.5], "1": [0.5, 0.5]}, "draft": {"0": [0.6, 0.4], "1": [0.3, 0.7]}})";

TEST(SimCli, AnalyzeReproducesPaperB1) {
  const std::string model = write_file("b1.json", kBinaryUniform);
  const SimRun r = run_sim("analyze --model " + model +
                           " --tree '{\"tokens\": [0,1,0,1,0,0,1], \"parents\": [-1,-1,0,0,1,2,2]}'");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["expected_accepted"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["ceiling"].get<double>(), 3.0);
  double total = 0;
  for (double w : j["exit_law"]) total += w;
  EXPECT_DOUBLE_EQ(total, 1.0);
  EXPECT_EQ(j["exit_law"].size(), 8u);
}

TEST(SimCli, DecodePrintsCountsAndRoundStatistics) {
  const std::string model = temp_path("random.json");
  ASSERT_EQ(run_sim("random --vocab 4 --order 2 --seed 5 --out " + model).code, 0);
  const SimRun r = run_sim("decode --model " + model +
                           " --rule root-draw --verifier tev --budget 3 --temperature 0.7 --top-k 3"
                           " --depth 4 --expand 3 --emit 3 --runs 500 --seed 1");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  int64_t total = 0;
  for (const auto& [key, n] : j["counts"].items()) {
    EXPECT_EQ(std::count(key.begin(), key.end(), ','), 2) << key;
    total += n.get<int64_t>();
  }
  EXPECT_EQ(total, 500);
  EXPECT_EQ(j["runs"], 500);
  EXPECT_GE(j["rounds"].get<int64_t>(), 500);
  EXPECT_NEAR(j["mean_emitted_per_round"].get<double>(), j["mean_accepted_per_round"].get<double>() + 1,
              1e-9);
  // Same seed, same output.
  EXPECT_EQ(run_sim("decode --model " + model +
                    " --rule root-draw --verifier tev --budget 3 --temperature 0.7 --top-k 3"
                    " --depth 4 --expand 3 --emit 3 --runs 500 --seed 1")
                .out,
            r.out);
}

struct BadCase {
  std::string model_json;  // empty: the valid binary model
  std::string args;
  std::string message;  // must appear in the one stderr line
};

TEST(SimCli, BadInputExitsTwoWithOneLineNamingTheProblem) {
  const std::string good = kBinaryUniform;
  const std::vector<BadCase> cases = {
      {R"({"vocab_size": 2, "order": 1, "context": [0], "target": {"0": [0.5, 0.5], "1": [0.5, 0.5]}})",
       "decode", "missing key \"draft\""},
      {R"({"vocab_size": 2, "order": 1, "context": [0], "target": {"0": [0.5, 0.5], "1": [0.5, 0.5]}, "draft": {"0": [0.5, 0.5], "1": [0.5, 0.5]}, "bonus": 1})",
       "decode", "unknown key \"bonus\""},
      {R"({"vocab_size": 2, "order": 1, "context": [0], "target": {"0": [0.5, 0.5, 0.0], "1": [0.5, 0.5]}, "draft": {"0": [0.5, 0.5], "1": [0.5, 0.5]}})",
       "decode", "must be an array of 2"},
      {R"({"vocab_size": 2, "order": 1, "context": [0], "target": {"0": [0.5, 0.6], "1": [0.5, 0.5]}, "draft": {"0": [0.5, 0.5], "1": [0.5, 0.5]}})",
       "decode", "sums to"},
      {R"({"vocab_size": 2, "order": 1, "context": [0], "target": {"0": [1.5, -0.5], "1": [0.5, 0.5]}, "draft": {"0": [0.5, 0.5], "1": [0.5, 0.5]}})",
       "decode", "negative"},
      {R"({"vocab_size": 2, "order": 1, "context": [0], "target": {"0": [0.5, 0.5]}, "draft": {"0": [0.5, 0.5], "1": [0.5, 0.5]}})",
       "decode", "missing row target[\"1\"]"},
      {"{not json", "decode", "not valid JSON"},
      {"", "decode --rule sideways", "unknown rule 'sideways'"},
      {"", "decode --verifier magic", "unknown verifier 'magic'"},
      {"", "decode --budget 0", "--budget must be at least 1"},
      {"", "decode --verifier greedy --temperature 1", "greedy needs --temperature 0"},
      {"", "decode --temperature -1", "--temperature"},
      {"", "analyze --tree '{\"tokens\": [0, 1], \"parents\": [1, -1]}'", "parents come before children"},
      {"", "analyze --tree '{\"tokens\": [0, 5], \"parents\": [-1, 0]}'", "tokens[1]"},
      {"", "analyze --tree '{\"tokens\": [0, 0], \"parents\": [-1, -1]}'", "same token"},
      {"", "analyze --tree '{\"tokens\": [0], \"parents\": [-1], \"x\": 1}'", "unknown key \"x\""},
      {"", "decode --runs nope", "--runs"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const std::string model =
        write_file("bad" + std::to_string(i) + ".json", c.model_json.empty() ? good : c.model_json);
    const SimRun r = run_sim(c.args + " --model " + model);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "stderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

}  // namespace
