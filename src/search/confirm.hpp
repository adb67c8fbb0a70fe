// The end of a run: the best node re-timed against the seed, interleaved, on fresh inputs, and verified
// again (DESIGN.md, "the best is confirmed"). A search figure that the confirmation does not bear out
// (a noise winner, a kernel that gamed its timing) is not reported.
#pragma once
#include <cstdint>

#include "kernelevolve/evolver.hpp"

namespace kernelevolve {

// Evaluates `node` and `seed` alternately, `rounds` times each, on the device class `class_index` of
// `evaluator` (FitnessEvaluator::measure_again), with input seeds drawn from `input_seed_base`.
Confirmation confirm_node(FitnessEvaluator& evaluator, std::size_t class_index, const Node& node, const Node& seed,
                          int rounds, double noise, std::uint64_t input_seed_base);

}  // namespace kernelevolve
