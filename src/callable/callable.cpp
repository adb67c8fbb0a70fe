// A stored program as a function the host calls (callable.hpp): the node read from the store, its plan
// compiled once through the program's own path (program_run.hpp), and each call launched on the caller's
// arguments after a check that they are a workload the node was verified on.
#include "kernelevolve/callable.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "kernelevolve/error.hpp"
#include "kernelevolve/evolver.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/json.hpp"
#include "kernelevolve/program.hpp"
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
  // A launch per sizes called with (its bound plan, library steps' checks and temporaries), made once, with the
  // bytes each buffer param holds at those sizes (0 for a size or scalar).
  struct Launch {
    std::unique_ptr<program::ProgramLaunch> launch;
    std::vector<std::size_t> param_bytes;
  };
  std::map<Bindings, Launch> launches;
  // The launch of the last call that ran (its sizes and scalars are still in `values`), and whether they were a
  // verified workload: a call that repeats them skips the check and the lookup.
  Launch* last_launch = nullptr;
  bool last_verified = false;
  std::mutex mutex;  // one call at a time: the slots, the last call and a launch's temporaries are shared

  // The launch of these sizes, made at their first call (the caller holds `mutex`).
  Launch* launch_for(const CallableProgram& owner, const Bindings& sizes);
};

namespace {

std::string where(const Provenance& p) {
  return p.database + ", run " + std::to_string(p.run) + (p.node >= 0 ? ", node " + std::to_string(p.node) : "");
}

// An integer size's or scalar's value as the caller passed it, in its dtype: read as an integer, never through a
// double (an i64 past 2^53 would round, and INT64_MAX would come back as INT64_MIN).
std::int64_t integer_of(const void* at, DType dtype) {
  switch (dtype) {
    case DType::i64: {
      std::int64_t v = 0;
      std::memcpy(&v, at, 8);
      return v;
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
    default: return 0;  // not an integer dtype: the caller does not ask
  }
}

// A float scalar's value as the caller passed it.
double float_of(const void* at, DType dtype) {
  if (dtype == DType::f64) {
    double v = 0;
    std::memcpy(&v, at, 8);
    return v;
  }
  float v = 0;
  std::memcpy(&v, at, 4);
  return v;
}

// Whether an integer scalar passed as `v` is the value it was verified at (a spec's value is a double: an integer
// only where it is one, exactly).
bool same_integer(std::int64_t v, double verified) {
  return verified == std::trunc(verified) && verified >= -9.2233720368547758e18 && verified < 9.2233720368547758e18 &&
         v == static_cast<std::int64_t>(verified);
}

// What an `ok` node lacks of the record its verification leaves: the worst element it compared (nodes.worst), a
// timing of every workload of the spec (timings), a positive speedup over the run's first node. "" when whole.
std::string missing_evidence(const Spec& spec, const Node& node) {
  const Evaluation& e = node.evaluation;
  if (!e.worst) return "it has no recorded evaluation (nodes.worst, the worst element its verification compared)";
  std::string untimed;
  for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
    const bool timed = w < e.timings.size() && e.timings[w].samples > 0 && std::isfinite(e.timings[w].median_us) &&
                       e.timings[w].median_us > 0;
    if (!timed) untimed += (untimed.empty() ? "" : ", ") + std::to_string(w);
  }
  if (!untimed.empty())
    return "it has no timing of workload " + untimed + " (timings; the spec has " +
           std::to_string(spec.workloads.size()) + ")";
  if (!(node.speedup > 0) || !std::isfinite(node.speedup)) {
    std::ostringstream text;
    text << "its speedup over the run's first node is " << node.speedup
         << ", not a positive number (nodes.speedup, or the timings of both)";
    return text.str();
  }
  return "";
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
  std::vector<std::int64_t> rows;
  const Checkpoint checkpoint = store.load(*run, &rows);
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
  // What runs in the caller's process must be what was verified: the code as it was recorded, and the evidence
  // of its verification whole. A node edited in the file after the run (its source, its tunables, its status)
  // is refused, naming what does not hold.
  const Store::RecordedDigests recorded = store.recorded_digests(rows.at(static_cast<std::size_t>(*id)));
  const std::string source_hash = Store::source_hash(node.candidate.source);
  if (source_hash != recorded.source_hash)
    throw Error(ErrorCode::BadUsage, where(p) + ": its source does not match its digest (sources.hash is " +
                                         recorded.source_hash + ", the source's is " + source_hash +
                                         "): the database was changed after the run; it is not loaded");
  const std::string key = node.candidate.key();
  if (key != recorded.key)
    throw Error(ErrorCode::BadUsage, where(p) + ": its source and tunables do not match its digest (nodes.key is " +
                                         recorded.key + ", theirs is " + key +
                                         "): the database was changed after the run; it is not loaded");
  if (const std::string missing = missing_evidence(out.spec, node); !missing.empty())
    throw Error(ErrorCode::BadUsage, where(p) + ": its status is ok, but " + missing +
                                         ": the evidence of its verification is not whole; it is not loaded");
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
    if (param.role == Role::size) {  // an integer dtype (Spec::validate)
      const std::int64_t v = integer_of(args[i], param.dtype);
      if (v < 0)
        throw Error(ErrorCode::BadUsage, where(im.provenance) + ": size '" + param.name + "' is " + std::to_string(v) +
                                             ": a size is not negative");
      sizes[param.name] = v;
      continue;
    }
    if (param.dtype == DType::f16 || param.dtype == DType::bf16) continue;  // not compared
    std::ostringstream s;
    if (is_float(param.dtype)) {
      const double v = float_of(args[i], param.dtype);
      if (v == param.value) continue;
      s << param.name << " = " << v;
    } else {
      const std::int64_t v = integer_of(args[i], param.dtype);
      if (same_integer(v, param.value)) continue;
      s << param.name << " = " << v;
    }
    s << " (verified at " << param.value << ")";
    scalars_verified = false;
    scalars += (scalars.empty() ? "" : ", ") + s.str();
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
  for (const Param& param : spec.params) {
    const auto it = sizes.find(param.name);
    if (param.role == Role::size && it != sizes.end() && it->second < 0)
      throw Error(ErrorCode::BadUsage, where(impl_->provenance) + ": size '" + param.name + "' is " +
                                           std::to_string(it->second) + ": a size is not negative");
  }
  std::vector<std::int64_t> out;
  for (const std::string& dim : spec.params[index].shape) {
    try {
      out.push_back(Expr::parse(dim, "dimension \"" + dim + "\"").eval(sizes));
    } catch (const Error& e) {
      throw Error(ErrorCode::BadUsage, where(impl_->provenance) + ": '" + spec.params[index].name + "': " + e.what());
    }
    if (out.back() < 0)
      throw Error(ErrorCode::BadUsage, where(impl_->provenance) + ": '" + spec.params[index].name + "': at " +
                                           bindings_text(sizes) + " its dimension \"" + dim + "\" is " +
                                           std::to_string(out.back()) + ", not a size");
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
  Impl::Launch* launch = repeat ? im.last_launch : nullptr;
  if (!launch) {
    Bindings sizes;
    std::string why;
    const bool verified_now = verified(args, sizes, why);
    if (!verified_now && !any_shape)
      throw Error(ErrorCode::BadUsage, where(im.provenance) + ": " + why + "; call with any_shape to run it anyway");
    launch = im.launch_for(*this, sizes);
    im.last_launch = launch;
    im.last_verified = verified_now;
  }
  // A buffer's data: a null pointer where the sizes give it elements would be the host's own crash.
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    const Param& param = spec.params[i];
    if (!param.is_buffer() || launch->param_bytes[i] == 0) continue;
    void* data = nullptr;
    std::memcpy(&data, args[i], sizeof data);
    if (!data)
      throw Error(ErrorCode::BadUsage, where(im.provenance) + ": the data of '" + param.name + "' is NULL, where " +
                                           std::to_string(launch->param_bytes[i]) + " bytes are expected");
  }
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    const Param& param = spec.params[i];
    im.values[i].fill(0);
    std::memcpy(im.values[i].data(), args[i], param.is_buffer() ? sizeof(void*) : dtype_size(param.dtype));
  }
  program::ProgramLaunch& steps = *launch->launch;
  const LaunchResult r = wait ? steps.run(/*timed=*/false, /*flush_cache=*/false) : steps.enqueue(stream);
  if (!r.ok) throw Error(ErrorCode::Internal, where(im.provenance) + ": the call failed: " + r.error);
}

CallableProgram::Impl::Launch* CallableProgram::Impl::launch_for(const CallableProgram& owner, const Bindings& sizes) {
  Impl& im = *this;
  auto it = im.launches.find(sizes);
  if (it != im.launches.end()) return &it->second;
  // A program holds only where its constraints do (a size Inductor specialised the code to, two sizes it
  // merged): at a shape outside them, even one the caller allows unverified, it would compute the wrong thing.
  if (const Expr* failed = spec.failed_constraint(sizes, im.candidate.tunables))
    throw Error(ErrorCode::BadUsage, where(im.provenance) + ": at " + bindings_text(sizes) + " its constraint \"" +
                                         failed->text() + "\" is false: the program holds only where it is true");
  // Each buffer's bytes at these sizes: sizes that give one a negative extent, or more bytes than an address
  // space holds, are no call (a verified workload never does; any_shape may ask for anything).
  std::vector<std::size_t> param_bytes(spec.params.size(), 0);
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    const Param& param = spec.params[i];
    if (!param.is_buffer()) continue;
    std::int64_t bytes = static_cast<std::int64_t>(dtype_size(param.dtype));
    for (const std::int64_t extent : owner.shape(i, sizes)) {
      if (__builtin_mul_overflow(bytes, extent, &bytes))
        throw Error(ErrorCode::BadUsage, where(im.provenance) + ": at " + bindings_text(sizes) + ", '" + param.name +
                                             "' would hold more than 2^63 bytes: no buffer does");
    }
    param_bytes[i] = static_cast<std::size_t>(bytes);
  }
  BoundPlan bound;
  try {
    bound = bind_plan(im.compiled.plan, spec, sizes, im.candidate.tunables);
  } catch (const PlanError& e) {
    throw Error(ErrorCode::BadUsage, where(im.provenance) + ": its plan at " + bindings_text(sizes) + ": " + e.what());
  }
  try {
    // The launch poisons its temporaries once, as the one that verified it did: a temporary read before it is
    // written reads NaN, and one written reads, at the next call, what the last left (program_run.hpp).
    Launch made{std::make_unique<program::ProgramLaunch>(*im.device, im.compiled, bound, im.slots.data(), param_bytes),
                param_bytes};
    return &im.launches.emplace(sizes, std::move(made)).first->second;
  } catch (const PlanError& e) {
    throw Error(ErrorCode::BadUsage, where(im.provenance) + ": " + e.what());
  } catch (const std::runtime_error& e) {
    throw Error(ErrorCode::Internal, where(im.provenance) + ": its temporaries: " + e.what());
  }
}

const Spec& CallableProgram::spec() const { return impl_->spec; }
const Provenance& CallableProgram::provenance() const { return impl_->provenance; }

}  // namespace kernelevolve
