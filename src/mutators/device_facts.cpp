// The device as a model's prompt states it. The ceilings are the ones a kernel can reach: a CPU kernel runs
// on the calling thread, so one core's, not the machine's; a model told the machine's peak chases a number
// no single-threaded kernel can reach.
#include "mutators/device_facts.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "kernelevolve/ceiling_shift.hpp"
#include "kernelevolve/mutator.hpp"

namespace kernelevolve {

namespace {

const char* const kCachesLabel = "Caches: ";
const char* const kMovedLabel = "Ceilings moved: ";

std::string property(const DeviceInfo& d, const std::string& key) {
  const auto it = d.properties.find(key);
  return it == d.properties.end() ? "" : it->second;
}

std::string rate(double value, const char* unit) {
  std::ostringstream out;
  out.precision(value >= 100 ? 0 : 1);
  out << std::fixed << value << " " << unit;
  return out.str();
}

// Ceilings that moved since the previous measurement on this device (DeviceInfo's kCeilingsMovedProperty):
// read back by mutators::description_ceilings_moved for the prompt's noise paragraph.
std::string moved_line(const DeviceInfo& d) {
  const std::string moved = property(d, kCeilingsMovedProperty);
  return moved.empty() ? "" : kMovedLabel + moved + ": shares of these ceilings are rough.\n";
}

std::string cpu_facts(const DeviceInfo& d, Language language) {
  std::ostringstream out;
  out << d.name << " (" << d.id << ", target CPU " << property(d, "llvm_cpu") << ", " << d.compute_units
      << " cores in the machine).\n";
  out << "The kernel runs on ONE core, on the calling thread; it may not start threads. The ceilings of that core: ";
  if (d.peak_flops_per_s > 0) {
    // Nothing times an FMA loop on the CPU (devices/cpu/cpu_info.cpp computes it): said plainly, with how it is
    // made and how to read a share of it, since a model told "88% of peak" could not judge it (issue 53).
    out << "fp32 peak " << rate(kernel_peak_flops(d) / 1e9, "GFLOP/s")
        << " (nominal, computed, not measured: " << d.vector_bits / 32 << " fp32 lanes (" << d.vector_bits
        << "-bit vectors) x 2 flops an FMA x 2 FMA units x " << property(d, "max_ghz").substr(0, 4)
        << " GHz, computed from the nominal clock (the highest the kernel lists, "
        << "or 4 GHz assumed where it lists none, as in a VM); a sustained clock under load is lower, so a kernel at "
           "a share of it is at least that share of what the core can do)";
  }
  if (d.peak_bytes_per_s > 0)
    out << ", memory copy " << rate(d.peak_bytes_per_s / 1e9, "GB/s") << " (measured on one thread)";
  out << ".\n" << moved_line(d);
  std::string caches;
  for (const char* c : {"cache_l1d", "cache_l2", "cache_l3"}) {
    const std::string v = property(d, c);
    if (!v.empty()) caches += (caches.empty() ? "" : ", ") + std::string(c).substr(6) + " " + v;
  }
  // mutators::description_caches reads this line back to say which cache a workload's inputs fit.
  if (!caches.empty()) out << kCachesLabel << caches << ".\n";
  // mutators::note_features reads this line back to choose the knowledge base's notes (`requires:`).
  if (const std::string isa = property(d, "isa"); !isa.empty()) out << "Vector extensions enabled: " << isa << ".\n";
  if (const std::string cc = property(d, "compiler"); !cc.empty()) {
    out << "Compiler: " << cc << ", " << property(d, "flags") << "; the kernel is " << to_string(language) << ".\n";
  }
  if (const std::string inc = property(d, "callable"); !inc.empty()) out << "Headers and calls: " << inc << ".\n";
  if (const std::string stack = property(d, "stack_bytes"); !stack.empty()) {
    out << "Stack: " << std::stoll(stack) / (1 << 20)
        << " MiB on the calling thread (large arrays belong on the heap).\n";
  }
  return out.str();
}

std::string gpu_facts(const DeviceInfo& d, Language language) {
  std::ostringstream out;
  const bool nvidia = d.kind == "cuda";
  // "(cuda:0, sm_90): " is read back by mutators::note_features, like the CPU's extensions.
  out << d.name << " (" << d.id << ", " << property(d, "arch") << "): " << d.compute_units << (nvidia ? " SMs" : " CUs")
      << ", warp " << property(d, "warp_size") << ".\n";
  out << "Per " << (nvidia ? "SM" : "CU") << ": " << property(d, "registers_per_sm") << " registers, "
      << property(d, "shared_per_sm") << " shared memory, " << property(d, "max_threads_per_sm") << " threads, "
      << property(d, "max_blocks_per_sm") << " blocks. Per block: " << property(d, "max_threads_per_block")
      << " threads, " << property(d, "registers_per_block") << " registers, " << property(d, "shared_per_block")
      << " shared memory (" << property(d, "shared_per_block_optin") << " when the launch asks for more).\n";
  if (const std::string memory = property(d, "memory"); !memory.empty()) out << "Memory " << memory << ". ";
  if (const std::string l2 = property(d, "l2_cache"); !l2.empty()) out << "L2 " << l2 << ". ";
  out << "Ceilings: copy "
      << (d.peak_bytes_per_s > 0 ? rate(d.peak_bytes_per_s / 1e9, "GB/s") + " (measured)" : "unknown") << ", fp32 FMA "
      << (d.peak_flops_per_s > 0 ? rate(d.peak_flops_per_s / 1e12, "TFLOP/s") : "unknown");
  // The GPU's FMA ceiling is measured (devices/gpu/ceiling_cache.cpp writes fma_tflops); the datasheet's beside it.
  if (d.peak_flops_per_s > 0 && !property(d, "fma_tflops").empty()) {
    out << " (measured: an FMA loop on every SM";
    if (const double nominal = std::atof(property(d, "fp32_tflops_nominal").c_str()); nominal > 0)
      out << "; nominal " << rate(nominal, "TFLOP/s");
    out << ")";
  }
  // bf16 and fp16 work is diagnosed against these (compute_peak); on Hopper the mma.sync kernel measures only part
  // of wgmma's rate, so the larger of it and cuBLASLt's product is the ceiling.
  if (d.bf16_tensor_flops_per_s > 0) out << ", bf16 tensor cores " << rate(d.bf16_tensor_flops_per_s / 1e12, "TFLOP/s");
  if (d.fp16_tensor_flops_per_s > 0) out << ", fp16 tensor cores " << rate(d.fp16_tensor_flops_per_s / 1e12, "TFLOP/s");
  if (d.bf16_tensor_flops_per_s > 0 || d.fp16_tensor_flops_per_s > 0)
    out << " (dense, fp32 accumulation, measured: the larger of an mma.sync kernel and cuBLASLt's product)";
  out << ".\n" << moved_line(d);
  if (language == Language::triton) {
    out << "Compiler: Triton's, to PTX for " << property(d, "arch") << ", loaded by the CUDA driver "
        << property(d, "driver_api") << ".\n";
  } else if (nvidia) {
    out << "Compiler: NVRTC " << property(d, "nvrtc") << ", --gpu-architecture=" << property(d, "arch")
        << " --std=c++17 (NVRTC optimizes by default); the CUDA headers that NVRTC ships (cuda_fp16.h, "
           "cuda_bf16.h, ...) may be included, not the C++ standard library.\n";
  } else {
    out << "Compiler: hiprtc, -std=c++17 for " << property(d, "arch") << ".\n";
  }
  return out.str();
}

}  // namespace

std::string describe_device_for_model(const DeviceInfo& device, Language language, const WorkerOptions* limits) {
  std::string out = device.kind == "cpu" ? cpu_facts(device, language) : gpu_facts(device, language);
  if (limits) {
    std::ostringstream l;
    l << "Time limit per evaluation (compile, verification on fresh inputs and timing together): ";
    if (limits->timeout_s > 0) {
      l << limits->timeout_s << " s";
    } else {
      l << limits->timeout_factor << " x the seed's evaluation time (for a problem without a seed, the first kernel's, "
        << "which has " << limits->first_timeout_s << " s), at least " << limits->min_timeout_s << " s";
    }
    l << "; past it the evaluation is killed and the kernel is a timeout.\n";
    out += l.str();
  }
  return out;
}

namespace mutators {

std::vector<CacheSize> description_caches(const std::string& device_description) {
  std::vector<CacheSize> caches;
  std::istringstream in(device_description);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(kCachesLabel, 0) != 0) continue;
    // "l1d 48 KiB, l2 2 MiB, l3 32 MiB."
    std::istringstream items(line.substr(std::string(kCachesLabel).size()));
    for (std::string item; std::getline(items, item, ',');) {
      std::istringstream words(item);
      std::string name, unit;
      double value = 0;
      if (!(words >> name >> value >> unit) || value <= 0 || name.empty() || name[0] != 'l') continue;
      if (!unit.empty() && unit.back() == '.') unit.pop_back();
      const double scale = unit == "B"     ? 1
                           : unit == "KiB" ? 1024.0
                           : unit == "MiB" ? 1048576.0
                           : unit == "GiB" ? 1073741824.0
                                           : 0;
      if (scale == 0 || name.back() == 'i') continue;  // an instruction cache holds no data
      name[0] = 'L';
      caches.push_back({name, value * scale});
    }
    break;
  }
  return caches;
}

std::string description_ceilings_moved(const std::string& device_description) {
  std::istringstream in(device_description);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(kMovedLabel, 0) != 0) continue;
    std::string moved = line.substr(std::string(kMovedLabel).size());
    if (const std::size_t end = moved.find(": shares of these ceilings"); end != std::string::npos) moved.resize(end);
    return moved;
  }
  return "";
}

}  // namespace mutators

}  // namespace kernelevolve
