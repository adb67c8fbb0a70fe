// The model optimizer (issue 30): from a whole PyTorch model to the problems worth a kernel. It profiles the model,
// cuts its graph into regions (element-wise, reduction and normalization chains around at most one matrix product or
// convolution), writes each distinct region as a PyTorch problem file, and ranks them by share of the model's time. It
// produces problems and will consume results; it never reaches into the evaluator.
#pragma once
#include <string>
#include <vector>

namespace kernelevolve {

struct OptimizeOptions {
  std::string device = "cpu";  // where the model is profiled and the regions timed: "cpu", "cuda" or "cuda:N"
  std::string out_dir;         // where the region files and manifest.json go; empty: default_optimize_dir()
  double min_share = 0.01;     // a region below this share of the model's time is skipped (Amdahl)
  double budget_s = 2;         // seconds spent timing the model, and again the regions
  double timeout_s = 1800;     // for the whole Python process
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
};

struct OptimizeReport {
  std::string model, device, torch_version, capture, out_dir, manifest;
  double model_time_us = 0;         // the model's forward, median
  double regions_time_us = 0;       // the sum over regions of time_us * count
  double ranked_model_time_us = 0;  // the model's forward, timed in the same rounds as the regions
  long graph_operators = 0;
  long rank_rounds = 0;
  std::vector<ProfiledOperator> operators;  // the profile's top operators by self time
  std::vector<OptimizedRegion> regions;     // by share, largest first
  double profile_s = 0, cut_s = 0, rank_s = 0;
  std::vector<std::string> notes;
  std::string next;  // what steps 4-6 will do with it
  std::string json;  // the manifest: the same report as JSON, with every occurrence's place in the graph
};

// MODEL.optimize beside the model where its folder is writable, else in the current one.
std::string default_optimize_dir(const std::string& model_path);

// Steps 1-3 of issue 30 on a KernelBench-format file whose Model is a whole network: profile, cut, rank. Writes the
// region files and manifest.json under options.out_dir (made if absent; an earlier optimize's output there is
// replaced, anything else in it is refused). Throws Error(BadSpec) naming the problem for a model it cannot take (no
// Model, a forward that fails, a graph it cannot capture such as data-dependent control flow, a model too big for the
// device) or an output folder holding the user's files, Error(DeviceUnavailable) when no Python imports torch or the
// device is absent.
OptimizeReport optimize_model(const std::string& model_path, const OptimizeOptions& options = {});

// The report as text: each step's time, the profile's top operators, the table of regions, what comes next.
std::string format_report(const OptimizeReport& report);

}  // namespace kernelevolve
