// A program on a device: its plan's kernels compiled (and its library steps made ready), and its launch on
// one workload's buffers, with the temporaries the plan asks for. The evaluator runs candidates through it;
// nothing here asks which language a kernel came from.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernelevolve/candidate.hpp"
#include "kernelevolve/device.hpp"
#include "kernelevolve/program.hpp"

namespace kernelevolve::program {

struct CompiledProgram {
  Plan plan;
  std::vector<std::shared_ptr<Kernel>> kernels;  // per step; all set when ok()
  std::string log;                               // every compile's diagnostics, each headed by its kernel
  double compile_ms = 0;
  bool refused = false;         // a compile broke the rules (CompileResult::refused)
  std::string missing_entry;    // a kernel step's entry the source does not mention
  std::string failed_step;      // the step that did not compile, for the message
  bool library_failed = false;  // that step is a library call the device could not make
  bool ok() const { return !kernels.empty() && kernels.size() == plan.steps.size(); }
  // Every step's resources: a one-step plan's as the kernel gives them; a longer plan's under "stepN."
  // (1-based), with "steps" their number.
  std::map<std::string, std::int64_t> resources() const;
};

// Compiles each kernel of `plan` once per signature (the source with the candidate's tunables as macros) and
// makes each library step's call on `device`.
CompiledProgram compile(Device& device, const Spec& spec, const Candidate& candidate, Plan plan);

// One workload's launch of a compiled program. `param_args` is the argument block of the spec's params (as
// Device::launch takes it), which must outlive this object, as must `device` and `program`.
class ProgramLaunch {
 public:
  // Allocates the temporaries `bound` sizes and poisons them (NaN for floats, a fixed byte for integers), once:
  // a step that reads what no step wrote reads the poison. Asks each library step whether its call stays inside
  // the buffers it is given (`param_bytes`: each spec param's, 0 for a size or scalar): PlanError when not.
  // Throws std::runtime_error when the device cannot allocate.
  ProgramLaunch(Device& device, const CompiledProgram& program, const BoundPlan& bound, void** param_args,
                const std::vector<std::size_t>& param_bytes);
  // Runs every step (Device::launch_steps); a failure's message names its step. The temporaries are not poisoned
  // again: each call finds what the last one left, as a stored program's call does in the caller's process
  // (enqueue), so verification, which calls one launch on fresh inputs trial after trial, judges a program that
  // carries state from call to call as its user would meet it (issue 49).
  LaunchResult run(bool timed, bool flush_cache, std::vector<double>* each = nullptr);
  // Queues every step on the caller's `stream` without waiting (Device::enqueue_steps): a callable program's
  // call, whose temporaries live as long as this object.
  LaunchResult enqueue(void* stream);
  std::size_t steps() const { return steps_.size(); }
  // The plan's temporary `t`, as its kernels are given it (the evaluator checks its red zones).
  std::size_t temporaries() const { return temporaries_.size(); }
  Buffer& temporary(std::size_t t) { return *temporaries_.at(t); }

 private:
  // A failure's message, headed by the step that failed.
  LaunchResult named(LaunchResult r) const;

  Device& device_;
  const CompiledProgram& program_;
  std::vector<std::unique_ptr<Buffer>> temporaries_;
  std::vector<void*> temporary_ptrs_;
  std::vector<std::vector<std::int64_t>> values_;
  std::vector<std::vector<void*>> args_;
  std::vector<LaunchStep> steps_;
};

}  // namespace kernelevolve::program
