// Planted bugs: each replaces one stage of the round loop with a plausible mistake and shows
// that the exactness test of test_exactness.cpp (same model, pool shape, sample size and
// threshold) rejects it. If one of these ever passes, the exactness tests have lost power.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "law_check.h"

namespace rootspec {
namespace {

constexpr int kRuns = 12000;
constexpr double kMinP = 1e-4;

const TableModel& test_model() { return testing::law_test_model(); }

testing::LawCase config_for(Rule rule, Verifier verifier, double T, int B) {
  return testing::law_test_config(rule, verifier, T, B);
}

double law_p_value(const testing::LawCase& c, const RoundHooks& hooks) {
  const double p = testing::first_tokens_law(test_model(), c, 3, kRuns, 77, &hooks).p_value;
  std::printf("  chi-square p-value: %.3g\n", p);
  return p;
}

VerifyResult exit_at(const DraftTree& tree, int v, int32_t continuation) {
  VerifyResult out;
  for (int u = v; u != kRoot; u = tree.parent[u]) out.accepted_nodes.insert(out.accepted_nodes.begin(), u);
  for (int u : out.accepted_nodes) out.accepted_tokens.push_back(tree.token[u]);
  out.exit_node = v;
  out.continuation = continuation;
  return out;
}

TEST(PlantedBug, ResidualWithoutRenormalisationIsCaught) {
  // Accepts child x with its original probability p(x) instead of r(x)/Σr after rejections.
  RoundHooks hooks;
  hooks.verify = [](Verifier, const DraftTree& tree, const RowsView& rows, Rng& rng, const Pool*) {
    const auto children = tree.children();
    int v = kRoot;
    for (;;) {
      const float* p = rows.row(v + 1);
      int next = -1;
      for (int c : children[v + 1])
        if (rng.uniform() < p[tree.token[c]]) {
          next = c;
          break;
        }
      if (next < 0) {
        std::vector<float> r(p, p + rows.vocab);
        for (int c : children[v + 1]) r[tree.token[c]] = 0;
        return exit_at(tree, v, sample_index(r.data(), rows.vocab, rng));
      }
      v = next;
    }
  };
  EXPECT_LT(law_p_value(config_for(Rule::Draft, Verifier::Residual, 1.0, 8), hooks), kMinP);
}

TEST(PlantedBug, TevContinuationKeepingChildrenIsCaught) {
  // Draws the continuation from p_v itself instead of the residual without v's children.
  RoundHooks hooks;
  hooks.verify = [](Verifier, const DraftTree& tree, const RowsView& rows, Rng& rng, const Pool*) {
    const VerifyResult right = verify_tev(tree, rows, rng);
    return exit_at(tree, right.exit_node, sample_index(rows.row(right.exit_node + 1), rows.vocab, rng));
  };
  EXPECT_LT(law_p_value(config_for(Rule::Draft, Verifier::Tev, 1.0, 8), hooks), kMinP);
}

TEST(PlantedBug, PredrawSharingOneUniformIsCaught) {
  // Uses one uniform for every node's draw: each R_v has the right marginal, the path does not.
  RoundHooks hooks;
  hooks.verify = [](Verifier, const DraftTree& tree, const RowsView& rows, Rng& rng, const Pool*) {
    const auto children = tree.children();
    const double u = rng.uniform();
    auto draw = [&](const float* p) {
      double acc = 0;
      for (int t = 0; t < rows.vocab; ++t)
        if (u < (acc += p[t])) return t;
      return rows.vocab - 1;
    };
    int v = kRoot;
    for (;;) {
      const int32_t r = draw(rows.row(v + 1));
      int next = -1;
      for (int c : children[v + 1])
        if (tree.token[c] == r) next = c;
      if (next < 0) return exit_at(tree, v, r);
      v = next;
    }
  };
  EXPECT_LT(law_p_value(config_for(Rule::Draft, Verifier::Predraw, 1.0, 8), hooks), kMinP);
}

TEST(PlantedBug, RootDrawRedrawingUntilInPoolIsCaught) {
  // Redraws y until it lands in the pool's first level: never skips the tree pass, and biases
  // the first token toward draft-favoured tokens.
  RoundHooks hooks;
  hooks.plan = [](Rule rule, const SelectionInputs& in, int32_t root_token, Rng& rng) {
    for (;;) {
      RoundPlan plan = plan_round(rule, in, root_token, rng);
      if (!plan.skip_tree_pass) return plan;
    }
  };
  EXPECT_LT(law_p_value(config_for(Rule::RootDraw, Verifier::Residual, 1.0, 3), hooks), kMinP);
}

TEST(PlantedBug, AutoChoosingItsRuleAfterTheRoundsDrawIsCaught) {
  // `auto` (decoding_policy.h) picks root-draw or draft for a round from past rounds; here it
  // looks at the round's own draw and, where y left the pool, plans the round as draft instead:
  // the first token leans toward the pool's first level.
  RoundHooks hooks;
  hooks.plan = [](Rule rule, const SelectionInputs& in, int32_t root_token, Rng& rng) {
    RoundPlan plan = plan_round(rule, in, root_token, rng);
    return rule == Rule::RootDraw && plan.skip_tree_pass ? plan_round(Rule::Draft, in, root_token, rng)
                                                         : plan;
  };
  testing::LawCase c = config_for(Rule::RootDraw, Verifier::Residual, 1.0, 3);
  c.options.auto_rule = true;
  EXPECT_LT(law_p_value(c, hooks), kMinP);
}

TEST(PlantedBug, FirstDrawIgnoringTemperatureIsCaught) {
  // Draws y from the untempered root row (T = 1) while decoding at T = 0.7.
  RoundHooks hooks;
  hooks.plan = [](Rule rule, const SelectionInputs& in, int32_t root_token, Rng& rng) {
    // The tempered row p^(1/0.7) tempered again by 1/0.7 (i.e. raised to 0.7) is the raw row.
    std::vector<float> raw(in.vocab);
    temper_probs(in.root_probs, in.vocab, 1.0 / 0.7, raw.data());
    SelectionInputs wrong = in;
    wrong.root_probs = raw.data();
    return plan_round(rule, wrong, root_token, rng);
  };
  EXPECT_LT(law_p_value(config_for(Rule::Pearl, Verifier::Tev, 0.7, 8), hooks), kMinP);
}

TEST(PlantedBug, CorrectStagesPassTheSameTest) {
  // The control: the real stages through the same hooks pass.
  RoundHooks hooks;
  hooks.plan = plan_round;
  hooks.verify = [](Verifier v, const DraftTree& t, const RowsView& r, Rng& rng, const Pool* p) {
    return verify(v, t, r, rng, p);
  };
  EXPECT_GT(law_p_value(config_for(Rule::RootDraw, Verifier::Residual, 1.0, 3), hooks), kMinP);
  EXPECT_GT(law_p_value(config_for(Rule::Draft, Verifier::Tev, 1.0, 8), hooks), kMinP);
}

// Planted bugs in the processed target law (sampling.h): each replaces the round's row
// processing with a plausible mistake; the law test of test_sampling_law.cpp rejects it.
void real_processing(const float* logits, int vocab, const RequestOptions& o, const SamplingContext& context,
                     const int32_t* path, int path_len, float* out) {
  RowScratch scratch;
  process_logits(logits, vocab, o.sampling, o.temperature, context, path, path_len, out, scratch);
}

TEST(PlantedSamplingBug, PenaltyCountsFromTheParentsPathAreCaught) {
  // A tree row's penalties count its parent's path: the node's own token is left out.
  RoundHooks hooks;
  hooks.process = [](bool root, const float* logits, int vocab, const RequestOptions& o,
                     const SamplingContext& context, const int32_t* path, int path_len, float* out) {
    real_processing(logits, vocab, o, context, path, root || path_len == 0 ? path_len : path_len - 1, out);
  };
  testing::LawCase c = config_for(Rule::Draft, Verifier::Residual, 1.0, 8);
  c.options.sampling.presence_penalty = 1.0;
  c.options.sampling.frequency_penalty = 0.7;
  EXPECT_LT(law_p_value(c, hooks), kMinP);
}

TEST(PlantedSamplingBug, TopPDroppingItsBoundaryTokenIsCaught) {
  // top_p keeps the tokens strictly below the threshold's crossing: the token that reaches
  // top_p is dropped (unless it is the first).
  RoundHooks hooks;
  hooks.process = [](bool, const float* logits, int vocab, const RequestOptions& o,
                     const SamplingContext& context, const int32_t* path, int path_len, float* out) {
    RequestOptions without = o;
    without.sampling.top_p = 1;
    real_processing(logits, vocab, without, context, path, path_len, out);
    std::vector<int32_t> order(vocab);
    for (int i = 0; i < vocab; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [out](int a, int b) { return out[a] != out[b] ? out[a] > out[b] : a < b; });
    double cumulative = 0, kept = 0;
    size_t keep = order.size();
    for (size_t j = 0; j < order.size(); ++j) {
      cumulative += out[order[j]];
      if (cumulative >= o.sampling.top_p) {
        keep = std::max<size_t>(j, 1);
        break;
      }
    }
    for (size_t j = keep; j < order.size(); ++j) out[order[j]] = 0;
    for (int i = 0; i < vocab; ++i) kept += out[i];
    for (int i = 0; i < vocab; ++i) out[i] = static_cast<float>(out[i] / kept);
  };
  testing::LawCase c = config_for(Rule::Draft, Verifier::Residual, 1.0, 8);
  c.options.sampling.top_p = 0.75;
  EXPECT_LT(law_p_value(c, hooks), kMinP);
}

TEST(PlantedSamplingBug, RootDrawsFirstDrawFromTheRawRootRowIsCaught) {
  // The root row goes to selection unprocessed (tempered only): root-draw's y ignores the
  // request's parameters; every tree row is processed.
  RoundHooks hooks;
  hooks.process = [](bool root, const float* logits, int vocab, const RequestOptions& o,
                     const SamplingContext& context, const int32_t* path, int path_len, float* out) {
    if (root)
      probs_from_logits(logits, vocab, o.temperature, out);
    else
      real_processing(logits, vocab, o, context, path, path_len, out);
  };
  testing::LawCase c = config_for(Rule::RootDraw, Verifier::Residual, 1.0, 3);
  c.options.sampling.logit_bias = {{1, 1.2f}, {3, -2.0f}};
  c.options.sampling.top_k = 3;
  EXPECT_LT(law_p_value(c, hooks), kMinP);
}

TEST(PlantedSamplingBug, CorrectProcessingPassesTheSameTest) {
  // The control: the real processing through the same hook passes each of the cases above.
  RoundHooks hooks;
  hooks.process = [](bool, const float* logits, int vocab, const RequestOptions& o,
                     const SamplingContext& context, const int32_t* path, int path_len,
                     float* out) { real_processing(logits, vocab, o, context, path, path_len, out); };
  testing::LawCase penalties = config_for(Rule::Draft, Verifier::Residual, 1.0, 8);
  penalties.options.sampling.presence_penalty = 1.0;
  penalties.options.sampling.frequency_penalty = 0.7;
  EXPECT_GT(law_p_value(penalties, hooks), kMinP);
  testing::LawCase top_p = config_for(Rule::Draft, Verifier::Residual, 1.0, 8);
  top_p.options.sampling.top_p = 0.75;
  EXPECT_GT(law_p_value(top_p, hooks), kMinP);
  testing::LawCase root = config_for(Rule::RootDraw, Verifier::Residual, 1.0, 3);
  root.options.sampling.logit_bias = {{1, 1.2f}, {3, -2.0f}};
  root.options.sampling.top_k = 3;
  EXPECT_GT(law_p_value(root, hooks), kMinP);
}

// Planted bugs in the grammar's mask (sampling.h step 0), against test_grammar_law.cpp's law.
testing::LawCase grammar_config(Rule rule, Verifier verifier, double T, int B) {
  testing::LawCase c = config_for(rule, verifier, T, B);
  c.options.sampling.grammar = testing::law_test_grammar();
  return c;
}

TEST(PlantedGrammarBug, ATreeRowMaskedWithItsParentsStateIsCaught) {
  // A tree row's mask is its parent's: the node's own token is not fed to the matcher.
  RoundHooks hooks;
  hooks.process = [](bool root, const float* logits, int vocab, const RequestOptions& o,
                     const SamplingContext& context, const int32_t* path, int path_len, float* out) {
    real_processing(logits, vocab, o, context, path, root || path_len == 0 ? path_len : path_len - 1, out);
  };
  EXPECT_LT(law_p_value(grammar_config(Rule::Draft, Verifier::Residual, 1.0, 8), hooks), kMinP);
}

TEST(PlantedGrammarBug, EosAllowedBeforeTheOutputIsCompleteIsCaught) {
  // EOS keeps its unmasked probability where the grammar refuses it (the output incomplete).
  RoundHooks hooks;
  hooks.process = [](bool, const float* logits, int vocab, const RequestOptions& o,
                     const SamplingContext& context, const int32_t* path, int path_len, float* out) {
    real_processing(logits, vocab, o, context, path, path_len, out);
    const int32_t eos = o.sampling.grammar->vocab->eos_id();
    if (out[eos] > 0) return;
    RequestOptions free_options = o;
    free_options.sampling.grammar = nullptr;
    std::vector<float> free_row(vocab);
    real_processing(logits, vocab, free_options, context, path, path_len, free_row.data());
    out[eos] = free_row[eos];
    double total = 0;
    for (int i = 0; i < vocab; ++i) total += out[i];
    for (int i = 0; i < vocab; ++i) out[i] = static_cast<float>(out[i] / total);
  };
  EXPECT_LT(law_p_value(grammar_config(Rule::RootDraw, Verifier::Residual, 1.0, 3), hooks), kMinP);
}

TEST(PlantedGrammarBug, CorrectMaskingPassesTheSameTests) {
  // The control: the real processing through the same hook passes both cases above.
  RoundHooks hooks;
  hooks.process = [](bool, const float* logits, int vocab, const RequestOptions& o,
                     const SamplingContext& context, const int32_t* path, int path_len,
                     float* out) { real_processing(logits, vocab, o, context, path, path_len, out); };
  EXPECT_GT(law_p_value(grammar_config(Rule::Draft, Verifier::Residual, 1.0, 8), hooks), kMinP);
  EXPECT_GT(law_p_value(grammar_config(Rule::RootDraw, Verifier::Residual, 1.0, 3), hooks), kMinP);
}

}  // namespace
}  // namespace rootspec
