// SmallTmpfs: a tmpfs of a few pages mounted on a fresh directory, so that tests can fill a disk
// (ENOSPC) without touching the machine's real ones. Needs root (CAP_SYS_ADMIN), as CI runs;
// where mounting is not allowed, error() says why and the test should GTEST_SKIP with it.
//
//   SmallTmpfs fs("ckpt", 256 * 1024);
//   if (!fs.mounted()) GTEST_SKIP() << fs.error();
//   fs.FillLeaving(4096);  // the disk now has at most 4 KiB free
//
// Contract: the destructor unmounts and removes the directory. Not thread-safe.
#ifndef TOWERPS_TESTS_TESTING_SMALL_TMPFS_H_
#define TOWERPS_TESTS_TESTING_SMALL_TMPFS_H_

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace towerps::testing {

class SmallTmpfs {
 public:
  SmallTmpfs(const std::string& name, uint64_t bytes) {
    dir_ = std::filesystem::temp_directory_path() /
           ("towerps_tmpfs_" + name + "_" + std::to_string(getpid()));
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    const std::string opts = "size=" + std::to_string(bytes) + ",mode=0755";
    if (mount("tmpfs", dir_.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      error_ = "cannot mount a " + std::to_string(bytes) + "-byte tmpfs on " + dir_.string() +
               ": " + std::strerror(errno) +
               " (the disk-full tests need root with CAP_SYS_ADMIN, as CI has)";
      std::filesystem::remove(dir_, ec);
      return;
    }
    mounted_ = true;
  }
  ~SmallTmpfs() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  std::string dir() const { return dir_.string(); }
  std::string FillerPath() const { return (dir_ / "filler").string(); }

  uint64_t FreeBytes() const {
    struct statvfs st {};
    if (statvfs(dir_.c_str(), &st) != 0) return 0;
    return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  }

  // Writes "filler" until at most `leave` bytes stay free (to a page). True on success.
  bool FillLeaving(uint64_t leave) {
    const int fd = open(FillerPath().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    const std::vector<char> page(4096, 'x');
    bool ok = true;
    while (FreeBytes() > leave) {
      if (write(fd, page.data(), page.size()) <= 0) {
        ok = errno == ENOSPC;
        break;
      }
    }
    close(fd);
    return ok;
  }
  // Deletes the filler: the space comes back.
  void Free() { std::filesystem::remove(FillerPath()); }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
  std::string error_;
};

}  // namespace towerps::testing

#endif  // TOWERPS_TESTS_TESTING_SMALL_TMPFS_H_
