// What the tests that drive the command-line tool share: running it as a user does (its exit code, stdout
// and stderr), and a temporary folder that is gone when the test is.
#pragma once
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace ke_test {

struct CliOutcome {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// A fresh folder under the system's temporary one, named for this process and the caller's prefix.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "ke_test") {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           (prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The command-line tool (KE_CLI) with `args`, through the shell, stderr kept apart from stdout; `env`, if
// not empty, is put before it (`KE_DEVICE_MEMORY=8M`).
inline CliOutcome run_cli_in(const std::string& env, const std::string& args) {
  static std::atomic<int> counter{0};
  const std::string err_file = (std::filesystem::temp_directory_path() /
                                ("ke_cli_err_" + std::to_string(getpid()) + "_" + std::to_string(counter++)))
                                   .string();
  CliOutcome o;
  FILE* p = popen((env + (env.empty() ? "" : " ") + std::string(KE_CLI) + " " + args + " 2>" + err_file).c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
  const int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_file);
  o.err.assign(std::istreambuf_iterator<char>(err), {});
  std::filesystem::remove(err_file);
  return o;
}

inline CliOutcome run_cli(const std::string& args) { return run_cli_in("", args); }

}  // namespace ke_test
