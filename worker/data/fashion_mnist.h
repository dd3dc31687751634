// Fashion-MNIST (or MNIST) from IDX files: {train,t10k}-{images-idx3,labels-idx1}-ubyte, gzip
// (".gz", preferred when both exist) or plain.
//
// Contract: returns kNotFound naming the directory and the files tried when neither form exists;
// kCorruption naming the file for a bad IDX file (see idx_reader.h), images that are not
// [n, h, w], labels that are not [n], labels >= 10, or image and label counts that differ.
// Thread-compatible.
#ifndef TOWERPS_WORKER_DATA_FASHION_MNIST_H_
#define TOWERPS_WORKER_DATA_FASHION_MNIST_H_

#include <string>

#include "towerps/dataset.h"
#include "towerps/result.h"

namespace towerps::worker {

inline constexpr char kDefaultFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// The normalization of Fashion-MNIST everywhere (and in bench/pytorch_baseline.py): the training
// set's mean and standard deviation of pixel / 255.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStddev = 0.3530f;

enum class Split { kTrain, kTest };

struct FashionMnistOptions {
  std::string data_dir = kDefaultFashionMnistDir;  // the dataset-fashion-mnist package
  Split split = Split::kTrain;
};

Result<Dataset> LoadFashionMnist(const FashionMnistOptions& options);

// "<dir>/<base>.gz" when it exists, else "<dir>/<base>" when it exists, else kNotFound naming
// both and ending with "(<hint>)".
Result<std::string> FindIdxFile(const std::string& dir, const std::string& base,
                                const std::string& hint);

// The same checks for an explicit pair of files.
Result<Dataset> LoadIdxImagesAndLabels(const std::string& images_path,
                                       const std::string& labels_path, int num_classes = 10);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_FASHION_MNIST_H_
