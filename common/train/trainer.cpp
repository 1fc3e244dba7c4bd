#include "trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "byte_corpus.h"
#include "checkpoint.h"
#include "exit_loss.h"
#include "model_runtime.h"
#include "objectives.h"
#include "random_model.h"
#include "schedule.h"
#include "train_model.h"

namespace rootspec {

namespace {

using LossFn = std::function<torch::Tensor(int64_t step)>;
using EvalFn = std::function<nlohmann::json()>;  // {"bpb": …, and any other held-out metric}

// Mean bits per byte of `model` over the held-out windows: cross-entropy of every byte target
// (BOS targets excluded), in nats, divided by ln 2.
double bits_per_byte(const TrainModel& model, const ByteCorpus& corpus, int64_t seq, int64_t windows) {
  torch::NoGradGuard no_grad;
  auto w = corpus.heldout_windows(seq + 1, windows);  // [w, seq + 1]
  double nats = 0.0;
  int64_t count = 0;
  for (int64_t i = 0; i < w.size(0); i += 8) {
    auto x = w.narrow(0, i, std::min<int64_t>(8, w.size(0) - i));  // [b, seq + 1]
    auto logits = model.forward(x.narrow(1, 0, seq));              // [b, seq, vocab]
    auto y = x.narrow(1, 1, seq).reshape({-1});                    // [b·seq]
    auto ce = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), y,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));  // [b·seq]
    auto bytes = y.lt(256);
    nats += ce.masked_select(bytes).sum().item<double>();
    count += bytes.sum().item<int64_t>();
  }
  return count ? nats / count / std::log(2.0) : 0.0;
}

// Mean KL(p_target ‖ q_drafter) per position over the held-out windows of seq tokens, in nats.
double heldout_kl(const TrainModel& target, const TrainModel& drafter, const ByteCorpus& corpus, int64_t seq,
                  int64_t windows) {
  torch::NoGradGuard no_grad;
  auto w = corpus.heldout_windows(seq, windows);  // [w, seq]
  double sum = 0.0;
  for (int64_t i = 0; i < w.size(0); i += 8) {
    auto x = w.narrow(0, i, std::min<int64_t>(8, w.size(0) - i));  // [b, seq]
    sum += distill_kl(target, drafter, x).item<double>() * static_cast<double>(x.size(0));
  }
  return w.size(0) ? sum / static_cast<double>(w.size(0)) : 0.0;
}

std::string hms(double s) {
  char buf[32];
  const long t = static_cast<long>(s);
  std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

// AdamW with decay on matrices only (norm gains and biases are not decayed).
std::unique_ptr<torch::optim::AdamW> make_optimizer(const TrainModel& model, const LoopOptions& o) {
  std::vector<torch::Tensor> decay, plain;
  for (const auto& [name, t] : model.named_parameters()) (t.dim() >= 2 ? decay : plain).push_back(t);
  auto opts = torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).eps(1e-8);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(opts).weight_decay(o.weight_decay)));
  groups.emplace_back(plain, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(opts).weight_decay(0.0)));
  return std::make_unique<torch::optim::AdamW>(groups, opts);
}

// The shared loop (trainer.h). Resumes from out/checkpoint when asked; refuses to overwrite a
// checkpoint otherwise.
TrainResult train_loop(const char* what, const LoopOptions& o, TrainModel& model, const LossFn& loss_fn,
                       const EvalFn& eval_fn, const nlohmann::json& extra_config, nlohmann::json run_info) {
  if (o.out.empty()) throw std::runtime_error(std::string(what) + ": --out is required");
  if (o.steps < 1) throw std::runtime_error("--steps must be ≥ 1");
  if (o.threads > 0) set_torch_threads(o.threads);
  std::filesystem::create_directories(o.out);
  auto opt = make_optimizer(model, o);
  LrSchedule sched;
  sched.peak = o.lr;
  sched.total = o.steps;
  sched.warmup = o.warmup >= 0 ? o.warmup : std::min<int64_t>(100, o.steps / 10);
  sched.min_ratio = o.min_lr_ratio;

  int64_t step = 0;
  nlohmann::json evals = nlohmann::json::array();
  const std::string ckpt = find_checkpoint(o.out);
  if (!ckpt.empty() && !o.resume)
    throw std::runtime_error(o.out +
                             ": holds a checkpoint; pass --resume to continue it or choose another --out");
  if (!ckpt.empty()) {
    auto state = load_checkpoint(ckpt, model, *opt);
    step = state["step"].get<int64_t>();
    if (state.contains("evals")) evals = state["evals"];
    if (!o.quiet)
      std::fprintf(stderr, "[%s] resuming %s at step %lld\n", what, ckpt.c_str(), (long long)step);
  }
  run_info["steps"] = o.steps;
  auto save = [&](int64_t done) {
    nlohmann::json state = {{"step", done}, {"evals", evals}, {"run", run_info}};
    save_checkpoint(o.out, model, *opt, state, extra_config);
  };

  TrainResult res;
  const auto params = model.parameters();
  const auto t0 = std::chrono::steady_clock::now();
  int64_t ran = 0;
  while (step < o.steps) {
    const double lr = sched.at(step);
    for (auto& g : opt->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    opt->zero_grad();
    auto loss = loss_fn(step);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(params, o.clip);
    opt->step();
    res.last_loss = loss.item<double>();
    res.losses.push_back(res.last_loss);
    ++step;
    ++ran;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!o.quiet)
      std::fprintf(stderr, "\r[%s] step %lld/%lld loss %.4f lr %.2e %.3f s/step ETA %s   ", what,
                   (long long)step, (long long)o.steps, res.last_loss, lr, el / ran,
                   hms(el / ran * (o.steps - step)).c_str());
    const bool last = step == o.steps;
    if (!last && o.eval_every > 0 && step % o.eval_every == 0) {
      auto e = eval_fn();
      e["step"] = step;
      evals.push_back(e);
      if (!o.quiet)
        std::fprintf(stderr, "\n[%s] eval at step %lld: %s\n", what, (long long)step, e.dump().c_str());
    }
    const bool stop = o.stop_after > 0 && step >= o.stop_after;
    if (!last && (stop || (o.checkpoint_every > 0 && step % o.checkpoint_every == 0))) save(step);
    if (stop && !last) break;
  }
  res.steps_done = step;
  res.seconds_per_step =
      ran ? std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / ran : 0.0;
  if (step == o.steps) {
    auto e = eval_fn();
    e["step"] = step;
    evals.push_back(e);
    res.heldout_bpb = e["bpb"].get<double>();
    if (!o.quiet) std::fprintf(stderr, "\n[%s] final eval: %s\n", what, e.dump().c_str());
    save(step);
  } else if (!o.quiet) {
    std::fprintf(stderr, "\n[%s] stopped after step %lld (resume with --resume)\n", what, (long long)step);
  }
  return res;
}

// The tokenizer keys of a model folder's config.json, to carry into a model trained from it.
nlohmann::json tokenizer_keys_of(const std::string& dir) {
  std::ifstream in(dir + "/config.json");
  if (!in) throw std::runtime_error(dir + "/config.json: cannot read");
  nlohmann::json j;
  in >> j;
  nlohmann::json out = nlohmann::json::object();
  for (const char* k : {"rootspec_tokenizer", "rootspec_special_tokens", "bos_token_id", "eos_token_id"})
    if (j.contains(k)) out[k] = j[k];
  return out;
}

ModelConfig config_of(const ModelShape& s, int vocab) {
  const int inter = s.intermediate > 0 ? s.intermediate : ((8 * s.hidden / 3 + 31) / 32) * 32;
  ModelConfig c = small_config(ModelArch::Llama, vocab, s.hidden, s.layers, s.heads,
                               s.kv_heads > 0 ? s.kv_heads : s.heads, inter);
  if (s.hidden % s.heads != 0) throw std::runtime_error("--hidden must be a multiple of --heads");
  c.tie_word_embeddings = true;
  c.rope_theta = 10000.0;
  c.max_position_embeddings = s.max_position;
  c.bos_token_ids = {kBosToken};
  c.eos_token_ids = {kEosToken};
  return c;
}

nlohmann::json shape_json(const ModelShape& s) {
  return {{"layers", s.layers},
          {"hidden", s.hidden},
          {"heads", s.heads},
          {"kv_heads", s.kv_heads},
          {"intermediate", s.intermediate},
          {"max_position", s.max_position}};
}

nlohmann::json loop_json(const LoopOptions& o) {
  return {{"corpus", o.corpus},
          {"batch", o.batch},
          {"seq", o.seq},
          {"lr", o.lr},
          {"min_lr_ratio", o.min_lr_ratio},
          {"warmup", o.warmup},
          {"weight_decay", o.weight_decay},
          {"clip", o.clip},
          {"seed", o.seed}};
}

}  // namespace

TrainResult run_pretrain(const LoopOptions& o, const ModelShape& shape) {
  if (o.seq + 1 > shape.max_position) throw std::runtime_error("--seq must be below --max-position");
  ByteCorpus corpus(o.corpus, o.seq + 1);
  TrainModel model(config_of(shape, kByteVocab), o.seed);
  if (!o.quiet)
    std::fprintf(stderr, "[pretrain] %lld parameters; corpus %lld train / %lld held-out tokens\n",
                 (long long)model.parameter_count(), (long long)corpus.train_tokens(),
                 (long long)corpus.heldout_tokens());
  auto loss = [&](int64_t step) {
    return next_token_loss(model, corpus.batch(o.seed, step, o.batch, o.seq + 1));
  };
  auto eval = [&]() { return nlohmann::json{{"bpb", bits_per_byte(model, corpus, o.seq, o.eval_windows)}}; };
  nlohmann::json info = {{"mode", "pretrain"}, {"shape", shape_json(shape)}, {"loop", loop_json(o)}};
  return train_loop("pretrain", o, model, loss, eval, byte_tokenizer_keys(), info);
}

TrainResult run_distill(const LoopOptions& o, const ModelShape& shape, const std::string& target_dir) {
  TrainModel teacher(target_dir);
  teacher.set_requires_grad(false);
  if (o.seq + 1 > shape.max_position) throw std::runtime_error("--seq must be below --max-position");
  ByteCorpus corpus(o.corpus, o.seq + 1);
  TrainModel model(config_of(shape, teacher.config().vocab_size), o.seed);
  if (!o.quiet)
    std::fprintf(stderr, "[distill] drafter %lld parameters, target %lld\n",
                 (long long)model.parameter_count(), (long long)teacher.parameter_count());
  // KL(p_target ‖ q_drafter), mean over the batch's positions (objectives.h).
  auto loss = [&](int64_t step) {
    return distill_kl(teacher, model, corpus.batch(o.seed, step, o.batch, o.seq + 1).narrow(1, 0, o.seq));
  };
  auto eval = [&]() { return nlohmann::json{{"bpb", bits_per_byte(model, corpus, o.seq, o.eval_windows)}}; };
  nlohmann::json info = {
      {"mode", "distill"}, {"target", target_dir}, {"shape", shape_json(shape)}, {"loop", loop_json(o)}};
  return train_loop("distill", o, model, loss, eval, tokenizer_keys_of(target_dir), info);
}

ExitMode exit_mode(const ExitOptions& e) {
  std::vector<std::string> chosen;
  if (e.token_only) chosen.push_back("--token-only");
  if (e.prefix_weighted) chosen.push_back("--prefix-weighted");
  if (e.kl_only) chosen.push_back("--kl-only");
  if (e.mixed_lambda) chosen.push_back("--mixed-lambda");
  if (chosen.size() > 1) {
    std::string names = chosen[0];
    for (size_t i = 1; i < chosen.size(); ++i) names += " and " + chosen[i];
    throw std::runtime_error(names +
                             " exclude each other: choose one objective (none: the exit-weighted loss)");
  }
  if (e.mixed_lambda && (!(*e.mixed_lambda >= 0.0) || !std::isfinite(*e.mixed_lambda)))
    throw std::runtime_error("--mixed-lambda must be finite and ≥ 0");
  if (e.token_only) return ExitMode::TokenOnly;
  if (e.prefix_weighted) return ExitMode::PrefixWeighted;
  if (e.kl_only) return ExitMode::KlOnly;
  return e.mixed_lambda ? ExitMode::Mixed : ExitMode::Exit;
}

const char* exit_mode_name(ExitMode m) {
  switch (m) {
    case ExitMode::TokenOnly:
      return "token-only";
    case ExitMode::PrefixWeighted:
      return "prefix-weighted";
    case ExitMode::KlOnly:
      return "kl-only";
    case ExitMode::Mixed:
      return "mixed";
    case ExitMode::Exit:
      break;
  }
  return "exittrain";
}

TrainResult run_exittrain(const LoopOptions& o, const ExitOptions& e) {
  const ExitMode mode = exit_mode(e);  // before any loading: a flag clash fails at once
  if (e.budget < 1) throw std::runtime_error("--budget must be ≥ 1");
  TrainModel model(e.drafter_dir);
  TrainModel teacher(e.target_dir);  // the KL term's target rows, batched with gradients off
  teacher.set_requires_grad(false);
  ByteCorpus corpus(o.corpus, o.seq + 1);
  RuntimeOptions ro;
  ro.max_context = static_cast<int>(o.seq) + 8;
  ro.max_tree = std::max(e.budget, 1);
  ModelRuntime target(e.target_dir, ro);  // scores the realised trees (exit law)
  PoolShape shape;
  shape.top_k = e.top_k;
  shape.depth = e.depth;
  shape.expand = e.expand;
  const char* what = exit_mode_name(mode);
  // All arms read the same windows x [b, seq + 1]. The tree-weighted losses, the KL term and
  // the mixed objective use the first seq tokens as the contexts (the KL term at every prefix
  // of them, the trees below the whole); the token-only control ([Exit] §6.2) takes the
  // plain next-token loss over the whole window.
  auto loss = [&](int64_t step) {
    auto x = corpus.batch(o.seed, step, o.batch, o.seq + 1);  // [b, seq + 1]
    if (mode == ExitMode::TokenOnly) return next_token_loss(model, x);
    auto c = x.narrow(1, 0, o.seq);  // [b, seq]
    if (mode == ExitMode::KlOnly) return distill_kl(teacher, model, c);
    auto ex = build_exit_examples(model, target, c, shape, e.budget, e.temperature);
    if (mode == ExitMode::Mixed) return mixed_loss(teacher, model, c, ex, *e.mixed_lambda);
    return mean_tree_loss(model, ex, mode == ExitMode::PrefixWeighted);
  };
  // Held-out: the drafter's bits per byte, its KL to the target (nats per position), and V(T)
  // (expected accepted draft tokens per round, [Exit] Theorem 1) of its realised trees on
  // the first held-out contexts.
  auto eval = [&]() {
    const double bpb = bits_per_byte(model, corpus, o.seq, o.eval_windows);
    const double kl = heldout_kl(teacher, model, corpus, o.seq, o.eval_windows);
    auto w = corpus.heldout_windows(o.seq, std::min<int64_t>(16, o.eval_windows));  // [k, seq]
    double vt = 0.0;
    for (const auto& c : contexts_of(w))
      vt += build_exit_example(model, target, c, shape, e.budget, e.temperature).accepted;
    return nlohmann::json{{"bpb", bpb}, {"kl", kl}, {"v_t", w.size(0) ? vt / w.size(0) : 0.0}};
  };
  nlohmann::json info = {
      {"mode", what},
      {"mixed_lambda", e.mixed_lambda ? nlohmann::json(*e.mixed_lambda) : nlohmann::json()},
      {"target", e.target_dir},
      {"drafter", e.drafter_dir},
      {"budget", e.budget},
      {"temperature", e.temperature},
      {"pool", {e.top_k, e.depth, e.expand}},
      {"loop", loop_json(o)}};
  return train_loop(what, o, model, loss, eval, tokenizer_keys_of(e.drafter_dir), info);
}

double heldout_bits_per_byte(const std::string& model_dir, const std::vector<std::string>& corpus_files,
                             int64_t seq, int64_t windows) {
  TrainModel model(model_dir);
  ByteCorpus corpus(corpus_files, seq + 1);
  return bits_per_byte(model, corpus, seq, windows);
}

}  // namespace rootspec
