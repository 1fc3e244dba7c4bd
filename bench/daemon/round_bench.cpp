// rootspec-round-bench: per-round costs of a running pair, from the targets' own round traces.
//   rootspec-round-bench --endpoint E [--rules draft,root-draw] [--budget 8] [--requests 20]
// For each rule it prints the median round time (Commit sent → next Commit sent), the median
// overhead outside model passes (IPC both ways + selection + verification + KV commit), and
// the median root pass, tree pass and drafting times, in milliseconds. Run several rules in
// one invocation so their ratios come from one run. --detail adds, per speculative rule, the
// round's critical path on the target (before root pass, root pass, waiting for the pool,
// selection + verification, tree pass, KV commit, the rest: streaming and sending Commit) and
// the drafter's side (Commit → drafting starts, drafting, drafting ends → pool received).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <zmq.hpp>

#include "protocol.h"
#include "transport.h"

using namespace rootspec;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) out.push_back(part);
  return out;
}

DoneBody run(zmq::socket_t& sock, const GenerateBody& g, uint64_t id) {
  Header h;
  h.type = MessageType::Generate;
  h.request = id;
  sock.send(zmq::buffer(encode(h, g)), zmq::send_flags::none);
  for (;;) {
    zmq::message_t reply;
    if (!sock.recv(reply)) throw std::runtime_error("no reply");
    const Message m(reply.data(), reply.size());
    if (m.header().type == MessageType::Done) return m.done();
    if (m.header().type == MessageType::Error)
      throw std::runtime_error(m.error().field + ": " + m.error().message);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rootspec-round-bench: per-round costs of a running pair"};
  std::string endpoint = "tcp://127.0.0.1:5600", rules = "draft,root-draw", prompt_ids = "10,20,30,40";
  int budget = 8, requests = 20, max_new = 64;
  double temperature = 0;
  app.add_option("--endpoint", endpoint)->capture_default_str();
  app.add_option("--rules", rules, "comma-separated rules")->capture_default_str();
  app.add_option("--budget", budget)->capture_default_str();
  app.add_option("--temperature", temperature)->capture_default_str();
  app.add_option("--requests", requests, "requests per rule")->capture_default_str();
  app.add_option("--max-new-tokens", max_new)->capture_default_str();
  app.add_option("--prompt-ids", prompt_ids)->capture_default_str();
  bool detail = false;
  app.add_flag("--detail", detail, "also print the round's critical path, component by component");
  CLI11_PARSE(app, argc, argv);

  zmq::context_t ctx;
  zmq::socket_t sock(ctx, zmq::socket_type::dealer);
  sock.set(zmq::sockopt::rcvtimeo, 120000);
  sock.set(zmq::sockopt::linger, 0);
  sock.connect(endpoint);
  GenerateBody g;
  for (const auto& t : split(prompt_ids)) g.prompt_ids.push_back(std::stoi(t));
  g.has_prompt_ids = true;
  g.budget = budget;
  g.temperature = temperature;
  g.max_new_tokens = max_new;
  g.stop_at_eos = false;
  g.stream = false;
  std::printf("%-11s %8s %9s %9s %9s %9s %9s %10s  (ms, medians over rounds; B=%d, T=%g)\n", "rule", "round",
              "overhead", "root", "tree", "drafting", "tok/round", "tokens/s", budget, temperature);
  uint64_t id = 0;
  for (const std::string& rule : split(rules)) {
    g.rule = rule;
    std::vector<double> round_ms, overhead_ms, root_ms, tree_ms, draft_ms;
    // --detail: [component][round], ms
    enum {
      kBeforeRoot,
      kRoot,
      kPoolWait,
      kVerify,
      kTree,
      kCommit,
      kRest,
      kToDrafter,
      kDrafting,
      kToTarget,
      kParts
    };
    std::vector<std::vector<double>> parts(kParts);
    double tokens = 0, rounds = 0, seconds = 0;
    for (int i = 0; i < requests; ++i) {
      g.seed = static_cast<uint64_t>(i);
      DoneBody d;
      try {
        d = run(sock, g, ++id);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rootspec-round-bench: %s: %s\n", rule.c_str(), e.what());
        return 1;
      }
      tokens += d.tokens_to_first_eos;
      rounds += d.rounds;
      seconds += (d.last_commit_ns - d.prefill_start_ns) / 1e9;
      for (size_t k = 0; k + 1 < d.trace.size(); ++k) {  // rounds followed by a Commit
        const RoundRecord& t = d.trace[k];
        round_ms.push_back((d.trace[k + 1].commit_sent_ns - t.commit_sent_ns) / 1e6);
        root_ms.push_back((t.root_end_ns - t.root_start_ns) / 1e6);
        tree_ms.push_back(t.tree_pass_ns / 1e6);
        if (rule == "ar") {
          overhead_ms.push_back(0);
          continue;
        }
        draft_ms.push_back((t.draft_end_ns - t.draft_start_ns) / 1e6);
        // IPC: Commit to the drafter starting, and the pool's arrival after both the drafter
        // and the root pass were done; plus selection, verification and KV commit.
        const int64_t ready = std::max(t.draft_end_ns, t.root_end_ns);
        const double ipc =
            (t.draft_start_ns - t.commit_sent_ns + std::max<int64_t>(0, t.pool_received_ns - ready)) / 1e6;
        overhead_ms.push_back(ipc + (t.verify_ns + t.commit_ns) / 1e6);
        const double ms = 1e-6;
        const int64_t next = d.trace[k + 1].commit_sent_ns;
        const int64_t root_end = t.root_end_ns ? t.root_end_ns : t.commit_sent_ns;  // draft: no root
        const int64_t root_start = t.root_start_ns ? t.root_start_ns : t.commit_sent_ns;
        parts[kBeforeRoot].push_back((root_start - t.commit_sent_ns) * ms);
        parts[kRoot].push_back((root_end - root_start) * ms);
        parts[kPoolWait].push_back((t.pool_received_ns - root_end) * ms);
        parts[kVerify].push_back(t.verify_ns * ms);
        parts[kTree].push_back(t.tree_pass_ns * ms);
        parts[kCommit].push_back(t.commit_ns * ms);
        parts[kRest].push_back((next - t.pool_received_ns - t.verify_ns - t.tree_pass_ns - t.commit_ns) * ms);
        parts[kToDrafter].push_back((t.draft_start_ns - t.commit_sent_ns) * ms);
        parts[kDrafting].push_back((t.draft_end_ns - t.draft_start_ns) * ms);
        parts[kToTarget].push_back((t.pool_received_ns - t.draft_end_ns) * ms);
      }
    }
    std::printf("%-11s %8.3f %9.3f %9.3f %9.3f %9.3f %9.2f %10.1f\n", rule.c_str(), median(round_ms),
                median(overhead_ms), median(root_ms), median(tree_ms), median(draft_ms), tokens / rounds,
                tokens / seconds);
    if (detail && rule != "ar") {
      std::printf(
          "  target: before root %.3f, root %.3f, pool wait %.3f, select+verify %.3f, tree %.3f, "
          "kv commit %.3f, rest %.3f\n  drafter: commit→start %.3f, drafting %.3f, end→pool received %.3f\n",
          median(parts[kBeforeRoot]), median(parts[kRoot]), median(parts[kPoolWait]), median(parts[kVerify]),
          median(parts[kTree]), median(parts[kCommit]), median(parts[kRest]), median(parts[kToDrafter]),
          median(parts[kDrafting]), median(parts[kToTarget]));
    }
  }
  return 0;
}
