#include "bench/layer_profile.h"

#include <chrono>
#include <random>
#include <vector>

#include "kernels/backend_buffer.h"
#include "worker/layers/conv2d.h"

namespace towerps::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Multiply-adds of one forward pass per example: the kernel's elements times the output
// positions that reuse it (1 for a dense layer). 0 for layers without a kernel.
double ForwardMacs(worker::Layer<float>& layer) {
  auto params = layer.parameters();
  if (params.empty()) return 0;
  const Shape& kernel = params[0]->shape;
  const double kernel_elems = static_cast<double>(NumElements(kernel));
  if (kernel.size() == 4) {  // conv [k, c, r, s]; output [k, oh, ow]
    const Shape& out = layer.output_shape();
    return kernel_elems * static_cast<double>(out[1] * out[2]);
  }
  return kernel_elems;
}

// The layers to time: a residual block's own layers (named "stage1_block1/conv1" by the model
// builder), every other layer itself.
void Leaves(worker::Layer<float>& layer, std::vector<worker::Layer<float>*>* out) {
  const auto subs = layer.sublayers();
  if (subs.empty()) out->push_back(&layer);
  for (worker::Layer<float>* sub : subs) Leaves(*sub, out);
}

}  // namespace

std::vector<LayerTiming> ProfileLayers(worker::Model<float>& model,
                                       kernels::Backend<float>& backend, int batch, int repeats) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<LayerTiming> out;
  std::vector<worker::Layer<float>*> layers;
  for (const auto& layer : model.layers()) Leaves(*layer, &layers);
  for (size_t i = 0; i < layers.size(); ++i) {
    worker::Layer<float>& layer = *layers[i];
    // Buffers in the backend's memory (a GPU's too); timings end with Synchronize, so queued
    // work is counted.
    auto buffer = [&](int64_t n, bool random) {
      std::vector<float> host(static_cast<size_t>(n));
      if (random) {
        for (float& v : host) v = dist(rng);
      }
      auto b = kernels::BackendBuffer<float>::Allocate(&backend, n);
      TOWERPS_CHECK(b.ok()) << b.status().ToString();
      backend.CopyFromHost(host.data(), host.size() * sizeof(float), b->data());
      return std::move(b).value();
    };
    auto x = buffer(batch * layer.input_size(), true),
         dy = buffer(batch * layer.output_size(), true);
    auto y = buffer(batch * layer.output_size(), false),
         dx = buffer(batch * layer.input_size(), false);
    TOWERPS_CHECK(layer.Reserve(backend, batch).ok());
    float* dx_ptr = i == 0 ? nullptr : dx.data();
    layer.Forward(backend, batch, x.data(), y.data(), true);  // warm up
    layer.Backward(backend, batch, x.data(), y.data(), dy.data(), dx_ptr);
    backend.Synchronize();
    auto t0 = Clock::now();
    for (int r = 0; r < repeats; ++r) layer.Forward(backend, batch, x.data(), y.data(), true);
    backend.Synchronize();
    auto t1 = Clock::now();
    for (int r = 0; r < repeats; ++r) {
      layer.Backward(backend, batch, x.data(), y.data(), dy.data(), dx_ptr);
    }
    backend.Synchronize();
    auto t2 = Clock::now();
    LayerTiming t;
    t.name = layer.name();
    if (const auto* conv = dynamic_cast<const worker::Conv2d<float>*>(&layer))
      t.path = conv->plan();
    t.forward_ms = std::chrono::duration<double, std::milli>(t1 - t0).count() / repeats;
    t.backward_ms = std::chrono::duration<double, std::milli>(t2 - t1).count() / repeats;
    const double macs = ForwardMacs(layer) * batch;
    t.forward_flops = 2 * macs;
    t.backward_flops = 2 * macs * (i == 0 ? 1 : 2);  // filter gradient, plus dx after layer 0
    out.push_back(t);
  }
  return out;
}

}  // namespace towerps::bench
