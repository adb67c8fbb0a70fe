// Device::launch_steps' default: a program's steps through launch(), one at a time. A device that can queue
// them all between two events (the GPU core) does better; on the CPU, where each call is the time, this is it.
#include "kernelevolve/device.hpp"

namespace kernelevolve {

LaunchResult Device::launch_steps(const std::vector<LaunchStep>& steps, bool timed, bool flush_cache,
                                  std::vector<double>* each) {
  LaunchResult total;
  if (each) each->clear();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const LaunchStep& step = steps[i];
    LaunchResult r = launch(*step.kernel, step.args, step.dims, timed || each, flush_cache && i == 0);
    if (!r.ok) {
      r.failed_step = i;
      return r;
    }
    total.time_us += r.time_us;
    total.host_us += r.host_us;
    if (each) each->push_back(r.time_us);
  }
  return total;
}

LaunchResult Device::enqueue_steps(const std::vector<LaunchStep>& steps, void* stream) {
  if (stream) {
    LaunchResult r;
    r.ok = false;
    r.error = info().id + ": a stream was given, but this device runs a program on the calling thread";
    return r;
  }
  return launch_steps(steps);
}

}  // namespace kernelevolve
