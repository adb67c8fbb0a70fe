// The store's statements: a prepared statement (Stmt), a write transaction (Transaction), and the
// statements a Store prepares once, when it opens, for what it does per node (Store::Statements).
#pragma once
#include <sqlite3.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "kernelevolve/error.hpp"
#include "kernelevolve/store.hpp"

namespace kernelevolve {

namespace store {

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

}  // namespace store

// Prepared once per connection: the statements each recorded node runs.
struct Store::Statements {
  store::Stmt insert_node, update_node, find_node, insert_edge, insert_timing, insert_call, update_progress,
      find_source, insert_source;
  explicit Statements(sqlite3* db);
};

}  // namespace kernelevolve
