#include "protocol.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <msgpack.hpp>
#include <set>

namespace rootspec {

namespace {

struct TypeName {
  MessageType type;
  const char* name;
};
constexpr TypeName kTypes[] = {
    {MessageType::Hello, "hello"},       {MessageType::Ready, "ready"}, {MessageType::Prefill, "prefill"},
    {MessageType::Commit, "commit"},     {MessageType::Pool, "pool"},   {MessageType::Cancel, "cancel"},
    {MessageType::Shutdown, "shutdown"}, {MessageType::Error, "error"}, {MessageType::Generate, "generate"},
    {MessageType::Accepted, "accepted"}, {MessageType::Delta, "delta"}, {MessageType::Done, "done"},
    {MessageType::Status, "status"},
};

using Packer = msgpack::packer<msgpack::sbuffer>;

// Packs {"v", "type", "request", "round", "body": <map of n_fields>} and leaves the packer
// inside the body map.
void begin(Packer& pk, const Header& h, uint32_t n_fields) {
  pk.pack_map(5);
  pk.pack("v");
  pk.pack(h.version);
  pk.pack("type");
  pk.pack(std::string(message_type_name(h.type)));
  pk.pack("request");
  pk.pack(h.request);
  pk.pack("round");
  pk.pack(h.round);
  pk.pack("body");
  pk.pack_map(n_fields);
}

std::string finish(const msgpack::sbuffer& buf) { return std::string(buf.data(), buf.size()); }

// ---- reading ------------------------------------------------------------------------------

const char* kind(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
      return "nil";
    case msgpack::type::BOOLEAN:
      return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER:
      return "an integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return "a number";
    case msgpack::type::STR:
      return "a string";
    case msgpack::type::ARRAY:
      return "an array";
    case msgpack::type::MAP:
      return "a map";
    default:
      return "binary or extension data";
  }
}

bool is_int(const msgpack::object& o) {
  return o.type == msgpack::type::POSITIVE_INTEGER || o.type == msgpack::type::NEGATIVE_INTEGER;
}

// Reads one msgpack map with validation; every error names its field path.
class MapReader {
 public:
  // A key as errors and logs show it: bytes outside printable ASCII as \xNN (a NUL would cut
  // the message short), the empty key as "".
  static std::string printable(const std::string& key) {
    if (key.empty()) return "\"\"";  // an empty key still names something
    std::string out;
    for (unsigned char c : key.substr(0, 64)) {
      if (c >= 0x20 && c < 0x7f) {
        out += static_cast<char>(c);
      } else {
        char hex[5];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        out += hex;
      }
    }
    return key.size() > 64 ? out + "…" : out;
  }

  MapReader(const msgpack::object& o, std::string path) : path_(std::move(path)) {
    if (o.type != msgpack::type::MAP)
      throw ProtocolError(where(), std::string("must be a map, not ") + kind(o));
    map_ = &o.via.map;
  }

  // Keys other than `known` are errors: a misspelt option must not be silently ignored.
  void only(const std::vector<const char*>& known) const {
    std::set<std::string> k(known.begin(), known.end());
    for (uint32_t i = 0; i < map_->size; ++i) {
      const auto& key = map_->ptr[i].key;
      if (key.type != msgpack::type::STR) throw ProtocolError(where(), "keys must be strings");
      const std::string name(key.via.str.ptr, key.via.str.size);
      if (!k.count(name)) throw ProtocolError(at(printable(name)), "unknown field");
    }
  }

  const msgpack::object* find(const char* key) const {
    for (uint32_t i = 0; i < map_->size; ++i) {
      const auto& k = map_->ptr[i].key;
      if (k.type == msgpack::type::STR && k.via.str.size == std::strlen(key) &&
          std::memcmp(k.via.str.ptr, key, k.via.str.size) == 0)
        return &map_->ptr[i].val;
    }
    return nullptr;
  }
  const msgpack::object& need(const char* key) const {
    const msgpack::object* o = find(key);
    if (!o) throw ProtocolError(at(key), "missing");
    return *o;
  }
  bool has(const char* key) const { return find(key) != nullptr; }

  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    return as_int(need(key), at(key), lo, hi);
  }
  int64_t integer_or(const char* key, int64_t lo, int64_t hi, int64_t fallback) const {
    return has(key) ? integer(key, lo, hi) : fallback;
  }
  uint64_t u64(const char* key) const {
    const auto& o = need(key);
    if (o.type != msgpack::type::POSITIVE_INTEGER)
      throw ProtocolError(at(key), "must be a non-negative integer");
    return o.via.u64;
  }
  double number(const char* key, double lo, double hi) const { return as_number(need(key), at(key), lo, hi); }
  bool boolean(const char* key) const {
    const auto& o = need(key);
    if (o.type != msgpack::type::BOOLEAN)
      throw ProtocolError(at(key), std::string("must be a boolean, not ") + kind(o));
    return o.via.boolean;
  }
  std::string string(const char* key, size_t max_len) const {
    const auto& o = need(key);
    if (o.type != msgpack::type::STR)
      throw ProtocolError(at(key), std::string("must be a string, not ") + kind(o));
    if (o.via.str.size > max_len)
      throw ProtocolError(at(key), "longer than " + std::to_string(max_len) + " bytes");
    return std::string(o.via.str.ptr, o.via.str.size);
  }
  std::vector<std::string> string_array(const char* key, size_t max_count, size_t max_len) const {
    std::vector<std::string> out;
    for_each_element(key, max_count, [&](const msgpack::object& o, const std::string& where) {
      if (o.type != msgpack::type::STR)
        throw ProtocolError(where, std::string("must be a string, not ") + kind(o));
      if (o.via.str.size > max_len)
        throw ProtocolError(where, "longer than " + std::to_string(max_len) + " bytes");
      out.emplace_back(o.via.str.ptr, o.via.str.size);
    });
    return out;
  }
  // Calls f(element, its path) for each element of the array at `key` (≤ max_count of them).
  template <class F>
  void for_each_element(const char* key, size_t max_count, F&& f) const {
    const auto& a = array(key, max_count);
    for (uint32_t i = 0; i < a.size; ++i) f(a.ptr[i], element(key, i));
  }
  // Arrays are checked element by element; the field path is only built for an error (pools
  // carry thousands of entries per round).
  template <typename T>
  std::vector<T> int_array(const char* key, size_t max_len, int64_t lo, int64_t hi) const {
    const auto& a = array(key, max_len);
    std::vector<T> out(a.size);
    for (uint32_t i = 0; i < a.size; ++i) {
      const msgpack::object& o = a.ptr[i];
      const bool in_range =
          o.type == msgpack::type::POSITIVE_INTEGER
              ? o.via.u64 <= static_cast<uint64_t>(hi) && static_cast<int64_t>(o.via.u64) >= lo
              : o.type == msgpack::type::NEGATIVE_INTEGER && o.via.i64 >= lo && o.via.i64 <= hi;
      if (!in_range) as_int(o, element(key, i), lo, hi);  // throws with the element's path
      out[i] = static_cast<T>(o.type == msgpack::type::POSITIVE_INTEGER ? static_cast<int64_t>(o.via.u64)
                                                                        : o.via.i64);
    }
    return out;
  }
  template <typename T>
  std::vector<T> number_array(const char* key, size_t max_len, double lo, double hi) const {
    const auto& a = array(key, max_len);
    std::vector<T> out(a.size);
    for (uint32_t i = 0; i < a.size; ++i) {
      const msgpack::object& o = a.ptr[i];
      const bool is_float = o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64;
      if (is_float && o.via.f64 >= lo && o.via.f64 <= hi) {  // NaN fails both comparisons
        out[i] = static_cast<T>(o.via.f64);
        continue;
      }
      out[i] = static_cast<T>(as_number(o, element(key, i), lo, hi));
    }
    return out;
  }
  MapReader map(const char* key) const { return MapReader(need(key), at(key)); }
  std::string at(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  // The map itself in errors: the whole message for the top level.
  std::string where() const { return path_.empty() ? "message" : path_; }
  std::string element(const char* key, uint32_t i) const { return at(key) + "[" + std::to_string(i) + "]"; }

  // One value, checked: errors name `where`.
  static int64_t as_int(const msgpack::object& o, const std::string& where, int64_t lo, int64_t hi) {
    if (!is_int(o)) throw ProtocolError(where, std::string("must be an integer, not ") + kind(o));
    if (o.type == msgpack::type::POSITIVE_INTEGER && o.via.u64 > static_cast<uint64_t>(hi))
      throw ProtocolError(where, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    const int64_t v = o.type == msgpack::type::POSITIVE_INTEGER ? static_cast<int64_t>(o.via.u64) : o.via.i64;
    if (v < lo || v > hi)
      throw ProtocolError(where, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  }
  static double as_number(const msgpack::object& o, const std::string& where, double lo, double hi) {
    double v;
    if (o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64)
      v = o.via.f64;
    else if (o.type == msgpack::type::POSITIVE_INTEGER)
      v = static_cast<double>(o.via.u64);
    else if (o.type == msgpack::type::NEGATIVE_INTEGER)
      v = static_cast<double>(o.via.i64);
    else
      throw ProtocolError(where, std::string("must be a number, not ") + kind(o));
    if (std::isnan(v) || v < lo || v > hi)
      throw ProtocolError(where,
                          "must be a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  }

 private:
  const msgpack::object_array& array(const char* key, size_t max_len) const {
    const auto& o = need(key);
    if (o.type != msgpack::type::ARRAY)
      throw ProtocolError(at(key), std::string("must be an array, not ") + kind(o));
    if (o.via.array.size > max_len)
      throw ProtocolError(at(key), "holds " + std::to_string(o.via.array.size) + " entries, more than " +
                                       std::to_string(max_len));
    return o.via.array;
  }

  const msgpack::object_map* map_;
  std::string path_;
};

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxVocab = 1 << 24;
constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxI32 = std::numeric_limits<int32_t>::max();
// A constraint's text on the wire; the compilers' own limit (grammar::Limits) is smaller.
constexpr size_t kMaxConstraintBytes = 1u << 20;

// ---- field tables -----------------------------------------------------------------------------
//
// One table per message body lists its fields once: the name, the checks a received value must
// pass, and how the value moves between the struct and the wire. encode() writes the table's
// fields, the decoder allows exactly the table's names (a misspelt option is an error, never
// ignored) and reads each field with its checks. Checks that span fields follow the table.

template <class B>
struct Field {
  const char* name = "";
  bool optional = false;                  // absent on the wire: the struct's default stays
  std::function<bool(const B&)> written;  // encode writes it when true (empty: always)
  std::function<void(Packer&, const B&)> write;
  std::function<void(const MapReader&, const char*, B&)> read;
};

// Builds a body's table; `get` is a member pointer or a callable B& → value& (std::invoke).
template <class B>
class Fields {
 public:
  // Scalars: msgpack's own packing of the member; `read(r, key)` reads and checks the value.
  template <class Get>
  Fields& integer(const char* name, Get get, int64_t lo, int64_t hi) {
    return scalar(name, get, [lo, hi](const MapReader& r, const char* k) { return r.integer(k, lo, hi); });
  }
  template <class Get>
  Fields& u64(const char* name, Get get) {
    return scalar(name, get, [](const MapReader& r, const char* k) { return r.u64(k); });
  }
  template <class Get>
  Fields& number(const char* name, Get get, double lo, double hi) {
    return scalar(name, get, [lo, hi](const MapReader& r, const char* k) { return r.number(k, lo, hi); });
  }
  // A std::optional scalar: absent on the wire when empty, read with the same checks as above.
  template <class Get>
  Fields& optional_integer(const char* name, Get get, int64_t lo, int64_t hi) {
    return optional_scalar(name, get,
                           [lo, hi](const MapReader& r, const char* k) { return r.integer(k, lo, hi); });
  }
  template <class Get>
  Fields& optional_number(const char* name, Get get, double lo, double hi) {
    return optional_scalar(name, get,
                           [lo, hi](const MapReader& r, const char* k) { return r.number(k, lo, hi); });
  }
  template <class Get>
  Fields& boolean(const char* name, Get get) {
    return scalar(name, get, [](const MapReader& r, const char* k) { return r.boolean(k); });
  }
  template <class Get>
  Fields& string(const char* name, Get get, size_t max_len) {
    return scalar(name, get, [max_len](const MapReader& r, const char* k) { return r.string(k, max_len); });
  }
  // Integer arrays travel as msgpack arrays of integers, whatever the element type (uint8_t
  // vectors would pack as binary). `min_len` entries at least.
  template <class Get>
  Fields& int_array(const char* name, Get get, size_t max_len, int64_t lo, int64_t hi, size_t min_len = 0) {
    return add(
        name,
        [get](Packer& pk, const B& b) {
          const auto& v = std::invoke(get, b);
          pk.pack_array(static_cast<uint32_t>(v.size()));
          for (const auto x : v) pk.pack(static_cast<int64_t>(x));
        },
        [get, max_len, lo, hi, min_len](const MapReader& r, const char* k, B& b) {
          auto& v = std::invoke(get, b);
          v = r.int_array<typename std::remove_reference_t<decltype(v)>::value_type>(k, max_len, lo, hi);
          if (v.size() < min_len)
            throw ProtocolError(r.at(k), "must hold at least " + std::to_string(min_len) + " entries");
        });
  }
  template <class Get>
  Fields& number_array(const char* name, Get get, size_t max_len, double lo, double hi) {
    return add(
        name, [get](Packer& pk, const B& b) { pk.pack(std::invoke(get, b)); },
        [get, max_len, lo, hi](const MapReader& r, const char* k, B& b) {
          auto& v = std::invoke(get, b);
          v = r.number_array<typename std::remove_reference_t<decltype(v)>::value_type>(k, max_len, lo, hi);
        });
  }
  template <class Get>
  Fields& string_array(const char* name, Get get, size_t max_count, size_t max_len) {
    return add(
        name, [get](Packer& pk, const B& b) { pk.pack(std::invoke(get, b)); },
        [get, max_count, max_len](const MapReader& r, const char* k, B& b) {
          std::invoke(get, b) = r.string_array(k, max_count, max_len);
        });
  }
  // An array of maps, each read with `inner`'s table.
  template <class Get, class Inner>
  Fields& map_array(const char* name, Get get, const Fields<Inner>& inner, size_t max_count) {
    return add(
        name,
        [get, &inner](Packer& pk, const B& b) {
          const auto& v = std::invoke(get, b);
          pk.pack_array(static_cast<uint32_t>(v.size()));
          for (const Inner& x : v) inner.write(pk, x);
        },
        [get, &inner, max_count](const MapReader& r, const char* k, B& b) {
          auto& v = std::invoke(get, b);
          v.clear();
          r.for_each_element(k, max_count, [&](const msgpack::object& o, const std::string& where) {
            v.push_back(inner.read(MapReader(o, where)));
          });
        });
  }
  // A nested map with its own table.
  template <class Get, class Inner>
  Fields& map(const char* name, Get get, const Fields<Inner>& inner) {
    return add(
        name, [get, &inner](Packer& pk, const B& b) { inner.write(pk, std::invoke(get, b)); },
        [get, &inner](const MapReader& r, const char* k, B& b) {
          std::invoke(get, b) = inner.read(r.map(k));
        });
  }
  // A field with its own writer and reader.
  template <class W, class R>
  Fields& custom(const char* name, W write, R read) {
    Field<B> f;
    f.name = name;
    f.write = std::move(write);
    f.read = std::move(read);
    list_.push_back(std::move(f));
    names_.push_back(name);
    return *this;
  }
  // The last field added may be absent on the wire; the encoder writes it only when `when`
  // holds (empty: always).
  Fields& optional(std::function<bool(const B&)> when = {}) {
    list_.back().optional = true;
    list_.back().written = std::move(when);
    return *this;
  }
  // Checks across fields, after every field was read.
  Fields& check(std::function<void(const MapReader&, B&)> f) {
    check_ = std::move(f);
    return *this;
  }

  void write(Packer& pk, const B& b) const {
    uint32_t n = 0;
    for (const Field<B>& f : list_) n += !f.written || f.written(b);
    pk.pack_map(n);
    write_fields(pk, b);
  }
  std::string encode(const Header& h, const B& b) const {
    msgpack::sbuffer buf;
    Packer pk(&buf);
    uint32_t n = 0;
    for (const Field<B>& f : list_) n += !f.written || f.written(b);
    begin(pk, h, n);
    write_fields(pk, b);
    return finish(buf);
  }
  B read(const MapReader& r) const {
    r.only(names_);
    B b;
    for (const Field<B>& f : list_) {
      if (r.has(f.name))
        f.read(r, f.name, b);
      else if (!f.optional)
        throw ProtocolError(r.at(f.name), "missing");
    }
    if (check_) check_(r, b);
    return b;
  }

 private:
  template <class W, class R>
  Fields& add(const char* name, W write, R read) {
    return custom(name, std::move(write), std::move(read));
  }
  template <class Get, class Read>
  Fields& scalar(const char* name, Get get, Read read) {
    return add(
        name, [get](Packer& pk, const B& b) { pk.pack(std::invoke(get, b)); },
        [get, read](const MapReader& r, const char* k, B& b) {
          auto& v = std::invoke(get, b);
          v = static_cast<std::remove_reference_t<decltype(v)>>(read(r, k));
        });
  }
  template <class Get, class Read>
  Fields& optional_scalar(const char* name, Get get, Read read) {
    add(
        name, [get](Packer& pk, const B& b) { pk.pack(*std::invoke(get, b)); },
        [get, read](const MapReader& r, const char* k, B& b) {
          auto& v = std::invoke(get, b);
          v = static_cast<typename std::remove_reference_t<decltype(v)>::value_type>(read(r, k));
        });
    return optional([get](const B& b) { return std::invoke(get, b).has_value(); });
  }
  void write_fields(Packer& pk, const B& b) const {
    for (const Field<B>& f : list_)
      if (!f.written || f.written(b)) {
        pk.pack(f.name);
        f.write(pk, b);
      }
  }

  std::vector<Field<B>> list_;
  std::vector<const char*> names_;
  std::function<void(const MapReader&, B&)> check_;
};

const Fields<PoolShape>& shape_fields() {
  static const Fields<PoolShape> f = Fields<PoolShape>()
                                         .integer("top_k", &PoolShape::top_k, 1, 1024)
                                         .integer("depth", &PoolShape::depth, 1, 64)
                                         .integer("expand", &PoolShape::expand, 1, 1024)
                                         .integer("sparse", &PoolShape::sparse, 0, kMaxVocab)
                                         .integer("rheo_m", &PoolShape::rheo_m, -1, 1023)
                                         .number("adhoc_proxy", &PoolShape::adhoc_proxy, 0.0, 1.0)
                                         .boolean("adaptive_depth", &PoolShape::adaptive_depth)
                                         .optional([](const PoolShape& s) { return s.adaptive_depth; })
                                         .check([](const MapReader& r, PoolShape& s) {
                                           if (s.rheo_m >= s.top_k)
                                             throw ProtocolError(r.at("rheo_m"), "must be below top_k");
                                           if (s.expected_size() > kMaxPoolNodes)
                                             throw ProtocolError(r.at("top_k"), "pool shape too large");
                                         });
  return f;
}

const Fields<HelloBody>& hello_fields() {
  static const Fields<HelloBody> f =
      Fields<HelloBody>()
          .integer("pid", &HelloBody::pid, 1, kMaxI32)
          .integer("vocab", &HelloBody::vocab, 1, kMaxVocab)
          .string("nccl_id", &HelloBody::nccl_id, 1024)
          .optional([](const HelloBody& b) { return !b.nccl_id.empty(); })
          .string("shm", &HelloBody::shm, 255)
          .optional([](const HelloBody& b) { return !b.shm.empty(); })
          .check([](const MapReader& r, HelloBody& b) {
            if (!b.nccl_id.empty() && !b.shm.empty())
              throw ProtocolError(r.at("shm"), "a Hello names both NCCL and shared memory");
          });
  return f;
}

const Fields<ReadyBody>& ready_fields() {
  static const Fields<ReadyBody> f = Fields<ReadyBody>()
                                         .integer("pid", &ReadyBody::pid, 1, kMaxI32)
                                         .integer("vocab", &ReadyBody::vocab, 1, kMaxVocab)
                                         .string("model", &ReadyBody::model, 4096);
  return f;
}

// logit_bias on the wire (Generate, Prefill): [[token id, bias], …], ids ascending and unique.
void pack_logit_bias(Packer& pk, const std::vector<std::pair<int32_t, float>>& bias) {
  pk.pack_array(static_cast<uint32_t>(bias.size()));
  for (const auto& [token, b] : bias) {
    pk.pack_array(2);
    pk.pack(static_cast<int64_t>(token));
    pk.pack(b);
  }
}
void read_logit_bias(const MapReader& r, const char* k, std::vector<std::pair<int32_t, float>>& out) {
  out.clear();
  r.for_each_element(k, kMaxTokens, [&](const msgpack::object& o, const std::string& where) {
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 2)
      throw ProtocolError(where, "must be a pair [token id, bias]");
    const auto token =
        static_cast<int32_t>(MapReader::as_int(o.via.array.ptr[0], where + "[0]", 0, kMaxVocab - 1));
    const auto bias =
        static_cast<float>(MapReader::as_number(o.via.array.ptr[1], where + "[1]", -100.0, 100.0));
    if (!out.empty() && out.back().first >= token)
      throw ProtocolError(where, "token ids must be ascending and unique");
    out.emplace_back(token, bias);
  });
}

// A request's sampling parameters (Prefill): Generate's names and wire ranges, each absent when
// off; the exact ranges are check_sampling_params's, errors under the same names.
const Fields<SamplingParams>& sampling_fields() {
  using S = SamplingParams;
  static const Fields<S> f =
      Fields<S>()
          .integer("top_k", &S::top_k, 0, kMaxVocab)
          .optional([](const S& s) { return s.top_k != 0; })
          .number("top_p", &S::top_p, 0.0, 1.0)
          .optional([](const S& s) { return s.top_p != 1; })
          .number("min_p", &S::min_p, 0.0, 1.0)
          .optional([](const S& s) { return s.min_p != 0; })
          .number("presence_penalty", &S::presence_penalty, -2.0, 2.0)
          .optional([](const S& s) { return s.presence_penalty != 0; })
          .number("frequency_penalty", &S::frequency_penalty, -2.0, 2.0)
          .optional([](const S& s) { return s.frequency_penalty != 0; })
          .number("repetition_penalty", &S::repetition_penalty, 0.0, kInf)
          .optional([](const S& s) { return s.repetition_penalty != 1; })
          .custom(
              "logit_bias", [](Packer& pk, const S& s) { pack_logit_bias(pk, s.logit_bias); },
              [](const MapReader& r, const char* k, S& s) { read_logit_bias(r, k, s.logit_bias); })
          .optional([](const S& s) { return !s.logit_bias.empty(); })
          .check([](const MapReader& r, S& s) {
            const auto [field, message] = check_sampling_params(s);
            if (!field.empty()) throw ProtocolError(r.at(field), message);
          });
  return f;
}

// Structured output (constraint.h), sent only when active: {"kind": name, "text", "max_whitespace",
// "strict"}, the last three absent at their defaults. The text is compiled by the receiver, whose
// GrammarError names what is wrong in it; here only the kind and the ranges are checked.
const Fields<grammar::OutputConstraint>& constraint_fields() {
  using C = grammar::OutputConstraint;
  static const Fields<C> f =
      Fields<C>()
          .custom(
              "kind",
              [](Packer& pk, const C& c) { pk.pack(std::string(grammar::constraint_kind_name(c.kind))); },
              [](const MapReader& r, const char* k, C& c) {
                const std::string name = r.string(k, 32);
                if (!grammar::parse_constraint_kind(name, &c.kind) || !c.active())
                  throw ProtocolError(r.at(k), "must be json_object, json_schema, regex, choice or grammar");
              })
          .string("text", &C::text, kMaxConstraintBytes)
          .optional([](const C& c) { return !c.text.empty(); })
          .integer("max_whitespace", &C::max_whitespace, 0, 64)
          .optional([](const C& c) { return c.max_whitespace != 0; })
          .boolean("strict", &C::strict)
          .optional([](const C& c) { return !c.strict; });
  return f;
}

const Fields<PrefillBody>& prefill_fields() {
  static const Fields<PrefillBody> f =
      Fields<PrefillBody>()
          .int_array("prompt", &PrefillBody::prompt, kMaxTokens, 0, kMaxVocab - 1, 1)
          .map("shape", &PrefillBody::shape, shape_fields())
          .u64("draft_seed", &PrefillBody::draft_seed)
          .boolean("draft_ahead", &PrefillBody::draft_ahead)
          .optional([](const PrefillBody& b) { return b.draft_ahead; })
          .map("sampling", &PrefillBody::sampling, sampling_fields())
          .optional([](const PrefillBody& b) { return b.sampling.processes_rows(); })
          .integer("generated", &PrefillBody::generated, 0, kMaxTokens)
          .optional([](const PrefillBody& b) { return b.generated > 0; })
          .map("constraint", &PrefillBody::constraint, constraint_fields())
          .optional([](const PrefillBody& b) { return b.constraint.active(); })
          .check([](const MapReader& r, PrefillBody& b) {
            if (b.generated >= static_cast<int64_t>(b.prompt.size()))
              throw ProtocolError(r.at("generated"),
                                  "must be below the prompt's length (the prompt itself comes first)");
          });
  return f;
}

const Fields<CommitBody>& commit_fields() {
  static const Fields<CommitBody> f =
      Fields<CommitBody>().int_array("tokens", &CommitBody::tokens, kMaxTokens, 0, kMaxVocab - 1, 1);
  return f;
}

// A process's prefix cache counters as four fields named `prefix` + hit_tokens, miss_tokens,
// evictions and bytes, on the wire only when the process has a cache (any()).
template <class B, class Get>
Fields<B>& cache_counter_fields(Fields<B>& f, const std::array<const char*, 4>& names, Get get) {
  const auto any = [get](const B& b) { return get(b).any(); };
  return f
      .integer(
          names[0], [get](auto& b) -> auto& { return get(b).hit_tokens; }, 0, kMaxI64)
      .optional(any)
      .integer(
          names[1], [get](auto& b) -> auto& { return get(b).miss_tokens; }, 0, kMaxI64)
      .optional(any)
      .integer(
          names[2], [get](auto& b) -> auto& { return get(b).evictions; }, 0, kMaxI64)
      .optional(any)
      .integer(
          names[3], [get](auto& b) -> auto& { return get(b).bytes; }, 0, kMaxI64)
      .optional(any);
}

// A Pool crosses as its flat arrays (pool.h); depth and cum_logq are derived on receipt.
const Fields<PoolBody>& pool_fields() {
  using P = PoolBody;
  static const Fields<P> f = [] {
    Fields<P> fields =
        Fields<P>()
            .int_array(
                "token", [](auto& b) -> auto& { return b.pool.token; }, kMaxPoolNodes, 0, kMaxVocab - 1)
            .int_array(
                "parent", [](auto& b) -> auto& { return b.pool.parent; }, kMaxPoolNodes, -1, kMaxPoolNodes)
            .number_array(
                "logq", [](auto& b) -> auto& { return b.pool.logq; }, kMaxPoolNodes, -kInf, 0.0)
            .int_array(
                "expanded", [](auto& b) -> auto& { return b.pool.expanded; }, kMaxPoolNodes, 0, 1)
            .int_array(
                "sampled", [](auto& b) -> auto& { return b.pool.sampled; }, kMaxPoolNodes, 0, 1)
            .number_array(
                "q_true", [](auto& b) -> auto& { return b.pool.q_true; }, kMaxPoolNodes, 0.0, 1.0)
            .integer(
                "rheo_m", [](auto& b) -> auto& { return b.pool.rheo_m; }, -1, 1023)
            .int_array(
                "row_start", [](auto& b) -> auto& { return b.pool.row_start; }, kMaxPoolNodes + 1, -1,
                kMaxI32)
            .int_array(
                "row_len", [](auto& b) -> auto& { return b.pool.row_len; }, kMaxPoolNodes + 1, 0, kMaxVocab)
            .int_array(
                "row_token", [](auto& b) -> auto& { return b.pool.row_token; }, kMaxTokens, 0, kMaxVocab - 1)
            .number_array(
                "row_prob", [](auto& b) -> auto& { return b.pool.row_prob; }, kMaxTokens, 0.0, 1.0)
            .integer("draft_start_ns", &P::draft_start_ns, 0, kMaxI64)
            .integer("draft_end_ns", &P::draft_end_ns, 0, kMaxI64)
            .boolean("drafted_ahead", &P::drafted_ahead)
            .optional([](const P& b) { return b.drafted_ahead; })
            .check([](const MapReader& r, P& b) {
              Pool& p = b.pool;
              const size_t n = p.token.size();
              const std::pair<const char*, size_t> lengths[] = {{"parent", p.parent.size()},
                                                                {"logq", p.logq.size()},
                                                                {"expanded", p.expanded.size()},
                                                                {"sampled", p.sampled.size()},
                                                                {"q_true", p.q_true.size()}};
              for (const auto& [k, len] : lengths)
                if (len != n)
                  throw ProtocolError(
                      r.at(k), "has " + std::to_string(len) + " entries, token has " + std::to_string(n));
              const int bad = p.derive_paths();
              if (bad >= 0) throw ProtocolError(r.element("parent", bad), "must be -1 or an earlier node");
              if (!p.row_start.empty() && p.row_start.size() != n + 1)
                throw ProtocolError(r.at("row_start"),
                                    "must be empty or hold one entry per node plus the root");
              if (p.row_len.size() != p.row_start.size())
                throw ProtocolError(r.at("row_len"), "must match row_start");
              if (p.row_prob.size() != p.row_token.size())
                throw ProtocolError(r.at("row_prob"), "must match row_token");
              for (size_t i = 0; i < p.row_start.size(); ++i)
                if (p.row_start[i] >= 0 &&
                    static_cast<size_t>(p.row_start[i]) + p.row_len[i] > p.row_token.size())
                  throw ProtocolError(r.element("row_start", static_cast<uint32_t>(i)),
                                      "points past row_token");
            });
    cache_counter_fields(
        fields, {"cache_hit_tokens", "cache_miss_tokens", "cache_evictions", "cache_bytes"},
        [](auto& b) -> auto& { return b.drafter_cache; });
    return fields;
  }();
  return f;
}

const Fields<ErrorBody>& error_fields() {
  static const Fields<ErrorBody> f = Fields<ErrorBody>()
                                         .string("field", &ErrorBody::field, 4096)
                                         .string("message", &ErrorBody::message, 1 << 16);
  return f;
}

const Fields<ToolCallWire>& tool_call_fields() {
  static const Fields<ToolCallWire> f = Fields<ToolCallWire>()
                                            .string("name", &ToolCallWire::name, 256)
                                            .string("arguments", &ToolCallWire::arguments, 16u << 20);
  return f;
}

const Fields<ChatTurn>& chat_turn_fields() {
  static const Fields<ChatTurn> f =
      Fields<ChatTurn>()
          .string("role", &ChatTurn::role, 32)
          .string("content", &ChatTurn::content, 16u << 20)
          .map_array("tool_calls", &ChatTurn::tool_calls, tool_call_fields(), 128)
          .optional([](const ChatTurn& t) { return !t.tool_calls.empty(); })
          .check([](const MapReader& r, ChatTurn& t) {
            if (t.role != "system" && t.role != "user" && t.role != "assistant" && t.role != "tool")
              throw ProtocolError(r.at("role"), "must be system, user, assistant or tool");
            if (!t.tool_calls.empty() && t.role != "assistant")
              throw ProtocolError(r.at("tool_calls"), "only assistant turns make tool calls");
          });
  return f;
}

// Every option but the prompt may be left out: the server's default then applies.
const Fields<GenerateBody>& generate_fields() {
  using G = GenerateBody;
  static const Fields<G> f =
      Fields<G>()
          .string("prompt", &G::prompt, 16u << 20)
          .optional([](const G& b) { return !b.has_prompt_ids && b.messages.empty(); })
          .int_array("prompt_ids", &G::prompt_ids, kMaxTokens, 0, kMaxI32, 1)
          .optional([](const G& b) { return b.has_prompt_ids; })
          .boolean("raw", &G::raw)
          .optional()
          .integer("max_new_tokens", &G::max_new_tokens, -1, 1 << 20)
          .optional()
          .number("temperature", &G::temperature, -1.0, 100.0)
          .optional()
          .string("rule", &G::rule, 64)
          .optional()
          .string("verifier", &G::verifier, 64)
          .optional()
          .integer("budget", &G::budget, -1, 1 << 20)
          .optional()
          .u64("seed", &G::seed)
          .optional()
          .boolean("stream", &G::stream)
          .optional()
          .boolean("stop_at_eos", &G::stop_at_eos)
          .optional()
          .map_array("messages", &G::messages, chat_turn_fields(), 1024)
          .optional([](const G& b) { return !b.messages.empty(); })
          .string("tools", &G::tools, 16u << 20)
          .optional([](const G& b) { return !b.tools.empty(); })
          .string_array("stop", &G::stop, 16, 1024)
          .optional([](const G& b) { return !b.stop.empty(); })
          .integer("deadline_ms", &G::deadline_ms, 0, 7 * 24 * 3600 * 1000)
          .optional([](const G& b) { return b.deadline_ms > 0; })
          .integer("draft_ahead", &G::draft_ahead, -1, 1)
          .optional([](const G& b) { return b.draft_ahead >= 0; })
          // Wire ranges; the target checks the exact ones (check_request_options) under the
          // same names.
          .optional_integer("top_k", &G::top_k, 0, kMaxVocab)
          .optional_number("top_p", &G::top_p, 0.0, 1.0)
          .optional_number("min_p", &G::min_p, 0.0, 1.0)
          .optional_number("presence_penalty", &G::presence_penalty, -2.0, 2.0)
          .optional_number("frequency_penalty", &G::frequency_penalty, -2.0, 2.0)
          .optional_number("repetition_penalty", &G::repetition_penalty, 0.0, kInf)
          .custom(
              "logit_bias", [](Packer& pk, const G& b) { pack_logit_bias(pk, b.logit_bias); },
              [](const MapReader& r, const char* k, G& b) { read_logit_bias(r, k, b.logit_bias); })
          .optional([](const G& b) { return !b.logit_bias.empty(); })
          .integer("logprobs", &G::logprobs, -1, 20)
          .optional([](const G& b) { return b.logprobs >= 0; })
          .string("logprobs_mode", &G::logprobs_mode, 16)
          .optional([](const G& b) { return !b.logprobs_mode.empty(); })
          .map("constraint", &G::constraint, constraint_fields())
          .optional([](const G& b) { return b.constraint.active(); })
          .check([](const MapReader& r, G& b) {
            if (r.has("logprobs_mode") && b.logprobs_mode != "processed" && b.logprobs_mode != "raw")
              throw ProtocolError(r.at("logprobs_mode"), "must be \"processed\" or \"raw\"");
            if (r.has("prompt") + r.has("prompt_ids") + r.has("messages") != 1)
              throw ProtocolError(r.at("prompt"),
                                  "give exactly one of prompt (text), prompt_ids and messages");
            if (r.has("messages") && b.messages.empty())
              throw ProtocolError(r.at("messages"), "must hold at least one message");
            if (r.has("tools") && !r.has("messages"))
              throw ProtocolError(r.at("tools"), "tools are rendered with messages only");
            for (size_t i = 0; i < b.stop.size(); ++i)
              if (b.stop[i].empty())
                throw ProtocolError(r.element("stop", static_cast<uint32_t>(i)), "empty");
            b.has_prompt_ids = r.has("prompt_ids");
          });
  return f;
}

const Fields<TokenLogprobWire>& token_logprob_fields() {
  using T = TokenLogprobWire;
  static const Fields<T> f = Fields<T>()
                                 .integer("token", &T::token, 0, kMaxVocab - 1)
                                 .number("logprob", &T::logprob, -kInf, 0.0)
                                 .string("bytes", &T::bytes, 1024);
  return f;
}

// {"token", "logprob", "bytes", "top": [{"token", "logprob", "bytes"}, …]}
const Fields<LogprobEntry>& logprob_entry_fields() {
  using E = LogprobEntry;
  static const Fields<E> f =
      Fields<E>()
          .integer(
              "token", [](auto& e) -> auto& { return e.chosen.token; }, 0, kMaxVocab - 1)
          .number(
              "logprob", [](auto& e) -> auto& { return e.chosen.logprob; }, -kInf, 0.0)
          .string(
              "bytes", [](auto& e) -> auto& { return e.chosen.bytes; }, 1024)
          .map_array("top", &E::top, token_logprob_fields(), 20);
  return f;
}

// A message's logprobs are one entry per token, each naming its token.
void check_logprobs(const MapReader& r, const std::vector<int32_t>& tokens,
                    const std::vector<LogprobEntry>& lp) {
  if (lp.empty()) return;
  if (lp.size() != tokens.size())
    throw ProtocolError(r.at("logprobs"), "has " + std::to_string(lp.size()) + " entries, tokens has " +
                                              std::to_string(tokens.size()));
  for (size_t i = 0; i < lp.size(); ++i)
    if (lp[i].chosen.token != tokens[i])
      throw ProtocolError(r.element("logprobs", static_cast<uint32_t>(i)) + ".token",
                          "is not tokens[" + std::to_string(i) + "]");
}

const Fields<DeltaBody>& delta_fields() {
  static const Fields<DeltaBody> f =
      Fields<DeltaBody>()
          .int_array("tokens", &DeltaBody::tokens, kMaxTokens, 0, kMaxVocab - 1)
          .string("text", &DeltaBody::text, 16u << 20)
          .string("notice", &DeltaBody::notice, 1024)
          .optional([](const DeltaBody& b) { return !b.notice.empty(); })
          .map_array("logprobs", &DeltaBody::logprobs, logprob_entry_fields(), kMaxTokens)
          .optional([](const DeltaBody& b) { return !b.logprobs.empty(); })
          .check([](const MapReader& r, DeltaBody& b) { check_logprobs(r, b.tokens, b.logprobs); });
  return f;
}

// A Done's trace: one array per round, its entries in for_each_record_field's order.
uint32_t record_field_count() {
  uint32_t n = 0;
  for_each_record_field([&](const char*, auto) { ++n; });
  return n;
}

void write_trace(Packer& pk, const std::vector<RoundRecord>& trace) {
  pk.pack_array(static_cast<uint32_t>(trace.size()));
  const uint32_t columns = record_field_count();
  for (const RoundRecord& t : trace) {
    pk.pack_array(columns);
    for_each_record_field([&](const char*, auto member) { pk.pack(t.*member); });
  }
}

std::vector<RoundRecord> read_trace(const MapReader& r, const char* key) {
  const msgpack::object& trace = r.need(key);
  if (trace.type != msgpack::type::ARRAY) throw ProtocolError(r.at(key), "must be an array");
  if (trace.via.array.size > kMaxTokens)
    throw ProtocolError(r.at(key), "holds more rounds than tokens allow");
  const uint32_t columns = record_field_count();
  std::vector<RoundRecord> out(trace.via.array.size);
  for (uint32_t i = 0; i < trace.via.array.size; ++i) {
    const auto& row = trace.via.array.ptr[i];
    const std::string where = r.element(key, i);
    if (row.type != msgpack::type::ARRAY || row.via.array.size != columns)
      throw ProtocolError(where, "must be an array of " + std::to_string(columns) + " entries");
    uint32_t k = 0;
    for_each_record_field([&](const char* name, auto member) {
      using T = std::remove_reference_t<decltype(out[i].*member)>;
      const msgpack::object& v = row.via.array.ptr[k++];
      if constexpr (std::is_same_v<T, bool>) {
        if (v.type != msgpack::type::BOOLEAN) throw ProtocolError(where + "." + name, "must be a boolean");
        out[i].*member = v.via.boolean;
      } else {  // counts and times are never negative
        if (v.type != msgpack::type::POSITIVE_INTEGER ||
            v.via.u64 > static_cast<uint64_t>(std::numeric_limits<T>::max()))
          throw ProtocolError(where + "." + name, "must be an integer in [0, " +
                                                      std::to_string(std::numeric_limits<T>::max()) + "]");
        out[i].*member = static_cast<T>(v.via.u64);
      }
    });
  }
  return out;
}

const Fields<DoneBody>& done_fields() {
  using D = DoneBody;
  static const Fields<D> f =
      Fields<D>()
          .string("stop_reason", &D::stop_reason, 64)
          .int_array("tokens", &D::tokens, kMaxTokens, 0, kMaxVocab - 1)
          .integer("prompt_tokens", &D::prompt_tokens, 0, kMaxTokens)
          .integer("tokens_to_first_eos", &D::tokens_to_first_eos, 0, kMaxTokens)
          .integer("rounds", &D::rounds, 0, kMaxTokens)
          .number("ms_queued", &D::ms_queued, 0, kInf)
          .number("ms_prefill", &D::ms_prefill, 0, kInf)
          .number("ms_drafter_wait", &D::ms_drafter_wait, 0, kInf)
          .number("ms_root_pass", &D::ms_root_pass, 0, kInf)
          .number("ms_tree_pass", &D::ms_tree_pass, 0, kInf)
          .number("ms_verify", &D::ms_verify, 0, kInf)
          .number("ms_commit", &D::ms_commit, 0, kInf)
          .integer("prefill_start_ns", &D::prefill_start_ns, 0, kMaxI64)
          .integer("last_commit_ns", &D::last_commit_ns, 0, kMaxI64)
          .number("tokens_per_second", &D::tokens_per_second, 0, kInf)
          .custom(
              "trace", [](Packer& pk, const D& b) { write_trace(pk, b.trace); },
              [](const MapReader& r, const char* k, D& b) { b.trace = read_trace(r, k); })
          .string("degraded", &D::degraded, 1024)
          .optional([](const D& b) { return !b.degraded.empty(); })
          .integer("degraded_at", &D::degraded_at, -1, kMaxTokens)
          .optional([](const D& b) { return !b.degraded.empty(); })
          .map_array("logprobs", &D::logprobs, logprob_entry_fields(), kMaxTokens)
          .optional([](const D& b) { return !b.logprobs.empty(); })
          .integer("cached_tokens", &D::cached_tokens, 0, kMaxTokens)
          .optional([](const D& b) { return b.cached_tokens > 0; })
          .check([](const MapReader& r, D& b) {
            check_logprobs(r, b.tokens, b.logprobs);
            if (b.tokens_to_first_eos > static_cast<int32_t>(b.tokens.size()))
              throw ProtocolError(r.at("tokens_to_first_eos"), "exceeds the tokens sent");
          });
  return f;
}

const Fields<AcceptedBody>& accepted_fields() {
  static const Fields<AcceptedBody> f =
      Fields<AcceptedBody>().integer("position", &AcceptedBody::position, 0, kMaxI32);
  return f;
}

const Fields<StatusBody>& status_fields() {
  static const Fields<StatusBody> f = [] {
    Fields<StatusBody> s = Fields<StatusBody>()
                               .integer("waiting", &StatusBody::waiting, 0, kMaxI32)
                               .integer("running", &StatusBody::running, 0, kMaxI32)
                               .integer("queue_limit", &StatusBody::queue_limit, 0, kMaxI32)
                               .boolean("drafter_alive", &StatusBody::drafter_alive)
                               .integer("served", &StatusBody::served, 0, kMaxI64);
    cache_counter_fields(
        s, {"cache_hit_tokens", "cache_miss_tokens", "cache_evictions", "cache_bytes"},
        [](auto& b) -> auto& { return b.target_cache; });
    cache_counter_fields(
        s,
        {"drafter_cache_hit_tokens", "drafter_cache_miss_tokens", "drafter_cache_evictions",
         "drafter_cache_bytes"},
        [](auto& b) -> auto& { return b.drafter_cache; });
    return s;
  }();
  return f;
}

// The announcement of a Pool that follows over NCCL.
struct NcclAnnouncement {
  uint64_t bytes = 0;
};
const Fields<NcclAnnouncement>& nccl_fields() {
  static const Fields<NcclAnnouncement> f =
      Fields<NcclAnnouncement>().integer("nccl_bytes", &NcclAnnouncement::bytes, 1, kMaxMessageBytes);
  return f;
}

}  // namespace

const char* message_type_name(MessageType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t.name;
  return "?";
}

// ---- encoders -----------------------------------------------------------------------------------

std::string encode(const Header& h, const HelloBody& b) { return hello_fields().encode(h, b); }
std::string encode(const Header& h, const ReadyBody& b) { return ready_fields().encode(h, b); }
std::string encode(const Header& h, const PrefillBody& b) { return prefill_fields().encode(h, b); }
std::string encode(const Header& h, const CommitBody& b) { return commit_fields().encode(h, b); }
std::string encode(const Header& h, const PoolBody& b) { return pool_fields().encode(h, b); }
std::string encode(const Header& h, const ErrorBody& b) { return error_fields().encode(h, b); }
std::string encode(const Header& h, const GenerateBody& b) { return generate_fields().encode(h, b); }
std::string encode(const Header& h, const DeltaBody& b) { return delta_fields().encode(h, b); }
std::string encode_nccl_announcement(const Header& h, size_t bytes) {
  return nccl_fields().encode(h, NcclAnnouncement{bytes});
}

std::string encode(const Header& h, const DoneBody& b) { return done_fields().encode(h, b); }
std::string encode(const Header& h, const AcceptedBody& b) { return accepted_fields().encode(h, b); }
std::string encode(const Header& h, const StatusBody& b) { return status_fields().encode(h, b); }

std::string encode_empty(const Header& h) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  begin(pk, h, 0);
  return finish(buf);
}

// ---- decoders -----------------------------------------------------------------------------------

struct Message::Impl {
  msgpack::object_handle handle;
  const msgpack::object* body = nullptr;
};

Message::Message(const void* data, size_t size) : impl_(nullptr) {
  if (size > kMaxMessageBytes)
    throw ProtocolError("message", std::to_string(size) + " bytes, more than the limit of " +
                                       std::to_string(kMaxMessageBytes));
  impl_ = new Impl;
  try {
    const msgpack::unpack_limit limit(kMaxTokens + 16, 64, kMaxMessageBytes, kMaxMessageBytes, 0, 8);
    std::size_t offset = 0;
    impl_->handle = msgpack::unpack(static_cast<const char*>(data), size, offset, nullptr, nullptr, limit);
    if (offset != size) throw ProtocolError("message", "trailing bytes after the msgpack map");
  } catch (const ProtocolError&) {
    delete impl_;
    throw;
  } catch (const std::exception& e) {
    delete impl_;
    throw ProtocolError("message", std::string("not valid msgpack (") + e.what() + ")");
  }
  try {
    const MapReader top(impl_->handle.get(), "");
    top.only({"v", "type", "request", "round", "body"});
    const int64_t v = top.integer("v", 0, std::numeric_limits<uint32_t>::max());
    // One version only: a message of another carries fields this build would misread or miss
    // (an older Generate has no logprobs, a newer one may mean more), so it is refused whole
    // and the receiver answers with an Error on "v".
    if (v != kProtocolVersion)
      throw ProtocolError("v", "protocol version " + std::to_string(v) + " is " +
                                   (v < kProtocolVersion ? "older" : "newer") + " than this build's " +
                                   std::to_string(kProtocolVersion) + ": upgrade the " +
                                   (v < kProtocolVersion ? "sender" : "receiver"));
    const std::string type = top.string("type", 32);
    bool known = false;
    for (const auto& t : kTypes)
      if (type == t.name) {
        header_.type = t.type;
        known = true;
      }
    if (!known) throw ProtocolError("type", "unknown message type '" + type + "'");
    header_.version = static_cast<uint32_t>(v);
    header_.request = top.u64("request");
    header_.round = static_cast<uint32_t>(top.integer("round", 0, std::numeric_limits<uint32_t>::max()));
    impl_->body = &top.need("body");
    MapReader(*impl_->body, "body");  // the body must be a map
  } catch (...) {
    delete impl_;
    throw;
  }
}

Message::~Message() { delete impl_; }
Message::Message(Message&& o) noexcept : header_(o.header_), impl_(o.impl_) { o.impl_ = nullptr; }
Message& Message::operator=(Message&& o) noexcept {
  std::swap(header_, o.header_);
  std::swap(impl_, o.impl_);
  return *this;
}

namespace {
// The body of a message of type `type`, read with its table.
template <class B>
B read_body(const Header& h, const msgpack::object& body, MessageType type, const Fields<B>& table) {
  if (h.type != type)
    throw ProtocolError(
        "type", std::string("expected ") + message_type_name(type) + ", got " + message_type_name(h.type));
  return table.read(MapReader(body, "body"));
}
}  // namespace

HelloBody Message::hello() const {
  return read_body(header_, *impl_->body, MessageType::Hello, hello_fields());
}
ReadyBody Message::ready() const {
  return read_body(header_, *impl_->body, MessageType::Ready, ready_fields());
}
PrefillBody Message::prefill() const {
  return read_body(header_, *impl_->body, MessageType::Prefill, prefill_fields());
}
CommitBody Message::commit() const {
  return read_body(header_, *impl_->body, MessageType::Commit, commit_fields());
}
PoolBody Message::pool() const { return read_body(header_, *impl_->body, MessageType::Pool, pool_fields()); }
ErrorBody Message::error() const {
  return read_body(header_, *impl_->body, MessageType::Error, error_fields());
}
GenerateBody Message::generate() const {
  return read_body(header_, *impl_->body, MessageType::Generate, generate_fields());
}
DeltaBody Message::delta() const {
  return read_body(header_, *impl_->body, MessageType::Delta, delta_fields());
}
DoneBody Message::done() const { return read_body(header_, *impl_->body, MessageType::Done, done_fields()); }
AcceptedBody Message::accepted() const {
  return read_body(header_, *impl_->body, MessageType::Accepted, accepted_fields());
}
StatusBody Message::status() const {
  return read_body(header_, *impl_->body, MessageType::Status, status_fields());
}

bool Message::is_nccl_announcement() const {
  return header_.type == MessageType::Pool && MapReader(*impl_->body, "body").has("nccl_bytes");
}

size_t Message::nccl_bytes() const {
  return read_body(header_, *impl_->body, MessageType::Pool, nccl_fields()).bytes;
}

void Message::empty_body() const {
  const MapReader r(*impl_->body, "body");
  r.only({});
}

}  // namespace rootspec
