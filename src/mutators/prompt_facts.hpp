// The figures of nodes and marks as a model's prompt gives them, each a piece of text: times with their spreads,
// outcomes with speedups over the seed and the marks to beat, diagnoses, confirmations, failures, what the search
// made of a node after it, a program's steps. The sections (prompt_sections.hpp) put them together.
#pragma once
#include <string>
#include <vector>

#include "kernelevolve/mutator.hpp"

namespace kernelevolve::mutators {

// "K=1, N=2", or "(none)".
std::string bindings_text(const Bindings& b);
// A workload's median with its spread (the median absolute deviation of its launches): "1000 ±7.5 us".
std::string time_text(const WorkloadTiming& t);
// Every workload's time, labelled w0, w1, ..., with its bound where the node has a diagnosis; "-" for none.
std::string times_text(const Node& n);
// A node's diagnosis, a line per workload and more for a GPU's resources and counters, under a legend when asked;
// empty for a node without one.
std::string diagnosis_lines(const Node& n, bool legend);
// A baseline as a person names it: "PyTorch eager", "torch.compile".
std::string mark_name(const Baseline& b);
// The marks to beat that the run measured, a section of the prompt; empty without marks.
std::string marks_section(const Spec& spec, const std::vector<Baseline>& marks);
// A node's status, speedups (over the seed and the marks) and times, or its message.
std::string outcome(const Node& n, const std::vector<Baseline>& marks = {});
// What the search made of a node after it: its descendants, the fastest with its tunables; empty for none.
std::string descendants_text(const SearchGraph& g, const Node& n, const std::vector<Baseline>& baselines);
// Whether a node was confirmed when measured again against the seed, or is a single measurement.
// The node's confirmation (MutationContext::confirm; once per node): null for the seed, a node that is not ok, or
// a run that does not measure again.
const Confirmation* confirmation_of(const MutationContext& ctx, const Node& n);
std::string confirmation_text(const Node& n, const Confirmation* c);
// What went wrong with a failed child, in the detail a model can act on (compiler log, worst mismatch).
std::string failure_detail(const Node& n);
// Evidence that times move between evaluations by more than the spread within one: the seed and the parent measured
// again in the parent's confirmation `c` (may be null) against their own evaluations, and nodes that run the same
// kernel (the same code and live tunables) measured more than once. Empty where the graph has none.
std::string between_evaluations_text(const MutationContext& ctx, const Node& parent, const Confirmation* c);
// The tunables a prompt shows for a candidate: its live ones (live_tunables), so that a tunable its source no
// longer reads or declares is neither shown nor taken for one the search varies.
Bindings shown_tunables(const Spec& spec, const Candidate& c);
// Each step's share of a program's time in one line; empty for a one-kernel node.
std::string steps_text(const Spec& spec, const Node& n);

}  // namespace kernelevolve::mutators
