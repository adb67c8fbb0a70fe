// Triton as a GPU device's compiler: the client of the compile helper (compile_helper.py, built into the
// library), one persistent process per process that compiles Triton, started before a worker confines
// itself. The helper serves each compile in a confined fork of itself (the candidate is model-written
// Python, run when it is imported) and hands back PTX and the launch Triton decided.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/script_process.hpp"
#include "kernelevolve/device.hpp"
#include "kernelevolve/sandbox.hpp"

namespace kernelevolve::triton {

// compile_helper.py's text (generated at build time from src/triton/compile_helper.py).
extern const char* const kHelperScript;

// Where the helper compiles for: Triton's GPUTarget.
struct Target {
  std::string backend = "cuda";  // "cuda", "hip"
  std::string arch = "90";       // compute capability as 90, or "gfx942"
  int warp_size = 32;
};

// What Triton made of a candidate.
struct Compiled {
  bool ok = false;
  bool refused = false;  // the candidate made system calls the sandbox denies (the error names them)
  std::string error;     // one line, when !ok
  std::string format;    // "ptx"
  std::string image;     // the PTX text
  std::string symbol;    // the kernel's name in it
  int num_warps = 4;
  std::uint64_t shared_bytes = 0;
  std::uint64_t global_scratch_bytes = 0, global_scratch_align = 1;
  std::uint64_t profile_scratch_bytes = 0, profile_scratch_align = 1;
  double compile_ms = 0;
};

// The sandbox mode the helper's forks confine themselves with (strict by default; a worker sets its own).
void set_sandbox_mode(SandboxMode mode);

class Compiler {
 public:
  // The process's compiler, started on first use: finds an interpreter that imports Triton ($KE_PYTHON,
  // python3 on PATH, /usr/bin/python3) and starts the helper. Throws Error(DeviceUnavailable) saying what
  // is missing (no Triton, too old, the confinement library not found); the failure is remembered, so
  // it is found and reported once.
  static std::shared_ptr<Compiler> shared();

  // Compiles `ks` (a Triton source; ks.defines are its constexprs, except num_warps and num_stages, which are
  // Triton's options). `divisible`: indices into ks.params of integer params that the caller launches the result
  // with only where each is a multiple of 16 (marked tt.divisibility=16, as Triton's launcher marks such a value;
  // empty assumes nothing). Appends the compiler's log to `log`. Never throws for a bad candidate; throws
  // Error(Internal) when the helper itself has ended.
  Compiled compile(const KernelSource& ks, const Target& target, std::string& log,
                   const std::vector<std::size_t>& divisible = {});

  const std::string& version() const { return version_; }
  const std::string& sandbox() const { return sandbox_; }  // what its forks get: "strict", "off ..."

  // Seconds a compile may take before the helper kills it.
  static constexpr double kCompileTimeoutS = 60;

 private:
  Compiler(const std::string& python, const std::string& confine_library, SandboxMode mode);
  std::mutex mutex_;  // one request at a time on the helper's pipes
  std::unique_ptr<ScriptProcess> helper_;
  std::string version_, sandbox_;
};

// The path of libkernelevolve_confine (beside the worker, the library or the program, or one folder up), or empty.
std::string find_confine_library();

}  // namespace kernelevolve::triton
