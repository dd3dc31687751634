// RowGradients (ps/server/row_gradients.h): a table update's pushed rows grouped by id, each
// id's rows in rank order, and their sum formed in that order.
#include "ps/server/row_gradients.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace towerps::ps {
namespace {

Contribution Rows(int worker, const std::vector<uint64_t>& ids, const std::vector<float>& grads) {
  Contribution c;
  c.worker = worker;
  const auto n = static_cast<int64_t>(ids.size());
  c.ids = Tensor::Empty({n}, DType::kUInt64);
  c.gradient = Tensor::Empty({n, 1});
  c.pulled_updates = Tensor::Empty({n}, DType::kUInt32);
  for (int64_t i = 0; i < n; ++i) {
    c.ids.u64()[i] = ids[static_cast<size_t>(i)];
    c.gradient.f32()[i] = grads[static_cast<size_t>(i)];
    c.pulled_updates.u32()[i] = static_cast<uint32_t>(worker);
  }
  return c;
}

TEST(RowGradientsTest, GroupsByIdInRankOrderAndSumsInThatOrder) {
  // Id 4's rows sum to 1 in rank order, (1e8 - 1e8) + 1; in the reverse order the 1 is lost,
  // since 1 - 1e8 rounds to -1e8.
  const Contribution w0 = Rows(0, {2, 4}, {0.5f, 1e8f}), w1 = Rows(1, {4, 9}, {-1e8f, 3.0f}),
                     w2 = Rows(2, {}, {}), w3 = Rows(3, {1, 4}, {7.0f, 1.0f});
  RowGradients g;
  g.Form({&w0, &w1, &w2, &w3}, 1);
  ASSERT_EQ(g.rows(), 4u);
  EXPECT_EQ(std::vector<uint64_t>({g.id(0), g.id(1), g.id(2), g.id(3)}),
            std::vector<uint64_t>({1, 2, 4, 9}));
  std::vector<std::pair<int, uint32_t>> of4;
  g.ForEachEntry(2, [&](const Contribution& c, uint32_t row) { of4.emplace_back(c.worker, row); });
  EXPECT_EQ(of4, (std::vector<std::pair<int, uint32_t>>{{0, 1}, {1, 0}, {3, 1}}));
  float out = -1;
  EXPECT_EQ(*g.Sum(2, &out), 1.0f);
  EXPECT_EQ(*g.Sum(0, &out), 7.0f);  // one worker's row, as pushed
  EXPECT_EQ(g.Sum(3, &out), w1.gradient.f32() + 1);
  g.FormIds(std::vector<uint64_t>{5, 8}.data(), 2);
  ASSERT_EQ(g.rows(), 2u);
  EXPECT_EQ(g.id(1), 8u);
}

}  // namespace
}  // namespace towerps::ps
