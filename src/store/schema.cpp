// The store's schema, as of Store::kSchemaVersion, and the migrations from each older version.
#include "store/schema.hpp"

#include <string>

namespace kernelevolve::store {

namespace {

// Version 5's tables: a new database's last ones, and a file migrated from version 4 gets them.
const std::string kRoundTables = R"sql(
CREATE TABLE IF NOT EXISTS model_requests(  -- version 5: a round's requests to the model (rounds.hpp)
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  request_id TEXT NOT NULL,  -- the Batch API's custom_id
  prefix TEXT NOT NULL,      -- what every request id of the run starts with
  round INTEGER NOT NULL,
  seq INTEGER NOT NULL,      -- its order in the run
  parent INTEGER NOT NULL,   -- the graph id of the node it is about; -1 for a first kernel
  model TEXT NOT NULL,
  prompt TEXT NOT NULL,
  body TEXT NOT NULL,        -- the chat-completions request body, JSON
  state TEXT NOT NULL,       -- pending, answered or failed
  outcome TEXT NOT NULL,     -- what its answer became, or why it failed
  PRIMARY KEY(run_id, request_id)
);
CREATE TABLE IF NOT EXISTS model_answers(  -- version 5: every answer line a run took, and what came of it
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  request_id TEXT NOT NULL,  -- empty for a line that names none
  source TEXT NOT NULL,      -- the answers file and line, or the answer file
  outcome TEXT NOT NULL      -- evaluated, or the failure: missing, duplicate, unknown id, garbled, an error
);
CREATE INDEX IF NOT EXISTS model_answers_by_run ON model_answers(run_id);
)sql";

}  // namespace

// The schema as of Store::kSchemaVersion, for a new database. Every later version adds a migration below
// (taking an older file to it) and bumps Store::kSchemaVersion.
const std::string kSchema = std::string(R"sql(
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  spec_name TEXT NOT NULL,
  spec_path TEXT NOT NULL DEFAULT '',
  spec_hash TEXT NOT NULL,
  measurement_hash TEXT NOT NULL,
  spec_json TEXT NOT NULL,
  device_id TEXT NOT NULL,
  device_kind TEXT NOT NULL,
  device_name TEXT NOT NULL,
  device_json TEXT NOT NULL,
  policy TEXT NOT NULL DEFAULT '',
  mutator TEXT NOT NULL DEFAULT '',
  seed INTEGER NOT NULL DEFAULT 0,
  command_line TEXT NOT NULL DEFAULT '',
  started_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  finished_at TEXT,
  stop_reason TEXT NOT NULL DEFAULT '',
  elapsed_s REAL NOT NULL DEFAULT 0,
  tokens INTEGER NOT NULL DEFAULT 0,
  mutator_failures INTEGER NOT NULL DEFAULT 0,
  confirmation TEXT NOT NULL DEFAULT '',  -- version 2
  best_node INTEGER,  -- version 3: the best as the run's end chose it (confirmed); NULL before the end
  cost_usd REAL NOT NULL DEFAULT 0,  -- version 4: what the model calls cost
  llm_prices TEXT NOT NULL DEFAULT ''  -- version 4: JSON, model -> [input, output] US dollars per million tokens
);
CREATE INDEX runs_by_spec ON runs(spec_hash);
CREATE INDEX runs_by_measurement ON runs(measurement_hash, device_kind, device_name);
-- Sources are shared: a parameter search makes thousands of nodes from one text.
CREATE TABLE sources(
  id INTEGER PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  text TEXT NOT NULL
);
CREATE TABLE nodes(
  uid INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,                 -- the node's id in its run's graph
  key TEXT NOT NULL,                    -- Candidate::key(): source and tunables
  source_id INTEGER NOT NULL REFERENCES sources(id),
  language TEXT NOT NULL,
  tunables TEXT NOT NULL,               -- JSON object
  mutator TEXT NOT NULL,
  note TEXT NOT NULL,
  status TEXT NOT NULL,
  device TEXT NOT NULL,                 -- the class of device that measured it (Evaluation::device)
  message TEXT NOT NULL,
  compile_log TEXT NOT NULL,
  compile_ms REAL NOT NULL,
  worst TEXT,                           -- JSON: the worst mismatch, if any
  resources TEXT NOT NULL,              -- JSON object
  speedup REAL NOT NULL,
  created_s REAL NOT NULL,
  tokens INTEGER NOT NULL,
  mutation_s REAL NOT NULL,
  reused_from INTEGER REFERENCES nodes(uid),
  cost_usd REAL NOT NULL DEFAULT 0,     -- version 4
  model TEXT NOT NULL DEFAULT '',       -- version 4: the model that wrote it
  UNIQUE(run_id, seq)
);
CREATE INDEX nodes_by_key ON nodes(key);
CREATE TABLE edges(
  child INTEGER NOT NULL REFERENCES nodes(uid) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  parent INTEGER NOT NULL REFERENCES nodes(uid),
  PRIMARY KEY(child, position)
) WITHOUT ROWID;
CREATE INDEX edges_by_parent ON edges(parent);
CREATE TABLE timings(
  node INTEGER NOT NULL REFERENCES nodes(uid) ON DELETE CASCADE,
  workload INTEGER NOT NULL,
  median_us REAL NOT NULL,
  min_us REAL NOT NULL,
  max_us REAL NOT NULL,
  mad_us REAL NOT NULL,
  samples INTEGER NOT NULL,
  PRIMARY KEY(node, workload)
) WITHOUT ROWID;
CREATE TABLE mutator_calls(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  node INTEGER REFERENCES nodes(uid) ON DELETE CASCADE,  -- the child it made; NULL for a failure
  mutator TEXT NOT NULL,
  parents TEXT NOT NULL,                                  -- JSON array of node uids
  note TEXT NOT NULL,
  prompt TEXT NOT NULL,
  answer TEXT NOT NULL,
  error TEXT NOT NULL,
  tokens INTEGER NOT NULL,
  created_s REAL NOT NULL,
  seconds REAL NOT NULL,
  cost_usd REAL NOT NULL DEFAULT 0,  -- version 4
  model TEXT NOT NULL DEFAULT ''     -- version 4
);
CREATE INDEX mutator_calls_by_run ON mutator_calls(run_id);
CREATE INDEX mutator_calls_by_node ON mutator_calls(node);
)sql") + kRoundTables;

// Each takes a database from `from` to `from + 1` (schema.hpp).
const std::vector<Migration> kMigrations = {
    // 2: each run keeps the confirmation of its best (lines of text, one per node confirmed).
    {1, "ALTER TABLE runs ADD COLUMN confirmation TEXT NOT NULL DEFAULT ''"},
    // 3: each run keeps the node its end chose as best, which confirmation may move off the search's fastest.
    {2, "ALTER TABLE runs ADD COLUMN best_node INTEGER"},
    // 4: what model calls cost, at the prices the run began with, and which model wrote each node.
    {3,
     "ALTER TABLE runs ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;"
     "ALTER TABLE runs ADD COLUMN llm_prices TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE nodes ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;"
     "ALTER TABLE nodes ADD COLUMN model TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE mutator_calls ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;"
     "ALTER TABLE mutator_calls ADD COLUMN model TEXT NOT NULL DEFAULT ''"},
    // 5: the requests of rounds, which ask the model in batches (rounds.hpp), and the answers they took.
    {4, kRoundTables.c_str()},
};

}  // namespace kernelevolve::store
