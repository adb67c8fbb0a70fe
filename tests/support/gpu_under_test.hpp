// The GPU a test program runs on: opened once, or null with the reason it would not open, so that the
// GPU tests can skip and say why (as they do in CI, which has no GPU).
#pragma once
#include <memory>
#include <string>

#include "kernelevolve/device.hpp"
#include "kernelevolve/error.hpp"

namespace kernelevolve::testing {

struct GpuUnderTest {
  std::shared_ptr<Device> device;
  std::string reason;  // why there is none
};

inline GpuUnderTest open_gpu(const std::string& id) {
  GpuUnderTest out;
  try {
    out.device = open_device(id);
  } catch (const Error& e) {
    out.reason = e.what();
  }
  return out;
}

}  // namespace kernelevolve::testing
