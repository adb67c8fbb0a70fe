// The digests the store files things under: a text's (sources.hash, runs.spec_hash and measurement_hash).
#pragma once
#include <string>

namespace kernelevolve::store {

// Its length and two 64-bit FNV-1a hashes (Store::source_hash).
std::string text_hash(const std::string& text);

}  // namespace kernelevolve::store
