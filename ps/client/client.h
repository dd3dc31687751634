// Client: what a worker uses to reach the parameter servers.
//
// Every call is asynchronous: it queues the request and returns a Future (common/future.h) at once.
// A background I/O thread owns one DEALER socket per server, sends to all servers in parallel and
// completes the futures. A call that touches a variable is split into one request per chunk,
// sent to the chunk's server (the placement is computed here exactly as on the servers).
//
// Contract:
//  - Tensors passed to Init/Push are sent without copying; the caller must not modify them until
//    the returned future is ready (by then the servers have received them). Through shared
//    memory a server may still read one after that: until it releases it, its storage is shared
//    (use_count() > 1), and a caller that reuses buffers writes into an exclusive one
//    (worker/tower_group.h).
//  - Pulled chunks are views of the received messages and stay valid as long as the result.
//  - Every call completes within `rpc_timeout` of being issued: with a result, the server's
//    error, or kTimeout naming the server that did not answer. Nothing waits forever.
//  - Methods are thread-safe. Register() must complete before variable calls.
//  - Destroying the client fails outstanding calls with kCancelled.
//  - A server that restarts (its replies carry a new incarnation) fails every call outstanding
//    there with kNetwork, at once rather than at the deadline: while a server owes replies, the
//    client pings it every 250 ms, and a restarted server answers the ping. With --ps-replicas 2
//    a server silent for 1.25 s, or one that answers it holds only the backup, sends its groups
//    to the other replica (and the calls outstanding there fail with kNetwork, to be retried).
#ifndef TOWERPS_PS_CLIENT_CLIENT_H_
#define TOWERPS_PS_CLIENT_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/future.h"
#include "common/transport.h"
#include "job/job_config.h"
#include "job/placement.h"
#include "job/stats_report.h"
#include "job/version.h"

namespace towerps::ps {

struct ClientOptions {
  std::vector<std::string> servers;  // endpoints; index = server rank
  int worker_rank = 0;
  // The routing id the servers know this client by; empty: "worker:<worker_rank>". A second
  // client of one identity takes over its replies (a restarted worker's), so a tool that watches
  // a running job (statistics) connects under a name of its own, e.g. "tool:bench".
  std::string identity;
  std::chrono::milliseconds rpc_timeout{30000};
  TransportOptions transport;
  JobConfig job;
};

// What a pull brings: a dense variable's values, chunk by chunk, or a table's rows by id.
struct PulledVariable {
  std::chrono::steady_clock::time_point answered{};  // when its last part's reply arrived
  // The lowest and highest version among the parts asked (a table pull of no partition:
  // min_version).
  int64_t version = 0;
  int64_t max_version = kNoVersion;
  // The lowest clock of this worker among the parts asked: how many of its iterations every
  // one has applied (async/SSP: where a restarted worker resumes); -1 when none was asked.
  int64_t min_clock = -1;
  // A dense variable: its chunks, views of the received messages.
  std::vector<std::pair<ChunkSpec, Tensor>> chunks;
  // A table: the rows (float32 [n, dim], in the request's order), each row's update count
  // (uint32 [n], for PushRequest::pulled_updates), and for every_row their ids (uint64 [n],
  // partition after partition).
  Tensor rows{};
  Tensor updates{};
  Tensor ids{};
  // Assembles a dense variable's chunks into `dst` (its flattened elements).
  void CopyTo(float* dst) const;
};

// One variable's gradient, computed from parameters at `version` during iteration `clock`.
// A dense variable's: all its elements. A table's (VariableKind::kTable): one row per id, and
// every partition of the table gets a push, with no rows where it holds none of the ids (a
// partition's update, like a chunk's, counts every worker's push; sync waits for all of them).
struct PushRequest {
  uint32_t variable_id = 0;
  int64_t version = 0;
  int64_t clock = 0;
  // Sent without a copy: not to be written until the push completes. A table's: float32
  // [ids, dim].
  Tensor gradient;
  // See Header.replacesPending: a worker that rejoined without exactness.
  bool replace_pending = false;
  // Who reads `gradient` for a NaN or an infinity (common/finite.h), once; the server is told
  // whether it was found finite (Header.finite) and reads it only if not:
  //  kClient: the client, as it sends it (the values are in the sender's cache);
  //  kCaller: the caller did, and found it finite (the worker's Divergence, before it pushes);
  //  kServer: the server, as it takes it: memory the caller may still write after the send (a
  //           PyTorch script's lent p.grad), which no check before the send would cover.
  enum class FiniteCheck { kClient, kCaller, kServer };
  FiniteCheck finite_check = FiniteCheck::kClient;
  // A table's: uint64 [n], each id once (UniqueIds in job/row_batch.h sums repeats). Grouped by
  // partition and increasing within each, as UniqueIds orders them, they are sent without a
  // copy; otherwise they are sorted into copies. And each row's update count when it was pulled
  // (PulledVariable::updates of these ids).
  Tensor ids{};
  Tensor pulled_updates{};
};

// One variable's values at `min_version` or later, for iteration `clock` (SSP's bound).
// A table's rows for `ids`: only the partitions holding some of them are asked; a pull of no
// ids asks every partition (no rows, but their versions and this worker's clocks: where a
// joining worker finds the job).
struct PullRequest {
  uint32_t variable_id = 0;
  Tensor ids{};  // a table's: uint64 [n], any order; a repeated id gets its row each time
  int64_t min_version = 0;
  int64_t clock = 0;
  // Sync: at exactly `min_version`, which a server holds for one version after it moved on;
  // kFailedPrecondition when it is gone.
  bool exact = false;
  // A table's: every row the partitions hold, with their ids, whatever `ids` says (an export).
  bool every_row = false;
};

struct PushReport {
  std::chrono::steady_clock::time_point answered{};  // when its last chunk's reply arrived
  int64_t version = 0;                               // lowest chunk version after the push
  int dropped_chunks = 0;  // chunks that discarded the gradient as stale (sync)
  int64_t max_staleness = 0;
  double mean_staleness = 0;  // over applied chunks
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> Connect(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Declares the model to every server (configuration and model are checked there) and computes
  // the placement. The result's value is the lowest version the servers restored from their
  // checkpoints, or kNoVersion for a fresh job (whose chief must Init the variables).
  Future<Result<int64_t>> Register(std::vector<VariableSpec> variables, uint64_t model_signature);
  // Chief only: the initial value of one variable. Servers keep the first value they get.
  Future<Status> Init(uint32_t variable_id, const Tensor& value);
  // One variable's gradient, pushed, or its values, pulled (PushRequest, PullRequest), whatever
  // its kind: every variable request is built by one function, Send, from these structs.
  // Errors: kInvalidArgument for a gradient of the wrong size, or for a table, ids that are not
  // a uint64 vector or, in a push, repeat; a server's error naming the variable (an id out of a
  // bounded table's range, say).
  Future<Result<PushReport>> Push(const PushRequest& push);
  // The variable once every part has reached `min_version` (and, in SSP, the slowest worker is
  // within the staleness bound of `clock`); see PullRequest::exact.
  Future<Result<PulledVariable>> Pull(const PullRequest& pull);
  // The push, then the pull of the same variable, in one request per part (half the messages:
  // Header.thenPull); a table's pull is of `next`'s ids (the next step's batch). Each part's
  // reply completes both; the push's report comes with the values, so its version is theirs.
  // A gradient a server refuses for a NaN or an infinity fails the push with kInvalidArgument,
  // as Push does, and the values still come; any other failure fails both. kInvalidArgument for
  // both when `next` names another variable or is exact or every_row (those travel alone).
  struct PushAndPull {
    Future<Result<PushReport>> push;
    Future<Result<PulledVariable>> pull;
  };
  PushAndPull PushThenPull(const PushRequest& push, const PullRequest& next);
  // The pushes and pulls this thread makes inside `calls` go to the servers together: those for
  // one server travel as one message (a bundle, each part answered as if sent alone, the replies
  // as one message too), so that a step's tables cost one round trip per server, not one per
  // table. Calls from other threads meanwhile go as usual. A Together inside `calls` joins it:
  // the outermost sends everything.
  void Together(const std::function<void()>& calls);
  Future<Result<ServerStatsReport>> Stats(int server);
  Future<Status> Ping(int server);
  // Asks a server to checkpoint (if configured) and exit: a launcher's request at once, the
  // chief's once every worker has left (ps/server/shutdown_gate.h).
  Future<Status> Shutdown(int server);
  // Tells a server this worker is done, after `last_step` steps (sync: the last version it
  // pushed toward), after its last request: the chief's shutdown stops waiting for it, and a
  // sync step it will never push to fails at once, naming it (ps/server/shard.h).
  Future<Status> Leave(int server, int64_t last_step);

  const ChunkPlacement& placement() const;
  int num_servers() const;
  // Per server: how payloads travel (shared memory or TCP, and why), as of Register(). With
  // ClientOptions.transport.path = kShm, Register() fails for a server reached over TCP.
  std::vector<ConnectionPath> connection_paths() const;
  // Logs the same, one line per server: "ps:0 (tcp://...): shared memory".
  void LogConnections() const;
  // A buffer for gradients: in the shared-memory arena when there is one, so that a push to a
  // server on this host lends it in place (see Push: the buffer must not be written while a
  // server holds it, i.e. while its storage is shared). Thread-safe.
  // `alignment`: HostPageBytes() for a buffer a device will pin (a GPU tower's averages).
  Tensor Allocate(const Shape& shape, size_t alignment = kTensorAlignment);
  // How many times a server was seen to restart (a reply with a new incarnation). Each time,
  // the calls outstanding at that server failed with kNetwork saying so; a caller that sees
  // this count move can rejoin the job where the servers now stand.
  uint64_t server_restarts() const;

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  // Every variable request: a push, a pull, or both, one message per part (chunk or partition),
  // cut and merged by the variable's kind (ps/client/part_requests.h).
  PushAndPull Send(const PushRequest* push, const PullRequest* pull);
  // A request of `type` without a body, whose answer is only a status (ping, shutdown).
  Future<Status> StatusCall(int server, proto::MessageType type, const char* what);
  // The same for a message with fields of its own (a leave's last step).
  Future<Status> StatusCall(int server, OutgoingMessage message, const char* what);
  std::unique_ptr<Impl> impl_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_CLIENT_CLIENT_H_
