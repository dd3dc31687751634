// ShardCounters: the counters a server shard thread updates and the I/O thread reads for STATS
// requests, the periodic log and the TensorBoard events, which report them as a
// ServerStatsReport (ps/stats_report.h; Server::CollectStats, in server_stats.cc). Relaxed
// atomics: each counter is exact, a snapshot across counters is not.
#ifndef TOWERPS_PS_SERVER_STATS_H_
#define TOWERPS_PS_SERVER_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "ps/stats_report.h"

namespace towerps::ps {

struct ShardCounters {
  std::atomic<uint64_t> gradients_received{0};
  std::atomic<uint64_t> updates_applied{0};
  std::atomic<uint64_t> stale_dropped{0};       // sync: stale pushes and restarted workers' repeats
  std::atomic<uint64_t> nonfinite_rejected{0};  // gradients with a NaN or an infinity, refused
  std::atomic<uint64_t> pulls_served{0};
  std::atomic<uint64_t> aggregation_nanos{0};
  std::array<std::atomic<uint64_t>, kStalenessBuckets> staleness{};
  // Tables (ps/table_chunk.h): rows created, and each applied row's updates between the pull
  // its gradient came from and its push.
  std::atomic<uint64_t> table_rows{0};
  std::array<std::atomic<uint64_t>, kStalenessBuckets> row_staleness{};

  void RecordStaleness(int64_t s) { Record(staleness, s); }
  void RecordRowStaleness(int64_t s) { Record(row_staleness, s); }

 private:
  static void Record(std::array<std::atomic<uint64_t>, kStalenessBuckets>& histogram, int64_t s) {
    const int64_t b = s < 0 ? 0 : (s >= kStalenessBuckets ? kStalenessBuckets - 1 : s);
    histogram[static_cast<size_t>(b)].fetch_add(1, std::memory_order_relaxed);
  }
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_STATS_H_
