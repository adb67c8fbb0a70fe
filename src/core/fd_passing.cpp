// send_fds and receive_fds (core/fd_passing.hpp).
#include "core/fd_passing.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace kernelevolve {

namespace {

// A one-byte message with room for 8 descriptors beside it (SCM_RIGHTS): what send_fds and receive_fds pass.
struct FdMessage {
  char byte = 'f';
  iovec io{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))] = {};
  msghdr msg{};
  FdMessage() {
    msg.msg_iov = &io;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

}  // namespace

bool send_fds(int socket_fd, const std::vector<int>& fds) {
  if (fds.empty() || fds.size() > 8) return false;
  FdMessage m;
  m.msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  ssize_t sent;
  while ((sent = ::sendmsg(socket_fd, &m.msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return sent == 1;
}

std::vector<int> receive_fds(int socket_fd, int timeout_ms) {
  pollfd p{socket_fd, POLLIN, 0};
  int ready;
  while ((ready = ::poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  if (ready <= 0) return {};
  FdMessage m;
  ssize_t got;
  while ((got = ::recvmsg(socket_fd, &m.msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  std::vector<int> fds;
  if (got != 1) return fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg); c; c = CMSG_NXTHDR(&m.msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    fds.resize(n);
    std::memcpy(fds.data(), CMSG_DATA(c), n * sizeof(int));
  }
  return fds;
}

}  // namespace kernelevolve
