// Turning a model's (or a command's) answer into a child's source: a full source in a fenced code
// block, or SEARCH/REPLACE edits on the parent. Anything else is the mutator's recorded failure.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <vector>
#include "kernelevolve/spec.hpp"

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

// The candidate's tunables, its dead ones dropped: what a rewrite's child is first evaluated at (the rule the
// prompt states, kTunableRule). A tunable it still reads keeps the parent's value, and so does one its source
// declares (`ke:tunable NAME v1 v2 ...`) where the declaration lists that value; a declared one the parent
// lacks, or whose value the declaration no longer lists, starts at the first value declared.
Bindings live_tunables(const Spec& spec, const std::string& source, Language language, const Bindings& from);
// live_tunables' rule as a model's prompt states it.
inline constexpr const char* kTunableRule =
    "A new kernel is evaluated first at the parent's value of each tunable it still uses, where its declaration (if "
    "it declares the tunable) lists that value; a tunable it declares anew, or whose parent value it no longer "
    "lists, starts at the first value declared. The parameter search then explores the other values.";

// The last `max` characters of a log, behind `marker` when cut: what a prompt or an error line keeps.
inline std::string tail(const std::string& text, std::size_t max, const std::string& marker = "[...]\n") {
  return text.size() <= max ? text : marker + text.substr(text.size() - max);
}

}  // namespace kernelevolve::mutators
