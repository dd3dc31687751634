// ShardCounters: the counters a server shard thread updates and the I/O thread reads for STATS
// requests, the periodic log and the TensorBoard events, which report them as a
// ServerStatsReport (job/stats_report.h; AddCounters sums a shard's into one, for
// Server::CollectStats). TableCounters: one table partition's, which its shard thread stores
// whole after each update and ShardSet::AddStats sums per table. Relaxed atomics: each counter
// is exact, a snapshot across counters is not.
#ifndef TOWERPS_PS_SERVER_SERVER_STATS_H_
#define TOWERPS_PS_SERVER_SERVER_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>

#include "job/stats_report.h"
#include "ps/server/busy_clock.h"

namespace towerps::ps {

struct ShardCounters {
  std::atomic<uint64_t> gradients_received{0};
  std::atomic<uint64_t> updates_applied{0};
  std::atomic<uint64_t> stale_dropped{0};       // sync: stale pushes and restarted workers' repeats
  std::atomic<uint64_t> nonfinite_rejected{0};  // gradients with a NaN or an infinity, refused
  std::atomic<uint64_t> finite_checks{0};       // gradients read for one (unchecked by senders)
  // The earliest refused gradient: FirstNonFinite's key of its worker's iteration and rank.
  std::atomic<uint64_t> first_nonfinite{FirstNonFinite::kNone};
  std::atomic<uint64_t> pulls_served{0};
  std::atomic<uint64_t> aggregation_nanos{0};  // every update's time, summed over threads
  // The server's wall-clock time in updates (shared by its shards; null: not kept).
  BusyClock* busy = nullptr;
  std::array<std::atomic<uint64_t>, kStalenessBuckets> staleness{};
  // The histogram clamps at its last bucket; these are exact: the sum and the largest.
  std::atomic<uint64_t> staleness_sum{0};
  std::atomic<uint64_t> staleness_max{0};
  // Tables (ps/server/table_chunk.h): each applied row's updates between the pull its gradient
  // came from and its push.
  std::array<std::atomic<uint64_t>, kStalenessBuckets> row_staleness{};

  // A refused non-finite gradient of `worker`'s iteration `clock`: kept if the earliest.
  void NoteNonFinite(int64_t clock, int worker) {
    StoreWhile(first_nonfinite, FirstNonFinite::Key(clock, worker), std::less<>());
  }
  void RecordStaleness(int64_t s) {
    staleness[Bucket(s)].fetch_add(1, std::memory_order_relaxed);
    const uint64_t v = s < 0 ? 0 : static_cast<uint64_t>(s);
    staleness_sum.fetch_add(v, std::memory_order_relaxed);
    StoreWhile(staleness_max, v, std::greater<>());
  }
  // One update's row staleness, counted apart (a histogram of Bucket()s) and added at once.
  using Histogram = std::array<uint64_t, kStalenessBuckets>;
  void AddRowStaleness(const Histogram& counts) {
    for (size_t b = 0; b < counts.size(); ++b) {
      if (counts[b] != 0) row_staleness[b].fetch_add(counts[b], std::memory_order_relaxed);
    }
  }
  // Stores v into `a` unless another thread got there first with a value v does not beat:
  // an atomic min (std::less) or max (std::greater).
  template <typename Beats>
  static void StoreWhile(std::atomic<uint64_t>& a, uint64_t v, Beats beats) {
    uint64_t seen = a.load(std::memory_order_relaxed);
    while (beats(v, seen) && !a.compare_exchange_weak(seen, v, std::memory_order_relaxed)) {
    }
  }
  // The bucket of staleness s: s itself, clamped to [0, kStalenessBuckets - 1].
  static size_t Bucket(int64_t s) {
    return static_cast<size_t>(s < 0 ? 0 : (s >= kStalenessBuckets ? kStalenessBuckets - 1 : s));
  }
};

// One table partition's counters (TableStats' fields): rows held and ids pending (levels), the
// policy's counts (ps/server/row_policy.h) and the disk tier's (ps/server/table_rows.h: rows
// there, a level; rows a lookup or update asked of it, looked up on disk, found, written).
struct TableCounters {
  std::atomic<uint64_t> rows{0}, rows_admitted{0}, ids_pending{0}, gradients_dropped{0};
  std::atomic<uint64_t> evicted_ttl{0}, evicted_capacity{0};
  std::atomic<uint64_t> rows_on_disk{0}, row_reads{0}, disk_reads{0}, disk_hits{0}, disk_writes{0};

  static void Store(std::atomic<uint64_t>& c, int64_t v) {
    c.store(static_cast<uint64_t>(v), std::memory_order_relaxed);
  }
  // Adds them to `t`.
  void AddTo(TableStats* t) const;
};

// Adds one shard's counters to `report` (whose histograms have kStalenessBuckets buckets).
void AddCounters(const ShardCounters& counters, ServerStatsReport* report);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_SERVER_STATS_H_
