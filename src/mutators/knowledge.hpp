// The knowledge base the model mutator retrieves from: markdown files split into passages at their
// headings, indexed with SQLite FTS5 (in memory), ranked by bm25 against a query. A file says what it
// applies to in front matter, so that a CPU run's prompt carries no passage about warps:
//   ---
//   devices: cpu            (device kinds: cpu, cuda, hip; absent: every device)
//   languages: c cpp        (kernel languages: c, cpp, cuda, hip, triton; absent: every language)
//   requires: avx2 fma      (features the device must have, "!x" one it must lack; absent: none)
//   ---
// and a section may add requirements of its own in a line right under its heading,
//   <!-- requires: avx512f -->
// so that advice for AVX-512 never reaches a prompt for a CPU without it (knowledge/README.md).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernelevolve/device.hpp"

namespace kernelevolve::mutators {

struct Passage {
  std::string file;
  std::string heading;
  std::string text;
  std::string devices;       // from the file's front matter, space-separated; empty: any
  std::string languages;     // likewise
  std::string requirements;  // the file's and the section's `requires:`, space-separated; empty: none
};

// What a run's prompt may use: the device kind ("cpu", "cuda", "hip"), the kernel language ("c", "triton"),
// and the device's features (note_features). Features unknown (nullopt) take every requirement as met, as
// before notes had requirements: a caller that cannot tell gets every note rather than none. An empty list is
// a device known to have none of them (a CPU with only the base instruction set).
struct Applies {
  std::string device;
  std::string language;
  std::optional<std::vector<std::string>> features;
};

// What a device offers notes' `requires:`: a CPU's enabled vector and matrix extensions (its "isa" property,
// "avx2 fma avx512f ..."), a GPU's architecture (its "arch" property, "sm_90"); nullopt where neither is known.
std::optional<std::vector<std::string>> note_features(const DeviceInfo& device);
// The same read back from describe_device_for_model's text, which is all the model mutator is given of its
// device (LlmOptions::device_description); nullopt for a description written some other way.
std::optional<std::vector<std::string>> note_features(const std::string& device_description);

class KnowledgeBase {
 public:
  // Indexes every *.md file under the folders; folders that do not exist are skipped.
  explicit KnowledgeBase(const std::vector<std::string>& folders);
  ~KnowledgeBase();
  KnowledgeBase(const KnowledgeBase&) = delete;
  KnowledgeBase& operator=(const KnowledgeBase&) = delete;
  // The best passages for `query` among those that apply to `to` (an empty field there takes any) and whose
  // requirements its features meet, best first, whose texts together fit in `budget_chars`.
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
