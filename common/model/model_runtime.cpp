#include "model_runtime.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <string>

namespace rootspec {

int tree_bucket(int n) {
  assert(n >= 1);
  int b = 1;
  while (b < n && b < kMaxTreeBucket) b *= 2;
  return b;
}

ModelRuntime::ModelRuntime(const std::string& dir, const RuntimeOptions& options)
    : options_(options),
      backend_(make_pass_backend(dir, options, TreeKv::capacity_for(options.max_context, options.max_tree))),
      kv_(options.max_context, options.max_tree, backend_->config().vocab_size) {
  host_rows_ = backend_->host_rows(row_floats());
}

ModelRuntime::ModelRuntime(std::shared_ptr<PassBackend> backend, const RuntimeOptions& options, int kv_base)
    : options_(options),
      backend_(std::move(backend)),
      kv_base_(kv_base),
      kv_(options.max_context, options.max_tree, backend_->config().vocab_size) {}

std::vector<std::unique_ptr<ModelRuntime>> ModelRuntime::sequences(const std::string& dir,
                                                                   const RuntimeOptions& options) {
  if (options.max_sequences < 1 || options.max_sequences > kMaxTreeBucket)
    throw std::invalid_argument("max_sequences " + std::to_string(options.max_sequences) + " is not in 1.." +
                                std::to_string(kMaxTreeBucket));
  const int region = kv_region_slots(TreeKv::capacity_for(options.max_context, options.max_tree));
  std::shared_ptr<PassBackend> backend = make_pass_backend(dir, options, options.max_sequences * region);
  std::vector<std::unique_ptr<ModelRuntime>> out;
  auto shared = std::make_shared<SharedRows>();
  shared->backend = backend.get();
  shared->vocab = backend->config().vocab_size;
  for (int q = 0; q < options.max_sequences; ++q) {
    out.push_back(std::unique_ptr<ModelRuntime>(new ModelRuntime(backend, options, q * region)));
    out.back()->shared_ = shared;
  }
  return out;
}

size_t ModelRuntime::row_floats() const {
  return static_cast<size_t>(std::max(options_.max_tree, kMaxTreeBucket)) * backend_->config().vocab_size;
}

float* ModelRuntime::rows_buffer() {
  if (!host_rows_) {  // a sequence's own calls only (the backend's buffer is one; run_shared needs none)
    own_rows_.resize(row_floats());
    host_rows_ = own_rows_.data();
  }
  return host_rows_;
}

const PassBatch& ModelRuntime::placed(const PassBatch& one) {
  if (kv_base_ == 0) return one;
  placed_.clear();
  placed_.add(one, kv_base_);
  return placed_.batch(one.bucket);
}

void ModelRuntime::move_kv(std::vector<KvMove> moves) {
  for (KvMove& m : moves) m.from += kv_base_, m.to += kv_base_;
  backend_->move_kv(moves);
}

ModelRuntime::~ModelRuntime() = default;

const ModelConfig& ModelRuntime::config() const { return backend_->config(); }
const char* ModelRuntime::backend_name() const { return backend_->name(); }
int64_t ModelRuntime::weight_bytes() const { return backend_->weight_bytes(); }
int64_t ModelRuntime::kv_cache_bytes() const { return backend_->kv_cache_bytes(); }
double ModelRuntime::device_seconds() const { return backend_->device_seconds(); }

RowsView ModelRuntime::run_nodes(const std::vector<int32_t>& tokens, int first, PassKind kind,
                                 double temperature) {
  const int n = static_cast<int>(tokens.size());
  const int vocab = vocab_size();
  for (int done = 0; done < n; done += kMaxTreeBucket) {
    const int m = std::min(kMaxTreeBucket, n - done);
    const PassBatch& batch =
        placed(kv_.batch(tokens.data() + done, first + done, m, backend_->row_bucket(m)));
    float* rows = rows_buffer() + static_cast<size_t>(done) * vocab;
    if (temperature < 0)
      backend_->forward(batch, kind, rows);
    else
      backend_->forward_tempered(batch, kind, temperature, rows);
  }
  return RowsView{rows_buffer(), n, vocab};
}

int ModelRuntime::prefill_chunk() const { return std::min(kMaxTreeBucket, options_.max_tree); }

RowsView ModelRuntime::prefill(const std::vector<int32_t>& tokens) {
  if (tokens.empty()) throw std::invalid_argument("prefill: no tokens");
  kv_.check_room(static_cast<int>(tokens.size()), "prefill");
  kv_.discard_tree();
  RowsView last;
  const size_t chunk = static_cast<size_t>(prefill_chunk());
  for (size_t done = 0; done < tokens.size(); done += chunk) {
    const int n = static_cast<int>(std::min(chunk, tokens.size() - done));
    std::vector<int32_t> part(tokens.begin() + done, tokens.begin() + done + n);
    std::vector<int32_t> parents(n), path(n);
    for (int i = 0; i < n; ++i) {
      parents[i] = i - 1;
      path[i] = i;
    }
    kv_.add_nodes(part, parents);
    const RowsView rows = run_nodes(part, 0, PassKind::Prefill);
    move_kv(kv_.commit(path));  // a chain from slot length(): no moves
    last = RowsView{rows.row(n - 1), 1, rows.vocab};
  }
  return last;
}

void ModelRuntime::append_root(int32_t token) {
  kv_.check_room(1, "root pass");
  kv_.discard_tree();
  kv_.add_nodes({token}, {-1});
}

RowsView ModelRuntime::root_pass(int32_t token, PassKind kind) {
  assert(kind == PassKind::Root || kind == PassKind::Plain);
  append_root(token);
  const RowsView rows = run_nodes({token}, 0, kind);
  kv_.commit({0});
  return rows;
}

RowsView ModelRuntime::root_pass_tempered(int32_t token, PassKind kind, double temperature) {
  assert(kind == PassKind::Root || kind == PassKind::Plain);
  if (!(temperature >= 0) && temperature != kLogitRows)
    throw std::invalid_argument("root pass: a temperature below 0");
  append_root(token);
  const RowsView rows = run_nodes({token}, 0, kind, temperature);
  kv_.commit({0});
  return rows;
}

RowsView ModelRuntime::tree_pass(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents) {
  kv_.discard_tree();
  return extend_tree(tokens, parents);
}

RowsView ModelRuntime::tree_pass_tempered(const std::vector<int32_t>& tokens,
                                          const std::vector<int32_t>& parents, double temperature) {
  if (!(temperature >= 0) && temperature != kLogitRows)
    throw std::invalid_argument("tree pass: a temperature below 0");
  kv_.discard_tree();
  const int first = kv_.add_nodes(tokens, parents);
  const int n = static_cast<int>(tokens.size());
  // One pass's rows stay on a device that keeps them (at kLogitRows its logits, which the round
  // processes on the host row by row as the verifier reads them); larger trees come back as logits.
  const bool on_device = backend_->keeps_rows() && n <= kMaxTreeBucket;
  if (on_device)
    backend_->forward_kept(placed(kv_.batch(tokens.data(), first, n, backend_->row_bucket(n))),
                           PassKind::Tree, temperature);
  else
    run_nodes(tokens, first, PassKind::Tree);  // logits into host_rows_, tempered when read
  tree_rows_.reset(n, temperature, on_device);
  return RowsView{nullptr, n, vocab_size(), &tree_rows_};
}

bool ModelRuntime::processes_rows(int rows) const {
  return backend_->processes_rows() && backend_->keeps_rows() && rows <= kMaxTreeBucket;
}

RowsView ModelRuntime::root_pass_processed(int32_t token, PassKind kind,
                                           const PassBackend::ProcessedLaw& law) {
  assert(kind == PassKind::Root || kind == PassKind::Plain);
  if (!processes_rows(1)) throw std::logic_error("root pass: this backend processes no rows");
  append_root(token);
  backend_->forward_processed(placed(kv_.batch(&token, 0, 1, backend_->row_bucket(1))), kind, {law});
  kv_.commit({0});
  tree_rows_.reset(1, law.temperature, true);
  return RowsView{nullptr, 1, vocab_size(), &tree_rows_};
}

RowsView ModelRuntime::tree_pass_processed(const std::vector<int32_t>& tokens,
                                           const std::vector<int32_t>& parents,
                                           const PassBackend::ProcessedLaw& law) {
  const int n = static_cast<int>(tokens.size());
  if (!processes_rows(n)) throw std::logic_error("tree pass: this backend processes no rows of this tree");
  kv_.discard_tree();
  const int first = kv_.add_nodes(tokens, parents);
  backend_->forward_processed(placed(kv_.batch(tokens.data(), first, n, backend_->row_bucket(n))),
                              PassKind::Tree, {law});
  tree_rows_.reset(n, law.temperature, true);
  return RowsView{nullptr, n, vocab_size(), &tree_rows_};
}

void ModelRuntime::TreeRows::reset(int n, double temperature, bool on_device) {
  n_ = n;
  temperature_ = temperature;
  on_device_ = on_device;
  ready_.assign(n, 0);
  if (!on_device) tempered_.resize(static_cast<size_t>(n) * rt_.vocab_size());
}

const float* ModelRuntime::TreeRows::row(int i) const {
  assert(i >= 0 && i < n_);
  const size_t at = static_cast<size_t>(i) * rt_.vocab_size();
  float* host = on_device_ ? rt_.rows_buffer() + at : tempered_.data() + at;
  if (!ready_[i]) {
    if (on_device_)
      rt_.backend_->copy_kept_row(i, host);
    else
      probs_from_logits(rt_.rows_buffer() + at, rt_.vocab_size(), temperature_, host);
    ready_[i] = 1;
  }
  return host;
}

RowsView ModelRuntime::extend_tree(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents) {
  const int first = kv_.add_nodes(tokens, parents);
  return run_nodes(tokens, first, PassKind::Tree);
}

TopKRowsView ModelRuntime::run_nodes_top_k(const std::vector<int32_t>& tokens, int first, int k) {
  const int n = static_cast<int>(tokens.size());
  top_tokens_.resize(static_cast<size_t>(n) * k);
  top_probs_.resize(top_tokens_.size());
  for (int done = 0; done < n; done += kMaxTreeBucket) {
    const int m = std::min(kMaxTreeBucket, n - done);
    const PassBatch& batch =
        placed(kv_.batch(tokens.data() + done, first + done, m, backend_->row_bucket(m)));
    const size_t at = static_cast<size_t>(done) * k;
    backend_->forward_top_k(batch, PassKind::Tree, k, top_tokens_.data() + at, top_probs_.data() + at);
  }
  return TopKRowsView{top_tokens_.data(), top_probs_.data(), n, k};
}

TopKRowsView ModelRuntime::tree_pass_top_k(const std::vector<int32_t>& tokens,
                                           const std::vector<int32_t>& parents, int k) {
  kv_.discard_tree();
  return extend_tree_top_k(tokens, parents, k);
}

TopKRowsView ModelRuntime::extend_tree_top_k(const std::vector<int32_t>& tokens,
                                             const std::vector<int32_t>& parents, int k) {
  if (k < 1 || k > vocab_size())
    throw std::invalid_argument("top-k rows: k = " + std::to_string(k) + " is outside [1, vocab]");
  const int first = kv_.add_nodes(tokens, parents);
  return run_nodes_top_k(tokens, first, k);
}

RowsView ModelRuntime::run_shared(std::vector<SharedPart>& parts, int top_k, std::optional<PassKind> kind) {
  if (parts.empty()) return RowsView{};
  SharedPart& front = parts.front();
  if (parts.size() == 1 && !front.root && !front.law && !kind) {  // the runtime's own call
    ModelRuntime& rt = *front.rt;
    front.first_row = 0;
    if (!front.parents) {
      if (top_k > 0) throw std::invalid_argument("run_shared: top-k rows of a prefill chunk");
      front.rows = rt.prefill(*front.tokens);
    } else if (top_k > 0) {
      front.top = front.new_tree ? rt.tree_pass_top_k(*front.tokens, *front.parents, top_k)
                                 : rt.extend_tree_top_k(*front.tokens, *front.parents, top_k);
    } else {
      front.rows = front.new_tree ? rt.tree_pass(*front.tokens, *front.parents)
                                  : rt.extend_tree(*front.tokens, *front.parents);
    }
    return front.rows;
  }
  const std::shared_ptr<SharedRows>& shared = front.rt->shared_;
  const bool processed = front.law != nullptr;
  for (size_t i = 0; i < parts.size(); ++i) {  // every part checked before any KV changes
    const SharedPart& p = parts[i];
    const ModelRuntime& rt = *p.rt;
    if (rt.shared_ != shared || !shared)
      throw std::logic_error("run_shared: the parts' runtimes are not sequences of one backend");
    for (size_t j = 0; j < i; ++j)
      if (parts[j].rt == p.rt) throw std::logic_error("run_shared: two parts of one runtime");
    if ((p.law != nullptr) != processed)
      throw std::logic_error("run_shared: processed rows for some parts only");
    const int n = static_cast<int>(p.tokens->size());
    if (n < 1) throw std::invalid_argument("run_shared: a part without nodes");
    if (p.root) {
      if (n != 1) throw std::invalid_argument("run_shared: a root part of " + std::to_string(n) + " tokens");
      rt.kv_.check_room(1, "root pass");
    } else if (!p.parents) {
      if (n > rt.prefill_chunk())
        throw std::invalid_argument("run_shared: a prefill chunk past prefill_chunk()");
      rt.kv_.check_room(n, "prefill");
    } else if (n > kMaxTreeBucket) {
      throw std::invalid_argument("run_shared: a tree part of " + std::to_string(n) +
                                  " nodes, past one pass");
    }
    if (top_k > 0 && (!p.parents || p.root))
      throw std::invalid_argument("run_shared: top-k rows of a prefill chunk or a root");
  }
  if (top_k < 0 || top_k > front.rt->vocab_size())
    throw std::invalid_argument("top-k rows: k = " + std::to_string(top_k) + " is outside [1, vocab]");
  if (processed && (top_k > 0 || !front.rt->processes_rows(1)))
    throw std::logic_error("run_shared: this backend processes no rows (or top-k rows were asked for)");
  int total = 0;
  std::vector<int> first_slots;  // [parts] each part's first tree slot
  for (SharedPart& p : parts) {
    ModelRuntime& rt = *p.rt;
    const int n = static_cast<int>(p.tokens->size());
    if (!p.parents || p.root || p.new_tree) rt.kv_.discard_tree();
    std::vector<int32_t> chain(n);
    for (int k = 0; k < n; ++k) chain[k] = k - 1;  // a prefill chunk's, or a root's (−1)
    first_slots.push_back(rt.kv_.add_nodes(*p.tokens, p.parents && !p.root ? *p.parents : chain));
    p.first_row = total;
    total += n;
  }
  SharedRows& rows = *shared;
  if (top_k == 0) rows.rows.resize(static_cast<size_t>(total) * rows.vocab);
  rows.ready.assign(total, 1);
  // Whole parts in order, as many as fit a pass.
  for (size_t begin = 0, n = 0, end = 0; begin < parts.size(); begin = end, n = 0) {
    for (end = begin; end < parts.size() && n + parts[end].tokens->size() <= kMaxTreeBucket; ++end)
      n += parts[end].tokens->size();
    run_shared_pass(parts, first_slots, begin, end, top_k, kind, /*last=*/end == parts.size());
  }
  for (SharedPart& p : parts) {
    if (p.root) p.rt->kv_.commit({0});  // the root token joins the context: no moves
    if (top_k > 0 || processed) continue;
    const int n = static_cast<int>(p.tokens->size());
    p.rows = p.parents || p.root ? RowsView{rows.row(p.first_row), n, rows.vocab}
                                 : RowsView{rows.row(p.first_row + n - 1), 1, rows.vocab};
  }
  if (top_k > 0) return RowsView{};
  return processed ? RowsView{nullptr, total, rows.vocab, &rows}
                   : RowsView{rows.rows.data(), total, rows.vocab};
}

void ModelRuntime::run_shared_pass(std::vector<SharedPart>& parts, const std::vector<int>& first_slots,
                                   size_t begin, size_t end, int top_k, std::optional<PassKind> kind,
                                   bool last) {
  ModelRuntime& lead = *parts[begin].rt;
  SharedRows& shared = *lead.shared_;
  PassBackend& backend = *lead.backend_;
  BatchedPass& pass = lead.placed_;  // any of the runtimes' (each placed() clears it first)
  pass.clear();
  shared.laws.clear();
  bool any_tree = false;
  for (size_t i = begin; i < end; ++i) {
    SharedPart& p = parts[i];
    const int n = static_cast<int>(p.tokens->size());
    if (p.law) {  // the part's rows within this pass
      shared.laws.push_back(*p.law);
      shared.laws.back().first_row = pass.rows();
      shared.laws.back().rows = n;
    }
    pass.add(p.rt->kv_.batch(p.tokens->data(), first_slots[i], n, n), p.rt->kv_base_);
    any_tree |= p.parents != nullptr || p.root;
  }
  const int pass_rows = pass.rows();  // real rows (batch() pads the pass to the bucket)
  const PassBatch& batch = pass.batch(backend.row_bucket(pass_rows));
  const PassKind pass_kind = kind ? *kind : any_tree ? PassKind::Tree : PassKind::Prefill;
  if (top_k > 0) {
    std::vector<int32_t> tokens(static_cast<size_t>(pass_rows) * top_k);  // [pass rows, k]
    std::vector<float> probs(tokens.size());                              // [pass rows, k]
    backend.forward_top_k(batch, pass_kind, top_k, tokens.data(), probs.data());
    for (size_t i = begin, row = 0; i < end; ++i) {
      SharedPart& p = parts[i];
      ModelRuntime& rt = *p.rt;
      const size_t n = p.tokens->size();
      rt.top_tokens_.assign(tokens.begin() + row * top_k, tokens.begin() + (row + n) * top_k);
      rt.top_probs_.assign(probs.begin() + row * top_k, probs.begin() + (row + n) * top_k);
      p.top = TopKRowsView{rt.top_tokens_.data(), rt.top_probs_.data(), static_cast<int>(n), top_k};
      row += n;
    }
    return;
  }
  const int first = parts[begin].first_row;
  float* out = shared.rows.data() + static_cast<size_t>(first) * shared.vocab;  // [pass rows, vocab]
  if (shared.laws.empty()) {
    backend.forward(batch, pass_kind, out);
  } else {
    backend.forward_processed(batch, pass_kind, shared.laws);
    ++shared.processed_passes;
    if (last) {  // read when asked for (SharedRows::row); the device keeps them until the next pass
      shared.first_kept = first;
      std::fill(shared.ready.begin() + first, shared.ready.end(), 0);
    } else {  // the next pass overwrites the device's rows: these come over now
      for (int r = 0; r < pass_rows; ++r)
        backend.copy_kept_row(r, out + static_cast<size_t>(r) * shared.vocab);
    }
  }
  for (size_t i = begin; i < end; ++i) {  // prefill chunks join their contexts
    SharedPart& p = parts[i];
    if (p.parents || p.root) continue;
    std::vector<int32_t> path(p.tokens->size());
    for (size_t k = 0; k < path.size(); ++k) path[k] = static_cast<int32_t>(k);
    p.rt->move_kv(p.rt->kv_.commit(path));  // a chain from slot length(): no moves
  }
}

const float* ModelRuntime::SharedRows::row(int i) const {
  assert(i >= 0 && i < static_cast<int>(ready.size()));
  float* host = rows.data() + static_cast<size_t>(i) * vocab;
  if (!ready[i]) {
    backend->copy_kept_row(i - first_kept, host);
    ready[i] = 1;
  }
  return host;
}

int ModelRuntime::processed_passes() const { return shared_ ? shared_->processed_passes : 0; }

int ModelRuntime::device_top_k() const { return backend_->device_top_k(); }
bool ModelRuntime::batch_invariant() const { return backend_->batch_invariant(); }

void ModelRuntime::commit(const std::vector<int32_t>& path) { move_kv(kv_.commit(path)); }

void ModelRuntime::truncate(int n) { kv_.truncate(n); }

bool ModelRuntime::exports_kv() const { return backend_->exports_kv(); }
int64_t ModelRuntime::kv_floats(int n) const { return backend_->kv_floats(n); }

void ModelRuntime::export_kv(int first, int n, float* out) {
  if (first < 0 || n < 0 || first + n > length())
    throw std::invalid_argument("export_kv: positions outside the committed context");
  backend_->export_kv(kv_base_ + first, n, out);
}

void ModelRuntime::adopt_kv(int n, const float* kv) {
  if (n < 0) throw std::invalid_argument("adopt_kv: negative count");
  kv_.check_room(n, "adopt_kv");
  kv_.discard_tree();
  backend_->import_kv(kv_base_ + length(), n, kv);
  // The books: chains committed in place (no moves), as prefill's.
  const int chunk = prefill_chunk();
  for (int done = 0; done < n; done += chunk) {
    const int m = std::min(chunk, n - done);
    std::vector<int32_t> tokens(m, 0), parents(m), path(m);
    for (int i = 0; i < m; ++i) parents[i] = i - 1, path[i] = i;
    kv_.add_nodes(tokens, parents);
    kv_.commit(path);
  }
}

void ModelRuntime::prepare(PassKind next) { backend_->prepare(next); }

void ModelRuntime::hand_off(std::function<void()> task) { backend_->hand_off(std::move(task)); }

void ModelRuntime::share_root_pass_when(std::function<bool()> ready) {
  backend_->share_root_pass_when(std::move(ready));
}

}  // namespace rootspec
