// The daemon pair on CUDA devices, real processes: both on cuda:0 (the pool by shared memory) and
// on cuda:0 and cuda:1 with the pool over NCCL, against the one-process reference decoder on the
// same devices. Where CUDA executes on the CPU (kernels/cuda_on_cpu: every test here sees two
// devices) they run in every CI run; on a GPU machine the device check runs them too. A request
// here costs about a second on the CPU execution, so each test runs every rule and budget once
// with verifiers taken in turn; tests/daemon/test_pipeline.cpp's full matrix runs on a GPU
// (ROOTSPEC_TEST_DEVICE=cuda:0, bench/gpu/device-check.sh).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "pair_fixture.h"
#if ROOTSPEC_WITH_CUDA
#include "cuda_backend.h"
#endif

namespace rootspec {
namespace {

using namespace rootspec::testing;

std::string no_gpus_reason(int needed) {
#if ROOTSPEC_WITH_CUDA
  std::string why;
  if (!cuda_device_available(&why)) return why;
  const int n = cuda_device_count();
  return n >= needed ? "" : "this machine has " + std::to_string(n) + " CUDA device(s), the test needs " +
                                std::to_string(needed);
#else
  (void)needed;
  return "this build has no Cuda backend (ROOTSPEC_WITH_CUDA=OFF)";
#endif
}

// The NCCL tests need the NCCL transport in the build (ROOTSPEC_WITH_NCCL).
std::string no_nccl_reason() {
#ifdef ROOTSPEC_WITH_NCCL
  return "";
#else
  return "this build has no NCCL pool transport (ROOTSPEC_WITH_NCCL=OFF)";
#endif
}

#define SKIP_WITHOUT_GPUS(n)                                                          \
  do {                                                                                \
    if (const std::string why = no_gpus_reason(n); !why.empty()) GTEST_SKIP() << why; \
  } while (0)
#define SKIP_WITHOUT_NCCL()                                                          \
  do {                                                                               \
    if (const std::string why = no_nccl_reason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

const char* kRules[] = {"auto", "draft", "root", "root-draw", "pearl", "pearl-top1"};
const char* kVerifiers[] = {"greedy", "residual", "predraw", "tev", "rheo"};

// Every rule × budget {1, 8, 59}, the verifiers in turn, on the first test prompt: the pair's
// greedy output equals plain decoding (the reference's `ar`) token for token.
void expect_greedy_identity(Pair& pair, Reference& ref, int* requests) {
  Client client(pair.client_endpoint);
  const auto prompt = test_prompts()[1];
  const auto expected = ref.decode(prompt, "ar", "greedy", 1, 0.0, 0);
  ASSERT_EQ(expected.size(), 24u);
  const Reply ar = client.generate(generate_body(prompt, "ar", "greedy", 1, 0.0), 120);
  ASSERT_TRUE(ar.done) << (ar.error ? ar.error->message : "timeout");
  EXPECT_EQ(ar.done->tokens, expected);
  int turn = 0;
  for (const char* rule : kRules)
    for (const int budget : {1, 8, 59}) {
      const char* verifier = kVerifiers[turn++ % 5];
      const Reply r = client.generate(generate_body(prompt, rule, verifier, budget, 0.0), 120);
      ASSERT_TRUE(r.done) << rule << " " << verifier << " B" << budget << ": "
                          << (r.error ? r.error->message : "timeout");
      EXPECT_EQ(r.done->tokens, expected) << rule << " " << verifier << " B" << budget;
      EXPECT_TRUE(r.done->degraded.empty()) << rule << ": " << r.done->degraded;
      ++*requests;
    }
}

TEST(GpuPair, GreedyOutputOnOneGpuEqualsPlainDecodingForEveryRuleAndBudget) {
  SKIP_WITHOUT_GPUS(1);
  Pair pair({"target.device=cuda:0", "drafter.device=cuda:0"});
  Reference ref("cuda:0");
  int requests = 0;
  expect_greedy_identity(pair, ref, &requests);
  EXPECT_EQ(requests, 6 * 3);
  EXPECT_NE(read_file(pair.target_log()).find("messages travel over shared memory"), std::string::npos)
      << read_file(pair.target_log());
}

TEST(GpuPair, GreedyOutputOnTwoGpusWithPoolsOverNcclEqualsPlainDecoding) {
  SKIP_WITHOUT_GPUS(2);
  SKIP_WITHOUT_NCCL();
  Pair pair({"target.device=cuda:0", "drafter.device=cuda:1", "endpoints.pool_transport=nccl"});
  Reference ref("cuda:0", "cuda:1");
  int requests = 0;
  expect_greedy_identity(pair, ref, &requests);
  EXPECT_EQ(requests, 6 * 3);
  EXPECT_NE(read_file(pair.target_log()).find("messages travel over NCCL"), std::string::npos)
      << read_file(pair.target_log());
}

// On two GPUs the pool still travels by shared memory unless NCCL is asked for: a pool is host
// data at both ends, so on one host a memcpy beats device copies and NCCL
// (docs/design.md#processes-and-messages).
TEST(GpuPair, TwoGpusOnOneHostSendPoolsBySharedMemoryUnlessNcclIsAskedFor) {
  SKIP_WITHOUT_GPUS(2);
  Pair pair({"target.device=cuda:0", "drafter.device=cuda:1"});
  EXPECT_NE(read_file(pair.target_log()).find("messages travel over shared memory"), std::string::npos)
      << read_file(pair.target_log());
}

// A request that ends at its deadline ends after a round that sent its Commit: the drafter then
// sends that round's pool over NCCL, and a send completes only when the target receives it. The
// target must take it (and drop it) although no round reads it, or the drafter blocks past
// peer_timeout_s, gives up on the communicator, and the link breaks under later requests.
TEST(GpuPair, ThePoolOfARequestPastItsDeadlineOverNcclNeitherBlocksTheDrafterNorBreaksLaterRequests) {
  SKIP_WITHOUT_GPUS(2);
  SKIP_WITHOUT_NCCL();
  Pair pair({"target.device=cuda:0", "drafter.device=cuda:1", "endpoints.pool_transport=nccl",
             "limits.peer_timeout_s=3"});
  Reference ref("cuda:0", "cuda:1");
  Client client(pair.client_endpoint);
  const auto prompt = test_prompts()[3];
  GenerateBody first = generate_body(prompt, "root-draw", "greedy", 8, 0.0, 0, 200);
  first.deadline_ms = 1500;  // 200 tokens take far longer here
  const Reply ended = client.generate(first, 60);
  ASSERT_TRUE(ended.done) << (ended.error ? ended.error->message : "timeout");
  ASSERT_EQ(ended.done->stop_reason, "deadline");
  // Past the drafter's timeout: a pool nobody took would have broken the link by now.
  std::this_thread::sleep_for(std::chrono::seconds(4));
  const auto expected = ref.decode(prompt, "ar", "greedy", 1, 0.0, 0);
  for (int i = 0; i < 2; ++i) {
    const Reply next = client.generate(generate_body(prompt, "root-draw", "greedy", 8, 0.0), 120);
    ASSERT_TRUE(next.done) << (next.error ? next.error->message : "timeout");
    EXPECT_EQ(next.done->tokens, expected);
    EXPECT_TRUE(next.done->degraded.empty())
        << "request " << i << " ran with ar: " << next.done->degraded << "\n"
        << read_file(pair.target_log()) << read_file(pair.drafter_log());
  }
}

}  // namespace
}  // namespace rootspec
