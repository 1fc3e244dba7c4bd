// rootspec-bench --concurrency's figures from hand-made request times (bench/lib/concurrency.h).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "concurrency.h"

namespace rootspec {
namespace {

TEST(Concurrency, QuantileInterpolatesBetweenOrderStatisticsLikeNumpy) {
  EXPECT_DOUBLE_EQ(quantile({3, 1, 2, 4}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile({3, 1, 2, 4}, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile({3, 1, 2, 4}, 1.0), 4.0);
  EXPECT_NEAR(quantile({10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, 0.99), 99.1, 1e-9);
  EXPECT_DOUBLE_EQ(quantile({7}, 0.99), 7.0);
  EXPECT_TRUE(std::isnan(quantile({}, 0.5)));
}

TEST(Concurrency, RowCountsEveryRequestsTokensOverTheWallTimeAndTimesEachTokenFromTheClient) {
  // Two requests in 2 s: 10 + 30 counted tokens. Request a: sent at 0, first token at 0.1, last
  // at 0.55 after 10 streamed tokens (50 ms a token), decoded in 0.5 s (20 tokens/s). Request b:
  // sent at 0.5, first token at 0.8, last at 1.95 after 24 streamed tokens (50 ms a token),
  // decoded in 1.5 s (20 tokens/s).
  const std::vector<RequestTiming> requests = {{0.0, 0.1, 0.55, 10, 10, 0.5}, {0.5, 0.8, 1.95, 24, 30, 1.5}};
  const ConcurrencyRow row = concurrency_row(2, GridPoint{"draft", 1.0, 8}, requests, 2.0);
  EXPECT_EQ(row.requests, 2);
  EXPECT_DOUBLE_EQ(row.aggregate_tokens_per_s, 20.0);
  EXPECT_DOUBLE_EQ(row.request_tokens_per_s_p50, 20.0);
  EXPECT_NEAR(row.ttft_ms_p50, 200.0, 1e-9);  // 100 and 300 ms
  EXPECT_NEAR(row.ttft_ms_p99, 298.0, 1e-9);
  EXPECT_NEAR(row.tpot_ms_p50, 50.0, 1e-9);
  std::ostringstream csv;
  write_concurrency_csv(csv, {row});
  EXPECT_NE(csv.str().find("\n2,draft,1,8,2,2,20,20,200,298,50,50\n"), std::string::npos) << csv.str();
}

}  // namespace
}  // namespace rootspec
