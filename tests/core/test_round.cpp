// run_round() (round.h): the stages run in the order of docs/design.md#the-round-in-code against
// recording fakes, what the scorer is asked to score and commit, the plain-decoding round, and
// RequestOutput's contract (tokens kept, the end of a request, tokens before the first EOS).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "round.h"
#include "table_decode.h"

namespace rootspec {
namespace {

// A table target that logs each call.
class LoggingScorer : public TableScorer {
 public:
  LoggingScorer(const TableModel& m, std::vector<int32_t> cached, std::vector<std::string>* log)
      : TableScorer(m, std::move(cached)), log_(log) {}
  RowsView root_row(int32_t t, double T) override {
    log_->push_back("root_row " + std::to_string(t));
    return TableScorer::root_row(t, T);
  }
  RowsView plain_row(int32_t t, double T) override {
    log_->push_back("plain_row " + std::to_string(t));
    return TableScorer::root_row(t, T);
  }
  void prepare_tree_pass() override { log_->push_back("prepare_tree_pass"); }
  RowsView tree_rows(const TreePassInput& in, double T) override {
    log_->push_back("tree_rows " + std::to_string(in.tokens.size()));
    inputs.push_back(in);
    return TableScorer::tree_rows(in, T);
  }
  void commit(const std::vector<int32_t>& kept) override {
    log_->push_back("commit " + std::to_string(kept.size()));
    commits.push_back(kept);
    TableScorer::commit(kept);
  }
  std::vector<TreePassInput> inputs;
  std::vector<std::vector<int32_t>> commits;

 private:
  std::vector<std::string>* log_;
};

// A drafter that hands out the table drafter's pool and logs each call.
class LoggingDrafter : public RoundDrafter {
 public:
  LoggingDrafter(const TableModel& m, std::vector<int32_t> committed, std::vector<std::string>* log)
      : model_(m), committed_(std::move(committed)), log_(log) {}
  const Pool& wait_pool(RoundRecord& record) override {
    log_->push_back("wait_pool");
    record.draft_start_ns = 11;
    record.draft_end_ns = 22;
    TableDrafter d(model_, committed_);
    grow_pool(d, PoolShape{3, 3, 2}, pool_);
    return pool_;
  }
  void round_done(const std::vector<int32_t>& tokens, bool) override {
    log_->push_back("round_done " + std::to_string(tokens.size()));
    committed_.insert(committed_.end(), tokens.begin(), tokens.end());
  }

 private:
  const TableModel& model_;
  std::vector<int32_t> committed_;
  std::vector<std::string>* log_;
  Pool pool_;
};

const TableModel& model() {
  static const TableModel m = TableModel::random(5, 2, 7, 2.0, 0.5);
  return m;
}

TEST(RunRound, RootDrawRunsTheStagesInTheDesignsOrder) {
  std::vector<std::string> log;
  const auto& ctx = model().context();
  LoggingScorer target(model(), std::vector<int32_t>(ctx.begin(), ctx.end() - 1), &log);
  LoggingDrafter drafter(model(), ctx, &log);
  RequestOptions o;
  o.rule = Rule::RootDraw;
  o.verifier = Verifier::Greedy;
  o.budget = 4;
  Rng rng(1);
  RoundRecord r;
  int rounds_with_pass = 0;
  int32_t root = ctx.back();
  for (int round = 0; round < 20; ++round) {
    log.clear();
    const RoundOutcome out = run_round(o, root, target, &drafter, rng, &r);
    ASSERT_FALSE(out.emitted.empty());
    std::vector<std::string> want = {"root_row " + std::to_string(root), "wait_pool", "prepare_tree_pass"};
    if (!r.tree_pass_skipped) {
      ++rounds_with_pass;
      want.push_back("tree_rows " + std::to_string(1 + r.tree_nodes));
    }
    want.push_back("round_done " + std::to_string(out.emitted.size()));
    if (!r.tree_pass_skipped) want.push_back("commit " + std::to_string(out.kept_pass_rows.size()));
    EXPECT_EQ(log, want) << "round " << round;
    // The record counts what the round did; the drafter's times come through.
    EXPECT_EQ(r.emitted, static_cast<int>(out.emitted.size()));
    EXPECT_EQ(r.accepted, r.emitted - 1);
    EXPECT_TRUE(r.first_drawn);
    EXPECT_EQ(r.draft_start_ns, 11);
    EXPECT_GT(r.pool_nodes, 0);
    EXPECT_LE(r.root_start_ns, r.root_end_ns);
    EXPECT_LE(r.root_end_ns, r.pool_received_ns);
    if (!r.tree_pass_skipped) {
      // The tree pass scores y (the first emitted token) and the nodes below it; the cache keeps
      // y's row and the accepted path's rows.
      EXPECT_EQ(target.inputs.back().tokens[0], out.emitted[0]);
      EXPECT_EQ(out.kept_pass_rows.front(), 0);
      EXPECT_EQ(static_cast<int>(out.kept_pass_rows.size()), r.accepted);
    }
    root = out.continuation;
    r = RoundRecord{};
  }
  EXPECT_GT(rounds_with_pass, 5);  // the greedy y is mostly in the pool
}

TEST(RunRound, DraftSelectionHasNoRootPassAndScoresTheRootToken) {
  std::vector<std::string> log;
  const auto& ctx = model().context();
  LoggingScorer target(model(), std::vector<int32_t>(ctx.begin(), ctx.end() - 1), &log);
  LoggingDrafter drafter(model(), ctx, &log);
  RequestOptions o;
  o.rule = Rule::Draft;
  o.budget = 3;
  Rng rng(2);
  RoundRecord r;
  const RoundOutcome out = run_round(o, ctx.back(), target, &drafter, rng, &r);
  ASSERT_EQ(log.size(), 5u);
  EXPECT_EQ(log[0], "wait_pool");
  EXPECT_EQ(log[1], "prepare_tree_pass");
  EXPECT_EQ(target.inputs[0].tokens[0], ctx.back());  // the anchor is the root token
  EXPECT_EQ(target.inputs[0].tokens.size(), 4u);      // and B = 3 nodes
  EXPECT_EQ(r.root_start_ns, 0);
  EXPECT_FALSE(r.first_drawn);
  EXPECT_EQ(r.tree_nodes, 3);
  EXPECT_EQ(out.accepted + 1, static_cast<int>(out.emitted.size()));
}

TEST(RunRound, PlainDecodingIsOnePassAndOneDraw) {
  std::vector<std::string> log;
  const auto& ctx = model().context();
  LoggingScorer target(model(), std::vector<int32_t>(ctx.begin(), ctx.end() - 1), &log);
  RequestOptions o;
  o.autoregressive = true;
  Rng rng(3);
  RoundRecord r;
  const RoundOutcome out = run_round(o, ctx.back(), target, nullptr, rng, &r);
  EXPECT_EQ(log, std::vector<std::string>{"plain_row " + std::to_string(ctx.back())});
  ASSERT_EQ(out.emitted.size(), 1u);
  // Greedy: the argmax of the target's row at the context.
  const float* row = model().target_row(model().key_of(ctx));
  EXPECT_EQ(out.emitted[0], argmax(row, model().vocab()));
  EXPECT_EQ(out.continuation, out.emitted[0]);
  EXPECT_EQ(r.emitted, 1);
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.pool_nodes, 0);
  EXPECT_GT(r.root_end_ns, 0);
}

TEST(RequestOutput, KeepsTokensUntilTheRequestEnds) {
  RequestOptions o;
  o.max_new_tokens = 5;
  o.stop_at_eos = true;
  RequestOutput out(o, {9}, 100);
  EXPECT_FALSE(out.would_end({1, 2}));
  EXPECT_EQ(out.take({1, 2}), (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(out.would_end({3, 9}));  // an EOS ends it
  EXPECT_EQ(out.take({3, 9, 4}), (std::vector<int32_t>{3, 9}));
  EXPECT_TRUE(out.finished());
  EXPECT_TRUE(out.stopped_at_eos());
  EXPECT_EQ(out.tokens_to_first_eos(), 3);  // 1, 2, 3: the EOS excluded
  EXPECT_TRUE(out.take({5}).empty());

  o.stop_at_eos = false;  // tokens past an EOS are kept but do not count
  RequestOutput free(o, {9}, 100);
  EXPECT_EQ(free.take({9, 1, 2, 3, 4, 5}), (std::vector<int32_t>{9, 1, 2, 3, 4}));  // max_new_tokens
  EXPECT_FALSE(free.stopped_at_eos());
  EXPECT_EQ(free.tokens_to_first_eos(), 0);

  RequestOutput room(o, {9}, 2);  // the context's room is smaller than max_new_tokens
  EXPECT_TRUE(room.would_end({1, 2}));
  EXPECT_EQ(room.take({1, 2, 3}), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(room.tokens_to_first_eos(), 2);
}

TEST(RequestOptions, DecoderNamesAndChecks) {
  RequestOptions o;
  EXPECT_EQ(decoder_name(o), "root-draw");  // the system's default rule
  EXPECT_TRUE(parse_decoder("ar", &o));
  EXPECT_TRUE(o.autoregressive);
  EXPECT_EQ(decoder_name(o), "ar");
  EXPECT_TRUE(parse_decoder("pearl", &o));
  EXPECT_FALSE(o.autoregressive);
  EXPECT_EQ(o.rule, Rule::Pearl);
  EXPECT_FALSE(parse_decoder("oracle", &o));  // analysis only
  EXPECT_FALSE(parse_decoder("sideways", &o));
  EXPECT_FALSE(check_request_options(o));
  o.verifier = Verifier::Greedy;
  o.temperature = 1.0;
  EXPECT_EQ(check_request_options(o).option, "verifier");
  o.autoregressive = true;  // ar verifies nothing
  EXPECT_FALSE(check_request_options(o));
  o.budget = 0;
  EXPECT_EQ(check_request_options(o).option, "budget");
  o.budget = 1;
  o.temperature = -1;
  EXPECT_EQ(check_request_options(o).option, "temperature");
}

}  // namespace
}  // namespace rootspec
