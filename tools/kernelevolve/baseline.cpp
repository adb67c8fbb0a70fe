// `kernelevolve baseline`: PyTorch eager's and torch.compile's times for each workload of a PyTorch problem.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <kernelevolve/distributed.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"

namespace cli {

// `baseline`: PyTorch eager and torch.compile on this device, measured as a run measures its baselines (the
// evolver's own call: a `pytorch` candidate, "eager" or "compile", through the evaluator `check` and `run`
// create), so the figures a user sees first are the ones a run's speedups are against. No seed is needed.
int cmd_baseline(const std::vector<std::string>& args) {
  po::options_description d("baseline");
  Common c;
  double timeout = 0;
  std::string sandbox_name = "strict";
  d.add_options()("device", po::value(&c.device)->default_value("cpu"), "cpu or cuda[:N]")(
      "json", po::bool_switch(&c.json), "print one JSON object on stdout")(
      "timeout", po::value(&timeout)->default_value(0),
      "time limit per baseline's evaluation, seconds, torch.compile's first compile included (0: 300 s)")(
      "sandbox", po::value(&sandbox_name)->default_value("strict"),
      "how the worker confines itself: strict, basic or off (PyTorch runs beside it, unconfined, as in a run)");
  add_problem_variant(d, c);
  po::variables_map vm = parse(args, d, c);
  if (vm.count("help") || c.spec_path.empty()) {
    (vm.count("help") ? std::cout : std::cerr)
        << "usage: kernelevolve baseline PROBLEM.py [--device cpu|cuda[:N]] [--json] [--timeout SEC] [--sandbox MODE]\n"
           "  PyTorch eager's and torch.compile's times for each workload of a PyTorch problem (KernelBench\n"
           "  format), measured as a run measures its baselines; the problem's bytes per workload\n"
        << d;
    return vm.count("help") ? 0 : 2;
  }
  if (timeout < 0) throw ke::Error(ke::ErrorCode::BadUsage, "--timeout must not be negative");
  const std::optional<ke::SandboxMode> sandbox = ke::parse_sandbox_mode(sandbox_name);
  if (!sandbox)
    throw ke::Error(ke::ErrorCode::BadUsage, "--sandbox is strict, basic or off, not '" + sandbox_name + "'");
  if (!ke::is_pytorch_problem(c.spec_path)) {
    throw ke::Error(ke::ErrorCode::BadUsage, c.spec_path +
                                                 " is not a PyTorch problem (a .py file in KernelBench's "
                                                 "format): the baselines are its module, eager and compiled");
  }
  if (c.device.rfind("cpu", 0) != 0 && c.device.rfind("cuda", 0) != 0) {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    "--device is cpu or cuda[:N] (where PyTorch runs), not '" + c.device + "'");
  }
  const ke::Spec spec = load_cli_problem(c);
  ke::WorkerOptions wo;
  wo.first_timeout_s = wo.timeout_s = timeout > 0 ? timeout : 300;
  wo.sandbox = *sandbox;
  // As `run`: never timed while another run, sweep or baseline times on this device.
  wo.eval.timing_lock = ke::default_timing_lock(c.device);
  ke::WorkerEvaluator evaluator(spec, c.device, wo);
  const ke::DeviceInfo info = evaluator.device_info();

  std::vector<std::int64_t> bytes;  // per workload: every buffer, inputs, weights and outputs
  for (const ke::Bindings& w : spec.workloads) {
    std::int64_t sum = 0;
    for (const ke::Param& p : spec.params) {
      if (p.is_buffer()) sum += spec.element_count(p, w) * static_cast<std::int64_t>(ke::dtype_size(p.dtype));
    }
    bytes.push_back(sum);
  }
  const bool quiet = c.json;
  std::vector<ke::Baseline> baselines;
  for (const char* name : {"eager", "compile"}) {
    if (!quiet)
      std::fprintf(stderr, "measuring %s ...\n", std::string(name) == "eager" ? "PyTorch eager" : "torch.compile");
    ke::Baseline b{name, {}};
    // One input seed for both, as a run gives both one.
    b.evaluation = evaluator.evaluate(ke::Candidate{name, ke::Language::pytorch, spec.seed_tunables()}, 2);
    baselines.push_back(std::move(b));
  }
  // Why a baseline has no time, in one line: the message, else the first line of the log (the bridge's
  // reason when a mode cannot run here).
  auto reason = [](const ke::Evaluation& e) {
    if (e.status == ke::Status::ok) return std::string();
    std::string why = e.message;
    if (why.empty() || why == "compile error") why = e.compile_log.substr(0, e.compile_log.find('\n'));
    if (why.rfind("error: ", 0) == 0) why = why.substr(7);
    return why;
  };
  auto workload_name = [](const ke::Bindings& w) {
    std::string name;
    for (const auto& [k, v] : w) name += (name.empty() ? "" : " ") + k + "=" + std::to_string(v);
    return name.empty() ? std::string("(no sizes)") : name;
  };
  if (c.json) {
    std::string out = "{\"problem\": " + ke::json_quote(spec.name) + ", \"file\": " + ke::json_quote(c.spec_path) +
                      ", \"device\": " + ke::json_quote(info.id + " " + info.name) + ", \"workloads\": [";
    for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
      out += std::string(w ? ", " : "") + "{";
      bool first = true;
      for (const auto& [k, v] : spec.workloads[w]) {
        out += std::string(first ? "" : ", ") + ke::json_quote(k) + ": " + std::to_string(v);
        first = false;
      }
      out += "}";
    }
    out += "], \"problem_bytes\": [";
    for (std::size_t w = 0; w < bytes.size(); ++w) out += (w ? ", " : "") + std::to_string(bytes[w]);
    out += "]";
    for (const ke::Baseline& b : baselines) {
      const ke::Evaluation& e = b.evaluation;
      const bool ok = e.status == ke::Status::ok;
      auto list = [&](double ke::WorkloadTiming::*field) {
        if (!ok) return std::string("null");
        std::string l = "[";
        for (std::size_t w = 0; w < e.timings.size(); ++w) {
          char v[32];
          std::snprintf(v, sizeof v, "%.3f", e.timings[w].*field);
          l += (w ? ", " : "") + std::string(v);
        }
        return l + "]";
      };
      out += ", " + ke::json_quote(b.name) + ": {\"status\": " + ke::json_quote(ke::to_string(e.status)) +
             ", \"time_us\": " + list(&ke::WorkloadTiming::median_us) +
             ", \"mad_us\": " + list(&ke::WorkloadTiming::mad_us) +
             ", \"min_us\": " + list(&ke::WorkloadTiming::min_us) +
             ", \"max_us\": " + list(&ke::WorkloadTiming::max_us) +
             ", \"reason\": " + (ok ? std::string("null") : ke::json_quote(reason(e))) + "}";
    }
    std::cout << out << "}\n";
  } else {
    std::cout << spec.name << " on " << info.id << " (" << info.name << "): medians, ± the median absolute deviation\n";
    // The workload last: its sizes are as long as the module has globals.
    std::printf("  %14s %22s %22s   %s\n", "bytes", "eager us", "torch.compile us", "workload");
    for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
      std::string cells[2];
      for (int k = 0; k < 2; ++k) {
        const ke::Evaluation& e = baselines[k].evaluation;
        if (e.status != ke::Status::ok) {
          cells[k] = "-";
          continue;
        }
        char v[64];
        std::snprintf(v, sizeof v, "%.1f ± %.1f", e.timings[w].median_us, e.timings[w].mad_us);
        cells[k] = v;
      }
      std::printf("  %14lld %22s %22s   %s\n", (long long)bytes[w], cells[0].c_str(), cells[1].c_str(),
                  workload_name(spec.workloads[w]).c_str());
    }
    for (const ke::Baseline& b : baselines) {
      const ke::Evaluation& e = b.evaluation;
      std::cout << "  " << (b.name == "eager" ? "PyTorch eager" : "torch.compile") << ": " << ke::to_string(e.status);
      if (e.status != ke::Status::ok) std::cout << ": " << reason(e);
      std::cout << "\n";
    }
  }
  // Eager is the module itself: if it cannot be measured, the problem cannot be run. torch.compile may be
  // unavailable here (the CPU, torch before 2.0) without that being a failure.
  return baselines[0].evaluation.status == ke::Status::ok ? 0 : 1;
}

}  // namespace cli
