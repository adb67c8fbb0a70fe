// libFuzzer target for the spec loader: kernelevolve::parse_spec over arbitrary bytes. A finding is a
// crash, a sanitizer report, a hang, or an exception other than kernelevolve::Error (bad input must be
// an Error, which the CLI turns into exit 2 and a message). A spec that loads must also survive the
// round trip through to_json, as a worker and the store read it back: to_json(parse(to_json(s))) must
// give the same text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "kernelevolve/error.hpp"
#include "kernelevolve/spec.hpp"

namespace ke = kernelevolve;

namespace {

[[noreturn]] void finding(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_spec: %s%s%s\n", what, detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Relative "file" references resolve against a folder that does not exist, so the fuzzer reaches the
  // missing-file path without reading the disk; seeds carry their sources inline.
  const std::string path = "/nonexistent-fuzz-dir/spec.json";
  ke::Spec spec;
  try {
    spec = ke::parse_spec(text, path);
  } catch (const ke::Error&) {
    return 0;  // bad input, reported as it should be
  } catch (const std::exception& e) {
    finding("an exception other than kernelevolve::Error escaped parse_spec", e.what());
  } catch (...) {
    finding("a non-standard exception escaped parse_spec");
  }
  std::string first, second;
  try {
    first = ke::to_json(spec);
    second = ke::to_json(ke::parse_spec(first, path));
  } catch (const std::exception& e) {
    finding("a spec that loaded does not load again from its own to_json", e.what() + std::string("\n") + first);
  }
  if (first != second) finding("to_json(parse(to_json(spec))) differs from to_json(spec)", first + "\n" + second);
  return 0;
}
