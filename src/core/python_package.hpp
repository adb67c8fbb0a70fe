// A Python package of ours built into the library (the PyTorch bridge, torch.compile's capture, the model
// optimizer), and how a child interpreter runs it without a file of ours on disk: the package's files go to the
// child through an inherited memory file, a short `-c` bootstrap reads them all at once, puts a finder for them
// first on sys.meta_path, and runs the package as `python -m NAME` would. Every import is then served from memory:
// after a confinement that forbids opening files, or with no source tree in sight.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace kernelevolve {

// One file of a package, by its path from the package's parent folder ("ke_bridge/server.py").
struct PythonFile {
  std::string_view path;
  std::string_view text;
};

// A package: its import name and its files, generated at build time by cmake/embed_python.cmake from the package's
// folder (src/CMakeLists.txt, ke_embed_python).
struct PythonPackage {
  const char* name;
  const PythonFile* files;
  std::size_t count;
};

// The package's files as the bootstrap reads them: for each, its path, a newline, its length in bytes in decimal, a
// newline, and its text.
std::string package_payload(const PythonPackage& package);

// The `-c` text that reads the payload from descriptor `fd` (and closes it), makes the package importable, and runs
// `package.__main__` as `python -m` runs it, with sys.argv as `-c` leaves it. A module's file name in a traceback is
// "<kernelevolve>/PATH", its source lines shown.
std::string package_bootstrap(const PythonPackage& package, int fd);

}  // namespace kernelevolve
