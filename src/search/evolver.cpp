// Evolver: its parts put together and checked, the checkpoint it goes on from, and run(), which a
// search::EvolverRun (evolver_run.cpp) carries out.
#include "kernelevolve/evolver.hpp"

#include "kernelevolve/error.hpp"
#include "search/evolver_run.hpp"

namespace kernelevolve {

// An Evolver's parts, which each run works with (search/evolver_run.hpp).
struct Evolver::Impl : search::EvolverParts {};

Evolver::Evolver(Spec spec, std::shared_ptr<FitnessEvaluator> evaluator, std::shared_ptr<Mutator> mutator,
                 std::shared_ptr<SelectionPolicy> policy, std::shared_ptr<StopRule> stop, EvolverOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (!evaluator || !mutator || !policy || !stop) {
    throw Error(ErrorCode::BadUsage, "Evolver: evaluator, mutator, policy and stop rule are all required");
  }
  if (options.jobs < 1) throw Error(ErrorCode::BadUsage, "Evolver: jobs must be at least 1");
  if (options.first_kernel_attempts < 1)
    throw Error(ErrorCode::BadUsage, "Evolver: first_kernel_attempts must be at least 1");
  for (const WarmKernel& warm : options.warm_start) {
    if (warm.candidate.source.empty()) throw Error(ErrorCode::BadUsage, "Evolver: a warm_start kernel has no source");
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

void Evolver::resume(Checkpoint checkpoint) {
  const SearchGraph& g = checkpoint.graph;
  for (const Node& n : g.nodes()) {
    if (n.evaluation.status == Status::pending) {
      throw Error(ErrorCode::BadUsage,
                  "Evolver::resume: node " + std::to_string(n.id) + " of the checkpoint is still pending");
    }
  }
  if (g.size() > 0 && !g.node(0).parents.empty()) {
    throw Error(ErrorCode::BadUsage, "Evolver::resume: node 0 of the checkpoint is not a seed (it has parents)");
  }
  impl_->checkpoint = std::move(checkpoint);
}

const SearchGraph& Evolver::graph() const { return impl_->graph; }
const Spec& Evolver::spec() const { return impl_->spec; }

// One run, as a class whose methods are its steps (search/evolver_run.cpp).
RunResult Evolver::run() { return search::EvolverRun(*impl_).run(); }

}  // namespace kernelevolve
