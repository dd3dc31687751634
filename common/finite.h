// Finite checks for float data, so that a NaN or an infinity never reaches the model: a worker's
// check of its loss and of a gradient before it is pushed, ps::Client's of a gradient its caller
// did not check (both where the values were just written, in the sender's cache), and a server's
// of a gradient whose sender did not say it was finite (Header.finite).
//
// Contract: pure functions over borrowed memory; thread-safe.
#ifndef TOWERPS_COMMON_FINITE_H_
#define TOWERPS_COMMON_FINITE_H_

#include <cstdint>
#include <string>

namespace towerps {

// The index of the first NaN or infinity in x[0, n), or -1 when every element is finite. One
// read of the data: blocks of finite values cost a vectorised test of their exponent bits.
int64_t FindNonFinite(const float* x, int64_t n);

// How a value reads in messages: "nan" (either sign), "inf", "-inf", or a finite value as %g.
std::string DescribeValue(double v);

}  // namespace towerps

#endif  // TOWERPS_COMMON_FINITE_H_
