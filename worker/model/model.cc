#include "worker/model/model.h"

#include <algorithm>

#include "worker/model/signature.h"

namespace towerps::worker {

template <typename T>
Model<T>::Model(Shape input_shape, std::vector<std::unique_ptr<Layer<T>>> layers,
                kernels::Backend<T>* backend)
    : input_shape_(std::move(input_shape)), layers_(std::move(layers)), backend_(backend) {
  TOWERPS_CHECK(backend_ != nullptr);
  TOWERPS_CHECK(!layers_.empty());
  Shape expect = input_shape_;
  for (auto& layer : layers_) {
    TOWERPS_CHECK(layer->input_shape() == expect)
        << layer->name() << " takes " << ShapeToString(layer->input_shape()) << " but gets "
        << ShapeToString(expect);
    expect = layer->output_shape();
    first_param_of_layer_.push_back(static_cast<int>(params_.size()));
    for (Parameter<T>* p : layer->parameters()) {
      params_.push_back(p);
      specs_.push_back({p->name, p->shape, DType::kFloat32});
    }
  }
  first_param_of_layer_.push_back(static_cast<int>(params_.size()));
  TOWERPS_CHECK(expect.size() == 1)
      << "the last layer must output logits, not " << ShapeToString(expect);
  num_classes_ = static_cast<int>(expect[0]);
  signature_ = VariableSignature(specs_);
  outputs_.resize(layers_.size());
}

template <typename T>
int64_t Model<T>::num_parameters() const {
  int64_t n = 0;
  for (const Parameter<T>* p : params_) n += static_cast<int64_t>(p->value.size());
  return n;
}

template <typename T>
Tensor Model<T>::GetVariable(int i) const {
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
  return Status::Ok();
}

template <typename T>
Status Model<T>::CheckBatch(const int32_t* labels, int batch) const {
  if (batch < 1) {
    return InvalidArgumentError("batch size " + std::to_string(batch) + " must be >= 1");
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
    outputs_[i].resize(static_cast<size_t>(batch * layers_[i]->output_size()));
    layers_[i]->Forward(*backend_, batch, in, outputs_[i].data(), training);
    in = outputs_[i].data();
  }
  return in;
}

template <typename T>
StepResult Model<T>::Loss(const T* logits, const int32_t* labels, int batch, bool with_gradient) {
  loss_.resize(static_cast<size_t>(batch));
  T* dlogits = nullptr;
  if (with_gradient) {
    size_t most = 0;
    for (auto& layer : layers_) {
      most = std::max<size_t>(
          most, static_cast<size_t>(batch * std::max(layer->input_size(), layer->output_size())));
    }
    grad_a_.resize(most);
    grad_b_.resize(most);
    dlogits = grad_a_.data();
  }
  backend_->SoftmaxCrossEntropy(batch, num_classes_, logits, labels, T(1) / T(batch), loss_.data(),
                                dlogits);
  StepResult r;
  r.batch = batch;
  for (int b = 0; b < batch; ++b) {
    r.loss += static_cast<double>(loss_[b]);
    const T* row = logits + int64_t{b} * num_classes_;
    r.correct += (std::max_element(row, row + num_classes_) - row) == labels[b];
  }
  r.loss /= batch;
  return r;
}

template <typename T>
Result<StepResult> Model<T>::TrainStep(const T* x, const int32_t* labels, int batch,
                                       const GradientReadyFn& on_gradient) {
  if (Status st = CheckBatch(labels, batch); !st.ok()) return st;
  const T* logits = Forward(x, batch, /*training=*/true);
  StepResult r = Loss(logits, labels, batch, /*with_gradient=*/true);
  T* dy = grad_a_.data();
  T* dx = grad_b_.data();
  for (size_t i = layers_.size(); i-- > 0;) {
    const T* in = i == 0 ? x : outputs_[i - 1].data();
    layers_[i]->Backward(*backend_, batch, in, outputs_[i].data(), dy, i == 0 ? nullptr : dx);
    if (on_gradient) {
      for (int v = first_param_of_layer_[i]; v < first_param_of_layer_[i + 1]; ++v) {
        on_gradient(v);
      }
    }
    std::swap(dy, dx);
  }
  return r;
}

template <typename T>
Result<StepResult> Model<T>::Evaluate(const T* x, const int32_t* labels, int batch) {
  if (Status st = CheckBatch(labels, batch); !st.ok()) return st;
  return Loss(Forward(x, batch, /*training=*/false), labels, batch, /*with_gradient=*/false);
}

template class Model<float>;
template class Model<double>;

}  // namespace towerps::worker
