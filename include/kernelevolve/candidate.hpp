// Candidate: one kernel variant to evaluate: its source and its tunable values.
#pragma once
#include <string>

#include "kernelevolve/spec.hpp"

namespace kernelevolve {

struct Candidate {
  std::string source;
  Language language = Language::c;
  Bindings tunables;
  // Identity of a point as stored: same source and tunables measure the same.
  std::string key() const;
  // Identity of a point as the search dedups it: the same code (comments, blank lines and runs of blanks
  // aside) with the same tunables compiles to the same kernel, so it is never measured twice.
  std::string code_key() const;
};

// The source without its comments (C's // and /* */, Python's # for Triton and PyTorch); strings are not parsed.
std::string without_comments(const std::string& source, Language language);

}  // namespace kernelevolve
