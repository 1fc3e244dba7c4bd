#include "one_step.h"

#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

#include "byte_corpus.h"
#include "objectives.h"
#include "train_model.h"
#include "tree_value.h"

namespace rootspec {

namespace {

using Contexts = std::vector<std::vector<int32_t>>;
using Values = std::vector<std::vector<double>>;  // [temperature][context]

const std::vector<std::string> kArms = {"exit", "kl", "token", "prefix", "mixed"};

// V(T) of `drafter`'s top-B trees below every context, at every temperature of `o`.
Values values_on(const TrainModel& drafter, ModelRuntime& target, const Contexts& contexts,
                 const OneStepOptions& o) {
  Values v(o.temperatures.size());
  for (const auto& c : contexts) {
    const auto row = tree_values(drafter, target, c, o.shape, {o.budget}, o.temperatures);
    for (size_t t = 0; t < row.size(); ++t) v[t].push_back(row[t]);
  }
  return v;
}

// The arm's loss on the step's windows x [b, seq + 1] (contexts x[:, :seq]), with gradients.
torch::Tensor arm_loss(const std::string& arm, TrainModel& drafter, const TrainModel& teacher,
                       ModelRuntime& target, const torch::Tensor& x, const OneStepOptions& o) {
  if (arm == "token") return next_token_loss(drafter, x);
  auto c = x.narrow(1, 0, o.seq);  // [b, seq]
  if (arm == "kl") return distill_kl(teacher, drafter, c);
  auto ex = build_exit_examples(drafter, target, c, o.shape, o.budget, o.temperature);
  if (arm == "mixed") return mixed_loss(teacher, drafter, c, ex, o.mixed_lambda);
  return mean_tree_loss(drafter, ex, arm == "prefix");
}

// One AdamW step (no decay; the header says why) of `drafter` on the arm's loss. Returns the
// loss before the step.
double take_step(const std::string& arm, TrainModel& drafter, const TrainModel& teacher, ModelRuntime& target,
                 const torch::Tensor& x, const OneStepOptions& o) {
  torch::optim::AdamW opt(drafter.parameters(),
                          torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.0));
  opt.zero_grad();
  auto loss = arm_loss(arm, drafter, teacher, target, x, o);
  loss.backward();
  opt.step();
  return loss.item<double>();
}

nlohmann::json row_of(const std::string& split, const std::string& arm, double loss, double temperature,
                      const std::vector<double>& after, const std::vector<double>& before) {
  std::vector<double> diff(after.size());
  int changed = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    diff[i] = after[i] - before[i];  // paired over the same contexts
    changed += diff[i] != 0.0;
  }
  const Interval m = mean_interval(after), d = mean_interval(diff);
  return {{"split", split},  {"arm", arm},      {"loss", loss},      {"temperature", temperature},
          {"mean", m.mean},  {"lo", m.lo},      {"hi", m.hi},        {"diff", d.mean},
          {"diff_lo", d.lo}, {"diff_hi", d.hi}, {"changed", changed}};
}

void check(const OneStepOptions& o) {
  if (o.arms.empty()) throw std::runtime_error("onestep: no --arms");
  for (const auto& a : o.arms)
    if (std::find(kArms.begin(), kArms.end(), a) == kArms.end())
      throw std::runtime_error("onestep: unknown arm '" + a + "' (exit, kl, token, prefix, mixed)");
  if (o.budget < 1 || o.budget > kMaxTreeBucket)
    throw std::runtime_error("--budget must be in 1.." + std::to_string(kMaxTreeBucket));
  if (o.batch < 1) throw std::runtime_error("--batch must be ≥ 1");
  if (o.contexts < 2) throw std::runtime_error("--contexts must be ≥ 2");
  if (!(o.lr > 0.0)) throw std::runtime_error("--lr must be > 0");
  if (o.temperatures.empty()) throw std::runtime_error("onestep: no temperature");
}

}  // namespace

nlohmann::json run_one_step(const OneStepOptions& o) {
  check(o);
  if (o.threads > 0) set_torch_threads(o.threads);
  RuntimeOptions ro;
  ro.max_context = static_cast<int>(o.seq) + 8;
  ro.max_tree = o.budget;
  ModelRuntime target(o.target_dir, ro);
  TrainModel teacher(o.target_dir);
  teacher.set_requires_grad(false);
  ByteCorpus corpus(o.corpus, o.seq + 1);
  const auto x = corpus.batch(o.seed, 0, o.batch, o.seq + 1);  // [batch, seq + 1]
  const std::vector<std::pair<std::string, Contexts>> splits = {
      {"held_out", contexts_of(corpus.heldout_windows(o.seq, o.contexts))},
      {"step", contexts_of(x.narrow(1, 0, o.seq))}};
  std::vector<Values> before;
  {
    TrainModel drafter(o.drafter_dir);
    for (const auto& s : splits) before.push_back(values_on(drafter, target, s.second, o));
  }
  nlohmann::json results = nlohmann::json::array();
  for (size_t s = 0; s < splits.size(); ++s)
    for (size_t t = 0; t < o.temperatures.size(); ++t)
      results.push_back(
          row_of(splits[s].first, "before", 0.0, o.temperatures[t], before[s][t], before[s][t]));
  for (const auto& arm : o.arms) {
    TrainModel drafter(o.drafter_dir);  // every arm steps from the same weights
    const double loss = take_step(arm, drafter, teacher, target, x, o);
    for (size_t s = 0; s < splits.size(); ++s) {
      const Values after = values_on(drafter, target, splits[s].second, o);
      for (size_t t = 0; t < o.temperatures.size(); ++t)
        results.push_back(row_of(splits[s].first, arm, loss, o.temperatures[t], after[t], before[s][t]));
    }
  }
  return {{"contexts", splits[0].second.size()},
          {"batch", o.batch},
          {"seq", o.seq},
          {"lr", o.lr},
          {"budget", o.budget},
          {"exit_temperature", o.temperature},
          {"pool", {{"top_k", o.shape.top_k}, {"depth", o.shape.depth}, {"expand", o.shape.expand}}},
          {"results", results}};
}

}  // namespace rootspec
