#include "schema_instances.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "matcher.h"

namespace schema_instances {

using namespace rootspec::grammar;

namespace {

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
bool orders_dropped = false;  // the last orders() left some out (kMaxOrders)

void add_unique(std::vector<ojson>& out, const ojson& x) {
  if (out.size() >= kMaxOrders) {
    orders_dropped = orders_dropped || std::none_of(out.begin(), out.end(),
                                                    [&](const ojson& y) { return y.dump() == x.dump(); });
    return;
  }
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

}  // namespace

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
      // The compiler merges the keywords beside the union into each branch (base first).
      ojson base = s;
      base.erase(key);
      for (const auto& b : s.at(key)) {
        for (const auto& c : orders(v, b, root, depth + 1)) add_unique(out, c);
        if (base.size() > 0) {
          const ojson merged = flatten_all_of(ojson{{"allOf", {base, b}}}, root, depth + 1);
          for (const auto& c : orders(v, merged, root, depth + 1)) add_unique(out, c);
        }
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

Verdict decide(const std::shared_ptr<const Grammar>& g, const ojson& schema, const ojson& data, bool valid) {
  if (has_imprecise_number(data))
    return {Verdict::Kind::kSkipped,
            "a number with more digits than a double keeps (the harness reads numbers as doubles)"};
  orders_dropped = false;
  const std::vector<ojson> candidates = orders(data, schema, schema, 0);
  const bool some_orders_untried = orders_dropped;
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
    // The documented spelling divergence: a valid integer written 1.0 (or a bignum 1.2e+52).
    if (valid && !any && respelled_ok)
      return {Verdict::Kind::kSkipped,
              "integer written with a fraction or exponent (1.0, 1.2e+52): valid, grammar writes 1"};
    if (valid && !any && some_orders_untried)
      return {Verdict::Kind::kSkipped,
              "more member orders than the harness tries (" + std::to_string(kMaxOrders) + ")"};
    // An invalid instance must stay rejected in every spelling of its numbers.
    if (!valid && respelled_ok) any = true;
  } catch (const GrammarError& e) {
    return {Verdict::Kind::kWrong, std::string("matcher error ") + e.what()};
  }
  if (any == valid) return {Verdict::Kind::kRight, ""};
  return {Verdict::Kind::kWrong,
          valid ? "valid, rejected: " + data.dump() : "invalid, accepted: " + accepted_text};
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

}  // namespace schema_instances
