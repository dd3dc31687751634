// JobData: a job's training and test sets, loaded through the registry's dataset or opened to be
// streamed (--shuffle-buffer), and how to batch them.
//
// Contract: LoadJobData validates what the loader returned (Dataset::Validate, the same example
// shape in both splits) and fills in the normalization the loader left empty, per channel from
// the training set; with a shuffle buffer it only opens the dataset's streams, which
// MakeJobBatches reads. Errors name the dataset, file or option.
#ifndef TOWERPS_WORKER_TRAIN_JOB_DATA_H_
#define TOWERPS_WORKER_TRAIN_JOB_DATA_H_

#include <memory>
#include <string>
#include <vector>

#include "towerps/dataset.h"
#include "towerps/registry.h"
#include "towerps/result.h"
#include "worker/data/batcher.h"
#include "worker/data/stream_batcher.h"
#include "worker/model/model.h"

namespace towerps::worker {

// What a split holds, loaded or streamed, for the checks against the model.
struct SplitLayout {
  std::string name;
  int64_t examples = 0;
  int fields = 0, multi_hot = 0;
  bool regression = false;
  int labels_needed = 0;                // the largest label + 1 (0 for targets)
  int64_t largest_label_at = -1;        // the first example that holds it, when known
  std::vector<int64_t> label_counts{};  // examples per label
};

struct JobData {
  Dataset train, test;           // loaded whole; empty when streamed
  BatcherOptions train_options;  // batch, seed, shuffling, normalization, crops; rank unset
  BatcherOptions test_options;   // in order, keeps the last partial batch
  // Streamed (shuffle_buffer > 0): each split from its beginning. The layouts are filled by
  // MakeJobBatches, from the data in memory or the streams' counting passes.
  int64_t shuffle_buffer = 0;
  StreamOpener open_train, open_test;
  SplitLayout train_layout, test_layout;
};

// `request.options` are set to the registry's option values (its binary's own flags).
// shuffle_buffer > 0 opens the dataset to be streamed (DatasetDef::open) instead of loading it;
// a dataset that cannot stream is kInvalidArgument, naming the flag.
Result<JobData> LoadJobData(const Registry& registry, const std::string& dataset,
                            DataRequest request, int batch_size, int64_t shuffle_buffer = 0);

// The batches of worker `rank` of `workers` (training: shuffled, sharded; test: all of it, in
// order): Batchers over the data in memory, or StreamBatchers over the streams. Fills the
// layouts, and for streams the options' normalization (the training split's, when the dataset
// gives none). Without `with_train` (--eval-only) only `test` is made, and a streamed training
// split is read only when its normalization must be computed.
struct JobBatches {
  std::unique_ptr<BatchSource> train, test;
};
Result<JobBatches> MakeJobBatches(JobData& data, int rank, int workers, bool with_train = true);

// What was read must fit the model, whatever the launcher could tell from the names: the
// training examples' shape is the model's input, the classes fit its outputs, and every worker
// gets at least one batch per epoch. Returns the steps per epoch; errors name the dataset, the
// model and the flags.
Result<int64_t> CheckDataFitsJob(const JobData& data, const BatchSource& train,
                                 const Model<float>& model, const std::string& model_name,
                                 int workers, int batch_size);

// Per-channel (per feature of vector examples) mean and standard deviation of v (pixel / 255,
// or the float value) over `data`, in double: the normalization of datasets that bring none.
void ChannelStatistics(const Dataset& data, std::vector<float>* mean, std::vector<float>* stddev);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_JOB_DATA_H_
