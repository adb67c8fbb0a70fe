// What the model mutator reads back from the device description that describe_device_for_model wrote
// (src/mutators/device_facts.cpp): the options carry the device only as that text, so its writer and its
// readers live in one file, as mutators::note_features does for the CPU's extensions.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace kernelevolve::mutators {

// A data cache level as the description's "Caches: l1d 48 KiB, l2 2 MiB, l3 32 MiB." line gives it.
struct CacheSize {
  std::string name;  // "L1d", "L2", "L3"
  double bytes = 0;
};

// The data caches of a CPU description, smallest first; empty when it names none (a GPU's, or unknown).
std::vector<CacheSize> description_caches(const std::string& device_description);

// The description's account of ceilings that moved since the previous measurement on the device (the
// "Ceilings moved: ..." line, without its label and final period); empty when they did not.
std::string description_ceilings_moved(const std::string& device_description);

}  // namespace kernelevolve::mutators
