// The model mutator: writes the prompt (prompt_sections.hpp), calls the endpoint (endpoint.hpp) or keeps the request
// for a round, and turns the answer into a child (answer.hpp).
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include "kernelevolve/error.hpp"
#include "kernelevolve/mutator.hpp"
#include "mutators/answer.hpp"
#include "mutators/endpoint.hpp"
#include "mutators/knowledge.hpp"
#include "mutators/prompt_sections.hpp"

namespace kernelevolve {

struct LlmMutator::Impl {
  LlmOptions options;
  std::unique_ptr<mutators::KnowledgeBase> knowledge;
  std::optional<mutators::PromptWriter> prompts;  // once options and knowledge are set
  mutators::Endpoint endpoint;
  std::mutex mutex;
  std::condition_variable slot_free;
  int in_flight = 0;
  std::int64_t tokens = 0;
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
  double cost_usd = 0;
  // The usable children of the last answer not given yet (LlmOptions::children), each with its parents.
  std::deque<Mutation> waiting;
  // Per parent (-1: the first kernel), what was wrong with the parts of its last answer that could not be used:
  // the next prompt for that parent says so, rather than showing the same parent again without a word.
  std::map<NodeId, std::vector<std::string>> unusable;
};

LlmMutator::LlmMutator(LlmOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.api != "openai" && options.api != "anthropic") {
    throw Error(ErrorCode::BadUsage, "llm: unknown api '" + options.api + "' (known: openai, anthropic)");
  }
  if (options.base_url.empty()) {
    options.base_url = options.api == "anthropic" ? "https://api.anthropic.com/v1" : "https://api.openai.com/v1";
  }
  if (options.model.empty()) throw Error(ErrorCode::BadUsage, "llm: a model name is required (--llm-model)");
  if (options.memory != "inherit" && options.memory != "siblings" && options.memory != "both" &&
      options.memory != "fresh") {
    throw Error(ErrorCode::BadUsage,
                "llm: unknown memory mode '" + options.memory + "' (known: inherit, siblings, both, fresh)");
  }
  if (options.children < 1) throw Error(ErrorCode::BadUsage, "llm: ask for at least one child per prompt");
  if (options.max_in_flight < 1) throw Error(ErrorCode::BadUsage, "llm: max_in_flight must be at least 1");
  for (double p : {options.price.input_per_mtok, options.price.output_per_mtok}) {
    if (!(p >= 0) || !std::isfinite(p)) {
      throw Error(ErrorCode::BadUsage, "llm: a price must be a number of dollars per million tokens, not negative");
    }
  }
  std::vector<std::string> folders = options.knowledge_dirs;
  folders.insert(folders.begin(), mutators::shipped_knowledge_dir());
  impl_->knowledge = std::make_unique<mutators::KnowledgeBase>(folders);
  impl_->options = std::move(options);
  impl_->prompts.emplace(impl_->options, impl_->knowledge.get());
}

LlmMutator::~LlmMutator() = default;

std::int64_t LlmMutator::tokens_used() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->tokens;
}

std::int64_t LlmMutator::prompt_tokens_used() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->prompt_tokens;
}

std::int64_t LlmMutator::completion_tokens_used() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->completion_tokens;
}

double LlmMutator::cost_used_usd() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->cost_usd;
}

const std::string& LlmMutator::model() const { return impl_->options.model; }

std::map<std::string, LlmPrice> LlmMutator::prices() const {
  std::lock_guard lock(impl_->mutex);
  if (!impl_->options.price.priced()) return {};
  return {{impl_->options.model, impl_->options.price}};
}

void LlmMutator::set_prices(const std::map<std::string, LlmPrice>& prices) {
  std::lock_guard lock(impl_->mutex);
  if (const auto it = prices.find(impl_->options.model); it != prices.end()) impl_->options.price = it->second;
}

Mutation LlmMutator::mutate(const MutationContext& ctx) {
  Impl& s = *impl_;
  // The other children of the last answer come first, one a call, each of its own parent.
  {
    std::lock_guard lock(s.mutex);
    if (!s.waiting.empty()) {
      Mutation next = std::move(s.waiting.front());
      s.waiting.pop_front();
      // A part of a first kernel's answer, given once the first kernel stands: a child of that kernel, node 0.
      if (next.parents.empty() && !ctx.parents.empty()) {
        next.parents = {0};
        next.note += " (written from the reference beside node 0)";
      }
      return next;
    }
  }
  Mutation m;
  const bool first_kernel = ctx.parents.empty();
  const NodeId parent = first_kernel ? -1 : ctx.parents.at(0);
  std::vector<std::string> unusable;
  {
    std::lock_guard lock(s.mutex);
    if (const auto it = s.unusable.find(parent); it != s.unusable.end()) unusable = it->second;
  }
  const std::string system = s.prompts->system_prompt(ctx.spec, first_kernel);
  const std::string user =
      first_kernel ? s.prompts->first_kernel_prompt(ctx, unusable) : s.prompts->user_prompt(ctx, unusable);
  m.prompt = "[system]\n" + system + "\n\n[user]\n" + user;
  if (s.options.defer) {  // a round: the request is kept to be answered later, and no one waits on it
    const DeferredReceipt receipt = s.options.defer(
        DeferredRequest{ctx.parents, s.options.model, m.prompt, mutators::request_body(s.options, system, user)});
    m.deferred = true;
    m.model = s.options.model;
    m.note = "asked the model: request " + receipt.id;
    m.stop_run = receipt.stop_run;
    return m;
  }
  {
    std::unique_lock lock(s.mutex);
    s.slot_free.wait(lock, [&] { return s.in_flight < s.options.max_in_flight; });
    s.in_flight += 1;
  }
  std::string answer, error;
  mutators::Usage used;
  s.endpoint.call(s.options, mutators::request_body(s.options, system, user), answer, used, error);
  {
    std::lock_guard lock(s.mutex);
    s.in_flight -= 1;
    m.cost_usd = s.options.price.cost_usd(used.prompt, used.completion);
    s.tokens += used.total();
    s.prompt_tokens += used.prompt;
    s.completion_tokens += used.completion;
    s.cost_usd += m.cost_usd;
  }
  s.slot_free.notify_one();
  m.tokens = used.total();
  m.model = s.options.model;
  m.answer = answer;
  if (!error.empty()) {
    m.error = error;
    return m;
  }
  // A first kernel has nothing to edit: only a full source will do.
  const Candidate base =
      first_kernel ? Candidate{"", ctx.spec.language, ctx.spec.seed_tunables()} : ctx.graph.node(parent).candidate;
  // Each part of the answer a child on its own (one part unless the prompt asked for several).
  std::vector<mutators::ModelChild> made = mutators::model_children(ctx.spec, base, answer);
  std::vector<Mutation> children;
  std::string failures;
  {
    std::lock_guard lock(s.mutex);
    std::vector<std::string>& said = s.unusable[parent];
    said.clear();  // this answer's, not an older one's, go in the next prompt for this parent
    for (mutators::ModelChild& part : made) {
      if (!part.child) {
        failures += (failures.empty() ? "" : "; ") + part.error;
        said.push_back(part.error + "; the answer began: " + mutators::answer_excerpt(answer));
        continue;
      }
      Mutation c;
      c.child = std::move(part.child);
      c.note = std::move(part.note);
      c.prompt = m.prompt;
      c.answer = answer;
      c.model = m.model;
      c.parents = ctx.parents;
      children.push_back(std::move(c));
    }
    if (said.empty()) s.unusable.erase(parent);
  }
  // The failed parts are one recorded failure, given now, while its parent is the context's; the usable parts
  // follow, one a call. Without failures the first child is this call's, with the call's tokens and cost.
  if (!failures.empty()) {
    m.error = failures;
  } else {
    Mutation& first = children.front();
    m.child = std::move(first.child);
    m.note = std::move(first.note);
    children.erase(children.begin());
  }
  std::lock_guard lock(s.mutex);
  for (Mutation& c : children) s.waiting.push_back(std::move(c));
  return m;
}

}  // namespace kernelevolve
