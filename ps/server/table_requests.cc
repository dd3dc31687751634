#include "ps/server/table_requests.h"

#include <string>

namespace towerps::ps {

namespace {

// Ids may repeat, so the rows a pull asks for are bounded by what one reply frame may carry.
Status CheckPullSize(const Tensor& ids, const TableChunk& table) {
  const uint64_t frame_bytes = WireLimits{}.max_frame_bytes;
  const uint64_t row_bytes = static_cast<uint64_t>(table.spec().table_dim) * 4;
  if (static_cast<uint64_t>(ids.num_elements()) <= frame_bytes / row_bytes) {
    return Status::Ok();
  }
  return InvalidArgumentError(
      "a pull of " + std::to_string(ids.num_elements()) + " rows of table variable " +
      std::to_string(table.spec().variable_id) + " of dim " +
      std::to_string(table.spec().table_dim) + " is over one reply frame's " +
      std::to_string(frame_bytes) + " bytes: pull fewer ids at once");
}

}  // namespace

Result<Tensor> ReadPullIds(const IncomingMessage& msg, const TableChunk& table) {
  if (msg.tensors().size() != 1) {
    return InvalidArgumentError(
        "a pull of rows of table variable " + std::to_string(table.spec().variable_id) +
        " carries " + std::to_string(msg.tensors().size()) + " tensors, expected 1 (the ids)");
  }
  const Tensor& ids = msg.tensors()[0];
  if (msg.header().getEveryRow()) return ids;  // not read
  TOWERPS_RETURN_IF_ERROR(table.CheckIds(ids, /*sorted=*/false));
  TOWERPS_RETURN_IF_ERROR(CheckPullSize(ids, table));
  return ids;
}

Result<RowPush> ReadRowPush(const IncomingMessage& msg, const TableChunk& table) {
  auto h = msg.header();
  const size_t expected = h.getThenPull() ? 4 : 3;
  if (msg.tensors().size() != expected) {
    return InvalidArgumentError(
        "a push of rows of table variable " + std::to_string(table.spec().variable_id) +
        " carries " + std::to_string(msg.tensors().size()) + " tensors, expected " +
        std::to_string(expected) + " (ids, gradient rows, pulled update counts" +
        (h.getThenPull() ? std::string(", the ids to pull next)") : ")"));
  }
  RowPush push;
  push.contribution = Contribution{.worker = static_cast<int>(h.getSenderRank()),
                                   .base_version = h.getVersion(),
                                   .clock = h.getClock(),
                                   .gradient = msg.tensors()[1],
                                   .ids = msg.tensors()[0],
                                   .pulled_updates = msg.tensors()[2]};
  if (h.getThenPull()) {
    TOWERPS_RETURN_IF_ERROR(table.CheckIds(msg.tensors()[3], /*sorted=*/false));
    TOWERPS_RETURN_IF_ERROR(CheckPullSize(msg.tensors()[3], table));
    push.next_ids = msg.tensors()[3];
  }
  return push;
}

}  // namespace towerps::ps
