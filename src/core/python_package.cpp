#include "core/python_package.hpp"

namespace kernelevolve {

namespace {

// Reads the payload (package_payload) from FD, then serves the package's modules from it ahead of every other finder,
// so that a folder of the same name on sys.path (the working directory's) never shadows the library's own. Each
// module's source is put in linecache, as a file's would be found, so that traceback.format_exc() (a reply's "trace")
// shows its lines.
constexpr const char* kBootstrap = R"KE_PY(import sys


def _kernelevolve_package(fd):
    import importlib.abc
    import importlib.util
    import linecache
    import os

    with os.fdopen(fd, "rb") as f:
        data = f.read()
    files, at = {}, 0
    while at < len(data):
        path_end = data.index(b"\n", at)
        size_end = data.index(b"\n", path_end + 1)
        end = size_end + 1 + int(data[path_end + 1:size_end])
        files[data[at:path_end].decode()] = data[size_end + 1:end].decode()
        at = end

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
        def path(self, fullname):
            stem = fullname.replace(".", "/")
            return stem + "/__init__.py" if stem + "/__init__.py" in files else stem + ".py"

        def find_spec(self, fullname, path=None, target=None):
            if self.path(fullname) not in files:
                return None
            spec = importlib.util.spec_from_loader(fullname, self, origin="<kernelevolve>/" + self.path(fullname),
                                                   is_package=self.is_package(fullname))
            spec.has_location = True
            return spec

        def is_package(self, fullname):
            return self.path(fullname).endswith("/__init__.py")

        def get_source(self, fullname):
            return files.get(self.path(fullname))

        def get_code(self, fullname):
            filename = "<kernelevolve>/" + self.path(fullname)
            source = files[self.path(fullname)]
            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            return compile(source, filename, "exec", dont_inherit=True)

    sys.meta_path.insert(0, Finder())


_kernelevolve_package(@FD@)
del _kernelevolve_package
__import__("runpy").run_module("@NAME@", run_name="__main__")
)KE_PY";

void substitute(std::string& text, const std::string& key, const std::string& value) {
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
}

}  // namespace

std::string package_payload(const PythonPackage& package) {
  std::string out;
  for (std::size_t i = 0; i < package.count; ++i) {
    const PythonFile& file = package.files[i];
    out.append(file.path).append("\n").append(std::to_string(file.text.size())).append("\n").append(file.text);
  }
  return out;
}

std::string package_bootstrap(const PythonPackage& package, int fd) {
  std::string text = kBootstrap;
  substitute(text, "@FD@", std::to_string(fd));
  substitute(text, "@NAME@", package.name);
  return text;
}

}  // namespace kernelevolve
