// kernelevolve: the command-line tool. Evolves a kernel from a spec file, checks a spec, lists devices.
// Exit codes: 0 done; 2 bad usage or spec; 3 device not available; 1 anything else.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <kernelevolve/kernelevolve.hpp>
#include <string>
#include <vector>

namespace po = boost::program_options;
namespace ke = kernelevolve;

namespace {

const char* kUsage =
    "usage:\n"
    "  kernelevolve run SPEC [--device cpu|cuda[:N]|hip[:N]] [--max-evals N] [--max-time SEC]\n"
    "                        [--target-speedup X] [--policy NAME] [--mutator param|command] [--command CMD]\n"
    "                        [--jobs N] [--timeout SEC] [--in-process] [--seed N] [--json]\n"
    "  kernelevolve check SPEC [--device ...] [--json]   evaluate the reference and the seed only\n"
    "  kernelevolve devices [--json]                     the devices found, with their properties\n";

// A progress line rewritten in place on a terminal; on anything else, a line per improvement.
class Progress final : public ke::Observer {
 public:
  Progress(std::int64_t max_evals, bool quiet) : max_evals_(max_evals), quiet_(quiet), tty_(isatty(2) != 0) {}

  void on_start(const ke::Spec& spec, const ke::DeviceInfo& device) override {
    if (!quiet_) std::fprintf(stderr, "evolving %s on %s (%s)\n", spec.name.c_str(), device.id.c_str(), device.name.c_str());
  }

  void on_node(const ke::Node& node, const ke::SearchState& state) override {
    if (node.evaluation.status != ke::Status::ok) failed_ += 1;
    const bool improved = node.speedup > best_;
    if (improved) best_ = node.speedup;
    if (quiet_) return;
    if (tty_) {
      const int width = 30;
      const double frac = max_evals_ > 0 ? std::min(1.0, double(state.evaluations) / double(max_evals_)) : 0.0;
      const int filled = static_cast<int>(frac * width);
      const double rate = state.elapsed_s > 0 ? state.evaluations / state.elapsed_s : 0;
      const double eta = rate > 0 && max_evals_ > 0 ? (max_evals_ - state.evaluations) / rate : 0;
      std::fprintf(stderr, "\r[%.*s%*s] %lld/%lld  best %.2fx  failed %lld  %.1f/s  eta %.0fs \x1b[K",
                   filled, "##############################", width - filled, "", (long long)state.evaluations,
                   (long long)max_evals_, best_, (long long)failed_, rate, eta);
    } else if (improved || node.id == 0) {
      std::fprintf(stderr, "node %lld: %s %.2fx (%s) after %lld evaluations, %.1f s\n", (long long)node.id,
                   ke::to_string(node.evaluation.status), node.speedup, node.note.c_str(),
                   (long long)state.evaluations, state.elapsed_s);
    }
  }

  void on_finish(const ke::RunResult&, const ke::SearchGraph&) override {
    if (tty_ && !quiet_) std::fprintf(stderr, "\n");
  }

 private:
  std::int64_t max_evals_;
  bool quiet_;
  bool tty_;
  double best_ = 0;
  std::int64_t failed_ = 0;
};

std::string timing_lock_path(const std::string& device) {
  std::string name = "kernelevolve-timing-" + device + ".lock";
  for (char& ch : name) {
    if (ch == ':' || ch == '/') ch = '_';
  }
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/" + name;
}

struct Common {
  std::string spec_path;
  std::string device = "cpu";
  bool json = false;
};

void add_common(po::options_description& d, Common& c) {
  d.add_options()("device", po::value(&c.device)->default_value("cpu"), "cpu, cuda[:N] or hip[:N]")(
      "json", po::bool_switch(&c.json), "print one JSON object on stdout at the end");
}

po::variables_map parse(const std::vector<std::string>& args, po::options_description& d, Common& c) {
  d.add_options()("help,h", "this help")("spec", po::value(&c.spec_path), "the spec file");
  po::positional_options_description pos;
  pos.add("spec", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
  po::notify(vm);
  return vm;
}

int cmd_devices(const std::vector<std::string>& args) {
  po::options_description d("devices");
  Common c;
  d.add_options()("json", po::bool_switch(&c.json), "JSON on stdout");
  po::variables_map vm = parse(args, d, c);
  if (vm.count("help")) {
    std::cout << kUsage << d;
    return 0;
  }
  const auto devices = ke::list_devices();
  if (c.json) {
    std::string out = "[";
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const auto& dv = devices[i];
      out += std::string(i ? ", " : "") + "{\"id\": " + ke::json_quote(dv.id) + ", \"kind\": " + ke::json_quote(dv.kind) +
             ", \"name\": " + ke::json_quote(dv.name) + ", \"compute_units\": " + std::to_string(dv.compute_units) +
             ", \"vector_bits\": " + std::to_string(dv.vector_bits) + ", \"properties\": {";
      bool first = true;
      for (const auto& [k, v] : dv.properties) {
        out += std::string(first ? "" : ", ") + ke::json_quote(k) + ": " + ke::json_quote(v);
        first = false;
      }
      out += "}}";
    }
    std::cout << out << "]\n";
    return 0;
  }
  for (const auto& dv : devices) {
    std::cout << dv.id << "  " << dv.name << "  (" << dv.compute_units << " compute units, " << dv.vector_bits
              << "-bit vectors)\n";
    for (const auto& [k, v] : dv.properties) std::cout << "    " << k << ": " << v << "\n";
  }
  return 0;
}

int cmd_check(const std::vector<std::string>& args) {
  po::options_description d("check");
  Common c;
  add_common(d, c);
  po::variables_map vm = parse(args, d, c);
  if (vm.count("help") || c.spec_path.empty()) {
    std::cerr << kUsage;
    return vm.count("help") ? 0 : 2;
  }
  ke::Spec spec = ke::load_spec(c.spec_path);
  auto device = ke::open_device(c.device);
  ke::LocalEvaluator evaluator(spec, device);
  ke::Candidate seed{spec.seed.source, spec.seed.language.value_or(spec.language), spec.seed_tunables()};
  ke::Candidate reference{spec.reference.source, spec.reference.language.value_or(spec.language), spec.seed_tunables()};
  const ke::Evaluation seed_eval = evaluator.evaluate(seed, 1);
  // The reference checked against itself: it must be deterministic, and it gives the time to beat.
  ke::Evaluation ref_eval;
  if (!spec.reference.device || *spec.reference.device == device->info().kind) {
    ref_eval = evaluator.evaluate(reference, 2);
  }
  const ke::DeviceInfo info = device->info();
  if (c.json) {
    auto times = [](const ke::Evaluation& e) {
      std::string out = "[";
      for (std::size_t i = 0; i < e.timings.size(); ++i) out += (i ? ", " : "") + std::to_string(e.timings[i].median_us);
      return out + "]";
    };
    std::cout << "{\"spec\": " << ke::json_quote(spec.name) << ", \"device\": " << ke::json_quote(info.id + " " + info.name)
              << ", \"seed\": {\"status\": " << ke::json_quote(ke::to_string(seed_eval.status))
              << ", \"message\": " << ke::json_quote(seed_eval.message) << ", \"time_us\": " << times(seed_eval)
              << "}, \"reference\": {\"status\": " << ke::json_quote(ke::to_string(ref_eval.status))
              << ", \"time_us\": " << times(ref_eval) << "}}\n";
  } else {
    std::cout << spec.name << " on " << info.id << " (" << info.name << ")\n";
    for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
      std::string name;
      for (const auto& [k, v] : spec.workloads[w]) name += (name.empty() ? "" : " ") + k + "=" + std::to_string(v);
      std::printf("  %-28s seed %10.1f us   reference %10.1f us\n", name.c_str(),
                  seed_eval.status == ke::Status::ok ? seed_eval.timings[w].median_us : NAN,
                  ref_eval.status == ke::Status::ok ? ref_eval.timings[w].median_us : NAN);
    }
    std::cout << "  seed: " << ke::to_string(seed_eval.status) << (seed_eval.message.empty() ? "" : ": ")
              << seed_eval.message << "\n";
    if (seed_eval.status == ke::Status::compile_error) std::cout << seed_eval.compile_log << "\n";
    if (ref_eval.status != ke::Status::ok && ref_eval.status != ke::Status::pending) {
      std::cout << "  reference against itself: " << ke::to_string(ref_eval.status) << ": " << ref_eval.message << "\n";
    }
  }
  const bool ok = seed_eval.status == ke::Status::ok &&
                  (ref_eval.status == ke::Status::ok || ref_eval.status == ke::Status::pending);
  return ok ? 0 : 1;
}

int cmd_run(const std::vector<std::string>& args) {
  po::options_description d("run");
  Common c;
  add_common(d, c);
  std::int64_t max_evals = 64;
  double max_time = 0, target = 0;
  std::string policy = "greedy", mutator = "param", command;
  std::uint64_t seed = 1;
  int jobs = 1;
  double timeout = 0, command_timeout = 300;
  bool in_process = false;
  d.add_options()("max-evals", po::value(&max_evals)->default_value(64), "stop after N evaluations (the seed included)")(
      "max-time", po::value(&max_time), "stop after SEC seconds")("target-speedup", po::value(&target),
                                                                  "stop once the best is X times faster than the seed")(
      "policy", po::value(&policy)->default_value("greedy"), "selection policy")(
      "mutator", po::value(&mutator)->default_value("param"), "param or command")(
      "command", po::value(&command), "the command mutator's program, run through /bin/sh once per child")(
      "command-timeout", po::value(&command_timeout)->default_value(300), "time limit of one command run, seconds")(
      "jobs", po::value(&jobs)->default_value(1), "candidates evaluated at once, each in its own worker")(
      "timeout", po::value(&timeout)->default_value(0),
      "time limit per candidate, seconds (0: 10x the seed's evaluation, at least 10 s)")(
      "in-process", po::bool_switch(&in_process),
      "evaluate in this process, without workers: faster, but a crashing candidate ends the run")(
      "seed", po::value(&seed)->default_value(1), "random seed of the search");
  po::variables_map vm = parse(args, d, c);
  if (vm.count("help") || c.spec_path.empty()) {
    std::cerr << kUsage;
    return vm.count("help") ? 0 : 2;
  }
  if (max_evals < 1) throw ke::Error(ke::ErrorCode::BadUsage, "--max-evals must be at least 1");
  if (jobs < 1) throw ke::Error(ke::ErrorCode::BadUsage, "--jobs must be at least 1");
  if (timeout < 0) throw ke::Error(ke::ErrorCode::BadUsage, "--timeout must not be negative");
  if (in_process && jobs > 1) throw ke::Error(ke::ErrorCode::BadUsage, "--in-process evaluates one candidate at a time: drop --jobs");
  ke::Spec spec = ke::load_spec(c.spec_path);
  std::shared_ptr<ke::Mutator> mut;
  if (mutator == "param") {
    mut = std::make_shared<ke::ParamMutator>();
  } else if (mutator == "command") {
    if (command.empty()) throw ke::Error(ke::ErrorCode::BadUsage, "--mutator command needs --command CMD");
    mut = std::make_shared<ke::CommandMutator>(command, command_timeout);
  } else {
    throw ke::Error(ke::ErrorCode::BadUsage, "unknown mutator '" + mutator + "' (known: param, command)");
  }
  std::shared_ptr<ke::SelectionPolicy> pol = ke::make_policy(policy);
  std::vector<std::shared_ptr<ke::StopRule>> rules{ke::max_evaluations(max_evals)};
  if (vm.count("max-time")) rules.push_back(ke::max_time(max_time));
  if (vm.count("target-speedup")) rules.push_back(ke::target_speedup(target));
  std::shared_ptr<ke::FitnessEvaluator> evaluator;
  if (in_process) {
    evaluator = std::make_shared<ke::LocalEvaluator>(spec, ke::open_device(c.device));
  } else {
    ke::WorkerOptions wo;
    wo.jobs = jobs;
    wo.timeout_s = timeout;
    // Parallel workers must not time at once: one lock file per device, shared by every run on this host.
    wo.eval.timing_lock = timing_lock_path(c.device);
    evaluator = std::make_shared<ke::WorkerEvaluator>(spec, c.device, wo);
  }
  ke::EvolverOptions options;
  options.seed = seed;
  options.jobs = jobs;
  ke::Evolver evolver(spec, evaluator, mut, pol, ke::any_of(rules), options);
  Progress progress(max_evals, false);
  evolver.add_observer(&progress);
  const ke::RunResult result = evolver.run();
  const ke::DeviceInfo info = evaluator->device_info();
  if (c.json) {
    std::cout << ke::run_report_json(spec, info, evolver.graph(), result) << "\n";
  } else {
    std::cout << ke::run_report_text(spec, info, evolver.graph(), result);
  }
  return result.best ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "run") return cmd_run(args);
    if (command == "check") return cmd_check(args);
    if (command == "devices") return cmd_devices(args);
    if (command == "--help" || command == "-h" || command == "help") {
      std::cout << kUsage;
      return 0;
    }
    std::cerr << "kernelevolve: unknown command '" << command << "'\n" << kUsage;
    return 2;
  } catch (const ke::Error& e) {
    std::cerr << "kernelevolve: " << e.what() << "\n";
    return e.exit_code();
  } catch (const po::error& e) {
    std::cerr << "kernelevolve: " << e.what() << "\n" << kUsage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kernelevolve: " << e.what() << "\n";
    return 1;
  }
}
