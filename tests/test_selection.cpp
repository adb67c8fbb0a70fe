// Selection policies on hand-built graphs (what each one picks, and why), the policies inside a real
// search on a synthetic cost surface, and the stop rules a search composes (token budget included).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <kernelevolve/error.hpp>
#include <kernelevolve/evolver.hpp>
#include <kernelevolve/selection.hpp>
#include <map>
#include <set>

namespace ke = kernelevolve;

namespace {

ke::Evaluation ok_eval(double us) {
  ke::Evaluation e;
  e.status = ke::Status::ok;
  e.timings = {{us, us, us, 0, 1}};
  return e;
}

// Adds an evaluated node; speedup is given directly (the graph does not compute it).
ke::NodeId add(ke::SearchGraph& g, std::vector<ke::NodeId> parents, double speedup, ke::Bindings tunables = {},
               ke::Status status = ke::Status::ok) {
  ke::Node n;
  n.parents = std::move(parents);
  n.candidate.source = "k";
  n.candidate.tunables = std::move(tunables);
  n.candidate.tunables["uid"] = static_cast<std::int64_t>(g.size());  // every node a distinct point
  n.evaluation = status == ke::Status::ok ? ok_eval(100 / speedup) : ke::Evaluation{};
  n.evaluation.status = status;
  n.speedup = status == ke::Status::ok ? speedup : 0;
  return g.add(std::move(n));
}

std::map<ke::NodeId, int> histogram(ke::SelectionPolicy& p, const ke::SearchGraph& g, int draws,
                                    std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::map<ke::NodeId, int> h;
  for (int i = 0; i < draws; ++i) {
    const auto picked = p.select(g, rng);
    REQUIRE(picked.size() == 1);
    h[picked[0]] += 1;
  }
  return h;
}

// A graph: seed 0 (1x), 1 (2x), 2 (failed), 3 (3x), 4 (1.5x).
ke::SearchGraph small_graph() {
  ke::SearchGraph g;
  add(g, {}, 1.0);
  add(g, {0}, 2.0);
  add(g, {1}, 0, {}, ke::Status::compile_error);
  add(g, {1}, 3.0);
  add(g, {0}, 1.5);
  return g;
}

}  // namespace

TEST_CASE("the graph keeps best, ok nodes and the evaluation order as nodes are recorded") {
  ke::SearchGraph g;
  add(g, {}, 1.0);
  ke::Node pending;
  pending.parents = {0};
  pending.candidate.source = "p";
  const ke::NodeId p = g.add(pending);
  CHECK(g.pending() == 1);
  CHECK(g.best() == std::optional<ke::NodeId>(0));
  CHECK(g.evaluation_order() == std::vector<ke::NodeId>{0});
  g.record_evaluation(p, ok_eval(20), 5.0);
  CHECK(g.pending() == 0);
  CHECK(g.best() == std::optional<ke::NodeId>(p));
  CHECK(g.ok_nodes() == std::vector<ke::NodeId>{0, p});
  CHECK(g.evaluation_order() == std::vector<ke::NodeId>{0, p});
  // Re-evaluated worse: the best moves back.
  ke::Evaluation failed;
  failed.status = ke::Status::incorrect;
  g.record_evaluation(p, failed, 0);
  CHECK(g.best() == std::optional<ke::NodeId>(0));
  CHECK(g.ok_nodes() == std::vector<ke::NodeId>{0});
}

TEST_CASE("with no correct node yet, every policy mutates the seed") {
  ke::SearchGraph g;
  add(g, {}, 0, {}, ke::Status::compile_error);
  std::mt19937_64 rng(3);
  for (const auto& name : ke::policy_names()) {
    auto p = ke::make_policy(name);
    CHECK_MESSAGE(p->select(g, rng) == std::vector<ke::NodeId>{0}, name);
  }
}

TEST_CASE("greedy takes the best; random spreads over the ok nodes only") {
  const auto g = small_graph();
  auto greedy = ke::make_policy("greedy");
  CHECK(histogram(*greedy, g, 50) == std::map<ke::NodeId, int>{{3, 50}});
  auto random = ke::make_policy("random");
  const auto h = histogram(*random, g, 4000);
  CHECK(h.count(2) == 0);  // never a failed node
  for (ke::NodeId id : {0, 1, 3, 4}) CHECK(h.at(id) == doctest::Approx(1000).epsilon(0.15));
}

TEST_CASE("epsilon-greedy: epsilon 0 is greedy, 1 is uniform, in between mostly the best") {
  const auto g = small_graph();
  ke::PolicyOptions o;
  o.epsilon = 0;
  CHECK(histogram(*ke::make_policy("epsilon-greedy", o), g, 100) == std::map<ke::NodeId, int>{{3, 100}});
  o.epsilon = 1;
  const auto uniform = histogram(*ke::make_policy("epsilon-greedy", o), g, 4000);
  CHECK(uniform.at(3) == doctest::Approx(1000).epsilon(0.15));
  o.epsilon = 0.2;
  const auto mostly = histogram(*ke::make_policy("epsilon-greedy", o), g, 4000);
  // The best: 80% directly plus its quarter of the random 20%.
  CHECK(mostly.at(3) == doctest::Approx(4000 * (0.8 + 0.05)).epsilon(0.05));
  o.epsilon = 1.5;
  CHECK_THROWS_AS(ke::make_policy("epsilon-greedy", o), ke::Error);
}

TEST_CASE("tournament: size 1 is uniform, a large size is nearly greedy, pressure grows with the size") {
  const auto g = small_graph();
  ke::PolicyOptions o;
  o.tournament_size = 1;
  const auto one = histogram(*ke::make_policy("tournament", o), g, 4000);
  CHECK(one.at(3) == doctest::Approx(1000).epsilon(0.15));
  o.tournament_size = 2;
  const auto two = histogram(*ke::make_policy("tournament", o), g, 4000);
  CHECK(two.at(3) == doctest::Approx(4000 * (1 - 0.75 * 0.75)).epsilon(0.1));  // the best wins unless never drawn
  o.tournament_size = 40;
  const auto many = histogram(*ke::make_policy("tournament", o), g, 200);
  CHECK(many.at(3) >= 199);
  o.tournament_size = 0;
  CHECK_THROWS_AS(ke::make_policy("tournament", o), ke::Error);
}

TEST_CASE("ucb: prefers the node whose children improved on it, explores the rest, and counts pending children") {
  ke::SearchGraph g;
  add(g, {}, 1.0);   // 0
  add(g, {0}, 1.0);  // 1: no better than the seed
  add(g, {0}, 1.0);  // 2: no better than the seed
  // Node 1's children: each better than node 1. Node 2's children: all failed.
  for (int i = 0; i < 4; ++i) add(g, {1}, 1.0 * (1.2 + 0.01 * i));
  for (int i = 0; i < 4; ++i) add(g, {2}, 0, {}, ke::Status::incorrect);
  ke::UcbPolicy ucb(0.0);  // no exploration: the largest expected max(parent, child) wins
  std::mt19937_64 rng(1);
  // Indexes (shares of the best, 1.23): node 1 = 0.81 + (0.2 + 0.21 + 0.22 + 0.23) / 1.23 / 5 = 0.95; node 2 =
  // 0.81 + 0; node 6 (the fastest child of 1) = 1 + 0.23 / 1.23 = 1.19 (its own gain is its first pull).
  const ke::NodeId pick = ucb.select(g, rng)[0];
  CHECK(pick == 6);
  CHECK(g.node(pick).parents == std::vector<ke::NodeId>{1});
  // Node 2 (every child failed) is never the choice without exploration.
  for (int i = 0; i < 20; ++i) CHECK(ucb.select(g, rng)[0] != 2);

  // With strong exploration the least-pulled arms come up: the children of 1 had one pull each; node 2
  // had five (its prior and four children), so it stays behind.
  ke::UcbPolicy explorer(10.0);
  std::set<ke::NodeId> seen;
  for (int i = 0; i < 20; ++i) {
    const ke::NodeId id = explorer.select(g, rng)[0];
    seen.insert(id);
    ke::Node child;  // a pending child of the pick: counted as a pull, so the next pick moves on
    child.parents = {id};
    child.candidate.source = "pending" + std::to_string(i);
    g.add(child);
  }
  CHECK(seen.size() >= 4);
  CHECK(seen.count(2) == 0);
}

TEST_CASE("ucb reward: the improvement over the parent, none for a worse or failed child") {
  ke::SearchGraph g;
  add(g, {}, 1.0);   // 0
  add(g, {0}, 3.0);  // 1: gains 2 over node 0
  add(g, {0}, 0.5);  // 2: gains nothing
  add(g, {1}, 3.3);  // 3: gains 0.3 over node 1
  ke::UcbPolicy ucb(0.0);
  std::mt19937_64 rng(1);
  // Indexes, best 3.3: node 0 = 0.30 + 2 / 3.3 / 3 = 0.51; node 1 = 0.91 + (2 + 0.3) / 3.3 / 2 = 1.26;
  // node 2 = 0.15; node 3 = 1 + 0.3 / 3.3 = 1.09. Node 1's children improved on it the most.
  CHECK(ucb.select(g, rng)[0] == 1);
}

TEST_CASE("islands: MAP-Elites cells on a tunable keep the fastest node of each value") {
  ke::SearchGraph g;
  add(g, {}, 1.0, {{"T", 1}});  // the seed, in every island
  ke::PolicyOptions o;
  o.islands = 2;
  o.features = {"T"};
  o.migration_interval = 1000;
  ke::IslandsPolicy islands(o);
  std::mt19937_64 rng(5);
  // Children: T = 1 (faster than the seed), T = 2 twice (the second faster), T = 4.
  auto pick_and_add = [&](double speedup, std::int64_t t) {
    const ke::NodeId parent = islands.select(g, rng)[0];
    return add(g, {parent}, speedup, {{"T", t}});
  };
  const ke::NodeId a = pick_and_add(1.5, 1);
  const ke::NodeId b = pick_and_add(2.0, 2);
  const ke::NodeId c = pick_and_add(2.5, 2);
  const ke::NodeId d = pick_and_add(1.2, 4);
  islands.select(g, rng);  // catch up
  const auto elites = islands.elites();
  REQUIRE(elites.size() == 2);
  std::set<ke::NodeId> all;
  for (const auto& e : elites) all.insert(e.begin(), e.end());
  // The seed's cell (T = 1) is held by the faster a wherever a went; T = 4 by d.
  CHECK(all.count(a) == 1);
  CHECK(all.count(d) == 1);
  CHECK(islands.cell_of(g.node(d)) == std::vector<std::int64_t>{4});
  // b and c share the cell T = 2: where both landed on one island, only c survives.
  for (const auto& e : elites) {
    const bool has_b = std::find(e.begin(), e.end(), b) != e.end();
    const bool has_c = std::find(e.begin(), e.end(), c) != e.end();
    CHECK_FALSE((has_b && has_c));
  }
}

TEST_CASE("islands: migration carries each island's best to the next") {
  ke::SearchGraph g;
  add(g, {}, 1.0, {{"T", 1}});
  ke::PolicyOptions o;
  o.islands = 3;
  o.features = {"T"};
  o.migration_interval = 4;
  ke::IslandsPolicy islands(o);
  std::mt19937_64 rng(9);
  // Ten children, each faster and in a new cell: the islands' bests spread around the ring.
  ke::NodeId fastest = 0;
  for (int i = 1; i <= 10; ++i) {
    const ke::NodeId parent = islands.select(g, rng)[0];
    fastest = add(g, {parent}, 1.0 + i, {{"T", i + 1}});
  }
  islands.select(g, rng);
  int holding = 0;
  for (const auto& e : islands.elites()) holding += std::find(e.begin(), e.end(), fastest) != e.end();
  // Eleven evaluations, a migration every four: the fastest (the last) has not moved yet, but the
  // previous bests have: some node sits on more than one island.
  CHECK(holding >= 1);
  std::map<ke::NodeId, int> copies;
  for (const auto& e : islands.elites()) {
    for (ke::NodeId id : e) copies[id] += 1;
  }
  int migrated = 0;
  for (const auto& [id, n] : copies) migrated += id != 0 && n > 1;
  CHECK(migrated >= 1);
}

TEST_CASE("islands: features from source length and resources fall in log2 bins") {
  ke::PolicyOptions o;
  o.features = {"source_length", "resource:registers"};
  o.bins_per_octave = 1;
  ke::IslandsPolicy islands(o);
  ke::Node n;
  n.candidate.source = std::string(1000, 'x');
  n.evaluation.resources["registers"] = 31;
  CHECK(islands.cell_of(n) == std::vector<std::int64_t>{9, 5});  // floor(log2(1001)) = 9, log2(32) = 5
  n.evaluation.resources.clear();
  CHECK(islands.cell_of(n)[1] == -1);  // unknown: a cell of its own
  o.features = {"resource:"};
  CHECK_THROWS_AS(ke::IslandsPolicy{o}, ke::Error);
  o.features = {"what:ever"};
  CHECK_THROWS_AS(ke::make_policy("islands", o), ke::Error);
}

TEST_CASE("make_policy: every name, aliases, options checked, unknown names listed") {
  for (const auto& name : ke::policy_names()) CHECK(ke::make_policy(name)->name() == name);
  CHECK(ke::make_policy("map-elites")->name() == "islands");
  CHECK(ke::make_policy("ucb1")->name() == "ucb");
  const auto names = ke::policy_names();
  CHECK(std::find(names.begin(), names.end(), ke::default_policy_name()) != names.end());
  try {
    ke::make_policy("simulated-annealing");
    FAIL("no error");
  } catch (const ke::Error& e) {
    CHECK(e.code() == ke::ErrorCode::BadUsage);
    CHECK(std::string(e.what()).find("tournament") != std::string::npos);
  }
  ke::PolicyOptions o;
  o.islands = 0;
  CHECK_THROWS_AS(ke::make_policy("islands", o), ke::Error);
  o = {};
  o.exploration = -1;
  CHECK_THROWS_AS(ke::make_policy("ucb", o), ke::Error);
}

// ---- inside a search ------------------------------------------------------------------------------

namespace {

ke::Spec grid_spec() {
  ke::Spec s;
  s.name = "grid";
  s.language = ke::Language::c;
  s.entry = "k";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = {{{"n", 100}}};
  s.reference.source = "void k(const float* x, float* y, long n) {}";
  // The seed reads both tunables (a tunable nothing reads is dead, and never searched).
  s.seed.source = "void k(const float* x, float* y, long n) { (void)(A + B); }";
  s.tunables = {{"A", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}, {"B", {1, 2, 3, 4, 5, 6, 7, 8}}};
  s.validate();
  return s;
}

// A bowl with its bottom at A = 7, B = 6; B = 3 "does not compile".
class Bowl final : public ke::FitnessEvaluator {
 public:
  std::atomic<int> calls{0};
  ke::Evaluation evaluate(const ke::Candidate& c, std::uint64_t) override {
    ++calls;
    const double a = static_cast<double>(c.tunables.at("A")), b = static_cast<double>(c.tunables.at("B"));
    ke::Evaluation e;
    if (b == 3) {
      e.status = ke::Status::compile_error;
      return e;
    }
    return ok_eval(10 + (a - 7) * (a - 7) + 2 * (b - 6) * (b - 6));
  }
  ke::DeviceInfo device_info() override { return {"synthetic", "cpu", "bowl", 1, 0, 0, 0, 0, {}}; }
};

// A mutator that does nothing but spend tokens: the token budget must stop it.
class Spender final : public ke::Mutator {
 public:
  std::string name() const override { return "spender"; }
  ke::Mutation mutate(const ke::MutationContext& ctx) override {
    ke::Mutation m = inner_.mutate(ctx);
    m.tokens = 1000;
    return m;
  }

 private:
  ke::ParamMutator inner_;
};

}  // namespace

TEST_CASE("every policy drives a search to the optimum of the bowl") {
  for (const auto& name : ke::policy_names()) {
    auto evaluator = std::make_shared<Bowl>();
    ke::Evolver evolver(grid_spec(), evaluator, std::make_shared<ke::ParamMutator>(), ke::make_policy(name),
                        ke::any_of({ke::max_evaluations(80), ke::target_speedup(9.59)}));
    const auto r = evolver.run();
    REQUIRE(r.best.has_value());
    const auto& best = evolver.graph().node(*r.best);
    CHECK_MESSAGE(best.candidate.tunables.at("A") == 7, name);
    CHECK_MESSAGE(best.candidate.tunables.at("B") == 6, name);
    CHECK_MESSAGE(evaluator->calls <= 80, name);
  }
}

// Wraps a policy and checks what it returns: never a node still being evaluated.
class Checked final : public ke::SelectionPolicy {
 public:
  explicit Checked(std::unique_ptr<ke::SelectionPolicy> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  std::vector<ke::NodeId> select(const ke::SearchGraph& graph, std::mt19937_64& rng) override {
    auto picked = inner_->select(graph, rng);
    for (ke::NodeId id : picked) bad += graph.node(id).evaluation.status == ke::Status::pending;
    pending_seen = std::max<std::size_t>(pending_seen, graph.pending());
    return picked;
  }
  int bad = 0;
  std::size_t pending_seen = 0;

 private:
  std::unique_ptr<ke::SelectionPolicy> inner_;
};

TEST_CASE("policies with jobs in flight: pending nodes are never chosen as parents") {
  for (const auto& name : ke::policy_names()) {
    ke::EvolverOptions options;
    options.jobs = 4;
    auto policy = std::make_shared<Checked>(ke::make_policy(name));
    ke::Evolver evolver(grid_spec(), std::make_shared<Bowl>(), std::make_shared<ke::ParamMutator>(), policy,
                        ke::max_evaluations(40), options);
    evolver.run();
    CHECK_MESSAGE(policy->bad == 0, name);
    CHECK_MESSAGE(policy->pending_seen >= 1, name);  // selections did happen with candidates in flight
    CHECK(evolver.graph().size() == 40);
  }
}

TEST_CASE("the token budget stops a search that spends model tokens") {
  auto evaluator = std::make_shared<Bowl>();
  ke::Evolver evolver(grid_spec(), evaluator, std::make_shared<Spender>(), ke::make_policy("greedy"),
                      ke::any_of({ke::max_evaluations(1000), ke::token_budget(5500)}));
  const auto r = evolver.run();
  CHECK(r.state.tokens >= 5500);
  CHECK(r.state.tokens < 5500 + 1000);
  CHECK(r.stop_reason.find("5500 model tokens") != std::string::npos);
  CHECK(evolver.graph().size() == 7);  // the seed and six children, 1000 tokens each
}

TEST_CASE("stop rules: token budget and plateau alone and composed") {
  ke::SearchState s;
  s.tokens = 100;
  s.evaluations_since_improvement = 7;
  CHECK(ke::token_budget(100)->should_stop(s).has_value());
  CHECK_FALSE(ke::token_budget(101)->should_stop(s).has_value());
  CHECK(ke::plateau(7)->should_stop(s).has_value());
  CHECK_FALSE(ke::plateau(8)->should_stop(s).has_value());
  CHECK(ke::all_of({ke::token_budget(50), ke::plateau(5)})->should_stop(s).value().find(" and ") != std::string::npos);
  CHECK_FALSE(ke::any_of({ke::token_budget(500), ke::plateau(50)})->should_stop(s).has_value());
  CHECK_FALSE(ke::all_of({})->should_stop(s).has_value());
}
