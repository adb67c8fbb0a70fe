// Turning a model's (or a command's) answer into a child's source: a full source in a fenced code
// block, or SEARCH/REPLACE edits on the parent. Anything else is the mutator's recorded failure.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "kernelevolve/spec.hpp"
#include <vector>

namespace kernelevolve::mutators {

struct ParsedAnswer {
  bool ok = false;
  std::string source;  // the child's full source when ok
  std::string error;   // why the answer could not be used
  std::string form;    // "fenced" or "edits"
};

// Edits look like:
//   <<<<<<< SEARCH
//   exact lines of the parent
//   =======
//   their replacement
//   >>>>>>> REPLACE
// Each SEARCH text must occur in the parent. Without edits, the longest fenced block tagged c, cpp,
// c++, cuda, hip, python, triton (or untagged) is the new source. An answer that changes nothing is an error.
ParsedAnswer apply_answer(const std::string& answer, const std::string& parent_source);

// Tunables a kernel declares for itself, one per line: `// ke:tunable NAME v1 v2 ...` (`# ke:tunable` in
// a Triton source; the first value is its default). Malformed lines are ignored.
std::map<std::string, std::vector<std::int64_t>> declared_tunables(const std::string& source);

// Whether a candidate's tunable is live: its source reads it (a C macro outside its own `#ifndef`/`#define`
// default and outside comments; a Triton constexpr anywhere in the code), or the spec's launch rule, cost or
// constraints read it, or it is one of Triton's options (num_warps, num_stages). A dead tunable changes
// nothing about the kernel: the parameter search leaves it alone and a rewrite drops it.
bool tunable_is_live(const Spec& spec, const std::string& source, Language language, const std::string& name);

// The candidate's tunables, its dead ones dropped, the ones its source declares (`ke:tunable`) added with their
// first value: what a rewrite's child keeps.
Bindings live_tunables(const Spec& spec, const std::string& source, Language language, const Bindings& from);

// The last `max` characters of a log, behind `marker` when cut: what a prompt or an error line keeps.
inline std::string tail(const std::string& text, std::size_t max, const std::string& marker = "[...]\n") {
  return text.size() <= max ? text : marker + text.substr(text.size() - max);
}

}  // namespace kernelevolve::mutators
