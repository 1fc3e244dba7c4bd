#include "table_model.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "rng.h"

namespace rootspec {

namespace {
constexpr int64_t kMaxTableEntries = 50'000'000;  // rows × vocab, per table

std::string key_string(int64_t key, int vocab, int order) {
  std::vector<int> ids(order);
  for (int i = order - 1; i >= 0; --i) {
    ids[i] = static_cast<int>(key % vocab);
    key /= vocab;
  }
  std::string s;
  for (int i = 0; i < order; ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

// Parses "a,b,…" (exactly `order` ids in [0, vocab)); −1 when it is not such a key.
int64_t parse_key(const std::string& s, int vocab, int order) {
  int64_t key = 0;
  int count = 0;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 9)
      return -1;
    const long id = std::stol(part);
    if (id >= vocab) return -1;
    key = key * vocab + id;
    ++count;
  }
  if (!s.empty() && s.back() == ',') return -1;
  return count == order ? key : -1;
}

void read_table(const nlohmann::json& j, const char* name, int vocab, int order, int64_t n_keys,
                std::vector<float>& out) {
  if (!j.contains(name)) throw TableModelError(std::string("missing key \"") + name + "\"");
  const auto& t = j.at(name);
  if (!t.is_object()) throw TableModelError(std::string("\"") + name + "\" must be an object");
  out.assign(n_keys * vocab, 0.0f);
  std::vector<uint8_t> seen(n_keys, 0);
  for (const auto& [k, row] : t.items()) {
    const std::string where = std::string(name) + "[\"" + k + "\"]";
    const int64_t key = parse_key(k, vocab, order);
    if (key < 0)
      throw TableModelError("bad key " + where + ": want " + std::to_string(order) +
                            " comma-separated ids below vocab_size " + std::to_string(vocab));
    if (seen[key]) throw TableModelError("duplicate key " + where);
    seen[key] = 1;
    if (!row.is_array() || static_cast<int>(row.size()) != vocab)
      throw TableModelError("row " + where + " must be an array of " + std::to_string(vocab) +
                            " probabilities");
    double sum = 0.0;
    for (int i = 0; i < vocab; ++i) {
      if (!row[i].is_number())
        throw TableModelError("row " + where + " holds a non-number at " + std::to_string(i));
      const double p = row[i].get<double>();
      if (!(p >= 0.0) || !std::isfinite(p))
        throw TableModelError("row " + where + " has a negative or non-finite probability at " +
                              std::to_string(i));
      out[key * vocab + i] = static_cast<float>(p);
      sum += p;
    }
    if (std::fabs(sum - 1.0) > 1e-6)
      throw TableModelError("row " + where + " sums to " + std::to_string(sum) + ", not 1");
  }
  for (int64_t key = 0; key < n_keys; ++key)
    if (!seen[key])
      throw TableModelError(std::string("missing row ") + name + "[\"" + key_string(key, vocab, order) +
                            "\"]");
}
}  // namespace

int64_t TableModel::key_of(const std::vector<int32_t>& seq) const {
  int64_t key = 0;
  for (size_t i = seq.size() - order_; i < seq.size(); ++i) key = key * vocab_ + seq[i];
  return key;
}

TableModel TableModel::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw TableModelError("the model must be a JSON object");
  static const std::set<std::string> known = {"vocab_size", "order", "context", "target", "draft"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) throw TableModelError("unknown key \"" + k + "\"");
  for (const char* k : {"vocab_size", "order", "context"})
    if (!j.contains(k)) throw TableModelError(std::string("missing key \"") + k + "\"");
  TableModel m;
  if (!j["vocab_size"].is_number_integer() || j["vocab_size"].get<int64_t>() < 2 ||
      j["vocab_size"].get<int64_t>() > 1'000'000)
    throw TableModelError("\"vocab_size\" must be an integer in [2, 1000000]");
  if (!j["order"].is_number_integer() || j["order"].get<int64_t>() < 1 || j["order"].get<int64_t>() > 16)
    throw TableModelError("\"order\" must be an integer in [1, 16]");
  m.vocab_ = j["vocab_size"].get<int>();
  m.order_ = j["order"].get<int>();
  m.n_keys_ = 1;
  for (int i = 0; i < m.order_; ++i) {
    m.n_keys_ *= m.vocab_;
    if (m.n_keys_ * m.vocab_ > kMaxTableEntries)
      throw TableModelError("vocab_size^(order+1) is too large for a table model");
  }
  const auto& ctx = j["context"];
  if (!ctx.is_array() || static_cast<int>(ctx.size()) != m.order_)
    throw TableModelError("\"context\" must be an array of " + std::to_string(m.order_) + " ids");
  for (const auto& t : ctx) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= m.vocab_)
      throw TableModelError("\"context\" ids must be integers in [0, vocab_size)");
    m.context_.push_back(t.get<int32_t>());
  }
  read_table(j, "target", m.vocab_, m.order_, m.n_keys_, m.target_);
  read_table(j, "draft", m.vocab_, m.order_, m.n_keys_, m.draft_);
  return m;
}

TableModel TableModel::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw TableModelError("cannot open " + path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::parse_error& e) {
    throw TableModelError(path + ": not valid JSON: " + e.what());
  }
  try {
    return from_json(j);
  } catch (const TableModelError& e) {
    throw TableModelError(path + ": " + e.what());
  }
}

nlohmann::json TableModel::to_json() const {
  nlohmann::json j;
  j["vocab_size"] = vocab_;
  j["order"] = order_;
  j["context"] = context_;
  for (const char* name : {"target", "draft"}) {
    const auto& table = std::string(name) == "target" ? target_ : draft_;
    nlohmann::json t = nlohmann::json::object();
    for (int64_t key = 0; key < n_keys_; ++key) {
      std::vector<double> row(table.begin() + key * vocab_, table.begin() + (key + 1) * vocab_);
      t[key_string(key, vocab_, order_)] = row;
    }
    j[name] = t;
  }
  return j;
}

TableModel TableModel::random(int vocab, int order, uint64_t seed, double sharpness, double draft_mix) {
  Rng rng(seed);
  TableModel m;
  m.vocab_ = vocab;
  m.order_ = order;
  m.n_keys_ = 1;
  for (int i = 0; i < order; ++i) m.n_keys_ *= vocab;
  for (int i = 0; i < order; ++i) m.context_.push_back(static_cast<int32_t>(rng.next_u64() % vocab));
  auto random_row = [&](float* out) {
    // Exponentiated uniforms: a few tokens carry most of the mass, as in language models.
    double sum = 0.0;
    std::vector<double> w(vocab);
    for (int i = 0; i < vocab; ++i) sum += w[i] = std::exp(sharpness * 3.0 * rng.uniform());
    for (int i = 0; i < vocab; ++i) out[i] = static_cast<float>(w[i] / sum);
  };
  m.target_.resize(m.n_keys_ * vocab);
  m.draft_.resize(m.n_keys_ * vocab);
  std::vector<float> other(vocab);
  for (int64_t key = 0; key < m.n_keys_; ++key) {
    float* t = &m.target_[key * vocab];
    float* d = &m.draft_[key * vocab];
    random_row(t);
    random_row(other.data());
    double sum = 0.0;
    for (int i = 0; i < vocab; ++i) sum += d[i] = (1 - draft_mix) * t[i] + draft_mix * other[i];
    for (int i = 0; i < vocab; ++i) d[i] = static_cast<float>(d[i] / sum);
  }
  return m;
}

}  // namespace rootspec
