// The centre problem that the program tests share: y = x - mean(x), its C reference, a two-pass CPU program
// of it (partial sums into a temporary, then the mean and the output), and a spec file that runs it.
#pragma once
#include <fstream>
#include <kernelevolve/spec.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.hpp"

namespace ke_test {

// y[i] = x[i] - mean(x): the reference in one pass over a running sum.
inline const char* const kCentreReference = R"(
#include <stdint.h>
void centre(const float* x, float* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  const float mean = (float)(s / n);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] - mean;
}
)";

// Two passes: partial sums of CHUNK elements into a temporary, then the mean from them and the output.
// `first_pass_end` lets a test leave the last partial sum unwritten.
inline std::string centre_two_pass(const std::string& plan_shape = "\"cdiv(n, CHUNK)\"",
                                   const std::string& first_pass_end = "chunks",
                                   const std::string& second_kernel = "finish") {
  return std::string(R"P(#include <stdint.h>
/* kernelevolve-plan
{"temporaries": [{"name": "partial", "dtype": "f64", "shape": [)P") +
         plan_shape + R"P(]}],
 "steps": [{"kernel": "partial_sums", "args": ["x", "partial", "n", "CHUNK"]},
           {"kernel": ")P" +
         second_kernel +
         R"P(", "args": ["x", "partial", "y", "n", "cdiv(n, CHUNK)"]}]}
*/
void partial_sums(const float* x, double* partial, int64_t n, int64_t chunk) {
  const int64_t chunks = (n + chunk - 1) / chunk;
  for (int64_t c = 0; c < )P" +
         first_pass_end + R"P(; ++c) {
    double s = 0;
    for (int64_t i = c * chunk; i < n && i < (c + 1) * chunk; ++i) s += x[i];
    partial[c] = s;
  }
}
void finish(const float* x, double* partial, float* y, int64_t n, int64_t chunks) {
  double s = 0;
  for (int64_t c = 0; c < chunks; ++c) s += partial[c];
  const float mean = (float)(s / n);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] - mean;
}
)P";
}

// A spec file for the CLI: the reference in centre_ref.c, the seed (centre_two_pass()) in centre_seed.c
// beside it, CHUNK a tunable only the plan reads.
inline const char* const kCentreSpecJson = R"({"name": "centre", "language": "c", "entry": "centre",
      "params": [{"name": "x", "dtype": "f32", "shape": ["n"], "role": "in"},
                 {"name": "y", "dtype": "f32", "shape": ["n"], "role": "out"},
                 {"name": "n", "dtype": "i64", "role": "size"}],
      "workloads": [{"n": 10000}, {"n": 777}], "tolerance": {"atol": 1e-4, "rtol": 1e-4},
      "reference": {"file": "centre_ref.c"}, "seed": {"file": "centre_seed.c"},
      "tunables": {"CHUNK": [256, 1024, 4096]}})";

// The centre problem's spec built in C++, at `workloads` (by default the spec file's two): the reference in both
// roles, CHUNK a tunable only a plan reads.
inline kernelevolve::Spec centre_spec(std::vector<kernelevolve::Bindings> workloads = {{{"n", 10000}}, {{"n", 777}}}) {
  namespace ke = kernelevolve;
  ke::Spec s;
  s.name = "centre";
  s.language = ke::Language::c;
  s.entry = "centre";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = std::move(workloads);
  s.tolerance = {1e-4, 1e-4};
  s.reference.source = kCentreReference;
  s.seed.source = kCentreReference;
  s.tunables = {{"CHUNK", {256, 1024}}};
  s.validate();
  return s;
}

// The spec file and its two sources (kCentreSpecJson, the reference, the two-pass seed) written into `dir`.
inline void write_centre_files(const TempDir& dir) {
  std::ofstream(dir / "centre_ref.c") << kCentreReference;
  std::ofstream(dir / "centre_seed.c") << centre_two_pass();
  std::ofstream(dir / "centre.json") << kCentreSpecJson;
}

// A CLI run of the centre program (the two-pass seed, three evaluations) into `dir`/centre.db: its path.
inline std::string centre_run(const TempDir& dir) {
  write_centre_files(dir);
  const std::string db = dir / "centre.db";
  const auto run = run_cli_in("", "run " + dir / "centre.json" + " --db " + db + " --max-evals 3");
  REQUIRE_MESSAGE(run.code == 0, run.err);
  return db;
}

}  // namespace ke_test
