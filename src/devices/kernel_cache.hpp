// The compiled-module cache every device keeps: kernels by a key of everything that shaped them (source,
// entry, defines, flags, target), least recently used dropped first. Thread-safe.
#pragma once
#include <algorithm>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kernelevolve/device.hpp"

namespace kernelevolve {

class KernelCache {
 public:
  explicit KernelCache(std::size_t capacity) : capacity_(std::max<std::size_t>(1, capacity)) {}
  ~KernelCache() { clear(); }

  // The kernel under `key`, now the most recently used; null when there is none.
  std::shared_ptr<Kernel> find(const std::string& key) {
    std::lock_guard lock(mutex_);
    const auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->kernel;
  }

  // Keeps `kernel` under `key` and returns it; if another thread stored one meanwhile, that one is kept
  // and returned instead, so a source has one module. A kernel dropped (the loser of that race, or the
  // least recently used one over capacity) is released after the lock: unloading may take a device's lock.
  std::shared_ptr<Kernel> insert(const std::string& key, std::shared_ptr<Kernel> kernel) {
    std::shared_ptr<Kernel> dropped;
    {
      std::lock_guard lock(mutex_);
      if (const auto it = index_.find(key); it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        dropped = std::move(kernel);
        kernel = it->second->kernel;
      } else {
        lru_.push_front(Entry{key, kernel});
        index_[key] = lru_.begin();
        if (lru_.size() > capacity_) {
          dropped = std::move(lru_.back().kernel);
          index_.erase(lru_.back().key);
          lru_.pop_back();
        }
      }
    }
    return kernel;
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return lru_.size();
  }

  void clear() {
    std::list<Entry> dropped;  // released after the lock, as in insert
    std::lock_guard lock(mutex_);
    index_.clear();
    dropped.swap(lru_);
  }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<Kernel> kernel;
  };
  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace kernelevolve
