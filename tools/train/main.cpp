// rootspec-train: pretrain a byte-level target, distill a drafter from it, and fine-tune the
// drafter with ExitTrain ([Exit] §5), its controls (§6.2), or the mixed objective
// KL + λ · exit with its KL-only control.
//
//   rootspec-train pretrain  --corpus $(tools/train/corpus.sh) --out models/small-target …
//   rootspec-train distill   --target models/small-target --corpus … --out models/small-drafter …
//   rootspec-train exittrain --target T --drafter D --corpus … --out D-exit --budget 8
//                            [--token-only | --prefix-weighted | --kl-only | --mixed-lambda L]
//   rootspec-train eval      --model DIR --corpus …        (held-out bits per byte)
//   rootspec-train vt        --target T --drafter D1 --drafter D2 --corpus …  (held-out V(T))
//   rootspec-train onestep   --target T --drafter D --corpus … --lr 1e-4 --budget 8
//                            ([Exit] App. C.1: V before and after one step per objective)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "one_step.h"
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

void write_json(const nlohmann::json& r, const std::string& path) {
  if (path.empty()) return;
  std::ofstream out(path);
  if (!out) throw std::runtime_error(path + ": cannot write");
  out << r.dump(2) << "\n";
}

// One line per drafter × budget × temperature: mean V(T) [95%] and the paired difference to the
// first drafter [95%].
void print_tree_values(const nlohmann::json& r, const std::string& json_path) {
  std::printf(
      "held-out V(T) over %lld contexts of %lld bytes after the first %lld (pool top-k %d, depth %d, expand "
      "%d)\n",
      r["contexts"].get<long long>(), r["seq"].get<long long>(), r["skip"].get<long long>(),
      r["pool"]["top_k"].get<int>(), r["pool"]["depth"].get<int>(), r["pool"]["expand"].get<int>());
  std::printf("%-40s %4s %4s  %-24s %s\n", "drafter", "B", "T", "V(T) [95%]", "minus first [95%]");
  for (const auto& x : r["results"])
    std::printf("%-40s %4d %4.1f  %.3f [%.3f, %.3f]   %+.3f [%+.3f, %+.3f]\n",
                x["drafter"].get<std::string>().c_str(), x["budget"].get<int>(),
                x["temperature"].get<double>(), x["mean"].get<double>(), x["lo"].get<double>(),
                x["hi"].get<double>(), x["diff"].get<double>(), x["diff_lo"].get<double>(),
                x["diff_hi"].get<double>());
  write_json(r, json_path);
}

// One line per split × arm × temperature: V(T) [95%] and the paired change after − before [95%].
void print_one_step(const nlohmann::json& r, const std::string& json_path) {
  std::printf(
      "one step (lr %g) on %lld training contexts; V(T) at B %d over %lld held-out contexts of %lld bytes "
      "(pool top-k %d, depth %d, expand %d)\n",
      r["lr"].get<double>(), r["batch"].get<long long>(), r["budget"].get<int>(),
      r["contexts"].get<long long>(), r["seq"].get<long long>(), r["pool"]["top_k"].get<int>(),
      r["pool"]["depth"].get<int>(), r["pool"]["expand"].get<int>());
  std::printf("%-8s %-7s %9s %4s  %-24s %-28s %s\n", "split", "arm", "loss", "T", "V(T) [95%]",
              "after - before [95%]", "changed");
  for (const auto& x : r["results"])
    std::printf("%-8s %-7s %9.4f %4.1f  %.3f [%.3f, %.3f]   %+.4f [%+.4f, %+.4f]   %d\n",
                x["split"].get<std::string>().c_str(), x["arm"].get<std::string>().c_str(),
                x["loss"].get<double>(), x["temperature"].get<double>(), x["mean"].get<double>(),
                x["lo"].get<double>(), x["hi"].get<double>(), x["diff"].get<double>(),
                x["diff_lo"].get<double>(), x["diff_hi"].get<double>(), x["changed"].get<int>());
  write_json(r, json_path);
}

}  // namespace

int main(int argc, char** argv) {
  // libgomp threads spin while they wait by default, and on a shared machine with few cores that
  // spinning slows the steps badly under load. libgomp reads the policy
  // when it loads, so set it and re-execute once unless the caller chose a policy.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
  }
  CLI::App app{
      "rootspec-train: byte-level target pretraining, drafter distillation, ExitTrain ([Exit] §5)"};
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
      app.add_subcommand("exittrain",
                         "fine-tune a drafter with the exit-weighted loss ([Exit] §5), a control of "
                         "§6.2, or the mixed objective KL + λ · exit");
  add_loop(ext, loop);
  ext->add_option("--target", ex.target_dir, "frozen target model folder")->required();
  ext->add_option("--drafter", ex.drafter_dir, "drafter model folder to start from")->required();
  ext->add_option("--budget", ex.budget, "B: tree nodes kept by draft selection");
  ext->add_option("--top-k", ex.top_k, "pool: children per forwarded node");
  ext->add_option("--depth", ex.depth, "pool: deepest level");
  ext->add_option("--expand", ex.expand, "pool: nodes forwarded per step");
  ext->add_option("--temperature", ex.temperature, "target temperature of the exit law (0 = greedy)");
  ext->add_flag("--token-only", ex.token_only, "control of [Exit] §6.2: plain next-token fine-tuning");
  ext->add_flag("--prefix-weighted", ex.prefix_weighted,
                "control of [Exit] §6.2: weight nodes by P(v), not w(v)");
  ext->add_flag("--kl-only", ex.kl_only,
                "control of the mixed objective: KL(target ‖ drafter) alone on the same contexts and steps");
  double mixed_lambda = 0.0;
  auto* mixed = ext->add_option("--mixed-lambda", mixed_lambda,
                                "mixed objective: KL(target ‖ drafter) + L × exit loss "
                                "(L ≥ 0; excludes --token-only, --prefix-weighted and --kl-only)");

  auto* ev = app.add_subcommand("eval", "held-out bits per byte of a model folder");
  ev->add_option("--model", model_dir, "model folder")->required();
  ev->add_option("--corpus", loop.corpus, "corpus text files")->required();
  ev->add_option("--seq", loop.seq, "tokens per window");
  ev->add_option("--eval-windows", loop.eval_windows, "held-out windows");

  TreeValueOptions tv;
  std::string tv_json;
  auto* vt = app.add_subcommand(
      "vt", "held-out V(T) of drafters' draft trees, with 95% intervals ([Exit] Thm 1)");
  vt->add_option("--target", tv.target_dir, "frozen target model folder")->required();
  vt->add_option("--drafter", tv.drafter_dirs, "drafter folder (repeat; the first is the paired baseline)")
      ->required();
  vt->add_option("--corpus", tv.corpus, "corpus text files")->required();
  vt->add_option("--seq", tv.seq, "context length");
  vt->add_option("--contexts", tv.contexts, "held-out contexts");
  vt->add_option("--skip", tv.skip, "pass over the first N held-out contexts (a set disjoint from a run's)");
  vt->add_option("--budgets", tv.budgets, "budgets B")->delimiter(',');
  vt->add_option("--temperatures", tv.temperatures, "target temperatures T (0 = greedy)")->delimiter(',');
  vt->add_option("--top-k", tv.shape.top_k, "pool: children per forwarded node");
  vt->add_option("--depth", tv.shape.depth, "pool: deepest level");
  vt->add_option("--expand", tv.shape.expand, "pool: nodes forwarded per step");
  vt->add_option("--threads", tv.threads, "torch intra-op threads");
  vt->add_option("--json", tv_json, "also write the results to this file");

  OneStepOptions os;
  std::string os_json;
  auto* one = app.add_subcommand(
      "onestep", "[Exit] App. C.1: held-out V(T) before and after one small step per objective");
  one->add_option("--target", os.target_dir, "frozen target model folder")->required();
  one->add_option("--drafter", os.drafter_dir, "drafter model folder every arm steps from")->required();
  one->add_option("--corpus", os.corpus, "corpus text files")->required();
  one->add_option("--seq", os.seq, "context length");
  one->add_option("--batch", os.batch, "training contexts of the step (exittrain's first batch)");
  one->add_option("--contexts", os.contexts, "held-out contexts of the V(T) measurement");
  one->add_option("--seed", os.seed, "seed of the step's batch (as exittrain --seed)");
  one->add_option("--lr", os.lr, "step size: AdamW's first step moves each weight by about this");
  one->add_option("--budget", os.budget, "B: tree nodes of the exit term's trees and of V(T)");
  one->add_option("--top-k", os.shape.top_k, "pool: children per forwarded node");
  one->add_option("--depth", os.shape.depth, "pool: deepest level");
  one->add_option("--expand", os.shape.expand, "pool: nodes forwarded per step");
  one->add_option("--temperature", os.temperature, "target temperature of the exit law (0 = greedy)");
  one->add_option("--temperatures", os.temperatures, "target temperatures T of V(T) (0 = greedy)")
      ->delimiter(',');
  one->add_option("--arms", os.arms, "objectives to step on: exit, kl, token, prefix, mixed")->delimiter(',');
  one->add_option("--mixed-lambda", os.mixed_lambda, "λ of the mixed arm (KL + λ × exit)");
  one->add_option("--threads", os.threads, "torch intra-op threads");
  one->add_option("--json", os_json, "also write the results to this file");

  CLI11_PARSE(app, argc, argv);
  if (mixed->count() > 0) ex.mixed_lambda = mixed_lambda;
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
    } else if (*one) {
      print_one_step(run_one_step(os), os_json);
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
