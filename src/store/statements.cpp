// The statements a Store prepares when it opens (statements.hpp).
#include "store/statements.hpp"

namespace kernelevolve {

Store::Statements::Statements(sqlite3* db)
    : insert_node(
          db,
          "INSERT INTO nodes(run_id, seq, key, source_id, language, tunables, mutator, note, status, message, "
          "compile_log, compile_ms, worst, resources, speedup, created_s, tokens, mutation_s, reused_from, device, "
          "cost_usd, model) "
          "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)"),
      update_node(db,
                  "UPDATE nodes SET key = ?3, source_id = ?4, language = ?5, tunables = ?6, mutator = ?7, note = ?8, "
                  "status = ?9, message = ?10, compile_log = ?11, compile_ms = ?12, worst = ?13, resources = ?14, "
                  "speedup = ?15, created_s = ?16, tokens = ?17, mutation_s = ?18, reused_from = ?19, device = ?20, "
                  "cost_usd = ?21, model = ?22 WHERE run_id = ?1 AND seq = ?2"),
      find_node(db, "SELECT uid FROM nodes WHERE run_id = ? AND seq = ?"),
      insert_edge(db, "INSERT INTO edges(child, position, parent) VALUES(?, ?, ?)"),
      insert_timing(db,
                    "INSERT INTO timings(node, workload, median_us, min_us, max_us, mad_us, samples) "
                    "VALUES(?, ?, ?, ?, ?, ?, ?)"),
      insert_call(db,
                  "INSERT INTO mutator_calls(run_id, node, mutator, parents, note, prompt, answer, error, tokens, "
                  "created_s, seconds, cost_usd, model) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
      update_progress(
          db,
          "UPDATE runs SET updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), elapsed_s = max(elapsed_s, ?2), "
          "tokens = max(tokens, ?3), cost_usd = max(cost_usd, ?4) WHERE id = ?1"),
      find_source(db, "SELECT id FROM sources WHERE hash = ?"),
      insert_source(db, "INSERT INTO sources(hash, text) VALUES(?, ?)") {}

}  // namespace kernelevolve
