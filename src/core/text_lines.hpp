// Small text helpers that the source scanners share (core/tunables.cpp, mutators/answer.cpp): a model's answer and a
// kernel's declarations are read line by line, with CRLF line ends taken as LF.
#pragma once

#include <cctype>
#include <string>
#include <vector>

namespace kernelevolve::text {

inline std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// Every line, the last one too when the text does not end with a newline; a '\r' before the '\n' dropped.
inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      std::string line = text.substr(start, i - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(line);
      start = i + 1;
    }
  }
  return lines;
}

inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace kernelevolve::text
