// Triton kernels: the language in specs, the suite's Triton problems, the confinement library the compile
// helper uses, and Triton missing (everywhere); compiling, launching, compile errors as results and hostile
// Triton kernels through the worker (on a CUDA GPU with Triton, skipped elsewhere, saying why).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kernelevolve/device.hpp>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>
#include <kernelevolve/spec.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/script_process.hpp"
#include "support/gpu_under_test.hpp"
#include "triton/triton_compiler.hpp"

namespace ke = kernelevolve;
namespace fs = std::filesystem;

namespace {

// Whether Triton can be had here, and why not; asked once (it starts the helper, about a second).
struct TritonHere {
  bool ok = false;
  std::string reason;
};
const TritonHere& triton_here() {
  static const TritonHere here = [] {
    TritonHere t;
    try {
      ke::triton::Compiler::shared();
      t.ok = true;
    } catch (const ke::Error& e) {
      t.reason = e.what();
    }
    return t;
  }();
  return here;
}

const std::string kNoGpu = ke::testing::open_gpu("cuda:0").reason;
bool skip_gpu() { return !kNoGpu.empty() || !triton_here().ok; }
std::string why_skipped() {
  return !kNoGpu.empty() ? "no CUDA device: " + kNoGpu : "no Triton: " + triton_here().reason;
}

const char* kTwice = R"(
import triton
import triton.language as tl

@triton.jit
def twice(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y + offs, 2.0 * tl.load(x + offs, mask=mask), mask=mask)
)";

const char* kTwiceCuda = R"(
extern "C" __global__ void twice(const float* x, float* y, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = 2.0f * x[i];
}
)";

ke::Spec twice_spec() {
  ke::Spec s;
  s.name = "twice_triton";
  s.language = ke::Language::triton;
  s.entry = "twice";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = {{{"n", 1 << 20}}, {{"n", 1001}}};
  s.tolerance = {0, 0};
  s.reference.source = kTwiceCuda;
  s.reference.language = ke::Language::cuda;
  s.seed.source = kTwice;
  ke::LaunchRule rule;
  rule.grid[0] = ke::Expr::parse("cdiv(n, BLOCK)");
  rule.block[0] = ke::Expr::constant(256);  // the CUDA reference's
  s.launch = rule;
  s.tunables = {{"BLOCK", {1024, 256, 4096}}, {"num_warps", {4, 1, 8}}};
  s.cost_bytes = ke::Expr::parse("8 * n");
  s.validate();
  return s;
}

ke::Candidate candidate(const std::string& source, std::int64_t block = 1024, std::int64_t warps = 4) {
  return ke::Candidate{source, ke::Language::triton, {{"BLOCK", block}, {"num_warps", warps}}};
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("triton: a spec in Triton parses, validates and says its signature") {
  const ke::Spec s = twice_spec();
  CHECK(ke::parse_language("triton") == ke::Language::triton);
  CHECK(std::string(ke::to_string(ke::Language::triton)) == "triton");
  CHECK_FALSE(ke::is_cpu_language(ke::Language::triton));
  CHECK(ke::kernel_signature(s) == "@triton.jit\ndef twice(x, y, n, BLOCK: tl.constexpr)");
  CHECK(ke::triton_type(s.params[0]) == "*fp32");
  CHECK(ke::triton_type(s.params[2]) == "i64");
  // Round trip through the spec file's JSON, with no block given (a Triton kernel's is 32 x num_warps).
  std::string json = ke::to_json(s);
  const ke::Spec back = ke::parse_spec(json, "twice.json");
  CHECK(back.language == ke::Language::triton);
  CHECK(back.reference.language == ke::Language::cuda);
  json = std::regex_replace(json, std::regex(R"(, "block": \[[^\]]*\])"), "");
  CHECK_NOTHROW(ke::parse_spec(json, "twice.json"));
}

TEST_CASE("triton: num_warps and num_stages must be values Triton takes") {
  ke::Spec s = twice_spec();
  s.tunables["num_warps"] = {4, 3};
  CHECK_THROWS_WITH_AS(s.validate(), doctest::Contains("power of two"), ke::Error);
  s = twice_spec();
  s.tunables["num_stages"] = {0};
  CHECK_THROWS_WITH_AS(s.validate(), doctest::Contains("num_stages"), ke::Error);
}

TEST_CASE("triton: every Triton problem of the suite loads and matches its CUDA version") {
  int found = 0;
  for (const auto& level : {"level1", "level2"}) {
    for (const auto& dir : fs::directory_iterator(fs::path(KE_SOURCE_DIR) / "problems" / level)) {
      const fs::path spec_path = dir.path() / "triton.json";
      if (!fs::exists(spec_path)) continue;
      CAPTURE(spec_path.string());
      ++found;
      const ke::Spec t = ke::load_spec(spec_path.string());
      const ke::Spec c = ke::load_spec((dir.path() / "cuda.json").string());
      CHECK(t.language == ke::Language::triton);
      CHECK(t.reference.language == ke::Language::cuda);
      REQUIRE(t.params.size() == c.params.size());
      for (std::size_t i = 0; i < t.params.size(); ++i) CHECK(t.params[i].name == c.params[i].name);
      CHECK(t.workloads == c.workloads);
      // The seed's entry takes the spec's params in order, then the tunables that are not Triton's options.
      const std::string seed = t.seed.source;
      const std::regex def("@triton\\.jit\\s*\\ndef\\s+" + t.entry + "\\s*\\(([^)]*)\\)");
      std::smatch m;
      REQUIRE(std::regex_search(seed, m, def));
      std::vector<std::string> names;
      std::stringstream args(m[1].str());
      for (std::string a; std::getline(args, a, ',');) {
        a = std::regex_replace(a, std::regex(R"(:.*|\s)"), "");
        if (!a.empty()) names.push_back(a);
      }
      REQUIRE(names.size() >= t.params.size());
      for (std::size_t i = 0; i < t.params.size(); ++i) CHECK(names[i] == t.params[i].name);
      for (std::size_t i = t.params.size(); i < names.size(); ++i) CHECK(t.tunables.count(names[i]) == 1);
    }
  }
  CHECK(found >= 12);
}

TEST_CASE("triton: the confinement library confines a Python process, and names what it denied") {
#if defined(__SANITIZE_ADDRESS__)
  // An instrumented library cannot be loaded into an interpreter that was not started with its runtime.
  MESSAGE("skipped under AddressSanitizer: python3 cannot load the instrumented libkernelevolve_confine.so");
  return;
#endif
  const std::string library = fs::path(KE_CLI).parent_path() / "libkernelevolve_confine.so";
  REQUIRE(fs::exists(library));
  const fs::path target = fs::temp_directory_path() / ("ke_confine_test_" + std::to_string(::getpid()));
  fs::remove(target);
  // What the helper's forks do: load it with ctypes, confine, then run code that tries to write a file.
  const std::string script =
      "import ctypes, sys\n"
      "lib = ctypes.CDLL(sys.argv[1])\n"
      "lib.ke_confine.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]\n"
      "lib.ke_confine_denials.argtypes = [ctypes.c_char_p, ctypes.c_size_t]\n"
      "lib.ke_confine_denials.restype = ctypes.c_size_t\n"
      "report = ctypes.create_string_buffer(4096)\n"
      "assert lib.ke_confine(b'strict', 0, report, 4096) == 0\n"
      "try:\n"
      "    open(sys.argv[2], 'w')\n"
      "    print('written')\n"
      "except OSError as e:\n"
      "    print('denied', e.errno)\n"
      "out = ctypes.create_string_buffer(8192)\n"
      "lib.ke_confine_denials(out, 8192)\n"
      "print(out.value.decode().strip())\n"
      "print('report', report.value.decode())\n";
  std::string out;
  try {
    out = ke::run_script("/usr/bin/python3", script, {library, target.string()}, 60, "the confined script");
  } catch (const ke::Error& e) {
    FAIL(std::string(e.what()));
  }
  CAPTURE(out);
  CHECK_FALSE(fs::exists(target));
  if (out.find("seccomp") == std::string::npos) {
    MESSAGE("this machine has no seccomp filter to give: " << out);
    return;
  }
  CHECK(out.find("denied 1") != std::string::npos);  // EPERM
  CHECK(out.find(target.filename().string()) != std::string::npos);
}

TEST_CASE("triton: without Triton, the compiler says so, once, as the device's absence (exit 3)") {
  if (triton_here().ok) {
    MESSAGE("skipped: Triton is here (" << ke::triton::Compiler::shared()->version() << ")");
    return;
  }
  const std::string first = triton_here().reason;
  CHECK(first.find("Triton") != std::string::npos);
  try {
    ke::triton::Compiler::shared();
    FAIL("no Triton, yet a compiler");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::DeviceUnavailable);
    CHECK(e.exit_code() == 3);
    CHECK(std::string(e.what()) == first);  // remembered, not probed again
  }
}

TEST_CASE("triton: whether the GPU tests run") {
  if (skip_gpu()) MESSAGE("skipped: " << why_skipped());
  CHECK(true);
}

TEST_CASE("triton: a kernel compiles, launches with its scratch pointers, and matches the reference" *
          doctest::skip(skip_gpu())) {
  auto device = ke::open_device("cuda:0");
  ke::KernelSource ks;
  ks.source = kTwice;
  ks.language = ke::Language::triton;
  ks.entry = "twice";
  ks.params = twice_spec().params;
  ks.defines = {{"BLOCK", 512}, {"num_warps", 2}};
  const ke::CompileResult r = device->compile(ks);
  REQUIRE_MESSAGE(r.ok(), r.log);
  CHECK(device->compile(ks).cached);
  // Two scratch pointers follow the three arguments; block = 32 x num_warps, whatever the rule says.
  const std::size_t n = 100003;
  auto x = device->allocate(n * 4), y = device->allocate(n * 4);
  std::vector<float> host(n), got(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i) - 7.5f;
  x->upload(host.data(), n * 4);
  void* px = x->data();
  void* py = y->data();
  long long count = static_cast<long long>(n);
  void* args[] = {&px, &py, &count};
  ke::LaunchDims dims;
  dims.grid[0] = static_cast<std::int64_t>((n + 511) / 512);
  dims.block[0] = 1;  // overridden by the kernel's 64 threads
  const ke::LaunchResult lr = device->launch(*r.kernel, args, dims, true, true);
  REQUIRE_MESSAGE(lr.ok, lr.error);
  y->download(got.data(), n * 4);
  for (std::size_t i = 0; i < n; i += 997) CHECK(got[i] == 2.0f * host[i]);
  CHECK(got[n - 1] == 2.0f * host[n - 1]);
}

TEST_CASE("triton: compile errors are results with Triton's log" * doctest::skip(skip_gpu())) {
  ke::LocalEvaluator evaluator(twice_spec(), ke::open_device("cuda:0"));
  const ke::Evaluation syntax =
      evaluator.evaluate(candidate("import triton\n@triton.jit\ndef twice(x, y, n, BLOCK:\n"), 1);
  CHECK(syntax.status == ke::Status::compile_error);
  CHECK(syntax.compile_log.find("SyntaxError") != std::string::npos);
  const ke::Evaluation shape = evaluator.evaluate(
      candidate(replace(kTwice, "tl.arange(0, BLOCK)", "tl.arange(0, BLOCK + 1)")), 2);  // not a power of two
  CHECK(shape.status == ke::Status::compile_error);
  CHECK(shape.compile_log.find("arange") != std::string::npos);
  const ke::Evaluation args =
      evaluator.evaluate(candidate(replace(kTwice, "def twice(x, y, n,", "def twice(x, y,")), 3);
  CHECK(args.status == ke::Status::compile_error);
  CHECK(args.compile_log.find("the spec passes 3") != std::string::npos);
  const ke::Evaluation ok = evaluator.evaluate(candidate(kTwice), 4);
  CHECK_MESSAGE(ok.status == ke::Status::ok, ok.message);
}

TEST_CASE("triton: hostile kernels fail in the worker, and an honest one still passes after each" *
          doctest::skip(skip_gpu())) {
  ke::WorkerOptions options;
  options.timeout_s = 30;  // the first evaluation of a fresh worker starts Triton's helper
  options.eval.trials = 2;
  options.eval.max_reps = 10;
  options.eval.target_ms = 2;
  ke::WorkerEvaluator evaluator(twice_spec(), "cuda:0", options);
  std::uint64_t seed = 1;
  auto honest_ok = [&](const char* after) {
    CAPTURE(after);
    const ke::Evaluation e = evaluator.evaluate(candidate(kTwice), seed++);
    CHECK_MESSAGE(e.status == ke::Status::ok, e.message);
  };
  honest_ok("start");

  // A store far out of bounds: an illegal address, the worker replaced.
  const ke::Evaluation oob =
      evaluator.evaluate(candidate(replace(kTwice, "tl.store(y + offs,", "tl.store(y + offs + (1 << 40),")), seed++);
  CHECK(oob.status == ke::Status::crashed);
  honest_ok("out of bounds");

  // A kernel that never ends: the worker's time limit.
  const ke::Evaluation hang = evaluator.evaluate(
      candidate(replace(kTwice, "    mask = offs < n\n",
                        "    mask = offs < n\n    while tl.load(x, volatile=True) == tl.load(x, volatile=True):\n"
                        "        tl.store(y, 0.0)\n")),
      seed++);
  CHECK_MESSAGE(hang.status == ke::Status::timeout, hang.message);
  honest_ok("hang");

  // A wrong answer.
  const ke::Evaluation wrong = evaluator.evaluate(candidate(replace(kTwice, "2.0 *", "2.001 *")), seed++);
  CHECK(wrong.status == ke::Status::incorrect);
  honest_ok("wrong");

  // Code at the module's top level that runs a program: denied in the confined compile, named, nothing written.
  const fs::path marker = fs::temp_directory_path() / ("ke_triton_pwned_" + std::to_string(::getpid()));
  fs::remove(marker);
  const ke::Evaluation system = evaluator.evaluate(candidate("import os\nos.system('touch " + marker.string() +
                                                             "')\nopen('" + marker.string() + "', 'w')\n" + kTwice),
                                                   seed++);
  CAPTURE(system.message);
  CAPTURE(system.compile_log);
  CHECK(system.status == ke::Status::invalid);
  CHECK(system.message.find("denies") != std::string::npos);
  CHECK_FALSE(fs::exists(marker));
  honest_ok("system");
  // A file opened for writing at import: denied, and the call named.
  const ke::Evaluation write = evaluator.evaluate(candidate("open('" + marker.string() + "', 'w')\n" + kTwice), seed++);
  CAPTURE(write.message);
  CHECK(write.status == ke::Status::invalid);
  CHECK(write.message.find("openat") != std::string::npos);
  CHECK_FALSE(fs::exists(marker));
  honest_ok("write");
}

namespace {

// A bf16 kernel whose rows are N apart, N an i64 size: only where N is a multiple of 16 can Triton prove a row
// 16-byte aligned (and its mask constant over 8 elements), and load 8 elements at once.
const char* kRowsTriton = R"(
import triton
import triton.language as tl

@triton.jit
def rows(x, y, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    v = tl.load(x + offs, mask=mask).to(tl.float32)
    tl.store(y + offs, (v * 2.0).to(tl.bfloat16), mask=mask)
)";

const char* kRowsCuda = R"(
extern "C" __global__ void rows(const unsigned short* x, unsigned short* y, long long M, long long N) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < M * N; i += (long long)gridDim.x * blockDim.x)
    y[i] = (unsigned short)(__float_as_uint(2.0f * __uint_as_float((unsigned)x[i] << 16)) >> 16);
}
)";

std::vector<ke::Param> rows_params() {
  return {{"x", ke::DType::bf16, ke::Role::in, {"M", "N"}, 0},
          {"y", ke::DType::bf16, ke::Role::out, {"M", "N"}, 0},
          {"M", ke::DType::i64, ke::Role::size, {}, 0},
          {"N", ke::DType::i64, ke::Role::size, {}, 0}};
}

ke::KernelSource rows_kernel() {
  ke::KernelSource ks;
  ks.source = kRowsTriton;
  ks.language = ke::Language::triton;
  ks.entry = "rows";
  ks.params = rows_params();
  ks.defines = {{"BLOCK_M", 16}, {"BLOCK_N", 128}, {"num_warps", 4}};
  return ks;
}

}  // namespace

TEST_CASE("triton: an int param vouched a multiple of 16 is compiled as one: vector accesses the plain compile lacks") {
  if (!triton_here().ok) {  // Triton's compile to PTX needs no GPU
    MESSAGE("skipped: no Triton: " << triton_here().reason);
    return;
  }
  const ke::KernelSource ks = rows_kernel();
  ke::triton::Target target;
  target.arch = "90";
  std::string log;
  const ke::triton::Compiled plain = ke::triton::Compiler::shared()->compile(ks, target, log);
  REQUIRE_MESSAGE(plain.ok, log);
  const ke::triton::Compiled divisible = ke::triton::Compiler::shared()->compile(ks, target, log, {3});  // N
  REQUIRE_MESSAGE(divisible.ok, log);
  const std::regex vector_access(R"((ld|st)\.global\S*\.v[248]\.)");
  CHECK_MESSAGE(std::regex_search(divisible.image, vector_access), "no vector load or store where N % 16 == 0");
  CHECK_FALSE_MESSAGE(std::regex_search(plain.image, vector_access), "a vector access where nothing is known of N");
  // A param that is not an integer cannot be vouched for: the request is refused, as a compile error.
  const ke::triton::Compiled pointer = ke::triton::Compiler::shared()->compile(ks, target, log, {0});
  CHECK_FALSE(pointer.ok);
  CHECK(pointer.error.find("not an integer") != std::string::npos);
}

TEST_CASE("triton: a kernel whose row stride is an i64 size is right at sizes that are multiples of 16 and at others" *
          doctest::skip(skip_gpu())) {
  auto device = ke::open_device("cuda:0");
  const ke::CompileResult r = device->compile(rows_kernel());
  REQUIRE_MESSAGE(r.ok(), r.log);
  // N = 1024 and 8192 run the variant that assumes N (and M = 64) a multiple of 16; 1001 and 8200 (a multiple of 8,
  // rows 16 bytes apart only every other row) the plain kernel: a variant there would fault or skip elements.
  for (const std::pair<long long, long long>& size : std::vector<std::pair<long long, long long>>{
           {64, 1024}, {33, 1001}, {8, 8200}, {17, 8192}, {64, 1024}, {33, 1001}}) {
    const long long m = size.first, n = size.second;
    CAPTURE(m);
    CAPTURE(n);
    const auto count = static_cast<std::size_t>(m * n);
    std::vector<std::uint16_t> host(count), got(count, 0);
    for (std::size_t i = 0; i < count; ++i) {
      const float f = static_cast<float>(static_cast<int>(i % 97) - 48);  // exact in bf16, as is twice it
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      host[i] = static_cast<std::uint16_t>(bits >> 16);
    }
    auto x = device->allocate(count * 2), y = device->allocate(count * 2);
    x->upload(host.data(), count * 2);
    const std::uint16_t poison = 0x7fc1;  // a NaN: an element left unwritten shows
    y->fill(&poison, 2);
    void* px = x->data();
    void* py = y->data();
    long long mm = m, nn = n;
    void* args[] = {&px, &py, &mm, &nn};
    ke::LaunchDims dims;
    dims.grid[0] = (m + 15) / 16;
    dims.grid[1] = (n + 127) / 128;
    const ke::LaunchResult lr = device->launch(*r.kernel, args, dims);
    REQUIRE_MESSAGE(lr.ok, lr.error);
    y->download(got.data(), count * 2);
    std::size_t wrong = 0, first = count;
    for (std::size_t i = 0; i < count; ++i) {
      std::uint32_t bits = static_cast<std::uint32_t>(host[i]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      f *= 2.0f;
      std::memcpy(&bits, &f, 4);
      if (got[i] != static_cast<std::uint16_t>(bits >> 16)) {
        ++wrong;
        first = std::min(first, i);
      }
    }
    CHECK_MESSAGE(wrong == 0, wrong << " wrong elements, the first at " << first);
  }
  CHECK(device->healthy());
}

TEST_CASE("triton: the evaluator passes a bf16 kernel with a size stride at workloads divisible by 16 and not" *
          doctest::skip(skip_gpu())) {
  ke::Spec s;
  s.name = "rows_bf16_triton";
  s.language = ke::Language::triton;
  s.entry = "rows";
  s.params = rows_params();
  s.workloads = {{{"M", 64}, {"N", 1024}}, {{"M", 33}, {"N", 1001}}, {{"M", 8}, {"N", 8200}}};
  s.tolerance = {0, 0};
  s.reference.source = kRowsCuda;
  s.reference.language = ke::Language::cuda;
  s.seed.source = kRowsTriton;
  ke::LaunchRule rule;
  rule.grid[0] = ke::Expr::parse("cdiv(M, BLOCK_M)");
  rule.grid[1] = ke::Expr::parse("cdiv(N, BLOCK_N)");
  rule.block[0] = ke::Expr::constant(256);  // the CUDA reference's
  s.launch = rule;
  s.tunables = {{"BLOCK_M", {16}}, {"BLOCK_N", {128}}, {"num_warps", {4}}};
  s.validate();
  ke::LocalEvaluator evaluator(s, ke::open_device("cuda:0"));
  const ke::Evaluation e = evaluator.evaluate(
      ke::Candidate{kRowsTriton, ke::Language::triton, {{"BLOCK_M", 16}, {"BLOCK_N", 128}, {"num_warps", 4}}}, 5);
  CHECK_MESSAGE(e.status == ke::Status::ok, e.message);
  CHECK(e.timings.size() == 3);
}
