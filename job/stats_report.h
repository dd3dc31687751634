// ServerStatsReport: what a server reports of its counters, in its STATS reply, its log and its
// events, and what a client reads from that reply; the reply's encoding both ways, written once;
// and the staleness histogram's statistics.
//
// Contract: plain values and pure functions.
#ifndef TOWERPS_JOB_STATS_REPORT_H_
#define TOWERPS_JOB_STATS_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/message.h"
#include "common/transport.h"
#include "job/version.h"

namespace towerps::ps {

inline constexpr int kStalenessBuckets = 64;  // the last bucket counts staleness >= 63

// The earliest non-finite gradient a server refused, by the worker's iteration (then rank): the
// first worker whose training diverged, as the servers saw it. Packed into one word so that the
// shards can keep the earliest with a compare-and-swap.
struct FirstNonFinite {
  static constexpr uint64_t kNone = ~uint64_t{0};
  static constexpr int kWorkerBits = 24;  // ranks below 2^24
  int worker = -1;                        // -1: no gradient was refused
  int64_t step = -1;                      // that worker's step: its iteration + 1

  static uint64_t Key(int64_t clock, int worker) {
    return (static_cast<uint64_t>(clock < 0 ? 0 : clock) << kWorkerBits) |
           (static_cast<uint64_t>(worker) & ((uint64_t{1} << kWorkerBits) - 1));
  }
  static FirstNonFinite FromKey(uint64_t key) {
    if (key == kNone) return {};
    return {.worker = static_cast<int>(key & ((uint64_t{1} << kWorkerBits) - 1)),
            .step = static_cast<int64_t>(key >> kWorkerBits) + 1};
  }
  // The earlier of the two (none counts as latest).
  static FirstNonFinite Earlier(const FirstNonFinite& a, const FirstNonFinite& b) {
    if (a.worker < 0) return b;
    if (b.worker < 0) return a;
    return (b.step < a.step || (b.step == a.step && b.worker < a.worker)) ? b : a;
  }
};

// One table's counters on a server, summed over its partitions there: rows held, the policy's
// (ids admitted after waiting, ids pending now, gradients dropped, rows evicted by TTL and by
// capacity) and the disk tier's (rows there, rows asked of it, looked up on disk, found, written).
struct TableStats {
  std::string name;
  uint64_t rows = 0, rows_admitted = 0, ids_pending = 0, gradients_dropped = 0;
  uint64_t evicted_ttl = 0, evicted_capacity = 0;
  uint64_t rows_on_disk = 0, row_reads = 0, disk_reads = 0, disk_hits = 0, disk_writes = 0;

  void Add(const TableStats& o);  // the counts, not the name
};

// `t` added to the entry of `tables` named as it is, or appended.
void AddTableStats(const TableStats& t, std::vector<TableStats>* tables);

struct ServerStatsReport {
  uint64_t bytes_in = 0, bytes_out = 0;
  uint64_t messages_in = 0, messages_out = 0;  // on the workers' socket; a bundle is one
  uint64_t gradients_received = 0, updates_applied = 0, stale_dropped = 0, pulls_served = 0;
  uint64_t aggregation_nanos = 0, rejected_messages = 0, checkpoints_written = 0;
  uint64_t update_wall_nanos =
      0;  // wall-clock time with an update running (ps/server/busy_clock.h)
  uint64_t since_first_update_nanos = 0;  // wall-clock time since its first update (0: none)
  uint64_t nonfinite_rejected = 0;        // gradients refused for a NaN or an infinity
  FirstNonFinite first_nonfinite;         // the earliest of them
  uint64_t finite_checks = 0;  // gradients the server read for one (their senders had not)
  uint64_t refused_handshakes = 0, refused_shutdowns = 0;
  int64_t min_version = kNoVersion, max_version = kNoVersion;
  std::vector<uint64_t> staleness_histogram;  // its last bucket counts kStalenessBuckets - 1 and up
  uint64_t staleness_sum = 0, staleness_max = 0;  // exact, beyond the histogram's range
  // Tables (ps/server/table_chunk.h): the rows a server holds, and row staleness.
  uint64_t table_rows = 0;
  std::vector<uint64_t> row_staleness_histogram;
  // Tables' policies (ps/server/row_policy.h): ids admitted after waiting, ids pending now,
  // gradients dropped (an id not admitted, once per update), rows evicted by TTL and by capacity.
  uint64_t table_rows_admitted = 0, table_ids_pending = 0, table_gradients_dropped = 0;
  uint64_t table_evicted_ttl = 0, table_evicted_capacity = 0;
  // Tables on disk (ps/server/table_rows.h): rows there, rows asked of tiered partitions, of
  // those looked up on disk and found there, and rows written to it.
  uint64_t table_rows_on_disk = 0, table_row_reads = 0, table_disk_reads = 0;
  uint64_t table_disk_hits = 0, table_disk_writes = 0;
  std::vector<TableStats> tables;  // each table's part of the table_* fields, in the model's order
  std::vector<uint32_t> registered_workers;  // ranks, increasing

  // Sets the table_* fields to the sums of `tables`.
  void SumTables();
};

// The report as a STATS reply carries it (Header.stats), and read back.
void WriteStatsReport(const ServerStatsReport& report, proto::Header::Builder header);
ServerStatsReport ReadStatsReport(proto::Header::Reader header);
// The socket's counters: bytes and messages each way, and its rejected messages.
void AddSocketStats(const SocketStats& socket, ServerStatsReport* report);
// The server's periodic log line: "28080 gradients, 14040 updates, ...".
std::string StatsLine(const ServerStatsReport& report);
// One table's line: "table emb_0: 1200 rows (...)".
std::string TableLine(const TableStats& table);
// The share of a tiered table's row reads served from memory: 1 - disk_hits / row_reads (1 when
// nothing was read).
double MemoryHitRate(uint64_t row_reads, uint64_t disk_hits);

// Mean and 99th percentile of a staleness histogram (bucket i counts staleness i; 0 when empty).
double HistogramMean(const std::vector<uint64_t>& histogram);
double HistogramP99(const std::vector<uint64_t>& histogram);

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_STATS_REPORT_H_
