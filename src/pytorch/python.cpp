#include "pytorch/python.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kernelevolve/error.hpp"

extern char** environ;

namespace kernelevolve::pytorch {

namespace {

struct Spawned {
  pid_t pid = -1;
  int to = -1, from = -1, err = -1;
};

// stdin and stdout are pipes, stderr an anonymous file (read back for messages, never blocking the child).
Spawned spawn(const std::string& python, const std::vector<std::string>& args, int shared_fd) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw Error(ErrorCode::Internal, std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]);
    throw Error(ErrorCode::Internal, std::string("pipe: ") + std::strerror(errno));
  }
  const int err = ::memfd_create("kernelevolve-pytorch-stderr", MFD_CLOEXEC);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  if (err >= 0) posix_spawn_file_actions_adddup2(&fa, err, 2);
  if (shared_fd >= 0) posix_spawn_file_actions_adddup2(&fa, shared_fd, 3);
  std::vector<std::string> argv_text = {python, "-c", kBridgeScript};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, python.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]), ::close(out[0]);
    if (err >= 0) ::close(err);
    throw Error(ErrorCode::DeviceUnavailable, "cannot start " + python + ": " + std::strerror(rc));
  }
  return {pid, in[1], out[0], err};
}

std::string tail_of(int fd, std::size_t keep = 4000) {
  if (fd < 0) return {};
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size <= 0) return {};
  const off_t from = size > static_cast<off_t>(keep) ? size - static_cast<off_t>(keep) : 0;
  std::string text(static_cast<std::size_t>(size - from), '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), from);
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// Whether `python` runs and imports torch (a few seconds: torch's import).
bool imports_torch(const std::string& python) {
  try {
    Spawned s = spawn(python, {"probe"}, -1);
    ::close(s.to);
    ::close(s.from);
    if (s.err >= 0) ::close(s.err);
    int status = 0;
    while (::waitpid(s.pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

std::string find_python() {
  static std::mutex mutex;
  static std::string found;
  std::lock_guard lock(mutex);
  if (!found.empty()) return found;
  std::vector<std::string> tried;
  if (const char* env = std::getenv("KE_PYTHON"); env && *env) {
    if (imports_torch(env)) return found = env;
    throw Error(ErrorCode::DeviceUnavailable,
                std::string("KE_PYTHON=") + env + " does not run, or does not import torch: a PyTorch problem needs it");
  }
  for (const char* candidate : {"python3", "/usr/bin/python3"}) {
    tried.push_back(candidate);
    if (imports_torch(candidate)) return found = candidate;
  }
  throw Error(ErrorCode::DeviceUnavailable,
              "no Python that imports torch was found (tried python3 on PATH and /usr/bin/python3): a PyTorch problem "
              "runs its reference with PyTorch. Install it (Debian: apt-get install python3-torch), or name an "
              "interpreter with KE_PYTHON");
}

std::string run_bridge(const std::vector<std::string>& args, double timeout_s) {
  const std::string python = find_python();
  Spawned s = spawn(python, args, -1);
  ::close(s.to);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{s.from, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buf[65536];
    const ssize_t n = ::read(s.from, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  if (timed_out) ::kill(s.pid, SIGKILL);
  ::close(s.from);
  int status = 0;
  while (::waitpid(s.pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string err = tail_of(s.err);
  if (s.err >= 0) ::close(s.err);
  if (timed_out) {
    throw Error(ErrorCode::Internal, "the PyTorch module did not finish within " + std::to_string(static_cast<int>(timeout_s)) +
                                         " s (" + python + ")" + (err.empty() ? "" : ":\n" + err));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFSIGNALED(status) ? std::string("was killed by signal ") + std::to_string(WTERMSIG(status))
                                                : "exited with status " + std::to_string(WEXITSTATUS(status));
    throw Error(ErrorCode::Internal, "the PyTorch bridge (" + python + ") " + how + (err.empty() ? "" : ":\n" + err));
  }
  return out;
}

BridgeProcess::BridgeProcess(const std::vector<std::string>& args, int shared_fd) {
  Spawned s = spawn(find_python(), args, shared_fd);
  pid_ = s.pid, to_ = s.to, from_ = s.from, err_ = s.err;
}

BridgeProcess::~BridgeProcess() {
  if (to_ >= 0) ::close(to_);  // end of input: the bridge's loop ends
  if (from_ >= 0) ::close(from_);
  if (pid_ > 0) {
    // A confined worker may not signal or wait; its child then ends at end of input, or with the worker.
    if (::kill(pid_, SIGKILL) == 0) {
      while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
  if (err_ >= 0) ::close(err_);
}

std::string BridgeProcess::error_tail() const { return tail_of(err_); }

std::string BridgeProcess::read_line() {
  for (;;) {
    if (const auto nl = pending_.find('\n'); nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    char buf[65536];
    const ssize_t n = ::read(from_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string err = error_tail();
      throw Error(ErrorCode::Internal, "the PyTorch reference process ended" + (err.empty() ? std::string() : ":\n" + err));
    }
    pending_.append(buf, static_cast<std::size_t>(n));
  }
}

std::string BridgeProcess::greeting() { return read_line(); }

std::string BridgeProcess::request(const std::string& line) {
  std::string text = line + "\n";
  std::size_t done = 0;
  // A process that has died makes the write fail with EPIPE; the SIGPIPE it raises must not end the caller.
  sigset_t pipe_signal, old_mask;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &old_mask);
  bool broken = false;
  while (done < text.size()) {
    const ssize_t n = ::write(to_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      broken = true;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (broken) {
    const timespec now{0, 0};
    while (sigtimedwait(&pipe_signal, nullptr, &now) == SIGPIPE) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  {
    if (broken) {
      const std::string err = error_tail();
      throw Error(ErrorCode::Internal, "the PyTorch reference process ended" + (err.empty() ? std::string() : ":\n" + err));
    }
  }
  return read_line();
}

}  // namespace kernelevolve::pytorch
