// CudaDevice: see cuda_device.hpp for what it does; this file is how. Buffers, modules, launches, timing and
// verification are the GPU core's (devices/gpu/gpu_device.hpp); what is CUDA's own is here: NVRTC and the
// target architecture, the ptxas report, the device's description, the Driver API as a gpu::Driver, and IPC.
#include "devices/cuda/cuda_device.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <utility>

#include "devices/cuda/cuda_api.hpp"
#include "devices/cuda/library_steps.hpp"
#include "devices/cuda/verify_kernels.hpp"
#include "devices/gpu/common.hpp"
#include "devices/gpu/gpu_device.hpp"
#include "kernelevolve/error.hpp"
#include "triton/triton_compiler.hpp"

namespace kernelevolve {

using namespace cuda;  // the declarations of cuda_api.hpp

namespace cuda_detail {
namespace {

using gpu::format_bytes;

// "-arch=sm_90a", "--gpu-architecture=sm_90a", "-arch", "sm_90a" (two flags): the value, or empty.
bool arch_flag_value(const std::vector<std::string>& flags, std::size_t& i, std::string& value) {
  const std::string& f = flags[i];
  for (const char* prefix : {"-arch=", "--gpu-architecture=", "-gpu-architecture="}) {
    if (f.rfind(prefix, 0) == 0) {
      value = f.substr(std::strlen(prefix));
      return true;
    }
  }
  if ((f == "-arch" || f == "--gpu-architecture") && i + 1 < flags.size()) {
    value = flags[++i];
    return true;
  }
  return false;
}

bool is_optimization_flag(const std::string& f) { return f.size() >= 2 && f.rfind("-O", 0) == 0; }

}  // namespace

std::string target_arch(const KernelSource& ks, int cc, std::string& error) {
  const std::string own = "sm_" + std::to_string(cc);
  std::string asked;
  static const std::regex marker(R"(//[ \t]*ke:[ \t]*(sm_[0-9]+a?)\b)");
  std::smatch m;
  if (std::regex_search(ks.source, m, marker)) asked = m[1].str();
  for (std::size_t i = 0; i < ks.flags.size(); ++i) {
    std::string value;
    if (arch_flag_value(ks.flags, i, value)) asked = value;
  }
  if (asked.empty()) return own;
  if (asked == own || asked == own + "a") return asked;
  if (asked.rfind("compute_", 0) == 0) {
    error = "error: the kernel asks for " + asked + "; KernelEvolve compiles for the device's own architecture (" +
            own + ", or " + own + "a via `// ke: " + own + "a`)\n";
  } else {
    error = "error: the kernel asks for " + asked + ", but this device is " + own + " (compute capability " +
            std::to_string(cc / 10) + "." + std::to_string(cc % 10) + ")\n";
  }
  return {};
}

NvrtcOutput nvrtc_compile(const KernelSource& ks, const std::string& requested_arch) {
  NvrtcOutput out;
  std::string load_error;
  const Api* api = load_nvrtc_only(&load_error);
  if (!api) {
    out.log = "error: " + load_error + "\n";
    return out;
  }
  // An NVRTC older than the GPU does not know its sm_XX: compile PTX for the newest architecture it
  // knows and let the driver finish the job.
  std::string arch = requested_arch;
  if (api->nvrtcGetNumSupportedArchs && api->nvrtcGetSupportedArchs && arch.rfind("sm_", 0) == 0 &&
      arch.back() != 'a') {
    int count = 0;
    if (api->nvrtcGetNumSupportedArchs(&count) == NVRTC_SUCCESS && count > 0) {
      std::vector<int> archs(static_cast<std::size_t>(count));
      api->nvrtcGetSupportedArchs(archs.data());
      const int wanted = std::atoi(arch.c_str() + 3);
      if (std::find(archs.begin(), archs.end(), wanted) == archs.end()) {
        int best = 0;
        for (int a : archs)
          if (a <= wanted) best = std::max(best, a);
        if (best > 0) {
          out.log += "note: NVRTC " + api->nvrtc_path + " does not know " + arch + "; compiling PTX for compute_" +
                     std::to_string(best) + " for the driver to finish\n";
          arch = "compute_" + std::to_string(best);
          out.is_ptx = true;
        }
      }
    }
  }
  out.arch = arch;

  std::vector<std::string> options = {"--gpu-architecture=" + arch, "--std=c++17", "--ptxas-options=-v",
                                      "-default-device"};
  // Dropped flags are named in the log, so a model learns not to ask for them again.
  for (std::size_t i = 0; i < ks.flags.size(); ++i) {
    std::string value;
    if (arch_flag_value(ks.flags, i, value)) continue;  // handled by target_arch
    if (is_optimization_flag(ks.flags[i])) {
      out.log += "note: dropped '" + ks.flags[i] + "': NVRTC optimizes by default and refuses -O levels\n";
      continue;
    }
    options.push_back(ks.flags[i]);
  }
  for (const auto& [name, value] : ks.defines) options.push_back("-D" + name + "=" + std::to_string(value));
  for (const char* dir : {"/usr/local/cuda/include"}) {
    std::error_code ec;
    if (std::filesystem::exists(dir, ec)) options.push_back(std::string("--include-path=") + dir);
  }
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());

  nvrtcProgram prog = nullptr;
  nvrtcResult r = api->nvrtcCreateProgram(&prog, ks.source.c_str(), "kernel.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    out.log += std::string("error: nvrtcCreateProgram: ") + api->nvrtcGetErrorString(r) + "\n";
    return out;
  }
  r = api->nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  std::size_t log_size = 0;
  if (api->nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    std::string log(log_size, '\0');
    api->nvrtcGetProgramLog(prog, log.data());
    log.resize(std::strlen(log.c_str()));
    out.log += log;
    if (!out.log.empty() && out.log.back() != '\n') out.log += '\n';
  }
  if (r != NVRTC_SUCCESS) {
    if (out.log.find("error") == std::string::npos)
      out.log += std::string("error: NVRTC: ") + api->nvrtcGetErrorString(r) + "\n";
    api->nvrtcDestroyProgram(&prog);
    return out;
  }
  std::size_t size = 0;
  r = out.is_ptx ? api->nvrtcGetPTXSize(prog, &size) : api->nvrtcGetCUBINSize(prog, &size);
  if (r == NVRTC_SUCCESS && size > 0) {
    out.image.assign(size, '\0');
    r = out.is_ptx ? api->nvrtcGetPTX(prog, out.image.data()) : api->nvrtcGetCUBIN(prog, out.image.data());
  }
  api->nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS || out.image.empty()) {
    out.log += "error: NVRTC produced no code for " + arch + "\n";
    out.image.clear();
    return out;
  }
  out.ok = true;
  return out;
}

namespace {

// ptxas's "Used 40 registers, ... 16 bytes spill stores, 16 bytes spill loads" from the -v report.
void parse_spills(const std::string& log, std::map<std::string, std::int64_t>& resources) {
  static const std::regex spills(R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
  std::int64_t stores = 0, loads = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), spills); it != std::sregex_iterator(); ++it) {
    stores += std::stoll((*it)[1].str());
    loads += std::stoll((*it)[2].str());
  }
  resources["spill_store_bytes"] = stores;
  resources["spill_load_bytes"] = loads;
}

std::string uuid_string(const CUuuid& u) {
  char buf[64];
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  std::snprintf(buf, sizeof buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return buf;
}

// Describes device `index` from its attributes alone (no context, nothing measured).
DeviceInfo describe(const Api& api, int index, CUdevice dev) {
  DeviceInfo info;
  info.id = "cuda:" + std::to_string(index);
  info.kind = "cuda";
  char name[256] = {0};
  if (api.cuDeviceGetName(name, sizeof name - 1, dev) == CUDA_SUCCESS) info.name = name;
  auto attr = [&](int which) {
    int v = 0;
    return api.cuDeviceGetAttribute(&v, which, dev) == CUDA_SUCCESS ? v : 0;
  };
  const int major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  const int warp = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  info.compute_units = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.vector_bits = warp * 32;
  auto& p = info.properties;
  p["compute_capability"] = std::to_string(major) + "." + std::to_string(minor);
  p["arch"] = "sm_" + std::to_string(major * 10 + minor);
  p["sms"] = std::to_string(info.compute_units);
  p["warp_size"] = std::to_string(warp);
  p["l2_cache"] = format_bytes(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
  p["l2_cache_bytes"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
  p["shared_per_block"] = format_bytes(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
  p["shared_per_block_optin"] = format_bytes(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  p["shared_per_block_optin_bytes"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  p["shared_per_sm"] = format_bytes(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
  p["registers_per_sm"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR));
  p["registers_per_block"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK));
  p["max_threads_per_block"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
  p["max_threads_per_sm"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR));
  p["max_blocks_per_sm"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR));
  p["clock_mhz"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000);
  p["memory_clock_mhz"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) / 1000);
  p["memory_bus_bits"] = std::to_string(attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH));
  std::size_t total = 0;
  if (api.cuDeviceTotalMem(&total, dev) == CUDA_SUCCESS) {
    p["memory"] = format_bytes(static_cast<double>(total));
    p["memory_bytes"] = std::to_string(total);  // exact, for the memory check (the text is rounded)
  }
  CUuuid uuid{};
  if (api.cuDeviceGetUuid(&uuid, dev) == CUDA_SUCCESS) p["uuid"] = uuid_string(uuid);
  int driver = 0;
  if (api.cuDriverGetVersion(&driver) == CUDA_SUCCESS)
    p["driver_api"] = std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
  if (api.nvrtcVersion) {
    int a = 0, b = 0;
    if (api.nvrtcVersion(&a, &b) == NVRTC_SUCCESS) p["nvrtc"] = std::to_string(a) + "." + std::to_string(b);
  }
  // A datasheet-style FP32 rate (128 lanes per SM on sm_80+ parts, an FMA is 2 flops), for comparison
  // with the measured one.
  const double lanes = major >= 8 ? 128 : 64;
  p["fp32_tflops_nominal"] =
      std::to_string(info.compute_units * lanes * 2.0 * attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) * 1e3 / 1e12);
  return info;
}

// The CUDA Driver API as the GPU core's Driver: the primary context of one GPU, one non-blocking stream
// and two events on it.
class CudaDriver final : public gpu::Driver {
 public:
  // Retains the primary context and creates the stream and events; throws Error(DeviceUnavailable) saying
  // which call failed (what was made by then is released).
  static std::unique_ptr<CudaDriver> open(const Api* api, int index) {
    auto d = std::unique_ptr<CudaDriver>(new CudaDriver(*api));
    auto require = [&](const char* call, CUresult r) {
      if (r != CUDA_SUCCESS)
        throw Error(ErrorCode::DeviceUnavailable,
                    "device 'cuda:" + std::to_string(index) + "': " + call + ": " + cuda::error_text(*api, r));
    };
    require("cuDeviceGet", api->cuDeviceGet(&d->device_, index));
    require("cuDevicePrimaryCtxRetain", api->cuDevicePrimaryCtxRetain(&d->context_, d->device_));
    require("cuCtxSetCurrent", api->cuCtxSetCurrent(d->context_));
    require("cuStreamCreate", api->cuStreamCreate(&d->stream_, CU_STREAM_NON_BLOCKING));
    require("cuEventCreate", api->cuEventCreate(&d->start_, CU_EVENT_DEFAULT));
    require("cuEventCreate", api->cuEventCreate(&d->stop_, CU_EVENT_DEFAULT));
    api->cuDeviceGetAttribute(&d->max_threads_per_sm_, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, d->device_);
    api->cuDeviceGetAttribute(&d->warp_size_, CU_DEVICE_ATTRIBUTE_WARP_SIZE, d->device_);
    return d;
  }
  ~CudaDriver() override {
    if (!context_) return;
    api_.cuCtxSetCurrent(context_);
    if (start_) api_.cuEventDestroy(start_);
    if (stop_) api_.cuEventDestroy(stop_);
    if (stream_) api_.cuStreamDestroy(stream_);
    api_.cuDevicePrimaryCtxRelease(device_);
  }
  void make_current() override { api_.cuCtxSetCurrent(context_); }
  std::string error_text(int code) const override { return cuda::error_text(api_, code); }
  bool is_sticky(int code) const override { return cuda::is_sticky(code); }
  bool is_benign(int code) const override {
    return code == CUDA_ERROR_INVALID_VALUE || code == CUDA_ERROR_OUT_OF_MEMORY ||
           code == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES || code == CUDA_ERROR_NOT_FOUND;
  }
  gpu::Status synchronize_device() override { return {api_.cuCtxSynchronize(), "cuCtxSynchronize"}; }
  gpu::Status synchronize() override { return {api_.cuStreamSynchronize(stream_), "cuStreamSynchronize"}; }
  gpu::Status allocate(gpu::DevicePtr& ptr, std::size_t bytes) override {
    CUdeviceptr p = 0;
    const CUresult r = api_.cuMemAlloc(&p, bytes);
    ptr = p;
    return {r, "cuMemAlloc"};
  }
  void free(gpu::DevicePtr ptr) override { api_.cuMemFree(ptr); }
  gpu::Status copy_to_device(gpu::DevicePtr dst, const void* src, std::size_t bytes) override {
    return {api_.cuMemcpyHtoDAsync(dst, src, bytes, stream_), "cuMemcpyHtoDAsync"};
  }
  gpu::Status copy_to_host(void* dst, gpu::DevicePtr src, std::size_t bytes) override {
    return {api_.cuMemcpyDtoHAsync(dst, src, bytes, stream_), "cuMemcpyDtoHAsync"};
  }
  gpu::Status copy_on_device(gpu::DevicePtr dst, gpu::DevicePtr src, std::size_t bytes) override {
    return {api_.cuMemcpyDtoDAsync(dst, src, bytes, stream_), "cuMemcpyDtoDAsync"};
  }
  gpu::Status set(gpu::DevicePtr dst, std::uint32_t value, int element_bytes, std::size_t count) override {
    if (element_bytes == 1)
      return {api_.cuMemsetD8Async(dst, static_cast<unsigned char>(value), count, stream_), "cuMemsetD8Async"};
    if (element_bytes == 2)
      return {api_.cuMemsetD16Async(dst, static_cast<unsigned short>(value), count, stream_), "cuMemsetD16Async"};
    return {api_.cuMemsetD32Async(dst, value, count, stream_), "cuMemsetD32Async"};
  }
  gpu::Status record_start() override { return {api_.cuEventRecord(start_, stream_), "cuEventRecord"}; }
  gpu::Status record_stop() override { return {api_.cuEventRecord(stop_, stream_), "cuEventRecord"}; }
  gpu::Status elapsed_ms(float& ms) override {
    return {api_.cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime"};
  }
  gpu::Status load_module(gpu::ModuleHandle& module, const void* image) override {
    CUmodule m = nullptr;
    const CUresult r = api_.cuModuleLoadData(&m, image);
    module = m;
    return {r, "cuModuleLoadData"};
  }
  void unload_module(gpu::ModuleHandle module) override { api_.cuModuleUnload(static_cast<CUmodule>(module)); }
  gpu::Status get_function(gpu::FunctionHandle& fn, gpu::ModuleHandle module, const char* name) override {
    CUfunction f = nullptr;
    const CUresult r = api_.cuModuleGetFunction(&f, static_cast<CUmodule>(module), name);
    fn = f;
    return {r, "cuModuleGetFunction"};
  }
  std::map<std::string, std::int64_t> resources(gpu::FunctionHandle handle) override {
    const auto fn = static_cast<CUfunction>(handle);
    std::map<std::string, std::int64_t> resources;
    auto attr = [&](int which) {
      int v = 0;
      api_.cuFuncGetAttribute(&v, which, fn);
      return static_cast<std::int64_t>(v);
    };
    resources["registers"] = attr(CU_FUNC_ATTRIBUTE_NUM_REGS);
    resources["shared_static_bytes"] = attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    resources["local_bytes"] = attr(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
    resources["const_bytes"] = attr(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES);
    resources["max_threads_per_block"] = attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    resources["binary_version"] = attr(CU_FUNC_ATTRIBUTE_BINARY_VERSION);
    // Occupancy depends on the launch's block, the spec's rule, unknown here: GpuDevice::launch_resources.
    return resources;
  }
  gpu::Status occupancy(gpu::FunctionHandle fn, int block_threads, std::size_t dynamic_shared,
                        Occupancy& out) override {
    out.max_threads_per_sm = max_threads_per_sm_;
    out.warp_size = warp_size_;
    return {api_.cuOccupancyMaxActiveBlocksPerMultiprocessor(&out.blocks_per_sm, static_cast<CUfunction>(fn),
                                                             block_threads, dynamic_shared),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor"};
  }
  gpu::Status allow_dynamic_shared(gpu::FunctionHandle fn, int bytes) override {
    const auto f = static_cast<CUfunction>(fn);
    return {api_.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes), "cuFuncSetAttribute"};
  }
  void* stream() override { return stream_; }
  void* swap_stream(void* stream) override { return std::exchange(stream_, static_cast<CUstream>(stream)); }
  gpu::Status launch(gpu::FunctionHandle fn, const unsigned grid[3], const unsigned block[3], unsigned shared_bytes,
                     void** args) override {
    return {api_.cuLaunchKernel(static_cast<CUfunction>(fn), grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                shared_bytes, stream_, args, nullptr),
            "cuLaunchKernel"};
  }

 private:
  explicit CudaDriver(const Api& api) : api_(api) {}
  const Api& api_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr;
  CUevent stop_ = nullptr;
  int max_threads_per_sm_ = 2048;
  int warp_size_ = 32;
};

// The GPU core with NVRTC as its compiler, verification on the GPU, and memory shared over CUDA IPC.
class CudaDevice final : public gpu::GpuDevice {
 public:
  CudaDevice(const Api* api, int index)
      : GpuDevice(CudaDriver::open(api, index), "cuda:" + std::to_string(index), Language::cuda), api_(*api) {
    CUdevice dev = 0;
    api->cuDeviceGet(&dev, index);  // as CudaDriver::open did
    info_ = describe(*api, index, dev);
    auto attr = [&](int which) {
      int v = 0;
      api->cuDeviceGetAttribute(&v, which, dev);
      return v;
    };
    cc_ = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) * 10 + attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    auto property = [&](const char* name) {
      const auto it = info_.properties.find(name);
      return it == info_.properties.end() ? std::string() : it->second;
    };
    Setup setup;
    setup.compiler = "NVRTC";
    setup.verify_source = kVerifySource;
    setup.l2_bytes = static_cast<std::size_t>(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
    api->cuDeviceTotalMem(&setup.memory_bytes, dev);
    setup.shared_optin = property("shared_per_block_optin");
    setup.ceilings_key = info_.properties.count("uuid") ? property("uuid") : info_.id;
    setup.driver_version = property("driver_api");
    setup.nominal_flops = std::atof(property("fp32_tflops_nominal").c_str()) * 1e12;
    // The tensor-core ceilings: mma.sync's bf16 and fp16 m16n8k16 need sm_80. Up to Ada it is the tensor cores'
    // whole rate; on Hopper only part of wgmma's, which cuBLASLt's product reaches; on sm_100 to sm_119 (tcgen05)
    // a small part, too little to bound a time from below: there cuBLASLt's product alone.
    if (cc_ >= 80 && !(cc_ >= 100 && cc_ < 120)) setup.tensor_source = gpu::kTensorKernels;
    setup.tensor_library_step = "cublaslt.matmul";
    start(setup);
    more_languages_.push_back(Language::triton);
  }

  void prepare_language(Language language) override {
    if (language != Language::triton) return;
    triton::Compiler::shared();  // throws when Triton cannot be had
    // A first compile and load, so that the driver's PTX compiler is loaded before the process confines itself.
    KernelSource ks;
    ks.language = Language::triton;
    ks.entry = "ke_warm_up";
    ks.source =
        "import triton\nimport triton.language as tl\n\n@triton.jit\ndef ke_warm_up(x, n):\n"
        "    offs = tl.arange(0, 32)\n    tl.store(x + offs, offs.to(tl.float32), mask=offs < n)\n";
    ks.params = {Param{"x", DType::f32, Role::out, {"n"}}, Param{"n", DType::i64, Role::size, {}}};
    const CompileResult r = compile(ks);
    if (!r.ok())
      throw Error(ErrorCode::DeviceUnavailable, context().id() + ": Triton cannot compile a first kernel:\n" + r.log);
  }

  std::shared_ptr<Kernel> library_step(const std::string& name, const std::map<std::string, std::string>& options,
                                       const std::vector<Param>& signature, std::string& log) override {
    return make_library_step(*this, name, options, signature, log);
  }

  std::string prepare_library_steps() override {
    void* stream = nullptr;
    {
      // Makes the GPU's context current on this thread, where the libraries' first calls run; not held
      // across them, since they allocate through this device.
      auto lock = context().acquire();
      stream = context().driver().stream();
    }
    return prepare_vendor_libraries(*this, stream);
  }

  // cuMemAlloc memory is what cuIpcGetMemHandle exports (pool and managed memory are not).
  std::unique_ptr<Buffer> allocate_shared(std::size_t bytes, std::string& handle) override {
    auto buffer = allocate_unguarded(bytes);  // the handle opens the allocation's base: no red zone before it
    CUipcMemHandle ipc{};
    std::string error;
    {
      auto lock = context().acquire();
      const CUresult r = api_.cuIpcGetMemHandle(&ipc, reinterpret_cast<CUdeviceptr>(buffer->data()));
      if (r != CUDA_SUCCESS) error = context().failed("cuIpcGetMemHandle", r);
    }
    if (!error.empty())
      throw Error(ErrorCode::DeviceUnavailable,
                  context().id() + ": cannot share memory with another process: " + error);
    static const char* digits = "0123456789abcdef";
    handle.clear();
    for (unsigned char c : ipc.reserved) handle += digits[c >> 4], handle += digits[c & 15];
    return buffer;
  }

  std::unique_ptr<Buffer> open_shared(const std::string& handle, std::size_t bytes) override {
    CUipcMemHandle ipc{};
    if (handle.size() != 2 * sizeof ipc.reserved || handle.find_first_not_of("0123456789abcdef") != std::string::npos) {
      throw Error(ErrorCode::DeviceUnavailable,
                  context().id() + ": not a CUDA IPC handle: \"" + handle.substr(0, 40) + "\"");
    }
    for (std::size_t i = 0; i < sizeof ipc.reserved; ++i) {
      ipc.reserved[i] = static_cast<char>(std::stoi(handle.substr(2 * i, 2), nullptr, 16));
    }
    CUdeviceptr ptr = 0;
    std::string error;
    {
      auto lock = context().acquire();
      const CUresult r = api_.cuIpcOpenMemHandle(&ptr, ipc, 1);  // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
      if (r != CUDA_SUCCESS) error = context().failed("cuIpcOpenMemHandle", r);
    }
    if (!error.empty()) {
      throw Error(ErrorCode::DeviceUnavailable,
                  context().id() + ": cannot open the memory another process shares: " + error);
    }
    gpu::Context* ctx = &context();
    const Api* api = &api_;
    return adopt(static_cast<gpu::DevicePtr>(ptr), bytes, [ctx, api, ptr] {
      auto lock = ctx->acquire();
      api->cuIpcCloseMemHandle(ptr);  // fails harmlessly on a lost context
    });
  }

 protected:
  std::string target(const KernelSource& ks, std::string& log) override {
    if (ks.language != Language::triton) return target_arch(ks, cc_, log);
    if (!ks.flags.empty()) {
      log += "error: a Triton kernel takes no compiler flags (its options are the tunables num_warps and num_stages)\n";
      return {};
    }
    return "sm_" + std::to_string(cc_) + "+triton";
  }
  Build build(const KernelSource& ks, const std::string& arch, std::string& log) override {
    if (ks.language == Language::triton) return build_triton(ks, log);
    NvrtcOutput built = nvrtc_compile(ks, arch);
    log += built.log;
    Build out;
    if (!built.ok) return out;
    out.image = std::move(built.image);
    parse_spills(log, out.resources);
    return out;
  }
  // Triton's variants for integer arguments that are multiples of 16, as its launcher would compile them.
  Build build_variant(const KernelSource& ks, const std::string&, const std::vector<std::size_t>& divisible,
                      std::string& log) override {
    if (ks.language != Language::triton) return {};
    return build_triton(ks, log, divisible);
  }

 private:
  // Triton's compiler makes PTX (its own last stage runs ptxas as a program, which a confined process may not
  // start); the driver compiles that when the module is loaded.
  // `divisible`: the integer params it may assume are multiples of 16 (build_variant), none for the plain kernel.
  Build build_triton(const KernelSource& ks, std::string& log, const std::vector<std::size_t>& divisible = {}) {
    triton::Target target;
    target.arch = std::to_string(cc_);
    const triton::Compiled c = triton::Compiler::shared()->compile(ks, target, log, divisible);
    Build out;
    if (!c.ok) {
      out.refused = c.refused;
      return out;
    }
    out.image = c.image;  // NUL-terminated text, as cuModuleLoadData wants PTX
    out.symbol = c.symbol;
    out.launch.block_threads = static_cast<unsigned>(32 * c.num_warps);
    out.launch.shared_bytes = static_cast<unsigned>(c.shared_bytes);
    out.launch.params = ks.params.size();
    out.launch.scratch = {{c.global_scratch_bytes, c.global_scratch_align},
                          {c.profile_scratch_bytes, c.profile_scratch_align}};
    out.resources["triton_compile_ms"] = static_cast<std::int64_t>(c.compile_ms);
    // Triton's launcher specializes its int arguments (i32 and i64 values) on divisibility by 16; so does the core.
    for (std::size_t i = 0; i < ks.params.size(); ++i) {
      const Param& p = ks.params[i];
      if (!p.is_buffer() && (p.dtype == DType::i32 || p.dtype == DType::i64))
        out.launch.specializable.push_back({i, p.dtype == DType::i32 ? 4 : 8});
    }
    return out;
  }

  const Api& api_;
  int cc_ = 0;  // compute capability as 90
};

}  // namespace
}  // namespace cuda_detail

std::shared_ptr<Device> make_cuda_device(int index) {
  const LoadResult& loaded = cuda::load();
  const std::string id = "cuda:" + std::to_string(index);
  if (!loaded.driver) throw Error(ErrorCode::DeviceUnavailable, "device '" + id + "': " + loaded.error);
  if (loaded.device_count == 0)
    throw Error(ErrorCode::DeviceUnavailable, "device '" + id + "': the CUDA driver finds no GPU");
  if (index < 0 || index >= loaded.device_count) {
    throw Error(ErrorCode::DeviceUnavailable,
                "device '" + id + "': there are " + std::to_string(loaded.device_count) +
                    " CUDA GPU(s), cuda:0 to cuda:" + std::to_string(loaded.device_count - 1));
  }
  if (!loaded.api) throw Error(ErrorCode::DeviceUnavailable, "device '" + id + "': " + loaded.error);
  return std::make_shared<cuda_detail::CudaDevice>(loaded.api, index);
}

std::vector<DeviceInfo> list_cuda_devices() {
  std::vector<DeviceInfo> out;
  const LoadResult& loaded = cuda::load();
  if (!loaded.driver) return out;
  for (int i = 0; i < loaded.device_count; ++i) {
    CUdevice dev = 0;
    if (loaded.driver->cuDeviceGet(&dev, i) != CUDA_SUCCESS) continue;
    DeviceInfo info = cuda_detail::describe(*loaded.driver, i, dev);
    if (!loaded.api) info.properties["unusable"] = loaded.error;
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace kernelevolve
