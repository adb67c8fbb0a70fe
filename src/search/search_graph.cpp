#include "kernelevolve/search_graph.hpp"

#include <algorithm>

#include "kernelevolve/error.hpp"

namespace kernelevolve {

NodeId SearchGraph::add(Node node) {
  node.id = static_cast<NodeId>(nodes_.size());
  for (NodeId p : node.parents) {
    if (p < 0 || p >= node.id)
      throw Error(ErrorCode::BadUsage, "SearchGraph::add: unknown parent " + std::to_string(p));
  }
  for (NodeId p : node.parents) children_[p].push_back(node.id);
  by_key_.emplace(node.candidate.code_key(), node.id);
  nodes_.push_back(std::move(node));
  is_evaluated_.push_back(false);
  const Node& added = nodes_.back();
  if (added.evaluation.status != Status::pending) index_evaluation(added);
  return added.id;
}

const Node& SearchGraph::node(NodeId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= nodes_.size()) {
    throw Error(ErrorCode::BadUsage, "SearchGraph: no node " + std::to_string(id));
  }
  return nodes_[static_cast<std::size_t>(id)];
}

Node& SearchGraph::node(NodeId id) { return const_cast<Node&>(static_cast<const SearchGraph&>(*this).node(id)); }

void SearchGraph::record_evaluation(NodeId id, Evaluation evaluation, double speedup) {
  Node& n = node(id);
  const bool was_ok = is_evaluated_[static_cast<std::size_t>(id)] && n.evaluation.status == Status::ok;
  n.evaluation = std::move(evaluation);
  n.speedup = speedup;
  if (was_ok) {  // a re-evaluation: rare, so rebuild what depended on the old result
    ok_.erase(std::find(ok_.begin(), ok_.end(), id));
    best_.reset();
    for (NodeId k : ok_) {
      if (!best_ || beats(nodes_[static_cast<std::size_t>(k)], nodes_[static_cast<std::size_t>(*best_)])) best_ = k;
    }
  }
  if (n.evaluation.status != Status::pending) index_evaluation(n);
}

void SearchGraph::index_evaluation(const Node& n) {
  const auto at = static_cast<std::size_t>(n.id);
  if (!is_evaluated_[at]) {
    is_evaluated_[at] = true;
    evaluated_.push_back(n.id);
  }
  if (n.evaluation.status != Status::ok) return;
  ok_.push_back(n.id);  // record_evaluation took it out first if it was ok before
  if (!best_ || beats(n, nodes_[static_cast<std::size_t>(*best_)])) best_ = n.id;
}

double relative_spread(const Evaluation& e) {
  double spread = 0;
  for (const WorkloadTiming& t : e.timings) {
    if (t.median_us > 0) spread = std::max(spread, t.mad_us / t.median_us);
  }
  return spread;
}

bool beats(const Node& challenger, const Node& incumbent) {
  // Identical code measures a few percent apart from one evaluation to the next: a lead inside the
  // measured spread of either is a tie, and a tie keeps the incumbent, so that a duplicate or a noise-winner
  // never displaces what it copied.
  const double margin = std::max(relative_spread(challenger.evaluation), relative_spread(incumbent.evaluation));
  return challenger.speedup > incumbent.speedup * (1 + margin);
}

std::optional<NodeId> SearchGraph::best() const { return best_; }

std::vector<NodeId> SearchGraph::by_status(Status status) const {
  std::vector<NodeId> out;
  for (const Node& n : nodes_) {
    if (n.evaluation.status == status) out.push_back(n.id);
  }
  return out;
}

std::vector<NodeId> SearchGraph::children(NodeId id) const {
  const auto it = children_.find(id);
  return it == children_.end() ? std::vector<NodeId>{} : it->second;
}

bool SearchGraph::contains(const Candidate& candidate) const { return find(candidate).has_value(); }

std::optional<NodeId> SearchGraph::find(const Candidate& candidate) const {
  const auto it = by_key_.find(candidate.code_key());
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

std::vector<NodeId> SearchGraph::lineage(NodeId id) const {
  std::vector<NodeId> chain;
  for (NodeId at = id;;) {
    chain.push_back(at);
    const Node& n = node(at);
    if (n.parents.empty()) break;
    at = n.parents.front();
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace kernelevolve
