// rootspec-client: sends one Generate to a running target and prints the text as it streams.
//   rootspec-client --endpoint tcp://127.0.0.1:5600 --prompt "Hello" [--json] [options]
//   rootspec-client --prompt-ids 1,2,3 --rule root-draw --budget 8 --temperature 1 --seed 7
//   rootspec-client --prompt "Hi" --temperature 0.8 --top-p 0.9 --logit-bias 13=-100 --logprobs 5 --json
//   rootspec-client --prompt "A colour?" --json-schema colour.json     (structured output: also
//       --json-object, --regex PATTERN, --choice A,B, --grammar FILE.gbnf, --max-whitespace N)
//   rootspec-client --shutdown          (stops the pair)
// Exit codes: 0 done, 1 the server answered Error or went away, 2 bad options.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <climits>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "constraint_flags.h"
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

// "ID=BIAS" pairs (--logit-bias), ascending by id as the protocol wants them.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const std::vector<std::string>& pairs) {
  std::vector<std::pair<int32_t, float>> out;
  for (const std::string& p : pairs) {
    const size_t eq = p.find('=');
    try {
      if (eq == std::string::npos) throw std::invalid_argument("no '='");
      size_t used = 0;
      const long id = std::stol(p.substr(0, eq), &used);
      if (used != eq || id < 0 || id > INT32_MAX) throw std::invalid_argument("bad id");
      const std::string bias_text = p.substr(eq + 1);
      const float bias = std::stof(bias_text, &used);
      if (used != bias_text.size()) throw std::invalid_argument("bad bias");
      out.emplace_back(static_cast<int32_t>(id), bias);
    } catch (const std::exception&) {
      throw CLI::ValidationError("--logit-bias", "want ID=BIAS (a token id and a number), got '" + p + "'");
    }
  }
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].first == out[i - 1].first)
      throw CLI::ValidationError("--logit-bias", "token " + std::to_string(out[i].first) + " given twice");
  return out;
}

// A token's bytes as OpenAI writes them: a list of byte values (a token may end inside a
// UTF-8 character).
nlohmann::json byte_list(const std::string& bytes) {
  nlohmann::json out = nlohmann::json::array();
  for (unsigned char c : bytes) out.push_back(c);
  return out;
}

nlohmann::json logprobs_json(const std::vector<LogprobEntry>& entries) {
  nlohmann::json out = nlohmann::json::array();
  for (const LogprobEntry& e : entries) {
    nlohmann::json top = nlohmann::json::array();
    for (const TokenLogprobWire& t : e.top)
      top.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", byte_list(t.bytes)}});
    out.push_back({{"token", e.chosen.token},
                   {"logprob", e.chosen.logprob},
                   {"bytes", byte_list(e.chosen.bytes)},
                   {"top", top}});
  }
  return out;
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
  if (!d.logprobs.empty()) j["logprobs"] = logprobs_json(d.logprobs);
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rootspec-client: send a prompt to a running rootspec pair"};
  std::string endpoint = "tcp://127.0.0.1:5600", prompt_ids, draft_ahead;
  std::vector<std::string> logit_bias;
  // The sampling parameters (sampling.h); unset: the server's default (off).
  int32_t top_k = -1;
  double top_p = -1, min_p = -1, presence = 0, frequency = 0, repetition = 0;
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
  auto* tk = app.add_option("--top-k", top_k, "keep the k most probable tokens (0: all); default: off");
  auto* tp =
      app.add_option("--top-p", top_p, "nucleus: keep the most probable tokens up to this mass, in (0, 1]");
  auto* mp =
      app.add_option("--min-p", min_p, "keep tokens at least this share of the most probable, in [0, 1]");
  auto* pp = app.add_option("--presence-penalty", presence,
                            "subtract this from tokens generated before, in [-2, 2]");
  auto* fp = app.add_option("--frequency-penalty", frequency,
                            "subtract this times a token's count among the generated ones, in [-2, 2]");
  auto* rp = app.add_option("--repetition-penalty", repetition,
                            "divide positive (multiply negative) logits of tokens seen before; 1: off");
  app.add_option("--logit-bias", logit_bias,
                 "ID=BIAS: add BIAS (in [-100, 100]) to token ID's logit; repeatable");
  app.add_option("--logprobs", g.logprobs,
                 "each token's log-probability and K most probable alternatives (0-20)");
  app.add_option("--logprobs-mode", g.logprobs_mode,
                 "processed: the law the tokens are drawn from; raw: the target's own at T = 1; default: the "
                 "server's")
      ->check(CLI::IsMember({"processed", "raw"}));
  ConstraintFlags constraint;
  constraint.add_to(app);
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
    g.logit_bias = parse_logit_bias(logit_bias);
    if (tk->count()) g.top_k = top_k;
    if (tp->count()) g.top_p = top_p;
    if (mp->count()) g.min_p = min_p;
    if (pp->count()) g.presence_penalty = presence;
    if (fp->count()) g.frequency_penalty = frequency;
    if (rp->count()) g.repetition_penalty = repetition;
    g.constraint = constraint.constraint();
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
              std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
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
