// Mutator: makes a child candidate from parent node(s): new tunable values (ParamMutator), a rewrite
// by a language model, the output of an external command, or the host's own.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernelevolve/fitness.hpp"
#include "kernelevolve/search_graph.hpp"
#include "kernelevolve/selection.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve {

// What a model's calls cost: US dollars per million prompt (input) and completion (output) tokens. Both 0:
// no price (the calls count tokens only).
struct LlmPrice {
  double input_per_mtok = 0;
  double output_per_mtok = 0;
  bool priced() const { return input_per_mtok > 0 || output_per_mtok > 0; }
  double cost_usd(std::int64_t prompt_tokens, std::int64_t completion_tokens) const {
    return (static_cast<double>(prompt_tokens) * input_per_mtok +
            static_cast<double>(completion_tokens) * output_per_mtok) /
           1e6;
  }
  bool operator==(const LlmPrice&) const = default;
};

// A PyTorch problem's module run as users run it, measured in the run beside the candidates with the same
// protocol (verified against the reference, timed with the same timer, cache flush and input rotation):
// "eager", and "compile" (torch.compile) where this PyTorch has it. An evaluation that is not ok says why
// the baseline has no time.
struct Baseline {
  std::string name;
  Evaluation evaluation;
};

// A node timed again, interleaved with the seed on fresh inputs (node, seed, node, seed, ...) and verified
// again each time: the best at the end of a run (the speedup a run reports is this one, not the search's),
// and a parent before a model builds on it (MutationContext::confirm).
struct Confirmation {
  NodeId node = -1;
  bool confirmed = false;  // the search's figure lies within the confirmation's band
  int rounds = 0;
  std::vector<double> best_time_us, seed_time_us;      // per workload: the median over rounds
  std::vector<double> best_spread_us, seed_spread_us;  // per workload: half the range over rounds
  double speedup = 0;                                  // geometric mean over workloads of seed time / best time
  double speedup_low = 0, speedup_high = 0;            // the least and the greatest of the single rounds' speedups
  double search_speedup = 0;                           // what the search measured for the node
  std::string note;                                    // why it was not confirmed
  // The node itself was not ok when evaluated again (wrong on fresh inputs, crashed, timed out): it is
  // never the run's best.
  bool failed_again = false;
};

struct MutationContext {
  const Spec& spec;
  const SearchGraph& graph;
  // Empty for the first kernel of a problem without a seed: the mutator writes it from the spec alone
  // (its reference and signature), if it can (Mutator::writes_first_kernel).
  std::vector<NodeId> parents;
  std::mt19937_64& rng;
  // With no parents: the kernels earlier attempts at the first kernel wrote, which failed (their
  // evaluations say how), so that a model does not write them again. They are in no graph.
  std::vector<Node> failed_attempts = {};
  // The search's policy, which the parameter mutator asks for a point (SelectionPolicy::propose_point);
  // null: none to ask.
  SelectionPolicy* policy = nullptr;
  // The marks a user wants beaten, measured in this run (a PyTorch problem's eager and torch.compile): a
  // model's prompt gives their times and each node's speedup over them beside the one over the seed.
  std::vector<Baseline> baselines = {};
  // Re-measures a node against the seed, as the run's end confirms its best (once per node; later calls give
  // the same): a model's prompt asks it for the parent it builds on and the best it names, and says
  // "confirmed" or "single measurement". Empty, or null back: no re-measurement (a single measurement).
  std::function<const Confirmation*(NodeId)> confirm = {};
};

struct Mutation {
  std::optional<Candidate> child;  // none: the mutator failed (error says why) or has nothing new
  std::string note;                // a one-line account of the change
  std::string error;               // a failure of the mutator, recorded, not fatal to the search
  bool exhausted = false;          // the mutator has no unmeasured point left to offer
  std::string prompt;              // what a model or command was asked (kept on the node)
  std::string answer;              // and what it answered
  std::int64_t tokens = 0;         // model tokens spent on this mutation
  double cost_usd = 0;             // what they cost, in US dollars (0 where the model has no price)
  std::string model;               // the model that answered, if a model did (recorded on the node)
  // The name recorded on the node when it differs from the mutator's own (a mix names its part).
  std::string mutator;
  // Parents of the child when they differ from the context's (a mutator that tunes its own last
  // structure, say); empty: the context's parents.
  std::vector<NodeId> parents;
  // A model's request kept to be answered later (a round, rounds.hpp) in place of an answer: no child, and no
  // failure. `stop_run`, when set, ends the run here with that reason: the round has all the requests it wants.
  bool deferred = false;
  std::string stop_run;
};

class Mutator {
 public:
  virtual ~Mutator() = default;
  virtual std::string name() const = 0;
  virtual Mutation mutate(const MutationContext& context) = 0;
  // Whether mutate() with no parents writes a whole kernel from the spec's reference and signature: the
  // first kernel of a problem without a seed. A mutator that only varies a kernel it is given says no.
  virtual bool writes_first_kernel() const { return false; }
  // The price of each priced model it calls, by model name (a model's mutator, or one that holds some). A
  // store keeps them with the run, so that a resumed run goes on at the prices it began with.
  virtual std::map<std::string, LlmPrice> prices() const { return {}; }
  // Prices the models it holds that `prices` names (a resumed run's stored prices); others keep theirs.
  virtual void set_prices(const std::map<std::string, LlmPrice>& /*prices*/) {}
};

// Searches the spec's tunables under its constraints: mostly neighbour moves from the parent (one or
// two tunables stepped to an adjacent value), sometimes a random restart; never proposes a point the
// graph already holds.
class ParamMutator final : public Mutator {
 public:
  explicit ParamMutator(double restart_probability = 0.2) : restart_probability_(restart_probability) {}
  std::string name() const override { return "param"; }
  Mutation mutate(const MutationContext& context) override;

 private:
  double restart_probability_;
};

// The parameter search's whole space from the seed: every point of the tunables the seed's source reads
// (its live ones) that satisfies the constraints, the seed's own point first, the rest in grid order. A
// point binds only the live tunables, as the parameter search's children do. What a sweep measures and a
// replay of it searches. Throws Error(BadUsage) past `limit` grid points (before constraints).
std::vector<Bindings> tunable_space(const Spec& spec, std::size_t limit = 1000000);

// Runs an external program (through /bin/sh) once per child: writes a JSON request on its standard
// input (mutation_request_json: the spec, the parent's source, tunables and results, its recent failed
// children, the best node; for a first kernel, the reference's source and the signature instead of a
// parent) and reads its standard output as a model's answer: a full source in a fenced block, or
// SEARCH/REPLACE edits on the parent. A non-zero exit, an empty or unusable answer, or a run past the time
// limit is a recorded failure of the mutator. Lets any script or agent feed kernels into a run.
class CommandMutator final : public Mutator {
 public:
  explicit CommandMutator(std::string command, double timeout_s = 300);
  std::string name() const override { return "command"; }
  Mutation mutate(const MutationContext& context) override;
  bool writes_first_kernel() const override { return true; }

 private:
  std::string command_;
  double timeout_s_;
};

// A model request that is not sent: the prompt and the chat-completions body a deferred call would have posted
// (LlmOptions::defer), for the parent(s) it is about (none for a first kernel).
struct DeferredRequest {
  std::vector<NodeId> parents;
  std::string model;
  std::string prompt;  // as a node keeps it: "[system]\n...\n\n[user]\n..."
  std::string body;    // the request's JSON body: model, messages, max_tokens, temperature
};

// What became of a deferred request: the id it is kept under, and, when the round is full, why the run stops.
struct DeferredReceipt {
  std::string id;
  std::string stop_run;
};

// How a model is reached and what it is told. The key is read from the environment variable named in
// api_key_env at each request; it never reaches the store, a log or the output.
struct LlmOptions {
  std::string api = "openai";  // "openai": /chat/completions (OpenAI, vLLM, llama.cpp, Ollama, LiteLLM);
                               // "anthropic": /messages
  std::string base_url;        // e.g. https://api.openai.com/v1, http://localhost:11434/v1
  std::string model;
  std::string api_key_env;  // e.g. OPENAI_API_KEY; empty for servers without keys
  double temperature = 0.7;
  int max_tokens = 4096;
  double timeout_s = 180;        // per request
  int max_retries = 5;           // on 429, 5xx and transport errors
  double backoff_initial_s = 1;  // doubled per retry, with jitter, capped; Retry-After wins when given
  double backoff_max_s = 60;
  int max_in_flight = 4;  // requests at once across threads sharing this mutator
  // What the prompt remembers: "inherit" (the parent's lineage and outcomes), "siblings" (what the
  // parent's other children did), "both", or "fresh" (the parent alone).
  std::string memory = "both";
  std::vector<std::string> knowledge_dirs;  // extra markdown folders beside the shipped knowledge base
  std::size_t knowledge_budget_chars = 6000;
  std::string device_description;  // the device and its roofline, for the prompt
  LlmPrice price;                  // what its tokens cost (Mutation::cost_usd, the cost budget)
  // Rounds (rounds.hpp): when set, no request is sent; each is handed here, kept to be answered later (a
  // batch), and the mutation is a deferred one (Mutation::deferred), so no device waits on a model.
  std::function<DeferredReceipt(const DeferredRequest&)> defer;
  // Children asked for per prompt: each of the answer's parts (under `### Child N` headings) becomes a child of
  // its own, judged on its own; the mutator gives them one a call (a part that cannot be used is a recorded failure
  // alone), asking the model again once they are all given.
  int children = 1;
  // The evaluation time limit in force now, in seconds (WorkerEvaluator::timeout_s), given in the prompt beside the
  // rule that derives it; empty, or 0 back: not known.
  std::function<double()> time_limit_s;
};

// The device as a model's prompt states it (LlmOptions::device_description): the ceilings a kernel can reach
// (one core's for a CPU kernel, which runs on the calling thread), how it is compiled and what it may include
// or call, the GPU's limits per SM and per block, and, given the evaluator's options, the time limit.
std::string describe_device_for_model(const DeviceInfo& device, Language language,
                                      const WorkerOptions* limits = nullptr);

// Asks a language model for a rewrite of the parent: the prompt carries the device, the spec, the
// parent's source with its measurements, the failures of recent children (compiler log, worst mismatch,
// crash), the best node, and passages retrieved from the knowledge base. The answer is a full source
// in a fenced block or SEARCH/REPLACE edits; anything else is a recorded failure. A kernel may declare
// new tunables with lines `// ke:tunable NAME v1 v2 ...`, which the parameter search then explores.
// With no parent, it asks for the first kernel: the prompt carries the reference's source (a PyTorch
// module's Python) and the signature to define, and the answer must be a full source.
class LlmMutator final : public Mutator {
 public:
  explicit LlmMutator(LlmOptions options);
  ~LlmMutator() override;
  std::string name() const override { return "llm"; }
  Mutation mutate(const MutationContext& context) override;
  bool writes_first_kernel() const override { return true; }
  std::map<std::string, LlmPrice> prices() const override;
  void set_prices(const std::map<std::string, LlmPrice>& prices) override;
  std::int64_t tokens_used() const;
  // Of those, the prompt's and the answer's (as the server reported them; docs/model-mutator.md, "Cost in dollars",
  // says how a reply without them is estimated).
  std::int64_t prompt_tokens_used() const;
  std::int64_t completion_tokens_used() const;
  double cost_used_usd() const;
  const std::string& model() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Several models behind one mutator: each call goes to the model a bandit picks, by each model's recent
// improvement per dollar (per token where not every model has a price): the relative speedup of a child
// over its parent, 0 for a failure, over what its call cost. Discounted UCB1, so that a model that stops
// paying off is tried less, and one left aside is tried again now and then; ties go by the run's random
// generator, so a run with a seed repeats. Each node records the model that wrote it (Node::model).
class ModelPoolMutator final : public Mutator {
 public:
  // Model names must differ. `exploration` weighs the UCB bonus; `discount` (0, 1] forgets older calls.
  explicit ModelPoolMutator(std::vector<std::shared_ptr<LlmMutator>> models, double exploration = 1.0,
                            double discount = 0.95);
  ~ModelPoolMutator() override;
  std::string name() const override { return "llm"; }
  Mutation mutate(const MutationContext& context) override;
  bool writes_first_kernel() const override { return true; }
  std::map<std::string, LlmPrice> prices() const override;
  void set_prices(const std::map<std::string, LlmPrice>& prices) override;
  // Per model, in the order given: its calls so far and its recent improvement per dollar (or token).
  struct ModelStats {
    std::string model;
    std::int64_t calls = 0;
    double value = 0;
  };
  std::vector<ModelStats> stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One graph, two mutators: a model (or command) writes new structures; after each one that works, the
// parameter search takes `param_steps` steps from it before the model runs again. `model_every`
// additionally runs the model at least every N mutations even without a new structure to tune. The
// first kernel of a problem without a seed is the model's.
class MixMutator final : public Mutator {
 public:
  MixMutator(std::shared_ptr<Mutator> model, std::shared_ptr<Mutator> params, int param_steps = 4, int model_every = 0);
  std::string name() const override { return "mix"; }
  Mutation mutate(const MutationContext& context) override;
  bool writes_first_kernel() const override { return model_->writes_first_kernel(); }
  std::map<std::string, LlmPrice> prices() const override { return model_->prices(); }
  void set_prices(const std::map<std::string, LlmPrice>& prices) override { model_->set_prices(prices); }

 private:
  std::shared_ptr<Mutator> model_, params_;
  int param_steps_, model_every_;
  int steps_left_ = 0;
  int since_model_ = 0;
  NodeId structure_ = -1;  // the model's latest child, tuned by the parameter steps
  std::size_t graph_size_at_model_ = 0;
};

// The request a model or command gets about a parent, or, with no parent, for the first kernel: the same
// facts in the same JSON for every mutator (docs/command-mutator.md lists its fields).
std::string mutation_request_json(const MutationContext& context);

}  // namespace kernelevolve
