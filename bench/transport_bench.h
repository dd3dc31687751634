// One-direction throughput of the TowerPS transport against raw ZeroMQ (the ceiling, from
// common/internal/raw_ceiling.h), over the same endpoint kind and message size, measured in one
// invocation so the ratio is meaningful on a noisy box.
//
// Contract: runs a sender thread and a receiver on this process; blocks for about 2 * seconds.
// Returns kNetwork/kTimeout on transport failure. Not thread-safe (uses its own context).
#ifndef TOWERPS_BENCH_TRANSPORT_BENCH_H_
#define TOWERPS_BENCH_TRANSPORT_BENCH_H_

#include <cstddef>
#include <string>

#include "common/internal/raw_ceiling.h"
#include "towerps/result.h"

namespace towerps::bench {

// The same traffic on both sides: message size, seconds, endpoint (port 0: any free port) and
// the window of messages in flight.
using TransportBenchOptions = internal::RawCeilingOptions;

struct TransportBenchResult {
  double raw_zmq_gbps = 0;  // payload GB/s (1e9 bytes) through plain libzmq DEALER->ROUTER
  double towerps_gbps = 0;  // payload GB/s through Transport with a Cap'n Proto header
  double ratio = 0;         // towerps / raw
  long raw_messages = 0;
  long towerps_messages = 0;
};

Result<TransportBenchResult> RunTransportBench(const TransportBenchOptions& options);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_TRANSPORT_BENCH_H_
