// The Server's methods (ps/server.h) that collect the shards' counters (ps/server_stats.h) into
// a report, answer STATS with it and log it.
#include "ps/server_stats.h"

#include <algorithm>

#include "common/logging.h"
#include "ps/reply.h"
#include "ps/server.h"

namespace towerps::ps {

ServerStatsReport Server::CollectStats() const {
  ServerStatsReport r;
  r.staleness_histogram.assign(kStalenessBuckets, 0);
  r.row_staleness_histogram.assign(kStalenessBuckets, 0);
  LowestVersion lowest;
  for (const auto& shard : shards_) {
    const ShardCounters& c = shard->counters();
    r.gradients_received += c.gradients_received.load();
    r.updates_applied += c.updates_applied.load();
    r.stale_dropped += c.stale_dropped.load();
    r.nonfinite_rejected += c.nonfinite_rejected.load();
    r.staleness_sum += c.staleness_sum.load();
    r.staleness_max = std::max(r.staleness_max, c.staleness_max.load());
    r.first_nonfinite = FirstNonFinite::Earlier(r.first_nonfinite,
                                                FirstNonFinite::FromKey(c.first_nonfinite.load()));
    r.pulls_served += c.pulls_served.load();
    r.aggregation_nanos += c.aggregation_nanos.load();
    r.table_rows += c.table_rows.load();
    for (int b = 0; b < kStalenessBuckets; ++b) {
      r.staleness_histogram[b] += c.staleness[b].load();
      r.row_staleness_histogram[b] += c.row_staleness[b].load();
    }
    if (shards_started_ && shard->holds_anything()) {
      lowest.Add(shard->MinVersion());
      r.max_version = std::max(r.max_version, shard->MaxVersion());
    }
  }
  r.min_version = lowest.value();
  const SocketStats& ss = socket_->stats();
  r.bytes_in = ss.bytes_in;
  r.bytes_out = ss.bytes_out;
  r.rejected_messages = ss.rejected + rejected_by_handlers_;
  r.refused_handshakes = socket_->refused_handshakes();
  r.refused_shutdowns = refused_shutdowns_;
  r.checkpoints_written = checkpoints_written_;
  r.update_wall_nanos = update_clock_.nanos();
  return r;
}

void Server::HandleStats(const IncomingMessage& msg) {
  const ServerStatsReport r = CollectStats();
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::STATS_REPLY);
  auto st = reply.header().initStats();
  st.setBytesIn(r.bytes_in);
  st.setBytesOut(r.bytes_out);
  st.setGradientsReceived(r.gradients_received);
  st.setUpdatesApplied(r.updates_applied);
  st.setStaleDropped(r.stale_dropped);
  st.setNonfiniteRejected(r.nonfinite_rejected);
  st.setFirstNonfiniteWorker(r.first_nonfinite.worker);
  st.setFirstNonfiniteStep(r.first_nonfinite.step);
  st.setStalenessSum(r.staleness_sum);
  st.setStalenessMax(r.staleness_max);
  st.setPullsServed(r.pulls_served);
  st.setAggregationNanos(r.aggregation_nanos);
  st.setUpdateWallNanos(r.update_wall_nanos);
  st.setRejectedMessages(r.rejected_messages);
  st.setRefusedHandshakes(r.refused_handshakes);
  st.setRefusedShutdowns(r.refused_shutdowns);
  st.setMinVersion(r.min_version);
  st.setMaxVersion(r.max_version);
  st.setCheckpointsWritten(r.checkpoints_written);
  auto h = st.initStalenessHistogram(kStalenessBuckets);
  for (int b = 0; b < kStalenessBuckets; ++b) h.set(b, r.staleness_histogram[b]);
  st.setTableRows(r.table_rows);
  auto rows = st.initRowStalenessHistogram(kStalenessBuckets);
  for (int b = 0; b < kStalenessBuckets; ++b) rows.set(b, r.row_staleness_histogram[b]);
  SendOrLog(std::move(reply));
}

void Server::LogStats() {
  const ServerStatsReport r = CollectStats();
  TOWERPS_LOG(kInfo) << "stats: " << r.gradients_received << " gradients, " << r.updates_applied
                     << " updates, " << r.pulls_served << " pulls served, " << r.stale_dropped
                     << " stale dropped, " << r.nonfinite_rejected << " non-finite refused, "
                     << r.bytes_in / (1 << 20) << " MiB in, " << r.bytes_out / (1 << 20)
                     << " MiB out, " << r.rejected_messages << " rejected, " << r.refused_handshakes
                     << " refused connections"
                     << (r.table_rows > 0 ? ", " + std::to_string(r.table_rows) + " table rows"
                                          : std::string());
}

void Server::LogTableRows() const {
  for (const auto& shard : shards_) {
    for (const auto& t : shard->holders()) {
      if (!t->spec().is_table()) continue;
      TOWERPS_LOG(kInfo) << "table " << variables_.at(t->spec().variable_id).name << " partition "
                         << t->spec().chunk_id << ": " << t->rows_held() << " rows ("
                         << static_cast<double>(t->bytes_held()) / (1 << 20)
                         << " MiB with their optimizer state and the id map)";
    }
  }
}

}  // namespace towerps::ps
