// Evolver: composes the parts and runs the search loop: select parent(s), mutate, evaluate, record;
// stops by rule and returns the fastest correct kernel with its lineage.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernelevolve/ceiling_shift.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/mutator.hpp"
#include "kernelevolve/search_graph.hpp"
#include "kernelevolve/selection.hpp"
#include "kernelevolve/spec.hpp"
#include "kernelevolve/stop_rule.hpp"

namespace kernelevolve {

struct RunResult {
  // Node 0, the baseline of every speedup: the spec's seed, or the first kernel a mutator wrote for a
  // problem without one; -1 when no first kernel could be written.
  NodeId seed = -1;
  std::optional<NodeId> best;  // the fastest ok node (the seed if nothing beat it); none if the seed failed
  std::string stop_reason;
  SearchState state;
  std::int64_t mutator_failures = 0;
  // Over mixed devices (FitnessEvaluator::device_classes() lists several), the fastest ok node of each
  // class: speedups are only ever taken against the seed measured on the same class.
  std::map<std::string, NodeId> best_by_device;
  // The confirmation of `best` (none when it is the seed, the run failed, or confirmation is off), and
  // the nodes tried before it whose search figure confirmation did not bear out, best first.
  std::optional<Confirmation> confirmation;
  std::vector<Confirmation> unconfirmed;
  // For a PyTorch problem (and EvolverOptions::baselines), eager then compile; empty otherwise.
  std::vector<Baseline> baselines;
  // Where the run's time went before its search (part of state.elapsed_s; the rest is the search): node 0's
  // evaluation (and its first kernel's writing, and its measures on other devices), and the baselines'.
  double node0_s = 0, baselines_s = 0;
  // With EvolverOptions::hardware_counters: the new bests whose counters were read, and why the first
  // that failed did (after one failure no more are asked for: the next would fail the same way).
  int counted_nodes = 0;
  std::string counters_error;
  // The device's ceilings that moved since the previous measurement on it (kCeilingsMovedProperty), in words;
  // empty when none did. Such a machine is noisy: the confirmations took twice their rounds.
  std::string ceilings_moved;
};

// Receives progress. Called on the thread that runs the Evolver.
class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_start(const Spec&, const DeviceInfo&) {}
  virtual void on_node(const Node&, const SearchState&) {}
  // A mutation that produced no candidate: the mutator's recorded failure (its error, prompt and answer).
  virtual void on_mutator_failure(const Mutation&, const std::vector<NodeId>& /*parents*/) {}
  // Every return of the mutator, before the child (if any) is evaluated or the failure reported: what it
  // was asked and answered, its tokens, and how many seconds the call took.
  virtual void on_mutator_call(const Mutation&, const std::vector<NodeId>& /*parents*/, double /*seconds*/) {}
  // Each confirmation of a best node at the end of the run (DESIGN.md: the best is confirmed), before on_finish.
  virtual void on_confirmation(const Confirmation&) {}
  virtual void on_finish(const RunResult&, const SearchGraph&) {}
  // A PyTorch baseline, measured (its evaluation says how it went) or about to be (status pending).
  virtual void on_baseline(const Baseline&) {}
};

// A kernel of the same operator from another problem's run (warm_start.hpp finds them in stores). A run
// evaluates it on its own problem right after the seed, as a node with mutator "warm" whose note says where it
// came from: a parent for the search when it is correct and fast here, a recorded failure when it is not.
struct WarmKernel {
  Candidate candidate;    // its source, with the tunables this problem declares (or it declares) and it reads
  std::string store;      // where it was found: the database file
  std::int64_t run = -1;  // the run there, and its node
  std::int64_t node = -1;
  std::string spec_name;  // the problem it was made for
  std::string device;     // the device it was measured on
  double speedup = 0;     // over that problem's seed, there
  std::string match;      // why it was taken: "name", "family" or "signature"
};

struct EvolverOptions {
  std::uint64_t seed = 1;  // seeds selection, mutation and the evaluator's inputs
  // Candidates evaluated at once. The evaluator must be thread-safe for more than one (WorkerEvaluator
  // is; LocalEvaluator serialises). In-flight candidates sit in the graph as `pending` nodes.
  int jobs = 1;
  // Consecutive mutator failures (or proposals of known points) after which the search stops.
  int max_consecutive_mutator_failures = 64;
  // Consecutive mutator errors (an unreachable model, garbage answers, a failing command) after which the
  // search stops: each may have cost minutes of retries, and the next is unlikely to differ.
  int max_consecutive_mutator_errors = 8;
  // At the end, the best node and the seed are evaluated again, interleaved, this many times each (0: off);
  // twice as many on a noisy machine (kNoisyMachine, or ceilings that moved: kCeilingShift), as for
  // confirm_parent_rounds.
  int confirm_rounds = 3;
  // Nodes tried, best first, until one's search figure is borne out by its confirmation.
  int confirm_candidates = 3;
  // Before a model builds on a parent (or names the best), it and the seed are evaluated again, interleaved,
  // this many times each, once per node, so the prompt's figure is a confirmed one (0: off; the prompt then
  // says "single measurement"). Not counted in the evaluation budget; the time budget covers it.
  int confirm_parent_rounds = 2;
  // A problem without a seed: how many times the mutator is asked for the first kernel (a mutator error,
  // or a kernel that is not ok, uses one) before the run ends without one.
  int first_kernel_attempts = 3;
  // The noise allowed beyond the rounds' own spread before a search figure counts as not borne out.
  double confirm_noise = 0.05;
  // For a PyTorch problem, measure PyTorch eager and torch.compile once the seed is ok (RunResult::baselines).
  bool baselines = true;
  // Kernels from other problems' runs, evaluated after the seed and before the search, in this order. One the
  // graph already holds (a resumed run's) is not added again.
  std::vector<WarmKernel> warm_start;
  // Collect the hardware counters (FitnessEvaluator::hardware_counters: DRAM throughput, achieved occupancy,
  // stall reasons) of each node that becomes the best, onto its resources before observers see it: the
  // store keeps them, `show` and the model's prompt read them. Seconds per new best; off by default.
  bool hardware_counters = false;
};

// Where an interrupted run stood, to go on from: its committed nodes and what it had spent. A Store
// loads one (Store::resume); a host may build one itself.
struct Checkpoint {
  SearchGraph graph;        // evaluated nodes only, ids dense from 0, node 0 the seed (or first kernel)
  double elapsed_s = 0;     // the run's time so far
  std::int64_t tokens = 0;  // model tokens spent so far, failed mutations included
  double cost_usd = 0;      // and what they cost, in US dollars
  std::int64_t mutator_failures = 0;
};

class Evolver {
 public:
  Evolver(Spec spec, std::shared_ptr<FitnessEvaluator> evaluator, std::shared_ptr<Mutator> mutator,
          std::shared_ptr<SelectionPolicy> policy, std::shared_ptr<StopRule> stop, EvolverOptions options = {});
  ~Evolver();
  void add_observer(Observer* observer);  // not owned; must outlive run()
  // Makes run() go on from a checkpoint instead of starting from the seed: its nodes are not evaluated
  // again, and the stop rules see the run's totals (evaluations, time, tokens) so far. Call before run().
  // Throws Error(BadUsage) if a node is still pending or node 0 has parents.
  void resume(Checkpoint checkpoint);
  // Evaluates the seed (and the warm-start kernels), then searches until the stop rule fires or the space is
  // exhausted: the mutator has said so for a parent of every source among the correct nodes (a parent of a spent
  // source gives way to the fastest node of another). A spec without
  // a seed has the mutator write the first kernel from its reference (a mutation with no parents), which
  // becomes node 0; the run ends, saying why, if none is ok after `first_kernel_attempts`. Throws
  // Error(BadUsage) for a spec without a seed when the mutator cannot write one (writes_first_kernel).
  RunResult run();
  const SearchGraph& graph() const;
  const Spec& spec() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelevolve
