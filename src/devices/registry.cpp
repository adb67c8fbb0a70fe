// open_device and list_devices: maps a device id ("cpu", "cuda:N", "hip:N") to a backend.
// A backend is one row of kBackends; adding CUDA or HIP means filling in its open and list.
#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernelevolve/device.hpp"
#include "kernelevolve/error.hpp"

#ifdef KE_WITH_CPU_JIT
#include "devices/cpu/cpu_device.hpp"
#endif
#ifdef KE_WITH_CUDA
#include "devices/cuda/cuda_api.hpp"
#include "devices/cuda/cuda_device.hpp"
#endif
#ifdef KE_WITH_HIP
#include "devices/hip/hip_api.hpp"
#include "devices/hip/hip_device.hpp"
#endif

namespace kernelevolve {
namespace {

struct DeviceId {
  std::string kind;
  std::optional<int> index;  // "cuda:1" -> 1; absent for "cuda"
};

// "kind" or "kind:N"; nullopt when malformed.
std::optional<DeviceId> parse_device_id(const std::string& id) {
  const auto colon = id.find(':');
  DeviceId parsed;
  parsed.kind = id.substr(0, colon);
  if (parsed.kind.empty()) return std::nullopt;
  for (char c : parsed.kind)
    if (!std::islower(static_cast<unsigned char>(c))) return std::nullopt;
  if (colon != std::string::npos) {
    const std::string digits = id.substr(colon + 1);
    if (digits.empty() || digits.size() > 6) return std::nullopt;
    for (char c : digits)
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    parsed.index = std::stoi(digits);
  }
  return parsed;
}

struct Backend {
  const char* kind;
  bool takes_index;
  std::function<std::shared_ptr<Device>(const DeviceId&)> open;
  std::function<std::vector<DeviceInfo>()> list;  // cheap: nothing is measured
  std::function<BackendStatus()> status;          // cheap too: loads the libraries, opens no device
};

// The loaders' messages end with the error of every library name tried, a line each: the first line
// says what is missing, which is what a listing needs.
[[maybe_unused]] std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == ':' || line.back() == ' ')) line.pop_back();
  return line;
}

// A GPU backend's status from what its loader found: a driver or runtime (or not), its devices, and the
// run-time compiler (or why not).
[[maybe_unused]] BackendStatus gpu_status(const char* kind, bool runtime, bool compiler, int devices,
                                          const std::string& error, const char* no_gpu) {
  BackendStatus status{kind, false, runtime ? devices : 0, {}};
  if (!runtime) status.reason = first_line(error);
  else if (devices == 0) status.reason = no_gpu;
  else if (!compiler) status.reason = first_line(error);
  else status.available = true;
  return status;
}

[[maybe_unused]] BackendStatus not_built(const char* kind, const char* option) {
  return {kind, false, 0, std::string("not in this build (configure with ") + option + "=ON)"};
}

const std::vector<Backend>& backends() {
  static const std::vector<Backend> table = {
      {"cpu", false,
       [](const DeviceId&) -> std::shared_ptr<Device> {
#ifdef KE_WITH_CPU_JIT
         return make_cpu_device();
#else
         throw Error(ErrorCode::DeviceUnavailable,
                     "device 'cpu': this build has no CPU JIT (configure with KE_WITH_CPU_JIT=ON)");
#endif
       },
       []() -> std::vector<DeviceInfo> {
#ifdef KE_WITH_CPU_JIT
         return {describe_host_cpu(false)};
#else
         return {};
#endif
       },
       []() -> BackendStatus {
#ifdef KE_WITH_CPU_JIT
         return {"cpu", true, 1, {}};
#else
         return not_built("cpu", "KE_WITH_CPU_JIT");
#endif
       }},
      {"cuda", true,
       [](const DeviceId& id) -> std::shared_ptr<Device> {
#ifdef KE_WITH_CUDA
         return make_cuda_device(id.index.value_or(0));
#else
         throw Error(ErrorCode::DeviceUnavailable,
                     "device 'cuda" + (id.index ? ":" + std::to_string(*id.index) : std::string()) +
                         "': this build has no CUDA backend (configure with KE_WITH_CUDA=ON)");
#endif
       },
       []() -> std::vector<DeviceInfo> {
#ifdef KE_WITH_CUDA
         return list_cuda_devices();
#else
         return {};
#endif
       },
       []() -> BackendStatus {
#ifdef KE_WITH_CUDA
         const cuda::LoadResult& loaded = cuda::load();
         return gpu_status("cuda", loaded.driver, loaded.api, loaded.device_count, loaded.error,
                           "the CUDA driver finds no GPU");
#else
         return not_built("cuda", "KE_WITH_CUDA");
#endif
       }},
      {"hip", true,
       [](const DeviceId& id) -> std::shared_ptr<Device> {
#ifdef KE_WITH_HIP
         return make_hip_device(id.index.value_or(0));
#else
         throw Error(ErrorCode::DeviceUnavailable,
                     "device 'hip" + (id.index ? ":" + std::to_string(*id.index) : std::string()) +
                         "': this build has no HIP backend (configure with KE_WITH_HIP=ON)");
#endif
       },
       []() -> std::vector<DeviceInfo> {
#ifdef KE_WITH_HIP
         return list_hip_devices();
#else
         return {};
#endif
       },
       []() -> BackendStatus {
#ifdef KE_WITH_HIP
         const hip::LoadResult& loaded = hip::load();
         return gpu_status("hip", loaded.runtime, loaded.api, loaded.device_count, loaded.error,
                           "the HIP runtime finds no AMD GPU");
#else
         return not_built("hip", "KE_WITH_HIP");
#endif
       }},
  };
  return table;
}

}  // namespace

double kernel_peak_flops(const DeviceInfo& device) {
  if (device.kind == "cpu") return device.peak_flops_per_s / std::max(1, device.compute_units);
  return device.peak_flops_per_s;
}

std::shared_ptr<Device> open_device(const std::string& id) {
  const auto parsed = parse_device_id(id);
  if (parsed) {
    for (const auto& backend : backends()) {
      if (parsed->kind != backend.kind) continue;
      if (parsed->index && !backend.takes_index) break;
      return backend.open(*parsed);
    }
  }
  throw Error(ErrorCode::BadUsage, "unknown device '" + id + "': expected cpu, cuda, cuda:N, hip or hip:N");
}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> devices;
  for (const auto& backend : backends()) {
    auto found = backend.list();
    devices.insert(devices.end(), found.begin(), found.end());
  }
  return devices;
}

std::vector<BackendStatus> backend_status() {
  std::vector<BackendStatus> statuses;
  for (const auto& backend : backends()) statuses.push_back(backend.status());
  return statuses;
}

}  // namespace kernelevolve
