// The C API: stop rules, built in or the host's own, and their composites.
#include "internal.hpp"

#include <cmath>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

using namespace capi;

namespace {

class TokenBudget final : public ke::StopRule {
 public:
  explicit TokenBudget(std::int64_t tokens) : tokens_(tokens) {}
  std::optional<std::string> should_stop(const ke::SearchState& state) override {
    if (state.tokens >= tokens_) return "spent the budget of " + std::to_string(tokens_) + " tokens";
    return std::nullopt;
  }

 private:
  std::int64_t tokens_;
};

// The host's own rule: a normal end of the search when its callback says so. One rule may be set on
// evolvers that run at once, so its calls are serialized; the user data is finalized with the rule, when
// the last of its holders (the handle, composites, evolvers) lets go.
class CallbackStopRule final : public ke::StopRule {
 public:
  CallbackStopRule(std::string name, ke_stop_fn fn, void* user_data, ke_free_fn free_user_data)
      : name_(std::move(name)), fn_(fn), user_data_(user_data), free_user_data_(free_user_data) {}
  CallbackStopRule(const CallbackStopRule&) = delete;
  CallbackStopRule& operator=(const CallbackStopRule&) = delete;
  ~CallbackStopRule() override {
    if (free_user_data_) free_user_data_(user_data_);
  }

  std::optional<std::string> should_stop(const ke::SearchState& s) override {
    ke_search_state state;
    state.version = KE_SEARCH_STATE_VERSION;
    copy_state(state, s);
    std::lock_guard lock(mutex_);
    if (fn_(&state, user_data_) == 0) return std::nullopt;
    return "the stop rule '" + name_ + "' said stop at " + std::to_string(s.evaluations) + " evaluations";
  }

 private:
  std::string name_;
  ke_stop_fn fn_;
  void* user_data_;
  ke_free_fn free_user_data_;
  std::mutex mutex_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Stop rules

namespace {

ke_status make_rule(const char* function, ke_stop_rule** out,
                    const std::function<std::shared_ptr<ke::StopRule>()>& make) {
  return guard(function, [&] {
    need_out(out, "out");
    auto rule = std::make_unique<ke_stop_rule>();
    rule->rule = make();
    give(out, std::move(rule));
  });
}

std::vector<std::shared_ptr<ke::StopRule>> rules_of(const ke_stop_rule* const* rules, std::size_t count) {
  need_array(rules, count, "rules");
  if (count == 0) fail(KE_ERROR_INVALID_ARGUMENT, "'count' is 0: a composite needs at least one rule");
  std::vector<std::shared_ptr<ke::StopRule>> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(need(rules[i], "rules[i]")->rule);
  return out;
}

}  // namespace

KE_API ke_status ke_stop_rule_max_evaluations(ke_stop_rule** out, int64_t evaluations) {
  return make_rule(__func__, out, [&] {
    if (evaluations < 1) fail(KE_ERROR_INVALID_ARGUMENT, "'evaluations' must be at least 1");
    return ke::max_evaluations(evaluations);
  });
}

KE_API ke_status ke_stop_rule_max_time(ke_stop_rule** out, double seconds) {
  return make_rule(__func__, out, [&] {
    if (!(seconds > 0) || !std::isfinite(seconds)) fail(KE_ERROR_INVALID_ARGUMENT, "'seconds' must be positive");
    return ke::max_time(seconds);
  });
}

KE_API ke_status ke_stop_rule_target_speedup(ke_stop_rule** out, double speedup) {
  return make_rule(__func__, out, [&] {
    if (!(speedup > 0) || !std::isfinite(speedup)) fail(KE_ERROR_INVALID_ARGUMENT, "'speedup' must be positive");
    return ke::target_speedup(speedup);
  });
}

KE_API ke_status ke_stop_rule_plateau(ke_stop_rule** out, int64_t evaluations) {
  return make_rule(__func__, out, [&] {
    if (evaluations < 1) fail(KE_ERROR_INVALID_ARGUMENT, "'evaluations' must be at least 1");
    return ke::plateau(evaluations);
  });
}

KE_API ke_status ke_stop_rule_max_tokens(ke_stop_rule** out, int64_t tokens) {
  return make_rule(__func__, out, [&]() -> std::shared_ptr<ke::StopRule> {
    if (tokens < 1) fail(KE_ERROR_INVALID_ARGUMENT, "'tokens' must be at least 1");
    return std::make_shared<TokenBudget>(tokens);
  });
}

KE_API ke_status ke_stop_rule_max_cost(ke_stop_rule** out, double usd) {
  return make_rule(__func__, out, [&]() -> std::shared_ptr<ke::StopRule> {
    if (!(usd > 0) || !std::isfinite(usd))
      fail(KE_ERROR_INVALID_ARGUMENT, "'usd' must be a positive number of dollars");
    return ke::cost_budget(usd);
  });
}

KE_API ke_status ke_stop_rule_callback(ke_stop_rule** out, const char* name, ke_stop_fn should_stop, void* user_data,
                                       ke_free_fn free_user_data) {
  return make_rule(__func__, out, [&]() -> std::shared_ptr<ke::StopRule> {
    std::string rule_name = need_nonempty(name, "name");
    if (!should_stop) fail(KE_ERROR_INVALID_ARGUMENT, "'should_stop' is NULL");
    // Made last: once it exists nothing fails, so a failed call never finalizes the caller's user data.
    return std::make_shared<CallbackStopRule>(std::move(rule_name), should_stop, user_data, free_user_data);
  });
}

KE_API ke_status ke_stop_rule_any(ke_stop_rule** out, const ke_stop_rule* const* rules, size_t count) {
  return make_rule(__func__, out, [&] { return ke::any_of(rules_of(rules, count)); });
}

KE_API ke_status ke_stop_rule_all(ke_stop_rule** out, const ke_stop_rule* const* rules, size_t count) {
  return make_rule(__func__, out, [&] { return ke::all_of(rules_of(rules, count)); });
}

KE_API ke_status ke_stop_rule_destroy(ke_stop_rule* rule) { return destroy(__func__, rule); }
