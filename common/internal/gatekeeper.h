// Gatekeeper: who may talk to a Transport's listening sockets (docs/SECURITY.md).
//
// One per secured ZeroMQ context. It owns a thread that
//  - answers ZeroMQ's authentication requests (ZAP, inproc://zeromq.zap.01): a PLAIN peer must
//    present JobSecret::PlainPassword(); a CURVE peer must hold JobSecret::CurveClientKeys();
//  - watches the handshakes of every socket passed to Watch() (a ZeroMQ socket monitor): each
//    refused or failed handshake (wrong secret, no security, garbage) is counted on that socket,
//    and logged once per peer address.
// Peers that fail never reach Socket::Receive(): no message of theirs is decoded.
//
// Contract: Start() binds the ZAP endpoint before any secured socket exists. Watch() may be
// called from any thread; the counter it returns is updated by the gatekeeper's thread. The
// destructor stops the thread and closes its sockets; it must run before the context is closed.
#ifndef TOWERPS_COMMON_INTERNAL_GATEKEEPER_H_
#define TOWERPS_COMMON_INTERNAL_GATEKEEPER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/job_secret.h"
#include "common/mutex.h"
#include "towerps/result.h"

namespace towerps::internal {

class Gatekeeper {
 public:
  static Result<std::unique_ptr<Gatekeeper>> Start(zmq::context_t& context,
                                                   std::shared_ptr<const JobSecret> secret);
  ~Gatekeeper();
  Gatekeeper(const Gatekeeper&) = delete;
  Gatekeeper& operator=(const Gatekeeper&) = delete;

  // Counts and logs `socket`'s failed handshakes from now on; `endpoint` names it in logs.
  Result<std::shared_ptr<std::atomic<uint64_t>>> Watch(zmq::socket_t& socket,
                                                       const std::string& endpoint);

 private:
  struct Watched;
  Gatekeeper(zmq::context_t& context, std::shared_ptr<const JobSecret> secret);
  void Loop();
  void AnswerZap();
  void ReadEvent(Watched& w);

  zmq::context_t& context_;
  const std::shared_ptr<const JobSecret> secret_;
  zmq::socket_t zap_;
  Mutex mu_;
  std::vector<std::unique_ptr<Watched>> added_ GUARDED_BY(mu_);
  int next_monitor_ GUARDED_BY(mu_) = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace towerps::internal

#endif  // TOWERPS_COMMON_INTERNAL_GATEKEEPER_H_
