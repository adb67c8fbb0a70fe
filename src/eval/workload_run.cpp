#include "eval/workload_run.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/threads.hpp"
#include "eval/buffer_ops.hpp"
#include "eval/buffers.hpp"
#include "eval/timing_lock.hpp"
#include "kernelevolve/error.hpp"
#include "pytorch/torch_reference.hpp"

namespace kernelevolve::eval {

namespace {

// Where the reference's own error was last measured (own_error_measured_in_): not yet, or a timed run.
constexpr int kNotYet = -1, kTimedRun = -2;

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

}  // namespace

WorkloadRun::WorkloadRun(const EvaluatorParts& parts, std::size_t workload, Device& device,
                         const program::CompiledProgram& prog, const Candidate& cand, std::uint64_t input_seed,
                         Evaluation& e)
    : parts_(parts),
      spec_(parts.spec),
      w_(workload),
      workload_(parts.spec.workloads[workload]),
      n_(parts.spec.params.size()),
      device_(device),
      prog_(prog),
      cand_(cand),
      input_seed_(input_seed),
      e_(e) {}

WorkloadRun::~WorkloadRun() = default;

bool WorkloadRun::run(std::vector<double>& step_us) { return allocate() && verify() && time() && time_steps(step_us); }

std::size_t WorkloadRun::count(std::size_t i) const {
  return static_cast<std::size_t>(spec_.element_count(spec_.params[i], workload_));
}

std::size_t WorkloadRun::bytes(std::size_t i) const { return count(i) * dtype_size(spec_.params[i].dtype); }

// An integer output (an index, a count) has one right value: the float tolerance's rtol would let an index
// of 10^4 or more be one off.
Tolerance WorkloadRun::tolerance_of(const Param& p) const {
  return is_float(p.dtype) ? spec_.tolerance : Tolerance{0.0, 0.0};
}

void WorkloadRun::record_worst(const Param& p, const Comparison& c, int trial) {
  if (!e_.worst || c.excess > e_.worst->excess) {
    e_.worst = Mismatch{p.name, w_, trial, c.worst_index, c.got, c.expected, c.excess};
  }
}

// The seed of a timed call's fresh draws; -1000 for the base its rotated inputs come from.
std::uint64_t WorkloadRun::call_seed(int call) const {
  return mix(mix(input_seed_, w_ ^ 0x71e0ull), static_cast<std::uint64_t>(call) + 1000);
}

void WorkloadRun::phase(const std::string& what) const {
  if (parts_.phase_hook) parts_.phase_hook(what);
}

bool WorkloadRun::fail(Status status, std::string message) {
  e_.status = status;
  e_.message = std::move(message);
  return false;
}

// Step 1: the candidate's buffers and the reference's, and the candidate's launch with its temporaries.
bool WorkloadRun::allocate() {
  bound_ = bind_plan(prog_.plan, spec_, workload_, cand_.tunables);  // PlanError: the caller's
  // The device's memory is asked only of a plan with temporaries (on the CPU it is a read of /proc/meminfo).
  if (bound_->total_temporary_bytes > 0) {
    // Of the device's whole memory, not of what is free at the moment: the same plan gets the same verdict on
    // every run (a quarter of the free memory moved between 5.74 and 5.93 GB from one run to the next).
    const std::size_t cap =
        temporaries_limit(device_capacity_bytes(device_.info(), parts_.options.device_memory_bytes));
    if (bound_->total_temporary_bytes > cap) {
      return fail(Status::invalid, "the plan's temporaries take " + std::to_string(bound_->total_temporary_bytes) +
                                       " bytes on workload " + std::to_string(w_) + ", more than the device allows (" +
                                       std::to_string(cap) + " bytes, a quarter of its whole memory)");
    }
  }
  const Language ref_language = spec_.reference.language.value_or(spec_.language);
  ref_dims_ = is_cpu_language(ref_language) ? LaunchDims{} : launch_dims(spec_, workload_, spec_.seed_tunables());
  pytorch::TorchReference* problem = parts_.problem;
  same_device_ = &parts_.reference_device == &device_ || (problem && problem->shares_candidate_memory());

  t_ = Profile::Clock::now();
  // Where the reference's buffers are the candidate device's own (a PyTorch reference's GPU arena), the
  // candidate's block is carved from the same arena: two blocks in all on the device, not three. Not from an
  // arena that another process allocated (a bridge the workers share): a kernel ran slower on memory opened
  // over CUDA IPC than on this process's own (the same cuBLAS kernel, the same bytes from DRAM: 7.66 ms
  // against 5.30, level-2 problem 56 on an H100), so a kernel's block is then its own allocation.
  const bool baseline = cand_.language == Language::pytorch;
  const bool in_arena = problem && problem->shares_candidate_memory() && (baseline || !problem->shared());
  cand_args_ = std::make_unique<ArgBlock>(in_arena ? parts_.reference_device : device_, spec_, workload_);
  ref_args_ = std::make_unique<ArgBlock>(parts_.reference_device, spec_, workload_);
  std::vector<std::size_t> param_bytes(n_, 0);
  for (std::size_t i = 0; i < n_; ++i)
    if (spec_.params[i].is_buffer()) param_bytes[i] = cand_args_->buffers[i]->bytes();
  // One launch for every call on this workload: its temporaries are poisoned once, here, and each call finds
  // what the last one left, as in a stored program's call in the user's process (callable.hpp). A program that
  // carries state from call to call answers trial 1's fresh inputs from trial 0's, and is caught.
  cand_run_ = std::make_unique<program::ProgramLaunch>(device_, prog_, *bound_, cand_args_->args.data(), param_bytes);
  t_ = parts_.profile.add("allocate", t_);
  return true;
}

// Launches the candidate's program; on failure fails the evaluation.
bool WorkloadRun::launch_candidate(bool timed, bool flush, double& time_us, std::vector<double>* each,
                                   double* host_us) {
  const bool check_threads = parts_.options.check_threads;
  const int threads_before = check_threads ? live_thread_count() : 0;
  const LaunchResult lr = cand_run_->run(timed, flush, each);
  if (!lr.ok) return fail(Status::crashed, "launch failed: " + lr.error);
  if (check_threads) {
    const int left = live_thread_count() - threads_before;
    if (left > 0) {
      return fail(Status::invalid, "the kernel left " + std::to_string(left) +
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
bool WorkloadRun::stayed_in_bounds(const std::string& when) {
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
    e_.worst.reset();  // a comparison that passed is no clue to this failure
    return fail(Status::incorrect, where + when + ")");
  };
  const auto& params = cand_args_->buffers;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!params[i]) continue;
    const Param& p = spec_.params[i];
    const char* role = p.role == Role::in ? "input" : p.role == Role::out ? "output" : "in-out param";
    if (!judge(*params[i], std::string(role) + " '" + p.name + "'")) return false;
  }
  const Plan& plan = prog_.plan;
  for (std::size_t t = 0; t < cand_run_->temporaries(); ++t) {
    const std::string name = t < plan.temporaries.size() && !plan.temporaries[t].name.empty()
                                 ? "'" + plan.temporaries[t].name + "'"
                                 : std::to_string(t);
    if (!judge(cand_run_->temporary(t), "temporary " + name)) return false;
  }
  return true;
}

bool WorkloadRun::keeps_problem_value(const Param& p) const {
  return !is_float(p.dtype) || spec_.input_distribution(p, workload_).problem;
}

// A PyTorch problem's float input or weight that the spec gives no distribution: drawn at the problem's own
// scale, uniform over [mean - std, mean + std] of what trial 0 had (get_inputs() and the module's weights;
// [-1, 1], the unit default, for a randn input), which the later trials' families spread from. At unit scale a
// network's outputs grow into the thousands, where two valid orders of an fp32 sum already differ by more than 1e-4
// relative (KernelBench level 3, problem 1). A constant tensor (a zero bias, a norm's unit weight) keeps the
// unit-scale default, so that a kernel that ignores it is still caught.
InputDist WorkloadRun::problem_scaled(const Param& p, InputDist dist) const {
  if (!parts_.problem || !is_float(p.dtype) || spec_.inputs.count(p.name)) return dist;
  const auto& ranges = parts_.problem->ranges();
  const auto it = ranges.find(p.name);
  if (it == ranges.end() || !(it->second.second > it->second.first)) return dist;
  InputDist scaled;  // uniform
  scaled.a = it->second.first;
  scaled.b = it->second.second;
  return scaled;
}

// Draws every input of `block` from its family for `trial` and poisons every output. A PyTorch problem
// draws from get_inputs() under the trial's seed (into the reference's buffers, then copied); after
// trial 0 only its integer inputs, and inputs the spec pins ("problem"), keep the problem's values, and
// its other float inputs take the adversarial families. When no input keeps them, the problem's own
// draw is skipped after trial 0: a round trip to PyTorch saved.
void WorkloadRun::draw_inputs(ArgBlock& block, int trial, std::uint64_t seed) {
  pytorch::TorchReference* problem = parts_.problem;
  if (problem && (trial == 0 || any_keeps_)) problem->draw(ref_args_->args.data(), seed);
  for (std::size_t i = 0; i < n_; ++i) {
    const Param& p = spec_.params[i];
    if (is_input(p)) {
      if (problem && (trial == 0 || keeps_problem_value(p))) {
        block.buffers[i]->copy_from(*ref_args_->buffers[i]);
      } else {
        const InputDist dist = trial_distribution(problem_scaled(p, spec_.input_distribution(p, workload_)), trial);
        fill_random(device_, *block.buffers[i], p.dtype, count(i), dist, mix(seed, i));
      }
    } else if (p.role == Role::out) {
      block.poison(i, p.dtype);
    }
  }
}

// The reference on the reference's block (which holds a copy of the candidate's inputs); a reference that cannot
// run is the spec's fault, never the candidate's.
void WorkloadRun::run_reference() {
  if (parts_.reference_hook) parts_.reference_hook(true);
  LaunchResult rr = parts_.reference_device.launch(parts_.reference, ref_args_->args.data(), ref_dims_);
  if (parts_.reference_hook) parts_.reference_hook(false);
  if (!rr.ok) throw Error(ErrorCode::BadSpec, spec_.path + ": reference: the reference failed to launch: " + rr.error);
}

void WorkloadRun::copy_inputs_to_reference() {
  for (std::size_t i = 0; i < n_; ++i) {
    const Param& p = spec_.params[i];
    if (is_input(p)) ref_args_->buffers[i]->copy_from(*cand_args_->buffers[i]);
    else if (p.role == Role::out) ref_args_->poison(i, p.dtype);
  }
}

// The reference's answer for output i, on the candidate's device: compared there.
const Buffer& WorkloadRun::expected_output(std::size_t i) {
  // Host memory on both sides (the CPU device's and a PyTorch reference's memfd) is compared in place.
  if (same_device_ || (ref_args_->buffers[i]->host_address() && cand_args_->buffers[i]->host_address())) {
    return *ref_args_->buffers[i];
  }
  if (!moved_[i]) moved_[i] = device_.allocate(std::max<std::size_t>(1, bytes(i)));
  moved_[i]->copy_from(*ref_args_->buffers[i]);
  return *moved_[i];
}

// Whether the candidate's outputs, which missed the float32 reference's, are within the tolerance of the same
// call in float64 (TorchReference::run_float64, into the reference's outputs): then they are right, however
// far the float32 reference's own rounding took it. A long float32 sum with cancellation can miss the exact
// answer by more than KernelBench's 1e-4 (level 2, problem 18), and a candidate that sums exactly then
// "fails". Only a near miss is tried (its worst element within 100 tolerances of the float32 answer): rounding
// moves an answer by a few tolerances, and a candidate that is plainly wrong (NaN, an error of thousands of
// tolerances) should not cost a float64 run, with float64 copies of the weights, on every failure.
// Against the float64 answer, each output's bound is the larger of the spec's tolerance and kReferenceErrorFactor
// times the reference's own error there (its largest against float64), issue 50: under the as-run policy the
// reference may run on TF32 (cuDNN's default), and a program as inaccurate as what the user runs is right, while
// one less accurate never is. Under strict the reference's error is fp32's, far inside the tolerance.
// The reference's own error, per output, is the largest measured in this workload's verification trials, each
// trial measured once. The checked timed runs reuse it: measuring means a copy of the reference's answer, on the
// host where the device has no room (4 GB for KernelBench level 2's 1), and on every checked run that cost minutes.
// `trial`: the verification trial, or -1 for a checked timed run.
bool WorkloadRun::rescued_by_float64(const Comparison& missed, int trial) {
  const double tolerance = spec_.tolerance.atol + spec_.tolerance.rtol * std::abs(missed.expected);
  if (!may_rescue_ || !std::isfinite(missed.got) || !(missed.excess <= 99 * tolerance)) return false;
  const bool measure_own_error = trial < 0 ? own_error_measured_in_ == kNotYet : own_error_measured_in_ != trial;
  if (measure_own_error) own_error_measured_in_ = trial < 0 ? kTimedRun : trial;
  if (measure_own_error) e_.resources["reference_error_measured"] += 1;
  // The reference's own answers, kept before float64 overwrites them: on the candidate's device where it has room,
  // else on the host (a baseline's device is the reference's arena, sized for its two blocks and no more: there a
  // baseline under as-run, TF32 like the reference, was refused for want of the copy, as "wrong output").
  struct Kept {
    std::unique_ptr<Buffer> on_device;
    std::vector<unsigned char> on_host;
  };
  std::vector<Kept> reference_answer(n_);
  for (std::size_t i = 0; i < n_ && measure_own_error; ++i) {
    if (!is_output(spec_.params[i]) || !is_float(spec_.params[i].dtype)) continue;
    Kept& kept = reference_answer[i];
    try {
      kept.on_device = device_.allocate(std::max<std::size_t>(1, bytes(i)));
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
  if (!parts_.problem->run_float64(ref_args_->args.data()).empty()) return false;
  for (std::size_t i = 0; i < n_; ++i) {
    const Param& p = spec_.params[i];
    if (!is_output(p)) continue;
    rescue_tolerance_[i] = tolerance_of(p);
    const Kept& kept = reference_answer[i];
    double own_error = NAN;  // the reference's largest error against the float64 answer
    if (kept.on_device) {
      own_error = compare(device_, *kept.on_device, expected_output(i), p.dtype, count(i), Tolerance{0.0, 0.0}).excess;
    } else if (!kept.on_host.empty()) {
      std::vector<unsigned char> exact(bytes(i));
      expected_output(i).download(exact.data(), bytes(i));
      const ArrayView answer{p.dtype, count(i), const_cast<unsigned char*>(kept.on_host.data())};
      const ArrayView truth{p.dtype, count(i), exact.data()};
      own_error = 0;
      for (std::size_t k = 0; k < count(i); ++k)
        own_error = std::max(own_error, std::abs(answer.get(k) - truth.get(k)));
    }
    if (std::isfinite(own_error))
      own_error_of_[i] = std::isnan(own_error_of_[i]) ? own_error : std::max(own_error_of_[i], own_error);
    if (std::isfinite(own_error_of_[i]))
      rescue_tolerance_[i].atol = std::max(rescue_tolerance_[i].atol, kReferenceErrorFactor * own_error_of_[i]);
    if (!compare(device_, *cand_args_->buffers[i], expected_output(i), p.dtype, count(i), rescue_tolerance_[i]).pass)
      return false;
  }
  e_.resources["float64_checks"] += 1;
  return true;
}

// Step 2: verify, each trial on fresh inputs, the candidate first and on its own copies.
// On a GPU, exclusive too: processes sharing one GPU are time-sliced by its driver, and verifications that
// overlap wait on one another's slices at every synchronization (eight workers on an H200, bench_triton:
// 13.0 candidates a second with exclusive verification, 11.3 with shared, ABBA). On a CPU they overlap,
// each on its own core.
bool WorkloadRun::verify() {
  previous_got_.assign(n_, 0);
  previous_expected_.assign(n_, 0);
  any_keeps_ = std::any_of(spec_.params.begin(), spec_.params.end(),
                           [&](const Param& p) { return is_input(p) && keeps_problem_value(p); });
  moved_.clear();
  moved_.resize(n_);
  // Not with an inout param, which the float32 reference has already overwritten, nor for a backward, whose
  // reference is autograd in float64 already (ke_bridge/server.py, Server.run_backward).
  may_rescue_ =
      parts_.problem && !spec_.reference.backward &&
      std::none_of(spec_.params.begin(), spec_.params.end(), [](const Param& p) { return p.role == Role::inout; });
  rescue_tolerance_.assign(n_, Tolerance{});
  own_error_of_.assign(n_, NAN);
  own_error_measured_in_ = kNotYet;

  const bool gpu = device_.info().kind != "cpu";
  phase("waiting for the device to verify w" + std::to_string(w_));
  TimingLock verifying(parts_.options.timing_lock, /*exclusive=*/gpu);
  t_ = parts_.profile.add("wait: verify lock", t_);
  phase("verifying w" + std::to_string(w_) + " (the kernel and the reference on checking inputs)");
  for (int trial = 0; trial < parts_.options.trials; ++trial)
    if (!verify_trial(trial)) return false;
  return true;
}

bool WorkloadRun::verify_trial(int trial) {
  Profile& profile = parts_.profile;
  const std::uint64_t trial_seed = mix(mix(input_seed_, w_), static_cast<std::uint64_t>(trial));
  draw_inputs(*cand_args_, trial, trial_seed);
  std::vector<std::uint64_t> input_digest(n_);
  for (std::size_t i = 0; i < n_; ++i) {
    if (spec_.params[i].role == Role::in) input_digest[i] = digest(device_, *cand_args_->buffers[i], bytes(i));
  }
  copy_inputs_to_reference();
  t_ = profile.add("verify: inputs", t_);
  double unused_us = 0;
  if (!launch_candidate(false, false, unused_us)) return false;
  t_ = profile.add("verify: candidate", t_);
  const std::string trial_name = "workload " + std::to_string(w_) + ", trial " + std::to_string(trial);
  if (!stayed_in_bounds(trial_name)) return false;
  t_ = profile.add("verify: bounds", t_);
  for (std::size_t i = 0; i < n_; ++i) {
    const Param& p = spec_.params[i];
    if (p.role == Role::in && digest(device_, *cand_args_->buffers[i], bytes(i)) != input_digest[i]) {
      return fail(Status::incorrect, "the kernel modified its input '" + p.name + "' (workload " + std::to_string(w_) +
                                         ", trial " + std::to_string(trial) + ")");
    }
  }
  t_ = profile.add("verify: inputs kept", t_);
  run_reference();
  t_ = profile.add("verify: reference", t_);
  for (std::size_t i = 0; i < n_; ++i) {
    const Param& p = spec_.params[i];
    if (!is_output(p)) continue;
    const Buffer& got = *cand_args_->buffers[i];
    Comparison c = compare(device_, got, expected_output(i), p.dtype, count(i), tolerance_of(p));
    // Rescued: its worst is then the one against the float64 answer, which judged it.
    if (!c.pass && rescued_by_float64(c, trial))
      c = compare(device_, got, expected_output(i), p.dtype, count(i), rescue_tolerance_[i]);
    const Buffer& expected = expected_output(i);
    record_worst(p, c, trial);
    if (!c.pass) return fail(Status::incorrect, "wrong output: " + describe_mismatch(*e_.worst));
    // An output that stays put while the reference's moves does not follow its inputs.
    const std::uint64_t got_digest = digest(device_, got, bytes(i));
    const std::uint64_t expected_digest = digest(device_, expected, bytes(i));
    if (trial > 0 && got_digest == previous_got_[i] && expected_digest != previous_expected_[i]) {
      return fail(Status::incorrect,
                  "output '" + p.name + "' does not change when the inputs do (workload " + std::to_string(w_) + ")");
    }
    previous_got_[i] = got_digest;
    previous_expected_[i] = expected_digest;
  }
  t_ = profile.add("verify: compare", t_);
  return true;
}

// The base the timed calls' inputs are rotated from (time(), below): trial 0's inputs, in the reference's block,
// and a copy of each inout param's, which the reference overwrites.
void WorkloadRun::draw_timing_base() {
  const std::uint64_t seed = call_seed(-1000);
  if (parts_.problem) {
    parts_.problem->draw(ref_args_->args.data(), seed);  // trial 0's: the problem's own get_inputs() and weights
  } else {
    for (std::size_t i = 0; i < n_; ++i) {
      const Param& p = spec_.params[i];
      if (!is_input(p)) continue;
      fill_random(parts_.reference_device, *ref_args_->buffers[i], p.dtype, count(i),
                  trial_distribution(spec_.input_distribution(p, workload_), 0), mix(seed, i));
    }
  }
  inout_base_.clear();
  inout_base_.resize(n_);
  for (std::size_t i = 0; i < n_; ++i) {
    if (spec_.params[i].role != Role::inout) continue;
    inout_base_[i] = device_.allocate(std::max<std::size_t>(1, bytes(i)));
    inout_base_[i]->copy_from(*ref_args_->buffers[i]);
  }
  base_shift_.assign(n_, 0);
  std::mt19937_64 shift_rng(mix(input_seed_, 0x5817ull + w_));
  first_shift_.resize(n_);
  for (auto& s0 : first_shift_) s0 = static_cast<std::size_t>(shift_rng());
  call_shift_.assign(n_, 0);
  rotated_.assign(n_, false);
  calls_ = 0;
}

// The next call's inputs, which no earlier call saw, and its outputs poisoned.
void WorkloadRun::fresh_inputs() {
  const int call = calls_++;
  for (std::size_t i = 0; i < n_; ++i) {
    const Param& p = spec_.params[i];
    rotated_[i] = false;
    if (p.role == Role::out) {
      cand_args_->poison(i, p.dtype);
      continue;
    }
    if (!is_input(p)) continue;
    const InputDist dist = spec_.input_distribution(p, workload_);
    const std::size_t c = count(i);
    const Buffer& base = inout_base_[i] ? *inout_base_[i] : *ref_args_->buffers[i];
    // A PyTorch problem's inputs are never drawn afresh here (a draw would not be the problem's): its
    // integer inputs (indices, offsets) keep the problem's own values, its floats are rotated.
    if (!parts_.problem && (bytes(i) <= kDrawnAfreshBytes || c < 2)) {
      fill_random(device_, *cand_args_->buffers[i], p.dtype, c, trial_distribution(dist, 0), mix(call_seed(call), i));
    } else if (c < 2 || dist.sorted || (parts_.problem && !is_float(p.dtype))) {
      cand_args_->buffers[i]->copy_from(base);
    } else {
      // Consecutive calls, consecutive shifts in 1 .. c-1: distinct for fewer than c calls.
      const std::size_t shift = 1 + (first_shift_[i] + static_cast<std::size_t>(call)) % (c - 1);
      const std::size_t from = inout_base_[i] ? 0 : base_shift_[i];
      const std::size_t relative = (shift + c - from % c) % c;
      cand_args_->buffers[i]->copy_rotated(base, bytes(i), relative * dtype_size(p.dtype));
      call_shift_[i] = shift;
      rotated_[i] = true;
    }
  }
}

// A checked call's inputs, copied into the reference's block: its rotated inputs are now the base rotated
// by this call's shifts.
void WorkloadRun::copy_checked_inputs_to_reference() {
  copy_inputs_to_reference();
  for (std::size_t i = 0; i < n_; ++i) {
    if (rotated_[i] && !inout_base_[i]) base_shift_[i] = call_shift_[i];
  }
}

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
bool WorkloadRun::time() {
  Profile& profile = parts_.profile;
  const EvalOptions& options = parts_.options;
  draw_timing_base();
  // GPUs flush L2 between launches; on a CPU the inputs, just written, are warm in cache, as a
  // producer's output would be.
  flush_ = options.flush_cache && parts_.evaluator_device.info().kind != "cpu";
  t_ = profile.add("time: setup", t_);
  phase("waiting for the device to time w" + std::to_string(w_));
  TimingLock timing_lock(options.timing_lock);  // warm-up included: it loads the device too
  t_ = profile.add("wait: timing lock", t_);
  phase("timing w" + std::to_string(w_) + " (warm-up and timed launches)");
  for (int i = 0; i < options.warmup; ++i) {
    fresh_inputs();
    double unused_us = 0;
    if (!launch_candidate(false, false, unused_us)) return false;
  }
  t_ = profile.add("time: warm-up", t_);
  std::mt19937_64 check_rng(mix(input_seed_, 0xc4ec));
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
    t_ = profile.add("time: check", t_);
    fresh_inputs();
    if (checked) copy_checked_inputs_to_reference();
    t_ = profile.add("time: fresh inputs", t_);
    double time_us = 0, host_us = 0;
    if (!launch_candidate(/*timed=*/true, flush_, time_us, nullptr, &host_us)) return false;
    t_ = profile.add("time: launch", t_);
    times.push_back(time_us);
    if (host_us > 0) host_times.push_back(host_us);
    total_us += time_us;
    if (!checked) continue;
    // Damage from the unchecked launches before this one is found here too, or at the latest after the loop.
    if (!stayed_in_bounds("workload " + std::to_string(w_) + ", seen after timed rep " + std::to_string(rep)))
      return false;
    run_reference();
    for (std::size_t i = 0; i < n_; ++i) {
      const Param& p = spec_.params[i];
      if (!is_output(p)) continue;
      const Comparison c =
          compare(device_, *cand_args_->buffers[i], expected_output(i), p.dtype, count(i), tolerance_of(p));
      if (!c.pass && !rescued_by_float64(c, /*trial=*/-1)) {
        record_worst(p, c, -1);
        return fail(Status::incorrect, "a timed run (rep " + std::to_string(rep) +
                                           ") gave a wrong output: " + describe_mismatch(*e_.worst));
      }
    }
  }
  if (!stayed_in_bounds("workload " + std::to_string(w_) + ", seen after the timed runs")) return false;
  t_ = profile.add("time: check", t_);
  WorkloadTiming wt;
  wt.samples = static_cast<int>(times.size());
  wt.median_us = median_of(times);
  wt.min_us = *std::min_element(times.begin(), times.end());
  wt.max_us = *std::max_element(times.begin(), times.end());
  std::vector<double> deviations;
  for (double x : times) deviations.push_back(std::abs(x - wt.median_us));
  wt.mad_us = median_of(deviations);
  // In nanoseconds, as resources are integers: the host's cost of one call, reported beside the GPU time.
  if (!host_times.empty())
    e_.resources["host_ns.w" + std::to_string(w_)] = std::llround(median_of(host_times) * 1000.0);
  if (options.check_roofline) {
    const double floor_us = roofline_floor_us(spec_, workload_, cand_.tunables, device_.info());
    if (floor_us > 0 && wt.median_us < floor_us) {
      std::ostringstream msg;
      msg << "time " << wt.median_us << " us is under the roofline floor " << floor_us << " us (workload " << w_
          << "): impossible, so not a record";
      return fail(Status::invalid, msg.str());
    }
  }
  e_.timings.push_back(wt);
  return true;
}

// Step 4, for a program of several steps: each step's time alone, on a few more calls, for its share of the whole.
bool WorkloadRun::time_steps(std::vector<double>& step_us) {
  if (prog_.plan.steps.size() <= 1) return true;
  std::vector<std::vector<double>> alone(prog_.plan.steps.size());
  for (int rep = 0; rep < 3; ++rep) {
    fresh_inputs();
    std::vector<double> each;
    double unused_us = 0;
    if (!launch_candidate(/*timed=*/true, flush_, unused_us, &each)) return false;
    for (std::size_t s = 0; s < each.size() && s < alone.size(); ++s) alone[s].push_back(each[s]);
  }
  for (std::size_t s = 0; s < alone.size(); ++s) step_us[s] += median_of(alone[s]);
  return stayed_in_bounds("workload " + std::to_string(w_) + ", seen after each step's timed runs");
}

}  // namespace kernelevolve::eval
