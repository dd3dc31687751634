#include "worker/train/momentum_sgd.h"

#include <string>

namespace towerps::worker {

Result<MomentumSgd> MomentumSgd::Create(Model<float>* model, kernels::Backend<float>* backend,
                                        const MomentumSgdOptions& o) {
  if (!(o.learning_rate > 0.0f)) {
    return InvalidArgumentError("learning rate " + std::to_string(o.learning_rate) +
                                " must be > 0");
  }
  if (!(o.momentum >= 0.0f && o.momentum < 1.0f)) {
    return InvalidArgumentError("momentum " + std::to_string(o.momentum) + " must be in [0, 1)");
  }
  if (!backend->host_memory() && backend != model->backend()) {
    return InvalidArgumentError(
        "MomentumSgd computes on host memory or on the model's own "
        "backend, not on " +
        backend->name());
  }
  if (!(o.weight_decay >= 0.0f)) {
    return InvalidArgumentError("weight decay " + std::to_string(o.weight_decay) + " must be >= 0");
  }
  MomentumSgd sgd(model, backend, o);
  if (!backend->host_memory()) {
    sgd.on_device_ = true;
    sgd.velocity_.clear();
    for (int v = 0; v < model->num_variables(); ++v) {
      const int64_t n = NumElements(model->variables()[v].shape);
      TOWERPS_ASSIGN_OR_RETURN(auto velocity, kernels::BackendBuffer<float>::Allocate(backend, n));
      backend->Fill(n, 0.0f, velocity.data());
      sgd.device_velocity_.push_back(std::move(velocity));
    }
  }
  return sgd;
}

MomentumSgd::MomentumSgd(Model<float>* model, kernels::Backend<float>* backend,
                         const MomentumSgdOptions& options)
    : model_(model), backend_(backend), options_(options) {
  for (int v = 0; v < model_->num_variables(); ++v) {
    velocity_.emplace_back(model_->value(v).size(), 0.0f);
  }
}

void MomentumSgd::Step() {
  for (int v = 0; v < model_->num_variables(); ++v) StepVariable(v);
}

void MomentumSgd::StepVariable(int v) {
  const ps::VariableSpec& spec = model_->variables()[v];
  if (spec.kind == ps::VariableKind::kMovingAverage) {
    // value = decay * value + (1 - decay) * statistic (job/variable.h).
    const int64_t n = NumElements(spec.shape);
    float* value = on_device_ ? model_->mutable_backend_value(v) : model_->value(v).data();
    const float* statistic = on_device_ ? model_->backend_gradient(v) : model_->gradient(v).data();
    backend_->Scale(n, spec.decay, value);
    backend_->Axpy(n, 1.0f - spec.decay, statistic, value);
    return;
  }
  if (on_device_) {
    backend_->MomentumUpdate(device_velocity_[v].size(), options_.learning_rate, options_.momentum,
                             options_.weight_decay, model_->backend_gradient(v),
                             device_velocity_[v].data(), model_->mutable_backend_value(v));
    return;
  }
  auto value = model_->value(v);
  backend_->MomentumUpdate(static_cast<int64_t>(value.size()), options_.learning_rate,
                           options_.momentum, options_.weight_decay, model_->gradient(v).data(),
                           velocity_[v].data(), value.data());
}

}  // namespace towerps::worker
