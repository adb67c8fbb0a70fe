// The centre problem that the program tests share: y = x - mean(x), its C reference, a two-pass CPU program
// of it (partial sums into a temporary, then the mean and the output), and a spec file that runs it.
#pragma once
#include <string>

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

}  // namespace ke_test
