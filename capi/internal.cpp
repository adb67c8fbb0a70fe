// What capi/internal.hpp declares and every family of entry points shares: the error plumbing under guard()
// (the calling thread's last error), the argument checks and the conversions.
#include "internal.hpp"

#include <cerrno>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace capi {

namespace {

thread_local std::string t_last_error;

}  // namespace

[[noreturn]] void fail(ke_status status, std::string message) { throw Failure{status, std::move(message)}; }

ke_status record(ke_status status, const char* function, const std::string& message) noexcept {
  try {
    t_last_error = std::string(function) + ": " + message;
  } catch (...) {
    t_last_error.clear();  // out of memory: an empty message is better than none at all
  }
  return status;
}

const char* last_error() noexcept { return t_last_error.c_str(); }

ke_status status_of(ke::ErrorCode code) {
  switch (code) {
    case ke::ErrorCode::BadSpec: return KE_ERROR_BAD_SPEC;
    case ke::ErrorCode::BadUsage: return KE_ERROR_INVALID_ARGUMENT;
    case ke::ErrorCode::DeviceUnavailable: return KE_ERROR_DEVICE_UNAVAILABLE;
    default: return KE_ERROR_INTERNAL;
  }
}

std::string need_string(const char* text, const char* name) {
  if (!text) fail(KE_ERROR_INVALID_ARGUMENT, std::string("'") + name + "' is NULL");
  return text;
}

std::string need_nonempty(const char* text, const char* name) {
  std::string s = need_string(text, name);
  if (s.empty()) fail(KE_ERROR_INVALID_ARGUMENT, std::string("'") + name + "' is empty");
  return s;
}

void need_finite(double x, const char* name) {
  if (!std::isfinite(x)) fail(KE_ERROR_INVALID_ARGUMENT, std::string("'") + name + "' is not a finite number");
}

void need_version(unsigned int version, unsigned int newest, const char* what) {
  if (version < 1 || version > newest) {
    fail(KE_ERROR_INVALID_ARGUMENT, std::string(what) + " version " + std::to_string(version) +
                                        " is not known to this library (it knows 1 to " + std::to_string(newest) +
                                        "); initialise it with its _INIT macro or _init function");
  }
}

ke_eval_status to_c(ke::Status s) {
  switch (s) {
    case ke::Status::pending: return KE_EVAL_PENDING;
    case ke::Status::ok: return KE_EVAL_OK;
    case ke::Status::compile_error: return KE_EVAL_COMPILE_ERROR;
    case ke::Status::incorrect: return KE_EVAL_INCORRECT;
    case ke::Status::crashed: return KE_EVAL_CRASHED;
    case ke::Status::timeout: return KE_EVAL_TIMEOUT;
    case ke::Status::invalid: return KE_EVAL_INVALID;
  }
  return KE_EVAL_PENDING;
}

std::optional<ke::Status> from_c(ke_eval_status s) {
  switch (s) {
    case KE_EVAL_PENDING: return ke::Status::pending;
    case KE_EVAL_OK: return ke::Status::ok;
    case KE_EVAL_COMPILE_ERROR: return ke::Status::compile_error;
    case KE_EVAL_INCORRECT: return ke::Status::incorrect;
    case KE_EVAL_CRASHED: return ke::Status::crashed;
    case KE_EVAL_TIMEOUT: return ke::Status::timeout;
    case KE_EVAL_INVALID: return ke::Status::invalid;
    case KE_EVAL_MAX_ENUM: break;
  }
  return std::nullopt;
}

ke::Status need_status(ke_eval_status s, const char* name) {
  const auto status = from_c(s);
  if (!status)
    fail(KE_ERROR_INVALID_ARGUMENT,
         std::string("'") + name + "' is not a ke_eval_status (" + std::to_string(static_cast<long long>(s)) + ")");
  return *status;
}

// Checked without opening the file, so that a FIFO is not waited on here (the reader opens it after).
void need_readable_file(const std::string& path, const char* what) {
  const std::string where = std::string("cannot read ") + what + " '" + path + "': ";
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || ::access(path.c_str(), R_OK) != 0) {
    fail(KE_ERROR_INTERNAL, where + std::generic_category().message(errno));
  }
  if (S_ISDIR(info.st_mode)) fail(KE_ERROR_INTERNAL, where + "it is a directory");
}

std::string read_file(const std::string& path) {
  need_readable_file(path, "the source file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(KE_ERROR_INTERNAL, "cannot read the source file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace capi
