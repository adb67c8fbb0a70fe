// A stored program as a function the host calls: a verified node of a run database, loaded, compiled once for
// a device, and launched on the caller's own buffers (issue 29's core; the C API and the PyTorch operator build
// on it). The program's code runs in the caller's process with the caller's rights, outside any sandbox:
// load only databases you trust.
#pragma once
#include <memory>
#include <optional>
#include <string>

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

class CallableProgram {
 public:
  // Loads the node and compiles it for `device`. Throws Error(BadUsage), naming the database, run and node,
  // when there is no such run or node, the node was not verified (its status is not ok), it was verified on
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
  // verified. A program's temporaries are allocated for the call. Throws Error(Internal) when a step fails.
  // The call returns when the program has finished: on a GPU it runs on the device's own stream (not yet the
  // caller's) and is waited for. One call at a time per CallableProgram.
  void call(void** args, bool any_shape = false);

  const Spec& spec() const;
  const Provenance& provenance() const;

 private:
  CallableProgram();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelevolve
