// The JSON Schema compiler against outside references:
//   1. the official JSON Schema test suite (Debian's json-schema-test-suite): every test case whose
//      schema compiles must be decided right: valid instances accepted, invalid ones rejected;
//   2. Debian's python3-jsonschema: random texts drawn from compiled grammars must validate.
//
// Instances are fed as compact JSON (nlohmann's dump), byte by byte. The grammar fixes the order
// of object members (json_schema.h), so an instance is first re-serialised with its members in the
// order the schema fixes (declared properties in `properties` order, then required names not
// declared, in `required` order, then the rest as written); validity does not depend on member
// order, so this changes no answer. Where several orders are possible (anyOf branches with
// different `properties`, enum values) each is tried: a valid instance must be accepted in one of
// them, an invalid one rejected in all. Other differences of spelling are not normalised: a
// valid instance that the grammar rejects only because an integer is written as 1.0 (or a bignum
// as 1.2e+52) is counted as skipped with that reason, never as passed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "json_schema.h"
#include "matcher.h"
#include "source_tree.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using namespace rootspec::grammar;
using ojson = nlohmann::ordered_json;

const char* const kSuite = "/usr/share/json-schema-test-suite/tests";

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  for (char c : text) {
    if (!m.accept_bytes(std::string_view(&c, 1))) return false;
  }
  return m.complete();
}

bool json_equal(const ojson& a, const ojson& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!json_equal(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key()) || !json_equal(it.value(), b.at(it.key()))) return false;
    }
    return true;
  }
  return a == b;
}

// A local reference's target (nullptr for anything else).
const ojson* resolve(const ojson& root, const ojson& ref) {
  if (!ref.is_string()) return nullptr;
  const std::string r = ref.get<std::string>();
  if (r.empty() || r[0] != '#') return nullptr;
  std::string p;
  for (size_t i = 1; i < r.size(); ++i) {
    if (r[i] == '%' && i + 2 < r.size()) {
      p += static_cast<char>(std::stoi(r.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      p += r[i];
    }
  }
  try {
    return &root.at(ojson::json_pointer(p));
  } catch (const std::exception&) {
    return nullptr;
  }
}

// `v` with its object members in the order of `like` (an equal value).
ojson reorder_like(const ojson& v, const ojson& like) {
  if (v.is_object() && like.is_object()) {
    ojson out = ojson::object();
    for (auto it = like.begin(); it != like.end(); ++it)
      out[it.key()] = reorder_like(v.at(it.key()), it.value());
    return out;
  }
  if (v.is_array() && like.is_array() && v.size() == like.size()) {
    ojson out = ojson::array();
    for (size_t i = 0; i < v.size(); ++i) out.push_back(reorder_like(v[i], like[i]));
    return out;
  }
  return v;
}

constexpr size_t kMaxOrders = 32;

void add_unique(std::vector<ojson>& out, const ojson& x) {
  if (out.size() >= kMaxOrders) return;
  for (const auto& y : out) {
    if (y.dump() == x.dump()) return;
  }
  out.push_back(x);
}

// Every combination of one candidate per slot.
std::vector<ojson> product(const std::vector<std::vector<ojson>>& slots, const ojson& empty,
                           const std::vector<std::string>* keys) {
  std::vector<ojson> out = {empty};
  for (size_t i = 0; i < slots.size(); ++i) {
    std::vector<ojson> next;
    for (const auto& partial : out) {
      for (const auto& c : slots[i]) {
        ojson x = partial;
        if (keys) {
          x[(*keys)[i]] = c;
        } else {
          x.push_back(c);
        }
        add_unique(next, x);
      }
    }
    out = next;
  }
  return out;
}

// `s` with its allOf branches' properties, required and element schemas appended in branch
// order: the member order the compiler's merge writes (a property both name: both schemas).
ojson flatten_all_of(const ojson& s, const ojson& root, int depth) {
  ojson flat = s;
  flat.erase("allOf");
  if (depth > 24 || !s.at("allOf").is_array()) return flat;
  for (const auto& branch : s.at("allOf")) {
    const ojson* b = &branch;
    if (b->is_object() && b->contains("$ref")) b = resolve(root, b->at("$ref"));
    if (!b || !b->is_object()) continue;
    const ojson nested = b->contains("allOf") ? flatten_all_of(*b, root, depth + 1) : *b;
    for (auto it = nested.begin(); it != nested.end(); ++it) {
      const std::string& k = it.key();
      if (k == "properties" && it.value().is_object()) {
        ojson& props = flat["properties"];
        for (auto p = it.value().begin(); p != it.value().end(); ++p) {
          props[p.key()] =
              props.contains(p.key()) ? ojson{{"allOf", {props[p.key()], p.value()}}} : p.value();
        }
      } else if (k == "required" && it.value().is_array()) {
        for (const auto& r : it.value()) {
          if (!flat.contains("required") ||
              std::find(flat["required"].begin(), flat["required"].end(), r) == flat["required"].end())
            flat["required"].push_back(r);
        }
      } else if (flat.contains(k) && (k == "items" || k == "additionalProperties")) {
        flat[k] = ojson{{"allOf", {flat[k], it.value()}}};
      } else if (!flat.contains(k)) {
        flat[k] = it.value();
      }
    }
  }
  return flat;
}

// Whether the root's $schema is a draft (4 to 7) where $ref's siblings are ignored.
bool ref_overrides_siblings(const ojson& root) {
  if (!root.is_object() || !root.contains("$schema") || !root.at("$schema").is_string()) return false;
  const std::string dialect = root.at("$schema").get<std::string>();
  for (const char* old : {"draft-03", "draft-04", "draft-05", "draft-06", "draft-07"})
    if (dialect.find(old) != std::string::npos) return true;
  return false;
}

// The serialisations of `v` in the member orders that `s` may fix.
std::vector<ojson> orders(const ojson& v, const ojson& s, const ojson& root, int depth) {
  if (depth > 24 || !s.is_object()) return {v};
  if (s.contains("$ref")) {
    // Drafts 4 to 7 ignore $ref's siblings; from 2019-09 on both apply, merged as allOf is.
    if (s.size() == 1 || ref_overrides_siblings(root)) {
      const ojson* t = resolve(root, s.at("$ref"));
      return t ? orders(v, *t, root, depth + 1) : std::vector<ojson>{v};
    }
    ojson rest = s;
    rest.erase("$ref");
    return orders(v, ojson{{"allOf", {ojson{{"$ref", s.at("$ref")}}, rest}}}, root, depth + 1);
  }
  if (s.contains("allOf")) return orders(v, flatten_all_of(s, root, depth), root, depth + 1);
  std::vector<ojson> out;
  for (const char* key : {"anyOf", "oneOf"}) {
    if (s.contains(key) && s.at(key).is_array()) {
      for (const auto& b : s.at(key)) {
        for (const auto& c : orders(v, b, root, depth + 1)) add_unique(out, c);
      }
    }
  }
  std::vector<ojson> values;
  if (s.contains("enum") && s.at("enum").is_array())
    values.insert(values.end(), s.at("enum").begin(), s.at("enum").end());
  if (s.contains("const")) values.push_back(s.at("const"));
  for (const auto& e : values) {
    if (json_equal(e, v)) add_unique(out, reorder_like(v, e));
  }
  if (!out.empty()) return out;
  if (v.is_object()) {
    std::vector<std::string> keys;
    const ojson empty = ojson::object();
    const ojson& props =
        s.contains("properties") && s.at("properties").is_object() ? s.at("properties") : empty;
    for (auto it = props.begin(); it != props.end(); ++it) {
      if (v.contains(it.key())) keys.push_back(it.key());
    }
    if (s.contains("required") && s.at("required").is_array()) {
      for (const auto& r : s.at("required")) {
        if (r.is_string() && v.contains(r.get<std::string>()) && !props.contains(r.get<std::string>()) &&
            std::find(keys.begin(), keys.end(), r.get<std::string>()) == keys.end()) {
          keys.push_back(r.get<std::string>());
        }
      }
    }
    // Then the names dependencies mention (trigger, then the names it needs, entry by entry).
    for (const char* dep : {"dependentRequired", "dependencies"}) {
      if (!s.contains(dep) || !s.at(dep).is_object()) continue;
      for (auto it = s.at(dep).begin(); it != s.at(dep).end(); ++it) {
        std::vector<std::string> names{it.key()};
        const ojson& needed = it.value().is_object() && it.value().contains("required")
                                  ? it.value().at("required")
                                  : it.value();
        if (needed.is_array())
          for (const auto& n : needed)
            if (n.is_string()) names.push_back(n.get<std::string>());
        for (const auto& n : names) {
          if (v.contains(n) && std::find(keys.begin(), keys.end(), n) == keys.end()) keys.push_back(n);
        }
      }
    }
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) keys.push_back(it.key());
    }
    std::vector<std::vector<ojson>> slots;
    for (const auto& k : keys) {
      const ojson& sub = props.contains(k)                    ? props.at(k)
                         : s.contains("additionalProperties") ? s.at("additionalProperties")
                                                              : ojson(true);
      slots.push_back(orders(v.at(k), sub, root, depth + 1));
    }
    return product(slots, ojson::object(), &keys);
  }
  if (v.is_array()) {
    std::vector<std::vector<ojson>> slots;
    // Draft 4–7 tuples: items [..] then additionalItems, as prefixItems then items.
    const bool tuple = s.contains("items") && s.at("items").is_array();
    const ojson* prefix = tuple ? &s.at("items") : s.contains("prefixItems") ? &s.at("prefixItems") : nullptr;
    const ojson* rest = tuple ? (s.contains("additionalItems") ? &s.at("additionalItems") : nullptr)
                              : (s.contains("items") ? &s.at("items") : nullptr);
    for (size_t i = 0; i < v.size(); ++i) {
      ojson sub = true;
      if (prefix && prefix->is_array() && i < prefix->size()) {
        sub = (*prefix)[i];
      } else if (rest) {
        sub = *rest;
      }
      slots.push_back(orders(v[i], sub, root, depth + 1));
    }
    return product(slots, ojson::array(), nullptr);
  }
  return {v};
}

// Compact JSON with every integral number written as an integer (1.0 → 1, 1.2e+52 → its 53
// digits): the same JSON Schema value. "" when `v` has no integral non-integer number.
std::string integer_spelling(const ojson& v, bool& changed) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d) {
      char buf[400];
      std::snprintf(buf, sizeof buf, "%.0f", d);
      changed = true;
      return buf;
    }
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + integer_spelling(v[i], changed);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      out += (first ? "" : ",") + ojson(it.key()).dump() + ":" + integer_spelling(it.value(), changed);
      first = false;
    }
    return out + "}";
  }
  return v.dump();
}

// Whether `v` holds a number whose text a double may not keep (16 significant digits or more,
// e.g. bignum.json's 972783798187987123879878123.188781371): nlohmann reads it as the nearest
// double, so neither the schema's bound nor the instance is the file's number any more.
bool has_imprecise_number(const ojson& v) {
  if (v.is_number_float()) {
    const std::string text = v.dump();
    int digits = 0;
    bool leading = true;
    for (char c : text) {
      if (c == 'e' || c == 'E') break;
      if (c < '0' || c > '9') continue;
      if (leading && c == '0') continue;
      leading = false;
      ++digits;
    }
    return digits >= 16;
  }
  if (v.is_array() || v.is_object()) {
    for (const auto& e : v) {
      if (has_imprecise_number(e)) return true;
    }
  }
  return false;
}

struct Tally {
  int cases = 0;  // test cases (instances) seen
  int run = 0;    // decided by the grammar
  int passed = 0;
  std::map<std::string, int> skipped;  // reason → instances
  std::set<std::string> refused;       // keywords the compiler refused
  std::vector<std::string> wrong;
};

// A change made to each schema before it is compiled: a planted bug of the compiler written as
// the schema it would compile in place of the real one (none for the real runs).
using SchemaEdit = std::function<void(ojson&)>;

void run_file(const fs::path& file, const std::string& draft, Tally& t, const SchemaEdit& plant = nullptr) {
  std::ifstream in(file);
  const ojson groups = ojson::parse(in);
  for (const auto& group : groups) {
    // The suite's schemas leave the draft to their folder: say it where the draft changes a
    // meaning ($ref's siblings).
    ojson schema = group.at("schema");
    if (schema.is_object() && !schema.contains("$schema") && (draft == "draft6" || draft == "draft7"))
      schema["$schema"] = "http://json-schema.org/" + std::string(draft == "draft6" ? "draft-06" : "draft-07") +
                          "/schema#";
    std::shared_ptr<const Grammar> g;
    std::string reason;
    try {
      if (has_imprecise_number(schema)) {
        reason = "a number with more digits than a double keeps (the harness reads numbers as doubles)";
      } else if (plant) {
        ojson planted = schema;
        plant(planted);
        g = compile_json_schema(planted, JsonSchemaOptions{0, false, false});
      } else {
        g = compile_json_schema(schema, JsonSchemaOptions{0, false, false});
      }
    } catch (const GrammarError& e) {
      reason = "refused: " + e.field;
      t.refused.insert(e.field);
    }
    for (const auto& test : group.at("tests")) {
      ++t.cases;
      const std::string where = draft + "/" + file.filename().string() + ": " +
                                group.at("description").get<std::string>() + " / " +
                                test.at("description").get<std::string>();
      if (!g) {
        ++t.skipped[reason];
        continue;
      }
      const bool valid = test.at("valid").get<bool>();
      const ojson& data = test.at("data");
      if (has_imprecise_number(data)) {
        ++t.skipped["a number with more digits than a double keeps (the harness reads numbers as doubles)"];
        continue;
      }
      const std::vector<ojson> candidates = orders(data, schema, schema, 0);
      bool any = false;
      std::string accepted_text;
      try {
        for (const auto& c : candidates) {
          if (accepts(g, c.dump())) {
            any = true;
            accepted_text = c.dump();
            break;
          }
        }
        // The same instances with integral numbers spelled as integers.
        bool respelled_ok = false;
        for (const auto& c : candidates) {
          bool changed = false;
          const std::string text = integer_spelling(c, changed);
          if (changed && accepts(g, text)) {
            respelled_ok = true;
            accepted_text = text;
          }
        }
        if (valid && !any && respelled_ok) {
          // The documented spelling divergence: a valid integer written 1.0 (or a bignum 1.2e+52).
          ++t.skipped["integer written with a fraction or exponent (1.0, 1.2e+52): valid, grammar writes 1"];
          continue;
        }
        // An invalid instance must stay rejected in every spelling of its numbers.
        if (!valid && respelled_ok) any = true;
      } catch (const GrammarError& e) {
        t.wrong.push_back(where + ": matcher error " + e.what());
        ++t.run;
        continue;
      }
      ++t.run;
      if (any == valid) {
        ++t.passed;
      } else {
        t.wrong.push_back(
            where + (valid ? ": valid, rejected: " + data.dump() : ": invalid, accepted: " + accepted_text));
      }
    }
  }
}

TEST(JsonSchemaSuite, DecidesEveryCompiledCaseRight) {
  ASSERT_TRUE(fs::is_directory(kSuite))
      << kSuite << " missing: apt-get install json-schema-test-suite (launch/setup)";
  // The newest drafts the package ships (draft 2020-12 is not in Debian's 2.0.0): their semantics
  // agree with 2020-12 on every keyword the compiler supports (draft 4 does not: there 1.0 is not
  // an integer).
  int total_run = 0;
  for (const std::string draft : {"draft7", "draft6"}) {
    const fs::path dir = fs::path(kSuite) / draft;
    if (!fs::is_directory(dir)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    Tally t;
    for (const auto& f : files) run_file(f, draft, t);
    std::cout << "[suite " << draft << "] files " << files.size() << ", cases " << t.cases << ": run "
              << t.run << ", passed " << t.passed << ", wrong " << t.wrong.size() << ", skipped "
              << t.cases - t.run << "\n";
    for (const auto& [reason, n] : t.skipped) std::cout << "  skipped " << n << ": " << reason << "\n";
    std::cout << "  keywords refused:";
    for (const auto& k : t.refused) std::cout << " " << k;
    std::cout << "\n";
    for (const auto& w : t.wrong) ADD_FAILURE() << "wrong: " << w;
    EXPECT_EQ(t.run, t.passed + static_cast<int>(t.wrong.size()));
    total_run += t.run;
  }
  EXPECT_GT(total_run, 300);  // the suite ran, not a vacuous pass
}

// A planted bug must make the suite find a wrong answer in the files that test its keyword.
std::vector<std::string> wrong_with_planted_bug(const std::vector<std::string>& files,
                                                const SchemaEdit& plant) {
  Tally t;
  for (const auto& name : files) {
    const fs::path file = fs::path(kSuite) / "draft7" / name;
    if (!fs::exists(file))
      ADD_FAILURE() << file << " missing";
    else
      run_file(file, "draft7", t, plant);
  }
  EXPECT_GE(t.run, 3) << "the planted run decided too few cases to catch anything";
  return t.wrong;
}

// Renames `from` to `to` wherever it is a keyword of a schema in `s` (not inside enum/const values).
void rename_keyword(ojson& s, const std::string& from, const std::string& to) {
  if (!s.is_object()) return;
  if (s.contains(from)) {
    ojson value = s.at(from);
    s.erase(from);
    s[to] = value;
  }
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (it.key() == "enum" || it.key() == "const") continue;
    if (it.value().is_object()) {
      if (it.key() == "properties" || it.key() == "definitions" || it.key() == "$defs") {
        for (auto& sub : it.value()) rename_keyword(sub, from, to);
      } else {
        rename_keyword(it.value(), from, to);
      }
    } else if (it.value().is_array()) {
      for (auto& sub : it.value()) rename_keyword(sub, from, to);
    }
  }
}

TEST(JsonSchemaSuite, CatchesAPlantedExclusiveBoundReadAsInclusive) {
  // The bound off by one: exclusiveMinimum and exclusiveMaximum compiled as minimum and maximum.
  const auto wrong = wrong_with_planted_bug({"exclusiveMinimum.json", "exclusiveMaximum.json"}, [](ojson& s) {
    rename_keyword(s, "exclusiveMinimum", "minimum");
    rename_keyword(s, "exclusiveMaximum", "maximum");
  });
  ASSERT_FALSE(wrong.empty()) << "the suite did not see the planted off-by-one bound";
  std::printf("  planted inclusive bound: %zu wrong, e.g. %s\n", wrong.size(), wrong[0].c_str());
}

// Removes `required` from every allOf branch after the first, wherever an allOf is in `s`.
void drop_later_required(ojson& s) {
  if (s.is_object()) {
    if (s.contains("allOf") && s.at("allOf").is_array()) {
      for (size_t i = 1; i < s.at("allOf").size(); ++i) {
        if (s.at("allOf")[i].is_object()) s.at("allOf")[i].erase("required");
      }
    }
    for (auto& sub : s) drop_later_required(sub);
  } else if (s.is_array()) {
    for (auto& sub : s) drop_later_required(sub);
  }
}

TEST(JsonSchemaSuite, CatchesAPlantedAllOfMergeThatDropsARequired) {
  const auto wrong = wrong_with_planted_bug({"allOf.json"}, drop_later_required);
  ASSERT_FALSE(wrong.empty()) << "the suite did not see allOf's merge drop a branch's required";
  std::printf("  planted dropped required: %zu wrong, e.g. %s\n", wrong.size(), wrong[0].c_str());
}

TEST(JsonSchemaSuite, CatchesAPlantedConstrainingKeywordIgnoredAsUnknown) {
  // A keyword that constrains taken for an unknown one and ignored: each is caught in its file.
  for (const std::string keyword : {"maximum", "minLength", "required", "additionalProperties"}) {
    std::string file = keyword + ".json";
    const auto wrong =
        wrong_with_planted_bug({file}, [&](ojson& s) { rename_keyword(s, keyword, "x-planted"); });
    EXPECT_FALSE(wrong.empty()) << "the suite did not see " << keyword << " ignored";
  }
}

// ---------------------------------------------------------------------------------------------
// Random outputs, validated by python3-jsonschema.

// A random sentence: at each step one byte among those the grammar allows, closing bytes
// favoured so that strings and containers end; nullopt past `max_len` bytes.
std::optional<std::string> random_sentence(const std::shared_ptr<const Grammar>& g, std::mt19937& rng,
                                           size_t max_len) {
  Matcher m(g);
  std::string out;
  std::uniform_real_distribution<double> unit(0, 1);
  while (out.size() < max_len) {
    if (m.complete() && (!m.can_continue() || unit(rng) < 0.3)) return out;
    const std::vector<uint64_t> next = m.next_bytes();
    std::vector<int> allowed;
    std::vector<double> weight;
    for (int b = 0; b < 256; ++b) {
      if (!(next[b / 64] >> (b % 64) & 1)) continue;
      allowed.push_back(b);
      weight.push_back(b == '"' || b == '}' || b == ']' ? 25.0 : b == '\\' ? 3.0 : b >= 0x80 ? 0.3 : 1.0);
    }
    if (allowed.empty()) return std::nullopt;  // a dead end (an empty language)
    std::discrete_distribution<size_t> pick(weight.begin(), weight.end());
    const char c = static_cast<char>(allowed[pick(rng)]);
    if (!m.accept_bytes(std::string_view(&c, 1))) {
      ADD_FAILURE() << "next_bytes offered a byte accept_bytes refused";
      return std::nullopt;
    }
    out += c;
  }
  return std::nullopt;
}

TEST(JsonSchemaSuite, RandomOutputsValidateWithPythonJsonschema) {
  struct Case {
    const char* schema;
    JsonSchemaOptions options;
  };
  const std::vector<Case> cases = {
      {R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"},
          "email": {"type": "string", "format": "email"}}, "required": ["name", "age"]})",
       {0, true}},
      {R"({"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 5})", {0, true}},
      {R"({"enum": ["red", "green", 3, null, {"k": [1, 2]}]})", {0, true}},
      {R"({"type": "string", "format": "date-time"})", {0, true}},
      {R"({"type": "object", "properties": {"d": {"type": "string", "format": "date"},
          "t": {"type": "string", "format": "time"}, "u": {"type": "string", "format": "uuid"}},
          "required": ["d", "t", "u"]})",
       {0, true}},
      {R"({"type": "string", "pattern": "^[A-Z][a-z]{1,3}-[0-9]+$"})", {0, true}},
      {R"({"type": "string", "pattern": "^x|[0-9]$"})", {0, true}},
      {R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
          "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v"]}},
          "$ref": "#/$defs/node"})",
       {0, true}},
      {R"({"prefixItems": [{"type": "boolean"}, {"const": "x"}], "items": {"type": "null"}, "minItems": 1})",
       {0, true}},
      {R"({"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}, "n": {"type": "number"}},
          "required": ["kind", "n"]}, {"type": "object", "properties": {"kind": {"const": "b"}},
          "required": ["kind"]}, {"type": "string", "minLength": 1, "maxLength": 2}]})",
       {0, true}},
      {R"({"type": "object", "properties": {"a": {"type": "boolean"}}, "additionalProperties": {"type": ["integer", "null"]}})",
       {0, false}},
      {R"({"type": "object", "properties": {"ab": true}, "required": ["ab"]})", {0, false}},
      {R"({"anyOf": [{"type": "array", "items": {"type": "string", "minLength": 2}}, {"type": "boolean"}]})",
       {2, true}},
      {R"({})", {1, false}},
      // Number bounds as zod and pydantic write them, beside a keyword no draft defines.
      {R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": -9007199254740991,
          "maximum": 9007199254740991}, "p": {"type": "number", "exclusiveMinimum": 0, "maximum": 0.5},
          "m": {"type": "integer", "minimum": 1, "maximum": 12}}, "required": ["n", "p", "m"],
          "x-unknown": {"type": "string"}})",
       {0, true}},
      {R"({"type": "number", "minimum": -1.25, "exclusiveMaximum": -0.5})", {0, true}},
      // Formats past RFC 3339's (checked by jsonschema with rfc3987, and by the script's own RFC checks).
      {R"({"type": "object", "properties": {"v4": {"type": "string", "format": "ipv4"},
          "v6": {"type": "string", "format": "ipv6"}, "d": {"type": "string", "format": "duration"},
          "p": {"type": "string", "format": "json-pointer"}, "r": {"type": "string", "format": "relative-json-pointer"}},
          "required": ["v4", "v6", "d", "p", "r"]})",
       {0, true}},
      {R"({"type": "array", "prefixItems": [{"type": "string", "format": "uri"}], "items": {"type": "string",
          "format": "uri-reference"}, "minItems": 1, "maxItems": 3})",
       {0, true}},
      // Member counts and dependencies, with additional members.
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
          "additionalProperties": {"type": "null"}, "minProperties": 2, "maxProperties": 3,
          "dependentRequired": {"b": ["a", "z"]}})",
       {0, false}},
  };
  rootspec::testing::TempDir dir("json_schema_validate");
  const fs::path outputs = fs::path(dir.path()) / "outputs.jsonl";
  std::ofstream out(outputs);
  std::mt19937 rng(12345);
  int written = 0;
  for (const auto& c : cases) {
    const ojson schema = ojson::parse(c.schema);
    const auto g = compile_json_schema(schema, c.options);
    int got = 0;
    for (int attempt = 0; attempt < 400 && got < 25; ++attempt) {
      const auto s = random_sentence(g, rng, 600);
      if (!s) continue;
      ASSERT_TRUE(accepts(g, *s)) << *s;
      // The text's bytes as hex: the validator checks them as UTF-8 itself.
      std::string hex;
      for (unsigned char b : *s) {
        static const char* const digits = "0123456789abcdef";
        hex += digits[b >> 4];
        hex += digits[b & 15];
      }
      ojson line = {{"schema", schema}, {"text_hex", hex}};
      out << line.dump() << "\n";
      ++got;
    }
    EXPECT_GE(got, 10) << "too few complete samples for " << c.schema;
    written += got;
  }
  out.close();
  const std::string script = rootspec::source_dir() + "/tests/grammar/json_schema_suite_validate.py";
  const std::string python = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string cmd = python + " " + script + " " + outputs.string() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string report;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) report.append(buf, n);
  const int status = pclose(p);
  std::cout << report;
  EXPECT_EQ(status, 0) << report;
  EXPECT_NE(report.find("validated " + std::to_string(written) + " "), std::string::npos) << report;
}

}  // namespace
