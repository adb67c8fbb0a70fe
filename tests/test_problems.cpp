// The problem suite (problems/): every CPU problem's seed passes, its fastest-looking tunable point passes,
// and its tolerance rejects an all-zeros output and every constant output; every CUDA spec loads.
//
// "Every constant" is checked two ways. Analytically: on fresh inputs from the spec's own distribution,
// a constant c passes an output buffer only if it lies in every element's interval
// [e - (atol + rtol |e|), e + (atol + rtol |e|)] around the reference's value e; the test asserts that
// these intervals have no common point, for every output buffer, on some workload. Then by experiment:
// a generated kernel with the seed's signature that writes the constant closest to passing (the middle
// of the widest gap) must be `incorrect`, as must one that writes zeros.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <kernelevolve/device.hpp>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>
#include <kernelevolve/program.hpp>
#include <kernelevolve/spec.hpp>

#include "eval/buffers.hpp"

namespace ke = kernelevolve;
namespace fs = std::filesystem;

namespace {

fs::path problems_dir() { return fs::path(KE_SOURCE_DIR) / "problems"; }

std::vector<fs::path> specs_named(const std::set<std::string>& names) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(problems_dir()))
    if (entry.is_regular_file() && names.count(entry.path().filename().string())) out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Verification on all four input families (the spec's, normal, Laplace, skewed uniform), little timing.
ke::EvalOptions quick() {
  ke::EvalOptions o;
  o.trials = 4;
  o.warmup = 0;
  o.min_reps = 1;
  o.max_reps = 2;
  o.target_ms = 1;
  o.input_sets = 1;
  return o;
}

// Only the first trial: a tolerance that rejects an output does so on the spec's own inputs, before the
// evaluator's check that outputs follow their inputs (which catches constants on later trials anyway).
ke::EvalOptions one_trial() {
  ke::EvalOptions o = quick();
  o.trials = 1;
  return o;
}

// C types with f16/bf16 as raw 16-bit patterns (the kernel writes bits, not half values).
const char* raw_c_type(ke::DType t) {
  switch (t) {
    case ke::DType::f16:
    case ke::DType::bf16: return "uint16_t";
    case ke::DType::f32: return "float";
    case ke::DType::f64: return "double";
    case ke::DType::i8: return "int8_t";
    case ke::DType::u8: return "uint8_t";
    case ke::DType::i32: return "int32_t";
    case ke::DType::i64: return "int64_t";
  }
  return "float";
}

// The C literal an element of `t` gets for the value v (f16/bf16 as raw bits).
std::string literal(ke::DType t, double v) {
  std::ostringstream out;
  out.precision(17);
  switch (t) {
    case ke::DType::f16: out << ke::eval::float_to_half(static_cast<float>(v)); break;
    case ke::DType::bf16: out << ke::eval::float_to_bf16(static_cast<float>(v)); break;
    case ke::DType::f32: out << "(float)" << v; break;
    case ke::DType::f64: out << v; break;
    default: out << "(" << raw_c_type(t) << ")" << std::llround(v); break;
  }
  return out.str();
}

// A C kernel with the spec's signature that writes `values[i]` (by param index) to every element of
// every output buffer, whatever its inputs.
std::string constant_kernel(const ke::Spec& spec, const std::vector<double>& values) {
  std::ostringstream src;
  src << "#include <stdint.h>\nvoid " << spec.entry << "(";
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    const ke::Param& p = spec.params[i];
    src << (i ? ", " : "");
    if (p.role == ke::Role::in) src << "const " << raw_c_type(p.dtype) << "* " << p.name;
    else if (p.is_buffer()) src << raw_c_type(p.dtype) << "* " << p.name;
    else src << raw_c_type(p.dtype) << " " << p.name;
  }
  src << ") {\n";
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    const ke::Param& p = spec.params[i];
    if (p.role != ke::Role::out && p.role != ke::Role::inout) continue;
    src << "  { int64_t n = 1;";
    for (const std::string& dim : p.shape) src << " n *= (int64_t)(" << dim << ");";
    src << " for (int64_t e = 0; e < n; ++e) " << p.name << "[e] = " << literal(p.dtype, values[i]) << "; }\n";
  }
  for (const ke::Param& p : spec.params)
    if (!p.is_buffer()) src << "  (void)" << p.name << ";\n";
  src << "}\n";
  return src.str();
}

// The reference's outputs (by param index) for one workload, on inputs drawn from the spec's distribution.
std::vector<ke::eval::HostArray> reference_outputs(const ke::Spec& spec, ke::Device& device,
                                                   const ke::Bindings& workload, std::uint64_t seed) {
  ke::KernelSource ks;
  ks.source = spec.reference.source;
  ks.language = spec.reference.language.value_or(spec.language);
  ks.entry = spec.entry;
  ks.params = spec.params;
  ks.defines = spec.seed_tunables();
  const ke::CompileResult compiled = device.compile(ks);
  REQUIRE_MESSAGE(compiled.ok(), compiled.log);

  const std::size_t n = spec.params.size();
  std::vector<ke::eval::HostArray> arrays(n);
  std::vector<std::unique_ptr<ke::Buffer>> buffers(n);
  std::vector<void*> pointers(n, nullptr);
  std::vector<std::vector<unsigned char>> values(n, std::vector<unsigned char>(8, 0));
  std::vector<void*> args(n, nullptr);
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < n; ++i) {
    const ke::Param& p = spec.params[i];
    if (p.is_buffer()) {
      arrays[i] = ke::eval::HostArray(p.dtype, static_cast<std::size_t>(spec.element_count(p, workload)));
      if (p.role == ke::Role::out) {
        ke::eval::poison(arrays[i]);
      } else {
        // The spec's own distribution, an integer input's declared range bound to this workload (an index
        // drawn outside it would read outside a table).
        ke::eval::fill_random(arrays[i], spec.input_distribution(p, workload), rng);
      }
      buffers[i] = device.allocate(std::max<std::size_t>(arrays[i].size_bytes(), 1));
      buffers[i]->upload(arrays[i].bytes.data(), arrays[i].size_bytes());
      pointers[i] = buffers[i]->data();
      args[i] = &pointers[i];
    } else {
      const double v = p.role == ke::Role::size ? static_cast<double>(workload.at(p.name)) : p.value;
      ke::eval::HostArray one(p.dtype, 1);
      one.set(0, v);
      std::copy(one.bytes.begin(), one.bytes.end(), values[i].begin());
      args[i] = values[i].data();
    }
  }
  const ke::LaunchResult launched = device.launch(*compiled.kernel, args.data(), ke::LaunchDims{});
  REQUIRE_MESSAGE(launched.ok, launched.error);
  std::vector<ke::eval::HostArray> outputs(n);
  for (std::size_t i = 0; i < n; ++i) {
    const ke::Param& p = spec.params[i];
    if (p.role != ke::Role::out && p.role != ke::Role::inout) continue;
    outputs[i] = arrays[i];
    buffers[i]->download(outputs[i].bytes.data(), outputs[i].size_bytes());
  }
  return outputs;
}

// Where the tolerance intervals of all elements leave the most room for one constant: the largest
// lower end `lo` and the smallest upper end `hi`. A constant passes only if lo <= hi.
struct ConstantRoom {
  double lo = -INFINITY, hi = INFINITY;
  bool any_passes() const { return lo <= hi; }
  double best() const { return std::isfinite(lo) && std::isfinite(hi) ? 0.5 * (lo + hi) : 0.0; }
};

ConstantRoom constant_room(const ke::eval::HostArray& expected, const ke::Tolerance& tol) {
  ConstantRoom room;
  for (std::size_t i = 0; i < expected.count; ++i) {
    const double e = expected.get(i);
    if (std::isnan(e)) return {0, -1};  // only NaN matches NaN: no constant number passes
    const double t = tol.atol + tol.rtol * std::abs(e);
    room.lo = std::max(room.lo, e - t);
    room.hi = std::min(room.hi, e + t);
  }
  return room;
}

std::string shown(const fs::path& p) { return fs::relative(p, fs::path(KE_SOURCE_DIR)).string(); }

}  // namespace

TEST_CASE(
    "the suite has at least 20 level-1, 10 level-2 and 5 level-3 CPU problems, each with a cost model and notes") {
  int level1 = 0, level2 = 0, level3 = 0;
  for (const fs::path& path : specs_named({"cpu.json", "spec.json"})) {
    const std::string where = shown(path);
    const ke::Spec spec = ke::load_spec(path.string());
    CHECK_MESSAGE(ke::is_cpu_language(spec.language), where);
    CHECK_MESSAGE(spec.cost_bytes.has_value(), where << ": no cost.bytes");
    CHECK_MESSAGE(spec.cost_flops.has_value(), where << ": no cost.flops");
    CHECK_MESSAGE(!spec.notes.empty(), where << ": no notes");
    CHECK_MESSAGE(!spec.tunables.empty(), where << ": no tunables");
    CHECK_MESSAGE(spec.workloads.size() >= 2, where << ": one workload only");
    if (where.find("level1/") != std::string::npos) ++level1;
    if (where.find("level2/") != std::string::npos) ++level2;
    if (where.find("level3_recsys/") != std::string::npos) ++level3;
  }
  CHECK(level1 >= 20);
  CHECK(level2 >= 10);
  CHECK(level3 >= 5);
}

TEST_CASE("every CUDA problem's spec loads") {
  int loaded = 0;
  for (const fs::path& path : specs_named({"cuda.json"})) {
    CHECK_NOTHROW_MESSAGE(
        {
          const ke::Spec spec = ke::load_spec(path.string());
          CHECK_MESSAGE(spec.language == ke::Language::cuda, shown(path));
          CHECK_MESSAGE(spec.launch.has_value(), shown(path));
          CHECK_MESSAGE(spec.cost_bytes.has_value(), shown(path));
          ++loaded;
        },
        shown(path));
  }
  CHECK(loaded >= 5);
}

TEST_CASE("every Triton problem's spec loads, its seed point within its constraints") {
  int loaded = 0;
  for (const fs::path& path : specs_named({"triton.json", "triton_bf16.json"})) {
    CHECK_NOTHROW_MESSAGE(
        {
          const ke::Spec spec = ke::load_spec(path.string());
          CHECK_MESSAGE(spec.language == ke::Language::triton, shown(path));
          CHECK_MESSAGE(spec.cost_flops.has_value(), shown(path));
          ++loaded;
        },
        shown(path));
  }
  CHECK(loaded >= 3);
}

TEST_CASE("every CPU problem: the seed and the last tunable point pass; zeros and every constant fail") {
  auto device = ke::open_device("cpu");
  int problems = 0;
  for (const fs::path& path : specs_named({"cpu.json", "spec.json"})) {
    const std::string where = shown(path);
    CAPTURE(where);
    const ke::Spec spec = ke::load_spec(path.string());
    // PyTorch problems have no kernel reference to probe here: test_pytorch checks each against PyTorch.
    if (spec.reference.pytorch) continue;
    ++problems;

    // (a) The seed at its own point, on all four input families.
    ke::LocalEvaluator evaluator(spec, device, quick());
    const ke::Candidate seed{spec.seed.source, spec.seed.language.value_or(spec.language), spec.seed_tunables()};
    const ke::Evaluation seed_eval = evaluator.evaluate(seed, 11);
    CHECK_MESSAGE(seed_eval.status == ke::Status::ok, where
                                                          << ": seed: " << std::string(ke::to_string(seed_eval.status))
                                                          << ": " << seed_eval.message << "\n"
                                                          << seed_eval.compile_log);

    // The other end of every tunable list (usually the fast one), where the constraints allow it.
    ke::Bindings last;
    for (const auto& [name, values] : spec.tunables) last[name] = values.back();
    if (spec.satisfies_constraints(last)) {
      const ke::Evaluation e = evaluator.evaluate(ke::Candidate{seed.source, seed.language, last}, 12);
      CHECK_MESSAGE(e.status == ke::Status::ok,
                    where << ": last tunable point: " << std::string(ke::to_string(e.status)) << ": " << e.message);
    }

    // (b) All zeros, and (c) the constants closest to passing, found from the reference's outputs.
    std::vector<double> zeros(spec.params.size(), 0.0), constants(spec.params.size(), 0.0);
    std::vector<bool> rejected(spec.params.size(), false);
    for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
      const auto outputs = reference_outputs(spec, *device, spec.workloads[w], 1000 + w);
      for (std::size_t i = 0; i < spec.params.size(); ++i) {
        if (outputs[i].count == 0) continue;
        const ConstantRoom room = constant_room(outputs[i], spec.tolerance);
        if (!room.any_passes()) rejected[i] = true;
        if (w == 0) constants[i] = room.best();
      }
    }
    for (std::size_t i = 0; i < spec.params.size(); ++i) {
      const ke::Param& p = spec.params[i];
      if (p.role != ke::Role::out && p.role != ke::Role::inout) continue;
      CHECK_MESSAGE(rejected[i],
                    where << ": some constant output of '" << p.name << "' is within the tolerance on every workload");
    }

    ke::LocalEvaluator first_trial(spec, device, one_trial());
    const ke::Language language = spec.seed.language.value_or(spec.language);
    const ke::Evaluation zero_eval =
        first_trial.evaluate(ke::Candidate{constant_kernel(spec, zeros), language, spec.seed_tunables()}, 13);
    CHECK_MESSAGE(zero_eval.status == ke::Status::incorrect,
                  where << ": all-zeros output: " << std::string(ke::to_string(zero_eval.status)) << ": "
                        << zero_eval.message << "\n"
                        << zero_eval.compile_log);
    const ke::Evaluation const_eval =
        first_trial.evaluate(ke::Candidate{constant_kernel(spec, constants), language, spec.seed_tunables()}, 14);
    CHECK_MESSAGE(const_eval.status == ke::Status::incorrect,
                  where << ": constant output: " << std::string(ke::to_string(const_eval.status)) << ": "
                        << const_eval.message << "\n"
                        << const_eval.compile_log);
    MESSAGE(where << ": seed ok; zeros: " << zero_eval.message << "; constant: " << const_eval.message);
  }
  CHECK(problems >= 35);
}

TEST_CASE("every CUDA seed that declares a program: its plan parses against its spec and binds at each workload") {
  int programs = 0;
  for (const fs::path& path : specs_named({"cuda.json"})) {
    CAPTURE(shown(path));
    const ke::Spec spec = ke::load_spec(path.string());
    if (!ke::find_plan_block(spec.seed.source, spec.seed.language.value_or(spec.language)).found()) continue;
    ++programs;
    const ke::Plan plan = ke::plan_of(spec, spec.seed.source, spec.language);
    CHECK(plan.declared);
    for (const ke::PlanStep& step : plan.steps)
      if (!step.is_library())
        CHECK_MESSAGE(spec.seed.source.find(" " + step.kernel + "(") != std::string::npos, step.kernel);
    for (const ke::Bindings& workload : spec.workloads)
      CHECK_NOTHROW(ke::bind_plan(plan, spec, workload, spec.seed_tunables()));
  }
  CHECK(programs >= 1);
}
