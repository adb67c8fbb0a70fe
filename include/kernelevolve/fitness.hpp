// FitnessEvaluator: compiles, verifies and times a candidate against the spec's reference on a device
// (the fitness protocol of DESIGN.md). Fitness is the geometric-mean speedup over the seed across workloads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernelevolve/candidate.hpp"
#include "kernelevolve/counters.hpp"
#include "kernelevolve/device.hpp"
#include "kernelevolve/sandbox.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve {

enum class Status { pending, ok, compile_error, incorrect, crashed, timeout, invalid };
const char* to_string(Status);
std::optional<Status> parse_status(const std::string&);

// The worst element seen when comparing a candidate's output with the reference's.
struct Mismatch {
  std::string buffer;
  std::size_t workload = 0;
  int trial = 0;
  std::int64_t index = -1;
  double got = 0, expected = 0;
  double excess = 0;  // |got - expected| - (atol + rtol*|expected|); > 0 fails; +inf for NaN
};

struct WorkloadTiming {
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
  double mad_us = 0;  // median absolute deviation: the spread
  int samples = 0;
};

struct Evaluation {
  Status status = Status::pending;
  std::string message;  // why it is not ok, in one line (or a note when ok)
  std::string compile_log;
  double compile_ms = 0;
  std::vector<WorkloadTiming> timings;  // one per workload, when ok
  std::optional<Mismatch> worst;
  std::map<std::string, std::int64_t> resources;
  // The class of device that measured it ("cuda NVIDIA H200"): times compare only within a class.
  std::string device;
  std::vector<double> median_us() const;
};

struct EvalOptions {
  int trials = 5;           // verification trials per workload, each with fresh inputs
  int warmup = 2;           // untimed launches before timing
  int min_reps = 5;         // timed launches per workload, at least
  int max_reps = 200;       // and at most
  double target_ms = 60;    // timed launches stop once their sum passes this
  int input_sets = 3;       // inputs rotated among this many buffer sets while timing
  bool flush_cache = true;  // on GPUs, flush L2 between timed launches
  bool check_roofline = true;
  // Fail a kernel whose threads outlive its call (work done behind the timer's back). Only sound where
  // nothing else in the process starts threads meanwhile: the worker process sets it.
  bool check_threads = false;
  // A file locked (flock) around each timing loop, so timings of parallel evaluations on one device,
  // in this process or another, never overlap. Empty: no lock.
  std::string timing_lock;
  // The device's memory in bytes, as the run is to take it: 0 asks $KE_DEVICE_MEMORY, else the device
  // (memory_footprint below). Smaller than the device's own figure, it holds a run to less of it.
  std::size_t device_memory_bytes = 0;
};

// What a run holds on its device for a problem (docs/devices.md, "What a run holds on the device"). Sizes are of
// the problem's largest workload: a worker's buffers are made per workload and freed after it.
struct MemoryFootprint {
  // The problem's bytes: one copy of each buffer param (inputs, weights, outputs).
  std::size_t problem_bytes = 0;
  std::size_t input_bytes = 0, output_bytes = 0, inout_bytes = 0;
  // A PyTorch reference's arena (the candidate's block and the reference's, shared with the bridge); 0 else.
  std::size_t arena_bytes = 0;
  // What one worker holds that grows with the problem: its blocks, and a PyTorch bridge's own tensors.
  std::size_t worker_bytes = 0;
  // What one worker holds whatever the problem: CUDA contexts and L2 flush buffers (an estimate).
  std::size_t fixed_bytes = 0;
  // What the workers of one device hold once between them: a shared PyTorch reference (its arena, its own
  // tensors, its process's fixed part). Then worker_bytes is 0: a worker holds only its fixed part.
  std::size_t shared_bytes = 0;
  std::size_t per_worker() const { return worker_bytes + fixed_bytes; }
  std::size_t for_jobs(std::size_t jobs) const { return shared_bytes + jobs * per_worker(); }
};
// Where one buffer of `bytes` lies in a PyTorch reference's arena (pytorch/torch_reference.cpp), which
// memory_footprint sizes: its data `front` bytes into the `reserved` it takes, on 256 bytes. On a GPU, where a
// kernel's buffers are carved from the arena, the bytes around the data are red zones, as a GPU allocation's are:
// a write just outside a buffer is caught there as anywhere else.
struct ArenaSlot {
  std::size_t front = 0, back = 0, reserved = 0;
};
ArenaSlot arena_slot(std::size_t bytes);

// `shared_reference`: a PyTorch problem's workers share one reference process and arena (WorkerOptions).
MemoryFootprint memory_footprint(const Spec& spec, const DeviceInfo& device, bool shared_reference = false);
// The device's memory in bytes: `told` when not 0, else $KE_DEVICE_MEMORY (bytes, or with a K, M, G or T
// suffix, binary), else the device's own figure (a GPU's total memory; on the CPU, what the kernel calls
// available now). 0 when none is known: nothing is then checked.
std::size_t device_memory_bytes(const DeviceInfo& device, std::size_t told = 0);
// As device_memory_bytes, but on the CPU the host's whole memory (MemTotal), not what is free now: for a limit
// whose verdict must not change from one run to the next (a plan's temporaries).
std::size_t device_capacity_bytes(const DeviceInfo& device, std::size_t told = 0);
// What a run may use of `device_bytes`: all but a twentieth, kept for fragmentation and other processes.
std::size_t usable_memory_bytes(std::size_t device_bytes);
// Throws Error(DeviceUnavailable) when one worker cannot fit, naming the bytes it needs and the device has
// (the same whether it shares its reference or not: a shared one holds what its own would).
void check_fits(const Spec& spec, const DeviceInfo& device, std::size_t device_bytes);
// How many of `jobs` workers a run keeps on one device: as many as its usable memory holds, and beyond the
// first only while they hold at most three times the problem's bytes or a quarter of the device, whichever
// is more. When fewer than `jobs`, `why` (if given) says why, with the numbers.
int jobs_that_fit(const Spec& spec, const DeviceInfo& device, std::size_t device_bytes, int jobs,
                  std::string* why = nullptr, bool shared_reference = false);
// Whether a PyTorch problem's workers on `device_id` share one reference (WorkerOptions::share_reference):
// unset, on a GPU (where verification and timing hold the device alone anyway), not on the CPU (where
// workers verify side by side).
bool shares_reference(const Spec& spec, const std::string& device_id, std::optional<bool> asked);

class FitnessEvaluator {
 public:
  virtual ~FitnessEvaluator() = default;
  // Evaluates one candidate. A bad candidate is a status, never an exception. `input_seed` seeds the
  // random inputs, so every evaluation draws fresh ones.
  virtual Evaluation evaluate(const Candidate& candidate, std::uint64_t input_seed) = 0;
  virtual DeviceInfo device_info() = 0;
  // The classes of device this evaluator measures on (kind and model, e.g. "cuda NVIDIA H200"). An
  // evaluator over mixed devices lists several; the search then keeps a seed time and a best per class.
  virtual std::vector<std::string> device_classes() { return {device_class(device_info())}; }
  // Evaluates on a device of the given class (an index into device_classes()).
  virtual Evaluation evaluate_on(std::size_t device_class_index, const Candidate& candidate, std::uint64_t input_seed) {
    (void)device_class_index;
    return evaluate(candidate, input_seed);
  }
  // Measures again, for real, on a device of the given class: what confirmation of a run's best uses. An
  // evaluator that answers from earlier measurements (ReusingEvaluator) must not answer this one so.
  virtual Evaluation measure_again(std::size_t device_class_index, const Candidate& candidate,
                                   std::uint64_t input_seed) {
    return device_classes().size() > 1 ? evaluate_on(device_class_index, candidate, input_seed)
                                       : evaluate(candidate, input_seed);
  }
  // The hardware counters of one launch of the candidate (counters.hpp), where this evaluator can collect
  // them: WorkerEvaluator on a GPU with WorkerOptions::nsight_compute. Slow (seconds: a profiler's start and
  // its replays), so asked for the nodes worth it, not every one. Never throws for a bad candidate.
  virtual CounterResult hardware_counters(const Candidate& candidate, std::uint64_t input_seed) {
    (void)candidate, (void)input_seed;
    CounterResult r;
    r.error = "this evaluator collects no hardware counters";
    return r;
  }
  // "kind name": what makes two devices' times comparable.
  static std::string device_class(const DeviceInfo& info) { return info.kind + " " + info.name; }
};

// Evaluates in the calling process. Fast, but a crashing candidate takes the process with it: use it for
// candidates you trust (your own template under parameter search); the worker evaluator isolates the rest.
class LocalEvaluator final : public FitnessEvaluator {
 public:
  // The reference runs on `reference_device` (the spec's reference.device, or `device` when null).
  LocalEvaluator(Spec spec, std::shared_ptr<Device> device, EvalOptions options = {},
                 std::shared_ptr<Device> reference_device = nullptr);
  ~LocalEvaluator() override;
  Evaluation evaluate(const Candidate& candidate, std::uint64_t input_seed) override;
  DeviceInfo device_info() override;
  // Called with true just before each run of the reference and with false after it returns, so that a
  // process evaluating for another (the worker) can blame a crash in the reference on the reference.
  void on_reference(std::function<void(bool running)> hook);
  // Called as an evaluation enters each phase ("compiling", "verifying ...", "timing ...", and waits for
  // the device between them), so that a process evaluating for another can say where a time limit hit.
  void on_phase(std::function<void(const std::string& phase)> hook);
  // Compiles the reference and the device's own checking kernels now rather than at first use. A worker
  // calls it before it is confined, while the toolchain's cache (NVRTC's) may still be written. A
  // reference that does not compile is reported by evaluate(), as without this call.
  void prepare();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct WorkerOptions {
  int jobs = 1;  // worker processes, each evaluating one candidate at a time
  // Time limit per candidate, in seconds. 0 derives it from the first evaluation (the seed's):
  // max(min_timeout_s, timeout_factor * its wall time); until then first_timeout_s applies.
  double timeout_s = 0;
  double min_timeout_s = 10;
  double timeout_factor = 10;
  double first_timeout_s = 300;
  std::string worker_path;  // empty: $KE_WORKER, else beside the library, ../libexec/kernelevolve, ../bin
  EvalOptions eval;
  // How each worker confines itself once set up (kernelevolve/sandbox.hpp): strict by default. A
  // confinement the machine lacks is reported once on stderr; `off` must be asked for, and is reported.
  SandboxMode sandbox = SandboxMode::strict;
  // Nsight Compute's path (find_nsight_compute()), for hardware_counters(); empty: none are collected.
  std::string nsight_compute;
  // A PyTorch problem's workers share one reference process and one arena (docs/devices.md, "What a run
  // holds on the device"): unset, on a CUDA GPU; true or false to say. $KE_SHARE_REFERENCE=0 or 1 when unset.
  std::optional<bool> share_reference;
};

// Evaluates each candidate in a persistent worker process (kernelevolve-worker) that this evaluator
// starts. A crash, an exit, a hang past the time limit or a corrupted process kills only the worker:
// the node is `crashed` (with the signal) or `timeout`, the worker is replaced, and the caller goes on.
// Thread-safe: up to `jobs` evaluations run at once.
class WorkerEvaluator final : public FitnessEvaluator {
 public:
  // Throws Error(DeviceUnavailable) if the worker cannot open the device, Error(Internal) if it cannot start.
  WorkerEvaluator(Spec spec, std::string device_id, WorkerOptions options = {});
  ~WorkerEvaluator() override;
  Evaluation evaluate(const Candidate& candidate, std::uint64_t input_seed) override;
  DeviceInfo device_info() override;
  // Runs a worker under Nsight Compute (options.nsight_compute) that evaluates the candidate once, and reads
  // the counters of the kernel's first launch. GPU devices only.
  CounterResult hardware_counters(const Candidate& candidate, std::uint64_t input_seed) override;
  // The time limit in force now (seconds).
  double timeout_s() const;
  // Workers started so far, replacements included.
  int workers_started() const;
  // Evaluations run at once: WorkerOptions::jobs, lowered to what the device's memory allows
  // (jobs_that_fit; stderr says so once).
  int jobs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The compute ceiling a spec's work meets on a device. Work whose float inputs are bf16 or fp16 (tensor_core_dtype)
// meets the device's tensor-core peak for that type (DeviceInfo::bf16_tensor_flops_per_s), the FMA peak standing
// in where that is unknown; anything else the FMA peak one kernel can reach (kernel_peak_flops).
struct ComputePeak {
  double flops_per_s = 0;  // 0: unknown
  std::string name;        // what a share is of: "FMA peak", "bf16 tensor peak", "fp16 tensor peak"
  bool tensor = false;     // the tensor-core peak
  // Where bf16 or fp16 work meets the FMA peak since the device's tensor peak for it is unknown, that in words:
  // "bf16 tensor peak unknown"; empty otherwise.
  std::string fallback;
};
// The type whose tensor-core peak bounds a spec's work: bf16 or f16 where every floating-point input buffer (in or
// inout) is one of them (bf16 where they mix), none where one is fp32 or fp64, or none is floating-point.
std::optional<DType> tensor_core_dtype(const Spec& spec);
ComputePeak compute_peak(const Spec& spec, const DeviceInfo& device);
// The roofline floor of bf16 or fp16 work takes its flops at this many times the measured tensor peak: on Hopper
// the mma.sync kernel reaches only part of wgmma's rate, and a library's product at one size is not every
// kernel's best, so the measured peak is no bound on what a kernel may reach. Without a tensor peak such work has
// no flop floor (the FMA peak is none for it).
constexpr double kTensorFloorFactor = 2.0;

// Geometric-mean speedup of `candidate` over `baseline` across workloads (both ok); 0 if either is not.
double speedup(const Evaluation& baseline, const Evaluation& candidate);
// The least time the spec's cost allows on `device` for one workload, in microseconds (0 if no cost).
double roofline_floor_us(const Spec& spec, const Bindings& workload, const Bindings& tunables,
                         const DeviceInfo& device);
// Achieved bytes per second and flops per second for one timing (0 where the spec has no cost).
double achieved_bytes_per_s(const Spec& spec, const Bindings& workload, const Bindings& tunables, double time_us);
double achieved_flops_per_s(const Spec& spec, const Bindings& workload, const Bindings& tunables, double time_us);

}  // namespace kernelevolve
