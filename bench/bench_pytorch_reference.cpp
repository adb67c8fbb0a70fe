// What a PyTorch reference costs per verification trial (issue 16), against the same problem with a kernel
// reference: ReLU over 64 MB (a 32 MB input, a 32 MB output), problems/pytorch/relu_nchw.
//
// Row argument 0: the reference is a kernel of the spec's language (C on the CPU, CUDA on a GPU), its inputs
// drawn by the device. Argument 1: the reference is the PyTorch module, run by the bridge process on the
// shared arena (a memfd on the CPU, the GPU's own memory through CUDA IPC), its inputs drawn by the
// problem's get_inputs() in that process. Each iteration's time is one trial's: an evaluation with 10
// trials less one with 2, over 8 (so the timing loop, the compile and the allocations cancel out).
// Compare the two rows of one device; target: the PyTorch row at most 1.5 times the kernel row.
//
//   bench/bench_pytorch_reference [--benchmark_filter=Cpu|Cuda]
// Needs a Python that imports torch (KE_PYTHON, or python3); the CUDA rows need a GPU. Rows that cannot
// run say why.
#include <benchmark/benchmark.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>

#include <kernelevolve/kernelevolve.hpp>

#include "pytorch/python.hpp"

namespace ke = kernelevolve;

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// relu_nchw at 16 x 64 x 128 x 64 floats: 32 MB in, 32 MB out. With `pytorch` false, the seed kernel (at
// the seed's point) is the reference as well, so both rows verify the same candidate against the same
// answer.
ke::Spec relu_spec(const std::string& file, bool pytorch) {
  ke::Spec spec = ke::load_spec(std::string(KE_SOURCE_DIR) + "/problems/pytorch/relu_nchw/" + file);
  spec.workloads = {{{"batch_size", 16}, {"channels", 64}, {"height", 128}, {"width", 64}}};
  if (!pytorch) {
    spec.reference = {};
    spec.reference.source = spec.seed.source;
    spec.reference.file = spec.seed.file;
  }
  spec.validate();
  return spec;
}

ke::EvalOptions with_trials(int trials) {
  ke::EvalOptions o;
  o.trials = trials;
  o.warmup = 0;
  o.min_reps = 1;
  o.max_reps = 1;
  o.target_ms = 0;
  return o;
}

std::string unavailable(const std::string& device) {
  try {
    ke::pytorch::find_python();
    ke::open_device(device);
    return {};
  } catch (const ke::Error& e) {
    return e.what();
  }
}

void trial_cost(benchmark::State& state, const std::string& device, const std::string& file) {
  if (const std::string why = unavailable(device); !why.empty()) return state.SkipWithError(why.c_str());
  const bool pytorch = state.range(0) == 1;
  state.SetLabel(pytorch ? "PyTorch reference" : "kernel reference");
  const ke::Spec spec = relu_spec(file, pytorch);
  const auto dev = ke::open_device(device);
  ke::LocalEvaluator few(spec, dev, with_trials(2)), many(spec, dev, with_trials(10));
  const ke::Candidate seed{spec.seed.source, spec.language, spec.seed_tunables()};
  std::uint64_t input_seed = 1;
  for (auto* evaluator : {&few, &many}) {  // the compile, the bridge's start and first allocations
    const ke::Evaluation e = evaluator->evaluate(seed, input_seed++);
    if (e.status != ke::Status::ok) return state.SkipWithError(("the seed is " + e.message).c_str());
  }
  using clock = std::chrono::steady_clock;
  for (auto _ : state) {
    const auto t0 = clock::now();
    benchmark::DoNotOptimize(many.evaluate(seed, input_seed++));
    const auto t1 = clock::now();
    benchmark::DoNotOptimize(few.evaluate(seed, input_seed++));
    const auto t2 = clock::now();
    const double per_trial =
        (std::chrono::duration<double>(t1 - t0).count() - std::chrono::duration<double>(t2 - t1).count()) / 8.0;
    state.SetIterationTime(std::max(per_trial, 1e-9));
  }
}

void BM_CpuTrial(benchmark::State& state) { trial_cost(state, "cpu", "cpu.json"); }
void BM_CudaTrial(benchmark::State& state) { trial_cost(state, "cuda", "cuda.json"); }

}  // namespace

BENCHMARK(BM_CpuTrial)->Unit(benchmark::kMillisecond)->Iterations(10)->UseManualTime()->Arg(0)->Arg(1);
BENCHMARK(BM_CudaTrial)->Unit(benchmark::kMillisecond)->Iterations(10)->UseManualTime()->Arg(0)->Arg(1);

BENCHMARK_MAIN();
