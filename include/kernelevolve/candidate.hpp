// Candidate: one kernel variant to evaluate: its source and its tunable values.
#pragma once
#include <string>

#include "kernelevolve/spec.hpp"

namespace kernelevolve {

struct Candidate {
  std::string source;
  Language language = Language::c;
  Bindings tunables;
  // Identity of a point in the search: same source and tunables measure the same.
  std::string key() const;
};

}  // namespace kernelevolve
