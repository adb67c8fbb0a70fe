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

namespace {

// Whether a line is a child's heading: `### Child 2` (one to four #, any case, a number after the word).
bool child_heading(const std::string& raw) {
  const std::string line = trim(raw);
  std::size_t at = 0;
  while (at < line.size() && line[at] == '#') ++at;
  if (at == 0 || at > 4) return false;
  std::string rest = trim(line.substr(at));
  std::transform(rest.begin(), rest.end(), rest.begin(), [](unsigned char c) { return std::tolower(c); });
  if (!starts_with(rest, "child")) return false;
  rest = trim(rest.substr(5));
  return !rest.empty() && std::isdigit(static_cast<unsigned char>(rest[0]));
}

}  // namespace

std::vector<std::string> answer_parts(const std::string& answer) {
  const std::vector<std::string> lines = split_lines(answer);
  std::vector<std::string> parts;
  bool inside_fence = false;  // a heading inside a code block is code
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (starts_with(trim(lines[i]), "```")) inside_fence = !inside_fence;
    if (!inside_fence && child_heading(lines[i])) {
      parts.emplace_back();
      continue;
    }
    if (!parts.empty()) parts.back() += lines[i] + "\n";
  }
  if (parts.empty()) return {answer};
  return parts;
}

std::vector<ModelChild> model_children(const Spec& spec, const Candidate& base, const std::string& answer) {
  const std::vector<std::string> parts = answer_parts(answer);
  std::vector<ModelChild> made;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    ModelChild child = model_child(spec, base, parts[i]);
    if (parts.size() > 1) {
      const std::string which = "child " + std::to_string(i + 1) + " of " + std::to_string(parts.size());
      if (child.child) {
        child.note.insert(child.note.find(')'), ", " + which);
      } else {
        child.error = which + ": " + child.error;
      }
    }
    made.push_back(std::move(child));
  }
  return made;
}

}  // namespace kernelevolve::mutators
