#include "ps/server/replica_state.h"

#include <string>

#include "ps/server/optimizer.h"
#include "ps/server/row_optimizer.h"

namespace towerps::ps {
namespace {

// What both kinds of replicated state carry alike: one clock per worker, and the pending
// gradients' workers with a refused flag each (no more than the workers); with `head`'s
// version and update count, counts a holder can hold. kProtocol otherwise.
Status ReadClocksAndPendingShape(const proto::ReplicaState::Reader& r, const JobConfig& job,
                                 const std::string& where, const HolderStateHead& head,
                                 std::vector<int64_t>* clocks) {
  if (r.getWorkerClocks().size() != static_cast<unsigned>(job.workers)) {
    return ProtocolError(where + ": " + std::to_string(r.getWorkerClocks().size()) +
                         " worker clocks for " + std::to_string(job.workers) + " workers");
  }
  for (int64_t c : r.getWorkerClocks()) clocks->push_back(c);
  const auto workers = r.getPendingWorkers();
  if (workers.size() != r.getPendingRefused().size() ||
      workers.size() > static_cast<unsigned>(job.workers)) {
    return ProtocolError(where + ": malformed pending gradients");
  }
  if (!UpdateRule::CountsInRange(head.version, head.updates, *clocks)) {
    return ProtocolError(where + ": version, update count or worker clocks out of range");
  }
  return Status::Ok();
}

// The fields every replicated state starts with (its pending gradients are of this version).
void WriteVersionsAndClocks(int64_t version, int64_t updates, int64_t previous_version,
                            const std::vector<int64_t>& worker_clocks,
                            proto::ReplicaState::Builder& r) {
  r.setVersion(version);
  r.setUpdates(updates);
  r.setPreviousVersion(previous_version);
  auto clocks = r.initWorkerClocks(static_cast<unsigned>(worker_clocks.size()));
  for (size_t i = 0; i < worker_clocks.size(); ++i) clocks.set(i, worker_clocks[i]);
  r.setPendingStep(version);
}

}  // namespace

OutgoingMessage NewReplicateMessage(const ChunkSpec& spec, proto::ReplicaOp op) {
  OutgoingMessage m(proto::MessageType::REPLICATE);
  auto h = m.header();
  h.setSenderRole(proto::Role::SERVER);
  h.setVariableId(spec.variable_id);
  h.setChunkId(spec.chunk_id);
  h.setReplicaOp(op);
  return m;
}

void AddReplicaState(const ChunkState& s, OutgoingMessage* msg) {
  auto r = msg->header().initReplicaState();
  WriteVersionsAndClocks(s.version, s.updates, s.previous_version, s.worker_clocks, r);
  r.setSlots(static_cast<uint32_t>(s.slots.size()));
  auto workers = r.initPendingWorkers(static_cast<unsigned>(s.pending.size()));
  auto refused = r.initPendingRefused(static_cast<unsigned>(s.pending.size()));
  unsigned i = 0;
  for (const auto& [rank, g] : s.pending) {
    workers.set(i, rank);
    refused.set(i, g.num_elements() == 0);
    ++i;
  }
  if (s.version == kNoVersion) return;  // nothing held yet: no tensors
  msg->AddTensor(s.values, s.variable_id, s.chunk_id);
  for (const Tensor& slot : s.slots) msg->AddTensor(slot, s.variable_id, s.chunk_id);
  if (s.previous_version != kNoVersion)
    msg->AddTensor(s.previous_values, s.variable_id, s.chunk_id);
  for (const auto& [rank, g] : s.pending) {
    if (g.num_elements() > 0) msg->AddTensor(g, s.variable_id, s.chunk_id);
  }
}

Result<ChunkState> ReadReplicaState(const IncomingMessage& msg, const ChunkSpec& spec,
                                    const JobConfig& job) {
  auto r = msg.header().getReplicaState();
  const std::string where = "replicated state of variable " + std::to_string(spec.variable_id) +
                            " chunk " + std::to_string(spec.chunk_id);
  ChunkState s;
  static_cast<HolderStateHead&>(s) = {spec.variable_id, spec.chunk_id, r.getVersion(),
                                      r.getUpdates()};
  s.previous_version = r.getPreviousVersion();
  if (s.version < kNoVersion || s.updates < 0 || s.previous_version < kNoVersion ||
      (s.previous_version != kNoVersion && s.previous_version >= s.version)) {
    return ProtocolError(where + ": inconsistent versions");
  }
  TOWERPS_RETURN_IF_ERROR(ReadClocksAndPendingShape(r, job, where, s, &s.worker_clocks));
  auto workers = r.getPendingWorkers();
  auto refused = r.getPendingRefused();
  const auto& tensors = msg.tensors();
  if (s.version == kNoVersion) {
    if (!tensors.empty() || workers.size() != 0) {
      return ProtocolError(where + ": values for a chunk with no version");
    }
    return s;
  }
  const size_t slots = static_cast<size_t>(OptimizerSlots(job.optimizer.kind));
  size_t expected = 1 + slots + (s.previous_version != kNoVersion ? 1 : 0);
  for (unsigned i = 0; i < refused.size(); ++i) expected += refused[i] ? 0 : 1;
  if (r.getSlots() != slots || tensors.size() != expected) {
    return ProtocolError(where + ": " + std::to_string(tensors.size()) + " tensors, expected " +
                         std::to_string(expected));
  }
  for (const Tensor& t : tensors) {
    if (t.dtype() != DType::kFloat32 || t.num_elements() != spec.num_elements) {
      return ProtocolError(where + ": a tensor of " + std::to_string(t.num_elements()) +
                           " elements, expected " + std::to_string(spec.num_elements));
    }
  }
  size_t next = 0;
  s.values = tensors[next++];
  for (size_t i = 0; i < slots; ++i) s.slots.push_back(tensors[next++]);
  if (s.previous_version != kNoVersion) s.previous_values = tensors[next++];
  for (unsigned i = 0; i < workers.size(); ++i) {
    const int rank = workers[i];
    if (rank < 0 || rank >= job.workers || s.pending.count(rank) != 0) {
      return ProtocolError(where + ": pending gradient of worker " + std::to_string(rank));
    }
    s.pending[rank] = refused[i] ? Tensor() : tensors[next++];
  }
  return s;
}

void AddTableReplicaState(const TableState& s, OutgoingMessage* msg) {
  auto r = msg->header().initReplicaState();
  WriteVersionsAndClocks(s.version, s.updates, s.previous_version, s.worker_clocks, r);
  r.setSlots(static_cast<uint32_t>(s.slots));
  auto workers = r.initPendingWorkers(static_cast<unsigned>(s.pending.size()));
  auto refused = r.initPendingRefused(static_cast<unsigned>(s.pending.size()));
  unsigned i = 0;
  for (const auto& [rank, c] : s.pending) {
    workers.set(i, rank);
    refused.set(i, c.refused);
    ++i;
  }
  msg->AddTensor(s.ids, s.variable_id, s.chunk_id);
  msg->AddTensor(s.rows, s.variable_id, s.chunk_id);
  msg->AddTensor(s.row_updates, s.variable_id, s.chunk_id);
  msg->AddTensor(s.row_last_update, s.variable_id, s.chunk_id);
  msg->AddTensor(s.admission_ids, s.variable_id, s.chunk_id);
  msg->AddTensor(s.admission_counts, s.variable_id, s.chunk_id);
  msg->AddTensor(s.admission_last_seen, s.variable_id, s.chunk_id);
  if (s.previous_version != kNoVersion) {
    msg->AddTensor(s.previous_ids, s.variable_id, s.chunk_id);
    msg->AddTensor(s.previous_values, s.variable_id, s.chunk_id);
  }
  for (const auto& [rank, c] : s.pending) {
    if (c.refused) continue;
    msg->AddTensor(c.ids, s.variable_id, s.chunk_id);
    msg->AddTensor(c.gradient, s.variable_id, s.chunk_id);
    msg->AddTensor(c.pulled_updates, s.variable_id, s.chunk_id);
  }
}

Result<TableState> ReadTableReplicaState(const IncomingMessage& msg, const ChunkSpec& spec,
                                         const JobConfig& job) {
  auto r = msg.header().getReplicaState();
  const std::string where = "replicated state of table variable " +
                            std::to_string(spec.variable_id) + " partition " +
                            std::to_string(spec.chunk_id);
  TableState s;
  static_cast<HolderStateHead&>(s) = {spec.variable_id, spec.chunk_id, r.getVersion(),
                                      r.getUpdates()};
  s.previous_version = r.getPreviousVersion();
  s.dim = spec.table_dim;
  s.slots = static_cast<int>(r.getSlots());
  if (s.version < 0 || s.updates < 0 || s.previous_version < kNoVersion ||
      s.previous_version >= s.version || s.slots != RowSlots(job.table_optimizer.kind)) {
    return ProtocolError(where + ": inconsistent versions or optimizer slots");
  }
  TOWERPS_RETURN_IF_ERROR(ReadClocksAndPendingShape(r, job, where, s, &s.worker_clocks));
  auto workers = r.getPendingWorkers();
  auto refused = r.getPendingRefused();
  const auto& t = msg.tensors();
  size_t expected = 7 + (s.previous_version != kNoVersion ? 2 : 0);
  for (unsigned i = 0; i < refused.size(); ++i) expected += refused[i] ? 0 : 3;
  if (t.size() != expected) {
    return ProtocolError(where + ": " + std::to_string(t.size()) + " tensors, expected " +
                         std::to_string(expected));
  }
  size_t next = 0;
  s.ids = t[next++];
  s.rows = t[next++];
  s.row_updates = t[next++];
  s.row_last_update = t[next++];
  s.admission_ids = t[next++];
  s.admission_counts = t[next++];
  s.admission_last_seen = t[next++];
  if (s.previous_version != kNoVersion) {
    s.previous_ids = t[next++];
    s.previous_values = t[next++];
  }
  for (unsigned i = 0; i < workers.size(); ++i) {
    const int rank = workers[i];
    if (rank < 0 || rank >= job.workers || s.pending.count(rank) != 0) {
      return ProtocolError(where + ": pending push of worker " + std::to_string(rank));
    }
    Contribution c{.worker = rank, .base_version = s.version, .refused = refused[i]};
    if (!c.refused) {
      c.ids = t[next++];
      c.gradient = t[next++];
      c.pulled_updates = t[next++];
    }
    s.pending[rank] = std::move(c);
  }
  return s;
}

void AddHolderState(const HolderState& state, OutgoingMessage* msg) {
  if (const auto* chunk = std::get_if<ChunkState>(&state)) {
    AddReplicaState(*chunk, msg);
  } else {
    AddTableReplicaState(std::get<TableState>(state), msg);
  }
}

Result<HolderState> ReadHolderState(const IncomingMessage& msg, const ChunkSpec& spec,
                                    const JobConfig& job) {
  if (spec.is_table()) {
    TOWERPS_ASSIGN_OR_RETURN(TableState state, ReadTableReplicaState(msg, spec, job));
    return HolderState(std::move(state));
  }
  TOWERPS_ASSIGN_OR_RETURN(ChunkState state, ReadReplicaState(msg, spec, job));
  return HolderState(std::move(state));
}

}  // namespace towerps::ps
