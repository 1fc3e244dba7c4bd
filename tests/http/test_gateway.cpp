// rootspec-http with real clients no one here wrote: the official `openai` npm client, curl, a
// Prometheus text-format parser and nginx, against a random chat pair (byte tokenizer + ChatML)
// started as real processes (tests/support/pair_fixture.h).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "pair_fixture.h"
#include "programs.h"
#include "source_tree.h"
#include "tokenizer.h"

namespace rootspec {
namespace {

using nlohmann::json;
using testing::Pair;
using testing::PairOptions;
using testing::read_file;
using testing::TempDir;

// The npm peers' folder, by tests/prepare/http_peer.sh's rule.
std::string peer_modules() {
  if (const char* p = std::getenv("ROOTSPEC_HTTP_PEER"); p && *p) return std::string(p) + "/node_modules";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/rootspec/npm-http/node_modules";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/rootspec/npm-http/node_modules";
}

// Runs a shell command; its stdout and exit status.
std::pair<int, std::string> shell(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

const std::string kPeer = rootspec::source_dir() + "/tests/http/openai_peer.cjs";

// The openai client on `requests` (openai_peer.cjs): one result per request, in order.
std::vector<json> openai_client(const std::string& url, const json& requests, int workers = 0) {
  TempDir tmp("openai_peer");
  std::ofstream(tmp.sub("requests.json")) << requests.dump();
  const std::string cmd = "NODE_PATH='" + peer_modules() + "' node " + kPeer + " " +
                          (workers ? "concurrent " : "run ") + url + " " + tmp.sub("requests.json") +
                          (workers ? " " + std::to_string(workers) : "") + " 2>&1";
  const auto [status, out] = shell(cmd);
  EXPECT_EQ(status, 0) << out;
  std::vector<json> results;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] == '{') results.push_back(json::parse(line));
  EXPECT_EQ(results.size(), requests.size()) << out;
  return results;
}

json completion(const std::string& prompt, int max_tokens, bool stream = false) {
  return {
      {"kind", "completions"},
      {"stream", stream},
      {"params", {{"model", "target"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}}}};
}
json chat(const json& messages, int max_tokens, bool stream = false) {
  return {{"kind", "chat"},
          {"stream", stream},
          {"params",
           {{"model", "target"}, {"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0}}}};
}
json user(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

PairOptions http_pair(std::vector<std::string> overrides = {}) {
  PairOptions o;
  o.overrides = std::move(overrides);
  o.models = &testing::chat_models();
  o.http = true;
  return o;
}

// rootspec-client's text for a prompt (raw: no chat template).
std::string client_text(const Pair& pair, const std::string& prompt, int max_tokens, bool raw) {
  const auto [status, out] =
      shell(rootspec::testing::program_path("rootspec-client") + " --endpoint " + pair.client_endpoint +
            " --prompt '" + prompt + "' --max-new-tokens " + std::to_string(max_tokens) +
            " --temperature 0 --json" + (raw ? " --raw" : "") + " 2>/dev/null");
  EXPECT_EQ(status, 0) << out;
  return json::parse(out)["text"].get<std::string>();
}

TEST(Http, OpenAiClientGetsWhatRootspecClientGets) {
  Pair pair(http_pair());
  const json conversation = json::array({{{"role", "system"}, {"content", "You are terse."}},
                                         {{"role", "user"}, {"content", "Name a fruit."}},
                                         {{"role", "assistant"}, {"content", "Apple."}},
                                         {{"role", "user"}, {"content", "Another."}}});
  const json requests =
      json::array({completion("The quick brown fox", 24), completion("The quick brown fox", 24, true),
                   chat(user("Hello there"), 20), chat(user("Hello there"), 20, true), chat(conversation, 16),
                   chat(conversation, 16, true)});
  const auto r = openai_client(pair.url, requests);
  ASSERT_EQ(r.size(), 6u);
  for (const json& x : r) ASSERT_TRUE(x["ok"].get<bool>()) << x.dump();
  // Streamed and whole answers agree, and greedy text equals rootspec-client's.
  for (int i : {0, 2, 4}) {
    EXPECT_EQ(r[i]["text"], r[i + 1]["text"]) << i;
    EXPECT_EQ(r[i]["finish_reason"], r[i + 1]["finish_reason"]) << i;
  }
  EXPECT_EQ(r[0]["text"].get<std::string>(), client_text(pair, "The quick brown fox", 24, true));
  EXPECT_EQ(r[2]["text"].get<std::string>(), client_text(pair, "Hello there", 20, false));
  // Usage: 24 new tokens unless the model chose its EOS first; the prompt tokens are the tokenizer's.
  const auto tokenizer = load_tokenizer(testing::chat_models().target);
  EXPECT_EQ(r[0]["usage"]["prompt_tokens"].get<size_t>(),
            tokenizer->encode("The quick brown fox", true).size());
  if (r[0]["finish_reason"] == "length") {
    EXPECT_EQ(r[0]["usage"]["completion_tokens"], 24);
  }
  EXPECT_EQ(r[0]["usage"]["total_tokens"].get<int>(),
            r[0]["usage"]["prompt_tokens"].get<int>() + r[0]["usage"]["completion_tokens"].get<int>());
  // The conversation went through the ChatML template: its prompt tokens are the template's.
  const std::string templated =
      "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nName a fruit.<|im_end|>\n"
      "<|im_start|>assistant\nApple.<|im_end|>\n<|im_start|>user\nAnother.<|im_end|>\n<|im_start|>"
      "assistant\n";
  EXPECT_EQ(r[4]["usage"]["prompt_tokens"].get<size_t>(), tokenizer->encode(templated, false).size());
  // A stop string taken from the greedy text cuts it exactly there, streamed or not.
  const std::string text = r[0]["text"].get<std::string>();
  size_t at = 3;  // two printable ASCII bytes past the start: a stop string of whole characters
  while (at + 1 < text.size() &&
         !(std::isprint(static_cast<unsigned char>(text[at])) && text[at] >= 0 &&
           std::isprint(static_cast<unsigned char>(text[at + 1])) && text[at + 1] >= 0))
    ++at;
  ASSERT_LT(at + 1, text.size()) << "no ASCII pair in " << json(text).dump();
  const std::string stop = text.substr(at, 2);
  json stopped =
      json::array({completion("The quick brown fox", 24), completion("The quick brown fox", 24, true)});
  for (json& x : stopped) x["params"]["stop"] = json::array({stop});
  for (const json& x : openai_client(pair.url, stopped)) {
    EXPECT_EQ(x["text"].get<std::string>(), text.substr(0, text.find(stop))) << x.dump();
    EXPECT_EQ(x["finish_reason"], "stop");
  }
}

// Each choice's shape: index i, a text, a finish reason, and logprobs when asked for (one entry
// per completion token, `top` alternatives each, log-probabilities ≤ 0).
void expect_well_formed_choices(const json& r, const json& request, int n, int top) {
  const std::string what = request.dump();
  ASSERT_TRUE(r["ok"].get<bool>()) << what << ": " << r.dump();
  ASSERT_EQ(r["choices"].size(), static_cast<size_t>(n)) << what;
  const bool chat = request["kind"] == "chat";
  int tokens = 0;
  for (int i = 0; i < n; ++i) {
    const json& c = r["choices"][i];
    EXPECT_EQ(c["index"], i) << what;
    EXPECT_TRUE(c["text"].is_string()) << what;
    EXPECT_TRUE(c["finish_reason"] == "stop" || c["finish_reason"] == "length") << what << c.dump();
    if (top < 0) {
      EXPECT_TRUE(c["logprobs"].is_null()) << what;
      continue;
    }
    const json& lp = c["logprobs"];
    const json& entries = chat ? lp["content"] : lp["token_logprobs"];
    ASSERT_TRUE(entries.is_array()) << what << ": " << c.dump();
    tokens += static_cast<int>(entries.size());
    for (size_t k = 0; k < entries.size(); ++k) {
      const double logprob = chat ? entries[k]["logprob"].get<double>() : entries[k].get<double>();
      EXPECT_LE(logprob, 0.0) << what;
      const json& alternatives = chat ? entries[k]["top_logprobs"] : lp["top_logprobs"][k];
      EXPECT_LE(alternatives.size(), static_cast<size_t>(top))
          << what;  // completions: distinct token strings
      if (chat) {
        EXPECT_EQ(alternatives.size(), static_cast<size_t>(top)) << what;
        EXPECT_TRUE(entries[k]["bytes"].is_array()) << what;
      }
    }
  }
  if (top >= 0 && !r["usage"].is_null()) {
    EXPECT_EQ(tokens, r["usage"]["completion_tokens"].get<int>()) << what;
  }
}

// The `openai` client sends every sampling parameter (vLLM's top_k, min_p and
// repetition_penalty as extra body fields), logprobs and n = 3, streamed and not: each answer
// is well formed, a stream equals its whole answer (same seed) logprobs included, and n = 3
// with a seed gives the same choices twice, choice 0 being the n = 1 answer.
TEST(Http, OpenAiClientSendsEverySamplingParameterAndStreamsEqualWholeAnswers) {
  Pair pair(http_pair({"target.max_batch=4"}));
  struct Case {
    json request;
    int n = 1, top = -1;  // choices, logprobs' alternatives (−1: none asked)
  };
  auto sampled = [](json r, const json& extra) {
    r["params"]["temperature"] = 0.9;
    r["params"]["seed"] = 11;
    r["params"].update(extra);
    return r;
  };
  const std::vector<Case> cases = {
      {sampled(completion("The quick brown fox", 12), {{"top_p", 0.8}})},
      {sampled(completion("The quick brown fox", 12), {{"top_k", 5}})},
      {sampled(chat(user("Hello there"), 12), {{"min_p", 0.1}})},
      {sampled(completion("Again and again", 12),
               {{"presence_penalty", 1.5}, {"frequency_penalty", 0.5}, {"repetition_penalty", 1.3}})},
      {sampled(completion("Biased", 12), {{"logit_bias", {{"101", -100}, {"32", 5}}}})},
      {sampled(chat(user("Tell me"), 12), {{"logprobs", true}, {"top_logprobs", 3}}), 1, 3},
      {sampled(completion("Tell me", 12), {{"logprobs", 2}}), 1, 2},
      {sampled(completion("Tell me", 12), {{"logprobs", 2}, {"logprobs_mode", "raw"}, {"top_p", 0.5}}), 1, 2},
      {sampled(completion("Three ways", 10), {{"n", 3}}), 3},
      {sampled(chat(user("Three ways"), 10), {{"n", 3}, {"logprobs", true}, {"top_logprobs", 1}}), 3, 1},
  };
  json requests = json::array();
  for (const Case& c : cases) {
    json whole = c.request, streamed = c.request;
    streamed["stream"] = true;
    streamed["include_usage"] = true;
    requests.push_back(whole);
    requests.push_back(streamed);
  }
  const auto r = openai_client(pair.url, requests);
  ASSERT_EQ(r.size(), requests.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const json &whole = r[2 * i], &streamed = r[2 * i + 1];
    expect_well_formed_choices(whole, requests[2 * i], cases[i].n, cases[i].top);
    expect_well_formed_choices(streamed, requests[2 * i + 1], cases[i].n, cases[i].top);
    EXPECT_EQ(streamed["choices"], whole["choices"]) << requests[2 * i].dump();
    EXPECT_EQ(streamed["usage"], whole["usage"]) << requests[2 * i].dump();
  }
  // n = 3 with a seed: the same choices again; choice 0 is the n = 1 answer (seed + 0), and the
  // three differ (seeds 11, 12, 13 at T = 0.9; the random pair's 10 tokens almost never agree).
  json three = cases[8].request, one = cases[8].request;
  one["params"].erase("n");
  const auto again = openai_client(pair.url, json::array({three, one}));
  EXPECT_EQ(again[0]["choices"], r[16]["choices"]);
  EXPECT_EQ(again[1]["text"], r[16]["choices"][0]["text"]);
  EXPECT_NE(r[16]["choices"][1]["text"], r[16]["choices"][2]["text"]);
  EXPECT_EQ(r[16]["usage"]["completion_tokens"].get<int>(), 30) << "three choices of 10 tokens";
}

TEST(Http, CurlSeesExactServerSentEvents) {
  Pair pair(http_pair());
  TempDir tmp("curl");
  const auto [status, out] = shell(
      "curl -sS -N -D " + tmp.sub("headers") + " " + pair.url +
      "/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\": \"target\", \"messages\": "
      "[{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 12, \"temperature\": 0, \"stream\": "
      "true, "
      "\"stream_options\": {\"include_usage\": true}}'");
  ASSERT_EQ(status, 0) << out;
  const std::string headers = read_file(tmp.sub("headers"));
  EXPECT_NE(headers.find("HTTP/1.1 200"), std::string::npos) << headers;
  EXPECT_NE(headers.find("Content-Type: text/event-stream"), std::string::npos) << headers;
  EXPECT_NE(headers.find("Transfer-Encoding: chunked"), std::string::npos) << headers;
  // Byte for byte: "data: <one line of JSON>\n\n" events, nothing between them, "data: [DONE]\n\n" last.
  std::vector<json> events;
  size_t at = 0;
  while (at < out.size()) {
    ASSERT_EQ(out.compare(at, 6, "data: "), 0) << "at byte " << at << ": " << out.substr(at, 40);
    const size_t end = out.find("\n\n", at);
    ASSERT_NE(end, std::string::npos) << out.substr(at);
    const std::string data = out.substr(at + 6, end - at - 6);
    ASSERT_EQ(data.find('\n'), std::string::npos);
    ASSERT_EQ(data.find('\r'), std::string::npos);
    at = end + 2;
    if (data == "[DONE]") {
      EXPECT_EQ(at, out.size()) << "bytes after [DONE]";
      break;
    }
    events.push_back(json::parse(data));
    EXPECT_EQ(json::parse(data).dump(), data);  // compact JSON, as written
  }
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front()["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  std::string text;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
    EXPECT_EQ(events[i]["id"], events[0]["id"]);
    EXPECT_TRUE(events[i]["choices"][0]["finish_reason"].is_null());
    text += events[i]["choices"][0]["delta"].value("content", "");
  }
  const json& last = events[events.size() - 2];
  EXPECT_FALSE(last["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(events.back()["choices"].empty());  // the usage chunk
  EXPECT_EQ(events.back()["usage"]["completion_tokens"].get<int>() > 0, true);
  EXPECT_EQ(text, client_text(pair, "Hi", 12, false));
}

// 32 clients × 10 requests: stream or not, chat or completions, greedy. Each answer equals the
// same request run alone; every request is answered once.
TEST(Http, ConcurrentClientsEachGetTheAnswerOfTheirRequestAlone) {
  Pair pair(http_pair());
  json requests = json::array();
  for (int i = 0; i < 320; ++i) {
    const std::string prompt = "Prompt number " + std::to_string(i % 40) + ":";
    json r = i % 2 ? chat(user(prompt), 8 + i % 5, i % 3 == 0) : completion(prompt, 8 + i % 5, i % 3 == 0);
    requests.push_back(r);
  }
  const auto alone = openai_client(pair.url, requests);
  const auto together = openai_client(pair.url, requests, 32);
  ASSERT_EQ(alone.size(), 320u);
  ASSERT_EQ(together.size(), 320u);
  std::set<std::string> ids;
  for (size_t i = 0; i < 320; ++i) {
    ASSERT_TRUE(together[i]["ok"].get<bool>()) << i << ": " << together[i].dump();
    EXPECT_EQ(together[i]["text"], alone[i]["text"]) << "request " << i;
    EXPECT_EQ(together[i]["finish_reason"], alone[i]["finish_reason"]) << "request " << i;
    ids.insert(together[i]["id"].get<std::string>());
  }
  EXPECT_EQ(ids.size(), 320u);  // none duplicated
  // The target served 640 Dones in all: none lost, none twice.
  httplib::Client http("127.0.0.1", pair.http_port);
  const auto m = http.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("rootspec_generations_total 640\n"), std::string::npos) << m->body.substr(0, 2000);
}

// A TCP connection from `local` (any 127/8 address) to the gateway that sends `bytes` (maybe
// nothing: idle, or half a header: stuck) and then waits.
int hold_connection(int port, const std::string& local, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in me{};
  me.sin_family = AF_INET;
  inet_pton(AF_INET, local.c_str(), &me.sin_addr);
  bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return -1;
  }
  if (!bytes.empty()) (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  return fd;
}

// rootspec_http_connections in /metrics (−1: not found).
long gateway_connections(const Pair& pair) {
  httplib::Client http("127.0.0.1", pair.http_port);
  const auto m = http.Get("/metrics");
  if (!m) return -1;
  const std::string name = "\nrootspec_http_connections ";
  const size_t at = m->body.find(name);
  return at == std::string::npos ? -1 : std::stol(m->body.substr(at + name.size()));
}

TEST(Http, HundredsOfIdleAndStuckConnectionsHoldNoRequestBack) {
  // A thread per connection would be exhausted long before this: the front end holds them all.
  Pair pair(http_pair({"target.max_batch=4"}));
  const json requests = json::array({completion("Held 1:", 10, true), chat(user("Held 2"), 10, true),
                                     completion("Held 3:", 10), chat(user("Held 4"), 10)});
  const auto alone = openai_client(pair.url, requests);
  std::vector<int> held;
  for (int i = 0; i < 600; ++i)
    held.push_back(hold_connection(pair.http_port, "127.0.0." + std::to_string(2 + i % 3),
                                   i % 2 ? "" : "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le"));
  for (int fd : held) ASSERT_GE(fd, 0);
  EXPECT_GE(gateway_connections(pair), 600);
  httplib::Client http("127.0.0.1", pair.http_port);
  http.set_read_timeout(5, 0);
  const auto health = http.Get("/health");
  ASSERT_TRUE(health) << "/health did not answer with 600 connections held";
  EXPECT_EQ(health->status, 200);
  const auto together = openai_client(pair.url, requests, 4);
  ASSERT_EQ(alone.size(), requests.size()) << "the openai peer (tests/prepare) did not answer alone";
  ASSERT_EQ(together.size(), requests.size()) << "the openai peer did not answer with the connections held";
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(together[i]["ok"].get<bool>()) << together[i].dump();
    EXPECT_EQ(together[i]["text"], alone[i]["text"]) << "request " << i;
  }
  for (int fd : held) close(fd);
  bool drained = false;
  for (int i = 0; i < 100 && !drained; ++i) {
    drained = gateway_connections(pair) <= 1;  // the /metrics request's own
    if (!drained) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(drained) << gateway_connections(pair) << " connections left";
}

// Waits until `path` holds `needle` (up to `seconds`).
bool eventually_in(const std::string& path, const std::string& needle, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (read_file(path).find(needle) == std::string::npos) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// curl in the background (killed at the end), its output in `out`.
pid_t curl_in_background(const Pair& pair, const std::string& body, const std::string& out) {
  return testing::spawn({"/usr/bin/curl", "-sS", "-N", pair.url + "/v1/completions", "-H",
                         "Content-Type: application/json", "-d", body},
                        out);
}

TEST(Http, ClientsThatGoAwayAreCancelledAndFreeTheirSlot) {
  Pair pair(http_pair({"decoding.max_context=16384"}));
  TempDir tmp("gone");
  const std::string long_stream =
      R"({"prompt": "Once", "max_tokens": 16000, "stream": true, "stop_at_eos": false})";
  const std::string long_whole = R"({"prompt": "Twice", "max_tokens": 16000, "stop_at_eos": false})";
  // A streaming client killed mid-stream.
  pid_t a = curl_in_background(pair, long_stream, tmp.sub("a.out"));
  ASSERT_TRUE(eventually_in(tmp.sub("a.out"), "data: ", 30));
  // A non-streaming client behind it in the queue, killed while it waits.
  pid_t b = curl_in_background(pair, long_whole, tmp.sub("b.out"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // b is queued behind a
  kill(b, SIGKILL);
  waitpid(b, nullptr, 0);
  EXPECT_TRUE(eventually_in(pair.target_log(), "cancelled while queued", 10)) << read_file(pair.target_log());
  kill(a, SIGKILL);
  waitpid(a, nullptr, 0);
  EXPECT_TRUE(eventually_in(pair.target_log(), "cancelled after", 10)) << read_file(pair.target_log());
  // A non-streaming client killed while decoding.
  pid_t c = curl_in_background(pair, long_whole, tmp.sub("c.out"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(c, SIGKILL);
  waitpid(c, nullptr, 0);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  size_t cancelled = 0;
  while (std::chrono::steady_clock::now() < end) {
    const std::string log = read_file(pair.target_log());
    cancelled = 0;
    for (size_t at = log.find("cancelled after"); at != std::string::npos;
         at = log.find("cancelled after", at + 1))
      ++cancelled;
    if (cancelled >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(cancelled, 2u) << read_file(pair.target_log());
  // The slot is free: the next request is served at once, nothing runs or waits.
  httplib::Client http("127.0.0.1", pair.http_port);
  const auto r = http.Post("/v1/completions", R"({"prompt": "Next", "max_tokens": 4})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  const auto m = http.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("rootspec_requests_running 0\n"), std::string::npos);
  EXPECT_NE(m->body.find("rootspec_queue_depth 0\n"), std::string::npos);
}

// Posts `body` to `path`; the status and the parsed error (or body).
std::pair<int, json> post(const Pair& pair, const std::string& path, const std::string& body,
                          const httplib::Headers& headers = {}) {
  httplib::Client http("127.0.0.1", pair.http_port);
  http.set_read_timeout(60);
  const auto r = http.Post(path, headers, body, "application/json");
  if (!r) return {-1, json()};
  json j;
  try {
    j = json::parse(r->body);
  } catch (...) {
    j = r->body;
  }
  return {r->status, j};
}

void expect_error(const std::pair<int, json>& got, int status, const std::string& param,
                  const std::string& what) {
  EXPECT_EQ(got.first, status) << what << ": " << got.second.dump();
  ASSERT_TRUE(got.second.is_object() && got.second.contains("error")) << what << ": " << got.second.dump();
  const json& e = got.second["error"];
  EXPECT_TRUE(e["message"].is_string()) << what;
  EXPECT_TRUE(e.contains("type") && e.contains("param") && e.contains("code")) << what;
  if (!param.empty()) {
    EXPECT_EQ(e["param"], param) << what << ": " << e.dump();
  }
}

// logit_bias reaches the round: +100 on byte 'x' makes greedy text all x (through the gateway
// and rootspec-client); −100 on greedy's first token changes it. Ids past the vocabulary are the
// target's 400 on logit_bias.
TEST(Http, LogitBiasSteersGreedyTextAndIdsPastTheVocabularyAre400) {
  Pair pair(http_pair());
  const auto forced =
      post(pair, "/v1/completions",
           R"({"prompt": "Hello", "max_tokens": 6, "temperature": 0, "logit_bias": {"120": 100}})");
  ASSERT_EQ(forced.first, 200) << forced.second.dump();
  EXPECT_EQ(forced.second["choices"][0]["text"], "xxxxxx");
  const auto plain = post(pair, "/v1/completions",
                          R"({"prompt": "Hello", "max_tokens": 6, "temperature": 0, "logprobs": 0})");
  ASSERT_EQ(plain.first, 200) << plain.second.dump();
  const std::string first = plain.second["choices"][0]["logprobs"]["tokens"][0].get<std::string>();
  ASSERT_EQ(first.size(), 1u) << "a byte token";
  const json banned = {{"prompt", "Hello"},
                       {"max_tokens", 6},
                       {"temperature", 0},
                       {"logprobs", 0},
                       {"logit_bias", {{std::to_string(static_cast<unsigned char>(first[0])), -100}}}};
  const auto steered = post(pair, "/v1/completions", banned.dump());
  ASSERT_EQ(steered.first, 200) << steered.second.dump();
  EXPECT_NE(steered.second["choices"][0]["logprobs"]["tokens"][0], first);
  expect_error(post(pair, "/v1/completions", R"({"prompt": "x", "logit_bias": {"258": 1}})"), 400,
               "logit_bias", "an id past the vocabulary of 258");
  // rootspec-client's flags say the same, and its JSON prints each token's logprobs.
  const auto [status, out] =
      shell(rootspec::testing::program_path("rootspec-client") + " --endpoint " + pair.client_endpoint +
            " --prompt Hello --raw --max-new-tokens 4 --temperature 0 --logit-bias 120=100"
            " --logit-bias 7=-1.5 --logprobs 1 --logprobs-mode processed --top-k 50"
            " --top-p 0.9 --min-p 0.01 --presence-penalty 0.1 --frequency-penalty 0.1"
            " --repetition-penalty 1.1 --json 2>&1");
  ASSERT_EQ(status, 0) << out;
  const json client = json::parse(out);
  EXPECT_EQ(client["text"], "xxxx");
  ASSERT_EQ(client["logprobs"].size(), 4u) << out;
  for (const json& e : client["logprobs"]) {
    EXPECT_EQ(e["token"], 120);
    EXPECT_EQ(e["bytes"], json::array({120}));
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
    EXPECT_EQ(e["top"].size(), 1u);
  }
  const auto [bad_status, bad_out] =
      shell(rootspec::testing::program_path("rootspec-client") + " --endpoint " + pair.client_endpoint +
            " --prompt x --logit-bias 7 2>&1");
  EXPECT_EQ(bad_status, 2) << bad_out;
  EXPECT_NE(bad_out.find("--logit-bias"), std::string::npos) << bad_out;
}

TEST(Http, BadInputsGetTheirStatusAndTheServerServesTheNext) {
  Pair pair(http_pair({"http.max_body_bytes=4096"}));
  const std::string ok = R"({"prompt": "Fine", "max_tokens": 3})";
  struct Case {
    std::string path, body;
    int status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", "{\"prompt\": ", 400, ""},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": "ten"})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt": "x", "model": "gpt-4"})", 404, "model"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 0})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 100000})", 400, "max_tokens"},  // past the context
      {"/v1/completions", R"({"prompt": "x", "temperature": -1})", 400, "temperature"},
      {"/v1/completions", R"({"prompt": "x", "rule": "sideways"})", 400, "rule"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user"}], "max_tokens": 2, "budget": 0})", 400,
       "budget"},
      {"/v1/completions", R"({"prompt": ")" + std::string(5000, 'a') + R"("})", 413, ""},
  };
  for (const Case& c : cases) {
    expect_error(post(pair, c.path, c.body), c.status, c.param, c.body.substr(0, 60));
    const auto next = post(pair, "/v1/completions", ok);
    EXPECT_EQ(next.first, 200) << "after " << c.body.substr(0, 60) << ": " << next.second.dump();
  }
  httplib::Client http("127.0.0.1", pair.http_port);
  const auto missing = http.Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_NE(missing->body.find("\"error\""), std::string::npos);
  // The pair down: 503 from /health and from a request, and the gateway stays up.
  kill(pair.target_pid, SIGKILL);
  waitpid(pair.target_pid, nullptr, 0);
  pair.target_pid = -1;
  const auto health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  expect_error(post(pair, "/v1/completions", ok), 503, "", "pair down");
}

// A metric's value in /metrics text (−1: absent).
double metric(const Pair& pair, const std::string& name) {
  httplib::Client http("127.0.0.1", pair.http_port);
  const auto m = http.Get("/metrics");
  if (!m) return -1;
  const std::string line = "\n" + name + " ";
  const size_t at = m->body.find(line);
  return at == std::string::npos ? -1 : std::stod(m->body.substr(at + line.size()));
}

// Greedy answers of a shared long prefix's extensions, and a multi-turn chat, on a pair: each
// answer's text and its cached prompt tokens.
std::vector<std::pair<std::string, int>> prefix_answers(const Pair& pair, int variant) {
  std::vector<std::pair<std::string, int>> out;
  std::string system = "Variant " + std::to_string(variant) + ". ";
  for (int i = 0; i < 12; ++i) system += "Rule " + std::to_string(i) + ": answer briefly and exactly. ";
  for (int i = 0; i < 6; ++i) {
    const json body = {{"prompt", system + "Question " + std::to_string(i) + ":"}, {"max_tokens", 8},
                       {"temperature", 0}};
    const auto [status, r] = post(pair, "/v1/completions", body.dump());
    EXPECT_EQ(status, 200) << r.dump();
    out.emplace_back(r["choices"][0]["text"].get<std::string>(),
                     r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>());
  }
  json messages = json::array({{{"role", "system"}, {"content", system}}});
  for (int turn = 0; turn < 8; ++turn) {
    messages.push_back({{"role", "user"}, {"content", "Turn " + std::to_string(turn) + ", go on."}});
    const json body = {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}};
    const auto [status, r] = post(pair, "/v1/chat/completions", body.dump());
    EXPECT_EQ(status, 200) << r.dump();
    const std::string answer = r["choices"][0]["message"]["content"].get<std::string>();
    out.emplace_back(answer, r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>());
    messages.push_back({{"role", "assistant"}, {"content", answer}});
  }
  return out;
}

TEST(Http, PrefixCacheHitsGiveTheAnswersOfTheCacheOffAndCountTheirTokens) {
  // Three system prompts, each shared by six completions and an eight-turn chat: more blocks than
  // the small cap holds.
  constexpr int kVariants = 3;
  auto append = [](auto& to, const auto& from) { to.insert(to.end(), from.begin(), from.end()); };
  std::vector<std::pair<std::string, int>> off, on, small;
  {
    Pair pair(
        http_pair({"target.prefix_cache_mb=0", "drafter.prefix_cache_mb=0", "decoding.max_context=2048"}));
    for (int v = 0; v < kVariants; ++v) append(off, prefix_answers(pair, v));
    EXPECT_EQ(metric(pair, "rootspec_prefix_cache_hit_tokens_total{process=\"target\"}"), -1);  // no cache
    EXPECT_EQ(metric(pair, "rootspec_prefix_cache_hit_tokens_total{process=\"drafter\"}"), -1);
  }
  {
    Pair pair(http_pair({"target.max_batch=4", "decoding.max_context=2048"}));  // a BatchedRuntime
    for (int v = 0; v < kVariants; ++v) append(on, prefix_answers(pair, v));
    EXPECT_GT(metric(pair, "rootspec_prompt_cached_tokens_total"), 0);
    // The drafter reuses the same prefixes in its own cache (its sessions: one per member).
    const double drafter_hits = metric(pair, "rootspec_prefix_cache_hit_tokens_total{process=\"drafter\"}");
    EXPECT_GE(drafter_hits, 64 * 4);
    EXPECT_GT(metric(pair, "rootspec_prefix_cache_miss_tokens_total{process=\"drafter\"}"), 0);
  }
  {
    // One request at a time (a ModelRuntime) and a cap of one MiB, which holds a few blocks of
    // this model: blocks are evicted as requests come.
    Pair pair(
        http_pair({"target.prefix_cache_mb=1", "drafter.prefix_cache_mb=1", "decoding.max_context=2048"}));
    for (int v = 0; v < kVariants; ++v) append(small, prefix_answers(pair, v));
    EXPECT_GT(metric(pair, "rootspec_prefix_cache_hit_tokens_total{process=\"drafter\"}"), 0);
    EXPECT_LE(metric(pair, "rootspec_prefix_cache_bytes{process=\"drafter\"}"), 1 << 20);
    EXPECT_GT(metric(pair, "rootspec_prefix_cache_hit_tokens_total{process=\"target\"}"), 0);
    EXPECT_GT(metric(pair, "rootspec_prefix_cache_evictions_total{process=\"target\"}"), 0);
    const double bytes = metric(pair, "rootspec_prefix_cache_bytes{process=\"target\"}");
    EXPECT_GT(bytes, 0);
    EXPECT_LE(bytes, 1 << 20);
  }
  ASSERT_EQ(on.size(), off.size());
  ASSERT_EQ(small.size(), off.size());
  int hits = 0;
  for (size_t i = 0; i < off.size(); ++i) {
    EXPECT_EQ(on[i].first, off[i].first) << "answer " << i;
    EXPECT_EQ(small[i].first, off[i].first) << "answer " << i << " (small cache)";
    EXPECT_EQ(off[i].second, 0) << "answer " << i;
    EXPECT_EQ(on[i].second % 64, 0) << "answer " << i;  // whole blocks
    hits += on[i].second > 0;
  }
  EXPECT_EQ(on[0].second, 0);      // the first request finds nothing
  EXPECT_GE(on[1].second, 64 * 4);  // the shared system prompt's blocks
  // Every request but each variant's first completion and first chat turn hits.
  EXPECT_GE(hits, static_cast<int>(off.size()) - 2 * kVariants);
}

TEST(Http, AFullQueueAnswers429WithRetryAfter) {
  Pair pair(http_pair({"http.queue_depth=1", "decoding.max_context=16384"}));
  TempDir tmp("full");
  const std::string long_body =
      R"({"prompt": "Long", "max_tokens": 16000, "stream": true, "stop_at_eos": false})";
  pid_t a = curl_in_background(pair, long_body, tmp.sub("a.out"));  // decodes
  ASSERT_TRUE(eventually_in(tmp.sub("a.out"), "data: ", 30));
  pid_t b = curl_in_background(pair, long_body, tmp.sub("b.out"));  // waits: the queue is full
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  httplib::Client http("127.0.0.1", pair.http_port);
  const auto r = http.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "queue_full");
  // Both cancelled, the queued one first: the queue has room again.
  kill(b, SIGKILL), waitpid(b, nullptr, 0);
  ASSERT_TRUE(eventually_in(pair.target_log(), "cancelled while queued", 10)) << read_file(pair.target_log());
  kill(a, SIGKILL), waitpid(a, nullptr, 0);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  while (std::chrono::steady_clock::now() < end && status != 200) {
    const auto again =
        http.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})", "application/json");
    status = again ? again->status : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status, 200);
}

TEST(Http, AnApiKeyGuardsTheApiButNotHealth) {
  Pair pair(http_pair({"http.api_key=\"sekret\""}));
  const std::string body = R"({"prompt": "x", "max_tokens": 2})";
  expect_error(post(pair, "/v1/completions", body), 401, "", "no key");
  expect_error(post(pair, "/v1/completions", body, {{"Authorization", "Bearer wrong"}}), 401, "",
               "wrong key");
  EXPECT_EQ(post(pair, "/v1/completions", body, {{"Authorization", "Bearer sekret"}}).first, 200);
  httplib::Client http("127.0.0.1", pair.http_port);
  const auto health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  const auto models = http.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
}

TEST(Http, MetricsParseAndCountTheRequestsSent) {
  Pair pair(http_pair());
  json requests = json::array({completion("a", 5), completion("b", 6, true), chat(user("c"), 7)});
  requests[1]["include_usage"] = true;
  const auto r = openai_client(pair.url, requests);
  int tokens = 0;
  for (const json& x : r) {
    ASSERT_TRUE(x["ok"].get<bool>()) << x.dump();
    if (!x["usage"].is_null()) tokens += x["usage"]["completion_tokens"].get<int>();
  }
  EXPECT_EQ(post(pair, "/v1/completions", R"({"prompt": "x", "max_tokens": 0})").first, 400);
  EXPECT_EQ(post(pair, "/v1/completions", R"({"prompt": "x", "max_tokens": 0})").first, 400);
  httplib::Client http("127.0.0.1", pair.http_port);
  const auto m = http.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  TempDir tmp("metrics");
  std::ofstream(tmp.sub("metrics.txt")) << m->body;
  const auto [status, out] = shell("/usr/bin/python3 " + rootspec::source_dir() +
                                   "/tests/http/parse_metrics.py " + tmp.sub("metrics.txt") + " 2>&1");
  ASSERT_EQ(status, 0) << out;
  const json families = json::parse(out);
  // The value of sample `name` with `labels` in family `family` (−1 when absent).
  auto value = [&](const std::string& family, const std::string& name,
                   const std::map<std::string, std::string>& labels = {}) -> double {
    if (!families.contains(family)) return -1;
    for (const json& s : families[family]["samples"])
      if (s["name"] == name && s["labels"].get<std::map<std::string, std::string>>() == labels)
        return s["value"].get<double>();
    return -1;
  };
  EXPECT_EQ(value("rootspec_http_requests", "rootspec_http_requests_total",
                  {{"endpoint", "/v1/completions"}, {"status", "200"}}),
            2);
  EXPECT_EQ(value("rootspec_http_requests", "rootspec_http_requests_total",
                  {{"endpoint", "/v1/chat/completions"}, {"status", "200"}}),
            1);
  EXPECT_EQ(value("rootspec_http_requests", "rootspec_http_requests_total",
                  {{"endpoint", "/v1/completions"}, {"status", "400"}}),
            2);
  EXPECT_EQ(value("rootspec_generations", "rootspec_generations_total"), 3);
  EXPECT_EQ(value("rootspec_generated_tokens", "rootspec_generated_tokens_total"), tokens);
  EXPECT_EQ(value("rootspec_target_up", "rootspec_target_up"), 1);
  EXPECT_EQ(value("rootspec_drafter_up", "rootspec_drafter_up"), 1);
  ASSERT_TRUE(families.contains("rootspec_accepted_tokens_per_round"));
  EXPECT_EQ(families["rootspec_accepted_tokens_per_round"]["type"], "histogram");
  EXPECT_EQ(value("rootspec_accepted_tokens_per_round", "rootspec_accepted_tokens_per_round_count"),
            value("rootspec_rounds", "rootspec_rounds_total"));
  // Every round of every request ran in a batch of at least one.
  EXPECT_EQ(value("rootspec_batch_size", "rootspec_batch_size_count"),
            value("rootspec_rounds", "rootspec_rounds_total"));
  EXPECT_GE(value("rootspec_batch_size", "rootspec_batch_size_bucket", {{"le", "1"}}), 0);
  for (const char* stage : {"root_pass", "pool_wait", "tree_pass", "verify", "commit"})
    EXPECT_GE(value("rootspec_round_stage_seconds", "rootspec_round_stage_seconds_count", {{"stage", stage}}),
              0)
        << stage;
}

// A free loopback port (bound and released).
int free_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(Http, NginxSpreadsRequestsOverTwoPairsAndSurvivesOneDying) {
  ASSERT_EQ(shell("command -v nginx").first, 0)
      << "nginx is not installed (launch/setup installs nginx-light)";
  Pair one(http_pair({"decoding.max_context=16384"})), two(http_pair({"decoding.max_context=16384"}));
  TempDir tmp("nginx");
  const int port = free_port();
  // configs/nginx-pairs.conf with these two upstreams and this port.
  std::string conf = read_file(rootspec::source_dir() + "/configs/nginx-pairs.conf");
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = conf.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    conf.replace(at, from.size(), to);
  };
  replace("server 127.0.0.1:8001", "server 127.0.0.1:" + std::to_string(one.http_port));
  replace("server 127.0.0.1:8002", "server 127.0.0.1:" + std::to_string(two.http_port));
  replace("listen 127.0.0.1:8000", "listen 127.0.0.1:" + std::to_string(port));
  std::ofstream(tmp.sub("nginx.conf")) << conf;
  const pid_t nginx = testing::spawn(
      {"/usr/sbin/nginx", "-p", tmp.path(), "-c", tmp.sub("nginx.conf"), "-g",
       "daemon off; pid " + tmp.sub("nginx.pid") + "; error_log " + tmp.sub("error.log") + ";"},
      tmp.sub("nginx.out"));
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  httplib::Client http("127.0.0.1", port);
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    const auto h = http.Get("/health");
    up = h && h->status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(up) << read_file(tmp.sub("error.log")) << read_file(tmp.sub("nginx.out"));
  // Concurrent requests spread over both pairs (least connections).
  json requests = json::array();
  for (int i = 0; i < 24; ++i) requests.push_back(completion("Spread " + std::to_string(i), 30));
  for (const json& r : openai_client(url, requests, 8)) EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
  const int on_one = count(read_file(one.http_log()), "POST /v1/completions 200");
  const int on_two = count(read_file(two.http_log()), "POST /v1/completions 200");
  EXPECT_EQ(on_one + on_two, 24);
  EXPECT_GT(on_one, 0);
  EXPECT_GT(on_two, 0);
  // Long streams on both pairs, then pair two dies: its streams end with an error, none hangs.
  const std::string long_body =
      R"({"prompt": "Long", "max_tokens": 16000, "stream": true, "stop_at_eos": false})";
  std::vector<pid_t> streams;
  for (int i = 0; i < 4; ++i)
    streams.push_back(testing::spawn({"/usr/bin/curl", "-sS", "-N", "-m", "120", url + "/v1/completions",
                                      "-H", "Content-Type: application/json", "-d", long_body},
                                     tmp.sub("stream" + std::to_string(i) + ".out")));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  for (pid_t* p : {&two.http_pid, &two.target_pid, &two.drafter_pid}) {
    kill(*p, SIGKILL);
    waitpid(*p, nullptr, 0);
    *p = -1;
  }
  // The streams on pair two end within seconds, with an error (no [DONE]); those on pair one
  // go on (and are stopped here).
  std::vector<int> status(streams.size(), -1);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end)
    for (size_t i = 0; i < streams.size(); ++i)
      if (status[i] == -1) status[i] = testing::wait_exit(streams[i], 0.05);
  int failed = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    if (status[i] == -1) {  // on the living pair
      kill(streams[i], SIGKILL);
      waitpid(streams[i], nullptr, 0);
      continue;
    }
    ++failed;
    EXPECT_NE(status[i], 0) << "stream " << i << " ended without an error";
    EXPECT_EQ(read_file(tmp.sub("stream" + std::to_string(i) + ".out")).find("data: [DONE]"),
              std::string::npos);
  }
  EXPECT_GE(failed, 1);  // least connections sent some of the four streams to pair two
  // New requests all go to the living pair.
  json after = json::array();
  for (int i = 0; i < 8; ++i) after.push_back(completion("After " + std::to_string(i), 10));
  for (const json& r : openai_client(url, after, 4)) EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
  kill(nginx, SIGTERM);
  testing::wait_exit(nginx, 10);
}

TEST(Http, ARequestPastItsDeadlineGets504) {
  Pair pair(http_pair({"decoding.max_context=16384", "http.request_timeout_s=0.3"}));
  const auto r =
      post(pair, "/v1/completions", R"({"prompt": "Long", "max_tokens": 16000, "stop_at_eos": false})");
  EXPECT_EQ(r.first, 504) << r.second.dump();
  EXPECT_EQ(r.second["error"]["code"], "timeout");
  EXPECT_TRUE(eventually_in(pair.target_log(), "deadline", 5)) << read_file(pair.target_log());
}

TEST(Http, AShutdownAnswersEveryRequestAndTheGatewayStopsOnSigterm) {
  Pair pair(http_pair({"decoding.max_context=16384"}));
  TempDir tmp("shutdown");
  const std::string long_body =
      R"({"prompt": "Long", "max_tokens": 16000, "stream": true, "stop_at_eos": false})";
  pid_t a = curl_in_background(pair, long_body, tmp.sub("a.out"));  // decodes
  ASSERT_TRUE(eventually_in(tmp.sub("a.out"), "data: ", 30));
  std::pair<int, json> queued;
  std::thread b(
      [&] { queued = post(pair, "/v1/completions", R"({"prompt": "Queued", "max_tokens": 16000})"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  testing::Client admin(pair.client_endpoint);  // kept open: its socket drops unsent messages when closed
  admin.send(encode_empty(Header{kProtocolVersion, MessageType::Shutdown, 1, 0}));
  b.join();
  expect_error(queued, 503, "", "queued at shutdown");
  EXPECT_EQ(testing::wait_exit(a, 10), 0);  // the stream ended with an error event, then [DONE]
  const std::string stream = read_file(tmp.sub("a.out"));
  EXPECT_NE(stream.find("\"error\""), std::string::npos)
      << stream.substr(stream.size() > 300 ? stream.size() - 300 : 0);
  EXPECT_NE(stream.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(testing::wait_exit(pair.target_pid, 10), 0);
  pair.target_pid = -1;
  kill(pair.http_pid, SIGTERM);
  EXPECT_EQ(testing::wait_exit(pair.http_pid, 10), 0) << read_file(pair.http_log());
  pair.http_pid = -1;
  EXPECT_NE(read_file(pair.http_log()).find("stopping (signal 15)"), std::string::npos);
}

// The drafter dies: a stream in flight says so in a comment and in its last chunk, and ends
// normally; /health is 200 "degraded"; requests are served with ar. The target dies: a request
// waiting on it and every later one get 503, the later ones at once; /health is 503.
TEST(Http, WithoutADrafterRequestsDegradeAndWithoutATargetTheyGet503) {
  Pair pair(http_pair({"decoding.max_context=16384"}));
  TempDir tmp("degraded");
  const std::string body = R"({"prompt": "Long", "max_tokens": 2000, "stream": true, "stop_at_eos": false})";
  const pid_t stream = curl_in_background(pair, body, tmp.sub("stream.out"));
  ASSERT_TRUE(eventually_in(tmp.sub("stream.out"), "data: ", 30));
  kill(pair.drafter_pid, SIGKILL);
  waitpid(pair.drafter_pid, nullptr, 0);
  pair.drafter_pid = -1;
  EXPECT_EQ(testing::wait_exit(stream, 60), 0);
  const std::string out = read_file(tmp.sub("stream.out"));
  EXPECT_EQ(count(out, ": rootspec: "), 1) << out.substr(0, 400);
  EXPECT_NE(out.find("continuing with ar (exact)"), std::string::npos);
  EXPECT_NE(out.find("\"rootspec\":{\"degraded\""), std::string::npos);
  EXPECT_NE(out.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_NE(out.find("data: [DONE]"), std::string::npos);

  httplib::Client http("127.0.0.1", pair.http_port);
  auto health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "degraded") << health->body;
  const auto later = post(pair, "/v1/completions", R"({"prompt": "Later", "max_tokens": 20})");
  EXPECT_EQ(later.first, 200) << later.second.dump();
  EXPECT_EQ(later.second["rootspec"]["degraded"], "no drafter is connected") << later.second.dump();
  const auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("rootspec_degraded_generations_total 2"), std::string::npos);
  EXPECT_NE(metrics->body.find("rootspec_drafter_up 0"), std::string::npos);

  std::pair<int, json> waiting;
  std::thread waiter([&] {
    waiting =
        post(pair, "/v1/completions", R"({"prompt": "Long", "max_tokens": 16000, "stop_at_eos": false})");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(pair.target_pid, SIGKILL);
  waitpid(pair.target_pid, nullptr, 0);
  pair.target_pid = -1;
  auto t0 = std::chrono::steady_clock::now();
  waiter.join();
  expect_error(waiting, 503, "", "decoding when the target died");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  t0 = std::chrono::steady_clock::now();
  expect_error(post(pair, "/v1/completions", R"({"prompt": "x", "max_tokens": 5})"), 503, "", "no target");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0)
      << "the gateway waited for a target it knew was down";
  health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
}

}  // namespace
}  // namespace rootspec
