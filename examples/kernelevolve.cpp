// kernelevolve: the command-line tool. Evolves a kernel from a spec file (keeping the run in a database),
// checks a spec, shows a stored run, writes its best kernel, exports its graph, lists devices.
// Exit codes: 0 done; 2 bad usage or spec; 3 device not available; 1 anything else.
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <kernelevolve/distributed.hpp>
#include <kernelevolve/kernelevolve.hpp>
#include <kernelevolve/store.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace po = boost::program_options;
namespace ke = kernelevolve;

namespace {

const char* kUsage =
    "usage:\n"
    "  kernelevolve run SPEC [--device cpu|cuda[:N]|hip[:N]] [--db FILE | --no-db] [--resume [--run ID]] [--no-reuse]\n"
    "                        [--max-evals N] [--max-time SEC] [--target-speedup X] [--plateau N] [--max-tokens N]\n"
    "                        [--max-cost USD]\n"
    "                        [--policy greedy|ucb|epsilon-greedy|tournament|islands|random|model] [policy options]\n"
    "                        [--mutator param|command|llm|mix] [--command CMD] [--llm-url URL --llm-model NAME\n"
    "                        --llm-api-key-env VAR [--llm-price IN,OUT]]... [llm options] [--jobs N] [--timeout SEC]\n"
    "                        [--in-process]\n"
    "                        [--mpi [--mpi-rank-timeout SEC]]   (under mpirun: rank 0 searches, the others evaluate)\n"
    "                        [--sandbox strict|basic|off] [--warm-start DB [--warm-start-max N]] [--seed N] [--json]\n"
    "                        [--counters [--ncu PATH]]   (a GPU's hardware counters of each new best, by Nsight Compute)\n"
    "  kernelevolve check SPEC [--device ...] [--sandbox MODE] [--json]   evaluate the reference and the seed only\n"
    "  kernelevolve import PROBLEM.py -o DIR [--device cpu|cuda] [--language c|cpp|cuda|triton]\n"
    "                        [--dtype bf16|fp16] [--backward [--with-forward]]\n"
    "                        write the spec derived from a PyTorch module (KernelBench format), to read and edit\n"
    "  kernelevolve baseline PROBLEM.py [--device cpu|cuda[:N]] [--json] [--timeout SEC] [--sandbox MODE]\n"
    "                        PyTorch eager's and torch.compile's times per workload, measured as a run measures them\n"
    "  SPEC is a spec file (.json) or a PyTorch problem (.py, KernelBench format: run and check take\n"
    "  --language for its candidates, and --seed-kernel FILE for a seed, unless a --mutator command, llm or\n"
    "  mix writes the first kernel from the module; without either, --first compile, the default on a CUDA GPU\n"
    "  and, with PyTorch 2.x, on the CPU: node 0 is what torch.compile generates, translated (Triton, C++)).\n"
    "  run, check, import, sweep and baseline take\n"
    "  --dtype bf16|fp16 (its floats cast, the reference in that dtype) and --backward [--with-forward] (its\n"
    "  gradients, checked against autograd in float64) to make another problem of the module\n"
    "  kernelevolve sweep SPEC --out FILE.tsv [--device cpu|cuda[:N]|hip[:N]] [--jobs N] [--max-points N]\n"
    "                        [--time-limit SEC] [--timeout SEC] [--sandbox MODE] [--commit TEXT] [--count]\n"
    "                        measure every valid point of the tunable space into FILE (resumes it if it exists)\n"
    "  kernelevolve show DB [--run ID] [--limit N]         a table of the run's nodes, the best one's diagnosis and lineage\n"
    "  kernelevolve show DB [--run ID] --node N            one node in full: times, diagnosis, resources, compiler log\n"
    "  kernelevolve best DB [--run ID] [-o FILE]           the best kernel's source, tunables as #defines (a comment for Triton)\n"
    "  kernelevolve export DB [--run ID] --format json|dot [-o FILE]   the run's graph for tools or Graphviz\n"
    "  kernelevolve export DB [--run ID] [--node N] --format torch -o op.py   the best node as a PyTorch operator\n"
    "  kernelevolve devices [--json] [--sandbox-info]    the devices found, with their properties; the sandbox\n"
    "  kernelevolve optimize MODEL.py [--device cpu|cuda[:N]] [--out DIR] [--min-share F] [--max-evals N]\n"
    "                        [--mutator M --command CMD ...] [--no-evolve] [--devices D1,D2] [--mpi] [--json]\n"
    "                        a whole model (KernelBench format) profiled, cut into regions, each written as a\n"
    "                        problem, ranked by share of the model's time, evolved, the winners put back\n"
    "                        (OUT/optimized.py), the speedup proved (issue 30)\n"
    "run 'kernelevolve COMMAND --help' for a command's options\n";

// A progress bar rewritten in place on a terminal (evaluations, best speedup, rate, ETA); on anything
// else, a plain line per improvement, so that logs stay readable.
class Progress final : public ke::Observer {
 public:
  Progress(std::int64_t max_evals, double max_time, bool quiet)
      : max_evals_(max_evals), max_time_(max_time), quiet_(quiet), tty_(isatty(2) != 0) {}

  void on_start(const ke::Spec& spec, const ke::DeviceInfo& device) override {
    start_ = std::chrono::steady_clock::now();
    if (!quiet_)
      std::fprintf(stderr, "evolving %s on %s (%s)\n", spec.name.c_str(), device.id.c_str(), device.name.c_str());
  }

  void on_node(const ke::Node& node, const ke::SearchState& state) override {
    if (first_evaluation_ < 0) first_evaluation_ = state.evaluations - 1;  // a resumed run starts past 0
    if (node.evaluation.status != ke::Status::ok) failed_ += 1;
    const bool improved = node.speedup > best_;
    if (improved) best_ = node.speedup;
    if (quiet_) return;
    const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = run_s > 0 ? double(state.evaluations - first_evaluation_) / run_s : 0;
    if (tty_) {
      // The time left by each limit in force; the bar shows the nearest one.
      double eta = -1, frac = 0;
      if (max_evals_ > 0 && rate > 0) {
        eta = double(max_evals_ - state.evaluations) / rate;
        frac = double(state.evaluations) / double(max_evals_);
      }
      if (max_time_ > 0) {
        const double left = std::max(0.0, max_time_ - state.elapsed_s);
        if (eta < 0 || left < eta) {
          eta = left;
          frac = state.elapsed_s / max_time_;
        }
      }
      frac = std::clamp(frac, 0.0, 1.0);
      const int width = 24;
      const int filled = static_cast<int>(frac * width);
      char eta_text[32] = "?";
      if (eta >= 0) std::snprintf(eta_text, sizeof eta_text, "%.0fs", std::max(0.0, eta));
      std::fprintf(stderr, "\r[%.*s%*s] %lld", filled, "########################", width - filled, "",
                   (long long)state.evaluations);
      if (max_evals_ > 0) std::fprintf(stderr, "/%lld", (long long)max_evals_);
      std::fprintf(stderr, " evals  best %.2fx  failed %lld  %.2f/s  eta %s \x1b[K", best_, (long long)failed_, rate,
                   eta_text);
    } else if (improved || node.id == 0) {
      std::fprintf(stderr, "node %lld: %s %.2fx (%s) after %lld evaluations, %.1f s\n", (long long)node.id,
                   ke::to_string(node.evaluation.status), node.speedup, node.note.c_str(), (long long)state.evaluations,
                   state.elapsed_s);
    }
  }

  // Only the first kernel's failed attempts (no parents): the search's own failures would drown the bar.
  void on_mutator_failure(const ke::Mutation& m, const std::vector<ke::NodeId>& parents) override {
    if (quiet_ || !parents.empty()) return;
    std::fprintf(stderr, "%s%s\n", tty_ ? "\r\x1b[K" : "", m.error.c_str());
  }

  void on_confirmation(const ke::Confirmation& c) override {
    if (quiet_) return;
    if (tty_) std::fprintf(stderr, "\n");
    tty_ = false;  // the bar is done: what follows is lines
    std::fprintf(stderr, "%s node %lld against the seed (%d rounds): %.2fx; the search measured %.2fx\n",
                 c.confirmed ? "confirmed" : "NOT confirmed:", (long long)c.node, c.rounds, c.speedup,
                 c.search_speedup);
  }

  void on_finish(const ke::RunResult&, const ke::SearchGraph&) override {
    if (tty_ && !quiet_) std::fprintf(stderr, "\n");
  }

  // torch.compile's first call may take a minute: say what the run is doing meanwhile.
  void on_baseline(const ke::Baseline& b) override {
    if (quiet_) return;
    const char* label = b.name == "compile" ? "torch.compile" : "PyTorch eager";
    if (b.evaluation.status == ke::Status::pending) {
      std::fprintf(stderr, "%smeasuring the baseline %s ...%s", tty_ ? "\r" : "", label, tty_ ? "\x1b[K" : "\n");
    } else if (b.evaluation.status == ke::Status::ok) {
      std::string times;
      for (const auto& t : b.evaluation.timings) {
        char time[32];
        std::snprintf(time, sizeof time, " %.1f us", t.median_us);
        times += time;
      }
      std::fprintf(stderr, "%sbaseline %s:%s%s", tty_ ? "\r" : "", label, times.c_str(), tty_ ? "\x1b[K\n" : "\n");
    } else {
      std::fprintf(stderr, "%sbaseline %s: no time (%s: %s)%s", tty_ ? "\r" : "", label,
                   ke::to_string(b.evaluation.status), b.evaluation.message.c_str(), tty_ ? "\x1b[K\n" : "\n");
    }
  }

 private:
  std::int64_t max_evals_;
  double max_time_;
  bool quiet_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::int64_t first_evaluation_ = -1;
  double best_ = 0;
  std::int64_t failed_ = 0;
};

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
};

// The problem a PyTorch module makes: its precision, its backward (docs/pytorch-precision.md, "Precision: bf16 and
// fp16 problems", and docs/pytorch-training.md, "Training: backward problems").
void add_problem_variant(po::options_description& d, Common& c) {
  d.add_options()("dtype", po::value(&c.dtype),
                  "bf16 or fp16: a PyTorch problem's float inputs and weights cast to it, as KernelBench's precision "
                  "option does; the reference runs in it, the tolerance is 1e-2 unless the spec gives one")(
      "backward", po::bool_switch(&c.backward),
      "a PyTorch problem's backward: grad_<output> in, grad_<input> and grad_<weight> out, checked against "
      "autograd in float64")("with-forward", po::bool_switch(&c.with_forward),
                             "with --backward: the forward's outputs too, one problem (a training step)")(
      "precision", po::value(&c.precision),
      "as-run (the default for a PyTorch module): the reference, eager and torch.compile run with the TF32 switches "
      "PyTorch has in your environment (cuDNN's on by default), and a candidate's library steps may ask for the same "
      "math; strict: fp32, TF32 off everywhere. Overrides a spec's \"precision\"");
}

void add_common(po::options_description& d, Common& c) {
  d.add_options()(
      "device", po::value(&c.device)->default_value("cpu"),
      "cpu, cuda[:N] or hip[:N]; for run also a list (cuda:0,cuda:1) or cuda:all, and cuda:local under MPI")(
      "json", po::bool_switch(&c.json), "print one JSON object on stdout at the end")(
      "language", po::value(&c.language),
      "a PyTorch problem's kernel language: c or cpp (CPU), cuda (default by --device)")(
      "seed-kernel", po::value(&c.seed_kernel),
      "a seed kernel file, for a problem without one (or instead of its own)")(
      "first", po::value(&c.first),
      "compile: a PyTorch problem's first program (node 0) is what torch.compile generates, translated (CUDA: "
      "Triton; CPU: C++, PyTorch 2.x); the default for a run without a seed or a model");
  add_problem_variant(d, c);
}

// The language a PyTorch problem's candidates are written in: --language, else the device's own.
ke::Language problem_language(const Common& c) {
  if (c.first == "compile" && c.language.empty())  // what Inductor writes there
    return c.device.rfind("cpu", 0) == 0 ? ke::Language::cpp : ke::Language::triton;
  if (!c.language.empty()) {
    const auto l = ke::parse_language(c.language);
    if (!l)
      throw ke::Error(ke::ErrorCode::BadUsage, "--language is c, cpp, cuda, hip or triton, not '" + c.language + "'");
    return *l;
  }
  if (c.device.rfind("cuda", 0) == 0) return ke::Language::cuda;
  if (c.device.rfind("hip", 0) == 0) return ke::Language::hip;
  return ke::Language::c;
}

// A spec file, or a PyTorch problem derived on the spot; with --seed-kernel's source as its seed. Without
// --device, a spec written for a GPU language runs on that kind of GPU (cuda.json: cuda), not on the CPU.
ke::Spec load_cli_problem(Common& c) {
  const bool pytorch = ke::is_pytorch_problem(c.spec_path);
  if (!pytorch && !c.language.empty()) {
    throw ke::Error(ke::ErrorCode::BadUsage, "--language is for a PyTorch problem (.py); a spec file names its own");
  }
  ke::PytorchProblemOptions options;
  options.language = problem_language(c);
  options.device = c.device;
  if (!pytorch && (!c.dtype.empty() || c.backward || c.with_forward)) {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    "--dtype, --backward and --with-forward make a problem of a PyTorch module (.py); a spec file "
                    "says so in its reference: \"dtype\": \"bf16\", \"backward\": true, \"with_forward\": true");
  }
  if (c.dtype == "bf16") {
    options.dtype = ke::DType::bf16;
  } else if (c.dtype == "fp16" || c.dtype == "f16") {
    options.dtype = ke::DType::f16;
  } else if (!c.dtype.empty() && c.dtype != "fp32" && c.dtype != "f32") {
    throw ke::Error(ke::ErrorCode::BadUsage, "--dtype is bf16 or fp16 (fp32: the module's own), not '" + c.dtype + "'");
  }
  if (c.with_forward && !c.backward) throw ke::Error(ke::ErrorCode::BadUsage, "--with-forward goes with --backward");
  options.backward = c.backward;
  options.with_forward = c.with_forward;
  std::optional<ke::PrecisionPolicy> policy;
  if (!c.precision.empty()) {
    policy = ke::parse_precision_policy(c.precision);
    if (!policy) throw ke::Error(ke::ErrorCode::BadUsage, "--precision is as-run or strict, not '" + c.precision + "'");
  }
  options.precision = policy;
  ke::Spec spec = ke::load_problem(c.spec_path, options);
  // A spec file's own policy gives way to --precision; a PyTorch module's was resolved under it already.
  if (policy && !pytorch && (!spec.precision || spec.precision->policy != *policy))
    spec.precision =
        *policy == ke::PrecisionPolicy::as_run ? ke::Precision::as_run_defaults() : ke::Precision::strict_fp32();
  if (!c.device_given && !pytorch) {
    if (!ke::is_cpu_language(spec.language)) c.device = ke::device_kind(spec.language);  // Triton's: cuda
  }
  if (!c.first.empty() && c.first != "compile")
    throw ke::Error(ke::ErrorCode::BadUsage, "--first is 'compile', not '" + c.first + "'");
  if (c.first == "compile") {
    if (!pytorch) throw ke::Error(ke::ErrorCode::BadUsage, "--first compile is for a PyTorch problem (.py)");
    if (!c.seed_kernel.empty())
      throw ke::Error(ke::ErrorCode::BadUsage, "--first compile and --seed-kernel both give a seed");
    std::cerr << "kernelevolve: capturing what torch.compile generates for " << c.spec_path << " ...\n";
    const auto start = std::chrono::steady_clock::now();
    try {
      // Over a device list (run's multi-device evaluator) the program is captured once, on the list's first device.
      ke::seed_from_torch_compile(spec,
                                  ke::is_device_list(c.device) ? ke::expand_device_list(c.device).front() : c.device);
    } catch (const ke::Error& e) {
      // What cannot be captured or translated is named; a model or a command then writes the first kernel.
      const bool untranslated = e.code() == ke::ErrorCode::BadSpec || e.code() == ke::ErrorCode::DeviceUnavailable;
      if (c.writer.empty() && c.first_by_default && untranslated) {
        // Nobody asked for it (a CPU without Inductor: Debian's torch 1.13): say what the user can give instead.
        throw ke::Error(ke::ErrorCode::BadUsage,
                        c.spec_path + " has no seed kernel, and torch.compile's program cannot be had (" + e.what() +
                            "): give a seed with --seed-kernel FILE, or have one written from the reference with "
                            "--mutator command, llm or mix");
      }
      if (c.writer.empty() || !untranslated) throw;
      std::cerr << "kernelevolve: node 0 is not torch.compile's program (" << e.what() << "); the " << c.writer
                << " mutator writes the first kernel\n";
      return spec;
    }
    // The capture's time is said: it is most of a short run's (a compile, at static sizes then maybe dynamic).
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "kernelevolve: node 0 is torch.compile's program, translated (captured in %.1f s): %s\n", took,
                 spec.notes.substr(0, spec.notes.find('\n')).c_str());
  }
  if (!c.seed_kernel.empty()) {
    std::ifstream in(c.seed_kernel, std::ios::binary);
    if (!in) throw ke::Error(ke::ErrorCode::BadUsage, "--seed-kernel: cannot read " + c.seed_kernel);
    std::ostringstream text;
    text << in.rdbuf();
    spec.seed.source = text.str();
    spec.seed.file = c.seed_kernel;
    spec.seed.language.reset();
    spec.validate();
  }
  return spec;
}

po::variables_map parse(const std::vector<std::string>& args, po::options_description& d, Common& c) {
  d.add_options()("help,h", "this help")("spec", po::value(&c.spec_path), "the spec file");
  po::positional_options_description pos;
  pos.add("spec", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
  po::notify(vm);
  c.device_given = vm.count("device") && !vm["device"].defaulted();
  return vm;
}

int cmd_devices(const std::vector<std::string>& args) {
  po::options_description d("devices");
  Common c;
  bool sandbox_info = false;
  d.add_options()("json", po::bool_switch(&c.json), "JSON on stdout")(
      "sandbox-info", po::bool_switch(&sandbox_info), "only which confinements a worker gets on this machine");
  po::variables_map vm = parse(args, d, c);
  if (vm.count("help")) {
    std::cout << kUsage << d;
    return 0;
  }
  if (sandbox_info) {  // what a CPU worker started now would have (kernelevolve/sandbox.hpp)
    const ke::SandboxReport& sandbox = ke::sandbox_support();
    if (c.json) {
      std::cout << sandbox.to_json() << "\n";
    } else {
      std::cout << "sandbox: strict (the default; --sandbox basic|off to change)\n";
      for (const auto& a : sandbox.active) std::cout << "  active:  " << a << "\n";
      for (const auto& m : sandbox.missing) std::cout << "  missing: " << m << "\n";
      std::cout << "  GPU workers: seccomp allow-list with the driver's allowances, no namespaces\n";
    }
    return 0;
  }
  const auto devices = ke::list_devices();
  const auto backends = ke::backend_status();
  if (c.json) {
    // One object, as every --json: the devices, and each backend with why it cannot be used.
    std::string out = "{\"devices\": [";
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const auto& dv = devices[i];
      out += std::string(i ? ", " : "") + "{\"id\": " + ke::json_quote(dv.id) +
             ", \"kind\": " + ke::json_quote(dv.kind) + ", \"name\": " + ke::json_quote(dv.name) +
             ", \"compute_units\": " + std::to_string(dv.compute_units) +
             ", \"vector_bits\": " + std::to_string(dv.vector_bits) + ", \"properties\": {";
      bool first = true;
      for (const auto& [k, v] : dv.properties) {
        out += std::string(first ? "" : ", ") + ke::json_quote(k) + ": " + ke::json_quote(v);
        first = false;
      }
      out += "}}";
    }
    out += "], \"backends\": [";
    for (std::size_t i = 0; i < backends.size(); ++i) {
      const auto& b = backends[i];
      out += std::string(i ? ", " : "") + "{\"kind\": " + ke::json_quote(b.kind) +
             ", \"available\": " + (b.available ? "true" : "false") + ", \"devices\": " + std::to_string(b.devices) +
             ", \"reason\": " + ke::json_quote(b.reason) + "}";
    }
    // The confinements a worker gets here (the same as devices --sandbox-info --json).
    std::cout << out << "], \"sandbox\": " << ke::sandbox_support().to_json() << "}\n";
    return 0;
  }
  for (const auto& dv : devices) {
    std::cout << dv.id << "  " << dv.name << "  (" << dv.compute_units << " compute units, " << dv.vector_bits
              << "-bit vectors)\n";
    for (const auto& [k, v] : dv.properties) std::cout << "    " << k << ": " << v << "\n";
  }
  // Indented, so that no line but a device's starts with its id (scripts count "^cuda:" lines).
  std::cout << "backends:\n";
  for (const auto& b : backends) {
    std::cout << "  " << b.kind << std::string(b.kind.size() < 6 ? 6 - b.kind.size() : 1, ' ');
    if (b.available) std::cout << "available, " << b.devices << (b.devices == 1 ? " device\n" : " devices\n");
    else std::cout << "unavailable: " << b.reason << "\n";
  }
  // What a CPU worker gets here in the default mode (devices --sandbox-info: one per line).
  std::cout << "sandbox:\n  " << ke::sandbox_support().summary() << "\n";
  return 0;
}

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

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (char ch : text + ",") {
    if (ch == ',') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else if (ch != ' ') {
      item += ch;
    }
  }
  return out;
}

// Opens the store of a run, with a hint when the default place beside the spec cannot be written.
std::shared_ptr<ke::Store> open_store(const std::string& path, bool defaulted) {
  try {
    return std::make_shared<ke::Store>(path);
  } catch (const ke::Error& e) {
    if (e.code() != ke::ErrorCode::Internal || !defaulted) throw;
    throw ke::Error(e.code(),
                    std::string(e.what()) +
                        " (the default database sits beside the spec; choose another with --db FILE, or --no-db)");
  }
}

// --llm-price IN,OUT: US dollars per million prompt and completion tokens.
ke::LlmPrice parse_llm_price(const std::string& text) {
  auto refuse = [&](const std::string& why) {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    "--llm-price takes IN,OUT, the US dollars per million prompt and completion "
                    "tokens (e.g. --llm-price 2.5,10): '" +
                        text + "' " + why);
  };
  const std::size_t comma = text.find(',');
  if (comma == std::string::npos || text.find(',', comma + 1) != std::string::npos) refuse("is not two numbers");
  double price[2];
  const std::string parts[2] = {text.substr(0, comma), text.substr(comma + 1)};
  for (int i = 0; i < 2; ++i) {
    char* end = nullptr;
    price[i] = std::strtod(parts[i].c_str(), &end);
    if (parts[i].empty() || end != parts[i].c_str() + parts[i].size() || !std::isfinite(price[i]))
      refuse("is not two numbers");
    if (price[i] < 0) refuse("has a negative price");
  }
  return {price[0], price[1]};
}

// A per-model option (--llm-url, --llm-api-key-env, --llm-api, --llm-price): given once, for every model; or
// once per --llm-model, paired in order; `fallback` when not given.
std::vector<std::string> per_model(const std::vector<std::string>& given, std::size_t models,
                                   const std::string& fallback, const std::string& option) {
  if (given.empty()) return std::vector<std::string>(models, fallback);
  if (given.size() == 1) return std::vector<std::string>(models, given[0]);
  if (given.size() == models) return given;
  throw ke::Error(ke::ErrorCode::BadUsage,
                  "--" + option + " is given " + std::to_string(given.size()) + " times for " + std::to_string(models) +
                      " --llm-model: give it once for every model, or " + "once per model, in the order of the models");
}

// "--llm-price -1,2": a value that starts with '-' would read as an option; joined to its option it reads
// as the value it is, and is refused for what it says.
std::vector<std::string> join_signed_values(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool takes_number = args[i] == "--llm-price" || args[i] == "--max-cost";
    if (takes_number && i + 1 < args.size() && args[i + 1].size() > 1 && args[i + 1][0] == '-' &&
        (std::isdigit(static_cast<unsigned char>(args[i + 1][1])) || args[i + 1][1] == '.')) {
      out.push_back(args[i] + "=" + args[i + 1]);
      ++i;
    } else {
      out.push_back(args[i]);
    }
  }
  return out;
}

int cmd_run(const std::vector<std::string>& args) {
  po::options_description d("run options");
  Common c;
  add_common(d, c);
  std::int64_t max_evals = 64, plateau = 0, max_tokens = 0, run_id = 0;
  double max_time = 0, target = 0;
  std::string policy = ke::default_policy_name(), mutator = "param", command, db, features;
  std::uint64_t seed = 1;
  int jobs = 0;  // 0: by device (see --jobs)
  double timeout = 0, command_timeout = 300;
  bool in_process = false, resume = false, no_db = false, no_reuse = false, use_mpi = false, counters = false;
  double mpi_rank_timeout = 15;
  std::string ncu_path;
  std::string sandbox_name = "strict";
  ke::PolicyOptions popt;
  ke::LlmOptions llm;
  // Per model, paired in order (per_model): several models share the run through a bandit (ModelPoolMutator).
  std::vector<std::string> llm_urls, llm_models, llm_key_envs, llm_apis, llm_price_texts;
  double max_cost = 0;
  int llm_param_steps = 4;
  std::vector<std::string> warm_stores;
  int warm_max = 3;
  std::string prior_sweep;
  d.add_options()("max-evals", po::value(&max_evals)->default_value(64),
                  "stop after N evaluations (the seed included)")(
      "max-time", po::value(&max_time), "stop after SEC seconds")("target-speedup", po::value(&target),
                                                                  "stop once the best is X times faster than the seed")(
      "plateau", po::value(&plateau), "stop after N evaluations without an improvement")(
      "max-tokens", po::value(&max_tokens), "stop once the mutator has spent N model tokens")(
      "max-cost", po::value(&max_cost), "stop once the model calls have cost USD dollars (needs --llm-price)")(
      "policy", po::value(&policy)->default_value(ke::default_policy_name()),
      "selection policy: greedy, ucb, epsilon-greedy, tournament, islands, random or model (default: model for a "
      "space of 3 points or more where the build has XGBoost, else greedy)")(
      "epsilon", po::value(&popt.epsilon)->default_value(popt.epsilon, "0.2"),
      "epsilon-greedy: chance of a random ok node")(
      "tournament-size", po::value(&popt.tournament_size)->default_value(popt.tournament_size),
      "tournament: nodes drawn per selection")("ucb-c",
                                               po::value(&popt.exploration)->default_value(popt.exploration, "0.2"),
                                               "ucb: weight of the exploration term")(
      "islands", po::value(&popt.islands)->default_value(popt.islands), "islands: number of islands")(
      "migration-interval", po::value(&popt.migration_interval)->default_value(popt.migration_interval),
      "islands: evaluations between migrations")(
      "prior-sweep", po::value(&prior_sweep),
      "model: a sweep of this problem on another device (kernelevolve sweep), as the model's prior knowledge")(
      "features", po::value(&features),
      "islands: MAP-Elites axes, comma-separated: a tunable's name, source_length, resource:NAME (default: the first tunable)")(
      "mutator", po::value(&mutator)->default_value("param"),
      "param (the tunables), command (an external program), llm (a language model), or mix (the model or the "
      "command writes structures, the parameter search tunes each)")(
      "llm-url", po::value(&llm_urls)->composing(),
      "the model server's base URL, e.g. https://api.openai.com/v1 (once for every model, or once per --llm-model)")(
      "llm-model", po::value(&llm_models)->composing(),
      "the model's name; give it again for more models, among which a bandit picks by improvement per dollar")(
      "llm-api-key-env", po::value(&llm_key_envs)->composing(),
      "the environment variable that holds the API key (once, or once per model)")(
      "llm-api", po::value(&llm_apis)->composing(),
      "openai (chat completions, the default) or anthropic (messages); once, or once per model")(
      "llm-price", po::value(&llm_price_texts)->composing(),
      "IN,OUT: US dollars per million prompt and completion tokens (once, or once per model); a resumed run keeps its own")(
      "llm-memory", po::value(&llm.memory)->default_value("both"),
      "what the prompt remembers: inherit, siblings, both or fresh")(
      "llm-knowledge", po::value(&llm.knowledge_dirs)->composing(),
      "a folder of your own markdown for the knowledge base")("llm-timeout",
                                                              po::value(&llm.timeout_s)->default_value(llm.timeout_s),
                                                              "time limit of one model request, seconds")(
      "llm-temperature", po::value(&llm.temperature)->default_value(llm.temperature, "0.7"), "sampling temperature")(
      "llm-max-answer-tokens", po::value(&llm.max_tokens)->default_value(llm.max_tokens),
      "the longest answer, in tokens")("llm-in-flight", po::value(&llm.max_in_flight)->default_value(llm.max_in_flight),
                                       "model requests at once, at most")(
      "llm-param-steps", po::value(&llm_param_steps)->default_value(4),
      "mix: parameter steps on each new structure before the model runs again")(
      "command", po::value(&command), "the command mutator's program, run through /bin/sh once per child")(
      "command-timeout", po::value(&command_timeout)->default_value(300), "time limit of one command run, seconds")(
      "jobs", po::value(&jobs),
      "candidates evaluated at once per device, each in its own worker (default: 1 on a CPU, whose timings "
      "other work would disturb; 3 on a GPU, where the next candidates compile and verify while one is timed)")(
      "timeout", po::value(&timeout)->default_value(0),
      "time limit per candidate, seconds (0: 10x the seed's evaluation, at least 10 s)")(
      "in-process", po::bool_switch(&in_process),
      "evaluate in this process, without workers: faster, but a crashing candidate ends the run")(
      "seed", po::value(&seed)->default_value(1), "random seed of the search")(
      "mpi", po::bool_switch(&use_mpi), "evaluate on MPI ranks: rank 0 searches and keeps the database")(
      "mpi-rank-timeout", po::value(&mpi_rank_timeout)->default_value(15),
      "a busy rank silent this long (seconds) is given up on, and its candidate re-queued")(
      "db", po::value(&db), "the database of runs (default: SPEC.kernelevolve.db beside the spec)")(
      "no-db", po::bool_switch(&no_db), "keep nothing on disk")(
      "resume", po::bool_switch(&resume), "go on with the latest run of this spec in the database (or --run ID)")(
      "run", po::value(&run_id), "with --resume: the run to go on with")(
      "no-reuse", po::bool_switch(&no_reuse),
      "measure every candidate, even one the database holds a measurement of (same spec, same device)")(
      "sandbox", po::value(&sandbox_name)->default_value("strict"),
      "how workers confine candidates: strict (allow-list, namespaces), basic (deny-list) or off")(
      "warm-start", po::value(&warm_stores)->composing(),
      "a database of other runs: their best kernels of this operator (same spec name, family or signature) are "
      "tried first, as extra parents; repeatable")("warm-start-max", po::value(&warm_max)->default_value(3),
                                                   "with --warm-start: how many kernels to take, at most")(
      "counters", po::bool_switch(&counters),
      "on a GPU, read each new best's hardware counters (DRAM throughput, achieved occupancy, stall reasons) with "
      "Nsight Compute: kept on the node, shown by show and given to the model; seconds per new best")(
      "ncu", po::value(&ncu_path),
      "with --counters: Nsight Compute's ncu (default: $KE_NCU, ncu on PATH, /usr/local/cuda/bin/ncu)");
  po::variables_map vm = parse(join_signed_values(args), d, c);
  if (vm.count("help")) {
    std::cout << kUsage << d;
    return 0;
  }
  if (c.spec_path.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  // The models, each with its endpoint, key, api and price: checked before any worker starts.
  std::vector<ke::LlmPrice> llm_prices;
  for (const std::string& text : per_model(llm_price_texts, llm_models.size(), "0,0", "llm-price")) {
    llm_prices.push_back(parse_llm_price(text));
  }
  if (!llm_price_texts.empty() && llm_models.empty()) {
    throw ke::Error(ke::ErrorCode::BadUsage, "--llm-price prices the calls of a --llm-model: give one");
  }
  llm_urls = per_model(llm_urls, llm_models.size(), "", "llm-url");
  llm_key_envs = per_model(llm_key_envs, llm_models.size(), "", "llm-api-key-env");
  llm_apis = per_model(llm_apis, llm_models.size(), "openai", "llm-api");
  if (vm.count("max-cost") && (!(max_cost > 0) || !std::isfinite(max_cost))) {
    throw ke::Error(ke::ErrorCode::BadUsage, "--max-cost must be a positive number of US dollars");
  }
  if (vm.count("max-cost") && (llm_models.empty() || (llm_price_texts.empty() && !resume))) {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    "--max-cost needs model calls with a price: --llm-model NAME --llm-price IN,OUT");
  }
  if (mutator == "llm" && llm_models.empty())
    throw ke::Error(ke::ErrorCode::BadUsage, "--mutator llm needs --llm-model NAME");
  if (max_evals < 1) throw ke::Error(ke::ErrorCode::BadUsage, "--max-evals must be at least 1");
  if (vm.count("jobs") && jobs < 1) throw ke::Error(ke::ErrorCode::BadUsage, "--jobs must be at least 1");
  if (timeout < 0) throw ke::Error(ke::ErrorCode::BadUsage, "--timeout must not be negative");
  if (vm.count("plateau") && plateau < 1) throw ke::Error(ke::ErrorCode::BadUsage, "--plateau must be at least 1");
  if (vm.count("max-tokens") && max_tokens < 1)
    throw ke::Error(ke::ErrorCode::BadUsage, "--max-tokens must be at least 1");
  if (in_process && jobs > 1)
    throw ke::Error(ke::ErrorCode::BadUsage, "--in-process evaluates one candidate at a time: drop --jobs");
  if (no_db && (vm.count("db") || resume))
    throw ke::Error(ke::ErrorCode::BadUsage, "--no-db cannot go with --db or --resume");
  if (vm.count("run") && !resume) throw ke::Error(ke::ErrorCode::BadUsage, "--run ID goes with --resume");
  popt.features = split_list(features);
  // The mutator's choice is checked before any worker starts.
  if (mutator != "param" && mutator != "command" && mutator != "llm" && mutator != "mix") {
    throw ke::Error(ke::ErrorCode::BadUsage, "unknown mutator '" + mutator + "' (known: param, command, llm, mix)");
  }
  if ((mutator == "command" || (mutator == "mix" && llm_models.empty())) && command.empty()) {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    "--mutator " + mutator + " needs --command CMD" + (mutator == "mix" ? " or --llm-model NAME" : ""));
  }
  // A PyTorch problem has no seed: without one or a model, the first program is torch.compile's (issue 31), the
  // problem derived in the language Inductor writes, unless the user chose another: Triton on a CUDA GPU, C++ on
  // the CPU (where PyTorch has no Inductor, 1.13, the capture says so).
  if (mutator != "param") c.writer = mutator;
  if (mutator == "param" && c.first.empty() && c.seed_kernel.empty() && ke::is_pytorch_problem(c.spec_path) &&
      ((c.device.rfind("cuda", 0) == 0 && (c.language.empty() || c.language == "triton")) ||
       (c.device.rfind("cpu", 0) == 0 && (c.language.empty() || c.language == "cpp")))) {
    c.first = "compile";
    c.first_by_default = true;
  }
  ke::Spec spec = load_cli_problem(c);
  // Other runs' kernels of this operator, found before any worker starts: a bad database is bad input.
  std::vector<ke::WarmKernel> warm;
  if (!warm_stores.empty()) {
    if (warm_max < 1) throw ke::Error(ke::ErrorCode::BadUsage, "--warm-start-max must be at least 1");
    warm = ke::find_warm_kernels(warm_stores, spec, static_cast<std::size_t>(warm_max));
    std::string where;
    for (const std::string& store : warm_stores) where += (where.empty() ? "" : ", ") + store;
    if (warm.empty()) {
      std::fprintf(stderr,
                   "kernelevolve: --warm-start: no run in %s has a correct kernel of this operator (same name, "
                   "family or signature, same language and arguments); the run starts from its seed alone\n",
                   where.c_str());
    } else if (!c.json) {
      for (const ke::WarmKernel& w : warm) {
        std::fprintf(stderr, "warm start: %s (run %lld of %s, %s): %.2fx over its seed there, same %s\n",
                     w.spec_name.c_str(), (long long)w.run, w.store.c_str(), w.device.c_str(), w.speedup,
                     w.match.c_str());
      }
    }
  }
  if (vm["policy"].defaulted()) {  // by the size of the space: the model where it pays (default_policy_name)
    std::size_t points = 0;
    try {
      points = ke::tunable_space(spec).size();
    } catch (const ke::Error&) {
      points = static_cast<std::size_t>(-1);  // too large to count: large
    }
    policy = ke::default_policy_name(points);
  }
  if (!prior_sweep.empty()) {
    if (policy != "model")
      throw ke::Error(ke::ErrorCode::BadUsage, "--prior-sweep is the model policy's prior: it needs --policy model");
    popt.prior = ke::sweep_prior(ke::read_sweep(prior_sweep), spec);
  }
  if (!vm.count("jobs")) {
    // Timing on a GPU holds the device alone, and compilation and verification are host work: overlap them.
    const bool gpu = c.device.rfind("cuda", 0) == 0 || c.device.rfind("hip", 0) == 0;
    jobs = gpu && !in_process ? 3 : 1;
  }
  // Without a seed, a model or a command writes the first kernel; the parameter search has nothing to tune.
  if (spec.seed.source.empty() && mutator == "param") {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    c.spec_path +
                        " has no seed kernel, and the parameter mutator only tunes an existing kernel, so "
                        "it cannot write the first one: give a seed with --seed-kernel FILE (or \"seed\" in the spec), "
                        "have one written from the reference with --mutator command, llm or mix, or (a PyTorch "
                        "problem on a CUDA GPU, or on the CPU with PyTorch 2.x) start from torch.compile's program "
                        "with --first compile.");
  }
  ke::WorkerOptions wo;
  wo.jobs = jobs;
  wo.timeout_s = timeout;
  // Parallel workers must not time at once: one lock file per device, shared by every run on this host.
  wo.eval.timing_lock = ke::default_timing_lock(c.device);
  const std::optional<ke::SandboxMode> sandbox = ke::parse_sandbox_mode(sandbox_name);
  if (!sandbox)
    throw ke::Error(ke::ErrorCode::BadUsage, "--sandbox is strict, basic or off, not '" + sandbox_name + "'");
  wo.sandbox = *sandbox;
  if (counters) {
    if (c.device.rfind("cpu", 0) == 0) {
      throw ke::Error(ke::ErrorCode::BadUsage,
                      "--counters reads a GPU's hardware counters with Nsight Compute; the "
                      "device " +
                          c.device + " has none to read (pick a GPU with --device)");
    }
    if (in_process)
      throw ke::Error(ke::ErrorCode::BadUsage, "--counters profiles a worker under Nsight Compute: drop --in-process");
    wo.nsight_compute = ncu_path.empty() ? ke::find_nsight_compute() : ncu_path;
    if (wo.nsight_compute.empty() || ::access(wo.nsight_compute.c_str(), X_OK) != 0) {
      throw ke::Error(ke::ErrorCode::BadUsage,
                      "--counters needs Nsight Compute's ncu: " +
                          (ncu_path.empty() ? std::string("none in $KE_NCU, on PATH or at /usr/local/cuda/bin/ncu")
                                            : "'" + ncu_path + "' is not an executable") +
                          "; give its path with --ncu, or drop --counters");
    }
  }
  // What the report and the database say of it: `off` is never silent.
  const std::string sandbox_said = in_process ? "none (--in-process: candidates ran in this process)"
                                   : *sandbox == ke::SandboxMode::off
                                       ? "off (asked for): candidates ran with all of this user's rights"
                                       : sandbox_name;
  if (use_mpi) {
    if (in_process) throw ke::Error(ke::ErrorCode::BadUsage, "--mpi evaluates on other ranks: drop --in-process");
    if (ke::mpi_init(nullptr, nullptr) != 0) {
      // Every rank but 0 serves evaluations on its own device, and keeps nothing.
      const long served = ke::mpi_serve(c.device, wo);
      if (!c.json) std::fprintf(stderr, "rank %d: evaluated %ld candidates\n", ke::mpi_rank(), served);
      return 0;
    }
  }
  std::shared_ptr<ke::SelectionPolicy> pol = ke::make_policy(policy, popt);
  std::vector<std::shared_ptr<ke::StopRule>> rules{ke::max_evaluations(max_evals)};
  if (vm.count("max-time")) rules.push_back(ke::max_time(max_time));
  if (vm.count("target-speedup")) rules.push_back(ke::target_speedup(target));
  if (vm.count("plateau")) rules.push_back(ke::plateau(plateau));
  if (vm.count("max-tokens")) rules.push_back(ke::token_budget(max_tokens));
  if (vm.count("max-cost")) rules.push_back(ke::cost_budget(max_cost));
  std::shared_ptr<ke::FitnessEvaluator> evaluator;
  int concurrent = jobs;
  const bool device_list = ke::is_device_list(c.device);
  std::vector<std::string> device_ids;  // of a device list, in the order its evaluations are counted
  std::shared_ptr<ke::MpiEvaluator> mpi;
  std::shared_ptr<ke::MultiDeviceEvaluator> multi_devices;
  if (use_mpi) {
    ke::MpiOptions mo;
    mo.rank_silence_s = mpi_rank_timeout;
    mpi = std::make_shared<ke::MpiEvaluator>(spec, wo, mo);
    concurrent = mpi->live_ranks();
    std::fprintf(stderr, "MPI: %d evaluation ranks\n", concurrent);
    for (const auto& lost : mpi->lost_ranks()) std::fprintf(stderr, "MPI: lost %s\n", lost.c_str());
    evaluator = mpi;
  } else if (in_process) {
    if (device_list)
      throw ke::Error(ke::ErrorCode::BadUsage, "--in-process evaluates on one device: give one --device");
    evaluator = std::make_shared<ke::LocalEvaluator>(spec, ke::open_device(c.device));
  } else if (device_list) {
    // One worker per device and `jobs` per device: every device kept busy, each timing only its own.
    device_ids = ke::expand_device_list(c.device);
    auto multi = std::make_shared<ke::MultiDeviceEvaluator>(spec, device_ids, wo, jobs);
    concurrent = multi->slots();
    evaluator = multi;
    multi_devices = multi;
  } else {
    auto workers = std::make_shared<ke::WorkerEvaluator>(spec, c.device, wo);
    concurrent = workers->jobs();  // lowered where the device's memory holds fewer (it said so)
    evaluator = workers;
  }
  const ke::DeviceInfo info = evaluator->device_info();
  // What the model is told of the device: the ceilings a kernel can reach, the toolchain, the limits.
  llm.device_description = ke::describe_device_for_model(info, spec.language, &wo);
  std::shared_ptr<ke::Mutator> mut;
  std::shared_ptr<ke::Mutator> writer;  // what writes new structures, for llm and mix
  if (mutator == "llm" || (mutator == "mix" && !llm_models.empty())) {
    std::vector<std::shared_ptr<ke::LlmMutator>> models;
    for (std::size_t i = 0; i < llm_models.size(); ++i) {
      ke::LlmOptions o = llm;
      o.model = llm_models[i];
      o.base_url = llm_urls[i];
      o.api_key_env = llm_key_envs[i];
      o.api = llm_apis[i];
      o.price = llm_prices[i];
      models.push_back(std::make_shared<ke::LlmMutator>(o));  // refuses a missing model or a bad memory mode
    }
    if (models.size() == 1) {
      writer = models.front();
    } else {
      writer = std::make_shared<ke::ModelPoolMutator>(models);  // refuses a model given twice
    }
  } else if (mutator == "command" || mutator == "mix") {
    writer = std::make_shared<ke::CommandMutator>(command, command_timeout);
  }
  if (mutator == "param") {
    mut = std::make_shared<ke::ParamMutator>();
  } else if (mutator == "mix") {
    mut = std::make_shared<ke::MixMutator>(writer, std::make_shared<ke::ParamMutator>(), llm_param_steps);
  } else {
    mut = writer;
  }
  if (vm.count("max-cost") && !resume && mut->prices().empty()) {  // --llm-price 0,0, say: a budget never spent
    throw ke::Error(ke::ErrorCode::BadUsage, "--max-cost needs model calls with a price, and no model has one above 0");
  }

  // The database is opened once the device is: a run that cannot start leaves no file behind.
  std::shared_ptr<ke::Store> store;
  if (!no_db) store = open_store(db.empty() ? ke::default_store_path(c.spec_path) : db, db.empty());
  ke::RunId run = 1;
  std::optional<ke::Checkpoint> checkpoint;
  std::shared_ptr<ke::ReusingEvaluator> reusing;
  if (store) {
    if (resume) {
      std::optional<ke::RunId> found = vm.count("run") ? std::optional<ke::RunId>(run_id) : store->latest_run(spec);
      if (!found) {
        throw ke::Error(ke::ErrorCode::BadUsage, store->path() + " holds no run of this spec (" + spec.name +
                                                     ") to resume; drop --resume to start one");
      }
      const ke::RunInfo r = store->run(*found);
      if (r.spec_hash != ke::spec_hash(spec)) {
        throw ke::Error(ke::ErrorCode::BadUsage,
                        "run " + std::to_string(r.id) + " of " + store->path() + " was of another spec (" +
                            r.spec_name + ", or this one since edited): it cannot be resumed with " + c.spec_path);
      }
      if (r.device.kind != info.kind || r.device.name != info.name) {
        throw ke::Error(ke::ErrorCode::BadUsage, "run " + std::to_string(r.id) + " of " + store->path() + " ran on " +
                                                     r.device.id + " (" + r.device.name + "), not on " + info.id +
                                                     " (" + info.name +
                                                     "): resume it there, or drop --resume to start a run here");
      }
      if (vm.count("max-cost") && r.settings.llm_prices.empty() && llm_price_texts.empty()) {
        throw ke::Error(ke::ErrorCode::BadUsage, "--max-cost: run " + std::to_string(r.id) +
                                                     " has no price for its "
                                                     "models; give one with --llm-price IN,OUT");
      }
      run = r.id;
      checkpoint = store->resume(run);
      // The run goes on at the prices it began with, whatever this command line says (docs/model-mutator.md, "Cost in
      // dollars").
      for (const std::string& line : ke::keep_run_prices(*store, run, *mut)) std::fprintf(stderr, "%s\n", line.c_str());
    } else {
      // The sandbox's mode is stored with the run's options, named even when it was the default.
      const std::string options_text =
          joined(args) + (vm["sandbox"].defaulted() && !in_process ? " --sandbox strict" : "");
      run = store->begin_run(spec, info, {policy, mutator, seed, options_text, mut->prices()});
    }
    if (!no_reuse) {
      reusing = std::make_shared<ke::ReusingEvaluator>(evaluator, store, spec);
      evaluator = reusing;
    }
  }
  ke::EvolverOptions options;
  options.seed = seed;
  options.jobs = std::max(1, concurrent);
  options.warm_start = std::move(warm);
  options.hardware_counters = counters;
  ke::Evolver evolver(spec, evaluator, mut, pol, ke::any_of(rules), options);
  if (checkpoint) {
    if (!c.json) {
      std::fprintf(stderr, "resuming run %lld of %s: %zu nodes\n", (long long)run, store->path().c_str(),
                   checkpoint->graph.size());
    }
    evolver.resume(std::move(*checkpoint));
  }
  Progress progress(max_evals, vm.count("max-time") ? max_time : 0, false);
  evolver.add_observer(&progress);
  std::optional<ke::StoreRecorder> recorder;
  if (store) {
    recorder.emplace(store, run, reusing.get());
    evolver.add_observer(&*recorder);
  }
  const ke::RunResult result = evolver.run();
  if (mpi) {
    for (const auto& lost : mpi->lost_ranks()) std::fprintf(stderr, "MPI: lost %s\n", lost.c_str());
  }
  if (multi_devices) {  // on stderr, so that --json output stays one document
    const std::vector<long> counts = multi_devices->evaluations_per_device();
    std::string line = "evaluations per device:";
    for (std::size_t i = 0; i < device_ids.size() && i < counts.size(); ++i) {
      line += (i ? ", " : " ") + device_ids[i] + " " + std::to_string(counts[i]);
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  if (counters && !result.counters_error.empty()) {  // on stderr, as above
    std::fprintf(stderr, "hardware counters: %s%s\n", result.counters_error.c_str(),
                 result.counted_nodes ? "" : " (none were read in this run)");
  }
  if (result.best_by_device.size() > 1 && !c.json) {
    for (const auto& [cls, id] : result.best_by_device) {
      std::fprintf(stderr, "best on %s: node %lld, %.2fx over the seed there\n", cls.c_str(), (long long)id,
                   evolver.graph().node(id).speedup);
    }
  }
  if (c.json) {
    std::string report = ke::run_report_json(spec, info, evolver.graph(), result, run);
    if (const auto end = report.rfind('}'); end != std::string::npos) {
      report.insert(end, ", \"sandbox\": " + ke::json_quote(in_process ? "none" : sandbox_name));
    }
    std::cout << report << "\n";
  } else {
    std::cout << ke::run_report_text(spec, info, evolver.graph(), result);
    std::cout << "  sandbox: " << sandbox_said << "\n";
    if (store) {
      std::cout << "  database: " << store->path() << ", run " << run;
      if (reusing && reusing->reused() > 0) std::cout << " (" << reusing->reused() << " measurements reused)";
      std::cout << "\n";
    }
  }
  return result.best ? 0 : 1;
}

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

// The options shared by show, best and export: the database and the run in it.
struct StoredRun {
  std::shared_ptr<ke::Store> store;
  ke::RunId run = 0;
};

StoredRun open_run(const std::string& db, const po::variables_map& vm, ke::RunId run_id) {
  StoredRun r;
  r.store = std::make_shared<ke::Store>(db, ke::Store::Mode::read_only);
  if (vm.count("run")) {
    r.run = r.store->run(run_id).id;  // throws for an unknown run
  } else if (const auto latest = r.store->latest_run()) {
    r.run = *latest;
  } else {
    throw ke::Error(ke::ErrorCode::BadUsage, db + " holds no run yet");
  }
  return r;
}

void write_output(const std::string& text, const std::string& file) {
  if (file.empty() || file == "-") {
    std::cout << text;
    return;
  }
  std::ofstream out(file, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw ke::Error(ke::ErrorCode::BadUsage, "cannot write " + file);
}

po::variables_map parse_db_command(const std::vector<std::string>& args, po::options_description& d, std::string& db) {
  d.add_options()("help,h", "this help")("db", po::value(&db), "the database");
  po::positional_options_description pos;
  pos.add("db", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
  po::notify(vm);
  return vm;
}

int cmd_show(const std::vector<std::string>& args) {
  po::options_description d("show options");
  std::string db;
  ke::RunId run_id = 0;
  std::size_t limit = 0;
  ke::NodeId node = -1;
  d.add_options()("run", po::value(&run_id), "the run (default: the latest)")(
      "limit", po::value(&limit)->default_value(0), "show only the first N nodes (0: all)")(
      "node", po::value(&node), "show one node in full: its times, diagnosis, resources, mismatch and compiler log");
  po::variables_map vm = parse_db_command(args, d, db);
  if (vm.count("help") || db.empty()) {
    (vm.count("help") ? std::cout : std::cerr) << kUsage << d;
    return vm.count("help") ? 0 : 2;
  }
  const StoredRun r = open_run(db, vm, run_id);
  const auto runs = r.store->runs();
  if (runs.size() > 1) {
    std::cout << db << " holds " << runs.size() << " runs:";
    for (const auto& info : runs)
      std::cout << " " << info.id << " (" << info.spec_name << ", " << info.nodes << " nodes)";
    std::cout << "; --run ID picks one\n";
  }
  if (vm.count("node")) {
    std::cout << ke::show_node_text(*r.store, r.run, node);
    return 0;
  }
  std::cout << ke::show_run_text(*r.store, r.run, limit);
  return 0;
}

int cmd_best(const std::vector<std::string>& args) {
  po::options_description d("best options");
  std::string db, output;
  ke::RunId run_id = 0;
  d.add_options()("run", po::value(&run_id), "the run (default: the latest)")(
      "output,o", po::value(&output), "write the source to FILE (default: standard output)");
  po::variables_map vm = parse_db_command(args, d, db);
  if (vm.count("help") || db.empty()) {
    (vm.count("help") ? std::cout : std::cerr) << kUsage << d;
    return vm.count("help") ? 0 : 2;
  }
  const StoredRun r = open_run(db, vm, run_id);
  const auto source = ke::best_kernel_source(*r.store, r.run);
  if (!source) {
    std::cerr << "kernelevolve: run " << r.run << " of " << db << " has no correct kernel\n";
    return 1;
  }
  write_output(*source, output);
  return 0;
}

int cmd_export(const std::vector<std::string>& args) {
  po::options_description d("export options");
  std::string db, output, format;
  ke::RunId run_id = 0;
  ke::NodeId node = -1;
  d.add_options()("run", po::value(&run_id), "the run (default: the latest)")(
      "format", po::value(&format), "json or dot (Graphviz): the run's graph; torch: a PyTorch operator's module")(
      "node", po::value(&node), "torch: the node (default: the run's best)")(
      "output,o", po::value(&output), "write to FILE (default: standard output)");
  po::variables_map vm = parse_db_command(args, d, db);
  if (vm.count("help") || db.empty()) {
    (vm.count("help") ? std::cout : std::cerr) << kUsage << d;
    return vm.count("help") ? 0 : 2;
  }
  if (format.empty() && output.size() > 4) format = output.substr(output.rfind('.') + 1);
  if (format == "gv") format = "dot";
  if (format == "py") format = "torch";
  if (format != "json" && format != "dot" && format != "torch") {
    throw ke::Error(ke::ErrorCode::BadUsage, "--format must be json, dot or torch");
  }
  if (vm.count("node") && format != "torch") throw ke::Error(ke::ErrorCode::BadUsage, "--node is for --format torch");
  const StoredRun r = open_run(db, vm, run_id);
  if (format == "torch") {
    ke::CallableChoice choice;
    choice.run = r.run;
    if (vm.count("node")) choice.node = node;
    const ke::StoredProgram found = ke::find_stored_program(db, choice);
    write_output(ke::torch_module_source(found.provenance, output == "-" ? "" : output), output);
    if (!output.empty() && output != "-") {
      std::cerr << "kernelevolve: wrote " << output << ": run " << found.provenance.run << ", node "
                << found.provenance.node << " of " << db << " as a PyTorch operator (import it; see its docstring)\n";
    }
    return 0;
  }
  write_output(format == "json" ? ke::export_json(*r.store, r.run) : ke::export_dot(*r.store, r.run), output);
  return 0;
}

// JSON one line long, indented for a person to edit: objects and arrays of objects or arrays open a
// line per member; arrays of scalars (shapes, tunable lists) stay on one line.
std::string pretty_json(const std::string& text) {
  std::string out;
  int depth = 0;
  bool in_string = false;
  std::vector<bool> broken;  // per open bracket: whether its members go on lines of their own
  auto newline = [&] { out += "\n" + std::string(static_cast<std::size_t>(2 * depth), ' '); };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size()) out += text[++i];
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    if (ch == '{' || ch == '[') {
      std::size_t j = i + 1;
      while (j < text.size() && text[j] == ' ') ++j;
      const bool breaks = ch == '{' || (j < text.size() && (text[j] == '{' || text[j] == '['));
      broken.push_back(breaks);
      out += ch;
      if (breaks) ++depth, newline();
      continue;
    }
    if (ch == '}' || ch == ']') {
      if (!broken.empty() && broken.back()) --depth, newline();
      if (!broken.empty()) broken.pop_back();
      out += ch;
      continue;
    }
    if (ch == ',' && !broken.empty() && broken.back()) {
      out += ',';
      newline();
      while (i + 1 < text.size() && text[i + 1] == ' ') ++i;
      continue;
    }
    out += ch;
  }
  return out + "\n";
}

int cmd_import(const std::vector<std::string>& args) {
  po::options_description d("import");
  Common c;
  std::string dir;
  add_common(d, c);
  d.add_options()("output,o", po::value(&dir), "the folder to write the spec into (made if absent)");
  po::variables_map vm = parse(args, d, c);
  if (vm.count("help") || c.spec_path.empty() || dir.empty()) {
    (vm.count("help") ? std::cout : std::cerr) << kUsage << d;
    return vm.count("help") ? 0 : 2;
  }
  if (!ke::is_pytorch_problem(c.spec_path)) {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    c.spec_path + " is not a PyTorch problem (a .py file in KernelBench's format)");
  }
  ke::Spec spec = load_cli_problem(c);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ke::Error(ke::ErrorCode::BadUsage, "-o " + dir + ": " + ec.message());
  const char* kind = spec.language == ke::Language::cuda     ? "cuda"
                     : spec.language == ke::Language::hip    ? "hip"
                     : spec.language == ke::Language::triton ? "triton"
                                                             : "cpu";
  const fs::path out = fs::path(dir) / (std::string(kind) + ".json");
  // The module by a path relative to the spec, and not inline: the spec is for a person to edit.
  ke::Spec written = spec;
  written.reference.file = fs::relative(fs::absolute(spec.reference.file), fs::absolute(dir), ec).string();
  if (ec || written.reference.file.empty()) written.reference.file = fs::absolute(spec.reference.file).string();
  written.reference.source.clear();
  std::ofstream file(out);
  file << pretty_json(ke::to_json(written));
  if (!file.flush()) throw ke::Error(ke::ErrorCode::BadUsage, "cannot write " + out.string());
  std::cout << "wrote " << out.string() << ": " << spec.name << ", " << ke::to_string(spec.language) << " kernel\n  "
            << ke::kernel_signature(spec) << "\n";
  for (const ke::Bindings& w : spec.workloads) {
    std::cout << "  workload:";
    for (const auto& [k, v] : w) std::cout << " " << k << "=" << v;
    std::cout << "\n";
  }
  // The notes say how the signature was derived (on meta, or by a real call and why) and name the module's
  // constants: what a person should read before trusting the derived names.
  std::cout << "  cost: bytes " << (spec.cost_bytes ? spec.cost_bytes->text() : "unknown") << ", flops "
            << (spec.cost_flops ? spec.cost_flops->text() : "unknown") << "\n";
  std::cout << "  notes: " << spec.notes << "\n";
  std::cout << "next: add tunables and a seed to it, then: kernelevolve check " << out.string()
            << "\n  (or let a model or a command write the first kernel: kernelevolve run " << out.string()
            << " --mutator command|llm|mix ...)\n";
  return 0;
}

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
           "                             [--devices D1,D2,...] [--mpi (under mpirun)]\n"
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "run") {
      const int rc = cmd_run(args);
      ke::mpi_finalize();  // after every MPI user is gone; nothing when MPI was not used
      return rc;
    }
    if (command == "check") return cmd_check(args);
    if (command == "sweep") return cmd_sweep(args);
    if (command == "import") return cmd_import(args);
    if (command == "baseline") return cmd_baseline(args);
    if (command == "show") return cmd_show(args);
    if (command == "best") return cmd_best(args);
    if (command == "export") return cmd_export(args);
    if (command == "devices") return cmd_devices(args);
    if (command == "optimize") return cmd_optimize(args);
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
