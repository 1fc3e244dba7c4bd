#include "table_decode.h"

#include <memory>
#include <stdexcept>

#include <algorithm>
#include <cassert>

#include "rows.h"

namespace rootspec {

TableDrafter::TableDrafter(const TableModel& model, const std::vector<int32_t>& committed)
    : model_(model), root_key_(model.key_of(committed)) {}

void TableDrafter::draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) {
  // Pool nodes are append-only during growth: extend the key cache to the new ones.
  for (int u = static_cast<int>(keys_.size()); u < pool.size(); ++u) {
    const int p = pool.parent[u];
    keys_.push_back(model_.next_key(p == kRoot ? root_key_ : keys_[p], pool.token[u]));
  }
  if (pool.size() == 0) keys_.clear();
  const int V = model_.vocab();
  out.resize(nodes.size() * V);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const float* row = model_.draft_row(nodes[i] == kRoot ? root_key_ : keys_[nodes[i]]);
    std::copy(row, row + V, out.begin() + i * V);
  }
}

TableScorer::TableScorer(const TableModel& model, std::vector<int32_t> cached)
    : model_(model), cached_(std::move(cached)), root_(model.vocab()) {
  assert(static_cast<int>(cached_.size()) >= model.order() - 1);
}

int64_t TableScorer::key_after(int32_t token) const {
  int64_t prefix = 0;  // the last order − 1 cached tokens in base V
  for (size_t i = cached_.size() + 1 - static_cast<size_t>(std::max(model_.order(), 1)); i < cached_.size();
       ++i)
    prefix = prefix * model_.vocab() + cached_[i];
  return model_.next_key(prefix, token);
}

RowsView TableScorer::root_row(int32_t root_token, double temperature) {
  const int V = model_.vocab();
  temper_probs(model_.target_row(key_after(root_token)), V, temperature, root_.data());
  cached_.push_back(root_token);
  return RowsView{root_.data(), 1, V};
}

RowsView TableScorer::tree_rows(const TreePassInput& input, double temperature) {
  const int V = model_.vocab();
  const int n = static_cast<int>(input.tokens.size());
  std::vector<int64_t> keys(n);  // [1 + nodes] the table key after each pass row
  rows_.resize(static_cast<size_t>(n) * V);
  for (int i = 0; i < n; ++i) {
    const int p = input.parents[i];
    keys[i] = p < 0 ? key_after(input.tokens[i]) : model_.next_key(keys[p], input.tokens[i]);
    temper_probs(model_.target_row(keys[i]), V, temperature, &rows_[static_cast<size_t>(i) * V]);
  }
  pass_tokens_ = input.tokens;
  return RowsView{rows_.data(), n, V};
}

void TableScorer::commit(const std::vector<int32_t>& kept_pass_rows) {
  for (int row : kept_pass_rows) cached_.push_back(pass_tokens_[row]);
}

bool TableScorer::pool_path_probs(const Pool& pool, int32_t root_token, double temperature,
                                  std::vector<double>& out) {
  const int V = model_.vocab();
  const int64_t root_key = key_after(root_token);
  std::vector<int64_t> keys(pool.size());
  std::vector<float> row(V);
  out.assign(pool.size(), 0.0);
  for (int u = 0; u < pool.size(); ++u) {
    const int p = pool.parent[u];
    temper_probs(model_.target_row(p == kRoot ? root_key : keys[p]), V, temperature, row.data());
    out[u] = (p == kRoot ? 1.0 : out[p]) * row[pool.token[u]];
    keys[u] = model_.next_key(p == kRoot ? root_key : keys[p], pool.token[u]);
  }
  return true;
}

namespace {

// The table's drafter side: grows each round's pool below the committed context.
class TableRoundDrafter : public RoundDrafter {
 public:
  TableRoundDrafter(const TableModel& model, const PoolShape& shape, std::vector<int32_t> committed,
                    uint64_t draft_seed)
      : model_(model), shape_(shape), committed_(std::move(committed)), rng_(draft_seed), depth_(shape) {}
  const Pool& wait_pool(RoundRecord&) override {
    TableDrafter drafter(model_, committed_);
    PoolShape shape = shape_;
    shape.depth = depth_.next();
    depth_.sent(shape.depth);
    grow_pool(drafter, shape, pool_, &rng_);
    return pool_;
  }
  // As the daemon's Commits: the tokens of plain rounds go with the next pool's (DraftSession).
  void round_done(const std::vector<int32_t>& tokens, bool next_pool) override {
    committed_.insert(committed_.end(), tokens.begin(), tokens.end());
    unsent_ += static_cast<int>(tokens.size());
    if (!next_pool) return;
    depth_.learn(unsent_);
    unsent_ = 0;
  }

 private:
  const TableModel& model_;
  PoolShape shape_;
  std::vector<int32_t> committed_;  // C
  Rng rng_;                         // the drafter's own stream (Rheo tail draws)
  AdaptivePoolDepth depth_;         // PoolShape::adaptive_depth
  int unsent_ = 0;                  // tokens since the last pool's round, as the next Commit holds
  Pool pool_;
};

}  // namespace

std::vector<int32_t> table_decode(const TableModel& model, const RequestOptions& options,
                                  const PoolShape& shape, int min_tokens, Rng& rng,
                                  std::vector<RoundRecord>* records, const RoundHooks* hooks,
                                  const PolicyOptions* policy_options) {
  const std::vector<int32_t>& context = model.context();
  TableRoundDrafter drafter(model, shape, context, draw_drafter_seed(options, shape, rng));
  TableScorer target(model, std::vector<int32_t>(context.begin(), context.end() - 1));
  int32_t root = context.back();
  DecodingPolicy policy(policy_options ? *policy_options : table_policy_options());
  if (options.auto_rule && !policy.options().regime)
    throw std::invalid_argument("table_decode: auto needs a CostRegime here (PolicyOptions::regime)");
  PolicyRequest adaptive(policy, options.temperature, options.budget);
  SamplingContext sampling(context, options.sampling.grammar);
  std::vector<int32_t> emitted;
  while (emitted.size() < static_cast<size_t>(min_tokens)) {
    RoundRecord record;
    const RoundOutcome out = run_round(options, root, target, &drafter, rng, records ? &record : nullptr,
                                       hooks, &adaptive, &sampling);
    emitted.insert(emitted.end(), out.emitted.begin(), out.emitted.end());
    root = out.continuation;
    if (records) records->push_back(record);
  }
  return emitted;
}
std::vector<std::vector<int32_t>> table_decode_batch(const TableModel& model,
                                                     const std::vector<RequestOptions>& members,
                                                     const PoolShape& shape, int min_tokens, Rng& rng,
                                                     const RoundHooks* hooks, DecodingPolicy* policy) {
  const std::vector<int32_t>& context = model.context();
  // Each member's own state, built when it joins.
  struct Member {
    Rng rng;
    std::unique_ptr<TableRoundDrafter> drafter;
    std::unique_ptr<TableScorer> target;
    std::unique_ptr<PolicyRequest> adaptive;
    std::unique_ptr<SamplingContext> sampling;
    int32_t root = -1;
    std::vector<int32_t> emitted;
  };
  const int n = static_cast<int>(members.size());
  DecodingPolicy own_policy(table_policy_options());
  if (!policy) policy = &own_policy;
  std::vector<Member> state(n);
  for (Member& m : state) m.rng = Rng(rng.next_u64());
  for (int round = 0;; ++round) {
    std::vector<BatchMember> batch;
    std::vector<TargetScorer*> scorers;
    std::vector<int> who;  // batch index → member
    for (int i = 0; i < n && i <= round; ++i) {
      Member& m = state[i];
      if (m.emitted.size() >= static_cast<size_t>(min_tokens)) continue;  // done: left the batch
      if (!m.target) {                                                    // joins now
        m.drafter = std::make_unique<TableRoundDrafter>(model, shape, context,
                                                        draw_drafter_seed(members[i], shape, m.rng));
        m.target =
            std::make_unique<TableScorer>(model, std::vector<int32_t>(context.begin(), context.end() - 1));
        m.adaptive = std::make_unique<PolicyRequest>(*policy, members[i].temperature, members[i].budget);
        m.sampling = std::make_unique<SamplingContext>(context, members[i].sampling.grammar);
        m.root = context.back();
      }
      BatchMember b;
      b.options = &members[i];
      b.root_token = m.root;
      b.drafter = m.drafter.get();
      b.rng = &m.rng;
      b.policy = m.adaptive.get();
      b.sampling = m.sampling.get();
      batch.push_back(b);
      scorers.push_back(m.target.get());
      who.push_back(i);
    }
    if (batch.empty() && round >= n) break;
    if (batch.empty()) continue;
    EachOwnScorer target(scorers);
    run_batched_round(batch, target, hooks);
    for (size_t k = 0; k < batch.size(); ++k) {
      Member& m = state[who[k]];
      m.emitted.insert(m.emitted.end(), batch[k].outcome.emitted.begin(), batch[k].outcome.emitted.end());
      m.root = batch[k].outcome.continuation;
    }
  }
  std::vector<std::vector<int32_t>> out;
  for (Member& m : state) out.push_back(std::move(m.emitted));
  return out;
}

const CostRegime& table_regime() {
  static const CostRegime regime{"table", 0.15, 0.05, 0.2, 0.0, 0.1, 0.0};
  return regime;
}

PolicyOptions table_policy_options() {
  PolicyOptions o;
  o.regime = &table_regime();
  // Every round may explore the shape measured longest ago, measured from its first round: the
  // law tests' first tokens then come from plain, root-draw and draft rounds alike.
  o.settle_rounds = 0;
  o.explore_rounds = 1;
  o.explore_share = 1.0;
  o.explore_min_loss = 0.0;
  return o;
}

std::vector<double> exact_joint(const TableModel& model, double temperature, int n) {
  RequestOptions options;
  options.temperature = temperature;
  return exact_joint(model, options, n);
}

std::vector<double> exact_joint(const TableModel& model, const RequestOptions& options, int n) {
  const int V = model.vocab();
  const bool processed = options.sampling.processes_rows();
  const SamplingContext committed(model.context(), options.sampling.grammar);
  std::vector<float> logits(V);
  RowScratch scratch;
  std::vector<int32_t> path;
  int64_t cells = 1;
  for (int i = 0; i < n; ++i) cells *= V;
  std::vector<double> joint(cells, 0.0);
  std::vector<float> row(V);
  // Depth-first over prefixes: (key, probability, index so far, depth).
  struct Frame {
    int64_t key;
    double prob;
    int64_t index;
    int depth;
  };
  std::vector<Frame> stack{{model.key_of(model.context()), 1.0, 0, 0}};
  while (!stack.empty()) {
    const Frame f = stack.back();
    stack.pop_back();
    if (f.depth == n) {
      joint[f.index] += f.prob;
      continue;
    }
    if (processed) {  // the row of the context + the f.depth tokens of f.index (base V)
      path.assign(f.depth, 0);
      for (int64_t i = f.index, d = f.depth - 1; d >= 0; --d, i /= V) path[d] = static_cast<int32_t>(i % V);
      temper_probs(model.target_row(f.key), V, kLogitRows, logits.data());
      process_logits(logits.data(), V, options.sampling, options.temperature, committed, path.data(), f.depth,
                     row.data(), scratch);
    } else {
      temper_probs(model.target_row(f.key), V, options.temperature, row.data());
    }
    double total = 0.0;
    for (int t = 0; t < V; ++t) total += row[t];
    for (int t = 0; t < V; ++t)
      if (row[t] > 0)
        stack.push_back({model.next_key(f.key, t), f.prob * row[t] / total, f.index * V + t, f.depth + 1});
  }
  return joint;
}

}  // namespace rootspec
