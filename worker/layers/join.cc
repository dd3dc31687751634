#include "worker/layers/join.h"

#include <algorithm>

#include "towerps/check.h"

namespace towerps::worker {
namespace {

const char* KindName(JoinKind kind) {
  switch (kind) {
    case JoinKind::kAdd:
      return "add";
    case JoinKind::kConcat:
      return "concat";
    case JoinKind::kDotInteraction:
      return "dot interaction";
  }
  return "?";
}

}  // namespace

template <typename T>
Result<std::unique_ptr<Join<T>>> Join<T>::Create(std::string name, const Shape& input_shape,
                                                 JoinKind kind, std::vector<BranchParts> parts) {
  const std::string what = std::string(KindName(kind)) + " block '" + name + "'";
  if (parts.empty()) return InvalidArgumentError(what + ": it has no branches");
  const int64_t row = NumElements(input_shape);
  std::vector<Branch> branches;
  std::vector<Shape> output_shapes;
  int64_t joined = 0;
  for (BranchParts& p : parts) {
    Branch b;
    b.input_size = p.inputs.empty() ? row : 0;
    for (const Columns& c : p.inputs) {
      TOWERPS_CHECK(c.offset >= 0 && c.width > 0 && c.offset + c.width <= row)
          << what << ": columns " << c.offset << "+" << c.width << " of " << row;
      b.input_size += c.width;
    }
    if (NumElements(p.input_shape) != b.input_size) {
      return InvalidArgumentError(what + ": " + p.name + " takes " + std::to_string(b.input_size) +
                                  " values per example, not " + ShapeToString(p.input_shape));
    }
    Shape shape = p.input_shape;
    for (const auto& layer : p.layers) {
      if (layer->input_shape() != shape) {
        return InvalidArgumentError(what + ": in " + p.name + ", layer '" + layer->name() +
                                    "' takes " + ShapeToString(layer->input_shape()) +
                                    " but is given " + ShapeToString(shape));
      }
      shape = layer->output_shape();
    }
    output_shapes.push_back(shape);
    b.output_size = NumElements(shape);
    b.output_offset = joined;
    joined += b.output_size;
    b.name = std::move(p.name);
    b.inputs = std::move(p.inputs);
    b.chain = LayerChain<T>(std::move(p.layers));
    branches.push_back(std::move(b));
  }
  Shape out;
  int vectors = 0, vector_size = 0;
  switch (kind) {
    case JoinKind::kAdd:
      for (size_t i = 1; i < branches.size(); ++i) {
        if (output_shapes[i] != output_shapes[0]) {
          return InvalidArgumentError(what + ": " + branches[0].name + " gives " +
                                      ShapeToString(output_shapes[0]) + " but " + branches[i].name +
                                      " gives " + ShapeToString(output_shapes[i]) +
                                      "; added outputs agree");
        }
      }
      out = output_shapes[0];
      break;
    case JoinKind::kConcat:
      out = {joined};
      break;
    case JoinKind::kDotInteraction: {
      const int64_t d = branches[0].output_size;
      for (size_t i = 1; i < branches.size(); ++i) {
        if (branches[i].output_size % d != 0) {
          return InvalidArgumentError(
              what + ": " + branches[i].name + " gives " + std::to_string(branches[i].output_size) +
              " values, not vectors of the " + std::to_string(d) + " that " + branches[0].name +
              " gives (embedding dims must equal the first branch's output size)");
        }
      }
      vector_size = static_cast<int>(d);
      vectors = static_cast<int>(joined / d);
      out = {d + int64_t{vectors} * (vectors - 1) / 2};
      break;
    }
  }
  return std::unique_ptr<Join>(
      new Join(std::move(name), input_shape, out, kind, std::move(branches), vectors, vector_size));
}

template <typename T>
Join<T>::Join(std::string name, const Shape& input_shape, const Shape& output_shape, JoinKind kind,
              std::vector<Branch> branches, int vectors, int vector_size)
    : Layer<T>(std::move(name), input_shape, output_shape),
      kind_(kind),
      branches_(std::move(branches)),
      vectors_(vectors),
      vector_size_(vector_size) {}

template <typename T>
Status Join<T>::Reserve(kernels::Backend<T>& backend, int batch) {
  int64_t joined = 0;
  for (Branch& b : branches_) {
    if (!b.inputs.empty()) {
      TOWERPS_RETURN_IF_ERROR(b.input.EnsureSize(&backend, batch * b.input_size));
    }
    TOWERPS_RETURN_IF_ERROR(b.chain.Reserve(backend, batch, b.input_size));
    if (kind_ != JoinKind::kAdd) {  // an add hands every branch dy itself
      TOWERPS_RETURN_IF_ERROR(b.dout.EnsureSize(&backend, batch * b.output_size));
    }
    if (!b.chain.empty()) {  // without layers the output's gradient is the input's
      TOWERPS_RETURN_IF_ERROR(b.dinput.EnsureSize(&backend, batch * b.input_size));
    }
    joined += b.output_size;
  }
  if (kind_ != JoinKind::kDotInteraction) return Status::Ok();
  TOWERPS_RETURN_IF_ERROR(joined_.EnsureSize(&backend, batch * joined));
  return djoined_.EnsureSize(&backend, batch * joined);
}

template <typename T>
const T* Join<T>::BranchInput(kernels::Backend<T>& backend, int batch, const T* x,
                              Branch& b) const {
  if (b.inputs.empty()) return x;
  int64_t at = 0;
  for (const Columns& c : b.inputs) {
    backend.CopyColumns(batch, c.width, x + c.offset, this->input_size(), b.input.data() + at,
                        b.input_size);
    at += c.width;
  }
  return b.input.data();
}

template <typename T>
void Join<T>::Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool training) {
  const Status st = Reserve(backend, batch);  // a no-op when the model reserved already
  TOWERPS_CHECK(st.ok()) << this->name() << ": " << st.ToString();
  const int64_t out_size = this->output_size();
  const int64_t joined =
      kind_ == JoinKind::kDotInteraction ? int64_t{vectors_} * vector_size_ : out_size;
  T* target = kind_ == JoinKind::kDotInteraction ? joined_.data() : y;
  for (size_t i = 0; i < branches_.size(); ++i) {
    Branch& b = branches_[i];
    const T* out = b.chain.Forward(backend, batch, BranchInput(backend, batch, x, b), training);
    if (kind_ == JoinKind::kAdd) {
      if (i == 0) {
        backend.Copy(out, sizeof(T) * static_cast<size_t>(batch * out_size), y);
      } else {
        backend.Add(batch * out_size, y, out, y);
      }
    } else {
      backend.CopyColumns(batch, b.output_size, out, b.output_size, target + b.output_offset,
                          joined);
    }
  }
  if (kind_ == JoinKind::kDotInteraction) {
    backend.DotInteractionForward(batch, vectors_, vector_size_, joined_.data(), y);
  }
}

template <typename T>
void Join<T>::Backward(kernels::Backend<T>& backend, int batch, const T* x, const T*, const T* dy,
                       T* dx) {
  const int64_t joined =
      kind_ == JoinKind::kDotInteraction ? int64_t{vectors_} * vector_size_ : this->output_size();
  const T* dsource = dy;
  if (kind_ == JoinKind::kDotInteraction) {
    backend.DotInteractionBackward(batch, vectors_, vector_size_, joined_.data(), dy,
                                   djoined_.data());
    dsource = djoined_.data();
  }
  if (dx != nullptr) backend.Fill(batch * this->input_size(), T(0), dx);
  for (Branch& b : branches_) {
    // The gradient of the branch's output: dy itself for an add, its columns otherwise.
    const T* g = dy;
    if (kind_ != JoinKind::kAdd) {
      backend.CopyColumns(batch, b.output_size, dsource + b.output_offset, joined, b.dout.data(),
                          b.output_size);
      g = b.dout.data();
    }
    // Without layers, the output's gradient is the input's.
    if (!b.chain.empty()) {
      T* dinput = dx != nullptr ? b.dinput.data() : nullptr;
      b.chain.Backward(backend, batch, b.inputs.empty() ? x : b.input.data(), g, dinput);
      g = dinput;
    }
    if (dx == nullptr) continue;
    // Its input's gradient, added into the columns it took (two branches may share some).
    if (b.inputs.empty()) {
      backend.Add(batch * b.input_size, dx, g, dx);
      continue;
    }
    int64_t at = 0;
    for (const Columns& c : b.inputs) {
      backend.AddColumns(batch, c.width, g + at, b.input_size, dx + c.offset, this->input_size());
      at += c.width;
    }
  }
}

template <typename T>
std::string Join<T>::ops() const {
  std::string out;
  for (const Branch& b : branches_) {
    if (!b.inputs.empty()) out += std::string(out.empty() ? "" : "; ") + "CopyColumns";
    out = b.chain.ops(out);
  }
  switch (kind_) {
    case JoinKind::kAdd:
      return out + "; Add";
    case JoinKind::kConcat:
      return out + "; CopyColumns";
    case JoinKind::kDotInteraction:
      return out + "; CopyColumns; DotInteraction";
  }
  return out;
}

template <typename T>
std::vector<Parameter<T>*> Join<T>::parameters() {
  std::vector<Parameter<T>*> out;
  for (Branch& b : branches_) b.chain.AppendParameters(&out);
  return out;
}

template <typename T>
void Join<T>::SetTrainingStep(uint64_t n) {
  for (Branch& b : branches_) b.chain.SetTrainingStep(n);
}

template class Join<float>;
template class Join<double>;

}  // namespace towerps::worker
