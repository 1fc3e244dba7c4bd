// Shared by the daemon and HTTP tests: random tiny pairs on disk, the two daemons (and the HTTP
// gateway) as real processes on ipc endpoints in a temporary folder, and a minimal client
// speaking the protocol.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "daemon_config.h"
#include "generate.h"
#include "model_runtime.h"
#include "programs.h"
#include "protocol.h"
#include "random_model.h"
#include "temp_dir.h"
#include "transport.h"

namespace rootspec::testing {

// A Generate that asks for `p` (sampling.h): the parameters that are on, by their wire fields.
inline void set_sampling(GenerateBody& g, const SamplingParams& p) {
  if (p.top_k != 0) g.top_k = p.top_k;
  if (p.top_p != 1) g.top_p = p.top_p;
  if (p.min_p != 0) g.min_p = p.min_p;
  if (p.presence_penalty != 0) g.presence_penalty = p.presence_penalty;
  if (p.frequency_penalty != 0) g.frequency_penalty = p.frequency_penalty;
  if (p.repetition_penalty != 1) g.repetition_penalty = p.repetition_penalty;
  g.logit_bias = p.logit_bias;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Forks and execs `argv`, stderr and stdout to `log`; one intra-op thread.
inline pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// Waits up to `seconds` (0: just looks) for `pid` to exit; returns its exit status (128 + the
// signal when killed), −1 if still running, −2 if it is no child of ours (reaped already).
inline int wait_exit(pid_t pid, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0 && errno == ECHILD) return -2;
    if (std::chrono::steady_clock::now() >= end) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A random tiny pair on disk (made once per test process): token ids only, or with the byte
// tokenizer and ChatML (vocabulary 258), which serves text and chat requests.
struct PairModels {
  TempDir dir;
  std::string target, drafter;
  explicit PairModels(bool chat) : dir(chat ? "chat_models" : "daemon_models") {
    target = dir.sub("target");
    drafter = dir.sub("drafter");
    ModelConfig c = small_config(ModelArch::Llama, /*vocab=*/chat ? 258 : 256, /*hidden=*/64, /*layers=*/3,
                                 /*heads=*/4, /*kv_heads=*/2, /*intermediate=*/128);
    RandomModelOptions o;
    o.seed = 11;
    write_random_model(target, c, o);
    if (chat) write_byte_tokenizer(target, /*chatml=*/true);
    write_truncated_model(target, drafter, 1);
  }
};
inline const PairModels& pair_models() {
  static const PairModels m(false);
  return m;
}
inline const PairModels& chat_models() {
  static const PairModels m(true);
  return m;
}

// The device the pair and the reference decoder run on: $ROOTSPEC_TEST_DEVICE (bench/gpu's
// check runs the daemon's greedy identity with both on cuda:0), else the CPU.
inline std::string test_device() {
  const char* device = std::getenv("ROOTSPEC_TEST_DEVICE");
  return device && *device ? device : "cpu";
}

// A config for a random pair with ipc endpoints in `dir` (client.sock, drafter.sock) and the
// HTTP gateway on a free loopback port.
inline std::string write_pair_config(const std::string& dir, const PairModels& models = pair_models()) {
  const std::string path = dir + "/pair.toml";
  std::ofstream(path) << "[target]\nmodel = \"" << models.target << "\"\ndevice = \"" << test_device()
                      << "\"\n"
                      << "[drafter]\nmodel = \"" << models.drafter << "\"\ndevice = \"" << test_device()
                      << "\"\n"
                      << "[endpoints]\nclient = \"ipc://" << dir << "/client.sock\"\n"
                      << "drafter = \"ipc://" << dir << "/drafter.sock\"\n"
                      << "[decoding]\nmax_context = 256\nmax_new_tokens = 24\nrule = \"root-draw\"\n"
                      << "[limits]\npeer_timeout_s = 20.0\n"
                      << "[http]\nlisten = \"127.0.0.1:0\"\n";
  return path;
}

// Waits up to `seconds` for `needle` in the file at `path`; false if `pid` exits first.
inline bool wait_for_line(const std::string& path, const std::string& needle, pid_t pid, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (read_file(path).find(needle) == std::string::npos) {
    if (std::chrono::steady_clock::now() > end || wait_exit(pid, 0) != -1) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

struct PairOptions {
  std::vector<std::string> overrides;  // --set section.key=value
  const PairModels* models = nullptr;  // null: pair_models()
  bool http = false;                   // also start rootspec-http
};

// The two daemons on ipc endpoints (and, asked, the gateway); stopped (SIGKILL) on destruction.
class Pair {
 public:
  explicit Pair(const std::vector<std::string>& overrides = {}) : Pair(PairOptions{overrides}) {}
  explicit Pair(const PairOptions& opt) : tmp_("daemon_pair"), dir_(tmp_.path()) {
    const std::vector<std::string>& overrides = opt.overrides;
    config_ = write_pair_config(dir_, opt.models ? *opt.models : pair_models());
    client_endpoint = "ipc://" + dir_ + "/client.sock";
    std::vector<std::string> extra;
    for (const auto& o : overrides) extra.insert(extra.end(), {"--set", o});
    auto argv = [&](const std::string& bin) {
      std::vector<std::string> a = {bin, "--config", config_};
      a.insert(a.end(), extra.begin(), extra.end());
      return a;
    };
    drafter_argv_ = argv(program_path("rootspec-drafter"));
    drafter_pid = spawn(drafter_argv_, drafter_log());
    target_pid = spawn(argv(program_path("rootspec-target")), target_log());
    if (!wait_for_line(target_log(), "ready; clients connect", target_pid, 60))
      throw std::runtime_error("the pair did not start: " + read_file(target_log()) +
                               read_file(drafter_log()));
    if (opt.http) {
      http_pid = spawn(argv(program_path("rootspec-http")), http_log());
      if (!wait_for_line(http_log(), "listening on http://", http_pid, 30))
        throw std::runtime_error("the gateway did not start: " + read_file(http_log()));
      const std::string log = read_file(http_log());
      const size_t at = log.find("listening on http://") + std::string("listening on ").size();
      url = log.substr(at, log.find(' ', at) - at);
      http_port = std::stoi(url.substr(url.rfind(':') + 1));
    }
  }
  ~Pair() {
    for (pid_t p : {http_pid, target_pid, drafter_pid})
      if (p > 0 && kill(p, SIGKILL) == 0) waitpid(p, nullptr, 0);
  }
  // Starts a new drafter (the old one dead), as the launcher does; its log is appended.
  void restart_drafter() { drafter_pid = spawn(drafter_argv_, drafter_log()); }
  std::string http_log() const { return dir_ + "/http.log"; }
  std::string target_log() const { return dir_ + "/target.log"; }
  std::string drafter_log() const { return dir_ + "/drafter.log"; }
  std::string drafter_endpoint() const { return "ipc://" + dir_ + "/drafter.sock"; }
  const std::string& dir() const { return dir_; }

  std::string client_endpoint;
  pid_t target_pid = -1, drafter_pid = -1, http_pid = -1;
  std::string url;  // the gateway's http://127.0.0.1:port
  int http_port = -1;

 private:
  TempDir tmp_;
  std::string dir_, config_;
  std::vector<std::string> drafter_argv_;
};

struct Reply {
  std::vector<int32_t> tokens;  // from the Delta messages
  std::optional<DoneBody> done;
  std::optional<ErrorBody> error;
  int deltas = 0;
  std::vector<std::string> notices;  // the Deltas' notices
  bool timed_out = false;
};

// A DEALER client: sends `bytes`, collects replies until Done or Error (or the timeout).
class Client {
 public:
  explicit Client(const std::string& endpoint) : sock_(ctx_, zmq::socket_type::dealer) {
    sock_.set(zmq::sockopt::linger, 0);
    sock_.connect(endpoint);
  }
  void send(const std::string& bytes) { sock_.send(zmq::buffer(bytes), zmq::send_flags::none); }
  // Receives one reply message, or nullopt after `seconds`.
  std::optional<zmq::message_t> receive(double seconds) {
    zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(static_cast<int>(seconds * 1000)));
    zmq::message_t m;
    if (!sock_.recv(m, zmq::recv_flags::dontwait)) return std::nullopt;
    return m;
  }
  Reply collect(double seconds = 60) {
    Reply r;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      auto m = receive(0.05);
      if (!m) continue;
      const Message msg(m->data(), m->size());
      if (msg.header().type == MessageType::Delta) {
        const DeltaBody d = msg.delta();
        r.tokens.insert(r.tokens.end(), d.tokens.begin(), d.tokens.end());
        ++r.deltas;
        if (!d.notice.empty()) r.notices.push_back(d.notice);
      } else if (msg.header().type == MessageType::Done) {
        r.done = msg.done();
        return r;
      } else if (msg.header().type == MessageType::Error) {
        r.error = msg.error();
        return r;
      }
    }
    r.timed_out = true;
    return r;
  }
  // Sends a Generate (request ids 1, 2, … per client); returns its id.
  uint64_t start(const GenerateBody& g) {
    Header h;
    h.type = MessageType::Generate;
    h.request = ++next_id_;
    send(encode(h, g));
    return h.request;
  }
  Reply generate(const GenerateBody& g, double seconds = 60) {
    start(g);
    return collect(seconds);
  }

 private:
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  uint64_t next_id_ = 0;
};

inline GenerateBody generate_body(const std::vector<int32_t>& prompt, const std::string& rule,
                                  const std::string& verifier, int budget, double temperature,
                                  uint64_t seed = 0, int max_new_tokens = 24) {
  GenerateBody g;
  g.prompt_ids = prompt;
  g.has_prompt_ids = true;
  g.rule = rule;
  g.verifier = verifier;
  g.budget = budget;
  g.temperature = temperature;
  g.seed = seed;
  g.max_new_tokens = max_new_tokens;
  g.stop_at_eos = false;
  return g;
}

// rootspec-generate's decoder in this process, over the same folders (the reference).
class Reference {
 public:
  // On `device` (default: the test device) for the target, `drafter_device` (default: the same)
  // for the drafter.
  explicit Reference(const std::string& device = test_device(), const std::string& drafter_device = "") {
    set_torch_threads(1);
    // The caches the daemons allocate for the Pair's config (max_context 256, default pool).
    RuntimeOptions t, d;
    t.max_context = d.max_context = 256 + 8 + 2;
    t.device = device;
    d.device = drafter_device.empty() ? device : drafter_device;
    t.max_tree = kMaxTreeBucket;
    d.max_tree = 80;
    target_ = std::make_unique<ModelRuntime>(pair_models().target, t);
    drafter_ = std::make_unique<ModelRuntime>(pair_models().drafter, d);
  }
  std::vector<int32_t> decode(const std::vector<int32_t>& prompt, const std::string& rule,
                              const std::string& verifier, int budget, double temperature, uint64_t seed,
                              int max_new_tokens = 24, int rheo_m = -1) {
    RequestOptions g;
    EXPECT_TRUE(parse_decoder(rule, &g)) << rule;
    EXPECT_TRUE(parse_verifier(verifier, &g.verifier)) << verifier;
    g.budget = budget;
    g.temperature = temperature;
    g.seed = seed;
    g.max_new_tokens = max_new_tokens;
    g.stop_at_eos = false;                  // as generate_body asks the daemon
    PoolShape shape = DaemonConfig().pool;  // the daemons' default (adaptive depth)
    shape.rheo_m = rheo_m;
    return generate(*target_, drafter_.get(), prompt, g, shape).tokens;
  }

 private:
  std::unique_ptr<ModelRuntime> target_, drafter_;
};

inline std::vector<std::vector<int32_t>> test_prompts() {
  return {{1, 2, 3}, {10, 20, 30, 40, 50}, {200}, {7, 7, 7, 7, 7, 7, 7, 7}, {99, 150, 3, 250, 17, 42}};
}

}  // namespace rootspec::testing
