// A stored program as a function the host calls (callable.hpp): a run's best node, a CPU program with a
// temporary, loaded from the database and called on the host's own buffers; its provenance; sizes it was not
// verified on refused unless asked; nodes that cannot be loaded refused with a reason. Issue 49: a program that
// keeps state in a temporary is not verified (the evaluator keeps temporaries from call to call, as a call
// does); null data and impossible sizes are refused by name; a node edited in its database after the run, or
// whose evidence is not whole, is not loaded.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <kernelevolve/callable.hpp>
#include <kernelevolve/device.hpp>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "support/centre_program.hpp"
#include "support/cli_runner.hpp"
#include "support/error_of.hpp"

namespace ke = kernelevolve;
using ke_test::error_of;

namespace {

// Calls `program` on n host floats; the largest error against x - mean(x).
double call_and_check(ke::CallableProgram& program, std::int64_t n, bool any_shape = false) {
  std::vector<float> x(static_cast<std::size_t>(n)), y(x.size(), -1.0f);
  double sum = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sum += x[i] = static_cast<float>((i * 37) % 101) * 0.25f;
  void* xp = x.data();
  void* yp = y.data();
  void* args[] = {&xp, &yp, &n};
  program.call(args, any_shape);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(y[i] - (x[i] - sum / n)));
  return worst;
}

// A copy of `db` at `to` (SQLite's backup: whatever its write-ahead log holds too), changed by `sql` behind the
// store's back, as a person with sqlite3 would.
std::string edited(const std::string& db, const std::string& to, const std::string& sql) {
  std::filesystem::remove(to);
  sqlite3* from = nullptr;
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &from, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_open(to.c_str(), &handle) == SQLITE_OK);
  sqlite3_backup* backup = sqlite3_backup_init(handle, "main", from, "main");
  REQUIRE(backup != nullptr);
  CHECK(sqlite3_backup_step(backup, -1) == SQLITE_DONE);
  sqlite3_backup_finish(backup);
  sqlite3_close(from);
  char* err = nullptr;
  const int rc = sqlite3_exec(handle, sql.c_str(), nullptr, nullptr, &err);
  const std::string message = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(handle);
  REQUIRE_MESSAGE(rc == SQLITE_OK, message);
  return to;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a program that keeps state in a temporary from call to call is incorrect; an honest one is ok") {
  // Issue 49: the evaluator poisoned temporaries before every call and a stored program's call only once, so a
  // program that skips its work when its temporary is not NaN was `ok`, and then answered a user's second call
  // from the first. Now a workload's temporaries are poisoned once, as a call's are, and the trials' fresh inputs
  // catch it.
  const ke::Spec spec = ke_test::centre_spec();
  ke::EvalOptions options;
  options.trials = 3;
  options.max_reps = 10;
  options.target_ms = 1;
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), options);
  const std::string head = "void partial_sums(const float* x, double* partial, int64_t n, int64_t chunk) {\n";
  std::string stateful = ke_test::centre_two_pass();
  REQUIRE(has(stateful, head));
  stateful.insert(stateful.find(head) + head.size(), "  if (partial[0] == partial[0]) return;  /* done before */\n");
  const ke::Evaluation cheat = evaluator.evaluate(ke::Candidate{stateful, ke::Language::c, {{"CHUNK", 256}}}, 7);
  CHECK_MESSAGE(cheat.status == ke::Status::incorrect, cheat.message);
  // The honest program, whose steps write every temporary they read, stays ok at both points.
  for (const std::int64_t chunk : {256, 1024}) {
    const ke::Evaluation honest =
        evaluator.evaluate(ke::Candidate{ke_test::centre_two_pass(), ke::Language::c, {{"CHUNK", chunk}}}, 7);
    CHECK_MESSAGE(honest.status == ke::Status::ok, honest.message);
  }
}

TEST_CASE(
    "a stored program is called on the host's own buffers, refuses sizes it was not verified on, and says "
    "where it came from") {
  ke_test::TempDir dir("ke_callable");
  const std::string db = ke_test::centre_run(dir);

  auto cpu = ke::open_device("cpu");
  const auto program = ke::CallableProgram::load(db, cpu);
  const ke::Provenance& p = program->provenance();
  CHECK(p.database == db);
  CHECK(p.run == 1);
  CHECK(p.node >= 0);
  CHECK(p.problem == "centre");
  CHECK(p.device_class == ke::FitnessEvaluator::device_class(cpu->info()));
  CHECK(p.speedup > 0);
  CHECK(call_and_check(*program, 10000) < 1e-3);
  CHECK(call_and_check(*program, 777) < 1e-3);

  // 500 was never verified: refused, naming what was; run anyway when asked.
  const std::string refused = error_of([&] { call_and_check(*program, 500); });
  CHECK_MESSAGE(refused.find("n = 500") != std::string::npos, refused);
  CHECK(refused.find("n = 777") != std::string::npos);
  CHECK(refused.find("any_shape") != std::string::npos);
  CHECK(call_and_check(*program, 500, true) < 1e-3);
  // A call that repeats the last one's sizes skips the check, but not the refusal: 500 again, without any_shape,
  // is still refused, and a verified size after it runs at its own size.
  CHECK(call_and_check(*program, 500, true) < 1e-3);
  CHECK(error_of([&] { call_and_check(*program, 500); }).find("n = 500") != std::string::npos);
  CHECK(call_and_check(*program, 777) < 1e-3);
  CHECK(call_and_check(*program, 777) < 1e-3);
  CHECK(call_and_check(*program, 10000) < 1e-3);
  // A null argument is named even when the sizes repeat.
  {
    std::int64_t n = 10000;
    std::vector<float> y(10000);
    void* yp = y.data();
    void* args[] = {nullptr, &yp, &n};
    CHECK(error_of([&] { program->call(args); }).find("no argument for 'x'") != std::string::npos);
  }

  // A program holds only where its constraints do (a size Inductor specialised its code to): at a shape outside
  // them it is refused even with any_shape, naming the constraint.
  {
    std::string spec = ke_test::kCentreSpecJson;
    const std::string tunables = "\"tunables\":";
    spec.insert(spec.find(tunables), "\"constraints\": [\"n >= 700\"], ");
    std::ofstream(dir / "held.json") << spec;
    const std::string held_db = dir / "held.db";
    const auto held_run = ke_test::run_cli_in("", "run " + dir / "held.json" + " --db " + held_db + " --max-evals 2");
    REQUIRE_MESSAGE(held_run.code == 0, held_run.err);
    const auto held = ke::CallableProgram::load(held_db, cpu);
    CHECK(call_and_check(*held, 900, true) < 1e-3);
    const std::string outside = error_of([&] { call_and_check(*held, 500, true); });
    CHECK_MESSAGE(outside.find("\"n >= 700\" is false") != std::string::npos, outside);
  }

  // Node 0, asked for by number, is the seed: the same program at the first CHUNK.
  const auto seed = ke::CallableProgram::load(db, cpu, {1, 0});
  CHECK(seed->provenance().node == 0);
  CHECK(call_and_check(*seed, 10000) < 1e-3);

  // What cannot be loaded says why, naming the database, run and node.
  std::string why = error_of([&] { ke::CallableProgram::load(db, cpu, {1, 99}); });
  CHECK_MESSAGE(why.find("has no node 99") != std::string::npos, why);
  CHECK(why.find(db) != std::string::npos);
  why = error_of([&] { ke::CallableProgram::load(db, cpu, {7, std::nullopt}); });
  CHECK_FALSE(why.empty());
  why = error_of([&] { ke::CallableProgram::load((dir / "none.db"), cpu); });
  CHECK_FALSE(why.empty());
}

TEST_CASE("a call with null data or an impossible size is refused by name, never run (issue 49)") {
  ke_test::TempDir dir("ke_callable_args");
  const std::string db = ke_test::centre_run(dir);
  const auto program = ke::CallableProgram::load(db, ke::open_device("cpu"));
  // Calls on changing inputs: each answers its own (a temporary keeps nothing a call depends on).
  CHECK(call_and_check(*program, 10000) < 1e-3);
  std::vector<float> x(10000, 1.0f), y(10000, 0.0f);
  std::int64_t n = 10000;
  void* xp = x.data();
  void* yp = y.data();
  void* args[] = {&xp, &yp, &n};
  for (float v : {1.0f, 3.0f, -2.0f}) {
    std::fill(x.begin(), x.end(), v);
    x[0] = v + 10000.0f;  // mean v + 1
    program->call(args);
    CHECK(std::fabs(y[1] + 1.0f) < 1e-3);
  }
  // Null data, first call at these sizes and a repeat of them: refused, naming the buffer.
  for (int repeat = 0; repeat < 2; ++repeat) {
    void* null_data = nullptr;
    void* with_null_x[] = {&null_data, &yp, &n};
    std::string why = error_of([&] { program->call(with_null_x); });
    CHECK_MESSAGE(has(why, "'x' is NULL"), why);
    void* with_null_y[] = {&xp, &null_data, &n};
    why = error_of([&] { program->call(with_null_y); });
    CHECK_MESSAGE(has(why, "'y' is NULL"), why);
    program->call(args);
  }
  // Sizes read as integers: INT64_MAX is named as it is, and with any_shape refused for the bytes it implies.
  n = std::numeric_limits<std::int64_t>::max();
  std::string why = error_of([&] { program->call(args); });
  CHECK_MESSAGE(has(why, "n = 9223372036854775807"), why);
  CHECK_FALSE(has(why, "-9223372036854775808"));
  why = error_of([&] { program->call(args, /*any_shape=*/true); });
  CHECK_MESSAGE(has(why, "'x' would hold more than 2^63 bytes"), why);
  n = -5;
  why = error_of([&] { program->call(args, /*any_shape=*/true); });
  CHECK_MESSAGE(has(why, "size 'n' is -5"), why);
  ke::Bindings sizes;
  std::string unverified;
  CHECK(has(error_of([&] { program->verified(args, sizes, unverified); }), "size 'n' is -5"));
  CHECK(has(error_of([&] { program->shape(0, {{"n", -5}}); }), "size 'n' is -5"));
  // Nothing refused has spoiled the program: a right call still runs.
  n = 10000;
  program->call(args);
  CHECK(call_and_check(*program, 777) < 1e-3);
}

TEST_CASE("a node edited in its database after the run, or whose evidence is not whole, is not loaded (issue 49)") {
  ke_test::TempDir dir("ke_callable_load");
  const std::string db = ke_test::centre_run(dir);
  auto cpu = ke::open_device("cpu");
  // Node 1 (a child of the seed, another CHUNK) is the one edited; node 0 beside it is not.
  const ke::CallableChoice one{1, 1};
  REQUIRE(ke::CallableProgram::load(db, cpu, one)->provenance().node == 1);
  const std::string node = "run_id = 1 AND seq = 1";
  const std::string row = "(SELECT uid FROM nodes WHERE " + node + ")";

  // Its source changed (a line a person could edit): it matches the digest it was filed under no more.
  std::string path = edited(db, dir / "source.db",
                            "UPDATE sources SET text = replace(text, 'partial[c] = s;', 'partial[c] = s + 1;') "
                            "WHERE id = (SELECT source_id FROM nodes WHERE " +
                                node + ")");
  std::string why = error_of([&] { ke::CallableProgram::load(path, cpu, one); });
  CHECK_MESSAGE(has(why, "sources.hash"), why);
  CHECK(has(why, "node 1"));
  CHECK(has(why, path));
  // Its tunables changed: the candidate is not the one its key names.
  path = edited(db, dir / "tunables.db", "UPDATE nodes SET tunables = '{\"CHUNK\": 999}' WHERE " + node);
  why = error_of([&] { ke::CallableProgram::load(path, cpu, one); });
  CHECK_MESSAGE(has(why, "nodes.key"), why);
  CHECK(has(why, "node 1"));
  // The node beside an edited one still loads.
  CHECK(ke::CallableProgram::load(path, cpu, {1, 0})->provenance().node == 0);
  // A crashed node (no verification's worst element, no timings) whose status was edited to ok.
  path = edited(db, dir / "crashed.db",
                "UPDATE nodes SET status = 'ok', worst = NULL, message = 'crashed: signal 11' WHERE " + node +
                    "; DELETE FROM timings WHERE node = " + row);
  why = error_of([&] { ke::CallableProgram::load(path, cpu, one); });
  CHECK_MESSAGE(has(why, "no recorded evaluation"), why);
  CHECK(has(why, "node 1"));
  // A workload's timing gone: named.
  path = edited(db, dir / "untimed.db", "DELETE FROM timings WHERE workload = 1 AND node = " + row);
  why = error_of([&] { ke::CallableProgram::load(path, cpu, one); });
  CHECK_MESSAGE(has(why, "no timing of workload 1"), why);
  // The run's first node's timings gone: node 1 has no speedup left to show.
  path = edited(db, dir / "no_seed.db", "DELETE FROM timings WHERE node = (SELECT uid FROM nodes WHERE seq = 0)");
  why = error_of([&] { ke::CallableProgram::load(path, cpu, one); });
  CHECK_MESSAGE(has(why, "speedup"), why);
  // The source changed together with its sources.hash: still not the code its nodes.key was taken of.
  {
    const std::string changed = ke::find_stored_program(db, one).candidate.source + "/* edited */\n";
    path = edited(db, dir / "rehashed.db", "SELECT 1");
    sqlite3* handle = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &handle) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    const std::string sql =
        "UPDATE sources SET text = ?1, hash = ?2 WHERE id = (SELECT source_id FROM nodes WHERE " + node + ")";
    REQUIRE(sqlite3_prepare_v2(handle, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    const std::string hash = ke::Store::source_hash(changed);
    sqlite3_bind_text(st, 1, changed.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, hash.c_str(), -1, SQLITE_TRANSIENT);
    CHECK(sqlite3_step(st) == SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(handle);
    why = error_of([&] { ke::CallableProgram::load(path, cpu, one); });
    CHECK_MESSAGE(has(why, "nodes.key"), why);
  }
  // The database as the run left it loads.
  CHECK(ke::CallableProgram::load(db, cpu, one)->provenance().node == 1);
}
