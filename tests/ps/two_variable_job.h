// The job the server-process tests run (tests/ps/server_process_test.cc,
// tests/ps/nonfinite_push_test.cc): two variables, a model of 300x100 weights and 100 biases
// that a 16 KiB partition cuts into 8 + 1 chunks, plain SGD at 0.5, and registered clients, the
// chief having given both variables their seeded initial values.
//
// Contract: test support; free functions over a testing::Cluster (tests/ps/cluster.h).
#ifndef TOWERPS_TESTS_PS_TWO_VARIABLE_JOB_H_
#define TOWERPS_TESTS_PS_TWO_VARIABLE_JOB_H_

#include <chrono>
#include <memory>
#include <vector>

#include "common/transport.h"
#include "tests/ps/cluster.h"

namespace towerps::ps::testing {

// Two variables, cut by a 16 KiB partition into 8 + 1 chunks spread over the servers.
inline std::vector<VariableSpec> Model() { return {{"w", {300, 100}}, {"b", {100}}}; }
inline constexpr uint64_t kSignature = 0xabcdef;

inline JobConfig Job(UpdateMode mode, int workers = 4, int servers = 2) {
  JobConfig j;
  j.mode = mode;
  j.workers = workers;
  j.servers = servers;
  j.partition_bytes = 16384;
  j.optimizer.kind = OptimizerKind::kSgd;
  j.optimizer.learning_rate = 0.5f;
  j.schedule.kind = LrScheduleKind::kConstant;
  return j;
}

inline std::vector<float> PullAll(Client& c, uint32_t var, int64_t min_version,
                                  int64_t* version = nullptr) {
  PulledVariable p = Get(c.Pull({.variable_id = var, .min_version = min_version, .clock = 0}));
  if (version) *version = p.version;
  std::vector<float> out(NumElements(Model()[var].shape));
  p.CopyTo(out.data());
  return out;
}

struct Workers {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<Tensor> initial;
};

inline Workers Connect(const Cluster& cluster, int workers,
                       TransportPath path = TransportPath::kTcp) {
  Workers w;
  for (int r = 0; r < workers; ++r) {
    w.clients.push_back(cluster.MakeClient(r, std::chrono::seconds(20), nullptr, path));
    Get(w.clients.back()->Register(Model(), kSignature));
  }
  for (uint32_t v = 0; v < Model().size(); ++v) {
    w.initial.push_back(Random(Model()[v].shape, 100 + v));
    Check(w.clients[0]->Init(v, w.initial.back()));
  }
  return w;
}

}  // namespace towerps::ps::testing

#endif  // TOWERPS_TESTS_PS_TWO_VARIABLE_JOB_H_
