// HipDevice: see hip_device.hpp. Buffers, modules, launches, timing and the ceilings are the GPU core's
// (devices/gpu/gpu_device.hpp), as for CudaDevice; what is HIP's own is here: the HIP runtime as a
// gpu::Driver, the device's description, and hiprtc.
#include "devices/hip/hip_device.hpp"

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "devices/gpu/common.hpp"
#include "devices/gpu/gpu_device.hpp"
#include "devices/hip/hip_api.hpp"
#include "kernelevolve/error.hpp"

namespace kernelevolve {

using namespace hip;

namespace hip_detail {
namespace {

void* address(gpu::DevicePtr p) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)); }

// The HIP runtime as the GPU core's Driver: one GPU (made current with hipSetDevice), one non-blocking
// stream and two events on it.
class HipDriver final : public gpu::Driver {
 public:
  // Creates the stream and events; throws Error(DeviceUnavailable) saying which call failed (what was made
  // by then is released).
  static std::unique_ptr<HipDriver> open(const Api* api, int index) {
    auto d = std::unique_ptr<HipDriver>(new HipDriver(*api, index));
    auto require = [&](const char* call, hipError_t r) {
      if (r != hipSuccess)
        throw Error(ErrorCode::DeviceUnavailable,
                    "device 'hip:" + std::to_string(index) + "': " + call + ": " + hip::error_text(*api, r));
    };
    require("hipSetDevice", api->hipSetDevice(index));
    require("hipStreamCreateWithFlags", api->hipStreamCreateWithFlags(&d->stream_, hipStreamNonBlocking));
    require("hipEventCreate", api->hipEventCreate(&d->start_));
    require("hipEventCreate", api->hipEventCreate(&d->stop_));
    return d;
  }
  ~HipDriver() override {
    api_.hipSetDevice(index_);
    if (start_) api_.hipEventDestroy(start_);
    if (stop_) api_.hipEventDestroy(stop_);
    if (stream_) api_.hipStreamDestroy(stream_);
  }

  void make_current() override { api_.hipSetDevice(index_); }
  std::string error_text(int code) const override { return hip::error_text(api_, code); }
  bool is_sticky(int code) const override { return hip::is_sticky(code); }
  bool is_benign(int code) const override {
    return code == hipErrorInvalidValue || code == hipErrorOutOfMemory || code == hipErrorLaunchOutOfResources;
  }
  gpu::Status synchronize_device() override { return {api_.hipDeviceSynchronize(), "hipDeviceSynchronize"}; }
  gpu::Status synchronize() override { return {api_.hipStreamSynchronize(stream_), "hipStreamSynchronize"}; }
  gpu::Status allocate(gpu::DevicePtr& ptr, std::size_t bytes) override {
    void* p = nullptr;
    const hipError_t r = api_.hipMalloc(&p, bytes);
    ptr = static_cast<gpu::DevicePtr>(reinterpret_cast<std::uintptr_t>(p));
    return {r, "hipMalloc"};
  }
  void free(gpu::DevicePtr ptr) override { api_.hipFree(address(ptr)); }
  gpu::Status copy_to_device(gpu::DevicePtr dst, const void* src, std::size_t bytes) override {
    return {api_.hipMemcpyHtoDAsync(address(dst), const_cast<void*>(src), bytes, stream_), "hipMemcpyHtoDAsync"};
  }
  gpu::Status copy_to_host(void* dst, gpu::DevicePtr src, std::size_t bytes) override {
    return {api_.hipMemcpyDtoHAsync(dst, address(src), bytes, stream_), "hipMemcpyDtoHAsync"};
  }
  gpu::Status copy_on_device(gpu::DevicePtr dst, gpu::DevicePtr src, std::size_t bytes) override {
    return {api_.hipMemcpyDtoDAsync(address(dst), address(src), bytes, stream_), "hipMemcpyDtoDAsync"};
  }
  gpu::Status set(gpu::DevicePtr dst, std::uint32_t value, int element_bytes, std::size_t count) override {
    if (element_bytes == 1)
      return {api_.hipMemsetD8Async(address(dst), static_cast<unsigned char>(value), count, stream_),
              "hipMemsetD8Async"};
    if (element_bytes == 2)
      return {api_.hipMemsetD16Async(address(dst), static_cast<unsigned short>(value), count, stream_),
              "hipMemsetD16Async"};
    return {api_.hipMemsetD32Async(address(dst), static_cast<int>(value), count, stream_), "hipMemsetD32Async"};
  }
  gpu::Status record_start() override { return {api_.hipEventRecord(start_, stream_), "hipEventRecord"}; }
  gpu::Status record_stop() override { return {api_.hipEventRecord(stop_, stream_), "hipEventRecord"}; }
  gpu::Status elapsed_ms(float& ms) override {
    return {api_.hipEventElapsedTime(&ms, start_, stop_), "hipEventElapsedTime"};
  }
  gpu::Status load_module(gpu::ModuleHandle& module, const void* image) override {
    hipModule_t m = nullptr;
    const hipError_t r = api_.hipModuleLoadData(&m, image);
    module = m;
    return {r, "hipModuleLoadData"};
  }
  void unload_module(gpu::ModuleHandle module) override { api_.hipModuleUnload(static_cast<hipModule_t>(module)); }
  gpu::Status get_function(gpu::FunctionHandle& fn, gpu::ModuleHandle module, const char* name) override {
    hipFunction_t f = nullptr;
    const hipError_t r = api_.hipModuleGetFunction(&f, static_cast<hipModule_t>(module), name);
    fn = f;
    return {r, "hipModuleGetFunction"};
  }
  std::map<std::string, std::int64_t> resources(gpu::FunctionHandle handle) override {
    const auto fn = static_cast<hipFunction_t>(handle);
    auto attr = [&](int which) {
      int v = 0;
      api_.hipFuncGetAttribute(&v, which, fn);
      return static_cast<std::int64_t>(v);
    };
    return {{"registers", attr(HIP_FUNC_ATTRIBUTE_NUM_REGS)},
            {"shared_static_bytes", attr(HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)},
            {"local_bytes", attr(HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)},
            {"max_threads_per_block", attr(HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)}};
  }
  gpu::Status occupancy(gpu::FunctionHandle fn, int block_threads, std::size_t dynamic_shared,
                        Occupancy& out) override {
    const auto call = "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor";
    if (!api_.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor) return {hipErrorInvalidValue, call};
    const int per_cu = hipDeviceAttributeMaxThreadsPerMultiProcessor;
    if (api_.hipDeviceGetAttribute(&out.max_threads_per_sm, per_cu, index_) != hipSuccess) out.max_threads_per_sm = 0;
    if (api_.hipDeviceGetAttribute(&out.warp_size, hipDeviceAttributeWarpSize, index_) != hipSuccess) out.warp_size = 0;
    return {api_.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(&out.blocks_per_sm, static_cast<hipFunction_t>(fn),
                                                                    block_threads, dynamic_shared),
            call};
  }
  // A module's kernel may use all of a block's LDS without asking first; a launch beyond it fails.
  gpu::Status allow_dynamic_shared(gpu::FunctionHandle, int) override { return {}; }
  void* stream() override { return stream_; }
  void* swap_stream(void* stream) override { return std::exchange(stream_, static_cast<hipStream_t>(stream)); }
  gpu::Status launch(gpu::FunctionHandle fn, const unsigned grid[3], const unsigned block[3], unsigned shared_bytes,
                     void** args) override {
    return {api_.hipModuleLaunchKernel(static_cast<hipFunction_t>(fn), grid[0], grid[1], grid[2], block[0], block[1],
                                       block[2], shared_bytes, stream_, args, nullptr),
            "hipModuleLaunchKernel"};
  }

 private:
  HipDriver(const Api& api, int index) : api_(api), index_(index) {}
  const Api& api_;
  int index_;
  hipStream_t stream_ = nullptr;
  hipEvent_t start_ = nullptr;
  hipEvent_t stop_ = nullptr;
};

int attribute(const Api& api, int which, int index) {
  int v = 0;
  return api.hipDeviceGetAttribute(&v, which, index) == hipSuccess ? v : 0;
}

DeviceInfo describe(const Api& api, int index) {
  DeviceInfo info;
  info.id = "hip:" + std::to_string(index);
  info.kind = "hip";
  char name[256] = {0};
  if (api.hipDeviceGetName(name, sizeof name - 1, index) == hipSuccess) info.name = name;
  auto attr = [&](int which) { return attribute(api, which, index); };
  const int warp = attr(hipDeviceAttributeWarpSize);
  info.compute_units = attr(hipDeviceAttributeMultiprocessorCount);
  info.vector_bits = warp * 32;
  auto& p = info.properties;
  p["compute_units"] = std::to_string(info.compute_units);
  p["warp_size"] = std::to_string(warp);
  p["l2_cache_bytes"] = std::to_string(attr(hipDeviceAttributeL2CacheSize));
  p["shared_per_block_bytes"] = std::to_string(attr(hipDeviceAttributeMaxSharedMemoryPerBlock));
  p["max_threads_per_block"] = std::to_string(attr(hipDeviceAttributeMaxThreadsPerBlock));
  p["clock_mhz"] = std::to_string(attr(hipDeviceAttributeClockRate) / 1000);
  p["memory_clock_mhz"] = std::to_string(attr(hipDeviceAttributeMemoryClockRate) / 1000);
  p["memory_bus_bits"] = std::to_string(attr(hipDeviceAttributeMemoryBusWidth));
  p["capability"] = std::to_string(attr(hipDeviceAttributeComputeCapabilityMajor)) + "." +
                    std::to_string(attr(hipDeviceAttributeComputeCapabilityMinor));
  std::size_t total = 0;
  if (api.hipDeviceTotalMem(&total, index) == hipSuccess) p["memory_bytes"] = std::to_string(total);
  int version = 0;
  if (api.hipRuntimeGetVersion(&version) == hipSuccess) p["hip_runtime"] = std::to_string(version);
  p["untested"] = "this backend has never run on AMD hardware";
  return info;
}

// The GPU core with hiprtc as its compiler. Verification stays on the host: the CUDA device's verification
// kernels assume 32-lane warps, and nothing here has run on AMD hardware to check a port.
class HipDevice final : public gpu::GpuDevice {
 public:
  HipDevice(const Api* api, int index)
      : GpuDevice(HipDriver::open(api, index), "hip:" + std::to_string(index), Language::hip), api_(*api) {
    info_ = describe(*api, index);
    Setup setup;
    setup.compiler = "hiprtc";
    setup.l2_bytes = static_cast<std::size_t>(attribute(*api, hipDeviceAttributeL2CacheSize, index));
    api->hipDeviceTotalMem(&setup.memory_bytes, index);
    setup.shared_optin = gpu::format_bytes(attribute(*api, hipDeviceAttributeMaxSharedMemoryPerBlock, index));
    setup.ceilings_key = info_.name + "-" + info_.id;
    if (auto it = info_.properties.find("hip_runtime"); it != info_.properties.end()) setup.driver_version = it->second;
    start(setup);
  }

 protected:
  // hiprtc compiles for the current device's own architecture unless a flag names another.
  std::string target(const KernelSource&, std::string&) override { return "native"; }
  Build build(const KernelSource& ks, const std::string&, std::string& log) override {
    std::vector<std::string> options = {"-std=c++17"};
    for (const auto& f : ks.flags) options.push_back(f);
    for (const auto& [name, value] : ks.defines) options.push_back("-D" + name + "=" + std::to_string(value));
    std::vector<const char*> argv;
    for (const auto& o : options) argv.push_back(o.c_str());
    Build out;
    hiprtcProgram prog = nullptr;
    if (api_.hiprtcCreateProgram(&prog, ks.source.c_str(), "kernel.hip", 0, nullptr, nullptr) != HIPRTC_SUCCESS) {
      log += "error: hiprtcCreateProgram failed\n";
      return out;
    }
    {
      auto lock = context().acquire();  // hiprtc compiles for the current device
      const hiprtcResult r = api_.hiprtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
      std::size_t log_size = 0;
      if (api_.hiprtcGetProgramLogSize(prog, &log_size) == HIPRTC_SUCCESS && log_size > 1) {
        std::string text(log_size, '\0');
        api_.hiprtcGetProgramLog(prog, text.data());
        text.resize(std::strlen(text.c_str()));
        log += text;
      }
      if (r != HIPRTC_SUCCESS) {
        if (log.find("error") == std::string::npos)
          log += std::string("error: hiprtc: ") + api_.hiprtcGetErrorString(r) + "\n";
        api_.hiprtcDestroyProgram(&prog);
        return out;
      }
    }
    std::size_t size = 0;
    if (api_.hiprtcGetCodeSize(prog, &size) == HIPRTC_SUCCESS && size > 0) {
      out.image.assign(size, '\0');
      api_.hiprtcGetCode(prog, out.image.data());
    }
    api_.hiprtcDestroyProgram(&prog);
    if (out.image.empty()) log += "error: hiprtc produced no code\n";
    return out;
  }

 private:
  const Api& api_;
};

}  // namespace
}  // namespace hip_detail

std::shared_ptr<Device> make_hip_device(int index) {
  const hip::LoadResult& loaded = hip::load();
  const std::string id = "hip:" + std::to_string(index);
  if (!loaded.runtime) throw Error(ErrorCode::DeviceUnavailable, "device '" + id + "': " + loaded.error);
  if (loaded.device_count == 0)
    throw Error(ErrorCode::DeviceUnavailable, "device '" + id + "': the HIP runtime finds no GPU");
  if (index < 0 || index >= loaded.device_count) {
    throw Error(ErrorCode::DeviceUnavailable,
                "device '" + id + "': there are " + std::to_string(loaded.device_count) +
                    " HIP GPU(s), hip:0 to hip:" + std::to_string(loaded.device_count - 1));
  }
  if (!loaded.api) throw Error(ErrorCode::DeviceUnavailable, "device '" + id + "': " + loaded.error);
  return std::make_shared<hip_detail::HipDevice>(loaded.api, index);
}

std::vector<DeviceInfo> list_hip_devices() {
  std::vector<DeviceInfo> out;
  const hip::LoadResult& loaded = hip::load();
  if (!loaded.runtime) return out;
  for (int i = 0; i < loaded.device_count; ++i) {
    DeviceInfo info = hip_detail::describe(*loaded.runtime, i);
    if (!loaded.api) info.properties["unusable"] = loaded.error;
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace kernelevolve
