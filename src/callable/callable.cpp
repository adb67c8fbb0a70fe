// A stored program as a function the host calls (callable.hpp): the node read from the store, its plan
// compiled once through the program's own path (program_run.hpp), and each call launched on the caller's
// arguments after a check that they are a workload the node was verified on.
#include "kernelevolve/callable.hpp"

#include <cstring>
#include <sstream>

#include "kernelevolve/error.hpp"
#include "kernelevolve/evolver.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/program.hpp"
#include "program/program_run.hpp"

namespace kernelevolve {

struct CallableProgram::Impl {
  std::shared_ptr<Device> device;
  Spec spec;
  Candidate candidate;
  Provenance provenance;
  program::CompiledProgram compiled;
};

namespace {

std::string where(const Provenance& p) {
  return p.database + ", run " + std::to_string(p.run) + (p.node >= 0 ? ", node " + std::to_string(p.node) : "");
}

// A size's or scalar's value as the caller passed it, in its dtype.
double value_of(const void* at, DType dtype) {
  switch (dtype) {
    case DType::i64: {
      std::int64_t v = 0;
      std::memcpy(&v, at, 8);
      return static_cast<double>(v);
    }
    case DType::i32: {
      std::int32_t v = 0;
      std::memcpy(&v, at, 4);
      return v;
    }
    case DType::i8: {
      std::int8_t v = 0;
      std::memcpy(&v, at, 1);
      return v;
    }
    case DType::u8: {
      std::uint8_t v = 0;
      std::memcpy(&v, at, 1);
      return v;
    }
    case DType::f64: {
      double v = 0;
      std::memcpy(&v, at, 8);
      return v;
    }
    case DType::f32: {
      float v = 0;
      std::memcpy(&v, at, 4);
      return v;
    }
    default: return 0;  // a 16-bit float scalar: not compared
  }
}

std::string bindings_text(const Bindings& b) {
  std::string out;
  for (const auto& [name, value] : b) out += (out.empty() ? "" : ", ") + name + " = " + std::to_string(value);
  return out;
}

}  // namespace

CallableProgram::CallableProgram() : impl_(std::make_unique<Impl>()) {}
CallableProgram::~CallableProgram() = default;

std::unique_ptr<CallableProgram> CallableProgram::load(const std::string& database, std::shared_ptr<Device> device,
                                                       const CallableChoice& choice) {
  if (!device) throw Error(ErrorCode::BadUsage, "CallableProgram::load: no device given");
  Store store(database, Store::Mode::read_only);
  const std::optional<RunId> run = choice.run ? choice.run : store.latest_run();
  if (!run) throw Error(ErrorCode::BadUsage, database + ": holds no run to load a program from");
  const RunInfo info = store.run(*run);  // Error(BadUsage) for an unknown run
  const Checkpoint checkpoint = store.load(*run);
  std::unique_ptr<CallableProgram> out(new CallableProgram);
  Impl& im = *out->impl_;
  im.device = std::move(device);
  im.spec = parse_spec(info.spec_json, info.spec_path);
  Provenance& p = im.provenance;
  p.database = database, p.run = *run, p.problem = im.spec.name;
  const std::optional<NodeId> id = choice.node ? choice.node : info.best ? info.best : checkpoint.graph.best();
  if (!id) throw Error(ErrorCode::BadUsage, where(p) + ": has no verified node to load");
  if (*id < 0 || static_cast<std::size_t>(*id) >= checkpoint.graph.size())
    throw Error(ErrorCode::BadUsage, where(p) + ": has no node " + std::to_string(*id) + " (it has " +
                                         std::to_string(checkpoint.graph.size()) + ")");
  const Node& node = checkpoint.graph.node(*id);
  p.node = *id;
  p.device_class =
      node.evaluation.device.empty() ? FitnessEvaluator::device_class(info.device) : node.evaluation.device;
  p.speedup = node.speedup;
  if (node.evaluation.status != Status::ok)
    throw Error(ErrorCode::BadUsage, where(p) + ": was not verified (its status is " +
                                         to_string(node.evaluation.status) + "): only a verified node is loaded");
  const std::string here = FitnessEvaluator::device_class(im.device->info());
  if (p.device_class != here)
    throw Error(ErrorCode::BadUsage,
                where(p) + ": was verified on " + p.device_class + ", not on this device (" + here + ")");
  im.candidate = node.candidate;
  Plan plan;
  try {
    plan = plan_of(im.spec, im.candidate.source, im.candidate.language);
  } catch (const PlanError& e) {
    throw Error(ErrorCode::BadUsage, where(p) + ": its plan: " + e.what());
  }
  im.compiled = program::compile(*im.device, im.spec, im.candidate, std::move(plan));
  if (!im.compiled.ok()) {
    std::string log = im.compiled.log.substr(0, 600);
    throw Error(ErrorCode::BadUsage, where(p) + ": does not compile on " + im.device->info().id +
                                         (im.compiled.failed_step.empty() ? "" : " (" + im.compiled.failed_step + ")") +
                                         ": " + log);
  }
  return out;
}

void CallableProgram::call(void** args, bool any_shape) {
  Impl& im = *impl_;
  const Spec& spec = im.spec;
  if (!args) throw Error(ErrorCode::BadUsage, where(im.provenance) + ": no arguments");
  Bindings sizes;
  bool scalars_verified = true;
  std::string scalars;
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    const Param& param = spec.params[i];
    if (param.is_buffer()) continue;
    if (!args[i]) throw Error(ErrorCode::BadUsage, where(im.provenance) + ": no argument for '" + param.name + "'");
    const double v = value_of(args[i], param.dtype);
    if (param.role == Role::size) {
      sizes[param.name] = static_cast<std::int64_t>(v);
    } else if (v != param.value && param.dtype != DType::f16 && param.dtype != DType::bf16) {
      scalars_verified = false;
      std::ostringstream s;
      s << param.name << " = " << v << " (verified at " << param.value << ")";
      scalars += (scalars.empty() ? "" : ", ") + s.str();
    }
  }
  bool sizes_verified = false;
  std::string verified;
  for (const Bindings& w : spec.workloads) {
    bool same = true;
    for (const auto& [name, value] : sizes) same = same && w.count(name) && w.at(name) == value;
    sizes_verified = sizes_verified || same;
    verified += (verified.empty() ? "" : "; ") + bindings_text(w);
  }
  if (!any_shape && !(sizes_verified && scalars_verified)) {
    throw Error(ErrorCode::BadUsage,
                where(im.provenance) + ": " +
                    (sizes_verified ? ""
                                    : "the sizes " + bindings_text(sizes) + " are not a workload it was verified on (" +
                                          verified + ")") +
                    (scalars_verified ? "" : std::string(sizes_verified ? "" : "; ") + "the scalars " + scalars) +
                    "; call with any_shape to run it anyway");
  }
  BoundPlan bound;
  try {
    bound = bind_plan(im.compiled.plan, spec, sizes, im.candidate.tunables);
  } catch (const PlanError& e) {
    throw Error(ErrorCode::BadUsage, where(im.provenance) + ": its plan at " + bindings_text(sizes) + ": " + e.what());
  }
  std::vector<std::size_t> param_bytes(spec.params.size(), 0);
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    const Param& param = spec.params[i];
    if (param.is_buffer())
      param_bytes[i] = static_cast<std::size_t>(spec.element_count(param, sizes)) * dtype_size(param.dtype);
  }
  try {
    program::ProgramLaunch launch(*im.device, im.compiled, bound, args, param_bytes);
    launch.poison();
    const LaunchResult r = launch.run(/*timed=*/false, /*flush_cache=*/false);
    if (!r.ok) throw Error(ErrorCode::Internal, where(im.provenance) + ": the call failed: " + r.error);
  } catch (const PlanError& e) {
    throw Error(ErrorCode::BadUsage, where(im.provenance) + ": " + e.what());
  }
}

const Spec& CallableProgram::spec() const { return impl_->spec; }
const Provenance& CallableProgram::provenance() const { return impl_->provenance; }

}  // namespace kernelevolve
