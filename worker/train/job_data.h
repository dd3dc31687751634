// JobData: the training and test sets of a job and how to batch them, by dataset name.
//
//   fashion-mnist  the dataset-fashion-mnist package (or data_dir), normalised
//   cifar10        CIFAR-10 binary batches in data_dir, 24x24 random crops and flips for
//                  training, centre crops for evaluation (the TensorFlow tutorial's recipe)
//   synthetic      seeded random images of the model's input shape (benchmarks, tests)
//
// Contract: value type; errors name the dataset, file or option.
#ifndef TOWERPS_WORKER_TRAIN_JOB_DATA_H_
#define TOWERPS_WORKER_TRAIN_JOB_DATA_H_

#include <string>
#include <vector>

#include "common/result.h"
#include "worker/data/batcher.h"
#include "worker/data/dataset.h"

namespace towerps::worker {

struct JobData {
  Dataset train, test;
  BatcherOptions train_options;  // batch, seed, shuffling, normalisation, crops; rank unset
  BatcherOptions test_options;   // in order, keeps the last partial batch
};

// The names LoadJobData accepts, in the order --help gives them.
std::vector<std::string> JobDatasetNames();

Result<JobData> LoadJobData(const std::string& dataset, const std::string& data_dir,
                            const Shape& input_shape, int batch_size, uint64_t seed);

// Whether zoo model `model` can train on `dataset`, from the names alone (nothing is read), so
// the launcher can refuse a mismatch before it starts any process. kInvalidArgument naming
// both shapes and the zoo models that fit, e.g. "model cifar10 expects 3x24x24 inputs, but
// fashion-mnist examples are 1x28x28 (choose --model mlp or cnn, or another --dataset)";
// kNotFound for an unknown model or dataset, listing the known ones.
Status CheckDatasetFitsModel(const std::string& dataset, const std::string& model);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_JOB_DATA_H_
