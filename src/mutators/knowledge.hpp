// The knowledge base the model mutator retrieves from: markdown files split into passages at their
// headings, indexed with SQLite FTS5 (in memory), ranked by bm25 against a query. A file says what it
// applies to in front matter, so that a CPU run's prompt carries no passage about warps:
//   ---
//   devices: cpu            (device kinds: cpu, cuda, hip; absent: every device)
//   languages: c cpp        (kernel languages: c, cpp, cuda, hip, triton; absent: every language)
//   ---
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace kernelevolve::mutators {

struct Passage {
  std::string file;
  std::string heading;
  std::string text;
  std::string devices;    // from the file's front matter, space-separated; empty: any
  std::string languages;  // likewise
};

// What a run's prompt may use: the device kind ("cpu", "cuda", "hip") and the kernel language ("c", "triton").
struct Applies {
  std::string device;
  std::string language;
};

class KnowledgeBase {
 public:
  // Indexes every *.md file under the folders; folders that do not exist are skipped.
  explicit KnowledgeBase(const std::vector<std::string>& folders);
  ~KnowledgeBase();
  KnowledgeBase(const KnowledgeBase&) = delete;
  KnowledgeBase& operator=(const KnowledgeBase&) = delete;
  // The best passages for `query` among those that apply to `to` (an empty field there takes any), best
  // first, whose texts together fit in `budget_chars`.
  std::vector<Passage> retrieve(const std::string& query, std::size_t budget_chars, const Applies& to = {}) const;
  std::size_t passages() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The knowledge base shipped with the library: $KE_KNOWLEDGE, else share/kernelevolve/knowledge beside
// the installed library, else the source tree's knowledge/ folder.
std::string shipped_knowledge_dir();

}  // namespace kernelevolve::mutators
