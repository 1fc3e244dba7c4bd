#include "objectives.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace rootspec {

torch::Tensor next_token_loss(const TrainModel& model, const torch::Tensor& x) {
  const int64_t seq = x.size(1) - 1;
  auto logits = model.forward(x.narrow(1, 0, seq));  // [b, seq, vocab]
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                              x.narrow(1, 1, seq).reshape({-1}));
}

torch::Tensor distill_kl(const TrainModel& target, const TrainModel& drafter, const torch::Tensor& x) {
  torch::Tensor logp;
  {
    torch::NoGradGuard no_grad;
    logp = torch::log_softmax(target.forward(x), -1);  // [b, seq, vocab]
  }
  auto logq = torch::log_softmax(drafter.forward(x), -1);  // [b, seq, vocab]
  return (logp.exp() * (logp - logq)).sum(-1).mean();
}

std::vector<std::vector<int32_t>> contexts_of(const torch::Tensor& x) {
  auto c = x.to(torch::kInt64).contiguous();  // [b, seq]
  const int64_t b = c.size(0), seq = c.size(1);
  const int64_t* p = c.data_ptr<int64_t>();
  std::vector<std::vector<int32_t>> out(b);
  for (int64_t i = 0; i < b; ++i) out[i].assign(p + i * seq, p + (i + 1) * seq);
  return out;
}

std::vector<ExitExample> build_exit_examples(const TrainModel& drafter, ModelRuntime& target,
                                             const torch::Tensor& x, const PoolShape& shape, int budget,
                                             double temperature) {
  std::vector<ExitExample> out;
  for (const auto& c : contexts_of(x))
    out.push_back(build_exit_example(drafter, target, c, shape, budget, temperature));
  return out;
}

torch::Tensor mean_tree_loss(const TrainModel& drafter, const std::vector<ExitExample>& examples,
                             bool prefix_weighted) {
  if (examples.empty()) throw std::runtime_error("mean_tree_loss: no examples");
  torch::Tensor total = torch::zeros({}, torch::kFloat32);
  for (const auto& ex : examples)
    total = total + (prefix_weighted ? prefix_weighted_loss(drafter, ex) : exit_loss(drafter, ex));
  return total / static_cast<double>(examples.size());
}

torch::Tensor mixed_loss(const TrainModel& target, const TrainModel& drafter, const torch::Tensor& x,
                         const std::vector<ExitExample>& examples, double lambda) {
  if (!(lambda >= 0.0) || !std::isfinite(lambda))
    throw std::runtime_error("mixed loss: λ must be finite and ≥ 0, not " + std::to_string(lambda));
  // Both terms must read the same contexts: the tree of example i grows below x[i].
  const auto contexts = contexts_of(x);
  if (contexts.size() != examples.size())
    throw std::runtime_error("mixed loss: " + std::to_string(examples.size()) + " trees for " +
                             std::to_string(contexts.size()) + " contexts");
  for (size_t i = 0; i < contexts.size(); ++i)
    if (examples[i].context != contexts[i])
      throw std::runtime_error("mixed loss: tree " + std::to_string(i) + " grows below another context");
  return distill_kl(target, drafter, x) + lambda * mean_tree_loss(drafter, examples);
}

}  // namespace rootspec
