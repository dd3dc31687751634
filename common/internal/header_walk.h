// ReadEveryPointer: proves a received message header (proto::Header, common/proto/towerps.capnp)
// safe to read, before any handler touches it. It follows every pointer the schema has, through
// the generated getters, which check each one as the schema types it: a pointer out of the
// message's bounds, a list of the wrong element size (a bit list where a struct list belongs), a
// struct where a list belongs, or text without its NUL all throw kj::Exception here, inside the
// decoder's guard (common/internal/wire_codec.cc), instead of later in a handler. After the walk
// none of the generated getters can throw.
//
// It replaces a walk through Cap'n Proto's dynamic API that did the same by reflection at about
// 4 us a header (25 times this one's cost, docs/PERFORMANCE.md), on every message. Its
// completeness is a test's to prove (tests/common/header_walk_test.cc): on every single-word
// corruption of a header with every pointer field set, it throws exactly when the reflective
// walk does. A pointer field added to the schema must be added here; that test fails until it is.
//
// Contract: a pure function of the header; reads only; thread-safe; throws kj::Exception.
#ifndef TOWERPS_COMMON_INTERNAL_HEADER_WALK_H_
#define TOWERPS_COMMON_INTERNAL_HEADER_WALK_H_

#include "common/proto/towerps.capnp.h"

namespace towerps::internal {

void ReadEveryPointer(proto::Header::Reader header);

}  // namespace towerps::internal

#endif  // TOWERPS_COMMON_INTERNAL_HEADER_WALK_H_
