// KernelEvolve: evolves faster compute kernels. This header includes every public part.
#pragma once
#include "kernelevolve/candidate.hpp"
#include "kernelevolve/device.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/evolver.hpp"
#include "kernelevolve/expr.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/mutator.hpp"
#include "kernelevolve/report.hpp"
#include "kernelevolve/search_graph.hpp"
#include "kernelevolve/selection.hpp"
#include "kernelevolve/spec.hpp"
#include "kernelevolve/stop_rule.hpp"
