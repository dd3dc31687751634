#include "kernels/shapes.h"

#include <algorithm>
#include <string>

namespace towerps::kernels {
namespace {

std::string Dims(int n, int c, int h, int w) {
  return "[" + std::to_string(n) + ", " + std::to_string(c) + ", " + std::to_string(h) + ", " +
         std::to_string(w) + "]";
}

}  // namespace

Status Conv2dShape::Validate() const {
  if (n < 1 || c < 1 || h < 1 || w < 1) {
    return InvalidArgumentError("conv2d: input shape " + Dims(n, c, h, w) + " must be positive");
  }
  if (k < 1 || r < 1 || s < 1) {
    return InvalidArgumentError("conv2d: filter shape " + Dims(k, c, r, s) + " must be positive");
  }
  if (stride_h < 1 || stride_w < 1) {
    return InvalidArgumentError("conv2d: stride " + std::to_string(stride_h) + "x" +
                                std::to_string(stride_w) + " must be >= 1");
  }
  if (pad_h < 0 || pad_w < 0 || pad_h >= r || pad_w >= s) {
    return InvalidArgumentError("conv2d: padding " + std::to_string(pad_h) + "x" +
                                std::to_string(pad_w) + " must be in [0, kernel size)");
  }
  if (h + 2 * pad_h < r || w + 2 * pad_w < s) {
    return InvalidArgumentError("conv2d: kernel " + std::to_string(r) + "x" + std::to_string(s) +
                                " is larger than the padded input " + Dims(n, c, h, w));
  }
  return Status::Ok();
}

Pool2dShape Pool2dShape::Valid(int n, int c, int h, int w, int window, int stride) {
  Pool2dShape p{n, c, h, w, window, window, stride, stride, 0, 0, 0, 0};
  p.out_h = h >= window ? (h - window) / stride + 1 : 0;
  p.out_w = w >= window ? (w - window) / stride + 1 : 0;
  return p;
}

Pool2dShape Pool2dShape::Same(int n, int c, int h, int w, int window, int stride) {
  Pool2dShape p{n, c, h, w, window, window, stride, stride, 0, 0, 0, 0};
  if (stride < 1) return p;  // Validate() reports it
  p.out_h = (h + stride - 1) / stride;
  p.out_w = (w + stride - 1) / stride;
  const int total_h = std::max((p.out_h - 1) * stride + window - h, 0);
  const int total_w = std::max((p.out_w - 1) * stride + window - w, 0);
  p.pad_h = total_h / 2;
  p.pad_w = total_w / 2;
  return p;
}

Status Pool2dShape::Validate() const {
  if (n < 1 || c < 1 || h < 1 || w < 1) {
    return InvalidArgumentError("pool2d: input shape " + Dims(n, c, h, w) + " must be positive");
  }
  if (window_h < 1 || window_w < 1 || stride_h < 1 || stride_w < 1) {
    return InvalidArgumentError("pool2d: window " + std::to_string(window_h) + "x" +
                                std::to_string(window_w) + " and stride " +
                                std::to_string(stride_h) + "x" + std::to_string(stride_w) +
                                " must be >= 1");
  }
  if (out_h < 1 || out_w < 1) {
    return InvalidArgumentError("pool2d: output " + std::to_string(out_h) + "x" +
                                std::to_string(out_w) + " is empty for input " + Dims(n, c, h, w));
  }
  if (pad_h < 0 || pad_w < 0 || pad_h >= window_h || pad_w >= window_w) {
    return InvalidArgumentError("pool2d: padding " + std::to_string(pad_h) + "x" +
                                std::to_string(pad_w) + " must be in [0, window)");
  }
  // The last window must start inside the input.
  if ((out_h - 1) * stride_h - pad_h >= h || (out_w - 1) * stride_w - pad_w >= w) {
    return InvalidArgumentError("pool2d: output " + std::to_string(out_h) + "x" +
                                std::to_string(out_w) + " has windows outside input " +
                                Dims(n, c, h, w));
  }
  return Status::Ok();
}

Status LrnParams::Validate() const {
  if (depth_radius < 0) {
    return InvalidArgumentError("lrn: depth_radius " + std::to_string(depth_radius) +
                                " must be >= 0");
  }
  if (!(bias > 0.0f) || !(alpha >= 0.0f) || !(beta >= 0.0f)) {
    return InvalidArgumentError("lrn: bias " + std::to_string(bias) + " must be > 0, alpha " +
                                std::to_string(alpha) + " and beta " + std::to_string(beta) +
                                " must be >= 0");
  }
  return Status::Ok();
}

}  // namespace towerps::kernels
