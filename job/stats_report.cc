#include "job/stats_report.h"

#include <sstream>

namespace towerps::ps {
namespace {

// The table part of a stats line: ", 1200 table rows (...), evicted ..., ... rows on disk (...)".
void AppendTables(const TableStats& t, std::ostringstream& line) {
  if (t.rows > 0) line << ", " << t.rows << " table rows";
  if (t.rows_admitted + t.ids_pending + t.gradients_dropped > 0) {
    line << " (" << t.rows_admitted << " admitted, " << t.ids_pending << " ids pending admission, "
         << t.gradients_dropped << " gradients dropped)";
  }
  if (t.evicted_ttl + t.evicted_capacity > 0) {
    line << ", evicted " << t.evicted_ttl << " by ttl and " << t.evicted_capacity << " by capacity";
  }
  if (t.row_reads > 0) {
    line << ", " << t.rows_on_disk << " rows on disk (memory hit rate "
         << MemoryHitRate(t.row_reads, t.disk_hits) << ", " << t.disk_reads << " disk reads, "
         << t.disk_writes << " writes)";
  }
}

}  // namespace

void TableStats::Add(const TableStats& o) {
  rows += o.rows;
  rows_admitted += o.rows_admitted;
  ids_pending += o.ids_pending;
  gradients_dropped += o.gradients_dropped;
  evicted_ttl += o.evicted_ttl;
  evicted_capacity += o.evicted_capacity;
  rows_on_disk += o.rows_on_disk;
  row_reads += o.row_reads;
  disk_reads += o.disk_reads;
  disk_hits += o.disk_hits;
  disk_writes += o.disk_writes;
}

void AddTableStats(const TableStats& t, std::vector<TableStats>* tables) {
  for (TableStats& held : *tables) {
    if (held.name == t.name) return held.Add(t);
  }
  tables->push_back(t);
}

void ServerStatsReport::SumTables() {
  TableStats sum;
  for (const TableStats& t : tables) sum.Add(t);
  table_rows = sum.rows;
  table_rows_admitted = sum.rows_admitted;
  table_ids_pending = sum.ids_pending;
  table_gradients_dropped = sum.gradients_dropped;
  table_evicted_ttl = sum.evicted_ttl;
  table_evicted_capacity = sum.evicted_capacity;
  table_rows_on_disk = sum.rows_on_disk;
  table_row_reads = sum.row_reads;
  table_disk_reads = sum.disk_reads;
  table_disk_hits = sum.disk_hits;
  table_disk_writes = sum.disk_writes;
}

void WriteStatsReport(const ServerStatsReport& r, proto::Header::Builder header) {
  auto st = header.initStats();
  st.setBytesIn(r.bytes_in);
  st.setBytesOut(r.bytes_out);
  st.setMessagesIn(r.messages_in);
  st.setMessagesOut(r.messages_out);
  st.setGradientsReceived(r.gradients_received);
  st.setUpdatesApplied(r.updates_applied);
  st.setStaleDropped(r.stale_dropped);
  st.setNonfiniteRejected(r.nonfinite_rejected);
  st.setFiniteChecks(r.finite_checks);
  st.setFirstNonfiniteWorker(r.first_nonfinite.worker);
  st.setFirstNonfiniteStep(r.first_nonfinite.step);
  st.setStalenessSum(r.staleness_sum);
  st.setStalenessMax(r.staleness_max);
  st.setPullsServed(r.pulls_served);
  st.setAggregationNanos(r.aggregation_nanos);
  st.setUpdateWallNanos(r.update_wall_nanos);
  st.setSinceFirstUpdateNanos(r.since_first_update_nanos);
  st.setRejectedMessages(r.rejected_messages);
  st.setRefusedHandshakes(r.refused_handshakes);
  st.setRefusedShutdowns(r.refused_shutdowns);
  st.setMinVersion(r.min_version);
  st.setMaxVersion(r.max_version);
  st.setCheckpointsWritten(r.checkpoints_written);
  auto h = st.initStalenessHistogram(static_cast<unsigned>(r.staleness_histogram.size()));
  for (size_t b = 0; b < r.staleness_histogram.size(); ++b) h.set(b, r.staleness_histogram[b]);
  auto registered = st.initRegisteredWorkers(static_cast<unsigned>(r.registered_workers.size()));
  for (size_t w = 0; w < r.registered_workers.size(); ++w) {
    registered.set(static_cast<unsigned>(w), r.registered_workers[w]);
  }
  st.setTableRows(r.table_rows);
  st.setTableRowsAdmitted(r.table_rows_admitted);
  st.setTableIdsPending(r.table_ids_pending);
  st.setTableGradientsDropped(r.table_gradients_dropped);
  st.setTableEvictedTtl(r.table_evicted_ttl);
  st.setTableEvictedCapacity(r.table_evicted_capacity);
  st.setTableRowsOnDisk(r.table_rows_on_disk);
  st.setTableRowReads(r.table_row_reads);
  st.setTableDiskReads(r.table_disk_reads);
  st.setTableDiskHits(r.table_disk_hits);
  st.setTableDiskWrites(r.table_disk_writes);
  auto tables = st.initTables(static_cast<unsigned>(r.tables.size()));
  for (size_t i = 0; i < r.tables.size(); ++i) {
    const TableStats& t = r.tables[i];
    auto w = tables[static_cast<unsigned>(i)];
    w.setName(t.name);
    w.setRows(t.rows);
    w.setRowsAdmitted(t.rows_admitted);
    w.setIdsPending(t.ids_pending);
    w.setGradientsDropped(t.gradients_dropped);
    w.setEvictedTtl(t.evicted_ttl);
    w.setEvictedCapacity(t.evicted_capacity);
    w.setRowsOnDisk(t.rows_on_disk);
    w.setRowReads(t.row_reads);
    w.setDiskReads(t.disk_reads);
    w.setDiskHits(t.disk_hits);
    w.setDiskWrites(t.disk_writes);
  }
  auto rows = st.initRowStalenessHistogram(static_cast<unsigned>(r.row_staleness_histogram.size()));
  for (size_t b = 0; b < r.row_staleness_histogram.size(); ++b) {
    rows.set(b, r.row_staleness_histogram[b]);
  }
}

ServerStatsReport ReadStatsReport(proto::Header::Reader header) {
  auto st = header.getStats();
  ServerStatsReport r;
  r.bytes_in = st.getBytesIn();
  r.bytes_out = st.getBytesOut();
  r.messages_in = st.getMessagesIn();
  r.messages_out = st.getMessagesOut();
  r.gradients_received = st.getGradientsReceived();
  r.updates_applied = st.getUpdatesApplied();
  r.stale_dropped = st.getStaleDropped();
  r.nonfinite_rejected = st.getNonfiniteRejected();
  r.finite_checks = st.getFiniteChecks();
  r.first_nonfinite = {.worker = st.getFirstNonfiniteWorker(), .step = st.getFirstNonfiniteStep()};
  r.staleness_sum = st.getStalenessSum();
  r.staleness_max = st.getStalenessMax();
  r.pulls_served = st.getPullsServed();
  r.aggregation_nanos = st.getAggregationNanos();
  r.update_wall_nanos = st.getUpdateWallNanos();
  r.since_first_update_nanos = st.getSinceFirstUpdateNanos();
  r.rejected_messages = st.getRejectedMessages();
  r.checkpoints_written = st.getCheckpointsWritten();
  r.refused_handshakes = st.getRefusedHandshakes();
  r.refused_shutdowns = st.getRefusedShutdowns();
  r.min_version = st.getMinVersion();
  r.max_version = st.getMaxVersion();
  for (uint64_t b : st.getStalenessHistogram()) r.staleness_histogram.push_back(b);
  r.table_rows = st.getTableRows();
  r.table_rows_admitted = st.getTableRowsAdmitted();
  r.table_ids_pending = st.getTableIdsPending();
  r.table_gradients_dropped = st.getTableGradientsDropped();
  r.table_evicted_ttl = st.getTableEvictedTtl();
  r.table_evicted_capacity = st.getTableEvictedCapacity();
  r.table_rows_on_disk = st.getTableRowsOnDisk();
  r.table_row_reads = st.getTableRowReads();
  r.table_disk_reads = st.getTableDiskReads();
  r.table_disk_hits = st.getTableDiskHits();
  r.table_disk_writes = st.getTableDiskWrites();
  for (auto t : st.getTables()) {
    r.tables.push_back({.name = t.getName().cStr(),
                        .rows = t.getRows(),
                        .rows_admitted = t.getRowsAdmitted(),
                        .ids_pending = t.getIdsPending(),
                        .gradients_dropped = t.getGradientsDropped(),
                        .evicted_ttl = t.getEvictedTtl(),
                        .evicted_capacity = t.getEvictedCapacity(),
                        .rows_on_disk = t.getRowsOnDisk(),
                        .row_reads = t.getRowReads(),
                        .disk_reads = t.getDiskReads(),
                        .disk_hits = t.getDiskHits(),
                        .disk_writes = t.getDiskWrites()});
  }
  for (uint64_t b : st.getRowStalenessHistogram()) r.row_staleness_histogram.push_back(b);
  for (uint32_t w : st.getRegisteredWorkers()) r.registered_workers.push_back(w);
  return r;
}

void AddSocketStats(const SocketStats& socket, ServerStatsReport* report) {
  report->bytes_in = socket.bytes_in;
  report->bytes_out = socket.bytes_out;
  report->messages_in = socket.messages_in;
  report->messages_out = socket.messages_out;
  report->rejected_messages = socket.rejected;
}

double MemoryHitRate(uint64_t row_reads, uint64_t disk_hits) {
  if (row_reads == 0) return 1.0;
  return 1.0 - static_cast<double>(disk_hits) / static_cast<double>(row_reads);
}

std::string StatsLine(const ServerStatsReport& r) {
  std::ostringstream line;
  line << r.gradients_received << " gradients, " << r.updates_applied << " updates, "
       << r.pulls_served << " pulls served, " << r.stale_dropped << " stale dropped, "
       << r.nonfinite_rejected << " non-finite refused, " << r.bytes_in / (1 << 20) << " MiB in, "
       << r.bytes_out / (1 << 20) << " MiB out, " << r.rejected_messages << " rejected, "
       << r.refused_handshakes << " refused connections";
  AppendTables({.rows = r.table_rows,
                .rows_admitted = r.table_rows_admitted,
                .ids_pending = r.table_ids_pending,
                .gradients_dropped = r.table_gradients_dropped,
                .evicted_ttl = r.table_evicted_ttl,
                .evicted_capacity = r.table_evicted_capacity,
                .rows_on_disk = r.table_rows_on_disk,
                .row_reads = r.table_row_reads,
                .disk_reads = r.table_disk_reads,
                .disk_hits = r.table_disk_hits,
                .disk_writes = r.table_disk_writes},
               line);
  return line.str();
}

std::string TableLine(const TableStats& t) {
  std::ostringstream line;
  line << "table " << t.name << ": " << t.rows << " rows";
  TableStats rest = t;
  rest.rows = 0;  // said already
  AppendTables(rest, line);
  return line.str();
}

double HistogramMean(const std::vector<uint64_t>& h) {
  double n = 0, sum = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    n += static_cast<double>(h[i]);
    sum += static_cast<double>(h[i]) * static_cast<double>(i);
  }
  return n > 0 ? sum / n : 0;
}

double HistogramP99(const std::vector<uint64_t>& h) {
  uint64_t n = 0;
  for (uint64_t c : h) n += c;
  uint64_t seen = 0;
  for (size_t i = 0; i < h.size() && n > 0; ++i) {
    seen += h[i];
    if (static_cast<double>(seen) >= 0.99 * static_cast<double>(n)) return static_cast<double>(i);
  }
  return 0;
}

}  // namespace towerps::ps
