#include "core/shipped_file.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

namespace kernelevolve {

namespace fs = std::filesystem;

ShippedFile find_shipped_file(const std::string& name, const std::vector<std::string>& folders, int mode) {
  std::vector<fs::path> places;
  auto look_beside = [&](const fs::path& file) {
    for (const std::string& folder : folders) {
      const fs::path p = (file.parent_path() / folder / name).lexically_normal();
      if (std::find(places.begin(), places.end(), p) == places.end()) places.push_back(p);
    }
  };
  // Beside the library that holds this code; and beside the program, since where this code is linked
  // into the executable itself dladdr may name it only as it was started (argv[0]), or not at all.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&find_shipped_file), &info) && info.dli_fname && *info.dli_fname) {
    look_beside(fs::absolute(info.dli_fname));
  }
  std::error_code ec;
  if (const fs::path exe = fs::read_symlink("/proc/self/exe", ec); !ec) look_beside(exe);
  ShippedFile out;
  for (const auto& p : places) {
    out.looked.push_back(p.string());
    if (::access(p.c_str(), mode) == 0) {
      out.path = p.string();
      break;
    }
  }
  return out;
}

}  // namespace kernelevolve
