// `kernelevolve sweep`: every valid point of a spec's tunable space measured once into a text file, resumably
// (kernelevolve/sweep.hpp).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <kernelevolve/distributed.hpp>
#include <optional>
#include <string>

#include "cli.hpp"

namespace cli {

namespace {

// What measured a sweep: --commit, else `git describe` of the spec's checkout, else the library's version.
std::string describe_commit(const std::string& spec_path) {
  const std::string dir = std::filesystem::absolute(spec_path).parent_path().string();
  std::string quoted = "'";
  for (char ch : dir) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  quoted += "'";
  std::string text;
  if (FILE* p = popen(("git -C " + quoted + " describe --always --dirty --tags 2>/dev/null").c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) text += buf;
    if (pclose(p) != 0) text.clear();
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.empty() ? "kernelevolve " KE_VERSION_STRING : text;
}

}  // namespace

int cmd_sweep(const std::vector<std::string>& args) {
  po::options_description d("sweep options");
  Common c;
  std::string out, sandbox_name = "strict", commit;
  int jobs = 0;
  std::int64_t max_points = 0;
  double time_limit = 0, timeout = 0;
  bool count_only = false;
  d.add_options()("device", po::value(&c.device)->default_value("cpu"), "cpu, cuda[:N] or hip[:N] (one device)")(
      "out", po::value(&out), "the sweep file (.tsv); an existing one of the same spec and device is resumed")(
      "jobs", po::value(&jobs),
      "candidates evaluated at once, each in its own worker (default: 1 on a CPU, 3 on a GPU)")(
      "max-points", po::value(&max_points), "measure at most N points now (run again to go on)")(
      "time-limit", po::value(&time_limit),
      "start no point after SEC seconds (those in flight finish; run again to go on)")(
      "timeout", po::value(&timeout)->default_value(0),
      "time limit per candidate, seconds (0: 10x the seed's, at least 10 s)")(
      "sandbox", po::value(&sandbox_name)->default_value("strict"),
      "how workers confine candidates: strict, basic or off")(
      "commit", po::value(&commit), "what measured it, for the header (default: git describe of the spec's checkout)")(
      "count", po::bool_switch(&count_only), "only say how many points the space has and the file holds (no device)");
  po::variables_map vm = parse(args, d, c);
  if (vm.count("help")) {
    std::cout << kUsage << d;
    return 0;
  }
  if (c.spec_path.empty() || out.empty()) {
    std::cerr << "kernelevolve sweep needs a SPEC and --out FILE\n" << kUsage;
    return 2;
  }
  if (vm.count("jobs") && jobs < 1) throw ke::Error(ke::ErrorCode::BadUsage, "--jobs must be at least 1");
  if (vm.count("max-points") && max_points < 1)
    throw ke::Error(ke::ErrorCode::BadUsage, "--max-points must be at least 1");
  if (vm.count("time-limit") && time_limit <= 0)
    throw ke::Error(ke::ErrorCode::BadUsage, "--time-limit must be positive");
  if (timeout < 0) throw ke::Error(ke::ErrorCode::BadUsage, "--timeout must not be negative");
  if (ke::is_device_list(c.device)) {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    "a sweep measures on one device (its times must compare): give one --device");
  }
  const std::optional<ke::SandboxMode> sandbox = ke::parse_sandbox_mode(sandbox_name);
  if (!sandbox)
    throw ke::Error(ke::ErrorCode::BadUsage, "--sandbox is strict, basic or off, not '" + sandbox_name + "'");
  ke::Spec spec = load_cli_problem(c);
  if (count_only) {  // to plan device time: no device opened
    const std::size_t space = ke::tunable_space(spec).size();
    const std::size_t held = std::filesystem::exists(out) ? ke::read_sweep(out).points.size() : 0;
    std::cout << spec.name << ": " << space << " points; " << held << " in " << out << "\n";
    return 0;
  }
  const bool gpu = c.device.rfind("cuda", 0) == 0 || c.device.rfind("hip", 0) == 0;
  if (!vm.count("jobs")) jobs = gpu ? 3 : 1;
  ke::WorkerOptions wo;
  wo.jobs = jobs;
  wo.timeout_s = timeout;
  wo.sandbox = *sandbox;
  // As `run`: parallel workers never time at once, nor with another run or sweep on this device.
  wo.eval.timing_lock = ke::default_timing_lock(c.device);
  ke::WorkerEvaluator evaluator(spec, c.device, wo);
  ke::SweepOptions so;
  so.out = out;
  so.spec_file = c.spec_path;
  so.commit = vm.count("commit") ? commit : describe_commit(c.spec_path);
  so.jobs = evaluator.jobs();  // lowered where the device's memory holds fewer
  so.max_points = max_points;
  so.time_limit_s = time_limit;
  const bool tty = isatty(2) != 0;
  double last_line_s = -1e9;
  so.on_progress = [&](const ke::SweepProgress& p) {
    const std::size_t have = p.in_file + p.measured;
    const double rate = p.elapsed_s > 0 ? p.measured / p.elapsed_s : 0;
    const double eta = rate > 0 ? (p.space - have) / rate : 0;
    // On a terminal, one line rewritten; in a log, a line every 30 s and at the end.
    if (!tty && p.elapsed_s - last_line_s < 30 && have < p.space) return;
    last_line_s = p.elapsed_s;
    std::fprintf(stderr, "%ssweep %s: %zu/%zu points (%zu now, %zu not ok), %.2f points/s, ETA %.0f s%s",
                 tty ? "\r" : "", spec.name.c_str(), have, p.space, p.measured, p.failed, rate, eta,
                 tty ? "   " : "\n");
  };
  const ke::DeviceInfo info = evaluator.device_info();
  std::fprintf(stderr, "sweeping %s on %s (%s) into %s\n", spec.name.c_str(), info.id.c_str(), info.name.c_str(),
               out.c_str());
  const ke::SweepResult r = ke::run_sweep(spec, evaluator, so);
  if (tty && r.measured > 0) std::fprintf(stderr, "\n");
  std::cout << (r.complete ? "complete" : "incomplete") << ": " << r.in_file + r.measured << " of " << r.space
            << " points in " << out << " (" << r.measured << " measured now, " << r.failed << " of them not ok)";
  if (!r.complete)
    std::cout << "; stopped by " << (r.stop_reason.empty() ? "an error" : r.stop_reason) << ": run again to go on";
  std::cout << "\n";
  return 0;
}

}  // namespace cli
