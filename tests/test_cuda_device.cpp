// CudaDevice: absent cleanly without a GPU; NVRTC compilation (where NVRTC is installed, no GPU needed);
// and on a GPU: description, ceilings, compile and module cache, launches with large dynamic shared
// memory, timing, a failed launch that leaves the device usable, and the CUDA problems' seeds.
// GPU tests are skipped (and say so) when no CUDA device can be opened.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>

#include <kernelevolve/device.hpp>
#include <kernelevolve/diagnosis.hpp>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "devices/cuda/cuda_api.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "devices/cuda/verify_kernels.hpp"
#include "devices/gpu/common.hpp"
#include "eval/buffers.hpp"
#include "support/gpu_under_test.hpp"

#if defined(KE_HAVE_CUDA_HEADERS) && __has_include(<cuda.h>) && __has_include(<nvrtc.h>)
#include <cuda.h>
#include <nvrtc.h>
// The constants cuda_api.hpp declares by hand must be the toolkit's.
namespace c = kernelevolve::cuda;
#define KE_SAME(name) static_assert(static_cast<long long>(c::name) == static_cast<long long>(name), #name)
KE_SAME(CUDA_ERROR_ILLEGAL_ADDRESS);
KE_SAME(CUDA_ERROR_LAUNCH_FAILED);
KE_SAME(CUDA_ERROR_MISALIGNED_ADDRESS);
KE_SAME(CUDA_ERROR_ILLEGAL_INSTRUCTION);
KE_SAME(CUDA_ERROR_HARDWARE_STACK_ERROR);
KE_SAME(CUDA_ERROR_INVALID_PC);
KE_SAME(CUDA_ERROR_ASSERT);
KE_SAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
KE_SAME(CUDA_ERROR_NOT_FOUND);
KE_SAME(CUDA_ERROR_NO_DEVICE);
KE_SAME(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
KE_SAME(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
KE_SAME(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
KE_SAME(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
KE_SAME(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
KE_SAME(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
KE_SAME(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
KE_SAME(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
KE_SAME(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
KE_SAME(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
KE_SAME(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
KE_SAME(CU_FUNC_ATTRIBUTE_NUM_REGS);
KE_SAME(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
KE_SAME(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
KE_SAME(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
KE_SAME(CU_STREAM_NON_BLOCKING);
KE_SAME(NVRTC_ERROR_COMPILATION);
static_assert(sizeof(c::CUdeviceptr) == sizeof(CUdeviceptr));
static_assert(sizeof(c::CUuuid) == sizeof(CUuuid));
#endif

namespace ke = kernelevolve;
namespace fs = std::filesystem;

namespace {

const ke::testing::GpuUnderTest& gpu() {
  static const ke::testing::GpuUnderTest g = ke::testing::open_gpu("cuda:0");
  return g;
}

const bool kNoGpu = !gpu().device;
const bool kNoNvrtc = [] {
  std::string error;
  return ke::cuda::load_nvrtc_only(&error) == nullptr;
}();

std::string source_dir() {
  const char* env = std::getenv("KE_SOURCE_DIR");
  return env && *env ? env : KE_SOURCE_DIR;
}

ke::KernelSource cuda_source(std::string body, std::string entry) {
  ke::KernelSource ks;
  ks.source = std::move(body);
  ks.language = ke::Language::cuda;
  ks.entry = std::move(entry);
  return ks;
}

const char* kScale = R"(
extern "C" __global__ void scale(const float* x, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = FACTOR * x[i];
}
)";

}  // namespace

TEST_CASE("cuda: whether the GPU tests run") {
  if (kNoGpu) MESSAGE("skipped: no CUDA device: the GPU tests in this file are skipped: " << gpu().reason);
  if (kNoNvrtc) MESSAGE("skipped: NVRTC is not installed: the compile-only tests are skipped");
  CHECK(true);
}

TEST_CASE("cuda: without a GPU, opening one fails cleanly and none is listed" * doctest::skip(!kNoGpu)) {
  try {
    ke::open_device("cuda");
    FAIL("open_device(\"cuda\") succeeded without a GPU");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::DeviceUnavailable);
    CHECK(e.exit_code() == 3);
    CHECK(std::string(e.what()).find("cuda:0") != std::string::npos);
  }
  for (const auto& d : ke::list_devices()) CHECK(d.kind != "cuda");
  CHECK_THROWS_AS(ke::open_device("cuda:7"), ke::Error);
}

TEST_CASE("cuda: the target architecture follows the device and the kernel's request") {
  std::string error;
  ke::KernelSource ks = cuda_source("extern \"C\" __global__ void k() {}", "k");
  CHECK(ke::cuda_detail::target_arch(ks, 90, error) == "sm_90");
  ks.source = "// ke: sm_90a\n" + ks.source;
  CHECK(ke::cuda_detail::target_arch(ks, 90, error) == "sm_90a");
  CHECK(ke::cuda_detail::target_arch(ks, 80, error).empty());
  CHECK(error.find("sm_80") != std::string::npos);
  ks = cuda_source("extern \"C\" __global__ void k() {}", "k");
  ks.flags = {"-arch=sm_90a"};
  error.clear();
  CHECK(ke::cuda_detail::target_arch(ks, 90, error) == "sm_90a");
  ks.flags = {"--gpu-architecture=sm_100a"};
  CHECK(ke::cuda_detail::target_arch(ks, 90, error).empty());
}

// A program NVRTC's compile cache has not seen (it keys what survives preprocessing, so not a comment): a
// cached compile returns no ptxas report.
std::string uncached(const std::string& source) {
  return source + "\n__device__ long long ke_unique = 1" + std::to_string(::getpid()) +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000000) + "LL;\n";
}

TEST_CASE("cuda: NVRTC compiles, reports errors as results, and takes tunables as macros" * doctest::skip(kNoNvrtc)) {
  ke::KernelSource ks = cuda_source(uncached(kScale), "scale");
  ks.defines = {{"FACTOR", 3}};
  ks.flags = {"-O3"};
  auto out = ke::cuda_detail::nvrtc_compile(ks, "sm_90");
  CHECK_MESSAGE(out.ok, out.log);
  CHECK(!out.image.empty());
  CHECK(out.log.find("dropped '-O3'") != std::string::npos);
  CHECK(out.log.find("registers") != std::string::npos);  // ptxas's resource report

  ks.defines.clear();  // FACTOR undefined: a compile error, as a result
  out = ke::cuda_detail::nvrtc_compile(ks, "sm_90");
  CHECK(!out.ok);
  CHECK(out.log.find("FACTOR") != std::string::npos);

  ks = cuda_source("// ke: sm_90a\nextern \"C\" __global__ void k(float* y) { y[0] = 1.f; }", "k");
  out = ke::cuda_detail::nvrtc_compile(ks, "sm_90a");
  CHECK_MESSAGE(out.ok, out.log);
}

TEST_CASE("cuda: the verification kernels compile" * doctest::skip(kNoNvrtc)) {
  const auto out =
      ke::cuda_detail::nvrtc_compile(cuda_source(uncached(ke::cuda_detail::kVerifySource), "ke_fill"), "sm_90");
  CHECK_MESSAGE(out.ok, out.log);
  CHECK(out.log.find("spill") != std::string::npos);
}

TEST_CASE("gpu: the ceiling kernels the CUDA and HIP devices share compile" * doctest::skip(kNoNvrtc)) {
  for (const char* entry : {"ke_copy", "ke_fma", "ke_flush"}) {
    const auto out = ke::cuda_detail::nvrtc_compile(cuda_source(ke::gpu::kCeilingKernels, entry), "sm_90");
    CHECK_MESSAGE(out.ok, entry << ": " << out.log);
  }
}

TEST_CASE("cuda: the tensor-core ceiling kernels compile from sm_80 on, and not before" * doctest::skip(kNoNvrtc)) {
  for (const char* arch : {"sm_80", "sm_90"}) {
    for (const char* entry : {"ke_mma_bf16", "ke_mma_f16"}) {
      const auto out = ke::cuda_detail::nvrtc_compile(cuda_source(ke::gpu::kTensorKernels, entry), arch);
      CHECK_MESSAGE(out.ok, arch << " " << entry << ": " << out.log);
      // The accumulators stay in registers. ptxas reports it only where NVRTC went as far as a cubin: on an H200
      // with the driver's NVRTC, one of the two arches came back as PTX, without the line.
      if (out.log.find("spill stores") != std::string::npos)
        CHECK(out.log.find("0 bytes spill stores") != std::string::npos);
    }
  }
  // bf16 mma needs sm_80: the device offers the source only from there (CudaDevice's Setup::tensor_source).
  const auto old = ke::cuda_detail::nvrtc_compile(cuda_source(ke::gpu::kTensorKernels, "ke_mma_bf16"), "sm_75");
  CHECK_FALSE(old.ok);
}

TEST_CASE("gpu: sources and launches a GPU device refuses before its driver sees them") {
  ke::KernelSource ks = cuda_source(kScale, "scale");
  ks.defines = {{"FACTOR", 2}};
  CHECK(ke::gpu::refusal(ks, ke::Language::cuda, "cuda:0", true, "").empty());
  const std::string hip = ke::gpu::refusal(ks, ke::Language::hip, "hip:1", true, "");
  CHECK(hip.find("hip:1 compiles hip kernels, not cuda") != std::string::npos);
  ks.defines = {{"2FACTOR", 2}};
  CHECK(ke::gpu::refusal(ks, ke::Language::cuda, "cuda:0", true, "").find("'2FACTOR' is not a C identifier") !=
        std::string::npos);
  ks.defines.clear();
  ks.entry = "scale(); evil";
  CHECK(ke::gpu::refusal(ks, ke::Language::cuda, "cuda:0", true, "").find("is not a C identifier") !=
        std::string::npos);
  ks.entry = "scale";
  const std::string sick = ke::gpu::refusal(ks, ke::Language::cuda, "cuda:0", false, "an illegal address");
  CHECK(sick.find("cuda:0 is unusable") != std::string::npos);
  CHECK(sick.find("an illegal address") != std::string::npos);

  ke::LaunchDims dims;
  dims.grid[0] = 132;
  dims.block[0] = 256;
  dims.shared_bytes = 1024;
  CHECK(ke::gpu::invalid_launch(dims).empty());
  dims.block[1] = 0;
  CHECK(ke::gpu::invalid_launch(dims).find("block 256x0x1") != std::string::npos);
  dims.block[1] = 1;
  dims.grid[2] = std::int64_t(1) << 33;
  CHECK(ke::gpu::invalid_launch(dims).find("invalid launch dimensions") != std::string::npos);
  dims.grid[2] = 1;
  dims.shared_bytes = -1;
  CHECK(ke::gpu::invalid_launch(dims).find("shared memory size -1") != std::string::npos);
}

TEST_CASE("cuda: the CUDA problems' seeds and references compile at their extreme points" * doctest::skip(kNoNvrtc)) {
  for (const char* dir :
       {"level1/softmax", "level1/layernorm", "level1/row_sum", "level1/matmul", "level2/elementwise_chain"}) {
    const fs::path path = fs::path(source_dir()) / "problems" / dir / "cuda.json";
    CAPTURE(path.string());
    const ke::Spec spec = ke::load_spec(path.string());
    CHECK(spec.language == ke::Language::cuda);
    CHECK(spec.launch.has_value());
    for (int which = 0; which < 3; ++which) {
      ke::KernelSource ks = cuda_source(which == 0 ? spec.reference.source : spec.seed.source, spec.entry);
      ks.defines = spec.seed_tunables();
      if (which == 2) {  // the last value of every tunable, where the constraints allow it
        ke::Bindings last;
        for (const auto& [name, values] : spec.tunables) last[name] = values.back();
        if (!spec.satisfies_constraints(last)) continue;
        ks.defines = last;
      }
      const auto out = ke::cuda_detail::nvrtc_compile(ks, "sm_90");
      CHECK_MESSAGE(out.ok, out.log);
    }
  }
}

TEST_CASE("cuda: the device describes itself and measures its ceilings" * doctest::skip(kNoGpu)) {
  auto& device = *gpu().device;
  const ke::DeviceInfo& info = device.info();
  MESSAGE(info.id << " " << info.name << ": copy " << info.peak_bytes_per_s / 1e9 << " GB/s, FMA "
                  << info.peak_flops_per_s / 1e12 << " TFLOP/s, floor " << info.floor_bytes_per_s / 1e9 << " GB/s ("
                  << info.properties.at("ceilings") << ")");
  CHECK(info.id == "cuda:0");
  CHECK(info.kind == "cuda");
  CHECK(!info.name.empty());
  CHECK(info.compute_units > 0);
  CHECK(info.vector_bits == 1024);
  for (const char* key : {"compute_capability", "arch", "l2_cache", "shared_per_block", "shared_per_block_optin",
                          "shared_per_sm", "clock_mhz", "memory", "uuid"}) {
    CAPTURE(key);
    CHECK(info.properties.count(key) == 1);
  }
  CHECK(info.peak_bytes_per_s > 1e11);
  CHECK(info.peak_flops_per_s > 1e12);
  CHECK(info.floor_bytes_per_s >= 3 * info.peak_bytes_per_s);
  bool listed = false;
  for (const auto& d : ke::list_devices()) listed |= d.id == "cuda:0" && d.name == info.name;
  CHECK(listed);
}

TEST_CASE("cuda: the tensor-core ceilings of bf16 and fp16, measured, several times the FMA peak" *
          doctest::skip(kNoGpu)) {
  auto& device = *gpu().device;
  const ke::DeviceInfo& info = device.info();
  const auto property = [&](const char* key) {
    const auto it = info.properties.find(key);
    return it == info.properties.end() ? std::string("(none)") : it->second;
  };
  MESSAGE(info.name << " " << property("arch") << ": bf16 " << info.bf16_tensor_flops_per_s / 1e12 << " TFLOP/s, fp16 "
                    << info.fp16_tensor_flops_per_s / 1e12 << " TFLOP/s, FMA " << info.peak_flops_per_s / 1e12
                    << " TFLOP/s (" << property("tensor_ceilings") << "; ceilings " << property("ceilings") << ")");
  const std::string arch = property("arch");
  const int cc = arch.rfind("sm_", 0) == 0 ? std::atoi(arch.c_str() + 3) : 0;
  if (cc < 80) {
    MESSAGE("skipped: " << arch << " has no bf16 mma (sm_80 on)");
    return;
  }
  // Dense bf16 and fp16 with fp32 accumulation: an A100 has 16 times its fp32 FMA rate, an H100 or H200 about 15
  // (cuBLASLt's product; mma.sync alone reaches about 10): 4 times leaves room for a clock or a busy GPU.
  for (const double rate : {info.bf16_tensor_flops_per_s, info.fp16_tensor_flops_per_s}) {
    CHECK(rate > 0);
    CHECK(rate > 4 * info.peak_flops_per_s);
    CHECK(rate < 5e15);  // no GPU of these years: a timing error, not a measurement
  }
  CHECK(info.properties.count("bf16_tensor_tflops") == 1);
  CHECK(info.properties.count("fp16_tensor_tflops") == 1);
  CHECK(property("tensor_ceilings").find("bf16: ") == 0);
  if (cc >= 80 && !(cc >= 100 && cc < 120)) CHECK(property("tensor_ceilings").find("mma.sync") != std::string::npos);
}

TEST_CASE("cuda: compile, cache, launch, time, and report resources" * doctest::skip(kNoGpu)) {
  auto& device = *gpu().device;
  ke::KernelSource ks = cuda_source(kScale, "scale");
  ks.defines = {{"FACTOR", 3}};
  const ke::CompileResult first = device.compile(ks);
  REQUIRE_MESSAGE(first.ok(), first.log);
  CHECK(!first.cached);
  const ke::CompileResult again = device.compile(ks);
  CHECK(again.cached);
  CHECK(again.kernel == first.kernel);
  const auto res = first.kernel->resources();
  CHECK(res.at("registers") > 0);
  CHECK(res.count("local_bytes") == 1);
  CHECK(res.count("shared_static_bytes") == 1);
  CHECK(res.count("spill_store_bytes") == 1);
  CHECK(res.at("max_threads_per_block") >= 256);
  CHECK(res.count("occupancy_pct") == 0);  // the launch's block decides it: launch_resources, below

  const long long n = 1 << 20;
  std::vector<float> x(n), y(n, -1.f);
  for (long long i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000) * 0.5f;
  auto bx = device.allocate(n * 4), by = device.allocate(n * 4);
  bx->upload(x.data(), n * 4);
  void* px = bx->data();
  void* py = by->data();
  void* args[] = {&px, &py, const_cast<long long*>(&n)};
  ke::LaunchDims dims;
  dims.grid[0] = n / 256;
  dims.block[0] = 256;
  const ke::LaunchResult r = device.launch(*first.kernel, args, dims, true, true);
  REQUIRE_MESSAGE(r.ok, r.error);
  CHECK(r.time_us > 0);
  CHECK(r.time_us < 1e5);
  by->download(y.data(), n * 4);
  bool same = true;
  for (long long i = 0; i < n; ++i) same &= y[i] == 3.f * x[i];
  CHECK(same);
  // The occupancy the driver computes for this block: a small kernel of 256-thread blocks fills every SM
  // of an sm_80+ part (2048 threads, 8 blocks), and a block of 1024 by the driver too.
  const auto launched = device.launch_resources(*first.kernel, dims);
  CHECK(launched.at("block_threads") == 256);
  CHECK(launched.at("dynamic_shared_bytes") == 0);
  CHECK(launched.at("active_blocks_per_sm") >= 4);
  CHECK(launched.at("occupancy_pct") > 0);
  CHECK(launched.at("occupancy_pct") <= 100);
  MESSAGE("scale at 256 threads: " << res.at("registers") << " registers, " << launched.at("active_blocks_per_sm")
                                   << " blocks/SM, occupancy " << launched.at("occupancy_pct") << "%");

  // A compile error is a result with the log, and so is a missing entry point.
  ks.source = "extern \"C\" __global__ void scale(float* y) { y[0] = undeclared; }";
  ke::CompileResult bad = device.compile(ks);
  CHECK(!bad.ok());
  CHECK(bad.log.find("undeclared") != std::string::npos);
  ks.source = "__global__ void scale(float* y) { y[0] = 1.f; }";  // mangled name
  bad = device.compile(ks);
  CHECK(!bad.ok());
  CHECK(bad.log.find("extern \"C\"") != std::string::npos);
  CHECK(device.healthy());
}

TEST_CASE("cuda: dynamic shared memory above 48 KB, and launches that fail leave the device usable" *
          doctest::skip(kNoGpu)) {
  auto& device = *gpu().device;
  const char* src = R"(
extern "C" __global__ void fill(float* y, long long n) {
  extern __shared__ float buffer[];
  const long long count = n;
  for (long long i = threadIdx.x; i < count; i += blockDim.x) buffer[i] = (float)i;
  __syncthreads();
  for (long long i = threadIdx.x; i < count; i += blockDim.x) y[i] = buffer[count - 1 - i];
}
)";
  const ke::CompileResult c = device.compile(cuda_source(src, "fill"));
  REQUIRE_MESSAGE(c.ok(), c.log);
  const long long n = 100 * 1024 / 4;  // 100 KB of shared memory
  auto by = device.allocate(n * 4);
  void* py = by->data();
  void* args[] = {&py, const_cast<long long*>(&n)};
  ke::LaunchDims dims;
  dims.block[0] = 256;
  dims.shared_bytes = n * 4;
  const ke::LaunchResult ok = device.launch(*c.kernel, args, dims);
  REQUIRE_MESSAGE(ok.ok, ok.error);
  std::vector<float> y(n);
  by->download(y.data(), n * 4);
  CHECK(y[0] == static_cast<float>(n - 1));
  CHECK(y[n - 1] == 0.f);

  dims.shared_bytes = 4 << 20;  // more than any GPU has
  ke::LaunchResult failed = device.launch(*c.kernel, args, dims);
  CHECK(!failed.ok);
  CHECK(!failed.error.empty());
  dims.shared_bytes = n * 4;
  dims.block[0] = 4096;  // more threads than a block may have
  failed = device.launch(*c.kernel, args, dims);
  CHECK(!failed.ok);
  MESSAGE("a block of 4096 threads: " << failed.error);
  CHECK(device.healthy());
  dims.block[0] = 256;
  const ke::LaunchResult after = device.launch(*c.kernel, args, dims, true, true);
  CHECK_MESSAGE(after.ok, after.error);
}

TEST_CASE("cuda: every PyTorch problem's CUDA seed compiles at its first and last points" * doctest::skip(kNoNvrtc)) {
  int compiled = 0;
  std::vector<fs::path> specs;
  for (const auto& entry : fs::directory_iterator(fs::path(source_dir()) / "problems" / "pytorch"))
    for (const char* name : {"cuda.json", "forward_cuda.json"})  // forward_cuda.json: a backward's forward
      if (fs::exists(entry.path() / name)) specs.push_back(entry.path() / name);
  for (const fs::path& path : specs) {
    CAPTURE(path.string());
    const ke::Spec spec = ke::load_spec(path.string());
    ke::Bindings last;
    for (const auto& [name, values] : spec.tunables) last[name] = values.back();
    for (const ke::Bindings& point : {spec.seed_tunables(), last}) {
      if (!spec.satisfies_constraints(point)) continue;
      ke::KernelSource ks = cuda_source(spec.seed.source, spec.entry);
      ks.defines = point;
      const auto out = ke::cuda_detail::nvrtc_compile(ks, "sm_90");
      CHECK_MESSAGE(out.ok, out.log);
    }
    ++compiled;
  }
  CHECK(compiled >= 12);
}

TEST_CASE("cuda: each CUDA problem's seed and reference verify on the GPU" * doctest::skip(kNoGpu)) {
  for (const char* dir :
       {"level1/row_sum", "level1/softmax", "level1/layernorm", "level2/elementwise_chain", "level1/matmul"}) {
    const fs::path path = fs::path(source_dir()) / "problems" / dir / "cuda.json";
    CAPTURE(path.string());
    ke::Spec spec = ke::load_spec(path.string());
    // Small shapes keep this quick; the odd one exercises every edge path.
    if (spec.name == "matmul_cuda") {
      spec.workloads = {{{"M", 256}, {"N", 256}, {"K", 256}}, {{"M", 67}, {"N", 45}, {"K", 33}}};
    } else {
      spec.workloads = {{{"M", 256}, {"N", 1024}}, {{"M", 37}, {"N", 301}}};
    }
    ke::EvalOptions quick;
    quick.trials = 2;
    quick.max_reps = 5;
    quick.target_ms = 1;
    ke::LocalEvaluator evaluator(spec, gpu().device, quick);
    ke::Bindings last;
    for (const auto& [name, values] : spec.tunables) last[name] = values.back();
    for (const ke::Bindings& point : {spec.seed_tunables(), last}) {
      if (!spec.satisfies_constraints(point)) continue;
      const ke::Evaluation e = evaluator.evaluate(ke::Candidate{spec.seed.source, ke::Language::cuda, point}, 7);
      CHECK_MESSAGE(e.status == ke::Status::ok, e.message << "\n" << e.compile_log);
    }
  }
}

TEST_CASE("cuda: a candidate's diagnosis: rates against the measured ceilings, registers, spills, occupancy" *
          doctest::skip(kNoGpu)) {
  const ke::Spec spec = ke::load_spec((fs::path(source_dir()) / "problems/level1/row_sum/cuda.json").string());
  ke::EvalOptions quick;
  quick.trials = 1;
  quick.max_reps = 20;
  ke::LocalEvaluator evaluator(spec, gpu().device, quick);
  // The seed (a row per thread, uncoalesced) and a coalesced point: 32 threads a row, 4-wide loads.
  for (const ke::Bindings& point :
       {spec.seed_tunables(), ke::Bindings{{"THREADS", 256}, {"TPR", 32}, {"VEC", 4}, {"UNROLL", 4}}}) {
    const ke::Evaluation e = evaluator.evaluate(ke::Candidate{spec.seed.source, ke::Language::cuda, point}, 11);
    REQUIRE_MESSAGE(e.status == ke::Status::ok, e.message << "\n" << e.compile_log);
    const auto d = ke::diagnose(spec, point, e, gpu().device->info());
    REQUIRE(d.has_value());
    MESSAGE("THREADS " << point.at("THREADS") << ", TPR " << point.at("TPR") << ": " << ke::diagnosis_text(*d));
    REQUIRE(d->workloads.size() == 2);
    CHECK(*d->workloads[0].bandwidth_share > 0);
    CHECK(*d->workloads[0].bandwidth_share < 1.5);  // 128 MiB of input: from memory, not from L2
    CHECK(d->workloads[0].bound != ke::Bound::unknown);
    REQUIRE(d->gpu.has_value());
    CHECK(*d->gpu->registers > 0);
    CHECK(d->gpu->spill_bytes.has_value());
    CHECK(*d->gpu->block_threads == point.at("THREADS"));
    CHECK(*d->gpu->active_blocks_per_sm >= 1);
    CHECK(*d->gpu->occupancy_pct > 0);
    CHECK(*d->gpu->occupancy_pct <= 100);
  }
}

namespace {

// The device buffer's contents, as host elements.
ke::eval::HostArray fetch(const ke::Buffer& b, ke::DType dtype, std::size_t count) {
  ke::eval::HostArray a(dtype, count);
  b.download(a.bytes.data(), a.size_bytes());
  return a;
}

struct Moments {
  double mean = 0, sd = 0, kurtosis = 0, min = 1e300, max = -1e300;
  bool integral = true;
};
Moments moments(const ke::eval::HostArray& a) {
  Moments m;
  double s1 = 0;
  for (std::size_t i = 0; i < a.count; ++i) {
    const double v = a.get(i);
    s1 += v;
    m.min = std::min(m.min, v);
    m.max = std::max(m.max, v);
    if (v != std::round(v)) m.integral = false;
  }
  m.mean = s1 / a.count;
  double s2 = 0, s4 = 0;
  for (std::size_t i = 0; i < a.count; ++i) {
    const double d = a.get(i) - m.mean;
    s2 += d * d;
    s4 += d * d * d * d;
  }
  m.sd = std::sqrt(s2 / a.count);
  m.kurtosis = s4 / a.count / (m.sd * m.sd * m.sd * m.sd);
  return m;
}

}  // namespace

TEST_CASE("cuda: inputs are drawn on the GPU from the asked distribution, the same for the same seed" *
          doctest::skip(kNoGpu)) {
  ke::Device& dev = *gpu().device;
  const std::size_t n = 1000003;
  auto buffer = dev.allocate(n * 8);
  using K = ke::InputDist::Kind;
  SUBCASE("floating types, each distribution") {
    for (ke::DType t : {ke::DType::f32, ke::DType::f64, ke::DType::f16, ke::DType::bf16}) {
      CAPTURE(ke::to_string(t));
      REQUIRE(dev.fill_random(*buffer, t, n, {K::normal, 3.0, 2.0}, 11));
      Moments m = moments(fetch(*buffer, t, n));
      CHECK(std::abs(m.mean - 3.0) < 0.02);
      CHECK(std::abs(m.sd - 2.0) < 0.02);
      CHECK(std::abs(m.kurtosis - 3.0) < 0.1);  // a normal's
      REQUIRE(dev.fill_random(*buffer, t, n, {K::laplace, 0.0, 1.0}, 12));
      m = moments(fetch(*buffer, t, n));
      CHECK(std::abs(m.mean) < 0.01);
      CHECK(std::abs(m.sd - 1.0) < 0.02);
      CHECK(m.kurtosis > 5.0);  // a Laplace's is 6: heavy tails
      REQUIRE(dev.fill_random(*buffer, t, n, {K::uniform, -1.0, 3.0}, 13));
      m = moments(fetch(*buffer, t, n));
      CHECK(m.min >= -1.0);
      CHECK(m.max <= 3.0);
      CHECK(std::abs(m.mean - 1.0) < 0.01);
      CHECK(std::abs(m.sd - 4.0 / std::sqrt(12.0)) < 0.01);
      CHECK_FALSE(m.integral);
    }
  }
  SUBCASE("integer types are rounded into their range") {
    REQUIRE(dev.fill_random(*buffer, ke::DType::u8, n, {K::normal, 0.0, 300.0}, 1));
    Moments m = moments(fetch(*buffer, ke::DType::u8, n));
    CHECK(m.integral);
    CHECK(m.min == 0);
    CHECK(m.max == 255);
    REQUIRE(dev.fill_random(*buffer, ke::DType::i8, n, {K::normal, 0.0, 300.0}, 2));
    m = moments(fetch(*buffer, ke::DType::i8, n));
    CHECK(m.min == -128);
    CHECK(m.max == 127);
    for (ke::DType t : {ke::DType::i32, ke::DType::i64}) {
      REQUIRE(dev.fill_random(*buffer, t, n, {K::uniform, -10.0, 10.0}, 3));
      m = moments(fetch(*buffer, t, n));
      CHECK(m.integral);
      CHECK(m.min == -10);
      CHECK(m.max == 10);
    }
  }
  SUBCASE("a function of the seed alone, and only the asked elements") {
    buffer->fill("\x7f", 1);
    REQUIRE(dev.fill_random(*buffer, ke::DType::f32, n - 1, {K::normal, 0.0, 1.0}, 99));
    const auto first = fetch(*buffer, ke::DType::f32, n);
    REQUIRE(dev.fill_random(*buffer, ke::DType::f32, n - 1, {K::normal, 0.0, 1.0}, 99));
    CHECK(fetch(*buffer, ke::DType::f32, n).bytes == first.bytes);
    const unsigned char* last = first.bytes.data() + 4 * (n - 1);
    CHECK((last[0] == 0x7f && last[1] == 0x7f && last[2] == 0x7f && last[3] == 0x7f));
    REQUIRE(dev.fill_random(*buffer, ke::DType::f32, n - 1, {K::normal, 0.0, 1.0}, 100));
    CHECK(fetch(*buffer, ke::DType::f32, n).bytes != first.bytes);
  }
}

TEST_CASE("cuda: the GPU's digest is buffer_digest, and its comparison the host's" * doctest::skip(kNoGpu)) {
  ke::Device& dev = *gpu().device;
  const std::size_t n = 300007;
  auto a = dev.allocate(n * 4);
  auto b = dev.allocate(n * 4);
  REQUIRE(dev.fill_random(*a, ke::DType::f32, n, {ke::InputDist::Kind::normal, 0.0, 1.0}, 5));
  const auto host = fetch(*a, ke::DType::f32, n);
  for (std::size_t bytes :
       {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{13}, n * 4 - 3, n * 4}) {
    CAPTURE(bytes);
    std::uint64_t on_gpu = 0;
    REQUIRE(dev.digest(*a, bytes, on_gpu));
    CHECK(on_gpu == ke::buffer_digest(host.bytes.data(), bytes));
  }

  b->copy_from(*a);
  const ke::Tolerance tol{1e-3, 1e-3};
  ke::Comparison c;
  REQUIRE(dev.compare(*b, *a, ke::DType::f32, n, tol, c));
  CHECK(c.pass);
  // Two equally wrong elements and a smaller error: the first of the worst is reported, as on the host.
  auto got = host;
  got.set(200001, got.get(200001) + 1.0);
  got.set(70, got.get(70) + 1.0);
  got.set(5, got.get(5) + 0.5);
  b->upload(got.bytes.data(), got.size_bytes());
  REQUIRE(dev.compare(*b, *a, ke::DType::f32, n, tol, c));
  const ke::Comparison want = ke::eval::compare(got, host, tol);
  CHECK_FALSE(c.pass);
  CHECK(c.worst_index == want.worst_index);
  CHECK(c.excess == doctest::Approx(want.excess));
  CHECK(c.got == want.got);
  CHECK(c.expected == want.expected);
  // A NaN fails however loose the tolerance.
  got = host;
  const float nan = std::nanf("");
  std::memcpy(got.bytes.data() + 4 * 123456, &nan, 4);
  b->upload(got.bytes.data(), got.size_bytes());
  REQUIRE(dev.compare(*b, *a, ke::DType::f32, n, {1e30, 1e30}, c));
  CHECK_FALSE(c.pass);
  CHECK(c.worst_index == 123456);
  // Half precision goes through the same conversions as the host's.
  REQUIRE(dev.fill_random(*a, ke::DType::f16, n, {ke::InputDist::Kind::uniform, -2.0, 2.0}, 6));
  auto half = fetch(*a, ke::DType::f16, n);
  half.set(999, half.get(999) + 0.25);
  b->upload(half.bytes.data(), half.size_bytes());
  REQUIRE(dev.compare(*b, *a, ke::DType::f16, n, {1e-3, 0}, c));
  CHECK_FALSE(c.pass);
  CHECK(c.worst_index == 999);
  CHECK(c.got == half.get(999));
}
