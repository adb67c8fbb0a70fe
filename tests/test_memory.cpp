// What a run holds on its device (issue 27, "a run fits the device"): the footprint is the documented
// formula; a problem that cannot fit is refused before anything runs (exit 3 from the command line, naming
// the bytes it needs and the bytes the device has); --jobs is lowered to what memory allows, said once; and
// timing, which now rotates each call's inputs from the reference's block instead of a third one, still
// gives every call inputs that no earlier call saw. On the CPU, with the memory the evaluator is told.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>
#include <kernelevolve/json.hpp>
#include <kernelevolve/spec.hpp>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pytorch/python.hpp"
#include "pytorch/torch_reference.hpp"
#include "support/cli_runner.hpp"
#include "support/have_torch.hpp"

namespace fs = std::filesystem;
namespace ke = kernelevolve;

namespace {

constexpr std::size_t MiB = 1ull << 20;

// y = 2x + s over N floats, z += x over N, idx (sorted ints, N of them) read into y[0] only through a
// term that is zero: an inout param and a sorted input, whose timed copies are made differently.
std::string spec_json(const std::string& kernel, std::int64_t n) {
  const std::string reference = R"(#include <stdint.h>
void f(const float* x, const int32_t* idx, float* y, float* z, int64_t N) {
  for (int64_t i = 0; i < N; ++i) { y[i] = 2 * x[i] + 0 * (float)(idx[i] - idx[i]); z[i] += x[i]; }
})";
  std::string json = R"({"name": "memory", "language": "c", "entry": "f",
    "params": [{"name": "x", "dtype": "f32", "shape": ["N"], "role": "in"},
               {"name": "idx", "dtype": "i32", "shape": ["N"], "role": "in"},
               {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"},
               {"name": "z", "dtype": "f32", "shape": ["N"], "role": "inout"},
               {"name": "N", "dtype": "i64", "role": "size"}],
    "workloads": [{"N": )" +
                     std::to_string(n) + R"(}, {"N": 1000}],
    "inputs": {"idx": {"low": 0, "high": 1000, "sorted": true}},
    "reference": {"source": )" +
                     ke::json_quote(reference) + R"(}, "seed": {"source": )" + ke::json_quote(kernel) + "}}";
  return json;
}

ke::Spec spec_with(const std::string& kernel, std::int64_t n = 1 << 15) {
  return ke::parse_spec(spec_json(kernel, n), "memory.json");
}

ke::DeviceInfo cpu_info() {
  ke::DeviceInfo d;
  d.id = d.kind = "cpu";
  return d;
}

// The seed: the reference's own computation.
const char* const kHonest = R"(#include <stdint.h>
void f(const float* x, const int32_t* idx, float* y, float* z, int64_t N) {
  for (int64_t i = 0; i < N; ++i) { y[i] = 2 * x[i] + 0 * (float)(idx[i] - idx[i]); z[i] += x[i]; }
})";

// The same, remembering a digest of every input it was called with (x, z and idx, or idx alone), and
// crashing the worker when one comes back: a kernel that could answer a repeated call from memory.
std::string remembering(bool idx_only) {
  return std::string(R"(#include <stdint.h>
#include <string.h>
#define SEEN 8192
static uint64_t seen[SEEN];
static int count;
static uint64_t digest(const void* p, int64_t bytes, uint64_t h) {
  const unsigned char* b = (const unsigned char*)p;
  for (int64_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
void f(const float* x, const int32_t* idx, float* y, float* z, int64_t N) {
  uint64_t h = digest(idx, N * 4, 1469598103934665603ull);
)") + (idx_only ? "" : "  h = digest(x, N * 4, h);\n  h = digest(z, N * 4, h);\n") +
         R"(  h ^= (uint64_t)N;
  for (int i = 0; i < count; ++i) {
    if (seen[i] == h) __builtin_trap();  /* inputs seen before: an answer could come from memory */
  }
  if (count < SEEN) seen[count++] = h;
  for (int64_t i = 0; i < N; ++i) { y[i] = 2 * x[i] + 0 * (float)(idx[i] - idx[i]); z[i] += x[i]; }
})";
}

using Cli = ke_test::CliOutcome;
Cli cli(const std::string& args, const std::string& env = "") { return ke_test::run_cli_in(env, args); }

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("the footprint is the documented formula") {
  const ke::Spec spec = spec_with(kHonest, 1 << 15);
  const std::size_t n = 1 << 15;
  const ke::MemoryFootprint f = ke::memory_footprint(spec, cpu_info());
  // The largest workload's buffers, one copy each: x, idx and y, z.
  CHECK(f.problem_bytes == 4 * n * 4);
  CHECK(f.input_bytes == 2 * n * 4);
  CHECK(f.output_bytes == n * 4);
  CHECK(f.inout_bytes == n * 4);
  CHECK(f.arena_bytes == 0);  // a kernel reference: no PyTorch arena
  // The candidate's block, the reference's, and a base for the inout param: no third block.
  CHECK(f.worker_bytes == 2 * f.problem_bytes + f.inout_bytes);
  CHECK(f.fixed_bytes == 0);  // the CPU: no context, no flush buffer
  CHECK(f.worker_bytes <= 3 * f.problem_bytes);

  SUBCASE("a reference on another device: the candidate's device holds a copy of its outputs") {
    ke::Spec other = spec;
    other.reference.device = "cuda";
    const ke::MemoryFootprint g = ke::memory_footprint(other, cpu_info());
    CHECK(g.worker_bytes == g.problem_bytes + g.output_bytes + 2 * g.inout_bytes);
  }
  SUBCASE("a PyTorch reference on a GPU: an arena of two blocks, the bridge bounded by one copy, fixed costs") {
    ke::Spec torch = spec;
    torch.reference.pytorch = true;
    ke::DeviceInfo gpu;
    gpu.id = "cuda:0";
    gpu.kind = "cuda";
    gpu.properties["l2_cache_bytes"] = std::to_string(50 * MiB);
    const ke::MemoryFootprint g = ke::memory_footprint(torch, gpu);
    // Each buffer between red zones of 256 bytes, as the arena carves it: n floats are already on 256 bytes.
    CHECK(g.arena_bytes == 2 * 4 * (256 + n * 4 + 256));
    CHECK(g.worker_bytes == g.arena_bytes + g.problem_bytes);
    CHECK(g.worker_bytes <= 3 * g.problem_bytes + 2 * 4 * 512);  // three copies, and the zones of two blocks
    CHECK(g.fixed_bytes == 512 * MiB + 100 * MiB + 1024 * MiB + 100 * MiB);
    // Odd sizes: the zone after a buffer takes its rounding up to 256 bytes too.
    ke::Spec odd = spec_with(kHonest, 1001);
    odd.reference.pytorch = true;
    CHECK(ke::memory_footprint(odd, gpu).arena_bytes == 2 * 4 * (256 + (1001 * 4 + 255) / 256 * 256 + 256));
    const ke::ArenaSlot slot = ke::arena_slot(1001 * 4);
    CHECK(slot.front == 256);
    CHECK(slot.back == 256 + (1001 * 4 + 255) / 256 * 256 - 1001 * 4);
    CHECK(slot.reserved == slot.front + 1001 * 4 + slot.back);
  }
}

TEST_CASE("the device's memory: told, from the environment, or the device's own figure") {
  ke::DeviceInfo gpu;
  gpu.id = "cuda:0";
  gpu.kind = "cuda";
  gpu.properties["memory"] = "79.2 GiB";  // as the CUDA device formats it
  CHECK(ke::device_memory_bytes(gpu, 123) == 123);
  ::unsetenv("KE_DEVICE_MEMORY");
  CHECK(ke::device_memory_bytes(gpu) == static_cast<std::size_t>(79.2 * 1073741824.0));
  gpu.properties["memory_bytes"] = "85045870592";
  CHECK(ke::device_memory_bytes(gpu) == 85045870592ull);
  ::setenv("KE_DEVICE_MEMORY", "40G", 1);
  CHECK(ke::device_memory_bytes(gpu) == 40ull << 30);
  ::setenv("KE_DEVICE_MEMORY", "1048576", 1);
  CHECK(ke::device_memory_bytes(gpu) == MiB);
  ::unsetenv("KE_DEVICE_MEMORY");
  CHECK(ke::device_memory_bytes(cpu_info()) > 0);  // the host's available memory
  CHECK(ke::usable_memory_bytes(2000) == 1900);
}

// Issue 49: a plan's temporaries were limited to a quarter of the memory free at that moment, so the same plan's
// verdict changed between runs. The capacity it is limited by now is the host's whole memory, whatever is free.
TEST_CASE("the capacity a plan's temporaries are limited by does not move with the memory free") {
  ::unsetenv("KE_DEVICE_MEMORY");
  const ke::DeviceInfo cpu = cpu_info();
  const std::size_t capacity = ke::device_capacity_bytes(cpu);
  const std::size_t available = ke::device_memory_bytes(cpu);
  REQUIRE(capacity > 0);
  CHECK(capacity >= available);
  std::vector<char> held(std::size_t{256} << 20);
  for (std::size_t i = 0; i < held.size(); i += 4096) held[i] = 1;  // resident, so MemAvailable drops
  CHECK(ke::device_capacity_bytes(cpu) == capacity);
  CHECK(ke::device_capacity_bytes(cpu, 123) == 123);
  ::setenv("KE_DEVICE_MEMORY", "40G", 1);
  CHECK(ke::device_capacity_bytes(cpu) == 40ull << 30);
  ::unsetenv("KE_DEVICE_MEMORY");
  CHECK(held[4096] == 1);
}

TEST_CASE("jobs are lowered to what memory allows, and say why") {
  const ke::Spec spec = spec_with(kHonest, 1 << 18);  // 4 MiB of tensors; a worker holds 9 MiB
  const ke::MemoryFootprint f = ke::memory_footprint(spec, cpu_info());
  REQUIRE(f.per_worker() == 9 * MiB);
  std::string why;
  // Plenty: a small problem keeps its jobs (under a quarter of the device).
  CHECK(ke::jobs_that_fit(spec, cpu_info(), 1ull << 30, 3, &why) == 3);
  CHECK(why.empty());
  // The device holds two (19 of 20 MiB usable; 18 for two), the budget of 3 x 4 MiB one.
  CHECK(ke::jobs_that_fit(spec, cpu_info(), 20 * MiB, 3, &why) == 1);
  CHECK(why.find("--jobs lowered from 3 to 1") != std::string::npos);
  CHECK(why.find("budget") != std::string::npos);
  // A device of 40 MiB: the budget (a quarter of it is 10 MiB, 3 x the problem 12 MiB) holds one worker.
  why.clear();
  CHECK(ke::jobs_that_fit(spec, cpu_info(), 40 * MiB, 3, &why) == 1);
  // 160 MiB: a quarter is 40 MiB, four workers' worth; three asked, three kept.
  why.clear();
  CHECK(ke::jobs_that_fit(spec, cpu_info(), 160 * MiB, 3, &why) == 3);
  CHECK(why.empty());
  // On a GPU each worker also holds a context and a flush buffer (640 MiB here): limited by the device rather
  // than the budget, and the message names the device's usable bytes.
  ke::DeviceInfo gpu;
  gpu.id = "cuda:0";
  gpu.kind = "cuda";
  why.clear();
  CHECK(ke::jobs_that_fit(spec, gpu, 2048 * MiB, 3, &why) == 2);
  CHECK_MESSAGE(why.find("usable of the device's") != std::string::npos, why);
  // Unknown memory: nothing is lowered.
  CHECK(ke::jobs_that_fit(spec, cpu_info(), 0, 3) == 3);
}

TEST_CASE("a problem that cannot fit is refused before anything runs, with the numbers") {
  const ke::Spec spec = spec_with(kHonest, 1 << 18);
  ke::EvalOptions options;
  options.device_memory_bytes = 8 * MiB;  // a worker needs 9 MiB
  try {
    ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), options);
    FAIL("a problem needing 9 MiB was let onto a device of 8 MiB");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::DeviceUnavailable);
    const std::string message = e.what();
    CHECK(message.find("does not fit cpu") != std::string::npos);
    CHECK_MESSAGE(message.find("needs 9.4 MB") != std::string::npos, message);           // 9 MiB
    CHECK_MESSAGE(message.find("the device has 8.4 MB") != std::string::npos, message);  // 8 MiB
  }
  // Through a worker, the same refusal reaches the host as the same error.
  ke::WorkerOptions wo;
  wo.eval = options;
  try {
    ke::WorkerEvaluator evaluator(spec, "cpu", wo);
    FAIL("the worker took a problem that cannot fit");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::DeviceUnavailable);
    CHECK(std::string(e.what()).find("does not fit") != std::string::npos);
  }
}

TEST_CASE("a worker evaluator keeps the jobs memory allows") {
  const ke::Spec spec = spec_with(kHonest, 1 << 18);
  ke::WorkerOptions wo;
  wo.jobs = 3;
  wo.eval.device_memory_bytes = 20 * MiB;
  ke::WorkerEvaluator evaluator(spec, "cpu", wo);
  CHECK(evaluator.jobs() == 1);
  const ke::Evaluation e = evaluator.evaluate({kHonest, ke::Language::c, {}}, 7);
  CHECK_MESSAGE(e.status == ke::Status::ok, e.message);
  wo.eval.device_memory_bytes = 0;
  ke::WorkerEvaluator roomy(spec, "cpu", wo);
  CHECK(roomy.jobs() == 3);
}

TEST_CASE("every call sees inputs no earlier call saw, with timing rotated from the reference's block") {
  const ke::Spec spec = spec_with(kHonest, 1 << 15);  // 128 KB inputs: rotated, not drawn afresh
  ke::WorkerOptions wo;
  wo.timeout_s = 120;
  wo.eval.min_reps = 60;  // many timed calls, checked and not, so the reference's block is copied into often
  ke::WorkerEvaluator evaluator(spec, "cpu", wo);
  // A kernel that crashes when any input set comes back: verification, warm-up and every timed call each
  // give it one it never saw, over several evaluations (its memory outlives them in the worker).
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const ke::Evaluation e = evaluator.evaluate({remembering(false), ke::Language::c, {}}, seed);
    REQUIRE_MESSAGE(e.status == ke::Status::ok, e.message);
    CHECK(e.timings.size() == 2);
    CHECK(e.timings[0].samples >= 60);
  }
  // The test has teeth: a sorted input is copied as it is into every timed call (a rotation would unsort
  // it), so a kernel that remembers that input alone sees it again, and crashes.
  const ke::Evaluation caught = evaluator.evaluate({remembering(true), ke::Language::c, {}}, 9);
  CHECK(caught.status == ke::Status::crashed);
}

TEST_CASE("the command line: a problem that cannot fit exits 3 naming the bytes; lowered jobs said once") {
  const fs::path dir = fs::temp_directory_path() / ("ke_memory_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string spec_path = (dir / "memory.json").string();
  {
    std::ofstream out(spec_path);
    out << spec_json(kHonest, 1 << 18);
  }
  const std::string common = "run " + spec_path + " --no-db --max-evals 2 --device cpu";
  const Cli refused = cli(common, "KE_DEVICE_MEMORY=8M");
  CHECK(refused.code == 3);
  CHECK_MESSAGE(refused.err.find("does not fit cpu") != std::string::npos, refused.err);
  CHECK(refused.err.find("the device has") != std::string::npos);
  CHECK(refused.err.find("Traceback") == std::string::npos);

  const Cli lowered = cli(common + " --jobs 3", "KE_DEVICE_MEMORY=20M");
  CHECK_MESSAGE(lowered.code == 0, lowered.err);
  CHECK_MESSAGE(count_of(lowered.err, "--jobs lowered from 3 to 1") == 1, lowered.err);
  fs::remove_all(dir);
}

namespace {

std::shared_ptr<ke::Device> cuda_or_null(std::string& why) {
  try {
    return ke::open_device("cuda:0");
  } catch (const std::exception& e) {
    why = e.what();
    return nullptr;
  }
}

// The CUDA form of spec_with: one element per thread; thread 0 of block 0 remembers a digest of every
// input set in __device__ globals (or of idx alone) and traps when one comes back. Run on a lent GPU.
std::string cuda_spec_json(bool remember, bool idx_only) {
  std::string kernel = R"(
#ifndef THREADS
#define THREADS 256
#endif
__device__ unsigned long long seen[8192];
__device__ int seen_count;
// 512 elements spread over the buffer (one thread reads them all: a whole buffer would take it milliseconds):
// two copies rotated differently differ in them.
__device__ unsigned long long digest(const void* p, long long bytes, unsigned long long h) {
  const unsigned int* w = (const unsigned int*)p;
  const long long n = bytes / 4;
  for (long long k = 0; k < 512; ++k) h = (h ^ w[(k * 7919 + 3) % n]) * 1099511628211ull;
  return h;
}
extern "C" __global__ void f(const float* x, const int* idx, float* y, float* z, long long N) {
  const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
)";
  if (remember) {
    kernel += R"(  if (i == 0) {
    unsigned long long h = digest(idx, N * 4, 1469598103934665603ull);
)" + std::string(idx_only ? "" : "    h = digest(x, N * 4, h);\n    h = digest(z, N * 4, h);\n") +
              R"(    h ^= (unsigned long long)N;
    for (int k = 0; k < seen_count; ++k) if (seen[k] == h) __trap();
    if (seen_count < 8192) seen[seen_count++] = h;
  }
  __syncthreads();
)";
  }
  kernel += R"(  if (i < N) { y[i] = 2 * x[i] + 0 * (float)(idx[i] - idx[i]); z[i] += x[i]; }
}
)";
  const std::string reference = R"(
extern "C" __global__ void f(const float* x, const int* idx, float* y, float* z, long long N) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) { y[i] = 2 * x[i] + 0 * (float)(idx[i] - idx[i]); z[i] += x[i]; }
})";
  return R"J({"name": "memory_cuda", "language": "cuda", "entry": "f",
    "params": [{"name": "x", "dtype": "f32", "shape": ["N"], "role": "in"},
               {"name": "idx", "dtype": "i32", "shape": ["N"], "role": "in"},
               {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"},
               {"name": "z", "dtype": "f32", "shape": ["N"], "role": "inout"},
               {"name": "N", "dtype": "i64", "role": "size"}],
    "workloads": [{"N": 32768}, {"N": 1000}],
    "inputs": {"idx": {"low": 0, "high": 1000, "sorted": true}},
    "launch": {"grid": ["cdiv(N, THREADS)", 1, 1], "block": ["THREADS", 1, 1], "shared_bytes": "0"},
    "tunables": {"THREADS": [256]},
    "reference": {"source": )J" +
         ke::json_quote(reference) + R"(}, "seed": {"source": )" + ke::json_quote(kernel) + "}}";
}

}  // namespace

TEST_CASE(
    "cuda: every timed call's inputs are new on a GPU too; the device's memory is read; a problem past it is refused") {
  std::string why;
  const auto gpu = cuda_or_null(why);
  if (!gpu) {
    MESSAGE("skipped: no CUDA device here: " << why);
    return;
  }
  const ke::DeviceInfo info = gpu->info();
  ::unsetenv("KE_DEVICE_MEMORY");
  CHECK(ke::device_memory_bytes(info) > (1ull << 30));  // from the device's "memory" property
  const ke::Spec spec = ke::parse_spec(cuda_spec_json(true, false), "memory_cuda.json");
  const ke::MemoryFootprint f = ke::memory_footprint(spec, info);
  CHECK(f.fixed_bytes >= 512 * MiB);  // a context and a flush buffer
  ke::EvalOptions told;
  told.device_memory_bytes = 256 * MiB;
  CHECK_THROWS_AS(ke::LocalEvaluator(spec, gpu, told), ke::Error);

  ke::WorkerOptions wo;
  wo.timeout_s = 120;
  wo.eval.min_reps = 60;
  ke::WorkerEvaluator evaluator(spec, "cuda:0", wo);
  for (std::uint64_t seed = 1; seed <= 2; ++seed) {
    const ke::Evaluation e = evaluator.evaluate({spec.seed.source, ke::Language::cuda, spec.seed_tunables()}, seed);
    REQUIRE_MESSAGE(e.status == ke::Status::ok, e.message);
  }
  const ke::Spec teeth = ke::parse_spec(cuda_spec_json(true, true), "memory_cuda.json");
  const ke::Evaluation caught = evaluator.evaluate({teeth.seed.source, ke::Language::cuda, teeth.seed_tunables()}, 9);
  CHECK_MESSAGE(caught.status == ke::Status::crashed, caught.message);
}

TEST_CASE("pytorch: the arena is two blocks, and a kernel's and a baseline's evaluations both fit it") {
  if (!ke_test::have_torch()) {
    MESSAGE("skipped: " << ke_test::kNoTorch);
    return;
  }
  const ke::Spec spec = ke::load_spec(std::string(KE_SOURCE_DIR) + "/problems/pytorch/relu_nchw/cpu.json");
  const auto cpu = ke::open_device("cpu");
  ke::pytorch::TorchReference reference(spec, cpu);
  CHECK(reference.arena_bytes() == ke::memory_footprint(spec, cpu->info()).arena_bytes);
  // x and out of the larger workload, each between red zones of 256 bytes, twice.
  const std::size_t block = 2 * ke::arena_slot(8ull * 24 * 40 * 56 * 4).reserved;
  CHECK(reference.arena_bytes() == 2 * block);
  // In a worker, confined as a run's are: giving the arena's second half back is the bridge's to do.
  ke::WorkerOptions wo;
  wo.timeout_s = 120;
  ke::WorkerEvaluator evaluator(spec, "cpu", wo);
  const ke::Evaluation seed = evaluator.evaluate({spec.seed.source, ke::Language::c, spec.seed_tunables()}, 3);
  CHECK_MESSAGE(seed.status == ke::Status::ok, seed.message);
  const ke::Evaluation eager = evaluator.evaluate({"eager", ke::Language::pytorch, spec.seed_tunables()}, 4);
  CHECK_MESSAGE(eager.status == ke::Status::ok, eager.message);  // both its blocks in the arena
  const ke::Evaluation again = evaluator.evaluate({spec.seed.source, ke::Language::c, spec.seed_tunables()}, 5);
  CHECK_MESSAGE(again.status == ke::Status::ok, again.message);  // after the arena's second half went back
}

namespace {

// The processes this one started that are a PyTorch bridge serving workers: shared ones (a control socket,
// children of this process) and a worker's own (children of a worker). Only this process's descendants count:
// ctest runs other tests beside this one, and their bridges are theirs (CI's plain stage saw a bridge of
// another test counted as a worker's own).
struct Bridges {
  int shared = 0, own = 0;
};
Bridges count_bridges() {
  struct Process {
    std::string ppid;
    bool bridge = false, shared = false;
  };
  std::map<std::string, Process> processes;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmd(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    for (char& c : cmdline) c = c ? c : ' ';
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const std::size_t close = text.rfind(')');
    std::istringstream rest(close == std::string::npos ? "" : text.substr(close + 2));
    std::string state;
    Process& p = processes[pid];
    rest >> state >> p.ppid;
    p.bridge = cmdline.find(" serve --module ") != std::string::npos;
    p.shared = cmdline.find("--control-fd") != std::string::npos;
  }
  const std::string me = std::to_string(::getpid());
  auto descends_from_me = [&](std::string pid) {
    for (int depth = 0; depth < 64 && !pid.empty() && pid != "0"; ++depth) {
      const auto it = processes.find(pid);
      if (it == processes.end()) return false;
      pid = it->second.ppid;
      if (pid == me) return true;
    }
    return false;
  };
  Bridges b;
  for (const auto& [pid, p] : processes) {
    if (!p.bridge || !descends_from_me(pid)) continue;
    if (p.shared) {
      b.shared += p.ppid == me;
    } else {
      b.own += 1;
    }
  }
  return b;
}

// Three workers evaluate at once a right kernel, a wrong one, one that crashes (while its worker holds the
// arena) and the eager baseline; all get their right status, one bridge serves them, and the arena the
// crashed worker held goes on to the next evaluation.
void check_shared_workers(const ke::Spec& spec, const std::string& device, std::optional<bool> share,
                          const std::string& wrong_source, const std::string& crash_source) {
  ke::WorkerOptions wo;
  wo.jobs = 3;
  wo.timeout_s = 120;
  wo.share_reference = share;
  ke::WorkerEvaluator evaluator(spec, device, wo);
  REQUIRE(evaluator.jobs() == 3);
  const ke::Candidate seed{spec.seed.source, spec.language, spec.seed_tunables()};
  ke::Candidate wrong = seed, crash = seed;
  wrong.source = wrong_source;
  crash.source = crash_source;
  const std::vector<ke::Candidate> work{
      seed, wrong, crash, seed, {"eager", ke::Language::pytorch, spec.seed_tunables()}, seed};
  std::vector<ke::Evaluation> got(work.size());
  {
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < work.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          got[i] = evaluator.evaluate(work[i], 10 + i);
        } catch (const std::exception& e) {  // the run's end (a reference that failed): said below
          got[i].status = ke::Status::invalid;
          got[i].message = std::string("evaluate threw: ") + e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  // The workers, all started now and idle, hold no bridge of their own.
  const Bridges bridges = count_bridges();
  CHECK(bridges.shared == 1);
  CHECK(bridges.own == 0);
  CHECK_MESSAGE(got[0].status == ke::Status::ok, got[0].message);
  CHECK_MESSAGE(got[1].status == ke::Status::incorrect, got[1].message);
  CHECK_MESSAGE(got[2].status == ke::Status::crashed, got[2].message);
  CHECK_MESSAGE(got[3].status == ke::Status::ok, got[3].message);
  CHECK_MESSAGE(got[4].status == ke::Status::ok, got[4].message);
  CHECK_MESSAGE(got[5].status == ke::Status::ok, got[5].message);
  // The crashed worker held the arena when it died: its end gave the arena back (else this one would wait
  // for it past its time limit), and its replacement opens the same arena on a socket of its own.
  for (std::uint64_t seed_value = 99; seed_value < 102; ++seed_value) {
    const ke::Evaluation after = evaluator.evaluate(seed, seed_value);
    CHECK_MESSAGE(after.status == ke::Status::ok, after.message);
  }
  CHECK(count_bridges().shared == 1);
}

}  // namespace

TEST_CASE("pytorch: the workers of a device share one reference process and one arena, held in turn") {
  if (!ke_test::have_torch()) {
    MESSAGE("skipped: " << ke_test::kNoTorch);
    return;
  }
  const ke::Spec spec = ke::load_spec(std::string(KE_SOURCE_DIR) + "/problems/pytorch/relu_nchw/cpu.json");
  // The arithmetic: shared, a worker holds only its fixed part, and the reference is counted once.
  ke::DeviceInfo gpu;
  gpu.id = "cuda:0", gpu.kind = "cuda";
  gpu.properties["l2_cache_bytes"] = std::to_string(50 * MiB);
  const ke::MemoryFootprint own = ke::memory_footprint(spec, gpu), shared = ke::memory_footprint(spec, gpu, true);
  // A worker's kernels run on its own block (half the arena: the candidate's), not the shared arena's.
  CHECK(shared.worker_bytes == own.arena_bytes / 2);
  CHECK(shared.shared_bytes == own.worker_bytes + (1024 + 100) * MiB);
  CHECK(shared.for_jobs(1) == own.for_jobs(1) + own.arena_bytes / 2);
  CHECK(shared.for_jobs(3) == own.for_jobs(1) + 3 * (own.arena_bytes / 2) + 2 * shared.fixed_bytes);
  // A problem of 8 GB on an 80 GB card: one worker of its own (3 P each), three sharing (3 P, then P each).
  ke::Spec big = spec;
  big.workloads = {{{"batch_size", 128}, {"channels", 128}, {"height", 256}, {"width", 256}}};
  std::string why;
  CHECK(ke::jobs_that_fit(big, gpu, 80ull << 30, 3, &why) == 1);
  CHECK(ke::jobs_that_fit(big, gpu, 80ull << 30, 3, &why, true) == 3);
  big.workloads = {{{"batch_size", 256}, {"channels", 128}, {"height", 256}, {"width", 256}}};  // 16 GB
  CHECK(ke::jobs_that_fit(big, gpu, 80ull << 30, 3, &why) == 1);
  CHECK(ke::jobs_that_fit(big, gpu, 80ull << 30, 3, &why, true) == 1);
  CHECK(ke::shares_reference(spec, "cuda:1", std::nullopt));
  CHECK_FALSE(ke::shares_reference(spec, "cpu", false));
  CHECK(ke::shares_reference(spec, "cpu", true));

  // On the CPU, asked for: three workers, one bridge (a child of this process), none of their own.
  check_shared_workers(
      spec, "cpu", true,
      "#include <stdint.h>\nvoid relu_nchw(const float* x, float* out, int64_t b, int64_t c, int64_t h, "
      "int64_t w) { for (int64_t i = 0; i < b * c * h * w; ++i) out[i] = x[i]; }\n",
      "#include <stdint.h>\nvoid relu_nchw(const float* x, float* out, int64_t b, int64_t c, int64_t h, "
      "int64_t w) { __builtin_trap(); }\n");
}

TEST_CASE("cuda: pytorch: the workers of a GPU share one reference process and its arena, by default") {
  if (!ke_test::have_torch()) {
    MESSAGE("skipped: " << ke_test::kNoTorch);
    return;
  }
  std::string why;
  if (!cuda_or_null(why)) {
    MESSAGE("skipped: no CUDA device here: " << why);
    return;
  }
  const ke::Spec spec = ke::load_spec(std::string(KE_SOURCE_DIR) + "/problems/pytorch/relu_nchw/cuda.json");
  // A kernel that traps poisons its worker's context while the worker holds the arena, which lives on in the
  // bridge's.
  check_shared_workers(spec, "cuda:0", std::nullopt,
                       "extern \"C\" __global__ void relu_nchw(const float* x, float* out, long long b, long long c, "
                       "long long h, long long w) { long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
                       "if (t < b * c * h * w) out[t] = x[t]; }\n",
                       "extern \"C\" __global__ void relu_nchw(const float* x, float* out, long long b, long long c, "
                       "long long h, long long w) { __trap(); }\n");
}
