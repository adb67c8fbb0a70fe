// Whether a Python that imports torch is here, for the tests of PyTorch problems: they skip without one
// and say why (CI installs Debian's python3-torch; a machine without it still runs everything else).
#pragma once
#include "kernelevolve/error.hpp"
#include "pytorch/python.hpp"

namespace ke_test {

inline bool have_torch() {
  static const bool found = [] {
    try {
      kernelevolve::pytorch::find_python();
      return true;
    } catch (const kernelevolve::Error&) {
      return false;
    }
  }();
  return found;
}
inline const char* const kNoTorch = "no Python here imports torch (Debian: apt-get install python3-torch)";

}  // namespace ke_test
