// The model mutator against a model server on loopback that replays answers and injects faults.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <kernelevolve/kernelevolve.hpp>
#include <kernelevolve/program.hpp>
#include <set>

#include "core/tunables.hpp"
#include "mutators/answer.hpp"
#include "mutators/knowledge.hpp"
#include "support/fake_model_server.hpp"

namespace ke = kernelevolve;
using ke_test::FakeModelServer;
using ke_test::Reply;

namespace {

const char* kKey = "sk-test-secret-4242";

ke::Spec colsum() { return ke::load_spec(std::string(KE_FIXTURES) + "/e2e/colsum.json"); }

struct Fixture {
  ke::Spec spec = colsum();
  ke::SearchGraph graph;
  std::mt19937_64 rng{3};
  Fixture() {
    ke::Node seed;
    seed.mutator = "seed";
    seed.candidate = {spec.seed.source, ke::Language::c, spec.seed_tunables()};
    seed.evaluation.status = ke::Status::ok;
    seed.evaluation.timings = {{1000, 1000, 1000, 0, 5}, {1000, 1000, 1000, 0, 5}};
    seed.speedup = 1;
    graph.add(seed);
  }
  ke::Mutation mutate(ke::Mutator& m) { return m.mutate({spec, graph, {0}, rng}); }
};

ke::LlmOptions options_for(const FakeModelServer& server, const std::string& api = "openai") {
  setenv("KE_TEST_MODEL_KEY", kKey, 1);
  ke::LlmOptions o;
  o.api = api;
  o.base_url = server.url();
  o.model = "test-model";
  o.api_key_env = "KE_TEST_MODEL_KEY";
  o.timeout_s = 5;
  o.backoff_initial_s = 0.01;
  o.backoff_max_s = 0.05;
  o.device_description = "cpu: a test CPU";
  return o;
}

const std::string kBetter =
    "Sum 64 columns per pass so each row is read contiguously.\n```c\n#include <stdint.h>\n"
    "void colsum(const float* x, float* y, int64_t M, int64_t N) {\n"
    "  for (int64_t j = 0; j < N; ++j) { float s = 0; for (int64_t i = 0; i < M; ++i) s += x[i * N + j]; y[j] = s; }\n"
    "}\n```\n";

}  // namespace

TEST_CASE("OpenAI-compatible chat completions: the key goes in a header, the answer becomes the child") {
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(kBetter, 321)});
  Fixture f;
  ke::LlmMutator mutator(options_for(server));
  const ke::Mutation m = f.mutate(mutator);
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  CHECK(m.child->source.find("float s = 0") != std::string::npos);
  CHECK(m.tokens == 321);
  CHECK(mutator.tokens_used() == 321);
  CHECK(m.note.find("Sum 64 columns") != std::string::npos);
  const auto requests = server.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].path == "/v1/chat/completions");
  CHECK(requests[0].headers.find(std::string("Authorization: Bearer ") + kKey) != std::string::npos);
  CHECK(requests[0].body.find("\"model\": \"test-model\"") != std::string::npos);
  // The prompt carries the device, the spec, the parent's source; never the key.
  CHECK(m.prompt.find("cpu: a test CPU") != std::string::npos);
  CHECK(m.prompt.find("void colsum(const float* x, float* y, int64_t M, int64_t N)") != std::string::npos);
  CHECK(m.prompt.find("#define BLOCK 1") != std::string::npos);
  CHECK(m.prompt.find(kKey) == std::string::npos);
  CHECK(requests[0].body.find(kKey) == std::string::npos);
}

TEST_CASE("Anthropic messages: x-api-key, version header, tokens from usage") {
  FakeModelServer server;
  server.push({200, FakeModelServer::anthropic(kBetter, 40, 60)});
  Fixture f;
  ke::LlmMutator mutator(options_for(server, "anthropic"));
  const ke::Mutation m = f.mutate(mutator);
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  CHECK(m.tokens == 100);
  const auto requests = server.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].path == "/v1/messages");
  CHECK(requests[0].headers.find(std::string("x-api-key: ") + kKey) != std::string::npos);
  CHECK(requests[0].headers.find("anthropic-version:") != std::string::npos);
  CHECK(requests[0].body.find("\"system\":") != std::string::npos);
}

TEST_CASE("429 and 5xx are retried, honouring Retry-After") {
  FakeModelServer server;
  server.push({429, "{\"error\": \"slow down\"}", {"Retry-After: 0"}});
  server.push({503, "{\"error\": \"overloaded\"}"});
  server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::LlmMutator mutator(options_for(server));
  const ke::Mutation m = f.mutate(mutator);
  CHECK_MESSAGE(m.child.has_value(), m.error);
  CHECK(server.requests().size() == 3);
}

TEST_CASE("retries give up after max_retries, and a 4xx is not retried") {
  FakeModelServer server;
  for (int i = 0; i < 3; ++i) server.push({500, "{\"error\": \"down\"}"});
  Fixture f;
  auto o = options_for(server);
  o.max_retries = 2;
  ke::LlmMutator mutator(o);
  ke::Mutation m = f.mutate(mutator);
  CHECK_FALSE(m.child);
  CHECK(m.error.find("after 3 attempt(s)") != std::string::npos);
  CHECK(m.error.find("HTTP 500") != std::string::npos);
  server.push({400, "{\"error\": \"bad model\"}"});
  m = f.mutate(mutator);
  CHECK_FALSE(m.child);
  CHECK(m.error.find("after 1 attempt(s)") != std::string::npos);
  CHECK(server.requests().size() == 4);
}

TEST_CASE("garbage is a recorded failure: malformed JSON, no answer text, no code") {
  FakeModelServer server;
  server.push({200, "this is not json {"});
  server.push({200, "{\"choices\": []}"});
  server.push({200, FakeModelServer::openai("I would unroll the loop, but I will not write the code.")});
  Fixture f;
  ke::LlmMutator mutator(options_for(server));
  ke::Mutation m = f.mutate(mutator);
  CHECK_FALSE(m.child);
  CHECK(m.error.find("not JSON") != std::string::npos);
  m = f.mutate(mutator);
  CHECK_FALSE(m.child);
  CHECK(m.error.find("no answer text") != std::string::npos);
  m = f.mutate(mutator);
  CHECK_FALSE(m.child);
  CHECK(m.error.find("neither a fenced code block") != std::string::npos);
  CHECK(m.answer.find("unroll") != std::string::npos);
}

TEST_CASE("a slow answer times out and is a recorded failure") {
  // The answer would take 60 s, the limit is 0.3 s: the call must end at the limit, not at the answer. The
  // bound checked sits far from both, so that a slow or busy machine (the prompt built, the request sent, under
  // a sanitizer) cannot reach it, and waiting for the answer could not pass it. The server stops its wait
  // when the test ends.
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(kBetter), {}, 60000});
  Fixture f;
  auto o = options_for(server);
  o.timeout_s = 0.3;
  o.max_retries = 0;
  ke::LlmMutator mutator(o);
  const auto start = std::chrono::steady_clock::now();
  const ke::Mutation m = f.mutate(mutator);
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK_FALSE(m.child);
  CHECK(m.error.find("no answer") != std::string::npos);
  MESSAGE("the call ended after " << std::chrono::duration<double>(waited).count() << " s");
  CHECK(waited < std::chrono::seconds(20));
}

TEST_CASE("a missing key variable is named, and nothing is sent") {
  FakeModelServer server;
  Fixture f;
  auto o = options_for(server);
  o.api_key_env = "KE_TEST_NO_SUCH_KEY_VARIABLE";
  unsetenv("KE_TEST_NO_SUCH_KEY_VARIABLE");
  ke::LlmMutator mutator(o);
  const ke::Mutation m = f.mutate(mutator);
  CHECK_FALSE(m.child);
  CHECK(m.error.find("KE_TEST_NO_SUCH_KEY_VARIABLE") != std::string::npos);
  CHECK(server.requests().empty());
}

TEST_CASE("the prompt carries the compiler log and the worst mismatch of recent failed children") {
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(kBetter)});
  server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::Node broken;
  broken.parents = {0};
  broken.mutator = "llm";
  broken.candidate = {"void colsum() { frobnicate(); }", ke::Language::c, {}};
  broken.evaluation.status = ke::Status::compile_error;
  broken.evaluation.compile_log = "input.c:1:18: error: call to undeclared function 'frobnicate'";
  f.graph.add(broken);
  ke::Node wrong;
  wrong.parents = {0};
  wrong.mutator = "llm";
  wrong.candidate = {"void colsum(const float* x, float* y, long M, long N) { }", ke::Language::c, {}};
  wrong.evaluation.status = ke::Status::incorrect;
  wrong.evaluation.message = "wrong output";
  wrong.evaluation.worst = ke::Mismatch{"y", 1, 2, 17, 0.5, 2.25, 1.7};
  f.graph.add(wrong);
  ke::LlmMutator mutator(options_for(server));
  ke::Mutation m = f.mutate(mutator);
  CHECK(m.prompt.find("call to undeclared function 'frobnicate'") != std::string::npos);
  CHECK(m.prompt.find("y[17] = 0.5, expected 2.25") != std::string::npos);
  // Every time is labelled with its workload, and the prompt says how the figures are made.
  CHECK(m.prompt.find("Workloads: w0 {") != std::string::npos);
  CHECK(m.prompt.find("median times w0 1000 ±0 us, w1 1000 ±0 us") != std::string::npos);
  CHECK(m.prompt.find("geometric mean over the workloads") != std::string::npos);
  CHECK(m.prompt.find("caches are not flushed") != std::string::npos);  // a CPU kernel's timing
  // On the CPU, where each call's inputs sit: written just before the call, so warm as far as they fit
  // (colsum's w0 reads 1024 x 1024 floats).
  CHECK_MESSAGE(
      m.prompt.find("warm in cache as far as they fit: w0 2 copies of 4 MiB, 8 MiB in all;") != std::string::npos,
      m.prompt);
  CHECK(server.requests().at(0).body.find("frobnicate") != std::string::npos);
  // In "fresh" memory the parent stands alone.
  auto o = options_for(server);
  o.memory = "fresh";
  ke::LlmMutator fresh(o);
  m = f.mutate(fresh);
  CHECK(m.prompt.find("frobnicate") == std::string::npos);
}

TEST_CASE("memory modes: inherit shows the lineage, siblings the parent's other children") {
  FakeModelServer server;
  for (int i = 0; i < 2; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::Node child;
  child.parents = {0};
  child.mutator = "param";
  child.note = "neighbour: BLOCK 1 -> 2";
  child.candidate = {f.spec.seed.source, ke::Language::c, {{"BLOCK", 2}}};
  child.evaluation.status = ke::Status::ok;
  child.evaluation.timings = {{500, 500, 500, 0, 5}, {500, 500, 500, 0, 5}};
  child.speedup = 2;
  f.graph.add(child);
  auto o = options_for(server);
  o.memory = "inherit";
  ke::LlmMutator inherit(o);
  ke::Mutation m = inherit.mutate({f.spec, f.graph, {1}, f.rng});
  CHECK(m.prompt.find("lineage") != std::string::npos);
  CHECK(m.prompt.find("other children") == std::string::npos);
  o.memory = "siblings";
  ke::LlmMutator siblings(o);
  m = siblings.mutate({f.spec, f.graph, {0}, f.rng});
  CHECK(m.prompt.find("BLOCK 1 -> 2") != std::string::npos);
  CHECK(m.prompt.find("lineage") == std::string::npos);
}

TEST_CASE("the prompt gives a program's hardware counters per kernel step, not the longest kernel's again") {
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::DeviceInfo device;
  device.kind = "cpu";
  device.peak_bytes_per_s = 100e9;
  device.peak_flops_per_s = 500e9;
  ke::Node& seed = f.graph.node(0);
  // As WorkerEvaluator::hardware_counters keeps them for a library step then a kernel: the kernel's counters
  // under its step, and again at the top level (the longest kernel's).
  seed.evaluation.resources = {{"steps", 2},
                               {"step1.library", 1},
                               {"step1.share_permille", 900},
                               {"step2.registers", 32},
                               {"step2.hw_dram_pct", 40},
                               {"step2.share_permille", 100},
                               {"hw_dram_pct", 40}};
  seed.diagnosis = ke::diagnose(f.spec, seed.candidate.tunables, seed.evaluation, device);
  ke::LlmMutator mutator(options_for(server));
  const ke::Mutation m = f.mutate(mutator);
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  CHECK_MESSAGE(
      m.prompt.find(
          "\n- step 2 (step 2): regs 32, occupancy unknown; hardware counters: DRAM 40% of peak (Nsight Compute, its "
          "first launch in w0)\n") != std::string::npos,
      m.prompt);
  CHECK(m.prompt.find("one launch of w0") == std::string::npos);
}

TEST_CASE("the prompt gives the parent's diagnosis per workload, a GPU's resources, and the best's diagnosis") {
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::DeviceInfo device;
  device.kind = "cpu";
  device.name = "Test CPU";
  device.peak_bytes_per_s = 100e9;
  device.peak_flops_per_s = 500e9;
  ke::Node& seed = f.graph.node(0);
  // As a GPU device records them (the prompt prints whatever the node carries).
  seed.evaluation.resources = {
      {"registers", 40},      {"spill_store_bytes", 0},          {"shared_static_bytes", 4096},
      {"block_threads", 256}, {"active_blocks_per_sm", 6},       {"occupancy_pct", 75},
      {"hw_dram_pct", 12},    {"hw_achieved_occupancy_pct", 61}, {"hw_stall_long_scoreboard_pct", 70}};
  seed.diagnosis = ke::diagnose(f.spec, seed.candidate.tunables, seed.evaluation, device);
  ke::Node child;
  child.parents = {0};
  child.mutator = "param";
  child.candidate = {f.spec.seed.source, ke::Language::c, {{"BLOCK", 2}}};
  child.evaluation.status = ke::Status::ok;
  child.evaluation.timings = {{50, 50, 50, 0, 5}, {50, 50, 50, 0, 5}};
  child.speedup = 20;
  child.diagnosis = ke::diagnose(f.spec, child.candidate.tunables, child.evaluation, device);
  f.graph.add(child);
  ke::LlmMutator mutator(options_for(server));
  const ke::Mutation m = f.mutate(mutator);
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  // colsum's w0 (M = N = 1024) moves 4 * 1024 * 1024 + 4 * 1024 bytes and does 1024 * 1024 flops: in 1000 us,
  // 4.2 GB/s of 100 and 1.05 GFLOP/s of 500, far under both.
  CHECK(m.prompt.find("latency/overhead-bound when both are under 10%") != std::string::npos);
  CHECK(m.prompt.find("\n- w0 1000 us, 4.20 GB/s (4% of copy peak), 1.05 GFLOP/s (0.2% of FMA peak), "
                      "latency/overhead-bound\n") != std::string::npos);
  CHECK(m.prompt.find("\n- w1 1000 us, ") != std::string::npos);
  CHECK(m.prompt.find("\n- regs 40, spills 0 B, smem 4096 B, occupancy 75% (block 256, 6 blocks/SM)\n") !=
        std::string::npos);
  // Its hardware counters (as --counters reads them on a GPU), in words.
  CHECK_MESSAGE(
      m.prompt.find("\n- hardware counters: DRAM 12% of peak, achieved occupancy 61%, warps stalled on "
                    "long_scoreboard 70% of the time (Nsight Compute, one launch of w0)\n") != std::string::npos,
      m.prompt);
  // The best (the child, at 50 us: 84 GB/s) gets its own, and among the parent's children its line names the
  // bound of each workload.
  CHECK(
      m.prompt.find("## Best kernel so far (node 1): ok, 20x over the seed, median times w0 50 ±0 us (memory-bound)") !=
      std::string::npos);
  CHECK(m.prompt.find("\nDiagnosis:\n- w0 50.0 us, 84.0 GB/s (84% of copy peak), 21.0 GFLOP/s (4% of FMA peak), "
                      "memory-bound\n") != std::string::npos);
  CHECK(server.requests().at(0).body.find("of copy peak") != std::string::npos);
}

TEST_CASE("the knowledge base: shipped passages and a user's own folder, within the budget") {
  ke::mutators::KnowledgeBase shipped({ke::mutators::shipped_knowledge_dir()});
  CHECK(shipped.passages() > 10);
  const auto hits = shipped.retrieve("column sums row-major matrix accumulators cpu", 3000);
  REQUIRE_FALSE(hits.empty());
  std::size_t total = 0;
  for (const auto& p : hits) total += p.heading.size() + p.text.size();
  CHECK(total <= 3000);
  CHECK(hits[0].file == "x86_simd.md");
  const auto dir = std::filesystem::temp_directory_path() / ("ke_kb_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "mine.md") << "# Zebrafish trick\nUse the zebrafish layout for colsum.\n";
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  f.spec.notes += " zebrafish";
  auto o = options_for(server);
  o.knowledge_dirs = {dir.string()};
  ke::LlmMutator mutator(o);
  const ke::Mutation m = f.mutate(mutator);
  CHECK(m.prompt.find("Use the zebrafish layout") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the knowledge base: passages apply by device and language (front matter), a user's folder too") {
  ke::mutators::KnowledgeBase shipped({ke::mutators::shipped_knowledge_dir()});
  // A query that matches every target's notes: shared memory, warps, vectors, registers, tiles.
  const std::string query = "matrix product tiles registers shared memory warps vector loads blocking occupancy";
  auto files = [&](const ke::mutators::Applies& to) {
    std::set<std::string> out;
    for (const auto& p : shipped.retrieve(query, 100000, to)) out.insert(p.file);
    return out;
  };
  const auto everything = files({});
  CHECK(everything.count("cuda_hopper.md") == 1);
  CHECK(everything.count("x86_simd.md") == 1);
  const auto cpu = files({"cpu", "c"});
  CHECK(cpu.count("x86_simd.md") == 1);
  CHECK(cpu.count("cuda_hopper.md") == 0);
  CHECK(cpu.count("amd_cdna.md") == 0);
  CHECK(cpu.count("triton.md") == 0);
  const auto cuda = files({"cuda", "cuda"});
  CHECK(cuda.count("cuda_hopper.md") == 1);
  CHECK(cuda.count("x86_simd.md") == 0);
  CHECK(cuda.count("triton.md") == 0);
  const auto triton = files({"cuda", "triton"});
  CHECK(triton.count("triton.md") == 1);
  CHECK(triton.count("x86_simd.md") == 0);
  CHECK(triton.count("amd_cdna.md") == 0);
  // A user's file with front matter; one without applies everywhere.
  const auto dir = std::filesystem::temp_directory_path() / ("ke_kb_front_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "sub");
  std::ofstream(dir / "sub" / "gpu_only.md")
      << "---\ndevices: cuda\nlanguages: cuda, triton\n---\n# Okapi\nOkapi tiles.\n";
  std::ofstream(dir / "all.md") << "# Okapi everywhere\nOkapi for all.\n";
  ke::mutators::KnowledgeBase mine({dir.string()});
  auto okapi = [&](const ke::mutators::Applies& to) {
    std::set<std::string> out;
    for (const auto& p : mine.retrieve("okapi tiles", 10000, to)) out.insert(p.file);
    return out;
  };
  CHECK(okapi({"cuda", "triton"}) == std::set<std::string>{"all.md", "gpu_only.md"});
  CHECK(okapi({"cpu", "c"}) == std::set<std::string>{"all.md"});
  std::filesystem::remove_all(dir);
  // The model mutator asks for its spec's: the colsum prompt (C on the CPU) holds no CUDA notes.
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  f.spec.notes += " shared memory warps tiles registers";
  ke::LlmMutator mutator(options_for(server));
  const ke::Mutation m = f.mutate(mutator);
  CHECK(m.prompt.find("(cuda_hopper.md)") == std::string::npos);
  CHECK(m.prompt.find("(amd_cdna.md)") == std::string::npos);
  CHECK(m.prompt.find("(x86_simd.md)") != std::string::npos);
}

TEST_CASE("a recorded run: the model's kernel becomes the best, and the parameter search improves it") {
  // The model answers once with a new structure that declares its own tunable, CHUNK, whose default
  // is deliberately small; the parameter steps that follow must find a larger, faster CHUNK.
  // Which kernel is faster is fixed by construction, not left to the machine (issue 27): every kernel here sums
  // the columns a chunk at a time, rows in order, and repeats the whole sum some number of times (a compiler
  // barrier between passes keeps each one). The seed (chunks of 1 column) makes 16 passes; the model's kernel
  // 64 / CHUNK, so 4 at its default of 16 and 1 from CHUNK 64 on. Each kernel asserted faster below makes 4
  // times fewer passes, over chunks no narrower, against a factor of 1.5 asserted. Small workloads keep the
  // seed's 16 passes cheap.
  const std::string model_kernel =
      "Process CHUNK columns per pass over the rows, accumulating straight into y in row order.\n"
      "```c\n#include <stdint.h>\n// ke:tunable CHUNK 16 64 512 4096\n#ifndef CHUNK\n#define CHUNK 16\n#endif\n"
      "void colsum(const float* restrict x, float* restrict y, int64_t M, int64_t N) {\n"
      "  for (int pass = 0; pass < (CHUNK < 64 ? 64 / CHUNK : 1); ++pass) {\n"
      "    for (int64_t j0 = 0; j0 < N; j0 += CHUNK) {\n"
      "      const int64_t j1 = j0 + CHUNK < N ? j0 + CHUNK : N;\n"
      "      for (int64_t j = j0; j < j1; ++j) y[j] = 0.0f;\n"
      "      for (int64_t i = 0; i < M; ++i)\n"
      "        for (int64_t j = j0; j < j1; ++j) y[j] += x[i * N + j];\n"
      "    }\n"
      "    __asm__ volatile(\"\" : : : \"memory\");\n"
      "  }\n}\n```\n";
  ke::Spec spec = colsum();
  spec.workloads = {{{"M", 256}, {"N", 256}}, {{"M", 200}, {"N", 301}}};
  spec.seed.source =
      "#include <stdint.h>\n#ifndef BLOCK\n#define BLOCK 1\n#endif\n"
      "void colsum(const float* x, float* y, int64_t M, int64_t N) {\n"
      "  for (int pass = 0; pass < 16; ++pass) {\n"
      "    for (int64_t j0 = 0; j0 < N; j0 += BLOCK) {\n"
      "      const int64_t j1 = j0 + BLOCK < N ? j0 + BLOCK : N;\n"
      "      float acc[BLOCK];\n"
      "      for (int64_t j = j0; j < j1; ++j) acc[j - j0] = 0.0f;\n"
      "      for (int64_t i = 0; i < M; ++i)\n"
      "        for (int64_t j = j0; j < j1; ++j) acc[j - j0] += x[i * N + j];\n"
      "      for (int64_t j = j0; j < j1; ++j) y[j] = acc[j - j0];\n"
      "    }\n"
      "    __asm__ volatile(\"\" : : : \"memory\");\n"
      "  }\n}\n";
  spec.validate();
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(model_kernel, 900)});
  auto evaluator = std::make_shared<ke::LocalEvaluator>(spec, ke::open_device("cpu"));
  auto llm = std::make_shared<ke::LlmMutator>(options_for(server));
  auto mix = std::make_shared<ke::MixMutator>(llm, std::make_shared<ke::ParamMutator>(0.0), /*param_steps=*/6);
  ke::Evolver evolver(spec, evaluator, mix, std::make_shared<ke::GreedyPolicy>(), ke::max_evaluations(5));
  const ke::RunResult r = evolver.run();
  const auto& g = evolver.graph();
  // The seed, the model's kernel, and its three other CHUNK values: the seed's BLOCK is dead in the model's
  // kernel, so no step varies it (each would be the same kernel measured again), and the space is spent.
  REQUIRE(g.size() == 5);
  for (std::size_t id = 1; id < g.size(); ++id) CHECK(g.node(id).candidate.tunables.count("BLOCK") == 0);
  const ke::Node& model_node = g.node(1);
  CHECK(model_node.mutator == "llm");
  CHECK(model_node.tokens == 900);
  CHECK(model_node.prompt.find("## Problem: colsum") != std::string::npos);
  CHECK(model_node.answer.find("ke:tunable CHUNK") != std::string::npos);
  // The Evolver diagnosed each ok node once it was measured, and the model was given the seed's.
  for (const ke::Node& n : g.nodes()) CHECK(n.diagnosis.has_value() == (n.evaluation.status == ke::Status::ok));
  REQUIRE(g.node(0).diagnosis.has_value());
  CHECK(model_node.prompt.find("\n- w0 " + ke::workload_diagnosis_text(g.node(0).diagnosis->workloads[0]) + "\n") !=
        std::string::npos);
  REQUIRE_MESSAGE(model_node.evaluation.status == ke::Status::ok, model_node.evaluation.message);
  CHECK(model_node.candidate.tunables.at("CHUNK") == 16);
  CHECK(model_node.speedup > 1.5);  // the model's kernel beat the seed: it was the best when it landed
  REQUIRE(r.best.has_value());
  const ke::Node& best = g.node(*r.best);
  MESSAGE("the model's kernel: " << model_node.speedup << "x over the seed; the best: " << best.speedup << "x");
  CHECK(best.mutator == "param");
  CHECK(best.candidate.source == model_node.candidate.source);
  CHECK(best.candidate.tunables.at("CHUNK") > 16);
  CHECK(best.speedup > model_node.speedup * 1.5);
  const auto chain = g.lineage(best.id);
  CHECK(std::find(chain.begin(), chain.end(), model_node.id) != chain.end());
  CHECK(r.state.tokens == 900);
  CHECK(server.requests().size() == 1);
}

TEST_CASE(
    "the first kernel: with no parent, the prompt carries the reference and the signature, and the answer "
    "must be a whole source") {
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(kBetter, 500)});
  server.push({200, FakeModelServer::openai("<<<<<<< SEARCH\nfor\n=======\nwhile\n>>>>>>> REPLACE\n")});
  ke::Spec spec = colsum();
  spec.seed = ke::SourceRef{};
  ke::SearchGraph graph;
  std::mt19937_64 rng{5};
  ke::Node failed;
  failed.mutator = "llm";
  failed.candidate = {"void colsum() { frobnicate(); }", ke::Language::c, {}};
  failed.evaluation.status = ke::Status::compile_error;
  failed.evaluation.compile_log = "input.c:1:18: error: call to undeclared function 'frobnicate'";
  ke::LlmMutator mutator(options_for(server));
  CHECK(mutator.writes_first_kernel());
  const ke::Mutation m = mutator.mutate({spec, graph, {}, rng, {failed}});
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  CHECK(m.child->source.find("float s = 0") != std::string::npos);
  CHECK(m.child->tunables.empty());  // the model's kernel does not read the seed's BLOCK: dropped
  CHECK(m.tokens == 500);
  CHECK(m.prompt.find("You write c kernels") != std::string::npos);
  CHECK(m.prompt.find("## Reference") != std::string::npos);
  CHECK(m.prompt.find(spec.reference.source) != std::string::npos);  // the reference's own source
  CHECK(m.prompt.find("`const float* x`: in buffer of f32, shape [M, N]") != std::string::npos);
  CHECK(m.prompt.find("`int64_t N`: size") != std::string::npos);
  CHECK(m.prompt.find("Write the first c kernel") != std::string::npos);
  CHECK(m.prompt.find("void colsum(const float* x, float* y, int64_t M, int64_t N)") != std::string::npos);
  CHECK(m.prompt.find("call to undeclared function 'frobnicate'") != std::string::npos);  // an earlier attempt
  CHECK(m.prompt.find("## Parent kernel") == std::string::npos);
  // Edits need a parent: a first kernel that answers with them is a recorded failure.
  const ke::Mutation e = mutator.mutate({spec, graph, {}, rng});
  CHECK_FALSE(e.child.has_value());
  CHECK(e.error.find("not usable") != std::string::npos);
}

TEST_CASE("the first kernel of a mix is its model's, even when the parameter search has steps left") {
  FakeModelServer server;
  for (int i = 0; i < 2; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  auto llm = std::make_shared<ke::LlmMutator>(options_for(server));
  ke::MixMutator mix(llm, std::make_shared<ke::ParamMutator>(), 4);
  CHECK(mix.writes_first_kernel());
  CHECK_FALSE(
      ke::MixMutator(std::make_shared<ke::ParamMutator>(), std::make_shared<ke::ParamMutator>()).writes_first_kernel());
  ke::Mutation m = f.mutate(mix);  // the model's structure: the parameter steps now have 4 to take
  REQUIRE(m.child.has_value());
  ke::SearchGraph empty;
  m = mix.mutate({f.spec, empty, {}, f.rng});
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  CHECK(m.mutator == "llm");
  CHECK(server.requests().size() == 2);
  CHECK(server.requests().at(1).body.find("Write the first c kernel") != std::string::npos);
}

TEST_CASE(
    "a Triton problem: the model is asked for Triton, its tunables are constexprs, and a ```triton answer "
    "with `# ke:tunable` lines becomes the child") {
  const std::string answer =
      "One program per BLOCK columns, reading each row's slice contiguously.\n```triton\nimport triton\n"
      "import triton.language as tl\n# ke:tunable BLOCK 256 128 512\n\n@triton.jit\n"
      "def colsum(x, y, M, N, BLOCK: tl.constexpr):\n    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
      "    acc = tl.zeros((BLOCK,), dtype=tl.float32)\n    for i in range(0, M):\n"
      "        acc += tl.load(x + i * N + cols, mask=cols < N, other=0.0)\n    tl.store(y + cols, acc, mask=cols < N)\n```\n";
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(answer, 300)});
  ke::Spec spec = colsum();
  spec.language = ke::Language::triton;
  spec.reference.language = ke::Language::c;
  spec.reference.device = "cpu";
  ke::LaunchRule rule;
  rule.grid[0] = ke::Expr::parse("cdiv(N, 256)");
  spec.launch = rule;
  spec.tunables = {{"num_warps", {4, 8}}};
  spec.constraints.clear();
  spec.seed = ke::SourceRef{};
  ke::SearchGraph graph;
  std::mt19937_64 rng{7};
  ke::LlmMutator mutator(options_for(server));
  const ke::Mutation m = mutator.mutate({spec, graph, {}, rng});
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  CHECK(m.child->language == ke::Language::triton);
  CHECK(m.child->source.find("@triton.jit") != std::string::npos);
  CHECK(m.child->tunables.at("BLOCK") == 256);  // declared by the answer, its first value
  CHECK(m.prompt.find("You write triton kernels") != std::string::npos);
  CHECK(m.prompt.find("tl.constexpr") != std::string::npos);
  CHECK(m.prompt.find("each of 32 x num_warps threads") != std::string::npos);
  CHECK(m.prompt.find("the L2 flushed before each") != std::string::npos);  // a GPU kernel's timing
  CHECK(m.prompt.find("`x` (*fp32): in buffer of f32") != std::string::npos);
  CHECK(m.prompt.find("def colsum(x, y, M, N)") != std::string::npos);
  CHECK(m.prompt.find("# ke:tunable") != std::string::npos);
}

TEST_CASE("live tunables: a tunable belongs to a candidate while its source, or the spec's rules, read it") {
  using ke::tunable_is_live;
  ke::Spec spec = colsum();
  const std::string guard = "#ifndef BLOCK\n#define BLOCK 1\n#endif\n";
  CHECK_FALSE(tunable_is_live(spec, guard + "void colsum() {}\n", ke::Language::c, "BLOCK"));
  CHECK_FALSE(tunable_is_live(spec, guard + "// BLOCK is no longer used\nvoid colsum() { /* BLOCK */ }\n",
                              ke::Language::c, "BLOCK"));
  CHECK_FALSE(tunable_is_live(spec, "void colsum() { int BLOCKS = 2; }\n", ke::Language::c, "BLOCK"));
  CHECK(tunable_is_live(spec, guard + "void colsum() { float acc[BLOCK]; }\n", ke::Language::c, "BLOCK"));
  CHECK(tunable_is_live(spec, spec.seed.source, ke::Language::c, "BLOCK"));
  // An unguarded #define fixes the value: dead. An #undef after the value was used is hygiene: still live.
  CHECK_FALSE(
      tunable_is_live(spec, "#define BLOCK 4\nvoid colsum() { float acc[BLOCK]; }\n", ke::Language::c, "BLOCK"));
  CHECK(tunable_is_live(spec, guard + "void colsum() { float acc[BLOCK]; }\n#undef BLOCK\n", ke::Language::c, "BLOCK"));
  // Read by the launch rule (or cost, or a constraint): live whatever the source does.
  ke::LaunchRule rule;
  rule.block[0] = ke::Expr::parse("THREADS");
  spec.launch = rule;
  CHECK(tunable_is_live(spec, "void colsum() {}\n", ke::Language::cuda, "THREADS"));
  // Triton: a constexpr is read where it is named; its options are always live.
  const std::string triton =
      "import triton\n# BLOCK was here\n@triton.jit\ndef k(x, y, BLOCK: tl.constexpr):\n    pass\n";
  CHECK(tunable_is_live(spec, triton, ke::Language::triton, "BLOCK"));
  CHECK_FALSE(tunable_is_live(spec, "import triton\n# BLOCK was here\n", ke::Language::triton, "BLOCK"));
  CHECK(tunable_is_live(spec, "", ke::Language::triton, "num_warps"));
  // A rewrite keeps what it reads and what it declares, and drops the rest.
  const ke::Bindings kept = ke::live_tunables(spec, "// ke:tunable CHUNK 8 16\nvoid colsum() { int c = CHUNK; }\n",
                                              ke::Language::c, {{"BLOCK", 4}, {"THREADS", 64}});
  CHECK(kept == ke::Bindings{{"CHUNK", 8}, {"THREADS", 64}});
  // A declared tunable keeps the parent's value while the declaration lists it, else starts at its first.
  const std::string reads = "void colsum() { int c = CHUNK; }\n";
  CHECK(ke::live_tunables(spec, "// ke:tunable CHUNK 8 16 32\n" + reads, ke::Language::c, {{"CHUNK", 16}}) ==
        ke::Bindings{{"CHUNK", 16}});
  CHECK(ke::live_tunables(spec, "// ke:tunable CHUNK 4 8\n" + reads, ke::Language::c, {{"CHUNK", 16}}) ==
        ke::Bindings{{"CHUNK", 4}});
}

TEST_CASE("live tunables: the parameter search never varies a tunable its parent does not read") {
  ke::Spec spec = colsum();
  spec.tunables["UNROLL"] = {1, 2, 4, 8};  // the seed reads BLOCK, not UNROLL
  spec.validate();
  ke::SearchGraph graph;
  ke::Node seed;
  seed.mutator = "seed";
  // As the evolver makes node 0: the seed's live tunables only (BLOCK; UNROLL is dead).
  seed.candidate = {spec.seed.source, ke::Language::c,
                    ke::live_tunables(spec, spec.seed.source, ke::Language::c, spec.seed_tunables())};
  CHECK(seed.candidate.tunables == ke::Bindings{{"BLOCK", 1}});
  seed.evaluation.status = ke::Status::ok;
  graph.add(seed);
  std::mt19937_64 rng{11};
  ke::ParamMutator mutator;
  for (int i = 0; i < 30; ++i) {
    const ke::Mutation m = mutator.mutate({spec, graph, {0}, rng});
    if (!m.child) break;
    CAPTURE(m.note);
    CHECK(m.child->tunables.count("UNROLL") == 0);
    CHECK(m.note.find("UNROLL") == std::string::npos);
    ke::Node n;
    n.mutator = "param";
    n.parents = {0};
    n.candidate = *m.child;
    n.evaluation.status = ke::Status::ok;
    graph.add(n);
  }
  // Ten values of BLOCK, the seed's included: nine children, then the space is spent (no duplicates in UNROLL).
  CHECK(graph.size() == 10);
  // A parent that reads none of them: nothing to vary.
  ke::SearchGraph bare;
  ke::Node stub;
  stub.candidate = {"void colsum(const float* x, float* y, long M, long N) {}", ke::Language::c, spec.seed_tunables()};
  stub.evaluation.status = ke::Status::ok;
  bare.add(stub);
  const ke::Mutation none = mutator.mutate({spec, bare, {0}, rng});
  CHECK_FALSE(none.child.has_value());
  CHECK(none.error.find("reads none") != std::string::npos);
}

TEST_CASE("device facts: a CPU kernel is told one core's ceilings, the compiler and its flags; a GPU its limits") {
  ke::DeviceInfo cpu;
  cpu.id = "cpu";
  cpu.kind = "cpu";
  cpu.name = "Test Xeon";
  cpu.compute_units = 2;
  cpu.vector_bits = 512;
  cpu.peak_flops_per_s = 512e9;  // the machine's: two cores
  cpu.peak_bytes_per_s = 12e9;
  cpu.properties = {{"llvm_cpu", "sapphirerapids"},
                    {"max_ghz", "2.000000"},
                    {"compiler", "Clang 16.0.6 (in-process JIT)"},
                    {"flags", "-O3 -ffp-contract=on -march=sapphirerapids (C -std=gnu11, C++ -std=c++17)"},
                    {"isa", "avx2 fma avx512f"},
                    {"stack_bytes", std::to_string(8 << 20)}};
  ke::WorkerOptions limits;
  limits.timeout_s = 0;
  const std::string c = ke::describe_device_for_model(cpu, ke::Language::c, &limits);
  MESSAGE(c);
  CHECK(c.find("ONE core") != std::string::npos);
  CHECK(c.find("256 GFLOP/s") != std::string::npos);  // one of the two cores
  // Computed from the clock, unlike the copy rate: a model that took it for measured chased headroom.
  CHECK(
      c.find(
          "(nominal, computed, not measured: 16 fp32 lanes (512-bit vectors) x 2 flops an FMA x 2 FMA units x 2.00 GHz, computed from the nominal clock") !=
      std::string::npos);
  CHECK(c.find("at least that share of what the core can do") != std::string::npos);
  CHECK(c.find("memory copy 12.0 GB/s (measured on one thread)") != std::string::npos);
  CHECK(c.find("512 GFLOP/s") == std::string::npos);
  CHECK(c.find("-march=sapphirerapids") != std::string::npos);
  CHECK(c.find("avx512f") != std::string::npos);
  CHECK(c.find("Stack: 8 MiB") != std::string::npos);
  CHECK(
      c.find(
          "10 x the seed's evaluation time (for a problem without a seed, the first kernel's, which has 300 s), at least 10 s") !=
      std::string::npos);

  // The real host: its compiler, flags and extensions come from the CPU device itself.
  const ke::DeviceInfo host = ke::open_device("cpu")->info();
  const std::string h = ke::describe_device_for_model(host, ke::Language::cpp);
  CHECK(h.find("Clang ") != std::string::npos);
  CHECK(h.find("-std=c++17") != std::string::npos);
  CHECK(h.find("<immintrin.h>") != std::string::npos);

  ke::DeviceInfo gpu;
  gpu.id = "cuda:0";
  gpu.kind = "cuda";
  gpu.name = "NVIDIA H200";
  gpu.compute_units = 132;
  gpu.peak_bytes_per_s = 4.1e12;
  gpu.peak_flops_per_s = 60e12;
  gpu.properties = {{"arch", "sm_90"},
                    {"warp_size", "32"},
                    {"registers_per_sm", "65536"},
                    {"shared_per_sm", "228 KiB"},
                    {"max_threads_per_sm", "2048"},
                    {"max_blocks_per_sm", "32"},
                    {"max_threads_per_block", "1024"},
                    {"registers_per_block", "65536"},
                    {"shared_per_block", "48 KiB"},
                    {"shared_per_block_optin", "227 KiB"},
                    {"nvrtc", "12.8"}};
  limits.timeout_s = 30;
  const std::string g = ke::describe_device_for_model(gpu, ke::Language::cuda, &limits);
  MESSAGE(g);
  CHECK(g.find("132 SMs") != std::string::npos);
  CHECK(g.find("65536 registers") != std::string::npos);
  CHECK(g.find("227 KiB") != std::string::npos);
  CHECK(g.find("NVRTC 12.8") != std::string::npos);
  CHECK(g.find("ONE core") == std::string::npos);
  CHECK(g.find("30 s") != std::string::npos);
  CHECK(ke::describe_device_for_model(gpu, ke::Language::triton).find("Triton") != std::string::npos);
}

TEST_CASE("a model's answer that is its parent again, up to comments and spacing, is never measured") {
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(kBetter, 100)});
  // The same kernel with a comment and other spacing: no new code, so nothing to measure.
  std::string again = kBetter;
  again.replace(again.find("void colsum"), 11, "// the same loop, said again\nvoid   colsum");
  server.push({200, FakeModelServer::openai(again, 100)});
  const ke::Spec spec = colsum();
  auto evaluator = std::make_shared<ke::LocalEvaluator>(spec, ke::open_device("cpu"));
  auto llm = std::make_shared<ke::LlmMutator>(options_for(server));
  ke::EvolverOptions eo;
  eo.confirm_rounds = 0;
  eo.max_consecutive_mutator_failures = 1;
  ke::Evolver evolver(spec, evaluator, llm, std::make_shared<ke::GreedyPolicy>(), ke::max_evaluations(5), eo);
  const ke::RunResult r = evolver.run();
  MESSAGE(r.stop_reason);
  CHECK(server.requests().size() >= 2);
  REQUIRE(evolver.graph().size() == 2);  // the seed and the model's first kernel; the repeat was not added
  CHECK(r.stop_reason.find("only known points") != std::string::npos);
}

TEST_CASE("the prompt gives the marks to beat (a PyTorch problem's baselines), spreads, and the tunable rule") {
  FakeModelServer server;
  for (int i = 0; i < 2; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::Node& seed = f.graph.node(0);
  seed.evaluation.timings = {{1000, 990, 1020, 7.5, 5}, {800, 790, 810, 3, 5}};
  ke::Baseline eager{"eager", {}}, compile{"compile", {}};
  eager.evaluation.status = ke::Status::ok;
  eager.evaluation.timings = {{2000, 1990, 2100, 12, 5}, {400, 399, 402, 1, 5}};
  compile.evaluation.status = ke::Status::compile_error;
  compile.evaluation.message = "torch 1.13 has no torch.compile";
  ke::LlmMutator mutator(options_for(server));
  const ke::Mutation m = mutator.mutate({f.spec, f.graph, {0}, f.rng, {}, nullptr, {eager, compile}});
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  CHECK_MESSAGE(
      m.prompt.find("## The marks to beat (measured in this run, as the kernels are)\n"
                    "- precision: strict (fp32, TF32 off everywhere); a kernel is right within the larger of the "
                    "tolerance and 2x the reference's own error against float64\n"
                    "- the mark to beat, the faster of them on each workload: w0 2000 us (eager), w1 400 us (eager)\n"
                    "- PyTorch eager: w0 2000 ±12 us, w1 400 ±1 us\n"
                    "- torch.compile: no time (compile_error: torch 1.13 has no torch.compile)\n") != std::string::npos,
      m.prompt);
  // The parent's speedup over eager beside the one over the seed: sqrt(2000/1000 * 400/800) = 1; over the mark (the
  // faster baseline per workload, here eager on both) the same.
  CHECK_MESSAGE(m.prompt.find("ok, 1x over the seed, 1x over PyTorch eager, 1x over the mark to beat, median times w0 "
                              "1000 ±7.5 us, w1 800 ±3 us") != std::string::npos,
                m.prompt);
  CHECK(m.prompt.find("over torch.compile") == std::string::npos);  // no time, no speedup
  // The spec's tunables are said to be the seed's, the parent's own listed with it.
  CHECK(
      m.prompt.find("The spec's tunables (macros the seed reads; each kernel's own are listed with it): BLOCK in {") !=
      std::string::npos);
  // The rule the child's tunables follow, as live_tunables applies it, is in what the model is told.
  CHECK(server.requests().at(0).body.find("evaluated first at the parent's value of each tunable") !=
        std::string::npos);
  // Without baselines (a spec's problem) there is no such section.
  const ke::Mutation plain = f.mutate(mutator);
  CHECK(plain.prompt.find("marks to beat") == std::string::npos);
}

TEST_CASE("each of the parent's other children says what the search made of it after: its steps and their fastest") {
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  auto add = [&](ke::NodeId parent, const char* mutator, std::int64_t block, double us) {
    ke::Node n;
    n.parents = {parent};
    n.mutator = mutator;
    n.candidate = {f.spec.seed.source, ke::Language::c, {{"BLOCK", block}}};
    n.evaluation.status = ke::Status::ok;
    n.evaluation.timings = {{us, us, us, 2, 5}, {us, us, us, 2, 5}};
    n.speedup = 1000 / us;
    return f.graph.add(n);
  };
  // A rewrite of the seed at 800 us, then the parameter search on it: 600 us at BLOCK=8, and a step after that.
  const ke::NodeId rewrite = add(0, "llm", 4, 800);
  const ke::NodeId tuned = add(rewrite, "param", 8, 600);
  add(tuned, "param", 16, 700);
  // A second rewrite whose one step is within its noise.
  const ke::NodeId other = add(0, "llm", 4, 900);
  add(other, "param", 2, 899);
  ke::LlmMutator mutator(options_for(server));
  const ke::Mutation m = mutator.mutate({f.spec, f.graph, {0}, f.rng});
  CHECK_MESSAGE(
      m.prompt.find("- node " + std::to_string(rewrite) + " (llm): ok, 1.25x over the seed") != std::string::npos,
      m.prompt);
  CHECK_MESSAGE(m.prompt.find("  after it, 2 nodes of the search; the fastest, node " + std::to_string(tuned) +
                              " (param), with BLOCK=8: ok, 1.66667x over the seed") != std::string::npos,
                m.prompt);
  CHECK(m.prompt.find("  after it, 1 node of the search; the fastest, node " + std::to_string(other + 1) +
                      " (param), with BLOCK=2: ok, ") != std::string::npos);
  CHECK(m.prompt.find("(within the noise of node " + std::to_string(other) + ")") != std::string::npos);
  // The others beside the fastest, each by what it changed from the rewrite and its speedup.
  CHECK_MESSAGE(
      m.prompt.find("  the others: node " + std::to_string(tuned + 1) + " (BLOCK=16) 1.43x\n") != std::string::npos,
      m.prompt);
  CHECK(m.prompt.find("(within the noise of node " + std::to_string(rewrite) + ")") == std::string::npos);
}

TEST_CASE("a parent whose lead over its own parent is inside the spreads is labelled as possible noise") {
  FakeModelServer server;
  for (int i = 0; i < 3; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  f.graph.node(0).evaluation.timings = {{1000, 950, 1050, 30, 5}, {1000, 950, 1050, 30, 5}};
  auto child_of_seed = [&](double us, double mad) {
    ke::Node n;
    n.parents = {0};
    n.mutator = "param";
    n.candidate = {f.spec.seed.source, ke::Language::c, {{"BLOCK", static_cast<std::int64_t>(us)}}};
    n.evaluation.status = ke::Status::ok;
    n.evaluation.timings = {{us, us, us, mad, 5}, {us, us, us, mad, 5}};
    n.speedup = 1000 / us;
    return f.graph.add(n);
  };
  const ke::NodeId close = child_of_seed(980, 30);  // 2% ahead, spreads of 3%: a tie
  const ke::NodeId clear = child_of_seed(500, 5);   // 2x ahead
  ke::LlmMutator mutator(options_for(server));
  const ke::Mutation noisy = mutator.mutate({f.spec, f.graph, {close}, f.rng});
  CHECK_MESSAGE(
      noisy.prompt.find("Noise: the parent's lead over its own parent (node 0, 1x over the seed) is within the "
                        "spread of single measurements") != std::string::npos,
      noisy.prompt);
  // It is not the best, and the prompt says why it was given anyway and how the best compares.
  CHECK(noisy.prompt.find("(The search picks parents to explore, not only the best: the best so far, node " +
                          std::to_string(clear) + ", is faster by more than the noise") != std::string::npos);
  const ke::Mutation real = mutator.mutate({f.spec, f.graph, {clear}, f.rng});
  CHECK(real.prompt.find("Noise:") == std::string::npos);
  CHECK(real.prompt.find("The search picks parents") == std::string::npos);  // it is the best
}

TEST_CASE("a knowledge note the lineage's prompts gave already is named, not repeated") {
  FakeModelServer server;
  for (int i = 0; i < 2; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::LlmMutator mutator(options_for(server));
  const ke::Mutation first = f.mutate(mutator);
  REQUIRE_MESSAGE(first.child.has_value(), first.error);
  const std::size_t notes = first.prompt.find("## Notes from the knowledge base\n### ");
  REQUIRE_MESSAGE(notes != std::string::npos, first.prompt);
  const std::size_t title_at = notes + std::string("## Notes from the knowledge base\n").size();
  const std::string title = first.prompt.substr(title_at, first.prompt.find('\n', title_at) - title_at);
  // The child that prompt wrote, ok and faster; the next prompt, for its child, names the note instead.
  ke::Node child;
  child.parents = {0};
  child.mutator = "llm";
  child.candidate = *first.child;
  child.prompt = first.prompt;
  child.evaluation.status = ke::Status::ok;
  child.evaluation.timings = {{500, 500, 500, 1, 5}, {500, 500, 500, 1, 5}};
  child.speedup = 2;
  const ke::NodeId id = f.graph.add(child);
  const ke::Mutation second = mutator.mutate({f.spec, f.graph, {id}, f.rng});
  CHECK_MESSAGE(second.prompt.find(title + ": given in the prompt that wrote node " + std::to_string(id) +
                                   ", not repeated\n") != std::string::npos,
                second.prompt);
  CHECK(second.prompt.find(title + "\n") == std::string::npos);
}

TEST_CASE(
    "the parent a model builds on is measured again when the run can: confirmed, not confirmed, or a single measurement") {
  FakeModelServer server;
  for (int i = 0; i < 3; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::Node child;
  child.parents = {0};
  child.mutator = "llm";
  child.candidate = {f.spec.seed.source, ke::Language::c, {{"BLOCK", 2}}};
  child.evaluation.status = ke::Status::ok;
  child.evaluation.timings = {{740, 740, 740, 5, 5}, {740, 740, 740, 5, 5}};
  child.speedup = 1.35;
  const ke::NodeId id = f.graph.add(child);
  ke::LlmMutator mutator(options_for(server));
  // No way to measure again: the prompt says the figures are one evaluation's.
  ke::Mutation m = mutator.mutate({f.spec, f.graph, {id}, f.rng});
  CHECK(m.prompt.find("Single measurement: its figures are one evaluation's") != std::string::npos);
  // The run measured it again: 0.93x, and the search's 1.35x is not borne out.
  ke::Confirmation outlier;
  outlier.node = id;
  outlier.rounds = 2;
  outlier.speedup = 0.93, outlier.speedup_low = 0.91, outlier.speedup_high = 0.95, outlier.search_speedup = 1.35;
  std::vector<ke::NodeId> asked;
  auto confirm = [&](ke::NodeId n) -> const ke::Confirmation* {
    asked.push_back(n);
    return &outlier;
  };
  m = mutator.mutate({f.spec, f.graph, {id}, f.rng, {}, nullptr, {}, confirm});
  CHECK_MESSAGE(
      m.prompt.find("Not confirmed: measured again against the seed, interleaved, 2 rounds on fresh inputs: 0.93x "
                    "(rounds 0.91x to 0.95x); the search's 1.35x was an outlier") != std::string::npos,
      m.prompt);
  CHECK(asked == std::vector<ke::NodeId>{id});  // the parent; the seed is the reference point, never asked
  outlier.confirmed = true;
  outlier.speedup = 1.33;
  m = mutator.mutate({f.spec, f.graph, {id}, f.rng, {}, nullptr, {}, confirm});
  CHECK(m.prompt.find("Confirmed: measured again against the seed, interleaved, 2 rounds on fresh inputs: 1.33x") !=
        std::string::npos);
}

TEST_CASE("a noisy machine is said in the prompt, from the seed's own spread") {
  FakeModelServer server;
  for (int i = 0; i < 2; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::LlmMutator mutator(options_for(server));
  CHECK(f.mutate(mutator).prompt.find("this machine is noisy") == std::string::npos);  // the seed's spread is 0
  f.graph.node(0).evaluation.timings = {{1000, 800, 1300, 100, 5}, {1000, 900, 1100, 20, 5}};
  const ke::Mutation m = f.mutate(mutator);
  CHECK_MESSAGE(m.prompt.find("Noise: this machine is noisy: the seed's launches spread by 10% of their median (median "
                              "absolute deviation); a difference under about 20% is not one") != std::string::npos,
                m.prompt);
}

TEST_CASE("a CPU kernel's prompt says how many input copies each call touches and which cache level they fit") {
  FakeModelServer server;
  for (int i = 0; i < 3; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;  // colsum: w0 a 1024 x 1024 float matrix (4 MiB), w1 777 x 1531 (about 4.5 MiB)
  ke::LlmOptions o = options_for(server);
  // The device's caches as describe_device_for_model writes them: the prompt reads them back.
  ke::DeviceInfo cpu;
  cpu.id = "cpu", cpu.kind = "cpu", cpu.name = "Made-up CPU";
  cpu.properties = {{"cache_l1d", "32 KiB"}, {"cache_l1i", "32 KiB"}, {"cache_l2", "1 MiB"}, {"cache_l3", "32 MiB"}};
  o.device_description = ke::describe_device_for_model(cpu, ke::Language::c);
  REQUIRE(o.device_description.find("Caches: l1d 32 KiB, l2 1 MiB, l3 32 MiB.") != std::string::npos);
  ke::LlmMutator with_l3(o);
  const ke::Mutation fits = f.mutate(with_l3);
  CHECK_MESSAGE(fits.prompt.find("w0 2 copies of 4 MiB, 8 MiB in all: larger than L2 (1 MiB), within L3 (32 MiB): "
                                 "expect them warm in L3, not in L1d/L2;") != std::string::npos,
                fits.prompt);
  CHECK(fits.prompt.find("w1 2 copies of 5 MiB, 9 MiB in all: larger than L2 (1 MiB), within L3 (32 MiB)") !=
        std::string::npos);
  CHECK(fits.prompt.find("an input of 64 KiB or less is drawn afresh instead") != std::string::npos);

  // A smaller last level: the copies do not fit any cache.
  o.device_description = "cpu: a test CPU\nCaches: l1d 48 KiB, l2 2 MiB, l3 6 MiB.\n";
  ke::LlmMutator small_l3(o);
  const ke::Mutation spills = f.mutate(small_l3);
  CHECK_MESSAGE(spills.prompt.find("w0 2 copies of 4 MiB, 8 MiB in all: larger than L3 (6 MiB): expect them cold, "
                                   "from memory;") != std::string::npos,
                spills.prompt);
  CHECK(spills.prompt.find("within L") == std::string::npos);

  // No caches in the description: the sizes alone, to compare with whatever the device section says.
  o.device_description = "cpu: a test CPU";
  ke::LlmMutator no_caches(o);
  const ke::Mutation unknown = f.mutate(no_caches);
  CHECK(unknown.prompt.find("w0 2 copies of 4 MiB, 8 MiB in all; w1") != std::string::npos);
  CHECK(unknown.prompt.find("(compare with the caches above).") != std::string::npos);
}

TEST_CASE("ceilings that moved between runs are in the device facts and make the prompt call the machine noisy") {
  FakeModelServer server;
  for (int i = 0; i < 2; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::DeviceInfo cpu;
  cpu.id = "cpu", cpu.kind = "cpu", cpu.name = "Made-up CPU";
  cpu.peak_bytes_per_s = 8.4e9;
  ke::LlmOptions o = options_for(server);
  o.device_description = ke::describe_device_for_model(cpu, ke::Language::c);
  ke::LlmMutator steady(o);
  CHECK(f.mutate(steady).prompt.find("this machine is noisy") == std::string::npos);

  cpu.properties[ke::kCeilingsMovedProperty] = "copy 8.4 GB/s, 49% under the 16.4 GB/s measured before on this device";
  o.device_description = ke::describe_device_for_model(cpu, ke::Language::c);
  CHECK(o.device_description.find("Ceilings moved: copy 8.4 GB/s, 49% under the 16.4 GB/s measured before on this "
                                  "device: shares of these ceilings are rough.\n") != std::string::npos);
  ke::LlmMutator moved(o);
  const ke::Mutation m = f.mutate(moved);
  CHECK_MESSAGE(
      m.prompt.find("Noise: this machine is noisy: its measured ceilings moved between runs (copy 8.4 GB/s, "
                    "49% under the 16.4 GB/s measured before on this device), so shares of peak are rough; the "
                    "run measures its confirmations twice as long.") != std::string::npos,
      m.prompt);
}

namespace {

// colsum as a CUDA problem without a seed: a thread per column, BLOCK threads a block.
ke::Spec colsum_cuda() {
  ke::Spec spec = colsum();
  spec.language = ke::Language::cuda;
  spec.reference.language = ke::Language::c;
  spec.reference.device = "cpu";
  ke::LaunchRule rule;
  rule.grid[0] = ke::Expr::parse("cdiv(N, BLOCK)");
  rule.block[0] = ke::Expr::parse("BLOCK");
  spec.launch = rule;
  spec.constraints.clear();
  spec.seed = ke::SourceRef{};
  return spec;
}

}  // namespace

TEST_CASE("programs: the prompt says how a source declares its own plan, in its language's terms") {
  FakeModelServer server;
  for (int i = 0; i < 6; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  ke::LlmMutator mutator(options_for(server));
  ke::SearchGraph graph;
  std::mt19937_64 rng{11};
  // CUDA: a comment with two kernels and a temporary, the library steps, and the launch as the default plan.
  const ke::Mutation cuda = mutator.mutate({colsum_cuda(), graph, {}, rng});
  CHECK_MESSAGE(
      cuda.prompt.find("/* kernelevolve-plan\n{\"temporaries\": [{\"name\": \"partial\"") != std::string::npos,
      cuda.prompt);
  CHECK(cuda.prompt.find("{\"kernel\": \"finish\", \"grid\": [1], \"block\": [1024]") != std::string::npos);
  CHECK(cuda.prompt.find("\"cublaslt.matmul\"") != std::string::npos);
  CHECK(cuda.prompt.find("\"cublas.gemm\"") != std::string::npos);
  CHECK(cuda.prompt.find("\"cudnn.conv2d\"") != std::string::npos);
  // Every call a plan may make is offered, the ones Inductor's programs use among them.
  for (const std::string& call : ke::library_calls())
    CHECK_MESSAGE(cuda.prompt.find("\"" + call + "\"") != std::string::npos, call);
  CHECK(cuda.prompt.find("bias_gelu") != std::string::npos);
  CHECK(cuda.prompt.find("keep the entry point's name and signature unless the source declares a plan, whose kernels "
                         "then take the arguments the plan gives them") != std::string::npos);
  CHECK(cuda.prompt.find("Launch (the default plan; a source may declare its own): grid (cdiv(N, BLOCK), 1, 1)") !=
        std::string::npos);
  // Not a PyTorch problem: no advice on a library step plus an epilogue, and its precision strict: no TF32 math.
  CHECK(cuda.prompt.find("a plan of a library step") == std::string::npos);
  CHECK(cuda.prompt.find("\"math\": fp32|tf32") != std::string::npos);
  CHECK(cuda.prompt.find("The run's precision is strict (fp32, TF32 off everywhere): no step may take \"math\": "
                         "\"tf32\"") != std::string::npos);
  // HIP: the comment, without CUDA's libraries.
  ke::Spec hip = colsum_cuda();
  hip.language = ke::Language::hip;
  const ke::Mutation h = mutator.mutate({hip, graph, {}, rng});
  CHECK(h.prompt.find("/* kernelevolve-plan") != std::string::npos);
  CHECK(h.prompt.find("cublaslt") == std::string::npos);
  // Triton: a module-level string, each step's grid, constexpr tunables among a kernel's parameters.
  ke::Spec triton = colsum_cuda();
  triton.language = ke::Language::triton;
  ke::LaunchRule rule;
  rule.grid[0] = ke::Expr::parse("cdiv(N, 256)");
  triton.launch = rule;
  triton.tunables = {{"num_warps", {4, 8}}};
  const ke::Mutation t = mutator.mutate({triton, graph, {}, rng});
  CHECK_MESSAGE(t.prompt.find("\"\"\"kernelevolve-plan\n{\"temporaries\"") != std::string::npos, t.prompt);
  CHECK(t.prompt.find("@triton.jit def partial_sums(x, partial, N, BLOCK: tl.constexpr)") != std::string::npos);
  // (The knowledge base's note on programs, which applies to Triton too, may show a CUDA plan: the system
  // prompt alone must not.)
  const std::string t_system = t.prompt.substr(0, t.prompt.find("\n[user]\n"));
  CHECK(t_system.find("/* kernelevolve-plan") == std::string::npos);
  // Library steps run on the CUDA GPU a Triton program runs on (torch.compile's first programs call cuBLAS).
  CHECK(t_system.find("\"cublas.gemm_batched\"") != std::string::npos);
  CHECK(t.prompt.find("32 x num_warps") != std::string::npos);
  // C: temporaries so that the program need not allocate, functions called in order.
  Fixture f;
  const ke::Mutation c = f.mutate(mutator);
  REQUIRE_MESSAGE(c.child.has_value(), c.error);
  CHECK(c.prompt.find("/* kernelevolve-plan") != std::string::npos);
  CHECK(c.prompt.find("temporaries") != std::string::npos);
  CHECK(c.prompt.find("need not allocate") != std::string::npos);
  CHECK(c.prompt.find("cublaslt") == std::string::npos);
  CHECK(c.prompt.find("grid") == std::string::npos);  // a CPU program's steps are calls
  // A PyTorch problem in CUDA: its first kernel is offered a library step and one fused epilogue kernel.
  ke::Spec torch = colsum_cuda();
  torch.reference.pytorch = true;
  torch.reference.language.reset();
  torch.reference.source = "class Model(nn.Module):\n    def forward(self, x): return torch.relu(x.sum(0))\n";
  const ke::Mutation p = mutator.mutate({torch, graph, {}, rng});
  CHECK_MESSAGE(p.prompt.find("For a matrix product or a convolution followed by an epilogue") != std::string::npos,
                p.prompt);
  CHECK(p.prompt.find("a plan of a library step (a cuBLAS product or a cuDNN convolution") != std::string::npos);
  CHECK(p.prompt.find("one fused kernel for the rest is often fastest") != std::string::npos);
  // Its precision as PyTorch ships it: TF32 in cuDNN's steps, as the reference's convolutions, not in the products.
  CHECK_MESSAGE(p.prompt.find("\"math\": \"tf32\" is allowed on f32 cuDNN steps (the reference's convolutions use "
                              "TF32), not on cuBLAS or cuBLASLt steps") != std::string::npos,
                p.prompt);
  // A spec that forbids library steps is offered none.
  torch.library_steps = false;
  const ke::Mutation kernels_only = mutator.mutate({torch, graph, {}, rng});
  CHECK(kernels_only.prompt.find("/* kernelevolve-plan") != std::string::npos);
  CHECK(kernels_only.prompt.find("a plan of a library step") == std::string::npos);
  const std::string system = kernels_only.prompt.substr(0, kernels_only.prompt.find("\n[user]\n"));
  CHECK(system.find("cublaslt") == std::string::npos);
}

TEST_CASE("programs: a parent's time is shared among its plan's steps, each named by its kernel") {
  FakeModelServer server;
  for (int i = 0; i < 2; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::Node& seed = f.graph.node(0);
  seed.candidate.source =
      "#include <stdint.h>\n/* kernelevolve-plan\n"
      "{\"temporaries\": [{\"name\": \"partial\", \"dtype\": \"f32\", \"shape\": [\"N\"]}],\n"
      " \"steps\": [{\"kernel\": \"partial_sums\", \"args\": [\"x\", \"partial\", \"M\", \"N\"]},\n"
      "           {\"kernel\": \"finish\", \"args\": [\"partial\", \"y\", \"N\"]}]}\n*/\n"
      "void partial_sums(const float* x, float* partial, int64_t M, int64_t N) {}\n"
      "void finish(float* partial, float* y, int64_t N) {}\n";
  seed.evaluation.resources = {{"steps", 2},
                               {"step1.share_permille", 712},
                               {"step2.share_permille", 288},
                               {"step1.registers", 40},
                               {"step2.registers", 24}};
  ke::LlmMutator mutator(options_for(server));
  // Without a diagnosis: from the resources, each step named from the plan read again from the source.
  const ke::Mutation m = f.mutate(mutator);
  CHECK_MESSAGE(m.prompt.find("Time by step (each step timed alone, its share of the plan's): step 1 (partial_sums): "
                              "71.2%, step 2 (finish): 28.8%\n") != std::string::npos,
                m.prompt);
  // With the diagnosis (as the run makes it, from the candidate): the same names and shares, and each
  // kernel's resources on a line of its own.
  ke::DeviceInfo device;
  device.kind = "cuda";
  device.peak_bytes_per_s = 100e9;
  device.peak_flops_per_s = 500e9;
  seed.diagnosis = ke::diagnose(f.spec, seed.candidate.tunables, seed.evaluation, device, &seed.candidate);
  REQUIRE(seed.diagnosis.has_value());
  const ke::Mutation diagnosed = f.mutate(mutator);
  CHECK_MESSAGE(diagnosed.prompt.find("step 1 (partial_sums): 71.2%, step 2 (finish): 28.8%\n") != std::string::npos,
                diagnosed.prompt);
  CHECK_MESSAGE(diagnosed.prompt.find("\n- step 1 (partial_sums): regs 40") != std::string::npos, diagnosed.prompt);
  CHECK(diagnosed.prompt.find("\n- step 2 (finish): regs 24") != std::string::npos);
  // A plan that no longer reads (the spec changed under it) still gives the shares, by number.
  seed.diagnosis.reset();
  seed.candidate.source = "/* kernelevolve-plan {\"steps\": [{\"kernel\": \"k\", \"args\": [\"nowhere\"]}]} */\n";
  server.push({200, FakeModelServer::openai(kBetter)});
  server.push({200, FakeModelServer::openai(kBetter)});
  const ke::Mutation unnamed = f.mutate(mutator);
  CHECK_MESSAGE(unnamed.prompt.find("plan's): step 1: 71.2%, step 2: 28.8%\n") != std::string::npos, unnamed.prompt);
  // A one-kernel node has no such line.
  seed.evaluation.resources = {{"registers", 40}};
  const ke::Mutation one = f.mutate(mutator);
  CHECK(one.prompt.find("Time by step") == std::string::npos);
}

TEST_CASE("programs: the knowledge base's note on programs applies to CUDA and Triton, not to the CPU") {
  ke::mutators::KnowledgeBase shipped({ke::mutators::shipped_knowledge_dir()});
  const std::string query = "split reduction temporary plan matmul epilogue persistent kernel";
  auto files = [&](const ke::mutators::Applies& to) {
    std::set<std::string> out;
    for (const auto& p : shipped.retrieve(query, 100000, to)) out.insert(p.file);
    return out;
  };
  CHECK(files({"cuda", "cuda"}).count("programs.md") == 1);
  CHECK(files({"cuda", "triton"}).count("programs.md") == 1);
  CHECK(files({"cpu", "c"}).count("programs.md") == 0);
  CHECK(files({"hip", "hip"}).count("programs.md") == 0);
  // A derived PyTorch problem's notes name the plan: its prompt retrieves the note.
  const auto hits = shipped.retrieve(
      "12_Gemm_Multiply_LeakyReLU The launch is the default plan, one kernel (the entry) "
      "with the params in order; a candidate may bring its own plan",
      3000, {"cuda", "cuda"});
  CHECK(std::any_of(hits.begin(), hits.end(), [](const auto& p) { return p.file == "programs.md"; }));
}

// ---- issue 53, item 3: what the prompt still lacked ----

TEST_CASE("the prompt gives the time limit in force, noise between evaluations, and when temporaries are filled") {
  FakeModelServer server;
  for (int i = 0; i < 2; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  f.spec.notes = "a plan may be brought (kernelevolve-plan: functions in order; docs/spec-format.md, \"Programs\").";
  ke::Node again;  // the seed's kernel evaluated a second time: 10% slower, its spread within one evaluation 0
  again.parents = {0};
  again.mutator = "llm";
  again.candidate = f.graph.node(0).candidate;
  again.candidate.source = "// the same kernel under a comment\n" + again.candidate.source;
  again.evaluation.status = ke::Status::ok;
  again.evaluation.timings = {{1100, 1100, 1100, 0, 5}, {1100, 1100, 1100, 0, 5}};
  again.speedup = 1 / 1.1;
  const ke::NodeId id = f.graph.add(again);
  ke::Confirmation c;  // the parent's confirmation measured the seed again, and the parent
  c.node = id;
  c.rounds = 2;
  c.confirmed = true;
  c.speedup = 0.95, c.speedup_low = 0.94, c.speedup_high = 0.96, c.search_speedup = 1 / 1.1;
  c.seed_time_us = {1080, 1000};
  c.best_time_us = {1130, 1100};
  ke::LlmOptions o = options_for(server);
  o.time_limit_s = [] { return 20.4; };
  ke::LlmMutator mutator(o);
  const ke::Mutation m =
      mutator.mutate({f.spec, f.graph, {id}, f.rng, {}, nullptr, {}, [&](ke::NodeId) { return &c; }});
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  INFO(m.prompt);
  // The limit as it applies to this run, not only its formula.
  CHECK(m.prompt.find("Time limit per evaluation in this run now: 20.4 s") != std::string::npos);
  // The spread is within one evaluation, and the graph's evidence that evaluations differ by more.
  CHECK(m.prompt.find("the same code evaluated again moves by more than that") != std::string::npos);
  CHECK(m.prompt.find("- the seed (node 0): w0 1000 ±0 us in its evaluation, 1080 us again (+8%)") !=
        std::string::npos);
  CHECK(m.prompt.find("- the parent (node 1): w0 1100 ±0 us in its evaluation, 1130 us again (+3%)") !=
        std::string::npos);
  CHECK(m.prompt.find("- the same kernel in nodes 0 1: w0 1000 1100 us") != std::string::npos);
  // The temporaries' NaN fill is said to be outside the timed call, once per workload.
  CHECK(m.prompt.find("filled with NaN once per workload, when its launch is made, outside every timed call") !=
        std::string::npos);
  CHECK(m.prompt.find("NaN-filled before every call") == std::string::npos);
  // The manual is not pointed at: the model cannot open it.
  CHECK(m.prompt.find("docs/spec-format.md") == std::string::npos);
  CHECK(m.prompt.find("its format is in the system message") != std::string::npos);
  // Without a limit known, no such line; without a confirmation or a repeated kernel, no evidence.
  Fixture plain;
  ke::LlmMutator quiet(options_for(server));
  const ke::Mutation q = plain.mutate(quiet);
  CHECK(q.prompt.find("Time limit per evaluation in this run now") == std::string::npos);
  CHECK(q.prompt.find("Between evaluations") == std::string::npos);
}

TEST_CASE("on torch 1.x the prompt says a CPU's eager time is a generic BLAS's, no yardstick") {
  FakeModelServer server;
  for (int i = 0; i < 2; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::Baseline eager{"eager", {}}, compile{"compile", {}};
  eager.evaluation.status = ke::Status::ok;
  eager.evaluation.timings = {{2000, 1990, 2100, 12, 5}, {400, 399, 402, 1, 5}};
  compile.evaluation.status = ke::Status::compile_error;
  compile.evaluation.message = "torch 1.13.0a0 has no torch.compile (PyTorch 2.0 added it)";
  ke::LlmMutator mutator(options_for(server));
  ke::Mutation m = mutator.mutate({f.spec, f.graph, {0}, f.rng, {}, nullptr, {eager, compile}});
  CHECK_MESSAGE(m.prompt.find("- note: this PyTorch is torch 1.13, whose CPU matrix products run on a generic BLAS") !=
                    std::string::npos,
                m.prompt);
  CHECK(m.prompt.find("no yardstick of what this CPU can do") != std::string::npos);
  // A torch 2 (compile measured, or failing for another reason) says nothing of the kind.
  compile.evaluation.message = "Inductor failed: no C++ compiler";
  m = mutator.mutate({f.spec, f.graph, {0}, f.rng, {}, nullptr, {eager, compile}});
  CHECK(m.prompt.find("generic BLAS") == std::string::npos);
}

TEST_CASE("an answer the tool could not use is said in the next prompt for that parent") {
  FakeModelServer server;
  server.push({200, FakeModelServer::openai("I would unroll the loop, but I will not write the code.")});
  for (int i = 0; i < 2; ++i) server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::LlmMutator mutator(options_for(server));
  ke::Mutation m = f.mutate(mutator);
  REQUIRE_FALSE(m.child);
  CHECK(m.prompt.find("could not be used") == std::string::npos);
  m = f.mutate(mutator);
  INFO(m.prompt);
  CHECK(m.prompt.find("## Your last answer for this parent could not be used") != std::string::npos);
  CHECK(m.prompt.find("neither a fenced code block nor SEARCH/REPLACE edits; the answer began: \"I would unroll") !=
        std::string::npos);
  REQUIRE(m.child.has_value());
  // Once an answer is used, the old failure is not told again.
  m = f.mutate(mutator);
  CHECK(m.prompt.find("could not be used") == std::string::npos);
}

TEST_CASE("a tunable the new source no longer declares, or fixes with its own #define, is neither shown nor stepped") {
  ke::Spec spec = colsum();  // its tunable is BLOCK
  const std::string reads_mr = "void colsum(const float* x, float* y, long M, long N) { float acc[MR]; }\n";
  // MR's declaration went with the rewrite: nothing left to search, whatever the source does with the name.
  CHECK(ke::live_tunables(spec, "#ifndef MR\n#define MR 4\n#endif\n" + reads_mr, ke::Language::c, {{"MR", 4}}).empty());
  CHECK(ke::live_tunables(spec, "// ke:tunable MR 4 8\n#ifndef MR\n#define MR 4\n#endif\n" + reads_mr, ke::Language::c,
                          {{"MR", 8}}) == ke::Bindings{{"MR", 8}});
  // An unguarded #define fixes the value: -DMR=8 would change nothing, so MR is dead even while declared.
  CHECK_FALSE(ke::tunable_is_live(spec, "// ke:tunable MR 4 8\n#define MR 4\n" + reads_mr, ke::Language::c, "MR"));
  CHECK(ke::live_tunables(spec, "// ke:tunable MR 4 8\n#define MR 4\n" + reads_mr, ke::Language::c, {{"MR", 4}})
            .count("MR") == 0);
  // A model's rewrite of a parent that had MR: the child has no MR, and the parameter search never steps it.
  Fixture f;
  ke::Node parent;
  parent.parents = {0};
  parent.mutator = "llm";
  parent.candidate = {
      "// ke:tunable MR 4 8\n#ifndef MR\n#define MR 4\n#endif\n" + reads_mr, ke::Language::c, {{"MR", 4}}};
  parent.evaluation.status = ke::Status::ok;
  parent.evaluation.timings = f.graph.node(0).evaluation.timings;
  parent.speedup = 1;
  const ke::NodeId pid = f.graph.add(parent);
  const ke::mutators::ModelChild child = ke::mutators::model_child(
      f.spec, f.graph.node(pid).candidate,
      "Fix MR.\n```c\n#define MR 4\nvoid colsum(const float* x, float* y, long M, long N) { float acc[MR]; }\n```\n");
  REQUIRE(child.child.has_value());
  CHECK(child.child->tunables.count("MR") == 0);
  ke::Node rewritten;
  rewritten.parents = {pid};
  rewritten.mutator = "llm";
  rewritten.candidate = *child.child;
  rewritten.candidate.tunables["MR"] = 4;  // as a node made before this rule kept it
  rewritten.evaluation.status = ke::Status::ok;
  rewritten.evaluation.timings = f.graph.node(0).evaluation.timings;
  rewritten.speedup = 1;
  const ke::NodeId rid = f.graph.add(rewritten);
  ke::ParamMutator params;
  const ke::Mutation step = params.mutate({f.spec, f.graph, {rid}, f.rng});
  CHECK_FALSE(step.child.has_value());  // BLOCK is not read, MR is fixed: nothing to step
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(kBetter)});
  ke::LlmMutator mutator(options_for(server));
  const ke::Mutation m = mutator.mutate({f.spec, f.graph, {rid}, f.rng});
  CHECK_MESSAGE(m.prompt.find("Tunables: (none)") != std::string::npos, m.prompt);
}

// ---- issue 53, item 2: several children per prompt ----

TEST_CASE("several children per prompt: each part its own child, a malformed one a failure that loses no other") {
  const std::string body =
      "for (int64_t j = 0; j < N; ++j) { float s = 0; for (int64_t i = 0; i < M; ++i) s += "
      "x[i * N + j]; y[j] = s; }\n";
  const std::string answer =
      "### Child 1\nRows contiguous.\n```c\n#include <stdint.h>\nvoid colsum(const float* x, float* y, int64_t M, "
      "int64_t N) {\n" +
      body +
      "}\n```\n### Child 2\nI would tile it, but no code.\n### Child 3\nUnrolled by hand.\n```c\n#include "
      "<stdint.h>\n// unrolled\nvoid colsum(const float* x, float* y, int64_t M, int64_t N) {\n  " +
      body + "}\n```\n";
  // A heading inside a code block is code, not a new part.
  CHECK(ke::mutators::answer_parts("```c\n### Child 9\n```\n").size() == 1);
  CHECK(ke::mutators::answer_parts(answer).size() == 3);
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(answer, 300)});
  server.push({200, FakeModelServer::openai(kBetter)});
  Fixture f;
  ke::LlmOptions o = options_for(server);
  o.children = 3;
  ke::LlmMutator mutator(o);
  // The failed part first, while its parent is the context's, with the call's tokens.
  ke::Mutation m = f.mutate(mutator);
  CHECK_FALSE(m.child.has_value());
  CHECK(m.error.find("child 2 of 3: the model's answer was not usable") != std::string::npos);
  CHECK(m.tokens == 300);
  CHECK(server.requests().size() == 1);
  CHECK(server.requests().at(0).body.find("Write 3 different kernels") != std::string::npos);
  CHECK(server.requests().at(0).body.find("### Child 1") != std::string::npos);
  // Then each usable part, one a call, each a child of the parent it answered, without a new request.
  std::vector<ke::Mutation> kids;
  for (int i = 0; i < 2; ++i) {
    ke::Node other;  // the search went on elsewhere meanwhile: the context's parent is another node
    other.parents = {0};
    other.mutator = "param";
    other.candidate = {f.spec.seed.source, ke::Language::c, {{"BLOCK", 100 + i}}};
    other.evaluation.status = ke::Status::ok;
    const ke::NodeId elsewhere = f.graph.add(other);
    kids.push_back(mutator.mutate({f.spec, f.graph, {elsewhere}, f.rng}));
  }
  CHECK(server.requests().size() == 1);
  for (const ke::Mutation& k : kids) {
    REQUIRE_MESSAGE(k.child.has_value(), k.error);
    CHECK(k.parents == std::vector<ke::NodeId>{0});
    CHECK(k.tokens == 0);
  }
  CHECK(kids[0].note.find("child 1 of 3") != std::string::npos);
  CHECK(kids[1].note.find("child 3 of 3") != std::string::npos);
  CHECK(kids[1].child->source.find("// unrolled") != std::string::npos);
  CHECK(kids[0].child->source != kids[1].child->source);
  // All given: the next call asks the model again, and its prompt for parent 0 says what was wrong with child 2.
  m = f.mutate(mutator);
  CHECK(server.requests().size() == 2);
  CHECK(m.prompt.find("## Your last answer for this prompt could not be used") != std::string::npos);
  CHECK(m.prompt.find("child 2 of 3: the model's answer was not usable") != std::string::npos);
  CHECK(m.child.has_value());  // an answer without headings is one child, as with one asked for
}
