// The C API: results, what a run or a check found (immutable; caches guarded for concurrent readers).
#include "internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace capi;

std::unique_ptr<ke_result> capi::make_result(const ke::Spec& spec, const ke::SearchGraph& graph,
                                             const ke::RunResult& run, const ke::DeviceInfo& device,
                                             std::int64_t run_id, bool is_check) {
  auto r = std::make_unique<ke_result>();
  r->spec = spec;
  r->graph = graph;
  r->run = run;
  r->run_id = run_id;
  r->device.info = device;
  r->is_check = is_check;
  r->nodes.reserve(r->graph.size());
  for (const ke::Node& n : r->graph.nodes()) {
    auto view = std::make_unique<ke_node>();
    view->node = &n;
    r->nodes.push_back(std::move(view));
  }
  return r;
}

ke::RunResult capi::rebuild_run(const ke::SearchGraph& graph, double elapsed_s, std::string reason) {
  ke::RunResult run;
  run.seed = graph.size() > 0 ? 0 : -1;
  run.best = graph.best();
  run.stop_reason = std::move(reason);
  run.state.elapsed_s = elapsed_s;
  for (const ke::Node& n : graph.nodes()) {
    if (n.evaluation.status != ke::Status::pending) run.state.evaluations += 1;
    run.state.best_speedup = std::max(run.state.best_speedup, n.speedup);
    run.state.tokens += n.tokens;
    run.state.cost_usd += n.cost_usd;
  }
  return run;
}

namespace {

std::string times_json(const ke::Evaluation& e) {
  std::string out = "[";
  for (std::size_t i = 0; i < e.timings.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", e.timings[i].median_us);
    out += std::string(i ? ", " : "") + buf;
  }
  return out + "]";
}

// The JSON of `kernelevolve check --json`: the seed's and the reference's evaluations.
std::string check_report_json(const ke_result& r) {
  const ke::Node& seed = r.graph.node(0);
  const bool has_reference = r.graph.size() > 1;
  const ke::Evaluation reference = has_reference ? r.graph.node(1).evaluation : ke::Evaluation{};
  return "{\"spec\": " + ke::json_quote(r.spec.name) +
         ", \"device\": " + ke::json_quote(r.device.info.id + " " + r.device.info.name) +
         ", \"seed\": {\"status\": " + ke::json_quote(ke::to_string(seed.evaluation.status)) +
         ", \"message\": " + ke::json_quote(seed.evaluation.message) + ", \"time_us\": " + times_json(seed.evaluation) +
         "}, \"reference\": {\"status\": " + ke::json_quote(ke::to_string(reference.status)) +
         ", \"time_us\": " + times_json(reference) + "}}";
}

std::string check_report_text(const ke_result& r) {
  const ke::Evaluation& seed = r.graph.node(0).evaluation;
  const ke::Evaluation reference = r.graph.size() > 1 ? r.graph.node(1).evaluation : ke::Evaluation{};
  std::string out = r.spec.name + " on " + r.device.info.id + " (" + r.device.info.name + ")\n";
  for (std::size_t w = 0; w < r.spec.workloads.size(); ++w) {
    std::string name;
    for (const auto& [k, v] : r.spec.workloads[w]) name += (name.empty() ? "" : " ") + k + "=" + std::to_string(v);
    char line[160];
    std::snprintf(line, sizeof line, "  %-28s seed %10.1f us   reference %10.1f us\n", name.c_str(),
                  seed.status == ke::Status::ok ? seed.timings[w].median_us : NAN,
                  reference.status == ke::Status::ok ? reference.timings[w].median_us : NAN);
    out += line;
  }
  out +=
      std::string("  seed: ") + ke::to_string(seed.status) + (seed.message.empty() ? "" : ": ") + seed.message + "\n";
  if (seed.status == ke::Status::compile_error) out += seed.compile_log + "\n";
  if (reference.status != ke::Status::ok && reference.status != ke::Status::pending) {
    out +=
        std::string("  reference against itself: ") + ke::to_string(reference.status) + ": " + reference.message + "\n";
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Results

KE_API ke_status ke_result_destroy(ke_result* result) {
  if (result && result->tag == Tag::result) {
    for (auto& n : result->nodes) n->tag = Tag::dead;
    result->device.tag = Tag::dead;
  }
  return destroy(__func__, result);
}

KE_API ke_status ke_result_node_count(size_t* out, const ke_result* result) {
  return get_field(__func__, out, result, "result", [](const ke_result& r) { return r.nodes.size(); });
}

namespace {

const ke_node* node_in(const ke_result* result, std::int64_t id) {
  if (id < 0 || static_cast<std::size_t>(id) >= result->nodes.size()) {
    fail(KE_ERROR_NOT_FOUND,
         "no node " + std::to_string(id) + " (the result has " + std::to_string(result->nodes.size()) + ")");
  }
  return result->nodes[static_cast<std::size_t>(id)].get();
}

}  // namespace

KE_API ke_status ke_result_node(const ke_node** out, const ke_result* result, int64_t id) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = node_in(need(result, "result"), id);
  });
}

KE_API ke_status ke_result_seed(const ke_node** out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(result, "result");
    if (result->run.seed < 0) fail(KE_ERROR_NOT_FOUND, "the run has no seed node");
    *out = node_in(result, result->run.seed);
  });
}

KE_API ke_status ke_result_best(const ke_node** out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(result, "result");
    if (!result->run.best) fail(KE_ERROR_NOT_FOUND, "no correct kernel: " + result->run.stop_reason);
    *out = node_in(result, *result->run.best);
  });
}

namespace {

// A list of node ids about node `id` (its lineage, its children), made once and kept in the result, so
// that the pointer handed out lives as long as the result.
template <class CacheOf, class Make>
ke_status node_ids(const char* function, const int64_t** ids, size_t* count, const ke_result* result, std::int64_t id,
                   CacheOf cache_of, Make make) {
  return guard(function, [&] {
    need_out(ids, "ids");
    need_out(count, "count");
    node_in(need(result, "result"), id);
    std::lock_guard lock(result->mutex);
    auto& cache = cache_of(*result);
    auto it = cache.find(id);
    if (it == cache.end()) {
      const auto list = make(result->graph, id);
      it = cache.emplace(id, std::vector<std::int64_t>(list.begin(), list.end())).first;
    }
    *ids = it->second.data();
    *count = it->second.size();
  });
}

}  // namespace

KE_API ke_status ke_result_lineage(const int64_t** ids, size_t* count, const ke_result* result, int64_t id) {
  return node_ids(
      __func__, ids, count, result, id, [](const ke_result& r) -> auto& { return r.lineages; },
      [](const ke::SearchGraph& graph, ke::NodeId node) { return graph.lineage(node); });
}

KE_API ke_status ke_result_children(const int64_t** ids, size_t* count, const ke_result* result, int64_t id) {
  return node_ids(
      __func__, ids, count, result, id, [](const ke_result& r) -> auto& { return r.children; },
      [](const ke::SearchGraph& graph, ke::NodeId node) { return graph.children(node); });
}

KE_API ke_status ke_result_stop_reason(const char** out, const ke_result* result) {
  return get_field(__func__, out, result, "result", [](const ke_result& r) { return r.run.stop_reason.c_str(); });
}

KE_API ke_status ke_result_evaluations(int64_t* out, const ke_result* result) {
  return get_field(__func__, out, result, "result", [](const ke_result& r) { return r.run.state.evaluations; });
}

KE_API ke_status ke_result_status_count(int64_t* out, const ke_result* result, ke_eval_status status) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const ke::Status s = need_status(status, "status");
    std::int64_t n = 0;
    for (const ke::Node& node : need(result, "result")->graph.nodes()) n += node.evaluation.status == s ? 1 : 0;
    *out = n;
  });
}

KE_API ke_status ke_result_elapsed_s(double* out, const ke_result* result) {
  return get_field(__func__, out, result, "result", [](const ke_result& r) { return r.run.state.elapsed_s; });
}

KE_API ke_status ke_result_mutator_failures(int64_t* out, const ke_result* result) {
  return get_field(__func__, out, result, "result", [](const ke_result& r) { return r.run.mutator_failures; });
}

KE_API ke_status ke_result_tokens(int64_t* out, const ke_result* result) {
  return get_field(__func__, out, result, "result", [](const ke_result& r) { return r.run.state.tokens; });
}

KE_API ke_status ke_result_cost_usd(double* out, const ke_result* result) {
  return get_field(__func__, out, result, "result", [](const ke_result& r) { return r.run.state.cost_usd; });
}

KE_API ke_status ke_result_confirmation(int* confirmed, double* speedup, double* speedup_low, double* speedup_high,
                                        const ke_result* result) {
  return guard(__func__, [&] {
    const auto& c = need(result, "result")->run.confirmation;
    if (!c) fail(KE_ERROR_NOT_FOUND, "the run confirmed nothing (its best is the seed, or confirmation was off)");
    if (confirmed) *confirmed = c->confirmed ? 1 : 0;
    if (speedup) *speedup = c->speedup;
    if (speedup_low) *speedup_low = c->speedup_low;
    if (speedup_high) *speedup_high = c->speedup_high;
  });
}

KE_API ke_status ke_result_device(const ke_device_info** out, const ke_result* result) {
  return get_field(__func__, out, result, "result", [](const ke_result& r) { return &r.device; });
}

namespace {

// A report of the result, made once and kept in it, so that the pointer handed out lives as long as the result.
template <class TextOf, class Make>
ke_status report(const char* function, const char** out, const ke_result* result, TextOf text_of, Make make) {
  return guard(function, [&] {
    need_out(out, "out");
    need(result, "result");
    std::lock_guard lock(result->mutex);
    auto& text = text_of(*result);
    if (!text) text = make(*result);
    *out = text->c_str();
  });
}

}  // namespace

KE_API ke_status ke_result_report_json(const char** out, const ke_result* result) {
  return report(
      __func__, out, result, [](const ke_result& r) -> auto& { return r.json; },
      [](const ke_result& r) {
        return r.is_check ? check_report_json(r) : ke::run_report_json(r.spec, r.device.info, r.graph, r.run, r.run_id);
      });
}

KE_API ke_status ke_result_report_text(const char** out, const ke_result* result) {
  return report(
      __func__, out, result, [](const ke_result& r) -> auto& { return r.text; },
      [](const ke_result& r) {
        return r.is_check ? check_report_text(r) : ke::run_report_text(r.spec, r.device.info, r.graph, r.run);
      });
}

KE_API ke_status ke_result_run_id(int64_t* out, const ke_result* result) {
  return get_field(__func__, out, result, "result", [](const ke_result& r) { return r.run_id; });
}
