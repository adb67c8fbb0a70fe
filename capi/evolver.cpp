// The C API: the evolver, its options and the parts it composes (mutator, stop rule, callbacks, store).
#include "internal.hpp"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

using namespace capi;

// ---------------------------------------------------------------------------------------------------
// Evolver

KE_API ke_status ke_evolver_options_init(ke_evolver_options* options, unsigned int version) {
  return guard(__func__, [&] {
    need_out(options, "options");
    need_version(version, KE_EVOLVER_OPTIONS_VERSION, "ke_evolver_options");
    // A caller built against an older header has a shorter struct: fill only the fields its version has.
    const ke_evolver_options defaults KE_EVOLVER_OPTIONS_INIT;
    const std::size_t size = version == 1   ? offsetof(ke_evolver_options, confirm_rounds)
                             : version == 2 ? offsetof(ke_evolver_options, warm_start_stores)
                             : version == 3 ? offsetof(ke_evolver_options, confirm_parent_rounds)
                                            : sizeof defaults;
    std::memcpy(options, &defaults, size);
    options->version = version;
  });
}

KE_API ke_status ke_evolver_create(ke_evolver** out, const ke_spec* spec, const ke_evolver_options* options) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(spec, "spec");
    auto ev = std::make_unique<ke_evolver>();
    ev->spec = spec->spec;
    ev->spec.validate();
    if (options) {
      need_version(options->version, KE_EVOLVER_OPTIONS_VERSION, "ke_evolver_options");
      if (options->device) ev->device = need_nonempty(options->device, "options->device");
      ev->seed = options->seed;
      ev->jobs = options->jobs;
      ev->in_process = options->in_process != 0;
      ev->timeout_s = options->timeout_s;
      if (options->worker_path) ev->worker_path = options->worker_path;
      if (options->timing_lock) ev->timing_lock = options->timing_lock;
      ev->trials = options->trials;
      ev->max_consecutive_mutator_failures = options->max_consecutive_mutator_failures;
      if (options->version >= 2) ev->confirm_rounds = options->confirm_rounds;
      if (options->version >= 3 && options->warm_start_store_count > 0) {
        if (!options->warm_start_stores) fail(KE_ERROR_INVALID_ARGUMENT, "'options->warm_start_stores' is NULL");
        if (options->warm_start_max < 1)
          fail(KE_ERROR_INVALID_ARGUMENT, "'options->warm_start_max' must be at least 1");
        std::vector<std::string> stores;
        for (size_t i = 0; i < options->warm_start_store_count; ++i) {
          stores.push_back(need_nonempty(options->warm_start_stores[i], "options->warm_start_stores[i]"));
        }
        ev->warm_start = ke::find_warm_kernels(stores, ev->spec, static_cast<std::size_t>(options->warm_start_max));
      }
      if (options->version >= 4) ev->confirm_parent_rounds = options->confirm_parent_rounds;
    }
    if (ev->confirm_rounds < 0) fail(KE_ERROR_INVALID_ARGUMENT, "'options->confirm_rounds' must not be negative");
    if (ev->confirm_parent_rounds < 0) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'options->confirm_parent_rounds' must not be negative");
    }
    if (ev->jobs < 1) fail(KE_ERROR_INVALID_ARGUMENT, "'options->jobs' must be at least 1");
    if (ev->in_process && ev->jobs > 1) {
      fail(KE_ERROR_INVALID_ARGUMENT, "in-process evaluation runs one candidate at a time: 'options->jobs' must be 1");
    }
    if (!(ev->timeout_s >= 0) || !std::isfinite(ev->timeout_s)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'options->timeout_s' must not be negative");
    }
    if (ev->trials < 1) fail(KE_ERROR_INVALID_ARGUMENT, "'options->trials' must be at least 1");
    if (ev->max_consecutive_mutator_failures < 1) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'options->max_consecutive_mutator_failures' must be at least 1");
    }
    give(out, std::move(ev));
  });
}

KE_API ke_status ke_evolver_destroy(ke_evolver* evolver) {
  if (evolver && evolver->tag == Tag::evolver && evolver->running) {
    return record(KE_ERROR_INVALID_ARGUMENT, __func__, "a run of this evolver is in progress: destroy it after");
  }
  return destroy(__func__, evolver);
}

KE_API ke_status ke_evolver_set_mutator(ke_evolver* evolver, const ke_mutator* mutator) {
  return guard(__func__, [&] {
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    evolver->mutator = need(mutator, "mutator")->recipe;
  });
}

KE_API ke_status ke_evolver_set_stop_rule(ke_evolver* evolver, const ke_stop_rule* rule) {
  return guard(__func__, [&] {
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    evolver->stop = need(rule, "rule")->rule;
  });
}

KE_API ke_status ke_evolver_set_progress(ke_evolver* evolver, ke_progress_fn progress, void* user_data) {
  return guard(__func__, [&] {
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    evolver->progress = progress;
    evolver->progress_data = progress ? user_data : nullptr;
  });
}

KE_API ke_status ke_evolver_set_evaluator(ke_evolver* evolver, const char* device_name, ke_evaluate_fn evaluate,
                                          void* user_data) {
  return guard(__func__, [&] {
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    if (evaluate) {
      evolver->evaluate_device = need_nonempty(device_name, "device_name");
    } else {
      evolver->evaluate_device.clear();
    }
    evolver->evaluate = evaluate;
    evolver->evaluate_data = evaluate ? user_data : nullptr;
  });
}

KE_API ke_status ke_evolver_set_store(ke_evolver* evolver, ke_store* store, int reuse) {
  return guard(__func__, [&] {
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    evolver->store = store ? need(store, "store")->store : nullptr;
    evolver->reuse = store && reuse != 0;
  });
}
