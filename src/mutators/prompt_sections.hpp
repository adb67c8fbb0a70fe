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
  // `unusable`: what was wrong with the last answer for this prompt's parent (or first kernel) that could not be
  // used, each a line; the prompt says so, so that the model does not answer the same way again.
  std::string first_kernel_prompt(const MutationContext& ctx, const std::vector<std::string>& unusable = {}) const;
  // The user message about the context's parent.
  std::string user_prompt(const MutationContext& ctx, const std::vector<std::string>& unusable = {}) const;

 private:
  void problem_section(std::ostringstream& out, const Spec& spec) const;
  // The device, and the evaluation time limit in force now (LlmOptions::time_limit_s).
  void device_section(std::ostringstream& out) const;
  void unusable_section(std::ostringstream& out, const std::vector<std::string>& unusable) const;
  std::string task_text(const Spec& spec, bool first) const;
  static void warm_section(std::ostringstream& out, const SearchGraph& g, NodeId parent, std::optional<NodeId> best);
  void knowledge_section(std::ostringstream& out, std::string query, const Spec& spec,
                         const std::vector<const Node*>& earlier = {}) const;

  const LlmOptions& options;
  const KnowledgeBase* knowledge;
};

}  // namespace kernelevolve::mutators
