// Transport: sockets that carry OutgoingMessage/IncomingMessage between processes.
//
// A server Listen()s (ZeroMQ ROUTER: many peers, replies addressed by routing id); a client
// Connect()s (ZeroMQ DEALER: one server). Endpoints are tcp://HOST:PORT, ipc://PATH or
// inproc://NAME; tcp port 0 asks the OS for a free port, and Socket::endpoint() reports the real
// one. Implementations are chosen by name from the options (TransportOptions::name; today only
// "zmq"), so that a different fabric can be added behind the same interface.
//
// Contract:
//  - Transport owns the I/O context and must outlive every Socket it created. Thread-safe.
//  - A Socket is used by one thread at a time (ZeroMQ sockets are not thread-safe).
//  - Send() and Receive() never wait past their Deadline: they return kTimeout naming the endpoint.
//  - Receive() validates the message (DecodeMessage); an invalid one is drained, logged with its
//    reason, counted in SocketStats::rejected, and returned as a kProtocol Status. The socket
//    stays usable: the next Receive() serves the next message.
//  - Bind failures name the endpoint and say whether the port is in use.
#ifndef TOWERPS_COMMON_TRANSPORT_H_
#define TOWERPS_COMMON_TRANSPORT_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"
#include "common/enum_names.h"
#include "common/job_secret.h"
#include "common/message.h"
#include "towerps/result.h"

namespace towerps {

// Who may connect (docs/SECURITY.md). With a secret, listening sockets accept only peers that
// prove they hold it (ZeroMQ PLAIN with a password derived from it, checked by ZAP), and
// connecting sockets prove it; peers that fail are refused at the handshake and counted
// (Socket::refused_handshakes). `encrypt` uses CURVE instead: keys derived from the secret,
// every byte encrypted. Without a secret anyone who reaches the port is served.
struct TransportSecurity {
  std::shared_ptr<const JobSecret> secret;  // null: no authentication (--insecure)
  bool encrypt = false;                     // CURVE; needs a secret
};

// Which path payloads take between processes on one host (common/internal/shm_links.h).
//   kTcp   frames over the socket, always
//   kAuto  through shared memory with every co-located peer that allows it, frames otherwise
//   kShm   as kAuto; callers that must not fall back check Socket::PathTo (ps::Client does)
enum class TransportPath { kAuto, kTcp, kShm };
inline constexpr EnumNames<TransportPath, 3> kTransportPaths{
    "--transport",
    {{{TransportPath::kAuto, "auto"}, {TransportPath::kTcp, "tcp"}, {TransportPath::kShm, "shm"}}}};
inline const char* TransportPathName(TransportPath path) { return kTransportPaths.Name(path); }
// auto: shared memory between processes on one host, TCP otherwise.
Result<TransportPath> ParseTransportPath(std::string_view name);

// How one connection carries payloads, for logs (--log-device-placement) and checks.
struct ConnectionPath {
  bool shared_memory = false;
  std::string detail;  // "shared memory", or "TCP (why)"
  // The peer's process when it is on this host and its arena is mapped here; 0 otherwise.
  pid_t local_pid = 0;
};

struct TransportOptions {
  // The implementation, by name (Transport::Create). Only "zmq" today, whose options follow:
  // the security (ZAP and CURVE) and the shared-memory path are the ZeroMQ transport's.
  std::string name = "zmq";
  int io_threads = 1;            // ZeroMQ I/O threads per Transport
  int send_high_water_mark = 0;  // queued messages per peer before Send waits; 0 = unlimited
  int receive_high_water_mark = 0;
  int linger_ms = 200;  // how long close() may flush unsent messages
  WireLimits limits;
  TransportSecurity security;
  TransportPath path = TransportPath::kTcp;  // the entry points' flags default to kAuto
  size_t shm_arena_bytes = size_t{1} << 30;  // virtual; memory is committed as it is used
};

struct SocketStats {
  uint64_t messages_in = 0;
  uint64_t messages_out = 0;
  uint64_t bytes_in = 0;  // header + payload bytes of accepted messages
  uint64_t bytes_out = 0;
  uint64_t rejected = 0;  // malformed messages dropped by Receive()
  uint64_t realigned_payloads = 0;
  uint64_t shm_payloads_out = 0;  // payloads sent through shared memory
  uint64_t shm_copies = 0;        // of which were copied into the arena first
  uint64_t shm_payloads_in = 0;
};

class Socket {
 public:
  virtual ~Socket() = default;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Queues `message` for sending. ROUTER sockets need message.peer(); an unknown peer is a
  // kNetwork error naming it. Payload tensors are handed over without copying.
  virtual Status Send(OutgoingMessage message, Deadline deadline) = 0;
  // Returns the next valid message, kTimeout at the deadline, or kProtocol for a rejected one.
  virtual Result<IncomingMessage> Receive(Deadline deadline) = 0;
  // The bound or connected endpoint, with the real port.
  virtual const std::string& endpoint() const = 0;
  virtual const SocketStats& stats() const = 0;
  // Handshakes refused on a listening socket with a secret: peers that are not of the job.
  // Thread-safe (the count is kept by the transport's security thread). 0 without a secret.
  virtual uint64_t refused_handshakes() const = 0;
  // The path payloads take to `peer` (a routing id; "" on a connecting socket), as far as this
  // side knows: shared memory once both sides have mapped each other's arenas.
  virtual ConnectionPath PathTo(const std::string& peer) const = 0;

 protected:
  Socket() = default;
};

class Transport {
 public:
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // The implementation options.name names ("zmq"); kInvalidArgument naming the ones there are
  // for another name.
  static Result<std::unique_ptr<Transport>> Create(const TransportOptions& options);

  // Binds a server socket.
  virtual Result<std::unique_ptr<Socket>> Listen(const std::string& endpoint) = 0;
  // Waits until at least one of `sockets` has a message or `wake_fd` (>= 0; e.g.
  // Mailbox::wake_fd) is readable, or the deadline passes. Returns one flag per socket, plus a
  // last flag for `wake_fd`; all false on timeout. Every socket must come from this Transport.
  virtual Result<std::vector<bool>> Poll(std::span<Socket* const> sockets, int wake_fd,
                                         Deadline deadline) = 0;

  // Connects a client socket; `identity` (e.g. "worker:3") must be unique among the peers of the
  // server: a second connection with the same identity takes over from the first (so a restarted
  // worker is served at once). Connecting is asynchronous: an absent server shows up as a Receive()
  // timeout.
  virtual Result<std::unique_ptr<Socket>> Connect(const std::string& endpoint,
                                                  const std::string& identity) = 0;

  // A tensor in this process's shared-memory arena when it has one (payloads sent from there to
  // co-located peers are not copied), else on the heap. Thread-safe.
  // `alignment`: as ShmArena::Allocate (HostPageBytes() for a buffer a device will pin).
  virtual Tensor Allocate(const Shape& shape, DType dtype = DType::kFloat32,
                          size_t alignment = kTensorAlignment) = 0;

 protected:
  Transport() = default;
};

// "tcp://HOST:PORT"; port 0 means "any free port" when listening.
std::string TcpEndpoint(const std::string& host, int port);

}  // namespace towerps

#endif  // TOWERPS_COMMON_TRANSPORT_H_
