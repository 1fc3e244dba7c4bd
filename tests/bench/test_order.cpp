// The rotated run order of [TPR] App. D.14: warm-up first, then every combination exactly
// once per prompt, rotated by the prompt's position in a seeded order.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "bench_order.h"

namespace rootspec {
namespace {

TEST(BenchOrder, DefaultGridHasArOncePerTemperature) {
  const auto g = default_grid();
  ASSERT_EQ(g.size(), 18u);  // 2 T × (ar + 2 B × 4 tree decoders)
  EXPECT_EQ(g[0], (GridPoint{"ar", 0.0, 0}));
  EXPECT_EQ(g[1], (GridPoint{"draft", 0.0, 8}));
  EXPECT_EQ(g[4], (GridPoint{"root", 0.0, 8}));
  EXPECT_EQ(g[5], (GridPoint{"draft", 0.0, 59}));
  EXPECT_EQ(g[9], (GridPoint{"ar", 1.0, 0}));
  int ar = 0;
  for (const auto& p : g) ar += p.decoder == "ar";
  EXPECT_EQ(ar, 2);
  for (size_t i = 0; i < g.size(); ++i)
    for (size_t j = 0; j < i; ++j) EXPECT_FALSE(g[i] == g[j]);
  // Without ar: [TPR]'s sixteen.
  EXPECT_EQ(expand_grid({"draft", "pearl", "root-draw", "root"}, {0, 1}, {8, 59}).size(), 16u);
  EXPECT_EQ(expand_grid({"ar"}, {0, 1}, {}).size(), 2u);
  EXPECT_THROW(expand_grid({"root", "root"}, {0}, {8}), std::invalid_argument);
  EXPECT_THROW(expand_grid({"root"}, {0}, {0}), std::invalid_argument);
  EXPECT_THROW(expand_grid({"root"}, {0}, {}), std::invalid_argument);
  EXPECT_THROW(expand_grid({"root"}, {0, 0}, {8}), std::invalid_argument);
}

TEST(BenchOrder, SeededPromptOrderIsAPermutation) {
  const auto a = seeded_prompt_order(77, 1), b = seeded_prompt_order(77, 1), c = seeded_prompt_order(77, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::set<int>(a.begin(), a.end()).size(), 77u);
  EXPECT_EQ(*std::min_element(a.begin(), a.end()), 0);
  EXPECT_EQ(*std::max_element(a.begin(), a.end()), 76);
  int fixed = 0;
  for (int i = 0; i < 77; ++i) fixed += a[i] == i;
  EXPECT_LT(fixed, 10);  // shuffled (expected 1 fixed point)
}

TEST(BenchOrder, EveryCombinationOncePerPromptRotated) {
  constexpr int kPrompts = 41, kComb = 18;
  const RunOrderOptions opt{123, 2};
  const auto items = rotated_run_order(kPrompts, kComb, opt);
  const auto order = seeded_prompt_order(kPrompts, opt.seed);
  ASSERT_EQ(items.size(), size_t(kComb) * (kPrompts + 2));
  // Warm-up: the first two prompts of the seeded order, each combination once, unrotated.
  for (int w = 0; w < 2; ++w)
    for (int k = 0; k < kComb; ++k) {
      const auto& it = items[w * kComb + k];
      EXPECT_TRUE(it.warmup);
      EXPECT_EQ(it.prompt, order[w]);
      EXPECT_EQ(it.combination, k);
    }
  // Main pass: position p holds prompt order[p], in one contiguous block of kComb items.
  std::vector<std::vector<int>> slot_count(kComb, std::vector<int>(kComb, 0));
  for (int p = 0; p < kPrompts; ++p) {
    std::set<int> seen;
    for (int k = 0; k < kComb; ++k) {
      const auto& it = items[(2 + p) * kComb + k];
      EXPECT_FALSE(it.warmup);
      EXPECT_EQ(it.position, p);
      EXPECT_EQ(it.prompt, order[p]);
      seen.insert(it.combination);
      if (p < kComb) slot_count[it.combination][k] += 1;
    }
    EXPECT_EQ(seen.size(), size_t(kComb)) << "position " << p;  // each exactly once
    // Rotated by the position: combination p mod G runs first, then cyclically onwards.
    EXPECT_EQ(items[(2 + p) * kComb].combination, p % kComb);
    EXPECT_EQ(items[(2 + p) * kComb + 1].combination, (p + 1) % kComb);
  }
  // Over G consecutive prompts every combination sits in every slot exactly once.
  for (int c = 0; c < kComb; ++c)
    for (int k = 0; k < kComb; ++k) EXPECT_EQ(slot_count[c][k], 1) << c << " " << k;
  // Every prompt is timed once per combination, warm-up prompts included.
  std::vector<int> per_prompt(kPrompts, 0);
  for (const auto& it : items)
    if (!it.warmup) per_prompt[it.prompt] += 1;
  for (int n : per_prompt) EXPECT_EQ(n, kComb);
}

TEST(BenchOrder, EachPassRunsEveryPromptAndCombinationOnceInItsOwnOrder) {
  constexpr int kPrompts = 24, kComb = 7, kPasses = 3;
  const RunOrderOptions one{99, 2};
  RunOrderOptions three = one;
  three.passes = kPasses;
  const auto single = rotated_run_order(kPrompts, kComb, one);
  const auto items = rotated_run_order(kPrompts, kComb, three);
  ASSERT_EQ(items.size(), size_t(kComb) * (2 + kPasses * kPrompts));
  // Warm-up once, then pass 0 exactly as a one-pass run.
  for (size_t i = 0; i < single.size(); ++i) {
    EXPECT_EQ(items[i].prompt, single[i].prompt) << i;
    EXPECT_EQ(items[i].combination, single[i].combination) << i;
    EXPECT_EQ(items[i].warmup, single[i].warmup) << i;
    EXPECT_EQ(items[i].pass, 0) << i;
  }
  std::vector<std::vector<int>> prompt_order(kPasses);
  std::map<std::tuple<int, int, int>, int> runs;  // (pass, prompt, combination) → count
  for (size_t i = 2 * kComb; i < items.size(); ++i) {
    const RunItem& it = items[i];
    EXPECT_FALSE(it.warmup);
    const int q = static_cast<int>((i - 2 * kComb) / (kComb * kPrompts));
    EXPECT_EQ(it.pass, q) << i;  // passes run one after another
    runs[{it.pass, it.prompt, it.combination}] += 1;
    if ((i - 2 * kComb) % kComb == 0) {
      prompt_order[q].push_back(it.prompt);
      EXPECT_EQ(it.combination, it.position % kComb);  // rotated within the pass
    }
  }
  EXPECT_EQ(runs.size(), size_t(kPasses) * kPrompts * kComb);
  for (const auto& [key, n] : runs) EXPECT_EQ(n, 1);
  for (int q = 0; q < kPasses; ++q)
    EXPECT_EQ(prompt_order[q], seeded_prompt_order(kPrompts, pass_seed(99, q)));
  EXPECT_NE(prompt_order[1], prompt_order[0]);
  EXPECT_NE(prompt_order[2], prompt_order[1]);
}

TEST(BenchOrder, Validation) {
  EXPECT_THROW(rotated_run_order(0, 18, {}), std::invalid_argument);
  EXPECT_THROW(rotated_run_order(3, 0, {}), std::invalid_argument);
  EXPECT_THROW(rotated_run_order(1, 18, {0, 2}), std::invalid_argument);
  EXPECT_EQ(rotated_run_order(1, 3, {0, 0}).size(), 3u);
  EXPECT_THROW(rotated_run_order(3, 2, {0, 0, 0}), std::invalid_argument);
}

TEST(BenchOrder, ProgressLine) {
  EXPECT_EQ(progress_line(0, 1296, 0.0), "[   0/1296]   0.0%  elapsed 0s");
  EXPECT_EQ(progress_line(37, 1296, 62.0), "[  37/1296]   2.9%  elapsed 1m02s  eta 35m10s");
  EXPECT_EQ(progress_line(10, 10, 4000.0), "[10/10] 100.0%  elapsed 1h06m40s  eta 0s");
}

}  // namespace
}  // namespace rootspec
