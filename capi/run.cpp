// The C API: runs of an evolver (a search, a resumed search, a check) and what the last one found. The
// progress callback is an observer of the C++ Evolver; a callback's non-zero return aborts the run.
#include "internal.hpp"

#include <chrono>
#include <optional>
#include <string>

#include "run/run_assembly.hpp"

using namespace capi;

namespace {

// A node view for the length of a callback; its tag is cleared when the callback returns, so a pointer
// kept past it is refused rather than read.
struct ScopedNode {
  ke_node view;
  explicit ScopedNode(const ke::Node& node) { view.node = &node; }
  ~ScopedNode() { view.tag = Tag::dead; }
};

class CallbackObserver final : public ke::Observer {
 public:
  CallbackObserver(ke_progress_fn fn, void* user_data) : fn_(fn), user_data_(user_data) {}

  void on_start(const ke::Spec&, const ke::DeviceInfo&) override {
    ke_progress p = base(KE_PROGRESS_START, ke::SearchState{});
    call(p);
  }
  void on_node(const ke::Node& node, const ke::SearchState& state) override {
    state_ = state;
    ScopedNode view(node);
    ke_progress p = base(KE_PROGRESS_NODE, state);
    p.node = &view.view;
    call(p);
  }
  void on_mutator_failure(const ke::Mutation& m, const std::vector<ke::NodeId>&) override {
    ke_progress p = base(KE_PROGRESS_MUTATOR_FAILURE, state_);
    p.message = m.error.c_str();
    call(p);
  }
  void on_finish(const ke::RunResult& result, const ke::SearchGraph&) override {
    ke_progress p = base(KE_PROGRESS_FINISH, result.state);
    p.message = result.stop_reason.c_str();
    call(p);
  }

 private:
  static ke_progress base(ke_progress_event event, const ke::SearchState& s) {
    ke_progress p;
    p.version = KE_PROGRESS_VERSION;
    p.event = event;
    p.node = nullptr;
    copy_state(p, s);
    p.message = "";
    return p;
  }
  void call(const ke_progress& p) {
    const int rc = fn_(&p, user_data_);
    if (rc != 0) throw Aborted{"the progress callback returned " + std::to_string(rc) + ": the run is aborted"};
  }

  ke_progress_fn fn_;
  void* user_data_;
  ke::SearchState state_;
};

// The run's evaluator: the host's callback, or the library's own on the evolver's device (run_assembly.hpp).
ke::RunEvaluator make_evaluator(const ke_evolver& ev) {
  if (ev.evaluate) {
    ke::RunEvaluator made;
    made.evaluator =
        make_callback_evaluator(ev.spec.workloads.size(), ev.evaluate_device, ev.evaluate, ev.evaluate_data);
    return made;
  }
  ke::EvalOptions eval;
  eval.trials = ev.trials;
  // One lock file per device, shared by every run on this host (as the command-line tool does).
  eval.timing_lock = ev.timing_lock ? *ev.timing_lock : ke::default_timing_lock(ev.device);
  if (ev.in_process && ke::is_device_list(ev.device))
    fail(KE_ERROR_INVALID_ARGUMENT, "in_process evaluates on one device, not on '" + ev.device + "'");
  ke::WorkerOptions wo;
  wo.jobs = ev.jobs;
  wo.timeout_s = ev.timeout_s;
  wo.worker_path = ev.worker_path;
  wo.eval = eval;
  return ke::make_run_evaluator(ev.spec, ev.device, wo,
                                ev.in_process ? std::optional<ke::EvalOptions>(eval) : std::nullopt);
}

}  // namespace

namespace {

// A run of the evolver: a new search, or (with `resume`) the continuation of a stored one (0: the
// latest of the spec on this device). Records into the evolver's store as it goes, if it has one.
void run_search(ke_result** out, ke_evolver& ev, std::optional<std::int64_t> resume) {
  RunningFlag busy(ev);
  ev.last.reset();
  if (resume && !ev.store) fail(KE_ERROR_INVALID_ARGUMENT, "the evolver has no store to resume a run from");
  const auto start = std::chrono::steady_clock::now();
  const ke::RunEvaluator made = make_evaluator(ev);
  const ke::DeviceInfo device = made.evaluator->device_info();
  const std::shared_ptr<ke::Mutator> mutator = ev.mutator.for_run(device, ev.spec.language);
  ke::RunKeeping keeping;
  keeping.store = ev.store;
  keeping.reuse = ev.reuse;
  if (ev.store && resume) {
    keeping.resume = *resume > 0 ? std::optional<ke::RunId>(*resume) : ev.store->latest_run(ev.spec, &device);
    if (!keeping.resume) {
      fail(KE_ERROR_NOT_FOUND, ev.store->path() + " holds no run of " + ev.spec.name + " on " + device.id + " (" +
                                   device.name + ") to resume");
    }
  } else {
    keeping.settings = {ev.policy, ev.mutator.name, ev.seed, "C API", mutator->prices()};
  }
  // A run kept nowhere is numbered by the evolver.
  std::int64_t run_id = ev.store ? 0 : ++ev.runs;
  ke::EvolverOptions options;
  options.seed = ev.seed;
  options.jobs = made.devices ? made.slots : ev.jobs;
  options.max_consecutive_mutator_failures = ev.max_consecutive_mutator_failures;
  options.confirm_rounds = ev.confirm_rounds;
  options.confirm_parent_rounds = ev.confirm_parent_rounds;
  options.warm_start = ev.warm_start;
  const ke::AssembledRun run =
      ke::assemble_run(ev.spec, made.evaluator, device, mutator, ke::make_policy(ev.policy, ev.policy_options), ev.stop,
                       options, keeping);
  if (ev.store) ev.runs = run_id = run.run;
  ke::Evolver& evolver_cxx = *run.evolver;
  // After the store's recorder: a node is committed before the host's callback sees it, so a callback that
  // aborts loses nothing.
  std::optional<CallbackObserver> observer;
  if (ev.progress) {
    observer.emplace(ev.progress, ev.progress_data);
    evolver_cxx.add_observer(&*observer);
  }
  // Keeps what the run found before it was stopped, for ke_evolver_result.
  auto keep_partial = [&](const std::string& reason) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ev.last = make_result(ev.spec, evolver_cxx.graph(), rebuild_run(evolver_cxx.graph(), elapsed, reason), device,
                          run_id, false);
  };
  try {
    const ke::RunResult result = evolver_cxx.run();
    ev.last = make_result(ev.spec, evolver_cxx.graph(), result, run.evaluator->device_info(), run_id, false);
  } catch (const Aborted& e) {
    keep_partial(e.message);
    throw;
  } catch (const std::exception& e) {
    keep_partial(std::string("the run failed: ") + e.what());
    throw;
  }
  give(out, make_result(ev.last->spec, ev.last->graph, ev.last->run, ev.last->device.info, run_id, false));
}

}  // namespace

KE_API ke_status ke_evolver_run(ke_result** out, ke_evolver* evolver) {
  return guard(__func__, [&] {
    need_out(out, "out");
    run_search(out, *need(evolver, "evolver"), std::nullopt);
  });
}

KE_API ke_status ke_evolver_resume(ke_result** out, ke_evolver* evolver, int64_t run) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(evolver, "evolver");
    if (run < 0) fail(KE_ERROR_INVALID_ARGUMENT, "'run' must not be negative (0: the latest run of the spec)");
    run_search(out, *evolver, run);
  });
}

KE_API ke_status ke_evolver_check(ke_result** out, ke_evolver* evolver) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    ke_evolver& ev = *evolver;
    ev.last.reset();
    const std::int64_t run_id = 0;  // a check is not a run: it is neither numbered nor stored
    const auto start = std::chrono::steady_clock::now();
    const std::shared_ptr<ke::FitnessEvaluator> evaluator = make_evaluator(ev).evaluator;
    const ke::DeviceInfo info = evaluator->device_info();
    ke::SearchGraph graph;
    ke::Node seed;
    seed.mutator = "seed";
    seed.note = "the spec's seed kernel at the first value of each tunable";
    seed.candidate =
        ke::Candidate{ev.spec.seed.source, ev.spec.seed.language.value_or(ev.spec.language), ev.spec.seed_tunables()};
    if (ev.spec.seed.source.empty()) {
      // A PyTorch problem may have no seed (a command or model mutator writes the first kernel): nothing to
      // compile, and node 0 says so rather than reporting a compiler's complaint about an empty source.
      seed.evaluation.status = ke::Status::invalid;
      seed.evaluation.message = "the spec has no seed kernel: a command or model mutator writes the first one";
    } else {
      seed.evaluation = evaluator->evaluate(seed.candidate, 1);
    }
    seed.speedup = seed.evaluation.status == ke::Status::ok ? 1.0 : 0.0;
    const ke::Evaluation seed_evaluation = seed.evaluation;
    graph.add(std::move(seed));
    // The reference against itself: it must be deterministic, and it gives the time to beat. A PyTorch
    // module is no kernel of the spec's language: it is checked as the seed's reference only.
    if (!ev.spec.reference.pytorch && (!ev.spec.reference.device || *ev.spec.reference.device == info.kind)) {
      ke::Node reference;
      reference.mutator = "reference";
      reference.note = "the spec's reference kernel, checked against itself";
      reference.candidate = ke::Candidate{
          ev.spec.reference.source, ev.spec.reference.language.value_or(ev.spec.language), ev.spec.seed_tunables()};
      reference.evaluation = evaluator->evaluate(reference.candidate, 2);
      reference.speedup = ke::speedup(seed_evaluation, reference.evaluation);
      graph.add(std::move(reference));
    }
    ke::RunResult run;
    run.seed = 0;
    if (seed_evaluation.status == ke::Status::ok) run.best = 0;
    run.stop_reason = "checked the seed and the reference";
    run.state.evaluations = static_cast<std::int64_t>(graph.size());
    run.state.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run.state.best_speedup = run.best ? 1.0 : 0.0;
    ev.last = make_result(ev.spec, graph, run, evaluator->device_info(), run_id, true);
    give(out, make_result(ev.spec, graph, run, ev.last->device.info, run_id, true));
  });
}

KE_API ke_status ke_evolver_result(ke_result** out, const ke_evolver* evolver) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(evolver, "evolver");
    if (evolver->running) fail(KE_ERROR_INVALID_ARGUMENT, "a run of this evolver is in progress");
    if (!evolver->last) fail(KE_ERROR_NOT_FOUND, "the evolver has not run yet (or its last run failed to start)");
    const ke_result& last = *evolver->last;
    give(out, make_result(last.spec, last.graph, last.run, last.device.info, last.run_id, last.is_check));
  });
}
