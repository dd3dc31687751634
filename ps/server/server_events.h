// ServerEvents: a server's TensorBoard event files, in <logdir>/ps-<rank> (common/
// event_writer.h), written from its statistics (ServerStatsReport): the scalars ps/updates_
// applied, ps/stale_dropped, ps/nonfinite_rejected, ps/bytes_in, ps/bytes_out, ps/staleness_mean
// and ps/staleness_p99 (over every update applied so far), and the histogram ps/staleness; with
// embedding tables also ps/table_rows (rows held), ps/row_staleness_mean, ps/row_staleness_p99
// and the histogram ps/row_staleness (each applied row's updates between its pull and its push).
// The step is the server's lowest chunk version: the job's step in sync mode, the number of
// gradients applied per chunk in async and SSP, so the servers' curves line up with the
// workers'.
//
// Contract: owned by the server's I/O thread. Record() writes one event per new step (so the
// one at shutdown only if the step moved since the last), nothing before the chunks exist. Writing
// is best effort: the first failure is logged as a warning and the rest is skipped.
#ifndef TOWERPS_PS_SERVER_SERVER_EVENTS_H_
#define TOWERPS_PS_SERVER_SERVER_EVENTS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "common/event_writer.h"
#include "ps/server/server_stats.h"
#include "towerps/result.h"

namespace towerps::ps {

class ServerEvents {
 public:
  static Result<std::unique_ptr<ServerEvents>> Create(const std::string& logdir, int rank);
  void Record(const ServerStatsReport& stats);

 private:
  explicit ServerEvents(std::unique_ptr<EventWriter> writer) : writer_(std::move(writer)) {}

  std::unique_ptr<EventWriter> writer_;
  int64_t last_step_ = -1;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_SERVER_EVENTS_H_
