#include "ps/server/server_stats.h"

#include <algorithm>

namespace towerps::ps {

void AddCounters(const ShardCounters& c, ServerStatsReport* report) {
  ServerStatsReport& r = *report;
  r.gradients_received += c.gradients_received.load();
  r.updates_applied += c.updates_applied.load();
  r.stale_dropped += c.stale_dropped.load();
  r.nonfinite_rejected += c.nonfinite_rejected.load();
  r.finite_checks += c.finite_checks.load();
  r.staleness_sum += c.staleness_sum.load();
  r.staleness_max = std::max(r.staleness_max, c.staleness_max.load());
  r.first_nonfinite =
      FirstNonFinite::Earlier(r.first_nonfinite, FirstNonFinite::FromKey(c.first_nonfinite.load()));
  r.pulls_served += c.pulls_served.load();
  r.aggregation_nanos += c.aggregation_nanos.load();
  for (int b = 0; b < kStalenessBuckets; ++b) {
    r.staleness_histogram[b] += c.staleness[b].load();
    r.row_staleness_histogram[b] += c.row_staleness[b].load();
  }
}

void TableCounters::AddTo(TableStats* t) const {
  t->Add({.rows = rows.load(),
          .rows_admitted = rows_admitted.load(),
          .ids_pending = ids_pending.load(),
          .gradients_dropped = gradients_dropped.load(),
          .evicted_ttl = evicted_ttl.load(),
          .evicted_capacity = evicted_capacity.load(),
          .rows_on_disk = rows_on_disk.load(),
          .row_reads = row_reads.load(),
          .disk_reads = disk_reads.load(),
          .disk_hits = disk_hits.load(),
          .disk_writes = disk_writes.load()});
}

}  // namespace towerps::ps
