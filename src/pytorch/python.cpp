#include "pytorch/python.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "kernelevolve/error.hpp"

namespace kernelevolve::pytorch {

namespace {

// Whether `python` runs and has torch, found by its import machinery without importing it: the import costs
// seconds (3.5 s of Debian's 1.13 here; more with CUDA's libraries), once in every process that looks for the
// interpreter, before any work. A torch that is there but fails to import is named by the bridge that imports it.
constexpr const char* kHasTorch =
    "import importlib.util, sys\nsys.exit(0 if importlib.util.find_spec('torch') else 1)\n";

bool has_torch(const std::string& python) {
  try {
    ScriptChild s = spawn_script(python, kHasTorch, {}, {});
    ::close(s.to);
    ::close(s.from);
    if (s.err >= 0) ::close(s.err);
    int status = 0;
    while (::waitpid(s.pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

std::string find_python() {
  static std::mutex mutex;
  static std::string found;
  std::lock_guard lock(mutex);
  if (!found.empty()) return found;
  std::vector<std::string> tried;
  if (const char* env = std::getenv("KE_PYTHON"); env && *env) {
    if (has_torch(env)) return found = env;
    throw Error(
        ErrorCode::DeviceUnavailable,
        std::string("KE_PYTHON=") + env + " does not run, or does not import torch: a PyTorch problem needs it");
  }
  for (const char* candidate : {"python3", "/usr/bin/python3"}) {
    tried.push_back(candidate);
    if (has_torch(candidate)) return found = candidate;
  }
  throw Error(ErrorCode::DeviceUnavailable,
              "no Python that imports torch was found (tried python3 on PATH and /usr/bin/python3): a PyTorch problem "
              "runs its reference with PyTorch. Install it (Debian: apt-get install python3-torch), or name an "
              "interpreter with KE_PYTHON");
}

std::vector<std::string> bridge_problem_args(const Spec& spec) {
  std::vector<std::string> out = variant_args(spec.reference);
  out.insert(out.end(), {"--precision", to_string(spec.precision_in_effect().policy)});
  return out;
}

std::vector<std::string> variant_args(const SourceRef& reference) {
  std::vector<std::string> out;
  if (reference.dtype) out.insert(out.end(), {"--dtype", to_string(*reference.dtype)});
  if (reference.backward) out.emplace_back("--backward");
  if (reference.with_forward) out.emplace_back("--with-forward");
  return out;
}

std::string run_bridge(const std::vector<std::string>& args, double timeout_s) {
  return run_script(find_python(), kBridgePackage, args, timeout_s, "the PyTorch module");
}

}  // namespace kernelevolve::pytorch
