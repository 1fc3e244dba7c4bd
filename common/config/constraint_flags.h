// The structured-output flags of rootspec-client, rootspec-generate and rootspec-bench
// (constraint.h): at most one of --json-schema FILE, --json-object, --regex PATTERN,
// --choice A,B,… and --grammar FILE, with --max-whitespace N for the JSON kinds.
#pragma once

#include <CLI/CLI.hpp>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "constraint.h"

namespace rootspec {

class ConstraintFlags {
 public:
  void add_to(CLI::App& app) {
    auto* schema =
        app.add_option("--json-schema", schema_file_,
                       "the output is JSON valid under this JSON schema (common/grammar/json_schema.h "
                       "lists the keywords; others are refused by name)")
            ->type_name("FILE");
    auto* object = app.add_flag("--json-object", json_object_, "the output is a JSON object");
    regex_option_ = app.add_option("--regex", regex_, "the whole output matches this ECMA-262 regex")
                        ->type_name("PATTERN");
    auto* choice = app.add_option("--choice", choices_,
                                  "the output is exactly one of these strings (split at commas; repeatable)")
                       ->delimiter(',')
                       ->type_name("A,B,…");
    auto* grammar =
        app.add_option("--grammar", grammar_file_,
                       "the output is a sentence of this GBNF grammar (llama.cpp's; start rule root)")
            ->type_name("FILE");
    whitespace_ =
        app.add_option("--max-whitespace", max_whitespace_,
                       "JSON kinds: at most N bytes of whitespace between tokens (0-64; default 0, compact)")
            ->type_name("N");
    const std::vector<CLI::Option*> kinds = {schema, object, regex_option_, choice, grammar};
    for (CLI::Option* a : kinds)
      for (CLI::Option* b : kinds)
        if (a != b) a->excludes(b);
  }

  // The constraint the flags ask for (inactive when none); reads the files. Throws
  // CLI::ValidationError naming the flag.
  grammar::OutputConstraint constraint() const {
    using Kind = grammar::OutputConstraint::Kind;
    grammar::OutputConstraint c;
    if (!schema_file_.empty()) {
      c.kind = Kind::JsonSchema;
      c.text = read("--json-schema", schema_file_);
    } else if (json_object_) {
      c.kind = Kind::JsonObject;
    } else if (regex_option_->count()) {  // the empty pattern is a pattern (the empty output)
      c.kind = Kind::Regex;
      c.text = regex_;
    } else if (!choices_.empty()) {
      c.kind = Kind::Choice;
      c.text = nlohmann::json(choices_).dump();
    } else if (!grammar_file_.empty()) {
      c.kind = Kind::Grammar;
      c.text = read("--grammar", grammar_file_);
    }
    if (whitespace_->count()) {
      if (c.kind != Kind::JsonSchema && c.kind != Kind::JsonObject)
        throw CLI::ValidationError("--max-whitespace", "only with --json-schema or --json-object");
      if (max_whitespace_ < 0 || max_whitespace_ > 64)
        throw CLI::ValidationError("--max-whitespace", "must be in [0, 64]");
      c.max_whitespace = max_whitespace_;
    }
    return c;
  }

 private:
  static std::string read(const char* flag, const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw CLI::ValidationError(flag, "cannot read '" + path + "'");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

  std::string schema_file_, regex_, grammar_file_;
  std::vector<std::string> choices_;
  bool json_object_ = false;
  int max_whitespace_ = 0;
  CLI::Option* regex_option_ = nullptr;
  CLI::Option* whitespace_ = nullptr;
};

}  // namespace rootspec
