// The figures of nodes and marks as a model's prompt gives them; see prompt_facts.hpp.
#include "mutators/prompt_facts.hpp"

#include <cmath>
#include <iomanip>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "core/tunables.hpp"
#include "kernelevolve/counters.hpp"
#include "kernelevolve/program.hpp"
#include "kernelevolve/report.hpp"
#include "mutators/answer.hpp"

namespace kernelevolve::mutators {

std::string bindings_text(const Bindings& b) {
  std::string out;
  for (const auto& [k, v] : b) out += (out.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return out.empty() ? "(none)" : out;
}

// A workload's median with its spread (the median absolute deviation of its launches): a model tells a
// change from noise by it.
std::string time_text(const WorkloadTiming& t) {
  std::ostringstream out;
  out << t.median_us << " ±" << std::setprecision(2) << t.mad_us << " us";
  return out.str();
}

std::string times_text(const Node& n) {
  std::ostringstream out;
  const auto& t = n.evaluation.timings;
  for (std::size_t i = 0; i < t.size(); ++i) {
    out << (i ? ", " : "") << "w" << i << " " << time_text(t[i]);
    // The bound alone where a node is one of many (lineage, siblings); the parent and the best get it all.
    if (n.diagnosis && i < n.diagnosis->workloads.size() && n.diagnosis->workloads[i].bound != Bound::unknown) {
      out << " (" << to_string(n.diagnosis->workloads[i].bound) << ")";
    }
  }
  return t.empty() ? "-" : out.str();
}

// A node's diagnosis, a line per workload, one for the GPU's resources and one for its hardware counters
// where they were read, under a legend (the first time)
// that says how the figures are made; empty for a node without one.
std::string diagnosis_lines(const Node& n, bool legend) {
  if (!n.diagnosis) return "";
  const Diagnosis& d = *n.diagnosis;
  std::ostringstream out;
  out << "Diagnosis";
  if (legend) {
    out << " (rates are the spec's cost over the median time; shares are of the device's measured copy bandwidth "
           "and FMA peak (bf16 and fp16 work: its tensor-core peak, as each line names it), and over 100% of the copy "
           "peak means caches serve the data; memory- or compute-bound by the "
           "larger share, latency/overhead-bound when both are under "
        << std::lround(kLatencyBoundShare * 100) << "%; with one share alone, its bound only from "
        << std::lround(kSoleCeilingShare * 100) << "% of it on)";
  }
  out << (d.note.empty() ? "" : " (" + d.note + ")") << ":\n";
  for (std::size_t w = 0; w < d.workloads.size(); ++w)
    out << "- w" << w << " " << workload_diagnosis_text(d.workloads[w]) << "\n";
  if (d.gpu) out << "- " << gpu_diagnosis_text(*d.gpu) << "\n";
  // A program's kernels, each with its own (its share of the time is the line under the diagnosis).
  // Counters, where collected, come per kernel step for a program (the top-level ones repeat its longest).
  bool step_counters = false;
  for (std::size_t s = 0; s < d.steps.size(); ++s) {
    const std::string c = counters_text(d.steps[s].counters);
    step_counters = step_counters || !c.empty();
    if (d.steps[s].gpu || !c.empty()) {
      out << "- step " << s + 1 << " (" << d.steps[s].name
          << "): " << (d.steps[s].gpu ? gpu_diagnosis_text(*d.steps[s].gpu) : "")
          << (d.steps[s].gpu && !c.empty() ? "; " : "")
          << (c.empty() ? "" : "hardware " + c + " (Nsight Compute, its first launch in w0)") << "\n";
    }
  }
  if (const std::string c = counters_text(d.counters); !c.empty() && !step_counters) {
    out << "- hardware " << c << " (Nsight Compute, one launch of w0)\n";
  }
  return out.str();
}

// A baseline as a person names it.
std::string mark_name(const Baseline& b) {
  return b.name == "eager" ? "PyTorch eager" : b.name == "compile" ? "torch.compile" : b.name;
}

// The marks to beat that the run measured: their times per workload, with their spreads, or why not.
// With the run's precision, which the marks ran under and a kernel is judged by (issue 50), and the mark itself: the
// faster of the marks on each workload.
std::string marks_section(const Spec& spec, const std::vector<Baseline>& marks) {
  if (marks.empty()) return "";
  std::ostringstream out;
  out << "\n## The marks to beat (measured in this run, as the kernels are)\n"
      << "- precision: " << spec.precision_in_effect().text()
      << "; a kernel is right within the larger of the tolerance and " << kReferenceErrorFactor
      << "x the reference's own error against float64\n";
  if (const BestBaseline mark = best_baseline(marks, spec.workloads.size()); !mark.empty()) {
    out << "- the mark to beat, the faster of them on each workload:";
    for (std::size_t w = 0; w < mark.time_us.size(); ++w)
      out << (w ? "," : "") << " w" << w << " " << std::setprecision(4) << mark.time_us[w] << std::setprecision(6)
          << " us (" << mark.name[w] << ")";
    out << "\n";
  }
  for (const Baseline& b : marks) {
    out << "- " << mark_name(b) << ": ";
    if (b.evaluation.status != Status::ok) {
      out << "no time (" << to_string(b.evaluation.status)
          << (b.evaluation.message.empty() ? "" : ": " + b.evaluation.message.substr(0, 200)) << ")\n";
      continue;
    }
    const auto& t = b.evaluation.timings;
    for (std::size_t i = 0; i < t.size(); ++i) out << (i ? ", " : "") << "w" << i << " " << time_text(t[i]);
    out << "\n";
  }
  // torch 1.x (Debian's 1.13) runs a CPU's matrix products on a generic BLAS: its eager time says little of what
  // the CPU can do (docs/pytorch.md: "no yardstick"). Its version shows where torch.compile is missing for it.
  if (is_cpu_language(spec.language)) {
    static const std::regex torch1(R"(torch (1\.[0-9]+)[^ ]* has no torch\.compile)");
    for (const Baseline& b : marks) {
      std::smatch version;
      if (!std::regex_search(b.evaluation.message, version, torch1)) continue;
      out << "- note: this PyTorch is torch " << version[1]
          << ", whose CPU matrix products run on a generic BLAS (as Debian packages it), not a tuned one: its eager "
             "time is no yardstick of what this CPU can do; judge a kernel by the FMA peak and copy rate above\n";
      break;
    }
  }
  return out.str();
}

std::string outcome(const Node& n, const std::vector<Baseline>& marks) {
  std::ostringstream out;
  out << to_string(n.evaluation.status);
  if (n.evaluation.status == Status::ok) {
    out << ", " << n.speedup << "x over the seed";
    // Beside the seed, what a user wants beaten: speedups over the baselines, on the same workloads.
    for (const Baseline& b : marks) {
      if (const double x = speedup(b.evaluation, n.evaluation); x > 0) {
        out << ", " << std::setprecision(3) << x << std::setprecision(6) << "x over " << mark_name(b);
      }
    }
    if (const double x = speedup_over_best_baseline(marks, n.evaluation); std::isfinite(x))
      out << ", " << std::setprecision(3) << x << std::setprecision(6) << "x over the mark to beat";
    out << ", median times " << times_text(n);
  }
  if (!n.evaluation.message.empty()) out << ": " << n.evaluation.message;
  return out.str();
}

// What the search made of a node after it: its descendants (the parameter steps on a rewrite, and theirs),
// and the fastest of them with its tunables, so that a model sees what its declared tunables were tuned to
// even when its rewrite is not the next parent (two agents playing the model missed exactly this). Empty
// for a node with none.
std::string descendants_text(const SearchGraph& g, const Node& n, const std::vector<Baseline>& baselines) {
  const Node* best = nullptr;
  std::vector<NodeId> todo = g.children(n.id);
  std::set<NodeId> seen;  // in id order: the order the search made them
  while (!todo.empty()) {
    const NodeId id = todo.back();
    todo.pop_back();
    if (!seen.insert(id).second) continue;
    const Node& d = g.node(id);
    if (d.evaluation.status == Status::ok && (!best || d.speedup > best->speedup)) best = &d;
    for (NodeId c : g.children(id)) todo.push_back(c);
  }
  if (seen.empty()) return "";
  std::ostringstream out;
  out << "  after it, " << seen.size() << " node" << (seen.size() == 1 ? "" : "s") << " of the search";
  if (!best) return out.str() + ", none ok\n";
  out << "; the fastest, node " << best->id << " (" << best->mutator << "), with "
      << bindings_text(best->candidate.tunables) << ": " << outcome(*best, baselines)
      << (n.evaluation.status == Status::ok && !beats(*best, n)
              ? " (within the noise of node " + std::to_string(n.id) + ")"
              : "")
      << "\n";
  // The others in a line, by what they changed from the node: a model that sees only the winner cannot tell
  // a value that lost by 2% from one that lost by half (an agent playing the model asked for exactly this).
  std::ostringstream others;
  others << std::setprecision(3);
  std::size_t listed = 0;
  for (NodeId id : seen) {
    if (id == best->id) continue;
    if (listed == 8) {
      others << ", ...";
      break;
    }
    const Node& d = g.node(id);
    std::string changed;
    for (const auto& [k, v] : d.candidate.tunables) {
      const auto it = n.candidate.tunables.find(k);
      if (it == n.candidate.tunables.end() || it->second != v)
        changed += (changed.empty() ? "" : " ") + k + "=" + std::to_string(v);
    }
    others << (listed++ ? ", " : "") << "node " << id << " (" << (changed.empty() ? d.mutator : changed) << ") ";
    if (d.evaluation.status == Status::ok) {
      others << d.speedup << "x";
    } else {
      others << to_string(d.evaluation.status);
    }
  }
  if (listed > 0) out << "  the others: " << others.str() << "\n";
  return out.str();
}

// Whether a node's figures were borne out when it was measured again against the seed (the parent a
// model builds on, the best it is shown), or are one evaluation's.
const Confirmation* confirmation_of(const MutationContext& ctx, const Node& n) {
  if (n.id == 0 || n.evaluation.status != Status::ok) return nullptr;  // the seed is what speedups are taken against
  return ctx.confirm ? ctx.confirm(n.id) : nullptr;
}

std::string confirmation_text(const Node& n, const Confirmation* c) {
  if (n.id == 0 || n.evaluation.status != Status::ok) return "";
  std::ostringstream out;
  out << std::setprecision(3);
  if (!c) {
    out << "Single measurement: its figures are one evaluation's, not measured again.\n";
  } else if (c->failed_again) {
    out << "Measured again against the seed, it was not ok: " << c->note << ". Do not build on its figures.\n";
  } else if (c->rounds == 0) {
    out << "Single measurement: measuring it again failed (" << c->note << ").\n";
  } else {
    out << (c->confirmed ? "Confirmed" : "Not confirmed") << ": measured again against the seed, interleaved, "
        << c->rounds << " rounds on fresh inputs: " << c->speedup << "x (rounds " << c->speedup_low << "x to "
        << c->speedup_high << "x)";
    if (c->confirmed) {
      out << ", bearing out the search's " << c->search_speedup << "x.\n";
    } else {
      out << "; the search's " << c->search_speedup << "x was an outlier: take " << c->speedup
          << "x as its speed when judging its children.\n";
    }
  }
  return out.str();
}

// What went wrong with a failed child, in the detail a model can act on.
std::string failure_detail(const Node& n) {
  std::ostringstream out;
  out << "- node " << n.id << " (" << n.mutator << (n.note.empty() ? "" : ": " + n.note) << "): " << outcome(n) << "\n";
  if (n.evaluation.status == Status::compile_error && !n.evaluation.compile_log.empty()) {
    out << "  compiler log:\n```\n" << tail(n.evaluation.compile_log, 2000) << "\n```\n";
  }
  if (n.evaluation.status == Status::incorrect && n.evaluation.worst) {
    const Mismatch& m = *n.evaluation.worst;
    out << "  worst mismatch: " << m.buffer << "[" << m.index << "] = " << m.got << ", expected " << m.expected
        << " (workload " << m.workload << ")\n";
  }
  return out.str();
}

// Each step's share of a program's time in one line, each step named by its kernel or library: from the
// node's diagnosis where it has one, else as diagnose would name them (program_steps). Empty for a one-kernel
// node.
std::string steps_text(const Spec& spec, const Node& n) {
  const std::vector<StepDiagnosis> steps =
      n.diagnosis && !n.diagnosis->steps.empty() ? n.diagnosis->steps : program_steps(spec, n.evaluation, &n.candidate);
  if (steps.size() < 2) return "";
  std::ostringstream out;
  out << "Time by step (each step timed alone, its share of the plan's):" << std::setprecision(3);
  for (std::size_t s = 0; s < steps.size(); ++s) {
    out << (s ? "," : "") << " step " << s + 1;
    // diagnose names a step it cannot read "step N": said once is enough.
    if (!steps[s].name.empty() && steps[s].name != "step " + std::to_string(s + 1)) {
      out << " (" << steps[s].name << (steps[s].library ? ", library" : "") << ")";
    }
    if (steps[s].share) out << ": " << *steps[s].share * 100 << "%";
  }
  return out.str() + "\n";
}

Bindings shown_tunables(const Spec& spec, const Candidate& c) {
  return live_tunables(spec, c.source, c.language, c.tunables);
}

std::string between_evaluations_text(const MutationContext& ctx, const Node& parent, const Confirmation* c) {
  const SearchGraph& g = ctx.graph;
  std::ostringstream out;
  out << std::setprecision(4);
  auto percent = [](double now, double before) {
    std::ostringstream p;
    p << std::showpos << std::lround((now / before - 1) * 100) << "%";
    return p.str();
  };
  std::string lines;
  // The parent's confirmation measured the parent and the seed again, interleaved.
  if (c && c->rounds > 0 && !c->failed_again) {
    auto again = [&](const Node& n, const std::vector<double>& times, const std::string& who) {
      std::ostringstream line;
      line << std::setprecision(4);
      const auto& t = n.evaluation.timings;
      std::size_t shown = 0;
      for (std::size_t w = 0; w < t.size() && w < times.size(); ++w) {
        if (!(times[w] > 0) || !(t[w].median_us > 0)) continue;
        line << (shown++ ? ", " : "") << "w" << w << " " << time_text(t[w]) << " in its evaluation, " << times[w]
             << " us again (" << percent(times[w], t[w].median_us) << ")";
      }
      if (shown) lines += "- " + who + ": " + line.str() + "\n";
    };
    again(g.node(0), c->seed_time_us, "the seed (node 0)");
    again(parent, c->best_time_us, "the parent (node " + std::to_string(parent.id) + ")");
  }
  // Nodes that run the same kernel: the same code with the same live tunables (a dead one changes nothing).
  std::map<std::string, std::vector<const Node*>> same;
  for (const Node& n : g.nodes()) {
    if (n.evaluation.status != Status::ok || n.evaluation.timings.empty()) continue;
    same[Candidate{n.candidate.source, n.candidate.language, shown_tunables(ctx.spec, n.candidate)}.code_key()]
        .push_back(&n);
  }
  std::size_t groups = 0;
  for (const auto& [key, nodes] : same) {
    if (nodes.size() < 2 || groups == 3) continue;
    ++groups;
    std::ostringstream line;
    line << std::setprecision(4) << "- the same kernel in nodes";
    for (const Node* n : nodes) line << " " << n->id;
    line << ": w0";
    for (const Node* n : nodes) line << " " << n->evaluation.timings[0].median_us;
    line << " us\n";
    lines += line.str();
  }
  if (lines.empty()) return "";
  out << "Between evaluations (the same code measured again moves by more than the spread within one evaluation):\n"
      << lines;
  return out.str();
}

}  // namespace kernelevolve::mutators
