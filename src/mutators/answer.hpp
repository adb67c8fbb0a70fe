// Turning a model's (or a command's) answer into a child's source: a full source in a fenced code
// block, or SEARCH/REPLACE edits on the parent. Anything else is the mutator's recorded failure.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "kernelevolve/candidate.hpp"
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

// A model's answer made a child of `base` (the parent's candidate; for a first kernel, an empty source), as the
// model mutator makes one, whether the answer came live or from a round's results file (rounds.hpp): the
// child with the tunables it still reads and those it declares, and its note; or why the answer was not usable.
struct ModelChild {
  std::optional<Candidate> child;
  std::string note;
  std::string error;
};
ModelChild model_child(const Spec& spec, const Candidate& base, const std::string& answer);

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
