// The ceilings the benchmarks compare TowerPS with: the same traffic through plain libzmq, with no
// header, no validation and no copies, measured in the benchmark's own process. Internal to
// common/ (so that only common/internal/ sees ZeroMQ); for bench/.
//
// Contract: each call creates its own two ZeroMQ contexts (one per side, as two processes would
// have), runs a second thread, blocks for about options.seconds, and releases everything before
// returning. No wait is unbounded: a side that makes no progress for options.stall_timeout ends
// the call with kTimeout naming the endpoint, the side and the messages outstanding. Setup and
// socket failures are kNetwork Statuses naming the endpoint; moving fewer than 2 messages is
// kTimeout. Calls may run concurrently on different endpoints.
#ifndef TOWERPS_COMMON_INTERNAL_RAW_CEILING_H_
#define TOWERPS_COMMON_INTERNAL_RAW_CEILING_H_

#include <chrono>
#include <cstddef>
#include <string>

#include "towerps/result.h"

namespace towerps::internal {

struct RawCeilingOptions {
  size_t message_bytes = 1 << 20;
  double seconds = 2.0;
  std::string endpoint = "tcp://127.0.0.1:0";      // port 0: any free port
  int window = 64;                                 // high-water mark: messages queued per side
  std::chrono::milliseconds stall_timeout{10000};  // longest wait with no message moving
};

// Raw libzmq DEALER -> ROUTER payload throughput in GB/s (1e9 bytes) for messages of
// options.message_bytes, one zero-copy frame each from a shared buffer. `*messages` gets the
// number received.
Result<double> RawZmqThroughput(const RawCeilingOptions& options, long* messages);

// Raw libzmq echo: a DEALER keeps `in_flight` messages of options.message_bytes outstanding to a
// ROUTER that sends each one straight back (zero-copy). GB/s of bytes sent that came back: the
// ceiling of a push whose bytes are pulled back, as in the parameter-server benchmark. Any
// `in_flight` works, also far above the window: neither side ever blocks in a send, and the
// ROUTER holds a reply back while its queue to the DEALER is full instead of dropping it.
Result<double> RawZmqEchoThroughput(const RawCeilingOptions& options, int in_flight,
                                    long* messages);

}  // namespace towerps::internal

#endif  // TOWERPS_COMMON_INTERNAL_RAW_CEILING_H_
