// posix_spawn and one poll loop, rather than Boost.Process: 1.74's Boost.Process needs Boost.Asio for
// writing stdin while reading two pipes under a deadline, which this does in a page.
#include "core/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace kernelevolve {

ProcessResult run_shell(const std::string& command, const std::string& input, double timeout_s,
                        std::size_t max_output) {
  ProcessResult r;
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) {
    r.start_error = std::strerror(errno);
    return r;
  }
  if (pipe2(out, O_CLOEXEC) != 0) {
    r.start_error = std::strerror(errno);
    close(in[0]), close(in[1]);
    return r;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    r.start_error = std::strerror(errno);
    close(in[0]), close(in[1]), close(out[0]), close(out[1]);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group, so a timeout kills what it started too
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    r.start_error = std::strerror(rc);
    close(in[1]), close(out[0]), close(err[0]);
    return r;
  }
  r.started = true;
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  std::size_t written = 0;
  int to_child = in[1];
  if (input.empty()) {
    close(to_child);
    to_child = -1;
  }
  int from_out = out[0], from_err = err[0];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[65536];
  while (from_out >= 0 || from_err >= 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd fds[3];
    int n = 0;
    if (to_child >= 0) fds[n++] = {to_child, POLLOUT, 0};
    if (from_out >= 0) fds[n++] = {from_out, POLLIN, 0};
    if (from_err >= 0) fds[n++] = {from_err, POLLIN, 0};
    const int ready = poll(fds, static_cast<nfds_t>(n), static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < n && ready > 0; ++i) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == to_child) {
        // The pipe is non-blocking and the command may exit without reading: send() semantics via write
        // on a pipe would raise SIGPIPE, so block it for this thread around the write.
        sigset_t pipe_set, old;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
        const ssize_t w = write(to_child, input.data() + written, input.size() - written);
        if (w < 0 && errno == EPIPE) {
          timespec zero{0, 0};
          sigtimedwait(&pipe_set, nullptr, &zero);  // consume the pending SIGPIPE
        }
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        if (w > 0) written += static_cast<std::size_t>(w);
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) {
          close(to_child);
          to_child = -1;
        }
        continue;
      }
      const bool is_out = fds[i].fd == from_out;
      std::string& sink = is_out ? r.out : r.err;
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        const std::size_t room = max_output - std::min(max_output, sink.size());
        const std::size_t kept = std::min<std::size_t>(static_cast<std::size_t>(got), room);
        sink.append(buf, kept);
        (is_out ? r.out_dropped : r.err_dropped) += static_cast<std::size_t>(got) - kept;
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(fds[i].fd);
        (is_out ? from_out : from_err) = -1;
      }
    }
  }
  if (r.timed_out) kill(-pid, SIGKILL);
  for (int fd : {to_child, from_out, from_err}) {
    if (fd >= 0) close(fd);
  }
  int status = 0;
  // The streams are closed; if the shell lingers past the deadline (a child kept them open), kill the group.
  for (;;) {
    const pid_t w = waitpid(pid, &status, r.timed_out ? 0 : WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (w == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        r.timed_out = true;
        kill(-pid, SIGKILL);
      } else {
        poll(nullptr, 0, 5);
      }
    }
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace kernelevolve
