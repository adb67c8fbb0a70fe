// The C API: mutators (param, command, model, mix, the host's own) and a custom mutator's view of one mutation.
#include "internal.hpp"

#include <cmath>
#include <sstream>
#include <string>

using namespace capi;

namespace {

class CallbackMutator final : public ke::Mutator {
 public:
  CallbackMutator(std::string name, ke_mutate_fn fn, void* user_data)
      : name_(std::move(name)), fn_(fn), user_data_(user_data) {}
  std::string name() const override { return name_; }

  ke::Mutation mutate(const ke::MutationContext& context) override {
    ke_mutation m;
    m.context = &context;
    m.parents.resize(context.parents.size());
    for (std::size_t i = 0; i < context.parents.size(); ++i)
      m.parents[i].node = &context.graph.node(context.parents[i]);
    if (!context.parents.empty()) m.child = context.graph.node(context.parents.front()).candidate;
    const int rc = fn_(&m, user_data_);
    m.tag = Tag::dead;
    for (ke_node& p : m.parents) p.tag = Tag::dead;
    for (auto& [id, view] : m.nodes) view->tag = Tag::dead;
    if (rc != 0) throw Aborted{"the mutator '" + name_ + "' returned " + std::to_string(rc) + ": the run is aborted"};
    ke::Mutation out;
    out.prompt = std::move(m.prompt);
    out.answer = std::move(m.answer);
    out.tokens = m.tokens;
    out.cost_usd = m.cost_usd;
    if (m.exhausted) {
      out.exhausted = true;
      out.error = m.error.empty() ? "the mutator '" + name_ + "' has nothing new to offer" : m.error;
    } else if (m.failed) {
      out.error = m.error;
    } else {
      out.child = std::move(m.child);
      out.note = m.note.empty() ? "made by the mutator '" + name_ + "'" : m.note;
    }
    return out;
  }

 private:
  std::string name_;
  ke_mutate_fn fn_;
  void* user_data_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Mutators

KE_API ke_status ke_param_mutator_options_init(ke_param_mutator_options* options, unsigned int version) {
  return init_options(__func__, options, version, KE_PARAM_MUTATOR_OPTIONS_VERSION,
                      ke_param_mutator_options KE_PARAM_MUTATOR_OPTIONS_INIT, "ke_param_mutator_options");
}

KE_API ke_status ke_mutator_param_create(ke_mutator** out, const ke_param_mutator_options* options) {
  return guard(__func__, [&] {
    need_out(out, "out");
    ke_param_mutator_options o = KE_PARAM_MUTATOR_OPTIONS_INIT;
    if (options) {
      need_version(options->version, KE_PARAM_MUTATOR_OPTIONS_VERSION, "ke_param_mutator_options");
      o.restart_probability = options->restart_probability;
    }
    if (!(o.restart_probability >= 0 && o.restart_probability <= 1)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'restart_probability' must be between 0 and 1");
    }
    auto m = std::make_unique<ke_mutator>();
    m->recipe = {"param", std::make_shared<ke::ParamMutator>(o.restart_probability), {}};
    give(out, std::move(m));
  });
}

KE_API ke_status ke_command_mutator_options_init(ke_command_mutator_options* options, unsigned int version) {
  return init_options(__func__, options, version, KE_COMMAND_MUTATOR_OPTIONS_VERSION,
                      ke_command_mutator_options KE_COMMAND_MUTATOR_OPTIONS_INIT, "ke_command_mutator_options");
}

KE_API ke_status ke_mutator_command_create(ke_mutator** out, const ke_command_mutator_options* options) {
  return guard(__func__, [&] {
    need_out(out, "out");
    if (!options) fail(KE_ERROR_INVALID_ARGUMENT, "'options' is NULL: the command mutator needs a command");
    need_version(options->version, KE_COMMAND_MUTATOR_OPTIONS_VERSION, "ke_command_mutator_options");
    const std::string command = need_nonempty(options->command, "options->command");
    if (!(options->timeout_s > 0) || !std::isfinite(options->timeout_s)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'options->timeout_s' must be positive");
    }
    auto m = std::make_unique<ke_mutator>();
    m->recipe = {"command", std::make_shared<ke::CommandMutator>(command, options->timeout_s), {}};
    give(out, std::move(m));
  });
}

KE_API ke_status ke_mutator_custom_create(ke_mutator** out, const char* name, ke_mutate_fn mutate, void* user_data) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const std::string n = need_nonempty(name, "name");
    if (n == "seed" || n == "reference" || n == "warm")
      fail(KE_ERROR_INVALID_ARGUMENT, "'" + n + "' is a reserved mutator name");
    if (!mutate) fail(KE_ERROR_INVALID_ARGUMENT, "'mutate' is NULL");
    auto m = std::make_unique<ke_mutator>();
    m->recipe = {n, std::make_shared<CallbackMutator>(n, mutate, user_data), {}};
    give(out, std::move(m));
  });
}

KE_API ke_status ke_mutator_destroy(ke_mutator* mutator) { return destroy(__func__, mutator); }

KE_API ke_status ke_llm_mutator_options_init(ke_llm_mutator_options* options, unsigned int version) {
  return init_options(__func__, options, version, KE_LLM_MUTATOR_OPTIONS_VERSION,
                      ke_llm_mutator_options KE_LLM_MUTATOR_OPTIONS_INIT, "ke_llm_mutator_options");
}

KE_API ke_status ke_mutator_llm_create(ke_mutator** out, const ke_llm_mutator_options* options) {
  return guard(__func__, [&] {
    need_out(out, "out");
#if KE_CAPI_WITH_LLM
    if (!options) fail(KE_ERROR_INVALID_ARGUMENT, "'options' is NULL: the model mutator needs at least a model");
    need_version(options->version, KE_LLM_MUTATOR_OPTIONS_VERSION, "ke_llm_mutator_options");
    ke::LlmOptions o;
    if (options->api) o.api = options->api;
    if (options->base_url) o.base_url = options->base_url;
    o.model = need_nonempty(options->model, "options->model");
    if (options->api_key_env) o.api_key_env = options->api_key_env;
    need_finite(options->temperature, "options->temperature");
    o.temperature = options->temperature;
    if (options->max_tokens < 1) fail(KE_ERROR_INVALID_ARGUMENT, "'options->max_tokens' must be at least 1");
    o.max_tokens = options->max_tokens;
    if (!(options->timeout_s > 0) || !std::isfinite(options->timeout_s)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'options->timeout_s' must be positive");
    }
    o.timeout_s = options->timeout_s;
    if (options->max_retries < 0) fail(KE_ERROR_INVALID_ARGUMENT, "'options->max_retries' must not be negative");
    o.max_retries = options->max_retries;
    o.max_in_flight = options->max_in_flight;
    if (options->version >= 2) {
      need_finite(options->price_input_per_mtok, "options->price_input_per_mtok");
      need_finite(options->price_output_per_mtok, "options->price_output_per_mtok");
      if (options->price_input_per_mtok < 0 || options->price_output_per_mtok < 0) {
        fail(KE_ERROR_INVALID_ARGUMENT,
             "'options->price_input_per_mtok' and 'options->price_output_per_mtok' must not be negative");
      }
      o.price = {options->price_input_per_mtok, options->price_output_per_mtok};
    }
    if (options->memory) o.memory = options->memory;
    need_array(options->knowledge_dirs, options->knowledge_dir_count, "options->knowledge_dirs");
    for (std::size_t i = 0; i < options->knowledge_dir_count; ++i) {
      o.knowledge_dirs.push_back(need_nonempty(options->knowledge_dirs[i], "options->knowledge_dirs[i]"));
    }
    auto m = std::make_unique<ke_mutator>();
    if (options->device_description) {
      o.device_description = options->device_description;
      m->recipe = {"llm", std::make_shared<ke::LlmMutator>(o), {}};
    } else {
      ke::LlmMutator check(o);  // the options are checked now, not at the first run
      m->recipe = {"llm", nullptr, [o](const ke::DeviceInfo& device, ke::Language language) {
                     ke::LlmOptions with_device = o;
                     with_device.device_description = ke::describe_device_for_model(device, language);
                     return std::make_shared<ke::LlmMutator>(with_device);
                   }};
    }
    give(out, std::move(m));
#else
    (void)options;
    fail(KE_ERROR_INTERNAL, "this build of the library has no model mutator (it was built without ke_llm)");
#endif
  });
}

KE_API ke_status ke_mutator_mix_create(ke_mutator** out, const ke_mutator* model, const ke_mutator* params,
                                       int param_steps, int model_every) {
  return guard(__func__, [&] {
    need_out(out, "out");
#if KE_CAPI_WITH_LLM
    const MutatorRecipe model_recipe = need(model, "model")->recipe;
    const MutatorRecipe params_recipe = need(params, "params")->recipe;
    if (param_steps < 0 || model_every < 0) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'param_steps' and 'model_every' must not be negative");
    }
    auto m = std::make_unique<ke_mutator>();
    // The mix keeps the state of its alternation, so every run gets a fresh one.
    m->recipe = {
        "mix", nullptr,
        [model_recipe, params_recipe, param_steps, model_every](const ke::DeviceInfo& device, ke::Language language) {
          return std::make_shared<ke::MixMutator>(model_recipe.for_run(device, language),
                                                  params_recipe.for_run(device, language), param_steps, model_every);
        }};
    give(out, std::move(m));
#else
    (void)model;
    (void)params;
    (void)param_steps;
    (void)model_every;
    fail(KE_ERROR_INTERNAL, "this build of the library has no model mutator (it was built without ke_llm)");
#endif
  });
}

KE_API ke_status ke_mutation_parent_count(size_t* out, const ke_mutation* mutation) {
  return get_field(__func__, out, mutation, "mutation", [](const ke_mutation& m) { return m.parents.size(); });
}

KE_API ke_status ke_mutation_parent(const ke_node** out, const ke_mutation* mutation, size_t index) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = &*nth(need(mutation, "mutation")->parents, index, "parent");
  });
}

KE_API ke_status ke_mutation_node_count(size_t* out, const ke_mutation* mutation) {
  return get_field(__func__, out, mutation, "mutation", [](const ke_mutation& m) { return m.context->graph.size(); });
}

KE_API ke_status ke_mutation_node(const ke_node** out, const ke_mutation* mutation, int64_t id) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(mutation, "mutation");
    const ke::SearchGraph& graph = mutation->context->graph;
    if (id < 0 || static_cast<std::size_t>(id) >= graph.size()) {
      fail(KE_ERROR_NOT_FOUND,
           "no node " + std::to_string(id) + " (the graph has " + std::to_string(graph.size()) + ")");
    }
    // The views are made on the callback's own thread, so the const_cast races with nothing.
    auto& views = const_cast<ke_mutation*>(mutation)->nodes;
    auto& view = views[id];
    if (!view) {
      view = std::make_unique<ke_node>();
      view->node = &graph.node(id);
    }
    *out = view.get();
  });
}

KE_API ke_status ke_mutation_request_json(const char** out, const ke_mutation* mutation) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(mutation, "mutation");
    auto& request = const_cast<ke_mutation*>(mutation)->request;
    if (!request) request = ke::mutation_request_json(*mutation->context);
    *out = request->c_str();
  });
}

KE_API ke_status ke_mutation_random(uint64_t* out, ke_mutation* mutation) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(mutation, "mutation")->context->rng();
  });
}

KE_API ke_status ke_mutation_set_source(ke_mutation* mutation, const char* source) {
  return guard(__func__, [&] { need(mutation, "mutation")->child.source = need_string(source, "source"); });
}

KE_API ke_status ke_mutation_set_tunable(ke_mutation* mutation, const char* name, int64_t value) {
  return guard(__func__, [&] {
    need(mutation, "mutation");
    const std::string key = need_nonempty(name, "name");
    if (!mutation->context->spec.tunables.count(key)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "the spec has no tunable '" + key + "'");
    }
    mutation->child.tunables[key] = value;
  });
}

KE_API ke_status ke_mutation_set_note(ke_mutation* mutation, const char* note) {
  return guard(__func__, [&] { need(mutation, "mutation")->note = need_string(note, "note"); });
}

KE_API ke_status ke_mutation_set_transcript(ke_mutation* mutation, const char* prompt, const char* answer) {
  return guard(__func__, [&] {
    need(mutation, "mutation");
    mutation->prompt = prompt ? prompt : "";
    mutation->answer = answer ? answer : "";
  });
}

KE_API ke_status ke_mutation_add_tokens(ke_mutation* mutation, int64_t tokens) {
  return guard(__func__, [&] {
    need(mutation, "mutation");
    if (tokens < 0) fail(KE_ERROR_INVALID_ARGUMENT, "'tokens' must not be negative");
    mutation->tokens += tokens;
  });
}

KE_API ke_status ke_mutation_add_cost(ke_mutation* mutation, double usd) {
  return guard(__func__, [&] {
    need(mutation, "mutation");
    if (!(usd >= 0) || !std::isfinite(usd))
      fail(KE_ERROR_INVALID_ARGUMENT, "'usd' must be a number of dollars, not negative");
    mutation->cost_usd += usd;
  });
}

KE_API ke_status ke_mutation_fail(ke_mutation* mutation, const char* error) {
  return guard(__func__, [&] {
    need(mutation, "mutation");
    mutation->error = need_nonempty(error, "error");
    mutation->failed = true;
  });
}

KE_API ke_status ke_mutation_set_exhausted(ke_mutation* mutation, const char* reason) {
  return guard(__func__, [&] {
    need(mutation, "mutation");
    mutation->error = reason ? reason : "";
    mutation->exhausted = true;
  });
}
