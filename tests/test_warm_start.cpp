// Warm start across problems: stored runs of the same operator matched by name, family or signature (and
// only with the same language and arguments); the best kernel of each, best first, with the tunables this
// problem declares; a run that evaluates them right after its seed (a kernel wrong here ends incorrect), shows
// them to the model, and does not add them again when resumed; bad stores refused; and `run --warm-start`.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <kernelevolve/kernelevolve.hpp>
#include <simdjson.h>
#include <string>

#include "support/cli_runner.hpp"
#include "support/fake_model_server.hpp"

namespace ke = kernelevolve;
using ke_test::TempDir;
const auto cli = ke_test::run_cli;
namespace fs = std::filesystem;
using ke_test::FakeModelServer;

namespace {

std::string fixture(const std::string& name) { return std::string(KE_FIXTURES) + "/" + name; }

// A colsum-shaped problem as spec JSON with inline sources: `params` replaces the signature, `extra` adds fields.
std::string spec_text(const std::string& name, const std::string& extra = "",
                      const std::string& params = R"([{"name": "x", "dtype": "f32", "shape": ["M", "N"], "role": "in"},
        {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"},
        {"name": "M", "dtype": "i64", "role": "size"}, {"name": "N", "dtype": "i64", "role": "size"}])",
                      const std::string& language = "c", const std::string& entry = "colsum",
                      const std::string& workloads = R"([{"M": 4, "N": 8}])") {
  return R"({"name": ")" + name + R"(", "language": ")" + language + R"(", "entry": ")" + entry + R"(", "params": )" +
         params + R"(, "workloads": )" + workloads + R"(,
    "reference": {"source": "void colsum(void) {}"}, "seed": {"source": "// the seed of )" +
         name + R"(\nvoid colsum(void) {}"})" + extra + "}";
}

ke::Spec spec_of(const std::string& name, const std::string& extra = "") {
  return ke::parse_spec(spec_text(name, extra), name + ".json");
}

// Records a run of `spec` in `store` with a node 0 (the seed, 100 us) and each given kernel at its speedup.
void record_run(ke::Store& store, const ke::Spec& spec,
                const std::vector<std::tuple<std::string, ke::Bindings, double>>& kernels) {
  const ke::RunId run = store.begin_run(spec, ke::DeviceInfo{"cpu", "cpu", "test cpu"});
  auto node = [&](ke::NodeId id, const std::string& source, const ke::Bindings& tunables, double speedup) {
    ke::Node n;
    n.id = id;
    if (id > 0) n.parents = {0};
    n.mutator = id == 0 ? "seed" : "param";
    n.candidate = {source, spec.language, tunables};
    n.evaluation.status = ke::Status::ok;
    n.evaluation.timings = {{100 / speedup, 100 / speedup, 100 / speedup, 0, 5}};
    n.speedup = speedup;
    store.record_node(run, n, ke::SearchState{});
  };
  node(0, spec.seed.source, spec.seed_tunables(), 1.0);
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    node(static_cast<ke::NodeId>(i + 1), std::get<0>(kernels[i]), std::get<1>(kernels[i]), std::get<2>(kernels[i]));
  }
}

// Short real runs of two other column-sum problems (other names and workloads, the same family) on the CPU,
// into one store: colsum_rows, whose kernels are right for the e2e colsum too, and colsum_by8, whose kernel
// handles no tail and so is wrong for it.
void make_other_store(const std::string& path) {
  auto store = std::make_shared<ke::Store>(path);
  for (const char* name : {"warm/colsum_rows.json", "warm/colsum_by8.json"}) {
    const ke::Spec spec = ke::load_spec(fixture(name));
    auto evaluator = std::make_shared<ke::LocalEvaluator>(spec, ke::open_device("cpu"));
    ke::Evolver evolver(spec, evaluator, std::make_shared<ke::ParamMutator>(), std::make_shared<ke::GreedyPolicy>(),
                        ke::max_evaluations(3));
    ke::StoreRecorder recorder(store, store->begin_run(spec, evaluator->device_info()));
    evolver.add_observer(&recorder);
    const ke::RunResult r = evolver.run();
    REQUIRE_MESSAGE(r.best.has_value(), name << ": " << r.stop_reason);
  }
}

std::int64_t query_int(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK);
  const std::int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
  sqlite3_finalize(s);
  sqlite3_close(db);
  return v;
}

const std::string kModelKernel =
    "Sum whole rows at once.\n```c\n#include <stdint.h>\n"
    "void colsum(const float* x, float* y, int64_t M, int64_t N) {\n"
    "  for (int64_t j = 0; j < N; ++j) y[j] = 0.0f;\n"
    "  for (int64_t i = 0; i < M; ++i) for (int64_t j = 0; j < N; ++j) y[j] += x[i * N + j];\n"
    "}\n```\n";

}  // namespace

TEST_CASE("the family field: read, written back, optional, never empty, and no part of a measurement") {
  const ke::Spec with = spec_of("colsum", R"(, "family": "colsum")");
  CHECK(with.family == "colsum");
  CHECK(ke::parse_spec(ke::to_json(with), "again.json").family == "colsum");
  const ke::Spec without = spec_of("colsum");
  CHECK(without.family.empty());
  CHECK(ke::to_json(without).find("family") == std::string::npos);
  CHECK_THROWS_WITH_AS(spec_of("colsum", R"(, "family": "")"), doctest::Contains("family: is empty"), ke::Error);
  CHECK_THROWS_WITH_AS(spec_of("colsum", R"(, "family": 3)"), doctest::Contains("family"), ke::Error);
  // A different spec for a resume, the same problem for the measurements.
  CHECK(ke::spec_hash(with) != ke::spec_hash(without));
  CHECK(ke::measurement_hash(with) == ke::measurement_hash(without));
}

TEST_CASE("warm_match: by name, family or signature, and only with the same language, entry and arguments") {
  const ke::Spec here = spec_of("colsum", R"(, "family": "reduction")");
  CHECK(ke::warm_match(here, spec_of("colsum")) == "name");
  CHECK(ke::warm_match(here, spec_of("colsum_big", R"(, "family": "reduction")")) == "family");
  CHECK(ke::warm_match(here, spec_of("colsum_big", R"(, "family": "other")")) == "signature");
  // Renamed params: the same argument list, but neither the signature nor the name nor the family.
  const std::string renamed = R"([{"name": "a", "dtype": "f32", "shape": ["M", "N"], "role": "in"},
      {"name": "b", "dtype": "f32", "shape": ["N"], "role": "out"},
      {"name": "M", "dtype": "i64", "role": "size"}, {"name": "N", "dtype": "i64", "role": "size"}])";
  CHECK(ke::warm_match(here, ke::parse_spec(spec_text("sums", "", renamed), "s.json")).empty());
  CHECK(ke::warm_match(here, ke::parse_spec(spec_text("sums", R"(, "family": "reduction")", renamed), "s.json")) ==
        "family");
  // Same name and family, but another argument list, language or entry: never usable here.
  const std::string f64 = R"([{"name": "x", "dtype": "f64", "shape": ["M", "N"], "role": "in"},
      {"name": "y", "dtype": "f64", "shape": ["N"], "role": "out"},
      {"name": "M", "dtype": "i64", "role": "size"}, {"name": "N", "dtype": "i64", "role": "size"}])";
  CHECK(ke::warm_match(here, ke::parse_spec(spec_text("colsum", R"(, "family": "reduction")", f64), "s.json")).empty());
  const std::string inout = R"([{"name": "x", "dtype": "f32", "shape": ["M", "N"], "role": "inout"},
      {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"},
      {"name": "M", "dtype": "i64", "role": "size"}, {"name": "N", "dtype": "i64", "role": "size"}])";
  CHECK(ke::warm_match(here, ke::parse_spec(spec_text("colsum", "", inout), "s.json")).empty());
  const std::string shorter = R"([{"name": "x", "dtype": "f32", "shape": ["M"], "role": "in"},
      {"name": "y", "dtype": "f32", "shape": ["M"], "role": "out"}, {"name": "M", "dtype": "i64", "role": "size"}])";
  CHECK(ke::warm_match(here, ke::parse_spec(spec_text("colsum", "", shorter, "c", "colsum", R"([{"M": 4}])"), "s.json"))
            .empty());
  const std::string params = R"([{"name": "x", "dtype": "f32", "shape": ["M", "N"], "role": "in"},
        {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"},
        {"name": "M", "dtype": "i64", "role": "size"}, {"name": "N", "dtype": "i64", "role": "size"}])";
  CHECK(ke::warm_match(here, ke::parse_spec(spec_text("colsum", "", params, "cpp"), "s.json")).empty());
  CHECK(ke::warm_match(here, ke::parse_spec(spec_text("colsum", "", params, "c", "colsum2"), "s.json")).empty());
}

TEST_CASE(
    "find_warm_kernels: the best of each matching run, best first, each source once, its tunables this "
    "problem's") {
  TempDir dir("ke_warm");
  const std::string db = dir / "others.db";
  const ke::Spec here = ke::parse_spec(
      spec_text("colsum", R"(, "family": "reduction", "tunables": {"BLOCK": [1, 2, 4]})"), "colsum.json");
  const std::string reads_both = "// reads BLOCK and CHUNK\nint a = BLOCK + CHUNK;\nvoid colsum(void) {}";
  const std::string declares = "// ke:tunable UNROLL 2 4 8\nint a = UNROLL;\nvoid colsum(void) {}";
  {
    ke::Store store(db);
    // Family: two nodes; the best (3x) counts, read at BLOCK 4 and CHUNK 64, of which only BLOCK is declared here.
    record_run(store,
               spec_of("colsum_big", R"(, "family": "reduction", "tunables": {"CHUNK": [16, 64], "BLOCK": [1, 4]})"),
               {{"void colsum(void) { /* slower */ }", {}, 2.0}, {reads_both, {{"BLOCK", 4}, {"CHUNK", 64}}, 3.0}});
    // Signature only (another name, no family): its kernel declares its own tunable.
    record_run(store, spec_of("sums_elsewhere"), {{declares, {{"UNROLL", 4}}, 5.0}});
    // The same name and family but f64 arguments: fastest of all, and never taken.
    const std::string f64 = R"([{"name": "x", "dtype": "f64", "shape": ["M", "N"], "role": "in"},
        {"name": "y", "dtype": "f64", "shape": ["N"], "role": "out"},
        {"name": "M", "dtype": "i64", "role": "size"}, {"name": "N", "dtype": "i64", "role": "size"}])";
    record_run(store, ke::parse_spec(spec_text("colsum", R"(, "family": "reduction")", f64), "f.json"),
               {{"void colsum(void) { /* f64 */ }", {}, 9.0}});
    // Renamed params, another name, no family: the same argument list, but no match.
    const std::string renamed = R"([{"name": "a", "dtype": "f32", "shape": ["M", "N"], "role": "in"},
        {"name": "b", "dtype": "f32", "shape": ["N"], "role": "out"},
        {"name": "M", "dtype": "i64", "role": "size"}, {"name": "N", "dtype": "i64", "role": "size"}])";
    record_run(store, ke::parse_spec(spec_text("unrelated", "", renamed), "u.json"),
               {{"void colsum(void) { /* u */ }", {}, 8.0}});
    // The same source as the family run's best, slower: taken once only.
    record_run(store, spec_of("colsum_again", R"(, "family": "reduction")"), {{reads_both, {{"BLOCK", 2}}, 2.5}});
    // A run that never beat its seed, which is this problem's seed as it starts: nothing to add.
    record_run(store, ke::parse_spec(spec_text("colsum", R"(, "tunables": {"BLOCK": [1, 2, 4]})"), "c2.json"), {});
  }
  const auto found = ke::find_warm_kernels({db}, here);
  REQUIRE(found.size() == 2);
  CHECK(found[0].candidate.source == declares);
  CHECK(found[0].match == "signature");
  CHECK(found[0].spec_name == "sums_elsewhere");
  CHECK(found[0].speedup == doctest::Approx(5.0));
  CHECK(found[0].candidate.tunables == ke::Bindings{{"UNROLL", 4}});
  CHECK(found[1].candidate.source == reads_both);
  CHECK(found[1].match == "family");
  CHECK(found[1].spec_name == "colsum_big");
  CHECK(found[1].run == 1);
  CHECK(found[1].node == 2);
  CHECK(found[1].store == db);
  CHECK(found[1].device.find("test cpu") != std::string::npos);
  CHECK(found[1].candidate.tunables == ke::Bindings{{"BLOCK", 4}});  // CHUNK is not this problem's
  const auto one = ke::find_warm_kernels({db}, here, 1);
  REQUIRE(one.size() == 1);
  CHECK(one[0].candidate.source == declares);
  // A problem none of them is: nothing, and no error.
  CHECK(ke::find_warm_kernels({db}, ke::parse_spec(spec_text("other", "", R"([{"name": "x", "dtype": "f32",
      "shape": ["N"], "role": "inout"}, {"name": "N", "dtype": "i64", "role": "size"}])",
                                                             "c", "colsum", R"([{"N": 8}])"),
                                                   "o.json"))
            .empty());
}

TEST_CASE("a store that is missing or not a KernelEvolve database is bad input, named") {
  TempDir dir("ke_warm");
  const ke::Spec spec = spec_of("colsum");
  CHECK_THROWS_WITH_AS(ke::find_warm_kernels({dir / "missing.db"}, spec), doctest::Contains("missing.db"), ke::Error);
  {
    std::ofstream text(dir / "notes.txt");
    text << "not a database at all, just some words that are long enough to have a header\n";
  }
  try {
    ke::find_warm_kernels({dir / "notes.txt"}, spec);
    FAIL("a text file was read as a store");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::BadUsage);
    CHECK(std::string(e.what()).find("notes.txt") != std::string::npos);
    CHECK(std::string(e.what()).find("warm start") != std::string::npos);
  }
  const auto missing = cli("run " + fixture("e2e/colsum.json") + " --no-db --warm-start " + dir / "missing.db" +
                           " --max-evals 2 --in-process");
  CHECK(missing.code == 2);
  CHECK(missing.err.find("missing.db") != std::string::npos);
  CHECK(
      cli("run " + fixture("e2e/colsum.json") + " --no-db --warm-start " + dir / "notes.txt" + " --in-process").code ==
      2);
  CHECK(
      cli("run " + fixture("e2e/colsum.json") + " --no-db --warm-start " + dir / "x.db" + " --warm-start-max 0").code ==
      2);
}

// Times without a compiler: a source that reads BLOCK takes 1000 / BLOCK us; any other source takes 1 us.
class BlockTimes final : public ke::FitnessEvaluator {
 public:
  ke::Evaluation evaluate(const ke::Candidate& c, std::uint64_t) override {
    ke::Evaluation e;
    e.status = ke::Status::ok;
    const auto block = c.tunables.find("BLOCK");
    const double t = block == c.tunables.end() ? 1.0 : 1000.0 / static_cast<double>(block->second);
    e.timings = {{t, t, t, 0, 5}, {t, t, t, 0, 5}};
    return e;
  }
  ke::DeviceInfo device_info() override { return {"fake", "fake", "fake"}; }
};

TEST_CASE("a warm kernel with no tunables of this problem's, the fastest node, does not end a parameter search") {
  const ke::Spec spec = ke::load_spec(fixture("e2e/colsum.json"));
  ke::EvolverOptions options;
  options.confirm_rounds = 0;
  ke::WarmKernel warm;
  warm.candidate = {"// reads no tunable\nvoid colsum(void) {}", ke::Language::c, {}};
  warm.spec_name = "elsewhere";
  options.warm_start = {warm};
  ke::Evolver evolver(spec, std::make_shared<BlockTimes>(), std::make_shared<ke::ParamMutator>(),
                      std::make_shared<ke::GreedyPolicy>(), ke::max_evaluations(6), options);
  const ke::RunResult r = evolver.run();
  // Greedy picks the warm kernel (1000x) each time; its space is spent at once, so the seed's source goes on.
  CHECK(r.stop_reason == "reached 6 evaluations");
  const ke::SearchGraph& g = evolver.graph();
  REQUIRE(g.size() == 6);
  CHECK(g.node(1).mutator == "warm");
  CHECK(g.node(1).note.find("warm start from elsewhere") != std::string::npos);
  REQUIRE(r.best.has_value());
  CHECK(*r.best == 1);
  for (ke::NodeId id = 2; id < 6; ++id) {
    CHECK(g.node(id).mutator == "param");
    CHECK(g.node(id).candidate.source == spec.seed.source);
  }
  // Once every source is spent, the search ends as before, saying so.
  ke::Spec small = spec;
  small.tunables = {{"BLOCK", {1, 2}}};
  ke::Evolver spent(small, std::make_shared<BlockTimes>(), std::make_shared<ke::ParamMutator>(),
                    std::make_shared<ke::GreedyPolicy>(), ke::max_evaluations(50), options);
  const ke::RunResult done = spent.run();
  CHECK(spent.graph().size() == 3);
  CHECK(done.stop_reason.find("search space exhausted") == 0);
}

TEST_CASE(
    "a run warm-started from another problem's store: verified here first, a wrong kernel ends incorrect, "
    "the model sees them, and a resume does not add them again") {
  TempDir dir("ke_warm");
  const std::string other = dir / "other.db";
  make_other_store(other);
  const ke::Spec spec = ke::load_spec(fixture("e2e/colsum.json"));
  const auto warm = ke::find_warm_kernels({other}, spec);
  REQUIRE(warm.size() == 2);
  for (const auto& w : warm) CHECK(w.match == "signature");  // the e2e colsum has no family; the signature is the same

  FakeModelServer server;
  server.push({200, FakeModelServer::openai(kModelKernel, 300)});
  std::string second = kModelKernel;
  second.insert(second.find("void colsum"),
                "enum { rows_outer = 1 };  // other code: a comment alone would be the same kernel\n");
  server.push({200, FakeModelServer::openai(second, 300)});
  setenv("KE_TEST_MODEL_KEY", "k", 1);
  ke::LlmOptions llm;
  llm.base_url = server.url();
  llm.model = "test-model";
  llm.api_key_env = "KE_TEST_MODEL_KEY";
  llm.timeout_s = 5;
  llm.max_retries = 0;
  llm.knowledge_budget_chars = 0;
  auto store = std::make_shared<ke::Store>(dir / "new.db");
  auto evaluator = std::make_shared<ke::LocalEvaluator>(spec, ke::open_device("cpu"));
  ke::EvolverOptions options;
  options.warm_start = warm;
  const ke::RunId run = store->begin_run(spec, evaluator->device_info());
  {
    ke::Evolver evolver(spec, evaluator, std::make_shared<ke::LlmMutator>(llm), std::make_shared<ke::GreedyPolicy>(),
                        ke::max_evaluations(4), options);
    ke::StoreRecorder recorder(store, run);
    evolver.add_observer(&recorder);
    evolver.run();
    const ke::SearchGraph& g = evolver.graph();
    REQUIRE(g.size() == 4);
    const ke::Node* rows = nullptr;
    const ke::Node* by8 = nullptr;
    for (ke::NodeId id : {1, 2}) {
      const ke::Node& n = g.node(id);
      CHECK(n.mutator == "warm");
      CHECK(n.parents == std::vector<ke::NodeId>{0});
      CHECK(n.note.find("of " + other) != std::string::npos);
      (n.note.find("warm start from colsum_rows") != std::string::npos ? rows : by8) = &n;
    }
    REQUIRE(rows != nullptr);
    REQUIRE(by8 != nullptr);
    CHECK(by8->note.find("warm start from colsum_by8") != std::string::npos);
    // Measured on this problem's workloads: the rows kernel holds, the by-8 kernel (no tail, N = 1531 here)
    // does not, though it was right where it came from.
    REQUIRE_MESSAGE(rows->evaluation.status == ke::Status::ok, rows->evaluation.message);
    CHECK(rows->evaluation.timings.size() == spec.workloads.size());
    CHECK(rows->candidate.tunables.empty());  // CHUNK is colsum_rows', not this problem's
    CHECK(by8->evaluation.status == ke::Status::incorrect);
    CHECK(by8->speedup == 0);
    // The model's prompt shows the kernels from elsewhere, with where they came from.
    const ke::Node& model = g.node(3);
    CHECK(model.mutator == "llm");
    CHECK(model.prompt.find("## Kernels that worked for this operator elsewhere") != std::string::npos);
    CHECK(model.prompt.find(by8->note) != std::string::npos);
    CHECK(model.prompt.find("j0 + 8 <= N") != std::string::npos);  // the by-8 kernel's source
    REQUIRE(server.requests().size() == 1);
    CHECK(server.requests()[0].body.find("Kernels that worked for this operator elsewhere") != std::string::npos);
  }
  // Resumed with the same warm start: the kernels are in its graph already.
  ke::Checkpoint checkpoint = store->resume(run);
  REQUIRE(checkpoint.graph.size() == 4);
  ke::Evolver resumed(spec, evaluator, std::make_shared<ke::LlmMutator>(llm), std::make_shared<ke::GreedyPolicy>(),
                      ke::max_evaluations(5), options);
  resumed.resume(std::move(checkpoint));
  resumed.run();
  const ke::SearchGraph& g = resumed.graph();
  CHECK(g.size() == 5);
  int warm_nodes = 0;
  for (const ke::Node& n : g.nodes()) warm_nodes += n.mutator == "warm";
  CHECK(warm_nodes == 2);
  CHECK(g.node(4).mutator != "warm");
}

TEST_CASE("run --warm-start: repeatable; the kernels enter first; nothing matching is a note, not an error") {
  TempDir dir("ke_warm");
  const std::string rows_db = dir / "rows.db", by8_db = dir / "by8.db";
  for (const auto& [name, db] :
       {std::pair{"warm/colsum_rows.json", rows_db}, std::pair{"warm/colsum_by8.json", by8_db}}) {
    const auto made = cli(std::string("run ") + fixture(name) + " --db " + db + " --max-evals 2 --in-process");
    REQUIRE_MESSAGE(made.code == 0, made.err);
  }
  const std::string db = dir / "new.db";
  const auto run = cli("run " + fixture("e2e/colsum.json") + " --db " + db + " --warm-start " + rows_db +
                       " --warm-start " + by8_db + " --max-evals 4 --in-process --json");
  REQUIRE_MESSAGE(run.code == 0, run.err);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE_MESSAGE(parser.parse(run.out).get(doc) == simdjson::SUCCESS, run.out);
  CHECK(doc["evaluations"].get_int64().value() == 4);
  CHECK(query_int(db, "SELECT count(*) FROM nodes WHERE mutator = 'warm'") == 2);
  CHECK(query_int(db, "SELECT count(*) FROM nodes WHERE mutator = 'warm' AND seq IN (1, 2)") == 2);
  CHECK(query_int(db, "SELECT count(*) FROM nodes WHERE mutator = 'warm' AND status = 'incorrect'") == 1);
  CHECK(query_int(db, "SELECT count(*) FROM nodes WHERE mutator = 'warm' AND note LIKE '%colsum_by8%'") == 1);
  // The rows kernel reads none of this problem's tunables: its space is spent at once, and the parameter search
  // goes on from the seed's instead of ending the run.
  CHECK(query_int(db, "SELECT count(*) FROM nodes WHERE mutator = 'param'") == 1);
  const auto show = cli("show " + db);
  CHECK(show.out.find("warm start from colsum_rows") != std::string::npos);

  // --warm-start-max 1 takes the faster only.
  const auto one = cli("run " + fixture("e2e/colsum.json") + " --no-db --warm-start " + rows_db + " --warm-start " +
                       by8_db + " --warm-start-max 1 --max-evals 3 --in-process");
  REQUIRE_MESSAGE(one.code == 0, one.err);
  CHECK(one.err.find("warm start: ") != std::string::npos);

  // The resumed run adds none again.
  const auto resumed = cli("run " + fixture("e2e/colsum.json") + " --db " + db + " --resume --warm-start " + rows_db +
                           " --warm-start " + by8_db + " --max-evals 5 --in-process --json");
  REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  CHECK(query_int(db, "SELECT count(*) FROM nodes WHERE mutator = 'warm'") == 2);
  CHECK(query_int(db, "SELECT count(*) FROM nodes") == 5);

  // A store with no run of this operator: a note on stderr, and the run goes on from its seed.
  const std::string unrelated = dir / "unrelated.db";
  {
    ke::Store store(unrelated);
    record_run(store,
               ke::parse_spec(spec_text("rowmax", "", R"([{"name": "x", "dtype": "f32", "shape": ["N"],
        "role": "inout"}, {"name": "N", "dtype": "i64", "role": "size"}])",
                                        "c", "colsum", R"([{"N": 8}])"),
                              "r.json"),
               {{"void colsum(void) {}", {}, 2.0}});
  }
  const auto none =
      cli("run " + fixture("e2e/colsum.json") + " --no-db --warm-start " + unrelated + " --max-evals 2 --in-process");
  REQUIRE_MESSAGE(none.code == 0, none.err);
  CHECK(none.err.find("--warm-start: no run in " + unrelated) != std::string::npos);
}
