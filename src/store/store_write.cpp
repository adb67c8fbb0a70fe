// What a run writes into the store as it goes: the run begun, each evaluated node committed (its source
// once, its edges, timings and mutator call, the run's progress) in a transaction of its own, each failed
// mutator call, the run's end, and the prices of the models it calls.
#include <sqlite3.h>

#include <map>

#include "eval/wire.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/report.hpp"
#include "kernelevolve/store.hpp"
#include "store/codecs.hpp"
#include "store/digests.hpp"
#include "store/statements.hpp"

namespace kernelevolve {

using store::ids_json;
using store::int_map_json;
using store::mismatch_json;
using store::prices_json;
using store::Stmt;
using store::text_hash;
using store::Transaction;

RunId Store::begin_run(const Spec& spec, const DeviceInfo& device, const RunSettings& settings) {
  std::lock_guard lock(mutex_);
  Stmt s(
      db_,
      "INSERT INTO runs(spec_name, spec_path, spec_hash, measurement_hash, spec_json, device_id, device_kind, "
      "device_name, device_json, policy, mutator, seed, command_line, llm_prices, started_at, updated_at) VALUES(?, ?, "
      "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))");
  s.bind(1, spec.name)
      .bind(2, spec.path)
      .bind(3, spec_hash(spec))
      .bind(4, measurement_hash(spec))
      .bind(5, to_json(spec));
  s.bind(6, device.id).bind(7, device.kind).bind(8, device.name).bind(9, wire::to_json(device));
  s.bind(10, settings.policy).bind(11, settings.mutator).bind(12, static_cast<std::int64_t>(settings.seed));
  s.bind(13, settings.command_line).bind(14, prices_json(settings.llm_prices));
  s.run();
  return sqlite3_last_insert_rowid(db_);
}

std::int64_t Store::source_id(const std::string& source) {
  const std::string hash = text_hash(source);
  if (const auto it = source_ids_.find(hash); it != source_ids_.end()) return it->second;
  std::int64_t id;
  st_->find_source.reset().bind(1, hash);
  if (st_->find_source.step()) {
    id = st_->find_source.i64(0);
    st_->find_source.reset();
  } else {
    st_->find_source.reset();
    st_->insert_source.reset().bind(1, hash).bind(2, source).run();
    id = sqlite3_last_insert_rowid(db_);
  }
  if (source_ids_.size() > 4096) source_ids_.clear();
  source_ids_.emplace(hash, id);
  return id;
}

std::int64_t Store::node_uid(RunId run, NodeId id) const {
  st_->find_node.reset().bind(1, run).bind(2, id);
  const bool found = st_->find_node.step();
  const std::int64_t uid = found ? st_->find_node.i64(0) : -1;
  st_->find_node.reset();
  return uid;
}

void Store::record_node(RunId run, const Node& node, const SearchState& state,
                        std::optional<std::int64_t> reused_from) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  // The source row is new only inside this transaction: forget cached ids if it rolls back.
  struct ForgetOnFailure {
    std::unordered_map<std::string, std::int64_t>& cache;
    bool committed = false;
    ~ForgetOnFailure() {
      if (!committed) cache.clear();
    }
  } forget{source_ids_};
  const Evaluation& e = node.evaluation;
  std::map<std::string, std::int64_t> tunables(node.candidate.tunables.begin(), node.candidate.tunables.end());
  auto bind_all = [&](Stmt& s) {
    s.reset();
    s.bind(1, run).bind(2, node.id).bind(3, node.candidate.key()).bind(4, source_id(node.candidate.source));
    s.bind(5, to_string(node.candidate.language))
        .bind(6, int_map_json(tunables))
        .bind(7, node.mutator)
        .bind(8, node.note);
    s.bind(9, to_string(e.status)).bind(10, e.message).bind(11, e.compile_log).bind(12, e.compile_ms);
    if (e.worst) {
      s.bind(13, mismatch_json(*e.worst));
    } else {
      s.bind_null(13);
    }
    s.bind(14, int_map_json(e.resources)).bind(15, node.speedup).bind(16, node.created_s).bind(17, node.tokens);
    s.bind(18, node.mutation_s).bind(19, reused_from).bind(20, e.device).bind(21, node.cost_usd).bind(22, node.model);
  };
  std::int64_t uid = node_uid(run, node.id);
  if (uid < 0) {
    bind_all(st_->insert_node);
    st_->insert_node.run();
    uid = sqlite3_last_insert_rowid(db_);
  } else {  // recorded again: replace what hangs off it
    bind_all(st_->update_node);
    st_->update_node.run();
    for (const char* sql : {"DELETE FROM timings WHERE node = ?", "DELETE FROM edges WHERE child = ?",
                            "DELETE FROM mutator_calls WHERE node = ?"}) {
      Stmt d(db_, sql);
      d.bind(1, uid).run();
    }
  }
  std::vector<std::int64_t> parent_uids;
  for (std::size_t i = 0; i < node.parents.size(); ++i) {
    const std::int64_t parent = node_uid(run, node.parents[i]);
    if (parent < 0) {
      throw Error(ErrorCode::BadUsage, "store: node " + std::to_string(node.id) + " names parent " +
                                           std::to_string(node.parents[i]) + ", which this run has not recorded");
    }
    parent_uids.push_back(parent);
    st_->insert_edge.reset().bind(1, uid).bind(2, static_cast<std::int64_t>(i)).bind(3, parent).run();
  }
  for (std::size_t w = 0; w < e.timings.size(); ++w) {
    const WorkloadTiming& t = e.timings[w];
    st_->insert_timing.reset().bind(1, uid).bind(2, static_cast<std::int64_t>(w)).bind(3, t.median_us);
    st_->insert_timing.bind(4, t.min_us).bind(5, t.max_us).bind(6, t.mad_us).bind(7, t.samples).run();
  }
  if (!node.prompt.empty() || !node.answer.empty() || node.tokens > 0) {
    Stmt& c = st_->insert_call.reset();
    c.bind(1, run).bind(2, uid).bind(3, node.mutator).bind(4, ids_json(parent_uids)).bind(5, node.note);
    c.bind(6, node.prompt).bind(7, node.answer).bind(8, std::string()).bind(9, node.tokens);
    c.bind(10, node.created_s).bind(11, node.mutation_s).bind(12, node.cost_usd).bind(13, node.model).run();
  }
  st_->update_progress.reset()
      .bind(1, run)
      .bind(2, state.elapsed_s)
      .bind(3, state.tokens)
      .bind(4, state.cost_usd)
      .run();
  tx.commit();
  forget.committed = true;
}

void Store::record_mutator_failure(RunId run, const std::string& mutator, const Mutation& m,
                                   const std::vector<NodeId>& parents, double created_s, double seconds) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  std::vector<std::int64_t> parent_uids;
  for (NodeId p : parents) {
    const std::int64_t uid = node_uid(run, p);
    if (uid >= 0) parent_uids.push_back(uid);
  }
  Stmt& c = st_->insert_call.reset();
  c.bind(1, run).bind_null(2).bind(3, mutator).bind(4, ids_json(parent_uids)).bind(5, m.note).bind(6, m.prompt);
  c.bind(7, m.answer).bind(8, m.error.empty() ? std::string("no candidate") : m.error).bind(9, m.tokens);
  c.bind(10, created_s).bind(11, seconds).bind(12, m.cost_usd).bind(13, m.model).run();
  Stmt u(db_,
         "UPDATE runs SET mutator_failures = mutator_failures + 1, tokens = tokens + ?2, cost_usd = cost_usd + ?3 "
         "WHERE id = ?1");
  u.bind(1, run).bind(2, m.tokens).bind(3, m.cost_usd).run();
  tx.commit();
}

void Store::finish_run(RunId run, const RunResult& result) {
  std::lock_guard lock(mutex_);
  Stmt s(
      db_,
      "UPDATE runs SET finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', "
      "'now'), stop_reason = ?2, elapsed_s = ?3, tokens = ?4, mutator_failures = max(mutator_failures, ?5), "
      "confirmation = ?6, best_node = ?7, cost_usd = ?8 WHERE id = ?1");
  std::string confirmation;
  if (result.confirmation) confirmation += confirmation_text(*result.confirmation) + "\n";
  for (const Confirmation& c : result.unconfirmed) {
    if (!result.confirmation || c.node != result.confirmation->node) confirmation += confirmation_text(c) + "\n";
  }
  s.bind(1, run).bind(2, result.stop_reason).bind(3, result.state.elapsed_s).bind(4, result.state.tokens);
  s.bind(5, result.mutator_failures).bind(6, confirmation).bind(7, result.best).bind(8, result.state.cost_usd).run();
}

void Store::add_llm_prices(RunId run, const std::map<std::string, LlmPrice>& prices) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  std::map<std::string, LlmPrice> stored = this->run(run).settings.llm_prices;
  for (const auto& [model, price] : prices) stored.emplace(model, price);  // never replaces one
  Stmt s(db_, "UPDATE runs SET llm_prices = ?2 WHERE id = ?1");
  s.bind(1, run).bind(2, prices_json(stored)).run();
  tx.commit();
}

}  // namespace kernelevolve
