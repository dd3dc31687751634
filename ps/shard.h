// Shard: a server thread that owns a set of chunks and serves their init, push and pull
// requests, so that each chunk is touched by one thread only and needs no lock.
//
// The server's I/O thread posts requests with Post(); the shard answers through the server's
// outbox (replies to send, snapshots for checkpoints). A pull that cannot be answered yet (the
// chunk is below the asked version, not initialised, or SSP holds it back) waits inside the shard
// and is answered by the update that makes it ready: no polling.
//
// Contract: AddChunk() only before Start(). Post() is thread-safe. Stop() joins the thread;
// after it, chunks() may be read by the caller.
#ifndef TOWERPS_PS_SHARD_H_
#define TOWERPS_PS_SHARD_H_

#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "common/mailbox.h"
#include "common/message.h"
#include "ps/chunk.h"
#include "ps/server_stats.h"
#include "ps/version.h"

namespace towerps::ps {

struct ShardTask {
  enum class Kind { kRequest, kSnapshot, kStop } kind = Kind::kRequest;
  size_t chunk = 0;                        // kRequest: index in this shard
  std::optional<IncomingMessage> message;  // kRequest: init, push or pull
};

struct SnapshotPart {
  int shard = 0;
  std::vector<ChunkState> chunks;
};

using ServerOutput = std::variant<OutgoingMessage, SnapshotPart>;

class Shard {
 public:
  Shard(int index, const JobConfig& config, Mailbox<ServerOutput>* outbox);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Returns the chunk's index in this shard.
  size_t AddChunk(std::unique_ptr<Chunk> chunk);
  void Start();
  void Post(ShardTask task) { inbox_.Push(std::move(task)); }
  void Stop();

  const ShardCounters& counters() const { return counters_; }
  // The lowest and highest chunk versions (kNoVersion without chunks), readable from any thread.
  int64_t MinVersion() const;
  int64_t MaxVersion() const;
  const std::vector<std::unique_ptr<Chunk>>& chunks() const { return chunks_; }

 private:
  struct Waiter {
    IncomingMessage request;
  };
  void Loop();
  void Handle(size_t chunk, IncomingMessage msg);
  void AnswerReadyPulls(size_t chunk);
  // Answers a push whose gradient the chunk refused as non-finite: an error reply saying why.
  void RefuseNonFinite(const IncomingMessage& request, const std::string& why);
  void ReplyPull(size_t chunk, const IncomingMessage& request);

  const int index_;
  const JobConfig& config_;
  Mailbox<ServerOutput>* outbox_;
  Mailbox<ShardTask> inbox_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::vector<std::vector<Waiter>> waiters_;          // per chunk
  std::unique_ptr<std::atomic<int64_t>[]> versions_;  // per chunk, mirrored for readers
  ShardCounters counters_;
  std::set<uint32_t> nonfinite_logged_;  // workers whose non-finite gradient was logged
  std::thread thread_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SHARD_H_
