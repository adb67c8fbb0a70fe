// The multi-GPU path: a search over `cuda:all` keeps a worker per GPU busy, every GPU evaluates, the
// evaluations add up, and GPUs of one model form one device class (one seed time, one best). Needs two
// CUDA devices or more; with fewer, the tests skip and say why.
#include <doctest/doctest.h>

#include <kernelevolve/distributed.hpp>
#include <kernelevolve/error.hpp>
#include <kernelevolve/evolver.hpp>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

namespace ke = kernelevolve;

namespace {

struct Gpus {
  std::vector<std::string> ids;
  std::string reason;  // why the tests skip
};

const Gpus& gpus() {
  static const Gpus g = [] {
    Gpus out;
    try {
      out.ids = ke::expand_device_list("cuda:all");
    } catch (const ke::Error& e) {
      out.reason = e.what();
      return out;
    }
    if (out.ids.size() < 2) out.reason = "only " + std::to_string(out.ids.size()) + " CUDA device; these tests need 2";
    return out;
  }();
  return g;
}

const bool kSkip = !gpus().reason.empty();

// y = a * x + y over n floats: memory-bound, so each GPU's time is its own, and quick to verify.
const char* kAxpy = R"(
extern "C" __global__ void axpy(const float* x, float* y, long long n) {
  long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  for (int v = 0; v < VEC; ++v)
    if (i + v < n) y[i + v] = 2.5f * x[i + v] + y[i + v];
}
)";

ke::Spec axpy_spec() {
  ke::Spec s;
  s.name = "axpy_cuda";
  s.language = ke::Language::cuda;
  s.entry = "axpy";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::inout, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = {{{"n", 1 << 24}}, {{"n", 100003}}};
  s.tolerance = {1e-5, 1e-5};
  s.reference.source = kAxpy;
  s.seed.source = kAxpy;
  ke::LaunchRule rule;
  rule.grid[0] = ke::Expr::parse("cdiv(n, THREADS * VEC)");
  rule.block[0] = ke::Expr::parse("THREADS");
  s.launch = rule;
  s.tunables = {{"THREADS", {32, 64, 128, 256, 512, 1024}}, {"VEC", {1, 2, 4, 8}}};
  s.cost_bytes = ke::Expr::parse("12 * n");
  s.validate();
  return s;
}

}  // namespace

TEST_CASE("multi-gpu: whether it runs") {
  if (kSkip) MESSAGE("skipped: " << gpus().reason);
  CHECK(true);
}

TEST_CASE("multi-gpu: a search over every GPU keeps each busy, and one model is one device class" *
          doctest::skip(kSkip)) {
  const ke::Spec spec = axpy_spec();
  ke::WorkerOptions options;
  options.eval.trials = 2;
  options.timeout_s = 60;
  auto evaluator = std::make_shared<ke::MultiDeviceEvaluator>(spec, gpus().ids, options, /*jobs_per_device=*/2);
  CHECK(evaluator->slots() == 2 * static_cast<int>(gpus().ids.size()));
  const auto classes = evaluator->device_classes();
  REQUIRE(classes.size() >= 1);
  CHECK(classes[0].rfind("cuda ", 0) == 0);

  ke::EvolverOptions eo;
  eo.jobs = evaluator->slots();
  const int evaluations = 16;
  ke::Evolver evolver(spec, evaluator, std::make_shared<ke::ParamMutator>(), ke::make_policy("greedy"),
                      ke::max_evaluations(evaluations), eo);
  const ke::RunResult result = evolver.run();
  REQUIRE(result.best);
  CHECK(evolver.graph().node(*result.best).evaluation.status == ke::Status::ok);
  CHECK(result.best_by_device.size() == classes.size());

  const std::vector<long> per_device = evaluator->evaluations_per_device();
  REQUIRE(per_device.size() == gpus().ids.size());
  for (std::size_t i = 0; i < per_device.size(); ++i) {
    CAPTURE(gpus().ids[i]);
    CHECK(per_device[i] > 0);  // the evolver kept this GPU busy too
  }
  CHECK(std::accumulate(per_device.begin(), per_device.end(), 0L) == static_cast<long>(evolver.graph().size()));
  for (const ke::Node& n : evolver.graph().nodes()) {
    CAPTURE(n.id);
    CHECK(n.evaluation.status == ke::Status::ok);
    CHECK(std::find(classes.begin(), classes.end(), n.evaluation.device) != classes.end());
  }
}

TEST_CASE("multi-gpu: a candidate sent to a named device class runs there" * doctest::skip(kSkip)) {
  const ke::Spec spec = axpy_spec();
  ke::WorkerOptions options;
  options.eval.trials = 2;
  ke::MultiDeviceEvaluator evaluator(spec, gpus().ids, options, 1);
  const auto classes = evaluator.device_classes();
  for (std::size_t c = 0; c < classes.size(); ++c) {
    const ke::Evaluation e = evaluator.evaluate_on(c, {spec.seed.source, ke::Language::cuda, spec.seed_tunables()}, 3);
    CHECK_MESSAGE(e.status == ke::Status::ok, e.message);
    CHECK(e.device == classes[c]);
  }
}
