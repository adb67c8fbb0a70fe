#include "core/script_process.hpp"

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
#include <cstring>

#include "kernelevolve/error.hpp"

extern char** environ;

namespace kernelevolve {

ScriptChild spawn_script(const std::string& python, const PythonProgram& program, const std::vector<std::string>& args,
                         const std::vector<int>& fds) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw Error(ErrorCode::Internal, std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]);
    throw Error(ErrorCode::Internal, std::string("pipe: ") + std::strerror(errno));
  }
  const int err = ::memfd_create("kernelevolve-script-stderr", MFD_CLOEXEC);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  if (err >= 0) posix_spawn_file_actions_adddup2(&fa, err, 2);
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (fds[i] >= 0) posix_spawn_file_actions_adddup2(&fa, fds[i], 3 + static_cast<int>(i));
  }
  // A package's files, and a script over 128 KiB (Linux takes no single argument longer: MAX_ARG_STRLEN), are read
  // from a memory file the child inherits past the caller's fds, by a short `-c`: the package's bootstrap, or one that
  // runs the script as `-c` would have (in __main__, with the same sys.argv).
  const std::string& script = program.script();
  const int child_fd = 3 + static_cast<int>(fds.size());
  std::string payload, bootstrap;
  if (const PythonPackage* package = program.package()) {
    payload = package_payload(*package);
    bootstrap = package_bootstrap(*package, child_fd);
  } else if (script.size() > kLongScript) {
    payload = script;
    bootstrap = "import os\nwith os.fdopen(" + std::to_string(child_fd) +
                ", 'rb') as _f:\n    _s = _f.read()\nexec(compile(_s, '<string>', 'exec'))\n";
  }
  int script_fd = -1;
  if (!bootstrap.empty()) {
    script_fd = ::memfd_create("kernelevolve-script", MFD_CLOEXEC);
    bool written = script_fd >= 0;
    for (std::size_t done = 0; written && done < payload.size();) {
      const ssize_t n = ::write(script_fd, payload.data() + done, payload.size() - done);
      if (n < 0 && errno == EINTR) continue;
      written = n > 0;
      if (written) done += static_cast<std::size_t>(n);
    }
    if (!written || ::lseek(script_fd, 0, SEEK_SET) != 0) {
      const std::string why = std::strerror(errno);
      if (script_fd >= 0) ::close(script_fd);
      ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
      if (err >= 0) ::close(err);
      posix_spawn_file_actions_destroy(&fa);
      const std::string what = program.package() ? std::string("the package ") + program.package()->name : "a script";
      throw Error(ErrorCode::Internal,
                  "cannot hand " + what + " of " + std::to_string(payload.size()) + " bytes to " + python + ": " + why);
    }
    posix_spawn_file_actions_adddup2(&fa, script_fd, child_fd);
  }
  std::vector<std::string> argv_text = {python, "-c", script_fd >= 0 ? bootstrap : script};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, python.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  if (script_fd >= 0) ::close(script_fd);
  if (rc != 0) {
    ::close(in[1]), ::close(out[0]);
    if (err >= 0) ::close(err);
    throw Error(ErrorCode::DeviceUnavailable, "cannot start " + python + ": " + std::strerror(rc));
  }
  return {pid, in[1], out[0], err};
}

std::string stderr_tail(int fd, std::size_t keep) {
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

std::string run_script(const std::string& python, const PythonProgram& program, const std::vector<std::string>& args,
                       double timeout_s, const std::string& what) {
  ScriptChild s = spawn_script(python, program, args, {});
  ::close(s.to);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
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
  const std::string err = stderr_tail(s.err);
  if (s.err >= 0) ::close(s.err);
  if (timed_out) {
    throw Error(ErrorCode::Internal, what + " did not finish within " + std::to_string(static_cast<int>(timeout_s)) +
                                         " s (" + python + ")" + (err.empty() ? "" : ":\n" + err));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFSIGNALED(status)
                                ? std::string("was killed by signal ") + std::to_string(WTERMSIG(status))
                                : "exited with status " + std::to_string(WEXITSTATUS(status));
    throw Error(ErrorCode::Internal, what + " (" + python + ") " + how + (err.empty() ? "" : ":\n" + err));
  }
  return out;
}

ScriptProcess::ScriptProcess(const std::string& python, const PythonProgram& program,
                             const std::vector<std::string>& args, const std::vector<int>& fds, std::string what)
    : what_(std::move(what)) {
  ScriptChild s = spawn_script(python, program, args, fds);
  pid_ = s.pid, to_ = s.to, from_ = s.from, err_ = s.err;
}

ScriptProcess::~ScriptProcess() {
  if (to_ >= 0) ::close(to_);  // end of input: the script's loop ends
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

std::string ScriptProcess::error_tail() const { return stderr_tail(err_); }

void ScriptProcess::ended(const std::string& how) const {
  const std::string err = error_tail();
  throw Error(ErrorCode::Internal, what_ + " " + how + (err.empty() ? std::string() : ":\n" + err));
}

std::string ScriptProcess::read_line(double timeout_s) {
  if (!alive_) ended("is no longer usable");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    if (const auto nl = pending_.find('\n'); nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    if (timeout_s > 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      pollfd p{from_, POLLIN, 0};
      const int ready = left > 0 ? ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000))) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        if (left > 0) continue;
        alive_ = false;  // a late reply would answer the next request
        ended("did not answer within " + std::to_string(static_cast<int>(timeout_s)) + " s");
      }
    }
    char buf[65536];
    const ssize_t n = ::read(from_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      alive_ = false;
      ended("ended");
    }
    pending_.append(buf, static_cast<std::size_t>(n));
  }
}

std::string ScriptProcess::greeting(double timeout_s) { return read_line(timeout_s); }

std::string ScriptProcess::request(const std::string& line, double timeout_s) {
  if (!alive_) ended("is no longer usable");
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
  if (broken) {
    alive_ = false;
    ended("ended");
  }
  return read_line(timeout_s);
}

}  // namespace kernelevolve
