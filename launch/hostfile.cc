#include "launch/hostfile.h"

#include <cstdint>
#include <limits>
#include <map>
#include <sstream>

#include "common/parse.h"

namespace towerps::launch {

Result<std::vector<HostEntry>> ParseHostfile(const std::string& text, const std::string& where) {
  std::vector<HostEntry> hosts;
  std::map<std::string, int> line_of_host;
  std::istringstream in(text);
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const std::string at = where + ":" + std::to_string(line_no) + ": ";
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    HostEntry e;
    if (!(words >> e.host)) continue;
    if (e.host[0] == '-') {
      return InvalidArgumentError(at + "'" + e.host + "' is not a host name");
    }
    bool have_slots = false, have_role = false;
    for (std::string w; words >> w;) {
      if (w.rfind("slots=", 0) == 0) {
        const Result<int> slots =
            ParseInt(std::string_view(w).substr(6), "slots", 1, std::numeric_limits<int>::max());
        if (have_slots || !slots.ok()) {
          return InvalidArgumentError(at + "'" + w +
                                      "' is not a slot count; write slots=K with K >= 1, once");
        }
        e.slots = *slots;
        have_slots = true;
      } else if ((w == "servers" || w == "workers") && !have_role) {
        e.takes = w == "servers" ? HostEntry::Takes::kServers : HostEntry::Takes::kWorkers;
        have_role = true;
      } else {
        return InvalidArgumentError(at + "unexpected '" + w +
                                    "'; a line is 'HOST slots=K [servers|workers]'");
      }
    }
    if (auto [it, fresh] = line_of_host.emplace(e.host, line_no); !fresh) {
      return InvalidArgumentError(at + "host '" + e.host + "' is already listed on line " +
                                  std::to_string(it->second) + "; give it one line with its " +
                                  "total slots");
    }
    hosts.push_back(std::move(e));
  }
  if (hosts.empty()) return InvalidArgumentError(where + ": lists no hosts");
  return hosts;
}

Result<std::vector<HostPlacement>> PlaceOnHosts(const std::vector<HostEntry>& hosts, int servers,
                                                int workers) {
  using Takes = HostEntry::Takes;
  std::vector<int> free(hosts.size());
  std::vector<int> servers_on(hosts.size(), 0), workers_on(hosts.size(), 0);
  // 64-bit: a hostfile may give many hosts up to INT_MAX slots each.
  int64_t server_slots = 0, worker_slots = 0, total = 0;
  for (size_t h = 0; h < hosts.size(); ++h) {
    free[h] = hosts[h].slots;
    total += hosts[h].slots;
    if (hosts[h].takes != Takes::kWorkers) server_slots += hosts[h].slots;
    if (hosts[h].takes != Takes::kServers) worker_slots += hosts[h].slots;
  }
  auto shortage = [&](const std::string& what) {
    return InvalidArgumentError("the hostfile has " + std::to_string(total) + " slots (" +
                                std::to_string(server_slots) + " that take servers, " +
                                std::to_string(worker_slots) + " that take workers), too few " +
                                what + " for --servers=" + std::to_string(servers) +
                                " and --workers=" + std::to_string(workers) +
                                "; add slots or hosts, or start fewer processes");
  };
  std::vector<HostPlacement> out;
  // Servers: round-robin over the hosts that take them, one per host per round.
  for (int r = 0; r < servers;) {
    bool placed = false;
    for (size_t h = 0; h < hosts.size() && r < servers; ++h) {
      if (hosts[h].takes == Takes::kWorkers || free[h] == 0) continue;
      out.push_back({true, r++, servers_on[h]++, hosts[h].host});
      --free[h];
      placed = true;
    }
    if (!placed) return shortage("for the servers");
  }
  // Workers: fill the remaining slots host by host.
  int w = 0;
  for (size_t h = 0; h < hosts.size() && w < workers; ++h) {
    if (hosts[h].takes == Takes::kServers) continue;
    for (; free[h] > 0 && w < workers; --free[h]) {
      out.push_back({false, w++, workers_on[h]++, hosts[h].host});
    }
  }
  if (w < workers) return shortage("left for the workers after the servers");
  return out;
}

}  // namespace towerps::launch
