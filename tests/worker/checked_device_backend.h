// CheckedDeviceBackend: a stand-in for a GPU backend in tests on machines without one.
//
// Backend<float> with "device" memory: the CPU backend's math on buffers it hands out itself,
// refusing (counting) every op whose pointers are not inside its own allocations, so a host
// pointer leaking into an op (inputs, labels, parameters, activations) is caught. Uploads are
// deferred to the next op and downloads to WaitCopy, as a stream would, so reading too early
// sees stale data. Two stand-ins copy from each other as two GPUs would (CopyFromPeer). Results
// are bitwise those of the CPU backend: same math, only the memory differs. In stream mode
// (RunAsStream) ops and copies run on a thread of their own with a latency each, so that tests
// can see what overlaps what.
//
// Contract: one caller at a time, like a real backend; only CopyFromPeer may read a peer that
// another thread is using (it looks up the peer's allocation table under a lock). Stream mode
// is for one backend alone (CopyFromPeer does not wait for the peer's stream).
#ifndef TOWERPS_TESTS_WORKER_CHECKED_DEVICE_BACKEND_H_
#define TOWERPS_TESTS_WORKER_CHECKED_DEVICE_BACKEND_H_

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/reference/reference_backend.h"
#include "tests/worker/stand_in_stream.h"

namespace towerps::worker {

using kernels::Conv2dShape;
using kernels::LrnParams;
using kernels::Pool2dShape;

// Backend<float> with "device" memory: host memory it allocates itself and checks.
class CheckedDeviceBackend final : public kernels::Backend<float> {
 public:
  // Default CPU options are valid, so Create does not fail; if it ever does, the test using
  // this backend fails here, and the ops run on the reference backend instead of aborting
  // every test in the binary.
  CheckedDeviceBackend() {
    auto cpu = kernels::CpuBackend::Create({});
    EXPECT_TRUE(cpu.ok()) << "CpuBackend::Create: " << cpu.status();
    if (cpu.ok()) {
      cpu_ = std::move(cpu).value();
    } else {
      cpu_ = std::make_unique<kernels::ReferenceBackend<float>>();
    }
  }
  ~CheckedDeviceBackend() override {
    stream_.reset();  // its queued ops use the allocations
    for (auto& [p, bytes] : live_) std::free(reinterpret_cast<void*>(p));
  }

  int violations = 0;
  std::string first_violation;
  int64_t bytes_to_device = 0, bytes_to_host = 0;
  std::set<const void*> async_destinations;  // every host buffer CopyToHostAsync wrote

  std::string name() const override { return "checked-device"; }
  // Peer copies between two stand-ins, as between two GPUs; counted.
  int peer_copies = 0;
  bool CanCopyFromPeer(const kernels::MemorySpace& peer) const override {
    return dynamic_cast<const CheckedDeviceBackend*>(&peer) != nullptr;
  }
  void CopyFromPeer(kernels::MemorySpace& peer, const void* src, size_t bytes, void* dst) override {
    auto& from = dynamic_cast<CheckedDeviceBackend&>(peer);
    Check(dst, bytes, "CopyFromPeer dst");
    if (!from.Owns(src, bytes) && violations++ == 0) first_violation = "CopyFromPeer src";
    ++peer_copies;
    Drain();
    std::memcpy(dst, src, bytes);
  }
  bool host_memory() const override { return false; }
  Result<void*> Allocate(size_t bytes) override {
    if (bytes == 0) return static_cast<void*>(nullptr);
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    std::lock_guard<std::mutex> lock(live_mu_);
    live_[reinterpret_cast<uintptr_t>(p)] = bytes;
    return p;
  }
  void Free(void* p) override {
    if (p == nullptr) return;
    Check(p, 1, "Free");
    Drain();  // ops queued before may still use it
    std::lock_guard<std::mutex> lock(live_mu_);
    live_.erase(reinterpret_cast<uintptr_t>(p));
    std::free(p);
  }
  void CopyFromHost(const void* host, size_t bytes, void* dst) override {
    Check(dst, bytes, "CopyFromHost");
    bytes_to_device += static_cast<int64_t>(bytes);
    Drain();
    std::memcpy(dst, host, bytes);
  }
  void CopyToHost(const void* src, size_t bytes, void* host) override {
    Check(src, bytes, "CopyToHost");
    bytes_to_host += static_cast<int64_t>(bytes);
    Drain();
    std::memcpy(host, src, bytes);
  }
  void Copy(const void* src, size_t bytes, void* dst) override {
    Check(src, bytes, "Copy");
    Check(dst, bytes, "Copy");
    Run([=] { std::memcpy(dst, src, bytes); });
  }
  void Synchronize() override {
    Flush();
    Drain();
  }
  // Deferred until the next op or copy (stream order), so a host buffer the model stops
  // keeping alive too early is read late (and caught by ASan).
  void CopyFromHostAsync(const void* host, size_t bytes, void* dst) override {
    Check(dst, bytes, "CopyFromHostAsync");
    bytes_to_device += static_cast<int64_t>(bytes);
    if (stream_) {
      stream_->Copy([=] { std::memcpy(dst, host, bytes); });
      return;
    }
    queued_.push_back({host, bytes, dst});
  }
  // Deferred until WaitCopy, so a model that reads a gradient before waiting sees stale data.
  uint64_t CopyToHostAsync(const void* src, size_t bytes, void* host) override {
    Check(src, bytes, "CopyToHostAsync");
    async_destinations.insert(host);
    pending_[next_ticket_] = {src, bytes, host};
    if (stream_) stream_->Download(next_ticket_, [=] { std::memcpy(host, src, bytes); });
    return next_ticket_++;
  }
  void WaitCopy(uint64_t ticket) override {
    Flush();
    auto it = pending_.find(ticket);
    ASSERT_NE(it, pending_.end()) << "WaitCopy of an unknown or already waited ticket";
    bytes_to_host += static_cast<int64_t>(it->second.bytes);
    if (stream_) {
      stream_->Wait(ticket);
    } else {
      std::memcpy(it->second.host, it->second.src, it->second.bytes);
    }
    pending_.erase(it);
  }

  // Stream mode (overlap tests): from now on ops and copies run in order on a thread of their
  // own, each op taking `op_latency` and each download `copy_latency`, while the caller only
  // queues them, as a GPU's host does; synchronous copies and Synchronize wait for the stream.
  // Call once, before the backend is used.
  void RunAsStream(std::chrono::microseconds op_latency, std::chrono::microseconds copy_latency) {
    stream_ = std::make_unique<StandInStream>(op_latency, copy_latency);
  }
  // Stream mode: when the stream finished its last op (copies aside).
  StandInStream::Clock::time_point last_op_done() { return stream_->last_op_done(); }
  size_t pending_copies() const { return pending_.size() + queued_.size(); }

  void Gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b,
            float beta, float* c) override {
    F(a, int64_t{m} * k, "Gemm a");
    F(b, int64_t{k} * n, "Gemm b");
    F(c, int64_t{m} * n, "Gemm c");
    Run([=, this] { cpu_->Gemm(ta, tb, m, n, k, alpha, a, b, beta, c); });
  }
  void BiasAdd(int outer, int channels, int inner, const float* bias, float* y) override {
    F(bias, channels, "BiasAdd bias");
    F(y, int64_t{outer} * channels * inner, "BiasAdd y");
    Run([=, this] { cpu_->BiasAdd(outer, channels, inner, bias, y); });
  }
  void BiasBackward(int outer, int channels, int inner, const float* dy, float* db) override {
    F(dy, int64_t{outer} * channels * inner, "BiasBackward dy");
    F(db, channels, "BiasBackward db");
    Run([=, this] { cpu_->BiasBackward(outer, channels, inner, dy, db); });
  }
  void Conv2dForward(const Conv2dShape& s, const float* x, const float* w, float* y) override {
    F(x, s.x_size(), "conv x");
    F(w, s.w_size(), "conv w");
    F(y, s.y_size(), "conv y");
    Run([=, this] { cpu_->Conv2dForward(s, x, w, y); });
  }
  void Conv2dBackwardData(const Conv2dShape& s, const float* dy, const float* w,
                          float* dx) override {
    F(dy, s.y_size(), "conv dy");
    F(w, s.w_size(), "conv w");
    F(dx, s.x_size(), "conv dx");
    Run([=, this] { cpu_->Conv2dBackwardData(s, dy, w, dx); });
  }
  void Conv2dBackwardFilter(const Conv2dShape& s, const float* x, const float* dy,
                            float* dw) override {
    F(x, s.x_size(), "conv x");
    F(dy, s.y_size(), "conv dy");
    F(dw, s.w_size(), "conv dw");
    Run([=, this] { cpu_->Conv2dBackwardFilter(s, x, dy, dw); });
  }
  void MaxPoolForward(const Pool2dShape& s, const float* x, float* y) override {
    F(x, s.x_size(), "pool x");
    F(y, s.y_size(), "pool y");
    Run([=, this] { cpu_->MaxPoolForward(s, x, y); });
  }
  void MaxPoolBackward(const Pool2dShape& s, const float* x, const float* dy, float* dx) override {
    F(x, s.x_size(), "pool x");
    F(dy, s.y_size(), "pool dy");
    F(dx, s.x_size(), "pool dx");
    Run([=, this] { cpu_->MaxPoolBackward(s, x, dy, dx); });
  }
  void AvgPoolForward(const Pool2dShape& s, const float* x, float* y) override {
    F(x, s.x_size(), "pool x");
    F(y, s.y_size(), "pool y");
    Run([=, this] { cpu_->AvgPoolForward(s, x, y); });
  }
  void AvgPoolBackward(const Pool2dShape& s, const float* dy, float* dx) override {
    F(dy, s.y_size(), "pool dy");
    F(dx, s.x_size(), "pool dx");
    Run([=, this] { cpu_->AvgPoolBackward(s, dy, dx); });
  }
  void ReluForward(int64_t n, const float* x, float* y) override {
    Unary(n, x, y);
    Run([=, this] { cpu_->ReluForward(n, x, y); });
  }
  void ReluBackward(int64_t n, const float* y, const float* dy, float* dx) override {
    Binary(n, y, dy, dx);
    Run([=, this] { cpu_->ReluBackward(n, y, dy, dx); });
  }
  void TanhForward(int64_t n, const float* x, float* y) override {
    Unary(n, x, y);
    Run([=, this] { cpu_->TanhForward(n, x, y); });
  }
  void TanhBackward(int64_t n, const float* y, const float* dy, float* dx) override {
    Binary(n, y, dy, dx);
    Run([=, this] { cpu_->TanhBackward(n, y, dy, dx); });
  }
  void SigmoidForward(int64_t n, const float* x, float* y) override {
    Unary(n, x, y);
    Run([=, this] { cpu_->SigmoidForward(n, x, y); });
  }
  void SigmoidBackward(int64_t n, const float* y, const float* dy, float* dx) override {
    Binary(n, y, dy, dx);
    Run([=, this] { cpu_->SigmoidBackward(n, y, dy, dx); });
  }
  void LrnForward(int n, int c, int hw, const LrnParams& p, const float* x, float* y) override {
    Unary(int64_t{n} * c * hw, x, y);
    Run([=, this] { cpu_->LrnForward(n, c, hw, p, x, y); });
  }
  void LrnBackward(int n, int c, int hw, const LrnParams& p, const float* x, const float* dy,
                   float* dx) override {
    Binary(int64_t{n} * c * hw, x, dy, dx);
    Run([=, this] { cpu_->LrnBackward(n, c, hw, p, x, dy, dx); });
  }
  void BatchNormForwardTraining(int n, int c, int hw, float epsilon, const float* x,
                                const float* gamma, const float* beta, float* y, float* mean,
                                float* var, float* inv_std) override {
    Unary(int64_t{n} * c * hw, x, y);
    F(gamma, c, "gamma");
    F(beta, c, "beta");
    F(mean, c, "mean");
    F(var, c, "var");
    F(inv_std, c, "inv_std");
    Run([=, this] {
      cpu_->BatchNormForwardTraining(n, c, hw, epsilon, x, gamma, beta, y, mean, var, inv_std);
    });
  }
  void BatchNormForwardInference(int n, int c, int hw, float epsilon, const float* x,
                                 const float* gamma, const float* beta, const float* mean,
                                 const float* var, float* y) override {
    Unary(int64_t{n} * c * hw, x, y);
    F(gamma, c, "gamma");
    F(beta, c, "beta");
    F(mean, c, "mean");
    F(var, c, "var");
    Run([=, this] {
      cpu_->BatchNormForwardInference(n, c, hw, epsilon, x, gamma, beta, mean, var, y);
    });
  }
  void BatchNormBackward(int n, int c, int hw, const float* x, const float* dy, const float* gamma,
                         const float* mean, const float* inv_std, float* dx, float* dgamma,
                         float* dbeta) override {
    Binary(int64_t{n} * c * hw, x, dy, dx);
    for (const float* p : {gamma, mean, inv_std, static_cast<const float*>(dgamma),
                           static_cast<const float*>(dbeta)}) {
      F(p, c, "batch norm channel vector");
    }
    Run([=, this] {
      cpu_->BatchNormBackward(n, c, hw, x, dy, gamma, mean, inv_std, dx, dgamma, dbeta);
    });
  }
  void GlobalAvgPoolForward(int n, int c, int hw, const float* x, float* y) override {
    F(x, int64_t{n} * c * hw, "x");
    F(y, int64_t{n} * c, "y");
    Run([=, this] { cpu_->GlobalAvgPoolForward(n, c, hw, x, y); });
  }
  void GlobalAvgPoolBackward(int n, int c, int hw, const float* dy, float* dx) override {
    F(dy, int64_t{n} * c, "dy");
    F(dx, int64_t{n} * c * hw, "dx");
    Run([=, this] { cpu_->GlobalAvgPoolBackward(n, c, hw, dy, dx); });
  }
  void DropoutForward(int64_t n, float rate, uint64_t seed, const float* x, float* mask,
                      float* y) override {
    Binary(n, x, mask, y);
    Run([=, this] { cpu_->DropoutForward(n, rate, seed, x, mask, y); });
  }
  void DropoutBackward(int64_t n, const float* mask, const float* dy, float* dx) override {
    Binary(n, mask, dy, dx);
    Run([=, this] { cpu_->DropoutBackward(n, mask, dy, dx); });
  }
  void SoftmaxCrossEntropy(int batch, int classes, const float* logits, const int32_t* labels,
                           float grad_scale, float* loss, float* dlogits) override {
    F(logits, int64_t{batch} * classes, "logits");
    Check(labels, sizeof(int32_t) * batch, "labels");
    F(loss, batch, "loss");
    if (dlogits) F(dlogits, int64_t{batch} * classes, "dlogits");
    Run([=, this] {
      cpu_->SoftmaxCrossEntropy(batch, classes, logits, labels, grad_scale, loss, dlogits);
    });
  }
  void SigmoidCrossEntropy(int batch, const float* logits, const int32_t* labels, float grad_scale,
                           float* loss, float* dlogits) override {
    F(logits, batch, "logits");
    Check(labels, sizeof(int32_t) * batch, "labels");
    F(loss, batch, "loss");
    if (dlogits) F(dlogits, batch, "dlogits");
    Run([=, this] { cpu_->SigmoidCrossEntropy(batch, logits, labels, grad_scale, loss, dlogits); });
  }
  void SquaredError(int batch, int width, const float* outputs, const float* targets,
                    float grad_scale, float* loss, float* doutputs) override {
    F(outputs, int64_t{batch} * width, "outputs");
    F(targets, int64_t{batch} * width, "targets");
    F(loss, batch, "loss");
    if (doutputs) F(doutputs, int64_t{batch} * width, "doutputs");
    Run([=, this] {
      cpu_->SquaredError(batch, width, outputs, targets, grad_scale, loss, doutputs);
    });
  }
  void CopyColumns(int64_t rows, int64_t width, const float* x, int64_t x_stride, float* y,
                   int64_t y_stride) override {
    Columns(rows, width, x, x_stride, y, y_stride);
    Run([=, this] { cpu_->CopyColumns(rows, width, x, x_stride, y, y_stride); });
  }
  void AddColumns(int64_t rows, int64_t width, const float* x, int64_t x_stride, float* y,
                  int64_t y_stride) override {
    Columns(rows, width, x, x_stride, y, y_stride);
    Run([=, this] { cpu_->AddColumns(rows, width, x, x_stride, y, y_stride); });
  }
  void EmbeddingForward(int batch, int fields, int dim, const float* rows, const uint32_t* index,
                        float* y, int64_t y_stride) override {
    Check(index, sizeof(uint32_t) * batch * fields, "index");
    if (batch > 0) F(y, (batch - 1) * y_stride + int64_t{fields} * dim, "y");
    Run([=, this] { cpu_->EmbeddingForward(batch, fields, dim, rows, index, y, y_stride); });
  }
  void EmbeddingBackward(int fields, int dim, int64_t unique, const uint32_t* offsets,
                         const uint32_t* positions, const float* dy, int64_t dy_stride,
                         float* drows) override {
    Check(offsets, sizeof(uint32_t) * (unique + 1), "offsets");
    F(drows, unique * dim, "drows");
    Run([=, this] {
      cpu_->EmbeddingBackward(fields, dim, unique, offsets, positions, dy, dy_stride, drows);
    });
  }
  void EmbeddingBagForward(int batch, int dim, const float* rows, const uint32_t* index,
                           const uint32_t* bags, bool mean, float* y, int64_t y_stride) override {
    Check(bags, sizeof(uint32_t) * (batch + 1), "bags");
    if (batch > 0) F(y, (batch - 1) * y_stride + dim, "y");
    Run([=, this] { cpu_->EmbeddingBagForward(batch, dim, rows, index, bags, mean, y, y_stride); });
  }
  void EmbeddingBagBackward(int dim, int64_t unique, const uint32_t* offsets,
                            const uint32_t* examples, const uint32_t* bags, bool mean,
                            const float* dy, int64_t dy_stride, float* drows) override {
    Check(offsets, sizeof(uint32_t) * (unique + 1), "offsets");
    F(drows, unique * dim, "drows");
    Run([=, this] {
      cpu_->EmbeddingBagBackward(dim, unique, offsets, examples, bags, mean, dy, dy_stride, drows);
    });
  }
  void DotInteractionForward(int batch, int k, int d, const float* x, float* y) override {
    F(x, int64_t{batch} * k * d, "x");
    F(y, int64_t{batch} * (d + int64_t{k} * (k - 1) / 2), "y");
    Run([=, this] { cpu_->DotInteractionForward(batch, k, d, x, y); });
  }
  void DotInteractionBackward(int batch, int k, int d, const float* x, const float* dy,
                              float* dx) override {
    F(x, int64_t{batch} * k * d, "x");
    F(dy, int64_t{batch} * (d + int64_t{k} * (k - 1) / 2), "dy");
    F(dx, int64_t{batch} * k * d, "dx");
    Run([=, this] { cpu_->DotInteractionBackward(batch, k, d, x, dy, dx); });
  }
  void Add(int64_t n, const float* a, const float* b, float* y) override {
    Binary(n, a, b, y);
    Run([=, this] { cpu_->Add(n, a, b, y); });
  }
  void Axpy(int64_t n, float alpha, const float* x, float* y) override {
    Unary(n, x, y);
    Run([=, this] { cpu_->Axpy(n, alpha, x, y); });
  }
  void Scale(int64_t n, float alpha, float* y) override {
    F(y, n, "Scale");
    Run([=, this] { cpu_->Scale(n, alpha, y); });
  }
  void Fill(int64_t n, float value, float* y) override {
    F(y, n, "Fill");
    Run([=, this] { cpu_->Fill(n, value, y); });
  }
  void AverageOf(int k, const float* const* in, int64_t n, float* out) override {
    for (int j = 0; j < k; ++j) F(in[j], n, "AverageOf in");
    F(out, n, "AverageOf out");
    Run([=, this, inputs = std::vector<const float*>(in, in + k)] {
      cpu_->AverageOf(k, inputs.data(), n, out);
    });
  }
  void MomentumUpdate(int64_t n, float lr, float momentum, float weight_decay, const float* g,
                      float* v, float* p) override {
    Binary(n, g, v, p);
    Run([=, this] { cpu_->MomentumUpdate(n, lr, momentum, weight_decay, g, v, p); });
  }

 private:
  // An op (or, op = false, a copy) in stream order: now, or on the stream in stream mode.
  void Run(std::function<void()> fn, bool op = true) {
    if (!stream_) {
      fn();
    } else if (op) {
      stream_->Op(std::move(fn));
    } else {
      stream_->Copy(std::move(fn));
    }
  }
  // Stream mode: waits until the stream has run everything queued.
  void Drain() {
    if (stream_) stream_->Drain();
  }
  void Flush() {
    for (const PendingCopy& c : queued_) std::memcpy(c.host, c.src, c.bytes);  // host -> dst
    queued_.clear();
  }
  // Whether [p, p + bytes) lies inside one of this backend's allocations. Thread-safe.
  bool Owns(const void* p, size_t bytes) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(live_mu_);
    auto it = live_.upper_bound(a);
    if (it == live_.begin()) return false;
    --it;
    return a >= it->first && a + bytes <= it->first + it->second;
  }
  void Check(const void* p, size_t bytes, const char* what) {
    Flush();  // every op and copy runs after the uploads queued before it
    if (!Owns(p, bytes) && violations++ == 0) first_violation = what;
  }
  void F(const float* p, int64_t n, const char* what) {
    Check(p, static_cast<size_t>(n) * sizeof(float), what);
  }
  void Unary(int64_t n, const float* x, const float* y) {
    F(x, n, "input");
    F(y, n, "output");
  }
  // The rows x width blocks of two strided matrices (CopyColumns, AddColumns).
  void Columns(int64_t rows, int64_t width, const float* x, int64_t x_stride, const float* y,
               int64_t y_stride) {
    if (rows == 0) return;
    F(x, (rows - 1) * x_stride + width, "x");
    F(y, (rows - 1) * y_stride + width, "y");
  }
  void Binary(int64_t n, const float* a, const float* b, const float* c) {
    F(a, n, "first");
    F(b, n, "second");
    F(c, n, "output");
  }

  struct PendingCopy {
    const void* src;
    size_t bytes;
    void* host;
  };
  std::unique_ptr<kernels::Backend<float>> cpu_;  // the math; a CpuBackend
  std::mutex live_mu_;  // a peer's CopyFromPeer reads live_ from another thread
  std::map<uintptr_t, size_t> live_;
  std::map<uint64_t, PendingCopy> pending_;
  std::vector<PendingCopy> queued_;  // uploads: src = host, host = device destination
  uint64_t next_ticket_ = 1;
  std::unique_ptr<StandInStream> stream_;  // stream mode; null: ops run at once
};

}  // namespace towerps::worker

#endif  // TOWERPS_TESTS_WORKER_CHECKED_DEVICE_BACKEND_H_
