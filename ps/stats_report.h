// ServerStatsReport: what a server reports of its counters, in its STATS reply, its log and its
// events, and what a client reads from that reply; and the staleness histogram's statistics.
//
// Contract: plain values and pure functions.
#ifndef TOWERPS_PS_STATS_REPORT_H_
#define TOWERPS_PS_STATS_REPORT_H_

#include <cstdint>
#include <vector>

#include "ps/version.h"

namespace towerps::ps {

inline constexpr int kStalenessBuckets = 64;  // the last bucket counts staleness >= 63

struct ServerStatsReport {
  uint64_t bytes_in = 0, bytes_out = 0;
  uint64_t gradients_received = 0, updates_applied = 0, stale_dropped = 0, pulls_served = 0;
  uint64_t aggregation_nanos = 0, rejected_messages = 0, checkpoints_written = 0;
  uint64_t nonfinite_rejected = 0;  // gradients refused for a NaN or an infinity
  uint64_t refused_handshakes = 0, refused_shutdowns = 0;
  int64_t min_version = kNoVersion, max_version = kNoVersion;
  std::vector<uint64_t> staleness_histogram;
  // Tables (ps/table_chunk.h): the rows a server holds, and row staleness.
  uint64_t table_rows = 0;
  std::vector<uint64_t> row_staleness_histogram;
};

// Mean and 99th percentile of a staleness histogram (bucket i counts staleness i; 0 when empty).
double HistogramMean(const std::vector<uint64_t>& histogram);
double HistogramP99(const std::vector<uint64_t>& histogram);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_STATS_REPORT_H_
