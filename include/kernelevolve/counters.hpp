// Hardware counters of a GPU candidate: DRAM throughput, achieved occupancy and why warps stall, read by
// NVIDIA Nsight Compute (ncu) from one launch of the kernel in a worker started under it. They join the
// node's resources as "hw_..." entries, so the diagnosis, `kernelevolve show` and the model's prompt read
// them like the compiler's registers.
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

// The arguments after ncu's own path that profile the first launch of the kernel named `entry`, once the
// program that follows them turns profiling on (cuProfilerStart), writing ncu's CSV ("raw" page, base
// units) to `log_path`.
std::vector<std::string> nsight_compute_arguments(const std::string& entry, const std::string& log_path);

// Reads the counters out of ncu's CSV log (lines "==PROF==" and the like skipped). The first kernel row is
// taken. An error names what is missing: no kernel profiled (the kernel never launched, or ncu was denied
// the counters: ERR_NVGPUCTRPERM), or none of the known metrics.
CounterResult counters_from_nsight_csv(const std::string& csv);

// One line for people and the model: "DRAM 77% of peak (2592 GB/s), SM 10%, achieved occupancy 24%,
// stalls: long_scoreboard 87%, wait 5%, selected ..." from the hw_ entries of `counters` (others ignored).
std::string counters_text(const std::map<std::string, std::int64_t>& counters);

}  // namespace kernelevolve
