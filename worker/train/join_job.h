// Joining a running job, the same for a native worker (worker/train/trainer.h) and a PyTorch
// worker's session (python/session.h): the client connected to the job's servers, the model
// registered (and, in a fresh job, the chief's initial values given), and where the worker
// starts, read from the servers, so that a restarted worker (towerps-launch restarts one killed
// by a signal, or the servers restarted under it) carries on from where the job stands rather
// than from the beginning.
//
// Contract: free functions on a registered Client; they block until the servers answer (each
// call is bounded by the client's RPC deadline; a set `stop` ends the wait with kCancelled) and
// return the first error. Not thread-safe with other calls that wait on the same futures.
#ifndef TOWERPS_WORKER_TRAIN_JOIN_JOB_H_
#define TOWERPS_WORKER_TRAIN_JOIN_JOB_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/transport.h"
#include "ps/client/client.h"
#include "towerps/result.h"

namespace towerps::worker {

// The reply of one request; a set `stop` (may be null) ends the wait early with kCancelled (the
// client's RPC deadline bounds it otherwise), so a signalled worker stops promptly even while a
// server is silent.
template <typename Reply>  // Status or Result<T>
Reply AwaitUnlessStopped(Future<Reply>& reply, const std::atomic<bool>* stop) {
  while (reply.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    if (stop && stop->load()) return CancelledError("stopped by a signal");
  }
  return reply.get();
}

// How a worker reaches its job's servers.
struct ServerAccess {
  int rank = 0;
  std::vector<std::string> endpoints;  // by server rank
  ps::JobConfig job;
  std::chrono::milliseconds rpc_timeout{30000};
  TransportSecurity security;  // how to prove membership of the job to its servers
  TransportPath path = TransportPath::kAuto;
};
// The worker's client, connected (ps::Client::Connect's errors).
Result<std::unique_ptr<ps::Client>> ConnectToServers(const ServerAccess& access);

// Declares the model (`variables`, `signature`) to every server, and returns the lowest version
// they restored (kNoVersion: a fresh job). Then the chief (`rank` 0) of a fresh job gives each
// of the first `dense` variables its value, `initial(v)`; servers keep the first value they
// get, so this changes no chunk that has one. Tables take none: their rows start on the servers.
Result<int64_t> RegisterModel(ps::Client& client, const std::vector<ps::VariableSpec>& variables,
                              uint64_t signature, int rank, int dense,
                              const std::function<Tensor(int v)>& initial,
                              const std::atomic<bool>* stop);

// Sync: the step to (re)join at, from `first` (the version the servers restored, or 0). A worker
// of an undisturbed job finds every chunk at `first`. A restarted one finds the step its
// predecessor was computing: the lowest chunk version s, where chunks it had already pushed to
// stand at s + 1 (never more: they wait for its next step). It recomputes step s from exactly
// version s (the servers keep one version back), with the same batch and dropout masks, so its
// pushes repeat the lost ones bit for bit (`exact`). Exactness needs `full_sync` (with backup
// workers chunks run ahead without anyone) and servers that still hold version s: one just
// restored from its checkpoint holds only the restored version, and then the worker goes on from
// the latest values instead.
struct SyncJoin {
  int64_t step = 0;
  bool exact = false;
};
// `tables`: the embedding tables' variable ids; every partition of theirs counts as a chunk.
Result<SyncJoin> JoinSyncJob(ps::Client& client, int num_vars, const std::vector<uint32_t>& tables,
                             int64_t first, bool full_sync, const std::atomic<bool>* stop);

// Async and SSP: the iteration to (re)start at: the lowest count of this worker's iterations
// the chunks have applied (they keep it per worker, and checkpoint it). A restarted worker
// redoes the iteration its predecessor left half-pushed; the chunks that have it drop the
// repeat, so each iteration is applied once.
Result<int64_t> JoinAsyncJob(ps::Client& client, int num_vars, const std::vector<uint32_t>& tables,
                             int64_t first, const std::atomic<bool>* stop);

// Where a worker starts: the version it pulls first (sync: the step), its first iteration, and
// whether it recomputes that step from exactly its version (sync, see JoinSyncJob).
struct JoinPoint {
  int64_t version = 0;
  int64_t iter = 0;
  bool exact = false;
};
// The mode's join, from `restored` (Client::Register's lowest restored version, or kNoVersion).
// A sync worker first waits, up to `join_timeout`, until every worker has registered
// (AwaitEveryWorker).
Result<JoinPoint> JoinJob(ps::Client& client, const ps::JobConfig& job, int num_vars,
                          const std::vector<uint32_t>& tables, int64_t restored,
                          std::chrono::seconds join_timeout, const std::atomic<bool>* stop);

// A sync step needs every worker's gradients (unless backup workers make up for the missing):
// waits until every one of the job's workers has registered with server 0, logging who is
// missing after 2 s and every 10 s after, as torchrun's rendezvous does; not once server 0 holds
// an update (the job began: every worker joined once; a rejoin does not wait for finished ones).
// kTimeout naming the missing workers once `timeout` has passed; a server that cannot say is not
// waited for.
Status AwaitEveryWorker(ps::Client& client, const ps::JobConfig& job, std::chrono::seconds timeout,
                        const std::atomic<bool>* stop);

// Once joined: creates (empty) the worker's --ready-file, by which towerps-launch bounds how long
// a restarted worker takes to rejoin. kIoError naming the file when it cannot be written.
Status WriteReadyFile(const std::string& path);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_JOIN_JOB_H_
