// The host cost of a program's plan (issue 28): two kernels with a temporary between them against the same
// work fused into one kernel, through the evaluator's timing path (program::ProgramLaunch: the temporaries
// poisoned once when it is made, then Device::launch_steps per call, timed), on an empty workload (n = 1: the launches'
// cost alone) and a real one (n = 16M floats). Each benchmark reports the wall time per timed call and the device's own
// time (events on a GPU) as `device_us`; the two-kernel plan's wall time over the fused one's, on the empty workload,
// is what each extra launch costs the host.
//
//   bench/bench_program [--benchmark_filter=...]      KE_BENCH_DEVICE=cuda (default) or cpu
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernelevolve/device.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/program.hpp"
#include "program/program_run.hpp"

namespace ke = kernelevolve;

namespace {

std::string device_id() {
  const char* id = std::getenv("KE_BENCH_DEVICE");
  return id && *id ? id : "cuda";
}

bool gpu() { return device_id() != "cpu"; }

std::string source(bool two) {
  const std::string plan = two ? R"P(/* kernelevolve-plan
{"temporaries": [{"name": "t", "dtype": "f32", "shape": ["n"]}],
 "steps": [{"kernel": "scale", "grid": ["cdiv(n, 256)"], "block": [256], "args": ["x", "t", "n"]},
           {"kernel": "shift", "grid": ["cdiv(n, 256)"], "block": [256], "args": ["t", "y", "n"]}]}
*/
)P"
                               : R"P(/* kernelevolve-plan
{"steps": [{"kernel": "fused", "grid": ["cdiv(n, 256)"], "block": [256], "args": ["x", "y", "n"]}]}
*/
)P";
  if (gpu()) {
    return plan + R"(
extern "C" __global__ void scale(const float* x, float* t, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) t[i] = 2.0f * x[i];
}
extern "C" __global__ void shift(const float* t, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = t[i] + 1.0f;
}
extern "C" __global__ void fused(const float* x, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}
)";
  }
  std::string cpu_plan = plan;
  // A CPU step is a call: no grid.
  for (const char* launch : {R"P(, "grid": ["cdiv(n, 256)"], "block": [256])P"}) {
    for (std::size_t at; (at = cpu_plan.find(launch)) != std::string::npos;)
      cpu_plan.erase(at, std::string(launch).size());
  }
  return cpu_plan + R"(
#include <stdint.h>
void scale(const float* x, float* t, int64_t n) { for (int64_t i = 0; i < n; ++i) t[i] = 2.0f * x[i]; }
void shift(const float* t, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = t[i] + 1.0f; }
void fused(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i] + 1.0f; }
)";
}

ke::Spec spec() {
  ke::Spec s;
  s.name = "scale_shift";
  s.language = gpu() ? ke::Language::cuda : ke::Language::c;
  s.entry = "fused";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = {{{"n", 1}}};
  s.reference.source = "x";
  s.seed.source = "x";
  if (gpu()) {
    ke::LaunchRule rule;
    rule.grid[0] = ke::Expr::parse("cdiv(n, 256)");
    rule.block[0] = ke::Expr::parse("256");
    s.launch = rule;
  }
  return s;
}

void plan(benchmark::State& state, bool two) {
  std::shared_ptr<ke::Device> device;
  try {
    device = ke::open_device(device_id());
  } catch (const ke::Error& e) {
    state.SkipWithError(e.what());
    return;
  }
  const ke::Spec s = spec();
  const ke::Candidate candidate{source(two), s.language, {}};
  const ke::program::CompiledProgram program =
      ke::program::compile(*device, s, candidate, ke::plan_of(s, candidate.source, candidate.language));
  if (!program.ok()) {
    state.SkipWithError(("does not compile: " + program.log).c_str());
    return;
  }
  const std::int64_t n = state.range(0);
  const ke::BoundPlan bound = ke::bind_plan(program.plan, s, {{"n", n}}, {});
  auto x = device->allocate(static_cast<std::size_t>(n) * 4), y = device->allocate(static_cast<std::size_t>(n) * 4);
  void* xp = x->data();
  void* yp = y->data();
  std::int64_t nv = n;
  void* args[] = {&xp, &yp, &nv};
  ke::program::ProgramLaunch run(*device, program, bound, args,
                                 {static_cast<std::size_t>(n) * 4, static_cast<std::size_t>(n) * 4, 0});
  double device_us = 0;
  for (auto _ : state) {
    const ke::LaunchResult r = run.run(/*timed=*/true, /*flush_cache=*/false);
    if (!r.ok) {
      state.SkipWithError(r.error.c_str());
      return;
    }
    device_us += r.time_us;
  }
  state.counters["device_us"] = benchmark::Counter(device_us, benchmark::Counter::kAvgIterations);
  state.SetLabel(two ? "two kernels, a temporary" : "one fused kernel");
}

void BM_Fused(benchmark::State& state) { plan(state, false); }
void BM_TwoKernels(benchmark::State& state) { plan(state, true); }

}  // namespace

BENCHMARK(BM_Fused)->Arg(1)->Arg(16 << 20)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_TwoKernels)->Arg(1)->Arg(16 << 20)->Unit(benchmark::kMicrosecond)->UseRealTime();

BENCHMARK_MAIN();
