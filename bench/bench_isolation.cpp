// What isolation costs: evaluating one tiny candidate in-process (LocalEvaluator) against in a
// persistent worker process (WorkerEvaluator), with the same fitness protocol and options.
// Compare BM_Worker with BM_InProcess (and the NewSource pair) from the same run.
// And what the sandbox costs (issue 20): each worker benchmark runs with the sandbox off, basic and
// strict (the argument: 0 off, 1 basic, 2 strict); compare the three rows of one benchmark. The
// BM_Sandbox* rows time the confinement steps alone, in a forked child, against a bare fork.
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>

#include <kernelevolve/kernelevolve.hpp>

namespace ke = kernelevolve;

namespace {

ke::Spec tiny_spec() {
  ke::Spec s;
  s.name = "tiny";
  s.language = ke::Language::c;
  s.entry = "axpy";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = {{{"n", 1024}}};
  s.reference.source =
      "#include <stdint.h>\nvoid axpy(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i] + 1.0f; }\n";
  s.seed.source = s.reference.source;
  s.validate();
  return s;
}

ke::EvalOptions quick() {
  ke::EvalOptions o;
  o.trials = 2;
  o.min_reps = 5;
  o.max_reps = 5;
  o.target_ms = 0;
  return o;
}

// Each iteration evaluates a candidate the device has cached (same source), so the figure is the
// protocol and transport, not the compiler.
ke::Candidate candidate(const ke::Spec& s) { return {s.seed.source, ke::Language::c, {}}; }

void BM_InProcess(benchmark::State& state) {
  const auto spec = tiny_spec();
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), quick());
  std::uint64_t seed = 0;
  evaluator.evaluate(candidate(spec), seed++);
  for (auto _ : state) benchmark::DoNotOptimize(evaluator.evaluate(candidate(spec), seed++));
}

ke::SandboxMode mode_of(const benchmark::State& state) {
  static const ke::SandboxMode modes[] = {ke::SandboxMode::off, ke::SandboxMode::basic, ke::SandboxMode::strict};
  return modes[state.range(0)];
}

// A worker benchmark's options: the sandbox mode of its argument (named in the row's label), quick trials.
ke::WorkerOptions worker_options(benchmark::State& state) {
  ke::WorkerOptions options;
  options.sandbox = mode_of(state);
  state.SetLabel(ke::to_string(options.sandbox));
  options.eval = quick();
  return options;
}

void BM_Worker(benchmark::State& state) {
  const auto spec = tiny_spec();
  const ke::WorkerOptions options = worker_options(state);
  ke::WorkerEvaluator evaluator(spec, "cpu", options);
  std::uint64_t seed = 0;
  evaluator.evaluate(candidate(spec), seed++);
  for (auto _ : state) benchmark::DoNotOptimize(evaluator.evaluate(candidate(spec), seed++));
}

// The first evaluation of a new source: compile and JIT included, in-process and in a worker.
void BM_InProcessNewSource(benchmark::State& state) {
  const auto spec = tiny_spec();
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), quick());
  int k = 0;
  for (auto _ : state) {
    ke::Candidate c = candidate(spec);
    c.source += "// variant " + std::to_string(k++) + "\n";
    benchmark::DoNotOptimize(evaluator.evaluate(c, static_cast<std::uint64_t>(k)));
  }
}

void BM_WorkerNewSource(benchmark::State& state) {
  const auto spec = tiny_spec();
  const ke::WorkerOptions options = worker_options(state);
  ke::WorkerEvaluator evaluator(spec, "cpu", options);
  int k = 0;
  for (auto _ : state) {
    ke::Candidate c = candidate(spec);
    c.source += "// variant " + std::to_string(k++) + "\n";
    benchmark::DoNotOptimize(evaluator.evaluate(c, static_cast<std::uint64_t>(k)));
  }
}

// A worker killed by its candidate and replaced: the cost of one crash.
void BM_WorkerCrashAndRestart(benchmark::State& state) {
  const auto spec = tiny_spec();
  const ke::WorkerOptions options = worker_options(state);
  ke::WorkerEvaluator evaluator(spec, "cpu", options);
  const ke::Candidate crash{
      "#include <stdint.h>\n#include <stdlib.h>\nvoid axpy(const float* x, float* y, int64_t n) { abort(); }\n",
      ke::Language::c,
      {}};
  std::uint64_t seed = 0;
  for (auto _ : state) benchmark::DoNotOptimize(evaluator.evaluate(crash, seed++));
}

// A worker started until it says it is ready (device opened, evaluator built, sandbox entered), then
// told to go: the cost of a worker's start.
void BM_WorkerStart(benchmark::State& state) {
  const auto spec = tiny_spec();
  const ke::WorkerOptions options = worker_options(state);
  for (auto _ : state) ke::WorkerEvaluator evaluator(spec, "cpu", options);
}

// The confinement steps alone, each in a fresh forked child (as a worker or helper would take them
// once): 0 a bare fork and exit; 1 the namespaces; 2 the filter, rlimits and no new privileges;
// 3 both. The sandbox's share of a start is a row minus row 0.
void BM_SandboxSteps(benchmark::State& state) {
  const int steps = static_cast<int>(state.range(0));
  static const char* const names[] = {"fork only", "namespaces", "seccomp + rlimits", "namespaces + seccomp"};
  state.SetLabel(names[steps]);
  for (auto _ : state) {
    const pid_t child = ::fork();
    if (child == 0) {
      ke::SandboxReport r;
      if (steps & 1) r = ke::enter_sandbox_namespaces(ke::SandboxMode::strict);
      if (steps & 2) r = ke::apply_sandbox(ke::SandboxMode::strict, {}, r);
      ::_exit(r.missing.empty() ? 0 : 1);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) state.SkipWithError("a confinement step failed");
  }
}

}  // namespace

// Wall time throughout: the worker's work happens in another process, invisible to this one's CPU clock.
BENCHMARK(BM_InProcess)->Unit(benchmark::kMicrosecond)->MinTime(1.0)->UseRealTime();
BENCHMARK(BM_Worker)->Unit(benchmark::kMicrosecond)->MinTime(1.0)->UseRealTime()->Arg(0)->Arg(1)->Arg(2);
BENCHMARK(BM_InProcessNewSource)->Unit(benchmark::kMillisecond)->Iterations(20)->UseRealTime();
BENCHMARK(BM_WorkerNewSource)->Unit(benchmark::kMillisecond)->Iterations(20)->UseRealTime()->Arg(0)->Arg(1)->Arg(2);
BENCHMARK(BM_WorkerCrashAndRestart)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10)
    ->UseRealTime()
    ->Arg(0)
    ->Arg(1)
    ->Arg(2);
BENCHMARK(BM_WorkerStart)->Unit(benchmark::kMillisecond)->Iterations(10)->UseRealTime()->Arg(0)->Arg(1)->Arg(2);
BENCHMARK(BM_SandboxSteps)->Unit(benchmark::kMillisecond)->MinTime(0.5)->UseRealTime()->DenseRange(0, 3);

namespace {

// The same on a GPU worker (cuda:0), where the sandbox's filter carries the driver's allowances: a
// worker's start (device opened, verification kernels compiled lazily) and a cached candidate. Skipped
// without a CUDA device.
ke::Spec tiny_cuda_spec() {
  ke::Spec s = tiny_spec();
  s.name = "tiny_cuda";
  s.language = ke::Language::cuda;
  s.reference.source =
      "extern \"C\" __global__ void axpy(const float* x, float* y, long long n) { long long i = (long long)blockIdx.x * "
      "blockDim.x + threadIdx.x; if (i < n) y[i] = 3.0f * x[i] + 1.0f; }\n";
  s.seed.source = s.reference.source;
  ke::LaunchRule rule;
  rule.grid[0] = ke::Expr::parse("cdiv(n, 256)");
  rule.block[0] = ke::Expr::parse("256");
  s.launch = rule;
  s.validate();
  return s;
}

bool have_cuda() {
  static const bool present = [] {
    try {
      ke::open_device("cuda:0");
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }();
  return present;
}

void BM_GpuWorkerStart(benchmark::State& state) {
  if (!have_cuda()) return state.SkipWithError("no CUDA device");
  const auto spec = tiny_cuda_spec();
  const ke::WorkerOptions options = worker_options(state);
  // Start only: the worker's end (closing its channel, reaping it) is outside the timed region, and timed
  // by BM_GpuWorkerEnd.
  for (auto _ : state) {
    auto evaluator = std::make_unique<ke::WorkerEvaluator>(spec, "cuda:0", options);
    state.PauseTiming();
    evaluator.reset();
    state.ResumeTiming();
  }
}

// A GPU worker's start and its first evaluation (the verification kernels and the candidate compiled,
// loaded, run): what a restart after a crash costs, and where the driver's compute cache (off in confined
// GPU workers) would show.
void BM_GpuWorkerFirstEvaluation(benchmark::State& state) {
  if (!have_cuda()) return state.SkipWithError("no CUDA device");
  const auto spec = tiny_cuda_spec();
  const ke::WorkerOptions options = worker_options(state);
  const ke::Candidate c{spec.seed.source, ke::Language::cuda, {}};
  std::uint64_t seed = 0;
  for (auto _ : state) {
    auto evaluator = std::make_unique<ke::WorkerEvaluator>(spec, "cuda:0", options);
    const ke::Evaluation e = evaluator->evaluate(c, seed++);
    if (e.status != ke::Status::ok) return state.SkipWithError(("the candidate is " + e.message).c_str());
    state.PauseTiming();
    evaluator.reset();
    state.ResumeTiming();
  }
}

// A GPU worker's end: the host closes its channel and reaps it (it waits up to 200 ms for the exit
// before it kills).
void BM_GpuWorkerEnd(benchmark::State& state) {
  if (!have_cuda()) return state.SkipWithError("no CUDA device");
  const auto spec = tiny_cuda_spec();
  const ke::WorkerOptions options = worker_options(state);
  for (auto _ : state) {
    state.PauseTiming();
    auto evaluator = std::make_unique<ke::WorkerEvaluator>(spec, "cuda:0", options);
    state.ResumeTiming();
    evaluator.reset();
  }
}

void BM_GpuWorker(benchmark::State& state) {
  if (!have_cuda()) return state.SkipWithError("no CUDA device");
  const auto spec = tiny_cuda_spec();
  const ke::WorkerOptions options = worker_options(state);
  ke::WorkerEvaluator evaluator(spec, "cuda:0", options);
  const ke::Candidate c{spec.seed.source, ke::Language::cuda, {}};
  std::uint64_t seed = 0;
  evaluator.evaluate(c, seed++);  // compiles once; the rows time the cached candidate
  for (auto _ : state) benchmark::DoNotOptimize(evaluator.evaluate(c, seed++));
}

BENCHMARK(BM_GpuWorkerStart)->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime()->Arg(0)->Arg(1)->Arg(2);
BENCHMARK(BM_GpuWorkerFirstEvaluation)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5)
    ->UseRealTime()
    ->Arg(0)
    ->Arg(1)
    ->Arg(2);
BENCHMARK(BM_GpuWorkerEnd)->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime()->Arg(0)->Arg(1)->Arg(2);
BENCHMARK(BM_GpuWorker)->Unit(benchmark::kMillisecond)->MinTime(1.0)->UseRealTime()->Arg(0)->Arg(1)->Arg(2);

}  // namespace

BENCHMARK_MAIN();
