// kernelevolve::Error: thrown by the public C++ API for misuse and bad input only.
// Expected outcomes of a search (a candidate that does not compile, answers wrong or crashes)
// are data on the node, never exceptions.
#pragma once
#include <stdexcept>
#include <string>

namespace kernelevolve {

enum class ErrorCode {
  BadSpec = 2,            // the spec (file or C++-built) is invalid; the CLI exits 2
  BadUsage = 20,          // an argument or option is wrong; the CLI exits 2
  DeviceUnavailable = 3,  // the device asked for is absent or cannot start; the CLI exits 3
  Internal = 1,           // anything else
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }
  // The exit code the command-line tool uses for this error.
  int exit_code() const noexcept {
    switch (code_) {
      case ErrorCode::BadSpec:
      case ErrorCode::BadUsage: return 2;
      case ErrorCode::DeviceUnavailable: return 3;
      default: return 1;
    }
  }

 private:
  ErrorCode code_;
};

}  // namespace kernelevolve
