// The C++ API from an installed tree: the spec, the devices, and a short evolution in worker processes
// (so the installed C++ library must find the installed worker). consumer_cxx SPEC
#include <cstdio>
#include <exception>
#include <kernelevolve/kernelevolve.hpp>
#include <memory>

namespace ke = kernelevolve;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: consumer_cxx SPEC\n");
    return 2;
  }
  try {
    const ke::Spec spec = ke::load_spec(argv[1]);
    const auto devices = ke::list_devices();
    if (devices.empty() || devices.front().id != "cpu") return 1;
    auto evaluator = std::make_shared<ke::WorkerEvaluator>(spec, "cpu");
    ke::Evolver evolver(spec, evaluator, std::make_shared<ke::ParamMutator>(), ke::make_policy("greedy"),
                        ke::max_evaluations(4));
    const ke::RunResult result = evolver.run();
    if (!result.best) return 1;
    const ke::Node& best = evolver.graph().node(*result.best);
    std::printf("consumer_cxx: %s, %zu nodes, best %.2fx\n", spec.name.c_str(), evolver.graph().size(), best.speedup);
    return evolver.graph().size() == 4 && best.speedup >= 1.0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer_cxx: %s\n", e.what());
    return 1;
  }
}
