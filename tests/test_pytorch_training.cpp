// Issue 32's CPU parts: precision as a problem's dimension (--dtype bf16|fp16: a PyTorch problem's floats cast,
// KernelBench's 1e-2 tolerance, bf16 C kernels through the CPU device's prelude, a bf16 problem kept apart from
// the fp32 one in the store) and backward problems (--backward [--with-forward]: the signature of the gradients,
// verified against autograd in float64, a wrong gradient caught, a correct kernel whose sums differ from call to
// call accepted), the backward problems of our own (problems/pytorch/*_backward), and a suite problem run in bf16.
// The spec contract's fields need no torch; the rest skip, saying so, where no Python imports it.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>
#include <kernelevolve/pytorch.hpp>
#include <kernelevolve/store.hpp>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/script_process.hpp"
#include "pytorch/python.hpp"
#include "support/cli_runner.hpp"
#include "support/have_torch.hpp"

namespace ke = kernelevolve;

namespace {

std::string fixture(const std::string& name) { return std::string(KE_FIXTURES) + "/pytorch/" + name; }
std::string shipped_problem(const std::string& name, const std::string& file) {
  return std::string(KE_SOURCE_DIR) + "/problems/pytorch/" + name + "/" + file;
}
std::string rms_norm_problem(const std::string& file) { return shipped_problem("rms_norm_backward", file); }

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

TEST_CASE("training: a backward's signature: the inputs and weights, grad_<output> in, their gradients out" *
          doctest::skip(!have_torch())) {
  ke::PytorchProblemOptions options;
  options.backward = true;
  const ke::Spec linear = ke::load_pytorch_problem(fixture("linear_relu_scale.py"), options);
  CHECK(linear.name == "linear_relu_scale_backward");
  CHECK(linear.reference.backward);
  CHECK(names_of(linear) == std::vector<std::string>{"x", "scale", "fc_weight", "fc_bias", "grad_out", "grad_x",
                                                     "grad_fc_weight", "grad_fc_bias", "batch_size", "in_features",
                                                     "out_features"});
  CHECK(param(linear, "grad_out").role == ke::Role::in);
  CHECK(param(linear, "grad_out").shape == std::vector<std::string>{"batch_size", "out_features"});
  CHECK(param(linear, "grad_x").role == ke::Role::out);
  CHECK(param(linear, "grad_x").shape == std::vector<std::string>{"batch_size", "in_features"});
  CHECK(param(linear, "grad_fc_weight").shape == std::vector<std::string>{"out_features", "in_features"});
  CHECK(param(linear, "grad_fc_bias").shape == std::vector<std::string>{"out_features"});
  CHECK(linear.tolerance.atol == 1e-4);  // fp32's, against float64 autograd
  // The backward's two products, not the forward's one: 2 * 2 * B * I * O.
  REQUIRE(linear.cost_flops);
  CHECK(linear.cost_flops->eval(linear.bindings(linear.workloads[0], {})) == 4 * 32 * 64 * 48);
  CHECK(linear.notes.find("backward") != std::string::npos);

  options.with_forward = true;
  options.dtype = ke::DType::bf16;
  const ke::Spec step = ke::load_pytorch_problem(fixture("linear_relu_scale.py"), options);
  CHECK(step.name == "linear_relu_scale_bf16_forward_backward");
  CHECK(names_of(step) == std::vector<std::string>{"x", "scale", "fc_weight", "fc_bias", "grad_out", "out", "grad_x",
                                                   "grad_fc_weight", "grad_fc_bias", "batch_size", "in_features",
                                                   "out_features"});
  CHECK(param(step, "grad_fc_weight").dtype == ke::DType::bf16);
  CHECK(step.tolerance.atol == 1e-2);
  CHECK(step.cost_flops->eval(step.bindings(step.workloads[0], {})) == 6 * 32 * 64 * 48);

  options = {};
  options.backward = true;
  const ke::Spec rms = ke::load_pytorch_problem(rms_norm_problem("model.py"), options);
  CHECK(names_of(rms) == std::vector<std::string>{"x", "weight", "grad_out", "grad_x", "grad_weight", "batch_size",
                                                  "seq_len", "hidden"});
  // It is the problem the suite ships as a spec.
  const ke::Spec shipped = ke::load_spec(rms_norm_problem("cpu.json"));
  REQUIRE(shipped.params.size() == rms.params.size());
  for (std::size_t i = 0; i < rms.params.size(); ++i) {
    CHECK(shipped.params[i].name == rms.params[i].name);
    CHECK(shipped.params[i].role == rms.params[i].role);
    CHECK(shipped.params[i].shape == rms.params[i].shape);
  }

  // Only the inputs get_inputs() marks requires_grad, and the parameters, not the buffers.
  const ke::Spec marked = ke::load_pytorch_problem(fixture("grad_marked.py"), options);
  CHECK(names_of(marked) ==
        std::vector<std::string>{"x", "y", "scale", "shift", "grad_out", "grad_x", "grad_scale", "rows", "cols"});
  try {
    (void)ke::load_pytorch_problem(fixture("no_backward.py"), options);
    FAIL("loaded");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::BadSpec);
    CHECK_MESSAGE(std::string(e.what()).find("no backward") != std::string::npos, e.what());
  }
}

TEST_CASE("training: a backward verifies against float64 autograd; a wrong gradient does not" *
          doctest::skip(!have_torch())) {
  const ke::Spec spec = ke::load_spec(rms_norm_problem("cpu.json"));
  CHECK(spec.reference.backward);
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), few_trials());
  const std::string seed = spec.seed.source;
  for (const ke::Bindings& point : {ke::Bindings{{"GW", 0}, {"ACC", 1}}, ke::Bindings{{"GW", 1}, {"ACC", 16}}}) {
    const ke::Evaluation e = evaluator.evaluate({seed, ke::Language::c, point}, 1);
    CHECK_MESSAGE(e.status == ke::Status::ok, e.message << "\n" << e.compile_log);
    CHECK(e.resources.count("float64_checks") == 0);  // the reference is float64 already
  }
  // grad_weight 0.1% off: beyond fp32's 1e-4 of the exact gradient.
  const std::string weight_off = edited(seed, "grad_weight[j] = sum;", "grad_weight[j] = sum * 1.001f;");
  const ke::Evaluation wrong = evaluator.evaluate({weight_off, ke::Language::c, {}}, 2);
  CHECK(wrong.status == ke::Status::incorrect);
  CHECK_MESSAGE(wrong.message.find("grad_weight[") != std::string::npos, wrong.message);
  // grad_x without the normalization's own term: the forward's gradient through the weight alone.
  const std::string no_term = edited(seed, "(go[j] * weight[j] - xr[j] * c)", "(go[j] * weight[j])");
  const ke::Evaluation partial = evaluator.evaluate({no_term, ke::Language::c, {}}, 3);
  CHECK(partial.status == ke::Status::incorrect);
  CHECK_MESSAGE(partial.message.find("grad_x[") != std::string::npos, partial.message);

  // The Linear's backward, derived on the spot, with its fp32 seed; and in bf16 with the forward, one problem.
  ke::PytorchProblemOptions options;
  options.backward = true;
  const ke::Spec linear = ke::load_pytorch_problem(fixture("linear_relu_scale.py"), options);
  ke::LocalEvaluator linear_evaluator(linear, ke::open_device("cpu"), few_trials());
  const std::string linear_seed = read(fixture("linear_relu_scale_backward_seed.c"));
  const ke::Evaluation ok = linear_evaluator.evaluate({linear_seed, ke::Language::c, {}}, 4);
  CHECK_MESSAGE(ok.status == ke::Status::ok, ok.message << "\n" << ok.compile_log);
  const std::string bias_off = edited(linear_seed, "grad_fc_bias[o] = ST(sb);", "grad_fc_bias[o] = ST(sb + 1e-3f);");
  CHECK(linear_evaluator.evaluate({bias_off, ke::Language::c, {}}, 5).status == ke::Status::incorrect);

  options.with_forward = true;
  options.dtype = ke::DType::bf16;
  const ke::Spec step = ke::load_pytorch_problem(fixture("linear_relu_scale.py"), options);
  ke::LocalEvaluator step_evaluator(step, ke::open_device("cpu"), few_trials());
  const ke::Evaluation bf16 = step_evaluator.evaluate({"#define BF16 1\n" + linear_seed, ke::Language::c, {}}, 6);
  CHECK_MESSAGE(bf16.status == ke::Status::ok, bf16.message << "\n" << bf16.compile_log);
  const std::string forward_off =
      edited("#define BF16 1\n" + linear_seed, "ST((z > 0 ? z : 0) * scale)", "ST((z > 0 ? z : 0) * scale * 1.03f)");
  const ke::Evaluation forward_wrong = step_evaluator.evaluate({forward_off, ke::Language::c, {}}, 7);
  CHECK(forward_wrong.status == ke::Status::incorrect);
  CHECK_MESSAGE(forward_wrong.message.find("wrong output: out[") != std::string::npos, forward_wrong.message);
}

TEST_CASE("training: a backward whose sums change order from call to call (as atomics do) is accepted" *
          doctest::skip(!have_torch())) {
  // grad_weight's column sums run down the rows, then up them, on alternate calls, and each result is nudged
  // one ulp up or down by the call's parity: no two calls agree bit for bit, as a kernel whose blocks add into
  // grad_weight with atomics in whatever order they finish. Every call is within the tolerance of the exact
  // gradient, and that is what verification, the timed calls' spot checks and the confirmation's repeats ask.
  const ke::Spec spec = ke::load_spec(rms_norm_problem("cpu.json"));
  const std::string varying =
      edited(edited(spec.seed.source,
                    "      for (int64_t r = 0; r < rows; ++r) sum += grad_out[r * n + j] * x[r * n + j] * rstds[r];",
                    "      for (int64_t i = 0; i < rows; ++i) {\n"
                    "        const int64_t r = calls % 2 ? rows - 1 - i : i;\n"
                    "        sum += grad_out[r * n + j] * x[r * n + j] * rstds[r];\n"
                    "      }\n"
                    "      sum = nextafterf(sum, calls % 2 ? INFINITY : -INFINITY);"),
             "  free(rstds);", "  free(rstds);\n  calls += 1;");
  const std::string source = edited(varying, "void rms_norm_backward(", "static long calls;\nvoid rms_norm_backward(");
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), few_trials());
  for (std::uint64_t s = 1; s <= 3; ++s) {
    const ke::Evaluation e = evaluator.evaluate({source, ke::Language::c, {}}, s);
    CHECK_MESSAGE(e.status == ke::Status::ok, e.message << "\n" << e.compile_log);
  }
  // The same kernel ten thousand ulps off is not.
  const std::string far = edited(source, "sum = nextafterf(", "sum = 1.001f * nextafterf(");
  CHECK(evaluator.evaluate({far, ke::Language::c, {}}, 4).status == ke::Status::incorrect);
}

TEST_CASE("training: the command line's --dtype, --backward and --with-forward" * doctest::skip(!have_torch())) {
  const std::string module = fixture("linear_relu_scale.py");
  const Cli checked =
      cli("check " + module + " --backward --seed-kernel " + fixture("linear_relu_scale_backward_seed.c"));
  CHECK_MESSAGE(checked.code == 0, checked.err);
  CHECK(checked.out.find("seed: ok") != std::string::npos);
  CHECK_MESSAGE(checked.out.find("input grad_out (f32): an output's gradient") != std::string::npos, checked.out);

  ke_test::TempDir dir("ke_training_import");
  const Cli imported = cli("import " + module + " --dtype bf16 --backward -o " + dir.path.string());
  REQUIRE_MESSAGE(imported.code == 0, imported.err);
  CHECK(imported.out.find("void linear_relu_scale_bf16_backward(const __bf16* x") != std::string::npos);
  const ke::Spec spec = ke::load_spec(dir / "cpu.json");
  CHECK(spec.reference.backward);
  CHECK(spec.reference.dtype == ke::DType::bf16);
  CHECK(spec.tolerance.atol == 1e-2);

  for (const auto& refused : std::vector<std::pair<std::string, std::string>>{
           {"check " + module + " --dtype fp8", "--dtype is bf16 or fp16"},
           {"check " + module + " --with-forward", "--with-forward goes with --backward"},
           {"check " + rms_norm_problem("cpu.json") + " --dtype bf16", "a spec file says so in its reference"}}) {
    const std::string& args = refused.first;
    const std::string& why = refused.second;
    CAPTURE(args);
    const Cli r = cli(args);
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.err.find(why) != std::string::npos, r.err);
  }
}

namespace {

// A backward problem of our own (problems/pytorch/*_backward) and a wrong gradient made from its seed.
struct ShippedBackward {
  std::string problem;
  std::string from, to;  // the seed's text and its wrong replacement
  std::string caught;    // the output the mismatch is reported on
};

}  // namespace

TEST_CASE(
    "training: each backward problem of our own: its seed verifies at both ends of its tunables against "
    "float64 autograd, and a gradient with a term dropped does not" *
    doctest::skip(!have_torch())) {
  const std::vector<ShippedBackward> cases{
      // grad_x without mean(g): the gradient through the mean's own dependence on x dropped.
      {"layer_norm_backward", "go[j] * norm_weight[j] - mean_g - xhat * mean_g_xhat",
       "go[j] * norm_weight[j] - xhat * mean_g_xhat", "grad_x["},
      // Only the softmax's term: the target's one-hot term dropped.
      {"softmax_cross_entropy_backward", "    g[targets[b]] -= scale;\n", "", "grad_logits["},
      // Only the one-hot term (the rest near 4e-6, caught because the spec's atol is 1e-7, not 1e-4).
      {"softmax_cross_entropy_backward", "g[c] = factor * (STORE ? g[c] : expf(z[c] - max));", "g[c] = 0.0f;",
       "grad_logits["},
      // A row named twice keeps one bag's gradient, not the sum of both (a store where an add belongs).
      {"embedding_bag_backward", "row[c] += g[c];", "row[c] = g[c];", "grad_bag_weight["},
      // Each pair's contribution to its first row only: the transposed half of (G + G^T) dropped.
      {"dlrm_interaction_backward", "          dx[j * D + k] += g[p] * x[i * D + k];\n", "", "grad_features["}};
  std::string checked_problem;
  ke::Spec spec;
  std::unique_ptr<ke::LocalEvaluator> evaluator;  // one per problem: each starts its own PyTorch
  for (const ShippedBackward& c : cases) {
    CAPTURE(c.problem);
    if (c.problem != checked_problem) {
      checked_problem = c.problem;
      spec = ke::load_spec(shipped_problem(c.problem, "cpu.json"));
      REQUIRE(spec.reference.backward);
      evaluator = std::make_unique<ke::LocalEvaluator>(spec, ke::open_device("cpu"), few_trials());
      // The shipped params are the derived backward's (dlrm_interaction_backward adds num_pairs, a size with its
      // constraint, as dlrm_interaction's spec does).
      ke::PytorchProblemOptions options;
      options.backward = true;
      std::vector<std::string> derived = names_of(ke::load_pytorch_problem(spec.reference.file, options));
      if (c.problem == "dlrm_interaction_backward") derived.push_back("num_pairs");
      CHECK(names_of(spec) == derived);

      ke::Bindings last;
      for (const auto& [name, values] : spec.tunables) last[name] = values.back();
      for (const ke::Bindings& point : {spec.seed_tunables(), last}) {
        const ke::Evaluation e = evaluator->evaluate({spec.seed.source, ke::Language::c, point}, 1);
        CHECK_MESSAGE(e.status == ke::Status::ok, e.message << "\n" << e.compile_log);
      }
    }
    const std::string wrong = edited(spec.seed.source, c.from, c.to);
    const ke::Evaluation e = evaluator->evaluate({wrong, ke::Language::c, spec.seed_tunables()}, 2);
    CHECK(e.status == ke::Status::incorrect);
    CHECK_MESSAGE(e.message.find(c.caught) != std::string::npos, e.message);
  }
}

namespace {

std::string shape_text(const ke::Param& p) {
  std::string out = "[";
  for (const std::string& d : p.shape) out += (out.size() > 1 ? ", " : "") + d;
  return out + "]";
}

// `shipped`'s params are `derived`'s: names, roles, dtypes and shapes, in order. A shape written another way (DLRM's
// num_pairs for the derivation's (num_fields * num_fields - num_fields) / 2) must give the same number of elements
// at each of `shipped`'s workloads.
void check_same_params(const ke::Spec& shipped, const ke::Spec& derived, const std::string& where) {
  CHECK_MESSAGE(names_of(shipped) == names_of(derived), where);
  if (shipped.params.size() != derived.params.size()) return;
  for (std::size_t i = 0; i < derived.params.size(); ++i) {
    const ke::Param &s = shipped.params[i], &d = derived.params[i];
    CAPTURE(s.name);
    CHECK_MESSAGE(s.role == d.role, where);
    CHECK_MESSAGE(s.dtype == d.dtype, where);
    CHECK_MESSAGE(s.shape.size() == d.shape.size(), where);
    if (s.shape == d.shape || !s.is_buffer()) continue;
    for (const ke::Bindings& w : shipped.workloads)
      CHECK_MESSAGE(shipped.element_count(s, w) == derived.element_count(d, w),
                    where << ": shapes " << shape_text(s) << " and " << shape_text(d));
  }
}

}  // namespace

TEST_CASE(
    "training: each backward problem's GPU spec (cuda.json) has the derived backward's params, its CPU spec's "
    "params and tolerance, and a seed with its entry; RMSNorm's forward GPU spec has the module's forward params" *
    doctest::skip(!have_torch())) {
  // The GPU specs cannot run here; what the CPU can check of them is that they state the problem the derivation
  // gives, so that a GPU run measures the same problem as the CPU one.
  int checked = 0;
  for (const std::string problem :
       {"rms_norm_backward", "layer_norm_backward", "softmax_cross_entropy_backward", "embedding_bag_backward",
        "embedding_bag_sparse_backward", "dlrm_interaction_backward"}) {
    CAPTURE(problem);
    const ke::Spec gpu = ke::load_spec(shipped_problem(problem, "cuda.json"));
    const ke::Spec cpu = ke::load_spec(shipped_problem(problem, "cpu.json"));
    CHECK(gpu.language == ke::Language::cuda);
    REQUIRE(gpu.reference.pytorch);
    CHECK(gpu.reference.backward);
    CHECK(!gpu.reference.with_forward);
    CHECK(gpu.reference.file == cpu.reference.file);
    ke::PytorchProblemOptions options;
    options.backward = true;
    ke::Spec derived = ke::load_pytorch_problem(gpu.reference.file, options);
    // dlrm_interaction_backward adds num_pairs, a size with its constraint, as dlrm_interaction's spec does.
    if (problem == "dlrm_interaction_backward") derived.params.push_back(param(cpu, "num_pairs"));
    check_same_params(gpu, derived, problem + "/cuda.json against the derived backward");
    check_same_params(gpu, cpu, problem + "/cuda.json against cpu.json");
    CHECK(gpu.tolerance.atol == cpu.tolerance.atol);
    CHECK(gpu.tolerance.rtol == cpu.tolerance.rtol);
    CHECK(gpu.workloads.size() >= 2);
    CHECK(gpu.satisfies_constraints(gpu.seed_tunables()));  // at every workload (DLRM's num_pairs)
    CHECK_MESSAGE(gpu.seed.source.find(" " + gpu.entry + "(") != std::string::npos, "the seed has no " << gpu.entry);
    ++checked;
  }
  CHECK(checked == 6);

  // The forward of the training operator's pair (bench/training_gpu.py): model.py's forward, at the backward's
  // workloads (the operator takes a shape both programs were verified on).
  const ke::Spec forward = ke::load_spec(rms_norm_problem("forward_cuda.json"));
  const ke::Spec backward = ke::load_spec(rms_norm_problem("cuda.json"));
  REQUIRE(forward.reference.pytorch);
  CHECK(!forward.reference.backward);
  CHECK(forward.reference.source == backward.reference.source);
  check_same_params(forward, ke::load_pytorch_problem(forward.reference.file), "rms_norm_backward/forward_cuda.json");
  CHECK(forward.workloads == backward.workloads);
  CHECK(forward.tolerance.atol == backward.tolerance.atol);
}

TEST_CASE("training: a suite problem runs with --dtype bf16 and a C seed that reads bf16 (matmul_ab)" *
          doctest::skip(!have_torch())) {
  // The suite's fp32 module, cast: no bf16 files ship, --dtype makes the problem (docs/pytorch-precision.md).
  ke_test::TempDir dir("ke_training_bf16_suite");
  const std::string seed = R"(#include <stdint.h>
void matmul_ab_bf16(const __bf16* a, const __bf16* b, __bf16* out, int64_t M, int64_t K, int64_t N) {
  float row[N];
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) row[j] = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      const float av = ke_bf16_to_float(a[i * K + k]);
      for (int64_t j = 0; j < N; ++j) row[j] += av * ke_bf16_to_float(b[k * N + j]);
    }
    for (int64_t j = 0; j < N; ++j) out[i * N + j] = ke_float_to_bf16(row[j]);
  }
}
)";
  const std::string seed_file = dir / "matmul_bf16.c";
  std::ofstream(seed_file) << seed;
  const std::string module = shipped_problem("matmul_ab", "model.py");
  const Cli r = cli("run " + module + " --dtype bf16 --seed-kernel " + seed_file + " --no-db --max-evals 1 --json");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("\"spec\": \"matmul_ab_bf16\"") != std::string::npos);
  CHECK_MESSAGE(r.out.find("\"seed\": {\"node\": 0, \"status\": \"ok\"") != std::string::npos, r.out);

  // The last term of each product dropped: a few percent off, beyond bf16's 1e-2.
  ke::PytorchProblemOptions options;
  options.dtype = ke::DType::bf16;
  const ke::Spec spec = ke::load_pytorch_problem(module, options);
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), few_trials());
  const std::string short_sum = edited(seed, "k < K; ++k", "k < K - 1; ++k");
  const ke::Evaluation wrong = evaluator.evaluate({short_sum, ke::Language::c, {}}, 1);
  CHECK(wrong.status == ke::Status::incorrect);
  CHECK_MESSAGE(wrong.message.find("wrong output: out[") != std::string::npos, wrong.message);
}

TEST_CASE("training: an integer output is compared exactly, not within the float tolerance") {
  // An index of 10^6 one off is within 1e-4 relative: the sparse gradient's rows must not pass so.
  const std::string reference =
      "#include <stdint.h>\n"
      "void big(const int64_t* x, int64_t* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = 1000000 + x[i]; }";
  const std::string source_json = "\"#include <stdint.h>\\n" + reference.substr(reference.find('\n') + 1) + "\"";
  const std::string spec_text = R"({"name": "big", "language": "c", "entry": "big",
    "params": [{"name": "x", "dtype": "i64", "shape": ["n"], "role": "in"},
               {"name": "out", "dtype": "i64", "shape": ["n"], "role": "out"},
               {"name": "n", "dtype": "i64", "role": "size"}],
    "workloads": [{"n": 64}], "reference": {"source": )" +
                                source_json + R"(}, "seed": {"source": )" + source_json + "}}";
  const ke::Spec spec = ke::parse_spec(spec_text, fixture("spec.json"));
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), few_trials());
  const ke::Evaluation right = evaluator.evaluate({reference, ke::Language::c, {}}, 1);
  CHECK_MESSAGE(right.status == ke::Status::ok, right.message << "\n" << right.compile_log);
  const ke::Evaluation one_off =
      evaluator.evaluate({edited(reference, "1000000 +", "1000001 +"), ke::Language::c, {}}, 2);
  CHECK(one_off.status == ke::Status::incorrect);
  CHECK_MESSAGE(one_off.message.find("wrong output: out[") != std::string::npos, one_off.message);
}

TEST_CASE(
    "training: the embedding bag's sparse gradient: derived as rows, values and their count; the seed verifies "
    "against autograd's coalesced gradient; wrong rows, sums, counts or padding do not" *
    doctest::skip(!have_torch())) {
  const std::string name = "embedding_bag_sparse_backward";
  const ke::Spec spec = ke::load_spec(shipped_problem(name, "cpu.json"));
  REQUIRE(spec.reference.backward);

  // The derived signature: nn.EmbeddingBag(sparse=True)'s table gradient as three outputs, the capacity the
  // number of index positions (a size of its own, num_indices), and the shipped spec's params are those.
  ke::PytorchProblemOptions options;
  options.backward = true;
  const ke::Spec derived = ke::load_pytorch_problem(spec.reference.file, options);
  CHECK(names_of(spec) == names_of(derived));
  CHECK(names_of(derived) == std::vector<std::string>{"indices", "offsets", "bag_weight", "grad_out",
                                                      "grad_bag_weight_indices", "grad_bag_weight_values",
                                                      "grad_bag_weight_nnz", "num_indices", "batch_size",
                                                      "num_embeddings", "embedding_dim"});
  CHECK(param(derived, "grad_bag_weight_indices").dtype == ke::DType::i64);
  CHECK(param(derived, "grad_bag_weight_indices").shape == std::vector<std::string>{"num_indices"});
  CHECK(param(derived, "grad_bag_weight_values").dtype == ke::DType::f32);
  CHECK(param(derived, "grad_bag_weight_values").shape == std::vector<std::string>{"num_indices", "embedding_dim"});
  CHECK(param(derived, "grad_bag_weight_nnz").dtype == ke::DType::i64);
  CHECK(param(derived, "grad_bag_weight_nnz").shape == std::vector<std::string>{"1"});
  // The integer inputs keep the problem's values (in range) on every trial.
  CHECK(ke::describe_input(spec, param(spec, "indices")).find("every trial") != std::string::npos);

  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), few_trials());
  ke::Bindings last;
  for (const auto& [tunable, values] : spec.tunables) last[tunable] = values.back();
  for (const ke::Bindings& point : {spec.seed_tunables(), last}) {
    const ke::Evaluation e = evaluator.evaluate({spec.seed.source, ke::Language::c, point}, 1);
    CHECK_MESSAGE(e.status == ke::Status::ok, e.message << "\n" << e.compile_log);
  }
  struct Wrong {
    std::string from, to, caught;
  };
  const std::vector<Wrong> wrongs{
      // A row named twice keeps one bag's gradient, not the sum of both.
      {"row[c] += g[c];", "row[c] = g[c];", "grad_bag_weight_values["},
      // The rows in descending order: the right rows and sums, in the wrong places.
      {"      slot[r] = nnz;\n      grad_bag_weight_indices[nnz++] = r;",
       "      slot[r] = nnz;\n      grad_bag_weight_indices[nnz++] = num_embeddings - 1 - r;",
       "grad_bag_weight_indices["},
      // The count one short.
      {"grad_bag_weight_nnz[0] = nnz;", "grad_bag_weight_nnz[0] = nnz - 1;", "grad_bag_weight_nnz["},
      // The padding left as row 0 rather than -1.
      {"grad_bag_weight_indices[u] = -1;", "grad_bag_weight_indices[u] = 0;", "grad_bag_weight_indices["}};
  for (const Wrong& w : wrongs) {
    CAPTURE(w.to);
    const ke::Evaluation e =
        evaluator.evaluate({edited(spec.seed.source, w.from, w.to), ke::Language::c, spec.seed_tunables()}, 2);
    CHECK(e.status == ke::Status::incorrect);
    CHECK_MESSAGE(e.message.find(w.caught) != std::string::npos, e.message);
  }
}

TEST_CASE(
    "training: attention, ours: the C seed verifies at both ends of ACC; without the mask or the scale it does not" *
    doctest::skip(!have_torch())) {
  const ke::Spec spec = ke::load_spec(shipped_problem("attention", "cpu.json"));
  CHECK(names_of(spec) == names_of(ke::load_pytorch_problem(spec.reference.file)));
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), few_trials());
  for (const ke::Bindings& point : {spec.seed_tunables(), ke::Bindings{{"ACC", spec.tunables.at("ACC").back()}}}) {
    const ke::Evaluation e = evaluator.evaluate({spec.seed.source, ke::Language::c, point}, 1);
    CHECK_MESSAGE(e.status == ke::Status::ok, e.message << "\n" << e.compile_log);
  }
  // Every key attended to, the later ones too; and the scores not divided by sqrt(head_dim).
  std::string unmasked = spec.seed.source;
  for (std::size_t at; (at = unmasked.find("j <= i")) != std::string::npos;) unmasked.replace(at, 6, "j < S");
  for (const std::string& wrong : {unmasked, edited(spec.seed.source, "D) * scale;", "D);")}) {
    const ke::Evaluation e = evaluator.evaluate({wrong, ke::Language::c, spec.seed_tunables()}, 2);
    CHECK(e.status == ke::Status::incorrect);
    CHECK_MESSAGE(e.message.find("wrong output: out[") != std::string::npos, e.message);
  }
}

TEST_CASE("training: attention in bf16 on the CPU: a C kernel reading __bf16 verifies, and one unmasked does not" *
          doctest::skip(!have_torch())) {
  // The bf16 problem that problems/pytorch/attention/triton_bf16.json is on the GPU, at the CPU's sizes.
  const std::string kernel = R"(#include <math.h>
#include <stdint.h>
#include <stdlib.h>
void attention_bf16(const __bf16* q, const __bf16* k, const __bf16* v, __bf16* out, int64_t batch_size,
                    int64_t heads, int64_t seq_len, int64_t head_dim) {
  const int64_t S = seq_len, D = head_dim;
  const float scale = 1.0f / sqrtf((float)D);
  float* p = malloc(sizeof(float) * (size_t)S);
  float* o = malloc(sizeof(float) * (size_t)D);
  for (int64_t bh = 0; bh < batch_size * heads; ++bh) {
    const int64_t head = bh * S * D;
    for (int64_t i = 0; i < S; ++i) {
      const int64_t last = i;
      float max = -INFINITY;
      for (int64_t j = 0; j <= last; ++j) {
        float s = 0.0f;
        for (int64_t d = 0; d < D; ++d)
          s += ke_bf16_to_float(q[head + i * D + d]) * ke_bf16_to_float(k[head + j * D + d]);
        p[j] = s * scale;
        if (p[j] > max) max = p[j];
      }
      float sum = 0.0f;
      for (int64_t j = 0; j <= last; ++j) sum += (p[j] = expf(p[j] - max));
      for (int64_t d = 0; d < D; ++d) o[d] = 0.0f;
      for (int64_t j = 0; j <= last; ++j)
        for (int64_t d = 0; d < D; ++d) o[d] += p[j] / sum * ke_bf16_to_float(v[head + j * D + d]);
      for (int64_t d = 0; d < D; ++d) out[head + i * D + d] = ke_float_to_bf16(o[d]);
    }
  }
  free(p);
  free(o);
}
)";
  ke::PytorchProblemOptions options;
  options.dtype = ke::DType::bf16;
  const ke::Spec spec = ke::load_pytorch_problem(shipped_problem("attention", "model.py"), options);
  CHECK(spec.entry == "attention_bf16");
  CHECK(spec.tolerance.atol == 1e-2);
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), few_trials());
  const ke::Evaluation right = evaluator.evaluate({kernel, ke::Language::c, {}}, 1);
  CHECK_MESSAGE(right.status == ke::Status::ok, right.message << "\n" << right.compile_log);
  const ke::Evaluation unmasked = evaluator.evaluate(
      {edited(kernel, "const int64_t last = i;", "const int64_t last = S - 1;"), ke::Language::c, {}}, 2);
  CHECK(unmasked.status == ke::Status::incorrect);
}

TEST_CASE(
    "training: every bf16 Triton spec of problems/pytorch: its params are its module's in bf16, and its seed "
    "parses, its kernel taking the params, then tunables" *
    doctest::skip(!have_torch())) {
  namespace fs = std::filesystem;
  // The Python that imports torch parses the seeds too: Triton itself is only on the GPU machine.
  const std::string list_args = R"(import ast, sys
tree = ast.parse(sys.argv[1])
for node in tree.body:
    if isinstance(node, ast.FunctionDef) and node.name == sys.argv[2]:
        assert any(ast.unparse(d) == "triton.jit" for d in node.decorator_list), "not @triton.jit"
        print(" ".join(a.arg for a in node.args.args))
)";
  int found = 0;
  for (const auto& dir : fs::directory_iterator(std::string(KE_SOURCE_DIR) + "/problems/pytorch")) {
    const fs::path path = dir.path() / "triton_bf16.json";
    if (!fs::exists(path)) continue;
    CAPTURE(path.string());
    ++found;
    const ke::Spec spec = ke::load_spec(path.string());
    CHECK(spec.language == ke::Language::triton);
    REQUIRE(spec.reference.pytorch);
    CHECK(spec.reference.dtype == ke::DType::bf16);
    CHECK(spec.tolerance.atol == 1e-2);
    ke::PytorchProblemOptions options;
    options.dtype = ke::DType::bf16;
    const ke::Spec derived = ke::load_pytorch_problem(spec.reference.file, options);
    REQUIRE(spec.params.size() == derived.params.size());
    for (std::size_t i = 0; i < spec.params.size(); ++i) {
      CAPTURE(spec.params[i].name);
      CHECK(spec.params[i].name == derived.params[i].name);
      CHECK(spec.params[i].dtype == derived.params[i].dtype);
      CHECK(spec.params[i].role == derived.params[i].role);
      CHECK(spec.params[i].shape == derived.params[i].shape);
    }
    for (const ke::Bindings& workload : spec.workloads)
      CHECK_MESSAGE(spec.failed_constraint(workload, spec.seed_tunables()) == nullptr, "the seed point at a workload");
    const std::string args =
        ke::run_script(ke::pytorch::find_python(), list_args, {spec.seed.source, spec.entry}, 60, "the seed's parse");
    std::vector<std::string> names;
    std::stringstream words(args);
    for (std::string w; words >> w;) names.push_back(w);
    REQUIRE(names.size() >= spec.params.size());
    for (std::size_t i = 0; i < spec.params.size(); ++i) CHECK(names[i] == spec.params[i].name);
    for (std::size_t i = spec.params.size(); i < names.size(); ++i) CHECK(spec.tunables.count(names[i]) == 1);
  }
  CHECK(found >= 5);
}

TEST_CASE("training: every bf16 Triton seed of problems/pytorch computes its module's answer, run on numpy (no GPU)" *
          doctest::skip(!have_torch())) {
  namespace fs = std::filesystem;
  // tests/python/triton_numpy.py: numpy stands in for Triton, program by program, at the module's defaults and at
  // sizes that are no multiple of a tile; its output within bf16's 1e-2 of the module in float64 (it exits 1 else).
  const std::string script = read(std::string(KE_SOURCE_DIR) + "/tests/python/triton_numpy.py");
  int found = 0;
  for (const auto& dir : fs::directory_iterator(std::string(KE_SOURCE_DIR) + "/problems/pytorch")) {
    const fs::path path = dir.path() / "triton_bf16.json";
    if (!fs::exists(path)) continue;
    ++found;
    for (const std::vector<std::string>& args : {std::vector<std::string>{path.string()}, {path.string(), "odd"}}) {
      CAPTURE(args.back());
      std::string said;
      CHECK_NOTHROW(said = ke::run_script(ke::pytorch::find_python(), script, args, 120, "triton_numpy.py"));
      MESSAGE(said);
    }
  }
  CHECK(found >= 5);
}
