// dlopen of the HIP runtime and hiprtc; see hip_api.hpp.
#include "devices/hip/hip_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>
#include <mutex>

namespace kernelevolve::hip {
namespace {

template <class F>
bool resolve(void* lib, F& fn, const char* name, std::string& missing) {
  if (void* p = dlsym(lib, name)) {
    fn = reinterpret_cast<F>(p);
    return true;
  }
  missing += std::string(missing.empty() ? "" : ", ") + name;
  return false;
}

void* open_first(std::initializer_list<const char*> names, std::string& loaded, std::string& errors) {
  for (const char* name : names) {
    if (!name || !*name) continue;
    if (void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      loaded = name;
      return lib;
    }
    const char* e = dlerror();
    errors += std::string("\n  ") + name + ": " + (e ? e : "unknown error");
  }
  return nullptr;
}

}  // namespace

const LoadResult& load() {
  static LoadResult result;
  static Api api;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string errors;
    void* rt = open_first(
        {std::getenv("KE_HIP_PATH"), "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"},
        api.runtime_path, errors);
    if (!rt) {
      result.error = "no HIP runtime: cannot load libamdhip64.so (is ROCm installed?):" + errors;
      return;
    }
    std::string missing;
    bool ok = true;
#define KE_RESOLVE(lib, name) ok &= resolve(lib, api.name, #name, missing)
    KE_RESOLVE(rt, hipInit);
    KE_RESOLVE(rt, hipGetDeviceCount);
    KE_RESOLVE(rt, hipSetDevice);
    KE_RESOLVE(rt, hipDeviceGetName);
    KE_RESOLVE(rt, hipDeviceGetAttribute);
    KE_RESOLVE(rt, hipDeviceTotalMem);
    KE_RESOLVE(rt, hipRuntimeGetVersion);
    KE_RESOLVE(rt, hipGetErrorName);
    KE_RESOLVE(rt, hipGetErrorString);
    KE_RESOLVE(rt, hipDeviceSynchronize);
    KE_RESOLVE(rt, hipStreamCreateWithFlags);
    KE_RESOLVE(rt, hipStreamDestroy);
    KE_RESOLVE(rt, hipStreamSynchronize);
    KE_RESOLVE(rt, hipEventCreate);
    KE_RESOLVE(rt, hipEventDestroy);
    KE_RESOLVE(rt, hipEventRecord);
    KE_RESOLVE(rt, hipEventElapsedTime);
    KE_RESOLVE(rt, hipMalloc);
    KE_RESOLVE(rt, hipFree);
    KE_RESOLVE(rt, hipMemcpyHtoDAsync);
    KE_RESOLVE(rt, hipMemcpyDtoHAsync);
    KE_RESOLVE(rt, hipMemcpyDtoDAsync);
    KE_RESOLVE(rt, hipMemsetD8Async);
    KE_RESOLVE(rt, hipMemsetD16Async);
    KE_RESOLVE(rt, hipMemsetD32Async);
    KE_RESOLVE(rt, hipModuleLoadData);
    KE_RESOLVE(rt, hipModuleUnload);
    KE_RESOLVE(rt, hipModuleGetFunction);
    KE_RESOLVE(rt, hipFuncGetAttribute);
    KE_RESOLVE(rt, hipModuleLaunchKernel);
    if (void* p = dlsym(rt, "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor")) {
      api.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor =
          reinterpret_cast<decltype(api.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor)>(p);
    }
    if (!ok) {
      result.error = "the HIP runtime " + api.runtime_path + " lacks " + missing;
      return;
    }
    const hipError_t init = api.hipInit(0);
    if (init == hipErrorNoDevice || init == hipErrorInvalidDevice) {
      result.error = "the HIP runtime (" + api.runtime_path + ") finds no AMD GPU (" + error_text(api, init) + ")";
      return;
    }
    if (init != hipSuccess) {
      result.error = "the HIP runtime is present but hipInit failed: " + error_text(api, init);
      return;
    }
    result.runtime = &api;
    if (api.hipGetDeviceCount(&result.device_count) != hipSuccess) result.device_count = 0;
    void* rtc = open_first(
        {std::getenv("KE_HIPRTC_PATH"), "libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5", "libhiprtc.so"},
        api.hiprtc_path, errors);
    if (!rtc) {
      result.error = "HIP devices are present but hiprtc cannot be loaded:" + errors;
      return;
    }
    KE_RESOLVE(rtc, hiprtcCreateProgram);
    KE_RESOLVE(rtc, hiprtcCompileProgram);
    KE_RESOLVE(rtc, hiprtcGetProgramLogSize);
    KE_RESOLVE(rtc, hiprtcGetProgramLog);
    KE_RESOLVE(rtc, hiprtcGetCodeSize);
    KE_RESOLVE(rtc, hiprtcGetCode);
    KE_RESOLVE(rtc, hiprtcDestroyProgram);
    KE_RESOLVE(rtc, hiprtcGetErrorString);
#undef KE_RESOLVE
    if (!ok) {
      result.error = "hiprtc " + api.hiprtc_path + " lacks " + missing;
      return;
    }
    result.api = &api;
  });
  return result;
}

std::string error_text(const Api& api, hipError_t r) {
  const char* name = api.hipGetErrorName ? api.hipGetErrorName(r) : nullptr;
  const char* text = api.hipGetErrorString ? api.hipGetErrorString(r) : nullptr;
  std::string out = name ? name : "HIP error " + std::to_string(r);
  if (text) out += std::string(": ") + text;
  return out;
}

bool is_sticky(hipError_t r) {
  switch (r) {
    case hipErrorIllegalAddress:
    case hipErrorLaunchTimeOut:
    case hipErrorAssert:
    case hipErrorLaunchFailure:
    case hipErrorECCNotCorrectable:
    case hipErrorContextIsDestroyed: return true;
    default: return false;
  }
}

}  // namespace kernelevolve::hip
