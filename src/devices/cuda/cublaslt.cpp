// cuBLASLt's matrix product, loaded at run time; see vendor_libraries.hpp. Also the library search that
// cudnn.cpp shares (vendor_detail::open_library).
//
// The types, enum values, structure layouts and signatures below are declared by hand from cuBLAS 13.1.0's
// headers (cublasLt.h, cublas_api.h, library_types.h of the CUDA 13.0 toolkit, the version the GPU machine
// runs), and were checked against them, value by value, with static_asserts in a scratch translation unit
// (layouts by size and offset, signatures parameter by parameter). cuBLAS 12.6.4's headers give the same;
// every value used here has been stable since cuBLAS 11.
//
// The algorithm is the heuristic's first answer, as PyTorch's. $KE_CUBLASLT_TUNE=1 (or =log, which also
// writes each choice to stderr) chooses it by measurement on a plan's first call instead, as cuBLASLt's
// documentation suggests: each of the heuristic's answers (up to 8 that fit the workspace) is timed on the
// caller's stream with the Driver API's events. It is off by default because the pick, timed on hot caches
// during a program's first (verification) call, ran slower in the timed calls than the heuristic's first:
// 5,361 us against 5,288 on KernelBench level-2 problem 56, 2,696 against 2,687 on problem 76 (an H200,
// bench/level2_programs.sh with the cuBLASLt programs).
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <vector>

#include "devices/cuda/vendor_libraries.hpp"

namespace kernelevolve::cuda {
namespace {

// ---- cublas_api.h, cublasLt.h, library_types.h (cuBLAS 13.1.0) ---------------------------------------------

using cublasStatus_t = int;
enum : int {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16,
};

// cublasOperation_t
enum : std::int32_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };

// cublasComputeType_t. CUBLAS_COMPUTE_32F is IEEE fp32 accumulation; only the _FAST_ variants may round fp32
// inputs: CUBLAS_COMPUTE_32F_FAST_TF32 to TF32 (a step's "math": "tf32").
enum : int { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };

// cudaDataType_t (library_types.h)
enum : int { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };

// cublasLtMatmulDescAttributes_t
enum : int {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,        // int32_t (cublasOperation_t)
  CUBLASLT_MATMUL_DESC_TRANSB = 4,        // int32_t
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,      // uint32_t (cublasLtEpilogue_t)
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,  // const void*; its type defaults to D's (BIAS_DATA_TYPE = -1)
};

// cublasLtEpilogue_t
enum : std::uint32_t {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_RELU = 2,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_RELU_BIAS = 6,  // RELU | BIAS
  CUBLASLT_EPILOGUE_GELU = 32,
  CUBLASLT_EPILOGUE_GELU_BIAS = 36,  // GELU | BIAS
};

// cublasLtMatmulPreferenceAttributes_t
enum : int {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,    // uint64_t, default 0
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,  // uint32_t, default 256
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

using cublasLtHandle_t = struct cublasLtContext*;
// Pointers to the header's semi-opaque structures (uint64_t[32], [8] and [8]), which only the library reads.
using cublasLtMatmulDesc_t = struct LtMatmulDescStorage*;
using cublasLtMatrixLayout_t = struct LtMatrixLayoutStorage*;
using cublasLtMatmulPreference_t = struct LtMatmulPreferenceStorage*;

struct cublasLtMatmulAlgo_t {
  std::uint64_t data[8];
};

struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  std::size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96, "layout of cublasLt.h's cublasLtMatmulHeuristicResult_t");

struct LtApi {
  cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t*) = nullptr;
  std::size_t (*cublasLtGetVersion)() = nullptr;
  const char* (*cublasLtGetStatusName)(cublasStatus_t) = nullptr;  // may stay null
  cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t*, int compute_type, int scale_type) = nullptr;
  cublasStatus_t (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t) = nullptr;
  cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t, int attr, const void* buf,
                                                   std::size_t size) = nullptr;
  cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t*, int type, std::uint64_t rows,
                                               std::uint64_t cols, std::int64_t ld) = nullptr;
  cublasStatus_t (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t) = nullptr;
  cublasStatus_t (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t*) = nullptr;
  cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t) = nullptr;
  cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t, int attr, const void* buf,
                                                         std::size_t size) = nullptr;
  cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t A,
                                                   cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C,
                                                   cublasLtMatrixLayout_t D, cublasLtMatmulPreference_t, int requested,
                                                   cublasLtMatmulHeuristicResult_t* results, int* returned) = nullptr;
  cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void* alpha, const void* A,
                                   cublasLtMatrixLayout_t, const void* B, cublasLtMatrixLayout_t, const void* beta,
                                   const void* C, cublasLtMatrixLayout_t, void* D, cublasLtMatrixLayout_t,
                                   const cublasLtMatmulAlgo_t* algo, void* workspace, std::size_t workspace_bytes,
                                   void* stream) = nullptr;
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

// ---- the library, its handle, and the cache of descriptors -----------------------------------------------

struct Lt {
  std::mutex mutex;  // guards everything below, and serializes the calls into the library
  bool loaded = false;
  LibraryLoad load;
  LtApi api;
  cublasLtHandle_t handle = nullptr;
};

Lt& lt() {
  static Lt* state = new Lt;  // never destroyed: the library stays loaded until the process ends
  return *state;
}

LibraryLoad load_locked(Lt& state, const std::vector<std::string>& extra_dirs) {
  if (state.loaded) return state.load;
  vendor_detail::OpenedLibrary opened = vendor_detail::open_library(
      "cuBLASLt", "KE_CUBLASLT", {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"},
      extra_dirs, {});
  if (!opened.handle) return opened.load;
  void* lib = opened.handle;
  LtApi api;
  std::string missing;
  bool ok = true;
  ok &= resolve(lib, api.cublasLtCreate, "cublasLtCreate", missing);
  ok &= resolve(lib, api.cublasLtGetVersion, "cublasLtGetVersion", missing);
  ok &= resolve(lib, api.cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate", missing);
  ok &= resolve(lib, api.cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy", missing);
  ok &= resolve(lib, api.cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute", missing);
  ok &= resolve(lib, api.cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate", missing);
  ok &= resolve(lib, api.cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy", missing);
  ok &= resolve(lib, api.cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate", missing);
  ok &= resolve(lib, api.cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy", missing);
  ok &= resolve(lib, api.cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute", missing);
  ok &= resolve(lib, api.cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic", missing);
  ok &= resolve(lib, api.cublasLtMatmul, "cublasLtMatmul", missing);
  std::string optional;
  resolve(lib, api.cublasLtGetStatusName, "cublasLtGetStatusName", optional);
  LibraryLoad result = opened.load;
  if (!ok) {
    dlclose(lib);
    result.ok = false;
    result.why = "cuBLASLt " + result.path + " lacks " + missing;
    return result;
  }
  // CUBLAS_COMPUTE_32F and the epilogues came with cuBLAS 11; the version is major*10000 + minor*100 + patch.
  const std::size_t version = api.cublasLtGetVersion();
  if (version < 110000) {
    dlclose(lib);
    result.ok = false;
    result.why = "cuBLASLt " + result.path + " is version " + std::to_string(version) + "; 11.0 or later is needed";
    return result;
  }
  state.api = api;
  state.load = result;
  state.loaded = true;
  return result;
}

const char* status_name(const LtApi& api, cublasStatus_t status) {
  if (api.cublasLtGetStatusName) {
    if (const char* name = api.cublasLtGetStatusName(status)) return name;
  }
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

// The largest power of two, up to 256 (the heuristic's default assumption), that divides `address`.
std::uint32_t alignment_of(std::uint64_t address) {
  std::uint32_t alignment = 1;
  while (alignment < 256 && address % (2 * alignment) == 0) alignment *= 2;
  return alignment;
}

bool has_bias(MatmulEpilogue e) {
  return e == MatmulEpilogue::bias || e == MatmulEpilogue::bias_relu || e == MatmulEpilogue::bias_gelu;
}

std::uint32_t lt_epilogue(MatmulEpilogue e) {
  switch (e) {
    case MatmulEpilogue::none: return CUBLASLT_EPILOGUE_DEFAULT;
    case MatmulEpilogue::relu: return CUBLASLT_EPILOGUE_RELU;
    case MatmulEpilogue::gelu: return CUBLASLT_EPILOGUE_GELU;
    case MatmulEpilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case MatmulEpilogue::bias_relu: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case MatmulEpilogue::bias_gelu: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// What decides the descriptors and the heuristic's answer. Alignments are part of it: the heuristic
// picks kernels for the alignment it is promised, so a product on less aligned addresses needs its own.
struct PlanKey {
  std::int64_t m, n, k;
  int data_type;
  bool b_transposed;
  MatmulEpilogue epilogue;
  std::uint32_t align_a, align_b, align_d, align_bias;
  std::size_t workspace_bytes;
  bool tf32;  // the compute type: CUBLAS_COMPUTE_32F_FAST_TF32, else CUBLAS_COMPUTE_32F
  auto tie() const {
    return std::tie(m, n, k, data_type, b_transposed, epilogue, align_a, align_b, align_d, align_bias, workspace_bytes,
                    tf32);
  }
  bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
};

// The descriptors of one product, in cuBLASLt's column-major terms (see matmul), and the algorithm.
struct Plan {
  const LtApi* api = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr;   // cuBLASLt's A: our B
  cublasLtMatrixLayout_t second = nullptr;  // cuBLASLt's B: our A
  cublasLtMatrixLayout_t out = nullptr;     // C and D: our D
  cublasLtMatmulAlgo_t algo{};
  // The heuristic's answers that fit the workspace, best guess first; timed on the plan's first call.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  bool tuned = false;  // candidates were timed (or tuning was off or failed): algo is final
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (!api) return;
    if (out) api->cublasLtMatrixLayoutDestroy(out);
    if (second) api->cublasLtMatrixLayoutDestroy(second);
    if (first) api->cublasLtMatrixLayoutDestroy(first);
    if (desc) api->cublasLtMatmulDescDestroy(desc);
  }
};

std::map<PlanKey, std::unique_ptr<Plan>>& plans() {
  static auto* cache = new std::map<PlanKey, std::unique_ptr<Plan>>;
  return *cache;
}

constexpr std::size_t kMaxPlans = 512;  // a search meets a handful of shapes; this bounds a pathological one

std::string describe(const MatmulCall& call) {
  return "matmul " + call.dtype + " M=" + std::to_string(call.m) + " N=" + std::to_string(call.n) +
         " K=" + std::to_string(call.k) + (call.b_transposed ? " B^T " : " ") + to_string(call.epilogue) +
         (call.tf32 ? " tf32" : "");
}

std::string failure(const LtApi& api, const char* function, cublasStatus_t status, const MatmulCall& call) {
  return std::string(function) + ": " + status_name(api, status) + " (" + std::to_string(status) + "); " +
         describe(call);
}

// Builds the plan for `key`; "" or the failure.
std::string make_plan(Lt& state, const MatmulCall& call, const PlanKey& key, Plan& plan) {
  const LtApi& api = state.api;
  plan.api = &api;
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  // The operands are fp32-scaled (alpha, beta are floats) and fp32-accumulated for every dtype; f32 operands are
  // rounded to TF32 only where the step asked (matmul() refuses tf32 for other dtypes).
  const int compute_type = key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if ((s = api.cublasLtMatmulDescCreate(&plan.desc, compute_type, CUDA_R_32F)) != CUBLAS_STATUS_SUCCESS)
    return failure(api, "cublasLtMatmulDescCreate", s, call);
  const std::int32_t trans_first = call.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const std::int32_t trans_second = CUBLAS_OP_N;
  const std::uint32_t epilogue = lt_epilogue(call.epilogue);
  const void* bias = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(call.bias));
  if ((s = api.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_first,
                                              sizeof trans_first)) != CUBLAS_STATUS_SUCCESS ||
      (s = api.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_second,
                                              sizeof trans_second)) != CUBLAS_STATUS_SUCCESS ||
      (s = api.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue)) !=
          CUBLAS_STATUS_SUCCESS)
    return failure(api, "cublasLtMatmulDescSetAttribute", s, call);
  // The heuristic reads the bias pointer's alignment from the descriptor; matmul sets it again per call.
  if (has_bias(call.epilogue) && (s = api.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                                         &bias, sizeof bias)) != CUBLAS_STATUS_SUCCESS)
    return failure(api, "cublasLtMatmulDescSetAttribute", s, call);

  // Layouts describe each matrix as stored (before its op), column-major, rows × cols with leading dimension ld.
  const auto m = static_cast<std::uint64_t>(call.m), n = static_cast<std::uint64_t>(call.n),
             k = static_cast<std::uint64_t>(call.k);
  // Our B: row-major [K,N] is column-major N×K (ld N), used as is; row-major [N,K] is column-major K×N
  // (ld K), used transposed.
  if (call.b_transposed) s = api.cublasLtMatrixLayoutCreate(&plan.first, key.data_type, k, n, call.k);
  else s = api.cublasLtMatrixLayoutCreate(&plan.first, key.data_type, n, k, call.n);
  if (s != CUBLAS_STATUS_SUCCESS) return failure(api, "cublasLtMatrixLayoutCreate", s, call);
  // Our A: row-major [M,K] is column-major K×M (ld K).
  if ((s = api.cublasLtMatrixLayoutCreate(&plan.second, key.data_type, k, m, call.k)) != CUBLAS_STATUS_SUCCESS)
    return failure(api, "cublasLtMatrixLayoutCreate", s, call);
  // Our D: row-major [M,N] is column-major N×M (ld N).
  if ((s = api.cublasLtMatrixLayoutCreate(&plan.out, key.data_type, n, m, call.n)) != CUBLAS_STATUS_SUCCESS)
    return failure(api, "cublasLtMatrixLayoutCreate", s, call);

  cublasLtMatmulPreference_t preference = nullptr;
  if ((s = api.cublasLtMatmulPreferenceCreate(&preference)) != CUBLAS_STATUS_SUCCESS)
    return failure(api, "cublasLtMatmulPreferenceCreate", s, call);
  const std::uint64_t max_workspace = key.workspace_bytes;
  // cuBLASLt's A is our B and its B our A; C and D are both our D.
  const std::uint32_t align_first = key.align_b, align_second = key.align_a, align_out = key.align_d;
  if ((s = api.cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &max_workspace, sizeof max_workspace)) == CUBLAS_STATUS_SUCCESS &&
      (s = api.cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                    &align_first, sizeof align_first)) == CUBLAS_STATUS_SUCCESS &&
      (s = api.cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                    &align_second, sizeof align_second)) == CUBLAS_STATUS_SUCCESS &&
      (s = api.cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_out,
                                                    sizeof align_out)) == CUBLAS_STATUS_SUCCESS)
    s = api.cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_out,
                                                 sizeof align_out);
  if (s != CUBLAS_STATUS_SUCCESS) {
    api.cublasLtMatmulPreferenceDestroy(preference);
    return failure(api, "cublasLtMatmulPreferenceSetAttribute", s, call);
  }
  constexpr int kRequested = 8;
  cublasLtMatmulHeuristicResult_t results[kRequested] = {};
  int returned = 0;
  s = api.cublasLtMatmulAlgoGetHeuristic(state.handle, plan.desc, plan.first, plan.second, plan.out, plan.out,
                                         preference, kRequested, results, &returned);
  api.cublasLtMatmulPreferenceDestroy(preference);
  if (s != CUBLAS_STATUS_SUCCESS) return failure(api, "cublasLtMatmulAlgoGetHeuristic", s, call);
  // Results come in the heuristic's order, its guess at the fastest first; the preference already bounds
  // their workspace, checked again here.
  for (int i = 0; i < returned && i < kRequested; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= key.workspace_bytes)
      plan.candidates.push_back(results[i].algo);
  if (!plan.candidates.empty()) {
    plan.algo = plan.candidates.front();
    return "";
  }
  return failure(api, "cublasLtMatmulAlgoGetHeuristic", CUBLAS_STATUS_NOT_SUPPORTED, call) + " (no algorithm fits " +
         std::to_string(key.workspace_bytes) + " bytes of workspace)";
}

// ---- choosing the algorithm by measurement ---------------------------------------------------------------

// The Driver API's events (cuda.h's signatures, with CUevent and CUstream as void*; CUresult 0 is success),
// resolved from the libcuda that the caller's context already loaded: RTLD_NOLOAD never loads a driver
// of its own. All null when no driver is loaded; then nothing is timed.
struct EventApi {
  int (*create)(void** event, unsigned flags) = nullptr;
  int (*destroy)(void* event) = nullptr;
  int (*record)(void* event, void* stream) = nullptr;
  int (*synchronize)(void* event) = nullptr;
  int (*elapsed_ms)(float* ms, void* start, void* end) = nullptr;
  bool ok() const { return create && destroy && record && synchronize && elapsed_ms; }
};

const EventApi& event_api() {
  static const EventApi api = [] {
    EventApi out;
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!driver) driver = dlopen("libcuda.so", RTLD_NOW | RTLD_NOLOAD);
    if (!driver) return out;
    // Never closed: the reference it holds is released with the process. The _v2 names are those that
    // cuda.h's macros select for cuEventDestroy and (since CUDA 12.8) cuEventElapsedTime.
    auto find = [driver](auto& fn, std::initializer_list<const char*> names) {
      for (const char* name : names)
        if (void* p = dlsym(driver, name)) {
          fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
          return;
        }
    };
    find(out.create, {"cuEventCreate"});
    find(out.destroy, {"cuEventDestroy_v2", "cuEventDestroy"});
    find(out.record, {"cuEventRecord"});
    find(out.synchronize, {"cuEventSynchronize"});
    find(out.elapsed_ms, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
    return out;
  }();
  return api;
}

// Times each of plan.candidates on `stream` and keeps the fastest in plan.algo; `run(algo)` enqueues the
// caller's product with an algorithm. Each candidate runs once to warm up, then kTimedRuns times between
// events; its time is the least of those (the one least disturbed by other work on the GPU). The
// heuristic's first answer (the one PyTorch takes) is timed again after the others, its time the lesser of
// the two, and another replaces it only when faster by more than kMargin: candidates timed one after
// another see the clocks drift, and on KernelBench level-2 problem 56 (an H200) a pick by a bare minimum ran
// 0.7% slower than the heuristic's first. A candidate that cublasLtMatmul refuses is skipped; if the events
// fail, the heuristic's first answer stays. Runs once per plan, whatever happens.
//
// Every run writes the caller's D; the call that enqueues the chosen algorithm after this one is the
// last to write it, on the same stream, so D ends as if only that call had run. This synchronizes the
// stream (and holds cuBLASLt's mutex meanwhile): acceptable because it happens at most once per plan key,
// on a program's first call for that key, which is its untimed verification launch; the timed launches
// come after it and never tune.
template <class Run>
void choose_algorithm(Plan& plan, void* stream, const MatmulCall& call, const Run& run) {
  plan.tuned = true;
  if (plan.candidates.size() < 2) return;
  const char* setting = std::getenv("KE_CUBLASLT_TUNE");
  const bool log = setting && std::strcmp(setting, "log") == 0;
  if (!log && !(setting && std::strcmp(setting, "1") == 0)) return;
  const EventApi& events = event_api();
  if (!events.ok()) return;

  constexpr int kTimedRuns = 3;
  constexpr float kMargin = 0.02f;
  void* marks[kTimedRuns + 1] = {};
  int created = 0;
  while (created <= kTimedRuns && events.create(&marks[created], 0 /* CU_EVENT_DEFAULT: timed */) == 0) ++created;
  bool events_failed = created <= kTimedRuns;
  std::size_t best = 0;
  float best_ms = INFINITY, first_ms = NAN;
  // The candidates in order, then the heuristic's first again.
  const std::size_t rounds = plan.candidates.size() + 1;
  for (std::size_t round = 0; round < rounds && !events_failed; ++round) {
    const std::size_t i = round % plan.candidates.size();
    const cublasLtMatmulAlgo_t& algo = plan.candidates[i];
    if (run(algo) != CUBLAS_STATUS_SUCCESS) continue;  // the warm-up run; a refused algorithm is skipped
    if (events.record(marks[0], stream) != 0) {
      events_failed = true;
      break;
    }
    bool refused = false;
    for (int r = 0; r < kTimedRuns && !refused && !events_failed; ++r) {
      refused = run(algo) != CUBLAS_STATUS_SUCCESS;
      if (!refused) events_failed = events.record(marks[r + 1], stream) != 0;
    }
    if (refused) continue;
    if (events_failed || events.synchronize(marks[kTimedRuns]) != 0) {
      events_failed = true;
      break;
    }
    float fastest = INFINITY;
    for (int r = 0; r < kTimedRuns; ++r) {
      float ms = 0;
      if (events.elapsed_ms(&ms, marks[r], marks[r + 1]) != 0) events_failed = true;
      fastest = std::min(fastest, ms);
    }
    if (events_failed) break;
    if (i == 0) {
      first_ms = std::isnan(first_ms) ? fastest : std::min(first_ms, fastest);
    } else if (fastest < best_ms) {
      best_ms = fastest, best = i;  // strict: a tie keeps the heuristic's order
    }
  }
  for (int e = 0; e < created; ++e) events.destroy(marks[e]);
  // (A first answer that cublasLtMatmul refused has no time: then the fastest of the others stands.)
  if (events_failed || !std::isfinite(best_ms) || (!std::isnan(first_ms) && !(best_ms < first_ms * (1 - kMargin)))) {
    best = 0;
    best_ms = first_ms;
  }
  plan.algo = plan.candidates[best];
  if (log) {
    std::fprintf(stderr,
                 "cuBLASLt: %s: algorithm %zu of the heuristic's %zu (0 = its first): %.1f us; its first %.1f us%s\n",
                 describe(call).c_str(), best, plan.candidates.size(), static_cast<double>(best_ms) * 1e3,
                 static_cast<double>(first_ms) * 1e3, events_failed ? " (the events failed: its first is kept)" : "");
  }
}

}  // namespace

// ---- the search both loaders share -------------------------------------------------------------------------

namespace vendor_detail {

std::string loaded_path(void* handle) {
  struct link_map* map = nullptr;
  if (handle && dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) return map->l_name;
  return "";
}

OpenedLibrary open_library(const char* what, const char* env_var, const std::vector<const char*>& sonames,
                           const std::vector<std::string>& dirs, const std::vector<const char*>& companions) {
  OpenedLibrary out;
  auto dl_error = [] {
    const char* e = dlerror();
    return std::string(e ? e : "unknown error");
  };
  auto open_companions = [&](const std::filesystem::path& dir) {
    for (const char* name : companions) {
      const std::filesystem::path file = dir / name;
      std::error_code ec;
      // Best effort: a companion that is absent or does not load is cuDNN's to report when it needs it.
      if (std::filesystem::exists(file, ec)) dlopen(file.c_str(), RTLD_LAZY | RTLD_LOCAL);
    }
  };
  auto opened = [&](void* handle, const std::string& fallback_path) {
    out.handle = handle;
    out.load.ok = true;
    out.load.path = loaded_path(handle);
    if (out.load.path.empty()) out.load.path = fallback_path;
    return out;
  };

  if (const char* env = std::getenv(env_var); env && *env) {
    // An explicit choice: a library that does not load is reported, not replaced by another.
    open_companions(std::filesystem::path(env).parent_path());
    if (void* lib = dlopen(env, RTLD_NOW | RTLD_LOCAL)) return opened(lib, env);
    out.load.why = std::string("cannot load ") + what + " from $" + env_var + "=" + env + ": " + dl_error();
    return out;
  }
  std::string errors;
  for (const char* name : sonames) {
    if (void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return opened(lib, name);
    errors += std::string("; ") + dl_error();  // dlerror names the file
  }
  for (const std::string& dir : dirs) {
    if (dir.empty()) continue;
    for (const char* name : sonames) {
      const std::filesystem::path file = std::filesystem::path(dir) / name;
      std::error_code ec;
      if (!std::filesystem::exists(file, ec)) continue;
      open_companions(dir);
      if (void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) return opened(lib, file.string());
      errors += "; " + dl_error();
    }
  }
  std::string names;
  for (const char* name : sonames) names += std::string(names.empty() ? "" : ", ") + name;
  std::string where = "the loader's path";
  for (const std::string& dir : dirs)
    if (!dir.empty()) where += ", " + dir;
  // One line, so that a step's failure that quotes it stays one line.
  out.load.why = std::string("cannot load ") + what + " (searched " + where + " for " + names + "; set $" + env_var +
                 " to its full path)" + errors;
  return out;
}

}  // namespace vendor_detail

// ---- the interface -------------------------------------------------------------------------------------------

LibraryLoad load_cublaslt(const std::vector<std::string>& extra_dirs) {
  Lt& state = lt();
  std::lock_guard<std::mutex> lock(state.mutex);
  return load_locked(state, extra_dirs);
}

std::optional<MatmulEpilogue> parse_epilogue(const std::string& text) {
  for (MatmulEpilogue e : {MatmulEpilogue::none, MatmulEpilogue::relu, MatmulEpilogue::gelu, MatmulEpilogue::bias,
                           MatmulEpilogue::bias_relu, MatmulEpilogue::bias_gelu})
    if (text == to_string(e)) return e;
  return std::nullopt;
}

const char* to_string(MatmulEpilogue epilogue) {
  switch (epilogue) {
    case MatmulEpilogue::none: return "none";
    case MatmulEpilogue::relu: return "relu";
    case MatmulEpilogue::gelu: return "gelu";
    case MatmulEpilogue::bias: return "bias";
    case MatmulEpilogue::bias_relu: return "bias_relu";
    case MatmulEpilogue::bias_gelu: return "bias_gelu";
  }
  return "none";
}

std::size_t matmul_workspace_bytes() { return std::size_t{32} << 20; }

// Row-major through a column-major library. A row-major matrix X[r,c] has the bytes of the column-major
// matrix Xᵀ (c×r, leading dimension c). So the row-major D = A·op(B) is, in column-major terms,
//     Dᵀ (N×M) = op(B)ᵀ (N×K) · Aᵀ (K×M),
// which cuBLASLt computes with its A := our B, its B := our A, m := N, n := M, k := K and no copy: our B
// stored [K,N] is already the column-major N×K matrix op(B)ᵀ (op N); stored [N,K] (b_transposed) it is the
// column-major K×N matrix op(B), taken transposed (op T). The swap also puts the bias where cuBLASLt's
// epilogue adds it: one value per row of its D, that is per row of Dᵀ, per column n of our D: bias[N].
std::string matmul(void* stream, const MatmulCall& call) {
  try {
    int data_type = 0;
    if (call.dtype == "f32") data_type = CUDA_R_32F;
    else if (call.dtype == "f16") data_type = CUDA_R_16F;
    else if (call.dtype == "bf16") data_type = CUDA_R_16BF;
    else return "matmul: dtype '" + call.dtype + "' is not f32, f16 or bf16";
    if (call.m < 1 || call.n < 1 || call.k < 1) return "matmul: sizes must be at least 1; " + describe(call);
    if (call.a_transposed || call.batch != 1)
      return "matmul: a transposed A and a batch are cuBLAS's GEMM's (gemm), not cuBLASLt's here; " + describe(call);
    if (call.tf32 && data_type != CUDA_R_32F)
      return "matmul: TF32 math is for f32 operands (f16 and bf16 run on tensor cores already); " + describe(call);
    if (!call.a || !call.b || !call.d) return "matmul: a null operand address; " + describe(call);
    if (has_bias(call.epilogue) && !call.bias) return "matmul: the epilogue needs a bias address; " + describe(call);
    if (call.workspace_bytes && !call.workspace)
      return "matmul: workspace_bytes without a workspace address; " + describe(call);

    Lt& state = lt();
    std::lock_guard<std::mutex> lock(state.mutex);
    if (!state.loaded) {
      LibraryLoad load = load_locked(state, {});
      if (!load.ok) return "matmul: cuBLASLt is not loaded: " + load.why;
    }
    const LtApi& api = state.api;
    if (!state.handle) {
      const cublasStatus_t s = api.cublasLtCreate(&state.handle);
      if (s != CUBLAS_STATUS_SUCCESS) {
        state.handle = nullptr;
        return failure(api, "cublasLtCreate", s, call);
      }
    }

    const PlanKey key{call.m,
                      call.n,
                      call.k,
                      data_type,
                      call.b_transposed,
                      call.epilogue,
                      alignment_of(call.a),
                      alignment_of(call.b),
                      alignment_of(call.d),
                      has_bias(call.epilogue) ? alignment_of(call.bias) : 0u,
                      call.workspace_bytes,
                      call.tf32};
    auto& cache = plans();
    auto it = cache.find(key);
    if (it == cache.end()) {
      auto plan = std::make_unique<Plan>();
      if (std::string error = make_plan(state, call, key, *plan); !error.empty()) return error;
      if (cache.size() >= kMaxPlans) cache.clear();
      it = cache.emplace(key, std::move(plan)).first;
    }
    Plan& plan = *it->second;
    if (has_bias(call.epilogue)) {
      const void* bias = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(call.bias));
      const cublasStatus_t s =
          api.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
      if (s != CUBLAS_STATUS_SUCCESS) return failure(api, "cublasLtMatmulDescSetAttribute", s, call);
    }
    const float alpha = 1.0f, beta = 0.0f;  // beta 0: C is not read, so D may hold anything (NaN) before
    auto run = [&](const cublasLtMatmulAlgo_t& algo) {
      return api.cublasLtMatmul(state.handle, plan.desc, &alpha, device_ptr(call.b), plan.first, device_ptr(call.a),
                                plan.second, &beta, device_ptr(call.d), plan.out, device_ptr(call.d), plan.out, &algo,
                                call.workspace_bytes ? device_ptr(call.workspace) : nullptr, call.workspace_bytes,
                                stream);
    };
    if (!plan.tuned) choose_algorithm(plan, stream, call, run);
    const cublasStatus_t s = run(plan.algo);  // after any tuning: the chosen algorithm leaves D
    if (s != CUBLAS_STATUS_SUCCESS) return failure(api, "cublasLtMatmul", s, call);
    return "";
  } catch (const std::exception& e) {
    return std::string("matmul: ") + e.what();
  } catch (...) {
    return "matmul: unknown exception";
  }
}

}  // namespace kernelevolve::cuda
#endif  // KE_VENDOR_ABI_ONLY
