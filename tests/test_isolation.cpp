// Candidates cannot hurt the host: hostile kernels, fed by the command mutator into a real run with
// worker processes, each land in the right status while an honest fast kernel is found best.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <kernelevolve/kernelevolve.hpp>
#include <map>

#include "mutators/answer.hpp"

namespace ke = kernelevolve;
namespace fs = std::filesystem;

namespace {

std::string hostile(const std::string& name) { return std::string(KE_FIXTURES) + "/hostile/" + name; }

std::string expected_status(const std::string& source) {
  const auto at = source.find("// expect: ");
  if (at == std::string::npos) return "";
  const auto from = at + 11;
  const auto end = source.find_first_of(" \n", from);
  return source.substr(from, end - from);
}

struct Counts final : ke::Observer {
  int failures = 0;
  std::vector<std::string> errors;
  void on_mutator_failure(const ke::Mutation& m, const std::vector<ke::NodeId>&) override {
    ++failures;
    errors.push_back(m.error);
  }
};

// Notes the wall time of each evaluation that came back ok, to show how far inside the time limit they stay.
class WallClock final : public ke::FitnessEvaluator {
 public:
  explicit WallClock(std::shared_ptr<ke::FitnessEvaluator> inner) : inner_(std::move(inner)) {}
  ke::Evaluation evaluate(const ke::Candidate& candidate, std::uint64_t input_seed) override {
    const auto t0 = std::chrono::steady_clock::now();
    ke::Evaluation e = inner_->evaluate(candidate, input_seed);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (e.status == ke::Status::ok) slowest_ok_s = std::max(slowest_ok_s, s);
    return e;
  }
  ke::DeviceInfo device_info() override { return inner_->device_info(); }
  double slowest_ok_s = 0;

 private:
  std::shared_ptr<ke::FitnessEvaluator> inner_;
};

}  // namespace

TEST_CASE("hostile kernels land in the right status; the honest fast one is best; the host lives on") {
  const ke::Spec spec = ke::load_spec(hostile("scale.json"));
  const fs::path state = fs::temp_directory_path() / ("ke_feed_" + std::to_string(getpid()));
  fs::remove(state);
  ke::WorkerOptions options;
  // The infinite loop must be cut off, and every other kernel finish far inside the limit on a slow, busy or
  // instrumented machine: the slowest honest one, the flooding kernel (4,000 lines a call, those to stderr each
  // a system call through the sandbox's filter), took 0.5 s on the 2-core development VM, and 1.9 s with two
  // busy loops beside it (a 3 s limit was too close). Timing stops at 10 ms of kernel time per workload: the
  // margins below are by construction, not by precision.
  options.timeout_s = 10;
  options.eval.trials = 3;
  options.eval.target_ms = 10;
  auto worker = std::make_shared<ke::WorkerEvaluator>(spec, "cpu", options);
  auto evaluator = std::make_shared<WallClock>(worker);
  auto mutator =
      std::make_shared<ke::CommandMutator>(hostile("feed.sh") + " " + state.string() + " " + hostile(""), 30);
  int kernels = 0;
  for (const auto& entry : fs::directory_iterator(hostile(""))) kernels += entry.path().extension() == ".c";
  ke::Evolver evolver(spec, evaluator, mutator, std::make_shared<ke::GreedyPolicy>(), ke::max_evaluations(kernels + 1));
  Counts counts;
  evolver.add_observer(&counts);
  const ke::RunResult result = evolver.run();
  fs::remove(state);

  const auto& graph = evolver.graph();
  CHECK(counts.failures == 0);
  for (const auto& e : counts.errors) MESSAGE(e);
  REQUIRE(graph.size() == static_cast<std::size_t>(kernels + 1));
  std::map<std::string, int> seen;
  for (const ke::Node& node : graph.nodes()) {
    if (node.id == 0) continue;
    const std::string expect = expected_status(node.candidate.source);
    const std::string first_line = node.candidate.source.substr(0, node.candidate.source.find('\n'));
    CHECK_MESSAGE(ke::to_string(node.evaluation.status) == expect,
                  first_line << " -> " << ke::to_string(node.evaluation.status) << ": " << node.evaluation.message);
    seen[expect] += 1;
  }
  CHECK(seen["crashed"] >= 6);
  CHECK(seen["timeout"] == 1);
  CHECK(seen["incorrect"] >= 6);
  CHECK(seen["invalid"] >= 2);
  // The best is the honest fast kernel, by a margin its construction guarantees rather than the machine: the
  // seed makes 64 passes over the data and the flooding kernel 128, where it makes one (the fixtures say so).
  // A figure of 2 is far inside that on any machine, busy or instrumented; the ordering rule (a lead beyond
  // either's spread) and the confirmation (a lower node is confirmed only if it beats the seed) cannot pick
  // the flooding kernel, which is slower than the seed.
  for (const ke::Node& node : graph.nodes()) {
    if (node.evaluation.status != ke::Status::ok) continue;
    MESSAGE("node " << node.id << " (" << node.candidate.source.substr(0, node.candidate.source.find('\n'))
                    << "): " << node.speedup << "x, spread " << ke::relative_spread(node.evaluation));
  }
  MESSAGE("the slowest evaluation that was ok took " << evaluator->slowest_ok_s << " s of the " << options.timeout_s
                                                     << " s limit");
  if (result.confirmation)
    MESSAGE("confirmation of node " << result.confirmation->node << ": " << result.confirmation->speedup << "x");
  REQUIRE(result.best.has_value());
  const ke::Node& best = graph.node(*result.best);
  CHECK(best.candidate.source.find("expect: ok (fast)") != std::string::npos);
  CHECK(best.speedup > 2.0);
  // Crashes say how the worker died; the time limit is reported.
  for (const ke::Node& node : graph.nodes()) {
    if (node.candidate.source.find("abort()") != std::string::npos) {
      CHECK(node.evaluation.message.find("SIGABRT") != std::string::npos);
    }
    if (node.candidate.source.find("*(volatile float*)0") != std::string::npos) {
      CHECK(node.evaluation.message.find("SIGSEGV") != std::string::npos);
    }
    if (node.evaluation.status == ke::Status::timeout) {
      CHECK(node.evaluation.message.find("time limit of 10 s") != std::string::npos);
      // The limit hit the kernel's run (its first call, in verification), not its compile: the message says so.
      CHECK_MESSAGE(node.evaluation.message.find("while verifying w0") != std::string::npos, node.evaluation.message);
    }
    if (node.candidate.source.find("*(volatile float*)0") != std::string::npos) {
      CHECK_MESSAGE(node.evaluation.message.find("while verifying w0") != std::string::npos, node.evaluation.message);
    }
  }
  // Every crash and timeout replaced its worker.
  CHECK(worker->workers_started() >= 1 + seen["crashed"] + seen["timeout"]);
}

TEST_CASE("workers in parallel keep results apart, and the time limit derives from the seed") {
  const ke::Spec spec = ke::load_spec(hostile("scale.json"));
  ke::WorkerOptions options;
  options.jobs = 2;
  options.min_timeout_s = 7;
  options.eval.trials = 2;
  ke::WorkerEvaluator evaluator(spec, "cpu", options);
  CHECK(evaluator.timeout_s() == doctest::Approx(options.first_timeout_s));
  const ke::Candidate seed{spec.seed.source, ke::Language::c, {}};
  const ke::Evaluation e = evaluator.evaluate(seed, 1);
  REQUIRE(e.status == ke::Status::ok);
  CHECK(evaluator.timeout_s() >= 7.0);
  CHECK(evaluator.timeout_s() < options.first_timeout_s);
}

TEST_CASE("a worker that cannot open its device is reported at once") {
  const ke::Spec spec = ke::load_spec(hostile("scale.json"));
  CHECK_THROWS_AS(ke::WorkerEvaluator(spec, "cuda:99", {}), ke::Error);
  try {
    ke::WorkerEvaluator evaluator(spec, "cuda:99", {});
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::DeviceUnavailable);
  }
}

TEST_CASE("a missing worker executable is a clear error") {
  const ke::Spec spec = ke::load_spec(hostile("scale.json"));
  ke::WorkerOptions options;
  options.worker_path = "/nonexistent/kernelevolve-worker";
  CHECK_THROWS_WITH_AS(ke::WorkerEvaluator(spec, "cpu", options), doctest::Contains("/nonexistent/kernelevolve-worker"),
                       ke::Error);
}

TEST_CASE("the command mutator records a command's failures, never throws them") {
  ke::Spec spec = ke::load_spec(hostile("scale.json"));
  ke::SearchGraph graph;
  ke::Node seed;
  seed.candidate = {spec.seed.source, ke::Language::c, {}};
  seed.evaluation.status = ke::Status::ok;
  graph.add(seed);
  std::mt19937_64 rng(1);
  auto mutate = [&](const std::string& cmd, double timeout = 10) {
    return ke::CommandMutator(cmd, timeout).mutate({spec, graph, {0}, rng});
  };
  auto m = mutate("cat >/dev/null; echo broken >&2; exit 7");
  CHECK_FALSE(m.child);
  CHECK(m.error.find("code 7") != std::string::npos);
  CHECK(m.error.find("broken") != std::string::npos);
  m = mutate("cat >/dev/null");
  CHECK_FALSE(m.child);
  CHECK(m.error.find("empty") != std::string::npos);
  m = mutate("cat >/dev/null; echo 'I think you should unroll the loop.'");
  CHECK_FALSE(m.child);
  CHECK(m.error.find("neither a fenced code block") != std::string::npos);
  m = mutate("sleep 30", 0.5);
  CHECK_FALSE(m.child);
  CHECK(m.error.find("time limit") != std::string::npos);
  m = mutate("exit 0 # does not read its input");
  CHECK_FALSE(m.child);
  // The request carries the spec and the parent's source.
  m = mutate(
      "grep -q '\"entry\": \"scale\"' && printf '```c\\nvoid scale(const float* x, float* y, long n) {}\\n```\\n'");
  REQUIRE(m.child);
  CHECK(m.prompt.find("pass < 64") != std::string::npos);
  CHECK(m.answer.find("```c") != std::string::npos);
  // An answer over the 16 MiB an answer may take is refused, not cut and used (issue 49): here a whole fenced
  // kernel first, then 17 MiB of comment that would have been dropped without a word.
  m = mutate(
      "cat >/dev/null; printf '```c\nvoid scale(const float* x, float* y, long n) {}\n```\n'; "
      "head -c 17825792 /dev/zero | tr '\\0' x");
  CHECK_FALSE(m.child);
  CHECK_MESSAGE(m.error.find("over the limit of 16777216 bytes") != std::string::npos, m.error);
}

TEST_CASE("answers: fenced blocks, SEARCH/REPLACE edits, and the ways they fail") {
  using ke::mutators::apply_answer;
  const std::string parent = "int f(int x) {\n  return x + 1;\n}\n";
  auto r = apply_answer("Sure:\n```c\nint f(int x) { return x + 2; }\n```\nDone.", parent);
  CHECK(r.ok);
  CHECK(r.source == "int f(int x) { return x + 2; }\n");
  r = apply_answer("```python\nprint(1)\n```\n```cpp\nint f(int x) { return 3; }\n```", parent);
  CHECK(r.ok);
  CHECK(r.source.find("return 3") != std::string::npos);
  r = apply_answer("<<<<<<< SEARCH\n  return x + 1;\n=======\n  return x + 5;\n>>>>>>> REPLACE\n", parent);
  CHECK(r.ok);
  CHECK(r.form == "edits");
  CHECK(r.source == "int f(int x) {\n  return x + 5;\n}\n");
  r = apply_answer("<<<<<<< SEARCH\n  return y;\n=======\n  return 0;\n>>>>>>> REPLACE\n", parent);
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("does not occur") != std::string::npos);
  r = apply_answer("<<<<<<< SEARCH\n  return x + 1;\n=======\n", parent);
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("not closed") != std::string::npos);
  r = apply_answer("```c\n" + parent + "```\n", parent);
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("changes nothing") != std::string::npos);
  r = apply_answer("```c\nint f(int x) {\n", parent);
  CHECK_FALSE(r.ok);
}
