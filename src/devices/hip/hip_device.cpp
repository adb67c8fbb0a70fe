// HipDevice: see hip_device.hpp. The structure follows CudaDevice (cuda_device.cpp): a shared context
// record, buffers and kernels that keep it alive, an LRU module cache, one stream, event timing with an
// L2 flush, and ceilings measured once per device and cached in a file. The checks before compile and
// launch and the ceiling kernels are the CUDA device's own (devices/gpu/common.hpp).
#include "devices/hip/hip_device.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "devices/gpu/ceiling_cache.hpp"
#include "devices/gpu/common.hpp"
#include "devices/hip/hip_api.hpp"
#include "devices/clock.hpp"
#include "devices/kernel_cache.hpp"
#include "kernelevolve/error.hpp"

namespace kernelevolve {

using namespace hip;

namespace hip_detail {
namespace {

using devices::Clock;
using devices::ms_since;

struct Context {
  const Api* api = nullptr;
  int index = 0;
  hipStream_t stream = nullptr;
  hipEvent_t start = nullptr;
  hipEvent_t stop = nullptr;
  void* flush_buffer = nullptr;
  std::size_t flush_bytes = 0;
  unsigned flush_value = 0;
  std::mutex mutex;
  std::atomic<bool> healthy{true};
  std::string poison;

  ~Context() {
    if (!api) return;
    api->hipSetDevice(index);
    if (flush_buffer) api->hipFree(flush_buffer);
    if (start) api->hipEventDestroy(start);
    if (stop) api->hipEventDestroy(stop);
    if (stream) api->hipStreamDestroy(stream);
  }
  std::string id() const { return "hip:" + std::to_string(index); }
  void make_current() const { api->hipSetDevice(index); }
  std::string failed(const char* call, hipError_t r) {
    std::string message = std::string(call) + ": " + error_text(*api, r);
    bool poisoned = is_sticky(r);
    if (!poisoned && r != hipErrorInvalidValue && r != hipErrorOutOfMemory && r != hipErrorLaunchOutOfResources)
      poisoned = api->hipDeviceSynchronize() != hipSuccess;
    if (poisoned && healthy.exchange(false)) poison = message;
    return message;
  }
  void check(const char* call, hipError_t r) {
    if (r != hipSuccess) throw std::runtime_error(id() + ": " + failed(call, r));
  }
};

class HipBuffer final : public Buffer {
 public:
  HipBuffer(std::shared_ptr<Context> ctx, std::size_t bytes) : ctx_(std::move(ctx)), bytes_(bytes) {
    std::lock_guard lock(ctx_->mutex);
    ctx_->make_current();
    const hipError_t r = ctx_->api->hipMalloc(&ptr_, std::max<std::size_t>(bytes, 1));
    if (r != hipSuccess)
      throw std::runtime_error(ctx_->id() + ": cannot allocate " + std::to_string(bytes) + " bytes: " +
                               ctx_->failed("hipMalloc", r));
  }
  ~HipBuffer() override {
    std::lock_guard lock(ctx_->mutex);
    ctx_->make_current();
    ctx_->api->hipFree(ptr_);
  }
  std::size_t bytes() const override { return bytes_; }
  void* data() override { return ptr_; }
  void upload(const void* host, std::size_t bytes) override {
    check_size(bytes, "upload");
    if (!bytes) return;
    std::lock_guard lock(ctx_->mutex);
    ctx_->make_current();
    ctx_->check("hipMemcpyHtoDAsync", ctx_->api->hipMemcpyHtoDAsync(ptr_, const_cast<void*>(host), bytes, ctx_->stream));
    ctx_->check("hipStreamSynchronize", ctx_->api->hipStreamSynchronize(ctx_->stream));
  }
  // Within one GPU, a device-to-device copy (the evaluator copies each trial's inputs this way).
  void copy_from(const Buffer& source) override {
    const auto* other = dynamic_cast<const HipBuffer*>(&source);
    if (!other || other->ctx_ != ctx_) {
      Buffer::copy_from(source);
      return;
    }
    const std::size_t n = std::min(bytes_, other->bytes_);
    if (!n) return;
    std::lock_guard lock(ctx_->mutex);
    ctx_->make_current();
    ctx_->check("hipMemcpyDtoDAsync", ctx_->api->hipMemcpyDtoDAsync(ptr_, other->ptr_, n, ctx_->stream));
    ctx_->check("hipStreamSynchronize", ctx_->api->hipStreamSynchronize(ctx_->stream));
  }
  void download(void* host, std::size_t bytes) const override {
    check_size(bytes, "download");
    if (!bytes) return;
    std::lock_guard lock(ctx_->mutex);
    ctx_->make_current();
    ctx_->check("hipMemcpyDtoHAsync", ctx_->api->hipMemcpyDtoHAsync(host, ptr_, bytes, ctx_->stream));
    ctx_->check("hipStreamSynchronize", ctx_->api->hipStreamSynchronize(ctx_->stream));
  }

 private:
  void check_size(std::size_t bytes, const char* what) const {
    if (bytes > bytes_)
      throw Error(ErrorCode::BadUsage, ctx_->id() + " buffer " + what + ": " + std::to_string(bytes) +
                                           " bytes into a buffer of " + std::to_string(bytes_));
  }
  std::shared_ptr<Context> ctx_;
  std::size_t bytes_;
  void* ptr_ = nullptr;
};

struct Module {
  std::shared_ptr<Context> ctx;
  hipModule_t module = nullptr;
  ~Module() {
    if (!module) return;
    std::lock_guard lock(ctx->mutex);
    ctx->make_current();
    ctx->api->hipModuleUnload(module);
  }
};

class HipKernel final : public Kernel {
 public:
  HipKernel(std::shared_ptr<Module> module, hipFunction_t fn, std::map<std::string, std::int64_t> resources)
      : module_(std::move(module)), fn_(fn), resources_(std::move(resources)) {}
  std::map<std::string, std::int64_t> resources() const override { return resources_; }
  hipFunction_t function() const { return fn_; }
  const Context* context() const { return module_->ctx.get(); }

 private:
  std::shared_ptr<Module> module_;
  hipFunction_t fn_;
  std::map<std::string, std::int64_t> resources_;
};

DeviceInfo describe(const Api& api, int index) {
  DeviceInfo info;
  info.id = "hip:" + std::to_string(index);
  info.kind = "hip";
  char name[256] = {0};
  if (api.hipDeviceGetName(name, sizeof name - 1, index) == hipSuccess) info.name = name;
  auto attr = [&](int which) {
    int v = 0;
    return api.hipDeviceGetAttribute(&v, which, index) == hipSuccess ? v : 0;
  };
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

class HipDevice final : public Device {
 public:
  HipDevice(const Api* api, int index) : ctx_(std::make_shared<Context>()) {
    ctx_->api = api;
    ctx_->index = index;
    const std::string id = ctx_->id();
    auto require = [&](const char* call, hipError_t r) {
      if (r != hipSuccess)
        throw Error(ErrorCode::DeviceUnavailable, "device '" + id + "': " + call + ": " + error_text(*api, r));
    };
    require("hipSetDevice", api->hipSetDevice(index));
    require("hipStreamCreateWithFlags", api->hipStreamCreateWithFlags(&ctx_->stream, hipStreamNonBlocking));
    require("hipEventCreate", api->hipEventCreate(&ctx_->start));
    require("hipEventCreate", api->hipEventCreate(&ctx_->stop));
    info_ = describe(*api, index);
    int l2 = 0;
    api->hipDeviceGetAttribute(&l2, hipDeviceAttributeL2CacheSize, index);
    ctx_->flush_bytes = std::max<std::size_t>(2 * static_cast<std::size_t>(l2), 8u << 20);
    require("hipMalloc (L2 flush buffer)", api->hipMalloc(&ctx_->flush_buffer, ctx_->flush_bytes));
    KernelSource ks;
    ks.source = gpu::kCeilingKernels;
    ks.language = Language::hip;
    ks.entry = "ke_copy";
    CompileResult r = compile(ks);
    if (!r.ok()) throw Error(ErrorCode::DeviceUnavailable, "device '" + id + "': hiprtc cannot compile:\n" + r.log);
    copy_kernel_ = r.kernel;
    ks.entry = "ke_fma";
    r = compile(ks);
    if (!r.ok()) throw Error(ErrorCode::DeviceUnavailable, "device '" + id + "': hiprtc cannot compile:\n" + r.log);
    fma_kernel_ = r.kernel;
  }

  const DeviceInfo& info() override {
    std::call_once(ceilings_once_, [this] {
      const std::string key = info_.name + "-" + info_.id;
      std::string how;
      const gpu::Ceilings c = gpu::load_or_measure(
          key, info_.name, info_.properties["hip_runtime"], [this] { return measure(); },
          [](const gpu::Ceilings& m) { return m.copy_bytes_per_s > 0 && m.fma_flops_per_s > 0; }, how);
      gpu::apply(info_, c, how);
    });
    return info_;
  }

  CompileResult compile(const KernelSource& ks) override;
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override { return std::make_unique<HipBuffer>(ctx_, bytes); }
  LaunchResult launch(Kernel& kernel, void** args, const LaunchDims& dims, bool timed, bool flush_cache) override;
  bool healthy() const override { return ctx_->healthy.load(); }

 private:
  gpu::Ceilings measure();

  std::shared_ptr<Context> ctx_;
  DeviceInfo info_;
  std::once_flag ceilings_once_;
  std::shared_ptr<Kernel> copy_kernel_, fma_kernel_;
  KernelCache cache_{256};
};

CompileResult HipDevice::compile(const KernelSource& ks) {
  const auto start = Clock::now();
  CompileResult result;
  auto done = [&]() -> CompileResult& {
    result.compile_ms = ms_since(start);
    return result;
  };
  result.log = gpu::refusal(ks, Language::hip, ctx_->id(), healthy(), ctx_->poison);
  if (!result.log.empty()) return done();
  std::vector<std::string> options = {"-std=c++17"};
  for (const auto& f : ks.flags) options.push_back(f);
  for (const auto& [name, value] : ks.defines) options.push_back("-D" + name + "=" + std::to_string(value));
  std::ostringstream key_stream;
  key_stream << ks.entry << '\0';
  for (const auto& o : options) key_stream << o << '\x1f';
  key_stream << '\0' << ks.source;
  const std::string key = key_stream.str();
  if ((result.kernel = cache_.find(key))) {
    result.cached = true;
    return done();
  }
  const Api& api = *ctx_->api;
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  hiprtcProgram prog = nullptr;
  if (api.hiprtcCreateProgram(&prog, ks.source.c_str(), "kernel.hip", 0, nullptr, nullptr) != HIPRTC_SUCCESS) {
    result.log = "error: hiprtcCreateProgram failed\n";
    return done();
  }
  {
    std::lock_guard lock(ctx_->mutex);  // hiprtc compiles for the current device
    ctx_->make_current();
    const hiprtcResult r = api.hiprtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
    std::size_t log_size = 0;
    if (api.hiprtcGetProgramLogSize(prog, &log_size) == HIPRTC_SUCCESS && log_size > 1) {
      std::string log(log_size, '\0');
      api.hiprtcGetProgramLog(prog, log.data());
      log.resize(std::strlen(log.c_str()));
      result.log += log;
    }
    if (r != HIPRTC_SUCCESS) {
      if (result.log.find("error") == std::string::npos)
        result.log += std::string("error: hiprtc: ") + api.hiprtcGetErrorString(r) + "\n";
      api.hiprtcDestroyProgram(&prog);
      return done();
    }
  }
  std::string code;
  std::size_t size = 0;
  if (api.hiprtcGetCodeSize(prog, &size) == HIPRTC_SUCCESS && size > 0) {
    code.assign(size, '\0');
    api.hiprtcGetCode(prog, code.data());
  }
  api.hiprtcDestroyProgram(&prog);
  if (code.empty()) {
    result.log += "error: hiprtc produced no code\n";
    return done();
  }
  auto module = std::make_shared<Module>();
  module->ctx = ctx_;
  hipFunction_t fn = nullptr;
  std::map<std::string, std::int64_t> resources;
  {
    std::lock_guard lock(ctx_->mutex);
    ctx_->make_current();
    hipError_t r = api.hipModuleLoadData(&module->module, code.data());
    if (r != hipSuccess) {
      module->module = nullptr;
      result.log += "error: " + ctx_->failed("hipModuleLoadData", r) + "\n";
      return done();
    }
    r = api.hipModuleGetFunction(&fn, module->module, ks.entry.c_str());
    if (r != hipSuccess) {
      result.log += "error: the module has no kernel named '" + ks.entry + "' (" + error_text(api, r) +
                    "); declare it extern \"C\" __global__\n";
      return done();
    }
    auto attr = [&](int which) {
      int v = 0;
      api.hipFuncGetAttribute(&v, which, fn);
      return static_cast<std::int64_t>(v);
    };
    resources["registers"] = attr(HIP_FUNC_ATTRIBUTE_NUM_REGS);
    resources["shared_static_bytes"] = attr(HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    resources["local_bytes"] = attr(HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
    resources["max_threads_per_block"] = attr(HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  }
  std::shared_ptr<Kernel> kernel = std::make_shared<HipKernel>(std::move(module), fn, std::move(resources));
  result.kernel = cache_.insert(key, std::move(kernel));
  return done();
}

LaunchResult HipDevice::launch(Kernel& kernel, void** args, const LaunchDims& dims, bool timed, bool flush_cache) {
  LaunchResult result;
  auto fail = [&](std::string message) {
    result.ok = false;
    result.error = std::move(message);
    return result;
  };
  auto* k = dynamic_cast<HipKernel*>(&kernel);
  if (!k || k->context() != ctx_.get()) return fail(ctx_->id() + ": the kernel was not compiled by this device");
  if (!healthy()) return fail(gpu::unusable(ctx_->id(), ctx_->poison));
  if (std::string why = gpu::invalid_launch(dims); !why.empty()) return fail(why);
  const Api& api = *ctx_->api;
  std::lock_guard lock(ctx_->mutex);
  ctx_->make_current();
  if (timed && flush_cache) {
    const hipError_t r = api.hipMemsetD8Async(ctx_->flush_buffer, static_cast<unsigned char>(++ctx_->flush_value),
                                              ctx_->flush_bytes, ctx_->stream);
    if (r != hipSuccess) return fail(ctx_->failed("hipMemsetD8Async (L2 flush)", r));
  }
  if (timed) {
    const hipError_t r = api.hipEventRecord(ctx_->start, ctx_->stream);
    if (r != hipSuccess) return fail(ctx_->failed("hipEventRecord", r));
  }
  hipError_t r = api.hipModuleLaunchKernel(
      k->function(), static_cast<unsigned>(dims.grid[0]), static_cast<unsigned>(dims.grid[1]),
      static_cast<unsigned>(dims.grid[2]), static_cast<unsigned>(dims.block[0]), static_cast<unsigned>(dims.block[1]),
      static_cast<unsigned>(dims.block[2]), static_cast<unsigned>(dims.shared_bytes), ctx_->stream, args, nullptr);
  if (r != hipSuccess) {
    if (timed) api.hipStreamSynchronize(ctx_->stream);
    return fail("hipModuleLaunchKernel failed: " + ctx_->failed("hipModuleLaunchKernel", r));
  }
  if (timed) {
    r = api.hipEventRecord(ctx_->stop, ctx_->stream);
    if (r != hipSuccess) return fail(ctx_->failed("hipEventRecord", r));
  }
  r = api.hipStreamSynchronize(ctx_->stream);
  if (r != hipSuccess) return fail("the kernel failed: " + ctx_->failed("hipStreamSynchronize", r));
  if (timed) {
    float ms = 0;
    r = api.hipEventElapsedTime(&ms, ctx_->start, ctx_->stop);
    if (r != hipSuccess) return fail(ctx_->failed("hipEventElapsedTime", r));
    result.time_us = static_cast<double>(ms) * 1000.0;
  }
  return result;
}

gpu::Ceilings HipDevice::measure() {
  gpu::Ceilings c;
  const int cus = std::max(1, info_.compute_units);
  try {
    const std::size_t bytes = 512u << 20;
    auto src = allocate(bytes);
    auto dst = allocate(bytes);
    void* s = src->data();
    void* d = dst->data();
    unsigned long long n = bytes / 16;
    void* args[] = {&s, &d, &n};
    LaunchDims dims;
    dims.grid[0] = cus * 16;
    dims.block[0] = 256;
    launch(*copy_kernel_, args, dims, false, false);
    const double ms = gpu::best_ms(*this, *copy_kernel_, args, dims, 10, false);
    if (ms > 0) c.copy_bytes_per_s = 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
  } catch (const std::exception&) {
  }
  c.fma_flops_per_s = gpu::measure_fma_flops(*this, *fma_kernel_, cus, false);
  return c;
}

}  // namespace
}  // namespace hip_detail

std::shared_ptr<Device> make_hip_device(int index) {
  const hip::LoadResult& loaded = hip::load();
  const std::string id = "hip:" + std::to_string(index);
  if (!loaded.runtime) throw Error(ErrorCode::DeviceUnavailable, "device '" + id + "': " + loaded.error);
  if (loaded.device_count == 0)
    throw Error(ErrorCode::DeviceUnavailable, "device '" + id + "': the HIP runtime finds no GPU");
  if (index < 0 || index >= loaded.device_count) {
    throw Error(ErrorCode::DeviceUnavailable, "device '" + id + "': there are " + std::to_string(loaded.device_count) +
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
