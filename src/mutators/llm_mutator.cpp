// The model mutator: builds the prompt (device, spec, parent and its measurements, recent failures,
// best node, retrieved knowledge), calls an OpenAI-compatible or Anthropic endpoint with retries,
// and turns the answer into a child.
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <iomanip>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "core/tunables.hpp"
#include "devices/gpu/common.hpp"
#include "eval/buffers.hpp"
#include "kernelevolve/counters.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/json.hpp"
#include "kernelevolve/mutator.hpp"
#include "kernelevolve/program.hpp"
#include "kernelevolve/report.hpp"
#include "mutators/answer.hpp"
#include "mutators/device_facts.hpp"
#include "mutators/http_client.hpp"
#include "mutators/knowledge.hpp"

namespace kernelevolve {

namespace {

using mutators::tail;

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
  return out.str();
}

std::string outcome(const Node& n, const std::vector<Baseline>& marks = {}) {
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
std::string confirmation_text(const MutationContext& ctx, const Node& n) {
  if (n.id == 0 || n.evaluation.status != Status::ok) return "";  // the seed is what speedups are taken against
  const Confirmation* c = ctx.confirm ? ctx.confirm(n.id) : nullptr;
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

// Which library steps this run lets take "math": "tf32" (plan.cpp refuses the others: tf32_refusal), in a sentence.
std::string tf32_text(const Precision& precision) {
  const bool cudnn = tf32_refusal(precision, "cudnn.conv2d").empty();
  const bool matmul = tf32_refusal(precision, "cublas.gemm").empty();
  const std::string run = "The run's precision is " + precision.text() + ": ";
  if (cudnn && matmul)
    return run + "\"math\": \"tf32\" is allowed on f32 cuDNN, cuBLAS and cuBLASLt steps, the math the reference uses.";
  if (cudnn)
    return run +
           "\"math\": \"tf32\" is allowed on f32 cuDNN steps (the reference's convolutions use TF32), not on "
           "cuBLAS or cuBLASLt steps (its matrix products run in fp32).";
  if (matmul) return run + "\"math\": \"tf32\" is allowed on f32 cuBLAS and cuBLASLt steps, not on cuDNN steps.";
  return run + "no step may take \"math\": \"tf32\"; every library step computes in fp32.";
}

// How a candidate brings its own launch plan (docs/spec-format.md, "Programs"), in its language's terms:
// a CUDA or HIP source's comment with two kernels and a temporary, a Triton module's string, a C program's
// temporaries and calls; the library steps for CUDA and Triton, where a CUDA device runs them, unless the spec
// forbids them.
std::string plan_text(const Spec& spec) {
  const Language language = spec.language;
  const bool triton = language == Language::triton, cpu = is_cpu_language(language);
  std::string out =
      std::string(
          "Programs: a source may declare its own plan instead of the default one (the entry alone with the "
          "spec's params): ") +
      (cpu ? "functions called in order, each with its args, and temporaries (workspaces allocated for it, NaN-filled "
             "before every call), so the program need not allocate. "
           : "several kernels run in order on one stream, each with its own grid and args, and temporaries "
             "(workspaces allocated for it, NaN-filled before every call) between them. ") +
      "The time is the whole plan's. An arg is a param's name (its buffer or value), a temporary's name (a writable "
      "pointer of its dtype) or an integer expression over sizes and tunables (a 64-bit integer). ";
  // Library steps run on a CUDA GPU whatever language its kernels are in (Inductor's Triton programs call cuBLAS).
  const std::string library = (language == Language::cuda || triton) && spec.library_steps
                                  ? "A step may call a library instead: " + library_calls_text() + ". " +
                                        tf32_text(spec.precision_in_effect()) + "\n"
                                  : "";
  if (triton) {
    return out +
           "Each step's grid is its own, each program 32 x num_warps threads; a step may give its kernel its own "
           "\"num_warps\" and \"num_stages\" (a tunable's name or a number; else the tunables num_warps and "
           "num_stages). A kernel's parameters are its step's args in order, plus each tunable it uses as `NAME: "
           "tl.constexpr`. In a module-level string:\n"
           "\"\"\"kernelevolve-plan\n"
           "{\"temporaries\": [{\"name\": \"partial\", \"dtype\": \"f32\", \"shape\": [\"cdiv(N, BLOCK)\"]}],\n"
           " \"steps\": [{\"kernel\": \"partial_sums\", \"grid\": [\"cdiv(N, BLOCK)\"], \"args\": [\"x\", \"partial\", \"N\"]},\n"
           "           {\"kernel\": \"finish\", \"grid\": [1], \"args\": [\"partial\", \"y\", \"cdiv(N, BLOCK)\"]}]}\n"
           "\"\"\"\n"
           "with `@triton.jit def partial_sums(x, partial, N, BLOCK: tl.constexpr)` and `@triton.jit def finish(partial, "
           "y, chunks, BLOCK: tl.constexpr)`.\n" +
           library;
  }
  if (cpu) {
    return out +
           "In a comment:\n/* kernelevolve-plan\n"
           "{\"temporaries\": [{\"name\": \"partial\", \"dtype\": \"f64\", \"shape\": [\"cdiv(n, CHUNK)\"]}],\n"
           " \"steps\": [{\"kernel\": \"partial_sums\", \"args\": [\"x\", \"partial\", \"n\", \"CHUNK\"]},\n"
           "           {\"kernel\": \"finish\", \"args\": [\"x\", \"partial\", \"y\", \"n\", \"cdiv(n, CHUNK)\"]}]}\n*/\n"
           "with `void partial_sums(const float* x, double* partial, int64_t n, int64_t chunk)` and `void finish(const "
           "float* x, double* partial, float* y, int64_t n, int64_t chunks)`.\n";
  }
  out +=
      "Each kernel is extern \"C\" __global__; a step without grid, block or shared_bytes takes the default's. In a "
      "comment:\n/* kernelevolve-plan\n"
      "{\"temporaries\": [{\"name\": \"partial\", \"dtype\": \"f32\", \"shape\": [\"cdiv(N, 256)\"]}],\n"
      " \"steps\": [{\"kernel\": \"partial_sums\", \"grid\": [\"cdiv(N, 256)\"], \"block\": [256], \"args\": [\"x\", \"partial\", \"N\"]},\n"
      "           {\"kernel\": \"finish\", \"grid\": [1], \"block\": [1024], \"args\": [\"partial\", \"y\", \"cdiv(N, 256)\"]}]}\n*/\n"
      "with `partial_sums(const float* x, float* partial, int64_t n)` and `finish(float* partial, float* y, int64_t "
      "blocks)`.\n";
  return out + library;
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

// Where a CPU kernel's inputs are when it is called, so that a model knows whether to optimize for memory
// or for cache. Each timed call's inputs are written just before it (eval/workload_run.cpp, time()): an input
// over eval::kDrawnAfreshBytes is copied, rotated, from a base copy of the same size, which is read as it is
// written (two copies touched: the base and the kernel's); a smaller one (of a spec that is not a PyTorch
// problem) is drawn afresh into the kernel's buffer (one copy). The copies' total is held against the data
// caches the device description lists.
std::string inputs_in_cache(const Spec& spec, const std::string& device_description) {
  constexpr double kInputsDrawnAfreshBytes = eval::kDrawnAfreshBytes;
  const std::vector<mutators::CacheSize> caches = mutators::description_caches(device_description);
  std::ostringstream out;
  out << "Inputs: each timed call's inputs are a rotated copy written just before the call, copied from a base "
         "copy of the same size (an input of "
      << gpu::format_bytes(kInputsDrawnAfreshBytes) << " or less is drawn afresh instead), so the last copies "
      << "are warm in cache as far as they fit:";
  for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
    double bytes = 0, copied = 0;
    int copies = 1;
    for (const Param& p : spec.params) {
      if (p.role != Role::in && p.role != Role::inout) continue;
      const double count = static_cast<double>(spec.element_count(p, spec.workloads[w]));
      const double b = count * static_cast<double>(dtype_size(p.dtype));
      const bool drawn = !spec.reference.pytorch && (b <= kInputsDrawnAfreshBytes || count < 2);
      bytes += b;
      copied += drawn ? b : 2 * b;
      if (!drawn) copies = 2;
    }
    out << (w ? ";" : "") << " w" << w << " " << copies << (copies == 1 ? " copy of " : " copies of ")
        << gpu::format_bytes(bytes) << ", " << gpu::format_bytes(copied) << " in all";
    if (caches.empty()) continue;
    const auto fits =
        std::find_if(caches.begin(), caches.end(), [&](const mutators::CacheSize& c) { return copied <= c.bytes; });
    auto name_size = [](const mutators::CacheSize& c) { return c.name + " (" + gpu::format_bytes(c.bytes) + ")"; };
    if (fits == caches.begin()) {
      out << ": within " << name_size(*fits) << ": expect them warm in " << fits->name;
    } else if (fits == caches.end()) {
      out << ": larger than " << name_size(caches.back()) << ": expect them cold, from memory";
    } else {
      std::string closer;
      for (auto c = caches.begin(); c != fits; ++c) closer += (closer.empty() ? "" : "/") + c->name;
      out << ": larger than " << name_size(*(fits - 1)) << ", within " << name_size(*fits) << ": expect them warm in "
          << fits->name << ", not in " << closer;
    }
  }
  out << (caches.empty() ? " (compare with the caches above)." : ".");
  return out.str();
}

}  // namespace

struct LlmMutator::Impl {
  LlmOptions options;
  std::unique_ptr<mutators::KnowledgeBase> knowledge;
  std::mutex mutex;
  std::condition_variable slot_free;
  int in_flight = 0;
  std::int64_t tokens = 0;
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
  double cost_usd = 0;
  std::mt19937_64 jitter{std::random_device{}()};

  std::string system_prompt(const Spec& spec, bool first) const {
    const bool triton = spec.language == Language::triton;
    const std::string lang = triton ? "triton" : to_string(spec.language);
    std::string rules =
        "Rules: keep the entry point's name and signature unless the source declares a plan, whose kernels then "
        "take the arguments the plan gives them; write every output element; never read or "
        "write outside the buffers; do not special-case particular inputs, pointers or repeated calls; "
        "start no threads, do no I/O, never exit; do all the work inside the call.\n";
    std::string tunables =
        "You may declare tunables the parameter search will explore, one per line: "
        "`// ke:tunable NAME v1 v2 v3`, used as a macro guarded by #ifndef NAME. " +
        std::string(mutators::kTunableRule);
    if (triton) {
      // Triton's own terms: a Python module, constexpr tunables, the launch is not the kernel's to write.
      rules +=
          "A Triton kernel is a Python module with one @triton.jit entry (helpers may be @triton.jit too): "
          "import triton and triton.language as tl, nothing else, and no launch code (the grid is the "
          "spec's or the plan's, each program runs 32 x num_warps threads). Its parameters are the spec's params in "
          "order, then each tunable it uses as `NAME: tl.constexpr`. Mask every load and store at the edges.\n";
      tunables =
          "You may declare tunables the parameter search will explore, one per line: "
          "`# ke:tunable NAME v1 v2 v3`, each a `NAME: tl.constexpr` parameter of the entry. num_warps and "
          "num_stages are tunables too, Triton's compile options, never parameters. " +
          std::string(mutators::kTunableRule);
    }
    rules += plan_text(spec);
    if (first) {
      return "You are an expert performance engineer. You write " + lang +
             " kernels for the device described that compute exactly what a reference computes (within the "
             "stated tolerance) for every valid input, and run fast.\n" +
             rules + "Answer with the complete source in one ```" + lang +
             " fenced block: it defines the entry point "
             "with exactly the signature given (or its plan and the kernels it names), and includes the headers it "
             "needs.\n" +
             tunables + " Say in one sentence before the code how the kernel works.";
    }
    return "You are an expert performance engineer. You rewrite " + lang +
           " kernels to run faster on the device described, while computing exactly what the reference "
           "computes (within the stated tolerance) for every valid input.\n" +
           rules + "Answer with the complete new source in one ```" + lang +
           " fenced block, or with SEARCH/REPLACE edits on the parent:\n"
           "<<<<<<< SEARCH\n(exact lines of the parent)\n=======\n(replacement)\n>>>>>>> REPLACE\n" +
           tunables + " Say in one sentence before the code what you changed and why.";
  }

  // The problem as any prompt states it: signature, workloads, tolerance, launch, tunables, notes.
  static void problem_section(std::ostringstream& out, const Spec& spec, const std::string& device_description) {
    out << "## Problem: " << spec.name << "\nSignature: `" << kernel_signature(spec) << "`\n";
    out << "Workloads:";
    for (std::size_t i = 0; i < spec.workloads.size(); ++i)
      out << " w" << i << " {" << bindings_text(spec.workloads[i]) << "}";
    // How the figures below are made, so that a model reads them right.
    out << "\nTiming: the median of many launches per workload, each on inputs no earlier launch saw (rotated "
        << (is_cpu_language(spec.language) ? "among copies; caches are not flushed"
                                           : "among copies, the L2 flushed before each")
        << "), \"±\" its spread (the median absolute deviation of the launches); \"Nx over the seed\" is the "
           "geometric mean over the workloads of the seed's time over the kernel's, and likewise over a baseline. "
           "Each node's figures are one evaluation's: a difference within a few spreads may be noise.";
    if (is_cpu_language(spec.language)) out << "\n" << inputs_in_cache(spec, device_description);
    out << "\nTolerance: |out - ref| <= " << spec.tolerance.atol << " + " << spec.tolerance.rtol << " * |ref|\n";
    const bool triton = spec.language == Language::triton;
    // The spec's launch is the default plan: a candidate may declare its own (the system prompt says how).
    if (spec.launch && triton) {
      out << "Launch (the default plan; a source may declare its own): grid (" << spec.launch->grid[0].text() << ", "
          << spec.launch->grid[1].text() << ", " << spec.launch->grid[2].text()
          << ") programs (tl.program_id(0..2)), each of 32 x num_warps threads\n";
    } else if (spec.launch) {
      out << "Launch (the default plan; a source may declare its own): grid (" << spec.launch->grid[0].text() << ", "
          << spec.launch->grid[1].text() << ", " << spec.launch->grid[2].text() << "), block ("
          << spec.launch->block[0].text() << ", " << spec.launch->block[1].text() << ", "
          << spec.launch->block[2].text() << "), shared bytes " << spec.launch->shared_bytes.text() << "\n";
    }
    if (!spec.tunables.empty()) {
      // The spec's, which the seed reads: a kernel that drops one no longer has it (its own are listed with
      // it, as "Tunables:"), and a model shown the spec's list alone took them for the parent's.
      out << (triton
                  ? "The spec's tunables (tl.constexpr parameters of the seed; num_warps and num_stages are Triton's "
                    "options; each kernel's own are listed with it):"
                  : "The spec's tunables (macros the seed reads; each kernel's own are listed with it):");
      for (const auto& [name, values] : spec.tunables) {
        out << " " << name << " in {";
        for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
        out << "}";
      }
      out << "\n";
    }
    if (!spec.constraints.empty()) {
      out << "Constraints:";
      for (const auto& c : spec.constraints) out << " " << c.text() << ";";
      out << "\n";
    }
    if (!spec.notes.empty()) out << "Notes: " << spec.notes << "\n";
  }

  // The run's warm start (nodes of mutator "warm": kernels of the same operator from other problems' runs) as
  // examples, with where they came from and how they fared here: the two best, each cut to a budget, leaving
  // out the parent and the best node, whose sources the prompt has already.
  static void warm_section(std::ostringstream& out, const SearchGraph& g, NodeId parent, std::optional<NodeId> best) {
    constexpr std::size_t kExamples = 2, kSourceChars = 3000;
    std::vector<const Node*> warm;
    for (const Node& n : g.nodes()) {
      if (n.mutator == "warm" && n.id != parent && n.id != best && n.evaluation.status != Status::pending)
        warm.push_back(&n);
    }
    if (warm.empty()) return;
    std::stable_sort(warm.begin(), warm.end(), [](const Node* a, const Node* b) { return a->speedup > b->speedup; });
    out << "\n## Kernels that worked for this operator elsewhere\n";
    for (std::size_t i = 0; i < warm.size() && i < kExamples; ++i) {
      const Node& n = *warm[i];
      std::string source = n.candidate.source;
      if (source.size() > kSourceChars) source = source.substr(0, kSourceChars) + "\n[... cut]";
      if (!source.ends_with("\n")) source += "\n";
      out << "### node " << n.id << ": " << n.note << "\nHere: " << outcome(n) << "; tunables "
          << bindings_text(n.candidate.tunables) << "\n```" << to_string(n.candidate.language) << "\n"
          << source << "```\n";
    }
  }

  // Passages that apply to the run's device and language only (a CPU kernel's prompt gets no warps), and
  // whose `requires:` the device meets (no AVX-512 advice for a CPU without it). The device's features are
  // read from its description, which is all these options carry of it; a description written otherwise
  // leaves them unknown, and then no passage is dropped for them.
  // A passage the lineage's prompts (`earlier`: the prompts that made the parent and its ancestors) gave
  // already is named, not repeated, so that the prompt leaves room for what is new.
  void knowledge_section(std::ostringstream& out, std::string query, const Spec& spec,
                         const std::vector<const Node*>& earlier = {}) const {
    if (!knowledge || options.knowledge_budget_chars == 0) return;
    mutators::Applies to;
    to.language = to_string(spec.language);
    to.device = device_kind(spec.language);
    to.features = mutators::note_features(options.device_description);
    const auto passages = knowledge->retrieve(query, options.knowledge_budget_chars, to);
    if (passages.empty()) return;
    out << "\n## Notes from the knowledge base\n";
    for (const auto& p : passages) {
      const std::string title = "### " + p.heading + " (" + p.file + ")";
      const auto given = std::find_if(earlier.begin(), earlier.end(),
                                      [&](const Node* n) { return n->prompt.find(title + "\n") != std::string::npos; });
      if (given != earlier.end()) {
        out << title << ": given in the prompt that wrote node " << (*given)->id << ", not repeated\n";
      } else {
        out << title << "\n" << p.text << "\n";
      }
    }
  }

  // The prompt for the first kernel of a problem without a seed: the reference to translate, each param of
  // the signature with its role and shape, and what earlier attempts wrote that failed.
  std::string first_kernel_prompt(const MutationContext& ctx) const {
    const Spec& spec = ctx.spec;
    std::ostringstream out;
    if (!options.device_description.empty()) out << "## Device\n" << options.device_description << "\n\n";
    problem_section(out, spec, options.device_description);
    out << marks_section(spec, ctx.baselines);
    out << "\n## Parameters, in order\n";
    for (const Param& p : spec.params) {
      if (spec.language == Language::triton) {
        out << "- `" << p.name << "` (" << triton_type(p) << "): " << to_string(p.role);
      } else {
        out << "- `" << argument_type(p) << " " << p.name << "`: " << to_string(p.role);
      }
      if (p.is_buffer()) {
        out << " buffer of " << to_string(p.dtype) << ", shape [";
        for (std::size_t d = 0; d < p.shape.size(); ++d) out << (d ? ", " : "") << p.shape[d];
        out << "], row-major, contiguous";
      }
      if (p.role == Role::size) out << " (bound by each workload)";
      if (p.role == Role::scalar) out << " = " << p.value;
      out << "\n";
    }
    const SourceRef& ref = spec.reference;
    const std::string ref_lang = ref.pytorch ? "python" : to_string(ref.language.value_or(spec.language));
    out << "\n## Reference"
        << (ref.pytorch ? " (a PyTorch module; weights reach the kernel as the `in` buffers "
                          "named after their state-dict keys, '.' as '_')"
                        : "")
        << (ref.file.empty() ? "" : ": " + ref.file) << "\n```" << ref_lang << "\n"
        << ref.source << (ref.source.ends_with("\n") ? "" : "\n") << "```\n";
    // A backward or a cast: the module alone would say its forward in its own dtypes.
    if (const std::string variant = pytorch_variant_text(ref); !variant.empty())
      out << "The problem is " << variant << ".\n";
    if (!ctx.failed_attempts.empty()) {
      out << "\n## Earlier attempts that failed\n";
      for (const Node& n : ctx.failed_attempts) {
        out << failure_detail(n) << "```" << to_string(n.candidate.language) << "\n"
            << n.candidate.source << (n.candidate.source.ends_with("\n") ? "" : "\n") << "```\n";
      }
    }
    std::string query =
        spec.name + " " + spec.notes + " " + to_string(spec.language) + " " + options.device_description;
    for (const Node& n : ctx.failed_attempts)
      query += std::string(" ") + to_string(n.evaluation.status) + " " + n.evaluation.message;
    knowledge_section(out, query, spec);
    out << "\n## Task\nWrite the first " << to_string(spec.language) << " kernel for this problem: a complete source "
        << "that defines `" << kernel_signature(spec) << "` (or declares a plan and defines its kernels) and computes "
        << "what the reference computes.\n";
    if (ref.pytorch && (spec.language == Language::cuda || spec.language == Language::triton) && spec.library_steps) {
      out << "For a matrix product or a convolution followed by an epilogue (bias, activation, scaling, a reduction), "
             "a plan of a library step (a cuBLAS product or a cuDNN convolution, into a temporary unless its own "
             "epilogue is all there is) and one fused kernel for the rest is often fastest.\n";
    }
    return out.str();
  }

  std::string user_prompt(const MutationContext& ctx) const {
    const Spec& spec = ctx.spec;
    const SearchGraph& g = ctx.graph;
    const Node& parent = g.node(ctx.parents.at(0));
    const std::string& memory = options.memory;
    std::ostringstream out;
    if (!options.device_description.empty()) out << "## Device\n" << options.device_description << "\n\n";
    problem_section(out, spec, options.device_description);
    // How noisy this machine is, from the seed's own launches (what a difference has to beat to mean anything)
    // and from ceilings that moved since the previous measurement on the device.
    const double noise = relative_spread(g.node(0).evaluation);
    const std::string moved = mutators::description_ceilings_moved(options.device_description);
    if (noise > kNoisyMachine || !moved.empty()) {
      out << "Noise: this machine is noisy: ";
      if (noise > kNoisyMachine) {
        out << "the seed's launches spread by " << std::lround(noise * 100)
            << "% of their median (median absolute deviation); a difference under about "
            << std::lround(2 * noise * 100) << "% is not one";
      }
      if (!moved.empty()) {
        out << (noise > kNoisyMachine ? "; " : "") << "its measured ceilings moved between runs (" << moved
            << "), so shares of peak are rough";
      }
      out << "; the run measures its confirmations twice as long.\n";
    }
    out << marks_section(spec, ctx.baselines);
    out << "\n## Parent kernel (node " << parent.id << "): " << outcome(parent, ctx.baselines) << "\n"
        << confirmation_text(ctx, parent) << diagnosis_lines(parent, true) << steps_text(spec, parent)
        << "Tunables: " << bindings_text(parent.candidate.tunables) << "\n```" << to_string(parent.candidate.language)
        << "\n"
        << parent.candidate.source << (parent.candidate.source.ends_with("\n") ? "" : "\n") << "```\n";
    // A lead inside the spreads of single measurements is not one a model should build a story on.
    if (!parent.parents.empty() && parent.evaluation.status == Status::ok) {
      const Node& grand = g.node(parent.parents.front());
      if (grand.evaluation.status == Status::ok && parent.speedup > grand.speedup && !beats(parent, grand)) {
        out << "Noise: the parent's lead over its own parent (node " << grand.id << ", " << grand.speedup
            << "x over the seed) is within the spread of single measurements; it may be no gain at all.\n";
      }
    }
    if (const auto best = g.best(); best && *best != parent.id && memory != "fresh") {
      out << "(The search picks parents to explore, not only the best: the best so far, node " << *best
          << (beats(g.node(*best), parent) ? ", is faster by more than the noise" : ", leads by less than the noise")
          << ", and is shown below.)\n";
    }

    if (memory == "inherit" || memory == "both") {
      const auto chain = g.lineage(parent.id);
      if (chain.size() > 1) {
        out << "\n## How the parent came to be (its lineage)\n";
        for (NodeId id : chain) {
          const Node& n = g.node(id);
          out << "- node " << id << " (" << n.mutator << (n.note.empty() ? "" : ": " + n.note)
              << "): " << outcome(n, ctx.baselines) << "\n";
        }
      }
    }
    if (memory == "siblings" || memory == "both") {
      const auto kids = g.children(parent.id);
      if (!kids.empty()) {
        out << "\n## What the parent's other children did\n";
        std::size_t shown = 0;
        for (auto it = kids.rbegin(); it != kids.rend() && shown < 8; ++it, ++shown) {
          const Node& n = g.node(*it);
          out << "- node " << n.id << " (" << n.mutator << (n.note.empty() ? "" : ": " + n.note)
              << "): " << outcome(n, ctx.baselines) << "\n"
              << descendants_text(g, n, ctx.baselines);
        }
      }
    }
    if (memory != "fresh") {
      // The latest failures among the parent's children, in full: the model must not repeat them.
      std::string failures;
      int shown = 0;
      const auto kids = g.children(parent.id);
      for (auto it = kids.rbegin(); it != kids.rend() && shown < 3; ++it) {
        const Node& n = g.node(*it);
        if (n.evaluation.status == Status::ok || n.evaluation.status == Status::pending) continue;
        failures += failure_detail(n);
        ++shown;
      }
      if (!failures.empty()) out << "\n## Recent failures to avoid\n" << failures;
      if (const auto best = g.best(); best && *best != parent.id) {
        const Node& b = g.node(*best);
        out << "\n## Best kernel so far (node " << b.id << "): " << outcome(b, ctx.baselines) << "\n"
            << confirmation_text(ctx, b) << diagnosis_lines(b, !parent.diagnosis) << steps_text(spec, b)
            << "Tunables: " << bindings_text(b.candidate.tunables) << "\n```" << to_string(b.candidate.language) << "\n"
            << b.candidate.source << (b.candidate.source.ends_with("\n") ? "" : "\n") << "```\n";
      }
      warm_section(out, g, parent.id, g.best());
    }
    std::string query =
        spec.name + " " + spec.notes + " " + to_string(spec.language) + " " + options.device_description;
    for (NodeId id : g.children(parent.id)) {
      const Node& n = g.node(id);
      if (n.evaluation.status != Status::ok)
        query += std::string(" ") + to_string(n.evaluation.status) + " " + n.evaluation.message;
    }
    std::vector<const Node*> earlier;
    for (NodeId id : g.lineage(parent.id)) earlier.push_back(&g.node(id));
    knowledge_section(out, query, spec, earlier);
    out << "\n## Task\nWrite a faster correct version of the parent kernel.\n";
    return out.str();
  }

  std::string request_body(const std::string& system, const std::string& user) const {
    std::ostringstream out;
    out << "{\"model\": " << json_quote(options.model) << ", \"max_tokens\": " << options.max_tokens
        << ", \"temperature\": " << options.temperature << ", ";
    if (options.api == "anthropic") {
      out << "\"system\": " << json_quote(system)
          << ", \"messages\": [{\"role\": \"user\", \"content\": " << json_quote(user) << "}]}";
    } else {
      out << "\"messages\": [{\"role\": \"system\", \"content\": " << json_quote(system)
          << "}, {\"role\": \"user\", \"content\": " << json_quote(user) << "}]}";
    }
    return out.str();
  }

  // What a call spent: the prompt's tokens and the answer's, as the server reported them.
  struct Usage {
    std::int64_t prompt = 0, completion = 0;
    bool estimated = false;  // the server reported none: counted from the lengths, 4 bytes a token
    std::int64_t total() const { return prompt + completion; }
  };

  // Parses the reply: the answer's text and the tokens it cost, or an error.
  bool parse_reply(const std::string& body, std::string& text, Usage& used, std::string& error) const {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(body).get(doc) != simdjson::SUCCESS) {
      error = "the model's reply is not JSON: " + body.substr(0, 200);
      return false;
    }
    std::string_view content;
    if (options.api == "anthropic") {
      simdjson::dom::array blocks;
      if (doc["content"].get_array().get(blocks) == simdjson::SUCCESS) {
        for (auto block : blocks) {
          std::string_view piece;
          if (block["text"].get_string().get(piece) == simdjson::SUCCESS) text += std::string(piece);
        }
      }
      if (doc["usage"]["input_tokens"].get_int64().get(used.prompt) != simdjson::SUCCESS) used.prompt = 0;
      if (doc["usage"]["output_tokens"].get_int64().get(used.completion) != simdjson::SUCCESS) used.completion = 0;
    } else {
      if (doc["choices"].at(0)["message"]["content"].get_string().get(content) == simdjson::SUCCESS) text = content;
      if (doc["usage"]["prompt_tokens"].get_int64().get(used.prompt) != simdjson::SUCCESS) used.prompt = 0;
      if (doc["usage"]["completion_tokens"].get_int64().get(used.completion) != simdjson::SUCCESS) used.completion = 0;
      // A total without its parts is priced as completion, the dearer kind: a cost never under-counted.
      std::int64_t total = 0;
      if (doc["usage"]["total_tokens"].get_int64().get(total) == simdjson::SUCCESS && total > used.total()) {
        used.completion = total - used.prompt;
      }
    }
    used.prompt = std::max<std::int64_t>(used.prompt, 0);
    used.completion = std::max<std::int64_t>(used.completion, 0);
    if (used.total() <= 0) {
      used.completion = static_cast<std::int64_t>(body.size() / 4);
      used.estimated = true;
    }
    if (text.empty()) {
      error = "the model's reply holds no answer text: " + body.substr(0, 200);
      return false;
    }
    return true;
  }

  // One call with retries; fills answer/tokens or error.
  void call(const std::string& body, std::string& answer, Usage& used, std::string& error) {
    std::vector<std::string> headers;
    const char* key = options.api_key_env.empty() ? nullptr : std::getenv(options.api_key_env.c_str());
    if (!options.api_key_env.empty() && (!key || !*key)) {
      error = "the environment variable " + options.api_key_env + " that should hold the API key is not set";
      return;
    }
    if (options.api == "anthropic") {
      if (key) headers.push_back(std::string("x-api-key: ") + key);
      headers.push_back("anthropic-version: 2023-06-01");
    } else if (key) {
      headers.push_back(std::string("Authorization: Bearer ") + key);
    }
    std::string base = options.base_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    const std::string url = base + (options.api == "anthropic" ? "/messages" : "/chat/completions");
    for (int attempt = 0;; ++attempt) {
      const mutators::HttpResponse r = mutators::http_post_json(url, headers, body, options.timeout_s);
      const bool retryable = r.status == 0 || r.status == 429 || r.status >= 500;
      if (r.status == 200) {
        parse_reply(r.body, answer, used, error);
        if (used.estimated) used.prompt = static_cast<std::int64_t>(body.size() / 4);
        return;
      }
      const std::string what = r.status == 0 ? "no answer (" + r.error + ")"
                                             : "HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 300);
      if (!retryable || attempt >= options.max_retries) {
        error = "the model request failed after " + std::to_string(attempt + 1) + " attempt(s): " + what;
        return;
      }
      double wait = std::min(options.backoff_max_s, options.backoff_initial_s * std::pow(2.0, attempt));
      {
        std::lock_guard lock(mutex);
        wait *= std::uniform_real_distribution<double>(0.5, 1.0)(jitter);
      }
      if (r.retry_after_s >= 0) wait = std::min(r.retry_after_s, options.backoff_max_s);
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
  }
};

LlmMutator::LlmMutator(LlmOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.api != "openai" && options.api != "anthropic") {
    throw Error(ErrorCode::BadUsage, "llm: unknown api '" + options.api + "' (known: openai, anthropic)");
  }
  if (options.base_url.empty()) {
    options.base_url = options.api == "anthropic" ? "https://api.anthropic.com/v1" : "https://api.openai.com/v1";
  }
  if (options.model.empty()) throw Error(ErrorCode::BadUsage, "llm: a model name is required (--llm-model)");
  if (options.memory != "inherit" && options.memory != "siblings" && options.memory != "both" &&
      options.memory != "fresh") {
    throw Error(ErrorCode::BadUsage,
                "llm: unknown memory mode '" + options.memory + "' (known: inherit, siblings, both, fresh)");
  }
  if (options.max_in_flight < 1) throw Error(ErrorCode::BadUsage, "llm: max_in_flight must be at least 1");
  for (double p : {options.price.input_per_mtok, options.price.output_per_mtok}) {
    if (!(p >= 0) || !std::isfinite(p)) {
      throw Error(ErrorCode::BadUsage, "llm: a price must be a number of dollars per million tokens, not negative");
    }
  }
  std::vector<std::string> folders = options.knowledge_dirs;
  folders.insert(folders.begin(), mutators::shipped_knowledge_dir());
  impl_->knowledge = std::make_unique<mutators::KnowledgeBase>(folders);
  impl_->options = std::move(options);
}

LlmMutator::~LlmMutator() = default;

std::int64_t LlmMutator::tokens_used() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->tokens;
}

std::int64_t LlmMutator::prompt_tokens_used() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->prompt_tokens;
}

std::int64_t LlmMutator::completion_tokens_used() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->completion_tokens;
}

double LlmMutator::cost_used_usd() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->cost_usd;
}

const std::string& LlmMutator::model() const { return impl_->options.model; }

std::map<std::string, LlmPrice> LlmMutator::prices() const {
  std::lock_guard lock(impl_->mutex);
  if (!impl_->options.price.priced()) return {};
  return {{impl_->options.model, impl_->options.price}};
}

void LlmMutator::set_prices(const std::map<std::string, LlmPrice>& prices) {
  std::lock_guard lock(impl_->mutex);
  if (const auto it = prices.find(impl_->options.model); it != prices.end()) impl_->options.price = it->second;
}

Mutation LlmMutator::mutate(const MutationContext& ctx) {
  Mutation m;
  const bool first_kernel = ctx.parents.empty();
  const std::string system = impl_->system_prompt(ctx.spec, first_kernel);
  const std::string user = first_kernel ? impl_->first_kernel_prompt(ctx) : impl_->user_prompt(ctx);
  m.prompt = "[system]\n" + system + "\n\n[user]\n" + user;
  if (impl_->options.defer) {  // a round: the request is kept to be answered later, and no one waits on it
    const DeferredReceipt receipt = impl_->options.defer(
        DeferredRequest{ctx.parents, impl_->options.model, m.prompt, impl_->request_body(system, user)});
    m.deferred = true;
    m.model = impl_->options.model;
    m.note = "asked the model: request " + receipt.id;
    m.stop_run = receipt.stop_run;
    return m;
  }
  {
    std::unique_lock lock(impl_->mutex);
    impl_->slot_free.wait(lock, [&] { return impl_->in_flight < impl_->options.max_in_flight; });
    impl_->in_flight += 1;
  }
  std::string answer, error;
  Impl::Usage used;
  impl_->call(impl_->request_body(system, user), answer, used, error);
  {
    std::lock_guard lock(impl_->mutex);
    impl_->in_flight -= 1;
    m.cost_usd = impl_->options.price.cost_usd(used.prompt, used.completion);
    impl_->tokens += used.total();
    impl_->prompt_tokens += used.prompt;
    impl_->completion_tokens += used.completion;
    impl_->cost_usd += m.cost_usd;
  }
  impl_->slot_free.notify_one();
  m.tokens = used.total();
  m.model = impl_->options.model;
  m.answer = answer;
  if (!error.empty()) {
    m.error = error;
    return m;
  }
  // A first kernel has nothing to edit: only a full source will do.
  const Candidate base = first_kernel ? Candidate{"", ctx.spec.language, ctx.spec.seed_tunables()}
                                      : ctx.graph.node(ctx.parents.at(0)).candidate;
  mutators::ModelChild made = mutators::model_child(ctx.spec, base, answer);
  if (!made.child) {
    m.error = made.error;
    return m;
  }
  m.child = std::move(made.child);
  m.note = std::move(made.note);
  return m;
}

MixMutator::MixMutator(std::shared_ptr<Mutator> model, std::shared_ptr<Mutator> params, int param_steps,
                       int model_every)
    : model_(std::move(model)), params_(std::move(params)), param_steps_(param_steps), model_every_(model_every) {
  if (!model_ || !params_) throw Error(ErrorCode::BadUsage, "MixMutator: both mutators are required");
  if (param_steps_ < 0 || model_every_ < 0) throw Error(ErrorCode::BadUsage, "MixMutator: steps must not be negative");
}

Mutation MixMutator::mutate(const MutationContext& ctx) {
  if (ctx.parents.empty()) {  // the first kernel: the model writes it, then the parameter steps tune it
    steps_left_ = 0;
    since_model_ = 0;
    Mutation m = model_->mutate(ctx);
    if (m.mutator.empty()) m.mutator = model_->name();
    if (m.child) {
      structure_ = static_cast<NodeId>(ctx.graph.size());
      steps_left_ = param_steps_;
    }
    m.exhausted = false;
    return m;
  }
  // Tune the model's latest structure while it has steps left and did not fail.
  if (structure_ >= 0 && static_cast<std::size_t>(structure_) < ctx.graph.size()) {
    const Status s = ctx.graph.node(structure_).evaluation.status;
    if (s != Status::ok && s != Status::pending) steps_left_ = 0;
  }
  const bool model_due = model_every_ > 0 && since_model_ >= model_every_;
  if (steps_left_ > 0 && structure_ >= 0 && static_cast<std::size_t>(structure_) < ctx.graph.size() && !model_due) {
    steps_left_ -= 1;
    since_model_ += 1;
    // From the best node that shares the structure's source (a tuned variant may already beat it).
    NodeId from = structure_;
    const std::string& source = ctx.graph.node(structure_).candidate.source;
    for (const Node& n : ctx.graph.nodes()) {
      if (n.evaluation.status == Status::ok && n.candidate.source == source && n.speedup > ctx.graph.node(from).speedup)
        from = n.id;
    }
    MutationContext own{ctx.spec, ctx.graph, {from}, ctx.rng};
    Mutation m = params_->mutate(own);
    if (m.child) {
      m.parents = {from};
      if (m.mutator.empty()) m.mutator = params_->name();
      return m;
    }
    steps_left_ = 0;  // that structure's space is spent: back to the model
  }
  since_model_ = 0;
  Mutation m = model_->mutate(ctx);
  if (m.mutator.empty()) m.mutator = model_->name();
  if (m.child) {
    structure_ = static_cast<NodeId>(ctx.graph.size());  // the id the Evolver gives the child next
    steps_left_ = param_steps_;
  }
  m.exhausted = false;  // the model can always be asked again
  return m;
}

}  // namespace kernelevolve
