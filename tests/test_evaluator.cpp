// The fitness protocol: each check on a kernel built to fail it, and an honest kernel that passes.
#include <doctest/doctest.h>

#include <kernelevolve/device.hpp>
#include <kernelevolve/error.hpp>
#include <kernelevolve/fitness.hpp>

#include <algorithm>
#include <vector>

#include "eval/buffers.hpp"

namespace ke = kernelevolve;

namespace {

const char* kReference = R"(
#include <stdint.h>
void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i]; }
)";

ke::Spec scale_spec() {
  ke::Spec s;
  s.name = "scale";
  s.language = ke::Language::c;
  s.entry = "scale";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = {{{"n", 4096}}, {{"n", 1001}}};
  s.tolerance = {1e-6, 1e-6};
  s.reference.source = kReference;
  s.seed.source = kReference;
  s.tunables = {{"U", {1, 2, 4}}};
  s.constraints = {ke::Expr::parse("U <= 2")};
  s.cost_bytes = ke::Expr::parse("8 * n");
  s.validate();
  return s;
}

ke::EvalOptions quick() {
  ke::EvalOptions o;
  o.trials = 3;
  o.max_reps = 10;
  o.target_ms = 1;
  return o;
}

ke::Evaluation run(const ke::Spec& spec, const std::string& body, ke::Bindings tunables = {{"U", 1}},
                   std::shared_ptr<ke::Device> device = nullptr) {
  if (!device) device = ke::open_device("cpu");
  ke::LocalEvaluator evaluator(spec, device, quick());
  return evaluator.evaluate(ke::Candidate{std::string("#include <stdint.h>\n") + body, ke::Language::c, tunables}, 42);
}

// The CPU, but describing a memory so slow (1 byte/s) that the roofline floor of any workload is hours:
// every honest time then lies under the floor, which must make the node invalid.
class SlowMemoryClaim final : public ke::Device {
 public:
  explicit SlowMemoryClaim(std::shared_ptr<ke::Device> inner) : inner_(std::move(inner)) {
    info_ = inner_->info();
    info_.floor_bytes_per_s = 1.0;
  }
  const ke::DeviceInfo& info() override { return info_; }
  ke::CompileResult compile(const ke::KernelSource& s) override { return inner_->compile(s); }
  std::unique_ptr<ke::Buffer> allocate(std::size_t b) override { return inner_->allocate(b); }
  ke::LaunchResult launch(ke::Kernel& k, void** a, const ke::LaunchDims& d, bool t, bool f) override {
    return inner_->launch(k, a, d, t, f);
  }
  ke::DeviceInfo info_;

 private:
  std::shared_ptr<ke::Device> inner_;
};

// Buffers whose memory the host cannot address, like a GPU's: the evaluator must go through upload and
// download for whatever the device does not do itself. With `offload`, the device draws, compares and
// digests itself (through the host's code, counted), as a GPU does.
class RemoteMemory final : public ke::Device {
 public:
  RemoteMemory(std::shared_ptr<ke::Device> inner, bool offload) : inner_(std::move(inner)), offload_(offload) {}
  class RemoteBuffer final : public ke::Buffer {
   public:
    explicit RemoteBuffer(std::unique_ptr<ke::Buffer> b) : b_(std::move(b)) {}
    std::size_t bytes() const override { return b_->bytes(); }
    void* data() override { return b_->data(); }
    void upload(const void* h, std::size_t n) override { b_->upload(h, n); }
    void download(void* h, std::size_t n) const override { b_->download(h, n); }
    ke::eval::ArrayView own(ke::DType t, std::size_t count) const {
      return {t, count, static_cast<unsigned char*>(b_->host_address())};
    }

   private:
    std::unique_ptr<ke::Buffer> b_;
  };
  const ke::DeviceInfo& info() override { return inner_->info(); }
  ke::CompileResult compile(const ke::KernelSource& s) override { return inner_->compile(s); }
  std::unique_ptr<ke::Buffer> allocate(std::size_t b) override {
    return std::make_unique<RemoteBuffer>(inner_->allocate(b));
  }
  ke::LaunchResult launch(ke::Kernel& k, void** a, const ke::LaunchDims& d, bool t, bool f) override {
    return inner_->launch(k, a, d, t, f);
  }
  bool fill_random(ke::Buffer& b, ke::DType t, std::size_t n, const ke::InputDist& dist, std::uint64_t seed) override {
    if (!offload_) return false;
    ++fills;
    ke::eval::fill_random(static_cast<RemoteBuffer&>(b).own(t, n), dist, seed);
    return true;
  }
  bool compare(const ke::Buffer& got, const ke::Buffer& want, ke::DType t, std::size_t n, const ke::Tolerance& tol,
               ke::Comparison& c) override {
    if (!offload_) return false;
    ++compares;
    c = ke::eval::compare(static_cast<const RemoteBuffer&>(got).own(t, n),
                          static_cast<const RemoteBuffer&>(want).own(t, n), n, tol);
    return true;
  }
  bool digest(const ke::Buffer& b, std::size_t bytes, std::uint64_t& d) override {
    if (!offload_) return false;
    ++digests;
    d = ke::buffer_digest(static_cast<const RemoteBuffer&>(b).own(ke::DType::u8, bytes).bytes, bytes);
    return true;
  }
  int fills = 0, compares = 0, digests = 0;

 private:
  std::shared_ptr<ke::Device> inner_;
  bool offload_;
};

}  // namespace

TEST_CASE("verification works the same whether the device does the work or the host does it through copies") {
  for (bool offload : {false, true}) {
    CAPTURE(offload);
    auto remote = std::make_shared<RemoteMemory>(ke::open_device("cpu"), offload);
    const auto spec = scale_spec();
    auto e = run(
        spec, "void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = x[i] + x[i]; }",
        {{"U", 1}}, remote);
    CHECK_MESSAGE(e.status == ke::Status::ok, e.message);
    e = run(
        spec,
        "void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i] + (i == 77 ? 0.5f : 0.0f); }",
        {{"U", 1}}, remote);
    CHECK(e.status == ke::Status::incorrect);
    REQUIRE(e.worst.has_value());
    CHECK(e.worst->index == 77);
    e = run(
        spec,
        "void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i + 1 < n; ++i) y[i] = 2.0f * x[i]; }",
        {{"U", 1}}, remote);
    CHECK(e.status == ke::Status::incorrect);
    e = run(
        spec,
        "void scale(const float* x, float* y, int64_t n) { float* w = (float*)x; for (int64_t i = 0; i < n; ++i) { y[i] = 2.0f * x[i]; w[i] = 0; } }",
        {{"U", 1}}, remote);
    CHECK(e.message.find("modified its input 'x'") != std::string::npos);
    auto loose = spec;
    loose.tolerance = {1e9, 0};
    e = run(loose, "void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 1.0f; }",
            {{"U", 1}}, remote);
    CHECK(e.message.find("does not change when the inputs do") != std::string::npos);
    // Offloaded, every draw, comparison and digest went to the device; else none did.
    CHECK((remote->fills > 0) == offload);
    CHECK((remote->compares > 0) == offload);
    CHECK((remote->digests > 0) == offload);
  }
}

TEST_CASE("buffer_digest tells changed contents from unchanged, wherever the change is") {
  std::vector<unsigned char> a(1003);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<unsigned char>(i * 7 + 3);
  const std::uint64_t d = ke::buffer_digest(a.data(), a.size());
  CHECK(ke::buffer_digest(a.data(), a.size()) == d);
  for (std::size_t at : {std::size_t{0}, std::size_t{7}, std::size_t{500}, std::size_t{1002}}) {  // tail byte last
    auto b = a;
    b[at] ^= 1;
    CHECK(ke::buffer_digest(b.data(), b.size()) != d);
  }
  auto swapped = a;  // the same words in another order
  std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + 8);
  CHECK(ke::buffer_digest(swapped.data(), swapped.size()) != d);
  CHECK(ke::buffer_digest(a.data(), 0) == 0);
}

TEST_CASE("an honest kernel is ok, with a timing per workload") {
  const auto spec = scale_spec();
  const auto e = run(
      spec, "void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = x[i] + x[i]; }");
  CHECK_MESSAGE(e.status == ke::Status::ok, e.message);
  REQUIRE(e.timings.size() == 2);
  CHECK(e.timings[0].median_us > 0);
  CHECK(e.timings[0].samples >= 5);
  CHECK(e.timings[0].min_us <= e.timings[0].median_us);
  CHECK(e.timings[0].median_us <= e.timings[0].max_us);
}

TEST_CASE("a wrong answer is incorrect, with the worst element kept") {
  const auto e = run(
      scale_spec(),
      "void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i] + (i == 77 ? 0.5f : 0.0f); }");
  CHECK(e.status == ke::Status::incorrect);
  REQUIRE(e.worst.has_value());
  CHECK(e.worst->index == 77);
  CHECK(e.worst->buffer == "y");
  CHECK(e.message.find("y[77]") != std::string::npos);
}

TEST_CASE("an unwritten element is caught by the NaN poison") {
  const auto e = run(
      scale_spec(),
      "void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i + 1 < n; ++i) y[i] = 2.0f * x[i]; }");
  CHECK(e.status == ke::Status::incorrect);
  REQUIRE(e.worst.has_value());
  CHECK(e.worst->index == 4095);
}

TEST_CASE("a NaN never passes") {
  const auto e = run(
      scale_spec(),
      "void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = i == 5 ? __builtin_nanf(\"\") : 2.0f * x[i]; }");
  CHECK(e.status == ke::Status::incorrect);
  REQUIRE(e.worst.has_value());
  CHECK(e.worst->index == 5);
}

TEST_CASE("a kernel that modifies its input is incorrect") {
  const auto e = run(
      scale_spec(),
      "void scale(const float* x, float* y, int64_t n) { float* w = (float*)x; for (int64_t i = 0; i < n; ++i) { y[i] = 2.0f * x[i]; w[i] = 0; } }");
  CHECK(e.status == ke::Status::incorrect);
  CHECK(e.message.find("modified its input 'x'") != std::string::npos);
}

TEST_CASE("an output that ignores its inputs is incorrect even under a loose tolerance") {
  auto spec = scale_spec();
  spec.tolerance = {1e9, 0};  // anything finite is "close enough": only the sensitivity check can catch it
  const auto e =
      run(spec, "void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 1.0f; }");
  CHECK(e.status == ke::Status::incorrect);
  CHECK(e.message.find("does not change when the inputs do") != std::string::npos);
}

TEST_CASE("a kernel that skips the work when it sees the same pointers again is incorrect") {
  const auto e = run(scale_spec(), R"(
static const float* last;
void scale(const float* x, float* y, int64_t n) {
  if (x == last) return;
  last = x;
  for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i];
})");
  CHECK(e.status == ke::Status::incorrect);
}

TEST_CASE("a compile error is a result with the compiler's log") {
  const auto e = run(scale_spec(), "void scale(const float* x, float* y, int64_t n) { y[0] = undeclared_thing; }");
  CHECK(e.status == ke::Status::compile_error);
  CHECK(e.compile_log.find("undeclared_thing") != std::string::npos);
}

TEST_CASE("a source without the entry point is invalid") {
  const auto e = run(scale_spec(), "void not_it(const float* x, float* y, int64_t n) { }");
  CHECK(e.status == ke::Status::invalid);
  CHECK(e.message.find("entry point 'scale'") != std::string::npos);
}

TEST_CASE("tunables that violate a constraint are invalid") {
  const auto e =
      run(scale_spec(),
          "void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i]; }",
          {{"U", 4}});
  CHECK(e.status == ke::Status::invalid);
}

TEST_CASE("a time under the roofline floor is invalid, not a record") {
  auto cpu = ke::open_device("cpu");
  auto liar = std::make_shared<SlowMemoryClaim>(cpu);
  const auto e =
      run(scale_spec(),
          "void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i]; }",
          {{"U", 1}}, liar);
  CHECK(e.status == ke::Status::invalid);
  CHECK(e.message.find("roofline floor") != std::string::npos);
}

TEST_CASE("speedup is the geometric mean of per-workload ratios") {
  ke::Evaluation a, b;
  a.status = b.status = ke::Status::ok;
  a.timings = {{100, 0, 0, 0, 1}, {100, 0, 0, 0, 1}};
  b.timings = {{25, 0, 0, 0, 1}, {100, 0, 0, 0, 1}};
  CHECK(ke::speedup(a, b) == doctest::Approx(2.0));
  b.status = ke::Status::incorrect;
  CHECK(ke::speedup(a, b) == 0.0);
}

TEST_CASE("comparison: tolerance, NaN and infinities") {
  using ke::eval::HostArray;
  HostArray got(ke::DType::f32, 3), want(ke::DType::f32, 3);
  for (int i = 0; i < 3; ++i) want.set(i, 1.0), got.set(i, 1.0);
  CHECK(ke::eval::compare(got, want, {0, 0}).pass);
  got.set(1, 1.0 + 1e-3);
  CHECK_FALSE(ke::eval::compare(got, want, {1e-4, 0}).pass);
  CHECK(ke::eval::compare(got, want, {0, 1e-2}).pass);
  got.set(1, std::nan(""));
  auto c = ke::eval::compare(got, want, {1e30, 1e30});
  CHECK_FALSE(c.pass);
  CHECK(c.worst_index == 1);
  got.set(1, INFINITY);
  CHECK_FALSE(ke::eval::compare(got, want, {1e30, 1e30}).pass);
}

TEST_CASE("half and bfloat16 conversions round-trip representable values") {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    CHECK(ke::eval::half_to_float(ke::eval::float_to_half(f)) == f);
  }
  for (float f : {0.0f, 1.0f, -2.5f, 3.0e38f}) {
    CHECK(ke::eval::bf16_to_float(ke::eval::float_to_bf16(f)) == doctest::Approx(f).epsilon(1e-2));
  }
}
