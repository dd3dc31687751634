// --worker-cmd: workers that are the user's own program (a PyTorch script using the `towerps`
// Python package, python/towerps/torch.py) instead of a towerps-worker binary.
//
// Such a worker is started as `towerps-launch --exec-worker-cmd CMD <worker flags>`: the flags
// a towerps-worker would get (rank, servers, job and worker options, and a restarted worker's
// --ready-file, which the supervisor appends). That entry exports them as JSON in
// TOWERPS_WORKER_ARGS and replaces itself (exec) with `/bin/sh -c CMD`, so the script's process
// is the one the launcher watches, signals and restarts, and tps.init() reads its options from
// the environment. The job's secret stays in TOWERPS_SECRET_FILE, never on a command line.
//
// The script's process allocates with the malloc --worker-allocator names. By default it is
// gperftools' tcmalloc, which TowerPS's own programs link (cmake/TowerpsMalloc.cmake): the exec
// entry puts it first in LD_PRELOAD, as PyTorch's CPU launcher (torch.backends.xeon.run_cpu)
// preloads tcmalloc or jemalloc. A library cannot choose its process's allocator, and glibc's
// serves the client's pattern badly: its I/O thread frees what the script's thread allocated,
// past glibc's per-thread caches and under an arena's lock (docs/PERFORMANCE.md, "The script's
// allocator").
//
// Contract: pure argv builders and one exec entry, called by main() before its own parsing.
#ifndef TOWERPS_LAUNCH_WORKER_CMD_H_
#define TOWERPS_LAUNCH_WORKER_CMD_H_

#include <string>
#include <vector>

#include "common/enum_names.h"
#include "towerps/result.h"

namespace towerps::launch {

inline constexpr char kExecWorkerCmdFlag[] = "--exec-worker-cmd";

// --worker-allocator. kAuto: tcmalloc where this launcher was built with it and the worker's
// host has the library, else the C library's; kTcmalloc: tcmalloc, or the worker fails naming
// the library; kSystem: the C library's malloc.
enum class WorkerAllocator { kAuto, kTcmalloc, kSystem };
inline constexpr EnumNames<WorkerAllocator, 3> kWorkerAllocators{
    "--worker-allocator",
    {{{WorkerAllocator::kAuto, "auto"},
      {WorkerAllocator::kTcmalloc, "tcmalloc"},
      {WorkerAllocator::kSystem, "system"}}}};
// "auto", "tcmalloc" or "system"; kInvalidArgument naming `text` otherwise.
Result<WorkerAllocator> ParseWorkerAllocator(const std::string& text);
// The library kTcmalloc preloads; empty when this launcher was built without tcmalloc.
std::string TcmallocLibrary();

// The argv of a --worker-cmd worker: `worker_argv` (a towerps-worker's, binary first) with the
// binary replaced by this launcher in its exec mode, `allocator` after the command.
std::vector<std::string> WorkerCmdArgv(const std::string& worker_cmd, WorkerAllocator allocator,
                                       const std::vector<std::string>& worker_argv);

// `towerps-launch --exec-worker-cmd CMD ALLOCATOR ARGS...`: exports ARGS, preloads ALLOCATOR's
// library, and execs CMD (through /bin/sh when it has shell syntax). Returns only when that
// fails: 127, having said why on stderr.
int ExecWorkerCmd(int argc, char** argv);

// The arguments as TOWERPS_WORKER_ARGS holds them: a JSON array of strings.
std::string WorkerArgsJson(const std::vector<std::string>& args);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_WORKER_CMD_H_
