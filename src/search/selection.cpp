// Selection policies: greedy, random, epsilon-greedy, tournament, UCB1 over the graph, and islands of
// MAP-Elites archives with migration.
#include "kernelevolve/selection.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>

#include "kernelevolve/error.hpp"

namespace kernelevolve {

namespace {

const Node& at(const SearchGraph& graph, NodeId id) { return graph.nodes()[static_cast<std::size_t>(id)]; }

NodeId random_ok(const SearchGraph& graph, std::mt19937_64& rng) {
  const auto& ok = graph.ok_nodes();
  return ok[std::uniform_int_distribution<std::size_t>(0, ok.size() - 1)(rng)];
}

}  // namespace

std::vector<NodeId> GreedyPolicy::select(const SearchGraph& graph, std::mt19937_64&) {
  if (const auto best = graph.best()) return {*best};
  return {0};  // nothing correct yet: mutate from the seed
}

std::vector<NodeId> RandomPolicy::select(const SearchGraph& graph, std::mt19937_64& rng) {
  if (graph.ok_nodes().empty()) return {0};
  return {random_ok(graph, rng)};
}

EpsilonGreedyPolicy::EpsilonGreedyPolicy(double epsilon) : epsilon_(epsilon) {
  if (!(epsilon >= 0 && epsilon <= 1)) throw Error(ErrorCode::BadUsage, "epsilon-greedy: epsilon must be in [0, 1]");
}

std::vector<NodeId> EpsilonGreedyPolicy::select(const SearchGraph& graph, std::mt19937_64& rng) {
  if (graph.ok_nodes().empty()) return {0};
  if (std::uniform_real_distribution<double>(0, 1)(rng) < epsilon_) return {random_ok(graph, rng)};
  return {*graph.best()};
}

TournamentPolicy::TournamentPolicy(int size) : size_(size) {
  if (size < 1) throw Error(ErrorCode::BadUsage, "tournament: the tournament size must be at least 1");
}

std::vector<NodeId> TournamentPolicy::select(const SearchGraph& graph, std::mt19937_64& rng) {
  if (graph.ok_nodes().empty()) return {0};
  NodeId winner = random_ok(graph, rng);
  for (int k = 1; k < size_; ++k) {
    const NodeId challenger = random_ok(graph, rng);
    if (at(graph, challenger).speedup > at(graph, winner).speedup) winner = challenger;
  }
  return {winner};
}

// ---- UCB1 -------------------------------------------------------------------------------------------

UcbPolicy::UcbPolicy(double exploration) : exploration_(exploration) {
  if (!(exploration >= 0)) throw Error(ErrorCode::BadUsage, "ucb: the exploration weight must not be negative");
}

double UcbPolicy::gain(const SearchGraph& graph, const Node& child) const {
  if (child.parents.empty() || child.evaluation.status != Status::ok) return 0;
  return std::max(0.0, child.speedup - at(graph, child.parents.front()).speedup);
}

void UcbPolicy::Arm::refresh() {
  const double n = std::max(1.0, pulls + in_flight);
  // What a pull is expected to leave: the arm's own speed plus the mean improvement of its children over
  // it, E[max(parent, child)]; select() scales it by the best and adds the exploration bonus.
  value = speedup + gain / n;
  inverse_sqrt_pulls = 1.0 / std::sqrt(n);
}

void UcbPolicy::catch_up(const SearchGraph& graph) {
  const auto& order = graph.evaluation_order();
  if (seen_graph_ != &graph || graph.size() < seen_nodes_ || order.size() < seen_evaluated_) {
    *this = UcbPolicy(exploration_);
    seen_graph_ = &graph;
  }
  arms_.resize(graph.size());
  counted_pending_.resize(graph.size(), false);
  for (; seen_nodes_ < graph.size(); ++seen_nodes_) {
    const Node& n = at(graph, static_cast<NodeId>(seen_nodes_));
    if (n.evaluation.status == Status::pending && !n.parents.empty()) {
      Arm& parent = arms_[static_cast<std::size_t>(n.parents.front())];
      parent.in_flight += 1;
      parent.refresh();
      counted_pending_[seen_nodes_] = true;
    }
  }
  for (; seen_evaluated_ < order.size(); ++seen_evaluated_) {
    const Node& child = at(graph, order[seen_evaluated_]);
    const double g = gain(graph, child);
    if (!child.parents.empty()) {
      Arm& parent = arms_[static_cast<std::size_t>(child.parents.front())];
      if (counted_pending_[static_cast<std::size_t>(child.id)]) {
        parent.in_flight -= 1;
        counted_pending_[static_cast<std::size_t>(child.id)] = false;
      }
      parent.gain += g;
      parent.pulls += 1;
      parent.refresh();
      total_pulls_ += 1;
    }
    Arm& self = arms_[static_cast<std::size_t>(child.id)];  // the prior: its own gain as one pull
    self.speedup = child.speedup;
    self.gain += g;
    self.pulls += 1;
    self.refresh();
    total_pulls_ += 1;
  }
}

std::vector<NodeId> UcbPolicy::select(const SearchGraph& graph, std::mt19937_64&) {
  catch_up(graph);
  const auto& ok = graph.ok_nodes();
  if (ok.empty()) return {0};
  const double inverse_best = 1.0 / std::max(1e-300, at(graph, *graph.best()).speedup);
  const double bonus = exploration_ * std::sqrt(std::log(total_pulls_ + 1));
  NodeId chosen = ok.front();
  double chosen_score = -std::numeric_limits<double>::infinity();
  for (NodeId id : ok) {  // the arms only: a scan of 100k costs about a millisecond
    const Arm& a = arms_[static_cast<std::size_t>(id)];
    const double score = a.value * inverse_best + bonus * a.inverse_sqrt_pulls;
    // Ties go to the faster node: among equally promising arms, exploit.
    if (score > chosen_score ||
        (score == chosen_score && a.speedup > arms_[static_cast<std::size_t>(chosen)].speedup)) {
      chosen = id;
      chosen_score = score;
    }
  }
  return {chosen};
}

// ---- Islands of MAP-Elites archives ------------------------------------------------------------------

struct IslandsPolicy::Island {
  std::map<std::vector<std::int64_t>, std::size_t> cell_index;  // cell -> position in elites
  std::vector<NodeId> elites;
  std::optional<NodeId> best;
};

namespace {

std::vector<std::string> resolve_features(const std::vector<std::string>& wanted, const Node& seed) {
  std::vector<std::string> out;
  for (const std::string& f : wanted) {
    if (f == "source_length" || f.rfind("resource:", 0) == 0 || f.rfind("tunable:", 0) == 0) {
      out.push_back(f);
    } else {
      out.push_back("tunable:" + f);
    }
  }
  if (out.empty()) {
    out.push_back(seed.candidate.tunables.empty() ? "source_length"
                                                  : "tunable:" + seed.candidate.tunables.begin()->first);
  }
  return out;
}

void check_feature(const std::string& f) {
  const bool named = (f.rfind("resource:", 0) == 0 && f.size() > 9) || (f.rfind("tunable:", 0) == 0 && f.size() > 8);
  const bool plain = f == "source_length" || (f.find(':') == std::string::npos && !f.empty());
  if (!named && !plain) {
    throw Error(ErrorCode::BadUsage, "islands: unknown feature axis '" + f +
                                         "' (use a tunable's name, tunable:NAME, source_length or resource:NAME)");
  }
}

}  // namespace

IslandsPolicy::IslandsPolicy(PolicyOptions options) : options_(std::move(options)) {
  if (options_.islands < 1) throw Error(ErrorCode::BadUsage, "islands: there must be at least 1 island");
  if (options_.migration_interval < 1)
    throw Error(ErrorCode::BadUsage, "islands: the migration interval must be at least 1");
  if (!(options_.bins_per_octave > 0)) throw Error(ErrorCode::BadUsage, "islands: bins per octave must be positive");
  for (const auto& f : options_.features) check_feature(f);
}

std::vector<std::int64_t> IslandsPolicy::cell_of(const Node& node) const {
  const std::vector<std::string> axes = features_.empty() ? resolve_features(options_.features, node) : features_;
  auto log_bin = [&](double x) {
    return static_cast<std::int64_t>(std::floor(std::log2(std::max(0.0, x) + 1) * options_.bins_per_octave));
  };
  std::vector<std::int64_t> cell;
  for (const std::string& f : axes) {
    if (f == "source_length") {
      cell.push_back(log_bin(static_cast<double>(node.candidate.source.size())));
    } else if (f.rfind("resource:", 0) == 0) {
      const auto it = node.evaluation.resources.find(f.substr(9));
      cell.push_back(it == node.evaluation.resources.end() ? -1 : log_bin(static_cast<double>(it->second)));
    } else {
      const auto it = node.candidate.tunables.find(f.substr(8));
      cell.push_back(it == node.candidate.tunables.end() ? std::numeric_limits<std::int64_t>::min() : it->second);
    }
  }
  return cell;
}

std::vector<std::vector<NodeId>> IslandsPolicy::elites() const {
  std::vector<std::vector<NodeId>> out;
  for (const auto& island : islands_) out.push_back(island->elites);
  return out;
}

void IslandsPolicy::offer(std::size_t island_index, const SearchGraph& graph, NodeId id) {
  Island& island = *islands_[island_index];
  const Node& n = at(graph, id);
  const auto cell = cell_of(n);
  const auto it = island.cell_index.find(cell);
  if (it == island.cell_index.end()) {
    island.cell_index.emplace(cell, island.elites.size());
    island.elites.push_back(id);
  } else if (n.speedup > at(graph, island.elites[it->second]).speedup) {
    island.elites[it->second] = id;
  } else {
    return;
  }
  if (!island.best || n.speedup > at(graph, *island.best).speedup) island.best = id;
}

void IslandsPolicy::migrate(const SearchGraph& graph) {
  const std::size_t k = islands_.size();
  if (k < 2) return;
  std::vector<std::optional<NodeId>> bests;
  for (const auto& island : islands_) bests.push_back(island->best);
  for (std::size_t i = 0; i < k; ++i) {
    if (bests[i]) offer((i + 1) % k, graph, *bests[i]);
  }
}

void IslandsPolicy::catch_up(const SearchGraph& graph) {
  const auto& order = graph.evaluation_order();
  if (seen_graph_ != &graph || graph.size() < seen_nodes_ || order.size() < seen_evaluated_) {
    seen_graph_ = &graph;
    seen_nodes_ = seen_evaluated_ = next_island_ = 0;
    since_migration_ = 0;
    islands_.clear();
    for (int i = 0; i < options_.islands; ++i) islands_.push_back(std::make_shared<Island>());
    island_of_.clear();
    asked_.clear();
    features_.clear();
  }
  if (features_.empty() && graph.size() > 0) features_ = resolve_features(options_.features, at(graph, 0));
  island_of_.resize(graph.size(), -1);
  asked_.resize(graph.size());
  const auto k = static_cast<std::int64_t>(islands_.size());
  for (; seen_nodes_ < graph.size(); ++seen_nodes_) {
    const Node& n = at(graph, static_cast<NodeId>(seen_nodes_));
    if (n.parents.empty()) continue;  // the seed belongs to every island
    auto& asked = asked_[static_cast<std::size_t>(n.parents.front())];
    std::int64_t island = island_of_[static_cast<std::size_t>(n.parents.front())];
    if (!asked.empty()) {
      island = asked.front();
      asked.erase(asked.begin());
    }
    island_of_[seen_nodes_] = island >= 0 ? island : static_cast<std::int64_t>(seen_nodes_) % k;
  }
  for (; seen_evaluated_ < order.size(); ++seen_evaluated_) {
    const NodeId id = order[seen_evaluated_];
    if (at(graph, id).evaluation.status == Status::ok) {
      const std::int64_t island = island_of_[static_cast<std::size_t>(id)];
      if (island < 0) {
        for (std::size_t i = 0; i < islands_.size(); ++i) offer(i, graph, id);
      } else {
        offer(static_cast<std::size_t>(island), graph, id);
      }
    }
    if (++since_migration_ >= options_.migration_interval) {
      migrate(graph);
      since_migration_ = 0;
    }
  }
}

std::vector<NodeId> IslandsPolicy::select(const SearchGraph& graph, std::mt19937_64& rng) {
  catch_up(graph);
  if (graph.ok_nodes().empty()) return {0};
  const std::size_t k = islands_.size();
  std::size_t island = next_island_++ % k;
  for (std::size_t tries = 0; islands_[island]->elites.empty() && tries < k; ++tries) island = (island + 1) % k;
  const auto& elites = islands_[island]->elites;
  if (elites.empty()) return {*graph.best()};
  // A tournament of two among the island's elites: diversity from the archive, a little pressure.
  std::uniform_int_distribution<std::size_t> pick(0, elites.size() - 1);
  NodeId chosen = elites[pick(rng)];
  const NodeId other = elites[pick(rng)];
  if (at(graph, other).speedup > at(graph, chosen).speedup) chosen = other;
  auto& asked = asked_[static_cast<std::size_t>(chosen)];
  if (asked.size() >= 16) asked.erase(asked.begin());  // selections the mutator turned into no child
  asked.push_back(static_cast<std::int64_t>(island));
  return {chosen};
}

// ---- by name ----------------------------------------------------------------------------------------

std::vector<std::string> policy_names() {
  std::vector<std::string> names{"greedy", "epsilon-greedy", "tournament", "ucb", "islands", "random"};
  if (model_policy_available()) names.push_back("model");
  return names;
}

std::string default_policy_name() { return "greedy"; }

std::size_t model_default_threshold() { return 3; }

std::string default_policy_name(std::size_t space_points) {
  return model_policy_available() && space_points >= model_default_threshold() ? "model" : "greedy";
}

std::unique_ptr<SelectionPolicy> make_policy(const std::string& name, const PolicyOptions& options) {
  if (name == "greedy") return std::make_unique<GreedyPolicy>();
  if (name == "random") return std::make_unique<RandomPolicy>();
  if (name == "epsilon-greedy" || name == "epsilon") return std::make_unique<EpsilonGreedyPolicy>(options.epsilon);
  if (name == "tournament") return std::make_unique<TournamentPolicy>(options.tournament_size);
  if (name == "ucb" || name == "ucb1") return std::make_unique<UcbPolicy>(options.exploration);
  if (name == "islands" || name == "map-elites") return std::make_unique<IslandsPolicy>(options);
  if (name == "model") return std::make_unique<ModelPolicy>(options);  // says so when the build has no XGBoost
  std::string known;
  for (const auto& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error(ErrorCode::BadUsage, "unknown selection policy '" + name + "' (known: " + known + ")");
}

}  // namespace kernelevolve
