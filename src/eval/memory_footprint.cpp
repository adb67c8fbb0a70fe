// What a run holds on its device (docs/devices.md, "What a run holds on the device"): a problem's footprint, the
// device's memory as the run takes it, whether a problem fits, how many workers fit beside it, and whether the
// workers of a device share one PyTorch reference. Declared in kernelevolve/fitness.hpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "kernelevolve/error.hpp"
#include "kernelevolve/fitness.hpp"

namespace kernelevolve {

namespace {

std::size_t property_bytes(const DeviceInfo& device, const std::string& name) {
  const auto it = device.properties.find(name);
  if (it == device.properties.end()) return 0;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || !(v > 0)) return 0;
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  const double scale = unit.rfind("TiB", 0) == 0   ? 1099511627776.0
                       : unit.rfind("GiB", 0) == 0 ? 1073741824.0
                       : unit.rfind("MiB", 0) == 0 ? 1048576.0
                       : unit.rfind("KiB", 0) == 0 ? 1024.0
                                                   : 1.0;
  return static_cast<std::size_t>(v * scale);
}

// "40G", "512M", "1073741824": binary suffixes.
std::size_t parse_memory_text(const char* text) {
  if (!text || !*text) return 0;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || !(v > 0)) return 0;
  switch (*end) {
    case 'T':
    case 't': return static_cast<std::size_t>(v * 1099511627776.0);
    case 'G':
    case 'g': return static_cast<std::size_t>(v * 1073741824.0);
    case 'M':
    case 'm': return static_cast<std::size_t>(v * 1048576.0);
    case 'K':
    case 'k': return static_cast<std::size_t>(v * 1024.0);
    default: return static_cast<std::size_t>(v);
  }
}

// A line of /proc/meminfo ("MemAvailable", "MemTotal") in bytes; 0 when it cannot be read.
std::size_t host_meminfo_bytes(const char* key) {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  const std::size_t key_length = std::strlen(key);
  std::size_t kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, key_length) == 0 && line[key_length] == ':' &&
        std::sscanf(line + key_length + 1, " %zu kB", &kib) == 1)
      break;
  }
  std::fclose(f);
  return kib * 1024;
}

// The host's memory that can be had now without swapping (MemAvailable), which is what a CPU run competes for.
std::size_t host_available_bytes() { return host_meminfo_bytes("MemAvailable"); }

std::string gb(std::size_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  else std::snprintf(buf, sizeof buf, "%zu bytes", bytes);
  return buf;
}

}  // namespace

ArenaSlot arena_slot(std::size_t bytes) {
  constexpr std::size_t kZone = 256;  // as a GPU allocation's red zones (gpu_device.cpp): they keep its alignment
  ArenaSlot slot;
  slot.front = kZone;
  slot.back = (std::max<std::size_t>(bytes, 1) + kZone - 1) / kZone * kZone - bytes + kZone;
  slot.reserved = slot.front + bytes + slot.back;
  return slot;
}

MemoryFootprint memory_footprint(const Spec& spec, const DeviceInfo& device, bool shared_reference) {
  MemoryFootprint f;
  std::size_t aligned_total = 0;  // of the workload with the most, for the arena
  for (const Bindings& w : spec.workloads) {
    std::size_t in = 0, out = 0, inout = 0, aligned = 0;
    for (const Param& p : spec.params) {
      if (!p.is_buffer()) continue;
      const std::size_t bytes =
          std::max<std::size_t>(1, static_cast<std::size_t>(spec.element_count(p, w))) * dtype_size(p.dtype);
      aligned += arena_slot(bytes).reserved;
      (p.role == Role::in ? in : p.role == Role::out ? out : inout) += bytes;
    }
    aligned_total = std::max(aligned_total, aligned);
    if (in + out + inout > f.problem_bytes) {
      f.problem_bytes = in + out + inout;
      f.input_bytes = in, f.output_bytes = out, f.inout_bytes = inout;
    }
  }
  const std::size_t B = f.problem_bytes;
  const bool gpu = device.kind != "cpu";
  if (spec.reference.pytorch) {
    // The arena holds the candidate's block and the reference's. On a GPU both are carved from it; on the
    // CPU a kernel's block is the CPU device's own (between guard pages), and the arena's second half, which
    // only a baseline's block uses, is given back after it. The bridge holds at most the module's weights
    // and the larger of get_inputs()' tensors and the module's outputs before their copies into the arena:
    // bounded by one copy of the problem.
    f.arena_bytes = 2 * aligned_total;
    f.worker_bytes = f.arena_bytes + B;
  } else {
    const std::string& ref_device = spec.reference.device.value_or("");
    const bool same_device = ref_device.empty() || ref_device == device.id || ref_device == device.kind;
    // The candidate's block, the reference's (or, where the reference runs on another device, a copy of its
    // outputs), and for each inout param a base its timed calls' inputs are rotated from.
    f.worker_bytes = B + (same_device ? B : f.output_bytes + f.inout_bytes) + f.inout_bytes;
  }
  if (gpu) {
    std::size_t l2 = property_bytes(device, "l2_cache_bytes");
    if (l2 == 0) l2 = property_bytes(device, "l2_cache");
    if (l2 == 0) l2 = 64u << 20;
    const std::size_t flush = std::max<std::size_t>(2 * l2, 8u << 20);
    // A worker's CUDA context and its L2 flush buffer; a PyTorch bridge's context (cuBLAS's and cuDNN's
    // workspaces included) and its timer's flush buffer.
    f.fixed_bytes = (512ull << 20) + flush + (spec.reference.pytorch ? (1ull << 30) + flush : 0);
    if (spec.reference.pytorch && shared_reference) {
      f.fixed_bytes -= (1ull << 30) + flush;
      f.shared_bytes = (1ull << 30) + flush;
    }
  }
  if (spec.reference.pytorch && shared_reference) {
    // The bridge's arena and tensors, once for all the workers; a worker maps the arena and, on a GPU, holds
    // its kernels' block itself (WorkloadRun::allocate: not in memory another process allocated).
    f.shared_bytes += f.worker_bytes;
    f.worker_bytes = gpu ? aligned_total : 0;
  }
  return f;
}

std::size_t device_memory_bytes(const DeviceInfo& device, std::size_t told) {
  if (told > 0) return told;
  if (const std::size_t env = parse_memory_text(std::getenv("KE_DEVICE_MEMORY")); env > 0) return env;
  if (device.kind == "cpu") return host_available_bytes();
  if (const std::size_t exact = property_bytes(device, "memory_bytes"); exact > 0) return exact;
  return property_bytes(device, "memory");  // "79.2 GiB": within 0.05 GiB
}

std::size_t device_capacity_bytes(const DeviceInfo& device, std::size_t told) {
  if (device.kind == "cpu" && told == 0 && !parse_memory_text(std::getenv("KE_DEVICE_MEMORY")))
    return host_meminfo_bytes("MemTotal");
  return device_memory_bytes(device, told);
}

std::size_t usable_memory_bytes(std::size_t device_bytes) { return device_bytes - device_bytes / 20; }

void check_fits(const Spec& spec, const DeviceInfo& device, std::size_t device_bytes) {
  if (device_bytes == 0) return;
  const MemoryFootprint f = memory_footprint(spec, device);
  const std::size_t usable = usable_memory_bytes(device_bytes);
  if (f.per_worker() <= usable) return;
  std::ostringstream msg;
  msg << (spec.path.empty() ? spec.name : spec.path) << " does not fit " << device.id << ": one worker needs "
      << gb(f.per_worker()) << " (the problem's tensors are " << gb(f.problem_bytes) << "; " << gb(f.worker_bytes)
      << " for its blocks" << (spec.reference.pytorch ? " and PyTorch's reference" : "") << ", " << gb(f.fixed_bytes)
      << " fixed), and the device has " << gb(device_bytes) << " (" << gb(usable)
      << " usable). A smaller workload fits, or a device with more memory.";
  throw Error(ErrorCode::DeviceUnavailable, msg.str());
}

int jobs_that_fit(const Spec& spec, const DeviceInfo& device, std::size_t device_bytes, int jobs, std::string* why,
                  bool shared_reference) {
  if (device_bytes == 0 || jobs <= 1) return std::max(1, jobs);
  const MemoryFootprint f = memory_footprint(spec, device, shared_reference);
  const std::size_t usable = usable_memory_bytes(device_bytes);
  const std::size_t room = usable > f.shared_bytes ? usable - f.shared_bytes : 0;
  const std::size_t by_device = f.per_worker() > 0 ? room / f.per_worker() : static_cast<std::size_t>(jobs);
  // Workers past the first overlap only compilation with the device's work (verification and timing hold the
  // device alone): worth their memory while the run stays within three times the problem's bytes, or a
  // quarter of the device for a small problem. A PyTorch problem's block (half its arena) is its bytes with their
  // red zones, which would otherwise tip a problem of exactly three blocks over.
  const std::size_t budget = std::max(3 * std::max(f.problem_bytes, f.arena_bytes / 2), device_bytes / 4);
  const std::size_t by_budget = f.worker_bytes > 0 ? budget / f.worker_bytes : static_cast<std::size_t>(jobs);
  const int fit =
      static_cast<int>(std::max<std::size_t>(1, std::min({static_cast<std::size_t>(jobs), by_device, by_budget})));
  if (fit < jobs && why) {
    std::ostringstream msg;
    msg << "--jobs lowered from " << jobs << " to " << fit << " on " << device.id << ": each worker holds "
        << gb(f.per_worker()) << " for this problem (" << gb(f.problem_bytes) << " of tensors)";
    if (f.shared_bytes) msg << " beside the " << gb(f.shared_bytes) << " of the reference they share";
    msg << ", and " << jobs << " would hold " << gb(f.for_jobs(static_cast<std::size_t>(jobs))) << ", over ";
    if (by_device < by_budget) {
      msg << "the " << gb(usable) << " usable of the device's " << gb(device_bytes);
    } else {
      msg << "the run's budget of " << gb(budget) << " (3 x the problem's bytes, or a quarter of the device)";
    }
    *why = msg.str();
  }
  return fit;
}

bool shares_reference(const Spec& spec, const std::string& device_id, std::optional<bool> asked) {
  if (!spec.reference.pytorch) return false;
  const bool cpu = device_id == "cpu" || device_id.rfind("cpu:", 0) == 0;
  if (!cpu && device_id.rfind("cuda", 0) != 0) return false;  // a PyTorch reference runs beside these two only
  if (!asked) {
    if (const char* env = std::getenv("KE_SHARE_REFERENCE"); env && (*env == '0' || *env == '1')) asked = *env == '1';
  }
  return asked.value_or(!cpu);
}

}  // namespace kernelevolve
