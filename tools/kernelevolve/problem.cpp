// The options of the commands that take a problem, and the problem they name: a spec file, or a PyTorch module
// made a problem on the spot (its language, dtype, backward, precision and seed as the options say).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <kernelevolve/distributed.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"

namespace cli {

namespace {

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

}  // namespace

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
    c.capture_s = took;
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

}  // namespace cli
