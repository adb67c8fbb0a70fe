// The tunables of a kernel's source: those it declares for itself (`// ke:tunable NAME v1 v2 ...`) and those it
// still reads. The parameter search, a rewrite's child (command and model mutators), the evolver's seed and a warm
// start all ask which of a candidate's tunables are live.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernelevolve/spec.hpp"

namespace kernelevolve {

// Tunables a kernel declares for itself, one per line: `// ke:tunable NAME v1 v2 ...` (`# ke:tunable` in
// a Triton source; the first value is its default). Malformed lines are ignored.
std::map<std::string, std::vector<std::int64_t>> declared_tunables(const std::string& source);

// Whether a candidate's tunable is live: its source reads it (a C macro outside its own `#ifndef`/`#define`
// default and outside comments, and not fixed by an unguarded `#define NAME` or an `#undef NAME`, which a -D
// cannot change; a Triton constexpr anywhere in the code), or the spec's launch rule, cost or
// constraints read it, or it is one of Triton's options (num_warps, num_stages). A dead tunable changes
// nothing about the kernel: the parameter search leaves it alone and a rewrite drops it.
bool tunable_is_live(const Spec& spec, const std::string& source, Language language, const std::string& name);

// The candidate's tunables, its dead ones dropped (and those neither the spec nor the source declares: with its
// declaration gone, a tunable has no values left to search): what a rewrite's child is first evaluated at (the rule
// that mutators/answer.hpp's kTunableRule states to a model). A tunable it still reads keeps the parent's value, and so
// does one its source declares (`ke:tunable NAME v1 v2 ...`) where the declaration lists that value; a declared one the
// parent lacks, or whose value the declaration no longer lists, starts at the first value declared.
Bindings live_tunables(const Spec& spec, const std::string& source, Language language, const Bindings& from);

}  // namespace kernelevolve
