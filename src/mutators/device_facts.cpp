// The device as a model's prompt states it. The ceilings are the ones a kernel can reach: a CPU kernel runs
// on the calling thread, so one core's, not the machine's; a model told the machine's peak chases a number
// no single-threaded kernel can reach.
#include <cmath>
#include <sstream>

#include "kernelevolve/mutator.hpp"

namespace kernelevolve {

namespace {

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

std::string cpu_facts(const DeviceInfo& d, Language language) {
  std::ostringstream out;
  out << d.name << " (" << d.id << ", target CPU " << property(d, "llvm_cpu") << ", " << d.compute_units
      << " cores in the machine).\n";
  out << "The kernel runs on ONE core, on the calling thread; it may not start threads. The ceilings of that core: ";
  if (d.peak_flops_per_s > 0) {
    out << "fp32 peak " << rate(kernel_peak_flops(d) / 1e9, "GFLOP/s") << " (" << d.vector_bits
        << "-bit vectors, 2 FMA units, " << property(d, "max_ghz").substr(0, 4) << " GHz)";
  }
  if (d.peak_bytes_per_s > 0) out << ", memory copy " << rate(d.peak_bytes_per_s / 1e9, "GB/s") << " (measured on one thread)";
  out << ".\n";
  std::string caches;
  for (const char* c : {"cache_l1d", "cache_l2", "cache_l3"}) {
    const std::string v = property(d, c);
    if (!v.empty()) caches += (caches.empty() ? "" : ", ") + std::string(c).substr(6) + " " + v;
  }
  if (!caches.empty()) out << "Caches: " << caches << ".\n";
  // mutators::note_features reads this line back to choose the knowledge base's notes (`requires:`).
  if (const std::string isa = property(d, "isa"); !isa.empty()) out << "Vector extensions enabled: " << isa << ".\n";
  if (const std::string cc = property(d, "compiler"); !cc.empty()) {
    out << "Compiler: " << cc << ", " << property(d, "flags") << "; the kernel is " << to_string(language) << ".\n";
  }
  if (const std::string inc = property(d, "callable"); !inc.empty()) out << "Headers and calls: " << inc << ".\n";
  if (const std::string stack = property(d, "stack_bytes"); !stack.empty()) {
    out << "Stack: " << std::stoll(stack) / (1 << 20) << " MiB on the calling thread (large arrays belong on the heap).\n";
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
  out << "Ceilings: copy " << (d.peak_bytes_per_s > 0 ? rate(d.peak_bytes_per_s / 1e9, "GB/s") + " (measured)" : "unknown")
      << ", fp32 FMA " << (d.peak_flops_per_s > 0 ? rate(d.peak_flops_per_s / 1e12, "TFLOP/s") : "unknown") << ".\n";
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
      l << limits->timeout_factor << " x the seed's evaluation time, at least " << limits->min_timeout_s << " s";
    }
    l << "; past it the evaluation is killed and the kernel is a timeout.\n";
    out += l.str();
  }
  return out;
}

}  // namespace kernelevolve
