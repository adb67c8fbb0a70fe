// A stored program as a function the host calls (callable.hpp): the node read from the store, its plan
// compiled once through the program's own path (program_run.hpp), and each call launched on the caller's
// arguments after a check that they are a workload the node was verified on.
#include "kernelevolve/callable.hpp"

#include <array>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "kernelevolve/error.hpp"
#include "kernelevolve/evolver.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/program.hpp"
#include "kernelevolve/report.hpp"
#include "program/program_run.hpp"

namespace kernelevolve {

struct CallableProgram::Impl {
  std::shared_ptr<Device> device;
  Spec spec;
  Candidate candidate;
  Provenance provenance;
  program::CompiledProgram compiled;
  // The arguments' own copies, one 8-byte slot per param (a buffer's pointer, a size's or scalar's value),
  // at addresses that do not move: each size's launch below points at them once, and every call refills them.
  std::vector<std::array<unsigned char, 8>> values;
  std::vector<void*> slots;
  // A launch per sizes called with (its bound plan, library steps' checks and temporaries), made once.
  std::map<Bindings, std::unique_ptr<program::ProgramLaunch>> launches;
  // The launch of the last call that ran (its sizes and scalars are still in `values`), and whether they were a
  // verified workload: a call that repeats them skips the check and the lookup.
  program::ProgramLaunch* last_launch = nullptr;
  bool last_verified = false;
  std::mutex mutex;  // one call at a time: the slots, the last call and a launch's temporaries are shared

  // The launch of these sizes, made at their first call (the caller holds `mutex`).
  program::ProgramLaunch* launch_for(const Bindings& sizes);
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

StoredProgram find_stored_program(const std::string& database, const CallableChoice& choice) {
  Store store(database, Store::Mode::read_only);
  const std::optional<RunId> run = choice.run ? choice.run : store.latest_run();
  if (!run) throw Error(ErrorCode::BadUsage, database + ": holds no run to load a program from");
  const RunInfo info = store.run(*run);  // Error(BadUsage) for an unknown run
  const Checkpoint checkpoint = store.load(*run);
  StoredProgram out;
  out.spec = parse_spec(info.spec_json, info.spec_path);
  Provenance& p = out.provenance;
  p.database = database, p.run = *run, p.problem = out.spec.name;
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
  out.candidate = node.candidate;
  return out;
}

std::string torch_module_source(const Provenance& p, const std::string& module_path) {
  namespace fs = std::filesystem;
  const fs::path db = fs::absolute(p.database).lexically_normal();
  const fs::path dir = fs::absolute(module_path.empty() ? "." : module_path).lexically_normal().parent_path();
  // A database beside the module is found beside it wherever the two are moved together.
  const std::string where_db = db.parent_path() == dir ? "os.path.join(os.path.dirname(os.path.abspath(__file__)), " +
                                                             json_quote(db.filename().string()) + ")"
                                                       : json_quote(db.string());
  std::ostringstream speedup;
  speedup.precision(3);
  speedup << p.speedup;
  std::ostringstream out;
  out << "\"\"\"" << p.problem << ": the program KernelEvolve found, as a PyTorch operator.\n\n"
      << "Run " << p.run << ", node " << p.node << " of " << db.filename().string() << ": " << speedup.str()
      << "x the run's first node, verified on " << p.device_class << ".\n"
      << "Written by `kernelevolve export --format torch`. It loads the program through the Python package\n"
      << "kernelevolve (`cmake --install`, or a build tree's python/ on PYTHONPATH). The program runs in this\n"
      << "process, outside any sandbox: keep the database where only you can write it.\n\n"
      << "    import " << fs::path(module_path.empty() ? "op.py" : module_path).stem().string() << " as found\n"
      << "    found.replace(model, \"path.to.submodule\")   # or a module class, or the module itself\n"
      << "    found.op.calls                                # how many times the model called it\n"
      << "\"\"\"\n"
      << "import os\n\nimport kernelevolve.torch\n\n"
      << "DATABASE = os.environ.get(\"KE_DATABASE\", " << where_db << ")\n"
      << "RUN, NODE = " << p.run << ", " << p.node << "\n\n"
      << "op = kernelevolve.torch.load(DATABASE, run=RUN, node=NODE)\n\n\n"
      << "def replace(model, target):\n"
      << "    \"\"\"Makes the operator the forward of `target` in `model`: a dotted path (\"\" for the model), a module\n"
      << "    or a module class.\"\"\"\n"
      << "    return kernelevolve.torch.replace(model, target, op)\n";
  return out.str();
}

CallableProgram::CallableProgram() : impl_(std::make_unique<Impl>()) {}
CallableProgram::~CallableProgram() = default;

std::unique_ptr<CallableProgram> CallableProgram::load(const std::string& database, std::shared_ptr<Device> device,
                                                       const CallableChoice& choice) {
  StoredProgram found = find_stored_program(database, choice);
  std::unique_ptr<CallableProgram> out(new CallableProgram);
  Impl& im = *out->impl_;
  im.device = std::move(device);
  im.spec = std::move(found.spec);
  im.candidate = std::move(found.candidate);
  Provenance& p = im.provenance;
  p = found.provenance;
  if (!im.device) im.device = open_device(p.device_class.substr(0, p.device_class.find(' ')));
  const std::string here = FitnessEvaluator::device_class(im.device->info());
  if (p.device_class != here)
    throw Error(ErrorCode::BadUsage,
                where(p) + ": was verified on " + p.device_class + ", not on this device (" + here + ")");
  Plan plan;
  try {
    plan = plan_of(im.spec, im.candidate.source, im.candidate.language);
  } catch (const PlanError& e) {
    throw Error(ErrorCode::BadUsage, where(p) + ": its plan: " + e.what());
  }
  im.values.resize(im.spec.params.size());
  for (auto& v : im.values) im.slots.push_back(v.data());
  im.compiled = program::compile(*im.device, im.spec, im.candidate, std::move(plan));
  if (!im.compiled.ok()) {
    std::string log = im.compiled.log.substr(0, 600);
    throw Error(ErrorCode::BadUsage, where(p) + ": does not compile on " + im.device->info().id +
                                         (im.compiled.failed_step.empty() ? "" : " (" + im.compiled.failed_step + ")") +
                                         ": " + log);
  }
  return out;
}

bool CallableProgram::verified(void* const* args, Bindings& sizes, std::string& why) const {
  const Impl& im = *impl_;
  const Spec& spec = im.spec;
  if (!args) throw Error(ErrorCode::BadUsage, where(im.provenance) + ": no arguments");
  sizes.clear();
  bool scalars_verified = true;
  std::string scalars;
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    const Param& param = spec.params[i];
    if (!args[i]) throw Error(ErrorCode::BadUsage, where(im.provenance) + ": no argument for '" + param.name + "'");
    if (param.is_buffer()) continue;
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
  for (const Bindings& w : spec.workloads) {
    bool same = true;
    for (const auto& [name, value] : sizes) same = same && w.count(name) && w.at(name) == value;
    sizes_verified = sizes_verified || same;
  }
  why.clear();
  if (!sizes_verified) {
    // Said only when it is so: a call's check is on every launch's path.
    std::string verified;
    for (const Bindings& w : spec.workloads) verified += (verified.empty() ? "" : "; ") + bindings_text(w);
    why = "the sizes " + bindings_text(sizes) + " are not a workload it was verified on (" + verified + ")";
  }
  if (!scalars_verified) why += std::string(why.empty() ? "" : "; ") + "the scalars " + scalars;
  return sizes_verified && scalars_verified;
}

std::vector<std::int64_t> CallableProgram::shape(std::size_t index, const Bindings& sizes) const {
  const Spec& spec = impl_->spec;
  if (index >= spec.params.size() || !spec.params[index].is_buffer())
    throw Error(ErrorCode::BadUsage,
                where(impl_->provenance) + ": param " + std::to_string(index) + " is not a buffer");
  std::vector<std::int64_t> out;
  for (const std::string& dim : spec.params[index].shape) {
    try {
      out.push_back(Expr::parse(dim, "dimension \"" + dim + "\"").eval(sizes));
    } catch (const Error& e) {
      throw Error(ErrorCode::BadUsage, where(impl_->provenance) + ": '" + spec.params[index].name + "': " + e.what());
    }
  }
  return out;
}

void CallableProgram::call(void* const* args, bool any_shape) { run(args, nullptr, any_shape, /*wait=*/true); }

void CallableProgram::enqueue(void* const* args, void* stream, bool any_shape) {
  if (stream && impl_->device->info().kind == "cpu")
    throw Error(ErrorCode::BadUsage,
                where(impl_->provenance) + ": runs on the CPU, on the calling thread: it takes no stream");
  run(args, stream, any_shape, false);
}

void CallableProgram::run(void* const* args, void* stream, bool any_shape, bool wait) {
  Impl& im = *impl_;
  const Spec& spec = im.spec;
  if (!args) throw Error(ErrorCode::BadUsage, where(im.provenance) + ": no arguments");
  std::lock_guard lock(im.mutex);
  // This call's sizes and scalars against the last one's, still in `values`.
  bool repeat = im.last_launch != nullptr && (im.last_verified || any_shape);
  for (std::size_t i = 0; i < spec.params.size() && repeat; ++i) {
    const Param& param = spec.params[i];
    repeat = args[i] != nullptr &&
             (param.is_buffer() || std::memcmp(args[i], im.values[i].data(), dtype_size(param.dtype)) == 0);
  }
  program::ProgramLaunch* launch = repeat ? im.last_launch : nullptr;
  if (!launch) {
    Bindings sizes;
    std::string why;
    const bool verified_now = verified(args, sizes, why);
    if (!verified_now && !any_shape)
      throw Error(ErrorCode::BadUsage, where(im.provenance) + ": " + why + "; call with any_shape to run it anyway");
    launch = im.launch_for(sizes);
    im.last_launch = launch;
    im.last_verified = verified_now;
  }
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    const Param& param = spec.params[i];
    im.values[i].fill(0);
    std::memcpy(im.values[i].data(), args[i], param.is_buffer() ? sizeof(void*) : dtype_size(param.dtype));
  }
  const LaunchResult r = wait ? launch->run(/*timed=*/false, /*flush_cache=*/false) : launch->enqueue(stream);
  if (!r.ok) throw Error(ErrorCode::Internal, where(im.provenance) + ": the call failed: " + r.error);
}

program::ProgramLaunch* CallableProgram::Impl::launch_for(const Bindings& sizes) {
  Impl& im = *this;
  auto it = im.launches.find(sizes);
  if (it != im.launches.end()) return it->second.get();
  // A program holds only where its constraints do (a size Inductor specialised the code to, two sizes it
  // merged): at a shape outside them, even one the caller allows unverified, it would compute the wrong thing.
  if (const Expr* failed = spec.failed_constraint(sizes, im.candidate.tunables))
    throw Error(ErrorCode::BadUsage, where(im.provenance) + ": at " + bindings_text(sizes) + " its constraint \"" +
                                         failed->text() + "\" is false: the program holds only where it is true");
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
    auto launch =
        std::make_unique<program::ProgramLaunch>(*im.device, im.compiled, bound, im.slots.data(), param_bytes);
    launch->poison();  // a temporary read before it is written reads NaN, as in verification
    return im.launches.emplace(sizes, std::move(launch)).first->second.get();
  } catch (const PlanError& e) {
    throw Error(ErrorCode::BadUsage, where(im.provenance) + ": " + e.what());
  } catch (const std::runtime_error& e) {
    throw Error(ErrorCode::Internal, where(im.provenance) + ": its temporaries: " + e.what());
  }
}

const Spec& CallableProgram::spec() const { return impl_->spec; }
const Provenance& CallableProgram::provenance() const { return impl_->provenance; }

}  // namespace kernelevolve
