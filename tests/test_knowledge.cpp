// The knowledge base's requirements (issue 33): notes chosen by the device's instruction set and
// architecture, not only by its kind and the kernel's language. A file's `requires:` and a section's
// `<!-- requires: ... -->`, the features a device offers (note_features), the shipped x86 notes, and the
// model mutator's prompt for a CPU without AVX-512.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <kernelevolve/kernelevolve.hpp>
#include <set>
#include <string>

#include "mutators/knowledge.hpp"
#include "support/fake_model_server.hpp"

namespace ke = kernelevolve;
namespace fs = std::filesystem;
using ke_test::FakeModelServer;

namespace {

using Features = std::optional<std::vector<std::string>>;

const Features kZen3 = std::vector<std::string>{"sse4.2", "avx", "avx2", "fma", "f16c"};
const Features kSkylakeX = std::vector<std::string>{"sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw"};

// A folder of notes, removed with the object.
struct Notes {
  fs::path dir = fs::temp_directory_path() / ("ke_knowledge_" + std::to_string(getpid()));
  Notes() {
    fs::create_directories(dir);
    // One file: a section for AVX-512, one for AVX2 without AVX-512, one for any CPU after them (a section's
    // requirement ends at the next heading), and a long AVX-512 section cut into several passages.
    std::ofstream(dir / "simd.md") << "---\ndevices: cpu\nlanguages: c\n---\n"
                                      "## Zebra wide\n<!-- requires: avx512f -->\nZebra with sixteen lanes.\n\n"
                                      "## Zebra narrow\n\n<!--requires: avx2, !avx512f-->\nZebra with eight lanes.\n\n"
                                      "## Zebra plain\nZebra with any lanes.\n\n"
                                      "## Zebra long\n<!-- requires: avx512f -->\n"
                                   << std::string(1600, 'x') << "\n\nZebra second part.\n";
    // A file that needs AMX as a whole, with a section that needs bf16 on top.
    std::ofstream(dir / "amx.md") << "---\ndevices: cpu\nrequires: amx-tile   # tiles\n---\n"
                                     "## Zebra tiles\nZebra with tile registers.\n\n"
                                     "## Zebra bf16 tiles\n<!-- requires: amx-bf16 -->\nZebra with bf16 tiles.\n";
  }
  ~Notes() { fs::remove_all(dir); }
};

std::set<std::string> headings(const ke::mutators::KnowledgeBase& kb, const Features& features) {
  std::set<std::string> out;
  for (const auto& p : kb.retrieve("zebra lanes tiles", 100000, {"cpu", "c", features})) out.insert(p.heading);
  return out;
}

}  // namespace

TEST_CASE("a section's requirement keeps AVX-512 advice from a CPU without it, and gives it to one with it") {
  Notes notes;
  ke::mutators::KnowledgeBase kb({notes.dir.string()});
  const auto zen3 = headings(kb, kZen3);
  CHECK(zen3 == std::set<std::string>{"Zebra narrow", "Zebra plain"});
  const auto skylake = headings(kb, kSkylakeX);
  CHECK(skylake == std::set<std::string>{"Zebra wide", "Zebra plain", "Zebra long"});
  // Both parts of the long section carry its requirement.
  std::size_t long_parts = 0;
  for (const auto& p : kb.retrieve("zebra second xxxx", 100000, {"cpu", "c", kSkylakeX})) {
    if (p.heading == "Zebra long") long_parts += 1;
  }
  CHECK(long_parts == 2);
  for (const auto& p : kb.retrieve("zebra second", 100000, {"cpu", "c", kZen3})) CHECK(p.heading != "Zebra long");
  // The requirement line is not text the model reads.
  for (const auto& p : kb.retrieve("zebra", 100000, {"cpu", "c", kSkylakeX})) {
    CHECK(p.text.find("requires") == std::string::npos);
    if (p.heading == "Zebra wide") CHECK(p.requirements == "avx512f");
  }
}

TEST_CASE("a file's requirement covers each of its sections, and a section's adds to it") {
  Notes notes;
  ke::mutators::KnowledgeBase kb({notes.dir.string()});
  CHECK(headings(kb, kSkylakeX).count("Zebra tiles") == 0);
  Features amx = kSkylakeX;
  amx->push_back("amx-tile");
  CHECK(headings(kb, amx).count("Zebra tiles") == 1);
  CHECK(headings(kb, amx).count("Zebra bf16 tiles") == 0);
  amx->push_back("amx-bf16");
  CHECK(headings(kb, amx).count("Zebra bf16 tiles") == 1);
  // bf16 alone is not enough: the file's amx-tile still holds for the section.
  Features bf16_only = kSkylakeX;
  bf16_only->push_back("amx-bf16");
  CHECK(headings(kb, bf16_only).count("Zebra bf16 tiles") == 0);
}

TEST_CASE("a passage without requirements is always eligible; unknown features drop nothing") {
  Notes notes;
  ke::mutators::KnowledgeBase kb({notes.dir.string()});
  const Features none = std::vector<std::string>{};  // a CPU known to have only the base instruction set
  CHECK(headings(kb, none) == std::set<std::string>{"Zebra plain"});
  CHECK(headings(kb, kZen3).count("Zebra plain") == 1);
  CHECK(headings(kb, kSkylakeX).count("Zebra plain") == 1);
  // Unknown: every passage, as before requirements existed.
  CHECK(headings(kb, std::nullopt) == std::set<std::string>{"Zebra wide", "Zebra narrow", "Zebra plain", "Zebra long",
                                                            "Zebra tiles", "Zebra bf16 tiles"});
  CHECK(kb.retrieve("zebra", 100000).size() == kb.retrieve("zebra", 100000, {"cpu", "c", std::nullopt}).size());
}

TEST_CASE("the shipped x86 notes: vectorize_width(16) only for a CPU with AVX-512") {
  ke::mutators::KnowledgeBase shipped({ke::mutators::shipped_knowledge_dir()});
  const std::string query = "vectorization vector width registers AVX-512 AVX2 intrinsics vectorize_width tail";
  auto text = [&](const Features& features) {
    std::string all;
    for (const auto& p : shipped.retrieve(query, 100000, {"cpu", "c", features})) all += p.heading + "\n" + p.text;
    return all;
  };
  const std::string zen3 = text(kZen3), skylake = text(kSkylakeX);
  CHECK(zen3.find("#pragma clang loop vectorize_width(16)") == std::string::npos);
  CHECK(zen3.find("_mm512_fmadd_ps") == std::string::npos);
  CHECK(zen3.find("vectorize_width(8)") != std::string::npos);
  CHECK(skylake.find("#pragma clang loop vectorize_width(16)") != std::string::npos);
  CHECK(skylake.find("_mm512_fmadd_ps") != std::string::npos);
  CHECK(skylake.find("vectorize_width(8)") == std::string::npos);
  // Advice for any CPU reaches both.
  CHECK(zen3.find("Clang vectorizes simple counted loops") != std::string::npos);
  CHECK(skylake.find("Clang vectorizes simple counted loops") != std::string::npos);
}

TEST_CASE("the shipped tensor-core notes: wgmma only for sm_90, tl.dot's bf16 advice only for Triton") {
  ke::mutators::KnowledgeBase shipped({ke::mutators::shipped_knowledge_dir()});
  const std::string query = "bf16 matrix product tensor cores wgmma mma.sync tl.dot fp32 accumulation TF32 peak";
  auto text = [&](const std::string& language, const Features& features) {
    std::string all;
    for (const auto& p : shipped.retrieve(query, 100000, {"cuda", language, features}))
      all += p.heading + "\n" + p.text;
    return all;
  };
  const Features hopper = std::vector<std::string>{"sm_90"}, ampere = std::vector<std::string>{"sm_80"};
  const std::string on_hopper = text("cuda", hopper), on_ampere = text("cuda", ampere);
  CHECK(on_hopper.find("wgmma.mma_async.sync.aligned.m64nNk16") != std::string::npos);
  CHECK(on_ampere.find("wgmma.mma_async") == std::string::npos);
  // mma.sync and the fraction of peak to expect reach both; Triton's advice reaches neither.
  for (const std::string& cuda : {on_hopper, on_ampere}) {
    CHECK(cuda.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != std::string::npos);
    CHECK(cuda.find("740 TFLOP/s") != std::string::npos);
    CHECK(cuda.find("acc.to(tl.bfloat16)") == std::string::npos);
  }
  const std::string triton = text("triton", hopper);
  CHECK(triton.find("acc.to(tl.bfloat16)") != std::string::npos);
  CHECK(triton.find("mma.sync.aligned.m16n8k16") == std::string::npos);
  for (const auto& p : shipped.retrieve(query, 100000, {"cpu", "c", kZen3}))
    CHECK_MESSAGE(p.file.find("tensor_cores") == std::string::npos, p.file);
}

TEST_CASE("note_features: a CPU's extensions, a GPU's architecture, from the device or its description") {
  ke::DeviceInfo cpu;
  cpu.id = cpu.kind = "cpu";
  cpu.name = "Test CPU";
  CHECK_FALSE(ke::mutators::note_features(cpu).has_value());  // no isa property: unknown
  cpu.properties["isa"] = "sse4.2 avx avx2 fma";
  CHECK(*ke::mutators::note_features(cpu) == std::vector<std::string>{"sse4.2", "avx", "avx2", "fma"});
  // What the model mutator holds is the description; the line it prints reads back the same.
  CHECK(ke::mutators::note_features(ke::describe_device_for_model(cpu, ke::Language::c)) ==
        ke::mutators::note_features(cpu));
  cpu.properties["isa"] = "none beyond the base instruction set";
  CHECK(ke::mutators::note_features(cpu) == Features{std::vector<std::string>{}});
  CHECK(ke::mutators::note_features(ke::describe_device_for_model(cpu, ke::Language::c)) ==
        Features{std::vector<std::string>{}});

  ke::DeviceInfo gpu;
  gpu.id = "cuda:0";
  gpu.kind = "cuda";
  gpu.name = "NVIDIA H100";
  gpu.properties["arch"] = "sm_90";
  CHECK(ke::mutators::note_features(gpu) == Features{std::vector<std::string>{"sm_90"}});
  CHECK(ke::mutators::note_features(ke::describe_device_for_model(gpu, ke::Language::cuda)) ==
        ke::mutators::note_features(gpu));
  gpu.properties.erase("arch");
  CHECK_FALSE(ke::mutators::note_features(ke::describe_device_for_model(gpu, ke::Language::cuda)).has_value());
  // A description written by hand says nothing the knowledge base can read.
  CHECK_FALSE(ke::mutators::note_features(std::string("cpu: a test CPU")).has_value());
}

TEST_CASE("the model mutator's prompt for a CPU without AVX-512 holds no AVX-512 note; with it, it does") {
  Notes notes;
  auto prompt = [&](const std::string& isa) {
    FakeModelServer server;
    server.push({200, FakeModelServer::openai("No code this time.")});
    ke::DeviceInfo cpu;
    cpu.id = cpu.kind = "cpu";
    cpu.name = "Test CPU";
    cpu.properties["isa"] = isa;
    ke::LlmOptions o;
    o.base_url = server.url();
    o.model = "test-model";
    o.timeout_s = 5;
    o.max_retries = 0;
    o.device_description = ke::describe_device_for_model(cpu, ke::Language::c);
    o.knowledge_dirs = {notes.dir.string()};
    ke::Spec spec = ke::load_spec(std::string(KE_FIXTURES) + "/e2e/colsum.json");
    spec.notes += " zebra lanes";
    ke::SearchGraph graph;
    ke::Node seed;
    seed.mutator = "seed";
    seed.candidate = {spec.seed.source, ke::Language::c, spec.seed_tunables()};
    seed.evaluation.status = ke::Status::ok;
    seed.evaluation.timings = {{1000, 1000, 1000, 0, 5}, {1000, 1000, 1000, 0, 5}};
    seed.speedup = 1;
    graph.add(seed);
    std::mt19937_64 rng{3};
    ke::LlmMutator mutator(o);
    return mutator.mutate({spec, graph, {0}, rng}).prompt;
  };
  const std::string zen3 = prompt("sse4.2 avx avx2 fma f16c");
  REQUIRE(zen3.find("Zebra with any lanes") != std::string::npos);
  CHECK(zen3.find("Zebra with eight lanes") != std::string::npos);
  CHECK(zen3.find("Zebra with sixteen lanes") == std::string::npos);
  const std::string skylake = prompt("sse4.2 avx avx2 fma f16c avx512f");
  REQUIRE(skylake.find("Zebra with any lanes") != std::string::npos);
  CHECK(skylake.find("Zebra with sixteen lanes") != std::string::npos);
  CHECK(skylake.find("Zebra with eight lanes") == std::string::npos);
}
