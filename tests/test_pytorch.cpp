// PyTorch problems (issue 16) on the CPU with Debian's torch: the signature derived from a module, the
// spec `import` writes and that loads back, `check` of a right and a wrong seed against PyTorch, the
// problem's own integer inputs (an embedding bag), modules that cannot be mapped (exit 2, naming why),
// a reference that kills its own process (the host survives; the failure names the reference), a run
// without a seed whose first kernel a command writes, the workloads of get_workloads(), the baselines
// (PyTorch eager, torch.compile) measured in a run, and on a CUDA GPU the reference sharing the candidate
// device's memory. Skipped, and says so, where no Python imports torch (or there is no GPU).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>
#include <kernelevolve/pytorch.hpp>
#include <kernelevolve/store.hpp>
#include <simdjson.h>
#include <string>
#include <tuple>
#include <vector>

#include "core/script_process.hpp"
#include "pytorch/python.hpp"
#include "support/cli_runner.hpp"
#include "support/have_torch.hpp"

namespace fs = std::filesystem;
namespace ke = kernelevolve;

namespace {

std::string fixture(const std::string& name) { return std::string(KE_FIXTURES) + "/pytorch/" + name; }

using ke_test::have_torch;
using ke_test::kNoTorch;

using Cli = ke_test::CliOutcome;
Cli cli(const std::string& args, const std::string& env = "") { return ke_test::run_cli_in(env, args); }

const ke::Param& param(const ke::Spec& spec, const std::string& name) {
  const ke::Param* p = spec.find_param(name);
  REQUIRE_MESSAGE(p != nullptr, name);
  return *p;
}

}  // namespace

TEST_CASE("pytorch: whether it runs") {
  if (!have_torch()) MESSAGE("skipping the PyTorch tests: " << kNoTorch);
}

TEST_CASE("a script longer than Linux takes as one argument runs whole, as `-c` would run it") {
  // The model optimizer's script is past 128 KiB (MAX_ARG_STRLEN): as a `-c` argument its process never started.
  for (const std::size_t padding : {std::size_t{1000}, ke::kLongScript, std::size_t{200 * 1024}}) {
    CAPTURE(padding);
    const std::string script = "import sys\n# " + std::string(padding, 'x') +
                               "\nprint(__name__, sys.argv[0], sys.argv[1:], len(open(0).read()))\n";
    std::string said;
    CHECK_NOTHROW(said = ke::run_script("python3", script, {"a", "b c"}, 60, "a long script"));
    CHECK(said == "__main__ -c ['a', 'b c'] 0\n");
  }
}

TEST_CASE("a package of ours runs from the library's copy, as `python -m` would, whatever folder is on sys.path") {
  // The bridge, the capture and the optimizer are packages built into the library (core/python_package.hpp): a
  // host needs no file of ours, and a folder of the same name where Python looks first is not what runs.
  static constexpr ke::PythonFile kFiles[] = {
      {"ke_probe/__init__.py", "WHERE = 'the library'\n"},
      {"ke_probe/__main__.py",
       "import sys\nimport traceback\n\nfrom . import WHERE\nfrom .inner import fail\n\n"
       "print(__name__, __package__, sys.argv[0], sys.argv[1:], WHERE)\n"
       "try:\n    fail()\nexcept ValueError:\n    print(traceback.format_exc())\n"},
      {"ke_probe/inner.py", "def fail():\n    raise ValueError('from the package')\n"},
  };
  static const ke::PythonPackage kProbe{"ke_probe", kFiles, std::size(kFiles)};
  const fs::path disk = fs::temp_directory_path() / ("ke_probe_" + std::to_string(::getpid()));
  fs::create_directories(disk / "ke_probe");
  std::ofstream(disk / "ke_probe" / "__init__.py") << "WHERE = 'a folder'\n";
  std::ofstream(disk / "ke_probe" / "__main__.py") << "print('the folder ran')\n";
  const char* before = std::getenv("PYTHONPATH");
  const std::string kept = before ? before : "";
  ::setenv("PYTHONPATH", disk.c_str(), 1);
  std::string said;
  CHECK_NOTHROW(said = ke::run_script("python3", kProbe, {"a", "b c"}, 60, "the probe package"));
  if (before) ::setenv("PYTHONPATH", kept.c_str(), 1);
  else ::unsetenv("PYTHONPATH");
  fs::remove_all(disk);
  CHECK(said.rfind("__main__ ke_probe -c ['a', 'b c'] the library\n", 0) == 0);
  // A traceback names the module's file in the package and shows its line, as for a file on disk.
  CHECK_MESSAGE(said.find("File \"<kernelevolve>/ke_probe/inner.py\", line 2, in fail\n"
                          "    raise ValueError('from the package')") != std::string::npos,
                said);
}

TEST_CASE("pytorch: the signature derived from a module: inputs, weights by state-dict key, outputs, named sizes" *
          doctest::skip(!have_torch())) {
  const ke::Spec spec = ke::load_pytorch_problem(fixture("linear_relu_scale.py"));
  CHECK(spec.name == "linear_relu_scale");
  CHECK(spec.entry == "linear_relu_scale");
  CHECK(spec.reference.pytorch);
  CHECK(spec.seed.source.empty());
  std::vector<std::string> names;
  for (const ke::Param& p : spec.params) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"x", "scale", "fc_weight", "fc_bias", "out", "batch_size", "in_features",
                                          "out_features"});
  CHECK(param(spec, "x").role == ke::Role::in);
  CHECK(param(spec, "x").shape == std::vector<std::string>{"batch_size", "in_features"});
  CHECK(param(spec, "scale").role == ke::Role::scalar);
  CHECK(param(spec, "scale").value == doctest::Approx(0.5));
  CHECK(param(spec, "fc_weight").shape == std::vector<std::string>{"out_features", "in_features"});
  CHECK(param(spec, "out").role == ke::Role::out);
  CHECK(param(spec, "batch_size").role == ke::Role::size);
  REQUIRE(spec.workloads.size() == 1);
  CHECK(spec.workloads[0].at("batch_size") == 32);
  CHECK(spec.workloads[0].at("in_features") == 64);
  CHECK(spec.tolerance.atol == 1e-4);  // KernelBench's fp32 tolerance
  CHECK(spec.tolerance.rtol == 1e-4);

  ke::PytorchProblemOptions cuda;
  cuda.language = ke::Language::cuda;
  const ke::Spec gpu = ke::load_pytorch_problem(fixture("linear_relu_scale.py"), cuda);
  REQUIRE(gpu.launch.has_value());  // a start for the user to edit: a thread per output element
  CHECK(gpu.launch->block[0].text() == "BLOCK");
  CHECK(gpu.tunables.count("BLOCK") == 1);
}

TEST_CASE("pytorch: modules that cannot be a kernel are refused, naming why" * doctest::skip(!have_torch())) {
  for (const auto& [file, why] :
       std::vector<std::pair<std::string, std::string>>{{"data_dependent.py", "data-dependent shape"},
                                                        {"in_place.py", "in place"},
                                                        {"not_a_tensor.py", "forward returns float"}}) {
    CAPTURE(file);
    try {
      ke::load_pytorch_problem(fixture(file));
      FAIL("loaded");
    } catch (const ke::Error& e) {
      CHECK(e.code() == ke::ErrorCode::BadSpec);
      CHECK_MESSAGE(std::string(e.what()).find(why) != std::string::npos, e.what());
    }
    const Cli r = cli("check " + fixture(file));
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.err.find(why) != std::string::npos, r.err);
  }
}

TEST_CASE("pytorch: import writes a spec that loads back and checks; a right seed passes, a wrong one does not" *
          doctest::skip(!have_torch())) {
  const fs::path dir = fs::temp_directory_path() / ("ke_pytorch_import_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const Cli imported = cli("import " + fixture("linear_relu_scale.py") + " -o " + dir.string());
  REQUIRE_MESSAGE(imported.code == 0, imported.err);
  CHECK(imported.out.find("void linear_relu_scale(const float* x, float scale") != std::string::npos);
  const ke::Spec spec = ke::load_spec((dir / "cpu.json").string());
  CHECK(spec.reference.pytorch);
  CHECK(fs::equivalent(spec.reference.file, fixture("linear_relu_scale.py")));
  CHECK(spec.params.size() == 8);

  // The derived spec, with the seed named on the command line, and the imported one alike.
  for (const std::string& problem : {fixture("linear_relu_scale.py"), (dir / "cpu.json").string()}) {
    CAPTURE(problem);
    const Cli good = cli("check " + problem + " --seed-kernel " + fixture("linear_relu_scale_seed.c") + " --json");
    REQUIRE_MESSAGE(good.code == 0, good.err);
    CHECK_MESSAGE(good.out.find("\"status\": \"ok\"") != std::string::npos, good.out);
    const Cli bad = cli("check " + problem + " --seed-kernel " + fixture("linear_relu_scale_wrong.c") + " --json");
    CHECK(bad.code == 1);  // a seed that fails its check
    CHECK_MESSAGE(bad.out.find("\"status\": \"incorrect\"") != std::string::npos, bad.out);
  }
  const Cli seedless = cli("check " + fixture("linear_relu_scale.py"));
  CHECK(seedless.code == 0);
  CHECK(seedless.out.find("seed: none") != std::string::npos);
  const Cli no_seed_run = cli("run " + fixture("linear_relu_scale.py") + " --no-db --max-evals 2");
  CHECK(no_seed_run.code == 2);
  CHECK_MESSAGE(no_seed_run.err.find("no seed kernel") != std::string::npos, no_seed_run.err);
  const Cli seeded_run = cli("run " + fixture("linear_relu_scale.py") + " --seed-kernel " +
                             fixture("linear_relu_scale_seed.c") + " --no-db --max-evals 4 --json");
  REQUIRE_MESSAGE(seeded_run.code == 0, seeded_run.err);
  CHECK(seeded_run.out.find("\"seed\": {\"node\": 0, \"status\": \"ok\"") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("pytorch: integer inputs come from the problem's get_inputs() in every trial and timed call" *
          doctest::skip(!have_torch())) {
  // An embedding bag reads indices[offsets[b]..]: an index out of the table, or offsets out of order,
  // would read out of bounds or answer wrong. Verification and timing both pass only if every trial's
  // integers are the problem's own.
  ke::Spec spec = ke::load_pytorch_problem(fixture("embedding_bag.py"));
  std::ifstream in(fixture("embedding_bag_seed.c"));
  spec.seed.source.assign(std::istreambuf_iterator<char>(in), {});
  spec.seed.file = fixture("embedding_bag_seed.c");
  ke::EvalOptions options;
  options.trials = 6;
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), options);
  const ke::Candidate seed{spec.seed.source, ke::Language::c, {}};
  for (std::uint64_t s = 1; s <= 3; ++s) {
    const ke::Evaluation e = evaluator.evaluate(seed, s);
    CHECK_MESSAGE(e.status == ke::Status::ok, e.message);
  }
  // A kernel that ignores the offsets is caught.
  std::string wrong = spec.seed.source;
  const std::string from = "const int64_t begin = offsets[b]";
  REQUIRE(wrong.find(from) != std::string::npos);
  wrong.replace(wrong.find(from), from.size(), "const int64_t begin = b * 5");
  const ke::Evaluation e = evaluator.evaluate({wrong, ke::Language::c, {}}, 4);
  CHECK(e.status == ke::Status::incorrect);
}

TEST_CASE("pytorch: later trials draw a weight at the module's own scale, not at unit scale" *
          doctest::skip(!have_torch())) {
  // fc_weight is nn.Linear's: uniform within 1/sqrt(64) = 0.125, a spread of 0.072. A kernel that is right but
  // gives NaN for any weight beyond 3 passes only if no trial draws one there: the heavy-tailed trial at unit
  // scale (Laplace of scale 1) puts some of the 3,072 weights beyond 3 almost surely; at the module's, e^-41
  // each.
  ke::Spec spec = ke::load_pytorch_problem(fixture("linear_relu_scale.py"));
  std::ifstream in(fixture("linear_relu_scale_seed.c"));
  std::string source(std::istreambuf_iterator<char>(in), {});
  const std::string from = "      out[b * out_features + o] = (acc > 0 ? acc : 0) * scale;";
  REQUIRE(source.find(from) != std::string::npos);
  source.replace(source.find(from), from.size(),
                 "      int big = 0;\n"
                 "      for (int64_t k = 0; k < in_features; ++k) big |= fc_weight[o * in_features + k] > 3.0f || "
                 "fc_weight[o * in_features + k] < -3.0f;\n"
                 "      out[b * out_features + o] = big ? __builtin_nanf(\"\") : (acc > 0 ? acc : 0) * scale;");
  ke::EvalOptions options;
  options.trials = 5;
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), options);
  for (std::uint64_t s = 1; s <= 2; ++s) {
    const ke::Evaluation e = evaluator.evaluate({source, ke::Language::c, {}}, s);
    CHECK_MESSAGE(e.status == ke::Status::ok, e.message);
  }
  // The bias still matters in every trial: a kernel that leaves it out is caught.
  std::string no_bias = source;
  no_bias.replace(no_bias.find("float acc = fc_bias[o];"), 23, "float acc = 0.0f;");
  CHECK(evaluator.evaluate({no_bias, ke::Language::c, {}}, 3).status == ke::Status::incorrect);
}

TEST_CASE("pytorch: an output that misses a float32 reference is right when it is within the tolerance of float64" *
          doctest::skip(!have_torch())) {
  // (big + x) - big: float32 misses x by up to 20 tolerances. The exact kernel is ok (judged against the
  // float64 call, and counted); a wrong one is not, and is too far off to be tried against float64 at all.
  ke::Spec spec = ke::load_pytorch_problem(fixture("cancellation.py"));
  const std::string head =
      "#include <stdint.h>\n" + ke::kernel_signature(spec) + " {\n  for (int64_t i = 0; i < n; ++i) ";
  ke::EvalOptions options;
  options.trials = 3;
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), options);
  const ke::Evaluation exact = evaluator.evaluate({head + "out[i] = x[i];\n}\n", ke::Language::c, {}}, 1);
  REQUIRE_MESSAGE(exact.status == ke::Status::ok, exact.message);
  CHECK(exact.resources.count("float64_checks") == 1);
  CHECK(exact.resources.at("float64_checks") >= 1);
  REQUIRE(exact.worst);
  CHECK(exact.worst->excess <= 0.0);  // its worst, against the reference that judged it
  const ke::Evaluation wrong = evaluator.evaluate({head + "out[i] = 2.0f * x[i];\n}\n", ke::Language::c, {}}, 2);
  CHECK(wrong.status == ke::Status::incorrect);
  CHECK(wrong.resources.count("float64_checks") == 0);
}

// Issue 50: correct against float64 within the larger of the tolerance and 2x the reference's own error. A
// candidate that rounds its operands to 11 mantissa bits is about half as far from the exact product as a TF32
// reference (10 bits), so it is right where the user's PyTorch rounds so; against an fp32 reference it is far less
// accurate than what the user runs, and wrong. One that rounds to 7 bits (bf16) is 8 times as far: wrong even beside
// the TF32 reference.
TEST_CASE("pytorch: the tolerance follows the reference's own error against float64, twice it at most" *
          doctest::skip(!have_torch())) {
  auto rounding_to = [](const ke::Spec& spec, int dropped_bits) {
    const std::string mask = std::to_string((1u << dropped_bits) - 1);
    const std::string half = std::to_string(1u << (dropped_bits - 1));
    return "#include <stdint.h>\n#include <string.h>\n"
           "static float rounded(float v) { uint32_t b; memcpy(&b, &v, 4); b = (b + " +
           half + "u) & ~" + mask + "u; memcpy(&v, &b, 4); return v; }\n" + ke::kernel_signature(spec) +
           " {\n"
           "  for (int64_t i = 0; i < M; ++i)\n"
           "    for (int64_t j = 0; j < N; ++j) {\n"
           "      float acc = 0;\n"
           "      for (int64_t k = 0; k < K; ++k) acc += rounded(a[i * K + k]) * rounded(b[k * N + j]);\n"
           "      out[i * N + j] = acc;\n"
           "    }\n}\n";
  };
  ke::EvalOptions options;
  options.trials = 3;
  const ke::Spec tf32 = ke::load_pytorch_problem(fixture("tf32_matmul.py"));
  REQUIRE(tf32.precision);
  CHECK(tf32.precision->policy == ke::PrecisionPolicy::as_run);  // a PyTorch module's default
  ke::LocalEvaluator beside_tf32(tf32, ke::open_device("cpu"), options);
  const ke::Evaluation as_accurate = beside_tf32.evaluate({rounding_to(tf32, 12), ke::Language::c, {}}, 1);
  CHECK_MESSAGE(as_accurate.status == ke::Status::ok, as_accurate.message);
  CHECK(as_accurate.resources.count("float64_checks") == 1);  // it missed the TF32 answer: float64 judged it
  // The reference's own error is measured once per verification trial, and the checked timed runs reuse it: where
  // the device has no room for a copy of its answer, each measure is a host copy (minutes at KernelBench's sizes).
  REQUIRE(as_accurate.resources.count("reference_error_measured") == 1);
  CHECK(as_accurate.resources.at("reference_error_measured") <= options.trials);
  CHECK(as_accurate.resources.at("float64_checks") > as_accurate.resources.at("reference_error_measured"));
  const ke::Evaluation coarser = beside_tf32.evaluate({rounding_to(tf32, 16), ke::Language::c, {}}, 2);
  CHECK_MESSAGE(coarser.status == ke::Status::incorrect, coarser.message);

  const ke::Spec fp32 = ke::load_pytorch_problem(fixture("fp32_matmul.py"));
  ke::LocalEvaluator beside_fp32(fp32, ke::open_device("cpu"), options);
  const ke::Evaluation less_accurate = beside_fp32.evaluate({rounding_to(fp32, 12), ke::Language::c, {}}, 3);
  CHECK_MESSAGE(less_accurate.status == ke::Status::incorrect, less_accurate.message);
  const ke::Evaluation exact = beside_fp32.evaluate({rounding_to(fp32, 1), ke::Language::c, {}}, 4);
  CHECK_MESSAGE(exact.status == ke::Status::ok, exact.message);
}

// Issue 50: the precision policy from the module's file, --precision and a spec file, to the run's report and store.
TEST_CASE("pytorch: the precision policy reaches the stored run: the module's own switches, --precision, the spec" *
          doctest::skip(!have_torch())) {
  const ke::Spec as_run = ke::load_pytorch_problem(fixture("tf32_switch.py"));
  REQUIRE(as_run.precision);
  CHECK(as_run.precision->policy == ke::PrecisionPolicy::as_run);
  CHECK(as_run.precision->matmul_tf32);  // the file's own switch
  CHECK(as_run.precision->cudnn_tf32);   // PyTorch's default
  ke::PytorchProblemOptions strict_options;
  strict_options.precision = ke::PrecisionPolicy::strict;
  const ke::Spec strict = ke::load_pytorch_problem(fixture("tf32_switch.py"), strict_options);
  REQUIRE(strict.precision);
  CHECK(*strict.precision == ke::Precision::strict_fp32());

  const fs::path db = fs::temp_directory_path() / ("ke_precision_" + std::to_string(::getpid()) + ".db");
  fs::remove(db);
  auto run = [&](const std::string& target, const std::string& flags) {
    const Cli r = cli("run " + target + " --max-evals 1 --db " + db.string() + " --json" + flags);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return r.out;
  };
  const std::string relu =
      "#include <stdint.h>\n" + ke::kernel_signature(as_run) +
      " {\n  for (int64_t i = 0; i < batch * features; ++i) out[i] = x[i] > 0 ? 2.0f * x[i] : 0.0f;\n}\n";
  const fs::path seed_file = fs::temp_directory_path() / ("ke_precision_seed_" + std::to_string(::getpid()) + ".c");
  std::ofstream(seed_file) << relu;
  const std::string with_seed = " --seed-kernel " + seed_file.string();
  std::string out = run(fixture("tf32_switch.py"), with_seed);
  CHECK_MESSAGE(out.find("\"precision\": {\"policy\": \"as-run\", \"cudnn_tf32\": true, \"matmul_tf32\": true") !=
                    std::string::npos,
                out);
  out = run(fixture("tf32_switch.py"), with_seed + " --precision strict");
  CHECK_MESSAGE(out.find("\"precision\": {\"policy\": \"strict\", \"cudnn_tf32\": false, \"matmul_tf32\": false") !=
                    std::string::npos,
                out);
  {
    ke::Store store(db.string(), ke::Store::Mode::read_only);
    CHECK(ke::parse_spec(store.run(1).spec_json, "").precision_in_effect().matmul_tf32);
    CHECK(ke::parse_spec(store.run(2).spec_json, "").precision_in_effect().policy == ke::PrecisionPolicy::strict);
  }
  const Cli bad = cli("run " + fixture("tf32_switch.py") + with_seed + " --no-db --precision fast");
  CHECK(bad.code == 2);
  CHECK_MESSAGE(bad.err.find("--precision is as-run or strict") != std::string::npos, bad.err);
  fs::remove(db);
  fs::remove(seed_file);
}

TEST_CASE("pytorch: a reference that kills its own process: the host survives, the failure names the reference" *
          doctest::skip(!have_torch())) {
  const Cli r =
      cli("check " + fixture("crashing.py") + " --seed-kernel " + fixture("crashing_seed.c"), "KE_TEST_CRASH=1");
  CHECK(r.code != 0);
  CHECK(r.code < 128);  // an exit with a message, not a signal
  CHECK_MESSAGE(r.err.find("reference") != std::string::npos, r.err);
  CHECK_MESSAGE(r.err.find("PyTorch") != std::string::npos, r.err);
  const Cli fine = cli("check " + fixture("crashing.py") + " --seed-kernel " + fixture("crashing_seed.c") + " --json");
  CHECK_MESSAGE(fine.code == 0, fine.err);
  CHECK(fine.out.find("\"status\": \"ok\"") != std::string::npos);
}

TEST_CASE("pytorch: without a seed, a command writes the first kernel from the module's source and signature" *
          doctest::skip(!have_torch())) {
  // The command checks that its request carries `class Model` and the derived declaration, and answers a
  // correct kernel; asked to improve it, it answers the same kernel with a new declaration.
  const std::string writer = "--mutator command --command 'sh " + fixture("first_kernel_writer.sh") + "'";
  const fs::path db = fs::temp_directory_path() / ("ke_pytorch_seedless_" + std::to_string(::getpid()) + ".db");
  fs::remove(db);
  const Cli r =
      cli("run " + fixture("linear_relu_scale.py") + " " + writer + " --db " + db.string() + " --max-evals 3 --json");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK_MESSAGE(r.out.find("\"seed\": {\"node\": 0, \"status\": \"ok\"") != std::string::npos, r.out);
  CHECK(r.out.find("\"evaluations\": 3") != std::string::npos);
  // The store has node 0 as the command wrote it: its mutator and its note.
  const Cli shown = cli("show " + db.string());
  REQUIRE_MESSAGE(shown.code == 0, shown.err);
  CHECK_MESSAGE(shown.out.find("first kernel, written from the reference") != std::string::npos, shown.out);
  const Cli exported = cli("export " + db.string() + " --format json");
  REQUIRE_MESSAGE(exported.code == 0, exported.err);
  CHECK(exported.out.find("\"mutator\": \"command\"") != std::string::npos);
  // It resumes like a seeded run: node 0 stays, and the search goes on from it.
  const Cli resumed = cli("run " + fixture("linear_relu_scale.py") + " " + writer + " --db " + db.string() +
                          " --resume --max-evals 4 --json");
  REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  CHECK(resumed.out.find("\"evaluations\": 4") != std::string::npos);
  fs::remove(db);

  // A spec file without a seed, as `import` writes one, runs the same way.
  const Cli from_spec =
      cli("run " + fixture("linear_relu_scale_seedless.json") + " " + writer + " --no-db --max-evals 1 --json");
  REQUIRE_MESSAGE(from_spec.code == 0, from_spec.err);
  CHECK(from_spec.out.find("\"seed\": {\"node\": 0, \"status\": \"ok\"") != std::string::npos);
}

TEST_CASE("pytorch: without a seed, a command that answers garbage ends the run with the reason; the host is fine" *
          doctest::skip(!have_torch())) {
  const Cli r = cli("run " + fixture("linear_relu_scale.py") +
                    " --mutator command --command 'echo I would rather not' --no-db --max-evals 5 --json");
  CHECK(r.code == 1);  // an exit with a report, not a crash: no kernel to report as the best
  CHECK_MESSAGE(r.out.find("no first kernel: the command mutator was asked 3 times") != std::string::npos, r.out);
  CHECK(r.out.find("neither a fenced code block nor SEARCH/REPLACE edits") != std::string::npos);
  CHECK(r.out.find("\"evaluations\": 0") != std::string::npos);
  CHECK_MESSAGE(r.err.find("first kernel, attempt 3") != std::string::npos, r.err);
  // A kernel that is not ok is not the baseline either: the reason names its status.
  const fs::path script = fs::temp_directory_path() / ("ke_pytorch_wrong_writer_" + std::to_string(::getpid()) + ".sh");
  std::ofstream(script) << "cat > /dev/null\nprintf '```c\\n'\ncat '" << fixture("linear_relu_scale_wrong.c")
                        << "'\nprintf '```\\n'\n";
  const Cli wrong = cli("run " + fixture("linear_relu_scale.py") + " --mutator command --command 'sh " +
                        script.string() + "' --no-db --max-evals 5");
  CHECK(wrong.code == 1);
  CHECK_MESSAGE(wrong.out.find("the kernel it wrote is incorrect") != std::string::npos, wrong.out << wrong.err);
  fs::remove(script);
}

TEST_CASE(
    "pytorch: get_workloads() gives a workload each, one signature for all; a workload that changes it is refused" *
    doctest::skip(!have_torch())) {
  const ke::Spec spec = ke::load_pytorch_problem(fixture("workloads.py"));
  REQUIRE(spec.workloads.size() == 3);
  CHECK(spec.workloads[1] ==
        ke::Bindings{{"batch_size", 5}, {"in_features", 40}, {"hidden", 12}, {"out_features", 20}});
  // Globals a workload leaves out keep the module's values.
  CHECK(spec.workloads[2] ==
        ke::Bindings{{"batch_size", 3}, {"in_features", 24}, {"hidden", 32}, {"out_features", 16}});
  // hidden and out_features share their default (16): the workloads tell which dimension follows which.
  CHECK(param(spec, "fc2_weight").shape == std::vector<std::string>{"out_features", "hidden"});
  CHECK(param(spec, "out").shape == std::vector<std::string>{"batch_size", "out_features"});

  const fs::path dir = fs::temp_directory_path() / ("ke_pytorch_workloads_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const Cli imported = cli("import " + fixture("workloads.py") + " -o " + dir.string());
  REQUIRE_MESSAGE(imported.code == 0, imported.err);
  CHECK(imported.out.find("workload: batch_size=5 hidden=12 in_features=40 out_features=20") != std::string::npos);
  CHECK(ke::load_spec((dir / "cpu.json").string()).workloads == spec.workloads);
  for (const std::string& problem : {fixture("workloads.py"), (dir / "cpu.json").string()}) {
    CAPTURE(problem);
    const Cli checked = cli("check " + problem + " --seed-kernel " + fixture("workloads_seed.c") + " --json");
    REQUIRE_MESSAGE(checked.code == 0, checked.err);
    CHECK(checked.out.find("\"seed\": {\"status\": \"ok\"") != std::string::npos);
  }
  fs::remove_all(dir);

  for (const auto& [file, why] : std::vector<std::pair<std::string, std::string>>{
           {"workloads_unknown_global.py",
            "get_workloads()[1] {batchsize: 16} names 'batchsize', which is not one of "
            "the module's int globals"},
           {"workloads_new_signature.py",
            "get_workloads()[1] {batch_size: 16, layers: 3} changes the kernel's "
            "signature"}}) {
    CAPTURE(file);
    const Cli r = cli("import " + fixture(file) + " -o " + (dir / "refused").string());
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.err.find(why) != std::string::npos, r.err);
    CHECK_FALSE(fs::exists(dir / "refused" / "cpu.json"));
  }
  fs::remove_all(dir);
}

TEST_CASE("pytorch: a workload sets its globals in the source: a global computed from them follows, unless set too" *
          doctest::skip(!have_torch())) {
  // hidden = in_features * 2 in the module: a workload that changes in_features alone doubles hidden too, in
  // the signature's bindings and in the reference the check runs.
  const ke::Spec spec = ke::load_pytorch_problem(fixture("workloads_derived_global.py"));
  REQUIRE(spec.workloads.size() == 3);
  CHECK(spec.workloads[0] == ke::Bindings{{"batch_size", 4}, {"in_features", 8}, {"hidden", 16}});
  CHECK(spec.workloads[1] == ke::Bindings{{"batch_size", 6}, {"in_features", 12}, {"hidden", 24}});
  CHECK(spec.workloads[2] == ke::Bindings{{"batch_size", 4}, {"in_features", 10}, {"hidden", 7}});
  CHECK(param(spec, "fc_weight").shape == std::vector<std::string>{"hidden", "in_features"});
  const Cli checked = cli("check " + fixture("workloads_derived_global.py") + " --seed-kernel " +
                          fixture("workloads_derived_global_seed.c") + " --json");
  REQUIRE_MESSAGE(checked.code == 0, checked.err);
  CHECK_MESSAGE(checked.out.find("\"seed\": {\"status\": \"ok\"") != std::string::npos, checked.out);

  // A dimension no expression of the globals gives (isqrt(features)) is a number; a workload at which it
  // is another number is refused before anything runs, naming the dimension and both values.
  const Cli r = cli("import " + fixture("workloads_off_expression.py") + " -o " +
                    (fs::temp_directory_path() / ("ke_pytorch_off_" + std::to_string(::getpid()))).string());
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.err.find("get_workloads()[1] {features: 256}: dimension 1 of 'out' is 16 there, but the "
                           "signature's 8 gives 8") != std::string::npos,
                r.err);
}

namespace {
std::vector<std::string> shape_of(const ke::Spec& spec, const std::string& name) { return param(spec, name).shape; }
using Shape = std::vector<std::string>;
}  // namespace

TEST_CASE("pytorch: a 0-d tensor is a one-element buffer: a loss, a scalar weight, a 0-d input, BatchNorm's counter" *
          doctest::skip(!have_torch())) {
  const ke::Spec loss = ke::load_pytorch_problem(fixture("hinge_loss.py"));
  std::vector<std::string> names;
  for (const ke::Param& p : loss.params) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"predictions", "targets", "out", "batch_size"});
  CHECK(shape_of(loss, "predictions") == Shape{"batch_size"});
  CHECK(shape_of(loss, "out") == Shape{"1"});
  CHECK(param(loss, "out").role == ke::Role::out);
  CHECK(param(loss, "out").dtype == ke::DType::f32);

  const ke::Spec scalar = ke::load_pytorch_problem(fixture("scalar_weight.py"));
  CHECK(shape_of(scalar, "x") == Shape{"batch_size", "features"});
  CHECK(shape_of(scalar, "shift") == Shape{"1"});  // a 0-d input
  CHECK(shape_of(scalar, "alpha") == Shape{"1"});  // nn.Parameter(torch.tensor(0.5))
  CHECK(shape_of(scalar, "out") == Shape{"batch_size", "features"});

  const ke::Spec bn = ke::load_pytorch_problem(fixture("batchnorm_eval.py"));
  CHECK(shape_of(bn, "x") == Shape{"batch_size", "num_features", "height", "width"});
  CHECK(shape_of(bn, "bn_running_var") == Shape{"num_features"});
  CHECK(shape_of(bn, "bn_num_batches_tracked") == Shape{"1"});
  CHECK(param(bn, "bn_num_batches_tracked").dtype == ke::DType::i64);
  CHECK(shape_of(bn, "out") == Shape{"batch_size", "num_features", "height", "width"});

  // The bridge gives the module its 0-d tensors as 0-d and copies a 0-d output into its [1] buffer: right
  // seeds pass against PyTorch, and a wrong loss is caught.
  for (const auto& [problem, seed] : std::vector<std::pair<std::string, std::string>>{
           {"hinge_loss.py", "hinge_loss_seed.c"}, {"scalar_weight.py", "scalar_weight_seed.c"}}) {
    CAPTURE(problem);
    const Cli r = cli("check " + fixture(problem) + " --seed-kernel " + fixture(seed) + " --json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK_MESSAGE(r.out.find("\"seed\": {\"status\": \"ok\"") != std::string::npos, r.out);
  }
  const fs::path wrong = fs::temp_directory_path() / ("ke_hinge_wrong_" + std::to_string(::getpid()) + ".c");
  {
    std::ifstream in(fixture("hinge_loss_seed.c"));
    std::string source((std::istreambuf_iterator<char>(in)), {});
    const std::string mean = "sum / (double)batch_size";
    REQUIRE(source.find(mean) != std::string::npos);
    source.replace(source.find(mean), mean.size(), "sum");  // the sum, not the mean
    std::ofstream(wrong) << source;
  }
  const Cli bad = cli("check " + fixture("hinge_loss.py") + " --seed-kernel " + wrong.string() + " --json");
  CHECK(bad.code == 1);
  CHECK_MESSAGE(bad.out.find("\"status\": \"incorrect\"") != std::string::npos, bad.out);
  fs::remove(wrong);
}

TEST_CASE("pytorch: dimensions are named by the global they follow, not by their value" *
          doctest::skip(!have_torch())) {
  // batch_size = out_channels = height = width = 16, in_channels = kernel_size = 3.
  const ke::Spec conv = ke::load_pytorch_problem(fixture("conv_shared.py"));
  CHECK(shape_of(conv, "x") == Shape{"batch_size", "in_channels", "height", "width"});
  CHECK(shape_of(conv, "conv_weight") == Shape{"out_channels", "in_channels", "kernel_size", "kernel_size"});
  CHECK(shape_of(conv, "conv_bias") == Shape{"out_channels"});
  CHECK(shape_of(conv, "out") ==
        Shape{"batch_size", "out_channels", "height - kernel_size + 1", "width - kernel_size + 1"});
  for (const std::string size : {"batch_size", "out_channels", "height", "width", "in_channels", "kernel_size"})
    CHECK_MESSAGE(param(conv, size).role == ke::Role::size, size);
  REQUIRE(conv.workloads.size() == 1);
  CHECK(conv.workloads[0] == ke::Bindings{{"batch_size", 16},
                                          {"out_channels", 16},
                                          {"height", 16},
                                          {"width", 16},
                                          {"in_channels", 3},
                                          {"kernel_size", 3}});
  // The cost's bytes are every buffer's, at any sizes; a constant that is no size is in the notes.
  REQUIRE(conv.cost_bytes.has_value());
  const ke::Bindings other{{"batch_size", 2}, {"out_channels", 5}, {"height", 9},
                           {"width", 7},      {"in_channels", 3},  {"kernel_size", 2}};
  CHECK(conv.cost_bytes->eval(other) == 4 * (2 * 3 * 9 * 7 + 5 * 3 * 2 * 2 + 5 + 2 * 5 * 8 * 6));
  // Its flops are PyTorch's count (FlopCounterMode, or torch.profiler's before PyTorch 2.1), named as the
  // sizes are: two per multiply-add of the convolution, at any sizes.
  REQUIRE(conv.cost_flops.has_value());
  CHECK_MESSAGE(conv.cost_flops->eval(other) == 2 * (2 * 5 * 8 * 6) * (3 * 2 * 2), conv.cost_flops->text());
  CHECK_MESSAGE(conv.notes.find("scale = 0.5") != std::string::npos, conv.notes);
  // A GPU start launches a thread per output element: the expressions are factors in parentheses.
  ke::PytorchProblemOptions cuda;
  cuda.language = ke::Language::cuda;
  const ke::Spec gpu = ke::load_pytorch_problem(fixture("conv_shared.py"), cuda);
  REQUIRE(gpu.launch.has_value());
  CHECK(gpu.launch->grid[0].eval(gpu.bindings(gpu.workloads[0], {{"BLOCK", 256}})) == (16 * 16 * 14 * 14 + 255) / 256);
  CHECK_MESSAGE(conv.notes.find("meta device") != std::string::npos, conv.notes);
  // The launch is a start: the notes say it is the default plan, and that a candidate may bring its own.
  CHECK_MESSAGE(gpu.notes.find("The launch is the default plan, one kernel (the entry) with the params in order; a "
                               "candidate may bring its own plan (kernelevolve-plan: several kernels with their own "
                               "grids, temporaries, cuBLASLt and cuDNN steps; docs/spec-format.md, \"Programs\")") !=
                    std::string::npos,
                gpu.notes);
  CHECK_MESSAGE(conv.notes.find("a candidate may bring its own plan (kernelevolve-plan: several functions in order") !=
                    std::string::npos,
                conv.notes);

  const ke::Spec matmul = ke::load_pytorch_problem(fixture("matmul_shared.py"));  // M = N
  CHECK(shape_of(matmul, "A") == Shape{"M", "K"});
  CHECK(shape_of(matmul, "B") == Shape{"K", "N"});
  CHECK(shape_of(matmul, "out") == Shape{"M", "N"});
  REQUIRE(matmul.cost_flops.has_value());
  CHECK_MESSAGE(matmul.cost_flops->eval({{"M", 3}, {"K", 5}, {"N", 7}}) == 2 * 3 * 5 * 7, matmul.cost_flops->text());

  // Through a strided convolution, a pool and a flatten: the linear layer's input features follow the sizes
  // as the module computes them, at the sizes derived and at others.
  const ke::Spec deep = ke::load_pytorch_problem(fixture("conv_pool_linear.py"));
  CHECK(shape_of(deep, "x") == Shape{"batch_size", "3", "height", "width"});
  const ke::Expr features = ke::Expr::parse(shape_of(deep, "fc_weight").at(1));
  for (const auto& [c, h, w] :
       std::vector<std::tuple<int, int, int>>{{4, 20, 18}, {3, 21, 25}, {7, 8, 9}, {1, 40, 13}}) {
    CAPTURE(features.text());
    const ke::Bindings sizes{{"channels", c}, {"height", h}, {"width", w}};
    CHECK(features.eval(sizes) == c * (((h - 1) / 2 + 1) / 2) * (((w - 1) / 2 + 1) / 2));
  }

  // import writes the expressions into the spec, which loads back, and a derivation that needed the data
  // says so.
  const fs::path dir = fs::temp_directory_path() / ("ke_pytorch_names_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const Cli imported = cli("import " + fixture("conv_shared.py") + " -o " + dir.string());
  REQUIRE_MESSAGE(imported.code == 0, imported.err);
  const ke::Spec written = ke::load_spec((dir / "cpu.json").string());
  CHECK(shape_of(written, "out") == shape_of(conv, "out"));
  CHECK(written.cost_bytes.has_value());
  fs::remove_all(dir);
  const ke::Spec real = ke::load_pytorch_problem(fixture("embedding_bag.py"));  // int(lengths.sum()) needs data
  CHECK_MESSAGE(real.notes.find("by a real call") != std::string::npos, real.notes);
  CHECK(shape_of(real, "indices") == Shape{"num_indices"});
  CHECK(shape_of(real, "offsets") == Shape{"batch_size"});
}

TEST_CASE("pytorch: every problem of problems/pytorch passes check on the CPU against PyTorch" *
          doctest::skip(!have_torch())) {
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(std::string(KE_SOURCE_DIR) + "/problems/pytorch")) {
    const fs::path spec = entry.path() / "cpu.json";
    if (!fs::exists(spec)) continue;
    CAPTURE(spec.string());
    const Cli r = cli("check " + spec.string() + " --json");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK_MESSAGE(r.out.find("\"seed\": {\"status\": \"ok\"") != std::string::npos, r.out);
    ++checked;
  }
  CHECK(checked >= 12);
}

TEST_CASE("pytorch: a run measures PyTorch eager and torch.compile and reports the best against them" *
          doctest::skip(!have_torch())) {
  const Cli r = cli("run " + fixture("linear_relu_scale.py") + " --seed-kernel " + fixture("linear_relu_scale_seed.c") +
                    " --no-db --max-evals 3 --json");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE_MESSAGE(parser.parse(r.out).get(doc) == simdjson::SUCCESS, r.out);
  const ke::Spec spec = ke::load_pytorch_problem(fixture("linear_relu_scale.py"));
  simdjson::dom::array eager;
  REQUIRE_MESSAGE(doc["baselines"]["eager"]["time_us"].get(eager) == simdjson::SUCCESS, r.out);
  REQUIRE(eager.size() == spec.workloads.size());
  simdjson::dom::array best_times;
  REQUIRE(doc["best"]["time_us"].get(best_times) == simdjson::SUCCESS);
  // speedup_vs_eager is the geometric mean of eager / best over the workloads.
  double log_sum = 0;
  for (std::size_t w = 0; w < eager.size(); ++w) {
    const double e = eager.at(w).get_double().value(), b = best_times.at(w).get_double().value();
    CHECK(e > 0);
    log_sum += std::log(e / b);
  }
  double vs_eager = 0;
  REQUIRE(doc["best"]["speedup_vs_eager"].get(vs_eager) == simdjson::SUCCESS);
  CHECK(vs_eager == doctest::Approx(std::exp(log_sum / double(eager.size()))).epsilon(1e-3));
  // The host's cost of the module's call, reported apart (issue 50): on the CPU the call is its own host, so its
  // host time is its time, within rounding to the nanosecond.
  simdjson::dom::array host;
  REQUIRE_MESSAGE(doc["baselines"]["eager"]["host_us"].get(host) == simdjson::SUCCESS, r.out);
  REQUIRE(host.size() == eager.size());
  for (std::size_t w = 0; w < host.size(); ++w) CHECK(host.at(w).get_double().value() > 0);
  // The mark: with no torch.compile time here (1.13), eager alone, so the figure over it is the one over eager.
  double vs_mark = 0;
  REQUIRE(doc["best"]["speedup_vs_best_baseline"].get(vs_mark) == simdjson::SUCCESS);
  CHECK(vs_mark > 0);
  CHECK(doc["precision"]["policy"].get_string().value() == "as-run");
  // torch.compile: a time, or null with the reason (Debian's torch 1.13 has none).
  simdjson::dom::element compile = doc["baselines"]["compile"];
  if (compile["time_us"].is_null()) {
    std::string_view reason;
    REQUIRE(compile["reason"].get(reason) == simdjson::SUCCESS);
    CHECK_MESSAGE(reason.find("compile") != std::string_view::npos, reason);
    CHECK(doc["best"]["speedup_vs_compile"].is_null());
  } else {
    double vs_compile = 0;
    CHECK(doc["best"]["speedup_vs_compile"].get(vs_compile) == simdjson::SUCCESS);
    CHECK(vs_compile > 0);
  }
  // Where the run's time went, per step (issue 52): each measured, none negative; node 0's and the baselines' are
  // parts of the run's elapsed time, and the search is the rest (a seed given: no capture).
  simdjson::dom::element steps;
  REQUIRE_MESSAGE(doc["steps_s"].get(steps) == simdjson::SUCCESS, r.out);
  for (const char* step : {"describe", "capture", "start", "node0", "baselines", "search"}) {
    double s = -1;
    REQUIRE_MESSAGE(steps[step].get(s) == simdjson::SUCCESS, step);
    CHECK_MESSAGE(s >= 0, step);
  }
  CHECK(steps["capture"].get_double().value() == 0);
  CHECK(steps["describe"].get_double().value() > 0);
  const double node0 = steps["node0"].get_double().value(), baselines = steps["baselines"].get_double().value();
  CHECK(node0 > 0);
  CHECK(baselines > 0);
  const double elapsed = doc["elapsed_s"].get_double().value();
  CHECK(node0 + baselines <= elapsed + 1e-3);
  CHECK(steps["search"].get_double().value() == doctest::Approx(elapsed - node0 - baselines).epsilon(1e-3));
  // The text report says the same.
  const Cli text = cli("run " + fixture("linear_relu_scale.py") + " --seed-kernel " +
                       fixture("linear_relu_scale_seed.c") + " --no-db --max-evals 2");
  REQUIRE_MESSAGE(text.code == 0, text.err);
  CHECK_MESSAGE(text.out.find("PyTorch eager:") != std::string::npos, text.out);
  CHECK_MESSAGE(text.out.find("torch.compile:") != std::string::npos, text.out);
  CHECK_MESSAGE(
      text.out.find("the mark to beat, the faster of eager and torch.compile per workload:") != std::string::npos,
      text.out);
  CHECK_MESSAGE(text.out.find("precision: as-run") != std::string::npos, text.out);
  CHECK_MESSAGE(text.out.find("  steps: the problem ") != std::string::npos, text.out);
}

TEST_CASE("pytorch: a baseline is judged as a kernel is, and only a PyTorch problem has one" *
          doctest::skip(!have_torch())) {
  const ke::Spec spec = ke::load_pytorch_problem(fixture("linear_relu_scale.py"));
  ke::EvalOptions options;
  options.trials = 3;
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), options);
  const ke::Evaluation eager = evaluator.evaluate({"eager", ke::Language::pytorch, spec.seed_tunables()}, 7);
  REQUIRE_MESSAGE(eager.status == ke::Status::ok, eager.message);
  CHECK(eager.timings.size() == spec.workloads.size());
  const ke::Evaluation unknown = evaluator.evaluate({"import os", ke::Language::pytorch, spec.seed_tunables()}, 7);
  CHECK(unknown.status == ke::Status::invalid);
  // A spec with a kernel reference has no module to run.
  ke::Spec c_spec = ke::load_spec(std::string(KE_SOURCE_DIR) + "/problems/level1/gelu/cpu.json");
  ke::LocalEvaluator c_evaluator(c_spec, ke::open_device("cpu"), options);
  const ke::Evaluation none = c_evaluator.evaluate({"eager", ke::Language::pytorch, c_spec.seed_tunables()}, 7);
  CHECK(none.status == ke::Status::invalid);
  CHECK(none.message.find("PyTorch problem") != std::string::npos);
}

namespace {
std::shared_ptr<ke::Device> cuda_or_null(std::string& why) {
  try {
    return ke::open_device("cuda");
  } catch (const ke::Error& e) {
    why = e.what();
    return nullptr;
  }
}
}  // namespace

TEST_CASE("pytorch: on a CUDA GPU the reference runs in the candidate device's own memory" *
          doctest::skip(!have_torch())) {
  std::string why;
  const auto gpu = cuda_or_null(why);
  if (!gpu) {
    MESSAGE("skipping the PyTorch GPU reference: " << why);
    return;
  }
  const std::string dir = std::string(KE_SOURCE_DIR) + "/problems/pytorch/linear_relu/";
  ke::Spec spec = ke::load_spec(dir + "cuda.json");
  spec.workloads = {{{"batch_size", 257}, {"in_features", 300}, {"out_features", 129}},
                    {{"batch_size", 64}, {"in_features", 64}, {"out_features", 64}}};
  ke::EvalOptions options;
  options.trials = 4;
  ke::LocalEvaluator evaluator(spec, gpu, options);
  const ke::Candidate seed{spec.seed.source, ke::Language::cuda, spec.seed_tunables()};
  const ke::Evaluation ok = evaluator.evaluate(seed, 3);
  REQUIRE_MESSAGE(ok.status == ke::Status::ok, ok.message);
  // A wrong kernel (no ReLU) is caught against PyTorch on the GPU.
  std::string wrong = spec.seed.source;
  const auto relu = wrong.find("fmaxf");
  REQUIRE(relu != std::string::npos);
  wrong.replace(relu, 5, "fminf");
  const ke::Evaluation bad = evaluator.evaluate({wrong, ke::Language::cuda, spec.seed_tunables()}, 4);
  CHECK(bad.status == ke::Status::incorrect);
  // The buffers carved from the arena have red zones, as the device's own allocations do: one element past the
  // output (257 x 129 floats, no multiple of 256 bytes) or element -1 of an input lands in a zone, not in the
  // rounding or in the buffer beside it.
  const auto last = spec.seed.source.rfind('}');
  REQUIRE(last != std::string::npos);
  for (const std::string& write : {std::string("if (j == 0 && i0 == 0) out[batch_size * N] = 0.f;"),
                                   std::string("if (j == 0 && i0 == 0) ((float*)fc_bias)[-1] = 0.f;")}) {
    CAPTURE(write);
    std::string outside = spec.seed.source;
    outside.insert(last, write + "\n");
    const ke::Evaluation e = evaluator.evaluate({outside, ke::Language::cuda, spec.seed_tunables()}, 6);
    CHECK(e.status == ke::Status::incorrect);
    const bool past = write.find("out[") != std::string::npos;
    CHECK_MESSAGE(e.message.find(past ? "wrote past the end of output 'out' (byte 0 of the"
                                      : "wrote before the start of input 'fc_bias' (byte -1, in the 256 before it") !=
                      std::string::npos,
                  e.message);
  }
  const ke::Evaluation eager = evaluator.evaluate({"eager", ke::Language::pytorch, spec.seed_tunables()}, 5);
  REQUIRE_MESSAGE(eager.status == ke::Status::ok, eager.message);
  CHECK(eager.timings.size() == 2);
  CHECK(eager.timings[0].median_us > 0);
}
