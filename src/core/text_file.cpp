#include "core/text_file.hpp"

#include <cerrno>
#include <fstream>
#include <sstream>
#include <system_error>

namespace kernelevolve {

namespace fs = std::filesystem;

bool read_text(const fs::path& path, std::string& out, std::string& problem) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    problem = "is a directory";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    problem = std::generic_category().message(errno ? errno : ENOENT);
    return false;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    problem = "read error";
    return false;
  }
  out = buffer.str();
  return true;
}

}  // namespace kernelevolve
