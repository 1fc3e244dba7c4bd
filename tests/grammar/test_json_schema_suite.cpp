// The JSON Schema compiler against outside references:
//   1. the official JSON Schema test suite (Debian's json-schema-test-suite): every test case whose
//      schema compiles must be decided right: valid instances accepted, invalid ones rejected;
//   2. Debian's python3-jsonschema: random texts drawn from compiled grammars must validate.
//
// Instances are decided as schema_instances.h says (member orders, integer spellings).
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
#include "schema_instances.h"
#include "source_tree.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using namespace rootspec::grammar;
using ojson = nlohmann::ordered_json;

using namespace schema_instances;

const char* const kSuite = "/usr/share/json-schema-test-suite/tests";

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
      const Verdict v = decide(g, schema, test.at("data"), test.at("valid").get<bool>());
      if (v.kind == Verdict::Kind::kSkipped) {
        ++t.skipped[v.detail];
        continue;
      }
      ++t.run;
      if (v.kind == Verdict::Kind::kRight) {
        ++t.passed;
      } else {
        t.wrong.push_back(where + ": " + v.detail);
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


TEST(JsonSchemaSuite, CatchesAPlantedExclusiveBoundReadAsInclusive) {
  // The bound off by one: exclusiveMinimum and exclusiveMaximum compiled as minimum and maximum.
  const auto wrong = wrong_with_planted_bug({"exclusiveMinimum.json", "exclusiveMaximum.json"}, [](ojson& s) {
    rename_keyword(s, "exclusiveMinimum", "minimum");
    rename_keyword(s, "exclusiveMaximum", "maximum");
  });
  ASSERT_FALSE(wrong.empty()) << "the suite did not see the planted off-by-one bound";
  std::printf("  planted inclusive bound: %zu wrong, e.g. %s\n", wrong.size(), wrong[0].c_str());
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
      {R"({"type": "array", "prefixItems": [{"type": "string", "format": "iri"}], "items": {"type": "string",
          "format": "iri-reference"}, "minItems": 1, "maxItems": 3})",
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
