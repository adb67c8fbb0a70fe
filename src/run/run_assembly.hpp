// A search run assembled from its parts, as the command-line tool's `run` (tools/kernelevolve/run.cpp) and the
// C API's ke_evolver_run and ke_evolver_resume (capi/run.cpp) both assemble one: the evaluator on the run's
// device or devices, then the run begun or resumed in the store, the store's measurements reused, and the
// evolver that takes the run up. What each caller checks of its options, and says, stays with it.
// Internal: not installed; the tool and the C API include it from src/.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernelevolve/distributed.hpp"
#include "kernelevolve/evolver.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/store.hpp"

namespace kernelevolve {

// A run's evaluator: in this process, in workers on one device, or in workers on each device of a list
// (cuda:0,cuda:1 or cuda:all).
struct RunEvaluator {
  std::shared_ptr<FitnessEvaluator> evaluator;
  // Of a device list: the evaluator over its devices (its evaluations per device) and the devices, in its order.
  std::shared_ptr<MultiDeviceEvaluator> devices;
  std::vector<std::string> device_ids;
  // Candidates it evaluates at once: 1 in this process; the workers' jobs, lowered where a device's memory holds
  // fewer; over a list, those of every device.
  int slots = 1;
};

// With `in_process`, a LocalEvaluator with those options on `device`, which must be one device. Otherwise workers
// with `workers`' options: workers.jobs of them on `device`, or on each device of the list it names.
RunEvaluator make_run_evaluator(const Spec& spec, const std::string& device, const WorkerOptions& workers,
                                const std::optional<EvalOptions>& in_process);

// Where a run is kept, and how a stored one is taken up again.
struct RunKeeping {
  std::shared_ptr<Store> store;  // null: the run is kept nowhere
  // The stored run to go on with, found by the caller (the one asked for, or the latest); none: a new run.
  std::optional<RunId> resume;
  RunSettings settings;  // a new run's, as the store keeps them
  bool reuse = true;     // a candidate the store holds a measurement of (same spec, same device) is not measured
  // The refusal to resume a run of another spec names the spec given as `spec_named` ("this one", or its file);
  // the refusal to resume a run of another device ends with `other_device_hint` (what to do instead).
  std::string spec_named = "this one";
  std::string other_device_hint;
  // Asked of the stored run before it is resumed, after those two checks: a caller's own refusal throws here.
  std::function<void(const RunInfo&)> check;
  // Told each line that keep_run_prices says, and, just before the evolver takes up the stored run, its id and
  // how many nodes it holds.
  std::function<void(const std::string&)> on_prices_kept;
  std::function<void(RunId, std::size_t)> on_resume;
};

// A run ready to go: evolver->run() does the rest. The recorder (when a store keeps the run) is the evolver's
// first observer, so that a node is committed before anything added after it sees the node.
struct AssembledRun {
  RunId run = 0;                                // the stored run; 0 when no store keeps it
  std::shared_ptr<FitnessEvaluator> evaluator;  // what the evolver evaluates with: the run's, within the reuse
  std::shared_ptr<ReusingEvaluator> reusing;    // the store's reuse, when there is one
  std::unique_ptr<StoreRecorder> recorder;
  std::unique_ptr<Evolver> evolver;
};

// Begins the run in keeping.store, or resumes keeping.resume there (the same spec on the same kind and model of
// device, else Error(BadUsage); it goes on at the prices it began with), wraps `evaluator` in the store's reuse,
// and makes the evolver, with the stored run's checkpoint and the store's recorder.
AssembledRun assemble_run(const Spec& spec, std::shared_ptr<FitnessEvaluator> evaluator, const DeviceInfo& device,
                          std::shared_ptr<Mutator> mutator, std::shared_ptr<SelectionPolicy> policy,
                          std::shared_ptr<StopRule> stop, const EvolverOptions& options, const RunKeeping& keeping);

}  // namespace kernelevolve
