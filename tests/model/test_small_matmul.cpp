// small_matmul: column blocks under OpenBLAS's small-kernel limit, alone or shared with
// CpuWorkers' helper threads, give the plain product; CpuWorkers runs every part once.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <random>
#include <vector>

#include "small_matmul.h"

namespace rootspec {
namespace {

TEST(SmallMatmul, BlockColumnsStayUnderTheLimit) {
  EXPECT_EQ(small_matmul_block_columns(1, 256, 704), 704);       // 180k: one block
  EXPECT_EQ(small_matmul_block_columns(9, 256, 256), 256);       // 590k: one block
  EXPECT_EQ(small_matmul_block_columns(9, 256, 704), 432);       // 10⁶ / 2304 = 434 → 432
  EXPECT_EQ(small_matmul_block_columns(9, 704, 256), 144);       // 10⁶ / 6336 = 157 → 144
  EXPECT_EQ(small_matmul_block_columns(64, 4096, 4096), 16);     // never below 16 columns
  EXPECT_EQ(small_matmul_block_columns(64, 4096, 8), 8);         // nor above `out`
  for (int64_t rows : {1, 2, 5, 9, 17, 33, 64})
    for (int64_t in : {128, 256, 704})
      for (int64_t out : {128, 258, 704, 1408}) {
        const int64_t block = small_matmul_block_columns(rows, in, out);
        ASSERT_GE(block, 1);
        ASSERT_LE(block, out);
        if (block > 16) {
          EXPECT_LE(rows * in * block, kSmallGemmLimit) << rows << " " << in << " " << out;
        }
        if (block < out) {
          EXPECT_EQ(block % 16, 0);
        }
      }
}

// y = x · wt against a double-precision loop, on shapes with one block, several blocks and a
// ragged last block.
void expect_plain_product(CpuWorkers* workers) {
  struct Shape { int64_t rows, in, out; };
  std::mt19937 gen(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (const Shape s : {Shape{1, 256, 704}, Shape{3, 5, 7}, Shape{9, 256, 704}, Shape{9, 704, 256},
                        Shape{17, 256, 258}, Shape{33, 128, 1408}}) {
    std::vector<float> x(s.rows * s.in), wt(s.in * s.out), y(s.rows * s.out, NAN);
    for (float& v : x) v = d(gen);
    for (float& v : wt) v = d(gen);
    small_matmul(x.data(), wt.data(), y.data(), s.rows, s.in, s.out, workers);
    double worst = 0.0;
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t c = 0; c < s.out; ++c) {
        double want = 0.0, scale = 0.0;
        for (int64_t k = 0; k < s.in; ++k) {
          want += double(x[r * s.in + k]) * wt[k * s.out + c];
          scale += std::fabs(double(x[r * s.in + k]) * wt[k * s.out + c]);
        }
        ASSERT_TRUE(std::isfinite(y[r * s.out + c])) << r << "," << c;
        worst = std::max(worst, std::fabs(y[r * s.out + c] - want) / scale);
      }
    EXPECT_LE(worst, 1e-6) << s.rows << "x" << s.in << "x" << s.out << " threads "
                           << (workers ? workers->threads() : 1);
  }
}

TEST(SmallMatmul, EqualsThePlainProduct) { expect_plain_product(nullptr); }

TEST(SmallMatmul, SharedWithHelpersEqualsThePlainProduct) {
  for (int helpers : {1, 2}) {
    CpuWorkers workers(helpers);
    workers.wake();
    expect_plain_product(&workers);
    workers.park();
    expect_plain_product(&workers);  // parked helpers are woken by the work itself
  }
}

TEST(CpuWorkers, RunsEveryPartOnceAndRethrows) {
  CpuWorkers none(0);
  EXPECT_EQ(none.threads(), 1);
  int calls = 0;
  none.run([&](int part) { calls += part == 0; });
  EXPECT_EQ(calls, 1);

  CpuWorkers workers(3);
  ASSERT_EQ(workers.threads(), 4);
  workers.wake();
  for (int round = 0; round < 200; ++round) {  // back-to-back tasks, as a pass issues them
    std::vector<std::atomic<int>> seen(4);
    workers.run([&](int part) { seen[part].fetch_add(1); });
    for (int p = 0; p < 4; ++p) ASSERT_EQ(seen[p].load(), 1) << "round " << round << " part " << p;
  }
  workers.park();
  EXPECT_THROW(workers.run([](int part) {
    if (part == 2) throw std::runtime_error("part 2 failed");
  }),
               std::runtime_error);
  int after = 0;  // a failure leaves the workers usable
  std::atomic<int> parts{0};
  workers.run([&](int part) {
    parts.fetch_add(1);
    if (part == 0) after = 1;
  });
  EXPECT_EQ(parts.load(), 4);
  EXPECT_EQ(after, 1);
}

}  // namespace
}  // namespace rootspec
