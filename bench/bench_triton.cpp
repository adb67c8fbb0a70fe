// What a Triton candidate costs the host (issue 17), against a CUDA candidate of the same problem in the same
// run, and how many Triton candidates a second eight workers evaluate on the memory-bound problems.
//
//   bench/bench_triton [--problems relu,softmax,...] [--jobs 8] [--per-job 6]
//
// Host cost: in one worker, twelve distinct candidates of level1/relu (Triton: the seed at twelve tunable
// points; CUDA: the seed, each with a comment that defeats the caches), each evaluated in full as a search
// would (compile, load, five verification trials per workload, timing). Medians of the wall time per
// evaluation and of the compile time (Triton's: its helper, then the driver's PTX compiler). Target: Triton's
// median wall at most 1.0 s.
// Throughput: for each problem, `jobs` threads share a WorkerEvaluator of `jobs` workers, each thread
// evaluating `per-job` distinct candidates, after one evaluation per worker to start them (Triton's helper
// starts in each); the first problem's CUDA candidates are the baseline, through the same workers and
// protocol. Target: at least 6 Triton candidates a second.
// Needs a CUDA GPU and a Python with Triton (KE_PYTHON); says why when it cannot run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <kernelevolve/distributed.hpp>
#include <kernelevolve/kernelevolve.hpp>

namespace ke = kernelevolve;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

ke::Spec load(const std::string& problem, const std::string& file) {
  return ke::load_spec(std::string(KE_SOURCE_DIR) + "/problems/level1/" + problem + "/" + file);
}

// `count` distinct candidates of the spec: the seed at tunable points in order (every combination of the
// first values, then on), each with a comment naming its index, so no cache can serve one.
std::vector<ke::Candidate> candidates(const ke::Spec& spec, int count) {
  std::vector<ke::Candidate> out;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> axes(spec.tunables.begin(), spec.tunables.end());
  std::vector<std::size_t> at(axes.size(), 0);
  const char* comment = spec.language == ke::Language::triton ? "# " : "// ";
  for (int i = 0; static_cast<int>(out.size()) < count && i < 100000; ++i) {
    ke::Bindings point;
    std::size_t k = static_cast<std::size_t>(i);
    for (std::size_t a = 0; a < axes.size(); ++a) {
      point[axes[a].first] = axes[a].second[k % axes[a].second.size()];
      k /= axes[a].second.size();
    }
    if (!spec.satisfies_constraints(point)) continue;
    out.push_back(ke::Candidate{spec.seed.source + "\n" + comment + "candidate " + std::to_string(i) + "\n",
                                spec.language, point});
  }
  return out;
}

ke::WorkerOptions options(int jobs) {
  ke::WorkerOptions o;
  o.jobs = jobs;
  o.timeout_s = 120;
  o.eval.timing_lock = ke::default_timing_lock("cuda:0");  // as the command-line tool runs: timings never overlap
  return o;
}

void host_cost(const std::string& file, const char* label) {
  const ke::Spec spec = load("relu", file);
  ke::WorkerEvaluator evaluator(spec, "cuda:0", options(1));
  const auto warm = Clock::now();
  evaluator.evaluate(ke::Candidate{spec.seed.source, spec.language, spec.seed_tunables()}, 1);
  const double start_s = seconds_since(warm);
  std::vector<double> wall, compile;
  int ok = 0;
  std::uint64_t seed = 2;
  for (const ke::Candidate& c : candidates(spec, 12)) {
    const auto t = Clock::now();
    const ke::Evaluation e = evaluator.evaluate(c, seed++);
    wall.push_back(seconds_since(t));
    compile.push_back(e.compile_ms / 1000);
    ok += e.status == ke::Status::ok;
  }
  std::printf("%-8s %9.3f s %12.3f s %14.3f s %6d/%zu\n", label, median(wall), median(compile), start_s, ok,
              wall.size());
}

void throughput(const std::string& problem, const std::string& file, int jobs, int per_job) {
  const ke::Spec spec = load(problem, file);
  ke::WorkerEvaluator evaluator(spec, "cuda:0", options(jobs));
  const std::vector<ke::Candidate> all = candidates(spec, jobs * (per_job + 1));
  if (static_cast<int>(all.size()) < jobs * (per_job + 1)) {
    std::printf("%-14s too few distinct points (%zu)\n", problem.c_str(), all.size());
    return;
  }
  auto run = [&](int first, int each) {
    std::vector<std::thread> threads;
    std::mutex mutex;
    int ok = 0;
    for (int j = 0; j < jobs; ++j) {
      threads.emplace_back([&, j] {
        for (int i = 0; i < each; ++i) {
          const int index = first + j * each + i;
          const ke::Evaluation e = evaluator.evaluate(all[static_cast<std::size_t>(index)], 100 + index);
          std::lock_guard lock(mutex);
          ok += e.status == ke::Status::ok;
        }
      });
    }
    for (auto& t : threads) t.join();
    return ok;
  };
  const auto warm = Clock::now();
  run(0, 1);  // starts every worker (and its Triton helper)
  const double start_s = seconds_since(warm);
  const auto t = Clock::now();
  const int ok = run(jobs, per_job);
  const double s = seconds_since(t);
  const int n = jobs * per_job;
  std::printf("%-14s %-7s %5d %8.2f s %10.2f/s %6d/%d %14.2f s\n", problem.c_str(), ke::to_string(spec.language), n, s,
              n / s, ok, n, start_s);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> problems = {"relu", "gelu", "silu", "softmax", "layernorm", "rmsnorm", "row_sum"};
  int jobs = 8, per_job = 6;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--jobs")) jobs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--per-job")) per_job = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--problems")) {
      problems.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string p; std::getline(list, p, ',');) problems.push_back(p);
    }
  }
  try {
    ke::open_device("cuda:0");
  } catch (const ke::Error& e) {
    std::printf("bench_triton: cannot run: %s\n", e.what());
    return 0;
  }
  try {
    std::printf("host cost per candidate, level1/relu, one worker (median of 12; start = the first evaluation)\n");
    std::printf("%-8s %11s %14s %16s %9s\n", "language", "wall", "compile", "worker start", "ok");
    host_cost("cuda.json", "cuda");
    host_cost("triton.json", "triton");
    std::printf("\nTriton candidates a second, %d workers, %d candidates each after one to start them\n", jobs,
                per_job);
    std::printf("%-14s %-7s %5s %10s %12s %8s %16s\n", "problem", "lang", "cands", "elapsed", "rate", "ok",
                "workers' start");
    // The baseline: CUDA candidates of the first problem, through the same workers and protocol.
    throughput(problems.front(), "cuda.json", jobs, per_job);
    for (const std::string& p : problems) throughput(p, "triton.json", jobs, per_job);
  } catch (const ke::Error& e) {
    std::printf("bench_triton: %s\n", e.what());
    return e.exit_code();
  }
  return 0;
}
