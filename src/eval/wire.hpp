// The worker protocol: length-prefixed JSON frames over a Unix socket that the worker keeps apart from
// its standard output and error, so nothing a kernel prints can corrupt it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernelevolve/candidate.hpp"
#include "kernelevolve/device.hpp"
#include "kernelevolve/fitness.hpp"

namespace kernelevolve::wire {

// The fd the worker reads and writes its frames on (a socket the host passes it).
constexpr int kWorkerFd = 3;

// Writes one frame; false if the peer is gone. Never raises SIGPIPE.
bool write_frame(int fd, const std::string& payload);
enum class ReadStatus { ok, closed, timeout, error };
// Reads one frame, waiting at most timeout_ms (negative: forever).
ReadStatus read_frame(int fd, std::string& payload, int timeout_ms);

std::string to_json(const Evaluation& evaluation);
Evaluation evaluation_from_json(const std::string& json);
std::string to_json(const DeviceInfo& info);
DeviceInfo device_info_from_json(const std::string& json);
std::string to_json(const Candidate& candidate);
Candidate candidate_from_json(const std::string& json);
std::string to_json(const EvalOptions& options);
EvalOptions eval_options_from_json(const std::string& json);

}  // namespace kernelevolve::wire
