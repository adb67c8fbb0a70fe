// The per-device file of measured ceilings; see ceiling_cache.hpp.
#include "devices/gpu/ceiling_cache.hpp"
#include "devices/machine_files.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <simdjson.h>
#include <sstream>
#include <utility>

namespace kernelevolve::gpu {
namespace {

namespace fs = std::filesystem;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

bool read_cache(const fs::path& file, const std::string& key, const std::string& name, const std::string& driver,
                Ceilings& c) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.load(file.string()).get(doc) != simdjson::SUCCESS) return false;
  std::string_view k, n, d;
  Ceilings got;
  if (doc["key"].get(k) != simdjson::SUCCESS || k != key || doc["name"].get(n) != simdjson::SUCCESS || n != name ||
      doc["driver"].get(d) != simdjson::SUCCESS || d != driver ||
      doc["copy_bytes_per_s"].get(got.copy_bytes_per_s) != simdjson::SUCCESS ||
      doc["fma_flops_per_s"].get(got.fma_flops_per_s) != simdjson::SUCCESS ||
      doc["l2_bytes_per_s"].get(got.l2_bytes_per_s) != simdjson::SUCCESS ||
      // Absent from a file written before they were measured: such a file is measured again. A 0 is a
      // measurement that found none.
      doc["bf16_tensor_flops_per_s"].get(got.bf16_tensor_flops_per_s) != simdjson::SUCCESS ||
      doc["fp16_tensor_flops_per_s"].get(got.fp16_tensor_flops_per_s) != simdjson::SUCCESS) {
    return false;
  }
  if (!(got.copy_bytes_per_s > 0) || !(got.fma_flops_per_s > 0)) return false;
  if (!(got.bf16_tensor_flops_per_s >= 0) || !(got.fp16_tensor_flops_per_s >= 0)) return false;
  std::string_view tensor_how;
  if (doc["tensor_how"].get(tensor_how) == simdjson::SUCCESS) got.tensor_how = std::string(tensor_how);
  c = got;
  return true;
}

void write_cache(const fs::path& file, const std::string& key, const std::string& name, const std::string& driver,
                 const Ceilings& c) {
  std::ostringstream json;
  json.precision(17);
  json << "{\"key\": " << json_string(key) << ", \"name\": " << json_string(name)
       << ", \"driver\": " << json_string(driver) << ", \"copy_bytes_per_s\": " << c.copy_bytes_per_s
       << ", \"fma_flops_per_s\": " << c.fma_flops_per_s << ", \"l2_bytes_per_s\": " << c.l2_bytes_per_s
       << ", \"bf16_tensor_flops_per_s\": " << c.bf16_tensor_flops_per_s
       << ", \"fp16_tensor_flops_per_s\": " << c.fp16_tensor_flops_per_s
       << ", \"tensor_how\": " << json_string(c.tensor_how) << "}\n";
  const fs::path tmp = file.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << json.str();
    if (!out) return;
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);  // atomic: a reader sees the old file or the new one
  if (ec) fs::remove(tmp, ec);
}

}  // namespace

Ceilings load_or_measure(const std::string& key, const std::string& name, const std::string& driver,
                         const std::function<Ceilings()>& measure,
                         const std::function<bool(const Ceilings&)>& plausible, std::string& how) {
  const fs::path dir = machine_cache_dir();
  const std::string stem = file_stem(key);
  const fs::path file = dir.empty() ? fs::path() : dir / ((stem.empty() ? "gpu" : stem) + ".json");
  const char* remeasure = std::getenv("KE_REMEASURE");
  const bool reuse = !(remeasure && *remeasure && std::string(remeasure) != "0");
  int lock_fd = -1;
  if (!file.empty()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    lock_fd = ::open((file.string() + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666);
    if (lock_fd >= 0) {
      while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  Ceilings c;
  if (!file.empty() && reuse && read_cache(file, key, name, driver, c)) {
    how = "cached in " + file.string();
  } else {
    c = measure();
    how = "measured now";
    if (!file.empty() && plausible(c)) write_cache(file, key, name, driver, c);
  }
  if (lock_fd >= 0) ::close(lock_fd);
  return c;
}

void apply(DeviceInfo& info, const Ceilings& c, const std::string& how) {
  info.peak_bytes_per_s = c.copy_bytes_per_s;
  info.peak_flops_per_s = c.fma_flops_per_s;
  // Only used to call a time impossible: no honest kernel moves its counted bytes faster than this.
  info.floor_bytes_per_s = std::max(3.0 * c.copy_bytes_per_s, c.l2_bytes_per_s);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", c.copy_bytes_per_s / 1e9);
  info.properties["copy_gbps"] = buf;
  std::snprintf(buf, sizeof buf, "%.0f", c.l2_bytes_per_s / 1e9);
  info.properties["l2_copy_gbps"] = buf;
  std::snprintf(buf, sizeof buf, "%.1f", c.fma_flops_per_s / 1e12);
  info.properties["fma_tflops"] = buf;
  info.bf16_tensor_flops_per_s = c.bf16_tensor_flops_per_s;
  info.fp16_tensor_flops_per_s = c.fp16_tensor_flops_per_s;
  for (const auto& [name, rate] : {std::pair{"bf16_tensor_tflops", c.bf16_tensor_flops_per_s},
                                   {"fp16_tensor_tflops", c.fp16_tensor_flops_per_s}}) {
    if (!(rate > 0)) continue;  // unknown: absent, never a 0 read as a measurement
    std::snprintf(buf, sizeof buf, "%.0f", rate / 1e12);
    info.properties[name] = buf;
  }
  if (!c.tensor_how.empty()) info.properties["tensor_ceilings"] = c.tensor_how;
  info.properties["ceilings"] = how;
}

}  // namespace kernelevolve::gpu
