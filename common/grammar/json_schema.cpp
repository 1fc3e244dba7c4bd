#include "json_schema.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "matcher.h"
#include "number_range.h"

namespace rootspec::grammar {
namespace {

using ojson = nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& field, const std::string& message) {
  throw GrammarError(field, message);
}

// ---------------------------------------------------------------------------------------------
// Keywords.

bool is_annotation(const std::string& k) {
  static const std::set<std::string> kAnnotations = {"title",    "description", "default",    "examples",
                                                     "$comment", "deprecated",  "readOnly",   "writeOnly",
                                                     "$schema",  "$defs",       "definitions"};
  return kAnnotations.count(k) > 0;
}

// Every keyword some draft of JSON Schema (3 to 2020-12) defines beside the annotations: a name
// outside this list constrains nothing, as JSON Schema says of unknown keywords ("x-…",
// Kubernetes' extensions, OpenAPI's "nullable", …), and is ignored; a name in it is compiled or
// refused.
bool is_known(const std::string& k) {
  static const std::set<std::string> kKnown = {
      // core
      "$schema", "$id", "id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef",
      "$recursiveAnchor", "$vocabulary", "$comment", "$defs", "definitions",
      // applicators
      "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies",
      "prefixItems", "items", "additionalItems", "contains", "properties", "patternProperties",
      "additionalProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "extends",
      "disallow",
      // validation
      "type", "enum", "const", "multipleOf", "divisibleBy", "maximum", "exclusiveMaximum", "minimum",
      "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
      "maxContains", "minContains", "maxProperties", "minProperties", "required", "dependentRequired",
      // format and content
      "format", "contentEncoding", "contentMediaType", "contentSchema"};
  return kKnown.count(k) > 0;
}

bool is_supported(const std::string& k) {
  static const std::set<std::string> kSupported = {
      // values and numbers
      "type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
      // objects and arrays
      "properties", "required", "additionalProperties", "propertyNames", "minProperties", "maxProperties",
      "dependentRequired", "dependencies", "patternProperties", "items", "prefixItems", "additionalItems",
      "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains",
      // strings
      "minLength", "maxLength", "pattern", "format",
      // applicators
      "anyOf", "oneOf", "allOf", "not", "$ref"};
  return kSupported.count(k) > 0;
}

// Keywords that say nothing about which instances are valid: annotations, containers,
// identifiers ($id, draft 4's id: checked where they would move the base of references) and
// unknown keywords.
bool is_ignored(const std::string& k) { return is_annotation(k) || k == "$id" || k == "id" || !is_known(k); }

// A schema's keywords that constrain instances.
std::vector<std::string> constraining_keywords(const ojson& s) {
  std::vector<std::string> out;
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (!is_ignored(it.key())) out.push_back(it.key());
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// JSON helpers.

// JSON Schema's equality: numbers by value, objects regardless of member order.
bool json_equal(const ojson& a, const ojson& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_number_float() || b.is_number_float()) return a.get<double>() == b.get<double>();
    if (a.is_number_unsigned() && b.is_number_unsigned()) return a.get<uint64_t>() == b.get<uint64_t>();
    if (a.is_number_unsigned() && a.get<uint64_t>() > uint64_t(INT64_MAX)) return false;
    if (b.is_number_unsigned() && b.get<uint64_t>() > uint64_t(INT64_MAX)) return false;
    return a.get<int64_t>() == b.get<int64_t>();
  }
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
      auto jt = b.find(it.key());
      if (jt == b.end() || !json_equal(it.value(), *jt)) return false;
    }
    return true;
  }
  return a == b;
}

bool is_integral(const ojson& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<uint32_t> decode_utf8(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

// A non-negative integer keyword value (minLength, maxItems, …).
uint64_t count_value(const ojson& s, const char* key) {
  const ojson& v = s.at(key);
  if (!is_integral(v) || v.get<double>() < 0) fail(key, std::string(key) + " must be a non-negative integer");
  if (v.get<double>() > 1e15) fail(key, std::string(key) + " is too large");
  return v.is_number_float() ? static_cast<uint64_t>(v.get<double>()) : v.get<uint64_t>();
}

constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();

// ---------------------------------------------------------------------------------------------
// GBNF text.

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*X", digits, v);
  return buf;
}

// A code point inside a GBNF literal or class.
std::string gbnf_cp(uint32_t cp, bool in_class) {
  const bool special =
      in_class ? (cp == ']' || cp == '[' || cp == '\\' || cp == '^' || cp == '-') : (cp == '"' || cp == '\\');
  if (cp >= 0x20 && cp < 0x7F && !special) return std::string(1, static_cast<char>(cp));
  if (cp < 0x100) return "\\x" + hex(cp, 2);
  if (cp < 0x10000) return "\\u" + hex(cp, 4);
  return "\\U" + hex(cp, 8);
}

// A GBNF literal for UTF-8 bytes (text decoded into code points).
std::string gbnf_literal(const std::string& utf8) {
  std::string s = "\"";
  for (uint32_t cp : decode_utf8(utf8)) s += gbnf_cp(cp, false);
  return s + "\"";
}

const char* const kNever = "[^\\x00-\\U0010FFFF]";  // matches nothing

// ---------------------------------------------------------------------------------------------
// JSON string encodings of sets of code points: every way RFC 8259 writes one code point (raw,
// a two-character escape, \uXXXX with either letter case, or a surrogate pair). Used where a
// grammar must be exact about the decoded string: the names an additional member may not have,
// and the code points a `pattern` admits.

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // sorted, disjoint, inclusive

Ranges intersect(const Ranges& a, uint32_t lo, uint32_t hi) {
  Ranges out;
  for (const auto& [a0, a1] : a) {
    const uint32_t x = std::max(a0, lo), y = std::min(a1, hi);
    if (x <= y) out.push_back({x, y});
  }
  return out;
}

Ranges subtract(const Ranges& a, uint32_t lo, uint32_t hi) {
  Ranges out;
  for (const auto& [a0, a1] : a) {
    if (a1 < lo || a0 > hi) {
      out.push_back({a0, a1});
      continue;
    }
    if (a0 < lo) out.push_back({a0, lo - 1});
    if (a1 > hi) out.push_back({hi + 1, a1});
  }
  return out;
}

bool contains(const Ranges& a, uint32_t c) {
  for (const auto& [a0, a1] : a) {
    if (a0 <= c && c <= a1) return true;
  }
  return false;
}

Ranges normalise(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

std::string class_of(const Ranges& r) {
  std::string s = "[";
  for (const auto& [lo, hi] : r) {
    s += gbnf_cp(lo, true);
    if (hi != lo) s += "-" + gbnf_cp(hi, true);
  }
  return s + "]";
}

// One hex digit with value in [a, b], either letter case.
std::string hex_digit_class(uint32_t a, uint32_t b) {
  Ranges r;
  if (a <= 9) r.push_back({'0' + a, '0' + std::min<uint32_t>(b, 9)});
  if (b >= 10) {
    const uint32_t x = std::max<uint32_t>(a, 10) - 10, y = b - 10;
    r.push_back({'A' + x, 'A' + y});
    r.push_back({'a' + x, 'a' + y});
  }
  return class_of(r);
}

// `digits` hex digits whose value lies in [lo, hi].
std::string hex_range(uint32_t lo, uint32_t hi, int digits) {
  if (digits == 0) return "";
  uint32_t unit = 1;
  for (int i = 1; i < digits; ++i) unit *= 16;
  const uint32_t a = lo / unit, b = hi / unit, ra = lo % unit, rb = hi % unit;
  auto tail = [&](uint32_t x, uint32_t y) {
    const std::string t = hex_range(x, y, digits - 1);
    return t.empty() ? "" : " " + t;
  };
  if (a == b) return "(" + hex_digit_class(a, a) + tail(ra, rb) + ")";
  std::vector<std::string> alts;
  uint32_t first = a, last = b;
  if (ra != 0) {
    alts.push_back(hex_digit_class(a, a) + tail(ra, unit - 1));
    first = a + 1;
  }
  if (rb != unit - 1) last = b - 1;
  if (first <= last) alts.push_back(hex_digit_class(first, last) + tail(0, unit - 1));
  if (rb != unit - 1) alts.push_back(hex_digit_class(b, b) + tail(0, rb));
  std::string s = "(";
  for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
  return s + ")";
}

// Every JSON-string encoding of a code point in `set` (surrogates never: they encode nothing on
// their own); "" when the set is empty.
std::string json_chars_of(const Ranges& set_in) {
  const Ranges set = subtract(set_in, 0xD800, 0xDFFF);
  std::vector<std::string> alts;
  Ranges raw = intersect(set, 0x20, 0x10FFFF);
  raw = subtract(subtract(raw, '"', '"'), '\\', '\\');
  if (!raw.empty()) alts.push_back(class_of(raw));
  static const std::pair<uint32_t, const char*> kShort[] = {
      {'"', "\\\\\\\""}, {'\\', "\\\\\\\\"}, {'/', "\\\\/"}, {8, "\\\\b"},
      {12, "\\\\f"},     {10, "\\\\n"},      {13, "\\\\r"},  {9, "\\\\t"}};
  for (const auto& [c, text] : kShort) {
    if (contains(set, c)) alts.push_back(std::string("\"") + text + "\"");
  }
  for (const auto& [lo, hi] : intersect(set, 0, 0xFFFF)) alts.push_back("\"\\\\u\" " + hex_range(lo, hi, 4));
  for (const auto& [lo, hi] : intersect(set, 0x10000, 0x10FFFF)) {
    const uint32_t h0 = 0xD800 + ((lo - 0x10000) >> 10), l0 = 0xDC00 + ((lo - 0x10000) & 0x3FF);
    const uint32_t h1 = 0xD800 + ((hi - 0x10000) >> 10), l1 = 0xDC00 + ((hi - 0x10000) & 0x3FF);
    auto pair = [&](uint32_t ha, uint32_t hb, uint32_t la, uint32_t lb) {
      alts.push_back("\"\\\\u\" " + hex_range(ha, hb, 4) + " \"\\\\u\" " + hex_range(la, lb, 4));
    };
    if (h0 == h1) {
      pair(h0, h0, l0, l1);
      continue;
    }
    uint32_t mid_lo = h0 + 1, mid_hi = h1 - 1;
    if (l0 == 0xDC00) {
      mid_lo = h0;
    } else {
      pair(h0, h0, l0, 0xDFFF);
    }
    if (l1 == 0xDFFF) mid_hi = h1;
    if (mid_lo <= mid_hi) pair(mid_lo, mid_hi, 0xDC00, 0xDFFF);
    if (l1 != 0xDFFF) pair(h1, h1, 0xDC00, l1);
  }
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string s = "(";
  for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
  return s + ")";
}

const Ranges kAllCodePoints = {{0, 0xD7FF}, {0xE000, 0x10FFFF}};

// ---------------------------------------------------------------------------------------------
// Rewriting a regex's GBNF (over the decoded string) into GBNF over the string's JSON encoding:
// each literal code point and each class becomes all of its JSON encodings.

uint32_t read_escape(std::string_view t, size_t& i) {
  // t[i] is the character after the backslash.
  const char c = t[i++];
  auto read_hex = [&](int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (i >= t.size()) fail("pattern", "truncated escape in the pattern's grammar");
      const char h = t[i++];
      v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return v;
  };
  switch (c) {
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    case 'x':
      return read_hex(2);
    case 'u':
      return read_hex(4);
    case 'U':
      return read_hex(8);
    default:
      return static_cast<unsigned char>(c);
  }
}

uint32_t read_cp(std::string_view t, size_t& i) {
  const unsigned char c = t[i];
  if (c == '\\') {
    ++i;
    return read_escape(t, i);
  }
  const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (t[i + k] & 0x3F);
  i += n;
  return cp;
}

std::string json_encode_gbnf(std::string_view t) {
  std::string out;
  size_t i = 0;
  while (i < t.size()) {
    const char c = t[i];
    if (c == '"') {
      ++i;
      std::string seq;
      while (i < t.size() && t[i] != '"') {
        const uint32_t cp = read_cp(t, i);
        seq += (seq.empty() ? "" : " ") + json_chars_of({{cp, cp}});
      }
      ++i;
      out += seq.empty() ? "\"\"" : "(" + seq + ")";
    } else if (c == '[') {
      ++i;
      bool negated = i < t.size() && t[i] == '^';
      if (negated) ++i;
      Ranges r;
      while (i < t.size() && t[i] != ']') {
        const uint32_t lo = read_cp(t, i);
        uint32_t hi = lo;
        if (i + 1 < t.size() && t[i] == '-' && t[i + 1] != ']') {
          ++i;
          hi = read_cp(t, i);
        }
        r.push_back({lo, hi});
      }
      ++i;
      r = normalise(r);
      if (negated) {
        Ranges all = kAllCodePoints;
        for (const auto& [lo, hi] : r) all = subtract(all, lo, hi);
        r = all;
      }
      const std::string e = json_chars_of(r);
      out += e.empty() ? kNever : e;
    } else if (c == '.') {
      ++i;
      out += json_chars_of(kAllCodePoints);
    } else if (c == '#') {
      while (i < t.size() && t[i] != '\n') ++i;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Formats (RFC 3339 §5.6 and the documented subsets), as GBNF over the raw string contents.

// RFC 3986 §3.2.2's dec-octet: 0 to 255 without leading zeros.
std::string ipv4_octet(const std::string& name) {
  return name + "-octet ::= \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]\n";
}

// RFC 3986 §3.2.2's IPv6address (h16: 1 to 4 hex digits; ls32: two h16 or an IPv4 address).
std::string ipv6_address(const std::string& name) {
  const std::string h = name + "-h16", c = name + "-h16c", ls32 = name + "-ls32";
  auto n = [&](int k) { return k == 0 ? std::string() : c + "{" + std::to_string(k) + "} "; };
  // [ *k( h16 ":" ) h16 ] "::" before the right side.
  auto head = [&](int k) {
    return k < 0 ? std::string() : "(" + (k ? c + "{0," + std::to_string(k) + "} " : "") + h + ")? ";
  };
  return "(" + n(6) + ls32 + " | \"::\" " + n(5) + ls32 + " | " + head(0) + "\"::\" " + n(4) + ls32 + " | " +
         head(1) + "\"::\" " + n(3) + ls32 + " | " + head(2) + "\"::\" " + n(2) + ls32 + " | " + head(3) +
         "\"::\" " + n(1) + ls32 + " | " + head(4) + "\"::\" " + ls32 + " | " + head(5) + "\"::\" " + h +
         " | " + head(6) + "\"::\")";
}

std::string ipv6_rules(const std::string& name) {
  return name + "-h16 ::= [0-9a-fA-F]{1,4}\n" + name + "-h16c ::= " + name + "-h16 \":\"\n" + name +
         "-ls32 ::= " + name + "-h16 \":\" " + name + "-h16 | " + name + "-octet (\".\" " + name +
         "-octet){3}\n" + ipv4_octet(name);
}

// RFC 3987 §2.2's ucschar and iprivate: the code points an IRI adds to a URI's characters.
const char* const kUcschar =
    "[\\u00A0-\\uD7FF\\uF900-\\uFDCF\\uFDF0-\\uFFEF\\U00010000-\\U0001FFFD\\U00020000-\\U0002FFFD"
    "\\U00030000-\\U0003FFFD\\U00040000-\\U0004FFFD\\U00050000-\\U0005FFFD\\U00060000-\\U0006FFFD"
    "\\U00070000-\\U0007FFFD\\U00080000-\\U0008FFFD\\U00090000-\\U0009FFFD\\U000A0000-\\U000AFFFD"
    "\\U000B0000-\\U000BFFFD\\U000C0000-\\U000CFFFD\\U000D0000-\\U000DFFFD\\U000E1000-\\U000EFFFD]";
const char* const kIprivate = "[\\uE000-\\uF8FF\\U000F0000-\\U000FFFFD\\U00100000-\\U0010FFFD]";

// RFC 3986 §3 and §4.1: URI (with a scheme) or URI-reference (a URI or a relative reference);
// with `iri`, RFC 3987's IRI and IRI-reference (ucschar among the unreserved characters,
// iprivate in the query).
std::string uri_rules(bool absolute, bool iri, const std::string& name) {
  const std::string p = name + "-";
  std::string r;
  r += p + "unreserved ::= [A-Za-z0-9._~-]" + (iri ? std::string(" | ") + kUcschar : "") + "\n";
  r += p + "pct ::= \"%\" [0-9a-fA-F] [0-9a-fA-F]\n";
  r += p + "sub ::= [!$&'()*+,;=]\n";
  r += p + "pchar ::= " + p + "unreserved | " + p + "pct | " + p + "sub | [:@]\n";
  r += p + "scheme ::= [A-Za-z] [A-Za-z0-9+.-]*\n";
  r += p + "userinfo ::= (" + p + "unreserved | " + p + "pct | " + p + "sub | \":\")*\n";
  r += p + "ipfuture ::= [vV] [0-9a-fA-F]+ \".\" (" + p + "unreserved | " + p + "sub | \":\")+\n";
  r += p + "ip6 ::= " + ipv6_address(p + "ip6") + "\n" + ipv6_rules(p + "ip6");
  r += p + "host ::= \"[\" (" + p + "ip6 | " + p + "ipfuture) \"]\" | " + p + "ip6-octet (\".\" " + p +
       "ip6-octet){3} | (" + p + "unreserved | " + p + "pct | " + p + "sub)*\n";
  r += p + "authority ::= (" + p + "userinfo \"@\")? " + p + "host (\":\" [0-9]*)?\n";
  r += p + "segment ::= " + p + "pchar*\n";
  r += p + "segment-nz ::= " + p + "pchar+\n";
  r += p + "segment-nz-nc ::= (" + p + "unreserved | " + p + "pct | " + p + "sub | \"@\")+\n";
  r += p + "abempty ::= (\"/\" " + p + "segment)*\n";
  r += p + "absolute ::= \"/\" (" + p + "segment-nz " + p + "abempty)?\n";
  r += p + "rootless ::= " + p + "segment-nz " + p + "abempty\n";
  r += p + "noscheme ::= " + p + "segment-nz-nc " + p + "abempty\n";
  r += p + "tail ::= (\"?\" (" + p + "pchar | [/?]" + (iri ? std::string(" | ") + kIprivate : "") +
       ")*)? (\"#\" (" + p + "pchar | [/?])*)?\n";
  const std::string hier =
      "(\"//\" " + p + "authority " + p + "abempty | " + p + "absolute | " + p + "rootless)?";
  const std::string relative =
      "(\"//\" " + p + "authority " + p + "abempty | " + p + "absolute | " + p + "noscheme)?";
  r += p + "uri ::= " + p + "scheme \":\" " + hier + " " + p + "tail\n";
  if (absolute) return name + " ::= " + p + "uri\n" + r;
  return name + " ::= " + p + "uri | " + relative + " " + p + "tail\n" + r;
}

std::string format_rules(const std::string& format, const std::string& name) {
  const std::string d2 = "[0-9] [0-9]";
  const std::string month31 = "(\"0\" [13578] | \"1\" [02])", month30 = "(\"0\" [469] | \"11\")";
  const std::string day28 = "(\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])";
  const std::string day30 = "(" + day28 + " | \"29\" | \"30\")", day31 = "(" + day30 + " | \"31\")";
  // Gregorian leap years: divisible by 4, and by 400 when divisible by 100.
  const std::string leap_year =
      "([0-9] [0-9] ([02468] [48] | [2468] \"0\" | [13579] [26]) | ([02468] [048] | [13579] [26]) \"00\")";
  const std::string date = "(" + name + "-year \"-\" (" + month31 + " \"-\" " + day31 + " | " + month30 +
                           " \"-\" " + day30 + " | \"02-\" " + day28 + ") | " + leap_year + " \"-02-29\")";
  const std::string year_rule = name + "-year ::= [0-9] [0-9] [0-9] [0-9]\n";
  // time: HH:MM:SS(.frac)?(Z|±HH:MM); second 60 only at 23:59 UTC with a whole-hour offset.
  std::string leap = "(\"23:59:60\" " + name + "-frac? [Zz]";
  for (int h = 0; h < 24; ++h) {
    const int local_plus = (23 + h) % 24, local_minus = (23 - h + 24) % 24;
    leap += " | \"" + std::to_string(local_plus / 10) + std::to_string(local_plus % 10) + ":59:60\" " + name +
            "-frac? \"+" + std::to_string(h / 10) + std::to_string(h % 10) + ":00\"";
    leap += " | \"" + std::to_string(local_minus / 10) + std::to_string(local_minus % 10) + ":59:60\" " +
            name + "-frac? \"-" + std::to_string(h / 10) + std::to_string(h % 10) + ":00\"";
  }
  leap += ")";
  const std::string hour = "([01] [0-9] | \"2\" [0-3])", minute = "[0-5] [0-9]";
  const std::string time = "(" + hour + " \":\" " + minute + " \":\" " + minute + " " + name + "-frac? " +
                           name + "-offset | " + leap + ")";
  const std::string time_rules = name + "-frac ::= \".\" [0-9]+\n" + name + "-offset ::= [Zz] | [+-] " +
                                 hour + " \":\" " + minute + "\n";
  // RFC 6901: "/"-separated reference tokens, "~" only as ~0 or ~1; over the decoded string, so
  // written in every JSON encoding of its characters (json_encode_gbnf), escapes included.
  const std::string json_pointer = "(\"/\" ([^/~] | \"~\" [01])*)*";
  if (format == "date") return name + " ::= " + date + "\n" + year_rule;
  if (format == "time") return name + " ::= " + time + "\n" + time_rules;
  if (format == "date-time") return name + " ::= " + date + " [Tt] " + time + "\n" + year_rule + time_rules;
  if (format == "uuid") {
    const std::string h = "[0-9a-fA-F]";
    auto n = [&](int k) { return h + "{" + std::to_string(k) + "}"; };
    return name + " ::= " + n(8) + " \"-\" " + n(4) + " \"-\" " + n(4) + " \"-\" " + n(4) + " \"-\" " +
           n(12) + "\n";
  }
  if (format == "email") {
    // Dot-atom local part (RFC 5322 atext) and a host name of at least two labels.
    const std::string atext = "[A-Za-z0-9!#$%&'*+/=?\\^_`{|}~-]";
    const std::string label = "[A-Za-z0-9] ([A-Za-z0-9-]* [A-Za-z0-9])?";
    return name + " ::= " + atext + "+ (\".\" " + atext + "+)* \"@\" " + name + "-label (\".\" " + name +
           "-label)+\n" + name + "-label ::= " + label + "\n";
  }
  if (format == "ipv4")
    return name + " ::= " + name + "-octet (\".\" " + name + "-octet){3}\n" + ipv4_octet(name);
  if (format == "ipv6") return name + " ::= " + ipv6_address(name) + "\n" + ipv6_rules(name);
  if (format == "uri" || format == "uri-reference" || format == "iri" || format == "iri-reference")
    return uri_rules(format == "uri" || format == "iri", format[0] == 'i', name);
  if (format == "uri-template") {
    // RFC 6570 §2: literals and expressions, to level 4.
    const std::string pct = "\"%\" [0-9a-fA-F] [0-9a-fA-F]";
    const std::string varchar = "([A-Za-z0-9_] | " + pct + ")";
    const std::string varspec = varchar + " (\".\"? " + varchar + ")* (\":\" [1-9] [0-9]{0,3} | \"*\")?";
    return name + " ::= ([!#$&(-;=?-\\x5B\\x5D_a-z~] | " + kUcschar + " | " + kIprivate + " | " + pct +
           " | \"{\" [+#./;?&=,!@|]? " + varspec + " (\",\" " + varspec + ")* \"}\")*\n";
  }
  if (format == "json-pointer") return name + " ::= " + json_encode_gbnf(json_pointer) + "\n";
  if (format == "relative-json-pointer")
    return name + " ::= " + json_encode_gbnf("(\"0\" | [1-9] [0-9]*) (\"#\" | " + json_pointer + ")") + "\n";
  if (format == "duration") {
    // RFC 3339 Appendix A (ISO 8601 durations).
    const std::string n = "[0-9]+";
    const std::string second = n + " \"S\"", minute = n + " \"M\" (" + second + ")?",
                      hour = n + " \"H\" (" + minute + ")?";
    const std::string time = "\"T\" (" + hour + " | " + minute + " | " + second + ")";
    const std::string day = n + " \"D\"", month = n + " \"M\" (" + day + ")?",
                      year = n + " \"Y\" (" + month + ")?";
    return name + " ::= \"P\" ((" + day + " | " + month + " | " + year + ") (" + time + ")? | " + time +
           " | " + n + " \"W\")\n";
  }
  fail("format", "format \"" + format +
                     "\" is not supported (date, time, date-time, duration, email, uuid, ipv4, ipv6, uri, "
                     "uri-reference, iri, iri-reference, uri-template, json-pointer, relative-json-pointer)");
}

// Formats some draft defines: the others are no assertion (JSON Schema ignores unknown formats,
// as OpenAPI's "int32" or an editor's "textarea").
bool is_known_format(const std::string& f) {
  static const std::set<std::string> kKnown = {
      "date-time", "date",          "time", "duration",     "email",        "idn-email",
      "hostname",  "idn-hostname",  "ipv4", "ipv6",         "uri",          "uri-reference",
      "iri",       "iri-reference", "uuid", "uri-template", "json-pointer", "relative-json-pointer",
      "regex"};
  return kKnown.count(f) > 0;
}

// ---------------------------------------------------------------------------------------------
// The compiler.

// Instance kinds for type reasoning: an integral number is "integer", any other "fraction".
enum Kind : unsigned {
  kNull = 1,
  kBoolean = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kInteger = 32,
  kFraction = 64
};
constexpr unsigned kAllKinds = 127;

unsigned kind_of(const ojson& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBoolean;
  if (v.is_object()) return kObject;
  if (v.is_array()) return kArray;
  if (v.is_string()) return kString;
  return is_integral(v) ? kInteger : kFraction;
}

unsigned kinds_of_type(const ojson& type) {
  auto one = [](const ojson& t) -> unsigned {
    if (!t.is_string()) fail("type", "type names are strings");
    const std::string s = t.get<std::string>();
    if (s == "null") return kNull;
    if (s == "boolean") return kBoolean;
    if (s == "object") return kObject;
    if (s == "array") return kArray;
    if (s == "string") return kString;
    if (s == "integer") return kInteger;
    if (s == "number") return kInteger | kFraction;
    fail("type", "unknown type \"" + s + "\"");
  };
  if (type.is_array()) {
    unsigned k = 0;
    for (const auto& t : type) k |= one(t);
    return k;
  }
  return one(type);
}

// Thrown by the validator where it cannot decide (a number with more digits than it reads, references
// nested past its depth).
struct Undecided {
  std::string keyword;
};

class Compiler {
 public:
  Compiler(const ojson& root, const JsonSchemaOptions& options, const Limits& limits)
      : root_(root), options_(options), limits_(limits), start_(std::chrono::steady_clock::now()) {
    if (options_.max_whitespace < 0 || options_.max_whitespace > 64) {
      fail("max_whitespace", "must be between 0 and 64");
    }
  }

  std::string run() {
    if (!root_.is_object() && !root_.is_boolean()) fail("schema", "a schema is an object or a boolean");
    const std::string root = ref_rule("#", true);
    std::string out = "root ::= " + root + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    check_left_recursion();
    return out;
  }

  // Drafts 4 to 7 (as the root's $schema says): "All other properties in a "$ref" object MUST be
  // ignored"; from 2019-09 on, and without $schema (this compiler's dialect is 2020-12), they
  // apply beside it.
  bool ref_overrides_siblings() const {
    if (!root_.is_object() || !root_.contains("$schema") || !root_.at("$schema").is_string()) return false;
    const std::string dialect = root_.at("$schema").get<std::string>();
    for (const char* old : {"draft-03", "draft-04", "draft-05", "draft-06", "draft-07"})
      if (dialect.find(old) != std::string::npos) return true;
    return false;
  }

  // The rule for any JSON object (response_format json_object).
  std::string any_object_text() {
    const std::string obj = any_object();
    std::string out = "root ::= " + obj + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

  // Validator (the supported keywords; Undecided where a number is past what it reads): used to filter enum
  // values by their sibling keywords and to prove oneOf branches disjoint.
  bool valid(const ojson& v, const ojson& s, int depth = 0) {
    if (depth > 64) throw Undecided{"$ref"};
    if (s.is_boolean()) return s.get<bool>();
    if (!s.is_object()) fail("schema", "a schema is an object or a boolean");
    if (has_tuple_form(s)) return valid(v, tuples_as_prefix(s), depth + 1);
    for (const auto& k : constraining_keywords(s)) {
      if (!is_supported(k)) fail(k, "keyword \"" + k + "\" is not supported");
    }
    if (s.contains("$ref")) {
      const ojson& target = resolve(s.at("$ref"));
      if (!valid(v, target, depth + 1)) return false;
      if (ref_overrides_siblings()) return true;
    }
    if (s.contains("type") && !(kinds_of_type(s.at("type")) & kind_of(v))) return false;
    if (s.contains("const") && !json_equal(v, s.at("const"))) return false;
    if (s.contains("enum")) {
      bool any = false;
      for (const auto& e : s.at("enum")) any = any || json_equal(v, e);
      if (!any) return false;
    }
    if (s.contains("allOf")) {
      for (const auto& b : s.at("allOf")) {
        if (!valid(v, b, depth + 1)) return false;
      }
    }
    if (s.contains("not") && valid(v, s.at("not"), depth + 1)) return false;
    if (s.contains("anyOf")) {
      bool any = false;
      for (const auto& b : s.at("anyOf")) any = any || valid(v, b, depth + 1);
      if (!any) return false;
    }
    if (s.contains("oneOf")) {
      int n = 0;
      for (const auto& b : s.at("oneOf")) n += valid(v, b, depth + 1);
      if (n != 1) return false;
    }
    if (v.is_number() && s.contains("multipleOf")) {
      const std::optional<Decimal> x = Decimal::parse(v.dump(), kMaxInstanceDigits);
      const std::optional<bool> multiple = x ? is_multiple(*x, divisor(s)) : std::nullopt;
      if (!multiple) throw Undecided{"multipleOf"};
      if (!*multiple) return false;
    }
    if (v.is_number()) {
      const NumberBounds bounds = number_bounds(s);
      if (bounds.lower || bounds.upper) {
        const std::optional<Decimal> x = Decimal::parse(v.dump(), kMaxInstanceDigits);
        if (!x) throw Undecided{bounds.lower ? "minimum" : "maximum"};
        if (bounds.lower) {
          const int c = compare(*x, bounds.lower->value);
          if (c < 0 || (c == 0 && bounds.lower->exclusive)) return false;
        }
        if (bounds.upper) {
          const int c = compare(*x, bounds.upper->value);
          if (c > 0 || (c == 0 && bounds.upper->exclusive)) return false;
        }
      }
    }
    if (v.is_string()) {
      const size_t n = code_points(v.get<std::string>());
      if (s.contains("minLength") && n < count_value(s, "minLength")) return false;
      if (s.contains("maxLength") && n > count_value(s, "maxLength")) return false;
      if (s.contains("pattern") && s.at("pattern").is_string() &&
          !pattern_matches(s.at("pattern").get<std::string>(), v.get<std::string>(), "pattern"))
        return false;
      if (s.contains("format") && s.at("format").is_string() &&
          is_known_format(s.at("format").get<std::string>()) &&
          !format_matches(s.at("format").get<std::string>(), v.get<std::string>()))
        return false;
    }
    if (v.is_array()) {
      if (s.contains("minItems") && v.size() < count_value(s, "minItems")) return false;
      if (s.contains("maxItems") && v.size() > count_value(s, "maxItems")) return false;
      size_t prefix = 0;
      if (s.contains("prefixItems")) {
        const ojson& p = s.at("prefixItems");
        prefix = p.size();
        for (size_t i = 0; i < v.size() && i < p.size(); ++i) {
          if (!valid(v[i], p[i], depth + 1)) return false;
        }
      }
      if (s.contains("items")) {
        for (size_t i = prefix; i < v.size(); ++i) {
          if (!valid(v[i], s.at("items"), depth + 1)) return false;
        }
      }
      if (unique_items(s)) {
        for (size_t i = 0; i < v.size(); ++i)
          for (size_t j = i + 1; j < v.size(); ++j)
            if (json_equal(v[i], v[j])) return false;
      }
      if (s.contains("contains")) {
        uint64_t matches = 0;
        for (const auto& e : v) matches += valid(e, s.at("contains"), depth + 1);
        if (matches < (s.contains("minContains") ? count_value(s, "minContains") : 1)) return false;
        if (s.contains("maxContains") && matches > count_value(s, "maxContains")) return false;
      }
    }
    if (v.is_object()) {
      if (const ojson* names = property_names(s)) {
        for (auto it = v.begin(); it != v.end(); ++it) {
          if (!valid(ojson(it.key()), *names, depth + 1)) return false;
        }
      }
      if (s.contains("required")) {
        for (const auto& r : s.at("required")) {
          if (!v.contains(r.get<std::string>())) return false;
        }
      }
      if (s.contains("minProperties") && v.size() < count_value(s, "minProperties")) return false;
      if (s.contains("maxProperties") && v.size() > count_value(s, "maxProperties")) return false;
      for (const auto& [trigger, needed] : dependencies(s)) {
        if (!v.contains(trigger)) continue;
        for (const auto& n : needed) {
          if (!v.contains(n)) return false;
        }
      }
      const ojson empty = ojson::object();
      const ojson& props = s.contains("properties") ? s.at("properties") : empty;
      const auto patterns = pattern_properties(s);
      for (auto it = v.begin(); it != v.end(); ++it) {
        bool matched = false;
        for (const auto& [pattern, schema] : patterns) {
          if (!pattern_matches(pattern, it.key(), "patternProperties")) continue;
          matched = true;
          if (!valid(it.value(), *schema, depth + 1)) return false;
        }
        if (props.contains(it.key())) {
          if (!valid(it.value(), props.at(it.key()), depth + 1)) return false;
        } else if (matched) {
          continue;
        } else if (s.contains("additionalProperties")) {
          if (!valid(it.value(), s.at("additionalProperties"), depth + 1)) return false;
        } else if (options_.strict && s.contains("properties")) {
          return false;
        }
      }
    }
    return true;
  }

 private:
  // ---- rules

  // The grammar's size and the time spent stay within the limits while it is written, so that a
  // hostile schema fails before it costs much.
  void check_budget() {
    if (rules_.size() > limits_.max_rules) {
      fail("schema", "the schema needs more than " + std::to_string(limits_.max_rules) + " grammar rules");
    }
    if ((rules_.size() & 63) == 0) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
      if (ms > limits_.max_compile_ms) fail("schema", "the schema takes too long to compile");
    }
  }

  std::string add_rule(const std::string& hint, const std::string& body) {
    auto it = by_body_.find(body);
    if (it != by_body_.end()) return it->second;
    check_budget();
    const std::string name = fresh(hint);
    rules_.push_back({name, body});
    by_body_[body] = name;
    return name;
  }

  std::string fresh(const std::string& hint) {
    std::string base;
    for (char c : hint) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      base += ok ? c : '-';
    }
    while (!base.empty() && base.back() == '-') base.pop_back();
    if (base.empty() || base.size() > 40) base = "r";
    std::string name = base;
    for (int i = 2; used_.count(name) || name == "root"; ++i) name = base + "-" + std::to_string(i);
    used_.insert(name);
    return name;
  }

  // A rule whose body is set later (recursion through $ref).
  std::string reserve(const std::string& hint) {
    check_budget();
    const std::string name = fresh(hint);
    rules_.push_back({name, ""});
    return name;
  }

  void set_body(const std::string& name, const std::string& body) {
    for (auto& r : rules_) {
      if (r.first == name) r.second = body;
    }
  }

  // ---- numbers

  struct NumberBounds {
    std::optional<NumberBound> lower, upper;
  };

  // minimum / exclusiveMinimum and maximum / exclusiveMaximum, the tightest of each side: the
  // number forms (draft 6 on) and draft 4's boolean exclusives, which make minimum and maximum
  // strict.
  NumberBounds number_bounds(const ojson& s) {
    auto value = [&](const char* k) {
      const ojson& v = s.at(k);
      if (!v.is_number()) fail(k, std::string(k) + " must be a number");
      const std::optional<Decimal> d = Decimal::parse(v.dump(), kMaxBoundDigits);
      if (!d)
        fail(k, std::string(k) + " needs more than " + std::to_string(kMaxBoundDigits) +
                    " digits: not supported");
      return *d;
    };
    auto strict = [&](const char* k) {
      if (!s.contains(k) || !s.at(k).is_boolean()) return false;
      return s.at(k).get<bool>();
    };
    NumberBounds b;
    auto tighten = [](std::optional<NumberBound>& side, const NumberBound& bound, int sign) {
      if (!side) {
        side = bound;
        return;
      }
      const int c = compare(bound.value, side->value) * sign;
      if (c > 0 || (c == 0 && bound.exclusive)) side = bound;
    };
    if (s.contains("minimum")) tighten(b.lower, {value("minimum"), strict("exclusiveMinimum")}, 1);
    if (s.contains("maximum")) tighten(b.upper, {value("maximum"), strict("exclusiveMaximum")}, -1);
    if (s.contains("exclusiveMinimum") && !s.at("exclusiveMinimum").is_boolean())
      tighten(b.lower, {value("exclusiveMinimum"), true}, 1);
    if (s.contains("exclusiveMaximum") && !s.at("exclusiveMaximum").is_boolean())
      tighten(b.upper, {value("exclusiveMaximum"), true}, -1);
    return b;
  }

  // multipleOf's value: a number above 0.
  Decimal divisor(const ojson& s) {
    const ojson& v = s.at("multipleOf");
    std::optional<Decimal> m;
    if (v.is_number()) m = Decimal::parse(v.dump(), kMaxBoundDigits);
    if (!m || m->negative || m->is_zero()) fail("multipleOf", "multipleOf must be a number above 0");
    return *m;
  }

  // The numbers within the bounds that are multiples of an integral multipleOf (a residue
  // automaton: number_range.h), written as integers; a fractional multipleOf is refused.
  std::optional<std::string> multiples(const ojson& s, const NumberBounds& bounds) {
    const Decimal m = divisor(s);
    if (!m.is_integer() || m.whole.size() > 18)
      fail("multipleOf",
           "multipleOf " + s.at("multipleOf").dump() + " is not supported (an integer up to 18 digits is)");
    struct Sink : RuleSink {
      Compiler& c;
      explicit Sink(Compiler& compiler) : c(compiler) {}
      std::string reserve(const std::string& hint) override { return c.reserve(hint); }
      void define(const std::string& name, const std::string& body) override { c.set_body(name, body); }
      std::string add(const std::string& hint, const std::string& body) override {
        return c.add_rule(hint, body);
      }
    } sink(*this);
    try {
      const std::optional<std::string> e =
          bounded_multiple(bounds.lower, bounds.upper, std::stoull(m.whole), sink, kMaxMultipleStates);
      return e ? std::optional<std::string>(add_rule("multiple", *e)) : std::nullopt;
    } catch (const std::length_error&) {
      fail("multipleOf", "multipleOf " + m.whole + " over these bounds needs more than " +
                             std::to_string(kMaxMultipleStates) + " grammar rules: not supported");
    }
  }

  // ---- whitespace and shared lexical rules

  std::string ws() {
    if (options_.max_whitespace == 0) return "";
    if (ws_.empty()) {
      // At most N bytes, nested so that each length has one parse.
      std::string body;
      for (int i = 0; i < options_.max_whitespace; ++i)
        body = "([ \\t\\n\\r]" + (body.empty() ? "" : " " + body) + ")?";
      ws_ = add_rule("ws", body);
    }
    return ws_ + " ";
  }

  // Separators with their whitespace slots: one slot between any two tokens.
  std::string comma() { return ws() + "\",\" " + ws(); }
  std::string colon() { return ws() + "\":\" " + ws(); }

  std::string json_char() {
    if (char_.empty()) {
      const std::string hex4 = "[0-9a-fA-F]";
      const std::string escape =
          add_rule("escape", "[\"\\\\/bfnrt] | \"u\" ([0-9a-cA-Ce-fE-F] " + hex4 + " " + hex4 + " " + hex4 +
                                 " | [dD] [0-7] " + hex4 + " " + hex4 + ") | \"u\" [dD] [89abAB] " + hex4 +
                                 " " + hex4 + " \"\\\\u\" [dD] [c-fC-F] " + hex4 + " " + hex4);
      char_ = add_rule("char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" " + escape);
    }
    return char_;
  }

  std::string any_string() {
    if (string_.empty()) string_ = add_rule("string", "\"\\\"\" " + json_char() + "* \"\\\"\"");
    return string_;
  }

  std::string integer() {
    if (integer_.empty()) integer_ = add_rule("integer", "\"-\"? (\"0\" | [1-9] [0-9]*)");
    return integer_;
  }

  std::string number() {
    if (number_.empty()) {
      number_ = add_rule("number", integer() + " (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?");
    }
    return number_;
  }

  std::string any_value() {
    if (value_.empty()) {
      value_ = reserve("value");
      const std::string arr = add_rule(
          "array", "\"[\" " + ws() + "(" + value_ + " (" + comma() + value_ + ")* " + ws() + ")? \"]\"");
      set_body(value_, any_object() + " | " + arr + " | " + any_string() + " | " + number() +
                           " | \"true\" | \"false\" | \"null\"");
    }
    return value_;
  }

  std::string any_object() {
    if (object_.empty()) {
      object_ = reserve("object");
      const std::string v = any_value();
      const std::string member = add_rule("member", any_string() + " " + colon() + v);
      set_body(object_, "\"{\" " + ws() + "(" + member + " (" + comma() + member + ")* " + ws() + ")? \"}\"");
    }
    return object_;
  }

  // ---- references

  const ojson& resolve(const ojson& ref) {
    if (!ref.is_string()) fail("$ref", "$ref must be a string");
    std::string r = ref.get<std::string>();
    if (r.empty() || r[0] != '#') fail("$ref", "only local references (\"#…\") are supported: \"" + r + "\"");
    // The fragment is URI-encoded (RFC 3986), then a JSON pointer (RFC 6901).
    std::string pointer;
    for (size_t i = 1; i < r.size(); ++i) {
      if (r[i] == '%' && i + 2 < r.size()) {
        const std::string h = r.substr(i + 1, 2);
        if (h.size() == 2 && std::isxdigit(static_cast<unsigned char>(h[0])) &&
            std::isxdigit(static_cast<unsigned char>(h[1]))) {
          pointer += static_cast<char>(std::stoi(h, nullptr, 16));
          i += 2;
          continue;
        }
      }
      pointer += r[i];
    }
    if (!pointer.empty() && pointer[0] != '/') {
      fail("$ref", "only JSON-pointer fragments are supported (no anchors): \"" + r + "\"");
    }
    const ojson* node = &root_;
    size_t pos = 1;
    while (pos <= pointer.size() && !pointer.empty()) {
      const size_t next = pointer.find('/', pos);
      std::string token = pointer.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
      std::string unescaped;
      for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
          unescaped += token[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          unescaped += token[i];
        }
      }
      if (node != &root_ && node->is_object() && node->contains("$id")) {
        fail("$id", "$id below the root changes the base of references: not supported");
      }
      if (node->is_object() && node->contains(unescaped)) {
        node = &node->at(unescaped);
      } else if (node->is_array() && !unescaped.empty() &&
                 unescaped.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoull(unescaped) < node->size()) {
        node = &node->at(std::stoull(unescaped));
      } else {
        fail("$ref", "reference \"" + r + "\" points at nothing");
      }
      if (next == std::string::npos) break;
      pos = next + 1;
    }
    if (!node->is_object() && !node->is_boolean()) fail("$ref", "reference \"" + r + "\" is not a schema");
    return *node;
  }

  // The rule for a reference target; `at_head` when the reference is the first thing its
  // enclosing rule matches (for the left-recursion check).
  std::string ref_rule(const std::string& ref, bool at_head) {
    const ojson& target = resolve(ref);
    const std::string key = std::to_string(reinterpret_cast<uintptr_t>(&target));
    if (at_head && !owner_.empty()) head_edges_[owner_].insert(key);
    auto it = ref_rules_.find(key);
    if (it != ref_rules_.end()) return it->second;
    const std::string name = reserve(ref == "#" ? "root-value" : "ref-" + ref.substr(ref.rfind('/') + 1));
    ref_rules_[key] = name;
    const std::string saved = owner_;
    owner_ = key;
    const std::optional<std::string> body = compile(target, ref == "#");
    owner_ = saved;
    if (!body && ref == "#" && options_.refuse_empty) {
      // No output could be written: a request with it would have no answer to give.
      fail("schema", std::string("the schema admits no JSON value") +
                         (empty_all_of_ ? ": an allOf's branches cannot all hold (two objects that each set "
                                          "additionalProperties false and name different members admit no "
                                          "object; zod 4 writes z.intersection of two objects so)"
                                        : ""));
    }
    set_body(name, body ? *body : kNever);
    return name;
  }

  void check_left_recursion() {
    // A cycle of references each at the head of the next: a rule reaching itself without a byte.
    std::map<std::string, int> state;
    std::function<void(const std::string&)> visit = [&](const std::string& n) {
      state[n] = 1;
      for (const auto& m : head_edges_[n]) {
        if (state[m] == 1)
          fail("$ref", "a reference reaches itself without consuming input (left recursion)");
        if (state[m] == 0) visit(m);
      }
      state[n] = 2;
    };
    for (const auto& [n, edges] : head_edges_) {
      if (state[n] == 0) visit(n);
    }
  }

  // ---- schemas

  // GBNF expression for the JSON texts of `s`'s instances; nullopt when there are none.
  std::optional<std::string> compile(const ojson& s, bool is_root = false) {
    // Deep nesting would exhaust the stack of this recursive compiler.
    struct Depth {
      int& d;
      explicit Depth(int& depth) : d(depth) {
        if (++d > kMaxDepth)
          fail("schema", "the schema nests deeper than " + std::to_string(kMaxDepth) + " levels");
      }
      ~Depth() { --d; }
    } depth(depth_);
    if (s.is_boolean()) return s.get<bool>() ? std::optional<std::string>(any_value()) : std::nullopt;
    if (!s.is_object()) fail("schema", "a schema is an object or a boolean");
    if (has_tuple_form(s)) {
      merged_.push_back(std::make_unique<ojson>(tuples_as_prefix(s)));
      return compile(*merged_.back(), is_root);
    }
    if (s.contains("$id") && !is_root) fail("$id", "$id below the root is not supported");
    if (s.contains("id") && s.at("id").is_string() && !is_root)
      fail("id", "id below the root (draft 4's $id) is not supported");
    const std::vector<std::string> keys = constraining_keywords(s);
    for (const auto& k : keys) {
      if (!is_supported(k)) fail(k, "keyword \"" + k + "\" is not supported");
    }
    auto has_other = [&](std::initializer_list<const char*> allowed) {
      for (const auto& k : keys) {
        if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; })) return k;
      }
      return std::string();
    };
    if (s.contains("$ref")) {
      const std::string ref = s.at("$ref").is_string() ? s.at("$ref").get<std::string>() : std::string();
      if (has_other({"$ref"}).empty() || ref_overrides_siblings()) return ref_rule(ref, true);
      // From 2019-09 on, $ref is one assertion among its siblings: the instances of both.
      ojson rest = s;
      rest.erase("$ref");
      merged_.push_back(std::make_unique<ojson>(both(ojson{{"$ref", ref}}, rest)));
      return compile(*merged_.back());
    }
    if (s.contains("allOf")) {
      merged_.push_back(std::make_unique<ojson>(merge_all_of(s, 0)));
      std::optional<std::string> e = compile(*merged_.back());
      empty_all_of_ = empty_all_of_ || !e;
      return e;
    }
    if (s.contains("enum") || s.contains("const")) return compile_values(s);
    if (s.contains("anyOf") || s.contains("oneOf")) {
      if (s.contains("anyOf") && s.contains("oneOf")) fail("oneOf", "anyOf beside oneOf is not supported");
      const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
      if (has_other({key}).empty()) return compile_union(s.at(key), key);
      return compile_union(distribute(s, key), key);
    }
    unsigned kinds = s.contains("type") ? kinds_of_type(s.at("type")) : kAllKinds;
    Excluded excluded;
    if (s.contains("not")) exclude(s.at("not"), kinds, excluded);
    std::vector<std::string> alts;
    if (kinds & kNull) alts.push_back("\"null\"");
    if ((kinds & kBoolean) && !(excluded.true_ && excluded.false_))
      alts.push_back(excluded.true_ ? "\"false\"" : excluded.false_ ? "\"true\"" : "(\"true\" | \"false\")");
    const NumberBounds bounds = number_bounds(s);
    if ((kinds & (kFraction | kInteger)) && s.contains("multipleOf")) {
      if (auto e = multiples(s, bounds)) alts.push_back(*e);
    } else if ((kinds & (kFraction | kInteger)) && (bounds.lower || bounds.upper)) {
      const bool integers_only = !(kinds & kFraction);
      if (auto e = bounded_number(bounds.lower, bounds.upper, integers_only))
        alts.push_back(add_rule(integers_only ? "integer-range" : "number-range", *e));
    } else if (kinds & kFraction) {
      alts.push_back(number());
    } else if (kinds & kInteger) {
      alts.push_back(integer());
    }
    if ((kinds & kString) && !excluded.strings.empty()) {
      // Any string but the excluded ones (other_name: a string not in a set, in any encoding).
      for (const char* k : {"minLength", "maxLength", "pattern", "format"})
        if (s.contains(k)) fail("not", std::string("not of strings beside \"") + k + "\" is not supported");
      alts.push_back(other_name(excluded.strings));
    } else if (kinds & kString) {
      if (auto e = compile_string(s)) alts.push_back(*e);
    }
    if (kinds & kArray) {
      if (auto e = compile_array(s)) alts.push_back(*e);
    }
    if (kinds & kObject) {
      if (auto e = compile_object(s)) alts.push_back(*e);
    }
    return join(alts);
  }

  // A schema inside an array or object: not at the head of the enclosing rule.
  std::optional<std::string> child(const ojson& s) {
    const std::string saved = owner_;
    owner_.clear();
    auto e = compile(s);
    owner_ = saved;
    return e;
  }

  static std::optional<std::string> join(const std::vector<std::string>& alts) {
    if (alts.empty()) return std::nullopt;
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
  }

  // The values of enum / const that satisfy their sibling keywords, distinct (JSON equality).
  std::vector<ojson> enum_values(const ojson& s) {
    std::vector<ojson> values;
    if (s.contains("enum")) {
      if (!s.at("enum").is_array()) fail("enum", "enum must be an array");
      for (const auto& v : s.at("enum")) values.push_back(v);
    }
    if (s.contains("const")) {
      const ojson& c = s.at("const");
      if (s.contains("enum")) {
        std::vector<ojson> kept;
        for (const auto& v : values) {
          if (json_equal(v, c)) kept.push_back(v);
        }
        values = kept;
      } else {
        values.push_back(c);
      }
    }
    // The sibling keywords filter the values: an enum value must satisfy them too.
    ojson rest = s;
    rest.erase("enum");
    rest.erase("const");
    std::vector<ojson> out;
    for (const auto& v : values) {
      bool ok;
      try {
        ok = valid(v, rest);
      } catch (const Undecided& u) {
        fail(u.keyword, u.keyword + " beside enum/const is not supported");
      }
      if (ok && std::none_of(out.begin(), out.end(), [&](const ojson& w) { return json_equal(v, w); }))
        out.push_back(v);
    }
    return out;
  }

  // A value as the grammar writes it: compact JSON, an integral number as the integer (2, also for
  // a schema's 2.0 or -0.0), as "integer" is: a client's integer field would refuse 2.0.
  static std::string value_literal(const ojson& v) {
    if (is_integral(v) && std::fabs(v.get<double>()) < 9007199254740992.0)
      return gbnf_literal(std::to_string(static_cast<int64_t>(v.get<double>())));
    return gbnf_literal(v.dump());
  }

  // A value of enum / const in every writing this grammar admits: scalars as value_literal;
  // arrays with whitespace slots between tokens; objects also with their members in any order
  // (a rule per set of members written; in the schema's order past kMaxAnyOrderMembers).
  std::string value_expr(const ojson& v) {
    if (v.is_array()) {
      if (v.empty()) return "\"[\" " + ws() + "\"]\"";
      std::string body = "\"[\" " + ws();
      for (size_t i = 0; i < v.size(); ++i) body += (i ? comma() : "") + value_expr(v[i]) + " ";
      return add_rule("const-array", body + ws() + "\"]\"");
    }
    if (!v.is_object()) return value_literal(v);
    if (v.empty()) return "\"{\" " + ws() + "\"}\"";
    std::vector<std::string> members;
    for (auto it = v.begin(); it != v.end(); ++it)
      members.push_back(add_rule(
          "const-member", gbnf_literal(ojson(it.key()).dump()) + " " + colon() + value_expr(it.value())));
    if (members.size() > kMaxAnyOrderMembers) {
      std::string body = "\"{\" " + ws();
      for (size_t i = 0; i < members.size(); ++i) body += (i ? comma() : "") + members[i] + " ";
      return add_rule("const-object", body + ws() + "\"}\"");
    }
    const uint32_t all = (1u << members.size()) - 1;
    std::map<uint32_t, std::string> memo;
    // after(written): the members still to come once those in `written` are (then the brace).
    std::function<std::string(uint32_t)> after = [&](uint32_t written) -> std::string {
      if (written == all) return ws() + "\"}\"";
      auto m = memo.find(written);
      if (m != memo.end()) return m->second;
      std::string body;
      for (size_t i = 0; i < members.size(); ++i) {
        if (written & (1u << i)) continue;
        body += (body.empty() ? "" : " | ") + comma() + members[i] + " " + after(written | (1u << i));
      }
      return memo[written] = add_rule("const-rest", body);
    };
    std::string first;
    for (size_t i = 0; i < members.size(); ++i)
      first += (first.empty() ? "" : " | ") + members[i] + " " + after(1u << i);
    return add_rule("const-object", "\"{\" " + ws() + "(" + first + ")");
  }

  std::optional<std::string> compile_values(const ojson& s) {
    std::vector<std::string> alts;
    for (const auto& v : enum_values(s)) alts.push_back(value_expr(v));
    if (alts.empty()) return std::nullopt;
    std::string body;
    for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
    return alts.size() == 1 ? body : add_rule("enum", body);
  }

  // base ∧ (b1 ∨ b2 …) as (base ∧ b1) ∨ (base ∧ b2) …: each branch merged with the keywords
  // beside the union. A merge is exact when no keyword is on both sides and the keywords that
  // read each other (properties / additionalProperties, prefixItems / items) stay on one side;
  // anything else is refused.
  ojson distribute(const ojson& s, const char* key) {
    const ojson& branches = s.at(key);
    if (!branches.is_array() || branches.empty()) fail(key, std::string(key) + " must be a non-empty array");
    ojson base = ojson::object();
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() != key && !is_ignored(it.key())) base[it.key()] = it.value();
    }
    static const std::vector<std::vector<std::string>> kGroups = {{"properties", "additionalProperties"},
                                                                  {"prefixItems", "items"}};
    ojson out = ojson::array();
    for (size_t i = 0; i < branches.size(); ++i) {
      const ojson* b = &branches[i];
      if (b->is_object() && b->size() == 1 && b->contains("$ref")) b = &resolve(b->at("$ref"));
      if (b->is_boolean()) {
        out.push_back(b->get<bool>() ? base : ojson(false));
        continue;
      }
      if (!b->is_object()) fail("schema", "a schema is an object or a boolean");
      ojson merged = base;
      for (auto it = b->begin(); it != b->end(); ++it) {
        if (is_ignored(it.key())) continue;
        if (base.contains(it.key())) {
          fail(key, std::string(key) + " beside \"" + it.key() + "\", which branch " + std::to_string(i) +
                        " also has, is not supported");
        }
        for (const auto& group : kGroups) {
          const bool in_group = std::find(group.begin(), group.end(), it.key()) != group.end();
          for (const auto& g : group) {
            if (in_group && base.contains(g)) {
              fail(key, std::string(key) + " beside \"" + g + "\" with \"" + it.key() + "\" in branch " +
                            std::to_string(i) + " is not supported");
            }
          }
        }
        merged[it.key()] = it.value();
      }
      out.push_back(std::move(merged));
    }
    merged_.push_back(std::make_unique<ojson>(std::move(out)));
    return *merged_.back();
  }

  std::optional<std::string> compile_union(const ojson& branches, const char* key) {
    if (!branches.is_array() || branches.empty()) fail(key, std::string(key) + " must be a non-empty array");
    std::vector<std::string> alts;
    for (size_t i = 0; i < branches.size(); ++i) {
      if (auto e = compile(branches[i])) alts.push_back(*e);
    }
    if (std::string(key) == "oneOf") {
      for (size_t i = 0; i < branches.size(); ++i) {
        for (size_t j = i + 1; j < branches.size(); ++j) {
          if (!disjoint(branches[i], branches[j], 0)) {
            fail("oneOf",
                 "oneOf branches " + std::to_string(i) + " and " + std::to_string(j) +
                     " may both match an instance: only provably disjoint branches are supported "
                     "(different types, distinct constants, or a required property with disjoint values)");
          }
        }
      }
    }
    return join(alts);
  }

  // ---- not

  // What `not` takes out of a schema's language where that is exact: whole types, null, either
  // boolean, and strings (a finite set of them).
  struct Excluded {
    bool true_ = false, false_ = false;
    std::vector<std::vector<uint32_t>> strings;  // decoded
  };

  void exclude(const ojson& n, unsigned& kinds, Excluded& out) {
    if (n.is_boolean()) {
      if (n.get<bool>()) kinds = 0;  // not true: nothing
      return;
    }
    if (!n.is_object()) fail("not", "not must be a schema");
    const std::vector<std::string> keys = constraining_keywords(n);
    if (keys.empty()) {  // not {}: nothing
      kinds = 0;
      return;
    }
    if (keys.size() == 1 && keys[0] == "type") {
      const unsigned removed = kinds_of_type(n.at("type"));
      // The numbers that are not integers: no grammar is written for them.
      if ((removed & kInteger) && !(removed & kFraction) && (kinds & kFraction))
        fail("not", "not integer, of a number, is not supported");
      kinds &= ~removed;
      return;
    }
    const bool values_only = std::all_of(keys.begin(), keys.end(),
                                         [](const std::string& k) { return k == "enum" || k == "const"; });
    if (!values_only)
      fail("not",
           "not of anything but a type, or values that are null, booleans or strings, is not supported");
    const ojson values = n.contains("const") ? ojson::array({n.at("const")}) : n.at("enum");
    if (!values.is_array()) fail("enum", "enum must be an array");
    if (n.contains("const") && n.contains("enum")) {
      // A value both const and in enum: const's, if enum has it; else nothing is excluded.
      const ojson& e = n.at("enum");
      if (!e.is_array()) fail("enum", "enum must be an array");
      if (std::none_of(e.begin(), e.end(), [&](const ojson& x) { return json_equal(x, n.at("const")); }))
        return;
    }
    for (const auto& v : values) {
      if (v.is_null()) {
        kinds &= ~kNull;
      } else if (v.is_boolean()) {
        (v.get<bool>() ? out.true_ : out.false_) = true;
      } else if (v.is_string()) {
        out.strings.push_back(decode_utf8(v.get<std::string>()));
      } else {
        fail("not", "not of a number, array or object value is not supported");
      }
    }
  }

  // ---- tuples (draft 4–7)

  // items as an array (a tuple) or additionalItems: the draft 4–7 forms of prefixItems and items.
  static bool has_tuple_form(const ojson& s) {
    return s.is_object() &&
           (s.contains("additionalItems") || (s.contains("items") && s.at("items").is_array()));
  }

  // `s` in 2020-12's words: items [a, b] is prefixItems [a, b], and additionalItems then the
  // items past them; additionalItems beside items that is a schema (or absent) constrains
  // nothing (draft 4–7) and is dropped.
  static ojson tuples_as_prefix(const ojson& s) {
    ojson t = s;
    t.erase("additionalItems");
    if (s.contains("items") && s.at("items").is_array()) {
      if (s.contains("prefixItems")) fail("items", "items as an array beside prefixItems is not supported");
      t.erase("items");
      if (!s.at("items").empty()) t["prefixItems"] = s.at("items");
      if (s.contains("additionalItems")) t["items"] = s.at("additionalItems");
    }
    return t;
  }

  // ---- allOf

  // `s` with its allOf merged into one schema of the same instances, keyword by keyword where
  // the merge is exact (merge()); false when the branches cannot meet. A branch that is only a
  // $ref is its target.
  ojson merge_all_of(const ojson& s, int depth) {
    if (depth > 32) fail("allOf", "allOf nests (through references) deeper than 32 levels");
    const ojson& branches = s.at("allOf");
    if (!branches.is_array() || branches.empty()) fail("allOf", "allOf must be a non-empty array");
    ojson out = has_tuple_form(s) ? tuples_as_prefix(s) : s;
    out.erase("allOf");
    for (const ojson& branch : branches) {
      ojson b = only_ref(branch) ? resolve(branch.at("$ref")) : branch;
      if (has_tuple_form(b)) b = tuples_as_prefix(b);
      if (b.is_boolean()) {
        if (!b.get<bool>()) return ojson(false);
        continue;
      }
      if (!b.is_object()) fail("allOf", "allOf's branches are schemas (objects or booleans)");
      if (b.contains("$id") || (b.contains("id") && b.at("id").is_string()))
        fail("allOf", "a branch of allOf with an identifier ($id) is not supported");
      if (b.contains("allOf")) b = merge_all_of(b, depth + 1);
      if (b.is_boolean()) return b;
      out = merge(out, b);
      if (out.is_boolean()) return out;
    }
    return out;
  }

  // A schema whose only constraining keyword is $ref.
  static bool only_ref(const ojson& s) {
    if (!s.is_object() || !s.contains("$ref")) return false;
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() != "$ref" && !is_ignored(it.key())) return false;
    }
    return true;
  }

  static ojson both(const ojson& a, const ojson& b) { return ojson{{"allOf", ojson::array({a, b})}}; }

  // The instances of a and of b (two objects without allOf): each keyword one side has is kept;
  // one both have is merged where that is exact (types intersected, required united, bounds and
  // counts tightened, enums intersected, subschemas as allOf of the two); the keywords that read
  // each other (properties with additionalProperties, prefixItems with items) are merged as a
  // group. Anything else on both sides is refused, naming it.
  ojson merge(const ojson& a, const ojson& b) {
    ojson out = a;
    static const std::set<std::string> kObjectGroup = {"properties", "additionalProperties",
                                                       "patternProperties"};
    static const std::set<std::string> kArrayGroup = {"prefixItems", "items", "additionalItems"};
    static const std::set<std::string> kBounds = {"minimum", "maximum", "exclusiveMinimum",
                                                  "exclusiveMaximum"};
    auto has_any = [](const ojson& x, const std::set<std::string>& keys) {
      return std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return x.contains(k); });
    };
    const bool merge_objects = has_any(a, kObjectGroup) && has_any(b, kObjectGroup);
    const bool merge_arrays = has_any(a, kArrayGroup) && has_any(b, kArrayGroup);
    const bool merge_bounds = has_any(a, kBounds) && has_any(b, kBounds);
    for (auto it = b.begin(); it != b.end(); ++it) {
      const std::string& k = it.key();
      const ojson& y = it.value();
      if (is_ignored(k)) {
        if (!out.contains(k)) out[k] = y;
        continue;
      }
      if ((merge_objects && kObjectGroup.count(k)) || (merge_arrays && kArrayGroup.count(k)) ||
          (merge_bounds && kBounds.count(k)))
        continue;
      if (!out.contains(k)) {
        out[k] = y;
        continue;
      }
      const ojson& x = a.at(k);
      if (json_equal(x, y)) continue;
      if (k == "type") {
        const unsigned kinds = kinds_of_type(x) & kinds_of_type(y);
        if (kinds == 0) return ojson(false);
        out[k] = type_names(kinds);
      } else if (k == "required") {
        if (!x.is_array() || !y.is_array()) fail("required", "required must be an array of strings");
        for (const auto& r : y) {
          if (std::find(out[k].begin(), out[k].end(), r) == out[k].end()) out[k].push_back(r);
        }
      } else if (k == "enum") {
        if (!x.is_array() || !y.is_array()) fail("enum", "enum must be an array");
        ojson kept = ojson::array();
        for (const auto& v : x) {
          if (std::any_of(y.begin(), y.end(), [&](const ojson& w) { return json_equal(v, w); }))
            kept.push_back(v);
        }
        out[k] = kept;
      } else if (k == "const") {
        return ojson(false);  // two different constants
      } else if (k == "minLength" || k == "minItems" || k == "minProperties" || k == "minContains") {
        out[k] = std::max(count_value(a, k.c_str()), count_value(b, k.c_str()));
      } else if (k == "maxLength" || k == "maxItems" || k == "maxProperties" || k == "maxContains") {
        out[k] = std::min(count_value(a, k.c_str()), count_value(b, k.c_str()));
      } else if (k == "multipleOf") {
        // Multiples of both integers are the multiples of their least common multiple.
        const Decimal p = divisor(a), q = divisor(b);
        if (!p.is_integer() || !q.is_integer() || p.whole.size() > 9 || q.whole.size() > 9)
          fail("allOf", "allOf with two multipleOf that are not integers up to 9 digits is not supported");
        const uint64_t pi = std::stoull(p.whole), qi = std::stoull(q.whole);
        out[k] = pi / std::gcd(pi, qi) * qi;
      } else if (k == "uniqueItems") {
        out[k] = x.is_boolean() && y.is_boolean() ? ojson(x.get<bool>() || y.get<bool>()) : y;
      } else if (k == "anyOf") {
        // (a1 ∨ a2 …) ∧ (b1 ∨ b2 …): every pair, as one anyOf.
        if (!x.is_array() || !y.is_array()) fail("anyOf", "anyOf must be a non-empty array");
        if (x.size() * y.size() > 64)
          fail("allOf", "allOf of two anyOf with more than 64 pairs is not supported");
        ojson pairs = ojson::array();
        for (const auto& p : x) {
          for (const auto& q : y) pairs.push_back(both(p, q));
        }
        out[k] = pairs;
      } else {
        fail("allOf", "allOf with \"" + k + "\" in two branches is not supported");
      }
    }
    if (merge_bounds) merge_number_bounds(a, b, out);
    if (merge_objects) merge_object_members(a, b, out);
    if (merge_arrays) merge_array_items(a, b, out);
    return out;
  }

  static ojson type_names(unsigned kinds) {
    ojson names = ojson::array();
    for (const auto& [kind, name] : std::vector<std::pair<unsigned, const char*>>{{kNull, "null"},
                                                                                  {kBoolean, "boolean"},
                                                                                  {kObject, "object"},
                                                                                  {kArray, "array"},
                                                                                  {kString, "string"}}) {
      if (kinds & kind) names.push_back(name);
    }
    if ((kinds & kInteger) && (kinds & kFraction)) {
      names.push_back("number");
    } else if (kinds & kInteger) {
      names.push_back("integer");
    }
    return names.size() == 1 ? names[0] : names;
  }

  // The tighter bound of each side, written in the number forms (draft 6 on), which read alike
  // in every draft the compiler takes.
  void merge_number_bounds(const ojson& a, const ojson& b, ojson& out) {
    NumberBounds x = number_bounds(a);
    const NumberBounds y = number_bounds(b);
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) out.erase(k);
    auto tighter = [](std::optional<NumberBound>& side, const std::optional<NumberBound>& other, int sign) {
      if (!other) return;
      const int c = side ? compare(other->value, side->value) * sign : 1;
      if (c > 0 || (c == 0 && other->exclusive)) side = other;
    };
    tighter(x.lower, y.lower, 1);
    tighter(x.upper, y.upper, -1);
    auto write = [&](const std::optional<NumberBound>& bound, const char* inclusive, const char* exclusive) {
      if (!bound) return;
      std::string text = (bound->value.negative ? "-" : "") + bound->value.whole;
      if (!bound->value.fraction.empty()) text += "." + bound->value.fraction;
      out[bound->exclusive ? exclusive : inclusive] = ojson::parse(text);
    };
    write(x.lower, "minimum", "exclusiveMinimum");
    write(x.upper, "maximum", "exclusiveMaximum");
  }

  // The additional members' schema of a side: its additionalProperties, else null (any value).
  // Strict mode's default (no members beyond properties: compile_object) applies to the merged
  // schema, not to each branch: a branch of allOf describes part of an object.
  static const ojson* additional_of(const ojson& s) {
    return s.contains("additionalProperties") ? &s.at("additionalProperties") : nullptr;
  }

  // Both schemas where both constrain, else the one that does; true for neither.
  static ojson both_of(const ojson* x, const ojson* y) {
    return x && y ? both(*x, *y) : x ? *x : y ? *y : ojson(true);
  }

  // properties, patternProperties and additionalProperties of both sides. A side's part of a
  // member named n: its properties[n] and every pattern of its that n matches, else (neither)
  // its additionalProperties. A name declared on either side takes both sides' parts. Names
  // declared nowhere: the patterns of both sides, each with the other side's additionalProperties
  // where that side has no patterns (which then stands for it), and both additionalProperties
  // for names no pattern matches. Refused where that is not exact: patterns on both sides beside
  // an additionalProperties, or a declared name that a pattern carrying the other side's
  // additionalProperties matches (it would take that schema too).
  void merge_object_members(const ojson& a, const ojson& b, ojson& out) {
    const ojson none = ojson::object();
    const ojson& pa = a.contains("properties") ? a.at("properties") : none;
    const ojson& pb = b.contains("properties") ? b.at("properties") : none;
    const ojson& qa = a.contains("patternProperties") ? a.at("patternProperties") : none;
    const ojson& qb = b.contains("patternProperties") ? b.at("patternProperties") : none;
    if (!pa.is_object() || !pb.is_object()) fail("properties", "properties must be an object");
    if (!qa.is_object() || !qb.is_object()) fail("patternProperties", "patternProperties must be an object");
    const ojson* xa = additional_of(a);
    const ojson* xb = additional_of(b);
    if (!qa.empty() && !qb.empty() && (xa || xb))
      fail("allOf",
           "allOf of two branches with patternProperties, beside additionalProperties, is not supported");
    auto part = [&](const ojson& props, const ojson& patterns, const ojson* extra, const std::string& name) {
      ojson all = ojson::array();
      if (props.contains(name)) all.push_back(props.at(name));
      for (auto it = patterns.begin(); it != patterns.end(); ++it) {
        if (pattern_matches(it.key(), name, "patternProperties")) all.push_back(it.value());
      }
      if (all.empty()) return extra ? *extra : ojson(true);
      return all.size() == 1 ? all[0] : ojson{{"allOf", all}};
    };
    ojson props = ojson::object();
    for (const ojson* side : {&pa, &pb}) {
      for (auto it = side->begin(); it != side->end(); ++it) {
        if (!props.contains(it.key()))
          props[it.key()] = both(part(pa, qa, xa, it.key()), part(pb, qb, xb, it.key()));
      }
    }
    ojson patterns = ojson::object();
    std::vector<std::string> carrying;  // patterns that carry the other side's additionalProperties
    for (const auto& [mine, theirs, their_extra] : {std::tuple{&qa, &qb, xb}, std::tuple{&qb, &qa, xa}}) {
      for (auto it = mine->begin(); it != mine->end(); ++it) {
        ojson schema = it.value();
        if (theirs->empty() && their_extra) {
          schema = both(schema, *their_extra);
          carrying.push_back(it.key());
        }
        patterns[it.key()] = patterns.contains(it.key()) ? both(patterns[it.key()], schema) : schema;
      }
    }
    for (const auto& pattern : carrying) {
      for (auto it = props.begin(); it != props.end(); ++it) {
        if (pattern_matches(pattern, it.key(), "patternProperties"))
          fail("allOf",
               "allOf whose patternProperties match a name that properties declares, beside "
               "additionalProperties, is not supported");
      }
    }
    out.erase("properties");
    out.erase("patternProperties");
    out.erase("additionalProperties");
    if (!props.empty()) out["properties"] = props;
    if (!patterns.empty()) out["patternProperties"] = patterns;
    if (xa || xb) out["additionalProperties"] = both_of(xa, xb);
  }

  // prefixItems and items of both sides: element i takes each side's prefixItems[i], else its
  // items; the elements past both prefixes, both items.
  void merge_array_items(const ojson& a, const ojson& b, ojson& out) {
    for (const ojson* side : {&a, &b}) {
      if (side->contains("additionalItems") || (side->contains("items") && side->at("items").is_array()))
        fail("allOf", "allOf with tuple items (draft 4–7) in two branches is not supported");
    }
    const ojson none = ojson::array();
    const ojson& pa = a.contains("prefixItems") ? a.at("prefixItems") : none;
    const ojson& pb = b.contains("prefixItems") ? b.at("prefixItems") : none;
    if (!pa.is_array() || !pb.is_array()) fail("prefixItems", "prefixItems must be a non-empty array");
    const ojson* ia = a.contains("items") ? &a.at("items") : nullptr;
    const ojson* ib = b.contains("items") ? &b.at("items") : nullptr;
    auto element = [](const ojson& prefix, const ojson* items, size_t i) {
      return i < prefix.size() ? &prefix[i] : items;
    };
    out.erase("prefixItems");
    out.erase("items");
    ojson prefix = ojson::array();
    for (size_t i = 0; i < std::max(pa.size(), pb.size()); ++i)
      prefix.push_back(both_of(element(pa, ia, i), element(pb, ib, i)));
    if (!prefix.empty()) out["prefixItems"] = prefix;
    if (ia || ib) out["items"] = both_of(ia, ib);
  }

  // ---- disjointness (oneOf)

  const ojson& deref(const ojson& s, int depth) {
    if (s.is_object() && s.contains("$ref") && depth < 32) return deref(resolve(s.at("$ref")), depth + 1);
    return s;
  }

  unsigned kinds(const ojson& s_in, int depth) {
    const ojson& s = deref(s_in, depth);
    if (s.is_boolean()) return s.get<bool>() ? kAllKinds : 0;
    if (!s.is_object() || depth > 32) return kAllKinds;
    unsigned k = s.contains("type") ? kinds_of_type(s.at("type")) : kAllKinds;
    if (s.contains("enum") || s.contains("const")) {
      unsigned v = 0;
      if (s.contains("enum")) {
        for (const auto& e : s.at("enum")) v |= kind_of(e);
      } else {
        v = kind_of(s.at("const"));
      }
      k &= v;
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (s.contains(key)) {
        unsigned u = 0;
        for (const auto& b : s.at(key)) u |= kinds(b, depth + 1);
        k &= u;
      }
    }
    if (s.contains("allOf") && s.at("allOf").is_array()) {
      for (const auto& b : s.at("allOf")) k &= kinds(b, depth + 1);
    }
    return k;
  }

  // No instance satisfies both (a proof, or false when none was found).
  bool disjoint(const ojson& a_in, const ojson& b_in, int depth) {
    if (depth > 16) return false;
    const ojson& a = deref(a_in, 0);
    const ojson& b = deref(b_in, 0);
    const unsigned common = kinds(a, 0) & kinds(b, 0);
    if (common == 0) return true;
    auto values_fail = [&](const ojson& x, const ojson& y) {
      if (!x.is_object() || !(x.contains("enum") || x.contains("const"))) return false;
      std::vector<ojson> vals;
      if (x.contains("enum")) {
        for (const auto& e : x.at("enum")) vals.push_back(e);
      } else {
        vals.push_back(x.at("const"));
      }
      try {
        for (const auto& v : vals) {
          if (valid(v, y)) return false;
        }
      } catch (const Undecided&) {
        return false;
      }
      return true;
    };
    if (values_fail(a, b) || values_fail(b, a)) return true;
    if (common == kObject && a.is_object() && b.is_object()) {
      // A discriminator: a property both require whose values cannot meet.
      if (a.contains("required") && b.contains("required") && a.contains("properties") &&
          b.contains("properties")) {
        for (const auto& r : a.at("required")) {
          const std::string name = r.get<std::string>();
          bool in_b = false;
          for (const auto& q : b.at("required")) in_b = in_b || q == r;
          if (!in_b || !a.at("properties").contains(name) || !b.at("properties").contains(name)) continue;
          if (disjoint(a.at("properties").at(name), b.at("properties").at(name), depth + 1)) return true;
        }
      }
    }
    return false;
  }

  // ---- strings

  // A string's contents (between the quotes) as the conjunction of what format, pattern and the
  // lengths admit (GBNF's & over regular languages: automaton.h's extension).
  std::optional<std::string> compile_string(const ojson& s) {
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    const uint64_t min = s.contains("minLength") ? count_value(s, "minLength") : 0;
    const uint64_t max = s.contains("maxLength") ? count_value(s, "maxLength") : kUnbounded;
    if (min > max) return std::nullopt;
    if (s.contains("format") && !s.at("format").is_string()) fail("format", "format must be a string");
    if (s.contains("pattern") && !s.at("pattern").is_string()) fail("pattern", "pattern must be a string");
    std::vector<std::string> parts;
    if (s.contains("format") && is_known_format(s.at("format").get<std::string>()))
      parts.push_back(format_contents(s.at("format").get<std::string>()));
    if (s.contains("pattern"))
      parts.push_back(pattern_contents(s.at("pattern").get<std::string>(), "pattern"));
    if (has_len) parts.push_back("(" + string_length(min, max) + ")");
    if (parts.empty()) return any_string();
    std::string contents;
    for (size_t i = 0; i < parts.size(); ++i) contents += (i ? " & " : "") + parts[i];
    return add_rule("string", "\"\\\"\" (" + contents + ") \"\\\"\"");
  }

  // min..max characters of a string. Up to kMaxInlineLength as GBNF's own count (one automaton
  // with the string around it, deterministic, so that masks take its content tokens by
  // position: token_mask.h); longer as nested rules (a bound of thousands stays small).
  std::string string_length(uint64_t min, uint64_t max) {
    if (max == kUnbounded ? min > kMaxInlineLength : max > kMaxInlineLength)
      return repeat(json_char(), min, max, "");
    if (min == max) return json_char() + "{" + std::to_string(min) + "}";
    return json_char() + "{" + std::to_string(min) + "," + (max == kUnbounded ? "" : std::to_string(max)) +
           "}";
  }

  // A format's contents: its RFC grammar over the raw characters (format_rules).
  std::string format_contents(const std::string& f) {
    auto it = format_contents_.find(f);
    if (it != format_contents_.end()) return it->second;
    const std::string name = fresh("format-" + f);
    extra_ += format_rules(f, name);
    return format_contents_[f] = name;
  }

  // The contents of the JSON strings whose decoded value `pattern` matches (JSON Schema's search
  // semantics), in every JSON encoding of their characters. `field` names the keyword in errors.
  std::string pattern_contents(const std::string& pattern, const char* field) {
    auto it = pattern_contents_.find(pattern);
    if (it != pattern_contents_.end()) return it->second;
    const std::string name = fresh("pattern");
    std::string rule;
    try {
      rule = pattern_to_gbnf_rules(pattern, name);
    } catch (const GrammarError& e) {
      fail(field, e.what());
    }
    // The rule's text after "name ::=" is over the decoded string: rewrite it over JSON's encoding.
    const size_t def = rule.find("::=");
    if (def == std::string::npos) fail(field, "the pattern's grammar has no rule");
    rules_.push_back({name, json_encode_gbnf(std::string_view(rule).substr(def + 3))});
    return pattern_contents_[pattern] = name;
  }

  // Whether the (decoded) string `text` is of format `f` (a known one).
  bool format_matches(const std::string& f, const std::string& text) {
    auto it = format_grammars_.find(f);
    if (it == format_grammars_.end())
      it = format_grammars_.emplace(f, compile_gbnf("root ::= format\n" + format_rules(f, "format"))).first;
    Matcher m(it->second);
    return m.accept_bytes(text) && m.complete();
  }

  // Whether `pattern` matches the (decoded) string `text` (JSON Schema's search semantics).
  bool pattern_matches(const std::string& pattern, const std::string& text, const char* field) {
    auto it = pattern_grammars_.find(pattern);
    if (it == pattern_grammars_.end()) {
      try {
        it = pattern_grammars_.emplace(pattern, compile_gbnf(pattern_to_gbnf_rules(pattern, "root"))).first;
      } catch (const GrammarError& e) {
        fail(field, e.what());
      }
    }
    Matcher m(it->second);
    return m.accept_bytes(text) && m.complete();
  }

  // `item` min..max times, each after `sep` but the first (every one after `sep` when
  // `first_has_sep`), without ambiguity: the optional tail nests ((x (x …)?)?) so that each count
  // has one parse.
  std::string repeat(const std::string& item, uint64_t min, uint64_t max, const std::string& sep,
                     bool first_has_sep = false) {
    auto pre = [&](uint64_t i) { return (i > 0 || first_has_sep) ? sep : std::string(); };
    if (max != kUnbounded && max - min > limits_.max_rules) {
      fail("schema",
           "a repetition of " + std::to_string(max - min) + " optional items is over the grammar's limit");
    }
    if (min > limits_.max_rules)
      fail("schema", "a repetition of " + std::to_string(min) + " items is over the limit");
    std::string out;
    for (uint64_t i = 0; i < min; ++i) out += (out.empty() ? "" : " ") + pre(i) + item;
    if (max == kUnbounded) {
      const std::string more = min > 0 || first_has_sep || sep.empty()
                                   ? "(" + sep + item + ")*"
                                   : "(" + item + " (" + sep + item + ")*)?";
      out += (out.empty() ? "" : " ") + more;
    } else if (max > min) {
      std::string tail;
      for (uint64_t k = max; k-- > min;) {
        const std::string body = "(" + pre(k) + item + (tail.empty() ? "" : " " + tail) + ")?";
        tail = max - min > 1 ? add_rule("rep", body) : body;
      }
      out += (out.empty() ? "" : " ") + tail;
    }
    return out.empty() ? "\"\"" : out;
  }

  // ---- arrays

  std::optional<std::string> compile_array(const ojson& s) {
    uint64_t min = s.contains("minItems") ? count_value(s, "minItems") : 0;
    uint64_t max = s.contains("maxItems") ? count_value(s, "maxItems") : kUnbounded;
    std::vector<std::optional<std::string>> prefix;
    if (s.contains("prefixItems")) {
      const ojson& p = s.at("prefixItems");
      if (!p.is_array() || p.empty()) fail("prefixItems", "prefixItems must be a non-empty array");
      for (const auto& e : p) prefix.push_back(child(e));
    }
    std::optional<std::string> items = any_value();
    if (s.contains("items")) {
      assert(!s.at("items").is_array());  // tuples_as_prefix
      items = child(s.at("items"));
    }
    for (size_t i = 0; i < prefix.size(); ++i) {
      if (!prefix[i]) {
        max = std::min<uint64_t>(max, i);
        break;
      }
    }
    if (!items) max = std::min<uint64_t>(max, prefix.size());
    if (min > max) return std::nullopt;
    const std::string open = "\"[\" " + ws(), close = "\"]\"";
    if (max == 0) return "(" + open + close + ")";
    if (s.contains("contains") || s.contains("minContains") || s.contains("maxContains")) {
      const ojson any = true;
      if (const std::optional<std::optional<std::string>> e =
              containing_items(s, s.contains("items") ? s.at("items") : any, items, prefix.empty(), min, max))
        return *e;
    }
    if (unique_items(s) && max > 1) {
      if (!prefix.empty()) fail("uniqueItems", "uniqueItems beside prefixItems is not supported");
      const ojson any = true;
      const std::optional<std::vector<ojson>> domain =
          finite_domain(s.contains("items") ? s.at("items") : any);
      if (!domain)
        fail("uniqueItems",
             "uniqueItems is supported where the items are a small finite set of values "
             "(enum, const, boolean, null)");
      return distinct_items(*domain, min, max);
    }
    // After the first element: elements 1..max-1, those below min mandatory.
    const uint64_t p = prefix.size();
    std::string tail;
    std::string inner;
    const uint64_t from = std::max<uint64_t>(p, 1);
    if (max > from) {
      const uint64_t lo = min > from ? min - from : 0;
      const uint64_t hi = max == kUnbounded ? kUnbounded : max - from;
      inner = repeat(*items, lo, hi, comma(), true);
    }
    // Prefix elements from the last down to the second: each optional unless below min.
    for (uint64_t i = std::min<uint64_t>(p, max); i-- > 1;) {
      const std::string body = comma() + *prefix[i] + (inner.empty() ? "" : " " + inner);
      inner = i < min ? body : "(" + body + ")?";
      inner = add_rule("items", inner);
    }
    const std::string first = p > 0 ? *prefix[0] : *items;
    const std::string elems = first + (inner.empty() ? "" : " " + inner) + " " + ws();
    return add_rule("array", open + (min == 0 ? "(" + elems + ")?" : elems) + " " + close);
  }

  // contains with minContains (1 by default), and without maxContains: arrays of items of which
  // at least minContains satisfy contains too. Each element is written either as an item or as an
  // item that satisfies contains (an element that is both may be read either way), counting the
  // latter up to minContains. nullopt where contains constrains nothing (minContains 0, or no
  // contains: minContains and maxContains alone constrain nothing).
  std::optional<std::optional<std::string>> containing_items(const ojson& s, const ojson& item_schema,
                                                             const std::optional<std::string>& item,
                                                             bool no_prefix, uint64_t min, uint64_t max) {
    if (!s.contains("contains")) return std::nullopt;
    const uint64_t need = s.contains("minContains") ? count_value(s, "minContains") : 1;
    if (s.contains("maxContains")) fail("maxContains", "maxContains is not supported");
    if (need == 0) return std::nullopt;
    if (!no_prefix) fail("contains", "contains beside prefixItems is not supported");
    if (unique_items(s) && max > 1) fail("uniqueItems", "uniqueItems beside contains is not supported");
    if (need > max || !item) return std::optional<std::string>();
    merged_.push_back(std::make_unique<ojson>(both(item_schema, s.at("contains"))));
    const std::optional<std::string> matching = child(*merged_.back());
    if (!matching) return std::optional<std::string>();
    // Counts that still matter: elements up to max (up to min when unbounded), matches up to need.
    const uint64_t count_cap = max == kUnbounded ? std::max(min, need) : max;
    if ((count_cap + 1) * (need + 1) > kMaxContainsStates)
      fail("contains",
           "contains with these minContains / minItems / maxItems counts is over the grammar's limit");
    std::map<std::pair<uint64_t, uint64_t>, std::optional<std::string>> memo;
    // after(n, c): what may follow n elements, c of them matching (c ≤ need).
    std::function<std::optional<std::string>(uint64_t, uint64_t)> after =
        [&](uint64_t n, uint64_t c) -> std::optional<std::string> {
      auto m = memo.find({n, c});
      if (m != memo.end()) return m->second;
      check_budget();
      std::optional<std::string> out;
      if (c == need) {
        // The rest are items: max − n more at most, min − n at least.
        const uint64_t lo = min > n ? min - n : 0;
        const uint64_t hi = max == kUnbounded ? kUnbounded : max - n;
        out = hi == 0 ? std::string() : repeat(*item, lo, hi, comma(), true);
      } else if (max == kUnbounded && n == count_cap) {
        // Counts past count_cap no longer matter: any items, then one more match.
        if (const std::optional<std::string> rest = after(n, c + 1))
          out = add_rule("contains", "(" + comma() + *item + ")* " + comma() + *matching +
                                         (rest->empty() || *rest == "\"\"" ? "" : " " + *rest));
      } else if (max == kUnbounded || n < max) {
        const uint64_t next_n = std::min(n + 1, count_cap);
        std::vector<std::string> ways;
        for (const auto& [e, next_c] : {std::pair{*item, c}, std::pair{*matching, c + 1}}) {
          if (const std::optional<std::string> rest = after(next_n, next_c))
            ways.push_back(comma() + e + (rest->empty() || *rest == "\"\"" ? "" : " " + *rest));
        }
        if (!ways.empty()) out = add_rule("contains", ways.size() == 1 ? ways[0] : ways[0] + " | " + ways[1]);
      }
      return memo[{n, c}] = out;
    };
    std::vector<std::string> firsts;
    for (const auto& [e, c] : {std::pair{*item, uint64_t{0}}, std::pair{*matching, uint64_t{1}}}) {
      if (const std::optional<std::string> rest = after(1, c))
        firsts.push_back(e + (rest->empty() || *rest == "\"\"" ? "" : " " + *rest));
    }
    if (firsts.empty()) return std::optional<std::string>();
    const std::string elems = "(" + firsts[0] + (firsts.size() > 1 ? " | " + firsts[1] : "") + ") " + ws();
    return std::optional<std::string>(add_rule("array", "\"[\" " + ws() + elems + " \"]\""));
  }

  static bool unique_items(const ojson& s) {
    if (!s.contains("uniqueItems")) return false;
    if (!s.at("uniqueItems").is_boolean()) fail("uniqueItems", "uniqueItems must be a boolean");
    return s.at("uniqueItems").get<bool>();
  }

  // The instances of `s` where they are few and known (enum, const, a type of null and booleans):
  // nullopt where they are not.
  std::optional<std::vector<ojson>> finite_domain(const ojson& s_in, int depth = 0) {
    if (depth > 32) return std::nullopt;
    const ojson& s = only_ref(s_in) ? resolve(s_in.at("$ref")) : s_in;
    if (&s != &s_in) return finite_domain(s, depth + 1);
    if (s.is_boolean())
      return s.get<bool>() ? std::nullopt : std::optional<std::vector<ojson>>(std::vector<ojson>{});
    if (!s.is_object()) return std::nullopt;
    if (s.contains("enum") || s.contains("const")) return enum_values(s);
    const std::vector<std::string> keys = constraining_keywords(s);
    if (keys.size() != 1 || keys[0] != "type") return std::nullopt;
    const unsigned kinds = kinds_of_type(s.at("type"));
    if (kinds & ~(kNull | kBoolean)) return std::nullopt;
    std::vector<ojson> out;
    if (kinds & kNull) out.push_back(nullptr);
    if (kinds & kBoolean) out.insert(out.end(), {ojson(false), ojson(true)});
    return out;
  }

  // Arrays of distinct values from `domain`, min..max of them: a rule per set of values written
  // so far (the next value is one not in it). Values in any order, so the sets, not the orders,
  // are the states: 2^|domain| at most.
  std::optional<std::string> distinct_items(const std::vector<ojson>& domain, uint64_t min, uint64_t max) {
    if (domain.size() > kMaxDistinctValues)
      fail("uniqueItems",
           "uniqueItems over more than " + std::to_string(kMaxDistinctValues) + " values is not supported");
    max = std::min<uint64_t>(max, domain.size());
    const std::string open = "\"[\" " + ws(), close = "\"]\"";
    if (min > max) return std::nullopt;  // more distinct values than there are
    std::vector<std::string> literal;
    for (const auto& v : domain) literal.push_back(value_expr(v));
    std::map<uint32_t, std::string> memo;
    // after(used): what may follow once the values in `used` are written.
    std::function<std::string(uint32_t)> after = [&](uint32_t used) -> std::string {
      auto m = memo.find(used);
      if (m != memo.end()) return m->second;
      check_budget();
      const uint64_t n = __builtin_popcount(used);
      std::vector<std::string> alts;
      if (n < max) {
        for (size_t i = 0; i < domain.size(); ++i) {
          if (used & (1u << i)) continue;
          const std::string next = after(used | (1u << i));
          alts.push_back(comma() + literal[i] + (next.empty() ? "" : " " + next));
        }
      }
      std::string body;
      for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
      if (!alts.empty()) body = add_rule("distinct", n >= min ? "(" + body + ")?" : body);
      return memo[used] = body;
    };
    std::vector<std::string> firsts;
    for (size_t i = 0; i < domain.size(); ++i) {
      const std::string next = after(1u << i);
      firsts.push_back(literal[i] + (next.empty() ? "" : " " + next));
    }
    std::string elems;
    for (size_t i = 0; i < firsts.size(); ++i) elems += (i ? " | " : "") + firsts[i];
    if (elems.empty()) return "(" + open + close + ")";  // an empty domain: only []
    elems = "(" + elems + ") " + ws();
    return add_rule("array", open + (min == 0 ? "(" + elems + ")?" : elems) + " " + close);
  }

  // ---- objects

  // GBNF for a member name: a string that is not one of `names` (decoded), in any encoding.
  std::string other_name(const std::vector<std::vector<uint32_t>>& names) {
    struct Node {
      std::map<uint32_t, int> children;
      bool terminal = false;
    };
    std::vector<Node> trie(1);
    for (const auto& n : names) {
      int at = 0;
      for (uint32_t c : n) {
        auto it = trie[at].children.find(c);
        if (it == trie[at].children.end()) {
          trie.push_back({});
          const int id = static_cast<int>(trie.size()) - 1;
          trie[at].children[c] = id;
          at = id;
        } else {
          at = it->second;
        }
      }
      trie[at].terminal = true;
    }
    const std::string any_tail = json_char() + "*";
    std::function<std::string(int)> rest = [&](int at) -> std::string {
      const Node& node = trie[at];
      std::vector<std::string> alts;
      Ranges others = kAllCodePoints;
      for (const auto& [c, child] : node.children) {
        alts.push_back(json_chars_of({{c, c}}) + " " + rest(child));
        others = subtract(others, c, c);
      }
      const std::string o = json_chars_of(others);
      if (!o.empty()) alts.push_back(o + " " + any_tail);
      std::string body;
      for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
      if (!node.terminal) body = "(" + body + ")?";
      return add_rule("name", body);
    };
    return add_rule("other-name", "\"\\\"\" " + rest(0) + " \"\\\"\"");
  }

  // propertyNames that every string satisfies (true, {}, {"type": "string"}: a member's name is a
  // string anyway); null for those, else the schema names must satisfy.
  const ojson* property_names(const ojson& s) {
    if (!s.contains("propertyNames")) return nullptr;
    const ojson& names = s.at("propertyNames");
    if (names.is_boolean()) return names.get<bool>() ? nullptr : &names;
    if (!names.is_object()) fail("propertyNames", "propertyNames must be a schema");
    for (auto it = names.begin(); it != names.end(); ++it) {
      if (is_ignored(it.key())) continue;
      if (it.key() != "type" || !(kinds_of_type(it.value()) & kString)) return &names;
    }
    return nullptr;
  }

  // Whether `name` satisfies propertyNames (null: any name does).
  bool name_allowed(const ojson* names, const std::string& name) {
    if (!names) return true;
    try {
      return valid(ojson(name), *names);
    } catch (const Undecided& u) {
      fail("propertyNames",
           "propertyNames with " + u.keyword + ", beside properties or required, is not supported");
    }
  }

  // The member names an object's additional members may have under propertyNames: its string
  // instances, as JSON string texts; nullopt: none.
  std::optional<std::string> names_rule(const ojson& names) {
    if (names.is_boolean())
      return names.get<bool>() ? std::optional<std::string>(any_string()) : std::nullopt;
    ojson strings = names;
    if (names.contains("type") && !(kinds_of_type(names.at("type")) & kString)) return std::nullopt;
    strings["type"] = "string";
    merged_.push_back(std::make_unique<ojson>(std::move(strings)));
    return child(*merged_.back());
  }

  // dependentRequired, and draft 4–7's dependencies (an array of names, or a schema that only
  // requires names): for each trigger name, the names an object with that member must have.
  std::vector<std::pair<std::string, std::vector<std::string>>> dependencies(const ojson& s) {
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    for (const char* key : {"dependentRequired", "dependencies"}) {
      if (!s.contains(key)) continue;
      const ojson& deps = s.at(key);
      if (!deps.is_object()) fail(key, std::string(key) + " must be an object");
      for (auto it = deps.begin(); it != deps.end(); ++it) {
        const ojson* names = &it.value();
        if (names->is_object() && std::string(key) == "dependencies") {
          const std::vector<std::string> kws = constraining_keywords(*names);
          if (kws.empty()) continue;
          if (kws.size() != 1 || kws[0] != "required")
            fail(key, "dependencies with a schema other than required names is not supported");
          names = &names->at("required");
        } else if (names->is_boolean() && std::string(key) == "dependencies") {
          if (names->get<bool>()) continue;
          fail(key, "dependencies with the schema false is not supported");
        }
        if (!names->is_array()) fail(key, std::string(key) + "'s values must be arrays of names");
        std::vector<std::string> needed;
        for (const auto& n : *names) {
          if (!n.is_string()) fail(key, std::string(key) + "'s values must be arrays of names");
          needed.push_back(n.get<std::string>());
        }
        out.push_back({it.key(), std::move(needed)});
      }
    }
    return out;
  }

  // A member name the object's grammar places itself (declared, required, or in a dependency):
  // its value's rule (nullopt: the name cannot be a member's).
  struct Slot {
    std::string name;
    std::optional<std::string> value;
    bool required;
  };

  // patternProperties as (pattern, schema) pairs.
  std::vector<std::pair<std::string, const ojson*>> pattern_properties(const ojson& s) {
    std::vector<std::pair<std::string, const ojson*>> out;
    if (!s.contains("patternProperties")) return out;
    const ojson& pp = s.at("patternProperties");
    if (!pp.is_object()) fail("patternProperties", "patternProperties must be an object");
    for (auto it = pp.begin(); it != pp.end(); ++it) out.push_back({it.key(), &it.value()});
    return out;
  }

  // The members beyond the declared names (slots) under patternProperties: for each set T of the
  // patterns, the names that match exactly those (and are not declared) take every schema of T;
  // names that match none take additionalProperties. The name languages are intersections and
  // complements of the patterns' (GBNF & and !), over JSON string contents.
  std::string patterned_members(const std::vector<std::pair<std::string, const ojson*>>& patterns,
                                const std::vector<Slot>& slots,
                                const std::optional<std::string>& additional) {
    if (patterns.size() > kMaxPatternProperties)
      fail("patternProperties", "more than " + std::to_string(kMaxPatternProperties) +
                                    " patternProperties in one schema are not supported");
    std::vector<std::string> contents;
    for (const auto& [pattern, schema] : patterns)
      contents.push_back(pattern_contents(pattern, "patternProperties"));
    std::string not_declared;
    if (!slots.empty()) {
      std::string names;
      for (size_t i = 0; i < slots.size(); ++i)
        names += (i ? " | " : "") + json_encode_gbnf(gbnf_literal(slots[i].name));
      not_declared = " & !" + add_rule("declared-name", names);
    }
    std::vector<std::string> members;
    const size_t k = patterns.size();
    for (uint32_t set = 0; set < (1u << k); ++set) {
      std::optional<std::string> value;
      if (set == 0) {
        value = additional;
      } else {
        ojson all = ojson::array();
        for (size_t i = 0; i < k; ++i)
          if (set & (1u << i)) all.push_back(*patterns[i].second);
        merged_.push_back(std::make_unique<ojson>(all.size() == 1 ? all[0] : ojson{{"allOf", all}}));
        value = child(*merged_.back());
      }
      if (!value) continue;
      std::string name = json_char() + "*";
      for (size_t i = 0; i < k; ++i) name += std::string(set & (1u << i) ? " & " : " & !") + contents[i];
      members.push_back("\"\\\"\" (" + name + not_declared + ") \"\\\"\" " + colon() + *value);
    }
    if (members.empty()) return "";
    std::string body;
    for (size_t i = 0; i < members.size(); ++i) body += (i ? " | " : "") + members[i];
    return add_rule("member", body);
  }

  std::optional<std::string> compile_object(const ojson& s) {
    const ojson* names = property_names(s);
    std::vector<std::string> required;
    if (s.contains("required")) {
      if (!s.at("required").is_array()) fail("required", "required must be an array of strings");
      for (const auto& r : s.at("required")) {
        if (!r.is_string()) fail("required", "required must be an array of strings");
        if (std::find(required.begin(), required.end(), r.get<std::string>()) == required.end()) {
          required.push_back(r.get<std::string>());
        }
      }
    }
    const uint64_t min_members = s.contains("minProperties") ? count_value(s, "minProperties") : 0;
    const uint64_t max_members = s.contains("maxProperties") ? count_value(s, "maxProperties") : kUnbounded;
    if (min_members > max_members) return std::nullopt;
    const auto deps = dependencies(s);
    std::optional<std::string> additional;
    if (s.contains("additionalProperties")) {
      additional = child(s.at("additionalProperties"));
    } else if (!options_.strict || !s.contains("properties")) {
      additional = any_value();
    }
    const std::vector<std::pair<std::string, const ojson*>> patterns = pattern_properties(s);
    if (!patterns.empty() && names)
      fail("patternProperties", "patternProperties beside propertyNames is not supported");
    // A member's value: its declared schema (or, undeclared, additionalProperties') and the schema
    // of every pattern its name matches (which then replace additionalProperties).
    auto member_value = [&](const std::string& name,
                            const ojson* declared_schema) -> std::optional<std::string> {
      ojson all = ojson::array();
      if (declared_schema) all.push_back(*declared_schema);
      for (const auto& [pattern, schema] : patterns) {
        if (pattern_matches(pattern, name, "patternProperties")) all.push_back(*schema);
      }
      if (all.empty()) return additional;
      if (all.size() == 1) return child(all[0]);
      merged_.push_back(std::make_unique<ojson>(ojson{{"allOf", all}}));
      return child(*merged_.back());
    };
    std::vector<Slot> slots;
    std::vector<std::vector<uint32_t>> declared;
    auto declare = [&](const std::string& name, const ojson* schema, bool req) {
      // A name propertyNames refuses cannot be a member's.
      slots.push_back({name, name_allowed(names, name) ? member_value(name, schema) : std::nullopt, req});
      declared.push_back(decode_utf8(name));
    };
    auto is_declared = [&](const std::string& name) {
      return std::any_of(slots.begin(), slots.end(), [&](const Slot& x) { return x.name == name; });
    };
    if (s.contains("properties")) {
      const ojson& props = s.at("properties");
      if (!props.is_object()) fail("properties", "properties must be an object");
      for (auto it = props.begin(); it != props.end(); ++it) {
        const bool req = std::find(required.begin(), required.end(), it.key()) != required.end();
        declare(it.key(), &it.value(), req);
      }
    }
    for (const auto& r : required) {
      if (!is_declared(r)) declare(r, nullptr, true);
    }
    // The names a dependency mentions get a place of their own (the additional members' schema):
    // whether they are present must be known where the dependency is checked.
    for (const auto& [trigger, needed] : deps) {
      if (!is_declared(trigger)) declare(trigger, nullptr, false);
      for (const auto& n : needed) {
        if (!is_declared(n)) declare(n, nullptr, false);
      }
    }
    std::vector<Slot> live;
    for (const auto& slot : slots) {
      if (slot.value) {
        live.push_back(slot);
      } else if (slot.required) {
        return std::nullopt;
      }
    }
    std::string extra_member;
    if (!patterns.empty()) {
      extra_member = patterned_members(patterns, slots, additional);
    } else if (additional && names) {
      // Additional members named by propertyNames: exact where no name is declared (the names'
      // language minus declared ones is not written).
      if (!declared.empty())
        fail("propertyNames",
             "propertyNames beside properties or required, with additional members, is not supported");
      if (const std::optional<std::string> name = names_rule(*names))
        extra_member = add_rule("member", *name + " " + colon() + *additional);
    } else if (additional) {
      extra_member = add_rule("member", other_name(declared) + " " + colon() + *additional);
    }
    // Dependencies over the live slots: slot `trigger` present needs every slot of `needed`
    // present; kAbsent where a needed name can never be a member (the trigger cannot be either).
    constexpr size_t kAbsent = std::numeric_limits<size_t>::max();
    auto live_index = [&](const std::string& name) {
      for (size_t i = 0; i < live.size(); ++i)
        if (live[i].name == name) return i;
      return kAbsent;
    };
    std::vector<std::vector<size_t>> needs(live.size());  // [live] the slots slot i needs
    uint64_t remembered = 0;                              // slots whose presence a later trigger reads
    for (const auto& [trigger, needed] : deps) {
      const size_t t = live_index(trigger);
      if (t == kAbsent) continue;
      for (const auto& n : needed) {
        const size_t j = live_index(n);
        needs[t].push_back(j);
        if (j != kAbsent && j < t) {
          if (j >= 64) fail("dependentRequired", "dependencies over more than 64 members are not supported");
          remembered |= uint64_t{1} << j;
        }
      }
    }
    for (size_t t = 0; t < live.size(); ++t) {
      for (size_t j : needs[t]) {
        if (j != kAbsent && j > t && j >= 64)
          fail("dependentRequired", "dependencies over more than 64 members are not supported");
      }
    }
    // Members counted up to the first count that no longer matters: past min_members when
    // unbounded above, else past max_members.
    const uint64_t cap = max_members == kUnbounded ? min_members : max_members + 1;
    struct State {
      size_t i;        // the next slot
      uint64_t count;  // members so far, up to cap
      bool emitted;    // a member so far (a comma before the next)
      uint64_t seen;   // remembered slots present
      uint64_t owed;   // later slots that a present trigger needs
      bool operator<(const State& o) const {
        return std::tie(i, count, emitted, seen, owed) < std::tie(o.i, o.count, o.emitted, o.seen, o.owed);
      }
    };
    // rest(state): the members from slot i on, then the additional members, as a rule ("" when
    // nothing more is written; nullopt when no way on satisfies the counts and dependencies).
    std::map<State, std::optional<std::string>> memo;
    std::function<std::optional<std::string>(const State&)> rest =
        [&](const State& st) -> std::optional<std::string> {
      auto m = memo.find(st);
      if (m != memo.end()) return m->second;
      check_budget();
      std::optional<std::string> out;
      if (st.i == live.size()) {
        const uint64_t lo = min_members > st.count ? min_members - st.count : 0;
        const uint64_t hi = max_members == kUnbounded ? kUnbounded : max_members - st.count;
        if (extra_member.empty() || hi == 0) {
          if (lo == 0) out = st.emitted ? ws() : "";
        } else if (st.emitted) {
          out = repeat(extra_member, lo, hi, comma(), true) + " " + ws();
        } else {
          out = "(" + repeat(extra_member, std::max<uint64_t>(lo, 1), hi, comma()) + " " + ws() + ")" +
                (lo == 0 ? "?" : "");
        }
      } else {
        const Slot& slot = live[st.i];
        const uint64_t bit = st.i < 64 ? uint64_t{1} << st.i : 0;
        std::vector<std::string> ways;
        // Present: within maxProperties, and every name it needs present (earlier) or owed (later).
        bool can_be_present = max_members == kUnbounded || st.count < max_members;
        State next{st.i + 1, std::min(st.count + 1, cap), true, st.seen | (remembered & bit), st.owed & ~bit};
        for (size_t j : needs[st.i]) {
          if (j == kAbsent || (j < st.i && !(st.seen & (uint64_t{1} << j)))) can_be_present = false;
          if (j != kAbsent && j > st.i) next.owed |= uint64_t{1} << j;
        }
        if (can_be_present) {
          if (const std::optional<std::string> after = rest(next)) {
            const std::string member = (st.emitted ? comma() : std::string()) +
                                       gbnf_literal(ojson(slot.name).dump()) + " " + colon() + *slot.value;
            ways.push_back(member + (after->empty() ? "" : " " + *after));
          }
        }
        // Absent: unless required or owed.
        std::optional<std::string> absent;
        if (!slot.required && !(st.owed & bit)) {
          absent = rest(State{st.i + 1, st.count, st.emitted, st.seen, st.owed});
        }
        if (!ways.empty() && absent) {
          out = absent->empty() ? "(" + ways[0] + ")?" : "(" + ways[0] + ") | " + *absent;
        } else if (!ways.empty()) {
          out = ways[0];
        } else {
          out = absent;
        }
      }
      if (out && !out->empty()) out = add_rule("members", *out);
      memo[st] = out;
      return out;
    };
    const std::optional<std::string> members = rest(State{0, 0, false, 0, 0});
    if (!members) return std::nullopt;
    return add_rule("object", "\"{\" " + ws() + *members + " \"}\"");
  }

 public:
  std::string extra_;  // rules written as text (formats)

 private:
  const ojson& root_;
  JsonSchemaOptions options_;
  Limits limits_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> by_body_;
  std::set<std::string> used_;
  std::map<std::string, std::string> ref_rules_;
  std::map<std::string, std::set<std::string>> head_edges_;
  std::map<std::string, std::string> format_contents_;   // format → its contents rule
  std::map<std::string, std::string> pattern_contents_;  // pattern → its contents rule (JSON-encoded)
  std::map<std::string, std::shared_ptr<const Grammar>> pattern_grammars_;  // pattern → over decoded text
  std::map<std::string, std::shared_ptr<const Grammar>> format_grammars_;   // format → over decoded text
  std::vector<std::unique_ptr<ojson>> merged_;  // distributed unions: alive while rules refer to them
  std::string owner_;
  bool empty_all_of_ = false;  // an allOf admitted nothing (for the message of an empty schema)
  int depth_ = 0;
  static constexpr int kMaxDepth = 128;
  // Digits of a number bound written out (zod's ±(2^53 − 1) has 16; 1e-9 has 9), and of an
  // instance compared with one (beyond, the validator cannot decide).
  static constexpr int kMaxBoundDigits = 64;
  static constexpr int kMaxInstanceDigits = 1024;
  // Rules of a multipleOf's residue automaton: digits of the bounds × residues (zod's bounds of
  // 16 digits take a multipleOf up to 250).
  static constexpr size_t kMaxMultipleStates = 4096;
  // Values uniqueItems may choose among (a rule per subset of them).
  static constexpr size_t kMaxDistinctValues = 10;
  // Rules of contains' count of elements × count of matches.
  static constexpr uint64_t kMaxContainsStates = 4096;
  // Lengths of a string written as one automaton's count (string_length).
  static constexpr uint64_t kMaxInlineLength = 256;
  // Members of an enum / const object written in any order (a rule per set of them written).
  static constexpr size_t kMaxAnyOrderMembers = 6;
  // patternProperties of one schema (a member rule per set of them).
  static constexpr size_t kMaxPatternProperties = 4;
  std::string ws_, char_, string_, integer_, number_, value_, object_;
};

}  // namespace

namespace {

std::string to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options,
                    const Limits& limits) {
  try {
    Compiler c(schema, options, limits);
    std::string text = c.run();
    return text + c.extra_;
  } catch (const nlohmann::json::exception& e) {
    // A keyword value of the wrong JSON type deep inside the schema.
    throw GrammarError("schema", std::string("malformed schema: ") + e.what());
  }
}

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  return to_gbnf(schema, options, Limits{});
}

std::string json_schema_to_gbnf(const nlohmann::json& schema, const JsonSchemaOptions& options) {
  return json_schema_to_gbnf(nlohmann::ordered_json::parse(schema.dump()), options);
}

std::shared_ptr<const Grammar> compile_json_schema(const nlohmann::ordered_json& schema,
                                                   const JsonSchemaOptions& options, const Limits& limits) {
  const std::string text = to_gbnf(schema, options, limits);
  if (text.size() > limits.max_source_bytes) {
    throw GrammarError("schema", "the schema's grammar is " + std::to_string(text.size()) +
                                     " bytes, over the limit of " + std::to_string(limits.max_source_bytes));
  }
  std::shared_ptr<const Grammar> g = compile_gbnf(text, limits);
  if (options.refuse_empty) {
    // A language the compiler could not see was empty (format, pattern and lengths that no
    // string meets together; names no patternProperties leaves): the automaton has no way on.
    Matcher m(g);
    const std::vector<uint64_t> next = m.next_bytes();
    if (!m.complete() && std::all_of(next.begin(), next.end(), [](uint64_t w) { return w == 0; }))
      throw GrammarError("schema", "the schema admits no JSON value");
  }
  return g;
}

std::shared_ptr<const Grammar> compile_json_schema(const nlohmann::json& schema,
                                                   const JsonSchemaOptions& options, const Limits& limits) {
  return compile_json_schema(nlohmann::ordered_json::parse(schema.dump()), options, limits);
}

std::shared_ptr<const Grammar> compile_any_json_object(const JsonSchemaOptions& options) {
  const nlohmann::ordered_json empty = nlohmann::ordered_json::object();
  Compiler c(empty, options, Limits{});
  return compile_gbnf(c.any_object_text());
}

}  // namespace rootspec::grammar
