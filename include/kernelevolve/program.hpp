// Program: what a candidate runs. One or more kernels of its source and the launch plan that runs them: the
// steps in order on one stream (a kernel with its grid, block and shared memory, or a vendor library's call),
// the arguments each step takes, and temporaries (workspaces the device allocates and poisons once, when a launch is
// made, and which keep what the last call left, in verification as in a caller's process; the reference never
// sees them). A source declares its plan in a block marked `kernelevolve-plan`;
// a source that declares none runs the spec's one-kernel plan: its entry, launched by its `launch` rule with
// the spec's params. docs/spec-format.md ("Programs") gives the format.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernelevolve/device.hpp"
#include "kernelevolve/expr.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve {

// The word that opens a source's plan: the JSON object after it (in a /* */ comment in C, CUDA and HIP, in a
// string literal in Triton's Python) is the plan. Comments that hold it are code: they are part of a node's
// identity (Candidate::code_key) and tunables they name are live.
inline constexpr const char* kPlanMarker = "kernelevolve-plan";

// A workspace: `shape` (integer expressions over sizes and tunables, multiplied) elements of `dtype`.
struct Temporary {
  std::string name;
  DType dtype = DType::f32;
  std::vector<Expr> shape;
};

// What a step passes in one argument position.
struct StepArg {
  enum class Kind { param, temporary, value } kind = Kind::param;
  std::size_t index = 0;  // into the spec's params or the plan's temporaries
  Expr value;             // Kind::value: an integer expression over sizes and tunables, passed as int64
  std::string text;       // as the plan writes it
};

// The vendor calls a library step may make (docs/spec-format.md says what each computes and takes).
inline const std::vector<std::string>& library_calls() {
  static const std::vector<std::string> calls = {"cublaslt.matmul",        "cublas.gemm",     "cublas.gemm_batched",
                                                 "cudnn.conv2d",           "cudnn.conv3d",    "cudnn.conv_transpose2d",
                                                 "cudnn.conv_transpose3d", "cudnn.avg_pool3d"};
  return calls;
}

// Every library call in a sentence each (what it computes, its args and options), for a writer of plans that
// has not read docs/spec-format.md: the model's prompt and the command mutator's request.
std::string library_calls_text();

// Why the run's precision does not let the library call `library` (one of library_calls()) run f32 data with TF32
// math, its step's "math": "tf32" (issue 50): the policy is strict, or as-run with that library's switch off in the
// user's PyTorch (cuDNN: torch.backends.cudnn.allow_tf32; cuBLAS and cuBLASLt: torch.backends.cuda.matmul.allow_tf32).
// "" where it may.
std::string tf32_refusal(const Precision& precision, const std::string& library);

struct PlanStep {
  std::string kernel;   // the entry in the source this step launches; empty for a library step
  std::string library;  // one of library_calls() ("cublas.gemm", "cudnn.conv2d", ...); empty for a kernel step
  LaunchRule launch;    // a GPU kernel's grid, block and dynamic shared memory
  std::vector<StepArg> args;
  std::map<std::string, std::string> options;  // a library step's settings ("epilogue": "bias_relu", "math": "tf32")
  // A Triton kernel's own compile options, expressions over tunables; unset, the tunables num_warps and
  // num_stages. Several kernels of one program rarely want one warp count: a pointwise kernel and a reduction's.
  std::optional<Expr> num_warps, num_stages;
  bool is_library() const { return !library.empty(); }
  // The step's name in messages and the diagnosis: its kernel, or its library call.
  const std::string& name() const { return is_library() ? library : kernel; }
};

struct Plan {
  std::vector<Temporary> temporaries;
  std::vector<PlanStep> steps;
  bool declared = false;  // the source declared it; false: the spec's one-kernel plan
  bool cpu = false;       // a CPU program's: its steps are calls, with no grid
  bool calls_library() const;
  // The declaration a kernel step's entry must have, as Params: the spec's params it passes keep their
  // dtype and role, a temporary is an inout buffer of its dtype, a value is an i64 size named `arg<i>`.
  std::vector<Param> signature(const Spec& spec, std::size_t step) const;
};

// A plan that cannot run: the candidate's fault (the node is invalid with this message), never the host's.
class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where a source's plan block is: the marker's offset and the end of its JSON object; npos when it has none.
struct PlanBlock {
  std::size_t marker = std::string::npos, begin = std::string::npos, end = std::string::npos;
  bool found() const { return marker != std::string::npos; }
};
// The marker counts only where it opens the plan's block as `language` reads the source: a C, C++, CUDA or HIP
// block comment ("/* kernelevolve-plan"), or a Triton source's triple-quoted string standing alone; the word in
// a string, a // or # comment, another comment's text, or under `#if 0` is not a plan.
// Throws PlanError when a marker is there but no well-formed object follows it, or it appears twice.
PlanBlock find_plan_block(const std::string& source, Language language);

// The plan `source` declares, checked against `spec` (every name resolves, every expression reads only
// sizes, scalars and tunables, kernels are identifiers, a GPU step has a grid, a library step has the count and
// kinds of arguments and the options its call takes,
// each numeric setting at most 2^31 - 1, TF32 math only on f32 data and where the spec's precision allows it
// (tf32_refusal)); or, when it declares none,
// the spec's one-kernel plan. Throws PlanError naming what is wrong.
Plan plan_of(const Spec& spec, const std::string& source, Language language);

// The plan as the JSON a source declares (canonical: fields in a fixed order), for a prompt or a request.
std::string to_json(const Plan& plan);

// A plan bound to one workload and tunable point.
struct BoundPlan {
  std::vector<LaunchDims> dims;                 // per step (a library step's are unused)
  std::vector<std::size_t> temporary_elements;  // per temporary
  std::vector<std::size_t> temporary_bytes;     // per temporary
  std::size_t total_temporary_bytes = 0;
  std::vector<std::vector<std::int64_t>> values;  // per step, per argument: a value argument's integer
};
// Evaluates every expression. Throws PlanError on a negative, zero-sized or overflowing dimension, a
// temporary whose elements overflow, or a library step's size below 1 or beyond 2^31 - 1 (a convolution's output
// empty, its groups not dividing its channels, a transposed one's output_padding not below its stride).
BoundPlan bind_plan(const Plan& plan, const Spec& spec, const Bindings& workload, const Bindings& tunables);

// The most bytes of temporaries a plan may ask for on a device of `device_bytes` of memory (a quarter of
// it; 4 GiB when the device's memory is unknown). A plan that asks for more is invalid.
std::size_t temporaries_limit(std::size_t device_bytes);

}  // namespace kernelevolve
