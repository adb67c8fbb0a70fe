// libFuzzer target for the expression language of the spec's launch rule, constraints and cost
// (kernelevolve::Expr). A finding is a crash, a sanitizer report, a hang, or an exception other than
// kernelevolve::Error: a syntax error, an unknown name, division by zero and overflow must all be an
// Error(BadSpec), never undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>

#include "kernelevolve/error.hpp"
#include "kernelevolve/expr.hpp"

namespace ke = kernelevolve;

namespace {

// Values that probe the evaluator's overflow and division checks.
constexpr std::int64_t kValues[] = {0,
                                    1,
                                    -1,
                                    2,
                                    7,
                                    1024,
                                    std::numeric_limits<std::int64_t>::max(),
                                    std::numeric_limits<std::int64_t>::min(),
                                    3037000500,
                                    -3037000500};

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_expr: an exception other than kernelevolve::Error escaped: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const ke::Expr expr = ke::Expr::parse(text, "fuzz");
    // Every name the expression reads gets a value chosen by the input itself, so the fuzzer steers
    // evaluation towards the edges (INT64_MIN, zero divisors) as well as to unknown names.
    ke::Bindings names;
    std::size_t i = size;
    for (const std::string& name : expr.names()) {
      i = i * 31 + name.size();
      if (i % 11 != 10) names[name] = kValues[i % 10];  // 1 in 11 left unbound: the unknown-name path
    }
    (void)expr.eval(names);
    (void)expr.text();
  } catch (const ke::Error&) {
    // Bad input, reported as it should be.
  } catch (const std::exception& e) {
    finding(e.what());
  } catch (...) {
    finding("(not a std::exception)");
  }
  return 0;
}
