// The HIP runtime and hiprtc, loaded at run time with dlopen. Only what HipDevice uses is declared; the
// constants are those of ROCm 6's hip_runtime_api.h (hipDeviceAttribute_t was renumbered in ROCm 5.x,
// so older runtimes report wrong attribute values: the device's description is then wrong, never its
// results).
#pragma once
#include <cstddef>
#include <string>

namespace kernelevolve::hip {

using hipError_t = int;
using hipModule_t = struct ihipModule_t*;
using hipFunction_t = struct ihipModuleSymbol_t*;
using hipStream_t = struct ihipStream_t*;
using hipEvent_t = struct ihipEvent_t*;
using hipDeviceptr_t = void*;
using hiprtcResult = int;
using hiprtcProgram = struct _hiprtcProgram*;

enum : int {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorOutOfMemory = 2,
  hipErrorNoDevice = 100,
  hipErrorInvalidDevice = 101,
  hipErrorECCNotCorrectable = 214,
  hipErrorIllegalAddress = 700,
  hipErrorLaunchOutOfResources = 701,
  hipErrorLaunchTimeOut = 702,
  hipErrorContextIsDestroyed = 709,
  hipErrorAssert = 710,
  hipErrorLaunchFailure = 719,
};

// hipDeviceAttribute_t (ROCm 6).
enum : int {
  hipDeviceAttributeClockRate = 5,
  hipDeviceAttributeL2CacheSize = 19,
  hipDeviceAttributeComputeCapabilityMajor = 23,
  hipDeviceAttributeMaxThreadsPerBlock = 56,
  hipDeviceAttributeMaxThreadsPerMultiProcessor = 57,
  hipDeviceAttributeMemoryBusWidth = 59,
  hipDeviceAttributeMemoryClockRate = 60,
  hipDeviceAttributeComputeCapabilityMinor = 61,
  hipDeviceAttributeMultiprocessorCount = 63,
  hipDeviceAttributeMaxSharedMemoryPerBlock = 74,
  hipDeviceAttributeWarpSize = 87,
};

// hipFunction_attribute (same values as CUDA's).
enum : int {
  HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  HIP_FUNC_ATTRIBUTE_NUM_REGS = 4,
};

enum : unsigned { hipStreamNonBlocking = 0x1 };
enum : int { HIPRTC_SUCCESS = 0 };

struct Api {
  hipError_t (*hipInit)(unsigned) = nullptr;
  hipError_t (*hipGetDeviceCount)(int*) = nullptr;
  hipError_t (*hipSetDevice)(int) = nullptr;
  hipError_t (*hipDeviceGetName)(char*, int, int) = nullptr;
  hipError_t (*hipDeviceGetAttribute)(int*, int, int) = nullptr;
  hipError_t (*hipDeviceTotalMem)(std::size_t*, int) = nullptr;
  hipError_t (*hipRuntimeGetVersion)(int*) = nullptr;
  const char* (*hipGetErrorName)(hipError_t) = nullptr;
  const char* (*hipGetErrorString)(hipError_t) = nullptr;
  hipError_t (*hipDeviceSynchronize)() = nullptr;
  hipError_t (*hipStreamCreateWithFlags)(hipStream_t*, unsigned) = nullptr;
  hipError_t (*hipStreamDestroy)(hipStream_t) = nullptr;
  hipError_t (*hipStreamSynchronize)(hipStream_t) = nullptr;
  hipError_t (*hipEventCreate)(hipEvent_t*) = nullptr;
  hipError_t (*hipEventDestroy)(hipEvent_t) = nullptr;
  hipError_t (*hipEventRecord)(hipEvent_t, hipStream_t) = nullptr;
  hipError_t (*hipEventElapsedTime)(float*, hipEvent_t, hipEvent_t) = nullptr;
  hipError_t (*hipMalloc)(void**, std::size_t) = nullptr;
  hipError_t (*hipFree)(void*) = nullptr;
  hipError_t (*hipMemcpyHtoDAsync)(hipDeviceptr_t, void*, std::size_t, hipStream_t) = nullptr;
  hipError_t (*hipMemcpyDtoHAsync)(void*, hipDeviceptr_t, std::size_t, hipStream_t) = nullptr;
  hipError_t (*hipMemcpyDtoDAsync)(hipDeviceptr_t, hipDeviceptr_t, std::size_t, hipStream_t) = nullptr;
  hipError_t (*hipMemsetD8Async)(hipDeviceptr_t, unsigned char, std::size_t, hipStream_t) = nullptr;
  hipError_t (*hipMemsetD16Async)(hipDeviceptr_t, unsigned short, std::size_t, hipStream_t) = nullptr;
  hipError_t (*hipMemsetD32Async)(hipDeviceptr_t, int, std::size_t, hipStream_t) = nullptr;
  hipError_t (*hipModuleLoadData)(hipModule_t*, const void*) = nullptr;
  hipError_t (*hipModuleUnload)(hipModule_t) = nullptr;
  hipError_t (*hipModuleGetFunction)(hipFunction_t*, hipModule_t, const char*) = nullptr;
  hipError_t (*hipFuncGetAttribute)(int*, int, hipFunction_t) = nullptr;
  hipError_t (*hipModuleLaunchKernel)(hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, hipStream_t, void**, void**) = nullptr;
  // Optional: null in a runtime without it, and the occupancy of a kernel is then unknown.
  hipError_t (*hipModuleOccupancyMaxActiveBlocksPerMultiprocessor)(int*, hipFunction_t, int, std::size_t) = nullptr;

  hiprtcResult (*hiprtcCreateProgram)(hiprtcProgram*, const char*, const char*, int, const char**,
                                      const char**) = nullptr;
  hiprtcResult (*hiprtcCompileProgram)(hiprtcProgram, int, const char**) = nullptr;
  hiprtcResult (*hiprtcGetProgramLogSize)(hiprtcProgram, std::size_t*) = nullptr;
  hiprtcResult (*hiprtcGetProgramLog)(hiprtcProgram, char*) = nullptr;
  hiprtcResult (*hiprtcGetCodeSize)(hiprtcProgram, std::size_t*) = nullptr;
  hiprtcResult (*hiprtcGetCode)(hiprtcProgram, char*) = nullptr;
  hiprtcResult (*hiprtcDestroyProgram)(hiprtcProgram*) = nullptr;
  const char* (*hiprtcGetErrorString)(hiprtcResult) = nullptr;

  std::string runtime_path;
  std::string hiprtc_path;
};

struct LoadResult {
  const Api* api = nullptr;      // runtime and hiprtc both usable
  const Api* runtime = nullptr;  // the runtime alone (for listing)
  int device_count = 0;
  std::string error;  // why api is null
};

// Loads libamdhip64 and libhiprtc (newest ABI first; KE_HIP_PATH / KE_HIPRTC_PATH first if set) once per
// process and calls hipInit. Thread-safe; never throws.
const LoadResult& load();

std::string error_text(const Api& api, hipError_t r);
bool is_sticky(hipError_t r);

}  // namespace kernelevolve::hip
