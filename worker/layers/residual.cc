#include "worker/layers/residual.h"

#include <algorithm>

#include "towerps/check.h"

namespace towerps::worker {
namespace {

template <typename T>
Status CheckChain(const std::string& block, const char* branch, const Shape& input,
                  const std::vector<std::unique_ptr<Layer<T>>>& chain) {
  Shape shape = input;
  for (const auto& layer : chain) {
    if (layer->input_shape() != shape) {
      return InvalidArgumentError("residual block '" + block + "': in its " + branch +
                                  " branch, layer '" + layer->name() + "' takes " +
                                  ShapeToString(layer->input_shape()) + " but is given " +
                                  ShapeToString(shape));
    }
    shape = layer->output_shape();
  }
  return Status::Ok();
}

}  // namespace

template <typename T>
Result<std::unique_ptr<Residual<T>>> Residual<T>::Create(std::string name, const Shape& input_shape,
                                                         Chain main, Chain shortcut) {
  if (main.empty()) {
    return InvalidArgumentError("residual block '" + name + "': the main branch has no layers");
  }
  TOWERPS_RETURN_IF_ERROR(CheckChain(name, "main", input_shape, main));
  TOWERPS_RETURN_IF_ERROR(CheckChain(name, "shortcut", input_shape, shortcut));
  const Shape out = main.back()->output_shape();
  const Shape short_out = shortcut.empty() ? input_shape : shortcut.back()->output_shape();
  if (out != short_out) {
    return InvalidArgumentError(
        "residual block '" + name + "': the main branch gives " + ShapeToString(out) +
        " but the shortcut gives " + ShapeToString(short_out) +
        (shortcut.empty() ? " (the identity): give the block a projection shortcut, e.g. a 1x1 "
                            "convolution with the main branch's filters and stride"
                          : ""));
  }
  return std::unique_ptr<Residual>(
      new Residual(std::move(name), input_shape, out, std::move(main), std::move(shortcut)));
}

template <typename T>
Residual<T>::Residual(std::string name, const Shape& input_shape, const Shape& output_shape,
                      Chain main, Chain shortcut)
    : Layer<T>(std::move(name), input_shape, output_shape) {
  main_.chain = LayerChain<T>(std::move(main));
  shortcut_.chain = LayerChain<T>(std::move(shortcut));
}

template <typename T>
Status Residual<T>::Reserve(kernels::Backend<T>& backend, int batch) {
  for (Branch* b : {&main_, &shortcut_}) {
    TOWERPS_RETURN_IF_ERROR(b->chain.Reserve(backend, batch, this->input_size()));
    if (!b->chain.empty()) {
      TOWERPS_RETURN_IF_ERROR(b->dx.EnsureSize(&backend, batch * this->input_size()));
    }
  }
  return Status::Ok();
}

template <typename T>
void Residual<T>::Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y,
                          bool training) {
  const Status st = Reserve(backend, batch);  // a no-op when the model reserved already
  TOWERPS_CHECK(st.ok()) << this->name() << ": " << st.ToString();
  const T* main = main_.chain.Forward(backend, batch, x, training);
  const T* shortcut = shortcut_.chain.Forward(backend, batch, x, training);
  backend.Add(batch * this->output_size(), main, shortcut, y);
}

template <typename T>
void Residual<T>::Backward(kernels::Backend<T>& backend, int batch, const T* x, const T*,
                           const T* dy, T* dx) {
  // The add passes dy to both branches unchanged; their gradients for x add up.
  const int64_t n = batch * this->input_size();
  main_.chain.Backward(backend, batch, x, dy, dx != nullptr ? main_.dx.data() : nullptr);
  if (!shortcut_.chain.empty()) {
    shortcut_.chain.Backward(backend, batch, x, dy, dx != nullptr ? shortcut_.dx.data() : nullptr);
  }
  if (dx == nullptr) return;
  backend.Add(n, main_.dx.data(), shortcut_.chain.empty() ? dy : shortcut_.dx.data(), dx);
}

template <typename T>
std::string Residual<T>::ops() const {
  return shortcut_.chain.ops(main_.chain.ops()) + "; Add";
}

template <typename T>
std::vector<Layer<T>*> Residual<T>::sublayers() {
  std::vector<Layer<T>*> out;
  for (const Branch* b : {&main_, &shortcut_}) {
    for (const auto& layer : b->chain.layers()) out.push_back(layer.get());
  }
  return out;
}

template <typename T>
std::vector<Parameter<T>*> Residual<T>::parameters() {
  std::vector<Parameter<T>*> out;
  main_.chain.AppendParameters(&out);
  shortcut_.chain.AppendParameters(&out);
  return out;
}

template <typename T>
void Residual<T>::SetTrainingStep(uint64_t n) {
  main_.chain.SetTrainingStep(n);
  shortcut_.chain.SetTrainingStep(n);
}

template class Residual<float>;
template class Residual<double>;

}  // namespace towerps::worker
