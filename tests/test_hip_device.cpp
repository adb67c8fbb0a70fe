// HipDevice: no AMD GPU has been available to this project, so what is tested is that the backend is
// built in and reports itself absent cleanly. With a HIP GPU present, the basic compile-and-launch test runs.
#include <doctest/doctest.h>

#include <kernelevolve/device.hpp>
#include <kernelevolve/error.hpp>

#include <string>
#include <vector>

#include "support/gpu_under_test.hpp"

namespace ke = kernelevolve;

namespace {

const ke::testing::GpuUnderTest& gpu() {
  static const ke::testing::GpuUnderTest g = ke::testing::open_gpu("hip:0");
  return g;
}

const bool kNoGpu = !gpu().device;

}  // namespace

TEST_CASE("hip: whether the GPU tests run") {
  if (kNoGpu) MESSAGE("skipped: no HIP device: " << gpu().reason);
  CHECK(true);
}

TEST_CASE("hip: without an AMD GPU, opening one fails cleanly and none is listed" * doctest::skip(!kNoGpu)) {
  for (const char* id : {"hip", "hip:0", "hip:3"}) {
    CAPTURE(id);
    try {
      ke::open_device(id);
      FAIL("open_device succeeded without a HIP GPU");
    } catch (const ke::Error& e) {
      CHECK(e.code() == ke::ErrorCode::DeviceUnavailable);
      CHECK(e.exit_code() == 3);
      const std::string message = e.what();
      CHECK(message.find("hip:") != std::string::npos);
      CHECK(message.size() > 20);
    }
  }
  for (const auto& d : ke::list_devices()) CHECK(d.kind != "hip");
}

TEST_CASE("hip: compile and launch a kernel" * doctest::skip(kNoGpu)) {
  auto& device = *gpu().device;
  ke::KernelSource ks;
  ks.source = R"(
#include <hip/hip_runtime.h>
extern "C" __global__ void twice(const float* x, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
)";
  ks.language = ke::Language::hip;
  ks.entry = "twice";
  const ke::CompileResult c = device.compile(ks);
  REQUIRE_MESSAGE(c.ok(), c.log);
  const long long n = 4096;
  std::vector<float> x(n, 1.5f), y(n, 0.f);
  auto bx = device.allocate(n * 4), by = device.allocate(n * 4);
  bx->upload(x.data(), n * 4);
  void* px = bx->data();
  void* py = by->data();
  void* args[] = {&px, &py, const_cast<long long*>(&n)};
  ke::LaunchDims dims;
  dims.grid[0] = n / 256;
  dims.block[0] = 256;
  const ke::LaunchResult r = device.launch(*c.kernel, args, dims, true, true);
  REQUIRE_MESSAGE(r.ok, r.error);
  by->download(y.data(), n * 4);
  CHECK(y[0] == 3.f);
  CHECK(y[n - 1] == 3.f);
}
