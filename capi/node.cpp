// The C API: nodes (kernel variants of a search graph), borrowed from a result or passed to a callback.
#include "internal.hpp"

#include <string>

using namespace capi;

namespace {

const ke::Node& node_of(const ke_node* node) { return *need(node, "node")->node; }

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Nodes

KE_API ke_status ke_eval_status_name(const char** out, ke_eval_status status) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = ke::to_string(need_status(status, "status"));
  });
}

namespace {

template <class T, class F>
ke_status node_field(const char* function, T* out, const ke_node* node, F field) {
  return get_field(function, out, node, "node", [&](const ke_node& n) { return field(*n.node); });
}

}  // namespace

KE_API ke_status ke_node_id(int64_t* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return std::int64_t{n.id}; });
}
KE_API ke_status ke_node_status(ke_eval_status* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return to_c(n.evaluation.status); });
}
KE_API ke_status ke_node_message(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.evaluation.message.c_str(); });
}
KE_API ke_status ke_node_source(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.candidate.source.c_str(); });
}
KE_API ke_status ke_node_language(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return ke::to_string(n.candidate.language); });
}
KE_API ke_status ke_node_mutator(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.mutator.c_str(); });
}
KE_API ke_status ke_node_note(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.note.c_str(); });
}
KE_API ke_status ke_node_compile_log(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.evaluation.compile_log.c_str(); });
}
KE_API ke_status ke_node_speedup(double* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.speedup; });
}
KE_API ke_status ke_node_created_s(double* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.created_s; });
}
KE_API ke_status ke_node_parent_count(size_t* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.parents.size(); });
}

KE_API ke_status ke_node_parent(int64_t* out, const ke_node* node, size_t index) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const ke::Node& n = node_of(node);
    if (index >= n.parents.size()) {
      fail(KE_ERROR_NOT_FOUND, "parent index " + std::to_string(index) + " is out of range (node " +
                                   std::to_string(n.id) + " has " + std::to_string(n.parents.size()) + ")");
    }
    *out = n.parents[index];
  });
}

KE_API ke_status ke_node_tunable_count(size_t* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.candidate.tunables.size(); });
}

KE_API ke_status ke_node_tunable(const char** name, int64_t* value, const ke_node* node, size_t index) {
  return guard(__func__, [&] {
    need_out(name, "name");
    need_out(value, "value");
    const auto it = nth(node_of(node).candidate.tunables, index, "tunable");
    *name = it->first.c_str();
    *value = it->second;
  });
}

KE_API ke_status ke_node_tunable_value(int64_t* out, const ke_node* node, const char* name) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const std::string key = need_string(name, "name");
    const ke::Node& n = node_of(node);
    const auto it = n.candidate.tunables.find(key);
    if (it == n.candidate.tunables.end()) {
      fail(KE_ERROR_NOT_FOUND, "node " + std::to_string(n.id) + " has no tunable '" + key + "'");
    }
    *out = it->second;
  });
}

KE_API ke_status ke_node_timing_count(size_t* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.evaluation.timings.size(); });
}

KE_API ke_status ke_node_timing(ke_timing* out, const ke_node* node, size_t workload) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need_version(out->version, KE_TIMING_VERSION, "ke_timing");
    const ke::Node& n = node_of(node);
    if (workload >= n.evaluation.timings.size()) {
      fail(KE_ERROR_NOT_FOUND, "node " + std::to_string(n.id) + " has no timing for workload " +
                                   std::to_string(workload) + " (it has " +
                                   std::to_string(n.evaluation.timings.size()) + ")");
    }
    const ke::WorkloadTiming& t = n.evaluation.timings[workload];
    out->median_us = t.median_us;
    out->min_us = t.min_us;
    out->max_us = t.max_us;
    out->mad_us = t.mad_us;
    out->samples = t.samples;
  });
}

KE_API ke_status ke_node_mismatch(ke_mismatch* out, const ke_node* node) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need_version(out->version, KE_MISMATCH_VERSION, "ke_mismatch");
    const ke::Node& n = node_of(node);
    if (!n.evaluation.worst) fail(KE_ERROR_NOT_FOUND, "node " + std::to_string(n.id) + " has no recorded mismatch");
    const ke::Mismatch& m = *n.evaluation.worst;
    out->buffer = m.buffer.c_str();
    out->workload = m.workload;
    out->trial = m.trial;
    out->index = m.index;
    out->got = m.got;
    out->expected = m.expected;
    out->excess = m.excess;
  });
}

KE_API ke_status ke_node_prompt(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.prompt.c_str(); });
}
KE_API ke_status ke_node_answer(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.answer.c_str(); });
}
KE_API ke_status ke_node_tokens(int64_t* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return std::int64_t{n.tokens}; });
}
KE_API ke_status ke_node_cost_usd(double* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.cost_usd; });
}
KE_API ke_status ke_node_model(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.model.c_str(); });
}
