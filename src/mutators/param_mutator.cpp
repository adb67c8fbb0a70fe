// Parameter search over the spec's tunables: neighbour moves with random restarts, constrained,
// never proposing a point the graph already holds.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/tunables.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/mutator.hpp"

namespace kernelevolve {

namespace {

// Index of `value` in `values`, or of the nearest one (a model's kernel may carry values off the list).
std::size_t nearest_index(const std::vector<std::int64_t>& values, std::int64_t value) {
  std::size_t best = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::llabs(values[i] - value) < std::llabs(values[best] - value)) best = i;
  }
  return best;
}

Candidate with_tunables(const Candidate& parent, Bindings tunables) {
  Candidate child = parent;
  child.tunables = std::move(tunables);
  return child;
}

std::string describe_change(const Bindings& from, const Bindings& to) {
  std::string out;
  for (const auto& [name, value] : to) {
    const auto it = from.find(name);
    if (it != from.end() && it->second == value) continue;
    if (!out.empty()) out += ", ";
    out += name + " " + (it == from.end() ? std::string("-") : std::to_string(it->second)) + " -> " +
           std::to_string(value);
  }
  return out.empty() ? "no change" : out;
}

}  // namespace

std::vector<Bindings> tunable_space(const Spec& spec, std::size_t limit) {
  const Language language = spec.seed.language.value_or(spec.language);
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> axes;
  for (const auto& [name, values] : spec.tunables) {
    if (tunable_is_live(spec, spec.seed.source, language, name)) axes.emplace_back(name, values);
  }
  double total = 1;
  for (const auto& [name, values] : axes) total *= static_cast<double>(values.size());
  if (total > static_cast<double>(limit)) {
    throw Error(ErrorCode::BadUsage, spec.name + ": the tunable space has " +
                                         std::to_string(static_cast<long long>(total)) + " points, more than " +
                                         std::to_string(limit) + " to enumerate");
  }
  const Bindings all = spec.seed_tunables();
  Bindings seed_point;
  for (const auto& [name, values] : axes) seed_point[name] = all.at(name);
  std::vector<Bindings> points{seed_point};
  for (std::size_t index = 0; index < static_cast<std::size_t>(total); ++index) {
    Bindings point;
    std::size_t rest = index;
    for (const auto& [name, values] : axes) {
      point[name] = values[rest % values.size()];
      rest /= values.size();
    }
    if (point != seed_point && spec.satisfies_constraints(point)) points.push_back(std::move(point));
  }
  return points;
}

Mutation ParamMutator::mutate(const MutationContext& ctx) {
  Mutation m;
  const Node& parent = ctx.graph.node(ctx.parents.at(0));
  // The spec's tunables, and any the parent's source declares for itself (a model's new structure).
  std::map<std::string, std::vector<std::int64_t>> tunables = ctx.spec.tunables;
  for (auto& [name, values] : declared_tunables(parent.candidate.source)) tunables.emplace(name, values);
  if (tunables.empty()) {
    m.exhausted = true;
    m.error = "the spec has no tunables";
    return m;
  }
  // Only live ones: a point that differs in a tunable the parent does not read is the parent again.
  for (auto it = tunables.begin(); it != tunables.end();) {
    const Candidate& p = parent.candidate;
    it = tunable_is_live(ctx.spec, p.source, p.language, it->first) ? std::next(it) : tunables.erase(it);
  }
  if (tunables.empty()) {
    m.exhausted = true;
    m.error = "the parent reads none of its tunables";
    return m;
  }
  std::vector<std::string> names;
  for (const auto& [name, values] : tunables) names.push_back(name);

  Bindings base;
  for (const auto& [name, values] : tunables) {
    const auto it = parent.candidate.tunables.find(name);
    base[name] = it != parent.candidate.tunables.end() ? it->second : values.front();
  }

  auto acceptable = [&](const Bindings& point, std::string& why) {
    Candidate c = with_tunables(parent.candidate, point);
    if (ctx.graph.contains(c)) return false;
    if (!ctx.spec.satisfies_constraints(point)) return false;
    why = describe_change(parent.candidate.tunables, point);
    return true;
  };

  std::string why;
  // A policy that models the space chooses the point; the checks stay here.
  if (ctx.policy) {
    if (auto proposed = ctx.policy->propose_point(PointQuery{ctx.spec, ctx.graph, parent.id, tunables, ctx.rng})) {
      Bindings point = base;
      for (const auto& [name, value] : proposed->tunables) {
        if (point.count(name)) point[name] = value;
      }
      if (acceptable(point, why)) {
        m.child = with_tunables(parent.candidate, point);
        m.note = proposed->note + ": " + why;
        return m;
      }
    }
  }
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int attempts = 64;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    Bindings point = base;
    std::string kind;
    if (unit(ctx.rng) < restart_probability_) {
      kind = "restart";
      for (const auto& [name, values] : tunables) {
        point[name] = values[std::uniform_int_distribution<std::size_t>(0, values.size() - 1)(ctx.rng)];
      }
    } else {
      kind = "neighbour";
      // Mostly one tunable at a time; sometimes two, to step across a constraint's edge.
      const int moves = unit(ctx.rng) < 0.7 ? 1 : 2;
      for (int k = 0; k < moves; ++k) {
        const std::string& name = names[std::uniform_int_distribution<std::size_t>(0, names.size() - 1)(ctx.rng)];
        const auto& values = tunables.at(name);
        const auto at = static_cast<std::int64_t>(nearest_index(values, point[name]));
        const std::int64_t step = (unit(ctx.rng) < 0.8 ? 1 : 2) * (unit(ctx.rng) < 0.5 ? -1 : 1);
        const std::int64_t to = std::clamp<std::int64_t>(at + step, 0, static_cast<std::int64_t>(values.size()) - 1);
        point[name] = values[static_cast<std::size_t>(to)];
      }
    }
    if (acceptable(point, why)) {
      m.child = with_tunables(parent.candidate, point);
      m.note = kind + ": " + why;
      return m;
    }
  }

  // The neighbourhood is spent: walk the whole space from a random offset for any unmeasured point.
  double space = 1;
  for (const auto& [name, values] : tunables) space *= static_cast<double>(values.size());
  if (space > 1e6) {
    m.error = "no unmeasured point found near the parent";
    return m;
  }
  const auto total = static_cast<std::uint64_t>(space);
  const std::uint64_t offset = std::uniform_int_distribution<std::uint64_t>(0, total - 1)(ctx.rng);
  for (std::uint64_t k = 0; k < total; ++k) {
    std::uint64_t index = (offset + k) % total;
    Bindings point = base;
    for (const auto& [name, values] : tunables) {
      point[name] = values[index % values.size()];
      index /= values.size();
    }
    if (acceptable(point, why)) {
      m.child = with_tunables(parent.candidate, point);
      m.note = "sweep: " + why;
      return m;
    }
  }
  m.exhausted = true;
  m.error = "every point of the tunable space has been measured";
  return m;
}

}  // namespace kernelevolve
