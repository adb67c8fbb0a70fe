#include "mutators/answer.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "core/text_lines.hpp"
#include "core/tunables.hpp"

namespace kernelevolve::mutators {

namespace {

using text::split_lines;
using text::starts_with;
using text::trim;

std::string join(const std::vector<std::string>& lines, std::size_t from, std::size_t to) {
  std::string out;
  for (std::size_t i = from; i < to; ++i) out += lines[i] + "\n";
  return out;
}

ParsedAnswer apply_edits(const std::vector<std::string>& lines, const std::string& parent) {
  ParsedAnswer r;
  r.form = "edits";
  std::string source = parent;
  int applied = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]) != "<<<<<<< SEARCH") continue;
    std::size_t mid = i + 1;
    while (mid < lines.size() && trim(lines[mid]) != "=======") ++mid;
    std::size_t end = mid + 1;
    while (end < lines.size() && trim(lines[end]) != ">>>>>>> REPLACE") ++end;
    if (mid >= lines.size() || end >= lines.size()) {
      r.error = "edit " + std::to_string(applied + 1) + " is not closed (expected ======= and >>>>>>> REPLACE)";
      return r;
    }
    std::string search = join(lines, i + 1, mid);
    const std::string replace = join(lines, mid + 1, end);
    std::size_t at = source.find(search);
    if (at == std::string::npos && !search.empty()) {
      // The parent's last line may lack a newline.
      search.pop_back();
      at = source.find(search);
      if (at == std::string::npos) {
        r.error = "edit " + std::to_string(applied + 1) + ": the SEARCH text does not occur in the parent:\n" + search;
        return r;
      }
      source.replace(at, search.size(), replace.empty() ? replace : replace.substr(0, replace.size() - 1));
    } else if (search.empty()) {
      r.error = "edit " + std::to_string(applied + 1) + ": the SEARCH text is empty";
      return r;
    } else {
      source.replace(at, search.size(), replace);
    }
    ++applied;
    i = end;
  }
  r.source = source;
  r.ok = true;
  return r;
}

}  // namespace

ParsedAnswer apply_answer(const std::string& answer, const std::string& parent_source) {
  ParsedAnswer r;
  if (trim(answer).empty()) {
    r.error = "the answer is empty";
    return r;
  }
  const std::vector<std::string> lines = split_lines(answer);
  const bool has_edits =
      std::any_of(lines.begin(), lines.end(), [](const std::string& l) { return trim(l) == "<<<<<<< SEARCH"; });
  if (has_edits) {
    r = apply_edits(lines, parent_source);
  } else {
    static const std::vector<std::string> kTags = {"",    "c",  "cpp", "c++",    "cxx",    "cuda", "cu",
                                                   "hip", "cc", "h",   "python", "triton", "py"};
    std::string best;
    bool found = false;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string opener = trim(lines[i]);
      if (!starts_with(opener, "```")) continue;
      std::string tag = trim(opener.substr(3));
      std::transform(tag.begin(), tag.end(), tag.begin(), [](unsigned char c) { return std::tolower(c); });
      std::size_t end = i + 1;
      while (end < lines.size() && trim(lines[end]) != "```") ++end;
      if (end >= lines.size()) break;  // an unclosed fence holds no usable block
      if (std::find(kTags.begin(), kTags.end(), tag) != kTags.end()) {
        std::string block = join(lines, i + 1, end);
        if (!found || block.size() > best.size()) best = block;
        found = true;
      }
      i = end;
    }
    if (!found) {
      r.error = "the answer holds neither a fenced code block nor SEARCH/REPLACE edits";
      return r;
    }
    r.form = "fenced";
    r.source = best;
    r.ok = true;
  }
  if (r.ok && trim(r.source) == trim(parent_source)) {
    r.ok = false;
    r.error = "the answer changes nothing";
  }
  if (r.ok && trim(r.source).empty()) {
    r.ok = false;
    r.error = "the answer's source is empty";
  }
  return r;
}

ModelChild model_child(const Spec& spec, const Candidate& base, const std::string& answer) {
  ModelChild made;
  const ParsedAnswer parsed = apply_answer(answer, base.source);
  if (!parsed.ok) {
    made.error = "the model's answer was not usable: " + parsed.error;
    return made;
  }
  Candidate child = base;
  child.source = parsed.source;
  // The tunables it still reads, and those it declares: a dead one would only be searched in vain.
  child.tunables = live_tunables(spec, child.source, child.language, base.tunables);
  made.child = std::move(child);
  // The model's one-sentence account, before its code.
  std::string first = answer.substr(0, answer.find("```"));
  first = first.substr(0, first.find('\n'));
  made.note = "llm (" + parsed.form + ")" + (first.empty() ? "" : ": " + first.substr(0, 120));
  return made;
}

}  // namespace kernelevolve::mutators
