#include "sandbox/worker_sandbox.hpp"

#include <fcntl.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace kernelevolve::sandbox {

namespace {

// GPU workers: strict with the driver's allowances. The strict allow-list has not yet been run under
// every driver version; if one needs a call it lacks, the node says which (a denial is named), and
// this one line gives GPU workers the deny-list (`basic`) until the call is added.
constexpr SandboxMode kGpuMode = SandboxMode::strict;

// A worker's whole life in CPU seconds before SIGXCPU; it retires itself at half of it.
constexpr std::uint64_t kWorkerCpuSeconds = 3600;

// A GPU worker's NVRTC keeps a compile cache (CUDA_CACHE_PATH, else ~/.nv/ComputeCache): read after
// confinement, written only before it. Its denied writes, for a source not yet cached, are NVRTC's (it
// compiles on without caching), not the candidate's: no candidate code runs on a GPU worker's CPU.
std::string g_toolchain_cache;

std::string toolchain_cache_dir() {
  if (const char* p = std::getenv("CUDA_CACHE_PATH"); p && *p) return p;
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.nv/ComputeCache";
  return {};
}

// True for a denial (sandbox.cpp's text: `name("path"...)`) of a path inside the toolchain's cache, or of
// a mkdir of one of its ancestors (NVRTC makes the whole path, as mkdir -p does, before each entry).
bool in_toolchain_cache(const std::string& denial) {
  if (g_toolchain_cache.empty()) return false;
  const auto open = denial.find("(\"");
  if (open == std::string::npos) return false;
  const auto close = denial.find('"', open + 2);
  if (close == std::string::npos) return false;
  const std::string name = denial.substr(0, open);
  const std::string path = denial.substr(open + 2, close - open - 2);
  if (path == g_toolchain_cache || path.rfind(g_toolchain_cache + "/", 0) == 0) return true;
  return (name == "mkdir" || name == "mkdirat") && !path.empty() && g_toolchain_cache.rfind(path + "/", 0) == 0;
}

bool is_cpu(const std::string& device_id) { return device_id == "cpu" || device_id.rfind("cpu:", 0) == 0; }

SandboxAllowances allowances(const std::string& device_id, const std::string& timing_lock) {
  SandboxAllowances a;
  a.cpu_seconds = kWorkerCpuSeconds;
  if (!timing_lock.empty()) a.lock_files.push_back(timing_lock);
  // Under KE_WORKER_LOG the worker's stderr is the host's, perhaps a file: writing it must not kill it.
  if (const char* log = std::getenv("KE_WORKER_LOG"); log && *log) a.limit_file_size = false;
  if (is_cpu(device_id)) {
    // The machine's memory, at least 8 GiB: a kernel that reserves more fails its allocation instead of
    // pushing the host into swap. Sanitizers reserve terabytes of shadow: no limit under them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    a.address_space_bytes = 0;
#else
    struct sysinfo si {};
    const std::uint64_t ram = ::sysinfo(&si) == 0 ? static_cast<std::uint64_t>(si.totalram) * si.mem_unit : 0;
    a.address_space_bytes = std::max<std::uint64_t>(ram, 8ull << 30);
#endif
  } else {
    // GPU drivers reserve huge virtual ranges and open descriptors as they go.
    a.gpu_driver = true;
    a.open_files = 4096;
  }
  return a;
}

}  // namespace

SandboxMode worker_mode(SandboxMode requested, const std::string& device_id) {
  if (requested == SandboxMode::strict && !is_cpu(device_id)) return kGpuMode;
  return requested;
}

SandboxReport prepare_worker(SandboxMode mode, const std::string& device_id, const std::string& timing_lock) {
  SandboxReport r;
  r.mode = mode;
  if (mode == SandboxMode::off) return r;
  if (!timing_lock.empty()) {
    const int fd = ::open(timing_lock.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666);
    if (fd >= 0) ::close(fd);
  }
  if (!is_cpu(device_id)) {
    // NVRTC's cache stays on: with it off (CUDA_CACHE_DISABLE=1, tried on an H200), every GPU worker
    // compiled the verification kernels, the reference and the seed anew, and its start plus first
    // evaluation took 1079 ms against 259 ms (bench_isolation's BM_GpuWorkerFirstEvaluation).
    g_toolchain_cache = toolchain_cache_dir();
    // Namespaces are entered by CPU workers only: a GPU driver inside a user namespace has not been
    // checked on every driver version, and no model-written code runs on a GPU worker's CPU.
    return r;
  }
  return enter_sandbox_namespaces(mode, {timing_lock});
}

SandboxReport confine_worker(SandboxMode mode, const std::string& device_id, const std::string& timing_lock,
                             SandboxReport so_far) {
  return apply_sandbox(mode, allowances(device_id, timing_lock), std::move(so_far));
}

void begin_candidate() { (void)take_sandbox_denials(); }

bool judge_candidate(SandboxMode mode, Evaluation& e) {
  if (mode == SandboxMode::off) return false;
  std::vector<std::string> denied = take_sandbox_denials();
  if (!g_toolchain_cache.empty()) {
    const bool all_cache = std::all_of(denied.begin(), denied.end(), [](const std::string& d) {
      return in_toolchain_cache(d) || d.rfind("and ", 0) == 0;
    });
    // Beyond the named slots, the rest of a burst of cache writes is not named: drop it with them.
    if (all_cache) denied.clear();
  }
  if (!denied.empty()) {
    std::string calls;
    for (const auto& d : denied) calls += (calls.empty() ? "" : "; ") + d;
    e.status = Status::invalid;
    e.timings.clear();
    e.message = "the sandbox denied the kernel's system calls (they had no effect): " + calls;
    return true;
  }
  return sandbox_cpu_seconds_used() > kWorkerCpuSeconds / 2.0;
}

}  // namespace kernelevolve::sandbox
