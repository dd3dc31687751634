// Geometry of the image ops: 2-D convolution and 2-D pooling over NCHW tensors.
//
// Contract: plain value types. Validate() returns kInvalidArgument naming the bad value; the
// kernels assume a validated shape (a bad one is a bug, caught by TOWERPS_CHECK where cheap).
#ifndef TOWERPS_KERNELS_SHAPES_H_
#define TOWERPS_KERNELS_SHAPES_H_

#include <cstdint>

#include "towerps/status.h"

namespace towerps::kernels {

// Convolution of x [n, c, h, w] with weights [k, c, r, s] (OIHW), zero padding `pad_h`/`pad_w` on
// both sides, stride `stride_h`/`stride_w`, giving y [n, k, out_h(), out_w()]. No dilation,
// no groups. Cross-correlation, as in every deep-learning framework.
struct Conv2dShape {
  int n = 1, c = 1, h = 1, w = 1;  // input
  int k = 1, r = 1, s = 1;         // output channels, kernel height, kernel width
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;

  int out_h() const { return (h + 2 * pad_h - r) / stride_h + 1; }
  int out_w() const { return (w + 2 * pad_w - s) / stride_w + 1; }
  int64_t x_size() const { return int64_t{n} * c * h * w; }
  int64_t y_size() const { return int64_t{n} * k * out_h() * out_w(); }
  int64_t w_size() const { return int64_t{k} * c * r * s; }
  Status Validate() const;
};

// Pooling of x [n, c, h, w] with a window_h x window_w window, giving y [n, c, out_h, out_w].
// Padding `pad_h`/`pad_w` is added at the top/left; the bottom/right padding is whatever out_h and
// out_w imply. Padded positions never win a max and are not counted by an average (TensorFlow's
// 'SAME' semantics). Every window must overlap the input.
struct Pool2dShape {
  int n = 1, c = 1, h = 1, w = 1;
  int window_h = 2, window_w = 2;
  int stride_h = 2, stride_w = 2;
  int pad_h = 0, pad_w = 0;
  int out_h = 0, out_w = 0;

  // 'VALID' pooling: no padding, floor((h - window) / stride) + 1 outputs.
  static Pool2dShape Valid(int n, int c, int h, int w, int window, int stride);
  // TensorFlow 'SAME' pooling: ceil(h / stride) outputs, padding split with the extra at the end.
  static Pool2dShape Same(int n, int c, int h, int w, int window, int stride);

  int64_t x_size() const { return int64_t{n} * c * h * w; }
  int64_t y_size() const { return int64_t{n} * c * out_h * out_w; }
  Status Validate() const;
};

// Local response normalization across channels of x [n, c, h, w] (TensorFlow's
// tf.nn.local_response_normalization):
//   sqr_sum[n, d, y, x] = sum_{d' = max(0, d - depth_radius)}^{min(c - 1, d + depth_radius)} x^2
//   out = x / (bias + alpha * sqr_sum) ^ beta
struct LrnParams {
  int depth_radius = 5;
  float bias = 1.0f;
  float alpha = 1.0f;
  float beta = 0.5f;
  Status Validate() const;
};

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_SHAPES_H_
