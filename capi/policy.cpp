// The C API: selection policies by name, with their options as name/value pairs.
#include "internal.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace capi;

namespace {

// The options each policy reads; a policy unknown here (a newer one) may take any of them.
const std::map<std::string, std::vector<std::string>>& policy_option_names() {
  static const std::map<std::string, std::vector<std::string>> names = {
      {"greedy", {}},
      {"random", {}},
      {"epsilon-greedy", {"epsilon"}},
      {"tournament", {"tournament_size"}},
      {"ucb", {"exploration"}},
      {"islands", {"islands", "migration_interval", "features", "bins_per_octave"}},
      {"map-elites", {"islands", "migration_interval", "features", "bins_per_octave"}},
  };
  return names;
}

double parse_number(const std::string& option, const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(value)) {
    fail(KE_ERROR_INVALID_ARGUMENT, "policy option '" + option + "': '" + text + "' is not a number");
  }
  return value;
}

int parse_int(const std::string& option, const std::string& text) {
  const double value = parse_number(option, text);
  if (value != std::floor(value) || value < -2147483648.0 || value > 2147483647.0) {
    fail(KE_ERROR_INVALID_ARGUMENT, "policy option '" + option + "': '" + text + "' is not an integer");
  }
  return static_cast<int>(value);
}

void set_policy_option(ke::PolicyOptions& o, const std::string& policy, std::string name, const std::string& value) {
  for (char& ch : name) {
    if (ch == '-') ch = '_';  // the command-line spelling works too
  }
  if (name == "ucb_c") name = "exploration";
  const auto& table = policy_option_names();
  if (const auto it = table.find(policy); it != table.end()) {
    if (std::find(it->second.begin(), it->second.end(), name) == it->second.end()) {
      std::string known;
      for (const auto& n : it->second) known += (known.empty() ? "" : ", ") + n;
      fail(KE_ERROR_INVALID_ARGUMENT, "the policy '" + policy + "' has no option '" + name + "' (it has " +
                                          (known.empty() ? std::string("none") : known) + ")");
    }
  }
  if (name == "epsilon") {
    o.epsilon = parse_number(name, value);
  } else if (name == "tournament_size") {
    o.tournament_size = parse_int(name, value);
  } else if (name == "exploration") {
    o.exploration = parse_number(name, value);
  } else if (name == "islands") {
    o.islands = parse_int(name, value);
  } else if (name == "migration_interval") {
    o.migration_interval = parse_int(name, value);
  } else if (name == "bins_per_octave") {
    o.bins_per_octave = parse_number(name, value);
  } else if (name == "features") {
    o.features.clear();
    std::string item;
    std::istringstream in(value);
    while (std::getline(in, item, ',')) {
      item.erase(0, item.find_first_not_of(" \t"));
      item.erase(item.find_last_not_of(" \t") + 1);
      if (!item.empty()) o.features.push_back(item);
    }
  } else {
    fail(KE_ERROR_INVALID_ARGUMENT, "no policy has an option '" + name + "'");
  }
}

}  // namespace

KE_API ke_status ke_evolver_set_policy(ke_evolver* evolver, const char* name, const char* const* option_names,
                                       const char* const* option_values, size_t count) {
  return guard(__func__, [&] {
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    const std::string policy = need_nonempty(name, "name");
    need_array(option_names, count, "option_names");
    need_array(option_values, count, "option_values");
    ke::PolicyOptions options;
    for (std::size_t i = 0; i < count; ++i) {
      set_policy_option(options, policy, need_nonempty(option_names[i], "option_names[i]"),
                        need_string(option_values[i], "option_values[i]"));
    }
    ke::make_policy(policy, options);  // an unknown name or a bad value fails here, naming the known ones
    evolver->policy = policy;
    evolver->policy_options = std::move(options);
  });
}

KE_API ke_status ke_policy_names(const char* const** names, size_t* count) {
  return guard(__func__, [&] {
    need_out(names, "names");
    need_out(count, "count");
    // Made once, on first use, and kept for the life of the process (the header calls it static).
    static const auto storage = [] {
      auto s = std::make_unique<std::pair<std::vector<std::string>, std::vector<const char*>>>();
      s->first = ke::policy_names();
      for (const std::string& n : s->first) s->second.push_back(n.c_str());
      return s;
    }();
    *names = storage->second.data();
    *count = storage->second.size();
  });
}
