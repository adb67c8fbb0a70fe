// kernelevolve-worker: evaluates candidates for a host process, so that whatever a candidate does
// (crash, exit, hang, print) happens here and not in the host. Speaks length-prefixed JSON frames on
// fd 3; its standard streams go to /dev/null, so a kernel's output cannot reach the protocol.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <simdjson.h>
#include <string>

#include "core/fd_passing.hpp"
#include "core/text_file.hpp"
#include "core/threads.hpp"
#include "eval/wire.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/json.hpp"
#include "pytorch/torch_reference.hpp"
#include "sandbox/worker_sandbox.hpp"
#include "triton/triton_compiler.hpp"

namespace ke = kernelevolve;
namespace wire = kernelevolve::wire;

namespace {

using ke::live_thread_count;

void reply_error(int code, const std::string& message) {
  wire::write_frame(wire::kWorkerFd, "{\"type\": \"error\", \"code\": " + std::to_string(code) +
                                         ", \"message\": " + ke::json_quote(message) + "}");
}

// What the init message (and a profile request, which is one with a candidate) says: the problem, the
// device, the evaluation's options, and the sandbox mode as a worker on that device takes it.
struct Init {
  ke::Spec spec;
  std::string device_id;
  ke::EvalOptions options;
  ke::SandboxMode sandbox_mode = ke::SandboxMode::strict;
  bool share_reference = false;  // the host's shared PyTorch reference, not one of our own
};

Init read_init(simdjson::dom::element init) {
  Init out;
  out.device_id = std::string(init["device"].get_string().value());
  out.spec = ke::parse_spec(simdjson::to_string(init["spec"].value()), std::string(init["path"].get_string().value()));
  out.options = wire::eval_options_from_json(simdjson::to_string(init["options"].value()));
  if (std::string_view m; init["sandbox"].get_string().get(m) == simdjson::SUCCESS) {
    out.sandbox_mode = ke::parse_sandbox_mode(std::string(m)).value_or(ke::SandboxMode::strict);
  }
  out.sandbox_mode = ke::sandbox::worker_mode(out.sandbox_mode, out.device_id);
  if (bool share = false; init["share_reference"].get(share) == simdjson::SUCCESS) out.share_reference = share;
  return out;
}

// `kernelevolve-worker --profile REQUEST`: evaluates one candidate once under Nsight Compute, which
// started this process with profiling off (--profile-from-start off): it is turned on only while the
// first workload is timed. Its first timed call is the candidate's: one launch of its kernel, or of a
// program's steps in plan order, and ncu reads those first launches of their names, as many as the program
// has kernel steps (WorkerEvaluator::hardware_counters). What else runs in the phase comes after them and
// is not read: the reference, which may carry a kernel's name, and a program's steps timed alone.
// The request is the init message with the candidate and the input seed. GPU devices only: what runs here
// is the candidate's device code (NVRTC's or Triton's binary, loaded by the driver), so the worker takes
// the GPU worker's setup but not its seccomp filter, which would deny the profiler's own library, loaded
// into this process, the calls it makes at each launch. Exit 0: evaluated ok; 3: not ok; 2: bad request
// or no profiler control in the driver.
int profile_once(const char* request_path) {
  try {
    simdjson::dom::parser parser;
    std::string text, problem;
    simdjson::dom::element request;
    if (!ke::read_text(request_path, text, problem) || parser.parse(text).get(request) != simdjson::SUCCESS) {
      std::fprintf(stderr, "kernelevolve-worker: cannot read the request %s%s\n", request_path,
                   problem.empty() ? "" : (": " + problem).c_str());
      return 2;
    }
    const Init init = read_init(request);
    if (init.device_id.rfind("cuda", 0) != 0) {
      std::fprintf(stderr, "kernelevolve-worker: hardware counters are collected on CUDA devices only, not %s\n",
                   init.device_id.c_str());
      return 2;
    }
    const ke::Candidate candidate = wire::candidate_from_json(simdjson::to_string(request["candidate"].value()));
    const auto seed = static_cast<std::uint64_t>(request["seed"].get_uint64().value());
    (void)ke::sandbox::prepare_worker(init.sandbox_mode, init.device_id, init.options.timing_lock);
    ke::triton::set_sandbox_mode(init.sandbox_mode);
    auto device = ke::open_device(init.device_id);
    // The driver the device loaded: its profiler switches, for the profiler this process runs under.
    using Switch = int (*)();
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    const auto start = driver ? reinterpret_cast<Switch>(dlsym(driver, "cuProfilerStart")) : nullptr;
    const auto stop = driver ? reinterpret_cast<Switch>(dlsym(driver, "cuProfilerStop")) : nullptr;
    if (!start || !stop) {
      std::fprintf(stderr, "kernelevolve-worker: the CUDA driver has no cuProfilerStart/cuProfilerStop\n");
      return 2;
    }
    ke::LocalEvaluator evaluator(init.spec, device, init.options);
    bool on = false;
    int switch_error = 0;
    evaluator.on_phase([&](const std::string& phase) {
      const bool want = phase.rfind("timing w0 ", 0) == 0;
      if (want == on) return;
      if (const int rc = want ? start() : stop(); rc != 0 && !switch_error) switch_error = rc;
      on = want;
    });
    const ke::Evaluation e = evaluator.evaluate(candidate, seed);
    if (on) stop();
    if (switch_error)
      std::fprintf(stderr, "kernelevolve-worker: cuProfilerStart/Stop failed with CUDA error %d\n", switch_error);
    if (e.status != ke::Status::ok) {
      std::fprintf(stderr, "kernelevolve-worker: the candidate was %s: %s\n", ke::to_string(e.status),
                   e.message.c_str());
      return 3;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernelevolve-worker: %s\n", e.what());
    return 2;
  }
}

// The reference this worker shares with the others of its device: it says which device it opened (once the
// problem is known to fit, so that a refusal comes before the host allocates anything), and the host
// answers with the arena and, over the socket, the descriptors: its socket to the bridge, and on the CPU
// the arena's memfd.
std::shared_ptr<ke::Device> shared_reference(const ke::Spec& spec, const std::shared_ptr<ke::Device>& device,
                                             const ke::EvalOptions& options) {
  ke::check_fits(spec, device->info(), ke::device_memory_bytes(device->info(), options.device_memory_bytes));
  wire::write_frame(wire::kWorkerFd, "{\"type\": \"device\", \"device\": " + wire::to_json(device->info()) + "}");
  std::string frame;
  simdjson::dom::parser parser;
  simdjson::dom::element msg;
  if (wire::read_frame(wire::kWorkerFd, frame, -1) != wire::ReadStatus::ok ||
      parser.parse(frame).get(msg) != simdjson::SUCCESS) {
    throw ke::Error(ke::ErrorCode::Internal, "no shared reference came from the host");
  }
  ke::pytorch::SharedArena arena = ke::pytorch::shared_arena_from_json(simdjson::to_string(msg["arena"].value()));
  const std::vector<int> fds = ke::receive_fds(wire::kWorkerFd, 60000);
  if (fds.empty()) throw ke::Error(ke::ErrorCode::Internal, "the shared reference's descriptors did not come");
  arena.socket_fd = fds[0];
  arena.memfd = fds.size() > 1 ? fds[1] : -1;
  return std::make_shared<ke::pytorch::TorchReference>(spec, device, arena);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string_view(argv[1]) == "--profile") {
    ::signal(SIGPIPE, SIG_IGN);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    return profile_once(argv[2]);
  }
  if (fcntl(wire::kWorkerFd, F_GETFD) < 0) {
    const char msg[] = "kernelevolve-worker: started by the library, not by hand (fd 3 is its channel)\n";
    (void)!write(2, msg, sizeof msg - 1);
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // a crashing candidate should not leave core files behind
  if (const char* log = getenv("KE_WORKER_LOG"); !log || !*log) {
    const int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (null > 2) close(null);
  }

  std::string frame;
  if (wire::read_frame(wire::kWorkerFd, frame, -1) != wire::ReadStatus::ok) return 1;
  std::unique_ptr<ke::LocalEvaluator> evaluator;
  std::shared_ptr<ke::Device> device;
  simdjson::dom::parser parser;
  ke::SandboxMode sandbox_mode = ke::SandboxMode::strict;
  try {
    simdjson::dom::element message;
    if (parser.parse(frame).get(message) != simdjson::SUCCESS) throw ke::Error(ke::ErrorCode::Internal, "bad init");
    Init init = read_init(message);
    const std::string& device_id = init.device_id;
    ke::Spec& spec = init.spec;
    ke::EvalOptions& options = init.options;
    sandbox_mode = init.sandbox_mode;
    // The sandbox (src/sandbox/worker_sandbox.hpp): namespaces now, while single-threaded; the rest
    // once the device is open and the evaluator built, before the first candidate.
    ke::SandboxReport sandbox = ke::sandbox::prepare_worker(sandbox_mode, device_id, options.timing_lock);
    device = ke::open_device(device_id);
    options.check_threads = true;  // this process starts no threads of its own
    std::shared_ptr<ke::Device> reference;
    if (init.share_reference) reference = shared_reference(spec, device, options);
    evaluator = std::make_unique<ke::LocalEvaluator>(spec, device, options, reference);
    // The host learns when the reference runs, so a crash or hang there is blamed on the reference.
    evaluator->on_reference([](bool running) {
      wire::write_frame(wire::kWorkerFd, running ? "{\"type\": \"reference\", \"running\": true}"
                                                 : "{\"type\": \"reference\", \"running\": false}");
    });
    // And where each evaluation is, so that a time limit or a crash can say whether it hit compile or run.
    evaluator->on_phase([](const std::string& phase) {
      wire::write_frame(wire::kWorkerFd, "{\"type\": \"phase\", \"phase\": " + ke::json_quote(phase) + "}");
    });
    // Triton's compile helper confines its forks the way this worker confines itself.
    ke::triton::set_sandbox_mode(sandbox_mode);
    evaluator->prepare();  // compiles now, while NVRTC may still write its cache, and starts Triton's helper
    const std::string device_json = wire::to_json(evaluator->device_info());
    sandbox = ke::sandbox::confine_worker(sandbox_mode, device_id, options.timing_lock, std::move(sandbox));
    wire::write_frame(wire::kWorkerFd,
                      "{\"type\": \"ready\", \"device\": " + device_json + ", \"sandbox\": " + sandbox.to_json() + "}");
  } catch (const ke::Error& e) {
    reply_error(static_cast<int>(e.code()), e.what());
    return 1;
  } catch (const std::exception& e) {
    reply_error(static_cast<int>(ke::ErrorCode::Internal), e.what());
    return 1;
  }

  const int baseline_threads = live_thread_count();
  for (;;) {
    if (wire::read_frame(wire::kWorkerFd, frame, -1) != wire::ReadStatus::ok) return 0;  // host gone: done
    try {
      simdjson::dom::element msg;
      if (parser.parse(frame).get(msg) != simdjson::SUCCESS) throw ke::Error(ke::ErrorCode::Internal, "bad request");
      const ke::Candidate candidate = wire::candidate_from_json(simdjson::to_string(msg["candidate"].value()));
      const auto seed = static_cast<std::uint64_t>(msg["seed"].get_uint64().value());
      ke::sandbox::begin_candidate();
      ke::Evaluation e = evaluator->evaluate(candidate, seed);
      // Threads a kernel left behind may still write anywhere, and a poisoned device context stays
      // poisoned: either way this process is no longer clean.
      bool restart = live_thread_count() > baseline_threads || !device->healthy();
      if (restart && e.status == ke::Status::ok) {
        e.status = ke::Status::invalid;
        e.timings.clear();
        e.message = "the kernel left threads running after it returned";
      }
      // A denied system call makes the node invalid, naming the call; the worker is replaced after it.
      restart = ke::sandbox::judge_candidate(sandbox_mode, e) || restart;
      wire::write_frame(wire::kWorkerFd,
                        "{\"type\": \"result\", \"restart\": " + std::string(restart ? "true" : "false") +
                            ", \"evaluation\": " + wire::to_json(e) + "}");
      if (restart) return 0;
    } catch (const ke::Error& e) {
      reply_error(static_cast<int>(e.code()), e.what());
    } catch (const std::exception& e) {
      reply_error(static_cast<int>(ke::ErrorCode::Internal), e.what());
    }
  }
}
