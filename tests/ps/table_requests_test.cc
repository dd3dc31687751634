// The table requests a server reads (ps/server/table_requests.h), through the wire encoding: a
// pull's ids are checked, and a pull, or a push's next pull, asking for more rows than one reply
// frame carries is refused by name (ids may repeat, so their count alone does not bound it).
#include "ps/server/table_requests.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/ps/received.h"
#include "tests/ps/table_test_util.h"

namespace towerps::ps::testing {
namespace {

// The most rows of kMaxTableDim floats one reply frame carries.
constexpr int64_t kFrameRows = static_cast<int64_t>((1ull << 30) / (kMaxTableDim * 4));

TEST(TableRequestsTest, APullOfMoreRowsThanOneReplyFrameIsRefused) {
  const JobConfig job = TableJob(UpdateMode::kAsync, 1, TableOptimizerKind::kSgd);
  auto table = MakeTable(job, kMaxTableDim);
  for (int64_t n : {kFrameRows, kFrameRows + 1}) {
    OutgoingMessage pull(proto::MessageType::PULL);
    pull.AddTensor(Ids(std::vector<uint64_t>(static_cast<size_t>(n), 7)), 0, 0);
    Result<IncomingMessage> in = Received(pull, "worker:0");
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    Result<Tensor> ids = ReadPullIds(*in, *table);
    if (n == kFrameRows) {
      EXPECT_TRUE(ids.ok()) << ids.status().ToString();
      continue;
    }
    ASSERT_FALSE(ids.ok());
    EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(ids.status().message().find("a pull of 4097 rows"), std::string::npos)
        << ids.status().ToString();
  }
  // The same bound on the ids a push pulls next.
  OutgoingMessage push(proto::MessageType::PUSH);
  push.header().setThenPull(true);
  push.AddTensor(Ids({7}), 0, 0);
  push.AddTensor(RandomRows(1, kMaxTableDim, 1), 0, 0);
  push.AddTensor(Tensor::Zeros({1}, DType::kUInt32), 0, 0);
  push.AddTensor(Ids(std::vector<uint64_t>(static_cast<size_t>(kFrameRows + 1), 7)), 0, 0);
  Result<IncomingMessage> in = Received(push, "worker:0");
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  Result<RowPush> read = ReadRowPush(*in, *table);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("pull fewer ids at once"), std::string::npos)
      << read.status().ToString();
}

}  // namespace
}  // namespace towerps::ps::testing
