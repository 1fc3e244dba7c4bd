// The JSON Schema compiler keyword by keyword: what each admits and rejects, the keywords it
// refuses (by name), recursion, bounded whitespace and its limits.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>

#include "json_schema.h"
#include "matcher.h"

namespace {

using namespace rootspec::grammar;
using ojson = nlohmann::ordered_json;

std::shared_ptr<const Grammar> schema(const std::string& text, JsonSchemaOptions options = {}) {
  return compile_json_schema(ojson::parse(text), options);
}

// The whole text is accepted, fed one byte at a time as a decoder would.
bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  for (char c : text) {
    if (!m.accept_bytes(std::string_view(&c, 1))) return false;
  }
  return m.complete();
}

// The field of the GrammarError that compiling `text` throws ("" when it compiles).
std::string refusal(const std::string& text, JsonSchemaOptions options = {}) {
  try {
    schema(text, options);
  } catch (const GrammarError& e) {
    return e.field;
  }
  return "";
}

TEST(JsonSchema, Types) {
  auto g = schema(R"({"type": "null"})");
  EXPECT_TRUE(accepts(g, "null"));
  EXPECT_FALSE(accepts(g, "nul"));
  EXPECT_FALSE(accepts(g, "0"));
  g = schema(R"({"type": "boolean"})");
  EXPECT_TRUE(accepts(g, "true"));
  EXPECT_TRUE(accepts(g, "false"));
  EXPECT_FALSE(accepts(g, "null"));
  g = schema(R"({"type": ["string", "null"]})");
  EXPECT_TRUE(accepts(g, "null"));
  EXPECT_TRUE(accepts(g, R"("x")"));
  EXPECT_FALSE(accepts(g, "1"));
  EXPECT_EQ(refusal(R"({"type": "text"})"), "type");
}

TEST(JsonSchema, Numbers) {
  auto i = schema(R"({"type": "integer"})");
  for (const char* ok : {"0", "-0", "12", "-340"}) EXPECT_TRUE(accepts(i, ok)) << ok;
  // 1.0 is an integer for JSON Schema; the grammar writes integers without a fraction.
  for (const char* bad : {"01", "1.0", "1e3", "+1", "-", "1.5", "\"1\""})
    EXPECT_FALSE(accepts(i, bad)) << bad;
  auto n = schema(R"({"type": "number"})");
  for (const char* ok : {"0", "-0.5", "12.25e+3", "1E-9", "7"}) EXPECT_TRUE(accepts(n, ok)) << ok;
  for (const char* bad : {".5", "1.", "1e", "01.5", "NaN", "Infinity", "--1"})
    EXPECT_FALSE(accepts(n, bad)) << bad;
}

// multipleOf: the multiples of an integer, within the bounds, written as integers (number_range.h's
// residue automaton; tests/grammar/test_number_range.cpp checks it against arithmetic).
TEST(JsonSchema, MultipleOfAdmitsExactlyTheMultiples) {
  auto zod = schema(R"({"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991,
                        "multipleOf": 5})");
  for (const char* ok : {"0", "5", "-5", "9007199254740990", "-100"}) EXPECT_TRUE(accepts(zod, ok)) << ok;
  for (const char* bad : {"3", "-7", "9007199254740995", "5.0", "-0", "1e1"})
    EXPECT_FALSE(accepts(zod, bad)) << bad;
  auto number = schema(R"({"type": "number", "multipleOf": 3, "exclusiveMinimum": 0, "maximum": 12})");
  for (const char* ok : {"3", "6", "12"}) EXPECT_TRUE(accepts(number, ok)) << ok;
  for (const char* bad : {"0", "15", "4", "1.5", "-3"}) EXPECT_FALSE(accepts(number, bad)) << bad;
  // Beside enum: the values that are multiples; in allOf, the least common multiple.
  auto values = schema(R"({"enum": [1, 2, 4, 6, "x"], "multipleOf": 2})");
  EXPECT_TRUE(accepts(values, "4"));
  EXPECT_TRUE(accepts(values, R"("x")")) << "multipleOf constrains numbers only";
  EXPECT_FALSE(accepts(values, "1"));
  auto both = schema(R"({"allOf": [{"type": "integer", "multipleOf": 4}, {"multipleOf": 6}]})");
  EXPECT_TRUE(accepts(both, "24"));
  EXPECT_TRUE(accepts(both, "-12"));
  EXPECT_FALSE(accepts(both, "8"));
  EXPECT_FALSE(accepts(both, "18"));
  EXPECT_EQ(refusal(R"({"type": "number", "multipleOf": 0.01})"), "multipleOf");
  EXPECT_EQ(refusal(R"({"type": "integer", "multipleOf": 0})"), "multipleOf");
  EXPECT_EQ(refusal(R"({"type": "integer", "multipleOf": 1000, "maximum": 9007199254740991})"), "multipleOf");
}

TEST(JsonSchema, NumberBoundsAdmitExactlyTheNumbersInRange) {
  // zod 4's .int() (every integer field of the AI SDK, LangChain and the openai client).
  auto zod = schema(R"({"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991})");
  for (const char* ok : {"0", "42", "-42", "9007199254740991", "-9007199254740991"})
    EXPECT_TRUE(accepts(zod, ok)) << ok;
  for (const char* bad : {"9007199254740992", "-9007199254740992", "1.5", "1e3"})
    EXPECT_FALSE(accepts(zod, bad)) << bad;
  // pydantic's Field(ge=1, le=12) on an int; a fractional bound on an integer rounds inward.
  auto month = schema(R"({"type": "integer", "minimum": 1, "maximum": 12})");
  for (const char* ok : {"1", "9", "10", "12"}) EXPECT_TRUE(accepts(month, ok)) << ok;
  for (const char* bad : {"0", "13", "-1", "01", "100"}) EXPECT_FALSE(accepts(month, bad)) << bad;
  auto inward = schema(R"({"type": "integer", "minimum": 0.5, "maximum": 2.5})");
  EXPECT_FALSE(accepts(inward, "0"));
  EXPECT_TRUE(accepts(inward, "1"));
  EXPECT_TRUE(accepts(inward, "2"));
  EXPECT_FALSE(accepts(inward, "3"));
  // Exclusive bounds: the number form (draft 6 on) and draft 4's booleans beside minimum/maximum.
  auto positive = schema(R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})");
  for (const char* ok : {"0.5", "0.001", "0.999"}) EXPECT_TRUE(accepts(positive, ok)) << ok;
  for (const char* bad : {"0", "0.0", "1", "1.0", "-0.5", "2"}) EXPECT_FALSE(accepts(positive, bad)) << bad;
  auto draft4 = schema(R"({"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 3,
                           "exclusiveMaximum": false})");
  EXPECT_FALSE(accepts(draft4, "0"));
  EXPECT_TRUE(accepts(draft4, "1"));
  EXPECT_TRUE(accepts(draft4, "3"));
  // The tighter of minimum and exclusiveMinimum; decimal bounds compared exactly (0.1 is 0.1).
  auto tight = schema(R"({"type": "number", "minimum": 0.1, "exclusiveMinimum": 0.1, "maximum": 0.3})");
  EXPECT_FALSE(accepts(tight, "0.1"));
  EXPECT_TRUE(accepts(tight, "0.10001"));
  EXPECT_TRUE(accepts(tight, "0.3"));
  EXPECT_FALSE(accepts(tight, "0.30001"));
  // Bounds constrain numbers only; other types pass; an empty range leaves the other types.
  auto mixed = schema(R"({"type": ["integer", "string"], "minimum": 5, "maximum": 4})");
  EXPECT_FALSE(accepts(mixed, "4"));
  EXPECT_FALSE(accepts(mixed, "5"));
  EXPECT_TRUE(accepts(mixed, R"("x")"));
  // enum values filtered by the bounds beside them.
  auto values = schema(R"({"enum": [1, 5, 10, "a"], "minimum": 3, "exclusiveMaximum": 10})");
  EXPECT_FALSE(accepts(values, "1"));
  EXPECT_TRUE(accepts(values, "5"));
  EXPECT_FALSE(accepts(values, "10"));
  EXPECT_TRUE(accepts(values, R"("a")"));
  EXPECT_EQ(refusal(R"({"type": "number", "minimum": "3"})"), "minimum");
  EXPECT_EQ(refusal(R"({"type": "number", "maximum": 1e300})"),
            "maximum");  // 301 digits: refused, not rounded
}

TEST(JsonSchema, UnknownKeywordsAreIgnoredAndKnownOnesCompiledOrRefused) {
  // Keywords no draft defines constrain nothing (Kubernetes' and OpenAPI's extensions).
  auto g = schema(R"({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "nullable": true,
                      "properties": {"a": {"type": "string", "x-order": 1, "readonly": true}}, "required": ["a"]})");
  EXPECT_TRUE(accepts(g, R"({"a":"x"})"));
  EXPECT_FALSE(accepts(g, R"({"a":1})"));
  EXPECT_FALSE(accepts(g, "null"));  // "nullable" is OpenAPI's, not JSON Schema's: no null
  // The empty name is no keyword either (a fuzzer's find: it was refused with an empty field).
  EXPECT_EQ(refusal(R"({"": [1], "type": "null"})"), "");
  EXPECT_TRUE(accepts(schema(R"({"": [1], "type": "null"})"), "null"));
  // Draft 4's id at the root is an identifier, as $id.
  EXPECT_TRUE(accepts(schema(R"({"id": "http://example.com/s.json", "type": "boolean"})"), "true"));
  // Keywords a draft defines, that constrain and that the grammar does not enforce: refused.
  const std::pair<const char*, const char*> refused[] = {{"unevaluatedProperties", "false"},
                                                         {"not", "{\"maxLength\": 1}"},
                                                         {"if", "{}"},
                                                         {"contentMediaType", "\"application/json\""}};
  for (const auto& [keyword, value] : refused) {
    EXPECT_EQ(refusal("{\"" + std::string(keyword) + "\": " + value + "}"), keyword);
  }
  EXPECT_EQ(refusal(R"({"properties": {"a": {"id": "a.json", "type": "string"}}})"), "id");
}

TEST(JsonSchema, StringsFollowRfc8259) {
  auto g = schema(R"({"type": "string"})");
  for (const char* ok : {R"("")", R"("a b")", R"("\"\\\/\b\f\n\r\t")", R"("\u00e9\u00E9")",
                         R"("\ud83d\ude00")", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""}) {
    EXPECT_TRUE(accepts(g, ok)) << ok;
  }
  for (const std::string& bad :
       {std::string("\"a\nb\""), std::string("\"\t\""), std::string("\"a\\x\""), std::string("\"\\u12\""),
        std::string("\"\\ud800\""), std::string("\"\\udc00\\ud800\""), std::string("\"\xff\""),
        std::string("\"\xc0\xaf\""), std::string("\"\xed\xa0\x80\""), std::string("\"a"),
        std::string("'a'")}) {
    EXPECT_FALSE(accepts(g, bad)) << bad;
  }
}

TEST(JsonSchema, LengthsCountCodePoints) {
  auto g = schema(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_FALSE(accepts(g, R"("a")"));
  EXPECT_TRUE(accepts(g, R"("ab")"));
  EXPECT_TRUE(accepts(g, R"("abc")"));
  EXPECT_FALSE(accepts(g, R"("abcd")"));
  EXPECT_TRUE(accepts(g, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""));  // 3 code points, 9 bytes
  EXPECT_TRUE(accepts(g, R"("\ud83d\ude00\n")"));                       // a pair is one code point
  EXPECT_FALSE(accepts(g, R"("\ud83d\ude00\n\t\"")"));
  EXPECT_TRUE(accepts(schema(R"({"type": "string", "maxLength": 0})"), R"("")"));
  // minLength > maxLength: no string, and nothing else is allowed: a schema of no value is
  // refused (no answer could be written); as a branch it is a branch of nothing.
  EXPECT_EQ(refusal(R"({"type": "string", "minLength": 3, "maxLength": 2})"), "schema");
  auto none = schema(R"({"anyOf": [{"type": "string", "minLength": 3, "maxLength": 2}, {"type": "null"}]})");
  EXPECT_FALSE(accepts(none, R"("ab")"));
  EXPECT_FALSE(accepts(none, R"("abc")"));
  EXPECT_TRUE(accepts(none, "null"));
  EXPECT_EQ(refusal(R"({"minLength": -1})"), "minLength");
  EXPECT_EQ(refusal(R"({"maxLength": 1.5})"), "maxLength");
}

TEST(JsonSchema, PatternSearchesTheDecodedString) {
  auto anchored = schema(R"({"type": "string", "pattern": "^[a-c]+$"})");
  EXPECT_TRUE(accepts(anchored, R"("abc")"));
  EXPECT_TRUE(accepts(anchored, R"("a\u0062c")"));  // b written as an escape
  EXPECT_FALSE(accepts(anchored, R"("abd")"));
  EXPECT_FALSE(accepts(anchored, R"("")"));
  auto search = schema(R"({"type": "string", "pattern": "b+"})");
  EXPECT_TRUE(accepts(search, R"("abba")"));
  EXPECT_FALSE(accepts(search, R"("aca")"));
  // The decoded string is what matches: a quote, a backslash and a newline.
  auto quote = schema(R"({"type": "string", "pattern": "^\"\\\\\n$"})");
  EXPECT_TRUE(accepts(quote, R"("\"\\\n")"));
  EXPECT_TRUE(accepts(quote, R"("\u0022\u005c\u000A")"));
  EXPECT_FALSE(accepts(quote, R"("\"\\n")"));
  auto digits = schema(R"({"pattern": "^[0-9]{2}$"})");  // no type: non-strings pass
  EXPECT_TRUE(accepts(digits, R"("42")"));
  EXPECT_FALSE(accepts(digits, R"("4")"));
  EXPECT_TRUE(accepts(digits, "7"));
  EXPECT_EQ(refusal(R"({"type": "string", "pattern": "(a)\\1"})"), "pattern");
}

TEST(JsonSchema, PatternFormatAndLengthsTogetherAdmitWhatAllThreeAdmit) {
  // Lengths count decoded code points, whatever the encoding.
  auto short_a = schema(R"({"type": "string", "pattern": "a", "minLength": 2, "maxLength": 3})");
  for (const char* ok : {R"("xa")", R"("xax")", R"("ab")", R"("ééa")"})
    EXPECT_TRUE(accepts(short_a, ok)) << ok;
  for (const char* bad : {R"("a")", R"("xxxa")", R"("bbb")", R"("")", R"("bbb")"})
    EXPECT_FALSE(accepts(short_a, bad)) << bad;
  auto short_uri = schema(R"({"type": "string", "format": "uri", "maxLength": 10, "pattern": "^https?:"})");
  for (const char* ok : {R"("http://a")", R"("https://ab")"}) EXPECT_TRUE(accepts(short_uri, ok)) << ok;
  for (const char* bad : {R"("http://abcdef")", R"("ftp://a")", R"("http:// a")"})
    EXPECT_FALSE(accepts(short_uri, bad)) << bad;
  // Three constraints no string meets together: nothing.
  EXPECT_EQ(refusal(R"({"type": "string", "format": "date", "maxLength": 9})"), "schema");
  EXPECT_EQ(refusal(R"({"type": "string", "pattern": "^[0-9]+$", "minLength": 2, "maxLength": 1})"),
            "schema");
}

TEST(JsonSchema, Formats) {
  auto date = schema(R"({"type": "string", "format": "date"})");
  for (const char* ok : {"2024-02-29", "2000-02-29", "1999-12-31", "2023-04-30"}) {
    EXPECT_TRUE(accepts(date, std::string("\"") + ok + "\"")) << ok;
  }
  for (const char* bad : {"2023-02-29", "1900-02-29", "2023-04-31", "2023-13-01", "2023-00-10", "2023-1-01",
                          "06/19/1963", "2013-350"}) {
    EXPECT_FALSE(accepts(date, std::string("\"") + bad + "\"")) << bad;
  }
  auto time = schema(R"({"type": "string", "format": "time"})");
  for (const char* ok : {"08:30:06Z", "23:59:59.999+05:30", "00:00:00z", "23:59:60Z", "15:59:60-08:00"}) {
    EXPECT_TRUE(accepts(time, std::string("\"") + ok + "\"")) << ok;
  }
  for (const char* bad : {"24:00:00Z", "08:60:00Z", "08:30:06", "08:30:06 PST", "12:59:60Z", "01:01:01,1111",
                          "08:30:06+24:00"}) {
    EXPECT_FALSE(accepts(time, std::string("\"") + bad + "\"")) << bad;
  }
  auto dt = schema(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(accepts(dt, R"("1963-06-19T08:30:06.283185Z")"));
  EXPECT_TRUE(accepts(dt, R"("1963-06-19t08:30:06z")"));
  EXPECT_FALSE(accepts(dt, R"("1990-02-31T15:59:60.123-08:00")"));
  EXPECT_FALSE(accepts(dt, R"("1963-06-19 08:30:06Z")"));
  auto email = schema(R"({"type": "string", "format": "email"})");
  for (const char* ok : {"joe.bloggs@example.com", "a+b@x.co", "x_y@sub.example.org"}) {
    EXPECT_TRUE(accepts(email, std::string("\"") + ok + "\"")) << ok;
  }
  for (const char* bad :
       {"2962", "a@b", "a..b@x.com", ".a@x.com", "a@-x.com", "a@x-.com", "a b@x.com", "@x.com"}) {
    EXPECT_FALSE(accepts(email, std::string("\"") + bad + "\"")) << bad;
  }
  auto uuid = schema(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(accepts(uuid, R"("123e4567-e89b-12d3-A456-426614174000")"));
  EXPECT_FALSE(accepts(uuid, R"("123e4567e89b12d3a456426614174000")"));
  EXPECT_FALSE(accepts(uuid, R"("123e4567-e89b-12d3-a456-42661417400g")"));
  auto ipv4 = schema(R"({"type": "string", "format": "ipv4"})");
  for (const char* ok : {"192.168.0.1", "0.0.0.0", "255.255.255.255"})
    EXPECT_TRUE(accepts(ipv4, std::string("\"") + ok + "\"")) << ok;
  for (const char* bad : {"256.0.0.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1.2.3.a"})
    EXPECT_FALSE(accepts(ipv4, std::string("\"") + bad + "\"")) << bad;
  auto ipv6 = schema(R"({"type": "string", "format": "ipv6"})");
  for (const char* ok : {"::", "::1", "1::", "fe80::1:2", "2001:db8:0:0:0:0:2:1", "::ffff:192.0.2.128",
                         "1:2:3:4:5:6:7::", "1:2:3:4:5:6::8", "A:b:C:d:E:f:0:1"})
    EXPECT_TRUE(accepts(ipv6, std::string("\"") + ok + "\"")) << ok;
  for (const char* bad :
       {":::", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "1:2:3:4:5:6:7", "::1.2.3", "fe80::1%eth0", ":1::"})
    EXPECT_FALSE(accepts(ipv6, std::string("\"") + bad + "\"")) << bad;
  auto uri = schema(R"({"type": "string", "format": "uri"})");
  auto uri_ref = schema(R"({"type": "string", "format": "uri-reference"})");
  for (const char* ok :
       {"http://example.com/a/b?q=1#top", "urn:isbn:0451450523", "mailto:joe@example.com",
        "http://[2001:db8::7]:8080/", "ftp://user:pw@10.0.0.1:21/%20x", "file:///etc/hosts"}) {
    EXPECT_TRUE(accepts(uri, std::string("\"") + ok + "\"")) << ok;
    EXPECT_TRUE(accepts(uri_ref, std::string("\"") + ok + "\"")) << ok;
  }
  for (const char* rel : {"", "/a/b", "a/b?x", "#frag", "//host/p", "../x"}) {
    EXPECT_FALSE(accepts(uri, std::string("\"") + rel + "\"")) << rel;
    EXPECT_TRUE(accepts(uri_ref, std::string("\"") + rel + "\"")) << rel;
  }
  for (const char* bad : {"http://a b", "http://x/%zz", "1http://x", "http://[::1/", "a:b:c/{x}", ":x"}) {
    EXPECT_FALSE(accepts(uri, std::string("\"") + bad + "\"")) << bad;
  }
  EXPECT_FALSE(accepts(uri_ref, R"(":x")"));  // a first segment with ':' would be a scheme
  auto pointer = schema(R"({"type": "string", "format": "json-pointer"})");
  for (const char* ok : {"", "/", "/a~0b/c~1d", "/0/x y"})
    EXPECT_TRUE(accepts(pointer, std::string("\"") + ok + "\"")) << ok;
  for (const char* bad : {"a", "/a~2", "/~"})
    EXPECT_FALSE(accepts(pointer, std::string("\"") + bad + "\"")) << bad;
  auto relative = schema(R"({"type": "string", "format": "relative-json-pointer"})");
  for (const char* ok : {"0", "1#", "12/a/b"})
    EXPECT_TRUE(accepts(relative, std::string("\"") + ok + "\"")) << ok;
  for (const char* bad : {"", "01", "/a", "-1", "1##"})
    EXPECT_FALSE(accepts(relative, std::string("\"") + bad + "\"")) << bad;
  auto duration = schema(R"({"type": "string", "format": "duration"})");
  for (const char* ok : {"P4DT12H30M5S", "P1Y2M", "PT36H", "P3W", "PT1M30S", "P1D"})
    EXPECT_TRUE(accepts(duration, std::string("\"") + ok + "\"")) << ok;
  for (const char* bad : {"P", "PT", "P1S", "P1W2D", "PT1H2S", "1D", "P1.5D", "P1M1Y"})
    EXPECT_FALSE(accepts(duration, std::string("\"") + bad + "\"")) << bad;
  auto templ = schema(R"({"type": "string", "format": "uri-template"})");
  for (const char* ok : {"https://example.com/{id}", "/users/{user}/repos{?q,page}", "{+path:6}/x",
                         "{#frag*}", "http://x/{a.b}", "", "café/{x}"})
    EXPECT_TRUE(accepts(templ, std::string("\"") + ok + "\"")) << ok;
  for (const char* bad : {"{", "{}", "{a b}", "a b", "{a:0}", "{a:10000}", "x{a}}", "<x>", "{a..b}", "100%"})
    EXPECT_FALSE(accepts(templ, std::string("\"") + bad + "\"")) << bad;
  auto iri = schema(R"({"type": "string", "format": "iri"})");
  auto iri_ref = schema(R"({"type": "string", "format": "iri-reference"})");
  for (const char* ok : {"http://ex.com/ü", "http://é.com:80/p?q#f", "urn:x", "http://[::1]/"}) {
    EXPECT_TRUE(accepts(iri, std::string("\"") + ok + "\"")) << ok;
    EXPECT_TRUE(accepts(iri_ref, std::string("\"") + ok + "\"")) << ok;
  }
  EXPECT_FALSE(accepts(iri, "\"ü/x\""));
  EXPECT_TRUE(accepts(iri_ref, "\"ü/x\""));
  EXPECT_FALSE(accepts(iri_ref, R"("a b")"));
  EXPECT_FALSE(accepts(uri, "\"http://ex.com/ü\""));  // a URI stays ASCII
  // Formats no draft defines are no assertion (OpenAPI's, an editor's); known ones not enforced are refused.
  auto custom = schema(R"({"type": "string", "format": "textarea", "maxLength": 3})");
  EXPECT_TRUE(accepts(custom, R"("abc")"));
  EXPECT_FALSE(accepts(custom, R"("abcd")"));
  EXPECT_TRUE(accepts(schema(R"({"type": "integer", "format": "int64"})"), "12"));
  EXPECT_EQ(refusal(R"({"type": "string", "format": "hostname"})"), "format");
  EXPECT_EQ(refusal(R"({"type": "string", "format": "regex"})"), "format");
}

TEST(JsonSchema, EnumAndConst) {
  auto g = schema(R"({"enum": ["red", 1, null, {"b": 1, "a": [true]}]})");
  EXPECT_TRUE(accepts(g, R"("red")"));
  EXPECT_TRUE(accepts(g, "1"));
  EXPECT_FALSE(accepts(g, "1.0"));  // equal to 1, and written as the integer
  // A schema's integral float is written as the integer too.
  auto integral = schema(R"({"enum": [2.0, -0.0, 2.5]})");
  EXPECT_TRUE(accepts(integral, "2"));
  EXPECT_FALSE(accepts(integral, "2.0"));
  EXPECT_TRUE(accepts(integral, "0"));
  EXPECT_FALSE(accepts(integral, "-0.0"));
  EXPECT_TRUE(accepts(integral, "2.5"));
  EXPECT_TRUE(accepts(g, "null"));
  EXPECT_TRUE(accepts(g, R"({"b":1,"a":[true]})"));
  EXPECT_FALSE(accepts(g, R"("blue")"));
  EXPECT_FALSE(accepts(g, "2"));
  EXPECT_FALSE(accepts(g, R"({"b":1})"));
  // An object value's members in any order, each once; whitespace where max_whitespace allows.
  auto obj = schema(R"({"const": {"a": 1, "b": [1, {"c": null, "d": true}]}})", JsonSchemaOptions{1});
  for (const char* ok : {R"({"a":1,"b":[1,{"c":null,"d":true}]})", R"({"b":[1,{"d":true,"c":null}],"a":1})",
                         R"({ "b" : [ 1 , { "d" : true , "c" : null } ] , "a" : 1 })"})
    EXPECT_TRUE(accepts(obj, ok)) << ok;
  for (const char* bad :
       {R"({"a":1})", R"({"a":1,"b":[{"c":null,"d":true},1]})",
        R"({"a":1,"a":1,"b":[1,{"c":null,"d":true}]})", R"({"a":1,"b":[1,{"c":null,"d":true}],"e":0})",
        R"({  "a":1,"b":[1,{"c":null,"d":true}]})"})
    EXPECT_FALSE(accepts(obj, bad)) << bad;
  auto c = schema(R"({"const": "a\"b"})");
  EXPECT_TRUE(accepts(c, R"("a\"b")"));
  EXPECT_FALSE(accepts(c, R"("ab")"));
  // Sibling keywords filter the values.
  auto typed = schema(R"({"type": "string", "enum": ["x", 2, "yy"], "maxLength": 1})");
  EXPECT_TRUE(accepts(typed, R"("x")"));
  EXPECT_FALSE(accepts(typed, "2"));
  EXPECT_FALSE(accepts(typed, R"("yy")"));
  EXPECT_EQ(refusal(R"({"const": 1, "enum": [2, 3]})"), "schema") << "no value";
  // pattern and format beside enum keep the values they admit.
  auto kept =
      schema(R"({"enum": ["ab", "b", "2020-01-01", "x"], "pattern": "^[a-z0-9-]+$", "format": "date"})");
  EXPECT_TRUE(accepts(kept, R"("2020-01-01")"));
  for (const char* bad : {R"("ab")", R"("b")", R"("x")"}) EXPECT_FALSE(accepts(kept, bad)) << bad;
}

TEST(JsonSchema, PropertiesInSchemaOrder) {
  const char* text =
      R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                         "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["age"]})";
  auto g = schema(text);
  EXPECT_TRUE(accepts(g, R"({"age":3})"));
  EXPECT_TRUE(accepts(g, R"({"name":"x","age":3})"));
  EXPECT_TRUE(accepts(g, R"({"name":"x","age":3,"tags":["a","b"]})"));
  EXPECT_TRUE(accepts(g, R"({"age":3,"tags":[]})"));
  EXPECT_FALSE(accepts(g, R"({"name":"x"})"));          // age is required
  EXPECT_FALSE(accepts(g, R"({"age":3,"name":"x"})"));  // valid JSON-Schema-wise: out of order
  EXPECT_FALSE(accepts(g, R"({"age":3,"age":3})"));     // a duplicate
  EXPECT_FALSE(accepts(g, R"({"age":3,"extra":1})"));   // strict: no additional members
  EXPECT_FALSE(accepts(g, R"({"age":"3"})"));
  EXPECT_FALSE(accepts(g, R"({,"age":3})"));
  EXPECT_FALSE(accepts(g, R"({"age":3,})"));
  // Not strict: JSON Schema's default, additional members of any value after the declared ones.
  JsonSchemaOptions loose;
  loose.strict = false;
  auto l = schema(text, loose);
  EXPECT_TRUE(accepts(l, R"({"age":3,"extra":{"x":[1]}})"));
  EXPECT_TRUE(accepts(l, R"({"extra":1,"more":2})") == false);  // age still required
  EXPECT_TRUE(accepts(l, R"({"age":3,"extra":1,"more":2})"));
  EXPECT_FALSE(accepts(l, R"({"age":3,"name":"x"})"));       // a declared name is not an additional one
  EXPECT_FALSE(accepts(l, R"({"age":3,"n\u0061me":"x"})"));  // not even when escaped
  EXPECT_FALSE(accepts(l, R"({"age":3,"age":3})"));
  EXPECT_TRUE(accepts(l, R"({"age":3,"nam":1,"names":2,"\u00e9":3})"));
}

TEST(JsonSchema, AdditionalProperties) {
  auto g =
      schema(R"({"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}})");
  EXPECT_TRUE(accepts(g, R"({})"));
  EXPECT_TRUE(accepts(g, R"({"a":1,"b":true,"c":false})"));
  EXPECT_TRUE(accepts(g, R"({"b":true})"));
  EXPECT_FALSE(accepts(g, R"({"b":1})"));
  EXPECT_FALSE(accepts(g, R"({"a":true})"));
  EXPECT_FALSE(accepts(g, R"({"\u0061":true})"));
  EXPECT_TRUE(accepts(g, "3"));                                          // no type: other kinds of value pass
  auto free_form = schema(R"({"type": "object", "required": ["id"]})");  // strict, but no properties
  EXPECT_TRUE(accepts(free_form, R"({"id":{},"x":1})"));
  EXPECT_FALSE(accepts(free_form, R"({"x":1})"));
  auto closed = schema(R"({"type": "object", "properties": {"a": true}, "additionalProperties": false})",
                       JsonSchemaOptions{0, false});
  EXPECT_TRUE(accepts(closed, R"({"a":[]})"));
  EXPECT_FALSE(accepts(closed, R"({"b":1})"));
  // A required name that properties does not declare takes additionalProperties' schema.
  auto req = schema(R"({"type": "object", "required": ["id"], "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(accepts(req, R"({"id":1})"));
  EXPECT_FALSE(accepts(req, R"({"id":"1"})"));
  EXPECT_FALSE(accepts(req, R"({})"));
  // strict: nothing
  EXPECT_EQ(refusal(R"({"type": "object", "properties": {}, "required": ["id"]})"), "schema");
  // zod 4's record: names of any string, values by additionalProperties.
  auto record = schema(R"({"type": "object", "propertyNames": {"type": "string"},
                           "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(accepts(record, R"({"a":1,"b c":-2})"));
  EXPECT_TRUE(accepts(record, R"({})"));
  EXPECT_FALSE(accepts(record, R"({"a":"x"})"));
  // propertyNames that constrain: the additional members' names are its instances; a declared
  // name it refuses cannot be a member; beside declared names with additional members, refused.
  auto short_names =
      schema(R"({"type": "object", "propertyNames": {"maxLength": 2}, "additionalProperties": true})");
  EXPECT_TRUE(accepts(short_names, R"({"ab":1,"\u00e9":2})"));
  EXPECT_FALSE(accepts(short_names, R"({"abc":1})"));
  auto declared = schema(
      R"({"type": "object", "properties": {"ok": true, "toolong": true}, "propertyNames": {"maxLength": 2},
                             "additionalProperties": false})");
  EXPECT_TRUE(accepts(declared, R"({"ok":1})"));
  EXPECT_FALSE(accepts(declared, R"({"ok":1,"toolong":2})"));
  EXPECT_TRUE(accepts(schema(R"({"type": "object", "propertyNames": false})"), "{}"));
  EXPECT_FALSE(accepts(schema(R"({"type": "object", "propertyNames": false})"), R"({"a":1})"));
  EXPECT_EQ(
      refusal(
          R"({"properties": {"a": true}, "propertyNames": {"maxLength": 3}, "additionalProperties": true})"),
      "propertyNames");
  auto named = schema(R"({"properties": {"ab": true, "b": true}, "propertyNames": {"pattern": "a"},
      "additionalProperties": false})");
  EXPECT_TRUE(accepts(named, R"({"ab":1})"));
  EXPECT_FALSE(accepts(named, R"({"b":1})"));
}

// Every object over the names a, b, c (declared in that order) and x, y (additional), members in
// that order: accepted exactly when `expected` says it satisfies the schema.
void expect_objects_decided(const std::string& text,
                            const std::function<bool(const std::string&)>& expected) {
  auto g = schema(text, JsonSchemaOptions{0, false});
  const std::string names = "abcxy";
  for (unsigned set = 0; set < 32; ++set) {
    std::string members, instance = "{";
    for (size_t i = 0; i < names.size(); ++i) {
      if (!(set & (1u << i))) continue;
      members += names[i];
      instance += std::string(instance.size() > 1 ? "," : "") + "\"" + names[i] + "\":1";
    }
    instance += "}";
    EXPECT_EQ(accepts(g, instance), expected(members)) << text << " on " << instance;
  }
}

TEST(JsonSchema, PatternPropertiesApplyToEveryNameTheyMatchAndReplaceAdditionalProperties) {
  auto g = schema(R"({"properties": {"ab": {"type": "integer"}}, "patternProperties": {"^a": {"minimum": 1},
      "b$": {"type": "integer"}}, "additionalProperties": {"type": "string"}})",
                  JsonSchemaOptions{0, false});
  // Names as written (encodings included) with the patterns they match; values 0, 2, "s", 1.5.
  struct Name {
    const char* text;
    bool starts_a, ends_b, declared;
  };
  const Name names[] = {{R"("ab")", true, true, true},   {R"("a")", true, false, false},
                        {R"("ax")", true, false, false}, {R"("ac")", true, false, false},
                        {R"("b")", false, true, false},  {R"("xb")", false, true, false},
                        {R"("c")", false, false, false}, {R"("")", false, false, false}};
  const char* values[] = {"0", "2", R"("s")", "1.5"};
  for (const auto& n : names) {
    for (int v = 0; v < 4; ++v) {
      const bool integer = v <= 1, at_least_1 = v != 0, string = v == 2;
      bool ok = true;
      if (n.declared) ok = ok && integer;
      if (n.starts_a) ok = ok && at_least_1;
      if (n.ends_b) ok = ok && integer;
      if (!n.declared && !n.starts_a && !n.ends_b) ok = string;
      const std::string text = std::string("{") + n.text + ":" + values[v] + "}";
      EXPECT_EQ(accepts(g, text), ok) << text;
    }
  }
  EXPECT_TRUE(accepts(g, R"({"ab":3,"c":"s","a":5,"xb":0})"));
  EXPECT_FALSE(accepts(g, R"({"ab":3,"c":"s","a":0})"));
  // Closed to everything the patterns do not match; a declared name's value still obeys them.
  auto closed =
      schema(R"({"properties": {"x-id": {"type": "string"}}, "patternProperties": {"^x-": {"maxLength": 2}},
      "additionalProperties": false})");
  for (const char* ok : {R"({"x-a":"ab"})", R"({"x-b":"c"})", R"({"x-id":"ab","x-":""})"})
    EXPECT_TRUE(accepts(closed, ok)) << ok;
  for (const char* bad :
       {R"({"y":"a"})", R"({"x-a":"abc"})", R"({"x-id":"abc"})", R"({"x-id":1})", R"({"X-a":"a"})"})
    EXPECT_FALSE(accepts(closed, bad)) << bad;
  EXPECT_EQ(refusal(R"({"patternProperties": {"(a)\\1": true}})"), "patternProperties");
  EXPECT_EQ(refusal(R"({"patternProperties": {"a": true}, "propertyNames": {"maxLength": 3}})"),
            "patternProperties");
}

TEST(JsonSchema, MemberCountsAndDependenciesAdmitExactlyTheObjectsThatSatisfyThem) {
  const std::string props = R"("properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
      "c": {"type": "integer"}}, "additionalProperties": {"type": "integer"})";
  auto has = [](const std::string& m, char n) { return m.find(n) != std::string::npos; };
  expect_objects_decided("{" + props + R"(, "minProperties": 2, "maxProperties": 3})",
                         [](const std::string& m) { return m.size() >= 2 && m.size() <= 3; });
  expect_objects_decided("{" + props + R"(, "maxProperties": 0})",
                         [](const std::string& m) { return m.empty(); });
  // A trigger before and after what it needs, and an additional name as a trigger.
  expect_objects_decided("{" + props + R"(, "dependentRequired": {"c": ["a"], "a": ["c"], "x": ["b"]}})",
                         [&](const std::string& m) {
                           return (!has(m, 'c') || has(m, 'a')) && (!has(m, 'a') || has(m, 'c')) &&
                                  (!has(m, 'x') || has(m, 'b'));
                         });
  // Draft 4–7's dependencies: names, or a schema of required names, needing additional names.
  expect_objects_decided(
      R"({"$schema": "http://json-schema.org/draft-07/schema#", )" + props +
          R"(, "dependencies": {"b": ["x"], "a": {"required": ["y"]}, "c": {}}})",
      [&](const std::string& m) { return (!has(m, 'b') || has(m, 'x')) && (!has(m, 'a') || has(m, 'y')); });
  // Together with required, a closed object and the counts.
  expect_objects_decided(R"({"properties": {"a": true, "b": true, "c": true}, "required": ["b"],
      "additionalProperties": false, "dependentRequired": {"b": ["c"], "a": ["x"]}, "maxProperties": 2})",
                         [&](const std::string& m) { return m == "bc"; });
  // A count no object meets admits nothing; a schema of dependencies that is not only names is refused.
  EXPECT_EQ(refusal(R"({"type": "object", "minProperties": 3, "maxProperties": 2})"), "schema");
  EXPECT_EQ(refusal(R"({"type": "object", "properties": {"a": true}, "additionalProperties": false,
      "minProperties": 2})"),
            "schema");
  EXPECT_EQ(refusal(R"({"dependencies": {"a": {"properties": {"b": {"type": "string"}}}}})"), "dependencies");
}

// Every array of up to `max_len` elements drawn from `values` (JSON texts): accepted exactly when
// `expected` says the array (as element indices into `values`) satisfies the schema.
void expect_arrays_decided(const std::string& text, const std::vector<std::string>& values, size_t max_len,
                           const std::function<bool(const std::vector<size_t>&)>& expected) {
  auto g = schema(text);
  std::vector<size_t> picks;
  std::function<void()> walk = [&]() {
    std::string instance = "[";
    for (size_t i = 0; i < picks.size(); ++i) instance += (i ? "," : "") + values[picks[i]];
    instance += "]";
    EXPECT_EQ(accepts(g, instance), expected(picks)) << text << " on " << instance;
    if (picks.size() == max_len) return;
    for (size_t v = 0; v < values.size(); ++v) {
      picks.push_back(v);
      walk();
      picks.pop_back();
    }
  };
  walk();
}

TEST(JsonSchema, UniqueItemsAdmitExactlyTheArraysOfDistinctValues) {
  auto distinct = [](const std::vector<size_t>& a) {
    for (size_t i = 0; i < a.size(); ++i)
      for (size_t j = i + 1; j < a.size(); ++j)
        if (a[i] == a[j]) return false;
    return true;
  };
  expect_arrays_decided(R"({"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": true,
      "minItems": 1, "maxItems": 2})",
                        {R"("a")", R"("b")", R"("c")", R"("d")"}, 4, [&](const std::vector<size_t>& a) {
                          return distinct(a) && a.size() >= 1 && a.size() <= 2 &&
                                 std::none_of(a.begin(), a.end(), [](size_t v) { return v == 3; });
                        });
  // Null and the booleans, by type; unbounded above (at most 3 distinct values anyway).
  expect_arrays_decided(R"({"type": "array", "items": {"type": ["boolean", "null"]}, "uniqueItems": true})",
                        {"null", "true", "false", "0"}, 4, [&](const std::vector<size_t>& a) {
                          return distinct(a) &&
                                 std::none_of(a.begin(), a.end(), [](size_t v) { return v == 3; });
                        });
  // 1 and 1.0 are one value; an enum value its siblings refuse is none.
  auto ints =
      schema(R"({"type": "array", "items": {"enum": [1, 1.0, 2, 3], "maximum": 2}, "uniqueItems": true})");
  EXPECT_TRUE(accepts(ints, "[2,1]"));
  EXPECT_FALSE(accepts(ints, "[1,1]"));
  EXPECT_FALSE(accepts(ints, "[3]"));
  EXPECT_FALSE(accepts(ints, "[1,2,1]"));
  // At most one element is always unique; more distinct values than the domain holds: nothing.
  EXPECT_TRUE(
      accepts(schema(R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 1})"),
              R"(["x"])"));
  EXPECT_EQ(refusal(R"({"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": true, "minItems": 3})"),
            "schema");
  EXPECT_TRUE(
      accepts(schema(R"({"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": false})"), "[1,1,1]"));
  // Values without a small finite domain cannot be kept distinct by a grammar: refused.
  EXPECT_EQ(refusal(R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true})"), "uniqueItems");
  EXPECT_EQ(refusal(R"({"type": "array", "uniqueItems": true})"), "uniqueItems");
}

TEST(JsonSchema, ContainsAdmitsExactlyTheArraysWithEnoughMatches) {
  const std::vector<std::string> values = {"0", "1", "2", "3", R"("x")"};
  auto count = [&](const std::vector<size_t>& a, auto pred) {
    return static_cast<size_t>(std::count_if(a.begin(), a.end(), pred));
  };
  auto is_int = [](size_t v) { return v <= 3; };
  // Bounded: items integers, at least two of them ≥ 2, one to four elements.
  expect_arrays_decided(R"({"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 2},
      "minContains": 2, "minItems": 1, "maxItems": 4})",
                        values, 5, [&](const std::vector<size_t>& a) {
                          return count(a, is_int) == a.size() &&
                                 count(a, [](size_t v) { return v == 2 || v == 3; }) >= 2 && a.size() >= 1 &&
                                 a.size() <= 4;
                        });
  // Unbounded: two 1s anywhere, among any values.
  expect_arrays_decided(R"({"type": "array", "contains": {"const": 1}, "minContains": 2, "minItems": 3})",
                        values, 4, [&](const std::vector<size_t>& a) {
                          return count(a, [](size_t v) { return v == 1; }) >= 2 && a.size() >= 3;
                        });
  // One match by default; an item schema the match must satisfy too.
  expect_arrays_decided(
      R"({"type": "array", "items": {"maximum": 2}, "contains": {"type": "integer", "minimum": 1}})", values,
      4, [&](const std::vector<size_t>& a) {
        return count(a, [](size_t v) { return v == 3; }) == 0 &&
               count(a, [](size_t v) { return v == 1 || v == 2; }) >= 1;
      });
  // minContains 0 asks for nothing; maxContains (which needs the items that do not match) is refused.
  EXPECT_TRUE(accepts(schema(R"({"type": "array", "contains": {"const": 1}, "minContains": 0})"), "[]"));
  EXPECT_EQ(refusal(R"({"type": "array", "contains": {"const": 1}, "maxContains": 2})"), "maxContains");
  EXPECT_EQ(refusal(R"({"type": "array", "items": {"const": 0}, "contains": {"const": 1}})"), "schema");
}

TEST(JsonSchema, Arrays) {
  auto g = schema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})");
  EXPECT_FALSE(accepts(g, "[]"));
  EXPECT_TRUE(accepts(g, "[1]"));
  EXPECT_TRUE(accepts(g, "[1,2,3]"));
  EXPECT_FALSE(accepts(g, "[1,2,3,4]"));
  EXPECT_FALSE(accepts(g, "[1,\"2\"]"));
  EXPECT_FALSE(accepts(g, "[1,]"));
  auto tuple = schema(R"({"prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": false})");
  EXPECT_TRUE(accepts(tuple, "[]"));
  EXPECT_TRUE(accepts(tuple, R"(["a"])"));
  EXPECT_TRUE(accepts(tuple, R"(["a",true])"));
  EXPECT_FALSE(accepts(tuple, R"(["a",true,1])"));
  EXPECT_FALSE(accepts(tuple, R"([true])"));
  auto open = schema(R"({"prefixItems": [{"const": 0}], "items": {"type": "null"}, "minItems": 3})");
  EXPECT_FALSE(accepts(open, "[0,null]"));
  EXPECT_TRUE(accepts(open, "[0,null,null]"));
  EXPECT_TRUE(accepts(open, "[0,null,null,null,null]"));
  EXPECT_FALSE(accepts(open, "[1,null,null]"));
  auto any = schema(R"({"type": "array"})");
  EXPECT_TRUE(accepts(any, R"([1,"a",[{}],null])"));
  // Draft 4–7 tuples: items as an array is prefixItems, additionalItems the items past it.
  auto draft7 =
      schema(R"({"items": [{"type": "string"}, {"type": "integer"}], "additionalItems": {"type": "null"}})");
  EXPECT_TRUE(accepts(draft7, R"(["a"])"));
  EXPECT_TRUE(accepts(draft7, R"(["a",1,null,null])"));
  EXPECT_FALSE(accepts(draft7, R"([1])"));
  EXPECT_FALSE(accepts(draft7, R"(["a",1,2])"));
  auto closed_tuple = schema(R"({"items": [{"type": "string"}], "additionalItems": false})");
  EXPECT_TRUE(accepts(closed_tuple, R"(["a"])"));
  EXPECT_FALSE(accepts(closed_tuple, R"(["a","b"])"));
  auto ignored = schema(R"({"items": {"type": "integer"}, "additionalItems": false})");
  EXPECT_TRUE(accepts(ignored, "[1,2,3]")) << "additionalItems beside a schema items constrains nothing";
  EXPECT_EQ(refusal(R"({"items": [true], "prefixItems": [true]})"), "items");
  EXPECT_EQ(refusal(R"({"uniqueItems": true})"), "uniqueItems");
  EXPECT_EQ(refusal(R"({"prefixItems": [true], "contains": {"type": "string"}})"), "contains");
}

TEST(JsonSchema, AnyOfAndOneOf) {
  auto g =
      schema(R"({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer"}, {"const": "long"}]})");
  EXPECT_TRUE(accepts(g, R"("a")"));
  EXPECT_TRUE(accepts(g, "12"));
  EXPECT_TRUE(accepts(g, R"("long")"));
  EXPECT_FALSE(accepts(g, R"("ab")"));
  auto one = schema(R"({"oneOf": [{"type": "string"}, {"type": "array"}]})");
  EXPECT_TRUE(accepts(one, R"("a")"));
  EXPECT_TRUE(accepts(one, "[]"));
  EXPECT_FALSE(accepts(one, "1"));
  // A discriminated union: the branches require one property with distinct constants.
  auto tagged = schema(R"({"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
      {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind"]}]})");
  EXPECT_TRUE(accepts(tagged, R"({"kind":"a","x":1})"));
  EXPECT_TRUE(accepts(tagged, R"({"kind":"b","y":"s"})"));
  EXPECT_FALSE(accepts(tagged, R"({"kind":"a","y":"s"})"));
  // Overlapping branches: "exactly one" is not a union; refused.
  EXPECT_EQ(refusal(R"({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]})"), "oneOf");
  EXPECT_EQ(refusal(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})"), "oneOf");
  // Keywords beside a union go into each branch.
  auto beside = schema(R"({"type": "string", "anyOf": [{"maxLength": 1}, {"minLength": 3}]})");
  EXPECT_TRUE(accepts(beside, R"("a")"));
  EXPECT_TRUE(accepts(beside, R"("abc")"));
  EXPECT_FALSE(accepts(beside, R"("ab")"));
  EXPECT_FALSE(accepts(beside, "1"));
  auto either =
      schema(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "anyOf": [{"required": ["a"]}, {"required": ["b"]}]})");
  EXPECT_TRUE(accepts(either, R"({"a":1})"));
  EXPECT_TRUE(accepts(either, R"({"b":1})"));
  EXPECT_TRUE(accepts(either, R"({"a":1,"b":2})"));
  EXPECT_FALSE(accepts(either, R"({})"));
  EXPECT_EQ(refusal(R"({"type": "string", "anyOf": [{"type": "string"}]})"), "anyOf");
  EXPECT_EQ(refusal(R"({"properties": {"a": true}, "anyOf": [{"additionalProperties": false}]})"), "anyOf");
  EXPECT_EQ(refusal(R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})"), "allOf");
  EXPECT_EQ(refusal(R"({"not": {"minLength": 2}})"), "not");
  EXPECT_EQ(refusal(R"({"if": {"type": "string"}, "then": {"maxLength": 2}})"), "if");
}

// not: the types, nulls, booleans and strings it names taken out; anything else refused.
TEST(JsonSchema, NotTakesOutTypesAndScalarValuesExactly) {
  auto not_null = schema(R"({"type": ["string", "null", "integer"], "not": {"type": "null"}})");
  EXPECT_TRUE(accepts(not_null, R"("a")"));
  EXPECT_TRUE(accepts(not_null, "1"));
  EXPECT_FALSE(accepts(not_null, "null"));
  auto not_values =
      schema(R"({"type": ["string", "boolean", "null"], "not": {"enum": ["a", "b\u00e9", true, null]}})");
  EXPECT_TRUE(accepts(not_values, R"("ab")"));
  EXPECT_TRUE(accepts(not_values, R"("")"));
  EXPECT_TRUE(accepts(not_values, "false"));
  EXPECT_FALSE(accepts(not_values, R"("a")"));
  EXPECT_FALSE(accepts(not_values, R"("\u0061")")) << "the same string in another encoding";
  EXPECT_FALSE(accepts(not_values, R"("bé")"));
  EXPECT_FALSE(accepts(not_values, "true"));
  EXPECT_FALSE(accepts(not_values, "null"));
  // Beside enum: the values not excluded.
  auto beside_enum = schema(R"({"enum": ["x", "y", 3], "not": {"const": "x"}})");
  EXPECT_TRUE(accepts(beside_enum, R"("y")"));
  EXPECT_TRUE(accepts(beside_enum, "3"));
  EXPECT_FALSE(accepts(beside_enum, R"("x")"));
  EXPECT_EQ(refusal(R"({"not": true})"), "schema") << "not true: no value";
  EXPECT_EQ(refusal(R"({"type": "number", "not": {"type": "integer"}})"), "not");
  EXPECT_EQ(refusal(R"({"not": {"const": 1}})"), "not");
  EXPECT_EQ(refusal(R"({"type": "string", "maxLength": 3, "not": {"const": "a"}})"), "not");
}

// allOf merged into one schema: what the merged grammar admits is what every branch admits.
// Each single-member object {name: value} over the names and values given: accepted exactly when
// `expected(name, value)`.
void expect_members_decided(const std::string& text, const std::vector<std::string>& names,
                            const std::vector<std::string>& values,
                            const std::function<bool(const std::string&, const std::string&)>& expected) {
  auto g = schema(text, JsonSchemaOptions{0, false});
  for (const auto& n : names) {
    for (const auto& v : values) {
      const std::string instance = "{\"" + n + "\":" + v + "}";
      EXPECT_EQ(accepts(g, instance), expected(n, v)) << text << " on " << instance;
    }
  }
}

TEST(JsonSchema, AllOfMergesPatternPropertiesExactly) {
  const std::vector<std::string> names = {"ab", "ax", "a", "b", "c"},
                                 values = {"1", "3", "6", "2.5", R"("s")"};
  auto number = [](const std::string& v) { return v != R"("s")"; };
  auto integer = [](const std::string& v) { return v == "1" || v == "3" || v == "6"; };
  auto at_least_2 = [&](const std::string& v) { return !number(v) || v != "1"; };
  auto at_most_5 = [&](const std::string& v) { return !number(v) || v != "6"; };
  // Patterns on one side; the other side's additionalProperties goes with them.
  expect_members_decided(R"({"allOf": [{"patternProperties": {"^a": {"type": "integer"}}},
      {"properties": {"b": {"minimum": 2}}, "additionalProperties": {"maximum": 5}}]})",
                         names, values, [&](const std::string& n, const std::string& v) {
                           if (n == "b") return at_least_2(v);
                           if (n[0] == 'a') return integer(v) && at_most_5(v);
                           return at_most_5(v);
                         });
  // Patterns on both sides: every pattern a name matches.
  expect_members_decided(R"({"allOf": [{"patternProperties": {"^a": {"type": "integer"}}},
      {"patternProperties": {"b$": {"minimum": 2}, "^a": {"maximum": 5}}}]})",
                         names, values, [&](const std::string& n, const std::string& v) {
                           bool ok = true;
                           if (n[0] == 'a') ok = ok && integer(v) && at_most_5(v);
                           if (n.back() == 'b') ok = ok && at_least_2(v);
                           return ok;
                         });
  // Not exact as one schema: refused.
  EXPECT_EQ(refusal(R"({"allOf": [{"patternProperties": {"^a": true}, "additionalProperties": false},
      {"patternProperties": {"b": true}}]})"),
            "allOf");
  EXPECT_EQ(refusal(R"({"allOf": [{"patternProperties": {"^a": {"type": "integer"}}},
      {"properties": {"ab": true}, "additionalProperties": false}]})"),
            "allOf");
}

TEST(JsonSchema, AllOfAdmitsExactlyWhatEveryBranchAdmits) {
  // zod's intersection of two objects: members of both, required of both, in the branches' order.
  auto objects = schema(R"({"allOf": [
      {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
      {"type": "object", "properties": {"b": {"type": "string"}, "a": {"minimum": 2}}, "required": ["b"]}]})");
  EXPECT_TRUE(accepts(objects, R"({"a":2,"b":"x"})"));
  EXPECT_FALSE(accepts(objects, R"({"a":1,"b":"x"})")) << "both branches' constraints on a";
  EXPECT_FALSE(accepts(objects, R"({"a":2.5,"b":"x"})"));
  EXPECT_FALSE(accepts(objects, R"({"a":2})")) << "the second branch's required";
  EXPECT_FALSE(accepts(objects, R"({"b":"x"})")) << "the first branch's required";
  // additionalProperties of one branch applies to the members the other names.
  auto closed = schema(R"({"allOf": [{"properties": {"a": true}, "additionalProperties": false},
      {"properties": {"b": true}}]})");
  EXPECT_TRUE(accepts(closed, R"({"a":1})"));
  EXPECT_FALSE(accepts(closed, R"({"b":1})"));
  EXPECT_FALSE(accepts(closed, R"({"a":1,"b":1})"));
  auto typed_extra = schema(R"({"allOf": [{"additionalProperties": {"type": "integer"}},
      {"properties": {"b": {"minimum": 5}}}]})");
  EXPECT_TRUE(accepts(typed_extra, R"({"b":5,"c":1})"));
  EXPECT_FALSE(accepts(typed_extra, R"({"b":5.5})")) << "b is also an additional member of the first";
  EXPECT_FALSE(accepts(typed_extra, R"({"b":4})"));
  // Types, bounds, lengths and enums intersected; a branch that is only a $ref is its target.
  auto numbers =
      schema(R"({"$defs": {"pos": {"exclusiveMinimum": 0}}, "allOf": [{"type": ["number", "string"]},
      {"type": "integer"}, {"maximum": 10}, {"$ref": "#/$defs/pos"}]})");
  EXPECT_TRUE(accepts(numbers, "1"));
  EXPECT_TRUE(accepts(numbers, "10"));
  EXPECT_FALSE(accepts(numbers, "0"));
  EXPECT_FALSE(accepts(numbers, "11"));
  EXPECT_FALSE(accepts(numbers, "1.5"));
  EXPECT_FALSE(accepts(numbers, R"("1")"));
  auto strings =
      schema(R"({"allOf": [{"enum": ["a", "bb", "ccc"]}, {"enum": ["bb", "ccc", "d"]}, {"maxLength": 2}]})");
  EXPECT_TRUE(accepts(strings, R"("bb")"));
  EXPECT_FALSE(accepts(strings, R"("ccc")"));
  EXPECT_FALSE(accepts(strings, R"("a")"));
  // Arrays: each position under both branches.
  auto arrays = schema(R"({"allOf": [{"prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
      {"items": {"maxLength": 1}, "maxItems": 3}]})");
  EXPECT_TRUE(accepts(arrays, R"([1,"a","b"])"));
  EXPECT_FALSE(accepts(arrays, R"([1,"ab"])"));
  EXPECT_FALSE(accepts(arrays, R"([1,"a","b","c"])"));
  // Two unions: every pair; branches that cannot meet admit nothing.
  auto pairs = schema(R"({"allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]},
      {"anyOf": [{"type": "string"}, {"type": "null"}]}]})");
  EXPECT_TRUE(accepts(pairs, R"("s")"));
  EXPECT_FALSE(accepts(pairs, "1"));
  EXPECT_FALSE(accepts(pairs, "null"));
  EXPECT_EQ(
      refusal(
          R"({"properties": {"x": {"allOf": [{"type": "string"}, {"type": "integer"}]}}, "required": ["x"]})"),
      "")
      << "an unsatisfiable member compiles (to no instance)";
  auto never = schema(R"({"anyOf": [{"allOf": [{"const": 1}, {"const": 2}]}, {"type": "null"}]})");
  EXPECT_TRUE(accepts(never, "null"));
  EXPECT_FALSE(accepts(never, "1"));
  EXPECT_FALSE(accepts(never, "2"));
  // zod 4's z.intersection of two objects: allOf of two closed objects, which no object satisfies
  // (each branch's additionalProperties false excludes the other's required member): a schema of
  // no value, refused with the reason.
  const std::string intersection = R"({"type": "object", "properties": {"meta": {"allOf": [
      {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"], "additionalProperties": false},
      {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"], "additionalProperties": false}]}},
      "required": ["meta"]})";
  EXPECT_EQ(refusal(intersection), "schema");
  try {
    schema(intersection);
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("allOf"), std::string::npos) << e.what();
  }
  // What is not exact is refused by name.
  EXPECT_EQ(refusal(R"({"allOf": [{"format": "date"}, {"format": "email"}]})"), "allOf");
  EXPECT_EQ(refusal(R"({"allOf": [{"$ref": "#"}]})"), "allOf");
}

TEST(JsonSchema, RefsAndRecursion) {
  auto tree = schema(R"({"$defs": {"node": {"type": "object", "properties": {
      "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["value"]}}, "$ref": "#/$defs/node"})");
  EXPECT_TRUE(accepts(tree, R"({"value":1})"));
  EXPECT_TRUE(accepts(tree, R"({"value":1,"children":[{"value":2,"children":[{"value":3}]},{"value":4}]})"));
  EXPECT_FALSE(accepts(tree, R"({"value":1,"children":[{"children":[]}]})"));
  auto list = schema(R"({"anyOf": [{"type": "null"}, {"type": "array", "prefixItems": [{"type": "integer"},
      {"$ref": "#"}], "minItems": 2, "maxItems": 2}]})");
  EXPECT_TRUE(accepts(list, "null"));
  EXPECT_TRUE(accepts(list, "[1,[2,[3,null]]]"));
  EXPECT_FALSE(accepts(list, "[1,[2,3]]"));
  auto legacy = schema(R"({"definitions": {"a~b/c%d": {"type": "boolean"}},
      "properties": {"x": {"$ref": "#/definitions/a~0b~1c%25d"}}})");
  EXPECT_TRUE(accepts(legacy, R"({"x":true})"));
  EXPECT_FALSE(accepts(legacy, R"({"x":1})"));
  auto pointer = schema(R"({"properties": {"a": {"type": "integer"}, "b": {"$ref": "#/properties/a"}}})");
  EXPECT_TRUE(accepts(pointer, R"({"a":1,"b":2})"));
  EXPECT_FALSE(accepts(pointer, R"({"b":"2"})"));
  EXPECT_EQ(refusal(R"({"$ref": "#"})"), "$ref");  // left recursion
  EXPECT_EQ(refusal(R"({"anyOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": {"anyOf": [{"$ref": "#"}]}}})"),
            "$ref");
  EXPECT_EQ(refusal(R"({"$ref": "http://example.com/schema.json"})"), "$ref");
  EXPECT_EQ(refusal(R"({"$ref": "#/$defs/missing"})"), "$ref");
  EXPECT_EQ(refusal(R"({"$ref": "#anchor"})"), "$ref");
  EXPECT_EQ(refusal(R"({"properties": {"a": {"$id": "http://x/y", "type": "string"}}})"), "$id");
}

TEST(JsonSchema, RefBesideOtherKeywordsFollowsTheDraft) {
  // 2019-09 on (and without $schema): $ref and its siblings both apply.
  auto both =
      schema(R"({"$defs": {"a": {"type": "string", "minLength": 1}}, "$ref": "#/$defs/a", "maxLength": 2})");
  for (const char* ok : {R"("x")", R"("xy")"}) EXPECT_TRUE(accepts(both, ok)) << ok;
  for (const char* bad : {R"("")", R"("xyz")", "1"}) EXPECT_FALSE(accepts(both, bad)) << bad;
  auto nested = schema(R"({"properties": {"p": {"$ref": "#/$defs/n", "maximum": 3}},
      "$defs": {"n": {"type": "integer", "minimum": 1}}})");
  EXPECT_TRUE(accepts(nested, R"({"p":3})"));
  for (const char* bad : {R"({"p":0})", R"({"p":4})", R"({"p":2.5})"})
    EXPECT_FALSE(accepts(nested, bad)) << bad;
  // Drafts 4 to 7: the siblings of $ref are ignored.
  auto draft7 = schema(R"({"$schema": "http://json-schema.org/draft-07/schema#",
      "definitions": {"a": {"type": "string"}}, "properties": {"p": {"$ref": "#/definitions/a", "maxLength": 2}}})");
  EXPECT_TRUE(accepts(draft7, R"({"p":"xyz"})"));
  EXPECT_FALSE(accepts(draft7, R"({"p":1})"));
  // A reference to the schema it stands in, with siblings, has no end: refused, not looped on.
  EXPECT_NE(refusal(R"({"$ref": "#", "type": "object"})"), "");
}

TEST(JsonSchema, BooleanSchemasAndAnnotations) {
  auto t = schema("true");
  for (const char* ok : {"1", "null", R"({"a":[1,{"b":"c"}]})", R"("x")"}) EXPECT_TRUE(accepts(t, ok)) << ok;
  EXPECT_FALSE(accepts(t, "{"));
  EXPECT_EQ(refusal("false"), "schema") << "no value: refused";
  auto f = schema(R"({"type": "object", "properties": {"a": false}})");
  EXPECT_TRUE(accepts(f, "{}"));
  EXPECT_FALSE(accepts(f, R"({"a":1})"));
  auto annotated = schema(R"({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:x",
      "title": "T", "description": "D", "default": 1, "examples": [1], "$comment": "c", "type": "integer"})");
  EXPECT_TRUE(accepts(annotated, "5"));
  EXPECT_FALSE(accepts(annotated, "\"5\""));
  EXPECT_EQ(refusal(R"({"contentMediaType": "application/json"})"), "contentMediaType");
  EXPECT_EQ(refusal(R"({"$anchor": "a"})"), "$anchor");
  EXPECT_EQ(refusal(R"({"unevaluatedProperties": false})"), "unevaluatedProperties");
}

TEST(JsonSchema, BoundedWhitespace) {
  const char* text =
      R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
                         "required": ["a"]})";
  auto compact = schema(text);
  EXPECT_TRUE(accepts(compact, R"({"a":[1,2]})"));
  EXPECT_FALSE(accepts(compact, R"({"a": [1,2]})"));
  auto spaced = schema(text, JsonSchemaOptions{2, true});
  EXPECT_TRUE(accepts(spaced, R"({"a":[1,2]})"));
  EXPECT_TRUE(accepts(spaced, "{\n \"a\" : [ 1 ,\t2 ]\r\n}"));
  EXPECT_FALSE(accepts(spaced, R"({   "a":[1,2]})"));  // three bytes in one place
  EXPECT_FALSE(accepts(spaced, R"( {"a":[1,2]})"));    // none before the text
  EXPECT_FALSE(accepts(spaced, R"({"a":[1,2]} )"));    // nor after it
  EXPECT_FALSE(accepts(spaced, R"({"a":[1 2]})"));
  // No endless whitespace: after the bound only a token may follow.
  Matcher m(spaced);
  ASSERT_TRUE(m.accept_bytes("{  "));
  EXPECT_FALSE(m.accept_bytes(" "));
  EXPECT_FALSE(m.accept_bytes("\n"));
  EXPECT_TRUE(m.accept_bytes("\"a\""));
  auto empty = schema(R"({"type": "object"})", JsonSchemaOptions{1, true});
  EXPECT_TRUE(accepts(empty, "{ }"));
  EXPECT_FALSE(accepts(empty, "{  }"));
}

TEST(JsonSchema, AnyJsonObject) {
  auto g = compile_any_json_object();
  for (const char* ok : {"{}", R"({"a":1})", R"({"a":{"b":[1,2.5e3,"x",null,true,{}]},"a":false})"}) {
    EXPECT_TRUE(accepts(g, ok)) << ok;
  }
  for (const char* bad : {"[]", "1", "\"x\"", "{\"a\"}", "{\"a\":}", "{a:1}", "{\"a\":1,}", "{} "}) {
    EXPECT_FALSE(accepts(g, bad)) << bad;
  }
  EXPECT_TRUE(accepts(compile_any_json_object(JsonSchemaOptions{1, true}), R"({ "a": [ 1 ] })"));
}

TEST(JsonSchema, GrammarText) {
  const std::string text = json_schema_to_gbnf(nlohmann::json::parse(R"({"type": "integer"})"));
  EXPECT_EQ(text.rfind("root ::= ", 0), 0u);
  // A nlohmann::json object keeps its keys sorted: that is then the properties' order.
  auto sorted = compile_json_schema(nlohmann::json::parse(R"({"properties": {"b": true, "a": true}})"));
  EXPECT_TRUE(accepts(sorted, R"({"a":1,"b":2})"));
  EXPECT_FALSE(accepts(sorted, R"({"b":2,"a":1})"));
}

TEST(JsonSchema, HostileSchemasFailFast) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(refusal(R"({"type": "string", "maxLength": 100000000})"), "schema");
  EXPECT_EQ(refusal(R"({"type": "array", "minItems": 1000000000})"), "schema");
  EXPECT_EQ(refusal(R"({"type": "string", "minLength": 1e300})"), "minLength");
  // Many properties, each its own rules: over a small rule limit.
  ojson wide = {{"type", "object"}, {"properties", ojson::object()}};
  for (int i = 0; i < 400; ++i) wide["properties"]["p" + std::to_string(i)] = {{"maxLength", 100 + i}};
  Limits small;
  small.max_rules = 300;
  EXPECT_THROW(compile_json_schema(wide, {}, small), GrammarError);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(ms, 1000);
  std::string deep = "true";
  for (int i = 0; i < 5000; ++i) deep = R"({"items": )" + deep + "}";
  EXPECT_EQ(refusal(deep), "schema");
  EXPECT_EQ(refusal("[1]"), "schema");
  EXPECT_EQ(refusal(R"({"required": "a"})"), "required");
  EXPECT_EQ(refusal(R"({"properties": {"a": 3}})"), "schema");
}

}  // namespace
