// The model optimizer (issue 30): from a whole PyTorch model to a faster model. It profiles the model, cuts its graph
// into regions (element-wise, reduction and normalization chains around at most one matrix product or convolution),
// writes each distinct region as a PyTorch problem file, ranks them by share of the model's time, evolves the kept ones
// (`kernelevolve run` on each file, every run in one database), puts back only the winners over eager and
// torch.compile (operators in the captured graph, each behind a shape guard), and proves the model's speedup. It
// produces problems and consumes results; it never reaches into the evaluator.
#pragma once
#include <string>
#include <vector>

namespace kernelevolve {

struct OptimizeOptions {
  std::string device = "cpu";  // where the model is profiled and the regions timed: "cpu", "cuda" or "cuda:N"
  std::string out_dir;         // where the region files and manifest.json go; empty: default_optimize_dir()
  double min_share = 0.01;     // a region below this share of the model's time is skipped (Amdahl)
  double budget_s = 2;         // seconds spent timing the model, again the regions, again the A/B
  double timeout_s = 1800;     // for the whole Python process
  bool evolve = true;          // steps 4-6 (evolve, put back, prove); false: profile, cut and rank only
  long max_evals = 20;         // evaluations of each kept region's run
  long total_evals = 0;        // > 0: evaluations in all instead, split among the kept regions by their share
  // Passed to each region's `kernelevolve run` as they are: "--mutator", "command", "--command", CMD, "--llm-model",
  // ...
  std::vector<std::string> run_options;
  std::string cli;  // the kernelevolve command that runs them; empty: the one beside the library or this program
  // The regions' runs' --device where it is not `device`: "cuda:all" or "cuda:0,cuda:1" spreads each run's
  // evaluations over those GPUs (the multi-device evaluator); the model itself is profiled and proved on `device`.
  std::string evolve_device;
  // Step 4 over several devices: "cuda:0,cuda:1" evolves as many regions at once, one per device at a time (a
  // device named twice takes two), every run into the one database. Under `mpi`: each rank's device, by its rank on
  // its host modulo the list.
  std::string devices;
  // Under mpirun: rank 0 profiles, cuts and ranks; every rank evolves the regions it claims first (one region, one
  // rank); rank 0 then puts back and proves. The ranks share out_dir (one host, or a shared folder).
  bool mpi = false;
  // "bf16" or "fp16": the model is called under torch.autocast on the device's type (as a user who wraps its call in
  // one runs it); its regions are captured in the dtypes autocast gives each operator, the casts written out. Empty:
  // the model's own dtypes (an autocast its forward enters is found by the capture).
  std::string autocast;
};

// One operator of the model's profile: self time per forward, grouped by operator and input shapes.
struct ProfiledOperator {
  std::string name;    // "aten::addmm"
  std::string shapes;  // "[[64], [16, 64], [64, 64]]"
  long calls = 0;      // per forward
  double self_us = 0;
  double share = 0;  // of the profile's self time
};

// A distinct region of the model's graph: one problem file, however many times it occurs.
struct OptimizedRegion {
  std::string name;  // r1, r2, ... in order of first occurrence
  std::string hash;  // of its operators, constants, shapes and dtypes: the same region in a later run has the same
  std::string file;  // the problem file, absolute
  std::vector<std::string> ops;
  long count = 0;      // occurrences in the model
  double time_us = 0;  // one call of its Model, the median of the interleaved rounds
  double share = 0;    // time_us * count over the sum over all regions
  bool kept = false;   // worth evolving; else `reason` says why not
  std::string reason;
  // Step 4: "evolved", "resumed" (an earlier optimize's run, not evolved again), "failed" (put_back_reason says
  // why), or empty where not evolved.
  std::string evolve_status;
  long run = 0, node = 0;  // the run in the database, and its best node
  double evolve_s = 0;     // the run's wall time
  // Where that time went, as the run reports it (`run --json`'s steps_s): the region's problem described and
  // torch.compile's program captured, the evaluator started, node 0, the baselines, the search. 0 where unknown.
  struct Steps {
    double describe = 0, capture = 0, start = 0, node0 = 0, baselines = 0, search = 0;
  } steps_s;
  long tokens = 0;                                      // what its model calls took (a model mutator's)
  double cost_usd = 0;                                  // and cost
  double best_us = 0, eager_us = 0, compile_us = 0;     // the run's first workload; 0 where not measured
  double speedup_vs_eager = 0, speedup_vs_compile = 0;  // 0 where not measured
  bool put_back = false;  // step 5: in the optimized model; `put_back_reason` says why or why not
  std::string put_back_reason;
  double after_speedup = 0;  // its guard over its own code in the optimizer's process (step 6); 0 if not put back
};

struct OptimizeReport {
  std::string model, device, torch_version, capture, out_dir, manifest;
  double model_time_us = 0;         // the model's forward, median
  double gpu_busy = -1;             // on a GPU, its kernels' time over the forward's (under 1: it waits on the CPU)
  double regions_time_us = 0;       // the sum over regions of time_us * count
  double ranked_model_time_us = 0;  // the model's forward, timed in the same rounds as the regions
  long graph_operators = 0;
  long rank_rounds = 0;
  std::vector<ProfiledOperator> operators;  // the profile's top operators by self time
  std::vector<OptimizedRegion> regions;     // by share, largest first
  double profile_s = 0, cut_s = 0, rank_s = 0, evolve_s = 0, put_back_s = 0, prove_s = 0;
  // Steps 5 and 6 (empty or zero where they did not run; put_back_note says why not where they could not).
  std::string database;          // every region's run
  std::string optimized_module;  // the file to import: load() gives the optimized model
  std::string put_back_note;
  std::vector<std::string> not_engaged;  // "PLACE: why", each place whose operator the proof's call did not launch
  std::string export_note;               // torch.export's graph, or why there is none
  std::string chart;                     // the SVG of the model's time by region, before and after
  bool parity = false, engaged = false;
  double parity_max_error = 0;
  double speedup_vs_eager = 0;  // the A/B's median, eager over optimized, with its 10th and 90th percentiles
  double speedup_spread[2] = {0, 0};
  long ab_rounds = 0;
  std::string verdict_vs_eager, verdict_vs_compile;  // the speedup in words, said only where it exceeds the spread
  // The same two A/Bs with the launches taken out (on CUDA: each forward replayed from a CUDA graph, and
  // torch.compile's reduce-overhead mode); empty where not measured.
  std::string verdict_graphs, verdict_compile_graphs;
  std::vector<std::string> notes;
  std::string next;  // with --no-evolve: what steps 4-6 would do; else empty
  std::string json;  // the manifest: the same report as JSON, with every occurrence's place in the graph
  // Under OptimizeOptions::mpi, on a rank other than 0: its rank and the regions it evolved (json: that part's
  // report); the rest of the report is rank 0's.
  int mpi_rank = 0;
  long mpi_regions = 0;
};

// MODEL.optimize beside the model where its folder is writable, else in the current one.
std::string default_optimize_dir(const std::string& model_path);

// Issue 30 on a KernelBench-format file whose Model is a whole network: profile, cut, rank; then (options.evolve)
// evolve, put back, prove. Writes the region files and manifest.json under options.out_dir (made if absent; an
// earlier optimize's output there is replaced, its database kept to resume from, anything else in it is refused),
// and optimize.db, optimized.py (with optimized.pt) and time_by_region.svg. A region that cannot be evolved is a
// row of the report with why, not an error. Throws Error(BadSpec) naming the problem for a model it cannot take (no
// Model, a forward that fails, a graph it cannot capture such as data-dependent control flow, a model too big for the
// device) or an output folder holding the user's files, Error(DeviceUnavailable) when no Python imports torch or the
// device is absent.
OptimizeReport optimize_model(const std::string& model_path, const OptimizeOptions& options = {});

// The report as text: each step's time, the profile's top operators, the table of regions, the speedup.
std::string format_report(const OptimizeReport& report);

}  // namespace kernelevolve
