#include "launch/role.h"

#include <fstream>
#include <iterator>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/parse.h"

namespace towerps::launch {
namespace {

using nlohmann::json;

constexpr int kIntMax = std::numeric_limits<int>::max();
constexpr int kMaxNodes = 1000000;  // bounds the node list that SLURM_TASKS_PER_NODE expands to

Result<int> IntVar(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return NotFoundError(name + " is not set");
  return ParseInt(it->second, name, 0, kIntMax);
}

// The "host:port" strings of cluster[key].
Result<std::vector<std::string>> HostList(const json& cluster, const std::string& key,
                                          const std::string& where) {
  const auto list = cluster.find(key);
  if (list == cluster.end()) {
    return InvalidArgumentError(where + ": the cluster has no \"" + key + "\" list");
  }
  if (!list->is_array()) {
    return InvalidArgumentError(where + ": \"" + key + "\" is " + list->dump() +
                                ", not a list of \"host:port\" strings");
  }
  std::vector<std::string> out;
  for (const json& entry : *list) {
    const std::string hostport = entry.is_string() ? entry.get<std::string>() : entry.dump();
    const size_t colon = hostport.rfind(':');
    if (!entry.is_string() || colon == std::string::npos || colon == 0 ||
        colon + 1 == hostport.size()) {
      return InvalidArgumentError(where + ": \"" + key + "\" entry '" + hostport +
                                  "' is not host:port");
    }
    out.push_back(hostport);
  }
  if (out.empty()) return InvalidArgumentError(where + ": the \"" + key + "\" list is empty");
  return out;
}

// The port of a "host:port" entry of `where`.
Result<int> PortOf(const std::string& hostport, const std::string& where) {
  return ParseInt(std::string_view(hostport).substr(hostport.rfind(':') + 1),
                  where + ": the port of '" + hostport + "'", 1, 65535);
}

// task.type and task.index of a TOWERPS_CONFIG-style spec; type "" when there is no task.
Status TaskOf(const json& root, const std::string& where, std::string* type, int* index) {
  const auto task = root.find("task");
  if (task == root.end()) return Status::Ok();
  const auto t = task->find("type");
  if (!task->is_object() || t == task->end() || !t->is_string()) {
    return InvalidArgumentError(where + ": \"task\" is " + task->dump() +
                                ", not {\"type\": \"ps\"|\"worker\", \"index\": i}");
  }
  *type = t->get<std::string>();
  const auto i = task->find("index");
  if (i == task->end()) return Status::Ok();
  // An index written as a string ("1") is accepted too, as it always was.
  const std::string text = i->is_string() ? i->get<std::string>() : i->dump();
  if (!i->is_string() && !i->is_number_integer()) {
    return InvalidArgumentError(where + ": task.index " + text + " is not an integer");
  }
  TOWERPS_ASSIGN_OR_RETURN(*index, ParseInt(text, where + ": task.index", 0, kIntMax));
  return Status::Ok();
}

// The spec's JSON object; errors name `where`.
Result<json> ParseSpec(const std::string& spec, const std::string& where) {
  json root;
  try {
    root = json::parse(spec);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
    return InvalidArgumentError(where + ": not valid JSON (" + e.what() + ")");
  }
  if (!root.is_object()) {
    return InvalidArgumentError(where + ": the cluster spec is " + std::string(root.type_name()) +
                                ", not a JSON object");
  }
  return root;
}

// The workers of a cluster, by rank, and the key of its chief list ("" when it has none).
struct WorkerList {
  std::vector<std::string> workers;
  std::string chief_key;
};
Result<WorkerList> WorkersOf(const json& cluster, const std::string& where) {
  WorkerList out;
  // TensorFlow's chief (TF1's "master") is worker 0, and the "worker" list follows it; with a
  // chief, the "worker" list may be absent (a chief alone) but not empty.
  for (const char* key : {"chief", "master"}) {
    if (!cluster.contains(key)) continue;
    if (!out.chief_key.empty()) {
      return InvalidArgumentError(where +
                                  ": the cluster has both \"chief\" and \"master\"; "
                                  "give one (TensorFlow's chief)");
    }
    out.chief_key = key;
    TOWERPS_ASSIGN_OR_RETURN(out.workers, HostList(cluster, key, where));
    if (out.workers.size() != 1) {
      return InvalidArgumentError(where + ": the \"" + out.chief_key + "\" list has " +
                                  std::to_string(out.workers.size()) +
                                  " entries; it takes exactly one");
    }
  }
  if (out.chief_key.empty() || cluster.contains("worker")) {
    TOWERPS_ASSIGN_OR_RETURN(std::vector<std::string> rest, HostList(cluster, "worker", where));
    out.workers.insert(out.workers.end(), rest.begin(), rest.end());
  }
  return out;
}

}  // namespace

Result<RoleAssignment> RoleFromClusterSpec(const std::string& spec, const std::string& role_arg,
                                           int index_arg, const std::string& where) {
  TOWERPS_ASSIGN_OR_RETURN(const json root, ParseSpec(spec, where));
  const auto nested = root.find("cluster");
  const json& cluster = nested != root.end() ? *nested : root;
  if (!cluster.is_object()) {
    return InvalidArgumentError(where + ": \"cluster\" is " + cluster.dump() +
                                ", not an object with \"ps\" and \"worker\" lists");
  }
  TOWERPS_ASSIGN_OR_RETURN(std::vector<std::string> ps, HostList(cluster, "ps", where));
  TOWERPS_ASSIGN_OR_RETURN(const WorkerList listed, WorkersOf(cluster, where));
  const std::vector<std::string>& workers = listed.workers;
  const std::string& chief_key = listed.chief_key;
  const int first_worker = chief_key.empty() ? 0 : 1;  // the "worker" list's index 0
  std::vector<int> ports;
  for (const std::string& hp : ps) {
    TOWERPS_ASSIGN_OR_RETURN(const int port, PortOf(hp, where));
    ports.push_back(port);
  }
  std::string role = role_arg;
  int index = index_arg;
  if (role.empty()) {
    index = 0;  // TensorFlow's default when the task has no index
    TOWERPS_RETURN_IF_ERROR(TaskOf(root, where, &role, &index));
    if (role.empty()) {
      return InvalidArgumentError(where +
                                  " has no \"task\" entry; pass --role ps|worker --index i");
    }
  }
  RoleAssignment a;
  a.servers = static_cast<int>(ps.size());
  a.workers = static_cast<int>(workers.size());
  const std::vector<std::string>* list = nullptr;
  if (role == "ps") {
    a.role = RoleAssignment::Role::kServer;
    list = &ps;
  } else if (role == "worker") {
    list = &workers;
    if (index >= 0) index += first_worker;
  } else if ((role == "chief" || role == "master") && !chief_key.empty()) {
    list = &workers;
    if (index != 0 && index != -1) {
      return InvalidArgumentError(where + ": " + role + " index " + std::to_string(index) +
                                  " is not 0; there is one chief");
    }
    index = 0;
  } else if (role == "evaluator") {
    return InvalidArgumentError(where +
                                ": task type \"evaluator\" has no TowerPS process: the "
                                "chief evaluates the test set after every epoch and at the end "
                                "(and `towerps-launch --eval-only` evaluates a checkpoint)");
  } else {
    return InvalidArgumentError("role '" + role + "' is not ps, " +
                                (chief_key.empty() ? std::string("worker") : "chief, worker") +
                                (chief_key.empty() && (role == "chief" || role == "master")
                                     ? " (the cluster has no \"" + role + "\" list)"
                                     : std::string()));
  }
  const int offset = list == &workers && role == "worker" ? first_worker : 0;
  if (index < offset || index >= static_cast<int>(list->size())) {
    return InvalidArgumentError("index " + std::to_string(index - offset) + " is outside the " +
                                std::to_string(list->size() - offset) + " \"" + role +
                                "\" entries of " + where);
  }
  a.rank = index;
  if (a.role == RoleAssignment::Role::kServer) a.port = ports[index];
  for (const std::string& hp : ps) a.ps_endpoints.push_back("tcp://" + hp);
  // Worker 0's host keeps the collectives' rendezvous, on the port after the highest ps port
  // (the worker entries' ports are not used: a TowerPS worker listens nowhere).
  int after_ps = 0;
  for (const int p : ports) after_ps = std::max(after_ps, p + 1);
  if (!workers.empty()) {
    a.dist_endpoint =
        "tcp://" + workers[0].substr(0, workers[0].rfind(':')) + ":" + std::to_string(after_ps);
  }
  return a;
}

Result<RankLayout> MpiLayout(const Environment& env) {
  RankLayout l;
  if (env.count("OMPI_COMM_WORLD_RANK")) {
    TOWERPS_ASSIGN_OR_RETURN(l.rank, IntVar(env, "OMPI_COMM_WORLD_RANK"));
    TOWERPS_ASSIGN_OR_RETURN(l.size, IntVar(env, "OMPI_COMM_WORLD_SIZE"));
    TOWERPS_ASSIGN_OR_RETURN(l.local_rank, IntVar(env, "OMPI_COMM_WORLD_LOCAL_RANK"));
    if (auto local = IntVar(env, "OMPI_COMM_WORLD_LOCAL_SIZE"); local.ok() && *local == l.size) {
      l.hosts_of_rank.assign(l.size, "127.0.0.1");  // one node: loopback
    }
  } else if (env.count("PMI_RANK")) {
    TOWERPS_ASSIGN_OR_RETURN(l.rank, IntVar(env, "PMI_RANK"));
    TOWERPS_ASSIGN_OR_RETURN(l.size, IntVar(env, "PMI_SIZE"));
    auto local = IntVar(env, "MPI_LOCALRANKID");
    l.local_rank = local.ok() ? *local : 0;
  } else if (env.count("PMIX_RANK")) {
    TOWERPS_ASSIGN_OR_RETURN(l.rank, IntVar(env, "PMIX_RANK"));
    TOWERPS_ASSIGN_OR_RETURN(l.size, IntVar(env, "PMIX_SIZE"));
  } else {
    return NotFoundError(
        "--mpi: no MPI rank in the environment (OMPI_COMM_WORLD_RANK, PMI_RANK "
        "or PMIX_RANK); start it under mpirun");
  }
  if (l.rank >= l.size) {
    return InvalidArgumentError("MPI rank " + std::to_string(l.rank) + " >= size " +
                                std::to_string(l.size));
  }
  return l;
}

Result<std::vector<int>> ParseTasksPerNode(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    // N, or N(xK): K nodes with N tasks each.
    const std::string_view entry = item;
    const size_t paren = entry.find('(');
    std::string_view repeat_text = "1";
    bool well_formed = true;
    if (paren != std::string_view::npos) {
      well_formed =
          entry.substr(paren, 2) == "(x" && entry.back() == ')' && entry.size() > paren + 3;
      if (well_formed) repeat_text = entry.substr(paren + 2, entry.size() - paren - 3);
    }
    const Result<int> count = ParseInt(entry.substr(0, paren), "SLURM_TASKS_PER_NODE", 1, kIntMax);
    const Result<int> repeat = ParseInt(repeat_text, "SLURM_TASKS_PER_NODE", 1, kMaxNodes);
    if (!well_formed || !count.ok() || !repeat.ok()) {
      return InvalidArgumentError("SLURM_TASKS_PER_NODE entry '" + item + "' is not N or N(xK)");
    }
    out.insert(out.end(), *repeat, *count);
  }
  if (out.empty()) return InvalidArgumentError("SLURM_TASKS_PER_NODE is empty");
  return out;
}

Result<RankLayout> SlurmLayout(const Environment& env, const std::vector<std::string>& nodes) {
  RankLayout l;
  TOWERPS_ASSIGN_OR_RETURN(l.rank, IntVar(env, "SLURM_PROCID"));
  TOWERPS_ASSIGN_OR_RETURN(l.size, IntVar(env, "SLURM_NTASKS"));
  TOWERPS_ASSIGN_OR_RETURN(l.local_rank, IntVar(env, "SLURM_LOCALID"));
  auto tpn = env.find("SLURM_TASKS_PER_NODE");
  if (tpn == env.end()) return NotFoundError("SLURM_TASKS_PER_NODE is not set");
  TOWERPS_ASSIGN_OR_RETURN(std::vector<int> per_node, ParseTasksPerNode(tpn->second));
  if (per_node.size() != nodes.size()) {
    return InvalidArgumentError("SLURM_TASKS_PER_NODE lists " + std::to_string(per_node.size()) +
                                " nodes but the node list has " + std::to_string(nodes.size()));
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    l.hosts_of_rank.insert(l.hosts_of_rank.end(), per_node[n], nodes[n]);  // block distribution
  }
  if (static_cast<int>(l.hosts_of_rank.size()) != l.size) {
    return InvalidArgumentError("SLURM_TASKS_PER_NODE adds up to " +
                                std::to_string(l.hosts_of_rank.size()) +
                                " tasks, SLURM_NTASKS=" + std::to_string(l.size));
  }
  return l;
}

Result<RoleAssignment> RoleFromLayout(const RankLayout& l, int servers, int servers_per_node,
                                      int base_port) {
  // Which global ranks are servers, in server-rank order.
  std::vector<int> server_ranks;
  if (servers_per_node > 0) {
    if (l.hosts_of_rank.empty()) {
      return InvalidArgumentError("--servers-per-node needs the host of every rank (Slurm)");
    }
    std::map<std::string, int> seen;
    for (int r = 0; r < l.size; ++r) {
      if (seen[l.hosts_of_rank[r]]++ < servers_per_node) server_ranks.push_back(r);
    }
  } else {
    for (int r = 0; r < servers && r < l.size; ++r) server_ranks.push_back(r);
  }
  RoleAssignment a;
  a.servers = static_cast<int>(server_ranks.size());
  a.workers = l.size - a.servers;
  a.local_rank = l.local_rank;
  if (a.servers < 1 || a.workers < 1) {
    return InvalidArgumentError(std::to_string(l.size) + " processes cannot hold " +
                                std::to_string(a.servers) + " servers and at least one worker");
  }
  int worker_rank = 0;
  for (int r = 0; r < l.size; ++r) {
    const auto it = std::find(server_ranks.begin(), server_ranks.end(), r);
    if (it == server_ranks.end() && worker_rank == 0 && !l.hosts_of_rank.empty()) {
      a.dist_endpoint = "tcp://" + l.hosts_of_rank[r] + ":" + std::to_string(base_port + a.servers);
    }
    if (r == l.rank) {
      if (it != server_ranks.end()) {
        a.role = RoleAssignment::Role::kServer;
        a.rank = static_cast<int>(it - server_ranks.begin());
        a.port = base_port + a.rank;
      } else {
        a.rank = worker_rank;
      }
    }
    if (it == server_ranks.end()) ++worker_rank;
  }
  if (!l.hosts_of_rank.empty()) {
    for (size_t s = 0; s < server_ranks.size(); ++s) {
      a.ps_endpoints.push_back("tcp://" + l.hosts_of_rank[server_ranks[s]] + ":" +
                               std::to_string(base_port + static_cast<int>(s)));
    }
  }
  return a;
}

Result<std::vector<std::string>> ExpandSlurmNodelist(const std::string& nodelist) {
  const std::string command = "scontrol show hostnames '" + nodelist + "' 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return InternalError("cannot run scontrol");
  std::vector<std::string> nodes;
  char line[512];
  std::string output;
  while (std::fgets(line, sizeof(line), pipe.get())) {
    std::string name(line);
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
    output += name + " ";
    if (!name.empty()) nodes.push_back(name);
  }
  const int rc = pclose(pipe.release());
  if (rc != 0 || nodes.empty()) {
    return FailedPreconditionError("scontrol show hostnames " + nodelist + " failed: " + output);
  }
  return nodes;
}

std::string ClusterSpecVariable(const RankModeFlags& flags, const Environment& env) {
  if (flags.mpi || flags.slurm) return "";
  return env.count("TOWERPS_CONFIG") ? "TOWERPS_CONFIG" : env.count("TF_CONFIG") ? "TF_CONFIG" : "";
}

bool IsRankProcess(const RankModeFlags& flags, const Environment& env, bool on_hosts) {
  return !flags.cluster_file.empty() || flags.mpi || flags.slurm ||
         (!on_hosts && !ClusterSpecVariable(flags, env).empty());
}

Result<RoleAssignment> ResolveRole(const RankModeFlags& flags, const Environment& env, int servers,
                                   int base_port) {
  const std::string spec_var = ClusterSpecVariable(flags, env);
  if (!flags.cluster_file.empty()) {
    std::ifstream in(flags.cluster_file);
    if (!in)
      return InvalidArgumentError("--cluster " + flags.cluster_file + ": cannot open the file");
    const std::string json(std::istreambuf_iterator<char>(in), {});
    return RoleFromClusterSpec(json, flags.role, flags.index, flags.cluster_file);
  }
  if (!spec_var.empty()) {
    return RoleFromClusterSpec(env.at(spec_var), flags.role, flags.index, spec_var);
  }
  if (flags.mpi) {
    TOWERPS_ASSIGN_OR_RETURN(const RankLayout layout, MpiLayout(env));
    return RoleFromLayout(layout, servers, 0, base_port);
  }
  const auto nodelist = env.find("SLURM_JOB_NODELIST");
  if (nodelist == env.end()) {
    return NotFoundError("--slurm: SLURM_JOB_NODELIST is not set; run under srun");
  }
  TOWERPS_ASSIGN_OR_RETURN(const std::vector<std::string> nodes,
                           ExpandSlurmNodelist(nodelist->second));
  TOWERPS_ASSIGN_OR_RETURN(const RankLayout layout, SlurmLayout(env, nodes));
  return RoleFromLayout(layout, servers, flags.servers_per_node, base_port);
}

Environment ReadEnvironment(char** environ) {
  Environment env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace towerps::launch
