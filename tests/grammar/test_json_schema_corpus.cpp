// The JSON Schema compiler on a corpus of about 3 200 real schemas (tests/grammar/schema_corpus/
// README.md: schema files from npm packages, ESLint rules' option schemas, zod and pydantic models,
// the JSON Schema Test Suite), each with instances python3-jsonschema judged valid or invalid,
// built by tests/prepare/schema_corpus.sh into a cache outside the repository.
//
// Every schema is compiled with JSON Schema's own semantics (strict off); a compiled schema must
// decide its instances right (schema_instances.h: member orders, integer spellings); an invalid
// instance accepted is a failure, always. The figures (compiled, passing, per-keyword refusals,
// per source) are printed; bench/grammar's corpus benchmark times the same schemas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "json_schema.h"
#include "schema_instances.h"

namespace {

namespace fs = std::filesystem;
using namespace rootspec::grammar;
using namespace schema_instances;

// tests/prepare/schema_corpus.sh's folder.
fs::path corpus_file() {
  if (const char* dir = std::getenv("ROOTSPEC_SCHEMA_CORPUS")) return fs::path(dir) / "corpus.jsonl";
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path cache = xdg && *xdg ? fs::path(xdg) : fs::path(home && *home ? home : "/root") / ".cache";
  return cache / "rootspec" / "schema-corpus" / "corpus.jsonl";
}

struct Entry {
  std::string id, source, draft;
  ojson schema;
  std::vector<ojson> valid, invalid;
};

const std::vector<Entry>& corpus() {
  static const std::vector<Entry> entries = [] {
    std::vector<Entry> out;
    std::ifstream in(corpus_file());
    std::string line;
    while (std::getline(in, line)) {
      const ojson j = ojson::parse(line);
      Entry e{j.at("id").get<std::string>(),
              j.at("source").get<std::string>(),
              j.at("draft").get<std::string>(),
              j.at("schema"),
              {},
              {}};
      for (const auto& v : j.at("valid")) e.valid.push_back(v);
      for (const auto& v : j.at("invalid")) e.invalid.push_back(v);
      // The judge read a schema without $schema in this draft: say so where the draft changes a
      // meaning ($ref's siblings).
      if (e.schema.is_object() && !e.schema.contains("$schema")) {
        if (e.draft == "draft7") e.schema["$schema"] = "http://json-schema.org/draft-07/schema#";
        if (e.draft == "draft6") e.schema["$schema"] = "http://json-schema.org/draft-06/schema#";
        if (e.draft == "draft4") e.schema["$schema"] = "http://json-schema.org/draft-04/schema#";
      }
      out.push_back(std::move(e));
    }
    return out;
  }();
  return entries;
}

struct Tally {
  int schemas = 0, compiled = 0, passing = 0;
  int valid_right = 0, valid_rejected = 0, invalid_right = 0, invalid_accepted = 0, skipped = 0;
  int schemas_with_valid_rejected = 0;
  std::map<std::string, int> refused;                    // keyword → schemas
  std::map<std::string, int> reasons;                    // refusal message → schemas
  std::map<std::string, std::pair<int, int>> by_source;  // source → (schemas, passing)
  std::vector<std::string> wrong;                        // "id: detail", the first few
};

using SchemaEdit = std::function<void(ojson&)>;

// Whether `key` is a member name anywhere in `s`.
bool mentions(const ojson& s, const std::string& key) {
  if (s.is_object()) {
    if (s.contains(key)) return true;
    for (const auto& v : s) {
      if (mentions(v, key)) return true;
    }
  } else if (s.is_array()) {
    for (const auto& v : s) {
      if (mentions(v, key)) return true;
    }
  }
  return false;
}

// The corpus's schemas (those that mention `only`, when given), each compiled after `plant`;
// with `first_wrong`, up to the first schema decided wrong.
Tally run_corpus(const SchemaEdit& plant = nullptr, const std::string& only = "", bool first_wrong = false) {
  Tally t;
  for (const Entry& e : corpus()) {
    if (first_wrong && !t.wrong.empty()) break;
    if (!only.empty() && !mentions(e.schema, only)) continue;
    ++t.schemas;
    ++t.by_source[e.source].first;
    std::shared_ptr<const Grammar> g;
    try {
      if (plant) {
        ojson planted = e.schema;
        plant(planted);
        g = compile_json_schema(planted, JsonSchemaOptions{0, false, false});
      } else {
        g = compile_json_schema(e.schema, JsonSchemaOptions{0, false, false});
      }
    } catch (const GrammarError& err) {
      ++t.refused[err.field];
      ++t.reasons[err.what()];
      continue;
    }
    ++t.compiled;
    bool all_right = true, valid_rejected = false;
    for (const bool valid : {true, false}) {
      for (const ojson& data : valid ? e.valid : e.invalid) {
        const Verdict v = decide(g, e.schema, data, valid);
        if (v.kind == Verdict::Kind::kSkipped) {
          ++t.skipped;
          all_right = false;
          continue;
        }
        const bool right = v.kind == Verdict::Kind::kRight;
        (valid ? (right ? t.valid_right : t.valid_rejected)
               : (right ? t.invalid_right : t.invalid_accepted))++;
        if (!right) {
          all_right = false;
          valid_rejected = valid_rejected || valid;
          if (t.wrong.size() < 40) t.wrong.push_back(e.id + ": " + v.detail.substr(0, 300));
        }
      }
    }
    t.schemas_with_valid_rejected += valid_rejected;
    if (all_right) {
      ++t.passing;
      ++t.by_source[e.source].second;
    }
  }
  return t;
}

TEST(JsonSchemaCorpus, AcceptsNoInvalidInstanceAndReportsWhatItCompiles) {
  ASSERT_TRUE(fs::exists(corpus_file()))
      << corpus_file() << " missing: bash tests/prepare/schema_corpus.sh builds it (tests/run does)";
  const Tally t = run_corpus();
  std::printf(
      "[corpus] %d schemas: compiled %d (%.1f%%), passing %d (%.1f%%: compiled, every instance right)\n",
      t.schemas, t.compiled, 100.0 * t.compiled / t.schemas, t.passing, 100.0 * t.passing / t.schemas);
  std::printf(
      "  valid instances: %d accepted, %d rejected (%d schemas); invalid: %d rejected, %d accepted; "
      "%d skipped\n",
      t.valid_right, t.valid_rejected, t.schemas_with_valid_rejected, t.invalid_right, t.invalid_accepted,
      t.skipped);
  std::printf("  refused, by the keyword named:");
  for (const auto& [k, n] : t.refused) std::printf(" %s %d,", k.c_str(), n);
  std::vector<std::pair<int, std::string>> reasons;
  for (const auto& [why, n] : t.reasons) reasons.push_back({n, why});
  std::sort(reasons.rbegin(), reasons.rend());
  std::printf("\n  most frequent refusals:");
  for (size_t i = 0; i < reasons.size() && i < 25; ++i)
    std::printf("\n    %4d  %s", reasons[i].first, reasons[i].second.substr(0, 160).c_str());
  std::printf("\n  passing by source:");
  for (const auto& [source, n] : t.by_source) std::printf(" %s %d/%d,", source.c_str(), n.second, n.first);
  std::printf("\n");
  for (const auto& w : t.wrong) std::printf("  wrong: %s\n", w.c_str());
  EXPECT_GE(t.schemas, 3000) << "the corpus is smaller than it should be";
  EXPECT_EQ(t.invalid_accepted, 0) << "an invalid instance was accepted";
}

// Planted bugs, written as the schema the buggy compiler would have compiled in place of the
// real one: the corpus's instances must expose each.
void expect_caught(const std::string& what, const std::string& keyword, const SchemaEdit& plant) {
  ASSERT_TRUE(fs::exists(corpus_file())) << corpus_file() << " missing";
  const Tally t = run_corpus(plant, keyword, true);
  ASSERT_FALSE(t.wrong.empty()) << "the corpus did not see " << what << " (" << t.compiled << " schemas with "
                                << keyword << " compiled)";
  std::printf("  planted %s: caught after %d schemas with %s, %s\n", what.c_str(), t.compiled,
              keyword.c_str(), t.wrong[0].substr(0, 200).c_str());
}

TEST(JsonSchemaCorpus, CatchesAPlantedExclusiveBoundReadAsInclusive) {
  expect_caught("exclusiveMinimum read as minimum", "exclusiveMinimum",
                [](ojson& s) { rename_keyword(s, "exclusiveMinimum", "minimum"); });
}

TEST(JsonSchemaCorpus, CatchesAPlantedAllOfMergeThatDropsARequired) {
  expect_caught("allOf merge that drops a required", "allOf", drop_later_required);
}

TEST(JsonSchemaCorpus, CatchesAPlantedConstrainingKeywordIgnoredAsUnknown) {
  for (const std::string keyword : {"maxLength", "required", "additionalProperties", "enum"})
    expect_caught(keyword + " ignored as an unknown keyword", keyword,
                  [&](ojson& s) { rename_keyword(s, keyword, "x-planted"); });
}

}  // namespace
