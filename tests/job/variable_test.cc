// VariableListHash: equal lists agree, every declared property counts, and the value is pinned
// (checkpoints record it as the model signature: a change refuses every existing checkpoint).
// ValidateVariableKind's refusals, and the variable list in a message header.
#include "job/variable.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <cmath>

#include "job/variable_wire.h"

namespace towerps::ps {
namespace {

std::vector<VariableSpec> Model() {
  return {{"fc1/kernel", {784, 100}}, {"fc1/bias", {100}}, {"labels", {10}, DType::kUInt8}};
}

TEST(VariableListHashTest, EqualListsAgree) {
  EXPECT_EQ(VariableListHash(Model()), VariableListHash(Model()));
}

TEST(VariableListHashTest, NameShapeDtypeAndOrderCount) {
  const uint64_t base = VariableListHash(Model());
  auto renamed = Model();
  renamed[1].name = "fc1/biases";
  auto reshaped = Model();
  reshaped[0].shape = {100, 784};
  auto retyped = Model();
  retyped[2].dtype = DType::kFloat32;
  auto reordered = Model();
  std::swap(reordered[0], reordered[1]);
  auto shorter = Model();
  shorter.pop_back();
  for (const auto& other : {renamed, reshaped, retyped, reordered, shorter}) {
    EXPECT_NE(VariableListHash(other), base);
  }
  // Lengths are hashed too, so moving a byte between a name and a shape changes the hash.
  EXPECT_NE(VariableListHash({{"a", {}}, {"b", {}}}), VariableListHash({{"ab", {}}}));
}

TEST(VariableListHashTest, KindAndDecayCountOnlyForMovingAverages) {
  const std::vector<VariableSpec> plain = {{"bn/gamma", {4}}, {"bn/moving_mean", {4}}};
  std::vector<VariableSpec> moving = plain;
  moving[1].kind = VariableKind::kMovingAverage;
  moving[1].decay = 0.9f;
  std::vector<VariableSpec> other_decay = moving;
  other_decay[1].decay = 0.99f;
  EXPECT_NE(VariableListHash(moving), VariableListHash(plain));
  EXPECT_NE(VariableListHash(moving), VariableListHash(other_decay));
  // A decay on a trainable variable means nothing and does not count.
  std::vector<VariableSpec> stray = plain;
  stray[0].decay = 0.5f;
  EXPECT_EQ(VariableListHash(stray), VariableListHash(plain));
}

TEST(ValidateVariableKindTest, NamesTheVariableAndTheValue) {
  EXPECT_TRUE(ValidateVariableKind({"w", {3}}).ok());
  VariableSpec v{"bn/moving_variance", {3}, DType::kFloat32, VariableKind::kMovingAverage, 1.0f};
  Status s = ValidateVariableKind(v);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bn/moving_variance"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("decay 1.0"), std::string::npos) << s.message();
  v.kind = static_cast<VariableKind>(7);
  s = ValidateVariableKind(v);
  EXPECT_NE(s.message().find("unknown kind 7"), std::string::npos) << s.message();
}

TEST(ValidateVariableKindTest, TablesAreFloatRowsOfAPositiveDimWithAFiniteScale) {
  EXPECT_TRUE(ValidateVariableKind(TableVariable("user", 0, 16, 0.05f)).ok());
  EXPECT_TRUE(ValidateVariableKind(TableVariable("user", 1000, 1, 0.0f)).ok());
  for (const VariableSpec& bad :
       {TableVariable("user", 10, 0, 0.05f), TableVariable("user", -1, 4, 0.05f),
        TableVariable("user", 10, 4, -1.0f), TableVariable("user", 10, 4, INFINITY)}) {
    Status s = ValidateVariableKind(bad);
    ASSERT_FALSE(s.ok()) << ShapeToString(bad.shape) << " " << bad.init_scale;
    EXPECT_NE(s.message().find("table user"), std::string::npos) << s.message();
  }
  VariableSpec bytes = TableVariable("user", 10, 4, 0.05f);
  bytes.dtype = DType::kUInt8;
  EXPECT_FALSE(ValidateVariableKind(bytes).ok());
}

// Dense variables are float32 (a server's chunks are) of at most kMaxDenseElements; before, an
// unknown dtype reached DTypeSize's check and aborted the server at registration.
TEST(ValidateVariableKindTest, DenseVariablesAreFloat32OfBoundedSize) {
  EXPECT_TRUE(ValidateVariableKind({"w", {kMaxDenseElements}}).ok());
  VariableSpec unknown{"w", {4}};
  unknown.dtype = static_cast<DType>(4);
  VariableSpec stats{"bn/mean", {4}};
  stats.kind = VariableKind::kMovingAverage;
  stats.decay = 0.9f;
  EXPECT_TRUE(ValidateVariableKind(stats).ok());
  stats.dtype = DType::kUInt64;
  for (const VariableSpec& bad : {unknown, stats, VariableSpec{"w", {kMaxDenseElements + 1}},
                                  VariableSpec{"w", {int64_t{1} << 40, int64_t{1} << 40}}}) {
    Status s = ValidateVariableKind(bad);
    ASSERT_FALSE(s.ok()) << ShapeToString(bad.shape);
    EXPECT_NE(s.message().find("variable " + bad.name), std::string::npos) << s.ToString();
  }
}

TEST(VariableListHashTest, TablesCountTheirBoundDimAndScale) {
  const std::vector<VariableSpec> a = {{"w", {4}}, TableVariable("emb", 0, 8, 0.05f)};
  std::vector<VariableSpec> b = a;
  b[1].init_scale = 0.1f;
  std::vector<VariableSpec> c = a;
  c[1].shape = {100, 8};
  std::vector<VariableSpec> dense = a;
  dense[1] = {"emb", {0, 8}};
  EXPECT_NE(VariableListHash(a), VariableListHash(b));
  EXPECT_NE(VariableListHash(a), VariableListHash(c));
  EXPECT_NE(VariableListHash(a), VariableListHash(dense));
}

// A joined table (VariableSpec::segments): bounded, its segments named apart, of a row or more,
// adding up to its rows; each refusal names the table.
TEST(ValidateVariableKindTest, AJoinedTablesSegmentsAddUpToItsRows) {
  VariableSpec joined = TableVariable("tables", 12, 8, 0.05f);
  joined.segments = {{"tables.a.weight", 5}, {"tables.b.weight", 7}};
  EXPECT_TRUE(ValidateVariableKind(joined).ok());
  std::vector<std::pair<std::vector<TableSegment>, std::string>> bad = {
      {{{"tables.a.weight", 5}, {"tables.b.weight", 6}}, "hold 11 rows, not the table's 12"},
      {{{"tables.a.weight", 5}, {"tables.b.weight", 8}}, "'tables.b.weight' of 8 rows"},
      {{{"tables.a.weight", 0}, {"tables.b.weight", 12}}, "'tables.a.weight' of 0 rows"},
      {{{"", 5}, {"tables.b.weight", 7}}, "segment '' of 5 rows"},
      {{{"tables.a.weight", 5}, {"tables.a.weight", 7}}, "two segments are named"}};
  for (const auto& [segments, why] : bad) {
    VariableSpec v = joined;
    v.segments = segments;
    Status s = ValidateVariableKind(v);
    ASSERT_FALSE(s.ok()) << why;
    EXPECT_NE(s.message().find("table tables: "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  }
  VariableSpec unbounded = TableVariable("tables", 0, 8, 0.05f);
  unbounded.segments = {{"tables.a.weight", 5}};
  EXPECT_NE(ValidateVariableKind(unbounded).message().find("an unbounded table cannot join"),
            std::string::npos);
  VariableSpec dense{"w", {12}};
  dense.segments = joined.segments;
  EXPECT_FALSE(ValidateVariableKind(dense).ok());
}

TEST(VariableListHashTest, AJoinedTablesSegmentsCount) {
  std::vector<VariableSpec> a = {TableVariable("tables", 12, 8, 0.05f)};
  a[0].segments = {{"tables.a.weight", 5}, {"tables.b.weight", 7}};
  std::vector<VariableSpec> renamed = a, moved = a, alone = a;
  renamed[0].segments[1].name = "tables.c.weight";
  moved[0].segments = {{"tables.a.weight", 6}, {"tables.b.weight", 6}};
  alone[0].segments.clear();
  for (const auto& other : {renamed, moved, alone}) {
    EXPECT_NE(VariableListHash(other), VariableListHash(a));
  }
  EXPECT_EQ(FirstVariableDifference(a, "worker 1", moved, "server 0"),
            "variable 0 'tables' [12, 8] joins 2 segments ('tables.a.weight' 5, "
            "'tables.b.weight' 7) in worker 1's model but 2 segments ('tables.a.weight' 6, "
            "'tables.b.weight' 6) in server 0's");
}

// The variable list in a message header carries each table's segments, and a list of more than
// kMaxTableSegments is cut short where ValidateVariableKind refuses it.
TEST(VariableWireTest, TablesCarryTheirSegments) {
  std::vector<VariableSpec> sent = {{"w", {4}}, TableVariable("tables", 12, 8, 0.05f)};
  sent[1].segments = {{"tables.a.weight", 5}, {"tables.b.weight", 7}};
  capnp::MallocMessageBuilder message;
  WriteVariables(sent, message.initRoot<proto::Header>());
  const std::vector<VariableSpec> got = ReadVariables(message.getRoot<proto::Header>().asReader());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].segments.empty());
  EXPECT_EQ(got[1].segments, sent[1].segments);
  EXPECT_EQ(VariableListHash(got), VariableListHash(sent));
  sent[1].segments.assign(kMaxTableSegments + 5, {"s", 1});
  WriteVariables(sent, message.initRoot<proto::Header>());
  const std::vector<VariableSpec> cut = ReadVariables(message.getRoot<proto::Header>().asReader());
  EXPECT_EQ(cut[1].segments.size(), kMaxTableSegments + 1);
  EXPECT_FALSE(ValidateVariableKind(cut[1]).ok());
}

TEST(VariableListHashTest, ValueIsPinned) {
  EXPECT_EQ(VariableListHash({}), 0xa8c7f832281a39c5u);
  EXPECT_EQ(VariableListHash(Model()), 0x499c74d255f77895u);
}

TEST(FirstVariableDifferenceTest, NamesTheFirstVariableThatDiffers) {
  const std::vector<VariableSpec> a = {{"w", {4, 3}}, {"b", {3}}};
  EXPECT_EQ(FirstVariableDifference(a, "worker 1", a, "server 0"), "");
  std::vector<VariableSpec> renamed = a;
  renamed[1].name = "bias";
  EXPECT_EQ(FirstVariableDifference(renamed, "worker 1", a, "server 0"),
            "variable 1 is 'bias' [3] in worker 1's model but 'b' [3] in server 0's");
  std::vector<VariableSpec> reshaped = a;
  reshaped[0].shape = {3, 4};
  EXPECT_EQ(FirstVariableDifference(reshaped, "worker 1", a, "server 0"),
            "variable 0 is 'w' [3, 4] in worker 1's model but 'w' [4, 3] in server 0's");
  std::vector<VariableSpec> longer = a;
  longer.push_back({"extra", {2}});
  EXPECT_EQ(FirstVariableDifference(longer, "worker 1", a, "server 0"),
            "variable 2 'extra' [2] is in worker 1's model, not in server 0's (2 variables)");
  EXPECT_EQ(FirstVariableDifference(a, "worker 1", longer, "server 0"),
            "variable 2 'extra' [2] is in server 0's model, not in worker 1's (2 variables)");
  std::vector<VariableSpec> average = a;
  average[1].kind = VariableKind::kMovingAverage;
  EXPECT_NE(FirstVariableDifference(average, "worker 1", a, "server 0").find("'b' [3] is of "),
            std::string::npos);
}

}  // namespace
}  // namespace towerps::ps
