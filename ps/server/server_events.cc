#include "ps/server/server_events.h"

#include "common/logging.h"

namespace towerps::ps {

Result<std::unique_ptr<ServerEvents>> ServerEvents::Create(const std::string& logdir, int rank) {
  TOWERPS_ASSIGN_OR_RETURN(std::unique_ptr<EventWriter> writer,
                           EventWriter::Create(logdir + "/ps-" + std::to_string(rank)));
  return std::unique_ptr<ServerEvents>(new ServerEvents(std::move(writer)));
}

void ServerEvents::Record(const ServerStatsReport& s) {
  // One event per step: TensorBoard's steps must increase (a second event at the last step,
  // written at shutdown, broke that).
  if (!writer_ || s.min_version < 0 || s.min_version == last_step_) return;
  const int64_t step = s.min_version;
  Status st =
      writer_->Scalars(step, {{"ps/updates_applied", static_cast<double>(s.updates_applied)},
                              {"ps/stale_dropped", static_cast<double>(s.stale_dropped)},
                              {"ps/nonfinite_rejected", static_cast<double>(s.nonfinite_rejected)},
                              {"ps/bytes_in", static_cast<double>(s.bytes_in)},
                              {"ps/bytes_out", static_cast<double>(s.bytes_out)},
                              {"ps/staleness_mean", HistogramMean(s.staleness_histogram)},
                              {"ps/staleness_p99", HistogramP99(s.staleness_histogram)}});
  if (st.ok()) st = writer_->Histogram(step, "ps/staleness", s.staleness_histogram);
  if (st.ok() && s.table_rows > 0) {  // embedding tables: rows held, and row staleness
    st = writer_->Scalars(
        step, {{"ps/table_rows", static_cast<double>(s.table_rows)},
               {"ps/row_staleness_mean", HistogramMean(s.row_staleness_histogram)},
               {"ps/row_staleness_p99", HistogramP99(s.row_staleness_histogram)},
               {"ps/table_rows_admitted", static_cast<double>(s.table_rows_admitted)},
               {"ps/table_ids_pending", static_cast<double>(s.table_ids_pending)},
               {"ps/table_gradients_dropped", static_cast<double>(s.table_gradients_dropped)},
               {"ps/table_evicted_ttl", static_cast<double>(s.table_evicted_ttl)},
               {"ps/table_evicted_capacity", static_cast<double>(s.table_evicted_capacity)},
               {"ps/table_rows_on_disk", static_cast<double>(s.table_rows_on_disk)},
               {"ps/table_memory_hit_rate", MemoryHitRate(s.table_row_reads, s.table_disk_hits)},
               {"ps/table_disk_reads", static_cast<double>(s.table_disk_reads)},
               {"ps/table_disk_writes", static_cast<double>(s.table_disk_writes)}});
    if (st.ok()) st = writer_->Histogram(step, "ps/row_staleness", s.row_staleness_histogram);
  }
  for (const TableStats& t : s.tables) {  // each table's, beside the totals
    if (!st.ok()) break;
    const std::string at = "ps/table/" + t.name + "/";
    st = writer_->Scalars(step, {{at + "rows", static_cast<double>(t.rows)},
                                 {at + "rows_on_disk", static_cast<double>(t.rows_on_disk)},
                                 {at + "rows_admitted", static_cast<double>(t.rows_admitted)},
                                 {at + "ids_pending", static_cast<double>(t.ids_pending)},
                                 {at + "evicted_ttl", static_cast<double>(t.evicted_ttl)},
                                 {at + "evicted_capacity", static_cast<double>(t.evicted_capacity)},
                                 {at + "memory_hit_rate", MemoryHitRate(t.row_reads, t.disk_hits)},
                                 {at + "disk_reads", static_cast<double>(t.disk_reads)},
                                 {at + "disk_writes", static_cast<double>(t.disk_writes)}});
  }
  if (!st.ok()) {
    TOWERPS_LOG(kWarning) << "no more TensorBoard events: " << st.message();
    writer_.reset();
  }
  last_step_ = step;
}

}  // namespace towerps::ps
