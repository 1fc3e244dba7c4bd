#include "batched_runtime.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <string>

#include "rows.h"

namespace rootspec {

BatchedRuntime::BatchedRuntime(const std::string& dir, const RuntimeOptions& options)
    : region_(kv_region_slots(TreeKv::capacity_for(options.max_context, options.max_tree))),
      max_tree_(options.max_tree),
      backend_(make_pass_backend(dir, options, options.max_sequences * region_)) {
  if (options.max_sequences < 1 || options.max_sequences > kMaxTreeBucket)
    throw std::invalid_argument("max_sequences " + std::to_string(options.max_sequences) + " is not in 1.." +
                                std::to_string(kMaxTreeBucket));
  for (int q = 0; q < options.max_sequences; ++q)
    kv_.emplace_back(options.max_context, options.max_tree, backend_->config().vocab_size);
  in_use_.assign(options.max_sequences, 0);
  rows_.resize(static_cast<size_t>(kMaxTreeBucket) * backend_->config().vocab_size);
}

BatchedRuntime::~BatchedRuntime() = default;

const ModelConfig& BatchedRuntime::config() const { return backend_->config(); }
const char* BatchedRuntime::backend_name() const { return backend_->name(); }

int BatchedRuntime::open_sequences() const {
  return static_cast<int>(std::count(in_use_.begin(), in_use_.end(), 1));
}

int BatchedRuntime::open() {
  for (int q = 0; q < max_sequences(); ++q)
    if (!in_use_[q]) {
      in_use_[q] = 1;
      kv_[q].truncate(0);
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
  TreeKv& kv = kv_.at(sequence);
  kv.check_room(static_cast<int>(tokens.size()), "prefill");
  kv.discard_tree();
  const int vocab = vocab_size();
  RowsView last;
  for (size_t done = 0; done < tokens.size(); done += kMaxTreeBucket) {
    const int n = static_cast<int>(std::min<size_t>(kMaxTreeBucket, tokens.size() - done));
    std::vector<int32_t> part(tokens.begin() + done, tokens.begin() + done + n), parents(n), path(n);
    for (int i = 0; i < n; ++i) parents[i] = i - 1, path[i] = i;
    kv.add_nodes(part, parents);
    pass_.clear();
    pass_.add(kv.batch(part.data(), 0, n, n), sequence * region_);
    backend_->forward(pass_.batch(backend_->row_bucket(n)), PassKind::Prefill, rows_.data());
    backend_->move_kv(kv.commit(path));  // a chain from the context's end: no moves
    last = RowsView{rows_.data() + static_cast<size_t>(n - 1) * vocab, 1, vocab};
  }
  return last;
}

void BatchedRuntime::export_kv(int sequence, int first, int n, float* out) {
  const TreeKv& kv = kv_.at(sequence);
  if (first < 0 || n < 0 || first + n > kv.length())
    throw std::invalid_argument("export_kv: positions past the sequence's committed context");
  backend_->export_kv(sequence * region_ + first, n, out);
}

void BatchedRuntime::adopt_kv(int sequence, int n, const float* kv_in) {
  if (n < 0) throw std::invalid_argument("adopt_kv: negative count");
  TreeKv& kv = kv_.at(sequence);
  kv.check_room(n, "adopt_kv");
  kv.discard_tree();
  backend_->import_kv(sequence * region_ + kv.length(), n, kv_in);
  // The books: chains committed in place (no moves), as prefill's.
  for (int done = 0; done < n; done += kMaxTreeBucket) {
    const int m = std::min(kMaxTreeBucket, n - done);
    std::vector<int32_t> tokens(m, 0), parents(m), path(m);
    for (int i = 0; i < m; ++i) parents[i] = i - 1, path[i] = i;
    kv.add_nodes(tokens, parents);
    kv.commit(path);
  }
}

RowsView BatchedRuntime::trees(const std::vector<Tree>& trees, PassKind kind, std::vector<int>& first_rows) {
  return run_trees(trees, nullptr, kind, first_rows);
}

bool BatchedRuntime::processes_rows() const { return backend_->processes_rows() && backend_->keeps_rows(); }

RowsView BatchedRuntime::trees_processed(const std::vector<Tree>& trees,
                                         const std::vector<PassBackend::ProcessedLaw>& laws, PassKind kind,
                                         std::vector<int>& first_rows) {
  if (!processes_rows()) throw std::logic_error("batched tree pass: this backend processes no rows");
  if (laws.size() != trees.size()) throw std::invalid_argument("batched tree pass: one law per tree");
  return run_trees(trees, &laws, kind, first_rows);
}

RowsView BatchedRuntime::run_trees(const std::vector<Tree>& trees,
                                   const std::vector<PassBackend::ProcessedLaw>* laws, PassKind kind,
                                   std::vector<int>& first_rows) {
  const int vocab = vocab_size();
  int total = 0;
  first_rows.clear();
  for (const Tree& t : trees) {
    const int n = static_cast<int>(t.tokens->size());
    if (n < 1 || n > kMaxTreeBucket)
      throw std::invalid_argument("batched tree pass: a tree of " + std::to_string(n) + " nodes (1 to " +
                                  std::to_string(kMaxTreeBucket) + ")");
    TreeKv& kv = kv_.at(t.sequence);
    kv.discard_tree();
    kv.add_nodes(*t.tokens, *t.parents);
    first_rows.push_back(total);
    total += n;
  }
  if (static_cast<size_t>(total) * vocab > rows_.size()) rows_.resize(static_cast<size_t>(total) * vocab);
  // Whole trees into passes of ≤ 64 rows, in order.
  size_t k = 0;
  int last_first = 0;  // the last pass's first row
  while (k < trees.size()) {
    pass_.clear();
    pass_laws_.clear();
    const int first = first_rows[k];
    for (; k < trees.size(); ++k) {
      const int n = static_cast<int>(trees[k].tokens->size());
      if (pass_.rows() + n > kMaxTreeBucket) break;
      if (laws) {  // the tree's rows within this pass
        pass_laws_.push_back((*laws)[k]);
        pass_laws_.back().first_row = pass_.rows();
        pass_laws_.back().rows = n;
      }
      const Tree& t = trees[k];
      pass_.add(kv_[t.sequence].batch(t.tokens->data(), 0, n, n), t.sequence * region_);
    }
    const int pass_rows = pass_.rows();  // real rows (batch() pads pass_ to the bucket)
    const PassBatch& batch = pass_.batch(backend_->row_bucket(pass_rows));
    float* rows = rows_.data() + static_cast<size_t>(first) * vocab;  // [pass_rows, vocab]
    if (!laws) {
      backend_->forward(batch, kind, rows);
      continue;
    }
    backend_->forward_processed(batch, kind, pass_laws_);
    ++processed_passes_;
    last_first = first;
    if (k < trees.size())  // the next pass overwrites the device's rows: these come over now
      for (int r = 0; r < pass_rows; ++r) backend_->copy_kept_row(r, rows + static_cast<size_t>(r) * vocab);
  }
  if (!laws) return RowsView{rows_.data(), total, vocab};
  kept_.reset(total, last_first);
  return RowsView{nullptr, total, vocab, &kept_};
}

void BatchedRuntime::KeptRows::reset(int rows, int first_kept) {
  first_kept_ = first_kept;
  ready_.assign(rows, 0);
  std::fill(ready_.begin(), ready_.begin() + first_kept, 1);
}

const float* BatchedRuntime::KeptRows::row(int i) const {
  assert(i >= 0 && i < static_cast<int>(ready_.size()));
  float* host = rt_.rows_.data() + static_cast<size_t>(i) * rt_.vocab_size();
  if (!ready_[i]) {
    rt_.backend_->copy_kept_row(i - first_kept_, host);
    ready_[i] = 1;
  }
  return host;
}

RowsView BatchedRuntime::roots(const std::vector<int>& sequences, const std::vector<int32_t>& tokens,
                               PassKind kind) {
  return run_roots(sequences, tokens, nullptr, kind);
}

RowsView BatchedRuntime::roots_processed(const std::vector<int>& sequences,
                                         const std::vector<int32_t>& tokens,
                                         const std::vector<PassBackend::ProcessedLaw>& laws, PassKind kind) {
  if (!processes_rows()) throw std::logic_error("batched root pass: this backend processes no rows");
  if (laws.size() != sequences.size()) throw std::invalid_argument("batched root pass: one law per root");
  return run_roots(sequences, tokens, &laws, kind);
}

RowsView BatchedRuntime::run_roots(const std::vector<int>& sequences, const std::vector<int32_t>& tokens,
                                   const std::vector<PassBackend::ProcessedLaw>* laws, PassKind kind) {
  assert(sequences.size() == tokens.size());
  std::vector<std::vector<int32_t>> one(tokens.size()), no_parent(tokens.size(), std::vector<int32_t>{-1});
  std::vector<Tree> nodes;
  for (size_t k = 0; k < tokens.size(); ++k) {
    kv_.at(sequences[k]).check_room(1, "root pass");
    one[k] = {tokens[k]};
    nodes.push_back(Tree{sequences[k], &one[k], &no_parent[k]});
  }
  std::vector<int> first_rows;
  const RowsView rows = run_trees(nodes, laws, kind, first_rows);
  for (int q : sequences) kv_[q].commit({0});  // the root token joins the context: no moves
  return rows;
}

void BatchedRuntime::commit(int sequence, const std::vector<int32_t>& path) {
  std::vector<KvMove> moves = kv_.at(sequence).commit(path);
  for (KvMove& m : moves) m.from += sequence * region_, m.to += sequence * region_;
  backend_->move_kv(moves);
}

void BatchedRuntime::prepare(PassKind next) { backend_->prepare(next); }

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
  for (size_t k = 0; k < trees.size(); ++k) {
    const int n = static_cast<int>(trees[k].input->tokens.size());
    float* out = tree_probs_.data() + static_cast<size_t>(first_rows[k]) * vocab;
    for (int i = 0; i < n; ++i)
      probs_from_logits(logits.row(first_rows[k] + i), vocab, trees[k].temperature,
                        out + static_cast<size_t>(i) * vocab);
    rows.push_back(RowsView{out, n, vocab});
  }
}

}  // namespace rootspec
