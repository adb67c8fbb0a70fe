// Hardware counters from Nsight Compute's CSV. ncu is a separate program that starts the process it
// profiles, so collection is a worker run under it (worker_evaluator.cpp); this file knows ncu's
// command line and reads its output.
#include "kernelevolve/counters.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include "kernelevolve/error.hpp"

namespace kernelevolve {

namespace {

// One CSV record: fields quoted with "..." may hold commas (ncu writes 1,234.5) and doubled quotes.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(std::move(field));
      field.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  out.push_back(std::move(field));
  return out;
}

std::optional<double> number(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), ','), text.end());
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

bool executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

constexpr const char* kStallPrefix = "smsp__average_warps_issue_stalled_";
constexpr const char* kStallSuffix = "_per_issue_active.ratio";

}  // namespace

std::string find_nsight_compute() {
  if (const char* env = std::getenv("KE_NCU"); env && *env) return executable(env) ? env : "";
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      if (!dir.empty() && executable(dir + "/ncu")) return dir + "/ncu";
    }
  }
  return executable("/usr/local/cuda/bin/ncu") ? "/usr/local/cuda/bin/ncu" : "";
}

std::vector<std::string> nsight_compute_arguments(const std::vector<std::string>& kernels, int launches,
                                                  const std::string& log_path) {
  if (kernels.empty() || launches < 1)
    throw Error(ErrorCode::BadUsage, "nsight_compute_arguments: no kernel named, or fewer than one launch");
  // ^(a|b)$ of the distinct names. Kernel names are C identifiers, so escaping is for a name that is not:
  // it still matches only itself.
  std::vector<std::string> distinct;
  for (const std::string& k : kernels) {
    if (k.empty()) throw Error(ErrorCode::BadUsage, "nsight_compute_arguments: an empty kernel name");
    if (std::find(distinct.begin(), distinct.end(), k) == distinct.end()) distinct.push_back(k);
  }
  std::string names;
  for (const std::string& k : distinct) {
    if (!names.empty()) names += '|';
    for (const char c : k) {
      if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) names += '\\';
      names += c;
    }
  }
  // The sections hold the counters read below; dram__bytes is asked for by name (it is in no section of
  // these). Profiling starts off: the worker turns it on while it times the first workload, whose first
  // call launches the candidate's kernels (a program's steps in its plan's order), and only the first
  // `launches` launches of those names are profiled.
  return {"--profile-from-start",
          "off",
          "--csv",
          "--page",
          "raw",
          "--print-units",
          "base",
          "--section",
          "SpeedOfLight",
          "--section",
          "Occupancy",
          "--section",
          "WarpStateStats",
          "--metrics",
          "dram__bytes.sum.per_second",
          "--kernel-name-base",
          "function",
          "-k",
          distinct.size() == 1 ? "regex:^" + names + "$" : "regex:^(" + names + ")$",
          "-c",
          std::to_string(launches),
          "--target-processes",
          "all",
          "--log-file",
          log_path};
}

namespace {

// ncu's table: the header and each kernel row (the units row, which has no ID, skipped), and the errors
// ncu wrote beside it.
struct NsightTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string problems;
};

NsightTable nsight_table(const std::string& csv) {
  NsightTable t;
  std::stringstream lines(csv);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("==", 0) == 0) {  // ncu's own messages: ==PROF==, ==ERROR==, ==WARNING==
      if (line.rfind("==ERROR==", 0) == 0 || line.find("ERR_NVGPUCTRPERM") != std::string::npos) {
        t.problems += (t.problems.empty() ? "" : "; ") + line;
      }
      continue;
    }
    if (line.empty()) continue;
    auto fields = csv_fields(line);
    if (t.header.empty()) {
      if (std::find(fields.begin(), fields.end(), "Kernel Name") != fields.end()) t.header = std::move(fields);
      continue;
    }
    if (!fields.empty() && !fields[0].empty() && number(fields[0])) t.rows.push_back(std::move(fields));
  }
  return t;
}

std::string no_launch(const NsightTable& t) {
  return "Nsight Compute profiled no launch of the kernel" + (t.problems.empty() ? std::string() : ": " + t.problems);
}

constexpr const char* kNoCounters = "Nsight Compute's output held none of the counters asked for";

// One row's kernel name and the counters kept (counters.hpp names them); no counters where the row holds
// none of the metrics.
KernelCounters row_counters(const std::vector<std::string>& header, const std::vector<std::string>& values) {
  KernelCounters k;
  std::map<std::string, double> metrics;
  for (std::size_t i = 0; i < header.size() && i < values.size(); ++i) {
    if (header[i] == "Kernel Name") k.kernel = values[i];
    if (const auto v = number(values[i])) metrics[header[i]] = *v;
  }
  auto keep = [&](const char* metric, const char* name, double scale) {
    if (const auto it = metrics.find(metric); it != metrics.end()) {
      k.counters[name] = static_cast<std::int64_t>(std::llround(it->second * scale));
    }
  };
  keep("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "hw_dram_pct", 1);
  keep("dram__bytes.sum.per_second", "hw_dram_gbps", 1e-9);
  keep("sm__throughput.avg.pct_of_peak_sustained_elapsed", "hw_sm_pct", 1);
  keep("sm__warps_active.avg.pct_of_peak_sustained_active", "hw_achieved_occupancy_pct", 1);
  keep("gpu__time_duration.sum", "hw_duration_ns", 1);
  // The warp states: each the average number of warps in it per issue; their shares of the sum.
  std::vector<std::pair<double, std::string>> states;
  double total = 0;
  const std::string prefix = kStallPrefix, suffix = kStallSuffix;
  for (const auto& [name, value] : metrics) {
    if (name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      total += value;
      const std::string reason = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
      if (reason != "selected") states.emplace_back(value, reason);
    }
  }
  std::sort(states.begin(), states.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (std::size_t i = 0; i < states.size() && i < static_cast<std::size_t>(kStallReasons) && total > 0; ++i) {
    const auto pct = static_cast<std::int64_t>(std::llround(100 * states[i].first / total));
    if (pct > 0) k.counters["hw_stall_" + states[i].second + "_pct"] = pct;
  }
  return k;
}

}  // namespace

CounterResult counters_from_nsight_csv(const std::string& csv) {
  CounterResult r;
  const NsightTable t = nsight_table(csv);
  if (t.rows.empty()) {
    r.error = no_launch(t);
    return r;
  }
  r.counters = row_counters(t.header, t.rows[0]).counters;
  if (r.counters.empty()) r.error = kNoCounters;
  return r;
}

KernelCountersResult kernel_counters_from_nsight_csv(const std::string& csv) {
  KernelCountersResult r;
  const NsightTable t = nsight_table(csv);
  if (t.rows.empty()) {
    r.error = no_launch(t);
    return r;
  }
  for (const auto& row : t.rows) {
    r.kernels.push_back(row_counters(t.header, row));
    if (r.kernels.back().counters.empty() && r.error.empty()) {
      r.error = std::string(kNoCounters) + " for launch " + std::to_string(r.kernels.size()) + " (kernel " +
                r.kernels.back().kernel + ")";
    }
  }
  return r;
}

std::string counters_text(const std::map<std::string, std::int64_t>& c) {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  auto get = [&](const char* name) -> std::optional<std::int64_t> {
    const auto it = c.find(name);
    return it == c.end() ? std::nullopt : std::optional<std::int64_t>(it->second);
  };
  if (const auto dram = get("hw_dram_pct")) {
    std::string part = "DRAM " + std::to_string(*dram) + "% of peak";
    if (const auto gbps = get("hw_dram_gbps")) part += " (" + std::to_string(*gbps) + " GB/s)";
    add(part);
  }
  if (const auto sm = get("hw_sm_pct")) add("SM " + std::to_string(*sm) + "% of peak");
  if (const auto occ = get("hw_achieved_occupancy_pct")) add("achieved occupancy " + std::to_string(*occ) + "%");
  std::vector<std::pair<std::int64_t, std::string>> stalls;
  for (const auto& [name, value] : c) {
    if (name.rfind("hw_stall_", 0) == 0 && name.size() > 13 && name.compare(name.size() - 4, 4, "_pct") == 0) {
      stalls.emplace_back(value, name.substr(9, name.size() - 13));
    }
  }
  std::sort(stalls.begin(), stalls.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (!stalls.empty()) {
    std::string part = "warps stalled on";
    for (std::size_t i = 0; i < stalls.size(); ++i) {
      part += std::string(i ? "," : "") + " " + stalls[i].second + " " + std::to_string(stalls[i].first) + "%";
    }
    add(part + " of the time");
  }
  return out.empty() ? out : "counters: " + out;
}

}  // namespace kernelevolve
