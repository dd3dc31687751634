#include "worker/model/model.h"

#include <algorithm>
#include <cmath>

#include "job/variable.h"

namespace towerps::worker {

template <typename T>
Model<T>::Model(Shape input_shape, std::vector<EmbeddingSpec> tables,
                std::vector<std::unique_ptr<Layer<T>>> layers, kernels::Backend<T>* backend,
                LossKind loss)
    : input_shape_(std::move(input_shape)),
      layers_(std::move(layers)),
      backend_(backend),
      loss_kind_(loss),
      host_memory_(backend != nullptr && backend->host_memory()) {
  TOWERPS_CHECK(backend_ != nullptr);
  TOWERPS_CHECK(!layers_.empty());
  TOWERPS_CHECK(tables.empty() || input_shape_.size() == 1)
      << "embedding tables need a vector of dense features";
  for (EmbeddingSpec& spec : tables) {
    Table t;
    t.field_offset = fields_;
    if (!spec.ids_of.empty()) {  // the same ids as an earlier table (the factory checked it)
      for (const Table& other : tables_) {
        if (other.spec.name == spec.ids_of) t.field_offset = other.field_offset;
      }
    }
    t.offset = embedded_size_;
    if (spec.multi_hot) {
      t.field_offset = 0;
      t.bag = bags_++;
    } else if (spec.ids_of.empty()) {
      fields_ += spec.fields;
    }
    embedded_size_ += int64_t{spec.fields} * spec.options.dim;
    t.spec = std::move(spec);
    tables_.push_back(std::move(t));
  }
  Shape expect = tables_.empty() ? input_shape_ : Shape{embedded_size_ + NumElements(input_shape_)};
  for (auto& layer : layers_) {
    TOWERPS_CHECK(layer->input_shape() == expect)
        << layer->name() << " takes " << ShapeToString(layer->input_shape()) << " but gets "
        << ShapeToString(expect);
    expect = layer->output_shape();
    first_param_of_layer_.push_back(static_cast<int>(params_.size()));
    for (Parameter<T>* p : layer->parameters()) {
      params_.push_back(p);
      specs_.push_back({p->name, p->shape, DType::kFloat32, p->kind, p->decay});
    }
  }
  first_param_of_layer_.push_back(static_cast<int>(params_.size()));
  for (const Table& t : tables_) {
    specs_.push_back(ps::TableVariable(t.spec.name, t.spec.options.rows, t.spec.options.dim,
                                       t.spec.options.init_scale));
  }
  TOWERPS_CHECK(expect.size() == 1)
      << "the last layer must output logits, not " << ShapeToString(expect);
  outputs_per_example_ = static_cast<int>(expect[0]);
  num_classes_ = outputs_per_example_;
  if (loss_kind_ == LossKind::kSigmoidCrossEntropy) {
    TOWERPS_CHECK(outputs_per_example_ == 1)
        << "the sigmoid loss takes one logit, not " << outputs_per_example_;
    num_classes_ = 2;
  }
  if (regression()) {
    TOWERPS_CHECK(outputs_per_example_ == 1)
        << "the squared error takes one output, not " << outputs_per_example_;
    num_classes_ = 0;
  }
  signature_ = ps::VariableListHash(specs_);
  outputs_.resize(layers_.size());
  value_changed_.assign(params_.size(), 1);
  host_stale_.assign(params_.size(), 0);
}

template <typename T>
Model<T>::~Model() {
  if (!device_grads_.empty()) {
    backend_->Synchronize();
    for (Parameter<T>* p : params_) {
      backend_->UnpinHostMemory(p->value.data());
      backend_->UnpinHostMemory(p->grad.data());
    }
  }
}

template <typename T>
void Model<T>::MarkValueChanged(int i) {
  value_changed_.at(i) = 1;
}

template <typename T>
int64_t Model<T>::num_parameters() const {
  int64_t n = 0;
  for (const Parameter<T>* p : params_) n += static_cast<int64_t>(p->value.size());
  return n;
}

template <typename T>
void Model<T>::RefreshHostValue(int i) const {
  if (!host_stale_.at(i)) return;
  Parameter<T>& p = *params_[i];
  backend_->CopyToHost(p.device_value, p.value.size() * sizeof(T), p.value.data());
  host_stale_[i] = 0;
}

template <typename T>
T* Model<T>::mutable_backend_value(int i) {
  Parameter<T>& p = *params_.at(i);
  if (host_memory_) return p.value.data();
  TOWERPS_CHECK(p.device_value != nullptr)
      << "mutable_backend_value before the first TrainStep or Evaluate";
  if (value_changed_[i]) {  // the host is newer: bring the mirror up to date first
    backend_->CopyFromHost(p.value.data(), p.value.size() * sizeof(T), p.device_value);
    value_changed_[i] = 0;
  }
  host_stale_[i] = 1;
  return p.device_value;
}

template <typename T>
Tensor Model<T>::GetVariable(int i) const {
  RefreshHostValue(i);
  const Parameter<T>& p = *params_.at(i);
  Tensor t = Tensor::Empty(p.shape);
  std::copy(p.value.begin(), p.value.end(), t.f32());
  return t;
}

template <typename T>
Tensor Model<T>::GetGradient(int i) const {
  const Parameter<T>& p = *params_.at(i);
  Tensor t = Tensor::Empty(p.shape);
  std::copy(p.grad.begin(), p.grad.end(), t.f32());
  return t;
}

template <typename T>
Status Model<T>::SetVariable(int i, const Tensor& value) {
  if (i < 0 || i >= num_variables()) {
    return InvalidArgumentError("variable index " + std::to_string(i) + " is out of range 0.." +
                                std::to_string(num_variables() - 1));
  }
  Parameter<T>& p = *params_[i];
  if (value.dtype() != DType::kFloat32 || value.shape() != p.shape) {
    return InvalidArgumentError("variable '" + p.name + "' is float32 " + ShapeToString(p.shape) +
                                ", got " + DTypeName(value.dtype()) + " " +
                                ShapeToString(value.shape()));
  }
  std::copy(value.f32(), value.f32() + value.num_elements(), p.value.begin());
  host_stale_[i] = 0;  // overwritten whole: the device's newer value is gone
  value_changed_[i] = 1;
  return Status::Ok();
}

template <typename T>
Status Model<T>::CheckBatch(const int32_t* labels, int batch) const {
  if (batch < 1) {
    return InvalidArgumentError("batch size " + std::to_string(batch) + " must be >= 1");
  }
  if (regression()) {
    if (targets_ == nullptr) {
      return FailedPreconditionError("a regression model needs the batch's targets: SetTargets");
    }
    return Status::Ok();
  }
  for (int b = 0; b < batch; ++b) {
    if (labels[b] < 0 || labels[b] >= num_classes_) {
      return InvalidArgumentError("label " + std::to_string(labels[b]) + " of example " +
                                  std::to_string(b) + " is out of range 0.." +
                                  std::to_string(num_classes_ - 1));
    }
  }
  return Status::Ok();
}

template <typename T>
const T* Model<T>::Forward(const T* x, int batch, bool training) {
  const T* in = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->Forward(*backend_, batch, in, outputs_[i].data(), training);
    in = outputs_[i].data();
  }
  return in;
}

template <typename T>
Status Model<T>::Reserve(int batch) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    TOWERPS_RETURN_IF_ERROR(outputs_[i].EnsureSize(backend_, batch * layers_[i]->output_size()));
    TOWERPS_RETURN_IF_ERROR(layers_[i]->Reserve(*backend_, batch));
  }
  return Status::Ok();
}

template <typename T>
Status Model<T>::Prepare(const T* x, const int32_t* labels, int batch, bool with_gradient,
                         const T** backend_x, const int32_t** backend_labels) {
  TOWERPS_RETURN_IF_ERROR(Reserve(batch));
  TOWERPS_RETURN_IF_ERROR(loss_.EnsureSize(backend_, batch));
  if (with_gradient) {
    int64_t most = 0;
    for (auto& layer : layers_) {
      most = std::max(most, batch * std::max(layer->input_size(), layer->output_size()));
    }
    TOWERPS_RETURN_IF_ERROR(grad_a_.EnsureSize(backend_, most));
    TOWERPS_RETURN_IF_ERROR(grad_b_.EnsureSize(backend_, most));
  }
  if (host_memory_) {
    *backend_x = x;
    *backend_labels = labels;
    backend_targets_ = targets_;
    return AssembleInput(batch, with_gradient, backend_x);
  }
  if (device_values_.empty()) {
    // All or nothing, so a failed step leaves no half-built mirrors behind.
    std::vector<kernels::BackendBuffer<T>> values, grads;
    for (Parameter<T>* p : params_) {
      TOWERPS_ASSIGN_OR_RETURN(auto value,
                               kernels::BackendBuffer<T>::Allocate(backend_, std::ssize(p->value)));
      TOWERPS_ASSIGN_OR_RETURN(auto grad,
                               kernels::BackendBuffer<T>::Allocate(backend_, std::ssize(p->grad)));
      values.push_back(std::move(value));
      grads.push_back(std::move(grad));
    }
    device_values_ = std::move(values);
    device_grads_ = std::move(grads);
    for (size_t v = 0; v < params_.size(); ++v) {
      Parameter<T>& p = *params_[v];
      p.device_value = device_values_[v].data();
      p.device_grad = device_grads_[v].data();
      backend_->PinHostMemory(p.value.data(), p.value.size() * sizeof(T));
      backend_->PinHostMemory(p.grad.data(), p.grad.size() * sizeof(T));
    }
  }
  // Everything is allocated before any copy is queued, so an error leaves none in flight.
  const int64_t x_size = batch * NumElements(input_shape_);
  TOWERPS_RETURN_IF_ERROR(device_x_.EnsureSize(backend_, x_size));
  TOWERPS_RETURN_IF_ERROR(device_labels_.EnsureSize(backend_, batch));
  if (regression()) TOWERPS_RETURN_IF_ERROR(device_targets_.EnsureSize(backend_, batch));
  // Values changed on the host since the last step, in forward order, from pinned memory and
  // without waiting: the step's forward is queued behind them, and the step ends by waiting for
  // the stream (the loss is read back), so the host values are not rewritten (the next pull)
  // while a copy is in flight.
  for (size_t v = 0; v < params_.size(); ++v) {
    if (!value_changed_[v]) continue;
    backend_->CopyFromHostAsync(params_[v]->value.data(), device_values_[v].bytes(),
                                device_values_[v].data());
    value_changed_[v] = 0;
  }
  // The caller keeps x and labels until TrainStep/Evaluate returns, after the stream is waited.
  backend_->CopyFromHostAsync(x, static_cast<size_t>(x_size) * sizeof(T), device_x_.data());
  if (regression()) {
    backend_->CopyFromHostAsync(targets_, static_cast<size_t>(batch) * sizeof(T),
                                device_targets_.data());
  } else {
    backend_->CopyFromHostAsync(labels, static_cast<size_t>(batch) * sizeof(int32_t),
                                device_labels_.data());
  }
  *backend_x = device_x_.data();
  *backend_labels = device_labels_.data();
  backend_targets_ = device_targets_.data();
  return AssembleInput(batch, with_gradient, backend_x);
}

template <typename T>
StepResult Model<T>::Loss(const T* logits, const int32_t* labels, const int32_t* host_labels,
                          int batch, bool with_gradient) {
  T* dlogits = with_gradient ? grad_a_.data() : nullptr;
  const bool binary = loss_kind_ == LossKind::kSigmoidCrossEntropy;
  if (regression()) {
    backend_->SquaredError(batch, outputs_per_example_, logits, backend_targets_, T(1) / T(batch),
                           loss_.data(), dlogits);
  } else if (binary) {
    backend_->SigmoidCrossEntropy(batch, logits, labels, T(1) / T(batch), loss_.data(), dlogits);
  } else {
    backend_->SoftmaxCrossEntropy(batch, num_classes_, logits, labels, T(1) / T(batch),
                                  loss_.data(), dlogits);
  }
  const T* loss = loss_.data();
  const T* host_logits = logits;
  const int width = outputs_per_example_;
  if (!host_memory_) {
    host_logits_.resize(static_cast<size_t>(batch) * width);
    host_loss_.resize(static_cast<size_t>(batch));
    backend_->CopyToHost(logits, host_logits_.size() * sizeof(T), host_logits_.data());
    backend_->CopyToHost(loss_.data(), host_loss_.size() * sizeof(T), host_loss_.data());
    loss = host_loss_.data();
    host_logits = host_logits_.data();
  }
  StepResult r;
  r.batch = batch;
  for (int b = 0; b < batch; ++b) {
    r.loss += static_cast<double>(loss[b]);
    if (regression()) continue;  // no classes to count
    if (binary) {
      r.correct += (host_logits[b] > T(0)) == (host_labels[b] == 1);
      continue;
    }
    const T* row = host_logits + int64_t{b} * width;
    r.correct += (std::max_element(row, row + width) - row) == host_labels[b];
  }
  r.loss /= batch;
  if (binary && !with_gradient) {
    r.probabilities.resize(static_cast<size_t>(batch));
    for (int b = 0; b < batch; ++b) {
      r.probabilities[b] = 1.0 / (1.0 + std::exp(-static_cast<double>(host_logits[b])));
    }
  }
  return r;
}

template <typename T>
Result<StepResult> Model<T>::TrainStep(const T* x, const int32_t* labels, int batch,
                                       const GradientReadyFn& on_gradient,
                                       GradientDelivery delivery) {
  if (Status st = CheckBatch(labels, batch); !st.ok()) return st;
  const T* bx = nullptr;
  const int32_t* blabels = nullptr;
  TOWERPS_RETURN_IF_ERROR(Prepare(x, labels, batch, /*with_gradient=*/true, &bx, &blabels));
  const T* logits = Forward(bx, batch, /*training=*/true);
  StepResult r = Loss(logits, blabels, labels, batch, /*with_gradient=*/true);
  T* dy = grad_a_.data();
  T* dx = grad_b_.data();
  // Device gradients being copied out: (ticket, variable), in the order backward made them.
  std::vector<std::pair<uint64_t, int>> copies;
  for (size_t i = layers_.size(); i-- > 0;) {
    const T* in = i == 0 ? bx : outputs_[i - 1].data();
    // The first layer's input gradient only matters for the tables' rows.
    T* input_grad = tables_.empty() ? nullptr : input_grad_.data();
    layers_[i]->Backward(*backend_, batch, in, outputs_[i].data(), dy, i == 0 ? input_grad : dx);
    if (i == 0 && input_grad != nullptr) ScatterTableGradients();
    for (int v = first_param_of_layer_[i]; v < first_param_of_layer_[i + 1]; ++v) {
      if (host_memory_ || delivery == GradientDelivery::kBackend) {
        if (on_gradient) on_gradient(v);
        continue;
      }
      Parameter<T>& p = *params_[v];
      copies.emplace_back(
          backend_->CopyToHostAsync(p.device_grad, p.grad.size() * sizeof(T), p.grad.data()), v);
    }
    std::swap(dy, dx);
  }
  // Backward is queued; each hook runs as its gradient lands while the device goes on.
  for (const auto& [ticket, v] : copies) {
    backend_->WaitCopy(ticket);
    if (on_gradient) on_gradient(v);
  }
  return r;
}

template <typename T>
Result<StepResult> Model<T>::Evaluate(const T* x, const int32_t* labels, int batch) {
  if (Status st = CheckBatch(labels, batch); !st.ok()) return st;
  const T* bx = nullptr;
  const int32_t* blabels = nullptr;
  TOWERPS_RETURN_IF_ERROR(Prepare(x, labels, batch, /*with_gradient=*/false, &bx, &blabels));
  return Loss(Forward(bx, batch, /*training=*/false), blabels, labels, batch,
              /*with_gradient=*/false);
}

template class Model<float>;
template class Model<double>;

}  // namespace towerps::worker
