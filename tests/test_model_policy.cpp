// The model policy: the points it proposes (distinct, new, within the constraints, the same for a seed),
// in parallel and with failures, that it learns a smooth surface far faster than random search, and that
// a prior from another device helps it. Skipped, saying so, in a build without XGBoost.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <kernelevolve/error.hpp>
#include <kernelevolve/evolver.hpp>
#include <kernelevolve/selection.hpp>
#include <limits>
#include <set>

namespace ke = kernelevolve;

namespace {

// A 20 x 20 grid (A, B in 1..20) under A + B <= 34: 370 points.
ke::Spec big_grid() {
  ke::Spec s;
  s.name = "big_grid";
  s.language = ke::Language::c;
  s.entry = "k";
  s.params = {{"x", ke::DType::f32, ke::Role::in, {"n"}, 0},
              {"y", ke::DType::f32, ke::Role::out, {"n"}, 0},
              {"n", ke::DType::i64, ke::Role::size, {}, 0}};
  s.workloads = {{{"n", 100}}, {{"n", 200}}};
  s.reference.source = "void k(const float* x, float* y, long n) {}";
  s.seed.source = "void k(const float* x, float* y, long n) { (void)(A + B); }";
  std::vector<std::int64_t> values;
  for (std::int64_t v = 1; v <= 20; ++v) values.push_back(v);
  s.tunables = {{"A", values}, {"B", values}};
  s.constraints = {ke::Expr::parse("A + B <= 34")};
  s.validate();
  return s;
}

// A bowl with its bottom at A = 13, B = 7 (on both workloads); B = 11 "does not compile".
double bowl_us(std::int64_t a, std::int64_t b) { return 10 + 0.5 * (a - 13) * (a - 13) + (b - 7) * (b - 7); }

class Bowl final : public ke::FitnessEvaluator {
 public:
  std::atomic<int> calls{0};
  ke::Evaluation evaluate(const ke::Candidate& c, std::uint64_t) override {
    ++calls;
    const auto a = c.tunables.at("A"), b = c.tunables.at("B");
    ke::Evaluation e;
    if (b == 11) {
      e.status = ke::Status::compile_error;
      return e;
    }
    e.status = ke::Status::ok;
    const double us = bowl_us(a, b);
    e.timings = {{us, us, us, 0, 1}, {2 * us, 2 * us, 2 * us, 0, 1}};
    return e;
  }
  ke::DeviceInfo device_info() override { return {"synthetic", "cpu", "bowl", 1, 0, 0, 0, 0, {}}; }
};

struct Search {
  std::vector<ke::Bindings> points;  // in the order added
  std::vector<std::string> notes;
  int to_optimum = -1;  // evaluations until the bottom of the bowl (the seed counts)
};

Search search(std::uint64_t seed, int budget, int jobs = 1, ke::PolicyOptions options = {},
              bool stop_at_optimum = true) {
  ke::EvolverOptions eo;
  eo.seed = seed;
  eo.jobs = jobs;
  eo.confirm_rounds = 0;
  const double target = bowl_us(1, 1) / bowl_us(13, 7);
  ke::Evolver evolver(big_grid(), std::make_shared<Bowl>(), std::make_shared<ke::ParamMutator>(),
                      ke::make_policy("model", options),
                      stop_at_optimum ? ke::any_of({ke::max_evaluations(budget), ke::target_speedup(target * 0.999)})
                                      : ke::max_evaluations(budget),
                      eo);
  evolver.run();
  Search s;
  for (const ke::Node& n : evolver.graph().nodes()) {
    s.points.push_back(n.candidate.tunables);
    s.notes.push_back(n.note);
  }
  for (ke::NodeId id : evolver.graph().evaluation_order()) {
    const auto& t = evolver.graph().node(id).candidate.tunables;
    if (t.at("A") == 13 && t.at("B") == 7) {
      s.to_optimum = static_cast<int>(std::find(evolver.graph().evaluation_order().begin(),
                                                evolver.graph().evaluation_order().end(), id) -
                                      evolver.graph().evaluation_order().begin()) +
                     1;
    }
  }
  return s;
}

}  // namespace

TEST_CASE("the model policy: distinct, new points within the constraints, the same for a seed") {
  if (!ke::model_policy_available()) {
    MESSAGE("skipped: this build has no XGBoost (the model policy is left out)");
    CHECK_THROWS_AS(ke::make_policy("model"), ke::Error);
    return;
  }
  const ke::Spec spec = big_grid();
  const Search a = search(7, 40, 1, {}, false), again = search(7, 40, 1, {}, false),
               other = search(8, 40, 1, {}, false);
  REQUIRE(a.points.size() == 40);
  std::set<ke::Bindings> distinct(a.points.begin(), a.points.end());
  CHECK(distinct.size() == a.points.size());
  for (const auto& p : a.points) CHECK_MESSAGE(spec.satisfies_constraints(p), p.at("A"), " ", p.at("B"));
  CHECK(a.points == again.points);  // deterministic for a seed
  CHECK(a.points != other.points);
  // After a few random points, the model proposes, and says what it predicts.
  const auto modelled = std::count_if(a.notes.begin(), a.notes.end(),
                                      [](const std::string& n) { return n.rfind("model: predicted", 0) == 0; });
  CHECK(modelled >= 30);
  CHECK(std::count_if(a.notes.begin(), a.notes.end(),
                      [](const std::string& n) { return n.rfind("model: exploring", 0) == 0; }) >= 1);
}

TEST_CASE("the model policy with jobs in flight: every proposal distinct from the graph and the others pending") {
  if (!ke::model_policy_available()) return;
  const ke::Spec spec = big_grid();
  ke::SearchGraph g;
  auto add = [&](std::int64_t a, std::int64_t b, ke::Status status) {
    ke::Node n;
    if (g.size() > 0) n.parents = {0};
    n.candidate = {spec.seed.source, ke::Language::c, {{"A", a}, {"B", b}}};
    n.evaluation.status = status;
    if (status == ke::Status::ok) n.evaluation.timings = {{bowl_us(a, b), 0, 0, 0, 1}};
    n.speedup = status == ke::Status::ok ? bowl_us(1, 1) / bowl_us(a, b) : 0;
    return g.add(std::move(n));
  };
  add(1, 1, ke::Status::ok);
  for (std::int64_t a : {3, 9, 15, 19}) {
    for (std::int64_t b : {2, 6, 13}) add(a, b, ke::Status::ok);
  }
  ke::PolicyOptions o;
  auto policy = ke::make_policy("model", o);
  std::map<std::string, std::vector<std::int64_t>> axes = spec.tunables;
  std::mt19937_64 rng(3);
  std::set<ke::Bindings> seen;
  for (const auto& n : g.nodes()) seen.insert(n.candidate.tunables);
  for (int k = 0; k < 8; ++k) {  // eight workers: each new proposal sits in the graph as a pending node
    const auto parents = policy->select(g, rng);
    REQUIRE(parents.size() == 1);
    const auto p = policy->propose_point({spec, g, parents[0], axes, rng});
    REQUIRE(p.has_value());
    CHECK(p->note.rfind("model: predicted", 0) == 0);
    CHECK(spec.satisfies_constraints(p->tunables));
    CHECK_MESSAGE(seen.insert(p->tunables).second, "proposed twice: ", p->tunables.at("A"), " ", p->tunables.at("B"));
    add(p->tunables.at("A"), p->tunables.at("B"), ke::Status::pending);
  }
  // A whole search with four jobs: distinct points, all valid.
  const Search s = search(5, 60, 4);
  std::set<ke::Bindings> distinct(s.points.begin(), s.points.end());
  CHECK(distinct.size() == s.points.size());
  for (const auto& p : s.points) CHECK(spec.satisfies_constraints(p));
}

TEST_CASE(
    "the model policy learns a smooth surface: the bottom of the bowl in a fraction of random search's evaluations") {
  if (!ke::model_policy_available()) return;
  // 370 points, one optimum: random search needs 186 evaluations on average.
  double total = 0;
  const int seeds = 5;
  for (int seed = 1; seed <= seeds; ++seed) {
    const Search s = search(static_cast<std::uint64_t>(seed), 370);
    REQUIRE_MESSAGE(s.to_optimum > 0, "seed ", seed);
    total += s.to_optimum;
  }
  const double mean = total / seeds;
  MESSAGE("model policy: the optimum of 370 points in ", mean, " evaluations on average (random search: 186)");
  CHECK(mean < 0.2 * 186);
}

TEST_CASE("the model policy starts from a prior: another device's measurements of the same space") {
  if (!ke::model_policy_available()) return;
  // The other device is twice as slow everywhere, with the same shape: the prior points the way.
  ke::PolicyOptions with_prior;
  for (std::int64_t a = 1; a <= 20; a += 3) {
    for (std::int64_t b = 1; b <= 20; b += 2) {
      if (a + b <= 34) with_prior.prior.push_back({{{"A", a}, {"B", b}}, bowl_us(1, 1) / bowl_us(a, b)});
    }
  }
  double prior_total = 0, plain_total = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    const Search p = search(static_cast<std::uint64_t>(seed), 370, 1, with_prior);
    const Search q = search(static_cast<std::uint64_t>(seed), 370);
    REQUIRE(p.to_optimum > 0);
    prior_total += p.to_optimum;
    plain_total += q.to_optimum;
  }
  MESSAGE("to the optimum: ", prior_total / 4, " evaluations with the prior, ", plain_total / 4, " without");
  CHECK(prior_total < plain_total);
  CHECK(prior_total / 4 <= 12);
}

TEST_CASE("the model policy trains a refit a slice per proposal, the last model serving meanwhile") {
  if (!ke::model_policy_available()) return;
  const ke::Spec spec = big_grid();
  auto run = [&](double slice) {
    ke::SearchGraph g;
    auto add = [&](std::int64_t a, std::int64_t b) {
      ke::Node n;
      if (g.size() > 0) n.parents = {0};
      n.candidate = {spec.seed.source, ke::Language::c, {{"A", a}, {"B", b}}};
      n.evaluation.status = ke::Status::ok;
      n.evaluation.timings = {{bowl_us(a, b), 0, 0, 0, 1}};
      n.speedup = bowl_us(1, 1) / bowl_us(a, b);
      g.add(std::move(n));
    };
    add(1, 1);
    for (std::int64_t a : {3, 9, 15, 19}) {
      for (std::int64_t b : {2, 6, 13}) add(a, b);
    }
    ke::PolicyOptions o;
    o.model_ensemble = 2;
    o.model_rounds = 3;
    o.model_fit_slice = slice;
    ke::ModelPolicy policy(o);
    std::mt19937_64 rng(11);
    std::vector<std::size_t> fits;  // after each proposal
    std::vector<ke::Bindings> points;
    for (int k = 0; k < 10; ++k) {
      const auto parents = policy.select(g, rng);
      const auto p = policy.propose_point({spec, g, parents[0], spec.tunables, rng});
      REQUIRE(p.has_value());
      points.push_back(p->tunables);
      fits.push_back(policy.stats().fits);
      add(p->tunables.at("A"), p->tunables.at("B"));  // measured at once: a refit is due at every proposal
    }
    return std::make_pair(fits, points);
  };
  // Whole: the first proposal fits, and every later one refits on the point measured since.
  const auto whole = run(std::numeric_limits<double>::infinity());
  CHECK(whole.first == std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  // A row-round per proposal: the first fit is still whole (nothing to propose with before it); a refit's
  // 2 members x 3 rounds take six proposals, the first model proposing meanwhile.
  const auto sliced = run(1);
  CHECK(sliced.first == std::vector<std::size_t>{1, 1, 1, 1, 1, 1, 2, 2, 2, 2});
  CHECK(sliced.second == run(1).second);  // deterministic: slices counted, not timed
  CHECK(sliced.second.front() == whole.second.front());
  std::set<ke::Bindings> distinct(sliced.second.begin(), sliced.second.end());
  CHECK(distinct.size() == sliced.second.size());
}

TEST_CASE("the model policy's options are checked") {
  if (!ke::model_policy_available()) return;
  ke::PolicyOptions o;
  o.model_ensemble = 1;
  CHECK_THROWS_AS(ke::make_policy("model", o), ke::Error);
  o = {};
  o.model_acquisition = "greedy";
  try {
    ke::make_policy("model", o);
    FAIL("accepted");
  } catch (const ke::Error& e) {
    CHECK(std::string(e.what()).find("lcb, ei or thompson") != std::string::npos);
  }
  o = {};
  o.model_warmup = "everywhere";
  CHECK_THROWS_AS(ke::make_policy("model", o), ke::Error);  // at construction, not at the first proposal
  o = {};
  o.model_fit_slice = 0;
  CHECK_THROWS_AS(ke::make_policy("model", o), ke::Error);
}
