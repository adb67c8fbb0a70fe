// Sweeps: the tunable space they measure, the file's round trip and its refusals, run_sweep's resumption
// and limits over a synthetic evaluator, and `kernelevolve sweep` on a real CPU spec: limited, resumed,
// complete, and refused for another spec.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <kernelevolve/error.hpp>
#include <kernelevolve/mutator.hpp>
#include <kernelevolve/store.hpp>
#include <kernelevolve/sweep.hpp>
#include <mutex>
#include <set>
#include <sstream>
#include <string>

#include "support/cli_runner.hpp"
#include "support/grid_spec.hpp"

namespace ke = kernelevolve;
using ke_test::run_cli;
using Outcome = ke_test::CliOutcome;
namespace fs = std::filesystem;

namespace {

// A time surface over the grid spec's A and B: fastest at A = 4, B = 2; B = 8 with A = 8 "crashes".
class Surface final : public ke::FitnessEvaluator {
 public:
  ke::Evaluation evaluate(const ke::Candidate& c, std::uint64_t) override {
    calls += 1;
    {
      std::lock_guard<std::mutex> lock(mutex);
      seen.push_back(c.tunables);
    }
    if (throw_after >= 0 && calls > throw_after) throw ke::Error(ke::ErrorCode::Internal, "the device went away");
    ke::Evaluation e;
    const auto a = c.tunables.at("A"), b = c.tunables.at("B");
    if (a == 8 && b == 8) {
      e.status = ke::Status::crashed;
      e.message = "killed by signal 11\t(SIGSEGV)\nin the kernel";
      return e;
    }
    e.status = ke::Status::ok;
    const double us = 10 + std::abs(static_cast<double>(a) - 4) + std::abs(static_cast<double>(b) - 2);
    e.timings = {{us, us, us, 0, 5}, {3 * us, 3 * us, 3 * us, 0, 5}};
    return e;
  }
  ke::DeviceInfo device_info() override { return {"fake:0", "fake", "Surface 1", 1, 0, 0, 0, 0, {}}; }

  std::atomic<int> calls{0};
  int throw_after = -1;
  std::mutex mutex;
  std::vector<ke::Bindings> seen;
};

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("ke_sweep_" + std::to_string(getpid()) + "_" + name)).string();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string fixture(const std::string& name) { return std::string(KE_FIXTURES) + "/" + name; }

}  // namespace

TEST_CASE("the tunable space: valid points only, the seed's first, each once, live tunables only") {
  ke::Spec spec = ke::testing::grid_spec();
  spec.tunables["DEAD"] = {7, 9};  // the seed reads no DEAD: it is no axis of the space
  spec.validate();
  const auto space = ke::tunable_space(spec);
  // 5 x 4 points of A and B, less those with A * B > 64: (16, 8).
  CHECK(space.size() == 19);
  CHECK(space.front() == ke::Bindings{{"A", 1}, {"B", 1}});
  std::set<ke::Bindings> distinct(space.begin(), space.end());
  CHECK(distinct.size() == space.size());
  for (const auto& p : space) {
    CHECK(p.size() == 2);
    CHECK(spec.satisfies_constraints(p));
  }
  CHECK(distinct.count({{"A", 16}, {"B", 8}}) == 0);
  CHECK_THROWS_AS(ke::tunable_space(spec, 10), ke::Error);
}

TEST_CASE("a sweep file reads back what was written, and a killed sweep's cut line is ignored") {
  const ke::Spec spec = ke::testing::grid_spec();
  const std::string path = temp_path("roundtrip.tsv");
  ke::SweepPoint ok{{{"A", 4}, {"B", 2}}, ke::Status::ok, {12.5, 0.000123}, ""};
  ke::SweepPoint bad{{{"A", 8}, {"B", 8}}, ke::Status::crashed, {}, "killed\tby\nsignal 11"};
  {
    std::ofstream out(path, std::ios::binary);
    out << ke::sweep_header(spec, {"A", "B"}, "grid.json", "fake Surface 1", "v1-2-gabc", "2025-01-01T00:00:00Z")
        << ke::sweep_line({"A", "B"}, ok) << ke::sweep_line({"A", "B"}, bad) << "16\t4\tok\t1";  // cut short
  }
  const ke::Sweep s = ke::read_sweep(path);
  CHECK(s.spec_name == "grid");
  CHECK(s.spec_file == "grid.json");
  CHECK(s.spec_hash == ke::spec_hash(spec));
  const ke::Spec back = ke::sweep_spec(s);  // the spec travels with the sweep
  CHECK(ke::spec_hash(back) == s.spec_hash);
  CHECK(back.tunables == spec.tunables);
  CHECK(s.device == "fake Surface 1");
  CHECK(s.commit == "v1-2-gabc");
  CHECK(s.started == "2025-01-01T00:00:00Z");
  CHECK(s.tunables == std::vector<std::string>{"A", "B"});
  CHECK(s.workloads == std::vector<std::string>{"n=100", "n=300"});
  REQUIRE(s.points.size() == 2);
  CHECK(s.points[0].tunables == ok.tunables);
  CHECK(s.points[0].status == ke::Status::ok);
  REQUIRE(s.points[0].median_us.size() == 2);
  CHECK(s.points[0].median_us[0] == doctest::Approx(12.5));
  CHECK(s.points[0].median_us[1] == doctest::Approx(0.000123));
  CHECK(s.points[1].status == ke::Status::crashed);
  CHECK(s.points[1].median_us.empty());
  CHECK(s.points[1].note == "killed by signal 11");
  CHECK(s.find({{"A", 8}, {"B", 8}, {"C", 1}}) == &s.points[1]);
  CHECK(s.find({{"A", 2}, {"B", 8}}) == nullptr);
  fs::remove(path);
}

TEST_CASE("a malformed sweep file is refused, naming the file and the line") {
  const ke::Spec spec = ke::testing::grid_spec();
  const std::string header = ke::sweep_header(spec, {"A", "B"}, "g.json", "fake Surface 1", "c", "d");
  const std::string path = temp_path("bad.tsv");
  auto refused = [&](const std::string& text, const std::string& why) {
    {
      std::ofstream out(path, std::ios::binary);
      out << text;
    }
    try {
      ke::read_sweep(path);
      FAIL("accepted: " << text);
    } catch (const ke::Error& e) {
      CHECK(e.code() == ke::ErrorCode::BadUsage);
      CHECK_MESSAGE(std::string(e.what()).find(path) != std::string::npos, e.what());
      CHECK_MESSAGE(std::string(e.what()).find(why) != std::string::npos, e.what());
    }
  };
  refused("A\tB\n", "not a kernelevolve sweep file");
  refused(header + "x\t2\tok\t1\t2\t\n", ":12: A is 'x'");
  refused(header + "1\t2\tfine\t1\t2\t\n", "unknown status 'fine'");
  refused(header + "1\t2\tok\t1\t\n", "needs 2 times");
  refused(header + "1\t2\tok\t1\t-3\t\n", "us1 is '-3'");
  refused(header + "1\t2\tcrashed\t5\t\n", "has no times");
  refused(header + "1\n", "too few fields");
  refused("# kernelevolve sweep 7\n", "format 7");
  CHECK_THROWS_AS(ke::read_sweep(temp_path("missing.tsv")), ke::Error);
  fs::remove(path);
}

TEST_CASE("run_sweep measures every point once, resumes where it stopped, and refuses another spec's file") {
  const ke::Spec spec = ke::testing::grid_spec();
  const std::string path = temp_path("run.tsv");
  fs::remove(path);
  const std::size_t space = ke::tunable_space(spec).size();
  ke::SweepOptions o;
  o.out = path;
  o.commit = "test";
  o.jobs = 3;
  o.max_points = 5;
  std::vector<std::size_t> reported;
  o.on_progress = [&](const ke::SweepProgress& p) { reported.push_back(p.measured); };

  Surface first;
  const ke::SweepResult r1 = ke::run_sweep(spec, first, o);
  CHECK(r1.measured == 5);
  CHECK(r1.in_file == 0);
  CHECK_FALSE(r1.complete);
  CHECK(r1.stop_reason == "max points");
  CHECK(first.seen.front() == ke::Bindings{{"A", 1}, {"B", 1}});  // the seed first
  CHECK(reported == std::vector<std::size_t>{1, 2, 3, 4, 5});
  CHECK(ke::read_sweep(path).points.size() == 5);

  // A sweep that dies mid-way keeps what it wrote; the error is the evaluator's.
  Surface dying;
  dying.throw_after = 3;
  o.max_points = 0;
  o.jobs = 1;
  CHECK_THROWS_WITH_AS(ke::run_sweep(spec, dying, o), "the device went away", ke::Error);
  const ke::Sweep after_death = ke::read_sweep(path);
  CHECK(after_death.points.size() == 8);
  CHECK(after_death.resumed.size() == 1);

  Surface rest;
  o.jobs = 4;
  const ke::SweepResult r2 = ke::run_sweep(spec, rest, o);
  CHECK(r2.in_file == 8);
  CHECK(r2.measured == space - 8);
  CHECK(r2.failed == 1);  // (8, 8)
  CHECK(r2.complete);
  const ke::Sweep s = ke::read_sweep(path);
  CHECK(s.points.size() == space);
  std::set<ke::Bindings> distinct;
  for (const auto& p : s.points) distinct.insert(p.tunables);
  CHECK(distinct.size() == space);
  for (const auto& p : rest.seen) CHECK(first.seen.end() == std::find(first.seen.begin(), first.seen.end(), p));
  const ke::SweepPoint* best = s.find({{"A", 4}, {"B", 2}});
  REQUIRE(best);
  CHECK(best->median_us == std::vector<double>{10, 30});
  CHECK(s.find({{"A", 8}, {"B", 8}})->status == ke::Status::crashed);

  // Complete: nothing more to measure, and no resumption line written.
  Surface idle;
  const ke::SweepResult r3 = ke::run_sweep(spec, idle, o);
  CHECK(r3.complete);
  CHECK(r3.measured == 0);
  CHECK(idle.calls == 0);
  CHECK(ke::read_sweep(path).resumed.size() == 2);

  // Another spec (a constraint edited) is refused, and the file is left as it was.
  ke::Spec edited = spec;
  edited.constraints = {ke::Expr::parse("A * B <= 32")};
  const std::string before = read_text(path);
  Surface other;
  try {
    ke::run_sweep(edited, other, o);
    FAIL("another spec's sweep was resumed");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::BadUsage);
    CHECK(std::string(e.what()).find("another spec") != std::string::npos);
  }
  CHECK(other.calls == 0);
  CHECK(read_text(path) == before);
  fs::remove(path);
}

TEST_CASE("run_sweep stops at its time limit and goes on from there") {
  const ke::Spec spec = ke::testing::grid_spec();
  const std::string path = temp_path("limit.tsv");
  fs::remove(path);
  ke::SweepOptions o;
  o.out = path;
  o.time_limit_s = 1e-9;  // passed before the first point starts: the file holds its header alone
  Surface s1;
  const ke::SweepResult r1 = ke::run_sweep(spec, s1, o);
  CHECK(r1.stop_reason == "time limit");
  CHECK(r1.measured == 0);
  CHECK(s1.calls == 0);
  CHECK(ke::read_sweep(path).points.empty());
  o.time_limit_s = 0;
  Surface s2;
  CHECK(ke::run_sweep(spec, s2, o).complete);
  fs::remove(path);
}

TEST_CASE("kernelevolve sweep on a CPU spec: limited, resumed, complete; another spec's file refused") {
  const std::string spec = fixture("sweep/grid.json");
  const std::string path = temp_path("cli.tsv");
  fs::remove(path);
  const auto o1 = run_cli("sweep " + spec + " --out " + path + " --max-points 4 --commit test-commit");
  REQUIRE_MESSAGE(o1.code == 0, o1.err);
  CHECK_MESSAGE(o1.out.find("incomplete: 4 of 11 points") != std::string::npos, o1.out);
  CHECK(o1.out.find("run again to go on") != std::string::npos);
  CHECK(o1.err.find("sweep sweep_grid: ") != std::string::npos);  // the progress line
  const ke::Sweep partial = ke::read_sweep(path);
  CHECK(partial.points.size() == 4);
  CHECK(partial.commit == "test-commit");
  CHECK(partial.spec_file == spec);
  CHECK(partial.device.rfind("cpu ", 0) == 0);
  CHECK(partial.tunables == std::vector<std::string>{"A", "B"});  // UNUSED is read by nothing

  const auto o2 = run_cli("sweep " + spec + " --out " + path + " --jobs 2");
  REQUIRE_MESSAGE(o2.code == 0, o2.err);
  CHECK_MESSAGE(o2.out.find("complete: 11 of 11 points") != std::string::npos, o2.out);
  const ke::Sweep s = ke::read_sweep(path);
  REQUIRE(s.points.size() == 11);
  std::set<ke::Bindings> distinct;
  for (const auto& p : s.points) {
    distinct.insert(p.tunables);
    CHECK(p.tunables.at("A") * p.tunables.at("B") <= 16);
    CHECK_MESSAGE(p.status == ke::Status::ok, p.note);
    CHECK(p.median_us.size() == 2);
  }
  CHECK(distinct.size() == 11);
  CHECK(s.points.front().tunables == ke::Bindings{{"A", 1}, {"B", 1}});

  const auto o3 = run_cli("sweep " + fixture("e2e/colsum.json") + " --out " + path);
  CHECK(o3.code == 2);
  CHECK_MESSAGE(o3.err.find("another spec (sweep_grid") != std::string::npos, o3.err);
  CHECK(ke::read_sweep(path).points.size() == 11);

  const auto o4 = run_cli("sweep " + spec);
  CHECK(o4.code == 2);
  CHECK(o4.err.find("--out FILE") != std::string::npos);
  const auto o5 = run_cli("sweep " + spec + " --out " + path + " --device cpu,cpu");
  CHECK(o5.code == 2);
  fs::remove(path);
}

TEST_CASE("search_quality replays a recorded sweep of a GPU (a synthetic one), and skips an incomplete one") {
#ifndef KE_SEARCH_QUALITY
  MESSAGE("skipped: bench/search_quality is built with -DKE_BUILD_BENCH=ON");
#else
  // A sweep of the grid spec "measured" on a GPU class: the Surface's times, every point.
  const ke::Spec spec = ke::testing::grid_spec();
  const std::string path = temp_path("gpu.tsv"), partial = temp_path("partial.tsv");
  const auto space = ke::tunable_space(spec);
  {
    std::ofstream out(path, std::ios::binary), cut(partial, std::ios::binary);
    const std::string header =
        ke::sweep_header(spec, {"A", "B"}, "grid.json", "cuda Fake GPU", "test", "2025-01-01T00:00:00Z");
    out << header;
    cut << header;
    Surface surface;
    for (std::size_t i = 0; i < space.size(); ++i) {
      const ke::Evaluation e = surface.evaluate({spec.seed.source, ke::Language::c, space[i]}, 0);
      const ke::SweepPoint p{space[i], e.status, e.status == ke::Status::ok ? e.median_us() : std::vector<double>{},
                             e.message};
      out << ke::sweep_line({"A", "B"}, p);
      if (i < 5) cut << ke::sweep_line({"A", "B"}, p);
    }
  }
  const std::string policies = ke::model_policy_available() ? "greedy,model" : "greedy";
  const auto o = [&] {
    const std::string err_file = temp_path("sq_err");
    FILE* p = popen((std::string(KE_SEARCH_QUALITY) + " --sweeps-only --repeats 5 --policies " + policies +
                     " --sweep " + path + " " + partial + " 2>" + err_file)
                        .c_str(),
                    "r");
    REQUIRE(p != nullptr);
    Outcome out;
    std::array<char, 4096> buf;
    std::size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.out.append(buf.data(), n);
    const int status = pclose(p);
    out.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    out.err = read_text(err_file);
    fs::remove(err_file);
    return out;
  }();
  REQUIRE_MESSAGE(o.code == 0, o.err);
  CHECK_MESSAGE(o.out.find("grid (" + path + ", cuda Fake GPU): 19 points") != std::string::npos, o.out);
  CHECK(o.out.find("| random search |") != std::string::npos);
  CHECK(o.out.find("| greedy |") != std::string::npos);
  CHECK(o.out.find("Recorded GPU sweeps (1 spaces") != std::string::npos);
  CHECK(o.out.find("CPU spaces of") == std::string::npos);
  CHECK_MESSAGE(o.err.find("skipping " + partial + ": 14 of its 19 points are not measured yet") != std::string::npos,
                o.err);
  fs::remove(path);
  fs::remove(partial);
#endif
}

TEST_CASE("a sweep as a prior: each point's speedup over the sweep's own seed; another space refused") {
  const ke::Spec spec = ke::testing::grid_spec();
  const std::string path = temp_path("prior.tsv");
  {
    std::ofstream out(path, std::ios::binary);
    out << ke::sweep_header(spec, {"A", "B"}, "grid.json", "cuda Other GPU", "c", "d")
        << ke::sweep_line({"A", "B"}, {{{"A", 1}, {"B", 1}}, ke::Status::ok, {40, 80}, ""})
        << ke::sweep_line({"A", "B"}, {{{"A", 4}, {"B", 2}}, ke::Status::ok, {10, 40}, ""})
        << ke::sweep_line({"A", "B"}, {{{"A", 8}, {"B", 8}}, ke::Status::crashed, {}, "x"});
  }
  const auto prior = ke::sweep_prior(ke::read_sweep(path), spec);
  REQUIRE(prior.size() == 3);
  CHECK(prior[0].speedup == doctest::Approx(1.0));
  CHECK(prior[1].speedup == doctest::Approx(std::sqrt(4.0 * 2.0)));  // the geometric mean over workloads
  CHECK(prior[1].tunables == ke::Bindings{{"A", 4}, {"B", 2}});
  CHECK(prior[2].speedup == 0);
  ke::Spec other = spec;
  other.tunables = {{"A", {1, 2}}};
  CHECK_THROWS_WITH_AS(ke::sweep_prior(ke::read_sweep(path), other), doctest::Contains("sweeps the tunable B"),
                       ke::Error);
  fs::remove(path);
}

TEST_CASE("kernelevolve run: the model by default on a space of 3 points or more; a prior sweep for it") {
  const std::string spec = fixture("sweep/grid.json");
  const std::string db = temp_path("default.db"), sweep = temp_path("prior_cli.tsv");
  fs::remove(db);
  fs::remove(sweep);
  const auto o = run_cli("run " + spec + " --db " + db + " --max-evals 4");
  REQUIRE_MESSAGE(o.code == 0, o.err);
  {
    ke::Store store(db, ke::Store::Mode::read_only);
    CHECK(store.run(1).settings.policy == (ke::model_policy_available() ? "model" : "greedy"));
  }
  CHECK(ke::default_policy_name(2) == "greedy");
  CHECK(ke::default_policy_name(11) == (ke::model_policy_available() ? "model" : "greedy"));

  REQUIRE(run_cli("sweep " + spec + " --out " + sweep + " --max-points 6").code == 0);
  const auto refused = run_cli("run " + spec + " --no-db --policy greedy --prior-sweep " + sweep);
  CHECK(refused.code == 2);
  CHECK(refused.err.find("--prior-sweep is the model policy's prior") != std::string::npos);
  if (ke::model_policy_available()) {
    const auto with_prior = run_cli("run " + spec + " --no-db --policy model --max-evals 4 --prior-sweep " + sweep);
    CHECK_MESSAGE(with_prior.code == 0, with_prior.err);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db + suffix);
  fs::remove(sweep);
}
