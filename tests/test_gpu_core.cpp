// The GPU core (src/devices/gpu/gpu_device.hpp) that the CUDA and HIP devices share, run without a GPU
// over a fake Driver: device memory is host memory, kernels are host functions looked up by name, events
// read a fixed time, and errors can be injected. Buffers (copies, fills, rotation, views), the module
// cache, launch checks, the dynamic shared memory opt-in, timing with the L2 flush, the poisoned-context
// rule, lifetimes, and the evaluator's GPU path all run here; the real drivers only in the GPU tests.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <kernelevolve/device.hpp>
#include <kernelevolve/diagnosis.hpp>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "devices/gpu/common.hpp"
#include "devices/gpu/gpu_device.hpp"

namespace ke = kernelevolve;
namespace gpu = kernelevolve::gpu;

namespace {

constexpr int kIllegalAddress = 700;  // sticky, as CUDA's
constexpr int kInvalidValue = 1;      // benign
constexpr int kOutOfResources = 701;  // benign
constexpr int kNotFound = 500;        // benign

// What the fake GPU did, for the tests to inspect; outlives the driver.
struct FakeGpu {
  using HostKernel = std::function<int(const unsigned* grid, const unsigned* block, void** args)>;
  std::map<std::string, HostKernel> kernels;
  int live_allocations = 0;
  int live_modules = 0;
  int flushes = 0;
  std::vector<long long> holds;  // each ke_spin's cycles: the hold before a timed launch
  int opt_ins = 0;
  bool driver_alive = false;
  int pending = 0;        // an error the kernel left, reported by the next synchronize
  bool lost = false;      // after a sticky error every call fails
  std::string fail_next;  // the next call of this name fails with kInvalidValue
  // The SM the occupancy calculator answers for (an H100's limits), and what each kernel uses of it.
  int registers = 32;  // per thread, every kernel
  int occupancy_queries = 0;
  // The stream calls run on (the device's own unless a caller's was swapped in), each launch's, and the waits.
  void* stream = reinterpret_cast<void*>(0x5742);
  std::vector<void*> launch_streams;
  int synchronizes = 0;
  std::vector<std::string> ran;  // what the kernels that record themselves ran, in order
  static constexpr int kRegistersPerSm = 65536, kSharedPerSm = 233472, kThreadsPerSm = 2048, kBlocksPerSm = 32;
};

class FakeDriver final : public gpu::Driver {
 public:
  void* stream() override { return gpu_->stream; }
  void* swap_stream(void* stream) override { return std::exchange(gpu_->stream, stream); }
  explicit FakeDriver(std::shared_ptr<FakeGpu> gpu) : gpu_(std::move(gpu)) { gpu_->driver_alive = true; }
  ~FakeDriver() override { gpu_->driver_alive = false; }
  void make_current() override {}
  std::string error_text(int code) const override { return "FAKE_ERROR_" + std::to_string(code); }
  bool is_sticky(int code) const override { return code == kIllegalAddress; }
  bool is_benign(int code) const override {
    return code == kInvalidValue || code == kOutOfResources || code == kNotFound;
  }
  gpu::Status synchronize_device() override { return status(0, "fakeCtxSynchronize"); }
  gpu::Status synchronize() override {
    ++gpu_->synchronizes;
    const int code = gpu_->pending;
    gpu_->pending = 0;
    if (code) gpu_->lost = true;
    return status(code, "fakeStreamSynchronize");
  }
  gpu::Status allocate(gpu::DevicePtr& ptr, std::size_t bytes) override {
    if (gpu_->lost) return status(kIllegalAddress, "fakeMalloc");
    ptr = reinterpret_cast<std::uintptr_t>(new unsigned char[bytes]);
    ++gpu_->live_allocations;
    return status(0, "fakeMalloc");
  }
  void free(gpu::DevicePtr ptr) override {
    delete[] reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(ptr));
    --gpu_->live_allocations;
  }
  gpu::Status copy_to_device(gpu::DevicePtr dst, const void* src, std::size_t bytes) override {
    std::memcpy(at(dst), src, bytes);
    return status(0, "fakeMemcpyHtoD");
  }
  gpu::Status copy_to_host(void* dst, gpu::DevicePtr src, std::size_t bytes) override {
    std::memcpy(dst, at(src), bytes);
    return status(0, "fakeMemcpyDtoH");
  }
  gpu::Status copy_on_device(gpu::DevicePtr dst, gpu::DevicePtr src, std::size_t bytes) override {
    std::memmove(at(dst), at(src), bytes);
    return status(0, "fakeMemcpyDtoD");
  }
  gpu::Status set(gpu::DevicePtr dst, std::uint32_t value, int element_bytes, std::size_t count) override {
    for (std::size_t i = 0; i < count; ++i) std::memcpy(at(dst) + i * element_bytes, &value, element_bytes);
    return status(0, "fakeMemset");
  }
  gpu::Status record_start() override { return status(0, "fakeEventRecord"); }
  gpu::Status record_stop() override { return status(0, "fakeEventRecord"); }
  gpu::Status elapsed_ms(float& ms) override {
    ms = 0.5f;
    return status(0, "fakeEventElapsedTime");
  }
  gpu::Status load_module(gpu::ModuleHandle& module, const void* image) override {
    const gpu::Status s = status(0, "fakeModuleLoadData");
    if (!s.ok()) return s;  // a failed load makes no module
    module = new std::string(static_cast<const char*>(image));
    ++gpu_->live_modules;
    return s;
  }
  void unload_module(gpu::ModuleHandle module) override {
    delete static_cast<std::string*>(module);
    --gpu_->live_modules;
  }
  gpu::Status get_function(gpu::FunctionHandle& fn, gpu::ModuleHandle module, const char* name) override {
    const auto it = gpu_->kernels.find(name);
    if (it == gpu_->kernels.end() || static_cast<std::string*>(module)->find(name) == std::string::npos)
      return status(kNotFound, "fakeModuleGetFunction");
    fn = &it->second;
    return status(0, "fakeModuleGetFunction");
  }
  std::map<std::string, std::int64_t> resources(gpu::FunctionHandle) override {
    return {{"registers", gpu_->registers},
            {"shared_static_bytes", 1024},
            {"local_bytes", 0},
            {"max_threads_per_block", 1024}};
  }
  // CUDA's calculator, simplified: whole warps of threads, registers by the thread, shared memory by the block.
  gpu::Status occupancy(gpu::FunctionHandle, int block_threads, std::size_t dynamic_shared, Occupancy& out) override {
    ++gpu_->occupancy_queries;
    const gpu::Status s = status(0, "fakeOccupancy");
    if (!s.ok()) return s;
    const int warps = (block_threads + 31) / 32;
    const std::size_t by_shared = FakeGpu::kSharedPerSm / (1024 + dynamic_shared);
    out.blocks_per_sm =
        std::min({FakeGpu::kThreadsPerSm / (32 * warps), FakeGpu::kBlocksPerSm,
                  FakeGpu::kRegistersPerSm / (gpu_->registers * 32 * warps), static_cast<int>(by_shared)});
    out.max_threads_per_sm = FakeGpu::kThreadsPerSm;
    out.warp_size = 32;
    return s;
  }
  gpu::Status allow_dynamic_shared(gpu::FunctionHandle, int bytes) override {
    ++gpu_->opt_ins;
    return status(bytes > 200 * 1024 ? kInvalidValue : 0, "fakeFuncSetAttribute");
  }
  gpu::Status launch(gpu::FunctionHandle fn, const unsigned grid[3], const unsigned block[3], unsigned,
                     void** args) override {
    if (gpu_->lost) return status(kIllegalAddress, "fakeLaunchKernel");
    if (block[0] * block[1] * block[2] > 1024) return status(kOutOfResources, "fakeLaunchKernel");
    gpu_->launch_streams.push_back(gpu_->stream);
    gpu_->pending = (*static_cast<FakeGpu::HostKernel*>(fn))(grid, block, args);
    return status(0, "fakeLaunchKernel");
  }

 private:
  static unsigned char* at(gpu::DevicePtr p) {
    return reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(p));
  }
  gpu::Status status(int code, const char* call) {
    if (gpu_->lost && code == 0) code = kIllegalAddress;
    if (!gpu_->fail_next.empty() && gpu_->fail_next == call) {
      gpu_->fail_next.clear();
      code = kInvalidValue;
    }
    return {code, call};
  }
  std::shared_ptr<FakeGpu> gpu_;
};

template <class T>
T& arg(void** args, int i) {
  return *static_cast<T*>(args[i]);
}

// The core's own kernels, and a few for the tests.
std::shared_ptr<FakeGpu> make_fake_gpu() {
  auto g = std::make_shared<FakeGpu>();
  g->kernels["ke_copy"] = [](const unsigned*, const unsigned*, void** args) {
    const auto n = arg<unsigned long long>(args, 2);
    if (n) std::memcpy(arg<void*>(args, 1), arg<void*>(args, 0), n * 16);
    return 0;
  };
  g->kernels["ke_fma"] = [](const unsigned*, const unsigned*, void**) { return 0; };
  FakeGpu* raw = g.get();
  g->kernels["ke_flush"] = [raw](const unsigned*, const unsigned*, void**) {
    ++raw->flushes;
    return 0;
  };
  g->kernels["ke_spin"] = [raw](const unsigned*, const unsigned*, void** args) {
    raw->holds.push_back(arg<long long>(args, 0));
    return 0;
  };
  g->kernels["twice"] = [](const unsigned* grid, const unsigned* block, void** args) {
    const auto* x = static_cast<const float*>(arg<void*>(args, 0));
    auto* y = static_cast<float*>(arg<void*>(args, 1));
    const long long n = arg<long long>(args, 2);
    const long long threads = static_cast<long long>(grid[0]) * block[0];
    for (long long i = 0; i < std::min(n, threads); ++i) y[i] = 2.0f * x[i];
    return 0;
  };
  g->kernels["fault"] = [](const unsigned*, const unsigned*, void**) { return kIllegalAddress; };
  // A Triton kernel's launch as the core must make it: 128 threads (num_warps 4), its three arguments, then a
  // 256-aligned global scratch pointer with 64 bytes for each of the grid's programs, then a null one.
  g->kernels["twice_0d1d2"] = [](const unsigned* grid, const unsigned* block, void** args) {
    if (block[0] != 128 || block[1] != 1 || block[2] != 1) return kInvalidValue;
    const auto scratch = arg<gpu::DevicePtr>(args, 3);
    if (!scratch || scratch % 256 || arg<gpu::DevicePtr>(args, 4) != 0) return kInvalidValue;
    std::memset(reinterpret_cast<void*>(static_cast<std::uintptr_t>(scratch)), 0, 64ull * grid[0]);  // must fit
    auto* y = static_cast<float*>(arg<void*>(args, 1));
    const auto* x = static_cast<const float*>(arg<void*>(args, 0));
    for (long long i = 0; i < arg<long long>(args, 2); ++i) y[i] = 2.0f * x[i];
    return 0;
  };
  return g;
}

class FakeDevice final : public gpu::GpuDevice {
 public:
  // `tensor_source`: the tensor-core kernels' source (Setup::tensor_source), none by default.
  explicit FakeDevice(std::shared_ptr<FakeGpu> g, const char* tensor_source = nullptr)
      : GpuDevice(std::make_unique<FakeDriver>(g), "fake:0", ke::Language::cuda) {
    info_.id = "fake:0";
    info_.kind = "cuda";
    info_.name = "Fake GPU";
    info_.compute_units = 4;
    info_.properties["clock_mhz"] = "1000";  // ke_spin's cycles per microsecond
    Setup setup;
    setup.compiler = "fakecc";
    setup.l2_bytes = 1 << 20;
    setup.memory_bytes = 64 << 20;
    setup.shared_optin = "200 KiB";
    setup.ceilings_key = "fake-gpu-test";
    setup.driver_version = "1";
    setup.tensor_source = tensor_source;
    start(setup);
    more_languages_.push_back(ke::Language::triton);  // as the CUDA backend, whose Triton is a second compiler
  }
  int builds = 0;
  // Each variant asked of build_variant: the params it may assume are multiples of 16.
  std::vector<std::vector<std::size_t>> variant_requests;

 protected:
  std::string target(const ke::KernelSource& ks, std::string& log) override {
    if (ks.source.find("// ke: other") != std::string::npos) {
      log = "error: the kernel asks for another target\n";
      return {};
    }
    return "fake";
  }
  Build build(const ke::KernelSource& ks, const std::string&, std::string& log) override {
    ++builds;
    Build out;
    if (ks.source.find("syntax error") != std::string::npos) {
      log += "error: syntax error\n";
      return out;
    }
    log += "fakecc: built\n";
    out.image = ks.source;
    out.resources["spill_store_bytes"] = 0;
    if (ks.language == ke::Language::triton) {
      // What Triton's compiler decides: the block from num_warps, the shared memory, two scratch pointers after
      // the arguments (the first asks for 64 bytes a program, 256-aligned), and the kernel's own symbol.
      out.symbol = ks.entry + "_0d1d2";
      out.launch.block_threads = static_cast<unsigned>(32 * ks.defines.at("num_warps"));
      out.launch.shared_bytes = 70000;
      out.launch.params = ks.params.size();
      out.launch.scratch = {{64, 256}, {0, 1}};
      // As the CUDA backend's Triton: its i32 and i64 arguments may be specialized on divisibility by 16.
      for (std::size_t i = 0; i < ks.params.size(); ++i) {
        const ke::Param& p = ks.params[i];
        if (!p.is_buffer() && (p.dtype == ke::DType::i32 || p.dtype == ke::DType::i64))
          out.launch.specializable.push_back({i, p.dtype == ke::DType::i32 ? 4 : 8});
      }
    }
    return out;
  }
  // A variant's symbol names what it assumes: "twice_0d1d2_d16_2" assumes param 2 is a multiple of 16.
  Build build_variant(const ke::KernelSource& ks, const std::string& to, const std::vector<std::size_t>& divisible,
                      std::string& log) override {
    variant_requests.push_back(divisible);
    if (ks.source.find("variant: fails") != std::string::npos) return {};
    if (ks.source.find("variant: throws") != std::string::npos) throw std::runtime_error("the helper has ended");
    Build out = build(ks, to, log);
    out.symbol += "_d16";
    for (std::size_t i : divisible) out.symbol += "_" + std::to_string(i);
    out.image += "\n# " + out.symbol;
    return out;
  }
};

const char* kTwice = "extern \"C\" __global__ void twice(const float* x, float* y, long long n) { /* on the host */ }";

ke::KernelSource source(const std::string& text, const std::string& entry) {
  ke::KernelSource ks;
  ks.source = text;
  ks.language = ke::Language::cuda;
  ks.entry = entry;
  return ks;
}

std::vector<unsigned char> contents(const ke::Buffer& b) {
  std::vector<unsigned char> out(b.bytes());
  b.download(out.data(), out.size());
  return out;
}

// A host buffer of another device, addressable by the host (as the CPU device's are).
class HostBuffer final : public ke::Buffer {
 public:
  explicit HostBuffer(std::vector<unsigned char> bytes) : bytes_(std::move(bytes)) {}
  std::size_t bytes() const override { return bytes_.size(); }
  void* data() override { return bytes_.data(); }
  void upload(const void* host, std::size_t n) override { std::memcpy(bytes_.data(), host, n); }
  void download(void* host, std::size_t n) const override { std::memcpy(host, bytes_.data(), n); }
  void* host_address() const override { return const_cast<unsigned char*>(bytes_.data()); }

 private:
  std::vector<unsigned char> bytes_;
};

}  // namespace

TEST_CASE("gpu core: starting compiles the core's kernels and runs a flushed, timed launch") {
  auto g = make_fake_gpu();
  {
    FakeDevice device(g);
    CHECK(device.builds == 4);  // ke_copy, ke_fma, ke_flush, ke_spin
    CHECK(g->live_modules == 4);
    CHECK(g->flushes == 1);  // the warm-up launch: timed and flushed
    // Held first, so that the events time the GPU's work with the host ahead (issue 50): at least 20 us, here
    // 20,000 cycles of a 1000 MHz clock.
    REQUIRE(g->holds.size() == 1);
    CHECK(g->holds[0] >= 20000);
    CHECK(g->live_allocations == 1);  // the flush buffer
    CHECK(device.healthy());
    // No verification kernels in its setup: the evaluator verifies on the host.
    auto b = device.allocate(64);
    std::uint64_t digest = 0;
    ke::Comparison c;
    CHECK_FALSE(device.digest(*b, 64, digest));
    CHECK_FALSE(device.fill_random(*b, ke::DType::f32, 16, {}, 1));
    CHECK_FALSE(device.compare(*b, *b, ke::DType::f32, 16, {}, c));
    std::string handle;
    CHECK(device.allocate_shared(64, handle) == nullptr);  // no IPC in the core
  }
  CHECK(g->live_modules == 0);
  CHECK(g->live_allocations == 0);
  CHECK_FALSE(g->driver_alive);
}

TEST_CASE("gpu core: a fake GPU whose core kernels do not load is unavailable, and says which compiler") {
  auto g = make_fake_gpu();
  g->kernels.erase("ke_flush");
  try {
    FakeDevice device(g);
    FAIL("the device started without ke_flush");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::DeviceUnavailable);
    const std::string what = e.what();
    CHECK(what.find("device 'fake:0': fakecc cannot compile") != std::string::npos);
    CHECK(what.find("no kernel named 'ke_flush'") != std::string::npos);
  }
  CHECK(g->live_modules == 0);
  CHECK(g->live_allocations == 0);
  CHECK_FALSE(g->driver_alive);
}

TEST_CASE("gpu core: buffers upload, download, fill, copy and rotate on the device") {
  auto g = make_fake_gpu();
  FakeDevice device(g);
  auto a = device.allocate(16);
  std::vector<unsigned char> bytes(16);
  std::iota(bytes.begin(), bytes.end(), 0);
  a->upload(bytes.data(), 16);
  CHECK(contents(*a) == bytes);
  try {
    a->upload(bytes.data(), 17);
    FAIL("an upload past the end");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::BadUsage);
    CHECK(std::string(e.what()) == "fake:0 buffer upload: 17 bytes into a buffer of 16");
  }
  CHECK_THROWS_AS(a->download(bytes.data(), 17), ke::Error);

  SUBCASE("fill with 1, 2 and 4 byte patterns, and an odd one through the host") {
    a->fill("\xab", 1);
    CHECK(contents(*a) == std::vector<unsigned char>(16, 0xab));
    const unsigned short half = 0x7e00;
    a->fill(&half, 2);
    for (int i = 0; i < 16; i += 2) CHECK((contents(*a)[i] == 0x00 && contents(*a)[i + 1] == 0x7e));
    const float nan = std::nanf("");
    a->fill(&nan, 4);
    std::vector<float> f(4);
    a->download(f.data(), 16);
    for (float v : f) CHECK(std::isnan(v));
    a->fill("xyz", 3);  // 16 is no multiple of 3: the host writes it
    CHECK(contents(*a)[15] == 'x');
  }
  SUBCASE("copy_from a buffer of the device, of another device, and a shorter one") {
    auto b = device.allocate(16);
    b->copy_from(*a);
    CHECK(contents(*b) == bytes);
    HostBuffer host(std::vector<unsigned char>(8, 0x11));
    b->copy_from(host);
    CHECK(contents(*b)[7] == 0x11);
    CHECK(contents(*b)[8] == 8);
  }
  SUBCASE("copy_rotated: this[i] = source[(i + shift) % bytes]") {
    auto b = device.allocate(16);
    for (std::size_t shift : {std::size_t{0}, std::size_t{5}, std::size_t{16}, std::size_t{21}}) {
      CAPTURE(shift);
      b->copy_rotated(*a, 16, shift);
      const auto got = contents(*b);
      for (int i = 0; i < 16; ++i) CHECK(got[i] == (i + shift) % 16);
    }
    b->fill("\0", 1);
    b->copy_rotated(*a, 8, 3);  // the first 8 bytes only
    const auto got = contents(*b);
    for (int i = 0; i < 8; ++i) CHECK(got[i] == (i + 3) % 8);
    CHECK(got[8] == 0);
  }
  SUBCASE("views write through to their parent, free nothing, and say when they are gone") {
    const int allocations = g->live_allocations;
    bool released = false;
    {
      auto v = device.view(
          *a, 4, 8, [&] { released = true; }, 0, 0);
      REQUIRE(v);
      CHECK(v->bytes() == 8);
      CHECK(static_cast<unsigned char*>(v->data()) == static_cast<unsigned char*>(a->data()) + 4);
      v->fill("\xee", 1);
      CHECK_THROWS_AS(v->upload(bytes.data(), 9), ke::Error);
    }
    CHECK(released);
    CHECK(g->live_allocations == allocations);
    const auto got = contents(*a);
    CHECK(got[3] == 3);
    CHECK(got[4] == 0xee);
    CHECK(got[11] == 0xee);
    CHECK(got[12] == 12);
    CHECK(device.view(*a, 10, 8, nullptr, 0, 0) == nullptr);  // past the end
    CHECK(device.view(*a, 4, 8, nullptr, 0, 8) == nullptr);   // its red zone past the end
    CHECK(device.view(*a, 4, 8, nullptr, 5, 0) == nullptr);   // its red zone before the start
    HostBuffer host(std::vector<unsigned char>(16));
    CHECK(device.view(host, 0, 8, nullptr, 0, 0) == nullptr);  // not this device's
  }
}

TEST_CASE("gpu core: a buffer keeps its GPU's context after the device is gone") {
  auto g = make_fake_gpu();
  std::unique_ptr<ke::Buffer> b;
  {
    FakeDevice device(g);
    b = device.allocate(8);
    b->fill("\x42", 1);
  }
  CHECK(g->driver_alive);
  CHECK(contents(*b) == std::vector<unsigned char>(8, 0x42));
  b.reset();
  CHECK_FALSE(g->driver_alive);
  CHECK(g->live_allocations == 0);
}

TEST_CASE("gpu core: compiles are cached by target, entry, tunables, flags and source; failures are results") {
  auto g = make_fake_gpu();
  FakeDevice device(g);
  const int builds = device.builds;
  ke::KernelSource ks = source(kTwice, "twice");
  ks.defines = {{"THREADS", 256}};
  const ke::CompileResult first = device.compile(ks);
  REQUIRE_MESSAGE(first.ok(), first.log);
  CHECK(first.log.find("fakecc: built") != std::string::npos);
  CHECK(first.kernel->resources().at("registers") == 32);            // the driver's
  CHECK(first.kernel->resources().count("spill_store_bytes") == 1);  // the compiler's
  const ke::CompileResult again = device.compile(ks);
  CHECK(again.cached);
  CHECK(again.kernel == first.kernel);
  CHECK(device.builds == builds + 1);
  ks.defines = {{"THREADS", 128}};
  CHECK_FALSE(device.compile(ks).cached);
  ks.flags = {"-lineinfo"};
  CHECK_FALSE(device.compile(ks).cached);
  CHECK(device.builds == builds + 3);

  ke::CompileResult r = device.compile(source(std::string(kTwice) + " syntax error", "twice"));
  CHECK_FALSE(r.ok());
  CHECK(r.log.find("error: syntax error") != std::string::npos);
  r = device.compile(source("// ke: other\n" + std::string(kTwice), "twice"));
  CHECK_FALSE(r.ok());
  CHECK(r.log == "error: the kernel asks for another target\n");
  const int modules = g->live_modules;
  r = device.compile(source(kTwice, "thrice"));
  CHECK_FALSE(r.ok());
  CHECK(r.log.find("the module has no kernel named 'thrice' (FAKE_ERROR_500); declare it extern \"C\" __global__") !=
        std::string::npos);
  CHECK(g->live_modules == modules);  // the module was unloaded
  ks = source(kTwice, "twice");
  ks.language = ke::Language::hip;
  r = device.compile(ks);
  CHECK(r.log.find("fake:0 compiles cuda kernels, not hip") != std::string::npos);
  g->fail_next = "fakeModuleLoadData";
  r = device.compile(source(std::string(kTwice) + "\n// another", "twice"));
  CHECK_FALSE(r.ok());
  CHECK(r.log == "fakecc: built\nerror: fakeModuleLoadData: FAKE_ERROR_1\n");
  CHECK(device.healthy());
}

TEST_CASE("gpu core: launches: dimensions, another device's kernel, the shared memory opt-in, timing and the flush") {
  auto g = make_fake_gpu();
  FakeDevice device(g);
  const ke::CompileResult c = device.compile(source(kTwice, "twice"));
  REQUIRE_MESSAGE(c.ok(), c.log);
  const long long n = 1000;
  std::vector<float> x(n);
  std::iota(x.begin(), x.end(), 0.f);
  auto bx = device.allocate(n * 4), by = device.allocate(n * 4);
  bx->upload(x.data(), n * 4);
  void* px = bx->data();
  void* py = by->data();
  void* args[] = {&px, &py, const_cast<long long*>(&n)};
  ke::LaunchDims dims;
  dims.grid[0] = 4;
  dims.block[0] = 256;

  ke::LaunchResult r = device.launch(*c.kernel, args, dims);
  REQUIRE_MESSAGE(r.ok, r.error);
  std::vector<float> y(n);
  by->download(y.data(), n * 4);
  CHECK(y[999] == 1998.f);
  CHECK(r.time_us == 0);

  const int flushes = g->flushes;
  r = device.launch(*c.kernel, args, dims, true, false);
  CHECK(r.time_us == 500);
  CHECK(g->flushes == flushes);
  r = device.launch(*c.kernel, args, dims, true, true);
  CHECK(r.time_us == 500);
  CHECK(g->flushes == flushes + 1);

  dims.block[1] = 0;
  r = device.launch(*c.kernel, args, dims);
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("invalid launch dimensions: grid 4x1x1, block 256x0x1") != std::string::npos);
  dims.block[1] = 1;

  FakeDevice other(make_fake_gpu());
  r = other.launch(*c.kernel, args, dims);
  CHECK(r.error == "fake:0: the kernel was not compiled by this device");

  dims.shared_bytes = 40000;  // under the default 48 KB less the 1 KB static: no opt-in
  CHECK(device.launch(*c.kernel, args, dims).ok);
  CHECK(g->opt_ins == 0);
  dims.shared_bytes = 100000;
  CHECK(device.launch(*c.kernel, args, dims).ok);
  CHECK(device.launch(*c.kernel, args, dims).ok);
  CHECK(g->opt_ins == 1);  // once per kernel and size
  dims.shared_bytes = 300000;
  r = device.launch(*c.kernel, args, dims);
  CHECK_FALSE(r.ok);
  CHECK(r.error ==
        "cannot give the kernel 300000 bytes of dynamic shared memory (1024 static; the device allows 200 KiB per "
        "block): fakeFuncSetAttribute: FAKE_ERROR_1");
  dims.shared_bytes = 0;
  dims.block[0] = 2048;
  r = device.launch(*c.kernel, args, dims, true, true);
  CHECK_FALSE(r.ok);
  CHECK(r.error ==
        "fakeLaunchKernel(grid 4x1x1, block 2048x1x1, 0 B dynamic shared) failed: fakeLaunchKernel: FAKE_ERROR_701; "
        "the kernel allows at most 1024 threads per block");
  CHECK(device.healthy());  // benign errors leave the device usable
  dims.block[0] = 256;
  CHECK(device.launch(*c.kernel, args, dims, true, true).ok);
}

TEST_CASE("gpu core: a program's steps queue on the caller's stream, unwaited, and the device's own comes back") {
  auto g = make_fake_gpu();
  FakeDevice device(g);
  const ke::CompileResult c = device.compile(source(kTwice, "twice"));
  REQUIRE_MESSAGE(c.ok(), c.log);
  const long long n = 256;
  std::vector<float> x(n, 1.5f);
  auto bx = device.allocate(n * 4), by = device.allocate(n * 4);
  bx->upload(x.data(), n * 4);
  void* px = bx->data();
  void* py = by->data();
  void* args[] = {&px, &py, const_cast<long long*>(&n)};
  ke::LaunchDims dims;
  dims.grid[0] = 1;
  dims.block[0] = 256;
  const std::vector<ke::LaunchStep> steps{{c.kernel.get(), args, dims}, {c.kernel.get(), args, dims}};
  void* const own = g->stream;
  void* const callers = reinterpret_cast<void*>(0xca11e5);
  g->launch_streams.clear();
  const int waits = g->synchronizes;
  ke::LaunchResult r = device.enqueue_steps(steps, callers);
  REQUIRE_MESSAGE(r.ok, r.error);
  CHECK(g->launch_streams == std::vector<void*>{callers, callers});
  CHECK(g->synchronizes == waits);  // not waited for: the caller's stream orders what follows
  CHECK(g->stream == own);
  std::vector<float> y(n);
  by->download(y.data(), n * 4);
  CHECK(y[255] == 3.f);

  g->launch_streams.clear();
  REQUIRE(device.launch_steps(steps).ok);
  CHECK(g->launch_streams == std::vector<void*>{own, own});
  CHECK(g->synchronizes > waits);

  // A step that cannot be queued is named, and the device's stream still comes back.
  dims.block[0] = 2048;
  const std::vector<ke::LaunchStep> bad{{c.kernel.get(), args, ke::LaunchDims{}}, {c.kernel.get(), args, dims}};
  r = device.enqueue_steps(bad, callers);
  CHECK_FALSE(r.ok);
  CHECK(r.failed_step == 1);
  CHECK(g->stream == own);
  CHECK(device.healthy());
}

TEST_CASE("gpu core: a kernel's fault poisons the device, and every later compile and launch says why") {
  auto g = make_fake_gpu();
  FakeDevice device(g);
  const ke::CompileResult twice = device.compile(source(kTwice, "twice"));
  const ke::CompileResult fault = device.compile(source("extern \"C\" __global__ void fault() {}", "fault"));
  REQUIRE(twice.ok());
  REQUIRE(fault.ok());
  ke::LaunchDims dims;
  ke::LaunchResult r = device.launch(*fault.kernel, nullptr, dims, true, true);
  CHECK_FALSE(r.ok);
  CHECK(r.error == "the kernel failed: fakeStreamSynchronize: FAKE_ERROR_700");
  CHECK_FALSE(device.healthy());
  r = device.launch(*twice.kernel, nullptr, dims);
  CHECK(r.error == "fake:0 is unusable after an earlier kernel's fault (fakeStreamSynchronize: FAKE_ERROR_700)");
  const ke::CompileResult c = device.compile(source(std::string(kTwice) + "// new", "twice"));
  CHECK_FALSE(c.ok());
  CHECK(c.log.find("fake:0 is unusable") != std::string::npos);
  try {
    device.allocate(8);  // fails on the lost context: an exception naming the call
    FAIL("an allocation on a lost context");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "fake:0: cannot allocate 8 B: fakeMalloc: FAKE_ERROR_700");
  }
}

TEST_CASE("gpu core: ceilings are measured once through the core's kernels and cached") {
  const auto dir = std::filesystem::temp_directory_path() / ("ke_gpu_core_" + std::to_string(::getpid()));
  ::setenv("KE_CACHE_DIR", dir.c_str(), 1);
  {
    FakeDevice device(make_fake_gpu());
    const ke::DeviceInfo& info = device.info();
    CHECK(info.properties.at("ceilings") == "measured now");
    CHECK(info.peak_bytes_per_s > 0);  // 2 x 8 MiB in the fake's 0.5 ms
    CHECK(info.peak_flops_per_s > 0);
    CHECK(info.floor_bytes_per_s >= 3 * info.peak_bytes_per_s);
  }
  {
    FakeDevice device(make_fake_gpu());
    CHECK(device.info().properties.at("ceilings").rfind("cached in ", 0) == 0);
  }
  ::unsetenv("KE_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "gpu core: tensor-core ceilings where the backend gives their kernels, cached; an older file is measured again") {
  const auto dir = std::filesystem::temp_directory_path() / ("ke_gpu_core_tensor_" + std::to_string(::getpid()));
  ::setenv("KE_CACHE_DIR", dir.c_str(), 1);
  auto g = make_fake_gpu();
  g->kernels["ke_mma_bf16"] = g->kernels["ke_mma_f16"] = [](const unsigned*, const unsigned*, void**) { return 0; };
  const char* fake_tensor_source = "ke_mma_bf16 ke_mma_f16 (the fake driver finds a kernel by its name)";
  // Every timing is the fake's 0.5 ms: 16 blocks of 8 warps (4 SMs), 2^14 iterations of 8 mma of 4096 flops.
  const double mma_rate = 4096.0 * 8 * (1 << 14) * 16 * 8 / 0.5e-3;
  {
    FakeDevice device(g, fake_tensor_source);
    const ke::DeviceInfo& info = device.info();
    CHECK(info.properties.at("ceilings") == "measured now");
    CHECK(info.bf16_tensor_flops_per_s == doctest::Approx(mma_rate));
    CHECK(info.fp16_tensor_flops_per_s == doctest::Approx(mma_rate));
    CHECK(info.bf16_tensor_flops_per_s > info.peak_flops_per_s);
    CHECK(info.properties.at("bf16_tensor_tflops") == "137");
    CHECK(info.properties.at("fp16_tensor_tflops") == "137");
    CHECK(info.properties.at("tensor_ceilings") == "bf16: mma.sync 137 TFLOP/s; fp16: mma.sync 137 TFLOP/s");
  }
  {
    FakeDevice device(g, fake_tensor_source);
    const ke::DeviceInfo& info = device.info();
    CHECK(info.properties.at("ceilings").rfind("cached in ", 0) == 0);
    CHECK(info.bf16_tensor_flops_per_s == doctest::Approx(mma_rate));
    CHECK(info.properties.at("tensor_ceilings").find("bf16: mma.sync") == 0);
  }
  // A file written before the tensor ceilings were measured: the same device, driver and other ceilings, but not
  // read as a GPU without tensor cores. It is measured again and rewritten.
  std::filesystem::path file;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".json") file = entry.path();
  REQUIRE(!file.empty());
  std::string text;
  {
    std::ifstream in(file);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto cut = text.find(", \"bf16_tensor_flops_per_s\"");
  REQUIRE(cut != std::string::npos);
  {
    std::ofstream out(file);
    out << text.substr(0, cut) << "}\n";
  }
  {
    FakeDevice device(g, fake_tensor_source);
    const ke::DeviceInfo& info = device.info();
    CHECK(info.properties.at("ceilings") == "measured now");
    CHECK(info.bf16_tensor_flops_per_s == doctest::Approx(mma_rate));
  }
  {
    std::ifstream in(file);
    const std::string rewritten((std::istreambuf_iterator<char>(in)), {});
    CHECK(rewritten.find("\"bf16_tensor_flops_per_s\"") != std::string::npos);
  }
  // A GPU without the kernels (HIP, or CUDA before sm_80): no tensor ceiling, and no property that reads as one;
  // its file keeps a 0, read back as unknown, not measured again each time.
  std::filesystem::remove_all(dir);
  for (int pass = 0; pass < 2; ++pass) {
    FakeDevice device(g);
    const ke::DeviceInfo& info = device.info();
    CHECK(info.properties.at("ceilings").rfind(pass == 0 ? "measured now" : "cached in ", 0) == 0);
    CHECK(info.bf16_tensor_flops_per_s == 0);
    CHECK(info.fp16_tensor_flops_per_s == 0);
    CHECK(info.properties.count("bf16_tensor_tflops") == 0);
    CHECK(info.properties.count("tensor_ceilings") == 0);
  }
  ::unsetenv("KE_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

namespace {

// kTwice as a problem: y = 2x over n floats, one thread per element in blocks of THREADS.
ke::Spec twice_spec(const std::string& name, std::vector<ke::Bindings> workloads, std::vector<std::int64_t> threads) {
  ke::Spec s;
  s.name = name;
  s.language = ke::Language::cuda;
  s.entry = "twice";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = std::move(workloads);
  s.tolerance = {0, 0};
  s.reference.source = kTwice;
  s.seed.source = kTwice;
  ke::LaunchRule rule;
  rule.grid[0] = ke::Expr::parse("cdiv(n, THREADS)");
  rule.block[0] = ke::Expr::parse("THREADS");
  s.launch = rule;
  s.tunables = {{"THREADS", std::move(threads)}};
  s.validate();
  return s;
}

// A cache folder of the test's own (KE_CACHE_DIR) while it lives: no ceiling or kernel measured by another test.
class CacheDir {
 public:
  explicit CacheDir(const std::string& name)
      : dir_(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    ::setenv("KE_CACHE_DIR", dir_.c_str(), 1);
  }
  CacheDir(const CacheDir&) = delete;
  CacheDir& operator=(const CacheDir&) = delete;
  ~CacheDir() {
    ::unsetenv("KE_CACHE_DIR");
    std::filesystem::remove_all(dir_);
  }

 private:
  std::filesystem::path dir_;
};

// An evaluator's options on the fake: few trials and repetitions, and no roofline check (the fake's clock says
// 0.5 ms whatever runs).
ke::EvalOptions fake_options(int trials, int max_reps) {
  ke::EvalOptions options;
  options.trials = trials;
  options.max_reps = max_reps;
  options.check_roofline = false;
  return options;
}

}  // namespace

TEST_CASE("gpu core: the evaluator verifies and times a kernel on it, inputs rotated on the device") {
  const ke::Spec s = twice_spec("twice_fake", {{{"n", 4096}}, {{"n", 1001}}}, {256, 2048});
  auto g = make_fake_gpu();
  const CacheDir cache("ke_gpu_core_eval");
  const ke::EvalOptions options = fake_options(2, 5);
  ke::LocalEvaluator evaluator(s, std::make_shared<FakeDevice>(g), options);
  const int flushes = g->flushes;
  const ke::Evaluation ok = evaluator.evaluate(ke::Candidate{kTwice, ke::Language::cuda, {{"THREADS", 256}}}, 3);
  CHECK_MESSAGE(ok.status == ke::Status::ok, ok.message);
  REQUIRE(ok.timings.size() == 2);
  CHECK(ok.timings[0].median_us == doctest::Approx(500));
  CHECK(g->flushes > flushes);
  const ke::Evaluation too_wide = evaluator.evaluate(ke::Candidate{kTwice, ke::Language::cuda, {{"THREADS", 2048}}}, 4);
  CHECK(too_wide.status != ke::Status::ok);
  CHECK(too_wide.message.find("2048") != std::string::npos);
}

TEST_CASE("gpu core: the occupancy a launch allows is asked of the driver, recorded, and read by the diagnosis") {
  const ke::Spec s = twice_spec("twice_occupancy", {{{"n", 4096}}}, {256, 512, 96});
  auto g = make_fake_gpu();
  g->registers = 64;  // 64 x 256 threads: 4 blocks fill the SM's 65536 registers
  const CacheDir cache("ke_gpu_core_occ");
  const ke::EvalOptions options = fake_options(1, 5);
  auto device = std::make_shared<FakeDevice>(g);
  ke::LocalEvaluator evaluator(s, device, options);

  const ke::Candidate at_256{kTwice, ke::Language::cuda, {{"THREADS", 256}}};
  const ke::Evaluation e = evaluator.evaluate(at_256, 1);
  REQUIRE_MESSAGE(e.status == ke::Status::ok, e.message);
  CHECK(g->occupancy_queries == 1);
  CHECK(e.resources.at("block_threads") == 256);
  CHECK(e.resources.at("dynamic_shared_bytes") == 0);
  CHECK(e.resources.at("active_blocks_per_sm") == 4);
  CHECK(e.resources.at("occupancy_pct") == 50);  // 4 blocks of 8 warps of the SM's 64
  // 96 threads are 3 warps: registers would allow 10 blocks, the threads 21, so 10 blocks of 3 warps, 46%.
  const ke::Evaluation narrow = evaluator.evaluate({kTwice, ke::Language::cuda, {{"THREADS", 96}}}, 2);
  REQUIRE_MESSAGE(narrow.status == ke::Status::ok, narrow.message);
  CHECK(narrow.resources.at("active_blocks_per_sm") == 10);
  CHECK(narrow.resources.at("occupancy_pct") == 46);

  // The diagnosis reads them; the spec has no cost, so the rates are unknown, and said to be.
  const auto d = ke::diagnose(s, at_256.tunables, e, device->info());
  REQUIRE(d.has_value());
  REQUIRE(d->gpu.has_value());
  CHECK(d->gpu->registers == 64);
  CHECK(d->gpu->local_bytes == 0);
  CHECK(d->gpu->spill_bytes == 0);  // the fake compiler reports its spills as ptxas does
  CHECK(d->gpu->occupancy_pct == 50);
  CHECK(ke::gpu_diagnosis_text(*d->gpu) == "regs 64, spills 0 B, smem 1024 B, occupancy 50% (block 256, 4 blocks/SM)");
  REQUIRE(d->workloads.size() == 1);
  CHECK_FALSE(d->workloads[0].bytes_per_s.has_value());
  CHECK(d->workloads[0].bound == ke::Bound::unknown);
  CHECK(ke::diagnosis_text(*d).find("GB/s unknown (the spec has no cost.bytes)") != std::string::npos);

  // A query the driver refuses leaves the occupancy unknown, and the device usable.
  g->fail_next = "fakeOccupancy";
  const ke::Evaluation refused = evaluator.evaluate({kTwice, ke::Language::cuda, {{"THREADS", 512}}}, 3);
  REQUIRE_MESSAGE(refused.status == ke::Status::ok, refused.message);
  CHECK(refused.resources.at("block_threads") == 512);
  CHECK(refused.resources.count("occupancy_pct") == 0);
  CHECK(device->healthy());
  const auto unknown = ke::diagnose(s, {{"THREADS", 512}}, refused, device->info());
  REQUIRE(unknown.has_value());
  CHECK(ke::gpu_diagnosis_text(*unknown->gpu).find("occupancy unknown") != std::string::npos);
}

TEST_CASE("gpu core: a kernel whose compiler fixed its launch (Triton's) gets that block, shared memory and scratch") {
  auto g = make_fake_gpu();
  FakeDevice device(g);
  ke::KernelSource ks = source("def twice_0d1d2(x, y, n): pass  # the image names its symbol", "twice");
  ks.language = ke::Language::triton;
  ks.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
               {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
               {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  ks.defines = {{"BLOCK", 256}, {"num_warps", 4}};
  const ke::CompileResult c = device.compile(ks);
  REQUIRE_MESSAGE(c.ok(), c.log);
  const long long n = 1000;
  std::vector<float> x(n, 1.5f), y(n, 0.f);
  auto bx = device.allocate(n * 4), by = device.allocate(n * 4);
  bx->upload(x.data(), n * 4);
  void* px = bx->data();
  void* py = by->data();
  void* args[] = {&px, &py, const_cast<long long*>(&n)};  // the spec's three: the core appends the scratch
  ke::LaunchDims dims;
  dims.grid[0] = 4;
  dims.block[0] = 256;  // the rule's (a CUDA reference's): not this kernel's
  const int opt_ins = g->opt_ins;
  const int allocations = g->live_allocations;
  ke::LaunchResult r = device.launch(*c.kernel, args, dims);
  REQUIRE_MESSAGE(r.ok, r.error);
  by->download(y.data(), n * 4);
  CHECK(y[n - 1] == 3.0f);
  CHECK(g->opt_ins == opt_ins + 1);               // 70000 bytes of shared memory: above the default
  CHECK(g->live_allocations == allocations + 1);  // the scratch, kept with the kernel
  dims.grid[0] = 8;                               // a larger grid: more scratch
  REQUIRE(device.launch(*c.kernel, args, dims).ok);
  CHECK(g->live_allocations == allocations + 1);
  // Its occupancy is that of the launch it gets: 128 threads and 70000 bytes of shared memory (and 1024
  // static) a block, so the SM's 233472 bytes hold 3 blocks of 4 warps: 12 of 64, 18%.
  const auto occupancy = device.launch_resources(*c.kernel, dims);
  CHECK(occupancy.at("block_threads") == 128);
  CHECK(occupancy.at("dynamic_shared_bytes") == 70000);
  CHECK(occupancy.at("active_blocks_per_sm") == 3);
  CHECK(occupancy.at("occupancy_pct") == 18);
  // Another device's kernel is not this one's to say anything of.
  FakeDevice other(make_fake_gpu());
  CHECK(other.launch_resources(*c.kernel, dims).empty());
  // The same source in the device's own language is compiled as that: another kernel, no fixed launch.
  ks.language = ke::Language::hip;
  CHECK_FALSE(device.compile(ks).ok());
}

namespace {

// A Triton kernel with two integer arguments, M (i64) and K (i32), and its variants as the fake runs them: each
// records that it ran, and faults (as a misaligned vector access would) when an argument it assumes is a multiple
// of 16 is not one.
void add_rows_kernels(FakeGpu& g) {
  FakeGpu* raw = &g;
  for (const std::string suffix : {"", "_d16_2", "_d16_3", "_d16_2_3"}) {
    const std::string name = "rows_0d1d2" + suffix;
    const bool m16 = suffix.find("_2") != std::string::npos, k16 = suffix.find("_3") != std::string::npos;
    g.kernels[name] = [raw, name, m16, k16](const unsigned*, const unsigned*, void** args) {
      raw->ran.push_back(name);
      if ((m16 && arg<long long>(args, 2) % 16 != 0) || (k16 && arg<int>(args, 3) % 16 != 0)) return kIllegalAddress;
      return 0;
    };
  }
}

ke::KernelSource rows_source(const std::string& extra = "") {
  ke::KernelSource ks = source("def rows_0d1d2(x, y, M, K): pass  # the image names its symbol" + extra, "rows");
  ks.language = ke::Language::triton;
  ks.params = {{"x", ke::DType::f32, ke::Role::in, {"M", "K"}, 0},
               {"y", ke::DType::f32, ke::Role::out, {"M", "K"}, 0},
               {"M", ke::DType::i64, ke::Role::size, {}, 0},
               {"K", ke::DType::i32, ke::Role::size, {}, 0}};
  ks.defines = {{"num_warps", 4}};
  return ks;
}

// One launch of a rows kernel at M and K (an i32: the core reads its 4 bytes); the name of what ran.
std::string run_rows(FakeDevice& device, FakeGpu& g, ke::Kernel& kernel, long long m, int k) {
  void* none = nullptr;
  void* args[] = {&none, &none, &m, &k};
  ke::LaunchDims dims;
  dims.grid[0] = 2;
  g.ran.clear();
  const ke::LaunchResult r = device.launch(kernel, args, dims);
  if (!r.ok) return "failed: " + r.error;
  return g.ran.size() == 1 ? g.ran[0] : "ran " + std::to_string(g.ran.size()) + " kernels";
}

using Requests = std::vector<std::vector<std::size_t>>;

}  // namespace

TEST_CASE("gpu core: a Triton kernel runs its variant for the int arguments that are multiples of 16, each once made") {
  auto g = make_fake_gpu();
  add_rows_kernels(*g);
  FakeDevice device(g);
  const ke::CompileResult c = device.compile(rows_source());
  REQUIRE_MESSAGE(c.ok(), c.log);
  CHECK(device.variant_requests.empty());  // none before a launch asks
  ke::Kernel& rows = *c.kernel;
  CHECK(run_rows(device, *g, rows, 8192, 769) == "rows_0d1d2_d16_2");  // M vouched for, K=769 not
  CHECK(device.variant_requests == Requests{{2}});
  CHECK(run_rows(device, *g, rows, 769, 769) == "rows_0d1d2");       // neither: the plain kernel, nothing compiled
  CHECK(run_rows(device, *g, rows, 4096, 1) == "rows_0d1d2_d16_2");  // another value, the same pattern
  CHECK(run_rows(device, *g, rows, 8192, 769) == "rows_0d1d2_d16_2");
  CHECK(device.variant_requests == Requests{{2}});  // kept, not compiled again
  CHECK(run_rows(device, *g, rows, 8192, 8192) == "rows_0d1d2_d16_2_3");
  CHECK(run_rows(device, *g, rows, 100, 64) == "rows_0d1d2_d16_3");
  CHECK(run_rows(device, *g, rows, 0, -48) == "rows_0d1d2_d16_2_3");  // 0 and negative multiples are multiples
  CHECK(run_rows(device, *g, rows, 8200, 1000) == "rows_0d1d2");      // multiples of 8, not of 16
  CHECK(device.variant_requests == Requests{{2}, {2, 3}, {3}});
  // The plain kernel is what compile() hands out and caches, the same one again.
  const ke::CompileResult again = device.compile(rows_source());
  CHECK(again.cached);
  CHECK(again.kernel == c.kernel);

  // Steps of one kernel at other values in one launch, timed or queued on a caller's stream: each its own.
  long long big = 8192, odd = 769;
  int k = 769;
  void* none = nullptr;
  void* at_big[] = {&none, &none, &big, &k};
  void* at_odd[] = {&none, &none, &odd, &k};
  ke::LaunchDims dims;
  dims.grid[0] = 2;
  g->ran.clear();
  ke::LaunchResult r = device.launch_steps({{&rows, at_big, dims}, {&rows, at_odd, dims}}, true, true);
  REQUIRE_MESSAGE(r.ok, r.error);
  CHECK(g->ran == std::vector<std::string>{"rows_0d1d2_d16_2", "rows_0d1d2"});
  g->ran.clear();
  r = device.enqueue_steps({{&rows, at_odd, dims}, {&rows, at_big, dims}}, reinterpret_cast<void*>(0x99));
  REQUIRE_MESSAGE(r.ok, r.error);
  CHECK(g->ran == std::vector<std::string>{"rows_0d1d2", "rows_0d1d2_d16_2"});
  CHECK(device.variant_requests.size() == 3);
  CHECK(device.healthy());  // no variant ran where its assumption failed
}

TEST_CASE("gpu core: a Triton variant that cannot be had leaves its launches to the plain kernel, asked once") {
  for (const char* how : {"variant: fails", "variant: throws"}) {
    CAPTURE(how);
    auto g = make_fake_gpu();
    add_rows_kernels(*g);
    FakeDevice device(g);
    const ke::CompileResult c = device.compile(rows_source(std::string("  # ") + how));
    REQUIRE_MESSAGE(c.ok(), c.log);
    CHECK(run_rows(device, *g, *c.kernel, 8192, 8192) == "rows_0d1d2");
    CHECK(run_rows(device, *g, *c.kernel, 4096, 64) == "rows_0d1d2");
    CHECK(device.variant_requests == Requests{{2, 3}});
    CHECK(device.healthy());
  }
}

TEST_CASE("gpu core: a kernel in the device's own language is never specialized on its int arguments") {
  auto g = make_fake_gpu();
  FakeDevice device(g);
  const ke::CompileResult c = device.compile(source(kTwice, "twice"));
  REQUIRE_MESSAGE(c.ok(), c.log);
  const long long n = 1024;
  auto bx = device.allocate(n * 4), by = device.allocate(n * 4);
  void* px = bx->data();
  void* py = by->data();
  void* args[] = {&px, &py, const_cast<long long*>(&n)};
  ke::LaunchDims dims;
  dims.grid[0] = 4;
  dims.block[0] = 256;
  REQUIRE(device.launch(*c.kernel, args, dims).ok);
  CHECK(device.variant_requests.empty());
}

TEST_CASE(
    "gpu core: the evaluator runs a Triton kernel's variant at a size that is a multiple of 16, the plain "
    "kernel at one that is not") {
  auto g = make_fake_gpu();
  FakeGpu* raw = g.get();
  const FakeGpu::HostKernel plain = g->kernels.at("twice_0d1d2");
  g->kernels["twice_0d1d2"] = [raw, plain](const unsigned* grid, const unsigned* block, void** args) {
    raw->ran.push_back("plain n=" + std::to_string(arg<long long>(args, 2)));
    return plain(grid, block, args);
  };
  g->kernels["twice_0d1d2_d16_2"] = [raw, plain](const unsigned* grid, const unsigned* block, void** args) {
    raw->ran.push_back("d16 n=" + std::to_string(arg<long long>(args, 2)));
    return arg<long long>(args, 2) % 16 != 0 ? kIllegalAddress : plain(grid, block, args);
  };
  ke::Spec s = twice_spec("twice_triton_fake", {{{"n", 8192}}, {{"n", 769}}}, {256});
  s.language = ke::Language::triton;
  s.reference.language = ke::Language::cuda;  // kTwice, on the same fake
  s.seed.source = "def twice_0d1d2(x, y, n, THREADS): pass  # the image names its symbol";
  s.seed.language = ke::Language::triton;
  s.tunables["num_warps"] = {4};
  s.validate();
  const CacheDir cache("ke_gpu_core_triton");
  const ke::EvalOptions options = fake_options(2, 3);
  auto device = std::make_shared<FakeDevice>(g);
  ke::LocalEvaluator evaluator(s, device, options);
  const ke::Evaluation e =
      evaluator.evaluate(ke::Candidate{s.seed.source, ke::Language::triton, {{"THREADS", 256}, {"num_warps", 4}}}, 7);
  CHECK_MESSAGE(e.status == ke::Status::ok, e.message);
  CHECK(device->variant_requests == Requests{{2}});  // made once, for n = 8192
  const auto count = [&](const std::string& what) { return std::count(raw->ran.begin(), raw->ran.end(), what); };
  CHECK(count("d16 n=8192") >= 2);  // verified and timed
  CHECK(count("plain n=769") >= 2);
  CHECK(count("plain n=8192") == 0);
  CHECK(count("d16 n=769") == 0);
}

TEST_CASE(
    "gpu core: each kernel of a Triton program is compiled with the num_warps its step gives, else the tunable's") {
  auto g = make_fake_gpu();
  FakeGpu* raw = g.get();
  // Triton's block is 32 x num_warps, fixed by its compile: which one each launch got tells its compile.
  g->kernels["twice_0d1d2"] = [raw](const unsigned*, const unsigned* block, void** args) {
    raw->ran.push_back(std::to_string(block[0]));
    const auto* x = static_cast<const float*>(arg<void*>(args, 0));
    auto* y = static_cast<float*>(arg<void*>(args, 1));
    for (long long i = 0; i < arg<long long>(args, 2); ++i) y[i] = 2.0f * x[i];
    return 0;
  };
  ke::Spec s = twice_spec("twice_triton_warps_fake", {{{"n", 1000}}}, {256});
  s.language = ke::Language::triton;
  s.reference.language = ke::Language::cuda;  // kTwice, on the same fake
  s.seed.language = ke::Language::triton;
  s.tunables["num_warps"] = {4};
  s.tunables["K0_num_warps"] = {2, 16};
  s.validate();
  auto program = [](const std::string& last) {
    return "def twice(x, y, n): pass  # the image names its symbol, twice_0d1d2\n\"\"\"kernelevolve-plan {\"steps\": ["
           "{\"kernel\": \"twice\", \"grid\": [\"cdiv(n, 256)\"], \"num_warps\": \"K0_num_warps\"}, "
           "{\"kernel\": \"twice\", \"grid\": [\"cdiv(n, 256)\"]}, "
           "{\"kernel\": \"twice\", \"grid\": [\"cdiv(n, 256)\"], \"num_warps\": \"" +
           last + "\"}]}\"\"\"\n";
  };
  const CacheDir cache("ke_gpu_core_warps");
  const ke::EvalOptions options = fake_options(2, 3);
  auto device = std::make_shared<FakeDevice>(g);
  ke::LocalEvaluator evaluator(s, device, options);
  const ke::Bindings point = {{"THREADS", 256}, {"num_warps", 4}, {"K0_num_warps", 2}};
  ke::Evaluation e = evaluator.evaluate(ke::Candidate{program("8"), ke::Language::triton, point}, 7);
  REQUIRE_MESSAGE(e.status == ke::Status::ok, e.message, "\n", e.compile_log);
  REQUIRE(raw->ran.size() >= 3);
  // Every call runs the three steps in order: 2 warps, the tunable's 4, then 8.
  CHECK(std::vector<std::string>(raw->ran.end() - 3, raw->ran.end()) == std::vector<std::string>{"64", "128", "256"});
  // A value Triton cannot take fails that step's compile, named, not the host.
  e = evaluator.evaluate(ke::Candidate{program("3"), ke::Language::triton, point}, 7);
  CHECK(e.status != ke::Status::ok);
  CHECK_MESSAGE(
      e.compile_log.find("num_warps of twice is 3 (3): Triton takes a power of two from 1 to 32") != std::string::npos,
      e.compile_log);
}

TEST_CASE("gpu core: red zones around every buffer catch a write past its end or before its start") {
  auto g = make_fake_gpu();
  FakeDevice device(g);
  // The kernel's address keeps the allocation's alignment (256 bytes before it); after it, the rounding to 256
  // bytes and 256 more. The fake's memory is the host's, so a test can write where a kernel would.
  for (std::size_t bytes : {1, 60, 256, 4004}) {
    CAPTURE(bytes);
    auto b = device.allocate(bytes);
    const std::size_t back = (bytes + 255) / 256 * 256 - bytes + 256;
    auto* data = static_cast<unsigned char*>(b->data());
    ke::RedZoneReport r = b->check_red_zones();
    CHECK(r.checked);
    CHECK(r.intact);
    const float nan = __builtin_nanf("");
    b->fill(&nan, bytes % 4 ? 1 : 4);
    CHECK(b->check_red_zones().intact);
    data[bytes + 4] ^= 1;
    r = b->check_red_zones();
    CHECK_FALSE(r.intact);
    CHECK_FALSE(r.before);
    CHECK(r.distance == 4);
    CHECK(r.zone_bytes == back);
    CHECK(b->check_red_zones().intact);  // re-armed
    data[-1] ^= 1;
    r = b->check_red_zones();
    CHECK(r.before);
    CHECK(r.distance == 1);
    CHECK(r.zone_bytes == 256);
    // A view of it has none of its own, unless it is given some.
    auto v = device.view(*b, 0, 1, nullptr, 0, 0);
    REQUIRE(v);
    CHECK_FALSE(v->check_red_zones().checked);
  }
  // A view with red zones (a PyTorch problem's buffer carved from the reference's arena): the zones lie in the
  // parent, around the view, and are filled, checked and re-armed as an allocation's are; the parent's bytes
  // outside them are not the view's.
  auto arena = device.allocate(4096);
  auto* base = static_cast<unsigned char*>(arena->data());
  std::fill(base, base + 4096, static_cast<unsigned char>(0));
  auto v = device.view(*arena, 1024, 60, nullptr, 256, 452);
  REQUIRE(v);
  auto* data = static_cast<unsigned char*>(v->data());
  CHECK(data == base + 1024);
  ke::RedZoneReport r = v->check_red_zones();
  CHECK(r.checked);
  CHECK(r.intact);
  CHECK(base[1024 - 256] != 0);  // filled
  CHECK(base[1024 + 60 + 451] != 0);
  CHECK(base[1024 - 257] == 0);  // not the view's
  CHECK(base[1024 + 60 + 452] == 0);
  data[60] = 0;
  r = v->check_red_zones();
  CHECK_FALSE(r.intact);
  CHECK_FALSE(r.before);
  CHECK(r.distance == 0);
  CHECK(r.zone_bytes == 452);
  CHECK(v->check_red_zones().intact);  // re-armed
  data[-3] = 0;
  r = v->check_red_zones();
  CHECK(r.before);
  CHECK(r.distance == 3);
  CHECK(r.zone_bytes == 256);
}

TEST_CASE(
    "gpu core: the evaluator fails a kernel that writes outside an output or a temporary, and passes an honest one") {
  auto g = make_fake_gpu();
  // Plans of this fake's host kernels: one element past y's end, element -1 of y, one past a temporary's end.
  auto twice_to = [](long long offset) {
    return [offset](const unsigned*, const unsigned*, void** args) {
      const auto* x = static_cast<const float*>(arg<void*>(args, 0));
      auto* y = static_cast<float*>(arg<void*>(args, 1));
      const long long n = arg<long long>(args, 2);
      for (long long i = 0; i < n; ++i) y[i] = 2.0f * x[i];
      if (offset) y[offset < 0 ? offset : n + offset - 1] = 0.0f;
      return 0;
    };
  };
  g->kernels["twice_honest"] = twice_to(0);
  g->kernels["twice_past_end"] = twice_to(1);
  g->kernels["twice_before_start"] = twice_to(-1);
  g->kernels["copy_one_more"] = [](const unsigned*, const unsigned*, void** args) {
    const auto* x = static_cast<const float*>(arg<void*>(args, 0));
    auto* t = static_cast<float*>(arg<void*>(args, 1));
    const long long n = arg<long long>(args, 2);
    for (long long i = 0; i < n; ++i) t[i] = x[i];
    t[n] = 0.0f;
    return 0;
  };
  auto one_step = [](const std::string& kernel) {
    return "/* kernelevolve-plan {\"steps\": [{\"kernel\": \"" + kernel +
           "\", \"grid\": [\"cdiv(n, THREADS)\"], \"block\": [\"THREADS\"], \"args\": [\"x\", \"y\", \"n\"]}]} */\n"
           "// " +
           kernel + " runs on the host\n";
  };
  const std::string through_temporary =
      "/* kernelevolve-plan {\"temporaries\": [{\"name\": \"t\", \"dtype\": \"f32\", \"shape\": [\"n\"]}], \"steps\": ["
      "{\"kernel\": \"copy_one_more\", \"grid\": [1], \"block\": [1], \"args\": [\"x\", \"t\", \"n\"]}, "
      "{\"kernel\": \"twice_honest\", \"grid\": [1], \"block\": [1], \"args\": [\"t\", \"y\", \"n\"]}]} */\n"
      "// copy_one_more twice_honest run on the host\n";
  // 1001 floats are 4004 bytes: 348 after them (92 of rounding and 256); 1024 floats a multiple of 256 bytes.
  const ke::Spec s = twice_spec("twice_bounds_fake", {{{"n", 1001}}, {{"n", 1024}}}, {256});
  const CacheDir cache("ke_gpu_core_bounds");
  ke::LocalEvaluator evaluator(s, std::make_shared<FakeDevice>(g), fake_options(2, 3));
  const ke::Bindings point = {{"THREADS", 256}};
  auto evaluate = [&](const std::string& source) {
    return evaluator.evaluate(ke::Candidate{source, ke::Language::cuda, point}, 5);
  };
  const ke::Evaluation honest = evaluate(one_step("twice_honest"));
  CHECK_MESSAGE(honest.status == ke::Status::ok, honest.message);
  const ke::Evaluation past = evaluate(one_step("twice_past_end"));
  CHECK(past.status == ke::Status::incorrect);
  CHECK_MESSAGE(past.message.find("wrote past the end of output 'y' (byte 0 of the 348 after its 4004 bytes; "
                                  "workload 0, trial 0)") != std::string::npos,
                past.message);
  const ke::Evaluation before = evaluate(one_step("twice_before_start"));
  CHECK(before.status == ke::Status::incorrect);
  CHECK_MESSAGE(before.message.find("wrote before the start of output 'y' (byte -1, in the 256 before it; "
                                    "workload 0, trial 0)") != std::string::npos,
                before.message);
  const ke::Evaluation temporary = evaluate(through_temporary);
  CHECK(temporary.status == ke::Status::incorrect);
  CHECK_MESSAGE(temporary.message.find("wrote past the end of temporary 't' (byte 0 of the 348 after its 4004 bytes; "
                                       "workload 0, trial 0)") != std::string::npos,
                temporary.message);
}
