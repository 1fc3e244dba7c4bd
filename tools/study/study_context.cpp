#include "study_context.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace rootspec {

nlohmann::json context_to_json(const StudyContext& c) {
  return {{"temperature", c.temperature}, {"prompt", c.prompt},   {"prompt_id", c.prompt_id},
          {"position", c.position},       {"context", c.context}, {"token", c.pool.token},
          {"parent", c.pool.parent},      {"logq", c.pool.logq},  {"root_row", c.root_row},
          {"edge_prob", c.edge_prob}};
}

StudyContext context_from_json(const nlohmann::json& j) {
  StudyContext c;
  try {
    c.temperature = j.at("temperature").get<double>();
    c.prompt = j.at("prompt").get<int>();
    c.prompt_id = j.at("prompt_id").get<std::string>();
    c.position = j.at("position").get<int>();
    c.context = j.at("context").get<std::vector<int32_t>>();
    c.pool.token = j.at("token").get<std::vector<int32_t>>();
    c.pool.parent = j.at("parent").get<std::vector<int32_t>>();
    // JSON has no −inf: a zero draft probability is written as null.
    for (const auto& v : j.at("logq")) c.pool.logq.push_back(v.is_null() ? -INFINITY : v.get<double>());
    c.root_row = j.at("root_row").get<std::vector<float>>();
    c.edge_prob = j.at("edge_prob").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("study context: ") + e.what());
  }
  const size_t n = c.pool.token.size();
  if (c.pool.parent.size() != n || c.pool.logq.size() != n || c.edge_prob.size() != n)
    throw std::runtime_error("study context: token, parent, logq and edge_prob differ in length");
  if (c.context.empty()) throw std::runtime_error("study context: empty context");
  if (c.root_row.empty()) throw std::runtime_error("study context: empty root row");
  c.pool.expanded.assign(n, 0);
  c.pool.sampled.assign(n, 0);
  c.pool.q_true.assign(n, 0.0f);
  const int bad = c.pool.derive_paths();
  if (bad >= 0)
    throw std::runtime_error("study context: pool node " + std::to_string(bad) + " has a bad parent");
  for (size_t u = 0; u < n; ++u)
    if (c.pool.token[u] < 0 || c.pool.token[u] >= c.vocab())
      throw std::runtime_error("study context: pool token outside the root row's vocabulary");
  return c;
}

std::vector<double> pool_path_probs(const StudyContext& c) {
  std::vector<double> P(c.pool.size());  // [pool]
  for (int u = 0; u < c.pool.size(); ++u) {
    const int p = c.pool.parent[u];
    P[u] = (p == kRoot ? 1.0 : P[p]) * c.edge_prob[u];
  }
  return P;
}

StudyContext restrict_to_top(const StudyContext& c, int m) {
  if (m >= c.pool.size()) return c;
  std::vector<int> kept = ranked(c.pool);
  kept.resize(std::max(m, 0));
  std::sort(kept.begin(), kept.end());
  std::vector<int> index_of(c.pool.size(), -1);
  for (size_t i = 0; i < kept.size(); ++i) index_of[kept[i]] = static_cast<int>(i);
  StudyContext out = c;
  out.pool.clear();
  out.edge_prob.clear();
  for (int u : kept) {
    const int p = c.pool.parent[u];
    if (p != kRoot && index_of[p] < 0)
      throw std::logic_error("restrict_to_top: the ranked cut is not ancestor-closed");
    out.pool.add(c.pool.token[u], p == kRoot ? kRoot : index_of[p], c.pool.logq[u]);
    out.edge_prob.push_back(c.edge_prob[u]);
  }
  return out;
}

}  // namespace rootspec
