// SelectionPolicy: picks the parent(s) of the next mutation from the search graph.
#pragma once
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernelevolve/search_graph.hpp"

namespace kernelevolve {

class SelectionPolicy {
 public:
  virtual ~SelectionPolicy() = default;
  virtual std::string name() const = 0;
  // Returns one or more parents (ok nodes where there are any). The graph is never empty here.
  virtual std::vector<NodeId> select(const SearchGraph& graph, std::mt19937_64& rng) = 0;
};

// Always the fastest correct node: pure exploitation; the mutator's restarts supply exploration.
class GreedyPolicy final : public SelectionPolicy {
 public:
  std::string name() const override { return "greedy"; }
  std::vector<NodeId> select(const SearchGraph& graph, std::mt19937_64& rng) override;
};

// Creates a policy by name ("greedy", ...); throws Error(BadUsage) naming the known ones otherwise.
std::unique_ptr<SelectionPolicy> make_policy(const std::string& name);
std::vector<std::string> policy_names();

}  // namespace kernelevolve
