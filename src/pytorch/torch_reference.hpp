// The reference of a PyTorch problem, as the evaluator's reference device: PyTorch runs the module in a
// process of its own (the bridge, started while the worker is still unconfined), on tensors that view
// memory both processes map — one arena, sized for the largest workload, so no trial copies through a
// pipe. On the CPU the arena is a memfd; on a CUDA GPU it is the candidate device's own memory, exported
// with CUDA IPC and opened by the bridge, so the reference's buffers are that device's buffers and
// inputs and outputs never cross the bus. Buffers are carved from the arena; a launch is one "run"
// request. The evaluator also asks it for the problem's own inputs (get_inputs() under a seed): draw().
//
// It also runs the baselines: a candidate of language `pytorch` whose source is "eager" or "compile"
// compiles to the module itself (or under torch.compile), and a timed launch is timed by the bridge with
// the device's clock (CUDA events after an L2 flush on a GPU, the steady clock on the CPU).
#pragma once
#include <map>
#include <memory>
#include <mutex>

#include "kernelevolve/device.hpp"
#include "kernelevolve/spec.hpp"
#include "pytorch/python.hpp"
#include "pytorch/shared_bridge.hpp"

namespace kernelevolve::pytorch {

class TorchReference final : public Device {
 public:
  // `candidate_device` is where candidates run; the reference runs on the same device (the CPU or a CUDA GPU).
  TorchReference(const Spec& spec, std::shared_ptr<Device> candidate_device);
  // A worker's view of a bridge it shares with the other workers of its device (SharedBridge): it talks to
  // it on `shared.socket_fd` and opens the arena itself; it holds the arena from an evaluation's first
  // allocation to its last buffer's release. Takes the descriptors.
  TorchReference(const Spec& spec, std::shared_ptr<Device> candidate_device, const SharedArena& shared);
  ~TorchReference() override;

  const DeviceInfo& info() override;
  // The module itself (the bridge has loaded it): the reference, or for a `pytorch` source "eager" or
  // "compile", a baseline. A baseline this PyTorch cannot run (torch.compile before 2.0) fails to compile.
  CompileResult compile(const KernelSource& source) override;
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override;
  LaunchResult launch(Kernel& kernel, void** args, const LaunchDims& dims, bool timed = false,
                      bool flush_cache = false) override;
  bool healthy() const override;
  // Verification runs where the buffers live: on a GPU the arena is the candidate device's memory.
  bool fill_random(Buffer& buffer, DType dtype, std::size_t count, const InputDist& dist, std::uint64_t seed) override;
  bool compare(const Buffer& got, const Buffer& expected, DType dtype, std::size_t count, const Tolerance& tol,
               Comparison& result) override;
  bool digest(const Buffer& buffer, std::size_t bytes, std::uint64_t& result) override;
  // True when the reference's buffers are the candidate device's own (a GPU arena): outputs are compared
  // in place instead of copied over.
  bool shares_candidate_memory() const { return device_arena_ != nullptr; }
  // The arena's size: MemoryFootprint::arena_bytes (fitness.hpp).
  std::size_t arena_bytes() const { return arena_bytes_; }
  // Whether the bridge and the arena are shared with other workers.
  bool shared() const { return socket_ >= 0; }

  // Writes get_inputs() under `seed` into the input buffers of `args` (the launch's layout) and the
  // module's weights into its weight buffers. Throws Error(BadSpec) when the module fails or its shapes
  // are not the spec's.
  void draw(void** args, std::uint64_t seed);
  // The reference again, in float64, on the inputs of `args` (the launch's layout), its outputs rounded once
  // into their buffers: the exact answer that a float32 reference only approximates. "" or why it could not
  // run (a module that will not run in float64, no memory for the copies).
  std::string run_float64(void** args);
  // Each float input's and weight's [mean - std, mean + std] as the last draw() gave them, by param name: the
  // problem's own scale, at which the evaluator draws its later trials.
  const std::map<std::string, std::pair<double, double>>& ranges() const { return ranges_; }

 private:
  void describe_device();
  void open_host_arena();
  void map_host_arena();
  // One request line to the bridge, its reply line back (the bridge of our own, or the shared one's socket).
  std::string request(const std::string& line);
  std::string views_request(void** args, bool outputs) const;
  std::size_t offset_of(const void* data) const;
  // Sends a request; returns why it failed, or empty. The reply line goes to `reply` when given.
  std::string ask(const std::string& request, std::string* reply = nullptr);

  Spec spec_;
  std::shared_ptr<Device> candidate_device_;
  DeviceInfo info_;
  int arena_fd_ = -1;
  std::map<std::string, std::pair<double, double>> ranges_;  // of the last draw()
  std::unique_ptr<Buffer> device_arena_;                     // the GPU arena; null on the CPU
  unsigned char* arena_ = nullptr;
  std::size_t arena_bytes_ = 0;
  std::size_t arena_used_ = 0;
  std::size_t high_water_ = 0;  // of arena_used_, since the arena was last all free
  int live_buffers_ = 0;
  std::mutex mutex_;
  std::unique_ptr<BridgeProcess> bridge_;
  int socket_ = -1;       // to a shared bridge
  std::string pending_;   // what arrived on socket_ past the last reply
  bool holding_ = false;  // the shared arena, acquired for the evaluation under way
  friend class ArenaBuffer;
  void release(std::size_t bytes);
};

}  // namespace kernelevolve::pytorch
