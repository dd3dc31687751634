// Counters a server shard thread updates and the I/O thread reads for STATS requests, the
// periodic log and the TensorBoard events; and ServerStatsReport, what a server reports from
// them (Server::CollectStats, and the client's STATS reply). Relaxed atomics: each counter is
// exact, a snapshot across counters is not.
#ifndef TOWERPS_PS_SERVER_STATS_H_
#define TOWERPS_PS_SERVER_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "ps/version.h"

namespace towerps::ps {

inline constexpr int kStalenessBuckets = 64;  // the last bucket counts staleness >= 63

struct ShardCounters {
  std::atomic<uint64_t> gradients_received{0};
  std::atomic<uint64_t> updates_applied{0};
  std::atomic<uint64_t> stale_dropped{0};       // sync: stale pushes and restarted workers' repeats
  std::atomic<uint64_t> nonfinite_rejected{0};  // gradients with a NaN or an infinity, refused
  std::atomic<uint64_t> pulls_served{0};
  std::atomic<uint64_t> aggregation_nanos{0};
  std::array<std::atomic<uint64_t>, kStalenessBuckets> staleness{};

  void RecordStaleness(int64_t s) {
    const int64_t b = s < 0 ? 0 : (s >= kStalenessBuckets ? kStalenessBuckets - 1 : s);
    staleness[static_cast<size_t>(b)].fetch_add(1, std::memory_order_relaxed);
  }
};

struct ServerStatsReport {
  uint64_t bytes_in = 0, bytes_out = 0;
  uint64_t gradients_received = 0, updates_applied = 0, stale_dropped = 0, pulls_served = 0;
  uint64_t aggregation_nanos = 0, rejected_messages = 0, checkpoints_written = 0;
  uint64_t nonfinite_rejected = 0;  // gradients refused for a NaN or an infinity
  uint64_t refused_handshakes = 0, refused_shutdowns = 0;
  int64_t min_version = kNoVersion, max_version = kNoVersion;
  std::vector<uint64_t> staleness_histogram;
};

// Mean and 99th percentile of a staleness histogram (bucket i counts staleness i; 0 when empty).
double HistogramMean(const std::vector<uint64_t>& histogram);
double HistogramP99(const std::vector<uint64_t>& histogram);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_STATS_H_
