#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>

#include "kernelevolve/distributed.hpp"
#include "kernelevolve/error.hpp"

namespace kernelevolve {

std::vector<std::string> expand_device_items(const std::string& list, const std::vector<DeviceInfo>& present) {
  std::vector<std::string> ids;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (item.empty()) throw Error(ErrorCode::BadUsage, "device list '" + list + "': an empty item");
    const std::size_t colon = item.find(':');
    if (colon != std::string::npos && item.substr(colon + 1) == "all") {
      const std::string kind = item.substr(0, colon);
      bool any = false;
      for (const DeviceInfo& d : present) {
        if (d.kind == kind) {
          ids.push_back(d.id);
          any = true;
        }
      }
      if (!any)
        throw Error(ErrorCode::DeviceUnavailable, "device list '" + list + "': no " + kind + " device is present");
    } else {
      ids.push_back(item);
    }
  }
  return ids;
}

std::vector<std::string> expand_device_list(const std::string& list) {
  // Only a KIND:all needs the devices found (which loads each backend's driver).
  const std::vector<std::string> ids =
      expand_device_items(list, list.find(":all") != std::string::npos ? list_devices() : std::vector<DeviceInfo>{});
  std::vector<std::string> unique;
  for (const auto& id : ids) {
    if (std::find(unique.begin(), unique.end(), id) != unique.end()) {
      throw Error(ErrorCode::BadUsage, "device list '" + list + "' names " + id + " twice");
    }
    unique.push_back(id);
  }
  return unique;
}

bool is_device_list(const std::string& device) {
  return device.find(',') != std::string::npos || device.find(":all") != std::string::npos;
}

std::string default_timing_lock(const std::string& device_id) {
  std::string name = "kernelevolve-timing-" + device_id + ".lock";
  for (char& ch : name) {
    if (ch == ':' || ch == '/') ch = '_';
  }
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/" + name;
}

struct MultiDeviceEvaluator::Impl {
  struct Slot {
    std::string id;
    std::unique_ptr<WorkerEvaluator> evaluator;
    std::size_t device_class = 0;
    int free = 0;
    long done = 0;
  };
  std::vector<Slot> devices;
  std::vector<std::string> classes;
  int total_slots = 0;
  mutable std::mutex mutex;
  std::condition_variable freed;

  // Takes a free worker on a device of `wanted` class (or any class), waiting for one.
  std::size_t acquire(std::size_t wanted, bool any) {
    std::unique_lock lock(mutex);
    for (;;) {
      std::size_t best = devices.size();
      for (std::size_t i = 0; i < devices.size(); ++i) {
        if (devices[i].free == 0 || (!any && devices[i].device_class != wanted)) continue;
        if (best == devices.size() || devices[i].free > devices[best].free) best = i;
      }
      if (best != devices.size()) {
        devices[best].free -= 1;
        return best;
      }
      freed.wait(lock);
    }
  }
  void release(std::size_t i) {
    {
      std::lock_guard lock(mutex);
      devices[i].free += 1;
      devices[i].done += 1;
    }
    freed.notify_all();
  }
  Evaluation run(std::size_t i, const Candidate& c, std::uint64_t seed) {
    struct Release {
      Impl* impl;
      std::size_t i;
      ~Release() { impl->release(i); }
    } release{this, i};
    return devices[i].evaluator->evaluate(c, seed);
  }
};

MultiDeviceEvaluator::MultiDeviceEvaluator(Spec spec, std::vector<std::string> device_ids, WorkerOptions options,
                                           int jobs_per_device)
    : impl_(std::make_unique<Impl>()) {
  if (device_ids.empty()) throw Error(ErrorCode::BadUsage, "MultiDeviceEvaluator: no devices");
  if (jobs_per_device < 1) throw Error(ErrorCode::BadUsage, "MultiDeviceEvaluator: jobs per device must be at least 1");
  for (const std::string& id : device_ids) {
    Impl::Slot slot;
    slot.id = id;
    WorkerOptions wo = options;
    wo.jobs = jobs_per_device;
    wo.eval.timing_lock = default_timing_lock(id);  // each device times only its own candidates, one at a time
    slot.evaluator = std::make_unique<WorkerEvaluator>(spec, id, wo);
    const std::string cls = device_class(slot.evaluator->device_info());
    auto it = std::find(impl_->classes.begin(), impl_->classes.end(), cls);
    if (it == impl_->classes.end()) it = impl_->classes.insert(impl_->classes.end(), cls);
    slot.device_class = static_cast<std::size_t>(it - impl_->classes.begin());
    slot.free = slot.evaluator->jobs();  // lowered where the device's memory holds fewer
    impl_->total_slots += slot.free;
    impl_->devices.push_back(std::move(slot));
  }
}

MultiDeviceEvaluator::~MultiDeviceEvaluator() = default;

Evaluation MultiDeviceEvaluator::evaluate(const Candidate& candidate, std::uint64_t input_seed) {
  return impl_->run(impl_->acquire(0, true), candidate, input_seed);
}

Evaluation MultiDeviceEvaluator::evaluate_on(std::size_t device_class_index, const Candidate& candidate,
                                             std::uint64_t input_seed) {
  if (device_class_index >= impl_->classes.size()) {
    throw Error(ErrorCode::BadUsage, "MultiDeviceEvaluator: no device class " + std::to_string(device_class_index));
  }
  return impl_->run(impl_->acquire(device_class_index, false), candidate, input_seed);
}

DeviceInfo MultiDeviceEvaluator::device_info() { return impl_->devices.front().evaluator->device_info(); }

std::vector<std::string> MultiDeviceEvaluator::device_classes() { return impl_->classes; }

int MultiDeviceEvaluator::slots() const { return impl_->total_slots; }

std::vector<long> MultiDeviceEvaluator::evaluations_per_device() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<long> out;
  for (const auto& d : impl_->devices) out.push_back(d.done);
  return out;
}

}  // namespace kernelevolve
