// A table's parts (ps/client/part_requests.h): its partitions. A push goes to every partition
// with the rows of its ids there (views of the request's tensors when they are consecutive,
// copies otherwise); a pull only to the partitions holding some of its ids, whose rows come back
// in the request's order.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>

#include "ps/client/part_requests.h"

namespace towerps::ps {
namespace {

using Positions = std::vector<std::vector<uint32_t>>;  // per partition, positions in a request

// The partitions of table `table_id`; kInvalidArgument naming `call` for another kind of
// variable or ids that are not a uint64 vector.
Status CheckTableCall(std::span<const ChunkSpec> partitions, uint32_t table_id, const Tensor& ids,
                      const char* call) {
  if (partitions.empty() || !partitions[0].is_table()) {
    return InvalidArgumentError(std::string(call) + " of variable " + std::to_string(table_id) +
                                ", which is not a table");
  }
  if (ids.dtype() != DType::kUInt64 || ids.rank() != 1) {
    return InvalidArgumentError(std::string(call) + " of table " + std::to_string(table_id) +
                                ": ids must be a uint64 vector, got " + DTypeName(ids.dtype()) +
                                " " + ShapeToString(ids.shape()));
  }
  return Status::Ok();
}

// Where each of a request's ids goes: per partition, the positions of its ids in the request.
std::vector<std::vector<uint32_t>> ByPartition(const Tensor& ids, int partitions) {
  std::vector<std::vector<uint32_t>> where(static_cast<size_t>(partitions));
  const uint64_t* id = ids.u64();
  const auto n = static_cast<uint32_t>(ids.num_elements());
  if (partitions == 1) {
    where[0].resize(n);
    std::iota(where[0].begin(), where[0].end(), 0u);
    return where;
  }
  for (uint32_t i = 0; i < n; ++i) {
    where[static_cast<size_t>(TablePartitionOf(id[i], partitions))].push_back(i);
  }
  return where;
}

// A push's positions per partition, each in increasing order of id; kInvalidArgument naming
// the table for an id that appears twice.
Result<std::vector<std::vector<uint32_t>>> PushOrder(const PushRequest& push, int partitions,
                                                     const char* call) {
  std::vector<std::vector<uint32_t>> where = ByPartition(push.ids, partitions);
  const uint64_t* id = push.ids.u64();
  auto before = [id](uint32_t a, uint32_t b) { return id[a] < id[b]; };
  for (std::vector<uint32_t>& w : where) {
    // As given when the ids are grouped (UniqueIds), else sorted.
    if (!std::is_sorted(w.begin(), w.end(), before)) std::sort(w.begin(), w.end(), before);
    for (size_t i = 1; i < w.size(); ++i) {
      if (id[w[i]] == id[w[i - 1]]) {
        return InvalidArgumentError(std::string(call) + " of table " +
                                    std::to_string(push.variable_id) + ": id " +
                                    std::to_string(id[w[i]]) +
                                    " appears twice; sum a batch's gradients of each id first "
                                    "(job/row_batch.h)");
      }
    }
  }
  return where;
}

// Whether increasing `positions` are consecutive (Deduplicate groups a partition's ids, so a
// partition's positions are).
bool IsRun(const std::vector<uint32_t>& positions) {
  return positions.empty() || positions.back() - positions.front() + 1 == positions.size();
}

// Rows `positions` of `t` (along dimension 0): a view when they are consecutive, else a copy.
Tensor Rows(const Tensor& t, const std::vector<uint32_t>& positions) {
  const auto n = static_cast<int64_t>(positions.size());
  if (IsRun(positions)) {
    const int64_t begin = n == 0 ? 0 : positions.front();
    return t.Slice(begin, begin + n);
  }
  Shape shape = t.shape();
  shape[0] = n;
  Tensor copy = Tensor::Empty(shape, t.dtype());
  const size_t row_bytes = t.byte_size() / static_cast<size_t>(t.dim(0));
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(static_cast<char*>(copy.raw_data()) + static_cast<size_t>(i) * row_bytes,
                static_cast<const char*>(t.raw_data()) + positions[i] * row_bytes, row_bytes);
  }
  return copy;
}

// A partition's pull reply: kProtocol unless it holds `n` rows of `dim` and their counts (any
// n, and their ids, for `every_row`).
Status CheckRowsReply(const Result<IncomingMessage>& reply, int64_t n, int64_t dim,
                      bool every_row) {
  if (!reply.ok()) return reply.status();
  const auto& t = reply->tensors();
  if (every_row && t.size() == 3) n = t[2].num_elements();
  // Counts and ids are vectors: Concat joins replies along their one dimension.
  if (t.size() == (every_row ? 3u : 2u) && t[0].dtype() == DType::kFloat32 &&
      t[0].num_elements() == n * dim && t[1].dtype() == DType::kUInt32 && t[1].rank() == 1 &&
      t[1].num_elements() == n &&
      (!every_row || (t[2].dtype() == DType::kUInt64 && t[2].rank() == 1))) {
    return Status::Ok();
  }
  return ProtocolError("a pull reply of table " + std::to_string(reply->header().getVariableId()) +
                       " partition " + std::to_string(reply->header().getChunkId()) +
                       " does not hold " + std::to_string(n) + " rows of " + std::to_string(dim));
}

// `a` then `b` along dimension 0 (`a` undefined or empty: `b` itself).
Tensor Concat(const Tensor& a, const Tensor& b) {
  if (!a.defined() || a.num_elements() == 0) return b;
  Shape shape = a.shape();
  shape[0] += b.dim(0);
  Tensor out = Tensor::Empty(shape, a.dtype());
  std::memcpy(out.raw_data(), a.raw_data(), a.byte_size());
  std::memcpy(static_cast<char*>(out.raw_data()) + a.byte_size(), b.raw_data(), b.byte_size());
  return out;
}

// A checked pull reply's rows and counts into `out`, at `positions`. When they are all of the
// request, in order, the reply's own tensors become the result: no copy.
void MergeRows(const IncomingMessage& reply, const std::vector<uint32_t>& positions, int64_t dim,
               int64_t total, PulledVariable& out) {
  const auto& t = reply.tensors();
  if (t.size() == 3) {  // every row: appended
    out.rows = Concat(out.rows, t[0].Reshape({t[2].num_elements(), dim}));
    out.updates = Concat(out.updates, t[1]);
    out.ids = Concat(out.ids, t[2]);
    return;
  }
  const auto n = static_cast<int64_t>(positions.size());
  if (n == total && (n == 0 || positions.back() == static_cast<uint32_t>(n - 1))) {
    out.rows = t[0].Reshape({n, dim});
    out.updates = t[1];
    return;
  }
  if (!out.rows.defined() || out.rows.dim(0) != total) {
    out.rows = Tensor::Empty({total, dim});
    out.updates = Tensor::Empty({total}, DType::kUInt32);
  }
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  if (n > 0 && IsRun(positions)) {  // one copy
    std::memcpy(out.rows.f32() + positions.front() * dim, t[0].f32(), n * row_bytes);
    std::memcpy(out.updates.u32() + positions.front(), t[1].u32(), n * sizeof(uint32_t));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out.rows.f32() + positions[static_cast<size_t>(i)] * dim, t[0].f32() + i * dim,
                row_bytes);
    out.updates.u32()[positions[static_cast<size_t>(i)]] = t[1].u32()[i];
  }
}

// A push's gradients, checked against its ids and the table's dim.
Status CheckPushShapes(const PushRequest& push, int64_t dim, const char* call) {
  const int64_t n = push.ids.num_elements();
  const Tensor& g = push.gradient;
  const Tensor& u = push.pulled_updates;
  if (g.dtype() == DType::kFloat32 && g.rank() == 2 && g.dim(0) == n && g.dim(1) == dim &&
      u.dtype() == DType::kUInt32 && u.rank() == 1 && u.dim(0) == n) {
    return Status::Ok();
  }
  return InvalidArgumentError(std::string(call) + " of table " + std::to_string(push.variable_id) +
                              ": " + std::to_string(n) + " ids need gradients of float32 [" +
                              std::to_string(n) + ", " + std::to_string(dim) +
                              "] and pulled update counts of uint32 [" + std::to_string(n) +
                              "], got " + DTypeName(g.dtype()) + " " + ShapeToString(g.shape()) +
                              " and " + DTypeName(u.dtype()) + " " + ShapeToString(u.shape()));
}

class TableParts final : public PartRequests {
 public:
  TableParts(std::span<const ChunkSpec> partitions, const PullRequest* pull, Positions push_at,
             Positions pull_at)
      : partitions_(partitions.begin(), partitions.end()),
        has_pull_(pull != nullptr),
        every_row_(pull != nullptr && pull->every_row),
        push_at_(std::move(push_at)),
        pull_at_(std::move(pull_at)),
        dim_(partitions[0].table_dim),
        total_(pull != nullptr && !pull->every_row ? pull->ids.num_elements() : 0),
        // No ids, or every row: every partition is asked (with no ids).
        every_partition_(pull != nullptr && (pull->every_row || pull->ids.num_elements() == 0)) {}

  int pulled_parts() const override {
    if (!has_pull_) return 0;
    if (every_partition_) return static_cast<int>(partitions_.size());
    return static_cast<int>(
        std::count_if(pull_at_.begin(), pull_at_.end(), [](const auto& w) { return !w.empty(); }));
  }

  bool Pulls(size_t p) const override {
    return has_pull_ && (every_partition_ || !pull_at_[p].empty());
  }

  void AddPayload(size_t p, const PushRequest* push, const PullRequest* pull,
                  OutgoingMessage& m) const override {
    const uint32_t id = partitions_[p].variable_id, part = partitions_[p].chunk_id;
    if (push != nullptr) {
      m.AddTensor(Rows(push->ids, push_at_[p]), id, part);
      m.AddTensor(Rows(push->gradient, push_at_[p]), id, part);
      m.AddTensor(Rows(push->pulled_updates, push_at_[p]), id, part);
    }
    if (pull != nullptr && Pulls(p)) {
      m.AddTensor(every_row_ ? Tensor::Empty({0}, DType::kUInt64) : Rows(pull->ids, pull_at_[p]),
                  id, part);
    }
  }

  Status CheckReply(size_t p, const Result<IncomingMessage>& r) const override {
    return CheckRowsReply(r, static_cast<int64_t>(pull_at_[p].size()), dim_, every_row_);
  }

  void Merge(size_t p, const IncomingMessage& reply, PulledVariable& out) const override {
    MergeRows(reply, pull_at_[p], dim_, total_, out);
  }

 private:
  const std::vector<ChunkSpec> partitions_;
  const bool has_pull_, every_row_;
  const Positions push_at_;  // per partition, the push's positions there (none without a push)
  const Positions pull_at_;  // per partition, the pull's ids' positions there
  const int64_t dim_, total_;
  const bool every_partition_;
};

}  // namespace

Result<std::shared_ptr<const PartRequests>> MakeTableParts(std::span<const ChunkSpec> partitions,
                                                           const PushRequest* push,
                                                           const PullRequest* pull,
                                                           const char* call) {
  const uint32_t table_id = push != nullptr ? push->variable_id : pull->variable_id;
  const int P = static_cast<int>(partitions.size());
  Positions push_at(static_cast<size_t>(P)), pull_at(static_cast<size_t>(P));
  if (push != nullptr) {
    TOWERPS_RETURN_IF_ERROR(CheckTableCall(partitions, table_id, push->ids, call));
    TOWERPS_RETURN_IF_ERROR(CheckPushShapes(*push, partitions[0].table_dim, call));
    TOWERPS_ASSIGN_OR_RETURN(push_at, PushOrder(*push, P, call));
  }
  if (pull != nullptr) {
    const Tensor& ids = pull->every_row ? Tensor::Empty({0}, DType::kUInt64) : pull->ids;
    TOWERPS_RETURN_IF_ERROR(CheckTableCall(partitions, table_id, ids, call));
    if (!pull->every_row) pull_at = ByPartition(ids, P);
  }
  return std::shared_ptr<const PartRequests>(
      std::make_shared<TableParts>(partitions, pull, std::move(push_at), std::move(pull_at)));
}

}  // namespace towerps::ps
