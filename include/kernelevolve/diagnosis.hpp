// Diagnosis: where an ok candidate's time goes, for people (`kernelevolve show`), tools (JSON) and the model's
// prompt: per workload the achieved rates against the device's ceilings and the bound they suggest; on a GPU
// the kernel's registers, spills, shared memory and the occupancy they allow for its launch.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernelevolve/candidate.hpp"
#include "kernelevolve/device.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve {

// What limits a workload's time, read off the roofline: the ceiling whose share the kernel reaches more of
// (memory or compute), or neither when it reaches under kLatencyBoundShare of both: then launch or call
// overhead, latency, or memory traffic beyond the spec's byte count (cache misses, re-reads) take the time.
// Unknown where the spec gives no cost, or the device no ceiling, to tell by.
enum class Bound { unknown, memory, compute, latency };
// "memory-bound", "compute-bound", "latency/overhead-bound", "bound unknown".
const char* to_string(Bound bound);

// Under 10% of both ceilings a kernel is far from either: a copy-like kernel on a GPU reaches 70-90% of the
// copy rate, a tuned matrix product over half the FMA rate, and a naive one a few percent.
constexpr double kLatencyBoundShare = 0.10;
// Where the spec counts only bytes or only flops, the one ceiling known names the bound only from this
// share of it on: under it, the uncounted work may be what takes the time.
constexpr double kSoleCeilingShare = 0.50;

struct WorkloadDiagnosis {
  double time_us = 0;                     // the median time the rates are computed from
  std::optional<double> bytes_per_s;      // the spec's cost.bytes over the time; none without cost.bytes
  std::optional<double> flops_per_s;      // cost.flops over the time; none without cost.flops
  std::optional<double> bandwidth_share;  // bytes_per_s over the device's peak_bytes_per_s (a measured copy)
  std::optional<double> compute_share;    // flops_per_s over compute_peak (fitness.hpp)
  // What compute_share is of: "FMA peak" (kernel_peak_flops: one core's on a CPU), or for bf16 and fp16 work
  // "bf16 tensor peak" / "fp16 tensor peak"; and where such work meets the FMA peak since its tensor peak is
  // unknown, that ("bf16 tensor peak unknown").
  std::string compute_peak = "FMA peak";
  std::string compute_peak_note;
  Bound bound = Bound::unknown;
};

// What a GPU's driver and compiler said of the kernel (Evaluation::resources), in the terms a person tunes
// by. Each is absent where the device did not say.
struct GpuDiagnosis {
  std::optional<std::int64_t> registers;              // per thread
  std::optional<std::int64_t> spill_bytes;            // bytes spilled to local memory (ptxas's spill stores)
  std::optional<std::int64_t> local_bytes;            // local memory per thread: stack and spills
  std::optional<std::int64_t> shared_static_bytes;    // per block
  std::optional<std::int64_t> dynamic_shared_bytes;   // per block, as launched
  std::optional<std::int64_t> max_threads_per_block;  // the kernel's limit (__launch_bounds__ or the device's)
  std::optional<std::int64_t> block_threads;          // the block it was launched with (the first workload's)
  std::optional<std::int64_t> active_blocks_per_sm;   // blocks resident on one SM (CU) at once, per the driver
  std::optional<std::int64_t> occupancy_pct;          // the warps those blocks hold, over the SM's most
};

// One step of a program of several (program.hpp): what it launches, its share of the program's time (over
// every workload, each step timed alone), on a GPU its kernel's resources, and its kernel's hardware
// counters where they were collected.
struct StepDiagnosis {
  std::string name;  // the kernel, or the library call ("cublaslt.matmul"); "step N" where the source is unknown
  bool library = false;
  std::optional<double> share;
  std::optional<GpuDiagnosis> gpu;
  std::map<std::string, std::int64_t> counters;  // "hw_..." from the resources' "stepN.hw_..."; none for a library step
};

struct Diagnosis {
  std::vector<WorkloadDiagnosis> workloads;  // one per timed workload
  std::optional<GpuDiagnosis> gpu;           // on a GPU only, for a program of one kernel
  std::vector<StepDiagnosis> steps;          // a program of several steps; empty for one
  // The share of the time library steps took, where the program calls one.
  std::optional<double> library_share;
  // Hardware counters, where they were collected (resources named "hw_...": counters.hpp, Nsight Compute
  // on a GPU with EvolverOptions::hardware_counters, for each new best). A program of several steps has
  // each kernel step's in `steps`, and here its longest kernel's.
  std::map<std::string, std::int64_t> counters;
  // Why the shares are unknown when the device gives no ceilings for it (a node measured on another class
  // of device than the one whose ceilings are known); empty otherwise.
  std::string note;
};

// The diagnosis of an evaluation (ok, with its timings) of a candidate with `tunables`, against `device`'s
// ceilings. A pure function of what the store keeps (the spec, the node's tunables, times and resources, the
// run's device), so a stored run is diagnosed again on reading. An evaluation measured on another class of
// device than `device` (Evaluation::device) gets rates but no shares. None for an evaluation that is not ok.
// A program's steps as its evaluation's resources give them ("steps", "stepN.*"), each named from the plan
// of `candidate` where given and readable, else "step N"; empty for a program of one step.
std::vector<StepDiagnosis> program_steps(const Spec& spec, const Evaluation& evaluation, const Candidate* candidate);
// `candidate`, where given, names a program's steps (its plan) and marks its library steps.
std::optional<Diagnosis> diagnose(const Spec& spec, const Bindings& tunables, const Evaluation& evaluation,
                                  const DeviceInfo& device, const Candidate* candidate = nullptr);

// One workload, compact: "412 us, 410 GB/s (82% of copy peak), 1.2 TFLOP/s (3% of FMA peak), memory-bound"; bf16
// work "... 610 TFLOP/s (78% of bf16 tensor peak) ...", or "(1200% of FMA peak; bf16 tensor peak unknown)".
std::string workload_diagnosis_text(const WorkloadDiagnosis& workload);
// The GPU part, compact: "regs 40, spills 0 B, smem 4096 B, occupancy 75% (block 256, 6 blocks/SM)".
std::string gpu_diagnosis_text(const GpuDiagnosis& gpu);
// One step of a program, compact: "step 2 bias_relu 18% of the time, regs 16, ..." (`index` from 0).
std::string step_diagnosis_text(const StepDiagnosis& step, std::size_t index);
// Every workload ("w0 ...; w1 ...") then the GPU part, a program's steps and any counters (a program's
// with its steps, not again after them), on one line.
std::string diagnosis_text(const Diagnosis& diagnosis);
// {"workloads": [{"time_us", "gbps", "gflops", "bandwidth_share", "compute_share", "compute_peak", "bound"}], where
// compute_peak names what compute_share is of (its note after a "; "), "gpu": {...} or
// null, "steps": [{"name", "library", "share", "counters": {...}}], "library_share", "counters": {...},
// "note": "..."}: unknown values are null.
std::string diagnosis_json(const Diagnosis& diagnosis);

}  // namespace kernelevolve
