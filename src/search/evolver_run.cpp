// The steps of one search run (evolver_run.hpp).
#include "search/evolver_run.hpp"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "core/tunables.hpp"
#include "kernelevolve/error.hpp"
#include "search/confirm.hpp"

namespace kernelevolve::search {

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

// ---- Completions ------------------------------------------------------------------------------------

void Completions::push(NodeId id, Evaluation e) {
  {
    std::lock_guard lock(mutex);
    done.emplace_back(id, std::move(e));
  }
  ready.notify_one();
}

void Completions::fail(NodeId id, std::exception_ptr ex) {
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

std::pair<NodeId, Evaluation> Completions::pop() {
  std::unique_lock lock(mutex);
  ready.wait(lock, [&] { return !done.empty(); });
  auto item = std::move(done.front());
  done.pop_front();
  return item;
}

// ---- EvolverRun -------------------------------------------------------------------------------------

EvolverRun::EvolverRun(EvolverParts& parts)
    : spec_(parts.spec),
      evaluator_(*parts.evaluator),
      mutator_(*parts.mutator),
      policy_(*parts.policy),
      stop_(*parts.stop),
      options_(parts.options),
      observers_(parts.observers),
      graph_(parts.graph),
      checkpoint_(parts.checkpoint) {}

EvolverRun::~EvolverRun() {
  for (auto& [id, t] : threads_) {
    if (t.joinable()) t.join();
  }
}

RunResult EvolverRun::run() {
  start();
  if (auto why = start_from_seed()) return finish(*why);
  add_warm_kernels();
  return search();
}

// The checkpoint's graph and totals taken up (or a new graph), the device asked for its ceilings once, the
// observers told, and the checkpoint's nodes diagnosed.
void EvolverRun::start() {
  start_ = std::chrono::steady_clock::now();
  if (checkpoint_) {
    graph_ = std::move(checkpoint_->graph);
    elapsed_before_ = checkpoint_->elapsed_s;
    result_.state.tokens = checkpoint_->tokens;
    result_.state.cost_usd = checkpoint_->cost_usd;
    result_.mutator_failures = checkpoint_->mutator_failures;
    checkpoint_.reset();
  } else {
    graph_ = SearchGraph();
  }
  if (graph_.size() == 0 && spec_.seed.source.empty() && !mutator_.writes_first_kernel()) {
    throw Error(ErrorCode::BadUsage, spec_.name + " has no seed kernel, and the mutator '" + mutator_.name() +
                                         "' cannot write the first one (it only varies a kernel it is given): give "
                                         "the spec a seed, or use a mutator that writes kernels (command, llm, mix)");
  }
  // A resumed run draws a different stream, so that it does not replay the choices made before.
  rng_ = std::mt19937_64(options_.seed + 0x9e3779b97f4a7c15ull * graph_.size());
  device_ = evaluator_.device_info();
  // Ceilings that moved since the previous measurement on this device (kCeilingShift) make the machine a
  // noisy one, as a spread seed does: said once here, in the report, and in the model's prompt.
  if (const auto moved = device_.properties.find(kCeilingsMovedProperty); moved != device_.properties.end()) {
    result_.ceilings_moved = moved->second;
    say_once("the device's measured ceilings moved since the previous measurement on it (" + moved->second +
             "): the machine is noisy, its shares of peak are rough, and confirmations take twice their rounds");
  }
  for (Observer* o : observers_) o->on_start(spec_, device_);
  for (const Node& n : graph_.nodes()) {
    if (!n.diagnosis) diagnose_node(n.id);
  }
}

// Node 0: the spec's seed evaluated, the first kernel the mutator writes for a problem without one, or a resumed
// run's counted again; then the seed on every other class of device and the baselines. Says why the run ends
// here, if it does.
std::optional<std::string> EvolverRun::start_from_seed() {
  const double start = elapsed();
  if (graph_.size() == 0 && spec_.seed.source.empty()) {
    measure_baselines();
    if (auto failed = write_first_kernel()) return failed;
  } else if (graph_.size() == 0) {
    evaluate_seed();
  } else {
    for (const Node& node : graph_.nodes()) count(node);  // the run so far, in the order it was made
    result_.state.elapsed_s = elapsed();
  }
  const Node& seed_node = graph_.node(0);
  result_.seed = seed_node.id;
  if (seed_node.evaluation.status != Status::ok) {
    return std::string("the seed kernel is ") + to_string(seed_node.evaluation.status) + ": " +
           seed_node.evaluation.message;
  }
  if (auto failed = measure_seed_on_every_class()) return failed;
  result_.node0_s = elapsed() - start - result_.baselines_s;
  if (!baselines_measured_) measure_baselines();
  return std::nullopt;
}

void EvolverRun::evaluate_seed() {
  Node seed;
  seed.mutator = "seed";
  // Where the first kernel came from is its lineage's root: a file, or torch.compile's translated program.
  const std::string& from = spec_.seed.file;
  // On the CPU Inductor's C++ has no autotuner: its one tunable (FP_REASSOCIATE) starts off.
  const bool from_cpp = spec_.seed.language.value_or(spec_.language) == Language::cpp;
  seed.note =
      from.rfind("torch.compile", 0) != 0 ? "the spec's seed kernel at the first value of each tunable"
      : from_cpp ? "torch.compile's program (Inductor's C++ output code, translated) at the first value of each tunable"
                 : "torch.compile's program (Inductor's output code, translated) at the first value of each tunable: "
                   "its autotuner's choice where the capture could read it";
  seed.candidate.source = spec_.seed.source;
  seed.candidate.language = spec_.seed.language.value_or(spec_.language);
  // Its live tunables only, as every mutator's child has: a step in a tunable the seed does not read would
  // measure the seed again.
  seed.candidate.tunables = live_tunables(spec_, seed.candidate.source, seed.candidate.language, spec_.seed_tunables());
  launch(std::move(seed));
  collect();
}

// A problem without a seed: the mutator writes the first kernel from the reference and the signature.
// A kernel that is not ok does not become node 0 (every speedup is against node 0); it is told to the
// next attempt, and recorded as a failed call of the mutator with its status.
std::optional<std::string> EvolverRun::write_first_kernel() {
  std::vector<Node> failed;  // the kernels that were not ok, for the next request
  std::string why;
  for (int attempt = 1; attempt <= options_.first_kernel_attempts; ++attempt) {
    result_.state.elapsed_s = elapsed();
    if (auto stop = stop_.should_stop(result_.state)) return "no first kernel yet, and " + *stop;
    const auto mutate_start = std::chrono::steady_clock::now();
    Mutation m = mutator_.mutate(MutationContext{spec_, graph_, {}, rng_, failed, &policy_, result_.baselines});
    const double mutation_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - mutate_start).count();
    if (m.deferred) {  // a round (rounds.hpp): the request waits in the store for its answer; no attempt spent
      if (!m.stop_run.empty()) return "no first kernel yet: " + m.stop_run;
      --attempt;
      continue;
    }
    result_.state.tokens += m.tokens;
    result_.state.cost_usd += m.cost_usd;
    const std::string by = m.mutator.empty() ? mutator_.name() : m.mutator;
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
      Evaluation e = evaluator_.evaluate(node.candidate, input_seed(options_.seed, 0));
      if (e.status == Status::ok) {
        for (Observer* o : observers_) o->on_mutator_call(m, {}, mutation_s);
        node.evaluation.status = Status::pending;  // recorded as collect() records the seed's
        const NodeId id = graph_.add(std::move(node));
        graph_.record_evaluation(id, std::move(e), 1.0);
        diagnose_node(id);
        const Node& first = graph_.node(id);
        count(first);
        result_.state.elapsed_s = elapsed();
        for (Observer* o : observers_) o->on_node(first, result_.state);
        return std::nullopt;
      }
      why = "the kernel it wrote is " + std::string(to_string(e.status)) + (e.message.empty() ? "" : ": " + e.message);
      node.evaluation = std::move(e);
      failed.push_back(std::move(node));
      m.child.reset();
      m.error = "first kernel, attempt " + std::to_string(attempt) + ": " + why;
    } else {
      why = m.error.empty() ? "it wrote no kernel" : m.error;
      m.error = "first kernel, attempt " + std::to_string(attempt) + ": " + why;
    }
    result_.mutator_failures += 1;
    for (Observer* o : observers_) o->on_mutator_call(m, {}, mutation_s);
    for (Observer* o : observers_) o->on_mutator_failure(m, {});
  }
  return "no first kernel: the " + mutator_.name() + " mutator was asked " +
         std::to_string(options_.first_kernel_attempts) + " times for one written from the reference, and the last " +
         "time " + why;
}

// Over mixed devices, the seed is measured once on every other class too: each class's times are
// compared with its own seed time only.
std::optional<std::string> EvolverRun::measure_seed_on_every_class() {
  const Node& seed_node = graph_.node(0);
  seed_by_class_[seed_node.evaluation.device] = seed_node.evaluation;
  const std::vector<std::string> classes = evaluator_.device_classes();
  for (std::size_t k = 0; classes.size() > 1 && k < classes.size(); ++k) {
    if (seed_by_class_.count(classes[k])) continue;
    Evaluation e = evaluator_.evaluate_on(k, seed_node.candidate, input_seed(options_.seed, 0) + k);
    if (e.device.empty()) e.device = classes[k];
    if (e.status != Status::ok) {
      return "the seed kernel is " + std::string(to_string(e.status)) + " on " + classes[k] + ": " + e.message;
    }
    seed_by_class_[e.device] = std::move(e);
  }
  return std::nullopt;
}

// A PyTorch problem's marks to beat, eager's and torch.compile's times, measured as the kernels are. A
// problem without a seed measures them before its first kernel, so that the first prompt has them too.
void EvolverRun::measure_baselines() {
  baselines_measured_ = true;
  if (!options_.baselines || !spec_.reference.pytorch) return;
  const double start = elapsed();
  for (const char* name : {"eager", "compile"}) {
    Baseline b{name, {}};
    b.evaluation.status = Status::pending;
    for (Observer* o : observers_) o->on_baseline(b);
    b.evaluation =
        evaluator_.evaluate(Candidate{name, Language::pytorch, spec_.seed_tunables()}, input_seed(options_.seed, -2));
    for (Observer* o : observers_) o->on_baseline(b);
    result_.baselines.push_back(std::move(b));
  }
  result_.baselines_s = elapsed() - start;
}

// Kernels of the same operator from other problems (EvolverOptions::warm_start), verified here before the
// search starts, so that the first parents it picks may be theirs. Only those the graph lacks: a resumed run
// holds the ones it added already.
void EvolverRun::add_warm_kernels() {
  for (const WarmKernel& warm : options_.warm_start) {
    if (graph_.contains(warm.candidate)) continue;
    result_.state.elapsed_s = elapsed();
    SearchState projected = result_.state;
    projected.evaluations += in_flight_;
    if (stop_.should_stop(projected)) break;
    if (in_flight_ >= options_.jobs) collect();
    Node node;
    node.parents = {result_.seed};
    node.mutator = "warm";
    node.note = warm_note(warm);
    node.candidate = warm.candidate;
    launch(std::move(node));
  }
  while (in_flight_ > 0) collect();
}

// The search: a parent selected, mutated, its child evaluated (options.jobs at once) and recorded, until a stop
// rule fires, the space is spent, the mutator keeps failing, or a round holds all its requests.
RunResult EvolverRun::search() {
  if (options_.confirm_parent_rounds > 0) {
    confirm_for_prompt_ = [this](NodeId id) { return confirm_for_prompt(id); };
  }
  for (;;) {
    if (completions_.error) return finish("an evaluation failed");
    result_.state.elapsed_s = elapsed();
    if (auto why = stop_.should_stop(result_.state)) return finish(*why);
    // Evaluations already started count toward an evaluation budget.
    SearchState projected = result_.state;
    projected.evaluations += in_flight_;
    if (in_flight_ >= options_.jobs || (in_flight_ > 0 && stop_.should_stop(projected))) {
      collect();
      continue;
    }
    const std::vector<NodeId> parents = select_parents();
    const auto mutate_start = std::chrono::steady_clock::now();
    Mutation m = mutator_.mutate(
        MutationContext{spec_, graph_, parents, rng_, {}, &policy_, result_.baselines, confirm_for_prompt_});
    const double mutation_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - mutate_start).count();
    // A round (rounds.hpp): the model's request was kept to be answered later, neither a child nor a failure. The
    // round ends the run once it holds all its requests, so that no device waits on the model.
    if (m.deferred) {
      if (!m.stop_run.empty()) return finish(m.stop_run);
      continue;
    }
    result_.state.tokens += m.tokens;
    result_.state.cost_usd += m.cost_usd;
    for (Observer* o : observers_) o->on_mutator_call(m, parents, mutation_s);
    if (!m.child && !m.exhausted) {
      for (Observer* o : observers_) o->on_mutator_failure(m, parents);
    }
    if (!m.child || graph_.contains(*m.child)) {
      if (auto why = after_no_new_child(m, parents)) return finish(*why);
      continue;
    }
    consecutive_failures_ = 0;
    consecutive_errors_ = 0;
    launch(child_node(std::move(m), parents, mutation_s));
  }
}

// The policy's parents; a first parent of a spent source gives way to the fastest node of a source with room yet.
std::vector<NodeId> EvolverRun::select_parents() {
  std::vector<NodeId> parents = policy_.select(graph_, rng_);
  if (!parents.empty() && spent_sources_.count(graph_.node(parents[0]).candidate.source)) {
    if (const auto other = unspent_parent()) parents[0] = *other;
  }
  return parents;
}

// A mutation that brought no new child (none, or a point the graph holds): waits for an evaluation in flight,
// sets a spent source aside, or counts a failure. Says why the run stops, if it does.
std::optional<std::string> EvolverRun::after_no_new_child(const Mutation& m, const std::vector<NodeId>& parents) {
  if (in_flight_ > 0) {  // the points in flight may open new neighbourhoods: wait for one
    collect();
    return std::nullopt;
  }
  if (m.exhausted) {
    if (!parents.empty()) spent_sources_.insert(graph_.node(parents[0]).candidate.source);
    if (!parents.empty() && unspent_parent()) return std::nullopt;
    return "search space exhausted: " + m.error;
  }
  result_.mutator_failures += 1;
  consecutive_errors_ = m.error.empty() ? 0 : consecutive_errors_ + 1;
  if (consecutive_errors_ >= options_.max_consecutive_mutator_errors) {
    return "the mutator failed " + std::to_string(consecutive_errors_) + " times in a row: " + m.error;
  }
  if (++consecutive_failures_ >= options_.max_consecutive_mutator_failures) {
    return "the mutator failed " + std::to_string(consecutive_failures_) +
           " times in a row: " + (m.error.empty() ? "it proposed only known points" : m.error);
  }
  return std::nullopt;
}

// A mutation's child as a node of the graph, with what the mutator said and spent to make it.
Node EvolverRun::child_node(Mutation m, const std::vector<NodeId>& parents, double mutation_s) const {
  Node node;
  node.parents = m.parents.empty() ? parents : m.parents;
  node.mutator = m.mutator.empty() ? mutator_.name() : m.mutator;
  node.note = m.note;
  node.prompt = std::move(m.prompt);
  node.answer = std::move(m.answer);
  node.tokens = m.tokens;
  node.cost_usd = m.cost_usd;
  node.model = std::move(m.model);
  node.mutation_s = mutation_s;
  node.candidate = std::move(*m.child);
  return node;
}

// Every path out of run() drains and joins, so no evaluation is lost and no thread outlives the call.
RunResult EvolverRun::finish(std::string reason) {
  while (in_flight_ > 0) collect();
  if (completions_.error) std::rethrow_exception(completions_.error);
  result_.stop_reason = std::move(reason);
  result_.best = graph_.best();
  for (const Node& n : graph_.nodes()) {
    if (n.evaluation.status != Status::ok) continue;
    auto [it, fresh] = result_.best_by_device.emplace(n.evaluation.device, n.id);
    if (!fresh && n.speedup > graph_.node(it->second).speedup) it->second = n.id;
  }
  confirm_best();
  result_.state.elapsed_s = elapsed();
  for (Observer* o : observers_) o->on_finish(result_, graph_);
  return result_;
}

// The best node against the seed, again, interleaved and verified (DESIGN.md): a node whose search
// figure is not borne out gives way to the next best of its class.
void EvolverRun::confirm_best() {
  if (!result_.best || *result_.best == 0 || options_.confirm_rounds <= 0) return;
  const Node& first = graph_.node(*result_.best);
  const std::vector<std::string> classes = evaluator_.device_classes();
  const auto at = std::find(classes.begin(), classes.end(), first.evaluation.device);
  const std::size_t class_index = at == classes.end() ? 0 : static_cast<std::size_t>(at - classes.begin());
  std::vector<const Node*> ranked;
  for (const Node& n : graph_.nodes()) {
    if (n.id != 0 && n.evaluation.status == Status::ok && n.evaluation.device == first.evaluation.device) {
      ranked.push_back(&n);
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const Node* a, const Node* b) { return a->speedup > b->speedup; });
  const Node& seed_node = graph_.node(0);
  // The node passed over so far whose rounds against the seed beat `than`, the fastest such; null if none.
  auto fastest_passed_over = [&](double than) -> const Confirmation* {
    const Confirmation* fastest = nullptr;
    for (const Confirmation& u : result_.unconfirmed) {
      if (!u.failed_again && u.rounds > 0 && u.speedup > than && (!fastest || u.speedup > fastest->speedup))
        fastest = &u;
    }
    return fastest;
  };
  for (std::size_t i = 0; i < ranked.size() && i < static_cast<std::size_t>(options_.confirm_candidates); ++i) {
    if (ranked[i]->speedup <= 1.0) break;  // nothing left that claims to beat the seed
    Confirmation c =
        confirm_node(evaluator_, class_index, *ranked[i], seed_node, rounds_for(options_.confirm_rounds),
                     options_.confirm_noise, input_seed(options_.seed, 1'000'000'000 + static_cast<NodeId>(100 * i)));
    for (Observer* o : observers_) o->on_confirmation(c);
    if (c.confirmed) {
      // A node passed over before it was passed over for its search figure, not its rounds: when its
      // rounds still beat this node's, it is the faster kernel (a 60x node measured 75x in the search is
      // not to give way to a 1.2x one).
      if (const Confirmation* faster = fastest_passed_over(c.speedup)) {
        result_.best = faster->node;
        result_.confirmation = *faster;
        return;
      }
      result_.best = ranked[i]->id;
      result_.confirmation = std::move(c);
      return;
    }
    result_.unconfirmed.push_back(std::move(c));
  }
  // None borne out: the node tried whose rounds were fastest, and that is still correct, stays, reported
  // with its confirmation's (honest) figures, as long as its rounds beat the seed. A node found wrong when
  // evaluated again, or no faster than the seed in its rounds, is never handed out: when every node tried
  // was, the run's best is the seed.
  if (const Confirmation* faster = fastest_passed_over(1.0)) {
    result_.best = faster->node;
    result_.confirmation = *faster;
    return;
  }
  for (const Confirmation& c : result_.unconfirmed) {  // no rounds to rank them by (the seed failed again)
    if (c.failed_again || c.rounds > 0) continue;
    result_.best = c.node;
    result_.confirmation = c;
    return;
  }
  if (!result_.unconfirmed.empty()) result_.best = seed_node.id;
}

// Adds a pending node and evaluates it on its own thread.
void EvolverRun::launch(Node node) {
  node.created_s = elapsed();
  node.evaluation.status = Status::pending;
  const NodeId id = graph_.add(std::move(node));
  const Candidate candidate = graph_.node(id).candidate;
  const std::uint64_t seed = input_seed(options_.seed, id);
  in_flight_ += 1;
  threads_.emplace(id, std::thread([&completions = completions_, &evaluator = evaluator_, id, candidate, seed] {
                     try {
                       completions.push(id, evaluator.evaluate(candidate, seed));
                     } catch (...) {
                       completions.fail(id, std::current_exception());
                     }
                   }));
}

// Waits for one evaluation and records it on its node.
const Node& EvolverRun::collect() {
  auto [id, evaluation] = completions_.pop();
  in_flight_ -= 1;
  threads_.at(id).join();
  threads_.erase(id);
  // Against the seed as measured on the same class of device; node 0's class when there is one class.
  const auto seed_here = seed_by_class_.find(evaluation.device);
  const Evaluation& baseline = seed_here != seed_by_class_.end() ? seed_here->second : graph_.node(0).evaluation;
  const double gain = id == 0 ? (evaluation.status == Status::ok ? 1.0 : 0.0) : speedup(baseline, evaluation);
  graph_.record_evaluation(id, std::move(evaluation), gain);
  if (options_.hardware_counters && result_.counters_error.empty() && graph_.node(id).evaluation.status == Status::ok &&
      graph_.best() == std::optional<NodeId>(id)) {
    Node& n = graph_.node(id);
    const CounterResult c = evaluator_.hardware_counters(n.candidate, input_seed(options_.seed, id));
    if (c.ok()) {
      for (const auto& [name, value] : c.counters) n.evaluation.resources[name] = value;
      result_.counted_nodes += 1;
    } else {
      result_.counters_error = c.error;
    }
  }
  diagnose_node(id);
  const Node& node = graph_.node(id);
  count(node);
  result_.state.elapsed_s = elapsed();
  for (Observer* o : observers_) o->on_node(node, result_.state);
  return node;
}

// Counts an evaluated node in the state the stop rules see.
void EvolverRun::count(const Node& node) {
  result_.state.evaluations += 1;
  if (node.speedup > result_.state.best_speedup) {
    result_.state.best_speedup = node.speedup;
    result_.state.evaluations_since_improvement = 0;
  } else {
    result_.state.evaluations_since_improvement += 1;
  }
}

// Diagnoses a node once, when its evaluation is recorded (a checkpoint's nodes may come without one).
void EvolverRun::diagnose_node(NodeId id) {
  Node& n = graph_.node(id);
  n.diagnosis = diagnose(spec_, n.candidate.tunables, n.evaluation, device_, &n.candidate);
}

double EvolverRun::elapsed() const {
  return elapsed_before_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

// On a noisy machine (the seed's launches spread by more than kNoisyMachine of their median) a
// confirmation takes twice the rounds: its median then stands on more evidence.
// So do ceilings that moved between runs.
int EvolverRun::rounds_for(int rounds) const {
  const bool spread = graph_.size() > 0 && relative_spread(graph_.node(0).evaluation) > kNoisyMachine;
  return spread || !result_.ceilings_moved.empty() ? 2 * rounds : rounds;
}

// The fastest correct node of a source whose space is not spent, if there is one.
std::optional<NodeId> EvolverRun::unspent_parent() const {
  std::optional<NodeId> found;
  for (NodeId id : graph_.ok_nodes()) {
    const Node& n = graph_.node(id);
    if (spent_sources_.count(n.candidate.source)) continue;
    if (!found || n.speedup > graph_.node(*found).speedup) found = id;
  }
  return found;
}

// A node a model is to build on, confirmed against the seed once (prompt_confirmations_); null for the seed, a
// node that is not ok, or an id the graph does not have.
const Confirmation* EvolverRun::confirm_for_prompt(NodeId id) {
  if (id == 0 || id < 0 || static_cast<std::size_t>(id) >= graph_.size()) return nullptr;
  if (const auto it = prompt_confirmations_.find(id); it != prompt_confirmations_.end()) return &it->second;
  const Node& node = graph_.node(id);
  if (node.evaluation.status != Status::ok) return nullptr;
  const std::vector<std::string> classes = evaluator_.device_classes();
  const auto at = std::find(classes.begin(), classes.end(), node.evaluation.device);
  const std::size_t class_index = at == classes.end() ? 0 : static_cast<std::size_t>(at - classes.begin());
  Confirmation c =
      confirm_node(evaluator_, class_index, node, graph_.node(0), rounds_for(options_.confirm_parent_rounds),
                   options_.confirm_noise, input_seed(options_.seed, 2'000'000'000 + 100 * id));
  return &prompt_confirmations_.emplace(id, std::move(c)).first->second;
}

}  // namespace kernelevolve::search
