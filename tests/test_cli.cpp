// The kernelevolve tool as a user drives it: exit codes, messages, --json, and an end-to-end run
// that must find a kernel several times faster than its seed.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <simdjson.h>
#include <string>

namespace {

struct Outcome {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

Outcome kernelevolve(const std::string& args) {
  const std::string err_file = std::filesystem::temp_directory_path() / ("ke_cli_err_" + std::to_string(getpid()));
  const std::string cmd = std::string(KE_CLI) + " " + args + " 2>" + err_file;
  Outcome o;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
  const int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (FILE* f = fopen(err_file.c_str(), "r")) {
    while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) o.err.append(buf.data(), n);
    fclose(f);
  }
  std::filesystem::remove(err_file);
  return o;
}

std::string fixture(const std::string& name) { return std::string(KE_FIXTURES) + "/" + name; }

}  // namespace

TEST_CASE("no command is bad usage") {
  const auto o = kernelevolve("");
  CHECK(o.code == 2);
  CHECK(o.err.find("usage") != std::string::npos);
}

TEST_CASE("an unknown option is bad usage") {
  const auto o = kernelevolve("run " + fixture("e2e/colsum.json") + " --no-such-option");
  CHECK(o.code == 2);
}

TEST_CASE("a missing spec file exits 2 and names the file") {
  const auto o = kernelevolve("run /nonexistent/spec.json");
  CHECK(o.code == 2);
  CHECK(o.err.find("/nonexistent/spec.json") != std::string::npos);
}

TEST_CASE("a misspelt field exits 2 and names it") {
  const auto o = kernelevolve("check " + fixture("cli/unknown_field.json"));
  CHECK(o.code == 2);
  CHECK(o.err.find("tolerence") != std::string::npos);
  CHECK(o.err.find("unknown_field.json") != std::string::npos);
}

TEST_CASE("a device that is not there exits 3") {
  const auto o = kernelevolve("run " + fixture("e2e/colsum.json") + " --device cuda:99");
  CHECK(o.code == 3);
  CHECK(o.err.find("cuda") != std::string::npos);
}

TEST_CASE("a malformed device id is bad usage") {
  CHECK(kernelevolve("check " + fixture("e2e/colsum.json") + " --device tpu:x").code == 2);
}

TEST_CASE("devices lists the CPU") {
  const auto o = kernelevolve("devices --json");
  CHECK(o.code == 0);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE(parser.parse(o.out).get(doc) == simdjson::SUCCESS);
  simdjson::dom::array arr;
  REQUIRE(doc.get_array().get(arr) == simdjson::SUCCESS);
  bool has_cpu = false;
  for (auto d : arr) has_cpu |= std::string_view(d["id"].get_string().value()) == "cpu";
  CHECK(has_cpu);
}

TEST_CASE("check passes a correct seed and fails a wrong one") {
  CHECK(kernelevolve("check " + fixture("e2e/colsum.json")).code == 0);
  const auto bad = kernelevolve("check " + fixture("cli/wrong_seed.json"));
  CHECK(bad.code == 1);
  CHECK(bad.out.find("incorrect") != std::string::npos);
}

TEST_CASE("run finds a kernel several times faster than the seed, and reports it in JSON") {
  const auto o = kernelevolve("run " + fixture("e2e/colsum.json") + " --max-evals 12 --json --no-db");
  REQUIRE_MESSAGE(o.code == 0, o.err);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE(parser.parse(o.out).get(doc) == simdjson::SUCCESS);
  CHECK(std::string_view(doc["spec"].get_string().value()) == "colsum");
  const int64_t evaluations = doc["evaluations"].get_int64().value();
  CHECK(evaluations <= 12);
  CHECK(evaluations >= 2);
  int64_t counted = 0;
  simdjson::dom::object counts = doc["status_counts"].get_object().value();  // a local: value() of a temporary dangles
  for (auto [k, v] : counts) counted += v.get_int64().value();
  CHECK(counted == evaluations);
  simdjson::dom::element best = doc["best"];
  const double speedup = best["speedup"].get_double().value();
  CHECK_MESSAGE(speedup > 3.0, "speedup " << speedup);
  CHECK(best["tunables"]["BLOCK"].get_int64().value() > 1);
  CHECK(std::string_view(best["source"].get_string().value()).find("colsum") != std::string_view::npos);
  CHECK(best["time_us"].get_array().value().size() == 2);
  CHECK(doc["seed"]["time_us"].get_array().value().size() == 2);
  // Per workload, the fastest kernel on it alone: never slower there than the best overall.
  simdjson::dom::array fastest = doc["fastest_per_workload"].get_array().value();
  REQUIRE(fastest.size() == 2);
  simdjson::dom::array best_times = best["time_us"].get_array().value();
  std::size_t w = 0;
  for (simdjson::dom::element f : fastest) {
    CHECK(f["time_us"].get_double().value() <= best_times.at(w).get_double().value());
    CHECK(f["node"].get_int64().value() < evaluations);
    ++w;
  }
}

TEST_CASE("every shipped problem passes check on the CPU") {
  const std::filesystem::path problems = std::filesystem::path(KE_SOURCE_DIR) / "problems";
  int checked = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(problems)) {
    // CPU specs: spec.json (older single-target problems) or cpu.json beside a cuda.json.
    const auto name = entry.path().filename();
    if (name != "spec.json" && name != "cpu.json") continue;
    const auto o = kernelevolve("check " + entry.path().string() + " --json");
    CHECK_MESSAGE(o.code == 0, entry.path().string() << "\n" << o.out << o.err);
    ++checked;
  }
  CHECK(checked >= 3);
}
