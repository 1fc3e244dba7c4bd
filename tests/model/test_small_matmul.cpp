// small_matmul: packed column panels, with either kernel, alone or shared with CpuWorkers'
// helper threads, give the plain product; CpuWorkers runs every part once.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <random>
#include <vector>

#include "small_matmul.h"

namespace rootspec {
namespace {

TEST(SmallMatmul, PacksColumnPanelsWithZeroPadding) {
  // w [out = 35, in = 3]: w[c][i] = 100·c + i; two panels, the second holding columns 32–34.
  const int64_t out = 35, in = 3;
  std::vector<float> w(out * in);
  for (int64_t c = 0; c < out; ++c)
    for (int64_t i = 0; i < in; ++i) w[c * in + i] = float(100 * c + i);
  ASSERT_EQ(panel_count(out), 2);
  ASSERT_EQ(panel_count(32), 1);
  std::vector<float> panels(panel_count(out) * in * kPanelColumns, NAN);  // [2, 3, 32]
  pack_panels(w.data(), out, in, panels.data());
  EXPECT_EQ(panels[0 * kPanelColumns + 0], 0.0f);      // panel 0, i 0, column 0
  EXPECT_EQ(panels[2 * kPanelColumns + 5], 502.0f);    // panel 0, i 2, column 5
  EXPECT_EQ(panels[(3 + 1) * kPanelColumns + 2], 3401.0f);  // panel 1, i 1, column 34
  EXPECT_EQ(panels[(3 + 1) * kPanelColumns + 3], 0.0f);     // column 35 does not exist: zero
  EXPECT_EQ(panels[(3 + 2) * kPanelColumns + 31], 0.0f);
}

// y = x · wᵀ against a double-precision loop, on shapes with one panel, several, a ragged last
// panel, and row counts below, at and above a kernel's 12-row block.
enum class Kernel { chosen, portable };
void expect_plain_product(CpuWorkers* workers, Kernel kernel = Kernel::chosen) {
  struct Shape { int64_t rows, in, out; };
  std::mt19937 gen(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (const Shape s : {Shape{1, 256, 704}, Shape{3, 5, 7}, Shape{9, 256, 768}, Shape{9, 704, 256},
                        Shape{12, 64, 40}, Shape{13, 128, 258}, Shape{17, 256, 258}, Shape{33, 128, 1408}}) {
    std::vector<float> x(s.rows * s.in), w(s.out * s.in), y(s.rows * s.out, NAN);
    for (float& v : x) v = d(gen);
    for (float& v : w) v = d(gen);
    std::vector<float> panels(panel_count(s.out) * s.in * kPanelColumns);
    pack_panels(w.data(), s.out, s.in, panels.data());
    if (kernel == Kernel::portable)
      small_matmul_portable(x.data(), panels.data(), y.data(), s.rows, s.in, s.out);
    else
      small_matmul(x.data(), panels.data(), y.data(), s.rows, s.in, s.out, workers);
    double worst = 0.0;
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t c = 0; c < s.out; ++c) {
        double want = 0.0, scale = 0.0;
        for (int64_t k = 0; k < s.in; ++k) {
          want += double(x[r * s.in + k]) * w[c * s.in + k];
          scale += std::fabs(double(x[r * s.in + k]) * w[c * s.in + k]);
        }
        ASSERT_TRUE(std::isfinite(y[r * s.out + c])) << r << "," << c;
        worst = std::max(worst, std::fabs(y[r * s.out + c] - want) / scale);
      }
    EXPECT_LE(worst, 1e-6) << s.rows << "x" << s.in << "x" << s.out << " threads "
                           << (workers ? workers->threads() : 1) << " kernel "
                           << (kernel == Kernel::portable ? "portable" : small_matmul_kernel());
  }
}

TEST(SmallMatmul, EqualsThePlainProduct) { expect_plain_product(nullptr); }

// On an AVX-512 machine the test above ran the intrinsics kernel; this one runs the loops that
// other CPUs get, so both are checked wherever the suite runs.
TEST(SmallMatmul, PortableKernelEqualsThePlainProduct) { expect_plain_product(nullptr, Kernel::portable); }

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
