// Where KernelEvolve keeps what it measured of a machine (a GPU's ceilings, the CPU's last measurement),
// and the file names it gives those files.
#pragma once
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace kernelevolve {

// $KE_CACHE_DIR, else $XDG_CACHE_HOME/kernelevolve, else ~/.cache/kernelevolve; empty when none is set.
inline std::filesystem::path machine_cache_dir() {
  if (const char* d = std::getenv("KE_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::filesystem::path(d) / "kernelevolve";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "kernelevolve";
  return {};
}

// A file name from a key (a GPU's UUID or bus id, a CPU's model, a host's name): letters, digits and '-'
// kept, anything else '_'.
inline std::string file_stem(const std::string& key) {
  std::string out;
  for (char c : key) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  return out;
}

}  // namespace kernelevolve
