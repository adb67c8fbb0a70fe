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
    struct sysinfo si{};
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
    // The driver's compute cache would be written after setup (tried on an H200: with it on, honest
    // kernels failed confined), and a kernel could poison it through the driver's open descriptors. Off,
    // it costs each GPU worker's start about 190 ms on an H200 (bench_isolation's BM_GpuWorkerStart:
    // 426 ms strict against 234 ms off), which the driver spends compiling what it would have read.
    ::setenv("CUDA_CACHE_DISABLE", "1", 1);
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
  const std::vector<std::string> denied = take_sandbox_denials();
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
