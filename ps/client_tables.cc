// The table half of ps::Client (ps/client.h): pulls and pushes of a table's rows by id, one
// request per partition (ps/shard_tables.cc describes the messages).
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>

#include "ps/call_join.h"
#include "ps/client.h"
#include "ps/client_impl.h"

namespace towerps::ps {
namespace {

using internal::Join;
using internal::MergePush;
using internal::Ready;

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
  for (int64_t i = 0; i < ids.num_elements(); ++i) {
    where[static_cast<size_t>(TablePartitionOf(id[i], partitions))].push_back(
        static_cast<uint32_t>(i));
  }
  return where;
}

// Rows `positions` of `t` (along dimension 0): a view when they are consecutive, else a copy.
Tensor Rows(const Tensor& t, const std::vector<uint32_t>& positions) {
  const auto n = static_cast<int64_t>(positions.size());
  if (n == 0 || positions.back() - positions.front() + 1 == positions.size()) {
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

// A partition's pull reply: kProtocol unless it holds `n` rows of `dim` and their counts.
Status CheckRowsReply(const Result<IncomingMessage>& reply, int64_t n, int64_t dim) {
  if (!reply.ok()) return reply.status();
  const auto& t = reply->tensors();
  if (t.size() == 2 && t[0].dtype() == DType::kFloat32 && t[0].num_elements() == n * dim &&
      t[1].dtype() == DType::kUInt32 && t[1].num_elements() == n) {
    return Status::Ok();
  }
  return ProtocolError("a pull reply of table " + std::to_string(reply->header().getVariableId()) +
                       " partition " + std::to_string(reply->header().getChunkId()) +
                       " does not hold " + std::to_string(n) + " rows of " + std::to_string(dim));
}

// A checked pull reply's rows and counts, to `positions` of `out`.
void CopyRows(const IncomingMessage& reply, const std::vector<uint32_t>& positions, int64_t dim,
              PulledRows& out) {
  const auto& t = reply.tensors();
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  for (size_t i = 0; i < positions.size(); ++i) {
    std::memcpy(out.rows.f32() + positions[i] * dim, t[0].f32() + i * dim, row_bytes);
    out.updates.u32()[positions[i]] = t[1].u32()[i];
  }
}

}  // namespace

std::future<Result<PulledRows>> Client::PullRows(const RowPullRequest& pull) {
  const auto partitions = placement().ChunksOf(pull.table_id);
  if (Status bad = CheckTableCall(partitions, pull.table_id, pull.ids, "PullRows"); !bad.ok()) {
    return Ready<PulledRows>(bad);
  }
  const int64_t dim = partitions[0].table_dim;
  const int64_t n = pull.ids.num_elements();
  auto where = std::make_shared<std::vector<std::vector<uint32_t>>>(
      ByPartition(pull.ids, static_cast<int>(partitions.size())));
  const auto asked = static_cast<int>(
      std::count_if(where->begin(), where->end(), [](const auto& w) { return !w.empty(); }));
  auto join = std::make_shared<Join<PulledRows>>(std::max(asked, 1));
  {
    MutexLock lock(&join->mu);
    join->value.rows = Tensor::Empty({n, dim});
    join->value.updates = Tensor::Empty({n}, DType::kUInt32);
  }
  auto future = join->promise.get_future();
  if (asked == 0) {  // no ids: nothing to wait for
    join->Part(Status::Ok(),
               [&](PulledRows&, LowestVersion& lowest) { lowest.Add(pull.min_version); });
    return future;
  }
  for (size_t p = 0; p < partitions.size(); ++p) {
    if ((*where)[p].empty()) continue;
    OutgoingMessage m = impl_->NewMessage(proto::MessageType::PULL);
    m.header().setVersion(pull.min_version);
    m.header().setClock(pull.clock);
    m.header().setExactVersion(pull.exact);
    m.AddTensor(Rows(pull.ids, (*where)[p]), pull.table_id, static_cast<uint32_t>(p));
    impl_->SendToChunk(
        partitions[p], std::move(m), [join, where, p, dim](Result<IncomingMessage> r) {
          const std::vector<uint32_t>& positions = (*where)[p];
          const Status status = CheckRowsReply(r, static_cast<int64_t>(positions.size()), dim);
          join->Part(status, [&](PulledRows& out, LowestVersion& lowest) {
            CopyRows(*r, positions, dim, out);
            const int64_t version = r->header().getVersion();
            lowest.Add(version);
            out.max_version = std::max(out.max_version, version);
            const int64_t clock = r->header().getClock();
            out.min_clock = out.min_clock < 0 ? clock : std::min(out.min_clock, clock);
          });
        });
  }
  return future;
}

std::future<Result<PushReport>> Client::PushRows(const RowPushRequest& push) {
  const auto partitions = placement().ChunksOf(push.table_id);
  if (Status bad = CheckTableCall(partitions, push.table_id, push.ids, "PushRows"); !bad.ok()) {
    return Ready<PushReport>(bad);
  }
  const int64_t dim = partitions[0].table_dim;
  const int64_t n = push.ids.num_elements();
  const Tensor& g = push.gradients;
  const Tensor& u = push.pulled_updates;
  if (g.dtype() != DType::kFloat32 || g.rank() != 2 || g.dim(0) != n || g.dim(1) != dim ||
      u.dtype() != DType::kUInt32 || u.rank() != 1 || u.dim(0) != n) {
    return Ready<PushReport>(InvalidArgumentError(
        "PushRows of table " + std::to_string(push.table_id) + ": " + std::to_string(n) +
        " ids need gradients of float32 [" + std::to_string(n) + ", " + std::to_string(dim) +
        "] and pulled update counts of uint32 [" + std::to_string(n) + "], got " +
        DTypeName(g.dtype()) + " " + ShapeToString(g.shape()) + " and " + DTypeName(u.dtype()) +
        " " + ShapeToString(u.shape())));
  }
  std::vector<std::vector<uint32_t>> where =
      ByPartition(push.ids, static_cast<int>(partitions.size()));
  const uint64_t* id = push.ids.u64();
  for (std::vector<uint32_t>& w : where) {
    // Increasing ids within each partition: as given when grouped (UniqueIds), else sorted.
    if (!std::is_sorted(w.begin(), w.end(),
                        [&](uint32_t a, uint32_t b) { return id[a] < id[b]; })) {
      std::sort(w.begin(), w.end(), [&](uint32_t a, uint32_t b) { return id[a] < id[b]; });
    }
    for (size_t i = 1; i < w.size(); ++i) {
      if (id[w[i]] == id[w[i - 1]]) {
        return Ready<PushReport>(
            InvalidArgumentError("PushRows of table " + std::to_string(push.table_id) + ": id " +
                                 std::to_string(id[w[i]]) +
                                 " appears twice; sum a batch's gradients of each id "
                                 "first (ps/row_batch.h)"));
      }
    }
  }
  auto join = std::make_shared<Join<PushReport>>(static_cast<int>(partitions.size()));
  auto future = join->promise.get_future();
  auto applied = std::make_shared<int>(0);  // touched only in the merge, under the join's lock
  for (size_t p = 0; p < partitions.size(); ++p) {
    OutgoingMessage m = impl_->NewMessage(proto::MessageType::PUSH);
    m.header().setVersion(push.version);
    m.header().setClock(push.clock);
    m.header().setReplacesPending(push.replace_pending);
    const auto part = static_cast<uint32_t>(p);
    m.AddTensor(Rows(push.ids, where[p]), push.table_id, part);
    m.AddTensor(Rows(g, where[p]), push.table_id, part);
    m.AddTensor(Rows(u, where[p]), push.table_id, part);
    impl_->SendToChunk(partitions[p], std::move(m), [join, applied](Result<IncomingMessage> r) {
      const int64_t v = r.ok() ? r->header().getVersion() : 0;
      const int64_t s = r.ok() ? r->header().getStaleness() : 0;
      join->Part(r.status(), [&](PushReport& rep, LowestVersion& lowest) {
        MergePush(v, s, applied.get(), rep, lowest);
      });
    });
  }
  return future;
}

}  // namespace towerps::ps
