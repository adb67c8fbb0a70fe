// Warm start across problems: the best kernels of the same operator, from other problems' runs in stores
// (other shapes, other devices), to seed a new run with (EvolverOptions::warm_start, `run --warm-start DB`).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "kernelevolve/evolver.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve {

// Why a stored problem is the same operator as `spec`: "name" (the same spec name), "family" (the same
// non-empty `family`), "signature" (the same params, by name, role and dtype, in the same language), or
// empty when it is none of these. A stored kernel is usable here only if its problem also has this spec's
// language, entry and argument list (the argument types in order), whatever the match.
std::string warm_match(const Spec& spec, const Spec& stored);

// The best kernel of each stored run whose problem matches `spec` (warm_match) and whose best is correct,
// best first by its speedup there, at most `max_kernels` of them, each source once (the same source at other
// tunables is the parameter search's to find), and never this spec's seed itself. Its tunables keep only those this
// spec (or its source's `ke:tunable` lines) declares and its source reads; one this spec declares that it reads but has
// no value for gets the spec's first. Stores are opened read-only. Throws Error(BadUsage) naming the file for a store
// that does not exist or is not a KernelEvolve database; a stored run whose spec cannot be read is skipped.
std::vector<WarmKernel> find_warm_kernels(const std::vector<std::string>& stores, const Spec& spec,
                                          std::size_t max_kernels = 3);

}  // namespace kernelevolve
