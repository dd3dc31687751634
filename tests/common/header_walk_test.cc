// ReadEveryPointer (common/internal/header_walk.h) against the reflective walk it replaced, as
// the oracle: on a header with every pointer field of the schema set (found by reflection, so a
// field added to the schema is covered without touching this test), every single-word
// corruption must make both throw or neither.
#include "common/internal/header_walk.h"

#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace towerps::internal {
namespace {

void DynamicReadEveryField(capnp::DynamicStruct::Reader s);

void DynamicReadEveryValue(const capnp::DynamicValue::Reader& v) {
  switch (v.getType()) {
    case capnp::DynamicValue::STRUCT:
      DynamicReadEveryField(v.as<capnp::DynamicStruct>());
      return;
    case capnp::DynamicValue::LIST:
      for (auto element : v.as<capnp::DynamicList>()) DynamicReadEveryValue(element);
      return;
    case capnp::DynamicValue::TEXT:
      (void)v.as<capnp::Text>();
      return;
    default:
      return;
  }
}

void DynamicReadEveryField(capnp::DynamicStruct::Reader s) {
  for (capnp::StructSchema::Field field : s.getSchema().getNonUnionFields()) {
    DynamicReadEveryValue(s.get(field));
  }
  KJ_IF_MAYBE (active, s.which()) {
    DynamicReadEveryValue(s.get(*active));
  }
}

// Sets every pointer field of `s`, recursively: two-element lists, filled structs, text.
// Returns how many pointer fields it set.
int FillEveryPointer(capnp::DynamicStruct::Builder s) {
  int set = 0;
  for (capnp::StructSchema::Field field : s.getSchema().getFields()) {
    const capnp::Type type = field.getType();
    if (type.isText()) {
      s.set(field, capnp::Text::Reader("text"));
    } else if (type.isStruct()) {
      set += FillEveryPointer(s.init(field).as<capnp::DynamicStruct>());
    } else if (type.isList()) {
      auto list = s.init(field, 2).as<capnp::DynamicList>();
      const capnp::Type element = type.asList().getElementType();
      for (uint32_t i = 0; i < 2; ++i) {
        if (element.isStruct()) {
          set += FillEveryPointer(list[i].as<capnp::DynamicStruct>());
        } else if (element.isText()) {
          list.set(i, capnp::Text::Reader("t"));
        } else if (element.isBool()) {
          list.set(i, true);
        } else {
          list.set(i, static_cast<int64_t>(i + 1));
        }
      }
    } else {
      continue;  // primitives and enums: plain bytes, nothing to check
    }
    ++set;
  }
  return set;
}

enum class Outcome { kOk, kThrows };

// As the decoder reads a header (wire_codec.cc): its limits, totalSize, then the walk.
template <typename Walk>
Outcome Read(const std::vector<capnp::word>& words, Walk walk) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = words.size() * 4 + 64;
  options.nestingLimit = 64;
  try {
    capnp::FlatArrayMessageReader reader(
        kj::ArrayPtr<const capnp::word>(words.data(), words.size()), options);
    proto::Header::Reader header = reader.getRoot<proto::Header>();
    (void)header.totalSize();
    walk(header);
    return Outcome::kOk;
  } catch (const kj::Exception&) {
    return Outcome::kThrows;
  }
}

std::vector<capnp::word> FullHeader(int* pointer_fields) {
  capnp::MallocMessageBuilder builder;
  *pointer_fields = FillEveryPointer(capnp::toDynamic(builder.initRoot<proto::Header>()));
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(builder);
  return std::vector<capnp::word>(flat.begin(), flat.end());
}

void StaticWalk(proto::Header::Reader h) { ReadEveryPointer(h); }
void DynamicWalk(proto::Header::Reader h) { DynamicReadEveryField(capnp::toDynamic(h)); }

TEST(HeaderWalkTest, AWellFormedHeaderPassesBothWalks) {
  int fields = 0;
  const std::vector<capnp::word> words = FullHeader(&fields);
  EXPECT_GE(fields, 20);  // the schema's pointer fields, nested ones included
  EXPECT_EQ(Read(words, StaticWalk), Outcome::kOk);
  EXPECT_EQ(Read(words, DynamicWalk), Outcome::kOk);
}

TEST(HeaderWalkTest, ThrowsExactlyWhenTheReflectiveWalkDoes) {
  int fields = 0;
  const std::vector<capnp::word> words = FullHeader(&fields);
  std::mt19937_64 rng(20261123);
  // Per word: pointer-shaped corruptions (each kind, a far offset, every list element size,
  // a struct of other sizes) and random ones.
  std::vector<uint64_t (*)(uint64_t, uint64_t)> edits = {
      [](uint64_t w, uint64_t) { return ~w; },
      [](uint64_t w, uint64_t) { return w ^ 1; },                            // struct <-> list
      [](uint64_t w, uint64_t) { return w ^ 2; },                            // -> far / other
      [](uint64_t w, uint64_t) { return w | 3; },                            // -> capability
      [](uint64_t w, uint64_t) { return w ^ (uint64_t{0x3fff0000} << 2); },  // far offset
      [](uint64_t w, uint64_t r) { return (w & ~(uint64_t{7} << 32)) | ((r % 8) << 32); },
      [](uint64_t w, uint64_t r) { return w ^ ((r % 4 + 1) << 48); },  // struct pointer counts
      [](uint64_t w, uint64_t r) { return w ^ ((r % 8 + 1) << 35); },  // list length
      [](uint64_t, uint64_t r) { return r; },
  };
  int tried = 0, threw = 0;
  for (size_t i = 0; i < words.size(); ++i) {
    for (size_t e = 0; e < edits.size(); ++e) {
      for (int repeat = 0; repeat < (e + 1 < edits.size() ? 2 : 8); ++repeat) {
        std::vector<capnp::word> bad = words;
        uint64_t w;
        std::memcpy(&w, static_cast<const void*>(&bad[i]), sizeof(w));
        w = edits[e](w, rng());
        std::memcpy(static_cast<void*>(&bad[i]), &w, sizeof(w));
        const Outcome expected = Read(bad, DynamicWalk);
        ASSERT_EQ(Read(bad, StaticWalk), expected)
            << "word " << i << " of " << words.size() << " set to 0x" << std::hex << w
            << ": the reflective walk " << (expected == Outcome::kThrows ? "throws" : "passes")
            << "; a pointer field missing from ReadEveryPointer?";
        ++tried;
        threw += expected == Outcome::kThrows;
      }
    }
  }
  // Not vacuous: many corruptions are caught, and many pass (the walks must agree on both).
  EXPECT_GT(threw, tried / 10) << threw << " of " << tried;
  EXPECT_LT(threw, tried) << threw << " of " << tried;
}

}  // namespace
}  // namespace towerps::internal
