// The fitness protocol of DESIGN.md, steps 1-3, in the calling process: compile, verify on fresh
// random inputs against the reference, time what verified (each workload's steps: eval/workload_run.hpp). Step 4
// (isolation) wraps this in a worker.
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eval/eval_profile.hpp"
#include "eval/workload_run.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/program.hpp"
#include "program/program_run.hpp"
#include "pytorch/torch_reference.hpp"

namespace kernelevolve {

namespace {

std::string first_error_line(const std::string& log) {
  const std::size_t at = log.find("error: ");
  const std::size_t from = at == std::string::npos ? 0 : at + 7;
  return log.substr(from, log.find('\n', from) - from);
}

}  // namespace

struct LocalEvaluator::Impl {
  eval::Profile profile;
  std::mutex mutex;  // one evaluation at a time: the reference and the buffers are shared
  Spec spec;
  std::shared_ptr<Device> device;
  std::shared_ptr<Device> reference_device;
  // The reference when it is a PyTorch problem's module (it also draws the problem's inputs); else null.
  pytorch::TorchReference* problem = nullptr;
  EvalOptions options;
  std::shared_ptr<Kernel> reference;
  std::function<void(bool)> reference_hook;
  std::function<void(const std::string&)> phase_hook;
  void phase(const std::string& what) {
    if (phase_hook) phase_hook(what);
  }

  Kernel& reference_kernel() {
    if (reference) return *reference;
    KernelSource ks;
    ks.source = spec.reference.source;
    ks.language = spec.reference.language.value_or(spec.language);
    ks.entry = spec.entry;
    ks.params = spec.params;
    // A GPU reference is launched with the seed's point, so it may read the same tunables.
    if (!is_cpu_language(ks.language)) ks.defines = spec.seed_tunables();
    CompileResult r = reference_device->compile(ks);
    if (!r.ok()) {
      throw Error(ErrorCode::BadSpec, spec.path + ": reference: the trusted reference does not compile:\n" + r.log);
    }
    reference = r.kernel;
    return *reference;
  }

  // Fails the evaluation with `status` and `message`; returns false so callers can `return fail(...)`.
  static bool fail(Evaluation& e, Status status, std::string message) {
    e.status = status;
    e.message = std::move(message);
    return false;
  }

  Evaluation evaluate(const Candidate& cand, std::uint64_t input_seed) {
    Evaluation e;
    e.device = FitnessEvaluator::device_class(device->info());
    // A baseline (PyTorch eager or torch.compile) runs where the reference does, and is judged as a kernel is.
    const bool baseline = cand.language == Language::pytorch;
    if (baseline && !problem) {
      fail(e, Status::invalid, "a PyTorch baseline needs a PyTorch problem; " + spec.path + " has a kernel reference");
      return e;
    }
    const std::shared_ptr<Device>& device = baseline ? reference_device : this->device;
    if (cand.language != spec.language && !baseline) {
      fail(e, Status::invalid,
           std::string("candidate is ") + to_string(cand.language) + ", the spec asks for " + to_string(spec.language));
      return e;
    }
    if (!spec.satisfies_constraints(cand.tunables)) {
      fail(e, Status::invalid, "tunables violate the spec's constraints");
      return e;
    }
    if (!device->healthy()) {
      // Nothing compiled or run on a poisoned context could be told apart from the candidate's own fault.
      throw Error(ErrorCode::DeviceUnavailable,
                  device->info().id + ": an earlier kernel left the device unusable; a new process must open it");
    }
    Kernel& ref = reference_kernel();  // a broken reference is the spec's fault: it throws
    // What the candidate runs: the plan its source declares, or the spec's one kernel. A baseline's source is
    // a PyTorch module, run as the reference is.
    Plan plan;
    try {
      plan = plan_of(spec, baseline ? std::string() : cand.source, cand.language);
    } catch (const PlanError& ex) {
      fail(e, Status::invalid, ex.what());
      return e;
    }
    if (plan.calls_library() && !spec.library_steps) {
      fail(e, Status::invalid,
           "the plan calls a library, and this problem forbids library steps (its spec's "
           "\"library_steps\" is false): write the work as kernels");
      return e;
    }
    profile.count();
    auto t = eval::Profile::Clock::now();
    phase("compiling");
    const program::CompiledProgram compiled = program::compile(*device, spec, cand, std::move(plan));
    profile.add("compile", t);
    e.compile_log = compiled.log;
    e.compile_ms = compiled.compile_ms;
    if (!compiled.ok()) {
      const bool several = compiled.plan.steps.size() > 1;
      const std::string which = several ? " in " + compiled.failed_step : "";
      if (compiled.refused) {
        fail(e, Status::invalid, "refused: " + first_error_line(compiled.log));
      } else if (baseline) {
        fail(e, Status::compile_error, first_error_line(compiled.log));
      } else if (!compiled.missing_entry.empty()) {
        fail(e, Status::invalid,
             "the source does not define the entry point '" + compiled.missing_entry + "'" +
                 (compiled.plan.declared ? " that its plan launches" : ""));
      } else if (compiled.library_failed) {
        fail(e, Status::invalid, compiled.failed_step + ": " + first_error_line(compiled.log));
      } else {
        fail(e, Status::compile_error, "compilation failed" + which);
      }
      return e;
    }
    e.resources = compiled.resources();
    try {
      std::vector<double> step_us(compiled.plan.steps.size(), 0.0);
      const eval::EvaluatorParts parts{spec, options, *this->device,  *reference_device, problem,
                                       ref,  profile, reference_hook, phase_hook};
      for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
        if (!eval::WorkloadRun(parts, w, *device, compiled, cand, input_seed, e).run(step_us)) {
          e.timings.clear();
          return e;
        }
      }
      // What only the launch tells (a GPU's occupancy for the rule's block), asked after the launches so that
      // any opt-in to more dynamic shared memory is made. The first workload's launch stands for all: the
      // block is normally the tunables' alone.
      if (!spec.workloads.empty()) {
        const BoundPlan bound = bind_plan(compiled.plan, spec, spec.workloads[0], cand.tunables);
        const bool several = compiled.kernels.size() > 1;
        for (std::size_t s = 0; s < compiled.kernels.size(); ++s) {
          const std::string prefix = several ? "step" + std::to_string(s + 1) + "." : "";
          for (const auto& [name, value] : device->launch_resources(*compiled.kernels[s], bound.dims[s]))
            e.resources[prefix + name] = value;
        }
      }
      // Each step's share of the program's time, over every workload, in thousandths.
      double total_us = 0;
      for (double us : step_us) total_us += us;
      if (compiled.kernels.size() > 1 && total_us > 0) {
        for (std::size_t s = 0; s < step_us.size(); ++s)
          e.resources["step" + std::to_string(s + 1) + ".share_permille"] =
              static_cast<std::int64_t>(std::lround(1000.0 * step_us[s] / total_us));
      }
    } catch (const PlanError& ex) {
      e.timings.clear();
      fail(e, Status::invalid, ex.what());
      return e;
    } catch (const Error&) {
      throw;
    } catch (const std::exception& ex) {
      e.timings.clear();
      fail(e, Status::crashed, std::string("evaluation failed: ") + ex.what());
      return e;
    }
    e.status = Status::ok;
    return e;
  }
};

LocalEvaluator::LocalEvaluator(Spec spec, std::shared_ptr<Device> device, EvalOptions options,
                               std::shared_ptr<Device> reference_device)
    : impl_(std::make_unique<Impl>()) {
  if (!device) throw Error(ErrorCode::BadUsage, "LocalEvaluator: no device");
  // Before anything is allocated or started: a problem that cannot fit says so, with the numbers, rather
  // than fail in an allocation (or in PyTorch's, with a traceback).
  check_fits(spec, device->info(), device_memory_bytes(device->info(), options.device_memory_bytes));
  if (!reference_device && spec.reference.pytorch) {
    reference_device = std::make_shared<pytorch::TorchReference>(spec, device);
  } else if (!reference_device) {
    const std::string& wanted = spec.reference.device.value_or("");
    reference_device =
        wanted.empty() || wanted == device->info().id || wanted == device->info().kind ? device : open_device(wanted);
  }
  impl_->spec = std::move(spec);
  impl_->device = std::move(device);
  impl_->reference_device = std::move(reference_device);
  impl_->problem = dynamic_cast<pytorch::TorchReference*>(impl_->reference_device.get());
  impl_->options = options;
}

LocalEvaluator::~LocalEvaluator() = default;

Evaluation LocalEvaluator::evaluate(const Candidate& candidate, std::uint64_t input_seed) {
  std::lock_guard lock(impl_->mutex);
  return impl_->evaluate(candidate, input_seed);
}

DeviceInfo LocalEvaluator::device_info() { return impl_->device->info(); }

void LocalEvaluator::prepare() {
  impl_->device->prepare();
  // What the candidates' language needs beyond the device (Triton's compile helper); its absence is the run's end.
  impl_->device->prepare_language(impl_->spec.language);
  // A program may call cuBLASLt or cuDNN: loaded now, since a worker confines itself after this.
  if (impl_->spec.library_steps && !is_cpu_language(impl_->spec.language)) impl_->device->prepare_library_steps();
  if (impl_->reference_device != impl_->device) impl_->reference_device->prepare();
  try {
    impl_->reference_kernel();
  } catch (const Error&) {
    // evaluate() compiles it again and reports the error where a caller expects it.
  }
}

void LocalEvaluator::on_reference(std::function<void(bool running)> hook) {
  std::lock_guard lock(impl_->mutex);
  impl_->reference_hook = std::move(hook);
}

void LocalEvaluator::on_phase(std::function<void(const std::string& phase)> hook) {
  std::lock_guard lock(impl_->mutex);
  impl_->phase_hook = std::move(hook);
}

}  // namespace kernelevolve
