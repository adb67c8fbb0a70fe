// What the store reads back: the runs (and the latest of a spec), a run's mutator calls, the measurement of
// a candidate an earlier run took (find_measurement, which ReusingEvaluator asks), a node row's digests.
#include <simdjson.h>

#include <sstream>
#include <unordered_map>

#include "eval/wire.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/store.hpp"
#include "store/codecs.hpp"
#include "store/statements.hpp"

namespace kernelevolve {

using store::parse_ids;
using store::parse_int_map;
using store::parse_mismatch;
using store::parse_prices;
using store::Stmt;

namespace {

const char* kRunColumns =
    "id, spec_name, spec_path, spec_hash, measurement_hash, spec_json, device_json, policy, mutator, seed, "
    "command_line, started_at, updated_at, finished_at, stop_reason, elapsed_s, tokens, mutator_failures, "
    "(SELECT count(*) FROM nodes WHERE run_id = runs.id), confirmation, best_node, cost_usd, llm_prices";

RunInfo read_run(const Stmt& s) {
  RunInfo r;
  r.id = s.i64(0);
  r.spec_name = s.text(1);
  r.spec_path = s.text(2);
  r.spec_hash = s.text(3);
  r.measurement_hash = s.text(4);
  r.spec_json = s.text(5);
  try {
    r.device = wire::device_info_from_json(s.text(6));
  } catch (const std::exception&) {
  }
  r.settings.policy = s.text(7);
  r.settings.mutator = s.text(8);
  r.settings.seed = static_cast<std::uint64_t>(s.i64(9));
  r.settings.command_line = s.text(10);
  r.started_at = s.text(11);
  r.updated_at = s.text(12);
  r.finished_at = s.text(13);
  r.stop_reason = s.text(14);
  r.elapsed_s = s.f64(15);
  r.tokens = s.i64(16);
  r.mutator_failures = s.i64(17);
  r.nodes = s.i64(18);
  std::istringstream lines(s.text(19));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) r.confirmation.push_back(line);
  }
  if (!s.null(20)) r.best = static_cast<NodeId>(s.i64(20));
  r.cost_usd = s.f64(21);
  r.settings.llm_prices = parse_prices(s.text(22));
  return r;
}

}  // namespace

std::vector<RunInfo> Store::runs() const {
  std::lock_guard lock(mutex_);
  Stmt s(db_, std::string("SELECT ") + kRunColumns + " FROM runs ORDER BY id");
  std::vector<RunInfo> out;
  while (s.step()) out.push_back(read_run(s));
  return out;
}

RunInfo Store::run(RunId id) const {
  std::lock_guard lock(mutex_);
  Stmt s(db_, std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?");
  s.bind(1, id);
  if (!s.step()) throw Error(ErrorCode::BadUsage, path_ + " has no run " + std::to_string(id));
  return read_run(s);
}

std::optional<RunId> Store::latest_run() const {
  std::lock_guard lock(mutex_);
  Stmt s(db_, "SELECT max(id) FROM runs");
  if (s.step() && !s.null(0)) return s.i64(0);
  return std::nullopt;
}

std::optional<RunId> Store::latest_run(const Spec& spec, const DeviceInfo* device) const {
  std::lock_guard lock(mutex_);
  Stmt s(db_, device ? "SELECT max(id) FROM runs WHERE spec_hash = ? AND device_kind = ? AND device_name = ?"
                     : "SELECT max(id) FROM runs WHERE spec_hash = ?");
  s.bind(1, spec_hash(spec));
  if (device) s.bind(2, device->kind).bind(3, device->name);
  if (s.step() && !s.null(0)) return s.i64(0);
  return std::nullopt;
}

std::vector<MutatorCallRecord> Store::mutator_calls(RunId run) const {
  std::lock_guard lock(mutex_);
  std::unordered_map<std::int64_t, NodeId> seq_of;
  {
    Stmt s(db_, "SELECT uid, seq FROM nodes WHERE run_id = ?");
    s.bind(1, run);
    while (s.step()) seq_of[s.i64(0)] = s.i64(1);
  }
  simdjson::dom::parser parser;
  Stmt s(db_,
         "SELECT id, node, mutator, parents, note, prompt, answer, error, tokens, created_s, seconds, cost_usd, model "
         "FROM mutator_calls "
         "WHERE run_id = ? ORDER BY id");
  s.bind(1, run);
  std::vector<MutatorCallRecord> out;
  while (s.step()) {
    MutatorCallRecord r;
    r.id = s.i64(0);
    if (!s.null(1) && seq_of.count(s.i64(1))) r.node = seq_of[s.i64(1)];
    r.mutator = s.text(2);
    for (std::int64_t uid : parse_ids(parser, s.text(3))) {
      if (seq_of.count(uid)) r.parents.push_back(seq_of[uid]);
    }
    r.note = s.text(4);
    r.prompt = s.text(5);
    r.answer = s.text(6);
    r.error = s.text(7);
    r.tokens = s.i64(8);
    r.created_s = s.f64(9);
    r.seconds = s.f64(10);
    r.cost_usd = s.f64(11);
    r.model = s.text(12);
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<StoredMeasurement> Store::find_measurement(const std::string& hash, const DeviceInfo& device,
                                                         const Candidate& candidate) const {
  return find_measurement(hash, FitnessEvaluator::device_class(device), candidate);
}

std::optional<StoredMeasurement> Store::find_measurement(const std::string& hash, const std::string& device_class,
                                                         const Candidate& candidate) const {
  std::lock_guard lock(mutex_);
  // A node measured on a device of its own class says so; older nodes were measured on the run's device.
  Stmt s(db_,
         "SELECT n.uid, n.run_id, n.seq, n.status, n.message, n.compile_log, n.compile_ms, n.worst, n.resources, "
         "coalesce(n.reused_from, n.uid) FROM nodes n JOIN runs r ON r.id = n.run_id "
         "WHERE n.key = ?1 AND r.measurement_hash = ?2 "
         "AND (CASE WHEN n.device != '' THEN n.device ELSE r.device_kind || ' ' || r.device_name END) = ?3 "
         "AND n.status IN ('ok', 'compile_error', 'incorrect', 'invalid') ORDER BY n.uid DESC LIMIT 1");
  s.bind(1, candidate.key()).bind(2, hash).bind(3, device_class);
  if (!s.step()) return std::nullopt;
  simdjson::dom::parser parser;
  StoredMeasurement m;
  m.run = s.i64(1);
  m.node = s.i64(2);
  Evaluation& e = m.evaluation;
  e.status = parse_status(s.text(3)).value_or(Status::crashed);
  e.message = s.text(4);
  e.compile_log = s.text(5);
  e.compile_ms = s.f64(6);
  if (!s.null(7)) e.worst = parse_mismatch(parser, s.text(7));
  e.resources = parse_int_map(parser, s.text(8));
  e.device = device_class;
  m.uid = s.i64(9);  // the original measurement, not a copy of it
  Stmt t(db_, "SELECT median_us, min_us, max_us, mad_us, samples FROM timings WHERE node = ? ORDER BY workload");
  t.bind(1, s.i64(0));
  while (t.step()) e.timings.push_back({t.f64(0), t.f64(1), t.f64(2), t.f64(3), static_cast<int>(t.i64(4))});
  return m;
}

Store::RecordedDigests Store::recorded_digests(std::int64_t row) const {
  std::lock_guard lock(mutex_);
  Stmt s(db_, "SELECT n.key, s.hash FROM nodes n JOIN sources s ON s.id = n.source_id WHERE n.uid = ?");
  s.bind(1, row);
  if (!s.step())
    throw Error(ErrorCode::BadUsage, path_ + ": has no node row " + std::to_string(row) + " with a source");
  return {s.text(0), s.text(1)};
}

}  // namespace kernelevolve
