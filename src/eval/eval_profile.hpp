// Where an evaluation's time goes on the host, by phase (KE_PROFILE).
#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace kernelevolve::eval {

// Where an evaluation's time goes, by phase, summed over the evaluator's life; printed to stderr when it
// ends if KE_PROFILE is set (with --in-process, or KE_WORKER_LOG for workers). For finding host-side cost.
class Profile {
 public:
  using Clock = std::chrono::steady_clock;
  Profile() : on_(std::getenv("KE_PROFILE") != nullptr) {}
  ~Profile() {
    if (!on_ || evaluations_ == 0) return;
    double total = 0;
    for (const auto& [phase, ms] : ms_) total += ms;
    std::fprintf(stderr, "KE_PROFILE: %d evaluations, %.1f ms each in the phases below\n", evaluations_,
                 total / evaluations_);
    for (const auto& [phase, ms] : ms_) {
      std::fprintf(stderr, "KE_PROFILE:   %-18s %9.1f ms each (%4.1f%%)\n", phase.c_str(), ms / evaluations_,
                   total > 0 ? 100 * ms / total : 0);
    }
  }
  // Adds the time since `since` to `phase` and returns now, for the next phase.
  // Off, it reads no clock: it sits in the timing loop.
  Clock::time_point add(const char* phase, Clock::time_point since) {
    if (!on_) return since;
    const Clock::time_point now = Clock::now();
    ms_[phase] += std::chrono::duration<double, std::milli>(now - since).count();
    return now;
  }
  void count() { evaluations_ += on_ ? 1 : 0; }

 private:
  bool on_;
  int evaluations_ = 0;
  std::map<std::string, double> ms_;
};

}  // namespace kernelevolve::eval
