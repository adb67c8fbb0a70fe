// Store: the search graph on disk. A SQLite database (WAL mode) holding runs (the spec and the device
// identity), their nodes and edges, each node's evaluation (per workload: times with their spread;
// status, compiler log, worst mismatch, resources) and the mutator's calls (prompt, answer, tokens,
// time). Nodes are committed one transaction each as soon as they are evaluated (StoreRecorder), so a
// process killed at any moment loses at most the candidates in flight. A run can be resumed
// (Store::resume, Evolver::resume), and a later run of the same spec on the same device reuses every
// measurement instead of taking it again (ReusingEvaluator).
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernelevolve/device.hpp"
#include "kernelevolve/evolver.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/search_graph.hpp"
#include "kernelevolve/spec.hpp"

struct sqlite3;

namespace kernelevolve {

using RunId = std::int64_t;
class ReusingEvaluator;

// What identifies a problem for the store. spec_hash: the whole spec as to_json() writes it (sources
// inline, so an edited reference, seed, tolerance, workload or tunable list is a different spec); a
// resumed run must match it. measurement_hash: only what a measurement depends on (signature, workloads,
// inputs, tolerance, reference, launch rule, cost), not the tunable lists, constraints, seed, name or
// notes, so that a run over a wider space still reuses the points an earlier one measured.
std::string spec_hash(const Spec& spec);
std::string measurement_hash(const Spec& spec);
// Where `kernelevolve run SPEC` keeps its database when no --db is given: beside the spec,
// "<spec file>.kernelevolve.db".
std::string default_store_path(const std::string& spec_path);

// How a run was started, kept with it for `show` and for people.
struct RunSettings {
  std::string policy;
  std::string mutator;
  std::uint64_t seed = 0;
  std::string command_line;  // free text: the options it ran with
  // The price of each priced model, by name (Mutator::prices): a resumed run keeps them (keep_run_prices).
  std::map<std::string, LlmPrice> llm_prices;
};

struct RunInfo {
  RunId id = -1;
  std::string spec_name;
  std::string spec_path;
  std::string spec_hash;
  std::string measurement_hash;
  std::string spec_json;  // to_json(spec): parse_spec() reads it back
  DeviceInfo device;
  RunSettings settings;
  std::string started_at;   // UTC, ISO 8601
  std::string updated_at;   // the last commit
  std::string finished_at;  // empty while the run has not finished (or was killed)
  std::string stop_reason;
  double elapsed_s = 0;
  std::int64_t tokens = 0;
  double cost_usd = 0;  // what the model calls cost, at the run's prices
  std::int64_t mutator_failures = 0;
  std::int64_t nodes = 0;
  // The end-of-run confirmation of the best (report.hpp's confirmation_text lines: the confirmed node, then
  // any not borne out); empty for a run that confirmed nothing or has not finished.
  std::vector<std::string> confirmation;
  // The node the run's end chose as best: the search's fastest, or the next one that confirmation bore out.
  // None before the end (and for runs stored before schema version 3): then the graph's fastest stands.
  std::optional<NodeId> best;
};

// A mutator call that produced no child, as stored.
struct MutatorCallRecord {
  std::int64_t id = -1;
  std::optional<NodeId> node;  // the child it made, if any
  std::string mutator;
  std::vector<NodeId> parents;
  std::string note, prompt, answer, error;
  std::int64_t tokens = 0;
  double cost_usd = 0;
  std::string model;  // the model that answered, if a model did
  double created_s = 0;
  double seconds = 0;
};

// A request of a round (rounds.hpp), kept until its answer comes: the model's prompt and the chat-completions body
// that a batch sends, for the node it is about.
struct ModelRequest {
  std::string id;      // the Batch API's custom_id, unique across runs and databases
  std::string prefix;  // what every request id of its run starts with
  std::int64_t round = 0;
  std::int64_t seq = 0;  // its order in the run
  NodeId parent = -1;    // -1: the first kernel of a problem without a seed
  std::string model, prompt, body;
  std::string state = "pending";  // pending, answered or failed
  std::string outcome;            // what its answer became, or why it failed
};

// An answer line (or file) a run took, and what came of it: "evaluated as node N", or why not.
struct ModelAnswerRecord {
  std::string request_id;  // empty for a line that names none
  std::string source;      // FILE:LINE, or the answer's file
  std::string outcome;
};

// A measurement found in the store for a candidate.
struct StoredMeasurement {
  RunId run = -1;
  NodeId node = -1;       // its id in that run
  std::int64_t uid = -1;  // its row
  Evaluation evaluation;
};

class Store {
 public:
  // The schema this build writes. Opening a database with another version migrates an older one
  // where a migration exists and refuses the rest with Error(BadUsage) naming the file and both versions.
  static constexpr int kSchemaVersion = 5;
  enum class Mode { read_write, read_only };

  // Opens (creating it in read_write mode) the database at `path`. Throws Error(BadUsage) for a file
  // that is not a KernelEvolve database or has a schema this build cannot use, Error(Internal) for I/O.
  explicit Store(const std::string& path, Mode mode = Mode::read_write);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  const std::string& path() const { return path_; }
  // Synchronous=FULL: every commit survives a power cut, not only a crash of the process. Slower
  // (an fsync per node); the default (NORMAL, in WAL mode) already survives kill -9.
  void set_durable(bool durable);

  RunId begin_run(const Spec& spec, const DeviceInfo& device, const RunSettings& settings = {});
  std::vector<RunInfo> runs() const;
  RunInfo run(RunId id) const;  // throws Error(BadUsage) for an unknown run
  std::optional<RunId> latest_run() const;
  // The latest run of this spec (same spec_hash), on this device (same kind and name) if one is given.
  std::optional<RunId> latest_run(const Spec& spec, const DeviceInfo* device = nullptr) const;

  // Commits one evaluated node of a run, with its edges, timings and mutator call, and the run's
  // progress (elapsed time, tokens): one transaction. Recording a node id again replaces it.
  // `reused_from` names the row whose measurement it copied, if any.
  void record_node(RunId run, const Node& node, const SearchState& state, std::optional<std::int64_t> reused_from = {});
  void record_mutator_failure(RunId run, const std::string& mutator, const Mutation& mutation,
                              const std::vector<NodeId>& parents, double created_s, double seconds);
  void finish_run(RunId run, const RunResult& result);
  // Adds prices for models the run has none for; a model it has a price for keeps that one.
  void add_llm_prices(RunId run, const std::map<std::string, LlmPrice>& prices);

  // The run's committed nodes as a graph (ids dense from 0 in the order they were made; a node lost in
  // flight leaves no gap) with its totals. Read-only.
  Checkpoint load(RunId run) const;
  // The same, and each graph node's row (nodes.uid) in `rows`, in graph order.
  Checkpoint load(RunId run, std::vector<std::int64_t>* rows) const;
  // What a node's row was recorded under, as the file holds it: its nodes.key (Candidate::key()) and its source's
  // sources.hash (source_hash()), for a reader that checks that the node it loaded is the node that was measured
  // (find_stored_program). Error(BadUsage) for a row the file does not have.
  struct RecordedDigests {
    std::string key;
    std::string source_hash;
  };
  RecordedDigests recorded_digests(std::int64_t row) const;
  // The digest a source's text is filed under (sources.hash): its length and two 64-bit FNV-1a hashes.
  static std::string source_hash(const std::string& text);
  // Loads the run to go on with it: also renumbers its nodes in the file to the graph's dense ids, so
  // new nodes continue the sequence, and marks it unfinished.
  Checkpoint resume(RunId run);
  std::vector<MutatorCallRecord> mutator_calls(RunId run) const;
  // Rounds (rounds.hpp): a run's requests to the model, in the order asked, and the answers it took.
  void add_model_request(RunId run, const ModelRequest& request);
  std::vector<ModelRequest> model_requests(RunId run) const;
  // Settles a pending request: "answered" or "failed", with what came of it.
  void settle_model_request(RunId run, const std::string& id, const std::string& state, const std::string& outcome);
  void record_model_answer(RunId run, const ModelAnswerRecord& answer);
  std::vector<ModelAnswerRecord> model_answers(RunId run) const;

  // The latest measurement of this candidate by any run with the same measurement_hash on a device of
  // the same class (kind and model name, FitnessEvaluator::device_class), whose status is worth keeping:
  // ok, compile_error, incorrect or invalid (crashed and timeout may be the machine's fault, so those are
  // measured again).
  std::optional<StoredMeasurement> find_measurement(const std::string& measurement_hash, const DeviceInfo& device,
                                                    const Candidate& candidate) const;
  std::optional<StoredMeasurement> find_measurement(const std::string& measurement_hash,
                                                    const std::string& device_class, const Candidate& candidate) const;
  // SQLite's integrity check: "ok", or what it found.
  std::string integrity_check() const;
  // The schema version stored in a database file, without opening it as a Store (0 for a new file).
  static int file_schema_version(const std::string& path);

 private:
  struct Statements;
  void exec(const char* sql) const;
  void initialize(Mode mode);
  std::int64_t source_id(const std::string& source);
  std::int64_t node_uid(RunId run, NodeId id) const;

  std::string path_;
  sqlite3* db_ = nullptr;
  std::unique_ptr<Statements> st_;
  mutable std::recursive_mutex mutex_;
  std::unordered_map<std::string, std::int64_t> source_ids_;  // source hash -> row, a cache
};

// A resumed run goes on at the prices it began with: each model the run priced gets its stored price back
// (Mutator::set_prices); a model it had no price for keeps the one it has now, which the store then records.
// Returns a line for each model whose price now differed from the stored one, to tell the user.
std::vector<std::string> keep_run_prices(Store& store, RunId run, Mutator& mutator);

// Views of a stored run, for people and tools (what `kernelevolve show`, `best` and `export` print).
// A table of the run's nodes (id, parent, mutator, status, time per workload, speedup, note) and the
// lineage of its best node. `limit` > 0 keeps the table to the first nodes (the lineage is always whole).
std::string show_run_text(const Store& store, RunId run, std::size_t limit = 0);
// One node of a stored run in full (`kernelevolve show --node`): parents, mutator and note, status and message,
// tunables, per workload its time with the spread and its diagnosis, its resources, the worst mismatch, and the
// end of its compiler log. Throws Error(BadUsage) for a node the run does not have.
std::string show_node_text(const Store& store, RunId run, NodeId node);
// The best kernel's source, ready to compile on its own: a comment saying where it came from, then each
// tunable as a #define guarded by #ifndef (so -DNAME=... still overrides it), then the source. None if the
// run has no correct node.
std::optional<std::string> best_kernel_source(const Store& store, RunId run);
// The run as one JSON object: the run (spec, device, settings, totals), the nodes (parents, mutator,
// note, status, message, times and spreads per workload, tunables, resources, worst mismatch, an index
// into "sources"), the sources once each, the best node and its lineage.
std::string export_json(const Store& store, RunId run);
// The graph in Graphviz DOT: a box per node, filled by status (ok green, the best gold, compile_error
// orange, incorrect red, crashed purple, timeout grey, invalid tan), an arrow from each parent.
std::string export_dot(const Store& store, RunId run);

// An Observer that commits a run to a store as it goes: each node when it is evaluated, each failed
// mutator call, and the run's end.
class StoreRecorder final : public Observer {
 public:
  // `reuse`, if given, is asked which nodes it answered from the store, to link them to the original.
  StoreRecorder(std::shared_ptr<Store> store, RunId run, ReusingEvaluator* reuse = nullptr);
  void on_start(const Spec& spec, const DeviceInfo& device) override;
  void on_node(const Node& node, const SearchState& state) override;
  void on_mutator_call(const Mutation& mutation, const std::vector<NodeId>& parents, double seconds) override;
  void on_finish(const RunResult& result, const SearchGraph& graph) override;
  RunId run() const { return run_; }

 private:
  std::shared_ptr<Store> store_;
  RunId run_;
  ReusingEvaluator* reuse_;
  std::string mutator_;        // the run's mutator, for failed calls (they carry no node)
  double elapsed_before_ = 0;  // the run's time before this process took it up
  std::chrono::steady_clock::time_point start_;
};

// A FitnessEvaluator that answers from the store when a candidate was measured before for the same
// problem on the same device (Store::find_measurement), and asks the evaluator it wraps otherwise.
// "Same" is the spec's measurement_hash and the device's class, its kind and model name (so CPU runs on
// two machines with the same processor model share measurements; a different model never does). Over
// several classes of device (MultiDeviceEvaluator), each class finds its own measurements. Thread-safe.
class ReusingEvaluator final : public FitnessEvaluator {
 public:
  ReusingEvaluator(std::shared_ptr<FitnessEvaluator> inner, std::shared_ptr<Store> store, const Spec& spec);
  Evaluation evaluate(const Candidate& candidate, std::uint64_t input_seed) override;
  Evaluation evaluate_on(std::size_t device_class_index, const Candidate& candidate, std::uint64_t input_seed) override;
  // Never from the store: the inner evaluator's own measure_again.
  Evaluation measure_again(std::size_t device_class_index, const Candidate& candidate,
                           std::uint64_t input_seed) override;
  // Never from the store either: the inner evaluator's.
  CounterResult hardware_counters(const Candidate& candidate, std::uint64_t input_seed) override;
  DeviceInfo device_info() override;
  std::vector<std::string> device_classes() override;
  // The row whose measurement answered this candidate, if one did.
  std::optional<std::int64_t> reused_from(const Candidate& candidate) const;
  std::int64_t reused() const;  // candidates answered from the store so far

 private:
  std::optional<Evaluation> from_store(const std::string& device_class, const Candidate& candidate);

  std::shared_ptr<FitnessEvaluator> inner_;
  std::shared_ptr<Store> store_;
  std::string measurement_hash_;
  mutable std::mutex mutex_;
  std::optional<DeviceInfo> device_;
  std::unordered_map<std::string, std::int64_t> reused_;  // candidate key -> row
};

}  // namespace kernelevolve
