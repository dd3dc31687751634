#include "ps/server/server_stats.h"

#include <algorithm>

namespace towerps::ps {

void AddCounters(const ShardCounters& c, ServerStatsReport* report) {
  ServerStatsReport& r = *report;
  r.gradients_received += c.gradients_received.load();
  r.updates_applied += c.updates_applied.load();
  r.stale_dropped += c.stale_dropped.load();
  r.nonfinite_rejected += c.nonfinite_rejected.load();
  r.staleness_sum += c.staleness_sum.load();
  r.staleness_max = std::max(r.staleness_max, c.staleness_max.load());
  r.first_nonfinite =
      FirstNonFinite::Earlier(r.first_nonfinite, FirstNonFinite::FromKey(c.first_nonfinite.load()));
  r.pulls_served += c.pulls_served.load();
  r.aggregation_nanos += c.aggregation_nanos.load();
  r.table_rows += c.table_rows.load();
  r.table_rows_admitted += c.table_rows_admitted.load();
  r.table_ids_pending += c.table_ids_pending.load();
  r.table_gradients_dropped += c.table_gradients_dropped.load();
  r.table_evicted_ttl += c.table_evicted_ttl.load();
  r.table_rows_on_disk += c.table_rows_on_disk.load();
  r.table_row_reads += c.table_row_reads.load();
  r.table_disk_reads += c.table_disk_reads.load();
  r.table_disk_hits += c.table_disk_hits.load();
  r.table_disk_writes += c.table_disk_writes.load();
  r.table_evicted_capacity += c.table_evicted_capacity.load();
  for (int b = 0; b < kStalenessBuckets; ++b) {
    r.staleness_histogram[b] += c.staleness[b].load();
    r.row_staleness_histogram[b] += c.row_staleness[b].load();
  }
}

}  // namespace towerps::ps
