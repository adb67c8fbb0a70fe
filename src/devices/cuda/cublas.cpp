// cuBLAS's classic GEMM, loaded at run time; see vendor_libraries.hpp. It is the call PyTorch's own
// torch.mm and a Linear without bias make (at::cuda::blas::gemm: cublasSgemm for fp32, cublasGemmEx for
// the 16-bit types), and with a batch torch.bmm's (at::cuda::blas::bgemm: cublasSgemmStridedBatched,
// cublasGemmStridedBatchedEx), so a program's product through it runs the kernel PyTorch's heuristics pick, with no
// tuning of ours on top.
//
// The enum values and signatures below are declared by hand from cuBLAS 13.1.0's cublas_api.h (the CUDA
// 13.0 toolkit's), and were compared with it, parameter by parameter; every value used has been stable
// since cuBLAS 11.
#include <dlfcn.h>

#include <climits>
#include <cstdint>
#include <mutex>

#include "devices/cuda/vendor_libraries.hpp"

namespace kernelevolve::cuda {
namespace {

using vendor_detail::device_ptr;
using cublasStatus_t = int;
constexpr cublasStatus_t kSuccess = 0;

using cublasHandle_t = struct cublasContext*;
// cublasOperation_t, cublasMath_t, cudaDataType_t, cublasComputeType_t, cublasGemmAlgo_t
enum : int { kOpN = 0, kOpT = 1 };
enum : int { kDefaultMath = 0 };  // CUBLAS_DEFAULT_MATH: no TF32 for fp32 (PyTorch's default)
enum : int { kR32F = 0, kR16F = 2, kR16BF = 14 };
enum : int { kCompute32F = 68, kCompute32FFastTF32 = 77 };
enum : int { kGemmDefault = -1 };

struct BlasApi {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, void* stream) = nullptr;
  cublasStatus_t (*set_workspace)(cublasHandle_t, void* workspace, std::size_t bytes) = nullptr;
  cublasStatus_t (*set_math_mode)(cublasHandle_t, int mode) = nullptr;
  cublasStatus_t (*sgemm)(cublasHandle_t, int transa, int transb, int m, int n, int k, const float* alpha,
                          const float* a, int lda, const float* b, int ldb, const float* beta, float* c,
                          int ldc) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, int transa, int transb, int m, int n, int k, const void* alpha,
                            const void* a, int a_type, int lda, const void* b, int b_type, int ldb, const void* beta,
                            void* c, int c_type, int ldc, int compute_type, int algo) = nullptr;
  cublasStatus_t (*sgemm_strided_batched)(cublasHandle_t, int transa, int transb, int m, int n, int k,
                                          const float* alpha, const float* a, int lda, long long stride_a,
                                          const float* b, int ldb, long long stride_b, const float* beta, float* c,
                                          int ldc, long long stride_c, int batch_count) = nullptr;
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, int transa, int transb, int m, int n, int k,
                                            const void* alpha, const void* a, int a_type, int lda, long long stride_a,
                                            const void* b, int b_type, int ldb, long long stride_b, const void* beta,
                                            void* c, int c_type, int ldc, long long stride_c, int batch_count,
                                            int compute_type, int algo) = nullptr;
  const char* (*status_name)(cublasStatus_t) = nullptr;  // cublasGetStatusName (11.4+); may stay null
};

struct Blas {
  std::mutex mutex;  // guards everything below, and serializes the calls into the library
  bool loaded = false;
  LibraryLoad load;
  BlasApi api;
  cublasHandle_t handle = nullptr;
};

Blas& blas() {
  static Blas* state = new Blas;  // never destroyed: the library stays loaded until the process ends
  return *state;
}

LibraryLoad load_locked(Blas& state, const std::vector<std::string>& extra_dirs) {
  if (state.loaded) return state.load;
  // libcublas needs libcublasLt beside it; opening that first lets the loader find it by soname.
  vendor_detail::OpenedLibrary opened = vendor_detail::open_library(
      "cuBLAS", "KE_CUBLAS", {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}, extra_dirs,
      {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"});
  if (!opened.handle) return opened.load;
  void* lib = opened.handle;
  BlasApi api;
  std::string missing;
  bool ok = true;
  using vendor_detail::resolve;
  ok &= resolve(lib, api.create, "cublasCreate_v2", missing);
  ok &= resolve(lib, api.set_stream, "cublasSetStream_v2", missing);
  ok &= resolve(lib, api.set_workspace, "cublasSetWorkspace_v2", missing);
  ok &= resolve(lib, api.set_math_mode, "cublasSetMathMode", missing);
  ok &= resolve(lib, api.sgemm, "cublasSgemm_v2", missing);
  ok &= resolve(lib, api.gemm_ex, "cublasGemmEx", missing);
  ok &= resolve(lib, api.sgemm_strided_batched, "cublasSgemmStridedBatched", missing);
  ok &= resolve(lib, api.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx", missing);
  std::string optional;
  resolve(lib, api.status_name, "cublasGetStatusName", optional);
  LibraryLoad result = opened.load;
  if (!ok) {
    dlclose(lib);
    result.ok = false;
    result.why = "cuBLAS " + result.path + " lacks " + missing;
    return result;
  }
  state.api = api;
  state.load = result;
  state.loaded = true;
  return result;
}

std::string failure(const BlasApi& api, const char* function, cublasStatus_t status, const MatmulCall& call) {
  const char* name = api.status_name ? api.status_name(status) : nullptr;
  return std::string(function) + ": " + (name ? name : "CUBLAS_STATUS_" + std::to_string(status)) + " (" +
         std::to_string(status) + "); gemm " + call.dtype +
         (call.batch != 1 ? " batch=" + std::to_string(call.batch) : "") + " M=" + std::to_string(call.m) +
         " N=" + std::to_string(call.n) + " K=" + std::to_string(call.k) + (call.a_transposed ? " A^T" : "") +
         (call.b_transposed ? " B^T" : "") + (call.tf32 ? " tf32" : "");
}

}  // namespace

LibraryLoad load_cublas(const std::vector<std::string>& extra_dirs) {
  Blas& state = blas();
  std::lock_guard<std::mutex> lock(state.mutex);
  return load_locked(state, extra_dirs);
}

// Row-major through a column-major library, as matmul() does (cublaslt.cpp): Dᵀ (N×M) = op(B)ᵀ · op(A)ᵀ, with
// cuBLAS's A := our B (op T when stored [N,K]), its B := our A (op T when stored [K,M]: the column-major M×K
// matrix, whose transpose is the K×M op(A)ᵀ), m := N, n := M.
std::string gemm(void* stream, const MatmulCall& call) {
  try {
    int data_type = 0;
    if (call.dtype == "f32") data_type = kR32F;
    else if (call.dtype == "f16") data_type = kR16F;
    else if (call.dtype == "bf16") data_type = kR16BF;
    else return "gemm: dtype '" + call.dtype + "' is not f32, f16 or bf16";
    if (call.epilogue != MatmulEpilogue::none) return "gemm: cuBLAS's GEMM has no epilogue (cublaslt.matmul has)";
    if (call.tf32 && data_type != kR32F)
      return "gemm: TF32 math is for f32 operands (f16 and bf16 run on tensor cores already)";
    if (call.m < 1 || call.n < 1 || call.k < 1 || call.batch < 1) return "gemm: sizes must be at least 1";
    // The classic API takes int sizes, leading dimensions and batch counts.
    if (call.m > INT_MAX || call.n > INT_MAX || call.k > INT_MAX || call.batch > INT_MAX)
      return "gemm: M, N, K and the batch must each be below 2^31 (" + std::to_string(call.m) + ", " +
             std::to_string(call.n) + ", " + std::to_string(call.k) + ", " + std::to_string(call.batch) + ")";
    if (!call.a || !call.b || !call.d) return "gemm: a null operand address";
    if (call.workspace_bytes && !call.workspace) return "gemm: workspace_bytes without a workspace address";

    Blas& state = blas();
    std::lock_guard<std::mutex> lock(state.mutex);
    if (!state.loaded) {
      LibraryLoad load = load_locked(state, {});
      if (!load.ok) return "gemm: cuBLAS is not loaded: " + load.why;
    }
    const BlasApi& api = state.api;
    if (!state.handle) {
      cublasStatus_t s = api.create(&state.handle);
      if (s != kSuccess) {
        state.handle = nullptr;
        return failure(api, "cublasCreate", s, call);
      }
      if ((s = api.set_math_mode(state.handle, kDefaultMath)) != kSuccess)
        return failure(api, "cublasSetMathMode", s, call);
    }
    cublasStatus_t s = api.set_stream(state.handle, stream);
    if (s != kSuccess) return failure(api, "cublasSetStream", s, call);
    // Each step brings its own workspace; without one cuBLAS would allocate its own on this stream.
    if ((s = api.set_workspace(state.handle, call.workspace_bytes ? device_ptr(call.workspace) : nullptr,
                               call.workspace_bytes)) != kSuccess)
      return failure(api, "cublasSetWorkspace", s, call);
    const int m = static_cast<int>(call.n), n = static_cast<int>(call.m), k = static_cast<int>(call.k);
    const int transa = call.b_transposed ? kOpT : kOpN, transb = call.a_transposed ? kOpT : kOpN;
    const int lda = call.b_transposed ? k : m, ldb = call.a_transposed ? n : k, ldc = m;
    const float alpha = 1.0f, beta = 0.0f;  // beta 0: C is not read, so D may hold anything (NaN) before
    // f32 with TF32 goes through the Ex calls, whose compute type says so for this call alone: the handle's math
    // mode, shared by every step, stays CUBLAS_DEFAULT_MATH.
    const bool plain_f32 = data_type == kR32F && !call.tf32;
    const int compute_type = call.tf32 ? kCompute32FFastTF32 : kCompute32F;
    if (call.batch > 1) {
      // Each product's operands follow the previous one's densely, as torch.bmm's contiguous operands do.
      const long long stride_b = call.k * call.n, stride_a = call.m * call.k, stride_d = call.m * call.n;
      const int batch = static_cast<int>(call.batch);
      if (plain_f32) {
        s = api.sgemm_strided_batched(state.handle, transa, transb, m, n, k, &alpha,
                                      static_cast<const float*>(device_ptr(call.b)), lda, stride_b,
                                      static_cast<const float*>(device_ptr(call.a)), ldb, stride_a, &beta,
                                      static_cast<float*>(device_ptr(call.d)), ldc, stride_d, batch);
        if (s != kSuccess) return failure(api, "cublasSgemmStridedBatched", s, call);
      } else {
        s = api.gemm_strided_batched_ex(state.handle, transa, transb, m, n, k, &alpha, device_ptr(call.b), data_type,
                                        lda, stride_b, device_ptr(call.a), data_type, ldb, stride_a, &beta,
                                        device_ptr(call.d), data_type, ldc, stride_d, batch, compute_type,
                                        kGemmDefault);
        if (s != kSuccess) return failure(api, "cublasGemmStridedBatchedEx", s, call);
      }
    } else if (plain_f32) {
      s = api.sgemm(state.handle, transa, transb, m, n, k, &alpha, static_cast<const float*>(device_ptr(call.b)), lda,
                    static_cast<const float*>(device_ptr(call.a)), ldb, &beta, static_cast<float*>(device_ptr(call.d)),
                    ldc);
      if (s != kSuccess) return failure(api, "cublasSgemm", s, call);
    } else {
      s = api.gemm_ex(state.handle, transa, transb, m, n, k, &alpha, device_ptr(call.b), data_type, lda,
                      device_ptr(call.a), data_type, ldb, &beta, device_ptr(call.d), data_type, ldc, compute_type,
                      kGemmDefault);
      if (s != kSuccess) return failure(api, "cublasGemmEx", s, call);
    }
    return "";
  } catch (const std::exception& e) {
    return std::string("gemm: ") + e.what();
  } catch (...) {
    return "gemm: unknown exception";
  }
}

}  // namespace kernelevolve::cuda
