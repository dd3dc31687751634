// Process-per-rank launching: when a cluster engine (mpirun, srun) or the user starts one
// towerps-launch per process, each one works out its own role and becomes that process.
//
// RoleAssignment says what this process is: a server (rank, port to listen on) or a worker
// (rank, the servers' endpoints). The resolvers read the conventions of each engine:
//   cluster spec  --cluster FILE --role ps|worker --index i, or TOWERPS_CONFIG (as TF_CONFIG)
//   MPI           OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK, else PMI_RANK/PMI_SIZE, else PMIX_RANK
//   Slurm         SLURM_PROCID/NTASKS/LOCALID, SLURM_JOB_NODELIST (scontrol show hostnames),
//                 SLURM_TASKS_PER_NODE
// In the MPI and Slurm modes the first `servers` ranks are servers (or, with servers per node,
// the first local ranks of each node) and the rest are workers; server r listens on
// base_port + r.
//
// Contract: pure functions of their inputs (the environment is passed in as a map, read only by
// the entry point), except ExpandSlurmNodelist, which runs scontrol. Errors name the variable or
// file that is missing or wrong.
#ifndef TOWERPS_LAUNCH_ROLE_H_
#define TOWERPS_LAUNCH_ROLE_H_

#include <map>
#include <string>
#include <vector>

#include "towerps/result.h"

namespace towerps::launch {

struct RoleAssignment {
  enum class Role { kServer, kWorker } role = Role::kWorker;
  int rank = 0;        // server rank or worker rank
  int local_rank = 0;  // among this node's processes: picks the GPU
  int servers = 0, workers = 0;
  int port = 0;                           // servers: where to listen
  std::vector<std::string> ps_endpoints;  // workers: tcp://host:port, by server rank
  // Workers: tcp://host:port where worker 0 keeps the rendezvous of the workers' collectives:
  // on worker 0's host, the port after the servers' (base_port + servers; with a cluster spec,
  // the highest ps port + 1); "" where hosts are unknown.
  std::string dist_endpoint;
};

using Environment = std::map<std::string, std::string>;

// TensorFlow-style cluster spec, JSON text read from `where` (a file name, TF_CONFIG or
// TOWERPS_CONFIG): {"cluster": {"ps": ["h:p", ...], "worker": ["h:p", ...]}, "task": {"type":
// "worker", "index": 1}} (or the two maps without "cluster"). As in TensorFlow, the cluster may
// have a "chief" (TF1: "master") list of one entry: the chief is worker 0 and the "worker" list
// follows it, so {"type": "worker", "index": 0} is then worker rank 1. An empty `role` takes the
// task from the JSON. Errors name `where`; malformed JSON gives the parser's message (line and
// column); an "evaluator" task is refused, saying the chief evaluates.
Result<RoleAssignment> RoleFromClusterSpec(const std::string& spec, const std::string& role,
                                           int index, const std::string& where);

// MPI or Slurm ranks; `hosts_of_rank` maps every global rank to its host (Slurm), or is empty
// when all ranks share one host (MPI without a host map).
struct RankLayout {
  int rank = 0, size = 0, local_rank = 0;
  std::vector<std::string> hosts_of_rank;
};
Result<RankLayout> MpiLayout(const Environment& env);
Result<RankLayout> SlurmLayout(const Environment& env, const std::vector<std::string>& nodes);
Result<RoleAssignment> RoleFromLayout(const RankLayout& layout, int servers, int servers_per_node,
                                      int base_port);

// The process-per-rank flags as given: --cluster FILE with --role and --index, --mpi, --slurm
// with --servers-per-node.
struct RankModeFlags {
  std::string cluster_file, role;
  int index = -1;
  int servers_per_node = 0;
  bool mpi = false, slurm = false;
};

// The environment variable holding a cluster spec: TOWERPS_CONFIG (which wins) or TF_CONFIG;
// "" when neither is set, or when --mpi or --slurm say where the roles come from.
std::string ClusterSpecVariable(const RankModeFlags& flags, const Environment& env);
// Whether this towerps-launch is one process of a process-per-rank job (not one that starts the
// job's processes itself: `on_hosts`, --hostfile or -H, is such a job).
bool IsRankProcess(const RankModeFlags& flags, const Environment& env, bool on_hosts);
// This process's role in a process-per-rank job, by the first of --cluster, a spec in the
// environment, --mpi and --slurm; `servers` (--servers) and `base_port` for the MPI and Slurm
// layouts. Errors name the flag, file or variable.
Result<RoleAssignment> ResolveRole(const RankModeFlags& flags, const Environment& env, int servers,
                                   int base_port);
// `environ` as a map.
Environment ReadEnvironment(char** environ);

// "node[01-03],gpu7" through `scontrol show hostnames`.
Result<std::vector<std::string>> ExpandSlurmNodelist(const std::string& nodelist);
// "2(x3),1" -> {2, 2, 2, 1}.
Result<std::vector<int>> ParseTasksPerNode(const std::string& text);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_ROLE_H_
