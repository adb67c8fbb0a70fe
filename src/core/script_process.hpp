// A Python program run as a child process, to its end or serving one JSON line per request: the PyTorch bridge,
// torch.compile's capture, the model optimizer and Triton's compile helper. Spawning, the line protocol, and what the
// child said on its standard error.
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "core/python_package.hpp"

namespace kernelevolve {

// What a child interpreter runs: a script's text, as `python -c` runs it (Triton's helper, a test's script), or a
// package of ours built into the library, as `python -m` runs it (python_package.hpp). Either converts implicitly.
class PythonProgram {
 public:
  PythonProgram(std::string script) : script_(std::move(script)) {}
  PythonProgram(const char* script) : script_(script) {}
  PythonProgram(const PythonPackage& package) : package_(&package) {}
  const std::string& script() const { return script_; }
  const PythonPackage* package() const { return package_; }

 private:
  std::string script_;
  const PythonPackage* package_ = nullptr;
};

// Starts `python -c program args...` (a package: its bootstrap): stdin and stdout are pipes, stderr an anonymous
// file (read back for messages, never blocking the child); `fds` become its descriptors 3, 4, ... (a -1 leaves one
// out). Throws Error(DeviceUnavailable) when the interpreter cannot be started.
struct ScriptChild {
  pid_t pid = -1;
  int to = -1, from = -1, err = -1;
};
// A script longer than this reaches the child through an inherited memory file, not as its `-c` argument; a
// package's files always do.
inline constexpr std::size_t kLongScript = 120 * 1024;
ScriptChild spawn_script(const std::string& python, const PythonProgram& program, const std::vector<std::string>& args,
                         const std::vector<int>& fds);

// The last `keep` bytes of what a child wrote to its stderr file, trailing blank lines cut.
std::string stderr_tail(int fd, std::size_t keep = 4000);

// Runs the script to its end and returns its standard output; throws Error(Internal) naming `what` with its
// error output when it crashes or exits non-zero, or is killed after `timeout_s`.
std::string run_script(const std::string& python, const PythonProgram& program, const std::vector<std::string>& args,
                       double timeout_s, const std::string& what);

// A program in serve mode: one request line in, one reply line out. It ends when this object does (end of
// input, then SIGKILL where the caller may still send signals). `what` names it in messages ("the PyTorch
// reference process").
class ScriptProcess {
 public:
  ScriptProcess(const std::string& python, const PythonProgram& program, const std::vector<std::string>& args,
                const std::vector<int>& fds, std::string what);
  virtual ~ScriptProcess();
  ScriptProcess(const ScriptProcess&) = delete;
  ScriptProcess& operator=(const ScriptProcess&) = delete;

  // The reply line to `request` (one line, no newline); throws Error(Internal) with the process's error
  // output when it has died or closed its output. With `timeout_s` > 0, a reply that takes longer throws
  // too, and the process is left unusable (alive() is false).
  std::string request(const std::string& line, double timeout_s = 0);
  // The first line it prints (its greeting), with the same timeout rule.
  std::string greeting(double timeout_s = 0);
  // The last of what the process wrote to its standard error.
  std::string error_tail() const;
  bool alive() const { return alive_; }

 private:
  std::string read_line(double timeout_s);
  [[noreturn]] void ended(const std::string& how) const;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1, err_ = -1;
  std::string pending_;
  std::string what_;
  bool alive_ = true;
};

}  // namespace kernelevolve
