// rootspec-study's recorder and consistency check on a tiny random pair (tools/study): the
// recorded rows are the target's rows at each pool address, a run resumes where it stopped,
// and one online round of the decoder at every recorded context accepts what the record
// predicts (exactly at T = 0).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model_fixtures.h"
#include "rows.h"
#include "study_record.h"
#include "study_values.h"

namespace rootspec {
namespace {

using testing::TempDir;

class StudyRecord : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = testing::make_model(dir_, "target", testing::tiny_config(ModelArch::Llama, 3), 11);
    write_truncated_model(target_, dir_.sub("drafter"), 1);
    std::ofstream(dir_.path() + "/prompts.jsonl")
        << "{\"id\": \"a\", \"category\": \"t\", \"prompt_ids\": [5, 17, 42]}\n"
           "{\"id\": \"b\", \"category\": \"t\", \"prompt_ids\": [9, 1, 3, 77, 20]}\n";
    o_.target_dir = target_;
    o_.drafter_dir = dir_.sub("drafter");
    o_.prompts_path = dir_.path() + "/prompts.jsonl";
    o_.out_dir = dir_.sub("study");
    o_.contexts = 4;
    o_.shape.top_k = 3, o_.shape.depth = 3, o_.shape.expand = 2;
    o_.new_tokens = 12;
    o_.stride = 4;
    o_.quiet = true;
  }
  TempDir dir_{"study_record"};
  std::string target_;
  RecordOptions o_;
};

TEST_F(StudyRecord, EdgeProbabilitiesAreTheTargetsRowsAtEachPoolAddress) {
  record_study(o_);
  const std::vector<StudyContext> all = load_study(o_.out_dir);
  ASSERT_EQ(all.size(), 8u);  // 4 per temperature
  RuntimeOptions ro;
  ro.max_context = 64;
  ModelRuntime target(target_, ro);
  for (const StudyContext& c : all) {
    ASSERT_EQ(c.pool.size(), o_.shape.expected_size());
    std::vector<float> row(c.vocab());
    // Every third node: a fresh prefill of C and the node's parent path, the row tempered.
    for (int u = 0; u < c.pool.size(); u += 3) {
      std::vector<int32_t> address = c.context;
      std::vector<int32_t> path;
      for (int a = c.pool.parent[u]; a != kRoot; a = c.pool.parent[a])
        path.insert(path.begin(), c.pool.token[a]);
      address.insert(address.end(), path.begin(), path.end());
      target.truncate(0);
      const RowsView logits = target.prefill(address);
      probs_from_logits(logits.row(0), c.vocab(), c.temperature, row.data());
      EXPECT_NEAR(c.edge_prob[u], row[c.pool.token[u]], 1e-4) << "T " << c.temperature << " node " << u;
    }
  }
}

TEST_F(StudyRecord, AnInterruptedRecordResumesAndExtends) {
  record_study(o_);
  const std::string t0 = o_.out_dir + "/contexts-T0.jsonl";
  std::ifstream in(t0);
  const std::string before((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(t0, std::ios::app) << "{\"temperature\": 0, \"prom";  // a write cut short
  o_.contexts = 6;
  record_study(o_);
  std::ifstream again(t0);
  const std::string after((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after.compare(0, before.size(), before), 0);
  EXPECT_EQ(load_study(o_.out_dir).size(), 12u);
  o_.stride = 5;  // another walk into the same folder
  EXPECT_THROW(record_study(o_), std::runtime_error);
}

TEST_F(StudyRecord, OnlineRoundsAcceptWhatTheRecordPredicts) {
  record_study(o_);
  CheckOptions c;
  c.dir = o_.out_dir;
  c.rules = {Rule::Draft, Rule::Root, Rule::RootDraw, Rule::Pearl, Rule::PearlTop1};
  c.budgets = {2, 6};
  c.seeds = 300;
  c.quiet = true;
  const nlohmann::json check = check_study(c);
  ASSERT_EQ(check.at("results").size(), 2u * 5u * 2u);
  for (const nlohmann::json& r : check.at("results")) {
    SCOPED_TRACE(r.dump());
    if (r.at("temperature").get<double>() == 0) {
      EXPECT_EQ(r.at("contexts_differing").get<int>(), 0);  // deterministic: exact per context
    } else {
      // Seeded, so the outcome is fixed; a wrong expectation moves the mean far outside.
      const double se = (r.at("diff_hi").get<double>() - r.at("diff_lo").get<double>()) / 3.92;
      EXPECT_LE(std::abs(r.at("diff").get<double>()), 4 * se + 1e-9);
    }
  }
}

}  // namespace
}  // namespace rootspec
