// Faults with real processes: a killed drafter or target, a client that goes away, malformed
// messages on every socket, and the launcher tearing the pair down.
#include <gtest/gtest.h>

#include <msgpack.hpp>

#include "pair_fixture.h"

namespace rootspec {
namespace {

using namespace rootspec::testing;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

GenerateBody long_request() {
  return generate_body(test_prompts()[1], "root-draw", "residual", 59, 1.0, 5, 240);
}

TEST(Faults, KilledDrafterFailsTheRequestWithinFiveSeconds) {
  Pair pair;
  Client client(pair.client_endpoint);
  client.start(long_request());
  ASSERT_TRUE(client.receive(20)) << "no first Delta";
  kill(pair.drafter_pid, SIGKILL);
  waitpid(pair.drafter_pid, nullptr, 0);
  const auto killed = Clock::now();
  const Reply r = client.collect(10);
  ASSERT_TRUE(r.error) << "no Error after the drafter died";
  EXPECT_EQ(r.error->field, "drafter");
  EXPECT_LT(seconds_since(killed), 5.0);
  EXPECT_EQ(wait_exit(pair.target_pid, 5), 3) << read_file(pair.target_log());
  pair.target_pid = -1;
  pair.drafter_pid = -1;
}

TEST(Faults, KilledTargetIsNoticedByTheClientAndTheDrafter) {
  Pair pair;
  const std::string log = pair.dir() + "/client.log";
  const pid_t client =
      spawn({ROOTSPEC_CLIENT_BIN, "--endpoint", pair.client_endpoint, "--prompt-ids", "10,20,30",
             "--max-new-tokens", "240", "--budget", "59", "--temperature", "1", "--no-stop-at-eos", "--ids"},
            log);
  // Wait until tokens stream, then kill the target.
  const auto start = Clock::now();
  while (read_file(log).empty() && seconds_since(start) < 20)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  kill(pair.target_pid, SIGKILL);
  waitpid(pair.target_pid, nullptr, 0);
  const auto killed = Clock::now();
  const int client_status = wait_exit(client, 10);
  EXPECT_LT(seconds_since(killed), 5.0);
  EXPECT_EQ(client_status, 1) << read_file(log);
  EXPECT_NE(read_file(log).find("went away"), std::string::npos) << read_file(log);
  EXPECT_EQ(wait_exit(pair.drafter_pid, 5), 3) << read_file(pair.drafter_log());
  pair.target_pid = -1;
  pair.drafter_pid = -1;
}

TEST(Faults, ClientThatDisconnectsIsCancelledAndTheNextRequestIsServed) {
  Pair pair;
  {
    Client gone(pair.client_endpoint);
    gone.start(long_request());
    ASSERT_TRUE(gone.receive(20));
  }  // the socket closes mid-stream
  Client next(pair.client_endpoint);
  const Reply r = next.generate(generate_body({1, 2, 3}, "root", "residual", 8, 0.0), 60);
  ASSERT_TRUE(r.done) << (r.error ? r.error->message : "timeout");
  EXPECT_NE(read_file(pair.target_log()).find("cancelled"), std::string::npos)
      << read_file(pair.target_log());
}

std::string with_header(int version, const std::string& type, uint32_t body_fields,
                        const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& body = nullptr) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(&buf);
  pk.pack_map(5);
  pk.pack("v"), pk.pack(version), pk.pack("type"), pk.pack(type), pk.pack("request"), pk.pack(9);
  pk.pack("round"), pk.pack(0), pk.pack("body"), pk.pack_map(body_fields);
  if (body) body(pk);
  return std::string(buf.data(), buf.size());
}

// Sends `bytes` and expects an Error naming `field`.
void expect_error(Client& c, const std::string& bytes, const std::string& field) {
  c.send(bytes);
  const Reply r = c.collect(10);
  ASSERT_TRUE(r.error) << "no Error for a bad message (" << field << ")";
  EXPECT_EQ(r.error->field, field) << r.error->message;
}

TEST(Faults, MalformedMessagesOnEverySocketGetAnErrorAndServingGoesOn) {
  Pair pair;
  Client client(pair.client_endpoint);
  expect_error(client, "not msgpack at all", "message");
  expect_error(client, std::string(kMaxMessageBytes + 1, 'x'), "message");
  expect_error(client, with_header(kProtocolVersion + 1, "generate", 0), "v");
  expect_error(client, with_header(kProtocolVersion, "warp", 0), "type");
  expect_error(client, with_header(kProtocolVersion, "pool", 0),
               "type");  // a drafter message sent to the target
  expect_error(
      client,
      with_header(kProtocolVersion, "generate", 1, [](auto& pk) { pk.pack("prompt_ids"), pk.pack("1,2"); }),
      "body.prompt_ids");
  Client drafter(pair.drafter_endpoint());
  expect_error(drafter, "\xff\xff", "message");
  expect_error(drafter, with_header(7, "commit", 0), "v");
  expect_error(drafter,
               with_header(kProtocolVersion, "commit", 1,
                           [](auto& pk) { pk.pack("tokens"), pk.pack(std::vector<int>{1}); }),
               "request");
  expect_error(drafter, with_header(kProtocolVersion, "generate", 0), "type");
  // Both daemons still serve.
  const Reply r = client.generate(generate_body({4, 5, 6}, "root-draw", "tev", 8, 1.0, 3));
  ASSERT_TRUE(r.done) << (r.error ? r.error->message : "timeout");
  EXPECT_EQ(r.done->tokens.size(), 24u);
}

// `launch/rootspec up` on a fresh random-pair config in its own folder, once the pair is up:
// the launcher's pid (−1 if the pair did not come up) and the pids of the pair it started.
struct LaunchedPair {
  TempDir tmp{"launcher"};
  std::string dir = tmp.path(), log = dir + "/launcher.log";
  pid_t launcher = -1, drafter = 0, target = 0;

  LaunchedPair() {
    const std::string config = write_pair_config(dir);
    setenv("ROOTSPEC_SKIP_SETUP", "1", 1);
    setenv("ROOTSPEC_BUILD_DIR", ROOTSPEC_BUILD_DIR, 1);
    setenv("ROOTSPEC_RUN_DIR", (dir + "/run").c_str(), 1);
    const pid_t pid = spawn(
        {"/bin/bash", std::string(ROOTSPEC_SOURCE_DIR) + "/launch/rootspec", "up", "--config", config}, log);
    const auto start = Clock::now();
    while (read_file(log).find("the pair is up") == std::string::npos) {
      if (seconds_since(start) > 60 || wait_exit(pid, 0) != -1) {
        ADD_FAILURE() << "the launcher did not bring the pair up: " << read_file(log);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    launcher = pid;
    std::istringstream pids(read_file(dir + "/run/pids"));
    pids >> drafter >> target;
  }
};

// launch/rootspec up: if either process dies, the launcher stops the other and exits non-zero.
void launcher_tears_down_after_killing(bool kill_drafter) {
  const LaunchedPair p;
  ASSERT_GT(p.launcher, 0);
  ASSERT_GT(p.drafter, 0);
  ASSERT_GT(p.target, 0);
  kill(kill_drafter ? p.drafter : p.target, SIGKILL);
  const int status = wait_exit(p.launcher, 15);
  EXPECT_NE(status, 0) << read_file(p.log);
  EXPECT_NE(status, -1) << "the launcher did not exit";
  EXPECT_FALSE(process_alive(p.drafter));
  EXPECT_FALSE(process_alive(p.target));
  EXPECT_NE(read_file(p.log).find("last log lines"), std::string::npos) << read_file(p.log);
  if (status == -1) kill(p.launcher, SIGKILL);
}

TEST(Faults, LauncherDownStopsThePairCleanly) {
  const LaunchedPair p;
  ASSERT_GT(p.launcher, 0);
  const pid_t down = spawn({"/bin/bash", std::string(ROOTSPEC_SOURCE_DIR) + "/launch/rootspec", "down"},
                           p.dir + "/down.log");
  EXPECT_EQ(wait_exit(down, 20), 0) << read_file(p.dir + "/down.log");
  EXPECT_EQ(wait_exit(p.launcher, 20), 0) << read_file(p.log);
  EXPECT_FALSE(process_alive(p.drafter));
  EXPECT_FALSE(process_alive(p.target));
}

TEST(Faults, LauncherTearsDownThePairWhenTheDrafterDies) { launcher_tears_down_after_killing(true); }
TEST(Faults, LauncherTearsDownThePairWhenTheTargetDies) { launcher_tears_down_after_killing(false); }

}  // namespace
}  // namespace rootspec
