#include "launch/local_checks.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "worker/tower_devices.h"

namespace towerps::launch {
namespace {

// Binds and listens on a TCP socket at bind:port, then closes it: 0 when that worked, the
// errno when not, -1 when `bind` does not resolve.
int TryBind(const std::string& bind, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  const char* host = (bind == "*" || bind.empty()) ? nullptr : bind.c_str();
  addrinfo* found = nullptr;
  if (getaddrinfo(host, std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) {
    return -1;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, freeaddrinfo);
  const int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  if (fd < 0) return errno;
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));  // as ZeroMQ's listener does
  int error = 0;
  if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || listen(fd, 1) != 0) error = errno;
  close(fd);
  return error;
}

}  // namespace

Status CheckTowersHere(const worker::WorkerOptions& w) {
  TOWERPS_ASSIGN_OR_RETURN(const int gpu_limit, w.GpuCountLimit());
  const Result<std::vector<worker::TowerDevice>> towers =
      worker::ParseTowers(w.towers, w.allow_soft_placement, /*warnings=*/nullptr, gpu_limit);
  if (!towers.ok()) return InvalidArgumentError(towers.status().message());
  return Status::Ok();
}

Status CheckPortsFree(const std::string& bind, int base_port, int servers) {
  const int count = base_port > 0 ? servers : 1;
  for (int r = 0; r < count; ++r) {
    const int port = base_port > 0 ? base_port + r : 0;
    const int error = TryBind(bind, port);
    if (error == 0 || error == -1) continue;
    if (error == EADDRINUSE) {
      return InvalidArgumentError(
          "--base-port=" + std::to_string(base_port) + ": port " + std::to_string(port) +
          " (server " + std::to_string(r) + ") is already in use on " + bind +
          "; choose another --base-port, or 0 (the default) for free ports");
    }
    if (error == EACCES && base_port > 0) {
      return InvalidArgumentError("--base-port=" + std::to_string(base_port) + ": port " +
                                  std::to_string(port) + " cannot be bound on " + bind + ": " +
                                  std::strerror(error));
    }
    return InvalidArgumentError("--bind " + bind + ": cannot listen there (" +
                                std::strerror(error) + "); use an address of this machine");
  }
  return Status::Ok();
}

Status CheckLocalJob(const LaunchOptions& o) {
  TOWERPS_RETURN_IF_ERROR(CheckTowersHere(o.worker));
  return CheckPortsFree(o.bind, o.base_port, o.job.ServerProcesses());
}

Result<std::vector<int>> PickFreePorts(int n) {
  std::vector<int> fds, ports;
  Status status = Status::Ok();
  for (int i = 0; i < n && status.ok(); ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      status = IoError(std::string("cannot find a free port: ") + std::strerror(errno));
    } else {
      ports.push_back(ntohs(addr.sin_port));
    }
    if (fd >= 0) fds.push_back(fd);
  }
  for (int fd : fds) close(fd);  // all held at once: n different ports
  if (!status.ok()) return status;
  return ports;
}

}  // namespace towerps::launch
