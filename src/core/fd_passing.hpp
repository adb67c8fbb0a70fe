// Descriptors passed between processes over a Unix socket (SCM_RIGHTS): how the evaluator hands a worker its
// socket to the shared PyTorch bridge and the arena's memory, and how the shared bridge gets each new socket.
#pragma once
#include <vector>

namespace kernelevolve {

// Passes descriptors over a Unix socket (SCM_RIGHTS, with one byte); false if the peer is gone.
bool send_fds(int socket_fd, const std::vector<int>& fds);
// Receives what send_fds sent, waiting at most timeout_ms; empty on failure.
std::vector<int> receive_fds(int socket_fd, int timeout_ms);

}  // namespace kernelevolve
