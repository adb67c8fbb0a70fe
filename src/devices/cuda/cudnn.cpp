// cuDNN's 2-d and 3-d convolutions, forward and transposed, and its 3-d average pooling, through its legacy API,
// loaded at run time; see vendor_libraries.hpp.
//
// The types, enum values, structure layouts and signatures below are declared by hand from cuDNN 9.19.0's
// headers (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h; the version on the GPU machine), and were checked against
// them with static_asserts in a scratch translation unit (values; the perf structure by size and offsets;
// signatures parameter by parameter). cuDNN 9.6.0's headers give the same. cuDNN 9 still exports this legacy
// API from libcudnn.so.9 (deprecated, not removed); cuDNN 8's cudnn.h declares the same functions, structure
// and values for everything used here except the error codes, which this file only compares with
// CUDNN_STATUS_SUCCESS (0, in both) and otherwise names through cudnnGetErrorString.
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "devices/cuda/vendor_libraries.hpp"

namespace kernelevolve::cuda {
namespace {

// ---- cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h (cuDNN 9.19.0) ---------------------------------------------

using cudnnStatus_t = int;
enum : int { CUDNN_STATUS_SUCCESS = 0 };

// cudnnDataType_t
enum : int { CUDNN_DATA_FLOAT = 0, CUDNN_DATA_HALF = 2, CUDNN_DATA_BFLOAT16 = 9 };

// cudnnMathType_t. CUDNN_DEFAULT_MATH permits TF32 tensor-core kernels for fp32 data on A100 and later;
// CUDNN_FMA_MATH restricts the choice to kernels of FMA instructions: true fp32, which is what a f32
// convolution here promises (PyTorch does the same with torch.backends.cudnn.allow_tf32 off) unless its step asks
// for "math": "tf32" (ConvCall::tf32): then CUDNN_DEFAULT_MATH and the heuristic's math types, as PyTorch's with the
// switch on.
enum : int { CUDNN_DEFAULT_MATH = 0, CUDNN_TENSOR_OP_MATH = 1, CUDNN_FMA_MATH = 3 };

// cudnnTensorFormat_t
enum : int { CUDNN_TENSOR_NCHW = 0 };

// cudnnConvolutionMode_t. PyTorch's conv2d, like every deep-learning "convolution", is a cross-correlation.
enum : int { CUDNN_CROSS_CORRELATION = 1 };

// cudnnConvolutionFwdAlgo_t
enum : int { CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0, CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8 };

// cudnnConvolutionBwdDataAlgo_t. ALGO_0 sums with atomics (non-deterministic); ALGO_1 does not.
enum : int {
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 = 0,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 = 1,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT = 6
};

// cudnnPoolingMode_t: average pooling divides by the whole window, or by its elements inside the input.
enum : int { CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING = 1, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING = 2 };

// cudnnNanPropagation_t (read by max pooling alone)
enum : int { CUDNN_NOT_PROPAGATE_NAN = 0 };

using cudnnHandle_t = struct cudnnContext*;
using cudnnTensorDescriptor_t = struct cudnnTensorStruct*;
using cudnnFilterDescriptor_t = struct cudnnFilterStruct*;
using cudnnConvolutionDescriptor_t = struct cudnnConvolutionStruct*;
using cudnnPoolingDescriptor_t = struct cudnnPoolingStruct*;

struct cudnnConvolutionFwdAlgoPerf_t {
  int algo;  // cudnnConvolutionFwdAlgo_t
  cudnnStatus_t status;
  float time;
  std::size_t memory;
  int determinism;  // cudnnDeterminism_t
  int mathType;     // cudnnMathType_t
  int reserved[3];
};
static_assert(sizeof(cudnnConvolutionFwdAlgoPerf_t) == 48, "layout of cudnn_cnn.h's cudnnConvolutionFwdAlgoPerf_t");
// cudnnConvolutionBwdDataAlgoPerf_t has the same fields in the same order (algo is a cudnnConvolutionBwdDataAlgo_t).
using cudnnConvolutionBwdDataAlgoPerf_t = cudnnConvolutionFwdAlgoPerf_t;

struct DnnApi {
  std::size_t (*cudnnGetVersion)() = nullptr;
  const char* (*cudnnGetErrorString)(cudnnStatus_t) = nullptr;
  cudnnStatus_t (*cudnnCreate)(cudnnHandle_t*) = nullptr;
  cudnnStatus_t (*cudnnSetStream)(cudnnHandle_t, void* stream) = nullptr;
  cudnnStatus_t (*cudnnCreateTensorDescriptor)(cudnnTensorDescriptor_t*) = nullptr;
  cudnnStatus_t (*cudnnSetTensorNdDescriptor)(cudnnTensorDescriptor_t, int data_type, int nb_dims, const int dims[],
                                              const int strides[]) = nullptr;
  cudnnStatus_t (*cudnnDestroyTensorDescriptor)(cudnnTensorDescriptor_t) = nullptr;
  cudnnStatus_t (*cudnnCreateFilterDescriptor)(cudnnFilterDescriptor_t*) = nullptr;
  cudnnStatus_t (*cudnnSetFilterNdDescriptor)(cudnnFilterDescriptor_t, int data_type, int format, int nb_dims,
                                              const int dims[]) = nullptr;
  cudnnStatus_t (*cudnnDestroyFilterDescriptor)(cudnnFilterDescriptor_t) = nullptr;
  cudnnStatus_t (*cudnnCreateConvolutionDescriptor)(cudnnConvolutionDescriptor_t*) = nullptr;
  cudnnStatus_t (*cudnnSetConvolutionNdDescriptor)(cudnnConvolutionDescriptor_t, int array_length, const int pads[],
                                                   const int strides[], const int dilations[], int mode,
                                                   int compute_type) = nullptr;
  cudnnStatus_t (*cudnnSetConvolutionGroupCount)(cudnnConvolutionDescriptor_t, int groups) = nullptr;
  cudnnStatus_t (*cudnnSetConvolutionMathType)(cudnnConvolutionDescriptor_t, int math_type) = nullptr;
  cudnnStatus_t (*cudnnDestroyConvolutionDescriptor)(cudnnConvolutionDescriptor_t) = nullptr;
  cudnnStatus_t (*cudnnGetConvolutionNdForwardOutputDim)(cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t,
                                                         cudnnFilterDescriptor_t, int nb_dims, int dims[]) = nullptr;
  cudnnStatus_t (*cudnnGetConvolutionForwardAlgorithmMaxCount)(cudnnHandle_t, int*) = nullptr;
  cudnnStatus_t (*cudnnGetConvolutionForwardAlgorithm_v7)(cudnnHandle_t, cudnnTensorDescriptor_t x,
                                                          cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t,
                                                          cudnnTensorDescriptor_t y, int requested, int* returned,
                                                          cudnnConvolutionFwdAlgoPerf_t* results) = nullptr;
  cudnnStatus_t (*cudnnGetConvolutionForwardWorkspaceSize)(cudnnHandle_t, cudnnTensorDescriptor_t x,
                                                           cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t,
                                                           cudnnTensorDescriptor_t y, int algo,
                                                           std::size_t* bytes) = nullptr;
  cudnnStatus_t (*cudnnConvolutionForward)(cudnnHandle_t, const void* alpha, cudnnTensorDescriptor_t x_desc,
                                           const void* x, cudnnFilterDescriptor_t w_desc, const void* w,
                                           cudnnConvolutionDescriptor_t, int algo, void* workspace,
                                           std::size_t workspace_bytes, const void* beta,
                                           cudnnTensorDescriptor_t y_desc, void* y) = nullptr;
  cudnnStatus_t (*cudnnGetConvolutionBackwardDataAlgorithmMaxCount)(cudnnHandle_t, int*) = nullptr;
  cudnnStatus_t (*cudnnGetConvolutionBackwardDataAlgorithm_v7)(cudnnHandle_t, cudnnFilterDescriptor_t w,
                                                               cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t,
                                                               cudnnTensorDescriptor_t dx, int requested, int* returned,
                                                               cudnnConvolutionBwdDataAlgoPerf_t* results) = nullptr;
  cudnnStatus_t (*cudnnGetConvolutionBackwardDataWorkspaceSize)(cudnnHandle_t, cudnnFilterDescriptor_t w,
                                                                cudnnTensorDescriptor_t dy,
                                                                cudnnConvolutionDescriptor_t,
                                                                cudnnTensorDescriptor_t dx, int algo,
                                                                std::size_t* bytes) = nullptr;
  cudnnStatus_t (*cudnnConvolutionBackwardData)(cudnnHandle_t, const void* alpha, cudnnFilterDescriptor_t w_desc,
                                                const void* w, cudnnTensorDescriptor_t dy_desc, const void* dy,
                                                cudnnConvolutionDescriptor_t, int algo, void* workspace,
                                                std::size_t workspace_bytes, const void* beta,
                                                cudnnTensorDescriptor_t dx_desc, void* dx) = nullptr;
  // Optional: cuDNN times every algorithm that fits the workspace on the call's own operands, as PyTorch's
  // cudnn.benchmark does. Without them the heuristic's order stands.
  cudnnStatus_t (*cudnnFindConvolutionForwardAlgorithmEx)(cudnnHandle_t, cudnnTensorDescriptor_t x_desc, const void* x,
                                                          cudnnFilterDescriptor_t w_desc, const void* w,
                                                          cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t y_desc,
                                                          void* y, int requested, int* returned,
                                                          cudnnConvolutionFwdAlgoPerf_t* results, void* workspace,
                                                          std::size_t workspace_bytes) = nullptr;
  cudnnStatus_t (*cudnnFindConvolutionBackwardDataAlgorithmEx)(
      cudnnHandle_t, cudnnFilterDescriptor_t w_desc, const void* w, cudnnTensorDescriptor_t dy_desc, const void* dy,
      cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t dx_desc, void* dx, int requested, int* returned,
      cudnnConvolutionBwdDataAlgoPerf_t* results, void* workspace, std::size_t workspace_bytes) = nullptr;
  cudnnStatus_t (*cudnnAddTensor)(cudnnHandle_t, const void* alpha, cudnnTensorDescriptor_t a_desc, const void* a,
                                  const void* beta, cudnnTensorDescriptor_t c_desc, void* c) = nullptr;
  cudnnStatus_t (*cudnnCreatePoolingDescriptor)(cudnnPoolingDescriptor_t*) = nullptr;
  cudnnStatus_t (*cudnnSetPoolingNdDescriptor)(cudnnPoolingDescriptor_t, int mode, int nan_propagation, int nb_dims,
                                               const int windows[], const int paddings[],
                                               const int strides[]) = nullptr;
  cudnnStatus_t (*cudnnGetPoolingNdForwardOutputDim)(cudnnPoolingDescriptor_t, cudnnTensorDescriptor_t, int nb_dims,
                                                     int dims[]) = nullptr;
  cudnnStatus_t (*cudnnPoolingForward)(cudnnHandle_t, cudnnPoolingDescriptor_t, const void* alpha,
                                       cudnnTensorDescriptor_t x_desc, const void* x, const void* beta,
                                       cudnnTensorDescriptor_t y_desc, void* y) = nullptr;
  cudnnStatus_t (*cudnnDestroyPoolingDescriptor)(cudnnPoolingDescriptor_t) = nullptr;
};

}  // namespace
}  // namespace kernelevolve::cuda

// tests/test_vendor_libraries.cpp includes the declarations above alone (with KE_VENDOR_ABI_ONLY defined) to
// check them against the toolkit's headers where those are installed.
#ifndef KE_VENDOR_ABI_ONLY
namespace kernelevolve::cuda {
namespace {

using vendor_detail::device_ptr;
using vendor_detail::resolve;

struct Dnn {
  std::mutex mutex;  // guards everything below, and serializes the calls into the library (the handle's
                     // stream is state: cudnnSetStream and the call it is for must not interleave)
  bool loaded = false;
  LibraryLoad load;
  DnnApi api;
  cudnnHandle_t handle = nullptr;
};

Dnn& dnn() {
  static Dnn* state = new Dnn;  // never destroyed: the library stays loaded until the process ends
  return *state;
}

LibraryLoad load_locked(Dnn& state, const std::vector<std::string>& extra_dirs) {
  if (state.loaded) return state.load;
  // cuDNN 9's libcudnn.so.9 is a shim that opens its sub-libraries by soname when first needed; opened here
  // from the shim's own directory, they are found whether or not that directory is on the loader's path.
  // The order has each library's dependencies before it. cuDNN 8's names follow.
  vendor_detail::OpenedLibrary opened = vendor_detail::open_library(
      "cuDNN", "KE_CUDNN", {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"}, extra_dirs,
      {"libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9",
       "libcudnn_heuristic.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9", "libcudnn_ops_infer.so.8",
       "libcudnn_cnn_infer.so.8"});
  if (!opened.handle) return opened.load;
  void* lib = opened.handle;
  DnnApi api;
  std::string missing;
  bool ok = true;
  ok &= resolve(lib, api.cudnnGetVersion, "cudnnGetVersion", missing);
  ok &= resolve(lib, api.cudnnGetErrorString, "cudnnGetErrorString", missing);
  ok &= resolve(lib, api.cudnnCreate, "cudnnCreate", missing);
  ok &= resolve(lib, api.cudnnSetStream, "cudnnSetStream", missing);
  ok &= resolve(lib, api.cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor", missing);
  ok &= resolve(lib, api.cudnnSetTensorNdDescriptor, "cudnnSetTensorNdDescriptor", missing);
  ok &= resolve(lib, api.cudnnDestroyTensorDescriptor, "cudnnDestroyTensorDescriptor", missing);
  ok &= resolve(lib, api.cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor", missing);
  ok &= resolve(lib, api.cudnnSetFilterNdDescriptor, "cudnnSetFilterNdDescriptor", missing);
  ok &= resolve(lib, api.cudnnDestroyFilterDescriptor, "cudnnDestroyFilterDescriptor", missing);
  ok &= resolve(lib, api.cudnnCreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor", missing);
  ok &= resolve(lib, api.cudnnSetConvolutionNdDescriptor, "cudnnSetConvolutionNdDescriptor", missing);
  ok &= resolve(lib, api.cudnnSetConvolutionGroupCount, "cudnnSetConvolutionGroupCount", missing);
  ok &= resolve(lib, api.cudnnSetConvolutionMathType, "cudnnSetConvolutionMathType", missing);
  ok &= resolve(lib, api.cudnnDestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor", missing);
  ok &= resolve(lib, api.cudnnGetConvolutionNdForwardOutputDim, "cudnnGetConvolutionNdForwardOutputDim", missing);
  ok &= resolve(lib, api.cudnnGetConvolutionForwardAlgorithmMaxCount, "cudnnGetConvolutionForwardAlgorithmMaxCount",
                missing);
  ok &= resolve(lib, api.cudnnGetConvolutionForwardAlgorithm_v7, "cudnnGetConvolutionForwardAlgorithm_v7", missing);
  ok &= resolve(lib, api.cudnnGetConvolutionForwardWorkspaceSize, "cudnnGetConvolutionForwardWorkspaceSize", missing);
  ok &= resolve(lib, api.cudnnConvolutionForward, "cudnnConvolutionForward", missing);
  ok &= resolve(lib, api.cudnnGetConvolutionBackwardDataAlgorithmMaxCount,
                "cudnnGetConvolutionBackwardDataAlgorithmMaxCount", missing);
  ok &= resolve(lib, api.cudnnGetConvolutionBackwardDataAlgorithm_v7, "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                missing);
  ok &= resolve(lib, api.cudnnGetConvolutionBackwardDataWorkspaceSize, "cudnnGetConvolutionBackwardDataWorkspaceSize",
                missing);
  ok &= resolve(lib, api.cudnnConvolutionBackwardData, "cudnnConvolutionBackwardData", missing);
  std::string optional;  // what lacks here only loses the measured choice
  resolve(lib, api.cudnnFindConvolutionForwardAlgorithmEx, "cudnnFindConvolutionForwardAlgorithmEx", optional);
  resolve(lib, api.cudnnFindConvolutionBackwardDataAlgorithmEx, "cudnnFindConvolutionBackwardDataAlgorithmEx",
          optional);
  ok &= resolve(lib, api.cudnnAddTensor, "cudnnAddTensor", missing);
  ok &= resolve(lib, api.cudnnCreatePoolingDescriptor, "cudnnCreatePoolingDescriptor", missing);
  ok &= resolve(lib, api.cudnnSetPoolingNdDescriptor, "cudnnSetPoolingNdDescriptor", missing);
  ok &= resolve(lib, api.cudnnGetPoolingNdForwardOutputDim, "cudnnGetPoolingNdForwardOutputDim", missing);
  ok &= resolve(lib, api.cudnnPoolingForward, "cudnnPoolingForward", missing);
  ok &= resolve(lib, api.cudnnDestroyPoolingDescriptor, "cudnnDestroyPoolingDescriptor", missing);
  LibraryLoad result = opened.load;
  if (!ok) {
    dlclose(lib);
    result.ok = false;
    result.why = "cuDNN " + result.path + " lacks " + missing;
    return result;
  }
  // cudnnGetVersion is major*1000 + minor*100 + patch up to cuDNN 8, major*10000 + minor*100 + patch from 9.
  const std::size_t version = api.cudnnGetVersion();
  const std::size_t major = version >= 90000 ? version / 10000 : version / 1000;
  if (major < 8) {
    dlclose(lib);
    result.ok = false;
    result.why = "cuDNN " + result.path + " is version " + std::to_string(version) + "; cuDNN 8 or 9 is needed";
    return result;
  }
  state.api = api;
  state.load = result;
  state.loaded = true;
  return result;
}

// A call's geometry as cuDNN's Nd functions take it: one entry per spatial dimension, outermost first.
struct Geometry {
  int dims = 2;  // spatial dimensions
  std::int64_t in[3] = {1, 1, 1}, filter[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  std::int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dilation[3] = {1, 1, 1}, out_pad[3] = {0, 0, 0};
};

// The geometry of `call`, its output extents unset.
Geometry geometry_of(const ConvCall& call) {
  Geometry g;
  // A malformed dimension count reads as 2-d here, so that describing the call stays in bounds.
  g.dims = call.spatial_dims == 3 ? 3 : 2;
  const std::int64_t in[3] = {call.d, call.h, call.w}, filter[3] = {call.t, call.r, call.s};
  const std::int64_t stride[3] = {call.stride_d, call.stride_h, call.stride_w};
  const std::int64_t pad[3] = {call.pad_d, call.pad_h, call.pad_w}, dil[3] = {call.dil_d, call.dil_h, call.dil_w};
  const std::int64_t out_pad[3] = {call.out_pad_d, call.out_pad_h, call.out_pad_w};
  const int skip = 3 - g.dims;  // a 2-d call reads h and w alone
  for (int i = 0; i < g.dims; ++i) {
    g.in[i] = in[skip + i], g.filter[i] = filter[skip + i], g.stride[i] = stride[skip + i];
    g.pad[i] = pad[skip + i], g.dilation[i] = dil[skip + i], g.out_pad[i] = out_pad[skip + i];
  }
  return g;
}

// The output extents by the formulas of vendor_libraries.hpp; false when the call is malformed or any is < 1.
bool output_extents(const ConvCall& call, Geometry& g) {
  if (call.spatial_dims != 2 && call.spatial_dims != 3) return false;
  if (call.n < 1 || call.c < 1 || call.k < 1 || call.groups < 1) return false;
  if (call.c % call.groups != 0 || call.k % call.groups != 0) return false;
  g = geometry_of(call);
  for (int i = 0; i < g.dims; ++i) {
    if (g.in[i] < 1 || g.filter[i] < 1 || g.stride[i] < 1 || g.dilation[i] < 1 || g.pad[i] < 0) return false;
    const std::int64_t span = g.dilation[i] * (g.filter[i] - 1) + 1;  // the dilated filter's extent
    if (call.transposed) {
      // cuDNN computes it as the gradient of the forward convolution from y back to x, so the forward
      // convolution of y must give x's extent: that holds for an output_padding below the stride.
      if (g.out_pad[i] < 0 || g.out_pad[i] >= g.stride[i]) return false;
      g.out[i] = (g.in[i] - 1) * g.stride[i] - 2 * g.pad[i] + span + g.out_pad[i];
      if (g.out[i] < 1) return false;
    } else {
      if (g.out_pad[i] != 0) return false;
      // The span of the dilated filter must fit in the padded input; then the output counts its positions.
      const std::int64_t room = g.in[i] + 2 * g.pad[i] - span;
      if (room < 0) return false;
      g.out[i] = room / g.stride[i] + 1;
    }
  }
  return true;
}

// The descriptors of one convolution and the heuristic's usable algorithms, fastest first.
struct Plan {
  const DnnApi* api = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int math_type = CUDNN_DEFAULT_MATH;                     // the one this dtype (and the call's tf32) asks for
  std::vector<cudnnConvolutionFwdAlgoPerf_t> algorithms;  // backward-data algorithms when transposed
  // The heuristic's first choice can be several times slower than the best (a transposed 5x5 convolution of
  // KernelBench's level 2 ran 3.5x eager's time): the first call measures them once, and its order replaces it.
  bool measured = false;
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (!api) return;
    if (conv) api->cudnnDestroyConvolutionDescriptor(conv);
    if (filter) api->cudnnDestroyFilterDescriptor(filter);
    if (bias) api->cudnnDestroyTensorDescriptor(bias);
    if (y) api->cudnnDestroyTensorDescriptor(y);
    if (x) api->cudnnDestroyTensorDescriptor(x);
  }
};

// What decides the descriptors and the heuristic's answers: the mode, the dtype, the math and every size and setting.
using PlanKey = std::vector<std::int64_t>;

PlanKey key_of(const ConvCall& call, const Geometry& g, int data_type) {
  PlanKey key = {g.dims, call.transposed ? 1 : 0, data_type, call.tf32 ? 1 : 0, call.n, call.c, call.k, call.groups};
  for (int i = 0; i < g.dims; ++i)
    key.insert(key.end(), {g.in[i], g.filter[i], g.stride[i], g.pad[i], g.dilation[i], g.out_pad[i]});
  return key;
}

std::map<PlanKey, std::unique_ptr<Plan>>& plans() {
  static auto* cache = new std::map<PlanKey, std::unique_ptr<Plan>>;
  return *cache;
}

constexpr std::size_t kMaxPlans = 512;
constexpr std::size_t kMaxPreferredWorkspace = std::size_t{256} << 20;

const char* name_of(const ConvCall& call) {
  if (call.spatial_dims == 3) return call.transposed ? "conv_transpose3d" : "conv3d";
  return call.transposed ? "conv_transpose2d" : "conv2d";
}

std::string describe(const ConvCall& call) {
  const Geometry g = geometry_of(call);
  auto list = [&](const std::int64_t* values) {
    std::string text;
    for (int i = 0; i < g.dims; ++i) text += (i ? "," : "") + std::to_string(values[i]);
    return text;
  };
  const std::int64_t per_group = call.groups > 0 ? (call.transposed ? call.k : call.c) / call.groups : 0;
  std::string text =
      std::string(name_of(call)) + " " + call.dtype + " x[" + std::to_string(call.n) + "," + std::to_string(call.c) +
      "," + list(g.in) + "] w[" + std::to_string(call.transposed ? call.c : call.k) + "," + std::to_string(per_group) +
      "," + list(g.filter) + "] stride " + list(g.stride) + " pad " + list(g.pad) + " dilation " + list(g.dilation);
  if (call.transposed) text += " output_padding " + list(g.out_pad);
  return text + " groups " + std::to_string(call.groups) + (call.tf32 ? " tf32" : "");
}

// "function: STATUS (n); what".
std::string failure(const DnnApi& api, const char* function, cudnnStatus_t status, const std::string& what) {
  const char* name = api.cudnnGetErrorString ? api.cudnnGetErrorString(status) : nullptr;
  return std::string(function) + ": " + (name ? name : "CUDNN_STATUS_UNKNOWN") + " (" + std::to_string(status) + "); " +
         what;
}

std::string failure(const DnnApi& api, const char* function, cudnnStatus_t status, const ConvCall& call) {
  return failure(api, function, status, describe(call));
}

bool data_type_of(const std::string& dtype, int& data_type) {
  if (dtype == "f32") data_type = CUDNN_DATA_FLOAT;
  else if (dtype == "f16") data_type = CUDNN_DATA_HALF;
  else if (dtype == "bf16") data_type = CUDNN_DATA_BFLOAT16;
  else return false;
  return true;
}

// Loads the library and creates the handle if need be; "" or why not, naming the call `name` described by `what`.
// Holds state's mutex.
std::string open_handle(Dnn& state, const std::string& name, const std::string& what) {
  if (!state.loaded) {
    LibraryLoad load = load_locked(state, {});
    if (!load.ok) return name + ": cuDNN is not loaded: " + load.why;
  }
  if (!state.handle) {
    const cudnnStatus_t s = state.api.cudnnCreate(&state.handle);
    if (s != CUDNN_STATUS_SUCCESS) {
      state.handle = nullptr;
      return failure(state.api, "cudnnCreate", s, what);
    }
  }
  return "";
}

// Checks the call, loads the library and creates the handle if need be; "" or why not. Holds state's mutex.
std::string prepare(Dnn& state, const ConvCall& call, int& data_type, Geometry& g) {
  const std::string name = name_of(call);
  if (!data_type_of(call.dtype, data_type)) return name + ": dtype '" + call.dtype + "' is not f32, f16 or bf16";
  if (call.tf32 && data_type != CUDNN_DATA_FLOAT)
    return name + ": TF32 math is for f32 data (f16 and bf16 run on tensor cores already); " + describe(call);
  if (call.spatial_dims != 2 && call.spatial_dims != 3)
    return name + ": " + std::to_string(call.spatial_dims) + " spatial dimensions; 2 or 3 are supported";
  if (!output_extents(call, g)) return name + ": malformed sizes or an empty output; " + describe(call);
  for (std::int64_t v : {call.n, call.c, call.k, call.groups})
    if (v > INT_MAX) return name + ": a size beyond cuDNN's int range; " + describe(call);
  for (int i = 0; i < g.dims; ++i)
    for (std::int64_t v : {g.in[i], g.filter[i], g.stride[i], g.pad[i], g.dilation[i], g.out[i]})
      if (v > INT_MAX) return name + ": a size beyond cuDNN's int range; " + describe(call);
  return open_handle(state, name, describe(call));
}

// A packed tensor [n, c, extents...] (NCHW or NCDHW) as cuDNN's Nd descriptor takes it.
cudnnStatus_t set_packed(const DnnApi& api, cudnnTensorDescriptor_t desc, int data_type, std::int64_t n, std::int64_t c,
                         const std::int64_t* extents, int spatial) {
  int dims[5] = {static_cast<int>(n), static_cast<int>(c), 1, 1, 1}, strides[5] = {};
  for (int i = 0; i < spatial; ++i) dims[2 + i] = static_cast<int>(extents[i]);
  const int rank = 2 + spatial;
  int stride = 1;
  for (int i = rank - 1; i >= 0; --i) strides[i] = stride, stride *= dims[i];
  return api.cudnnSetTensorNdDescriptor(desc, data_type, rank, dims, strides);
}

// The answers that ran (or may run) and honour the dtype's math, in cuDNN's order. cuDNN 7.4 and later pick
// kernels by algorithm and math type together; for f32 only FMA kernels qualify: a TF32 one (tensor-op or
// default math) would round the inputs to 10-bit mantissas. A call with tf32 takes any, as PyTorch with TF32 on.
std::vector<cudnnConvolutionFwdAlgoPerf_t> usable(const std::vector<cudnnConvolutionFwdAlgoPerf_t>& results,
                                                  int returned, int data_type, bool tf32) {
  std::vector<cudnnConvolutionFwdAlgoPerf_t> kept;
  for (int j = 0; j < returned && j < static_cast<int>(results.size()); ++j) {
    const cudnnConvolutionFwdAlgoPerf_t& perf = results[static_cast<std::size_t>(j)];
    if (perf.status != CUDNN_STATUS_SUCCESS) continue;
    if (data_type == CUDNN_DATA_FLOAT && !tf32 && perf.mathType != CUDNN_FMA_MATH) continue;
    kept.push_back(perf);
  }
  return kept;
}

// How many algorithms cuDNN may answer with for `call`'s mode.
int algorithm_count(const Dnn& state, const ConvCall& call) {
  const DnnApi& api = state.api;
  int count = 0;
  const cudnnStatus_t s = call.transposed ? api.cudnnGetConvolutionBackwardDataAlgorithmMaxCount(state.handle, &count)
                                          : api.cudnnGetConvolutionForwardAlgorithmMaxCount(state.handle, &count);
  if (s != CUDNN_STATUS_SUCCESS || count < 1)
    return 2 * (call.transposed ? int{CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT} : int{CUDNN_CONVOLUTION_FWD_ALGO_COUNT});
  return count;
}

// Builds the plan of `call`: "" or the failure.
std::string make_plan(Dnn& state, const ConvCall& call, int data_type, const Geometry& g, Plan& plan) {
  const DnnApi& api = state.api;
  plan.api = &api;
  auto i = [](std::int64_t v) { return static_cast<int>(v); };
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  if ((s = api.cudnnCreateTensorDescriptor(&plan.x)) != CUDNN_STATUS_SUCCESS ||
      (s = api.cudnnCreateTensorDescriptor(&plan.y)) != CUDNN_STATUS_SUCCESS ||
      (s = api.cudnnCreateTensorDescriptor(&plan.bias)) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnCreateTensorDescriptor", s, call);
  if ((s = api.cudnnCreateFilterDescriptor(&plan.filter)) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnCreateFilterDescriptor", s, call);
  if ((s = api.cudnnCreateConvolutionDescriptor(&plan.conv)) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnCreateConvolutionDescriptor", s, call);

  const std::int64_t ones[3] = {1, 1, 1};
  if ((s = set_packed(api, plan.x, data_type, call.n, call.c, g.in, g.dims)) != CUDNN_STATUS_SUCCESS ||
      (s = set_packed(api, plan.y, data_type, call.n, call.k, g.out, g.dims)) != CUDNN_STATUS_SUCCESS ||
      (s = set_packed(api, plan.bias, data_type, 1, call.k, ones, g.dims)) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnSetTensorNdDescriptor", s, call);
  // The filter as PyTorch stores it. Forward: [K, C/groups, ...], mapping x's C channels to y's K. Transposed: the
  // forward convolution runs from y (K channels) to x (C channels), whose filter is [C, K/groups, ...]: the
  // ConvTranspose weight's own layout.
  const std::int64_t out_channels = call.transposed ? call.c : call.k, in_channels = call.transposed ? call.k : call.c;
  int filter_dims[5] = {i(out_channels), i(in_channels / call.groups), 1, 1, 1};
  for (int d = 0; d < g.dims; ++d) filter_dims[2 + d] = i(g.filter[d]);
  if ((s = api.cudnnSetFilterNdDescriptor(plan.filter, data_type, CUDNN_TENSOR_NCHW, 2 + g.dims, filter_dims)) !=
      CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnSetFilterNdDescriptor", s, call);
  int pads[3], strides[3], dilations[3];
  for (int d = 0; d < g.dims; ++d) pads[d] = i(g.pad[d]), strides[d] = i(g.stride[d]), dilations[d] = i(g.dilation[d]);
  // fp32 accumulation for every dtype (f16 and bf16 data with float compute: PyTorch's choice too).
  if ((s = api.cudnnSetConvolutionNdDescriptor(plan.conv, g.dims, pads, strides, dilations, CUDNN_CROSS_CORRELATION,
                                               CUDNN_DATA_FLOAT)) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnSetConvolutionNdDescriptor", s, call);
  if ((s = api.cudnnSetConvolutionGroupCount(plan.conv, i(call.groups))) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnSetConvolutionGroupCount", s, call);
  // PyTorch's choice (Descriptors.h): f32 with TF32 allowed keeps the default math, which lets cuDNN take TF32.
  plan.math_type = data_type != CUDNN_DATA_FLOAT ? CUDNN_TENSOR_OP_MATH
                   : call.tf32                   ? CUDNN_DEFAULT_MATH
                                                 : CUDNN_FMA_MATH;
  if ((s = api.cudnnSetConvolutionMathType(plan.conv, plan.math_type)) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnSetConvolutionMathType", s, call);

  // The forward convolution's output by cuDNN must be ours: y forward, x (from y) when transposed.
  cudnnTensorDescriptor_t source = call.transposed ? plan.y : plan.x;
  std::vector<std::int64_t> expected = {call.n, out_channels};
  for (int d = 0; d < g.dims; ++d) expected.push_back(call.transposed ? g.in[d] : g.out[d]);
  int got[5] = {};
  if ((s = api.cudnnGetConvolutionNdForwardOutputDim(plan.conv, source, plan.filter, 2 + g.dims, got)) !=
      CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnGetConvolutionNdForwardOutputDim", s, call);
  std::string got_text, expected_text;
  bool same = true;
  for (int d = 0; d < 2 + g.dims; ++d) {
    same = same && got[d] == expected[static_cast<std::size_t>(d)];
    got_text += (d ? "," : "") + std::to_string(got[d]);
    expected_text += (d ? "," : "") + std::to_string(expected[static_cast<std::size_t>(d)]);
  }
  if (!same)
    return "cudnnGetConvolutionNdForwardOutputDim: cuDNN's output [" + got_text + "] is not the expected [" +
           expected_text + "]; " + describe(call);

  const int requested = algorithm_count(state, call);
  std::vector<cudnnConvolutionFwdAlgoPerf_t> results(static_cast<std::size_t>(requested));
  int returned = 0;
  if (call.transposed) {
    // x plays the forward's output gradient (dy), y its input gradient (dx).
    if ((s = api.cudnnGetConvolutionBackwardDataAlgorithm_v7(state.handle, plan.filter, plan.x, plan.conv, plan.y,
                                                             requested, &returned, results.data())) !=
        CUDNN_STATUS_SUCCESS)
      return failure(api, "cudnnGetConvolutionBackwardDataAlgorithm_v7", s, call);
  } else {
    if ((s = api.cudnnGetConvolutionForwardAlgorithm_v7(state.handle, plan.x, plan.filter, plan.conv, plan.y, requested,
                                                        &returned, results.data())) != CUDNN_STATUS_SUCCESS)
      return failure(api, "cudnnGetConvolutionForwardAlgorithm_v7", s, call);
  }
  plan.algorithms = usable(results, returned, data_type, call.tf32);
  return "";
}

// Orders `plan`'s algorithms by cuDNN's timing of each on the call's own operands within its workspace, once per
// plan. The heuristic's order stays where cuDNN cannot measure (no Find function, an error, none usable), or where
// $KE_CUDNN_FIND=0 asks for it (PyTorch's choice without cudnn.benchmark). A TF32 step keeps the heuristic's order
// too, unless $KE_CUDNN_FIND=1: that is the choice the user's PyTorch makes for the same call (cudnn.benchmark is off
// by default), and on an H100 Find with the default math type ranked FMA kernels first, 2.3x slower than the
// heuristic's TF32 kernel on a small convolution (issue 50). The call's output is written meanwhile, as the call
// itself is about to write it. The caller holds state.mutex and has set the stream.
void measure(Dnn& state, const ConvCall& call, Plan& plan, int data_type) {
  plan.measured = true;
  const char* setting = std::getenv("KE_CUDNN_FIND");
  if (setting && std::string(setting) == "0") return;
  if (call.tf32 && !(setting && std::string(setting) == "1")) return;
  const DnnApi& api = state.api;
  if (!(call.transposed ? api.cudnnFindConvolutionBackwardDataAlgorithmEx != nullptr
                        : api.cudnnFindConvolutionForwardAlgorithmEx != nullptr))
    return;
  // The descriptor's math type bounds what is timed: FMA alone for f32 without tf32 (see usable()).
  if (api.cudnnSetConvolutionMathType(plan.conv, plan.math_type) != CUDNN_STATUS_SUCCESS) return;
  const int requested = algorithm_count(state, call);
  std::vector<cudnnConvolutionFwdAlgoPerf_t> results(static_cast<std::size_t>(requested));
  int returned = 0;
  void* workspace = call.workspace_bytes ? device_ptr(call.workspace) : nullptr;
  const cudnnStatus_t s =
      call.transposed
          ? api.cudnnFindConvolutionBackwardDataAlgorithmEx(
                state.handle, plan.filter, device_ptr(call.filter), plan.x, device_ptr(call.x), plan.conv, plan.y,
                device_ptr(call.y), requested, &returned,
                reinterpret_cast<cudnnConvolutionBwdDataAlgoPerf_t*>(results.data()), workspace, call.workspace_bytes)
          : api.cudnnFindConvolutionForwardAlgorithmEx(
                state.handle, plan.x, device_ptr(call.x), plan.filter, device_ptr(call.filter), plan.conv, plan.y,
                device_ptr(call.y), requested, &returned, results.data(), workspace, call.workspace_bytes);
  if (s != CUDNN_STATUS_SUCCESS) return;
  std::vector<cudnnConvolutionFwdAlgoPerf_t> timed =
      usable(results, std::min(returned, requested), data_type, call.tf32);
  if (!timed.empty()) plan.algorithms = std::move(timed);
}

// The plan of `call` from the cache, made if need be; null with `error` set when it cannot be made.
Plan* plan_for(Dnn& state, const ConvCall& call, int data_type, const Geometry& g, std::string& error) {
  const PlanKey key = key_of(call, g, data_type);
  auto& cache = plans();
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  error = make_plan(state, call, data_type, g, *plan);
  if (!error.empty()) return nullptr;
  if (cache.size() >= kMaxPlans) cache.clear();
  return cache.emplace(key, std::move(plan)).first->second.get();
}

// The algorithm to run within `workspace_bytes`, with its math type and workspace; "" or why none.
std::string choose(Dnn& state, const ConvCall& call, Plan& plan, std::size_t workspace_bytes, int& algo, int& math_type,
                   std::size_t& needed) {
  const DnnApi& api = state.api;
  for (const cudnnConvolutionFwdAlgoPerf_t& perf : plan.algorithms) {
    if (perf.memory > workspace_bytes) continue;
    algo = perf.algo;
    math_type = perf.mathType;
    needed = perf.memory;
    return "";
  }
  // None of the heuristic's answers fits (or it gave none of the right math type): an algorithm that every
  // configuration supports, with the dtype's own math type. Forward: the implicit GEMM, which needs no workspace.
  // Transposed: backward data's ALGO_1 (deterministic), else ALGO_0.
  math_type = plan.math_type;
  cudnnStatus_t s = api.cudnnSetConvolutionMathType(plan.conv, math_type);
  if (s != CUDNN_STATUS_SUCCESS) return failure(api, "cudnnSetConvolutionMathType", s, call);
  const std::vector<int> fallbacks =
      call.transposed ? std::vector<int>{CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0}
                      : std::vector<int>{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM};
  std::string why;
  for (int candidate : fallbacks) {
    needed = 0;
    s = call.transposed ? api.cudnnGetConvolutionBackwardDataWorkspaceSize(state.handle, plan.filter, plan.x, plan.conv,
                                                                           plan.y, candidate, &needed)
                        : api.cudnnGetConvolutionForwardWorkspaceSize(state.handle, plan.x, plan.filter, plan.conv,
                                                                      plan.y, candidate, &needed);
    if (s != CUDNN_STATUS_SUCCESS) {
      why = failure(
          api,
          call.transposed ? "cudnnGetConvolutionBackwardDataWorkspaceSize" : "cudnnGetConvolutionForwardWorkspaceSize",
          s, call);
      continue;
    }
    if (needed <= workspace_bytes) {
      algo = candidate;
      return "";
    }
    why = std::string(name_of(call)) + ": no algorithm fits " + std::to_string(workspace_bytes) +
          " bytes of workspace (the fallback algorithm " + std::to_string(candidate) + " needs " +
          std::to_string(needed) + "); " + describe(call);
  }
  return why;
}

// ---- batch slices ----------------------------------------------------------------------------------------

// cuDNN's Nd tensor descriptors count in ints: a tensor of more than INT_MAX elements is CUDNN_STATUS_NOT_SUPPORTED
// (KernelBench's level 1 has two at its own size: 46's avg_pool3d input and 87's convolution output, 2^31
// elements each). As ATen does (split_batch_dim_to_32bit_out), such a call runs slice by slice of its batch,
// each slice's operands within INT_MAX; the samples are independent, so the result is the same.

// a * b, or INT64_MAX where that overflows (sizes are >= 1 here).
std::int64_t product(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

std::int64_t element_bytes(const std::string& dtype) { return dtype == "f32" ? 4 : 2; }

// The elements of one sample of a convolution's input (x) and output (y), from a well-formed geometry.
struct Sample {
  std::int64_t x, y;
  std::int64_t larger() const { return std::max(x, y); }
};
Sample conv_sample(const ConvCall& call, const Geometry& g) {
  Sample s{call.c, call.k};
  for (int i = 0; i < g.dims; ++i) s.x = product(s.x, g.in[i]), s.y = product(s.y, g.out[i]);
  return s;
}

// Calls `one` on each batch slice of `n` samples of `per_x`/`per_y` elements (x and y advance by a slice's bytes);
// "" or the first failure, naming the slice.
template <class Call, class One>
std::string by_batch_slices(const Call& call, std::int64_t slice, std::int64_t per_x, std::int64_t per_y, One one) {
  const std::int64_t bytes = element_bytes(call.dtype);
  for (std::int64_t first = 0; first < call.n; first += slice) {
    Call part = call;
    part.n = std::min(slice, call.n - first);
    part.x = call.x + static_cast<std::uint64_t>(first * per_x * bytes);
    part.y = call.y + static_cast<std::uint64_t>(first * per_y * bytes);
    if (std::string why = one(part); !why.empty())
      return why + " (samples " + std::to_string(first) + " to " + std::to_string(first + part.n - 1) + " of " +
             std::to_string(call.n) + ", a batch slice within cuDNN's int-counted tensors)";
  }
  return "";
}

// ---- average pooling -------------------------------------------------------------------------------------

std::string describe(const PoolCall& call) {
  auto list = [](const std::int64_t* v) {
    return std::to_string(v[0]) + "," + std::to_string(v[1]) + "," + std::to_string(v[2]);
  };
  return "avg_pool3d " + call.dtype + " x[" + std::to_string(call.n) + "," + std::to_string(call.c) + "," +
         std::to_string(call.d) + "," + std::to_string(call.h) + "," + std::to_string(call.w) + "] kernel " +
         list(call.kernel) + " stride " + list(call.stride) + " padding " + list(call.padding) +
         (call.count_include_pad ? " count_include_pad" : " count_exclude_pad");
}

// The descriptors of one pooling.
struct PoolPlan {
  const DnnApi* api = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
  PoolPlan() = default;
  PoolPlan(const PoolPlan&) = delete;
  PoolPlan& operator=(const PoolPlan&) = delete;
  ~PoolPlan() {
    if (!api) return;
    if (pool) api->cudnnDestroyPoolingDescriptor(pool);
    if (y) api->cudnnDestroyTensorDescriptor(y);
    if (x) api->cudnnDestroyTensorDescriptor(x);
  }
};

std::map<PlanKey, std::unique_ptr<PoolPlan>>& pool_plans() {
  static auto* cache = new std::map<PlanKey, std::unique_ptr<PoolPlan>>;
  return *cache;
}

// Builds the descriptors of `call`, whose output is [N, C, out...]: "" or the failure.
std::string make_pool_plan(const DnnApi& api, const PoolCall& call, int data_type, const std::int64_t* out,
                           PoolPlan& plan) {
  plan.api = &api;
  const std::string what = describe(call);
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  if ((s = api.cudnnCreateTensorDescriptor(&plan.x)) != CUDNN_STATUS_SUCCESS ||
      (s = api.cudnnCreateTensorDescriptor(&plan.y)) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnCreateTensorDescriptor", s, what);
  if ((s = api.cudnnCreatePoolingDescriptor(&plan.pool)) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnCreatePoolingDescriptor", s, what);
  const std::int64_t in[3] = {call.d, call.h, call.w};
  if ((s = set_packed(api, plan.x, data_type, call.n, call.c, in, 3)) != CUDNN_STATUS_SUCCESS ||
      (s = set_packed(api, plan.y, data_type, call.n, call.c, out, 3)) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnSetTensorNdDescriptor", s, what);
  int windows[3], paddings[3], strides[3];
  for (int i = 0; i < 3; ++i) {
    windows[i] = static_cast<int>(call.kernel[i]), paddings[i] = static_cast<int>(call.padding[i]);
    strides[i] = static_cast<int>(call.stride[i]);
  }
  const int mode = call.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                          : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  if ((s = api.cudnnSetPoolingNdDescriptor(plan.pool, mode, CUDNN_NOT_PROPAGATE_NAN, 3, windows, paddings, strides)) !=
      CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnSetPoolingNdDescriptor", s, what);
  int got[5] = {};
  if ((s = api.cudnnGetPoolingNdForwardOutputDim(plan.pool, plan.x, 5, got)) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnGetPoolingNdForwardOutputDim", s, what);
  if (got[0] != call.n || got[1] != call.c || got[2] != out[0] || got[3] != out[1] || got[4] != out[2])
    return "cudnnGetPoolingNdForwardOutputDim: cuDNN's output [" + std::to_string(got[2]) + "," +
           std::to_string(got[3]) + "," + std::to_string(got[4]) + "] is not the expected [" + std::to_string(out[0]) +
           "," + std::to_string(out[1]) + "," + std::to_string(out[2]) + "]; " + what;
  return "";
}

}  // namespace

LibraryLoad load_cudnn(const std::vector<std::string>& extra_dirs) {
  Dnn& state = dnn();
  std::lock_guard<std::mutex> lock(state.mutex);
  return load_locked(state, extra_dirs);
}

bool conv_output_size(const ConvCall& call, std::int64_t& o, std::int64_t& p, std::int64_t& q) {
  Geometry g;
  if (!output_extents(call, g)) return false;
  const int skip = 3 - g.dims;  // the depth is 1 for a 2-d call
  o = skip ? 1 : g.out[0];
  p = g.out[1 - skip];
  q = g.out[2 - skip];
  return true;
}

bool conv_output_size(const ConvCall& call, std::int64_t& p, std::int64_t& q) {
  std::int64_t o = 1;
  return conv_output_size(call, o, p, q);
}

std::size_t conv_workspace_bytes(const ConvCall& call) {
  try {
    Dnn& state = dnn();
    std::lock_guard<std::mutex> lock(state.mutex);
    int data_type = 0;
    Geometry g;
    if (!prepare(state, call, data_type, g).empty()) return 0;
    // A batch run in slices (convolution()) needs the room of its largest slice.
    ConvCall first = call;
    first.n = batch_slice(call.n, conv_sample(call, g).larger(), INT_MAX);
    if (first.n == 0) return 0;
    std::string error;
    Plan* plan = plan_for(state, first, data_type, g, error);
    if (!plan) return 0;
    int algo = 0, math_type = 0;
    std::size_t needed = 0;
    if (!choose(state, first, *plan, kMaxPreferredWorkspace, algo, math_type, needed).empty()) return 0;
    return needed;
  } catch (...) {
    return 0;
  }
}

namespace {
// One cuDNN call of the whole batch (convolution() slices it first where it must).
std::string convolution_whole(void* stream, const ConvCall& call) {
  const std::string name = name_of(call);
  try {
    if (!call.x || !call.filter || !call.y) return name + ": a null operand address; " + describe(call);
    if (call.workspace_bytes && !call.workspace)
      return name + ": workspace_bytes without a workspace address; " + describe(call);
    Dnn& state = dnn();
    std::lock_guard<std::mutex> lock(state.mutex);
    int data_type = 0;
    Geometry g;
    if (std::string error = prepare(state, call, data_type, g); !error.empty()) return error;
    std::string error;
    Plan* plan = plan_for(state, call, data_type, g, error);
    if (!plan) return error;
    const DnnApi& api = state.api;
    cudnnStatus_t s = api.cudnnSetStream(state.handle, stream);
    if (s != CUDNN_STATUS_SUCCESS) return failure(api, "cudnnSetStream", s, call);
    if (!plan->measured) measure(state, call, *plan, data_type);
    int algo = 0, math_type = 0;
    std::size_t needed = 0;
    if (std::string why = choose(state, call, *plan, call.workspace_bytes, algo, math_type, needed); !why.empty())
      return why;
    if ((s = api.cudnnSetConvolutionMathType(plan->conv, math_type)) != CUDNN_STATUS_SUCCESS)
      return failure(api, "cudnnSetConvolutionMathType", s, call);
    // Scaling factors are floats for float, half and bfloat16 data. beta 0: y is written without being read,
    // so it may hold anything (NaN) before.
    const float one = 1.0f, zero = 0.0f;
    void* workspace = needed ? device_ptr(call.workspace) : nullptr;
    const std::size_t workspace_bytes = needed ? call.workspace_bytes : 0;
    if (call.transposed) {
      s = api.cudnnConvolutionBackwardData(state.handle, &one, plan->filter, device_ptr(call.filter), plan->x,
                                           device_ptr(call.x), plan->conv, algo, workspace, workspace_bytes, &zero,
                                           plan->y, device_ptr(call.y));
      if (s != CUDNN_STATUS_SUCCESS) return failure(api, "cudnnConvolutionBackwardData", s, call);
    } else {
      s = api.cudnnConvolutionForward(state.handle, &one, plan->x, device_ptr(call.x), plan->filter,
                                      device_ptr(call.filter), plan->conv, algo, workspace, workspace_bytes, &zero,
                                      plan->y, device_ptr(call.y));
      if (s != CUDNN_STATUS_SUCCESS) return failure(api, "cudnnConvolutionForward", s, call);
    }
    if (call.bias) {
      // y = 1·bias + 1·y, the [1,K,1,1(,1)] bias broadcast over N and the spatial extents.
      s = api.cudnnAddTensor(state.handle, &one, plan->bias, device_ptr(call.bias), &one, plan->y, device_ptr(call.y));
      if (s != CUDNN_STATUS_SUCCESS) return failure(api, "cudnnAddTensor", s, call);
    }
    return "";
  } catch (const std::exception& e) {
    return name + ": " + e.what();
  } catch (...) {
    return name + ": unknown exception";
  }
}

}  // namespace

std::int64_t batch_slice(std::int64_t n, std::int64_t sample_elements, std::int64_t max_elements) {
  if (n < 1 || sample_elements < 1 || max_elements < 1 || sample_elements > max_elements) return 0;
  return std::min(n, max_elements / sample_elements);
}

std::string convolution(void* stream, const ConvCall& call) { return convolution(stream, call, INT_MAX); }

std::string convolution(void* stream, const ConvCall& call, std::int64_t max_elements) {
  Geometry g;
  if (!output_extents(call, g) || !call.x || !call.y) return convolution_whole(stream, call);  // named there
  const Sample sample = conv_sample(call, g);
  const std::int64_t slice = batch_slice(call.n, sample.larger(), max_elements);
  if (slice == call.n) return convolution_whole(stream, call);
  if (slice == 0)
    return std::string(name_of(call)) + ": one sample of its input or output holds " + std::to_string(sample.larger()) +
           " elements, more than a cuDNN tensor may (" + std::to_string(max_elements) + "); " + describe(call);
  return by_batch_slices(call, slice, sample.x, sample.y,
                         [&](const ConvCall& part) { return convolution_whole(stream, part); });
}

bool pool_output_size(const PoolCall& call, std::int64_t& o, std::int64_t& p, std::int64_t& q) {
  if (call.n < 1 || call.c < 1) return false;
  const std::int64_t in[3] = {call.d, call.h, call.w};
  std::int64_t out[3] = {};
  for (int i = 0; i < 3; ++i) {
    const std::int64_t k = call.kernel[i], s = call.stride[i], pad = call.padding[i];
    if (in[i] < 1 || k < 1 || s < 1 || pad < 0 || 2 * pad > k) return false;
    if (in[i] + 2 * pad < k) return false;
    out[i] = (in[i] + 2 * pad - k) / s + 1;
  }
  o = out[0], p = out[1], q = out[2];
  return true;
}

namespace {
// One cuDNN call of the whole batch (avg_pool3d() slices it first where it must).
std::string avg_pool3d_whole(void* stream, const PoolCall& call) {
  try {
    int data_type = 0;
    if (!data_type_of(call.dtype, data_type)) return "avg_pool3d: dtype '" + call.dtype + "' is not f32, f16 or bf16";
    std::int64_t out[3] = {};
    if (!pool_output_size(call, out[0], out[1], out[2]))
      return "avg_pool3d: malformed sizes or an empty output; " + describe(call);
    for (std::int64_t v : {call.n, call.c, call.d, call.h, call.w, call.kernel[0], call.kernel[1], call.kernel[2],
                           call.stride[0], call.stride[1], call.stride[2]})
      if (v > INT_MAX) return "avg_pool3d: a size beyond cuDNN's int range; " + describe(call);
    if (!call.x || !call.y) return "avg_pool3d: a null operand address; " + describe(call);
    Dnn& state = dnn();
    std::lock_guard<std::mutex> lock(state.mutex);
    if (std::string why = open_handle(state, "avg_pool3d", describe(call)); !why.empty()) return why;
    const DnnApi& api = state.api;
    const PlanKey key = {data_type,       call.n,          call.c,          call.d,
                         call.h,          call.w,          call.kernel[0],  call.kernel[1],
                         call.kernel[2],  call.stride[0],  call.stride[1],  call.stride[2],
                         call.padding[0], call.padding[1], call.padding[2], call.count_include_pad ? 1 : 0};
    auto& cache = pool_plans();
    auto it = cache.find(key);
    if (it == cache.end()) {
      auto plan = std::make_unique<PoolPlan>();
      if (std::string error = make_pool_plan(api, call, data_type, out, *plan); !error.empty()) return error;
      if (cache.size() >= kMaxPlans) cache.clear();
      it = cache.emplace(key, std::move(plan)).first;
    }
    const PoolPlan& plan = *it->second;
    cudnnStatus_t s = api.cudnnSetStream(state.handle, stream);
    if (s != CUDNN_STATUS_SUCCESS) return failure(api, "cudnnSetStream", s, describe(call));
    const float one = 1.0f, zero = 0.0f;  // beta 0: y is written without being read
    s = api.cudnnPoolingForward(state.handle, plan.pool, &one, plan.x, device_ptr(call.x), &zero, plan.y,
                                device_ptr(call.y));
    if (s != CUDNN_STATUS_SUCCESS) return failure(api, "cudnnPoolingForward", s, describe(call));
    return "";
  } catch (const std::exception& e) {
    return std::string("avg_pool3d: ") + e.what();
  } catch (...) {
    return "avg_pool3d: unknown exception";
  }
}
}  // namespace

std::string avg_pool3d(void* stream, const PoolCall& call) { return avg_pool3d(stream, call, INT_MAX); }

std::string avg_pool3d(void* stream, const PoolCall& call, std::int64_t max_elements) {
  std::int64_t out[3] = {};
  if (!pool_output_size(call, out[0], out[1], out[2]) || !call.x || !call.y) return avg_pool3d_whole(stream, call);
  const std::int64_t per_x = product(product(product(call.c, call.d), call.h), call.w);
  const std::int64_t per_y = product(product(product(call.c, out[0]), out[1]), out[2]);
  const std::int64_t slice = batch_slice(call.n, std::max(per_x, per_y), max_elements);
  if (slice == call.n) return avg_pool3d_whole(stream, call);
  if (slice == 0)
    return "avg_pool3d: one sample of its input or output holds " + std::to_string(std::max(per_x, per_y)) +
           " elements, more than a cuDNN tensor may (" + std::to_string(max_elements) + "); " + describe(call);
  return by_batch_slices(call, slice, per_x, per_y,
                         [&](const PoolCall& part) { return avg_pool3d_whole(stream, part); });
}

}  // namespace kernelevolve::cuda
#endif  // KE_VENDOR_ABI_ONLY
