#include "worker/data/npy_dataset.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/finite.h"
#include "worker/data/data_files.h"
#include "worker/data/npy_reader.h"

namespace towerps::worker {
namespace {

// [N, H, W] is one channel; [N, C, H, W] and [N, F] are taken as they are.
Result<Shape> NpyExampleShape(const std::string& path, const Shape& shape) {
  if (shape.size() == 3) return Shape{1, shape[1], shape[2]};
  if (shape.size() == 4 || shape.size() == 2) return Shape(shape.begin() + 1, shape.end());
  return InvalidArgumentError(path + ": x has shape " + ShapeToString(shape) +
                              "; expected [N, features], [N, H, W] or [N, C, H, W]");
}

// A split's dense features: x_dense_<split>.npy (a dataset with categorical ids, its dense part
// preprocessed already) or x_<split>.npy.
std::string NpyDensePath(const std::string& dir, const std::string& split) {
  const std::string dense = Resolve(dir, "x_dense_" + split + ".npy");
  return std::ifstream(dense) ? dense : Resolve(dir, "x_" + split + ".npy");
}

// x_ids_<split>.npy, when there: integers [N, F], F categorical ids per example (int64 as
// written; their bits are the ids).
Status LoadNpyIds(const std::string& dir, const std::string& split, Dataset* d) {
  const std::string path = Resolve(dir, "x_ids_" + split + ".npy");
  if (!std::ifstream(path)) return Status::Ok();
  TOWERPS_ASSIGN_OR_RETURN(const NpyArray ids, ReadNpyFile(path));
  const Shape& s = ids.header.shape;
  if (ids.header.kind == 'f' || s.size() != 2 || s[0] != d->size() || s[1] < 1) {
    return InvalidArgumentError(path + ": ids must be integers [N, F] for the " +
                                std::to_string(d->size()) + " examples, not '" + ids.header.descr +
                                "' of shape " + ShapeToString(s));
  }
  d->fields = static_cast<int>(s[1]);
  d->ids.resize(static_cast<size_t>(s[0] * s[1]));
  for (size_t i = 0; i < d->ids.size(); ++i) {
    d->ids[i] = static_cast<uint64_t>(NpyIntegerAt(ids, static_cast<int64_t>(i)));
  }
  return Status::Ok();
}

std::string NpyMultiHotPath(const std::string& dir, int k, const std::string& what,
                            const std::string& split) {
  return Resolve(dir, "x_multi_hot" + std::to_string(k) + "_" + what + "_" + split + ".npy");
}

// An integer array of one dimension from `path`, as 64-bit values.
Result<std::vector<uint64_t>> NpyIntegers(const std::string& path) {
  TOWERPS_ASSIGN_OR_RETURN(const NpyArray a, ReadNpyFile(path));
  if (a.header.kind == 'f' || a.header.shape.size() != 1) {
    return InvalidArgumentError(path + ": must be integers of one dimension, not '" +
                                a.header.descr + "' of shape " + ShapeToString(a.header.shape));
  }
  std::vector<uint64_t> v(static_cast<size_t>(a.header.shape[0]));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<uint64_t>(NpyIntegerAt(a, static_cast<int64_t>(i)));
  }
  return v;
}

// x_multi_hot<k>_{ids,offsets}_<split>.npy for k = 0, 1, ... while both files are there.
Status LoadNpyMultiHot(const std::string& dir, const std::string& split, Dataset* d) {
  for (int k = 0;; ++k) {
    const std::string ids = NpyMultiHotPath(dir, k, "ids", split);
    const std::string offsets = NpyMultiHotPath(dir, k, "offsets", split);
    if (!std::ifstream(ids) || !std::ifstream(offsets)) return Status::Ok();
    MultiHotField field;
    TOWERPS_ASSIGN_OR_RETURN(field.ids, NpyIntegers(ids));
    TOWERPS_ASSIGN_OR_RETURN(field.offsets, NpyIntegers(offsets));
    d->multi_hot.push_back(std::move(field));
    // The offsets' checks name the field; name its files too.
    if (Status s = d->Validate(); !s.ok()) return s.WithContext(offsets + " and " + ids);
  }
}

// Float y: a regression's targets, each finite.
Status ReadTargets(const std::string& path, const NpyArray& y, Dataset* d) {
  const int64_t n = y.header.shape[0];
  d->targets.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    if (y.header.item_size == 4) {
      float f = 0;
      std::memcpy(&f, y.data.data() + i * 4, 4);
      v = f;
    } else {
      std::memcpy(&v, y.data.data() + i * 8, 8);
    }
    if (!std::isfinite(v)) {
      return InvalidArgumentError(path + ": the target of example " + std::to_string(i) + " is " +
                                  DescribeValue(v) + "; clean or drop it");
    }
    d->targets[static_cast<size_t>(i)] = static_cast<float>(v);
  }
  return Status::Ok();
}

Result<Dataset> LoadNpySplit(const std::string& dir, const std::string& split) {
  const std::string xp = NpyDensePath(dir, split), yp = Resolve(dir, "y_" + split + ".npy");
  TOWERPS_ASSIGN_OR_RETURN(NpyArray x, ReadNpyFile(xp));
  TOWERPS_ASSIGN_OR_RETURN(const NpyArray y, ReadNpyFile(yp));
  const NpyHeader& xh = x.header;
  const bool u8 = xh.kind == 'u' && xh.item_size == 1, f32 = xh.kind == 'f' && xh.item_size == 4;
  if (!u8 && !f32) {
    return InvalidArgumentError(xp + ": x has dtype '" + xh.descr +
                                "'; save it as float32 or uint8 (x.astype(numpy.float32))");
  }
  const bool targets = y.header.kind == 'f' && (y.header.item_size == 4 || y.header.item_size == 8);
  if ((y.header.kind == 'f' && !targets) || y.header.shape.size() != 1) {
    return InvalidArgumentError(yp + ": y must be integer labels, or float32 or float64 " +
                                "regression targets, of shape [N], not '" + y.header.descr +
                                "' of shape " + ShapeToString(y.header.shape));
  }
  if (xh.shape.empty() || xh.shape[0] != y.header.shape[0]) {
    return InvalidArgumentError(
        xp + " holds " + (xh.shape.empty() ? "0" : std::to_string(xh.shape[0])) + " examples but " +
        yp + " holds " + std::to_string(y.header.shape[0]) + " labels");
  }
  Dataset d;
  d.name = "npy/" + split;
  TOWERPS_ASSIGN_OR_RETURN(d.example_shape, NpyExampleShape(xp, xh.shape));
  const int64_t n = y.header.shape[0];
  if (targets) TOWERPS_RETURN_IF_ERROR(ReadTargets(yp, y, &d));
  d.labels.resize(static_cast<size_t>(targets ? 0 : n));
  for (int64_t i = 0; i < static_cast<int64_t>(d.labels.size()); ++i) {
    const int64_t label = NpyIntegerAt(y, i);
    if (label < 0 || label >= (int64_t{1} << 24)) {
      return InvalidArgumentError(yp + ": label " + std::to_string(label) + " of example " +
                                  std::to_string(i) + " is not a class index in [0, 2^24)");
    }
    d.labels[static_cast<size_t>(i)] = static_cast<int32_t>(label);
  }
  if (u8) {
    d.pixels = std::move(x.data);
  } else {
    d.values.resize(x.data.size() / 4);
    std::memcpy(d.values.data(), x.data.data(), x.data.size());
    // A NaN or an infinity would surface as a diverged loss, blaming the learning rate.
    if (const int64_t bad = FindNonFinite(d.values.data(), static_cast<int64_t>(d.values.size()));
        bad >= 0) {
      const int64_t per = std::max<int64_t>(1, d.example_size());
      return InvalidArgumentError(xp + ": example " + std::to_string(bad / per) + " holds " +
                                  DescribeValue(d.values[static_cast<size_t>(bad)]) +
                                  " at element " + std::to_string(bad % per) +
                                  "; clean or drop it (numpy.isfinite(x).all(axis=...))");
    }
  }
  TOWERPS_RETURN_IF_ERROR(LoadNpyIds(dir, split, &d));
  TOWERPS_RETURN_IF_ERROR(LoadNpyMultiHot(dir, split, &d));
  return d;
}

}  // namespace

Result<DataSplits> LoadNpyDataset(const DataRequest& r) {
  if (r.data_dir.empty()) {
    return InvalidArgumentError(
        "--dataset npy needs --data-dir with x_train.npy, y_train.npy, "
        "x_test.npy and y_test.npy");
  }
  DataSplits d;
  TOWERPS_ASSIGN_OR_RETURN(d.train, LoadNpySplit(r.data_dir, "train"));
  TOWERPS_ASSIGN_OR_RETURN(d.test, LoadNpySplit(r.data_dir, "test"));
  if (d.train.example_shape != d.test.example_shape) {
    return InvalidArgumentError("npy: x_train examples are " +
                                ShapeToString(d.train.example_shape) + " but x_test examples are " +
                                ShapeToString(d.test.example_shape));
  }
  if (d.train.fields != d.test.fields) {
    return InvalidArgumentError("npy: x_ids_train holds " + std::to_string(d.train.fields) +
                                " ids per example but x_ids_test " + std::to_string(d.test.fields));
  }
  if (d.train.multi_hot.size() != d.test.multi_hot.size()) {
    return InvalidArgumentError("npy: the train split has " +
                                std::to_string(d.train.multi_hot.size()) +
                                " multi-hot fields (x_multi_hot<k>_ids_train.npy) but the test "
                                "split " +
                                std::to_string(d.test.multi_hot.size()));
  }
  if (d.train.regression() != d.test.regression()) {
    return InvalidArgumentError(std::string("npy: y_train.npy holds ") +
                                (d.train.regression() ? "float targets" : "integer labels") +
                                " but y_test.npy " +
                                (d.test.regression() ? "float targets" : "integer labels"));
  }
  d.train.num_classes = d.test.num_classes = ClassCount(d);
  if (NpyDensePath(r.data_dir, "train").ends_with("x_dense_train.npy")) {
    d.preprocessing.mean = {0.0f};  // preprocessed already (scripts/to_npy.py criteo)
    d.preprocessing.stddev = {1.0f};
  }
  return d;  // otherwise normalization: from the training set
}

Result<DatasetInfo> ProbeNpyDataset(const DataRequest& r) {
  if (r.data_dir.empty()) return LoadNpyDataset(r).status();
  const std::string xp = NpyDensePath(r.data_dir, "train");
  TOWERPS_ASSIGN_OR_RETURN(const NpyHeader h, ReadNpyHeader(xp));
  TOWERPS_ASSIGN_OR_RETURN(Shape example, NpyExampleShape(xp, h.shape));
  int fields = 0;
  const std::string ids = Resolve(r.data_dir, "x_ids_train.npy");
  if (std::ifstream(ids)) {
    TOWERPS_ASSIGN_OR_RETURN(const NpyHeader ih, ReadNpyHeader(ids));
    fields = ih.shape.size() == 2 ? static_cast<int>(ih.shape[1]) : 0;
  }
  int multi_hot = 0;
  while (std::ifstream(NpyMultiHotPath(r.data_dir, multi_hot, "ids", "train")) &&
         std::ifstream(NpyMultiHotPath(r.data_dir, multi_hot, "offsets", "train"))) {
    ++multi_hot;
  }
  TOWERPS_ASSIGN_OR_RETURN(const NpyHeader yh, ReadNpyHeader(Resolve(r.data_dir, "y_train.npy")));
  return DatasetInfo{.example_shape = std::move(example),
                     .fields = fields,
                     .multi_hot = multi_hot,
                     .regression = yh.kind == 'f'};
}

}  // namespace towerps::worker
