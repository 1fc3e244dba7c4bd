// Generator, temperature, chi-square and table-model validation.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "rng.h"
#include "rows.h"
#include "stats.h"
#include "table_decode.h"
#include "table_model.h"

namespace rootspec {
namespace {

TEST(Rng, SeededAndUniform) {
  Rng a(7), b(7), c(8);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    EXPECT_NE(x, c.next_u64());
  }
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double u = a.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(Rng, SampleIndexFollowsWeights) {
  const std::vector<float> w = {0.0f, 2.0f, 1.0f, 0.0f, 1.0f};  // unnormalised
  std::vector<int64_t> counts(5, 0);
  Rng rng(11);
  for (int i = 0; i < 40000; ++i) counts[sample_index(w.data(), 5, rng)] += 1;
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[3], 0);
  EXPECT_GT(chi_square_test(counts, {0, 0.5, 0.25, 0, 0.25}).p_value, 1e-4);
}

TEST(Rows, TemperatureShapesRows) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f};
  std::vector<float> p(4);
  probs_from_logits(logits.data(), 4, 0.0, p.data());
  EXPECT_EQ(p, (std::vector<float>{0, 1, 0, 0}));  // ties → lower id
  probs_from_logits(logits.data(), 4, 1.0, p.data());
  const double z = std::exp(1.0) + 2 * std::exp(3.0) + std::exp(-2.0);
  EXPECT_NEAR(p[0], std::exp(1.0) / z, 1e-6);
  probs_from_logits(logits.data(), 4, 0.5, p.data());
  const double z2 = std::exp(2.0) + 2 * std::exp(6.0) + std::exp(-4.0);
  EXPECT_NEAR(p[1], std::exp(6.0) / z2, 1e-6);
  // p^(1/T) renormalised equals softmax(logits/T) for p = softmax(logits).
  std::vector<float> p1(4), pt(4);
  probs_from_logits(logits.data(), 4, 1.0, p1.data());
  temper_probs(p1.data(), 4, 0.5, pt.data());
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(pt[i], p[i], 1e-6);
  temper_probs(p1.data(), 4, 0.0, pt.data());
  EXPECT_EQ(pt, (std::vector<float>{0, 1, 0, 0}));
}

TEST(Stats, ChiSquareSurvivalKnownValues) {
  EXPECT_NEAR(chi_square_survival(3.841458820694124, 1), 0.05, 1e-9);
  EXPECT_NEAR(chi_square_survival(18.307038053275146, 10), 0.05, 1e-9);
  EXPECT_NEAR(chi_square_survival(100.0, 100), 0.48119, 1e-4);
  EXPECT_NEAR(chi_square_survival(2.0, 2), std::exp(-1.0), 1e-12);
}

TEST(Stats, ChiSquarePoolsSmallCellsAndRejectsImpossibleOnes) {
  const ChiSquareResult r = chi_square_test({500, 490, 4, 2}, {0.5, 0.494, 0.003, 0.003});
  EXPECT_EQ(r.cells, 3);  // the two small cells pooled (3 + 3 expected)
  EXPECT_GT(r.p_value, 0.5);
  EXPECT_EQ(chi_square_test({10, 1}, {1.0, 0.0}).p_value, 0.0);
  EXPECT_LT(chi_square_test({700, 300}, {0.5, 0.5}).p_value, 1e-20);
}

nlohmann::json tiny_model() {
  return nlohmann::json::parse(R"({"vocab_size": 2, "order": 1, "context": [0],
      "target": {"0": [0.5, 0.5], "1": [0.25, 0.75]},
      "draft": {"0": [0.9, 0.1], "1": [0.5, 0.5]}})");
}

std::string load_error(const nlohmann::json& j) {
  try {
    TableModel::from_json(j);
  } catch (const TableModelError& e) {
    return e.what();
  }
  return "";
}

TEST(TableModel, ParsesAndRoundTrips) {
  const TableModel m = TableModel::from_json(tiny_model());
  EXPECT_EQ(m.vocab(), 2);
  EXPECT_EQ(m.target_row(1)[1], 0.75f);
  EXPECT_EQ(m.key_of({0, 1, 1}), 1);
  EXPECT_EQ(TableModel::from_json(m.to_json()).to_json(), m.to_json());
  const TableModel r = TableModel::random(5, 2, 3);
  EXPECT_EQ(TableModel::from_json(r.to_json()).to_json(), r.to_json());
}

TEST(TableModel, BadInputNamesTheProblem) {
  auto j = tiny_model();
  j.erase("draft");
  EXPECT_NE(load_error(j).find("missing key \"draft\""), std::string::npos);
  j = tiny_model();
  j["extra"] = 1;
  EXPECT_NE(load_error(j).find("unknown key \"extra\""), std::string::npos);
  j = tiny_model();
  j["target"]["1"] = {0.5};
  EXPECT_NE(load_error(j).find("target[\"1\"] must be an array of 2"), std::string::npos);
  j = tiny_model();
  j["target"]["1"] = {0.5, 0.6};
  EXPECT_NE(load_error(j).find("sums to"), std::string::npos);
  j = tiny_model();
  j["draft"]["0"] = {1.5, -0.5};
  EXPECT_NE(load_error(j).find("negative"), std::string::npos);
  j = tiny_model();
  j["target"].erase("1");
  EXPECT_NE(load_error(j).find("missing row target[\"1\"]"), std::string::npos);
  j = tiny_model();
  j["target"]["7"] = {0.5, 0.5};
  EXPECT_NE(load_error(j).find("bad key target[\"7\"]"), std::string::npos);
  j = tiny_model();
  j["context"] = {0, 1};
  EXPECT_NE(load_error(j).find("\"context\""), std::string::npos);
  EXPECT_EQ(load_error(tiny_model()), "");
}

TEST(TableModel, ExactJointSumsToOne) {
  const TableModel m = TableModel::random(4, 2, 9);
  for (double T : {0.0, 0.7, 1.0}) {
    const auto joint = exact_joint(m, T, 3);
    double total = 0;
    for (double p : joint) total += p;
    EXPECT_NEAR(total, 1.0, 1e-9);
  }
}

}  // namespace
}  // namespace rootspec
