#include "decoding_policy.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "draft_tree.h"
#include "round.h"

namespace rootspec {

namespace {
constexpr Shape kAllShapes[] = {Shape::Plain, Shape::RootPass, Shape::DraftOnly};
int index(Mode m) { return static_cast<int>(m); }
int index(Shape s) { return static_cast<int>(s); }
// The shape a first mode leads (PolicyOptions::first_mode): draft only where drafting is allowed.
Shape shape_led_by(Mode mode, bool allow_draft) {
  if (mode == Mode::Plain) return Shape::Plain;
  return mode == Mode::Draft && allow_draft ? Shape::DraftOnly : Shape::RootPass;
}
// A speculative member's expected tree-pass rows at budget B: draft's anchor and B nodes;
// root-draw's y (the anchor) and its B − 1 descendants, skipped where the draw leaves level one
// (chance s).
double mode_rows(Mode mode, double skip, int budget) {
  return mode == Mode::RootDraw ? (1.0 - skip) * budget : budget + 1.0;
}
// The exact part of E: root-draw's y and continuation, or y alone where it leaves level one
// (2 − s); draft's continuation (1).
double exact_tokens(Mode m, double skip) { return m == Mode::RootDraw ? 2.0 - skip : 1.0; }

// Dinkelbach's iteration for the choice of the most tokens per unit of time (Σ E / time): at the
// rate λ of the best choice so far (0 at first), `choose(λ, &tokens, &ms)` makes the choice that
// maximises E − λ · time and gives its tokens and time; each choice whose rate beats λ is kept
// (`keep()`) and becomes the next λ, until the rate stops rising (16 steps at most). Returns the
// best rate, or −1 where a choice's time is unknown (ms ≤ 0): that choice is then the last made.
template <class Choose, class Keep>
double dinkelbach(Choose choose, Keep keep) {
  double rate = 0;
  for (int iteration = 0; iteration < 16; ++iteration) {
    double tokens = 0, ms = 0;
    choose(rate, &tokens, &ms);
    if (ms <= 0) return -1;
    const double r = tokens / ms;
    if (r <= rate * (1 + 1e-9)) break;
    rate = r;
    keep();
  }
  return rate;
}
}  // namespace

int temperature_key(double temperature) { return static_cast<int>(temperature * 100 + 0.5); }

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::Plain:
      return "ar";
    case Mode::RootDraw:
      return "root-draw";
    case Mode::Draft:
      return "draft";
  }
  return "?";
}

const char* shape_name(Shape shape) {
  switch (shape) {
    case Shape::Plain:
      return "plain";
    case Shape::RootPass:
      return "root-pass";
    case Shape::DraftOnly:
      return "draft-only";
  }
  return "?";
}

Mode lead_mode(Shape shape) {
  switch (shape) {
    case Shape::Plain:
      return Mode::Plain;
    case Shape::RootPass:
      return Mode::RootDraw;
    case Shape::DraftOnly:
      return Mode::Draft;
  }
  return Mode::Plain;
}

void apply_regime(const CostRegime& g, RoundTimes& t) {
  auto pass = [&](int rows) { return rows > 0 ? g.pass_ms + g.row_ms * rows : 0.0; };
  const double overhead = g.overhead_ms + g.overhead_member_ms * t.members;
  t.root_ms = pass(t.root_rows);
  t.tree_ms = pass(t.tree_rows);
  if (t.speculating == 0) {
    t.root_unhidden_ms = -1;
    t.wall_ms = t.root_ms + overhead;
    return;
  }
  const double drafting = g.draft_ms + g.draft_member_ms * t.speculating;
  t.root_unhidden_ms = std::max(0.0, t.root_ms - drafting);
  t.wall_ms = std::max(t.root_ms, drafting) + t.tree_ms + overhead;
}

// ---------------------------------------------------------------------------------------------
// Acceptance

double DecodingPolicy::Acceptance::edge_acceptance(double q) const {
  const int bin = std::clamp(static_cast<int>(q * kEdgeBins), 0, kEdgeBins - 1);
  return std::min(1.0, q * (edge_accepted[bin] + 1.0) / (edge_q[bin] + 1.0));  // a prior of one q
}

double DecodingPolicy::Acceptance::calibration(Mode m) const {
  return (accepted[index(m)] + 1.0) / (expected[index(m)] + 1.0);  // a prior of one token as expected
}

double DecodingPolicy::Acceptance::calibrated(Mode m, double tokens, double skip) const {
  const double exact = exact_tokens(m, skip);
  return exact + calibration(m) * (tokens - exact);
}

DecodingPolicy::Acceptance& DecodingPolicy::acceptance(double temperature) {
  Acceptance& a = acceptance_[temperature_key(temperature)];
  if (a.skip.empty()) {
    const size_t n = opt_.budgets.size();
    for (auto& t : a.table) t.assign(n, 0.0);
    for (auto& t : a.table_n) t.assign(n, 0);
    a.skip.assign(n, 0.0);
  }
  return a;
}

bool DecodingPolicy::table(double temperature, Mode mode, int b, double* tokens, double* skip) const {
  const auto it = acceptance_.find(temperature_key(temperature));
  if (it == acceptance_.end() || it->second.table_n[index(mode)][b] == 0) return false;
  const Acceptance& a = it->second;
  *tokens = a.calibrated(mode, a.table[index(mode)][b], a.skip[b]);
  if (skip) *skip = a.skip[b];
  return true;
}

int DecodingPolicy::budget_index_limit(int max_budget) const {
  int n = 0;
  while (n < static_cast<int>(opt_.budgets.size()) && opt_.budgets[n] <= max_budget) ++n;
  return std::max(n, 1);  // a request's B below every candidate: the smallest (capped at its B)
}

void DecodingPolicy::root_draw_curve(const Acceptance& a, const SelectionInputs& in,
                                     std::vector<double>& tokens, double& skip) const {
  const Pool& pool = *in.pool;
  const std::vector<int> level = level_one(pool);
  std::vector<std::vector<double>> sums(level.size());  // [level one][descendants kept] prefix sums of D
  std::vector<double> path(pool.size(), 0.0);           // [pool] Π â(q) from y down to the node
  double in_level_one = 0;
  for (size_t i = 0; i < level.size(); ++i) {
    const int y = level[i];
    in_level_one += in.root_probs[pool.token[y]];
    double s = 0;
    sums[i].push_back(0.0);
    path[y] = 1.0;
    for (int u : ranked_descendants(pool, y)) {  // ancestors first: scores fall along a path
      path[u] = path[pool.parent[u]] * a.edge_acceptance(std::exp(pool.logq[u]));
      s += path[u];
      sums[i].push_back(s);
    }
  }
  skip = std::max(0.0, 1.0 - in_level_one);
  const int n = budget_index_limit(in.budget);
  tokens.assign(n, skip);
  for (int b = 0; b < n; ++b) {
    const int budget = std::min(opt_.budgets[b], std::max(in.budget, 1));
    for (size_t i = 0; i < level.size(); ++i) {
      const double d = sums[i][std::min<size_t>(budget - 1, sums[i].size() - 1)];
      tokens[b] += in.root_probs[pool.token[level[i]]] * (2.0 + d);
    }
  }
}

void DecodingPolicy::draft_curve(const Acceptance& a, const SelectionInputs& in,
                                 std::vector<double>& guess) const {
  const Pool& pool = *in.pool;
  std::vector<double> path(pool.size(), 0.0);   // [pool] Π â(q) from C down to the node
  const std::vector<int> order = ranked(pool);  // ancestors first (draft selection's order)
  const int n = budget_index_limit(in.budget);
  guess.assign(n, 0.0);
  double s = 0;
  int taken = 0, b = 0;
  for (int u : order) {
    if (b >= n) break;
    const int p = pool.parent[u];
    path[u] = (p == kRoot ? 1.0 : path[p]) * a.edge_acceptance(std::exp(pool.logq[u]));
    s += path[u];
    ++taken;
    while (b < n && std::min(opt_.budgets[b], std::max(in.budget, 1)) <= taken) guess[b++] = s;
  }
  for (; b < n; ++b) guess[b] = s;  // a pool smaller than the budget
}

// ---------------------------------------------------------------------------------------------
// Requests and estimates

PolicyRequest::PolicyRequest(DecodingPolicy& policy, double temperature, int budget)
    : policy_(&policy),
      temperature_(temperature),
      max_budget_(std::max(budget, 1)),
      mode_(policy.start_mode()),
      next_(mode_) {}

// A request starts in the shape running: its first round's pool (or none) is asked for before
// the round, and the shape is what the batch's estimates favour now.
Mode DecodingPolicy::start_mode() const { return lead_mode(shape_); }

DecodingPolicy::DecodingPolicy(PolicyOptions options)
    : opt_(std::move(options)),
      plain_(opt_.forgetting),
      base_(opt_.forgetting),
      tree_(opt_.forgetting),
      unhidden_(opt_.forgetting),
      shape_(shape_led_by(opt_.first_mode, opt_.allow_draft)) {
  assert(!opt_.budgets.empty());
}

bool DecodingPolicy::measured(Mode mode) const {
  switch (mode) {
    case Mode::Plain:
      return plain_.measured();
    case Mode::RootDraw:
      return base_.measured() && tree_.measured() && unhidden_.measured();
    case Mode::Draft:
      return base_.measured() && tree_.measured();
  }
  return false;
}

double DecodingPolicy::expected_tokens(double temperature, Mode mode, int budget) const {
  if (mode == Mode::Plain) return 1.0;
  double tokens = 0;
  return table(temperature, mode, budget_index_limit(budget) - 1, &tokens, nullptr) ? tokens : 0.0;
}

double DecodingPolicy::calibration(double temperature, Mode mode) const {
  const auto it = acceptance_.find(temperature_key(temperature));
  return it == acceptance_.end() || mode == Mode::Plain ? 1.0 : it->second.calibration(mode);
}

int DecodingPolicy::member_rounds(double temperature, Mode mode) const {
  auto it = member_rounds_.find(temperature_key(temperature));
  return it == member_rounds_.end() ? 0 : it->second[index(mode)];
}

double DecodingPolicy::round_ms(int members, int root_rows, double tree_rows, bool all_plain) const {
  if (all_plain) return plain_.measured() ? plain_.at(members) : -1;
  if (!base_.measured() || (tree_rows > 0 && !tree_.measured()) || (root_rows > 0 && !unhidden_.measured()))
    return -1;
  return base_.at(members) + (root_rows > 0 ? unhidden_.at(root_rows) : 0.0) +
         (tree_rows > 0 ? tree_.at(tree_rows) : 0.0);
}

// A member's worth in a round at the batch's rate λ: E − λ · the time its rows add; the best
// candidate budget in *budget_index. −inf where its estimates are missing.
double DecodingPolicy::member_value(const PolicyMember& m, Mode mode, double lambda, double row_ms,
                                    double root_row_ms, int* budget_index) const {
  *budget_index = 0;
  if (mode == Mode::Plain) return 1.0 - lambda * root_row_ms;
  const int n = budget_index_limit(m.request->max_budget_);
  double best = -INFINITY;
  for (int b = 0; b < n; ++b) {
    double tokens = 0, skip = 0;
    if (!table(m.request->temperature(), mode, b, &tokens, &skip)) continue;
    const double rows = mode_rows(mode, skip, std::min(opt_.budgets[b], m.request->max_budget_));
    const double v = tokens - lambda * (rows * row_ms + (mode == Mode::RootDraw ? root_row_ms : 0.0));
    if (v > best) best = v, *budget_index = b;
  }
  return best;
}

double DecodingPolicy::best_modes(const std::vector<PolicyMember>& members, Shape shape,
                                  std::vector<Mode>& modes, double* round_ms_out) const {
  const int n = static_cast<int>(members.size());
  modes.clear();  // stays empty where an estimate is missing
  // The modes a member may take under the shape: plain only; beside a root pass root-draw, and in
  // a batch also plain or draft (members whose acceptance differs may differ); draft alone
  // without one. A lone member's shape is its mode.
  std::vector<Mode> allowed = {lead_mode(shape)};
  if (shape == Shape::RootPass && n > 1) allowed.push_back(Mode::Plain);
  if (shape == Shape::RootPass && n > 1 && opt_.allow_draft) allowed.push_back(Mode::Draft);
  const double row_ms = std::max(0.0, tree_.slope()), root_row_ms = std::max(0.0, unhidden_.slope());
  std::vector<Mode> trial;
  double trial_ms = 0;
  const double rate = dinkelbach(
      [&](double lambda, double* tokens, double* ms) {
        trial.assign(n, Mode::Plain);
        double tree_rows = 0;
        int root_rows = 0;
        bool all_plain = true;
        for (int k = 0; k < n; ++k) {
          const PolicyMember& m = members[k];
          if (!m.request) {  // a fixed member: one token or its tree, as its rule says
            *tokens += 1.0;
            if (m.plain)
              ++root_rows;
            else
              tree_rows += m.budget + 1, all_plain = false;
            continue;
          }
          double best = -INFINITY;
          int b = 0, best_b = 0;
          for (Mode mode : allowed) {
            const double v = member_value(m, mode, lambda, row_ms, root_row_ms, &b);
            if (v == -INFINITY) {  // a mode the shape offers was never measured at this temperature
              *ms = -1;
              return;
            }
            if (v > best) best = v, trial[k] = mode, best_b = b;
          }
          const Mode mode = trial[k];
          if (mode == Mode::Plain) {
            *tokens += 1.0, ++root_rows;
            continue;
          }
          all_plain = false;
          double e = 0, skip = 0;
          table(m.request->temperature(), mode, best_b, &e, &skip);
          *tokens += e;
          tree_rows += mode_rows(mode, skip, std::min(opt_.budgets[best_b], m.request->max_budget_));
          if (mode == Mode::RootDraw) ++root_rows;
        }
        *ms = trial_ms = round_ms(n, root_rows, tree_rows, all_plain);
      },
      [&] { modes = trial, *round_ms_out = trial_ms; });
  if (rate < 0) {
    modes.clear();
    return 0.0;
  }
  return rate;
}

// ---------------------------------------------------------------------------------------------
// The round's calls

void DecodingPolicy::before_round(const std::vector<PolicyMember>& members) {
  bool any = false;
  for (const PolicyMember& m : members) any = any || m.request;
  if (!any) return;
  std::array<double, kShapes> rate{}, ms{};      // [shape] estimated rate and round time
  std::array<std::vector<Mode>, kShapes> modes;  // [shape] each member's best mode under it
  for (Shape s : kAllShapes)
    if (s != Shape::DraftOnly || opt_.allow_draft)
      rate[index(s)] = best_modes(members, s, modes[index(s)], &ms[index(s)]);
  last_rates_ = rate;
  if (explore_left_ > 0) {
    shape_ = exploring_;
  } else {
    Shape best = shape_;
    for (Shape s : kAllShapes)
      if (rate[index(s)] > rate[index(best)]) best = s;
    if (rate[index(shape_)] > 0 && rate[index(best)] > rate[index(shape_)] * (1 + opt_.margin)) shape_ = best;
    // Exploration: the shape the estimates know least about (never measured first, then the
    // oldest), once the credit pays for what it is expected to lose: its rounds' time less the
    // time the running shape would take for their tokens.
    const double running = rate[index(shape_)];
    if (running > 0) {
      Shape pick = shape_;
      double pick_cost = 0;
      int pick_age = -1;
      for (Shape s : kAllShapes) {
        if (s == shape_ || (s == Shape::DraftOnly && !opt_.allow_draft)) continue;
        const bool unknown = rate[index(s)] <= 0;
        const double loss = unknown ? 0.0 : std::max(opt_.explore_min_loss, 1.0 - rate[index(s)] / running);
        const double cost = (opt_.explore_rounds + opt_.settle_rounds) * ms[index(s)] * loss;
        const int age = unknown ? INT32_MAX : shape_age_[index(s)];
        if (cost <= credit_ms_ && age > pick_age) pick = s, pick_cost = cost, pick_age = age;
      }
      if (pick != shape_) {
        credit_ms_ -= pick_cost;
        explore_from_ = shape_;
        exploring_ = shape_ = pick;
        explore_left_ = opt_.explore_rounds;
        ++explorations_;
      }
    }
  }
  std::vector<Mode>& chosen = modes[index(shape_)];
  if (chosen.size() != members.size()) {  // the shape's estimates are missing: its lead mode
    chosen.assign(members.size(), lead_mode(shape_));
  }
  for (size_t k = 0; k < members.size(); ++k) {
    PolicyRequest* r = members[k].request;
    if (!r) continue;
    // This round: plain where plain was announced (its drafter grows no pool); else the shape's
    // speculative mode where the choice would now be plain (the pool is on its way).
    Mode now = chosen[k];
    if (r->next_ == Mode::Plain)
      now = Mode::Plain;
    else if (now == Mode::Plain)
      now = shape_ == Shape::DraftOnly ? Mode::Draft : Mode::RootDraw;
    if ((now == Mode::Plain) != (r->mode_ == Mode::Plain)) r->settled_ = 0;
    r->mode_ = now;
    r->expected_ = 0;  // until choose_budgets
    r->curves_ = {};
    r->next_ = chosen[k];
  }
}

// A speculating member's curves E(B) from its pool (and root row, for root-draw), kept on the
// request for the acceptance table, and its tree rows at each candidate budget.
void DecodingPolicy::pool_curves(PolicyRequest& r, const SelectionInputs& in, std::vector<double>& rows) {
  const Acceptance& a = acceptance(r.temperature_);
  PolicyRequest::PoolCurves& c = r.curves_;
  draft_curve(a, in, c.draft);
  for (double& guess : c.draft) guess += 1.0;  // E = 1 + Σ Π â(q)
  c.root_draw.clear(), c.skip = 0;
  if (r.mode_ == Mode::RootDraw) root_draw_curve(a, in, c.root_draw, c.skip);
  const size_t n = r.mode_ == Mode::RootDraw ? c.root_draw.size() : c.draft.size();
  rows.clear();
  for (size_t b = 0; b < n; ++b)
    rows.push_back(mode_rows(r.mode_, c.skip, std::min(opt_.budgets[b], r.max_budget_)));
}

void DecodingPolicy::learn_pool_curves(PolicyRequest& r) {
  PolicyRequest::PoolCurves& c = r.curves_;
  Acceptance& a = acceptance(r.temperature_);
  auto learn = [&](Mode mode, int b, double e) {
    std::vector<double>& t = a.table[index(mode)];
    int& count = a.table_n[index(mode)][b];
    t[b] = count == 0 ? e : t[b] + opt_.forgetting * (e - t[b]);
    ++count;
  };
  for (size_t b = 0; b < c.draft.size(); ++b) learn(Mode::Draft, b, c.draft[b]);
  for (size_t b = 0; b < c.root_draw.size(); ++b) {
    learn(Mode::RootDraw, b, c.root_draw[b]);
    a.skip[b] += a.table_n[index(Mode::RootDraw)][b] == 1 ? c.skip - a.skip[b]
                                                          : opt_.forgetting * (c.skip - a.skip[b]);
  }
  c = {};
}

void DecodingPolicy::choose_budgets(const std::vector<PolicyMember>& members,
                                    const std::vector<SelectionInputs>& inputs) {
  assert(members.size() == inputs.size());
  const int n = static_cast<int>(members.size());
  // Each speculating `auto` member's E(B), calibrated, and tree rows; the others' tokens and rows.
  std::vector<std::vector<double>> calibrated(n), rows(n);  // [member][budget index]
  double fixed_tokens = 0, fixed_rows = 0;
  int root_rows = 0;
  for (int k = 0; k < n; ++k) {
    const PolicyMember& m = members[k];
    PolicyRequest* r = m.request;
    if (!r || r->mode_ == Mode::Plain) {
      fixed_tokens += 1;
      if (!r && !m.plain)
        fixed_rows += m.budget + 1;
      else
        ++root_rows;
      continue;
    }
    if (r->mode_ == Mode::RootDraw) ++root_rows;
    pool_curves(*r, inputs[k], rows[k]);
    const Acceptance& a = acceptance(r->temperature_);
    const PolicyRequest::PoolCurves& c = r->curves_;
    for (double e : r->mode_ == Mode::RootDraw ? c.root_draw : c.draft)
      calibrated[k].push_back(a.calibrated(r->mode_, e, c.skip));
  }
  // The members' budgets at the batch's rate λ.
  const double row_ms = std::max(0.0, tree_.slope());
  std::vector<int> trial(n, -1), pick(n, -1);
  const double rate = dinkelbach(
      [&](double lambda, double* tokens, double* ms) {
        trial.assign(n, -1);
        *tokens = fixed_tokens;
        double tree_rows = fixed_rows;
        for (int k = 0; k < n; ++k) {
          const std::vector<double>& e = calibrated[k];
          const std::vector<double>& r = rows[k];
          if (e.empty()) continue;
          int best = 0;
          for (size_t b = 1; b < e.size(); ++b)
            if (e[b] - lambda * row_ms * r[b] > e[best] - lambda * row_ms * r[best]) best = b;
          trial[k] = best;
          *tokens += e[best], tree_rows += r[best];
        }
        *ms = row_ms > 0 ? round_ms(n, root_rows, tree_rows, false) : -1;
      },
      [&] { pick = trial; });
  if (rate < 0) {  // rows cost nothing measurable: the most E
    pick = trial;
    // Until the tree passes span a range of rows, every other round halves the budgets, or the
    // line would never learn what a row costs.
    if (!tree_.spans() && ++unspanned_rounds_ % 2 == 0)
      for (int k = 0; k < n; ++k)
        if (pick[k] > 0) pick[k] /= 2;
  }
  for (int k = 0; k < n; ++k) {
    PolicyRequest* r = members[k].request;
    if (!r || r->mode_ == Mode::Plain) continue;
    const int b = pick[k] < 0 ? 0 : pick[k];
    const PolicyRequest::PoolCurves& c = r->curves_;
    r->budget_ = std::min(opt_.budgets[b], r->max_budget_);
    r->expected_ = (r->mode_ == Mode::RootDraw ? c.root_draw : c.draft)[b];
    r->exact_ = exact_tokens(r->mode_, c.skip);
  }
}

void DecodingPolicy::learn_tree(PolicyRequest& r, const Pool& pool, const DraftTree& tree,
                                const std::vector<int32_t>& accepted_nodes) {
  Acceptance& a = acceptance(r.temperature_);
  constexpr double kEdgeForget = 0.99;         // per edge seen in a bin: ~100 edges a bin
  std::vector<char> accepted(tree.size(), 0);  // [tree]
  for (int32_t v : accepted_nodes) accepted[v] = 1;
  for (int i = 0; i < tree.size(); ++i) {
    const int p = tree.parent[i];
    if ((p != kRoot && !accepted[p]) || tree.pool_index[i] < 0) continue;  // not reached
    const double q = std::exp(pool.logq[tree.pool_index[i]]);
    const int bin = std::clamp(static_cast<int>(q * Acceptance::kEdgeBins), 0, Acceptance::kEdgeBins - 1);
    a.edge_accepted[bin] = a.edge_accepted[bin] * kEdgeForget + accepted[i];
    a.edge_q[bin] = a.edge_q[bin] * kEdgeForget + q;
  }
}

void DecodingPolicy::after_round(const std::vector<PolicyMember>& members,
                                 const std::vector<const RoundRecord*>& records, RoundTimes t) {
  for (const PolicyMember& m : members)
    if (m.request) learn_pool_curves(*m.request);
  // c: the draft tokens each speculating member accepted against what was expected of them
  // (its emitted tokens beyond the exact part: y where followed into a tree pass, and the
  // continuation).
  const double keep = 1.0 - opt_.forgetting;
  for (size_t k = 0; k < members.size(); ++k) {
    PolicyRequest* r = members[k].request;
    if (!r || r->mode_ == Mode::Plain || k >= records.size() || !records[k] || r->expected_ <= 0) continue;
    const RoundRecord& rec = *records[k];
    const double exact = r->mode_ == Mode::RootDraw ? (rec.tree_pass_skipped ? 1.0 : 2.0) : 1.0;
    Acceptance& a = acceptance(r->temperature_);
    a.accepted[index(r->mode_)] = a.accepted[index(r->mode_)] * keep + std::max(0.0, rec.emitted - exact);
    a.expected[index(r->mode_)] = a.expected[index(r->mode_)] * keep + (r->expected_ - r->exact_);
  }
  bool any = false, settled = true;
  for (const PolicyMember& m : members) {
    if (!m.request) continue;
    any = true;
    settled = settled && m.request->settled_ >= opt_.settle_rounds;
  }
  if (opt_.regime) {
    apply_regime(*opt_.regime, t);
  } else if (last_end_ns_ > 0 && t.start_ns >= last_end_ns_) {
    // What the caller did between rounds (streaming, reading clients) is each round's cost too,
    // and plain rounds pay it per token more often; an idle gap longer than a round is not.
    t.wall_ms += std::min((t.start_ns - last_end_ns_) / 1e6, t.wall_ms);
  }
  last_end_ns_ = t.end_ns;
  time_ms_ += t.wall_ms;
  if (!any) return;
  if (explore_left_ > 0) explore_ms_ += t.wall_ms;
  credit_ms_ += opt_.explore_share * t.wall_ms;  // exploration's budget grows with the time served
  // The shape this round ran (a switch shows a round late: modes are announced a round ahead).
  Shape ran = Shape::Plain;
  int first_mode = -1;
  bool mixed = false;
  for (const PolicyMember& m : members) {
    if (!m.request) continue;
    PolicyRequest& r = *m.request;
    ++r.rounds_[index(r.mode_)];
    ++r.settled_;
    ++member_rounds_[temperature_key(r.temperature_)][index(r.mode_)];
    if (r.mode_ != Mode::Plain) ++budgets_chosen_[r.budget_];
    mixed = mixed || (first_mode >= 0 && first_mode != index(r.mode_));
    first_mode = index(r.mode_);
    if (r.mode_ == Mode::RootDraw) ran = Shape::RootPass;
    if (r.mode_ == Mode::Draft && ran == Shape::Plain) ran = Shape::DraftOnly;
  }
  mixed_rounds_ += mixed;
  for (int& age : shape_age_) ++age;
  if (!settled) return;
  shape_age_[index(ran)] = 0;
  if (t.speculating == 0) {
    if (t.tree_rows == 0) plain_.add(t.members, t.wall_ms);
  } else {
    const double unhidden =
        t.root_rows > 0 ? (t.root_unhidden_ms >= 0 ? t.root_unhidden_ms : t.root_ms) : 0.0;
    if (t.root_rows > 0) unhidden_.add(t.root_rows, unhidden);
    if (t.tree_rows > 0) tree_.add(t.tree_rows, t.tree_ms);
    base_.add(t.members, std::max(0.0, t.wall_ms - t.tree_ms - unhidden));
  }
  // An exploration's last measured round: the explored shape now competes with the one before
  // it, which keeps its place unless beaten by the margin.
  if (explore_left_ > 0 && ran == exploring_ && --explore_left_ == 0) shape_ = explore_from_;
}

}  // namespace rootspec
