// The matcher and token masks (common/grammar: matcher.h, token_mask.h) on a small fixed set of
// grammars (JSON schema, any JSON object, regex, GBNF with recursion and ambiguity, a choice) over
// a small vocabulary of 1–3-byte tokens with an EOS, a special token and an empty one. The input
// picks a grammar, then drives one matcher through operations: accept a byte, accept a token's
// bytes, roll back to an earlier position, keep a copy, switch to a kept copy, fill a mask.
// Contract:
//   - accept_bytes is all or nothing (refused: position unchanged);
//   - a matcher after rollback_to(p), and a copy after its original went on, are in the same state
//     as a fresh matcher fed the same p bytes (complete, can_continue, next_bytes);
//   - fill_mask equals brute force: token t allowed iff a copy accepts its bytes whole (EOS iff
//     complete; the special and the empty token never);
//   - the only exception is GrammarError{"grammar"} for too many parse stacks, state unchanged.
#include <fuzzer/FuzzedDataProvider.h>

#include <memory>
#include <string>
#include <vector>

#include "constraint.h"
#include "fuzz_contract.h"
#include "grammar.h"
#include "json_schema.h"
#include "matcher.h"
#include "token_mask.h"

using namespace rootspec::grammar;

namespace {

struct Case {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<TokenMasker> masker;
};
std::vector<Case> g_cases;
std::shared_ptr<const TokenVocabulary> g_vocab;
int32_t g_eos = -1, g_special = -1;

// Bytes the grammars use, and tokens over them.
const char kAlphabet[] = "{}[]\":,ab c019-xyz()\\n\xc3\xa9";

std::shared_ptr<const TokenVocabulary> make_vocab() {
  std::vector<std::string> tokens;
  const std::string alphabet(kAlphabet, sizeof kAlphabet - 1);
  for (char c : alphabet) tokens.emplace_back(1, c);
  for (const char* t :
       {"{\"", "\":", "\",", "\"}",  "ab",     "abc", "ba", "true", "false", "null", "01", "999",
        "-x",  "((",  "))",  "\xc3", "\xa9\"", " \"", ", ", "a\"",  "\\n",   "\\u0", "c)"})
    tokens.emplace_back(t);
  tokens.emplace_back();  // an empty token: never allowed
  g_special = static_cast<int32_t>(tokens.size());
  tokens.emplace_back("<|special|>");
  g_eos = static_cast<int32_t>(tokens.size());
  tokens.emplace_back("</s>");
  return std::make_shared<const TokenVocabulary>(tokens, g_eos, std::vector<int32_t>{g_special});
}

void add_case(std::shared_ptr<const Grammar> g, size_t cache) {
  auto masker = std::make_shared<TokenMasker>(g, g_vocab);
  masker->set_cache_capacity(cache);  // small caches: eviction is exercised too
  g_cases.push_back({std::move(g), std::move(masker)});
}

// The observable state of a matcher.
struct Observed {
  bool complete, can_continue;
  std::vector<uint64_t> next;
  bool operator==(const Observed& o) const {
    return complete == o.complete && can_continue == o.can_continue && next == o.next;
  }
};
Observed observe(const Matcher& m) { return {m.complete(), m.can_continue(), m.next_bytes()}; }

// A fresh matcher fed `bytes` (all of them were accepted before, so it accepts them again).
Observed replay(const std::shared_ptr<const Grammar>& g, const std::string& bytes) {
  Matcher m(g);
  FUZZ_CHECK(m.accept_bytes(bytes), "a replay of accepted bytes was refused");
  return observe(m);
}

void check_mask(const Case& c, const Matcher& m) {
  std::vector<uint32_t> bits(g_vocab->mask_words(), 0xFFFFFFFFu);
  c.masker->fill_mask(m, bits.data());
  for (int32_t t = 0; t < g_vocab->size(); ++t) {
    const bool got = bits[t / 32] >> (t % 32) & 1u;
    bool want;
    if (t == g_eos) {
      want = m.complete();
    } else if (t == g_special || g_vocab->token_bytes(t).empty()) {
      want = false;
    } else {
      Matcher copy = m;
      try {
        want = copy.accept_bytes(g_vocab->token_bytes(t));
      } catch (const GrammarError&) {
        want = false;  // a token that overflows the parse stacks cannot be taken
      }
    }
    FUZZ_CHECK(got == want, "token " + std::to_string(t) + " '" + g_vocab->token_bytes(t) + "' mask " +
                                std::to_string(got) + ", brute force " + std::to_string(want));
  }
  // Padding bits past the vocabulary stay clear.
  for (int32_t t = g_vocab->size(); t < g_vocab->mask_words() * 32; ++t)
    FUZZ_CHECK(!(bits[t / 32] >> (t % 32) & 1u), "a padding bit is set");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_vocab = make_vocab();
  JsonSchemaOptions spaced;
  spaced.max_whitespace = 1;
  add_case(compile_json_schema(nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
             "a": {"type": "string", "maxLength": 4}, "b": {"type": "array", "items": {"enum": [1, "x", null]}},
             "c": {"type": "boolean"}}, "required": ["a"]})"),
                               spaced),
           1024);
  add_case(compile_any_json_object(spaced), 4);
  add_case(compile_regex("(ab|a)*c?[0-9]{0,3}(-[xyz]+)?"), 1024);
  add_case(compile_gbnf("root ::= \"(\" root* \")\" | [a-c] | \"\\u00e9\"\n"), 2);
  add_case(compile_gbnf("root ::= x x\nx ::= \"a\"* | \"ab\"*\n"), 0);  // ambiguous: many stacks
  add_case(compile_choice({"a", "ab", "abc", "b", "", "true"}), 16);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const Case& c = g_cases[in.ConsumeIntegralInRange<size_t>(0, g_cases.size() - 1)];
  Matcher m(c.grammar);
  std::string bytes;  // what m accepted, in order
  std::vector<std::pair<Matcher, std::string>> kept;
  for (int step = 0; step < 64 && in.remaining_bytes() > 0; ++step) {
    switch (in.ConsumeIntegralInRange<int>(0, 6)) {
      case 0:
      case 1: {  // a byte: mostly from the alphabet
        const char b = in.ConsumeBool()
                           ? kAlphabet[in.ConsumeIntegralInRange<size_t>(0, sizeof kAlphabet - 2)]
                           : static_cast<char>(in.ConsumeIntegral<uint8_t>());
        const size_t before = m.position();
        bool ok = false;
        try {
          ok = m.accept_byte(static_cast<uint8_t>(b));
        } catch (const GrammarError& e) {
          FUZZ_CHECK(e.field == "grammar", e.field);
        }
        if (ok)
          bytes += b;
        else
          FUZZ_CHECK(m.position() == before, "a refused byte moved the matcher");
        break;
      }
      case 2: {  // a token's bytes
        const std::string& t =
            g_vocab->token_bytes(in.ConsumeIntegralInRange<int32_t>(0, g_vocab->size() - 1));
        const size_t before = m.position();
        const Observed seen = observe(m);
        bool ok = false;
        try {
          ok = m.accept_bytes(t);
        } catch (const GrammarError& e) {
          FUZZ_CHECK(e.field == "grammar", e.field);
        }
        if (ok) {
          bytes += t;
        } else {
          FUZZ_CHECK(m.position() == before, "a refused token moved the matcher");
          FUZZ_CHECK(observe(m) == seen, "a refused token changed the state");
        }
        break;
      }
      case 3: {  // roll back to an earlier position
        const size_t to = in.ConsumeIntegralInRange<size_t>(0, bytes.size());
        m.rollback_to(to);
        bytes.resize(to);
        FUZZ_CHECK(m.position() == to, "rollback position");
        FUZZ_CHECK(observe(m) == replay(c.grammar, bytes), "rollback differs from a replay");
        break;
      }
      case 4:  // keep a copy (a tree node's state)
        if (kept.size() < 8) kept.emplace_back(m, bytes);
        break;
      case 5:  // go on from a kept copy: it is unchanged by what its original did since
        if (!kept.empty()) {
          const auto& [copy, copy_bytes] = kept[in.ConsumeIntegralInRange<size_t>(0, kept.size() - 1)];
          FUZZ_CHECK(observe(copy) == replay(c.grammar, copy_bytes), "a copy changed");
          m = copy;
          bytes = copy_bytes;
        }
        break;
      case 6:
        check_mask(c, m);
        break;
    }
  }
  FUZZ_CHECK(observe(m) == replay(c.grammar, bytes), "the end state differs from a replay");
  return 0;
}
