// The model optimizer (optimize.hpp): steps 1-3 of issue 30 run in a Python process of their own (kOptimizeScript:
// src/optimize/capture.py, cut.py, profile.py and driver.py, built into the library as the PyTorch bridge is); its
// report, the manifest it writes, becomes an OptimizeReport.
#include "kernelevolve/optimize.hpp"

#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "core/script_process.hpp"
#include "kernelevolve/error.hpp"
#include "pytorch/python.hpp"

namespace kernelevolve {

namespace optimize {
extern const char* const kOptimizeScript;
}

namespace {

namespace fs = std::filesystem;

std::string text_of(simdjson::dom::element e) {
  if (std::string_view s; e.get(s) == simdjson::SUCCESS) return std::string(s);
  return simdjson::minify(e);
}

double number(simdjson::dom::element e) {
  if (double d; e.get(d) == simdjson::SUCCESS) return d;
  if (std::int64_t i; e.get(i) == simdjson::SUCCESS) return static_cast<double>(i);
  return 0;
}

OptimizeReport parse_report(const std::string& text, const std::string& where) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc) != simdjson::SUCCESS)
    throw Error(ErrorCode::Internal, where + ": the optimizer printed no JSON: " + text.substr(0, 600));
  if (std::string_view why; doc["error"].get(why) == simdjson::SUCCESS) {
    std::string_view kind;
    if (doc["kind"].get(kind) != simdjson::SUCCESS) kind = "";
    const ErrorCode code = kind == "torch" || kind == "device" ? ErrorCode::DeviceUnavailable
                           : kind == "internal"                ? ErrorCode::Internal
                                                               : ErrorCode::BadSpec;
    throw Error(code, where + ": " + std::string(why));
  }
  OptimizeReport r;
  r.json = text;
  r.model = text_of(doc["model"]);
  r.device = text_of(doc["device"]);
  r.torch_version = text_of(doc["torch"]);
  r.capture = text_of(doc["capture"]);
  r.out_dir = text_of(doc["out_dir"]);
  r.manifest = text_of(doc["manifest"]);
  r.next = text_of(doc["next"]);
  r.graph_operators = static_cast<long>(number(doc["graph"]["operators"]));
  const simdjson::dom::element profile = doc["profile"];
  r.model_time_us = number(profile["time_us"]);
  for (simdjson::dom::element op : profile["operators"].get_array()) {
    r.operators.push_back({text_of(op["operator"]), text_of(op["input_shapes"]), static_cast<long>(number(op["calls"])),
                           number(op["self_us"]), number(op["share"])});
  }
  r.regions_time_us = number(doc["rank"]["regions_time_us"]);
  r.ranked_model_time_us = number(doc["rank"]["model_time_us"]);
  r.rank_rounds = static_cast<long>(number(doc["rank"]["rounds"]));
  for (simdjson::dom::element g : doc["regions"].get_array()) {
    OptimizedRegion region;
    region.name = text_of(g["name"]);
    region.hash = text_of(g["hash"]);
    region.file = (fs::path(r.out_dir) / text_of(g["file"])).string();
    for (simdjson::dom::element op : g["ops"].get_array()) region.ops.push_back(text_of(op));
    region.count = static_cast<long>(number(g["count"]));
    region.time_us = number(g["time_us"]);
    region.share = number(g["share"]);
    region.kept = g["kept"].get_bool().value();
    region.reason = text_of(g["reason"]);
    r.regions.push_back(std::move(region));
  }
  const simdjson::dom::element steps = doc["steps_s"];
  r.profile_s = number(steps["profile"]);
  r.cut_s = number(steps["cut"]);
  r.rank_s = number(steps["rank"]);
  for (simdjson::dom::element n : doc["notes"].get_array()) r.notes.push_back(text_of(n));
  return r;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The operators of a region, views and other no-ops left out unless nothing else is there, with repeats counted.
std::string ops_text(const std::vector<std::string>& ops) {
  static const std::vector<std::string> kQuiet = {"view",    "reshape", "permute",    "transpose", "t",
                                                  "flatten", "getitem", "contiguous", "unsqueeze", "squeeze",
                                                  "expand",  "dropout", "detach"};
  std::string out;
  std::size_t quiet = 0;
  for (const std::string& op : ops) {
    if (std::find(kQuiet.begin(), kQuiet.end(), op) != kQuiet.end()) {
      ++quiet;
      continue;
    }
    out += (out.empty() ? "" : " ") + op;
  }
  if (out.empty()) return "views: " + std::to_string(quiet);
  return quiet ? out + " (+" + std::to_string(quiet) + " views)" : out;
}

}  // namespace

std::string default_optimize_dir(const std::string& model_path) {
  const fs::path model = fs::absolute(model_path);
  const std::string name = model.stem().string() + ".optimize";
  const fs::path beside = model.parent_path();
  if (::access(beside.c_str(), W_OK) == 0) return (beside / name).string();
  return (fs::current_path() / name).string();
}

OptimizeReport optimize_model(const std::string& model_path, const OptimizeOptions& options) {
  const std::string where = model_path + ": optimize";
  if (options.device != "cpu" && options.device.rfind("cuda", 0) != 0)
    throw Error(ErrorCode::BadUsage, where + ": --device is cpu or cuda[:N], not " + options.device);
  if (!(options.min_share >= 0 && options.min_share < 1))
    throw Error(ErrorCode::BadUsage,
                where + ": --min-share is a fraction in [0, 1), not " + fixed(options.min_share, 4));
  const std::string out = options.out_dir.empty() ? default_optimize_dir(model_path) : options.out_dir;
  const std::string text = run_script(pytorch::find_python(), optimize::kOptimizeScript,
                                      {"--model", model_path, "--device", options.device, "--out", out, "--min-share",
                                       fixed(options.min_share, 6), "--budget", fixed(options.budget_s, 3)},
                                      options.timeout_s, "the model optimizer");
  return parse_report(text, where);
}

std::string format_report(const OptimizeReport& r) {
  std::ostringstream o;
  o << "kernelevolve optimize " << r.model << " on " << r.device << " (torch " << r.torch_version << ")\n";
  o << "1. profile  " << fixed(r.profile_s, 2) << " s   the forward takes " << fixed(r.model_time_us, 1)
    << " us (median); top operators by self time, per forward:\n";
  char line[512];
  for (std::size_t i = 0; i < r.operators.size() && i < 8; ++i) {
    const ProfiledOperator& op = r.operators[i];
    std::snprintf(line, sizeof line, "   %6.1f%%  %s x%ld  %s\n", 100 * op.share, op.name.c_str(), op.calls,
                  op.shapes.c_str());
    o << line;
  }
  o << "2. cut      " << fixed(r.cut_s, 2) << " s   " << r.graph_operators << " operators captured by " << r.capture
    << "; " << r.regions.size() << " distinct regions written to " << r.out_dir << "\n";
  o << "3. rank     " << fixed(r.rank_s, 2) << " s   each region's file timed here, interleaved with the model over "
    << r.rank_rounds << " rounds: the regions take " << fixed(r.regions_time_us, 1) << " us a forward, the model "
    << fixed(r.ranked_model_time_us, 1) << " us in the same rounds\n\n";
  std::size_t ops_width = 3;
  std::vector<std::string> ops;
  for (const OptimizedRegion& g : r.regions) {
    ops.push_back(ops_text(g.ops));
    ops_width = std::max(ops_width, ops.back().size());
  }
  std::snprintf(line, sizeof line, "%-6s %-16s %-*s %5s %9s %7s  %s\n", "region", "hash", static_cast<int>(ops_width),
                "ops", "count", "time_us", "share", "status");
  o << line;
  for (std::size_t i = 0; i < r.regions.size(); ++i) {
    const OptimizedRegion& g = r.regions[i];
    std::snprintf(line, sizeof line, "%-6s %-16s %-*s %5ld %9.1f %6.1f%%  ", g.name.c_str(), g.hash.c_str(),
                  static_cast<int>(ops_width), ops[i].c_str(), g.count, g.time_us, 100 * g.share);
    o << line << (g.kept ? "kept: " : "skipped: ") << g.reason << "\n";
  }
  for (const std::string& n : r.notes) o << "note: " << n << "\n";
  o << "\nmanifest: " << r.manifest << "\nnext: " << r.next << "\n";
  return o.str();
}

}  // namespace kernelevolve
