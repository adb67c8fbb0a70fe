// A run read back as a graph (Store::load, a Checkpoint: also what show and export read) and taken up again
// (Store::resume renumbers it to go on; keep_run_prices keeps the prices it began with).
#include <simdjson.h>

#include <map>
#include <sstream>
#include <unordered_map>

#include "kernelevolve/diagnosis.hpp"
#include "kernelevolve/store.hpp"
#include "store/codecs.hpp"
#include "store/statements.hpp"

namespace kernelevolve {

using store::ids_json;
using store::parse_int_map;
using store::parse_mismatch;
using store::Stmt;
using store::Transaction;

namespace {

const char* kNodeColumns =
    "uid, seq, key, source_id, language, tunables, mutator, note, status, message, compile_log, compile_ms, worst, "
    "resources, speedup, created_s, tokens, mutation_s, device, cost_usd, model";

struct LoadedNode {
  std::int64_t uid;
  Node node;
};

}  // namespace

std::vector<std::string> keep_run_prices(Store& store, RunId run, Mutator& mutator) {
  const std::map<std::string, LlmPrice> stored = store.run(run).settings.llm_prices;
  const std::map<std::string, LlmPrice> now = mutator.prices();
  std::vector<std::string> said;
  auto text = [](const LlmPrice& p) {
    std::ostringstream out;
    out << "$" << p.input_per_mtok << " in, $" << p.output_per_mtok << " out per million tokens";
    return out.str();
  };
  for (const auto& [model, price] : now) {
    const auto it = stored.find(model);
    if (it != stored.end() && !(it->second == price)) {
      said.push_back("run " + std::to_string(run) + " keeps the price it began with for " + model + ": " +
                     text(it->second) + " (not " + text(price) + ")");
    } else if (it == stored.end()) {
      said.push_back("run " + std::to_string(run) + " had no price for " + model + "; its calls from now on cost " +
                     text(price));
    }
  }
  mutator.set_prices(stored);
  store.add_llm_prices(run, mutator.prices());
  return said;
}

Checkpoint Store::load(RunId run) const { return load(run, nullptr); }

Checkpoint Store::load(RunId run, std::vector<std::int64_t>* kept_uids) const {
  std::lock_guard lock(mutex_);
  const RunInfo info = this->run(run);
  Checkpoint cp;
  cp.elapsed_s = info.elapsed_s;
  cp.tokens = info.tokens;
  cp.cost_usd = info.cost_usd;
  cp.mutator_failures = info.mutator_failures;

  simdjson::dom::parser parser;
  std::vector<LoadedNode> loaded;
  std::unordered_map<std::int64_t, std::size_t> by_uid;
  std::unordered_map<std::int64_t, std::int64_t> source_of;  // uid -> source row
  {
    Stmt s(db_, std::string("SELECT ") + kNodeColumns + " FROM nodes WHERE run_id = ? ORDER BY seq");
    s.bind(1, run);
    while (s.step()) {
      LoadedNode ln;
      ln.uid = s.i64(0);
      Node& n = ln.node;
      n.id = s.i64(1);
      source_of[ln.uid] = s.i64(3);
      n.candidate.language = parse_language(s.text(4)).value_or(Language::c);
      const auto tunables = parse_int_map(parser, s.text(5));
      n.candidate.tunables = Bindings(tunables.begin(), tunables.end());
      n.mutator = s.text(6);
      n.note = s.text(7);
      n.evaluation.status = parse_status(s.text(8)).value_or(Status::crashed);
      n.evaluation.message = s.text(9);
      n.evaluation.compile_log = s.text(10);
      n.evaluation.compile_ms = s.f64(11);
      if (!s.null(12)) n.evaluation.worst = parse_mismatch(parser, s.text(12));
      n.evaluation.resources = parse_int_map(parser, s.text(13));
      n.speedup = s.f64(14);
      n.created_s = s.f64(15);
      n.tokens = s.i64(16);
      n.mutation_s = s.f64(17);
      n.evaluation.device = s.text(18);
      n.cost_usd = s.f64(19);
      n.model = s.text(20);
      by_uid[ln.uid] = loaded.size();
      loaded.push_back(std::move(ln));
    }
  }
  {
    std::unordered_map<std::int64_t, std::string> texts;
    Stmt s(db_, "SELECT id, text FROM sources WHERE id IN (SELECT DISTINCT source_id FROM nodes WHERE run_id = ?)");
    s.bind(1, run);
    while (s.step()) texts[s.i64(0)] = s.text(1);
    for (LoadedNode& ln : loaded) ln.node.candidate.source = texts[source_of[ln.uid]];
  }
  std::unordered_map<std::int64_t, std::vector<std::int64_t>> parent_uids;
  {
    Stmt s(db_,
           "SELECT e.child, e.parent FROM edges e JOIN nodes n ON n.uid = e.child WHERE n.run_id = ? "
           "ORDER BY e.child, e.position");
    s.bind(1, run);
    while (s.step()) parent_uids[s.i64(0)].push_back(s.i64(1));
  }
  {
    Stmt s(db_,
           "SELECT t.node, t.median_us, t.min_us, t.max_us, t.mad_us, t.samples FROM timings t JOIN nodes n ON n.uid = "
           "t.node WHERE n.run_id = ? ORDER BY t.node, t.workload");
    s.bind(1, run);
    while (s.step()) {
      const auto it = by_uid.find(s.i64(0));
      if (it == by_uid.end()) continue;
      loaded[it->second].node.evaluation.timings.push_back(
          {s.f64(1), s.f64(2), s.f64(3), s.f64(4), static_cast<int>(s.i64(5))});
    }
  }
  {
    Stmt s(db_, "SELECT node, prompt, answer FROM mutator_calls WHERE run_id = ? AND node IS NOT NULL");
    s.bind(1, run);
    while (s.step()) {
      const auto it = by_uid.find(s.i64(0));
      if (it == by_uid.end()) continue;
      loaded[it->second].node.prompt = s.text(1);
      loaded[it->second].node.answer = s.text(2);
    }
  }
  // Diagnoses are not stored: they are a function of the run's spec and device (its ceilings are kept with it)
  // and each node's tunables, times and resources, so every run, an old one too, is diagnosed on reading.
  std::optional<Spec> spec;
  try {
    spec = parse_spec(info.spec_json, info.spec_path.empty() ? info.spec_name : info.spec_path);
  } catch (const std::exception&) {
    // A spec this build no longer reads: its nodes load without diagnoses.
  }
  // Dense ids in the order the nodes were made: a node lost in flight leaves no hole.
  std::unordered_map<std::int64_t, NodeId> dense;  // uid -> graph id
  for (LoadedNode& ln : loaded) {
    Node& n = ln.node;
    n.parents.clear();
    for (std::int64_t p : parent_uids[ln.uid]) {
      if (const auto it = dense.find(p); it != dense.end()) n.parents.push_back(it->second);
    }
    if (cp.graph.size() > 0 && n.parents.empty()) continue;  // an orphan (its parent is lost): not reachable
    dense[ln.uid] = static_cast<NodeId>(cp.graph.size());
    if (kept_uids) kept_uids->push_back(ln.uid);
    if (cp.graph.size() > 0 && n.evaluation.status == Status::ok) {
      n.speedup = speedup(cp.graph.node(0).evaluation, n.evaluation);
    }
    if (spec) n.diagnosis = diagnose(*spec, n.candidate.tunables, n.evaluation, info.device, &n.candidate);
    cp.graph.add(std::move(n));
  }
  return cp;
}

Checkpoint Store::resume(RunId run) {
  std::lock_guard lock(mutex_);
  std::vector<std::int64_t> kept;
  Checkpoint cp = load(run, &kept);
  Transaction tx(db_);
  // Orphans (nodes whose parent was lost; load leaves them out) step aside to negative numbers, then
  // each kept node moves down to its dense id, in ascending order, so the id it takes is free by then.
  Stmt aside(
      db_, "UPDATE nodes SET seq = -uid WHERE run_id = ? AND seq >= 0 AND uid NOT IN (SELECT value FROM json_each(?))");
  aside.bind(1, run).bind(2, ids_json(kept)).run();
  Stmt u(db_, "UPDATE nodes SET seq = ? WHERE uid = ? AND seq != ?");
  for (std::size_t i = 0; i < kept.size(); ++i) {
    u.reset().bind(1, static_cast<std::int64_t>(i)).bind(2, kept[i]).bind(3, static_cast<std::int64_t>(i)).run();
  }
  Stmt f(db_, "UPDATE runs SET finished_at = NULL, stop_reason = '' WHERE id = ?");
  f.bind(1, run).run();
  tx.commit();
  return cp;
}

}  // namespace kernelevolve
