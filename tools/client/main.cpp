// rootspec-client: sends one Generate to a running target and prints the text as it streams.
//   rootspec-client --endpoint tcp://127.0.0.1:5600 --prompt "Hello" [--json] [options]
//   rootspec-client --prompt-ids 1,2,3 --rule root-draw --budget 8 --temperature 1 --seed 7
//   rootspec-client --shutdown          (stops the pair)
// Exit codes: 0 done, 1 the server answered Error or went away, 2 bad options.
#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "protocol.h"
#include "token_ids.h"
#include "transport.h"

using namespace rootspec;

namespace {

std::vector<int32_t> parse_ids(const std::string& s) {
  try {
    std::vector<int32_t> ids = parse_token_ids(s);
    if (ids.empty()) throw std::invalid_argument("no ids");
    return ids;
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--prompt-ids", e.what());
  }
}

nlohmann::json done_json(const DoneBody& d) {
  nlohmann::json j;
  j["stop_reason"] = d.stop_reason;
  j["tokens"] = d.tokens;
  j["tokens_to_first_eos"] = d.tokens_to_first_eos;
  j["rounds"] = d.rounds;
  j["ms"] = {{"prefill", d.ms_prefill},     {"drafter_wait", d.ms_drafter_wait},
             {"root_pass", d.ms_root_pass}, {"tree_pass", d.ms_tree_pass},
             {"verify", d.ms_verify},       {"commit", d.ms_commit}};
  j["prefill_start_ns"] = d.prefill_start_ns;
  j["last_commit_ns"] = d.last_commit_ns;
  j["tokens_per_second"] = d.tokens_per_second;
  nlohmann::json rounds = nlohmann::json::array();
  for (const RoundRecord& t : d.trace) {
    nlohmann::json round;
    for_each_record_field([&](const char* name, auto member) { round[name] = t.*member; });
    rounds.push_back(round);
  }
  j["trace"] = rounds;
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rootspec-client: send a prompt to a running rootspec pair"};
  std::string endpoint = "tcp://127.0.0.1:5600", prompt_ids, draft_ahead;
  GenerateBody g;
  bool json = false, no_stream = false, no_stop = false, shutdown = false, ids = false;
  double timeout_s = 600;
  app.add_option("--endpoint", endpoint, "the target's client endpoint")->capture_default_str();
  auto* p = app.add_option("--prompt", g.prompt, "prompt text (chat template applied unless --raw)");
  auto* pi = app.add_option("--prompt-ids", prompt_ids, "prompt as comma-separated token ids");
  p->excludes(pi);
  app.add_flag("--raw", g.raw, "send the text without the chat template");
  app.add_option("--max-new-tokens", g.max_new_tokens, "default: the server's");
  app.add_option("--temperature", g.temperature, "0 = greedy; default: the server's");
  app.add_option("--rule", g.rule, "ar|auto|draft|root|root-draw|pearl|pearl-top1; default: the server's");
  app.add_option("--verifier", g.verifier, "greedy|residual|predraw|tev|rheo; default: the server's");
  app.add_option("--budget", g.budget, "B; default: the server's");
  app.add_option("--seed", g.seed, "generator seed")->capture_default_str();
  app.add_option("--draft-ahead", draft_ahead,
                 "on|off: the drafter grows the next pool while the target verifies; default: the server's")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_flag("--no-stream", no_stream, "no Delta messages, only the final result");
  app.add_flag("--no-stop-at-eos", no_stop, "keep decoding past EOS up to --max-new-tokens");
  app.add_flag("--ids", ids, "print token ids as they stream instead of text");
  app.add_flag("--json", json, "print the result and statistics as one JSON object");
  app.add_option("--timeout", timeout_s, "give up after this many seconds")->capture_default_str();
  app.add_flag("--shutdown", shutdown, "ask the pair to shut down");
  try {
    app.parse(argc, argv);
    if (!prompt_ids.empty()) {
      g.prompt_ids = parse_ids(prompt_ids);
      g.has_prompt_ids = true;
    }
    if (!shutdown && g.prompt.empty() && !g.has_prompt_ids)
      throw CLI::ValidationError("--prompt", "give --prompt or --prompt-ids");
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "rootspec-client: " << e.what() << "\n";
    return 2;
  }
  g.stream = !no_stream;
  g.stop_at_eos = !no_stop;
  if (!draft_ahead.empty()) g.draft_ahead = draft_ahead == "on" ? 1 : 0;

  zmq::context_t ctx;
  zmq::socket_t sock(ctx, zmq::socket_type::dealer);
  sock.set(zmq::sockopt::linger, 200);
  DisconnectWatch watch(ctx, sock, "client");
  sock.connect(endpoint);
  Header h;
  h.request = 1;
  if (shutdown) {
    h.type = MessageType::Shutdown;
    sock.send(zmq::buffer(encode_empty(h)), zmq::send_flags::none);
    return 0;
  }
  h.type = MessageType::Generate;
  sock.send(zmq::buffer(encode(h, g)), zmq::send_flags::none);

  const int64_t deadline = monotonic_ns() + static_cast<int64_t>(timeout_s * 1e9);
  std::string streamed;
  for (;;) {
    zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0},
                               {watch.events().handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(100));
    if (watch.poll_disconnected()) {
      std::cerr << "rootspec-client: error: the target at " << endpoint << " went away\n";
      return 1;
    }
    if (monotonic_ns() > deadline) {
      std::cerr << "rootspec-client: error: no answer within " << timeout_s << " s\n";
      return 1;
    }
    zmq::message_t reply;
    while (sock.recv(reply, zmq::recv_flags::dontwait)) {
      try {
        const Message m(reply.data(), reply.size());
        switch (m.header().type) {
          case MessageType::Delta: {
            const DeltaBody d = m.delta();
            streamed += d.text;
            if (!json && !ids) std::cout << d.text << std::flush;
            if (!json && ids)
              for (int32_t t : d.tokens) std::cout << t << " " << std::flush;
            break;
          }
          case MessageType::Accepted:  // queued: the Deltas follow
            m.accepted();
            break;
          case MessageType::Error: {
            const ErrorBody e = m.error();
            std::cerr << "rootspec-client: error: " << (e.field.empty() ? "" : e.field + ": ") << e.message
                      << "\n";
            return 1;
          }
          case MessageType::Done: {
            const DoneBody d = m.done();
            if (json) {
              nlohmann::json j = done_json(d);
              j["text"] = streamed;
              std::cout << j.dump() << "\n";
            } else {
              std::cout << "\n";
              std::cerr << "[" << d.tokens.size() << " tokens, " << d.rounds << " rounds, "
                        << d.tokens_per_second << " tokens/s, stop: " << d.stop_reason << "]\n";
            }
            return 0;
          }
          default:
            std::cerr << "rootspec-client: error: unexpected " << message_type_name(m.header().type)
                      << " message\n";
            return 1;
        }
      } catch (const ProtocolError& e) {
        std::cerr << "rootspec-client: error: bad reply: " << e.what() << "\n";
        return 1;
      }
    }
  }
}
