// `kernelevolve baseline` (issue 27): PyTorch eager and torch.compile measured as a run measures them, on
// the CPU with Debian's torch 1.13; a module that is not a problem refused with exit 2 and its reason; and
// bench/kernelbench.sh over a tiny KernelBench-shaped folder: a row per file, refusals named, resumable.
// Skipped, and says so, where no Python imports torch.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <kernelevolve/error.hpp>
#include <simdjson.h>
#include <sstream>
#include <string>

#include "pytorch/python.hpp"
#include "support/cli_runner.hpp"
#include "support/have_torch.hpp"

namespace fs = std::filesystem;
namespace ke = kernelevolve;

namespace {

using ke_test::have_torch;
using ke_test::kNoTorch;

std::string source(const std::string& path) { return std::string(KE_SOURCE_DIR) + "/" + path; }

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Shell-run with stdout and stderr together, for the bench script.
ke_test::CliOutcome shell(const std::string& command) {
  ke_test::CliOutcome o;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) o.out.append(buf, n);
  const int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

}  // namespace

TEST_CASE("baseline: whether it runs") {
  if (!have_torch()) MESSAGE("skipping the baseline tests: " << kNoTorch);
}

TEST_CASE("baseline: eager measured per workload on the CPU; torch.compile not, and the reason names the CPU" *
          doctest::skip(!have_torch())) {
  const auto o = ke_test::run_cli("baseline " + source("problems/pytorch/relu_nchw/model.py") + " --json");
  REQUIRE_MESSAGE(o.code == 0, (o.err + o.out));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE_MESSAGE(parser.parse(o.out).get(doc) == simdjson::SUCCESS, o.out);
  CHECK(std::string(doc["problem"].get_string().value()) == "relu_nchw");
  CHECK(std::string(doc["device"].get_string().value()).rfind("cpu", 0) == 0);
  const auto workloads = doc["workloads"].get_array().value();
  REQUIRE(workloads.size() >= 1);
  // x and out, 8 x 24 x 40 x 56 floats each.
  const auto bytes = doc["problem_bytes"].get_array().value();
  REQUIRE(bytes.size() == workloads.size());
  CHECK(bytes.at(0).get_int64().value() == 2 * 8 * 24 * 40 * 56 * 4);

  const auto eager = doc["eager"];
  CHECK(std::string(eager["status"].get_string().value()) == "ok");
  CHECK(eager["reason"].is_null());
  const auto times = eager["time_us"].get_array().value();
  REQUIRE(times.size() == workloads.size());
  for (const auto t : times) CHECK(t.get_double().value() > 0);
  CHECK(eager["mad_us"].get_array().value().size() == workloads.size());

  const auto compile = doc["compile"];
  CHECK(std::string(compile["status"].get_string().value()) != "ok");
  CHECK(compile["time_us"].is_null());
  // The bridge's reason: measured on GPUs only, or (Debian's torch 1.13) no torch.compile at all.
  const std::string reason(compile["reason"].get_string().value());
  CHECK_MESSAGE((reason.find("CPU") != std::string::npos || reason.find("has no torch.compile") != std::string::npos),
                reason);
}

TEST_CASE("baseline: the text report gives the workload, the bytes and why torch.compile has no time" *
          doctest::skip(!have_torch())) {
  const auto o = ke_test::run_cli("baseline " + source("problems/pytorch/relu_nchw/model.py"));
  REQUIRE_MESSAGE(o.code == 0, (o.err + o.out));
  CHECK_MESSAGE(o.out.find("relu_nchw on cpu") != std::string::npos, o.out);
  CHECK_MESSAGE(o.out.find("3440640") != std::string::npos, o.out);
  CHECK_MESSAGE(o.out.find("PyTorch eager: ok") != std::string::npos, o.out);
  CHECK_MESSAGE(o.out.find("torch.compile: ") != std::string::npos, o.out);
  CHECK_MESSAGE((o.out.find("CPU") != std::string::npos || o.out.find("has no torch.compile") != std::string::npos),
                o.out);
}

TEST_CASE("baseline: a module that cannot be a problem, or no module at all, is bad usage (exit 2) with the reason" *
          doctest::skip(!have_torch())) {
  auto o = ke_test::run_cli("baseline " + std::string(KE_FIXTURES) + "/pytorch/data_dependent.py --json");
  CHECK(o.code == 2);
  CHECK_MESSAGE(o.err.find("data-dependent shape") != std::string::npos, o.err);
  CHECK(o.out.empty());

  o = ke_test::run_cli("baseline " + source("problems/pytorch/relu_nchw/cpu.json"));
  CHECK(o.code == 2);
  CHECK_MESSAGE(o.err.find("not a PyTorch problem") != std::string::npos, o.err);

  o = ke_test::run_cli("baseline " + source("problems/pytorch/relu_nchw/model.py") + " --device hip");
  CHECK(o.code == 2);
  CHECK_MESSAGE(o.err.find("--device") != std::string::npos, o.err);

  o = ke_test::run_cli("baseline");
  CHECK(o.code == 2);
  CHECK(o.err.find("usage") != std::string::npos);
}

TEST_CASE("census: bench/kernelbench.sh writes a row per file, names refusals, and resumes" *
          doctest::skip(!have_torch())) {
  ke_test::TempDir dir("ke_census");
  // A KernelBench-shaped checkout: KernelBench/level1/*.py, one file that imports and one that does not.
  fs::create_directories(dir.path / "KernelBench" / "level1");
  fs::copy_file(source("problems/pytorch/relu_nchw/model.py"), dir.path / "KernelBench/level1/1_ReLU.py");
  fs::copy_file(std::string(KE_FIXTURES) + "/pytorch/data_dependent.py", dir.path / "KernelBench/level1/2_Mask.py");
  const std::string out = dir / "census.md";
  const std::string command = "OUT= bash " + source("bench/kernelbench.sh") + " " + dir.path.string() +
                              " --levels 1 --jobs 2 --out " + out + " --cli " + KE_CLI;
  auto o = shell(command);
  REQUIRE_MESSAGE(o.code == 0, o.out);
  const std::string tsv = read(dir / "census.tsv");
  CHECK_MESSAGE(tsv.find("1\t1_ReLU\timported") != std::string::npos, tsv);
  CHECK_MESSAGE(tsv.find("1\t2_Mask\trefused") != std::string::npos, tsv);
  CHECK_MESSAGE(tsv.find("data-dependent shape") != std::string::npos, tsv);
  CHECK_MESSAGE(tsv.find("3440640") != std::string::npos, tsv);  // ReLU's bytes
  const std::string md = read(out);
  CHECK_MESSAGE(md.find("imported 1 of 2") != std::string::npos, md);
  CHECK_MESSAGE(md.find("| 1 | 1_ReLU |") != std::string::npos, md);

  // Every file has its row: a second call measures nothing again.
  o = shell(command);
  REQUIRE_MESSAGE(o.code == 0, o.out);
  CHECK_MESSAGE(o.out.find("2 of 2 files already in") != std::string::npos, o.out);
  CHECK(read(dir / "census.tsv") == tsv);
}
