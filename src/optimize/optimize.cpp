// The model optimizer (optimize.hpp): issue 30 runs in a Python process of its own (kOptimizePackage: the package
// src/optimize/ke_optimize, built into the library as the PyTorch bridge is, run as `python -m ke_optimize`), which
// runs the kernelevolve command on each region it evolves; its report, the manifest it writes, becomes an
// OptimizeReport.
#include "kernelevolve/optimize.hpp"

#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include <chrono>
#include <cstdlib>

#include "core/script_process.hpp"
#include "core/shipped_file.hpp"
#include "kernelevolve/distributed.hpp"
#include "kernelevolve/error.hpp"
#include "pytorch/python.hpp"

#if defined(KE_WITH_MPI)
#include <mpi.h>
#endif

namespace kernelevolve {

namespace optimize {
extern const PythonPackage kOptimizePackage;
}

namespace {

namespace fs = std::filesystem;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

std::string text_of(simdjson::dom::element e) {
  if (std::string_view s; e.get(s) == simdjson::SUCCESS) return std::string(s);
  return simdjson::minify(e);
}

double number(simdjson::dom::element e) {
  if (double d; e.get(d) == simdjson::SUCCESS) return d;
  if (std::int64_t i; e.get(i) == simdjson::SUCCESS) return static_cast<double>(i);
  return 0;
}

// A field that may be absent or null: its text, or empty.
std::string text_if(simdjson::dom::element e, const char* key) {
  simdjson::dom::element v;
  if (e[key].get(v) != simdjson::SUCCESS || v.is_null()) return "";
  return text_of(v);
}

double number_if(simdjson::dom::element e, const char* key) {
  simdjson::dom::element v;
  return e[key].get(v) == simdjson::SUCCESS ? number(v) : 0;
}

bool true_if(simdjson::dom::element e, const char* key) {
  bool b = false;
  return e[key].get(b) == simdjson::SUCCESS && b;
}

void parse_evolve(simdjson::dom::element g, OptimizedRegion& region) {
  simdjson::dom::element e;
  if (g["evolve"].get(e) == simdjson::SUCCESS && !e.is_null()) {
    region.evolve_status = text_if(e, "status");
    region.run = static_cast<long>(number_if(e, "run"));
    region.node = static_cast<long>(number_if(e, "node"));
    region.evolve_s = number_if(e, "seconds");
    simdjson::dom::element steps;
    if (e["steps_s"].get(steps) == simdjson::SUCCESS && steps.is_object()) {
      OptimizedRegion::Steps& s = region.steps_s;
      for (auto [key, into] : {std::pair<const char*, double*>{"describe", &s.describe},
                               {"capture", &s.capture},
                               {"start", &s.start},
                               {"node0", &s.node0},
                               {"baselines", &s.baselines},
                               {"search", &s.search}})
        *into = number_if(steps, key);
    }
    region.tokens = static_cast<long>(number_if(e, "tokens"));
    region.cost_usd = number_if(e, "cost_usd");
    region.best_us = number_if(e, "best_us");
    region.eager_us = number_if(e, "eager_us");
    region.compile_us = number_if(e, "compile_us");
    region.speedup_vs_eager = number_if(e, "speedup_vs_eager");
    region.speedup_vs_compile = number_if(e, "speedup_vs_compile");
  }
  region.put_back = true_if(g, "put_back");
  region.put_back_reason = text_if(g, "put_back_reason");
  simdjson::dom::element after;
  if (g["after"].get(after) == simdjson::SUCCESS && !after.is_null())
    region.after_speedup = number_if(after, "speedup");
}

// An A/B of the proof in words: its verdict, or why it was not measured.
std::string verdict_of(simdjson::dom::element ab) {
  return text_if(ab, "status") == "done" ? text_if(ab, "verdict") : "not measured: " + text_if(ab, "reason");
}

// Steps 5 and 6: where the optimized model is, and what the proof found.
void parse_put_back(simdjson::dom::element doc, OptimizeReport& r) {
  r.database = text_if(doc, "database");
  r.chart = text_if(doc, "chart");
  simdjson::dom::element p;
  if (doc["put_back"].get(p) != simdjson::SUCCESS || p.is_null()) return;
  if (text_if(p, "status") != "done") {
    r.put_back_note = text_if(p, "reason");
    return;
  }
  r.optimized_module = text_if(p, "module");
  simdjson::dom::element x;
  if (p["export"].get(x) == simdjson::SUCCESS)
    r.export_note =
        text_if(x, "status") == "done" ? "torch.export's program: " + text_if(x, "file") : text_if(x, "reason");
  if (p["parity"].get(x) == simdjson::SUCCESS) {
    r.parity = true_if(x, "ok");
    r.parity_max_error = number_if(x, "max_abs_error");
  }
  r.engaged = true_if(p, "engaged");
  simdjson::dom::object places;
  if (p["engagement"].get(places) == simdjson::SUCCESS) {
    for (auto [place, e] : places) {
      if (number_if(e, "launches") > 0) continue;
      const std::string why = text_if(e, "why");
      r.not_engaged.push_back(std::string(place) + ": " + (why.empty() ? "no call reached it" : why));
    }
  }
  if (p["ab_eager"].get(x) == simdjson::SUCCESS) {
    r.speedup_vs_eager = number_if(x, "speedup");
    r.ab_rounds = static_cast<long>(number_if(x, "rounds"));
    r.verdict_vs_eager = text_if(x, "verdict");
    simdjson::dom::array spread;
    if (x["spread"].get(spread) == simdjson::SUCCESS && spread.size() == 2) {
      r.speedup_spread[0] = number(spread.at(0));
      r.speedup_spread[1] = number(spread.at(1));
    }
  }
  if (p["ab_compile"].get(x) == simdjson::SUCCESS) r.verdict_vs_compile = verdict_of(x);
  if (p["ab_graphs"].get(x) == simdjson::SUCCESS && text_if(x, "status") != "unavailable")
    r.verdict_graphs = verdict_of(x);
  if (p["ab_compile_graphs"].get(x) == simdjson::SUCCESS) {
    r.verdict_compile_graphs = verdict_of(x);
    simdjson::dom::element with;
    if (x["with_operators"].get(with) == simdjson::SUCCESS)
      r.verdict_compile_graphs += "; with the operators compiled in: " + verdict_of(with);
  }
}

OptimizeReport parse_report(const std::string& text, const std::string& where) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc) != simdjson::SUCCESS) {
    // The script always reports, a refusal or its own failure included; a process that exits 0 having printed
    // nothing was ended by something else in it: the model's own code (os._exit at import or in its forward).
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)
      throw Error(ErrorCode::BadSpec,
                  where +
                      ": the optimizer's Python exited (status 0) without a report: something in its process "
                      "ended it first, as the model file's own code does where it calls os._exit() at import or "
                      "in its forward (a model file is imported, and its code run, in the optimizer's own Python)");
    throw Error(ErrorCode::Internal, where + ": the optimizer printed no JSON: " + text.substr(0, 600));
  }
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
  r.graph_operators = static_cast<long>(number(doc["graph"]["operators"]));
  const simdjson::dom::element profile = doc["profile"];
  r.model_time_us = number(profile["time_us"]);
  if (simdjson::dom::element busy; profile["gpu_busy"].get(busy) == simdjson::SUCCESS && !busy.is_null())
    r.gpu_busy = number(busy);
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
    parse_evolve(g, region);
    r.regions.push_back(std::move(region));
  }
  const simdjson::dom::element steps = doc["steps_s"];
  r.profile_s = number(steps["profile"]);
  r.cut_s = number(steps["cut"]);
  r.rank_s = number(steps["rank"]);
  r.evolve_s = number_if(steps, "evolve");
  r.put_back_s = number_if(steps, "put_back");
  r.prove_s = number_if(steps, "prove");
  for (simdjson::dom::element n : doc["notes"].get_array()) r.notes.push_back(text_of(n));
  r.next = text_if(doc, "next");
  parse_put_back(doc, r);
  return r;
}

// ", at atol A, rtol R" as the proof checked parity (the manifest's put_back.parity), or empty.
std::string parity_tolerance(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc, parity;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS || doc["put_back"]["parity"].get(parity) != simdjson::SUCCESS)
    return "";
  char text[96];
  std::snprintf(text, sizeof text, ", at atol %g, rtol %g", number_if(parity, "atol"), number_if(parity, "rtol"));
  return text;
}

// The dtypes the model computes in and the tolerance its parity is proved at (the manifest's precision), or empty.
std::string precision_text(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc, precision;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS || doc["precision"].get(precision) != simdjson::SUCCESS ||
      precision.is_null())
    return "";
  return text_if(precision, "text");
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

// Step 6's A/B against eager in words: what the kernels give (the optimized model over its control, the rebuilt graph
// with nothing put back: the headline), what the rebuild gives (the control over the model), and the two together.
// The figures are the manifest's (put_back.ab_eager), read again from the report's JSON.
std::string eager_ab_text(const OptimizeReport& r) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc, ab, kernels, rebuild;
  if (parser.parse(r.json).get(doc) != simdjson::SUCCESS || doc["put_back"]["ab_eager"].get(ab) != simdjson::SUCCESS ||
      ab["kernels"].get(kernels) != simdjson::SUCCESS || ab["rebuild"].get(rebuild) != simdjson::SUCCESS)
    return "   vs eager, " + std::to_string(r.ab_rounds) + " interleaved rounds: " + r.verdict_vs_eager + "\n";
  const bool put_back = true_if(kernels, "put_back");
  const std::string verdict_in_all = r.verdict_vs_eager.substr(0, r.verdict_vs_eager.find("; the kernels:"));
  return "   vs eager, " + std::to_string(r.ab_rounds) + " interleaved rounds of " +
         (put_back ? "the model, the rebuilt graph with nothing put back (the control) and the optimized model"
                   : "the model and the rebuilt graph (the optimized model: nothing put back)") +
         ", every order in turn:\n" +
         "     the kernels (the optimized model over the rebuilt graph): " + text_if(kernels, "verdict") + "\n" +
         "     the rebuild (the rebuilt graph, nothing put back, over the model): " + text_if(rebuild, "verdict") +
         "\n" + "     in all (the optimized model over the model): " + verdict_in_all + "\n";
}

}  // namespace

std::string default_optimize_dir(const std::string& model_path) {
  const fs::path model = fs::absolute(model_path);
  const std::string name = model.stem().string() + ".optimize";
  const fs::path beside = model.parent_path();
  if (::access(beside.c_str(), W_OK) == 0) return (beside / name).string();
  return (fs::current_path() / name).string();
}

namespace {

// The optimizer script's arguments for everything but the stage.
std::vector<std::string> script_args(const std::string& model_path, const OptimizeOptions& options,
                                     const std::string& where, const std::string& out) {
  std::vector<std::string> args = {"--model",       model_path,
                                   "--device",      options.device,
                                   "--out",         out,
                                   "--min-share",   fixed(options.min_share, 6),
                                   "--budget",      fixed(options.budget_s, 3),
                                   "--max-evals",   std::to_string(options.max_evals),
                                   "--total-evals", std::to_string(options.total_evals),
                                   "--timeout",     fixed(options.timeout_s, 0)};
  if (!options.evolve) args.emplace_back("--no-evolve");
  if (!options.evolve_device.empty()) args.insert(args.end(), {"--evolve-device", options.evolve_device});
  if (!options.autocast.empty()) {
    if (options.autocast != "bf16" && options.autocast != "fp16")
      throw Error(ErrorCode::BadUsage, where + ": --autocast " + options.autocast + ": bf16 or fp16");
    args.insert(args.end(), {"--autocast", options.autocast});
  }
  if (options.evolve) {
    std::string cli = options.cli;
    if (cli.empty()) {
      const ShippedFile found = find_shipped_file("kernelevolve", {".", "../bin"}, X_OK);
      if (found.path.empty())
        throw Error(ErrorCode::BadUsage, where + ": no kernelevolve command to evolve the regions with (looked at " +
                                             (found.looked.empty() ? std::string("nothing") : found.looked.front()) +
                                             "); set OptimizeOptions::cli");
      cli = found.path;
    }
    args.insert(args.end(), {"--cli", fs::absolute(cli).string()});
    // The Python package beside a build tree's library (build/python); an installed one is on Python's path.
    const ShippedFile package = find_shipped_file("kernelevolve/torch.py", {"python", "../python"}, R_OK);
    if (!package.path.empty())
      args.insert(args.end(), {"--package-dir", fs::path(package.path).parent_path().parent_path().string()});
    for (const std::string& option : options.run_options) args.push_back("--run-option=" + option);
    if (kSanitized)
      args.insert(args.end(), {"--no-put-back",
                               "this kernelevolve is built with AddressSanitizer, whose library no uninstrumented "
                               "Python can load: the operators cannot be put back here"});
  }
  return args;
}

// --devices's items, each cuda:all replaced by every CUDA device this kernelevolve finds, so that MPI's ranks take
// one GPU each (by their place on the host) rather than each spreading its runs over all. A device named twice stays
// twice: --devices cpu,cpu runs two regions at once on the CPU.
std::vector<std::string> device_list(const std::string& devices, const std::string& where) {
  std::size_t start = 0;
  while (start <= devices.size()) {
    const std::size_t comma = devices.find(',', start);
    const std::size_t end = comma == std::string::npos ? devices.size() : comma;
    const std::string item = devices.substr(start, end - start);
    const std::string index = item.rfind("cuda:", 0) == 0 ? item.substr(5) : std::string();
    const bool cuda_index =
        !index.empty() && std::all_of(index.begin(), index.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (item != "cpu" && item != "cuda" && item != "cuda:all" && !cuda_index)
      throw Error(ErrorCode::BadUsage,
                  where + ": --devices is a comma-separated list of cpu, cuda, cuda:N or cuda:all, not '" + devices +
                      "' (its item '" + item + "')");
    start = end + 1;
  }
  try {
    return expand_device_items(devices,
                               devices.find(":all") != std::string::npos ? list_devices() : std::vector<DeviceInfo>{});
  } catch (const Error& e) {
    throw Error(e.code(), where + ": --devices: " + e.what());
  }
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

std::string run_optimizer(const std::vector<std::string>& args, const OptimizeOptions& options) {
  // The runs of the regions take most of the time: the process gets the whole timeout and a minute to report.
  try {
    return run_script(pytorch::find_python(), optimize::kOptimizePackage, args, options.timeout_s + 60,
                      "the model optimizer");
  } catch (const Error& e) {
    // The script reports every failure of its own (sys.exit in the model's code too) as JSON and exits 0: a status
    // or a signal is something else in its process, the model's code first among them.
    const std::string what = e.what();
    if (e.code() != ErrorCode::Internal || (what.find(") exited with status ") == std::string::npos &&
                                            what.find(") was killed by signal ") == std::string::npos))
      throw;
    const std::size_t colon = what.find(":\n");
    throw Error(e.code(), what.substr(0, colon) +
                              " before it reported: the model file's own code runs in that process (imported, then "
                              "called), and ends it where it calls os._exit() or crashes" +
                              (colon == std::string::npos ? std::string() : what.substr(colon)));
  }
}

#if defined(KE_WITH_MPI)
// Rank 0's text on every rank.
void broadcast(std::string& text) {
  unsigned long size = text.size();
  MPI_Bcast(&size, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
  text.resize(size);
  MPI_Bcast(text.data(), static_cast<int>(size), MPI_CHAR, 0, MPI_COMM_WORLD);
}

// This rank's place among the ranks of its host (Open MPI says it; else the world rank).
int local_rank(int rank) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  }
  return rank;
}

// The three stages over the ranks (driver.py's header): steps 1-3 on rank 0; step 4 on every rank, each region
// claimed by one; steps 5-6 on rank 0. A stage's failure on rank 0 is every rank's: said and thrown on each, after
// the collective that follows it, so that no rank waits on one that left.
OptimizeReport optimize_mpi(const std::string& model_path, const OptimizeOptions& options,
                            const std::vector<std::string>& devices, const std::string& where, const std::string& out) {
  const int rank = mpi_init(nullptr, nullptr);
  // Every rank finalizes however it leaves, so that mpirun sees each end as it should.
  struct Finalize {
    Finalize() = default;
    Finalize(const Finalize&) = delete;
    Finalize& operator=(const Finalize&) = delete;
    ~Finalize() { mpi_finalize(); }
  } finalize;
  std::vector<std::string> args = script_args(model_path, options, where, out);
  if (!options.evolve) {  // steps 1-3 are rank 0's alone
    OptimizeReport r = rank == 0 ? parse_report(run_optimizer(args, options), where) : OptimizeReport{};
    r.mpi_rank = rank;
    return r;
  }
  std::string failure, code = "0";
  std::string session = "s" + std::to_string(::getpid()) + "x" +
                        std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  if (rank == 0) {
    std::vector<std::string> first = args;
    first.emplace_back("--no-evolve");
    try {
      parse_report(run_optimizer(first, options), where);
    } catch (const Error& e) {
      failure = e.what();
      code = std::to_string(static_cast<int>(e.code()));
    }
  }
  broadcast(failure);
  broadcast(code);
  broadcast(session);
  if (!failure.empty())
    throw Error(static_cast<ErrorCode>(std::stoi(code)), rank == 0 ? failure : where + ": rank 0: " + failure);
  std::vector<std::string> mine = args;
  mine.insert(mine.end(), {"--stage", "evolve", "--session", session, "--rank", std::to_string(rank)});
  if (!devices.empty()) {
    mine.insert(mine.end(), {"--evolve-device", devices[static_cast<std::size_t>(local_rank(rank)) % devices.size()]});
  }
  const auto start = std::chrono::steady_clock::now();
  std::string part, part_failure;
  try {
    part = run_optimizer(mine, options);
  } catch (const Error& e) {
    part_failure = e.what();  // its regions are said failed by rank 0: claimed, with no result
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double evolve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  long evolved = 0;
  if (!part.empty()) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::int64_t count = 0;
    std::string_view why;
    if (parser.parse(part).get(doc) != simdjson::SUCCESS) {
      part_failure = "its part of step 4 printed no JSON: " + part.substr(0, 300);
    } else if (doc["error"].get(why) == simdjson::SUCCESS) {
      part_failure = std::string(why);  // its regions' results are in their files still: rank 0 collects them
    } else if (doc["evolved"].get(count) == simdjson::SUCCESS) {
      evolved = static_cast<long>(count);
    }
  }
  if (rank != 0) {
    if (!part_failure.empty())
      throw Error(ErrorCode::Internal, where + ": rank " + std::to_string(rank) + ": " + part_failure);
    OptimizeReport r;
    r.mpi_rank = rank;
    r.mpi_regions = evolved;
    r.json = part;
    r.out_dir = out;
    return r;
  }
  if (!part_failure.empty())
    std::fprintf(stderr, "%s: rank 0's step 4 failed: %s\n", where.c_str(), part_failure.c_str());
  std::vector<std::string> last = args;
  last.insert(last.end(), {"--stage", "finish", "--session", session, "--evolve-seconds", fixed(evolve_s, 3)});
  OptimizeReport r = parse_report(run_optimizer(last, options), where);
  r.mpi_regions = evolved;
  return r;
}
#endif

}  // namespace

OptimizeReport optimize_model(const std::string& model_path, const OptimizeOptions& options) {
  const std::string where = model_path + ": optimize";
  if (options.device != "cpu" && options.device.rfind("cuda", 0) != 0)
    throw Error(ErrorCode::BadUsage, where + ": --device is cpu or cuda[:N], not " + options.device);
  if (!(options.min_share >= 0 && options.min_share < 1))
    throw Error(ErrorCode::BadUsage,
                where + ": --min-share is a fraction in [0, 1), not " + fixed(options.min_share, 4));
  if (options.max_evals < 1 || options.total_evals < 0)
    throw Error(ErrorCode::BadUsage, where + ": --max-evals is at least 1 and --total-evals at least 0");
  // Expanded here, once, so that the ranks and the optimizer's threads divide the same devices.
  const std::vector<std::string> device_ids =
      options.devices.empty() ? std::vector<std::string>{} : device_list(options.devices, where);
  const std::string devices = joined(device_ids);
  const std::string out = options.out_dir.empty() ? default_optimize_dir(model_path) : options.out_dir;
  if (options.mpi) {
#if defined(KE_WITH_MPI)
    return optimize_mpi(model_path, options, device_ids, where, fs::absolute(out).string());
#else
    throw Error(ErrorCode::BadUsage, where + ": --mpi: this kernelevolve is built without MPI (KE_WITH_MPI)");
#endif
  }
  std::vector<std::string> args = script_args(model_path, options, where, out);
  if (!devices.empty()) args.insert(args.end(), {"--devices", devices});
  return parse_report(run_optimizer(args, options), where);
}

std::string format_report(const OptimizeReport& r) {
  std::ostringstream o;
  o << "kernelevolve optimize " << r.model << " on " << r.device << " (torch " << r.torch_version << ")\n";
  o << "1. profile  " << fixed(r.profile_s, 2) << " s   the forward takes " << fixed(r.model_time_us, 1)
    << " us (median)";
  if (r.gpu_busy >= 0)
    o << ", its kernels " << fixed(100 * r.gpu_busy, 0) << "% of it"
      << (r.gpu_busy < 0.8 ? " (the GPU waits on the CPU's launches the rest: a faster kernel pays less than its "
                             "time, under CUDA graphs more)"
                           : "");
  o << "; top operators by self time, per forward:\n";
  char line[512];
  for (std::size_t i = 0; i < r.operators.size() && i < 8; ++i) {
    const ProfiledOperator& op = r.operators[i];
    std::snprintf(line, sizeof line, "   %6.1f%%  %s x%ld  %s\n", 100 * op.share, op.name.c_str(), op.calls,
                  op.shapes.c_str());
    o << line;
  }
  o << "2. cut      " << fixed(r.cut_s, 2) << " s   " << r.graph_operators << " operators captured by " << r.capture
    << "; " << r.regions.size() << " distinct regions written to " << r.out_dir << "\n";
  if (const std::string precision = precision_text(r.json); !precision.empty()) o << "   dtypes: " << precision << "\n";
  o << "3. rank     " << fixed(r.rank_s, 2) << " s   each region's file timed here, interleaved with the model over "
    << r.rank_rounds << " rounds: the regions take " << fixed(r.regions_time_us, 1) << " us a forward, the model "
    << fixed(r.ranked_model_time_us, 1) << " us in the same rounds\n";
  const bool evolved = r.next.empty();
  if (evolved) {
    long runs = 0, resumed = 0, put = 0, tokens = 0;
    double cost = 0;
    for (const OptimizedRegion& g : r.regions) {
      runs += g.evolve_status == "evolved" || g.evolve_status == "failed";
      resumed += g.evolve_status == "resumed";
      put += g.put_back;
      if (g.evolve_status == "evolved") {
        tokens += g.tokens;
        cost += g.cost_usd;
      }
    }
    o << "4. evolve   " << fixed(r.evolve_s, 2) << " s   " << runs << " region(s) run, " << resumed << " found in "
      << r.database << " from an earlier optimize (not evolved again); model calls: " << tokens << " tokens, $"
      << fixed(cost, 4) << "\n";
    o << "5. put back " << fixed(r.put_back_s, 2) << " s   " << put << " region(s), only those whose best beat eager "
      << "and torch.compile on the region, and their own code in the model's process: "
      << (r.optimized_module.empty() ? r.put_back_note : r.optimized_module) << "\n";
    if (!r.optimized_module.empty()) {
      o << "6. prove    " << fixed(r.prove_s, 2)
        << " s   parity with eager on fresh inputs: " << (r.parity ? "yes" : "NO") << " (max error "
        << r.parity_max_error << parity_tolerance(r.json) << "); "
        << (put == 0 ? std::string("no operator put back to engage")
                     : std::string("every operator engaged: ") + (r.engaged ? "yes" : "NO"))
        << "\n";
      for (const std::string& place : r.not_engaged) o << "   not engaged: " << place << "\n";
      o << eager_ab_text(r);
      o << "   vs torch.compile: " << r.verdict_vs_compile << "\n";
      if (!r.verdict_graphs.empty()) o << "   under CUDA graphs, vs eager: " << r.verdict_graphs << "\n";
      if (!r.verdict_compile_graphs.empty())
        o << "   under CUDA graphs, vs torch.compile (reduce-overhead): " << r.verdict_compile_graphs << "\n";
      o << "   torch.export: " << r.export_note << "\n";
    }
  }
  o << "\n";
  std::size_t ops_width = 3;
  std::vector<std::string> ops;
  for (const OptimizedRegion& g : r.regions) {
    ops.push_back(ops_text(g.ops));
    ops_width = std::max(ops_width, ops.back().size());
  }
  auto ratio = [](double x) { return x > 0 ? fixed(x, 2) + "x" : std::string("-"); };
  std::snprintf(line, sizeof line, "%-6s %-16s %-*s %5s %9s %7s", "region", "hash", static_cast<int>(ops_width), "ops",
                "count", "time_us", "share");
  o << line;
  if (evolved) {
    std::snprintf(line, sizeof line, " %9s %9s %8s %8s %8s", "best_us", "eager_us", "vs_eager", "vs_comp", "in_model");
    o << line;
  }
  o << "  status\n";
  for (std::size_t i = 0; i < r.regions.size(); ++i) {
    const OptimizedRegion& g = r.regions[i];
    std::snprintf(line, sizeof line, "%-6s %-16s %-*s %5ld %9.1f %6.1f%%", g.name.c_str(), g.hash.c_str(),
                  static_cast<int>(ops_width), ops[i].c_str(), g.count, g.time_us, 100 * g.share);
    o << line;
    if (!evolved) {
      o << "  " << (g.kept ? "kept: " : "skipped: ") << g.reason << "\n";
      continue;
    }
    std::snprintf(line, sizeof line, " %9s %9s %8s %8s %8s", g.best_us > 0 ? fixed(g.best_us, 1).c_str() : "-",
                  g.eager_us > 0 ? fixed(g.eager_us, 1).c_str() : "-", ratio(g.speedup_vs_eager).c_str(),
                  ratio(g.speedup_vs_compile).c_str(), ratio(g.after_speedup).c_str());
    o << line << "  "
      << (g.put_back ? "put back: "
          : g.kept   ? "not put back: "
                     : "skipped: ")
      << (g.kept ? g.put_back_reason : g.reason);
    if (g.evolve_status == "evolved" || g.evolve_status == "resumed")
      o << " [run " << g.run << ", node " << g.node
        << (g.evolve_status == "resumed" ? ", from an earlier optimize" : "") << ", " << fixed(g.evolve_s, 1) << " s]";
    o << "\n";
    const OptimizedRegion::Steps& s = g.steps_s;
    if (g.evolve_status == "evolved" && s.describe + s.capture + s.start + s.node0 + s.baselines + s.search > 0) {
      // The run's fixed cost before its search, step by step (issue 52: at most 10 s a region is the target).
      o << "       its run: describe " << fixed(s.describe, 1) << " s, capture " << fixed(s.capture, 1) << " s, start "
        << fixed(s.start, 1) << " s, node 0 " << fixed(s.node0, 1) << " s, baselines " << fixed(s.baselines, 1)
        << " s, search " << fixed(s.search, 1) << " s\n";
    }
  }
  for (const std::string& n : r.notes) o << "note: " << n << "\n";
  o << "\nmanifest: " << r.manifest << "\n";
  if (!r.chart.empty()) o << "time by region, before and after: " << r.chart << "\n";
  if (!r.optimized_module.empty())
    o << "the optimized model: import " << r.optimized_module << " and call load(); operators(model) counts launches\n";
  if (!r.next.empty()) o << "next: " << r.next << "\n";
  return o.str();
}

}  // namespace kernelevolve
