// PyTorch problems: a Python file in KernelBench's format (class Model(nn.Module), get_inputs(),
// get_init_inputs(), optionally get_workloads()) is a problem. Its kernel signature is derived from one
// call of the module, and PyTorch runs it as the reference, in a process of its own beside the worker.
#pragma once
#include <optional>
#include <string>

#include "kernelevolve/spec.hpp"

namespace kernelevolve {

struct PytorchProblemOptions {
  Language language = Language::c;  // the candidates' language: c or cpp on the CPU, cuda on a GPU
  std::string device = "cpu";       // where the reference runs while deriving: "cpu" or "cuda"
  double timeout_s = 300;           // for importing and calling the module once
  // The problem the module makes (SourceRef::dtype, backward, with_forward): its float inputs and weights cast
  // to bf16 or f16, as KernelBench's precision option does; its backward; its forward and backward together.
  std::optional<DType> dtype;
  bool backward = false;
  bool with_forward = false;
  // The run's precision policy (spec.hpp; --precision); as-run when unset. The spec holds the switches PyTorch
  // had once the module's file was loaded under it.
  std::optional<PrecisionPolicy> precision;
};

// The spec derived from `path` (docs/pytorch.md, "Bring your PyTorch module"): the inputs of get_inputs() and the
// module's weights (state-dict keys, '.' as '_') as `in` buffers, the outputs as `out`/`out0`..., ints
// and floats as scalars, each dimension named after the module's int global of that value; a workload per
// entry of get_workloads() if the module has one, else the sizes observed. No seed (a mutator writes the
// first kernel) and, for a GPU language, a one-dimensional launch over the first output. With options' dtype
// or backward, the problem's name says so (relu_bf16, rms_norm_backward), its params are cast, and a backward's
// are the inputs and weights, grad_<output> in, and grad_<input>, grad_<weight> out (docs/pytorch-precision.md
// and docs/pytorch-training.md). Throws
// Error(BadSpec) naming what cannot be mapped (a data-dependent output shape, an output written in place, a
// result that is not tensors, a workload that names an unknown global or changes the signature),
// Error(DeviceUnavailable) when no Python imports torch.
Spec load_pytorch_problem(const std::string& path, const PytorchProblemOptions& options = {});

// The first program from torch.compile (issue 31): Inductor's output code for the module (at its own inputs, the
// sizes marked dynamic) translated into a Triton program with its own plan: its kernels, its block sizes and warps
// as tunables with the configurations Inductor's heuristics consider, its buffers as temporaries, its cuBLAS and
// cuDNN calls as library steps. It becomes `spec`'s seed (node 0 of a run), its tunables replace the spec's, and
// Inductor's specializations (a weight's size) join its constraints. `spec` is a PyTorch problem's, in Triton;
// `device` a CUDA device ("cuda", "cuda:N"). Throws Error(BadSpec) naming the part that cannot be translated (a
// batched product, a graph break), Error(DeviceUnavailable) where this PyTorch has no torch.compile.
void seed_from_torch_compile(Spec& spec, const std::string& device, double timeout_s = 600);

// A spec file or a PyTorch problem, by the file's extension (.py).
Spec load_problem(const std::string& path, const PytorchProblemOptions& options = {});

// Whether `path` names a Python file (a PyTorch problem).
bool is_pytorch_problem(const std::string& path);

}  // namespace kernelevolve
