// The store's schema for a new database, and the migrations that take an older file to it: what
// Store's constructor (store.cpp) makes or migrates a file with.
#pragma once
#include <string>
#include <vector>

namespace kernelevolve::store {

// 'KEvo': marks a database as ours, so that a stranger's SQLite file is refused, not written into.
constexpr int kApplicationId = 0x4b45766f;

// The schema as of Store::kSchemaVersion, for a new database (schema.cpp).
extern const std::string kSchema;

// Migrations, in order: each takes a database from `from` to `from + 1` in the transaction that opens it.
struct Migration {
  int from;
  const char* sql;
};
extern const std::vector<Migration> kMigrations;

}  // namespace kernelevolve::store
