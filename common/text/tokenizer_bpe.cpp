#include "tokenizer_bpe.h"

#include "utf8.h"
#include "utf8_nfc.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

namespace rootspec {
namespace {

using json = nlohmann::json;

// GPT-2's byte <-> printable character table: bytes that are printable Latin-1 stand for
// themselves, the rest are shifted to U+0100 and up.
std::array<uint32_t, 256> byte_to_char() {
  std::array<uint32_t, 256> t{};
  uint32_t n = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    t[b] = keep ? b : 256 + n++;
  }
  return t;
}

// Raw bytes of a byte-level token string; false when it has a character outside the table.
bool byte_level_decode(const std::string& s, std::string& out) {
  static const auto table = byte_to_char();
  static const auto inverse = [] {
    std::array<int, 324> inv{};
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[table[b]] = b;
    return inv;
  }();
  out.clear();
  if (!utf8_is_valid(s)) return false;
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = utf8_next(s, i);
    if (cp >= inverse.size() || inverse[cp] < 0) return false;
    out.push_back(static_cast<char>(inverse[cp]));
  }
  return true;
}

// JavaScript's String.prototype.trim whitespace (the same set as \s).
bool js_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

std::string_view trim_end(std::string_view s) {
  while (!s.empty()) {
    size_t b = s.size() - 1;
    while (b > 0 && (static_cast<uint8_t>(s[b]) & 0xC0) == 0x80) --b;
    size_t i = b;
    if (!js_space(utf8_next(s, i))) break;
    s = s.substr(0, b);
  }
  return s;
}

std::string_view trim_start(std::string_view s) {
  while (!s.empty()) {
    size_t i = 0;
    if (!js_space(utf8_next(s, i))) break;
    s = s.substr(i);
  }
  return s;
}

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::runtime_error(file + ": " + what);
}

std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}/-").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// A token named in tokenizer_config.json: a plain string or {"content": ...}.
std::string config_token(const json& cfg, const char* key) {
  if (!cfg.contains(key) || cfg[key].is_null()) return {};
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v["content"].get<std::string>();
  return {};
}

uint64_t hash_key(uint64_t k) { return (k * 0x9E3779B97F4A7C15ull) ^ (k >> 29); }

}  // namespace

BpeTokenizer::~BpeTokenizer() = default;

const BpeTokenizer::Merge* BpeTokenizer::find_merge(token_id a, token_id b) const {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  const size_t mask = merges_.size() - 1;
  for (size_t i = hash_key(key) & mask;; i = (i + 1) & mask) {
    const Merge& m = merges_[i];
    if (m.key == key) return &m;
    if (m.key == ~0ull) return nullptr;
  }
}

void BpeTokenizer::add_merge(token_id a, token_id b, int32_t rank, token_id merged) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  const size_t mask = merges_.size() - 1;
  for (size_t i = hash_key(key) & mask;; i = (i + 1) & mask) {
    Merge& m = merges_[i];
    if (m.key == key || m.key == ~0ull) {  // a repeated pair keeps its last rank, as the peer's Map does
      m = Merge{key, rank, merged};
      return;
    }
  }
}

namespace {

std::string read_whole(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, "cannot open");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Token ids are dense in real vocabularies ([0, entries), added tokens after them): an id past
// twice the entries (plus slack) is refused, so that a hostile file cannot make the loader size
// its tables by it.
token_id checked_id(const json& v, size_t entries, const std::string& path, const std::string& what) {
  if (!v.is_number_integer()) fail(path, what + ": the id must be an integer, not " + v.dump());
  const int64_t limit = static_cast<int64_t>(std::min<size_t>(2 * entries + 1024, INT32_MAX));
  const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() < static_cast<uint64_t>(limit)
                                               : v.get<int64_t>() >= 0 && v.get<int64_t>() < limit;
  if (!in_range) fail(path, what + ": id " + v.dump() + " is outside [0, " + std::to_string(limit) + ")");
  return static_cast<token_id>(v.get<int64_t>());
}

}  // namespace

std::unique_ptr<BpeTokenizer> BpeTokenizer::load(const std::string& path, const std::string& config_path) {
  return from_text(read_whole(path), path, config_path.empty() ? "" : read_whole(config_path), config_path);
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_text(const std::string& text, const std::string& path,
                                                      const std::string& config_text,
                                                      const std::string& config_path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    fail(path, std::string("not valid JSON: ") + e.what());
  }
  try {
    return from_json(j, path, config_text, config_path);
  } catch (const json::exception& e) {  // a missing key or a wrong type somewhere in the file
    fail(path, e.what());
  }
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_json(const json& j, const std::string& path,
                                                      const std::string& config_text,
                                                      const std::string& config_path) {
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());

  // model
  if (!j.is_object()) fail(path, "not a JSON object");
  const json& model = j.at("model");
  if (model.value("type", "") != "BPE")
    fail(path, "model.type must be BPE, got " + model.value("type", std::string("(none)")));
  if (model.contains("byte_fallback") && model["byte_fallback"] == true)
    fail(path, "BPE byte_fallback is not supported");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(k) && model[k].is_string() && !model[k].get<std::string>().empty())
      fail(path, std::string("BPE ") + k + " is not supported");
  }
  t->ignore_merges_ = model.value("ignore_merges", false);

  const json& vocab = model.at("vocab");
  if (!vocab.is_object()) fail(path, "model.vocab must be an object");
  const json added = j.value("added_tokens", json::array());
  if (!added.is_array()) fail(path, "added_tokens must be an array");
  const size_t entries = vocab.size() + added.size();
  auto set_id = [&](token_id id, std::string raw, uint8_t kind) {
    if (static_cast<size_t>(id) >= t->bytes_.size()) {
      t->bytes_.resize(id + 1);
      t->kind_.resize(id + 1, 0);
    }
    t->bytes_[id] = std::move(raw);
    t->kind_[id] = kind;
  };
  std::string raw;
  for (const auto& [text, idj] : vocab.items()) {
    const token_id id = checked_id(idj, entries, path, "model.vocab \"" + text + "\"");
    // A token that is not byte-level can never come out of BPE on bytes; it keeps its text.
    if (byte_level_decode(text, raw)) {
      t->by_bytes_.emplace(raw, id);
      set_id(id, raw, 1);
    } else {
      set_id(id, text, 1);
    }
    t->by_text_.emplace(text, id);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = t->by_bytes_.find(std::string(1, static_cast<char>(b)));
    if (it == t->by_bytes_.end())
      fail(path, "byte-level vocabulary lacks a token for byte " + std::to_string(b));
    t->byte_id_[b] = it->second;
  }

  const json& merges = model.at("merges");
  if (!merges.is_array()) fail(path, "model.merges must be an array");
  size_t cap = 16;
  while (cap < merges.size() * 2) cap <<= 1;
  t->merges_.assign(cap, Merge{});
  std::string left, right, lraw, rraw;
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& m = merges[r];
    if (m.is_array() && m.size() == 2) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else if (m.is_string()) {
      // "a b": the peer takes the first two space-separated fields.
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos) fail(path, "merge " + std::to_string(r) + " \"" + s + "\" has no space");
      const size_t sp2 = s.find(' ', sp + 1);
      left = s.substr(0, sp);
      right = s.substr(sp + 1, sp2 == std::string::npos ? std::string::npos : sp2 - sp - 1);
    } else {
      fail(path, "merge " + std::to_string(r) + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    if (!byte_level_decode(left, lraw) || !byte_level_decode(right, rraw))
      fail(path, "merge " + std::to_string(r) + " is not byte-level");
    const auto li = t->by_bytes_.find(lraw), ri = t->by_bytes_.find(rraw),
               mi = t->by_bytes_.find(lraw + rraw);
    if (li == t->by_bytes_.end() || ri == t->by_bytes_.end() || mi == t->by_bytes_.end()) {
      fail(path, "merge " + std::to_string(r) + " (" + left + " " + right +
                     ") uses a token that is not in the vocabulary");
    }
    t->add_merge(li->second, ri->second, static_cast<int32_t>(r), mi->second);
  }

  // added tokens
  for (const json& a : added) {
    AddedToken at;
    at.content = a.at("content").get<std::string>();
    at.id = checked_id(a.at("id"), entries, path, "added token \"" + at.content + "\"");
    at.special = a.value("special", false);
    at.lstrip = a.value("lstrip", false);
    at.rstrip = a.value("rstrip", false);
    if (at.content.empty()) fail(path, "added token " + std::to_string(at.id) + " is empty");
    set_id(at.id, at.content, at.special ? 3 : 2);
    t->by_text_[at.content] = at.id;
    t->added_.push_back(at);
  }
  for (uint32_t i = 0; i < t->added_.size(); ++i)
    t->added_by_first_[static_cast<uint8_t>(t->added_[i].content[0])].push_back(i);
  for (auto& v : t->added_by_first_) {
    std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) {
      return t->added_[a].content.size() > t->added_[b].content.size();
    });
  }

  // normalizer
  std::function<void(const json&)> normalizer = [&](const json& n) {
    if (n.is_null()) return;
    const std::string type = n.value("type", "");
    if (type == "NFC") {
      t->nfc_ = true;
    } else if (type == "Sequence") {
      for (const json& s : n.at("normalizers")) normalizer(s);
    } else {
      fail(path, "normalizer " + type + " is not supported (supported: NFC, Sequence)");
    }
  };
  normalizer(j.value("normalizer", json()));

  // pre-tokenizer
  std::function<void(const json&)> pre = [&](const json& p) {
    if (p.is_null()) return;
    const std::string type = p.value("type", "");
    if (type == "Sequence") {
      for (const json& s : p.at("pretokenizers")) pre(s);
    } else if (type == "Split") {
      const std::string behavior = p.value("behavior", "");
      if (behavior != "Isolated")
        fail(path, "Split behavior " + behavior + " is not supported (supported: Isolated)");
      const json& pat = p.at("pattern");
      std::string rx;
      if (pat.contains("Regex")) {
        rx = pat["Regex"].get<std::string>();
      } else if (pat.contains("String")) {
        rx = regex_escape(pat["String"].get<std::string>());
      } else {
        fail(path, "Split pattern needs Regex or String");
      }
      PreStep s;
      try {
        s.regex = std::make_unique<RegexSplitter>(rx);
      } catch (const std::exception& e) {
        fail(path, e.what());
      }
      s.keep_gaps = !p.value("invert", false);
      t->pre_.push_back(std::move(s));
    } else if (type == "ByteLevel") {
      PreStep s;
      s.prefix_space = p.value("add_prefix_space", false);
      if (p.value("use_regex", true)) {
        // The GPT-2 pattern transformers.js uses for ByteLevel(use_regex=true); only matches are kept.
        s.regex = std::make_unique<RegexSplitter>(
            "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+");
        s.keep_gaps = false;
      }
      // Byte-level mapping itself is implicit: merges work on raw bytes here.
      if (s.regex || s.prefix_space) t->pre_.push_back(std::move(s));
    } else {
      fail(path, "pre_tokenizer " + type + " is not supported (supported: Sequence, Split, ByteLevel)");
    }
  };
  pre(j.value("pre_tokenizer", json()));

  // post-processor: what add_special puts around the text
  std::function<void(const json&)> post = [&](const json& p) {
    if (p.is_null()) return;
    const std::string type = p.value("type", "");
    if (type == "ByteLevel") return;  // changes offsets only
    if (type == "Sequence") {
      for (const json& s : p.at("processors")) post(s);
      return;
    }
    if (type != "TemplateProcessing")
      fail(path, "post_processor " + type +
                     " is not supported (supported: ByteLevel, TemplateProcessing, Sequence)");
    t->prefix_.clear();
    t->suffix_.clear();
    bool seen_a = false;
    for (const json& piece : p.at("single")) {
      if (piece.contains("Sequence")) {
        seen_a = true;
        continue;
      }
      const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
      const token_id id = t->find_token(name);
      if (id < 0) fail(path, "post_processor names unknown token " + name);
      (seen_a ? t->suffix_ : t->prefix_).push_back(id);
    }
  };
  post(j.value("post_processor", json()));

  const json dec = j.value("decoder", json());
  if (dec.is_null() || dec.value("type", "") != "ByteLevel") fail(path, "decoder must be ByteLevel");

  if (!config_text.empty()) {
    json cfg;
    try {
      cfg = json::parse(config_text);
      if (!cfg.is_object()) fail(config_path, "not a JSON object");
    } catch (const json::exception& e) {
      fail(config_path, std::string("not valid JSON: ") + e.what());
    }
    std::string bos, eos;
    try {
      bos = config_token(cfg, "bos_token");
      eos = config_token(cfg, "eos_token");
    } catch (const json::exception& e) {
      fail(config_path, e.what());
    }
    if (!bos.empty()) t->bos_ = t->find_token(bos);
    if (!eos.empty()) t->eos_ = t->find_token(eos);
  }
  return t;
}

const std::string& BpeTokenizer::token_bytes(token_id id) const {
  if (id < 0 || static_cast<size_t>(id) >= bytes_.size() || kind_[id] == 0)
    throw std::out_of_range("token id " + std::to_string(id) + " is not in the vocabulary");
  return bytes_[id];
}

bool BpeTokenizer::is_special(token_id id) const {
  return id >= 0 && static_cast<size_t>(id) < kind_.size() && kind_[id] == 3;
}

token_id BpeTokenizer::find_token(std::string_view text) const {
  auto it = by_text_.find(std::string(text));
  return it == by_text_.end() ? -1 : it->second;
}

std::vector<token_id> BpeTokenizer::encode(std::string_view input, bool add_special) const {
  std::string clean;
  std::string_view text = input;
  if (!utf8_is_valid(input)) {
    clean = utf8_sanitize(input);
    text = clean;
  }

  // Cut the text at added tokens (longest match at the leftmost position).
  struct Section {
    std::string_view text;
    int added = -1;  // index into added_
  };
  std::vector<Section> sections;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const auto& cand = added_by_first_[static_cast<uint8_t>(text[i])];
    int hit = -1;
    for (uint32_t a : cand) {
      const std::string& c = added_[a].content;
      if (text.compare(i, c.size(), c) == 0) {
        hit = static_cast<int>(a);
        break;
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    if (i > start) sections.push_back({text.substr(start, i - start)});
    sections.push_back({std::string_view(added_[hit].content), hit});
    i += added_[hit].content.size();
    start = i;
  }
  if (start < text.size()) sections.push_back({text.substr(start)});
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].added < 0) continue;
    const AddedToken& a = added_[sections[i].added];
    if (a.lstrip && i > 0 && sections[i - 1].added < 0) sections[i - 1].text = trim_end(sections[i - 1].text);
    if (a.rstrip && i + 1 < sections.size() && sections[i + 1].added < 0)
      sections[i + 1].text = trim_start(sections[i + 1].text);
  }

  std::vector<token_id> out;
  out.reserve(text.size() / 3 + 8);
  if (add_special) out.insert(out.end(), prefix_.begin(), prefix_.end());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Section& s : sections) {
      if (s.added >= 0) {
        out.push_back(added_[s.added].id);
      } else if (!s.text.empty()) {
        encode_section(s.text, out);
      }
    }
  }
  if (add_special) out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

void BpeTokenizer::encode_section(std::string_view section, std::vector<token_id>& out) const {
  std::string normalized;
  if (nfc_ && !utf8_nfc_quick_check(section)) {
    normalized = utf8_nfc(section);
    section = normalized;
  }
  if (section.empty()) return;

  std::vector<std::string_view> pieces{section}, next;
  std::vector<std::string> owned;  // prefixed pieces; reserved so views stay valid
  for (const PreStep& step : pre_) {
    next.clear();
    if (step.prefix_space) owned.reserve(owned.size() + pieces.size());
    for (std::string_view p : pieces) {
      if (step.prefix_space && (p.empty() || p[0] != ' ')) {
        owned.push_back(" " + std::string(p));
        p = owned.back();
      }
      if (step.regex) {
        step.regex->split(p, next, step.keep_gaps);
      } else {
        next.push_back(p);
      }
    }
    pieces.swap(next);
  }
  for (std::string_view p : pieces) bpe(p, out);
}

// Byte-pair merging by rank, lowest rank first and leftmost first among equal ranks (the order
// the peer's priority queue gives). A heap of candidate pairs keeps long words O(n log n).
void BpeTokenizer::bpe(std::string_view word, std::vector<token_id>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    out.push_back(byte_id_[static_cast<uint8_t>(word[0])]);
    return;
  }
  std::string key(word);
  if (ignore_merges_) {
    auto it = by_bytes_.find(key);
    if (it != by_bytes_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() < 256;
  if (cacheable) {
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }

  struct Sym {
    token_id id;
    int32_t prev, next;
    bool alive;
  };
  struct Cand {
    int32_t rank, left, right;
    token_id left_id, right_id, merged;
    bool operator<(const Cand& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }  // min-heap
  };
  const int32_t n = static_cast<int32_t>(word.size());
  std::vector<Sym> sym(n);
  std::vector<Cand> heap;
  heap.reserve(n);
  for (int32_t i = 0; i < n; ++i)
    sym[i] = {byte_id_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  auto push = [&](int32_t l, int32_t r) {
    if (const Merge* m = find_merge(sym[l].id, sym[r].id)) {
      heap.push_back({m->rank, l, r, sym[l].id, sym[r].id, m->merged});
      std::push_heap(heap.begin(), heap.end());
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) {  // initial pairs: heapify once, O(n)
    if (const Merge* m = find_merge(sym[i].id, sym[i + 1].id))
      heap.push_back({m->rank, i, i + 1, sym[i].id, sym[i + 1].id, m->merged});
  }
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Cand c = heap.back();
    heap.pop_back();
    Sym& l = sym[c.left];
    Sym& r = sym[c.right];
    if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id || r.id != c.right_id)
      continue;  // stale
    l.id = c.merged;
    l.next = r.next;
    r.alive = false;
    if (l.next >= 0) sym[l.next].prev = c.left;
    if (l.prev >= 0) push(l.prev, c.left);
    if (l.next >= 0) push(c.left, l.next);
  }
  const size_t first = out.size();
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
  if (cacheable) {
    if (cache_.size() >= (1u << 17)) cache_.clear();  // bounded memory; hits come from short common words
    cache_.emplace(std::move(key), std::vector<token_id>(out.begin() + first, out.end()));
  }
}

}  // namespace rootspec
