// Candidate::key and code_key: the identity of a point in the search, so that the graph never measures the
// same code with the same tunables twice.
#include "kernelevolve/candidate.hpp"
#include "kernelevolve/program.hpp"

#include <cctype>
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

// key() over `source` as given.
std::string key_of(const std::string& source, Language language, const Bindings& tunables) {
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

}  // namespace

std::string without_comments(const std::string& source, Language language) {
  const bool python = language == Language::triton || language == Language::pytorch;
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (python && source[i] == '#') {
      while (i < source.size() && source[i] != '\n') ++i;
    } else if (!python && source.compare(i, 2, "//") == 0) {
      while (i < source.size() && source[i] != '\n') ++i;
    } else if (!python && source.compare(i, 2, "/*") == 0) {
      const std::size_t end = source.find("*/", i + 2);
      const std::size_t last = end == std::string::npos ? source.size() : end + 2;
      // The comment that holds a program's plan is code: it says what runs (program.hpp).
      if (source.substr(i, last - i).find(kPlanMarker) != std::string::npos) {
        out.append(source, i, last - i);
        i = last - 1;
        continue;
      }
      i = end == std::string::npos ? source.size() : end + 1;
      continue;
    }
    if (i < source.size()) out += source[i];
  }
  return out;
}

std::string Candidate::key() const { return key_of(source, language, tunables); }

std::string Candidate::code_key() const {
  // Comments gone, blank lines dropped, each line trimmed and its inner runs of blanks made one; a line's
  // indentation kept where it means something (Python). Line breaks stay: the preprocessor reads them.
  const bool python = language == Language::triton || language == Language::pytorch;
  const std::string code = without_comments(source, language);
  std::string normal;
  normal.reserve(code.size());
  std::size_t at = 0;
  while (at <= code.size()) {
    std::size_t end = code.find('\n', at);
    if (end == std::string::npos) end = code.size();
    std::size_t b = at, e = end;
    while (e > b && std::isspace(static_cast<unsigned char>(code[e - 1]))) --e;
    std::string line;
    if (python) {
      while (b < e && (code[b] == ' ' || code[b] == '\t')) line += code[b++];
    } else {
      while (b < e && std::isspace(static_cast<unsigned char>(code[b]))) ++b;
    }
    bool blank = false;
    for (std::size_t i = b; i < e; ++i) {
      const bool space = code[i] == ' ' || code[i] == '\t' || code[i] == '\r';
      if (space && !blank) line += ' ';
      if (!space) line += code[i];
      blank = space;
    }
    if (b < e) normal += line + '\n';
    at = end + 1;
  }
  return key_of(normal, language, tunables);
}

}  // namespace kernelevolve
