// Beyond one device: device lists, the multi-device evaluator's dispatch, and device classes.
#include <doctest/doctest.h>

#include <kernelevolve/distributed.hpp>
#include <kernelevolve/error.hpp>
#include <thread>

namespace ke = kernelevolve;

namespace {
ke::Spec colsum() { return ke::load_spec(std::string(KE_FIXTURES) + "/e2e/colsum.json"); }

bool has_kind(const std::string& kind) {
  for (const auto& d : ke::list_devices()) {
    if (d.kind == kind) return true;
  }
  return false;
}
}  // namespace

TEST_CASE("device lists expand, and refuse what they cannot serve") {
  CHECK(ke::expand_device_list("cpu") == std::vector<std::string>{"cpu"});
  CHECK_THROWS_AS(ke::expand_device_list("cpu,,cuda:0"), ke::Error);
  try {
    ke::expand_device_list("cpu,cpu");
    FAIL("a repeated device must be refused");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::BadUsage);
  }
  if (!has_kind("hip")) {
    try {
      ke::expand_device_list("hip:all");
      FAIL("hip:all without a HIP device must be refused");
    } catch (const ke::Error& e) {
      CHECK(e.code() == ke::ErrorCode::DeviceUnavailable);
    }
  }
  if (has_kind("cuda")) CHECK_FALSE(ke::expand_device_list("cuda:all").empty());
}

TEST_CASE("KIND:all expands to the devices present, and a device named twice stays twice before the check") {
  auto device = [](const std::string& kind, const std::string& id) {
    ke::DeviceInfo d;
    d.kind = kind;
    d.id = id;
    return d;
  };
  const std::vector<ke::DeviceInfo> two_gpus{device("cpu", "cpu"), device("cuda", "cuda:0"), device("cuda", "cuda:1")};
  CHECK(ke::expand_device_items("cuda:all", two_gpus) == std::vector<std::string>{"cuda:0", "cuda:1"});
  CHECK(ke::expand_device_items("cpu,cuda:all", two_gpus) == std::vector<std::string>{"cpu", "cuda:0", "cuda:1"});
  CHECK(ke::expand_device_items("cpu,cpu", {}) == std::vector<std::string>{"cpu", "cpu"});
  CHECK(ke::expand_device_items("cuda:1,cuda:all", two_gpus) == std::vector<std::string>{"cuda:1", "cuda:0", "cuda:1"});
  CHECK_THROWS_AS(ke::expand_device_items("cpu,", two_gpus), ke::Error);
  try {
    ke::expand_device_items("hip:all", two_gpus);
    FAIL("hip:all with no HIP device present must be refused");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::DeviceUnavailable);
    CHECK(std::string(e.what()).find("no hip device is present") != std::string::npos);
  }
}

TEST_CASE("timing locks are per device") {
  CHECK(ke::default_timing_lock("cuda:0") != ke::default_timing_lock("cuda:1"));
  CHECK(ke::default_timing_lock("cuda:0").find("cuda_0") != std::string::npos);
}

TEST_CASE("the multi-device evaluator runs as many evaluations at once as it has slots") {
  const ke::Spec spec = colsum();
  ke::WorkerOptions options;
  options.eval.trials = 2;
  ke::MultiDeviceEvaluator evaluator(spec, {"cpu"}, options, /*jobs_per_device=*/2);
  CHECK(evaluator.slots() == 2);
  const auto classes = evaluator.device_classes();
  REQUIRE(classes.size() == 1);
  CHECK(classes[0].rfind("cpu ", 0) == 0);
  std::vector<ke::Evaluation> results(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      ke::Candidate c{spec.seed.source, ke::Language::c, {{"BLOCK", 1 << (i + 2)}}};
      results[static_cast<std::size_t>(i)] = i % 2 ? evaluator.evaluate_on(0, c, static_cast<std::uint64_t>(i))
                                                   : evaluator.evaluate(c, static_cast<std::uint64_t>(i));
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    CHECK_MESSAGE(r.status == ke::Status::ok, r.message);
    CHECK(r.device == classes[0]);
  }
  CHECK(evaluator.evaluations_per_device() == std::vector<long>{4});
  CHECK_THROWS_AS(evaluator.evaluate_on(1, {spec.seed.source, ke::Language::c, {}}, 1), ke::Error);
}

TEST_CASE("without MPI support, the MPI entry points say how to get it") {
  if (ke::mpi_built()) return;
  CHECK_THROWS_WITH_AS(ke::mpi_init(nullptr, nullptr), doctest::Contains("KE_WITH_MPI"), ke::Error);
}
