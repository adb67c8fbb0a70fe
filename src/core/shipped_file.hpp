// Finding a file the library ships beside itself (the worker executable, the confinement library): beside
// the library or program that holds this code, in folders relative to it.
#pragma once
#include <string>
#include <vector>

namespace kernelevolve {

struct ShippedFile {
  std::string path;                 // the first place that has it, or empty
  std::vector<std::string> looked;  // every place tried, in order, for a message
};

// Looks for `name` in each of `folders` (relative: ".", "..", "../libexec/kernelevolve") taken from the folder of
// the library that holds this code, then from the running program's; the first one `access(mode)` allows wins.
ShippedFile find_shipped_file(const std::string& name, const std::vector<std::string>& folders, int mode);

}  // namespace kernelevolve
