#include "pytorch/shared_bridge.hpp"

#include <simdjson.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/fd_passing.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/json.hpp"
#include "pytorch/python.hpp"

namespace kernelevolve::pytorch {

SharedBridge::SharedBridge(const Spec& spec, const DeviceInfo& device) {
  if (device.kind != "cpu" && device.kind != "cuda") {
    throw Error(ErrorCode::DeviceUnavailable, spec.path + ": a PyTorch reference runs beside the CPU or a CUDA GPU; " +
                                                  device.id + " is " + device.kind);
  }
  arena_bytes_ = std::max<std::size_t>(memory_footprint(spec, device, true).arena_bytes, 64);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    throw Error(ErrorCode::Internal, std::string("socketpair: ") + std::strerror(errno));
  }
  control_ = sv[0];
  std::vector<std::string> args{"serve",   "--module",      spec.reference.file,          "--device",
                                device.id, "--arena-bytes", std::to_string(arena_bytes_), "--control-fd",
                                "3"};
  const std::vector<std::string> variant = bridge_problem_args(spec);
  args.insert(args.end(), variant.begin(), variant.end());
  std::vector<int> fds{sv[1]};
  if (device.kind == "cpu") {
    memfd_ = ::memfd_create("kernelevolve-pytorch-arena", MFD_CLOEXEC);
    if (memfd_ < 0 || ::ftruncate(memfd_, static_cast<off_t>(arena_bytes_)) != 0) {
      ::close(sv[1]);
      throw Error(ErrorCode::Internal, std::string("the PyTorch reference's shared memory: ") + std::strerror(errno));
    }
    fds.push_back(memfd_);
    args.insert(args.end(), {"--arena-fd", "4"});
  } else {
    args.push_back("--arena-alloc");
  }
  try {
    bridge_ = std::make_unique<BridgeProcess>(args, fds);
  } catch (...) {
    ::close(sv[1]);
    throw;
  }
  ::close(sv[1]);
  const std::string hello = bridge_->greeting();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  bool ok = false;
  if (parser.parse(hello).get(doc) != simdjson::SUCCESS || doc["ok"].get(ok) != simdjson::SUCCESS || !ok) {
    throw Error(ErrorCode::BadSpec,
                spec.path + ": reference: the PyTorch module does not load: " + hello + "\n" + bridge_->error_tail());
  }
  if (device.kind != "cpu") {
    std::string_view handle;
    if (doc["arena_ipc"].get(handle) != simdjson::SUCCESS) {
      throw Error(ErrorCode::DeviceUnavailable,
                  device.id + ": the PyTorch reference process shared no arena: " + hello);
    }
    ipc_handle_ = handle;
  }
}

SharedBridge::~SharedBridge() {
  bridge_.reset();  // its end of input ends it (then SIGKILL): the arena it allocated goes with it
  if (control_ >= 0) ::close(control_);
  if (memfd_ >= 0) ::close(memfd_);
}

int SharedBridge::connect() {
  std::lock_guard lock(mutex_);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    throw Error(ErrorCode::Internal, std::string("socketpair: ") + std::strerror(errno));
  }
  // The bridge's end goes over the control socket; the bridge reads it at once.
  const bool sent = send_fds(control_, {sv[1]});
  const int saved = errno;
  ::close(sv[1]);
  if (!sent) {
    ::close(sv[0]);
    throw Error(ErrorCode::Internal, std::string("the shared PyTorch reference process has ended (") +
                                         std::strerror(saved) + ")\n" + bridge_->error_tail());
  }
  return sv[0];
}

std::string SharedBridge::error_tail() const { return bridge_ ? bridge_->error_tail() : std::string(); }

SharedArena SharedBridge::arena() const {
  SharedArena a;
  a.ipc_handle = ipc_handle_;
  a.bytes = arena_bytes_;
  return a;
}

std::string to_json(const SharedArena& a) {
  return "{\"ipc\": " + json_quote(a.ipc_handle) + ", \"bytes\": " + std::to_string(a.bytes) + "}";
}

SharedArena shared_arena_from_json(const std::string& json) {
  SharedArena a;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) throw Error(ErrorCode::Internal, "bad shared bridge: " + json);
  std::uint64_t bytes = 0;
  std::string_view ipc;
  if (doc["bytes"].get(bytes) != simdjson::SUCCESS || doc["ipc"].get(ipc) != simdjson::SUCCESS) {
    throw Error(ErrorCode::Internal, "bad shared bridge: " + json);
  }
  a.bytes = bytes;
  a.ipc_handle = ipc;
  return a;
}

}  // namespace kernelevolve::pytorch
