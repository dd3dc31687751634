// The hostfile (launch/hostfile.h: ParseHostfile, then PlaceOnHosts), which `towerps-launch
// --hostfile FILE` reads, and -H's host list (ParseHostList). The input is the file's text. A
// hostfile that parses lists each host once, by a name that is one word not starting with '-', with
// at least one slot; written back in the documented format it parses to the same entries. Placing a
// few servers and workers on it either fails with kInvalidArgument or uses no host beyond its slots
// and roles, with ranks in order.
#include <cstdint>
#include <map>
#include <string>

#include "launch/hostfile.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using towerps::launch::HostEntry;

std::string Render(const std::vector<HostEntry>& hosts) {
  std::string out;
  for (const HostEntry& e : hosts) {
    out += e.host + " slots=" + std::to_string(e.slots);
    if (e.takes == HostEntry::Takes::kServers) out += " servers";
    if (e.takes == HostEntry::Takes::kWorkers) out += " workers";
    out += "\n";
  }
  return out;
}

bool Same(const std::vector<HostEntry>& a, const std::vector<HostEntry>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].host != b[i].host || a[i].slots != b[i].slots || a[i].takes != b[i].takes) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace towerps;
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The same text as -H's host list: an error of the right kind, or hosts with slots.
  if (Result<std::vector<HostEntry>> list = launch::ParseHostList(text, "-H"); list.ok()) {
    for (const HostEntry& e : *list) FUZZ_CHECK(e.slots >= 1 && !e.host.empty(), "-H " + e.host);
  } else {
    FUZZ_CHECK(list.status().code() == StatusCode::kInvalidArgument,
               "unexpected -H error kind: " + list.status().ToString());
  }
  Result<std::vector<HostEntry>> hosts = launch::ParseHostfile(text, "fuzz-hosts");
  if (!hosts.ok()) {
    FUZZ_CHECK(hosts.status().code() == StatusCode::kInvalidArgument,
               "unexpected error kind: " + hosts.status().ToString());
    return 0;
  }
  FUZZ_CHECK(!hosts->empty(), "an empty hostfile parsed");
  std::map<std::string, const HostEntry*> by_name;
  for (const HostEntry& e : *hosts) {
    FUZZ_CHECK(!e.host.empty() && e.host[0] != '-', "host '" + e.host + "'");
    FUZZ_CHECK(e.host.find_first_of(" \t\n\v\f\r#") == std::string::npos,
               "host '" + e.host + "' is not one word");
    FUZZ_CHECK(e.slots >= 1, "host " + e.host + " has " + std::to_string(e.slots) + " slots");
    FUZZ_CHECK(by_name.emplace(e.host, &e).second, "host " + e.host + " listed twice");
  }
  Result<std::vector<HostEntry>> again = launch::ParseHostfile(Render(*hosts), "rendered");
  FUZZ_CHECK(again.ok() && Same(*hosts, *again), "written back, the hostfile reads differently");

  const int servers = 1 + static_cast<int>(size % 3);
  const int workers = 1 + static_cast<int>((size / 3) % 8);
  Result<std::vector<launch::HostPlacement>> plan = launch::PlaceOnHosts(*hosts, servers, workers);
  if (!plan.ok()) {
    FUZZ_CHECK(plan.status().code() == StatusCode::kInvalidArgument,
               "unexpected error kind: " + plan.status().ToString());
    return 0;
  }
  FUZZ_CHECK(plan->size() == static_cast<size_t>(servers + workers), "placement count");
  std::map<std::string, int> used;
  for (size_t i = 0; i < plan->size(); ++i) {
    const launch::HostPlacement& p = (*plan)[i];
    const bool server = i < static_cast<size_t>(servers);
    FUZZ_CHECK(p.server == server, "servers come first");
    FUZZ_CHECK(p.rank == (server ? static_cast<int>(i) : static_cast<int>(i) - servers), "rank");
    const auto it = by_name.find(p.host);
    FUZZ_CHECK(it != by_name.end(), "placed on unknown host " + p.host);
    const HostEntry::Takes no = server ? HostEntry::Takes::kWorkers : HostEntry::Takes::kServers;
    FUZZ_CHECK(it->second->takes != no, "role placed on a host that refuses it");
    FUZZ_CHECK(++used[p.host] <= it->second->slots, "host " + p.host + " over its slots");
  }
  return 0;
}
