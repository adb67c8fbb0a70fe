// `kernelevolve check`: the seed and the reference of a problem evaluated once, each in a worker unless
// --in-process, with the reference checked against itself; a table of their times, or one JSON object.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli.hpp"

namespace cli {

int cmd_check(const std::vector<std::string>& args) {
  po::options_description d("check");
  Common c;
  bool in_process = false;
  double timeout = 0;
  std::string sandbox_name = "strict";
  add_common(d, c);
  d.add_options()("in-process", po::bool_switch(&in_process),
                  "evaluate in this process, without a worker: a crashing seed or reference ends the check")(
      "timeout", po::value(&timeout)->default_value(0), "time limit per evaluation, seconds (0: 300 s)")(
      "sandbox", po::value(&sandbox_name)->default_value("strict"),
      "how the worker confines the seed and the reference: strict, basic or off");
  po::variables_map vm = parse(args, d, c);
  if (vm.count("help") || c.spec_path.empty()) {
    std::cerr << kUsage;
    return vm.count("help") ? 0 : 2;
  }
  if (timeout < 0) throw ke::Error(ke::ErrorCode::BadUsage, "--timeout must not be negative");
  const std::optional<ke::SandboxMode> sandbox = ke::parse_sandbox_mode(sandbox_name);
  if (!sandbox)
    throw ke::Error(ke::ErrorCode::BadUsage, "--sandbox is strict, basic or off, not '" + sandbox_name + "'");
  ke::Spec spec = load_cli_problem(c);
  // The seed and the reference are user code: like candidates, they run in a worker process, so a fault
  // in either is a reported result, never a crash of this one.
  std::shared_ptr<ke::FitnessEvaluator> evaluator;
  if (in_process) {
    evaluator = std::make_shared<ke::LocalEvaluator>(spec, ke::open_device(c.device));
  } else {
    ke::WorkerOptions wopt;
    wopt.first_timeout_s = wopt.timeout_s = timeout > 0 ? timeout : 300;
    wopt.sandbox = *sandbox;
    evaluator = std::make_shared<ke::WorkerEvaluator>(spec, c.device, wopt);
  }
  ke::Candidate seed{spec.seed.source, spec.seed.language.value_or(spec.language), spec.seed_tunables()};
  ke::Candidate reference{spec.reference.source, spec.reference.language.value_or(spec.language), spec.seed_tunables()};
  const ke::DeviceInfo info = evaluator->device_info();
  // Why the reference gets no time of its own, in words a person reads beside the seed's (empty: it is timed).
  const std::string reference_untimed = [&]() -> std::string {
    const ke::Language ref_language = spec.reference.language.value_or(spec.language);
    if (spec.reference.pytorch) {
      return "a PyTorch module: it checks the seed's outputs; its time is PyTorch eager's, which run and "
             "`kernelevolve baseline` measure";
    }
    if (ref_language != spec.language) {
      return std::string("a ") + ke::to_string(ref_language) + " kernel, not " + ke::to_string(spec.language) +
             " like the candidates: it checks the seed's outputs; its time is no time to beat";
    }
    if (spec.reference.device && *spec.reference.device != info.kind) {
      return "written for " + *spec.reference.device + ", not this " + info.kind +
             " device: it checks the seed's outputs; its time is no time to beat here";
    }
    return "";
  }();
  ke::Evaluation seed_eval, ref_eval;
  try {
    if (!spec.seed.source.empty()) seed_eval = evaluator->evaluate(seed, 1);
    // The reference checked against itself: it must be deterministic, and it gives the time to beat. (A
    // PyTorch module is no kernel of the spec's language: it is checked as the seed's reference only.)
    // Nor is a reference in another language than the candidates' (a CUDA reference of a Triton problem).
    if (reference_untimed.empty()) ref_eval = evaluator->evaluate(reference, 2);
  } catch (const ke::Error& e) {
    if (e.code() != ke::ErrorCode::Internal) throw;
    // The reference itself crashed or hung (the worker said it was running the reference).
    if (c.json) {
      std::cout << "{\"spec\": " << ke::json_quote(spec.name)
                << ", \"device\": " << ke::json_quote(info.id + " " + info.name)
                << ", \"error\": " << ke::json_quote(e.what()) << "}\n";
    } else {
      std::cerr << "kernelevolve: " << e.what() << "\n";
    }
    return 1;
  }
  if (c.json) {
    // A time not measured is null, never NaN or an empty list (as run's report writes a baseline without one).
    auto times = [&](const ke::Evaluation& e) {
      if (e.status != ke::Status::ok) return std::string("null");
      std::string out = "[";
      for (std::size_t i = 0; i < e.timings.size(); ++i) {
        const double t = e.timings[i].median_us;
        out += (i ? ", " : "") + (std::isfinite(t) ? std::to_string(t) : std::string("null"));
      }
      return out + "]";
    };
    std::cout << "{\"spec\": " << ke::json_quote(spec.name)
              << ", \"device\": " << ke::json_quote(info.id + " " + info.name) << ", \"seed\": {\"status\": "
              << ke::json_quote(spec.seed.source.empty() ? "none" : ke::to_string(seed_eval.status))
              << ", \"message\": " << ke::json_quote(seed_eval.message) << ", \"time_us\": " << times(seed_eval)
              << "}, \"reference\": {\"status\": "
              << ke::json_quote(reference_untimed.empty() ? ke::to_string(ref_eval.status) : "not_timed")
              << ", \"time_us\": " << times(ref_eval) << ", \"reason\": "
              << (reference_untimed.empty() ? std::string("null") : ke::json_quote(reference_untimed))
              << "}, \"sandbox\": " << ke::json_quote(in_process ? "none" : sandbox_name) << "}\n";
  } else {
    // A time, or "-" where there is none (the lines after the table say why): never a NaN read as a result.
    auto time_cell = [](const ke::Evaluation& e, std::size_t w) {
      if (e.status != ke::Status::ok || w >= e.timings.size() || !std::isfinite(e.timings[w].median_us)) {
        return std::string("-");
      }
      char cell[32];
      std::snprintf(cell, sizeof cell, "%.1f us", e.timings[w].median_us);
      return std::string(cell);
    };
    std::cout << spec.name << " on " << info.id << " (" << info.name << ")\n";
    for (const ke::Param& p : spec.params) {
      if (p.role != ke::Role::in && p.role != ke::Role::inout) continue;
      std::cout << "  input " << p.name << " (" << ke::to_string(p.dtype) << "): " << ke::describe_input(spec, p)
                << "\n";
    }
    for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
      std::string name;
      for (const auto& [k, v] : spec.workloads[w]) name += (name.empty() ? "" : " ") + k + "=" + std::to_string(v);
      std::printf("  %-28s seed %13s   reference %13s\n", name.c_str(), time_cell(seed_eval, w).c_str(),
                  reference_untimed.empty() ? time_cell(ref_eval, w).c_str() : "not timed");
    }
    // Every "-" and "not timed" above is said in words below: the seed's status, the reference's failure, or why
    // the reference is not timed.
    if (!reference_untimed.empty()) std::cout << "  reference: not timed (" << reference_untimed << ")\n";
    if (spec.seed.source.empty()) {
      std::cout << "  seed: none (a model or command mutator writes the first kernel; or give --seed-kernel FILE)\n";
    } else {
      std::cout << "  seed: " << ke::to_string(seed_eval.status) << (seed_eval.message.empty() ? "" : ": ")
                << seed_eval.message << "\n";
    }
    if (seed_eval.status == ke::Status::compile_error) std::cout << seed_eval.compile_log << "\n";
    if (ref_eval.status != ke::Status::ok && ref_eval.status != ke::Status::pending) {
      std::cout << "  reference against itself: " << ke::to_string(ref_eval.status) << ": " << ref_eval.message << "\n";
    }
    std::cout << "  sandbox: "
              << (in_process ? "none (--in-process)"
                  : *sandbox == ke::SandboxMode::off
                      ? "off (asked for): the seed and the reference ran with all of this user's rights"
                      : sandbox_name)
              << "\n";
  }
  const bool ok = (spec.seed.source.empty() || seed_eval.status == ke::Status::ok) &&
                  (ref_eval.status == ke::Status::ok || ref_eval.status == ke::Status::pending);
  return ok ? 0 : 1;
}

}  // namespace cli
