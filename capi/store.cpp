// The C API: the store, the SQLite database of runs: open, list, load, show, best, export.
#include "internal.hpp"

#include <functional>
#include <string>

using namespace capi;

// ---------------------------------------------------------------------------------------------------
// Store

KE_API ke_status ke_store_open(ke_store** out, const char* path, int read_only) {
  return guard(__func__, [&] {
    need_out(out, "out");
    auto s = std::make_unique<ke_store>();
    s->store = std::make_shared<ke::Store>(need_nonempty(path, "path"),
                                           read_only ? ke::Store::Mode::read_only : ke::Store::Mode::read_write);
    give(out, std::move(s));
  });
}

KE_API ke_status ke_store_destroy(ke_store* store) { return destroy(__func__, store); }

KE_API ke_status ke_store_path(const char** out, const ke_store* store) {
  return get_field(__func__, out, store, "store", [](const ke_store& s) { return s.store->path().c_str(); });
}

KE_API ke_status ke_store_run_count(size_t* out, const ke_store* store) {
  return get_field(__func__, out, store, "store", [](const ke_store& s) { return s.store->runs().size(); });
}

KE_API ke_status ke_store_run_id(int64_t* out, const ke_store* store, size_t index) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const auto runs = need(store, "store")->store->runs();
    if (index >= runs.size()) {
      fail(KE_ERROR_NOT_FOUND, "run index " + std::to_string(index) + " is out of range (the store holds " +
                                   std::to_string(runs.size()) + ")");
    }
    *out = runs[index].id;
  });
}

KE_API ke_status ke_store_latest_run(int64_t* out, const ke_store* store) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const auto latest = need(store, "store")->store->latest_run();
    if (!latest) fail(KE_ERROR_NOT_FOUND, store->store->path() + " holds no run");
    *out = *latest;
  });
}

namespace {

// The run's info, or KE_ERROR_NOT_FOUND naming the store (the C++ store says BadUsage).
ke::RunInfo stored_run(const ke_store* store, std::int64_t run) {
  const auto runs = store->store->runs();
  for (const ke::RunInfo& r : runs) {
    if (r.id == run) return r;
  }
  fail(KE_ERROR_NOT_FOUND, store->store->path() + " holds no run " + std::to_string(run));
}

// A text the store made, kept in the handle so the pointer lives until it is destroyed.
const char* keep_text(const ke_store* store, const std::string& key, const std::function<std::string()>& make) {
  std::lock_guard lock(store->mutex);
  auto it = store->texts.find(key);
  if (it == store->texts.end()) it = store->texts.emplace(key, make()).first;
  return it->second.c_str();
}

}  // namespace

KE_API ke_status ke_store_load(ke_result** out, const ke_store* store, int64_t run) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(store, "store");
    const ke::RunInfo info = stored_run(store, run);
    const ke::Checkpoint checkpoint = store->store->load(run);
    const ke::Spec spec = ke::parse_spec(info.spec_json, info.spec_path);
    ke::RunResult result =
        rebuild_run(checkpoint.graph, checkpoint.elapsed_s, info.finished_at.empty() ? "unfinished" : info.stop_reason);
    result.state.tokens = checkpoint.tokens;
    result.state.cost_usd = checkpoint.cost_usd;
    result.mutator_failures = checkpoint.mutator_failures;
    give(out, make_result(spec, checkpoint.graph, result, info.device, run, false));
  });
}

KE_API ke_status ke_store_show(const char** out, const ke_store* store, int64_t run, size_t limit) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(store, "store");
    stored_run(store, run);
    *out = keep_text(store, "show " + std::to_string(run) + " " + std::to_string(limit),
                     [&] { return ke::show_run_text(*store->store, run, limit); });
  });
}

KE_API ke_status ke_store_best_source(const char** out, const ke_store* store, int64_t run) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(store, "store");
    stored_run(store, run);
    const auto source = ke::best_kernel_source(*store->store, run);
    if (!source) fail(KE_ERROR_NOT_FOUND, "run " + std::to_string(run) + " has no correct kernel");
    *out = keep_text(store, "best " + std::to_string(run), [&] { return *source; });
  });
}

KE_API ke_status ke_store_export(const char** out, const ke_store* store, int64_t run, const char* format) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(store, "store");
    const std::string f = need_string(format, "format");
    if (f != "json" && f != "dot") fail(KE_ERROR_INVALID_ARGUMENT, "format '" + f + "' is not json or dot");
    stored_run(store, run);
    *out = keep_text(store, f + " " + std::to_string(run), [&] {
      return f == "json" ? ke::export_json(*store->store, run) : ke::export_dot(*store->store, run);
    });
  });
}
