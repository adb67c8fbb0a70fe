// SearchGraph: the DAG of kernel variants (nodes) and who made them (edges to parents), with the
// queries the search needs: best, by status, children, and whether a point was already measured.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernelevolve/candidate.hpp"
#include "kernelevolve/diagnosis.hpp"
#include "kernelevolve/fitness.hpp"

namespace kernelevolve {

using NodeId = std::int64_t;

struct Node {
  NodeId id = -1;
  std::vector<NodeId> parents;  // empty for the seed
  std::string mutator;          // "seed", "param", "llm", "command", or the host's own
  std::string note;             // the mutator's one-line account of the change
  Candidate candidate;
  Evaluation evaluation;
  double speedup = 0;    // over the seed, geometric mean across workloads; 0 unless ok
  double created_s = 0;  // seconds since the run started
  // What the mutator was asked and answered, when it was a model or a command (kept for the store).
  std::string prompt;
  std::string answer;
  std::int64_t tokens = 0;
  double mutation_s = 0;  // how long the mutator took to make this node
  double cost_usd = 0;    // what the model's call cost, in US dollars (0 unpriced, or no model)
  std::string model;      // the model that wrote it, when a model did
  // Where an ok node's time goes (diagnosis.hpp): set by the Evolver when the evaluation is recorded and by
  // the Store when a run is loaded; none for a node that is not ok, or one a host added without it.
  std::optional<Diagnosis> diagnosis;
};

// The largest relative spread (median absolute deviation over median) of an evaluation's workloads.
double relative_spread(const Evaluation& evaluation);
// A machine whose seed spreads by more than this (relative_spread) is noisy: the prompt says so, and the
// run's confirmations (of the best, of a model's parents) take twice their rounds.
inline constexpr double kNoisyMachine = 0.05;
// Whether `challenger` is faster than `incumbent` by more than the larger of their relative spreads:
// closer than that, the two are a tie (noise is not a signal).
bool beats(const Node& challenger, const Node& incumbent);

class SearchGraph {
 public:
  // Adds a node; assigns and returns its id (ids are dense, from 0). A node added with a status other
  // than pending counts as evaluated at once.
  NodeId add(Node node);
  const Node& node(NodeId id) const;
  // Mutable access for notes and the like. Record an evaluation with record_evaluation, not through
  // this reference, so that the graph's indexes (best, ok nodes, evaluation order) stay true.
  Node& node(NodeId id);
  // Records a finished evaluation and its speedup on a node (normally a pending one).
  void record_evaluation(NodeId id, Evaluation evaluation, double speedup);
  std::size_t size() const { return nodes_.size(); }
  const std::vector<Node>& nodes() const { return nodes_; }

  // The fastest ok node, if any: a later node replaces it only by beating it beyond the measured spread
  // (beats()), so on a tie the first to reach that speed stays. Constant time.
  std::optional<NodeId> best() const;
  std::vector<NodeId> by_status(Status status) const;
  std::vector<NodeId> children(NodeId id) const;
  // The ok nodes, in the order their evaluations were recorded.
  const std::vector<NodeId>& ok_nodes() const { return ok_; }
  // Every node whose evaluation was recorded, in that order: a policy that keeps its own statistics
  // reads the tail it has not seen yet.
  const std::vector<NodeId>& evaluation_order() const { return evaluated_; }
  // Nodes added but not yet evaluated.
  std::size_t pending() const { return nodes_.size() - evaluated_.size(); }
  // Whether this point (code and tunables, Candidate::code_key) is already in the graph.
  bool contains(const Candidate& candidate) const;
  std::optional<NodeId> find(const Candidate& candidate) const;
  // The chain of parents (first parent each step) from the seed to `id`, inclusive.
  std::vector<NodeId> lineage(NodeId id) const;

 private:
  void index_evaluation(const Node& node);

  std::vector<Node> nodes_;
  std::unordered_map<std::string, NodeId> by_key_;
  std::unordered_map<NodeId, std::vector<NodeId>> children_;
  std::vector<NodeId> ok_;
  std::vector<NodeId> evaluated_;
  std::vector<bool> is_evaluated_;
  std::optional<NodeId> best_;
};

}  // namespace kernelevolve
