// The command lines towerps-launch gives its servers and workers: every process of a job gets
// the same job configuration (JobConfig::ToArgs), the binaries resolved next to the launcher.
//
// Contract: pure functions of the options.
#ifndef TOWERPS_LAUNCH_COMMAND_LINES_H_
#define TOWERPS_LAUNCH_COMMAND_LINES_H_

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "job/job_config.h"
#include "launch/launch_options.h"
#include "towerps/result.h"

namespace towerps::launch {

// The binaries, resolved (next to this executable unless given).
std::string ServerBinary(const LaunchOptions& options);
std::string WorkerBinary(const LaunchOptions& options);

// towerps-server for server `rank`, listening on options.bind:port, with the job's options;
// `peers`: every server's endpoint, for --ps-replicas 2.
std::vector<std::string> ServerArgv(const LaunchOptions& options, int rank, int port,
                                    const std::vector<std::string>& peers = {});
// The job's and the workers' flags, as every worker (and its --check-job) gets them.
std::vector<std::string> WorkerJobArgs(const LaunchOptions& options);
// Examples the whole job processes per step of the chief (sync: batch x gradients per step;
// async and SSP: batch x workers), for the progress bar's rate.
int64_t ExamplesPerChiefStep(const ps::JobConfig& job);
// Where worker 0 of a --worker-cmd job keeps its collectives' rendezvous (a PyTorch script's
// torch.distributed group; WorkerOptions::dist_endpoint): --dist-endpoint as given, else
// tcp://`host`:`port`; "" for native workers, which have no collectives. `port` is by
// convention the one after the servers' (base_port + server processes) where ports are fixed.
std::string DistEndpoint(const LaunchOptions& options, const std::string& host, int port);

// towerps-worker for worker `rank`, with the servers' endpoints (by server rank); the chief
// gets --progress-lines with job_progress_bar.
std::vector<std::string> WorkerArgv(const LaunchOptions& options, int rank,
                                    const std::vector<std::string>& endpoints);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_COMMAND_LINES_H_
