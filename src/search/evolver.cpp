#include "kernelevolve/evolver.hpp"

#include <chrono>

#include "kernelevolve/error.hpp"

namespace kernelevolve {

struct Evolver::Impl {
  Spec spec;
  std::shared_ptr<FitnessEvaluator> evaluator;
  std::shared_ptr<Mutator> mutator;
  std::shared_ptr<SelectionPolicy> policy;
  std::shared_ptr<StopRule> stop;
  EvolverOptions options;
  SearchGraph graph;
  std::vector<Observer*> observers;
};

Evolver::Evolver(Spec spec, std::shared_ptr<FitnessEvaluator> evaluator, std::shared_ptr<Mutator> mutator,
                 std::shared_ptr<SelectionPolicy> policy, std::shared_ptr<StopRule> stop, EvolverOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (!evaluator || !mutator || !policy || !stop) {
    throw Error(ErrorCode::BadUsage, "Evolver: evaluator, mutator, policy and stop rule are all required");
  }
  spec.validate();
  impl_->spec = std::move(spec);
  impl_->evaluator = std::move(evaluator);
  impl_->mutator = std::move(mutator);
  impl_->policy = std::move(policy);
  impl_->stop = std::move(stop);
  impl_->options = options;
}

Evolver::~Evolver() = default;

void Evolver::add_observer(Observer* observer) {
  if (observer) impl_->observers.push_back(observer);
}

const SearchGraph& Evolver::graph() const { return impl_->graph; }
const Spec& Evolver::spec() const { return impl_->spec; }

namespace {
std::uint64_t input_seed(std::uint64_t run_seed, std::size_t node_index) {
  std::uint64_t z = run_seed * 0x9e3779b97f4a7c15ull + node_index + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  return z ^ (z >> 27);
}
}  // namespace

RunResult Evolver::run() {
  Impl& s = *impl_;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::mt19937_64 rng(s.options.seed);
  RunResult result;
  for (Observer* o : s.observers) o->on_start(s.spec, s.evaluator->device_info());

  auto record = [&](Node node) -> const Node& {
    node.created_s = elapsed();
    const NodeId id = s.graph.add(std::move(node));
    const Node& added = s.graph.node(id);
    result.state.evaluations += 1;
    result.state.elapsed_s = elapsed();
    if (added.speedup > result.state.best_speedup) {
      result.state.best_speedup = added.speedup;
      result.state.evaluations_since_improvement = 0;
    } else {
      result.state.evaluations_since_improvement += 1;
    }
    for (Observer* o : s.observers) o->on_node(added, result.state);
    return added;
  };

  auto finish = [&](std::string reason) {
    result.stop_reason = std::move(reason);
    result.best = s.graph.best();
    result.state.elapsed_s = elapsed();
    for (Observer* o : s.observers) o->on_finish(result, s.graph);
    return result;
  };

  Node seed;
  seed.mutator = "seed";
  seed.note = "the spec's seed kernel at the first value of each tunable";
  seed.candidate.source = s.spec.seed.source;
  seed.candidate.language = s.spec.seed.language.value_or(s.spec.language);
  seed.candidate.tunables = s.spec.seed_tunables();
  seed.evaluation = s.evaluator->evaluate(seed.candidate, input_seed(s.options.seed, 0));
  seed.speedup = seed.evaluation.status == Status::ok ? 1.0 : 0.0;
  const Node& seed_node = record(std::move(seed));
  result.seed = seed_node.id;
  if (seed_node.evaluation.status != Status::ok) {
    return finish(std::string("the seed kernel is ") + to_string(seed_node.evaluation.status) + ": " +
                  seed_node.evaluation.message);
  }
  const Evaluation seed_evaluation = seed_node.evaluation;

  int consecutive_failures = 0;
  for (;;) {
    result.state.elapsed_s = elapsed();
    if (auto why = s.stop->should_stop(result.state)) return finish(*why);
    const std::vector<NodeId> parents = s.policy->select(s.graph, rng);
    Mutation m = s.mutator->mutate(MutationContext{s.spec, s.graph, parents, rng});
    if (!m.child || s.graph.contains(*m.child)) {
      if (m.exhausted) return finish("search space exhausted: " + m.error);
      result.mutator_failures += 1;
      if (++consecutive_failures >= s.options.max_consecutive_mutator_failures) {
        return finish("the mutator failed " + std::to_string(consecutive_failures) +
                      " times in a row: " + (m.error.empty() ? "it proposed only known points" : m.error));
      }
      continue;
    }
    consecutive_failures = 0;
    Node node;
    node.parents = parents;
    node.mutator = s.mutator->name();
    node.note = m.note;
    node.candidate = std::move(*m.child);
    node.evaluation = s.evaluator->evaluate(node.candidate, input_seed(s.options.seed, s.graph.size()));
    node.speedup = speedup(seed_evaluation, node.evaluation);
    record(std::move(node));
  }
}

}  // namespace kernelevolve
