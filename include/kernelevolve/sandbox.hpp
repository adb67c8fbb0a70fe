// The sandbox: how a process that runs model-written code (the evaluation worker, and any helper such as
// a Triton compile helper) confines itself once its setup is done, so that a raw system call from a
// kernel reaches nothing of the host: no file written or created, no socket, no new program or process,
// no signal to another process, no mount, no change of identity.
//
// A confined process calls, in order:
//   1. enter_sandbox_namespaces(mode, ...) while it is still single-threaded (before it opens a device
//      or loads a library that starts threads): a user namespace that owns nothing, no network, and a
//      read-only view of the file system. Optional: where the kernel refuses, the report says so.
//   2. its setup (open the device, load the compiler, create its sockets, create its lock files);
//   3. apply_sandbox(mode, allowances): no new privileges, rlimits, and a seccomp-bpf allow-list
//      built with libseccomp. A denied call fails with EPERM and is recorded (take_sandbox_denials()),
//      so the caller can name it; a process that blocks the report (SIGSYS) is killed by the kernel.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kernelevolve {

// strict: an allow-list of system calls (everything else denied), namespaces where the kernel offers
//         them, rlimits, no new privileges. The default.
// basic:  a deny-list (the dangerous calls above, everything else allowed), rlimits, no new privileges,
//         no namespaces: for a device whose driver needs a call the allow-list lacks.
// off:    nothing; must be asked for, and runs say so.
enum class SandboxMode { strict, basic, off };
const char* to_string(SandboxMode mode);
std::optional<SandboxMode> parse_sandbox_mode(const std::string& text);

// What the confined process still needs after its setup. The defaults fit a CPU worker.
struct SandboxAllowances {
  // A GPU driver (CUDA, HIP) lives in the process: ioctl on any descriptor but the standard streams,
  // and open for reading and writing (never creating, truncating or appending) — the driver opens its
  // device files again after setup, and seccomp cannot see a path. No namespaces by default either.
  bool gpu_driver = false;
  // Files the process opens again after setup to flock them (the evaluator's timing lock). An open of
  // exactly one of these paths, which the filter would deny because it asks to create or write, is
  // turned into a read-only open (enough for flock). Create them before apply_sandbox.
  std::vector<std::string> lock_files;
  std::uint64_t address_space_bytes = 0;  // RLIMIT_AS; 0: unlimited (GPU drivers reserve huge ranges)
  // RLIMIT_FSIZE 0: no byte written to any regular file, even one opened before. Off only where the
  // process writes a log to a file it was handed (the worker under KE_WORKER_LOG).
  bool limit_file_size = true;
  std::uint64_t open_files = 256;  // RLIMIT_NOFILE
  // RLIMIT_CPU over the process's life, a backstop to the host's wall-clock timeout (a worker whose
  // host died cannot spin for ever). 0: unlimited. A long-lived process should retire itself before
  // it reaches it (see sandbox_cpu_seconds_used()).
  std::uint64_t cpu_seconds = 3600;
};

// What a process has (or a machine offers): the confinements in force, and what was asked for but
// could not be had, with the reason. `missing` is never silent: callers print it.
struct SandboxReport {
  SandboxMode mode = SandboxMode::off;
  std::vector<std::string> active;
  std::vector<std::string> missing;
  // "strict: seccomp allow-list, no new privileges, ...; missing: user namespaces (unshare: EPERM)"
  std::string summary() const;
  std::string to_json() const;
};

// Step 1 (see above). Call while single-threaded; for `off` and `basic` it does nothing. Besides the
// namespaces, /home, /root and $HOME are hidden behind an empty read-only file system, except one that
// holds a path of `keep_visible` (a lock file, say). Returns what it entered and what it could not.
SandboxReport enter_sandbox_namespaces(SandboxMode mode, const std::vector<std::string>& keep_visible = {});

// Step 3. Confines the calling process (all its threads) for the rest of its life; `so_far` is the
// report of step 1, extended and returned. Never throws: what cannot be had is in `missing`.
SandboxReport apply_sandbox(SandboxMode mode, const SandboxAllowances& allowances, SandboxReport so_far = {});

// The system calls denied since the last call, one line each ("openat(\"/tmp/x\", O_WRONLY|O_CREAT)"),
// at most a handful; the record is cleared. Empty in a process that is not confined.
std::vector<std::string> take_sandbox_denials();

// CPU seconds this process has used (user + system), for retiring before RLIMIT_CPU.
double sandbox_cpu_seconds_used();

// Which confinements this machine offers to a process started now, probed in a short-lived child
// process (a few milliseconds); the result is computed once per process.
const SandboxReport& sandbox_support();

}  // namespace kernelevolve
