// StoreRecorder: the Observer that commits a run to its store as it goes.
#include <chrono>

#include "kernelevolve/error.hpp"
#include "kernelevolve/store.hpp"

namespace kernelevolve {

StoreRecorder::StoreRecorder(std::shared_ptr<Store> store, RunId run, ReusingEvaluator* reuse)
    : store_(std::move(store)), run_(run), reuse_(reuse), start_(std::chrono::steady_clock::now()) {
  if (!store_) throw Error(ErrorCode::BadUsage, "StoreRecorder: no store");
  const RunInfo info = store_->run(run);
  mutator_ = info.settings.mutator;
  elapsed_before_ = info.elapsed_s;
}

void StoreRecorder::on_start(const Spec&, const DeviceInfo&) { start_ = std::chrono::steady_clock::now(); }

void StoreRecorder::on_node(const Node& node, const SearchState& state) {
  std::optional<std::int64_t> from;
  if (reuse_) from = reuse_->reused_from(node.candidate);
  store_->record_node(run_, node, state, from);
}

void StoreRecorder::on_mutator_call(const Mutation& m, const std::vector<NodeId>& parents, double seconds) {
  // A child is recorded with its node; running out is not a failure, nor a request kept for a round.
  if (m.child || m.exhausted || m.deferred) return;
  const double now = elapsed_before_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  store_->record_mutator_failure(run_, mutator_, m, parents, now, seconds);
}

void StoreRecorder::on_finish(const RunResult& result, const SearchGraph&) { store_->finish_run(run_, result); }

}  // namespace kernelevolve
