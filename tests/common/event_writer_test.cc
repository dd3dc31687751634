// EventWriter's framing: CRC-32C (Castagnoli) masked as TFRecord masks it, against the standard
// check value, and records that frame what was given. (tests/launch/tensorboard_test.cc reads
// whole files back with the protobuf library.)
#include "common/event_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace towerps {
namespace {

uint32_t Mask(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

TEST(EventWriterTest, MaskedCrc32cOfTheCheckString) {
  EXPECT_EQ(MaskedCrc32c("123456789"), Mask(0xe3069283u));  // CRC-32C's check value
  EXPECT_EQ(MaskedCrc32c(""), Mask(0u));
}

TEST(EventWriterTest, RecordsFrameTheirData) {
  const std::string data = "an event";
  const std::string r = TfRecord(data);
  ASSERT_EQ(r.size(), 8 + 4 + data.size() + 4);
  uint64_t length = 0;
  std::memcpy(&length, r.data(), 8);
  EXPECT_EQ(length, data.size());
  uint32_t crc = 0;
  std::memcpy(&crc, r.data() + 8, 4);
  EXPECT_EQ(crc, MaskedCrc32c(r.substr(0, 8)));
  EXPECT_EQ(r.substr(12, data.size()), data);
  std::memcpy(&crc, r.data() + 12 + data.size(), 4);
  EXPECT_EQ(crc, MaskedCrc32c(data));
}

TEST(EventWriterTest, FilesAreNamedForTensorBoardAndStartWithTheVersion) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("event_writer_test_" + std::to_string(getpid())) / "run";
  auto w = EventWriter::Create(dir.string());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_NE((*w)->path().find("/events.out.tfevents."), std::string::npos);
  ASSERT_TRUE((*w)->Scalars(3, {{"train/loss", 0.5}}).ok());
  ASSERT_TRUE((*w)->Histogram(3, "ps/staleness", {4, 0, 1}).ok());
  std::ifstream in((*w)->path(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(bytes.find("brain.Event:2"), std::string::npos);
  EXPECT_NE(bytes.find("train/loss"), std::string::npos);
  EXPECT_NE(bytes.find("ps/staleness"), std::string::npos);
  std::filesystem::remove_all(dir.parent_path());
  // A directory that cannot be made is named.
  auto bad = EventWriter::Create("/proc/no/such/dir");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/proc/no/such/dir"), std::string::npos);
}

}  // namespace
}  // namespace towerps
