#include "model_runtime.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "cpu_attention.h"
#include "model_weights.h"
#include "projection.h"

namespace rootspec {

namespace {

constexpr int kWindowQuantum = 64;  // key windows are multiples of this many positions

torch::ScalarType parse_dtype_option(const std::string& s) {
  if (s == "float32" || s == "fp32") return torch::kFloat32;
  if (s == "float16" || s == "fp16") return torch::kFloat16;
  if (s == "bfloat16" || s == "bf16") return torch::kBFloat16;
  throw std::invalid_argument("runtime dtype '" + s + "' is not supported (float32, float16, bfloat16)");
}

torch::Device parse_device_option(const std::string& s) {
  try {
    torch::Device d(s);
    if (d.is_cuda() && !torch::cuda::is_available())
      throw std::invalid_argument("device '" + s + "' is not available (no CUDA in this build or machine)");
    return d;
  } catch (const c10::Error& e) {
    throw std::invalid_argument("runtime device '" + s + "' is not valid");
  }
}

}  // namespace

void set_torch_threads(int n) {
  torch::set_num_threads(n);
}

// Inverse frequencies of RoPE, with Llama-3 scaling when configured: [head_dim / 2].
std::vector<double> rope_inv_freq(const ModelConfig& c) {
  const int half = c.head_dim / 2;
  std::vector<double> inv(half);
  for (int i = 0; i < half; ++i) inv[i] = 1.0 / std::pow(c.rope_theta, (2.0 * i) / c.head_dim);
  if (!c.rope_scaling.llama3) return inv;
  const RopeScaling& s = c.rope_scaling;
  const double old_len = s.original_max_position_embeddings;
  const double low_wavelen = old_len / s.low_freq_factor;
  const double high_wavelen = old_len / s.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2.0 * M_PI / f;
    if (wavelen < high_wavelen) continue;  // high frequency: unchanged
    if (wavelen > low_wavelen) {           // low frequency: scaled down
      f = f / s.factor;
      continue;
    }
    const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    f = (1.0 - smooth) * f / s.factor + smooth * f;
  }
  return inv;
}

int tree_bucket(int n) {
  assert(n >= 1);
  int b = 1;
  while (b < n && b < kMaxTreeBucket) b *= 2;
  return b;
}

struct ModelRuntime::Impl {
  RuntimeOptions opt;
  torch::Device device = torch::kCPU;
  torch::ScalarType dtype = torch::kFloat32;
  ModelWeights w;  // norms, embedding and lm_head; the layers' projections live in `proj`
  // The linear layers of one decoder layer, fused where they share an input.
  struct LayerProjections {
    Projection qkv;      // [hidden] → [(heads + 2·kv_heads)·hd]
    Projection o;        // [heads·hd] → [hidden]
    Projection gate_up;  // [hidden] → [2·inter]
    Projection down;     // [inter] → [hidden]
  };
  std::vector<LayerProjections> proj;
  Projection lm_head_cpu;               // fused_cpu only: [hidden] → [vocab], packed panels
  bool fused_cpu = false;               // CPU float32: forward_cpu() with cpu_attention.h's kernels
  std::unique_ptr<CpuWorkers> workers;  // CPU helper threads (cpu_helper_threads > 0)
  bool sharing = false;                 // share_passes(true): products use `workers`
  int vocab = 0;
  int capacity = 0;  // cache slots: max_context + max_tree + kMaxTreeBucket (padding slack)

  std::vector<torch::Tensor> k_cache, v_cache;  // per layer [n_kv, capacity, head_dim]; fused_cpu: panels
                                                //   (cpu_attention.h), flat
  torch::Tensor rope_cos, rope_sin;             // [capacity, head_dim]

  // Static pass inputs on the device, sized for the largest bucket.
  torch::Tensor in_tokens;   // [64] int64
  torch::Tensor in_pos;      // [64] int64
  torch::Tensor in_slots;    // [64] int64
  torch::Tensor in_mask;     // [64, capacity] dtype, 0 or −inf
  torch::Tensor out_logits;  // [64, vocab] float32
  // Host staging of the same (CPU tensors; pinned once a CUDA path exists).
  torch::Tensor h_tokens, h_pos, h_slots;  // [64] int64
  torch::Tensor h_mask;                    // [64, capacity] float32
  std::vector<float> host_rows;            // [max(max_tree, 64), vocab] rows handed back

  int len = 0;                      // committed positions
  std::vector<int32_t> tree_parent; // [tree_n] −1 or tree index
  std::vector<int32_t> tree_depth;  // [tree_n] 0 = child of the context

  torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight) const {
    auto xf = x.to(torch::kFloat32);
    xf = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + w.config.rms_norm_eps);
    return weight * xf.to(dtype);
  }

  static torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
    // x [b, heads, hd]; cos/sin [b, 1, hd]
    const int64_t half = x.size(-1) / 2;
    auto rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
    return x * cos + rotated * sin;
  }

  // forward() on the CPU in float32: the same computation with the fused kernels of
  // cpu_attention.h between the packed products, on buffers allocated at load (no torch call:
  // each costs a few µs of dispatch, ~0.1 ms of a pass of the shipped target).
  struct CpuBuffers {
    std::vector<float> x, hn, proj_out, qkv, attn, gate_up, act;  // [kMaxTreeBucket, width] each
  } cpu;

  void forward_cpu(int b, int W) {
    const ModelConfig& c = w.config;
    const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim,
                  hidden = c.hidden_size, inter = c.intermediate_size;
    const float eps = static_cast<float>(c.rms_norm_eps);
    CpuWorkers* const helpers = sharing ? workers.get() : nullptr;
    float* const x = cpu.x.data();              // [b, hidden] residual stream
    float* const hn = cpu.hn.data();            // [b, hidden] normed
    float* const proj_out = cpu.proj_out.data();  // [b, hidden] o / down outputs
    float* const qkv = cpu.qkv.data();          // [b, (nh + 2·nkv)·hd]
    float* const act = cpu.act.data();          // [b, inter]
    const float* embed = w.embed.data_ptr<float>();  // [vocab, hidden]
    const int64_t* tokens = in_tokens.data_ptr<int64_t>();
    for (int r = 0; r < b; ++r) std::memcpy(x + r * hidden, embed + tokens[r] * hidden, sizeof(float) * hidden);
    auto add_residual = [&] {
      for (int64_t i = 0; i < b * hidden; ++i) x[i] += proj_out[i];
    };
    CpuAttention at;
    at.rows = b;
    at.n_heads = static_cast<int>(nh);
    at.n_kv_heads = static_cast<int>(nkv);
    at.head_dim = static_cast<int>(hd);
    at.window = W;
    at.qkv_stride = (nh + 2 * nkv) * hd;
    at.pos = in_pos.data_ptr<int64_t>();
    at.slots = in_slots.data_ptr<int64_t>();
    at.rope_cos = rope_cos.data_ptr<float>();
    at.rope_sin = rope_sin.data_ptr<float>();
    at.mask = in_mask.data_ptr<float>();
    at.mask_stride = capacity;
    at.capacity = capacity;
    at.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    at.qkv = qkv;
    at.out = cpu.attn.data();
    for (size_t li = 0; li < w.layers.size(); ++li) {
      const LayerWeights& l = w.layers[li];
      const LayerProjections& pj = proj[li];
      cpu_rms_norm(x, l.input_norm.data_ptr<float>(), eps, b, hidden, hn);
      pj.qkv.cpu(hn, b, qkv, helpers);
      if (c.qk_norm)  // per head, in place: nh query heads, then nkv key heads of each row
        for (int r = 0; r < b; ++r) {
          float* q = qkv + r * at.qkv_stride;
          cpu_rms_norm(q, l.q_norm.data_ptr<float>(), eps, nh, hd, q);
          cpu_rms_norm(q + nh * hd, l.k_norm.data_ptr<float>(), eps, nkv, hd, q + nh * hd);
        }
      at.k_cache = k_cache[li].data_ptr<float>();
      at.v_cache = v_cache[li].data_ptr<float>();
      cpu_attention(at, helpers);
      pj.o.cpu(cpu.attn.data(), b, proj_out, helpers);
      add_residual();
      cpu_rms_norm(x, l.post_norm.data_ptr<float>(), eps, b, hidden, hn);
      pj.gate_up.cpu(hn, b, cpu.gate_up.data(), helpers);
      cpu_silu_mul(cpu.gate_up.data(), b, inter, act);
      pj.down.cpu(act, b, proj_out, helpers);
      add_residual();
    }
    cpu_rms_norm(x, w.norm.data_ptr<float>(), eps, b, hidden, hn);
    lm_head_cpu.cpu(hn, b, out_logits.data_ptr<float>(), helpers);  // [b, vocab]
  }

  // The graph-ready pass: reads the first b rows of the static inputs, a key window of W
  // slots, writes K/V at in_slots and logits into out_logits[:b]. Shapes depend on (b, W) only.
  void forward(int b, int W) {
    c10::InferenceMode guard;
    if (fused_cpu) return forward_cpu(b, W);
    const ModelConfig& c = w.config;
    const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim,
                  g = nh / nkv;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    auto tok = in_tokens.narrow(0, 0, b);                 // [b]
    auto pos = in_pos.narrow(0, 0, b);                    // [b]
    auto slots = in_slots.narrow(0, 0, b);                // [b]
    auto mask = in_mask.narrow(0, 0, b).narrow(1, 0, W);  // [b, W]
    auto cos = rope_cos.index_select(0, pos).unsqueeze(1);  // [b, 1, hd]
    auto sin = rope_sin.index_select(0, pos).unsqueeze(1);  // [b, 1, hd]
    auto x = w.embed.index_select(0, tok);                  // [b, hidden]
    for (size_t li = 0; li < w.layers.size(); ++li) {
      const LayerWeights& l = w.layers[li];
      const LayerProjections& pj = proj[li];
      auto hn = rms_norm(x, l.input_norm);                              // [b, hidden]
      auto qkv = pj.qkv(hn);                                            // [b, (nh + 2·nkv)·hd]
      auto q = qkv.narrow(1, 0, nh * hd).view({b, nh, hd});             // [b, nh, hd]
      auto k = qkv.narrow(1, nh * hd, nkv * hd).view({b, nkv, hd});     // [b, nkv, hd]
      auto v = qkv.narrow(1, (nh + nkv) * hd, nkv * hd).view({b, nkv, hd});  // [b, nkv, hd]
      if (c.qk_norm) {
        q = rms_norm(q, l.q_norm);
        k = rms_norm(k, l.k_norm);
      }
      q = rope(q, cos, sin);
      k = rope(k, cos, sin);
      k_cache[li].index_copy_(1, slots, k.transpose(0, 1));  // [nkv, cap, hd] ← [nkv, b, hd]
      v_cache[li].index_copy_(1, slots, v.transpose(0, 1));
      auto kw = k_cache[li].narrow(1, 0, W);                   // [nkv, W, hd]
      auto vw = v_cache[li].narrow(1, 0, W);                   // [nkv, W, hd]
      auto qh = q.view({b, nkv, g, hd}).permute({1, 2, 0, 3}).reshape({nkv, g * b, hd});
      auto s = torch::matmul(qh, kw.transpose(1, 2)).mul_(scale);  // [nkv, g·b, W]
      s = s.view({nkv, g, b, W}) + mask;                           // [nkv, g, b, W]
      auto p = torch::softmax(s, -1, torch::kFloat32).to(dtype);
      auto o = torch::matmul(p.view({nkv, g * b, W}), vw);         // [nkv, g·b, hd]
      o = o.view({nkv, g, b, hd}).permute({2, 0, 1, 3}).reshape({b, nh * hd});  // [b, nh·hd]
      x = x + pj.o(o);
      hn = rms_norm(x, l.post_norm);
      auto gate_up = pj.gate_up(hn);                               // [b, 2·inter]
      const int64_t inter = c.intermediate_size;
      x = x + pj.down(torch::silu(gate_up.narrow(1, 0, inter)) * gate_up.narrow(1, inter, inter));
    }
    x = rms_norm(x, w.norm);                                   // [b, hidden]
    out_logits.narrow(0, 0, b).copy_(torch::linear(x, w.lm_head));  // [b, vocab]
  }

  int tree_n() const { return static_cast<int>(tree_parent.size()); }

  // Runs nodes [first, first + n) of the current tree (already in tree_parent/tree_depth)
  // and copies their rows to host_rows[row0 ..].
  void run_chunk(const std::vector<int32_t>& tokens, int first, int n, int row0) {
    assert(n >= 1 && n <= kMaxTreeBucket);
    c10::InferenceMode guard;  // the static buffers are inference tensors
    // Power-of-two buckets give CUDA graphs a few fixed shapes; on the CPU nothing is captured
    // and padding is pure cost (a 9-node tree padded to 16 took 1.7x the time of 9 rows).
    const int b = device.is_cpu() ? n : tree_bucket(n);
    const int base = len + first;  // slot of node `first`
    assert(base + b <= capacity);
    const int W = std::min(capacity, (base + b + kWindowQuantum - 1) / kWindowQuantum * kWindowQuantum);
    auto* ht = h_tokens.data_ptr<int64_t>();
    auto* hp = h_pos.data_ptr<int64_t>();
    auto* hs = h_slots.data_ptr<int64_t>();
    auto* hm = h_mask.data_ptr<float>();
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < b; ++i) {
      float* row = hm + static_cast<int64_t>(i) * capacity;
      std::fill(row, row + W, ninf);
      hs[i] = base + i;
      if (i < n) {
        const int node = first + i;
        ht[i] = tokens[i];
        hp[i] = len + tree_depth[node];
        std::fill(row, row + len, 0.0f);
        for (int a = node; a >= 0; a = tree_parent[a]) row[len + a] = 0.0f;
      } else {  // padding: token 0 at the next position, attends to itself only
        ht[i] = 0;
        hp[i] = len;
        row[base + i] = 0.0f;
      }
    }
    // Host → device inputs; on the CPU they are the same memory (a drafter step paid ~8 µs
    // of torch dispatch for these self-copies).
    auto upload = [&](torch::Tensor& to, const torch::Tensor& from) {
      if (to.data_ptr() != from.data_ptr()) to.narrow(0, 0, b).copy_(from.narrow(0, 0, b));
    };
    upload(in_tokens, h_tokens);
    upload(in_pos, h_pos);
    upload(in_slots, h_slots);
    if (in_mask.data_ptr() != h_mask.data_ptr())
      in_mask.narrow(0, 0, b).narrow(1, 0, W).copy_(h_mask.narrow(0, 0, b).narrow(1, 0, W));
    forward(b, W);
    auto rows = out_logits.narrow(0, 0, n);
    if (!rows.is_cpu()) rows = rows.to(torch::kCPU);  // the one device→host copy of a pass
    std::memcpy(host_rows.data() + static_cast<int64_t>(row0) * vocab, rows.data_ptr<float>(),
                sizeof(float) * static_cast<size_t>(n) * vocab);
  }

  RowsView extend(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents) {
    if (tokens.size() != parents.size())
      throw std::invalid_argument("tree pass: " + std::to_string(tokens.size()) + " tokens but " +
                                  std::to_string(parents.size()) + " parents");
    const int n = static_cast<int>(tokens.size());
    if (n == 0) throw std::invalid_argument("tree pass: no nodes");
    const int first = tree_n();
    if (first + n > opt.max_tree)
      throw std::invalid_argument("tree pass: " + std::to_string(first + n) +
                                  " tree nodes exceed max_tree " + std::to_string(opt.max_tree));
    for (int i = 0; i < n; ++i) {
      const int p = parents[i];
      if (p < -1 || p >= first + i)
        throw std::invalid_argument("tree pass: node " + std::to_string(first + i) + " has parent " +
                                    std::to_string(p) + " (must be −1 or an earlier node)");
      if (tokens[i] < 0 || tokens[i] >= vocab)
        throw std::invalid_argument("tree pass: token " + std::to_string(tokens[i]) +
                                    " outside the vocabulary of " + std::to_string(vocab));
      tree_parent.push_back(p);
      tree_depth.push_back(p < 0 ? 0 : tree_depth[p] + 1);
    }
    for (int done = 0; done < n; done += kMaxTreeBucket) {
      const int m = std::min(kMaxTreeBucket, n - done);
      std::vector<int32_t> chunk(tokens.begin() + done, tokens.begin() + done + m);
      run_chunk(chunk, first + done, m, done);
    }
    return RowsView{host_rows.data(), n, vocab};
  }

  void commit(const std::vector<int32_t>& path) {
    const int m = static_cast<int>(path.size());
    for (int j = 0; j < m; ++j) {
      const int v = path[j];
      if (v < 0 || v >= tree_n())
        throw std::invalid_argument("commit: node " + std::to_string(v) + " is not in the tree of " +
                                    std::to_string(tree_n()) + " nodes");
      if (tree_parent[v] != (j == 0 ? -1 : path[j - 1]))
        throw std::invalid_argument("commit: nodes are not a path from the context at node " +
                                    std::to_string(v));
    }
    if (len + m > opt.max_context)
      throw std::invalid_argument("commit: context of " + std::to_string(len + m) +
                                  " exceeds max_context " + std::to_string(opt.max_context));
    // Node v sits in slot len + v; v ≥ j on a path, so gather first, then scatter.
    bool identity = true;
    for (int j = 0; j < m; ++j) identity = identity && path[j] == j;
    if (!identity && m > 0 && fused_cpu) {
      // CPU float32: row copies within each head's plane, in path order. A source slot
      // len + path[j] is never a destination of an earlier j (len + j' < len + j ≤ len + path[j]).
      for (size_t li = 0; li < k_cache.size(); ++li)
        for (int j = 0; j < m; ++j)
          if (path[j] != j)
            cpu_copy_kv_slot(k_cache[li].data_ptr<float>(), v_cache[li].data_ptr<float>(),
                             w.config.num_key_value_heads, capacity, w.config.head_dim, len + path[j], len + j);
    } else if (!identity && m > 0) {
      c10::InferenceMode guard;
      std::vector<int64_t> src(m), dst(m);
      for (int j = 0; j < m; ++j) {
        src[j] = len + path[j];
        dst[j] = len + j;
      }
      auto s = torch::tensor(src, torch::kInt64).to(device);  // [m]
      auto d = torch::tensor(dst, torch::kInt64).to(device);  // [m]
      for (size_t li = 0; li < k_cache.size(); ++li) {
        k_cache[li].index_copy_(1, d, k_cache[li].index_select(1, s));
        v_cache[li].index_copy_(1, d, v_cache[li].index_select(1, s));
      }
    }
    len += m;
    tree_parent.clear();
    tree_depth.clear();
  }
};

ModelRuntime::ModelRuntime(const std::string& dir, const RuntimeOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.opt = options;
  if (options.max_context < 1) throw std::invalid_argument("runtime: max_context must be ≥ 1");
  if (options.max_tree < 1) throw std::invalid_argument("runtime: max_tree must be ≥ 1");
  if (options.cpu_helper_threads < 0) throw std::invalid_argument("runtime: cpu_helper_threads must be ≥ 0");
  m.device = parse_device_option(options.device);
  m.dtype = parse_dtype_option(options.dtype);
  if (m.dtype == torch::kFloat16 && m.device.is_cpu())  // libtorch has no CPU fp16 matmul
    throw std::invalid_argument("runtime dtype float16 is not supported on the CPU (float32 or bfloat16)");
  m.w = load_weights(dir, m.device, m.dtype);
  const ModelConfig& c = m.w.config;
  m.fused_cpu = options.cpu_kernels && m.device.is_cpu() && m.dtype == torch::kFloat32;
  if (m.fused_cpu) {  // the kernels read norm weights as plain arrays
    m.w.norm = m.w.norm.contiguous();
    for (LayerWeights& l : m.w.layers)
      for (torch::Tensor* t : {&l.input_norm, &l.post_norm, &l.q_norm, &l.k_norm})
        if (t->defined()) *t = t->contiguous();
  }
  if (m.device.is_cpu() && options.cpu_helper_threads > 0)
    m.workers = std::make_unique<CpuWorkers>(options.cpu_helper_threads);
  for (LayerWeights& l : m.w.layers) {
    const bool packed = m.fused_cpu;
    m.proj.push_back({Projection({l.wq, l.wk, l.wv}, {l.bq, l.bk, l.bv}, packed), Projection({l.wo}, {l.bo}, packed),
                      Projection({l.gate, l.up}, {torch::Tensor(), torch::Tensor()}, packed),
                      Projection({l.down}, {torch::Tensor()}, packed)});
    // The projections hold their own (fused or packed) copies: drop the loaded ones.
    l.wq = l.wk = l.wv = l.wo = l.bq = l.bk = l.bv = l.bo = l.gate = l.up = l.down = torch::Tensor();
  }
  if (m.fused_cpu) {
    m.lm_head_cpu = Projection({m.w.lm_head}, {torch::Tensor()}, /*packed=*/true);
    m.w.embed = m.w.embed.contiguous();
    const int64_t rows = kMaxTreeBucket, hd = c.head_dim;
    m.cpu.x.resize(rows * c.hidden_size);
    m.cpu.hn.resize(rows * c.hidden_size);
    m.cpu.proj_out.resize(rows * c.hidden_size);
    m.cpu.qkv.resize(rows * (c.num_attention_heads + 2 * c.num_key_value_heads) * hd);
    m.cpu.attn.resize(rows * c.num_attention_heads * hd);
    m.cpu.gate_up.resize(rows * 2 * c.intermediate_size);
    m.cpu.act.resize(rows * c.intermediate_size);
  }
  m.vocab = c.vocab_size;
  m.capacity = options.max_context + options.max_tree + kMaxTreeBucket;

  c10::InferenceMode guard;
  auto dev_opts = torch::TensorOptions().device(m.device);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    if (m.fused_cpu) {  // cpu_attention.h's panel layouts
      m.k_cache.push_back(torch::zeros({cpu_key_cache_floats(c.num_key_value_heads, m.capacity, c.head_dim)}));
      m.v_cache.push_back(torch::zeros({cpu_value_cache_floats(c.num_key_value_heads, m.capacity, c.head_dim)}));
      continue;
    }
    m.k_cache.push_back(torch::zeros({c.num_key_value_heads, m.capacity, c.head_dim}, dev_opts.dtype(m.dtype)));
    m.v_cache.push_back(torch::zeros({c.num_key_value_heads, m.capacity, c.head_dim}, dev_opts.dtype(m.dtype)));
  }
  // RoPE tables in double, stored at the runtime dtype: [capacity, head_dim].
  const auto inv = rope_inv_freq(c);
  const int half = c.head_dim / 2;
  auto cos = torch::empty({m.capacity, c.head_dim}, torch::kFloat64);
  auto sin = torch::empty({m.capacity, c.head_dim}, torch::kFloat64);
  auto* pc = cos.data_ptr<double>();
  auto* ps = sin.data_ptr<double>();
  for (int p = 0; p < m.capacity; ++p) {
    for (int i = 0; i < half; ++i) {
      const double a = p * inv[i];
      pc[p * c.head_dim + i] = pc[p * c.head_dim + i + half] = std::cos(a);
      ps[p * c.head_dim + i] = ps[p * c.head_dim + i + half] = std::sin(a);
    }
  }
  m.rope_cos = cos.to(m.device, m.dtype);
  m.rope_sin = sin.to(m.device, m.dtype);

  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  m.h_tokens = torch::zeros({kMaxTreeBucket}, i64);
  m.h_pos = torch::zeros({kMaxTreeBucket}, i64);
  m.h_slots = torch::zeros({kMaxTreeBucket}, i64);
  m.h_mask = torch::zeros({kMaxTreeBucket, m.capacity}, torch::kFloat32);
  if (m.device.is_cpu()) {  // same memory on the CPU
    m.in_tokens = m.h_tokens;
    m.in_pos = m.h_pos;
    m.in_slots = m.h_slots;
  } else {
    m.in_tokens = torch::zeros({kMaxTreeBucket}, i64.device(m.device));
    m.in_pos = torch::zeros({kMaxTreeBucket}, i64.device(m.device));
    m.in_slots = torch::zeros({kMaxTreeBucket}, i64.device(m.device));
  }
  m.in_mask = (m.device.is_cpu() && m.dtype == torch::kFloat32)
                  ? m.h_mask
                  : torch::zeros({kMaxTreeBucket, m.capacity}, dev_opts.dtype(m.dtype));
  m.out_logits = torch::zeros({kMaxTreeBucket, m.vocab}, dev_opts.dtype(torch::kFloat32));
  m.host_rows.assign(static_cast<size_t>(std::max(options.max_tree, kMaxTreeBucket)) * m.vocab, 0.0f);
}

ModelRuntime::~ModelRuntime() = default;

const ModelConfig& ModelRuntime::config() const { return impl_->w.config; }
const RuntimeOptions& ModelRuntime::options() const { return impl_->opt; }
int ModelRuntime::vocab_size() const { return impl_->vocab; }
int ModelRuntime::length() const { return impl_->len; }
int ModelRuntime::tree_size() const { return impl_->tree_n(); }
int64_t ModelRuntime::weight_bytes() const { return impl_->w.bytes; }
int64_t ModelRuntime::kv_cache_bytes() const {
  int64_t n = 0;
  for (const auto& t : impl_->k_cache) n += t.numel() * t.element_size();
  for (const auto& t : impl_->v_cache) n += t.numel() * t.element_size();
  return n;
}

RowsView ModelRuntime::prefill(const std::vector<int32_t>& tokens) {
  Impl& m = *impl_;
  if (tokens.empty()) throw std::invalid_argument("prefill: no tokens");
  if (m.len + static_cast<int>(tokens.size()) > m.opt.max_context)
    throw std::invalid_argument("prefill: context of " + std::to_string(m.len + tokens.size()) +
                                " exceeds max_context " + std::to_string(m.opt.max_context));
  m.tree_parent.clear();
  m.tree_depth.clear();
  RowsView last;
  const size_t chunk_size = static_cast<size_t>(std::min(kMaxTreeBucket, m.opt.max_tree));
  for (size_t done = 0; done < tokens.size(); done += chunk_size) {
    const int n = static_cast<int>(std::min(chunk_size, tokens.size() - done));
    std::vector<int32_t> chunk(tokens.begin() + done, tokens.begin() + done + n);
    std::vector<int32_t> parents(n), path(n);
    for (int i = 0; i < n; ++i) {
      parents[i] = i - 1;
      path[i] = i;
    }
    RowsView rows = m.extend(chunk, parents);
    m.commit(path);
    last = RowsView{rows.row(n - 1), 1, m.vocab};
  }
  return last;
}

RowsView ModelRuntime::root_pass(int32_t token) {
  Impl& m = *impl_;
  if (m.len + 1 > m.opt.max_context)
    throw std::invalid_argument("root pass: context exceeds max_context " + std::to_string(m.opt.max_context));
  m.tree_parent.clear();
  m.tree_depth.clear();
  RowsView rows = m.extend({token}, {-1});
  m.commit({0});
  return rows;
}

RowsView ModelRuntime::tree_pass(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents) {
  impl_->tree_parent.clear();
  impl_->tree_depth.clear();
  return impl_->extend(tokens, parents);
}

RowsView ModelRuntime::extend_tree(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents) {
  return impl_->extend(tokens, parents);
}

void ModelRuntime::commit(const std::vector<int32_t>& path) { impl_->commit(path); }

void ModelRuntime::share_passes(bool on) {
  Impl& m = *impl_;
  if (!m.workers || m.sharing == on) return;  // `ar` asks every token: wake once
  m.sharing = on;
  if (on) m.workers->wake();
  else m.workers->park();
}

void ModelRuntime::truncate(int n) {
  Impl& m = *impl_;
  if (n < 0 || n > m.len)
    throw std::invalid_argument("truncate: " + std::to_string(n) + " outside [0, " + std::to_string(m.len) + "]");
  m.len = n;
  m.tree_parent.clear();
  m.tree_depth.clear();
}

}  // namespace rootspec
