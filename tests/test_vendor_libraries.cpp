// cuBLASLt and cuDNN as library steps (src/devices/cuda/vendor_libraries.hpp). Everywhere: the epilogue
// names, output sizes, the refusals that come before any library, and a library that is not where
// $KE_CUBLASLT / $KE_CUDNN say. On a GPU with the libraries: products for every epilogue, both layouts of B
// and all three dtypes, cuBLAS's GEMM with A transposed and batched, grouped, strided, padded, dilated 2-d and
// 3-d convolutions, forward and transposed (with output_padding), with and without bias, and 3-d average pooling,
// against the host in double.
// The GPU part skips (and says why) without a driver, a GPU or the libraries; it looks for the libraries on the
// loader's path, in $KE_VENDOR_LIB_DIRS (directories separated by ':') and in PyTorch's nvidia/*/lib folders under
// /opt/torch/.venv.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <dlfcn.h>

#include "devices/cuda/cuda_api.hpp"
#include "devices/cuda/vendor_libraries.hpp"

#if defined(KE_HAVE_CUDA_HEADERS) && __has_include(<cublasLt.h>) && __has_include(<cudnn.h>)
// The types, constants and signatures that cublaslt.cpp and cudnn.cpp declare by hand must be the headers'.
// (The legacy cuDNN API is marked deprecated in cuDNN 9; naming it is the point here.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cublasLt.h>
#include <cudnn.h>

#include <cstddef>
#include <type_traits>
#define KE_VENDOR_ABI_ONLY
#include "devices/cuda/cublaslt.cpp"
#include "devices/cuda/cudnn.cpp"

namespace kernelevolve::cuda::abi_check {
namespace c = kernelevolve::cuda;
#define KE_SAME(name) static_assert(static_cast<long long>(c::name) == static_cast<long long>(::name), #name)
KE_SAME(CUBLAS_STATUS_SUCCESS);
KE_SAME(CUBLAS_STATUS_NOT_INITIALIZED);
KE_SAME(CUBLAS_STATUS_ALLOC_FAILED);
KE_SAME(CUBLAS_STATUS_INVALID_VALUE);
KE_SAME(CUBLAS_STATUS_ARCH_MISMATCH);
KE_SAME(CUBLAS_STATUS_MAPPING_ERROR);
KE_SAME(CUBLAS_STATUS_EXECUTION_FAILED);
KE_SAME(CUBLAS_STATUS_INTERNAL_ERROR);
KE_SAME(CUBLAS_STATUS_NOT_SUPPORTED);
KE_SAME(CUBLAS_STATUS_LICENSE_ERROR);
KE_SAME(CUBLAS_OP_N);
KE_SAME(CUBLAS_OP_T);
KE_SAME(CUBLAS_COMPUTE_32F);
KE_SAME(CUBLAS_COMPUTE_32F_FAST_TF32);
KE_SAME(CUDA_R_32F);
KE_SAME(CUDA_R_16F);
KE_SAME(CUDA_R_16BF);
KE_SAME(CUBLASLT_MATMUL_DESC_TRANSA);
KE_SAME(CUBLASLT_MATMUL_DESC_TRANSB);
KE_SAME(CUBLASLT_MATMUL_DESC_EPILOGUE);
KE_SAME(CUBLASLT_MATMUL_DESC_BIAS_POINTER);
KE_SAME(CUBLASLT_EPILOGUE_DEFAULT);
KE_SAME(CUBLASLT_EPILOGUE_RELU);
KE_SAME(CUBLASLT_EPILOGUE_BIAS);
KE_SAME(CUBLASLT_EPILOGUE_RELU_BIAS);
KE_SAME(CUBLASLT_EPILOGUE_GELU);
KE_SAME(CUBLASLT_EPILOGUE_GELU_BIAS);
KE_SAME(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
KE_SAME(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
KE_SAME(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
KE_SAME(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
KE_SAME(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
KE_SAME(CUDNN_STATUS_SUCCESS);
KE_SAME(CUDNN_DATA_FLOAT);
KE_SAME(CUDNN_DATA_HALF);
KE_SAME(CUDNN_DATA_BFLOAT16);
KE_SAME(CUDNN_DEFAULT_MATH);
KE_SAME(CUDNN_TENSOR_OP_MATH);
KE_SAME(CUDNN_FMA_MATH);
KE_SAME(CUDNN_TENSOR_NCHW);
KE_SAME(CUDNN_CROSS_CORRELATION);
KE_SAME(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
KE_SAME(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
KE_SAME(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);
KE_SAME(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
KE_SAME(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
KE_SAME(CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING);
KE_SAME(CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING);
KE_SAME(CUDNN_NOT_PROPAGATE_NAN);
#undef KE_SAME
// Enums are passed as int.
static_assert(sizeof(::cublasStatus_t) == sizeof(int) && sizeof(::cublasComputeType_t) == sizeof(int) &&
              sizeof(::cudaDataType) == sizeof(int) && sizeof(::cublasLtMatmulDescAttributes_t) == sizeof(int) &&
              sizeof(::cublasLtMatmulPreferenceAttributes_t) == sizeof(int));
static_assert(sizeof(::cudnnStatus_t) == sizeof(int) && sizeof(::cudnnDataType_t) == sizeof(int) &&
              sizeof(::cudnnMathType_t) == sizeof(int) && sizeof(::cudnnConvolutionFwdAlgo_t) == sizeof(int) &&
              sizeof(::cudnnConvolutionBwdDataAlgo_t) == sizeof(int) && sizeof(::cudnnPoolingMode_t) == sizeof(int) &&
              sizeof(::cudnnNanPropagation_t) == sizeof(int));
// Structures the libraries write into: same size, same offsets.
#define KE_SAME_FIELD(ours, theirs, field) static_assert(offsetof(ours, field) == offsetof(theirs, field), #field)
static_assert(sizeof(c::cublasLtMatmulAlgo_t) == sizeof(::cublasLtMatmulAlgo_t));
static_assert(sizeof(c::cublasLtMatmulHeuristicResult_t) == sizeof(::cublasLtMatmulHeuristicResult_t));
KE_SAME_FIELD(c::cublasLtMatmulHeuristicResult_t, ::cublasLtMatmulHeuristicResult_t, workspaceSize);
KE_SAME_FIELD(c::cublasLtMatmulHeuristicResult_t, ::cublasLtMatmulHeuristicResult_t, state);
KE_SAME_FIELD(c::cublasLtMatmulHeuristicResult_t, ::cublasLtMatmulHeuristicResult_t, wavesCount);
static_assert(sizeof(c::cudnnConvolutionFwdAlgoPerf_t) == sizeof(::cudnnConvolutionFwdAlgoPerf_t));
KE_SAME_FIELD(c::cudnnConvolutionFwdAlgoPerf_t, ::cudnnConvolutionFwdAlgoPerf_t, algo);
KE_SAME_FIELD(c::cudnnConvolutionFwdAlgoPerf_t, ::cudnnConvolutionFwdAlgoPerf_t, status);
KE_SAME_FIELD(c::cudnnConvolutionFwdAlgoPerf_t, ::cudnnConvolutionFwdAlgoPerf_t, time);
KE_SAME_FIELD(c::cudnnConvolutionFwdAlgoPerf_t, ::cudnnConvolutionFwdAlgoPerf_t, memory);
KE_SAME_FIELD(c::cudnnConvolutionFwdAlgoPerf_t, ::cudnnConvolutionFwdAlgoPerf_t, determinism);
KE_SAME_FIELD(c::cudnnConvolutionFwdAlgoPerf_t, ::cudnnConvolutionFwdAlgoPerf_t, mathType);
// cudnn.cpp reads backward data's answers through the forward's structure: the same layout.
static_assert(sizeof(c::cudnnConvolutionBwdDataAlgoPerf_t) == sizeof(::cudnnConvolutionBwdDataAlgoPerf_t));
KE_SAME_FIELD(c::cudnnConvolutionBwdDataAlgoPerf_t, ::cudnnConvolutionBwdDataAlgoPerf_t, algo);
KE_SAME_FIELD(c::cudnnConvolutionBwdDataAlgoPerf_t, ::cudnnConvolutionBwdDataAlgoPerf_t, status);
KE_SAME_FIELD(c::cudnnConvolutionBwdDataAlgoPerf_t, ::cudnnConvolutionBwdDataAlgoPerf_t, time);
KE_SAME_FIELD(c::cudnnConvolutionBwdDataAlgoPerf_t, ::cudnnConvolutionBwdDataAlgoPerf_t, memory);
KE_SAME_FIELD(c::cudnnConvolutionBwdDataAlgoPerf_t, ::cudnnConvolutionBwdDataAlgoPerf_t, determinism);
KE_SAME_FIELD(c::cudnnConvolutionBwdDataAlgoPerf_t, ::cudnnConvolutionBwdDataAlgoPerf_t, mathType);
#undef KE_SAME_FIELD
// Signatures, parameter by parameter: the same count, each of the same size and kind (pointer, floating, integer).
// Ours name opaque pointers and enums differently, so the types themselves cannot be compared.
template <class A, class B>
constexpr bool same_abi =
    sizeof(A) == sizeof(B) && std::is_pointer_v<A> == std::is_pointer_v<B>&& std::is_floating_point_v<A> ==
                                  std::is_floating_point_v<B>;
template <class R1, class... A1, class R2, class... A2>
constexpr bool same_signature(R1 (*)(A1...), R2 (*)(A2...)) {
  if constexpr (sizeof...(A1) != sizeof...(A2)) return false;
  else return same_abi<R1, R2> && (same_abi<A1, A2> && ...);
}
#define KE_SAME_FN(table, name) static_assert(same_signature(c::table{}.name, &::name), #name)
KE_SAME_FN(LtApi, cublasLtCreate);
KE_SAME_FN(LtApi, cublasLtGetVersion);
KE_SAME_FN(LtApi, cublasLtGetStatusName);
KE_SAME_FN(LtApi, cublasLtMatmulDescCreate);
KE_SAME_FN(LtApi, cublasLtMatmulDescDestroy);
KE_SAME_FN(LtApi, cublasLtMatmulDescSetAttribute);
KE_SAME_FN(LtApi, cublasLtMatrixLayoutCreate);
KE_SAME_FN(LtApi, cublasLtMatrixLayoutDestroy);
KE_SAME_FN(LtApi, cublasLtMatmulPreferenceCreate);
KE_SAME_FN(LtApi, cublasLtMatmulPreferenceDestroy);
KE_SAME_FN(LtApi, cublasLtMatmulPreferenceSetAttribute);
KE_SAME_FN(LtApi, cublasLtMatmulAlgoGetHeuristic);
KE_SAME_FN(LtApi, cublasLtMatmul);
KE_SAME_FN(DnnApi, cudnnGetVersion);
KE_SAME_FN(DnnApi, cudnnGetErrorString);
KE_SAME_FN(DnnApi, cudnnCreate);
KE_SAME_FN(DnnApi, cudnnSetStream);
KE_SAME_FN(DnnApi, cudnnCreateTensorDescriptor);
KE_SAME_FN(DnnApi, cudnnSetTensorNdDescriptor);
KE_SAME_FN(DnnApi, cudnnDestroyTensorDescriptor);
KE_SAME_FN(DnnApi, cudnnCreateFilterDescriptor);
KE_SAME_FN(DnnApi, cudnnSetFilterNdDescriptor);
KE_SAME_FN(DnnApi, cudnnDestroyFilterDescriptor);
KE_SAME_FN(DnnApi, cudnnCreateConvolutionDescriptor);
KE_SAME_FN(DnnApi, cudnnSetConvolutionNdDescriptor);
KE_SAME_FN(DnnApi, cudnnSetConvolutionGroupCount);
KE_SAME_FN(DnnApi, cudnnSetConvolutionMathType);
KE_SAME_FN(DnnApi, cudnnDestroyConvolutionDescriptor);
KE_SAME_FN(DnnApi, cudnnGetConvolutionNdForwardOutputDim);
KE_SAME_FN(DnnApi, cudnnGetConvolutionForwardAlgorithmMaxCount);
KE_SAME_FN(DnnApi, cudnnGetConvolutionForwardAlgorithm_v7);
KE_SAME_FN(DnnApi, cudnnGetConvolutionForwardWorkspaceSize);
KE_SAME_FN(DnnApi, cudnnConvolutionForward);
KE_SAME_FN(DnnApi, cudnnGetConvolutionBackwardDataAlgorithmMaxCount);
KE_SAME_FN(DnnApi, cudnnGetConvolutionBackwardDataAlgorithm_v7);
KE_SAME_FN(DnnApi, cudnnGetConvolutionBackwardDataWorkspaceSize);
KE_SAME_FN(DnnApi, cudnnConvolutionBackwardData);
KE_SAME_FN(DnnApi, cudnnFindConvolutionForwardAlgorithmEx);
KE_SAME_FN(DnnApi, cudnnFindConvolutionBackwardDataAlgorithmEx);
KE_SAME_FN(DnnApi, cudnnAddTensor);
KE_SAME_FN(DnnApi, cudnnCreatePoolingDescriptor);
KE_SAME_FN(DnnApi, cudnnSetPoolingNdDescriptor);
KE_SAME_FN(DnnApi, cudnnGetPoolingNdForwardOutputDim);
KE_SAME_FN(DnnApi, cudnnPoolingForward);
KE_SAME_FN(DnnApi, cudnnDestroyPoolingDescriptor);
#undef KE_SAME_FN
// Where ints of the same size could be swapped unnoticed above: the order of the Nd descriptors' arguments, as the
// declarations in cudnn.cpp have it (the data type first for tensors; type before format for filters).
static_assert(
    std::is_same_v<decltype(&::cudnnSetTensorNdDescriptor),
                   ::cudnnStatus_t (*)(::cudnnTensorDescriptor_t, ::cudnnDataType_t, int, const int*, const int*)>);
static_assert(std::is_same_v<decltype(&::cudnnSetFilterNdDescriptor),
                             ::cudnnStatus_t (*)(::cudnnFilterDescriptor_t, ::cudnnDataType_t, ::cudnnTensorFormat_t,
                                                 int, const int*)>);
static_assert(std::is_same_v<decltype(&::cudnnSetConvolutionNdDescriptor),
                             ::cudnnStatus_t (*)(::cudnnConvolutionDescriptor_t, int, const int*, const int*,
                                                 const int*, ::cudnnConvolutionMode_t, ::cudnnDataType_t)>);
}  // namespace kernelevolve::cuda::abi_check
#pragma GCC diagnostic pop
#endif

namespace c = kernelevolve::cuda;
namespace fs = std::filesystem;

namespace {

// Sets an environment variable for a scope and puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

std::vector<std::string> library_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("KE_VENDOR_LIB_DIRS")) {
    std::string list = env;
    std::size_t start = 0;
    while (start <= list.size()) {
      const std::size_t end = std::min(list.find(':', start), list.size());
      if (end > start) dirs.push_back(list.substr(start, end - start));
      start = end + 1;
    }
  }
  std::error_code ec;
  const fs::path venv_lib = "/opt/torch/.venv/lib";
  if (fs::is_directory(venv_lib, ec)) {
    for (const auto& python : fs::directory_iterator(venv_lib, ec)) {
      const fs::path nvidia = python.path() / "site-packages" / "nvidia";
      if (!fs::is_directory(nvidia, ec)) continue;
      for (const auto& package : fs::directory_iterator(nvidia, ec))
        if (fs::is_directory(package.path() / "lib", ec)) dirs.push_back((package.path() / "lib").string());
    }
  }
  return dirs;
}

// A deterministic generator of values in [-1, 1).
struct Lcg {
  std::uint64_t state;
  float next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>((state >> 40) & 0xFFFFFF) / static_cast<float>(1 << 23) - 1.0f;
  }
};

std::vector<float> random_values(std::size_t count, std::uint64_t seed) {
  Lcg lcg{seed};
  std::vector<float> v(count);
  for (float& x : v) x = lcg.next();
  return v;
}

// ---- element types as stored on the device --------------------------------------------------------------

std::uint16_t to_bf16(float f) {  // round to nearest even; the values used here are finite
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>(bits >> 16);
}
float from_bf16(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}
// IEEE half: the values encoded here are normal or zero (multiples of 1/16 in [-1, 1]).
std::uint16_t to_f16(float f) {
  if (f == 0.0f) return 0;
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  const std::uint32_t sign = (bits >> 16) & 0x8000;
  const int exponent = static_cast<int>((bits >> 23) & 0xFF) - 127 + 15;
  const std::uint32_t mantissa = (bits >> 13) & 0x3FF;  // exact for the values used
  return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(exponent) << 10) | mantissa);
}
float from_f16(std::uint16_t h) {
  const int sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  float value = 0;
  if (exponent == 0) value = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31) value = mantissa ? NAN : INFINITY;
  else value = std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
  return sign ? -value : value;
}

std::size_t element_bytes(const std::string& dtype) { return dtype == "f32" ? 4 : 2; }

std::vector<unsigned char> encode(const std::vector<float>& values, const std::string& dtype) {
  std::vector<unsigned char> bytes(values.size() * element_bytes(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == "f32") {
      std::memcpy(&bytes[4 * i], &values[i], 4);
    } else {
      const std::uint16_t h = dtype == "f16" ? to_f16(values[i]) : to_bf16(values[i]);
      std::memcpy(&bytes[2 * i], &h, 2);
    }
  }
  return bytes;
}

std::vector<float> decode(const std::vector<unsigned char>& bytes, const std::string& dtype) {
  std::vector<float> values(bytes.size() / element_bytes(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == "f32") {
      std::memcpy(&values[i], &bytes[4 * i], 4);
    } else {
      std::uint16_t h = 0;
      std::memcpy(&h, &bytes[2 * i], 2);
      values[i] = dtype == "f16" ? from_f16(h) : from_bf16(h);
    }
  }
  return values;
}

// Values that f16 and bf16 hold exactly, so that the host's reference sees the device's inputs.
std::vector<float> representable(std::vector<float> values, const std::string& dtype) {
  if (dtype != "f32")
    for (float& v : values) v = std::round(v * 16.0f) / 16.0f;
  return values;
}

// ---- the GPU: the primary context of device 0 and a non-blocking stream, as the CUDA device has -------

struct Gpu {
  const c::Api* api = nullptr;
  c::CUdevice device = 0;
  c::CUcontext context = nullptr;
  c::CUstream stream = nullptr;
  std::string reason;  // why there is none
};

const Gpu& gpu() {
  static const Gpu g = [] {
    Gpu out;
    const c::LoadResult& loaded = c::load();
    if (!loaded.driver) {
      out.reason = loaded.error;
      return out;
    }
    if (loaded.device_count < 1) {
      out.reason = "no CUDA device";
      return out;
    }
    const c::Api& api = *loaded.driver;
    if (api.cuDeviceGet(&out.device, 0) != c::CUDA_SUCCESS ||
        api.cuDevicePrimaryCtxRetain(&out.context, out.device) != c::CUDA_SUCCESS ||
        api.cuCtxSetCurrent(out.context) != c::CUDA_SUCCESS ||
        api.cuStreamCreate(&out.stream, c::CU_STREAM_NON_BLOCKING) != c::CUDA_SUCCESS) {
      out.reason = "cannot set up device 0's primary context and a stream";
      return out;
    }
    out.api = &api;
    return out;
  }();
  // doctest runs every case on the main thread, but a context is current per thread: make sure.
  if (g.api) g.api->cuCtxSetCurrent(g.context);
  return g;
}

// A device allocation for one test, freed at its end.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes) REQUIRE(gpu().api->cuMemAlloc(&ptr_, bytes) == c::CUDA_SUCCESS);
  }
  ~DeviceBuffer() {
    if (ptr_) gpu().api->cuMemFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::uint64_t address() const { return ptr_; }
  void upload(const std::vector<unsigned char>& host) {
    REQUIRE(host.size() <= bytes_);
    REQUIRE(gpu().api->cuMemcpyHtoDAsync(ptr_, host.data(), host.size(), gpu().stream) == c::CUDA_SUCCESS);
    REQUIRE(gpu().api->cuStreamSynchronize(gpu().stream) == c::CUDA_SUCCESS);
  }
  void poison() {  // all ones: NaN in f32, f16 and bf16 alike
    REQUIRE(gpu().api->cuMemsetD8Async(ptr_, 0xFF, bytes_, gpu().stream) == c::CUDA_SUCCESS);
  }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(bytes_);
    REQUIRE(gpu().api->cuMemcpyDtoHAsync(host.data(), ptr_, bytes_, gpu().stream) == c::CUDA_SUCCESS);
    REQUIRE(gpu().api->cuStreamSynchronize(gpu().stream) == c::CUDA_SUCCESS);
    return host;
  }

 private:
  std::size_t bytes_ = 0;
  c::CUdeviceptr ptr_ = 0;
};

const bool kNoGpu = !gpu().api;

c::LibraryLoad cublaslt() {
  static const c::LibraryLoad load = kNoGpu ? c::LibraryLoad{} : c::load_cublaslt(library_dirs());
  return load;
}
c::LibraryLoad cudnn() {
  static const c::LibraryLoad load = kNoGpu ? c::LibraryLoad{} : c::load_cudnn(library_dirs());
  return load;
}

double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// The largest |got - ref| / (atol + rtol·|ref|) and where; NaN counts as infinitely wrong.
struct Worst {
  double ratio = 0;
  std::size_t index = 0;
  double got = 0, ref = 0;
};
Worst compare(const std::vector<float>& got, const std::vector<double>& ref, double atol, double rtol) {
  Worst worst;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double error = std::isnan(got[i]) ? INFINITY : std::fabs(got[i] - ref[i]);
    const double ratio = error / (atol + rtol * std::fabs(ref[i]));
    if (ratio > worst.ratio || std::isnan(got[i])) worst = {std::isnan(got[i]) ? INFINITY : ratio, i, got[i], ref[i]};
  }
  return worst;
}

// One product on the device against the host; the activation given as a function of the pre-activation.
// `batch` and `a_transposed` are cuBLAS's GEMM's alone (classic).
void check_matmul(std::int64_t m, std::int64_t n, std::int64_t k, bool b_transposed, c::MatmulEpilogue epilogue,
                  const std::string& dtype, double atol, double rtol,
                  std::size_t workspace_bytes = c::matmul_workspace_bytes(), bool classic = false,
                  std::int64_t batch = 1, bool a_transposed = false) {
  CAPTURE(classic);
  CAPTURE(batch);
  CAPTURE(a_transposed);
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(b_transposed);
  CAPTURE(dtype);
  const std::string epilogue_name = c::to_string(epilogue);
  CAPTURE(epilogue_name);
  const auto mk = static_cast<std::size_t>(batch * m * k), kn = static_cast<std::size_t>(batch * k * n),
             mn = static_cast<std::size_t>(batch * m * n);
  const std::vector<float> a = representable(random_values(mk, 1 + static_cast<std::uint64_t>(m)), dtype);
  const std::vector<float> b = representable(random_values(kn, 2 + static_cast<std::uint64_t>(n)), dtype);
  const std::vector<float> bias = representable(random_values(static_cast<std::size_t>(n), 3), dtype);
  const std::size_t e = element_bytes(dtype);
  DeviceBuffer da(mk * e), db(kn * e), dd(mn * e), dbias(static_cast<std::size_t>(n) * e), workspace(workspace_bytes);
  da.upload(encode(a, dtype));
  db.upload(encode(b, dtype));
  dbias.upload(encode(bias, dtype));
  dd.poison();

  c::MatmulCall call;
  call.m = m, call.n = n, call.k = k, call.dtype = dtype, call.b_transposed = b_transposed, call.epilogue = epilogue;
  call.batch = batch, call.a_transposed = a_transposed;
  call.a = da.address(), call.b = db.address(), call.d = dd.address(), call.bias = dbias.address();
  call.workspace = workspace.address(), call.workspace_bytes = workspace_bytes;
  const std::string error = classic ? c::gemm(gpu().stream, call) : c::matmul(gpu().stream, call);
  REQUIRE_MESSAGE(error.empty(), error);
  const std::vector<float> got = decode(dd.download(), dtype);

  const bool add_bias = epilogue == c::MatmulEpilogue::bias || epilogue == c::MatmulEpilogue::bias_relu ||
                        epilogue == c::MatmulEpilogue::bias_gelu;
  const bool relu = epilogue == c::MatmulEpilogue::relu || epilogue == c::MatmulEpilogue::bias_relu;
  const bool gelu = epilogue == c::MatmulEpilogue::gelu || epilogue == c::MatmulEpilogue::bias_gelu;
  std::vector<double> ref(mn), ref_erf(mn);
  for (std::int64_t batch_index = 0; batch_index < batch; ++batch_index) {
    // Each product's operands follow the previous one's.
    const std::int64_t a0 = batch_index * m * k, b0 = batch_index * k * n, d0 = batch_index * m * n;
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          // B stored [K,N], or [N,K] when transposed: the same matrix read through the other index order; A [M,K]
          // or [K,M] likewise.
          const double bv =
              b_transposed ? b[static_cast<std::size_t>(b0 + j * k + p)] : b[static_cast<std::size_t>(b0 + p * n + j)];
          const double av =
              a_transposed ? a[static_cast<std::size_t>(a0 + p * m + i)] : a[static_cast<std::size_t>(a0 + i * k + p)];
          sum += av * bv;
        }
        if (add_bias) sum += bias[static_cast<std::size_t>(j)];
        const auto at = static_cast<std::size_t>(d0 + i * n + j);
        ref[at] = relu ? std::max(sum, 0.0) : gelu ? gelu_tanh(sum) : sum;
        ref_erf[at] = gelu ? gelu_erf(sum) : ref[at];
      }
    }
  }
  // cuBLASLt's GELU may use a hardware tanh (relative error near 2^-11): judged more loosely, with how close
  // each form of GELU came reported, so that a run shows which one the library computes.
  if (gelu) atol = std::max(atol, 1e-3), rtol = std::max(rtol, 1e-3);
  const Worst worst = compare(got, ref, atol, rtol);
  const Worst worst_erf = compare(got, ref_erf, atol, rtol);
  if (gelu && dtype == "f32" && m == 256)
    MESSAGE("GELU epilogue, " << (b_transposed ? "B^T" : "B") << ": worst error " << worst.ratio
                              << "x the tolerance against the tanh form, " << worst_erf.ratio
                              << "x against the erf form");
  INFO("worst element " << worst.index << ": got " << worst.got << ", expected " << worst.ref << " (" << worst.ratio
                        << "x the tolerance; against GELU's erf form instead: " << worst_erf.ratio << "x)");
  CHECK(worst.ratio <= 1.0);
}

// A naive convolution in double, as torch.nn.functional's conv2d, conv3d, conv_transpose2d and conv_transpose3d
// compute it (vendor_libraries.hpp gives the layouts); a 2-d call has depth 1. The forward one gathers each output
// from its inputs; the transposed one scatters each input into the outputs it reaches, the definition PyTorch's
// documentation gives.
std::vector<double> host_conv(const c::ConvCall& call, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>* bias, std::int64_t o_out, std::int64_t p_out,
                              std::int64_t q_out) {
  const bool three = call.spatial_dims == 3;
  const std::int64_t depth = three ? call.d : 1, taps = three ? call.t : 1;
  const std::int64_t stride_d = three ? call.stride_d : 1, pad_d = three ? call.pad_d : 0,
                     dil_d = three ? call.dil_d : 1;
  const std::int64_t cg = call.c / call.groups, kg = call.k / call.groups;
  auto at = [](std::int64_t index) { return static_cast<std::size_t>(index); };
  auto x_at = [&](std::int64_t n, std::int64_t ch, std::int64_t i, std::int64_t h, std::int64_t v) {
    return static_cast<double>(x[at((((n * call.c + ch) * depth + i) * call.h + h) * call.w + v)]);
  };
  auto y_index = [&](std::int64_t n, std::int64_t ko, std::int64_t o, std::int64_t p, std::int64_t q) {
    return at((((n * call.k + ko) * o_out + o) * p_out + p) * q_out + q);
  };
  std::vector<double> y(at(call.n * call.k * o_out * p_out * q_out), 0.0);
  for (std::int64_t n = 0; n < call.n; ++n)
    for (std::int64_t ko = 0; ko < call.k; ++ko)
      for (std::int64_t o = 0; o < o_out; ++o)
        for (std::int64_t p = 0; p < p_out; ++p)
          for (std::int64_t q = 0; q < q_out; ++q) y[y_index(n, ko, o, p, q)] = bias ? (*bias)[at(ko)] : 0.0;
  for (std::int64_t n = 0; n < call.n; ++n) {
    if (!call.transposed) {
      for (std::int64_t ko = 0; ko < call.k; ++ko)
        for (std::int64_t o = 0; o < o_out; ++o)
          for (std::int64_t p = 0; p < p_out; ++p)
            for (std::int64_t q = 0; q < q_out; ++q)
              for (std::int64_t ci = 0; ci < cg; ++ci)
                for (std::int64_t t = 0; t < taps; ++t)
                  for (std::int64_t r = 0; r < call.r; ++r)
                    for (std::int64_t s = 0; s < call.s; ++s) {
                      const std::int64_t di = o * stride_d - pad_d + t * dil_d;
                      const std::int64_t hi = p * call.stride_h - call.pad_h + r * call.dil_h;
                      const std::int64_t wi = q * call.stride_w - call.pad_w + s * call.dil_w;
                      if (di < 0 || di >= depth || hi < 0 || hi >= call.h || wi < 0 || wi >= call.w) continue;
                      y[y_index(n, ko, o, p, q)] += x_at(n, (ko / kg) * cg + ci, di, hi, wi) *
                                                    w[at((((ko * cg + ci) * taps + t) * call.r + r) * call.s + s)];
                    }
      continue;
    }
    for (std::int64_t ci = 0; ci < call.c; ++ci)
      for (std::int64_t di = 0; di < depth; ++di)
        for (std::int64_t hi = 0; hi < call.h; ++hi)
          for (std::int64_t wi = 0; wi < call.w; ++wi)
            for (std::int64_t kl = 0; kl < kg; ++kl)
              for (std::int64_t t = 0; t < taps; ++t)
                for (std::int64_t r = 0; r < call.r; ++r)
                  for (std::int64_t s = 0; s < call.s; ++s) {
                    const std::int64_t o = di * stride_d - pad_d + t * dil_d;
                    const std::int64_t p = hi * call.stride_h - call.pad_h + r * call.dil_h;
                    const std::int64_t q = wi * call.stride_w - call.pad_w + s * call.dil_w;
                    if (o < 0 || o >= o_out || p < 0 || p >= p_out || q < 0 || q >= q_out) continue;
                    y[y_index(n, (ci / cg) * kg + kl, o, p, q)] +=
                        x_at(n, ci, di, hi, wi) * w[at((((ci * kg + kl) * taps + t) * call.r + r) * call.s + s)];
                  }
  }
  return y;
}

// max_elements below INT_MAX: the call runs in batch slices of at most that many elements an operand (as one over
// 2^31 elements does at INT_MAX), each written where its samples go.
void check_conv(c::ConvCall call, bool with_bias, bool with_workspace, double atol, double rtol,
                std::int64_t max_elements = INT_MAX) {
  CAPTURE(call.spatial_dims);
  CAPTURE(call.transposed);
  CAPTURE(call.dtype);
  CAPTURE(call.groups);
  CAPTURE(call.stride_h);
  CAPTURE(call.dil_h);
  CAPTURE(with_bias);
  CAPTURE(with_workspace);
  std::int64_t o = 0, p = 0, q = 0;
  REQUIRE(c::conv_output_size(call, o, p, q));
  const std::int64_t depth = call.spatial_dims == 3 ? call.d : 1, taps = call.spatial_dims == 3 ? call.t : 1;
  const std::int64_t filter_rows = call.transposed ? call.c : call.k;
  const std::int64_t per_group = (call.transposed ? call.k : call.c) / call.groups;
  const auto xs = static_cast<std::size_t>(call.n * call.c * depth * call.h * call.w);
  const auto ws = static_cast<std::size_t>(filter_rows * per_group * taps * call.r * call.s);
  const auto ys = static_cast<std::size_t>(call.n * call.k * o * p * q);
  const std::vector<float> x = representable(random_values(xs, 11), call.dtype);
  const std::vector<float> w = representable(random_values(ws, 12), call.dtype);
  const std::vector<float> bias = representable(random_values(static_cast<std::size_t>(call.k), 13), call.dtype);
  const std::size_t e = element_bytes(call.dtype);
  const std::size_t workspace_bytes = with_workspace ? c::conv_workspace_bytes(call) : 0;
  MESSAGE((call.transposed ? "conv_transpose" : "conv")
          << call.spatial_dims << "d " << call.dtype << " groups " << call.groups << ": the chosen algorithm wants "
          << workspace_bytes << " bytes of workspace");
  DeviceBuffer dx(xs * e), dw(ws * e), dy(ys * e), dbias(static_cast<std::size_t>(call.k) * e),
      workspace(workspace_bytes);
  dx.upload(encode(x, call.dtype));
  dw.upload(encode(w, call.dtype));
  dbias.upload(encode(bias, call.dtype));
  dy.poison();
  call.x = dx.address(), call.filter = dw.address(), call.y = dy.address();
  call.bias = with_bias ? dbias.address() : 0;
  call.workspace = workspace.address(), call.workspace_bytes = workspace_bytes;
  const std::string error =
      max_elements == INT_MAX ? c::convolution(gpu().stream, call) : c::convolution(gpu().stream, call, max_elements);
  REQUIRE_MESSAGE(error.empty(), error);
  const std::vector<float> got = decode(dy.download(), call.dtype);
  const std::vector<double> ref = host_conv(call, x, w, with_bias ? &bias : nullptr, o, p, q);
  const Worst worst = compare(got, ref, atol, rtol);
  INFO("worst element " << worst.index << ": got " << worst.got << ", expected " << worst.ref << " (" << worst.ratio
                        << "x the tolerance)");
  CHECK(worst.ratio <= 1.0);
}

}  // namespace

// First in the file, before the GPU cases load anything: a process keeps a library once it has loaded, and
// later searches (with their $KE_CUBLASLT) are not made again.
TEST_CASE(
    "vendor libraries: a library that is not where $KE_CUBLASLT / $KE_CUDNN say is not loaded, and why names it") {
  const std::string bogus_lt = "/nonexistent/ke-test/libcublasLt.so.99";
  const std::string bogus_dnn = "/nonexistent/ke-test/libcudnn.so.99";
  {
    ScopedEnv env("KE_CUBLASLT", bogus_lt.c_str());
    const c::LibraryLoad load = c::load_cublaslt({"/nonexistent/ke-test"});
    if (load.ok) {
      MESSAGE("cuBLASLt was loaded earlier in this process (" << load.path << "): not tested");
    } else {
      CHECK(load.path.empty());
      CHECK_MESSAGE(load.why.find(bogus_lt) != std::string::npos, load.why);
      CHECK(load.why.find("KE_CUBLASLT") != std::string::npos);
    }
  }
  {
    ScopedEnv env("KE_CUDNN", bogus_dnn.c_str());
    const c::LibraryLoad load = c::load_cudnn({});
    if (load.ok) {
      MESSAGE("cuDNN was loaded earlier in this process (" << load.path << "): not tested");
    } else {
      CHECK_MESSAGE(load.why.find(bogus_dnn) != std::string::npos, load.why);
      CHECK(load.why.find("KE_CUDNN") != std::string::npos);
    }
  }
}

TEST_CASE("vendor libraries: the search looks on the loader's path, then in each extra directory, and says where") {
  // The search that both loaders use, on a library every machine has (the C math library) under a soname
  // that no loader path holds, in a directory of this test's own.
  void* libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(libm);
  const std::string libm_path = c::vendor_detail::loaded_path(libm);
  REQUIRE_FALSE(libm_path.empty());
  const fs::path dir = fs::temp_directory_path() / ("ke-vendor-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string soname = "libke_vendor_test.so.1";
  // A copy, not a link: the loader would take a link to a file it already has for that file, by its first name.
  fs::copy_file(libm_path, dir / soname, fs::copy_options::overwrite_existing);
  unsetenv("KE_VENDOR_TEST_LIBRARY");

  const auto missing = c::vendor_detail::open_library("the test library", "KE_VENDOR_TEST_LIBRARY", {soname.c_str()},
                                                      {"/nonexistent/ke-test/a", "/nonexistent/ke-test/b"}, {});
  CHECK(missing.handle == nullptr);
  CHECK_FALSE(missing.load.ok);
  CHECK(missing.load.why.find("/nonexistent/ke-test/a") != std::string::npos);
  CHECK(missing.load.why.find("/nonexistent/ke-test/b") != std::string::npos);
  CHECK(missing.load.why.find(soname) != std::string::npos);
  CHECK(missing.load.why.find("KE_VENDOR_TEST_LIBRARY") != std::string::npos);
  CHECK(missing.load.why.find('\n') == std::string::npos);

  const auto found = c::vendor_detail::open_library("the test library", "KE_VENDOR_TEST_LIBRARY", {soname.c_str()},
                                                    {"/nonexistent/ke-test/a", dir.string()}, {"libke_absent.so.1"});
  CHECK(found.handle != nullptr);
  CHECK(found.load.ok);
  CHECK_MESSAGE(found.load.path.find(dir.string()) == 0, found.load.path);
  if (found.handle) dlclose(found.handle);
  dlclose(libm);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST_CASE("vendor libraries: epilogue names round-trip") {
  for (c::MatmulEpilogue e : {c::MatmulEpilogue::none, c::MatmulEpilogue::relu, c::MatmulEpilogue::gelu,
                              c::MatmulEpilogue::bias, c::MatmulEpilogue::bias_relu, c::MatmulEpilogue::bias_gelu}) {
    const auto parsed = c::parse_epilogue(c::to_string(e));
    REQUIRE(parsed.has_value());
    CHECK(*parsed == e);
  }
  CHECK(std::string(c::to_string(c::MatmulEpilogue::bias_gelu)) == "bias_gelu");
  CHECK(c::parse_epilogue("relu") == c::MatmulEpilogue::relu);
  for (const char* wrong : {"", "Relu", "bias-relu", "relu_bias", "gelu_tanh", " none"})
    CHECK_FALSE(c::parse_epilogue(wrong).has_value());
}

TEST_CASE("vendor libraries: conv2d's output size") {
  auto size = [](std::int64_t h, std::int64_t w, std::int64_t r, std::int64_t s, std::int64_t stride_h,
                 std::int64_t stride_w, std::int64_t pad_h, std::int64_t pad_w, std::int64_t dil_h,
                 std::int64_t dil_w) {
    c::ConvCall call;
    call.n = 1, call.c = 4, call.k = 8, call.h = h, call.w = w, call.r = r, call.s = s;
    call.stride_h = stride_h, call.stride_w = stride_w, call.pad_h = pad_h, call.pad_w = pad_w;
    call.dil_h = dil_h, call.dil_w = dil_w;
    std::int64_t p = -7, q = -7;
    const bool ok = c::conv_output_size(call, p, q);
    return std::vector<std::int64_t>{ok ? 1 : 0, p, q};
  };
  using V = std::vector<std::int64_t>;
  CHECK(size(32, 32, 3, 3, 1, 1, 1, 1, 1, 1) == V{1, 32, 32});      // "same" padding
  CHECK(size(32, 32, 3, 3, 2, 2, 1, 1, 1, 1) == V{1, 16, 16});      // stride 2: (32+2-3)/2+1
  CHECK(size(7, 7, 3, 3, 1, 1, 0, 0, 2, 2) == V{1, 3, 3});          // dilation 2: the filter spans 5
  CHECK(size(5, 5, 1, 1, 2, 2, 0, 0, 1, 1) == V{1, 3, 3});          // 1x1, stride 2
  CHECK(size(10, 6, 3, 5, 3, 1, 0, 2, 1, 1) == V{1, 3, 6});         // every parameter apart in H and W
  CHECK(size(224, 224, 7, 7, 2, 2, 3, 3, 1, 1) == V{1, 112, 112});  // ResNet's stem
  CHECK(size(9, 9, 3, 3, 2, 2, 1, 1, 2, 2) == V{1, 4, 4});          // stride, padding and dilation: (9+2-5)/2+1
  CHECK(size(5, 5, 5, 5, 1, 1, 0, 0, 1, 1) == V{1, 1, 1});          // the filter exactly covers the input
  // Impossible: the (dilated) filter is larger than the padded input; p and q stay untouched.
  CHECK(size(2, 8, 5, 3, 1, 1, 0, 0, 1, 1) == V{0, -7, -7});
  CHECK(size(8, 8, 3, 3, 1, 1, 0, 0, 4, 4) == V{0, -7, -7});   // dilated span 9 > 8
  CHECK(size(4, 4, 3, 3, 0, 1, 0, 0, 1, 1) == V{0, -7, -7});   // stride 0
  CHECK(size(4, 4, 3, 3, 1, 1, -1, 0, 1, 1) == V{0, -7, -7});  // negative padding

  c::ConvCall grouped;
  grouped.n = 1, grouped.c = 6, grouped.k = 4, grouped.h = 8, grouped.w = 8, grouped.r = 3, grouped.s = 3;
  std::int64_t p = 0, q = 0;
  grouped.groups = 2;
  CHECK(c::conv_output_size(grouped, p, q));
  grouped.groups = 3;  // divides C = 6 but not K = 4
  CHECK_FALSE(c::conv_output_size(grouped, p, q));
  grouped.groups = 0;
  CHECK_FALSE(c::conv_output_size(grouped, p, q));
}

TEST_CASE("vendor libraries: malformed calls are refused, in one line, before any library is needed") {
  c::MatmulCall call;
  call.m = 4, call.n = 4, call.k = 4, call.a = 256, call.b = 512, call.d = 768;
  call.dtype = "f64";
  std::string error = c::matmul(nullptr, call);
  CHECK(error.find("f64") != std::string::npos);
  call.dtype = "f32";
  call.epilogue = c::MatmulEpilogue::bias_relu;  // and no bias
  error = c::matmul(nullptr, call);
  CHECK(error.find("bias") != std::string::npos);
  CHECK(error.find('\n') == std::string::npos);
  // cuBLAS's GEMM has no epilogue: asking for one is refused, not ignored.
  error = c::gemm(nullptr, call);
  CHECK_MESSAGE(error.find("epilogue") != std::string::npos, error);
  call.epilogue = c::MatmulEpilogue::none;
  call.k = 0;
  CHECK_FALSE(c::matmul(nullptr, call).empty());
  CHECK_FALSE(c::gemm(nullptr, call).empty());
  call.k = std::int64_t{1} << 31;  // beyond the classic API's int
  CHECK(c::gemm(nullptr, call).find("2^31") != std::string::npos);

  // A transposed A and a batch are cuBLAS's GEMM's; cuBLASLt's product refuses them rather than ignore them.
  call.k = 4;
  call.a_transposed = true;
  CHECK(c::matmul(nullptr, call).find("gemm") != std::string::npos);
  call.a_transposed = false;
  call.batch = 0;
  CHECK_FALSE(c::gemm(nullptr, call).empty());
  CHECK(c::matmul(nullptr, call).find("batch") != std::string::npos);
  call.batch = std::int64_t{1} << 31;
  CHECK(c::gemm(nullptr, call).find("2^31") != std::string::npos);

  c::ConvCall conv;
  conv.n = 1, conv.c = 2, conv.k = 2, conv.h = 2, conv.w = 2, conv.r = 3, conv.s = 3;
  conv.x = 256, conv.filter = 512, conv.y = 768;
  error = c::convolution(nullptr, conv);
  CHECK(error.find("conv2d") != std::string::npos);
  CHECK(error.find('\n') == std::string::npos);
  CHECK(c::conv_workspace_bytes(conv) == 0);
  conv.h = conv.w = 8;
  conv.dtype = "i8";
  CHECK(c::convolution(nullptr, conv).find("i8") != std::string::npos);
  // Each mode names itself: an output_padding at the stride, a forward 3-d call whose filter outgrows its input.
  conv.dtype = "f32";
  conv.transposed = true, conv.stride_h = conv.stride_w = 2, conv.out_pad_h = 2;
  error = c::convolution(nullptr, conv);
  CHECK_MESSAGE(error.find("conv_transpose2d") != std::string::npos, error);
  CHECK(error.find("output_padding 2,0") != std::string::npos);
  conv.transposed = false, conv.out_pad_h = 0, conv.spatial_dims = 3, conv.d = 2, conv.t = 3;
  error = c::convolution(nullptr, conv);
  CHECK_MESSAGE(error.find("conv3d") != std::string::npos, error);
  conv.spatial_dims = 4;
  error = c::convolution(nullptr, conv);
  CHECK_MESSAGE(error.find("4 spatial dimensions") != std::string::npos, error);
}

TEST_CASE("vendor libraries: the output size of 3-d and transposed convolutions") {
  c::ConvCall call;
  call.n = 1, call.c = 4, call.k = 6, call.h = 5, call.w = 6, call.r = 3, call.s = 3;
  std::int64_t o = -7, p = -7, q = -7;
  // A 2-d call has depth 1, whatever d says.
  call.d = 9;
  REQUIRE(c::conv_output_size(call, o, p, q));
  CHECK(std::vector<std::int64_t>{o, p, q} == std::vector<std::int64_t>{1, 3, 4});
  // Transposed: (H - 1)·stride - 2·pad + dil·(R - 1) + output_padding + 1, the forward's input extent again.
  call.transposed = true, call.stride_h = call.stride_w = 2, call.pad_h = call.pad_w = 1, call.out_pad_h = 1;
  REQUIRE(c::conv_output_size(call, o, p, q));
  CHECK(std::vector<std::int64_t>{o, p, q} == std::vector<std::int64_t>{1, 10, 11});
  call.dil_w = 2;  // the filter spans 5: (6 - 1)·2 - 2 + 5 = 13
  REQUIRE(c::conv_output_size(call, p, q));
  CHECK(std::vector<std::int64_t>{p, q} == std::vector<std::int64_t>{10, 13});
  // output_padding must stay below its stride (cuDNN computes the forward convolution's gradient), and a forward
  // convolution has none.
  call.out_pad_h = 2;
  CHECK_FALSE(c::conv_output_size(call, p, q));
  call.out_pad_h = -1;
  CHECK_FALSE(c::conv_output_size(call, p, q));
  call.out_pad_h = 1, call.transposed = false;
  CHECK_FALSE(c::conv_output_size(call, p, q));
  // Groups divide the input and the output channels in either mode.
  call.out_pad_h = 0, call.transposed = true, call.groups = 2;
  CHECK(c::conv_output_size(call, p, q));
  call.groups = 3;  // divides K = 6 but not C = 4
  CHECK_FALSE(c::conv_output_size(call, p, q));

  c::ConvCall cube;
  cube.spatial_dims = 3;
  cube.n = 2, cube.c = 4, cube.k = 6, cube.d = 5, cube.h = 6, cube.w = 7, cube.t = 3, cube.r = 3, cube.s = 2;
  cube.stride_h = 2, cube.pad_d = cube.pad_h = 1, cube.dil_w = 2;
  REQUIRE(c::conv_output_size(cube, o, p, q));
  CHECK(std::vector<std::int64_t>{o, p, q} == std::vector<std::int64_t>{5, 3, 5});  // (6+2-3)/2+1, 7-3+1
  // A transposed 3-d one: stride 2, padding 1, output_padding 1 in depth alone.
  cube.transposed = true, cube.stride_d = cube.stride_h = cube.stride_w = 2, cube.dil_w = 1, cube.pad_w = 1;
  cube.out_pad_d = 1;
  REQUIRE(c::conv_output_size(cube, o, p, q));
  CHECK(std::vector<std::int64_t>{o, p, q} == std::vector<std::int64_t>{10, 11, 12});  // 8-2+3+1, 10-2+3, 12-2+2
  cube.t = 0;
  CHECK_FALSE(c::conv_output_size(cube, o, p, q));
  cube.t = 3, cube.spatial_dims = 1;
  CHECK_FALSE(c::conv_output_size(cube, o, p, q));
}

TEST_CASE("vendor libraries: avg_pool3d's output size, and its refusals before any library") {
  c::PoolCall call;
  call.n = 2, call.c = 3, call.d = 9, call.h = 10, call.w = 11;
  for (int i = 0; i < 3; ++i) call.kernel[i] = 3, call.stride[i] = 2, call.padding[i] = 1;
  std::int64_t o = -7, p = -7, q = -7;
  REQUIRE(c::pool_output_size(call, o, p, q));
  CHECK(std::vector<std::int64_t>{o, p, q} == std::vector<std::int64_t>{5, 5, 6});  // (9+2-3)/2+1, ...
  call.padding[2] = 2;  // more than half its kernel: PyTorch and cuDNN refuse it
  CHECK_FALSE(c::pool_output_size(call, o, p, q));
  call.padding[2] = 0, call.w = 2;  // no window fits
  CHECK_FALSE(c::pool_output_size(call, o, p, q));
  call.w = 11, call.stride[0] = 0;
  CHECK_FALSE(c::pool_output_size(call, o, p, q));
  call.stride[0] = 2;
  call.x = 256, call.y = 512;
  call.dtype = "f64";
  CHECK(c::avg_pool3d(nullptr, call).find("f64") != std::string::npos);
  call.dtype = "f32", call.kernel[1] = 0;
  const std::string error = c::avg_pool3d(nullptr, call);
  CHECK_MESSAGE(error.find("avg_pool3d") != std::string::npos, error);
  CHECK(error.find('\n') == std::string::npos);
}

TEST_CASE("vendor libraries: a convolution or pooling over 2^31 elements runs in batch slices within cuDNN's ints") {
  // KernelBench level 1 at its own size: 87's pointwise convolution writes y[16,128,1024,1024] and 46's avg_pool3d
  // reads x[16,32,128,128,256], 2^31 elements each, one over INT_MAX: cuDNN's descriptors refuse them whole.
  CHECK(c::batch_slice(16, std::int64_t{128} << 20, INT_MAX) == 15);
  CHECK(c::batch_slice(16, std::int64_t{32} * 128 * 128 * 256, INT_MAX) == 15);
  CHECK(c::batch_slice(16, std::int64_t{1} << 20, INT_MAX) == 16);  // one call will do
  CHECK(c::batch_slice(3, INT_MAX, INT_MAX) == 1);
  CHECK(c::batch_slice(3, std::int64_t{INT_MAX} + 1, INT_MAX) == 0);  // one sample too large: refused
  CHECK(c::batch_slice(0, 10, INT_MAX) == 0);
  // A sample too large is refused by name before any library is needed.
  c::PoolCall pool;
  pool.n = 2, pool.c = 1, pool.d = 2048, pool.h = 1024, pool.w = 1025, pool.x = 256, pool.y = 512;
  const std::string error = c::avg_pool3d(nullptr, pool);
  CHECK_MESSAGE(error.find("one sample of its input or output holds 2149580800 elements") != std::string::npos, error);
}

TEST_CASE("vendor libraries: whether the GPU tests run") {
  if (kNoGpu) {
    MESSAGE("skipped: no CUDA device: the GPU tests in this file are skipped: " << gpu().reason);
  } else {
    if (!cublaslt().ok) MESSAGE("skipped: cuBLASLt not found: the product tests are skipped: " << cublaslt().why);
    else MESSAGE("cuBLASLt: " << cublaslt().path);
    if (!cudnn().ok) MESSAGE("skipped: cuDNN not found: the convolution tests are skipped: " << cudnn().why);
    else MESSAGE("cuDNN: " << cudnn().path);
  }
  CHECK(true);
}

// The libraries are looked for inside the cases, not in skip(): a search at registration would come before
// the first case, which needs none loaded yet.
#define KE_NEED_CUBLASLT()                                      \
  if (!cublaslt().ok) {                                         \
    MESSAGE("skipped: cuBLASLt not found: " << cublaslt().why); \
    return;                                                     \
  }
#define KE_NEED_CUDNN()                                   \
  if (!cudnn().ok) {                                      \
    MESSAGE("skipped: cuDNN not found: " << cudnn().why); \
    return;                                               \
  }

TEST_CASE("vendor libraries: f32 products for every epilogue, both layouts of B, against the host" *
          doctest::skip(kNoGpu)) {
  KE_NEED_CUBLASLT();
  // True fp32: TF32 (10-bit mantissas) would miss this tolerance by an order of magnitude at K = 256.
  const std::tuple<std::int64_t, std::int64_t, std::int64_t> shapes[] = {{33, 65, 17}, {256, 256, 256}, {1, 7, 3}};
  for (auto [m, n, k] : shapes)
    for (bool b_transposed : {false, true})
      for (c::MatmulEpilogue e : {c::MatmulEpilogue::none, c::MatmulEpilogue::relu, c::MatmulEpilogue::gelu,
                                  c::MatmulEpilogue::bias, c::MatmulEpilogue::bias_relu, c::MatmulEpilogue::bias_gelu})
        check_matmul(m, n, k, b_transposed, e, "f32", 2e-5, 1e-5);
}

TEST_CASE("vendor libraries: f16 and bf16 products" * doctest::skip(kNoGpu)) {
  KE_NEED_CUBLASLT();
  // Exact inputs, fp32 accumulation; the error is the output's rounding: 2^-11 (f16) or 2^-8 (bf16) of it.
  for (c::MatmulEpilogue e : {c::MatmulEpilogue::none, c::MatmulEpilogue::bias_relu, c::MatmulEpilogue::bias_gelu}) {
    check_matmul(64, 128, 96, true, e, "f16", 1e-3, 1e-3);
    check_matmul(64, 128, 96, false, e, "bf16", 1e-2, 8e-3);
  }
}

TEST_CASE("vendor libraries: cuBLAS's GEMM, both layouts of B, f32 and the 16-bit types, against the host" *
          doctest::skip(kNoGpu)) {
  const c::LibraryLoad load = c::load_cublas(library_dirs());
  if (!load.ok) {
    MESSAGE("skipped: cuBLAS not found: " << load.why);
    return;
  }
  MESSAGE("cuBLAS: " << load.path);
  const std::tuple<std::int64_t, std::int64_t, std::int64_t> shapes[] = {{33, 65, 17}, {256, 256, 256}, {1, 7, 3}};
  for (auto [m, n, k] : shapes)
    for (bool b_transposed : {false, true})
      check_matmul(m, n, k, b_transposed, c::MatmulEpilogue::none, "f32", 2e-5, 1e-5, c::matmul_workspace_bytes(),
                   true);
  check_matmul(64, 128, 96, true, c::MatmulEpilogue::none, "f16", 1e-3, 1e-3, c::matmul_workspace_bytes(), true);
  check_matmul(64, 128, 96, false, c::MatmulEpilogue::none, "bf16", 1e-2, 8e-3, 0, true);
}

TEST_CASE("vendor libraries: a product with no workspace, and the cache across addresses" * doctest::skip(kNoGpu)) {
  KE_NEED_CUBLASLT();
  // The same shape twice: the second call reuses the cached plan with new buffers and a new bias.
  check_matmul(48, 40, 24, true, c::MatmulEpilogue::bias, "f32", 2e-5, 1e-5);
  check_matmul(48, 40, 24, true, c::MatmulEpilogue::bias, "f32", 2e-5, 1e-5);
  const std::vector<float> a = random_values(16 * 8, 5), b = random_values(8 * 16, 6);
  DeviceBuffer da(a.size() * 4), db(b.size() * 4), dd(16 * 16 * 4);
  da.upload(encode(a, "f32"));
  db.upload(encode(b, "f32"));
  c::MatmulCall call;
  call.m = 16, call.n = 16, call.k = 8, call.a = da.address(), call.b = db.address(), call.d = dd.address();
  const std::string error = c::matmul(gpu().stream, call);
  CHECK_MESSAGE(error.empty(), error);
  const std::vector<float> got = decode(dd.download(), "f32");
  double worst = 0;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double sum = 0;
      for (int p = 0; p < 8; ++p) sum += static_cast<double>(a[i * 8 + p]) * b[p * 16 + j];
      worst = std::max(worst, std::fabs(sum - got[i * 16 + j]));
    }
  CHECK(worst < 1e-5);
}

TEST_CASE("vendor libraries: choosing the algorithm by measurement leaves the right product in D" *
          doctest::skip(kNoGpu)) {
  KE_NEED_CUBLASLT();
  // Tuning on: the first call for a key times every candidate into D, then runs the chosen one; the second
  // reuses the choice with new buffers. Both must match the host (D starts as NaN each time). True fp32 still:
  // TF32 would be some 30 times off; the tolerance allows K = 512's longer sums and split-K candidates' other
  // order. A workspace size of its own makes a key of its own, not served by a plan made earlier untuned.
  {
    ScopedEnv on("KE_CUBLASLT_TUNE", "1");
    check_matmul(512, 512, 512, true, c::MatmulEpilogue::bias_relu, "f32", 1e-4, 1e-5, c::matmul_workspace_bytes() / 4);
    check_matmul(512, 512, 512, true, c::MatmulEpilogue::bias_relu, "f32", 1e-4, 1e-5, c::matmul_workspace_bytes() / 4);
  }
  // Tuning off (the default): the heuristic's first answer.
  check_matmul(512, 512, 512, true, c::MatmulEpilogue::bias_relu, "f32", 1e-4, 1e-5, c::matmul_workspace_bytes() / 2);
  check_matmul(512, 512, 512, true, c::MatmulEpilogue::bias_relu, "f32", 1e-4, 1e-5, c::matmul_workspace_bytes() / 2);
}

TEST_CASE("vendor libraries: conv2d against a naive host convolution" * doctest::skip(kNoGpu)) {
  KE_NEED_CUDNN();
  c::ConvCall call;
  call.n = 2, call.c = 4, call.h = 9, call.w = 11, call.k = 6, call.r = 3, call.s = 3;
  call.stride_h = call.stride_w = 2, call.pad_h = call.pad_w = 1, call.groups = 2;
  SUBCASE("f32, stride 2, padding 1, groups 2, bias") { check_conv(call, true, true, 2e-5, 1e-5); }
  SUBCASE("f32, the same with no workspace") { check_conv(call, true, false, 2e-5, 1e-5); }
  SUBCASE("f32, dilation 2, no bias, one group") {
    call.groups = 1, call.dil_h = call.dil_w = 2, call.stride_h = 1, call.c = 3, call.k = 5;
    check_conv(call, false, true, 2e-5, 1e-5);
  }
  SUBCASE("f32, a larger one (32 channels in and out, 28x28, 3x3, stride 1, padding 1) with bias") {
    call.n = 4, call.c = 32, call.k = 32, call.h = call.w = 28, call.groups = 1, call.stride_h = call.stride_w = 1;
    check_conv(call, true, true, 1e-4, 1e-5);
  }
  SUBCASE("f16, stride 2, padding 1, groups 2, bias") {
    call.dtype = "f16";
    check_conv(call, true, true, 2e-3, 1e-3);
  }
  SUBCASE("bf16, stride 2, padding 1, groups 2, bias") {
    call.dtype = "bf16";
    check_conv(call, true, true, 2e-2, 8e-3);
  }
  SUBCASE("f32, five samples in batch slices of two, two and one, bias") {
    call.n = 5;
    const std::int64_t sample = call.c * call.h * call.w;  // 396, more than the output's 6 * 5 * 6
    CHECK(c::batch_slice(call.n, sample, 2 * sample + 1) == 2);
    check_conv(call, true, true, 2e-5, 1e-5, 2 * sample + 1);
  }
}

// The f32 cases below allow 5e-5 (cuDNN may sum in another order, or by FFT, over up to 54 taps a channel); TF32
// would be off by some 1e-3.
TEST_CASE("vendor libraries: conv3d against a naive host convolution" * doctest::skip(kNoGpu)) {
  KE_NEED_CUDNN();
  c::ConvCall call;
  call.spatial_dims = 3;
  call.n = 2, call.c = 4, call.d = 5, call.h = 6, call.w = 7, call.k = 6, call.t = 3, call.r = 3, call.s = 2;
  call.stride_h = 2, call.pad_d = call.pad_h = 1, call.dil_w = 2, call.groups = 2;
  SUBCASE("f32, stride, padding and dilation apart in each dimension, groups 2, bias") {
    check_conv(call, true, true, 5e-5, 1e-5);
  }
  SUBCASE("f32, the same with no workspace") { check_conv(call, true, false, 5e-5, 1e-5); }
  SUBCASE("f32, one group, no bias, 3x3x3 padding 1") {
    call.groups = 1, call.s = 3, call.pad_w = 1, call.dil_w = 1, call.stride_h = 1;
    check_conv(call, false, true, 5e-5, 1e-5);
  }
  SUBCASE("f16, groups 2, bias") {
    call.dtype = "f16";
    check_conv(call, true, true, 2e-3, 1e-3);
  }
}

TEST_CASE("vendor libraries: conv_transpose2d against a naive host convolution" * doctest::skip(kNoGpu)) {
  KE_NEED_CUDNN();
  // x[2, 4, 5, 6] to y[2, 6, 10, 12]: stride 2, padding 1, output_padding 1, groups 2, the weight [4, 3, 3, 3].
  c::ConvCall call;
  call.transposed = true;
  call.n = 2, call.c = 4, call.h = 5, call.w = 6, call.k = 6, call.r = 3, call.s = 3;
  call.stride_h = call.stride_w = 2, call.pad_h = call.pad_w = 1, call.out_pad_h = call.out_pad_w = 1;
  call.groups = 2;
  SUBCASE("f32, stride 2, output_padding 1, groups 2, bias") { check_conv(call, true, true, 5e-5, 1e-5); }
  SUBCASE("f32, the same with no workspace") { check_conv(call, true, false, 5e-5, 1e-5); }
  SUBCASE("f32, dilation 2, output_padding in width alone, one group, no bias") {
    call.groups = 1, call.dil_h = call.dil_w = 2, call.out_pad_h = 0, call.c = 3, call.k = 5;
    check_conv(call, false, true, 5e-5, 1e-5);
  }
  SUBCASE("f32, a 1-d one as a 2-d one a row high (stride 3, padding 2, output_padding 2)") {
    call.h = 1, call.r = 1, call.stride_h = 1, call.pad_h = 0, call.out_pad_h = 0;
    call.w = 17, call.s = 5, call.stride_w = 3, call.pad_w = 2, call.out_pad_w = 2, call.groups = 1;
    check_conv(call, true, true, 5e-5, 1e-5);
  }
  SUBCASE("f16, stride 2, output_padding 1, groups 2, bias") {
    call.dtype = "f16";
    check_conv(call, true, true, 2e-3, 1e-3);
  }
  SUBCASE("bf16, stride 2, output_padding 1, groups 2, bias") {
    call.dtype = "bf16";
    check_conv(call, true, true, 2e-2, 8e-3);
  }
}

TEST_CASE("vendor libraries: conv_transpose3d against a naive host convolution" * doctest::skip(kNoGpu)) {
  KE_NEED_CUDNN();
  // x[2, 4, 3, 4, 5] to y[2, 2, 6, 7, 10]: stride 2, padding 1, output_padding 1 in depth and width.
  c::ConvCall call;
  call.spatial_dims = 3, call.transposed = true;
  call.n = 2, call.c = 4, call.d = 3, call.h = 4, call.w = 5, call.k = 2, call.t = 3, call.r = 3, call.s = 3;
  call.stride_d = call.stride_h = call.stride_w = 2, call.pad_d = call.pad_h = call.pad_w = 1;
  call.out_pad_d = call.out_pad_w = 1;
  SUBCASE("f32, bias") { check_conv(call, true, true, 5e-5, 1e-5); }
  SUBCASE("f32, groups 2, no bias, no workspace") {
    call.groups = 2;
    check_conv(call, false, false, 5e-5, 1e-5);
  }
}

TEST_CASE("vendor libraries: cuBLAS's batched GEMM and a transposed A, against the host" * doctest::skip(kNoGpu)) {
  const c::LibraryLoad load = c::load_cublas(library_dirs());
  if (!load.ok) {
    MESSAGE("skipped: cuBLAS not found: " << load.why);
    return;
  }
  const auto none = c::MatmulEpilogue::none;
  const std::size_t ws = c::matmul_workspace_bytes();
  SUBCASE("a transposed A (torch.mm(x.T, y)), with B either way, f32 and f16") {
    for (bool b_transposed : {false, true}) {
      check_matmul(33, 65, 17, b_transposed, none, "f32", 2e-5, 1e-5, ws, true, 1, true);
      check_matmul(256, 128, 96, b_transposed, none, "f32", 2e-5, 1e-5, ws, true, 1, true);
    }
    check_matmul(64, 128, 96, false, none, "f16", 1e-3, 1e-3, ws, true, 1, true);
  }
  SUBCASE("a batch (torch.bmm), every layout of A and B, f32, f16 and bf16") {
    for (bool a_transposed : {false, true})
      for (bool b_transposed : {false, true})
        check_matmul(27, 27, 64, b_transposed, none, "f32", 2e-5, 1e-5, ws, true, 5, a_transposed);
    check_matmul(33, 20, 17, true, none, "f32", 2e-5, 1e-5, 0, true, 3);  // no workspace
    check_matmul(64, 48, 96, false, none, "f16", 1e-3, 1e-3, ws, true, 4);
    check_matmul(64, 48, 96, true, none, "bf16", 1e-2, 8e-3, ws, true, 4);
  }
}

TEST_CASE("vendor libraries: avg_pool3d against a naive host pooling" * doctest::skip(kNoGpu)) {
  KE_NEED_CUDNN();
  c::PoolCall call;
  call.n = 3, call.c = 3, call.d = 9, call.h = 10, call.w = 11;
  call.kernel[0] = 3, call.kernel[1] = 3, call.kernel[2] = 2;
  call.stride[0] = 2, call.stride[1] = 1, call.stride[2] = 2;
  call.padding[0] = 1, call.padding[1] = 1, call.padding[2] = 0;
  for (const std::string dtype : {"f32", "f16"})
    for (bool include : {true, false}) {
      CAPTURE(dtype);
      CAPTURE(include);
      call.dtype = dtype, call.count_include_pad = include;
      std::int64_t o = 0, p = 0, q = 0;
      REQUIRE(c::pool_output_size(call, o, p, q));
      const auto xs = static_cast<std::size_t>(call.n * call.c * call.d * call.h * call.w);
      const auto ys = static_cast<std::size_t>(call.n * call.c * o * p * q);
      const std::vector<float> x = representable(random_values(xs, 21), dtype);
      const std::size_t e = element_bytes(dtype);
      DeviceBuffer dx(xs * e), dy(ys * e);
      dx.upload(encode(x, dtype));
      dy.poison();
      call.x = dx.address(), call.y = dy.address();
      // f16 runs sample by sample: the batch slices a call over 2^31 elements would take, at a lower limit.
      const std::int64_t limit = dtype == "f16" ? call.c * call.d * call.h * call.w : INT_MAX;
      const std::string error =
          limit == INT_MAX ? c::avg_pool3d(gpu().stream, call) : c::avg_pool3d(gpu().stream, call, limit);
      REQUIRE_MESSAGE(error.empty(), error);
      const std::vector<float> got = decode(dy.download(), dtype);
      // torch's avg_pool3d: the window's sum over the elements inside the input, divided by the whole window's
      // size, or by the count of those elements without count_include_pad.
      const std::int64_t in[3] = {call.d, call.h, call.w}, out[3] = {o, p, q};
      std::vector<double> ref(ys);
      std::size_t at = 0;
      for (std::int64_t plane = 0; plane < call.n * call.c; ++plane)
        for (std::int64_t i = 0; i < out[0]; ++i)
          for (std::int64_t j = 0; j < out[1]; ++j)
            for (std::int64_t l = 0; l < out[2]; ++l) {
              double sum = 0;
              std::int64_t inside = 0;
              for (std::int64_t a = 0; a < call.kernel[0]; ++a)
                for (std::int64_t b = 0; b < call.kernel[1]; ++b)
                  for (std::int64_t t = 0; t < call.kernel[2]; ++t) {
                    const std::int64_t u = i * call.stride[0] - call.padding[0] + a;
                    const std::int64_t v = j * call.stride[1] - call.padding[1] + b;
                    const std::int64_t r = l * call.stride[2] - call.padding[2] + t;
                    if (u < 0 || u >= in[0] || v < 0 || v >= in[1] || r < 0 || r >= in[2]) continue;
                    sum += x[static_cast<std::size_t>(((plane * in[0] + u) * in[1] + v) * in[2] + r)];
                    ++inside;
                  }
              const std::int64_t window = call.kernel[0] * call.kernel[1] * call.kernel[2];
              ref[at++] = sum / static_cast<double>(include ? window : inside);
            }
      const Worst worst = compare(got, ref, dtype == "f32" ? 1e-6 : 1e-3, dtype == "f32" ? 1e-5 : 1e-3);
      INFO("worst element " << worst.index << ": got " << worst.got << ", expected " << worst.ref << " (" << worst.ratio
                            << "x the tolerance)");
      CHECK(worst.ratio <= 1.0);
    }
}
