#include "worker/data/fashion_mnist.h"

#include <sys/stat.h>

#include "worker/data/idx_reader.h"

namespace towerps::worker {
namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

Result<std::string> FindIdxFile(const std::string& dir, const std::string& base,
                                const std::string& hint) {
  const std::string gz = dir + "/" + base + ".gz", plain = dir + "/" + base;
  if (Exists(gz)) return gz;
  if (Exists(plain)) return plain;
  if (!Exists(dir)) {
    return NotFoundError("data directory '" + dir + "' does not exist (" + hint + ")");
  }
  return NotFoundError("data directory '" + dir + "' has neither " + base + ".gz nor " + base +
                       " (" + hint + ")");
}

Result<Dataset> LoadIdxImagesAndLabels(const std::string& images_path,
                                       const std::string& labels_path, int num_classes) {
  TOWERPS_ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path));
  TOWERPS_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path));
  if (images.dims.size() != 3) {
    return CorruptionError(images_path + ": images must have 3 dimensions [n, h, w], not " +
                           std::to_string(images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    return CorruptionError(labels_path + ": labels must have 1 dimension [n], not " +
                           std::to_string(labels.dims.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    return CorruptionError("size mismatch: " + images_path + " holds " +
                           std::to_string(images.dims[0]) + " images but " + labels_path +
                           " holds " + std::to_string(labels.dims[0]) + " labels");
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= num_classes) {
      return CorruptionError(labels_path + ": label " + std::to_string(labels.data[i]) +
                             " of example " + std::to_string(i) + " is not below " +
                             std::to_string(num_classes));
    }
  }
  Dataset d;
  d.name = images_path;
  d.example_shape = {1, images.dims[1], images.dims[2]};
  d.num_classes = num_classes;
  d.pixels = std::move(images.data);
  d.labels.assign(labels.data.begin(), labels.data.end());
  return d;
}

Result<Dataset> LoadFashionMnist(const FashionMnistOptions& options) {
  static constexpr char kHint[] = "install the dataset-fashion-mnist package or pass --data-dir";
  const std::string prefix = options.split == Split::kTrain ? "train" : "t10k";
  TOWERPS_ASSIGN_OR_RETURN(std::string images,
                           FindIdxFile(options.data_dir, prefix + "-images-idx3-ubyte", kHint));
  TOWERPS_ASSIGN_OR_RETURN(std::string labels,
                           FindIdxFile(options.data_dir, prefix + "-labels-idx1-ubyte", kHint));
  return LoadIdxImagesAndLabels(images, labels);
}

}  // namespace towerps::worker
