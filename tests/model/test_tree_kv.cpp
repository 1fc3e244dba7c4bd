// TreeKv (tree_kv.h), the runtime's backend-free bookkeeping: slots, positions and ancestor bits
// of a pass, padding rows, the float mask the CPU backends add, the moves of a commit, and the
// errors that name the problem. Hand-checked on a small tree; no model.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "tree_kv.h"

namespace rootspec {
namespace {

// A tree below a context of 5: node 0 (child of the context), 1 (child of 0), 2 (child of the
// context), 3 (child of 1).
TreeKv five_and_a_tree() {
  TreeKv kv(/*max_context=*/32, /*max_tree=*/70, /*vocab=*/10);
  kv.add_nodes({1, 2, 3, 4, 5}, {-1, 0, 1, 2, 3});
  kv.commit({0, 1, 2, 3, 4});
  EXPECT_EQ(kv.length(), 5);
  EXPECT_EQ(kv.add_nodes({6, 7, 8, 9}, {-1, 0, -1, 1}), 0);
  return kv;
}

TEST(TreeKv, BatchHasSlotsPositionsAndAncestorBits) {
  TreeKv kv = five_and_a_tree();
  const int32_t tokens[] = {6, 7, 8, 9};
  const PassBatch& b = kv.batch(tokens, 0, 4, /*bucket=*/4);
  EXPECT_EQ(b.rows, 4);
  EXPECT_EQ(b.context, 5);
  EXPECT_EQ(b.window, 64);     // slots 5..8 rounded up to the quantum
  EXPECT_EQ(b.mask_words, 2);  // 70 tree nodes need two 64-bit words
  const int slots[] = {5, 6, 7, 8}, positions[] = {5, 6, 5, 7};
  const uint64_t bits[] = {0b0001, 0b0011, 0b0100, 0b1011};  // itself and its ancestors
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(b.tokens[r], tokens[r]);
    EXPECT_EQ(b.slots[r], slots[r]) << r;
    EXPECT_EQ(b.positions[r], positions[r]) << r;
    EXPECT_EQ(b.tree_mask[r * b.mask_words], bits[r]) << r;
    EXPECT_EQ(b.tree_mask[r * b.mask_words + 1], 0u) << r;
    for (int s = 0; s < 5; ++s) EXPECT_TRUE(b.sees(r, s));  // the whole context
  }
  EXPECT_TRUE(b.sees(3, 6));   // node 3 sees node 1 …
  EXPECT_FALSE(b.sees(3, 7));  // … but not its uncle, node 2
  EXPECT_FALSE(b.sees(0, 9));  // nor a slot past the tree
}

TEST(TreeKv, PaddedRowsSeeOnlyTheirOwnSlotAndTheFloatMaskAgrees) {
  TreeKv kv = five_and_a_tree();
  const int32_t tokens[] = {6, 7, 8};
  const PassBatch& b = kv.batch(tokens, 0, 3, /*bucket=*/4);  // one padded row
  EXPECT_EQ(b.tokens[3], 0);
  EXPECT_EQ(b.positions[3], 5);
  EXPECT_EQ(b.slots[3], 8);
  std::vector<float> mask(4 * 100, 1.0f);  // [bucket, stride 100]
  fill_float_mask(b, mask.data(), 100);
  for (int r = 0; r < 4; ++r)
    for (int s = 0; s < b.window; ++s) {
      const float m = mask[r * 100 + s];
      EXPECT_EQ(m == 0.0f, b.sees(r, s)) << r << " " << s;
      EXPECT_TRUE(m == 0.0f || std::isinf(m)) << r << " " << s;
    }
  EXPECT_EQ(mask[3 * 100 + 8], 0.0f);
  EXPECT_TRUE(std::isinf(mask[3 * 100 + 0]));  // padding does not see the context
  EXPECT_EQ(mask[0 * 100 + b.window], 1.0f);   // past the window: untouched
}

TEST(TreeKv, ExtendingTheTreeScoresOnlyTheNewNodes) {
  TreeKv kv = five_and_a_tree();
  EXPECT_EQ(kv.add_nodes({1}, {3}), 4);  // node 4, child of node 3
  const int32_t tokens[] = {1};
  const PassBatch& b = kv.batch(tokens, 4, 1, 1);
  EXPECT_EQ(b.slots[0], 9);
  EXPECT_EQ(b.positions[0], 8);  // depth 3 below the context
  EXPECT_EQ(b.tree_mask[0], 0b11011u);
}

TEST(TreeKv, CommitMovesThePathAfterTheContext) {
  TreeKv kv = five_and_a_tree();
  const std::vector<KvMove> moves = kv.commit({0, 1, 3});  // slots 5, 6, 8 → 5, 6, 7
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].from, 8);
  EXPECT_EQ(moves[0].to, 7);
  EXPECT_EQ(kv.length(), 8);
  EXPECT_EQ(kv.tree_size(), 0);
  // A path that skips slots moves each node in order; no source was an earlier destination.
  kv.add_nodes({1, 2, 3}, {-1, -1, 1});
  const std::vector<KvMove> two = kv.commit({1, 2});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].from, 9);
  EXPECT_EQ(two[0].to, 8);
  EXPECT_EQ(two[1].from, 10);
  EXPECT_EQ(two[1].to, 9);
}

TEST(TreeKv, ErrorsNameTheProblem) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  TreeKv kv = five_and_a_tree();
  EXPECT_NE(message([&] { kv.commit({0, 2}); }).find("not a path"), std::string::npos);
  EXPECT_NE(message([&] { kv.commit({7}); }).find("not in the tree"), std::string::npos);
  EXPECT_NE(message([&] { kv.add_nodes({1}, {9}); }).find("has parent 9"), std::string::npos);
  EXPECT_NE(message([&] { kv.add_nodes({10}, {-1}); }).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(message([&] { kv.add_nodes({1, 2}, {-1}); }).find("2 tokens but 1 parents"), std::string::npos);
  EXPECT_NE(message([&] {
              kv.add_nodes(std::vector<int32_t>(67, 1), std::vector<int32_t>(67, -1));
            }).find("exceed max_tree"),
            std::string::npos);
  EXPECT_EQ(kv.tree_size(), 4);  // a refused extension adds nothing
  EXPECT_NE(message([&] { kv.check_room(28, "prefill"); }).find("prefill: context of 33"), std::string::npos);
  EXPECT_NE(message([&] { kv.truncate(6); }).find("truncate"), std::string::npos);
}

}  // namespace
}  // namespace rootspec
