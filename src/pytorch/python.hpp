// The Python process behind a PyTorch problem: finding an interpreter that imports torch, running the
// bridge script (bridge.py, built into the library) once to describe a module, or keeping it running
// beside a worker as the reference. The process is trusted and unconfined; no candidate runs in it.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace kernelevolve::pytorch {

// bridge.py's text (generated at build time from src/pytorch/bridge.py).
extern const char* const kBridgeScript;

// An interpreter that imports torch: $KE_PYTHON, else `python3` on PATH, else /usr/bin/python3 (Debian's
// python3-torch). Cached. Throws Error(DeviceUnavailable) naming what was tried when none does.
std::string find_python();

// Runs `python -c bridge.py ARGS...` to its end and returns what it printed; throws Error(Internal)
// with its error output when it crashes, or is killed after `timeout_s`.
std::string run_bridge(const std::vector<std::string>& args, double timeout_s);

// A bridge in `serve` mode: one JSON request line in, one JSON reply line out. `shared_fd` (a memfd,
// or -1) is handed to it as descriptor 3. It ends when this object does (end of input, then SIGKILL).
class BridgeProcess {
 public:
  BridgeProcess(const std::vector<std::string>& args, int shared_fd);
  ~BridgeProcess();
  BridgeProcess(const BridgeProcess&) = delete;
  BridgeProcess& operator=(const BridgeProcess&) = delete;

  // The reply line to `request` (one line, no newline); throws Error(Internal) with the process's error
  // output when it has died or closed its output.
  std::string request(const std::string& line);
  // The first reply, printed once the module has loaded (or its failure).
  std::string greeting();
  // The last of what the process wrote to its standard error.
  std::string error_tail() const;

 private:
  std::string read_line();
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1, err_ = -1;
  std::string pending_;
};

}  // namespace kernelevolve::pytorch
