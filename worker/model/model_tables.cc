// Model<T>'s embedding tables (model.h): the first layer's input assembled from the batch's rows
// and the dense features, and the rows' gradients taken from that input's gradient, with the
// backend's embedding ops, on the host or on a device.
#include "kernels/embedding_uses.h"
#include "worker/model/model.h"

namespace towerps::worker {
namespace {

// The lookups a table makes for a batch: its one-hot fields', or its multi-hot field's ids
// (Table::bags already rebased).
template <typename Table>
int64_t TableUses(const Table& t, int batch) {
  return t.bag >= 0 ? int64_t{t.bags[static_cast<size_t>(batch)]} : int64_t{batch} * t.spec.fields;
}

}  // namespace

template <typename T>
void Model<T>::SetTableRows(int t, const T* rows, int64_t unique, const uint32_t* inverse,
                            const uint32_t* bags) {
  Table& table = tables_.at(t);
  TOWERPS_CHECK((bags != nullptr) == (table.bag >= 0))
      << "table " << table.spec.name << ": bag offsets go with EmbeddingBag tables, only";
  table.rows = rows;
  table.unique = unique;
  table.inverse = inverse;
  table.bags_in = bags;
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
    if (t.bag >= 0) {  // rebased to start at 0
      t.bags.resize(static_cast<size_t>(batch) + 1);
      for (int b = 0; b <= batch; ++b) t.bags[b] = t.bags_in[b] - t.bags_in[0];
    }
    const int64_t uses = TableUses(t, batch), dim = t.spec.options.dim;
    if (with_gradient && t.bag >= 0) {
      kernels::BagUses(t.inverse, t.bags.data(), batch, t.unique, &t.offsets, &t.positions);
    } else if (with_gradient) {
      kernels::EmbeddingUses(t.inverse, uses, t.unique, &t.offsets, &t.positions);
    }
    if (host_memory_) continue;
    TOWERPS_RETURN_IF_ERROR(t.device_rows.EnsureSize(space, t.unique * dim));
    TOWERPS_RETURN_IF_ERROR(t.device_index.EnsureSize(space, uses));
    if (t.bag >= 0) TOWERPS_RETURN_IF_ERROR(t.device_bags.EnsureSize(space, batch + 1));
    if (with_gradient) {
      TOWERPS_RETURN_IF_ERROR(t.device_grad.EnsureSize(space, t.unique * dim));
      TOWERPS_RETURN_IF_ERROR(t.device_offsets.EnsureSize(space, t.unique + 1));
      TOWERPS_RETURN_IF_ERROR(t.device_positions.EnsureSize(space, uses));
    }
  }
  for (Table& t : tables_) {
    const T* rows = t.rows;
    const uint32_t* index = t.inverse;
    const uint32_t* bags = t.bags.data();
    if (!host_memory_) {  // the rows are the servers' reply, in pageable memory: copied now
      const auto uses = static_cast<size_t>(TableUses(t, batch));
      backend_->CopyFromHost(rows, static_cast<size_t>(t.unique * t.spec.options.dim) * sizeof(T),
                             t.device_rows.data());
      backend_->CopyFromHost(index, uses * sizeof(uint32_t), t.device_index.data());
      if (t.bag >= 0) {
        backend_->CopyFromHost(bags, t.bags.size() * sizeof(uint32_t), t.device_bags.data());
        bags = t.device_bags.data();
      }
      if (with_gradient) {
        backend_->CopyFromHost(t.offsets.data(), t.offsets.size() * sizeof(uint32_t),
                               t.device_offsets.data());
        backend_->CopyFromHost(t.positions.data(), uses * sizeof(uint32_t),
                               t.device_positions.data());
      }
      rows = t.device_rows.data();
      index = t.device_index.data();
    }
    if (t.bag >= 0) {
      backend_->EmbeddingBagForward(batch, t.spec.options.dim, rows, index, bags,
                                    t.spec.pooling == BagPooling::kMean, input_.data() + t.offset,
                                    width);
    } else {
      backend_->EmbeddingForward(batch, t.spec.fields, t.spec.options.dim, rows, index,
                                 input_.data() + t.offset, width);
    }
  }
  backend_->CopyColumns(batch, dense, *x, dense, input_.data() + embedded_size_, width);
  *x = input_.data();
  return Status::Ok();
}

template <typename T>
void Model<T>::ScatterTableGradients() {
  const int64_t width = embedded_size_ + NumElements(input_shape_);
  for (Table& t : tables_) {
    const int dim = t.spec.options.dim;
    t.grad.resize(static_cast<size_t>(t.unique * dim));
    const bool host = host_memory_;
    const uint32_t* offsets = host ? t.offsets.data() : t.device_offsets.data();
    const uint32_t* positions = host ? t.positions.data() : t.device_positions.data();
    T* grad = host ? t.grad.data() : t.device_grad.data();
    const T* dy = input_grad_.data() + t.offset;
    if (t.bag >= 0) {
      backend_->EmbeddingBagBackward(dim, t.unique, offsets, positions,
                                     host ? t.bags.data() : t.device_bags.data(),
                                     t.spec.pooling == BagPooling::kMean, dy, width, grad);
    } else {
      backend_->EmbeddingBackward(t.spec.fields, dim, t.unique, offsets, positions, dy, width,
                                  grad);
    }
    if (!host) backend_->CopyToHost(grad, t.grad.size() * sizeof(T), t.grad.data());
  }
}

// Model<T> is instantiated in model.cc; these members are defined here.
#define TOWERPS_MODEL_TABLES(T)                                                                   \
  template void Model<T>::SetTableRows(int, const T*, int64_t, const uint32_t*, const uint32_t*); \
  template Status Model<T>::AssembleInput(int, bool, const T**);                                  \
  template void Model<T>::ScatterTableGradients();
TOWERPS_MODEL_TABLES(float)
TOWERPS_MODEL_TABLES(double)
#undef TOWERPS_MODEL_TABLES

}  // namespace towerps::worker
