#include "kernelevolve/stop_rule.hpp"

#include "kernelevolve/error.hpp"

#include <cmath>
#include <functional>
#include <sstream>

namespace kernelevolve {

namespace {

class LambdaRule final : public StopRule {
 public:
  explicit LambdaRule(std::function<std::optional<std::string>(const SearchState&)> f) : f_(std::move(f)) {}
  std::optional<std::string> should_stop(const SearchState& s) override { return f_(s); }

 private:
  std::function<std::optional<std::string>(const SearchState&)> f_;
};

std::string format(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

}  // namespace

std::shared_ptr<StopRule> max_evaluations(std::int64_t n) {
  return std::make_shared<LambdaRule>([n](const SearchState& s) -> std::optional<std::string> {
    if (s.evaluations >= n) return "reached " + std::to_string(n) + " evaluations";
    return std::nullopt;
  });
}

std::shared_ptr<StopRule> max_time(double seconds) {
  return std::make_shared<LambdaRule>([seconds](const SearchState& s) -> std::optional<std::string> {
    if (s.elapsed_s >= seconds) return "reached the time limit of " + format(seconds) + " s";
    return std::nullopt;
  });
}

std::shared_ptr<StopRule> target_speedup(double speedup) {
  return std::make_shared<LambdaRule>([speedup](const SearchState& s) -> std::optional<std::string> {
    if (s.best_speedup >= speedup) return "reached the target speedup of " + format(speedup) + "x";
    return std::nullopt;
  });
}

std::shared_ptr<StopRule> plateau(std::int64_t n) {
  return std::make_shared<LambdaRule>([n](const SearchState& s) -> std::optional<std::string> {
    if (s.evaluations_since_improvement >= n) return "no improvement in " + std::to_string(n) + " evaluations";
    return std::nullopt;
  });
}

std::shared_ptr<StopRule> token_budget(std::int64_t tokens) {
  return std::make_shared<LambdaRule>([tokens](const SearchState& s) -> std::optional<std::string> {
    if (s.tokens >= tokens) return "spent the budget of " + std::to_string(tokens) + " model tokens";
    return std::nullopt;
  });
}

std::shared_ptr<StopRule> cost_budget(double usd) {
  if (!(usd > 0) || !std::isfinite(usd))
    throw Error(ErrorCode::BadUsage, "cost_budget: the budget must be a positive number of dollars");
  return std::make_shared<LambdaRule>([usd](const SearchState& s) -> std::optional<std::string> {
    if (s.cost_usd >= usd)
      return "spent $" + format(s.cost_usd) + " of the budget of $" + format(usd) + " on model calls";
    return std::nullopt;
  });
}

std::shared_ptr<StopRule> any_of(std::vector<std::shared_ptr<StopRule>> rules) {
  return std::make_shared<LambdaRule>([rules](const SearchState& s) -> std::optional<std::string> {
    for (const auto& r : rules) {
      if (auto why = r->should_stop(s)) return why;
    }
    return std::nullopt;
  });
}

std::shared_ptr<StopRule> all_of(std::vector<std::shared_ptr<StopRule>> rules) {
  return std::make_shared<LambdaRule>([rules](const SearchState& s) -> std::optional<std::string> {
    std::string reasons;
    for (const auto& r : rules) {
      auto why = r->should_stop(s);
      if (!why) return std::nullopt;
      reasons += (reasons.empty() ? "" : " and ") + *why;
    }
    if (rules.empty()) return std::nullopt;
    return reasons;
  });
}

}  // namespace kernelevolve
