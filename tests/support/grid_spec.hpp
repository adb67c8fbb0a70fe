// A spec for tests of the search and the store, which never compile its kernel: an empty C kernel over
// x -> y of n floats, workloads n = 100 and 300, tunables A in {1..16} and B in {1..8} (powers of two)
// with A * B <= 64. The synthetic evaluators give its points their results.
#pragma once
#include <kernelevolve/spec.hpp>

namespace kernelevolve::testing {

inline Spec grid_spec() {
  Spec s;
  s.name = "grid";
  s.language = Language::c;
  s.entry = "k";
  s.params = {{"x", DType::f32, Role::in, {"n"}, 0},
              {"y", DType::f32, Role::out, {"n"}, 0},
              {"n", DType::i64, Role::size, {}, 0}};
  s.workloads = {{{"n", 100}}, {{"n", 300}}};
  s.reference.source = "void k(const float* x, float* y, long n) {}";
  // The seed reads both tunables (a tunable nothing reads is dead, and never searched).
  s.seed.source = "void k(const float* x, float* y, long n) { (void)(A + B); }";
  s.tunables = {{"A", {1, 2, 4, 8, 16}}, {"B", {1, 2, 4, 8}}};
  s.constraints = {Expr::parse("A * B <= 64")};
  s.validate();
  return s;
}

}  // namespace kernelevolve::testing
