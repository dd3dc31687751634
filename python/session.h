// Session: a worker whose model TowerPS does not build (a PyTorch script's, through the
// `towerps` Python package) trained against the job's parameter servers, with the protocol of
// native workers: the same registration, join, versions, pushes and pulls (worker/train's
// StepExchange and JoinJob), so every update mode, restart and failover means the same.
//
// A step, as python/towerps/torch.py drives it:
//   1. AwaitValues() copies the values pulled for this step into the caller's parameters;
//   2. the caller computes; as each parameter's gradient is ready it calls Push(v, ...), which
//      sends it with the next step's pull of that parameter. A gradient the caller accumulated
//      in GradientBuffer(v) (p.grad) is lent to the servers as it is: the buffer is the client's
//      (the shared-memory arena's when the server is on this host), so a co-located server
//      reads it in place. Any other memory is copied into such a buffer first;
//   3. EndStep() pushes zeros for the parameters that got no gradient this step (every worker
//      pushes every variable each step, as sync requires), waits for the pushes, and pulls what
//      did not ride on a push.
//
// Training has no last step of its own: the script's loop decides how many steps it runs (every
// worker the same number in sync; tps.DistributedSampler gives each rank equal shares). The
// chief's Finish() pulls the final values and writes the job's summary (--summary-out).
//
// Contract: Push() may be called from any thread (PyTorch's autograd threads), for different
// parameters at once, between AwaitValues() and EndStep(); every other method from one thread.
// GradientBuffer() between steps only (no Push runs then). A lent GradientBuffer must not be
// written until EndStep has returned. Buffers passed to AwaitValues must stay valid for the
// call; Push copies a gradient that is not in v's current GradientBuffer. Every
// wait is bounded by the client's RPC deadline (--rpc-timeout-ms), and errors name the server
// or the parameter.
#ifndef TOWERPS_PYTHON_SESSION_H_
#define TOWERPS_PYTHON_SESSION_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "ps/client/client.h"
#include "python/gradient_buffers.h"
#include "python/session_options.h"
#include "python/table_lookups.h"
#include "towerps/result.h"
#include "worker/straggler.h"
#include "worker/train/divergence.h"
#include "worker/train/metrics_log.h"
#include "worker/train/npz_export.h"
#include "worker/train/step_exchange.h"
#include "worker/train/summary.h"

namespace towerps::python {

// A parameter as the script declares it, in a fixed order (the model's named_parameters()).
struct ParameterSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// What the chief's script measured, for the summary (negative: not measured).
struct FinalMetrics {
  double test_accuracy = -1;
  double test_loss = -1;
  double final_train_loss = -1;
  double epochs = -1;  // the epochs the script ran; -1: unknown
  // Any other measure, by name (finish(test_auc=...)): the summary's "measures", and eval/<name>
  // under --logdir. A test_auc is also the summary's test_auc, as a native click model's.
  std::vector<std::pair<std::string, double>> measures;
};

class Session {
 public:
  // Connects to the servers and registers the parameters (the servers compare them, and every
  // job option, with the other workers'). The chief of a fresh job then sends `initial` (one
  // pointer per parameter, its elements), which the servers keep; then the worker joins where
  // the job stands (iteration() says where). kInvalidArgument for a bad parameter list.
  // `tables` follow the parameters as variables (their rows start on the servers: no initial
  // values).
  static Result<std::unique_ptr<Session>> Start(SessionOptions options,
                                                std::vector<ParameterSpec> parameters,
                                                const std::vector<const float*>& initial,
                                                std::vector<TableSpec> tables = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const SessionOptions& options() const { return o_; }
  int num_parameters() const { return static_cast<int>(parameters_.size()); }
  // The iteration this worker computes next (sync: the step; a restarted worker's is where its
  // predecessor stopped).
  int64_t iteration() const { return iter_; }
  // The version every variable reaches once every worker's iterations are in (as this one's).
  int64_t FinalVersion() const { return o_.job.FinalVersion(iter_); }
  // Where a restarted worker rejoined, for the script to skip the batches already trained on.
  int64_t start_iteration() const { return start_iter_; }

  // Waits for this step's values and copies parameter v's into dst[v] (its elements). Then the
  // step's injected delay, if the job has stragglers (--straggler, --slow-workers), as native
  // workers sleep before computing.
  Status AwaitValues(const std::vector<float*>& dst);
  // Parameter v's gradient of this step (`elements` floats): lent without a copy when it is v's
  // current GradientBuffer and no server still reads that, else copied; sent with its bucket
  // (WorkerOptions::bucket_bytes). kInvalidArgument naming the parameter for a wrong size or a
  // second push in one step.
  Status Push(int v, const float* gradient, int64_t elements);
  // Parameter v's gradient buffer (its elements), for the caller to accumulate its gradients in
  // (PyTorch's p.grad): Push() of it sends it without a copy. Returned exclusive, i.e. no server
  // still reads it: the one returned before when that is so, else another of v's, into which
  // the values of the one returned before are copied when `keep_values`. nullptr when v has
  // options' max_gradient_buffers and servers hold them all: v then has no current buffer, and the
  // caller must use memory of its own (which Push copies) until a call returns one. Every
  // buffer lives as long as the Session.
  float* GradientBuffer(int v, bool keep_values);
  // Pushes that copied their gradient (it was not in v's current GradientBuffer).
  int64_t copied_pushes() const { return copied_pushes_.load(std::memory_order_relaxed); }
  // Lookups that took rows pulled ahead (EndStep's `ahead`), so far.
  int64_t looked_up_ahead() const { return exchange_->tables().fed_ahead(); }
  // The model's embedding tables: their lookups and row gradients of the step
  // (python/table_lookups.h), between AwaitValues and EndStep.
  TableLookups& tables() { return tables_; }
  // Ends the step: zeros for parameters without a gradient, the pushes awaited, the next pulls
  // sent. The gradients and `loss` (when the script gave it) are checked as a native worker
  // checks them: kFailedPrecondition naming the first non-finite value, under
  // --on-nonfinite fail. The step's gradients are held until AwaitValues has the next values.
  //
  // Failover (--ps-replicas 2): when a server restarts under EndStep or AwaitValues, the calls
  // outstanding there fail and the session rejoins, as a native worker does (Rejoin): it
  // registers again, finds where the servers now stand, resends the held gradients where the
  // step is incomplete (their repeats are dropped where it is not) and pulls the next values,
  // so that the script goes on at the same step with the same bits.
  Status EndStep(std::optional<double> loss, std::span<const TableLookups::Ids> ahead = {});
  // Metrics (--metrics-out's JSON lines, --logdir's TensorBoard scalars), as native workers
  // write them: EndStep writes a "train" line every --log-every steps; these add the script's
  // evaluations ("eval": eval/accuracy, eval/loss) and scalars of its own, at the current step.
  // `epoch` is the script's, for the lines (set_epoch); best effort, as MetricsLog.
  void LogEval(const FinalMetrics& metrics);
  void LogScalar(const std::string& tag, double value);
  void set_epoch(int64_t epoch) { epoch_ = epoch; }

  // After the last step: waits until every worker's updates are in (each runs as many
  // iterations as this one) and copies the final values into dst[v]. In sync the last step's
  // values are those already, and nothing is asked.
  Status PullFinal(const std::vector<float*>& dst);
  // The chief's end of training: the servers' counters gathered, the summary written to
  // --summary-out and returned as JSON, --export-npz written, and (--shutdown-servers) the
  // servers asked to stop.
  // Others: an empty string, and (--shutdown-servers) the servers told this worker is done, so
  // that the chief's request waits for it (ps/server/shutdown_gate.h). `own`: the variables
  // the script keeps itself (a hybrid job's dense parameters), exported with the servers'.
  Result<std::string> Finish(const FinalMetrics& metrics, std::vector<worker::NpzMember> own = {});
  // Tells the servers this worker is done after the steps it has ended (Finish does it first):
  // a sync step past them then fails at once on the other workers, naming this one ("worker 1
  // finished at step 10; step 11 cannot complete without it"), instead of at their RPC
  // deadline. For a script that exits without finish(). Once only; later calls do nothing.
  void Leave();

 private:
  Session(SessionOptions options, std::vector<ParameterSpec> parameters,
          std::vector<TableSpec> tables);
  Status Connect(const std::vector<const float*>& initial);
  // Parameter i's gradient of this step, in a client buffer, into the exchange's bucket (sent,
  // with the next pull, once the bucket is full: StepExchange::Offer).
  void Send(size_t i, Tensor gradient);
  // EndStep's "train" line, every --log-every steps.
  void LogTrainLine(std::optional<double> loss, double staleness);
  // The parameters' and the tables' variables, as registered.
  std::vector<ps::VariableSpec> Variables() const;
  // Declares the model to the servers; the chief's values for a chunk without one come from
  // values_. The lowest version they restored.
  Result<int64_t> Register();
  // --export-npz: the parameters' values (the last loaded) and every table's rows, as a native
  // chief writes them (worker/train/npz_export.h).
  Status ExportNpz(const std::string& path, std::vector<worker::NpzMember> own);
  // `failed`, or after a server restart (each time one restarted since the last try)
  // `recover()`'s status: a Rejoin and the wait again, or (a table's pull, mid-step) a
  // registration and the pull again.
  // `how` says what it does, for the log.
  Status RetryAfterRestart(
      Status failed, const std::function<Status()>& recover,
      const std::string& how = "rejoining the job where the servers now stand");
  // Where the servers stand now, from there: the held gradients again if their step is
  // incomplete, and the pulls of this step's values. kFailedPrecondition when the servers stand
  // before the held step (a server restored from an older checkpoint): a script cannot redo
  // steps it has finished.
  Status Rejoin();
  // RetryAfterRestart with a Rejoin, then `again()`: EndStep's and AwaitValues' recovery.
  Status RejoinAndRetry(Status failed, const std::function<Status()>& again);

  SessionOptions o_;
  std::vector<ParameterSpec> parameters_;
  std::vector<int64_t> elements_;  // per parameter
  TableLookups tables_;
  std::unique_ptr<ps::Client> client_;
  std::optional<worker::Divergence> divergence_;
  worker::StragglerPlan stragglers_;
  std::optional<worker::StepExchange> exchange_;
  // The last step's, held until its values arrive (a failover may need them again).
  std::vector<Tensor> gradients_;
  bool holding_ = false;              // gradients_ (and the tables') are step iter_ - 1's
  std::vector<const float*> values_;  // where the parameters' values are: Register's
  uint64_t restarts_seen_ = 0;        // the client's server_restarts() at the last (re)join
  std::vector<GradientBuffers> gradient_buffers_;  // per parameter, once connected
  std::atomic<int64_t> copied_pushes_{0};
  bool left_ = false;         // Leave() has told the servers
  std::vector<char> pushed_;  // per parameter: pushed this step
  int64_t iter_ = 0, start_iter_ = 0;
  bool start_exact_ = false;
  double wait_seconds_ = 0, delay_seconds_ = 0;
  double last_compute_ = 0;  // the last step's, from its values to its EndStep
  std::chrono::steady_clock::time_point computing_since_;
  double last_loss_ = std::numeric_limits<double>::quiet_NaN();  // NaN: no step() had a loss
  int64_t final_min_ = 0, final_max_ = 0;                        // PullFinal's versions
  worker::MetricsLog metrics_;
  int64_t epoch_ = 0;
  // Since the last "train" line: steps, their losses, staleness and wait, and when it began.
  int64_t logged_steps_ = 0;
  double logged_staleness_ = 0, logged_wait_ = 0, logged_delay_ = 0;
  std::chrono::steady_clock::time_point logged_since_;
  std::chrono::steady_clock::time_point began_;
};

}  // namespace towerps::python

#endif  // TOWERPS_PYTHON_SESSION_H_
