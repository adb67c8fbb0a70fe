// The reference of a PyTorch problem, as the evaluator's reference device: PyTorch runs the module in a
// process of its own (the bridge, started while the worker is still unconfined), on tensors that view
// memory both processes map — one arena, sized for the largest workload, so no trial copies through a
// pipe. Buffers are carved from the arena; a launch is one "run" request. The evaluator also asks it for
// the problem's own inputs (get_inputs() under a seed): draw().
#pragma once
#include <memory>
#include <mutex>

#include "kernelevolve/device.hpp"
#include "kernelevolve/spec.hpp"
#include "pytorch/python.hpp"

namespace kernelevolve::pytorch {

class TorchReference final : public Device {
 public:
  // `candidate_device` is where candidates run; the reference runs on the same kind (the CPU for now).
  TorchReference(const Spec& spec, std::shared_ptr<Device> candidate_device);
  ~TorchReference() override;

  const DeviceInfo& info() override;
  // The module itself (the bridge has loaded it): `source` is not compiled.
  CompileResult compile(const KernelSource& source) override;
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override;
  LaunchResult launch(Kernel& kernel, void** args, const LaunchDims& dims, bool timed = false,
                      bool flush_cache = false) override;

  // Writes get_inputs() under `seed` into the input buffers of `args` (the launch's layout) and the
  // module's weights into its weight buffers. Throws Error(BadSpec) when the module fails or its shapes
  // are not the spec's.
  void draw(void** args, std::uint64_t seed);

 private:
  std::string views_request(void** args, bool outputs) const;
  std::string ask(const std::string& request);

  Spec spec_;
  std::shared_ptr<Device> candidate_device_;
  DeviceInfo info_;
  int arena_fd_ = -1;
  unsigned char* arena_ = nullptr;
  std::size_t arena_bytes_ = 0;
  std::size_t arena_used_ = 0;
  int live_buffers_ = 0;
  std::mutex mutex_;
  std::unique_ptr<BridgeProcess> bridge_;
  friend class ArenaBuffer;
  void release(std::size_t bytes);
};

}  // namespace kernelevolve::pytorch
