// How the evaluation worker uses the sandbox (kernelevolve/sandbox.hpp): what it needs after its setup
// on each kind of device, and how a denied system call becomes the candidate's status.
#pragma once
#include <string>

#include "kernelevolve/fitness.hpp"
#include "kernelevolve/sandbox.hpp"

namespace kernelevolve::sandbox {

// The mode a worker on `device_id` uses when `requested` is asked for. One place to change if a
// device's driver turns out to need more than the strict allow-list gives it: GPU workers get strict
// with the GPU driver's allowances; set kGpuMode to basic to give them the deny-list instead.
SandboxMode worker_mode(SandboxMode requested, const std::string& device_id);

// Before the device is opened, while the worker is single-threaded: creates the timing lock file (it
// cannot be created later), and on a CPU worker in strict mode enters the namespaces.
SandboxReport prepare_worker(SandboxMode mode, const std::string& device_id, const std::string& timing_lock);

// After the setup: confines the worker for the rest of its life.
SandboxReport confine_worker(SandboxMode mode, const std::string& device_id, const std::string& timing_lock,
                             SandboxReport so_far);

// Before a candidate's evaluation: forgets denials recorded since the last one.
void begin_candidate();

// After a candidate's evaluation: a candidate that made a denied call is `invalid`, with the calls
// named, whatever its outputs were (the calls had no effect, but the kernel is not one to keep). On a GPU
// worker, denied writes into NVRTC's cache are the compiler's, not the candidate's, and are not held
// against it.
// Returns true when the worker should be replaced: after a denial (the kernel may have changed the
// process's signal state), or when it has used half of its CPU-time limit.
bool judge_candidate(SandboxMode mode, Evaluation& evaluation);

}  // namespace kernelevolve::sandbox
