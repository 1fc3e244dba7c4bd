#include "study_record.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "generate.h"
#include "model_runtime.h"
#include "prompt_set.h"
#include "rows.h"
#include "runtime_drafter.h"
#include "study_values.h"
#include "tokenizer.h"

namespace rootspec {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string contexts_file(const std::string& dir, double t) {
  char name[64];
  std::snprintf(name, sizeof name, "contexts-T%g.jsonl", t);
  return dir + "/" + name;
}

// One progress line a second at most: done/total, rate, ETA.
class Progress {
 public:
  Progress(std::string what, int total, bool quiet) : what_(std::move(what)), total_(total), quiet_(quiet) {}
  void update(int done, bool last = false) {
    if (quiet_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - shown_ < std::chrono::seconds(1)) return;
    shown_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const int run = done - first_;
    const double rate = secs > 0 ? run / secs : 0;
    std::fprintf(stderr, "[%s] %d/%d, %.1f/s, ETA %.0f s%s", what_.c_str(), done, total_, rate,
                 rate > 0 ? (total_ - done) / rate : 0.0, last ? "\n" : "\r");
  }
  void begin(int done) { first_ = done; }

 private:
  std::string what_;
  int total_;
  bool quiet_;
  int first_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), shown_{};
};

json meta_of(const RecordOptions& o) {
  return {{"target", o.target_dir},
          {"drafter", o.drafter_dir},
          {"prompts", o.prompts_path},
          {"temperatures", o.temperatures},
          {"pool_shape", {{"top_k", o.shape.top_k}, {"depth", o.shape.depth}, {"expand", o.shape.expand}}},
          {"new_tokens", o.new_tokens},
          {"stride", o.stride},
          {"seed", o.seed}};
}

PoolShape shape_of(const json& meta) {
  PoolShape s;
  s.top_k = meta.at("pool_shape").at("top_k");
  s.depth = meta.at("pool_shape").at("depth");
  s.expand = meta.at("pool_shape").at("expand");
  return s;
}

// Complete lines of a JSONL file; a trailing partial or unreadable line (an interrupted write)
// is cut off the file.
std::vector<json> read_complete_lines(const std::string& path, bool repair) {
  std::vector<json> out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;
  std::string line;
  std::streamoff good_end = 0;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline: partial
    try {
      out.push_back(json::parse(line));
    } catch (const json::exception&) {
      break;
    }
    good_end = in.tellg();
  }
  in.close();
  if (repair && fs::exists(path) && static_cast<std::streamoff>(fs::file_size(path)) != good_end)
    fs::resize_file(path, good_end);
  return out;
}

std::vector<std::vector<int32_t>> prompt_tokens(const std::string& path, const std::string& model_dir,
                                                std::vector<std::string>* ids) {
  const std::vector<BenchPrompt> prompts = load_prompt_set(path);
  if (prompts.empty()) throw std::runtime_error(path + ": no prompt");
  std::unique_ptr<Tokenizer> tok;
  std::vector<std::vector<int32_t>> out;
  for (const BenchPrompt& p : prompts) {
    ids->push_back(p.id);
    if (p.has_ids) {
      out.push_back(p.prompt_ids);
      continue;
    }
    if (!tok) tok = load_tokenizer(model_dir);
    // Raw completion prompts: the study walks the target's own continuations of the text.
    out.push_back(tok->encode(p.prompt, /*add_special=*/true));
  }
  return out;
}

struct Site {
  int prompt, position;
};

// The walk's contexts at one temperature: position-major across prompts.
std::vector<Site> walk_sites(const std::vector<std::vector<int32_t>>& generations, int stride, int n) {
  std::vector<Site> sites;
  for (int j = 0; static_cast<int>(sites.size()) < n; j += stride) {
    bool any = false;
    for (size_t p = 0; p < generations.size() && static_cast<int>(sites.size()) < n; ++p)
      if (j <= static_cast<int>(generations[p].size())) sites.push_back({static_cast<int>(p), j}), any = true;
    if (!any) break;
  }
  return sites;
}

}  // namespace

json load_study_meta(const std::string& dir) {
  std::ifstream in(dir + "/study.json");
  if (!in) throw std::runtime_error(dir + ": no study.json (not a rootspec-study record folder)");
  return json::parse(in);
}

void record_study(const RecordOptions& o) {
  if (o.contexts < 1) throw std::invalid_argument("--contexts must be ≥ 1");
  if (o.stride < 1) throw std::invalid_argument("--stride must be ≥ 1");
  if (o.shape.top_k < 1 || o.shape.depth < 1 || o.shape.expand < 1)
    throw std::invalid_argument("--pool-shape: top-k, depth and expand must be ≥ 1");
  for (double t : o.temperatures)
    if (!(t >= 0 && t <= 100)) throw std::invalid_argument("--temperatures: each must lie in [0, 100]");
  fs::create_directories(o.out_dir);
  const json meta = meta_of(o);
  if (fs::exists(o.out_dir + "/study.json")) {
    const json old = load_study_meta(o.out_dir);
    if (old != meta)
      throw std::runtime_error(o.out_dir + " holds a record made with other options (" + old.dump() +
                               "); resume with the same options or record into another --out");
  } else {
    std::ofstream(o.out_dir + "/study.json") << meta.dump(2) << "\n";
  }

  std::vector<std::string> ids;
  const std::vector<std::vector<int32_t>> prompts = prompt_tokens(o.prompts_path, o.target_dir, &ids);
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  RuntimeOptions ro;
  ro.max_context = static_cast<int>(longest) + o.new_tokens + o.shape.depth + 4;
  ro.max_tree = std::max({kMaxTreeBucket, o.shape.expected_size() + 1});
  ModelRuntime target(o.target_dir, ro);
  RuntimeOptions dro = ro;
  dro.max_tree = std::max(kMaxTreeBucket, o.shape.expand * o.shape.depth);
  ModelRuntime drafter(o.drafter_dir, dro);
  if (drafter.vocab_size() != target.vocab_size())
    throw std::runtime_error("the drafter's vocabulary differs from the target's");
  for (const auto& p : prompts)
    for (int32_t t : p)
      if (t < 0 || t >= target.vocab_size())
        throw std::runtime_error(o.prompts_path + ": token id outside the vocabulary");
  DraftSession session(drafter);
  const int vocab = target.vocab_size();

  for (size_t ti = 0; ti < o.temperatures.size(); ++ti) {
    const double T = o.temperatures[ti];
    const std::string path = contexts_file(o.out_dir, T);
    const std::vector<json> done = read_complete_lines(path, /*repair=*/true);
    // The target's own generations at T (plain decoding, seeded per prompt).
    std::vector<std::vector<int32_t>> generations;
    for (size_t p = 0; p < prompts.size(); ++p) {
      RequestOptions g;
      g.autoregressive = true;
      g.temperature = T;
      g.max_new_tokens = o.new_tokens;
      g.seed = o.seed * 1000003u + p * 7919u + ti;
      generations.push_back(generate(target, nullptr, prompts[p], g).tokens);
    }
    const std::vector<Site> sites = walk_sites(generations, o.stride, o.contexts);
    if (static_cast<int>(sites.size()) < o.contexts)
      throw std::runtime_error("only " + std::to_string(sites.size()) + " contexts at T = " +
                               std::to_string(T) + ": raise --new-tokens, lower --stride or add prompts");
    for (size_t i = 0; i < done.size() && i < sites.size(); ++i)
      if (done[i].at("prompt") != sites[i].prompt || done[i].at("position") != sites[i].position)
        throw std::runtime_error(path + ": line " + std::to_string(i + 1) + " is not this walk's context");
    std::ofstream out(path, std::ios::app | std::ios::binary);
    char what[48];
    std::snprintf(what, sizeof what, "record T=%g", T);
    Progress progress(what, o.contexts, o.quiet);
    progress.begin(static_cast<int>(done.size()));
    for (size_t i = done.size(); i < sites.size(); ++i) {
      StudyContext c;
      c.temperature = T;
      c.prompt = sites[i].prompt;
      c.prompt_id = ids[c.prompt];
      c.position = sites[i].position;
      c.context = prompts[c.prompt];
      c.context.insert(c.context.end(), generations[c.prompt].begin(),
                       generations[c.prompt].begin() + c.position);
      // The target as the decoder runs it (generate(): prefill C minus the root token, then a
      // root pass), so the recorded rows are the rows a round reads.
      target.truncate(0);
      if (c.context.size() > 1) target.prefill(std::vector<int32_t>(c.context.begin(), c.context.end() - 1));
      const RowsView root = target.root_pass_tempered(c.context.back(), PassKind::Root, T);
      c.root_row.assign(root.row(0), root.row(0) + vocab);
      session.start(o.shape, 0);
      session.draft(c.context, c.pool);
      // Every pool node's row: one tree (in passes of kMaxTreeBucket) over the whole pool.
      const RowsView rows = target.tree_pass_tempered(c.pool.token, c.pool.parent, T);  // [pool, vocab]
      c.edge_prob.resize(c.pool.size());
      for (int u = 0; u < c.pool.size(); ++u) {
        const int p = c.pool.parent[u];
        c.edge_prob[u] = p == kRoot ? c.root_row[c.pool.token[u]] : rows.row(p)[c.pool.token[u]];
      }
      out << context_to_json(c).dump() << "\n";
      out.flush();
      progress.update(static_cast<int>(i) + 1);
    }
    progress.update(static_cast<int>(sites.size()), true);
  }
}

std::vector<StudyContext> load_study(const std::string& dir) {
  const json meta = load_study_meta(dir);
  std::vector<double> ts = meta.at("temperatures").get<std::vector<double>>();
  std::sort(ts.begin(), ts.end());
  std::vector<StudyContext> out;
  for (double t : ts) {
    const std::string path = contexts_file(dir, t);
    size_t line = 0;
    for (const json& j : read_complete_lines(path, /*repair=*/false)) {
      ++line;
      try {
        out.push_back(context_from_json(j));
      } catch (const std::exception& e) {
        throw std::runtime_error(path + ":" + std::to_string(line) + ": " + e.what());
      }
    }
  }
  return out;
}

json check_study(const CheckOptions& o) {
  const json meta = load_study_meta(o.dir);
  const PoolShape shape = shape_of(meta);
  std::vector<StudyContext> contexts = load_study(o.dir);
  if (contexts.empty()) throw std::runtime_error(o.dir + ": no recorded context");
  if (o.seeds < 1) throw std::invalid_argument("--seeds must be ≥ 1");
  for (int b : o.budgets)
    if (b < 1) throw std::invalid_argument("--budgets: each must be ≥ 1");
  std::map<double, std::vector<const StudyContext*>> by_t;
  size_t longest = 0;
  for (const StudyContext& c : contexts) {
    auto& g = by_t[c.temperature];
    if (o.max_contexts <= 0 || static_cast<int>(g.size()) < o.max_contexts) g.push_back(&c);
    longest = std::max(longest, c.context.size());
  }
  RuntimeOptions ro;
  ro.max_context = static_cast<int>(longest) + shape.depth + 4;
  ro.max_tree = std::max(kMaxTreeBucket, *std::max_element(o.budgets.begin(), o.budgets.end()) + 1);
  ModelRuntime target(o.target_dir.empty() ? meta.at("target").get<std::string>() : o.target_dir, ro);
  RuntimeOptions dro = ro;
  dro.max_tree = std::max(kMaxTreeBucket, shape.expand * shape.depth);
  ModelRuntime drafter(o.drafter_dir.empty() ? meta.at("drafter").get<std::string>() : o.drafter_dir, dro);

  json results = json::array();
  for (const auto& [T, group] : by_t) {
    const int seeds = T == 0 ? 1 : o.seeds;
    char what[48];
    std::snprintf(what, sizeof what, "check T=%g", T);
    Progress progress(what, static_cast<int>(group.size()), o.quiet);
    // [rule × budget][context]: analytic expectation, online mean accepted tokens and the
    // variance of that mean over the seeds
    std::vector<std::vector<double>> analytic(o.rules.size() * o.budgets.size()), online(analytic.size()),
        online_var(analytic.size());
    for (size_t i = 0; i < group.size(); ++i) {
      const StudyContext& c = *group[i];
      const std::vector<double> P = pool_path_probs(c);
      for (size_t r = 0; r < o.rules.size(); ++r)
        for (size_t k = 0; k < o.budgets.size(); ++k) {
          const size_t cell = r * o.budgets.size() + k;
          analytic[cell].push_back(
              expected_accepted_online(o.rules[r], selection_inputs(c, P, o.budgets[k])));
          RequestOptions req;
          req.rule = o.rules[r];
          req.budget = o.budgets[k];
          req.temperature = T;
          req.verifier = T == 0 ? Verifier::Greedy : Verifier::Residual;
          req.max_new_tokens = 1;  // one round
          req.stop_at_eos = false;
          double sum = 0, sum2 = 0;
          for (int s = 0; s < seeds; ++s) {
            req.seed = (uint64_t(i) << 20) ^ (uint64_t(s) * 0x9E3779B97F4A7C15ull) ^ cell;
            const double a = generate(target, &drafter, c.context, req, shape).rounds.at(0).accepted;
            sum += a, sum2 += a * a;
          }
          const double mean = sum / seeds;
          online[cell].push_back(mean);
          online_var[cell].push_back(
              seeds > 1 ? std::max(0.0, (sum2 - seeds * mean * mean) / (seeds - 1)) / seeds : 0.0);
        }
      progress.update(static_cast<int>(i) + 1);
    }
    progress.update(static_cast<int>(group.size()), true);
    for (size_t r = 0; r < o.rules.size(); ++r)
      for (size_t k = 0; k < o.budgets.size(); ++k) {
        const size_t cell = r * o.budgets.size() + k;
        const size_t n = group.size();
        // The contexts are fixed by the record; the online mean's only randomness is the seeds',
        // so the interval comes from the per-context variance over seeds.
        double ma = 0, mo = 0, md = 0, var = 0;
        int differ = 0;
        for (size_t i = 0; i < n; ++i) {
          const double d = online[cell][i] - analytic[cell][i];
          ma += analytic[cell][i] / n, mo += online[cell][i] / n, md += d / n;
          var += online_var[cell][i] / (double(n) * n);
          if (std::abs(d) > 1e-6) ++differ;
        }
        const double se = std::sqrt(var);
        json row = {{"temperature", T},
                    {"rule", rule_name(o.rules[r])},
                    {"budget", o.budgets[k]},
                    {"contexts", n},
                    {"seeds", seeds},
                    {"analytic", ma},
                    {"online", mo},
                    {"diff", md},
                    {"diff_lo", md - 1.96 * se},
                    {"diff_hi", md + 1.96 * se},
                    {"contexts_differing", differ}};
        row["within"] = T == 0 ? json(differ == 0) : json(md - 1.96 * se <= 0 && 0 <= md + 1.96 * se);
        results.push_back(row);
      }
  }
  return {{"dir", o.dir}, {"results", results}};
}

std::string check_markdown(const json& check) {
  std::ostringstream md;
  md << "| T | rule | B | contexts × seeds | analytic E[accepted] | online mean accepted | online − analytic "
        "[95%] | "
        "contexts differing | consistent |\n|---|---|---|---|---|---|---|---|---|\n";
  char buf[256];
  for (const json& r : check.at("results")) {
    std::snprintf(buf, sizeof buf,
                  "| %g | %s | %d | %d × %d | %.4f | %.4f | %+.4f [%+.4f, %+.4f] | %d | %s |\n",
                  r.at("temperature").get<double>(), r.at("rule").get<std::string>().c_str(),
                  r.at("budget").get<int>(), r.at("contexts").get<int>(), r.at("seeds").get<int>(),
                  r.at("analytic").get<double>(), r.at("online").get<double>(), r.at("diff").get<double>(),
                  r.at("diff_lo").get<double>(), r.at("diff_hi").get<double>(),
                  r.at("contexts_differing").get<int>(), r.at("within").get<bool>() ? "yes" : "**no**");
    md << buf;
  }
  md << "\nT = 0 is deterministic (greedy verification, y = the argmax): every context must agree exactly. "
        "T > 0: the residual verifier, whose expected accepted length is V(T) (verifier.h); the interval is "
        "the "
        "seeds' (the contexts are the record's); consistent = it holds 0.\n";
  return md.str();
}

}  // namespace rootspec
