// Search quality: how many evaluations each selection policy needs to get within 5% of the best point of
// a problem's tunable space, against random search, on recorded sweeps (any device) and on the CPU problems.
//
// 1. Sweeps. A recorded sweep file (`kernelevolve sweep`, bench/sweeps/*.tsv) holds every valid point of a
//    space measured on some device, and the spec itself: it is replayed here, on any machine. The CPU
//    problems are swept here, for real (in-process, on this CPU), and kept in a store (--cache), so a second
//    invocation measures nothing.
// 2. Replay: each policy searches the same space many times (--repeats seeds) against those recorded
//    times, with the parameter mutator, exactly as `kernelevolve run` would but without the hardware:
//    fast, and fair, since every policy sees the same numbers. A search stops when its best is within
//    5% of the sweep's best (speedup >= best / 1.05); the evaluations it took (the seed included) are
//    its score. Random search draws the points in a uniformly random order after the seed.
//
//    search_quality [--repeats N] [--cache FILE] [--policies a,b@key=value,...] [--min-points N] [--large N]
//                   [--jobs N] [--sweep FILE.tsv ...] [--sweeps-only] [SPEC ...]
//
// With no SPEC, every CPU spec under problems/ (spec.json or cpu.json), besides the sweeps. Summaries:
// every space, the recorded sweeps of GPUs, and the CPU spaces of --large (20) points or more.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <kernelevolve/kernelevolve.hpp>
#include <kernelevolve/store.hpp>
#include <kernelevolve/sweep.hpp>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace ke = kernelevolve;
namespace fs = std::filesystem;

namespace {

using Point = std::vector<std::int64_t>;

// A point's values over the space's axes (the live tunables); the seed's node binds every tunable,
// the parameter search's children only the live ones, and both are the same point.
Point point_of(const ke::Bindings& tunables, const std::vector<std::string>& axes) {
  Point p;
  for (const auto& name : axes) {
    const auto it = tunables.find(name);
    p.push_back(it == tunables.end() ? std::numeric_limits<std::int64_t>::min() : it->second);
  }
  return p;
}

struct Problem {
  std::string name;    // the spec's name
  std::string origin;  // the spec file, or the sweep file
  bool gpu = false;    // measured on a GPU (a recorded sweep of another device class than cpu)
  std::string device;
  ke::Spec spec;
  std::vector<std::string> axes;  // the tunables the seed reads
  std::vector<ke::Bindings> points;
  std::map<Point, ke::Evaluation> measured;
  double best_speedup = 0;
  int within = 0;  // points within 5% of the best
};

// Answers from the sweep's measurements.
class Replay final : public ke::FitnessEvaluator {
 public:
  explicit Replay(const Problem& p) : p_(p) {}
  ke::Evaluation evaluate(const ke::Candidate& c, std::uint64_t) override {
    const auto it = p_.measured.find(point_of(c.tunables, p_.axes));
    if (it != p_.measured.end()) return it->second;
    ke::Evaluation e;
    e.status = ke::Status::invalid;
    e.message = "not in the sweep";
    return e;
  }
  ke::DeviceInfo device_info() override { return {"replay", "replay", "sweep", 1, 0, 0, 0, 0, {}}; }

 private:
  const Problem& p_;
};

void finish(Problem& p) {
  const ke::Evaluation& seed = p.measured.at(point_of(p.points[0], p.axes));
  if (seed.status != ke::Status::ok) throw ke::Error(ke::ErrorCode::BadSpec, p.origin + ": the seed is not ok");
  for (const auto& [key, e] : p.measured) p.best_speedup = std::max(p.best_speedup, ke::speedup(seed, e));
  for (const auto& [key, e] : p.measured) p.within += ke::speedup(seed, e) >= p.best_speedup / 1.05;
}

// A CPU problem, swept here (or from the cache).
Problem sweep_here(const std::string& path, const std::shared_ptr<ke::Store>& cache) {
  Problem p;
  p.origin = path;
  p.spec = ke::load_spec(path);
  p.name = p.spec.name;
  const ke::Language language = p.spec.seed.language.value_or(p.spec.language);
  p.points = ke::tunable_space(p.spec);
  for (const auto& [name, value] : p.points.front()) p.axes.push_back(name);
  auto local = std::make_shared<ke::LocalEvaluator>(p.spec, ke::open_device("cpu"));
  ke::ReusingEvaluator evaluator(local, cache, p.spec);
  p.device = ke::FitnessEvaluator::device_class(evaluator.device_info());
  std::fprintf(stderr, "sweeping %s: %zu points", p.spec.name.c_str(), p.points.size());
  std::vector<ke::Node> nodes;
  for (std::size_t i = 0; i < p.points.size(); ++i) {
    ke::Node n;
    n.id = static_cast<ke::NodeId>(i);
    if (i > 0) n.parents = {0};
    n.mutator = i == 0 ? "seed" : "sweep";
    n.candidate = {p.spec.seed.source, language, p.points[i]};
    n.evaluation = evaluator.evaluate(n.candidate, 1000 + i);
    p.measured[point_of(p.points[i], p.axes)] = n.evaluation;
    nodes.push_back(n);
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
  finish(p);
  return p;
}

// A recorded sweep; none (and why, on stderr) when it does not cover its space.
std::optional<Problem> from_sweep_file(const std::string& path) {
  const ke::Sweep sweep = ke::read_sweep(path);
  Problem p;
  p.origin = path;
  p.spec = ke::sweep_spec(sweep);
  p.name = p.spec.name;
  p.device = sweep.device;
  p.gpu = sweep.device.rfind("cpu", 0) != 0;
  p.points = ke::tunable_space(p.spec);
  p.axes = sweep.tunables;
  for (const ke::SweepPoint& s : sweep.points) {
    ke::Evaluation e;
    e.status = s.status;
    e.message = s.note;
    e.device = sweep.device;
    for (double us : s.median_us) e.timings.push_back({us, us, us, 0, 1});
    p.measured[point_of(s.tunables, p.axes)] = std::move(e);
  }
  std::size_t missing = 0;
  for (const auto& point : p.points) missing += p.measured.count(point_of(point, p.axes)) == 0;
  if (missing > 0) {
    std::fprintf(stderr, "skipping %s: %zu of its %zu points are not measured yet (resume the sweep)\n", path.c_str(),
                 missing, p.points.size());
    return std::nullopt;
  }
  finish(p);
  return p;
}

// A policy and its options from "name@key=value@key=value" (keys: the PolicyOptions fields, as named in
// policy_option below; features separated by '+').
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
    else if (key == "model_ensemble") o.model_ensemble = std::stoi(value);
    else if (key == "model_rounds") o.model_rounds = std::stoi(value);
    else if (key == "model_depth") o.model_depth = std::stoi(value);
    else if (key == "model_eta") o.model_eta = std::stod(value);
    else if (key == "model_pair_features") o.model_pair_features = value != "0";
    else if (key == "model_min_points") o.model_min_points = std::stoi(value);
    else if (key == "model_exploration") o.model_exploration = std::stod(value);
    else if (key == "model_acquisition") o.model_acquisition = value;
    else if (key == "model_warmup") o.model_warmup = value;
    else if (key == "prior") {  // a sweep of the same problem on another device (transfer)
      const ke::Sweep prior = ke::read_sweep(value);
      o.prior = ke::sweep_prior(prior, ke::sweep_spec(prior));
    } else if (key == "prior_weight") o.prior_weight = std::stod(value);
    else if (key == "model_failure_penalty") o.model_failure_penalty = std::stod(value);
    else if (key == "model_refit_divisor") o.model_refit_divisor = std::stoi(value);
    else if (key == "model_fit_slice") o.model_fit_slice = std::stod(value);
    else if (key == "model_grid_limit") o.model_grid_limit = std::stod(value);
    else if (key == "model_neighbourhoods") o.model_neighbourhoods = std::stoi(value);
    else if (key == "model_restarts") o.model_restarts = std::stoi(value);
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
  options.confirm_rounds = 0;  // a replay answers the same again: nothing to confirm
  const int budget = static_cast<int>(p.points.size());
  ke::Evolver evolver(p.spec, std::make_shared<Replay>(p), std::make_shared<ke::ParamMutator>(), policy_from(policy),
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
  const ke::Evaluation& base = p.measured.at(point_of(p.points[0], p.axes));
  if (ke::speedup(base, base) >= p.best_speedup / 1.05) return 1;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const ke::Evaluation& e = p.measured.at(point_of(p.points[order[k]], p.axes));
    if (ke::speedup(base, e) >= p.best_speedup / 1.05) return static_cast<int>(k) + 2;
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

std::string shown(const std::string& path) {
  std::error_code error;
  const fs::path relative = fs::relative(path, KE_SOURCE_DIR, error);
  return error || relative.empty() || relative.string().rfind("..", 0) == 0 ? path : relative.string();
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 200, jobs = 1, min_points = 1, large = 20;
  bool sweeps_only = false;
  std::string cache_path = "search_quality.db";
  std::vector<std::string> policies = ke::policy_names();
  std::vector<std::string> specs, sweep_files;
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
    } else if (a == "--large") {
      large = std::stoi(next());
    } else if (a == "--jobs") {
      jobs = std::stoi(next());
    } else if (a == "--sweep") {
      sweep_files.push_back(next());
    } else if (a == "--sweeps-only") {
      sweeps_only = true;
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
      std::printf(
          "search_quality [--repeats N] [--cache FILE] [--policies a,b@key=value,...] [--min-points N] [--large N]\n"
          "               [--jobs N] [--sweep FILE.tsv ...] [--sweeps-only] [SPEC ...]\n");
      return 0;
    } else if (a.size() > 4 && a.substr(a.size() - 4) == ".tsv") {
      sweep_files.push_back(a);  // --sweep bench/sweeps/*.tsv: the shell gives the rest as plain arguments
    } else {
      specs.push_back(a);
    }
  }
  if (specs.empty() && !sweeps_only) specs = cpu_specs(fs::path(KE_SOURCE_DIR) / "problems");
  if (specs.empty() && sweep_files.empty()) {
    std::fprintf(stderr, "no CPU problems found and no sweep given\n");
    return 2;
  }
  try {
    std::vector<Problem> problems;
    for (const auto& path : sweep_files) {
      if (auto p = from_sweep_file(path); p && static_cast<int>(p->points.size()) >= min_points)
        problems.push_back(std::move(*p));
    }
    if (!specs.empty()) {
      auto cache = std::make_shared<ke::Store>(cache_path);
      for (const auto& path : specs) {
        Problem p = sweep_here(path, cache);
        if (static_cast<int>(p.points.size()) >= min_points) problems.push_back(std::move(p));
      }
    }

    // policy -> mean / random mean, per problem of each group
    std::map<std::string, std::map<std::string, std::vector<double>>> groups;
    const std::string all = "Every space", gpu = "Recorded GPU sweeps",
                      cpu_large = "CPU spaces of " + std::to_string(large) + " points or more";
    std::printf(
        "Evaluations to get within 5%% of the best point of an exhaustive sweep (the seed counts as one);\n"
        "%d searches per policy and space, seeds 1..%d, parameter mutator, jobs %d.\n\n",
        repeats, repeats, jobs);
    for (const Problem& p : problems) {
      std::printf("%s (%s, %s): %zu points, best %.2fx over the seed, %d within 5%%\n\n", p.name.c_str(),
                  shown(p.origin).c_str(), p.device.c_str(), p.points.size(), p.best_speedup, p.within);
      std::printf("| policy | mean | median | p90 | mean vs random |\n|---|---:|---:|---:|---:|\n");
      std::vector<int> random_runs;
      for (int r = 1; r <= repeats; ++r) random_runs.push_back(random_search(p, static_cast<std::uint64_t>(r)));
      const Stats rs = stats(random_runs);
      std::printf("| random search | %.1f | %.0f | %.0f | 1.00 |\n", rs.mean, rs.median, rs.p90);
      for (const auto& policy : policies) {
        std::vector<int> runs;
        for (int r = 1; r <= repeats; ++r)
          runs.push_back(policy_search(p, policy, static_cast<std::uint64_t>(r), jobs));
        const Stats s = stats(runs);
        const double ratio = s.mean / rs.mean;
        groups[all][policy].push_back(ratio);
        if (p.gpu) groups[gpu][policy].push_back(ratio);
        else if (static_cast<int>(p.points.size()) >= large) groups[cpu_large][policy].push_back(ratio);
        std::printf("| %s | %.1f | %.0f | %.0f | %.2f |\n", policy.c_str(), s.mean, s.median, s.p90, ratio);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    auto summary = [&](const std::string& title) {
      const auto it = groups.find(title);
      if (it == groups.end() || it->second.empty() || it->second.begin()->second.empty()) return;
      const auto& table = it->second;
      std::printf(
          "%s (%zu spaces; geometric mean of mean vs random; lower is better):\n\n| policy | vs random |\n|---|---:|\n",
          title.c_str(), table.begin()->second.size());
      std::string winner;
      double winner_ratio = 1e300;
      for (const auto& policy : policies) {
        const auto& rs = table.at(policy);
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
    };
    summary(all);
    summary(gpu);
    summary(cpu_large);
  } catch (const ke::Error& e) {
    std::fprintf(stderr, "search_quality: %s\n", e.what());
    return e.exit_code();
  }
  return 0;
}
