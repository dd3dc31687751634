// JobData: a job's training and test sets, loaded through the registry's dataset, and how to
// batch them.
//
// Contract: value type. LoadJobData validates what the loader returned (Dataset::Validate, the
// same example shape in both splits) and fills in the normalization the loader left empty,
// per channel from the training set. Errors name the dataset, file or option.
#ifndef TOWERPS_WORKER_TRAIN_JOB_DATA_H_
#define TOWERPS_WORKER_TRAIN_JOB_DATA_H_

#include <string>
#include <vector>

#include "towerps/dataset.h"
#include "towerps/registry.h"
#include "towerps/result.h"
#include "worker/data/batcher.h"
#include "worker/model/model.h"

namespace towerps::worker {

struct JobData {
  Dataset train, test;
  BatcherOptions train_options;  // batch, seed, shuffling, normalization, crops; rank unset
  BatcherOptions test_options;   // in order, keeps the last partial batch
};

// `request.options` are set to the registry's option values (its binary's own flags).
Result<JobData> LoadJobData(const Registry& registry, const std::string& dataset,
                            DataRequest request, int batch_size);

// What was read must fit the model, whatever the launcher could tell from the names: the
// training examples' shape is the model's input, the classes fit its outputs, and every worker
// gets at least one batch per epoch. Returns the steps per epoch; errors name the dataset, the
// model and the flags.
Result<int64_t> CheckDataFitsJob(const JobData& data, const Batcher& train,
                                 const Model<float>& model, const std::string& model_name,
                                 int workers, int batch_size);

// Per-channel (per feature of vector examples) mean and standard deviation of v (pixel / 255,
// or the float value) over `data`, in double: the normalization of datasets that bring none.
void ChannelStatistics(const Dataset& data, std::vector<float>* mean, std::vector<float>* stddev);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_JOB_DATA_H_
