// A seeded synthetic classification dataset with categorical features, for models with
// embedding tables, whose labels are a known function of the features:
//  - field f's id is f * vocabulary + k, k drawn from a Zipf law over [0, vocabulary): a few
//    popular ids and a long tail, as in click logs;
//  - multi-hot field m (if any) holds 0 to max_bag ids per example, drawn likewise from
//    (fields + m) * vocabulary + k; its part of the score is twice the mean of its ids' scores;
//  - every id carries a hidden score per class, and the dense features a hidden linear map;
//  - an example's label is the class of the highest total score.
//  - with drift D > 0 the ids move as real traffic does: the Zipf law's ranks rotate through
//    each field's vocabulary along the stream (a job's training split, then its test split), so
//    that the popular ids of its end lie D vocabularies on (modulo the vocabulary) from those of
//    its start: ids appear, peak and fade. An id keeps its hidden scores whenever it is seen, so
//    the optimum stays 100%.
// A model whose tables learn each id's scores (a multi-hot field's through a mean) and whose
// layers sum them with the linear map classifies every example right (the optimum is 100%), so
// accuracy says how much of that it learned; ids of the tail that training rarely sees bound it
// from below that.
//
// Contract: a pure function of its options (same options, same bytes on every platform);
// thread-safe.
#ifndef TOWERPS_WORKER_DATA_CATEGORICAL_H_
#define TOWERPS_WORKER_DATA_CATEGORICAL_H_

#include <cstdint>

#include "towerps/dataset.h"
#include "towerps/result.h"

namespace towerps::worker {

struct CategoricalOptions {
  int64_t size = 20000;
  int fields = 8;
  int multi_hot = 0;          // multi-hot fields (Dataset::multi_hot)
  int max_bag = 6;            // ids per example of each, at most (uniform over 0..max_bag)
  int64_t vocabulary = 1000;  // ids per field
  int dense = 4;              // dense features, standard normal
  int num_classes = 4;
  double zipf_exponent = 1.1;
  uint64_t seed = 1;         // the split's: features, labels and the hidden scores all come from it
  uint64_t scores_seed = 1;  // the hidden scores' (the same for a job's two splits)
  double drift = 0;          // D, >= 0; 0: the ids' popularity never moves
  // With drift: where this split starts in the stream, and the stream's length (0: this split).
  int64_t stream_offset = 0;
  int64_t stream_size = 0;
};

// kInvalidArgument naming a size, field count, vocabulary, feature or class count below 1, a
// negative multi-hot count or bag size, or a drift that is negative or over 1000.
Result<Dataset> MakeCategoricalDataset(const CategoricalOptions& options);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_CATEGORICAL_H_
