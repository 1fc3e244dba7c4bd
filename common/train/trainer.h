// The three trainings of rootspec-train, torch-free entry points:
//   pretrain   — a byte-level Llama-family target, next-token cross-entropy;
//   distill    — a smaller drafter, KL(target ‖ drafter) on the same corpus windows;
//   exittrain  — drafter fine-tuning with the exit-weighted loss of [Exit] §5, its controls
//                (token-only and prefix-weighted, [Exit] §6.2), the mixed objective
//                KL(target ‖ drafter) + λ · exit or its KL-only control, all on the
//                same contexts and steps.
// All share one loop: AdamW, warmup + cosine (schedule.h), gradient clipping, periodic held-out
// evaluation in bits per byte, atomic checkpoints (checkpoint.h), exact resume, and a progress
// line with loss and ETA on stderr.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rootspec {

struct ModelShape {
  int layers = 4;
  int hidden = 256;
  int heads = 4;
  int kv_heads = 0;      // 0 = heads
  int intermediate = 0;  // 0 = round(8/3 · hidden) up to a multiple of 32
  int max_position = 1024;
};

struct LoopOptions {
  std::vector<std::string> corpus;
  std::string out;
  int64_t steps = 1000;
  int64_t batch = 16;
  int64_t seq = 256;
  double lr = 3e-3;
  double min_lr_ratio = 0.1;
  int64_t warmup = -1;  // −1: min(100, steps / 10)
  double weight_decay = 0.1;
  double clip = 1.0;
  uint64_t seed = 1;
  int64_t eval_every = 0;  // 0 = only at the end
  int64_t eval_windows = 64;
  int64_t checkpoint_every = 100;
  bool resume = false;
  int64_t stop_after = 0;  // > 0: stop (with a checkpoint) once this many steps are done
  int threads = 0;         // torch intra-op threads; 0 = leave torch's default
  bool quiet = false;      // no progress line
};

struct TrainResult {
  int64_t steps_done = 0;
  double last_loss = 0.0;
  double heldout_bpb = 0.0;       // bits per byte on the held-out split at the end
  std::vector<double> losses;     // per step run in this call
  double seconds_per_step = 0.0;  // mean over the steps of this call
};

TrainResult run_pretrain(const LoopOptions& loop, const ModelShape& shape);

TrainResult run_distill(const LoopOptions& loop, const ModelShape& shape, const std::string& target_dir);

struct ExitOptions {
  std::string target_dir, drafter_dir;
  int budget = 8;
  int top_k = 10, depth = 8, expand = 10;  // pool shape (pool.h PoolShape; EAGLE-3 defaults)
  double temperature = 1.0;                // target rows for the exit law (0 = greedy)
  bool token_only = false;                 // [Exit] §6.2 control: plain next-token loss
  bool prefix_weighted = false;            // [Exit] §6.2 control: P(v) instead of w(v)
  bool kl_only = false;                    // mixed objective's control: KL(target ‖ drafter) alone
  std::optional<double> mixed_lambda;      // KL + λ · exit (set = mixed objective)
};

// The objective an ExitOptions selects. At most one of token_only, prefix_weighted, kl_only and
// mixed_lambda may be set (none: the pure exit-weighted loss of [Exit] §5).
enum class ExitMode { Exit, TokenOnly, PrefixWeighted, KlOnly, Mixed };

// Throws, naming the flags, if more than one objective is chosen or λ is negative or not finite.
ExitMode exit_mode(const ExitOptions& exit);
// "exittrain", "token-only", "prefix-weighted", "kl-only" or "mixed": the progress line's and
// the checkpoint's name of the mode.
const char* exit_mode_name(ExitMode mode);

// loop.seq is the context length of each training context; loop.batch contexts per step.
TrainResult run_exittrain(const LoopOptions& loop, const ExitOptions& exit);

// Held-out bits per byte of a model folder on `corpus` (the same split and windows as training).
double heldout_bits_per_byte(const std::string& model_dir, const std::vector<std::string>& corpus,
                             int64_t seq, int64_t windows);

}  // namespace rootspec
