// The host side of worker isolation: starts kernelevolve-worker processes with posix_spawn, hands each
// a candidate over a Unix socket, and turns a crash, an exit or a hang into a status on the node.
#include <algorithm>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <simdjson.h>
#include <sstream>
#include <thread>

#include "core/fd_passing.hpp"
#include "core/shipped_file.hpp"
#include "core/subprocess.hpp"
#include "eval/wire.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/json.hpp"
#include "kernelevolve/program.hpp"
#include "pytorch/shared_bridge.hpp"

extern char** environ;

namespace kernelevolve {

namespace {

std::string find_worker(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("KE_WORKER"); env && *env) return env;
  const ShippedFile found =
      find_shipped_file("kernelevolve-worker", {".", "..", "../libexec/kernelevolve", "../bin"}, X_OK);
  if (!found.path.empty()) return found.path;
  std::string looked;
  for (const auto& p : found.looked) looked += "\n  " + p;
  throw Error(ErrorCode::Internal,
              "cannot find the kernelevolve-worker executable; set KE_WORKER to its path. Looked in:" + looked);
}

// What a worker is told of its work (worker_main.cpp's Init): the members of the init message, which a
// profile request repeats with its candidate.
std::string init_fields(const Spec& spec, const std::string& device_id, const EvalOptions& options,
                        SandboxMode sandbox) {
  return "\"path\": " + json_quote(spec.path.empty() ? spec.name : spec.path) +
         ", \"device\": " + json_quote(device_id) + ", \"options\": " + wire::to_json(options) +
         ", \"sandbox\": " + json_quote(to_string(sandbox)) + ", \"spec\": " + to_json(spec);
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return std::string("killed by signal ") + std::to_string(sig) + " (SIG" + (name ? name : "?") + ": " +
           strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

// Says once per process, on stderr, what a worker's sandbox lacks on this machine (or that it is off),
// so that a confinement that could not be had is never silently missing.
void report_sandbox_once(simdjson::dom::element report) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::vector<std::string> lines;
  std::string_view mode;
  if (report["mode"].get_string().get(mode) != simdjson::SUCCESS) return;
  if (mode == "off") {
    lines.push_back("the sandbox is off (asked for): candidates run with all of this user's rights");
  } else {
    simdjson::dom::array missing;
    if (report["missing"].get_array().get(missing) == simdjson::SUCCESS) {
      for (auto item : missing) {
        std::string_view text;
        if (item.get_string().get(text) == simdjson::SUCCESS) {
          lines.push_back("sandbox " + std::string(mode) + ": not on this machine: " + std::string(text) +
                          "; the workers run without it");
        }
      }
    }
  }
  std::lock_guard lock(mutex);
  for (const auto& line : lines) {
    if (said.insert(line).second) std::fprintf(stderr, "kernelevolve: %s\n", line.c_str());
  }
}

struct Worker {
  pid_t pid = -1;
  int fd = -1;
  bool alive() const { return pid > 0; }
};

}  // namespace

struct WorkerEvaluator::Impl {
  Spec spec;
  std::string device_id;
  WorkerOptions options;
  std::string worker_path;
  std::string init_message;

  mutable std::mutex mutex;
  std::condition_variable free_cv;
  std::vector<Worker> workers;
  std::vector<bool> busy;
  DeviceInfo info;
  bool have_info = false;
  double timeout = 0;  // seconds; 0 until derived
  std::atomic<int> started{0};
  // A PyTorch problem's reference, shared by the workers (shares_reference): started when the first worker
  // has opened the device and found that the problem fits it.
  bool share = false;
  std::mutex bridge_mutex;
  std::unique_ptr<pytorch::SharedBridge> bridge;

  // Gives a worker that said which device it opened its socket to the shared bridge and the arena.
  void hand_bridge(Worker& w, simdjson::dom::element said) {
    int socket_fd = -1, memfd = -1;
    pytorch::SharedArena arena;
    {
      std::lock_guard lock(bridge_mutex);
      if (!bridge) {
        const DeviceInfo device = wire::device_info_from_json(simdjson::to_string(said["device"].value()));
        bridge = std::make_unique<pytorch::SharedBridge>(spec, device);
      }
      socket_fd = bridge->connect();
      memfd = bridge->memfd();
      arena = bridge->arena();
    }
    std::vector<int> fds{socket_fd};
    if (memfd >= 0) fds.push_back(memfd);
    const bool sent = wire::write_frame(w.fd, "{\"type\": \"bridge\", \"arena\": " + pytorch::to_json(arena) + "}") &&
                      send_fds(w.fd, fds);
    ::close(socket_fd);
    if (!sent)
      throw Error(ErrorCode::Internal, "the worker " + worker_path + " ended before it had the shared reference");
  }

  // Reaps a worker: gives it a moment to finish dying (so its real exit status is seen), then kills it.
  static std::string reap(Worker& w, bool kill_now) {
    int status = 0;
    pid_t r = 0;
    if (!kill_now) {
      for (int i = 0; i < 40 && (r = ::waitpid(w.pid, &status, WNOHANG)) == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    if (r == 0 || kill_now) {
      ::kill(w.pid, SIGKILL);
      while ((r = ::waitpid(w.pid, &status, 0)) < 0 && errno == EINTR) {
      }
    }
    if (w.fd >= 0) ::close(w.fd);
    w = Worker{};
    return describe_exit(status);
  }

  // Starts a worker and waits for it to say it is ready. Throws Error on failure.
  void start(Worker& w) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      throw Error(ErrorCode::Internal, std::string("socketpair: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], wire::kWorkerFd);
    posix_spawn_file_actions_addclosefrom_np(&fa, wire::kWorkerFd + 1);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
      sigaddset(&defaults, sig);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char* argv[] = {const_cast<char*>(worker_path.c_str()), nullptr};
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, worker_path.c_str(), &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(sv[1]);
    if (rc != 0) {
      ::close(sv[0]);
      throw Error(ErrorCode::Internal, "cannot start " + worker_path + ": " + std::strerror(rc));
    }
    w.pid = pid;
    w.fd = sv[0];
    started += 1;
    std::string reply;
    simdjson::dom::parser parser;
    simdjson::dom::element msg;
    auto next_frame = [&] {
      if (wire::read_frame(w.fd, reply, static_cast<int>(options.first_timeout_s * 1000)) != wire::ReadStatus::ok) {
        const std::string how = reap(w, false);
        throw Error(ErrorCode::Internal, "the worker " + worker_path + " failed to start: " + how);
      }
      if (parser.parse(reply).get(msg) != simdjson::SUCCESS) {
        reap(w, true);
        throw Error(ErrorCode::Internal, "the worker answered garbage at start");
      }
    };
    if (!wire::write_frame(w.fd, init_message)) {
      const std::string how = reap(w, false);
      throw Error(ErrorCode::Internal, "the worker " + worker_path + " failed to start: " + how);
    }
    next_frame();
    if (msg["type"].get_string().value() == "device") {
      try {
        hand_bridge(w, msg);
      } catch (...) {
        reap(w, true);
        throw;
      }
      next_frame();
    }
    const std::string_view type = msg["type"].get_string().value();
    if (type == "error") {
      const auto code = static_cast<ErrorCode>(msg["code"].get_int64().value());
      const std::string message(msg["message"].get_string().value());
      reap(w, true);
      throw Error(code, message);
    }
    if (simdjson::dom::element sandbox; msg["sandbox"].get(sandbox) == simdjson::SUCCESS) report_sandbox_once(sandbox);
    std::lock_guard lock(mutex);
    if (!have_info) {
      info = wire::device_info_from_json(simdjson::to_string(msg["device"].value()));
      have_info = true;
    }
  }

  std::size_t acquire() {
    std::unique_lock lock(mutex);
    for (;;) {
      for (std::size_t i = 0; i < busy.size(); ++i) {
        if (!busy[i]) {
          busy[i] = true;
          return i;
        }
      }
      free_cv.wait(lock);
    }
  }

  void release(std::size_t i) {
    {
      std::lock_guard lock(mutex);
      busy[i] = false;
    }
    free_cv.notify_one();
  }

  std::string spec_origin() const { return spec.path.empty() ? spec.name : spec.path; }

  double current_timeout() const {
    std::lock_guard lock(mutex);
    if (options.timeout_s > 0) return options.timeout_s;
    return timeout > 0 ? timeout : options.first_timeout_s;
  }

  Evaluation evaluate_on(Worker& w, const Candidate& candidate, std::uint64_t seed) {
    if (!w.alive()) start(w);
    // A baseline's evaluation includes torch.compile's first compile (Inductor, Triton), which takes far
    // longer than any kernel's evaluation: it gets the first evaluation's limit.
    const double limit_s = candidate.language == Language::pytorch
                               ? std::max(current_timeout(), options.first_timeout_s)
                               : current_timeout();
    const std::string request =
        "{\"type\": \"eval\", \"seed\": " + std::to_string(seed) + ", \"candidate\": " + wire::to_json(candidate) + "}";
    const auto t0 = std::chrono::steady_clock::now();
    std::string reply;
    wire::ReadStatus rs = wire::ReadStatus::closed;
    // The worker says when the reference runs: a crash or a hang inside it is the reference's, not the
    // candidate's, and no node may carry it.
    bool in_reference = false;
    // The phase the worker last announced ("compiling", "timing w1 ..."): where a limit or a crash hit.
    std::string phase;
    if (wire::write_frame(w.fd, request)) {
      for (;;) {
        const double left_ms =
            limit_s * 1000 - std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        rs = wire::read_frame(w.fd, reply, static_cast<int>(std::max(1.0, left_ms)));
        if (rs != wire::ReadStatus::ok) break;
        if (reply.rfind("{\"type\": \"reference\"", 0) == 0) {
          in_reference = reply.find("\"running\": true") != std::string::npos;
        } else if (reply.rfind("{\"type\": \"phase\"", 0) == 0) {
          simdjson::dom::parser frame_parser;
          std::string_view p;
          if (frame_parser.parse(reply)["phase"].get_string().get(p) == simdjson::SUCCESS) phase = p;
        } else {
          break;
        }
      }
    }
    const std::string where = phase.empty() ? "" : " while " + phase;
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Evaluation e;
    {
      std::lock_guard lock(mutex);
      e.device = FitnessEvaluator::device_class(info);
    }
    if (rs != wire::ReadStatus::ok && in_reference) {
      const std::string how = rs == wire::ReadStatus::timeout
                                  ? "exceeded the time limit of " + std::to_string(limit_s) + " s"
                                  : reap(w, false);
      if (w.alive()) reap(w, true);
      throw Error(ErrorCode::Internal,
                  spec_origin() + ": the reference failed: its worker " + how +
                      " while running the trusted reference (not a candidate), so no result can be trusted");
    }
    if (rs == wire::ReadStatus::timeout) {
      reap(w, true);
      e.status = Status::timeout;
      std::ostringstream msg;
      msg << "exceeded the time limit of " << limit_s << " s" << where << "; the worker was killed and replaced";
      e.message = msg.str();
      return e;
    }
    if (rs != wire::ReadStatus::ok) {
      const std::string how = reap(w, false);
      e.status = Status::crashed;
      e.message = "the worker " + how + (where.empty() ? " while evaluating the candidate" : where);
      if (options.sandbox != SandboxMode::off && how.find("SIGSYS") != std::string::npos) {
        // The kernel blocked the sandbox's report of a denied call, and the kernel killed the worker.
        e.status = Status::invalid;
        e.message = "the sandbox stopped the kernel at a system call it denies (the worker " + how + ")";
      }
      return e;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element msg;
    if (parser.parse(reply).get(msg) != simdjson::SUCCESS) {
      reap(w, true);
      e.status = Status::crashed;
      e.message = "the worker's reply was corrupted";
      return e;
    }
    const std::string_view type = msg["type"].get_string().value();
    if (type == "error") {
      std::string message(msg["message"].get_string().value());
      // A shared reference that died says why on its standard error, which only the host reads.
      if (std::lock_guard lock(bridge_mutex); bridge && message.find("shared PyTorch reference") != std::string::npos) {
        if (const std::string tail = bridge->error_tail(); !tail.empty()) message += "\n" + tail;
      }
      throw Error(static_cast<ErrorCode>(msg["code"].get_int64().value()), message);
    }
    const std::string device = e.device;
    e = wire::evaluation_from_json(simdjson::to_string(msg["evaluation"].value()));
    if (e.device.empty()) e.device = device;
    if (msg["restart"].get_bool().value()) reap(w, false);
    // The kernels' limit comes from the first kernel's evaluation (the seed's, or a problem's first kernel),
    // never from a baseline's: a problem without a seed measures eager and torch.compile before its first
    // kernel, and a limit taken from PyTorch's evaluation would say nothing of a kernel's.
    if (e.status == Status::ok && candidate.language != Language::pytorch) {
      std::lock_guard lock(mutex);
      if (timeout == 0) timeout = std::max(options.min_timeout_s, options.timeout_factor * wall_s);
    }
    return e;
  }
};

WorkerEvaluator::WorkerEvaluator(Spec spec, std::string device_id, WorkerOptions options)
    : impl_(std::make_unique<Impl>()) {
  spec.validate();
  if (options.jobs < 1) throw Error(ErrorCode::BadUsage, "WorkerEvaluator: jobs must be at least 1");
  impl_->worker_path = find_worker(options.worker_path);
  impl_->share = shares_reference(spec, device_id, options.share_reference);
  impl_->init_message = "{\"type\": \"init\", " + init_fields(spec, device_id, options.eval, options.sandbox) +
                        ", \"share_reference\": " + (impl_->share ? "true" : "false") + "}";
  impl_->spec = std::move(spec);
  impl_->device_id = std::move(device_id);
  impl_->options = options;
  impl_->workers.resize(static_cast<std::size_t>(options.jobs));
  impl_->busy.assign(static_cast<std::size_t>(options.jobs), false);
  // Start one worker now, so a missing device or a broken worker is reported at once. It refuses a problem
  // that cannot fit the device (LocalEvaluator checks before it allocates).
  impl_->start(impl_->workers[0]);
  // As many workers as the device's memory holds, each with its own blocks and reference, or beside the
  // reference they share.
  std::string why;
  const int fit =
      jobs_that_fit(impl_->spec, impl_->info, device_memory_bytes(impl_->info, options.eval.device_memory_bytes),
                    options.jobs, &why, impl_->share);
  if (fit < options.jobs) {
    std::fprintf(stderr, "kernelevolve: %s\n", why.c_str());
    impl_->workers.resize(static_cast<std::size_t>(fit));
    impl_->busy.assign(static_cast<std::size_t>(fit), false);
    impl_->options.jobs = fit;
  }
}

WorkerEvaluator::~WorkerEvaluator() {
  for (Worker& w : impl_->workers) {
    if (w.alive()) {
      ::close(w.fd);  // the worker reads EOF and exits
      w.fd = -1;
      Impl::reap(w, false);
    }
  }
  impl_->bridge.reset();  // after the workers, which map its arena
}

Evaluation WorkerEvaluator::evaluate(const Candidate& candidate, std::uint64_t input_seed) {
  const std::size_t slot = impl_->acquire();
  struct Release {
    Impl* impl;
    std::size_t slot;
    ~Release() { impl->release(slot); }
  } release{impl_.get(), slot};
  return impl_->evaluate_on(impl_->workers[slot], candidate, input_seed);
}

DeviceInfo WorkerEvaluator::device_info() {
  std::lock_guard lock(impl_->mutex);
  return impl_->info;
}

namespace {

// A program's counters from its profiled launches: the k-th launch is the k-th kernel step's (the worker's
// first call runs the steps in plan order, and ncu profiled the first launches of their names), stored as
// "stepN.hw_..." with N the step's place among all steps, library steps included, as the evaluation's
// "stepN." resources are. The error, or empty.
std::string step_counters(const KernelCountersResult& profiled, const std::vector<std::string>& kernels,
                          const std::vector<std::size_t>& kernel_steps, std::map<std::string, std::int64_t>& out) {
  if (!profiled.ok()) return profiled.error;
  if (profiled.kernels.size() < kernel_steps.size()) {
    return "Nsight Compute profiled " + std::to_string(profiled.kernels.size()) + " launches of the program's " +
           std::to_string(kernel_steps.size()) + " kernel steps";
  }
  const KernelCounters* longest = nullptr;
  for (std::size_t k = 0; k < kernel_steps.size(); ++k) {
    const KernelCounters& launch = profiled.kernels[k];
    const std::string step = "step" + std::to_string(kernel_steps[k] + 1);
    if (launch.kernel != kernels[k]) {
      return "Nsight Compute's launch " + std::to_string(k + 1) + " was of kernel " + launch.kernel + ", where " +
             step + " launches " + kernels[k] + ": the launches did not run in the plan's order";
    }
    for (const auto& [name, value] : launch.counters) out[step + "." + name] = value;
    const auto duration = [](const KernelCounters& c) {
      const auto it = c.counters.find("hw_duration_ns");
      return it == c.counters.end() ? std::int64_t{-1} : it->second;
    };
    if (!longest || duration(launch) > duration(*longest)) longest = &launch;
  }
  // The top-level "hw_..." counters are the longest kernel's: what reads one kernel's counters (the
  // evolver's prompt, `kernelevolve show`, a node compared with a one-kernel one) then reads those of the
  // kernel that takes most of the program's time.
  for (const auto& [name, value] : longest->counters) out[name] = value;
  return "";
}

}  // namespace

CounterResult WorkerEvaluator::hardware_counters(const Candidate& candidate, std::uint64_t input_seed) {
  const auto start = std::chrono::steady_clock::now();
  CounterResult r;
  auto done = [&](std::string error) {
    r.error = std::move(error);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  if (impl_->options.nsight_compute.empty())
    return done("no Nsight Compute (ncu) was given to collect hardware counters with");
  if (impl_->device_id.rfind("cpu", 0) == 0) return done("hardware counters are collected on GPU devices only");
  // The kernels to profile: the spec's entry, or a program's kernel steps (a library step's kernels are
  // the vendor's, not the candidate's). A plan that cannot be read (its evaluation was then invalid, so it
  // is rarely asked here) falls back to the entry, as a source without a plan is profiled.
  std::vector<std::string> kernels{impl_->spec.entry};
  std::vector<std::size_t> kernel_steps;  // a program of several steps: each kernel step's index, in plan order
  try {
    const Plan plan = plan_of(impl_->spec, candidate.source, candidate.language);
    kernels.clear();
    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
      if (plan.steps[s].is_library()) continue;
      kernels.push_back(plan.steps[s].kernel);
      if (plan.steps.size() > 1) kernel_steps.push_back(s);
    }
    if (kernels.empty()) return done("a program of library steps only has no kernel of its own to profile");
  } catch (const PlanError&) {
    kernels = {impl_->spec.entry};
  }
  char dir[] = "/tmp/kernelevolve-counters-XXXXXX";
  if (!::mkdtemp(dir)) return done(std::string("cannot make a directory for the profile: ") + std::strerror(errno));
  const std::string request_path = std::string(dir) + "/request.json", log_path = std::string(dir) + "/ncu.csv";
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{dir};
  // One evaluation, as small as the evaluator allows: the profiler reads the first launch of each kernel (a
  // program's first call launches each step once, in plan order), and the rest only has to run through. The
  // timing lock stays: the profiled launches are in the timing phase, which holds it, so the profiler's
  // replays (at clocks it locks) never run while another worker times.
  EvalOptions once = impl_->options.eval;
  once.trials = 1;
  once.warmup = 0;
  once.min_reps = once.max_reps = 1;
  once.input_sets = 1;
  const std::string request = "{" + init_fields(impl_->spec, impl_->device_id, once, impl_->options.sandbox) +
                              ", \"candidate\": " + wire::to_json(candidate) +
                              ", \"seed\": " + std::to_string(input_seed) + "}";
  if (std::ofstream out(request_path); !(out << request))
    return done("cannot write the profile's request to " + request_path);
  std::string command = shell_quote(impl_->options.nsight_compute);
  for (const auto& a : nsight_compute_arguments(kernels, static_cast<int>(kernels.size()), log_path)) {
    command += " " + shell_quote(a);
  }
  command += " " + shell_quote(impl_->worker_path) + " --profile " + shell_quote(request_path);
  // The profiler replays the launch once per pass; a minute on top of the evaluation's own limit is ample.
  const double limit = 60 + 2 * impl_->current_timeout();
  const ProcessResult p = run_shell(command, "", limit, 1u << 20);
  std::string csv;
  if (std::ifstream in(log_path); in) csv.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::string why;
  if (kernel_steps.empty()) {
    CounterResult parsed = counters_from_nsight_csv(csv);
    if (parsed.ok()) {
      r.counters = std::move(parsed.counters);
      return done("");
    }
    why = parsed.error;
  } else {
    why = step_counters(kernel_counters_from_nsight_csv(csv), kernels, kernel_steps, r.counters);
    if (why.empty()) return done("");
    r.counters.clear();
  }
  if (!p.started) {
    why += " (" + p.start_error + ")";
  } else if (p.timed_out) {
    why += " (it ran past " + std::to_string(static_cast<int>(limit)) + " s)";
  } else if (p.exit_code != 0) {
    std::string tail = p.err.size() > 400 ? p.err.substr(p.err.size() - 400) : p.err;
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
    why += " (ncu exited with " + std::to_string(p.exit_code) + (tail.empty() ? "" : ": " + tail) + ")";
  }
  return done(why);
}

double WorkerEvaluator::timeout_s() const { return impl_->current_timeout(); }

int WorkerEvaluator::workers_started() const { return impl_->started.load(); }

int WorkerEvaluator::jobs() const { return static_cast<int>(impl_->workers.size()); }

}  // namespace kernelevolve
