// The two-process daemon against the one-process reference decoder (rootspec-generate's
// generate()): greedy identity for every rule × budget × verifier, seeded sampling, the
// overlapped root pass, request validation, and memory over many requests. Real processes
// on a random tiny pair (tests/support/pair_fixture.h).
#include <gtest/gtest.h>
#include <cstdint>

#include "pair_fixture.h"

namespace rootspec {
namespace {

using namespace rootspec::testing;

const char* kRules[] = {"auto", "draft", "root", "root-draw", "pearl", "pearl-top1"};
const char* kVerifiers[] = {"greedy", "residual", "predraw", "tev", "rheo"};

TEST(Daemon, GreedyOutputEqualsPlainDecodingForEveryRuleBudgetVerifier) {
  Pair pair;
  Reference ref;
  Client client(pair.client_endpoint);
  int requests = 0;
  for (const auto& prompt : test_prompts()) {
    const auto expected = ref.decode(prompt, "ar", "greedy", 1, 0.0, 0);
    ASSERT_EQ(expected.size(), 24u);
    const Reply ar = client.generate(generate_body(prompt, "ar", "greedy", 1, 0.0));
    ASSERT_TRUE(ar.done) << (ar.error ? ar.error->message : "timeout");
    EXPECT_EQ(ar.done->tokens, expected);
    for (const char* rule : kRules)
      for (int budget : {1, 8, 59})
        for (const char* verifier : kVerifiers) {
          const Reply r = client.generate(generate_body(prompt, rule, verifier, budget, 0.0));
          ASSERT_TRUE(r.done) << rule << " " << verifier << " B" << budget << ": "
                              << (r.error ? r.error->message : "timeout");
          EXPECT_EQ(r.done->tokens, expected) << rule << " " << verifier << " B" << budget;
          EXPECT_EQ(r.tokens, expected) << "streamed tokens, " << rule;
          ++requests;
        }
  }
  EXPECT_EQ(requests, 5 * 6 * 3 * 5);
}

TEST(Daemon, SeededSamplingReproducesAndEqualsTheReference) {
  Pair pair;
  Reference ref;
  Client client(pair.client_endpoint);
  const auto prompts = test_prompts();
  for (const char* rule : {"ar", "draft", "root", "root-draw", "pearl", "pearl-top1"})
    for (const char* verifier : {"residual", "predraw", "tev", "rheo"})
      for (uint64_t seed : {3u, 4u}) {
        const auto& prompt = prompts[seed % prompts.size()];
        const Reply a = client.generate(generate_body(prompt, rule, verifier, 8, 1.0, seed));
        const Reply b = client.generate(generate_body(prompt, rule, verifier, 8, 1.0, seed));
        ASSERT_TRUE(a.done && b.done) << rule << " " << verifier;
        EXPECT_EQ(a.done->tokens, b.done->tokens) << rule << " " << verifier << " seed " << seed;
        EXPECT_EQ(a.done->tokens, ref.decode(prompt, rule, verifier, 8, 1.0, seed))
            << rule << " " << verifier << " seed " << seed;
      }
}

// Draft-ahead (runtime_drafter.h) hands over pools bit for bit equal to the ones the drafter
// would grow on the Commit, so every request decodes as without it: greedy output is plain
// decoding's, seeded sampling the reference's (`pool.draft_ahead` from the config; the random
// pair's guesses mostly miss or give way).
TEST(Daemon, DraftAheadDecodesAsWithout) {
  Pair pair({"pool.draft_ahead=true"});
  Reference ref;
  Client client(pair.client_endpoint);
  for (const auto& prompt : test_prompts()) {
    const auto expected = ref.decode(prompt, "ar", "greedy", 1, 0.0, 0);
    for (const char* rule : {"auto", "draft", "root-draw", "pearl"})
      for (int budget : {1, 8})
        for (const char* verifier : {"greedy", "residual"}) {
          const Reply r = client.generate(generate_body(prompt, rule, verifier, budget, 0.0));
          ASSERT_TRUE(r.done) << rule << " " << verifier << " B" << budget << ": "
                              << (r.error ? r.error->message : "timeout");
          EXPECT_EQ(r.done->tokens, expected) << rule << " " << verifier << " B" << budget;
        }
    for (const char* rule : {"draft", "root-draw", "pearl"})
      for (uint64_t seed : {5u, 6u}) {
        const Reply r = client.generate(generate_body(prompt, rule, "residual", 8, 1.0, seed));
        ASSERT_TRUE(r.done) << rule << ": " << (r.error ? r.error->message : "timeout");
        EXPECT_EQ(r.done->tokens, ref.decode(prompt, rule, "residual", 8, 1.0, seed))
            << rule << " seed " << seed;
      }
  }
}

// A drafter that is the target itself, with a one-chain pool, always guesses the Commit: the
// pools after a request's first are drafted ahead and handed over, and greedy output stays plain
// decoding's. Over shared memory and over ZeroMQ, draft-ahead asked per request. Not every one:
// a Commit that reaches the drafter before it begins drafting ahead (its core shared with the
// target's tree pass, two cores) is served by drafting its pool, as designed; on the AMD EPYC VM
// 1-3 of 40 were so in 2-3 runs of 10.
void expect_guesses_handed_over(const std::string& transport) {
  Pair pair({"drafter.model=" + pair_models().target, "pool.top_k=1", "pool.depth=4", "pool.expand=1",
             "endpoints.pool_transport=" + transport});
  Reference ref;
  Client client(pair.client_endpoint);
  int requests = 0, pools = 0, drafted_ahead = 0;
  for (const auto& prompt : test_prompts()) {
    const auto expected = ref.decode(prompt, "ar", "greedy", 1, 0.0, 0);
    for (const char* rule : {"draft", "root-draw"}) {
      GenerateBody g = generate_body(prompt, rule, "greedy", 8, 0.0);
      g.draft_ahead = 1;
      const Reply r = client.generate(g);
      ASSERT_TRUE(r.done) << rule << ": " << (r.error ? r.error->message : "timeout");
      EXPECT_EQ(r.done->tokens, expected) << rule;
      ++requests;
      for (const RoundRecord& round : r.done->trace) {
        pools += round.pool_nodes > 0;
        drafted_ahead += round.pool_drafted_ahead;
      }
    }
  }
  EXPECT_GT(pools, 2 * requests);
  EXPECT_LE(drafted_ahead, pools - requests) << "a request's first pool was drafted ahead";
  EXPECT_GE(drafted_ahead, 0.8 * (pools - requests))
      << "of " << pools - requests << " pools after a request's first";
}

TEST(Daemon, DraftAheadHandsOverNearlyEveryRightGuessOverSharedMemory) { expect_guesses_handed_over("shm"); }
TEST(Daemon, DraftAheadHandsOverNearlyEveryRightGuessOverZeroMq) { expect_guesses_handed_over("zmq"); }

TEST(Daemon, RheoPoolsFromTheConfigMatchTheReference) {
  Pair pair({"pool.kind=rheo", "pool.rheo_m=1"});
  Reference ref;
  Client client(pair.client_endpoint);
  for (uint64_t seed : {1u, 2u, 3u}) {
    const auto prompt = test_prompts()[seed];
    const Reply r = client.generate(generate_body(prompt, "draft", "rheo", 8, 1.0, seed));
    ASSERT_TRUE(r.done) << (r.error ? r.error->message : "timeout");
    EXPECT_EQ(r.done->tokens, ref.decode(prompt, "draft", "rheo", 8, 1.0, seed, 24, /*rheo_m=*/1));
  }
}

TEST(Daemon, RootPassRunsBetweenTheCommitAndThePoolRead) {
  Pair pair;
  Client client(pair.client_endpoint);
  const Reply r = client.generate(generate_body(test_prompts()[1], "root-draw", "residual", 8, 0.0, 0, 48));
  ASSERT_TRUE(r.done);
  int rounds = 0, overlapped = 0;
  for (const RoundRecord& t : r.done->trace) {
    ASSERT_GT(t.root_start_ns, 0);
    ASSERT_GE(t.root_start_ns, t.commit_sent_ns);  // after the Commit went out
    ASSERT_LE(t.root_end_ns, t.pool_received_ns);  // before the pool was read
    ++rounds;
    // Intervals [root_start, root_end] and [draft_start, draft_end] intersect.
    overlapped += t.root_start_ns < t.draft_end_ns && t.draft_start_ns < t.root_end_ns;
  }
  std::printf("  %d of %d rounds ran the root pass inside the drafting interval\n", overlapped, rounds);
  EXPECT_GT(rounds, 3);
  // Per round above: the root pass starts after the drafter was told to draft and ends before
  // the target reads the pool, i.e. inside the drafter-wait interval; a serial target (root
  // pass after the pool) fails there. Whether the drafter process was on a core at that very
  // moment is up to the scheduler (a loaded 2-core machine can delay it past the short root
  // pass), so the overlap with its own drafting interval is reported, not asserted.
  // draft selection has no root pass.
  const Reply d = client.generate(generate_body(test_prompts()[1], "draft", "residual", 8, 0.0));
  ASSERT_TRUE(d.done);
  for (const RoundRecord& t : d.done->trace) EXPECT_EQ(t.root_start_ns, 0);
  EXPECT_GT(r.done->tokens_per_second, 0);
  EXPECT_GT(r.done->last_commit_ns, r.done->prefill_start_ns);
}

TEST(Daemon, InvalidOptionsGetAnErrorNamingTheOption) {
  Pair pair;
  Client client(pair.client_endpoint);
  struct Case {
    GenerateBody body;
    std::string field;
  };
  std::vector<Case> cases;
  cases.push_back({generate_body({1, 2}, "sideways", "residual", 8, 0.0), "rule"});
  cases.push_back({generate_body({1, 2}, "root", "magic", 8, 0.0), "verifier"});
  cases.push_back({generate_body({1, 2}, "root", "residual", 0, 0.0), "budget"});
  cases.push_back({generate_body({1, 2}, "root", "residual", 500, 0.0), "budget"});
  cases.push_back({generate_body({1, 256}, "root", "residual", 8, 0.0), "prompt_ids[1]"});
  cases.push_back({generate_body(std::vector<int32_t>(300, 5), "root", "residual", 8, 0.0), "prompt_ids"});
  cases.push_back({generate_body({1, 2}, "root", "greedy", 8, 1.0), "verifier"});
  GenerateBody text;
  text.prompt = "hello";  // the random pair has no tokenizer
  cases.push_back({text, "prompt"});
  for (const Case& c : cases) {
    const Reply r = client.generate(c.body, 20);
    ASSERT_TRUE(r.error) << "no error for " << c.field;
    EXPECT_EQ(r.error->field, c.field) << r.error->message;
  }
  // The daemon keeps serving.
  const Reply ok = client.generate(generate_body({1, 2}, "root", "residual", 8, 0.0));
  EXPECT_TRUE(ok.done);
  // `ar` verifies nothing: a greedy default verifier does not reject it at T > 0.
  const Reply ar = client.generate(generate_body({1, 2}, "ar", "greedy", 8, 1.0));
  EXPECT_TRUE(ar.done) << (ar.error ? ar.error->message : "");
}

// Resident set size of a process in kB.
long rss_kb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

TEST(Daemon, MemoryIsFlatOver200Requests) {
#ifdef ROOTSPEC_SANITIZED
  GTEST_SKIP() << "under ASan the RSS holds its quarantine of freed memory; LeakSanitizer checks leaks";
#endif
  Pair pair;
  Client client(pair.client_endpoint);
  long target_20 = 0, drafter_20 = 0;
  const auto prompts = test_prompts();
  for (int i = 1; i <= 200; ++i) {
    const char* rule = kRules[i % 5];
    const Reply r = client.generate(generate_body(prompts[i % prompts.size()], rule, "residual",
                                                  i % 2 ? 8 : 59, i % 3 ? 1.0 : 0.0, i, 16));
    ASSERT_TRUE(r.done) << "request " << i;
    if (i == 20) target_20 = rss_kb(pair.target_pid), drafter_20 = rss_kb(pair.drafter_pid);
  }
  const long target_200 = rss_kb(pair.target_pid), drafter_200 = rss_kb(pair.drafter_pid);
  std::printf("  RSS after 20 / 200 requests: target %ld / %ld kB, drafter %ld / %ld kB\n", target_20,
              target_200, drafter_20, drafter_200);
  EXPECT_LT(target_200, target_20 * 105 / 100);
  EXPECT_LT(drafter_200, drafter_20 * 105 / 100);
}

}  // namespace
}  // namespace rootspec
