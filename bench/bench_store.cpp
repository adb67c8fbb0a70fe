// What the search's bookkeeping costs: committing a node to the store, resuming a run of 100,000
// nodes, and one selection at 100,000 nodes for each policy. Each figure has a baseline from the same
// run, and the ratios are printed at the end:
//   node insert (one transaction per node)  vs  a bare one-row commit in the same database
//   resume of 100k nodes                    vs  building the same graph in memory
//   selection, each policy                  vs  greedy (constant time)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <kernelevolve/kernelevolve.hpp>
#include <kernelevolve/store.hpp>
#include <map>
#include <random>
#include <sqlite3.h>

namespace ke = kernelevolve;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kBigRun = 100000;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("ke_bench_" + std::to_string(getpid()) + "_" + name)).string();
}

void remove_db(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
}

ke::Spec bench_spec() {
  ke::Spec s;
  s.name = "bench";
  s.language = ke::Language::c;
  s.entry = "k";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = {{{"n", 4096}}, {{"n", 1000}}};
  s.reference.source =
      "#include <stdint.h>\nvoid k(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i]; }\n";
  s.seed.source = s.reference.source;
  s.tunables = {{"A", {1, 2, 4, 8}}, {"B", {1, 2, 4, 8}}};
  s.validate();
  return s;
}

// A node as a parameter search makes them: the seed's source, new tunables, two workloads timed.
ke::Node make_node(const ke::Spec& spec, std::int64_t id, std::mt19937_64& rng) {
  ke::Node n;
  n.id = id;
  if (id > 0)
    n.parents = {std::uniform_int_distribution<std::int64_t>(std::max<std::int64_t>(0, id - 50), id - 1)(rng)};
  n.mutator = id == 0 ? "seed" : "param";
  n.note = "neighbour: A 2 -> 4";
  n.candidate = {spec.seed.source, ke::Language::c, {{"A", id}, {"B", id % 7}}};
  const bool ok = id == 0 || rng() % 10 != 0;
  n.evaluation.status = ok ? ke::Status::ok : ke::Status::compile_error;
  if (ok) {
    const double t = 10 + static_cast<double>(rng() % 1000) / 10.0;
    n.evaluation.timings = {{t, t * 0.95, t * 1.1, 0.2, 20}, {t / 4, t / 4, t / 3, 0.1, 40}};
    n.speedup = id == 0 ? 1.0 : 60.0 / t;
  } else {
    n.evaluation.compile_log = "error: synthetic";
  }
  n.created_s = static_cast<double>(id) * 0.1;
  return n;
}

// ---- node insert --------------------------------------------------------------------------------------

void insert_nodes(benchmark::State& state, bool durable) {
  const std::string path = temp_path(durable ? "insert_durable.db" : "insert.db");
  remove_db(path);
  {
    auto store = std::make_shared<ke::Store>(path);
    store->set_durable(durable);
    const ke::Spec spec = bench_spec();
    const ke::RunId run = store->begin_run(spec, {"cpu", "cpu", "bench", 1, 0, 0, 0, 0, {}});
    std::mt19937_64 rng(1);
    std::int64_t id = 0;
    ke::SearchState s;
    for (auto _ : state) {
      ke::Node n = make_node(spec, id++, rng);
      s.evaluations = id;
      store->record_node(run, n, s);
    }
    state.SetItemsProcessed(state.iterations());
  }
  remove_db(path);
}

void BM_NodeInsert(benchmark::State& state) { insert_nodes(state, false); }
void BM_NodeInsertDurable(benchmark::State& state) { insert_nodes(state, true); }

// Baseline: the least a commit costs in the same mode: one small row, one transaction.
void bare_commit(benchmark::State& state, bool durable) {
  const std::string path = temp_path(durable ? "bare_durable.db" : "bare.db");
  remove_db(path);
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db,
               durable ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t(x INTEGER)"
                       : "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; CREATE TABLE t(x INTEGER)",
               nullptr, nullptr, nullptr);
  sqlite3_stmt* insert = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?)", -1, &insert, nullptr);
  std::int64_t i = 0;
  for (auto _ : state) {
    sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    sqlite3_bind_int64(insert, 1, i++);
    sqlite3_step(insert);
    sqlite3_reset(insert);
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  }
  state.SetItemsProcessed(state.iterations());
  sqlite3_finalize(insert);
  sqlite3_close(db);
  remove_db(path);
}

void BM_BareCommit(benchmark::State& state) { bare_commit(state, false); }
void BM_BareCommitDurable(benchmark::State& state) { bare_commit(state, true); }

// ---- resume at 100k nodes --------------------------------------------------------------------------

struct BigRun {
  std::string path = temp_path("big.db");
  ke::RunId run = 0;
  BigRun() {
    remove_db(path);
    auto store = std::make_shared<ke::Store>(path);
    const ke::Spec spec = bench_spec();
    run = store->begin_run(spec, {"cpu", "cpu", "bench", 1, 0, 0, 0, 0, {}});
    std::mt19937_64 rng(2);
    ke::SearchState s;
    for (std::int64_t id = 0; id < kBigRun; ++id) store->record_node(run, make_node(spec, id, rng), s);
  }
  ~BigRun() { remove_db(path); }
};

BigRun& big_run() {
  static BigRun run;
  return run;
}

void BM_Resume100k(benchmark::State& state) {
  BigRun& big = big_run();
  for (auto _ : state) {
    ke::Store store(big.path);
    ke::Checkpoint cp = store.resume(big.run);
    if (cp.graph.size() != static_cast<std::size_t>(kBigRun)) state.SkipWithError("lost nodes");
    benchmark::DoNotOptimize(cp);
  }
  state.SetItemsProcessed(state.iterations() * kBigRun);
}

// Baseline: the same 100k nodes built into a graph in memory, no database.
void BM_BuildGraph100k(benchmark::State& state) {
  const ke::Spec spec = bench_spec();
  std::vector<ke::Node> nodes;
  std::mt19937_64 rng(2);
  for (std::int64_t id = 0; id < kBigRun; ++id) nodes.push_back(make_node(spec, id, rng));
  for (auto _ : state) {
    ke::SearchGraph g;
    for (const ke::Node& n : nodes) g.add(n);
    benchmark::DoNotOptimize(g);
  }
  state.SetItemsProcessed(state.iterations() * kBigRun);
}

// ---- selection at 100k nodes ------------------------------------------------------------------------

const ke::SearchGraph& big_graph() {
  static const ke::SearchGraph graph = [] {
    const ke::Spec spec = bench_spec();
    ke::SearchGraph g;
    std::mt19937_64 rng(3);
    for (std::int64_t id = 0; id < kBigRun; ++id) g.add(make_node(spec, id, rng));
    return g;
  }();
  return graph;
}

void BM_Select100k(benchmark::State& state, const std::string& policy_name) {
  const ke::SearchGraph& g = big_graph();
  ke::PolicyOptions options;
  options.features = {"A"};
  auto policy = ke::make_policy(policy_name, options);
  std::mt19937_64 rng(4);
  policy->select(g, rng);  // the first call reads the whole graph; later ones only what is new
  for (auto _ : state) benchmark::DoNotOptimize(policy->select(g, rng));
}

// The first selection of a policy that keeps statistics reads all 100k nodes: once per run (or resume).
void BM_FirstSelect100k(benchmark::State& state, const std::string& policy_name) {
  const ke::SearchGraph& g = big_graph();
  ke::PolicyOptions options;
  options.features = {"A"};
  std::mt19937_64 rng(4);
  for (auto _ : state) {
    auto policy = ke::make_policy(policy_name, options);
    benchmark::DoNotOptimize(policy->select(g, rng));
  }
}

// ---- the ratios ----------------------------------------------------------------------------------------

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
    std::printf("\nratios against baselines measured in this run (time per item):\n");
    auto ratio = [&](const std::string& what, const std::string& base) {
      const auto a = find(what), b = find(base);
      if (a > 0 && b > 0) std::printf("  %-44s %8.2fx  %s\n", what.c_str(), a / b, base.c_str());
    };
    ratio("BM_NodeInsert", "BM_BareCommit");
    ratio("BM_NodeInsertDurable", "BM_BareCommitDurable");
    ratio("BM_Resume100k", "BM_BuildGraph100k");
    for (const auto& [name, t] : times_) {
      if (name.rfind("BM_Select100k/", 0) == 0 && name.find("greedy") == std::string::npos) {
        ratio(name, "BM_Select100k/greedy");
      }
    }
  }

 private:
  double find(const std::string& prefix) const {
    for (const auto& [name, t] : times_) {
      if (name == prefix || name.rfind(prefix + "/", 0) == 0) return t;
    }
    return 0;
  }
  std::map<std::string, double> times_;
};

}  // namespace

BENCHMARK(BM_NodeInsert)->Unit(benchmark::kMicrosecond)->MinTime(1.0)->UseRealTime();
BENCHMARK(BM_BareCommit)->Unit(benchmark::kMicrosecond)->MinTime(1.0)->UseRealTime();
BENCHMARK(BM_NodeInsertDurable)->Unit(benchmark::kMicrosecond)->MinTime(1.0)->UseRealTime();
BENCHMARK(BM_BareCommitDurable)->Unit(benchmark::kMicrosecond)->MinTime(1.0)->UseRealTime();
BENCHMARK(BM_Resume100k)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
BENCHMARK(BM_BuildGraph100k)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
BENCHMARK_CAPTURE(BM_Select100k, greedy, std::string("greedy"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Select100k, random, std::string("random"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Select100k, epsilon_greedy, std::string("epsilon-greedy"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Select100k, tournament, std::string("tournament"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Select100k, ucb, std::string("ucb"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Select100k, islands, std::string("islands"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FirstSelect100k, ucb, std::string("ucb"))->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK_CAPTURE(BM_FirstSelect100k, islands, std::string("islands"))->Unit(benchmark::kMillisecond)->Iterations(5);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
