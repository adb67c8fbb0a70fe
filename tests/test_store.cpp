// The SQLite store: a run committed node by node and read back whole; the schema's version guarded;
// mutator calls kept; a run resumed across lost nodes; measurements reused by a later run of the same
// problem on the same device; and, through the command-line tool, show, best, export, --resume, and a run
// killed with SIGKILL in the middle of its search that reopens clean and resumes with its best intact.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <kernelevolve/error.hpp>
#include <kernelevolve/evolver.hpp>
#include <kernelevolve/store.hpp>
#include <set>
#include <simdjson.h>
#include <sstream>
#include <thread>

#include "support/grid_spec.hpp"

#include "support/cli_runner.hpp"
#include "support/error_of.hpp"

namespace ke = kernelevolve;
namespace fs = std::filesystem;

extern char** environ;

namespace {

// A fresh folder per test, removed at the end: nothing is left in the source tree or in /tmp.
struct TempDir : ke_test::TempDir {
  TempDir() : ke_test::TempDir("ke_store") {}
};

using ke::testing::grid_spec;
using ke_test::error_of;

// A known cost surface with every kind of result: A == 2 fails to compile (with a log), B == 2 answers wrong
// (with a worst mismatch), the rest is ok with resources. Counts its calls.
class Surface final : public ke::FitnessEvaluator {
 public:
  explicit Surface(std::string device_name = "surface", double peak_bytes_per_s = 0, double peak_flops_per_s = 0)
      : name_(std::move(device_name)), peak_bytes_(peak_bytes_per_s), peak_flops_(peak_flops_per_s) {}
  std::atomic<int> calls{0};
  ke::Evaluation evaluate(const ke::Candidate& c, std::uint64_t) override {
    ++calls;
    ke::Evaluation e;
    const double a = static_cast<double>(c.tunables.at("A")), b = static_cast<double>(c.tunables.at("B"));
    if (a == 2) {
      e.status = ke::Status::compile_error;
      e.message = "does not compile";
      e.compile_log = "error: A is 2\n  at line 1";
      return e;
    }
    if (b == 2) {
      e.status = ke::Status::incorrect;
      e.message = "y[3] = 1, expected 2";
      e.worst = ke::Mismatch{"y", 1, 2, 3, 1.0, 2.0, 0.5};
      return e;
    }
    e.status = ke::Status::ok;
    const double t = 10 + (a - 8) * (a - 8) + 3 * (b - 4) * (b - 4);
    e.timings = {{t, t * 0.9, t * 1.2, 0.25, 7}, {2 * t, 2 * t, 2 * t, 0.5, 9}};
    e.resources = {{"registers", static_cast<std::int64_t>(a * 4)}};
    e.compile_ms = 12.5;
    return e;
  }
  ke::DeviceInfo device_info() override {
    return {"synthetic:0", "synthetic", name_, 1, 0, peak_bytes_, peak_flops_, 0, {}};
  }

 private:
  std::string name_;
  double peak_bytes_, peak_flops_;
};

struct RunOutcome {
  ke::RunId run;
  ke::RunResult result;
  std::vector<ke::Node> nodes;
};

// One search recorded in the store, the way the command-line tool records one.
RunOutcome recorded_run(const std::shared_ptr<ke::Store>& store, const ke::Spec& spec,
                        std::shared_ptr<ke::FitnessEvaluator> evaluator, std::shared_ptr<ke::StopRule> stop,
                        bool reuse = true, std::shared_ptr<ke::Mutator> mutator = nullptr, int confirm_rounds = 0) {
  if (!mutator) mutator = std::make_shared<ke::ParamMutator>();
  const ke::RunId run = store->begin_run(spec, evaluator->device_info(), {"greedy", mutator->name(), 1, "test"});
  std::shared_ptr<ke::ReusingEvaluator> reusing;
  if (reuse) {
    reusing = std::make_shared<ke::ReusingEvaluator>(evaluator, store, spec);
    evaluator = reusing;
  }
  ke::EvolverOptions options;
  options.confirm_rounds = confirm_rounds;  // the tests of reuse and resume count the search's own calls
  ke::Evolver evolver(spec, evaluator, mutator, ke::make_policy("greedy"), stop, options);
  ke::StoreRecorder recorder(store, run, reusing.get());
  evolver.add_observer(&recorder);
  RunOutcome out{run, evolver.run(), {}};
  out.nodes = evolver.graph().nodes();
  return out;
}

std::int64_t query_int(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK);
  std::int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
  sqlite3_finalize(s);
  sqlite3_close(db);
  return v;
}

std::string query_text(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK);
  std::string v;
  if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
    v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(db);
  return v;
}

void exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  INFO((err ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

}  // namespace

TEST_CASE("a run is committed node by node and loads back whole") {
  TempDir dir;
  const std::string path = dir / "runs.db";
  auto store = std::make_shared<ke::Store>(path);
  const ke::Spec spec = grid_spec();
  const RunOutcome out = recorded_run(store, spec, std::make_shared<Surface>(), ke::max_evaluations(1000));
  REQUIRE(out.nodes.size() == 19);  // the whole space

  const ke::RunInfo info = store->run(out.run);
  CHECK(info.spec_name == "grid");
  CHECK(info.spec_hash == ke::spec_hash(spec));
  CHECK(info.measurement_hash == ke::measurement_hash(spec));
  CHECK(ke::parse_spec(info.spec_json, "stored").tunables == spec.tunables);
  CHECK(info.device.kind == "synthetic");
  CHECK(info.device.name == "surface");
  CHECK(info.settings.policy == "greedy");
  CHECK(info.nodes == 19);
  CHECK_FALSE(info.finished_at.empty());
  CHECK(info.stop_reason == out.result.stop_reason);
  CHECK(store->latest_run() == std::optional<ke::RunId>(out.run));
  CHECK(store->latest_run(spec) == std::optional<ke::RunId>(out.run));
  const ke::DeviceInfo device = Surface().device_info();
  CHECK(store->latest_run(spec, &device) == std::optional<ke::RunId>(out.run));
  const ke::DeviceInfo elsewhere = Surface("another processor").device_info();
  CHECK_FALSE(store->latest_run(spec, &elsewhere).has_value());

  const ke::Checkpoint cp = store->load(out.run);
  REQUIRE(cp.graph.size() == out.nodes.size());
  for (const ke::Node& want : out.nodes) {
    const ke::Node& got = cp.graph.node(want.id);
    INFO("node " << want.id);
    CHECK(got.parents == want.parents);
    CHECK(got.mutator == want.mutator);
    CHECK(got.note == want.note);
    CHECK(got.candidate.key() == want.candidate.key());
    CHECK(got.candidate.source == want.candidate.source);
    CHECK(got.evaluation.status == want.evaluation.status);
    CHECK(got.evaluation.message == want.evaluation.message);
    CHECK(got.evaluation.compile_log == want.evaluation.compile_log);
    CHECK(got.evaluation.resources == want.evaluation.resources);
    CHECK(got.speedup == doctest::Approx(want.speedup));
    CHECK(got.created_s == doctest::Approx(want.created_s));
    REQUIRE(got.evaluation.timings.size() == want.evaluation.timings.size());
    for (std::size_t w = 0; w < want.evaluation.timings.size(); ++w) {
      CHECK(got.evaluation.timings[w].median_us == want.evaluation.timings[w].median_us);
      CHECK(got.evaluation.timings[w].min_us == want.evaluation.timings[w].min_us);
      CHECK(got.evaluation.timings[w].max_us == want.evaluation.timings[w].max_us);
      CHECK(got.evaluation.timings[w].mad_us == want.evaluation.timings[w].mad_us);
      CHECK(got.evaluation.timings[w].samples == want.evaluation.timings[w].samples);
    }
    REQUIRE(got.evaluation.worst.has_value() == want.evaluation.worst.has_value());
    if (want.evaluation.worst) {
      CHECK(got.evaluation.worst->buffer == "y");
      CHECK(got.evaluation.worst->index == 3);
      CHECK(got.evaluation.worst->expected == 2.0);
    }
  }
  CHECK(cp.graph.best() == out.result.best);
  CHECK(info.best == out.result.best);
  // One source row for nineteen nodes: a parameter search shares its text.
  CHECK(query_int(path, "SELECT count(*) FROM sources") == 1);
  CHECK(store->integrity_check() == "ok");
}

TEST_CASE("diagnoses are read back from the store: derived from the run's spec and ceilings, as the search made them") {
  TempDir dir;
  const std::string path = dir / "diagnosed.db";
  auto store = std::make_shared<ke::Store>(path);
  ke::Spec spec = grid_spec();
  spec.cost_bytes = ke::Expr::parse("8 * n * A");
  spec.cost_flops = ke::Expr::parse("1000 * n * B");
  spec.validate();
  const RunOutcome out =
      recorded_run(store, spec, std::make_shared<Surface>("surface", 1e9, 1e11), ke::max_evaluations(1000));
  const ke::Checkpoint cp = store->load(out.run);
  REQUIRE(cp.graph.size() == out.nodes.size());
  int diagnosed = 0;
  for (const ke::Node& want : out.nodes) {
    const ke::Node& got = cp.graph.node(want.id);
    INFO("node " << want.id);
    REQUIRE(got.diagnosis.has_value() == (want.evaluation.status == ke::Status::ok));
    REQUIRE(want.diagnosis.has_value() == got.diagnosis.has_value());
    if (!got.diagnosis) continue;
    ++diagnosed;
    CHECK(ke::diagnosis_json(*got.diagnosis) == ke::diagnosis_json(*want.diagnosis));
    // The rates are the cost over the stored time, against the run's ceilings.
    const double a = static_cast<double>(got.candidate.tunables.at("A"));
    const double t0 = got.evaluation.timings[0].median_us;
    CHECK(*got.diagnosis->workloads[0].bytes_per_s == doctest::Approx(8 * 100 * a / (t0 * 1e-6)));
    CHECK(*got.diagnosis->workloads[0].bandwidth_share == doctest::Approx(8 * 100 * a / (t0 * 1e-6) / 1e9));
    REQUIRE(got.diagnosis->gpu.has_value());  // the surface reports registers, as a GPU does
    CHECK(got.diagnosis->gpu->registers == static_cast<std::int64_t>(4 * a));
  }
  CHECK(diagnosed > 5);
  // Nothing of it is a column: the diagnosis needs no migration, and an older run gets one too.
  CHECK(query_int(path, "SELECT count(*) FROM pragma_table_info('nodes') WHERE name LIKE '%diagnos%'") == 0);
  // The JSON export carries each node's, null where the node is not ok.
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const std::string exported = ke::export_json(*store, out.run);
  REQUIRE(parser.parse(exported).get(doc) == simdjson::SUCCESS);
  simdjson::dom::array nodes;
  REQUIRE(doc["nodes"].get_array().get(nodes) == simdjson::SUCCESS);
  for (simdjson::dom::element node : nodes) {
    const bool ok = std::string_view(node["status"].get_string().value()) == "ok";
    CHECK(node["diagnosis"].is_null() == !ok);
    if (ok) CHECK(node["diagnosis"]["workloads"].get_array().value().size() == 2);
  }
}

namespace {

// Node 0 of a run of `spec`, its seed at the first tunables, with `status`, to record by hand.
ke::Node seed_node(const ke::Spec& spec, ke::Status status) {
  ke::Node seed;
  seed.id = 0;
  seed.candidate = {spec.seed.source, ke::Language::c, spec.seed_tunables()};
  seed.evaluation.status = status;
  return seed;
}

}  // namespace

TEST_CASE("hardware counters are kept with the node's resources and shown in words by show and show --node") {
  TempDir dir;
  auto store = std::make_shared<ke::Store>(dir / "counters.db");
  const ke::Spec spec = grid_spec();
  const ke::DeviceInfo device = Surface().device_info();
  const ke::RunId run = store->begin_run(spec, device);
  ke::Node seed = seed_node(spec, ke::Status::ok);
  seed.evaluation.timings = {{100, 100, 100, 0, 5}, {100, 100, 100, 0, 5}};
  // As run --counters leaves them on a new best (tests/fixtures/counters: an H100's row sum).
  seed.evaluation.resources = {{"registers", 30},
                               {"hw_dram_pct", 84},
                               {"hw_dram_gbps", 2822},
                               {"hw_sm_pct", 17},
                               {"hw_achieved_occupancy_pct", 94},
                               {"hw_duration_ns", 48448},
                               {"hw_stall_long_scoreboard_pct", 84}};
  seed.speedup = 1;
  store->record_node(run, seed, {});
  const ke::Checkpoint cp = store->load(run);
  CHECK(cp.graph.node(0).evaluation.resources == seed.evaluation.resources);
  const std::string words =
      "counters: DRAM 84% of peak (2822 GB/s), SM 17% of peak, achieved occupancy 94%, warps "
      "stalled on long_scoreboard 84% of the time (Nsight Compute, one launch of t0: 48.4 us at "
      "its locked clocks)";
  CHECK_MESSAGE(ke::show_node_text(*store, run, 0).find(words) != std::string::npos,
                ke::show_node_text(*store, run, 0));
  CHECK(ke::show_run_text(*store, run).find(words) != std::string::npos);
  CHECK(ke::export_json(*store, run).find("\"hw_dram_pct\": 84") != std::string::npos);
}

TEST_CASE("the database is in WAL mode and carries its schema version and application id") {
  TempDir dir;
  const std::string path = dir / "v.db";
  { ke::Store store(path); }
  CHECK(query_text(path, "PRAGMA journal_mode") == "wal");
  CHECK(query_int(path, "PRAGMA user_version") == ke::Store::kSchemaVersion);
  CHECK(query_int(path, "PRAGMA application_id") == 0x4b45766f);
  CHECK(ke::Store::file_schema_version(path) == ke::Store::kSchemaVersion);
  CHECK(ke::Store::file_schema_version(dir / "absent.db") == 0);
}

TEST_CASE("several runs opening one new database at once all find its tables (optimize's devices, MPI ranks)") {
  TempDir dir;
  for (int round = 0; round < 8; ++round) {
    const std::string path = dir / ("race" + std::to_string(round) + ".db");
    std::atomic<int> waiting{0};
    std::vector<std::string> errors(6);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < errors.size(); ++t) {
      threads.emplace_back([&, t] {
        ++waiting;
        while (waiting.load() < static_cast<int>(errors.size())) std::this_thread::yield();  // open together
        try {
          ke::Store store(path);
        } catch (const ke::Error& e) {
          errors[t] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const std::string& e : errors) CHECK_MESSAGE(e.empty(), e);
    CHECK(query_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'runs'") == 1);
    CHECK(query_int(path, "PRAGMA user_version") == ke::Store::kSchemaVersion);
  }
}

TEST_CASE("a version-1 database is migrated: its runs gain the confirmation and best columns and still load") {
  TempDir dir;
  const std::string path = dir / "v1.db";
  { ke::Store store(path); }
  // What version 1 wrote: no confirmation column, no best column.
  exec_sql(path, "ALTER TABLE runs DROP COLUMN confirmation");
  exec_sql(path, "ALTER TABLE runs DROP COLUMN best_node");
  // Nor the cost and model columns of version 4.
  for (const char* column :
       {"runs DROP COLUMN cost_usd", "runs DROP COLUMN llm_prices", "nodes DROP COLUMN cost_usd",
        "nodes DROP COLUMN model", "mutator_calls DROP COLUMN cost_usd", "mutator_calls DROP COLUMN model"}) {
    exec_sql(path, std::string("ALTER TABLE ") + column);
  }
  // Nor the rounds' tables of version 5.
  exec_sql(path, "DROP TABLE model_requests");
  exec_sql(path, "DROP TABLE model_answers");
  exec_sql(path, "PRAGMA user_version = 1");
  CHECK(ke::Store::file_schema_version(path) == 1);
  {
    ke::Store store(path);
    CHECK(store.runs().empty());
  }
  CHECK(ke::Store::file_schema_version(path) == ke::Store::kSchemaVersion);
  CHECK(query_int(path, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'confirmation'") == 1);
  CHECK(query_int(path, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'best_node'") == 1);
  CHECK(query_int(path,
                  "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('model_requests', "
                  "'model_answers')") == 2);
}

TEST_CASE("show, best and export name the best the run chose, not the graph's fastest, once confirmation moved it") {
  TempDir dir;
  const std::string path = dir / "moved.db";
  auto store = std::make_shared<ke::Store>(path);
  const RunOutcome out = recorded_run(store, grid_spec(), std::make_shared<Surface>(), ke::max_evaluations(1000));
  REQUIRE(out.result.best.has_value());
  const ke::NodeId fastest = *out.result.best;
  ke::NodeId other = -1;  // an ok node that is neither the fastest nor the seed
  for (const ke::Node& n : out.nodes) {
    if (n.id != 0 && n.id != fastest && n.evaluation.status == ke::Status::ok) other = n.id;
  }
  REQUIRE(other > 0);
  const std::string fastest_text = ke::show_run_text(*store, out.run);
  CHECK(fastest_text.find("best: node " + std::to_string(fastest) + ",") != std::string::npos);

  // As the evolver's end does when the fastest is not borne out and the next one is.
  ke::RunResult moved = out.result;
  moved.best = other;
  store->finish_run(out.run, moved);
  CHECK(store->run(out.run).best == std::optional<ke::NodeId>(other));
  CHECK(ke::show_run_text(*store, out.run).find("best: node " + std::to_string(other) + ",") != std::string::npos);
  const auto source = ke::best_kernel_source(*store, out.run);
  REQUIRE(source.has_value());
  CHECK(source->find("node " + std::to_string(other) + ",") != std::string::npos);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE(parser.parse(ke::export_json(*store, out.run)).get(doc) == simdjson::SUCCESS);
  CHECK(doc["best"].get_int64().value() == other);
  CHECK(ke::export_dot(*store, out.run).find("n" + std::to_string(other) + " [label=") != std::string::npos);

  // A stored best that names no ok node (a hand-edited file) falls back to the graph's fastest.
  exec_sql(path, "UPDATE runs SET best_node = 9999");
  CHECK(ke::show_run_text(*store, out.run).find("best: node " + std::to_string(fastest) + ",") != std::string::npos);
}

TEST_CASE("a database of another schema version, or not ours, is refused with the file and the versions") {
  TempDir dir;
  const std::string newer = dir / "newer.db";
  { ke::Store store(newer); }
  exec_sql(newer, "PRAGMA user_version = 7");
  std::string why = error_of([&] { ke::Store store(newer); });
  CHECK(why.find(newer) != std::string::npos);
  CHECK(why.find("version 7") != std::string::npos);
  CHECK(why.find("newer") != std::string::npos);
  CHECK(why.find("up to " + std::to_string(ke::Store::kSchemaVersion)) != std::string::npos);
  try {
    ke::Store store(newer, ke::Store::Mode::read_only);
    FAIL("opened");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::BadUsage);
  }

  const std::string older = dir / "older.db";
  { ke::Store store(older); }
  exec_sql(older, "PRAGMA user_version = 0");
  why = error_of([&] { ke::Store store(older); });
  CHECK(why.find(older) != std::string::npos);
  CHECK(why.find("version 0") != std::string::npos);
  CHECK(why.find("older") != std::string::npos);

  const std::string foreign = dir / "foreign.db";
  exec_sql(foreign, "CREATE TABLE t(x)");
  why = error_of([&] { ke::Store store(foreign); });
  CHECK(why.find("not a KernelEvolve database") != std::string::npos);
  CHECK(query_int(foreign, "SELECT count(*) FROM sqlite_master") == 1);  // untouched

  const std::string text = dir / "notes.txt";
  std::ofstream(text) << "these are not the tables you are looking for, padded to a page or so. "
                      << std::string(200, 'x');
  why = error_of([&] { ke::Store store(text); });
  CHECK(why.find("not a KernelEvolve database") != std::string::npos);

  CHECK(error_of([&] { ke::Store store(dir / "missing.db", ke::Store::Mode::read_only); }).find("no database") !=
        std::string::npos);
}

namespace {

// Every other call answers like a model (a prompt, an answer, tokens); the rest fail.
class Chatty final : public ke::Mutator {
 public:
  std::string name() const override { return "chatty"; }
  ke::Mutation mutate(const ke::MutationContext& ctx) override {
    ke::Mutation m;
    if (++calls_ % 2 == 0) {
      m.error = "the answer had no code block";
      m.prompt = "make it faster (failed " + std::to_string(calls_) + ")";
      m.answer = "I cannot";
      m.tokens = 7;
      return m;
    }
    m = inner_.mutate(ctx);
    m.prompt = "make it faster " + std::to_string(calls_);
    m.answer = "```c\n...\n```";
    m.tokens = 100;
    return m;
  }

 private:
  int calls_ = 0;
  ke::ParamMutator inner_;
};

}  // namespace

TEST_CASE("mutator calls keep their prompt, answer, tokens and time; failures too") {
  TempDir dir;
  auto store = std::make_shared<ke::Store>(dir / "calls.db");
  const RunOutcome out = recorded_run(store, grid_spec(), std::make_shared<Surface>(), ke::max_evaluations(6), true,
                                      std::make_shared<Chatty>());
  const auto calls = store->mutator_calls(out.run);
  int made = 0, failed = 0;
  for (const auto& c : calls) {
    if (c.node) {
      ++made;
      CHECK(c.prompt.find("make it faster") == 0);
      CHECK(c.tokens == 100);
      CHECK(c.error.empty());
      CHECK(c.parents == out.nodes[static_cast<std::size_t>(*c.node)].parents);
    } else {
      ++failed;
      CHECK(c.error == "the answer had no code block");
      CHECK(c.answer == "I cannot");
      CHECK(c.tokens == 7);
      CHECK(c.parents.size() == 1);
    }
    CHECK(c.mutator == "chatty");
    CHECK(c.seconds >= 0);
  }
  CHECK(made == 5);
  CHECK(failed >= 4);
  const ke::RunInfo info = store->run(out.run);
  CHECK(info.tokens == out.result.state.tokens);
  CHECK(info.mutator_failures >= 4);
  // The node keeps its prompt and answer too.
  const ke::Checkpoint cp = store->load(out.run);
  CHECK(cp.graph.node(1).prompt.find("make it faster") == 0);
  CHECK(cp.graph.node(1).tokens == 100);
}

TEST_CASE("a run resumes where it stood: lost nodes leave no gap, totals carry over, nothing is measured twice") {
  TempDir dir;
  const std::string path = dir / "resume.db";
  auto store = std::make_shared<ke::Store>(path);
  const ke::Spec spec = grid_spec();
  // A run's first six nodes, as a killed run leaves them: node 3 was in flight when it died.
  const RunOutcome first = recorded_run(store, spec, std::make_shared<Surface>(), ke::max_evaluations(6), false);
  REQUIRE(first.nodes.size() == 6);
  exec_sql(path, "PRAGMA foreign_keys = ON; DELETE FROM nodes WHERE run_id = " + std::to_string(first.run) +
                     " AND seq = 3 AND uid NOT IN (SELECT parent FROM edges); UPDATE runs SET finished_at = NULL");
  const bool lost_3 = query_int(path, "SELECT count(*) FROM nodes WHERE seq = 3") == 0;
  ke::Checkpoint cp = store->resume(first.run);
  const std::size_t kept = lost_3 ? 5 : 6;
  REQUIRE(cp.graph.size() == kept);
  // Dense again, in the file too.
  CHECK(query_int(path, "SELECT max(seq) FROM nodes WHERE run_id = " + std::to_string(first.run)) ==
        static_cast<std::int64_t>(kept) - 1);
  CHECK(cp.elapsed_s > 0);

  auto evaluator = std::make_shared<Surface>();
  ke::EvolverOptions options;
  options.confirm_rounds = 0;  // counts the search's own calls
  ke::Evolver evolver(spec, evaluator, std::make_shared<ke::ParamMutator>(), ke::make_policy("greedy"),
                      ke::max_evaluations(12), options);
  ke::StoreRecorder recorder(store, first.run);
  evolver.add_observer(&recorder);
  evolver.resume(std::move(cp));
  const ke::RunResult r = evolver.run();
  CHECK(r.state.evaluations == 12);  // the run's total: the stop rule counts the nodes before the resume
  CHECK(evaluator->calls == static_cast<int>(12 - kept));
  CHECK(r.seed == 0);
  CHECK(evolver.graph().size() == 12);
  // Every point once, and the store holds the same twelve nodes.
  std::set<std::string> keys;
  for (const auto& n : evolver.graph().nodes()) keys.insert(n.candidate.key());
  CHECK(keys.size() == 12);
  const ke::Checkpoint after = store->load(first.run);
  REQUIRE(after.graph.size() == 12);
  for (const auto& n : evolver.graph().nodes()) CHECK(after.graph.node(n.id).candidate.key() == n.candidate.key());
  CHECK_FALSE(store->run(first.run).finished_at.empty());
  CHECK(store->integrity_check() == "ok");
}

TEST_CASE("Evolver::resume refuses a checkpoint with pending nodes or without a seed") {
  ke::Evolver evolver(grid_spec(), std::make_shared<Surface>(), std::make_shared<ke::ParamMutator>(),
                      ke::make_policy("greedy"), ke::max_evaluations(3));
  ke::Checkpoint cp;
  ke::Node pending;
  cp.graph.add(pending);
  CHECK_THROWS_AS(evolver.resume(std::move(cp)), ke::Error);
}

TEST_CASE("a new run of the same spec on the same device reuses every measured node") {
  TempDir dir;
  auto store = std::make_shared<ke::Store>(dir / "reuse.db");
  const ke::Spec spec = grid_spec();
  auto first_eval = std::make_shared<Surface>();
  const RunOutcome first = recorded_run(store, spec, first_eval, ke::max_evaluations(1000));
  CHECK(first_eval->calls == 19);

  // Same spec, same device: nothing is measured again, and the result is the same.
  auto second_eval = std::make_shared<Surface>();
  const RunOutcome second = recorded_run(store, spec, second_eval, ke::max_evaluations(1000));
  CHECK(second_eval->calls == 0);
  CHECK(second.nodes.size() == 19);
  REQUIRE(second.result.best.has_value());
  CHECK(second.nodes[static_cast<std::size_t>(*second.result.best)].candidate.key() ==
        first.nodes[static_cast<std::size_t>(*first.result.best)].candidate.key());
  CHECK(second.nodes[5].evaluation.message.find("measured before, by run " + std::to_string(first.run)) !=
        std::string::npos);
  // Each reused node points at the original row.
  CHECK(query_int(dir / "reuse.db", "SELECT count(*) FROM nodes WHERE run_id = " + std::to_string(second.run) +
                                        " AND reused_from IN (SELECT uid FROM nodes WHERE run_id = " +
                                        std::to_string(first.run) + ")") == 19);

  // A wider space of the same problem (other tunable lists, new notes): the old points are reused, the
  // new ones measured.
  ke::Spec wider = spec;
  wider.tunables["B"] = {1, 2, 4, 8, 16};
  wider.constraints = {ke::Expr::parse("A * B <= 128")};
  wider.notes = "wider";
  CHECK(ke::spec_hash(wider) != ke::spec_hash(spec));
  CHECK(ke::measurement_hash(wider) == ke::measurement_hash(spec));
  auto wider_eval = std::make_shared<Surface>();
  recorded_run(store, wider, wider_eval, ke::max_evaluations(1000));
  CHECK(wider_eval->calls == 25 - 1 - 19);  // 5 x 5 points less (16, 16): 24, of which 19 known

  // Another device model, or another problem: everything is measured.
  auto other_device = std::make_shared<Surface>("another processor");
  recorded_run(store, spec, other_device, ke::max_evaluations(1000));
  CHECK(other_device->calls == 19);
  ke::Spec stricter = spec;
  stricter.tolerance.atol = 1e-9;
  CHECK(ke::measurement_hash(stricter) != ke::measurement_hash(spec));
  auto stricter_eval = std::make_shared<Surface>();
  recorded_run(store, stricter, stricter_eval, ke::max_evaluations(1000));
  CHECK(stricter_eval->calls == 19);
  // --no-reuse measures all again.
  auto fresh = std::make_shared<Surface>();
  recorded_run(store, spec, fresh, ke::max_evaluations(1000), false);
  CHECK(fresh->calls == 19);
}

TEST_CASE("crashes and timeouts are measured again; compile errors and wrong answers are not") {
  TempDir dir;
  auto store = std::make_shared<ke::Store>(dir / "flaky.db");
  const ke::Spec spec = grid_spec();
  const ke::DeviceInfo device = Surface().device_info();
  const ke::RunId run = store->begin_run(spec, device);
  ke::Node seed = seed_node(spec, ke::Status::crashed);
  store->record_node(run, seed, {});
  CHECK_FALSE(store->find_measurement(ke::measurement_hash(spec), device, seed.candidate).has_value());
  seed.evaluation.status = ke::Status::compile_error;
  store->record_node(run, seed, {});  // recorded again: replaced
  CHECK(store->run(run).nodes == 1);
  const auto found = store->find_measurement(ke::measurement_hash(spec), device, seed.candidate);
  REQUIRE(found.has_value());
  CHECK(found->evaluation.status == ke::Status::compile_error);
}

namespace {

// Two classes of device, as MultiDeviceEvaluator has them; each evaluation says where it was measured.
class TwoClasses final : public ke::FitnessEvaluator {
 public:
  std::atomic<int> calls{0};
  ke::Evaluation evaluate(const ke::Candidate& c, std::uint64_t seed) override { return evaluate_on(0, c, seed); }
  ke::Evaluation evaluate_on(std::size_t i, const ke::Candidate&, std::uint64_t) override {
    ++calls;
    ke::Evaluation e;
    e.status = ke::Status::ok;
    e.timings = {{i ? 5.0 : 50.0, 1, 1, 0, 1}, {1, 1, 1, 0, 1}};
    e.device = device_classes()[i];
    return e;
  }
  ke::DeviceInfo device_info() override { return {"gpu:0", "gpu", "model A", 1, 0, 0, 0, 0, {}}; }
  std::vector<std::string> device_classes() override { return {"gpu model A", "gpu model B"}; }
};

}  // namespace

TEST_CASE("over several classes of device, each class reuses only its own measurements") {
  TempDir dir;
  auto store = std::make_shared<ke::Store>(dir / "classes.db");
  const ke::Spec spec = grid_spec();
  auto inner = std::make_shared<TwoClasses>();
  const ke::RunId run = store->begin_run(spec, inner->device_info());
  ke::Node seed;
  seed.id = 0;
  seed.candidate = {spec.seed.source, ke::Language::c, spec.seed_tunables()};
  seed.evaluation = inner->evaluate_on(1, seed.candidate, 0);  // measured on model B
  store->record_node(run, seed, {});
  CHECK(store->load(run).graph.node(0).evaluation.device == "gpu model B");
  inner->calls = 0;
  ke::ReusingEvaluator reusing(inner, store, spec);
  CHECK(reusing.device_classes() == inner->device_classes());
  const ke::Evaluation on_b = reusing.evaluate_on(1, seed.candidate, 1);
  CHECK(inner->calls == 0);
  CHECK(on_b.timings[0].median_us == 5.0);
  CHECK(on_b.device == "gpu model B");
  const ke::Evaluation on_a = reusing.evaluate_on(0, seed.candidate, 1);  // model A never measured it
  CHECK(inner->calls == 1);
  CHECK(on_a.timings[0].median_us == 50.0);
  reusing.evaluate(seed.candidate, 2);  // evaluate() is the primary device, model A: measured again
  CHECK(inner->calls == 2);
}

TEST_CASE("the hashes: what makes a spec the same") {
  const ke::Spec a = grid_spec();
  ke::Spec b = a;
  b.path = "/elsewhere/spec.json";  // where the file lives does not matter
  CHECK(ke::spec_hash(a) == ke::spec_hash(b));
  b.workloads.push_back({{"n", 7}});
  CHECK(ke::spec_hash(a) != ke::spec_hash(b));
  CHECK(ke::measurement_hash(a) != ke::measurement_hash(b));
  b = a;
  b.seed.source += "\n// another seed";
  CHECK(ke::spec_hash(a) != ke::spec_hash(b));
  CHECK(ke::measurement_hash(a) == ke::measurement_hash(b));  // points are keyed by their own source
  CHECK(ke::default_store_path("problems/x/spec.json") == "problems/x/spec.json.kernelevolve.db");
}

// ---- through the command-line tool ---------------------------------------------------------------

namespace {

const auto cli = ke_test::run_cli;

std::string fixture(const std::string& name) { return std::string(KE_FIXTURES) + "/" + name; }

simdjson::dom::element parse_json(simdjson::dom::parser& parser, const std::string& text) {
  simdjson::dom::element doc;
  REQUIRE_MESSAGE(parser.parse(text).get(doc) == simdjson::SUCCESS, text);
  return doc;
}

}  // namespace

TEST_CASE("show, best and export of a real run") {
  TempDir dir;
  const std::string db = dir / "colsum.db";
  const auto run = cli("run " + fixture("e2e/colsum.json") + " --db " + db + " --max-evals 6 --in-process --json");
  REQUIRE_MESSAGE(run.code == 0, run.err);
  simdjson::dom::parser parser;
  const auto report = parse_json(parser, run.out);
  const std::int64_t best_node = report["best"]["node"].get_int64().value();

  const auto show = cli("show " + db);
  REQUIRE_MESSAGE(show.code == 0, show.err);
  for (const char* want : {"run 1 of", "colsum", "id", "parent", "mutator", "status", "t0", "t1", "speedup",
                           "M=1024 N=1024", "lineage of the best", "best: node "}) {
    CHECK_MESSAGE(show.out.find(want) != std::string::npos, want << "\n" << show.out);
  }
  CHECK(show.out.find("best: node " + std::to_string(best_node)) != std::string::npos);
  // One table row per node: rows start with the id right-aligned.
  int rows = 0;
  std::istringstream lines(show.out);
  for (std::string line; std::getline(lines, line);)
    rows += line.size() > 7 && line[5] != ' ' && line[6] == ' ' && std::isdigit(line[5]);
  CHECK(rows >= 6);
  CHECK(cli("show " + db + " --limit 2").out.find("more nodes") != std::string::npos);

  // best: a file that compiles alone, with the best tunables as guarded #defines.
  const std::string kernel = dir / "best.c";
  const auto best = cli("best " + db + " -o " + kernel);
  REQUIRE_MESSAGE(best.code == 0, best.err);
  std::ifstream in(kernel);
  const std::string source((std::istreambuf_iterator<char>(in)), {});
  const std::int64_t block = report["best"]["tunables"]["BLOCK"].get_int64().value();
  CHECK(source.find("#ifndef BLOCK\n#define BLOCK " + std::to_string(block) + "\n#endif") != std::string::npos);
  CHECK(source.find("void colsum(") != std::string::npos);
  if (std::system("cc --version > /dev/null 2>&1") == 0) {
    CHECK(std::system(("cc -std=c11 -Wall -Werror -c -o " + dir / "best.o" + " " + kernel).c_str()) == 0);
  }
  CHECK(cli("best " + db).out == source);  // standard output by default

  const auto json = cli("export " + db + " --format json");
  REQUIRE_MESSAGE(json.code == 0, json.err);
  simdjson::dom::parser export_parser;  // a parser's elements live until its next parse
  const auto doc = parse_json(export_parser, json.out);
  CHECK(doc["nodes"].get_array().value().size() == report["evaluations"].get_uint64().value());
  CHECK(doc["best"].get_int64().value() == best_node);
  CHECK(doc["run"]["spec"].get_string().value() == "colsum");
  CHECK(doc["sources"].get_array().value().size() == 1);
  CHECK(doc["lineage"].get_array().value().at(0).get_int64().value() == 0);

  const std::string dot_file = dir / "graph.dot";
  const auto dot = cli("export " + db + " --format dot -o " + dot_file);
  REQUIRE_MESSAGE(dot.code == 0, dot.err);
  std::ifstream dot_in(dot_file);
  const std::string graph((std::istreambuf_iterator<char>(dot_in)), {});
  CHECK(graph.rfind("digraph", 0) == 0);
  CHECK(graph.find("n0 -> n") != std::string::npos);
  CHECK(graph.find("#ffd700") != std::string::npos);  // the best, in gold
  if (std::system("dot -V > /dev/null 2>&1") == 0) {
    CHECK(std::system(("dot -Tsvg -o /dev/null " + dot_file).c_str()) == 0);
  }

  // Usage errors.
  CHECK(cli("export " + db + " --format yaml").code == 2);
  CHECK(cli("show " + dir / "none.db").code == 2);
  CHECK(cli("show " + db + " --run 9").code == 2);
  CHECK(cli("show").code == 2);
}

TEST_CASE(
    "the CLI: --resume goes on with the run, a new run reuses measurements, the default database sits beside the spec") {
  TempDir dir;
  const std::string db = dir / "cli.db";
  const std::string spec = fixture("e2e/colsum.json");
  const auto first = cli("run " + spec + " --db " + db + " --max-evals 3 --in-process --json");
  REQUIRE_MESSAGE(first.code == 0, first.err);
  const auto resumed = cli("run " + spec + " --db " + db + " --resume --max-evals 5 --in-process --json");
  REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, resumed.out);
  CHECK(doc["run"].get_int64().value() == 1);
  CHECK(doc["evaluations"].get_int64().value() == 5);
  CHECK(query_int(db, "SELECT count(*) FROM runs") == 1);
  CHECK(query_int(db, "SELECT count(*) FROM nodes") == 5);

  const auto second = cli("run " + spec + " --db " + db + " --max-evals 5 --in-process");
  REQUIRE_MESSAGE(second.code == 0, second.err);
  // The same seed draws the same first choices, so at least the first three points are known.
  CHECK(second.out.find("measurements reused") != std::string::npos);
  CHECK(query_int(db, "SELECT count(*) FROM nodes WHERE run_id = 2 AND reused_from IS NOT NULL") >= 3);

  // Resume mistakes are usage errors that say what to do.
  const auto other = cli("run " + fixture("store/colsum_wide.json") + " --db " + db + " --resume --in-process");
  CHECK(other.code == 2);
  CHECK(other.err.find("no run of this spec") != std::string::npos);
  const auto wrong_run =
      cli("run " + fixture("store/colsum_wide.json") + " --db " + db + " --resume --run 1 --in-process");
  CHECK(wrong_run.code == 2);
  CHECK(wrong_run.err.find("another spec") != std::string::npos);
  CHECK(cli("run " + spec + " --db " + db + " --run 1").code == 2);
  CHECK(cli("run " + spec + " --no-db --resume").code == 2);

  // A newer database is refused by the tool too, exit 2, naming the file.
  const std::string newer = dir / "newer.db";
  { ke::Store s(newer); }
  exec_sql(newer, "PRAGMA user_version = 99");
  const auto refused = cli("run " + spec + " --db " + newer + " --in-process");
  CHECK(refused.code == 2);
  CHECK(refused.err.find(newer) != std::string::npos);
  CHECK(refused.err.find("99") != std::string::npos);

  // No --db: beside the spec (here a copy of it in the temporary folder).
  for (const char* f : {"colsum.json", "colsum_ref.c", "colsum_seed.c"})
    fs::copy_file(fixture(std::string("e2e/") + f), dir / f);
  const auto beside = cli("run " + dir / "colsum.json" + " --max-evals 2 --in-process");
  REQUIRE_MESSAGE(beside.code == 0, beside.err);
  CHECK(fs::exists(dir / "colsum.json.kernelevolve.db"));
  // --no-db writes nothing.
  fs::remove(dir / "colsum.json.kernelevolve.db");
  fs::remove(dir / "colsum.json.kernelevolve.db-wal");
  fs::remove(dir / "colsum.json.kernelevolve.db-shm");
  CHECK(cli("run " + dir / "colsum.json" + " --max-evals 2 --in-process --no-db").code == 0);
  CHECK_FALSE(fs::exists(dir / "colsum.json.kernelevolve.db"));
}

TEST_CASE("a run killed with SIGKILL mid-search reopens clean, resumes, and keeps its best") {
  TempDir dir;
  const std::string db = dir / "killed.db";
  const std::string spec = fixture("store/colsum_wide.json");
  const std::string cli_path = KE_CLI;
  std::vector<std::string> args = {cli_path, "run", spec, "--db", db, "--max-evals", "80", "--jobs", "2", "--json"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  REQUIRE(posix_spawn(&pid, cli_path.c_str(), &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);

  // Wait for a few committed nodes, reading the file while the run writes it, then kill it. The deadline only
  // bounds a run that never commits: some seconds' work, given minutes for a sanitizer on a loaded machine.
  std::int64_t committed = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (committed < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!fs::exists(db)) continue;
    try {
      ke::Store reader(db, ke::Store::Mode::read_only);
      const auto runs = reader.runs();
      committed = runs.empty() ? 0 : runs.front().nodes;
    } catch (const ke::Error&) {
      // the schema may not be there yet
    }
  }
  REQUIRE(committed >= 4);
  REQUIRE(::kill(pid, SIGKILL) == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE_MESSAGE(WIFSIGNALED(status), "the run ended before it was killed");
  CHECK(WTERMSIG(status) == SIGKILL);

  double best_before = 0;
  std::string best_key;
  std::int64_t nodes_before = 0;
  {
    ke::Store store(db, ke::Store::Mode::read_only);
    CHECK(store.integrity_check() == "ok");
    const auto info = store.run(1);
    CHECK(info.finished_at.empty());  // it never finished
    const ke::Checkpoint cp = store.load(1);
    nodes_before = static_cast<std::int64_t>(cp.graph.size());
    CHECK(nodes_before >= committed);
    REQUIRE(cp.graph.best().has_value());
    best_before = cp.graph.node(*cp.graph.best()).speedup;
    best_key = cp.graph.node(*cp.graph.best()).candidate.key();
    CHECK(cp.graph.node(0).mutator == "seed");
  }
  CHECK(query_text(db, "PRAGMA integrity_check") == "ok");

  const auto resumed = cli("run " + spec + " --db " + db + " --resume --max-evals " + std::to_string(nodes_before + 3) +
                           " --jobs 2 --json");
  REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  simdjson::dom::parser parser;
  const auto doc = parse_json(parser, resumed.out);
  CHECK(doc["run"].get_int64().value() == 1);
  CHECK(doc["evaluations"].get_int64().value() == nodes_before + 3);
  // The search's figure keeps its best; the reported one is the confirmation's (the best and the seed
  // timed again side by side), which may differ from a seed timed long ago. On a loaded machine the
  // confirmation may not bear the best out, and then the next best is tried: the graph still holds the
  // best (checked below), and the report says which node it confirmed and which it passed over. What is
  // checked is that rule, not a figure (issue 27): nodes are tried fastest first by the search's figure, and
  // only those that claim to beat the seed; the first borne out is reported; when none is, the fastest tried.
  const std::int64_t reported = doc["best"]["node"].get_int64().value();
  const double reported_figure = doc["best"]["search_speedup"].get_double().value();
  const bool confirmed = doc["best"]["confirmed"].get_bool().value();
  std::set<std::int64_t> passed_over;
  const simdjson::dom::array unconfirmed = doc["unconfirmed"].get_array().value();  // a local: see test_cli
  for (simdjson::dom::element c : unconfirmed) {
    passed_over.insert(c["node"].get_int64().value());
    CHECK(c["search_speedup"].get_double().value() > 1.0);
    if (confirmed) CHECK(c["search_speedup"].get_double().value() >= reported_figure * (1 - 1e-5));  // 6 digits
  }
  if (!confirmed) {
    MESSAGE("the resumed run's best was not borne out by its confirmation; the next best is reported");
    CHECK((reported == 0 || passed_over.count(reported) == 1));
  }
  CHECK((reported == 0 || reported_figure > 1.0));

  ke::Store store(db);
  CHECK(store.integrity_check() == "ok");
  CHECK(store.runs().size() == 1);
  const ke::Checkpoint after = store.load(1);
  CHECK(static_cast<std::int64_t>(after.graph.size()) == nodes_before + 3);
  bool best_still_there = false;
  for (const auto& n : after.graph.nodes())
    best_still_there |= n.candidate.key() == best_key && n.speedup == best_before;
  CHECK(best_still_there);
  double best_after = 0;
  for (const auto& n : after.graph.nodes()) best_after = std::max(best_after, n.speedup);
  CHECK(best_after >= best_before);  // the search's best is never lost by a kill and a resume
  // Borne out, the reported node is the fastest by the search's figure but for those passed over before it.
  if (confirmed) {
    double fastest_left = 0;
    for (const auto& n : after.graph.nodes()) {
      if (n.evaluation.status == ke::Status::ok && passed_over.count(n.id) == 0)
        fastest_left = std::max(fastest_left, n.speedup);
    }
    CHECK(reported_figure >= fastest_left * (1 - 1e-5));
  }
  CHECK_FALSE(store.run(1).finished_at.empty());
}

TEST_CASE("confirmation measures again even where every node is reused, and the run keeps it") {
  TempDir dir;
  auto store = std::make_shared<ke::Store>(dir / "confirm.db");
  const ke::Spec spec = grid_spec();
  recorded_run(store, spec, std::make_shared<Surface>(), ke::max_evaluations(1000));
  auto again = std::make_shared<Surface>();
  const RunOutcome second = recorded_run(store, spec, again, ke::max_evaluations(1000), true, nullptr, 3);
  // Every search point came from the store; the best and the seed were each measured three times more.
  CHECK(again->calls == 6);
  REQUIRE(second.result.confirmation.has_value());
  CHECK(second.result.confirmation->confirmed);
  const ke::RunInfo info = store->run(second.run);
  REQUIRE(info.confirmation.size() == 1);
  CHECK(info.confirmation[0].find("confirmed: node " + std::to_string(second.result.confirmation->node)) == 0);
  CHECK(ke::show_run_text(*store, second.run, 0).find("confirmed: node") != std::string::npos);
}
