// What a table draws by id (job/table_keys.h): a joined table's (VariableSpec::segments) initial
// rows and admission coin are its segments' own tables', at every id of each segment, and a
// table without segments draws as it always did.
#include "job/table_keys.h"

#include "job/initial_rows.h"
#include "job/table_policy.h"

#include <gtest/gtest.h>

#include <vector>

namespace towerps::ps {
namespace {

constexpr int64_t kDim = 5;

std::vector<float> Row(const InitialRows& initial, uint64_t id) {
  std::vector<float> out(kDim);
  initial.Fill(id, kDim, out.data());
  return out;
}

VariableSpec Joined() {
  VariableSpec joined = TableVariable("tables", 3 + 1 + 7, kDim, 0.05f);
  joined.segments = {{"tables.a.weight", 3}, {"tables.b.weight", 1}, {"tables.c.weight", 7}};
  return joined;
}

TEST(TableKeysTest, EachIdIsItsSegmentsWithTheIdWithin) {
  const TableKeys keys(Joined(), [](std::string_view name) { return name.size() * 100 + name[7]; });
  const std::vector<std::pair<uint64_t, TableKeys::Keyed>> want = {
      {0, {1597, 0}}, {2, {1597, 2}}, {3, {1598, 0}}, {4, {1599, 0}}, {10, {1599, 6}}};
  for (const auto& [id, keyed] : want) {
    EXPECT_EQ(keys.For(id).key, keyed.key) << id;
    EXPECT_EQ(keys.For(id).id, keyed.id) << id;
  }
  const TableKeys own("emb", [](std::string_view) { return uint64_t{5}; });
  EXPECT_EQ(own.For(~uint64_t{0}).key, 5u);
  EXPECT_EQ(own.For(~uint64_t{0}).id, ~uint64_t{0});
}

TEST(InitialRowsTest, AJoinedTablesRowIsItsSegmentsOwn) {
  const VariableSpec joined = Joined();
  const InitialRows rows(11, joined);
  uint64_t start = 0;
  for (const TableSegment& s : joined.segments) {
    const InitialRows own(11, s.name, 0.05f);
    for (uint64_t i = 0; i < static_cast<uint64_t>(s.rows); ++i) {
      EXPECT_EQ(Row(rows, start + i), Row(own, i)) << s.name << " row " << i;
    }
    start += static_cast<uint64_t>(s.rows);
  }
  // Segments' tables are named apart, so their rows differ: row 0 of each.
  EXPECT_NE(Row(rows, 0), Row(rows, 3));
  EXPECT_NE(Row(rows, 3), Row(rows, 4));
}

TEST(InitialRowsTest, ATableOfItsOwnDrawsFromItsName) {
  const InitialRows by_spec(11, TableVariable("emb", 0, kDim, 0.05f));
  const InitialRows by_name(11, "emb", 0.05f);
  for (uint64_t id : {uint64_t{0}, uint64_t{7}, ~uint64_t{0}}) {
    EXPECT_EQ(Row(by_spec, id), Row(by_name, id)) << id;
  }
  EXPECT_NE(Row(by_name, 7), Row(InitialRows(12, "emb", 0.05f), 7));
  for (float v : Row(by_name, 7)) {
    EXPECT_GE(v, -0.05f);
    EXPECT_LT(v, 0.05f);
  }
}

TEST(AdmissionCoinTest, AJoinedTablesCoinIsItsSegmentsOwn) {
  VariableSpec joined = TableVariable("tables", 3000, kDim, 0.05f);
  joined.segments = {{"tables.a.weight", 1000}, {"tables.b.weight", 2000}};
  const AdmissionCoin coin(11, joined, 0.5f);
  int admitted = 0;
  uint64_t start = 0;
  for (const TableSegment& s : joined.segments) {
    const AdmissionCoin own(11, TableVariable(s.name, s.rows, kDim, 0.05f), 0.5f);
    for (uint64_t i = 0; i < static_cast<uint64_t>(s.rows); ++i) {
      ASSERT_EQ(coin.Admits(start + i), own.Admits(i)) << s.name << " " << i;
      admitted += own.Admits(i) ? 1 : 0;
    }
    start += static_cast<uint64_t>(s.rows);
  }
  EXPECT_GT(admitted, 1300);  // about half of 3000
  EXPECT_LT(admitted, 1700);
}

}  // namespace
}  // namespace towerps::ps
