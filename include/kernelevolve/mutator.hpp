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

}  // namespace kernelevolve
