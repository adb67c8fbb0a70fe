// SearchGraph: the DAG of kernel variants (nodes) and who made them (edges to parents), with the
// queries the search needs: best, by status, children, and whether a point was already measured.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernelevolve/candidate.hpp"
#include "kernelevolve/fitness.hpp"

namespace kernelevolve {

using NodeId = std::int64_t;

struct Node {
  NodeId id = -1;
  std::vector<NodeId> parents;   // empty for the seed
  std::string mutator;           // "seed", "param", "llm", "command", or the host's own
  std::string note;              // the mutator's one-line account of the change
  Candidate candidate;
  Evaluation evaluation;
  double speedup = 0;            // over the seed, geometric mean across workloads; 0 unless ok
  double created_s = 0;          // seconds since the run started
  // What the mutator was asked and answered, when it was a model or a command (kept for the store).
  std::string prompt;
  std::string answer;
  std::int64_t tokens = 0;
};

class SearchGraph {
 public:
  // Adds a node; assigns and returns its id (ids are dense, from 0).
  NodeId add(Node node);
  const Node& node(NodeId id) const;
  Node& node(NodeId id);
  std::size_t size() const { return nodes_.size(); }
  const std::vector<Node>& nodes() const { return nodes_; }

  // The fastest ok node, if any.
  std::optional<NodeId> best() const;
  std::vector<NodeId> by_status(Status status) const;
  std::vector<NodeId> children(NodeId id) const;
  // Whether this point (source and tunables) is already in the graph.
  bool contains(const Candidate& candidate) const;
  std::optional<NodeId> find(const Candidate& candidate) const;
  // The chain of parents (first parent each step) from the seed to `id`, inclusive.
  std::vector<NodeId> lineage(NodeId id) const;

 private:
  std::vector<Node> nodes_;
  std::unordered_map<std::string, NodeId> by_key_;
  std::unordered_map<NodeId, std::vector<NodeId>> children_;
};

}  // namespace kernelevolve
