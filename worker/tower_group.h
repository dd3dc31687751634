// TowerGroup: one worker's towers (--towers) run as one. Each tower is a backend and a replica
// of the model; a step splits the batch over the towers, runs them on a thread each, and hands
// on every variable's gradient averaged over the towers as soon as the last tower has it.
//
// Where the average is computed:
//  - On the host, in tower order (bitwise reproducible), when the towers compute in host memory
//    (CPU) or cannot copy from each other (mixed devices): the last tower to finish a variable
//    averages it.
//  - On tower 0's device, when the towers compute in device memory and can copy from each other
//    (MemorySpace::CanCopyFromPeer, e.g. GPUs): towers t > 0 only report, per variable, that
//    its gradient is queued; tower 0's thread (so each backend keeps one caller) waits for the
//    reports, queues the peer copies, AverageOf in tower order and one copy to the pinned host
//    average, and once its own backward is queued hands on each average as its copy lands.
//    A single device tower is the same with nothing to average: each gradient is copied from
//    the device straight into the pinned host buffer that is handed on (the client's
//    shared-memory arena, with SetGradientAllocator), as soon as its layer's backward is queued.
//
// Contract:
//  - Owns the towers' backends and models; the caller reads and writes the replicas' values
//    through model(t) between steps. Not thread-safe: one caller; Step() runs the tower threads
//    and joins them before it returns.
//  - `on_average(v, average)` runs on a tower thread, once per variable per step; calls for
//    different variables may run concurrently. `average` is owned by the group and is not
//    written again until the next Step(): the callee may send it without a copy, but must be
//    done with it before it calls Step() again.
//  - Step() returns the mean loss and the counts over the towers, or the first failing tower's
//    error; device towers that stop reporting for `peer_timeout` give kTimeout naming the
//    variable. After an error no further averages are handed on for that step.
#ifndef TOWERPS_WORKER_TOWER_GROUP_H_
#define TOWERPS_WORKER_TOWER_GROUP_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "common/tensor.h"
#include "kernels/backend.h"
#include "towerps/result.h"
#include "worker/model/model.h"
#include "worker/model/model_factory.h"
#include "worker/tower_devices.h"
#include "worker/worker_options.h"

namespace towerps::worker {

class TowerGroup {
 public:
  struct Options {
    std::chrono::milliseconds peer_timeout{60000};  // device reduction: wait for a peer tower
  };
  // One tower per device, each with the backend CreateTowerBackend gives it and its replica of
  // `builder`'s model, all initialised from `seed`.
  static Result<std::unique_ptr<TowerGroup>> Create(const std::vector<TowerDevice>& devices,
                                                    const TowerBackendOptions& backend_options,
                                                    const ModelBuilder& builder, uint64_t seed,
                                                    const Options& options);
  // A worker's towers, from its options: the devices of --towers (soft placement warned about),
  // each taking an equal slice of `batch_size` (kInvalidArgument when it does not split).
  static Result<std::unique_ptr<TowerGroup>> ForWorker(const WorkerOptions& worker,
                                                       const ModelBuilder& builder, uint64_t seed,
                                                       int batch_size);
  // The same on backends the caller made (tests use stand-in backends); parallel vectors.
  static Result<std::unique_ptr<TowerGroup>> FromBackends(
      std::vector<TowerDevice> devices,
      std::vector<std::unique_ptr<kernels::Backend<float>>> backends, const ModelBuilder& builder,
      uint64_t seed, const Options& options);
  ~TowerGroup();
  TowerGroup(const TowerGroup&) = delete;
  TowerGroup& operator=(const TowerGroup&) = delete;

  int size() const { return static_cast<int>(towers_.size()); }
  Model<float>& model(int t) { return *towers_[t].model; }
  const Model<float>& model(int t) const { return *towers_[t].model; }
  const TowerDevice& device(int t) const { return towers_[t].device; }
  // True when the gradients are averaged on tower 0's device, or copied from it straight into
  // the buffers handed on (one device tower; see above).
  bool averages_on_device() const { return device_ != nullptr; }

  using AverageCallback = std::function<void(int variable, const Tensor& average)>;
  // One training step on `batch` examples (x: batch x example elements, row-major), split
  // evenly over the towers; `batch` must be a multiple of size().
  Result<StepResult> Step(const float* x, const int32_t* labels, int batch,
                          const AverageCallback& on_average);

  // Embedding tables (worker/model/model.h; any towers): table t's rows for the next Step, for
  // the whole batch: `unique` rows of the table's dim, and per example and field the index of
  // its row (batch x fields entries); an EmbeddingBag's table also gives its batch + 1 bag
  // offsets into `inverse` (Model::SetTableRows). Each tower takes its slice's indices. Borrowed
  // until Step returns.
  void SetTableRows(int t, const float* rows, int64_t unique, const uint32_t* inverse,
                    const uint32_t* bags = nullptr);
  // A regression model's targets for the next Step, one per example of the whole batch (its
  // labels may then be null); each tower takes its slice's. Borrowed until Step returns.
  void SetTargets(const float* targets) { targets_ = targets; }
  // After Step: table t's row gradients averaged over the towers, in tower order, in a fresh
  // buffer from the gradient allocator (the caller may send it without a copy).
  Tensor TableGradient(int t) const;

  // Where the averaged gradients handed to the callback live from now on: e.g. the parameter
  // client's shared-memory arena, so that a push to a server on this host is not copied. A
  // buffer still held by someone (a server reading it in place) is never written: the next
  // step averages into another one. Call between steps.
  // `allocate(shape, alignment)` is told each buffer's alignment: HostPageBytes() for device
  // towers, which pin their buffers (a registration takes whole pages, none shared).
  using GradientAllocator = std::function<Tensor(const Shape& shape, size_t alignment)>;
  void SetGradientAllocator(GradientAllocator allocate);

  // Logs each tower's layers with their device, backend and the backend's plan for them at
  // `batch` examples for the whole group (--log-device-placement); reserves each tower's model
  // for its share of `batch` first, so that the plans exist.
  void LogPlacement(int batch);
  // Logs device towers' peak and reserved memory; nothing for host towers.
  void LogDeviceMemory() const;

 private:
  struct Tower {
    TowerDevice device;
    std::unique_ptr<kernels::Backend<float>> backend;
    std::unique_ptr<Model<float>> model;
  };
  struct DeviceReduction;  // tower_group.cc

  TowerGroup(std::vector<Tower> towers, const Options& options);
  Status SetUpDeviceReduction();
  Result<StepResult> StepOnHost(const float* x, const int32_t* labels, int batch,
                                const AverageCallback& on_average);
  Result<StepResult> StepOnDevice(const float* x, const int32_t* labels, int batch,
                                  const AverageCallback& on_average);

  std::vector<Tower> towers_;
  Options options_;
  int num_vars_ = 0;
  int64_t example_elements_ = 0;
  // Variable v's average buffer for this step: average_[v] if nobody else holds it, else an
  // exclusive spare or a new buffer (pinned when averaged on the device). One thread per v.
  Tensor& WritableAverage(int v);
  Tensor NewAverage(int v);

  // The alignment of the averages: whole pages when a device tower pins them.
  size_t AverageAlignment() const;
  GradientAllocator allocate_;   // null: the heap
  std::vector<Tensor> average_;  // [v], host; pinned when averaged on the device
  std::vector<std::vector<Tensor>> spare_averages_;  // [v]: earlier buffers, reused when free
  std::unique_ptr<std::atomic<int>[]> towers_done_;  // [v]: towers done this step (host path)
  std::unique_ptr<DeviceReduction> device_;          // null: averaged on the host
  struct TableRows {
    const float* rows = nullptr;
    int64_t unique = 0;
    const uint32_t* inverse = nullptr;
    const uint32_t* bags = nullptr;  // an EmbeddingBag's batch + 1 offsets
  };
  std::vector<TableRows> table_rows_;  // [table], for the next Step
  const float* targets_ = nullptr;     // SetTargets
};

// The step's result over all towers: the mean loss and the summed counts, or the first error.
Result<StepResult> SumTowers(const std::vector<Result<StepResult>>& results);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TOWER_GROUP_H_
