// The gateway's pure parts: OpenAI requests parsed into a Generate (and refused with the right
// status and parameter), responses and stream chunks in OpenAI's shape, target errors mapped to
// HTTP, and the Prometheus exposition of the metrics.
#include <gtest/gtest.h>

#include "metrics.h"
#include "openai.h"

namespace rootspec::openai {
namespace {

using nlohmann::json;

HttpError refusal(Endpoint ep, const std::string& body) {
  try {
    parse_request(ep, body);
  } catch (const HttpError& e) {
    return e;
  }
  return HttpError(0, "accepted");
}

TEST(OpenAiRequest, CompletionBecomesARawGenerate) {
  const ParsedRequest p = parse_request(
      Endpoint::Completions,
      R"({"model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "seed": 3, "stop": ["\n", "."],
          "stream": true, "stream_options": {"include_usage": true}, "rule": "draft", "budget": 4, "verifier": "tev"})");
  EXPECT_EQ(p.model, "m");
  EXPECT_EQ(p.body.prompt, "Hello");
  EXPECT_TRUE(p.body.raw);  // completions continue the text: no chat template
  EXPECT_EQ(p.body.max_new_tokens, 7);
  EXPECT_EQ(p.body.temperature, 0.5);
  EXPECT_EQ(p.body.seed, 3u);
  EXPECT_EQ(p.body.stop, (std::vector<std::string>{"\n", "."}));
  EXPECT_TRUE(p.stream);
  EXPECT_TRUE(p.include_usage);
  EXPECT_TRUE(p.body.stream);  // always streamed from the target
  EXPECT_EQ(p.body.rule, "draft");
  EXPECT_EQ(p.body.budget, 4);
  EXPECT_EQ(p.body.verifier, "tev");
  // Token ids, and a one-string array.
  EXPECT_EQ(parse_request(Endpoint::Completions, R"({"prompt": [5, 6, 7]})").body.prompt_ids,
            (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(parse_request(Endpoint::Completions, R"({"prompt": ["x"]})").body.prompt, "x");
}

TEST(OpenAiRequest, ChatMessagesBecomeTurns) {
  const ParsedRequest p = parse_request(
      Endpoint::ChatCompletions,
      R"({"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": [{"type": "text",
          "text": "Hi "}, {"type": "text", "text": "there"}]}, {"role": "assistant", "content": null}],
          "max_completion_tokens": 5})");
  ASSERT_EQ(p.body.messages.size(), 3u);
  EXPECT_EQ(p.body.messages[0].role, "system");
  EXPECT_EQ(p.body.messages[1].content, "Hi there");
  EXPECT_EQ(p.body.messages[2].content, "");
  EXPECT_EQ(p.body.max_new_tokens, 5);
  EXPECT_FALSE(p.stream);
}

TEST(OpenAiRequest, BadRequestsNameTheParameter) {
  struct Case {
    Endpoint ep;
    const char* body;
    const char* param;
  };
  const Endpoint C = Endpoint::Completions, H = Endpoint::ChatCompletions;
  for (const Case& c : std::vector<Case>{
           {C, R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
           {C, R"({"prompt": "x", "max_tokens": "ten"})", "max_tokens"},
           {C, R"({"prompt": "x", "temperature": -0.5})", "temperature"},
           {C, R"({"prompt": "x", "n": 17})", "n"},
           {C, R"({"prompt": "x", "n": 0})", "n"},
           {C, R"({"prompt": "x", "n": 2, "best_of": 3})", "best_of"},
           {C, R"({"prompt": "x", "best_of": 2})", "best_of"},
           {C, R"({"prompt": "x", "top_p": 1.5})", "top_p"},
           {C, R"({"prompt": "x", "top_p": 0})", "top_p"},
           {C, R"({"prompt": "x", "top_p": "all"})", "top_p"},
           {C, R"({"prompt": "x", "min_p": 1.01})", "min_p"},
           {C, R"({"prompt": "x", "top_k": -2})", "top_k"},
           {C, R"({"prompt": "x", "top_k": 2.5})", "top_k"},
           {C, R"({"prompt": "x", "presence_penalty": 2.1})", "presence_penalty"},
           {C, R"({"prompt": "x", "frequency_penalty": -3})", "frequency_penalty"},
           {C, R"({"prompt": "x", "repetition_penalty": 0})", "repetition_penalty"},
           {C, R"({"prompt": "x", "logit_bias": {"5": 101}})", "logit_bias"},
           {C, R"({"prompt": "x", "logit_bias": {"5": "up"}})", "logit_bias"},
           {C, R"({"prompt": "x", "logit_bias": {"five": 1}})", "logit_bias"},
           {C, R"({"prompt": "x", "logit_bias": {"-5": 1}})", "logit_bias"},
           {C, R"({"prompt": "x", "logit_bias": {"16777216": 1}})", "logit_bias"},
           {C, R"({"prompt": "x", "logit_bias": {"5": 1, "05": 2}})", "logit_bias"},
           {C, R"({"prompt": "x", "logit_bias": [5]})", "logit_bias"},
           {C, R"({"prompt": "x", "logprobs": 21})", "logprobs"},
           {C, R"({"prompt": "x", "logprobs": true})", "logprobs"},
           {C, R"({"prompt": "x", "logprobs_mode": "cooked"})", "logprobs_mode"},
           {C, R"({"prompt": "x", "suffix": "!"})", "suffix"},
           {H, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 3})", "logprobs"},
           {H, R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs"},
           {H, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})",
            "top_logprobs"},
           {H, R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}})",
            "response_format.type"},
           {C, R"({"prompt": "x", "echo": true})", "echo"},
           {C, R"({"prompt": "x", "temprature": 1})", "temprature"},
           {C, R"({"prompt": 7})", "prompt"},
           {C, R"({"prompt": ["a", "b"]})", "prompt"},
           {C, R"({"max_tokens": 3})", "prompt"},
           {C, R"({"prompt": "x", "stop": [1]})", "stop"},
           {C, R"({"prompt": "x", "stream": "yes"})", "stream"},
           {C, R"({"prompt": "x", "seed": -1})", "seed"},
           {H, R"({"messages": []})", "messages"},
           {H, R"({"messages": [{"role": "function", "content": "x"}]})", "messages[0].role"},
           {H, R"({"messages": [{"role": "user", "content": "x"}], "tools": []})", "tools"}}) {
    const HttpError e = refusal(c.ep, c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.body()["error"]["type"], "invalid_request_error");
  }
  EXPECT_EQ(refusal(C, "{not json").status, 400);
  // A fuzzing finding: a number past double's range threw nlohmann's out_of_range, not
  // a parse_error, and the gateway answered 500.
  EXPECT_EQ(refusal(C, R"({"prompt": "x", "max_tokens": 444444e444})").status, 400);
  EXPECT_EQ(refusal(C, "[1]").status, 400);
  // Fuzzing finding: a verifier name past the protocol's 64 bytes was passed on, and the
  // target's decoder refused the message; it is the client's 400 now.
  const std::string long_name(65, 'v');
  for (const char* key : {"verifier", "rule"}) {
    const HttpError e =
        refusal(C, std::string(R"({"prompt": "x", ")") + key + R"(": ")" + long_name + R"("})");
    EXPECT_EQ(e.status, 400) << key;
    EXPECT_EQ(e.param, key);
  }
}

TEST(OpenAiRequest, SamplingParametersAndLogprobsReachTheGenerate) {
  const ParsedRequest chat = parse_request(
      Endpoint::ChatCompletions,
      R"({"messages": [{"role": "user", "content": "x"}], "top_p": 0.9, "top_k": 40, "min_p": 0.05,
          "presence_penalty": 0.5, "frequency_penalty": -1, "repetition_penalty": 1.2,
          "logit_bias": {"100": -100, "7": 2.5, "20": 0}, "logprobs": true, "top_logprobs": 4,
          "logprobs_mode": "raw"})");
  const GenerateBody& g = chat.body;
  EXPECT_EQ(g.top_p, 0.9);
  EXPECT_EQ(g.top_k, 40);
  EXPECT_EQ(g.min_p, 0.05);
  EXPECT_EQ(g.presence_penalty, 0.5);
  EXPECT_EQ(g.frequency_penalty, -1.0);
  EXPECT_EQ(g.repetition_penalty, 1.2);
  // JSON's string keys ("100" < "20" < "7") become ascending ids, as the protocol wants them.
  EXPECT_EQ(g.logit_bias, (std::vector<std::pair<int32_t, float>>{{7, 2.5f}, {20, 0.0f}, {100, -100.0f}}));
  EXPECT_EQ(g.logprobs, 4);
  EXPECT_EQ(g.logprobs_mode, "raw");
  // Absent: the server's defaults, nothing sent.
  const GenerateBody plain =
      parse_request(Endpoint::ChatCompletions, R"({"messages": [{"role": "user"}]})").body;
  EXPECT_FALSE(plain.top_p || plain.top_k || plain.min_p || plain.presence_penalty ||
               plain.frequency_penalty || plain.repetition_penalty);
  EXPECT_EQ(plain.logprobs, -1);
  // logprobs without top_logprobs: the chosen tokens only; false (or top_logprobs 0 alone): none.
  EXPECT_EQ(parse_request(Endpoint::ChatCompletions, R"({"messages": [{"role": "user"}], "logprobs": true})")
                .body.logprobs,
            0);
  EXPECT_EQ(parse_request(Endpoint::ChatCompletions, R"({"messages": [{"role": "user"}], "logprobs": false})")
                .body.logprobs,
            -1);
  EXPECT_EQ(parse_request(Endpoint::ChatCompletions, R"({"messages": [{"role": "user"}], "top_logprobs": 0})")
                .body.logprobs,
            -1);
  // Completions: logprobs is the number of alternatives; vLLM's top_k −1 is "off" (0).
  const ParsedRequest c =
      parse_request(Endpoint::Completions, R"({"prompt": "x", "logprobs": 3, "top_k": -1})");
  EXPECT_EQ(c.body.logprobs, 3);
  EXPECT_EQ(c.body.top_k, 0);
}

TEST(OpenAiRequest, ChoiceIDecodesWithSeedPlusI) {
  const ParsedRequest p = parse_request(
      Endpoint::Completions, R"({"prompt": "x", "n": 3, "best_of": 3, "seed": 18446744073709551})");
  EXPECT_EQ(p.n, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(choice_body(p, i).seed, 18446744073709551u + i);
    EXPECT_EQ(choice_body(p, i).prompt, "x");
  }
  EXPECT_EQ(parse_request(Endpoint::Completions, R"({"prompt": "x"})").n, 1);
  EXPECT_EQ(parse_request(Endpoint::Completions, R"({"prompt": "x", "n": 16})").n, kMaxChoices);
}

TEST(OpenAiResponse, ShapesOfResponsesAndChunks) {
  DoneBody d;
  d.stop_reason = "eos";
  d.tokens = {1, 2, 3};
  d.prompt_tokens = 4;
  d.cached_tokens = 0;
  const ResponseIds ids{"cmpl-9", 1700000000, "m"};
  const json r = response(Endpoint::Completions, ids, {{"abc", d}}, false);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "abc");
  EXPECT_EQ(r["choices"][0]["index"], 0);
  EXPECT_TRUE(r["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["usage"], (json{{"prompt_tokens", 4},
                              {"completion_tokens", 3},
                              {"total_tokens", 7},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  const json c = response(Endpoint::ChatCompletions, ids, {{"abc", d}}, false);
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["choices"][0]["message"], (json{{"role", "assistant"}, {"content", "abc"}}));
  EXPECT_EQ(chunk(Endpoint::ChatCompletions, ids, 0, "", true)["choices"][0]["delta"],
            (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(chunk(Endpoint::ChatCompletions, ids, 0, "x", false)["choices"][0]["delta"],
            (json{{"content", "x"}}));
  EXPECT_EQ(chunk(Endpoint::ChatCompletions, ids, 2, "x", false)["choices"][0]["index"], 2);
  const json last = chunk(Endpoint::ChatCompletions, ids, 0, "", false, "length");
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(usage_chunk(Endpoint::Completions, ids, {d})["choices"].empty());
  EXPECT_EQ(sse(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(finish_reason("length"), "length");
  EXPECT_EQ(finish_reason("stop"), "stop");
}

TEST(OpenAiResponse, NChoicesKeepTheirIndexAndUsageSumsTheirTokens) {
  DoneBody a, b;
  a.stop_reason = "eos";
  a.tokens = {1, 2};
  a.prompt_tokens = 5;
  b.stop_reason = "length";
  b.tokens = {3, 4, 5};
  b.prompt_tokens = 5;
  a.cached_tokens = 4;  // what choice 0 copied from the prefix cache counts, as its prompt does
  b.degraded = "the drafter process is gone";
  const json r = response(Endpoint::ChatCompletions, {"chatcmpl-1", 1, "m"}, {{"ab", a}, {"cde", b}}, false);
  ASSERT_EQ(r["choices"].size(), 2u);
  EXPECT_EQ(r["choices"][1]["index"], 1);
  EXPECT_EQ(r["choices"][1]["message"]["content"], "cde");
  EXPECT_EQ(r["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(r["usage"], (json{{"prompt_tokens", 5},
                              {"completion_tokens", 5},
                              {"total_tokens", 10},
                              {"prompt_tokens_details", {{"cached_tokens", 4}}}}))
      << "the prompt counts once";
  EXPECT_EQ(r["rootspec"]["degraded"], b.degraded);
}

TEST(OpenAiResponse, LogprobsInChatAndCompletionShapes) {
  std::vector<LogprobEntry> entries(2);
  entries[0].chosen = {72, -0.5f, "H"};
  entries[0].top = {{72, -0.5f, "H"}, {104, -1.5f, "h"}};
  entries[1].chosen = {226, -2.0f, "\xe2"};  // a byte of a UTF-8 character
  entries[1].top = {{226, -2.0f, "\xe2"}, {105, -2.5f, "i"}};
  const json chat = logprobs_json(Endpoint::ChatCompletions, entries);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][0]["token"], "H");
  EXPECT_EQ(chat["content"][0]["logprob"], -0.5);
  EXPECT_EQ(chat["content"][0]["bytes"], json::array({72}));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1],
            (json{{"token", "h"}, {"logprob", -1.5}, {"bytes", {104}}}));
  EXPECT_EQ(chat["content"][1]["bytes"], json::array({226}));
  EXPECT_NE(dump(chat).find("\xef\xbf\xbd"), std::string::npos)
      << "the lone byte's text is U+FFFD: " << dump(chat);
  const json text = logprobs_json(Endpoint::Completions, entries, 10);
  EXPECT_EQ(text["tokens"], json::array({"H", "\xe2"}));
  EXPECT_EQ(text["token_logprobs"], json::array({-0.5, -2.0}));
  EXPECT_EQ(text["top_logprobs"][0], (json{{"H", -0.5}, {"h", -1.5}}));
  EXPECT_EQ(text["text_offset"], json::array({10, 11}));
  DoneBody d;
  d.stop_reason = "length";
  d.tokens = {72, 226};
  d.logprobs = entries;
  const json r = response(Endpoint::ChatCompletions, {"chatcmpl-1", 1, "m"}, {{"H", d}}, true);
  EXPECT_EQ(r["choices"][0]["logprobs"], chat);
  const json streamed = chunk(Endpoint::Completions, {"cmpl-1", 1, "m"}, 0, "H", false, "", text);
  EXPECT_EQ(streamed["choices"][0]["logprobs"], text);
}

TEST(OpenAiResponse, TargetErrorsMapToStatuses) {
  EXPECT_EQ(error_from_target(Endpoint::Completions, {"queue", "full"}).status, 429);
  EXPECT_EQ(error_from_target(Endpoint::Completions, {"drafter", "gone"}).status, 503);
  EXPECT_EQ(error_from_target(Endpoint::Completions, {"deadline", "late"}).status, 504);
  EXPECT_EQ(error_from_target(Endpoint::Completions, {"", "boom"}).status, 500);
  const HttpError e = error_from_target(Endpoint::Completions, {"max_new_tokens", "too many"});
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_EQ(error_from_target(Endpoint::ChatCompletions, {"prompt", "x"}).param, "messages");
}

TEST(Metrics, ExpositionCountsAndBuckets) {
  Metrics m;
  m.request("/v1/completions", 200);
  m.request("/v1/completions", 200);
  m.request("/v1/completions", 400);
  DoneBody d;
  d.tokens = {1, 2, 3, 4};
  d.prompt_tokens = 2;
  d.rounds = 2;
  d.tokens_per_second = 150;
  RoundRecord r;
  r.accepted = 3;
  r.batch = 4;       // decoded beside three other requests
  r.tree_depth = 4;  // a tree four deep, accepted three deep
  r.root_start_ns = 1000;
  r.root_end_ns = 1000 + 2000000;  // 2 ms
  d.trace = {r, r};
  m.generation(d, 0.004, 0.02);
  StatusBody st{1, 1, 64, true, 5};
  const std::string t = m.text(&st);
  auto has = [&](const std::string& line) { return t.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("rootspec_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2")) << t;
  EXPECT_TRUE(has("rootspec_http_requests_total{endpoint=\"/v1/completions\",status=\"400\"} 1"));
  EXPECT_TRUE(has("rootspec_generated_tokens_total 4"));
  EXPECT_TRUE(has("rootspec_rounds_total 2"));
  EXPECT_TRUE(has("rootspec_queue_depth 1"));
  EXPECT_TRUE(has("rootspec_drafter_up 1"));
  EXPECT_TRUE(has("rootspec_accepted_tokens_per_round_bucket{le=\"2\"} 0"));
  EXPECT_TRUE(has("rootspec_accepted_tokens_per_round_bucket{le=\"3\"} 2"));
  EXPECT_TRUE(has("rootspec_accepted_tokens_per_round_bucket{le=\"+Inf\"} 2"));
  EXPECT_TRUE(has("rootspec_accepted_tokens_per_round_count 2"));
  EXPECT_TRUE(has("rootspec_round_stage_seconds_bucket{stage=\"root_pass\",le=\"0.0025\"} 2"));
  EXPECT_TRUE(has("rootspec_round_stage_seconds_bucket{stage=\"root_pass\",le=\"0.001\"} 0"));
  EXPECT_TRUE(has("rootspec_queue_wait_seconds_bucket{le=\"0.005\"} 1"));
  EXPECT_TRUE(has("# TYPE rootspec_round_stage_seconds histogram"));
  EXPECT_TRUE(has("rootspec_batch_size_bucket{le=\"2\"} 0"));
  EXPECT_TRUE(has("rootspec_batch_size_bucket{le=\"4\"} 2"));
  EXPECT_TRUE(has("rootspec_batch_size_sum 8"));
  EXPECT_TRUE(has("rootspec_tree_depth_offered_total{depth=\"1\"} 2"));
  EXPECT_TRUE(has("rootspec_tree_depth_offered_total{depth=\"4\"} 2"));
  EXPECT_TRUE(has("rootspec_tree_depth_accepted_total{depth=\"3\"} 2"));
  EXPECT_TRUE(has("rootspec_tree_depth_accepted_total{depth=\"4\"} 0"));
  EXPECT_TRUE(has("rootspec_requests_running 1"));
  EXPECT_TRUE(m.text(nullptr).find("rootspec_target_up 0\n") != std::string::npos);
}

}  // namespace
}  // namespace rootspec::openai
