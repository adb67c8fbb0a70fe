// Speedup, the roofline floor and achieved rates: the arithmetic that turns times into the report.
#include <algorithm>
#include <cmath>

#include "kernelevolve/fitness.hpp"

namespace kernelevolve {

const char* to_string(Status s) {
  switch (s) {
    case Status::pending: return "pending";
    case Status::ok: return "ok";
    case Status::compile_error: return "compile_error";
    case Status::incorrect: return "incorrect";
    case Status::crashed: return "crashed";
    case Status::timeout: return "timeout";
    case Status::invalid: return "invalid";
  }
  return "?";
}

std::optional<Status> parse_status(const std::string& s) {
  for (Status x : {Status::pending, Status::ok, Status::compile_error, Status::incorrect, Status::crashed,
                   Status::timeout, Status::invalid}) {
    if (s == to_string(x)) return x;
  }
  return std::nullopt;
}

std::vector<double> Evaluation::median_us() const {
  std::vector<double> out;
  for (const auto& t : timings) out.push_back(t.median_us);
  return out;
}

double speedup(const Evaluation& baseline, const Evaluation& candidate) {
  if (baseline.status != Status::ok || candidate.status != Status::ok) return 0;
  if (baseline.timings.size() != candidate.timings.size() || baseline.timings.empty()) return 0;
  double log_sum = 0;
  for (std::size_t i = 0; i < baseline.timings.size(); ++i) {
    const double b = baseline.timings[i].median_us, c = candidate.timings[i].median_us;
    if (!(b > 0) || !(c > 0)) return 0;
    log_sum += std::log(b / c);
  }
  return std::exp(log_sum / static_cast<double>(baseline.timings.size()));
}

namespace {
double cost(const std::optional<Expr>& e, const Spec& spec, const Bindings& workload, const Bindings& tunables) {
  return e ? static_cast<double>(e->eval(spec.bindings(workload, tunables))) : 0.0;
}
}  // namespace

std::optional<DType> tensor_core_dtype(const Spec& spec) {
  bool bf16 = false, f16 = false;
  for (const Param& p : spec.params) {
    if (!(p.role == Role::in || p.role == Role::inout) || !is_float(p.dtype)) continue;
    if (p.dtype == DType::bf16) bf16 = true;
    else if (p.dtype == DType::f16) f16 = true;
    else return std::nullopt;  // fp32 or wider: the FMA units' work
  }
  if (bf16) return DType::bf16;
  if (f16) return DType::f16;
  return std::nullopt;
}

ComputePeak compute_peak(const Spec& spec, const DeviceInfo& device) {
  ComputePeak peak;
  peak.flops_per_s = kernel_peak_flops(device);
  peak.name = "FMA peak";
  const std::optional<DType> dtype = tensor_core_dtype(spec);
  if (!dtype) return peak;
  const char* type = *dtype == DType::bf16 ? "bf16" : "fp16";
  const double rate = *dtype == DType::bf16 ? device.bf16_tensor_flops_per_s : device.fp16_tensor_flops_per_s;
  if (!(rate > 0)) {
    peak.fallback = std::string(type) + " tensor peak unknown";
    return peak;
  }
  peak.flops_per_s = rate;
  peak.name = std::string(type) + " tensor peak";
  peak.tensor = true;
  return peak;
}

double roofline_floor_us(const Spec& spec, const Bindings& workload, const Bindings& tunables,
                         const DeviceInfo& device) {
  const double bytes = cost(spec.cost_bytes, spec, workload, tunables);
  const double flops = cost(spec.cost_flops, spec, workload, tunables);
  double floor_s = 0;
  // The floor uses the fastest rate anything could reach (caches included), so no honest time is under it.
  const double byte_rate = device.floor_bytes_per_s > 0 ? device.floor_bytes_per_s : device.peak_bytes_per_s;
  if (bytes > 0 && byte_rate > 0) floor_s = std::max(floor_s, bytes / byte_rate);
  // bf16 and fp16 work may run on the tensor cores, far past the FMA peak: its own peak, with room (see
  // kTensorFloorFactor), or no flop floor at all where that is unknown.
  double flop_rate = device.peak_flops_per_s;
  if (tensor_core_dtype(spec)) {
    const ComputePeak peak = compute_peak(spec, device);
    flop_rate = peak.tensor ? kTensorFloorFactor * peak.flops_per_s : 0;
  }
  if (flops > 0 && flop_rate > 0 && spec.cost_flops_floor) floor_s = std::max(floor_s, flops / flop_rate);
  return floor_s * 1e6;
}

double achieved_bytes_per_s(const Spec& spec, const Bindings& workload, const Bindings& tunables, double time_us) {
  return time_us > 0 ? cost(spec.cost_bytes, spec, workload, tunables) / (time_us * 1e-6) : 0.0;
}

double achieved_flops_per_s(const Spec& spec, const Bindings& workload, const Bindings& tunables, double time_us) {
  return time_us > 0 ? cost(spec.cost_flops, spec, workload, tunables) / (time_us * 1e-6) : 0.0;
}

}  // namespace kernelevolve
