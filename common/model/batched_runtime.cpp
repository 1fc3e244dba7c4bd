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

RowsView BatchedRuntime::trees(const std::vector<Tree>& trees, PassKind kind, std::vector<int>& first_rows) {
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
  while (k < trees.size()) {
    pass_.clear();
    const int first = first_rows[k];
    for (; k < trees.size(); ++k) {
      const int n = static_cast<int>(trees[k].tokens->size());
      if (pass_.rows() + n > kMaxTreeBucket) break;
      const Tree& t = trees[k];
      pass_.add(kv_[t.sequence].batch(t.tokens->data(), 0, n, n), t.sequence * region_);
    }
    backend_->forward(pass_.batch(backend_->row_bucket(pass_.rows())), kind,
                      rows_.data() + static_cast<size_t>(first) * vocab);
  }
  return RowsView{rows_.data(), total, vocab};
}

RowsView BatchedRuntime::roots(const std::vector<int>& sequences, const std::vector<int32_t>& tokens,
                               PassKind kind) {
  assert(sequences.size() == tokens.size());
  std::vector<std::vector<int32_t>> one(tokens.size()), no_parent(tokens.size(), std::vector<int32_t>{-1});
  std::vector<Tree> nodes;
  for (size_t k = 0; k < tokens.size(); ++k) {
    kv_.at(sequences[k]).check_room(1, "root pass");
    one[k] = {tokens[k]};
    nodes.push_back(Tree{sequences[k], &one[k], &no_parent[k]});
  }
  std::vector<int> first_rows;
  const RowsView rows = this->trees(nodes, kind, first_rows);
  for (int q : sequences) kv_[q].commit({0});  // the root token joins the context: no moves
  return rows;
}

void BatchedRuntime::commit(int sequence, const std::vector<int32_t>& path) {
  std::vector<KvMove> moves = kv_.at(sequence).commit(path);
  for (KvMove& m : moves) m.from += sequence * region_, m.to += sequence * region_;
  backend_->move_kv(moves);
}

void BatchedRuntime::prepare(PassKind next) { backend_->prepare(next); }

void BatchModelScorer::root_rows(const std::vector<Root>& roots, std::vector<RowsView>& rows) {
  std::vector<int> sequences;
  std::vector<int32_t> tokens;
  bool any_speculating = false;
  for (const Root& r : roots) {
    sequences.push_back(sequence_of_.at(r.member));
    tokens.push_back(r.token);
    any_speculating |= !r.plain;
  }
  // A root pass when a drafter drafts beside it for any member, else a plain one.
  const RowsView logits = rt_.roots(sequences, tokens, any_speculating ? PassKind::Root : PassKind::Plain);
  ++passes_;
  const int vocab = rt_.vocab_size();
  root_probs_.resize(roots.size() * vocab);
  rows.clear();
  for (size_t k = 0; k < roots.size(); ++k) {
    float* out = root_probs_.data() + k * vocab;
    probs_from_logits(logits.row(static_cast<int>(k)), vocab, roots[k].temperature, out);
    rows.push_back(RowsView{out, 1, vocab});
  }
}

void BatchModelScorer::tree_rows(const std::vector<Tree>& trees, std::vector<RowsView>& rows) {
  std::vector<BatchedRuntime::Tree> nodes;
  for (const Tree& t : trees)
    nodes.push_back({sequence_of_.at(t.member), &t.input->tokens, &t.input->parents});
  std::vector<int> first_rows;
  const RowsView logits = rt_.trees(nodes, PassKind::Tree, first_rows);
  ++passes_;
  const int vocab = rt_.vocab_size();
  tree_probs_.resize(static_cast<size_t>(logits.n_rows) * vocab);
  rows.clear();
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
