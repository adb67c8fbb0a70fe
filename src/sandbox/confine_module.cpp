// libkernelevolve_confine: the sandbox (kernelevolve/sandbox.hpp) for a helper process written in another
// language, loaded there by its foreign-function interface (Triton's compile helper, in Python, through
// ctypes). The helper confines itself with the same rules as a worker, and asks which calls were denied.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernelevolve/sandbox.hpp"

namespace {

std::size_t copy_out(const std::string& text, char* out, std::size_t capacity) {
  if (!out || capacity == 0) return text.size();
  const std::size_t n = std::min(text.size(), capacity - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
  return text.size();
}

}  // namespace

extern "C" {

// Confines the calling process for the rest of its life: `mode` is "strict", "basic" or "off";
// `address_space_bytes` its RLIMIT_AS (0: none). No file opened for writing, no program, no process, no
// socket. Its stderr may still be written (the helper's log, a file it was handed). Writes the report's
// summary into `report` (NUL-terminated, cut to `capacity`); returns 0, or -1 for an unknown mode.
__attribute__((visibility("default"))) int ke_confine(const char* mode, std::uint64_t address_space_bytes, char* report,
                                                      std::size_t capacity) {
  const auto parsed = kernelevolve::parse_sandbox_mode(mode ? mode : "");
  if (!parsed) {
    copy_out(std::string("unknown sandbox mode '") + (mode ? mode : "") + "'", report, capacity);
    return -1;
  }
  kernelevolve::SandboxAllowances allow;
  allow.address_space_bytes = address_space_bytes;
  allow.limit_file_size = false;
  allow.cpu_seconds = 600;  // one compile; the helper's own time limit comes far sooner
  const kernelevolve::SandboxReport r = kernelevolve::apply_sandbox(*parsed, allow);
  copy_out(r.summary(), report, capacity);
  return 0;
}

// The calls denied since the last call, one per line, into `out` (NUL-terminated, cut to `capacity`).
// Returns the full length.
__attribute__((visibility("default"))) std::size_t ke_confine_denials(char* out, std::size_t capacity) {
  std::string text;
  for (const std::string& d : kernelevolve::take_sandbox_denials()) text += d + "\n";
  return copy_out(text, out, capacity);
}

}  // extern "C"
