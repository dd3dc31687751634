// CpuBackend: the fast float32 CPU implementation of Backend<float> (kernels/backend.h).
//
// How: matrix products call OpenBLAS sgemm; convolution is oneDNN or im2col + sgemm per image, as
// the ConvPlanner chooses per shape (kernels/cpu/conv_planner.h); pooling, LRN,
// activations and the loss are direct loops. This file's class is the dispatch and the dense
// algebra; each op family is a file of free functions, named as in kernels/cuda/: conv.h,
// pooling.h, lrn.h, batch_norm.h (with global pooling and the add) and interaction.h (column
// blocks, embeddings, the dot interaction), sharing a CpuContext. Work is split over
// `intra_op_threads` threads by our own ThreadPool (GEMMs by output rows or columns, convolution by
// image); OpenBLAS itself is kept single-threaded so the two never compete for cores.
//
// Contract:
//  - Host pointers, borrowed for the duration of the call; host_memory() is true and memory
//    comes from the heap (HostMemorySpace). Every op is synchronous.
//  - Not thread-safe: one caller at a time per backend (it owns scratch buffers and a pool).
//  - Create() sets OpenBLAS's process-wide thread count to 1; a process should not mix this
//    backend with code that relies on multi-threaded OpenBLAS.
#ifndef TOWERPS_KERNELS_CPU_CPU_BACKEND_H_
#define TOWERPS_KERNELS_CPU_CPU_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/conv_planner.h"
#include "kernels/cpu/cpu_context.h"
#include "towerps/result.h"

namespace towerps::kernels {

struct CpuBackendOptions {
  // Threads used inside one op (the calling thread included). 1..256.
  int intra_op_threads = 1;
  // Which convolution path runs each shape: the measured rule, or one path everywhere.
  // kOnednn needs a build with oneDNN (cpu::ConvPlanner::Available()).
  cpu::ConvAlgorithm conv_algorithm = cpu::ConvAlgorithm::kAuto;
};

class CpuBackend final : public Backend<float>, public HostMemorySpace {
 public:
  // Fails with kInvalidArgument for an out-of-range thread count.
  static Result<std::unique_ptr<CpuBackend>> Create(const CpuBackendOptions& options);

  std::string name() const override { return "cpu"; }
  int intra_op_threads() const { return ctx_.threads(); }

  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
            const float* b, float beta, float* c) override;
  void BiasAdd(int outer, int channels, int inner, const float* bias, float* y) override;
  void BiasBackward(int outer, int channels, int inner, const float* dy, float* db) override;

  void Conv2dForward(const Conv2dShape& s, const float* x, const float* w, float* y) override;
  void Conv2dBackwardData(const Conv2dShape& s, const float* dy, const float* w,
                          float* dx) override;
  void Conv2dBackwardFilter(const Conv2dShape& s, const float* x, const float* dy,
                            float* dw) override;
  std::string Conv2dPlan(const Conv2dShape& s) override { return planner_.Describe(s); }

  void MaxPoolForward(const Pool2dShape& s, const float* x, float* y) override;
  void MaxPoolBackward(const Pool2dShape& s, const float* x, const float* dy, float* dx) override;
  void AvgPoolForward(const Pool2dShape& s, const float* x, float* y) override;
  void AvgPoolBackward(const Pool2dShape& s, const float* dy, float* dx) override;

  void ReluForward(int64_t n, const float* x, float* y) override;
  void ReluBackward(int64_t n, const float* y, const float* dy, float* dx) override;
  void TanhForward(int64_t n, const float* x, float* y) override;
  void TanhBackward(int64_t n, const float* y, const float* dy, float* dx) override;
  void SigmoidForward(int64_t n, const float* x, float* y) override;
  void SigmoidBackward(int64_t n, const float* y, const float* dy, float* dx) override;

  void LrnForward(int n, int c, int hw, const LrnParams& p, const float* x, float* y) override;
  void LrnBackward(int n, int c, int hw, const LrnParams& p, const float* x, const float* dy,
                   float* dx) override;

  void BatchNormForwardTraining(int n, int c, int hw, float epsilon, const float* x,
                                const float* gamma, const float* beta, float* y, float* mean,
                                float* var, float* inv_std) override;
  void BatchNormForwardInference(int n, int c, int hw, float epsilon, const float* x,
                                 const float* gamma, const float* beta, const float* mean,
                                 const float* var, float* y) override;
  void BatchNormBackward(int n, int c, int hw, const float* x, const float* dy, const float* gamma,
                         const float* mean, const float* inv_std, float* dx, float* dgamma,
                         float* dbeta) override;
  void GlobalAvgPoolForward(int n, int c, int hw, const float* x, float* y) override;
  void GlobalAvgPoolBackward(int n, int c, int hw, const float* dy, float* dx) override;

  void DropoutForward(int64_t n, float rate, uint64_t seed, const float* x, float* mask,
                      float* y) override;
  void DropoutBackward(int64_t n, const float* mask, const float* dy, float* dx) override;

  void SoftmaxCrossEntropy(int batch, int classes, const float* logits, const int32_t* labels,
                           float grad_scale, float* loss, float* dlogits) override;

  void SquaredError(int batch, int width, const float* outputs, const float* targets,
                    float grad_scale, float* loss, float* doutputs) override;
  void SigmoidCrossEntropy(int batch, const float* logits, const int32_t* labels, float grad_scale,
                           float* loss, float* dlogits) override;
  void CopyColumns(int64_t rows, int64_t width, const float* x, int64_t x_stride, float* y,
                   int64_t y_stride) override;
  void AddColumns(int64_t rows, int64_t width, const float* x, int64_t x_stride, float* y,
                  int64_t y_stride) override;
  void EmbeddingForward(int batch, int fields, int dim, const float* rows, const uint32_t* index,
                        float* y, int64_t y_stride) override;
  void EmbeddingBackward(int fields, int dim, int64_t unique, const uint32_t* offsets,
                         const uint32_t* positions, const float* dy, int64_t dy_stride,
                         float* drows) override;
  void EmbeddingBagForward(int batch, int dim, const float* rows, const uint32_t* index,
                           const uint32_t* bags, bool mean, float* y, int64_t y_stride) override;
  void EmbeddingBagBackward(int dim, int64_t unique, const uint32_t* offsets,
                            const uint32_t* examples, const uint32_t* bags, bool mean,
                            const float* dy, int64_t dy_stride, float* drows) override;
  void DotInteractionForward(int batch, int k, int d, const float* x, float* y) override;
  void DotInteractionBackward(int batch, int k, int d, const float* x, const float* dy,
                              float* dx) override;
  void Add(int64_t n, const float* a, const float* b, float* y) override;
  void Axpy(int64_t n, float alpha, const float* x, float* y) override;
  void Scale(int64_t n, float alpha, float* y) override;
  void Fill(int64_t n, float value, float* y) override;
  void AverageOf(int k, const float* const* in, int64_t n, float* out) override;
  void MomentumUpdate(int64_t n, float lr, float momentum, float weight_decay, const float* g,
                      float* v, float* p) override;

 private:
  explicit CpuBackend(const CpuBackendOptions& o)
      : ctx_(o.intra_op_threads), planner_(o.conv_algorithm, o.intra_op_threads) {}

  cpu::CpuContext ctx_;
  cpu::ConvPlanner planner_;
};

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_CPU_CPU_BACKEND_H_
