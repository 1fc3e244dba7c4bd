// The pair serving many requests at once ([target] max_batch > 1: one root pass and one tree pass
// per round over every member, a drafter session per request), with real processes on the
// random tiny pair (tests/support/pair_fixture.h): every request of a batch decodes token for
// token what the one-process reference decodes for it alone (greedy and seeded sampling, every
// rule), members join and leave (queue, cancel, deadline) without disturbing the others, and a
// drafter that dies or falls silent mid-batch leaves every member finishing with ar, exactly.
#include <gtest/gtest.h>
#include <cstdint>

#include <map>

#include "pair_fixture.h"

namespace rootspec {
namespace {

using namespace rootspec::testing;
using Clock = std::chrono::steady_clock;

// Every reply of the requests `ids` sent by `client`, until each has its Done or Error.
std::map<uint64_t, Reply> collect_all(Client& client, const std::vector<uint64_t>& ids,
                                      double seconds = 120) {
  std::map<uint64_t, Reply> replies;
  for (uint64_t id : ids) replies[id];
  size_t ended = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (ended < ids.size() && Clock::now() < end) {
    auto m = client.receive(0.05);
    if (!m) continue;
    const Message msg(m->data(), m->size());
    auto it = replies.find(msg.header().request);
    if (it == replies.end()) continue;
    Reply& r = it->second;
    switch (msg.header().type) {
      case MessageType::Delta: {
        const DeltaBody d = msg.delta();
        r.tokens.insert(r.tokens.end(), d.tokens.begin(), d.tokens.end());
        ++r.deltas;
        if (!d.notice.empty()) r.notices.push_back(d.notice);
        break;
      }
      case MessageType::Done:
        r.done = msg.done();
        ++ended;
        break;
      case MessageType::Error:
        r.error = msg.error();
        ++ended;
        break;
      default:
        break;
    }
  }
  for (auto& [id, r] : replies) r.timed_out = !r.done && !r.error;
  return replies;
}

// Reads the Deltas of every request into `early` until request `id` has streamed one; false
// when 20 s pass without a message.
bool stream_until_first_delta(Client& client, uint64_t id, std::map<uint64_t, Reply>& early) {
  while (early[id].deltas == 0) {
    auto m = client.receive(20);
    if (!m) return false;
    const Message msg(m->data(), m->size());
    if (msg.header().type != MessageType::Delta) continue;
    const DeltaBody d = msg.delta();
    Reply& r = early[msg.header().request];
    r.tokens.insert(r.tokens.end(), d.tokens.begin(), d.tokens.end());
    ++r.deltas;
  }
  return true;
}

struct Case {
  std::vector<int32_t> prompt;
  const char* rule;
  const char* verifier;
  int budget;
  double temperature;
  uint64_t seed;
  int max_new_tokens;
};

// Twelve requests into a batch of four: they queue, join as members leave, and decode beside
// requests of other rules, verifiers, temperatures, budgets and lengths. `auto` is compared at
// T = 0 only: its choices follow measured times (the batch's: decoding_policy.h), so a
// sampled `auto` request is exact in law (tests/core) but not token for token the reference's.
TEST(DaemonBatch, EveryRequestOfABatchDecodesWhatTheReferenceDecodesForItAlone) {
  Pair pair({"target.max_batch=4"});
  Reference ref;
  Client client(pair.client_endpoint);
  const auto prompts = test_prompts();
  const std::vector<Case> cases = {
      {prompts[0], "root-draw", "residual", 8, 1.0, 11, 40},
      {prompts[1], "draft", "greedy", 8, 0.0, 0, 24},
      {prompts[2], "ar", "residual", 1, 1.0, 12, 30},
      {prompts[3], "pearl", "tev", 4, 0.7, 13, 16},
      {prompts[4], "root-draw", "predraw", 8, 1.0, 14, 36},
      {prompts[0], "root", "tev", 3, 1.0, 15, 20},
      {prompts[1], "root-draw", "greedy", 59, 0.0, 0, 28},
      {prompts[2], "draft", "rheo", 8, 1.0, 16, 24},
      {prompts[3], "pearl-top1", "residual", 5, 1.0, 17, 12},
      {prompts[4], "ar", "greedy", 1, 0.0, 0, 24},
      {prompts[0], "auto", "greedy", 8, 0.0, 0, 32},
      {prompts[1], "draft", "predraw", 2, 0.7, 18, 24},
  };
  std::vector<uint64_t> ids;
  for (const Case& c : cases)
    ids.push_back(client.start(
        generate_body(c.prompt, c.rule, c.verifier, c.budget, c.temperature, c.seed, c.max_new_tokens)));
  const auto replies = collect_all(client, ids);
  int overlapping = 0;  // pairs of requests whose decoding overlapped in time
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const Reply& r = replies.at(ids[k]);
    ASSERT_TRUE(r.done) << "request " << k << ": " << (r.error ? r.error->message : "timeout")
                        << read_file(pair.target_log());
    const auto expected =
        ref.decode(c.prompt, c.rule, c.verifier, c.budget, c.temperature, c.seed, c.max_new_tokens);
    EXPECT_EQ(r.done->tokens, expected) << "request " << k << " (" << c.rule << " " << c.verifier << ")";
    EXPECT_EQ(r.tokens, expected) << "streamed tokens, request " << k;
    EXPECT_TRUE(r.done->degraded.empty()) << r.done->degraded;
    for (size_t j = 0; j < k; ++j) {
      const DoneBody& a = *r.done;
      const DoneBody& b = *replies.at(ids[j]).done;
      overlapping += a.prefill_start_ns < b.last_commit_ns && b.prefill_start_ns < a.last_commit_ns;
    }
  }
  std::printf("  %d pairs of the 12 requests decoded at overlapping times\n", overlapping);
  EXPECT_GE(overlapping, 6) << "the requests were not decoded together";
}

// Four long greedy requests; one is cancelled after its first tokens and one has a deadline that
// passes mid-way: both end so, and the others emit plain decoding's chain, as alone.
TEST(DaemonBatch, ACancelledAndALateMemberLeaveAndTheOthersDecodeUndisturbed) {
  Pair pair({"target.max_batch=4"});
  Reference ref;
  Client client(pair.client_endpoint);
  const auto prompt = test_prompts()[1];
  const auto chain = ref.decode(prompt, "ar", "greedy", 1, 0.0, 0, 200);
  const uint64_t a = client.start(generate_body(prompt, "root-draw", "greedy", 8, 0.0, 0, 200));
  const uint64_t cancelled = client.start(generate_body(prompt, "draft", "greedy", 8, 0.0, 0, 200));
  GenerateBody late_body = generate_body(prompt, "pearl", "greedy", 8, 0.0, 0, 200);
  late_body.deadline_ms = 20;  // the four decode 200 tokens each in ~0.1 s or more
  const uint64_t late = client.start(late_body);
  const uint64_t b = client.start(generate_body(prompt, "ar", "greedy", 1, 0.0, 0, 200));
  // Cancel the second once it streamed something.
  std::map<uint64_t, Reply> early;
  ASSERT_TRUE(stream_until_first_delta(client, cancelled, early)) << "no Delta of the request to cancel";
  Header h;
  h.type = MessageType::Cancel;
  h.request = cancelled;
  client.send(encode_empty(h));
  auto rest = collect_all(client, {a, cancelled, late, b});
  for (uint64_t id : {a, b}) {
    const Reply& r = rest.at(id);
    ASSERT_TRUE(r.done) << (r.error ? r.error->message : "timeout");
    EXPECT_EQ(r.done->tokens, chain) << "request " << id;
    std::vector<int32_t> streamed = early[id].tokens;
    streamed.insert(streamed.end(), r.tokens.begin(), r.tokens.end());
    EXPECT_EQ(streamed, chain) << "streamed tokens of request " << id;
  }
  ASSERT_TRUE(rest.at(cancelled).done);
  EXPECT_EQ(rest.at(cancelled).done->stop_reason, "cancelled");
  EXPECT_LT(rest.at(cancelled).done->tokens.size(), 200u);
  const std::vector<int32_t> cancelled_prefix(chain.begin(),
                                              chain.begin() + rest.at(cancelled).done->tokens.size());
  EXPECT_EQ(rest.at(cancelled).done->tokens, cancelled_prefix);
  ASSERT_TRUE(rest.at(late).done) << (rest.at(late).error ? rest.at(late).error->message : "timeout");
  EXPECT_EQ(rest.at(late).done->stop_reason, "deadline");
  const auto& late_tokens = rest.at(late).done->tokens;
  EXPECT_EQ(late_tokens, std::vector<int32_t>(chain.begin(), chain.begin() + late_tokens.size()));
  // The server goes on: a request after them is served alone, as before.
  const Reply after = client.generate(generate_body(prompt, "root-draw", "greedy", 8, 0.0, 0, 200));
  ASSERT_TRUE(after.done);
  EXPECT_EQ(after.done->tokens, chain);
}

// The drafter dies (SIGKILL) or stops answering (SIGSTOP past peer_timeout_s) while four
// speculating requests decode together: every one finishes with ar from its committed context,
// exact (plain decoding's greedy chain), and says so; a silent drafter costs one peer timeout for
// the whole batch, not one per member.
void drafter_fails_mid_batch(bool stop_only) {
  Pair pair({"target.max_batch=4", "limits.peer_timeout_s=2"});
  Reference ref;
  Client client(pair.client_endpoint);
  const auto prompt = test_prompts()[1];
  const auto chain = ref.decode(prompt, "ar", "greedy", 1, 0.0, 0, 200);
  std::vector<uint64_t> ids;
  for (const char* rule : {"root-draw", "draft", "pearl", "root"})
    ids.push_back(client.start(generate_body(prompt, rule, "greedy", 8, 0.0, 0, 200)));
  std::map<uint64_t, Reply> early;
  ASSERT_TRUE(stream_until_first_delta(client, ids[0], early)) << "no first Delta";
  kill(pair.drafter_pid, SIGSTOP);
  const auto stopped = Clock::now();
  if (!stop_only) {
    kill(pair.drafter_pid, SIGKILL);
    waitpid(pair.drafter_pid, nullptr, 0);
  }
  const auto rest = collect_all(client, ids, 60);
  const double seconds = std::chrono::duration<double>(Clock::now() - stopped).count();
  for (uint64_t id : ids) {
    const Reply& r = rest.at(id);
    ASSERT_TRUE(r.done) << (r.error ? r.error->message : "timeout") << read_file(pair.target_log());
    EXPECT_EQ(r.done->tokens, chain) << "request " << id;
    EXPECT_FALSE(r.done->degraded.empty()) << "request " << id << " did not say it went on with ar";
    EXPECT_LT(r.done->degraded_at, 200);
  }
  if (stop_only) {
    EXPECT_LT(seconds, 4.0 + 2.0) << "the silent drafter cost more than one peer timeout";
  }
  const Reply after = client.generate(generate_body(prompt, "root-draw", "greedy", 8, 0.0, 0, 200));
  ASSERT_TRUE(after.done);
  EXPECT_EQ(after.done->tokens, chain);
}

TEST(DaemonBatch, KilledDrafterMidBatchEveryMemberFinishesWithArExactly) { drafter_fails_mid_batch(false); }
TEST(DaemonBatch, SilentDrafterMidBatchCostsOnePeerTimeoutAndEveryMemberFinishesExactly) {
  drafter_fails_mid_batch(true);
}

// A batched tree pass holds whole trees of at most 64 rows: a budget past 63 is refused with an
// Error naming it (not a failure of the whole batch), and 63 decodes exactly.
TEST(DaemonBatch, BudgetsPastOneBatchedTreePassAreRefusedAndTheLargestDecodesExactly) {
  Pair pair({"target.max_batch=4"});
  Reference ref;
  Client client(pair.client_endpoint);
  const auto prompt = test_prompts()[0];
  const Reply refused = client.generate(generate_body(prompt, "root-draw", "greedy", 64, 0.0));
  ASSERT_TRUE(refused.error) << "a budget of 64 was taken";
  EXPECT_EQ(refused.error->field, "budget");
  const Reply largest = client.generate(generate_body(prompt, "root-draw", "greedy", 63, 0.0));
  ASSERT_TRUE(largest.done) << (largest.error ? largest.error->message : "timeout");
  EXPECT_EQ(largest.done->tokens, ref.decode(prompt, "ar", "greedy", 1, 0.0, 0));
}

// At max_batch 1 the one sequence's tree may pass one pass (target_model.h): a budget of 80 is
// taken where the config allows it, and decodes exactly.
TEST(DaemonBatch, BatchOneTakesBudgetsPastOneTreePassAndDecodesThemExactly) {
  Pair pair({"decoding.budget=80"});
  Reference ref;
  Client client(pair.client_endpoint);
  for (const auto& prompt : {test_prompts()[0], test_prompts()[3]}) {
    const Reply r = client.generate(generate_body(prompt, "root-draw", "greedy", 80, 0.0));
    ASSERT_TRUE(r.done) << (r.error ? r.error->message : "timeout");
    EXPECT_EQ(r.done->tokens, ref.decode(prompt, "ar", "greedy", 1, 0.0, 0));
  }
}

}  // namespace
}  // namespace rootspec
