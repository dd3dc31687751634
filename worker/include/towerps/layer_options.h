// The options a model description uses: padding, weight initialization, activations, pooling,
// local response normalization, batch normalization and embedding tables. See
// <towerps/model_builder.h>.
//
// Contract: plain values. ModelBuilder::Build checks them and names the layer and the value of
// a bad one.
#ifndef TOWERPS_LAYER_OPTIONS_H_
#define TOWERPS_LAYER_OPTIONS_H_

#include <cstdint>

namespace towerps {

// Symmetric zero padding of a convolution or pooling window. kSame pads (k - 1) / 2 on each
// side, which keeps the size for stride 1 and odd k (pooling follows TensorFlow's 'SAME':
// ceil(size / stride) outputs); kValid pads nothing and drops windows that do not fit.
enum class Padding { kValid, kSame };

// Seeded weight initialization. Values come from a stream keyed by (seed, variable name), so a
// seed gives the same weights whatever the layer order, on every machine.
enum class Init {
  kHe,      // normal, stddev sqrt(2 / fan_in): for layers followed by ReLU
  kGlorot,  // uniform in +-sqrt(6 / (fan_in + fan_out)): for linear, tanh or sigmoid outputs
  kZeros,   // biases
};

enum class ActivationKind { kRelu, kTanh, kSigmoid };

enum class PoolKind { kMax, kAverage };

// How a Join block (ModelBuilder::Join) joins its branches' outputs.
enum class JoinKind {
  kAdd,     // elementwise sum; every branch gives the same shape
  kConcat,  // side by side, as one vector
  // DLRM's dot interaction (Naumov et al. 2019): the outputs, side by side, are cut into vectors
  // of the first branch's size d; the result is the first vector, then the dot product of every
  // pair of vectors (d + k(k-1)/2 values for k vectors).
  kDotInteraction,
};

// The loss a model is trained with (ModelBuilder::Loss), and what its last Dense layer gives.
enum class LossKind {
  // One logit per class; labels are class indices. Evaluated by accuracy.
  kSoftmaxCrossEntropy,
  // Binary labels (0 or 1, e.g. a click): one logit, the log-odds of label 1, trained with the
  // sigmoid cross-entropy (log loss). Evaluated by AUC, log loss and accuracy at 0.5.
  kSigmoidCrossEntropy,
  // Regression: one output per example, trained with the mean squared error against a float
  // target (Dataset::targets). Evaluated by the root mean squared error (RMSE).
  kMeanSquaredError,
};

// Local response normalization across channels (TensorFlow's
// tf.nn.local_response_normalization): x / (bias + alpha * sum of x^2 over the depth_radius
// neighbouring channels on each side) ^ beta.
struct LrnOptions {
  int depth_radius = 5;
  float bias = 1.0f;
  float alpha = 1.0f;
  float beta = 0.5f;
};

// Batch normalization (Ioffe and Szegedy 2015). Training normalizes with the batch's mean and
// variance; evaluation with the moving averages, which decay by `momentum` per update.
struct BatchNormOptions {
  float momentum = 0.9f;  // decay of the moving statistics, in [0, 1)
  float epsilon = 1e-5f;  // added to the variance, > 0
};

// An embedding table (ModelBuilder::Embedding): rows of `dim` floats keyed by 64-bit ids, held
// by the parameter servers, pulled and pushed by id and optimized there by --table-optimizer.
struct EmbeddingOptions {
  int64_t rows = 0;          // ids must be below it; 0: unbounded (any 64-bit id)
  int dim = 16;              // floats per row, 1 to 65536
  float init_scale = 0.05f;  // rows start uniform in [-init_scale, init_scale), drawn per id
};

// How ModelBuilder::EmbeddingBag pools a multi-hot field's rows into one per example: their sum,
// or their mean (an empty field gives zeros either way), as torch.nn.EmbeddingBag's modes.
enum class BagPooling { kSum, kMean };

}  // namespace towerps

#endif  // TOWERPS_LAYER_OPTIONS_H_
