// A PyTorch problem as a Spec: the bridge derives the module's signature (its inputs, weights, outputs and
// their shapes, each dimension named after the module's int global it follows, or an expression over them),
// on PyTorch's meta device where it can, and this turns the description into the signature, workloads,
// cost and launch a spec file would give.
#include <simdjson.h>

#include <algorithm>
#include <filesystem>

#include "core/text_file.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/pytorch.hpp"
#include "pytorch/python.hpp"

namespace fs = std::filesystem;

namespace kernelevolve {

namespace {

std::string read_file(const fs::path& path) {
  std::string text, problem;
  if (!read_text(path, text, problem)) {
    throw Error(ErrorCode::BadSpec, path.string() + ": cannot read the PyTorch problem (" + problem + ")");
  }
  return text;
}

// The problem's name: its folder's for a file named model.py (problems/pytorch/<name>/model.py), else the
// file's stem; as a C identifier, it is the entry point too.
std::string problem_name(const fs::path& path) {
  std::string stem = path.stem().string();
  if (stem == "model" && path.has_parent_path()) stem = fs::absolute(path).parent_path().filename().string();
  std::string out;
  for (char c : stem) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "k_" + out;
  return out;
}

}  // namespace

bool is_pytorch_problem(const std::string& path) { return fs::path(path).extension() == ".py"; }

Spec load_pytorch_problem(const std::string& path, const PytorchProblemOptions& options) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error(ErrorCode::BadSpec, path + ": no such PyTorch problem file");
  const std::string absolute = fs::absolute(path).lexically_normal().string();
  const std::string device = options.device.rfind("cuda", 0) == 0 ? "cuda" : "cpu";
  if (options.dtype && *options.dtype != DType::bf16 && *options.dtype != DType::f16)
    throw Error(ErrorCode::BadUsage,
                path + ": a PyTorch problem's dtype casts its floats to bf16 or f16, not " + to_string(*options.dtype));
  if (options.with_forward && !options.backward)
    throw Error(ErrorCode::BadUsage,
                path + ": the forward's outputs join a backward problem: ask for the backward too");
  SourceRef variant;
  variant.pytorch = true;
  variant.dtype = options.dtype;
  variant.backward = options.backward;
  variant.with_forward = options.with_forward;
  const PrecisionPolicy policy = options.precision.value_or(PrecisionPolicy::as_run);
  std::vector<std::string> args{"describe", "--module", absolute, "--device", device, "--precision", to_string(policy)};
  for (std::string& a : pytorch::variant_args(variant)) args.push_back(std::move(a));
  const std::string text = pytorch::run_bridge(args, options.timeout_s);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc) != simdjson::SUCCESS) {
    throw Error(ErrorCode::Internal,
                path + ": the PyTorch bridge answered something that is not JSON: " + text.substr(0, 300));
  }
  if (std::string_view why; doc["error"].get(why) == simdjson::SUCCESS) {
    std::string message = path + ": cannot be a kernel problem: " + std::string(why);
    if (std::string_view trace; doc["trace"].get(trace) == simdjson::SUCCESS) message += "\n" + std::string(trace);
    throw Error(ErrorCode::BadSpec, message);
  }

  Spec spec;
  spec.path = absolute;
  // The variant is part of the problem's name (and entry), so that a store never reports one problem's
  // kernel as another's: relu_bf16, rms_norm_backward, linear_bf16_forward_backward.
  spec.name = problem_name(path);
  if (options.dtype) spec.name += std::string("_") + to_string(*options.dtype);
  if (options.backward) spec.name += options.with_forward ? "_forward_backward" : "_backward";
  spec.entry = spec.name;
  spec.language = options.language;
  for (simdjson::dom::element p : doc["params"].get_array()) {
    Param param;
    param.name = std::string(p["name"].get_string().value());
    param.dtype = parse_dtype(std::string(p["dtype"].get_string().value())).value();
    param.role = parse_role(std::string(p["role"].get_string().value())).value();
    if (param.role == Role::scalar) {
      double v = 0;
      if (p["value"].get_double().get(v) != simdjson::SUCCESS) v = static_cast<double>(p["value"].get_int64().value());
      param.value = v;
    }
    if (param.is_buffer()) {
      for (simdjson::dom::element d : p["shape"].get_array()) {
        std::int64_t literal = 0;
        param.shape.push_back(d.get_int64().get(literal) == simdjson::SUCCESS ? std::to_string(literal)
                                                                              : std::string(d.get_string().value()));
      }
    }
    spec.params.push_back(std::move(param));
  }
  // One workload per entry of get_workloads(), or the one observed; the bridge checked that every one gives
  // the signature above.
  for (simdjson::dom::element w : doc["workloads"].get_array()) {
    Bindings workload;
    for (auto [name, value] : w.get_object()) workload[std::string(name)] = value.get_int64().value();
    spec.workloads.push_back(std::move(workload));
  }
  // The cost, for the roofline: bytes from the signature, flops from PyTorch's counter where it has one.
  simdjson::dom::object cost;
  if (doc["cost"].get(cost) == simdjson::SUCCESS) {
    std::string_view text;
    if (cost["bytes"].get(text) == simdjson::SUCCESS)
      spec.cost_bytes = Expr::parse(std::string(text), path + ": cost.bytes");
    if (cost["flops"].get(text) == simdjson::SUCCESS)
      spec.cost_flops = Expr::parse(std::string(text), path + ": cost.flops");
    // PyTorch counts a direct algorithm's flops; cuDNN's Winograd or FFT convolutions do fewer (level 1 problem
    // 69 of KernelBench, a transposed convolution, ran under that count's floor on an H200): rates, no floor.
    spec.cost_flops_floor = false;
  }
  // The switches the module runs under, as the bridge found them once the file was loaded under the policy.
  Precision precision = policy == PrecisionPolicy::as_run ? Precision::as_run_defaults() : Precision::strict_fp32();
  if (simdjson::dom::object state; doc["precision"].get(state) == simdjson::SUCCESS) {
    bool on = false;
    if (state["cudnn_tf32"].get(on) == simdjson::SUCCESS) precision.cudnn_tf32 = on;
    if (state["matmul_tf32"].get(on) == simdjson::SUCCESS) precision.matmul_tf32 = on;
    if (std::string_view text; state["float32_matmul_precision"].get(text) == simdjson::SUCCESS)
      precision.float32_matmul_precision = std::string(text);
  }
  spec.precision = precision;
  spec.reference = variant;
  spec.reference.file = absolute;
  spec.reference.source = read_file(absolute);
  spec.tolerance = pytorch_tolerance(spec);
  if (!is_cpu_language(spec.language)) {
    // One thread per element of the first output, BLOCK threads a block: a start that `import` writes
    // out for the user to change.
    const Param* out = nullptr;
    for (const Param& p : spec.params)
      if (!out && p.role == Role::out) out = &p;
    std::string elements;
    for (const std::string& d : out ? out->shape : std::vector<std::string>{}) {
      // A dimension that is an expression (H - K + 1) is a factor only in parentheses.
      const bool atom = is_identifier(d) || d.find_first_not_of("0123456789") == std::string::npos;
      elements += (elements.empty() ? "" : " * ") + (atom ? d : "(" + d + ")");
    }
    if (elements.empty()) elements = "1";
    LaunchRule rule;
    rule.grid[0] = Expr::parse("cdiv(" + elements + ", BLOCK)");
    if (spec.language == Language::triton) {
      // A program per BLOCK elements; its threads are Triton's (32 x num_warps).
      spec.tunables["BLOCK"] = {1024, 256, 512, 2048, 4096};
      spec.tunables["num_warps"] = {4, 2, 8};
    } else {
      rule.block[0] = Expr::parse("BLOCK");
      spec.tunables["BLOCK"] = {256, 128, 512, 1024};
    }
    spec.launch = rule;
  }
  spec.notes = "Derived from the PyTorch module " + fs::path(path).filename().string() +
               " (KernelBench format): the kernel computes what Model.forward computes, with the module's weights "
               "passed as input buffers named after their state-dict keys; a 0-d tensor is a one-element buffer.";
  // What the kernel is not told: the module's constants, fixed in every workload (a scale passed to
  // Model(), a stride); a kernel must compute with them as the module does.
  std::string constants;
  simdjson::dom::array listed;
  if (doc["constants"].get(listed) == simdjson::SUCCESS) {
    for (simdjson::dom::element c : listed) {
      std::string_view name, value;
      if (c["name"].get(name) != simdjson::SUCCESS || c["value"].get(value) != simdjson::SUCCESS) continue;
      constants += (constants.empty() ? "" : ", ") + std::string(name) + " = " + std::string(value);
    }
  }
  if (!constants.empty()) spec.notes += " The module's constants (not sizes; fixed): " + constants + ".";
  if (const std::string variant_text = pytorch_variant_text(spec.reference); !variant_text.empty())
    spec.notes += " The problem is " + variant_text + ".";
  const bool bf16 =
      std::any_of(spec.params.begin(), spec.params.end(), [](const Param& p) { return p.dtype == DType::bf16; });
  if (bf16 && is_cpu_language(spec.language)) {
    spec.notes +=
        " A bf16 buffer is __bf16, a storage type in C here (Clang 16 has no arithmetic on it): read and write it "
        "with ke_bf16_to_float and ke_float_to_bf16 (given to every C and C++ kernel; round to nearest even), or "
        "AVX-512 BF16's intrinsics, and compute in float.";
  }
  // The launch above is a start, not a rule: a candidate may be a program (docs/spec-format.md, "Programs").
  spec.notes +=
      is_cpu_language(spec.language)
          ? " The default plan calls the entry once with the params in order; a candidate may bring its own "
            "plan (kernelevolve-plan: several functions in order, temporaries; docs/spec-format.md, \"Programs\")."
          : " The launch is the default plan, one kernel (the entry) with the params in order; a candidate may "
            "bring its own plan (kernelevolve-plan: several kernels with their own grids, temporaries" +
                std::string(spec.language == Language::cuda ? ", cuBLASLt and cuDNN steps" : "") +
                "; docs/spec-format.md, \"Programs\").";
  // How the signature was derived: on the meta device (nothing allocated), or by a real call and why.
  if (std::string_view derivation; doc["derivation"].get(derivation) == simdjson::SUCCESS) {
    if (derivation == "meta") {
      spec.notes += " Signature derived on PyTorch's meta device.";
    } else {
      std::string why(derivation);
      if (why.rfind("real: ", 0) == 0) why.erase(0, 6);
      spec.notes += " Signature derived by a real call, as the meta device could not run the module: " + why + ".";
    }
  }
  spec.validate();
  return spec;
}

Spec load_problem(const std::string& path, const PytorchProblemOptions& options) {
  return is_pytorch_problem(path) ? load_pytorch_problem(path, options) : load_spec(path);
}

}  // namespace kernelevolve
