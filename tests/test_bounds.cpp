// Out-of-bounds writes (issue 49, finding 2): the CPU device's red zones, slack on both sides of every buffer
// filled with a known pattern, and the evaluator's check of them after verification and checked timed launches.
// A write one element past an output or a temporary whose size is no multiple of 64 bytes, or to element -1, fails
// the node, named by buffer, side and byte; an honest kernel at sizes that are and are not multiples of 64 is ok.
// Every size here keeps its stray writes inside red zones, never in a guard page: these evaluations run in the
// test's own process. (The GPU's red zones: test_gpu_core.cpp over a fake driver, test_gpu_program.cpp on a GPU.)
#include <doctest/doctest.h>

#include <kernelevolve/candidate.hpp>
#include <kernelevolve/device.hpp>
#include <kernelevolve/fitness.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "support/centre_program.hpp"

namespace ke = kernelevolve;

namespace {

// The CPU buffer's layout (cpu_device.cpp): the data 64-byte aligned against the upper guard page, the slack
// before it (to the lower guard page) and the rounding's slack after it red zones.
struct Zones {
  std::size_t front = 0, back = 0;
};
Zones cpu_zones(std::size_t bytes) {
  const std::size_t page = 4096;
  const std::size_t rounded = std::max<std::size_t>(64, (bytes + 63) / 64 * 64);
  return {(rounded + page - 1) / page * page - rounded, rounded - bytes};
}

const char* kReference = R"(
#include <stdint.h>
void scale(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i]; }
)";

ke::Spec scale_spec(std::vector<ke::Bindings> workloads) {
  ke::Spec s;
  s.name = "scale";
  s.language = ke::Language::c;
  s.entry = "scale";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = std::move(workloads);
  s.tolerance = {1e-6, 1e-6};
  s.reference.source = kReference;
  s.seed.source = kReference;
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

ke::Evaluation run(const ke::Spec& spec, const std::string& source, ke::Bindings tunables = {}) {
  ke::LocalEvaluator evaluator(spec, ke::open_device("cpu"), quick());
  return evaluator.evaluate(ke::Candidate{source, ke::Language::c, tunables}, 42);
}

// The reference's loop, then `extra` (a stray write).
std::string scale_with(const std::string& extra) {
  return "#include <stdint.h>\nvoid scale(const float* x, float* y, int64_t n) {\n"
         "  for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i];\n  " +
         extra + "\n}\n";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("bounds: a CPU buffer's red zones are intact until a byte outside it changes, then named and re-armed") {
  auto device = ke::open_device("cpu");
  for (std::size_t bytes : {1, 4, 60, 64, 100, 4000, 4004, 4096, 5000, 65536 + 12}) {
    CAPTURE(bytes);
    auto buffer = device->allocate(bytes);
    auto* data = static_cast<unsigned char*>(buffer->data());
    CHECK(reinterpret_cast<std::uintptr_t>(data) % 64 == 0);
    const Zones z = cpu_zones(bytes);
    // Element -1 of any dtype up to 64 bytes lies in a red zone, or in the guard page.
    CHECK((z.front == 0 || z.front >= 64));
    ke::RedZoneReport r = buffer->check_red_zones();
    CHECK(r.checked);
    CHECK(r.intact);
    // The buffer's own bytes are its to write, all of them.
    std::memset(data, 0xA5, bytes);
    const float nan = __builtin_nanf("");
    buffer->fill(&nan, 1);
    CHECK(buffer->check_red_zones().intact);
    if (z.back > 0) {
      const std::size_t at = z.back > 3 ? 3 : 0;
      data[bytes + at] ^= 1;
      r = buffer->check_red_zones();
      CHECK_FALSE(r.intact);
      CHECK_FALSE(r.before);
      CHECK(r.distance == at);
      CHECK(r.zone_bytes == z.back);
      CHECK(buffer->check_red_zones().intact);  // re-armed
      data[bytes + z.back - 1] =
          static_cast<unsigned char>(~data[bytes + z.back - 1]);  // the last byte before the page
      r = buffer->check_red_zones();
      CHECK_FALSE(r.intact);
      CHECK(r.distance == z.back - 1);
    }
    if (z.front > 0) {
      data[-1] = static_cast<unsigned char>(~data[-1]);
      data[-static_cast<std::ptrdiff_t>(z.front)] ^= 0x80;  // the first byte after the guard page
      r = buffer->check_red_zones();
      CHECK_FALSE(r.intact);
      CHECK(r.before);
      CHECK(r.distance == 1);  // the damage nearest the buffer
      CHECK(r.zone_bytes == z.front);
      CHECK(buffer->check_red_zones().intact);
    }
  }
}

TEST_CASE("bounds: bytes copied from past one buffer's end to past another's still change its red zone") {
  auto device = ke::open_device("cpu");
  auto x = device->allocate(60), y = device->allocate(60);
  auto* from = static_cast<unsigned char*>(x->data());
  auto* to = static_cast<unsigned char*>(y->data());
  std::memcpy(to + 60, from + 60, 4);  // y[15] = x[15] for a float kernel that runs one element too far
  const ke::RedZoneReport r = y->check_red_zones();
  CHECK_FALSE(r.intact);
  CHECK(r.distance == 0);
  CHECK(x->check_red_zones().intact);
}

TEST_CASE("bounds: a kernel that writes one element past an output whose size is no multiple of 64 bytes fails") {
  // 1001 floats are 4004 bytes: 28 bytes of rounding after them. 15 floats are 60: 4 after them.
  for (std::int64_t n : {1001, 15}) {
    CAPTURE(n);
    const ke::Evaluation e = run(scale_spec({{{"n", n}}}), scale_with("y[n] = 0.0f;"));
    CHECK(e.status == ke::Status::incorrect);
    const std::size_t bytes = static_cast<std::size_t>(n) * 4;
    CHECK_MESSAGE(
        has(e.message, "wrote past the end of output 'y' (byte 0 of the " + std::to_string(cpu_zones(bytes).back) +
                           " after its " + std::to_string(bytes) + " bytes; workload 0, trial 0)"),
        e.message);
    CHECK_FALSE(e.worst);
    CHECK(e.timings.empty());
  }
  // Two elements past the end: byte 4 of the zone.
  const ke::Evaluation two = run(scale_spec({{{"n", 1001}}}), scale_with("y[n + 1] = 1.0f;"));
  CHECK(two.status == ke::Status::incorrect);
  CHECK_MESSAGE(has(two.message, "wrote past the end of output 'y' (byte 4 of the 28 after its 4004 bytes"),
                two.message);
}

TEST_CASE("bounds: a kernel that writes element -1 of an output, or of an input, fails") {
  // 1001 floats: 64 bytes before them to the guard page; 100 floats: 3648.
  for (std::int64_t n : {1001, 100}) {
    CAPTURE(n);
    const std::size_t front = cpu_zones(static_cast<std::size_t>(n) * 4).front;
    const ke::Evaluation e = run(scale_spec({{{"n", n}}}), scale_with("y[-1] = 0.0f;"));
    CHECK(e.status == ke::Status::incorrect);
    CHECK_MESSAGE(has(e.message, "wrote before the start of output 'y' (byte -1, in the " + std::to_string(front) +
                                     " before it; workload 0, trial 0)"),
                  e.message);
  }
  // A zero: the red zones never hold a 0 byte, so the write changes byte -1 whatever the address (3.0f's last
  // byte, 0x40, matched the zone's byte there once in 256 runs, and the report named byte -2).
  const ke::Evaluation input = run(scale_spec({{{"n", 1001}}}), scale_with("((float*)x)[-1] = 0.0f;"));
  CHECK(input.status == ke::Status::incorrect);
  CHECK_MESSAGE(has(input.message, "wrote before the start of input 'x' (byte -1, in the 64 before it"), input.message);
}

TEST_CASE("bounds: a kernel that starts writing out of bounds only after verification is caught in timing") {
  // Its fourth call onward (the first warm-up after three trials) writes past the end; the first checked timed
  // launch finds it.
  const ke::Evaluation e =
      run(scale_spec({{{"n", 1001}}}), scale_with("static int calls = 0; if (++calls > 3) y[n] = 0.0f;"));
  CHECK(e.status == ke::Status::incorrect);
  CHECK_MESSAGE(has(e.message,
                    "wrote past the end of output 'y' (byte 0 of the 28 after its 4004 bytes; workload 0, "
                    "seen after timed rep 0)"),
                e.message);
}

namespace {

// ke_test::centre_spec: y = x - mean(x) as the two-pass program of centre_program.hpp. CHUNK 256 over 1001 floats
// makes 4 partial sums, 32 bytes of doubles, and 32 bytes of rounding after them.
using ke_test::centre_spec;

}  // namespace

TEST_CASE("bounds: a program's kernel that writes one element past its temporary fails, naming the temporary") {
  // The first pass writes one partial sum too many (an empty one: 0), which the second never reads.
  const ke::Evaluation e =
      run(centre_spec({{{"n", 1001}}}), ke_test::centre_two_pass("\"cdiv(n, CHUNK)\"", "chunks + 1"), {{"CHUNK", 256}});
  CHECK(e.status == ke::Status::incorrect);
  CHECK_MESSAGE(has(e.message,
                    "wrote past the end of temporary 'partial' (byte 0 of the 32 after its 32 bytes; "
                    "workload 0, trial 0)"),
                e.message);
}

TEST_CASE("bounds: honest kernels stay ok at sizes that are and are not multiples of 64 bytes") {
  // 1, 15, 1001 floats are not; 16 (64 bytes) and 1024 (a page, no slack on either side) are.
  const std::vector<ke::Bindings> sizes = {{{"n", 1}}, {{"n", 15}}, {{"n", 16}}, {{"n", 1001}}, {{"n", 1024}}};
  const ke::Evaluation scale = run(scale_spec(sizes), kReference);
  CHECK_MESSAGE(scale.status == ke::Status::ok, scale.message);
  CHECK(scale.timings.size() == sizes.size());
  // The program's temporary: 1 partial sum (8 bytes), 4 (32), 8 (64: a multiple), 40 (320: a multiple).
  const std::vector<ke::Bindings> centre_sizes = {{{"n", 15}}, {{"n", 1001}}, {{"n", 2048}}, {{"n", 10000}}};
  const ke::Evaluation centre = run(centre_spec(centre_sizes), ke_test::centre_two_pass(), {{"CHUNK", 256}});
  CHECK_MESSAGE(centre.status == ke::Status::ok, centre.message);
  CHECK(centre.timings.size() == centre_sizes.size());
}
