#include "worker/tower_group.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "common/logging.h"
#include "common/mutex.h"
#include "kernels/backend_buffer.h"
#include "kernels/cpu/elementwise.h"

namespace towerps::worker {
namespace {

// A tower's slice of the batch's labels; none for a regression model, whose targets are set
// apart (TowerGroup::SetTargets).
const int32_t* LabelsOf(const int32_t* labels, int64_t first) {
  return labels == nullptr ? nullptr : labels + first;
}

}  // namespace

// The device reduction's buffers on tower 0's device, and the towers' rendezvous.
struct TowerGroup::DeviceReduction {
  std::vector<std::vector<kernels::BackendBuffer<float>>> scratch;  // [v][tower - 1]
  std::vector<kernels::BackendBuffer<float>> average;               // [v]
  Mutex mu;
  CondVar cv;
  std::vector<std::vector<char>> queued GUARDED_BY(mu);  // [tower][v]: backward queued
  bool failed GUARDED_BY(mu) = false;                    // a tower's step failed

  // Tower 0's thread: waits until towers 1..k-1 have queued variable v's gradient. An error
  // when a tower failed, or when they did not within `timeout`.
  Status AwaitPeers(int v, int k, std::chrono::milliseconds timeout) {
    MutexLock lock(&mu);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto peers_queued = [&]() REQUIRES(mu) {
      for (int t = 1; t < k; ++t) {
        if (!queued[t][v]) return false;
      }
      return true;
    };
    bool ready = true;
    while (!failed && !peers_queued()) {
      if (!cv.WaitUntil(&mu, deadline)) {
        ready = failed || peers_queued();
        break;
      }
    }
    if (ready && !failed) return Status::Ok();
    return ready ? InternalError("a tower failed during backward")
                 : TimeoutError("towers did not reach variable " + std::to_string(v) + " in time");
  }
};

Result<StepResult> SumTowers(const std::vector<Result<StepResult>>& results) {
  StepResult total;
  for (const auto& r : results) {
    if (!r.ok()) return r.status();
    total.loss += r->loss / static_cast<double>(results.size());
    total.correct += r->correct;
    total.batch += r->batch;
  }
  return total;
}

Result<std::unique_ptr<TowerGroup>> TowerGroup::ForWorker(const WorkerOptions& worker,
                                                          const ModelBuilder& builder,
                                                          uint64_t seed, int batch_size) {
  std::vector<std::string> warnings;
  TOWERPS_ASSIGN_OR_RETURN(const int gpu_limit, worker.GpuCountLimit());
  TOWERPS_ASSIGN_OR_RETURN(
      const std::vector<TowerDevice> devices,
      ParseTowers(worker.towers, worker.allow_soft_placement, &warnings, gpu_limit));
  for (const std::string& w : warnings) TOWERPS_LOG(kWarning) << "soft placement: " << w;
  if (batch_size % static_cast<int>(devices.size()) != 0) {
    return InvalidArgumentError("--batch-size=" + std::to_string(batch_size) +
                                " does not split evenly over " + std::to_string(devices.size()) +
                                " towers");
  }
  return Create(devices,
                {.intra_op_threads = worker.intra_op_threads,
                 .cpu_conv = worker.cpu_conv,
                 .gpu_memory_fraction = worker.gpu_memory_fraction,
                 .allow_growth = worker.allow_growth},
                builder, seed, {.peer_timeout = worker.rpc_timeout});
}

Result<std::unique_ptr<TowerGroup>> TowerGroup::Create(const std::vector<TowerDevice>& devices,
                                                       const TowerBackendOptions& backend_options,
                                                       const ModelBuilder& builder, uint64_t seed,
                                                       const Options& options) {
  std::vector<std::unique_ptr<kernels::Backend<float>>> backends;
  for (const TowerDevice& d : devices) {
    TOWERPS_ASSIGN_OR_RETURN(auto backend, CreateTowerBackend(d, backend_options));
    backends.push_back(std::move(backend));
  }
  return FromBackends(devices, std::move(backends), builder, seed, options);
}

Result<std::unique_ptr<TowerGroup>> TowerGroup::FromBackends(
    std::vector<TowerDevice> devices,
    std::vector<std::unique_ptr<kernels::Backend<float>>> backends, const ModelBuilder& builder,
    uint64_t seed, const Options& options) {
  if (devices.empty() || devices.size() != backends.size()) {
    return InvalidArgumentError("a tower group needs one backend per device, and at least one");
  }
  std::vector<Tower> towers;
  for (size_t t = 0; t < devices.size(); ++t) {
    Tower tower{devices[t], std::move(backends[t]), nullptr};
    // The same seed everywhere: every tower and worker starts from the chief's values anyway.
    TOWERPS_ASSIGN_OR_RETURN(tower.model, BuildModel<float>(builder, tower.backend.get(), seed));
    towers.push_back(std::move(tower));
  }
  std::unique_ptr<TowerGroup> group(new TowerGroup(std::move(towers), options));
  TOWERPS_RETURN_IF_ERROR(group->SetUpDeviceReduction());
  return group;
}

TowerGroup::TowerGroup(std::vector<Tower> towers, const Options& options)
    : towers_(std::move(towers)), options_(options) {
  const Model<float>& m0 = *towers_[0].model;
  num_vars_ = m0.num_variables();
  example_elements_ = NumElements(m0.input_shape());
  towers_done_ = std::make_unique<std::atomic<int>[]>(num_vars_);
  for (int v = 0; v < num_vars_; ++v) {
    average_.push_back(Tensor::Empty(m0.variables()[v].shape, DType::kFloat32, AverageAlignment()));
  }
  spare_averages_.resize(static_cast<size_t>(num_vars_));
}

TowerGroup::~TowerGroup() {
  if (device_ == nullptr) return;
  for (int v = 0; v < num_vars_; ++v) {
    towers_[0].backend->UnpinHostMemory(average_[v].f32());
    for (Tensor& t : spare_averages_[v]) towers_[0].backend->UnpinHostMemory(t.f32());
  }
}

size_t TowerGroup::AverageAlignment() const {
  return towers_[0].backend->host_memory() ? kTensorAlignment : HostPageBytes();
}

void TowerGroup::SetGradientAllocator(GradientAllocator allocate) {
  allocate_ = std::move(allocate);
  for (int v = 0; v < num_vars_; ++v) {
    if (device_ != nullptr) towers_[0].backend->UnpinHostMemory(average_[v].f32());
    average_[v] = NewAverage(v);
  }
}

Tensor TowerGroup::NewAverage(int v) {
  const Shape& shape = towers_[0].model->variables()[v].shape;
  Tensor t = allocate_ ? allocate_(shape, AverageAlignment())
                       : Tensor::Empty(shape, DType::kFloat32, AverageAlignment());
  if (device_ != nullptr) towers_[0].backend->PinHostMemory(t.f32(), t.byte_size());
  return t;
}

Tensor& TowerGroup::WritableAverage(int v) {
  Tensor& current = average_[v];
  if (current.Exclusive()) return current;
  std::vector<Tensor>& spares = spare_averages_[v];
  Tensor next = TakeExclusive(spares);
  if (!next.defined()) next = NewAverage(v);
  // A few spares cover the loans a step can have out; a buffer beyond them is let go (freed
  // when its holder releases it), so a peer that never releases cannot make this grow.
  constexpr size_t kMaxSpares = 3;
  if (spares.size() < kMaxSpares) {
    spares.push_back(std::move(current));
  } else if (device_ != nullptr) {
    towers_[0].backend->UnpinHostMemory(current.f32());
  }
  current = std::move(next);
  return current;
}

Status TowerGroup::SetUpDeviceReduction() {
  kernels::Backend<float>* b0 = towers_[0].backend.get();
  if (b0->host_memory()) return Status::Ok();
  for (size_t t = 1; t < towers_.size(); ++t) {
    if (!b0->CanCopyFromPeer(*towers_[t].backend)) return Status::Ok();
  }
  auto reduce = std::make_unique<DeviceReduction>();
  const int k = size();
  reduce->scratch.resize(num_vars_);
  for (int v = 0; v < num_vars_; ++v) {
    const int64_t n = average_[v].num_elements();
    for (int t = 1; t < k; ++t) {
      TOWERPS_ASSIGN_OR_RETURN(auto b, kernels::BackendBuffer<float>::Allocate(b0, n));
      reduce->scratch[v].push_back(std::move(b));
    }
    if (k == 1) continue;  // the gradient itself is copied out
    TOWERPS_ASSIGN_OR_RETURN(auto avg, kernels::BackendBuffer<float>::Allocate(b0, n));
    reduce->average.push_back(std::move(avg));
  }
  for (Tensor& t : average_) b0->PinHostMemory(t.f32(), t.byte_size());
  {
    MutexLock lock(&reduce->mu);
    reduce->queued.assign(k, std::vector<char>(num_vars_, 0));
  }
  device_ = std::move(reduce);
  if (k > 1) TOWERPS_LOG(kInfo) << "tower gradients are averaged on " << towers_[0].device.name();
  return Status::Ok();
}

Result<StepResult> TowerGroup::Step(const float* x, const int32_t* labels, int batch,
                                    const AverageCallback& on_average) {
  if (batch % size() != 0) {
    return InvalidArgumentError("a batch of " + std::to_string(batch) +
                                " does not split evenly over " + std::to_string(size()) +
                                " towers");
  }
  const int slice = batch / size();
  if (targets_ != nullptr) {
    for (int k = 0; k < size(); ++k) towers_[k].model->SetTargets(targets_ + int64_t{k} * slice);
  }
  for (size_t t = 0; t < table_rows_.size(); ++t) {
    const TableRows& rows = table_rows_[t];
    for (int k = 0; k < size(); ++k) {
      Model<float>& m = *towers_[k].model;
      const int64_t first = int64_t{k} * slice;
      if (rows.bags != nullptr) {  // the slice's examples' ids, wherever they start
        m.SetTableRows(static_cast<int>(t), rows.rows, rows.unique, rows.inverse + rows.bags[first],
                       rows.bags + first);
        continue;
      }
      const int64_t fields = m.table(static_cast<int>(t)).fields;
      m.SetTableRows(static_cast<int>(t), rows.rows, rows.unique, rows.inverse + first * fields);
    }
  }
  if (device_ != nullptr) return StepOnDevice(x, labels, batch, on_average);
  return StepOnHost(x, labels, batch, on_average);
}

void TowerGroup::SetTableRows(int t, const float* rows, int64_t unique, const uint32_t* inverse,
                              const uint32_t* bags) {
  table_rows_.resize(static_cast<size_t>(towers_[0].model->num_tables()));
  table_rows_.at(static_cast<size_t>(t)) = {rows, unique, inverse, bags};
}

Tensor TowerGroup::TableGradient(int t) const {
  const Model<float>& m0 = *towers_[0].model;
  const int64_t unique = table_rows_.at(static_cast<size_t>(t)).unique;
  const Shape shape{unique, m0.table(t).options.dim};
  Tensor out = allocate_ ? allocate_(shape, kTensorAlignment) : Tensor();
  if (!out.defined()) out = Tensor::Empty(shape);
  const int64_t n = out.num_elements();
  std::vector<const float*> in;
  for (const Tower& tower : towers_) in.push_back(tower.model->table_gradient(t).data());
  if (in.size() == 1) {
    std::memcpy(out.f32(), in[0], static_cast<size_t>(n) * sizeof(float));
  } else {
    kernels::cpu::AverageOf(static_cast<int>(in.size()), in.data(), n, out.f32());
  }
  return out;
}

// Each tower's hook counts in; the last tower to finish variable v averages it in tower order
// (reproducible) and hands it on.
Result<StepResult> TowerGroup::StepOnHost(const float* x, const int32_t* labels, int batch,
                                          const AverageCallback& on_average) {
  const int k = size();
  const int slice = batch / k;
  for (int v = 0; v < num_vars_; ++v) towers_done_[v].store(0);
  auto on_gradient = [&](int v) {
    if (towers_done_[v].fetch_add(1) + 1 != k) return;
    float* out = WritableAverage(v).f32();
    const int64_t n = average_[v].num_elements();
    if (k == 1) {
      std::memcpy(out, towers_[0].model->gradient(v).data(), n * sizeof(float));
    } else {
      std::vector<const float*> in;
      for (Tower& t : towers_) in.push_back(t.model->gradient(v).data());
      kernels::cpu::AverageOf(k, in.data(), n, out);
    }
    on_average(v, average_[v]);
  };
  std::vector<Result<StepResult>> results(k, StepResult{});
  auto run = [&](int t) {
    results[t] = towers_[t].model->TrainStep(x + t * slice * example_elements_,
                                             LabelsOf(labels, t * slice), slice, on_gradient);
  };
  if (k == 1) {
    run(0);
  } else {
    std::vector<std::thread> threads;
    for (int t = 0; t < k; ++t) threads.emplace_back(run, t);
    for (auto& th : threads) th.join();
  }
  return SumTowers(results);
}

Result<StepResult> TowerGroup::StepOnDevice(const float* x, const int32_t* labels, int batch,
                                            const AverageCallback& on_average) {
  const int k = size();
  const int slice = batch / k;
  DeviceReduction& r = *device_;
  {
    MutexLock lock(&r.mu);
    for (auto& q : r.queued) std::fill(q.begin(), q.end(), 0);
    r.failed = false;
  }
  kernels::Backend<float>* b0 = towers_[0].backend.get();
  std::vector<std::pair<uint64_t, int>> copies;  // tower 0's thread only: (ticket, variable)
  Status reduce_status = Status::Ok();           // tower 0's thread only
  // Tower 0's hook: once every peer has queued variable v, average it on tower 0's device.
  auto reduce = [&](int v) {
    if (Status s = r.AwaitPeers(v, k, options_.peer_timeout); !s.ok()) {
      if (reduce_status.ok()) reduce_status = s;
      return;
    }
    const int64_t n = average_[v].num_elements();
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    if (k == 1) {  // straight from the device into the pinned buffer the push lends
      copies.emplace_back(b0->CopyToHostAsync(towers_[0].model->backend_gradient(v), bytes,
                                              WritableAverage(v).f32()),
                          v);
      return;
    }
    std::vector<const float*> in = {towers_[0].model->backend_gradient(v)};
    for (int t = 1; t < k; ++t) {
      float* dst = r.scratch[v][t - 1].data();
      b0->CopyFromPeer(*towers_[t].backend, towers_[t].model->backend_gradient(v), bytes, dst);
      in.push_back(dst);
    }
    b0->AverageOf(k, in.data(), n, r.average[v].data());
    copies.emplace_back(b0->CopyToHostAsync(r.average[v].data(), bytes, WritableAverage(v).f32()),
                        v);
  };
  auto report = [&](int t, int v) {
    MutexLock lock(&r.mu);
    r.queued[t][v] = 1;
    r.cv.SignalAll();
  };
  std::vector<Result<StepResult>> results(k, StepResult{});
  auto run = [&](int t) {
    auto hook = [&, t](int v) {
      if (t == 0) {
        reduce(v);
      } else {
        report(t, v);
      }
    };
    results[t] =
        towers_[t].model->TrainStep(x + t * slice * example_elements_, LabelsOf(labels, t * slice),
                                    slice, hook, Model<float>::GradientDelivery::kBackend);
    if (!results[t].ok()) {
      MutexLock lock(&r.mu);
      r.failed = true;
      r.cv.SignalAll();
    }
    if (t != 0) return;
    // Every queued copy is waited for, even after a failure: its buffers are reused.
    for (const auto& [ticket, v] : copies) {
      b0->WaitCopy(ticket);
      if (results[0].ok() && reduce_status.ok()) on_average(v, average_[v]);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < k; ++t) threads.emplace_back(run, t);
  for (auto& th : threads) th.join();
  Result<StepResult> total = SumTowers(results);  // a tower's own error comes first
  if (total.ok() && !reduce_status.ok()) return reduce_status;
  return total;
}

void TowerGroup::LogPlacement(int batch) {
  for (size_t t = 0; t < towers_.size(); ++t) {
    if (Status st = towers_[t].model->Reserve(batch / size()); !st.ok()) {
      TOWERPS_LOG(kWarning) << "placement: tower " << t << ": " << st.message();
    }
    for (const auto& layer : towers_[t].model->layers()) {
      TOWERPS_LOG(kInfo) << "placement: tower " << t << " " << layer->name() << " (" << layer->ops()
                         << ") -> " << towers_[t].device.name() << " ["
                         << towers_[t].backend->name() << " backend]";
    }
  }
}

void TowerGroup::LogDeviceMemory() const {
  for (size_t t = 0; t < towers_.size(); ++t) {
    const auto m = towers_[t].backend->device_memory_stats();
    if (!m) continue;
    TOWERPS_LOG(kInfo) << "tower " << t << " " << towers_[t].backend->name() << " memory: peak "
                       << (m->peak_bytes_in_use >> 20) << " MiB in use, "
                       << (m->bytes_reserved >> 20) << " MiB reserved of " << (m->limit_bytes >> 20)
                       << " MiB allowed";
  }
}

}  // namespace towerps::worker
