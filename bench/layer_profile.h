// Per-layer timing of a model's forward and backward passes, with the multiply-add count of the
// layers that have one (dense and convolution) and the path the backend took for each
// convolution, for docs/PERFORMANCE.md's distance-from-peak table. A residual block is timed
// layer by layer (Layer::sublayers). Used by `towerps-bench train --profile`.
#ifndef TOWERPS_BENCH_LAYER_PROFILE_H_
#define TOWERPS_BENCH_LAYER_PROFILE_H_

#include <string>
#include <vector>

#include "kernels/backend.h"
#include "worker/model/model.h"

namespace towerps::bench {

struct LayerTiming {
  std::string name;
  double forward_ms = 0;      // per batch
  double backward_ms = 0;     // per batch (parameter gradients and, except the first layer, dx)
  double forward_flops = 0;   // per batch, 2 * multiply-adds
  double backward_flops = 0;  // per batch
  std::string path;           // a convolution's: "onednn jit:avx512_core/...", "im2col+sgemm"
};

// Times each layer (each layer of a residual block, named "block/layer") on random inputs of
// `batch` examples, `repeats` times, and returns the mean.
std::vector<LayerTiming> ProfileLayers(worker::Model<float>& model,
                                       kernels::Backend<float>& backend, int batch, int repeats);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_LAYER_PROFILE_H_
