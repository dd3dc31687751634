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
Result<std::vector<std::vector<uint32_t>>> PushOrder(const RowPushRequest& push, int partitions) {
  std::vector<std::vector<uint32_t>> where = ByPartition(push.ids, partitions);
  const uint64_t* id = push.ids.u64();
  auto before = [id](uint32_t a, uint32_t b) { return id[a] < id[b]; };
  for (std::vector<uint32_t>& w : where) {
    // As given when the ids are grouped (UniqueIds), else sorted.
    if (!std::is_sorted(w.begin(), w.end(), before)) std::sort(w.begin(), w.end(), before);
    for (size_t i = 1; i < w.size(); ++i) {
      if (id[w[i]] == id[w[i - 1]]) {
        return InvalidArgumentError("PushRows of table " + std::to_string(push.table_id) + ": id " +
                                    std::to_string(id[w[i]]) +
                                    " appears twice; sum a batch's gradients of each id first "
                                    "(ps/row_batch.h)");
      }
    }
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
               int64_t total, PulledRows& out) {
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
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out.rows.f32() + positions[static_cast<size_t>(i)] * dim, t[0].f32() + i * dim,
                row_bytes);
    out.updates.u32()[positions[static_cast<size_t>(i)]] = t[1].u32()[i];
  }
}

// A push's gradients, checked against its ids and the table's dim.
Status CheckPushShapes(const RowPushRequest& push, int64_t dim) {
  const int64_t n = push.ids.num_elements();
  const Tensor& g = push.gradients;
  const Tensor& u = push.pulled_updates;
  if (g.dtype() == DType::kFloat32 && g.rank() == 2 && g.dim(0) == n && g.dim(1) == dim &&
      u.dtype() == DType::kUInt32 && u.rank() == 1 && u.dim(0) == n) {
    return Status::Ok();
  }
  return InvalidArgumentError("PushRows of table " + std::to_string(push.table_id) + ": " +
                              std::to_string(n) + " ids need gradients of float32 [" +
                              std::to_string(n) + ", " + std::to_string(dim) +
                              "] and pulled update counts of uint32 [" + std::to_string(n) +
                              "], got " + DTypeName(g.dtype()) + " " + ShapeToString(g.shape()) +
                              " and " + DTypeName(u.dtype()) + " " + ShapeToString(u.shape()));
}

// One partition's request: the push's rows at `push_at` (all its tensors; none without a push),
// and, when it `pulls`, the pull's ids at `pull_at`, with the header fields of each.
void FillRowsMessage(const RowPushRequest* push, const RowPullRequest* pull,
                     const std::vector<uint32_t>& push_at, const std::vector<uint32_t>& pull_at,
                     uint32_t table_id, uint32_t part, bool pulls, OutgoingMessage& m) {
  auto h = m.header();
  if (push != nullptr) {
    h.setVersion(push->version);
    h.setClock(push->clock);
    h.setReplacesPending(push->replace_pending);
    m.AddTensor(Rows(push->ids, push_at), table_id, part);
    m.AddTensor(Rows(push->gradients, push_at), table_id, part);
    m.AddTensor(Rows(push->pulled_updates, push_at), table_id, part);
    if (pulls) {
      h.setThenPull(true);
      h.setPullVersion(pull->min_version);
      h.setPullClock(pull->clock);
    }
  } else {
    h.setVersion(pull->min_version);
    h.setClock(pull->clock);
    h.setExactVersion(pull->exact);
    h.setEveryRow(pull->every_row);
  }
  if (pulls) {
    m.AddTensor(pull->every_row ? Tensor::Empty({0}, DType::kUInt64) : Rows(pull->ids, pull_at),
                table_id, part);
  }
}

// One partition's reply, completing its part of the push and of the pull of a table request.
struct RowsReply {
  std::shared_ptr<Join<PushReport>> pushed;  // null: no push
  std::shared_ptr<Join<PulledRows>> pulled;  // null: this partition pulls nothing
  std::shared_ptr<const std::vector<std::vector<uint32_t>>> pull_where;
  uint32_t part = 0;
  int64_t dim = 0, total = 0;
  std::shared_ptr<int> applied;  // the push's chunks that applied it, for the mean staleness

  bool every_row = false;

  void operator()(Result<IncomingMessage> r) const {
    const std::vector<uint32_t>& positions = (*pull_where)[part];
    const Status values =
        pulled ? CheckRowsReply(r, static_cast<int64_t>(positions.size()), dim, every_row)
               : r.status();
    if (pushed) {
      // A refused gradient fails the push; with a pull, the rows still came.
      Status status = values;
      if (values.ok() && r->header().hasPushRefusal()) {
        status = InvalidArgumentError(r->header().getPushRefusal().cStr());
      }
      const int64_t v = values.ok() ? r->header().getVersion() : 0;
      const int64_t s = values.ok() ? r->header().getStaleness() : 0;
      pushed->Part(status, [&](PushReport& rep, LowestVersion& lowest) {
        MergePush(v, s, applied.get(), rep, lowest);
      });
    }
    if (!pulled) return;
    pulled->Part(values, [&](PulledRows& out, LowestVersion& lowest) {
      MergeRows(*r, positions, dim, total, out);
      const int64_t version = r->header().getVersion();
      lowest.Add(version);
      out.max_version = std::max(out.max_version, version);
      const int64_t clock = r->header().getClock();
      out.min_clock = out.min_clock < 0 ? clock : std::min(out.min_clock, clock);
    });
  }
};

}  // namespace

std::future<Result<PulledRows>> Client::PullRows(const RowPullRequest& pull) {
  return SendRows(nullptr, &pull).pull;
}

std::future<Result<PushReport>> Client::PushRows(const RowPushRequest& push) {
  return SendRows(&push, nullptr).push;
}

Client::RowsPushAndPull Client::PushRowsThenPull(const RowPushRequest& push,
                                                 const RowPullRequest& next) {
  if (next.table_id != push.table_id || next.exact || next.every_row) {
    const Status bad = InvalidArgumentError(
        "PushRowsThenPull of table " + std::to_string(push.table_id) + " with " +
        (next.exact || next.every_row ? std::string("an exact or every-row pull (it travels alone)")
                                      : "a pull of variable " + std::to_string(next.table_id)));
    return {Ready<PushReport>(bad), Ready<PulledRows>(bad)};
  }
  return SendRows(&push, &next);
}

// Every table request: one message per partition. A push goes to every partition (a partition's
// update counts every worker's push); a pull only to those holding some of its ids, and with a
// push it rides on that partition's message (thenPull).
Client::RowsPushAndPull Client::SendRows(const RowPushRequest* push, const RowPullRequest* pull) {
  const uint32_t table_id = push != nullptr ? push->table_id : pull->table_id;
  const auto partitions = placement().ChunksOf(table_id);
  const char* call = push == nullptr   ? "PullRows"
                     : pull == nullptr ? "PushRows"
                                       : "PushRowsThenPull";
  auto fail = [](const Status& bad) -> RowsPushAndPull {
    return {Ready<PushReport>(bad), Ready<PulledRows>(bad)};
  };
  const int P = static_cast<int>(partitions.size());
  std::vector<std::vector<uint32_t>> push_where;
  if (push != nullptr) {
    if (Status bad = CheckTableCall(partitions, table_id, push->ids, call); !bad.ok()) {
      return fail(bad);
    }
    if (Status bad = CheckPushShapes(*push, partitions[0].table_dim); !bad.ok()) return fail(bad);
    Result<std::vector<std::vector<uint32_t>>> order = PushOrder(*push, P);
    if (!order.ok()) return fail(order.status());
    push_where = std::move(order).value();
  }
  // Per partition, the pull's ids there (none for a push alone).
  auto pull_where = std::make_shared<std::vector<std::vector<uint32_t>>>(static_cast<size_t>(P));
  if (pull != nullptr) {
    const Tensor& ids = pull->every_row ? Tensor::Empty({0}, DType::kUInt64) : pull->ids;
    if (Status bad = CheckTableCall(partitions, table_id, ids, call); !bad.ok()) return fail(bad);
    if (!pull->every_row) *pull_where = ByPartition(ids, P);
  }
  // No ids, or every row: every partition is asked (with no ids).
  const bool every_partition =
      pull != nullptr && (pull->every_row || pull->ids.num_elements() == 0);
  const int64_t dim = partitions[0].table_dim;
  const int64_t total = pull != nullptr && !pull->every_row ? pull->ids.num_elements() : 0;
  const auto asked =
      every_partition ? P
                      : static_cast<int>(std::count_if(pull_where->begin(), pull_where->end(),
                                                       [](const auto& w) { return !w.empty(); }));
  RowsPushAndPull result;
  std::shared_ptr<Join<PushReport>> pushed;
  std::shared_ptr<Join<PulledRows>> pulled;
  if (push != nullptr) {
    pushed = std::make_shared<Join<PushReport>>(P);
    result.push = pushed->promise.get_future();
  }
  if (pull != nullptr) {
    pulled = std::make_shared<Join<PulledRows>>(asked);
    result.pull = pulled->promise.get_future();
  }
  auto applied = std::make_shared<int>(0);
  const std::vector<uint32_t> none;
  for (int p = 0; p < P; ++p) {
    const auto part = static_cast<uint32_t>(p);
    const bool pulls = pull != nullptr && (every_partition || !(*pull_where)[part].empty());
    if (push == nullptr && !pulls) continue;
    OutgoingMessage m =
        impl_->NewMessage(push != nullptr ? proto::MessageType::PUSH : proto::MessageType::PULL);
    FillRowsMessage(push, pull, push != nullptr ? push_where[part] : none, (*pull_where)[part],
                    table_id, part, pulls, m);
    impl_->SendToChunk(partitions[part], std::move(m),
                       RowsReply{pushed, pulls ? pulled : nullptr, pull_where, part, dim, total,
                                 applied, pull != nullptr && pull->every_row});
  }
  return result;
}

}  // namespace towerps::ps
