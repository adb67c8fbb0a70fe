// The Python process behind a PyTorch problem: finding an interpreter that imports torch, running the
// bridge (the package ke_bridge, built into the library) once to describe a module, or keeping it running
// beside a worker as the reference. The process is trusted and unconfined; no candidate runs in it.
#pragma once
#include <string>
#include <vector>

#include "core/script_process.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve::pytorch {

// The bridge's package (generated at build time from src/pytorch/ke_bridge/).
extern const PythonPackage kBridgePackage;

// An interpreter that imports torch: $KE_PYTHON, else `python3` on PATH, else /usr/bin/python3 (Debian's
// python3-torch). Cached. Throws Error(DeviceUnavailable) naming what was tried when none does.
std::string find_python();

// The bridge's arguments that make `reference`'s problem of its module (SourceRef::dtype, backward,
// with_forward): ["--dtype", "bf16", "--backward", ...], or none for the module's own forward.
std::vector<std::string> variant_args(const SourceRef& reference);
// What the bridge serving `spec`'s reference is told: its variant and the run's precision policy.
std::vector<std::string> bridge_problem_args(const Spec& spec);

// Runs `python -m ke_bridge ARGS...` (python_package.hpp) to its end and returns what it printed; throws
// Error(Internal) with its error output when it crashes, or is killed after `timeout_s`.
std::string run_bridge(const std::vector<std::string>& args, double timeout_s);

// A bridge in `serve` mode (ScriptProcess): one JSON request line in, one JSON reply line out. `fds` (a
// memfd; a control socket) are handed to it as descriptors 3, 4, ...
class BridgeProcess : public ScriptProcess {
 public:
  BridgeProcess(const std::vector<std::string>& args, const std::vector<int>& fds)
      : ScriptProcess(find_python(), kBridgePackage, args, fds, "the PyTorch reference process") {}
};

}  // namespace kernelevolve::pytorch
