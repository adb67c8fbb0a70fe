// Turning a model's (or a command's) answer into a child's source: a full source in a fenced code
// block, or SEARCH/REPLACE edits on the parent. Anything else is the mutator's recorded failure.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

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

// An answer that holds several children, each under a heading line `### Child N` (kChildHeading; `#` to `####`,
// any case), split into its parts, in order; an answer without such headings is one part, the whole answer.
std::vector<std::string> answer_parts(const std::string& answer);

// Each part of an answer (answer_parts) made a child of `base` on its own, as model_child makes one: a part that
// cannot be used fails alone, the others stand. A part's note says which of how many it was.
std::vector<ModelChild> model_children(const Spec& spec, const Candidate& base, const std::string& answer);

// The heading a model is told to put above each child when a prompt asks for several (LlmOptions::children).
inline constexpr const char* kChildHeading = "### Child ";

// live_tunables' rule as a model's prompt states it.
inline constexpr const char* kTunableRule =
    "A new kernel is evaluated first at the parent's value of each tunable it still uses, where its declaration (if "
    "it declares the tunable) lists that value; a tunable it declares anew, or whose parent value it no longer "
    "lists, starts at the first value declared. The parameter search then explores the other values.";

// The start of an answer that could not be used, quoted for the next prompt: its first 300 characters on one line.
inline std::string answer_excerpt(const std::string& answer) {
  std::string head = answer.substr(0, 300);
  for (char& c : head)
    if (c == '\n' || c == '\r') c = ' ';
  return "\"" + head + (answer.size() > 300 ? " [...]" : "") + "\"";
}

// The last `max` characters of a log, behind `marker` when cut: what a prompt or an error line keeps.
inline std::string tail(const std::string& text, std::size_t max, const std::string& marker = "[...]\n") {
  return text.size() <= max ? text : marker + text.substr(text.size() - max);
}

}  // namespace kernelevolve::mutators
