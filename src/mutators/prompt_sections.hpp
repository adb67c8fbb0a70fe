// The model's prompt, section by section: the system message (the rules, how to answer, the tunables' rule, how
// a source declares its own plan), the problem (signature, workloads, how the figures are made, where a CPU
// kernel's inputs are), the parent and what became of its lineage and its other children, the best so far, the
// warm start's kernels, the knowledge base's passages; and for a problem without a seed the first kernel's
// prompt (the reference and each param in place of a parent). The figures they give are prompt_facts.hpp's.
#pragma once
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kernelevolve/mutator.hpp"

namespace kernelevolve::mutators {

class KnowledgeBase;

class PromptWriter {
 public:
  // Both are borrowed and must outlive the writer; `knowledge` may be null (no passages).
  PromptWriter(const LlmOptions& options, const KnowledgeBase* knowledge) : options(options), knowledge(knowledge) {}
  std::string system_prompt(const Spec& spec, bool first) const;
  // The user message for the first kernel of a problem without a seed.
  std::string first_kernel_prompt(const MutationContext& ctx) const;
  // The user message about the context's parent.
  std::string user_prompt(const MutationContext& ctx) const;

 private:
  static void problem_section(std::ostringstream& out, const Spec& spec, const std::string& device_description);
  static void warm_section(std::ostringstream& out, const SearchGraph& g, NodeId parent, std::optional<NodeId> best);
  void knowledge_section(std::ostringstream& out, std::string query, const Spec& spec,
                         const std::vector<const Node*>& earlier = {}) const;

  const LlmOptions& options;
  const KnowledgeBase* knowledge;
};

}  // namespace kernelevolve::mutators
