// Hardware counters of a GPU candidate: DRAM throughput, achieved occupancy and why warps stall, read by
// NVIDIA Nsight Compute (ncu) from one launch of each of its kernels in a worker started under it. They join
// the node's resources as "hw_..." entries (a program of several steps: "stepN.hw_..." per kernel step, and
// "hw_..." of its longest kernel), so the diagnosis, `kernelevolve show` and the model's prompt read them
// like the compiler's registers.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kernelevolve {

// What a collection gave: the counters, or why there are none.
struct CounterResult {
  std::map<std::string, std::int64_t> counters;  // "hw_dram_pct", "hw_stall_long_scoreboard_pct", ...
  std::string error;                             // empty when counters were read
  double seconds = 0;                            // the wall time the collection took
  bool ok() const { return error.empty(); }
};

// The counters kept, by name:
//   hw_dram_pct                DRAM throughput, % of its sustained peak (gpu__dram_throughput)
//   hw_dram_gbps               DRAM bytes read and written per second, in GB/s (dram__bytes.sum.per_second)
//   hw_sm_pct                  SM throughput, % of peak (sm__throughput): how busy the busiest SM unit is
//   hw_achieved_occupancy_pct  warps resident on an SM while active, % of the most it holds (sm__warps_active)
//   hw_duration_ns             the profiled launch's time at the profiler's locked clocks
//   hw_stall_<reason>_pct      the kStallReasons most common states a warp waits in, % of all warp states
//                              (smsp__average_warps_issue_stalled_<reason>_per_issue_active), "selected"
//                              (issuing) excluded from the choice but counted in the whole
constexpr int kStallReasons = 3;

// ncu's path: $KE_NCU, else ncu on $PATH, else /usr/local/cuda/bin/ncu. Empty when none is executable.
std::string find_nsight_compute();

// The arguments after ncu's own path that profile the first `launches` launches of kernels named one of
// `kernels` (a program's kernel steps; one name and one launch for a single kernel), once the program that
// follows them turns profiling on (cuProfilerStart), writing ncu's CSV ("raw" page, base units) to
// `log_path`. Names are matched whole; a character a regular expression would read as an operator is
// escaped. Throws Error (BadUsage) for no names, an empty name or fewer than one launch.
std::vector<std::string> nsight_compute_arguments(const std::vector<std::string>& kernels, int launches,
                                                  const std::string& log_path);

// One profiled launch: its kernel's name as ncu gives it (the function's base name) and its counters.
struct KernelCounters {
  std::string kernel;
  std::map<std::string, std::int64_t> counters;  // as CounterResult::counters
};

// Every profiled launch, in the order they ran, or why there are none.
struct KernelCountersResult {
  std::vector<KernelCounters> kernels;
  std::string error;  // empty when every launch's counters were read
  bool ok() const { return error.empty(); }
};

// Reads the counters out of ncu's CSV log (lines "==PROF==" and the like skipped): after the header and
// the units row, one row per profiled launch. The first kernel row is taken. An error names what is
// missing: no kernel profiled (the kernel never launched, or ncu was denied the counters:
// ERR_NVGPUCTRPERM), or none of the known metrics.
CounterResult counters_from_nsight_csv(const std::string& csv);

// Every kernel row of ncu's CSV log in order, each read as counters_from_nsight_csv reads the first. An
// error as there, or for a row that held none of the known metrics (naming its launch and kernel).
KernelCountersResult kernel_counters_from_nsight_csv(const std::string& csv);

// One line for people and the model: "DRAM 77% of peak (2592 GB/s), SM 10%, achieved occupancy 24%,
// stalls: long_scoreboard 87%, wait 5%, selected ..." from the hw_ entries of `counters` (others ignored).
std::string counters_text(const std::map<std::string, std::int64_t>& counters);

}  // namespace kernelevolve
