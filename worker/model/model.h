// Model<T>: a feed-forward stack of layers ending in class logits, trained with softmax
// cross-entropy, or in one logit for binary labels, trained with the sigmoid cross-entropy
// (ModelBuilder::Loss). Built from a ModelBuilder (<towerps/model_builder.h>) by BuildModel
// (model_factory.h) or by name from the zoo (zoo.h).
//
// Embedding tables (ModelBuilder::Embedding) stand in front of the layers: for each example the
// rows of its categorical ids are concatenated, table by table and field by field, before its
// dense features, and the first layer takes that whole vector (Backend::EmbeddingForward). A
// table's rows are not held here: before each step the caller gives each table the rows of the
// batch's distinct ids and, per example and field, which of them it uses (SetTableRows;
// job/row_batch.h makes both), and after TrainStep takes the gradient of those rows
// (table_gradient, host memory; Backend::EmbeddingBackward sums each row's uses in a fixed
// order). On a device backend the rows and the index are copied to the device each step, and the
// rows' gradient back (model_tables.cc).
//
// Contract:
//  - Dense variables are every layer's parameters in forward-layer order ("conv1/kernel",
//    "conv1/bias", ...): indices 0 .. num_variables() - 1. variables() lists them, then the
//    tables (ps::VariableKind::kTable), and signature() hashes that whole list (dtype float32:
//    what the parameter server stores, also for a double model used in gradient checks).
//  - value(i) / gradient(i) are contiguous host buffers owned by the model; gradients are those
//    of the mean loss over the last TrainStep's batch.
//  - Backend memory: on host-memory backends (CPU, reference) the layers compute on those host
//    buffers directly, with no copies. Otherwise the model keeps a device mirror of every value
//    and gradient and its activations in the backend's memory: values written on the host
//    (SetVariable, or through value(i)) are copied to the device, in forward order, at the start
//    of the next TrainStep/Evaluate. Each variable's gradient is copied to the (pinned) host
//    buffer on the backend's copy stream as soon as backward has produced it, while backward
//    goes on; the gradient-ready hooks run, in reverse layer order, as those copies land, so a
//    worker pushes a layer's gradient while the device computes the layers before it. x and labels
//    are host memory in every case; they are staged into the backend's memory when it is not host
//    memory. Running out of backend memory is kResourceExhausted from TrainStep/Evaluate.
//  - Inputs are `batch` examples of input_shape() back to back (NCHW for images); labels are
//    int32 class indices. A bad batch size or label returns kInvalidArgument.
//  - The backend is borrowed and must outlive the model. Not thread-safe.
#ifndef TOWERPS_WORKER_MODEL_MODEL_H_
#define TOWERPS_WORKER_MODEL_MODEL_H_

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/tensor.h"
#include "job/variable.h"
#include "kernels/backend.h"
#include "kernels/backend_buffer.h"
#include "towerps/model_builder.h"
#include "towerps/result.h"
#include "worker/layers/layer.h"

namespace towerps::worker {

struct StepResult {
  double loss = 0;      // mean loss over the batch (softmax or sigmoid cross-entropy)
  int64_t correct = 0;  // examples whose largest logit is the label (binary: logit > 0 for 1)
  int batch = 0;
  // Evaluate of a binary model only: each example's predicted probability of label 1, for
  // AUC and log loss.
  std::vector<double> probabilities;
};

template <typename T>
class Model {
 public:
  // Called with a variable index as soon as backward has written that variable's gradient (in
  // reverse layer order), so a worker can push it while backward goes on.
  using GradientReadyFn = std::function<void(int variable)>;

  // Takes the layers; they must chain (each input shape the previous output shape, the first's
  // the tables' rows then the dense input) and the last must output [num_classes]. Checked: the
  // factory guarantees it.
  // With the sigmoid loss the last layer outputs [1] and num_classes() is 2; with the squared
  // error it outputs [1] and num_classes() is 0.
  Model(Shape input_shape, std::vector<EmbeddingSpec> tables,
        std::vector<std::unique_ptr<Layer<T>>> layers, kernels::Backend<T>* backend,
        LossKind loss = LossKind::kSoftmaxCrossEntropy);
  Model(Shape input_shape, std::vector<std::unique_ptr<Layer<T>>> layers,
        kernels::Backend<T>* backend)
      : Model(std::move(input_shape), {}, std::move(layers), backend) {}
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Shape& input_shape() const { return input_shape_; }  // the dense features
  int num_classes() const { return num_classes_; }           // 0 for a regression model
  LossKind loss() const { return loss_kind_; }
  bool regression() const { return loss_kind_ == LossKind::kMeanSquaredError; }
  // A regression model's targets for the next TrainStep or Evaluate, one per example (its labels
  // are then ignored and may be null). Borrowed until that step returns.
  void SetTargets(const T* targets) { targets_ = targets; }
  // Every variable the servers hold: the dense ones, then the tables.
  const std::vector<ps::VariableSpec>& variables() const { return specs_; }
  int num_variables() const { return static_cast<int>(params_.size()); }  // the dense ones

  // Embedding tables, in declaration order; table t is variable num_variables() + t.
  int num_tables() const { return static_cast<int>(tables_.size()); }
  const EmbeddingSpec& table(int t) const { return tables_.at(t).spec; }
  int table_variable(int t) const { return num_variables() + t; }
  // Where table t's ids start in an example's categorical ids, and how many it has.
  int table_field_offset(int t) const { return tables_.at(t).field_offset; }
  // An EmbeddingBag's multi-hot field (Dataset::multi_hot's index); -1 for one-hot tables.
  int table_bag(int t) const { return tables_.at(t).bag; }
  int categorical_fields() const { return fields_; }
  int multi_hot_fields() const { return bags_; }
  // Table t's rows for the next TrainStep or Evaluate: `rows`, `unique` rows of the table's dim,
  // and for each example and field of the table (batch x fields entries, example after example)
  // the index of its row in `rows`. An EmbeddingBag's table also takes `bags`, batch + 1
  // offsets: example b's ids are inverse[bags[b] - bags[0] .. bags[b + 1] - bags[0]) (a slice
  // of a larger batch need not start at 0). Borrowed until that step returns.
  void SetTableRows(int t, const T* rows, int64_t unique, const uint32_t* inverse,
                    const uint32_t* bags = nullptr);
  // After TrainStep: the gradient of the mean loss with respect to table t's rows, `unique` x dim,
  // each row's contributions summed in example order.
  const std::vector<T>& table_gradient(int t) const { return tables_.at(t).grad; }
  uint64_t signature() const { return signature_; }  // ps::VariableListHash(variables())
  int64_t num_parameters() const;
  const std::vector<std::unique_ptr<Layer<T>>>& layers() const { return layers_; }
  kernels::Backend<T>* backend() const { return backend_; }

  // Writing through the span is allowed: the variable is copied to the backend before the next
  // step.
  std::span<T> value(int i) {
    RefreshHostValue(i);
    MarkValueChanged(i);
    return params_.at(i)->value;
  }
  // Where the backend holds variable i's value, for an optimizer that updates it in place with
  // the backend's ops (e.g. MomentumUpdate on backend_gradient(i)). The host copy (value(),
  // GetVariable) is brought back from it when next read. On host-memory backends this is the
  // host value itself. Device mirrors exist after the first TrainStep or Evaluate.
  T* mutable_backend_value(int i);
  std::span<const T> gradient(int i) const { return params_.at(i)->grad; }
  // Where the backend holds variable i's gradient: the host buffer on host-memory backends,
  // the device mirror otherwise (valid after the first TrainStep).
  const T* backend_gradient(int i) const {
    const Parameter<T>& p = *params_.at(i);
    return p.device_grad != nullptr ? p.device_grad : p.grad.data();
  }
  // A float32 copy of variable i's value or gradient, shaped as the variable.
  Tensor GetVariable(int i) const;
  Tensor GetGradient(int i) const;
  // Copies `value` into variable i; kInvalidArgument naming the variable if the shape or dtype
  // differs.
  Status SetVariable(int i, const Tensor& value);

  // How TrainStep delivers gradients on a backend whose memory is not host memory.
  //  - kHost: each gradient is copied to gradient(i) and its hook runs once it is there.
  //  - kBackend: nothing is copied; each hook runs as soon as its layer's backward is queued,
  //    with the gradient at backend_gradient(i), ready in the backend's stream order (for
  //    reducing tower gradients on a device). gradient(i) is left as it was.
  // Host-memory backends behave the same under both.
  enum class GradientDelivery { kHost, kBackend };
  // Forward, loss and backward on one batch; fills every gradient.
  Result<StepResult> TrainStep(const T* x, const int32_t* labels, int batch,
                               const GradientReadyFn& on_gradient = nullptr,
                               GradientDelivery delivery = GradientDelivery::kHost);
  // Sizes every layer's buffers for `batch` and lets each plan its ops on the backend (a
  // convolution's path, Backend::Conv2dPlan): what every step does first, callable before the
  // first one so that --log-device-placement can show the plans.
  Status Reserve(int batch);
  // Forward only (dropout off): loss and accuracy.
  Result<StepResult> Evaluate(const T* x, const int32_t* labels, int batch);
  // The next TrainStep is the n-th (0-based): layers with random state (dropout) draw what they
  // would have drawn then (Layer::SetTrainingStep).
  void SetTrainingStep(uint64_t n) {
    for (auto& layer : layers_) layer->SetTrainingStep(n);
  }

 private:
  Status CheckBatch(const int32_t* labels, int batch) const;
  // Tables (model_tables.cc): the first layer's input, the tables' rows then *x (in the
  // backend's memory), per example, in input_; *x then points there. A no-op without tables;
  // kFailedPrecondition naming a table without rows.
  Status AssembleInput(int batch, bool with_gradient, const T** x);
  // From the first layer's input gradient, each table's row gradient, into Table::grad.
  void ScatterTableGradients();
  void MarkValueChanged(int i);
  // Copies variable i's mirror to the host value if it was written on the device.
  void RefreshHostValue(int i) const;
  // Sizes every activation buffer (and the device mirrors) for `batch`, uploads changed values
  // and stages x and labels; returns where the backend finds them.
  Status Prepare(const T* x, const int32_t* labels, int batch, bool with_gradient,
                 const T** backend_x, const int32_t** backend_labels);
  // Runs every layer; returns the logits buffer.
  const T* Forward(const T* x, int batch, bool training);
  // The loss on the backend (labels there), accuracy (and, evaluating a binary model, the
  // probabilities) from host_labels.
  StepResult Loss(const T* logits, const int32_t* labels, const int32_t* host_labels, int batch,
                  bool with_gradient);

  Shape input_shape_;
  struct Table {
    EmbeddingSpec spec;
    int field_offset = 0;     // in an example's categorical ids
    int64_t offset = 0;       // in the first layer's input
    const T* rows = nullptr;  // host memory, from SetTableRows
    int64_t unique = 0;
    const uint32_t* inverse = nullptr;
    int bag = -1;                       // EmbeddingBag: its multi-hot field
    const uint32_t* bags_in = nullptr;  // from SetTableRows: batch + 1, from any base
    std::vector<uint32_t> bags;         // the same from 0
    std::vector<T> grad;                // unique x dim, host memory
    // Each row's uses (kernels/embedding_uses.h): positions, or for a bag the uses' examples.
    std::vector<uint32_t> offsets, positions;
    // Device backends only: the rows, index, bags and uses copied there, and the rows' gradient.
    kernels::BackendBuffer<T> device_rows, device_grad;
    kernels::BackendBuffer<uint32_t> device_index, device_offsets, device_positions, device_bags;
  };
  std::vector<Table> tables_;
  int fields_ = 0;             // categorical ids per example, over every table
  int bags_ = 0;               // multi-hot fields, one per EmbeddingBag
  int64_t embedded_size_ = 0;  // the tables' part of the first layer's input, per example
  // With tables, in the backend's memory: the first layer's input and its gradient.
  kernels::BackendBuffer<T> input_, input_grad_;
  std::vector<std::unique_ptr<Layer<T>>> layers_;
  kernels::Backend<T>* backend_;  // borrowed
  LossKind loss_kind_;
  int num_classes_;
  int outputs_per_example_;  // the last layer's: num_classes_, or 1 with the sigmoid loss
  std::vector<Parameter<T>*> params_;
  std::vector<int> first_param_of_layer_;
  std::vector<ps::VariableSpec> specs_;
  uint64_t signature_;

  const bool host_memory_;  // the backend computes on host pointers

  // In the backend's memory.
  std::vector<kernels::BackendBuffer<T>> outputs_;  // per layer, batch * output_size
  kernels::BackendBuffer<T> grad_a_, grad_b_;       // ping-pong activation gradients
  kernels::BackendBuffer<T> loss_;                  // per example
  // Only when the backend's memory is not host memory: mirrors, staged inputs, host results.
  std::vector<kernels::BackendBuffer<T>> device_values_, device_grads_;
  std::vector<char> value_changed_;       // per variable: the host value is newer than the mirror
  mutable std::vector<char> host_stale_;  // per variable: the mirror is newer than the host
  kernels::BackendBuffer<T> device_x_;
  kernels::BackendBuffer<int32_t> device_labels_;
  const T* targets_ = nullptr;          // SetTargets
  const T* backend_targets_ = nullptr;  // the same in the backend's memory, for the step
  kernels::BackendBuffer<T> device_targets_;
  std::vector<T> host_logits_, host_loss_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_MODEL_MODEL_H_
