// A stored program as a function the host calls: a verified node of a run database, loaded, compiled once for
// a device, and launched on the caller's own buffers (issue 29's core; the C API and the PyTorch operator build
// on it). The program's code runs in the caller's process with the caller's rights, outside any sandbox:
// load only databases you trust.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernelevolve/candidate.hpp"
#include "kernelevolve/device.hpp"
#include "kernelevolve/search_graph.hpp"
#include "kernelevolve/spec.hpp"
#include "kernelevolve/store.hpp"

namespace kernelevolve {

// Which node to load: a run (the latest by default) and a node (the run's best by default: the node its end
// chose, or the graph's fastest for a run that has not finished).
struct CallableChoice {
  std::optional<RunId> run;
  std::optional<NodeId> node;
};

// Where a loaded program came from.
struct Provenance {
  std::string database;
  RunId run = -1;
  NodeId node = -1;
  std::string problem;       // the spec's name
  std::string device_class;  // what it was verified on ("cpu AMD EPYC ...", "cuda NVIDIA H100 ...")
  double speedup = 0;        // over the run's first node, as the run measured it
};

// A stored node as the store holds it: its problem, its code and where it came from.
struct StoredProgram {
  Spec spec;
  Candidate candidate;
  Provenance provenance;
};

// The node `choice` names, found but not compiled. Throws Error(BadUsage), naming the database, run and node,
// when there is no such run or node, the node was not verified (its status is not ok), it is not what was
// recorded (its source's digest is not its sources.hash, or its source and tunables' is not its nodes.key: the
// file was edited after the run), or the evidence of its verification is not whole (no worst element compared,
// a workload without a timing, no positive speedup), naming the field.
StoredProgram find_stored_program(const std::string& database, const CallableChoice& choice = {});

// A small Python module that loads the node `p` names as a PyTorch operator through the package kernelevolve
// (`kernelevolve export --format torch`), for a user to commit beside their model: `op` and `replace(model,
// target)`. The database is named relative to the module when it lies beside `module_path`, else absolutely.
std::string torch_module_source(const Provenance& p, const std::string& module_path);

class CallableProgram {
 public:
  // Loads the node and compiles it for `device` (null: device 0 of the kind it was verified on). Throws
  // Error(BadUsage), naming the database, run and node, when find_stored_program refuses it, it was verified on
  // another class of device than `device`'s, or it does not compile there.
  static std::unique_ptr<CallableProgram> load(const std::string& database, std::shared_ptr<Device> device,
                                               const CallableChoice& choice = {});
  ~CallableProgram();
  CallableProgram(const CallableProgram&) = delete;
  CallableProgram& operator=(const CallableProgram&) = delete;

  // Runs the program on the caller's arguments, in the spec's param order (kernel_signature(spec())): for a
  // buffer, a pointer to the pointer to its data (on `device`, holding the elements its shape gives at these
  // sizes); for a size or scalar, a pointer to its value in its dtype. The sizes and scalars must be those of
  // a workload the node was verified on, unless `any_shape`: Error(BadUsage) otherwise, saying which were
  // verified. Sizes are read as integers; a negative one, sizes that make a buffer's bytes overflow, and a null
  // data pointer for a buffer that has elements are Error(BadUsage), naming the param, whatever `any_shape`
  // says. Throws Error(Internal) when a step fails. On a GPU it runs on the device's own stream and the call
  // returns when the program has finished. Temporaries are poisoned once, when a size is first called, and then
  // keep what the last call left, as they did through the node's verification.
  void call(void* const* args, bool any_shape = false);
  // The same, queued on the caller's `stream` (a CUstream or hipStream_t of the GPU's primary context, the one
  // the CUDA and HIP runtimes and PyTorch use; null: the default stream), returning without waiting, as a
  // kernel launch does; so it can be captured in a CUDA graph. On the CPU it runs on the calling thread, and
  // `stream` must be null. A program's temporaries are allocated at the first call of each size and kept:
  // calls of one CallableProgram on different streams must be ordered by the caller, as for any workspace.
  void enqueue(void* const* args, void* stream, bool any_shape = false);

  // The shape of buffer param `index` at `sizes` (every size param bound); Error(BadUsage) otherwise, and for a
  // negative size or dimension.
  std::vector<std::int64_t> shape(std::size_t index, const Bindings& sizes) const;
  // The sizes `args` give (as call() reads them), and whether they and the scalars are a verified workload;
  // `why` says what is not. Error(BadUsage) for a null argument or a negative size.
  bool verified(void* const* args, Bindings& sizes, std::string& why) const;

  const Spec& spec() const;
  const Provenance& provenance() const;

 private:
  CallableProgram();
  void run(void* const* args, void* stream, bool any_shape, bool wait);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelevolve
