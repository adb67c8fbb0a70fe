// Spec: the problem a search serves. The kernel's signature, the workloads (size bindings) it must
// serve, the trusted reference and the seed kernel, tunables and constraints, the launch rule,
// the tolerance and the cost model. Loaded from the JSON spec file (DESIGN.md) or built in C++.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernelevolve/expr.hpp"

namespace kernelevolve {

enum class DType { f16, bf16, f32, f64, i8, u8, i32, i64 };
enum class Role { in, out, inout, size, scalar };
// The kernel languages; `pytorch` names no kernel language: it marks a baseline candidate (PyTorch eager
// or torch.compile running a PyTorch problem's module), which parse_language never returns. A `triton`
// kernel is a Python source with one @triton.jit entry, compiled by Triton and run by a CUDA (or HIP) device.
enum class Language { c, cpp, cuda, hip, pytorch, triton };

const char* to_string(DType);
const char* to_string(Role);
const char* to_string(Language);
std::optional<DType> parse_dtype(const std::string&);
std::optional<Role> parse_role(const std::string&);
std::optional<Language> parse_language(const std::string&);
std::size_t dtype_size(DType);
bool is_float(DType);
// A C identifier: what entry points, parameter and tunable names must be.
bool is_identifier(const std::string&);
// The C type a C kernel declares for it ("float", "int64_t", "_Float16", ...).
const char* c_type(DType);
// A CPU language (c, cpp) runs on the host; cuda, hip and triton on a GPU.
bool is_cpu_language(Language);
// The kind of device a language's kernels run on: "cpu", "cuda" (cuda and triton) or "hip".
const char* device_kind(Language);

struct Param {
  std::string name;
  DType dtype = DType::f32;
  Role role = Role::in;
  // Buffers: each dimension is an integer literal, a size name, or an integer expression over the sizes
  // ("H - K + 1"), evaluated per workload.
  std::vector<std::string> shape;
  double value = 0.0;  // scalars: the fixed value
  bool is_buffer() const { return role == Role::in || role == Role::out || role == Role::inout; }
};

// How a buffer's random inputs are drawn. The evaluator also draws from other distributions on
// other trials, so that an output that ignores its input cannot pass.
//
// Float buffers: uniform, normal or Laplace. Integer buffers draw integers in an inclusive range
// [low, high] (expressions over the sizes, e.g. "V - 1"; `index_of: V` is [0, V-1]), and every trial
// keeps it: uniform, edge-heavy (the bounds themselves), repeated (a few distinct values) and sorted.
// An integer buffer without a declared range draws from [-100, 100] (within its type). `sorted` makes
// every trial's draw non-decreasing (offsets arrays).
struct InputDist {
  enum class Kind { uniform, normal, laplace, integers, edges, repeated } kind = Kind::uniform;
  double a = -1.0;  // uniform: low;  normal/laplace: mean; integer kinds: low (inclusive)
  double b = 1.0;   // uniform: high; normal/laplace: std (scale); integer kinds: high (inclusive)
  bool sorted = false;
  // A PyTorch problem's input that every trial takes from the problem's own get_inputs() ("dist":
  // "problem"), never from the adversarial distributions that float inputs otherwise get after trial 0.
  bool problem = false;
  // The declared range of an integer buffer, unresolved (bound per workload by Spec::input_distribution).
  std::optional<Expr> low, high;
};

// What an integer input draws from when its spec declares no range: [-100, 100], within the type.
constexpr std::int64_t kDefaultIntegerLow = -100;
constexpr std::int64_t kDefaultIntegerHigh = 100;

struct Tolerance {
  double atol = 1e-5;
  double rtol = 1e-4;
};

// How fp32 work may round (issue 50): the reference's, the baselines', and what a candidate's library steps may ask
// for. as_run: as PyTorch runs in the user's environment (its defaults put cuDNN's fp32 convolutions on TF32
// tensor cores and keep matrix products fp32; a module's file may change either). strict: fp32, TF32 off.
enum class PrecisionPolicy { as_run, strict };
const char* to_string(PrecisionPolicy policy);  // "as-run", "strict"
std::optional<PrecisionPolicy> parse_precision_policy(const std::string& text);

struct Precision {
  PrecisionPolicy policy = PrecisionPolicy::strict;
  // The switches the reference runs under: what the user's PyTorch has once the module's file is loaded (as-run), or
  // all off (strict). A library step may use TF32 where its switch is on (program.hpp, the step option "math").
  bool cudnn_tf32 = false;
  bool matmul_tf32 = false;
  std::string float32_matmul_precision = "highest";  // torch.get_float32_matmul_precision()
  // The policy as PyTorch ships it, for a problem whose switches no module has told: cuDNN on, matmul off.
  static Precision as_run_defaults();
  static Precision strict_fp32() { return {}; }
  // One line for reports and prompts: "as-run (cuDNN TF32 on, matmul TF32 off, float32 matmul precision highest)".
  std::string text() const;
  bool operator==(const Precision& o) const {
    return policy == o.policy && cudnn_tf32 == o.cudnn_tf32 && matmul_tf32 == o.matmul_tf32 &&
           float32_matmul_precision == o.float32_matmul_precision;
  }
};

// A candidate is correct where its error against the float64 answer is within the larger of the spec's tolerance
// and this many times the reference's own error against it (fitness protocol; issue 50), per workload and output.
inline constexpr double kReferenceErrorFactor = 2.0;

struct SourceRef {
  std::string source;                 // the text (read from `file` when loading)
  std::string file;                   // where it came from, for messages; empty when inline
  std::optional<Language> language;   // defaults to the spec's language
  std::optional<std::string> device;  // e.g. "cpu" for a CPU reference of a GPU problem
  // A reference only: `source` is a PyTorch module in KernelBench's format (class Model, get_inputs,
  // get_init_inputs) read from `file`, run by PyTorch beside the worker (include/kernelevolve/pytorch.hpp).
  bool pytorch = false;
  // A PyTorch reference only, the problem its module makes (docs/pytorch-precision.md and docs/pytorch-training.md):
  // with `dtype` (bf16 or f16) its float inputs and weights cast to it, the reference running in it; with `backward`
  // its backward (the params grad_<output> in, grad_<input> and grad_<weight> out; the reference autograd in
  // float64); with `with_forward` (and `backward`) the forward's outputs too. Spec files write them in the
  // reference: "dtype": "bf16", "backward": true, "with_forward": true.
  std::optional<DType> dtype;
  bool backward = false;
  bool with_forward = false;
};

struct LaunchRule {
  Expr grid[3] = {Expr::constant(1), Expr::constant(1), Expr::constant(1)};
  Expr block[3] = {Expr::constant(1), Expr::constant(1), Expr::constant(1)};
  Expr shared_bytes = Expr::constant(0);
};

struct Spec {
  std::string name;
  // The operator a problem belongs to ("matmul"), optional: a run warm-started from a store takes kernels of
  // problems with the same family, as well as the same name or signature (warm_start.hpp).
  std::string family;
  Language language = Language::c;
  std::string entry;
  std::vector<Param> params;
  std::vector<Bindings> workloads;          // each binds every size param
  std::map<std::string, InputDist> inputs;  // per input buffer; default uniform(-1, 1)
  Tolerance tolerance;
  SourceRef reference;
  SourceRef seed;
  std::optional<LaunchRule> launch;  // required for cuda and hip
  // Tunable name -> candidate values. The seed's point is the first value of each list.
  std::map<std::string, std::vector<std::int64_t>> tunables;
  std::vector<Expr> constraints;
  std::optional<Expr> cost_flops;
  std::optional<Expr> cost_bytes;
  // Whether cost_flops bound a time from below (the roofline floor): false where they count a direct
  // algorithm that a faster one may beat (a convolution by Winograd or FFT): then they give rates only.
  bool cost_flops_floor = true;
  // Whether a candidate's plan may call a vendor library (cuBLASLt, cuDNN: program.hpp); false for a user who
  // wants kernels only.
  bool library_steps = true;
  // The spec's "precision" (or --precision); unset, the default: as-run for a PyTorch module, strict otherwise.
  std::optional<Precision> precision;
  std::string notes;
  std::string path;  // the spec file, or empty when built in C++

  // Checks everything a user can get wrong; throws Error(BadSpec) naming the file and the field.
  void validate() const;

  // The seed's tunable point: the first value of each tunable.
  Bindings seed_tunables() const;
  // The precision the run holds to: `precision`, or the default for its kind.
  Precision precision_in_effect() const;
  // Whether `tunables` satisfies every constraint (bound with the sizes of every workload).
  bool satisfies_constraints(const Bindings& tunables) const;
  // The first constraint that is false at one workload and tunable point, or cannot be evaluated there; null where
  // every one holds.
  const Expr* failed_constraint(const Bindings& workload, const Bindings& tunables) const;
  // Number of elements of a buffer param under a workload.
  std::int64_t element_count(const Param& buffer, const Bindings& workload) const;
  // Sizes, scalars (as integers) and tunables together, for evaluating launch and cost expressions.
  Bindings bindings(const Bindings& workload, const Bindings& tunables) const;
  const Param* find_param(const std::string& name) const;
  // The distribution an input buffer draws from under a workload, ranges resolved: the spec's own
  // (trial 0), with an integer buffer's range bound to the workload's sizes and clamped to its type.
  InputDist input_distribution(const Param& buffer, const Bindings& workload) const;
};

// How an input buffer's values are drawn, in words, defaults included (for `check` and the prompt):
// "integers in [0, V - 1], every trial (uniform, edge-heavy, repeated, sorted)".
std::string describe_input(const Spec& spec, const Param& buffer);

// The declaration every kernel of the spec defines, as its language writes it: for c and cpp
// `void entry(const float* x, float* y, int64_t N)` (an `in` buffer is const), for cuda and hip the same
// after `extern "C" __global__`; for triton `@triton.jit def entry(x, y, N, BLOCK: tl.constexpr)`, the
// spec's params in order and then the tunables (num_warps and num_stages are options, not parameters).
// What a model or a command is told to write.
std::string kernel_signature(const Spec& spec);

// What Triton's compiler takes for its compile option `name` when `value` is not that ("a power of two from 1 to
// 32" for num_warps, "1 to 8" for num_stages); "" when it is, or `name` is neither. A spec's tunables and a
// program step's own options are both held to it.
std::string triton_option_refusal(const std::string& name, std::int64_t value);
// The C type of a param's argument in that declaration: "const float*", "float*", "int64_t", ...
std::string argument_type(const Param& param);
// The Triton type of a param's argument ("*fp32" for an fp32 buffer, "i64" for a size, "fp32" for a scalar).
std::string triton_type(const Param& param);

// KernelBench's tolerance by the outputs' dtype, a PyTorch problem's default: 1e-4 both ways for fp32 and
// wider; 1e-2 when an output is fp16 or bf16, or the reference casts the module to one (its precision's).
Tolerance pytorch_tolerance(const Spec& spec);
// The problem a PyTorch reference's module makes, in words for a person or a model ("the module's backward,
// in bf16: ..."); empty for the module's own forward in its own dtypes.
std::string pytorch_variant_text(const SourceRef& reference);

// Loads and validates a spec file. Paths inside are relative to the file. Throws Error(BadSpec).
Spec load_spec(const std::string& path);
// Parses spec JSON text; `path` is used for messages and to resolve relative source files.
Spec parse_spec(const std::string& json_text, const std::string& path);
// The spec as spec-file JSON with every source inline, so it stands alone (parse_spec reads it back).
std::string to_json(const Spec& spec);
// One param as the spec file writes it: name, dtype, role, and its shape (buffers) or value (scalars).
std::string to_json(const Param& param);

}  // namespace kernelevolve
