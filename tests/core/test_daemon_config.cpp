// DaemonConfig: defaults, the CPU keys of [target] and the transports, and errors that name
// the key (hand-written overrides; the shipped configs load and validate).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "daemon_config.h"
#include "source_tree.h"

namespace rootspec {
namespace {

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    DaemonConfig::load("", overrides).validate();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(DaemonConfig, DefaultsKeepEachProcessOnItsOwnThreads) {
  const DaemonConfig c = DaemonConfig::load("", {});
  EXPECT_EQ(c.target.threads, 1);
  EXPECT_EQ(c.target.idle_drafter_threads, 1);
  EXPECT_TRUE(c.target.ar_uses_drafter_core);
  EXPECT_EQ(c.pool_transport, "auto");
  EXPECT_FALSE(c.draft_ahead) << "it takes the core a CPU target's tree pass shares";
  EXPECT_NO_THROW(c.validate());
}

TEST(DaemonConfig, AdaptivePoolDepthIsOnByDefaultAndAPoolKey) {
  EXPECT_TRUE(DaemonConfig::load("", {}).pool.adaptive_depth);
  EXPECT_FALSE(DaemonConfig::load("", {"pool.adaptive_depth=false"}).pool.adaptive_depth);
  EXPECT_NE(error_of({"pool.adaptive_depth=2"}).find("true or false"), std::string::npos);
}

TEST(DaemonConfig, DraftAheadIsAPoolKey) {
  EXPECT_TRUE(DaemonConfig::load("", {"pool.draft_ahead=true"}).draft_ahead);
  EXPECT_NE(error_of({"pool.draft_ahead=1"}).find("true or false"), std::string::npos)
      << error_of({"pool.draft_ahead=1"});
  EXPECT_NE(error_of({"decoding.draft_ahead=true"}).find("unknown key"), std::string::npos);
}

TEST(DaemonConfig, AutoMayChooseDraftAloneUnlessAutoDraftIsFalse) {
  EXPECT_TRUE(DaemonConfig::load("", {}).auto_draft);
  EXPECT_FALSE(DaemonConfig::load("", {"decoding.auto_draft=false"}).auto_draft);
  EXPECT_NE(error_of({"decoding.auto_draft=no"}).find("true or false"), std::string::npos);
}

TEST(DaemonConfig, LogprobsModeIsADecodingKeyDefaultingToProcessed) {
  EXPECT_FALSE(DaemonConfig::load("", {}).decoding.logprobs_raw);
  EXPECT_TRUE(DaemonConfig::load("", {"decoding.logprobs_mode=\"raw\""}).decoding.logprobs_raw);
  EXPECT_FALSE(DaemonConfig::load("", {"decoding.logprobs_mode=processed"}).decoding.logprobs_raw);
  EXPECT_NE(error_of({"decoding.logprobs_mode=cooked"}).find("decoding.logprobs_mode: must be"),
            std::string::npos)
      << error_of({"decoding.logprobs_mode=cooked"});
}

TEST(DaemonConfig, CpuKeysAndTransports) {
  const DaemonConfig c =
      DaemonConfig::load("", {"target.idle_drafter_threads=2", "target.ar_uses_drafter_core=false",
                              "endpoints.pool_transport=\"shm\""});
  EXPECT_EQ(c.target.idle_drafter_threads, 2);
  EXPECT_FALSE(c.target.ar_uses_drafter_core);
  EXPECT_EQ(c.pool_transport, "shm");
  EXPECT_NO_THROW(c.validate());
  for (const char* t : {"auto", "zmq", "nccl", "shm"})
    EXPECT_EQ(error_of({std::string("endpoints.pool_transport=\"") + t + "\""}), "") << t;
}

TEST(DaemonConfig, ErrorsNameTheKey) {
  EXPECT_NE(error_of({"target.idle_drafter_threads=0"}).find("target.idle_drafter_threads"),
            std::string::npos);
  EXPECT_NE(error_of({"target.idle_drafter_threads=65"}).find("target.idle_drafter_threads"),
            std::string::npos);
  EXPECT_NE(error_of({"drafter.idle_drafter_threads=2"}).find("unknown key"), std::string::npos);
  EXPECT_NE(error_of({"target.ar_uses_drafter_core=1"}).find("true or false"), std::string::npos);
  EXPECT_NE(error_of({"endpoints.pool_transport=\"udp\""}).find("endpoints.pool_transport"),
            std::string::npos);
}

TEST(DaemonConfig, MaxBatchIsATargetKeyInItsRangeWithBudgetsOneBatchedPassHolds) {
  EXPECT_EQ(DaemonConfig().target.max_batch, 1);
  EXPECT_EQ(DaemonConfig::load("", {"target.max_batch=16"}).target.max_batch, 16);
  EXPECT_EQ(error_of({"target.max_batch=16"}), "");
  EXPECT_NE(error_of({"target.max_batch=0"}).find("target.max_batch: must be in [1, 64]"), std::string::npos);
  EXPECT_NE(error_of({"target.max_batch=65"}).find("target.max_batch"), std::string::npos);
  EXPECT_NE(error_of({"drafter.max_batch=2"}).find("unknown key"), std::string::npos);
  EXPECT_EQ(error_of({"decoding.budget=64"}), "") << "batch one runs trees past one pass";
  EXPECT_NE(error_of({"target.max_batch=2", "decoding.budget=64"}).find("decoding.budget"),
            std::string::npos);
  EXPECT_EQ(error_of({"target.max_batch=2", "decoding.budget=63"}), "");
}

// Fuzzing finding: 64-bit integers were narrowed to int, so 4294967304 loaded as 8
// and passed validation.
TEST(DaemonConfig, IntegersOutsideIntAreErrorsNotNarrowed) {
  EXPECT_NE(error_of({"target.idle_drafter_threads=4294967297"})
                .find("target.idle_drafter_threads: 4294967297 is out of range"),
            std::string::npos)
      << error_of({"target.idle_drafter_threads=4294967297"});
  EXPECT_NE(error_of({"decoding.budget=4294967304"}).find("decoding.budget: 4294967304 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of({"target.idle_drafter_threads=-9223372036854775808"}).find("out of range"),
            std::string::npos);
}

TEST(DaemonConfig, ShippedCpuConfigLendsTheDrafterCore) {
  const DaemonConfig c = DaemonConfig::load(rootspec::source_dir() + "/configs/small-cpu.toml", {});
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.target.device, "cpu");
  EXPECT_EQ(c.target.idle_drafter_threads, 2);
  EXPECT_EQ(c.pool_transport, "auto");  // shared memory: both processes on this host's CPU
}

// Every shipped config loads and validates; the GPU ones put the pair where their names say.
TEST(DaemonConfig, EveryShippedConfigLoadsAndTheGpuOnesNameTheirDevices) {
  const std::string dir = rootspec::source_dir() + "/configs/";
  int gpu_configs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    const DaemonConfig c = DaemonConfig::load(entry.path().string(), {});
    EXPECT_NO_THROW(c.validate());
    const std::string name = entry.path().filename().string();
    if (name.find("2gpu") != std::string::npos) {
      ++gpu_configs;
      EXPECT_EQ(c.target.device, "cuda:0");
      EXPECT_EQ(c.drafter.device, "cuda:1");
      EXPECT_EQ(c.target.dtype, "bfloat16");
    } else if (name.find("1gpu") != std::string::npos) {
      ++gpu_configs;
      EXPECT_EQ(c.target.device, "cuda:0");
      EXPECT_EQ(c.drafter.device, "cuda:0");
    }
  }
  EXPECT_EQ(gpu_configs, 3);  // random-1gpu, llama3.1-8b-3.2-1b-2gpu, qwen3-8b-0.6b-2gpu
}

}  // namespace
}  // namespace rootspec
