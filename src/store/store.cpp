// The SQLite store: schema, versioning and migration, committing nodes as they are evaluated, loading
// and resuming runs, and finding earlier measurements of a candidate.
#include "kernelevolve/store.hpp"

#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <simdjson.h>
#include <sstream>
#include <thread>

#include "eval/wire.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/json.hpp"
#include "kernelevolve/report.hpp"

namespace kernelevolve {

namespace {

// 'KEvo': marks a database as ours, so that a stranger's SQLite file is refused, not written into.
constexpr int kApplicationId = 0x4b45766f;

// The schema as of Store::kSchemaVersion, for a new database. Every later version adds a migration below
// (taking an older file to it) and bumps Store::kSchemaVersion.
const char* kSchema = R"sql(
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

// Version 5's tables, for a file migrated from an older one.
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

// Migrations, in order: each takes a database from `from` to `from + 1` in the transaction that opens it.
struct Migration {
  int from;
  const char* sql;
};
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

const char* kNodeColumns =
    "uid, seq, key, source_id, language, tunables, mutator, note, status, message, compile_log, compile_ms, worst, "
    "resources, speedup, created_s, tokens, mutation_s, device, cost_usd, model";

std::uint64_t fnv1a64(const std::string& text, std::uint64_t hash = 0xcbf29ce484222325ULL) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string text_hash(const std::string& text) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu:%016llx%016llx", text.size(), static_cast<unsigned long long>(fnv1a64(text)),
                static_cast<unsigned long long>(fnv1a64(text, 0x84222325cbf29ce4ULL ^ text.size())));
  return buf;
}

std::string number(double x) {
  if (!std::isfinite(x)) return x > 0 ? "1e308" : (x < 0 ? "-1e308" : "null");
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

std::string int_map_json(const std::map<std::string, std::int64_t>& m) {
  std::string out = "{";
  for (const auto& [k, v] : m) out += (out.size() > 1 ? ", " : "") + json_quote(k) + ": " + std::to_string(v);
  return out + "}";
}

std::string ids_json(const std::vector<std::int64_t>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

std::string mismatch_json(const Mismatch& m) {
  return "{\"buffer\": " + json_quote(m.buffer) + ", \"workload\": " + std::to_string(m.workload) +
         ", \"trial\": " + std::to_string(m.trial) + ", \"index\": " + std::to_string(m.index) +
         ", \"got\": " + number(m.got) + ", \"expected\": " + number(m.expected) + ", \"excess\": " + number(m.excess) +
         "}";
}

double json_double(simdjson::dom::element e) {
  double d;
  if (e.get_double().get(d) == simdjson::SUCCESS) return d;
  std::int64_t i;
  if (e.get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
  return NAN;  // null: a NaN that was stored
}

std::map<std::string, std::int64_t> parse_int_map(simdjson::dom::parser& parser, const std::string& json) {
  std::map<std::string, std::int64_t> out;
  simdjson::dom::object obj;
  if (parser.parse(json).get_object().get(obj) != simdjson::SUCCESS) return out;
  for (auto [k, v] : obj) {
    std::int64_t x = 0;
    if (v.get_int64().get(x) == simdjson::SUCCESS) out[std::string(k)] = x;
  }
  return out;
}

// A run's prices as stored: {"model": [input, output], ...}, US dollars per million tokens.
std::string prices_json(const std::map<std::string, LlmPrice>& prices) {
  std::string out = "{";
  for (const auto& [model, p] : prices) {
    out += (out.size() > 1 ? ", " : "") + json_quote(model) + ": [" + number(p.input_per_mtok) + ", " +
           number(p.output_per_mtok) + "]";
  }
  return out + "}";
}

std::map<std::string, LlmPrice> parse_prices(const std::string& json) {
  std::map<std::string, LlmPrice> out;
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  if (json.empty() || parser.parse(json).get_object().get(obj) != simdjson::SUCCESS) return out;
  for (auto [model, v] : obj) {
    simdjson::dom::array pair;
    if (v.get_array().get(pair) != simdjson::SUCCESS || pair.size() != 2) continue;
    out[std::string(model)] = {json_double(pair.at(0).value_unsafe()), json_double(pair.at(1).value_unsafe())};
  }
  return out;
}

std::vector<std::int64_t> parse_ids(simdjson::dom::parser& parser, const std::string& json) {
  std::vector<std::int64_t> out;
  simdjson::dom::array arr;
  if (parser.parse(json).get_array().get(arr) != simdjson::SUCCESS) return out;
  for (auto v : arr) {
    std::int64_t x = 0;
    if (v.get_int64().get(x) == simdjson::SUCCESS) out.push_back(x);
  }
  return out;
}

std::optional<Mismatch> parse_mismatch(simdjson::dom::parser& parser, const std::string& json) {
  simdjson::dom::element w;
  if (json.empty() || parser.parse(json).get(w) != simdjson::SUCCESS) return std::nullopt;
  Mismatch m;
  std::string_view buffer;
  if (w["buffer"].get_string().get(buffer) == simdjson::SUCCESS) m.buffer = buffer;
  std::int64_t i = 0;
  if (w["workload"].get_int64().get(i) == simdjson::SUCCESS) m.workload = static_cast<std::size_t>(i);
  if (w["trial"].get_int64().get(i) == simdjson::SUCCESS) m.trial = static_cast<int>(i);
  if (w["index"].get_int64().get(i) == simdjson::SUCCESS) m.index = i;
  m.got = json_double(w["got"].value_unsafe());
  m.expected = json_double(w["expected"].value_unsafe());
  m.excess = json_double(w["excess"].value_unsafe());
  return m;
}

// A prepared statement, reset for reuse when it goes out of scope of a use.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) != SQLITE_OK) {
      throw Error(ErrorCode::Internal, std::string("store: cannot prepare a statement: ") + sqlite3_errmsg(db));
    }
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return *this;
  }
  Stmt& bind(int i, std::int64_t v) { return check(sqlite3_bind_int64(stmt_, i, v)); }
  Stmt& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Stmt& bind(int i, double v) {
    return check(std::isfinite(v) ? sqlite3_bind_double(stmt_, i, v) : sqlite3_bind_null(stmt_, i));
  }
  Stmt& bind(int i, const std::string& v) {
    return check(sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  Stmt& bind(int i, const char* v) { return bind(i, std::string(v)); }
  Stmt& bind_null(int i) { return check(sqlite3_bind_null(stmt_, i)); }
  template <class T>
  Stmt& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }

  // True while there is a row.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw Error(ErrorCode::Internal, std::string("store: ") + sqlite3_errmsg(db_));
  }
  void run() {
    while (step()) {
    }
    sqlite3_reset(stmt_);
  }

  std::int64_t i64(int c) const { return sqlite3_column_int64(stmt_, c); }
  double f64(int c) const {
    return sqlite3_column_type(stmt_, c) == SQLITE_NULL ? NAN : sqlite3_column_double(stmt_, c);
  }
  bool null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  std::string text(int c) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, c));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, c))) : std::string();
  }

 private:
  Stmt& check(int rc) {
    if (rc != SQLITE_OK) throw Error(ErrorCode::Internal, std::string("store: cannot bind: ") + sqlite3_errmsg(db_));
    return *this;
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back if the scope is left by an exception.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { exec("BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec("COMMIT");
    done_ = true;
  }

 private:
  void exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string message = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      throw Error(ErrorCode::Internal, std::string("store: ") + sql + ": " + message);
    }
  }
  sqlite3* db_;
  bool done_ = false;
};

std::string spec_json_without(Spec spec, bool keep_search_space) {
  if (!keep_search_space) {
    spec.name.clear();
    spec.family.clear();
    spec.notes.clear();
    spec.tunables.clear();
    spec.constraints.clear();
    spec.seed = SourceRef{};
    spec.seed.source = " ";  // validate-free: to_json only writes it
  }
  return to_json(spec);
}

}  // namespace

std::string spec_hash(const Spec& spec) { return text_hash(spec_json_without(spec, true)); }
std::string measurement_hash(const Spec& spec) { return text_hash(spec_json_without(spec, false)); }

std::string default_store_path(const std::string& spec_path) { return spec_path + ".kernelevolve.db"; }

struct Store::Statements {
  Stmt insert_node, update_node, find_node, insert_edge, insert_timing, insert_call, update_progress, find_source,
      insert_source;
  explicit Statements(sqlite3* db)
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
};

Store::Store(const std::string& path, Mode mode) : path_(path) {
  const int flags = mode == Mode::read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (mode == Mode::read_only && !std::filesystem::exists(path)) {
    throw Error(ErrorCode::BadUsage, "no database at " + path);
  }
  // Opening is tried again while SQLite answers "busy" without waiting: a new file's switch to WAL, or its
  // recovery, while another run opens it too (optimize's regions over devices or MPI ranks).
  for (int attempt = 1;; ++attempt) {
    if (sqlite3_open_v2(path.c_str(), &db_, flags | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
      const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw Error(ErrorCode::Internal, "cannot open the database " + path + ": " + why);
    }
    try {
      initialize(mode);
      return;
    } catch (...) {
      const bool busy = (sqlite3_errcode(db_) & 0xff) == SQLITE_BUSY;
      st_.reset();
      sqlite3_close_v2(db_);
      db_ = nullptr;
      if (!busy || attempt >= 200) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10 + 5 * (attempt % 10)));
  }
}

// The pragmas, the schema (made or migrated) and the statements of a just-opened connection.
void Store::initialize(Mode mode) {
  const std::string& path = path_;
  sqlite3_busy_timeout(db_, 30000);  // another run writing to the same file: wait for it
  exec("PRAGMA foreign_keys = ON");
  auto pragma = [&](const char* sql) {
    Stmt s(db_, sql);
    return s.step() ? s.i64(0) : 0;
  };
  std::int64_t tables = 0;
  try {
    tables = pragma("SELECT count(*) FROM sqlite_master");
  } catch (const Error&) {
    throw Error(ErrorCode::BadUsage, path + " is not a KernelEvolve database (not an SQLite file)");
  }
  const std::int64_t app = pragma("PRAGMA application_id");
  const std::int64_t version = pragma("PRAGMA user_version");
  const auto other_tables = [&] {
    return Error(ErrorCode::BadUsage,
                 path + " is not a KernelEvolve database (it holds other tables); give --db another file");
  };
  if (tables > 0 && app != kApplicationId) throw other_tables();
  if (version > kSchemaVersion) {
    throw Error(ErrorCode::BadUsage, path + " has schema version " + std::to_string(version) +
                                         ", written by a newer KernelEvolve; this one reads versions up to " +
                                         std::to_string(kSchemaVersion) +
                                         ". Upgrade KernelEvolve, or use another database");
  }
  if (tables > 0 && version < kSchemaVersion) {
    int at = static_cast<int>(version);
    std::vector<const Migration*> steps;
    for (const Migration& m : kMigrations) {
      if (m.from == at) {
        steps.push_back(&m);
        ++at;
      }
    }
    if (at != kSchemaVersion) {
      throw Error(ErrorCode::BadUsage, path + " has schema version " + std::to_string(version) +
                                           ", older than any this KernelEvolve can migrate (it uses version " +
                                           std::to_string(kSchemaVersion) + "); start a new database");
    }
    if (mode == Mode::read_only) {
      throw Error(ErrorCode::BadUsage,
                  path + " has schema version " + std::to_string(version) + "; version " +
                      std::to_string(kSchemaVersion) +
                      " is needed: open it for writing once (kernelevolve run --db) to migrate it");
    }
    Transaction tx(db_);
    // Another process may have migrated it between our read and this write lock: migrate only what is left.
    if (pragma("PRAGMA user_version") == version) {
      for (const Migration* m : steps) exec(m->sql);
      exec(("PRAGMA user_version = " + std::to_string(kSchemaVersion)).c_str());
    }
    tx.commit();
  }
  if (mode == Mode::read_write) {
    // WAL: readers never block the writer, and each commit is one append; with synchronous NORMAL a
    // commit survives the death of the process (kill -9) though not a power cut (set_durable).
    {
      Stmt wal(db_, "PRAGMA journal_mode = WAL");
      if (!wal.step() || wal.text(0) != "wal") throw Error(ErrorCode::Internal, "cannot put " + path + " in WAL mode");
    }
    exec("PRAGMA synchronous = NORMAL");
    if (tables == 0) {
      Transaction tx(db_);
      // Several runs may open one new file at once (optimize's regions over devices or MPI ranks): the first to
      // hold the write lock makes the tables, the others find them made.
      if (pragma("SELECT count(*) FROM sqlite_master") == 0) {
        exec(kSchema);
        exec(("PRAGMA application_id = " + std::to_string(kApplicationId)).c_str());
        exec(("PRAGMA user_version = " + std::to_string(kSchemaVersion)).c_str());
      } else if (pragma("PRAGMA application_id") != kApplicationId) {
        throw other_tables();
      }
      tx.commit();
    }
  } else if (tables == 0) {
    throw Error(ErrorCode::BadUsage, path + " is not a KernelEvolve database (it is empty)");
  }
  st_ = std::make_unique<Statements>(db_);
}

Store::~Store() {
  st_.reset();
  if (db_) sqlite3_close_v2(db_);
}

void Store::exec(const char* sql) const {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string message = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw Error(ErrorCode::Internal, "store " + path_ + ": " + message);
  }
}

void Store::set_durable(bool durable) {
  std::lock_guard lock(mutex_);
  exec(durable ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
}

int Store::file_schema_version(const std::string& path) {
  if (!std::filesystem::exists(path)) return 0;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    throw Error(ErrorCode::Internal, "cannot open the database " + path);
  }
  int version = 0;
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
    version = sqlite3_column_int(s, 0);
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return version;
}

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

namespace {

struct LoadedNode {
  std::int64_t uid;
  Node node;
};

}  // namespace

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

void Store::add_model_request(RunId run, const ModelRequest& r) {
  std::lock_guard lock(mutex_);
  Stmt s(db_,
         "INSERT INTO model_requests(run_id, request_id, prefix, round, seq, parent, model, prompt, body, state, "
         "outcome) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, run).bind(2, r.id).bind(3, r.prefix).bind(4, r.round).bind(5, r.seq).bind(6, r.parent);
  s.bind(7, r.model).bind(8, r.prompt).bind(9, r.body).bind(10, r.state).bind(11, r.outcome).run();
}

std::vector<ModelRequest> Store::model_requests(RunId run) const {
  std::lock_guard lock(mutex_);
  Stmt s(db_,
         "SELECT request_id, prefix, round, seq, parent, model, prompt, body, state, outcome FROM model_requests "
         "WHERE run_id = ? ORDER BY seq");
  s.bind(1, run);
  std::vector<ModelRequest> out;
  while (s.step()) {
    ModelRequest r;
    r.id = s.text(0);
    r.prefix = s.text(1);
    r.round = s.i64(2);
    r.seq = s.i64(3);
    r.parent = s.i64(4);
    r.model = s.text(5);
    r.prompt = s.text(6);
    r.body = s.text(7);
    r.state = s.text(8);
    r.outcome = s.text(9);
    out.push_back(std::move(r));
  }
  return out;
}

void Store::settle_model_request(RunId run, const std::string& id, const std::string& state,
                                 const std::string& outcome) {
  std::lock_guard lock(mutex_);
  Stmt s(db_, "UPDATE model_requests SET state = ?3, outcome = ?4 WHERE run_id = ?1 AND request_id = ?2");
  s.bind(1, run).bind(2, id).bind(3, state).bind(4, outcome).run();
}

void Store::record_model_answer(RunId run, const ModelAnswerRecord& a) {
  std::lock_guard lock(mutex_);
  Stmt s(db_, "INSERT INTO model_answers(run_id, request_id, source, outcome) VALUES(?, ?, ?, ?)");
  s.bind(1, run).bind(2, a.request_id).bind(3, a.source).bind(4, a.outcome).run();
}

std::vector<ModelAnswerRecord> Store::model_answers(RunId run) const {
  std::lock_guard lock(mutex_);
  Stmt s(db_, "SELECT request_id, source, outcome FROM model_answers WHERE run_id = ? ORDER BY id");
  s.bind(1, run);
  std::vector<ModelAnswerRecord> out;
  while (s.step()) out.push_back({s.text(0), s.text(1), s.text(2)});
  return out;
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

std::string Store::source_hash(const std::string& text) { return text_hash(text); }

std::string Store::integrity_check() const {
  std::lock_guard lock(mutex_);
  Stmt s(db_, "PRAGMA integrity_check");
  std::string out;
  while (s.step()) out += (out.empty() ? "" : "\n") + s.text(0);
  Stmt fk(db_, "PRAGMA foreign_key_check");
  while (fk.step()) out += "\nforeign key violation in " + fk.text(0) + " row " + std::to_string(fk.i64(1));
  return out;
}

// ---- StoreRecorder ----------------------------------------------------------------------------------

StoreRecorder::StoreRecorder(std::shared_ptr<Store> store, RunId run, ReusingEvaluator* reuse)
    : store_(std::move(store)), run_(run), reuse_(reuse), start_(std::chrono::steady_clock::now()) {
  if (!store_) throw Error(ErrorCode::BadUsage, "StoreRecorder: no store");
  const RunInfo info = store_->run(run);
  mutator_ = info.settings.mutator;
  elapsed_before_ = info.elapsed_s;
}

void StoreRecorder::on_start(const Spec&, const DeviceInfo&) { start_ = std::chrono::steady_clock::now(); }

void StoreRecorder::on_node(const Node& node, const SearchState& state) {
  std::optional<std::int64_t> from;
  if (reuse_) from = reuse_->reused_from(node.candidate);
  store_->record_node(run_, node, state, from);
}

void StoreRecorder::on_mutator_call(const Mutation& m, const std::vector<NodeId>& parents, double seconds) {
  // A child is recorded with its node; running out is not a failure, nor a request kept for a round.
  if (m.child || m.exhausted || m.deferred) return;
  const double now = elapsed_before_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  store_->record_mutator_failure(run_, mutator_, m, parents, now, seconds);
}

void StoreRecorder::on_finish(const RunResult& result, const SearchGraph&) { store_->finish_run(run_, result); }

// ---- ReusingEvaluator -------------------------------------------------------------------------------

ReusingEvaluator::ReusingEvaluator(std::shared_ptr<FitnessEvaluator> inner, std::shared_ptr<Store> store,
                                   const Spec& spec)
    : inner_(std::move(inner)), store_(std::move(store)), measurement_hash_(measurement_hash(spec)) {
  if (!inner_ || !store_) throw Error(ErrorCode::BadUsage, "ReusingEvaluator: an evaluator and a store are required");
}

DeviceInfo ReusingEvaluator::device_info() { return inner_->device_info(); }

std::vector<std::string> ReusingEvaluator::device_classes() { return inner_->device_classes(); }

CounterResult ReusingEvaluator::hardware_counters(const Candidate& candidate, std::uint64_t input_seed) {
  return inner_->hardware_counters(candidate, input_seed);
}

Evaluation ReusingEvaluator::measure_again(std::size_t device_class_index, const Candidate& candidate,
                                           std::uint64_t input_seed) {
  return inner_->measure_again(device_class_index, candidate, input_seed);
}

std::optional<Evaluation> ReusingEvaluator::from_store(const std::string& device_class, const Candidate& candidate) {
  auto found = store_->find_measurement(measurement_hash_, device_class, candidate);
  if (!found) return std::nullopt;
  {
    std::lock_guard lock(mutex_);
    reused_[candidate.key()] = found->uid;
  }
  Evaluation e = std::move(found->evaluation);
  const std::string note =
      "measured before, by run " + std::to_string(found->run) + " node " + std::to_string(found->node);
  if (e.message.find("measured before, by run") == std::string::npos) {
    e.message = e.message.empty() ? note : e.message + " (" + note + ")";
  }
  return e;
}

Evaluation ReusingEvaluator::evaluate(const Candidate& candidate, std::uint64_t input_seed) {
  if (auto e = from_store(device_class(inner_->device_info()), candidate)) return std::move(*e);
  return inner_->evaluate(candidate, input_seed);
}

Evaluation ReusingEvaluator::evaluate_on(std::size_t device_class_index, const Candidate& candidate,
                                         std::uint64_t input_seed) {
  const auto classes = inner_->device_classes();
  if (device_class_index < classes.size()) {
    if (auto e = from_store(classes[device_class_index], candidate)) return std::move(*e);
  }
  return inner_->evaluate_on(device_class_index, candidate, input_seed);
}

std::optional<std::int64_t> ReusingEvaluator::reused_from(const Candidate& candidate) const {
  std::lock_guard lock(mutex_);
  const auto it = reused_.find(candidate.key());
  if (it == reused_.end()) return std::nullopt;
  return it->second;
}

std::int64_t ReusingEvaluator::reused() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::int64_t>(reused_.size());
}

}  // namespace kernelevolve
