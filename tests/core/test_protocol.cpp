// Protocol codec: round trips of every message, and bad messages rejected with the field named.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <msgpack.hpp>

#include "protocol.h"
#include "source_tree.h"
#include "table_decode.h"

namespace rootspec {
namespace {

Header header(MessageType t, uint64_t request = 7, uint32_t round = 3) {
  Header h;
  h.type = t;
  h.request = request;
  h.round = round;
  return h;
}

Message parse(const std::string& bytes) { return Message(bytes.data(), bytes.size()); }

std::string field_of_error(const std::string& bytes, bool body_generate = false) {
  try {
    const Message m = parse(bytes);
    if (body_generate)
      m.generate();
    else
      m.pool();
  } catch (const ProtocolError& e) {
    return e.field;
  }
  return "";
}

TEST(Protocol, RoundTripsEveryMessage) {
  {
    const Message m = parse(encode(header(MessageType::Hello), HelloBody{123, 32000, "", ""}));
    EXPECT_EQ(m.header().type, MessageType::Hello);
    EXPECT_EQ(m.header().request, 7u);
    EXPECT_EQ(m.header().round, 3u);
    EXPECT_EQ(m.hello().pid, 123);
    EXPECT_EQ(m.hello().vocab, 32000);
  }
  {
    const std::string id(128, '\x07');  // NCCL ids are raw bytes
    const HelloBody b = parse(encode(header(MessageType::Hello), HelloBody{5, 6, id, ""})).hello();
    EXPECT_EQ(b.nccl_id, id);
    const Message a = parse(encode_nccl_announcement(header(MessageType::Pool), 12345));
    EXPECT_TRUE(a.is_nccl_announcement());
    EXPECT_EQ(a.nccl_bytes(), 12345u);
    EXPECT_FALSE(parse(encode(header(MessageType::Pool), PoolBody{})).is_nccl_announcement());
  }
  {
    HelloBody h;
    h.pid = 5;
    h.vocab = 6;
    h.shm = "/rootspec-1-2-3";
    EXPECT_EQ(parse(encode(header(MessageType::Hello), h)).hello().shm, h.shm);
    h.nccl_id = "x";  // one fast path or the other
    EXPECT_THROW(parse(encode(header(MessageType::Hello), h)).hello(), ProtocolError);
  }
  {
    const ReadyBody r = parse(encode(header(MessageType::Ready), ReadyBody{9, 100, "models/d"})).ready();
    EXPECT_EQ(r.model, "models/d");
  }
  {
    PrefillBody b{{1, 2, 3}, PoolShape{4, 3, 2}, 99};
    b.shape.rheo_m = 1;
    b.shape.sparse = 128;
    const PrefillBody r = parse(encode(header(MessageType::Prefill), b)).prefill();
    EXPECT_EQ(r.prompt, b.prompt);
    EXPECT_EQ(r.shape.top_k, 4);
    EXPECT_EQ(r.shape.rheo_m, 1);
    EXPECT_EQ(r.shape.sparse, 128);
    EXPECT_EQ(r.draft_seed, 99u);
    EXPECT_FALSE(r.draft_ahead);
    EXPECT_FALSE(r.shape.adaptive_depth);
    b.draft_ahead = true;
    b.shape.adaptive_depth = true;
    const PrefillBody both = parse(encode(header(MessageType::Prefill), b)).prefill();
    EXPECT_TRUE(both.draft_ahead);
    EXPECT_TRUE(both.shape.adaptive_depth);
  }
  EXPECT_EQ(parse(encode(header(MessageType::Commit), CommitBody{{5, 6}})).commit().tokens,
            (std::vector<int32_t>{5, 6}));
  {
    const ErrorBody e = parse(encode(header(MessageType::Error), ErrorBody{"body.x", "bad"})).error();
    EXPECT_EQ(e.field, "body.x");
    EXPECT_EQ(e.message, "bad");
  }
  {
    GenerateBody g;
    g.prompt = "héllo";
    g.rule = "root-draw";
    g.budget = 8;
    g.temperature = 0.7;
    g.seed = 42;
    const GenerateBody r = parse(encode(header(MessageType::Generate), g)).generate();
    EXPECT_EQ(r.prompt, "héllo");
    EXPECT_FALSE(r.has_prompt_ids);
    EXPECT_EQ(r.rule, "root-draw");
    EXPECT_EQ(r.budget, 8);
    EXPECT_DOUBLE_EQ(r.temperature, 0.7);
    EXPECT_EQ(r.seed, 42u);
    EXPECT_EQ(r.draft_ahead, -1) << "absent: the server's default";
    for (int ahead : {0, 1}) {
      g.draft_ahead = ahead;
      EXPECT_EQ(parse(encode(header(MessageType::Generate), g)).generate().draft_ahead, ahead);
    }
    g.draft_ahead = 2;
    EXPECT_THROW(parse(encode(header(MessageType::Generate), g)).generate(), ProtocolError);
    g.draft_ahead = -1;
    g.prompt.clear();
    g.prompt_ids = {1, 2};
    g.has_prompt_ids = true;
    EXPECT_EQ(parse(encode(header(MessageType::Generate), g)).generate().prompt_ids, g.prompt_ids);
  }
  {
    const DeltaBody d =
        parse(encode(header(MessageType::Delta), DeltaBody{{1}, "a", "the drafter is gone"})).delta();
    EXPECT_EQ(d.text, "a");
    EXPECT_EQ(d.notice, "the drafter is gone");
    EXPECT_EQ(parse(encode(header(MessageType::Delta), DeltaBody{{1}, "a", ""})).delta().notice, "");
  }
  {
    DoneBody d;
    d.stop_reason = "eos";
    d.tokens = {1, 2, 3};
    d.rounds = 2;
    d.ms_root_pass = 1.5;
    d.tokens_to_first_eos = 2;
    RoundRecord t;  // every field a distinct value
    int64_t value = 1;
    for_each_record_field([&](const char*, auto member) {
      t.*member = static_cast<std::remove_reference_t<decltype(t.*member)>>(value++);
    });
    d.trace = {RoundRecord{}, t};
    const DoneBody r = parse(encode(header(MessageType::Done), d)).done();
    EXPECT_EQ(r.tokens, d.tokens);
    EXPECT_EQ(r.tokens_to_first_eos, 2);
    EXPECT_DOUBLE_EQ(r.ms_root_pass, 1.5);
    ASSERT_EQ(r.trace.size(), 2u);
    for_each_record_field([&](const char* name, auto member) {
      EXPECT_EQ(r.trace[1].*member, t.*member) << name;
      EXPECT_EQ(r.trace[0].*member, RoundRecord{}.*member) << name;
    });
    EXPECT_EQ(r.degraded, "");
    EXPECT_EQ(r.degraded_at, -1);
    d.degraded = "the drafter process is gone";
    d.degraded_at = 2;
    const DoneBody g = parse(encode(header(MessageType::Done), d)).done();
    EXPECT_EQ(g.degraded, d.degraded);
    EXPECT_EQ(g.degraded_at, 2);
  }
  parse(encode_empty(header(MessageType::Cancel))).empty_body();
}

TEST(Protocol, StatusOfABatchingTargetRoundTrips) {
  // A target with max_batch > 1 reports every request decoding in its batch.
  const StatusBody st{3, 64, 128, true, 99};
  const StatusBody back = parse(encode(header(MessageType::Status), st)).status();
  EXPECT_EQ(back.waiting, 3);
  EXPECT_EQ(back.running, 64);
  EXPECT_EQ(back.queue_limit, 128);
  EXPECT_TRUE(back.drafter_alive);
  EXPECT_EQ(back.served, 99);
  const std::string plain = encode(header(MessageType::Status), st);
  EXPECT_EQ(plain.find("cache_"), std::string::npos);  // no prefix cache: its counters are not sent
  EXPECT_FALSE(back.target_cache.any());
  StatusBody cached = st;
  cached.target_cache = {640, 70, 2, 1 << 20};
  cached.drafter_cache = {512, 198, 0, 3 << 20};
  const StatusBody c = parse(encode(header(MessageType::Status), cached)).status();
  EXPECT_EQ(c.target_cache.hit_tokens, 640);
  EXPECT_EQ(c.target_cache.miss_tokens, 70);
  EXPECT_EQ(c.target_cache.evictions, 2);
  EXPECT_EQ(c.target_cache.bytes, 1 << 20);
  EXPECT_EQ(c.drafter_cache.hit_tokens, 512);
  EXPECT_EQ(c.drafter_cache.miss_tokens, 198);
  EXPECT_EQ(c.drafter_cache.evictions, 0);
  EXPECT_EQ(c.drafter_cache.bytes, 3 << 20);
  StatusBody drafter_only = st;  // a target without a cache beside a drafter with one
  drafter_only.drafter_cache = {64, 1, 0, 4096};
  const StatusBody d = parse(encode(header(MessageType::Status), drafter_only)).status();
  EXPECT_FALSE(d.target_cache.any());
  EXPECT_EQ(d.drafter_cache.hit_tokens, 64);
  EXPECT_EQ(d.drafter_cache.bytes, 4096);
}

TEST(Protocol, PoolCarriesTheDraftersPrefixCacheCountersOnlyWhenItHasACache) {
  PoolBody b;
  b.pool.token = {5};
  b.pool.parent = {-1};
  b.pool.logq = {-0.5f};
  b.pool.expanded = {0};
  b.pool.sampled = {0};
  b.pool.q_true = {0.6f};
  const std::string plain = encode(header(MessageType::Pool), b);
  EXPECT_EQ(plain.find("cache_"), std::string::npos);
  EXPECT_FALSE(parse(plain).pool().drafter_cache.any());
  b.drafter_cache = {128, 300, 1, 1 << 16};
  const PoolBody back = parse(encode(header(MessageType::Pool), b)).pool();
  EXPECT_EQ(back.drafter_cache.hit_tokens, 128);
  EXPECT_EQ(back.drafter_cache.miss_tokens, 300);
  EXPECT_EQ(back.drafter_cache.evictions, 1);
  EXPECT_EQ(back.drafter_cache.bytes, 1 << 16);
  EXPECT_EQ(back.pool.token, b.pool.token);
}

TEST(Protocol, DoneCarriesThePromptTokensCopiedFromThePrefixCache) {
  DoneBody d;
  d.stop_reason = "eos";
  d.tokens = {1, 2};
  d.prompt_tokens = 300;
  d.cached_tokens = 256;
  EXPECT_EQ(parse(encode(header(MessageType::Done), d)).done().cached_tokens, 256);
  d.cached_tokens = 0;
  EXPECT_EQ(parse(encode(header(MessageType::Done), d)).done().cached_tokens, 0);
}

TEST(Protocol, PoolRoundTripsIncludingRheoRows) {
  const TableModel model = TableModel::random(30, 2, 4);
  TableDrafter drafter(model, model.context());
  Rng rng(1);
  PoolShape shape;
  shape.rheo_m = 1;
  shape.sparse = 8;
  PoolBody b;
  grow_pool(drafter, shape, b.pool, &rng);
  b.draft_start_ns = 5;
  b.draft_end_ns = 9;
  const PoolBody r = parse(encode(header(MessageType::Pool), b)).pool();
  EXPECT_EQ(r.pool.token, b.pool.token);
  EXPECT_EQ(r.pool.parent, b.pool.parent);
  EXPECT_EQ(r.pool.depth, b.pool.depth);
  EXPECT_EQ(r.pool.cum_logq, b.pool.cum_logq);
  EXPECT_EQ(r.pool.sampled, b.pool.sampled);
  EXPECT_EQ(r.pool.q_true, b.pool.q_true);
  EXPECT_EQ(r.pool.row_token, b.pool.row_token);
  EXPECT_EQ(r.pool.row_prob, b.pool.row_prob);
  EXPECT_EQ(r.pool.rheo_m, 1);
  EXPECT_EQ(r.draft_end_ns, 9);
  EXPECT_FALSE(r.drafted_ahead);
  b.drafted_ahead = true;
  EXPECT_TRUE(parse(encode(header(MessageType::Pool), b)).pool().drafted_ahead);
}

using Packer = msgpack::packer<msgpack::sbuffer>;

std::string raw_message(const std::function<void(Packer&)>& write) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  write(pk);
  return std::string(buf.data(), buf.size());
}

// A hand-packed message {"v": version, "type": type, "request": 1, "round": 0, "body": …} whose
// body `body` packs (a map, or anything else to test the decoder).
std::string raw_with_header(uint32_t version, const char* type, const std::function<void(Packer&)>& body) {
  return raw_message([&](Packer& pk) {
    pk.pack_map(5);
    pk.pack("v"), pk.pack(version), pk.pack("type"), pk.pack(type), pk.pack("request"), pk.pack(1);
    pk.pack("round"), pk.pack(0), pk.pack("body");
    body(pk);
  });
}
void empty_map(Packer& pk) { pk.pack_map(0); }

TEST(Protocol, BadMessagesNameTheField) {
  auto expect_field = [](const std::string& bytes, const std::string& want) {
    try {
      parse(bytes);
      ADD_FAILURE() << "accepted; wanted an error on " << want;
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.field, want) << e.what();
    }
  };
  expect_field("", "message");
  expect_field("\xc1garbage", "message");
  std::string hello = encode(header(MessageType::Hello), HelloBody{1, 2, "", ""});
  expect_field(hello.substr(0, hello.size() - 1), "message");  // truncated
  expect_field(hello + "x", "message");                        // trailing bytes
  expect_field(raw_with_header(99, "hello", empty_map), "v");
  expect_field(raw_with_header(kProtocolVersion, "teleport", empty_map), "type");
  expect_field(raw_message([](auto& pk) {
                 pk.pack_map(4);
                 pk.pack("v"), pk.pack(kProtocolVersion), pk.pack("type"), pk.pack("hello"),
                     pk.pack("request");
                 pk.pack(1), pk.pack("round"), pk.pack(0);
               }),
               "body");
  expect_field(raw_message([](auto& pk) { pk.pack_array(1), pk.pack(1); }), "message");
  // Fuzzing findings: a top-level key that is not a string named no field; an
  // unknown key with a NUL byte cut the error message short; the empty key named nothing.
  expect_field(raw_message([](auto& pk) { pk.pack_map(1), pk.pack(1), pk.pack(2); }), "message");
  expect_field(
      raw_message([](auto& pk) { pk.pack_map(1), pk.pack(std::string("req\0\x01", 5)), pk.pack(2); }),
      "req\\x00\\x01");
  expect_field(raw_message([](auto& pk) { pk.pack_map(1), pk.pack(std::string()), pk.pack(2); }), "\"\"");
  std::string oversized(kMaxMessageBytes + 1, '\0');
  expect_field(oversized, "message");
}

TEST(Protocol, BadBodiesNameTheField) {
  // A pool whose parent points forward.
  PoolBody b;
  b.pool.add(3, kRoot, -0.1);
  b.pool.add(4, 0, -0.2);
  b.pool.row_start.assign(3, -1);
  b.pool.row_len.assign(3, 0);
  std::string bytes = encode(header(MessageType::Pool), b);
  EXPECT_EQ(field_of_error(bytes), "");
  b.pool.parent[0] = 1;
  EXPECT_EQ(field_of_error(encode(header(MessageType::Pool), b)), "body.parent[0]");
  b.pool.parent[0] = kRoot;
  b.pool.logq[1] = 0.5;  // a probability above 1
  EXPECT_EQ(field_of_error(encode(header(MessageType::Pool), b)), "body.logq[1]");
  // A Generate with a wrong type, an unknown field, and both prompt forms.
  auto generate_with = [](const std::function<void(Packer&)>& body) {
    return raw_with_header(kProtocolVersion, "generate", body);
  };
  EXPECT_EQ(field_of_error(generate_with([](auto& pk) {
                             pk.pack_map(2), pk.pack("prompt"), pk.pack("hi"), pk.pack("budget"),
                                 pk.pack("eight");
                           }),
                           true),
            "body.budget");
  EXPECT_EQ(field_of_error(generate_with([](auto& pk) {
                             pk.pack_map(2), pk.pack("prompt"), pk.pack("hi"), pk.pack("temprature"),
                                 pk.pack(1.0);
                           }),
                           true),
            "body.temprature");
  EXPECT_EQ(field_of_error(generate_with([](auto& pk) {
                             pk.pack_map(2), pk.pack("prompt"), pk.pack("hi"), pk.pack("prompt_ids");
                             pk.pack(std::vector<int>{1});
                           }),
                           true),
            "body.prompt");
  EXPECT_EQ(field_of_error(generate_with([](auto& pk) {
                             pk.pack_map(1), pk.pack("prompt_ids"), pk.pack(std::vector<int>{1, -4});
                           }),
                           true),
            "body.prompt_ids[1]");
}

// The error field of decoding `bytes` with `body` (a Message accessor), "" when it decodes.
template <class Body>
std::string body_error(const std::string& bytes, Body (Message::*body)() const) {
  try {
    (parse(bytes).*body)();
  } catch (const ProtocolError& e) {
    return e.field;
  }
  return "";
}

// A Prefill carries the request's sampling parameters, under Generate's names, only when they
// process rows (absent: none), and how many of its tokens are generated ones; both are checked
// as a Generate's are, errors naming the field.
TEST(Protocol, PrefillCarriesSamplingParametersThatProcessRows) {
  PrefillBody b{{1, 2, 3, 2, 2}, PoolShape{}, 5};
  const std::string plain = encode(header(MessageType::Prefill), b);
  EXPECT_EQ(plain.find("sampling"), std::string::npos) << "written only when rows are processed";
  EXPECT_EQ(plain.find("generated"), std::string::npos);
  EXPECT_FALSE(parse(plain).prefill().sampling.processes_rows());
  b.sampling.top_k = 40;
  b.sampling.top_p = 0.9;
  b.sampling.min_p = 0.05;
  b.sampling.presence_penalty = 0.5;
  b.sampling.frequency_penalty = -0.5;
  b.sampling.repetition_penalty = 1.2;
  b.sampling.logit_bias = {{3, -100.0f}, {17, 2.5f}};
  b.generated = 2;
  const PrefillBody r = parse(encode(header(MessageType::Prefill), b)).prefill();
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.top_p, 0.9);
  EXPECT_EQ(r.sampling.min_p, 0.05);
  EXPECT_EQ(r.sampling.presence_penalty, 0.5);
  EXPECT_EQ(r.sampling.frequency_penalty, -0.5);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.2);
  EXPECT_EQ(r.sampling.logit_bias, b.sampling.logit_bias);
  EXPECT_EQ(r.generated, 2);
  // One parameter alone travels alone; the others keep their "off" values.
  SamplingParams one;
  one.repetition_penalty = 1.3;
  b.sampling = one;
  const SamplingParams got = parse(encode(header(MessageType::Prefill), b)).prefill().sampling;
  EXPECT_EQ(got.repetition_penalty, 1.3);
  EXPECT_EQ(got.top_k, 0);
  EXPECT_EQ(got.top_p, 1.0);
  EXPECT_TRUE(got.logit_bias.empty());
  // Checked as check_sampling_params checks a request's, and the prompt comes before the
  // generated tokens.
  b.sampling.top_p = 0;
  EXPECT_EQ(body_error(encode(header(MessageType::Prefill), b), &Message::prefill), "body.sampling.top_p");
  b.sampling = one;
  b.sampling.logit_bias = {{17, 1.0f}, {3, 1.0f}};
  EXPECT_EQ(body_error(encode(header(MessageType::Prefill), b), &Message::prefill),
            "body.sampling.logit_bias[1]");
  b.sampling = one;
  b.generated = 5;
  EXPECT_EQ(body_error(encode(header(MessageType::Prefill), b), &Message::prefill), "body.generated");
}

TEST(Protocol, GenerateCarriesEverySamplingParameterAndAbsentOnesStayUnset) {
  GenerateBody g;
  g.prompt = "hi";
  const GenerateBody plain = parse(encode(header(MessageType::Generate), g)).generate();
  EXPECT_FALSE(plain.top_k || plain.top_p || plain.min_p || plain.presence_penalty ||
               plain.frequency_penalty || plain.repetition_penalty)
      << "absent: the server's default";
  EXPECT_TRUE(plain.logit_bias.empty());
  EXPECT_EQ(plain.logprobs, -1);
  EXPECT_EQ(plain.logprobs_mode, "");
  g.top_k = 40;
  g.top_p = 0.9;
  g.min_p = 0.05;
  g.presence_penalty = -0.5;
  g.frequency_penalty = 1.5;
  g.repetition_penalty = 1.2;
  g.logit_bias = {{3, -100.0f}, {17, 2.5f}};
  g.logprobs = 20;
  g.logprobs_mode = "raw";
  const GenerateBody r = parse(encode(header(MessageType::Generate), g)).generate();
  EXPECT_EQ(r.top_k, 40);
  EXPECT_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.min_p, 0.05);
  EXPECT_EQ(r.presence_penalty, -0.5);
  EXPECT_EQ(r.frequency_penalty, 1.5);
  EXPECT_EQ(r.repetition_penalty, 1.2);
  EXPECT_EQ(r.logit_bias, g.logit_bias);
  EXPECT_EQ(r.logprobs, 20);
  EXPECT_EQ(r.logprobs_mode, "raw");
  // A zero is a value, not an absence.
  g.top_k = 0;
  g.logprobs = 0;
  EXPECT_EQ(parse(encode(header(MessageType::Generate), g)).generate().top_k, 0);
  EXPECT_EQ(parse(encode(header(MessageType::Generate), g)).generate().logprobs, 0);
}

TEST(Protocol, BadSamplingParametersNameTheirField) {
  auto error_of = [](const std::function<void(GenerateBody&)>& change) {
    GenerateBody g;
    g.prompt = "hi";
    change(g);
    return body_error(encode(header(MessageType::Generate), g), &Message::generate);
  };
  EXPECT_EQ(error_of([](GenerateBody& g) { g.top_p = 1.5; }), "body.top_p");
  EXPECT_EQ(error_of([](GenerateBody& g) { g.min_p = -0.1; }), "body.min_p");
  EXPECT_EQ(error_of([](GenerateBody& g) { g.presence_penalty = 2.5; }), "body.presence_penalty");
  EXPECT_EQ(error_of([](GenerateBody& g) { g.frequency_penalty = std::nan(""); }), "body.frequency_penalty");
  EXPECT_EQ(error_of([](GenerateBody& g) { g.repetition_penalty = -1; }), "body.repetition_penalty");
  EXPECT_EQ(error_of([](GenerateBody& g) { g.top_k = -2; }), "body.top_k");
  EXPECT_EQ(error_of([](GenerateBody& g) { g.logprobs = 21; }), "body.logprobs");
  EXPECT_EQ(error_of([](GenerateBody& g) { g.logprobs_mode = "cooked"; }), "body.logprobs_mode");
  EXPECT_EQ(error_of([](GenerateBody& g) { g.logit_bias = {{5, 1.0f}, {5, 2.0f}}; }), "body.logit_bias[1]");
  EXPECT_EQ(error_of([](GenerateBody& g) { g.logit_bias = {{9, 1.0f}, {5, 2.0f}}; }), "body.logit_bias[1]");
  EXPECT_EQ(error_of([](GenerateBody& g) { g.logit_bias = {{5, 101.0f}}; }), "body.logit_bias[0][1]");
  EXPECT_EQ(error_of([](GenerateBody& g) { g.logit_bias = {{-1, 1.0f}}; }), "body.logit_bias[0][0]");
  EXPECT_EQ(field_of_error(raw_with_header(kProtocolVersion, "generate",
                                           [](auto& pk) {
                                             pk.pack_map(2), pk.pack("prompt"), pk.pack("hi");
                                             pk.pack("logit_bias"), pk.pack_array(1), pk.pack_array(3);
                                             pk.pack(1), pk.pack(2), pk.pack(3);
                                           }),
                           true),
            "body.logit_bias[0]");
}

// Structured output travels in a Generate and a Prefill only when active, every kind by name with
// its text, whitespace bound and strictness; the defaults stay off the wire.
TEST(Protocol, GenerateAndPrefillCarryTheConstraintOnlyWhenActive) {
  using Kind = grammar::OutputConstraint::Kind;
  GenerateBody g;
  g.prompt = "hi";
  const std::string plain = encode(header(MessageType::Generate), g);
  EXPECT_EQ(plain.find("constraint"), std::string::npos);
  EXPECT_FALSE(parse(plain).generate().constraint.active());
  PrefillBody p;
  p.prompt = {1, 2, 3};
  EXPECT_EQ(encode(header(MessageType::Prefill), p).find("constraint"), std::string::npos);

  const std::pair<Kind, std::string> kinds[] = {
      {Kind::JsonObject, ""},
      {Kind::JsonSchema, R"({"type":"object","properties":{"a":{"type":"integer"}}})"},
      {Kind::Regex, "[a-c]+x?"},
      {Kind::Choice, R"(["yes","no"])"},
      {Kind::Grammar, "root ::= \"a\" | \"b\"\n"}};
  for (const auto& [kind, text] : kinds) {
    grammar::OutputConstraint c;
    c.kind = kind;
    c.text = text;
    c.max_whitespace = kind == Kind::JsonSchema ? 2 : 0;
    c.strict = kind != Kind::JsonObject;
    g.constraint = p.constraint = c;
    for (const grammar::OutputConstraint& got :
         {parse(encode(header(MessageType::Generate), g)).generate().constraint,
          parse(encode(header(MessageType::Prefill), p)).prefill().constraint}) {
      EXPECT_EQ(got.kind, kind) << grammar::constraint_kind_name(kind);
      EXPECT_EQ(got.text, text);
      EXPECT_EQ(got.max_whitespace, c.max_whitespace);
      EXPECT_EQ(got.strict, c.strict);
    }
  }
  // The kind goes by name (an enum's number would change meaning with the enum).
  EXPECT_NE(encode(header(MessageType::Generate), g).find("grammar"), std::string::npos);
}

// A conversation with tool calls and tool results travels whole, with the tools it offers, so
// that the target (the one process that applies the chat template) renders it; a call on a turn
// other than an assistant's, and tools without messages, are refused by name.
TEST(Protocol, GenerateCarriesToolCallsToolTurnsAndTools) {
  GenerateBody g;
  g.messages = {{"user", "weather in Paris?", {}},
                {"assistant", "", {{"get_weather", R"({"city":"Paris"})"}, {"get_time", "{}"}}},
                {"tool", R"({"temp":21})", {}}};
  g.tools = R"([{"type":"function","function":{"name":"get_weather"}}])";
  const GenerateBody got = parse(encode(header(MessageType::Generate), g)).generate();
  ASSERT_EQ(got.messages.size(), 3u);
  EXPECT_EQ(got.messages[2].role, "tool");
  EXPECT_EQ(got.messages[2].content, R"({"temp":21})");
  ASSERT_EQ(got.messages[1].tool_calls.size(), 2u);
  EXPECT_EQ(got.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(got.messages[1].tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(got.messages[1].tool_calls[1].name, "get_time");
  EXPECT_TRUE(got.messages[0].tool_calls.empty());
  EXPECT_EQ(got.tools, g.tools);
  GenerateBody plain;
  plain.messages = {{"user", "hi", {}}};
  EXPECT_EQ(encode(header(MessageType::Generate), plain).find("tool"), std::string::npos);

  auto field_of = [](const GenerateBody& b) {
    try {
      parse(encode(header(MessageType::Generate), b)).generate();
    } catch (const ProtocolError& e) {
      return e.field;
    }
    return std::string("accepted");
  };
  GenerateBody call_by_user = g;
  call_by_user.messages[0].tool_calls = {{"get_weather", "{}"}};
  EXPECT_EQ(field_of(call_by_user), "body.messages[0].tool_calls");
  GenerateBody tools_without_messages;
  tools_without_messages.prompt = "hi";
  tools_without_messages.tools = g.tools;
  EXPECT_EQ(field_of(tools_without_messages), "body.tools");
}

TEST(Protocol, BadConstraintsNameTheirField) {
  auto generate_with = [](const std::function<void(Packer&)>& constraint) {
    return raw_with_header(kProtocolVersion, "generate", [&](Packer& pk) {
      pk.pack_map(2), pk.pack("prompt"), pk.pack("hi"), pk.pack("constraint");
      constraint(pk);
    });
  };
  EXPECT_EQ(
      field_of_error(generate_with([](auto& pk) { pk.pack_map(1), pk.pack("kind"), pk.pack("yaml"); }), true),
      "body.constraint.kind");
  EXPECT_EQ(
      field_of_error(generate_with([](auto& pk) { pk.pack_map(1), pk.pack("kind"), pk.pack("none"); }), true),
      "body.constraint.kind")
      << "an inactive constraint is left out, never sent";
  EXPECT_EQ(
      field_of_error(generate_with([](auto& pk) { pk.pack_map(1), pk.pack("text"), pk.pack("a+"); }), true),
      "body.constraint.kind");
  EXPECT_EQ(field_of_error(generate_with([](auto& pk) {
                             pk.pack_map(2), pk.pack("kind"), pk.pack("json_object");
                             pk.pack("max_whitespace"), pk.pack(65);
                           }),
                           true),
            "body.constraint.max_whitespace");
  EXPECT_EQ(field_of_error(generate_with([](auto& pk) {
                             pk.pack_map(2), pk.pack("kind"), pk.pack("regex"), pk.pack("text"), pk.pack(7);
                           }),
                           true),
            "body.constraint.text");
  EXPECT_EQ(field_of_error(generate_with([](auto& pk) {
                             pk.pack_map(2), pk.pack("kind"), pk.pack("regex"), pk.pack("flags"),
                                 pk.pack("i");
                           }),
                           true),
            "body.constraint.flags");
  EXPECT_EQ(field_of_error(generate_with([](auto& pk) { pk.pack("regex"); }), true), "body.constraint");
}

std::vector<LogprobEntry> entries_for(const std::vector<int32_t>& tokens) {
  std::vector<LogprobEntry> out;
  for (int32_t t : tokens) {
    LogprobEntry e;
    e.chosen = {t, -0.25f * static_cast<float>(t), std::string(1, static_cast<char>('a' + t % 26))};
    e.top = {{t, e.chosen.logprob, e.chosen.bytes}, {t + 1, -std::numeric_limits<float>::infinity(), "\xe2"}};
    out.push_back(e);
  }
  return out;
}

void expect_same_entries(const std::vector<LogprobEntry>& got, const std::vector<LogprobEntry>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].chosen.token, want[i].chosen.token) << i;
    EXPECT_EQ(got[i].chosen.logprob, want[i].chosen.logprob) << i;
    EXPECT_EQ(got[i].chosen.bytes, want[i].chosen.bytes) << i;
    ASSERT_EQ(got[i].top.size(), want[i].top.size()) << i;
    for (size_t k = 0; k < got[i].top.size(); ++k) {
      EXPECT_EQ(got[i].top[k].token, want[i].top[k].token);
      EXPECT_EQ(got[i].top[k].logprob, want[i].top[k].logprob);
      EXPECT_EQ(got[i].top[k].bytes, want[i].top[k].bytes);
    }
  }
}

TEST(Protocol, DeltaAndDoneCarryOneLogprobEntryPerToken) {
  DeltaBody d{{4, 5}, "ef", ""};
  EXPECT_TRUE(parse(encode(header(MessageType::Delta), d)).delta().logprobs.empty()) << "none unless asked";
  d.logprobs = entries_for(d.tokens);
  expect_same_entries(parse(encode(header(MessageType::Delta), d)).delta().logprobs, d.logprobs);
  DoneBody done;
  done.stop_reason = "length";
  done.tokens = {1, 2, 3};
  done.logprobs = entries_for(done.tokens);
  expect_same_entries(parse(encode(header(MessageType::Done), done)).done().logprobs, done.logprobs);

  DeltaBody bad = d;
  bad.logprobs.pop_back();
  EXPECT_EQ(body_error(encode(header(MessageType::Delta), bad), &Message::delta), "body.logprobs");
  bad = d;
  bad.logprobs[1].chosen.token = 9;
  EXPECT_EQ(body_error(encode(header(MessageType::Delta), bad), &Message::delta), "body.logprobs[1].token");
  bad = d;
  bad.logprobs[0].chosen.logprob = 0.5f;  // not a log-probability
  EXPECT_EQ(body_error(encode(header(MessageType::Delta), bad), &Message::delta), "body.logprobs[0].logprob");
  bad = d;
  bad.logprobs[0].top.resize(21);
  EXPECT_EQ(body_error(encode(header(MessageType::Delta), bad), &Message::delta), "body.logprobs[0].top");
  bad = d;
  bad.logprobs[0].top[1].logprob = std::nanf("");
  EXPECT_EQ(body_error(encode(header(MessageType::Delta), bad), &Message::delta),
            "body.logprobs[0].top[1].logprob");
  DoneBody short_done = done;
  short_done.logprobs.resize(2);
  EXPECT_EQ(body_error(encode(header(MessageType::Done), short_done), &Message::done), "body.logprobs");
}

// Version 4 added structured output: a version-3 Generate (an older client) is refused whole with
// an error on "v" that says which side is older, never decoded without the fields it could not
// send.
TEST(Protocol, MessagesOfAnotherVersionAreRefusedOnVNamingTheOlderSide) {
  auto prompt_only = [](Packer& pk) { pk.pack_map(1), pk.pack("prompt"), pk.pack("hi"); };
  ASSERT_EQ(kProtocolVersion, 4u);
  for (const uint32_t v : {kProtocolVersion - 1, kProtocolVersion + 1}) {
    try {
      parse(raw_with_header(v, "generate", prompt_only));
      ADD_FAILURE() << "version " << v << " accepted";
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.field, "v");
      EXPECT_NE(std::string(e.what()).find(v < kProtocolVersion ? "older" : "newer"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(parse(raw_with_header(kProtocolVersion, "generate", prompt_only)).generate().prompt, "hi");
}

// The fuzzer's seeds (tests/fuzz/corpus/fuzz_protocol) are messages of this version, each
// decoding with the accessor of its type, so fuzzing starts past the version check; the
// `generate-older-version` seed is the one refused, on "v".
TEST(Protocol, FuzzSeedsAreOfThisVersionAndDecode) {
  const std::string dir = rootspec::source_dir() + "/tests/fuzz/corpus/fuzz_protocol/";
  auto bytes_of = [&](const std::string& name) {
    std::ifstream f(dir + name, std::ios::binary);
    EXPECT_TRUE(f) << name;
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  for (const char* name : {"generate", "generate-ids", "generate-sampling"})
    EXPECT_NO_THROW(parse(bytes_of(name)).generate()) << name;
  EXPECT_EQ(parse(bytes_of("generate-sampling")).generate().logit_bias.size(), 2u);
  EXPECT_NO_THROW(parse(bytes_of("delta")).delta());
  EXPECT_EQ(parse(bytes_of("delta-logprobs")).delta().logprobs.size(), 2u);
  EXPECT_NO_THROW(parse(bytes_of("done")).done());
  EXPECT_EQ(parse(bytes_of("done-logprobs")).done().logprobs.size(), 2u);
  EXPECT_NO_THROW(parse(bytes_of("pool")).pool());
  EXPECT_NO_THROW(parse(bytes_of("prefill")).prefill());
  EXPECT_EQ(parse(bytes_of("prefill-sampling")).prefill().sampling.logit_bias.size(), 2u);
  EXPECT_EQ(parse(bytes_of("generate-constraint")).generate().constraint.kind,
            grammar::OutputConstraint::Kind::JsonSchema);
  EXPECT_EQ(parse(bytes_of("prefill-constraint")).prefill().constraint.kind,
            grammar::OutputConstraint::Kind::Regex);
  try {
    parse(bytes_of("generate-older-version"));
    ADD_FAILURE() << "an older version decoded";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.field, "v");
  }
}

TEST(Protocol, DoneTraceEntriesAreCheckedByName) {
  // A Done whose one trace row holds `entry` in its first column (pool_nodes), else zeros and
  // falses in for_each_record_field's order.
  auto done_with = [](const std::function<void(Packer&)>& entry) {
    return raw_with_header(kProtocolVersion, "done", [&](Packer& pk) {
      pk.pack_map(16);
      pk.pack("stop_reason"), pk.pack("eos");
      pk.pack("tokens"), pk.pack_array(0);
      for (const char* k :
           {"prompt_tokens", "tokens_to_first_eos", "rounds", "prefill_start_ns", "last_commit_ns"})
        pk.pack(k), pk.pack(0);
      for (const char* k : {"ms_queued", "ms_prefill", "ms_drafter_wait", "ms_root_pass", "ms_tree_pass",
                            "ms_verify", "ms_commit", "tokens_per_second"})
        pk.pack(k), pk.pack(0.0);
      pk.pack("trace"), pk.pack_array(1);
      std::vector<std::function<void()>> columns;
      for_each_record_field([&](const char*, auto member) {
        using T = std::remove_reference_t<decltype(RoundRecord{}.*member)>;
        columns.push_back([&pk] { std::is_same_v<T, bool> ? pk.pack(false) : pk.pack(0); });
      });
      pk.pack_array(static_cast<uint32_t>(columns.size()));
      entry(pk);
      for (size_t i = 1; i < columns.size(); ++i) columns[i]();
    });
  };
  auto trace_error = [](const std::string& bytes) {
    try {
      parse(bytes).done();
    } catch (const ProtocolError& e) {
      return e.field;
    }
    return std::string();
  };
  EXPECT_EQ(trace_error(done_with([](auto& pk) { pk.pack(3); })), "");
  EXPECT_EQ(trace_error(done_with([](auto& pk) { pk.pack(true); })), "body.trace[0].pool_nodes");
  EXPECT_EQ(trace_error(done_with([](auto& pk) { pk.pack(-1); })), "body.trace[0].pool_nodes");
  EXPECT_EQ(trace_error(done_with([](auto& pk) { pk.pack(uint64_t{1} << 40); })), "body.trace[0].pool_nodes");
}

}  // namespace
}  // namespace rootspec
