#include "run/run_assembly.hpp"

#include <utility>

#include "kernelevolve/error.hpp"

namespace kernelevolve {

RunEvaluator make_run_evaluator(const Spec& spec, const std::string& device, const WorkerOptions& workers,
                                const std::optional<EvalOptions>& in_process) {
  RunEvaluator made;
  const bool list = is_device_list(device);
  if (in_process) {
    if (list)
      throw Error(ErrorCode::BadUsage, "in this process, a run evaluates on one device, not on '" + device + "'");
    made.evaluator = std::make_shared<LocalEvaluator>(spec, open_device(device), *in_process);
  } else if (list) {
    // A worker (jobs of them) per device: every device kept busy, each timing only its own candidates.
    made.device_ids = expand_device_list(device);
    made.devices = std::make_shared<MultiDeviceEvaluator>(spec, made.device_ids, workers, workers.jobs);
    made.slots = made.devices->slots();
    made.evaluator = made.devices;
  } else {
    auto on_one = std::make_shared<WorkerEvaluator>(spec, device, workers);
    made.slots = on_one->jobs();  // lowered where the device's memory holds fewer (it said so)
    made.evaluator = on_one;
  }
  return made;
}

namespace {

// The stored run `id`, checked to be one that this spec on this device can go on with.
RunInfo resumable_run(const Store& store, RunId id, const Spec& spec, const DeviceInfo& device,
                      const RunKeeping& keeping) {
  const RunInfo stored = store.run(id);  // throws for an unknown run
  if (stored.spec_hash != spec_hash(spec)) {
    throw Error(ErrorCode::BadUsage,
                "run " + std::to_string(stored.id) + " of " + store.path() + " was of another spec (" +
                    stored.spec_name + ", or this one since edited): it cannot be resumed with " + keeping.spec_named);
  }
  if (stored.device.kind != device.kind || stored.device.name != device.name) {
    throw Error(ErrorCode::BadUsage, "run " + std::to_string(stored.id) + " of " + store.path() + " ran on " +
                                         stored.device.id + " (" + stored.device.name + "), not on " + device.id +
                                         " (" + device.name + ")" + keeping.other_device_hint);
  }
  if (keeping.check) keeping.check(stored);
  return stored;
}

}  // namespace

AssembledRun assemble_run(const Spec& spec, std::shared_ptr<FitnessEvaluator> evaluator, const DeviceInfo& device,
                          std::shared_ptr<Mutator> mutator, std::shared_ptr<SelectionPolicy> policy,
                          std::shared_ptr<StopRule> stop, const EvolverOptions& options, const RunKeeping& keeping) {
  AssembledRun run;
  std::optional<Checkpoint> checkpoint;
  if (keeping.store) {
    Store& store = *keeping.store;
    if (keeping.resume) {
      run.run = resumable_run(store, *keeping.resume, spec, device, keeping).id;
      checkpoint = store.resume(run.run);
      // The run goes on at the prices it began with, whatever the caller's mutator says.
      for (const std::string& line : keep_run_prices(store, run.run, *mutator)) {
        if (keeping.on_prices_kept) keeping.on_prices_kept(line);
      }
    } else {
      run.run = store.begin_run(spec, device, keeping.settings);
    }
    if (keeping.reuse) {
      run.reusing = std::make_shared<ReusingEvaluator>(evaluator, keeping.store, spec);
      evaluator = run.reusing;
    }
  }
  run.evaluator = evaluator;
  run.evolver = std::make_unique<Evolver>(spec, std::move(evaluator), std::move(mutator), std::move(policy),
                                          std::move(stop), options);
  if (checkpoint) {
    if (keeping.on_resume) keeping.on_resume(run.run, checkpoint->graph.size());
    run.evolver->resume(std::move(*checkpoint));
  }
  if (keeping.store) {
    run.recorder = std::make_unique<StoreRecorder>(keeping.store, run.run, run.reusing.get());
    run.evolver->add_observer(run.recorder.get());
  }
  return run;
}

}  // namespace kernelevolve
