// rootspec-bench: the timing harness, with the protocol of [TPR] App. D.14.
//
//   rootspec-bench --launch configs/random-cpu.toml --out /tmp/run1
//   rootspec-bench --endpoint tcp://127.0.0.1:5600 --limit-prompts 5 --max-new-tokens 32 --out /tmp/b
//
// Every combination of the grid (decoders × temperatures × budgets; `ar` once per T) decodes
// every prompt once per pass (--repeats passes, default 1), in an order rotated by the prompt's
// position in the pass's seeded prompt order, after warm-up decodes of the first --warmup
// prompts (bench_order.h). A decode's speed is the tokens up to the first EOS over the time from
// the start of the target prefill to the last commit, both stamped by the target
// (Done.prefill_start_ns, Done.last_commit_ns); a prompt's decodes of one combination are
// summed; a run's speed is summed tokens over summed seconds; speeds and gains carry 95%
// percentile intervals from paired bootstrap resamples of prompts (bench_stats.h).
//
// Writes to --out: records.csv (one row per decode, warm-up included and flagged),
// summary.json (bench_stats summary plus a "run" object: options, failures), and with --trace
// trace.jsonl (one line per round). Prints a table on stdout and a progress line on stderr.
// With --concurrency N[,N…] the grid runs as a serving benchmark instead: for each level N and
// combination, N closed-loop clients (each sends its next request when its last one ends, as
// vLLM's serving benchmark runs them) decode every prompt (× --repeats) with streaming; written
// to --out: concurrency.csv (aggregate tokens/s, per-request tokens/s, time to first token and
// per output token, p50 and p99, per level and combination: concurrency.h), records.csv with a
// level per row set apart by the records' `decoder` as "DECODER@cN", and summary.json (each
// level's paired-bootstrap summary under "levels"), and with --trace trace.jsonl (each round's
// batch in it); plots with bench/plot-concurrency.sh. With --launch the pair gets
// target.max_batch = the largest level (1 without --concurrency) unless --set names it.
// Exit codes: 0 every decode succeeded; 1 a decode failed, the target went away or the run was
// interrupted (outputs are still written for what ran); 2 bad options; 3 the pair did not start.
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "bench_order.h"
#include "bench_stats.h"
#include "concurrency.h"
#include "constraint_flags.h"
#include "daemon_config.h"
#include "decode_record.h"
#include "pair_launcher.h"
#include "prompt_set.h"
#include "protocol.h"
#include "source_tree.h"
#include "transport.h"

using namespace rootspec;
using namespace rootspec::harness;

namespace {

// A decoder name with this suffix runs its rule with draft-ahead on (runtime_drafter.h).
constexpr const char* kAheadSuffix = "+ahead";
bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::atomic<bool> g_interrupted{false};
extern "C" void on_signal(int) { g_interrupted = true; }

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char buf[4096];
  if (!getcwd(buf, sizeof buf)) return path;
  return std::string(buf) + "/" + path;
}

bool is_file(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The build folder this binary sits in: <build>/bench/harness/rootspec-bench.
std::string own_build_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string p(buf, static_cast<size_t>(n));
  for (int i = 0; i < 3; ++i) {
    const size_t slash = p.rfind('/');
    if (slash == std::string::npos) return "";
    p.resize(slash);
  }
  return p;
}

void mkdirs(const std::string& dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty()) mkdir(cur.c_str(), 0755);
    }
    if (i < dir.size()) cur += dir[i];
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw std::runtime_error("cannot create folder " + dir);
}

std::string fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

std::string grid_name(const GridPoint& g) {
  std::string s = g.decoder + " T=" + fmt("%g", g.temperature);
  if (g.budget > 0) s += " B=" + std::to_string(g.budget);
  return s;
}

// One request on the client socket.
struct Outcome {
  enum Kind { kDone, kError, kTimeout, kGone, kInterrupted } kind = kError;
  DoneBody done;
  std::string error;
};

class Client {
 public:
  Client(const std::string& endpoint) : sock_(ctx_, zmq::socket_type::dealer), watch_(ctx_, sock_, "bench") {
    sock_.set(zmq::sockopt::linger, 200);
    sock_.connect(endpoint);
  }
  Outcome generate(const GenerateBody& g, double timeout_s, PairLauncher* launcher) {
    Header h;
    h.type = MessageType::Generate;
    h.request = ++request_;
    sock_.send(zmq::buffer(encode(h, g)), zmq::send_flags::none);
    const double deadline = now_s() + timeout_s;
    Outcome o;
    for (;;) {
      zmq::pollitem_t items[] = {{sock_.handle(), 0, ZMQ_POLLIN, 0},
                                 {watch_.events().handle(), 0, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 2, std::chrono::milliseconds(100));
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;  // a signal (Ctrl-C): looked at below
      }
      zmq::message_t reply;
      while (recv_dontwait(reply)) {
        try {
          const Message m(reply.data(), reply.size());
          if (m.header().request != request_) continue;  // a late answer to a timed-out request
          switch (m.header().type) {
            case MessageType::Done:
              o.kind = Outcome::kDone;
              o.done = m.done();
              return o;
            case MessageType::Error: {
              const ErrorBody e = m.error();
              o.kind = Outcome::kError;
              // The target's message may already start with the field ("rule: unknown rule …").
              const bool named = e.field.empty() || e.message.rfind(e.field + ":", 0) == 0;
              o.error = (named ? "" : e.field + ": ") + e.message;
              return o;
            }
            case MessageType::Accepted:  // queued
            case MessageType::Delta:     // only with --stream
              break;
            default:
              o.kind = Outcome::kError;
              o.error = std::string("unexpected ") + message_type_name(m.header().type) + " message";
              return o;
          }
        } catch (const ProtocolError& e) {
          o.kind = Outcome::kError;
          o.error = std::string("bad reply: ") + e.what();
          return o;
        }
      }
      if (watch_.poll_disconnected() || (launcher && !launcher->alive())) {
        o.kind = Outcome::kGone;
        o.error = "the target went away";
        return o;
      }
      if (g_interrupted) {
        cancel();
        o.kind = Outcome::kInterrupted;
        o.error = "interrupted";
        return o;
      }
      if (now_s() > deadline) {
        cancel();
        o.kind = Outcome::kTimeout;
        o.error = "no answer within " + fmt("%g", timeout_s) + " s";
        return o;
      }
    }
  }

 private:
  bool recv_dontwait(zmq::message_t& m) {
    for (;;) {
      try {
        return static_cast<bool>(sock_.recv(m, zmq::recv_flags::dontwait));
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;
      }
    }
  }
  void cancel() {
    Header h;
    h.type = MessageType::Cancel;
    h.request = request_;
    sock_.send(zmq::buffer(encode_empty(h)), zmq::send_flags::dontwait);
  }
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  DisconnectWatch watch_;
  uint64_t request_ = 0;
};

// Several requests in flight on one DEALER socket, with streaming: the closed-loop clients of
// --concurrency (the target tells requests apart by id).
class StreamClient {
 public:
  explicit StreamClient(const std::string& endpoint)
      : sock_(ctx_, zmq::socket_type::dealer), watch_(ctx_, sock_, "bench") {
    sock_.set(zmq::sockopt::linger, 200);
    sock_.connect(endpoint);
  }
  uint64_t send(const GenerateBody& g) {
    Header h;
    h.type = MessageType::Generate;
    h.request = ++request_;
    sock_.send(zmq::buffer(encode(h, g)), zmq::send_flags::none);
    return h.request;
  }
  void cancel(uint64_t id) {
    Header h;
    h.type = MessageType::Cancel;
    h.request = id;
    sock_.send(zmq::buffer(encode_empty(h)), zmq::send_flags::dontwait);
  }
  // Waits up to `ms` for replies; calls on(message, received_s) for each one.
  template <class F>
  void poll(int ms, F&& on) {
    zmq::pollitem_t items[] = {{sock_.handle(), 0, ZMQ_POLLIN, 0},
                               {watch_.events().handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(ms));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
    for (;;) {
      zmq::message_t reply;
      try {
        if (!sock_.recv(reply, zmq::recv_flags::dontwait)) return;
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;
        continue;
      }
      const double at = now_s();
      on(Message(reply.data(), reply.size()), at);
    }
  }
  bool gone() { return watch_.poll_disconnected(); }

 private:
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  DisconnectWatch watch_;
  uint64_t request_ = 0;
};

struct Failure {
  std::string prompt_id, decoder, error;
  double temperature = 0;
  int budget = 0;
  bool warmup = false;
};

std::string estimate_text(const Estimate& e, double scale, const char* f) {
  return fmt(f, e.value * scale) + " [" + fmt(f, e.lo * scale) + ", " + fmt(f, e.hi * scale) + "]";
}

void print_table(std::ostream& out, const BenchSummary& s) {
  const int level = static_cast<int>(s.options.bootstrap.level * 100 + 0.5);
  out << "decoder     T     B  decodes   tokens/s [" << level << "% interval]      vs " << s.options.ar
      << " (%)                vs " << s.options.baseline << " (%)          acc/round\n";
  for (const SummaryEntry& e : s.entries) {
    char head[64];
    std::snprintf(head, sizeof head, "%-10s %3g %5s %8d   ", e.decoder.c_str(), e.temperature,
                  e.budget > 0 ? std::to_string(e.budget).c_str() : "-", e.decodes);
    std::string line = head;
    std::string sp = estimate_text(e.speed, 1, "%.1f");
    sp.resize(std::max<size_t>(sp.size(), 28), ' ');
    line += sp;
    std::string ar = e.over_ar ? estimate_text(e.over_ar->estimate, 100, "%+.1f") : "-";
    ar.resize(std::max<size_t>(ar.size(), 28), ' ');
    line += ar;
    std::string bl = e.over_baseline ? estimate_text(e.over_baseline->estimate, 100, "%+.1f") : "-";
    bl.resize(std::max<size_t>(bl.size(), 26), ' ');
    line += bl + fmt("%.2f", e.mean_accepted);
    out << line << "\n";
  }
}

// --sampling "top_p=0.9,presence_penalty=0.5,logit_bias=10:2.5" into every request's body
// (sampling.h's parameters; logit_bias items ID:BIAS, repeatable).
void apply_sampling(const std::string& spec, GenerateBody& body) {
  std::stringstream items(spec);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("--sampling '" + item + "': expected KEY=VALUE");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "top_k")
      body.top_k = std::stoi(value);
    else if (key == "top_p")
      body.top_p = std::stod(value);
    else if (key == "min_p")
      body.min_p = std::stod(value);
    else if (key == "presence_penalty")
      body.presence_penalty = std::stod(value);
    else if (key == "frequency_penalty")
      body.frequency_penalty = std::stod(value);
    else if (key == "repetition_penalty")
      body.repetition_penalty = std::stod(value);
    else if (key == "logit_bias") {
      const size_t colon = value.find(':');
      if (colon == std::string::npos) throw std::invalid_argument("--sampling logit_bias: expected ID:BIAS");
      body.logit_bias.emplace_back(std::stoi(value.substr(0, colon)), std::stof(value.substr(colon + 1)));
      std::sort(body.logit_bias.begin(), body.logit_bias.end());
    } else {
      throw std::invalid_argument("--sampling: unknown parameter '" + key +
                                  "' (top_k, top_p, min_p, presence_penalty, frequency_penalty, "
                                  "repetition_penalty, logit_bias)");
    }
  }
}

// The body of prompt p's decode of grid point g (`seed` its sampling seed).
GenerateBody request_body(const BenchPrompt& p, const GridPoint& g, int max_new_tokens,
                          const std::string& verifier, uint64_t seed, bool stream,
                          const std::string& sampling, const grammar::OutputConstraint& constraint) {
  GenerateBody body;
  apply_sampling(sampling, body);
  body.constraint = constraint;
  if (p.has_ids) {
    body.prompt_ids = p.prompt_ids;
    body.has_prompt_ids = true;
  } else {
    body.prompt = p.prompt;
  }
  body.raw = false;  // the server applies the model's chat template when it has one
  body.max_new_tokens = max_new_tokens;
  body.temperature = g.temperature;
  // "R+ahead": rule R with the drafter drafting ahead; a plain name asks for it off.
  const bool ahead = ends_with(g.decoder, kAheadSuffix);
  body.rule = ahead ? g.decoder.substr(0, g.decoder.size() - std::strlen(kAheadSuffix)) : g.decoder;
  if (g.budget > 0) body.draft_ahead = ahead ? 1 : 0;
  if (g.budget > 0) body.verifier = verifier;
  body.budget = g.budget > 0 ? g.budget : -1;
  body.seed = seed;
  body.stream = stream;
  body.stop_at_eos = true;
  return body;
}

void print_concurrency_table(std::ostream& out, const std::vector<ConcurrencyRow>& rows) {
  out << "conc  decoder      T     B  requests  aggregate tok/s  per-request tok/s p50   TTFT ms p50/p99   "
         "TPOT ms p50/p99\n";
  for (const ConcurrencyRow& r : rows) {
    char line[256];
    std::snprintf(line, sizeof line, "%4d  %-10s %3g %5s  %8d  %15.1f  %21.1f   %7.2f/%-8.2f  %6.3f/%-6.3f\n",
                  r.concurrency, r.point.decoder.c_str(), r.point.temperature,
                  r.point.budget > 0 ? std::to_string(r.point.budget).c_str() : "-", r.requests,
                  r.aggregate_tokens_per_s, r.request_tokens_per_s_p50, r.ttft_ms_p50, r.ttft_ms_p99,
                  r.tpot_ms_p50, r.tpot_ms_p99);
    out << line;
  }
}

// ---- the run, step by step --------------------------------------------------------------------

// The command line, checked, and what it names, loaded.
struct BenchRun {
  std::string endpoint, launch_config, prompts_path, out_dir = "bench-out", baseline = "draft", verifier,
                                                     sampling, build_dir, run_dir,
                                                     root_dir = rootspec::source_dir();
  std::vector<std::string> sets;
  int max_new_tokens = -1, warmup = 2, resamples = 2000, repeats = 1;
  uint64_t seed = 0;
  double request_timeout_s = 600, interval_level = 0.95;
  bool trace = false, stream = false;
  std::vector<int> levels;  // --concurrency: the serving benchmark's levels; empty: the paired run
  std::vector<BenchPrompt> prompts;
  std::vector<GridPoint> grid;
  grammar::OutputConstraint constraint;

  bool launches() const { return !launch_config.empty(); }
  SummaryOptions summary_options() const {
    SummaryOptions so;
    so.baseline = baseline;
    so.bootstrap.resamples = resamples;
    so.bootstrap.level = interval_level;
    so.bootstrap.seed = seed;
    return so;
  }
};

// Parses and checks the command line into `run` and loads its prompts, grid and constraint. An
// exit code where the run stops here: 0 after --help, 2 for bad options.
std::optional<int> parse_command_line(int argc, char** argv, BenchRun& run) {
  CLI::App app{
      "rootspec-bench: tokens/s of each decoder with paired bootstrap intervals ([TPR] App. D.14)"};
  std::string decoders_s = "ar,draft,pearl,root-draw,root", temps_s = "0,1", budgets_s = "8,59",
              concurrency_s;
  int limit_prompts = 0;
  auto* ep = app.add_option("--endpoint", run.endpoint,
                            "the running target's client endpoint (e.g. tcp://127.0.0.1:5600)");
  auto* la = app.add_option("--launch", run.launch_config,
                            "start a pair with `launch/rootspec up --config CONFIG` and stop it at the end");
  ep->excludes(la);
  app.add_option("--set", run.sets,
                 "with --launch: section.key=value passed to the pair (repeatable), e.g. "
                 "endpoints.client=tcp://127.0.0.1:5710");
  app.add_option("--prompts", run.prompts_path,
                 "prompt file (JSONL); default: bench/prompts/prompts.jsonl of the source tree");
  app.add_option("--limit-prompts", limit_prompts, "use only the first N prompts of the file (0: all)")
      ->capture_default_str();
  app.add_option("--decoders", decoders_s,
                 "decoders (rules) to compare; 'ar' is plain decoding; RULE+ahead: RULE with the drafter "
                 "drafting ahead (otherwise off)")
      ->capture_default_str();
  app.add_option("--temperatures", temps_s, "temperatures (0 = greedy)")->capture_default_str();
  app.add_option("--budgets", budgets_s, "tree budgets B")->capture_default_str();
  app.add_option("--max-new-tokens", run.max_new_tokens, "limit per decode (default: the server's)");
  app.add_option("--verifier", run.verifier, "verifier for every tree decoder (default: the server's)");
  app.add_option("--sampling", run.sampling,
                 "sampling parameters of every request, KEY=VALUE,…: top_k, top_p, min_p, presence_penalty, "
                 "frequency_penalty, repetition_penalty, logit_bias=ID:BIAS (repeatable)");
  ConstraintFlags constraint_flags;  // structured output of every request (constraint.h)
  constraint_flags.add_to(app);
  app.add_option("--seed", run.seed, "seed of the prompt order and of the per-decode sampling seeds")
      ->capture_default_str();
  app.add_option("--repeats", run.repeats,
                 "passes over the prompts: each prompt runs every combination this many times, each pass "
                 "in its own seeded order with its own sampling seeds (narrower intervals)")
      ->capture_default_str();
  app.add_option("--warmup", run.warmup, "warm-up prompts (each runs every combination once, not summarised)")
      ->capture_default_str();
  app.add_option("--baseline", run.baseline, "decoder the gains are measured against")->capture_default_str();
  app.add_option("--resamples", run.resamples, "paired bootstrap resamples")->capture_default_str();
  app.add_option("--level", run.interval_level, "interval level")->capture_default_str();
  app.add_option("--out", run.out_dir, "output folder")->capture_default_str();
  app.add_flag("--trace", run.trace,
               "also write trace.jsonl, one line per round (with --concurrency: the level is in its decoder, "
               "e.g. auto@c8, and its batch)");
  app.add_flag("--stream", run.stream, "ask for Delta messages while decoding (default: only Done)");
  app.add_option("--concurrency", concurrency_s,
                 "serving benchmark: N closed-loop clients for each N of the list (e.g. 1,2,4,8,16), "
                 "streaming; writes concurrency.csv (aggregate and per-request tokens/s, TTFT, TPOT)");
  app.add_option("--request-timeout", run.request_timeout_s, "a decode fails after this many seconds")
      ->capture_default_str();
  app.add_option("--build-dir", run.build_dir,
                 "with --launch: the build folder of the daemons (default: this binary's)");
  app.add_option("--run-dir", run.run_dir, "with --launch: the pair's logs (default: OUT/run)");
  app.add_option("--root", run.root_dir, "source tree (launcher, default prompts)")->capture_default_str();

  try {
    app.parse(argc, argv);
    if (run.endpoint.empty() && run.launch_config.empty())
      throw CLI::ValidationError("--endpoint", "give --endpoint or --launch");
    if (!run.sets.empty() && run.launch_config.empty())
      throw CLI::ValidationError("--set", "only with --launch");
    if (run.max_new_tokens == 0 || run.max_new_tokens < -1)
      throw CLI::ValidationError("--max-new-tokens", "must be >= 1");
    if (run.warmup < 0) throw CLI::ValidationError("--warmup", "must be >= 0");
    if (run.repeats < 1) throw CLI::ValidationError("--repeats", "must be >= 1");
    if (limit_prompts < 0) throw CLI::ValidationError("--limit-prompts", "must be >= 0");
    if (run.resamples < 1) throw CLI::ValidationError("--resamples", "must be >= 1");
    if (!(run.interval_level > 0 && run.interval_level < 1))
      throw CLI::ValidationError("--level", "must be in (0, 1)");
    if (run.prompts_path.empty()) run.prompts_path = run.root_dir + "/bench/prompts/prompts.jsonl";
    try {
      GenerateBody checked;
      apply_sampling(run.sampling, checked);  // a typo fails before the pair starts
      run.constraint = constraint_flags.constraint();
      if (run.constraint.active())
        grammar::compile_output_constraint(run.constraint);  // …and so does a bad grammar
      run.grid = expand_grid(split_list(decoders_s, "--decoders"), parse_temperatures(temps_s),
                             parse_budgets(budgets_s));
      run.prompts = load_prompt_set(run.prompts_path);
    } catch (const std::exception& e) {
      throw CLI::ValidationError(e.what());
    }
    if (limit_prompts > 0 && static_cast<size_t>(limit_prompts) < run.prompts.size())
      run.prompts.resize(limit_prompts);
    if (run.prompts.empty()) throw CLI::ValidationError("--prompts", "no prompts in " + run.prompts_path);
    if (!concurrency_s.empty()) {
      try {
        run.levels = parse_ints(concurrency_s, "--concurrency", 1, 256);
      } catch (const std::exception& e) {
        throw CLI::ValidationError(e.what());
      }
    }
    if (run.warmup > static_cast<int>(run.prompts.size())) run.warmup = static_cast<int>(run.prompts.size());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "rootspec-bench: " << e.what() << "\n";
    return 2;
  }
  return std::nullopt;
}

// The output folder, made absolute and created; false (said why) where it cannot be.
bool make_out_dir(BenchRun& run) {
  try {
    run.out_dir = absolute(run.out_dir);
    mkdirs(run.out_dir);
    return true;
  } catch (const std::exception& e) {
    std::cerr << "rootspec-bench: " << e.what() << "\n";
    return false;
  }
}

// Ctrl-C and SIGTERM end the run after the decodes in flight (outputs are written for what ran);
// a client gone does not kill the harness.
void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// With --launch: starts the pair and points run.endpoint at it. An exit code where it did not
// start (2: no config file, 3: the launcher failed).
std::optional<int> start_pair(BenchRun& run, PairLauncher& launcher) {
  if (!run.launches()) return std::nullopt;
  LaunchOptions lo;
  lo.script = run.root_dir + "/launch/rootspec";
  lo.config = absolute(run.launch_config);
  char real[PATH_MAX];
  if (realpath(lo.config.c_str(), real)) lo.config = real;  // the launcher compares it with its default
  if (!is_file(lo.config)) {
    std::cerr << "rootspec-bench: --launch: no config file " << lo.config << "\n";
    return 2;
  }
  lo.sets = run.sets;
  // A serving run batches its clients' requests: the target takes the largest level at once. A
  // run of one request at a time (the D.14 protocol) measures the single-request runtime, whatever
  // batch the config serves with.
  const bool batch_set = std::any_of(run.sets.begin(), run.sets.end(), [](const std::string& x) {
    return x.rfind("target.max_batch=", 0) == 0;
  });
  if (!batch_set) {
    const int batch =
        run.levels.empty() ? 1 : std::min(kMaxBatch, *std::max_element(run.levels.begin(), run.levels.end()));
    lo.sets.push_back("target.max_batch=" + std::to_string(batch));
  }
  lo.build_dir = run.build_dir.empty() ? own_build_dir() : absolute(run.build_dir);
  lo.run_dir = run.run_dir.empty() ? run.out_dir + "/run" : absolute(run.run_dir);
  std::cerr << "rootspec-bench: starting the pair: " << lo.script << " up --config " << lo.config
            << " (build " << lo.build_dir << ", logs " << lo.run_dir << ")\n";
  try {
    run.endpoint = launcher.start(lo, &g_interrupted);
  } catch (const LaunchError& e) {
    std::cerr << "rootspec-bench: " << e.what() << "\n";
    return 3;
  }
  std::cerr << "rootspec-bench: the pair is up at " << run.endpoint << "\n";
  return std::nullopt;
}

// trace.jsonl with --trace: one line per round of a Done (round_trace_line's), with the decode's
// pass and warm-up flag.
class TraceFile {
 public:
  // False (said why) where --trace asks for a file that cannot be written.
  bool open(const BenchRun& run) {
    if (!run.trace) return true;
    out_.open(run.out_dir + "/trace.jsonl");
    if (!out_) std::cerr << "rootspec-bench: cannot write " << run.out_dir << "/trace.jsonl\n";
    return static_cast<bool>(out_);
  }
  void write(const DecodeRecord& record, const DoneBody& done, int pass, bool warmup) {
    if (!out_.is_open()) return;
    for (size_t i = 0; i < done.trace.size(); ++i) {
      nlohmann::ordered_json j =
          nlohmann::ordered_json::parse(round_trace_line(record, static_cast<int64_t>(i), done.trace[i]));
      j["warmup"] = warmup;
      j["pass"] = pass;
      out_ << j.dump() << "\n";
    }
  }

 private:
  std::ofstream out_;
};

// What a run leaves besides its records: its failures and why it stopped.
struct RunEnd {
  std::vector<Failure> failures;
  bool gone = false;  // the target went away
  std::string fatal;  // an error that stopped the run
};

// ---- the serving benchmark (--concurrency) -------------------------------------------------

// One level × one grid point: warm-up prompts alone first (not counted), then every prompt ×
// --repeats in a seeded order, `level` requests kept in flight by closed-loop clients. Appends
// the level's records to `records` and returns its row of concurrency.csv.
ConcurrencyRow serve_level(const BenchRun& run, StreamClient& client, PairLauncher& launcher,
                           TraceFile& trace, int level, const GridPoint& g,
                           std::vector<DecodeRecord>& records, RunEnd& end, double t_start) {
  struct Item {
    int prompt, pass;
    bool warmup;
  };
  std::vector<Item> items;
  for (int i = 0; i < run.warmup; ++i) items.push_back({i, 0, true});
  for (const RunItem& it :
       rotated_run_order(static_cast<int>(run.prompts.size()), 1,
                         RunOrderOptions{run.seed + static_cast<uint64_t>(level), 0, run.repeats}))
    items.push_back({it.prompt, it.pass, false});
  struct InFlight {
    size_t item;
    RequestTiming t;
    uint64_t seed;
  };
  std::map<uint64_t, InFlight> flying;
  std::vector<RequestTiming> timings;
  size_t next = 0;
  double level_start = -1, level_end = 0;
  int warm_flying = 0;  // measured from the first counted send to the last counted Done
  while ((next < items.size() || !flying.empty()) && !g_interrupted && !end.gone) {
    // Warm-ups run alone first; then the level's clients keep `level` requests in flight.
    while (next < items.size() && static_cast<int>(flying.size()) < level &&
           !(items[next].warmup == false && warm_flying > 0)) {
      const Item& it = items[next];
      const BenchPrompt& p = run.prompts[static_cast<size_t>(it.prompt)];
      const uint64_t s = decode_seed(run.seed, it.prompt, g.decoder, g.temperature, g.budget, it.pass);
      InFlight f{next, {}, s};
      f.t.sent_s = now_s();
      if (!it.warmup && level_start < 0) level_start = f.t.sent_s;
      warm_flying += it.warmup;
      flying.emplace(client.send(request_body(p, g, run.max_new_tokens, run.verifier, s, /*stream=*/true,
                                              run.sampling, run.constraint)),
                     f);
      ++next;
    }
    client.poll(100, [&](const Message& m, double at) {
      auto f = flying.find(m.header().request);
      if (f == flying.end()) return;
      const Item& it = items[f->second.item];
      const BenchPrompt& p = run.prompts[static_cast<size_t>(it.prompt)];
      RequestTiming& t = f->second.t;
      if (m.header().type == MessageType::Delta) {
        const DeltaBody d = m.delta();
        if (d.tokens.empty()) return;
        if (t.streamed_tokens == 0) t.first_token_s = at;
        t.last_token_s = at;
        t.streamed_tokens += static_cast<int64_t>(d.tokens.size());
        return;
      }
      if (m.header().type != MessageType::Done && m.header().type != MessageType::Error) return;
      std::string error;
      if (m.header().type == MessageType::Done) {
        const DoneBody done = m.done();
        try {
          GridPoint at_level = g;
          at_level.decoder = g.decoder + "@c" + std::to_string(level);
          DecodeRecord r = build_decode(done, at_level, p.id, p.category, f->second.seed, it.warmup);
          t.counted_tokens = counted_tokens(done);
          t.decode_s = (done.last_commit_ns - done.prefill_start_ns) / 1e9;
          trace.write(r, done, it.pass, it.warmup);
          records.push_back(std::move(r));
        } catch (const BadDone& e) {
          error = std::string("untimeable Done: ") + e.what();
        }
      } else {
        error = m.error().message;
      }
      if (!error.empty()) {
        end.failures.push_back(Failure{p.id, g.decoder, error, g.temperature, g.budget, it.warmup});
        std::cerr << "rootspec-bench: FAILED " << p.id << " " << grid_name(g) << " at concurrency " << level
                  << ": " << error << "\n";
      } else if (!it.warmup) {
        timings.push_back(t);
        level_end = at;
      }
      warm_flying -= it.warmup;
      flying.erase(f);
    });
    if (client.gone() || (run.launches() && !launcher.alive())) end.gone = true;
  }
  if (g_interrupted)
    for (const auto& f : flying) client.cancel(f.first);
  ConcurrencyRow row = concurrency_row(level, g, timings, level_start < 0 ? 0 : level_end - level_start);
  std::cerr << "rootspec-bench: concurrency " << level << " " << grid_name(g) << ": "
            << fmt("%.1f", row.aggregate_tokens_per_s) << " tokens/s aggregate over " << timings.size()
            << " requests (" << fmt("%.0f", now_s() - t_start) << " s)\n";
  return row;
}

// concurrency.csv, summary.json (each level's paired-bootstrap summary under "levels") and
// records.csv; the table on stdout.
void write_serving_outputs(const BenchRun& run, const std::vector<ConcurrencyRow>& rows,
                           const std::map<int, std::vector<DecodeRecord>>& by_level, const RunEnd& end,
                           double wall_s) {
  SummaryOptions so = run.summary_options();
  nlohmann::json j;
  nlohmann::json per_level = nlohmann::json::array();
  std::vector<DecodeRecord> all;
  for (const auto& [n, records] : by_level) {
    SummaryOptions at = so;
    at.ar = "ar@c" + std::to_string(n);
    at.baseline = run.baseline + "@c" + std::to_string(n);
    nlohmann::json one = summary_to_json(summarise(records, at));
    one["concurrency"] = n;
    per_level.push_back(one);
    all.insert(all.end(), records.begin(), records.end());
  }
  j["levels"] = per_level;
  j["run"] = {{"endpoint", run.endpoint},
              {"launch_config", run.launch_config},
              {"prompts_file", run.prompts_path},
              {"prompts", run.prompts.size()},
              {"concurrency", run.levels},
              {"repeats", run.repeats},
              {"warmup_prompts", run.warmup},
              {"max_new_tokens", run.max_new_tokens},
              {"seed", run.seed},
              {"wall_s", wall_s},
              {"failures", end.failures.size()},
              {"error", end.fatal}};
  std::ofstream(run.out_dir + "/concurrency.csv") << [&] {
    std::ostringstream o;
    write_concurrency_csv(o, rows);
    return o.str();
  }();
  std::ofstream(run.out_dir + "/summary.json") << j.dump(2) << "\n";
  {
    std::ofstream csv(run.out_dir + "/records.csv");
    write_records_csv(csv, all);
  }
  print_concurrency_table(std::cout, rows);
  std::cout << "concurrency: " << run.out_dir << "/concurrency.csv  records: " << run.out_dir
            << "/records.csv  summary: " << run.out_dir << "/summary.json\n";
  std::cout << "plot: " << run.root_dir << "/bench/plot-concurrency.sh " << run.out_dir
            << "/concurrency.csv\n";
}

int run_serving(const BenchRun& run, PairLauncher& launcher, TraceFile& trace) {
  std::vector<ConcurrencyRow> rows;
  std::map<int, std::vector<DecodeRecord>> by_level;
  RunEnd end;
  const double t_start = now_s();
  try {
    StreamClient client(run.endpoint);
    for (int level : run.levels)
      for (const GridPoint& g : run.grid) {
        if (g_interrupted || end.gone) break;
        rows.push_back(serve_level(run, client, launcher, trace, level, g, by_level[level], end, t_start));
      }
  } catch (const std::exception& e) {
    end.fatal = e.what();
    std::cerr << "\nrootspec-bench: error: " << end.fatal << "\n";
  }
  if (run.launches()) {
    std::cerr << "rootspec-bench: stopping the pair\n";
    launcher.stop();
  }
  write_serving_outputs(run, rows, by_level, end, now_s() - t_start);
  return end.failures.empty() && !end.gone && !g_interrupted && end.fatal.empty() ? 0 : 1;
}

// ---- the paired run ([TPR] App. D.14) -------------------------------------------------

// Every decode of the rotated run order, one at a time, each a Generate that waits for its Done;
// a progress line on stderr.
std::vector<DecodeRecord> decode_in_order(const BenchRun& run, const std::vector<RunItem>& order,
                                          PairLauncher& launcher, TraceFile& trace, RunEnd& end) {
  std::vector<DecodeRecord> records;
  int64_t done_items = 0;
  const double t_start = now_s();
  double last_print = -1;
  const bool tty = isatty(STDERR_FILENO);
  try {
    Client client(run.endpoint);
    for (const RunItem& item : order) {
      if (g_interrupted || end.gone) break;
      const BenchPrompt& p = run.prompts[static_cast<size_t>(item.prompt)];
      const GridPoint& g = run.grid[static_cast<size_t>(item.combination)];
      const GenerateBody body =
          request_body(p, g, run.max_new_tokens, run.verifier,
                       decode_seed(run.seed, item.prompt, g.decoder, g.temperature, g.budget, item.pass),
                       run.stream, run.sampling, run.constraint);
      Outcome o = client.generate(body, run.request_timeout_s, run.launches() ? &launcher : nullptr);
      if (o.kind == Outcome::kInterrupted) break;
      if (o.kind == Outcome::kDone) {
        try {
          DecodeRecord record = build_decode(o.done, g, p.id, p.category, body.seed, item.warmup);
          trace.write(record, o.done, item.pass, item.warmup);
          records.push_back(std::move(record));
        } catch (const BadDone& e) {
          o.kind = Outcome::kError;
          o.error = std::string("untimeable Done: ") + e.what();
        }
      }
      if (o.kind != Outcome::kDone) {
        end.failures.push_back(Failure{p.id, g.decoder, o.error, g.temperature, g.budget, item.warmup});
        std::cerr << (tty ? "\r\033[K" : "") << "rootspec-bench: FAILED " << p.id << " " << grid_name(g)
                  << (item.warmup ? " (warm-up)" : "") << ": " << o.error << "\n";
        if (o.kind == Outcome::kGone) end.gone = true;
      }
      ++done_items;
      const double elapsed = now_s() - t_start;
      if (tty || elapsed - last_print >= 10 || done_items == static_cast<int64_t>(order.size())) {
        last_print = elapsed;
        std::string line = progress_line(done_items, static_cast<int64_t>(order.size()), elapsed) + "  " +
                           p.id + " " + grid_name(g) + (item.warmup ? " (warm-up)" : "");
        if (!end.failures.empty()) line += "  failed " + std::to_string(end.failures.size());
        std::cerr << (tty ? "\r\033[K" : "") << line << (tty ? "" : "\n") << std::flush;
      }
    }
    if (tty) std::cerr << "\n";
  } catch (const std::exception& e) {  // stop the pair and keep what ran
    end.fatal = e.what();
    std::cerr << "\nrootspec-bench: error: " << end.fatal << "\n";
  }
  return records;
}

// records.csv and summary.json (the bench_stats summary plus a "run" object: options,
// failures); the table on stdout. False where the files could not be written.
bool write_paired_outputs(const BenchRun& run, const BenchSummary& summary,
                          const std::vector<DecodeRecord>& records, size_t planned, const RunEnd& end,
                          bool interrupted, double wall_s) {
  nlohmann::json j = summary_to_json(summary);
  nlohmann::json r;
  r["endpoint"] = run.endpoint;
  r["launch_config"] = run.launch_config;
  r["prompts_file"] = run.prompts_path;
  r["prompts"] = run.prompts.size();
  r["combinations"] = run.grid.size();
  r["warmup_prompts"] = run.warmup;
  r["repeats"] = run.repeats;
  r["decodes_planned"] = planned;
  r["decodes_done"] = records.size();
  r["max_new_tokens"] = run.max_new_tokens;
  r["verifier"] = run.verifier.empty() ? "server default" : run.verifier;
  r["sampling"] = run.sampling;
  r["constraint"] = grammar::constraint_kind_name(run.constraint.kind);
  r["seed"] = run.seed;
  r["wall_s"] = wall_s;
  r["interrupted"] = interrupted;
  r["target_gone"] = end.gone;
  r["error"] = end.fatal;
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  r["finished_utc"] = date;
  nlohmann::json fails = nlohmann::json::array();
  for (const Failure& f : end.failures)
    fails.push_back({{"prompt_id", f.prompt_id},
                     {"decoder", f.decoder},
                     {"temperature", f.temperature},
                     {"budget", f.budget},
                     {"warmup", f.warmup},
                     {"error", f.error}});
  r["failures"] = fails;
  j["run"] = r;
  bool written = true;
  {
    std::ofstream csv(run.out_dir + "/records.csv");
    write_records_csv(csv, records);
    std::ofstream js(run.out_dir + "/summary.json");
    js << j.dump(2) << "\n";
    if (!csv || !js) {
      std::cerr << "rootspec-bench: cannot write the outputs to " << run.out_dir << "\n";
      written = false;
    }
  }
  print_table(std::cout, summary);
  std::cout << "records: " << run.out_dir << "/records.csv  summary: " << run.out_dir << "/summary.json"
            << (run.trace ? "  trace: " + run.out_dir + "/trace.jsonl" : "") << "\n";
  std::cout << "plots: " << run.root_dir << "/bench/plot.sh " << run.out_dir << "/summary.json "
            << run.out_dir << "/records.csv\n";
  return written;
}

int run_paired(const BenchRun& run, PairLauncher& launcher, TraceFile& trace) {
  const std::vector<RunItem> order =
      rotated_run_order(static_cast<int>(run.prompts.size()), static_cast<int>(run.grid.size()),
                        RunOrderOptions{run.seed, run.warmup, run.repeats});
  std::cerr << "rootspec-bench: " << run.prompts.size() << " prompts × " << run.grid.size() << " combinations"
            << (run.repeats > 1 ? " × " + std::to_string(run.repeats) + " passes" : "") << " + " << run.warmup
            << " warm-up prompts = " << order.size() << " decodes\n";
  RunEnd end;
  const double t_start = now_s();
  const std::vector<DecodeRecord> records = decode_in_order(run, order, launcher, trace, end);
  const bool interrupted = g_interrupted.load();
  const double wall_s = now_s() - t_start;
  int launcher_status = -1;
  if (run.launches()) {
    std::cerr << "rootspec-bench: stopping the pair\n";
    launcher_status = launcher.stop();
  }
  const BenchSummary summary = summarise(records, run.summary_options());
  int rc = write_paired_outputs(run, summary, records, order.size(), end, interrupted, wall_s) ? 0 : 1;
  if (!end.failures.empty()) {
    std::cerr << "rootspec-bench: " << end.failures.size()
              << " decode(s) failed (listed in summary.json run.failures)\n";
    rc = 1;
  }
  if (end.gone) std::cerr << "rootspec-bench: the target went away; the run stopped early\n";
  if (interrupted) std::cerr << "rootspec-bench: interrupted; outputs hold the decodes that finished\n";
  if (end.gone || interrupted || !end.fatal.empty()) rc = 1;
  if (launcher_status > 0 && !interrupted)
    std::cerr << "rootspec-bench: note: the launcher exited with status " << launcher_status << "\n";
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  BenchRun run;
  if (const std::optional<int> rc = parse_command_line(argc, argv, run)) return *rc;
  if (!make_out_dir(run)) return 2;
  install_signal_handlers();
  PairLauncher launcher;
  if (const std::optional<int> rc = start_pair(run, launcher)) return *rc;
  TraceFile trace;
  if (!trace.open(run)) return 2;
  return run.levels.empty() ? run_paired(run, launcher, trace) : run_serving(run, launcher, trace);
}
