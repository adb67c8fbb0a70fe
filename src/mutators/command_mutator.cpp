// The command mutator: the JSON request every external writer of kernels gets (mutation_request_json,
// shared with the C API's custom mutators) and the run of the user's program on it.
#include <sstream>

#include "core/subprocess.hpp"
#include "core/tunables.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/json.hpp"
#include "kernelevolve/mutator.hpp"
#include "kernelevolve/program.hpp"
#include "mutators/answer.hpp"

namespace kernelevolve {

namespace {

std::string tail(const std::string& text, std::size_t max) { return mutators::tail(text, max, "..."); }

std::string node_json(const Node& n, bool with_source) {
  std::ostringstream out;
  out << "{\"id\": " << n.id << ", \"mutator\": " << json_quote(n.mutator) << ", \"note\": " << json_quote(n.note)
      << ", \"status\": " << json_quote(to_string(n.evaluation.status))
      << ", \"message\": " << json_quote(n.evaluation.message) << ", \"speedup\": " << n.speedup
      << ", \"tunables\": " << json_object(n.candidate.tunables) << ", \"time_us\": [";
  const auto& t = n.evaluation.timings;
  for (std::size_t i = 0; i < t.size(); ++i) out << (i ? ", " : "") << t[i].median_us;
  out << "], \"mad_us\": [";
  for (std::size_t i = 0; i < t.size(); ++i) out << (i ? ", " : "") << t[i].mad_us;
  out << "]";
  if (n.diagnosis) out << ", \"diagnosis\": " << diagnosis_json(*n.diagnosis);
  if (!n.evaluation.compile_log.empty())
    out << ", \"compile_log\": " << json_quote(tail(n.evaluation.compile_log, 4000));
  if (n.evaluation.worst && n.evaluation.status == Status::incorrect) {
    const Mismatch& m = *n.evaluation.worst;
    out << ", \"worst_mismatch\": {\"buffer\": " << json_quote(m.buffer) << ", \"index\": " << m.index
        << ", \"workload\": " << m.workload << ", \"got\": " << json_quote(std::to_string(m.got))
        << ", \"expected\": " << json_quote(std::to_string(m.expected)) << "}";
  }
  if (with_source) out << ", \"source\": " << json_quote(n.candidate.source);
  out << "}";
  return out.str();
}

// The marks to beat (MutationContext::baselines): each one's name, status, and times with their spreads.
std::string baselines_json(const std::vector<Baseline>& marks) {
  std::ostringstream out;
  out << "[";
  for (std::size_t b = 0; b < marks.size(); ++b) {
    const Evaluation& e = marks[b].evaluation;
    out << (b ? ", " : "") << "{\"name\": " << json_quote(marks[b].name)
        << ", \"status\": " << json_quote(to_string(e.status)) << ", \"message\": " << json_quote(e.message)
        << ", \"time_us\": [";
    for (std::size_t i = 0; i < e.timings.size(); ++i) out << (i ? ", " : "") << e.timings[i].median_us;
    out << "], \"mad_us\": [";
    for (std::size_t i = 0; i < e.timings.size(); ++i) out << (i ? ", " : "") << e.timings[i].mad_us;
    out << "]}";
  }
  out << "]";
  return out.str();
}

// The kernel's declaration and its params one by one, with their C types: what a kernel must define.
std::string signature_json(const Spec& spec) {
  std::ostringstream out;
  out << "{\"entry\": " << json_quote(spec.entry) << ", \"language\": " << json_quote(to_string(spec.language))
      << ", \"device\": " << json_quote(device_kind(spec.language))
      << ", \"declaration\": " << json_quote(kernel_signature(spec)) << ", \"params\": [";
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    // The spec file's param, and the C type the kernel declares it with.
    std::string param = to_json(spec.params[i]);
    param.insert(param.size() - 1, ", \"c_type\": " + json_quote(argument_type(spec.params[i])));
    out << (i ? ", " : "") << param;
  }
  out << "]}";
  return out.str();
}

// The reference the first kernel is written from: a PyTorch module's Python, or a kernel's source.
std::string reference_json(const Spec& spec) {
  const SourceRef& r = spec.reference;
  const std::string language = r.pytorch ? "pytorch" : to_string(r.language.value_or(spec.language));
  return "{\"language\": " + json_quote(language) + ", \"file\": " + json_quote(r.file) +
         ", \"source\": " + json_quote(r.source) + "}";
}

// How a source declares its own launch plan (docs/spec-format.md, "Programs"), for a writer that has not read it.
constexpr const char* kPlanFormat =
    "A source may declare its own launch plan instead of the spec's one-kernel launch: the word kernelevolve-plan "
    "followed by a JSON object, in a /* */ comment (C, C++, CUDA, HIP) or a module-level Python string (Triton). "
    "Its \"temporaries\" (optional) are workspaces, each {\"name\", \"dtype\", \"shape\": [integer expressions]}, "
    "allocated by the device and filled with NaN before every call; its \"steps\" run in order on one stream, each "
    "{\"kernel\": an entry of the source, \"grid\", \"block\", \"shared_bytes\" (GPU only; a missing one is the "
    "spec's launch's), in Triton optionally its own \"num_warps\" and \"num_stages\" (a tunable's name or a "
    "number), \"args\": [a param's name, a temporary's name, or an integer expression over sizes, "
    "scalars and tunables, passed as a 64-bit integer]} or, on a CUDA GPU (CUDA or Triton kernels) unless the spec's "
    "library_steps is false, a library call, one of: ";
// After the library calls (library_calls_text()).
constexpr const char* kPlanFormatEnd =
    ". A kernel's declaration matches its args (a temporary is a writable pointer of its dtype; Triton kernels take "
    "the tunables they name as tl.constexpr). The time is the whole plan's; \"plan\" is the parent's, parsed, or null "
    "where its source declares none.";

std::string plan_format() { return std::string(kPlanFormat) + library_calls_text() + kPlanFormatEnd; }

// The plan the parent's source declares, as canonical JSON; null where it declares none or it cannot be read
// (then "plan_error" says why, as the node's evaluation did).
std::string plan_json(const Spec& spec, const Node& parent) {
  try {
    const Plan plan = plan_of(spec, parent.candidate.source, parent.candidate.language);
    return plan.declared ? ", \"plan\": " + to_json(plan) : ", \"plan\": null";
  } catch (const PlanError& e) {
    return ", \"plan\": null, \"plan_error\": " + json_quote(e.what());
  }
}

}  // namespace

std::string mutation_request_json(const MutationContext& ctx) {
  std::ostringstream out;
  if (ctx.parents.empty()) {
    // The first kernel of a problem without a seed: no parent, but the reference to translate and the
    // signature to define, and what earlier attempts wrote that failed.
    out << "{\"task\": \"first_kernel\", \"spec\": " << to_json(ctx.spec)
        << ", \"signature\": " << signature_json(ctx.spec) << ", \"reference\": " << reference_json(ctx.spec)
        << ", \"parent\": null, \"plan\": null, \"plan_format\": " << json_quote(plan_format())
        << ", \"failed_attempts\": [";
    for (std::size_t i = 0; i < ctx.failed_attempts.size(); ++i)
      out << (i ? ", " : "") << node_json(ctx.failed_attempts[i], true);
    out << "], \"recent_failures\": [], \"baselines\": " << baselines_json(ctx.baselines)
        << ", \"nodes\": " << ctx.graph.size() << "}";
    return out.str();
  }
  const Node& parent = ctx.graph.node(ctx.parents.at(0));
  out << "{\"task\": \"improve\", \"spec\": " << to_json(ctx.spec) << ", \"signature\": " << signature_json(ctx.spec)
      << ", \"parent\": " << node_json(parent, true) << plan_json(ctx.spec, parent)
      << ", \"plan_format\": " << json_quote(plan_format()) << ", \"recent_failures\": [";
  // The parent's latest children that failed: what not to do again.
  const auto children = ctx.graph.children(parent.id);
  int listed = 0;
  for (auto it = children.rbegin(); it != children.rend() && listed < 3; ++it) {
    const Node& child = ctx.graph.node(*it);
    if (child.evaluation.status == Status::ok || child.evaluation.status == Status::pending) continue;
    out << (listed++ ? ", " : "") << node_json(child, false);
  }
  out << "]";
  if (const auto best = ctx.graph.best(); best && *best != parent.id) {
    out << ", \"best\": " << node_json(ctx.graph.node(*best), true);
  }
  out << ", \"baselines\": " << baselines_json(ctx.baselines) << ", \"nodes\": " << ctx.graph.size() << "}";
  return out.str();
}

CommandMutator::CommandMutator(std::string command, double timeout_s)
    : command_(std::move(command)), timeout_s_(timeout_s) {
  if (command_.empty()) throw Error(ErrorCode::BadUsage, "the command mutator needs a command (--command CMD)");
  if (!(timeout_s_ > 0)) throw Error(ErrorCode::BadUsage, "the command mutator's time limit must be positive");
}

Mutation CommandMutator::mutate(const MutationContext& ctx) {
  Mutation m;
  const bool first = ctx.parents.empty();
  m.prompt = mutation_request_json(ctx);
  const ProcessResult r = run_shell(command_, m.prompt, timeout_s_);
  m.answer = r.out;
  if (!r.started) {
    m.error = "the command could not start: " + r.start_error;
  } else if (r.timed_out) {
    std::ostringstream msg;
    msg << "the command ran past its time limit of " << timeout_s_ << " s and was killed";
    m.error = msg.str();
  } else if (r.signal != 0) {
    m.error = "the command was killed by signal " + std::to_string(r.signal) + ": " + tail(r.err, 500);
  } else if (r.exit_code != 0) {
    m.error = "the command exited with code " + std::to_string(r.exit_code) + ": " + tail(r.err, 500);
  } else if (r.out_dropped > 0) {
    // Cut short, an answer could still parse (a fenced block closed early, edits missing their end) and be
    // judged as something the command never wrote.
    m.error = "the command's answer was " + std::to_string(r.out.size() + r.out_dropped) +
              " bytes, over the limit of " + std::to_string(r.out.size()) + " bytes an answer may take: not used";
  }
  if (!m.error.empty()) return m;
  // A first kernel has nothing to edit: only a full source will do.
  const Candidate base =
      first ? Candidate{"", ctx.spec.language, ctx.spec.seed_tunables()} : ctx.graph.node(ctx.parents.at(0)).candidate;
  const mutators::ParsedAnswer parsed = mutators::apply_answer(r.out, base.source);
  if (!parsed.ok) {
    m.error = "the command's answer was not usable: " + parsed.error;
    return m;
  }
  Candidate child = base;
  child.source = parsed.source;
  child.tunables = live_tunables(ctx.spec, child.source, child.language, base.tunables);
  m.child = std::move(child);
  m.note = "command (" + parsed.form + ")";
  return m;
}

}  // namespace kernelevolve
