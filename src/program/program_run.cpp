// Compiling a program's kernels and launching its plan on one workload (program_run.hpp).
#include "program/program_run.hpp"

#include <optional>
#include <stdexcept>
#include <utility>

#include "eval/buffer_ops.hpp"
#include "kernelevolve/error.hpp"

namespace kernelevolve::program {

std::map<std::string, std::int64_t> CompiledProgram::resources() const {
  if (kernels.size() == 1) return kernels[0]->resources();
  std::map<std::string, std::int64_t> out;
  out["steps"] = static_cast<std::int64_t>(kernels.size());
  for (std::size_t s = 0; s < kernels.size(); ++s) {
    for (const auto& [name, value] : kernels[s]->resources()) out["step" + std::to_string(s + 1) + "." + name] = value;
  }
  return out;
}

namespace {

// A Triton step's own num_warps and num_stages (PlanStep) over the program's: "" or why they cannot be had.
std::string own_options(const PlanStep& step, Bindings& defines) {
  const std::pair<const std::optional<Expr>&, const char*> owns[] = {{step.num_warps, "num_warps"},
                                                                     {step.num_stages, "num_stages"}};
  for (const auto& [expr, name] : owns) {
    if (!expr) continue;
    std::int64_t value = 0;
    try {
      value = expr->eval(defines);
    } catch (const Error& e) {
      return std::string(name) + " '" + expr->text() + "' of " + step.kernel + ": " + e.what();
    }
    if (const std::string takes = triton_option_refusal(name, value); !takes.empty())
      return std::string(name) + " of " + step.kernel + " is " + std::to_string(value) + " (" + expr->text() +
             "): Triton takes " + takes;
    defines[name] = value;
  }
  return "";
}

}  // namespace

CompiledProgram compile(Device& device, const Spec& spec, const Candidate& candidate, Plan plan) {
  CompiledProgram out;
  out.plan = std::move(plan);
  // One compile per kernel and signature: two steps that launch one kernel alike share it.
  std::map<std::string, std::shared_ptr<Kernel>> compiled;
  std::vector<std::shared_ptr<Kernel>> kernels;
  const bool several = out.plan.steps.size() > 1;
  for (std::size_t s = 0; s < out.plan.steps.size(); ++s) {
    const PlanStep& step = out.plan.steps[s];
    const std::vector<Param> signature = out.plan.signature(spec, s);
    std::string key = step.name() + "(";
    for (const Param& p : signature) key += std::string(to_string(p.dtype)) + to_string(p.role) + ",";
    for (const auto& [k, v] : step.options) key += k + "=" + v + ";";
    if (step.num_warps) key += "num_warps=" + step.num_warps->text() + ";";
    if (step.num_stages) key += "num_stages=" + step.num_stages->text() + ";";
    if (auto it = compiled.find(key); it != compiled.end()) {
      kernels.push_back(it->second);
      continue;
    }
    const std::string head = several ? "[step " + std::to_string(s + 1) + ": " + step.name() + "]\n" : "";
    std::shared_ptr<Kernel> kernel;
    if (step.is_library()) {
      std::string log;
      kernel = device.library_step(step.library, step.options, signature, log);
      out.log += head + log;
    } else {
      KernelSource ks;
      ks.source = candidate.source;
      ks.language = candidate.language;
      ks.entry = step.kernel;
      ks.params = signature;
      ks.defines = candidate.tunables;
      if (std::string why = own_options(step, ks.defines); !why.empty()) {
        out.log += head + "error: " + why + "\n";
        out.failed_step = "step " + std::to_string(s + 1) + " (" + step.name() + ")";
        return out;
      }
      CompileResult r = device.compile(ks);
      out.log += r.log.empty() ? "" : head + r.log;
      out.compile_ms += r.compile_ms;
      out.refused = out.refused || r.refused;
      kernel = r.kernel;
      if (!kernel && out.missing_entry.empty()) {
        // Whether the source names the entry at all, outside the plan that launches it.
        const PlanBlock block = find_plan_block(candidate.source, candidate.language);
        std::string code = candidate.source;
        if (block.found()) code.erase(block.marker, block.end - block.marker);
        bool mentioned = false;
        for (std::size_t at = code.find(step.kernel); at != std::string::npos && !mentioned;
             at = code.find(step.kernel, at + 1)) {
          auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
          const std::size_t end = at + step.kernel.size();
          mentioned = (at == 0 || !ident(code[at - 1])) && (end >= code.size() || !ident(code[end]));
        }
        if (!mentioned) out.missing_entry = step.kernel;
      }
    }
    if (!kernel) {
      out.failed_step = "step " + std::to_string(s + 1) + " (" + step.name() + ")";
      out.library_failed = step.is_library();
      return out;  // kernels stays short: not ok()
    }
    compiled.emplace(key, kernel);
    kernels.push_back(kernel);
  }
  out.kernels = std::move(kernels);
  return out;
}

ProgramLaunch::ProgramLaunch(Device& device, const CompiledProgram& program, const BoundPlan& bound, void** param_args,
                             const std::vector<std::size_t>& param_bytes)
    : device_(device), program_(program), values_(bound.values) {
  const Plan& plan = program.plan;
  temporaries_.reserve(plan.temporaries.size());
  temporary_ptrs_.resize(plan.temporaries.size());
  for (std::size_t t = 0; t < plan.temporaries.size(); ++t) {
    temporaries_.push_back(device.allocate(std::max<std::size_t>(1, bound.temporary_bytes[t])));
    temporary_ptrs_[t] = temporaries_.back()->data();
  }
  args_.resize(plan.steps.size());
  for (std::size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep& step = plan.steps[s];
    std::vector<void*>& args = args_[s];
    for (std::size_t a = 0; a < step.args.size(); ++a) {
      const StepArg& arg = step.args[a];
      switch (arg.kind) {
        case StepArg::Kind::param: args.push_back(param_args[arg.index]); break;
        case StepArg::Kind::temporary: args.push_back(&temporary_ptrs_[arg.index]); break;
        case StepArg::Kind::value: args.push_back(&values_[s][a]); break;
      }
    }
    if (step.is_library()) {
      std::vector<std::size_t> bytes;
      for (const StepArg& arg : step.args) {
        bytes.push_back(arg.kind == StepArg::Kind::param       ? param_bytes.at(arg.index)
                        : arg.kind == StepArg::Kind::temporary ? bound.temporary_bytes.at(arg.index)
                                                               : 0);
      }
      if (std::string why = program.kernels.at(s)->check_arguments(args.data(), bytes); !why.empty()) {
        throw PlanError("the plan's step " + std::to_string(s + 1) + ": " + why);
      }
    }
    LaunchStep launch;
    launch.kernel = program.kernels.at(s).get();
    launch.args = args.data();
    launch.dims = bound.dims.at(s);
    steps_.push_back(launch);
  }
  for (std::size_t t = 0; t < temporaries_.size(); ++t) eval::poison(*temporaries_[t], plan.temporaries[t].dtype);
}

LaunchResult ProgramLaunch::run(bool timed, bool flush_cache, std::vector<double>* each) {
  return named(device_.launch_steps(steps_, timed, flush_cache, each));
}

LaunchResult ProgramLaunch::enqueue(void* stream) { return named(device_.enqueue_steps(steps_, stream)); }

LaunchResult ProgramLaunch::named(LaunchResult r) const {
  if (!r.ok && program_.plan.steps.size() > 1 && r.failed_step < program_.plan.steps.size()) {
    r.error = "step " + std::to_string(r.failed_step + 1) + " (" + program_.plan.steps[r.failed_step].name() +
              "): " + r.error;
  }
  return r;
}

}  // namespace kernelevolve::program
