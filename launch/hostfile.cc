#include "launch/hostfile.h"

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "common/parse.h"

namespace towerps::launch {

namespace {

// One host from its first word (a name, with ":N" slots as Horovod writes it) and the words
// after it; `at` starts every error.
Result<HostEntry> ParseHost(const std::string& first, const std::vector<std::string>& words,
                            const std::string& at) {
  constexpr int kMax = std::numeric_limits<int>::max();
  HostEntry e;
  e.host = first;
  std::optional<int> colon_slots, slots, max_slots;
  // "node1:4"; a name with more colons is an IPv6 address, taken whole.
  if (const size_t colon = first.find(':');
      colon != std::string::npos && first.find(':', colon + 1) == std::string::npos) {
    const Result<int> n = ParseInt(std::string_view(first).substr(colon + 1), "slots", 1, kMax);
    if (!n.ok() || colon == 0) {
      return InvalidArgumentError(at + "'" + first + "' is not HOST or HOST:N with N >= 1 slots");
    }
    e.host = first.substr(0, colon);
    colon_slots = *n;
  }
  if (e.host.empty() || e.host[0] == '-') {
    return InvalidArgumentError(at + "'" + first + "' is not a host name");
  }
  bool have_role = false;
  for (const std::string& w : words) {
    const bool is_slots = w.rfind("slots=", 0) == 0, is_max = w.rfind("max_slots=", 0) == 0;
    if (is_slots || is_max) {
      std::optional<int>& field = is_slots ? slots : max_slots;
      const Result<int> n =
          ParseInt(std::string_view(w).substr(is_slots ? 6 : 10), "slots", 1, kMax);
      if (field || !n.ok()) {
        return InvalidArgumentError(at + "'" + w + "' is not a slot count; write " +
                                    (is_slots ? "slots" : "max_slots") + "=K with K >= 1, once");
      }
      field = *n;
    } else if ((w == "servers" || w == "workers") && !have_role) {
      e.takes = w == "servers" ? HostEntry::Takes::kServers : HostEntry::Takes::kWorkers;
      have_role = true;
    } else {
      return InvalidArgumentError(at + "unexpected '" + w +
                                  "'; a line is 'HOST[:N] [slots=K] [max_slots=M] "
                                  "[servers|workers]'");
    }
  }
  if (colon_slots && slots) {
    return InvalidArgumentError(at + "'" + first + "' and 'slots=" + std::to_string(*slots) +
                                "' both give the slot count; give it once");
  }
  if (colon_slots) slots = colon_slots;
  // OpenMPI's max_slots caps the host; without slots= it is the slot count (we never place
  // more processes on a host than its slots).
  if (slots && max_slots && *slots > *max_slots) {
    return InvalidArgumentError(at + e.host + " has " + std::to_string(*slots) +
                                " slots, more than its max_slots=" + std::to_string(*max_slots));
  }
  e.slots = slots ? *slots : max_slots ? *max_slots : 1;
  return e;
}

// Adds `e`, refusing a host listed twice; `where` says where it was ("on line 3").
Status AddHost(HostEntry e, const std::string& where, const std::string& at,
               std::map<std::string, std::string>* seen, std::vector<HostEntry>* hosts) {
  if (auto [it, fresh] = seen->emplace(e.host, where); !fresh) {
    return InvalidArgumentError(at + "host '" + e.host + "' is already listed " + it->second +
                                "; give it once with its total slots");
  }
  hosts->push_back(std::move(e));
  return Status::Ok();
}

}  // namespace

Result<std::vector<HostEntry>> ParseHostfile(const std::string& text, const std::string& where) {
  std::vector<HostEntry> hosts;
  std::map<std::string, std::string> line_of_host;
  std::istringstream in(text);
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const std::string at = where + ":" + std::to_string(line_no) + ": ";
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream in_words(line);
    std::string first;
    if (!(in_words >> first)) continue;
    std::vector<std::string> words;
    for (std::string w; in_words >> w;) words.push_back(w);
    TOWERPS_ASSIGN_OR_RETURN(HostEntry e, ParseHost(first, words, at));
    TOWERPS_RETURN_IF_ERROR(
        AddHost(std::move(e), "on line " + std::to_string(line_no), at, &line_of_host, &hosts));
  }
  if (hosts.empty()) return InvalidArgumentError(where + ": lists no hosts");
  return hosts;
}

Result<std::vector<HostEntry>> ParseHostList(const std::string& text, const std::string& where) {
  std::vector<HostEntry> hosts;
  std::map<std::string, std::string> seen;
  std::istringstream in(text);
  int n = 0;
  for (std::string item; std::getline(in, item, ',');) {
    ++n;
    const std::string at = where + " entry " + std::to_string(n) + ": ";
    if (item.empty() || item.find_first_of(" \t") != std::string::npos) {
      return InvalidArgumentError(at + "'" + item +
                                  "' is not HOST or HOST:N; write host1:4,host2:4");
    }
    TOWERPS_ASSIGN_OR_RETURN(HostEntry e, ParseHost(item, {}, at));
    TOWERPS_RETURN_IF_ERROR(
        AddHost(std::move(e), "as entry " + std::to_string(n), at, &seen, &hosts));
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
