// CpuDevice: in-process compilation, the call trampoline, the module cache, timing, the
// description of the host, and the device registry.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../src/devices/cpu/cpu_device.hpp"
#include "kernelevolve/device.hpp"
#include "kernelevolve/error.hpp"

using namespace kernelevolve;

namespace {

Param buffer(const char* name, DType dtype, Role role) {
  Param p;
  p.name = name;
  p.dtype = dtype;
  p.role = role;
  p.shape = {"N"};
  return p;
}

Param size(const char* name) {
  Param p;
  p.name = name;
  p.dtype = DType::i64;
  p.role = Role::size;
  return p;
}

const char* kVectorAddC = R"(#include <stdint.h>
void vadd(const float* a, const float* b, float* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i] * SCALE;
}
)";

KernelSource vector_add(int64_t scale) {
  KernelSource ks;
  ks.source = kVectorAddC;
  ks.language = Language::c;
  ks.entry = "vadd";
  ks.params = {buffer("a", DType::f32, Role::in), buffer("b", DType::f32, Role::in), buffer("c", DType::f32, Role::out),
               size("N")};
  ks.defines = {{"SCALE", scale}};
  return ks;
}

// Runs vadd over n elements and returns c.
std::vector<float> run_vector_add(Device& device, Kernel& kernel, int64_t n) {
  std::vector<float> a(n), b(n), c(n, -1.0f);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 0.5f * static_cast<float>(i);
  }
  auto da = device.allocate(n * sizeof(float));
  auto db = device.allocate(n * sizeof(float));
  auto dc = device.allocate(n * sizeof(float));
  da->upload(a.data(), n * sizeof(float));
  db->upload(b.data(), n * sizeof(float));
  void* pa = da->data();
  void* pb = db->data();
  void* pc = dc->data();
  void* args[] = {&pa, &pb, &pc, &n};
  LaunchResult r = device.launch(kernel, args, LaunchDims{});
  REQUIRE(r.ok);
  dc->download(c.data(), n * sizeof(float));
  return c;
}

}  // namespace

TEST_CASE("a C kernel compiles and runs") {
  CpuDevice device;
  CompileResult r = device.compile(vector_add(2));
  INFO(r.log);
  REQUIRE(r.ok());
  CHECK(r.log.empty());  // no warnings, e.g. about the host's target features
  CHECK_FALSE(r.cached);
  CHECK(r.compile_ms > 0);
  MESSAGE("compile time of vector add: " << r.compile_ms << " ms");
  auto c = run_vector_add(device, *r.kernel, 1003);
  for (int i = 0; i < 1003; ++i) REQUIRE(c[i] == doctest::Approx(i + 2 * 0.5 * i));
}

TEST_CASE("every C and C++ kernel is given bf16 conversions that round to nearest even") {
  // Clang 16's __bf16 has no arithmetic and no casts: a bf16 problem's kernels read and write it through these.
  const char* source = R"(#include <stdint.h>
void conv(const float* x, __bf16* y, float* back, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = ke_float_to_bf16(x[i]);
    back[i] = ke_bf16_to_float(y[i]);
  }
}
)";
  const std::vector<float> x = {1.0f, 1.00390625f, 1.01171875f, -2.5f, 1.0f + 0x1p-7f + 0x1p-9f, INFINITY, NAN};
  // 1 + 2^-8 and 1 + 3 * 2^-8 are ties: to the even neighbour, down and up; 1 + 2^-7 + 2^-9, a quarter ulp over
  // 0x3f81, down.
  const std::vector<std::uint16_t> expected = {0x3f80, 0x3f80, 0x3f82, 0xc020, 0x3f81, 0x7f80};
  for (Language language : {Language::c, Language::cpp}) {
    CAPTURE(to_string(language));
    CpuDevice device;
    KernelSource ks;
    ks.source = source;
    ks.language = language;
    ks.entry = "conv";
    ks.params = {buffer("x", DType::f32, Role::in), buffer("y", DType::bf16, Role::out),
                 buffer("back", DType::f32, Role::out), size("N")};
    CompileResult r = device.compile(ks);
    INFO(r.log);
    REQUIRE(r.ok());
    CHECK(r.log.empty());  // the prelude's functions unused by a kernel warn of nothing either
    const auto n = static_cast<int64_t>(x.size());
    auto dx = device.allocate(x.size() * 4), dy = device.allocate(x.size() * 2), db = device.allocate(x.size() * 4);
    dx->upload(x.data(), x.size() * 4);
    void* px = dx->data();
    void* py = dy->data();
    void* pb = db->data();
    std::int64_t count = n;
    void* args[] = {&px, &py, &pb, &count};
    REQUIRE(device.launch(*r.kernel, args, LaunchDims{}).ok);
    std::vector<std::uint16_t> y(x.size());
    std::vector<float> back(x.size());
    dy->download(y.data(), y.size() * 2);
    db->download(back.data(), back.size() * 4);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CHECK(y[i] == expected[i]);
      std::uint32_t bits = static_cast<std::uint32_t>(expected[i]) << 16;
      float value = 0;
      std::memcpy(&value, &bits, 4);
      CHECK(back[i] == value);
    }
    CHECK((y.back() & 0x7f80) == 0x7f80);  // NaN stays NaN
    CHECK((y.back() & 0x007f) != 0);
    CHECK(std::isnan(back.back()));
  }
}

TEST_CASE("compile time of a small kernel, once the process is warm") {
  CpuDevice device;
  REQUIRE(device.compile(vector_add(100)).ok());
  std::vector<double> ms;
  for (int64_t scale = 101; scale < 106; ++scale) {
    CompileResult r = device.compile(vector_add(scale));
    REQUIRE(r.ok());
    ms.push_back(r.compile_ms);
  }
  std::sort(ms.begin(), ms.end());
  MESSAGE("median compile time of vector add: " << ms[ms.size() / 2] << " ms");
  CHECK(ms[0] > 0);
}

TEST_CASE("a C++ kernel with an extern \"C\" entry and a double scalar") {
  CpuDevice device;
  KernelSource ks;
  ks.language = Language::cpp;
  ks.entry = "axpy";
  ks.source = R"(#include <cstdint>
#include <algorithm>
#include <chrono>
template <typename T> static T twice(T x) { return x + x; }
extern "C" void axpy(const double* x, double* y, std::int64_t n, double alpha) {
  std::transform(x, x + n, y, y, [=](double a, double b) { return twice(alpha) * a + b; });
}
)";
  Param alpha;
  alpha.name = "alpha";
  alpha.dtype = DType::f64;
  alpha.role = Role::scalar;
  ks.params = {buffer("x", DType::f64, Role::in), buffer("y", DType::f64, Role::inout), size("N"), alpha};
  CompileResult r = device.compile(ks);
  INFO(r.log);
  REQUIRE(r.ok());
  std::vector<double> x(100), y(100, 1.0);
  for (int i = 0; i < 100; ++i) x[i] = i;
  auto dx = device.allocate(800), dy = device.allocate(800);
  dx->upload(x.data(), 800);
  dy->upload(y.data(), 800);
  void* px = dx->data();
  void* py = dy->data();
  int64_t n = 100;
  double a = 1.5;
  void* args[] = {&px, &py, &n, &a};
  REQUIRE(device.launch(*r.kernel, args, LaunchDims{}).ok);
  dy->download(y.data(), 800);
  for (int i = 0; i < 100; ++i) CHECK(y[i] == doctest::Approx(3.0 * i + 1.0));
}

TEST_CASE("small integer and half-precision scalars reach the kernel") {
  CpuDevice device;
  KernelSource ks;
  ks.entry = "fill";
  ks.source = R"(#include <stdint.h>
void fill(int32_t* out, int8_t a, uint8_t b, int32_t c, _Float16 h, float f) {
  out[0] = a; out[1] = b; out[2] = c; out[3] = (int32_t)h; out[4] = (int32_t)f;
}
)";
  auto scalar = [](const char* name, DType t) {
    Param p;
    p.name = name;
    p.dtype = t;
    p.role = Role::scalar;
    return p;
  };
  ks.params = {buffer("out", DType::i32, Role::out),
               scalar("a", DType::i8),
               scalar("b", DType::u8),
               scalar("c", DType::i32),
               scalar("h", DType::f16),
               scalar("f", DType::f32)};
  CompileResult r = device.compile(ks);
  INFO(r.log);
  REQUIRE(r.ok());
  auto out = device.allocate(5 * sizeof(int32_t));
  void* po = out->data();
  int8_t a = -5;
  uint8_t b = 200;
  int32_t c = 123456;
  uint16_t h = 0x4500;  // 5.0 in IEEE half
  float f = 7.0f;
  void* args[] = {&po, &a, &b, &c, &h, &f};
  REQUIRE(device.launch(*r.kernel, args, LaunchDims{}).ok);
  int32_t got[5];
  out->download(got, sizeof got);
  CHECK(got[0] == -5);
  CHECK(got[1] == 200);
  CHECK(got[2] == 123456);
  CHECK(got[3] == 5);
  CHECK(got[4] == 7);
}

TEST_CASE("a tunable reaches the kernel as a macro") {
  CpuDevice device;
  CompileResult r1 = device.compile(vector_add(1));
  CompileResult r3 = device.compile(vector_add(3));
  REQUIRE(r1.ok());
  REQUIRE(r3.ok());
  CHECK(r1.kernel != r3.kernel);
  CHECK(run_vector_add(device, *r1.kernel, 10)[4] == doctest::Approx(4 + 1 * 2.0));
  CHECK(run_vector_add(device, *r3.kernel, 10)[4] == doctest::Approx(4 + 3 * 2.0));
}

TEST_CASE("a compile error is a result with the compiler's log, not an exception") {
  CpuDevice device;
  KernelSource ks = vector_add(1);
  ks.source =
      "#include <stdint.h>\nvoid vadd(const float* a, const float* b, float* c, int64_t n) {\n"
      "  c[0] = a[0] + undeclared_thing;\n}\n";
  CompileResult r;
  CHECK_NOTHROW(r = device.compile(ks));
  CHECK_FALSE(r.ok());
  INFO(r.log);
  CHECK(r.log.find("kernel.c:3:") != std::string::npos);
  CHECK(r.log.find("undeclared_thing") != std::string::npos);
  CHECK(r.log.find("error") != std::string::npos);

  SUBCASE("a missing entry names the trampoline and explains") {
    ks.source = "void other(void) {}\n";
    r = device.compile(ks);
    CHECK_FALSE(r.ok());
    CHECK(r.log.find("vadd") != std::string::npos);
    CHECK(r.log.find("trampoline") != std::string::npos);
  }
  SUBCASE("a bad flag is a result too") {
    ks.source = kVectorAddC;
    ks.flags = {"-fno-such-flag"};
    r = device.compile(ks);
    CHECK_FALSE(r.ok());
    CHECK(r.log.find("-fno-such-flag") != std::string::npos);
    ks.flags = {"-mllvm", "-debug"};
    r = device.compile(ks);
    CHECK_FALSE(r.ok());
    CHECK(r.log.find("-mllvm") != std::string::npos);
  }
  SUBCASE("cuda is refused with a clear log") {
    ks.language = Language::cuda;
    r = device.compile(ks);
    CHECK_FALSE(r.ok());
    CHECK(r.log.find("CUDA") != std::string::npos);
  }
  SUBCASE("an unresolvable symbol fails at load time, as a result") {
    ks.source =
        "#include <stdint.h>\nvoid ke_no_such_function(float*);\n"
        "void vadd(const float* a, const float* b, float* c, int64_t n) { ke_no_such_function(c); }\n";
    r = device.compile(ks);
    CHECK_FALSE(r.ok());
    CHECK(r.log.find("ke_no_such_function") != std::string::npos);
  }
  SUBCASE("a denied process symbol does not link") {
    ks.source =
        "#include <stdint.h>\n#include <stdlib.h>\n"
        "void vadd(const float* a, const float* b, float* c, int64_t n) { exit(3); }\n";
    r = device.compile(ks);
    CHECK_FALSE(r.ok());
    CHECK(r.log.find("exit") != std::string::npos);
  }
}

TEST_CASE("the module cache") {
  CpuDevice device(2);
  CompileResult first = device.compile(vector_add(2));
  REQUIRE(first.ok());
  CompileResult again = device.compile(vector_add(2));
  REQUIRE(again.ok());
  CHECK(again.cached);
  CHECK(again.kernel == first.kernel);
  // A hit is a lookup, microseconds, against a compile's milliseconds: the fastest of a few lookups, so that
  // one preempted on a busy machine cannot make it look dearer than the compile.
  double lookup_ms = again.compile_ms;
  for (int i = 0; i < 4; ++i) lookup_ms = std::min(lookup_ms, device.compile(vector_add(2)).compile_ms);
  CHECK(lookup_ms < first.compile_ms);
  CompileResult other = device.compile(vector_add(5));
  REQUIRE(other.ok());
  CHECK_FALSE(other.cached);

  // Capacity 2: a third module evicts the least recently used (scale 2), whose code stays alive
  // while `first` still holds it.
  CompileResult third = device.compile(vector_add(7));
  REQUIRE(third.ok());
  CHECK(device.cached_modules() == 2);
  CHECK(run_vector_add(device, *first.kernel, 8)[2] == doctest::Approx(2 + 2 * 1.0));
  CompileResult recompiled = device.compile(vector_add(2));
  REQUIRE(recompiled.ok());
  CHECK_FALSE(recompiled.cached);
  first = {};
  again = {};
  CHECK(run_vector_add(device, *recompiled.kernel, 8)[2] == doctest::Approx(2 + 2 * 1.0));
}

TEST_CASE("a loop the optimizer turns into memset and memcpy links and runs") {
  CpuDevice device;
  KernelSource ks;
  ks.entry = "zero_copy";
  ks.source = R"(#include <stdint.h>
#include <math.h>
void zero_copy(const float* in, float* zeroed, float* copied, int64_t n) {
  for (int64_t i = 0; i < n; ++i) zeroed[i] = 0.0f;
  for (int64_t i = 0; i < n; ++i) copied[i] = in[i];
  copied[0] = sqrtf(copied[0]) + expf(0.0f) + tanhf(0.0f) + erff(0.0f);
}
)";
  ks.params = {buffer("in", DType::f32, Role::in), buffer("zeroed", DType::f32, Role::out),
               buffer("copied", DType::f32, Role::out), size("N")};
  CompileResult r = device.compile(ks);
  INFO(r.log);
  REQUIRE(r.ok());
  const int64_t n = 4096;
  std::vector<float> in(n, 4.0f), zeroed(n, 1.0f), copied(n, 0.0f);
  auto din = device.allocate(n * 4), dz = device.allocate(n * 4), dc = device.allocate(n * 4);
  din->upload(in.data(), n * 4);
  dz->upload(zeroed.data(), n * 4);
  void* pin = din->data();
  void* pz = dz->data();
  void* pc = dc->data();
  int64_t size = n;
  void* args[] = {&pin, &pz, &pc, &size};
  REQUIRE(device.launch(*r.kernel, args, LaunchDims{}).ok);
  dz->download(zeroed.data(), n * 4);
  dc->download(copied.data(), n * 4);
  CHECK(zeroed[0] == 0.0f);
  CHECK(zeroed[n - 1] == 0.0f);
  CHECK(copied[0] == doctest::Approx(3.0f));
  CHECK(copied[n - 1] == 4.0f);
}

TEST_CASE("two devices compile and run concurrently from two threads") {
  auto work = [](int64_t base, bool* ok) {
    CpuDevice device;
    *ok = true;
    for (int64_t scale = base; scale < base + 4; ++scale) {
      CompileResult r = device.compile(vector_add(scale));
      if (!r.ok()) {
        *ok = false;
        return;
      }
      auto c = run_vector_add(device, *r.kernel, 64);
      if (std::fabs(c[10] - (10 + scale * 5.0f)) > 1e-4f) *ok = false;
    }
  };
  bool ok1 = false, ok2 = false;
  std::thread t1(work, 1, &ok1);
  std::thread t2(work, 10, &ok2);
  t1.join();
  t2.join();
  CHECK(ok1);
  CHECK(ok2);
}

TEST_CASE("one device compiles from several threads") {
  CpuDevice device;
  std::vector<std::thread> threads;
  bool ok[4] = {false, false, false, false};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      CompileResult r = device.compile(vector_add(t % 2 + 1));
      ok[t] = r.ok() && run_vector_add(device, *r.kernel, 16)[2] == doctest::Approx(2 + (t % 2 + 1) * 1.0);
    });
  }
  for (auto& t : threads) t.join();
  for (bool b : ok) CHECK(b);
}

TEST_CASE("a timed launch returns a positive time, with and without a cache flush") {
  CpuDevice device;
  CompileResult r = device.compile(vector_add(1));
  REQUIRE(r.ok());
  const int64_t n = 1 << 20;
  auto da = device.allocate(n * 4), db = device.allocate(n * 4), dc = device.allocate(n * 4);
  void* pa = da->data();
  void* pb = db->data();
  void* pc = dc->data();
  int64_t size = n;
  void* args[] = {&pa, &pb, &pc, &size};
  LaunchResult plain = device.launch(*r.kernel, args, LaunchDims{}, true, false);
  LaunchResult flushed = device.launch(*r.kernel, args, LaunchDims{}, true, true);
  CHECK(plain.ok);
  CHECK(plain.time_us > 0);
  CHECK(flushed.time_us > 0);
  MESSAGE("vector add of 1M floats: " << plain.time_us << " us, after a flush " << flushed.time_us << " us");
}

TEST_CASE("buffers are aligned and bounds-checked") {
  CpuDevice device;
  auto b = device.allocate(100);
  CHECK(b->bytes() == 100);
  CHECK(reinterpret_cast<std::uintptr_t>(b->data()) % 64 == 0);
  std::vector<char> big(200);
  CHECK_THROWS_AS(b->upload(big.data(), 200), Error);
  CHECK_THROWS_AS(b->download(big.data(), 200), Error);
}

TEST_CASE("the CPU's description") {
  CpuDevice device;
  const auto start = std::chrono::steady_clock::now();
  const DeviceInfo& info = device.info();
  const double measure_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  CHECK(info.id == "cpu");
  CHECK(info.kind == "cpu");
  CHECK_FALSE(info.name.empty());
  CHECK(info.compute_units >= 1);
  CHECK(info.vector_bits >= 128);
  CHECK(info.peak_bytes_per_s > 1e8);
  CHECK(info.floor_bytes_per_s > info.peak_bytes_per_s);
  CHECK(info.peak_flops_per_s > 1e9);
  CHECK(&device.info() == &info);
  MESSAGE(info.name << ": " << info.compute_units << " cores, " << info.vector_bits << "-bit vectors, copy "
                    << info.peak_bytes_per_s / 1e9 << " GB/s, floor " << info.floor_bytes_per_s / 1e9 << " GB/s, peak "
                    << info.peak_flops_per_s / 1e9 << " GFLOP/s; measured in " << measure_ms << " ms");
}

// A CPU this LLVM does not know by model (one newer than LLVM 16) is named "generic", which Clang
// rejects on x86: kernels must still compile, for the baseline CPU with the host's own vector features.
TEST_CASE("kernels are compiled for the host's vector features, whatever LLVM calls its model") {
  const std::string cpu = host_compile_cpu();
  CHECK_FALSE(cpu.empty());
  CpuDevice device;
  CHECK(device.info().properties.at("llvm_cpu") == cpu);
#if defined(__x86_64__)
  CHECK(cpu != "generic");
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  bool avx2 = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    std::string w;
    while (words >> w) avx2 = avx2 || w == "avx2";
    break;
  }
  KernelSource ks;
  ks.source = R"(#include <stdint.h>
void has_avx2(float* out, int64_t n) {
#ifdef __AVX2__
  for (int64_t i = 0; i < n; ++i) out[i] = 1.0f;
#else
  for (int64_t i = 0; i < n; ++i) out[i] = 0.0f;
#endif
}
)";
  ks.language = Language::c;
  ks.entry = "has_avx2";
  ks.params = {buffer("out", DType::f32, Role::out), size("N")};
  CompileResult r = device.compile(ks);
  INFO(r.log);
  REQUIRE(r.ok());
  auto out = device.allocate(sizeof(float));
  void* p = out->data();
  int64_t n = 1;
  void* args[] = {&p, &n};
  REQUIRE(device.launch(*r.kernel, args, LaunchDims{}).ok);
  float seen = -1;
  out->download(&seen, sizeof seen);
  CHECK(seen == (avx2 ? 1.0f : 0.0f));
  MESSAGE("compiling for " << cpu << "; AVX2 " << std::string(avx2 ? "on" : "absent"));
#endif
}

TEST_CASE("the device registry") {
  auto cpu = open_device("cpu");
  REQUIRE(cpu);
  CHECK(cpu->compile(vector_add(1)).ok());
  auto listed = list_devices();
  REQUIRE_FALSE(listed.empty());
  CHECK(listed[0].id == "cpu");
  CHECK(listed[0].peak_bytes_per_s == 0);  // not measured when listing

  auto code_of = [](const char* id) {
    try {
      open_device(id);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Internal;
  };
  CHECK(code_of("cuda") == ErrorCode::DeviceUnavailable);
  CHECK(code_of("cuda:1") == ErrorCode::DeviceUnavailable);
  CHECK(code_of("hip:0") == ErrorCode::DeviceUnavailable);
  CHECK(code_of("bogus:x") == ErrorCode::BadUsage);
  CHECK(code_of("cuda:x") == ErrorCode::BadUsage);
  CHECK(code_of("") == ErrorCode::BadUsage);
}

TEST_CASE("ceilings that moved since the previous measurement on this machine are said; the file keeps the last") {
  char dir_template[] = "/tmp/ke-ceilings-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  const char* old_dir = std::getenv("KE_CACHE_DIR");
  const std::string kept = old_dir ? old_dir : "";
  ::setenv("KE_CACHE_DIR", dir.c_str(), 1);
  auto measured = [](double copy_gbs) {
    return [copy_gbs](DeviceInfo& d) {
      d.peak_bytes_per_s = copy_gbs * 1e9;
      d.peak_flops_per_s = 100e9;
    };
  };
  DeviceInfo info;
  info.name = "Made-up CPU (R) 9000";
  CHECK(compare_with_previous_ceilings(info, measured(16.4)).empty());  // nothing before it
  CHECK(ceiling_history_file(info.name).parent_path() == dir);
  CHECK(compare_with_previous_ceilings(info, measured(15.0)).empty());  // within kCeilingShift
  CHECK_FALSE(info.properties.count(kCeilingsMovedProperty));
  const std::string moved = compare_with_previous_ceilings(info, measured(8.4));
  CHECK(moved == "copy 8.4 GB/s, 44% under the 15.0 GB/s measured before on this device");
  CHECK(info.properties[kCeilingsMovedProperty] == moved);
  // The comparison is with the last measurement, not the first: 8.4 again has not moved.
  DeviceInfo again;
  again.name = info.name;
  CHECK(compare_with_previous_ceilings(again, measured(8.4)).empty());
  CHECK_FALSE(again.properties.count(kCeilingsMovedProperty));
  // Another CPU model has its own file.
  DeviceInfo other;
  other.name = "Another CPU";
  CHECK(compare_with_previous_ceilings(other, measured(30)).empty());

  if (old_dir) ::setenv("KE_CACHE_DIR", kept.c_str(), 1);
  else ::unsetenv("KE_CACHE_DIR");
  std::filesystem::remove_all(dir);
}
