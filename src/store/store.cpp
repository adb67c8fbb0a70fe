// The SQLite store opened: the connection, its pragmas, the schema made for a new file or migrated for an
// older one (schema.cpp), the statements prepared (statements.hpp); the file's version and integrity.
// What the store does once open: store_write.cpp (runs and nodes committed), store_read.cpp (runs, calls and
// measurements read), resume.cpp (a run's graph loaded and taken up again), model_requests.cpp (rounds);
// the Observer that records a run, recorder.cpp; the evaluator that reuses measurements, reusing_evaluator.cpp.
#include "kernelevolve/store.hpp"

#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "kernelevolve/error.hpp"
#include "store/schema.hpp"
#include "store/statements.hpp"

namespace kernelevolve {

using store::kApplicationId;
using store::kMigrations;
using store::kSchema;
using store::Migration;
using store::Stmt;
using store::Transaction;

std::string default_store_path(const std::string& spec_path) { return spec_path + ".kernelevolve.db"; }

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
        exec(kSchema.c_str());
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

std::string Store::integrity_check() const {
  std::lock_guard lock(mutex_);
  Stmt s(db_, "PRAGMA integrity_check");
  std::string out;
  while (s.step()) out += (out.empty() ? "" : "\n") + s.text(0);
  Stmt fk(db_, "PRAGMA foreign_key_check");
  while (fk.step()) out += "\nforeign key violation in " + fk.text(0) + " row " + std::to_string(fk.i64(1));
  return out;
}

}  // namespace kernelevolve
