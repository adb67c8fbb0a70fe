// The model's prompt, section by section; see prompt_sections.hpp.
#include "mutators/prompt_sections.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <optional>
#include <sstream>

#include "core/tunables.hpp"
#include "devices/gpu/common.hpp"
#include "eval/buffers.hpp"
#include "kernelevolve/program.hpp"
#include "kernelevolve/report.hpp"
#include "mutators/answer.hpp"
#include "mutators/device_facts.hpp"
#include "mutators/knowledge.hpp"
#include "mutators/prompt_facts.hpp"

namespace kernelevolve::mutators {

namespace {

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
      (cpu ? "functions called in order, each with its args, and temporaries (workspaces allocated for it), so the "
             "program need not allocate. "
           : "several kernels run in order on one stream, each with its own grid and args, and temporaries "
             "(workspaces allocated for it) between them. ") +
      // As eval/workload_run.cpp does it: a ProgramLaunch per workload, its temporaries poisoned once when it is made.
      "Temporaries are allocated and filled with NaN once per workload, when its launch is made, outside every timed "
      "call; each call finds what the previous call left in them, so a step must write a temporary before any step "
      "reads it. Outputs are filled with NaN before each call, also outside the timed call. "
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

// A spec's notes as the model reads them: the pointers to the manual (which the model cannot open) give way to
// where the prompt says the same (a PyTorch problem's notes name docs/spec-format.md for the plan's format).
std::string notes_for_model(std::string notes) {
  for (const std::string pointer : {"docs/spec-format.md, \"Programs\"", "docs/spec-format.md"}) {
    for (std::size_t at = notes.find(pointer); at != std::string::npos; at = notes.find(pointer, at))
      notes.replace(at, pointer.size(), "its format is in the system message");
  }
  return notes;
}

}  // namespace

std::string PromptWriter::system_prompt(const Spec& spec, bool first) const {
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
  if (options.children > 1) {
    // Each part is cut at its heading and made a child alone (answer.hpp, model_children).
    tunables += " Write " + std::to_string(options.children) +
                " different kernels, each a separate attempt evaluated and judged on its own: put each under a "
                "heading line `" +
                kChildHeading + "1`, `" + kChildHeading +
                "2`, ..., with its own sentence and then its own code in the form above" +
                (first ? "" : " (edits apply to the parent, never to another child)") +
                "; a child that cannot be used fails alone.";
  }
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
void PromptWriter::problem_section(std::ostringstream& out, const Spec& spec) const {
  const std::string& device_description = options.device_description;
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
         "Each node's figures are one evaluation's, and the \"±\" is the spread within that evaluation: the same "
         "code evaluated again moves by more than that (the machine's state, clock and neighbours change between "
         "evaluations), so a difference of a few percent between two nodes may be noise.";
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
        << spec.launch->block[0].text() << ", " << spec.launch->block[1].text() << ", " << spec.launch->block[2].text()
        << "), shared bytes " << spec.launch->shared_bytes.text() << "\n";
  }
  if (!spec.tunables.empty()) {
    // The spec's, which the seed reads: a kernel that drops one no longer has it (its own are listed with
    // it, as "Tunables:"), and a model shown the spec's list alone took them for the parent's.
    out << (triton ? "The spec's tunables (tl.constexpr parameters of the seed; num_warps and num_stages are Triton's "
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
  if (!spec.notes.empty()) out << "Notes: " << notes_for_model(spec.notes) << "\n";
}

void PromptWriter::device_section(std::ostringstream& out) const {
  if (!options.device_description.empty()) out << "## Device\n" << options.device_description;
  // The rule above is a formula; what it comes to in this run is what a model plans a kernel's work against.
  if (const double limit = options.time_limit_s ? options.time_limit_s() : 0; limit > 0) {
    std::ostringstream seconds;
    seconds << std::fixed << std::setprecision(limit < 100 ? 1 : 0) << limit;
    out << "Time limit per evaluation in this run now: " << seconds.str()
        << " s (compile, verification and timing together).\n";
  }
  if (!options.device_description.empty() || (options.time_limit_s && options.time_limit_s() > 0)) out << "\n";
}

void PromptWriter::unusable_section(std::ostringstream& out, const std::vector<std::string>& unusable) const {
  if (unusable.empty()) return;
  out << "\n## Your last answer for this " << (options.children > 1 ? "prompt" : "parent")
      << " could not be used\nThe tool could not make a kernel of it, so nothing was evaluated:\n";
  for (const std::string& why : unusable) out << "- " << why << "\n";
  out << "Answer in the form the system message gives.\n";
}

std::string PromptWriter::task_text(const Spec& spec, bool first) const {
  std::ostringstream out;
  out << "\n## Task\n";
  if (first) {
    out << "Write the first " << to_string(spec.language) << " kernel for this problem: a complete source "
        << "that defines `" << kernel_signature(spec) << "` (or declares a plan and defines its kernels) and computes "
        << "what the reference computes.\n";
  } else {
    out << "Write a faster correct version of the parent kernel.\n";
  }
  if (options.children > 1) {
    out << "Write " << options.children << " different " << (first ? "kernels" : "versions")
        << ", each under its own heading line `" << kChildHeading << "1`, `" << kChildHeading
        << "2`, ...: each is evaluated and judged on its own.\n";
  }
  return out.str();
}

// The run's warm start (nodes of mutator "warm": kernels of the same operator from other problems' runs) as
// examples, with where they came from and how they fared here: the two best, each cut to a budget, leaving
// out the parent and the best node, whose sources the prompt has already.
void PromptWriter::warm_section(std::ostringstream& out, const SearchGraph& g, NodeId parent,
                                std::optional<NodeId> best) {
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
void PromptWriter::knowledge_section(std::ostringstream& out, std::string query, const Spec& spec,
                                     const std::vector<const Node*>& earlier) const {
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
std::string PromptWriter::first_kernel_prompt(const MutationContext& ctx,
                                              const std::vector<std::string>& unusable) const {
  const Spec& spec = ctx.spec;
  std::ostringstream out;
  device_section(out);
  problem_section(out, spec);
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
  std::string query = spec.name + " " + spec.notes + " " + to_string(spec.language) + " " + options.device_description;
  for (const Node& n : ctx.failed_attempts)
    query += std::string(" ") + to_string(n.evaluation.status) + " " + n.evaluation.message;
  unusable_section(out, unusable);
  knowledge_section(out, query, spec);
  out << task_text(spec, true);
  if (ref.pytorch && (spec.language == Language::cuda || spec.language == Language::triton) && spec.library_steps) {
    out << "For a matrix product or a convolution followed by an epilogue (bias, activation, scaling, a reduction), "
           "a plan of a library step (a cuBLAS product or a cuDNN convolution, into a temporary unless its own "
           "epilogue is all there is) and one fused kernel for the rest is often fastest.\n";
  }
  return out.str();
}

std::string PromptWriter::user_prompt(const MutationContext& ctx, const std::vector<std::string>& unusable) const {
  const Spec& spec = ctx.spec;
  const SearchGraph& g = ctx.graph;
  const Node& parent = g.node(ctx.parents.at(0));
  const std::string& memory = options.memory;
  std::ostringstream out;
  device_section(out);
  problem_section(out, spec);
  // How noisy this machine is, from the seed's own launches (what a difference has to beat to mean anything)
  // and from ceilings that moved since the previous measurement on the device.
  const double noise = relative_spread(g.node(0).evaluation);
  const std::string moved = mutators::description_ceilings_moved(options.device_description);
  if (noise > kNoisyMachine || !moved.empty()) {
    out << "Noise: this machine is noisy: ";
    if (noise > kNoisyMachine) {
      out << "the seed's launches spread by " << std::lround(noise * 100)
          << "% of their median (median absolute deviation); a difference under about " << std::lround(2 * noise * 100)
          << "% is not one";
    }
    if (!moved.empty()) {
      out << (noise > kNoisyMachine ? "; " : "") << "its measured ceilings moved between runs (" << moved
          << "), so shares of peak are rough";
    }
    out << "; the run measures its confirmations twice as long.\n";
  }
  out << marks_section(spec, ctx.baselines);
  const Confirmation* parent_confirmation = confirmation_of(ctx, parent);
  out << "\n## Parent kernel (node " << parent.id << "): " << outcome(parent, ctx.baselines) << "\n"
      << confirmation_text(parent, parent_confirmation) << between_evaluations_text(ctx, parent, parent_confirmation)
      << diagnosis_lines(parent, true) << steps_text(spec, parent)
      << "Tunables: " << bindings_text(shown_tunables(spec, parent.candidate)) << "\n```"
      << to_string(parent.candidate.language) << "\n"
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
          << confirmation_text(b, confirmation_of(ctx, b)) << diagnosis_lines(b, !parent.diagnosis)
          << steps_text(spec, b) << "Tunables: " << bindings_text(shown_tunables(spec, b.candidate)) << "\n```"
          << to_string(b.candidate.language) << "\n"
          << b.candidate.source << (b.candidate.source.ends_with("\n") ? "" : "\n") << "```\n";
    }
    warm_section(out, g, parent.id, g.best());
  }
  std::string query = spec.name + " " + spec.notes + " " + to_string(spec.language) + " " + options.device_description;
  for (NodeId id : g.children(parent.id)) {
    const Node& n = g.node(id);
    if (n.evaluation.status != Status::ok)
      query += std::string(" ") + to_string(n.evaluation.status) + " " + n.evaluation.message;
  }
  std::vector<const Node*> earlier;
  for (NodeId id : g.lineage(parent.id)) earlier.push_back(&g.node(id));
  unusable_section(out, unusable);
  knowledge_section(out, query, spec, earlier);
  out << task_text(spec, false);
  return out.str();
}

}  // namespace kernelevolve::mutators
