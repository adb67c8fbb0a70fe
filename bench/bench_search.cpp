// Evaluations per second, end to end, on a trivial CPU kernel: the whole loop (select, mutate, compile,
// verify, time, record) against the evaluator alone on the same candidates (the baseline: what the
// search adds is the difference). BM_SearchOverhead isolates that difference: the loop with an evaluator
// that answers at once, per evaluation. Every candidate is a new point, so each one compiles, as in a real
// parameter search. Quick fitness options (2 trials, 5 timed runs) keep the evaluator's own share small,
// so the search's overhead shows.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <kernelevolve/kernelevolve.hpp>
#include <kernelevolve/store.hpp>
#include <map>

namespace ke = kernelevolve;
namespace fs = std::filesystem;

namespace {

constexpr int kEvaluations = 40;

ke::Spec trivial_spec() {
  ke::Spec s;
  s.name = "axpy";
  s.language = ke::Language::c;
  s.entry = "axpy";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = {{{"n", 1024}}};
  s.reference.source =
      "#include <stdint.h>\nvoid axpy(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i] + 1.0f; }\n";
  // The seed reads U (a tunable nothing reads is dead, and never searched), though it changes nothing:
  // each value is its own compile.
  s.seed.source =
      "#include <stdint.h>\nvoid axpy(const float* x, float* y, int64_t n) { (void)U; for (int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i] + 1.0f; }\n";
  std::vector<std::int64_t> values;
  for (int i = 0; i < 4096; ++i) values.push_back(i);
  s.tunables = {{"U", values}};
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

std::string temp_db() {
  return (fs::temp_directory_path() / ("ke_bench_search_" + std::to_string(getpid()) + ".db")).string();
}

void remove_db(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
}

// Baseline: the evaluator alone, on kEvaluations new points, in-process.
void BM_EvaluatorAlone(benchmark::State& state) {
  const ke::Spec spec = trivial_spec();
  std::int64_t next = 100000;
  for (auto _ : state) {
    state.PauseTiming();
    ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), quick());
    evaluator.device_info();  // the device measures its ceilings once, on first use
    state.ResumeTiming();
    for (int i = 0; i < kEvaluations; ++i) {
      ke::Candidate c{spec.seed.source, ke::Language::c, {{"U", next++}}};
      benchmark::DoNotOptimize(evaluator.evaluate(c, static_cast<std::uint64_t>(i)));
    }
  }
  state.counters["evals_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kEvaluations), benchmark::Counter::kIsRate);
}

// The search, in-process or in workers, with or without the store.
void BM_Search(benchmark::State& state, bool workers, int jobs, bool store) {
  const ke::Spec spec = trivial_spec();
  std::uint64_t seed = 1;
  for (auto _ : state) {
    state.PauseTiming();
    std::shared_ptr<ke::FitnessEvaluator> evaluator;
    if (workers) {
      ke::WorkerOptions wo;
      wo.jobs = jobs;
      wo.eval = quick();
      wo.eval.timing_lock = (fs::temp_directory_path() / "ke_bench_search.lock").string();
      evaluator = std::make_shared<ke::WorkerEvaluator>(spec, "cpu", wo);
    } else {
      evaluator = std::make_shared<ke::LocalEvaluator>(spec, ke::open_device("cpu"), quick());
    }
    evaluator->device_info();
    const std::string path = temp_db();
    remove_db(path);
    std::shared_ptr<ke::Store> db;
    std::optional<ke::StoreRecorder> recorder;
    ke::EvolverOptions options;
    options.seed = seed++;
    options.jobs = jobs;
    state.ResumeTiming();
    if (store) {
      db = std::make_shared<ke::Store>(path);
      const ke::RunId run = db->begin_run(spec, evaluator->device_info(), {"greedy", "param", options.seed, ""});
      recorder.emplace(db, run);
    }
    ke::Evolver evolver(spec, evaluator, std::make_shared<ke::ParamMutator>(), ke::make_policy("greedy"),
                        ke::max_evaluations(kEvaluations), options);
    if (recorder) evolver.add_observer(&*recorder);
    benchmark::DoNotOptimize(evolver.run());
    state.PauseTiming();
    recorder.reset();
    db.reset();
    evaluator.reset();
    remove_db(path);
    state.ResumeTiming();
  }
  state.counters["evals_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kEvaluations), benchmark::Counter::kIsRate);
}

// The search's own cost per evaluation, with an evaluator that answers at once: selection, mutation, the
// evaluation thread, observers, and (when on) a committed transaction per node. 2000 evaluations.
class Instant final : public ke::FitnessEvaluator {
 public:
  ke::Evaluation evaluate(const ke::Candidate& c, std::uint64_t) override {
    ke::Evaluation e;
    e.status = ke::Status::ok;
    const double t = 10 + static_cast<double>(c.tunables.at("U") % 97);
    e.timings = {{t, t, t, 0, 5}};
    return e;
  }
  ke::DeviceInfo device_info() override { return {"instant", "instant", "instant", 1, 0, 0, 0, 0, {}}; }
};

void BM_SearchOverhead(benchmark::State& state, const std::string& policy, bool store) {
  const ke::Spec spec = trivial_spec();
  constexpr int kMany = 2000;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string path = temp_db();
    remove_db(path);
    state.ResumeTiming();
    auto evaluator = std::make_shared<Instant>();
    std::shared_ptr<ke::Store> db;
    std::optional<ke::StoreRecorder> recorder;
    if (store) {
      db = std::make_shared<ke::Store>(path);
      recorder.emplace(db, db->begin_run(spec, evaluator->device_info(), {policy, "param", 1, ""}));
    }
    ke::Evolver evolver(spec, evaluator, std::make_shared<ke::ParamMutator>(), ke::make_policy(policy),
                        ke::max_evaluations(kMany));
    if (recorder) evolver.add_observer(&*recorder);
    benchmark::DoNotOptimize(evolver.run());
    state.PauseTiming();
    recorder.reset();
    db.reset();
    remove_db(path);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kMany);
}

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Iteration && !r.error_occurred) times_[r.benchmark_name()] = r.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    double base = 0;
    for (const auto& [name, t] : times_) {
      if (name.rfind("BM_EvaluatorAlone", 0) == 0) base = t;
    }
    if (base <= 0) return;
    std::printf("\nend to end, %d evaluations of a trivial CPU kernel, against the evaluator alone in-process:\n",
                kEvaluations);
    for (const auto& [name, t] : times_) {
      if (name.rfind("BM_SearchOverhead", 0) == 0) continue;
      std::printf("  %-40s %7.1f evaluations/s  %6.2fx the evaluator's time\n", name.c_str(), kEvaluations / (t / 1e3),
                  t / base);
    }
  }

 private:
  std::map<std::string, double> times_;  // milliseconds per iteration
};

}  // namespace

BENCHMARK_CAPTURE(BM_SearchOverhead, greedy, std::string("greedy"), false)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_SearchOverhead, greedy_store, std::string("greedy"), true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_SearchOverhead, ucb_store, std::string("ucb"), true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK(BM_EvaluatorAlone)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
BENCHMARK_CAPTURE(BM_Search, in_process, false, 1, false)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
BENCHMARK_CAPTURE(BM_Search, in_process_store, false, 1, true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Search, workers_1_store, true, 1, true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Search, workers_2_store, true, 2, true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Search, workers_4_store, true, 4, true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
