// Client::Impl: the I/O half of ps::Client (ps/client/client.h), shared by client.cc only. One
// background thread owns a DEALER socket per server, sends every queued Call, completes the
// futures from the replies, expires deadlines, and pings servers that owe replies. The books of
// requests in flight are a RequestBook (ps/client/client_requests.h); which server each request
// goes to, and which servers are alive, a ReplicaRouter (ps/client/replica_router.h).
//
// Contract: private to ps/client/client.cc; the members marked "I/O thread only" are touched by
// that thread alone; Submit(), SendToChunks(), NewMessage(), Allocate() and paths() are
// thread-safe.
#ifndef TOWERPS_PS_CLIENT_CLIENT_IMPL_H_
#define TOWERPS_PS_CLIENT_CLIENT_IMPL_H_

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/mailbox.h"
#include "common/mutex.h"
#include "ps/client/client.h"
#include "ps/client/client_requests.h"
#include "ps/client/replica_router.h"

namespace towerps::ps {

// A request queued for the I/O thread.
struct Call {
  int server = -1;  // -1: stop the I/O thread (unless `group` names the destination)
  int group = -1;   // >= 0: a chunk's replica group; sent to the group's primary
  std::optional<OutgoingMessage> message;
  std::string what;
  Completion done;
  std::chrono::milliseconds timeout{0};  // 0: the client's rpc_timeout
  bool together = false;  // made inside Client::Together: may share a bundle with the others
};

class Client::Impl {
 public:
  explicit Impl(ClientOptions options);
  ~Impl();

  Status Start();
  // Queues a request to one server; `done` gets its reply or failure on the I/O thread.
  void Submit(int server, OutgoingMessage msg, std::string what, Completion done);
  OutgoingMessage NewMessage(proto::MessageType type) const;
  // Sends one `type` request per chunk of a variable to the chunk's server. Each is addressed to
  // its chunk, completed by `header`, and carries the chunk's slice of `*values` (the variable's
  // flattened elements; borrowed for the call; null: no payload), shared, not copied. `done` gets
  // each chunk's reply or failure, on the I/O thread.
  void SendToChunks(std::span<const ChunkSpec> chunks, proto::MessageType type,
                    const std::function<void(proto::Header::Builder)>& header, const Tensor* values,
                    const std::function<void(const ChunkSpec&, Result<IncomingMessage>)>& done);
  // Sends one request addressed to chunk (or table partition) `c`, to the primary of its group.
  void SendToChunk(const ChunkSpec& c, OutgoingMessage msg, Completion done);
  // Calls the calling thread queues inside `calls` reach the I/O thread at once, marked
  // `together` (Client::Together).
  void Together(const std::function<void()>& calls);
  std::string ServerName(int server) const;
  // Why request `p` may have gone unanswered, for its timeout: a server that has answered this
  // client's pings since `p` went out is alive and holding it (in sync, for the other workers'
  // gradients), which names the right culprit; else whether the server is running at all.
  std::string WhyUnanswered(const PendingRequest& p) const;
  // From a registerReply (I/O thread): the groups `server` is the primary of now.
  void Claim(int server, const std::vector<int>& groups) { router_.Claim(server, groups); }
  // Notes the path `server`'s connection takes (I/O thread, which owns the sockets).
  void NotePath(int server);
  std::vector<ConnectionPath> paths() const;
  Tensor Allocate(const Shape& shape, size_t alignment) {
    return transport_->Allocate(shape, DType::kFloat32, alignment);
  }

  const ClientOptions options_;
  const uint64_t job_id_ = options_.job.Fingerprint();
  mutable Mutex placement_mu_;
  std::optional<ChunkPlacement> placement_ GUARDED_BY(placement_mu_);  // set once by Register
  std::atomic<uint64_t> server_restarts_{0};

 private:
  void Loop();
  // Queues `call` for the I/O thread, or holds it inside the caller's Together.
  void Queue(Call call);
  // Sends what the I/O thread drained, the calls made together for one server as one bundle.
  // False when a call asked the I/O thread to stop.
  bool SendAll(std::vector<Call> calls);
  void Send(Call call);
  // `parts` (two or more) to `server` as one bundle; each is pending on its own.
  void SendBundle(int server, std::vector<Call> parts);
  void Complete(int server, IncomingMessage msg);
  void CompletePart(int server, IncomingMessage msg);
  void ProbeServers();
  // `server` is gone (silent): its groups fail over, and what was outstanding there fails with
  // kNetwork, so that the caller rejoins (server_restarts() moves).
  void FailOver(int server, const std::string& why);
  // A reply from a new incarnation of `server`: what was outstanding there is lost.
  void ServerRestarted(int server);
  // `server` holds only the backup of the group `request` went to: it fails with kNetwork.
  void NotPrimary(int server, PendingRequest request);
  void SendTakeOver(int to, int failed, bool unresponsive);
  void FailOutstanding(int server, const Status& lost);
  void FailAll(const Status& status);

  std::unique_ptr<Transport> transport_;
  std::vector<std::unique_ptr<Socket>> sockets_;
  Mailbox<Call> calls_;
  // Together(): the thread inside it, and what it queued so far.
  std::atomic<std::thread::id> together_thread_{};
  std::vector<Call> together_;  // the together_thread_'s only
  std::thread io_;
  RequestBook requests_;  // I/O thread only
  ReplicaRouter router_;  // I/O thread only
  mutable Mutex paths_mu_;
  std::vector<ConnectionPath> paths_ GUARDED_BY(paths_mu_);
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_CLIENT_CLIENT_IMPL_H_
