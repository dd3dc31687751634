// The embedding store a ps-lite user would build (dmlc/ps-lite's KVServer and KVWorker), for
// comparing CPU per row with `towerps-bench sparse` side by side (docs/PERFORMANCE.md). Not part
// of TowerPS's build: bench/pslite/run.sh builds it against a ps-lite checkout.
//
// The same work as towerps-bench sparse at its defaults: one worker repeats steps over 64
// batches of 4,096 distinct ids each, drawn from a Zipf law (exponent 1.05) over 10^7 ids with
// the same generator and seed (so both stores hold the same rows), sorted; a step pulls the
// batch's rows of dim 32 (ZPull, waited for) and pushes a gradient for each (ZPush, waited
// for). The server keeps rows in an std::unordered_map<uint64_t, std::vector<float>>, created
// at their first pull or push, and applies SGD on push.
//
// Roles and addresses come from ps-lite's environment (DMLC_ROLE, DMLC_PS_ROOT_URI, ...; run.sh
// sets them). Usage: pslite_store <steps>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/zipf.h"
#include "ps/ps.h"

namespace {

constexpr int kDim = 32;
constexpr int64_t kIdSpace = 10'000'000;
constexpr int64_t kUniqueIds = 4096;
constexpr int kBatches = 64;
constexpr float kLr = 0.01f;

class Store {
 public:
  void operator()(const ps::KVMeta& meta, const ps::KVPairs<float>& req,
                  ps::KVServer<float>* server) {
    const size_t n = req.keys.size();
    if (meta.push) {
      for (size_t i = 0; i < n; ++i) {
        std::vector<float>& row = Row(req.keys[i]);
        for (int j = 0; j < kDim; ++j) row[j] -= kLr * req.vals[i * kDim + j];
      }
      server->Response(meta);
      return;
    }
    ps::KVPairs<float> res;
    res.keys = req.keys;
    res.vals.resize(n * kDim);
    res.lens.resize(n, kDim);
    for (size_t i = 0; i < n; ++i) {
      const std::vector<float>& row = Row(req.keys[i]);
      std::copy(row.begin(), row.end(), res.vals.begin() + i * kDim);
    }
    server->Response(meta, res);
  }

 private:
  std::vector<float>& Row(uint64_t id) {
    auto it = rows_.find(id);
    if (it == rows_.end()) it = rows_.emplace(id, std::vector<float>(kDim, 0.01f)).first;
    return it->second;
  }
  std::unordered_map<uint64_t, std::vector<float>> rows_;
};

// towerps-bench sparse's batches for worker 0 (bench/sparse_bench.cc, MakeBatches).
std::vector<ps::SArray<ps::Key>> Batches() {
  std::mt19937_64 rng(1);
  towerps::ZipfSampler zipf(kIdSpace, 1.05);
  std::vector<ps::SArray<ps::Key>> batches;
  for (int b = 0; b < kBatches; ++b) {
    std::unordered_set<uint64_t> seen;
    std::vector<ps::Key> ids;
    while (static_cast<int64_t>(ids.size()) < kUniqueIds) {
      const auto k = static_cast<uint64_t>(zipf.Sample(rng) - 1);
      if (seen.insert(k).second) ids.push_back(k);
    }
    std::sort(ids.begin(), ids.end());
    batches.emplace_back(ids);
  }
  return batches;
}

}  // namespace

int main(int argc, char** argv) {
  const long steps = argc > 1 ? std::atol(argv[1]) : 3000;
  ps::Start(0);
  if (ps::IsServer()) {
    auto* server = new ps::KVServer<float>(0);
    server->set_request_handle(Store());
    ps::RegisterExitCallback([server] { delete server; });
  }
  if (ps::IsWorker()) {
    ps::KVWorker<float> kv(0, 0);
    const std::vector<ps::SArray<ps::Key>> batches = Batches();
    ps::SArray<float> grads(kUniqueIds * kDim, 0.001f);
    ps::SArray<int> lens(kUniqueIds, kDim);
    for (long s = 0; s < steps; ++s) {
      const ps::SArray<ps::Key>& keys = batches[static_cast<size_t>(s % kBatches)];
      ps::SArray<float> values;
      ps::SArray<int> got;
      kv.Wait(kv.ZPull(keys, &values, &got));
      kv.Wait(kv.ZPush(keys, grads, lens));
    }
  }
  ps::Finalize(0, true);
  return 0;
}
