// --dataset npy (<towerps/registry.h>): numpy files in --data-dir, one set per split (train,
// test):
//  - x_<split>.npy: float32 or uint8 [N, features], [N, H, W] or [N, C, H, W], normalized from
//    the training set; or x_dense_<split>.npy, float32 [N, features] used as they are;
//  - y_<split>.npy: integer labels [N], or float32 or float64 regression targets [N];
//  - x_ids_<split>.npy, optional: integers [N, F], F categorical ids per example (their bits are
//    the 64-bit ids);
//  - x_multi_hot<k>_ids_<split>.npy and x_multi_hot<k>_offsets_<split>.npy, optional, for
//    k = 0, 1, ... as long as both are there: multi-hot field k (Dataset::multi_hot), its ids
//    (integers [M]) and N + 1 offsets (integers, from 0, never decreasing, ending at M).
//
// Contract: free functions; they read only the files above. A missing, malformed or
// inconsistent file is kInvalidArgument (or the reader's error) naming the file and what it
// holds.
#ifndef TOWERPS_WORKER_DATA_NPY_DATASET_H_
#define TOWERPS_WORKER_DATA_NPY_DATASET_H_

#include "towerps/registry.h"

namespace towerps::worker {

Result<DataSplits> LoadNpyDataset(const DataRequest& request);
// The examples' shape, categorical ids and multi-hot fields, from the training split's headers.
Result<DatasetInfo> ProbeNpyDataset(const DataRequest& request);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_NPY_DATASET_H_
