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
// Returns how many pointer fields it set. A kind of field it cannot fill (data, any-pointer,
// interface, a union) fails the test: left null, it would be walked by neither side.
int FillEveryPointer(capnp::DynamicStruct::Builder s) {
  int set = 0;
  EXPECT_EQ(s.getSchema().getUnionFields().size(), 0u)
      << s.getSchema().getProto().getDisplayName().cStr()
      << " has a union: fill each member in turn here";
  for (capnp::StructSchema::Field field : s.getSchema().getFields()) {
    const capnp::Type type = field.getType();
    if (type.isData() || type.isAnyPointer() || type.isInterface()) {
      ADD_FAILURE() << field.getProto().getName().cStr()
                    << ": a kind of pointer field this test does not fill yet";
      continue;
    }
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
        } else if (element.isData()) {
          static const kj::byte kBytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
          list.set(i, capnp::Data::Reader(kBytes, sizeof(kBytes)));
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
// A flat message as plain words: capnp::word cannot be copied, so neither could a vector of it.
using Words = std::vector<uint64_t>;

template <typename Walk>
Outcome Read(const Words& words, Walk walk) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = words.size() * 4 + 64;
  options.nestingLimit = 64;
  try {
    capnp::FlatArrayMessageReader reader(
        kj::ArrayPtr<const capnp::word>(reinterpret_cast<const capnp::word*>(words.data()),
                                        words.size()),
        options);
    proto::Header::Reader header = reader.getRoot<proto::Header>();
    (void)header.totalSize();
    walk(header);
    return Outcome::kOk;
  } catch (const kj::Exception&) {
    return Outcome::kThrows;
  }
}

Words FullHeader(int* pointer_fields) {
  capnp::MallocMessageBuilder builder;
  *pointer_fields = FillEveryPointer(capnp::toDynamic(builder.initRoot<proto::Header>()));
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(builder);
  Words words(flat.size());
  std::memcpy(words.data(), flat.begin(), flat.size() * sizeof(capnp::word));
  return words;
}

void StaticWalk(proto::Header::Reader h) { ReadEveryPointer(h); }
void DynamicWalk(proto::Header::Reader h) { DynamicReadEveryField(capnp::toDynamic(h)); }

TEST(HeaderWalkTest, AWellFormedHeaderPassesBothWalks) {
  int fields = 0;
  const Words words = FullHeader(&fields);
  EXPECT_GE(fields, 20);  // the schema's pointer fields, nested ones included
  EXPECT_EQ(Read(words, StaticWalk), Outcome::kOk);
  EXPECT_EQ(Read(words, DynamicWalk), Outcome::kOk);
}

TEST(HeaderWalkTest, ThrowsExactlyWhenTheReflectiveWalkDoes) {
  int fields = 0;
  const Words words = FullHeader(&fields);
  std::mt19937_64 rng(20261123);
  // Per word: pointer-shaped corruptions (each kind, a far offset, every list element size,
  // a struct of other sizes) and random ones.
  std::vector<uint64_t (*)(uint64_t, uint64_t)> edits = {
      [](uint64_t w, uint64_t) { return ~w; },
      [](uint64_t w, uint64_t) { return w ^ 1; },  // struct <-> list
      [](uint64_t w, uint64_t) { return w ^ 2; },  // -> far / other
      [](uint64_t w, uint64_t) { return w | 3; },  // -> capability
      // A capability pointer with offset 0: totalSize() passes it and every typed getter
      // refuses it, so on each pointer word this edit alone tells the walks apart.
      [](uint64_t w, uint64_t) { return (w & ~uint64_t{0xFFFFFFFF}) | 3; },
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
        Words bad = words;
        const uint64_t w = bad[i] = edits[e](words[i], rng());
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
