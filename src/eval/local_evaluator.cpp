// The fitness protocol of DESIGN.md, steps 1-3, in the calling process: compile, verify on fresh
// random inputs against the reference, time what verified. Step 4 (isolation) wraps this in a worker.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>

#include "core/threads.hpp"
#include "eval/buffer_ops.hpp"
#include "eval/buffers.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/program.hpp"
#include "program/program_run.hpp"
#include "pytorch/torch_reference.hpp"

namespace kernelevolve {

namespace {

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  // splitmix64 over the pair: distinct (seed, workload, trial) give unrelated streams.
  std::uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool is_output(const Param& p) { return p.role == Role::out || p.role == Role::inout; }
bool is_input(const Param& p) { return p.role == Role::in || p.role == Role::inout; }

// One set of device buffers for a kernel's buffer params, and the argument block that points at them.
struct ArgBlock {
  std::vector<std::unique_ptr<Buffer>> buffers;  // by param index; null for non-buffers
  std::vector<std::array<unsigned char, 8>> values;
  std::vector<void*> pointers;  // what buffer args hold
  std::vector<void*> args;

  ArgBlock(Device& device, const Spec& spec, const Bindings& workload) {
    const std::size_t n = spec.params.size();
    buffers.resize(n);
    values.resize(n);
    pointers.resize(n);
    args.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Param& p = spec.params[i];
      values[i].fill(0);
      if (p.is_buffer()) {
        const auto count = static_cast<std::size_t>(spec.element_count(p, workload));
        buffers[i] = device.allocate(std::max<std::size_t>(1, count) * dtype_size(p.dtype));
        pointers[i] = buffers[i]->data();
        args[i] = &pointers[i];
        continue;
      }
      const double v = p.role == Role::size ? static_cast<double>(workload.at(p.name)) : p.value;
      switch (p.dtype) {
        case DType::f32: {
          float f = static_cast<float>(v);
          std::memcpy(values[i].data(), &f, 4);
          break;
        }
        case DType::f64: std::memcpy(values[i].data(), &v, 8); break;
        case DType::i32: {
          auto x = static_cast<std::int32_t>(v);
          std::memcpy(values[i].data(), &x, 4);
          break;
        }
        case DType::i8: {
          auto x = static_cast<std::int8_t>(v);
          std::memcpy(values[i].data(), &x, 1);
          break;
        }
        case DType::u8: {
          auto x = static_cast<std::uint8_t>(v);
          std::memcpy(values[i].data(), &x, 1);
          break;
        }
        case DType::f16: {
          auto x = eval::float_to_half(static_cast<float>(v));
          std::memcpy(values[i].data(), &x, 2);
          break;
        }
        case DType::bf16: {
          auto x = eval::float_to_bf16(static_cast<float>(v));
          std::memcpy(values[i].data(), &x, 2);
          break;
        }
        default: {
          auto x = static_cast<std::int64_t>(v);
          std::memcpy(values[i].data(), &x, 8);
        }
      }
      args[i] = values[i].data();
    }
  }
  void poison(std::size_t i, DType dtype) { eval::poison(*buffers[i], dtype); }
};

LaunchDims launch_dims(const Spec& spec, const Bindings& workload, const Bindings& tunables) {
  LaunchDims dims;
  if (!spec.launch) return dims;
  const Bindings names = spec.bindings(workload, tunables);
  for (int d = 0; d < 3; ++d) {
    dims.grid[d] = spec.launch->grid[d].eval(names);
    dims.block[d] = spec.launch->block[d].eval(names);
  }
  dims.shared_bytes = spec.launch->shared_bytes.eval(names);
  return dims;
}

// Holds a flock on a file for its lifetime; a no-op for an empty path. Timing takes it exclusive;
// verification takes it shared on a CPU, so verifications overlap one another but never a timing loop (on a
// GPU, exclusive: see run_workload).
class TimingLock {
 public:
  explicit TimingLock(const std::string& path, bool exclusive = true) {
    if (path.empty()) return;
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666);
    if (fd_ >= 0) {
      while (::flock(fd_, exclusive ? LOCK_EX : LOCK_SH) != 0 && errno == EINTR) {
      }
    }
  }
  ~TimingLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  TimingLock(const TimingLock&) = delete;
  TimingLock& operator=(const TimingLock&) = delete;

 private:
  int fd_ = -1;
};

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string describe_mismatch(const Mismatch& m) {
  std::ostringstream out;
  out << m.buffer << "[" << m.index << "] = " << m.got << ", expected " << m.expected << " (workload " << m.workload
      << ", trial " << m.trial << ")";
  return out.str();
}

std::string first_error_line(const std::string& log) {
  const std::size_t at = log.find("error: ");
  const std::size_t from = at == std::string::npos ? 0 : at + 7;
  return log.substr(from, log.find('\n', from) - from);
}

// Where an evaluation's time goes, by phase, summed over the evaluator's life; printed to stderr when it
// ends if KE_PROFILE is set (with --in-process, or KE_WORKER_LOG for workers). For finding host-side cost.
class Profile {
 public:
  using Clock = std::chrono::steady_clock;
  Profile() : on_(std::getenv("KE_PROFILE") != nullptr) {}
  ~Profile() {
    if (!on_ || evaluations_ == 0) return;
    double total = 0;
    for (const auto& [phase, ms] : ms_) total += ms;
    std::fprintf(stderr, "KE_PROFILE: %d evaluations, %.1f ms each in the phases below\n", evaluations_,
                 total / evaluations_);
    for (const auto& [phase, ms] : ms_) {
      std::fprintf(stderr, "KE_PROFILE:   %-18s %9.1f ms each (%4.1f%%)\n", phase.c_str(), ms / evaluations_,
                   total > 0 ? 100 * ms / total : 0);
    }
  }
  // Adds the time since `since` to `phase` and returns now, for the next phase.
  // Off, it reads no clock: it sits in the timing loop.
  Clock::time_point add(const char* phase, Clock::time_point since) {
    if (!on_) return since;
    const Clock::time_point now = Clock::now();
    ms_[phase] += std::chrono::duration<double, std::milli>(now - since).count();
    return now;
  }
  void count() { evaluations_ += on_ ? 1 : 0; }

 private:
  bool on_;
  int evaluations_ = 0;
  std::map<std::string, double> ms_;
};

}  // namespace

struct LocalEvaluator::Impl {
  Profile profile;
  std::mutex mutex;  // one evaluation at a time: the reference and the buffers are shared
  Spec spec;
  std::shared_ptr<Device> device;
  std::shared_ptr<Device> reference_device;
  // The reference when it is a PyTorch problem's module (it also draws the problem's inputs); else null.
  pytorch::TorchReference* problem = nullptr;
  EvalOptions options;
  std::shared_ptr<Kernel> reference;
  std::function<void(bool)> reference_hook;
  std::function<void(const std::string&)> phase_hook;
  void phase(const std::string& what) {
    if (phase_hook) phase_hook(what);
  }

  Kernel& reference_kernel() {
    if (reference) return *reference;
    KernelSource ks;
    ks.source = spec.reference.source;
    ks.language = spec.reference.language.value_or(spec.language);
    ks.entry = spec.entry;
    ks.params = spec.params;
    // A GPU reference is launched with the seed's point, so it may read the same tunables.
    if (!is_cpu_language(ks.language)) ks.defines = spec.seed_tunables();
    CompileResult r = reference_device->compile(ks);
    if (!r.ok()) {
      throw Error(ErrorCode::BadSpec, spec.path + ": reference: the trusted reference does not compile:\n" + r.log);
    }
    reference = r.kernel;
    return *reference;
  }

  LaunchDims reference_dims(const Bindings& workload) const {
    const Language lang = spec.reference.language.value_or(spec.language);
    return is_cpu_language(lang) ? LaunchDims{} : launch_dims(spec, workload, spec.seed_tunables());
  }

  // Fails the evaluation with `status` and `message`; returns false so callers can `return fail(...)`.
  static bool fail(Evaluation& e, Status status, std::string message) {
    e.status = status;
    e.message = std::move(message);
    return false;
  }

  // Verifies and times one workload of a candidate that runs on `device` (the evaluator's device, or for a
  // baseline the PyTorch reference's).
  // `step_us` gains each step's time on this workload (a program of several steps).
  bool run_workload(std::size_t w, Device& device, const program::CompiledProgram& prog, const Candidate& cand,
                    std::uint64_t input_seed, Evaluation& e, std::vector<double>& step_us);

  // Launches the candidate's program; on failure fills `e` and returns false.
  bool launch_candidate(program::ProgramLaunch& run, bool timed, bool flush, Evaluation& e, double& time_us,
                        std::vector<double>* each = nullptr, double* host_us = nullptr) {
    const int threads_before = options.check_threads ? live_thread_count() : 0;
    const LaunchResult lr = run.run(timed, flush, each);
    if (!lr.ok) return fail(e, Status::crashed, "launch failed: " + lr.error);
    if (options.check_threads) {
      const int left = live_thread_count() - threads_before;
      if (left > 0) {
        return fail(e, Status::invalid,
                    "the kernel left " + std::to_string(left) +
                        " thread(s) running after it returned: work must finish inside the call");
      }
    }
    time_us = lr.time_us;
    if (host_us) *host_us = lr.host_us;
    return true;
  }

  // Whether every buffer the candidate is given, its params' and its program's temporaries, kept its red zones
  // (Buffer::check_red_zones): a write outside one, however small, fails the node, named by buffer, side and byte.
  // Called after launches, never inside the timed region. `when` says which launch ("workload 0, trial 2"). A
  // check re-arms what it finds damaged, and each workload's buffers are its own: no launch's damage reaches
  // another candidate's verdict. The status is `incorrect`, as for a kernel that writes its input: the kernel ran
  // and wrote memory the spec does not give it, a bug in its indexing that the model can fix from the message, not
  // a rule of the protocol broken (`invalid`).
  bool stayed_in_bounds(std::vector<std::unique_ptr<Buffer>>& params, program::ProgramLaunch& run, const Plan& plan,
                        const std::string& when, Evaluation& e) {
    auto judge = [&](Buffer& buffer, const std::string& name) {
      const RedZoneReport r = buffer.check_red_zones();
      if (r.intact) return true;
      std::string where;
      if (r.before) {
        where = "wrote before the start of " + name + " (byte -" + std::to_string(r.distance) + ", in the " +
                std::to_string(r.zone_bytes) + " before it; ";
      } else {
        where = "wrote past the end of " + name + " (byte " + std::to_string(r.distance) + " of the " +
                std::to_string(r.zone_bytes) + " after its " + std::to_string(buffer.bytes()) + " bytes; ";
      }
      e.worst.reset();  // a comparison that passed is no clue to this failure
      return fail(e, Status::incorrect, where + when + ")");
    };
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (!params[i]) continue;
      const Param& p = spec.params[i];
      const char* role = p.role == Role::in ? "input" : p.role == Role::out ? "output" : "in-out param";
      if (!judge(*params[i], std::string(role) + " '" + p.name + "'")) return false;
    }
    for (std::size_t t = 0; t < run.temporaries(); ++t) {
      const std::string name = t < plan.temporaries.size() && !plan.temporaries[t].name.empty()
                                   ? "'" + plan.temporaries[t].name + "'"
                                   : std::to_string(t);
      if (!judge(run.temporary(t), "temporary " + name)) return false;
    }
    return true;
  }

  Evaluation evaluate(const Candidate& cand, std::uint64_t input_seed) {
    Evaluation e;
    e.device = FitnessEvaluator::device_class(device->info());
    // A baseline (PyTorch eager or torch.compile) runs where the reference does, and is judged as a kernel is.
    const bool baseline = cand.language == Language::pytorch;
    if (baseline && !problem) {
      fail(e, Status::invalid, "a PyTorch baseline needs a PyTorch problem; " + spec.path + " has a kernel reference");
      return e;
    }
    const std::shared_ptr<Device>& device = baseline ? reference_device : this->device;
    if (cand.language != spec.language && !baseline) {
      fail(e, Status::invalid,
           std::string("candidate is ") + to_string(cand.language) + ", the spec asks for " + to_string(spec.language));
      return e;
    }
    if (!spec.satisfies_constraints(cand.tunables)) {
      fail(e, Status::invalid, "tunables violate the spec's constraints");
      return e;
    }
    if (!device->healthy()) {
      // Nothing compiled or run on a poisoned context could be told apart from the candidate's own fault.
      throw Error(ErrorCode::DeviceUnavailable,
                  device->info().id + ": an earlier kernel left the device unusable; a new process must open it");
    }
    Kernel& ref = reference_kernel();  // a broken reference is the spec's fault: it throws
    (void)ref;
    // What the candidate runs: the plan its source declares, or the spec's one kernel. A baseline's source is
    // a PyTorch module, run as the reference is.
    Plan plan;
    try {
      plan = plan_of(spec, baseline ? std::string() : cand.source, cand.language);
    } catch (const PlanError& ex) {
      fail(e, Status::invalid, ex.what());
      return e;
    }
    if (plan.calls_library() && !spec.library_steps) {
      fail(e, Status::invalid,
           "the plan calls a library, and this problem forbids library steps (its spec's "
           "\"library_steps\" is false): write the work as kernels");
      return e;
    }
    profile.count();
    auto t = Profile::Clock::now();
    phase("compiling");
    const program::CompiledProgram compiled = program::compile(*device, spec, cand, std::move(plan));
    profile.add("compile", t);
    e.compile_log = compiled.log;
    e.compile_ms = compiled.compile_ms;
    if (!compiled.ok()) {
      const bool several = compiled.plan.steps.size() > 1;
      const std::string which = several ? " in " + compiled.failed_step : "";
      if (compiled.refused) {
        fail(e, Status::invalid, "refused: " + first_error_line(compiled.log));
      } else if (baseline) {
        fail(e, Status::compile_error, first_error_line(compiled.log));
      } else if (!compiled.missing_entry.empty()) {
        fail(e, Status::invalid,
             "the source does not define the entry point '" + compiled.missing_entry + "'" +
                 (compiled.plan.declared ? " that its plan launches" : ""));
      } else if (compiled.library_failed) {
        fail(e, Status::invalid, compiled.failed_step + ": " + first_error_line(compiled.log));
      } else {
        fail(e, Status::compile_error, "compilation failed" + which);
      }
      return e;
    }
    e.resources = compiled.resources();
    try {
      std::vector<double> step_us(compiled.plan.steps.size(), 0.0);
      for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
        if (!run_workload(w, *device, compiled, cand, input_seed, e, step_us)) {
          e.timings.clear();
          return e;
        }
      }
      // What only the launch tells (a GPU's occupancy for the rule's block), asked after the launches so that
      // any opt-in to more dynamic shared memory is made. The first workload's launch stands for all: the
      // block is normally the tunables' alone.
      if (!spec.workloads.empty()) {
        const BoundPlan bound = bind_plan(compiled.plan, spec, spec.workloads[0], cand.tunables);
        const bool several = compiled.kernels.size() > 1;
        for (std::size_t s = 0; s < compiled.kernels.size(); ++s) {
          const std::string prefix = several ? "step" + std::to_string(s + 1) + "." : "";
          for (const auto& [name, value] : device->launch_resources(*compiled.kernels[s], bound.dims[s]))
            e.resources[prefix + name] = value;
        }
      }
      // Each step's share of the program's time, over every workload, in thousandths.
      double total_us = 0;
      for (double us : step_us) total_us += us;
      if (compiled.kernels.size() > 1 && total_us > 0) {
        for (std::size_t s = 0; s < step_us.size(); ++s)
          e.resources["step" + std::to_string(s + 1) + ".share_permille"] =
              static_cast<std::int64_t>(std::lround(1000.0 * step_us[s] / total_us));
      }
    } catch (const PlanError& ex) {
      e.timings.clear();
      fail(e, Status::invalid, ex.what());
      return e;
    } catch (const Error&) {
      throw;
    } catch (const std::exception& ex) {
      e.timings.clear();
      fail(e, Status::crashed, std::string("evaluation failed: ") + ex.what());
      return e;
    }
    e.status = Status::ok;
    return e;
  }
};

bool LocalEvaluator::Impl::run_workload(std::size_t w, Device& device, const program::CompiledProgram& prog,
                                        const Candidate& cand, std::uint64_t input_seed, Evaluation& e,
                                        std::vector<double>& step_us) {
  const Bindings& workload = spec.workloads[w];
  const std::size_t n = spec.params.size();
  const BoundPlan bound = bind_plan(prog.plan, spec, workload, cand.tunables);  // PlanError: the caller's
  // The device's memory is asked only of a plan with temporaries (on the CPU it is a read of /proc/meminfo).
  if (bound.total_temporary_bytes > 0) {
    // Of the device's whole memory, not of what is free at the moment: the same plan gets the same verdict on
    // every run (a quarter of the free memory moved between 5.74 and 5.93 GB from one run to the next).
    const std::size_t cap = temporaries_limit(device_capacity_bytes(device.info(), options.device_memory_bytes));
    if (bound.total_temporary_bytes > cap) {
      return fail(e, Status::invalid,
                  "the plan's temporaries take " + std::to_string(bound.total_temporary_bytes) + " bytes on workload " +
                      std::to_string(w) + ", more than the device allows (" + std::to_string(cap) +
                      " bytes, a quarter of its whole memory)");
    }
  }
  const LaunchDims ref_dims = reference_dims(workload);
  Kernel& ref = reference_kernel();
  // Outputs are compared where the reference left them when they are the candidate's device's buffers.
  const bool same_device = reference_device.get() == &device || (problem && problem->shares_candidate_memory());

  auto t = Profile::Clock::now();
  // Where the reference's buffers are the candidate device's own (a PyTorch reference's GPU arena), the
  // candidate's block is carved from the same arena: two blocks in all on the device, not three. Not from an
  // arena that another process allocated (a bridge the workers share): a kernel ran slower on memory opened
  // over CUDA IPC than on this process's own (the same cuBLAS kernel, the same bytes from DRAM: 7.66 ms
  // against 5.30, level-2 problem 56 on an H100), so a kernel's block is then its own allocation.
  const bool baseline = cand.language == Language::pytorch;
  const bool in_arena = problem && problem->shares_candidate_memory() && (baseline || !problem->shared());
  ArgBlock cand_args(in_arena ? *reference_device : device, spec, workload);
  ArgBlock ref_args(*reference_device, spec, workload);
  std::vector<std::size_t> param_bytes(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    if (spec.params[i].is_buffer()) param_bytes[i] = cand_args.buffers[i]->bytes();
  // One launch for every call on this workload: its temporaries are poisoned once, here, and each call finds
  // what the last one left, as in a stored program's call in the user's process (callable.hpp). A program that
  // carries state from call to call answers trial 1's fresh inputs from trial 0's, and is caught.
  program::ProgramLaunch cand_run(device, prog, bound, cand_args.args.data(), param_bytes);
  t = profile.add("allocate", t);

  auto count = [&](std::size_t i) { return static_cast<std::size_t>(spec.element_count(spec.params[i], workload)); };
  auto bytes = [&](std::size_t i) { return count(i) * dtype_size(spec.params[i].dtype); };

  // Digests of the previous trial's outputs, candidate's and reference's.
  std::vector<std::uint64_t> previous_got(n), previous_expected(n);

  // An integer output (an index, a count) has one right value: the float tolerance's rtol would let an index
  // of 10^4 or more be one off.
  auto tolerance_of = [&](const Param& p) { return is_float(p.dtype) ? spec.tolerance : Tolerance{0.0, 0.0}; };
  auto record_worst = [&](const Param& p, const Comparison& c, int trial) {
    if (!e.worst || c.excess > e.worst->excess) {
      e.worst = Mismatch{p.name, w, trial, c.worst_index, c.got, c.expected, c.excess};
    }
  };
  // Draws every input of `block` from its family for `trial` and poisons every output. A PyTorch problem
  // draws from get_inputs() under the trial's seed (into the reference's buffers, then copied); after
  // trial 0 only its integer inputs, and inputs the spec pins ("problem"), keep the problem's values, and
  // its other float inputs take the adversarial families. When no input keeps them, the problem's own
  // draw is skipped after trial 0: a round trip to PyTorch saved.
  auto keeps_problem_value = [&](const Param& p) {
    return !is_float(p.dtype) || spec.input_distribution(p, workload).problem;
  };
  const bool any_keeps = std::any_of(spec.params.begin(), spec.params.end(),
                                     [&](const Param& p) { return is_input(p) && keeps_problem_value(p); });
  // A PyTorch problem's float input or weight that the spec gives no distribution: drawn at the problem's own
  // scale, uniform over [mean - std, mean + std] of what trial 0 had (get_inputs() and the module's weights;
  // [-1, 1], the unit default, for a randn input), which the later trials' families spread from. At unit scale a
  // network's outputs grow into the thousands, where two valid orders of an fp32 sum already differ by more than 1e-4
  // relative (KernelBench level 3, problem 1). A constant tensor (a zero bias, a norm's unit weight) keeps the
  // unit-scale default, so that a kernel that ignores it is still caught.
  auto problem_scaled = [&](const Param& p, InputDist dist) {
    if (!problem || !is_float(p.dtype) || spec.inputs.count(p.name)) return dist;
    const auto& ranges = problem->ranges();
    const auto it = ranges.find(p.name);
    if (it == ranges.end() || !(it->second.second > it->second.first)) return dist;
    return InputDist{InputDist::Kind::uniform, it->second.first, it->second.second};
  };
  auto draw_inputs = [&](ArgBlock& block, int trial, std::uint64_t seed) {
    if (problem && (trial == 0 || any_keeps)) problem->draw(ref_args.args.data(), seed);
    for (std::size_t i = 0; i < n; ++i) {
      const Param& p = spec.params[i];
      if (is_input(p)) {
        if (problem && (trial == 0 || keeps_problem_value(p))) {
          block.buffers[i]->copy_from(*ref_args.buffers[i]);
        } else {
          const InputDist dist =
              eval::trial_distribution(problem_scaled(p, spec.input_distribution(p, workload)), trial);
          eval::fill_random(device, *block.buffers[i], p.dtype, count(i), dist, mix(seed, i));
        }
      } else if (p.role == Role::out) {
        block.poison(i, p.dtype);
      }
    }
  };
  // The reference on `ref_args` (which hold a copy of the candidate's inputs); a reference that cannot
  // run is the spec's fault, never the candidate's.
  auto run_reference = [&] {
    if (reference_hook) reference_hook(true);
    LaunchResult rr = reference_device->launch(ref, ref_args.args.data(), ref_dims);
    if (reference_hook) reference_hook(false);
    if (!rr.ok) throw Error(ErrorCode::BadSpec, spec.path + ": reference: the reference failed to launch: " + rr.error);
  };
  auto copy_inputs_to_reference = [&] {
    for (std::size_t i = 0; i < n; ++i) {
      const Param& p = spec.params[i];
      if (is_input(p)) ref_args.buffers[i]->copy_from(*cand_args.buffers[i]);
      else if (p.role == Role::out) ref_args.poison(i, p.dtype);
    }
  };
  // The reference's answer for output i, on the candidate's device: compared there.
  std::vector<std::unique_ptr<Buffer>> moved(n);
  auto expected_output = [&](std::size_t i) -> const Buffer& {
    // Host memory on both sides (the CPU device's and a PyTorch reference's memfd) is compared in place.
    if (same_device || (ref_args.buffers[i]->host_address() && cand_args.buffers[i]->host_address())) {
      return *ref_args.buffers[i];
    }
    if (!moved[i]) moved[i] = device.allocate(std::max<std::size_t>(1, bytes(i)));
    moved[i]->copy_from(*ref_args.buffers[i]);
    return *moved[i];
  };

  // Whether the candidate's outputs, which missed the float32 reference's, are within the tolerance of the same
  // call in float64 (TorchReference::run_float64, into the reference's outputs): then they are right, however
  // far the float32 reference's own rounding took it. A long float32 sum with cancellation can miss the exact
  // answer by more than KernelBench's 1e-4 (level 2, problem 18), and a candidate that sums exactly then
  // "fails". Not with an inout param, which the float32 reference has already overwritten, nor for a backward,
  // whose reference is autograd in float64 already (ke_bridge/server.py, Server.run_backward).
  const bool may_rescue =
      problem && !spec.reference.backward &&
      std::none_of(spec.params.begin(), spec.params.end(), [](const Param& p) { return p.role == Role::inout; });
  // Only a near miss is tried (its worst element within 100 tolerances of the float32 answer): rounding moves
  // an answer by a few tolerances, and a candidate that is plainly wrong (NaN, an error of thousands of
  // tolerances) should not cost a float64 run, with float64 copies of the weights, on every failure.
  // Against the float64 answer, each output's bound is the larger of the spec's tolerance and kReferenceErrorFactor
  // times the reference's own error there (its largest against float64), issue 50: under the as-run policy the
  // reference may run on TF32 (cuDNN's default), and a program as inaccurate as what the user runs is right, while
  // one less accurate never is. Under strict the reference's error is fp32's, far inside the tolerance.
  std::vector<Tolerance> rescue_tolerance(n);  // each output's bound in the last rescue, which judged it
  // The reference's own error, per output: the largest measured in this workload's verification trials, each trial
  // measured once. The checked timed runs reuse it: measuring means a copy of the reference's answer, on the host
  // where the device has no room (4 GB for KernelBench level 2's 1), and on every checked run that cost minutes.
  std::vector<double> own_error_of(n, NAN);
  // Where it was last measured: kNotYet, a verification trial, or kTimedRun (a timed run that came before any).
  constexpr int kNotYet = -1, kTimedRun = -2;
  int own_error_measured_in = kNotYet;
  // `trial`: the verification trial, or -1 for a checked timed run.
  auto rescued_by_float64 = [&](const Comparison& missed, int trial) -> bool {
    const double tolerance = spec.tolerance.atol + spec.tolerance.rtol * std::abs(missed.expected);
    if (!may_rescue || !std::isfinite(missed.got) || !(missed.excess <= 99 * tolerance)) return false;
    const bool measure_own_error = trial < 0 ? own_error_measured_in == kNotYet : own_error_measured_in != trial;
    if (measure_own_error) own_error_measured_in = trial < 0 ? kTimedRun : trial;
    if (measure_own_error) e.resources["reference_error_measured"] += 1;
    // The reference's own answers, kept before float64 overwrites them: on the candidate's device where it has room,
    // else on the host (a baseline's device is the reference's arena, sized for its two blocks and no more: there a
    // baseline under as-run, TF32 like the reference, was refused for want of the copy, as "wrong output").
    struct Kept {
      std::unique_ptr<Buffer> on_device;
      std::vector<unsigned char> on_host;
    };
    std::vector<Kept> reference_answer(n);
    for (std::size_t i = 0; i < n && measure_own_error; ++i) {
      if (!is_output(spec.params[i]) || !is_float(spec.params[i].dtype)) continue;
      Kept& kept = reference_answer[i];
      try {
        kept.on_device = device.allocate(std::max<std::size_t>(1, bytes(i)));
        kept.on_device->copy_from(expected_output(i));
      } catch (const std::exception&) {
        kept.on_device.reset();
        try {
          kept.on_host.resize(bytes(i));
          expected_output(i).download(kept.on_host.data(), bytes(i));
        } catch (const std::exception&) {
          kept.on_host.clear();  // no room anywhere: the spec's tolerance alone, as before
        }
      }
    }
    if (!problem->run_float64(ref_args.args.data()).empty()) return false;
    for (std::size_t i = 0; i < n; ++i) {
      const Param& p = spec.params[i];
      if (!is_output(p)) continue;
      rescue_tolerance[i] = tolerance_of(p);
      const Kept& kept = reference_answer[i];
      double own_error = NAN;  // the reference's largest error against the float64 answer
      if (kept.on_device) {
        own_error =
            eval::compare(device, *kept.on_device, expected_output(i), p.dtype, count(i), Tolerance{0.0, 0.0}).excess;
      } else if (!kept.on_host.empty()) {
        std::vector<unsigned char> exact(bytes(i));
        expected_output(i).download(exact.data(), bytes(i));
        const eval::ArrayView answer{p.dtype, count(i), const_cast<unsigned char*>(kept.on_host.data())};
        const eval::ArrayView truth{p.dtype, count(i), exact.data()};
        own_error = 0;
        for (std::size_t k = 0; k < count(i); ++k)
          own_error = std::max(own_error, std::abs(answer.get(k) - truth.get(k)));
      }
      if (std::isfinite(own_error))
        own_error_of[i] = std::isnan(own_error_of[i]) ? own_error : std::max(own_error_of[i], own_error);
      if (std::isfinite(own_error_of[i]))
        rescue_tolerance[i].atol = std::max(rescue_tolerance[i].atol, kReferenceErrorFactor * own_error_of[i]);
      if (!eval::compare(device, *cand_args.buffers[i], expected_output(i), p.dtype, count(i), rescue_tolerance[i])
               .pass)
        return false;
    }
    e.resources["float64_checks"] += 1;
    return true;
  };

  // Step 2: verify, each trial on fresh inputs, the candidate first and on its own copies.
  // On a GPU, exclusive too: processes sharing one GPU are time-sliced by its driver, and verifications that
  // overlap wait on one another's slices at every synchronization (eight workers on an H200, bench_triton:
  // 13.0 candidates a second with exclusive verification, 11.3 with shared, ABBA). On a CPU they overlap,
  // each on its own core.
  const bool gpu = device.info().kind != "cpu";
  phase("waiting for the device to verify w" + std::to_string(w));
  std::optional<TimingLock> verifying(std::in_place, options.timing_lock, /*exclusive=*/gpu);
  t = profile.add("wait: verify lock", t);
  phase("verifying w" + std::to_string(w) + " (the kernel and the reference on checking inputs)");
  for (int trial = 0; trial < options.trials; ++trial) {
    const std::uint64_t trial_seed = mix(mix(input_seed, w), static_cast<std::uint64_t>(trial));
    draw_inputs(cand_args, trial, trial_seed);
    std::vector<std::uint64_t> input_digest(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (spec.params[i].role == Role::in) input_digest[i] = eval::digest(device, *cand_args.buffers[i], bytes(i));
    }
    copy_inputs_to_reference();
    t = profile.add("verify: inputs", t);
    double unused_us = 0;
    if (!launch_candidate(cand_run, false, false, e, unused_us)) return false;
    t = profile.add("verify: candidate", t);
    const std::string trial_name = "workload " + std::to_string(w) + ", trial " + std::to_string(trial);
    if (!stayed_in_bounds(cand_args.buffers, cand_run, prog.plan, trial_name, e)) return false;
    t = profile.add("verify: bounds", t);
    for (std::size_t i = 0; i < n; ++i) {
      const Param& p = spec.params[i];
      if (p.role == Role::in && eval::digest(device, *cand_args.buffers[i], bytes(i)) != input_digest[i]) {
        return fail(e, Status::incorrect,
                    "the kernel modified its input '" + p.name + "' (workload " + std::to_string(w) + ", trial " +
                        std::to_string(trial) + ")");
      }
    }
    t = profile.add("verify: inputs kept", t);
    run_reference();
    t = profile.add("verify: reference", t);
    for (std::size_t i = 0; i < n; ++i) {
      const Param& p = spec.params[i];
      if (!is_output(p)) continue;
      const Buffer& got = *cand_args.buffers[i];
      Comparison c = eval::compare(device, got, expected_output(i), p.dtype, count(i), tolerance_of(p));
      // Rescued: its worst is then the one against the float64 answer, which judged it.
      if (!c.pass && rescued_by_float64(c, trial))
        c = eval::compare(device, got, expected_output(i), p.dtype, count(i), rescue_tolerance[i]);
      const Buffer& expected = expected_output(i);
      record_worst(p, c, trial);
      if (!c.pass) return fail(e, Status::incorrect, "wrong output: " + describe_mismatch(*e.worst));
      // An output that stays put while the reference's moves does not follow its inputs.
      const std::uint64_t got_digest = eval::digest(device, got, bytes(i));
      const std::uint64_t expected_digest = eval::digest(device, expected, bytes(i));
      if (trial > 0 && got_digest == previous_got[i] && expected_digest != previous_expected[i]) {
        return fail(e, Status::incorrect,
                    "output '" + p.name + "' does not change when the inputs do (workload " + std::to_string(w) + ")");
      }
      previous_got[i] = got_digest;
      previous_expected[i] = expected_digest;
    }
    t = profile.add("verify: compare", t);
  }

  verifying.reset();
  // Step 3: time. Every timed call sees inputs that no earlier call saw (made outside the timed region),
  // so no call can be answered from an earlier one: a kernel that remembers answers (static state on the
  // CPU, __device__ globals on a GPU) gains nothing. The timed outputs are checked on the first reps and
  // on random later ones, against the reference run on the same inputs after the candidate.
  // Small inputs are drawn afresh for every call. A large one is a fresh base set rotated by a different
  // number of elements for every call: a copy, where a fresh draw of a CPU workload's inputs cost some 60
  // times the kernel's own time (row_sum, 1024 x 2048 floats). A sorted input is copied as it is, since a
  // rotation would unsort it; the others still change.
  // The base they are rotated from is the reference's block: drawn afresh here, it holds a copy of the inputs
  // already, and a checked call copies the candidate's inputs into it, a rotation of the base by that call's
  // shift. So each input's rotation of the reference's copy is tracked, and each call's copy is rotated from
  // it by what takes it to the call's own shift: no third block on the device. An inout param's reference
  // copy is overwritten by the reference's output, so it keeps a base of its own.
  auto fresh_seed = [&](int rep) {
    return mix(mix(input_seed, w ^ 0x71e0ull), static_cast<std::uint64_t>(rep) + 1000);
  };
  {
    const std::uint64_t seed = fresh_seed(-1000);
    if (problem) {
      problem->draw(ref_args.args.data(), seed);  // trial 0's: the problem's own get_inputs() and weights
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        const Param& p = spec.params[i];
        if (!is_input(p)) continue;
        eval::fill_random(*reference_device, *ref_args.buffers[i], p.dtype, count(i),
                          eval::trial_distribution(spec.input_distribution(p, workload), 0), mix(seed, i));
      }
    }
  }
  std::vector<std::unique_ptr<Buffer>> inout_base(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (spec.params[i].role != Role::inout) continue;
    inout_base[i] = device.allocate(std::max<std::size_t>(1, bytes(i)));
    inout_base[i]->copy_from(*ref_args.buffers[i]);
  }
  auto base_of = [&](std::size_t i) -> const Buffer& { return inout_base[i] ? *inout_base[i] : *ref_args.buffers[i]; };
  std::vector<std::size_t> base_shift(n, 0);  // elements the reference's copy is rotated by from the base drawn
  std::mt19937_64 shift_rng(mix(input_seed, 0x5817ull + w));
  std::vector<std::size_t> first_shift(n);
  for (auto& s0 : first_shift) s0 = static_cast<std::size_t>(shift_rng());
  std::vector<std::size_t> call_shift(n, 0);  // the last call's, per rotated input
  std::vector<bool> rotated(n, false);
  int calls = 0;  // warm-up and timed: each one's inputs differ from every other's
  auto fresh_inputs = [&] {
    const int call = calls++;
    for (std::size_t i = 0; i < n; ++i) {
      const Param& p = spec.params[i];
      rotated[i] = false;
      if (p.role == Role::out) {
        cand_args.poison(i, p.dtype);
        continue;
      }
      if (!is_input(p)) continue;
      const InputDist dist = spec.input_distribution(p, workload);
      const std::size_t c = count(i);
      // A PyTorch problem's inputs are never drawn afresh here (a draw would not be the problem's): its
      // integer inputs (indices, offsets) keep the problem's own values, its floats are rotated.
      if (!problem && (bytes(i) <= eval::kDrawnAfreshBytes || c < 2)) {
        eval::fill_random(device, *cand_args.buffers[i], p.dtype, c, eval::trial_distribution(dist, 0),
                          mix(fresh_seed(call), i));
      } else if (c < 2 || dist.sorted || (problem && !is_float(p.dtype))) {
        cand_args.buffers[i]->copy_from(base_of(i));
      } else {
        // Consecutive calls, consecutive shifts in 1 .. c-1: distinct for fewer than c calls.
        const std::size_t shift = 1 + (first_shift[i] + static_cast<std::size_t>(call)) % (c - 1);
        const std::size_t from = inout_base[i] ? 0 : base_shift[i];
        const std::size_t relative = (shift + c - from % c) % c;
        cand_args.buffers[i]->copy_rotated(base_of(i), bytes(i), relative * dtype_size(p.dtype));
        call_shift[i] = shift;
        rotated[i] = true;
      }
    }
  };
  // A checked call's inputs, copied into the reference's block: its rotated inputs are now the base rotated
  // by this call's shifts.
  auto copy_checked_inputs_to_reference = [&] {
    copy_inputs_to_reference();
    for (std::size_t i = 0; i < n; ++i) {
      if (rotated[i] && !inout_base[i]) base_shift[i] = call_shift[i];
    }
  };
  // GPUs flush L2 between launches; on a CPU the inputs, just written, are warm in cache, as a
  // producer's output would be.
  const bool flush = options.flush_cache && this->device->info().kind != "cpu";
  t = profile.add("time: setup", t);
  phase("waiting for the device to time w" + std::to_string(w));
  TimingLock timing_lock(options.timing_lock);  // warm-up included: it loads the device too
  t = profile.add("wait: timing lock", t);
  phase("timing w" + std::to_string(w) + " (warm-up and timed launches)");
  for (int i = 0; i < options.warmup; ++i) {
    fresh_inputs();
    double unused_us = 0;
    if (!launch_candidate(cand_run, false, false, e, unused_us)) return false;
  }
  t = profile.add("time: warm-up", t);
  std::mt19937_64 check_rng(mix(input_seed, 0xc4ec));
  std::bernoulli_distribution spot_check(0.1);
  int spot_checks_left = 6;  // each check runs the reference: checking every output would dwarf a fast kernel's time
  const int always_checked = 2;
  std::vector<double> times;
  std::vector<double> host_times;  // a baseline's Python call, kept apart from its GPU time (LaunchResult::host_us)
  double total_us = 0;
  for (int rep = 0; rep < options.max_reps; ++rep) {
    if (rep >= options.min_reps && total_us >= options.target_ms * 1000.0) break;
    // Decided before the launch: a kernel cannot know which runs are checked.
    const bool spot = rep >= always_checked && spot_checks_left > 0 && spot_check(check_rng);
    if (spot) spot_checks_left -= 1;
    const bool checked = rep < always_checked || spot;
    t = profile.add("time: check", t);
    fresh_inputs();
    if (checked) copy_checked_inputs_to_reference();
    t = profile.add("time: fresh inputs", t);
    double time_us = 0, host_us = 0;
    if (!launch_candidate(cand_run, /*timed=*/true, flush, e, time_us, nullptr, &host_us)) return false;
    t = profile.add("time: launch", t);
    times.push_back(time_us);
    if (host_us > 0) host_times.push_back(host_us);
    total_us += time_us;
    if (!checked) continue;
    // Damage from the unchecked launches before this one is found here too, or at the latest after the loop.
    const std::string rep_name = "workload " + std::to_string(w) + ", seen after timed rep " + std::to_string(rep);
    if (!stayed_in_bounds(cand_args.buffers, cand_run, prog.plan, rep_name, e)) return false;
    run_reference();
    for (std::size_t i = 0; i < n; ++i) {
      const Param& p = spec.params[i];
      if (!is_output(p)) continue;
      const Comparison c =
          eval::compare(device, *cand_args.buffers[i], expected_output(i), p.dtype, count(i), tolerance_of(p));
      if (!c.pass && !rescued_by_float64(c, /*trial=*/-1)) {
        record_worst(p, c, -1);
        return fail(
            e, Status::incorrect,
            "a timed run (rep " + std::to_string(rep) + ") gave a wrong output: " + describe_mismatch(*e.worst));
      }
    }
  }
  if (!stayed_in_bounds(cand_args.buffers, cand_run, prog.plan,
                        "workload " + std::to_string(w) + ", seen after the timed runs", e))
    return false;
  profile.add("time: check", t);
  WorkloadTiming wt;
  wt.samples = static_cast<int>(times.size());
  wt.median_us = median_of(times);
  wt.min_us = *std::min_element(times.begin(), times.end());
  wt.max_us = *std::max_element(times.begin(), times.end());
  std::vector<double> deviations;
  for (double x : times) deviations.push_back(std::abs(x - wt.median_us));
  wt.mad_us = median_of(deviations);
  // In nanoseconds, as resources are integers: the host's cost of one call, reported beside the GPU time.
  if (!host_times.empty()) e.resources["host_ns.w" + std::to_string(w)] = std::llround(median_of(host_times) * 1000.0);
  if (options.check_roofline) {
    const double floor_us = roofline_floor_us(spec, workload, cand.tunables, device.info());
    if (floor_us > 0 && wt.median_us < floor_us) {
      std::ostringstream msg;
      msg << "time " << wt.median_us << " us is under the roofline floor " << floor_us << " us (workload " << w
          << "): impossible, so not a record";
      return fail(e, Status::invalid, msg.str());
    }
  }
  // A program of several steps: each step's time alone, on a few more calls, for its share of the whole.
  if (prog.plan.steps.size() > 1) {
    std::vector<std::vector<double>> alone(prog.plan.steps.size());
    for (int rep = 0; rep < 3; ++rep) {
      fresh_inputs();
      std::vector<double> each;
      double unused_us = 0;
      if (!launch_candidate(cand_run, /*timed=*/true, flush, e, unused_us, &each)) return false;
      for (std::size_t s = 0; s < each.size() && s < alone.size(); ++s) alone[s].push_back(each[s]);
    }
    for (std::size_t s = 0; s < alone.size(); ++s) step_us[s] += median_of(alone[s]);
    if (!stayed_in_bounds(cand_args.buffers, cand_run, prog.plan,
                          "workload " + std::to_string(w) + ", seen after each step's timed runs", e))
      return false;
  }
  e.timings.push_back(wt);
  return true;
}

namespace {

std::size_t property_bytes(const DeviceInfo& device, const std::string& name) {
  const auto it = device.properties.find(name);
  if (it == device.properties.end()) return 0;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || !(v > 0)) return 0;
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  const double scale = unit.rfind("TiB", 0) == 0   ? 1099511627776.0
                       : unit.rfind("GiB", 0) == 0 ? 1073741824.0
                       : unit.rfind("MiB", 0) == 0 ? 1048576.0
                       : unit.rfind("KiB", 0) == 0 ? 1024.0
                                                   : 1.0;
  return static_cast<std::size_t>(v * scale);
}

// "40G", "512M", "1073741824": binary suffixes.
std::size_t parse_memory_text(const char* text) {
  if (!text || !*text) return 0;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || !(v > 0)) return 0;
  switch (*end) {
    case 'T':
    case 't': return static_cast<std::size_t>(v * 1099511627776.0);
    case 'G':
    case 'g': return static_cast<std::size_t>(v * 1073741824.0);
    case 'M':
    case 'm': return static_cast<std::size_t>(v * 1048576.0);
    case 'K':
    case 'k': return static_cast<std::size_t>(v * 1024.0);
    default: return static_cast<std::size_t>(v);
  }
}

// A line of /proc/meminfo ("MemAvailable", "MemTotal") in bytes; 0 when it cannot be read.
std::size_t host_meminfo_bytes(const char* key) {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  const std::size_t key_length = std::strlen(key);
  std::size_t kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, key_length) == 0 && line[key_length] == ':' &&
        std::sscanf(line + key_length + 1, " %zu kB", &kib) == 1)
      break;
  }
  std::fclose(f);
  return kib * 1024;
}

// The host's memory that can be had now without swapping (MemAvailable), which is what a CPU run competes for.
std::size_t host_available_bytes() { return host_meminfo_bytes("MemAvailable"); }

std::string gb(std::size_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  else std::snprintf(buf, sizeof buf, "%zu bytes", bytes);
  return buf;
}

}  // namespace

ArenaSlot arena_slot(std::size_t bytes) {
  constexpr std::size_t kZone = 256;  // as a GPU allocation's red zones (gpu_device.cpp): they keep its alignment
  ArenaSlot slot;
  slot.front = kZone;
  slot.back = (std::max<std::size_t>(bytes, 1) + kZone - 1) / kZone * kZone - bytes + kZone;
  slot.reserved = slot.front + bytes + slot.back;
  return slot;
}

MemoryFootprint memory_footprint(const Spec& spec, const DeviceInfo& device, bool shared_reference) {
  MemoryFootprint f;
  std::size_t aligned_total = 0;  // of the workload with the most, for the arena
  for (const Bindings& w : spec.workloads) {
    std::size_t in = 0, out = 0, inout = 0, aligned = 0;
    for (const Param& p : spec.params) {
      if (!p.is_buffer()) continue;
      const std::size_t bytes =
          std::max<std::size_t>(1, static_cast<std::size_t>(spec.element_count(p, w))) * dtype_size(p.dtype);
      aligned += arena_slot(bytes).reserved;
      (p.role == Role::in ? in : p.role == Role::out ? out : inout) += bytes;
    }
    aligned_total = std::max(aligned_total, aligned);
    if (in + out + inout > f.problem_bytes) {
      f.problem_bytes = in + out + inout;
      f.input_bytes = in, f.output_bytes = out, f.inout_bytes = inout;
    }
  }
  const std::size_t B = f.problem_bytes;
  const bool gpu = device.kind != "cpu";
  if (spec.reference.pytorch) {
    // The arena holds the candidate's block and the reference's. On a GPU both are carved from it; on the
    // CPU a kernel's block is the CPU device's own (between guard pages), and the arena's second half, which
    // only a baseline's block uses, is given back after it. The bridge holds at most the module's weights
    // and the larger of get_inputs()' tensors and the module's outputs before their copies into the arena:
    // bounded by one copy of the problem.
    f.arena_bytes = 2 * aligned_total;
    f.worker_bytes = f.arena_bytes + B;
  } else {
    const std::string& ref_device = spec.reference.device.value_or("");
    const bool same_device = ref_device.empty() || ref_device == device.id || ref_device == device.kind;
    // The candidate's block, the reference's (or, where the reference runs on another device, a copy of its
    // outputs), and for each inout param a base its timed calls' inputs are rotated from.
    f.worker_bytes = B + (same_device ? B : f.output_bytes + f.inout_bytes) + f.inout_bytes;
  }
  if (gpu) {
    std::size_t l2 = property_bytes(device, "l2_cache_bytes");
    if (l2 == 0) l2 = property_bytes(device, "l2_cache");
    if (l2 == 0) l2 = 64u << 20;
    const std::size_t flush = std::max<std::size_t>(2 * l2, 8u << 20);
    // A worker's CUDA context and its L2 flush buffer; a PyTorch bridge's context (cuBLAS's and cuDNN's
    // workspaces included) and its timer's flush buffer.
    f.fixed_bytes = (512ull << 20) + flush + (spec.reference.pytorch ? (1ull << 30) + flush : 0);
    if (spec.reference.pytorch && shared_reference) {
      f.fixed_bytes -= (1ull << 30) + flush;
      f.shared_bytes = (1ull << 30) + flush;
    }
  }
  if (spec.reference.pytorch && shared_reference) {
    // The bridge's arena and tensors, once for all the workers; a worker maps the arena and, on a GPU, holds
    // its kernels' block itself (run_workload: not in memory another process allocated).
    f.shared_bytes += f.worker_bytes;
    f.worker_bytes = gpu ? aligned_total : 0;
  }
  return f;
}

std::size_t device_memory_bytes(const DeviceInfo& device, std::size_t told) {
  if (told > 0) return told;
  if (const std::size_t env = parse_memory_text(std::getenv("KE_DEVICE_MEMORY")); env > 0) return env;
  if (device.kind == "cpu") return host_available_bytes();
  if (const std::size_t exact = property_bytes(device, "memory_bytes"); exact > 0) return exact;
  return property_bytes(device, "memory");  // "79.2 GiB": within 0.05 GiB
}

std::size_t device_capacity_bytes(const DeviceInfo& device, std::size_t told) {
  if (device.kind == "cpu" && told == 0 && !parse_memory_text(std::getenv("KE_DEVICE_MEMORY")))
    return host_meminfo_bytes("MemTotal");
  return device_memory_bytes(device, told);
}

std::size_t usable_memory_bytes(std::size_t device_bytes) { return device_bytes - device_bytes / 20; }

void check_fits(const Spec& spec, const DeviceInfo& device, std::size_t device_bytes) {
  if (device_bytes == 0) return;
  const MemoryFootprint f = memory_footprint(spec, device);
  const std::size_t usable = usable_memory_bytes(device_bytes);
  if (f.per_worker() <= usable) return;
  std::ostringstream msg;
  msg << (spec.path.empty() ? spec.name : spec.path) << " does not fit " << device.id << ": one worker needs "
      << gb(f.per_worker()) << " (the problem's tensors are " << gb(f.problem_bytes) << "; " << gb(f.worker_bytes)
      << " for its blocks" << (spec.reference.pytorch ? " and PyTorch's reference" : "") << ", " << gb(f.fixed_bytes)
      << " fixed), and the device has " << gb(device_bytes) << " (" << gb(usable)
      << " usable). A smaller workload fits, or a device with more memory.";
  throw Error(ErrorCode::DeviceUnavailable, msg.str());
}

int jobs_that_fit(const Spec& spec, const DeviceInfo& device, std::size_t device_bytes, int jobs, std::string* why,
                  bool shared_reference) {
  if (device_bytes == 0 || jobs <= 1) return std::max(1, jobs);
  const MemoryFootprint f = memory_footprint(spec, device, shared_reference);
  const std::size_t usable = usable_memory_bytes(device_bytes);
  const std::size_t room = usable > f.shared_bytes ? usable - f.shared_bytes : 0;
  const std::size_t by_device = f.per_worker() > 0 ? room / f.per_worker() : static_cast<std::size_t>(jobs);
  // Workers past the first overlap only compilation with the device's work (verification and timing hold the
  // device alone): worth their memory while the run stays within three times the problem's bytes, or a
  // quarter of the device for a small problem. A PyTorch problem's block (half its arena) is its bytes with their
  // red zones, which would otherwise tip a problem of exactly three blocks over.
  const std::size_t budget = std::max(3 * std::max(f.problem_bytes, f.arena_bytes / 2), device_bytes / 4);
  const std::size_t by_budget = f.worker_bytes > 0 ? budget / f.worker_bytes : static_cast<std::size_t>(jobs);
  const int fit =
      static_cast<int>(std::max<std::size_t>(1, std::min({static_cast<std::size_t>(jobs), by_device, by_budget})));
  if (fit < jobs && why) {
    std::ostringstream msg;
    msg << "--jobs lowered from " << jobs << " to " << fit << " on " << device.id << ": each worker holds "
        << gb(f.per_worker()) << " for this problem (" << gb(f.problem_bytes) << " of tensors)";
    if (f.shared_bytes) msg << " beside the " << gb(f.shared_bytes) << " of the reference they share";
    msg << ", and " << jobs << " would hold " << gb(f.for_jobs(static_cast<std::size_t>(jobs))) << ", over ";
    if (by_device < by_budget) {
      msg << "the " << gb(usable) << " usable of the device's " << gb(device_bytes);
    } else {
      msg << "the run's budget of " << gb(budget) << " (3 x the problem's bytes, or a quarter of the device)";
    }
    *why = msg.str();
  }
  return fit;
}

bool shares_reference(const Spec& spec, const std::string& device_id, std::optional<bool> asked) {
  if (!spec.reference.pytorch) return false;
  const bool cpu = device_id == "cpu" || device_id.rfind("cpu:", 0) == 0;
  if (!cpu && device_id.rfind("cuda", 0) != 0) return false;  // a PyTorch reference runs beside these two only
  if (!asked) {
    if (const char* env = std::getenv("KE_SHARE_REFERENCE"); env && (*env == '0' || *env == '1')) asked = *env == '1';
  }
  return asked.value_or(!cpu);
}

LocalEvaluator::LocalEvaluator(Spec spec, std::shared_ptr<Device> device, EvalOptions options,
                               std::shared_ptr<Device> reference_device)
    : impl_(std::make_unique<Impl>()) {
  if (!device) throw Error(ErrorCode::BadUsage, "LocalEvaluator: no device");
  // Before anything is allocated or started: a problem that cannot fit says so, with the numbers, rather
  // than fail in an allocation (or in PyTorch's, with a traceback).
  check_fits(spec, device->info(), device_memory_bytes(device->info(), options.device_memory_bytes));
  if (!reference_device && spec.reference.pytorch) {
    reference_device = std::make_shared<pytorch::TorchReference>(spec, device);
  } else if (!reference_device) {
    const std::string& wanted = spec.reference.device.value_or("");
    reference_device =
        wanted.empty() || wanted == device->info().id || wanted == device->info().kind ? device : open_device(wanted);
  }
  impl_->spec = std::move(spec);
  impl_->device = std::move(device);
  impl_->reference_device = std::move(reference_device);
  impl_->problem = dynamic_cast<pytorch::TorchReference*>(impl_->reference_device.get());
  impl_->options = options;
}

LocalEvaluator::~LocalEvaluator() = default;

Evaluation LocalEvaluator::evaluate(const Candidate& candidate, std::uint64_t input_seed) {
  std::lock_guard lock(impl_->mutex);
  return impl_->evaluate(candidate, input_seed);
}

DeviceInfo LocalEvaluator::device_info() { return impl_->device->info(); }

void LocalEvaluator::prepare() {
  impl_->device->prepare();
  // What the candidates' language needs beyond the device (Triton's compile helper); its absence is the run's end.
  impl_->device->prepare_language(impl_->spec.language);
  // A program may call cuBLASLt or cuDNN: loaded now, since a worker confines itself after this.
  if (impl_->spec.library_steps && !is_cpu_language(impl_->spec.language)) impl_->device->prepare_library_steps();
  if (impl_->reference_device != impl_->device) impl_->reference_device->prepare();
  try {
    impl_->reference_kernel();
  } catch (const Error&) {
    // evaluate() compiles it again and reports the error where a caller expects it.
  }
}

void LocalEvaluator::on_reference(std::function<void(bool running)> hook) {
  std::lock_guard lock(impl_->mutex);
  impl_->reference_hook = std::move(hook);
}

void LocalEvaluator::on_phase(std::function<void(const std::string& phase)> hook) {
  std::lock_guard lock(impl_->mutex);
  impl_->phase_hook = std::move(hook);
}

}  // namespace kernelevolve
