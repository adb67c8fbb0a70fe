// A stored program as a function the host calls (callable.hpp): a run's best node, a CPU program with a
// temporary, loaded from the database and called on the host's own buffers; its provenance; sizes it was not
// verified on refused unless asked; nodes that cannot be loaded refused with a reason.
#include <doctest/doctest.h>

#include <kernelevolve/callable.hpp>
#include <kernelevolve/device.hpp>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>

#include <cmath>
#include <fstream>
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

}  // namespace

TEST_CASE(
    "a stored program is called on the host's own buffers, refuses sizes it was not verified on, and says "
    "where it came from") {
  ke_test::TempDir dir("ke_callable");
  {
    std::ofstream(dir / "centre_ref.c") << ke_test::kCentreReference;
    std::ofstream(dir / "centre_seed.c") << ke_test::centre_two_pass();
    std::ofstream(dir / "centre.json") << ke_test::kCentreSpecJson;
  }
  const std::string db = dir / "centre.db";
  const auto run = ke_test::run_cli_in("", "run " + dir / "centre.json" + " --db " + db + " --max-evals 3");
  REQUIRE_MESSAGE(run.code == 0, run.err);

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
