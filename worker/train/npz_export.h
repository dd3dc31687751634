// --export-npz: a model's variables as a NumPy .npz archive, one float32 array per dense
// variable, named as the model names it ("conv1/kernel") and shaped as declared, so that
//   numpy.load("model.npz")["conv1/kernel"]      (or torch.from_numpy of it)
// gives the trained values; an embedding table as two arrays, "<table>/ids" (uint64 [n]) and
// "<table>/rows" (float32 [n, dim]), the rows the servers held (a row never trained is at its
// initial value, drawn from (seed, table, id), and not listed), a joined table (job/variable.h's
// segments) as each segment's two arrays, its ids less the segment's offset; and the input
// normalization the model was trained with, "normalization/mean" and "normalization/stddev"
// (float32, one per channel or feature, or one for all: x = (v - mean) / stddev, v = pixel / 255
// or the float value), so that the exported parameters can be used on new data. The archive is a
// zip (written with libzip) of "<name>.npy" members, stored uncompressed as numpy.savez does, each
// in the NPY 1.0 format ('<f4' or '<u8', C order).
//
// Contract: free functions. The file is written to "<path>.tmp" and renamed over `path`, so it
// is whole or absent; errors are kIoError naming the path and libzip's reason. Thread-compatible.
#ifndef TOWERPS_WORKER_TRAIN_NPZ_EXPORT_H_
#define TOWERPS_WORKER_TRAIN_NPZ_EXPORT_H_

#include <string>
#include <vector>

#include "common/tensor.h"
#include "job/variable.h"
#include "ps/server/checkpoint_reader.h"
#include "towerps/status.h"
#include "worker/model/model.h"

namespace towerps::worker {

// One member: a float32 or uint64 array, shaped as exported. (worker/data/npy_reader.h's
// NpyArray is an .npy file as read; the two names must stay apart: one name for two types in one
// namespace is an ODR violation, which a unity build turned into a free of a bad pointer.)
struct NpzMember {
  std::string name;
  Tensor values;
};
Status WriteNpz(const std::vector<NpzMember>& arrays, const std::string& path);
// The model's dense variables' current values (read back from its device, if it has one), and,
// when `tables` is given, each table's ids and rows (tables[t] for table t), then `extra`.
Status WriteNpz(const Model<float>& model, const std::vector<ps::HeldRows>* tables,
                std::vector<NpzMember> extra, const std::string& path);
// "normalization/mean" and "normalization/stddev".
std::vector<NpzMember> NormalizationArrays(const std::vector<float>& mean,
                                           const std::vector<float>& stddev);
// Dense variables (values[i] for variables[i]) and, for each table variable, tables[i]; then
// `extra`.
std::vector<NpzMember> NpzArrays(const std::vector<ps::VariableSpec>& variables,
                                 const std::vector<Tensor>& values,
                                 const std::vector<ps::HeldRows>& tables,
                                 std::vector<NpzMember> extra = {});

// The NPY 1.0 header of a little-endian C-order array of `shape` ('<f4' float32, '<u8'
// uint64), padded so that the data starts at a multiple of 64 bytes: what numpy.save writes.
std::string NpyHeaderText(const std::vector<int64_t>& shape, DType dtype = DType::kFloat32);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_NPZ_EXPORT_H_
