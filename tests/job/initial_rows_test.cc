// InitialRows: a joined table's row (VariableSpec::segments) starts as its segment's own table's
// row of the id within the segment, at each segment's first and last id, and a table without
// segments draws as it always did.
#include "job/initial_rows.h"

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

TEST(InitialRowsTest, AJoinedTablesRowIsItsSegmentsOwn) {
  VariableSpec joined = TableVariable("tables", 3 + 1 + 7, kDim, 0.05f);
  joined.segments = {{"tables.a.weight", 3}, {"tables.b.weight", 1}, {"tables.c.weight", 7}};
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

}  // namespace
}  // namespace towerps::ps
