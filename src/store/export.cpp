// Views of a stored run: the table and lineage of `kernelevolve show`, the ready-to-compile source of
// `best`, and the JSON and Graphviz DOT of `export`.
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "kernelevolve/counters.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/json.hpp"
#include "kernelevolve/store.hpp"

namespace kernelevolve {

namespace {

std::string number(double x, const char* format = "%.6g") {
  if (!std::isfinite(x)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

// An element's value for a person: a NaN a kernel wrote is a value, "NaN", not JSON's null for "none".
std::string element_text(double x) {
  if (std::isnan(x)) return "NaN";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

std::string workload_name(const Bindings& w) {
  std::string name;
  for (const auto& [k, v] : w) name += (name.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return name;
}

std::string tunables_text(const Bindings& t) {
  std::string out;
  for (const auto& [k, v] : t) out += (out.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return out;
}

std::string one_line(std::string text, std::size_t width) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (text.size() > width) text = text.substr(0, width > 3 ? width - 3 : 0) + "...";
  return text;
}

std::string parents_text(const Node& n) {
  if (n.parents.empty()) return "-";
  std::string out;
  for (NodeId p : n.parents) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

// The workloads of a stored spec, or numbered placeholders if it no longer parses.
std::vector<std::string> workload_names(const RunInfo& info, std::size_t count) {
  std::vector<std::string> names;
  try {
    const Spec spec = parse_spec(info.spec_json, info.spec_path.empty() ? info.spec_name : info.spec_path);
    for (const Bindings& w : spec.workloads) names.push_back(workload_name(w));
  } catch (const std::exception&) {
  }
  while (names.size() < count) names.push_back("workload " + std::to_string(names.size()));
  return names;
}

// The run's own choice when it made one (confirmation may have passed over the search's fastest), else the
// graph's fastest: what `run` reported is what `show`, `best` and `export` name.
std::optional<NodeId> run_best(const RunInfo& info, const SearchGraph& g) {
  if (info.best && *info.best >= 0 && static_cast<std::size_t>(*info.best) < g.size() &&
      g.node(*info.best).evaluation.status == Status::ok) {
    return info.best;
  }
  return g.best();
}

// Dollars as a person reads them: cents for a run, fractions of a cent for one call.
std::string usd(double x) { return "$" + number(x, x >= 1 ? "%.2f" : x >= 0.01 ? "%.4f" : "%.6f"); }

// The model that wrote a node, and what its call cost, before its note: "[gpt-4o $0.0123] ".
std::string model_prefix(const Node& n) {
  if (n.model.empty()) return "";
  return "[" + n.model + (n.cost_usd > 0 ? " " + usd(n.cost_usd) : "") + "] ";
}

// A node's diagnosis, a line per workload (named as the table names them) and one for a GPU's resources.
std::string diagnosis_block(const Node& n) {
  if (!n.diagnosis) return "";
  const Diagnosis& d = *n.diagnosis;
  std::ostringstream out;
  out << "diagnosis (rates from the spec's cost; shares of the device's copy bandwidth, which caches may pass, and "
         "FMA peak, or the tensor-core peak a line names"
      << (d.note.empty() ? "" : "; " + d.note) << "):\n";
  for (std::size_t w = 0; w < d.workloads.size(); ++w)
    out << "  t" << w << ": " << workload_diagnosis_text(d.workloads[w]) << "\n";
  if (d.gpu) out << "  " << gpu_diagnosis_text(*d.gpu) << "\n";
  for (std::size_t i = 0; i < d.steps.size(); ++i) out << "  " << step_diagnosis_text(d.steps[i], i) << "\n";
  if (d.library_share) out << "  library calls: " << std::lround(100 * *d.library_share) << "% of the time\n";
  // The counters in words; the duration at the profiler's locked clocks only with the node (export keeps all).
  if (const std::string c = counters_text(d.counters); !c.empty()) {
    out << "  " << c << " (Nsight Compute, one launch of t0";
    if (const auto it = d.counters.find("hw_duration_ns"); it != d.counters.end()) {
      char us[32];
      std::snprintf(us, sizeof us, "%.1f", static_cast<double>(it->second) / 1000);
      out << ": " << us << " us at its locked clocks";
    }
    out << ")\n";
  }
  return out.str();
}

std::string run_state(const RunInfo& info) {
  if (!info.finished_at.empty()) return "finished " + info.finished_at + ": " + info.stop_reason;
  return "not finished (interrupted, or still running); last commit " + info.updated_at;
}

}  // namespace

std::string show_run_text(const Store& store, RunId run, std::size_t limit) {
  const RunInfo info = store.run(run);
  const Checkpoint cp = store.load(run);
  const SearchGraph& g = cp.graph;
  std::size_t workloads = 0;
  for (const Node& n : g.nodes()) workloads = std::max(workloads, n.evaluation.timings.size());
  const auto names = workload_names(info, workloads);
  std::ostringstream out;
  out << "run " << info.id << " of " << store.path() << ": " << info.spec_name << " on " << info.device.id << " ("
      << info.device.name << "), policy " << (info.settings.policy.empty() ? "-" : info.settings.policy) << ", mutator "
      << (info.settings.mutator.empty() ? "-" : info.settings.mutator) << "\n";
  out << "  started " << info.started_at << ", " << run_state(info) << "\n";
  for (const std::string& line : info.confirmation) out << "  " << line << "\n";
  out << "  " << g.size() << " nodes in " << number(info.elapsed_s, "%.1f") << " s";
  if (info.tokens > 0) out << ", " << info.tokens << " model tokens";
  if (info.cost_usd > 0) out << " costing " << usd(info.cost_usd);
  if (info.mutator_failures > 0) out << ", " << info.mutator_failures << " mutator failures";
  out << "\n";
  std::map<std::string, int> counts;
  for (const Node& n : g.nodes()) counts[to_string(n.evaluation.status)] += 1;
  out << "  statuses:";
  for (const auto& [k, v] : counts) out << " " << k << " " << v;
  out << "\n";
  for (std::size_t w = 0; w < names.size(); ++w) out << "  t" << w << " = " << names[w] << " (us)\n";

  char cell[128];
  std::string header;
  std::snprintf(cell, sizeof cell, "%6s %-8s %-9s %-13s", "id", "parent", "mutator", "status");
  header = cell;
  for (std::size_t w = 0; w < names.size(); ++w) {
    std::snprintf(cell, sizeof cell, " %11s", ("t" + std::to_string(w)).c_str());
    header += cell;
  }
  std::snprintf(cell, sizeof cell, " %8s  %s", "speedup", "note");
  out << "\n" << header << cell << "\n";
  const auto best = run_best(info, g);
  std::size_t shown = 0;
  for (const Node& n : g.nodes()) {
    if (limit > 0 && shown++ >= limit) {
      out << "  ... " << (g.size() - limit) << " more nodes (--limit 0 shows them all)\n";
      break;
    }
    std::snprintf(cell, sizeof cell, "%6lld %-8s %-9s %-13s", static_cast<long long>(n.id), parents_text(n).c_str(),
                  one_line(n.mutator, 9).c_str(), to_string(n.evaluation.status));
    std::string line = cell;
    for (std::size_t w = 0; w < names.size(); ++w) {
      // "-": not timed (a failure before timing, or a NaN no clock gives), never "nan" read as a time.
      if (w < n.evaluation.timings.size() && std::isfinite(n.evaluation.timings[w].median_us)) {
        std::snprintf(cell, sizeof cell, " %11.1f", n.evaluation.timings[w].median_us);
      } else {
        std::snprintf(cell, sizeof cell, " %11s", "-");
      }
      line += cell;
    }
    if (n.evaluation.status == Status::ok && std::isfinite(n.speedup)) {
      std::snprintf(cell, sizeof cell, " %7.2fx%s", n.speedup, best && *best == n.id ? "*" : " ");
    } else {
      std::snprintf(cell, sizeof cell, " %8s ", "-");
    }
    line += cell;
    std::string note = model_prefix(n) + n.note;
    if (n.evaluation.status != Status::ok && !n.evaluation.message.empty())
      note += (note.empty() ? "" : ": ") + n.evaluation.message;
    out << line << " " << one_line(note, 72) << "\n";
  }
  out << "\n";
  if (!best) {
    out << "no correct node";
    if (g.size() > 0)
      out << "; the seed is " << to_string(g.node(0).evaluation.status) << ": " << g.node(0).evaluation.message;
    out << "\n";
    return out.str();
  }
  const Node& b = g.node(*best);
  out << "best: node " << b.id << ", " << number(b.speedup, "%.3f") << "x over the seed (geometric mean)";
  if (!b.candidate.tunables.empty()) out << ", " << tunables_text(b.candidate.tunables);
  out << "\n" << diagnosis_block(b);
  out << "lineage of the best:\n";
  for (NodeId id : g.lineage(b.id)) {
    const Node& n = g.node(id);
    std::snprintf(
        cell, sizeof cell, "  %6lld %-9s %8s  ", static_cast<long long>(n.id), one_line(n.mutator, 9).c_str(),
        n.evaluation.status == Status::ok ? (number(n.speedup, "%.2f") + "x").c_str() : to_string(n.evaluation.status));
    out << cell << one_line(model_prefix(n) + n.note, 90) << "\n";
  }
  return out.str();
}

std::string show_node_text(const Store& store, RunId run, NodeId id) {
  const RunInfo info = store.run(run);
  const Checkpoint cp = store.load(run);
  const SearchGraph& g = cp.graph;
  if (id < 0 || static_cast<std::size_t>(id) >= g.size()) {
    throw Error(ErrorCode::BadUsage, "run " + std::to_string(run) + " of " + store.path() + " has no node " +
                                         std::to_string(id) + " (it has " + std::to_string(g.size()) + ": 0 to " +
                                         std::to_string(static_cast<long long>(g.size()) - 1) + ")");
  }
  const Node& n = g.node(id);
  const Evaluation& e = n.evaluation;
  std::ostringstream out;
  out << "node " << n.id << " of run " << info.id << " (" << info.spec_name << " on " << info.device.id << ", "
      << info.device.name << "): " << n.mutator << " from " << parents_text(n) << ", " << to_string(e.status);
  if (e.status == Status::ok) out << ", " << number(n.speedup, "%.3f") << "x over the seed (geometric mean)";
  out << "\n";
  if (!n.note.empty()) out << "  note: " << one_line(n.note, 200) << "\n";
  if (!e.message.empty()) out << "  message: " << one_line(e.message, 200) << "\n";
  out << "  tunables: " << (n.candidate.tunables.empty() ? "(none)" : tunables_text(n.candidate.tunables)) << "\n";
  const auto names = workload_names(info, e.timings.size());
  char line[160];
  for (std::size_t w = 0; w < e.timings.size(); ++w) {
    const WorkloadTiming& t = e.timings[w];
    std::snprintf(line, sizeof line, "  t%zu (%s): %.1f us, spread %.1f us, range %.1f to %.1f us, %d samples\n", w,
                  names[w].c_str(), t.median_us, t.mad_us, t.min_us, t.max_us, t.samples);
    out << line;
  }
  out << diagnosis_block(n);
  if (!e.resources.empty()) {
    out << "resources:";
    for (const auto& [k, v] : e.resources) out << " " << k << "=" << v;
    out << "\n";
  }
  if (e.worst) {
    // An ok node keeps its worst element too: how near the tolerance it came.
    out << (e.status == Status::ok ? "worst element (within tolerance): " : "worst mismatch: ") << e.worst->buffer
        << "[" << e.worst->index << "] = " << element_text(e.worst->got) << ", expected "
        << element_text(e.worst->expected) << " (workload " << e.worst->workload << ")\n";
  }
  if (!e.compile_log.empty()) {
    const std::size_t keep = 2000;
    out << "compiler log" << (e.compile_log.size() > keep ? " (the end)" : "") << ":\n"
        << (e.compile_log.size() > keep ? e.compile_log.substr(e.compile_log.size() - keep) : e.compile_log);
    if (e.compile_log.back() != '\n') out << "\n";
  }
  return out.str();
}

std::optional<std::string> best_kernel_source(const Store& store, RunId run) {
  const RunInfo info = store.run(run);
  const Checkpoint cp = store.load(run);
  const auto best = run_best(info, cp.graph);
  if (!best) return std::nullopt;
  const Node& b = cp.graph.node(*best);
  std::ostringstream out;
  // A Triton kernel is Python: its tunables are constexpr arguments and launch options, not macros.
  const bool triton = b.candidate.language == Language::triton;
  const char* comment = triton ? "# " : "// ";
  out << comment << "kernelevolve: the best kernel of run " << info.id << " in " << one_line(store.path(), 200) << "\n"
      << comment << "spec " << one_line(info.spec_name, 100) << ", device "
      << one_line(info.device.id + " (" + info.device.name + ")", 120) << ", node " << b.id << ", "
      << number(b.speedup, "%.3f") << "x over the seed (geometric mean)\n";
  const auto t = b.evaluation.median_us();
  if (!t.empty()) {
    out << comment << "time per workload (us):";
    for (double x : t) out << " " << number(x, "%.2f");
    out << "\n";
  }
  if (!b.candidate.tunables.empty() && triton) {
    out << "# launch with the constexprs and options " << tunables_text(b.candidate.tunables)
        << " (num_warps and num_stages are options of the launch or of triton.compile)\n";
  } else if (!b.candidate.tunables.empty()) {
    out << "// tunables: " << tunables_text(b.candidate.tunables) << " (defined here unless given with -D)\n";
  }
  if (!triton) {
    for (const auto& [name, value] : b.candidate.tunables)
      out << "#ifndef " << name << "\n#define " << name << " " << value << "\n#endif\n";
  }
  out << "\n" << b.candidate.source;
  if (!b.candidate.source.empty() && b.candidate.source.back() != '\n') out << "\n";
  return out.str();
}

std::string export_json(const Store& store, RunId run) {
  const RunInfo info = store.run(run);
  const Checkpoint cp = store.load(run);
  const SearchGraph& g = cp.graph;
  std::ostringstream out;
  out << "{\"run\": {\"id\": " << info.id << ", \"spec\": " << json_quote(info.spec_name)
      << ", \"spec_path\": " << json_quote(info.spec_path) << ", \"spec_hash\": " << json_quote(info.spec_hash)
      << ", \"device\": {\"id\": " << json_quote(info.device.id) << ", \"kind\": " << json_quote(info.device.kind)
      << ", \"name\": " << json_quote(info.device.name) << "}, \"policy\": " << json_quote(info.settings.policy)
      << ", \"mutator\": " << json_quote(info.settings.mutator) << ", \"seed\": " << info.settings.seed
      << ", \"started_at\": " << json_quote(info.started_at) << ", \"updated_at\": " << json_quote(info.updated_at)
      << ", \"finished_at\": " << (info.finished_at.empty() ? "null" : json_quote(info.finished_at))
      << ", \"stop_reason\": " << json_quote(info.stop_reason) << ", \"elapsed_s\": " << number(info.elapsed_s)
      << ", \"tokens\": " << info.tokens << ", \"cost_usd\": " << number(info.cost_usd) << ", \"llm_prices\": {";
  for (auto it = info.settings.llm_prices.begin(); it != info.settings.llm_prices.end(); ++it) {
    out << (it == info.settings.llm_prices.begin() ? "" : ", ") << json_quote(it->first)
        << ": {\"input_per_mtok\": " << number(it->second.input_per_mtok)
        << ", \"output_per_mtok\": " << number(it->second.output_per_mtok) << "}";
  }
  out << "}, \"mutator_failures\": " << info.mutator_failures << "}";
  out << ", \"workloads\": [";
  std::size_t workloads = 0;
  for (const Node& n : g.nodes()) workloads = std::max(workloads, n.evaluation.timings.size());
  const auto names = workload_names(info, workloads);
  for (std::size_t w = 0; w < names.size(); ++w) out << (w ? ", " : "") << json_quote(names[w]);
  out << "], \"nodes\": [";
  std::map<std::string, std::size_t> source_index;
  std::vector<const std::string*> sources;
  for (const Node& n : g.nodes()) {
    auto [it, added] = source_index.emplace(n.candidate.source, sources.size());
    if (added) sources.push_back(&it->first);
    const Evaluation& e = n.evaluation;
    out << (n.id ? ", " : "") << "{\"id\": " << n.id << ", \"parents\": [";
    for (std::size_t i = 0; i < n.parents.size(); ++i) out << (i ? ", " : "") << n.parents[i];
    out << "], \"mutator\": " << json_quote(n.mutator)
        << ", \"model\": " << (n.model.empty() ? "null" : json_quote(n.model)) << ", \"note\": " << json_quote(n.note)
        << ", \"status\": " << json_quote(to_string(e.status)) << ", \"message\": " << json_quote(e.message)
        << ", \"speedup\": " << number(n.speedup) << ", \"created_s\": " << number(n.created_s)
        << ", \"language\": " << json_quote(to_string(n.candidate.language)) << ", \"tunables\": {";
    bool first = true;
    for (const auto& [k, v] : n.candidate.tunables) {
      out << (first ? "" : ", ") << json_quote(k) << ": " << v;
      first = false;
    }
    out << "}, \"time_us\": [";
    for (std::size_t w = 0; w < e.timings.size(); ++w) out << (w ? ", " : "") << number(e.timings[w].median_us);
    out << "], \"spread_us\": [";
    for (std::size_t w = 0; w < e.timings.size(); ++w) out << (w ? ", " : "") << number(e.timings[w].mad_us);
    out << "], \"compile_ms\": " << number(e.compile_ms) << ", \"resources\": {";
    first = true;
    for (const auto& [k, v] : e.resources) {
      out << (first ? "" : ", ") << json_quote(k) << ": " << v;
      first = false;
    }
    out << "}, \"worst\": ";
    if (e.worst) {
      out << "{\"buffer\": " << json_quote(e.worst->buffer) << ", \"workload\": " << e.worst->workload
          << ", \"index\": " << e.worst->index << ", \"got\": " << number(e.worst->got)
          << ", \"expected\": " << number(e.worst->expected) << "}";
    } else {
      out << "null";
    }
    out << ", \"diagnosis\": " << (n.diagnosis ? diagnosis_json(*n.diagnosis) : "null");
    out << ", \"tokens\": " << n.tokens << ", \"cost_usd\": " << number(n.cost_usd) << ", \"source\": " << it->second;
    if (!e.compile_log.empty()) out << ", \"compile_log\": " << json_quote(e.compile_log);
    out << "}";
  }
  out << "], \"sources\": [";
  for (std::size_t i = 0; i < sources.size(); ++i) out << (i ? ", " : "") << json_quote(*sources[i]);
  out << "], \"best\": ";
  if (const auto best = run_best(info, g)) {
    out << *best << ", \"lineage\": [";
    const auto chain = g.lineage(*best);
    for (std::size_t i = 0; i < chain.size(); ++i) out << (i ? ", " : "") << chain[i];
    out << "]";
  } else {
    out << "null, \"lineage\": []";
  }
  out << "}\n";
  return out.str();
}

namespace {

std::string dot_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

const char* status_color(Status s) {
  switch (s) {
    case Status::ok: return "#b7e4b0";
    case Status::compile_error: return "#f7b267";
    case Status::incorrect: return "#f08080";
    case Status::crashed: return "#c3a6e0";
    case Status::timeout: return "#cccccc";
    case Status::invalid: return "#d9c49a";
    default: return "#ffffff";
  }
}

}  // namespace

std::string export_dot(const Store& store, RunId run) {
  const RunInfo info = store.run(run);
  const Checkpoint cp = store.load(run);
  const SearchGraph& g = cp.graph;
  const auto best = run_best(info, g);
  std::ostringstream out;
  out << "digraph \"" << dot_escape(info.spec_name + " run " + std::to_string(info.id)) << "\" {\n"
      << "  graph [rankdir=LR, label=\""
      << dot_escape(info.spec_name + " on " + info.device.id + " (" + info.device.name + "), run " +
                    std::to_string(info.id))
      << "\", labelloc=t, fontname=\"Helvetica\"];\n"
      << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
      << "  edge [color=\"#777777\"];\n";
  for (const Node& n : g.nodes()) {
    std::string label = std::to_string(n.id) + " " + n.mutator + "\n";
    label += n.evaluation.status == Status::ok ? number(n.speedup, "%.2f") + "x" : to_string(n.evaluation.status);
    if (!n.candidate.tunables.empty()) label += "\n" + tunables_text(n.candidate.tunables);
    const bool is_best = best && *best == n.id;
    out << "  n" << n.id << " [label=\"" << dot_escape(label) << "\", fillcolor=\""
        << (is_best ? "#ffd700" : status_color(n.evaluation.status)) << "\"";
    if (is_best) out << ", penwidth=3";
    out << ", tooltip=\""
        << dot_escape(one_line(n.note + (n.evaluation.message.empty() ? "" : ": " + n.evaluation.message), 200))
        << "\"];\n";
  }
  std::vector<bool> on_lineage(g.size(), false);  // the best node's lineage stands out
  if (best) {
    for (NodeId id : g.lineage(*best)) on_lineage[static_cast<std::size_t>(id)] = true;
  }
  for (const Node& n : g.nodes()) {
    for (std::size_t i = 0; i < n.parents.size(); ++i) {
      out << "  n" << n.parents[i] << " -> n" << n.id;
      if (i == 0 && on_lineage[static_cast<std::size_t>(n.id)]) {
        out << " [color=\"#b8860b\", penwidth=2.5]";
      } else if (i > 0) {
        out << " [style=dashed]";
      }
      out << ";\n";
    }
  }
  out << "}\n";
  return out.str();
}

}  // namespace kernelevolve
