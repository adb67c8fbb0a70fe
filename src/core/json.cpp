// json_quote and json_object (kernelevolve/json.hpp).
#include "kernelevolve/json.hpp"

#include <cstdio>
#include <string>

namespace kernelevolve {

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are not one.
std::size_t utf8_sequence(const std::string& s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  std::size_t n;
  unsigned min;
  unsigned cp;
  if (c >= 0xc2 && c <= 0xdf) n = 2, min = 0x80, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef) n = 3, min = 0x800, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, min = 0x10000, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

}  // namespace

std::string json_quote(const std::string& text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      // Bytes that are not UTF-8 cannot travel in JSON: they become U+FFFD rather than break the reader.
      const std::size_t n = utf8_sequence(text, i);
      if (n == 0) {
        out += "\\ufffd";
        i += 1;
      } else {
        out.append(text, i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
    i += 1;
  }
  return out + "\"";
}

std::string json_object(const Bindings& values) {
  std::string out = "{";
  for (const auto& [k, v] : values) out += (out.size() > 1 ? ", " : "") + json_quote(k) + ": " + std::to_string(v);
  return out + "}";
}

}  // namespace kernelevolve
