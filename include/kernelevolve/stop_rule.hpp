// StopRule: when the search stops. Rules compose with any_of / all_of. A resumed run carries its state
// over (evaluations, elapsed time, tokens, cost), so the rules apply to the run as a whole.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kernelevolve {

// What a stop rule sees after each evaluation.
struct SearchState {
  std::int64_t evaluations = 0;  // candidates evaluated, the seed included
  double elapsed_s = 0;
  double best_speedup = 0;
  std::int64_t evaluations_since_improvement = 0;
  std::int64_t tokens = 0;  // model tokens spent
  double cost_usd = 0;      // what they cost, in US dollars (priced models only)
};

class StopRule {
 public:
  virtual ~StopRule() = default;
  // The reason to stop now, or nothing to go on.
  virtual std::optional<std::string> should_stop(const SearchState& state) = 0;
};

std::shared_ptr<StopRule> max_evaluations(std::int64_t n);
std::shared_ptr<StopRule> max_time(double seconds);
std::shared_ptr<StopRule> target_speedup(double speedup);
std::shared_ptr<StopRule> plateau(std::int64_t evaluations_without_improvement);
// Stops once the mutators have spent this many model tokens (prompt and answer, failed calls included).
std::shared_ptr<StopRule> token_budget(std::int64_t tokens);
// Stops once the models' calls have cost this many US dollars (LlmOptions::price; failed calls included).
std::shared_ptr<StopRule> cost_budget(double usd);
std::shared_ptr<StopRule> any_of(std::vector<std::shared_ptr<StopRule>> rules);
std::shared_ptr<StopRule> all_of(std::vector<std::shared_ptr<StopRule>> rules);

}  // namespace kernelevolve
