#include "kernelevolve/search_graph.hpp"

#include <algorithm>

#include "kernelevolve/error.hpp"

namespace kernelevolve {

NodeId SearchGraph::add(Node node) {
  node.id = static_cast<NodeId>(nodes_.size());
  for (NodeId p : node.parents) {
    if (p < 0 || p >= node.id) throw Error(ErrorCode::BadUsage, "SearchGraph::add: unknown parent " + std::to_string(p));
    children_[p].push_back(node.id);
  }
  by_key_.emplace(node.candidate.key(), node.id);
  nodes_.push_back(std::move(node));
  return nodes_.back().id;
}

const Node& SearchGraph::node(NodeId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= nodes_.size()) {
    throw Error(ErrorCode::BadUsage, "SearchGraph: no node " + std::to_string(id));
  }
  return nodes_[static_cast<std::size_t>(id)];
}

Node& SearchGraph::node(NodeId id) { return const_cast<Node&>(static_cast<const SearchGraph&>(*this).node(id)); }

std::optional<NodeId> SearchGraph::best() const {
  std::optional<NodeId> best;
  for (const Node& n : nodes_) {
    if (n.evaluation.status != Status::ok) continue;
    if (!best || n.speedup > nodes_[static_cast<std::size_t>(*best)].speedup) best = n.id;
  }
  return best;
}

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
  const auto it = by_key_.find(candidate.key());
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
