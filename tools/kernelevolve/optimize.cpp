// `kernelevolve optimize`: a whole PyTorch model made faster (kernelevolve/optimize.hpp).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"

namespace cli {

// `optimize`: issue 30 (kernelevolve/optimize.hpp): the model profiled, its graph cut into regions, each written as a
// PyTorch problem under --out, the regions ranked by share of the model's time, evolved, the winners put back, and
// the speedup proved. Options of each region's `kernelevolve run` pass through.
int cmd_optimize(const std::vector<std::string>& args) {
  po::options_description d("optimize");
  std::string model;
  bool json = false;
  ke::OptimizeOptions options;
  d.add_options()("help,h", "this help")("model", po::value(&model), "the model: a KernelBench-format .py file")(
      "device", po::value(&options.device)->default_value("cpu"), "where the model runs: cpu or cuda[:N]")(
      "out", po::value(&options.out_dir),
      "the folder for the region files and manifest.json (default: MODEL.optimize beside the model, or in the "
      "current folder where that is not writable); an earlier optimize's output of the same model there is replaced "
      "(its stale region files removed, its database kept, to resume from); a folder of another model's optimize, "
      "or holding anything else, is refused")("min-share", po::value(&options.min_share)->default_value(0.01, "0.01"),
                                              "skip regions below this share of the model's time (Amdahl)")(
      "budget", po::value(&options.budget_s)->default_value(2, "2"),
      "seconds spent timing the model, again the regions, and again the A/B of step 6")(
      "timeout", po::value(&options.timeout_s)->default_value(1800, "1800"),
      "for the whole optimizer, seconds (step 4 ends a fifth of it early, so that steps 5-6 report)")(
      "no-evolve", po::bool_switch(), "steps 1-3 only: profile, cut and rank")(
      "max-evals", po::value(&options.max_evals)->default_value(20), "evaluations of each kept region's run")(
      "total-evals", po::value(&options.total_evals)->default_value(0),
      "evaluations in all instead, split among the kept regions by their share of the model's time")(
      "mutator", po::value<std::string>(), "each region's run: param|command|llm|mix (as kernelevolve run)")(
      "command", po::value<std::string>(), "the command mutator's command (as kernelevolve run)")(
      "llm-url", po::value<std::string>(), "as kernelevolve run")(
      "llm-model", po::value<std::string>(), "as kernelevolve run")("llm-api-key-env", po::value<std::string>(),
                                                                    "as kernelevolve run")(
      "max-time", po::value<std::string>(), "seconds of each region's run (as kernelevolve run)")(
      "jobs", po::value<std::string>(), "each region's run's parallel evaluations (as kernelevolve run)")(
      "evolve-device", po::value(&options.evolve_device),
      "the regions' runs' device, where not --device: cuda:all or cuda:0,cuda:1 spreads each run over those GPUs")(
      "devices", po::value(&options.devices),
      "evolve as many regions at once as this names devices (cuda:0,cuda:1), one region per device at a time, all "
      "into OUT/optimize.db; with --mpi, each rank's device (its rank on its host, modulo the list)")(
      "autocast", po::value(&options.autocast),
      "bf16|fp16: call the model under torch.autocast on its device's type, as a user who wraps its call in one; "
      "the regions are captured in the dtypes autocast gives each operator, its casts written out")(
      "mpi", po::bool_switch(&options.mpi),
      "under mpirun: rank 0 profiles, cuts and ranks, every rank evolves the regions it claims first, rank 0 puts "
      "back and proves (the ranks share OUT)")(
      "run-option", po::value<std::vector<std::string>>(),
      "any other option of kernelevolve run, for each region's run (repeat it: --run-option=--language "
      "--run-option=c)")("json", po::bool_switch(&json),
                         "print the report (the manifest) as one JSON object on stdout");
  po::positional_options_description pos;
  pos.add("model", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
  po::notify(vm);
  if (vm.count("help") || model.empty()) {
    (vm.count("help") ? std::cout : std::cerr)
        << "usage: kernelevolve optimize MODEL.py [--device cpu|cuda[:N]] [--out DIR] [--min-share F]\n"
           "                             [--max-evals N | --total-evals N] [--mutator M --command CMD ...] [--json]\n"
           "                             [--devices D1,D2,...] [--mpi (under mpirun)] [--autocast bf16|fp16]\n"
           "  Profiles the model under torch.profiler, captures its graph (torch.export, or torch.fx on torch 1.13),\n"
           "  cuts it into regions (element-wise, reduction and normalization chains around at most one matrix\n"
           "  product or convolution), writes each distinct region as a problem file (identical regions once, with\n"
           "  a count and a stable hash) and ranks them by share of the model's time; evolves each kept region\n"
           "  (kernelevolve run, every run in OUT/optimize.db: a later optimize resumes from it), puts back only the\n"
           "  winners over eager and torch.compile (OUT/optimized.py), and proves the model's speedup: parity,\n"
           "  engagement, an interleaved A/B.\n"
           "  The model file is imported, and its Model, get_inputs() and forward run, in the optimizer's own Python\n"
           "  process, unconfined (outside the sandbox that confines the kernels): optimize only model files you trust.\n"
        << d;
    return vm.count("help") ? 0 : 2;
  }
  options.evolve = !vm["no-evolve"].as<bool>();
  for (const char* name : {"mutator", "command", "llm-url", "llm-model", "llm-api-key-env", "max-time", "jobs"}) {
    if (vm.count(name))
      options.run_options.insert(options.run_options.end(), {std::string("--") + name, vm[name].as<std::string>()});
  }
  if (vm.count("run-option")) {
    for (const std::string& o : vm["run-option"].as<std::vector<std::string>>()) options.run_options.push_back(o);
  }
  const ke::OptimizeReport report = ke::optimize_model(model, options);
  if (report.mpi_rank != 0) {  // rank 0 reports; the others say their part on stderr
    std::fprintf(stderr, "rank %d: evolved %ld region(s)\n", report.mpi_rank, report.mpi_regions);
    return 0;
  }
  std::cout << (json ? report.json : ke::format_report(report));
  return 0;
}

}  // namespace cli
