// Warm start across problems: reads other problems' runs from stores and picks the best kernel of each run
// of the same operator that would compile against this problem's signature.
#include "kernelevolve/warm_start.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_set>

#include "core/tunables.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/store.hpp"

namespace kernelevolve {

namespace {

Language kernel_language(const Spec& spec) { return spec.seed.language.value_or(spec.language); }

// Whether a kernel written for `stored` compiles and is called the same way here: the same language, entry
// and argument types in order (names may differ: they are the kernel's own).
bool same_arguments(const Spec& spec, const Spec& stored) {
  if (kernel_language(spec) != kernel_language(stored) || spec.entry != stored.entry) return false;
  if (spec.params.size() != stored.params.size()) return false;
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    const Param& a = spec.params[i];
    const Param& b = stored.params[i];
    if (a.is_buffer() != b.is_buffer() || argument_type(a) != argument_type(b)) return false;
  }
  return true;
}

bool same_signature(const Spec& spec, const Spec& stored) {
  if (spec.language != stored.language || spec.params.size() != stored.params.size()) return false;
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    const Param& a = spec.params[i];
    const Param& b = stored.params[i];
    if (a.name != b.name || a.role != b.role || a.dtype != b.dtype) return false;
  }
  return true;
}

// The kernel's tunables as this problem has them: those this spec (or the source itself) declares and the
// source reads, at the value it was measured with; a declared one it reads but had no value for, at its first.
Bindings tunables_here(const Spec& spec, const Candidate& kernel) {
  const auto declared = declared_tunables(kernel.source);
  auto first_value = [&](const std::string& name) -> std::optional<std::int64_t> {
    if (const auto it = spec.tunables.find(name); it != spec.tunables.end() && !it->second.empty())
      return it->second.front();
    if (const auto it = declared.find(name); it != declared.end() && !it->second.empty()) return it->second.front();
    return std::nullopt;
  };
  Bindings out;
  for (const auto& [name, value] : kernel.tunables) {
    if (first_value(name) && tunable_is_live(spec, kernel.source, kernel.language, name)) out[name] = value;
  }
  std::vector<std::string> names;
  for (const auto& [name, values] : spec.tunables) names.push_back(name);
  for (const auto& [name, values] : declared) names.push_back(name);
  for (const std::string& name : names) {
    if (out.count(name) || !tunable_is_live(spec, kernel.source, kernel.language, name)) continue;
    if (const auto v = first_value(name)) out[name] = *v;
  }
  return out;
}

}  // namespace

std::string warm_match(const Spec& spec, const Spec& stored) {
  if (!same_arguments(spec, stored)) return "";
  if (!spec.name.empty() && spec.name == stored.name) return "name";
  if (!spec.family.empty() && spec.family == stored.family) return "family";
  if (same_signature(spec, stored)) return "signature";
  return "";
}

std::vector<WarmKernel> find_warm_kernels(const std::vector<std::string>& stores, const Spec& spec,
                                          std::size_t max_kernels) {
  std::vector<WarmKernel> found;
  for (const std::string& path : stores) {
    std::unique_ptr<Store> store;
    try {
      store = std::make_unique<Store>(path, Store::Mode::read_only);
    } catch (const Error& e) {
      throw Error(ErrorCode::BadUsage, std::string("warm start: ") + e.what());
    }
    for (const RunInfo& info : store->runs()) {
      Spec stored;
      try {
        stored = parse_spec(info.spec_json, info.spec_path);
      } catch (const Error&) {
        continue;  // a spec this build cannot read (written by another version, say): nothing to take from it
      }
      const std::string match = warm_match(spec, stored);
      if (match.empty()) continue;
      const Checkpoint run = store->load(info.id);
      std::optional<NodeId> best = info.best ? info.best : run.graph.best();
      if (best && (*best < 0 || static_cast<std::size_t>(*best) >= run.graph.size())) best = run.graph.best();
      if (!best) continue;
      const Node& node = run.graph.node(*best);
      if (node.evaluation.status != Status::ok) continue;
      WarmKernel warm;
      warm.candidate = node.candidate;
      warm.candidate.tunables = tunables_here(spec, node.candidate);
      warm.store = path;
      warm.run = info.id;
      warm.node = node.id;
      warm.spec_name = info.spec_name;
      warm.device = info.device.id + (info.device.name.empty() ? "" : " " + info.device.name);
      warm.speedup = node.speedup;
      warm.match = match;
      found.push_back(std::move(warm));
    }
  }
  // Best first; among equals, the order the stores and runs were given in.
  std::stable_sort(found.begin(), found.end(),
                   [](const WarmKernel& a, const WarmKernel& b) { return a.speedup > b.speedup; });
  // Distinct sources (the same source at other tunables is the parameter search's to find), and never this
  // problem's seed as the run starts it.
  std::string seed_key;
  if (!spec.seed.source.empty()) {
    const Language language = kernel_language(spec);
    seed_key =
        Candidate{spec.seed.source, language, live_tunables(spec, spec.seed.source, language, spec.seed_tunables())}
            .key();
  }
  std::unordered_set<std::string> sources;
  std::vector<WarmKernel> kept;
  for (WarmKernel& warm : found) {
    if (kept.size() >= max_kernels) break;
    if (warm.candidate.key() == seed_key || !sources.insert(warm.candidate.source).second) continue;
    kept.push_back(std::move(warm));
  }
  return kept;
}

}  // namespace kernelevolve
