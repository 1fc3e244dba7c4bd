// rootspec-train: pretrain a byte-level target, distill a drafter from it, and fine-tune the
// drafter with ExitTrain (paper 003 §5) or its token-only control (§6.2). Issue 7.
//
//   rootspec-train pretrain  --corpus $(tools/train/corpus.sh) --out models/small-target …
//   rootspec-train distill   --target models/small-target --corpus … --out models/small-drafter …
//   rootspec-train exittrain --target T --drafter D --corpus … --out D-exit --budget 8 [--token-only]
//   rootspec-train eval      --model DIR --corpus …        (held-out bits per byte)
//   rootspec-train vt        --target T --drafter D1 --drafter D2 --corpus …  (held-out V(T))
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "trainer.h"
#include "tree_value.h"

using namespace rootspec;

namespace {

void add_loop(CLI::App* c, LoopOptions& o) {
  c->add_option("--corpus", o.corpus, "corpus text files (tools/train/corpus.sh prints the default list)")
      ->required();
  c->add_option("--out", o.out, "output model folder (checkpoint in OUT/checkpoint)")->required();
  c->add_option("--steps", o.steps, "optimizer steps in total");
  c->add_option("--batch", o.batch, "sequences (contexts) per step");
  c->add_option("--seq", o.seq, "tokens per training sequence (exittrain: context length)");
  c->add_option("--lr", o.lr, "peak learning rate (AdamW)");
  c->add_option("--min-lr-ratio", o.min_lr_ratio, "cosine floor as a fraction of --lr");
  c->add_option("--warmup", o.warmup, "linear warmup steps (-1: min(100, steps/10))");
  c->add_option("--weight-decay", o.weight_decay, "AdamW decay of the weight matrices");
  c->add_option("--clip", o.clip, "gradient norm clip");
  c->add_option("--seed", o.seed, "seed of initial weights and batches");
  c->add_option("--eval-every", o.eval_every, "held-out evaluation every N steps (0: at the end only)");
  c->add_option("--eval-windows", o.eval_windows, "held-out windows per evaluation");
  c->add_option("--checkpoint-every", o.checkpoint_every, "checkpoint every N steps");
  c->add_flag("--resume", o.resume, "continue from OUT/checkpoint");
  c->add_option("--stop-after", o.stop_after, "stop with a checkpoint once N steps are done (resume later)");
  c->add_option("--threads", o.threads, "torch intra-op threads (0: torch default)");
  c->add_flag("--quiet", o.quiet, "no progress line");
}

void add_shape(CLI::App* c, ModelShape& s) {
  c->add_option("--layers", s.layers, "decoder layers");
  c->add_option("--hidden", s.hidden, "hidden size");
  c->add_option("--heads", s.heads, "attention heads");
  c->add_option("--kv-heads", s.kv_heads, "key/value heads (0: = heads)");
  c->add_option("--intermediate", s.intermediate, "SwiGLU width (0: 8/3·hidden rounded to 32)");
  c->add_option("--max-position", s.max_position, "max_position_embeddings");
}

// One line per drafter × budget × temperature: mean V(T) [95%] and the paired difference to the
// first drafter [95%].
void print_tree_values(const nlohmann::json& r, const std::string& json_path) {
  std::printf("held-out V(T) over %lld contexts of %lld bytes (pool top-k %d, depth %d, expand %d)\n",
              r["contexts"].get<long long>(), r["seq"].get<long long>(), r["pool"]["top_k"].get<int>(),
              r["pool"]["depth"].get<int>(), r["pool"]["expand"].get<int>());
  std::printf("%-40s %4s %4s  %-24s %s\n", "drafter", "B", "T", "V(T) [95%]", "minus first [95%]");
  for (const auto& x : r["results"])
    std::printf("%-40s %4d %4.1f  %.3f [%.3f, %.3f]   %+.3f [%+.3f, %+.3f]\n",
                x["drafter"].get<std::string>().c_str(), x["budget"].get<int>(),
                x["temperature"].get<double>(), x["mean"].get<double>(), x["lo"].get<double>(),
                x["hi"].get<double>(), x["diff"].get<double>(), x["diff_lo"].get<double>(),
                x["diff_hi"].get<double>());
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    if (!out) throw std::runtime_error(json_path + ": cannot write");
    out << r.dump(2) << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  // libgomp threads spin while they wait by default; on a shared 2-core machine that spinning
  // doubled the step time under load (measured: 10.4 → 4.8 s/step). libgomp reads the policy
  // when it loads, so set it and re-execute once unless the caller chose a policy.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
  }
  CLI::App app{
      "rootspec-train: byte-level target pretraining, drafter distillation, ExitTrain (paper 003 §5)"};
  app.require_subcommand(1);
  LoopOptions loop;
  ModelShape shape;
  std::string target_dir, model_dir;
  ExitOptions ex;

  auto* pre = app.add_subcommand("pretrain", "train a byte-level Llama-family target from scratch");
  add_loop(pre, loop);
  add_shape(pre, shape);

  auto* dis = app.add_subcommand("distill", "train a smaller drafter on KL(target ‖ drafter)");
  add_loop(dis, loop);
  add_shape(dis, shape);
  dis->add_option("--target", target_dir, "target model folder")->required();

  auto* ext =
      app.add_subcommand("exittrain", "fine-tune a drafter with the exit-weighted loss (paper 003 §5)");
  add_loop(ext, loop);
  ext->add_option("--target", ex.target_dir, "frozen target model folder")->required();
  ext->add_option("--drafter", ex.drafter_dir, "drafter model folder to start from")->required();
  ext->add_option("--budget", ex.budget, "B: tree nodes kept by draft selection");
  ext->add_option("--top-k", ex.top_k, "pool: children per forwarded node");
  ext->add_option("--depth", ex.depth, "pool: deepest level");
  ext->add_option("--expand", ex.expand, "pool: nodes forwarded per step");
  ext->add_option("--temperature", ex.temperature, "target temperature of the exit law (0 = greedy)");
  ext->add_flag("--token-only", ex.token_only, "control of paper 003 §6.2: plain next-token fine-tuning");
  ext->add_flag("--prefix-weighted", ex.prefix_weighted,
                "control of paper 003 §6.2: weight nodes by P(v), not w(v)");

  auto* ev = app.add_subcommand("eval", "held-out bits per byte of a model folder");
  ev->add_option("--model", model_dir, "model folder")->required();
  ev->add_option("--corpus", loop.corpus, "corpus text files")->required();
  ev->add_option("--seq", loop.seq, "tokens per window");
  ev->add_option("--eval-windows", loop.eval_windows, "held-out windows");

  TreeValueOptions tv;
  std::string tv_json;
  auto* vt = app.add_subcommand(
      "vt", "held-out V(T) of drafters' draft trees, with 95% intervals (paper 003 Thm 1)");
  vt->add_option("--target", tv.target_dir, "frozen target model folder")->required();
  vt->add_option("--drafter", tv.drafter_dirs, "drafter folder (repeat; the first is the paired baseline)")
      ->required();
  vt->add_option("--corpus", tv.corpus, "corpus text files")->required();
  vt->add_option("--seq", tv.seq, "context length");
  vt->add_option("--contexts", tv.contexts, "held-out contexts");
  vt->add_option("--budgets", tv.budgets, "budgets B")->delimiter(',');
  vt->add_option("--temperatures", tv.temperatures, "target temperatures T (0 = greedy)")->delimiter(',');
  vt->add_option("--top-k", tv.shape.top_k, "pool: children per forwarded node");
  vt->add_option("--depth", tv.shape.depth, "pool: deepest level");
  vt->add_option("--expand", tv.shape.expand, "pool: nodes forwarded per step");
  vt->add_option("--threads", tv.threads, "torch intra-op threads");
  vt->add_option("--json", tv_json, "also write the results to this file");

  CLI11_PARSE(app, argc, argv);
  try {
    TrainResult r;
    if (*pre) {
      r = run_pretrain(loop, shape);
    } else if (*dis) {
      r = run_distill(loop, shape, target_dir);
    } else if (*ext) {
      r = run_exittrain(loop, ex);
    } else if (*vt) {
      print_tree_values(evaluate_tree_values(tv), tv_json);
      return 0;
    } else {
      std::printf("%.4f\n", heldout_bits_per_byte(model_dir, loop.corpus, loop.seq, loop.eval_windows));
      return 0;
    }
    std::printf("steps %lld  last loss %.4f  %.3f s/step", (long long)r.steps_done, r.last_loss,
                r.seconds_per_step);
    if (r.steps_done == loop.steps) std::printf("  held-out bpb %.4f", r.heldout_bpb);
    std::printf("\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rootspec-train: %s\n", e.what());
    return 1;
  }
  return 0;
}
