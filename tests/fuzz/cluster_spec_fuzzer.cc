// Cluster specs (launch/role.h: RoleFromClusterSpec), read from `towerps-launch --cluster FILE
// --role R --index I` and from the TOWERPS_CONFIG variable, which carries its own "task". One
// harness covers both: byte 0 picks the role argument ("" = TOWERPS_CONFIG, whose task comes
// from the JSON; "ps"; "worker"; a wrong one), byte 1 the index (signed), and the rest is the
// JSON text. An accepted spec gives a rank inside its role's list, at least one server and one
// worker, an endpoint per server, and a server its own entry's port, in 1..65535.
#include <cstdint>
#include <string>

#include "common/parse.h"
#include "launch/role.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace towerps;
  using launch::RoleAssignment;
  if (size < 2) return 0;
  static const char* const kRoles[] = {"", "ps", "worker", "chief"};
  const std::string role = kRoles[data[0] % 4];
  const int index = static_cast<int8_t>(data[1]);
  const std::string spec(reinterpret_cast<const char*>(data + 2), size - 2);
  Result<RoleAssignment> a =
      launch::RoleFromClusterSpec(spec, role, index, role.empty() ? "TOWERPS_CONFIG" : "fuzz.json");
  if (!a.ok()) {
    FUZZ_CHECK(a.status().code() == StatusCode::kInvalidArgument,
               "unexpected error kind: " + a.status().ToString());
    return 0;
  }
  FUZZ_CHECK(a->servers >= 1 && a->workers >= 1, "a job without servers or workers");
  FUZZ_CHECK(a->ps_endpoints.size() == static_cast<size_t>(a->servers), "one endpoint per server");
  for (const std::string& e : a->ps_endpoints) {
    FUZZ_CHECK(e.rfind("tcp://", 0) == 0 && e.find(':', 6) != std::string::npos, "endpoint " + e);
  }
  const bool server = a->role == RoleAssignment::Role::kServer;
  FUZZ_CHECK(a->rank >= 0 && a->rank < (server ? a->servers : a->workers),
             "rank " + std::to_string(a->rank));
  if (!role.empty()) FUZZ_CHECK(a->rank == index && server == (role == "ps"), "role or index");
  if (server) {
    const std::string& mine = a->ps_endpoints[a->rank];
    const Result<int64_t> port = ParseInt(mine.substr(mine.rfind(':') + 1), "port");
    FUZZ_CHECK(a->port >= 1 && a->port <= 65535 && port.ok() && *port == a->port,
               "port " + std::to_string(a->port) + " is not that of " + mine);
  }
  return 0;
}
