// Model<T>'s embedding tables (model.h): the first layer's input assembled from the batch's rows
// and the dense features, and the rows' gradients taken from that input's gradient, with the
// backend's embedding ops, on the host or on a device.
#include "kernels/embedding_uses.h"
#include "worker/model/model.h"

namespace towerps::worker {

template <typename T>
void Model<T>::SetTableRows(int t, const T* rows, int64_t unique, const uint32_t* inverse) {
  Table& table = tables_.at(t);
  table.rows = rows;
  table.unique = unique;
  table.inverse = inverse;
}

template <typename T>
Status Model<T>::AssembleInput(int batch, bool with_gradient, const T** x) {
  if (tables_.empty()) return Status::Ok();
  kernels::MemorySpace* space = backend_;
  const int64_t dense = NumElements(input_shape_);
  const int64_t width = embedded_size_ + dense;
  TOWERPS_RETURN_IF_ERROR(input_.EnsureSize(space, batch * width));
  if (with_gradient) TOWERPS_RETURN_IF_ERROR(input_grad_.EnsureSize(space, batch * width));
  for (Table& t : tables_) {
    if (t.rows == nullptr) {
      return FailedPreconditionError("embedding table " + t.spec.name +
                                     " has no rows for this batch: SetTableRows first");
    }
    const int64_t uses = int64_t{batch} * t.spec.fields, dim = t.spec.options.dim;
    if (with_gradient) {
      kernels::EmbeddingUses(t.inverse, uses, t.unique, &t.offsets, &t.positions);
    }
    if (host_memory_) continue;
    TOWERPS_RETURN_IF_ERROR(t.device_rows.EnsureSize(space, t.unique * dim));
    TOWERPS_RETURN_IF_ERROR(t.device_index.EnsureSize(space, uses));
    if (with_gradient) {
      TOWERPS_RETURN_IF_ERROR(t.device_grad.EnsureSize(space, t.unique * dim));
      TOWERPS_RETURN_IF_ERROR(t.device_offsets.EnsureSize(space, t.unique + 1));
      TOWERPS_RETURN_IF_ERROR(t.device_positions.EnsureSize(space, uses));
    }
  }
  for (Table& t : tables_) {
    const T* rows = t.rows;
    const uint32_t* index = t.inverse;
    if (!host_memory_) {  // the rows are the servers' reply, in pageable memory: copied now
      const size_t uses = static_cast<size_t>(batch) * t.spec.fields;
      backend_->CopyFromHost(rows, static_cast<size_t>(t.unique * t.spec.options.dim) * sizeof(T),
                             t.device_rows.data());
      backend_->CopyFromHost(index, uses * sizeof(uint32_t), t.device_index.data());
      if (with_gradient) {
        backend_->CopyFromHost(t.offsets.data(), t.offsets.size() * sizeof(uint32_t),
                               t.device_offsets.data());
        backend_->CopyFromHost(t.positions.data(), uses * sizeof(uint32_t),
                               t.device_positions.data());
      }
      rows = t.device_rows.data();
      index = t.device_index.data();
    }
    backend_->EmbeddingForward(batch, t.spec.fields, t.spec.options.dim, rows, index,
                               input_.data() + t.offset, width);
  }
  backend_->CopyColumns(batch, dense, *x, dense, input_.data() + embedded_size_, width);
  *x = input_.data();
  return Status::Ok();
}

template <typename T>
void Model<T>::ScatterTableGradients() {
  const int64_t width = embedded_size_ + NumElements(input_shape_);
  for (Table& t : tables_) {
    const int64_t dim = t.spec.options.dim;
    t.grad.resize(static_cast<size_t>(t.unique * dim));
    if (host_memory_) {
      backend_->EmbeddingBackward(t.spec.fields, static_cast<int>(dim), t.unique, t.offsets.data(),
                                  t.positions.data(), input_grad_.data() + t.offset, width,
                                  t.grad.data());
      continue;
    }
    backend_->EmbeddingBackward(t.spec.fields, static_cast<int>(dim), t.unique,
                                t.device_offsets.data(), t.device_positions.data(),
                                input_grad_.data() + t.offset, width, t.device_grad.data());
    backend_->CopyToHost(t.device_grad.data(), t.grad.size() * sizeof(T), t.grad.data());
  }
}

// Model<T> is instantiated in model.cc; these members are defined here.
#define TOWERPS_MODEL_TABLES(T)                                                  \
  template void Model<T>::SetTableRows(int, const T*, int64_t, const uint32_t*); \
  template Status Model<T>::AssembleInput(int, bool, const T**);                 \
  template void Model<T>::ScatterTableGradients();
TOWERPS_MODEL_TABLES(float)
TOWERPS_MODEL_TABLES(double)
#undef TOWERPS_MODEL_TABLES

}  // namespace towerps::worker
