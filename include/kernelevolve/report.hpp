// Reports of a run for people and programs: the JSON object of `kernelevolve run --json` and a text summary.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernelevolve/device.hpp"
#include "kernelevolve/evolver.hpp"
#include "kernelevolve/json.hpp"

namespace kernelevolve {

// Share of the device's measured roofline that a time reaches: the larger of achieved bandwidth over
// peak bandwidth and achieved flops over peak flops, the tensor-core peak for bf16 and fp16 work where the device
// knows it (compute_peak), else the FMA peak (0 when the spec has no cost).
double roofline_share(const Spec& spec, const Bindings& workload, const Bindings& tunables, double time_us,
                      const DeviceInfo& device);

// A run's precision (spec.hpp) as the JSON object of `--json`'s "precision", with the reference error factor.
std::string precision_json(const Precision& precision);

// The mark to beat (issue 50): per workload, the faster of the baselines timed there (PyTorch eager and
// torch.compile, under the run's precision), and which one it was. Empty when some workload has no baseline time.
struct BestBaseline {
  std::vector<double> time_us;
  std::vector<std::string> name;
  bool empty() const { return time_us.empty(); }
};
BestBaseline best_baseline(const std::vector<Baseline>& baselines, std::size_t workloads);
// Geometric mean over workloads of the best baseline's time over `best`'s; NaN when there is no best baseline or
// `best` has no time on some workload.
double speedup_over_best_baseline(const std::vector<Baseline>& baselines, const Evaluation& best);

// A confirmation (evolver.hpp) as a JSON object, and as one line for people.
std::string confirmation_json(const Confirmation& confirmation);
std::string confirmation_text(const Confirmation& confirmation);

// The contract of DESIGN.md: spec, device, run, evaluations, status_counts, seed, best (with source), stop_reason.
std::string run_report_json(const Spec& spec, const DeviceInfo& device, const SearchGraph& graph,
                            const RunResult& result, std::int64_t run_id = 1);
// A table for a terminal: per workload the seed's and the best's time, speedup, rates and roofline share.
std::string run_report_text(const Spec& spec, const DeviceInfo& device, const SearchGraph& graph,
                            const RunResult& result);

}  // namespace kernelevolve
