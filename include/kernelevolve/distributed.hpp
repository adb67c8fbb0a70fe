// Beyond one device: evaluation spread over every device of a host, and over many hosts through MPI.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernelevolve/fitness.hpp"

namespace kernelevolve {

// Expands a device list: "cuda:all" (every CUDA device found), "cuda:0,cuda:1", "cpu", or a mix.
// Throws Error(DeviceUnavailable) when a kind has no device, Error(BadUsage) for a malformed list.
std::vector<std::string> expand_device_list(const std::string& list);
// The expansion alone, against the devices `present`: each "KIND:all" becomes the ids of that kind in
// `present`, in their order; other items stay as written, and a device named twice stays twice (optimize's
// --devices cpu,cpu runs two regions at once on the CPU). Throws Error(BadUsage) for an empty item,
// Error(DeviceUnavailable) when a KIND:all finds no device of its kind.
std::vector<std::string> expand_device_items(const std::string& list, const std::vector<DeviceInfo>& present);
// Whether `device` names several devices (a list, or "KIND:all") rather than one.
bool is_device_list(const std::string& device);

// The lock file that keeps timings on one device from overlapping, shared by every run on the host.
std::string default_timing_lock(const std::string& device_id);

// One WorkerEvaluator per device, `jobs_per_device` workers each (their compilation and verification
// overlap; their timings take turns through the device's lock); each candidate goes to a device with a
// free worker. Devices of different models are different classes, whose times are never compared.
class MultiDeviceEvaluator final : public FitnessEvaluator {
 public:
  MultiDeviceEvaluator(Spec spec, std::vector<std::string> device_ids, WorkerOptions options, int jobs_per_device = 1);
  ~MultiDeviceEvaluator() override;
  Evaluation evaluate(const Candidate& candidate, std::uint64_t input_seed) override;
  Evaluation evaluate_on(std::size_t device_class_index, const Candidate& candidate, std::uint64_t input_seed) override;
  DeviceInfo device_info() override;
  std::vector<std::string> device_classes() override;
  // Evaluations that can run at once: devices times jobs per device.
  int slots() const;
  // Evaluations completed on each device, in the order of the ids given.
  std::vector<long> evaluations_per_device() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// MPI: rank 0 runs the search and owns the store; every other rank evaluates on its own device, each
// candidate in its own worker process. Requires a build with KE_WITH_MPI; under mpirun, pass
// --enable-recovery so that a rank that dies does not take the job down with it.
struct MpiOptions {
  // A busy rank silent for this long (no result, no heartbeat) is declared dead.
  double rank_silence_s = 15;
  // A dead rank's candidate is sent to another rank this many times before it is recorded `crashed`.
  int max_requeues = 1;
};

bool mpi_built();
// Initialises MPI (threads serialised) and returns this process's rank. Throws Error(BadUsage) if the
// library was built without MPI.
int mpi_init(int* argc, char*** argv);
int mpi_rank();
int mpi_size();
void mpi_finalize();
// On ranks other than 0: serve evaluations on `device_id` ("cpu", "cuda:N", or "cuda:local" for the
// node-local rank modulo the GPUs present) until rank 0 says stop. Returns the number evaluated.
long mpi_serve(const std::string& device_id, WorkerOptions options);

// On rank 0: evaluates on the other ranks. Thread-safe; as many evaluations run at once as there are
// live ranks. A rank that dies is noticed, its candidate re-queued, and the run goes on with the rest;
// when none is left, evaluate throws Error(DeviceUnavailable) saying so.
class MpiEvaluator final : public FitnessEvaluator {
 public:
  MpiEvaluator(Spec spec, WorkerOptions options, MpiOptions mpi = {});
  ~MpiEvaluator() override;  // tells every live rank to stop
  Evaluation evaluate(const Candidate& candidate, std::uint64_t input_seed) override;
  Evaluation evaluate_on(std::size_t device_class_index, const Candidate& candidate, std::uint64_t input_seed) override;
  DeviceInfo device_info() override;
  std::vector<std::string> device_classes() override;
  int live_ranks() const;
  // Why ranks were given up on, one line each.
  std::vector<std::string> lost_ranks() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelevolve
