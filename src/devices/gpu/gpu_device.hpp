// The core every GPU device shares: buffers, the module cache and module loading, launches (their checks,
// the dynamic shared memory opt-in, the poisoned-context rule), event timing with an L2 flush, the
// ceilings' measurement, and verification on the device. A backend (CUDA, HIP) gives it its API as a
// Driver and its compiler as GpuDevice::target and build; a new kernel language adds only a compiler.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "devices/gpu/ceiling_cache.hpp"
#include "devices/kernel_cache.hpp"
#include "kernelevolve/device.hpp"

namespace kernelevolve::gpu {

using DevicePtr = std::uint64_t;  // a device address, as a kernel receives it
using ModuleHandle = void*;       // the API's loaded module (CUmodule, hipModule_t)
using FunctionHandle = void*;     // the API's kernel in a module (CUfunction, hipFunction_t)

// What a kernel's compiler fixed of its launch. Zeros leave the launch rule's values.
struct KernelLaunch {
  unsigned block_threads = 0;  // the block (x) whatever the rule says: Triton's 32 x num_warps
  unsigned shared_bytes = 0;   // dynamic shared memory at least this
  // Scratch pointers the kernel takes after the spec's `params` arguments (Triton's global and profile
  // scratch): each gets `bytes` per program of the grid (a null pointer when 0), aligned to `align`.
  struct Scratch {
    std::size_t bytes = 0, align = 1;
  };
  std::vector<Scratch> scratch;
  std::size_t params = 0;  // the spec's arguments, before the scratch pointers
  // Integer arguments the compiler can specialize the kernel on, as Triton's launcher does: a variant compiled
  // assuming some of them are multiples of 16 (GpuDevice::build_variant) lets it prove a row's stride keeps
  // 16-byte alignment. Each launch runs the variant for exactly those whose value there is a multiple of 16,
  // compiled on first use, or this kernel itself when none is or that variant cannot be had; no launch runs a
  // variant whose assumption its arguments break.
  struct IntArg {
    std::size_t index = 0;  // among the spec's arguments
    int bytes = 8;          // 4 (i32) or 8 (i64): what the kernel reads
  };
  std::vector<IntArg> specializable;
};

class GpuDevice;

// A plan's library step on a GPU (Device::library_step): a vendor call that queues its work on the device's
// stream, launched by the core where a kernel would be.
class LibraryKernel : public Kernel {
 public:
  explicit LibraryKernel(const GpuDevice* device) : device_(device) {}
  // Queues the call on `stream` with `args` (as a kernel's: pointers to device pointers and to values);
  // "" when queued, else why not, in one line naming the call.
  virtual std::string enqueue(void* stream, void** args) = 0;
  const GpuDevice* device() const { return device_; }

 private:
  const GpuDevice* device_;
};

// A driver call's outcome: the API's error code (0 is success) and the call's name, for messages.
struct Status {
  int code = 0;
  const char* call = "";
  bool ok() const { return code == 0; }
};

// One GPU through its API, as the core uses it. Every call runs on the GPU's one stream (timed by its two
// events), with the Context's lock held and the GPU made current (Context::acquire). The destructor
// releases the stream, the events and the API's context.
class Driver {
 public:
  virtual ~Driver() = default;
  virtual void make_current() = 0;
  // "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered", or the number.
  virtual std::string error_text(int code) const = 0;
  // After a sticky error the context is lost: every later call fails the same way.
  virtual bool is_sticky(int code) const = 0;
  // After a benign one (a bad argument, no memory, more resources asked than a launch may have) it is surely
  // not. Any other error is put to the test of synchronize_device.
  virtual bool is_benign(int code) const = 0;
  virtual Status synchronize_device() = 0;  // every stream of the context
  virtual Status synchronize() = 0;         // the stream
  virtual Status allocate(DevicePtr& ptr, std::size_t bytes) = 0;
  virtual void free(DevicePtr ptr) = 0;  // fails harmlessly on a lost context
  virtual Status copy_to_device(DevicePtr dst, const void* src, std::size_t bytes) = 0;
  virtual Status copy_to_host(void* dst, DevicePtr src, std::size_t bytes) = 0;
  virtual Status copy_on_device(DevicePtr dst, DevicePtr src, std::size_t bytes) = 0;
  // Sets `count` elements of `element_bytes` (1, 2 or 4) bytes each to `value`.
  virtual Status set(DevicePtr dst, std::uint32_t value, int element_bytes, std::size_t count) = 0;
  virtual Status record_start() = 0;
  virtual Status record_stop() = 0;
  virtual Status elapsed_ms(float& ms) = 0;  // from the start event to the stop event
  virtual Status load_module(ModuleHandle& module, const void* image) = 0;
  virtual void unload_module(ModuleHandle module) = 0;
  virtual Status get_function(FunctionHandle& fn, ModuleHandle module, const char* name) = 0;
  // What the driver knows of a loaded kernel: "registers", "shared_static_bytes", "local_bytes",
  // "max_threads_per_block" at least.
  virtual std::map<std::string, std::int64_t> resources(FunctionHandle fn) = 0;
  // How many blocks of `block_threads` threads, each with `dynamic_shared` bytes of dynamic shared memory, fit
  // on one SM (CU) at once, by the driver's occupancy calculator (registers, shared memory, the SM's limits on
  // warps and blocks), with the SM's thread limit and warp size to turn it into a share.
  struct Occupancy {
    int blocks_per_sm = 0;
    int max_threads_per_sm = 0;
    int warp_size = 0;
  };
  virtual Status occupancy(FunctionHandle fn, int block_threads, std::size_t dynamic_shared, Occupancy& out) = 0;
  // Lets `fn` take `bytes` of dynamic shared memory: CUDA wants an opt-in above 48 KB.
  virtual Status allow_dynamic_shared(FunctionHandle fn, int bytes) = 0;
  virtual Status launch(FunctionHandle fn, const unsigned grid[3], const unsigned block[3], unsigned shared_bytes,
                        void** args) = 0;
  // The stream every call runs on (a CUstream, a hipStream_t), for a library that queues work of its own.
  virtual void* stream() = 0;
  // Makes `stream` (of this context; null: the default stream) the one every call runs on, and returns the one
  // before: a callable program queues on its caller's stream (Device::enqueue_steps), then puts ours back.
  virtual void* swap_stream(void* stream) = 0;
};

// The state that a GPU's device, buffers and kernels share; whichever of them is freed last releases it.
class Context {
 public:
  Context(std::unique_ptr<Driver> driver, std::string id) : driver_(std::move(driver)), id_(std::move(id)) {}
  const std::string& id() const { return id_; }  // "cuda:0"
  Driver& driver() { return *driver_; }
  // The lock of the one stream, with the GPU made current: one operation on the stream at a time.
  std::unique_lock<std::mutex> acquire() {
    std::unique_lock lock(mutex_);
    driver_->make_current();
    return lock;
  }
  // Records a failed call; a sticky error, or one after which the context no longer synchronizes, poisons
  // the device. Returns "call: error text".
  std::string failed(const std::string& call, int code);
  std::string failed(const Status& s) { return failed(s.call, s.code); }
  // Throws std::runtime_error("cuda:0: call: error text") when `s` failed.
  void check(const Status& s) {
    if (!s.ok()) throw std::runtime_error(id_ + ": " + failed(s));
  }
  bool healthy() const { return healthy_.load(); }
  std::string poison() const;  // what made it unhealthy

 private:
  std::unique_ptr<Driver> driver_;
  std::string id_;
  std::mutex mutex_;
  std::atomic<bool> healthy_{true};
  mutable std::mutex poison_mutex_;
  std::string poison_;
};

// A GPU as a Device. The backend's constructor opens its Driver, describes the GPU in info_ and calls
// start(); compile() then asks it for a target and a build, and the core does the rest.
class GpuDevice : public Device {
 public:
  const DeviceInfo& info() override;
  CompileResult compile(const KernelSource& ks) final;
  std::unique_ptr<Buffer> allocate(std::size_t bytes) final;
  std::unique_ptr<Buffer> view(Buffer& parent, std::size_t offset, std::size_t bytes, std::function<void()> released,
                               std::size_t front_zone, std::size_t back_zone) final;
  LaunchResult launch(Kernel& kernel, void** args, const LaunchDims& dims, bool timed = false,
                      bool flush_cache = false) final;
  LaunchResult launch_steps(const std::vector<LaunchStep>& steps, bool timed = false, bool flush_cache = false,
                            std::vector<double>* each = nullptr) final;
  LaunchResult enqueue_steps(const std::vector<LaunchStep>& steps, void* stream) final;
  std::map<std::string, std::int64_t> launch_resources(Kernel& kernel, const LaunchDims& rule) final;
  bool healthy() const final { return ctx_->healthy(); }
  void prepare() final { verify_kernels(); }
  bool fill_random(Buffer& buffer, DType dtype, std::size_t count, const InputDist& dist, std::uint64_t seed) final;
  bool compare(const Buffer& got, const Buffer& expected, DType dtype, std::size_t count, const Tolerance& tol,
               Comparison& result) final;
  bool digest(const Buffer& buffer, std::size_t bytes, std::uint64_t& result) final;

 protected:
  // What a backend's compiler made of a source: the image the driver loads (a cubin, PTX, a code object;
  // empty when compilation failed) and the resources the compiler reports (spills), added to the driver's.
  // A compiler that decides the launch itself (Triton) says so in `launch`; the kernel keeps it, and every
  // launch of it follows it: nothing after compilation asks which language a kernel came from.
  struct Build {
    std::string image;
    std::map<std::string, std::int64_t> resources;
    std::string symbol;    // the kernel's name in the image, when it is not the entry's
    bool refused = false;  // the source broke the rules (CompileResult::refused)
    KernelLaunch launch;
  };
  // What start() needs to know of the GPU beyond info_.
  struct Setup {
    std::string compiler;                 // "NVRTC": named when the core's own kernels do not compile
    const char* verify_source = nullptr;  // ke_fill, ke_compare and ke_digest, or null: verify on the host
    std::size_t l2_bytes = 0;
    std::size_t memory_bytes = 0;
    std::string shared_optin;    // "227 KiB": the most dynamic shared memory a block may have, for messages
    std::string ceilings_key;    // names the ceilings' cache file: the GPU's UUID where the driver gives one
    std::string driver_version;  // a cached measurement serves only the same driver
    double nominal_flops = 0;    // a datasheet FP32 rate: a measured rate under half of it is not kept
    // The tensor-core ceilings (Ceilings::bf16_tensor_flops_per_s): the source of ke_mma_bf16 and ke_mma_f16
    // (kTensorKernels) where the GPU runs them, null where it does not; and the library step (library_step) whose
    // product at 8192^3 is timed too, the larger rate kept ("cublaslt.matmul"), empty for none.
    const char* tensor_source = nullptr;
    std::string tensor_library_step;
  };

  GpuDevice(std::unique_ptr<Driver> driver, std::string id, Language language);
  // Readies the GPU once the backend has described it: the L2 flush buffer, the core's own kernels, and one
  // timed launch, so that the driver starts its threads and loads its compiler here, before any candidate
  // runs (nothing new appears around a candidate's launch, or inside a worker's sandbox). Throws
  // Error(DeviceUnavailable) when it cannot.
  void start(const Setup& setup);

  // The target `ks` compiles for, part of its cache key ("sm_90a"); empty, with `log` set, when this device
  // cannot run what it asks for.
  virtual std::string target(const KernelSource& ks, std::string& log) = 0;
  // Compiles `ks` for `target`, appending the compiler's diagnostics to `log`. Never throws.
  virtual Build build(const KernelSource& ks, const std::string& target, std::string& log) = 0;
  // A variant of `ks`, whose build listed KernelLaunch::specializable, compiled assuming that the params at
  // `divisible` (indices into ks.params, all integers) are multiples of 16; the core launches it only where they
  // are. An empty image when it cannot be had (this default: a backend without variants), and the plain kernel
  // then serves those launches. Never throws.
  virtual Build build_variant(const KernelSource& ks, const std::string& target,
                              const std::vector<std::size_t>& divisible, std::string& log);

  Context& context() { return *ctx_; }
  // An allocation without the red zones allocate() puts around a buffer: its data() is the allocation's base, as
  // memory exported to another process must be (cuIpcGetMemHandle), whose offsets the other process shares.
  std::unique_ptr<Buffer> allocate_unguarded(std::size_t bytes);
  // `bytes` at `ptr`, memory this device did not allocate (another process's, opened over IPC), as a buffer
  // of this device; `released` runs when it is destroyed.
  std::unique_ptr<Buffer> adopt(DevicePtr ptr, std::size_t bytes, std::function<void()> released);
  // Languages this device compiles besides its own (a backend that has Triton adds it).
  std::vector<Language> more_languages_;

  DeviceInfo info_;

 private:
  std::shared_ptr<Kernel> load(Build& built, const std::string& entry, std::string& log);
  // build_variant's kernel, loaded; null when it cannot be had. Never throws.
  std::shared_ptr<Kernel> load_variant(const KernelSource& ks, const std::string& target,
                                       const std::vector<std::size_t>& divisible);
  // launch_steps, or with `caller_stream` enqueue_steps: queued there, not timed and not waited for.
  LaunchResult run_steps(const std::vector<LaunchStep>& steps, bool timed, bool flush_cache, std::vector<double>* each,
                         const std::optional<void*>& caller_stream);
  Status flush_l2();
  // The verification kernels (Setup::verify_source), compiled on first use; false when there are none or
  // they would not compile (the evaluator then verifies on the host).
  bool verify_kernels();
  // Launches a verification kernel on `blocks` blocks of kVerifyThreads and copies the first `result_bytes`
  // of the scratch buffer into `result`, zeroing them first if `zero`. Throws when the driver fails.
  void run_verify(Kernel& kernel, void** args, unsigned blocks, void* result, std::size_t result_bytes, bool zero);
  unsigned verify_blocks(std::size_t work) const;
  Ceilings measure();
  double best_ms(Kernel& kernel, void** args, const LaunchDims& dims, int reps);
  double best_memcpy_ms(DevicePtr dst, DevicePtr src, std::size_t bytes, int reps);
  double measure_fma_flops();
  // The rate of the tensor kernel `entry` (Setup::tensor_source), and of Setup::tensor_library_step's product in
  // `dtype` (bf16 or f16), in flop/s; 0 when it cannot compile or run. Never throws.
  double measure_mma_flops(const char* entry);
  double measure_library_flops(DType dtype);
  // Both tensor ceilings into `c`, checked against its FMA rate.
  void measure_tensor_flops(Ceilings& c);

  std::shared_ptr<Context> ctx_;
  Language language_;
  Setup setup_;
  int compute_units_ = 1;
  KernelCache cache_{256};
  std::once_flag ceilings_once_;
  std::shared_ptr<Kernel> copy_kernel_, fma_kernel_, flush_kernel_, spin_kernel_;
  // Timing parity (issue 50): a timed call is queued behind ke_spin, held for twice the host's time to queue the
  // last timed call (at least kMinHoldUs), so that its events time the GPU's work and not the host's launch gaps,
  // as a PyTorch baseline's are (ke_bridge/timing.py's Timer). The host's own time is reported apart
  // (LaunchResult::host_us).
  static constexpr double kMinHoldUs = 20;
  double spin_cycles_per_us_ = 0;         // the SM clock's, from the device's clock rate; 0: no hold
  double last_queue_us_ = 0;              // the host's time to queue the last timed call's steps
  std::unique_ptr<Buffer> flush_buffer_;  // twice the L2, zeros
  FunctionHandle flush_fn_ = nullptr;     // ke_flush, once compiled; until then the flush is a memset
  std::once_flag verify_once_;
  std::shared_ptr<Kernel> fill_kernel_, compare_kernel_, digest_kernel_;
  std::mutex verify_mutex_;                          // one verification at a time owns the scratch buffer
  std::unique_ptr<Buffer> scratch_;                  // per-block results of the verification kernels
  static constexpr unsigned kVerifyThreads = 256;    // ke_compare's shared array is this size
  static constexpr unsigned kVerifyBlocksPerCu = 4;  // at most; the scratch buffer holds a record per block
};

}  // namespace kernelevolve::gpu
