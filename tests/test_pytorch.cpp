// PyTorch problems (issue 16) on the CPU with Debian's torch: the signature derived from a module, the
// spec `import` writes and that loads back, `check` of a right and a wrong seed against PyTorch, the
// problem's own integer inputs (an embedding bag), modules that cannot be mapped (exit 2, naming why),
// and a reference that kills its own process (the host survives; the failure names the reference).
// Skipped, and says so, where no Python imports torch.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>
#include <kernelevolve/pytorch.hpp>
#include <string>

#include "pytorch/python.hpp"

namespace fs = std::filesystem;
namespace ke = kernelevolve;

namespace {

std::string fixture(const std::string& name) { return std::string(KE_FIXTURES) + "/pytorch/" + name; }

bool have_torch() {
  static const bool found = [] {
    try {
      ke::pytorch::find_python();
      return true;
    } catch (const ke::Error&) {
      return false;
    }
  }();
  return found;
}
const char* const kNoTorch = "no Python here imports torch (Debian: apt-get install python3-torch)";

struct Cli {
  int code;
  std::string out, err;
};

Cli cli(const std::string& args, const std::string& env = "") {
  const std::string err_file = (fs::temp_directory_path() / ("ke_pytorch_err_" + std::to_string(::getpid()))).string();
  FILE* p = popen((env + " " + std::string(KE_CLI) + " " + args + " 2>" + err_file).c_str(), "r");
  Cli r{-1, "", ""};
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_file);
  r.err.assign(std::istreambuf_iterator<char>(err), {});
  fs::remove(err_file);
  return r;
}

const ke::Param& param(const ke::Spec& spec, const std::string& name) {
  const ke::Param* p = spec.find_param(name);
  REQUIRE_MESSAGE(p != nullptr, name);
  return *p;
}

}  // namespace

TEST_CASE("pytorch: whether it runs") {
  if (!have_torch()) MESSAGE("skipping the PyTorch tests: " << kNoTorch);
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
  for (const auto& [file, why] : std::vector<std::pair<std::string, std::string>>{
           {"data_dependent.py", "data-dependent shape"},
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

TEST_CASE("pytorch: a reference that kills its own process: the host survives, the failure names the reference" *
          doctest::skip(!have_torch())) {
  const Cli r = cli("check " + fixture("crashing.py") + " --seed-kernel " + fixture("crashing_seed.c"), "KE_TEST_CRASH=1");
  CHECK(r.code != 0);
  CHECK(r.code < 128);  // an exit with a message, not a signal
  CHECK_MESSAGE(r.err.find("reference") != std::string::npos, r.err);
  CHECK_MESSAGE(r.err.find("PyTorch") != std::string::npos, r.err);
  const Cli fine = cli("check " + fixture("crashing.py") + " --seed-kernel " + fixture("crashing_seed.c") + " --json");
  CHECK_MESSAGE(fine.code == 0, fine.err);
  CHECK(fine.out.find("\"status\": \"ok\"") != std::string::npos);
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
