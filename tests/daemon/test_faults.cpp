// Faults with real processes: a killed or stopped drafter (the target goes on with ar and takes up
// a new drafter), a killed target, a client that goes away, malformed messages on every socket, a
// drafter session taken over mid-draft, and the launcher restarting a drafter, restarting the pair
// (--restart) or tearing it down.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdint>

#include <msgpack.hpp>

#include "pair_fixture.h"
#include "programs.h"
#include "source_tree.h"

namespace rootspec {
namespace {

using namespace rootspec::testing;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

GenerateBody long_request() {
  return generate_body(test_prompts()[1], "root-draw", "residual", 59, 1.0, 5, 240);
}

// A greedy request long enough to be mid-way when the drafter is stopped after its first Delta.
GenerateBody greedy_request(const std::string& rule) {
  return generate_body(test_prompts()[1], rule, "greedy", 8, 0.0, 0, 200);
}

int rounds_with_accepted_drafts(const DoneBody& done) {
  int n = 0;
  for (const RoundRecord& r : done.trace) n += r.accepted > 0;
  return n;
}

// The drafter dies (SIGKILL) or stops answering (SIGSTOP past peer_timeout_s) mid-request: the
// request finishes with ar from its committed context, exact (the greedy output of ar), and
// says so; the next request is served with ar; a new drafter is taken up and speculation
// resumes (rounds with accepted draft tokens again).
void drafter_fails_mid_request(bool stop_only) {
  Pair pair({"limits.peer_timeout_s=2"});
  Client client(pair.client_endpoint);
  const Reply ar = client.generate(greedy_request("ar"));
  ASSERT_TRUE(ar.done) << (ar.error ? ar.error->message : "timeout");
  ASSERT_EQ(ar.done->tokens.size(), 200u);

  client.start(greedy_request("root-draw"));
  ASSERT_TRUE(client.receive(20)) << "no Accepted";
  Reply mid;
  while (mid.deltas == 0 && !mid.done) {  // up to the first Delta
    auto m = client.receive(20);
    ASSERT_TRUE(m) << "no first Delta";
    const Message msg(m->data(), m->size());
    if (msg.header().type == MessageType::Delta) {
      const auto d = msg.delta();
      mid.tokens.insert(mid.tokens.end(), d.tokens.begin(), d.tokens.end());
      ++mid.deltas;
    }
  }
  // Stopped first, so that at most the pool in flight arrives: the request is mid-way.
  kill(pair.drafter_pid, SIGSTOP);
  const auto stopped = Clock::now();
  if (!stop_only) {
    kill(pair.drafter_pid, SIGKILL);
    waitpid(pair.drafter_pid, nullptr, 0);
  }
  const Reply rest = client.collect(30);
  ASSERT_TRUE(rest.done) << (rest.error ? rest.error->message : "timeout") << read_file(pair.target_log());
  const DoneBody& done = *rest.done;
  EXPECT_EQ(done.tokens, ar.done->tokens) << "the degraded request's greedy output differs from ar";
  EXPECT_EQ(done.stop_reason, "length");
  EXPECT_FALSE(done.degraded.empty());
  EXPECT_GT(done.degraded_at, 0) << "degraded before any speculative round";
  EXPECT_LT(done.degraded_at, 200) << "not mid-request";
  EXPECT_GT(rounds_with_accepted_drafts(done), 0) << "no speculation before the failure";
  // The stream said so, once: the first Delta after the failure carries the notice.
  ASSERT_EQ(rest.notices.size(), 1u);
  EXPECT_NE(rest.notices[0].find("continuing with ar (exact) from token " + std::to_string(done.degraded_at)),
            std::string::npos)
      << rest.notices[0];
  if (stop_only) {
    // peer_timeout_s (2 s) of silence, then the target killed the stopped drafter.
    EXPECT_LT(seconds_since(stopped), 10.0);
    int status = 0;
    ASSERT_EQ(waitpid(pair.drafter_pid, &status, 0), pair.drafter_pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << read_file(pair.target_log());
    EXPECT_NE(read_file(pair.target_log()).find("killed it: it did not answer"), std::string::npos);
  }

  // Served with ar while no drafter is there.
  const Reply later = client.generate(greedy_request("root-draw"));
  ASSERT_TRUE(later.done) << (later.error ? later.error->message : "timeout");
  EXPECT_EQ(later.done->tokens, ar.done->tokens);
  EXPECT_EQ(later.done->degraded, "no drafter is connected");
  EXPECT_EQ(later.done->degraded_at, 0);

  // A new drafter (the launcher's restart): speculation resumes.
  pair.restart_drafter();
  ASSERT_TRUE(wait_for_line(pair.target_log(), "drafter back", pair.target_pid, 30))
      << read_file(pair.target_log());
  const Reply again = client.generate(greedy_request("root-draw"));
  ASSERT_TRUE(again.done) << (again.error ? again.error->message : "timeout");
  EXPECT_EQ(again.done->tokens, ar.done->tokens);
  EXPECT_TRUE(again.done->degraded.empty()) << again.done->degraded;
  EXPECT_GT(rounds_with_accepted_drafts(*again.done), 0);
}

TEST(Faults, KilledDrafterMidRequestFinishesWithArExactlyAndSpeculationResumesAfterARestart) {
  drafter_fails_mid_request(/*stop_only=*/false);
}

TEST(Faults, StoppedDrafterPastPeerTimeoutIsKilledAndTheRequestFinishesWithArExactly) {
  drafter_fails_mid_request(/*stop_only=*/true);
}

TEST(Faults, KilledTargetIsNoticedByTheClientAndTheDrafter) {
  Pair pair;
  const std::string log = pair.dir() + "/client.log";
  const pid_t client = spawn({rootspec::testing::program_path("rootspec-client"), "--endpoint",
                              pair.client_endpoint, "--prompt-ids", "10,20,30", "--max-new-tokens", "240",
                              "--budget", "59", "--temperature", "1", "--no-stop-at-eos", "--ids"},
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

// A drafter whose sessions are all in use (here its one: max_batch 1) takes the least recently
// used for a new request's Prefill; when that session's pool is mid-draft, the request it held
// hears so at once (an Error naming it), so that no target waits peer_timeout_s for a pool that
// will not come. Here the test is the target: both Prefills wait while the drafter is stopped,
// so the second is read between the first's begin and its first step.
TEST(Faults, ASessionTakenOverMidDraftEndsItsRequestWithAnError) {
  Pair pair;
  Client drafter(pair.drafter_endpoint());
  Header hello;
  hello.type = MessageType::Hello;
  drafter.send(encode(hello, HelloBody{static_cast<int32_t>(getpid()), 256, "", ""}));
  const auto ready = drafter.receive(20);
  ASSERT_TRUE(ready) << "no Ready";
  ASSERT_EQ(Message(ready->data(), ready->size()).header().type, MessageType::Ready);
  std::vector<int32_t> prompt(250);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7 + 3) % 256);
  auto prefill = [&](uint64_t request) {
    Header h;
    h.type = MessageType::Prefill;
    h.request = request;
    PrefillBody body;
    body.prompt = prompt;
    body.draft_seed = 1;
    return encode(h, body);
  };
  kill(pair.drafter_pid, SIGSTOP);
  drafter.send(prefill(1));
  drafter.send(prefill(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  kill(pair.drafter_pid, SIGCONT);
  std::optional<ErrorBody> error_for_first;
  bool pool_for_first = false, pool_for_second = false;
  for (const auto start = Clock::now(); !pool_for_second && seconds_since(start) < 20;) {
    const auto m = drafter.receive(0.5);
    if (!m) continue;
    const Message msg(m->data(), m->size());
    const Header& h = msg.header();
    if (h.type == MessageType::Error && h.request == 1) error_for_first = msg.error();
    if (h.type == MessageType::Pool) (h.request == 1 ? pool_for_first : pool_for_second) = true;
  }
  EXPECT_TRUE(pool_for_second) << "no pool for the request that took the session";
  EXPECT_FALSE(pool_for_first) << "a pool for the request whose session was taken";
  ASSERT_TRUE(error_for_first) << "the request whose session was taken mid-draft heard nothing";
  EXPECT_EQ(error_for_first->field, "request");
  EXPECT_NE(error_for_first->message.find("in use"), std::string::npos) << error_for_first->message;
}

// `launch/rootspec up` on a fresh random-pair config in its own folder, once the pair is up:
// the launcher's pid (−1 if the pair did not come up) and the pids of the pair it started.
struct LaunchedPair {
  TempDir tmp{"launcher"};
  std::string dir = tmp.path(), log = dir + "/launcher.log";
  pid_t launcher = -1, drafter = 0, target = 0;

  explicit LaunchedPair(const std::vector<std::string>& options = {}) {
    const std::string config = write_pair_config(dir);
    setenv("ROOTSPEC_SKIP_SETUP", "1", 1);
    setenv("ROOTSPEC_BUILD_DIR", rootspec::testing::build_dir().c_str(), 1);
    setenv("ROOTSPEC_RUN_DIR", (dir + "/run").c_str(), 1);
    std::vector<std::string> argv = {"/bin/bash", rootspec::source_dir() + "/launch/rootspec", "up",
                                     "--config", config};
    argv.insert(argv.end(), options.begin(), options.end());
    const pid_t pid = spawn(argv, log);
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
  ~LaunchedPair() {
    if (launcher > 0 && wait_exit(launcher, 0) == -1) {  // a test that failed half-way: stop it all
      kill(launcher, SIGTERM);
      if (wait_exit(launcher, 10) == -1) kill(launcher, SIGKILL);
    }
  }
  // The pids the launcher runs now: drafter, target, gateway (its pid file).
  std::vector<pid_t> current_pids() const {
    std::istringstream in(read_file(dir + "/run/pids"));
    std::vector<pid_t> pids;
    for (pid_t p; in >> p;) pids.push_back(p);
    return pids;
  }
  std::string client_endpoint() const {
    const std::string log = read_file(dir + "/run/target.log");
    const std::string key = "clients connect to ";
    const size_t at = log.find(key) + key.size();
    return log.substr(at, log.find('\n', at) - at);
  }
  // Waits until `needle` is in the launcher's (or a process's) log `count` times.
  bool wait_for(const std::string& file, const std::string& needle, int count, double seconds) const {
    const auto start = Clock::now();
    for (;;) {
      const std::string text = read_file(file);
      int n = 0;
      for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
      if (n >= count) return true;
      if (seconds_since(start) > seconds) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  void down() const {
    const pid_t d =
        spawn({"/bin/bash", rootspec::source_dir() + "/launch/rootspec", "down"}, dir + "/down.log");
    EXPECT_EQ(wait_exit(d, 20), 0) << read_file(dir + "/down.log");
    EXPECT_EQ(wait_exit(launcher, 20), 0) << read_file(log);
  }
};

// A speculative greedy request through the pair's client endpoint: its Done.
std::optional<DoneBody> speculative_request(const std::string& endpoint) {
  Client client(endpoint);
  const Reply r = client.generate(generate_body(test_prompts()[0], "root-draw", "greedy", 8, 0.0, 0, 64));
  if (!r.done) ADD_FAILURE() << (r.error ? r.error->message : "timeout");
  return r.done;
}

// launch/rootspec up: the target's death ends the pair (its KV state is gone): the launcher
// stops the drafter and exits non-zero.
TEST(Faults, LauncherTearsDownThePairWhenTheTargetDies) {
  const LaunchedPair p;
  ASSERT_GT(p.launcher, 0);
  ASSERT_GT(p.drafter, 0);
  ASSERT_GT(p.target, 0);
  kill(p.target, SIGKILL);
  const int status = wait_exit(p.launcher, 15);
  EXPECT_NE(status, 0) << read_file(p.log);
  EXPECT_NE(status, -1) << "the launcher did not exit";
  EXPECT_FALSE(process_alive(p.drafter));
  EXPECT_FALSE(process_alive(p.target));
  EXPECT_NE(read_file(p.log).find("killed by signal 9 (KILL)"), std::string::npos) << read_file(p.log);
  EXPECT_NE(read_file(p.log).find("last log lines"), std::string::npos) << read_file(p.log);
}

// launch/rootspec up restarts a dead drafter and says why; the target takes it up and
// speculates again; `down` still stops everything cleanly.
TEST(Faults, LauncherRestartsADeadDrafterAndSpeculationResumes) {
  const LaunchedPair p;
  ASSERT_GT(p.launcher, 0);
  kill(p.drafter, SIGKILL);
  ASSERT_TRUE(p.wait_for(p.log, "restarting the drafter in 1 s", 1, 15)) << read_file(p.log);
  EXPECT_NE(read_file(p.log).find("the drafter exited (killed by signal 9 (KILL))"), std::string::npos)
      << read_file(p.log);
  ASSERT_TRUE(p.wait_for(p.dir + "/run/target.log", "drafter back", 1, 30))
      << read_file(p.dir + "/run/target.log");
  const std::vector<pid_t> now = p.current_pids();
  ASSERT_GE(now.size(), 2u);
  EXPECT_NE(now[0], p.drafter);
  EXPECT_TRUE(process_alive(now[0]));
  EXPECT_EQ(now[1], p.target) << "the target was restarted too";
  const auto done = speculative_request(p.client_endpoint());
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->degraded.empty()) << done->degraded;
  EXPECT_GT(rounds_with_accepted_drafts(*done), 0);
  p.down();
}

// With --restart, a dead target is started again with a new drafter (the gateway stays).
TEST(Faults, LauncherWithRestartStartsTheTargetAgain) {
  const LaunchedPair p({"--restart"});
  ASSERT_GT(p.launcher, 0);
  const pid_t gateway = p.current_pids().at(2);
  kill(p.target, SIGKILL);
  ASSERT_TRUE(p.wait_for(p.log, "restarting the drafter and the target", 1, 15)) << read_file(p.log);
  ASSERT_TRUE(p.wait_for(p.dir + "/run/target.log", "ready; clients connect", 2, 60))
      << read_file(p.dir + "/run/target.log");
  const std::vector<pid_t> now = p.current_pids();
  EXPECT_NE(now.at(0), p.drafter);
  EXPECT_NE(now.at(1), p.target);
  EXPECT_EQ(now.at(2), gateway);
  EXPECT_FALSE(process_alive(p.drafter));
  const auto done = speculative_request(p.client_endpoint());
  ASSERT_TRUE(done);
  EXPECT_GT(rounds_with_accepted_drafts(*done), 0);
  p.down();
}

// Both processes on one GPU (here the CPU execution's cuda:0): the launcher starts an MPS
// control daemon for the pair (a stand-in nvidia-cuda-mps-control on PATH records its calls) and
// stops it with the pair; without MPS it says what that costs.
TEST(Faults, LauncherRunsTwoProcessesOnOneGpuUnderMpsAndStopsIt) {
  TempDir bin("fake_mps");
  const std::string calls = bin.path() + "/calls";
  std::ofstream(bin.path() + "/nvidia-cuda-mps-control")
      << "#!/bin/sh\nif [ \"$1\" = -d ]; then echo \"start $CUDA_MPS_PIPE_DIRECTORY\" >> " << calls
      << "; else read line; echo \"$line\" >> " << calls << "; fi\n";
  chmod((bin.path() + "/nvidia-cuda-mps-control").c_str(), 0755);
  const std::string path = std::getenv("PATH");
  setenv("PATH", (bin.path() + ":" + path).c_str(), 1);
  const LaunchedPair p({"--set", "target.device=cuda:0", "--set", "drafter.device=cuda:0"});
  setenv("PATH", path.c_str(), 1);
  ASSERT_GT(p.launcher, 0);
  EXPECT_NE(read_file(p.log).find("both processes on cuda:0: started the MPS control daemon"),
            std::string::npos)
      << read_file(p.log);
  EXPECT_EQ(read_file(calls), "start " + p.dir + "/run/mps/pipe\n");
  p.down();
  EXPECT_EQ(read_file(calls), "start " + p.dir + "/run/mps/pipe\nquit\n");
}

TEST(Faults, LauncherSaysWhenTwoProcessesOnOneGpuHaveNoMps) {
  TempDir bin("no_mps");  // a PATH without nvidia-cuda-mps-control
  const std::string path = std::getenv("PATH");
  setenv("PATH", "/usr/bin:/bin", 1);
  const LaunchedPair p({"--set", "target.device=cuda:0", "--set", "drafter.device=cuda:0"});
  setenv("PATH", path.c_str(), 1);
  ASSERT_GT(p.launcher, 0);
  EXPECT_NE(read_file(p.log).find("both processes on cuda:0 and no MPS here"), std::string::npos)
      << read_file(p.log);
  p.down();
}

TEST(Faults, LauncherDownStopsThePairCleanly) {
  const LaunchedPair p;
  ASSERT_GT(p.launcher, 0);
  p.down();
  EXPECT_FALSE(process_alive(p.drafter));
  EXPECT_FALSE(process_alive(p.target));
}

}  // namespace
}  // namespace rootspec
