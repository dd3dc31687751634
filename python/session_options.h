// SessionOptions: what a PyTorch worker (python/session.h) is told by towerps-launch, and the
// parser of it. The launcher gives a --worker-cmd process the command line it would give
// towerps-worker, as JSON in TOWERPS_WORKER_ARGS (launch/launch_options.h), and the secret's
// path in TOWERPS_SECRET_FILE; tps.init() hands both here, so a script gets every job option,
// checked by the same flag tables as a native worker's.
//
// Contract: a plain value type and a pure parser. Errors are kInvalidArgument naming the flag
// and its bad value.
#ifndef TOWERPS_PYTHON_SESSION_OPTIONS_H_
#define TOWERPS_PYTHON_SESSION_OPTIONS_H_

#include <atomic>
#include <string>
#include <vector>

#include "common/logging.h"
#include "common/transport.h"
#include "job/job_config.h"
#include "towerps/result.h"
#include "worker/worker_options.h"

namespace towerps::python {

struct SessionOptions {
  int rank = 0;
  std::vector<std::string> ps_endpoints;  // by server rank
  ps::JobConfig job;
  worker::WorkerOptions worker;
  TransportSecurity security;
  TransportPath transport_path = TransportPath::kAuto;
  LogLevel log_level = LogLevel::kInfo;
  const std::atomic<bool>* stop = nullptr;  // borrowed; set: waits end with kCancelled
  // Per parameter, the most GradientBuffers (python/session.h) the session makes: a few cover
  // the loans a step can have out; beyond them pushes copy, so a server that never lets go
  // cannot make memory grow.
  size_t max_gradient_buffers = 4;
  // The gradient bucket is worker.bucket_bytes, set from DistributedOptimizer's bucket_cap_mb.
};

// Parses a worker's arguments (without the program name). `secret_file`: TOWERPS_SECRET_FILE
// (empty when unset). "--help" is kInvalidArgument with the options' description.
Result<SessionOptions> ParseSessionArgs(const std::vector<std::string>& args,
                                        const std::string& secret_file);

// The arguments from TOWERPS_WORKER_ARGS' JSON (an array of strings); kInvalidArgument saying
// that the script was not started by towerps-launch when `json` is empty, naming the variable
// when it is not such an array.
Result<std::vector<std::string>> WorkerArgsFromJson(const std::string& json);

}  // namespace towerps::python

#endif  // TOWERPS_PYTHON_SESSION_OPTIONS_H_
