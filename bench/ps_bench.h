// Parameter-server goodput: real towerps-server processes on loopback, N in-process workers each
// repeating rounds that push K chunks of B bytes and pull them back (sync mode, SGD; a chunk's
// push and its next pull in one request, as workers send them). Goodput
// counts gradient bytes pushed per second, one direction, as the established PS benchmarks do.
// The same invocation measures raw ZeroMQ for B-byte messages, so the ratio is meaningful; and,
// for --transport shm, memcpy of the same bytes.
//
// Contract: starts and stops its own server processes (killed on any failure); blocks for about
// seconds + a few seconds of set-up. Errors name the failing server or option.
#ifndef TOWERPS_BENCH_PS_BENCH_H_
#define TOWERPS_BENCH_PS_BENCH_H_

#include <cstddef>
#include <string>

#include "towerps/result.h"

namespace towerps::bench {

struct PsBenchOptions {
  int servers = 1;
  int workers = 1;
  size_t chunk_bytes = 1 << 20;
  int chunks = 8;
  double seconds = 3.0;
  int server_threads = 1;
  std::string server_binary;  // towerps-server; empty: next to this executable
  bool progress = true;       // print what is happening to stderr
  // How workers prove membership (docs/SECURITY.md): "none" (--insecure servers), "auth" (the
  // default: a job secret, ZeroMQ PLAIN) or "encrypt" (CURVE).
  std::string security = "auth";
  bool ceilings = true;  // also measure the raw ZeroMQ ceilings (off: goodput only)
  // The path between the workers (here) and the servers (on this host): tcp or shm. The
  // workers' gradients live in their shared-memory arena, as a real worker's do.
  std::string transport = "tcp";
  // A push and the next pull as two requests per chunk, instead of one (Client::PushThenPull).
  bool separate_pull = false;
};

struct PsBenchResult {
  double goodput_gbps = 0;       // pushed gradient bytes per second / 1e9
  double raw_zmq_gbps = 0;       // one-way raw ZeroMQ, same message size
  double ratio = 0;              // goodput / raw_zmq_gbps
  double raw_zmq_echo_gbps = 0;  // raw ZeroMQ echo with as many chunks in flight per worker
  double echo_ratio = 0;         // goodput / raw_zmq_echo_gbps
  long rounds = 0;               // over all workers
  double round_ms = 0;           // mean wall time of one worker's round
  // Time in optimizer updates per round (all its chunks), summed over the servers: the mean
  // update time over the whole run, warm-up included, times the chunks.
  double server_update_ms = 0;
};

Result<PsBenchResult> RunPsBench(const PsBenchOptions& options);

// memcpy bandwidth in GB/s over `buffers` pairs of `bytes`-byte buffers, copied round-robin for
// about `seconds`: the ceiling of moving what one PS round moves, once, in this process.
double MemcpyGbps(size_t bytes, int buffers, double seconds);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_PS_BENCH_H_
