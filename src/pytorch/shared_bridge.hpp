// A PyTorch reference that the workers of one device share: one bridge process and one arena for all of
// them, where each would otherwise hold its own (3 P each: the arena's two blocks and the bridge's tensors).
// The host starts it and hands each worker a socket to it; each worker opens the arena itself (a memfd on
// the CPU; on a GPU, device memory the bridge allocated, over CUDA IPC). The arena holds one evaluation's
// blocks at a time, so a worker acquires it for a workload and yields it after; a worker that dies gives
// it up by dying (the bridge sees its socket close). Verification and timing on a GPU hold the device alone
// anyway: what sharing costs is that allocation and the problem's own draw wait their turn too.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "kernelevolve/device.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve::pytorch {

class BridgeProcess;

// What a worker needs to use a shared bridge: the arena as the host describes it (ipc_handle, bytes: the
// "bridge" frame), and the descriptors it receives beside it (socket_fd, memfd).
struct SharedArena {
  int socket_fd = -1;      // the worker's socket to the bridge
  int memfd = -1;          // the arena on the CPU; -1 on a GPU
  std::string ipc_handle;  // the arena on a GPU: its CUDA IPC handle in hex
  std::size_t bytes = 0;
};

class SharedBridge {
 public:
  // Starts the bridge for `spec` beside `device` (the CPU or a CUDA GPU) with an arena for one evaluation.
  // Throws Error(BadSpec) when the module does not load, Error(DeviceUnavailable) when the device cannot
  // share memory.
  SharedBridge(const Spec& spec, const DeviceInfo& device);
  ~SharedBridge();
  SharedBridge(const SharedBridge&) = delete;
  SharedBridge& operator=(const SharedBridge&) = delete;

  // A new worker's socket to the bridge: the worker's end (the caller hands it to the worker and closes it
  // here). Throws Error(Internal) when the bridge has ended.
  int connect();
  // The arena as a worker opens it, less the descriptors (connect(), memfd()), which it receives apart.
  SharedArena arena() const;
  // What the bridge last wrote to its standard error (a reference that crashed says why there).
  std::string error_tail() const;
  int memfd() const { return memfd_; }
  std::size_t arena_bytes() const { return arena_bytes_; }

 private:
  std::mutex mutex_;
  std::unique_ptr<BridgeProcess> bridge_;
  int control_ = -1;  // the host's end of the control socket, over which sockets go to the bridge
  int memfd_ = -1;
  std::string ipc_handle_;
  std::size_t arena_bytes_ = 0;
};

// The "bridge" frame's arena and back: ipc_handle and bytes (descriptors travel beside it, not in it).
std::string to_json(const SharedArena& arena);
SharedArena shared_arena_from_json(const std::string& json);

}  // namespace kernelevolve::pytorch
