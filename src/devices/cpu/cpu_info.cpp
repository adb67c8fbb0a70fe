// The host CPU's description and roofline ceilings: model name, cores, SIMD width, caches, a
// measured copy bandwidth, a cache-resident copy rate (for the "impossible time" floor), and a
// datasheet-style FMA peak; and the previous measurement on this machine, to say when the ceilings moved.
//
// Why a file per device and not the store: the ceilings are measured where the device is opened (in each
// worker process, before any store is known), and what they are compared with is the machine's own
// history, whatever database or spec a run writes to. The file (ceiling_history_file) holds the last
// measurement: each one is compared with it under a lock, then replaces it. So a run's first worker compares
// with the previous run's last measurement, and a later worker of the same run with the one before it; the
// lock also keeps parallel workers from measuring at once, which would halve each other's bandwidth.
#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/TargetParser/X86TargetParser.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "devices/cpu/cpu_device.hpp"
#include "devices/machine_files.hpp"

namespace kernelevolve {
namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto begin = line.find_first_not_of(" \t", colon + 1);
        if (begin != std::string::npos) return line.substr(begin);
      }
    }
  }
  return llvm::sys::getHostCPUName().str();
}

// "48K", "2048K", "105M" -> bytes.
std::size_t parse_cache_size(const std::string& text) {
  if (text.empty()) return 0;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (end && (*end == 'K' || *end == 'k')) value <<= 10;
  else if (end && (*end == 'M' || *end == 'm')) value <<= 20;
  else if (end && (*end == 'G' || *end == 'g')) value <<= 30;
  return static_cast<std::size_t>(value);
}

struct CacheLevel {
  int level = 0;
  std::string type;
  std::size_t bytes = 0;
};

std::vector<CacheLevel> host_caches() {
  std::vector<CacheLevel> caches;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = read_first_line(dir + "level");
    if (level.empty()) break;
    caches.push_back(
        {std::atoi(level.c_str()), read_first_line(dir + "type"), parse_cache_size(read_first_line(dir + "size"))});
  }
  return caches;
}

int host_vector_bits(const llvm::StringMap<bool>& features) {
  auto has = [&](const char* name) {
    auto it = features.find(name);
    return it != features.end() && it->getValue();
  };
  if (has("avx512f")) return 512;
  if (has("avx2") || has("avx")) return 256;
  return 128;
}

double host_max_ghz() {
  const std::string khz = read_first_line("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  if (!khz.empty()) {
    const double value = std::atof(khz.c_str());
    if (value > 0) return value / 1e6;
  }
  return 4.0;  // no cpufreq (a VM): an upper guess, since the result is a ceiling
}

// Keeps the compiler from removing copies whose results are never read.
inline void escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

// Best copy rate (bytes read plus written per second) over `reps` copies of `bytes`.
double copy_rate(unsigned char* src, unsigned char* dst, std::size_t bytes, int reps) {
  using Clock = std::chrono::steady_clock;
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    std::memcpy(dst, src, bytes);
    escape(dst);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (seconds > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / seconds);
  }
  return best;
}

struct Buffers {
  unsigned char* src;
  unsigned char* dst;
  ~Buffers() {
    std::free(src);
    std::free(dst);
  }
};

// Main-memory copy bandwidth: each buffer at least twice the LLC (so the copy streams from DRAM),
// within 32..128 MiB; the first copy faults the pages in and is not counted.
double measure_memory_bandwidth(std::size_t llc) {
  const std::size_t bytes = std::clamp<std::size_t>(2 * llc, 32u << 20, 128u << 20);
  Buffers b{static_cast<unsigned char*>(std::aligned_alloc(64, bytes)),
            static_cast<unsigned char*>(std::aligned_alloc(64, bytes))};
  if (!b.src || !b.dst) return 0;
  std::memset(b.src, 1, bytes);
  std::memset(b.dst, 2, bytes);
  return copy_rate(b.src, b.dst, bytes, 3);
}

// A copy that stays in L1/L2; four times its rate bounds any honest memory traffic rate.
double measure_cache_copy_rate() {
  const std::size_t bytes = 64u << 10;
  Buffers b{static_cast<unsigned char*>(std::aligned_alloc(64, bytes)),
            static_cast<unsigned char*>(std::aligned_alloc(64, bytes))};
  if (!b.src || !b.dst) return 0;
  std::memset(b.src, 1, bytes);
  std::memset(b.dst, 2, bytes);
  return copy_rate(b.src, b.dst, bytes, 200);
}

std::string format_bytes(std::size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

namespace fs = std::filesystem;

struct MeasuredCeilings {
  double copy_bytes_per_s = 0;
  double fma_flops_per_s = 0;
};

std::optional<MeasuredCeilings> read_history(const fs::path& file) {
  std::ifstream in(file);
  MeasuredCeilings c;
  std::string key;
  for (double value = 0; in >> key >> value;) {
    if (key == "copy_bytes_per_s") c.copy_bytes_per_s = value;
    if (key == "fma_flops_per_s") c.fma_flops_per_s = value;
  }
  if (!(c.copy_bytes_per_s > 0) && !(c.fma_flops_per_s > 0)) return std::nullopt;
  return c;
}

void write_history(const fs::path& file, const MeasuredCeilings& c) {
  const fs::path tmp = file.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out.precision(17);
    out << "copy_bytes_per_s " << c.copy_bytes_per_s << "\nfma_flops_per_s " << c.fma_flops_per_s << "\n";
    if (!out) return;
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);  // atomic: a reader sees the old file or the new one
  if (ec) fs::remove(tmp, ec);
}

// "copy 8.4 GB/s, 49% under the 16.4 GB/s measured before on this device", or empty within kCeilingShift.
std::string moved_text(const char* name, double now, double before, double scale, const char* unit) {
  if (!(now > 0) || !(before > 0) || std::abs(now / before - 1) <= kCeilingShift) return "";
  char text[160];
  std::snprintf(text, sizeof text, "%s %.1f %s, %.0f%% %s the %.1f %s measured before on this device", name,
                now / scale, unit, std::abs(now / before - 1) * 100, now < before ? "under" : "over", before / scale,
                unit);
  return text;
}

}  // namespace

fs::path ceiling_history_file(const std::string& cpu_name) {
  const fs::path dir = machine_cache_dir();
  if (dir.empty()) return {};
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  return dir / ("cpu-" + file_stem(cpu_name) + "-" + file_stem(host) + ".ceilings");
}

std::string compare_with_previous_ceilings(DeviceInfo& info, const std::function<void(DeviceInfo&)>& measure) {
  const fs::path file = ceiling_history_file(info.name);
  int lock_fd = -1;
  if (!file.empty()) {
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    lock_fd = ::open((file.string() + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666);
    if (lock_fd >= 0) {
      while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  measure(info);
  std::string moved;
  if (!file.empty()) {
    if (const auto before = read_history(file)) {
      for (const std::string& m :
           {moved_text("copy", info.peak_bytes_per_s, before->copy_bytes_per_s, 1e9, "GB/s"),
            moved_text("fp32 FMA peak", info.peak_flops_per_s, before->fma_flops_per_s, 1e9, "GFLOP/s")}) {
        if (!m.empty()) moved += (moved.empty() ? "" : "; ") + m;
      }
    }
    write_history(file, {info.peak_bytes_per_s, info.peak_flops_per_s});
  }
  if (lock_fd >= 0) ::close(lock_fd);
  if (!moved.empty()) info.properties[kCeilingsMovedProperty] = moved;
  return moved;
}

std::string host_compile_cpu() {
  const std::string name = llvm::sys::getHostCPUName().str();
  const llvm::Triple triple(llvm::sys::getProcessTriple());
  if (triple.isX86()) {
    const bool only64 = triple.isArch64Bit();
    if (llvm::X86::parseArchX86(name, only64) != llvm::X86::CK_None) return name;
    return only64 ? "x86-64" : "i686";
  }
  return name;  // elsewhere "generic" is a name Clang accepts
}

std::size_t host_last_level_cache_bytes() {
  std::size_t llc = 0;
  int level = 0;
  for (const auto& c : host_caches()) {
    if (c.type == "Instruction") continue;
    if (c.level >= level) {
      level = c.level;
      llc = c.bytes;
    }
  }
  return llc;
}

DeviceInfo describe_host_cpu(bool measure) {
  DeviceInfo info;
  info.id = "cpu";
  info.kind = "cpu";
  info.name = cpu_model_name();
  info.compute_units = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  llvm::StringMap<bool> features;
  llvm::sys::getHostCPUFeatures(features);
  int enabled = 0;
  for (const auto& f : features) enabled += f.getValue() ? 1 : 0;
  info.vector_bits = host_vector_bits(features);

  const double ghz = host_max_ghz();
  // cores x fp32 lanes x 2 (an FMA is two flops) x 2 FMA units x clock: a ceiling, not a promise.
  info.peak_flops_per_s = info.compute_units * (info.vector_bits / 32.0) * 2.0 * 2.0 * ghz * 1e9;

  info.properties["llvm_cpu"] = host_compile_cpu();
  info.properties["cpu_features"] = std::to_string(enabled);
  info.properties["max_ghz"] = std::to_string(ghz);
  for (const auto& c : host_caches()) {
    std::string name = "cache_l" + std::to_string(c.level);
    if (c.type == "Data") name += "d";
    else if (c.type == "Instruction") name += "i";
    info.properties[name] = format_bytes(c.bytes);
  }

  if (measure) {
    compare_with_previous_ceilings(info, [](DeviceInfo& d) {
      d.peak_bytes_per_s = measure_memory_bandwidth(host_last_level_cache_bytes());
      d.floor_bytes_per_s = 4.0 * measure_cache_copy_rate();
      // The floor must stay above the peak whatever the measurements did.
      d.floor_bytes_per_s = std::max(d.floor_bytes_per_s, 4.0 * d.peak_bytes_per_s);
    });
  }
  return info;
}

}  // namespace kernelevolve
