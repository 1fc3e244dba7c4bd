#include "verifier.h"

#include <algorithm>
#include <cassert>

namespace rootspec {

namespace {
struct VerifierInfo {
  Verifier v;
  const char* name;
};
constexpr VerifierInfo kVerifiers[] = {{Verifier::Greedy, "greedy"},
                                       {Verifier::Residual, "residual"},
                                       {Verifier::Predraw, "predraw"},
                                       {Verifier::Tev, "tev"},
                                       {Verifier::Rheo, "rheo"}};

// Child of `v` (kRoot or a tree index) labelled `token`, or −1.
int child_with_token(const DraftTree& tree, const std::vector<std::vector<int>>& children, int v,
                     int32_t token) {
  for (int c : children[v + 1])
    if (tree.token[c] == token) return c;
  return -1;
}

// Accepted path from the anchor to `exit` (excluded anchor), root to leaf.
void fill_path(const DraftTree& tree, int exit, VerifyResult& out) {
  for (int v = exit; v != kRoot; v = tree.parent[v]) out.accepted_nodes.push_back(v);
  std::reverse(out.accepted_nodes.begin(), out.accepted_nodes.end());
  for (int v : out.accepted_nodes) out.accepted_tokens.push_back(tree.token[v]);
  out.exit_node = exit;
}

// Draws from `row` with the tokens of v's children removed, renormalised (the residual row
// p_v^res of [Exit] Lemma 1).
int32_t sample_residual(const DraftTree& tree, const std::vector<int>& kids, const float* row, int vocab,
                        Rng& rng) {
  thread_local std::vector<float> scratch;  // [vocab]
  scratch.assign(row, row + vocab);
  for (int c : kids) scratch[tree.token[c]] = 0.0f;
  return sample_index(scratch.data(), vocab, rng);
}
}  // namespace

const char* verifier_name(Verifier v) {
  for (const auto& i : kVerifiers)
    if (i.v == v) return i.name;
  return "?";
}

bool parse_verifier(const std::string& name, Verifier* v) {
  for (const auto& i : kVerifiers)
    if (name == i.name) {
      *v = i.v;
      return true;
    }
  return false;
}

const std::vector<Verifier>& all_verifiers() {
  static const std::vector<Verifier> all = {Verifier::Greedy, Verifier::Residual, Verifier::Predraw,
                                            Verifier::Tev, Verifier::Rheo};
  return all;
}

VerifyResult verify_greedy(const DraftTree& tree, const RowsView& rows) {
  assert(rows.n_rows == tree.size() + 1);
  const auto children = tree.children();
  int v = kRoot;
  for (;;) {
    const int32_t best = argmax(rows.row(v + 1), rows.vocab);
    const int c = child_with_token(tree, children, v, best);
    if (c < 0) {
      VerifyResult out;
      fill_path(tree, v, out);
      out.continuation = best;
      return out;
    }
    v = c;
  }
}

namespace {
// Sequential residual over `kids` in order under the residual row r ([vocab], unnormalised;
// [TPR] App. C): accept child x with r(x)/Σr, else zero r(x) and go on. Returns the
// accepted child, or −1 with r left as the final residual (every child zeroed).
int try_children(const DraftTree& tree, const std::vector<int>& kids, std::vector<float>& r, Rng& rng) {
  double total = 0.0, kids_mass = 0.0;
  for (float x : r) total += x;
  for (int c : kids) kids_mass += r[tree.token[c]];
  // Σr = r(x) + untried children + outside: the last child is certain when nothing lies
  // outside, whatever the float rounding.
  const double outside = std::max(0.0, total - kids_mass);
  double untried = kids_mass;
  for (int c : kids) {
    const double mass = r[tree.token[c]];
    untried -= mass;
    if (mass > 0 && rng.uniform() * (mass + std::max(0.0, untried) + outside) < mass) return c;
    r[tree.token[c]] = 0.0f;
  }
  return -1;
}

// Shared walk of residual and rheo: `first_test` may settle the sampled child before the
// sequential residual runs (rheo); it returns the accepted child, or −1 after it has turned
// r into the residual to continue with.
template <typename FirstTest>
VerifyResult residual_walk(const DraftTree& tree, const RowsView& rows, Rng& rng, FirstTest first_test) {
  assert(rows.n_rows == tree.size() + 1);
  const auto children = tree.children();
  std::vector<float> r;  // [vocab] current residual row
  int v = kRoot;
  for (;;) {
    const float* p = rows.row(v + 1);
    r.assign(p, p + rows.vocab);
    std::vector<int> kids = children[v + 1];
    int next = first_test(v, kids, r);
    if (next < 0) next = try_children(tree, kids, r, rng);
    if (next < 0) {
      VerifyResult out;
      fill_path(tree, v, out);
      out.continuation = sample_index(r.data(), rows.vocab, rng);
      return out;
    }
    v = next;
  }
}
}  // namespace

VerifyResult verify_residual(const DraftTree& tree, const RowsView& rows, Rng& rng) {
  return residual_walk(tree, rows, rng, [](int, std::vector<int>&, std::vector<float>&) { return -1; });
}

VerifyResult verify_rheo(const DraftTree& tree, const RowsView& rows, const Pool* pool, Rng& rng) {
  std::vector<float> q_tilde;  // [vocab] true sampling law of the sampled child
  auto first_test = [&](int v, std::vector<int>& kids, std::vector<float>& r) {
    if (!pool || !pool->is_rheo()) return -1;
    auto sampled = std::find_if(kids.begin(), kids.end(), [&](int c) {
      return tree.pool_index[c] >= 0 && pool->sampled[tree.pool_index[c]];
    });
    if (sampled == kids.end()) return -1;
    const int s = *sampled;
    kids.erase(sampled);
    const int source = v == kRoot ? tree.anchor_pool_index : tree.pool_index[v];
    const bool have_row = rheo_tail_row(*pool, source, rows.vocab, q_tilde);
    assert(have_row && "a sampled node's parent keeps its draft row");
    (void)have_row;
    // Accept u_s with min(1, p(u_s)/q̃(u_s)) ([Rheo] Algorithm 1).
    const int32_t y = tree.token[s];
    if (rng.uniform() * q_tilde[y] < r[y]) return s;
    // Rejected: r = max(0, p − q̃), left unnormalised (try_children and sampling renormalise).
    for (int t = 0; t < rows.vocab; ++t) r[t] = std::max(0.0f, r[t] - q_tilde[t]);
    return -1;
  };
  return residual_walk(tree, rows, rng, first_test);
}

VerifyResult verify_predraw(const DraftTree& tree, const RowsView& rows, Rng& rng) {
  assert(rows.n_rows == tree.size() + 1);
  const auto children = tree.children();
  std::vector<int32_t> draw(tree.size() + 1);  // [1 + n] R_v, anchor first
  for (int r = 0; r < rows.n_rows; ++r) draw[r] = sample_index(rows.row(r), rows.vocab, rng);
  int v = kRoot;
  for (;;) {
    const int c = child_with_token(tree, children, v, draw[v + 1]);
    if (c < 0) {
      VerifyResult out;
      fill_path(tree, v, out);
      out.continuation = draw[v + 1];
      return out;
    }
    v = c;
  }
}

VerifyResult verify_tev(const DraftTree& tree, const RowsView& rows, Rng& rng) {
  assert(rows.n_rows == tree.size() + 1);
  const int n = tree.size();
  // P(v): path probability, level by level (parents precede children). [1 + n]
  std::vector<double> P(n + 1);
  // ρ(v) = 1 − Σ_children p_v(x_u): mass leaving the tree at v. [1 + n]
  std::vector<double> rho(n + 1, 1.0);
  P[0] = 1.0;
  for (int i = 0; i < n; ++i) {
    const int pr = tree.parent[i] + 1;
    const double q = rows.row(pr)[tree.token[i]];
    P[i + 1] = P[pr] * q;
    rho[pr] -= q;
  }
  std::vector<double> w(n + 1);  // [1 + n] exit law w(v) = P(v)ρ(v)
  for (int r = 0; r <= n; ++r) w[r] = P[r] * std::max(0.0, rho[r]);
  const int exit = sample_index(w.data(), n + 1, rng) - 1;
  const auto children = tree.children();
  VerifyResult out;
  fill_path(tree, exit, out);
  out.continuation = sample_residual(tree, children[exit + 1], rows.row(exit + 1), rows.vocab, rng);
  return out;
}

VerifyResult verify(Verifier v, const DraftTree& tree, const RowsView& rows, Rng& rng, const Pool* pool) {
  switch (v) {
    case Verifier::Greedy:
      return verify_greedy(tree, rows);
    case Verifier::Residual:
      return verify_residual(tree, rows, rng);
    case Verifier::Predraw:
      return verify_predraw(tree, rows, rng);
    case Verifier::Tev:
      return verify_tev(tree, rows, rng);
    case Verifier::Rheo:
      return verify_rheo(tree, rows, pool, rng);
  }
  return {};
}

}  // namespace rootspec
