// The diagnosis of a candidate (kernelevolve/diagnosis.hpp): rates from the spec's cost over known times,
// their shares of known ceilings, the bound of a copy-like and a matrix-product-like spec, what is unknown
// said to be, the JSON, and a real CPU kernel's diagnosis through the evaluator.
#include <doctest/doctest.h>
#include <simdjson.h>

#include <kernelevolve/counters.hpp>
#include <kernelevolve/diagnosis.hpp>
#include <kernelevolve/error.hpp>
#include <kernelevolve/evolver.hpp>
#include <kernelevolve/fitness.hpp>
#include <kernelevolve/mutator.hpp>
#include <kernelevolve/report.hpp>
#include <kernelevolve/selection.hpp>
#include <kernelevolve/spec.hpp>
#include <kernelevolve/stop_rule.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "eval/wire.hpp"

namespace ke = kernelevolve;

namespace {

// A kernel over x -> y of n floats (copy-like) or C = A B of n x n (matmul-like), with the cost given.
ke::Spec spec_with_cost(bool matmul, std::optional<std::string> flops, std::optional<std::string> bytes) {
  ke::Spec s;
  s.name = matmul ? "mm" : "copy";
  s.language = ke::Language::c;
  s.entry = "k";
  if (matmul) {
    s.params = {{"a", ke::DType::f32, ke::Role::in, {"n", "n"}, 0},
                {"b", ke::DType::f32, ke::Role::in, {"n", "n"}, 0},
                {"c", ke::DType::f32, ke::Role::out, {"n", "n"}, 0},
                {"n", ke::DType::i64, ke::Role::size, {}, 0}};
    s.workloads = {{{"n", 512}}, {{"n", 1000}}};
  } else {
    s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
                {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
                {"n", ke::DType::i64, ke::Role::size, {}, 0}};
    s.workloads = {{{"n", 1000000}}, {{"n", 1000}}};
  }
  s.reference.source = "void k() {}";
  s.seed.source = "void k() {}";
  if (flops) s.cost_flops = ke::Expr::parse(*flops);
  if (bytes) s.cost_bytes = ke::Expr::parse(*bytes);
  s.validate();
  return s;
}

ke::DeviceInfo device(double bytes_per_s, double flops_per_s) {
  ke::DeviceInfo d;
  d.id = "cpu";
  d.kind = "cpu";
  d.name = "Test CPU";
  d.peak_bytes_per_s = bytes_per_s;
  d.peak_flops_per_s = flops_per_s;
  return d;
}

ke::Evaluation measured(std::vector<double> times_us, const ke::DeviceInfo& on) {
  ke::Evaluation e;
  e.status = ke::Status::ok;
  e.device = ke::FitnessEvaluator::device_class(on);
  for (double t : times_us) e.timings.push_back({t, t, t, 0, 5});
  return e;
}

}  // namespace

TEST_CASE("a copy-like kernel: bytes over time against the copy peak, memory-bound; no flop count is unknown") {
  const ke::Spec s = spec_with_cost(false, std::nullopt, "8 * n");
  const ke::DeviceInfo cpu = device(100e9, 500e9);
  // 8 MB in 100 us is 80 GB/s, 80% of 100 GB/s; 8 KB in 2 us is 4 GB/s, 4%: far from the ceiling, and with
  // no flop count nothing says which ceiling binds.
  const auto d = ke::diagnose(s, {}, measured({100, 2}, cpu), cpu);
  REQUIRE(d.has_value());
  REQUIRE(d->workloads.size() == 2);
  const ke::WorkloadDiagnosis& w0 = d->workloads[0];
  CHECK(w0.time_us == 100);
  REQUIRE(w0.bytes_per_s.has_value());
  CHECK(*w0.bytes_per_s == doctest::Approx(80e9));
  CHECK(*w0.bandwidth_share == doctest::Approx(0.8));
  CHECK_FALSE(w0.flops_per_s.has_value());
  CHECK_FALSE(w0.compute_share.has_value());
  CHECK(w0.bound == ke::Bound::memory);
  CHECK(d->workloads[1].bound == ke::Bound::unknown);
  CHECK_FALSE(d->gpu.has_value());  // a CPU kernel reports no registers
  // 22% of the copy peak with no flop count is not memory-bound: a matrix product whose flops go uncounted
  // runs there, bound by its arithmetic (kSoleCeilingShare).
  const auto fifth = ke::diagnose(s, {}, measured({8e6 / 22e9 * 1e6, 2}, cpu), cpu);
  REQUIRE(fifth.has_value());
  CHECK(*fifth->workloads[0].bandwidth_share == doctest::Approx(0.22));
  CHECK(fifth->workloads[0].bound == ke::Bound::unknown);
  CHECK(ke::workload_diagnosis_text(w0) ==
        "100 us, 80.0 GB/s (80% of copy peak), FLOP/s unknown (the spec has no cost.flops), memory-bound");

  // With a flop count the small workload is far under both ceilings: latency or overhead takes its time.
  const ke::Spec counted = spec_with_cost(false, "n", "8 * n");
  const auto c = ke::diagnose(counted, {}, measured({100, 2}, cpu), cpu);
  CHECK(c->workloads[0].bound == ke::Bound::memory);
  CHECK(*c->workloads[0].compute_share == doctest::Approx(10e9 / 500e9));
  CHECK(c->workloads[1].bound == ke::Bound::latency);
  CHECK(ke::diagnosis_text(*c).find("; w1 2.00 us, 4.00 GB/s (4% of copy peak), 0.50 GFLOP/s (0.1% of FMA peak), "
                                    "latency/overhead-bound") != std::string::npos);
}

TEST_CASE("a matmul-like kernel: flops against the FMA peak, compute-bound near it, latency-bound far under") {
  const ke::Spec s = spec_with_cost(true, "2 * n * n * n", "4 * 3 * n * n");
  const ke::DeviceInfo cpu = device(100e9, 500e9);
  // n = 512: 268435456 flops in 1000 us is 268 GFLOP/s, 54% of 500; 3 MiB in 1 ms is 3.1 GB/s, 3%.
  // n = 1000: 2e9 flops in 100 ms is 20 GFLOP/s, 4%, and 12 MB is 0.12%: far under both.
  const auto d = ke::diagnose(s, {}, measured({1000, 100000}, cpu), cpu);
  REQUIRE(d.has_value());
  const ke::WorkloadDiagnosis& fast = d->workloads[0];
  CHECK(*fast.flops_per_s == doctest::Approx(268435456.0 / 1e-3));
  CHECK(*fast.compute_share == doctest::Approx(268435456.0 / 1e-3 / 500e9));
  CHECK(*fast.bytes_per_s == doctest::Approx(4.0 * 3 * 512 * 512 / 1e-3));
  CHECK(fast.bound == ke::Bound::compute);
  CHECK(ke::workload_diagnosis_text(fast) ==
        "1000 us, 3.15 GB/s (3% of copy peak), 268 GFLOP/s (54% of FMA peak), compute-bound");
  CHECK(d->workloads[1].bound == ke::Bound::latency);
  // Above a teraflop the text says so.
  const auto big = ke::diagnose(s, {}, measured({100, 1000}, device(100e9, 5e12)), device(100e9, 5e12));
  CHECK(ke::workload_diagnosis_text(big->workloads[0]).find("2.68 TFLOP/s (54% of FMA peak)") != std::string::npos);
}

TEST_CASE("what is unknown is said to be: no cost, no ceilings, another device's measurement, a failed node") {
  const ke::DeviceInfo cpu = device(100e9, 500e9);
  const ke::Spec none = spec_with_cost(false, std::nullopt, std::nullopt);
  const auto d = ke::diagnose(none, {}, measured({10, 10}, cpu), cpu);
  REQUIRE(d.has_value());
  CHECK(d->workloads[0].bound == ke::Bound::unknown);
  CHECK(
      ke::workload_diagnosis_text(d->workloads[0]) ==
      "10.0 us, GB/s unknown (the spec has no cost.bytes), FLOP/s unknown (the spec has no cost.flops), bound unknown");

  const ke::Spec s = spec_with_cost(true, "2 * n * n * n", "4 * 3 * n * n");
  const ke::DeviceInfo unmeasured = device(0, 0);
  const auto no_ceilings = ke::diagnose(s, {}, measured({1000, 1000}, unmeasured), unmeasured);
  CHECK(no_ceilings->workloads[0].flops_per_s.has_value());
  CHECK_FALSE(no_ceilings->workloads[0].compute_share.has_value());
  CHECK(ke::workload_diagnosis_text(no_ceilings->workloads[0]).find("(FMA peak unknown)") != std::string::npos);

  // Measured on another class of device: its rates stand, but not shares of this device's ceilings.
  ke::Evaluation elsewhere = measured({1000, 1000}, cpu);
  elsewhere.device = "cuda NVIDIA H200";
  const auto other = ke::diagnose(s, {}, elsewhere, cpu);
  CHECK(other->workloads[0].flops_per_s.has_value());
  CHECK_FALSE(other->workloads[0].compute_share.has_value());
  CHECK(other->note.find("cuda NVIDIA H200") != std::string::npos);

  ke::Evaluation wrong = measured({1000, 1000}, cpu);
  wrong.status = ke::Status::incorrect;
  CHECK_FALSE(ke::diagnose(s, {}, wrong, cpu).has_value());
}

TEST_CASE("the diagnosis as JSON: numbers in GB/s and GFLOP/s, null where unknown, the GPU part and counters") {
  const ke::Spec s = spec_with_cost(false, std::nullopt, "8 * n");
  const ke::DeviceInfo gpu = device(1000e9, 50e12);
  ke::Evaluation e = measured({100, 2}, gpu);
  e.resources = {{"registers", 40},      {"local_bytes", 16},         {"shared_static_bytes", 4096},
                 {"block_threads", 256}, {"active_blocks_per_sm", 6}, {"occupancy_pct", 75},
                 {"hw_dram_pct", 81}};
  const auto d = ke::diagnose(s, {}, e, gpu);
  REQUIRE(d.has_value());
  REQUIRE(d->gpu.has_value());
  CHECK(ke::gpu_diagnosis_text(*d->gpu) == "regs 40, local 16 B, smem 4096 B, occupancy 75% (block 256, 6 blocks/SM)");
  CHECK(d->counters.at("hw_dram_pct") == 81);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const std::string json = ke::diagnosis_json(*d);
  REQUIRE_MESSAGE(parser.parse(json).get(doc) == simdjson::SUCCESS, json);
  simdjson::dom::element w0 = doc["workloads"].at(0);
  CHECK(double(w0["gbps"]) == doctest::Approx(80.0));
  CHECK(double(w0["bandwidth_share"]) == doctest::Approx(0.08));
  CHECK(w0["gflops"].is_null());
  CHECK(w0["compute_share"].is_null());
  CHECK(std::string_view(w0["bound"]) == "bound unknown");  // 8% of the copy peak, and no flop count
  CHECK(int64_t(doc["gpu"]["registers"]) == 40);
  CHECK(doc["gpu"]["spill_bytes"].is_null());
  CHECK(int64_t(doc["gpu"]["occupancy_pct"]) == 75);
  CHECK(int64_t(doc["counters"]["hw_dram_pct"]) == 81);
}

TEST_CASE("a CPU kernel through the evaluator: its diagnosis is the spec's cost over its measured times") {
  const ke::Spec spec = ke::load_spec(std::string(KE_FIXTURES) + "/e2e/colsum.json");
  ke::EvalOptions options;
  options.trials = 1;
  options.max_reps = 5;
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), options);
  const ke::Candidate seed{spec.seed.source, ke::Language::c, spec.seed_tunables()};
  const ke::Evaluation e = evaluator.evaluate(seed, 1);
  REQUIRE_MESSAGE(e.status == ke::Status::ok, e.message);
  const ke::DeviceInfo info = evaluator.device_info();
  const auto d = ke::diagnose(spec, seed.tunables, e, info);
  REQUIRE(d.has_value());
  REQUIRE(d->workloads.size() == spec.workloads.size());
  for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
    const double t = e.timings[w].median_us;
    const double m = static_cast<double>(spec.workloads[w].at("M")), n = static_cast<double>(spec.workloads[w].at("N"));
    CHECK(d->workloads[w].time_us == t);
    CHECK(*d->workloads[w].bytes_per_s == doctest::Approx((4 * m * n + 4 * n) / (t * 1e-6)));
    CHECK(*d->workloads[w].flops_per_s == doctest::Approx(m * n / (t * 1e-6)));
    CHECK(*d->workloads[w].bandwidth_share == doctest::Approx(*d->workloads[w].bytes_per_s / info.peak_bytes_per_s));
    // A column sum does one flop per four bytes read: whatever binds it, it is not the FMA rate.
    CHECK(d->workloads[w].bound != ke::Bound::compute);
  }
  CHECK_FALSE(d->gpu.has_value());
}

namespace {

std::string read_fixture(const std::string& name) {
  std::ifstream in(std::string(KE_FIXTURES) + "/" + name);
  REQUIRE_MESSAGE(in, name);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("hardware counters out of Nsight Compute's CSV: the kept metrics, the stall states by share, the text") {
  // ncu 2025.3 on an H100, a row sum of 64 Ki rows (tests/fixtures/counters: its output, columns trimmed).
  const ke::CounterResult r = ke::counters_from_nsight_csv(read_fixture("counters/ncu_row_sum_h100.csv"));
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.counters.at("hw_dram_pct") == 77);                // 77.41
  CHECK(r.counters.at("hw_dram_gbps") == 2592);             // 2,592,210,023,866.35 byte/s
  CHECK(r.counters.at("hw_sm_pct") == 10);                  // 10.36
  CHECK(r.counters.at("hw_achieved_occupancy_pct") == 24);  // 23.51
  CHECK(r.counters.at("hw_duration_ns") == 26816);
  // Warps per issue in each state sum to 29.94 (selected, the issuing state, is 1 of them): long_scoreboard
  // 26.23, wait 1.55, imc_miss 0.26 are the three most common stalls.
  CHECK(r.counters.at("hw_stall_long_scoreboard_pct") == 88);
  CHECK(r.counters.at("hw_stall_wait_pct") == 5);
  CHECK(r.counters.at("hw_stall_imc_miss_pct") == 1);
  CHECK(r.counters.count("hw_stall_selected_pct") == 0);
  CHECK(std::count_if(r.counters.begin(), r.counters.end(),
                      [](const auto& c) { return c.first.rfind("hw_stall_", 0) == 0; }) == ke::kStallReasons);
  CHECK(ke::counters_text(r.counters) ==
        "counters: DRAM 77% of peak (2592 GB/s), SM 10% of peak, achieved occupancy 24%, warps stalled on "
        "long_scoreboard 88%, wait 5%, imc_miss 1% of the time");

  // In a node's diagnosis, after the GPU part.
  const ke::Spec s = spec_with_cost(false, std::nullopt, "8 * n");
  const ke::DeviceInfo gpu = device(1000e9, 50e12);
  ke::Evaluation e = measured({100, 2}, gpu);
  e.resources = {{"registers", 40}, {"block_threads", 256}, {"active_blocks_per_sm", 6}, {"occupancy_pct", 75}};
  e.resources.insert(r.counters.begin(), r.counters.end());
  const auto d = ke::diagnose(s, {}, e, gpu);
  REQUIRE(d.has_value());
  const std::string text = ke::diagnosis_text(*d);
  CHECK_MESSAGE(text.find("occupancy 75% (block 256, 6 blocks/SM); counters: DRAM 77% of peak") != std::string::npos,
                text);
}

TEST_CASE("Nsight Compute's output without a profiled kernel is an error that says why") {
  // The kernel never launched (ncu then writes its messages and no table).
  ke::CounterResult r = ke::counters_from_nsight_csv(
      "==PROF== Connected to process 1 (/x)\n==PROF== Disconnected from process 1\n"
      "==WARNING== No kernels were profiled.\n");
  CHECK_FALSE(r.ok());
  CHECK(r.error.find("profiled no launch") != std::string::npos);
  // Counters denied to this user.
  r = ke::counters_from_nsight_csv(
      "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
      "Performance Counters on the target device 0.\n");
  CHECK(r.error.find("ERR_NVGPUCTRPERM") != std::string::npos);
  // A table with none of the metrics asked for.
  r = ke::counters_from_nsight_csv("\"ID\",\"Kernel Name\",\"other__metric\"\n\"\",\"\",\"%\"\n\"0\",\"k\",\"5\"\n");
  CHECK(r.error.find("none of the counters") != std::string::npos);
  CHECK(ke::counters_text({}).empty());
  // The command line names the kernel exactly, its first launch and the log file.
  const auto args = ke::nsight_compute_arguments({"row_sum"}, 1, "/tmp/x.csv");
  CHECK(std::find(args.begin(), args.end(), "regex:^row_sum$") != args.end());
  CHECK(std::find(args.begin(), args.end(), "/tmp/x.csv") != args.end());
  const auto count = std::find(args.begin(), args.end(), "-c");
  REQUIRE(count != args.end());
  CHECK(*std::next(count) == "1");
}

namespace {

// The argument after `flag` in ncu's arguments; empty where the flag is not there.
std::string argument_after(const std::vector<std::string>& args, const std::string& flag) {
  const auto it = std::find(args.begin(), args.end(), flag);
  return it == args.end() || std::next(it) == args.end() ? std::string() : *std::next(it);
}

}  // namespace

TEST_CASE("Nsight Compute for a program: every kernel step's name, as many launches, each row in order") {
  const auto args = ke::nsight_compute_arguments({"scale_rows", "add_bias"}, 2, "/tmp/x.csv");
  CHECK(argument_after(args, "-k") == "regex:^(scale_rows|add_bias)$");
  CHECK(argument_after(args, "-c") == "2");
  // Two steps of one kernel: the name once, both launches.
  const auto twice = ke::nsight_compute_arguments({"k", "k"}, 2, "/tmp/x.csv");
  CHECK(argument_after(twice, "-k") == "regex:^k$");
  CHECK(argument_after(twice, "-c") == "2");
  // A name that is not an identifier still matches only itself.
  CHECK(argument_after(ke::nsight_compute_arguments({"a.b", "c"}, 2, "/tmp/x.csv"), "-k") == "regex:^(a\\.b|c)$");
  CHECK_THROWS_AS(ke::nsight_compute_arguments({}, 1, "/tmp/x.csv"), ke::Error);
  CHECK_THROWS_AS(ke::nsight_compute_arguments({"k"}, 0, "/tmp/x.csv"), ke::Error);

  // Derived from the H100 capture (ncu_row_sum_h100.csv): its header and units rows, its row renamed
  // scale_rows, and a second launch, add_bias, with other values (tests/fixtures/counters/ncu_two_kernels.csv).
  const std::string csv = read_fixture("counters/ncu_two_kernels.csv");
  const ke::KernelCountersResult r = ke::kernel_counters_from_nsight_csv(csv);
  REQUIRE_MESSAGE(r.ok(), r.error);
  REQUIRE(r.kernels.size() == 2);
  CHECK(r.kernels[0].kernel == "scale_rows");
  CHECK(r.kernels[0].counters.at("hw_dram_pct") == 77);
  CHECK(r.kernels[0].counters.at("hw_dram_gbps") == 2592);
  CHECK(r.kernels[0].counters.at("hw_duration_ns") == 26816);
  CHECK(r.kernels[0].counters.at("hw_stall_long_scoreboard_pct") == 88);
  CHECK(r.kernels[1].kernel == "add_bias");
  CHECK(r.kernels[1].counters.at("hw_dram_pct") == 42);                // 41.62
  CHECK(r.kernels[1].counters.at("hw_dram_gbps") == 1395);             // 1,395,004,117,210.50 byte/s
  CHECK(r.kernels[1].counters.at("hw_sm_pct") == 32);                  // 31.70
  CHECK(r.kernels[1].counters.at("hw_achieved_occupancy_pct") == 61);  // 61.20
  CHECK(r.kernels[1].counters.at("hw_duration_ns") == 12352);
  // Warps per issue sum to 8.95: long_scoreboard 3.10, wait 2.40, short_scoreboard 0.90.
  CHECK(r.kernels[1].counters.at("hw_stall_long_scoreboard_pct") == 35);
  CHECK(r.kernels[1].counters.at("hw_stall_wait_pct") == 27);
  CHECK(r.kernels[1].counters.at("hw_stall_short_scoreboard_pct") == 10);
  CHECK(r.kernels[1].counters.count("hw_stall_mio_throttle_pct") == 0);  // the fourth most common
  // The one-kernel reading is the first row's.
  const ke::CounterResult first = ke::counters_from_nsight_csv(csv);
  REQUIRE_MESSAGE(first.ok(), first.error);
  CHECK(first.counters == r.kernels[0].counters);
  // A row without the metrics is named.
  const ke::KernelCountersResult bare = ke::kernel_counters_from_nsight_csv(
      "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"ns\"\n\"0\",\"a\",\"5\"\n\"1\",\"b\",\"\"\n");
  CHECK(bare.kernels.size() == 2);
  CHECK_MESSAGE(bare.error.find("none of the counters asked for for launch 2 (kernel b)") != std::string::npos,
                bare.error);
  const ke::KernelCountersResult none = ke::kernel_counters_from_nsight_csv("==WARNING== No kernels were profiled.\n");
  CHECK(none.kernels.empty());
  CHECK(none.error.find("profiled no launch") != std::string::npos);
}

TEST_CASE("a program's steps carry their kernels' counters: text, JSON, and none of them at the top level") {
  const ke::Spec s = spec_with_cost(false, std::nullopt, "8 * n");
  const ke::DeviceInfo gpu = device(1000e9, 50e12);
  ke::Evaluation e = measured({100, 2}, gpu);
  e.resources = {{"steps", 2},
                 {"step1.registers", 32},
                 {"step1.share_permille", 300},
                 {"step2.registers", 16},
                 {"step2.share_permille", 700},
                 {"step2.hw_dram_pct", 42},
                 {"step2.hw_dram_gbps", 1395},
                 {"step2.hw_sm_pct", 32},
                 {"step2.hw_stall_wait_pct", 27},
                 {"step2.hw_duration_ns", 12352},
                 {"hw_dram_pct", 42},
                 {"hw_duration_ns", 12352}};
  const std::vector<ke::StepDiagnosis> steps = ke::program_steps(s, e, nullptr);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].counters.empty());
  CHECK(steps[1].counters.size() == 5);
  CHECK(steps[1].counters.at("hw_dram_pct") == 42);
  CHECK(steps[1].counters.at("hw_duration_ns") == 12352);
  CHECK(ke::step_diagnosis_text(steps[0], 0).find("counters") == std::string::npos);
  const std::string text = ke::step_diagnosis_text(steps[1], 1);
  CHECK_MESSAGE(text.find("step 2 step 2 70% of the time, regs 16") == 0, text);
  CHECK_MESSAGE(text.find(", counters: DRAM 42% of peak (1395 GB/s), SM 32% of peak, warps stalled on wait 27% of "
                          "the time") != std::string::npos,
                text);

  const auto d = ke::diagnose(s, {}, e, gpu);
  REQUIRE(d.has_value());
  // The top level keeps only the "hw_..." resources, not a step's "stepN.hw_...".
  CHECK(d->counters == std::map<std::string, std::int64_t>{{"hw_dram_pct", 42}, {"hw_duration_ns", 12352}});
  // The line says the counters with the step, not once more after the steps.
  const std::string line = ke::diagnosis_text(*d);
  const auto at = line.find("counters: DRAM 42%");
  CHECK_MESSAGE(at != std::string::npos, line);
  CHECK_MESSAGE(line.find("counters:", at + 1) == std::string::npos, line);
  simdjson::dom::parser parser;
  const std::string json = ke::diagnosis_json(*d);
  simdjson::dom::element doc;
  REQUIRE_MESSAGE(parser.parse(json).get(doc) == simdjson::SUCCESS, json);
  CHECK(doc["steps"].at(1)["counters"]["hw_dram_gbps"].get_int64().value() == 1395);
  CHECK(doc["steps"].at(0)["counters"].get_object().value().size() == 0);
  CHECK(doc["counters"]["hw_dram_pct"].get_int64().value() == 42);
}

namespace {

// Times by the tunable A (fastest at A = 6); hardware counters that say which call read them.
class CountingEvaluator final : public ke::FitnessEvaluator {
 public:
  bool fail_counters = false;
  int counter_calls = 0;
  ke::Evaluation evaluate(const ke::Candidate& c, std::uint64_t) override {
    ke::Evaluation e;
    e.status = ke::Status::ok;
    const double us = 10 + 3.0 * std::abs(static_cast<double>(c.tunables.at("A") - 6));
    e.timings = {{us, us, us, 0, 5}};
    e.resources = {{"registers", 32}};
    return e;
  }
  ke::CounterResult hardware_counters(const ke::Candidate&, std::uint64_t) override {
    ke::CounterResult r;
    counter_calls += 1;
    if (fail_counters) {
      r.error = "no profiler here";
    } else {
      r.counters = {{"hw_dram_pct", 10 * counter_calls}, {"hw_achieved_occupancy_pct", 50}};
    }
    return r;
  }
  ke::DeviceInfo device_info() override { return {"synthetic", "cuda", "counting", 1, 0, 1e12, 1e13, 0, {}}; }
};

struct Seen final : ke::Observer {
  std::vector<ke::Node> nodes;
  void on_node(const ke::Node& n, const ke::SearchState&) override { nodes.push_back(n); }
};

ke::Spec tunable_spec() {
  ke::Spec s = spec_with_cost(false, std::nullopt, "8 * n");
  s.workloads = {{{"n", 1000}}};
  s.seed.source = "void k() { (void)A; }";
  s.tunables = {{"A", {1, 2, 3, 4, 5, 6, 7, 8}}};
  s.validate();
  return s;
}

}  // namespace

TEST_CASE(
    "hardware counters of each new best: on the node before observers see it, in its diagnosis; none for the rest") {
  auto evaluator = std::make_shared<CountingEvaluator>();
  ke::EvolverOptions o;
  o.confirm_rounds = 0;
  o.hardware_counters = true;
  ke::Evolver evolver(tunable_spec(), evaluator, std::make_shared<ke::ParamMutator>(), ke::make_policy("greedy"),
                      ke::max_evaluations(8), o);
  Seen seen;
  evolver.add_observer(&seen);
  const ke::RunResult result = evolver.run();
  REQUIRE(seen.nodes.size() == 8);
  CHECK(result.counters_error.empty());
  double best = 0;
  int counted = 0;
  for (const ke::Node& n : seen.nodes) {
    const bool new_best = n.speedup > best;  // distinct times: ties cannot occur
    best = std::max(best, n.speedup);
    CHECK_MESSAGE(n.evaluation.resources.count("hw_dram_pct") == (new_best ? 1u : 0u), "node ", n.id);
    if (!new_best) continue;
    counted += 1;
    CHECK(n.evaluation.resources.at("hw_dram_pct") == 10 * counted);  // read when it became the best
    REQUIRE(n.diagnosis.has_value());
    CHECK(ke::diagnosis_text(*n.diagnosis).find("counters: DRAM " + std::to_string(10 * counted) + "% of peak") !=
          std::string::npos);
  }
  CHECK(counted >= 2);  // the seed, and at least one improvement
  CHECK(result.counted_nodes == counted);
  CHECK(evaluator->counter_calls == counted);

  // A profiler that fails is asked once; the run goes on and says why.
  auto failing = std::make_shared<CountingEvaluator>();
  failing->fail_counters = true;
  ke::Evolver again(tunable_spec(), failing, std::make_shared<ke::ParamMutator>(), ke::make_policy("greedy"),
                    ke::max_evaluations(8), o);
  const ke::RunResult r2 = again.run();
  CHECK(r2.state.evaluations == 8);
  CHECK(failing->counter_calls == 1);
  CHECK(r2.counters_error == "no profiler here");
  CHECK(r2.counted_nodes == 0);
}

TEST_CASE("the roofline floor: flops count unless cost.flops_floor is false; the rate stays either way") {
  ke::DeviceInfo device;
  device.id = device.kind = "cpu";
  device.peak_flops_per_s = 1e9;   // 1024 flops: 1.024 us
  device.peak_bytes_per_s = 1e12;  // 8 KiB: 0.008 us
  const std::string json = R"({"name": "floor", "language": "c", "entry": "f",
    "params": [{"name": "x", "dtype": "f32", "shape": ["N"], "role": "in"},
               {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"}, {"name": "N", "dtype": "i64", "role": "size"}],
    "workloads": [{"N": 1024}], "reference": {"source": "void f(const float* x, float* y, long N) {}"},
    "seed": {"source": "void f(const float* x, float* y, long N) {}"},
    "cost": {"flops": "N", "bytes": "8 * N"FLOOR}})";
  auto spec_with = [&](const std::string& floor) {
    std::string text = json;
    text.replace(text.find("FLOOR"), 5, floor);
    return ke::parse_spec(text, "floor.json");
  };
  const ke::Spec counted = spec_with(""), rates_only = spec_with(R"(, "flops_floor": false)");
  const ke::Bindings w = counted.workloads[0];
  CHECK(ke::roofline_floor_us(counted, w, {}, device) == doctest::Approx(1.024));
  CHECK(ke::roofline_floor_us(rates_only, w, {}, device) == doctest::Approx(8192 / 1e12 * 1e6));
  CHECK(ke::achieved_flops_per_s(rates_only, w, {}, 1.0) == doctest::Approx(1024e6));
}

namespace {

// spec_with_cost's matrix product with its inputs (and output) of `inputs`, `b_dtype` for b.
ke::Spec product_in(ke::DType inputs, ke::DType b_dtype) {
  ke::Spec s = spec_with_cost(true, "2 * n * n * n", "2 * 3 * n * n");
  s.params[0].dtype = inputs;
  s.params[1].dtype = b_dtype;
  s.params[2].dtype = inputs;
  s.validate();
  return s;
}

ke::DeviceInfo hopper_like(double bf16_tensor, double fp16_tensor) {
  ke::DeviceInfo d = device(3000e9, 50e12);
  d.id = "cuda:0";
  d.kind = "cuda";
  d.name = "Test GPU";
  d.compute_units = 132;
  d.bf16_tensor_flops_per_s = bf16_tensor;
  d.fp16_tensor_flops_per_s = fp16_tensor;
  return d;
}

}  // namespace

TEST_CASE("bf16 and fp16 work meets the tensor-core peak, fp32 work the FMA peak; an unknown one falls back, said so") {
  using ke::DType;
  CHECK(ke::tensor_core_dtype(product_in(DType::bf16, DType::bf16)) == DType::bf16);
  CHECK(ke::tensor_core_dtype(product_in(DType::f16, DType::f16)) == DType::f16);
  CHECK(ke::tensor_core_dtype(product_in(DType::f16, DType::bf16)) == DType::bf16);  // mixed: bf16's
  CHECK_FALSE(ke::tensor_core_dtype(product_in(DType::f32, DType::f32)).has_value());
  CHECK_FALSE(ke::tensor_core_dtype(product_in(DType::bf16, DType::f32)).has_value());  // an fp32 input: FMA work
  CHECK_FALSE(ke::tensor_core_dtype(product_in(DType::i32, DType::i32)).has_value());   // no float input
  // Only the inputs say: a bf16 product written out in fp32 is still tensor-core work.
  CHECK(ke::tensor_core_dtype(product_in(DType::bf16, DType::bf16)) == DType::bf16);
  ke::Spec fp32_out = product_in(DType::bf16, DType::bf16);
  fp32_out.params[2].dtype = DType::f32;
  CHECK(ke::tensor_core_dtype(fp32_out) == DType::bf16);

  const ke::DeviceInfo gpu = hopper_like(700e12, 650e12);
  const ke::Spec bf16 = product_in(DType::bf16, DType::bf16), fp16 = product_in(DType::f16, DType::f16),
                 fp32 = product_in(DType::f32, DType::f32);
  const ke::ComputePeak bf16_peak = ke::compute_peak(bf16, gpu);
  CHECK(bf16_peak.tensor);
  CHECK(bf16_peak.flops_per_s == 700e12);
  CHECK(bf16_peak.name == "bf16 tensor peak");
  CHECK(bf16_peak.fallback.empty());
  CHECK(ke::compute_peak(fp16, gpu).flops_per_s == 650e12);
  CHECK(ke::compute_peak(fp16, gpu).name == "fp16 tensor peak");
  const ke::ComputePeak fp32_peak = ke::compute_peak(fp32, gpu);
  CHECK_FALSE(fp32_peak.tensor);
  CHECK(fp32_peak.flops_per_s == 50e12);
  CHECK(fp32_peak.name == "FMA peak");
  CHECK(fp32_peak.fallback.empty());

  // n = 512 in 1 us: 268 TFLOP/s, 38% of the bf16 tensor peak; the same product in fp32 over the FMA peak.
  const auto d = ke::diagnose(bf16, {}, measured({1, 1000}, gpu), gpu);
  REQUIRE(d.has_value());
  CHECK(*d->workloads[0].compute_share == doctest::Approx(268435456.0 / 1e-6 / 700e12));
  CHECK(d->workloads[0].compute_peak == "bf16 tensor peak");
  CHECK(ke::workload_diagnosis_text(d->workloads[0]).find("268 TFLOP/s (38% of bf16 tensor peak)") !=
        std::string::npos);
  CHECK(ke::diagnosis_json(*d).find("\"compute_peak\": \"bf16 tensor peak\"") != std::string::npos);
  const auto f = ke::diagnose(fp32, {}, measured({10, 1000}, gpu), gpu);
  CHECK(*f->workloads[0].compute_share == doctest::Approx(268435456.0 / 1e-5 / 50e12));
  CHECK(f->workloads[0].compute_peak == "FMA peak");
  CHECK(ke::workload_diagnosis_text(f->workloads[0]).find("26.8 TFLOP/s (54% of FMA peak)") != std::string::npos);

  // A device whose tensor peak is unknown: the FMA peak stands in, and the text and JSON say why.
  const ke::DeviceInfo unknown = hopper_like(0, 0);
  const ke::ComputePeak fallback = ke::compute_peak(bf16, unknown);
  CHECK_FALSE(fallback.tensor);
  CHECK(fallback.flops_per_s == 50e12);
  CHECK(fallback.fallback == "bf16 tensor peak unknown");
  const auto u = ke::diagnose(bf16, {}, measured({10, 1000}, unknown), unknown);
  CHECK(*u->workloads[0].compute_share == doctest::Approx(268435456.0 / 1e-5 / 50e12));
  CHECK(ke::workload_diagnosis_text(u->workloads[0]).find("(54% of FMA peak; bf16 tensor peak unknown)") !=
        std::string::npos);
  CHECK(ke::diagnosis_json(*u).find("\"compute_peak\": \"FMA peak; bf16 tensor peak unknown\"") != std::string::npos);
  // Nothing known at all: said as unknown, with the reason.
  const ke::DeviceInfo bare = device(0, 0);
  const auto b = ke::diagnose(fp16, {}, measured({1000, 1000}, bare), bare);
  CHECK_FALSE(b->workloads[0].compute_share.has_value());
  CHECK(ke::workload_diagnosis_text(b->workloads[0]).find("(FMA peak unknown; fp16 tensor peak unknown)") !=
        std::string::npos);

  // The report's roofline share takes the same peak: n = 1000, 2e9 flops (and 6 MB, a smaller share of the copy).
  const ke::Bindings w = bf16.workloads[1];
  CHECK(ke::roofline_share(bf16, w, {}, 10.0, gpu) == doctest::Approx(2e9 / 1e-5 / 700e12));
  CHECK(ke::roofline_share(fp32, w, {}, 100.0, gpu) == doctest::Approx(2e9 / 1e-4 / 50e12));
}

TEST_CASE("the roofline floor of bf16 work: twice its tensor peak, no flop floor without one; fp32's unchanged") {
  using ke::DType;
  const ke::Spec bf16 = product_in(DType::bf16, DType::bf16), fp32 = product_in(DType::f32, DType::f32);
  const ke::Bindings w = bf16.workloads[0];  // n = 512: 268435456 flops, 1.5 MiB
  const double flops = 268435456.0, bytes = 2.0 * 3 * 512 * 512;
  ke::DeviceInfo gpu = hopper_like(700e12, 650e12);
  gpu.peak_bytes_per_s = 1e15;  // the flops, not the bytes, set these floors
  CHECK(ke::roofline_floor_us(bf16, w, {}, gpu) == doctest::Approx(flops / (ke::kTensorFloorFactor * 700e12) * 1e6));
  CHECK(ke::roofline_floor_us(fp32, w, {}, gpu) == doctest::Approx(flops / 50e12 * 1e6));
  // A cuBLAS bf16 product at 790 TFLOP/s is far under the FMA peak's floor, but not under its own.
  CHECK(flops / 790e12 * 1e6 > ke::roofline_floor_us(bf16, w, {}, gpu));
  CHECK(flops / 790e12 * 1e6 < ke::roofline_floor_us(fp32, w, {}, gpu));
  // No tensor peak: the FMA peak bounds nothing for it, so only the bytes do.
  ke::DeviceInfo unknown = hopper_like(0, 0);
  unknown.peak_bytes_per_s = 1e15;
  CHECK(ke::roofline_floor_us(bf16, w, {}, unknown) == doctest::Approx(bytes / 1e15 * 1e6));
  CHECK(ke::roofline_floor_us(fp32, w, {}, unknown) == doctest::Approx(flops / 50e12 * 1e6));
}

TEST_CASE(
    "the tensor peaks travel with the device (worker to parent, the store); a device stored before them has none") {
  ke::DeviceInfo gpu = hopper_like(700e12, 650e12);
  const ke::DeviceInfo back = ke::wire::device_info_from_json(ke::wire::to_json(gpu));
  CHECK(back.bf16_tensor_flops_per_s == 700e12);
  CHECK(back.fp16_tensor_flops_per_s == 650e12);
  CHECK(back.peak_flops_per_s == 50e12);
  // As a run stored before the tensor peaks were measured wrote its device: read as unknown, not refused.
  std::string old = ke::wire::to_json(gpu);
  const auto from = old.find(", \"bf16_tensor_flops_per_s\"");
  const auto to = old.find(", \"properties\"");
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  old.erase(from, to - from);
  const ke::DeviceInfo before = ke::wire::device_info_from_json(old);
  CHECK(before.bf16_tensor_flops_per_s == 0);
  CHECK(before.fp16_tensor_flops_per_s == 0);
  CHECK(before.peak_flops_per_s == 50e12);
  CHECK(ke::compute_peak(product_in(ke::DType::bf16, ke::DType::bf16), before).fallback == "bf16 tensor peak unknown");
}
