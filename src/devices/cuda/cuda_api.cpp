// dlopen of the CUDA driver and NVRTC; see cuda_api.hpp.
#include "devices/cuda/cuda_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>
#include <mutex>

namespace kernelevolve::cuda {
namespace {

// The first of `names` that the library exports. Versioned names come first: the plain ones are the
// oldest ABI (cuMemAlloc is 32-bit sizes; cuMemAlloc_v2 is what cuda.h maps it to).
template <class F>
bool resolve(void* lib, F& fn, std::initializer_list<const char*> names, std::string& missing) {
  for (const char* name : names) {
    if (void* p = dlsym(lib, name)) {
      fn = reinterpret_cast<F>(p);
      return true;
    }
  }
  missing += std::string(missing.empty() ? "" : ", ") + *names.begin();
  return false;
}

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown error";
}

// Opens the first library of `names` that loads; records its name and the errors of those that did not.
void* open_first(std::initializer_list<const char*> names, std::string& loaded, std::string& errors) {
  for (const char* name : names) {
    if (!name || !*name) continue;
    if (void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      loaded = name;
      return lib;
    }
    errors += std::string("\n  ") + name + ": " + dl_error();
  }
  return nullptr;
}

bool resolve_nvrtc(void* lib, Api& api, std::string& missing) {
  bool ok = true;
  ok &= resolve(lib, api.nvrtcVersion, {"nvrtcVersion"}, missing);
  ok &= resolve(lib, api.nvrtcGetErrorString, {"nvrtcGetErrorString"}, missing);
  ok &= resolve(lib, api.nvrtcCreateProgram, {"nvrtcCreateProgram"}, missing);
  ok &= resolve(lib, api.nvrtcDestroyProgram, {"nvrtcDestroyProgram"}, missing);
  ok &= resolve(lib, api.nvrtcCompileProgram, {"nvrtcCompileProgram"}, missing);
  ok &= resolve(lib, api.nvrtcGetProgramLogSize, {"nvrtcGetProgramLogSize"}, missing);
  ok &= resolve(lib, api.nvrtcGetProgramLog, {"nvrtcGetProgramLog"}, missing);
  ok &= resolve(lib, api.nvrtcGetCUBINSize, {"nvrtcGetCUBINSize"}, missing);
  ok &= resolve(lib, api.nvrtcGetCUBIN, {"nvrtcGetCUBIN"}, missing);
  ok &= resolve(lib, api.nvrtcGetPTXSize, {"nvrtcGetPTXSize"}, missing);
  ok &= resolve(lib, api.nvrtcGetPTX, {"nvrtcGetPTX"}, missing);
  std::string optional;
  resolve(lib, api.nvrtcGetNumSupportedArchs, {"nvrtcGetNumSupportedArchs"}, optional);
  resolve(lib, api.nvrtcGetSupportedArchs, {"nvrtcGetSupportedArchs"}, optional);
  return ok;
}

// NVRTC's library: $KE_NVRTC_PATH, then the versions this code was written against, newest first.
void* open_nvrtc(std::string& loaded, std::string& errors) {
  const char* env = std::getenv("KE_NVRTC_PATH");
  return open_first({env, "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}, loaded, errors);
}

bool resolve_driver(void* lib, Api& api, std::string& missing) {
  bool ok = true;
  ok &= resolve(lib, api.cuInit, {"cuInit"}, missing);
  ok &= resolve(lib, api.cuDriverGetVersion, {"cuDriverGetVersion"}, missing);
  ok &= resolve(lib, api.cuGetErrorName, {"cuGetErrorName"}, missing);
  ok &= resolve(lib, api.cuGetErrorString, {"cuGetErrorString"}, missing);
  ok &= resolve(lib, api.cuDeviceGetCount, {"cuDeviceGetCount"}, missing);
  ok &= resolve(lib, api.cuDeviceGet, {"cuDeviceGet"}, missing);
  ok &= resolve(lib, api.cuDeviceGetName, {"cuDeviceGetName"}, missing);
  ok &= resolve(lib, api.cuDeviceGetAttribute, {"cuDeviceGetAttribute"}, missing);
  ok &= resolve(lib, api.cuDeviceTotalMem, {"cuDeviceTotalMem_v2"}, missing);
  ok &= resolve(lib, api.cuDeviceGetUuid, {"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}, missing);
  ok &= resolve(lib, api.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"}, missing);
  ok &= resolve(lib, api.cuDevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"},
                missing);
  ok &= resolve(lib, api.cuCtxSetCurrent, {"cuCtxSetCurrent"}, missing);
  ok &= resolve(lib, api.cuCtxSynchronize, {"cuCtxSynchronize"}, missing);
  ok &= resolve(lib, api.cuStreamCreate, {"cuStreamCreate"}, missing);
  ok &= resolve(lib, api.cuStreamDestroy, {"cuStreamDestroy_v2", "cuStreamDestroy"}, missing);
  ok &= resolve(lib, api.cuStreamSynchronize, {"cuStreamSynchronize"}, missing);
  ok &= resolve(lib, api.cuEventCreate, {"cuEventCreate"}, missing);
  ok &= resolve(lib, api.cuEventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"}, missing);
  ok &= resolve(lib, api.cuEventRecord, {"cuEventRecord"}, missing);
  ok &= resolve(lib, api.cuEventSynchronize, {"cuEventSynchronize"}, missing);
  ok &= resolve(lib, api.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, missing);
  ok &= resolve(lib, api.cuMemAlloc, {"cuMemAlloc_v2"}, missing);
  ok &= resolve(lib, api.cuMemFree, {"cuMemFree_v2"}, missing);
  ok &= resolve(lib, api.cuIpcGetMemHandle, {"cuIpcGetMemHandle"}, missing);
  ok &= resolve(lib, api.cuIpcOpenMemHandle, {"cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"}, missing);
  ok &= resolve(lib, api.cuIpcCloseMemHandle, {"cuIpcCloseMemHandle"}, missing);
  ok &= resolve(lib, api.cuMemcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"}, missing);
  ok &= resolve(lib, api.cuMemcpyDtoHAsync, {"cuMemcpyDtoHAsync_v2"}, missing);
  ok &= resolve(lib, api.cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"}, missing);
  ok &= resolve(lib, api.cuMemsetD8Async, {"cuMemsetD8Async"}, missing);
  ok &= resolve(lib, api.cuMemsetD16Async, {"cuMemsetD16Async"}, missing);
  ok &= resolve(lib, api.cuMemsetD32Async, {"cuMemsetD32Async"}, missing);
  ok &= resolve(lib, api.cuModuleLoadData, {"cuModuleLoadData"}, missing);
  ok &= resolve(lib, api.cuModuleUnload, {"cuModuleUnload"}, missing);
  ok &= resolve(lib, api.cuModuleGetFunction, {"cuModuleGetFunction"}, missing);
  ok &= resolve(lib, api.cuFuncGetAttribute, {"cuFuncGetAttribute"}, missing);
  ok &= resolve(lib, api.cuFuncSetAttribute, {"cuFuncSetAttribute"}, missing);
  ok &= resolve(lib, api.cuOccupancyMaxActiveBlocksPerMultiprocessor, {"cuOccupancyMaxActiveBlocksPerMultiprocessor"},
                missing);
  ok &= resolve(lib, api.cuLaunchKernel, {"cuLaunchKernel"}, missing);
  return ok;
}

}  // namespace

const LoadResult& load() {
  static LoadResult result;
  static Api api;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string errors;
    void* driver = open_first({"libcuda.so.1", "libcuda.so"}, api.driver_path, errors);
    if (!driver) {
      result.error = "no CUDA driver: cannot load libcuda.so.1 (is an NVIDIA driver installed?):" + errors;
      return;
    }
    std::string missing;
    if (!resolve_driver(driver, api, missing)) {
      result.error = "the CUDA driver " + api.driver_path + " is too old: it lacks " + missing;
      return;
    }
    const CUresult init = api.cuInit(0);
    if (init != CUDA_SUCCESS) {
      result.error = "the CUDA driver is present but cuInit failed: " + error_text(api, init);
      return;
    }
    result.driver = &api;
    if (api.cuDeviceGetCount(&result.device_count) != CUDA_SUCCESS) result.device_count = 0;
    void* nvrtc = open_nvrtc(api.nvrtc_path, errors);
    if (!nvrtc) {
      result.error =
          "CUDA devices are present but NVRTC (the run-time compiler) cannot be loaded; install the "
          "CUDA toolkit's nvrtc library or set KE_NVRTC_PATH:" +
          errors;
      return;
    }
    missing.clear();
    if (!resolve_nvrtc(nvrtc, api, missing)) {
      result.error = "NVRTC " + api.nvrtc_path + " is too old: it lacks " + missing;
      return;
    }
    result.api = &api;
  });
  return result;
}

const Api* load_nvrtc_only(std::string* error) {
  static Api api;
  static std::string load_error;
  static bool ok = false;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string errors;
    void* nvrtc = open_nvrtc(api.nvrtc_path, errors);
    if (!nvrtc) {
      load_error = "cannot load NVRTC:" + errors;
      return;
    }
    std::string missing;
    ok = resolve_nvrtc(nvrtc, api, missing);
    if (!ok) load_error = "NVRTC " + api.nvrtc_path + " lacks " + missing;
  });
  if (!ok && error) *error = load_error;
  return ok ? &api : nullptr;
}

std::string error_text(const Api& api, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(r, &text);
  std::string out = name ? name : "CUDA error " + std::to_string(r);
  if (text) out += std::string(": ") + text;
  return out;
}

bool is_sticky(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return true;
    default: return false;
  }
}

}  // namespace kernelevolve::cuda
