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
  main_.layers = std::move(main);
  shortcut_.layers = std::move(shortcut);
  main_.outputs.resize(main_.layers.size());
  shortcut_.outputs.resize(shortcut_.layers.size());
}

template <typename T>
Status Residual<T>::ReserveBranch(kernels::Backend<T>& backend, int batch, int64_t input_size,
                                  Branch& b) {
  int64_t largest = input_size;
  for (size_t i = 0; i < b.layers.size(); ++i) {
    TOWERPS_RETURN_IF_ERROR(b.layers[i]->Reserve(backend, batch));
    TOWERPS_RETURN_IF_ERROR(b.outputs[i].EnsureSize(&backend, batch * b.layers[i]->output_size()));
    largest = std::max(largest, b.layers[i]->output_size());
  }
  if (b.layers.empty()) return Status::Ok();
  for (auto& g : b.grads) TOWERPS_RETURN_IF_ERROR(g.EnsureSize(&backend, batch * largest));
  return b.dx.EnsureSize(&backend, batch * input_size);
}

template <typename T>
Status Residual<T>::Reserve(kernels::Backend<T>& backend, int batch) {
  TOWERPS_RETURN_IF_ERROR(ReserveBranch(backend, batch, this->input_size(), main_));
  return ReserveBranch(backend, batch, this->input_size(), shortcut_);
}

template <typename T>
const T* Residual<T>::ForwardBranch(kernels::Backend<T>& backend, int batch, const T* x,
                                    bool training, Branch& b) {
  const T* in = x;
  for (size_t i = 0; i < b.layers.size(); ++i) {
    b.layers[i]->Forward(backend, batch, in, b.outputs[i].data(), training);
    in = b.outputs[i].data();
  }
  return in;
}

template <typename T>
void Residual<T>::Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y,
                          bool training) {
  const Status st = Reserve(backend, batch);  // a no-op when the model reserved already
  TOWERPS_CHECK(st.ok()) << this->name() << ": " << st.ToString();
  const T* main = ForwardBranch(backend, batch, x, training, main_);
  const T* shortcut = ForwardBranch(backend, batch, x, training, shortcut_);
  backend.Add(batch * this->output_size(), main, shortcut, y);
}

template <typename T>
void Residual<T>::BackwardBranch(kernels::Backend<T>& backend, int batch, const T* x, const T* dy,
                                 T* dx, Branch& b) {
  const T* g = dy;
  for (size_t i = b.layers.size(); i-- > 0;) {
    const T* in = i == 0 ? x : b.outputs[i - 1].data();
    T* out = i == 0 ? dx : b.grads[i % 2].data();
    b.layers[i]->Backward(backend, batch, in, b.outputs[i].data(), g, out);
    g = out;
  }
}

template <typename T>
void Residual<T>::Backward(kernels::Backend<T>& backend, int batch, const T* x, const T*,
                           const T* dy, T* dx) {
  // The add passes dy to both branches unchanged; their gradients for x add up.
  const int64_t n = batch * this->input_size();
  BackwardBranch(backend, batch, x, dy, dx != nullptr ? main_.dx.data() : nullptr, main_);
  if (!shortcut_.layers.empty()) {
    BackwardBranch(backend, batch, x, dy, dx != nullptr ? shortcut_.dx.data() : nullptr, shortcut_);
  }
  if (dx == nullptr) return;
  backend.Add(n, main_.dx.data(), shortcut_.layers.empty() ? dy : shortcut_.dx.data(), dx);
}

template <typename T>
std::string Residual<T>::ops() const {
  std::string out;
  for (const Branch* b : {&main_, &shortcut_}) {
    for (const auto& layer : b->layers) out += (out.empty() ? "" : "; ") + layer->ops();
  }
  return out + "; Add";
}

template <typename T>
std::vector<Parameter<T>*> Residual<T>::parameters() {
  std::vector<Parameter<T>*> out;
  for (Branch* b : {&main_, &shortcut_}) {
    for (auto& layer : b->layers) {
      for (Parameter<T>* p : layer->parameters()) out.push_back(p);
    }
  }
  return out;
}

template <typename T>
void Residual<T>::SetTrainingStep(uint64_t n) {
  for (Branch* b : {&main_, &shortcut_}) {
    for (auto& layer : b->layers) layer->SetTrainingStep(n);
  }
}

template class Residual<float>;
template class Residual<double>;

}  // namespace towerps::worker
