// The digests the store files things under: a source's text (Store::source_hash), a spec whole (spec_hash: a
// resumed run must match it) and what a measurement depends on (measurement_hash: reuse goes by it).
#include "store/digests.hpp"

#include <cstdint>
#include <cstdio>

#include "kernelevolve/store.hpp"

namespace kernelevolve {

namespace store {

namespace {

std::uint64_t fnv1a64(const std::string& text, std::uint64_t hash = 0xcbf29ce484222325ULL) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

std::string text_hash(const std::string& text) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu:%016llx%016llx", text.size(), static_cast<unsigned long long>(fnv1a64(text)),
                static_cast<unsigned long long>(fnv1a64(text, 0x84222325cbf29ce4ULL ^ text.size())));
  return buf;
}

}  // namespace store

namespace {

std::string spec_json_without(Spec spec, bool keep_search_space) {
  if (!keep_search_space) {
    spec.name.clear();
    spec.family.clear();
    spec.notes.clear();
    spec.tunables.clear();
    spec.constraints.clear();
    spec.seed = SourceRef{};
    spec.seed.source = " ";  // validate-free: to_json only writes it
  }
  return to_json(spec);
}

}  // namespace

std::string spec_hash(const Spec& spec) { return store::text_hash(spec_json_without(spec, true)); }
std::string measurement_hash(const Spec& spec) { return store::text_hash(spec_json_without(spec, false)); }

std::string Store::source_hash(const std::string& text) { return store::text_hash(text); }

}  // namespace kernelevolve
