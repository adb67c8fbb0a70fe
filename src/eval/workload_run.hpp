// One workload of one candidate through the fitness protocol (docs/fitness.md), each step a method named for it:
// allocate its buffers, verify it over the trials (fresh inputs, the candidate, its bounds, its inputs kept, the
// reference, the comparison, the float64 rescue), time it (fresh inputs for every call, the checked calls), and
// time each step of a program alone. LocalEvaluator makes one per workload of an evaluation.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "eval/arg_block.hpp"
#include "eval/eval_profile.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/program.hpp"
#include "program/program_run.hpp"

namespace kernelevolve::pytorch {
class TorchReference;
}

namespace kernelevolve::eval {

// What a workload's run takes from the evaluator that makes it: the problem, its reference and the hooks.
struct EvaluatorParts {
  const Spec& spec;
  const EvalOptions& options;
  Device& evaluator_device;  // the evaluator's own (a baseline runs on the reference's device instead)
  Device& reference_device;
  pytorch::TorchReference* problem;  // a PyTorch problem's module, else null
  Kernel& reference;
  Profile& profile;
  const std::function<void(bool running)>& reference_hook;
  const std::function<void(const std::string& phase)>& phase_hook;
};

class WorkloadRun {
 public:
  // `device`: where the candidate runs (the evaluator's, or for a baseline the reference's). All must outlive this.
  WorkloadRun(const EvaluatorParts& parts, std::size_t workload, Device& device, const program::CompiledProgram& prog,
              const Candidate& cand, std::uint64_t input_seed, Evaluation& e);
  ~WorkloadRun();
  WorkloadRun(const WorkloadRun&) = delete;
  WorkloadRun& operator=(const WorkloadRun&) = delete;

  // The steps in order; each returns false with `e` failed (status and message) where the candidate fails.
  // `step_us` gains each step's time on this workload (a program of several steps).
  bool run(std::vector<double>& step_us);

 private:
  bool allocate();
  bool verify();
  bool verify_trial(int trial);
  bool time();
  bool time_steps(std::vector<double>& step_us);

  // The steps' parts.
  bool launch_candidate(bool timed, bool flush, double& time_us, std::vector<double>* each = nullptr,
                        double* host_us = nullptr);
  bool stayed_in_bounds(const std::string& when);
  void draw_inputs(ArgBlock& block, int trial, std::uint64_t seed);
  void run_reference();
  void copy_inputs_to_reference();
  const Buffer& expected_output(std::size_t i);
  bool rescued_by_float64(const Comparison& missed, int trial);
  void draw_timing_base();
  void fresh_inputs();
  void copy_checked_inputs_to_reference();

  std::size_t count(std::size_t i) const;
  std::size_t bytes(std::size_t i) const;
  Tolerance tolerance_of(const Param& p) const;
  bool keeps_problem_value(const Param& p) const;
  InputDist problem_scaled(const Param& p, InputDist dist) const;
  void record_worst(const Param& p, const Comparison& c, int trial);
  std::uint64_t call_seed(int call) const;
  void phase(const std::string& what) const;
  bool fail(Status status, std::string message);

  const EvaluatorParts& parts_;
  const Spec& spec_;
  const std::size_t w_;
  const Bindings& workload_;
  const std::size_t n_;
  Device& device_;
  const program::CompiledProgram& prog_;
  const Candidate& cand_;
  const std::uint64_t input_seed_;
  Evaluation& e_;
  Profile::Clock::time_point t_;

  // allocate()
  std::optional<BoundPlan> bound_;
  LaunchDims ref_dims_;
  bool same_device_ = false;  // outputs are compared where the reference left them
  std::unique_ptr<ArgBlock> cand_args_, ref_args_;
  std::unique_ptr<program::ProgramLaunch> cand_run_;

  // verify()
  std::vector<std::uint64_t> previous_got_, previous_expected_;  // the previous trial's output digests
  bool any_keeps_ = false;                      // an input keeps the problem's own values after trial 0
  std::vector<std::unique_ptr<Buffer>> moved_;  // the reference's answers, copied to the candidate's device
  bool may_rescue_ = false;
  std::vector<Tolerance> rescue_tolerance_;  // each output's bound in the last rescue, which judged it
  std::vector<double> own_error_of_;         // the reference's own error against float64, per output
  int own_error_measured_in_ = -1;           // kNotYet, a verification trial, or kTimedRun

  // time()
  std::vector<std::unique_ptr<Buffer>> inout_base_;
  std::vector<std::size_t> base_shift_, first_shift_, call_shift_;
  std::vector<bool> rotated_;
  int calls_ = 0;  // warm-up and timed: each one's inputs differ from every other's
  bool flush_ = false;
};

}  // namespace kernelevolve::eval
