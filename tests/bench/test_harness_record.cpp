// rootspec-bench's pure pieces (bench/harness/decode_record.h): the decode record built from a
// Done message (tokens to the first EOS, target-stamped seconds, round trace folding, stage
// totals), rejection of Done messages that cannot be timed, per-decode seeds and grid options.
// No daemon and no timing: the Done messages are made by hand and sent through the codec.
#include <cstdint>
#include <gtest/gtest.h>

#include <set>

#include "../../bench/harness/decode_record.h"
#include "../../bench/harness/pair_launcher.h"

namespace rootspec {
namespace harness {
namespace {

RoundRecord tree_round(int accepted, int nodes, int64_t t0) {
  RoundRecord t;
  t.commit_sent_ns = t0;
  t.root_start_ns = t0 + 1'000'000;
  t.root_end_ns = t0 + 3'000'000;  // 2 ms root pass
  t.draft_start_ns = t0 + 500'000;
  t.draft_end_ns = t0 + 4'500'000;      // 4 ms drafting
  t.pool_received_ns = t0 + 5'000'000;  // 2 ms waiting after the root pass
  t.tree_pass_ns = 7'000'000;
  t.verify_ns = 250'000;
  t.commit_ns = 125'000;
  t.accepted = accepted;
  t.emitted = accepted + 1;
  t.tree_nodes = nodes;
  return t;
}

// Round trip through the wire codec, as the bench receives it.
DoneBody via_codec(const DoneBody& d) {
  Header h;
  h.type = MessageType::Done;
  h.request = 3;
  const std::string bytes = encode(h, d);
  return Message(bytes.data(), bytes.size()).done();
}

DoneBody three_round_done() {
  DoneBody d;
  d.stop_reason = "length";
  d.tokens = {10, 11, 12, 13, 14, 15};
  d.tokens_to_first_eos = 6;
  d.rounds = 3;
  d.ms_prefill = 4;
  d.ms_drafter_wait = 6;
  d.ms_root_pass = 6;
  d.ms_tree_pass = 14;
  d.ms_verify = 0.5;
  d.ms_commit = 0.25;
  d.prefill_start_ns = 1'000'000'000;
  d.last_commit_ns = 1'500'000'000;  // 0.5 s
  d.trace = {tree_round(2, 8, 1'010'000'000), tree_round(0, 8, 1'100'000'000),
             tree_round(1, 5, 1'200'000'000)};
  d.trace[1].tree_pass_skipped = true;
  d.trace[1].tree_nodes = 0;
  return d;
}

TEST(HarnessRecord, BuildsTheRecordFromDone) {
  const DoneBody d = via_codec(three_round_done());
  const GridPoint g{"root-draw", 1.0, 8};
  const DecodeRecord r = build_decode(d, g, "math-03", "math", 42, false);
  EXPECT_EQ(r.prompt_id, "math-03");
  EXPECT_EQ(r.category, "math");
  EXPECT_EQ(r.decoder, "root-draw");
  EXPECT_EQ(r.temperature, 1.0);
  EXPECT_EQ(r.budget, 8);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_FALSE(r.warmup);
  EXPECT_EQ(r.tokens, 6);
  EXPECT_DOUBLE_EQ(r.seconds, 0.5);
  EXPECT_EQ(r.rounds, 3);
  EXPECT_DOUBLE_EQ(r.mean_accepted, 1.0);
  EXPECT_DOUBLE_EQ(r.mean_tree_size, (8.0 + 0.0 + 5.0) / 3.0);  // the skipped pass counts 0
  EXPECT_EQ(r.accepted_hist, (std::vector<int64_t>{1, 1, 1}));
  // The record's stages are the target's totals, not the per-round sums.
  EXPECT_DOUBLE_EQ(r.stage_ms.at("prefill"), 4);
  EXPECT_DOUBLE_EQ(r.stage_ms.at("pool_wait"), 6);
  EXPECT_DOUBLE_EQ(r.stage_ms.at("root_pass"), 6);
  EXPECT_DOUBLE_EQ(r.stage_ms.at("tree_pass"), 14);
  EXPECT_DOUBLE_EQ(r.stage_ms.at("verify"), 0.5);
  EXPECT_DOUBLE_EQ(r.stage_ms.at("commit"), 0.25);
  EXPECT_EQ(r.stage_ms.count("draft"), 0u);
  // Each round's stages from its record, after the codec.
  ASSERT_EQ(d.trace.size(), 3u);
  const auto first = round_stage_ms(d.trace[0]);
  EXPECT_EQ(d.trace[0].accepted, 2);
  EXPECT_EQ(d.trace[0].tree_nodes, 8);
  EXPECT_DOUBLE_EQ(first.at("root_pass"), 2.0);
  EXPECT_DOUBLE_EQ(first.at("draft"), 4.0);
  EXPECT_DOUBLE_EQ(first.at("pool_wait"), 2.0);
  EXPECT_DOUBLE_EQ(first.at("tree_pass"), 7.0);
  EXPECT_DOUBLE_EQ(first.at("verify"), 0.25);
  EXPECT_DOUBLE_EQ(first.at("commit"), 0.125);
  EXPECT_EQ(d.trace[1].tree_nodes, 0);
  EXPECT_EQ(round_stage_ms(d.trace[1]).count("tree_pass"), 0u);
  // The trace line names the decode and the round.
  const std::string line = round_trace_line(r, 2, d.trace[2]);
  EXPECT_NE(line.find("\"round\":2"), std::string::npos) << line;
  EXPECT_NE(line.find("\"decoder\":\"root-draw\""), std::string::npos) << line;
}

TEST(HarnessRecord, AutoregressiveRoundsHaveNoTree) {
  DoneBody d;
  d.stop_reason = "length";
  d.tokens = {5, 6, 7};
  d.tokens_to_first_eos = 3;
  d.rounds = 3;
  d.prefill_start_ns = 100;
  d.last_commit_ns = 100 + 3'000'000;
  for (int i = 0; i < 3; ++i) {
    RoundRecord t;
    t.commit_sent_ns = 100 + i * 1'000'000;
    t.root_start_ns = t.commit_sent_ns + 10;
    t.root_end_ns = t.root_start_ns + 900'000;
    t.emitted = 1;
    d.trace.push_back(t);
  }
  const DecodeRecord r = build_decode(via_codec(d), GridPoint{"ar", 0.0, 0}, "p", "c", 1, true);
  EXPECT_TRUE(r.warmup);
  EXPECT_EQ(r.tokens, 3);
  EXPECT_DOUBLE_EQ(r.seconds, 0.003);
  EXPECT_DOUBLE_EQ(r.mean_tree_size, 0.0);
  EXPECT_EQ(r.accepted_hist, (std::vector<int64_t>{3}));
  const auto stages = round_stage_ms(d.trace[0]);
  EXPECT_DOUBLE_EQ(stages.at("root_pass"), 0.9);
  EXPECT_EQ(stages.count("pool_wait"), 0u);  // no pool
  EXPECT_EQ(stages.count("tree_pass"), 0u);
}

TEST(HarnessRecord, CountsTheTargetsTokensBeforeTheFirstEos) {
  DoneBody d;
  d.tokens = {7, 8, 2};  // EOS = 2, decode stopped on it: the target counts 2
  d.tokens_to_first_eos = 2;
  d.stop_reason = "eos";
  EXPECT_EQ(counted_tokens(d), 2);
  d.tokens = {2};  // EOS first: zero tokens
  d.tokens_to_first_eos = 0;
  EXPECT_EQ(counted_tokens(d), 0);
  d.tokens_to_first_eos = 2;  // more than were sent
  EXPECT_THROW(counted_tokens(d), BadDone);
  // The one definition the target uses (request.h): tokens after the EOS do not count.
  EXPECT_EQ(tokens_to_first_eos({7, 8, 2}, {2}), 2);
  EXPECT_EQ(tokens_to_first_eos({7, 2, 9, 9}, {2}), 1);
  EXPECT_EQ(tokens_to_first_eos({7, 8, 9}, {2}), 3);
}

TEST(HarnessRecord, RejectsUntimeableDone) {
  const GridPoint g{"draft", 0.0, 8};
  DoneBody d = three_round_done();
  d.last_commit_ns = d.prefill_start_ns;
  EXPECT_THROW(build_decode(d, g, "p", "c", 0, false), BadDone);
  d = three_round_done();
  d.rounds = 0;
  EXPECT_THROW(build_decode(d, g, "p", "c", 0, false), BadDone);
  d = three_round_done();
  d.last_commit_ns = 0;
  EXPECT_THROW(build_decode(d, g, "p", "c", 0, false), BadDone);
  d = three_round_done();
  d.rounds = 4;  // trace and count disagree
  EXPECT_THROW(build_decode(d, g, "p", "c", 0, false), BadDone);
  d = three_round_done();
  d.tokens_to_first_eos = 7;
  EXPECT_THROW(build_decode(d, g, "p", "c", 0, false), BadDone);
  // Without a trace the record still has its rounds and time.
  d = three_round_done();
  d.trace.clear();
  const DecodeRecord r = build_decode(d, g, "p", "c", 0, false);
  EXPECT_EQ(r.rounds, 3);
  EXPECT_EQ(r.mean_accepted, 0.0);
}

TEST(HarnessSeed, DeterministicAndDistinctPerCombination) {
  EXPECT_EQ(decode_seed(7, 3, "root", 1.0, 59), decode_seed(7, 3, "root", 1.0, 59));
  EXPECT_EQ(decode_seed(7, 3, "root", 0.0, 8), decode_seed(7, 3, "root", -0.0, 8));
  std::set<uint64_t> seen;
  int n = 0;
  for (uint64_t run : {0ull, 1ull})
    for (int p = 0; p < 77; ++p)
      for (const char* dec : {"ar", "draft", "pearl", "root-draw", "root"})
        for (double t : {0.0, 1.0})
          for (int b : {0, 8, 59}) {
            seen.insert(decode_seed(run, p, dec, t, b));
            ++n;
          }
  EXPECT_EQ(static_cast<int>(seen.size()), n);
  // Pinned: a change of the derivation would change the seed of every recorded decode.
  EXPECT_EQ(decode_seed(0, 0, "ar", 0.0, 0), 14951082580140571731ull);
  EXPECT_EQ(decode_seed(0, 1, "ar", 0.0, 0), 10269609956312550910ull);
  EXPECT_NE(decode_seed(0, 0, "ar", 0.0, 0), decode_seed(0, 1, "ar", 0.0, 0));
}

TEST(HarnessSeed, PassZeroKeepsTheOnePassSeedAndLaterPassesGetTheirOwn) {
  EXPECT_EQ(decode_seed(5, 2, "auto", 1.0, 8, 0), decode_seed(5, 2, "auto", 1.0, 8));
  std::set<uint64_t> seen;
  for (int pass = 0; pass < 8; ++pass) seen.insert(decode_seed(5, 2, "auto", 1.0, 8, pass));
  EXPECT_EQ(seen.size(), 8u);
}

TEST(HarnessOptions, ParsesGridLists) {
  EXPECT_EQ(split_list("ar, draft ,root-draw", "x"), (std::vector<std::string>{"ar", "draft", "root-draw"}));
  EXPECT_THROW(split_list("ar,,root", "x"), std::invalid_argument);
  EXPECT_THROW(split_list("", "x"), std::invalid_argument);
  EXPECT_EQ(parse_temperatures("0,1,0.7"), (std::vector<double>{0, 1, 0.7}));
  EXPECT_THROW(parse_temperatures("0,-1"), std::invalid_argument);
  EXPECT_THROW(parse_temperatures("0,abc"), std::invalid_argument);
  EXPECT_THROW(parse_temperatures("1x"), std::invalid_argument);
  EXPECT_EQ(parse_budgets("8,59"), (std::vector<int>{8, 59}));
  EXPECT_THROW(parse_budgets("0"), std::invalid_argument);
  EXPECT_THROW(parse_budgets("8.5"), std::invalid_argument);
  // rootspec-study's lists (bench/lib/option_lists.h): the pool shape's numbers are ≥ 1.
  EXPECT_EQ(parse_ints("2,7,1", "--pool-shape", 1, 100), (std::vector<int>{2, 7, 1}));
  EXPECT_THROW(parse_ints("2,0,1", "--pool-shape", 1, 100), std::invalid_argument);
  EXPECT_THROW(parse_ints("2,7,101", "--pool-shape", 1, 100), std::invalid_argument);
  // The default grid of the bench: ar once per T, then every tree decoder per B.
  const auto g = expand_grid(split_list("ar,draft,pearl,root-draw,root", "d"), parse_temperatures("0,1"),
                             parse_budgets("8,59"));
  EXPECT_EQ(g.size(), 18u);
}

// launch/rootspec up's line, as it prints it now (with the HTTP gateway's URL after a ';').
TEST(HarnessLaunch, ReadsTheEndpointFromTheLaunchersLine) {
  EXPECT_EQ(endpoint_in_launcher_output("rootspec: the pair is up; clients connect to tcp://127.0.0.1:5600; "
                                        "OpenAI-compatible HTTP at http://127.0.0.1:8000/v1\n"),
            "tcp://127.0.0.1:5600");
  EXPECT_EQ(endpoint_in_launcher_output("rootspec: the pair is up; clients connect to ipc:///tmp/c.sock\n"),
            "ipc:///tmp/c.sock");
  EXPECT_EQ(endpoint_in_launcher_output("rootspec: the pair is up; clients connect to tcp://127.0"), "");
  EXPECT_EQ(endpoint_in_launcher_output("rootspec: starting"), "");
}

}  // namespace
}  // namespace harness
}  // namespace rootspec
