// Candidate::key: the identity of a point in the search, so that the graph never measures the same
// source with the same tunables twice.
#include "kernelevolve/candidate.hpp"

#include <cstdint>
#include <cstdio>
#include <string>

namespace kernelevolve {
namespace {

// 64-bit FNV-1a: stable across runs, platforms and standard libraries (std::hash is not), so keys
// stored in a database stay valid.
std::uint64_t fnv1a64(const std::string& text, std::uint64_t hash = 0xcbf29ce484222325ULL) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

std::string Candidate::key() const {
  // Two hashes with different offsets plus the length: a collision needs all three to agree.
  const std::uint64_t h1 = fnv1a64(source);
  const std::uint64_t h2 = fnv1a64(source, 0x84222325cbf29ce4ULL ^ source.size());
  char head[64];
  std::snprintf(head, sizeof head, "%s:%zu:%016llx%016llx|", to_string(language), source.size(),
                static_cast<unsigned long long>(h1), static_cast<unsigned long long>(h2));
  std::string key = head;
  for (const auto& [name, value] : tunables) {  // Bindings is a std::map: already sorted by name
    key += name;
    key += '=';
    key += std::to_string(value);
    key += ';';
  }
  return key;
}

}  // namespace kernelevolve
