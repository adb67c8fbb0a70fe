// What the command-line tool's commands share: the usage text, the options of the commands that take a problem
// (Common), loading that problem, and each command's entry point. A file per command or family of commands:
// run.cpp (with progress.hpp, its progress bar), check.cpp, sweep.cpp, import.cpp, baseline.cpp, stored_run.cpp
// (show, best and export), devices.cpp, optimize.cpp and ask.cpp; main.cpp reads the command and dispatches.
#pragma once
#include <boost/program_options.hpp>
#include <kernelevolve/kernelevolve.hpp>
#include <string>
#include <vector>

namespace po = boost::program_options;
namespace ke = kernelevolve;

namespace cli {

// `kernelevolve --help`: every command's synopsis.
extern const char* const kUsage;

// The options of the commands that take a problem (run, check, import, sweep, baseline), as parsed.
struct Common {
  std::string spec_path;
  std::string device = "cpu";
  bool device_given = false;  // --device on the command line; else a GPU spec picks its own kind
  bool json = false;
  std::string language;     // a PyTorch problem's candidate language
  std::string seed_kernel;  // a seed for a problem that has none, or another one
  std::string first;        // "compile": a PyTorch problem's seed is what torch.compile generates (issue 31)
  std::string writer;       // a mutator that writes a first kernel where torch.compile's program cannot be had
  std::string dtype;        // a PyTorch problem's floats cast to bf16 or fp16 (issue 32)
  bool backward = false;    // a PyTorch problem's backward, with_forward: and its forward, one problem
  bool with_forward = false;
  std::string precision;  // as-run or strict (issue 50); empty: the spec's, or its kind's default
  // --first compile chosen by run for a problem without a seed or a model, not asked for
  bool first_by_default = false;
  double capture_s = 0;  // load_cli_problem's capture of torch.compile's program (--first compile), seconds
};

// The problem a PyTorch module makes: its precision, its backward (docs/pytorch-precision.md, "Precision: bf16 and
// fp16 problems", and docs/pytorch-training.md, "Training: backward problems").
void add_problem_variant(po::options_description& d, Common& c);
// The options of the commands that take a problem: --device, --json, --language, --seed-kernel, --first, and
// add_problem_variant's.
void add_common(po::options_description& d, Common& c);

// A spec file, or a PyTorch problem derived on the spot; with --seed-kernel's source as its seed. Without
// --device, a spec written for a GPU language runs on that kind of GPU (cuda.json: cuda), not on the CPU.
ke::Spec load_cli_problem(Common& c);

// Parses a problem command's arguments: `d`'s options, --help, and the problem (SPEC) as the one positional.
po::variables_map parse(const std::vector<std::string>& args, po::options_description& d, Common& c);

// The commands: each takes the arguments after its name and returns the tool's exit code (a ke::Error or a
// po::error it throws becomes one in main).
int cmd_run(const std::vector<std::string>& args);
int cmd_check(const std::vector<std::string>& args);
int cmd_sweep(const std::vector<std::string>& args);
int cmd_import(const std::vector<std::string>& args);
int cmd_baseline(const std::vector<std::string>& args);
int cmd_show(const std::vector<std::string>& args);
int cmd_best(const std::vector<std::string>& args);
int cmd_export(const std::vector<std::string>& args);
int cmd_devices(const std::vector<std::string>& args);
int cmd_optimize(const std::vector<std::string>& args);
int cmd_ask(const std::vector<std::string>& args);  // ask.cpp: the waiting requests of several runs, one batch

}  // namespace cli
