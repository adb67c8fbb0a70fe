// Programs (program.hpp): a source's launch plan read and checked against the spec, its place in a node's
// identity, and CPU programs evaluated by the fitness protocol: a two-pass program with a temporary, a
// temporary left unwritten (poisoned, so caught), one too large for the device, and plans that cannot run.
#include <doctest/doctest.h>

#include <kernelevolve/candidate.hpp>
#include <kernelevolve/device.hpp>
#include <kernelevolve/diagnosis.hpp>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>
#include <kernelevolve/program.hpp>

#include <fstream>
#include <optional>
#include <string>

#include "core/tunables.hpp"
#include "support/centre_program.hpp"
#include "support/cli_runner.hpp"

namespace ke = kernelevolve;
using ke_test::centre_spec;
using ke_test::centre_two_pass;
using ke_test::kCentreReference;

namespace {

ke::EvalOptions quick() {
  ke::EvalOptions o;
  o.trials = 3;
  o.max_reps = 10;
  o.target_ms = 1;
  return o;
}

ke::Evaluation evaluate(const ke::Spec& spec, const std::string& source, ke::Bindings tunables = {{"CHUNK", 256}},
                        ke::EvalOptions options = quick()) {
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), options);
  return evaluator.evaluate(ke::Candidate{source, ke::Language::c, tunables}, 7);
}

std::string plan_error(const ke::Spec& spec, const std::string& plan, ke::Language language = ke::Language::c) {
  try {
    // Each language's own block: a Python source's is a string, where "/*" would not open a comment.
    ke::plan_of(spec,
                language == ke::Language::triton ? "\"\"\"kernelevolve-plan " + plan + "\"\"\""
                                                 : "/* kernelevolve-plan " + plan + " */",
                language);
  } catch (const ke::PlanError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a source without a plan runs the spec's one kernel, with the spec's params and launch") {
  ke::Spec spec = centre_spec();
  const ke::Plan plan = ke::plan_of(spec, kCentreReference, ke::Language::c);
  CHECK_FALSE(plan.declared);
  REQUIRE(plan.steps.size() == 1);
  CHECK(plan.steps[0].kernel == "centre");
  CHECK(plan.steps[0].args.size() == 3);
  CHECK(plan.temporaries.empty());
  const auto sig = plan.signature(spec, 0);
  REQUIRE(sig.size() == 3);
  CHECK(sig[0].name == "x");
  CHECK(sig[2].role == ke::Role::size);
}

TEST_CASE("a declared plan: temporaries, steps, arguments by name or expression, bound per workload") {
  const ke::Spec spec = centre_spec();
  const ke::Plan plan = ke::plan_of(spec, centre_two_pass(), ke::Language::c);
  CHECK(plan.declared);
  REQUIRE(plan.temporaries.size() == 1);
  CHECK(plan.temporaries[0].dtype == ke::DType::f64);
  REQUIRE(plan.steps.size() == 2);
  CHECK(plan.steps[1].args[1].kind == ke::StepArg::Kind::temporary);
  CHECK(plan.steps[1].args[4].kind == ke::StepArg::Kind::value);
  CHECK(plan.steps[0].args[3].kind == ke::StepArg::Kind::value);  // a tunable, passed as a value
  const auto sig = plan.signature(spec, 1);
  CHECK(sig[1].role == ke::Role::inout);
  CHECK(sig[1].dtype == ke::DType::f64);
  CHECK(sig[4].dtype == ke::DType::i64);

  const ke::BoundPlan bound = ke::bind_plan(plan, spec, {{"n", 1000}}, {{"CHUNK", 256}});
  CHECK(bound.temporary_elements[0] == 4);
  CHECK(bound.total_temporary_bytes == 32);
  CHECK(bound.values[1][4] == 4);
  CHECK(bound.values[0][3] == 256);

  // The canonical JSON reads back as the same plan.
  const ke::Plan again = ke::plan_of(spec, "/* kernelevolve-plan " + ke::to_json(plan) + " */", ke::Language::c);
  CHECK(ke::to_json(again) == ke::to_json(plan));
}

TEST_CASE("a plan that cannot run says what is wrong") {
  const ke::Spec spec = centre_spec();
  CHECK(plan_error(spec, R"({"steps": [{"kernel": "a", "args": ["x", "nope"]}]})").find("'nope'") != std::string::npos);
  CHECK(plan_error(spec, R"({"steps": []})").find("steps") != std::string::npos);
  CHECK(plan_error(spec, R"({"stpes": [{"kernel": "a"}]})").find("unknown field 'stpes'") != std::string::npos);
  CHECK(plan_error(spec, R"({"steps": [{"kernel": "a b"}]})").find("not an identifier") != std::string::npos);
  CHECK(plan_error(spec, R"({"steps": [{"kernel": "a", "grid": [1]}]})").find("CPU step") != std::string::npos);
  CHECK(plan_error(spec, R"({"steps": [{"library": "cublaslt.matmul", "args": ["x"]}]})").find("CPU program") !=
        std::string::npos);
  CHECK(plan_error(spec, R"({"steps": [{"library": "mkl.gemm", "args": ["x"]}]})", ke::Language::cuda)
            .find("not a library call") != std::string::npos);
  CHECK(
      plan_error(spec, R"({"temporaries": [{"name": "x", "dtype": "f32", "shape": [1]}], "steps": [{"kernel": "a"}]})")
          .find("name of a param") != std::string::npos);
  CHECK(plan_error(spec,
                   R"({"temporaries": [{"name": "t", "dtype": "f32", "shape": ["q"]}], "steps": [{"kernel": "a"}]})")
            .find("reads 'q'") != std::string::npos);
  CHECK(plan_error(spec, R"({"steps": [{"kernel": "a", "args": ["x"]}]  )").find("never closes") != std::string::npos);
  CHECK(plan_error(spec, R"({"steps": [{"kernel": "a", "args": [x]}]})").find("not valid JSON") != std::string::npos);
  // Two plans are one too many; the word where the compiler would not see a plan's block is no plan (issue 49:
  // the scanner took it anywhere, in a string, a // comment or under #if 0).
  const std::string one = "/* kernelevolve-plan {\"steps\": [{\"kernel\": \"a\"}, {\"kernel\": \"a\"}]} */\n";
  CHECK_THROWS_AS(
      ke::plan_of(spec, one + "/* kernelevolve-plan {\"steps\": [{\"kernel\": \"a\"}]} */", ke::Language::c),
      ke::PlanError);
  for (const std::string& not_a_plan :
       {std::string("// kernelevolve-plan {\"steps\": 3}\n"), std::string("const char* s = \"kernelevolve-plan {\";\n"),
        std::string("/* see kernelevolve-plan {\"steps\": 3} */\n"),
        std::string("char c = '\"'; // \"/* kernelevolve-plan\n"),
        std::string("#if 0\n/* kernelevolve-plan {\"steps\": 3} */\n#endif\n"),
        std::string("#if 0\n#ifdef X\n#endif\n/* kernelevolve-plan {\"steps\": 3} */\n#endif\n")}) {
    CAPTURE(not_a_plan);
    CHECK(ke::plan_of(spec, one + not_a_plan, ke::Language::c).steps.size() == 2);
    CHECK(ke::plan_of(spec, not_a_plan + one, ke::Language::c).steps.size() == 2);
    CHECK_FALSE(ke::find_plan_block(not_a_plan, ke::Language::c).found());
  }
  // Past `#if 0`'s #else, and in a plain `#if 1`, the block is read.
  CHECK(ke::plan_of(spec, "#if 0\nint x;\n#else\n" + one + "#endif\n", ke::Language::c).steps.size() == 2);
  CHECK(ke::plan_of(spec, "#if 1\n" + one + "#endif\n", ke::Language::c).steps.size() == 2);
  const std::string py = "\"\"\"kernelevolve-plan {\"steps\": [{\"kernel\": \"a\"}]}\"\"\"\n";
  for (const std::string& not_a_plan : {std::string("# kernelevolve-plan {\"steps\": 3}\n"),
                                        std::string("x = \"\"\"kernelevolve-plan {\"steps\": 3}\"\"\"\n"),
                                        std::string("s = 'kernelevolve-plan {'\n")}) {
    CAPTURE(not_a_plan);
    CHECK_FALSE(ke::find_plan_block(not_a_plan, ke::Language::triton).found());
    CHECK(ke::find_plan_block(not_a_plan + py, ke::Language::triton).found());
  }
  // A negative size is found when the plan is bound to a workload.
  const ke::Plan plan =
      ke::plan_of(spec, R"(/* kernelevolve-plan {"temporaries": [{"name": "t", "dtype": "f32", "shape": ["n - 2000"]}],
                           "steps": [{"kernel": "a"}]} */)",
                  ke::Language::c);
  CHECK_THROWS_AS(ke::bind_plan(plan, spec, {{"n", 1000}}, {{"CHUNK", 256}}), ke::PlanError);
}

TEST_CASE("a Triton kernel step may take its own num_warps and num_stages, from tunables; no other step may") {
  ke::Spec spec = centre_spec();
  spec.tunables = {{"CHUNK", {256, 1024}}, {"K0_num_warps", {16, 4}}};
  const std::string two = R"({"steps": [{"kernel": "a", "grid": [1], "num_warps": "K0_num_warps", "num_stages": "1"},
                                        {"kernel": "b", "grid": [1]}]})";
  const ke::Plan plan = ke::plan_of(spec, "\"\"\"kernelevolve-plan " + two + "\"\"\"", ke::Language::triton);
  REQUIRE(plan.steps.size() == 2);
  REQUIRE(plan.steps[0].num_warps);
  CHECK(plan.steps[0].num_warps->text() == "K0_num_warps");
  CHECK(plan.steps[0].num_stages->eval({}) == 1);
  CHECK_FALSE(plan.steps[1].num_warps);  // the tunable num_warps's, or Triton's default
  const std::string json = ke::to_json(plan);
  CHECK(json.find("\"num_warps\": \"K0_num_warps\"") != std::string::npos);
  CHECK(ke::to_json(ke::plan_of(spec, "\"\"\"kernelevolve-plan " + json + "\"\"\"", ke::Language::triton)) == json);
  // A workload's size would change the compile from call to call; a CUDA kernel's warps are its block's.
  CHECK(plan_error(spec, R"({"steps": [{"kernel": "a", "grid": [1], "num_warps": "n / 256"}]})", ke::Language::triton)
            .find("names 'n', which is not a tunable") != std::string::npos);
  CHECK(plan_error(spec, R"({"steps": [{"kernel": "a", "grid": [1], "num_warps": "4"}]})", ke::Language::cuda)
            .find("only a Triton kernel step takes its own num_warps") != std::string::npos);
  CHECK(plan_error(spec, R"({"steps": [{"library": "cublas.gemm", "num_stages": "2", "args": []}]})",
                   ke::Language::triton)
            .find("only a Triton kernel step") != std::string::npos);
}

namespace {

// Buffers a, b and y and sizes n, m, k, with a float scalar: enough for every library step's argument kinds.
ke::Spec library_spec() {
  ke::Spec s = centre_spec();
  s.params = {{"a", ke::DType::f32, ke::Role::in, {"n"}, 0},       {"b", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},      {"n", ke::DType::i64, ke::Role::size, {}, 0},
              {"m", ke::DType::i64, ke::Role::size, {}, 0},        {"k", ke::DType::i64, ke::Role::size, {}, 0},
              {"scale", ke::DType::f32, ke::Role::scalar, {}, 0.5}};
  s.workloads = {{{"n", 64}, {"m", 8}, {"k", 3}}};
  s.validate();
  return s;
}

std::string step_error(const std::string& step) {
  return plan_error(library_spec(), R"({"steps": [)" + step + "]}", ke::Language::cuda);
}

// The error binding a one-step plan to `workload` raises, or "".
std::string bind_error(const std::string& step, const ke::Bindings& workload) {
  const ke::Spec spec = library_spec();
  const ke::Plan plan = ke::plan_of(spec, R"(/* kernelevolve-plan {"steps": [)" + step + "]} */", ke::Language::cuda);
  try {
    ke::bind_plan(plan, spec, workload, {{"CHUNK", 256}});
  } catch (const ke::PlanError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a library step's arguments and options are checked with the plan, before any device") {
  // Each call's form reads: a valid plan of each, with sizes, expressions, a bias and every option.
  for (
      const char* valid :
      {R"({"library": "cublas.gemm", "args": ["a", "b", "y", "m", "n", "k"], "options": {"a_transposed": "true"}})",
       R"({"library": "cublas.gemm_batched", "args": ["a", "b", "y", "2", "m", "n / 2", "k"],
               "options": {"a_transposed": "false", "b_transposed": "true"}})",
       R"({"library": "cublaslt.matmul", "args": ["a", "b", "y", "m", "n", "k", "b"], "options": {"epilogue": "bias_relu"}})",
       R"({"library": "cudnn.conv2d", "args": ["a", "b", "y", "1", "k", "m", "m", "k", "3", "3"],
               "options": {"stride": "2,1", "padding": "1", "dilation": "1", "groups": "1"}})",
       R"({"library": "cudnn.conv3d", "args": ["a", "b", "y", "1", "k", "m", "m", "m", "k", "3", "3", "3", "b"],
               "options": {"stride": "1,2,2", "padding": "1"}})",
       R"({"library": "cudnn.conv_transpose2d", "args": ["a", "b", "y", "1", "k", "m", "m", "k", "3", "3"],
               "options": {"stride": "2", "output_padding": "1,0", "groups": "1"}})",
       R"({"library": "cudnn.conv_transpose3d", "args": ["a", "b", "y", "1", "k", "m", "m", "m", "k", "3", "3", "3"],
               "options": {"stride": "2", "padding": "1", "output_padding": "1,0,1"}})",
       R"({"library": "cudnn.avg_pool3d", "args": ["a", "y", "1", "k", "m", "m", "m"],
               "options": {"kernel_size": "3", "stride": "2,2,1", "padding": "1", "count_include_pad": "false"}})"}) {
    CAPTURE(valid);
    CHECK(step_error(valid).empty());
  }
  // Every call has its form: with no arguments, each says what it takes.
  for (const std::string& call : ke::library_calls()) {
    CAPTURE(call);
    CHECK(step_error(R"({"library": ")" + call + R"(", "args": []})").find(" takes ") != std::string::npos);
  }
  // What a model is told is written from those forms: each call with its arguments and options as they are checked.
  const std::string told = ke::library_calls_text();
  for (const std::string& call : ke::library_calls())
    CHECK_MESSAGE(told.find("{\"library\": \"" + call + "\", \"args\": [") != std::string::npos, call);
  CHECK(told.find(R"("cudnn.conv3d", "args": [x, w, y, N, C, D, H, W, K, T, R, S] (then bias))") != std::string::npos);
  CHECK(told.find(R"("epilogue": none|relu|gelu|bias|bias_relu|bias_gelu)") != std::string::npos);
  CHECK(told.find(R"("output_padding": "a" or "a,b,c")") != std::string::npos);
  CHECK(told.find(R"("groups": an integer)") != std::string::npos);
  // The count of arguments, with the call's layout.
  std::string e =
      step_error(R"({"library": "cudnn.conv3d", "args": ["a", "b", "y", "1", "k", "m", "m", "k", "3", "3"]})");
  CHECK_MESSAGE(e.find("takes x, w, y, N, C, D, H, W, K, T, R, S[, bias]: 10 argument(s) given") != std::string::npos,
                e);
  CHECK(step_error(R"({"library": "cublas.gemm", "args": ["a", "b", "y", "m", "n", "k", "b"]})")
            .find("takes A, B, D, M, N, K: 7 argument(s)") != std::string::npos);
  // Their kinds: a buffer where a size goes, a size or a float where a buffer or an integer goes.
  e = step_error(R"({"library": "cublas.gemm_batched", "args": ["a", "b", "y", "a", "m", "n", "k"]})");
  CHECK_MESSAGE(e.find("argument 4 ('a') must be an integer") != std::string::npos, e);
  e = step_error(
      R"({"library": "cudnn.conv_transpose2d", "args": ["a", "n", "y", "1", "k", "m", "m", "k", "3", "3"]})");
  CHECK_MESSAGE(e.find("argument 2 ('n') must be a buffer") != std::string::npos, e);
  CHECK(step_error(R"({"library": "cublas.gemm", "args": ["a", "b", "y", "scale", "n", "k"]})")
            .find("argument 4 ('scale') must be an integer") != std::string::npos);
  // Options: unknown ones, with the call's list; values of the wrong form.
  e = step_error(R"({"library": "cudnn.conv2d", "args": ["a", "b", "y", "1", "k", "m", "m", "k", "3", "3"],
                     "options": {"output_padding": "1"}})");
  CHECK_MESSAGE(e.find("cudnn.conv2d has no option 'output_padding' (stride, padding, dilation, groups, math)") !=
                    std::string::npos,
                e);
  CHECK(step_error(
            R"({"library": "cublas.gemm", "args": ["a", "b", "y", "m", "n", "k"], "options": {"epilogue": "relu"}})")
            .find("no option 'epilogue'") != std::string::npos);
  CHECK(step_error(R"({"library": "cudnn.conv3d", "args": ["a", "b", "y", "1", "k", "m", "m", "m", "k", "3", "3", "3"],
                       "options": {"stride": "1,2"}})")
            .find("stride '1,2' is not one integer or three (\"d,h,w\")") != std::string::npos);
  CHECK(step_error(R"({"library": "cudnn.conv_transpose2d", "args": ["a", "b", "y", "1", "k", "m", "m", "k", "3", "3"],
                       "options": {"padding": "-1"}})")
            .find("each at least 0") != std::string::npos);
  // Beyond the libraries' int: refused here, before the output extents' arithmetic could overflow.
  e = step_error(R"({"library": "cudnn.conv_transpose2d", "args": ["a", "b", "y", "1", "k", "m", "m", "k", "3", "3"],
                     "options": {"stride": "4611686018427387904"}})");
  CHECK_MESSAGE(e.find("each at least 1 and at most 2^31 - 1") != std::string::npos, e);
  e = step_error(R"({"library": "cudnn.avg_pool3d", "args": ["a", "y", "1", "k", "m", "m", "m"],
                     "options": {"kernel_size": "2", "padding": "1,1,2147483648"}})");
  CHECK_MESSAGE(e.find("padding '1,1,2147483648' is not") != std::string::npos, e);
  for (const char* bad : {"0", "2,2", "x", ""}) {
    CAPTURE(bad);
    CHECK(step_error(
              std::string(R"({"library": "cudnn.conv2d", "args": ["a", "b", "y", "1", "k", "m", "m", "k", "3", "3"],
                                     "options": {"groups": ")") +
              bad + "\"}}")
              .find("groups '") != std::string::npos);
  }
  CHECK(step_error(R"({"library": "cublas.gemm_batched", "args": ["a", "b", "y", "2", "m", "n", "k"],
                       "options": {"a_transposed": "yes"}})")
            .find("a_transposed 'yes' is not \"true\" or \"false\"") != std::string::npos);
  CHECK(
      step_error(
          R"({"library": "cublaslt.matmul", "args": ["a", "b", "y", "m", "n", "k"], "options": {"epilogue": "bias"}})")
          .find("needs a bias") != std::string::npos);
  CHECK(step_error(R"({"library": "cublaslt.matmul", "args": ["a", "b", "y", "m", "n", "k", "b"]})")
            .find("needs an epilogue") != std::string::npos);
  // A pooling has no default window.
  CHECK(step_error(R"({"library": "cudnn.avg_pool3d", "args": ["a", "y", "1", "k", "m", "m", "m"]})")
            .find("needs its kernel_size") != std::string::npos);
}

namespace {

// The error of a one-step plan of `step` under `precision` (unset: the spec's default), or "".
std::string math_error(const std::string& step, std::optional<ke::Precision> precision,
                       ke::Spec spec = library_spec()) {
  spec.precision = std::move(precision);
  return plan_error(spec, R"({"steps": [)" + step + "]}", ke::Language::cuda);
}

}  // namespace

TEST_CASE("a library step's \"math\": \"tf32\" is held to the run's precision and to f32 data") {
  const std::string conv = R"({"library": "cudnn.conv2d", "args": ["a", "b", "y", "1", "k", "m", "m", "k", "3", "3"],
                                "options": {"padding": "1", "math": "tf32"}})";
  const std::string lt =
      R"({"library": "cublaslt.matmul", "args": ["a", "b", "y", "m", "n", "k"], "options": {"math": "tf32"}})";
  const ke::Precision as_run = ke::Precision::as_run_defaults();  // PyTorch's own: cuDNN on, matrix products off
  REQUIRE(as_run.cudnn_tf32);
  REQUIRE(!as_run.matmul_tf32);

  // cuDNN under as-run with its switch on: the math the reference runs.
  CHECK(math_error(conv, as_run).empty());
  // Under strict it is refused, naming the step, the library and the policy; so under a C problem's default.
  std::string e = math_error(conv, ke::Precision::strict_fp32());
  CHECK_MESSAGE(e.find("the plan's steps[0] (cudnn.conv2d): \"math\": \"tf32\": TF32 in cuDNN is not allowed: the "
                       "run's precision is strict") != std::string::npos,
                e);
  CHECK(math_error(conv, std::nullopt) == e);
  // A PyTorch problem's default is as-run.
  ke::Spec pytorch = library_spec();
  pytorch.reference.pytorch = true;
  CHECK(math_error(conv, std::nullopt, pytorch).empty());
  // As-run with the user's cuDNN switch off.
  ke::Precision cudnn_off = as_run;
  cudnn_off.cudnn_tf32 = false;
  e = math_error(conv, cudnn_off);
  CHECK_MESSAGE(e.find("as-run, but your PyTorch runs convolutions in fp32 (torch.backends.cudnn.allow_tf32 is off)") !=
                    std::string::npos,
                e);

  // cuBLASLt under as-run with the matrix products' switch off: refused, named.
  e = math_error(lt, as_run);
  CHECK_MESSAGE(e.find("the plan's steps[0] (cublaslt.matmul): \"math\": \"tf32\": TF32 in cuBLASLt is not allowed: "
                       "the run's precision is as-run, but your PyTorch runs matrix products in fp32 "
                       "(torch.backends.cuda.matmul.allow_tf32 is off)") != std::string::npos,
                e);
  // With it on (allow_tf32, or set_float32_matmul_precision("high")): accepted, and cuBLAS's steps alike.
  ke::Precision matmul_on = as_run;
  matmul_on.matmul_tf32 = true;
  matmul_on.float32_matmul_precision = "high";
  CHECK(math_error(lt, matmul_on).empty());
  for (const char* step :
       {R"({"library": "cublas.gemm", "args": ["a", "b", "y", "m", "n", "k"], "options": {"math": "tf32"}})",
        R"({"library": "cublas.gemm_batched", "args": ["a", "b", "y", "2", "m", "n / 2", "k"],
                "options": {"b_transposed": "true", "math": "tf32"}})"}) {
    CAPTURE(step);
    CHECK(math_error(step, matmul_on).empty());
    CHECK(math_error(step, as_run).find("TF32 in cuBLAS is not allowed") != std::string::npos);
  }
  // The transposed and 3-d convolutions take it too.
  CHECK(math_error(R"({"library": "cudnn.conv_transpose3d", "args": ["a", "b", "y", "1", "k", "m", "m", "m", "k", "3",
                        "3", "3"], "options": {"stride": "2", "math": "tf32"}})",
                   as_run)
            .empty());

  // "fp32", the default, is always allowed; any other value is refused with the two it may be.
  CHECK(math_error(R"({"library": "cublaslt.matmul", "args": ["a", "b", "y", "m", "n", "k"],
                       "options": {"math": "fp32"}})",
                   ke::Precision::strict_fp32())
            .empty());
  e = math_error(R"({"library": "cudnn.conv2d", "args": ["a", "b", "y", "1", "k", "m", "m", "k", "3", "3"],
                     "options": {"math": "TF32"}})",
                 as_run);
  CHECK_MESSAGE(e.find("math 'TF32' is not \"fp32\" or \"tf32\"") != std::string::npos, e);
  // A pooling does no products: no math option.
  e = math_error(R"({"library": "cudnn.avg_pool3d", "args": ["a", "y", "1", "k", "m", "m", "m"],
                     "options": {"kernel_size": "3", "math": "tf32"}})",
                 as_run);
  CHECK_MESSAGE(e.find("cudnn.avg_pool3d has no option 'math'") != std::string::npos, e);

  // TF32 is a rounding of f32 data: on a bf16 problem it is refused whatever the switches.
  ke::Spec bf16 = library_spec();
  for (ke::Param& p : bf16.params)
    if (p.is_buffer()) p.dtype = ke::DType::bf16;
  ke::Precision all_on = matmul_on;
  e = math_error(conv, all_on, bf16);
  CHECK_MESSAGE(e.find("the plan's steps[0] (cudnn.conv2d): \"math\": \"tf32\" is for f32 data, and its buffers are "
                       "bf16") != std::string::npos,
                e);
  CHECK(math_error(lt, all_on, bf16).find("is for f32 data") != std::string::npos);
  // A temporary's dtype counts as a param's does.
  const std::string temporary = R"({"temporaries": [{"name": "t", "dtype": "f16", "shape": ["n"]}], "steps": [
      {"library": "cublas.gemm", "args": ["t", "b", "y", "m", "n", "k"], "options": {"math": "tf32"}}]})";
  ke::Spec with_all_on = library_spec();
  with_all_on.precision = all_on;
  e = plan_error(with_all_on, temporary, ke::Language::cuda);
  CHECK_MESSAGE(e.find("its buffers are f16") != std::string::npos, e);

  // What a model is told: the option, and why a run refuses it.
  CHECK(ke::library_calls_text().find(R"("math": fp32|tf32)") != std::string::npos);
  CHECK(ke::tf32_refusal(as_run, "cudnn.conv3d").empty());
  CHECK(ke::tf32_refusal(matmul_on, "cublas.gemm").empty());
  CHECK(ke::tf32_refusal(as_run, "cublas.gemm_batched").find("matmul.allow_tf32 is off") != std::string::npos);
}

TEST_CASE("a library step's sizes are checked at each workload, with the argument named") {
  const ke::Bindings at = {{"n", 64}, {"m", 8}, {"k", 3}};
  const char* conv_t =
      R"({"library": "cudnn.conv_transpose2d", "args": ["a", "b", "y", "1", "k", "m", "m", "k", "3", "3"],
                           "options": {"stride": "2", "padding": "1", "output_padding": "1"}})";
  CHECK(bind_error(conv_t, at).empty());
  // A size of 0 and one beyond the libraries' int.
  std::string e = bind_error(conv_t, {{"n", 64}, {"m", 0}, {"k", 3}});
  CHECK_MESSAGE(e.find("argument 6 ('m' = 0) must be at least 1") != std::string::npos, e);
  e = bind_error(R"({"library": "cublas.gemm", "args": ["a", "b", "y", "m", "n", "k * 1000000000"]})", at);
  CHECK_MESSAGE(e.find("beyond the library's 32-bit sizes") != std::string::npos, e);
  // output_padding at its stride: no cuDNN form.
  std::string at_stride = conv_t;
  at_stride.replace(at_stride.find("\"output_padding\": \"1\""), 21, "\"output_padding\": \"2\"");
  e = bind_error(at_stride, at);
  CHECK_MESSAGE(e.find("output_padding 2 must be below its stride 2") != std::string::npos, e);
  // A filter larger than its padded input, in the third spatial dimension of a 3-d one.
  e = bind_error(R"({"library": "cudnn.conv3d", "args": ["a", "b", "y", "1", "k", "m", "m", "2", "k", "3", "3", "5"]})",
                 at);
  CHECK_MESSAGE(e.find("no output in spatial dimension 3") != std::string::npos, e);
  CHECK(bind_error(R"({"library": "cudnn.conv3d", "args": ["a", "b", "y", "1", "k", "m", "m", "2", "k", "3", "3", "5"],
                       "options": {"padding": "1,1,2"}})",
                   at)
            .empty());
  // Groups that do not divide the channels.
  e = bind_error(R"({"library": "cudnn.conv2d", "args": ["a", "b", "y", "1", "k", "m", "m", "4", "3", "3"],
                     "options": {"groups": "2"}})",
                 at);
  CHECK_MESSAGE(e.find("groups 2 must divide both C = 3 and K = 4") != std::string::npos, e);
  // A pooling's padding at most half its kernel (PyTorch's rule and cuDNN's), and a window that fits.
  const std::string pool = R"({"library": "cudnn.avg_pool3d", "args": ["a", "y", "1", "k", "m", "m", "2"],
                               "options": {"kernel_size": "3,3,4", "padding": "1"}})";
  CHECK(bind_error(pool, at).empty());
  std::string wide = pool;
  wide.replace(wide.find("\"padding\": \"1\""), 14, "\"padding\": \"2\"");
  e = bind_error(wide, at);
  CHECK_MESSAGE(e.find("padding 2 is more than half its kernel 3") != std::string::npos, e);
  std::string tall = pool;
  tall.replace(tall.find("\"kernel_size\": \"3,3,4\""), 22, "\"kernel_size\": \"3,3,5\"");
  e = bind_error(tall, at);
  CHECK_MESSAGE(e.find("no output in spatial dimension 3") != std::string::npos, e);
}

TEST_CASE("the plan is code: it is part of a node's identity, and a tunable it reads is live") {
  const ke::Spec spec = centre_spec();
  const ke::Candidate a{centre_two_pass(), ke::Language::c, {{"CHUNK", 256}}};
  const ke::Candidate b{centre_two_pass("\"cdiv(n, CHUNK) + 1\""), ke::Language::c, {{"CHUNK", 256}}};
  CHECK(a.code_key() != b.code_key());
  // Other comments still do not count.
  const ke::Candidate c{"// a note\n" + centre_two_pass(), ke::Language::c, {{"CHUNK", 256}}};
  CHECK(a.code_key() == c.code_key());
  // CHUNK appears in the plan only (the kernels take it as an argument), and is live.
  CHECK(ke::tunable_is_live(spec, centre_two_pass(), ke::Language::c, "CHUNK"));
  CHECK_FALSE(ke::tunable_is_live(spec, kCentreReference, ke::Language::c, "CHUNK"));
}

TEST_CASE("a two-pass CPU program with a temporary is verified and timed, with each step's share") {
  const ke::Spec spec = centre_spec();
  const ke::Evaluation e = evaluate(spec, centre_two_pass());
  INFO(e.message, "\n", e.compile_log);
  REQUIRE(e.status == ke::Status::ok);
  CHECK(e.timings.size() == 2);
  CHECK(e.resources.at("steps") == 2);
  const std::int64_t shares = e.resources.at("step1.share_permille") + e.resources.at("step2.share_permille");
  CHECK(shares >= 998);
  CHECK(shares <= 1002);
  // The diagnosis names each step by its kernel and gives its share.
  const ke::Candidate program{centre_two_pass(), ke::Language::c, {{"CHUNK", 256}}};
  const auto d = ke::diagnose(spec, program.tunables, e, ke::open_device("cpu")->info(), &program);
  REQUIRE(d.has_value());
  REQUIRE(d->steps.size() == 2);
  CHECK(d->steps[0].name == "partial_sums");
  CHECK(d->steps[1].name == "finish");
  CHECK_FALSE(d->library_share.has_value());
  CHECK(ke::diagnosis_text(*d).find("step 2 finish") != std::string::npos);
  CHECK(ke::diagnosis_json(*d).find("\"name\": \"partial_sums\"") != std::string::npos);
  // Another point of the tunable: another size of temporary, still right.
  CHECK(evaluate(spec, centre_two_pass(), {{"CHUNK", 1024}}).status == ke::Status::ok);
}

TEST_CASE("a temporary left unwritten holds the poison, and the answer is wrong") {
  const ke::Spec spec = centre_spec();
  const ke::Evaluation e = evaluate(spec, centre_two_pass("\"cdiv(n, CHUNK)\"", "chunks - 1"));
  CHECK(e.status == ke::Status::incorrect);
  CHECK(e.message.find("wrong output") != std::string::npos);
}

TEST_CASE("temporaries beyond the device's bound are refused, with the bytes") {
  const ke::Spec spec = centre_spec();
  ke::EvalOptions options = quick();
  options.device_memory_bytes = std::size_t{64} << 20;  // a 64 MiB device allows 16 MiB of temporaries
  const ke::Evaluation e = evaluate(spec, centre_two_pass("\"n\", 1000"), {{"CHUNK", 256}}, options);
  CHECK(e.status == ke::Status::invalid);
  CHECK(e.message.find("80000000 bytes") != std::string::npos);
  CHECK(e.message.find("16777216") != std::string::npos);
  // Within the bound, the same plan runs.
  CHECK(evaluate(spec, centre_two_pass("\"n\", 2"), {{"CHUNK", 256}}, options).status == ke::Status::ok);
}

TEST_CASE("a plan that launches a kernel the source lacks, or is malformed, makes the node invalid") {
  const ke::Spec spec = centre_spec();
  const ke::Evaluation missing = evaluate(spec, centre_two_pass("\"cdiv(n, CHUNK)\"", "chunks", "finsh"));
  CHECK(missing.status == ke::Status::invalid);
  CHECK(missing.message.find("'finsh' that its plan launches") != std::string::npos);
  const ke::Evaluation malformed =
      evaluate(spec, "/* kernelevolve-plan {\"steps\": 3} */\n" + std::string(kCentreReference));
  CHECK(malformed.status == ke::Status::invalid);
  CHECK(malformed.message.find("steps") != std::string::npos);
}

TEST_CASE("a spec may forbid library steps; the field reads back, and anything but a boolean is refused") {
  const std::string base = R"({"name": "k", "language": "cuda", "entry": "k",
    "params": [{"name": "x", "dtype": "f32", "shape": ["n"], "role": "out"}, {"name": "n", "dtype": "i64", "role": "size"}],
    "workloads": [{"n": 4}], "reference": {"source": "x"}, "seed": {"source": "x"},
    "launch": {"grid": [1], "block": [1]})";
  CHECK(ke::parse_spec(base + "}", "a.json").library_steps);
  const ke::Spec kernels_only = ke::parse_spec(base + R"(, "library_steps": false})", "a.json");
  CHECK_FALSE(kernels_only.library_steps);
  CHECK_FALSE(ke::parse_spec(ke::to_json(kernels_only), "b.json").library_steps);
  CHECK_THROWS_WITH_AS(ke::parse_spec(base + R"(, "library_steps": "no"})", "a.json"),
                       doctest::Contains("library_steps"), ke::Error);
}

TEST_CASE("through the tool: a program is searched, stored, reused by a later run, and printed with its plan") {
  ke_test::TempDir dir("ke_program");
  ke_test::write_centre_files(dir);
  const std::string db = dir / "centre.db";
  const auto first = ke_test::run_cli_in("", "run " + dir / "centre.json" + " --db " + db + " --max-evals 3 --json");
  REQUIRE_MESSAGE(first.code == 0, first.err);
  CHECK(first.out.find("\"ok\": 3") != std::string::npos);  // CHUNK, read by the plan alone, was searched
  const auto second = ke_test::run_cli_in("", "run " + dir / "centre.json" + " --db " + db + " --max-evals 3");
  REQUIRE_MESSAGE(second.code == 0, second.err);
  CHECK(second.out.find("measurements reused") != std::string::npos);
  const auto best = ke_test::run_cli_in("", "best " + db + " --run 2");
  REQUIRE(best.code == 0);
  CHECK(best.out.find("kernelevolve-plan") != std::string::npos);
  CHECK(best.out.find("\"kernel\": \"finish\"") != std::string::npos);
  const auto node = ke_test::run_cli_in("", "show " + db + " --run 1 --node 0");
  REQUIRE(node.code == 0);
  CHECK(node.out.find("step 2 finish") != std::string::npos);
}
