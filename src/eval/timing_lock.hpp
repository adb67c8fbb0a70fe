// A lock on a file that keeps one process's timing apart from another's on the same device.
#pragma once
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace kernelevolve::eval {

// Holds a flock on a file for its lifetime; a no-op for an empty path. Timing takes it exclusive;
// verification takes it shared on a CPU, so verifications overlap one another but never a timing loop (on a
// GPU, exclusive: see WorkloadRun::verify).
class TimingLock {
 public:
  explicit TimingLock(const std::string& path, bool exclusive = true) {
    if (path.empty()) return;
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666);
    if (fd_ >= 0) {
      while (::flock(fd_, exclusive ? LOCK_EX : LOCK_SH) != 0 && errno == EINTR) {
      }
    }
  }
  ~TimingLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  TimingLock(const TimingLock&) = delete;
  TimingLock& operator=(const TimingLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace kernelevolve::eval
