// NVIDIA's libraries as steps of a program: cuBLASLt's matrix product (with its bias and activation
// epilogues) and cuDNN's 2-d convolution, loaded at run time with dlopen as the driver and NVRTC are
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
// b_transposed (PyTorch's Linear weight). dtype ("f32", "f16" or "bf16") is that of A, B, D and the bias
// alike; accumulation is fp32 (CUBLAS_COMPUTE_32F), which for f32 operands is true fp32, never TF32.
// cuBLASLt's GELU is the tanh approximation (torch's gelu(approximate="tanh")), not the erf form.
// Addresses are device pointers; bias is read only by the bias epilogues; workspace is a device buffer
// of workspace_bytes (0 allowed: fewer algorithms qualify).
struct MatmulCall {
  std::int64_t m = 0, n = 0, k = 0;
  std::string dtype = "f32";
  bool b_transposed = false;
  MatmulEpilogue epilogue = MatmulEpilogue::none;
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
// alignment and workspace size. The algorithm is the heuristic's first answer, the one PyTorch takes. With
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
// f16 and bf16. That is the call PyTorch's torch.mm makes, so the kernel is the one cuBLAS's own heuristics
// give PyTorch; nothing is timed or tuned. M, N and K must each be below 2^31. Enqueues on `stream`; "" or
// one line naming the failed call. Loads the library (without extra directories) if no load_cublas call
// has succeeded yet.
std::string gemm(void* stream, const MatmulCall& call);

// ---- cuDNN --------------------------------------------------------------------------------------------

// Loads cuDNN 9 or 8 as load_cublaslt does: $KE_CUDNN alone when set; else libcudnn.so.9, libcudnn.so.8,
// libcudnn.so on the loader's path, then under each of `extra_dirs`. From a directory, cuDNN 9's
// sub-libraries beside it (libcudnn_graph, _ops, _cnn, _engines_*, _heuristic) are opened first, so that
// the libcudnn shim finds them by soname wherever the loader's path points. Refuses a cuDNN older than 8.
LibraryLoad load_cudnn(const std::vector<std::string>& extra_dirs);

// A 2-d convolution in NCHW, as torch.nn.functional.conv2d: y[N,K,P,Q] = conv(x[N,C,H,W],
// w[K,C/groups,R,S]) + bias[K] (bias 0: none), with stride, padding, dilation and groups. dtype "f32",
// "f16" or "bf16" for x, w, y and bias; accumulation is fp32. f32 runs with CUDNN_FMA_MATH (no TF32, no
// tensor cores); f16 and bf16 with tensor cores.
struct ConvCall {
  std::int64_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0;
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1, groups = 1;
  std::string dtype = "f32";
  std::uint64_t x = 0, filter = 0, y = 0, bias = 0;
  std::uint64_t workspace = 0;
  std::size_t workspace_bytes = 0;
};

// P = (H + 2·pad_h − dil_h·(R−1) − 1) / stride_h + 1, and Q likewise. False (p and q untouched) when
// either would be < 1, or the call is malformed: a size < 1, stride or dilation < 1, padding < 0,
// groups < 1 or not dividing both C and K.
bool conv_output_size(const ConvCall& call, std::int64_t& p, std::int64_t& q);

// The workspace of the algorithm conv2d would choose given unlimited room (the heuristic's fastest that
// needs at most 256 MiB); 0 when that needs none or is unknown (no cuDNN, a malformed call). Asks the
// heuristic only: enqueues nothing. Needs the CUDA context current (it may create the handle).
std::size_t conv_workspace_bytes(const ConvCall& call);

// Enqueues the convolution, then the bias, on `stream`: "" on success, else one line naming the failed
// call and its status. The algorithm is the heuristic's (cudnnGetConvolutionForwardAlgorithm_v7) fastest
// that fits workspace_bytes; descriptors and the heuristic's answers are cached per shape and dtype.
std::string conv2d(void* stream, const ConvCall& call);

namespace vendor_detail {

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
