#include "batched_runtime.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <string>

#include "rows.h"

namespace rootspec {

BatchedRuntime::BatchedRuntime(const std::string& dir, const RuntimeOptions& options)
    : seq_(ModelRuntime::sequences(dir, options)), in_use_(seq_.size(), 0) {}

int BatchedRuntime::open_sequences() const {
  return static_cast<int>(std::count(in_use_.begin(), in_use_.end(), 1));
}

int BatchedRuntime::open() {
  for (int q = 0; q < max_sequences(); ++q)
    if (!in_use_[q]) {
      in_use_[q] = 1;
      seq_[q]->truncate(0);
      return q;
    }
  throw std::runtime_error("BatchedRuntime: all " + std::to_string(max_sequences()) +
                           " sequences are in use");
}

void BatchedRuntime::close(int sequence) {
  assert(in_use_.at(sequence));
  in_use_[sequence] = 0;
}

RowsView BatchedRuntime::prefill(int sequence, const std::vector<int32_t>& tokens) {
  if (tokens.empty()) throw std::invalid_argument("prefill: no tokens");
  ModelRuntime& rt = *seq_.at(sequence);
  if (rt.length() + static_cast<int>(tokens.size()) > rt.options().max_context)
    throw std::invalid_argument("prefill: " + std::to_string(tokens.size()) + " tokens past the context of " +
                                std::to_string(rt.options().max_context));
  const size_t chunk = static_cast<size_t>(prefill_chunk());
  RowsView last;
  for (size_t done = 0; done < tokens.size(); done += chunk) {
    const std::vector<int32_t> part(tokens.begin() + done,
                                    tokens.begin() + std::min(tokens.size(), done + chunk));
    std::vector<ModelRuntime::SharedPart> one(1);
    one[0].rt = &rt;
    one[0].tokens = &part;
    ModelRuntime::run_shared(one, /*top_k=*/0,
                             PassKind::Prefill);  // a kind: the shared rows, not the sequence's own
    last = one[0].rows;
  }
  return last;
}

RowsView BatchedRuntime::trees(const std::vector<Tree>& trees, PassKind kind, std::vector<int>& first_rows) {
  return run(trees, /*roots=*/false, nullptr, kind, first_rows);
}

RowsView BatchedRuntime::trees_processed(const std::vector<Tree>& trees,
                                         const std::vector<PassBackend::ProcessedLaw>& laws, PassKind kind,
                                         std::vector<int>& first_rows) {
  if (!processes_rows()) throw std::logic_error("batched tree pass: this backend processes no rows");
  if (laws.size() != trees.size()) throw std::invalid_argument("batched tree pass: one law per tree");
  return run(trees, /*roots=*/false, &laws, kind, first_rows);
}

RowsView BatchedRuntime::roots(const std::vector<int>& sequences, const std::vector<int32_t>& tokens,
                               PassKind kind) {
  return roots_processed(sequences, tokens, {}, kind);
}

RowsView BatchedRuntime::roots_processed(const std::vector<int>& sequences,
                                         const std::vector<int32_t>& tokens,
                                         const std::vector<PassBackend::ProcessedLaw>& laws, PassKind kind) {
  assert(sequences.size() == tokens.size());
  if (!laws.empty() && !processes_rows())
    throw std::logic_error("batched root pass: this backend processes no rows");
  if (!laws.empty() && laws.size() != sequences.size())
    throw std::invalid_argument("batched root pass: one law per root");
  std::vector<std::vector<int32_t>> one(tokens.size());
  std::vector<Tree> nodes;
  for (size_t k = 0; k < tokens.size(); ++k) {
    one[k] = {tokens[k]};
    nodes.push_back(Tree{sequences[k], &one[k], nullptr});
  }
  std::vector<int> first_rows;
  return run(nodes, /*roots=*/true, laws.empty() ? nullptr : &laws, kind, first_rows);
}

RowsView BatchedRuntime::run(const std::vector<Tree>& trees, bool roots,
                             const std::vector<PassBackend::ProcessedLaw>* laws, PassKind kind,
                             std::vector<int>& first_rows) {
  parts_.assign(trees.size(), ModelRuntime::SharedPart{});
  // A lone tree of logits may pass one pass: its sequence's own call (ModelRuntime::tree_pass),
  // in as many passes as it needs.
  const bool lone = !roots && !laws && trees.size() == 1;
  const int most = lone ? std::max(max_tree(), kMaxTreeBucket) : kMaxTreeBucket;
  bool past_one_pass = false;
  for (size_t k = 0; k < trees.size(); ++k) {
    const Tree& t = trees[k];
    const int n = static_cast<int>(t.tokens->size());
    if (n < 1 || n > most)
      throw std::invalid_argument("batched tree pass: a tree of " + std::to_string(n) + " nodes (1 to " +
                                  std::to_string(most) + ")");
    past_one_pass = n > kMaxTreeBucket;
    ModelRuntime::SharedPart& p = parts_[k];
    p.rt = seq_.at(t.sequence).get();
    p.tokens = t.tokens;
    p.parents = roots ? nullptr : t.parents;
    p.root = roots;
    p.new_tree = true;
    p.law = laws ? &(*laws)[k] : nullptr;
  }
  const RowsView rows = ModelRuntime::run_shared(
      parts_, /*top_k=*/0, past_one_pass ? std::nullopt : std::optional<PassKind>(kind));
  first_rows.clear();
  for (const ModelRuntime::SharedPart& p : parts_) first_rows.push_back(p.first_row);
  return rows;
}

void BatchModelScorer::add_law(size_t k, const RowProcessing* processing, double temperature) {
  if (processing) {
    laws_.push_back(paths_[k].law(*processing));
    return;
  }
  PassBackend::ProcessedLaw tempered;  // no params: the rows tempered only (kLogitRows: logits)
  tempered.temperature = temperature;
  laws_.push_back(tempered);
}

// A pass holds every member's rows, and the backend's processed pass takes a law per member: where
// any member's rows come processed, the others take a law without params (tempered on the
// device as forward_kept tempers, or left as logits), so that one pass still serves the batch. A
// pass with no processed member comes back as logits, tempered here.
void BatchModelScorer::root_rows(const std::vector<Root>& roots, std::vector<RowsView>& rows) {
  std::vector<int> sequences;
  std::vector<int32_t> tokens;
  bool any_speculating = false, any_processed = false;
  for (const Root& r : roots) {
    sequences.push_back(sequence_of_.at(r.member));
    tokens.push_back(r.token);
    any_speculating |= !r.plain;
    any_processed |= r.processing != nullptr;
  }
  // A root pass when a drafter drafts beside it for any member, else a plain one.
  const PassKind kind = any_speculating ? PassKind::Root : PassKind::Plain;
  RowsView pass;  // [roots, vocab]
  if (any_processed) {
    paths_.resize(roots.size());
    laws_.clear();
    for (size_t k = 0; k < roots.size(); ++k) {
      if (roots[k].processing) paths_[k].root();
      add_law(k, roots[k].processing, roots[k].temperature);
    }
    pass = rt_.roots_processed(sequences, tokens, laws_, kind);
  } else {
    pass = rt_.roots(sequences, tokens, kind);
  }
  ++passes_;
  const int vocab = rt_.vocab_size();
  root_probs_.resize(roots.size() * vocab);
  rows.clear();
  for (size_t k = 0; k < roots.size(); ++k) {
    float* out = root_probs_.data() + k * vocab;
    const float* row = pass.row(static_cast<int>(k));
    if (any_processed)  // already under the member's law; copied, as the tree pass overwrites the device's
      std::copy(row, row + vocab, out);
    else
      probs_from_logits(row, vocab, roots[k].temperature, out);
    rows.push_back(RowsView{out, 1, vocab});
  }
}

void BatchModelScorer::tree_rows(const std::vector<Tree>& trees, std::vector<RowsView>& rows) {
  std::vector<BatchedRuntime::Tree> nodes;
  bool any_processed = false;
  for (const Tree& t : trees) {
    nodes.push_back({sequence_of_.at(t.member), &t.input->tokens, &t.input->parents});
    any_processed |= t.processing != nullptr;
  }
  std::vector<int> first_rows;
  const int vocab = rt_.vocab_size();
  rows.clear();
  if (any_processed) {
    paths_.resize(trees.size());
    laws_.clear();
    for (size_t k = 0; k < trees.size(); ++k) {
      if (trees[k].processing) paths_[k].tree(*trees[k].input, trees[k].processing->anchor_generated);
      add_law(k, trees[k].processing, trees[k].temperature);
    }
    const RowsView pass = rt_.trees_processed(nodes, laws_, PassKind::Tree, first_rows);
    ++passes_;
    member_rows_.resize(trees.size());
    for (size_t k = 0; k < trees.size(); ++k) {
      member_rows_[k].reset(pass, first_rows[k]);
      rows.push_back(
          RowsView{nullptr, static_cast<int>(trees[k].input->tokens.size()), vocab, &member_rows_[k]});
    }
    return;
  }
  const RowsView logits = rt_.trees(nodes, PassKind::Tree, first_rows);
  ++passes_;
  tree_probs_.resize(static_cast<size_t>(logits.n_rows) * vocab);
  tempered_rows_.resize(trees.size());
  for (size_t k = 0; k < trees.size(); ++k) {
    const int n = static_cast<int>(trees[k].input->tokens.size());
    const size_t first = static_cast<size_t>(first_rows[k]) * vocab;
    tempered_rows_[k].reset(logits.row(first_rows[k]), tree_probs_.data() + first, n, vocab,
                            trees[k].temperature);
    rows.push_back(RowsView{nullptr, n, vocab, &tempered_rows_[k]});
  }
}

void BatchModelScorer::TemperedRows::reset(const float* logits, float* out, int n, int vocab,
                                           double temperature) {
  logits_ = logits;
  out_ = out;
  vocab_ = vocab;
  temperature_ = temperature;
  ready_.assign(n, 0);
}

const float* BatchModelScorer::TemperedRows::row(int i) const {
  assert(i >= 0 && i < static_cast<int>(ready_.size()));
  const size_t at = static_cast<size_t>(i) * vocab_;
  if (!ready_[i]) {
    probs_from_logits(logits_ + at, vocab_, temperature_, out_ + at);
    ready_[i] = 1;
  }
  return out_ + at;
}

}  // namespace rootspec
