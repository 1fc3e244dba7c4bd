#include "study_tables.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "rng.h"
#include "study_values.h"

namespace rootspec {

namespace {

using json = nlohmann::json;

// Resamples of prompts with replacement; a context weighs as often as its prompt was drawn.
class ClusterBootstrap {
 public:
  ClusterBootstrap(const std::vector<int>& prompt_of, int resamples, uint64_t seed) : n_(prompt_of.size()) {
    std::map<int, int> cluster;
    for (int p : prompt_of) cluster.emplace(p, static_cast<int>(cluster.size()));
    const int k = static_cast<int>(cluster.size());
    Rng rng(seed);
    weight_.assign(resamples, std::vector<float>(n_));  // [resamples, contexts]
    std::vector<int> drawn(k);
    for (auto& w : weight_) {
      std::fill(drawn.begin(), drawn.end(), 0);
      for (int i = 0; i < k; ++i) ++drawn[uniform_below(rng, k)];
      for (size_t i = 0; i < n_; ++i) w[i] = drawn[cluster[prompt_of[i]]];
    }
  }
  int resamples() const { return static_cast<int>(weight_.size()); }
  // Mean of x over the contexts, weighted by resample r (r < 0: the sample itself).
  double mean(const std::vector<double>& x, int r) const {
    double s = 0, w = 0;
    for (size_t i = 0; i < n_; ++i) {
      const double wi = r < 0 ? 1.0 : weight_[r][i];
      s += wi * x[i];
      w += wi;
    }
    return w > 0 ? s / w : NAN;
  }
  // The statistic on the sample and its 95% percentile interval over the resamples (NaN
  // resamples, e.g. a share of a zero advantage, are left out; all NaN → null).
  json estimate(const std::function<double(int)>& stat) const {
    std::vector<double> v;
    for (int r = 0; r < resamples(); ++r) {
      const double x = stat(r);
      if (std::isfinite(x)) v.push_back(x);
    }
    std::sort(v.begin(), v.end());
    auto num = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
    auto pct = [&](double q) {
      return v.empty() ? NAN : v[std::min(v.size() - 1, size_t(q * (v.size() - 1) + 0.5))];
    };
    return {{"value", num(stat(-1))}, {"lo", num(pct(0.025))}, {"hi", num(pct(0.975))}};
  }

 private:
  size_t n_;
  std::vector<std::vector<float>> weight_;
};

template <typename F>
std::vector<double> column(const std::vector<ContextValues>& cv, F f) {
  std::vector<double> x;
  x.reserve(cv.size());
  for (const ContextValues& v : cv) x.push_back(f(v));
  return x;
}

// The smallest budget b (1 … max_b) at which the mean of `curves` reaches `goal`; max_b + 1 if none.
int smallest_budget_reaching(const std::vector<double>& mean_curve, double goal) {
  for (size_t b = 0; b < mean_curve.size(); ++b)
    if (mean_curve[b] >= goal - 1e-12) return static_cast<int>(b) + 1;
  return static_cast<int>(mean_curve.size()) + 1;
}

std::vector<double> mean_curve(const std::vector<const std::vector<double>*>& curves,
                               const ClusterBootstrap& bs, int r, int max_b) {
  std::vector<double> out(max_b);  // [max_b]
  std::vector<double> x(curves.size());
  for (int b = 1; b <= max_b; ++b) {
    for (size_t i = 0; i < curves.size(); ++i) x[i] = ContextValues::at(*curves[i], b);
    out[b - 1] = bs.mean(x, r);
  }
  return out;
}

json temperature_tables(const std::vector<const StudyContext*>& group, const TableOptions& o) {
  const std::vector<int>& B = o.budgets;
  std::vector<ContextValues> cv;
  std::vector<int> prompt_of;
  int max_pool = 0;
  double mean_pool = 0;
  // The drawing rules' values at the tables' budgets, then at the plots'.
  std::vector<int> all_budgets = B;
  all_budgets.insert(all_budgets.end(), o.plot_budgets.begin(), o.plot_budgets.end());
  for (const StudyContext* c : group) {
    cv.push_back(context_values(*c, all_budgets));
    prompt_of.push_back(c->prompt);
    max_pool = std::max(max_pool, c->pool.size());
    mean_pool += c->pool.size() / double(group.size());
  }
  ClusterBootstrap bs(prompt_of, o.resamples, o.seed);
  auto mean_of = [&](const std::vector<double>& x) { return [&bs, x](int r) { return bs.mean(x, r); }; };
  auto diff_of = [&](const std::vector<double>& a, const std::vector<double>& b) {
    return [&bs, a, b](int r) { return bs.mean(a, r) - bs.mean(b, r); };
  };
  auto rel_of = [&](const std::vector<double>& a, const std::vector<double>& b, double b_offset) {
    return
        [&bs, a, b, b_offset](int r) { return (bs.mean(a, r) - bs.mean(b, r)) / (bs.mean(b, r) + b_offset); };
  };
  auto share_of = [&](const std::vector<double>& rule, const std::vector<double>& base,
                      const std::vector<double>& best) {
    return [&bs, rule, base, best](int r) {
      const double adv = bs.mean(best, r) - bs.mean(base, r);
      return adv > 1e-12 ? (bs.mean(rule, r) - bs.mean(base, r)) / adv : NAN;
    };
  };

  json out;
  out["temperature"] = group.front()->temperature;
  out["contexts"] = group.size();
  out["prompts"] = std::set<int>(prompt_of.begin(), prompt_of.end()).size();
  out["mean_pool_size"] = mean_pool;
  out["level_one_miss"] =
      bs.estimate(mean_of(column(cv, [](const ContextValues& v) { return v.level_one_miss; })));

  json t2 = json::array(), t8 = json::array(), t9 = json::array(), t12 = json::array(), t13 = json::array(),
       t15 = json::array();
  // Table 13 searches every budget up to the largest pool, in the sample and in every resample:
  // the mean V curves of draft and root selection, [1 + resamples][max_pool].
  std::vector<std::vector<double>> draft_means, root_means;
  {
    std::vector<const std::vector<double>*> dc, rc;
    for (const ContextValues& v : cv) dc.push_back(&v.draft_curve), rc.push_back(&v.root_curve);
    for (int r = -1; r < bs.resamples(); ++r) {
      draft_means.push_back(mean_curve(dc, bs, r, max_pool));
      root_means.push_back(mean_curve(rc, bs, r, max_pool));
    }
  }
  for (size_t k = 0; k < B.size(); ++k) {
    const int b = B[k];
    const auto draft =
        column(cv, [&](const ContextValues& v) { return ContextValues::at(v.draft_curve, b); });
    const auto root = column(cv, [&](const ContextValues& v) { return ContextValues::at(v.root_curve, b); });
    const auto depth2 =
        column(cv, [&](const ContextValues& v) { return ContextValues::at(v.depth_two_curve, b); });
    const auto oracle =
        column(cv, [&](const ContextValues& v) { return ContextValues::at(v.oracle_curve, b); });
    const auto root_draw = column(cv, [&](const ContextValues& v) { return v.root_draw[k]; });
    const auto pearl = column(cv, [&](const ContextValues& v) { return v.pearl[k]; });
    const auto pearl_top1 = column(cv, [&](const ContextValues& v) { return v.pearl_top1[k]; });
    // Table 12 compares root-draw with the stronger of the two PEARL-style decoders ([TPR]
    // App. D.2: pearl-top1 lies below pearl in every one of its runs).
    const bool top1_stronger = bs.mean(pearl_top1, -1) > bs.mean(pearl, -1);
    const auto& pearl_style = top1_stronger ? pearl_top1 : pearl;
    const auto pearl_skip = column(
        cv, [&](const ContextValues& v) { return top1_stronger ? v.pearl_top1_skip[k] : v.pearl_skip[k]; });
    const auto pearl_nodes = column(
        cv, [&](const ContextValues& v) { return top1_stronger ? v.pearl_top1_nodes[k] : v.pearl_nodes[k]; });
    const auto root_draw_skip = column(cv, [&](const ContextValues& v) { return v.root_draw_skip[k]; });

    json rules = {
        {"draft", bs.estimate(mean_of(draft))},           {"root", bs.estimate(mean_of(root))},
        {"root-draw", bs.estimate(mean_of(root_draw))},   {"pearl", bs.estimate(mean_of(pearl))},
        {"pearl-top1", bs.estimate(mean_of(pearl_top1))}, {"depth-two", bs.estimate(mean_of(depth2))},
        {"oracle", bs.estimate(mean_of(oracle))}};
    json gains;
    for (const auto& [name, x] :
         std::vector<std::pair<std::string, const std::vector<double>*>>{{"root", &root},
                                                                         {"root-draw", &root_draw},
                                                                         {"pearl", &pearl},
                                                                         {"depth-two", &depth2},
                                                                         {"oracle", &oracle}})
      gains[name] = {{"abs", bs.estimate(diff_of(*x, draft))}, {"rel", bs.estimate(rel_of(*x, draft, 0.0))}};
    t2.push_back({{"budget", b}, {"v", rules}, {"gain_over_draft", gains}});

    t12.push_back({{"budget", b},
                   {"pearl_style", top1_stronger ? "pearl-top1" : "pearl"},
                   {"root_draw", bs.estimate(mean_of(root_draw))},
                   {"pearl", bs.estimate(mean_of(pearl_style))},
                   {"gain_abs", bs.estimate(diff_of(root_draw, pearl_style))},
                   {"gain_rel", bs.estimate(rel_of(root_draw, pearl_style, 0.0))},
                   {"nodes_root_draw",
                    bs.mean(column(cv, [&](const ContextValues& v) { return v.root_draw_nodes[k]; }), -1)},
                   {"nodes_pearl", bs.mean(pearl_nodes, -1)}});

    // Emitted per round = accepted + the continuation. Ours: a drawn y missing from the rule's
    // tree is emitted alone without a tree pass; [TPR]'s convention (App. D.2) verifies y
    // alone and so also counts its continuation.
    std::vector<double> emit_draft(cv.size()), emit_root(cv.size()), emit_rd(cv.size()),
        emit_pearl(cv.size());
    for (size_t i = 0; i < cv.size(); ++i) {
      emit_draft[i] = draft[i] + 1;
      emit_root[i] = root[i] + 1;
      emit_rd[i] = root_draw[i] - root_draw_skip[i] + 1;
      emit_pearl[i] = pearl_style[i] - pearl_skip[i] + 1;
    }
    t8.push_back({{"budget", b},
                  {"draft", bs.estimate(mean_of(emit_draft))},
                  {"root", bs.estimate(mean_of(emit_root))},
                  {"root-draw", bs.estimate(mean_of(emit_rd))},
                  {"pearl", bs.estimate(mean_of(emit_pearl))},
                  {"root-draw_paper", bs.mean(root_draw, -1) + 1},
                  {"pearl_paper", bs.mean(pearl_style, -1) + 1},
                  {"root_over_draft", bs.estimate(rel_of(emit_root, emit_draft, 0.0))},
                  {"root_draw_over_pearl", bs.estimate(rel_of(emit_rd, emit_pearl, 0.0))}});

    t9.push_back({{"budget", b},
                  {"root_gain", bs.estimate(rel_of(root, draft, 0.0))},
                  {"root_draw_gain", bs.estimate(rel_of(root_draw, draft, 0.0))},
                  {"oracle_gain", bs.estimate(rel_of(oracle, draft, 0.0))},
                  {"oracle_advantage", bs.estimate(diff_of(oracle, draft))},
                  {"root_share", bs.estimate(share_of(root, draft, oracle))},
                  {"depth_two_share", bs.estimate(share_of(depth2, draft, oracle))}});

    // Table 15: the first-token split. Within each part, the shares of its own oracle
    // advantage; across parts, the differing rounds' share of rounds and of the root gain.
    std::vector<double> agree(cv.size()), root_gain(cv.size()), differ_gain(cv.size());
    for (size_t i = 0; i < cv.size(); ++i) {
      agree[i] = cv[i].first_tokens_agree ? 1.0 : 0.0;
      root_gain[i] = root[i] - draft[i];
      differ_gain[i] = cv[i].first_tokens_agree ? 0.0 : root_gain[i];
    }
    auto part = [&](bool want) {
      auto masked = [&](const std::vector<double>& x) {
        std::vector<double> m(x.size());
        for (size_t i = 0; i < x.size(); ++i) m[i] = (agree[i] == 1.0) == want ? x[i] : 0.0;
        return m;
      };
      return json{{"root_share", bs.estimate(share_of(masked(root), masked(draft), masked(oracle)))},
                  {"depth_two_share", bs.estimate(share_of(masked(depth2), masked(draft), masked(oracle)))},
                  {"root_gain", bs.estimate(diff_of(masked(root), masked(draft)))}};
    };
    t15.push_back({{"budget", b},
                   {"agree_rate", bs.estimate(mean_of(agree))},
                   {"agree", part(true)},
                   {"differ", part(false)},
                   {"differ_share_of_root_gain", bs.estimate([&bs, differ_gain, root_gain](int r) {
                      const double g = bs.mean(root_gain, r);
                      return std::abs(g) > 1e-12 ? bs.mean(differ_gain, r) / g : NAN;
                    })}});

    t13.push_back({{"budget", b},
                   {"max_budget", max_pool},
                   {"draft_budget_matching_root", bs.estimate([&](int r) {
                      return double(smallest_budget_reaching(draft_means[r + 1],
                                                             ContextValues::at(root_means[r + 1], b)));
                    })},
                   {"root_budget_matching_draft", bs.estimate([&](int r) {
                      return double(smallest_budget_reaching(root_means[r + 1],
                                                             ContextValues::at(draft_means[r + 1], b)));
                    })}});
  }
  out["table2"] = t2;
  out["table8"] = t8;
  out["table9"] = t9;
  out["table12"] = t12;
  out["table13"] = t13;
  out["table15"] = t15;

  // Table 11: every rule on the pool cut to its M highest-ranked candidates.
  json t11 = json::array();
  for (int m : o.top_m) {
    std::vector<ContextValues> cut;
    for (const StudyContext* c : group)
      cut.push_back(context_values(restrict_to_top(*c, m > 0 ? m : c->pool.size()), {}));
    for (int b : B) {
      const auto d = column(cut, [&](const ContextValues& v) { return ContextValues::at(v.draft_curve, b); });
      const auto r = column(cut, [&](const ContextValues& v) { return ContextValues::at(v.root_curve, b); });
      const auto x =
          column(cut, [&](const ContextValues& v) { return ContextValues::at(v.oracle_curve, b); });
      t11.push_back({{"top_m", m > 0 ? json(m) : json("all")},
                     {"budget", b},
                     {"oracle_advantage", bs.estimate(diff_of(x, d))},
                     {"root_share", bs.estimate(share_of(r, d, x))}});
    }
  }
  out["table11"] = t11;

  // V against B per rule (the plots), sample means only.
  json plot = json::array();
  for (size_t j = 0; j < o.plot_budgets.size(); ++j) {
    const int b = o.plot_budgets[j];
    if (b > max_pool) break;
    const size_t k = B.size() + j;
    auto mean_at = [&](auto member) {
      return bs.mean(column(cv, [&](const ContextValues& v) { return ContextValues::at(v.*member, b); }), -1);
    };
    auto mean_k = [&](auto member) {
      return bs.mean(column(cv, [&](const ContextValues& v) { return (v.*member)[k]; }), -1);
    };
    plot.push_back({{"budget", b},
                    {"draft", mean_at(&ContextValues::draft_curve)},
                    {"root", mean_at(&ContextValues::root_curve)},
                    {"depth-two", mean_at(&ContextValues::depth_two_curve)},
                    {"oracle", mean_at(&ContextValues::oracle_curve)},
                    {"root-draw", mean_k(&ContextValues::root_draw)},
                    {"pearl", mean_k(&ContextValues::pearl)}});
  }
  out["v_by_budget"] = plot;
  return out;
}

}  // namespace

json study_tables(const std::vector<StudyContext>& contexts, const TableOptions& o) {
  if (contexts.empty()) throw std::runtime_error("study tables: no recorded context");
  std::map<double, std::vector<const StudyContext*>> by_t;
  for (const StudyContext& c : contexts) by_t[c.temperature].push_back(&c);
  json out = {{"budgets", o.budgets}, {"resamples", o.resamples}, {"temperatures", json::array()}};
  for (const auto& [t, group] : by_t) out["temperatures"].push_back(temperature_tables(group, o));
  return out;
}

}  // namespace rootspec
