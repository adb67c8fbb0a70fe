// Programs on a CUDA GPU (program.hpp): CUDA and Triton plans of several kernels with temporaries, a
// temporary left unwritten (poisoned, so caught), one element written outside an output or a temporary (caught in
// its red zone), a hostile second kernel in the worker (crashed, the host alive), cuBLASLt, cuBLAS and cuDNN steps
// against a CPU reference (products, one batched or with A transposed; 2-d, 3-d and transposed convolutions, a 3-d
// average pooling; TF32 math where the run's precision allows it), and a problem that forbids library steps.
// Skipped (and says why) without a CUDA device, or without Triton or the libraries for their parts.
#include <doctest/doctest.h>

#include <kernelevolve/device.hpp>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>
#include <kernelevolve/program.hpp>

#include <string>
#include <utility>
#include <vector>

#include "support/centre_program.hpp"
#include "support/gpu_under_test.hpp"
#include "triton/triton_compiler.hpp"

namespace ke = kernelevolve;

namespace {

const ke::testing::GpuUnderTest kGpu = ke::testing::open_gpu("cuda:0");
const bool kNoGpu = !kGpu.device;

bool triton_here() {
  static const bool here = [] {
    try {
      ke::triton::Compiler::shared();
      return true;
    } catch (const ke::Error&) {
      return false;
    }
  }();
  return here;
}

// Three kernels, two temporaries: per-block sums, their mean, the subtraction. A test can make the first kernel
// skip the last blocks (`last_block`: their partial sums then stay poisoned) or store its sums elsewhere
// (`partial_at`), or the third write out of bounds (`store_at`).
std::string cuda_centre(const std::string& last_block = "gridDim.x", const std::string& store_at = "i",
                        const std::string& partial_at = "blockIdx.x") {
  return R"P(/* kernelevolve-plan
{"temporaries": [{"name": "partial", "dtype": "f32", "shape": ["cdiv(n, 256)"]},
                 {"name": "mean", "dtype": "f32", "shape": [1]}],
 "steps": [{"kernel": "block_sums", "grid": ["cdiv(n, 256)"], "block": [256], "args": ["x", "partial", "n"]},
           {"kernel": "finish_mean", "grid": [1], "block": [1024], "args": ["partial", "mean", "cdiv(n, 256)", "n"]},
           {"kernel": "subtract", "grid": ["cdiv(n, THREADS)"], "block": ["THREADS"], "args": ["x", "mean", "y", "n"]}]}
*/
extern "C" __global__ void block_sums(const float* x, float* partial, long long n) {
  __shared__ float s[256];
  if (blockIdx.x >= )P" +
         last_block + R"P() return;
  long long i = (long long)blockIdx.x * 256 + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[)P" +
         partial_at + R"P(] = s[0];
}
extern "C" __global__ void finish_mean(const float* partial, float* mean, long long blocks, long long n) {
  __shared__ double s[1024];
  double acc = 0;
  for (long long b = threadIdx.x; b < blocks; b += 1024) acc += partial[b];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int k = 512; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) mean[0] = (float)(s[0] / n);
}
extern "C" __global__ void subtract(const float* x, const float* mean, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[)P" +
         store_at + R"P(] = x[i] - mean[0];
}
)P";
}

ke::Spec centre_spec(ke::Language language, const std::string& seed) {
  ke::Spec s;
  s.name = "centre_gpu";
  s.language = language;
  s.entry = "centre";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = {{{"n", 1 << 20}}, {{"n", 1001}}};
  s.tolerance = {1e-3, 1e-3};
  s.reference.source = ke_test::kCentreReference;
  s.reference.language = ke::Language::c;
  s.reference.device = "cpu";
  s.seed.source = seed;
  ke::LaunchRule rule;
  rule.grid[0] = ke::Expr::parse(language == ke::Language::triton ? "cdiv(n, BLOCK)" : "cdiv(n, THREADS)");
  if (language != ke::Language::triton) rule.block[0] = ke::Expr::parse("THREADS");
  s.launch = rule;
  if (language == ke::Language::triton) {
    s.tunables = {{"BLOCK", {1024, 2048}}, {"PB", {1024}}, {"num_warps", {4, 8}}};
  } else {
    s.tunables = {{"THREADS", {256, 512}}};
  }
  s.cost_bytes = ke::Expr::parse("8 * n");
  s.validate();
  return s;
}

const char* kTritonCentre = R"P("""kernelevolve-plan
{"temporaries": [{"name": "partial", "dtype": "f32", "shape": ["cdiv(n, BLOCK)"]}],
 "steps": [{"kernel": "block_sums", "grid": ["cdiv(n, BLOCK)"], "args": ["x", "partial", "n"]},
           {"kernel": "subtract", "grid": ["cdiv(n, BLOCK)"], "args": ["x", "partial", "y", "n", "cdiv(n, BLOCK)"]}]}
"""
import triton
import triton.language as tl


@triton.jit
def block_sums(x, partial, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0.0)
    tl.store(partial + pid, tl.sum(v, axis=0))


@triton.jit
def subtract(x, partial, y, n, blocks, BLOCK: tl.constexpr, PB: tl.constexpr):
    acc = tl.zeros([PB], dtype=tl.float32)
    for start in range(0, blocks, PB):
        o = start + tl.arange(0, PB)
        acc += tl.load(partial + o, mask=o < blocks, other=0.0)
    mean = tl.sum(acc, axis=0) / n
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0.0)
    tl.store(y + offs, v - mean, mask=offs < n)
)P";

ke::EvalOptions quick() {
  ke::EvalOptions o;
  o.trials = 3;
  o.max_reps = 20;
  o.target_ms = 2;
  return o;
}

// A CUDA spec of `params` whose reference is the C function `name` on the CPU; its launch rule is one thread, for
// plans that launch library steps or give each kernel its own grid.
ke::Spec library_spec(const std::string& name, std::vector<ke::Param> params, std::vector<ke::Bindings> workloads,
                      const char* reference, const std::string& seed) {
  ke::Spec s;
  s.name = name;
  s.language = ke::Language::cuda;
  s.entry = name;
  s.params = std::move(params);
  s.workloads = std::move(workloads);
  s.tolerance = {1e-3, 1e-3};
  s.reference.source = reference;
  s.reference.language = ke::Language::c;
  s.reference.device = "cpu";
  s.seed.source = seed;
  ke::LaunchRule rule;
  rule.grid[0] = ke::Expr::parse("1");
  rule.block[0] = ke::Expr::parse("1");
  s.launch = rule;
  s.validate();
  return s;
}

// y[M, N] = relu(x[M, K] · w[N, K]^T + b[N]), as a Linear then a ReLU; the reference on the CPU.
const char* kLinearReference = R"(
#include <stdint.h>
void linear_relu(const float* x, const float* w, const float* b, float* y, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = b[j];
      for (int64_t k = 0; k < K; ++k) s += (double)x[i * K + k] * w[j * K + k];
      y[i * N + j] = s > 0 ? (float)s : 0.0f;
    }
}
)";

ke::Spec linear_spec(const std::string& seed) {
  ke::Spec s =
      library_spec("linear_relu",
                   {{"x", ke::DType::f32, ke::Role::in, {"M", "K"}, 0},
                    {"w", ke::DType::f32, ke::Role::in, {"N", "K"}, 0},
                    {"b", ke::DType::f32, ke::Role::in, {"N"}, 0},
                    {"y", ke::DType::f32, ke::Role::out, {"M", "N"}, 0},
                    {"M", ke::DType::i64, ke::Role::size, {}, 0},
                    {"N", ke::DType::i64, ke::Role::size, {}, 0},
                    {"K", ke::DType::i64, ke::Role::size, {}, 0}},
                   {{{"M", 256}, {"N", 384}, {"K", 512}}, {{"M", 33}, {"N", 70}, {"K", 17}}}, kLinearReference, seed);
  s.name = "linear_relu_gpu";
  s.cost_flops = ke::Expr::parse("2 * M * N * K");
  s.validate();
  return s;
}

const char* kLinearOneStep = R"P(/* kernelevolve-plan
{"steps": [{"library": "cublaslt.matmul", "args": ["x", "w", "y", "M", "N", "K", "b"],
            "options": {"epilogue": "bias_relu", "b_transposed": "true"}}]}
*/
)P";

// The product by cuBLASLt into a temporary, then a fused kernel for the bias and the ReLU.
const char* kLinearTwoSteps = R"P(/* kernelevolve-plan
{"temporaries": [{"name": "t", "dtype": "f32", "shape": ["M", "N"]}],
 "steps": [{"library": "cublaslt.matmul", "args": ["x", "w", "t", "M", "N", "K"], "options": {"b_transposed": "true"}},
           {"kernel": "bias_relu", "grid": ["cdiv(M * N, 256)"], "block": [256], "args": ["t", "b", "y", "M", "N"]}]}
*/
extern "C" __global__ void bias_relu(const float* t, const float* b, float* y, long long M, long long N) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < M * N) y[i] = fmaxf(t[i] + b[i % N], 0.0f);
}
)P";

// The same with cuBLAS's GEMM (the call torch.mm makes) as the product.
std::string linear_gemm() {
  std::string source = kLinearTwoSteps;
  const std::string lt = "\"library\": \"cublaslt.matmul\"";
  return source.replace(source.find(lt), lt.size(), "\"library\": \"cublas.gemm\"");
}

// y = conv2d(x, w, padding 1) + b, NCHW, a 3x3 filter; the reference on the CPU.
const char* kConvReference = R"(
#include <stdint.h>
void conv(const float* x, const float* w, const float* b, float* y, int64_t N, int64_t C, int64_t H, int64_t W,
          int64_t K) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t p = 0; p < H; ++p)
        for (int64_t q = 0; q < W; ++q) {
          double s = b[k];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t r = 0; r < 3; ++r)
              for (int64_t t = 0; t < 3; ++t) {
                const int64_t h = p + r - 1, v = q + t - 1;
                if (h >= 0 && h < H && v >= 0 && v < W)
                  s += (double)x[((n * C + c) * H + h) * W + v] * w[((k * C + c) * 3 + r) * 3 + t];
              }
          y[((n * K + k) * H + p) * W + q] = (float)s;
        }
}
)";

ke::Spec conv_spec(const std::string& seed) {
  ke::Spec s = library_spec("conv",
                            {{"x", ke::DType::f32, ke::Role::in, {"N", "C", "H", "W"}, 0},
                             {"w", ke::DType::f32, ke::Role::in, {"K", "C", "3", "3"}, 0},
                             {"b", ke::DType::f32, ke::Role::in, {"K"}, 0},
                             {"y", ke::DType::f32, ke::Role::out, {"N", "K", "H", "W"}, 0},
                             {"N", ke::DType::i64, ke::Role::size, {}, 0},
                             {"C", ke::DType::i64, ke::Role::size, {}, 0},
                             {"H", ke::DType::i64, ke::Role::size, {}, 0},
                             {"W", ke::DType::i64, ke::Role::size, {}, 0},
                             {"K", ke::DType::i64, ke::Role::size, {}, 0}},
                            {{{"N", 2}, {"C", 8}, {"H", 20}, {"W", 17}, {"K", 16}}}, kConvReference, seed);
  s.name = "conv_gpu";
  s.validate();
  return s;
}

const char* kConvStep = R"P(/* kernelevolve-plan
{"steps": [{"library": "cudnn.conv2d", "args": ["x", "w", "y", "N", "C", "H", "W", "K", "3", "3", "b"],
            "options": {"padding": "1"}}]}
*/
)P";

// y[b] = a[b] · w[b]^T for each of B products, as torch.bmm(a, w.transpose(1, 2)) (DLRM's interaction).
const char* kBmmReference = R"(
#include <stdint.h>
void bmm(const float* a, const float* w, float* y, int64_t B, int64_t M, int64_t N, int64_t K) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += (double)a[(b * M + i) * K + k] * w[(b * N + j) * K + k];
        y[(b * M + i) * N + j] = (float)s;
      }
}
)";

const char* kBmmStep = R"P(/* kernelevolve-plan
{"steps": [{"library": "cublas.gemm_batched", "args": ["a", "w", "y", "B", "M", "N", "K"],
            "options": {"b_transposed": "true"}}]}
*/
)P";

// y = a^T · w, a stored [K, M]: torch.mm(a.T, w).
const char* kMmLeftTransposedReference = R"(
#include <stdint.h>
void mm_at(const float* a, const float* w, float* y, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += (double)a[k * M + i] * w[k * N + j];
      y[i * N + j] = (float)s;
    }
}
)";

const char* kMmLeftTransposedStep = R"P(/* kernelevolve-plan
{"steps": [{"library": "cublas.gemm", "args": ["a", "w", "y", "M", "N", "K"], "options": {"a_transposed": "true"}}]}
*/
)P";

// y = conv_transpose2d(x, w, b, stride 2, padding 1, output_padding 1, groups 2): x[N, C, H, W], w[C, K/2, 3, 3],
// y[N, K, 2H, 2W]; each output gathers the inputs that reach it.
const char* kConvTransposeReference = R"(
#include <stdint.h>
void conv_t(const float* x, const float* w, const float* b, float* y, int64_t N, int64_t C, int64_t H, int64_t W,
            int64_t K) {
  const int64_t P = 2 * H, Q = 2 * W, cg = C / 2, kg = K / 2;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          double s = b[k];
          const int64_t g = k / kg, kl = k % kg;
          for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
            for (int64_t r = 0; r < 3; ++r)
              for (int64_t t = 0; t < 3; ++t) {
                // y[p] gathers x[h] where p = 2h - 1 + r.
                const int64_t ph = p + 1 - r, qw = q + 1 - t;
                if (ph < 0 || qw < 0 || ph % 2 || qw % 2) continue;
                const int64_t h = ph / 2, v = qw / 2;
                if (h >= H || v >= W) continue;
                s += (double)x[((n * C + c) * H + h) * W + v] * w[((c * kg + kl) * 3 + r) * 3 + t];
              }
          y[((n * K + k) * P + p) * Q + q] = (float)s;
        }
}
)";

const char* kConvTransposeStep = R"P(/* kernelevolve-plan
{"steps": [{"library": "cudnn.conv_transpose2d", "args": ["x", "w", "y", "N", "C", "H", "W", "K", "3", "3", "b"],
            "options": {"stride": "2", "padding": "1", "output_padding": "1", "groups": "2"}}]}
*/
)P";

// y = conv3d(x, w, padding 1) + b: x[N, C, D, H, W], w[K, C, 3, 3, 3].
const char* kConv3dReference = R"(
#include <stdint.h>
void conv3(const float* x, const float* w, const float* b, float* y, int64_t N, int64_t C, int64_t D, int64_t H,
           int64_t W, int64_t K) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t o = 0; o < D; ++o)
        for (int64_t p = 0; p < H; ++p)
          for (int64_t q = 0; q < W; ++q) {
            double s = b[k];
            for (int64_t c = 0; c < C; ++c)
              for (int64_t e = 0; e < 3; ++e)
                for (int64_t r = 0; r < 3; ++r)
                  for (int64_t t = 0; t < 3; ++t) {
                    const int64_t d = o + e - 1, h = p + r - 1, v = q + t - 1;
                    if (d >= 0 && d < D && h >= 0 && h < H && v >= 0 && v < W)
                      s += (double)x[(((n * C + c) * D + d) * H + h) * W + v] *
                           w[(((k * C + c) * 3 + e) * 3 + r) * 3 + t];
                  }
            y[(((n * K + k) * D + o) * H + p) * W + q] = (float)s;
          }
}
)";

const char* kConv3dStep = R"P(/* kernelevolve-plan
{"steps": [{"library": "cudnn.conv3d", "args": ["x", "w", "y", "N", "C", "D", "H", "W", "K", "3", "3", "3", "b"],
            "options": {"padding": "1"}}]}
*/
)P";

// Whether `e` failed because the machine lacks the step's library; says so (the case then returns).
bool library_missing(const ke::Evaluation& e) {
  if (e.compile_log.find("cannot be loaded") == std::string::npos) return false;
  MESSAGE("skipped: " << e.compile_log);
  return true;
}

// y = avg_pool3d(x, kernel 3, stride 2, padding 1), count_include_pad: x[N, C, D, H, W].
const char* kPoolReference = R"(
#include <stdint.h>
void pool3(const float* x, float* y, int64_t N, int64_t C, int64_t D, int64_t H, int64_t W) {
  const int64_t OD = (D - 1) / 2 + 1, OH = (H - 1) / 2 + 1, OW = (W - 1) / 2 + 1;
  for (int64_t plane = 0; plane < N * C; ++plane)
    for (int64_t i = 0; i < OD; ++i)
      for (int64_t j = 0; j < OH; ++j)
        for (int64_t l = 0; l < OW; ++l) {
          double s = 0;
          for (int64_t a = 0; a < 3; ++a)
            for (int64_t b = 0; b < 3; ++b)
              for (int64_t t = 0; t < 3; ++t) {
                const int64_t d = 2 * i - 1 + a, h = 2 * j - 1 + b, w = 2 * l - 1 + t;
                if (d >= 0 && d < D && h >= 0 && h < H && w >= 0 && w < W) s += x[((plane * D + d) * H + h) * W + w];
              }
          y[((plane * OD + i) * OH + j) * OW + l] = (float)(s / 27);
        }
}
)";

const char* kPoolStep = R"P(/* kernelevolve-plan
{"steps": [{"library": "cudnn.avg_pool3d", "args": ["x", "y", "N", "C", "D", "H", "W"],
            "options": {"kernel_size": "3", "stride": "2", "padding": "1"}}]}
*/
)P";

ke::Evaluation evaluate(const ke::Spec& spec, const std::string& source, const ke::Bindings& tunables) {
  ke::LocalEvaluator evaluator(spec, kGpu.device, quick());
  evaluator.prepare();
  return evaluator.evaluate(ke::Candidate{source, spec.language, tunables}, 11);
}

}  // namespace

TEST_CASE("gpu programs: whether they run") {
  if (kNoGpu) MESSAGE("skipped: no CUDA device: " << kGpu.reason);
  CHECK(true);
}

TEST_CASE("gpu programs: a CUDA plan of three kernels and two temporaries is verified and timed" *
          doctest::skip(kNoGpu)) {
  const ke::Spec spec = centre_spec(ke::Language::cuda, cuda_centre());
  for (std::int64_t threads : {256, 512}) {
    const ke::Evaluation e = evaluate(spec, cuda_centre(), {{"THREADS", threads}});
    INFO(e.message, "\n", e.compile_log);
    REQUIRE(e.status == ke::Status::ok);
    CHECK(e.resources.at("steps") == 3);
    CHECK(e.resources.count("step3.registers") == 1);
    CHECK(e.resources.at("step3.block_threads") == threads);
    std::int64_t shares = 0;
    for (int s = 1; s <= 3; ++s) shares += e.resources.at("step" + std::to_string(s) + ".share_permille");
    CHECK(shares >= 997);
    CHECK(shares <= 1003);
  }
}

TEST_CASE("gpu programs: a temporary a kernel leaves unwritten holds NaN, and the answer is wrong" *
          doctest::skip(kNoGpu)) {
  const ke::Spec spec = centre_spec(ke::Language::cuda, cuda_centre());
  const ke::Evaluation e = evaluate(spec, cuda_centre("gridDim.x - 1"), {{"THREADS", 256}});
  CHECK(e.status == ke::Status::incorrect);
}

TEST_CASE("gpu programs: a kernel that writes one element outside an output or a temporary fails, named" *
          doctest::skip(kNoGpu)) {
  // Red zones (issue 49): 256 bytes before every buffer, and after it the rounding to 256 bytes and 256 more. On
  // the first workload y is 2^20 floats and the temporary 'partial' 4096: both multiples of 256 bytes.
  const ke::Spec spec = centre_spec(ke::Language::cuda, cuda_centre());
  const ke::Evaluation past = evaluate(spec, cuda_centre("gridDim.x", "i + 1"), {{"THREADS", 256}});
  CHECK(past.status == ke::Status::incorrect);
  CHECK_MESSAGE(past.message.find("wrote past the end of output 'y' (byte 0 of the 256 after its 4194304 bytes; "
                                  "workload 0, trial 0)") != std::string::npos,
                past.message);
  const ke::Evaluation before = evaluate(spec, cuda_centre("gridDim.x", "i - 1"), {{"THREADS", 256}});
  CHECK(before.status == ke::Status::incorrect);
  CHECK_MESSAGE(before.message.find("wrote before the start of output 'y' (byte -1, in the 256 before it; "
                                    "workload 0, trial 0)") != std::string::npos,
                before.message);
  const ke::Evaluation temporary = evaluate(spec, cuda_centre("gridDim.x", "i", "blockIdx.x + 1"), {{"THREADS", 256}});
  CHECK(temporary.status == ke::Status::incorrect);
  CHECK_MESSAGE(temporary.message.find("wrote past the end of temporary 'partial' (byte 0 of the 256 after its 16384 "
                                       "bytes; workload 0, trial 0)") != std::string::npos,
                temporary.message);
  // A size that is no multiple of 256 bytes: 1001 floats are 4004 bytes, with 348 bytes of red zone after them.
  // The honest program stays ok there.
  ke::Spec odd = spec;
  odd.workloads = {{{"n", 1001}}};
  odd.validate();
  const ke::Evaluation odd_past = evaluate(odd, cuda_centre("gridDim.x", "i + 1"), {{"THREADS", 256}});
  CHECK(odd_past.status == ke::Status::incorrect);
  CHECK_MESSAGE(odd_past.message.find("wrote past the end of output 'y' (byte 0 of the 348 after its 4004 bytes") !=
                    std::string::npos,
                odd_past.message);
  const ke::Evaluation honest = evaluate(odd, cuda_centre(), {{"THREADS", 256}});
  CHECK_MESSAGE(honest.status == ke::Status::ok, honest.message);
}

TEST_CASE("gpu programs: a Triton plan of two @triton.jit kernels, each with the tunable's warps or its own" *
          doctest::skip(kNoGpu)) {
  if (!triton_here()) {
    MESSAGE("skipped: no Triton here");
    return;
  }
  const ke::Spec spec = centre_spec(ke::Language::triton, kTritonCentre);
  const ke::Evaluation e = evaluate(spec, kTritonCentre, {{"BLOCK", 1024}, {"PB", 1024}, {"num_warps", 4}});
  INFO(e.message, "\n", e.compile_log);
  REQUIRE(e.status == ke::Status::ok);
  CHECK(e.resources.at("steps") == 2);
  CHECK(e.resources.at("step1.block_threads") == 128);
  // Each kernel with warps of its own, as Inductor compiles a program's kernels.
  std::string own = kTritonCentre;
  own.replace(own.find("\"args\": [\"x\", \"partial\", \"n\"]"), 0, "\"num_warps\": \"2\", ");
  own.replace(own.find("\"args\": [\"x\", \"partial\", \"y\""), 0, "\"num_warps\": \"8\", \"num_stages\": \"2\", ");
  const ke::Evaluation each = evaluate(spec, own, {{"BLOCK", 1024}, {"PB", 1024}, {"num_warps", 4}});
  INFO(each.message, "\n", each.compile_log);
  REQUIRE(each.status == ke::Status::ok);
  CHECK(each.resources.at("step1.block_threads") == 64);
  CHECK(each.resources.at("step2.block_threads") == 256);
}

TEST_CASE("gpu programs: a second kernel that writes out of bounds crashes the worker, not the host" *
          doctest::skip(kNoGpu)) {
  const ke::Spec spec = centre_spec(ke::Language::cuda, cuda_centre());
  ke::WorkerOptions options;
  options.timeout_s = 30;
  options.eval = quick();
  ke::WorkerEvaluator evaluator(spec, "cuda:0", options);
  const ke::Evaluation hostile = evaluator.evaluate(
      ke::Candidate{cuda_centre("gridDim.x", "i + (1LL << 40)"), ke::Language::cuda, {{"THREADS", 256}}}, 3);
  INFO(hostile.message);
  CHECK(hostile.status == ke::Status::crashed);
  const ke::Evaluation honest =
      evaluator.evaluate(ke::Candidate{cuda_centre(), ke::Language::cuda, {{"THREADS", 256}}}, 4);
  INFO(honest.message);
  CHECK(honest.status == ke::Status::ok);
}

TEST_CASE("gpu programs: cuBLASLt's product with its epilogue, alone and before a fused kernel" *
          doctest::skip(kNoGpu)) {
  const ke::Spec spec = linear_spec(kLinearTwoSteps);
  const ke::Evaluation one = evaluate(spec, kLinearOneStep, {});
  INFO(one.message, "\n", one.compile_log);
  if (library_missing(one)) return;
  CHECK(one.status == ke::Status::ok);
  CHECK(one.resources.at("library") == 1);
  const ke::Evaluation two = evaluate(spec, kLinearTwoSteps, {});
  INFO(two.message, "\n", two.compile_log);
  CHECK(two.status == ke::Status::ok);
  CHECK(two.resources.count("step1.share_permille") == 1);
  const ke::Evaluation gemm = evaluate(spec, linear_gemm(), {});
  INFO(gemm.message, "\n", gemm.compile_log);
  if (gemm.compile_log.find("cuBLAS cannot be loaded") != std::string::npos) MESSAGE("skipped: " << gemm.compile_log);
  else CHECK(gemm.status == ke::Status::ok);
  // A cublas.gemm step has no epilogue option.
  std::string with_epilogue = linear_gemm();
  with_epilogue.replace(with_epilogue.find("{\"b_transposed\""), 1, "{\"epilogue\": \"relu\", ");
  const ke::Evaluation refused_option = evaluate(spec, with_epilogue, {});
  CHECK(refused_option.status == ke::Status::invalid);
  CHECK((refused_option.message + refused_option.compile_log).find("no option 'epilogue'") != std::string::npos);
  // Sizes that would take the call outside its buffers are refused before it runs.
  std::string wrong = kLinearOneStep;
  wrong.replace(wrong.find("\"M\", \"N\""), 8, "\"N\", \"M\"");
  const ke::Evaluation outside = evaluate(spec, wrong, {});
  CHECK(outside.status == ke::Status::invalid);
  CHECK(outside.message.find("cublaslt.matmul") != std::string::npos);
  // A problem that forbids library steps refuses the plan.
  ke::Spec kernels_only = spec;
  kernels_only.library_steps = false;
  const ke::Evaluation refused = evaluate(kernels_only, kLinearOneStep, {});
  CHECK(refused.status == ke::Status::invalid);
  CHECK(refused.message.find("library_steps") != std::string::npos);
}

TEST_CASE("gpu programs: cuDNN's convolution as a step" * doctest::skip(kNoGpu)) {
  const ke::Spec spec = conv_spec(kConvStep);
  const ke::Evaluation e = evaluate(spec, kConvStep, {});
  INFO(e.message, "\n", e.compile_log);
  if (library_missing(e)) return;
  CHECK(e.status == ke::Status::ok);
}

TEST_CASE("gpu programs: library steps with \"math\": \"tf32\" where the run's precision allows it" *
          doctest::skip(kNoGpu)) {
  // The references here are C loops in double, not PyTorch on TF32 (whose own error would widen the bound): the
  // tolerance is what TF32's 10-bit mantissas need over these sums, on every trial's inputs, heavy tails included.
  auto with_math = [](std::string source) {
    const std::string options = "\"options\": {";
    return source.replace(source.find(options), options.size(), options + "\"math\": \"tf32\", ");
  };
  ke::Spec conv = conv_spec(kConvStep);
  conv.precision = ke::Precision::as_run_defaults();  // PyTorch's: cuDNN's convolutions on TF32, products fp32
  conv.tolerance = {5e-2, 5e-2};
  const ke::Evaluation fp32 = evaluate(conv, kConvStep, {});
  INFO(fp32.message, "\n", fp32.compile_log);
  if (library_missing(fp32)) return;
  CHECK(fp32.status == ke::Status::ok);
  const ke::Evaluation tf32 = evaluate(conv, with_math(kConvStep), {});
  INFO(tf32.message, "\n", tf32.compile_log);
  CHECK(tf32.status == ke::Status::ok);
  // Under strict the plan is refused before it runs, naming the policy.
  conv.precision = ke::Precision::strict_fp32();
  const ke::Evaluation strict = evaluate(conv, with_math(kConvStep), {});
  CHECK(strict.status == ke::Status::invalid);
  CHECK_MESSAGE(strict.message.find("TF32 in cuDNN is not allowed: the run's precision is strict") != std::string::npos,
                strict.message);

  // cuBLASLt's product (CUBLAS_COMPUTE_32F_FAST_TF32) and cuBLAS's GEMM with its bias kernel, where the user's PyTorch
  // runs matrix products on TF32; at the small workload, where 17 products make each sum.
  ke::Spec linear = linear_spec(kLinearOneStep);
  linear.workloads = {linear.workloads.back()};
  linear.precision = ke::Precision::as_run_defaults();
  linear.precision->matmul_tf32 = true;
  linear.tolerance = {5e-2, 5e-2};
  for (const std::string& source : {with_math(kLinearOneStep), with_math(linear_gemm())}) {
    const ke::Evaluation e = evaluate(linear, source, {});
    INFO(e.message, "\n", e.compile_log);
    if (e.compile_log.find("cannot be loaded") != std::string::npos) {
      MESSAGE("skipped: " << e.compile_log);
      continue;
    }
    CHECK(e.status == ke::Status::ok);
  }
  // With matrix products in fp32 (PyTorch's default) the same plan is invalid.
  linear.precision->matmul_tf32 = false;
  const ke::Evaluation refused = evaluate(linear, with_math(kLinearOneStep), {});
  CHECK(refused.status == ke::Status::invalid);
  CHECK_MESSAGE(refused.message.find("torch.backends.cuda.matmul.allow_tf32 is off") != std::string::npos,
                refused.message);
}

TEST_CASE("gpu programs: cuBLAS's batched product and a transposed left operand as steps" * doctest::skip(kNoGpu)) {
  using P = ke::Param;
  const ke::DType f32 = ke::DType::f32, i64 = ke::DType::i64;
  const ke::Spec bmm = library_spec(
      "bmm",
      {P{"a", f32, ke::Role::in, {"B", "M", "K"}, 0}, P{"w", f32, ke::Role::in, {"B", "N", "K"}, 0},
       P{"y", f32, ke::Role::out, {"B", "M", "N"}, 0}, P{"B", i64, ke::Role::size, {}, 0},
       P{"M", i64, ke::Role::size, {}, 0}, P{"N", i64, ke::Role::size, {}, 0}, P{"K", i64, ke::Role::size, {}, 0}},
      {{{"B", 6}, {"M", 27}, {"N", 27}, {"K", 64}}}, kBmmReference, kBmmStep);
  const ke::Evaluation batched = evaluate(bmm, kBmmStep, {});
  INFO(batched.message, "\n", batched.compile_log);
  if (library_missing(batched)) return;
  CHECK(batched.status == ke::Status::ok);
  CHECK(batched.resources.at("library") == 1);
  // B beyond what the buffers hold is refused before the call runs.
  std::string too_many = kBmmStep;
  too_many.replace(too_many.find("\"B\", \"M\""), 8, "\"K\", \"M\"");
  const ke::Evaluation outside = evaluate(bmm, too_many, {});
  CHECK(outside.status == ke::Status::invalid);
  CHECK(outside.message.find("cublas.gemm_batched") != std::string::npos);

  const ke::Spec mm_at =
      library_spec("mm_at",
                   {P{"a", f32, ke::Role::in, {"K", "M"}, 0}, P{"w", f32, ke::Role::in, {"K", "N"}, 0},
                    P{"y", f32, ke::Role::out, {"M", "N"}, 0}, P{"M", i64, ke::Role::size, {}, 0},
                    P{"N", i64, ke::Role::size, {}, 0}, P{"K", i64, ke::Role::size, {}, 0}},
                   {{{"M", 70}, {"N", 33}, {"K", 129}}}, kMmLeftTransposedReference, kMmLeftTransposedStep);
  const ke::Evaluation left = evaluate(mm_at, kMmLeftTransposedStep, {});
  INFO(left.message, "\n", left.compile_log);
  CHECK(left.status == ke::Status::ok);
}

TEST_CASE("gpu programs: cuDNN's transposed and 3-d convolutions, and its 3-d average pooling, as steps" *
          doctest::skip(kNoGpu)) {
  using P = ke::Param;
  const ke::DType f32 = ke::DType::f32, i64 = ke::DType::i64;
  const ke::Spec transposed = library_spec(
      "conv_t",
      {P{"x", f32, ke::Role::in, {"N", "C", "H", "W"}, 0}, P{"w", f32, ke::Role::in, {"C", "K / 2", "3", "3"}, 0},
       P{"b", f32, ke::Role::in, {"K"}, 0}, P{"y", f32, ke::Role::out, {"N", "K", "2 * H", "2 * W"}, 0},
       P{"N", i64, ke::Role::size, {}, 0}, P{"C", i64, ke::Role::size, {}, 0}, P{"H", i64, ke::Role::size, {}, 0},
       P{"W", i64, ke::Role::size, {}, 0}, P{"K", i64, ke::Role::size, {}, 0}},
      {{{"N", 2}, {"C", 8}, {"H", 9}, {"W", 13}, {"K", 6}}}, kConvTransposeReference, kConvTransposeStep);
  const ke::Evaluation t = evaluate(transposed, kConvTransposeStep, {});
  INFO(t.message, "\n", t.compile_log);
  if (library_missing(t)) return;
  CHECK(t.status == ke::Status::ok);
  // An output_padding at the stride has no cuDNN form: refused, and said why.
  std::string at_stride = kConvTransposeStep;
  at_stride.replace(at_stride.find("\"output_padding\": \"1\""), 21, "\"output_padding\": \"2\"");
  const ke::Evaluation refused = evaluate(transposed, at_stride, {});
  CHECK(refused.status == ke::Status::invalid);
  CHECK_MESSAGE((refused.message + refused.compile_log).find("output_padding") != std::string::npos, refused.message);

  const ke::Spec cube = library_spec(
      "conv3",
      {P{"x", f32, ke::Role::in, {"N", "C", "D", "H", "W"}, 0}, P{"w", f32, ke::Role::in, {"K", "C", "3", "3", "3"}, 0},
       P{"b", f32, ke::Role::in, {"K"}, 0}, P{"y", f32, ke::Role::out, {"N", "K", "D", "H", "W"}, 0},
       P{"N", i64, ke::Role::size, {}, 0}, P{"C", i64, ke::Role::size, {}, 0}, P{"D", i64, ke::Role::size, {}, 0},
       P{"H", i64, ke::Role::size, {}, 0}, P{"W", i64, ke::Role::size, {}, 0}, P{"K", i64, ke::Role::size, {}, 0}},
      {{{"N", 2}, {"C", 3}, {"D", 6}, {"H", 7}, {"W", 9}, {"K", 5}}}, kConv3dReference, kConv3dStep);
  const ke::Evaluation three = evaluate(cube, kConv3dStep, {});
  INFO(three.message, "\n", three.compile_log);
  CHECK(three.status == ke::Status::ok);

  const ke::Spec pool = library_spec(
      "pool3",
      {P{"x", f32, ke::Role::in, {"N", "C", "D", "H", "W"}, 0},
       P{"y", f32, ke::Role::out, {"N", "C", "(D - 1) / 2 + 1", "(H - 1) / 2 + 1", "(W - 1) / 2 + 1"}, 0},
       P{"N", i64, ke::Role::size, {}, 0}, P{"C", i64, ke::Role::size, {}, 0}, P{"D", i64, ke::Role::size, {}, 0},
       P{"H", i64, ke::Role::size, {}, 0}, P{"W", i64, ke::Role::size, {}, 0}},
      {{{"N", 2}, {"C", 3}, {"D", 9}, {"H", 10}, {"W", 11}}}, kPoolReference, kPoolStep);
  const ke::Evaluation pooled = evaluate(pool, kPoolStep, {});
  INFO(pooled.message, "\n", pooled.compile_log);
  CHECK(pooled.status == ke::Status::ok);
}
