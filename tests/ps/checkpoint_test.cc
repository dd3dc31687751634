#include "ps/server/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "tests/testing/small_tmpfs.h"

namespace towerps::ps {
namespace {

namespace fs = std::filesystem;

Tensor Random(int64_t n, uint32_t seed) {
  Tensor t = Tensor::Empty({n});
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  for (int64_t i = 0; i < n; ++i) t.f32()[i] = d(rng);
  return t;
}

// A table partition of `n` rows of `dim` with `slots` optimizer arrays each.
TableState SampleTable(int64_t n, int64_t dim, int slots) {
  TableState t;
  t.variable_id = 2;
  t.chunk_id = 0;
  t.version = 41;
  t.updates = 40;
  t.worker_clocks = {20, 21, 20};
  t.dim = dim;
  t.slots = slots;
  t.ids = Tensor::Empty({n}, DType::kUInt64);
  t.row_updates = Tensor::Empty({n}, DType::kUInt32);
  t.row_last_update = Tensor::Empty({n}, DType::kUInt64);
  for (int64_t i = 0; i < n; ++i) {
    t.ids.u64()[i] = static_cast<uint64_t>(i) * 7919 + (1ull << 50);
    t.row_updates.u32()[i] = static_cast<uint32_t>(i % 13);
    t.row_last_update.u64()[i] = static_cast<uint64_t>(41 - i % 7);
  }
  // Ids pending admission (ps/server/row_policy.h): n / 3 of them, in their own records.
  const int64_t p = n / 3;
  t.admission_ids = Tensor::Empty({p}, DType::kUInt64);
  t.admission_counts = Tensor::Empty({p}, DType::kUInt32);
  t.admission_last_seen = Tensor::Empty({p}, DType::kUInt64);
  for (int64_t i = 0; i < p; ++i) {
    t.admission_ids.u64()[i] = static_cast<uint64_t>(i) * 31 + 5;
    t.admission_counts.u32()[i] = static_cast<uint32_t>(1 + i % 3);
    t.admission_last_seen.u64()[i] = static_cast<uint64_t>(40 - i % 5);
  }
  t.rows = Random(n * (1 + slots) * dim, 99).Reshape({n, (1 + slots) * dim});
  return t;
}

void ExpectSameTable(const TableState& a, const TableState& b) {
  EXPECT_EQ(b.variable_id, a.variable_id);
  EXPECT_EQ(b.version, a.version);
  EXPECT_EQ(b.updates, a.updates);
  EXPECT_EQ(b.worker_clocks, a.worker_clocks);
  EXPECT_EQ(b.dim, a.dim);
  EXPECT_EQ(b.slots, a.slots);
  ASSERT_EQ(b.ids.num_elements(), a.ids.num_elements());
  ASSERT_EQ(b.rows.byte_size(), a.rows.byte_size());
  EXPECT_EQ(std::memcmp(b.ids.raw_data(), a.ids.raw_data(), a.ids.byte_size()), 0);
  EXPECT_EQ(std::memcmp(b.rows.raw_data(), a.rows.raw_data(), a.rows.byte_size()), 0);
  EXPECT_EQ(
      std::memcmp(b.row_updates.raw_data(), a.row_updates.raw_data(), a.row_updates.byte_size()),
      0);
  for (auto field : {&TableState::row_last_update, &TableState::admission_ids,
                     &TableState::admission_counts, &TableState::admission_last_seen}) {
    ASSERT_EQ((b.*field).byte_size(), (a.*field).byte_size());
    EXPECT_EQ((b.*field).dtype(), (a.*field).dtype());
    if ((a.*field).byte_size() > 0) {
      EXPECT_EQ(std::memcmp((b.*field).raw_data(), (a.*field).raw_data(), (a.*field).byte_size()),
                0);
    }
  }
}

Checkpoint Sample() {
  Checkpoint ck;
  ck.meta.job_fields = {{"--lr", "0.05"}, {"--model", "mlp"}};
  ck.meta.model_signature = 0x5678;
  ck.meta.server_rank = 1;
  ck.meta.num_servers = 2;
  ck.meta.partition_bytes = 4096;
  ck.meta.variables = {{"w", {10, 30}},
                       {"b", {30}, DType::kFloat32, VariableKind::kMovingAverage, 0.75f},
                       TableVariable("emb", 0, 3, 0.25f),
                       TableVariable("fields", 12, 3, 0.5f)};
  ck.meta.variables[2].policy = "ttl_steps=9,min_count=2";
  ck.meta.variables[3].segments = {{"fields.a.weight", 5}, {"fields.b.weight", 7}};
  ck.meta.chain = 1234567;
  ck.meta.delta = 0;
  for (uint32_t c = 0; c < 3; ++c) {
    ChunkState s;
    s.variable_id = c == 2 ? 1 : 0;
    s.chunk_id = c == 2 ? 0 : c;
    s.version = 17 + c;
    s.updates = 17 + c;
    s.values = Random(100 + c, c);
    s.slots = {Random(100 + c, 10 + c), Random(100 + c, 20 + c)};
    s.worker_clocks = {5, 7, 6};
    ck.chunks.push_back(std::move(s));
  }
  ck.tables.push_back(SampleTable(5, 3, 1));
  return ck;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ckpt_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    path_ = CheckpointPath(dir_.string(), 1);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string ReadFile() {
    std::ifstream in(path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void WriteFile(const std::string& bytes) { std::ofstream(path_, std::ios::binary) << bytes; }

  fs::path dir_;
  std::string path_;
};

TEST_F(CheckpointTest, RoundTripsEverything) {
  const Checkpoint ck = Sample();
  ASSERT_TRUE(SaveCheckpoint(path_, ck).ok());
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
  auto back = LoadCheckpoint(path_);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->meta.job_fields, ck.meta.job_fields);
  EXPECT_EQ(back->meta.model_signature, 0x5678u);
  EXPECT_EQ(back->meta.server_rank, 1);
  EXPECT_EQ(back->meta.partition_bytes, 4096u);
  ASSERT_EQ(back->meta.variables.size(), 4u);
  EXPECT_EQ(back->meta.variables[0].shape, (Shape{10, 30}));
  EXPECT_EQ(back->meta.variables[0].kind, VariableKind::kTrainable);
  EXPECT_EQ(back->meta.variables[1].kind, VariableKind::kMovingAverage);
  EXPECT_EQ(back->meta.variables[1].decay, 0.75f);
  ASSERT_EQ(back->chunks.size(), 3u);
  for (size_t c = 0; c < 3; ++c) {
    const ChunkState& a = ck.chunks[c];
    const ChunkState& b = back->chunks[c];
    EXPECT_EQ(b.variable_id, a.variable_id);
    EXPECT_EQ(b.version, a.version);
    EXPECT_EQ(b.worker_clocks, a.worker_clocks);
    ASSERT_EQ(b.values.num_elements(), a.values.num_elements());
    EXPECT_EQ(std::memcmp(b.values.raw_data(), a.values.raw_data(), a.values.byte_size()), 0);
    ASSERT_EQ(b.slots.size(), 2u);
    EXPECT_EQ(std::memcmp(b.slots[1].raw_data(), a.slots[1].raw_data(), a.slots[1].byte_size()), 0);
  }
  EXPECT_EQ(back->meta.variables[2].kind, VariableKind::kTable);
  EXPECT_EQ(back->meta.variables[2].init_scale, 0.25f);
  EXPECT_EQ(back->meta.variables[2].policy, "ttl_steps=9,min_count=2");
  EXPECT_TRUE(back->meta.variables[2].segments.empty());
  EXPECT_EQ(back->meta.variables[3].segments, ck.meta.variables[3].segments);
  EXPECT_EQ(back->meta.chain, 1234567u);
  ASSERT_EQ(back->tables.size(), 1u);
  ExpectSameTable(ck.tables[0], back->tables[0]);
}

// A partition of more rows than one record holds is split over several, each with its CRC.
TEST_F(CheckpointTest, TablesRoundTripAcrossRowRecords) {
  Checkpoint ck = Sample();
  ck.tables = {SampleTable(150000, 2, 2), SampleTable(0, 4, 0)};
  ck.tables[1].chunk_id = 1;
  ASSERT_TRUE(SaveCheckpoint(path_, ck).ok());
  auto back = LoadCheckpoint(path_);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->tables.size(), 2u);
  ExpectSameTable(ck.tables[0], back->tables[0]);
  ExpectSameTable(ck.tables[1], back->tables[1]);
  // A flipped byte deep in the third rows record is found.
  std::string bytes = ReadFile();
  bytes[bytes.size() - 5000] ^= 0x10;
  WriteFile(bytes);
  auto bad = LoadCheckpoint(path_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
}

TEST_F(CheckpointTest, EveryFlippedByteIsDetected) {
  ASSERT_TRUE(SaveCheckpoint(path_, Sample()).ok());
  const std::string good = ReadFile();
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bad = good;
    const size_t pos = rng() % bad.size();
    bad[pos] = static_cast<char>(bad[pos] ^ (1 + rng() % 255));
    WriteFile(bad);
    auto r = LoadCheckpoint(path_);
    ASSERT_FALSE(r.ok()) << "flip at byte " << pos << " went unnoticed";
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    EXPECT_NE(r.status().message().find(path_), std::string::npos);
  }
}

TEST_F(CheckpointTest, EveryTruncationIsDetected) {
  ASSERT_TRUE(SaveCheckpoint(path_, Sample()).ok());
  const std::string good = ReadFile();
  for (size_t len = 0; len < good.size(); len += 1 + len / 7) {
    WriteFile(good.substr(0, len));
    auto r = LoadCheckpoint(path_);
    ASSERT_FALSE(r.ok()) << "truncated to " << len;
  }
  WriteFile(good + "extra");
  EXPECT_FALSE(LoadCheckpoint(path_).ok());
}

TEST_F(CheckpointTest, MissingFileIsNotFound) {
  EXPECT_EQ(LoadCheckpoint(path_).status().code(), StatusCode::kNotFound);
}

TEST_F(CheckpointTest, FailedSaveKeepsTheOldCheckpoint) {
  ASSERT_TRUE(SaveCheckpoint(path_, Sample()).ok());
  const std::string before = ReadFile();
  // A directory where the temporary file should go makes the save fail.
  fs::create_directories(path_ + ".tmp");
  Checkpoint other = Sample();
  other.meta.model_signature = 1;
  EXPECT_FALSE(SaveCheckpoint(path_, other).ok());
  EXPECT_EQ(ReadFile(), before);
}

// A checkpoint of `floats` values in one chunk: big enough that a nearly full disk cannot take it.
Checkpoint Large(int64_t floats, uint32_t seed) {
  Checkpoint ck = Sample();
  ck.chunks.resize(1);
  ck.chunks[0].values = Random(floats, seed);
  ck.chunks[0].slots.clear();
  ck.meta.variables = {{"w", {floats}}};
  return ck;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> Listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(CheckpointDiskFullTest, FailedSaveOnAFullDiskKeepsThePreviousCheckpointBitForBit) {
  testing::SmallTmpfs disk("ckpt", 256 * 1024);
  if (!disk.mounted()) GTEST_SKIP() << disk.error();
  const std::string path = CheckpointPath(disk.dir(), 0);
  const Checkpoint first = Large(16 * 1024, 1);  // 64 KiB of values
  ASSERT_TRUE(SaveCheckpoint(path, first).ok());
  const std::string first_bytes = Slurp(path);
  ASSERT_GT(first_bytes.size(), 64u * 1024);

  // 16 KiB stay free: the second save writes part of its file, then hits ENOSPC.
  ASSERT_TRUE(disk.FillLeaving(16 * 1024));
  ASSERT_LE(disk.FreeBytes(), 16u * 1024);
  Status s = SaveCheckpoint(path, Large(16 * 1024, 2));
  ASSERT_FALSE(s.ok()) << "the save fitted in " << disk.FreeBytes() << " free bytes";
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  for (const std::string& part :
       {path + ".tmp", std::string("ENOSPC"), std::string("is full"),
        std::string("free space there"), disk.dir(), "previous checkpoint " + path}) {
    EXPECT_NE(s.message().find(part), std::string::npos) << "no '" << part << "' in: " << s;
  }

  // The previous checkpoint is untouched and loads; nothing but it and the filler remains.
  EXPECT_EQ(Slurp(path), first_bytes);
  auto back = LoadCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->chunks.size(), 1u);
  ASSERT_EQ(back->chunks[0].values.byte_size(), first.chunks[0].values.byte_size());
  EXPECT_EQ(std::memcmp(back->chunks[0].values.raw_data(), first.chunks[0].values.raw_data(),
                        first.chunks[0].values.byte_size()),
            0);
  EXPECT_EQ(Listing(disk.dir()), (std::vector<std::string>{"filler", "ps-0.ckpt"}));

  // With no room even to create the temporary file's first page, the same holds.
  ASSERT_TRUE(disk.FillLeaving(0));
  s = SaveCheckpoint(path, Large(16 * 1024, 3));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ENOSPC"), std::string::npos) << s.ToString();
  EXPECT_EQ(Slurp(path), first_bytes);
  EXPECT_EQ(Listing(disk.dir()), (std::vector<std::string>{"filler", "ps-0.ckpt"}));

  // Once space is freed, the next save succeeds and replaces it.
  disk.Free();
  const Checkpoint third = Large(16 * 1024, 3);
  ASSERT_TRUE(SaveCheckpoint(path, third).ok());
  auto now = LoadCheckpoint(path);
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  EXPECT_EQ(std::memcmp(now->chunks[0].values.raw_data(), third.chunks[0].values.raw_data(),
                        third.chunks[0].values.byte_size()),
            0);
  EXPECT_EQ(Listing(disk.dir()), (std::vector<std::string>{"ps-0.ckpt"}));
}

}  // namespace
}  // namespace towerps::ps
