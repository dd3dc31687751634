// ReadCheckpointParameters: the chunks of two servers' checkpoint files put back together into
// whole variables, by the placement the servers used (a table's too: by rows, or whole on one
// server as --table-placement says); a missing file or chunk is named.
#include "ps/server/checkpoint_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>

#include "job/placement.h"
#include "ps/server/checkpoint.h"

namespace towerps::ps {
namespace {

namespace fs = std::filesystem;

class CheckpointReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ckpt_reader_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    // w: 300 floats in 3 chunks of 100 (400-byte partitions); b: 30 floats in one chunk.
    variables_ = {{"w", {10, 30}}, {"b", {30}}};
    std::mt19937 rng(7);
    std::normal_distribution<float> d;
    for (const VariableSpec& v : variables_) {
      Tensor t = Tensor::Empty(v.shape);
      for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = d(rng);
      values_.push_back(std::move(t));
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes each server's file with the chunks the placement gives it, at `version`; `skip`
  // leaves out one chunk (variable, chunk), as a damaged directory would.
  void Write(int64_t version, std::pair<uint32_t, uint32_t> skip = {99, 99}) {
    auto placement = ChunkPlacement::Compute(variables_, 2, 400);
    ASSERT_TRUE(placement.ok()) << placement.status();
    for (int rank = 0; rank < 2; ++rank) {
      Checkpoint ck;
      ck.meta.job_fields = {{"--lr", "0.05"}};
      ck.meta.model_signature = 0xabc;
      ck.meta.server_rank = rank;
      ck.meta.num_servers = 2;
      ck.meta.partition_bytes = 400;
      ck.meta.variables = variables_;
      for (const ChunkSpec& spec : placement->chunks()) {
        if (spec.server != rank || std::pair(spec.variable_id, spec.chunk_id) == skip) continue;
        ChunkState s;
        s.variable_id = spec.variable_id;
        s.chunk_id = spec.chunk_id;
        s.version = version + spec.chunk_id;
        s.values = Tensor::Empty({spec.num_elements});
        std::copy_n(values_[spec.variable_id].f32() + spec.offset, spec.num_elements,
                    s.values.f32());
        ck.chunks.push_back(std::move(s));
      }
      ASSERT_TRUE(SaveCheckpoint(CheckpointPath(dir_.string(), rank), ck).ok());
    }
  }

  fs::path dir_;
  std::vector<VariableSpec> variables_;
  std::vector<Tensor> values_;
};

TEST_F(CheckpointReaderTest, JoinsEveryServersChunksIntoWholeVariables) {
  Write(40);
  auto read = ReadCheckpointParameters(dir_.string());
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->variables.size(), 2u);
  EXPECT_EQ(read->model_signature, 0xabcu);
  EXPECT_EQ(read->min_version, 40);
  EXPECT_EQ(read->max_version, 42);  // w's chunk 2
  EXPECT_EQ(read->job_fields, (std::vector<std::pair<std::string, std::string>>{{"--lr", "0.05"}}));
  for (size_t v = 0; v < 2; ++v) {
    ASSERT_EQ(read->values[v].shape(), variables_[v].shape);
    EXPECT_EQ(
        std::memcmp(read->values[v].raw_data(), values_[v].raw_data(), values_[v].byte_size()), 0)
        << variables_[v].name;
  }
}

TEST_F(CheckpointReaderTest, AMissingChunkOrFileIsNamed) {
  Write(40, {0, 1});
  auto read = ReadCheckpointParameters(dir_.string());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(read.status().message().find("no checkpoint holds chunk 1 of w"), std::string::npos)
      << read.status();

  Write(40);
  fs::remove(CheckpointPath(dir_.string(), 1));
  read = ReadCheckpointParameters(dir_.string());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("ps-1.ckpt"), std::string::npos) << read.status();

  read = ReadCheckpointParameters((dir_ / "nowhere").string());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kNotFound);
}

// A table placed whole (--table-placement whole, recorded in the files' job fields) is one
// partition on server 0, which server 1 backs up (--ps-replicas 2): its rows are read once. The
// same files read as a job placing it by rows lack partition 1, which is named.
TEST_F(CheckpointReaderTest, ATablePlacedWholeIsReadFromItsOneServer) {
  const VariableSpec emb = TableVariable("emb", 0, 2, 0.1f);
  for (const char* placement : {"whole", "rows"}) {
    SCOPED_TRACE(placement);
    for (int rank = 0; rank < 2; ++rank) {
      Checkpoint ck;
      ck.meta.job_fields = {{"--table-placement", "whole"}};
      if (std::string(placement) == "rows") ck.meta.job_fields.clear();  // the default: rows
      ck.meta.server_rank = rank;
      ck.meta.num_servers = 2;
      ck.meta.partition_bytes = 400;
      ck.meta.variables = {emb};
      {  // the primary on server 0, its backup on server 1
        TableState t;
        t.variable_id = 0;
        t.chunk_id = 0;
        t.version = 9;
        t.dim = 2;
        t.ids = Tensor::Empty({3}, DType::kUInt64);
        t.rows = Tensor::Empty({3, 2});
        t.row_updates = Tensor::Empty({3}, DType::kUInt32);
        t.row_last_update = Tensor::Empty({3}, DType::kUInt64);
        t.admission_ids = Tensor::Empty({0}, DType::kUInt64);
        t.admission_counts = Tensor::Empty({0}, DType::kUInt32);
        t.admission_last_seen = Tensor::Empty({0}, DType::kUInt64);
        for (int r = 0; r < 3; ++r) {
          t.ids.u64()[r] = 100 + r;
          t.rows.f32()[2 * r] = static_cast<float>(r);
          t.rows.f32()[2 * r + 1] = -static_cast<float>(r);
          t.row_updates.u32()[r] = 1;
          t.row_last_update.u64()[r] = 9;
        }
        ck.tables.push_back(std::move(t));
      }
      ASSERT_TRUE(SaveCheckpoint(CheckpointPath(dir_.string(), rank), ck).ok());
    }
    auto read = ReadCheckpointParameters(dir_.string());
    if (std::string(placement) == "rows") {
      ASSERT_FALSE(read.ok());
      EXPECT_NE(read.status().message().find("partition 1 of emb"), std::string::npos)
          << read.status();
      continue;
    }
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_EQ(read->tables[0].ids.num_elements(), 3);
    EXPECT_EQ(read->tables[0].ids.u64()[2], 102u);
    EXPECT_EQ(read->tables[0].values.f32()[5], -2.0f);
  }
}

}  // namespace
}  // namespace towerps::ps
