// Device: an accelerator that compiles kernel source to a module, holds buffers, launches and times.
// CpuDevice compiles C/C++ in-process with Clang/LLVM (ORC LLJIT); CudaDevice and HipDevice load their
// driver and run-time compiler with dlopen, so one build runs with or without a GPU.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernelevolve/spec.hpp"

namespace kernelevolve {

struct DeviceInfo {
  std::string id;         // "cpu", "cuda:0", "hip:1"
  std::string kind;       // "cpu", "cuda", "hip": times are only compared within a kind and name
  std::string name;       // the processor's model name
  int compute_units = 0;  // cores or SMs/CUs
  int vector_bits = 0;    // widest SIMD register on a CPU; warp size * 32 on a GPU
  // Ceilings for the roofline. peak_bytes_per_s is a measured copy (bytes read plus written);
  // peak_flops_per_s a measured or datasheet FMA rate. floor_bytes_per_s is an upper bound on any
  // memory traffic rate (caches included), used only to call a time impossible.
  double peak_bytes_per_s = 0;
  double peak_flops_per_s = 0;
  double floor_bytes_per_s = 0;
  // Measured dense tensor-core rates (fp32 accumulation) for bf16 and fp16 inputs, the compute ceiling of work in
  // those types (compute_peak in fitness.hpp); 0 where unknown (a CPU, a GPU without them or whose measurement
  // failed). On a CUDA GPU the larger of an mma.sync kernel and cuBLASLt's 8192^3 product: on Hopper mma.sync
  // reaches only part of wgmma's rate.
  double bf16_tensor_flops_per_s = 0;
  double fp16_tensor_flops_per_s = 0;
  std::map<std::string, std::string> properties;  // anything else worth printing
};

// The FMA peak one kernel can reach: a CPU kernel runs on the calling thread, so one core's share of the
// machine's peak_flops_per_s; a GPU kernel has the whole device.
double kernel_peak_flops(const DeviceInfo& device);

// What to compile: the source, its language and entry, the signature (for the CPU call trampoline),
// the tunables as macros and any extra flags.
struct KernelSource {
  std::string source;
  Language language = Language::c;
  std::string entry;
  std::vector<Param> params;
  Bindings defines;
  std::vector<std::string> flags;
};

// A compiled, loaded kernel. Its resources (registers, shared memory, spills) where the device knows them.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::map<std::string, std::int64_t> resources() const { return {}; }
  // A library step (Device::library_step) says whether a call with these arguments (as launch() takes them)
  // stays inside its buffers, `bytes` of each argument (0 for a value): "" when it does, else why not, before
  // anything runs. A kernel cannot know: it says "".
  virtual std::string check_arguments(void** args, const std::vector<std::size_t>& bytes) const {
    (void)args, (void)bytes;
    return "";
  }
};

struct CompileResult {
  std::shared_ptr<Kernel> kernel;  // null when compilation failed
  std::string log;                 // diagnostics, kept on the node
  double compile_ms = 0;
  bool cached = false;
  // The source broke the rules rather than the language (it calls exit, asks for a forbidden flag):
  // the candidate is invalid, not a compile error.
  bool refused = false;
  bool ok() const { return kernel != nullptr; }
};

// What Buffer::check_red_zones found: whether a kernel wrote outside its buffer, and where.
struct RedZoneReport {
  bool checked = false;      // the buffer has red zones (a device's own allocation; not a view, nor a host's own)
  bool intact = true;        // no byte of them changed since they were filled
  bool before = false;       // the damage nearest the buffer lies before its first byte, else past its last
  std::size_t distance = 0;  // that byte's distance from the buffer: 1 is the byte just before it, 0 the first past it
  std::size_t zone_bytes = 0;  // the red zone on that side
};

// Device memory. data() is the value passed to the kernel: a host address on the CPU, a device pointer on a GPU.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual std::size_t bytes() const = 0;
  virtual void* data() = 0;
  virtual void upload(const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, std::size_t bytes) const = 0;
  // Fills the whole buffer with a repeated pattern of 1, 2 or 4 bytes (the NaN poison), on the device
  // where it can: far cheaper than an upload before every timed launch.
  virtual void fill(const void* pattern, std::size_t pattern_bytes) {
    std::vector<unsigned char> host(bytes());
    for (std::size_t i = 0; i < host.size(); ++i)
      host[i] = static_cast<const unsigned char*>(pattern)[i % pattern_bytes];
    upload(host.data(), host.size());
  }
  // Copies the first min(bytes(), source.bytes()) bytes of a buffer of the same device into this one;
  // on the device where it can, else through the host.
  virtual void copy_from(const Buffer& source) {
    std::vector<unsigned char> host(std::min(bytes(), source.bytes()));
    source.download(host.data(), host.size());
    upload(host.data(), host.size());
  }
  // Copies the first `bytes` bytes of `source` (a buffer of the same device) rotated by `shift` bytes:
  // this[i] = source[(i + shift) % bytes]. The evaluator gives each timed call inputs no earlier call saw
  // this way, at the cost of a copy instead of a fresh random draw. On the device where it can.
  virtual void copy_rotated(const Buffer& source, std::size_t bytes, std::size_t shift) {
    shift %= bytes ? bytes : 1;
    auto* to = static_cast<unsigned char*>(host_address());
    const auto* from = static_cast<const unsigned char*>(source.host_address());
    if (to && from && bytes <= this->bytes() && bytes <= source.bytes()) {
      // Both in host memory (the CPU device's, a PyTorch reference's memfd): in place, not through two copies.
      std::memcpy(to, from + shift, bytes - shift);
      std::memcpy(to + (bytes - shift), from, shift);
      return;
    }
    std::vector<unsigned char> host(bytes), rotated(bytes);
    source.download(host.data(), bytes);
    std::copy(host.begin() + static_cast<std::ptrdiff_t>(shift), host.end(), rotated.begin());
    std::copy(host.begin(), host.begin() + static_cast<std::ptrdiff_t>(shift),
              rotated.end() - static_cast<std::ptrdiff_t>(shift));
    upload(rotated.data(), bytes);
  }
  // The memory itself where the host can address it (the CPU device), else null: the evaluator then
  // reads and writes it in place instead of copying it out and back.
  virtual void* host_address() const { return nullptr; }
  // Reads the red zones (slack on both sides, filled with a known pattern at allocation) and refills any damage
  // it reports: a small read, never the whole buffer. The default has none and says so (checked false).
  virtual RedZoneReport check_red_zones() { return {}; }
};

// A comparison's verdict and its worst element: |got - expected| <= atol + rtol * |expected| element-wise,
// a NaN in `got` never passes (a NaN expected matches only a NaN), infinities must match exactly.
struct Comparison {
  bool pass = true;
  std::int64_t worst_index = -1;  // the first of the worst elements
  double got = 0, expected = 0;
  double excess = -1e300;  // the largest |got - expected| - (atol + rtol * |expected|); > 0 fails
};

struct LaunchDims {
  std::int64_t grid[3] = {1, 1, 1};
  std::int64_t block[3] = {1, 1, 1};
  std::int64_t shared_bytes = 0;
};

struct LaunchResult {
  bool ok = true;
  std::string error;   // the launch failure, when !ok
  double time_us = 0;  // when timed: device events on a GPU, the host's steady clock on the CPU
  // When timed, where known: the host's own cost of the call, kept apart from time_us (a PyTorch baseline's Python
  // call, whose GPU time is measured with the host ahead of it; issue 50). 0 where the launch has no such cost.
  double host_us = 0;
  std::size_t failed_step = 0;  // launch_steps: the step that failed, when !ok
};

// One launch of a program's plan (program.hpp): a compiled kernel (or a library step), its arguments as
// Device::launch takes them, and its launch dimensions.
struct LaunchStep {
  Kernel* kernel = nullptr;
  void** args = nullptr;
  LaunchDims dims;
};

class Device {
 public:
  virtual ~Device() = default;
  // The device's description; ceilings are measured once, on first call, and cached.
  virtual const DeviceInfo& info() = 0;
  // Compiles and loads; failures are a result with the log. Modules are cached by source and options.
  virtual CompileResult compile(const KernelSource& source) = 0;
  // A plan's library step (program.hpp, library_calls()): the vendor call `name` with its `options`, taking
  // arguments of `signature`, made ready to be launched as a kernel is (launch() and launch_steps() run it on
  // the device's stream). Null, with `log` saying why, where the device has no such library or the options or
  // arguments do not fit it.
  virtual std::shared_ptr<Kernel> library_step(const std::string& name,
                                               const std::map<std::string, std::string>& options,
                                               const std::vector<Param>& signature, std::string& log) {
    (void)options, (void)signature;
    log = "error: this device has no library call '" + name + "': library steps run on a CUDA GPU\n";
    return nullptr;
  }
  virtual std::unique_ptr<Buffer> allocate(std::size_t bytes) = 0;
  // Runs the kernel once and waits for it. args[i] points at param i's value: for a buffer, at a
  // void* holding its Buffer::data(); for a size or scalar, at a value of the param's dtype.
  // When timed, caches are flushed first if flush_cache and the device can.
  virtual LaunchResult launch(Kernel& kernel, void** args, const LaunchDims& dims, bool timed = false,
                              bool flush_cache = false) = 0;
  // Runs a program's steps in order on one stream, as one call, and waits for them. Timed, the time spans
  // them all (caches flushed once, before the first). With `each`, every step is also timed alone into it,
  // for its share of the time: the steps then run one at a time, each waited for. A failure names its step
  // in LaunchResult::failed_step. The default launches the steps one by one through launch().
  virtual LaunchResult launch_steps(const std::vector<LaunchStep>& steps, bool timed = false, bool flush_cache = false,
                                    std::vector<double>* each = nullptr);
  // Queues a program's steps on the caller's `stream` (a CUstream or hipStream_t of the device's primary
  // context, the one the CUDA and HIP runtimes use; null: the default stream) and returns without waiting, as
  // a kernel launch does: a callable program (callable.hpp) runs so inside a host's own work. A failure to queue
  // names its step. The default, for a device without streams (the CPU), runs them now on the calling thread
  // and takes no stream.
  virtual LaunchResult enqueue_steps(const std::vector<LaunchStep>& steps, void* stream);
  // What the device can say of `kernel` launched in `dims` beyond Kernel::resources(), where only the launch
  // tells (the block is the spec's rule): on a GPU "block_threads" and "dynamic_shared_bytes" as launched,
  // "active_blocks_per_sm" by the driver's occupancy calculator and "occupancy_pct", the warps those blocks
  // hold over the most an SM (CU) holds. Empty where the device cannot say (the CPU).
  virtual std::map<std::string, std::int64_t> launch_resources(Kernel& kernel, const LaunchDims& dims) {
    (void)kernel, (void)dims;
    return {};
  }
  // False once a kernel has left the device unusable (a GPU context poisoned by an illegal address):
  // the worker then replaces its process, since nothing in it can be trusted any more.
  virtual bool healthy() const { return true; }

  // Verification on the device, so that large inputs and outputs need not cross the bus in every trial.
  // Each returns false when the device cannot, and the evaluator does the work on the host instead.
  // Fills `count` elements of `dtype` with draws from `dist`, a function of `seed` alone (but the
  // values are the device's own: another kind of device draws others from the same seed).
  virtual bool fill_random(Buffer& buffer, DType dtype, std::size_t count, const InputDist& dist, std::uint64_t seed) {
    (void)buffer, (void)dtype, (void)count, (void)dist, (void)seed;
    return false;
  }
  // Compares `count` elements of two buffers of this device, as Comparison says.
  virtual bool compare(const Buffer& got, const Buffer& expected, DType dtype, std::size_t count, const Tolerance& tol,
                       Comparison& result) {
    (void)got, (void)expected, (void)dtype, (void)count, (void)tol, (void)result;
    return false;
  }
  // Compiles and loads what fill_random, compare and digest use, now rather than at first use.
  virtual void prepare() {}
  // Starts what compiling `language` needs beyond the device itself (Triton's compile helper, and a first
  // compile through it), now: a worker calls it before it confines itself, since a confined process starts
  // no other. Throws Error(DeviceUnavailable) when the language cannot be had here (Triton missing or too
  // old), naming why; does nothing for a language that needs nothing.
  virtual void prepare_language(Language language) { (void)language; }
  // Loads what a plan's library steps call (cuBLASLt, cuDNN) and makes a first small call of each, now: a
  // worker calls it before it confines itself. One line per library, where it was found or why not; empty
  // for a device without library steps. A library that is missing fails only the steps that call it.
  virtual std::string prepare_library_steps() { return ""; }
  // Memory that another process maps too (a PyTorch reference's process): an allocation of `bytes`, and in
  // `handle` what that process opens it by (on CUDA, the IPC handle's 64 bytes in hex). Null where the
  // device cannot share memory.
  virtual std::unique_ptr<Buffer> allocate_shared(std::size_t bytes, std::string& handle) {
    (void)bytes, (void)handle;
    return nullptr;
  }
  // Memory another process allocated and exported (`handle` as allocate_shared gives it: a shared PyTorch
  // reference's arena), opened as `bytes` of this device; closed, not freed, when the buffer goes. Null
  // where the device cannot; throws Error(DeviceUnavailable) when the handle does not open.
  virtual std::unique_ptr<Buffer> open_shared(const std::string& handle, std::size_t bytes) {
    (void)handle, (void)bytes;
    return nullptr;
  }
  // `bytes` at `offset` in `parent` (a buffer of this device) as a buffer of this device, owning nothing:
  // it must not outlive `parent`. `released` runs when it is destroyed. The `front_zone` bytes before it and
  // the `back_zone` bytes after it, which the caller leaves unused in `parent`, are its red zones
  // (check_red_zones), as an allocation's are; 0 for none. Null where the device cannot.
  virtual std::unique_ptr<Buffer> view(Buffer& parent, std::size_t offset, std::size_t bytes,
                                       std::function<void()> released, std::size_t front_zone, std::size_t back_zone) {
    (void)parent, (void)offset, (void)bytes, (void)released, (void)front_zone, (void)back_zone;
    return nullptr;
  }
  // buffer_digest() of the first `bytes` bytes: equal contents give equal digests on every device.
  virtual bool digest(const Buffer& buffer, std::size_t bytes, std::uint64_t& result) {
    (void)buffer, (void)bytes, (void)result;
    return false;
  }
};

// An order-independent 64-bit digest of a byte range: the wrapping sum over its 8-byte little-endian
// words (the last zero-padded) of mix(word + mix(index)), with splitmix64's finalizer as mix. Integer
// arithmetic only, so a GPU computes the same value as the host. Tells changed contents from unchanged.
std::uint64_t buffer_digest(const void* bytes, std::size_t n);

// Opens a device by id: "cpu", "cuda", "cuda:N", "hip", "hip:N". Throws Error(DeviceUnavailable)
// with the reason when it is absent, Error(BadUsage) when the id is malformed.
std::shared_ptr<Device> open_device(const std::string& id);
// The devices present, described (ceilings are not measured here).
std::vector<DeviceInfo> list_devices();

// A backend (cpu, cuda, hip) and whether this process can use it: `devices` found, or the reason it cannot
// ("no CUDA driver: cannot load libcuda.so.1 ...", "... finds no AMD GPU", "not in this build ...").
struct BackendStatus {
  std::string kind;        // "cpu", "cuda", "hip"
  bool available = false;  // a device of this kind can be opened
  int devices = 0;         // devices found, usable or not
  std::string reason;      // why not available (one line); empty when available
};
// Every backend this library knows, cpu, cuda and hip in that order, each with its status.
std::vector<BackendStatus> backend_status();

}  // namespace kernelevolve
