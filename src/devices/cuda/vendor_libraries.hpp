// NVIDIA's libraries as steps of a program: cuBLASLt's matrix product (with its bias and activation
// epilogues), cuBLAS's GEMM (one product or a strided batch) and cuDNN's 2-d and 3-d convolutions, forward and
// transposed, and its 3-d average pooling, loaded at run time with dlopen as the driver and NVRTC are
// (cuda_api.hpp), so that a build needs neither library nor any CUDA header.
//
// These functions know nothing of the GPU core: they take device addresses and a CUstream, and expect
// the caller's CUDA context (the device's primary context) to be current on the calling thread. Both
// libraries run on the CUDA runtime, which adopts that context. Each library's handle is created once
// per process, on first use; every call is serialized by a mutex of its library, so the functions may
// be called from any thread. None throws; failures come back as text.
//
// The constants, structures and signatures behind them are declared by hand in cublaslt.cpp and
// cudnn.cpp, from the headers named there.
#pragma once
#include <cstddef>
#include <cstdint>
#include <dlfcn.h>
#include <optional>
#include <string>
#include <vector>

namespace kernelevolve::cuda {

// Where a library was found, or why not.
struct LibraryLoad {
  bool ok = false;
  std::string path;  // the file that was loaded (resolved by the dynamic linker), when ok
  std::string why;   // when not ok: every place tried and why it failed, or what the library lacks
};

// ---- cuBLASLt -----------------------------------------------------------------------------------------

// Loads cuBLASLt from $KE_CUBLASLT (a full path) when set, and then from nowhere else; otherwise the
// sonames libcublasLt.so.13, .so.12, .so.11 and libcublasLt.so on the loader's path, then the same names
// under each directory of `extra_dirs` (PyTorch's site-packages/nvidia/*/lib folders, say). A success is
// kept for the process, and later calls return it whatever they pass; a failure is not kept, so a later
// call may try other directories. Thread-safe.
LibraryLoad load_cublaslt(const std::vector<std::string>& extra_dirs);

enum class MatmulEpilogue { none, relu, gelu, bias, bias_relu, bias_gelu };
// "none", "relu", "gelu", "bias", "bias_relu", "bias_gelu"; nullopt for anything else.
std::optional<MatmulEpilogue> parse_epilogue(const std::string& text);
const char* to_string(MatmulEpilogue epilogue);

// One row-major product D[M,N] = epilogue(A[M,K] · op(B) + bias[N]), B stored [K,N], or [N,K] when
// b_transposed (PyTorch's Linear weight). gemm() alone also takes A stored [K,M] (a_transposed: torch.mm(x.T, y))
// and a batch: `batch` products, the operands of each following the previous one's densely (strides M·K, K·N and
// M·N elements), as torch.bmm. dtype ("f32", "f16" or "bf16") is that of A, B, D and the bias
// alike; accumulation is fp32 (CUBLAS_COMPUTE_32F), which for f32 operands is true fp32, unless `tf32` asks for
// CUBLAS_COMPUTE_32F_FAST_TF32 (f32 operands only: inputs rounded to TF32 on tensor cores, as PyTorch's products
// with torch.backends.cuda.matmul.allow_tf32 on).
// cuBLASLt's GELU is the tanh approximation (torch's gelu(approximate="tanh")), not the erf form.
// Addresses are device pointers; bias is read only by the bias epilogues; workspace is a device buffer
// of workspace_bytes (0 allowed: fewer algorithms qualify).
struct MatmulCall {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch = 1;  // gemm() only: more than one runs cuBLAS's strided batched GEMM
  std::string dtype = "f32";
  bool a_transposed = false;  // gemm() only
  bool b_transposed = false;
  MatmulEpilogue epilogue = MatmulEpilogue::none;
  bool tf32 = false;  // f32 only: TF32 math (a step's "math": "tf32"); refused for f16 and bf16
  std::uint64_t a = 0, b = 0, d = 0, bias = 0;
  std::uint64_t workspace = 0;
  std::size_t workspace_bytes = 0;
};

// The workspace a product would like: 32 MiB, NVIDIA's recommendation for Hopper (enough elsewhere).
std::size_t matmul_workspace_bytes();

// Enqueues the product on `stream` (a CUstream; null is the legacy default stream) and returns "" on
// success, else one line naming the failed call and its status, e.g.
// "cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED (15); matmul f32 M=33 N=65 K=17 bias_relu".
// The descriptors and the algorithm are cached per shape, dtype, epilogue, transposition, operand
// alignment, workspace size and math. The algorithm is the heuristic's first answer, the one PyTorch takes. With
// $KE_CUBLASLT_TUNE=1 (or =log) it is chosen by measurement on the first call for a key instead: each of the
// heuristic's answers that fit the workspace (up to 8) runs on `stream`, 4 times each, into this call's D,
// then the heuristic's first again, and another replaces the first only when 2% faster; D ends holding the
// chosen algorithm's result, and that first call synchronizes `stream` (once per key: make it an untimed
// one). =log writes each choice (its index in the heuristic's order, 0 = the first, and both times) to
// stderr. Loads the library (without extra directories) if no load_cublaslt call has succeeded yet.
std::string matmul(void* stream, const MatmulCall& call);

// ---- cuBLAS -------------------------------------------------------------------------------------------

// Loads cuBLAS as load_cublaslt does: $KE_CUBLAS alone when set; else libcublas.so.13, .so.12, .so.11 and
// libcublas.so on the loader's path, then under each of `extra_dirs` (with libcublasLt beside it opened
// first, which libcublas needs).
LibraryLoad load_cublas(const std::vector<std::string>& extra_dirs);

// The product of `call` without an epilogue (call.epilogue must be none) through cuBLAS's classic GEMM:
// cublasSgemm for f32 (CUBLAS_DEFAULT_MATH: true fp32, no TF32), cublasGemmEx with fp32 accumulation for
// f16 and bf16; with a batch above 1, cublasSgemmStridedBatched and cublasGemmStridedBatchedEx. An f32 call with
// `tf32` runs cublasGemmEx (or its strided batched form) with CUBLAS_COMPUTE_32F_FAST_TF32. Those are the
// calls PyTorch's torch.mm and torch.bmm make, so the kernel is the one cuBLAS's own heuristics give PyTorch;
// nothing is timed or tuned. M, N, K and the batch must each be below 2^31. Enqueues on `stream`; "" or
// one line naming the failed call. Loads the library (without extra directories) if no load_cublas call
// has succeeded yet.
std::string gemm(void* stream, const MatmulCall& call);

// ---- cuDNN --------------------------------------------------------------------------------------------

// Loads cuDNN 9 or 8 as load_cublaslt does: $KE_CUDNN alone when set; else libcudnn.so.9, libcudnn.so.8,
// libcudnn.so on the loader's path, then under each of `extra_dirs`. From a directory, cuDNN 9's
// sub-libraries beside it (libcudnn_graph, _ops, _cnn, _engines_*, _heuristic) are opened first, so that
// the libcudnn shim finds them by soname wherever the loader's path points. Refuses a cuDNN older than 8.
LibraryLoad load_cudnn(const std::vector<std::string>& extra_dirs);

// A convolution, as torch.nn.functional's conv2d, conv3d, conv_transpose2d and conv_transpose3d compute it, with
// stride, padding, dilation and groups (and output_padding when transposed); bias 0: none. 2 spatial dimensions:
// x[N,C,H,W]; 3: x[N,C,D,H,W] (d, t, and the _d settings are read only then).
//   forward:    w[K, C/groups, (T,) R, S], y[N, K, (OD,) P, Q] with P = (H + 2·pad_h − dil_h·(R−1) − 1) / stride_h + 1;
//   transposed: w[C, K/groups, (T,) R, S] (PyTorch's ConvTranspose weight: input channels first), y[N, K, (OD,) P, Q]
//               with P = (H − 1)·stride_h − 2·pad_h + dil_h·(R−1) + out_pad_h + 1: the gradient of the forward
//               convolution y → x with respect to its input, which cuDNN computes as cudnnConvolutionBackwardData.
// Q and OD likewise. y = conv(x, w) + bias[K]. dtype "f32", "f16" or "bf16" for x, w, y and bias; accumulation is
// fp32. f32 runs with CUDNN_FMA_MATH (no TF32, no tensor cores) unless `tf32` lets it take CUDNN_DEFAULT_MATH and
// whatever math type the heuristic's algorithm has (TF32 tensor cores), as PyTorch does with
// torch.backends.cudnn.allow_tf32 on; f16 and bf16 run with tensor cores.
struct ConvCall {
  int spatial_dims = 2;     // 2 or 3
  bool transposed = false;  // a transposed convolution (conv_transpose2d / 3d)
  std::int64_t n = 0, c = 0, d = 1, h = 0, w = 0, k = 0, t = 1, r = 0, s = 0;
  std::int64_t stride_d = 1, stride_h = 1, stride_w = 1, pad_d = 0, pad_h = 0, pad_w = 0, dil_d = 1, dil_h = 1,
               dil_w = 1, groups = 1;
  std::int64_t out_pad_d = 0, out_pad_h = 0, out_pad_w = 0;  // transposed only
  std::string dtype = "f32";
  bool tf32 = false;  // f32 only: TF32 math (a step's "math": "tf32"); refused for f16 and bf16
  std::uint64_t x = 0, filter = 0, y = 0, bias = 0;
  std::uint64_t workspace = 0;
  std::size_t workspace_bytes = 0;
};

// The output's spatial extents (o: depth, 1 for 2 spatial dimensions; p: height; q: width) by the formulas above.
// False (o, p and q untouched) when any would be < 1, or the call is malformed: spatial_dims not 2 or 3, a size < 1,
// stride or dilation < 1, padding < 0, groups < 1 or not dividing both C and K, output_padding on a forward
// convolution, or output_padding < 0 or not below its stride (cuDNN computes the transposed convolution as the
// forward one's gradient, whose output it must be).
bool conv_output_size(const ConvCall& call, std::int64_t& o, std::int64_t& p, std::int64_t& q);
// The 2-d form: p and q alone.
bool conv_output_size(const ConvCall& call, std::int64_t& p, std::int64_t& q);

// The workspace of the algorithm `convolution` would choose given unlimited room (the heuristic's fastest that
// needs at most 256 MiB); 0 when that needs none or is unknown (no cuDNN, a malformed call). Asks the
// heuristic only: enqueues nothing. Needs the CUDA context current (it may create the handle).
std::size_t conv_workspace_bytes(const ConvCall& call);

// Enqueues the convolution, then the bias, on `stream`: "" on success, else one line naming the failed
// call and its status. The algorithm is the heuristic's (cudnnGetConvolutionForwardAlgorithm_v7, or
// cudnnGetConvolutionBackwardDataAlgorithm_v7 when transposed) fastest that fits workspace_bytes; descriptors and
// the heuristic's answers are cached per shape, mode, dtype and math.
std::string convolution(void* stream, const ConvCall& call);

// cuDNN counts a tensor's elements in ints: a convolution or pooling whose input or output holds more than
// max_elements (INT_MAX) runs in slices of its batch, each of this many samples (of `sample_elements`, the larger of
// one sample's input and output); n when one call will do, 0 when even one sample is too large (refused by name).
std::int64_t batch_slice(std::int64_t n, std::int64_t sample_elements, std::int64_t max_elements);
// convolution() and avg_pool3d() with another limit than INT_MAX, so that a test slices a small batch.
std::string convolution(void* stream, const ConvCall& call, std::int64_t max_elements);

// An average pooling over 3 spatial dimensions, as torch.nn.functional.avg_pool3d with ceil_mode off and no
// divisor_override: x[N,C,D,H,W] to y[N,C,OD,P,Q] with OD = (D + 2·padding[0] − kernel[0]) / stride[0] + 1, P and Q
// likewise; each output the mean of its window, over the whole window (count_include_pad) or over the elements
// inside the input. dtype "f32", "f16" or "bf16" for x and y.
struct PoolCall {
  std::int64_t n = 0, c = 0, d = 0, h = 0, w = 0;
  std::int64_t kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, padding[3] = {0, 0, 0};  // depth, height, width
  bool count_include_pad = true;
  std::string dtype = "f32";
  std::uint64_t x = 0, y = 0;
};

// The output's extents by the formula above. False (o, p, q untouched) when the call is malformed: a size, kernel
// or stride < 1, a padding < 0 or above half its kernel (PyTorch's rule and cuDNN's), or an empty output.
bool pool_output_size(const PoolCall& call, std::int64_t& o, std::int64_t& p, std::int64_t& q);

// Enqueues the pooling (cudnnPoolingForward) on `stream`: "" on success, else one line naming the failed call and
// its status. The descriptors are cached per shape, setting and dtype.
std::string avg_pool3d(void* stream, const PoolCall& call);
std::string avg_pool3d(void* stream, const PoolCall& call, std::int64_t max_elements);

namespace vendor_detail {

// An operand's device address, which the calls above carry as an integer, as the libraries take it.
inline void* device_ptr(std::uint64_t address) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); }

// Looks `name` up in the library `lib` into `fn`; a symbol it lacks is added to `missing` ("a, b").
template <class F>
bool resolve(void* lib, F& fn, const char* name, std::string& missing) {
  if (void* p = dlsym(lib, name)) {
    fn = reinterpret_cast<F>(p);
    return true;
  }
  missing += std::string(missing.empty() ? "" : ", ") + name;
  return false;
}

// A library opened by open_library: its dlopen handle, or why there is none.
struct OpenedLibrary {
  void* handle = nullptr;
  LibraryLoad load;
};

// The search both loaders share: $<env_var> alone when set; else each of `sonames` on the loader's path,
// then under each of `dirs`. `companions` are opened (best effort) from the directory of a library found
// by path, before it. `what` names the library in `why` ("cuBLASLt").
OpenedLibrary open_library(const char* what, const char* env_var, const std::vector<const char*>& sonames,
                           const std::vector<std::string>& dirs, const std::vector<const char*>& companions);

// The file a dlopen handle came from, as the dynamic linker resolved it; "" if unknown.
std::string loaded_path(void* handle);

}  // namespace vendor_detail

}  // namespace kernelevolve::cuda
