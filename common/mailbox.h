// Mailbox<T>: a multi-producer queue whose consumer can wait on it alone (WaitPop) or, through
// wake_fd(), together with sockets in Transport::Poll.
//
// Contract: thread-safe. Push never blocks (the queue is unbounded; producers bound themselves).
// The eventfd is readable while items may be pending; DrainAll() clears it. A mailbox made
// without one (a consumer that only WaitPops) costs no system call per Push.
#ifndef TOWERPS_COMMON_MAILBOX_H_
#define TOWERPS_COMMON_MAILBOX_H_

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "common/deadline.h"
#include "common/mutex.h"
#include "towerps/check.h"

namespace towerps {

template <typename T>
class Mailbox {
 public:
  explicit Mailbox(bool wake_fd = true)
      : fd_(wake_fd ? eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) : -1) {
    TOWERPS_CHECK(!wake_fd || fd_ >= 0) << "eventfd failed";
  }
  ~Mailbox() {
    if (fd_ >= 0) close(fd_);
  }
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  void Push(T item) {
    {
      MutexLock lock(&mu_);
      items_.push_back(std::move(item));
    }
    cv_.Signal();
    Wake();
  }

  // Adds `items` at once: a DrainAll takes all of them or none.
  void PushAll(std::vector<T> items) {
    if (items.empty()) return;
    {
      MutexLock lock(&mu_);
      for (T& item : items) items_.push_back(std::move(item));
    }
    cv_.Signal();
    Wake();
  }

  // Takes every pending item (possibly none) and clears the eventfd.
  std::vector<T> DrainAll() {
    uint64_t count;
    ssize_t n = fd_ >= 0 ? read(fd_, &count, sizeof(count)) : 0;
    (void)n;
    MutexLock lock(&mu_);
    std::vector<T> out(std::make_move_iterator(items_.begin()),
                       std::make_move_iterator(items_.end()));
    items_.clear();
    return out;
  }

  // Waits for one item until the deadline; nullopt on timeout.
  std::optional<T> WaitPop(Deadline deadline) {
    MutexLock lock(&mu_);
    while (items_.empty()) {
      if (!cv_.WaitUntil(&mu_, deadline.when()) && items_.empty()) return std::nullopt;
    }
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

  // The first item, if there is one, without waiting.
  std::optional<T> TryPop() {
    MutexLock lock(&mu_);
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

  // For Transport::Poll; -1 for a mailbox made without one.
  int wake_fd() const { return fd_; }

 private:
  void Wake() {
    if (fd_ < 0) return;
    const uint64_t one = 1;
    ssize_t n = write(fd_, &one, sizeof(one));
    (void)n;  // EAGAIN only when the counter is saturated, which still means "readable"
  }

  const int fd_;
  Mutex mu_;
  CondVar cv_;
  std::deque<T> items_ GUARDED_BY(mu_);
};

// HeldPushes<T>: one producer's pushes to a mailbox, held until Flush() hands them over together
// (one wake of the consumer for many items). A shard holds its replies until it would wait, so
// that a bundle's parts, handled one after another, wake the server's I/O thread once (or, on
// the I/O thread itself, make one drain). Contract: one thread's; Flush() before that thread
// waits, so nothing is held meanwhile.
template <typename T>
class HeldPushes {
 public:
  // At most `most` items are held: the one that fills it flushes them.
  explicit HeldPushes(Mailbox<T>* to, size_t most = 64) : to_(to), most_(most) {}
  void Push(T item) {
    held_.push_back(std::move(item));
    if (held_.size() >= most_) Flush();
  }
  void Flush() {
    to_->PushAll(std::move(held_));
    held_.clear();
  }

 private:
  Mailbox<T>* const to_;
  const size_t most_;
  std::vector<T> held_;
};

}  // namespace towerps

#endif  // TOWERPS_COMMON_MAILBOX_H_
