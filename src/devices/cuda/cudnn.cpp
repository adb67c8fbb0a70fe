// cuDNN's 2-d convolution through its legacy API, loaded at run time; see vendor_libraries.hpp.
//
// The types, enum values, structure layouts and signatures below are declared by hand from cuDNN 9.19.0's
// headers (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h; the version on the GPU machine), and were checked against
// them with static_asserts in a scratch translation unit (values; the perf structure by size and offsets;
// signatures parameter by parameter). cuDNN 9.6.0's headers give the same. cuDNN 9 still exports this legacy
// API from libcudnn.so.9 (deprecated, not removed); cuDNN 8's cudnn.h declares the same functions, structure
// and values for everything used here except the error codes, which this file only compares with
// CUDNN_STATUS_SUCCESS (0, in both) and otherwise names through cudnnGetErrorString.
#include <dlfcn.h>

#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

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
// convolution here promises (PyTorch does the same with torch.backends.cudnn.allow_tf32 off).
enum : int { CUDNN_DEFAULT_MATH = 0, CUDNN_TENSOR_OP_MATH = 1, CUDNN_FMA_MATH = 3 };

// cudnnTensorFormat_t
enum : int { CUDNN_TENSOR_NCHW = 0 };

// cudnnConvolutionMode_t. PyTorch's conv2d, like every deep-learning "convolution", is a cross-correlation.
enum : int { CUDNN_CROSS_CORRELATION = 1 };

// cudnnConvolutionFwdAlgo_t
enum : int { CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0, CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8 };

using cudnnHandle_t = struct cudnnContext*;
using cudnnTensorDescriptor_t = struct cudnnTensorStruct*;
using cudnnFilterDescriptor_t = struct cudnnFilterStruct*;
using cudnnConvolutionDescriptor_t = struct cudnnConvolutionStruct*;

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

struct DnnApi {
  std::size_t (*cudnnGetVersion)() = nullptr;
  const char* (*cudnnGetErrorString)(cudnnStatus_t) = nullptr;
  cudnnStatus_t (*cudnnCreate)(cudnnHandle_t*) = nullptr;
  cudnnStatus_t (*cudnnSetStream)(cudnnHandle_t, void* stream) = nullptr;
  cudnnStatus_t (*cudnnCreateTensorDescriptor)(cudnnTensorDescriptor_t*) = nullptr;
  cudnnStatus_t (*cudnnSetTensor4dDescriptor)(cudnnTensorDescriptor_t, int format, int data_type, int n, int c, int h,
                                              int w) = nullptr;
  cudnnStatus_t (*cudnnDestroyTensorDescriptor)(cudnnTensorDescriptor_t) = nullptr;
  cudnnStatus_t (*cudnnCreateFilterDescriptor)(cudnnFilterDescriptor_t*) = nullptr;
  cudnnStatus_t (*cudnnSetFilter4dDescriptor)(cudnnFilterDescriptor_t, int data_type, int format, int k, int c, int h,
                                              int w) = nullptr;
  cudnnStatus_t (*cudnnDestroyFilterDescriptor)(cudnnFilterDescriptor_t) = nullptr;
  cudnnStatus_t (*cudnnCreateConvolutionDescriptor)(cudnnConvolutionDescriptor_t*) = nullptr;
  cudnnStatus_t (*cudnnSetConvolution2dDescriptor)(cudnnConvolutionDescriptor_t, int pad_h, int pad_w, int u, int v,
                                                   int dilation_h, int dilation_w, int mode,
                                                   int compute_type) = nullptr;
  cudnnStatus_t (*cudnnSetConvolutionGroupCount)(cudnnConvolutionDescriptor_t, int groups) = nullptr;
  cudnnStatus_t (*cudnnSetConvolutionMathType)(cudnnConvolutionDescriptor_t, int math_type) = nullptr;
  cudnnStatus_t (*cudnnDestroyConvolutionDescriptor)(cudnnConvolutionDescriptor_t) = nullptr;
  cudnnStatus_t (*cudnnGetConvolution2dForwardOutputDim)(cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t,
                                                         cudnnFilterDescriptor_t, int* n, int* c, int* h,
                                                         int* w) = nullptr;
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
  cudnnStatus_t (*cudnnAddTensor)(cudnnHandle_t, const void* alpha, cudnnTensorDescriptor_t a_desc, const void* a,
                                  const void* beta, cudnnTensorDescriptor_t c_desc, void* c) = nullptr;
};

}  // namespace
}  // namespace kernelevolve::cuda

// tests/test_vendor_libraries.cpp includes the declarations above alone (with KE_VENDOR_ABI_ONLY defined) to
// check them against the toolkit's headers where those are installed.
#ifndef KE_VENDOR_ABI_ONLY
namespace kernelevolve::cuda {
namespace {

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
  ok &= resolve(lib, api.cudnnSetTensor4dDescriptor, "cudnnSetTensor4dDescriptor", missing);
  ok &= resolve(lib, api.cudnnDestroyTensorDescriptor, "cudnnDestroyTensorDescriptor", missing);
  ok &= resolve(lib, api.cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor", missing);
  ok &= resolve(lib, api.cudnnSetFilter4dDescriptor, "cudnnSetFilter4dDescriptor", missing);
  ok &= resolve(lib, api.cudnnDestroyFilterDescriptor, "cudnnDestroyFilterDescriptor", missing);
  ok &= resolve(lib, api.cudnnCreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor", missing);
  ok &= resolve(lib, api.cudnnSetConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor", missing);
  ok &= resolve(lib, api.cudnnSetConvolutionGroupCount, "cudnnSetConvolutionGroupCount", missing);
  ok &= resolve(lib, api.cudnnSetConvolutionMathType, "cudnnSetConvolutionMathType", missing);
  ok &= resolve(lib, api.cudnnDestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor", missing);
  ok &= resolve(lib, api.cudnnGetConvolution2dForwardOutputDim, "cudnnGetConvolution2dForwardOutputDim", missing);
  ok &= resolve(lib, api.cudnnGetConvolutionForwardAlgorithmMaxCount, "cudnnGetConvolutionForwardAlgorithmMaxCount",
                missing);
  ok &= resolve(lib, api.cudnnGetConvolutionForwardAlgorithm_v7, "cudnnGetConvolutionForwardAlgorithm_v7", missing);
  ok &= resolve(lib, api.cudnnGetConvolutionForwardWorkspaceSize, "cudnnGetConvolutionForwardWorkspaceSize", missing);
  ok &= resolve(lib, api.cudnnConvolutionForward, "cudnnConvolutionForward", missing);
  ok &= resolve(lib, api.cudnnAddTensor, "cudnnAddTensor", missing);
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

// What decides the descriptors and the heuristic's answers.
struct PlanKey {
  std::int64_t n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
  int data_type;
  auto tie() const {
    return std::tie(n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups, data_type);
  }
  bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
};

// The descriptors of one convolution and the heuristic's usable algorithms, fastest first.
struct Plan {
  const DnnApi* api = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int math_type = CUDNN_DEFAULT_MATH;  // the one this dtype asks for
  std::vector<cudnnConvolutionFwdAlgoPerf_t> algorithms;
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

std::map<PlanKey, std::unique_ptr<Plan>>& plans() {
  static auto* cache = new std::map<PlanKey, std::unique_ptr<Plan>>;
  return *cache;
}

constexpr std::size_t kMaxPlans = 512;
constexpr std::size_t kMaxPreferredWorkspace = std::size_t{256} << 20;

std::string describe(const ConvCall& call) {
  auto d = [](std::int64_t v) { return std::to_string(v); };
  return "conv2d " + call.dtype + " x[" + d(call.n) + "," + d(call.c) + "," + d(call.h) + "," + d(call.w) + "] w[" +
         d(call.k) + "," + d(call.groups > 0 ? call.c / call.groups : call.c) + "," + d(call.r) + "," + d(call.s) +
         "] stride " + d(call.stride_h) + "," + d(call.stride_w) + " pad " + d(call.pad_h) + "," + d(call.pad_w) +
         " dilation " + d(call.dil_h) + "," + d(call.dil_w) + " groups " + d(call.groups);
}

std::string failure(const DnnApi& api, const char* function, cudnnStatus_t status, const ConvCall& call) {
  const char* name = api.cudnnGetErrorString ? api.cudnnGetErrorString(status) : nullptr;
  return std::string(function) + ": " + (name ? name : "CUDNN_STATUS_UNKNOWN") + " (" + std::to_string(status) + "); " +
         describe(call);
}

bool data_type_of(const std::string& dtype, int& data_type) {
  if (dtype == "f32") data_type = CUDNN_DATA_FLOAT;
  else if (dtype == "f16") data_type = CUDNN_DATA_HALF;
  else if (dtype == "bf16") data_type = CUDNN_DATA_BFLOAT16;
  else return false;
  return true;
}

// Checks the call, loads the library and creates the handle if need be; "" or why not. Holds state's mutex.
std::string prepare(Dnn& state, const ConvCall& call, int& data_type, std::int64_t& p, std::int64_t& q) {
  if (!data_type_of(call.dtype, data_type)) return "conv2d: dtype '" + call.dtype + "' is not f32, f16 or bf16";
  if (!conv_output_size(call, p, q)) return "conv2d: malformed sizes or an empty output; " + describe(call);
  for (std::int64_t v : {call.n, call.c, call.h, call.w, call.k, call.r, call.s, call.stride_h, call.stride_w,
                         call.pad_h, call.pad_w, call.dil_h, call.dil_w, call.groups, p, q})
    if (v > INT_MAX) return "conv2d: a size beyond cuDNN's int range; " + describe(call);
  if (!state.loaded) {
    LibraryLoad load = load_locked(state, {});
    if (!load.ok) return "conv2d: cuDNN is not loaded: " + load.why;
  }
  if (!state.handle) {
    const cudnnStatus_t s = state.api.cudnnCreate(&state.handle);
    if (s != CUDNN_STATUS_SUCCESS) {
      state.handle = nullptr;
      return failure(state.api, "cudnnCreate", s, call);
    }
  }
  return "";
}

// Builds the plan of `call`: "" or the failure.
std::string make_plan(Dnn& state, const ConvCall& call, int data_type, std::int64_t p, std::int64_t q, Plan& plan) {
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

  if ((s = api.cudnnSetTensor4dDescriptor(plan.x, CUDNN_TENSOR_NCHW, data_type, i(call.n), i(call.c), i(call.h),
                                          i(call.w))) != CUDNN_STATUS_SUCCESS ||
      (s = api.cudnnSetTensor4dDescriptor(plan.y, CUDNN_TENSOR_NCHW, data_type, i(call.n), i(call.k), i(p), i(q))) !=
          CUDNN_STATUS_SUCCESS ||
      (s = api.cudnnSetTensor4dDescriptor(plan.bias, CUDNN_TENSOR_NCHW, data_type, 1, i(call.k), 1, 1)) !=
          CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnSetTensor4dDescriptor", s, call);
  // A grouped filter holds C/groups input channels per output channel, as PyTorch's weight does.
  if ((s = api.cudnnSetFilter4dDescriptor(plan.filter, data_type, CUDNN_TENSOR_NCHW, i(call.k), i(call.c / call.groups),
                                          i(call.r), i(call.s))) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnSetFilter4dDescriptor", s, call);
  // fp32 accumulation for every dtype (f16 and bf16 data with float compute: PyTorch's choice too).
  if ((s = api.cudnnSetConvolution2dDescriptor(plan.conv, i(call.pad_h), i(call.pad_w), i(call.stride_h),
                                               i(call.stride_w), i(call.dil_h), i(call.dil_w), CUDNN_CROSS_CORRELATION,
                                               CUDNN_DATA_FLOAT)) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnSetConvolution2dDescriptor", s, call);
  if ((s = api.cudnnSetConvolutionGroupCount(plan.conv, i(call.groups))) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnSetConvolutionGroupCount", s, call);
  plan.math_type = data_type == CUDNN_DATA_FLOAT ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  if ((s = api.cudnnSetConvolutionMathType(plan.conv, plan.math_type)) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnSetConvolutionMathType", s, call);

  int out_n = 0, out_c = 0, out_h = 0, out_w = 0;
  if ((s = api.cudnnGetConvolution2dForwardOutputDim(plan.conv, plan.x, plan.filter, &out_n, &out_c, &out_h, &out_w)) !=
      CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnGetConvolution2dForwardOutputDim", s, call);
  if (out_n != call.n || out_c != call.k || out_h != p || out_w != q)
    return "cudnnGetConvolution2dForwardOutputDim: cuDNN's output [" + std::to_string(out_n) + "," +
           std::to_string(out_c) + "," + std::to_string(out_h) + "," + std::to_string(out_w) +
           "] is not the expected [" + std::to_string(call.n) + "," + std::to_string(call.k) + "," + std::to_string(p) +
           "," + std::to_string(q) + "]; " + describe(call);

  int requested = 0;
  if (api.cudnnGetConvolutionForwardAlgorithmMaxCount(state.handle, &requested) != CUDNN_STATUS_SUCCESS ||
      requested < 1)
    requested = 2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  std::vector<cudnnConvolutionFwdAlgoPerf_t> results(static_cast<std::size_t>(requested));
  int returned = 0;
  if ((s = api.cudnnGetConvolutionForwardAlgorithm_v7(state.handle, plan.x, plan.filter, plan.conv, plan.y, requested,
                                                      &returned, results.data())) != CUDNN_STATUS_SUCCESS)
    return failure(api, "cudnnGetConvolutionForwardAlgorithm_v7", s, call);
  for (int j = 0; j < returned && j < requested; ++j) {
    const cudnnConvolutionFwdAlgoPerf_t& perf = results[static_cast<std::size_t>(j)];
    if (perf.status != CUDNN_STATUS_SUCCESS) continue;
    // cuDNN 7.4 and later pick kernels by algorithm and math type together. For f32 only FMA kernels
    // qualify: a TF32 one (tensor-op or default math) would round the inputs to 10-bit mantissas.
    if (data_type == CUDNN_DATA_FLOAT && perf.mathType != CUDNN_FMA_MATH) continue;
    plan.algorithms.push_back(perf);
  }
  return "";
}

// The plan of `call` from the cache, made if need be; null with `error` set when it cannot be made.
Plan* plan_for(Dnn& state, const ConvCall& call, int data_type, std::int64_t p, std::int64_t q, std::string& error) {
  const PlanKey key{call.n,        call.c,     call.h,     call.w,     call.k,     call.r,      call.s,   call.stride_h,
                    call.stride_w, call.pad_h, call.pad_w, call.dil_h, call.dil_w, call.groups, data_type};
  auto& cache = plans();
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  error = make_plan(state, call, data_type, p, q, *plan);
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
  // None of the heuristic's answers fits (or it gave none of the right math type): the implicit GEMM,
  // which every configuration supports and which needs no workspace, with the dtype's own math type.
  algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  math_type = plan.math_type;
  cudnnStatus_t s = api.cudnnSetConvolutionMathType(plan.conv, math_type);
  if (s != CUDNN_STATUS_SUCCESS) return failure(api, "cudnnSetConvolutionMathType", s, call);
  needed = 0;
  s = api.cudnnGetConvolutionForwardWorkspaceSize(state.handle, plan.x, plan.filter, plan.conv, plan.y, algo, &needed);
  if (s != CUDNN_STATUS_SUCCESS) return failure(api, "cudnnGetConvolutionForwardWorkspaceSize", s, call);
  if (needed > workspace_bytes)
    return "conv2d: no algorithm fits " + std::to_string(workspace_bytes) +
           " bytes of workspace (the implicit GEMM needs " + std::to_string(needed) + "); " + describe(call);
  return "";
}

}  // namespace

LibraryLoad load_cudnn(const std::vector<std::string>& extra_dirs) {
  Dnn& state = dnn();
  std::lock_guard<std::mutex> lock(state.mutex);
  return load_locked(state, extra_dirs);
}

bool conv_output_size(const ConvCall& call, std::int64_t& p, std::int64_t& q) {
  if (call.n < 1 || call.c < 1 || call.h < 1 || call.w < 1 || call.k < 1 || call.r < 1 || call.s < 1) return false;
  if (call.stride_h < 1 || call.stride_w < 1 || call.dil_h < 1 || call.dil_w < 1) return false;
  if (call.pad_h < 0 || call.pad_w < 0 || call.groups < 1) return false;
  if (call.c % call.groups != 0 || call.k % call.groups != 0) return false;
  // The span of the dilated filter must fit in the padded input; then the output counts its positions.
  const std::int64_t room_h = call.h + 2 * call.pad_h - call.dil_h * (call.r - 1) - 1;
  const std::int64_t room_w = call.w + 2 * call.pad_w - call.dil_w * (call.s - 1) - 1;
  if (room_h < 0 || room_w < 0) return false;
  p = room_h / call.stride_h + 1;
  q = room_w / call.stride_w + 1;
  return true;
}

std::size_t conv_workspace_bytes(const ConvCall& call) {
  try {
    Dnn& state = dnn();
    std::lock_guard<std::mutex> lock(state.mutex);
    int data_type = 0;
    std::int64_t p = 0, q = 0;
    if (!prepare(state, call, data_type, p, q).empty()) return 0;
    std::string error;
    Plan* plan = plan_for(state, call, data_type, p, q, error);
    if (!plan) return 0;
    int algo = 0, math_type = 0;
    std::size_t needed = 0;
    if (!choose(state, call, *plan, kMaxPreferredWorkspace, algo, math_type, needed).empty()) return 0;
    return needed;
  } catch (...) {
    return 0;
  }
}

std::string conv2d(void* stream, const ConvCall& call) {
  try {
    if (!call.x || !call.filter || !call.y) return "conv2d: a null operand address; " + describe(call);
    if (call.workspace_bytes && !call.workspace)
      return "conv2d: workspace_bytes without a workspace address; " + describe(call);
    Dnn& state = dnn();
    std::lock_guard<std::mutex> lock(state.mutex);
    int data_type = 0;
    std::int64_t p = 0, q = 0;
    if (std::string error = prepare(state, call, data_type, p, q); !error.empty()) return error;
    std::string error;
    Plan* plan = plan_for(state, call, data_type, p, q, error);
    if (!plan) return error;
    int algo = 0, math_type = 0;
    std::size_t needed = 0;
    if (std::string why = choose(state, call, *plan, call.workspace_bytes, algo, math_type, needed); !why.empty())
      return why;
    const DnnApi& api = state.api;
    cudnnStatus_t s = api.cudnnSetConvolutionMathType(plan->conv, math_type);
    if (s != CUDNN_STATUS_SUCCESS) return failure(api, "cudnnSetConvolutionMathType", s, call);
    if ((s = api.cudnnSetStream(state.handle, stream)) != CUDNN_STATUS_SUCCESS)
      return failure(api, "cudnnSetStream", s, call);
    auto ptr = [](std::uint64_t address) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); };
    // Scaling factors are floats for float, half and bfloat16 data. beta 0: y is written without being read,
    // so it may hold anything (NaN) before.
    const float one = 1.0f, zero = 0.0f;
    s = api.cudnnConvolutionForward(state.handle, &one, plan->x, ptr(call.x), plan->filter, ptr(call.filter),
                                    plan->conv, algo, needed ? ptr(call.workspace) : nullptr,
                                    needed ? call.workspace_bytes : 0, &zero, plan->y, ptr(call.y));
    if (s != CUDNN_STATUS_SUCCESS) return failure(api, "cudnnConvolutionForward", s, call);
    if (call.bias) {
      // y = 1·bias + 1·y, the [1,K,1,1] bias broadcast over N, P and Q.
      s = api.cudnnAddTensor(state.handle, &one, plan->bias, ptr(call.bias), &one, plan->y, ptr(call.y));
      if (s != CUDNN_STATUS_SUCCESS) return failure(api, "cudnnAddTensor", s, call);
    }
    return "";
  } catch (const std::exception& e) {
    return std::string("conv2d: ") + e.what();
  } catch (...) {
    return "conv2d: unknown exception";
  }
}

}  // namespace kernelevolve::cuda
#endif  // KE_VENDOR_ABI_ONLY
