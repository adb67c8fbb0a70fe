// The model mutator: writes the prompt (prompt_sections.hpp), calls the endpoint (endpoint.hpp) or keeps the request
// for a round, and turns the answer into a child (answer.hpp).
#include <cmath>
#include <condition_variable>
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
  Mutation m;
  const bool first_kernel = ctx.parents.empty();
  const std::string system = impl_->prompts->system_prompt(ctx.spec, first_kernel);
  const std::string user = first_kernel ? impl_->prompts->first_kernel_prompt(ctx) : impl_->prompts->user_prompt(ctx);
  m.prompt = "[system]\n" + system + "\n\n[user]\n" + user;
  if (impl_->options.defer) {  // a round: the request is kept to be answered later, and no one waits on it
    const DeferredReceipt receipt = impl_->options.defer(DeferredRequest{
        ctx.parents, impl_->options.model, m.prompt, mutators::request_body(impl_->options, system, user)});
    m.deferred = true;
    m.model = impl_->options.model;
    m.note = "asked the model: request " + receipt.id;
    m.stop_run = receipt.stop_run;
    return m;
  }
  {
    std::unique_lock lock(impl_->mutex);
    impl_->slot_free.wait(lock, [&] { return impl_->in_flight < impl_->options.max_in_flight; });
    impl_->in_flight += 1;
  }
  std::string answer, error;
  mutators::Usage used;
  impl_->endpoint.call(impl_->options, mutators::request_body(impl_->options, system, user), answer, used, error);
  {
    std::lock_guard lock(impl_->mutex);
    impl_->in_flight -= 1;
    m.cost_usd = impl_->options.price.cost_usd(used.prompt, used.completion);
    impl_->tokens += used.total();
    impl_->prompt_tokens += used.prompt;
    impl_->completion_tokens += used.completion;
    impl_->cost_usd += m.cost_usd;
  }
  impl_->slot_free.notify_one();
  m.tokens = used.total();
  m.model = impl_->options.model;
  m.answer = answer;
  if (!error.empty()) {
    m.error = error;
    return m;
  }
  // A first kernel has nothing to edit: only a full source will do.
  const Candidate base = first_kernel ? Candidate{"", ctx.spec.language, ctx.spec.seed_tunables()}
                                      : ctx.graph.node(ctx.parents.at(0)).candidate;
  mutators::ModelChild made = mutators::model_child(ctx.spec, base, answer);
  if (!made.child) {
    m.error = made.error;
    return m;
  }
  m.child = std::move(made.child);
  m.note = std::move(made.note);
  return m;
}

}  // namespace kernelevolve
