// Seeded weight initializers. Values are drawn in double from a SplitMix64 stream keyed by
// (seed, parameter name), so the same seed gives the same weights for float and double models, on
// every platform and whatever the layer order. Thread-compatible.
#ifndef TOWERPS_WORKER_LAYERS_INITIALIZER_H_
#define TOWERPS_WORKER_LAYERS_INITIALIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "towerps/layer_options.h"

namespace towerps::worker {

// Fills `out` (fan_in * fan_out-ish elements) for the parameter called `name`.
template <typename T>
void InitializeValues(Init init, int64_t fan_in, int64_t fan_out, uint64_t seed,
                      const std::string& name, std::vector<T>& out);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_INITIALIZER_H_
