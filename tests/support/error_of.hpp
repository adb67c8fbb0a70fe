// What a call throws as kernelevolve::Error, as text; empty when it throws nothing.
#pragma once
#include <functional>
#include <string>

#include "kernelevolve/error.hpp"

namespace ke_test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kernelevolve::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace ke_test
