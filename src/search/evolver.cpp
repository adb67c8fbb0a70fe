#include "kernelevolve/evolver.hpp"

#include "search/confirm.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <functional>
#include <iomanip>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/tunables.hpp"
#include "kernelevolve/error.hpp"

namespace kernelevolve {

struct Evolver::Impl {
  Spec spec;
  std::shared_ptr<FitnessEvaluator> evaluator;
  std::shared_ptr<Mutator> mutator;
  std::shared_ptr<SelectionPolicy> policy;
  std::shared_ptr<StopRule> stop;
  EvolverOptions options;
  SearchGraph graph;
  std::vector<Observer*> observers;
  std::optional<Checkpoint> checkpoint;  // where run() goes on from, if set
};

Evolver::Evolver(Spec spec, std::shared_ptr<FitnessEvaluator> evaluator, std::shared_ptr<Mutator> mutator,
                 std::shared_ptr<SelectionPolicy> policy, std::shared_ptr<StopRule> stop, EvolverOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (!evaluator || !mutator || !policy || !stop) {
    throw Error(ErrorCode::BadUsage, "Evolver: evaluator, mutator, policy and stop rule are all required");
  }
  if (options.jobs < 1) throw Error(ErrorCode::BadUsage, "Evolver: jobs must be at least 1");
  if (options.first_kernel_attempts < 1)
    throw Error(ErrorCode::BadUsage, "Evolver: first_kernel_attempts must be at least 1");
  for (const WarmKernel& warm : options.warm_start) {
    if (warm.candidate.source.empty()) throw Error(ErrorCode::BadUsage, "Evolver: a warm_start kernel has no source");
  }
  spec.validate();
  impl_->spec = std::move(spec);
  impl_->evaluator = std::move(evaluator);
  impl_->mutator = std::move(mutator);
  impl_->policy = std::move(policy);
  impl_->stop = std::move(stop);
  impl_->options = options;
}

Evolver::~Evolver() = default;

void Evolver::add_observer(Observer* observer) {
  if (observer) impl_->observers.push_back(observer);
}

void Evolver::resume(Checkpoint checkpoint) {
  const SearchGraph& g = checkpoint.graph;
  for (const Node& n : g.nodes()) {
    if (n.evaluation.status == Status::pending) {
      throw Error(ErrorCode::BadUsage,
                  "Evolver::resume: node " + std::to_string(n.id) + " of the checkpoint is still pending");
    }
  }
  if (g.size() > 0 && !g.node(0).parents.empty()) {
    throw Error(ErrorCode::BadUsage, "Evolver::resume: node 0 of the checkpoint is not a seed (it has parents)");
  }
  impl_->checkpoint = std::move(checkpoint);
}

const SearchGraph& Evolver::graph() const { return impl_->graph; }
const Spec& Evolver::spec() const { return impl_->spec; }

namespace {

// A line on stderr, once per process whatever the number of runs: a host that runs many searches on one
// machine is told once.
void say_once(const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard lock(mutex);
  if (said.insert(line).second) std::fprintf(stderr, "kernelevolve: %s\n", line.c_str());
}

std::uint64_t input_seed(std::uint64_t run_seed, NodeId node) {
  std::uint64_t z = run_seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(node) + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  return z ^ (z >> 27);
}

// Evaluations finished on worker threads, handed back to the thread that runs the search.
struct Completions {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::pair<NodeId, Evaluation>> done;
  std::exception_ptr error;  // the first exception an evaluation threw (a broken reference, say)

  void push(NodeId id, Evaluation e) {
    {
      std::lock_guard lock(mutex);
      done.emplace_back(id, std::move(e));
    }
    ready.notify_one();
  }
  void fail(NodeId id, std::exception_ptr ex) {
    {
      std::lock_guard lock(mutex);
      if (!error) error = ex;
      Evaluation e;
      e.status = Status::crashed;
      e.message = "the evaluator failed";
      done.emplace_back(id, std::move(e));
    }
    ready.notify_one();
  }
  std::pair<NodeId, Evaluation> pop() {
    std::unique_lock lock(mutex);
    ready.wait(lock, [&] { return !done.empty(); });
    auto item = std::move(done.front());
    done.pop_front();
    return item;
  }
};

// Where a warm-start kernel came from, as its node's note says it (and the model's prompt shows it).
std::string warm_note(const WarmKernel& warm) {
  std::ostringstream out;
  out << "warm start from " << (warm.spec_name.empty() ? "another problem" : warm.spec_name);
  if (warm.run >= 0)
    out << " (run " << warm.run << ", node " << warm.node << (warm.store.empty() ? "" : " of " + warm.store) << ")";
  if (!warm.device.empty()) out << " on " << warm.device;
  out << ": " << std::fixed << std::setprecision(2) << warm.speedup << "x over its seed there";
  if (!warm.match.empty()) out << "; same " << warm.match;
  return out.str();
}

}  // namespace

RunResult Evolver::run() {
  Impl& s = *impl_;
  const auto start = std::chrono::steady_clock::now();
  RunResult result;
  double elapsed_before = 0;  // a resumed run's time so far
  if (s.checkpoint) {
    s.graph = std::move(s.checkpoint->graph);
    elapsed_before = s.checkpoint->elapsed_s;
    result.state.tokens = s.checkpoint->tokens;
    result.state.cost_usd = s.checkpoint->cost_usd;
    result.mutator_failures = s.checkpoint->mutator_failures;
    s.checkpoint.reset();
  } else {
    s.graph = SearchGraph();
  }
  if (s.graph.size() == 0 && s.spec.seed.source.empty() && !s.mutator->writes_first_kernel()) {
    throw Error(ErrorCode::BadUsage, s.spec.name + " has no seed kernel, and the mutator '" + s.mutator->name() +
                                         "' cannot write the first one (it only varies a kernel it is given): give "
                                         "the spec a seed, or use a mutator that writes kernels (command, llm, mix)");
  }
  auto elapsed = [&] {
    return elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // A resumed run draws a different stream, so that it does not replay the choices made before.
  std::mt19937_64 rng(s.options.seed + 0x9e3779b97f4a7c15ull * s.graph.size());
  Completions completions;
  std::map<std::string, Evaluation> seed_by_class;
  std::map<NodeId, std::thread> threads;
  struct JoinAll {  // if anything throws mid-run, wait for the evaluations still running before unwinding
    std::map<NodeId, std::thread>& threads;
    ~JoinAll() {
      for (auto& [id, t] : threads) {
        if (t.joinable()) t.join();
      }
    }
  } join_all{threads};
  int in_flight = 0;
  // The ceilings every diagnosis is taken against, asked for once (a worker evaluator's cross a pipe).
  const DeviceInfo device = s.evaluator->device_info();
  // Ceilings that moved since the previous measurement on this device (kCeilingShift) make the machine a
  // noisy one, as a spread seed does: said once here, in the report, and in the model's prompt.
  if (const auto moved = device.properties.find(kCeilingsMovedProperty); moved != device.properties.end()) {
    result.ceilings_moved = moved->second;
    say_once("the device's measured ceilings moved since the previous measurement on it (" + moved->second +
             "): the machine is noisy, its shares of peak are rough, and confirmations take twice their rounds");
  }
  for (Observer* o : s.observers) o->on_start(s.spec, device);
  // Diagnoses a node once, when its evaluation is recorded (a checkpoint's nodes may come without one).
  auto diagnose_node = [&](NodeId id) {
    Node& n = s.graph.node(id);
    n.diagnosis = diagnose(s.spec, n.candidate.tunables, n.evaluation, device, &n.candidate);
  };
  for (const Node& n : s.graph.nodes()) {
    if (!n.diagnosis) diagnose_node(n.id);
  }

  // Adds a pending node and evaluates it on its own thread.
  auto launch = [&](Node node) {
    node.created_s = elapsed();
    node.evaluation.status = Status::pending;
    const NodeId id = s.graph.add(std::move(node));
    const Candidate candidate = s.graph.node(id).candidate;
    const std::uint64_t seed = input_seed(s.options.seed, id);
    in_flight += 1;
    threads.emplace(id, std::thread([&completions, &s, id, candidate, seed] {
                      try {
                        completions.push(id, s.evaluator->evaluate(candidate, seed));
                      } catch (...) {
                        completions.fail(id, std::current_exception());
                      }
                    }));
  };

  // Counts an evaluated node in the state the stop rules see.
  auto count = [&](const Node& node) {
    result.state.evaluations += 1;
    if (node.speedup > result.state.best_speedup) {
      result.state.best_speedup = node.speedup;
      result.state.evaluations_since_improvement = 0;
    } else {
      result.state.evaluations_since_improvement += 1;
    }
  };

  // Waits for one evaluation and records it on its node.
  auto collect = [&]() -> const Node& {
    auto [id, evaluation] = completions.pop();
    in_flight -= 1;
    threads.at(id).join();
    threads.erase(id);
    // Against the seed as measured on the same class of device; node 0's class when there is one class.
    const auto seed_here = seed_by_class.find(evaluation.device);
    const Evaluation& baseline = seed_here != seed_by_class.end() ? seed_here->second : s.graph.node(0).evaluation;
    const double gain = id == 0 ? (evaluation.status == Status::ok ? 1.0 : 0.0) : speedup(baseline, evaluation);
    s.graph.record_evaluation(id, std::move(evaluation), gain);
    if (s.options.hardware_counters && result.counters_error.empty() &&
        s.graph.node(id).evaluation.status == Status::ok && s.graph.best() == std::optional<NodeId>(id)) {
      Node& n = s.graph.node(id);
      const CounterResult c = s.evaluator->hardware_counters(n.candidate, input_seed(s.options.seed, id));
      if (c.ok()) {
        for (const auto& [name, value] : c.counters) n.evaluation.resources[name] = value;
        result.counted_nodes += 1;
      } else {
        result.counters_error = c.error;
      }
    }
    diagnose_node(id);
    const Node& node = s.graph.node(id);
    count(node);
    result.state.elapsed_s = elapsed();
    for (Observer* o : s.observers) o->on_node(node, result.state);
    return node;
  };

  // On a noisy machine (the seed's launches spread by more than kNoisyMachine of their median) a
  // confirmation takes twice the rounds: its median then stands on more evidence.
  // So do ceilings that moved between runs.
  auto rounds_for = [&](int rounds) {
    const bool spread = s.graph.size() > 0 && relative_spread(s.graph.node(0).evaluation) > kNoisyMachine;
    return spread || !result.ceilings_moved.empty() ? 2 * rounds : rounds;
  };
  // The best node against the seed, again, interleaved and verified (DESIGN.md): a node whose search
  // figure is not borne out gives way to the next best of its class.
  auto confirm_best = [&] {
    if (!result.best || *result.best == 0 || s.options.confirm_rounds <= 0) return;
    const Node& first = s.graph.node(*result.best);
    const std::vector<std::string> classes = s.evaluator->device_classes();
    const auto at = std::find(classes.begin(), classes.end(), first.evaluation.device);
    const std::size_t class_index = at == classes.end() ? 0 : static_cast<std::size_t>(at - classes.begin());
    std::vector<const Node*> ranked;
    for (const Node& n : s.graph.nodes()) {
      if (n.id != 0 && n.evaluation.status == Status::ok && n.evaluation.device == first.evaluation.device) {
        ranked.push_back(&n);
      }
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const Node* a, const Node* b) { return a->speedup > b->speedup; });
    const Node& seed_node = s.graph.node(0);
    // The node passed over so far whose rounds against the seed beat `than`, the fastest such; null if none.
    auto fastest_passed_over = [&](double than) -> const Confirmation* {
      const Confirmation* fastest = nullptr;
      for (const Confirmation& u : result.unconfirmed) {
        if (!u.failed_again && u.rounds > 0 && u.speedup > than && (!fastest || u.speedup > fastest->speedup))
          fastest = &u;
      }
      return fastest;
    };
    for (std::size_t i = 0; i < ranked.size() && i < static_cast<std::size_t>(s.options.confirm_candidates); ++i) {
      if (ranked[i]->speedup <= 1.0) break;  // nothing left that claims to beat the seed
      Confirmation c = confirm_node(*s.evaluator, class_index, *ranked[i], seed_node,
                                    rounds_for(s.options.confirm_rounds), s.options.confirm_noise,
                                    input_seed(s.options.seed, 1'000'000'000 + static_cast<NodeId>(100 * i)));
      for (Observer* o : s.observers) o->on_confirmation(c);
      if (c.confirmed) {
        // A node passed over before it was passed over for its search figure, not its rounds: when its
        // rounds still beat this node's, it is the faster kernel (a 60x node measured 75x in the search is
        // not to give way to a 1.2x one).
        if (const Confirmation* faster = fastest_passed_over(c.speedup)) {
          result.best = faster->node;
          result.confirmation = *faster;
          return;
        }
        result.best = ranked[i]->id;
        result.confirmation = std::move(c);
        return;
      }
      result.unconfirmed.push_back(std::move(c));
    }
    // None borne out: the node tried whose rounds were fastest, and that is still correct, stays, reported
    // with its confirmation's (honest) figures, as long as its rounds beat the seed. A node found wrong when
    // evaluated again, or no faster than the seed in its rounds, is never handed out: when every node tried
    // was, the run's best is the seed.
    if (const Confirmation* faster = fastest_passed_over(1.0)) {
      result.best = faster->node;
      result.confirmation = *faster;
      return;
    }
    for (const Confirmation& c : result.unconfirmed) {  // no rounds to rank them by (the seed failed again)
      if (c.failed_again || c.rounds > 0) continue;
      result.best = c.node;
      result.confirmation = c;
      return;
    }
    if (!result.unconfirmed.empty()) result.best = seed_node.id;
  };

  // Every path out of run() drains and joins, so no evaluation is lost and no thread outlives the call.
  auto finish = [&](std::string reason) {
    while (in_flight > 0) collect();
    if (completions.error) std::rethrow_exception(completions.error);
    result.stop_reason = std::move(reason);
    result.best = s.graph.best();
    for (const Node& n : s.graph.nodes()) {
      if (n.evaluation.status != Status::ok) continue;
      auto [it, fresh] = result.best_by_device.emplace(n.evaluation.device, n.id);
      if (!fresh && n.speedup > s.graph.node(it->second).speedup) it->second = n.id;
    }
    confirm_best();
    result.state.elapsed_s = elapsed();
    for (Observer* o : s.observers) o->on_finish(result, s.graph);
    return result;
  };

  // A problem without a seed: the mutator writes the first kernel from the reference and the signature.
  // A kernel that is not ok does not become node 0 (every speedup is against node 0); it is told to the
  // next attempt, and recorded as a failed call of the mutator with its status.
  auto write_first_kernel = [&]() -> std::optional<std::string> {
    std::vector<Node> failed;  // the kernels that were not ok, for the next request
    std::string why;
    for (int attempt = 1; attempt <= s.options.first_kernel_attempts; ++attempt) {
      result.state.elapsed_s = elapsed();
      if (auto stop = s.stop->should_stop(result.state)) return "no first kernel yet, and " + *stop;
      const auto mutate_start = std::chrono::steady_clock::now();
      Mutation m =
          s.mutator->mutate(MutationContext{s.spec, s.graph, {}, rng, failed, s.policy.get(), result.baselines});
      const double mutation_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - mutate_start).count();
      if (m.deferred) {  // a round (rounds.hpp): the request waits in the store for its answer; no attempt spent
        if (!m.stop_run.empty()) return "no first kernel yet: " + m.stop_run;
        --attempt;
        continue;
      }
      result.state.tokens += m.tokens;
      result.state.cost_usd += m.cost_usd;
      const std::string by = m.mutator.empty() ? s.mutator->name() : m.mutator;
      if (m.child) {
        Node node;
        node.id = static_cast<NodeId>(failed.size());  // an attempt's number in the next request, not a graph id
        node.mutator = by;
        node.note = "first kernel, written from the reference" + (m.note.empty() ? "" : ": " + m.note);
        node.prompt = m.prompt;
        node.answer = m.answer;
        node.tokens = m.tokens;
        node.cost_usd = m.cost_usd;
        node.model = m.model;
        node.mutation_s = mutation_s;
        node.candidate = *m.child;
        node.created_s = elapsed();
        Evaluation e = s.evaluator->evaluate(node.candidate, input_seed(s.options.seed, 0));
        if (e.status == Status::ok) {
          for (Observer* o : s.observers) o->on_mutator_call(m, {}, mutation_s);
          node.evaluation.status = Status::pending;  // recorded as collect() records the seed's
          const NodeId id = s.graph.add(std::move(node));
          s.graph.record_evaluation(id, std::move(e), 1.0);
          diagnose_node(id);
          const Node& first = s.graph.node(id);
          count(first);
          result.state.elapsed_s = elapsed();
          for (Observer* o : s.observers) o->on_node(first, result.state);
          return std::nullopt;
        }
        why =
            "the kernel it wrote is " + std::string(to_string(e.status)) + (e.message.empty() ? "" : ": " + e.message);
        node.evaluation = std::move(e);
        failed.push_back(std::move(node));
        m.child.reset();
        m.error = "first kernel, attempt " + std::to_string(attempt) + ": " + why;
      } else {
        why = m.error.empty() ? "it wrote no kernel" : m.error;
        m.error = "first kernel, attempt " + std::to_string(attempt) + ": " + why;
      }
      result.mutator_failures += 1;
      for (Observer* o : s.observers) o->on_mutator_call(m, {}, mutation_s);
      for (Observer* o : s.observers) o->on_mutator_failure(m, {});
    }
    return "no first kernel: the " + s.mutator->name() + " mutator was asked " +
           std::to_string(s.options.first_kernel_attempts) +
           " times for one written from the reference, and the last " + "time " + why;
  };

  // A PyTorch problem's marks to beat, eager's and torch.compile's times, measured as the kernels are. A
  // problem without a seed measures them before its first kernel, so that the first prompt has them too.
  bool baselines_measured = false;
  auto measure_baselines = [&]() {
    baselines_measured = true;
    if (!s.options.baselines || !s.spec.reference.pytorch) return;
    for (const char* name : {"eager", "compile"}) {
      Baseline b{name, {}};
      b.evaluation.status = Status::pending;
      for (Observer* o : s.observers) o->on_baseline(b);
      b.evaluation = s.evaluator->evaluate(Candidate{name, Language::pytorch, s.spec.seed_tunables()},
                                           input_seed(s.options.seed, -2));
      for (Observer* o : s.observers) o->on_baseline(b);
      result.baselines.push_back(std::move(b));
    }
  };

  if (s.graph.size() == 0 && s.spec.seed.source.empty()) {
    measure_baselines();
    if (auto failed = write_first_kernel()) return finish(*failed);
  } else if (s.graph.size() == 0) {
    Node seed;
    seed.mutator = "seed";
    // Where the first kernel came from is its lineage's root: a file, or torch.compile's translated program.
    const std::string& from = s.spec.seed.file;
    // On the CPU Inductor's C++ has no autotuner: its one tunable (FP_REASSOCIATE) starts off.
    const bool from_cpp = s.spec.seed.language.value_or(s.spec.language) == Language::cpp;
    seed.note =
        from.rfind("torch.compile", 0) != 0 ? "the spec's seed kernel at the first value of each tunable"
        : from_cpp
            ? "torch.compile's program (Inductor's C++ output code, translated) at the first value of each tunable"
            : "torch.compile's program (Inductor's output code, translated) at the first value of each tunable: "
              "its autotuner's choice where the capture could read it";
    seed.candidate.source = s.spec.seed.source;
    seed.candidate.language = s.spec.seed.language.value_or(s.spec.language);
    // Its live tunables only, as every mutator's child has: a step in a tunable the seed does not read would
    // measure the seed again.
    seed.candidate.tunables =
        live_tunables(s.spec, seed.candidate.source, seed.candidate.language, s.spec.seed_tunables());
    launch(std::move(seed));
    collect();
  } else {
    for (const Node& node : s.graph.nodes()) count(node);  // the run so far, in the order it was made
    result.state.elapsed_s = elapsed();
  }
  const Node& seed_node = s.graph.node(0);
  result.seed = seed_node.id;
  if (seed_node.evaluation.status != Status::ok) {
    return finish(std::string("the seed kernel is ") + to_string(seed_node.evaluation.status) + ": " +
                  seed_node.evaluation.message);
  }
  // Over mixed devices, the seed is measured once on every other class too: each class's times are
  // compared with its own seed time only.
  seed_by_class[seed_node.evaluation.device] = seed_node.evaluation;
  const std::vector<std::string> classes = s.evaluator->device_classes();
  for (std::size_t k = 0; classes.size() > 1 && k < classes.size(); ++k) {
    if (seed_by_class.count(classes[k])) continue;
    Evaluation e = s.evaluator->evaluate_on(k, seed_node.candidate, input_seed(s.options.seed, 0) + k);
    if (e.device.empty()) e.device = classes[k];
    if (e.status != Status::ok) {
      return finish("the seed kernel is " + std::string(to_string(e.status)) + " on " + classes[k] + ": " + e.message);
    }
    seed_by_class[e.device] = std::move(e);
  }
  if (!baselines_measured) measure_baselines();

  // Kernels of the same operator from other problems (EvolverOptions::warm_start), verified here before the
  // search starts, so that the first parents it picks may be theirs. Only those the graph lacks: a resumed run
  // holds the ones it added already.
  for (const WarmKernel& warm : s.options.warm_start) {
    if (s.graph.contains(warm.candidate)) continue;
    result.state.elapsed_s = elapsed();
    SearchState projected = result.state;
    projected.evaluations += in_flight;
    if (s.stop->should_stop(projected)) break;
    if (in_flight >= s.options.jobs) collect();
    Node node;
    node.parents = {result.seed};
    node.mutator = "warm";
    node.note = warm_note(warm);
    node.candidate = warm.candidate;
    launch(std::move(node));
  }
  while (in_flight > 0) collect();

  int consecutive_failures = 0;
  int consecutive_errors = 0;
  // Sources whose space the mutator has spent (it said so for a parent of that source). With several
  // structures in the graph (warm-start kernels, a model's rewrites), one spent source does not end the search:
  // its nodes give way, as parents, to the fastest node of a source that has room yet.
  std::set<std::string> spent_sources;
  auto unspent_parent = [&]() -> std::optional<NodeId> {
    std::optional<NodeId> found;
    for (NodeId id : s.graph.ok_nodes()) {
      const Node& n = s.graph.node(id);
      if (spent_sources.count(n.candidate.source)) continue;
      if (!found || n.speedup > s.graph.node(*found).speedup) found = id;
    }
    return found;
  };
  // A node a model is to build on (or that its prompt names as the best), measured again against the seed,
  // interleaved, once per node: a search figure that was an optimistic outlier (102x in the search, 79.6x
  // confirmed, and every child looked like a regression) is not what the model is told.
  std::map<NodeId, Confirmation> prompt_confirmations;
  std::function<const Confirmation*(NodeId)> confirm_for_prompt;
  if (s.options.confirm_parent_rounds > 0) {
    confirm_for_prompt = [&](NodeId id) -> const Confirmation* {
      if (id == 0 || id < 0 || static_cast<std::size_t>(id) >= s.graph.size()) return nullptr;
      if (const auto it = prompt_confirmations.find(id); it != prompt_confirmations.end()) return &it->second;
      const Node& node = s.graph.node(id);
      if (node.evaluation.status != Status::ok) return nullptr;
      const std::vector<std::string> classes = s.evaluator->device_classes();
      const auto at = std::find(classes.begin(), classes.end(), node.evaluation.device);
      const std::size_t class_index = at == classes.end() ? 0 : static_cast<std::size_t>(at - classes.begin());
      Confirmation c =
          confirm_node(*s.evaluator, class_index, node, s.graph.node(0), rounds_for(s.options.confirm_parent_rounds),
                       s.options.confirm_noise, input_seed(s.options.seed, 2'000'000'000 + 100 * id));
      return &prompt_confirmations.emplace(id, std::move(c)).first->second;
    };
  }
  for (;;) {
    if (completions.error) return finish("an evaluation failed");
    result.state.elapsed_s = elapsed();
    if (auto why = s.stop->should_stop(result.state)) return finish(*why);
    // Evaluations already started count toward an evaluation budget.
    SearchState projected = result.state;
    projected.evaluations += in_flight;
    if (in_flight >= s.options.jobs || (in_flight > 0 && s.stop->should_stop(projected))) {
      collect();
      continue;
    }
    std::vector<NodeId> parents = s.policy->select(s.graph, rng);
    if (!parents.empty() && spent_sources.count(s.graph.node(parents[0]).candidate.source)) {
      if (const auto other = unspent_parent()) parents[0] = *other;
    }
    const auto mutate_start = std::chrono::steady_clock::now();
    Mutation m = s.mutator->mutate(
        MutationContext{s.spec, s.graph, parents, rng, {}, s.policy.get(), result.baselines, confirm_for_prompt});
    const double mutation_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - mutate_start).count();
    // A round (rounds.hpp): the model's request was kept to be answered later, neither a child nor a failure. The
    // round ends the run once it holds all its requests, so that no device waits on the model.
    if (m.deferred) {
      if (!m.stop_run.empty()) return finish(m.stop_run);
      continue;
    }
    result.state.tokens += m.tokens;
    result.state.cost_usd += m.cost_usd;
    for (Observer* o : s.observers) o->on_mutator_call(m, parents, mutation_s);
    if (!m.child && !m.exhausted) {
      for (Observer* o : s.observers) o->on_mutator_failure(m, parents);
    }
    if (!m.child || s.graph.contains(*m.child)) {
      if (in_flight > 0) {  // the points in flight may open new neighbourhoods: wait for one
        collect();
        continue;
      }
      if (m.exhausted) {
        if (!parents.empty()) spent_sources.insert(s.graph.node(parents[0]).candidate.source);
        if (!parents.empty() && unspent_parent()) continue;
        return finish("search space exhausted: " + m.error);
      }
      result.mutator_failures += 1;
      consecutive_errors = m.error.empty() ? 0 : consecutive_errors + 1;
      if (consecutive_errors >= s.options.max_consecutive_mutator_errors) {
        return finish("the mutator failed " + std::to_string(consecutive_errors) + " times in a row: " + m.error);
      }
      if (++consecutive_failures >= s.options.max_consecutive_mutator_failures) {
        return finish("the mutator failed " + std::to_string(consecutive_failures) +
                      " times in a row: " + (m.error.empty() ? "it proposed only known points" : m.error));
      }
      continue;
    }
    consecutive_failures = 0;
    consecutive_errors = 0;
    Node node;
    node.parents = m.parents.empty() ? parents : m.parents;
    node.mutator = m.mutator.empty() ? s.mutator->name() : m.mutator;
    node.note = m.note;
    node.prompt = std::move(m.prompt);
    node.answer = std::move(m.answer);
    node.tokens = m.tokens;
    node.cost_usd = m.cost_usd;
    node.model = std::move(m.model);
    node.mutation_s = mutation_s;
    node.candidate = std::move(*m.child);
    launch(std::move(node));
  }
}

}  // namespace kernelevolve
