// The KernelEvolve operator: a model (or command) writes new structures, the parameter search tunes each.
#include "kernelevolve/error.hpp"
#include "kernelevolve/mutator.hpp"

namespace kernelevolve {

MixMutator::MixMutator(std::shared_ptr<Mutator> model, std::shared_ptr<Mutator> params, int param_steps,
                       int model_every)
    : model_(std::move(model)), params_(std::move(params)), param_steps_(param_steps), model_every_(model_every) {
  if (!model_ || !params_) throw Error(ErrorCode::BadUsage, "MixMutator: both mutators are required");
  if (param_steps_ < 0 || model_every_ < 0) throw Error(ErrorCode::BadUsage, "MixMutator: steps must not be negative");
}

Mutation MixMutator::mutate(const MutationContext& ctx) {
  if (ctx.parents.empty()) {  // the first kernel: the model writes it, then the parameter steps tune it
    steps_left_ = 0;
    since_model_ = 0;
    Mutation m = model_->mutate(ctx);
    if (m.mutator.empty()) m.mutator = model_->name();
    if (m.child) {
      structure_ = static_cast<NodeId>(ctx.graph.size());
      steps_left_ = param_steps_;
    }
    m.exhausted = false;
    return m;
  }
  // Tune the model's latest structure while it has steps left and did not fail.
  if (structure_ >= 0 && static_cast<std::size_t>(structure_) < ctx.graph.size()) {
    const Status s = ctx.graph.node(structure_).evaluation.status;
    if (s != Status::ok && s != Status::pending) steps_left_ = 0;
  }
  const bool model_due = model_every_ > 0 && since_model_ >= model_every_;
  if (steps_left_ > 0 && structure_ >= 0 && static_cast<std::size_t>(structure_) < ctx.graph.size() && !model_due) {
    steps_left_ -= 1;
    since_model_ += 1;
    // From the best node that shares the structure's source (a tuned variant may already beat it).
    NodeId from = structure_;
    const std::string& source = ctx.graph.node(structure_).candidate.source;
    for (const Node& n : ctx.graph.nodes()) {
      if (n.evaluation.status == Status::ok && n.candidate.source == source && n.speedup > ctx.graph.node(from).speedup)
        from = n.id;
    }
    MutationContext own{ctx.spec, ctx.graph, {from}, ctx.rng};
    Mutation m = params_->mutate(own);
    if (m.child) {
      m.parents = {from};
      if (m.mutator.empty()) m.mutator = params_->name();
      return m;
    }
    steps_left_ = 0;  // that structure's space is spent: back to the model
  }
  since_model_ = 0;
  Mutation m = model_->mutate(ctx);
  if (m.mutator.empty()) m.mutator = model_->name();
  if (m.child) {
    structure_ = static_cast<NodeId>(ctx.graph.size());  // the id the Evolver gives the child next
    steps_left_ = param_steps_;
  }
  m.exhausted = false;  // the model can always be asked again
  return m;
}

}  // namespace kernelevolve
