// The towers grammar (worker/tower_devices.h: ParseTowerList), --towers cpu:0,gpu:1, which the
// launcher and every worker parse. The input is the flag's value. Errors are kInvalidArgument. A
// list that parses is not empty, has indexes in 0..999999 and no GPU twice, and its devices' names,
// joined by commas, parse to the same list.
#include <cstdint>
#include <set>
#include <string>

#include "tests/fuzz/fuzz_util.h"
#include "worker/tower_devices.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace towerps;
  using worker::TowerDevice;
  const std::string spec(reinterpret_cast<const char*>(data), size);
  const Result<std::vector<TowerDevice>> towers = worker::ParseTowerList(spec);
  if (!towers.ok()) {
    FUZZ_CHECK(towers.status().code() == StatusCode::kInvalidArgument, towers.status().ToString());
    return 0;
  }
  FUZZ_CHECK(!towers->empty(), "an empty tower list parsed");
  std::set<int> gpus;
  std::string names;
  for (const TowerDevice& t : *towers) {
    FUZZ_CHECK(t.index >= 0 && t.index <= 999999, "index " + std::to_string(t.index));
    if (t.kind == TowerDevice::Kind::kGpu) {
      FUZZ_CHECK(gpus.insert(t.index).second, "gpu:" + std::to_string(t.index) + " twice");
    }
    names += (names.empty() ? "" : ",") + t.name();
  }
  const Result<std::vector<TowerDevice>> again = worker::ParseTowerList(names);
  FUZZ_CHECK(again.ok() && again->size() == towers->size(), "'" + names + "' does not parse back");
  for (size_t i = 0; i < towers->size(); ++i) {
    FUZZ_CHECK((*again)[i].kind == (*towers)[i].kind && (*again)[i].index == (*towers)[i].index,
               "'" + names + "' parses to another list");
  }
  return 0;
}
