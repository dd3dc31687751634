// FNV-1a against the published 64-bit test vectors, and the byte-order-free integer form.
#include "common/hash.h"

#include <gtest/gtest.h>

namespace towerps {
namespace {

TEST(HashTest, MatchesFnv1aTestVectors) {
  EXPECT_EQ(Fnv1a("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a("foobar", 6), 0x85944171f73967e8ull);
}

TEST(HashTest, SeedContinuesAHash) {
  EXPECT_EQ(Fnv1a("bar", 3, Fnv1a("foo", 3)), Fnv1a("foobar", 6));
}

TEST(HashTest, IntegersHashLeastSignificantByteFirst) {
  const unsigned char bytes[8] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
  EXPECT_EQ(Fnv1aU64(0x0102030405060708ull, kFnv1aOffsetBasis), Fnv1a(bytes, sizeof(bytes)));
}

}  // namespace
}  // namespace towerps
