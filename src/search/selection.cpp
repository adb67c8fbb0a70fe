#include "kernelevolve/selection.hpp"

#include "kernelevolve/error.hpp"

namespace kernelevolve {

std::vector<NodeId> GreedyPolicy::select(const SearchGraph& graph, std::mt19937_64&) {
  if (const auto best = graph.best()) return {*best};
  return {0};  // nothing correct yet: mutate from the seed
}

std::vector<std::string> policy_names() { return {"greedy"}; }

std::unique_ptr<SelectionPolicy> make_policy(const std::string& name) {
  if (name == "greedy") return std::make_unique<GreedyPolicy>();
  std::string known;
  for (const auto& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error(ErrorCode::BadUsage, "unknown selection policy '" + name + "' (known: " + known + ")");
}

}  // namespace kernelevolve
