// ReusingEvaluator: a candidate measured before for the same problem on the same class of device is answered
// from the store (Store::find_measurement, store_read.cpp), any other by the evaluator it wraps.
#include "kernelevolve/error.hpp"
#include "kernelevolve/store.hpp"

namespace kernelevolve {

ReusingEvaluator::ReusingEvaluator(std::shared_ptr<FitnessEvaluator> inner, std::shared_ptr<Store> store,
                                   const Spec& spec)
    : inner_(std::move(inner)), store_(std::move(store)), measurement_hash_(measurement_hash(spec)) {
  if (!inner_ || !store_) throw Error(ErrorCode::BadUsage, "ReusingEvaluator: an evaluator and a store are required");
}

DeviceInfo ReusingEvaluator::device_info() { return inner_->device_info(); }

std::vector<std::string> ReusingEvaluator::device_classes() { return inner_->device_classes(); }

CounterResult ReusingEvaluator::hardware_counters(const Candidate& candidate, std::uint64_t input_seed) {
  return inner_->hardware_counters(candidate, input_seed);
}

Evaluation ReusingEvaluator::measure_again(std::size_t device_class_index, const Candidate& candidate,
                                           std::uint64_t input_seed) {
  return inner_->measure_again(device_class_index, candidate, input_seed);
}

std::optional<Evaluation> ReusingEvaluator::from_store(const std::string& device_class, const Candidate& candidate) {
  auto found = store_->find_measurement(measurement_hash_, device_class, candidate);
  if (!found) return std::nullopt;
  {
    std::lock_guard lock(mutex_);
    reused_[candidate.key()] = found->uid;
  }
  Evaluation e = std::move(found->evaluation);
  const std::string note =
      "measured before, by run " + std::to_string(found->run) + " node " + std::to_string(found->node);
  if (e.message.find("measured before, by run") == std::string::npos) {
    e.message = e.message.empty() ? note : e.message + " (" + note + ")";
  }
  return e;
}

Evaluation ReusingEvaluator::evaluate(const Candidate& candidate, std::uint64_t input_seed) {
  if (auto e = from_store(device_class(inner_->device_info()), candidate)) return std::move(*e);
  return inner_->evaluate(candidate, input_seed);
}

Evaluation ReusingEvaluator::evaluate_on(std::size_t device_class_index, const Candidate& candidate,
                                         std::uint64_t input_seed) {
  const auto classes = inner_->device_classes();
  if (device_class_index < classes.size()) {
    if (auto e = from_store(classes[device_class_index], candidate)) return std::move(*e);
  }
  return inner_->evaluate_on(device_class_index, candidate, input_seed);
}

std::optional<std::int64_t> ReusingEvaluator::reused_from(const Candidate& candidate) const {
  std::lock_guard lock(mutex_);
  const auto it = reused_.find(candidate.key());
  if (it == reused_.end()) return std::nullopt;
  return it->second;
}

std::int64_t ReusingEvaluator::reused() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::int64_t>(reused_.size());
}

}  // namespace kernelevolve
