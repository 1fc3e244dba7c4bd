// Structured output through the real daemon pair (constraint.h, sampling.h step 0): a Generate's
// constraint is compiled by the target at admission with its tokenizer's vocabulary and masks every
// row a rule reads; the Prefill carries it to the drafter, which masks its own draft rows. On the
// random chat pair (byte tokenizer: ids 0–255 the bytes, 256 <|im_start|>, 257 <|im_end|> = EOS):
//   - every output of ar, draft, root-draw and auto, at T = 1 and T = 0 over several seeds, is a
//     sentence of its constraint and ends with the EOS once complete: a regex (std::regex on the
//     text), a choice, and a JSON schema (parsed with nlohmann and validated by Debian's
//     python3-jsonschema, tests/grammar/json_schema_suite_validate.py);
//   - greedy output under a constraint is ar's for every rule;
//   - the drafter masks its draft rows (more tokens accepted a round than with raw rows), and a
//     drafter that cannot compile the constraint drafts unmasked, warns once, and stays exact;
//   - a constraint that does not compile is an Error naming the field at fault, at once, and the
//     daemon goes on serving; a model without a tokenizer refuses constraints;
//   - rootspec-client's flags send the constraint.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "constraint.h"
#include "pair_fixture.h"
#include "programs.h"
#include "source_tree.h"

namespace rootspec {
namespace {

using namespace rootspec::testing;
using Kind = grammar::OutputConstraint::Kind;

constexpr int32_t kEos = 257;  // <|im_end|>, the chat pair's eos_token_id

grammar::OutputConstraint constraint_of(Kind kind, const std::string& text) {
  grammar::OutputConstraint c;
  c.kind = kind;
  c.text = text;
  return c;
}

// Bounded languages, so that every output completes well within max_new_tokens.
const char* const kRegex = "(ab|cd)[0-9]{2,4}(-[xyz])?";
const char* const kSchema = R"({"type": "object",
  "properties": {"ok": {"type": "boolean"}, "tag": {"enum": ["a", "bc", "def"]},
                 "s": {"type": "string", "maxLength": 3}},
  "required": ["ok", "tag"]})";

const std::vector<int32_t> kPrompt = {1, 2, 3};

PairOptions chat_pair() {
  PairOptions o;
  o.models = &chat_models();
  return o;
}

GenerateBody constrained(const std::string& rule, double temperature, uint64_t seed,
                         const grammar::OutputConstraint& c, const std::vector<int32_t>& prompt = kPrompt) {
  GenerateBody g =
      generate_body(prompt, rule, temperature > 0 ? "residual" : "greedy", 8, temperature, seed, 120);
  g.stop_at_eos = true;
  g.constraint = c;
  return g;
}

// The output's text: its bytes up to the EOS (the byte tokenizer's ids below 256).
std::string text_of(const std::vector<int32_t>& tokens) {
  std::string s;
  for (int32_t t : tokens)
    if (t < 256) s += static_cast<char>(t);
  return s;
}

// A constrained request's reply: done, ended at the EOS (the grammar completed), the EOS last.
::testing::AssertionResult ended_at_eos(const Reply& r) {
  if (!r.done)
    return ::testing::AssertionFailure() << (r.error ? r.error->field + ": " + r.error->message : "timeout");
  if (r.done->stop_reason != "eos")
    return ::testing::AssertionFailure() << "stop_reason " << r.done->stop_reason;
  if (r.done->tokens.empty() || r.done->tokens.back() != kEos)
    return ::testing::AssertionFailure() << "the last token is not the EOS";
  for (size_t i = 0; i + 1 < r.done->tokens.size(); ++i)
    if (r.done->tokens[i] >= 256)
      return ::testing::AssertionFailure() << "special token " << r.done->tokens[i];
  return ::testing::AssertionSuccess();
}

// Our own reading of kSchema (the independent validator runs too).
bool valid_under_schema(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  if (!j.is_object() || !j.contains("ok") || !j.contains("tag")) return false;
  for (const auto& [key, value] : j.items()) {
    if (key == "ok" && !value.is_boolean()) return false;
    if (key == "tag" && !(value == "a" || value == "bc" || value == "def")) return false;
    if (key == "s") {
      if (!value.is_string()) return false;
      // maxLength counts code points: UTF-8 lead bytes.
      int code_points = 0;
      for (unsigned char c : value.get<std::string>()) code_points += (c & 0xC0) != 0x80;
      if (code_points > 3) return false;
    }
    if (key != "ok" && key != "tag" && key != "s") return false;  // strict: no other members
  }
  return true;
}

// Runs tests/grammar/json_schema_suite_validate.py (python3-jsonschema) over `texts`.
void validate_with_python(const std::string& schema, const std::vector<std::string>& texts,
                          const std::string& dir) {
  const std::string path = dir + "/outputs.jsonl";
  {
    std::ofstream out(path);
    for (const std::string& t : texts) {
      std::string hex;
      for (unsigned char b : t) {
        static const char* const digits = "0123456789abcdef";
        hex += digits[b >> 4];
        hex += digits[b & 15];
      }
      out << nlohmann::ordered_json{{"schema", nlohmann::ordered_json::parse(schema)}, {"text_hex", hex}}
                 .dump()
          << "\n";
    }
  }
  const std::string cmd =
      "python3 " + rootspec::source_dir() + "/tests/grammar/json_schema_suite_validate.py " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string report;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) report.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << report;
  EXPECT_NE(report.find("validated " + std::to_string(texts.size()) + " "), std::string::npos) << report;
}

const char* const kRules[] = {"ar", "draft", "root-draw", "auto"};

TEST(DaemonStructuredOutput, EveryRuleSeedAndTemperatureMatchesARegexAndEndsAtEos) {
  Pair pair(chat_pair());
  Client client(pair.client_endpoint);
  const std::regex re(kRegex);
  std::set<std::string> distinct;
  for (const char* rule : kRules)
    for (const double t : {1.0, 0.0})
      for (uint64_t seed = 1; seed <= 4; ++seed) {
        const Reply r = client.generate(constrained(rule, t, seed, constraint_of(Kind::Regex, kRegex)));
        ASSERT_TRUE(ended_at_eos(r)) << rule << " T " << t << " seed " << seed;
        const std::string text = text_of(r.done->tokens);
        EXPECT_TRUE(std::regex_match(text, re))
            << rule << " T " << t << " seed " << seed << ": '" << text << "'";
        distinct.insert(text);
      }
  // Sampling explored the language (a test of outputs, not of one fixed string).
  EXPECT_GE(distinct.size(), 4u);
}

TEST(DaemonStructuredOutput, EveryRuleSeedAndTemperatureGivesJsonValidUnderTheSchema) {
  Pair pair(chat_pair());
  Client client(pair.client_endpoint);
  std::vector<std::string> texts;
  for (const char* rule : kRules)
    for (const double t : {1.0, 0.0})
      for (uint64_t seed = 1; seed <= 4; ++seed) {
        const Reply r = client.generate(constrained(rule, t, seed, constraint_of(Kind::JsonSchema, kSchema)));
        ASSERT_TRUE(ended_at_eos(r)) << rule << " T " << t << " seed " << seed;
        const std::string text = text_of(r.done->tokens);
        EXPECT_TRUE(valid_under_schema(text)) << rule << " T " << t << " seed " << seed << ": " << text;
        texts.push_back(text);
      }
  validate_with_python(kSchema, texts, pair.dir());
}

// The masked law itself, through logprobs: the first token is drawn among the three first bytes
// only (their probabilities sum to 1), and every later token, the EOS included, is forced
// (probability 1: the choices share no prefix).
TEST(DaemonStructuredOutput, AChoiceIsOneOfItsStringsThenTheEosUnderTheMaskedLaw) {
  Pair pair(chat_pair());
  Client client(pair.client_endpoint);
  const grammar::OutputConstraint choice = constraint_of(Kind::Choice, R"(["yes","no","maybe not"])");
  const std::set<std::string> choices = {"yes", "no", "maybe not"};
  for (const char* rule : kRules)
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      GenerateBody g = constrained(rule, 1.0, seed, choice);
      g.logprobs = 5;
      const Reply r = client.generate(g);
      ASSERT_TRUE(ended_at_eos(r)) << rule << " seed " << seed;
      const std::string text = text_of(r.done->tokens);
      EXPECT_TRUE(choices.count(text)) << rule << " seed " << seed << ": '" << text << "'";
      const std::vector<LogprobEntry>& lp = r.done->logprobs;
      ASSERT_EQ(lp.size(), r.done->tokens.size());
      std::set<int32_t> first;
      double mass = 0;
      for (const TokenLogprobWire& t : lp[0].top)
        if (t.logprob > -std::numeric_limits<float>::infinity())
          first.insert(t.token), mass += std::exp(t.logprob);
      EXPECT_EQ(first, (std::set<int32_t>{'y', 'n', 'm'})) << rule << " seed " << seed;
      EXPECT_NEAR(mass, 1.0, 1e-4) << rule << " seed " << seed;
      for (size_t i = 1; i < lp.size(); ++i)
        EXPECT_EQ(lp[i].chosen.logprob, 0.0f) << rule << " seed " << seed << " token " << i;
    }
}

TEST(DaemonStructuredOutput, GreedyOutputUnderAConstraintIsArsForEveryRule) {
  Pair pair(chat_pair());
  Client client(pair.client_endpoint);
  const grammar::OutputConstraint constraints[] = {
      constraint_of(Kind::Regex, kRegex), constraint_of(Kind::JsonSchema, kSchema),
      constraint_of(Kind::Grammar, "root ::= item (\",\" item){0,5}\nitem ::= [a-f]+ | [0-9]{1,3}\n")};
  for (const auto& c : constraints)
    for (const auto& prompt : test_prompts()) {
      const Reply ar = client.generate(constrained("ar", 0, 0, c, prompt));
      ASSERT_TRUE(ar.done) << (ar.error ? ar.error->message : "timeout");
      ASSERT_FALSE(ar.done->tokens.empty());
      for (const char* rule : {"draft", "root", "root-draw", "pearl", "auto"}) {
        const Reply r = client.generate(constrained(rule, 0, 0, c, prompt));
        ASSERT_TRUE(r.done) << rule << ": " << (r.error ? r.error->message : "timeout");
        EXPECT_EQ(r.done->tokens, ar.done->tokens)
            << rule << " under " << grammar::constraint_kind_name(c.kind) << ", prompt of " << prompt.size();
      }
    }
  // The drafter compiled every constraint with its own tokenizer (no unmasked drafting).
  EXPECT_EQ(read_file(pair.drafter_log()).find("drafting unmasked"), std::string::npos);
}

// The Prefill carries the constraint and the drafter masks its draft rows with it ([drafter]
// process_rows on): its pools hold grammatical paths only, so greedy rounds of draft selection
// accept more tokens than with raw draft rows, which spend the tree on tokens the target's masked
// row gives probability 0. (Without the constraint at the drafter both would be the same.)
TEST(DaemonStructuredOutput, MaskedDraftRowsAcceptMoreTokensPerRoundThanRawOnes) {
  const grammar::OutputConstraint constraints[] = {
      constraint_of(Kind::Regex, "[0-9a-f]{40,60}"), constraint_of(Kind::JsonSchema, kSchema),
      constraint_of(Kind::Grammar, "root ::= item (\",\" item){0,15}\nitem ::= [a-f]{1,4} | [0-9]{1,3}\n")};
  std::vector<double> rate[2];  // [process_rows] tokens per round, per constraint
  for (const bool process_rows : {true, false}) {
    PairOptions o = chat_pair();
    o.overrides = {std::string("drafter.process_rows=") + (process_rows ? "true" : "false")};
    Pair pair(o);
    Client client(pair.client_endpoint);
    for (const auto& c : constraints) {
      long tokens = 0, rounds = 0;
      for (const auto& prompt : test_prompts()) {
        const Reply r = client.generate(constrained("draft", 0, 1, c, prompt));
        ASSERT_TRUE(r.done) << (r.error ? r.error->message : "timeout");
        tokens += static_cast<long>(r.done->tokens.size());
        rounds += r.done->rounds;
      }
      rate[process_rows].push_back(static_cast<double>(tokens) / std::max(rounds, 1L));
    }
  }
  for (size_t k = 0; k < std::size(constraints); ++k) {
    std::printf("  %-11s %.2f tokens a round with masked draft rows, %.2f with raw ones\n",
                grammar::constraint_kind_name(constraints[k].kind), rate[1][k], rate[0][k]);
    EXPECT_GT(rate[1][k], 1.25 * rate[0][k]) << grammar::constraint_kind_name(constraints[k].kind);
  }
}

// A drafter that cannot compile the constraint (here: its model folder has no tokenizer) drafts
// with raw rows and says so once; the output is exact all the same (the target masks its rows).
TEST(DaemonStructuredOutput, ADrafterWithoutATokenizerDraftsUnmaskedWarnsOnceAndOutputsStillMatch) {
  const PairModels models(/*chat=*/true);
  {  // the drafter's folder loses its byte tokenizer: no tokenizer at all
    const std::string config = models.drafter + "/config.json";
    nlohmann::json j = nlohmann::json::parse(read_file(config));
    j.erase("rootspec_tokenizer");
    std::ofstream(config) << j.dump(2);
  }
  PairOptions o;
  o.models = &models;
  Pair pair(o);
  Client client(pair.client_endpoint);
  const std::regex re(kRegex);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const Reply r = client.generate(constrained("root-draw", 1.0, seed, constraint_of(Kind::Regex, kRegex)));
    ASSERT_TRUE(ended_at_eos(r)) << seed;
    EXPECT_TRUE(std::regex_match(text_of(r.done->tokens), re)) << text_of(r.done->tokens);
    EXPECT_TRUE(r.done->degraded.empty()) << r.done->degraded;
  }
  const std::string log = read_file(pair.drafter_log());
  int warnings = 0;
  for (size_t at = log.find("drafting unmasked under"); at != std::string::npos;
       at = log.find("drafting unmasked under", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1) << log;
}

TEST(DaemonStructuredOutput, ConstraintsThatDoNotCompileGetTheirFieldNamedAtOnceAndTheDaemonServesOn) {
  Pair pair(chat_pair());
  Client client(pair.client_endpoint);
  struct Bad {
    grammar::OutputConstraint c;
    const char* field;
  };
  const Bad bad[] = {
      {constraint_of(Kind::JsonSchema, R"({"type": "integer", "not": {"const": 3}})"), "not"},
      // A schema that admits no value: no answer could be written.
      {constraint_of(Kind::JsonSchema, R"({"type": "string", "minLength": 3, "maxLength": 2})"), "schema"},
      {constraint_of(Kind::JsonSchema, R"({"type": )"), "json_schema"},
      {constraint_of(Kind::Regex, "(a)\\1"), "regex"},
      {constraint_of(Kind::Regex, "[z-a]"), "regex"},
      {constraint_of(Kind::Grammar, "root ::= missing\n"), "grammar"},
      {constraint_of(Kind::Grammar, "root ::= root \"a\" | \"b\"\n"), "grammar"},
      {constraint_of(Kind::Choice, "[]"), "choice"},
      // Past the compilers' size limit (grammar::Limits): refused before any work.
      {constraint_of(Kind::Regex, std::string(300 * 1024, 'a')), "regex"},
  };
  for (const Bad& b : bad) {
    const auto start = std::chrono::steady_clock::now();
    const Reply r = client.generate(constrained("root-draw", 1.0, 1, b.c), 30);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(r.error) << b.field << ": accepted";
    EXPECT_EQ(r.error->field, b.field) << r.error->message;
    EXPECT_LT(seconds, 2.0) << b.field;
  }
  const Reply ok = client.generate(constrained("root-draw", 1.0, 1, constraint_of(Kind::Regex, kRegex)));
  EXPECT_TRUE(ended_at_eos(ok));
  const Reply free = client.generate(generate_body(kPrompt, "root-draw", "residual", 8, 1.0, 1, 8));
  ASSERT_TRUE(free.done);
  EXPECT_EQ(free.done->tokens.size(), 8u);
}

TEST(DaemonStructuredOutput, AModelWithoutATokenizerRefusesConstraintsOnConstraint) {
  Pair pair;  // the token-id pair: no tokenizer
  Client client(pair.client_endpoint);
  const Reply r = client.generate(constrained("root-draw", 1.0, 1, constraint_of(Kind::Regex, kRegex)));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->field, "constraint");
  EXPECT_TRUE(client.generate(generate_body(kPrompt, "root-draw", "residual", 8, 1.0, 1, 4)).done);
}

// rootspec-client's --regex and --choice reach the target: the streamed text is a sentence.
TEST(DaemonStructuredOutput, ClientFlagsSendTheConstraint) {
  Pair pair(chat_pair());
  auto run = [&](const std::string& flags) {
    const std::string cmd =
        rootspec::testing::program_path("rootspec-client") + " --endpoint " + pair.client_endpoint +
        " --prompt-ids 1,2,3 --rule root-draw --temperature 1 --seed 3 --json " + flags + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    EXPECT_EQ(pclose(p), 0) << out;
    return nlohmann::json::parse(out.substr(out.find('{')), nullptr, false);
  };
  const nlohmann::json regex = run("--regex '[0-9]{3}x'");
  ASSERT_FALSE(regex.is_discarded());
  EXPECT_TRUE(std::regex_match(regex.value("text", std::string("?")), std::regex("[0-9]{3}x")))
      << regex.dump();
  EXPECT_EQ(regex.value("stop_reason", ""), "eos");
  const nlohmann::json choice = run("--choice left,right --choice up");
  ASSERT_FALSE(choice.is_discarded());
  const std::string text = choice.value("text", std::string("?"));
  EXPECT_TRUE(text == "left" || text == "right" || text == "up") << text;
}

}  // namespace
}  // namespace rootspec
