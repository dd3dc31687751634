#include "launch/role.h"

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

namespace towerps::launch {
namespace {

namespace pt = boost::property_tree;

Result<int> IntVar(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return NotFoundError(name + " is not set");
  try {
    size_t used = 0;
    const int v = std::stoi(it->second, &used);
    if (used == it->second.size() && v >= 0) return v;
  } catch (...) {
  }
  return InvalidArgumentError(name + "=" + it->second + " is not a non-negative integer");
}

Result<std::vector<std::string>> HostList(const pt::ptree& cluster, const std::string& key,
                                          const std::string& where) {
  std::vector<std::string> out;
  auto child = cluster.get_child_optional(key);
  if (!child) return InvalidArgumentError(where + ": the cluster has no \"" + key + "\" list");
  for (const auto& [k, v] : *child) {
    const std::string hostport = v.get_value<std::string>();
    const size_t colon = hostport.rfind(':');
    if (!k.empty() || colon == std::string::npos || colon == 0 || colon + 1 == hostport.size()) {
      return InvalidArgumentError(where + ": \"" + key + "\" entry '" + hostport +
                                  "' is not host:port");
    }
    out.push_back(hostport);
  }
  if (out.empty()) return InvalidArgumentError(where + ": the \"" + key + "\" list is empty");
  return out;
}

}  // namespace

Result<RoleAssignment> RoleFromClusterSpec(const std::string& json, const std::string& role_arg,
                                           int index_arg, const std::string& where) {
  pt::ptree root;
  try {
    std::istringstream in(json);
    pt::read_json(in, root);
  } catch (const pt::json_parser_error& e) {
    return InvalidArgumentError(where + ": not valid JSON (line " + std::to_string(e.line()) +
                                ": " + e.message() + ")");
  }
  const pt::ptree& cluster = root.get_child_optional("cluster") ? root.get_child("cluster") : root;
  TOWERPS_ASSIGN_OR_RETURN(std::vector<std::string> ps, HostList(cluster, "ps", where));
  TOWERPS_ASSIGN_OR_RETURN(std::vector<std::string> workers, HostList(cluster, "worker", where));
  std::string role = role_arg;
  int index = index_arg;
  if (role.empty()) {
    role = root.get<std::string>("task.type", "");
    index = root.get<int>("task.index", -1);
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
  } else {
    return InvalidArgumentError("role '" + role + "' is not ps or worker");
  }
  if (index < 0 || index >= static_cast<int>(list->size())) {
    return InvalidArgumentError("index " + std::to_string(index) + " is outside the " +
                                std::to_string(list->size()) + " \"" + role + "\" entries of " +
                                where);
  }
  a.rank = index;
  if (a.role == RoleAssignment::Role::kServer) {
    const std::string& hp = ps[index];
    try {
      a.port = std::stoi(hp.substr(hp.rfind(':') + 1));
    } catch (...) {
      return InvalidArgumentError(where + ": bad port in '" + hp + "'");
    }
  }
  for (const std::string& hp : ps) a.ps_endpoints.push_back("tcp://" + hp);
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
    int count = 0, repeat = 1;
    if (std::sscanf(item.c_str(), "%d(x%d)", &count, &repeat) < 1 || count < 1 || repeat < 1) {
      return InvalidArgumentError("SLURM_TASKS_PER_NODE entry '" + item + "' is not N or N(xK)");
    }
    out.insert(out.end(), repeat, count);
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

}  // namespace towerps::launch
