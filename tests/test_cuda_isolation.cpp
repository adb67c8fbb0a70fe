// Hostile CUDA kernels through the worker evaluator on cuda:0: an illegal address, a hang and a launch
// that fails each land in a failure status, never in the host, and an honest kernel evaluated after each
// in the same evaluator is still ok. Skipped (and says so) without a CUDA device.
#include <doctest/doctest.h>
#include <unistd.h>

#include <kernelevolve/counters.hpp>
#include <kernelevolve/device.hpp>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <kernelevolve/spec.hpp>
#include <string>
#include <vector>

#include "support/gpu_under_test.hpp"

namespace ke = kernelevolve;

namespace {

// Opened only to learn whether it opens: the candidates run in worker processes of their own.
const std::string kMissing = ke::testing::open_gpu("cuda:0").reason;
const bool kNoGpu = !kMissing.empty();

const char* kHonest = R"(
extern "C" __global__ void twice(const float* x, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
)";

ke::Spec twice_spec() {
  ke::Spec s;
  s.name = "twice_cuda";
  s.language = ke::Language::cuda;
  s.entry = "twice";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = {{{"n", 1 << 20}}, {{"n", 1001}}};
  s.tolerance = {0, 0};
  s.reference.source = kHonest;
  s.seed.source = kHonest;
  ke::LaunchRule rule;
  rule.grid[0] = ke::Expr::parse("cdiv(n, THREADS)");
  rule.block[0] = ke::Expr::parse("THREADS");
  s.launch = rule;
  s.tunables = {{"THREADS", {256, 128, 4096}}};
  s.cost_bytes = ke::Expr::parse("8 * n");
  s.validate();
  return s;
}

ke::Candidate candidate(const std::string& source, std::int64_t threads = 256) {
  return ke::Candidate{source, ke::Language::cuda, {{"THREADS", threads}}};
}

}  // namespace

TEST_CASE("cuda isolation: whether it runs") {
  if (kNoGpu) MESSAGE("skipped: no CUDA device: " << kMissing);
  CHECK(true);
}

TEST_CASE("cuda isolation: hostile kernels fail in the worker, and an honest one still passes after each" *
          doctest::skip(kNoGpu)) {
  ke::WorkerOptions options;
  options.timeout_s = 20;  // generous: the first evaluation of each fresh worker compiles with NVRTC
  options.eval.trials = 2;
  options.eval.max_reps = 10;
  options.eval.target_ms = 2;
  ke::WorkerEvaluator evaluator(twice_spec(), "cuda:0", options);
  std::uint64_t seed = 1;
  auto honest_ok = [&](const char* after) {
    CAPTURE(after);
    const ke::Evaluation e = evaluator.evaluate(candidate(kHonest), seed++);
    CHECK_MESSAGE(e.status == ke::Status::ok, e.message);
  };
  honest_ok("start");
  const int started = evaluator.workers_started();

  SUBCASE("an illegal address") {
    const ke::Evaluation e = evaluator.evaluate(candidate(R"(
extern "C" __global__ void twice(const float* x, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i + (1ll << 40)] = 2.0f * x[i];  // a terabyte past the buffer
}
)"),
                                                seed++);
    MESSAGE("illegal address: " << std::string(ke::to_string(e.status)) << ": " << e.message);
    CHECK((e.status == ke::Status::crashed || e.status == ke::Status::invalid));
    CHECK(e.message.find("ILLEGAL_ADDRESS") != std::string::npos);
    honest_ok("an illegal address");
    CHECK(evaluator.workers_started() > started);  // the poisoned worker was replaced
  }

  SUBCASE("a hang") {
    ke::WorkerOptions short_limit = options;
    short_limit.timeout_s = 6;
    ke::WorkerEvaluator hanging(twice_spec(), "cuda:0", short_limit);
    const auto t0 = std::chrono::steady_clock::now();
    const ke::Evaluation e = hanging.evaluate(candidate(R"(
extern "C" __global__ void twice(const float* x, float* y, long long n) {
  long long start = clock64();
  while (clock64() - start >= 0) {}  // never ends: clock64 is volatile, so the loop stays
  y[0] = x[0];
}
)"),
                                              seed++);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE("hang: " << std::string(ke::to_string(e.status)) << " after " << waited << " s: " << e.message);
    CHECK(e.status == ke::Status::timeout);
    CHECK(waited < 30);
    const ke::Evaluation after = hanging.evaluate(candidate(kHonest), seed++);
    CHECK_MESSAGE(after.status == ke::Status::ok, after.message);
    honest_ok("a hang (in another evaluator)");
  }

  SUBCASE("a launch that fails") {
    const ke::Evaluation e = evaluator.evaluate(candidate(kHonest, 4096), seed++);  // 4096 threads per block
    MESSAGE("launch failure: " << std::string(ke::to_string(e.status)) << ": " << e.message);
    CHECK(e.status != ke::Status::ok);
    CHECK(e.status != ke::Status::pending);
    CHECK(e.message.find("4096") != std::string::npos);
    honest_ok("a failed launch");
  }

  SUBCASE("a kernel that traps") {
    const ke::Evaluation e = evaluator.evaluate(candidate(R"(
extern "C" __global__ void twice(const float* x, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 12345) __trap();
  if (i < n) y[i] = 2.0f * x[i];
}
)"),
                                                seed++);
    MESSAGE("trap: " << std::string(ke::to_string(e.status)) << ": " << e.message);
    CHECK(e.status != ke::Status::ok);
    honest_ok("a trap");
  }
}

// The sandbox on a GPU worker (issue 20): once cuda:0 is open, the worker confines itself (strict: the
// seccomp allow-list with the driver's allowances; basic: the deny-list). Honest kernels, new sources
// (NVRTC after the filter) and repeated evaluations must pass in every mode; a call the driver needs
// and the filter lacks would make the node `invalid` with the call named in its message.
TEST_CASE("cuda sandbox: honest kernels pass in a confined GPU worker, in every mode" * doctest::skip(kNoGpu)) {
  for (const ke::SandboxMode mode : {ke::SandboxMode::strict, ke::SandboxMode::basic, ke::SandboxMode::off}) {
    CAPTURE(ke::to_string(mode));
    ke::WorkerOptions options;
    options.sandbox = mode;
    options.timeout_s = 60;
    options.eval.trials = 2;
    options.eval.max_reps = 10;
    options.eval.target_ms = 2;
    ke::WorkerEvaluator evaluator(twice_spec(), "cuda:0", options);
    std::uint64_t seed = 1;
    for (int i = 0; i < 3; ++i) {
      // A source new to this process and to NVRTC's cache: NVRTC compiles it after the filter is on, and
      // its cache writes are denied; the driver loads the module. None of that is the candidate's doing.
      const std::string source =
          std::string(kHonest) + "__device__ long long ke_variant = " + std::to_string(i + 1) +
          std::to_string(::getpid()) +
          std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000000) + "LL;\n";
      const ke::Evaluation e = evaluator.evaluate(candidate(source, i == 1 ? 128 : 256), seed++);
      CHECK_MESSAGE(e.status == ke::Status::ok, ke::to_string(e.status) << ": " << e.message);
      CHECK(e.message.find("sandbox") == std::string::npos);
    }
    CHECK(evaluator.workers_started() == 1);  // no call denied: no worker was replaced
  }
}

// Trust (issue 15): a kernel that keeps row sums in __device__ globals, which outlive a launch, and
// answers from them when a row's sample comes back. Every timed call sees inputs no earlier call saw,
// so it gains nothing: it must time no faster than the honest kernel it copies.
TEST_CASE("cuda memoizing kernel times no faster than the honest kernel it copies" * doctest::skip(kNoGpu)) {
  const ke::Spec spec = ke::load_spec(std::string(KE_SOURCE_DIR) + "/problems/level1/row_sum/cuda.json");
  auto read = [](const std::string& name) {
    std::ifstream in(std::string(KE_FIXTURES) + "/memo/" + name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const ke::Candidate honest{read("row_sum_honest.cu"), ke::Language::cuda, spec.seed_tunables()};
  const ke::Candidate memo{read("row_sum_memo.cu"), ke::Language::cuda, spec.seed_tunables()};
  REQUIRE(honest.source.size() > 100);
  REQUIRE(memo.source.size() > 100);
  ke::WorkerOptions options;
  options.timeout_s = 120;
  ke::WorkerEvaluator evaluator(spec, "cuda:0", options);
  std::vector<double> honest_us(spec.workloads.size(), 1e300), memo_us(spec.workloads.size(), 1e300);
  std::vector<double> spread(spec.workloads.size(), 0);
  for (int round = 0; round < 2; ++round) {
    const ke::Evaluation h = evaluator.evaluate(honest, 10 + round);
    const ke::Evaluation m = evaluator.evaluate(memo, 20 + round);
    REQUIRE_MESSAGE(h.status == ke::Status::ok, h.message);
    REQUIRE_MESSAGE(m.status == ke::Status::ok, m.message);
    for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
      honest_us[w] = std::min(honest_us[w], h.timings[w].median_us);
      memo_us[w] = std::min(memo_us[w], m.timings[w].median_us);
      spread[w] = std::max(spread[w], h.timings[w].mad_us);
    }
  }
  for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
    MESSAGE("workload " << w << ": honest " << honest_us[w] << " us, memoizing " << memo_us[w] << " us");
    // A remembered sum is a copy of the output alone: many times faster. Noise of 2x passes (issue 27: a
    // bound at 0.85 was a figure of the machine's quiet), a cheat still fails (tests/test_trust.cpp alike).
    CHECK(memo_us[w] >= honest_us[w] * 0.5 - 3 * spread[w]);
  }
}

TEST_CASE("cuda hardware counters: Nsight Compute reads the candidate's launch, not the reference's of the same name" *
          doctest::skip(kNoGpu)) {
  const std::string ncu = ke::find_nsight_compute();
  if (ncu.empty()) {
    MESSAGE("skipped: no Nsight Compute (ncu) on this machine ($KE_NCU, PATH, /usr/local/cuda/bin/ncu)");
    return;
  }
  // The reference computes the same output slowly (thousands of sines per element on the first workload):
  // a profile of its launch would show a duration in milliseconds, the candidate's is microseconds.
  ke::Spec spec = twice_spec();
  spec.reference.source = R"(
extern "C" __global__ void twice(const float* x, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0;
  for (long long k = 0; k < n / 256; ++k) acc += __sinf(acc + (float)k);
  y[i] = 2.0f * x[i] + (acc == 12345.0f ? 1.0f : 0.0f);
}
)";
  ke::WorkerOptions options;
  options.timeout_s = 120;
  options.nsight_compute = ncu;
  ke::WorkerEvaluator evaluator(spec, "cuda:0", options);
  const ke::Evaluation plain = evaluator.evaluate(candidate(kHonest), 3);
  REQUIRE_MESSAGE(plain.status == ke::Status::ok, plain.message);
  const ke::CounterResult r = evaluator.hardware_counters(candidate(kHonest), 3);
  REQUIRE_MESSAGE(r.ok(), r.error);
  std::string all;
  for (const auto& [name, value] : r.counters) all += name + "=" + std::to_string(value) + " ";
  MESSAGE("counters in " << r.seconds << " s: " << all);
  REQUIRE(r.counters.count("hw_duration_ns"));
  CHECK(r.counters.at("hw_duration_ns") < 200000);  // the reference takes milliseconds
  CHECK(r.counters.at("hw_dram_pct") > 0);
  CHECK(r.counters.at("hw_dram_pct") <= 100);
  CHECK(r.counters.at("hw_achieved_occupancy_pct") > 0);
  CHECK(r.counters.at("hw_achieved_occupancy_pct") <= 100);
  CHECK(std::any_of(r.counters.begin(), r.counters.end(),
                    [](const auto& c) { return c.first.rfind("hw_stall_", 0) == 0; }));
  // A candidate that does not compile: an error that says the profile had no launch, not a crash.
  const ke::CounterResult bad = evaluator.hardware_counters(candidate("this is not CUDA"), 4);
  CHECK_FALSE(bad.ok());
  MESSAGE("a broken candidate: " << bad.error);
}

TEST_CASE("cuda hardware counters of a program: one launch of each kernel step, as that step's counters" *
          doctest::skip(kNoGpu)) {
  const std::string ncu = ke::find_nsight_compute();
  if (ncu.empty()) {
    MESSAGE("skipped: no Nsight Compute (ncu) on this machine ($KE_NCU, PATH, /usr/local/cuda/bin/ncu)");
    return;
  }
  // y = 2x in two kernels through a temporary: the second reads what the first wrote.
  const char* two_steps = R"P(/* kernelevolve-plan
{"temporaries": [{"name": "t", "dtype": "f32", "shape": ["n"]}],
 "steps": [{"kernel": "double_into", "grid": ["cdiv(n, THREADS)"], "block": ["THREADS"], "args": ["x", "t", "n"]},
           {"kernel": "copy_out", "grid": ["cdiv(n, THREADS)"], "block": ["THREADS"], "args": ["t", "y", "n"]}]}
*/
extern "C" __global__ void double_into(const float* x, float* t, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) t[i] = 2.0f * x[i];
}
extern "C" __global__ void copy_out(const float* t, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = t[i];
}
)P";
  ke::WorkerOptions options;
  options.timeout_s = 120;
  options.nsight_compute = ncu;
  ke::WorkerEvaluator evaluator(twice_spec(), "cuda:0", options);
  const ke::Evaluation plain = evaluator.evaluate(candidate(two_steps), 5);
  REQUIRE_MESSAGE(plain.status == ke::Status::ok, plain.message);
  REQUIRE(plain.resources.count("steps"));
  CHECK(plain.resources.at("steps") == 2);
  const ke::CounterResult r = evaluator.hardware_counters(candidate(two_steps), 5);
  REQUIRE_MESSAGE(r.ok(), r.error);
  std::string all;
  for (const auto& [name, value] : r.counters) all += name + "=" + std::to_string(value) + " ";
  MESSAGE("counters in " << r.seconds << " s: " << all);
  REQUIRE(r.counters.count("step1.hw_duration_ns"));
  REQUIRE(r.counters.count("step2.hw_duration_ns"));
  CHECK(r.counters.at("step1.hw_duration_ns") > 0);
  CHECK(r.counters.at("step2.hw_duration_ns") > 0);
  CHECK(r.counters.count("step1.hw_dram_pct"));
  CHECK(r.counters.count("step2.hw_dram_pct"));
  // The top level is the longer kernel's.
  REQUIRE(r.counters.count("hw_duration_ns"));
  CHECK(r.counters.at("hw_duration_ns") ==
        std::max(r.counters.at("step1.hw_duration_ns"), r.counters.at("step2.hw_duration_ns")));
}
