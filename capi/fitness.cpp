// The C API: custom fitness, the host judging candidates itself through a callback.
#include "internal.hpp"

#include <cmath>
#include <string>

using namespace capi;

namespace {

class CallbackEvaluator final : public ke::FitnessEvaluator {
 public:
  CallbackEvaluator(std::size_t workloads, std::string device_name, ke_evaluate_fn fn, void* user_data)
      : workloads_(workloads), fn_(fn), user_data_(user_data) {
    info_.id = "custom";
    info_.kind = "custom";
    info_.name = std::move(device_name);
  }

  ke::Evaluation evaluate(const ke::Candidate& candidate, std::uint64_t input_seed) override {
    ke_candidate c;
    c.candidate = &candidate;
    c.workloads = workloads_;
    c.input_seed = input_seed;
    ke_evaluation e;
    e.timed.assign(workloads_, false);
    e.evaluation.status = ke::Status::crashed;
    const int rc = fn_(&c, &e, user_data_);
    c.tag = Tag::dead;
    e.tag = Tag::dead;
    if (rc != 0) throw Aborted{"the fitness callback returned " + std::to_string(rc) + ": the run is aborted"};
    ke::Evaluation out = std::move(e.evaluation);
    if (!e.status_set) {
      out = ke::Evaluation{};
      out.status = ke::Status::crashed;
      out.message = "the fitness callback set no status";
    } else if (out.status == ke::Status::ok) {
      for (std::size_t w = 0; w < workloads_; ++w) {
        if (!e.timed[w]) {
          out.status = ke::Status::invalid;
          out.message = "the fitness callback said ok without a time for workload " + std::to_string(w);
          out.timings.clear();
          break;
        }
      }
    } else {
      out.timings.clear();  // only an ok candidate has times
    }
    return out;
  }

  ke::DeviceInfo device_info() override { return info_; }

 private:
  std::size_t workloads_;
  ke_evaluate_fn fn_;
  void* user_data_;
  ke::DeviceInfo info_;
};

}  // namespace

std::shared_ptr<ke::FitnessEvaluator> capi::make_callback_evaluator(std::size_t workloads, std::string device_name,
                                                                    ke_evaluate_fn fn, void* user_data) {
  return std::make_shared<CallbackEvaluator>(workloads, std::move(device_name), fn, user_data);
}

// ---------------------------------------------------------------------------------------------------
// Custom fitness

KE_API ke_status ke_candidate_source(const char** out, const ke_candidate* candidate) {
  return get_field(__func__, out, candidate, "candidate",
                   [](const ke_candidate& c) { return c.candidate->source.c_str(); });
}

KE_API ke_status ke_candidate_language(const char** out, const ke_candidate* candidate) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = ke::to_string(need(candidate, "candidate")->candidate->language);
  });
}

KE_API ke_status ke_candidate_tunable_count(size_t* out, const ke_candidate* candidate) {
  return get_field(__func__, out, candidate, "candidate",
                   [](const ke_candidate& c) { return c.candidate->tunables.size(); });
}

KE_API ke_status ke_candidate_tunable(const char** name, int64_t* value, const ke_candidate* candidate, size_t index) {
  return guard(__func__, [&] {
    need_out(name, "name");
    need_out(value, "value");
    const auto it = nth(need(candidate, "candidate")->candidate->tunables, index, "tunable");
    *name = it->first.c_str();
    *value = it->second;
  });
}

KE_API ke_status ke_candidate_tunable_value(int64_t* out, const ke_candidate* candidate, const char* name) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const std::string key = need_string(name, "name");
    const ke::Bindings& tunables = need(candidate, "candidate")->candidate->tunables;
    const auto it = tunables.find(key);
    if (it == tunables.end()) fail(KE_ERROR_NOT_FOUND, "the candidate has no tunable '" + key + "'");
    *out = it->second;
  });
}

KE_API ke_status ke_candidate_workload_count(size_t* out, const ke_candidate* candidate) {
  return get_field(__func__, out, candidate, "candidate", [](const ke_candidate& c) { return c.workloads; });
}

KE_API ke_status ke_candidate_input_seed(uint64_t* out, const ke_candidate* candidate) {
  return get_field(__func__, out, candidate, "candidate", [](const ke_candidate& c) { return c.input_seed; });
}

KE_API ke_status ke_evaluation_set_status(ke_evaluation* evaluation, ke_eval_status status) {
  return guard(__func__, [&] {
    need(evaluation, "evaluation");
    const ke::Status s = need_status(status, "status");
    if (s == ke::Status::pending) fail(KE_ERROR_INVALID_ARGUMENT, "an evaluation cannot end pending");
    evaluation->evaluation.status = s;
    evaluation->status_set = true;
  });
}

KE_API ke_status ke_evaluation_set_message(ke_evaluation* evaluation, const char* message) {
  return guard(__func__, [&] { need(evaluation, "evaluation")->evaluation.message = need_string(message, "message"); });
}

KE_API ke_status ke_evaluation_set_compile_log(ke_evaluation* evaluation, const char* log) {
  return guard(__func__, [&] { need(evaluation, "evaluation")->evaluation.compile_log = need_string(log, "log"); });
}

KE_API ke_status ke_evaluation_set_time_us(ke_evaluation* evaluation, size_t workload, double median_us,
                                           double spread_us) {
  return guard(__func__, [&] {
    need(evaluation, "evaluation");
    if (workload >= evaluation->timed.size()) {
      fail(KE_ERROR_INVALID_ARGUMENT, "workload " + std::to_string(workload) + " is out of range (the spec has " +
                                          std::to_string(evaluation->timed.size()) + ")");
    }
    if (!(median_us > 0) || !std::isfinite(median_us)) fail(KE_ERROR_INVALID_ARGUMENT, "'median_us' must be positive");
    if (!(spread_us >= 0) || !std::isfinite(spread_us)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'spread_us' must not be negative");
    }
    auto& timings = evaluation->evaluation.timings;
    timings.resize(evaluation->timed.size());
    timings[workload] = ke::WorkloadTiming{median_us, median_us, median_us, spread_us, 1};
    evaluation->timed[workload] = true;
  });
}
