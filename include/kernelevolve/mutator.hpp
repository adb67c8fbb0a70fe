// Mutator: makes a child candidate from parent node(s): new tunable values (ParamMutator), a rewrite
// by a language model, the output of an external command, or the host's own.
#pragma once
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernelevolve/search_graph.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve {

struct MutationContext {
  const Spec& spec;
  const SearchGraph& graph;
  std::vector<NodeId> parents;
  std::mt19937_64& rng;
};

struct Mutation {
  std::optional<Candidate> child;  // none: the mutator failed (error says why) or has nothing new
  std::string note;                // a one-line account of the change
  std::string error;               // a failure of the mutator, recorded, not fatal to the search
  bool exhausted = false;          // the mutator has no unmeasured point left to offer
  std::string prompt;              // what a model or command was asked (kept on the node)
  std::string answer;              // and what it answered
  std::int64_t tokens = 0;         // model tokens spent on this mutation
};

class Mutator {
 public:
  virtual ~Mutator() = default;
  virtual std::string name() const = 0;
  virtual Mutation mutate(const MutationContext& context) = 0;
};

// Searches the spec's tunables under its constraints: mostly neighbour moves from the parent (one or
// two tunables stepped to an adjacent value), sometimes a random restart; never proposes a point the
// graph already holds.
class ParamMutator final : public Mutator {
 public:
  explicit ParamMutator(double restart_probability = 0.2) : restart_probability_(restart_probability) {}
  std::string name() const override { return "param"; }
  Mutation mutate(const MutationContext& context) override;

 private:
  double restart_probability_;
};

// Runs an external program (through /bin/sh) once per child: writes a JSON request on its standard
// input (the spec, the parent's source, tunables and results, its recent failed children, the best node)
// and reads its standard output as a model's answer: a full source in a fenced block, or SEARCH/REPLACE
// edits on the parent. A non-zero exit, an empty or unusable answer, or a run past the time limit is a
// recorded failure of the mutator. Lets any script or agent feed kernels into a run.
class CommandMutator final : public Mutator {
 public:
  explicit CommandMutator(std::string command, double timeout_s = 300);
  std::string name() const override { return "command"; }
  Mutation mutate(const MutationContext& context) override;

 private:
  std::string command_;
  double timeout_s_;
};

// The request a model or command gets about a parent: the same facts in the same JSON for every mutator.
std::string mutation_request_json(const MutationContext& context);

}  // namespace kernelevolve
