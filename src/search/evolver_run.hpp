// One call of Evolver::run as a class: the search's steps are its methods (start, node 0 from the seed or the
// mutator, the warm-start kernels, then select a parent, mutate, evaluate, record; confirm the best and finish),
// and what the steps share, its members. Evolver::run (evolver.cpp) makes one and runs it.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernelevolve/evolver.hpp"

namespace kernelevolve::search {

// What an Evolver is made of (Evolver::Impl is one): the parts each of its runs works with.
struct EvolverParts {
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

// Evaluations finished on worker threads, handed back to the thread that runs the search.
struct Completions {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::pair<NodeId, Evaluation>> done;
  std::exception_ptr error;  // the first exception an evaluation threw (a broken reference, say)

  void push(NodeId id, Evaluation e);
  void fail(NodeId id, std::exception_ptr ex);
  std::pair<NodeId, Evaluation> pop();
};

class EvolverRun {
 public:
  // Works on `parts` (its graph, its checkpoint) for one run; they must outlive it.
  explicit EvolverRun(EvolverParts& parts);
  // If anything throws mid-run, waits for the evaluations still running before unwinding.
  ~EvolverRun();
  EvolverRun(const EvolverRun&) = delete;
  EvolverRun& operator=(const EvolverRun&) = delete;

  // Evolver::run: start, node 0, the warm-start kernels, the search; finish on every path out.
  RunResult run();

 private:
  // The steps, in the order a run takes them.
  void start();
  std::optional<std::string> start_from_seed();
  void evaluate_seed();
  std::optional<std::string> write_first_kernel();
  std::optional<std::string> measure_seed_on_every_class();
  void measure_baselines();
  void add_warm_kernels();
  RunResult search();
  std::vector<NodeId> select_parents();
  std::optional<std::string> after_no_new_child(const Mutation& m, const std::vector<NodeId>& parents);
  Node child_node(Mutation m, const std::vector<NodeId>& parents, double mutation_s) const;
  RunResult finish(std::string reason);
  void confirm_best();

  // What the steps share.
  void launch(Node node);
  const Node& collect();
  void count(const Node& node);
  void diagnose_node(NodeId id);
  double elapsed() const;
  int rounds_for(int rounds) const;
  std::optional<NodeId> unspent_parent() const;
  const Confirmation* confirm_for_prompt(NodeId id);

  const Spec& spec_;
  FitnessEvaluator& evaluator_;
  Mutator& mutator_;
  SelectionPolicy& policy_;
  StopRule& stop_;
  const EvolverOptions& options_;
  const std::vector<Observer*>& observers_;
  SearchGraph& graph_;
  std::optional<Checkpoint>& checkpoint_;

  std::chrono::steady_clock::time_point start_;
  double elapsed_before_ = 0;  // a resumed run's time so far
  RunResult result_;
  std::mt19937_64 rng_;
  // The ceilings every diagnosis is taken against, asked for once (a worker evaluator's cross a pipe).
  DeviceInfo device_;
  Completions completions_;
  std::map<std::string, Evaluation> seed_by_class_;
  std::map<NodeId, std::thread> threads_;
  int in_flight_ = 0;
  bool baselines_measured_ = false;
  int consecutive_failures_ = 0;
  int consecutive_errors_ = 0;
  // Sources whose space the mutator has spent (it said so for a parent of that source). With several
  // structures in the graph (warm-start kernels, a model's rewrites), one spent source does not end the search:
  // its nodes give way, as parents, to the fastest node of a source that has room yet.
  std::set<std::string> spent_sources_;
  // A node a model is to build on (or that its prompt names as the best), measured again against the seed,
  // interleaved, once per node: a search figure that was an optimistic outlier (102x in the search, 79.6x
  // confirmed, and every child looked like a regression) is not what the model is told.
  std::map<NodeId, Confirmation> prompt_confirmations_;
  std::function<const Confirmation*(NodeId)> confirm_for_prompt_;  // empty when confirm_parent_rounds is 0
};

}  // namespace kernelevolve::search
