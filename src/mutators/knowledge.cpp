#include "mutators/knowledge.hpp"

#include <dlfcn.h>
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "kernelevolve/error.hpp"

namespace kernelevolve::mutators {

namespace fs = std::filesystem;

namespace {

// The front matter's `key: values` lines (between `---` lines at the top), and the text after it.
std::map<std::string, std::string> front_matter(std::string& text) {
  std::map<std::string, std::string> out;
  if (text.rfind("---\n", 0) != 0) return out;
  const std::size_t end = text.find("\n---", 3);
  if (end == std::string::npos) return out;
  std::istringstream in(text.substr(4, end - 4));
  for (std::string line; std::getline(in, line);) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon), value = line.substr(colon + 1);
    key.erase(0, key.find_first_not_of(" \t"));
    key.erase(key.find_last_not_of(" \t") + 1);
    if (const std::size_t hash = value.find('#'); hash != std::string::npos) value.erase(hash);  // a comment
    std::replace(value.begin(), value.end(), ',', ' ');
    out[key] = " " + value + " ";  // padded, so that a kind is found as " cpu "
  }
  const std::size_t after = text.find('\n', end + 1);
  text = after == std::string::npos ? std::string() : text.substr(after + 1);
  return out;
}

bool applies(const std::string& list, const std::string& wanted) {
  if (wanted.empty() || list.find_first_not_of(' ') == std::string::npos) return true;
  return list.find(" " + wanted + " ") != std::string::npos || list.find(" any ") != std::string::npos;
}

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

// Every feature a requirement names is there, and none it names with "!" is. Unknown features meet all.
bool requirements_met(const std::string& requirements, const std::optional<std::vector<std::string>>& features) {
  if (!features) return true;
  for (const std::string& r : words(requirements)) {
    const bool must_lack = r[0] == '!';
    const std::string name = must_lack ? r.substr(1) : r;
    const bool has = std::find(features->begin(), features->end(), name) != features->end();
    if (has == must_lack) return false;
  }
  return true;
}

// A section's own requirements: `<!-- requires: avx512f -->` as the first line under its heading.
std::optional<std::string> section_requirements(const std::string& line) {
  static const std::string open = "<!--", key = "requires:", close = "-->";
  const std::size_t start = line.find_first_not_of(" \t");
  if (start == std::string::npos || line.compare(start, open.size(), open) != 0) return std::nullopt;
  const std::size_t end = line.rfind(close);
  if (end == std::string::npos || end < start + open.size()) return std::nullopt;
  std::string inside = line.substr(start + open.size(), end - start - open.size());
  inside.erase(0, inside.find_first_not_of(" \t"));
  if (inside.compare(0, key.size(), key) != 0) return std::nullopt;
  inside = inside.substr(key.size());
  std::replace(inside.begin(), inside.end(), ',', ' ');
  return lowercase(inside);
}

// Splits markdown at headings; long sections are cut at paragraph breaks so one passage stays small.
std::vector<Passage> split_passages(const std::string& file, std::string text) {
  std::vector<Passage> out;
  const auto meta = front_matter(text);
  const std::string file_requirements = meta.count("requires") ? lowercase(meta.at("requires")) : "";
  Passage current{file,
                  "",
                  "",
                  meta.count("devices") ? meta.at("devices") : "",
                  meta.count("languages") ? meta.at("languages") : "",
                  ""};
  auto set_requirements = [&](const std::string& section) {
    const auto all = words(file_requirements + " " + section);
    current.requirements.clear();
    for (const auto& w : all) current.requirements += (current.requirements.empty() ? "" : " ") + w;
  };
  set_requirements("");
  auto flush = [&] {
    if (current.text.find_first_not_of(" \n\t") != std::string::npos) out.push_back(current);
    current.text.clear();
  };
  std::istringstream in(text);
  std::string line;
  bool under_heading = false;  // no text yet since the last heading: where a section's requirements go
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '#') {
      flush();
      const std::size_t start = line.find_first_not_of("# ");
      current.heading = start == std::string::npos ? "" : line.substr(start);
      set_requirements("");
      under_heading = true;
      continue;
    }
    if (under_heading && line.find_first_not_of(" \t") == std::string::npos) continue;
    if (under_heading) {
      under_heading = false;
      if (const auto section = section_requirements(line)) {
        set_requirements(*section);
        continue;
      }
    }
    if (line.empty() && current.text.size() > 1500) flush();
    current.text += line + "\n";
  }
  flush();
  return out;
}

// FTS5 query: each word of the text, quoted, joined by OR (so any match counts and bm25 ranks).
std::string fts_query(const std::string& text) {
  std::set<std::string> words;
  std::string word;
  auto add = [&] {
    if (word.size() >= 3) words.insert(word);
    word.clear();
  };
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '_') {
      word += static_cast<char>(std::tolower(c));
    } else {
      add();
    }
  }
  add();
  std::string query;
  for (const auto& w : words) query += (query.empty() ? "" : " OR ") + ("\"" + w + "\"");
  return query;
}

}  // namespace

struct KnowledgeBase::Impl {
  sqlite3* db = nullptr;
  std::size_t count = 0;
  mutable std::mutex mutex;  // one connection, used from any thread
};

KnowledgeBase::KnowledgeBase(const std::vector<std::string>& folders) : impl_(std::make_unique<Impl>()) {
  if (sqlite3_open(":memory:", &impl_->db) != SQLITE_OK)
    throw Error(ErrorCode::Internal, "knowledge base: cannot open SQLite");
  char* err = nullptr;
  if (sqlite3_exec(impl_->db,
                   "CREATE VIRTUAL TABLE passages USING fts5(file UNINDEXED, heading, text, devices UNINDEXED, "
                   "languages UNINDEXED, requirements UNINDEXED)",
                   nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string message = err ? err : "unknown";
    sqlite3_free(err);
    throw Error(ErrorCode::Internal, "knowledge base: SQLite without FTS5? " + message);
  }
  sqlite3_stmt* insert = nullptr;
  sqlite3_prepare_v2(
      impl_->db,
      "INSERT INTO passages(file, heading, text, devices, languages, requirements) VALUES (?, ?, ?, ?, ?, ?)", -1,
      &insert, nullptr);
  for (const auto& folder : folders) {
    std::error_code ec;
    if (folder.empty() || !fs::is_directory(folder, ec)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(folder, ec)) {
      if (entry.path().extension() != ".md" || entry.path().filename() == "README.md") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      for (const Passage& p : split_passages(entry.path().filename().string(), text.str())) {
        sqlite3_bind_text(insert, 1, p.file.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(insert, 2, p.heading.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(insert, 3, p.text.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(insert, 4, p.devices.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(insert, 5, p.languages.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(insert, 6, p.requirements.c_str(), -1, SQLITE_TRANSIENT);
        if (sqlite3_step(insert) == SQLITE_DONE) impl_->count += 1;
        sqlite3_reset(insert);
      }
    }
  }
  sqlite3_finalize(insert);
}

KnowledgeBase::~KnowledgeBase() { sqlite3_close(impl_->db); }

std::size_t KnowledgeBase::passages() const { return impl_->count; }

std::vector<Passage> KnowledgeBase::retrieve(const std::string& query, std::size_t budget_chars,
                                             const Applies& to) const {
  std::vector<Passage> out;
  const std::string match = fts_query(query);
  if (match.empty() || impl_->count == 0) return out;
  std::lock_guard lock(impl_->mutex);
  sqlite3_stmt* select = nullptr;
  if (sqlite3_prepare_v2(
          impl_->db,
          "SELECT file, heading, text, devices, languages, requirements FROM passages WHERE passages MATCH ? "
          "ORDER BY bm25(passages, 0.0, 4.0, 1.0, 0.0, 0.0, 0.0) LIMIT 400",
          -1, &select, nullptr) != SQLITE_OK) {
    return out;
  }
  sqlite3_bind_text(select, 1, match.c_str(), -1, SQLITE_TRANSIENT);
  std::size_t used = 0;
  while (sqlite3_step(select) == SQLITE_ROW) {
    Passage p;
    p.file = reinterpret_cast<const char*>(sqlite3_column_text(select, 0));
    p.heading = reinterpret_cast<const char*>(sqlite3_column_text(select, 1));
    p.text = reinterpret_cast<const char*>(sqlite3_column_text(select, 2));
    p.devices = reinterpret_cast<const char*>(sqlite3_column_text(select, 3));
    p.languages = reinterpret_cast<const char*>(sqlite3_column_text(select, 4));
    p.requirements = reinterpret_cast<const char*>(sqlite3_column_text(select, 5));
    if (!applies(p.devices, to.device) || !applies(p.languages, to.language)) continue;
    if (!requirements_met(p.requirements, to.features)) continue;
    const std::size_t size = p.heading.size() + p.text.size();
    if (used + size > budget_chars) continue;  // a smaller passage further down may still fit
    used += size;
    out.push_back(std::move(p));
  }
  sqlite3_finalize(select);
  return out;
}

std::optional<std::vector<std::string>> note_features(const DeviceInfo& device) {
  const auto property = [&](const char* key) {
    const auto it = device.properties.find(key);
    return it == device.properties.end() ? std::string() : it->second;
  };
  if (device.kind == "cpu") {
    const std::string isa = property("isa");
    if (isa.empty()) return std::nullopt;
    // The CPU device says "none beyond the base instruction set" rather than nothing: known, and none.
    if (isa.rfind("none", 0) == 0) return std::vector<std::string>{};
    return words(lowercase(isa));
  }
  const std::string arch = property("arch");
  if (arch.empty()) return std::nullopt;
  return std::vector<std::string>{lowercase(arch)};
}

// Reads the lines describe_device_for_model (mutators/device_facts.cpp) writes: a CPU's
// "Vector extensions enabled: avx2 fma." and a GPU's first line "NAME (cuda:0, sm_90): ...".
std::optional<std::vector<std::string>> note_features(const std::string& device_description) {
  static const std::string isa_label = "Vector extensions enabled: ";
  std::istringstream in(device_description);
  std::string first;
  bool at_first = true;
  for (std::string line; std::getline(in, line); at_first = false) {
    if (at_first) first = line;
    if (line.rfind(isa_label, 0) != 0) continue;
    std::string isa = line.substr(isa_label.size());
    if (!isa.empty() && isa.back() == '.') isa.pop_back();
    DeviceInfo cpu;
    cpu.kind = "cpu";
    cpu.properties["isa"] = isa;
    return note_features(cpu);
  }
  for (const char* kind : {"(cuda:", "(hip:"}) {
    const std::size_t open = first.find(kind);
    if (open == std::string::npos) continue;
    const std::size_t comma = first.find(", ", open), close = first.find("):", open);
    if (comma == std::string::npos || close == std::string::npos || comma > close) return std::nullopt;
    DeviceInfo gpu;
    gpu.kind = std::string(kind).substr(1, std::strlen(kind) - 2);
    gpu.properties["arch"] = first.substr(comma + 2, close - comma - 2);
    return note_features(gpu);
  }
  return std::nullopt;
}

std::string shipped_knowledge_dir() {
  if (const char* env = std::getenv("KE_KNOWLEDGE"); env && *env) return env;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&shipped_knowledge_dir), &info) && info.dli_fname) {
    const fs::path installed =
        fs::absolute(info.dli_fname).parent_path().parent_path() / "share" / "kernelevolve" / "knowledge";
    std::error_code ec;
    if (fs::is_directory(installed, ec)) return installed.string();
  }
#ifdef KE_SOURCE_KNOWLEDGE
  return KE_SOURCE_KNOWLEDGE;
#else
  return "";
#endif
}

}  // namespace kernelevolve::mutators
