// Model calls priced in dollars, and several models in one run: usage read as prompt and completion
// tokens, the cost budget, a resumed run that keeps its prices, the bandit that picks among models, and the
// command line's options for them, against model servers on loopback that record what they are asked.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <kernelevolve/kernelevolve.hpp>
#include <kernelevolve/store.hpp>
#include <simdjson.h>
#include <string>

#include "mutators/model_bandit.hpp"
#include "support/cli_runner.hpp"
#include "support/fake_model_server.hpp"

namespace ke = kernelevolve;
using ke_test::run_cli;
using ke_test::TempDir;
namespace fs = std::filesystem;
using ke_test::FakeModelServer;

namespace {

ke::Spec colsum() { return ke::load_spec(std::string(KE_FIXTURES) + "/e2e/colsum.json"); }

// A kernel several times faster than the seed (rows in order, not columns with a stride); `variant` makes
// each answer a new candidate.
std::string fast_kernel(int variant) {
  return "Walk the rows in order and accumulate into y.\n```c\n#include <stdint.h>\nenum { variant_" +
         std::to_string(variant) +
         " = 1 };  /* each variant is other code: the graph knows kernels by their code */\nvoid colsum(const float* restrict x, float* restrict y, int64_t M, int64_t N) {\n"
         "  for (int64_t j = 0; j < N; ++j) y[j] = 0.0f;\n"
         "  for (int64_t i = 0; i < M; ++i)\n"
         "    for (int64_t j = 0; j < N; ++j) y[j] += x[i * N + j];\n}\n```\n";
}

// A kernel that does not compile: a model whose answers never pay off.
std::string broken_kernel(int variant) {
  return "Try this.\n```c\n#include <stdint.h>\nenum { broken_" + std::to_string(variant) +
         " = 1 };\nvoid colsum(const float* x, float* y, int64_t M, int64_t N) { this is not C; }\n```\n";
}

// What FakeModelServer::openai(text, 100) reports: 10 prompt tokens and 90 completion tokens.
double call_cost(double in, double out) { return (10 * in + 90 * out) / 1e6; }

ke::LlmOptions options_for(const FakeModelServer& server, const std::string& model, ke::LlmPrice price = {}) {
  ke::LlmOptions o;
  o.base_url = server.url();
  o.model = model;
  o.timeout_s = 5;
  o.max_retries = 0;
  o.device_description = "cpu: a test CPU";
  o.price = price;
  return o;
}

std::string fixture(const std::string& name) { return std::string(KE_FIXTURES) + "/" + name; }

void exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string message = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE_MESSAGE(rc == SQLITE_OK, message);
}

}  // namespace

TEST_CASE("a call is priced by its prompt and completion tokens, as each API reports them") {
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(fast_kernel(1), 100)});
  // Only a total: priced as completion, the dearer kind, so that a cost is never under-counted.
  server.push({200, "{\"choices\": [{\"message\": {\"content\": " + FakeModelServer::quote(fast_kernel(2)) +
                        "}}], \"usage\": {\"total_tokens\": 50}}"});
  ke::Spec spec = colsum();
  ke::SearchGraph graph;
  ke::Node seed;
  seed.candidate = {spec.seed.source, ke::Language::c, spec.seed_tunables()};
  seed.evaluation.status = ke::Status::ok;
  seed.speedup = 1;
  graph.add(seed);
  std::mt19937_64 rng{1};
  ke::LlmMutator openai(options_for(server, "gpt-test", {1000, 2000}));
  ke::Mutation m = openai.mutate({spec, graph, {0}, rng});
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  CHECK(m.tokens == 100);
  CHECK(m.model == "gpt-test");
  CHECK(m.cost_usd == doctest::Approx(call_cost(1000, 2000)));
  CHECK(openai.prompt_tokens_used() == 10);
  CHECK(openai.completion_tokens_used() == 90);
  m = openai.mutate({spec, graph, {0}, rng});
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  CHECK(m.tokens == 50);
  CHECK(m.cost_usd == doctest::Approx(50 * 2000 / 1e6));
  CHECK(openai.cost_used_usd() == doctest::Approx(call_cost(1000, 2000) + 0.1));
  CHECK(openai.prices().at("gpt-test") == ke::LlmPrice{1000, 2000});

  FakeModelServer claude;
  claude.push({200, FakeModelServer::anthropic(fast_kernel(3), 40, 60)});
  auto o = options_for(claude, "claude-test", {3, 15});
  o.api = "anthropic";
  ke::LlmMutator anthropic(o);
  m = anthropic.mutate({spec, graph, {0}, rng});
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  CHECK(m.tokens == 100);
  CHECK(m.cost_usd == doctest::Approx((40 * 3 + 60 * 15) / 1e6));
  CHECK(anthropic.prompt_tokens_used() == 40);

  // No usage at all: estimated from the lengths of the request and the reply, 4 bytes a token.
  FakeModelServer silent;
  const std::string reply =
      "{\"choices\": [{\"message\": {\"content\": " + FakeModelServer::quote(fast_kernel(5)) + "}}]}";
  silent.push({200, reply});
  ke::LlmMutator estimated(options_for(silent, "silent", {1000, 2000}));
  m = estimated.mutate({spec, graph, {0}, rng});
  REQUIRE_MESSAGE(m.child.has_value(), m.error);
  REQUIRE(silent.requests().size() == 1);
  const auto request_tokens = static_cast<std::int64_t>(silent.requests()[0].body.size() / 4);
  const auto reply_tokens = static_cast<std::int64_t>(reply.size() / 4);
  CHECK(estimated.prompt_tokens_used() == request_tokens);
  CHECK(estimated.completion_tokens_used() == reply_tokens);
  CHECK(m.tokens == request_tokens + reply_tokens);
  CHECK(m.cost_usd == doctest::Approx((request_tokens * 1000.0 + reply_tokens * 2000.0) / 1e6));

  // Unpriced: tokens only, no price to keep.
  FakeModelServer free_server;
  free_server.push({200, FakeModelServer::openai(fast_kernel(4), 100)});
  ke::LlmMutator unpriced(options_for(free_server, "local"));
  m = unpriced.mutate({spec, graph, {0}, rng});
  CHECK(m.tokens == 100);
  CHECK(m.cost_usd == 0);
  CHECK(unpriced.prices().empty());
  // A negative price is refused when the mutator is made, not at the first call.
  CHECK_THROWS_AS(ke::LlmMutator(options_for(free_server, "x", {-1, 2})), ke::Error);
}

TEST_CASE("the bandit: an untried model first, then the one whose calls improve most per unit of cost") {
  std::mt19937_64 rng{7};
  ke::mutators::ModelBandit bandit(2);
  // Model 0 gains 0.5 a call, model 1 nothing: once each is tried, model 0 gets most of the calls, and
  // model 1 is still tried now and then.
  auto pull = [&](std::size_t arm, double gain0, double gain1, double cost) {
    bandit.pulled(arm, cost);
    bandit.credit(arm, arm == 0 ? gain0 : gain1);
  };
  CHECK(bandit.choose(rng) == 0);
  pull(0, 0.5, 0, 1);
  CHECK(bandit.choose(rng) == 1);
  pull(1, 0.5, 0, 1);
  std::array<int, 2> picks{};
  for (int i = 0; i < 40; ++i) {
    const std::size_t arm = bandit.choose(rng);
    picks[arm] += 1;
    pull(arm, 0.5, 0, 1);
  }
  MESSAGE("while model 0 pays: " << picks[0] << " calls to it, " << picks[1] << " to model 1");
  CHECK(picks[0] > 3 * picks[1]);
  CHECK(picks[1] >= 1);
  CHECK(bandit.value(0) > 0);
  CHECK(bandit.value(1) == 0);
  // The models trade places: the discount forgets model 0's old gains, and the calls move to model 1.
  picks = {};
  for (int i = 0; i < 80; ++i) {
    const std::size_t arm = bandit.choose(rng);
    if (i >= 40) picks[arm] += 1;
    pull(arm, 0, 0.5, 1);
  }
  MESSAGE("once model 1 pays instead: " << picks[0] << " calls to model 0, " << picks[1] << " to model 1 (last 40)");
  CHECK(picks[1] > 3 * picks[0]);
  CHECK(bandit.pulls(0) + bandit.pulls(1) == 122);

  // Per dollar, not per call: a model that gains as much for a tenth of the price wins.
  ke::mutators::ModelBandit priced(2);
  picks = {};
  for (int i = 0; i < 40; ++i) {
    const std::size_t arm = priced.choose(rng);
    picks[arm] += 1;
    priced.pulled(arm, arm == 0 ? 0.10 : 0.01);
    priced.credit(arm, 0.2);
  }
  CHECK(picks[1] > 2 * picks[0]);

  // The unit of cost (dollars or tokens) does not change a choice; ties go by the generator, so a seed
  // repeats a run.
  auto sequence = [](double scale, std::uint64_t seed) {
    ke::mutators::ModelBandit b(3);
    std::mt19937_64 r{seed};
    std::vector<std::size_t> chosen;
    for (int i = 0; i < 30; ++i) {
      const std::size_t arm = b.choose(r);
      chosen.push_back(arm);
      b.pulled(arm, scale * (1 + arm));
      b.credit(arm, i % 3 == 0 ? 0.1 * static_cast<double>(arm) : 0.0);
    }
    return chosen;
  };
  CHECK(sequence(1, 5) == sequence(1000, 5));
  CHECK(sequence(1, 5) == sequence(1, 5));
  CHECK_THROWS_AS(ke::mutators::ModelBandit(0), ke::Error);
  CHECK_THROWS_AS(ke::mutators::ModelBandit(2, 1.0, 0.0), ke::Error);
}

TEST_CASE(
    "two models in one run: each node names the model that wrote it, and the calls turn to the one that "
    "improves") {
  FakeModelServer good, bad;
  for (int i = 0; i < 20; ++i) {
    good.push({200, FakeModelServer::openai(fast_kernel(i), 100)});
    bad.push({200, FakeModelServer::openai(broken_kernel(i), 100)});
  }
  const ke::Spec spec = colsum();
  auto pool = std::make_shared<ke::ModelPoolMutator>(std::vector<std::shared_ptr<ke::LlmMutator>>{
      std::make_shared<ke::LlmMutator>(options_for(good, "model-a", {1, 2})),
      std::make_shared<ke::LlmMutator>(options_for(bad, "model-b", {1, 2}))});
  CHECK(pool->name() == "llm");
  CHECK(pool->prices().size() == 2);
  ke::EvolverOptions options;
  options.confirm_rounds = 0;
  auto evaluator = std::make_shared<ke::LocalEvaluator>(spec, ke::open_device("cpu"));
  ke::Evolver evolver(spec, evaluator, pool, std::make_shared<ke::GreedyPolicy>(), ke::max_evaluations(17), options);
  const ke::RunResult r = evolver.run();
  const auto& g = evolver.graph();
  REQUIRE(g.size() == 17);
  std::map<std::string, int> nodes;
  double cost = 0;
  for (const ke::Node& n : g.nodes()) {
    if (n.id == 0) continue;
    CAPTURE(n.id);
    nodes[n.model] += 1;
    cost += n.cost_usd;
    CHECK(n.mutator == "llm");
    CHECK(n.cost_usd == doctest::Approx(call_cost(1, 2)));
    if (n.model == "model-a") {
      CHECK(n.candidate.source.find("variant") != std::string::npos);
      CHECK(n.evaluation.status == ke::Status::ok);
    } else {
      CHECK(n.model == "model-b");
      CHECK(n.candidate.source.find("broken") != std::string::npos);
      CHECK(n.evaluation.status == ke::Status::compile_error);
    }
  }
  const std::size_t asked_a = good.requests().size(), asked_b = bad.requests().size();
  MESSAGE("model-a asked " << asked_a << " times, model-b " << asked_b << " times");
  CHECK(nodes["model-a"] == static_cast<int>(asked_a));
  CHECK(nodes["model-b"] == static_cast<int>(asked_b));
  CHECK(asked_b >= 1);  // each was tried
  CHECK(asked_a > 2 * asked_b);
  CHECK(r.state.cost_usd == doctest::Approx(cost));
  CHECK(r.state.cost_usd == doctest::Approx(16 * call_cost(1, 2)));
  const auto stats = pool->stats();
  REQUIRE(stats.size() == 2);
  CHECK(stats[0].model == "model-a");
  CHECK(stats[0].value > stats[1].value);
  // One model under two names' worth of endpoints would leave a node's author unknown.
  CHECK_THROWS_AS(ke::ModelPoolMutator({std::make_shared<ke::LlmMutator>(options_for(good, "same")),
                                        std::make_shared<ke::LlmMutator>(options_for(bad, "same"))}),
                  ke::Error);
}

TEST_CASE("a resumed run keeps the prices it began with; a model it had no price for takes the one given now") {
  TempDir dir("ke_models");
  ke::Store store(dir / "runs.db");
  const ke::Spec spec = colsum();
  ke::DeviceInfo device;
  device.id = "cpu";
  device.kind = "cpu";
  device.name = "test";
  const ke::RunId run = store.begin_run(spec, device, {"greedy", "llm", 1, "test", {{"model-a", {1000, 2000}}}});
  CHECK(store.run(run).settings.llm_prices.at("model-a") == ke::LlmPrice{1000, 2000});
  FakeModelServer server;
  auto a = std::make_shared<ke::LlmMutator>(options_for(server, "model-a", {1, 1}));
  auto b = std::make_shared<ke::LlmMutator>(options_for(server, "model-b", {5, 6}));
  ke::ModelPoolMutator pool({a, b});
  const std::vector<std::string> said = ke::keep_run_prices(store, run, pool);
  REQUIRE(said.size() == 2);
  CHECK(said[0].find("keeps the price it began with for model-a") != std::string::npos);
  CHECK(said[1].find("no price for model-b") != std::string::npos);
  CHECK(a->prices().at("model-a") == ke::LlmPrice{1000, 2000});
  CHECK(b->prices().at("model-b") == ke::LlmPrice{5, 6});
  const auto stored = store.run(run).settings.llm_prices;
  CHECK(stored.at("model-a") == ke::LlmPrice{1000, 2000});
  CHECK(stored.at("model-b") == ke::LlmPrice{5, 6});
  // Given nothing now, the stored prices come back without a word.
  auto plain = std::make_shared<ke::LlmMutator>(options_for(server, "model-a"));
  CHECK(ke::keep_run_prices(store, run, *plain).empty());
  CHECK(plain->prices().at("model-a") == ke::LlmPrice{1000, 2000});
}

TEST_CASE("a cost budget stops a run, and the cost so far comes back with a resumed one") {
  ke::SearchState s;
  auto rule = ke::cost_budget(0.5);
  s.cost_usd = 0.49;
  CHECK_FALSE(rule->should_stop(s).has_value());
  s.cost_usd = 0.57;
  const auto why = rule->should_stop(s);
  REQUIRE(why.has_value());
  CHECK(why->find("budget of $0.5") != std::string::npos);
  CHECK_THROWS_AS(ke::cost_budget(0), ke::Error);
  CHECK_THROWS_AS(ke::cost_budget(-1), ke::Error);

  // Recorded and loaded: the node's model and cost, the run's total, a failed call's cost in the total.
  TempDir dir("ke_models");
  auto store = std::make_shared<ke::Store>(dir / "runs.db");
  const ke::Spec spec = colsum();
  FakeModelServer server;
  server.push({200, FakeModelServer::openai(fast_kernel(1), 100)});
  server.push({200, FakeModelServer::openai("no code in this answer", 100)});
  for (int i = 2; i < 10; ++i) server.push({200, FakeModelServer::openai(fast_kernel(i), 100)});
  auto llm = std::make_shared<ke::LlmMutator>(options_for(server, "model-a", {1000, 2000}));
  auto evaluator = std::make_shared<ke::LocalEvaluator>(spec, ke::open_device("cpu"));
  const ke::RunId run = store->begin_run(spec, evaluator->device_info(), {"greedy", "llm", 1, "test", llm->prices()});
  ke::EvolverOptions options;
  options.confirm_rounds = 0;
  ke::Evolver evolver(spec, evaluator, llm, std::make_shared<ke::GreedyPolicy>(), ke::cost_budget(0.5), options);
  ke::StoreRecorder recorder(store, run);
  evolver.add_observer(&recorder);
  const ke::RunResult r = evolver.run();
  CHECK(r.stop_reason.find("budget of $0.5") != std::string::npos);
  CHECK(server.requests().size() == 3);  // 0.19 a call: the third passes the budget
  CHECK(r.state.cost_usd == doctest::Approx(3 * call_cost(1000, 2000)));
  const ke::RunInfo info = store->run(run);
  CHECK(info.cost_usd == doctest::Approx(3 * call_cost(1000, 2000)));
  const ke::Checkpoint cp = store->load(run);
  CHECK(cp.cost_usd == doctest::Approx(r.state.cost_usd));
  REQUIRE(cp.graph.size() == 3);  // the seed and two kernels; the answer without code is a failed call
  CHECK(cp.graph.node(1).model == "model-a");
  CHECK(cp.graph.node(1).cost_usd == doctest::Approx(call_cost(1000, 2000)));
  CHECK(cp.graph.node(0).model.empty());
  const auto calls = store->mutator_calls(run);
  bool failed_call_priced = false;
  for (const auto& c : calls) failed_call_priced |= !c.node && c.model == "model-a" && c.cost_usd > 0;
  CHECK(failed_call_priced);
  const std::string shown = ke::show_run_text(*store, run);
  CHECK(shown.find("300 model tokens costing $0.5700") != std::string::npos);
  CHECK(shown.find("[model-a $0.1900]") != std::string::npos);

  // Resumed, the cost so far counts: the budget is spent already.
  ke::Evolver again(spec, evaluator, llm, std::make_shared<ke::GreedyPolicy>(), ke::cost_budget(0.5), options);
  again.resume(store->resume(run));
  const ke::RunResult r2 = again.run();
  CHECK(r2.stop_reason.find("budget") != std::string::npos);
  CHECK(server.requests().size() == 3);
}

TEST_CASE("a version-3 database is migrated: its nodes gain a model and a cost, its runs a cost and prices") {
  TempDir dir("ke_models");
  const std::string path = dir / "v3.db";
  {
    ke::Store store(path);
    ke::DeviceInfo device;
    device.id = device.kind = "cpu";
    device.name = "test";
    const ke::RunId run = store.begin_run(colsum(), device, {"greedy", "param", 1, "v3"});
    ke::Node seed;
    seed.id = 0;
    seed.mutator = "seed";
    seed.candidate = {"void colsum() {}", ke::Language::c, {}};
    seed.evaluation.status = ke::Status::ok;
    seed.evaluation.timings = {{10, 10, 10, 0, 3}};
    store.record_node(run, seed, {});
  }
  for (const char* column :
       {"runs DROP COLUMN cost_usd", "runs DROP COLUMN llm_prices", "nodes DROP COLUMN cost_usd",
        "nodes DROP COLUMN model", "mutator_calls DROP COLUMN cost_usd", "mutator_calls DROP COLUMN model"}) {
    exec_sql(path, std::string("ALTER TABLE ") + column);
  }
  exec_sql(path, "PRAGMA user_version = 3");
  ke::Store store(path);
  CHECK(ke::Store::file_schema_version(path) == ke::Store::kSchemaVersion);
  const ke::RunInfo info = store.run(1);
  CHECK(info.cost_usd == 0);
  CHECK(info.settings.llm_prices.empty());
  const ke::Checkpoint cp = store.load(1);
  REQUIRE(cp.graph.size() == 1);
  CHECK(cp.graph.node(0).model.empty());
  CHECK(cp.graph.node(0).cost_usd == 0);
}

// ---- the command line ----------------------------------------------------------------------------------

TEST_CASE("cli: --max-cost stops a run, and --json's cost_usd is the tokens the server reported times the price") {
  FakeModelServer server;
  for (int i = 0; i < 10; ++i) server.push({200, FakeModelServer::openai(fast_kernel(i), 100)});
  const auto o = run_cli("run " + fixture("e2e/colsum.json") + " --no-db --in-process --mutator llm --llm-url " +
                         server.url() + " --llm-model priced --llm-price 1000,2000 --max-cost 0.5 --json");
  REQUIRE_MESSAGE(o.code == 0, o.err);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE(parser.parse(o.out).get(doc) == simdjson::SUCCESS);
  const std::size_t calls = server.requests().size();
  CHECK(calls == 3);
  CHECK(doc["tokens"].get_int64().value() == static_cast<std::int64_t>(100 * calls));
  CHECK(doc["cost_usd"].get_double().value() == doctest::Approx(static_cast<double>(calls) * call_cost(1000, 2000)));
  CHECK(std::string_view(doc["stop_reason"].get_string().value()).find("budget of $0.5") != std::string_view::npos);
  simdjson::dom::element model = doc["models"]["priced"];
  CHECK(model["nodes"].get_int64().value() == static_cast<std::int64_t>(calls));
  CHECK(model["cost_usd"].get_double().value() == doctest::Approx(static_cast<double>(calls) * call_cost(1000, 2000)));
}

TEST_CASE("cli: a resumed run keeps the price it began with, and says so when another is given") {
  TempDir dir("ke_models");
  FakeModelServer server;
  for (int i = 0; i < 10; ++i) server.push({200, FakeModelServer::openai(fast_kernel(i), 100)});
  const std::string common = "run " + fixture("e2e/colsum.json") + " --db " + (dir / "runs.db") +
                             " --in-process --mutator llm --llm-url " + server.url() + " --llm-model priced --json";
  const auto first = run_cli(common + " --llm-price 1000,2000 --max-evals 3");
  REQUIRE_MESSAGE(first.code == 0, first.err);
  CHECK(server.requests().size() == 2);
  const auto second = run_cli(common + " --resume --llm-price 1,1 --max-evals 5");
  REQUIRE_MESSAGE(second.code == 0, second.err);
  CHECK(second.err.find("keeps the price it began with for priced: $1000 in, $2000 out per million tokens") !=
        std::string::npos);
  CHECK(server.requests().size() == 4);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE(parser.parse(second.out).get(doc) == simdjson::SUCCESS);
  // Every call at the first price: the two before the resume (restored) and the two after it.
  CHECK(doc["cost_usd"].get_double().value() == doctest::Approx(4 * call_cost(1000, 2000)));
  // Resumed with no price given: still the stored one, and no word about it.
  const auto third = run_cli(common + " --resume --max-evals 6 --max-cost 100");
  REQUIRE_MESSAGE(third.code == 0, third.err);
  CHECK(third.err.find("price") == std::string::npos);
  REQUIRE(parser.parse(third.out).get(doc) == simdjson::SUCCESS);
  CHECK(doc["cost_usd"].get_double().value() == doctest::Approx(5 * call_cost(1000, 2000)));
  const auto shown = run_cli("show " + (dir / "runs.db"));
  REQUIRE(shown.code == 0);
  CHECK(shown.out.find("500 model tokens costing $0.9500") != std::string::npos);
  CHECK(shown.out.find("[priced $0.1900]") != std::string::npos);
  const auto exported = run_cli("export " + (dir / "runs.db") + " --format json");
  REQUIRE(exported.code == 0);
  REQUIRE(parser.parse(exported.out).get(doc) == simdjson::SUCCESS);
  CHECK(doc["run"]["llm_prices"]["priced"]["input_per_mtok"].get_double().value() == 1000);
  CHECK(doc["run"]["cost_usd"].get_double().value() == doctest::Approx(5 * call_cost(1000, 2000)));
}

TEST_CASE("cli: two model endpoints: each node is credited to its model, and the calls turn to the one that improves") {
  TempDir dir("ke_models");
  FakeModelServer good, bad;
  for (int i = 0; i < 16; ++i) {
    good.push({200, FakeModelServer::openai(fast_kernel(i), 100)});
    bad.push({200, FakeModelServer::openai(broken_kernel(i), 100)});
  }
  const std::string db = dir / "runs.db";
  const auto o = run_cli("run " + fixture("e2e/colsum.json") + " --db " + db + " --in-process --mutator llm" +
                         " --llm-url " + good.url() + " --llm-model model-a --llm-url " + bad.url() +
                         " --llm-model model-b --llm-price 1,2 --max-evals 15 --json");
  REQUIRE_MESSAGE(o.code == 0, o.err);
  const std::size_t asked_a = good.requests().size(), asked_b = bad.requests().size();
  MESSAGE("model-a asked " << asked_a << " times, model-b " << asked_b << " times");
  CHECK(asked_a + asked_b == 14);
  CHECK(asked_b >= 1);
  CHECK(asked_a > 2 * asked_b);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE(parser.parse(o.out).get(doc) == simdjson::SUCCESS);
  CHECK(doc["models"]["model-a"]["nodes"].get_int64().value() == static_cast<std::int64_t>(asked_a));
  CHECK(doc["models"]["model-b"]["nodes"].get_int64().value() == static_cast<std::int64_t>(asked_b));
  CHECK(doc["models"]["model-b"]["ok"].get_int64().value() == 0);
  const auto exported = run_cli("export " + db + " --format json");
  REQUIRE(exported.code == 0);
  REQUIRE(parser.parse(exported.out).get(doc) == simdjson::SUCCESS);
  simdjson::dom::array sources = doc["sources"].get_array().value();
  simdjson::dom::array nodes = doc["nodes"].get_array().value();
  int credited = 0;
  for (simdjson::dom::element n : nodes) {
    if (n["model"].is_null()) continue;
    const std::string model(n["model"].get_string().value());
    const std::string source(
        sources.at(static_cast<std::size_t>(n["source"].get_int64().value())).get_string().value());
    CAPTURE(model);
    CHECK(source.find(model == "model-a" ? "variant" : "broken") != std::string::npos);
    ++credited;
  }
  CHECK(credited == 14);
  const auto shown = run_cli("show " + db);
  CHECK(shown.out.find("[model-b $") != std::string::npos);
}

TEST_CASE("cli: a bad --llm-price, --max-cost or pairing of --llm-url and --llm-model is a usage error naming it") {
  const std::string run =
      "run " + fixture("e2e/colsum.json") + " --no-db --mutator llm --llm-url http://127.0.0.1:9/v1 ";
  struct Case {
    std::string args;
    const char* says;
  };
  const Case cases[] = {
      {"--llm-model m --llm-price -1,2", "has a negative price"},
      {"--llm-model m --llm-price 1,-2", "has a negative price"},
      {"--llm-model m --llm-price 3", "is not two numbers"},
      {"--llm-model m --llm-price cheap,1", "is not two numbers"},
      {"--llm-model m --llm-price 1,2,3", "is not two numbers"},
      {"--llm-model m --llm-price 1,", "is not two numbers"},
      {"--llm-model m --llm-price 1,2 --llm-price 3,4", "--llm-price is given 2 times for 1 --llm-model"},
      {"--llm-model m --max-cost 1", "--max-cost needs model calls with a price"},
      {"--llm-model m --llm-price 0,0 --max-cost 1", "no model has one above 0"},
      {"--llm-model m --llm-price 1,2 --max-cost -1", "--max-cost must be a positive"},
      {"--llm-model m --llm-price 1,2 --max-cost 0", "--max-cost must be a positive"},
      {"--llm-url http://127.0.0.1:9/v1 --llm-model a --llm-model b --llm-model c", "--llm-url is given 2 times for 3"},
      {"--llm-price 1,2", "prices the calls of a --llm-model"},
  };
  for (const Case& c : cases) {
    const auto o = run_cli(run + c.args);
    CAPTURE(c.args);
    CHECK(o.code == 2);
    CHECK_MESSAGE(o.err.find(c.says) != std::string::npos, o.err);
  }
  // The price's own words: what IN,OUT means.
  const auto o = run_cli(run + "--llm-model m --llm-price 3");
  CHECK(o.err.find("US dollars per million prompt and completion tokens") != std::string::npos);
}
