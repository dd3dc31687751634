// Shape: the dimensions of a tensor or of one example, row-major: [c, h, w] for an image,
// [features] for a vector, [n, c, h, w] for a batch of images.
//
// Contract: a plain std::vector. The functions are pure and thread-safe; those named Checked
// accept shapes from outside (a file, a peer) and report bad ones as a Status.
#ifndef TOWERPS_SHAPE_H_
#define TOWERPS_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "towerps/result.h"

namespace towerps {

using Shape = std::vector<int64_t>;

// Number of elements; 1 for a rank-0 shape. Fails when a dimension is negative or the product
// overflows int64.
Result<int64_t> CheckedNumElements(const Shape& shape);
// Same, for shapes already known to be valid.
int64_t NumElements(const Shape& shape);
// "[64, 3, 24, 24]".
std::string ShapeToString(const Shape& shape);

}  // namespace towerps

#endif  // TOWERPS_SHAPE_H_
