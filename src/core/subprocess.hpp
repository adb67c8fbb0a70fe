// Running an external command through the shell with a request on its standard input, a time limit,
// and both output streams captured: the command mutator, and Nsight Compute collecting counters.
#pragma once
#include <cstddef>
#include <string>

namespace kernelevolve {

struct ProcessResult {
  bool started = false;
  std::string start_error;
  bool timed_out = false;
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  std::string out;
  std::string err;
  // Bytes the command wrote past max_output, dropped: an answer cut short must be said, never used as whole.
  std::size_t out_dropped = 0;
  std::size_t err_dropped = 0;
};

// `s` as one word for /bin/sh: in single quotes, each quote in it closed, escaped and reopened.
std::string shell_quote(const std::string& s);

// Runs `/bin/sh -c command` in its own process group, writes `input` to its stdin and closes it,
// collects stdout and stderr (each capped at max_output bytes), and kills the whole group after
// timeout_s. Never raises SIGPIPE in the caller.
ProcessResult run_shell(const std::string& command, const std::string& input, double timeout_s,
                        std::size_t max_output = 16u << 20);

}  // namespace kernelevolve
