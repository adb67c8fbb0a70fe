// Search quality: how many evaluations each selection policy needs to get within 5% of the best point of
// a problem's tunable space, against random search, on the CPU problems.
//
// 1. Sweep: every valid point of each problem is measured once, for real (in-process, on this CPU), and
//    kept in a store (--cache), so a second invocation measures nothing.
// 2. Replay: each policy searches the same space many times (--repeats seeds) against those stored
//    times, with the parameter mutator, exactly as `kernelevolve run` would but without the hardware:
//    fast, and fair, since every policy sees the same numbers. A search stops when its best is within
//    5% of the sweep's best (speedup >= best / 1.05); the evaluations it took (the seed included) are
//    its score. Random search draws the points in a uniformly random order after the seed.
//
//    search_quality [--repeats N] [--cache FILE] [--policies a,b@key=value,...] [--min-points N] [--jobs N] [SPEC ...]
//
// With no SPEC, every CPU spec under problems/ (spec.json or cpu.json).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <kernelevolve/kernelevolve.hpp>
#include <kernelevolve/store.hpp>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace ke = kernelevolve;
namespace fs = std::filesystem;

namespace {

// The key of a point in the sweep: its source and its live tunables (the seed's node binds every
// tunable; the parameter search's children only the live ones).
std::string point_key(const ke::Candidate& c, const std::vector<std::string>& live) {
  ke::Candidate projected = c;
  projected.tunables.clear();
  for (const auto& name : live) {
    if (const auto it = c.tunables.find(name); it != c.tunables.end()) projected.tunables[name] = it->second;
  }
  return projected.key();
}

// Answers from the sweep's measurements.
class Replay final : public ke::FitnessEvaluator {
 public:
  Replay(std::unordered_map<std::string, ke::Evaluation> table, std::vector<std::string> live)
      : table_(std::move(table)), live_(std::move(live)) {}
  ke::Evaluation evaluate(const ke::Candidate& c, std::uint64_t) override {
    const auto it = table_.find(point_key(c, live_));
    if (it != table_.end()) return it->second;
    ke::Evaluation e;
    e.status = ke::Status::invalid;
    e.message = "not in the sweep";
    return e;
  }
  ke::DeviceInfo device_info() override { return {"replay", "replay", "sweep", 1, 0, 0, 0, 0, {}}; }

 private:
  std::unordered_map<std::string, ke::Evaluation> table_;
  std::vector<std::string> live_;
};

struct Problem {
  std::string path;
  ke::Spec spec;
  std::vector<ke::Candidate> points;
  std::unordered_map<std::string, ke::Evaluation> measured;  // by point_key
  std::vector<std::string> live;                            // the tunables the seed reads
  double best_speedup = 0;
  int within = 0;  // points within 5% of the best
};

Problem sweep(const std::string& path, const std::shared_ptr<ke::Store>& cache) {
  Problem p;
  p.path = path;
  p.spec = ke::load_spec(path);
  const ke::Language language = p.spec.seed.language.value_or(p.spec.language);
  for (const auto& point : ke::tunable_space(p.spec)) p.points.push_back({p.spec.seed.source, language, point});
  for (const auto& [name, value] : p.points.front().tunables) p.live.push_back(name);
  auto local = std::make_shared<ke::LocalEvaluator>(p.spec, ke::open_device("cpu"));
  ke::ReusingEvaluator evaluator(local, cache, p.spec);
  std::fprintf(stderr, "sweeping %s: %zu points", p.spec.name.c_str(), p.points.size());
  std::vector<ke::Node> nodes;
  for (std::size_t i = 0; i < p.points.size(); ++i) {
    ke::Node n;
    n.id = static_cast<ke::NodeId>(i);
    if (i > 0) n.parents = {0};
    n.mutator = i == 0 ? "seed" : "sweep";
    n.candidate = p.points[i];
    n.evaluation = evaluator.evaluate(n.candidate, 1000 + i);
    nodes.push_back(n);
    p.measured[point_key(n.candidate, p.live)] = n.evaluation;
    std::fputc('.', stderr);
  }
  const std::int64_t fresh = static_cast<std::int64_t>(p.points.size()) - evaluator.reused();
  std::fprintf(stderr, " (%lld measured, %lld from the cache)\n", static_cast<long long>(fresh),
               static_cast<long long>(evaluator.reused()));
  if (fresh > 0) {  // keep them, for the next invocation
    const ke::RunId run = cache->begin_run(p.spec, evaluator.device_info(), {"sweep", "sweep", 0, "search_quality"});
    ke::SearchState state;
    for (ke::Node& n : nodes) {
      n.speedup = ke::speedup(nodes[0].evaluation, n.evaluation);
      state.evaluations += 1;
      cache->record_node(run, n, state, evaluator.reused_from(n.candidate));
    }
  }
  const ke::Evaluation& seed = p.measured.at(point_key(p.points[0], p.live));
  if (seed.status != ke::Status::ok) throw ke::Error(ke::ErrorCode::BadSpec, p.path + ": the seed is not ok");
  for (const auto& [key, e] : p.measured) p.best_speedup = std::max(p.best_speedup, ke::speedup(seed, e));
  for (const auto& [key, e] : p.measured) p.within += ke::speedup(seed, e) >= p.best_speedup / 1.05;
  return p;
}

// A policy and its options from "name@key=value@key=value" (keys: epsilon, tournament_size, exploration,
// islands, migration_interval, features (separated by '+'), bins_per_octave).
std::unique_ptr<ke::SelectionPolicy> policy_from(const std::string& text) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : text + "@") {
    if (c == '@') {
      parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  }
  ke::PolicyOptions o;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto eq = parts[i].find('=');
    const std::string key = parts[i].substr(0, eq), value = eq == std::string::npos ? "" : parts[i].substr(eq + 1);
    if (key == "epsilon") o.epsilon = std::stod(value);
    else if (key == "tournament_size") o.tournament_size = std::stoi(value);
    else if (key == "exploration") o.exploration = std::stod(value);
    else if (key == "islands") o.islands = std::stoi(value);
    else if (key == "migration_interval") o.migration_interval = std::stoi(value);
    else if (key == "bins_per_octave") o.bins_per_octave = std::stod(value);
    else if (key == "features") {
      std::string f;
      for (char c : value + "+") {
        if (c == '+') {
          if (!f.empty()) o.features.push_back(f);
          f.clear();
        } else {
          f += c;
        }
      }
    } else {
      throw ke::Error(ke::ErrorCode::BadUsage, "unknown policy option '" + key + "' in " + text);
    }
  }
  return ke::make_policy(parts[0], o);
}

// Evaluations a search needs to reach the target (the seed counts as the first).
int policy_search(const Problem& p, const std::string& policy, std::uint64_t seed, int jobs) {
  ke::EvolverOptions options;
  options.seed = seed;
  options.jobs = jobs;
  const int budget = static_cast<int>(p.points.size());
  ke::Evolver evolver(p.spec, std::make_shared<Replay>(p.measured, p.live), std::make_shared<ke::ParamMutator>(),
                      policy_from(policy),
                      ke::any_of({ke::target_speedup(p.best_speedup / 1.05), ke::max_evaluations(budget)}), options);
  // Count when the target was first reached, not when the loop noticed (jobs > 1 drains what is in flight).
  struct FirstHit final : ke::Observer {
    double target;
    std::int64_t at = -1;
    void on_node(const ke::Node& n, const ke::SearchState& s) override {
      if (at < 0 && n.speedup >= target) at = s.evaluations;
    }
  } hit;
  hit.target = p.best_speedup / 1.05;
  evolver.add_observer(&hit);
  evolver.run();
  return hit.at > 0 ? static_cast<int>(hit.at) : budget + 1;
}

int random_search(const Problem& p, std::uint64_t seed) {
  std::vector<std::size_t> order(p.points.size() - 1);
  std::iota(order.begin(), order.end(), 1);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  const ke::Evaluation& base = p.measured.at(point_key(p.points[0], p.live));
  if (ke::speedup(base, base) >= p.best_speedup / 1.05) return 1;
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (ke::speedup(base, p.measured.at(point_key(p.points[order[k]], p.live))) >= p.best_speedup / 1.05) return static_cast<int>(k) + 2;
  }
  return static_cast<int>(p.points.size()) + 1;
}

struct Stats {
  double mean = 0, median = 0, p90 = 0;
};

Stats stats(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  Stats s;
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.median = v[v.size() / 2];
  s.p90 = v[std::min(v.size() - 1, v.size() * 9 / 10)];
  return s;
}

std::vector<std::string> cpu_specs(const fs::path& root) {
  std::vector<std::string> out;
  if (!fs::exists(root)) return out;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const auto name = entry.path().filename();
    if (name != "spec.json" && name != "cpu.json") continue;
    try {
      const ke::Spec s = ke::load_spec(entry.path().string());
      if (ke::is_cpu_language(s.language) && !s.tunables.empty()) out.push_back(entry.path().string());
    } catch (const ke::Error&) {
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 200, jobs = 1, min_points = 1, large = 20;
  std::string cache_path = "search_quality.db";
  std::vector<std::string> policies = ke::policy_names();
  std::vector<std::string> specs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--repeats") {
      repeats = std::stoi(next());
    } else if (a == "--cache") {
      cache_path = next();
    } else if (a == "--min-points") {
      min_points = std::stoi(next());
    } else if (a == "--jobs") {
      jobs = std::stoi(next());
    } else if (a == "--policies") {
      policies.clear();
      std::string list = next() + ",", item;
      for (char c : list) {
        if (c == ',') {
          if (!item.empty()) policies.push_back(item);
          item.clear();
        } else {
          item += c;
        }
      }
    } else if (a == "-h" || a == "--help") {
      std::printf("search_quality [--repeats N] [--cache FILE] [--policies a,b@key=value,...] [--min-points N] [--jobs N] [SPEC ...]\n");
      return 0;
    } else {
      specs.push_back(a);
    }
  }
  if (specs.empty()) specs = cpu_specs(fs::path(KE_SOURCE_DIR) / "problems");
  if (specs.empty()) {
    std::fprintf(stderr, "no CPU problems found\n");
    return 2;
  }
  try {
    auto cache = std::make_shared<ke::Store>(cache_path);
    std::vector<Problem> problems;
    for (const auto& path : specs) {
      Problem p = sweep(path, cache);
      if (static_cast<int>(p.points.size()) >= min_points) problems.push_back(std::move(p));
    }

    std::map<std::string, std::vector<double>> ratios;        // policy -> mean / random mean, per problem
    std::map<std::string, std::vector<double>> large_ratios;  // the same, problems of `large` points or more
    std::printf("Evaluations to get within 5%% of the best point of an exhaustive sweep (the seed counts as one);\n"
                "%d searches per policy and problem, seeds 1..%d, parameter mutator, jobs %d.\n\n",
                repeats, repeats, jobs);
    for (const Problem& p : problems) {
      std::printf("%s (%s): %zu points, best %.2fx over the seed, %d within 5%%\n\n", p.spec.name.c_str(),
                  fs::relative(p.path, KE_SOURCE_DIR).c_str(), p.points.size(), p.best_speedup, p.within);
      std::printf("| policy | mean | median | p90 | mean vs random |\n|---|---:|---:|---:|---:|\n");
      std::vector<int> random_runs;
      for (int r = 1; r <= repeats; ++r) random_runs.push_back(random_search(p, static_cast<std::uint64_t>(r)));
      const Stats rs = stats(random_runs);
      std::printf("| random search | %.1f | %.0f | %.0f | 1.00 |\n", rs.mean, rs.median, rs.p90);
      for (const auto& policy : policies) {
        std::vector<int> runs;
        for (int r = 1; r <= repeats; ++r) runs.push_back(policy_search(p, policy, static_cast<std::uint64_t>(r), jobs));
        const Stats s = stats(runs);
        ratios[policy].push_back(s.mean / rs.mean);
        if (static_cast<int>(p.points.size()) >= large) large_ratios[policy].push_back(s.mean / rs.mean);
        std::printf("| %s | %.1f | %.0f | %.0f | %.2f |\n", policy.c_str(), s.mean, s.median, s.p90, s.mean / rs.mean);
      }
      std::printf("\n");
    }
    auto summary = [&](const std::map<std::string, std::vector<double>>& table, const std::string& title) {
      if (table.empty() || table.begin()->second.empty()) return std::string();
      std::printf("%s (%zu problems; geometric mean of mean vs random; lower is better):\n\n| policy | vs random |\n|---|---:|\n",
                  title.c_str(), table.begin()->second.size());
      std::string winner;
      double winner_ratio = 1e300;
      for (const auto& [policy, rs] : table) {
        double log_sum = 0;
        for (double r : rs) log_sum += std::log(r);
        const double g = std::exp(log_sum / static_cast<double>(rs.size()));
        std::printf("| %s | %.3f |\n", policy.c_str(), g);
        if (g < winner_ratio) {
          winner_ratio = g;
          winner = policy;
        }
      }
      std::printf("\nbest: %s (%.2f of random search's evaluations)\n\n", winner.c_str(), winner_ratio);
      return winner;
    };
    summary(ratios, "All problems");
    summary(large_ratios, "Problems of " + std::to_string(large) + " points or more");
  } catch (const ke::Error& e) {
    std::fprintf(stderr, "search_quality: %s\n", e.what());
    return e.exit_code();
  }
  return 0;
}
