// Reading a whole text file, saying why it could not be read: the spec loader, the PyTorch problem, and
// the worker's profile request.
#pragma once
#include <filesystem>
#include <string>

namespace kernelevolve {

// The file's bytes into `out`; false with `problem` set ("is a directory", the system's error) when it
// cannot be read.
bool read_text(const std::filesystem::path& path, std::string& out, std::string& problem);

}  // namespace kernelevolve
