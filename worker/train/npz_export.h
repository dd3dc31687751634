// --export-npz: a model's variables as a NumPy .npz archive, one float32 array per variable,
// named as the model names it ("conv1/kernel") and shaped as declared, so that
//   numpy.load("model.npz")["conv1/kernel"]      (or torch.from_numpy of it)
// gives the trained values. The archive is a zip (written with libzip) of "<name>.npy" members,
// stored uncompressed as numpy.savez does, each in the NPY 1.0 format ('<f4', C order).
//
// Contract: free functions. The file is written to "<path>.tmp" and renamed over `path`, so it
// is whole or absent; errors are kIoError naming the path and libzip's reason. Thread-compatible.
#ifndef TOWERPS_WORKER_TRAIN_NPZ_EXPORT_H_
#define TOWERPS_WORKER_TRAIN_NPZ_EXPORT_H_

#include <string>
#include <vector>

#include "common/tensor.h"
#include "ps/variable.h"
#include "towerps/status.h"
#include "worker/model/model.h"

namespace towerps::worker {

// `values[i]` holds variables[i]'s float32 elements (as many as its shape has).
Status WriteNpz(const std::vector<ps::VariableSpec>& variables, const std::vector<Tensor>& values,
                const std::string& path);
// The model's current values (read back from its device, if it has one).
Status WriteNpz(const Model<float>& model, const std::string& path);

// The NPY 1.0 header of a little-endian float32 C-order array of `shape`, padded so that the
// data starts at a multiple of 64 bytes: what numpy.save writes.
std::string NpyHeader(const std::vector<int64_t>& shape);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_NPZ_EXPORT_H_
