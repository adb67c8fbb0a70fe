// The GPU devices' shared core; see gpu_device.hpp for what it does.
#include "devices/gpu/gpu_device.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

#include "devices/clock.hpp"
#include "devices/gpu/common.hpp"
#include "devices/red_zone.hpp"
#include "kernelevolve/error.hpp"

namespace kernelevolve::gpu {
namespace {

using devices::Clock;
using devices::ms_since;

DevicePtr device_ptr(const void* p) { return static_cast<DevicePtr>(reinterpret_cast<std::uintptr_t>(p)); }

// Red zones: kRedZoneBytes before a buffer (so its data keeps the allocation's alignment), and after it the
// rounding up to kRedZoneBytes and kRedZoneBytes more.
constexpr std::size_t kRedZoneBytes = 256;

class GpuBuffer final : public Buffer {
 public:
  // `guarded`: between red zones (check_red_zones), which the kernel never sees; else data() is the allocation's
  // base, as cuIpcGetMemHandle wants it.
  GpuBuffer(std::shared_ptr<Context> ctx, std::size_t bytes, bool guarded = true)
      : ctx_(std::move(ctx)), bytes_(bytes) {
    const std::size_t used = std::max<std::size_t>(bytes, 1);
    if (guarded) {
      front_ = kRedZoneBytes;
      back_ = (used + kRedZoneBytes - 1) / kRedZoneBytes * kRedZoneBytes - bytes + kRedZoneBytes;
    }
    auto lock = ctx_->acquire();
    DevicePtr base = 0;
    const Status s = ctx_->driver().allocate(base, front_ + std::max(used, bytes + back_));
    if (!s.ok()) {
      throw std::runtime_error(ctx_->id() + ": cannot allocate " + format_bytes(static_cast<double>(bytes)) + ": " +
                               ctx_->failed(s));
    }
    ptr_ = base + front_;
    if (!guarded) return;
    const Status armed = fill_pattern();
    if (!armed.ok()) {
      const std::string why = ctx_->failed(armed);
      ctx_->driver().free(base);
      throw std::runtime_error(ctx_->id() + ": cannot fill a buffer's red zones: " + why);
    }
  }
  // A view: `bytes` at `ptr` inside another buffer's allocation, freed with that one; with red zones of
  // `front` and `back` bytes around it where the owner of that allocation left them unused.
  GpuBuffer(std::shared_ptr<Context> ctx, DevicePtr ptr, std::size_t bytes, std::function<void()> released,
            std::size_t front = 0, std::size_t back = 0)
      : ctx_(std::move(ctx)), bytes_(bytes), ptr_(ptr), owner_(false), released_(std::move(released)) {
    if (front + back == 0) return;
    front_ = front, back_ = back;
    auto lock = ctx_->acquire();
    const Status armed = fill_pattern();
    if (!armed.ok()) throw std::runtime_error(ctx_->id() + ": cannot fill a view's red zones: " + ctx_->failed(armed));
  }
  ~GpuBuffer() override {
    if (!owner_) {
      if (released_) released_();
      return;
    }
    auto lock = ctx_->acquire();
    ctx_->driver().free(ptr_ - front_);  // fails harmlessly on a poisoned context
  }
  // Two small copies of the zones alone, and one wait.
  RedZoneReport check_red_zones() override {
    RedZoneReport r;
    if (pattern_.empty()) return r;
    r.checked = true;
    std::vector<unsigned char> seen(pattern_.size());
    auto lock = ctx_->acquire();
    Driver& driver = ctx_->driver();
    ctx_->check(driver.copy_to_host(seen.data(), ptr_ - front_, front_));
    ctx_->check(driver.copy_to_host(seen.data() + front_, ptr_ + bytes_, back_));
    ctx_->check(driver.synchronize());
    if (seen == pattern_) return r;
    r.intact = false;
    // The damaged byte nearest the buffer: before it, the last of the front zone's that differs.
    std::size_t i = front_;
    while (i > 0 && seen[i - 1] == pattern_[i - 1]) --i;
    if (i > 0) {
      r.before = true;
      r.distance = front_ - (i - 1);
      r.zone_bytes = front_;
    } else {
      std::size_t j = 0;
      while (j < back_ && seen[front_ + j] == pattern_[front_ + j]) ++j;
      r.distance = j;
      r.zone_bytes = back_;
    }
    ctx_->check(arm());
    return r;
  }
  const std::shared_ptr<Context>& context() const { return ctx_; }
  DevicePtr ptr() const { return ptr_; }

  std::size_t bytes() const override { return bytes_; }
  void* data() override { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr_)); }
  void upload(const void* host, std::size_t bytes) override {
    check_size(bytes, "upload");
    if (!bytes) return;
    auto lock = ctx_->acquire();
    ctx_->check(ctx_->driver().copy_to_device(ptr_, host, bytes));
    ctx_->check(ctx_->driver().synchronize());
  }
  void download(void* host, std::size_t bytes) const override {
    check_size(bytes, "download");
    if (!bytes) return;
    auto lock = ctx_->acquire();
    ctx_->check(ctx_->driver().copy_to_host(host, ptr_, bytes));
    ctx_->check(ctx_->driver().synchronize());
  }
  void fill(const void* pattern, std::size_t pattern_bytes) override {
    if (!bytes_) return;
    if (bytes_ % pattern_bytes != 0 || (pattern_bytes != 1 && pattern_bytes != 2 && pattern_bytes != 4)) {
      Buffer::fill(pattern, pattern_bytes);
      return;
    }
    std::uint32_t value = 0;
    if (pattern_bytes == 1) {
      value = *static_cast<const unsigned char*>(pattern);
    } else if (pattern_bytes == 2) {
      std::uint16_t v;
      std::memcpy(&v, pattern, 2);
      value = v;
    } else {
      std::memcpy(&value, pattern, 4);
    }
    auto lock = ctx_->acquire();
    ctx_->check(ctx_->driver().set(ptr_, value, static_cast<int>(pattern_bytes), bytes_ / pattern_bytes));
    ctx_->check(ctx_->driver().synchronize());
  }
  void copy_from(const Buffer& source) override {
    const auto* other = dynamic_cast<const GpuBuffer*>(&source);
    if (!other || other->ctx_ != ctx_) {  // another device's: through the host
      if (const void* host = source.host_address()) {
        upload(host, std::min(bytes_, source.bytes()));
      } else {
        Buffer::copy_from(source);
      }
      return;
    }
    const std::size_t n = std::min(bytes_, other->bytes_);
    if (!n) return;
    auto lock = ctx_->acquire();
    ctx_->check(ctx_->driver().copy_on_device(ptr_, other->ptr_, n));
    ctx_->check(ctx_->driver().synchronize());
  }
  void copy_rotated(const Buffer& source, std::size_t bytes, std::size_t shift) override {
    const auto* other = dynamic_cast<const GpuBuffer*>(&source);
    if (!other || other->ctx_ != ctx_ || bytes > bytes_ || bytes > other->bytes_) {
      Buffer::copy_rotated(source, bytes, shift);
      return;
    }
    shift %= bytes ? bytes : 1;
    auto lock = ctx_->acquire();
    Driver& driver = ctx_->driver();
    if (bytes > shift) ctx_->check(driver.copy_on_device(ptr_, other->ptr_ + shift, bytes - shift));
    if (shift) ctx_->check(driver.copy_on_device(ptr_ + (bytes - shift), other->ptr_, shift));
    ctx_->check(driver.synchronize());
  }

 private:
  void check_size(std::size_t bytes, const char* what) const {
    if (bytes > bytes_)
      throw Error(ErrorCode::BadUsage, ctx_->id() + " buffer " + what + ": " + std::to_string(bytes) +
                                           " bytes into a buffer of " + std::to_string(bytes_));
  }
  // Works out the red zones' pattern from their addresses and fills them; the caller holds the context's lock.
  Status fill_pattern() {
    pattern_.resize(front_ + back_);
    for (std::size_t i = 0; i < front_; ++i) pattern_[i] = devices::red_zone_byte(ptr_ - front_ + i);
    for (std::size_t i = 0; i < back_; ++i) pattern_[front_ + i] = devices::red_zone_byte(ptr_ + bytes_ + i);
    return arm();
  }
  // Fills both red zones with their pattern and waits; the caller holds the context's lock.
  Status arm() {
    Driver& driver = ctx_->driver();
    Status s = driver.copy_to_device(ptr_ - front_, pattern_.data(), front_);
    if (s.ok()) s = driver.copy_to_device(ptr_ + bytes_, pattern_.data() + front_, back_);
    if (s.ok()) s = driver.synchronize();
    return s;
  }
  std::shared_ptr<Context> ctx_;
  std::size_t bytes_;
  DevicePtr ptr_ = 0;  // the data, front_ bytes into the allocation
  bool owner_ = true;
  std::function<void()> released_;
  std::size_t front_ = 0, back_ = 0;    // the red zones' bytes, before the data and after it; 0 without
  std::vector<unsigned char> pattern_;  // what they hold: the front zone's bytes, then the back zone's
};

// A loaded module; unloaded when the last kernel from it is gone.
struct Module {
  std::shared_ptr<Context> ctx;
  ModuleHandle handle = nullptr;
  ~Module() {
    if (!handle) return;
    auto lock = ctx->acquire();
    ctx->driver().unload_module(handle);
  }
};

// A kernel's variants for integer arguments that are multiples of 16 (KernelLaunch::specializable), kept by the
// plain kernel that compile() handed out and compiled at the first launch that can run each.
struct Variants {
  KernelSource source;  // the plain kernel's
  std::string target;
  std::mutex mutex;
  // By mask: bit j set when the j-th specializable argument is a multiple of 16. Null: that variant could not be
  // had (a compile error, a time limit), and the plain kernel serves those launches.
  std::map<std::uint64_t, std::shared_ptr<Kernel>> by_mask;
};

class GpuKernel final : public Kernel {
 public:
  GpuKernel(std::shared_ptr<Module> module, FunctionHandle fn, std::map<std::string, std::int64_t> resources,
            KernelLaunch launch)
      : launch(std::move(launch)),
        static_shared(resource_of(resources, "shared_static_bytes")),
        max_threads(resource_of(resources, "max_threads_per_block")),
        module_(std::move(module)),
        fn_(fn),
        resources_(std::move(resources)) {}
  std::map<std::string, std::int64_t> resources() const override { return resources_; }
  FunctionHandle function() const { return fn_; }
  const Context* context() const { return module_->ctx.get(); }
  static std::int64_t resource_of(const std::map<std::string, std::int64_t>& resources, const char* name) {
    auto it = resources.find(name);
    return it == resources.end() ? 0 : it->second;
  }
  // The dynamic shared memory limit set on the function so far (CUDA's default is 48 KB less the static).
  std::int64_t dynamic_limit = -1;
  const KernelLaunch launch;
  // Read off the resources once: every launch asks (a callable program's call is on a host's hot path).
  const std::int64_t static_shared;
  const std::int64_t max_threads;
  std::vector<std::unique_ptr<Buffer>> scratch;  // per KernelLaunch::scratch, grown as grids grow
  std::shared_ptr<Variants> variants;            // a plain kernel's whose launch lists specializable arguments

 private:
  std::shared_ptr<Module> module_;
  FunctionHandle fn_;
  std::map<std::string, std::int64_t> resources_;
};

// The launch a kernel gets: the rule's, overridden by what its compiler fixed (Triton's block and shared memory).
LaunchDims as_launched(const GpuKernel& kernel, const LaunchDims& rule) {
  LaunchDims dims = rule;
  const KernelLaunch& fixed = kernel.launch;
  if (fixed.block_threads) dims.block[0] = fixed.block_threads, dims.block[1] = dims.block[2] = 1;
  dims.shared_bytes = std::max<std::int64_t>(dims.shared_bytes, fixed.shared_bytes);
  return dims;
}

// The kernel that runs a launch of `kernel` with `args`: the variant for exactly those of its specializable
// integer arguments that are multiples of 16 in `args` (made by `compile_variant` on first use), or `kernel`
// itself when none is, or when that variant cannot be had. A subset would be as safe; exactly these is what
// Triton's launcher would run.
template <class CompileVariant>
GpuKernel* specialized(GpuKernel& kernel, void** args, CompileVariant&& compile_variant) {
  Variants* variants = kernel.variants.get();
  if (!variants) return &kernel;
  const std::vector<KernelLaunch::IntArg>& ints = kernel.launch.specializable;
  std::uint64_t mask = 0;
  for (std::size_t j = 0; j < ints.size() && j < 64; ++j) {
    const KernelLaunch::IntArg& a = ints[j];
    if (a.index >= kernel.launch.params || !args[a.index]) continue;
    // Exactly the bytes the kernel reads (a plan's values are 8 bytes whatever the param's width).
    std::int64_t value = 0;
    if (a.bytes == 4) {
      std::int32_t narrow = 0;
      std::memcpy(&narrow, args[a.index], 4);
      value = narrow;
    } else if (a.bytes == 8) {
      std::memcpy(&value, args[a.index], 8);
    } else {
      continue;
    }
    if (value % 16 != 0) continue;
    mask |= std::uint64_t{1} << j;
  }
  if (!mask) return &kernel;
  std::lock_guard lock(variants->mutex);
  auto it = variants->by_mask.find(mask);
  if (it == variants->by_mask.end()) {
    std::vector<std::size_t> divisible;  // the params whose bits are set
    for (std::size_t j = 0; j < ints.size() && j < 64; ++j)
      if ((mask >> j) & 1) divisible.push_back(ints[j].index);
    it = variants->by_mask.emplace(mask, compile_variant(variants->source, variants->target, divisible)).first;
  }
  // Only this core's own kernels are kept: a variant is loaded by the device of its plain kernel.
  auto* variant = dynamic_cast<GpuKernel*>(it->second.get());
  return variant ? variant : &kernel;
}

// ke_compare's record of a block's worst element (the CUDA device's verify_kernels.hpp).
struct Worst {
  double excess;
  long long index;
  double got, expected;
};
static_assert(sizeof(Worst) == 4 * sizeof(double));

}  // namespace

std::string Context::failed(const std::string& call, int code) {
  std::string message = call + ": " + driver_->error_text(code);
  bool poisoned = driver_->is_sticky(code);
  if (!poisoned && !driver_->is_benign(code)) poisoned = !driver_->synchronize_device().ok();
  if (poisoned) {
    std::lock_guard lock(poison_mutex_);
    if (healthy_.load()) {
      poison_ = message;  // before healthy_ turns false, so that whoever sees it false finds the reason
      healthy_.store(false);
    }
  }
  return message;
}

std::string Context::poison() const {
  std::lock_guard lock(poison_mutex_);
  return poison_;
}

GpuDevice::GpuDevice(std::unique_ptr<Driver> driver, std::string id, Language language)
    : ctx_(std::make_shared<Context>(std::move(driver), std::move(id))), language_(language) {}

void GpuDevice::start(const Setup& setup) {
  setup_ = setup;
  compute_units_ = std::max(1, info_.compute_units);
  auto unavailable = [&](const std::string& why) {
    return Error(ErrorCode::DeviceUnavailable, "device '" + ctx_->id() + "': " + why);
  };
  try {
    flush_buffer_ = allocate(std::max<std::size_t>(2 * setup.l2_bytes, 8u << 20));
    const unsigned char zero = 0;
    flush_buffer_->fill(&zero, 1);  // ke_flush's sink is never written while it reads zeros
  } catch (const std::exception& e) {
    throw unavailable(std::string("the L2 flush buffer: ") + e.what());
  }
  KernelSource ks;
  ks.source = kCeilingKernels;
  ks.language = language_;
  std::shared_ptr<Kernel>* slots[] = {&copy_kernel_, &fma_kernel_, &flush_kernel_, &spin_kernel_};
  const char* entries[] = {"ke_copy", "ke_fma", "ke_flush", "ke_spin"};
  for (int i = 0; i < 4; ++i) {
    ks.entry = entries[i];
    CompileResult r = compile(ks);
    if (!r.ok()) throw unavailable(setup.compiler + " cannot compile:\n" + r.log);
    *slots[i] = r.kernel;
  }
  flush_fn_ = static_cast<GpuKernel&>(*flush_kernel_).function();
  if (const auto it = info_.properties.find("clock_mhz"); it != info_.properties.end()) {
    try {
      spin_cycles_per_us_ = std::stod(it->second);
    } catch (const std::exception&) {
      spin_cycles_per_us_ = 0;
    }
  }
  void* null_ptr = nullptr;
  unsigned long long zero = 0;
  void* args[] = {&null_ptr, &null_ptr, &zero};
  const LaunchResult warm = launch(*copy_kernel_, args, LaunchDims{}, true, true);
  if (!warm.ok) throw unavailable(warm.error);
}

const DeviceInfo& GpuDevice::info() {
  std::call_once(ceilings_once_, [this] {
    const double nominal = setup_.nominal_flops;
    std::string how;
    const Ceilings c = load_or_measure(
        setup_.ceilings_key, info_.name, setup_.driver_version, [this] { return measure(); },
        // Kept only when plausible: a busy GPU measured at a fraction of its rate would mark honest
        // kernels of every later run as impossibly fast.
        [nominal](const Ceilings& m) {
          return m.copy_bytes_per_s > 0 && m.fma_flops_per_s > 0 && (nominal <= 0 || m.fma_flops_per_s > 0.5 * nominal);
        },
        how);
    apply(info_, c, how);
  });
  return info_;
}

std::unique_ptr<Buffer> GpuDevice::allocate(std::size_t bytes) { return std::make_unique<GpuBuffer>(ctx_, bytes); }

std::unique_ptr<Buffer> GpuDevice::allocate_unguarded(std::size_t bytes) {
  return std::make_unique<GpuBuffer>(ctx_, bytes, /*guarded=*/false);
}

std::unique_ptr<Buffer> GpuDevice::view(Buffer& parent, std::size_t offset, std::size_t bytes,
                                        std::function<void()> released, std::size_t front_zone, std::size_t back_zone) {
  auto* p = dynamic_cast<GpuBuffer*>(&parent);
  if (!p || p->context() != ctx_ || front_zone > offset || offset + bytes + back_zone > p->bytes()) return nullptr;
  return std::make_unique<GpuBuffer>(ctx_, p->ptr() + offset, bytes, std::move(released), front_zone, back_zone);
}

std::unique_ptr<Buffer> GpuDevice::adopt(DevicePtr ptr, std::size_t bytes, std::function<void()> released) {
  return std::make_unique<GpuBuffer>(ctx_, ptr, bytes, std::move(released));
}

CompileResult GpuDevice::compile(const KernelSource& ks) {
  const auto start = Clock::now();
  CompileResult result;
  auto done = [&]() -> CompileResult& {
    result.compile_ms = ms_since(start);
    return result;
  };
  const bool more = std::find(more_languages_.begin(), more_languages_.end(), ks.language) != more_languages_.end();
  result.log = refusal(ks, more ? ks.language : language_, ctx_->id(), healthy(), ctx_->poison());
  if (!result.log.empty()) return done();
  const std::string to = target(ks, result.log);
  if (to.empty()) return done();

  std::ostringstream key_stream;
  key_stream << to << '\0' << ks.entry << '\0';
  for (const auto& [name, value] : ks.defines) key_stream << name << '=' << value << ';';
  key_stream << '\0';
  for (const auto& f : ks.flags) key_stream << f << '\x1f';
  key_stream << '\0' << ks.source;
  const std::string key = key_stream.str();
  if ((result.kernel = cache_.find(key))) {
    result.cached = true;
    return done();
  }
  Build built = build(ks, to, result.log);
  if (built.image.empty()) {
    result.refused = built.refused;
    return done();
  }
  if (std::shared_ptr<Kernel> kernel = load(built, built.symbol.empty() ? ks.entry : built.symbol, result.log)) {
    if (!built.launch.specializable.empty()) {
      auto variants = std::make_shared<Variants>();
      variants->source = ks;
      variants->target = to;
      static_cast<GpuKernel&>(*kernel).variants = std::move(variants);
    }
    result.kernel = cache_.insert(key, std::move(kernel));
  }
  return done();
}

GpuDevice::Build GpuDevice::build_variant(const KernelSource& ks, const std::string& target,
                                          const std::vector<std::size_t>& divisible, std::string& log) {
  (void)ks, (void)target, (void)divisible, (void)log;
  return {};
}

std::shared_ptr<Kernel> GpuDevice::load_variant(const KernelSource& ks, const std::string& target,
                                                const std::vector<std::size_t>& divisible) {
  // A variant that cannot be had leaves its launches to the plain kernel, which compiled: never an error, but said
  // on stderr (as the verification kernels' absence is), since those launches run slower than they could.
  std::string log;
  std::shared_ptr<Kernel> kernel;
  try {
    if (!healthy()) return nullptr;
    Build built = build_variant(ks, target, divisible, log);
    if (!built.image.empty()) kernel = load(built, built.symbol.empty() ? ks.entry : built.symbol, log);
  } catch (const std::exception& e) {
    log += std::string("error: ") + e.what() + "\n";  // Triton's helper gone, no memory
  }
  if (!kernel && !log.empty()) {
    std::string params;
    for (std::size_t i : divisible) params += (params.empty() ? "" : ", ") + ks.params.at(i).name;
    std::fprintf(stderr,
                 "kernelevolve: %s: '%s' assuming %s multiples of 16 did not compile; its plain compile runs those "
                 "launches:\n%s",
                 ctx_->id().c_str(), ks.entry.c_str(), params.c_str(), log.substr(0, 2000).c_str());
  }
  return kernel;
}

std::shared_ptr<Kernel> GpuDevice::load(Build& built, const std::string& entry, std::string& log) {
  Driver& driver = ctx_->driver();
  auto module = std::make_shared<Module>();
  module->ctx = ctx_;
  FunctionHandle fn = nullptr;
  std::map<std::string, std::int64_t> resources;
  {
    auto lock = ctx_->acquire();
    if (const Status s = driver.load_module(module->handle, built.image.data()); !s.ok()) {
      module->handle = nullptr;
      log += "error: " + ctx_->failed(s) + "\n";
      return nullptr;
    }
    if (const Status s = driver.get_function(fn, module->handle, entry.c_str()); !s.ok()) {
      log += "error: the module has no kernel named '" + entry + "' (" + driver.error_text(s.code) +
             "); declare it extern \"C\" __global__ so its name is not mangled\n";
      return nullptr;  // the module unloads with `module`, once the lock is released
    }
    resources = driver.resources(fn);
  }
  for (auto& [name, value] : built.resources) resources[name] = value;
  return std::make_shared<GpuKernel>(std::move(module), fn, std::move(resources), built.launch);
}

Status GpuDevice::flush_l2() {
  Driver& driver = ctx_->driver();
  const DevicePtr buffer = device_ptr(flush_buffer_->data());
  if (!flush_fn_) return driver.set(buffer, 0, 1, flush_buffer_->bytes());
  DevicePtr p = buffer;
  unsigned long long n = flush_buffer_->bytes() / 16;
  void* args[] = {&p, &n, &p};
  const unsigned grid[3] = {static_cast<unsigned>(compute_units_ * 4), 1, 1};
  const unsigned block[3] = {512, 1, 1};
  return driver.launch(flush_fn_, grid, block, 0, args);
}

LaunchResult GpuDevice::launch(Kernel& kernel, void** args, const LaunchDims& rule, bool timed, bool flush_cache) {
  return launch_steps({LaunchStep{&kernel, args, rule}}, timed, flush_cache);
}

namespace {

// A step made ready to be queued: its kernel, its dimensions as launched and its arguments (with the scratch
// pointers its compiler asked for).
struct ReadyStep {
  GpuKernel* kernel = nullptr;
  LibraryKernel* library = nullptr;
  LaunchDims dims;
  void** args = nullptr;
  std::vector<void*> extended;
  std::vector<DevicePtr> scratch_ptrs;
};

}  // namespace

LaunchResult GpuDevice::launch_steps(const std::vector<LaunchStep>& steps, bool timed, bool flush_cache,
                                     std::vector<double>* each) {
  return run_steps(steps, timed, flush_cache, each, std::nullopt);
}

LaunchResult GpuDevice::enqueue_steps(const std::vector<LaunchStep>& steps, void* stream) {
  return run_steps(steps, false, false, nullptr, stream);
}

LaunchResult GpuDevice::run_steps(const std::vector<LaunchStep>& steps, bool timed, bool flush_cache,
                                  std::vector<double>* each, const std::optional<void*>& caller_stream) {
  LaunchResult result;
  auto fail = [&](std::size_t step, std::string message) {
    result.ok = false;
    result.failed_step = step;
    result.error = std::move(message);
    return result;
  };
  if (each) each->clear();
  if (!healthy()) return fail(0, unusable(ctx_->id(), ctx_->poison()));
  // Everything that may allocate (scratch memory) is done before the stream's lock is taken.
  std::vector<ReadyStep> ready(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    ReadyStep& r = ready[i];
    r.args = steps[i].args;
    if (auto* lib = dynamic_cast<LibraryKernel*>(steps[i].kernel); lib && lib->device() == this) {
      r.library = lib;
      continue;
    }
    auto* k = dynamic_cast<GpuKernel*>(steps[i].kernel);
    if (!k || k->context() != ctx_.get()) return fail(i, ctx_->id() + ": the kernel was not compiled by this device");
    // Where its integer arguments allow, the kernel's variant that assumes they are multiples of 16 (Triton's).
    k = specialized(*k, steps[i].args,
                    [this](const KernelSource& ks, const std::string& to, const std::vector<std::size_t>& divisible) {
                      return load_variant(ks, to, divisible);
                    });
    r.kernel = k;
    // What the kernel's compiler fixed (Triton's block, shared memory and scratch pointers) overrides the rule.
    r.dims = as_launched(*k, steps[i].dims);
    const KernelLaunch& fixed = k->launch;
    if (std::string why = invalid_launch(r.dims); !why.empty()) return fail(i, why);
    if (fixed.scratch.empty()) continue;
    r.scratch_ptrs.assign(fixed.scratch.size(), 0);
    const auto programs = static_cast<std::size_t>(r.dims.grid[0] * r.dims.grid[1] * r.dims.grid[2]);
    k->scratch.resize(fixed.scratch.size());
    for (std::size_t s = 0; s < fixed.scratch.size(); ++s) {
      const auto& need = fixed.scratch[s];
      if (!need.bytes) continue;
      const std::size_t bytes = programs * need.bytes + need.align;
      try {
        if (!k->scratch[s] || k->scratch[s]->bytes() < bytes) k->scratch[s] = allocate(bytes);
      } catch (const std::exception& e) {
        return fail(i, std::string("the kernel's scratch memory: ") + e.what());
      }
      const DevicePtr base = device_ptr(k->scratch[s]->data());
      r.scratch_ptrs[s] = (base + need.align - 1) / need.align * need.align;
    }
    r.extended.assign(r.args, r.args + fixed.params);
    for (DevicePtr& p : r.scratch_ptrs) r.extended.push_back(&p);
    r.args = r.extended.data();
  }
  Driver& driver = ctx_->driver();
  auto lock = ctx_->acquire();
  // Queues step i; "" or why it failed (nothing is then queued, and the stream is still good).
  auto enqueue = [&](std::size_t i) -> std::string {
    ReadyStep& r = ready[i];
    if (r.library) return r.library->enqueue(driver.stream(), r.args);
    GpuKernel* k = r.kernel;
    const LaunchDims& dims = r.dims;
    // Above the default 48 KB (less the static part) a CUDA kernel must opt in to more dynamic shared memory.
    const std::int64_t static_shared = k->static_shared;
    if (dims.shared_bytes > std::max(48 * 1024 - static_shared, k->dynamic_limit)) {
      const Status s = driver.allow_dynamic_shared(k->function(), static_cast<int>(dims.shared_bytes));
      if (!s.ok()) {
        return "cannot give the kernel " + std::to_string(dims.shared_bytes) + " bytes of dynamic shared memory (" +
               std::to_string(static_shared) + " static; the device allows " + setup_.shared_optin +
               " per block): " + ctx_->failed(s);
      }
      k->dynamic_limit = dims.shared_bytes;
    }
    unsigned grid[3], block[3];
    for (int d = 0; d < 3; ++d) {
      grid[d] = static_cast<unsigned>(dims.grid[d]);
      block[d] = static_cast<unsigned>(dims.block[d]);
    }
    const Status s = driver.launch(k->function(), grid, block, static_cast<unsigned>(dims.shared_bytes), r.args);
    if (s.ok()) return "";
    std::ostringstream msg;
    msg << s.call << "(grid " << dims.grid[0] << "x" << dims.grid[1] << "x" << dims.grid[2] << ", block "
        << dims.block[0] << "x" << dims.block[1] << "x" << dims.block[2] << ", " << dims.shared_bytes
        << " B dynamic shared) failed: " << ctx_->failed(s);
    const std::int64_t max_threads = k->max_threads;
    if (max_threads > 0 && dims.block[0] * dims.block[1] * dims.block[2] > max_threads)
      msg << "; the kernel allows at most " << max_threads << " threads per block";
    return msg.str();
  };
  // Queues steps [from, to) between the two events when timed, waits for them, and adds their time.
  auto run = [&](std::size_t from, std::size_t to, bool time_them, bool flush, double& us) -> bool {
    if (time_them && flush) {
      if (const Status s = flush_l2(); !s.ok()) return fail(from, ctx_->failed("L2 flush", s.code)), false;
    }
    if (time_them && spin_kernel_ && spin_cycles_per_us_ > 0) {
      long long cycles = static_cast<long long>(std::max(kMinHoldUs, 2 * last_queue_us_) * spin_cycles_per_us_);
      void* spin_args[] = {&cycles};
      const unsigned one[3] = {1, 1, 1};
      if (const Status s = driver.launch(static_cast<GpuKernel&>(*spin_kernel_).function(), one, one, 0, spin_args);
          !s.ok())
        return fail(from, ctx_->failed("the hold before a timed launch", s.code)), false;
    }
    if (time_them) {
      if (const Status s = driver.record_start(); !s.ok()) return fail(from, ctx_->failed(s)), false;
    }
    const auto queue_start = std::chrono::steady_clock::now();
    for (std::size_t i = from; i < to; ++i) {
      if (std::string why = enqueue(i); !why.empty()) {
        // A failed launch leaves nothing queued; what was queued before it is waited for.
        driver.synchronize();
        return fail(i, why), false;
      }
    }
    if (time_them) {
      last_queue_us_ =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - queue_start).count();
      result.host_us += last_queue_us_;
      if (const Status s = driver.record_stop(); !s.ok()) return fail(from, ctx_->failed(s)), false;
    }
    if (const Status s = driver.synchronize(); !s.ok()) {
      return fail(to - 1, (to - from > 1 ? "the kernels failed: " : "the kernel failed: ") + ctx_->failed(s)), false;
    }
    if (time_them) {
      float ms = 0;
      if (const Status s = driver.elapsed_ms(ms); !s.ok()) return fail(from, ctx_->failed(s)), false;
      us += static_cast<double>(ms) * 1000.0;
    }
    return true;
  };
  if (caller_stream) {
    // Queued on the caller's stream (a library step reads driver.stream() too), then ours is put back. Nothing
    // is waited for: a failure to queue leaves nothing of its step queued, and later steps are not queued.
    struct Restore {
      Driver& driver;
      void* ours;
      ~Restore() { driver.swap_stream(ours); }
    } restore{driver, driver.swap_stream(*caller_stream)};
    for (std::size_t i = 0; i < ready.size(); ++i) {
      if (std::string why = enqueue(i); !why.empty()) return fail(i, why);
    }
    return result;
  }
  if (!each) {
    run(0, ready.size(), timed, flush_cache, result.time_us);
    return result;
  }
  for (std::size_t i = 0; i < ready.size(); ++i) {
    double us = 0;
    if (!run(i, i + 1, true, flush_cache && i == 0, us)) return result;
    each->push_back(us);
    result.time_us += us;
  }
  return result;
}

std::map<std::string, std::int64_t> GpuDevice::launch_resources(Kernel& kernel, const LaunchDims& rule) {
  auto* k = dynamic_cast<GpuKernel*>(&kernel);
  if (!k || k->context() != ctx_.get() || !healthy()) return {};
  const LaunchDims dims = as_launched(*k, rule);
  if (!invalid_launch(dims).empty()) return {};
  const std::int64_t threads = dims.block[0] * dims.block[1] * dims.block[2];
  std::map<std::string, std::int64_t> out{{"block_threads", threads}, {"dynamic_shared_bytes", dims.shared_bytes}};
  if (threads > INT_MAX) return out;
  Driver::Occupancy occupancy;
  Status s;
  {
    auto lock = ctx_->acquire();
    s = ctx_->driver().occupancy(k->function(), static_cast<int>(threads), static_cast<std::size_t>(dims.shared_bytes),
                                 occupancy);
  }
  // A question the driver cannot answer says nothing of the kernel: its occupancy stays unknown, and the
  // device is not suspected (Context::failed is for calls that ran work).
  if (!s.ok()) return out;
  out["active_blocks_per_sm"] = occupancy.blocks_per_sm;
  if (occupancy.max_threads_per_sm > 0 && occupancy.warp_size > 0) {
    // Warps are what an SM schedules: a block of 100 threads holds 4 warps of 32.
    const std::int64_t warps_per_block = (threads + occupancy.warp_size - 1) / occupancy.warp_size;
    const std::int64_t max_warps = std::max(1, occupancy.max_threads_per_sm / occupancy.warp_size);
    out["occupancy_pct"] = std::min<std::int64_t>(100, 100 * occupancy.blocks_per_sm * warps_per_block / max_warps);
  }
  return out;
}

bool GpuDevice::verify_kernels() {
  if (!setup_.verify_source) return false;
  std::call_once(verify_once_, [this] {
    KernelSource ks;
    ks.source = setup_.verify_source;
    ks.language = language_;
    std::shared_ptr<Kernel>* slots[] = {&fill_kernel_, &compare_kernel_, &digest_kernel_};
    const char* entries[] = {"ke_fill", "ke_compare", "ke_digest"};
    for (int i = 0; i < 3; ++i) {
      ks.entry = entries[i];
      CompileResult r = compile(ks);
      if (!r.ok()) {
        std::fprintf(stderr, "kernelevolve: %s: verifying on the host: the verification kernels do not compile:\n%s",
                     ctx_->id().c_str(), r.log.c_str());
        fill_kernel_.reset();
        return;
      }
      *slots[i] = r.kernel;
    }
    scratch_ = allocate(static_cast<std::size_t>(compute_units_) * kVerifyBlocksPerCu * sizeof(Worst));
  });
  return fill_kernel_ != nullptr && healthy();
}

unsigned GpuDevice::verify_blocks(std::size_t work) const {
  const std::size_t wanted = (work + kVerifyThreads - 1) / kVerifyThreads;
  return static_cast<unsigned>(std::max<std::size_t>(
      1, std::min<std::size_t>(wanted, static_cast<std::size_t>(compute_units_) * kVerifyBlocksPerCu)));
}

void GpuDevice::run_verify(Kernel& kernel, void** args, unsigned blocks, void* result, std::size_t result_bytes,
                           bool zero) {
  Driver& driver = ctx_->driver();
  const DevicePtr scratch = device_ptr(scratch_->data());
  auto lock = ctx_->acquire();
  if (zero) ctx_->check(driver.set(scratch, 0, 1, result_bytes));
  const unsigned grid[3] = {blocks, 1, 1};
  const unsigned block[3] = {kVerifyThreads, 1, 1};
  ctx_->check(driver.launch(static_cast<GpuKernel&>(kernel).function(), grid, block, 0, args));
  if (result_bytes) ctx_->check(driver.copy_to_host(result, scratch, result_bytes));
  ctx_->check(driver.synchronize());
}

bool GpuDevice::fill_random(Buffer& buffer, DType dtype, std::size_t count, const InputDist& dist, std::uint64_t seed) {
  if (!verify_kernels() || count * dtype_size(dtype) > buffer.bytes()) return false;
  std::lock_guard lock(verify_mutex_);
  void* out = buffer.data();
  unsigned long long n = count;
  int type = static_cast<int>(dtype);
  int kind = static_cast<int>(dist.kind) + (dist.sorted ? 8 : 0);
  double a = dist.a, b = dist.b;
  unsigned long long s = seed;
  void* args[] = {&out, &n, &type, &kind, &a, &b, &s};
  run_verify(*fill_kernel_, args, verify_blocks(count), nullptr, 0, false);
  return true;
}

bool GpuDevice::compare(const Buffer& got, const Buffer& expected, DType dtype, std::size_t count, const Tolerance& tol,
                        Comparison& result) {
  if (!verify_kernels() || count * dtype_size(dtype) > std::min(got.bytes(), expected.bytes())) return false;
  std::lock_guard lock(verify_mutex_);
  void* g = const_cast<Buffer&>(got).data();
  void* e = const_cast<Buffer&>(expected).data();
  unsigned long long n = count;
  int type = static_cast<int>(dtype);
  double atol = tol.atol, rtol = tol.rtol;
  void* out = scratch_->data();
  void* args[] = {&g, &e, &n, &type, &atol, &rtol, &out};
  const unsigned blocks = verify_blocks(count);
  std::vector<Worst> worst(blocks);
  run_verify(*compare_kernel_, args, blocks, worst.data(), blocks * sizeof(Worst), false);
  result = Comparison{};
  for (const Worst& w : worst) {  // as the kernel's own reduction: larger, then earlier
    if (w.index < 0) continue;
    if (w.excess > result.excess ||
        (w.excess == result.excess && (result.worst_index < 0 || w.index < result.worst_index))) {
      result.excess = w.excess;
      result.worst_index = w.index;
      result.got = w.got;
      result.expected = w.expected;
    }
  }
  result.pass = !(result.excess > 0);
  return true;
}

bool GpuDevice::digest(const Buffer& buffer, std::size_t bytes, std::uint64_t& result) {
  if (!verify_kernels() || bytes > buffer.bytes()) return false;
  std::lock_guard lock(verify_mutex_);
  void* p = const_cast<Buffer&>(buffer).data();
  unsigned long long n = bytes;
  void* out = scratch_->data();
  void* args[] = {&p, &n, &out};
  unsigned long long sum = 0;
  run_verify(*digest_kernel_, args, verify_blocks(bytes / 8 + 1), &sum, sizeof sum, true);
  result = sum;
  return true;
}

double GpuDevice::best_ms(Kernel& kernel, void** args, const LaunchDims& dims, int reps) {
  double best = -1;
  for (int i = 0; i < reps; ++i) {
    const LaunchResult r = launch(kernel, args, dims, /*timed=*/true, /*flush_cache=*/true);
    if (!r.ok) return -1;
    if (best < 0 || r.time_us / 1000.0 < best) best = r.time_us / 1000.0;
  }
  return best;
}

double GpuDevice::best_memcpy_ms(DevicePtr dst, DevicePtr src, std::size_t bytes, int reps) {
  Driver& driver = ctx_->driver();
  auto lock = ctx_->acquire();
  double best = -1;
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    if (!driver.record_start().ok() || !driver.copy_on_device(dst, src, bytes).ok() || !driver.record_stop().ok() ||
        !driver.synchronize().ok() || !driver.elapsed_ms(ms).ok()) {
      return -1;
    }
    if (best < 0 || ms < best) best = ms;
  }
  return best;
}

// The FMA rate of ke_fma with every compute unit full of threads, in flop/s; 0 when it cannot run.
double GpuDevice::measure_fma_flops() {
  try {
    LaunchDims dims;
    dims.grid[0] = static_cast<std::int64_t>(compute_units_) * 8;
    dims.block[0] = 256;
    auto out = allocate(static_cast<std::size_t>(dims.grid[0] * dims.block[0]) * 4);
    void* o = out->data();
    int iters = 1 << 14;
    float b = 0.999f, c = 0.001f;
    void* args[] = {&o, &iters, &b, &c};
    launch(*fma_kernel_, args, dims, false, false);  // warm-up: clocks, first-launch costs
    iters = 1 << 16;
    const double ms = best_ms(*fma_kernel_, args, dims, 3);  // flushed like every timed candidate
    if (ms <= 0) return 0;
    return 2.0 * 16.0 * iters * static_cast<double>(dims.grid[0] * dims.block[0]) / (ms * 1e-3);
  } catch (const std::exception&) {
    return 0;  // too little memory for the output: the roofline then has no flop ceiling
  }
}

double GpuDevice::measure_mma_flops(const char* entry) {
  if (!setup_.tensor_source) return 0;
  try {
    KernelSource ks;
    ks.source = setup_.tensor_source;
    ks.language = language_;
    ks.entry = entry;
    const CompileResult built = compile(ks);
    if (!built.ok()) return 0;
    LaunchDims dims;
    dims.grid[0] = static_cast<std::int64_t>(compute_units_) * 4;  // 32 warps an SM: 8 a scheduler
    dims.block[0] = 256;
    auto out = allocate(static_cast<std::size_t>(dims.grid[0] * dims.block[0]) * 4);
    void* o = out->data();
    int iters = 1 << 10;
    // 2^-7 in each half (bf16 0x3c00, fp16 0x2000): the sums stay small and finite; zeros might draw less power.
    unsigned a_bits = std::string(entry) == "ke_mma_bf16" ? 0x3c003c00u : 0x20002000u, b_bits = a_bits;
    void* args[] = {&o, &iters, &a_bits, &b_bits};
    if (!launch(*built.kernel, args, dims, false, false).ok) return 0;  // warm-up: clocks, first-launch costs
    iters = 1 << 14;
    const double ms = best_ms(*built.kernel, args, dims, 3);  // timed as the FMA kernel is
    if (ms <= 0) return 0;
    const double warps = static_cast<double>(dims.grid[0] * dims.block[0]) / 32;
    return 4096.0 * 8 * iters * warps / (ms * 1e-3);  // 8 mma of 2 x 16 x 8 x 16 flops a warp's iteration
  } catch (const std::exception&) {
    return 0;
  }
}

double GpuDevice::measure_library_flops(DType dtype) {
  if (setup_.tensor_library_step.empty()) return 0;
  constexpr std::int64_t kSize = 8192;  // large enough for a library's best kernels, a few ms
  const std::size_t bytes = static_cast<std::size_t>(kSize * kSize) * dtype_size(dtype);
  if (setup_.memory_bytes && 4 * bytes > setup_.memory_bytes / 2) return 0;  // A, B, D and a workspace
  try {
    const std::vector<Param> signature = {
        Param{"A", dtype, Role::in, {"M", "K"}},  Param{"B", dtype, Role::in, {"K", "N"}},
        Param{"D", dtype, Role::out, {"M", "N"}}, Param{"M", DType::i64, Role::size, {}},
        Param{"N", DType::i64, Role::size, {}},   Param{"K", DType::i64, Role::size, {}}};
    std::string log;
    const std::shared_ptr<Kernel> step = library_step(setup_.tensor_library_step, {}, signature, log);
    if (!step) return 0;
    auto a = allocate(bytes), b = allocate(bytes), d = allocate(bytes);
    const std::uint16_t value = dtype == DType::bf16 ? 0x3c00 : 0x2000;  // 2^-7: each output sums to 0.5
    a->fill(&value, 2);
    b->fill(&value, 2);
    void* pa = a->data();
    void* pb = b->data();
    void* pd = d->data();
    std::int64_t m = kSize, n = kSize, k = kSize;
    void* args[] = {&pa, &pb, &pd, &m, &n, &k};
    const LaunchDims dims;                                      // a library step's own
    if (!launch(*step, args, dims, false, false).ok) return 0;  // the first call chooses the algorithm
    const double ms = best_ms(*step, args, dims, 3);
    if (ms <= 0) return 0;
    return 2.0 * static_cast<double>(kSize) * kSize * kSize / (ms * 1e-3);
  } catch (const std::exception&) {
    return 0;  // too little memory: the mma kernel's rate alone
  }
}

void GpuDevice::measure_tensor_flops(Ceilings& c) {
  auto tflops = [](double rate) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f TFLOP/s", rate / 1e12);
    return std::string(buf);
  };
  struct Kind {
    DType dtype;
    const char* name;
    const char* entry;
    double* rate;
  };
  for (const Kind& kind : {Kind{DType::bf16, "bf16", "ke_mma_bf16", &c.bf16_tensor_flops_per_s},
                           Kind{DType::f16, "fp16", "ke_mma_f16", &c.fp16_tensor_flops_per_s}}) {
    const double mma = measure_mma_flops(kind.entry);
    const double library = measure_library_flops(kind.dtype);
    std::string parts;
    if (mma > 0) parts += "mma.sync " + tflops(mma);
    if (library > 0) parts += (parts.empty() ? "" : ", ") + setup_.tensor_library_step + " 8192^3 " + tflops(library);
    if (parts.empty()) continue;
    *kind.rate = std::max(mma, library);
    // Tensor cores run several times the FMA units' rate: a rate not above it measured a busy or throttled GPU,
    // and a ceiling set too low would call honest kernels impossibly fast. None is kept then.
    if (c.fma_flops_per_s > 0 && !(*kind.rate > c.fma_flops_per_s)) {
      *kind.rate = 0;
      parts += ", not above the FMA rate: not kept";
    }
    c.tensor_how += std::string(c.tensor_how.empty() ? "" : "; ") + kind.name + ": " + parts;
  }
}

Ceilings GpuDevice::measure() {
  Ceilings c;
  // Copy: two buffers of up to 1 GiB each (far beyond any L2), bytes read plus written.
  const std::size_t bytes =
      std::max<std::size_t>(std::min<std::size_t>(1ull << 30, setup_.memory_bytes / 8) / 16 * 16, 16);
  try {
    auto src = allocate(bytes);
    auto dst = allocate(bytes);
    const unsigned char a = 0x5a, b = 0xa5;  // not zeros: some memory systems move zeros faster than data
    src->fill(&a, 1);
    dst->fill(&b, 1);
    void* s = src->data();
    void* d = dst->data();
    unsigned long long n = bytes / 16;
    void* args[] = {&s, &d, &n};
    LaunchDims dims;
    dims.grid[0] = compute_units_ * 16;
    dims.block[0] = 256;
    launch(*copy_kernel_, args, dims, false, false);  // warm-up: pages, clocks
    const double copy_ms = best_ms(*copy_kernel_, args, dims, 10);
    if (copy_ms > 0) c.copy_bytes_per_s = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3);
    // The driver's own device-to-device copy too: the ceiling is the faster of the two.
    const double memcpy_ms = best_memcpy_ms(device_ptr(d), device_ptr(s), bytes, 10);
    if (memcpy_ms > 0)
      c.copy_bytes_per_s = std::max(c.copy_bytes_per_s, 2.0 * static_cast<double>(bytes) / (memcpy_ms * 1e-3));
    // A copy that stays in L2 (a quarter of it each way), many times in one timing: the cache's rate.
    unsigned long long small = std::max<unsigned long long>(setup_.l2_bytes / 4, 1 << 20) / 16;
    void* small_args[] = {&s, &d, &small};
    const double l2_ms = best_ms(*copy_kernel_, small_args, dims, 20);
    if (l2_ms > 0) c.l2_bytes_per_s = 2.0 * static_cast<double>(small) * 16 / (l2_ms * 1e-3);
  } catch (const std::exception&) {
    // Too little free memory: leave the copy ceiling unmeasured (0); the roofline then has no byte floor.
  }
  c.fma_flops_per_s = measure_fma_flops();
  measure_tensor_flops(c);
  return c;
}

}  // namespace kernelevolve::gpu
