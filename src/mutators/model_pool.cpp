// Several models behind one mutator: a bandit (model_bandit.hpp) picks the model of each call, and learns
// from the children each model wrote, once they are measured, how much each one's calls improve per dollar.
#include <map>
#include <mutex>
#include <set>

#include "kernelevolve/error.hpp"
#include "kernelevolve/mutator.hpp"
#include "mutators/model_bandit.hpp"

namespace kernelevolve {

struct ModelPoolMutator::Impl {
  std::vector<std::shared_ptr<LlmMutator>> models;
  std::map<std::string, std::size_t> arm_of;  // model name -> its index
  mutators::ModelBandit bandit;
  std::mutex mutex;
  std::size_t seen = 0;           // the graph's evaluations credited so far
  std::set<std::string> waiting;  // the keys of children made in this process, not yet credited

  Impl(std::vector<std::shared_ptr<LlmMutator>> m, double exploration, double discount)
      : models(std::move(m)), bandit(models.size(), exploration, discount) {}

  // Dollars when every model has a price; tokens otherwise, so that the models compare in one unit.
  bool by_dollars() const {
    for (const auto& m : models) {
      if (m->prices().empty()) return false;
    }
    return true;
  }

  double cost(double usd, std::int64_t tokens) const { return by_dollars() ? usd : static_cast<double>(tokens); }

  // The relative gain of a child over its (first) parent; 0 for a failure, a slower child or a first kernel.
  static double gain(const SearchGraph& graph, const Node& n) {
    if (n.evaluation.status != Status::ok || n.parents.empty()) return 0;
    const Node& parent = graph.node(n.parents.front());
    if (parent.evaluation.status != Status::ok || !(parent.speedup > 0)) return 0;
    return std::max(0.0, n.speedup / parent.speedup - 1);
  }

  // Credits each model with the children of its that were measured since the last call. A node of a resumed
  // run, made before this process, was a call the bandit has not counted: it counts it now, at its cost.
  void credit_measured(const SearchGraph& graph) {
    const std::vector<NodeId>& order = graph.evaluation_order();
    for (; seen < order.size(); ++seen) {
      const Node& n = graph.node(order[seen]);
      const auto it = arm_of.find(n.model);
      if (n.model.empty() || it == arm_of.end()) continue;
      if (waiting.erase(n.candidate.key()) == 0) {
        bandit.pulled(it->second, cost(n.cost_usd, n.tokens));
      }
      bandit.credit(it->second, gain(graph, n));
    }
  }
};

ModelPoolMutator::ModelPoolMutator(std::vector<std::shared_ptr<LlmMutator>> models, double exploration,
                                   double discount) {
  if (models.empty()) throw Error(ErrorCode::BadUsage, "ModelPoolMutator: at least one model is needed");
  std::map<std::string, std::size_t> arm_of;
  for (std::size_t i = 0; i < models.size(); ++i) {
    if (!models[i]) throw Error(ErrorCode::BadUsage, "ModelPoolMutator: model " + std::to_string(i) + " is null");
    if (!arm_of.emplace(models[i]->model(), i).second) {
      throw Error(ErrorCode::BadUsage,
                  "the model '" + models[i]->model() +
                      "' is given twice: each model once, so that each node names the one that wrote it");
    }
  }
  impl_ = std::make_unique<Impl>(std::move(models), exploration, discount);
  impl_->arm_of = std::move(arm_of);
}

ModelPoolMutator::~ModelPoolMutator() = default;

Mutation ModelPoolMutator::mutate(const MutationContext& ctx) {
  std::size_t arm;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->credit_measured(ctx.graph);
    arm = impl_->bandit.choose(ctx.rng);
  }
  Mutation m = impl_->models[arm]->mutate(ctx);
  std::lock_guard lock(impl_->mutex);
  impl_->bandit.pulled(arm, impl_->cost(m.cost_usd, m.tokens));
  // A child the graph holds already is not evaluated again: it brought nothing, and is credited as such now.
  if (m.child && !ctx.graph.contains(*m.child)) impl_->waiting.insert(m.child->key());
  return m;
}

std::map<std::string, LlmPrice> ModelPoolMutator::prices() const {
  std::map<std::string, LlmPrice> out;
  for (const auto& m : impl_->models) out.merge(m->prices());
  return out;
}

void ModelPoolMutator::set_prices(const std::map<std::string, LlmPrice>& prices) {
  for (const auto& m : impl_->models) m->set_prices(prices);
}

std::vector<ModelPoolMutator::ModelStats> ModelPoolMutator::stats() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<ModelStats> out;
  for (std::size_t i = 0; i < impl_->models.size(); ++i) {
    out.push_back({impl_->models[i]->model(), impl_->bandit.pulls(i), impl_->bandit.value(i)});
  }
  return out;
}

}  // namespace kernelevolve
