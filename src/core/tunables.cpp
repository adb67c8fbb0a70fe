// The tunables a kernel declares and those it reads (core/tunables.hpp).
#include "core/tunables.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "core/text_lines.hpp"
#include "kernelevolve/candidate.hpp"

namespace kernelevolve {

namespace {

using text::split_lines;
using text::starts_with;
using text::trim;

}  // namespace

std::map<std::string, std::vector<std::int64_t>> declared_tunables(const std::string& source) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const std::string& raw : split_lines(source)) {
    const std::string line = trim(raw);
    // `// ke:tunable` in C, CUDA and HIP; `# ke:tunable` in a Triton (Python) source.
    std::string marker = "// ke:tunable ";
    if (!starts_with(line, marker)) marker = "# ke:tunable ";
    if (!starts_with(line, marker)) continue;
    std::istringstream in(line.substr(marker.size()));
    std::string name;
    in >> name;
    const bool identifier =
        !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
        std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
    if (!identifier) continue;
    std::vector<std::int64_t> values;
    std::int64_t v;
    while (in >> v) values.push_back(v);
    if (!values.empty() && in.eof()) out[name] = values;
  }
  return out;
}

namespace {

bool word_at(const std::string& text, std::size_t at, std::size_t length) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  return (at == 0 || !ident(text[at - 1])) && (at + length >= text.size() || !ident(text[at + length]));
}

// Whether the spec's launch rule, constraints or cost read the name: such a tunable is live whatever the source.
bool spec_reads(const Spec& spec, const std::string& name) {
  auto reads = [&](const Expr& e) {
    const auto names = e.names();
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  if (spec.launch) {
    for (int d = 0; d < 3; ++d)
      if (reads(spec.launch->grid[d]) || reads(spec.launch->block[d])) return true;
    if (reads(spec.launch->shared_bytes)) return true;
  }
  for (const Expr& c : spec.constraints)
    if (reads(c)) return true;
  return (spec.cost_flops && reads(*spec.cost_flops)) || (spec.cost_bytes && reads(*spec.cost_bytes));
}

}  // namespace

bool tunable_is_live(const Spec& spec, const std::string& source, Language language, const std::string& name) {
  if (language == Language::triton && (name == "num_warps" || name == "num_stages")) return true;
  if (spec_reads(spec, name)) return true;
  const bool python = language == Language::triton;
  bool guarded = false;  // inside `#ifndef NAME`: a `#define NAME` there is the default a -D overrides
  for (const std::string& raw : split_lines(without_comments(source, language))) {
    const std::string line = trim(raw);
    if (!python && starts_with(line, "#")) {
      // The default's guard, `#ifndef NAME` / `#define NAME value`, defines it: it does not read it.
      std::istringstream in(line.substr(1));
      std::string directive, first;
      in >> directive >> first;
      if (directive == "ifndef" && first == name) {
        guarded = true;
        continue;
      }
      // An unguarded `#define NAME` fixes the value whatever the search passes (`#undef NAME` first or not): the
      // tunable is dead, and stepping it would measure the same kernel again (a model's rewrite that stopped
      // declaring MR but kept `#define MR 4` cost an evaluation, issue 53). An `#undef` alone is hygiene at the end
      // of a file, after the value was used: no sign of death.
      if (directive == "define" && !guarded && first == name) return false;
      if (directive == "define" && first == name) continue;
      if (directive == "endif") guarded = false;
    }
    for (std::size_t at = line.find(name); at != std::string::npos; at = line.find(name, at + 1)) {
      if (word_at(line, at, name.size())) return true;
    }
  }
  return false;
}

Bindings live_tunables(const Spec& spec, const std::string& source, Language language, const Bindings& from) {
  Bindings out;
  const auto declared = declared_tunables(source);
  for (const auto& [name, value] : from) {
    // A tunable neither the spec nor the source declares has no values left to search: its declaration went with
    // the rewrite, so whatever the source still does with the name, the search cannot vary it.
    const bool known = spec.tunables.count(name) || declared.count(name) || spec_reads(spec, name) ||
                       (language == Language::triton && (name == "num_warps" || name == "num_stages"));
    if (known && tunable_is_live(spec, source, language, name)) out[name] = value;
  }
  // A declared tunable keeps the parent's value while the declaration still lists it (an edit that left the
  // declaration alone keeps what the parameter search found), else starts at its first value.
  for (const auto& [name, values] : declared) {
    if (!tunable_is_live(spec, source, language, name)) continue;  // declared, but unread or fixed by a #define
    const auto kept = out.find(name);
    if (kept == out.end() || std::find(values.begin(), values.end(), kept->second) == values.end())
      out[name] = values.front();
  }
  return out;
}

}  // namespace kernelevolve
