// Issue 32's CPU parts: precision as a problem's dimension (--dtype bf16|fp16: a PyTorch problem's floats cast,
// KernelBench's 1e-2 tolerance, bf16 C kernels through the CPU device's prelude, a bf16 problem kept apart from
// the fp32 one in the store). The spec contract's fields need no torch; the rest skip, saying so, where no Python
// imports it.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>
#include <kernelevolve/pytorch.hpp>
#include <kernelevolve/store.hpp>
#include <string>
#include <vector>

#include "support/cli_runner.hpp"
#include "support/have_torch.hpp"

namespace ke = kernelevolve;

namespace {

std::string fixture(const std::string& name) { return std::string(KE_FIXTURES) + "/pytorch/" + name; }

std::string read(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in, path);
  return {std::istreambuf_iterator<char>(in), {}};
}

using ke_test::have_torch;
using Cli = ke_test::CliOutcome;
Cli cli(const std::string& args) { return ke_test::run_cli_in("", args); }

std::vector<std::string> names_of(const ke::Spec& spec) {
  std::vector<std::string> names;
  for (const ke::Param& p : spec.params) names.push_back(p.name);
  return names;
}

const ke::Param& param(const ke::Spec& spec, const std::string& name) {
  const ke::Param* p = spec.find_param(name);
  REQUIRE_MESSAGE(p != nullptr, name);
  return *p;
}

// `source` with `from` replaced by `to` (which must be there once).
std::string edited(std::string source, const std::string& from, const std::string& to) {
  const auto at = source.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  return source.replace(at, from.size(), to);
}

ke::EvalOptions few_trials() {
  ke::EvalOptions o;
  o.trials = 4;
  o.min_reps = 3;
  o.max_reps = 6;
  o.target_ms = 1;
  return o;
}

// A spec file with a PyTorch reference, its reference section as given.
std::string spec_with_reference(const std::string& reference, const std::string& extra = "") {
  return R"({"name": "p", "language": "c", "entry": "p",
    "params": [{"name": "x", "dtype": "bf16", "shape": ["n"], "role": "in"},
               {"name": "out", "dtype": "bf16", "shape": ["n"], "role": "out"},
               {"name": "n", "dtype": "i64", "role": "size"}],
    "workloads": [{"n": 8}], "reference": )" +
         reference + extra + "}";
}

}  // namespace

TEST_CASE("training: a spec's PyTorch reference names its dtype, backward and with_forward, and they round-trip") {
  const std::string where = fixture("spec.json");  // relative paths resolve beside the fixtures
  const std::string module = "\"linear_relu_scale.py\"";
  const ke::Spec bf16 =
      ke::parse_spec(spec_with_reference("{\"pytorch\": " + module + ", \"dtype\": \"bf16\"}"), where);
  CHECK(bf16.reference.dtype == ke::DType::bf16);
  CHECK_FALSE(bf16.reference.backward);
  CHECK(bf16.tolerance.atol == 1e-2);  // KernelBench's for bf16, the spec giving none
  CHECK(bf16.tolerance.rtol == 1e-2);
  const ke::Spec given = ke::parse_spec(
      spec_with_reference("{\"pytorch\": " + module + ", \"dtype\": \"bf16\"}", R"(, "tolerance": {"atol": 0.05})"),
      where);
  CHECK(given.tolerance.atol == 0.05);  // the spec's own wins

  const ke::Spec step =
      ke::parse_spec(spec_with_reference("{\"pytorch\": " + module +
                                         ", \"dtype\": \"f16\", \"backward\": true, \"with_forward\": true}"),
                     where);
  CHECK(step.reference.dtype == ke::DType::f16);
  CHECK(step.reference.backward);
  CHECK(step.reference.with_forward);
  const ke::Spec back = ke::parse_spec(ke::to_json(step), where);
  CHECK(back.reference.dtype == ke::DType::f16);
  CHECK(back.reference.backward);
  CHECK(back.reference.with_forward);
  CHECK(ke::spec_hash(step) != ke::spec_hash(bf16));
  CHECK(ke::pytorch_variant_text(step.reference).find("forward and backward") != std::string::npos);

  for (const auto& refused : std::vector<std::pair<std::string, std::string>>{
           {"{\"pytorch\": " + module + ", \"dtype\": \"f32\"}", "\"bf16\" or \"f16\""},
           {"{\"pytorch\": " + module + ", \"with_forward\": true}", "\"backward\": true too"},
           {"{\"pytorch\": " + module + ", \"backward\": 1}", "expected true or false"},
           {"{\"source\": \"void p() {}\", \"backward\": true}", "makes a problem of a PyTorch module"}}) {
    const std::string& reference = refused.first;
    const std::string& why = refused.second;
    CAPTURE(reference);
    try {
      (void)ke::parse_spec(spec_with_reference(reference), where);
      FAIL("loaded");
    } catch (const ke::Error& e) {
      CHECK(e.code() == ke::ErrorCode::BadSpec);
      CHECK_MESSAGE(std::string(e.what()).find(why) != std::string::npos, e.what());
    }
  }
}

TEST_CASE("training: --dtype bf16 casts the float inputs and weights, not the integers, and the tolerance is 1e-2" *
          doctest::skip(!have_torch())) {
  ke::PytorchProblemOptions options;
  options.dtype = ke::DType::bf16;
  const ke::Spec spec = ke::load_pytorch_problem(fixture("linear_relu_scale.py"), options);
  CHECK(spec.name == "linear_relu_scale_bf16");  // the precision is part of the problem's name
  CHECK(spec.entry == "linear_relu_scale_bf16");
  CHECK(spec.reference.dtype == ke::DType::bf16);
  CHECK(names_of(spec) == std::vector<std::string>{"x", "scale", "fc_weight", "fc_bias", "out", "batch_size",
                                                   "in_features", "out_features"});
  for (const char* name : {"x", "fc_weight", "fc_bias", "out"})
    CHECK_MESSAGE(param(spec, name).dtype == ke::DType::bf16, name);
  CHECK(param(spec, "scale").dtype == ke::DType::f32);  // a Python float stays a float scalar
  CHECK(param(spec, "batch_size").dtype == ke::DType::i64);
  CHECK(spec.tolerance.atol == 1e-2);
  CHECK(spec.tolerance.rtol == 1e-2);
  CHECK(spec.cost_bytes->text().find("2 * batch_size * in_features") != std::string::npos);  // two bytes each
  CHECK(spec.notes.find("ke_bf16_to_float") != std::string::npos);
  CHECK(ke::kernel_signature(spec).find("const __bf16* x, float scale") != std::string::npos);

  const ke::Spec table = ke::load_pytorch_problem(fixture("embedding_scale.py"), options);
  CHECK(param(table, "indices").dtype == ke::DType::i64);
  CHECK(param(table, "table_weight").dtype == ke::DType::bf16);
  CHECK(param(table, "out").dtype == ke::DType::bf16);

  options.dtype = ke::DType::f16;
  const ke::Spec half = ke::load_pytorch_problem(fixture("linear_relu_scale.py"), options);
  CHECK(half.name == "linear_relu_scale_f16");
  CHECK(param(half, "fc_weight").dtype == ke::DType::f16);
  CHECK(half.tolerance.atol == 1e-2);
}

TEST_CASE("training: a bf16 kernel that computes right verifies; one wrong beyond 1e-2 does not" *
          doctest::skip(!have_torch())) {
  ke::PytorchProblemOptions options;
  options.dtype = ke::DType::bf16;
  const ke::Spec spec = ke::load_pytorch_problem(fixture("linear_relu_scale.py"), options);
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), few_trials());
  const std::string seed = read(fixture("linear_relu_scale_bf16_seed.c"));
  for (std::uint64_t s = 1; s <= 2; ++s) {
    const ke::Evaluation e = evaluator.evaluate({seed, ke::Language::c, {}}, s);
    CHECK_MESSAGE(e.status == ke::Status::ok, e.message << "\n" << e.compile_log);
  }
  // 3% off: within bf16's own rounding of a few ulps (0.4% each) it is not; beyond KernelBench's 1e-2 it is.
  const std::string off = edited(seed, "* scale)", "* scale * 1.03f)");
  const ke::Evaluation wrong = evaluator.evaluate({off, ke::Language::c, {}}, 3);
  CHECK(wrong.status == ke::Status::incorrect);
  CHECK_MESSAGE(wrong.message.find("wrong output: out[") != std::string::npos, wrong.message);
}

TEST_CASE("training: an fp32 run and a bf16 run of the same module are two problems in one store" *
          doctest::skip(!have_torch())) {
  ke_test::TempDir dir("ke_training_store");
  const std::string db = dir / "runs.db";
  const std::string module = fixture("linear_relu_scale.py");
  const Cli fp32 = cli("run " + module + " --seed-kernel " + fixture("linear_relu_scale_seed.c") + " --db " + db +
                       " --max-evals 2 --json");
  REQUIRE_MESSAGE(fp32.code == 0, fp32.err);
  const Cli bf16 = cli("run " + module + " --dtype bf16 --seed-kernel " + fixture("linear_relu_scale_bf16_seed.c") +
                       " --db " + db + " --max-evals 2 --json");
  REQUIRE_MESSAGE(bf16.code == 0, bf16.err);
  CHECK(bf16.out.find("\"spec\": \"linear_relu_scale_bf16\"") != std::string::npos);

  ke::Store store(db, ke::Store::Mode::read_only);
  const std::vector<ke::RunInfo> runs = store.runs();
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].spec_name == "linear_relu_scale");
  CHECK(runs[1].spec_name == "linear_relu_scale_bf16");
  CHECK(runs[0].spec_hash != runs[1].spec_hash);
  // A measurement of one is never reused for the other.
  CHECK(runs[0].measurement_hash != runs[1].measurement_hash);
  // Each resumes its own run: the latest of the same spec (its seed included, as the command line gave it).
  ke::PytorchProblemOptions options;
  options.dtype = ke::DType::bf16;
  ke::Spec spec = ke::load_pytorch_problem(module, options);
  spec.seed.source = read(fixture("linear_relu_scale_bf16_seed.c"));
  CHECK(store.latest_run(spec) == runs[1].id);
  spec = ke::load_pytorch_problem(module);
  spec.seed.source = read(fixture("linear_relu_scale_seed.c"));
  CHECK(store.latest_run(spec) == runs[0].id);
}
