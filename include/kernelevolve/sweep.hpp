// Sweeps: every valid point of a spec's tunable space measured once on one class of device, kept as a
// small text file that any machine can replay (bench/search_quality compares the selection policies on
// them), or that a search can take as prior knowledge. `kernelevolve sweep` writes them, resumably.
//
// The file (tab-separated; docs/search.md, "Recorded sweeps"):
//   # kernelevolve sweep 1
//   # spec: matmul                      the spec's name, and the file it was read from
//   # spec_file: problems/level1/matmul/cuda.json
//   # spec_hash: 3f2a...                spec_hash(): a sweep of another spec (or an edited one) is refused
//   # spec_json: {"name": ...}          the spec itself, sources inline, on one line (sweep_spec)
//   # device: cuda NVIDIA H200          the class of device that measured every point
//   # commit: v0.1-212-gca33928         what measured it (git describe, else the library's version)
//   # started: 2025-06-01T12:00:00Z
//   # workload 0: M=1024 N=1024 K=1024
//   BM  BN  BK  status  us0  us1 ...  note     the columns: tunables, status, median time per workload (us)
//   64  32  8   ok      812.5 ...               one line per point, in the order measured
// A resumed sweep adds a "# resumed: DATE COMMIT" line where it went on.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernelevolve/fitness.hpp"
#include "kernelevolve/selection.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve {

// One measured point of a sweep.
struct SweepPoint {
  Bindings tunables;
  Status status = Status::pending;
  std::vector<double> median_us;  // one per workload when ok; empty otherwise
  std::string note;               // why it is not ok, in one line (the evaluation's message)
};

struct Sweep {
  int format = 1;
  std::string spec_name, spec_file, spec_hash, spec_json, device, commit, started;
  std::vector<std::string> tunables;   // the columns, in order
  std::vector<std::string> workloads;  // "M=1024 N=1024", one per workload
  std::vector<std::string> resumed;    // "DATE COMMIT" of each resumption
  std::vector<SweepPoint> points;
  std::string path;  // the file it was read from, for messages

  // The point measured at `tunables` (projected on the sweep's columns), or null. A linear scan: a
  // replay that looks up often indexes the points itself.
  const SweepPoint* find(const Bindings& tunables) const;
};

// Reads a sweep file. Throws Error(BadUsage) naming the file and line for anything malformed; a last
// line cut short (a sweep killed mid-write) is ignored.
Sweep read_sweep(const std::string& path);
// The spec a sweep measured, from its header: a replay needs no spec file. Throws Error(BadUsage) when the
// header has none or it does not match the spec_hash.
Spec sweep_spec(const Sweep& sweep);
// The header and the column line of a new sweep of `spec` over `tunables` (the columns) on `device` (a
// device class).
std::string sweep_header(const Spec& spec, const std::vector<std::string>& tunables, const std::string& spec_file,
                         const std::string& device, const std::string& commit, const std::string& started);
// One point's line, newline included: tabs and newlines in the note become spaces.
std::string sweep_line(const std::vector<std::string>& tunables, const SweepPoint& point);

// A sweep's points as the model policy's prior (PolicyOptions::prior) for a search of `spec`, usually the
// same problem measured on another device: each point's speedup over the sweep's own seed point (0 when
// not ok). Throws Error(BadUsage) when the sweep's tunables are not the spec's, or its seed point is not ok.
std::vector<PriorPoint> sweep_prior(const Sweep& sweep, const Spec& spec);

struct SweepProgress {
  std::size_t space = 0;     // valid points in the spec's space
  std::size_t in_file = 0;   // of those, in the file before this invocation
  std::size_t measured = 0;  // measured by this invocation so far
  std::size_t failed = 0;    // of those, not ok
  double elapsed_s = 0;
};

struct SweepOptions {
  std::string out;              // the sweep file: created, or read and appended to (resumed)
  std::string spec_file;        // recorded in the header
  std::string commit;           // recorded in the header
  int jobs = 1;                 // evaluations at once (the evaluator must be thread-safe above 1)
  std::int64_t max_points = 0;  // measure at most this many points now (0: no limit)
  double time_limit_s = 0;      // start no point after this many seconds (0: no limit); those in flight finish
  std::function<void(const SweepProgress&)> on_progress;  // after each point, from one thread at a time
};

struct SweepResult {
  std::size_t space = 0, in_file = 0, measured = 0, failed = 0;
  bool complete = false;    // every point of the space is in the file now
  std::string stop_reason;  // "complete", "max points", "time limit"
};

// Measures every point of tunable_space(spec) that `out` does not hold yet with `evaluator`, appending
// each line as it is measured (flushed, so a killed sweep loses only the points in flight). The seed's
// point is measured first, alone (a worker evaluator derives its time limit from it). A file of another
// spec (spec_hash), another device class, or other columns is refused with Error(BadUsage). An
// evaluator that throws (a broken reference, a lost device) ends the sweep with its error; the points
// written stay.
SweepResult run_sweep(const Spec& spec, FitnessEvaluator& evaluator, const SweepOptions& options);

}  // namespace kernelevolve
