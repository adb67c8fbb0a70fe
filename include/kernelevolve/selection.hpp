// SelectionPolicy: picks the parent(s) of the next mutation from the search graph.
//
// Policies choose among the ok nodes (the seed while there are none). Those that keep statistics
// (ucb, islands, model) read the graph's evaluation_order() incrementally, so a selection costs the same
// at 100 nodes and at 100,000; every policy here is cheap next to one evaluation.
//
// A policy that learns the tunable space (model) must choose the child's point, not only its parent: a
// parent says little when a surrogate can rank every unmeasured point. So a policy may also answer
// propose_point(), which the parameter mutator asks before making a move of its own (MutationContext
// carries the policy). The mutator keeps what is its job (the live tunables, the constraints, never a
// point the graph holds); the policy only ranks. Mutators that write code ignore it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernelevolve/search_graph.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve {

// What the parameter mutator asks a policy that proposes points: a child of `parent`, moving along `axes`
// (the parent's live tunables, with their values).
struct PointQuery {
  const Spec& spec;
  const SearchGraph& graph;
  NodeId parent;
  const std::map<std::string, std::vector<std::int64_t>>& axes;
  std::mt19937_64& rng;
};

// A policy's answer: a value for each axis, and a note for the node ("model: predicted 2.1x").
struct ProposedPoint {
  Bindings tunables;
  std::string note;
};

class SelectionPolicy {
 public:
  virtual ~SelectionPolicy() = default;
  virtual std::string name() const = 0;
  // Returns one or more parents (ok nodes where there are any). The graph is never empty here.
  virtual std::vector<NodeId> select(const SearchGraph& graph, std::mt19937_64& rng) = 0;
  // The child's point, for a policy that models the space; none (the default): the mutator moves itself.
  // The mutator takes the point only if it is new to the graph and within the constraints.
  virtual std::optional<ProposedPoint> propose_point(const PointQuery& query) {
    (void)query;
    return std::nullopt;
  }
};

// A measurement from another device (or an earlier sweep) that the model policy starts from: a point and
// its speedup over that device's own seed (0 when it was not ok).
struct PriorPoint {
  Bindings tunables;
  double speedup = 0;
};

// Parameters of the policies; each policy reads its own and ignores the rest.
struct PolicyOptions {
  double epsilon = 0.2;         // epsilon-greedy: the chance of a uniformly random ok node instead of the best
  int tournament_size = 3;      // tournament: ok nodes drawn at random; the fastest of them wins
  double exploration = 0.2;     // ucb: the weight c of the exploration term c * sqrt(ln N / n)
  int islands = 4;              // islands: separate populations
  int migration_interval = 16;  // islands: evaluations between migrations (each island's best to the next)
  // islands: MAP-Elites feature axes. Each is "tunable:NAME" (or just NAME), "source_length", or
  // "resource:NAME" (a count from Evaluation::resources, e.g. "resource:registers"). Empty: the first
  // tunable of the seed, or source_length when it has none.
  std::vector<std::string> features;
  double bins_per_octave = 2;  // islands: numeric features (length, resources) fall in log2 bins this fine
  // model: the surrogate (an ensemble of gradient-boosted tree models, each on a bootstrap of the points)
  int model_ensemble = 5;           // members; their spread is the uncertainty
  int model_rounds = 20;            // boosting rounds (trees) per member
  int model_depth = 4;              // the trees' depth
  double model_eta = 0.3;           // the learning rate
  bool model_pair_features = true;  // add log2(a * b) for each pair of power-of-two tunables
  int model_min_points = 3;         // ok points before the model proposes; until then, by model_warmup:
  // "corner" (the first point the farthest from the seed, the rest random), "random", or "maximin" (each
  // point the farthest from those taken: corners first); random in a grid too large to score whole
  std::string model_warmup = "corner";
  // How a candidate is scored: "lcb" (predicted ln(time) - exploration x spread), "ei" (expected
  // improvement), "thompson" (one member's prediction, the member drawn per proposal).
  std::string model_acquisition = "lcb";
  double model_exploration = 0.5;      // lcb: the weight of the spread
  double model_failure_penalty = 0.5;  // a point that is not ok counts as the worst seen, times e^penalty
  int model_refit_divisor = 16;        // refit after max(1, n / divisor) new points (n measured at the last fit)
  // A refit trains at most this many row-rounds (one boosting round over n points is n) per proposal, the
  // last model serving until it completes: about 2 ms on one core. Counted, not timed, so deterministic.
  double model_fit_slice = 4096;
  double model_grid_limit = 50000;  // grids up to this many points are scored whole; larger ones by
  int model_neighbourhoods = 8;     //   the neighbours of this many best points
  int model_restarts = 64;          //   and this many random points
  std::vector<PriorPoint> prior;    // model: measurements from another device, as prior knowledge
  double prior_weight = 0.5;        // the weight of a prior point against a measured one
};

// Always the fastest correct node: pure exploitation; the mutator's restarts supply exploration.
class GreedyPolicy final : public SelectionPolicy {
 public:
  std::string name() const override { return "greedy"; }
  std::vector<NodeId> select(const SearchGraph& graph, std::mt19937_64& rng) override;
};

// A uniformly random ok node: no exploitation at all; a baseline for the others.
class RandomPolicy final : public SelectionPolicy {
 public:
  std::string name() const override { return "random"; }
  std::vector<NodeId> select(const SearchGraph& graph, std::mt19937_64& rng) override;
};

// The best node, except with probability epsilon a uniformly random ok node.
class EpsilonGreedyPolicy final : public SelectionPolicy {
 public:
  explicit EpsilonGreedyPolicy(double epsilon = 0.2);
  std::string name() const override { return "epsilon-greedy"; }
  std::vector<NodeId> select(const SearchGraph& graph, std::mt19937_64& rng) override;

 private:
  double epsilon_;
};

// The fastest of `size` ok nodes drawn uniformly (with replacement): selection pressure that grows
// with the size, without always taking the single best.
class TournamentPolicy final : public SelectionPolicy {
 public:
  explicit TournamentPolicy(int size = 3);
  std::string name() const override { return "tournament"; }
  std::vector<NodeId> select(const SearchGraph& graph, std::mt19937_64& rng) override;

 private:
  int size_;
};

// UCB1 over the graph: every ok node is an arm, and mutating it is a pull. The reward of a pull is the
// child's improvement over its parent, max(0, child speedup - parent speedup) (0 for a failed child). An
// arm's index is what a pull is expected to leave behind, E[max(parent, child)], plus the exploration term:
//   speedup / best + mean improvement / best + exploration * sqrt(ln(all pulls) / pulls of the arm)
// (shares of the best speedup so far, so the large early gains over a slow seed fade as the search moves
// on). A node's own improvement over its parent counts as its first pull, so a fresh improvement is tried
// soon; children still being evaluated count as pulls without a reward yet, so parallel jobs spread out.
class UcbPolicy final : public SelectionPolicy {
 public:
  explicit UcbPolicy(double exploration = 0.2);
  std::string name() const override { return "ucb"; }
  std::vector<NodeId> select(const SearchGraph& graph, std::mt19937_64& rng) override;

 private:
  struct Arm {
    double speedup = 0;                        // the node's own
    double gain = 0;                           // the sum of its children's gains over it (speedup), the prior included
    double pulls = 0;                          // finished pulls, the prior included
    double in_flight = 0;                      // children added but not yet evaluated
    double value = 0, inverse_sqrt_pulls = 1;  // kept up to date by refresh(), so a selection is a multiply-add per arm
    void refresh();
  };
  void catch_up(const SearchGraph& graph);
  double gain(const SearchGraph& graph, const Node& child) const;

  double exploration_;
  const SearchGraph* seen_graph_ = nullptr;
  std::size_t seen_nodes_ = 0;      // nodes added that we have accounted for
  std::size_t seen_evaluated_ = 0;  // entries of evaluation_order() accounted for
  std::vector<Arm> arms_;           // by node id
  std::vector<bool> counted_pending_;
  double total_pulls_ = 0;
};

// Islands of MAP-Elites archives. Each island keeps, per cell of the feature space, its fastest ok node
// (the elite). A child joins the island of the parent it came from; a selection takes the islands in turn
// and returns a uniformly random elite of the island. Every `migration_interval` evaluations each island
// sends its best elite to the next island (a ring). Diversity is kept twice: across cells (different
// feature values survive even when slower) and across islands (separate lineages until they migrate).
class IslandsPolicy final : public SelectionPolicy {
 public:
  explicit IslandsPolicy(PolicyOptions options = {});
  std::string name() const override { return "islands"; }
  std::vector<NodeId> select(const SearchGraph& graph, std::mt19937_64& rng) override;
  // The cell a node falls in (one bin per feature axis), for tests and reports.
  std::vector<std::int64_t> cell_of(const Node& node) const;
  // Each island's elites, for tests and reports.
  std::vector<std::vector<NodeId>> elites() const;

 private:
  struct Island;
  void catch_up(const SearchGraph& graph);
  void offer(std::size_t island, const SearchGraph& graph, NodeId id);
  void migrate(const SearchGraph& graph);

  PolicyOptions options_;
  std::vector<std::string> features_;  // resolved axes
  const SearchGraph* seen_graph_ = nullptr;
  std::size_t seen_nodes_ = 0;
  std::size_t seen_evaluated_ = 0;
  std::size_t next_island_ = 0;
  std::int64_t since_migration_ = 0;
  std::vector<std::shared_ptr<Island>> islands_;
  std::vector<std::int64_t> island_of_;           // by node id; -1 unknown
  std::vector<std::vector<std::int64_t>> asked_;  // by parent id: islands whose selection chose it, not yet claimed
};

// What the model policy has cost so far (for benchmarks and tests).
struct ModelStats {
  std::int64_t proposals = 0, fits = 0;
  double propose_s = 0;  // all proposals, fits included
  double fit_s = 0;
};

// A surrogate of the tunable space that learns from what was measured (XGBoost, gradient-boosted trees):
// features are the tunables' values (log2 where every value is a power of two, and the log2 of each
// product of two such), the target the point's ln(time) relative to the seed (a point that is not ok
// counts as slower than any). An ensemble of models, each fitted on a bootstrap of the points, predicts
// every unmeasured valid point (or, in a grid too large to score whole, the neighbours of the best points
// and random restarts); the point proposed is the one of least predicted time less `model_exploration`
// times the ensemble's spread (or by expected improvement, or Thompson sampling: model_acquisition).
// Until `model_min_points` points are ok it explores (model_warmup). Parents: the fastest node. Refits
// after a growing number of new points, trained a bounded slice per proposal (model_fit_slice), so a
// proposal stays cheap at thousands of points. Deterministic for a seed (one thread). Throws Error(BadUsage) when this
// build has no XGBoost (model_policy_available()).
class ModelPolicy final : public SelectionPolicy {
 public:
  explicit ModelPolicy(PolicyOptions options = {});
  ~ModelPolicy() override;
  std::string name() const override { return "model"; }
  std::vector<NodeId> select(const SearchGraph& graph, std::mt19937_64& rng) override;
  std::optional<ProposedPoint> propose_point(const PointQuery& query) override;
  ModelStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
// Whether this build has the model policy (XGBoost was found when it was configured).
bool model_policy_available();

// Creates a policy by name: "greedy", "epsilon-greedy", "tournament", "ucb", "islands" (or "map-elites"),
// "random". Throws Error(BadUsage) naming the known ones for an unknown name or a bad option.
std::unique_ptr<SelectionPolicy> make_policy(const std::string& name, const PolicyOptions& options = {});
std::vector<std::string> policy_names();
// The policy `kernelevolve run` uses when none is named: greedy, the winner of bench/search_quality on the
// CPU problems (ucb ties it within the noise; docs/search.md, "Selection policies and stop rules").
std::string default_policy_name();
// The policy for a search of a space of `space_points` points (tunable_space(spec).size()): the model
// where this build has it and the space has at least model_default_threshold() points (bench/search_quality:
// it needs fewer evaluations than greedy at every size measured from there up; docs/search.md, "Selection
// policies and stop rules"), greedy otherwise. What `kernelevolve run` uses when no --policy is named.
std::string default_policy_name(std::size_t space_points);
std::size_t model_default_threshold();

}  // namespace kernelevolve
