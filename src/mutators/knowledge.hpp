// The knowledge base the model mutator retrieves from: markdown files split into passages at their
// headings, indexed with SQLite FTS5 (in memory), ranked by bm25 against a query.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace kernelevolve::mutators {

struct Passage {
  std::string file;
  std::string heading;
  std::string text;
};

class KnowledgeBase {
 public:
  // Indexes every *.md file under the folders; folders that do not exist are skipped.
  explicit KnowledgeBase(const std::vector<std::string>& folders);
  ~KnowledgeBase();
  KnowledgeBase(const KnowledgeBase&) = delete;
  KnowledgeBase& operator=(const KnowledgeBase&) = delete;
  // The best passages for `query`, best first, whose texts together fit in `budget_chars`.
  std::vector<Passage> retrieve(const std::string& query, std::size_t budget_chars) const;
  std::size_t passages() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The knowledge base shipped with the library: $KE_KNOWLEDGE, else share/kernelevolve/knowledge beside
// the installed library, else the source tree's knowledge/ folder.
std::string shipped_knowledge_dir();

}  // namespace kernelevolve::mutators
