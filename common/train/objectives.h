// The drafter objectives of rootspec-train on a batch of training windows, shared by distill,
// exittrain and the one-step check:
//   next_token_loss — plain next-token cross-entropy (pretrain; the token-only control of
//                     [Exit] §6.2);
//   distill_kl      — KL(target ‖ drafter) at every position of the windows (distill; the
//                     KL-only control of the mixed objective);
//   mean_tree_loss  — the exit-weighted loss of [Exit] §5 (or its prefix-weighted control,
//                     §6.2), averaged over the contexts' realised trees;
//   mixed_loss      — KL + λ · exit on the same contexts: the KL term holds the
//                     drafter to the target everywhere, the exit term reallocates its tree.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "exit_loss.h"
#include "model_runtime.h"
#include "pool.h"
#include "train_model.h"

namespace rootspec {

// Mean next-token cross-entropy of `model` over windows x [b, seq + 1] (inputs x[:, :seq],
// labels x[:, 1:]). Scalar tensor.
torch::Tensor next_token_loss(const TrainModel& model, const torch::Tensor& x);

// KL(p_target ‖ q_drafter) = Σ_x p(x) (log p(x) − log q(x)) of the next-token distributions after
// every prefix of x [b, seq], mean over the b·seq positions. The target runs without gradients;
// the result carries the drafter's. Scalar tensor.
torch::Tensor distill_kl(const TrainModel& target, const TrainModel& drafter, const torch::Tensor& x);

// The rows of x [b, seq] as token contexts.
std::vector<std::vector<int32_t>> contexts_of(const torch::Tensor& x);

// build_exit_example (exit_loss.h) for every row of x [b, seq], in order.
std::vector<ExitExample> build_exit_examples(const TrainModel& drafter, ModelRuntime& target,
                                             const torch::Tensor& x, const PoolShape& shape, int budget,
                                             double temperature);

// Mean over `examples` of exit_loss ([Exit] §5), or of prefix_weighted_loss (§6.2) when
// prefix_weighted. Scalar tensor; throws on an empty list.
torch::Tensor mean_tree_loss(const TrainModel& drafter, const std::vector<ExitExample>& examples,
                             bool prefix_weighted = false);

// The mixed objective on the contexts x [b, seq]:
//   L(θ) = KL(p_target ‖ q_θ) over every position of x  +  λ · mean_c L_exit(θ; c)
// where example i must be the realised tree of context x[i] (throws otherwise, or if λ < 0).
// Scalar tensor.
torch::Tensor mixed_loss(const TrainModel& target, const TrainModel& drafter, const torch::Tensor& x,
                         const std::vector<ExitExample>& examples, double lambda);

}  // namespace rootspec
