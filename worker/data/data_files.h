// Small helpers the stock dataset loaders share: where a named file of a request is, and how
// many classes two splits' labels need.
//
// Contract: pure inline functions; thread-safe.
#ifndef TOWERPS_WORKER_DATA_DATA_FILES_H_
#define TOWERPS_WORKER_DATA_DATA_FILES_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "towerps/dataset.h"

namespace towerps::worker {

// `file` inside `dir`, unless it is absolute (or either is empty).
inline std::string Resolve(const std::string& dir, const std::string& file) {
  if (file.empty() || file[0] == '/' || dir.empty()) return file;
  return dir + "/" + file;
}

// The largest label + 1 over both splits; the model must have at least that many outputs.
inline int ClassCount(const DataSplits& d) {
  int32_t top = 0;
  for (const Dataset* s : {&d.train, &d.test}) {
    for (int32_t l : s->labels) top = std::max(top, l);
  }
  return top + 1;
}

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_DATA_FILES_H_
