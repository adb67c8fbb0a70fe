#include "kernelevolve/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "kernelevolve/json.hpp"

namespace kernelevolve {

double roofline_share(const Spec& spec, const Bindings& workload, const Bindings& tunables, double time_us,
                      const DeviceInfo& device) {
  double share = 0;
  if (device.peak_bytes_per_s > 0) {
    share = std::max(share, achieved_bytes_per_s(spec, workload, tunables, time_us) / device.peak_bytes_per_s);
  }
  // bf16 and fp16 work against its tensor-core peak where the device knows it; else the FMA peak, as before.
  const ComputePeak peak = compute_peak(spec, device);
  const double flops_peak = peak.tensor ? peak.flops_per_s : device.peak_flops_per_s;
  if (flops_peak > 0) share = std::max(share, achieved_flops_per_s(spec, workload, tunables, time_us) / flops_peak);
  return share;
}

namespace {

std::string number(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

// Dollars to the precision a sum of many small calls needs.
std::string dollars(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.12g", x);
  return buf;
}

// A ratio for a person: "1.23x", or words where it was not measured (JSON writes null instead).
std::string ratio_text(double x) {
  if (!std::isfinite(x)) return "no ratio (not measured)";
  return number(x) + "x";
}

template <class F>
std::string array(std::size_t n, F f) {
  std::string out = "[";
  for (std::size_t i = 0; i < n; ++i) out += (i ? ", " : "") + f(i);
  return out + "]";
}

// For each workload, the ok node fastest on it alone (among nodes measured on the best node's class of
// device): one kernel must serve every shape, but a host that dispatches by shape may want these.
std::vector<NodeId> fastest_per_workload(const Spec& spec, const SearchGraph& graph, const Node& best) {
  std::vector<NodeId> out(spec.workloads.size(), best.id);
  for (NodeId id : graph.ok_nodes()) {
    const Node& n = graph.node(id);
    if (n.evaluation.device != best.evaluation.device) continue;
    for (std::size_t w = 0; w < out.size() && w < n.evaluation.timings.size(); ++w) {
      if (n.evaluation.timings[w].median_us < graph.node(out[w]).evaluation.timings[w].median_us) out[w] = id;
    }
  }
  return out;
}

// Geometric mean over workloads of baseline time / best time, with the best's search times (measured
// under the same protocol as the baseline's); NaN when the baseline has no time.
double speedup_over(const Evaluation& baseline, const Node& best) {
  if (baseline.status != Status::ok || baseline.timings.size() != best.evaluation.timings.size() ||
      baseline.timings.empty()) {
    return NAN;
  }
  double log_sum = 0;
  for (std::size_t w = 0; w < baseline.timings.size(); ++w) {
    log_sum += std::log(baseline.timings[w].median_us / best.evaluation.timings[w].median_us);
  }
  return std::exp(log_sum / static_cast<double>(baseline.timings.size()));
}

}  // namespace

std::string precision_json(const Precision& p) {
  return "{\"policy\": " + json_quote(to_string(p.policy)) + ", \"cudnn_tf32\": " + (p.cudnn_tf32 ? "true" : "false") +
         ", \"matmul_tf32\": " + (p.matmul_tf32 ? "true" : "false") +
         ", \"float32_matmul_precision\": " + json_quote(p.float32_matmul_precision) +
         ", \"reference_error_factor\": " + number(kReferenceErrorFactor) + "}";
}

BestBaseline best_baseline(const std::vector<Baseline>& baselines, std::size_t workloads) {
  BestBaseline out;
  if (workloads == 0) return out;
  out.time_us.assign(workloads, NAN);
  out.name.assign(workloads, "");
  for (const Baseline& b : baselines) {
    if (b.evaluation.status != Status::ok || b.evaluation.timings.size() != workloads) continue;
    for (std::size_t w = 0; w < workloads; ++w) {
      const double t = b.evaluation.timings[w].median_us;
      if (t > 0 && !(t >= out.time_us[w])) {  // NaN (none yet) compares false
        out.time_us[w] = t;
        out.name[w] = b.name;
      }
    }
  }
  for (const double t : out.time_us) {
    if (std::isnan(t)) return {};
  }
  return out;
}

double speedup_over_best_baseline(const std::vector<Baseline>& baselines, const Evaluation& best) {
  const BestBaseline mark = best_baseline(baselines, best.timings.size());
  if (mark.empty()) return NAN;
  double log_sum = 0;
  for (std::size_t w = 0; w < mark.time_us.size(); ++w) {
    if (!(best.timings[w].median_us > 0)) return NAN;
    log_sum += std::log(mark.time_us[w] / best.timings[w].median_us);
  }
  return std::exp(log_sum / static_cast<double>(mark.time_us.size()));
}

namespace {

const Baseline* find_baseline(const RunResult& result, const std::string& name) {
  for (const Baseline& b : result.baselines) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

// The host's cost of one call on workload w (a baseline's Python call; LocalEvaluator's "host_ns.w<N>"), 0 if
// not measured.
double host_us(const Evaluation& e, std::size_t w) {
  const auto it = e.resources.find("host_ns.w" + std::to_string(w));
  return it == e.resources.end() ? 0.0 : static_cast<double>(it->second) / 1000.0;
}
bool has_host_time(const Evaluation& e) { return host_us(e, 0) > 0; }

// Each workload's spread (the median absolute deviation of its timed runs), beside its median.
std::string spread_array(const Evaluation& e) {
  return array(e.timings.size(), [&](std::size_t i) { return number(e.timings[i].mad_us); });
}

}  // namespace

std::string confirmation_json(const Confirmation& c) {
  auto list = [](const std::vector<double>& v) { return array(v.size(), [&](std::size_t i) { return number(v[i]); }); };
  return "{\"node\": " + std::to_string(c.node) + ", \"confirmed\": " + (c.confirmed ? "true" : "false") +
         ", \"rounds\": " + std::to_string(c.rounds) + ", \"speedup\": " + number(c.speedup) +
         ", \"speedup_range\": [" + number(c.speedup_low) + ", " + number(c.speedup_high) + "]" +
         ", \"search_speedup\": " + number(c.search_speedup) + ", \"best_time_us\": " + list(c.best_time_us) +
         ", \"best_spread_us\": " + list(c.best_spread_us) + ", \"seed_time_us\": " + list(c.seed_time_us) +
         ", \"seed_spread_us\": " + list(c.seed_spread_us) + ", \"note\": " + json_quote(c.note) + "}";
}

std::string confirmation_text(const Confirmation& c) {
  std::ostringstream out;
  out << (c.confirmed ? "confirmed" : "NOT confirmed") << ": node " << c.node << ", " << c.rounds
      << " rounds against the seed, interleaved, on fresh inputs: " << ratio_text(c.speedup) << " (rounds "
      << ratio_text(c.speedup_low) << " to " << ratio_text(c.speedup_high) << "); the search measured "
      << ratio_text(c.search_speedup);
  if (!c.confirmed && !c.note.empty()) out << " (" << c.note << ")";
  return out.str();
}

std::string run_report_json(const Spec& spec, const DeviceInfo& device, const SearchGraph& graph,
                            const RunResult& result, std::int64_t run_id) {
  std::map<std::string, int> counts;
  for (const Node& n : graph.nodes()) counts[to_string(n.evaluation.status)] += 1;
  std::ostringstream out;
  out << "{" << json_quote("spec") << ": " << json_quote(spec.name)
      << ", \"device\": " << json_quote(device.id + " " + device.name)
      << ", \"ceilings_moved\": " << (result.ceilings_moved.empty() ? "null" : json_quote(result.ceilings_moved))
      << ", \"run\": " << run_id << ", \"precision\": " << precision_json(spec.precision_in_effect())
      << ", \"evaluations\": " << graph.size() << ", \"status_counts\": {";
  bool first = true;
  for (const auto& [k, v] : counts) {
    out << (first ? "" : ", ") << json_quote(k) << ": " << v;
    first = false;
  }
  out << "}, \"stop_reason\": " << json_quote(result.stop_reason)
      << ", \"elapsed_s\": " << number(result.state.elapsed_s) << ", \"mutator_failures\": " << result.mutator_failures
      << ", \"tokens\": " << result.state.tokens << ", \"cost_usd\": " << dollars(result.state.cost_usd);
  // Per model, what its nodes did and cost (a failed call without a node counts in the totals above only).
  std::map<std::string, std::vector<const Node*>> by_model;
  for (const Node& n : graph.nodes()) {
    if (!n.model.empty()) by_model[n.model].push_back(&n);
  }
  if (!by_model.empty()) {
    out << ", \"models\": {";
    for (auto it = by_model.begin(); it != by_model.end(); ++it) {
      std::int64_t ok = 0, tokens = 0;
      double cost = 0, best = 0;
      for (const Node* n : it->second) {
        ok += n->evaluation.status == Status::ok;
        tokens += n->tokens;
        cost += n->cost_usd;
        best = std::max(best, n->speedup);
      }
      out << (it == by_model.begin() ? "" : ", ") << json_quote(it->first) << ": {\"nodes\": " << it->second.size()
          << ", \"ok\": " << ok << ", \"best_speedup\": " << number(best) << ", \"tokens\": " << tokens
          << ", \"cost_usd\": " << dollars(cost) << "}";
    }
    out << "}";
  }
  if (result.seed >= 0) {
    const Node& seed = graph.node(result.seed);
    const auto t = seed.evaluation.median_us();
    out << ", \"seed\": {\"node\": " << seed.id << ", \"status\": " << json_quote(to_string(seed.evaluation.status))
        << ", \"message\": " << json_quote(seed.evaluation.message)
        << ", \"time_us\": " << array(t.size(), [&](std::size_t i) { return number(t[i]); })
        << ", \"spread_us\": " << spread_array(seed.evaluation) << "}";
  }
  if (!result.baselines.empty()) {
    out << ", \"baselines\": {";
    for (std::size_t i = 0; i < result.baselines.size(); ++i) {
      const Evaluation& e = result.baselines[i].evaluation;
      const auto t = e.median_us();
      const bool ok = e.status == Status::ok;
      out << (i ? ", " : "") << json_quote(result.baselines[i].name)
          << ": {\"status\": " << json_quote(to_string(e.status))
          << ", \"time_us\": " << (ok ? array(t.size(), [&](std::size_t w) { return number(t[w]); }) : "null")
          << ", \"spread_us\": " << (ok ? spread_array(e) : "null") << ", \"host_us\": "
          << (ok && has_host_time(e) ? array(t.size(), [&](std::size_t w) { return number(host_us(e, w)); }) : "null")
          << ", \"reason\": " << (ok ? "null" : json_quote(e.message)) << "}";
    }
    out << "}";
  }
  if (result.best) {
    const Node& best = graph.node(*result.best);
    const auto t = best.evaluation.median_us();
    const Bindings& tun = best.candidate.tunables;
    // The reported speedup is the confirmed one where the run confirmed its best (DESIGN.md).
    const bool has_confirmation = result.confirmation && result.confirmation->node == best.id;
    out << ", \"best\": {\"node\": " << best.id
        << ", \"speedup\": " << number(has_confirmation ? result.confirmation->speedup : best.speedup)
        << ", \"search_speedup\": " << number(best.speedup)
        << ", \"confirmed\": " << (has_confirmation && result.confirmation->confirmed ? "true" : "false")
        << ", \"confirmation\": " << (has_confirmation ? confirmation_json(*result.confirmation) : "null")
        << ", \"time_us\": " << array(t.size(), [&](std::size_t i) { return number(t[i]); })
        << ", \"spread_us\": " << spread_array(best.evaluation) << ", \"tunables\": " << json_object(tun)
        << ", \"gbps\": "
        << array(t.size(),
                 [&](std::size_t i) { return number(achieved_bytes_per_s(spec, spec.workloads[i], tun, t[i]) / 1e9); })
        << ", \"gflops\": "
        << array(t.size(),
                 [&](std::size_t i) { return number(achieved_flops_per_s(spec, spec.workloads[i], tun, t[i]) / 1e9); })
        << ", \"roofline_share\": "
        << array(t.size(),
                 [&](std::size_t i) { return number(roofline_share(spec, spec.workloads[i], tun, t[i], device)); })
        << ", \"diagnosis\": " << (best.diagnosis ? diagnosis_json(*best.diagnosis) : "null") << ", \"lineage\": "
        << array(graph.lineage(best.id).size(),
                 [&](std::size_t i) { return std::to_string(graph.lineage(best.id)[i]); })
        << ", \"source\": " << json_quote(best.candidate.source);
    for (const char* name : {"eager", "compile"}) {
      if (const Baseline* b = find_baseline(result, name)) {
        out << ", \"speedup_vs_" << name << "\": " << number(speedup_over(b->evaluation, best));
      }
    }
    if (const BestBaseline mark = best_baseline(result.baselines, best.evaluation.timings.size()); !mark.empty()) {
      // The mark to beat: the faster of eager and compile on each workload, not the slower one a kernel beats easily.
      out << ", \"speedup_vs_best_baseline\": " << number(speedup_over_best_baseline(result.baselines, best.evaluation))
          << ", \"best_baseline\": " << array(mark.name.size(), [&](std::size_t w) { return json_quote(mark.name[w]); })
          << ", \"best_baseline_us\": "
          << array(mark.time_us.size(), [&](std::size_t w) { return number(mark.time_us[w]); });
    }
    out << "}";
    out << ", \"unconfirmed\": "
        << array(result.unconfirmed.size(), [&](std::size_t i) { return confirmation_json(result.unconfirmed[i]); });
    const std::vector<NodeId> fastest = fastest_per_workload(spec, graph, best);
    out << ", \"fastest_per_workload\": " << array(fastest.size(), [&](std::size_t w) {
      const Node& n = graph.node(fastest[w]);
      const double t_us = n.evaluation.timings[w].median_us;
      return "{\"node\": " + std::to_string(n.id) + ", \"time_us\": " + number(t_us) +
             ", \"tunables\": " + json_object(n.candidate.tunables) + ", \"roofline_share\": " +
             number(roofline_share(spec, spec.workloads[w], n.candidate.tunables, t_us, device)) + "}";
    });
  } else {
    out << ", \"best\": null";
  }
  out << "}";
  return out.str();
}

std::string run_report_text(const Spec& spec, const DeviceInfo& device, const SearchGraph& graph,
                            const RunResult& result) {
  std::ostringstream out;
  std::map<std::string, int> counts;
  for (const Node& n : graph.nodes()) counts[to_string(n.evaluation.status)] += 1;
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, "%.1f", result.state.elapsed_s);
  out << spec.name << " on " << device.id << " (" << device.name << "): " << graph.size() << " evaluations in "
      << elapsed << " s; stopped: " << result.stop_reason << "\n  statuses:";
  for (const auto& [k, v] : counts) out << " " << k << " " << v;
  out << "\n  precision: " << spec.precision_in_effect().text() << "; correct within the larger of the tolerance and "
      << kReferenceErrorFactor << "x the reference's own error against float64\n";
  if (!result.ceilings_moved.empty()) {
    out << "  noisy machine: the device's ceilings moved since the previous measurement (" << result.ceilings_moved
        << "); confirmations took twice their rounds\n";
  }
  if (result.state.tokens > 0) {
    out << "  model calls: " << result.state.tokens << " tokens";
    if (result.state.cost_usd > 0) out << ", $" << dollars(result.state.cost_usd);
    out << "\n";
  }
  if (!result.best || result.seed < 0) {
    if (result.seed >= 0) out << "  the seed failed: " << graph.node(result.seed).evaluation.message << "\n";
    return out.str();
  }
  const Node& seed = graph.node(result.seed);
  const Node& best = graph.node(*result.best);
  const bool has_confirmation =
      result.confirmation && result.confirmation->node == best.id && result.confirmation->rounds > 0;
  char line[256];
  std::snprintf(line, sizeof line, "  %-28s %12s %12s %9s %10s %10s %9s\n", "workload", "seed us", "best us", "speedup",
                "GB/s", "GFLOP/s", "roofline");
  out << line;
  // A rate the spec's cost or the device's peak cannot give is "-", never a 0 read as a measurement.
  const bool bytes_known = spec.cost_bytes.has_value();
  const bool flops_known = spec.cost_flops.has_value();
  const bool roofline_known =
      (bytes_known && device.peak_bytes_per_s > 0) || (flops_known && device.peak_flops_per_s > 0);
  auto cell = [](double x, const char* format, bool known) {
    if (!known || !std::isfinite(x)) return std::string("-");
    char text[32];
    std::snprintf(text, sizeof text, format, x);
    return std::string(text);
  };
  for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
    std::string name;
    for (const auto& [k, v] : spec.workloads[w]) name += (name.empty() ? "" : " ") + k + "=" + std::to_string(v);
    // The confirmation's times where there is one: the seed and the best timed side by side.
    const bool confirmed_times = has_confirmation && w < result.confirmation->best_time_us.size();
    const double s = confirmed_times ? result.confirmation->seed_time_us[w] : seed.evaluation.timings[w].median_us;
    const double b = confirmed_times ? result.confirmation->best_time_us[w] : best.evaluation.timings[w].median_us;
    const Bindings& tun = best.candidate.tunables;
    std::snprintf(
        line, sizeof line, "  %-28s %12s %12s %9s %10s %10s %9s\n", name.c_str(), cell(s, "%.1f", true).c_str(),
        cell(b, "%.1f", true).c_str(), cell(s / b, "%.2fx", true).c_str(),
        cell(achieved_bytes_per_s(spec, spec.workloads[w], tun, b) / 1e9, "%.2f", bytes_known).c_str(),
        cell(achieved_flops_per_s(spec, spec.workloads[w], tun, b) / 1e9, "%.2f", flops_known).c_str(),
        cell(100 * roofline_share(spec, spec.workloads[w], tun, b, device), "%.1f%%", roofline_known).c_str());
    out << line;
  }
  // The "-" of a column in words, as the diagnosis says them: a figure without its cost or peak is unknown, not 0.
  std::string unknown;
  if (!bytes_known) unknown += "; GB/s: the spec has no cost.bytes";
  if (!flops_known) unknown += "; GFLOP/s: the spec has no cost.flops";
  if (!roofline_known) unknown += "; roofline: no peak of this device for the spec's costs";
  if (!unknown.empty()) out << "  - is unknown: " << unknown.substr(2) << "\n";
  const double reported = has_confirmation ? result.confirmation->speedup : best.speedup;
  out << "  best: node " << best.id << ", " << ratio_text(reported) << " over the seed (geometric mean), tunables";
  for (const auto& [k, v] : best.candidate.tunables) out << " " << k << "=" << v;
  out << "\n  lineage:";
  for (NodeId id : graph.lineage(best.id)) out << " " << id;
  out << "\n";
  for (const Confirmation& c : result.unconfirmed) {
    out << "  node " << c.node << " not confirmed: " << c.note << "\n";
  }
  if (has_confirmation) out << "  " << confirmation_text(*result.confirmation) << "\n";
  else if (best.id != seed.id) {
    out << "  not confirmed (confirmation was off)\n";
  }
  for (const Baseline& b : result.baselines) {
    const std::string label = b.name == "compile" ? "torch.compile" : "PyTorch " + b.name;
    if (b.evaluation.status != Status::ok) {
      out << "  " << label << ": no time (" << to_string(b.evaluation.status) << ": " << b.evaluation.message << ")\n";
      continue;
    }
    out << "  " << label << ":";
    for (const WorkloadTiming& t : b.evaluation.timings) {
      std::snprintf(line, sizeof line, " %.1f us", t.median_us);
      out << line;
    }
    if (has_host_time(b.evaluation)) {  // GPU time with the host ahead; the Python call's own cost apart
      out << " (GPU time; the host's call:";
      for (std::size_t w = 0; w < b.evaluation.timings.size(); ++w) {
        std::snprintf(line, sizeof line, " %.1f us", host_us(b.evaluation, w));
        out << line;
      }
      out << ")";
    }
    const double over = speedup_over(b.evaluation, best);
    if (std::isfinite(over)) {
      out << "; the best is " << ratio_text(over) << " faster (geometric mean)\n";
    } else {
      out << "; no ratio to the best (not timed on the same workloads)\n";
    }
  }
  if (const BestBaseline mark = best_baseline(result.baselines, best.evaluation.timings.size()); !mark.empty()) {
    out << "  the mark to beat, the faster of eager and torch.compile per workload:";
    for (std::size_t w = 0; w < mark.time_us.size(); ++w) {
      std::snprintf(line, sizeof line, " %.1f us (%s)", mark.time_us[w], mark.name[w].c_str());
      out << line;
    }
    out << "; the best is " << ratio_text(speedup_over_best_baseline(result.baselines, best.evaluation))
        << " faster (geometric mean)\n";
  }
  const std::vector<NodeId> fastest = fastest_per_workload(spec, graph, best);
  for (std::size_t w = 0; w < fastest.size(); ++w) {
    if (fastest[w] == best.id) continue;
    const Node& n = graph.node(fastest[w]);
    std::snprintf(
        line, sizeof line, "  workload %zu alone: node %lld is faster there, %.1f us (best: %.1f us), tunables", w,
        static_cast<long long>(n.id), n.evaluation.timings[w].median_us, best.evaluation.timings[w].median_us);
    out << line;
    for (const auto& [k, v] : n.candidate.tunables) out << " " << k << "=" << v;
    out << "\n";
  }
  return out.str();
}

}  // namespace kernelevolve
