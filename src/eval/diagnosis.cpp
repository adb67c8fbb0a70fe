// The diagnosis of an ok candidate: achieved rates from the spec's cost, their shares of the device's
// ceilings and the bound; a GPU kernel's resources and occupancy; and the text and JSON they are shown in.
#include "kernelevolve/diagnosis.hpp"
#include "kernelevolve/program.hpp"

#include "kernelevolve/counters.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernelevolve/json.hpp"

namespace kernelevolve {

const char* to_string(Bound bound) {
  switch (bound) {
    case Bound::memory: return "memory-bound";
    case Bound::compute: return "compute-bound";
    case Bound::latency: return "latency/overhead-bound";
    case Bound::unknown: break;
  }
  return "bound unknown";
}

namespace {

// The rate a cost expression gives over a time; none where the spec has no such cost or it cannot be
// evaluated for this workload (a division by zero in the user's expression, say).
std::optional<double> rate(const std::optional<Expr>& cost, const Spec& spec, const Bindings& workload,
                           const Bindings& tunables, double time_us) {
  if (!cost || !(time_us > 0)) return std::nullopt;
  try {
    return static_cast<double>(cost->eval(spec.bindings(workload, tunables))) / (time_us * 1e-6);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<double> share(const std::optional<double>& achieved, double ceiling) {
  if (!achieved || !(ceiling > 0)) return std::nullopt;
  return *achieved / ceiling;
}

Bound bound_of(const std::optional<double>& bandwidth, const std::optional<double>& compute) {
  if (bandwidth && compute) {
    if (std::max(*bandwidth, *compute) < kLatencyBoundShare) return Bound::latency;
    return *bandwidth >= *compute ? Bound::memory : Bound::compute;
  }
  // One ceiling alone tells only when the kernel is near it: far under it, the other may be what binds (a
  // matrix product whose flops the spec does not count ran at 22% of the copy rate, and was called
  // memory-bound to a model that could see it was not).
  if (bandwidth && *bandwidth >= kSoleCeilingShare) return Bound::memory;
  if (compute && *compute >= kSoleCeilingShare) return Bound::compute;
  return Bound::unknown;
}

std::optional<std::int64_t> resource(const Evaluation& e, const char* name) {
  const auto it = e.resources.find(name);
  if (it == e.resources.end()) return std::nullopt;
  return it->second;
}

std::string format(const char* pattern, double x) {
  char buf[48];
  std::snprintf(buf, sizeof buf, pattern, x);
  return buf;
}

// Three significant figures or so, without an exponent for the sizes seen here.
std::string figure(double x) {
  if (x >= 100) return format("%.0f", x);
  if (x >= 10) return format("%.1f", x);
  if (x >= 0.1) return format("%.2f", x);
  return format("%.3g", x);
}

// Whole percents, but a tenth under one percent: "0%" would say nothing at all was reached.
std::string percent(double share) {
  return (share >= 0.01 ? format("%.0f", 100 * share) : format("%.1f", 100 * share)) + "%";
}

std::string flops_text(double flops_per_s) {
  if (flops_per_s >= 1e12) return figure(flops_per_s / 1e12) + " TFLOP/s";
  return figure(flops_per_s / 1e9) + " GFLOP/s";
}

std::string number(const std::optional<double>& x, double scale = 1) {
  if (!x || !std::isfinite(*x)) return "null";
  return format("%.6g", *x / scale);
}

std::string integer(const std::optional<std::int64_t>& x) { return x ? std::to_string(*x) : "null"; }

std::string counters_json(const std::map<std::string, std::int64_t>& counters) {
  std::string out = "{";
  for (const auto& [name, value] : counters)
    out += (out.size() > 1 ? ", " : "") + json_quote(name) + ": " + std::to_string(value);
  return out + "}";
}

// What a GPU said of a kernel, under `prefix` in the resources (a program's "stepN.").
std::optional<GpuDiagnosis> gpu_of(const Evaluation& evaluation, const std::string& prefix) {
  if (!resource(evaluation, (prefix + "registers").c_str())) return std::nullopt;
  GpuDiagnosis g;
  g.registers = resource(evaluation, (prefix + "registers").c_str());
  g.spill_bytes = resource(evaluation, (prefix + "spill_store_bytes").c_str());
  g.local_bytes = resource(evaluation, (prefix + "local_bytes").c_str());
  g.shared_static_bytes = resource(evaluation, (prefix + "shared_static_bytes").c_str());
  g.dynamic_shared_bytes = resource(evaluation, (prefix + "dynamic_shared_bytes").c_str());
  g.max_threads_per_block = resource(evaluation, (prefix + "max_threads_per_block").c_str());
  g.block_threads = resource(evaluation, (prefix + "block_threads").c_str());
  g.active_blocks_per_sm = resource(evaluation, (prefix + "active_blocks_per_sm").c_str());
  g.occupancy_pct = resource(evaluation, (prefix + "occupancy_pct").c_str());
  return g;
};
}  // namespace

std::vector<StepDiagnosis> program_steps(const Spec& spec, const Evaluation& evaluation, const Candidate* candidate) {
  std::vector<StepDiagnosis> out;
  const auto steps = resource(evaluation, "steps");
  if (!steps || *steps < 2) return out;
  std::optional<Plan> plan;
  if (candidate) {
    try {
      plan = plan_of(spec, candidate->source, candidate->language);
    } catch (const PlanError&) {
    }
  }
  for (std::int64_t i = 1; i <= *steps; ++i) {
    const std::string prefix = "step" + std::to_string(i) + ".";
    StepDiagnosis step;
    const auto index = static_cast<std::size_t>(i - 1);
    const bool named = plan && index < plan->steps.size();
    step.name = named ? plan->steps[index].name() : "step " + std::to_string(i);
    step.library =
        named ? plan->steps[index].is_library() : resource(evaluation, (prefix + "library").c_str()).has_value();
    if (const auto permille = resource(evaluation, (prefix + "share_permille").c_str()))
      step.share = static_cast<double>(*permille) / 1000.0;
    step.gpu = gpu_of(evaluation, prefix);
    const std::string counter_prefix = prefix + "hw_";
    for (auto it = evaluation.resources.lower_bound(counter_prefix);
         it != evaluation.resources.end() && it->first.rfind(counter_prefix, 0) == 0; ++it)
      step.counters[it->first.substr(prefix.size())] = it->second;
    out.push_back(std::move(step));
  }
  return out;
}

std::optional<Diagnosis> diagnose(const Spec& spec, const Bindings& tunables, const Evaluation& evaluation,
                                  const DeviceInfo& device, const Candidate* candidate) {
  if (evaluation.status != Status::ok) return std::nullopt;
  Diagnosis d;
  // Ceilings of another class of device would make shares that mean nothing.
  const bool own_ceilings = evaluation.device.empty() || evaluation.device == FitnessEvaluator::device_class(device);
  if (!own_ceilings) {
    d.note = "measured on " + evaluation.device + ", whose ceilings this run does not know: shares unknown";
  }
  const double peak_bytes = own_ceilings ? device.peak_bytes_per_s : 0;
  ComputePeak peak = compute_peak(spec, device);  // one core's FMA peak on a CPU; bf16 work's tensor peak
  if (!own_ceilings) peak.flops_per_s = 0;
  for (std::size_t w = 0; w < evaluation.timings.size(); ++w) {
    WorkloadDiagnosis wd;
    wd.time_us = evaluation.timings[w].median_us;
    if (w < spec.workloads.size()) {
      wd.bytes_per_s = rate(spec.cost_bytes, spec, spec.workloads[w], tunables, wd.time_us);
      wd.flops_per_s = rate(spec.cost_flops, spec, spec.workloads[w], tunables, wd.time_us);
    }
    wd.bandwidth_share = share(wd.bytes_per_s, peak_bytes);
    wd.compute_share = share(wd.flops_per_s, peak.flops_per_s);
    wd.compute_peak = peak.name;
    wd.compute_peak_note = peak.fallback;
    wd.bound = bound_of(wd.bandwidth_share, wd.compute_share);
    d.workloads.push_back(wd);
  }
  // The GPU devices always report registers (gpu::Driver::resources); the CPU's kernels never do. A program
  // of several steps has each step's under "stepN." (program_run.hpp).
  d.gpu = gpu_of(evaluation, "");
  d.steps = program_steps(spec, evaluation, candidate);
  if (!d.steps.empty()) {
    for (const StepDiagnosis& step : d.steps)
      if (step.library && step.share) d.library_share = d.library_share.value_or(0) + *step.share;
  } else if (resource(evaluation, "library")) {
    d.library_share = 1.0;  // a program that is one library call
  }
  for (const auto& [name, value] : evaluation.resources) {
    if (name.rfind("hw_", 0) == 0) d.counters[name] = value;  // a step's ("stepN.hw_...") are in d.steps
  }
  return d;
}

std::string workload_diagnosis_text(const WorkloadDiagnosis& w) {
  std::string out = figure(w.time_us) + " us, ";
  if (w.bytes_per_s) {
    out += figure(*w.bytes_per_s / 1e9) + " GB/s";
    out += w.bandwidth_share ? " (" + percent(*w.bandwidth_share) + " of copy peak)" : " (copy peak unknown)";
  } else {
    out += "GB/s unknown (the spec has no cost.bytes)";
  }
  out += ", ";
  if (w.flops_per_s) {
    out += flops_text(*w.flops_per_s);
    const std::string note = w.compute_peak_note.empty() ? "" : "; " + w.compute_peak_note;
    out += w.compute_share ? " (" + percent(*w.compute_share) + " of " + w.compute_peak + note + ")"
                           : " (" + w.compute_peak + " unknown" + note + ")";
  } else {
    out += "FLOP/s unknown (the spec has no cost.flops)";
  }
  return out + ", " + to_string(w.bound);
}

std::string gpu_diagnosis_text(const GpuDiagnosis& g) {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (g.registers) add("regs " + std::to_string(*g.registers));
  if (g.spill_bytes) {
    add("spills " + std::to_string(*g.spill_bytes) + " B");
  } else if (g.local_bytes) {
    add("local " + std::to_string(*g.local_bytes) + " B");
  }
  if (g.shared_static_bytes || g.dynamic_shared_bytes) {
    add("smem " + std::to_string(g.shared_static_bytes.value_or(0) + g.dynamic_shared_bytes.value_or(0)) + " B");
  }
  if (g.occupancy_pct) {
    std::string occupancy = "occupancy " + std::to_string(*g.occupancy_pct) + "%";
    if (g.block_threads && g.active_blocks_per_sm) {
      occupancy += " (block " + std::to_string(*g.block_threads) + ", " + std::to_string(*g.active_blocks_per_sm) +
                   " blocks/SM)";
    }
    add(occupancy);
  } else {
    add("occupancy unknown");
  }
  return out;
}

std::string step_diagnosis_text(const StepDiagnosis& step, std::size_t index) {
  std::string out = "step " + std::to_string(index + 1) + " " + step.name + (step.library ? " (library)" : "") +
                    (step.share ? " " + percent(*step.share) + " of the time" : "");
  if (step.gpu) out += ", " + gpu_diagnosis_text(*step.gpu);
  if (const std::string c = counters_text(step.counters); !c.empty()) out += ", " + c;
  return out;
}

std::string diagnosis_text(const Diagnosis& d) {
  std::string out;
  for (std::size_t w = 0; w < d.workloads.size(); ++w) {
    out += (w ? "; w" : "w") + std::to_string(w) + " " + workload_diagnosis_text(d.workloads[w]);
  }
  if (d.gpu) out += (out.empty() ? "" : "; ") + gpu_diagnosis_text(*d.gpu);
  for (std::size_t i = 0; i < d.steps.size(); ++i)
    out += (out.empty() ? "" : "; ") + step_diagnosis_text(d.steps[i], i);
  if (d.library_share)
    out += (out.empty() ? "" : "; ") + std::string("library calls ") + percent(*d.library_share) + " of the time";
  // A program's steps said their counters; the top-level ones are its longest kernel's again.
  const bool steps_counted =
      std::any_of(d.steps.begin(), d.steps.end(), [](const StepDiagnosis& s) { return !s.counters.empty(); });
  if (const std::string c = counters_text(d.counters); !c.empty() && !steps_counted)
    out += (out.empty() ? "" : "; ") + c;
  if (!d.note.empty()) out += (out.empty() ? "" : " (") + d.note + (out.empty() ? "" : ")");
  return out;
}

std::string diagnosis_json(const Diagnosis& d) {
  std::string out = "{\"workloads\": [";
  for (std::size_t w = 0; w < d.workloads.size(); ++w) {
    const WorkloadDiagnosis& x = d.workloads[w];
    out += std::string(w ? ", " : "") + "{\"time_us\": " + number(x.time_us) +
           ", \"gbps\": " + number(x.bytes_per_s, 1e9) + ", \"gflops\": " + number(x.flops_per_s, 1e9) +
           ", \"bandwidth_share\": " + number(x.bandwidth_share) + ", \"compute_share\": " + number(x.compute_share) +
           ", \"compute_peak\": " +
           json_quote(x.compute_peak + (x.compute_peak_note.empty() ? "" : "; " + x.compute_peak_note)) +
           ", \"bound\": " + json_quote(to_string(x.bound)) + "}";
  }
  out += "], \"gpu\": ";
  if (d.gpu) {
    const GpuDiagnosis& g = *d.gpu;
    out += "{\"registers\": " + integer(g.registers) + ", \"spill_bytes\": " + integer(g.spill_bytes) +
           ", \"local_bytes\": " + integer(g.local_bytes) +
           ", \"shared_static_bytes\": " + integer(g.shared_static_bytes) +
           ", \"dynamic_shared_bytes\": " + integer(g.dynamic_shared_bytes) +
           ", \"max_threads_per_block\": " + integer(g.max_threads_per_block) +
           ", \"block_threads\": " + integer(g.block_threads) +
           ", \"active_blocks_per_sm\": " + integer(g.active_blocks_per_sm) +
           ", \"occupancy_pct\": " + integer(g.occupancy_pct) + "}";
  } else {
    out += "null";
  }
  out += ", \"steps\": [";
  for (std::size_t i = 0; i < d.steps.size(); ++i) {
    const StepDiagnosis& step = d.steps[i];
    out += std::string(i ? ", " : "") + "{\"name\": " + json_quote(step.name) +
           ", \"library\": " + (step.library ? "true" : "false") + ", \"share\": " + number(step.share) +
           ", \"counters\": " + counters_json(step.counters) + "}";
  }
  out += "], \"library_share\": " + number(d.library_share);
  out += ", \"counters\": " + counters_json(d.counters);
  return out + ", \"note\": " + json_quote(d.note) + "}";
}

}  // namespace kernelevolve
