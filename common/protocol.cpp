#include "protocol.h"

#include <cmath>
#include <cstring>
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
    {MessageType::Hello, "hello"},       {MessageType::Ready, "ready"},
    {MessageType::Prefill, "prefill"},   {MessageType::Commit, "commit"},
    {MessageType::Pool, "pool"},         {MessageType::Cancel, "cancel"},
    {MessageType::Shutdown, "shutdown"}, {MessageType::Error, "error"},
    {MessageType::Generate, "generate"}, {MessageType::Delta, "delta"},
    {MessageType::Done, "done"},
};

// ---- writing ------------------------------------------------------------------------------

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

template <typename T>
void field(Packer& pk, const char* key, const T& value) {
  pk.pack(key);
  pk.pack(value);
}

std::string finish(const msgpack::sbuffer& buf) { return std::string(buf.data(), buf.size()); }

void pack_shape(Packer& pk, const PoolShape& s) {
  pk.pack("shape");
  pk.pack_map(6);
  field(pk, "top_k", s.top_k);
  field(pk, "depth", s.depth);
  field(pk, "expand", s.expand);
  field(pk, "sparse", s.sparse);
  field(pk, "rheo_m", s.rheo_m);
  field(pk, "adhoc_proxy", s.adhoc_proxy);
}

// ---- reading ------------------------------------------------------------------------------

const char* kind(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "an integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "a number";
    case msgpack::type::STR: return "a string";
    case msgpack::type::ARRAY: return "an array";
    case msgpack::type::MAP: return "a map";
    default: return "binary or extension data";
  }
}

bool is_int(const msgpack::object& o) {
  return o.type == msgpack::type::POSITIVE_INTEGER || o.type == msgpack::type::NEGATIVE_INTEGER;
}

// Reads one msgpack map with validation; every error names its field path.
class MapReader {
 public:
  MapReader(const msgpack::object& o, std::string path) : path_(std::move(path)) {
    if (o.type != msgpack::type::MAP) throw ProtocolError(path_, std::string("must be a map, not ") + kind(o));
    map_ = &o.via.map;
  }

  // Keys other than `known` are errors: a misspelt option must not be silently ignored.
  void only(std::initializer_list<const char*> known) const {
    std::set<std::string> k(known.begin(), known.end());
    for (uint32_t i = 0; i < map_->size; ++i) {
      const auto& key = map_->ptr[i].key;
      if (key.type != msgpack::type::STR) throw ProtocolError(path_, "keys must be strings");
      const std::string name(key.via.str.ptr, key.via.str.size);
      if (!k.count(name)) throw ProtocolError(at(name), "unknown field");
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

  int64_t integer(const char* key, int64_t lo, int64_t hi) const { return as_int(need(key), at(key), lo, hi); }
  int64_t integer_or(const char* key, int64_t lo, int64_t hi, int64_t fallback) const {
    return has(key) ? integer(key, lo, hi) : fallback;
  }
  uint64_t u64(const char* key) const {
    const auto& o = need(key);
    if (o.type != msgpack::type::POSITIVE_INTEGER) throw ProtocolError(at(key), "must be a non-negative integer");
    return o.via.u64;
  }
  double number(const char* key, double lo, double hi) const { return as_number(need(key), at(key), lo, hi); }
  bool boolean(const char* key) const {
    const auto& o = need(key);
    if (o.type != msgpack::type::BOOLEAN) throw ProtocolError(at(key), std::string("must be a boolean, not ") + kind(o));
    return o.via.boolean;
  }
  std::string string(const char* key, size_t max_len) const {
    const auto& o = need(key);
    if (o.type != msgpack::type::STR) throw ProtocolError(at(key), std::string("must be a string, not ") + kind(o));
    if (o.via.str.size > max_len) throw ProtocolError(at(key), "longer than " + std::to_string(max_len) + " bytes");
    return std::string(o.via.str.ptr, o.via.str.size);
  }
  // Arrays are checked element by element; the field path is only built for an error (pools
  // carry thousands of entries per round).
  template <typename T>
  std::vector<T> int_array(const char* key, size_t max_len, int64_t lo, int64_t hi) const {
    const auto& a = array(key, max_len);
    std::vector<T> out(a.size);
    for (uint32_t i = 0; i < a.size; ++i) {
      const msgpack::object& o = a.ptr[i];
      const bool in_range = o.type == msgpack::type::POSITIVE_INTEGER
                                ? o.via.u64 <= static_cast<uint64_t>(hi) && static_cast<int64_t>(o.via.u64) >= lo
                                : o.type == msgpack::type::NEGATIVE_INTEGER && o.via.i64 >= lo && o.via.i64 <= hi;
      if (!in_range) as_int(o, element(key, i), lo, hi);  // throws with the element's path
      out[i] = static_cast<T>(o.type == msgpack::type::POSITIVE_INTEGER ? static_cast<int64_t>(o.via.u64) : o.via.i64);
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
  std::string element(const char* key, uint32_t i) const { return at(key) + "[" + std::to_string(i) + "]"; }

 private:
  const msgpack::object_array& array(const char* key, size_t max_len) const {
    const auto& o = need(key);
    if (o.type != msgpack::type::ARRAY) throw ProtocolError(at(key), std::string("must be an array, not ") + kind(o));
    if (o.via.array.size > max_len)
      throw ProtocolError(at(key), "holds " + std::to_string(o.via.array.size) + " entries, more than " +
                                       std::to_string(max_len));
    return o.via.array;
  }
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
    if (o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64) v = o.via.f64;
    else if (o.type == msgpack::type::POSITIVE_INTEGER) v = static_cast<double>(o.via.u64);
    else if (o.type == msgpack::type::NEGATIVE_INTEGER) v = static_cast<double>(o.via.i64);
    else throw ProtocolError(where, std::string("must be a number, not ") + kind(o));
    if (std::isnan(v) || v < lo || v > hi)
      throw ProtocolError(where, "must be a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  }

  const msgpack::object_map* map_;
  std::string path_;
};

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint32_t kTraceFields = 13;  // entries of one RoundTrace on the wire
constexpr int64_t kMaxVocab = 1 << 24;

PoolShape read_shape(const MapReader& r) {
  r.only({"top_k", "depth", "expand", "sparse", "rheo_m", "adhoc_proxy"});
  PoolShape s;
  s.top_k = static_cast<int>(r.integer("top_k", 1, 1024));
  s.depth = static_cast<int>(r.integer("depth", 1, 64));
  s.expand = static_cast<int>(r.integer("expand", 1, 1024));
  s.sparse = static_cast<int>(r.integer("sparse", 0, kMaxVocab));
  s.rheo_m = static_cast<int>(r.integer("rheo_m", -1, 1023));
  s.adhoc_proxy = r.number("adhoc_proxy", 0.0, 1.0);
  if (s.rheo_m >= s.top_k) throw ProtocolError(r.at("rheo_m"), "must be below top_k");
  if (s.expected_size() > kMaxPoolNodes) throw ProtocolError(r.at("top_k"), "pool shape too large");
  return s;
}

}  // namespace

const char* message_type_name(MessageType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t.name;
  return "?";
}

// ---- encoders -----------------------------------------------------------------------------

std::string encode(const Header& h, const HelloBody& b) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  begin(pk, h, 2 + !b.nccl_id.empty() + !b.shm.empty());
  field(pk, "pid", b.pid);
  field(pk, "vocab", b.vocab);
  if (!b.nccl_id.empty()) field(pk, "nccl_id", b.nccl_id);
  if (!b.shm.empty()) field(pk, "shm", b.shm);
  return finish(buf);
}

std::string encode_nccl_announcement(const Header& h, size_t bytes) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  begin(pk, h, 1);
  field(pk, "nccl_bytes", static_cast<uint64_t>(bytes));
  return finish(buf);
}

std::string encode(const Header& h, const ReadyBody& b) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  begin(pk, h, 3);
  field(pk, "pid", b.pid);
  field(pk, "vocab", b.vocab);
  field(pk, "model", b.model);
  return finish(buf);
}

std::string encode(const Header& h, const PrefillBody& b) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  begin(pk, h, 3);
  field(pk, "prompt", b.prompt);
  pack_shape(pk, b.shape);
  field(pk, "draft_seed", b.draft_seed);
  return finish(buf);
}

std::string encode(const Header& h, const CommitBody& b) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  begin(pk, h, 1);
  field(pk, "tokens", b.tokens);
  return finish(buf);
}

std::string encode(const Header& h, const PoolBody& b) {
  const Pool& p = b.pool;
  msgpack::sbuffer buf;
  Packer pk(&buf);
  begin(pk, h, 13);
  field(pk, "token", p.token);
  field(pk, "parent", p.parent);
  field(pk, "logq", p.logq);
  // uint8_t vectors would pack as binary: flags travel as integer arrays.
  field(pk, "expanded", std::vector<int>(p.expanded.begin(), p.expanded.end()));
  field(pk, "sampled", std::vector<int>(p.sampled.begin(), p.sampled.end()));
  field(pk, "q_true", p.q_true);
  field(pk, "rheo_m", p.rheo_m);
  field(pk, "row_start", p.row_start);
  field(pk, "row_len", p.row_len);
  field(pk, "row_token", p.row_token);
  field(pk, "row_prob", p.row_prob);
  field(pk, "draft_start_ns", b.draft_start_ns);
  field(pk, "draft_end_ns", b.draft_end_ns);
  return finish(buf);
}

std::string encode(const Header& h, const ErrorBody& b) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  begin(pk, h, 2);
  field(pk, "field", b.field);
  field(pk, "message", b.message);
  return finish(buf);
}

std::string encode(const Header& h, const GenerateBody& b) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  begin(pk, h, 10);
  if (b.has_prompt_ids) field(pk, "prompt_ids", b.prompt_ids);
  else field(pk, "prompt", b.prompt);
  field(pk, "raw", b.raw);
  field(pk, "max_new_tokens", b.max_new_tokens);
  field(pk, "temperature", b.temperature);
  field(pk, "rule", b.rule);
  field(pk, "verifier", b.verifier);
  field(pk, "budget", b.budget);
  field(pk, "seed", b.seed);
  field(pk, "stream", b.stream);
  field(pk, "stop_at_eos", b.stop_at_eos);
  return finish(buf);
}

std::string encode(const Header& h, const DeltaBody& b) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  begin(pk, h, 2);
  field(pk, "tokens", b.tokens);
  field(pk, "text", b.text);
  return finish(buf);
}

std::string encode(const Header& h, const DoneBody& b) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  begin(pk, h, 14);
  field(pk, "stop_reason", b.stop_reason);
  field(pk, "tokens", b.tokens);
  field(pk, "tokens_to_eos", b.tokens_to_eos);
  field(pk, "rounds", b.rounds);
  field(pk, "ms_prefill", b.ms_prefill);
  field(pk, "ms_drafter_wait", b.ms_drafter_wait);
  field(pk, "ms_root_pass", b.ms_root_pass);
  field(pk, "ms_tree_pass", b.ms_tree_pass);
  field(pk, "ms_verify", b.ms_verify);
  field(pk, "ms_commit", b.ms_commit);
  field(pk, "prefill_start_ns", b.prefill_start_ns);
  field(pk, "last_commit_ns", b.last_commit_ns);
  field(pk, "tokens_per_second", b.tokens_per_second);
  pk.pack("trace");
  pk.pack_array(static_cast<uint32_t>(b.trace.size()));
  for (const RoundTrace& t : b.trace) {
    pk.pack_array(kTraceFields);
    pk.pack(t.commit_sent_ns);
    pk.pack(t.root_start_ns);
    pk.pack(t.root_end_ns);
    pk.pack(t.draft_start_ns);
    pk.pack(t.draft_end_ns);
    pk.pack(t.pool_received_ns);
    pk.pack(t.accepted);
    pk.pack(t.emitted);
    pk.pack(t.tree_nodes);
    pk.pack(t.tree_pass_skipped);
    pk.pack(t.tree_pass_ns);
    pk.pack(t.verify_ns);
    pk.pack(t.commit_ns);
  }
  return finish(buf);
}

std::string encode_empty(const Header& h) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  begin(pk, h, 0);
  return finish(buf);
}

// ---- decoders -----------------------------------------------------------------------------

struct Message::Impl {
  msgpack::object_handle handle;
  const msgpack::object* body = nullptr;
};

Message::Message(const void* data, size_t size) : impl_(new Impl) {
  if (size > kMaxMessageBytes)
    throw ProtocolError("message", std::to_string(size) + " bytes, more than the limit of " +
                                       std::to_string(kMaxMessageBytes));
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
    if (v != kProtocolVersion)
      throw ProtocolError("v", "protocol version " + std::to_string(v) + " is not the supported " +
                                   std::to_string(kProtocolVersion));
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

namespace {
void expect_type(const Header& h, MessageType want) {
  if (h.type != want)
    throw ProtocolError("type", std::string("expected ") + message_type_name(want) + ", got " +
                                    message_type_name(h.type));
}
}  // namespace

HelloBody Message::hello() const {
  expect_type(header_, MessageType::Hello);
  const MapReader r(*impl_->body, "body");
  r.only({"pid", "vocab", "nccl_id", "shm"});
  HelloBody b;
  b.pid = static_cast<int32_t>(r.integer("pid", 1, std::numeric_limits<int32_t>::max()));
  b.vocab = static_cast<int32_t>(r.integer("vocab", 1, kMaxVocab));
  if (r.has("nccl_id")) b.nccl_id = r.string("nccl_id", 1024);
  if (r.has("shm")) b.shm = r.string("shm", 255);
  if (!b.nccl_id.empty() && !b.shm.empty()) throw ProtocolError("body.shm", "a Hello names both NCCL and shared memory");
  return b;
}

bool Message::is_nccl_announcement() const {
  if (header_.type != MessageType::Pool) return false;
  return MapReader(*impl_->body, "body").has("nccl_bytes");
}

size_t Message::nccl_bytes() const {
  expect_type(header_, MessageType::Pool);
  const MapReader r(*impl_->body, "body");
  r.only({"nccl_bytes"});
  return static_cast<size_t>(r.integer("nccl_bytes", 1, kMaxMessageBytes));
}

ReadyBody Message::ready() const {
  expect_type(header_, MessageType::Ready);
  const MapReader r(*impl_->body, "body");
  r.only({"pid", "vocab", "model"});
  ReadyBody b;
  b.pid = static_cast<int32_t>(r.integer("pid", 1, std::numeric_limits<int32_t>::max()));
  b.vocab = static_cast<int32_t>(r.integer("vocab", 1, kMaxVocab));
  b.model = r.string("model", 4096);
  return b;
}

PrefillBody Message::prefill() const {
  expect_type(header_, MessageType::Prefill);
  const MapReader r(*impl_->body, "body");
  r.only({"prompt", "shape", "draft_seed"});
  PrefillBody b;
  b.prompt = r.int_array<int32_t>("prompt", kMaxTokens, 0, kMaxVocab - 1);
  if (b.prompt.empty()) throw ProtocolError("body.prompt", "must hold at least one token");
  b.shape = read_shape(r.map("shape"));
  b.draft_seed = r.u64("draft_seed");
  return b;
}

CommitBody Message::commit() const {
  expect_type(header_, MessageType::Commit);
  const MapReader r(*impl_->body, "body");
  r.only({"tokens"});
  CommitBody b;
  b.tokens = r.int_array<int32_t>("tokens", kMaxTokens, 0, kMaxVocab - 1);
  if (b.tokens.empty()) throw ProtocolError("body.tokens", "must hold at least one token");
  return b;
}

PoolBody Message::pool() const {
  expect_type(header_, MessageType::Pool);
  const MapReader r(*impl_->body, "body");
  r.only({"token", "parent", "logq", "expanded", "sampled", "q_true", "rheo_m", "row_start",
          "row_len", "row_token", "row_prob", "draft_start_ns", "draft_end_ns"});
  PoolBody b;
  Pool& p = b.pool;
  const auto tokens = r.int_array<int32_t>("token", kMaxPoolNodes, 0, kMaxVocab - 1);
  const auto parents = r.int_array<int32_t>("parent", kMaxPoolNodes, -1, kMaxPoolNodes);
  const auto logq = r.number_array<double>("logq", kMaxPoolNodes, -kInf, 0.0);
  const auto expanded = r.int_array<uint8_t>("expanded", kMaxPoolNodes, 0, 1);
  const auto sampled = r.int_array<uint8_t>("sampled", kMaxPoolNodes, 0, 1);
  const auto q_true = r.number_array<float>("q_true", kMaxPoolNodes, 0.0, 1.0);
  const size_t n = tokens.size();
  for (const char* k : {"parent", "logq", "expanded", "sampled", "q_true"}) {
    const size_t len = std::string(k) == "parent" ? parents.size() : std::string(k) == "logq" ? logq.size()
                     : std::string(k) == "expanded" ? expanded.size() : std::string(k) == "sampled" ? sampled.size()
                     : q_true.size();
    if (len != n) throw ProtocolError(r.at(k), "has " + std::to_string(len) + " entries, token has " + std::to_string(n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (parents[i] >= static_cast<int32_t>(i))
      throw ProtocolError("body.parent[" + std::to_string(i) + "]", "must be -1 or an earlier node");
    p.add(tokens[i], parents[i], logq[i]);
    p.expanded[i] = expanded[i];
    p.sampled[i] = sampled[i];
    p.q_true[i] = q_true[i];
  }
  p.rheo_m = static_cast<int>(r.integer("rheo_m", -1, 1023));
  p.row_start = r.int_array<int32_t>("row_start", kMaxPoolNodes + 1, -1, std::numeric_limits<int32_t>::max());
  p.row_len = r.int_array<int32_t>("row_len", kMaxPoolNodes + 1, 0, kMaxVocab);
  p.row_token = r.int_array<int32_t>("row_token", kMaxTokens, 0, kMaxVocab - 1);
  p.row_prob = r.number_array<float>("row_prob", kMaxTokens, 0.0, 1.0);
  if (!p.row_start.empty() && p.row_start.size() != n + 1)
    throw ProtocolError("body.row_start", "must be empty or hold one entry per node plus the root");
  if (p.row_len.size() != p.row_start.size()) throw ProtocolError("body.row_len", "must match row_start");
  if (p.row_prob.size() != p.row_token.size()) throw ProtocolError("body.row_prob", "must match row_token");
  for (size_t i = 0; i < p.row_start.size(); ++i)
    if (p.row_start[i] >= 0 && static_cast<size_t>(p.row_start[i]) + p.row_len[i] > p.row_token.size())
      throw ProtocolError("body.row_start[" + std::to_string(i) + "]", "points past row_token");
  b.draft_start_ns = r.integer("draft_start_ns", 0, std::numeric_limits<int64_t>::max());
  b.draft_end_ns = r.integer("draft_end_ns", 0, std::numeric_limits<int64_t>::max());
  return b;
}

ErrorBody Message::error() const {
  expect_type(header_, MessageType::Error);
  const MapReader r(*impl_->body, "body");
  r.only({"field", "message"});
  return {r.string("field", 4096), r.string("message", 1 << 16)};
}

GenerateBody Message::generate() const {
  expect_type(header_, MessageType::Generate);
  const MapReader r(*impl_->body, "body");
  r.only({"prompt", "prompt_ids", "raw", "max_new_tokens", "temperature", "rule", "verifier",
          "budget", "seed", "stream", "stop_at_eos"});
  GenerateBody b;
  if (r.has("prompt") == r.has("prompt_ids"))
    throw ProtocolError("body.prompt", "give exactly one of prompt (text) and prompt_ids");
  if (r.has("prompt")) b.prompt = r.string("prompt", 16u << 20);
  if (r.has("prompt_ids")) {
    b.has_prompt_ids = true;
    b.prompt_ids = r.int_array<int32_t>("prompt_ids", kMaxTokens, 0, std::numeric_limits<int32_t>::max());
    if (b.prompt_ids.empty()) throw ProtocolError("body.prompt_ids", "must hold at least one token");
  }
  if (r.has("raw")) b.raw = r.boolean("raw");
  b.max_new_tokens = static_cast<int32_t>(r.integer_or("max_new_tokens", -1, 1 << 20, -1));
  if (r.has("temperature")) b.temperature = r.number("temperature", -1.0, 100.0);
  if (r.has("rule")) b.rule = r.string("rule", 64);
  if (r.has("verifier")) b.verifier = r.string("verifier", 64);
  b.budget = static_cast<int32_t>(r.integer_or("budget", -1, 1 << 20, -1));
  if (r.has("seed")) b.seed = r.u64("seed");
  if (r.has("stream")) b.stream = r.boolean("stream");
  if (r.has("stop_at_eos")) b.stop_at_eos = r.boolean("stop_at_eos");
  return b;
}

DeltaBody Message::delta() const {
  expect_type(header_, MessageType::Delta);
  const MapReader r(*impl_->body, "body");
  r.only({"tokens", "text"});
  return {r.int_array<int32_t>("tokens", kMaxTokens, 0, kMaxVocab - 1), r.string("text", 16u << 20)};
}

DoneBody Message::done() const {
  expect_type(header_, MessageType::Done);
  const MapReader r(*impl_->body, "body");
  DoneBody b;
  b.stop_reason = r.string("stop_reason", 64);
  b.tokens = r.int_array<int32_t>("tokens", kMaxTokens, 0, kMaxVocab - 1);
  b.tokens_to_eos = static_cast<int32_t>(r.integer("tokens_to_eos", 0, kMaxTokens));
  b.rounds = static_cast<int32_t>(r.integer("rounds", 0, kMaxTokens));
  b.ms_prefill = r.number("ms_prefill", 0, kInf);
  b.ms_drafter_wait = r.number("ms_drafter_wait", 0, kInf);
  b.ms_root_pass = r.number("ms_root_pass", 0, kInf);
  b.ms_tree_pass = r.number("ms_tree_pass", 0, kInf);
  b.ms_verify = r.number("ms_verify", 0, kInf);
  b.ms_commit = r.number("ms_commit", 0, kInf);
  b.prefill_start_ns = r.integer("prefill_start_ns", 0, std::numeric_limits<int64_t>::max());
  b.last_commit_ns = r.integer("last_commit_ns", 0, std::numeric_limits<int64_t>::max());
  b.tokens_per_second = r.number("tokens_per_second", 0, kInf);
  const msgpack::object& trace = r.need("trace");
  if (trace.type != msgpack::type::ARRAY) throw ProtocolError("body.trace", "must be an array");
  for (uint32_t i = 0; i < trace.via.array.size; ++i) {
    const auto& row = trace.via.array.ptr[i];
    const std::string where = "body.trace[" + std::to_string(i) + "]";
    if (row.type != msgpack::type::ARRAY || row.via.array.size != kTraceFields)
      throw ProtocolError(where, "must be an array of " + std::to_string(kTraceFields) + " entries");
    const auto* v = row.via.array.ptr;
    for (uint32_t k = 0; k < kTraceFields; ++k)
      if (!is_int(v[k]) && v[k].type != msgpack::type::BOOLEAN) throw ProtocolError(where, "entries must be integers");
    RoundTrace t;
    t.commit_sent_ns = v[0].as<int64_t>();
    t.root_start_ns = v[1].as<int64_t>();
    t.root_end_ns = v[2].as<int64_t>();
    t.draft_start_ns = v[3].as<int64_t>();
    t.draft_end_ns = v[4].as<int64_t>();
    t.pool_received_ns = v[5].as<int64_t>();
    t.accepted = v[6].as<int32_t>();
    t.emitted = v[7].as<int32_t>();
    t.tree_nodes = v[8].as<int32_t>();
    t.tree_pass_skipped = v[9].type == msgpack::type::BOOLEAN ? v[9].via.boolean : v[9].as<int>() != 0;
    t.tree_pass_ns = v[10].as<int64_t>();
    t.verify_ns = v[11].as<int64_t>();
    t.commit_ns = v[12].as<int64_t>();
    b.trace.push_back(t);
  }
  return b;
}

void Message::empty_body() const {
  const MapReader r(*impl_->body, "body");
  r.only({});
}

}  // namespace rootspec
