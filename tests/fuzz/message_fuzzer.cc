// Message decoding (common/internal/wire_codec.h), what every server and client does with a
// peer's frames. The input becomes frames (tests/fuzz/fuzz_util.h: SplitFrames), DecodeMessage
// validates them under small WireLimits, and a message it accepts is read field by field through
// the generated getters, as the server and the client read one. A kj::Exception escaping either
// step, a payload that disagrees with its metadata, or an error other than kProtocol is a finding.
// A replicate message's chunk state is also read as a joining backup reads it (ReadReplicaState,
// for a small chunk of a fixed job) and, when accepted, restored into a chunk that then takes a
// step: a state it accepts must be one a chunk can hold. Decoding goes through shared-memory
// links with an arena of their own, as a socket's does (common/internal/shm_links.h): a header's
// ShmInfo (arena address, acknowledgement, released refs) is taken, and a payload claiming to be
// in an arena that is not mapped must be refused. A pull or push is also read as a table
// partition's request (ps/server/table_requests.h) and, when accepted, served by a partition.
// A bundle is split into its parts (SplitBundle), each of which must be a whole message read as
// the others are. (Payloads in a mapped arena are fuzzed against a real arena by
// tests/common/shm_transport_test.cc: a fuzzed input cannot name one.)
#include <zmq.hpp>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "common/internal/wire_codec.h"
#include "common/message.h"
#include "common/shm_arena.h"
#include "job/replica_placement.h"
#include "ps/server/chunk.h"
#include "ps/server/replica_state.h"
#include "ps/server/table_requests.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using towerps::DType;
using towerps::IncomingMessage;
using towerps::Result;
using towerps::StatusCode;
namespace proto = towerps::proto;

const towerps::WireLimits kLimits{.max_header_bytes = 4096,
                                  .max_payload_frames = towerps::fuzz::kMaxFrames,
                                  .max_frame_bytes = 1 << 16,
                                  .max_tensor_rank = 8,
                                  .capnp_nesting_limit = 16};

// Folds what is read into a value, so that no read is optimised away.
uint64_t g_sink = 0;
void Use(uint64_t v) { g_sink = g_sink * 31 + v; }
void Use(capnp::Text::Reader t) {
  Use(t.size());
  for (char c : t) Use(static_cast<uint8_t>(c));
}

void ReadTensors(const IncomingMessage& m) {
  const auto metas = m.header().getTensors();
  FUZZ_CHECK(metas.size() == m.tensors().size(), "tensor list and payloads differ in length");
  for (unsigned i = 0; i < metas.size(); ++i) {
    const auto meta = metas[i];
    const towerps::Tensor& t = m.tensors()[i];
    Use(meta.getVariableId());
    Use(meta.getChunkId());
    Use(meta.getShmRef() + meta.getShmOffset());
    const auto shape = meta.getShape();
    FUZZ_CHECK(shape.size() == t.rank(), "payload " + std::to_string(i) + " rank");
    for (unsigned d = 0; d < shape.size(); ++d) {
      FUZZ_CHECK(shape[d] == t.dim(d), "payload " + std::to_string(i) + " shape");
    }
    const DType dtype = static_cast<DType>(meta.getDtype());  // the decoder knows every value
    FUZZ_CHECK(t.dtype() == dtype, "payload " + std::to_string(i) + " dtype");
    FUZZ_CHECK(meta.getPayloadBytes() == t.byte_size(),
               "payload " + std::to_string(i) + " has " + std::to_string(t.byte_size()) +
                   " bytes but declares " + std::to_string(meta.getPayloadBytes()));
    const auto* bytes = static_cast<const uint8_t*>(t.raw_data());
    for (size_t b = 0; b < t.byte_size(); ++b) Use(bytes[b]);  // ASan checks every byte is there
  }
}

void ReadHeader(proto::Header::Reader h) {
  Use(static_cast<uint16_t>(h.getType()));
  Use(static_cast<uint16_t>(h.getSenderRole()));
  Use(h.getSenderRank());
  Use(h.getJobId());
  Use(h.getRequestId());
  Use(static_cast<uint64_t>(h.getVersion()));
  Use(static_cast<uint16_t>(h.getStatusCode()));
  Use(h.getStatusMessage());
  for (auto v : h.getVariables()) {
    Use(v.getName());
    for (int64_t d : v.getShape()) Use(static_cast<uint64_t>(d));
    Use(static_cast<uint16_t>(v.getDtype()));
    Use(v.getKind());
    Use(std::bit_cast<uint32_t>(v.getDecay()));
    Use(std::bit_cast<uint32_t>(v.getInitScale()));
  }
  Use(h.getConfigFingerprint());
  Use(h.getModelSignature());
  for (auto f : h.getConfigFields()) {
    Use(f.getName());
    Use(f.getValue());
  }
  Use(h.getVariableId());
  Use(h.getChunkId());
  Use(static_cast<uint64_t>(h.getClock()));
  Use(static_cast<uint64_t>(h.getStaleness()));
  const auto s = h.getStats();
  Use(s.getBytesIn() + s.getBytesOut() + s.getGradientsReceived() + s.getUpdatesApplied());
  Use(s.getStaleDropped() + s.getAggregationNanos() + s.getPullsServed());
  Use(s.getRejectedMessages() + s.getCheckpointsWritten());
  Use(static_cast<uint64_t>(s.getMinVersion()));
  Use(static_cast<uint64_t>(s.getMaxVersion()));
  for (uint64_t bucket : s.getStalenessHistogram()) Use(bucket);
  Use(s.getTableRows());
  for (uint64_t bucket : s.getRowStalenessHistogram()) Use(bucket);
  Use(static_cast<uint16_t>(h.getReplicaOp()));
  Use(static_cast<uint32_t>(h.getForWorker()));
  Use(static_cast<uint32_t>(h.getFailedServer()));
  Use(static_cast<uint32_t>(h.getStepGradients()));
  for (uint32_t g : h.getPrimaryGroups()) Use(g);
  const auto shm = h.getShm();
  Use(shm.getHost());
  Use(shm.getPid() + static_cast<uint64_t>(shm.getFd()) + shm.getNonce() + shm.getBytes());
  Use(shm.getMapped());
  for (uint64_t r : shm.getReleased()) Use(r);
  // What the client makes of an error reply, and what the server logs.
  Use(towerps::StatusFromHeader(h).message().size());
  Use(towerps::MessageTypeName(h.getType()).size());
}

void ReadReplicaState(const IncomingMessage& m) {
  if (m.type() != proto::MessageType::REPLICATE) return;
  towerps::ps::JobConfig job;
  job.workers = 3;
  job.ps_replicas = 2;
  const towerps::ps::ChunkSpec spec{0, 0, 0, 4, 16, 0};
  Result<towerps::ps::ChunkState> state = towerps::ps::ReadReplicaState(m, spec, job);
  if (!state.ok()) {
    FUZZ_CHECK(state.status().code() == StatusCode::kProtocol,
               "a bad replicated state must be kProtocol: " + state.status().ToString());
    return;
  }
  towerps::ps::Chunk chunk(spec, job);
  chunk.Restore(*state);
  towerps::ps::ShardCounters counters;
  if (!chunk.initialized()) return;
  towerps::Tensor g = towerps::Tensor::Empty({4});
  for (int i = 0; i < 4; ++i) g.f32()[i] = 0.25f * static_cast<float>(i);
  for (int w = 0; w < 3; ++w) (void)chunk.Push(w, chunk.version(), 0, g, &counters);
  Use(static_cast<uint64_t>(chunk.version()));
}

// A pull or push read as a table partition's request (ps/server/table_requests.h), for partition 0
// of a bounded table of one server: what a server reads of it is checked (kInvalidArgument
// otherwise), and what it accepts is applied: rows looked up, the push through the rule.
void ReadTableRequest(const IncomingMessage& m) {
  if (m.type() != proto::MessageType::PULL && m.type() != proto::MessageType::PUSH) return;
  towerps::ps::JobConfig job;
  job.workers = 3;
  job.mode = m.header().getClock() % 2 == 0 ? towerps::ps::UpdateMode::kSync
                                            : towerps::ps::UpdateMode::kAsync;
  const towerps::ps::VariableSpec var = towerps::ps::TableVariable("t", 1000, 4, 0.1f);
  const auto placement = towerps::ps::ChunkPlacement::Compute({var}, 1, job.partition_bytes);
  FUZZ_CHECK(placement.ok(), "the table's placement");
  towerps::ps::TableChunk table(placement->chunks()[0], var, job);
  auto refused = [](const towerps::Status& s, const char* what) {
    FUZZ_CHECK(
        s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kFailedPrecondition,
        std::string(what) + " refused with " + s.ToString());
  };
  towerps::Tensor ids;
  if (m.type() == proto::MessageType::PULL) {
    Result<towerps::Tensor> pulled = towerps::ps::ReadPullIds(m, table);
    if (!pulled.ok()) return refused(pulled.status(), "a pull");
    if (m.header().getEveryRow()) return;
    ids = *pulled;
  } else {
    Result<towerps::ps::RowPush> push = towerps::ps::ReadRowPush(m, table);
    if (!push.ok()) return refused(push.status(), "a push");
    towerps::ps::ShardCounters counters;
    push->contribution.sender_checked_finite = m.header().getFinite();  // as Shard::HandlePush
    Result<towerps::ps::PushOutcome> out =
        table.Push(push->contribution, &counters, m.header().getReplacesPending());
    if (!out.ok()) refused(out.status(), "a push's contribution");
    ids = push->next_ids.defined() ? push->next_ids : push->contribution.ids;
    if (!out.ok()) return;
  }
  towerps::Tensor rows, updates;
  if (table.Lookup(ids, table.version(), &rows, &updates).ok()) {
    FUZZ_CHECK(rows.num_elements() == ids.num_elements() * 4, "rows for every id");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<zmq::message_t> frames;
  for (const std::string& f : towerps::fuzz::SplitFrames(data, size)) {
    frames.emplace_back(f.data(), f.size());
  }
  static towerps::internal::ShmLinks* links = [] {
    auto arena = towerps::ShmArena::Create(1 << 20);
    return new towerps::internal::ShmLinks(arena.ok() ? *arena : nullptr);
  }();
  Result<IncomingMessage> m =
      towerps::internal::DecodeMessage("fuzz-peer", std::move(frames), kLimits, links);
  if (!m.ok()) {
    FUZZ_CHECK(m.status().code() == StatusCode::kProtocol,
               "a bad message must be kProtocol: " + m.status().ToString());
    return 0;
  }
  FUZZ_CHECK(m->shared_payloads() == 0, "a payload in an arena that is not mapped was accepted");
  ReadHeader(m->header());
  ReadTensors(*m);
  ReadReplicaState(*m);
  ReadTableRequest(*m);
  if (m->type() != proto::MessageType::BUNDLE) return 0;
  // A bundle's parts, as the server (and the client, for replies) reads them.
  Result<std::vector<IncomingMessage>> parts = towerps::SplitBundle(std::move(*m), kLimits);
  if (!parts.ok()) {
    FUZZ_CHECK(parts.status().code() == StatusCode::kProtocol,
               "a bad bundle must be kProtocol: " + parts.status().ToString());
    return 0;
  }
  for (const IncomingMessage& part : *parts) {
    FUZZ_CHECK(part.type() != proto::MessageType::BUNDLE, "a bundle in a bundle was accepted");
    ReadHeader(part.header());
    ReadTensors(part);
    ReadReplicaState(part);
    ReadTableRequest(part);
  }
  return 0;
}
