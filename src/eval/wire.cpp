#include "eval/wire.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <simdjson.h>
#include <sstream>
#include <utility>

#include "kernelevolve/error.hpp"
#include "kernelevolve/json.hpp"

namespace kernelevolve::wire {

namespace {

bool write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// Reads exactly n bytes before the deadline.
ReadStatus read_all(int fd, char* data, std::size_t n, std::chrono::steady_clock::time_point deadline, bool forever) {
  while (n > 0) {
    int wait_ms = -1;
    if (!forever) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return ReadStatus::timeout;
      wait_ms = static_cast<int>(std::min<long long>(left.count(), 1 << 30));
    }
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, wait_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ReadStatus::error;
    }
    if (r == 0) return ReadStatus::timeout;
    const ssize_t got = ::recv(fd, data, n, 0);
    if (got == 0) return ReadStatus::closed;
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return errno == ECONNRESET ? ReadStatus::closed : ReadStatus::error;
    }
    data += got;
    n -= static_cast<std::size_t>(got);
  }
  return ReadStatus::ok;
}

std::string number(double x) {
  if (!std::isfinite(x)) return std::isnan(x) ? "\"nan\"" : (x > 0 ? "\"inf\"" : "\"-inf\"");
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

double as_double(simdjson::dom::element e) {
  double d;
  if (e.get_double().get(d) == simdjson::SUCCESS) return d;
  std::int64_t i;
  if (e.get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS) {
    if (s == "nan") return NAN;
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  throw Error(ErrorCode::Internal, "worker protocol: a number was expected");
}

simdjson::dom::element parse(simdjson::dom::parser& parser, const std::string& json) {
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) {
    throw Error(ErrorCode::Internal, "worker protocol: a message is not JSON");
  }
  return doc;
}

std::string str(simdjson::dom::element e) { return std::string(e.get_string().value()); }

}  // namespace

bool write_frame(int fd, const std::string& payload) {
  const std::uint32_t n = static_cast<std::uint32_t>(payload.size());
  unsigned char header[4] = {static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
                             static_cast<unsigned char>(n >> 16), static_cast<unsigned char>(n >> 24)};
  return write_all(fd, reinterpret_cast<const char*>(header), 4) && write_all(fd, payload.data(), payload.size());
}

ReadStatus read_frame(int fd, std::string& payload, int timeout_ms) {
  const bool forever = timeout_ms < 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(forever ? 0 : timeout_ms);
  unsigned char header[4];
  ReadStatus s = read_all(fd, reinterpret_cast<char*>(header), 4, deadline, forever);
  if (s != ReadStatus::ok) return s;
  const std::uint32_t n =
      header[0] | (header[1] << 8) | (header[2] << 16) | (static_cast<std::uint32_t>(header[3]) << 24);
  if (n > (1u << 30)) return ReadStatus::error;
  payload.assign(n, '\0');
  return read_all(fd, payload.data(), n, deadline, forever);
}

std::string to_json(const Evaluation& e) {
  std::ostringstream out;
  out << "{\"status\": " << json_quote(to_string(e.status)) << ", \"message\": " << json_quote(e.message)
      << ", \"compile_log\": " << json_quote(e.compile_log) << ", \"compile_ms\": " << number(e.compile_ms)
      << ", \"timings\": [";
  for (std::size_t i = 0; i < e.timings.size(); ++i) {
    const auto& t = e.timings[i];
    out << (i ? ", " : "") << "[" << number(t.median_us) << ", " << number(t.min_us) << ", " << number(t.max_us) << ", "
        << number(t.mad_us) << ", " << t.samples << "]";
  }
  out << "], \"device\": " << json_quote(e.device)
      << ", \"resources\": " << json_object(Bindings(e.resources.begin(), e.resources.end()));
  if (e.worst) {
    const Mismatch& m = *e.worst;
    out << ", \"worst\": {\"buffer\": " << json_quote(m.buffer) << ", \"workload\": " << m.workload
        << ", \"trial\": " << m.trial << ", \"index\": " << m.index << ", \"got\": " << number(m.got)
        << ", \"expected\": " << number(m.expected) << ", \"excess\": " << number(m.excess) << "}";
  }
  out << "}";
  return out.str();
}

Evaluation evaluation_from_json(const std::string& json) {
  simdjson::dom::parser parser;
  const auto doc = parse(parser, json);
  Evaluation e;
  const auto status = parse_status(str(doc["status"]));
  if (!status) throw Error(ErrorCode::Internal, "worker protocol: unknown status");
  e.status = *status;
  e.message = str(doc["message"]);
  e.compile_log = str(doc["compile_log"]);
  e.compile_ms = as_double(doc["compile_ms"]);
  e.device = str(doc["device"]);
  for (auto t : doc["timings"].get_array()) {
    const auto a = t.get_array().value();
    e.timings.push_back({as_double(a.at(0)), as_double(a.at(1)), as_double(a.at(2)), as_double(a.at(3)),
                         static_cast<int>(a.at(4).get_int64().value())});
  }
  for (auto [k, v] : doc["resources"].get_object()) e.resources[std::string(k)] = v.get_int64().value();
  simdjson::dom::element w;
  if (doc["worst"].get(w) == simdjson::SUCCESS) {
    Mismatch m;
    m.buffer = str(w["buffer"]);
    m.workload = static_cast<std::size_t>(w["workload"].get_int64().value());
    m.trial = static_cast<int>(w["trial"].get_int64().value());
    m.index = w["index"].get_int64().value();
    m.got = as_double(w["got"]);
    m.expected = as_double(w["expected"]);
    m.excess = as_double(w["excess"]);
    e.worst = m;
  }
  return e;
}

std::string to_json(const DeviceInfo& d) {
  std::ostringstream out;
  out << "{\"id\": " << json_quote(d.id) << ", \"kind\": " << json_quote(d.kind) << ", \"name\": " << json_quote(d.name)
      << ", \"compute_units\": " << d.compute_units << ", \"vector_bits\": " << d.vector_bits
      << ", \"peak_bytes_per_s\": " << number(d.peak_bytes_per_s)
      << ", \"peak_flops_per_s\": " << number(d.peak_flops_per_s)
      << ", \"floor_bytes_per_s\": " << number(d.floor_bytes_per_s)
      << ", \"bf16_tensor_flops_per_s\": " << number(d.bf16_tensor_flops_per_s)
      << ", \"fp16_tensor_flops_per_s\": " << number(d.fp16_tensor_flops_per_s) << ", \"properties\": {";
  bool first = true;
  for (const auto& [k, v] : d.properties) {
    out << (first ? "" : ", ") << json_quote(k) << ": " << json_quote(v);
    first = false;
  }
  out << "}}";
  return out.str();
}

DeviceInfo device_info_from_json(const std::string& json) {
  simdjson::dom::parser parser;
  const auto doc = parse(parser, json);
  DeviceInfo d;
  d.id = str(doc["id"]);
  d.kind = str(doc["kind"]);
  d.name = str(doc["name"]);
  d.compute_units = static_cast<int>(doc["compute_units"].get_int64().value());
  d.vector_bits = static_cast<int>(doc["vector_bits"].get_int64().value());
  d.peak_bytes_per_s = as_double(doc["peak_bytes_per_s"]);
  d.peak_flops_per_s = as_double(doc["peak_flops_per_s"]);
  d.floor_bytes_per_s = as_double(doc["floor_bytes_per_s"]);
  // Absent from a run stored before they were measured: unknown (0).
  for (auto [key, field] : {std::pair{"bf16_tensor_flops_per_s", &d.bf16_tensor_flops_per_s},
                            std::pair{"fp16_tensor_flops_per_s", &d.fp16_tensor_flops_per_s}}) {
    simdjson::dom::element e;
    if (doc[key].get(e) == simdjson::SUCCESS) *field = as_double(e);
  }
  for (auto [k, v] : doc["properties"].get_object()) d.properties[std::string(k)] = str(v);
  return d;
}

std::string to_json(const Candidate& c) {
  return "{\"source\": " + json_quote(c.source) + ", \"language\": " + json_quote(to_string(c.language)) +
         ", \"tunables\": " + json_object(c.tunables) + "}";
}

Candidate candidate_from_json(const std::string& json) {
  simdjson::dom::parser parser;
  const auto doc = parse(parser, json);
  Candidate c;
  c.source = str(doc["source"]);
  const std::string language = str(doc["language"]);
  const auto lang = language == "pytorch" ? std::optional(Language::pytorch) : parse_language(language);
  if (!lang) throw Error(ErrorCode::Internal, "worker protocol: unknown language");
  c.language = *lang;
  for (auto [k, v] : doc["tunables"].get_object()) c.tunables[std::string(k)] = v.get_int64().value();
  return c;
}

std::string to_json(const EvalOptions& o) {
  std::ostringstream out;
  out << "{\"trials\": " << o.trials << ", \"warmup\": " << o.warmup << ", \"min_reps\": " << o.min_reps
      << ", \"max_reps\": " << o.max_reps << ", \"target_ms\": " << number(o.target_ms)
      << ", \"input_sets\": " << o.input_sets << ", \"flush_cache\": " << (o.flush_cache ? "true" : "false")
      << ", \"check_roofline\": " << (o.check_roofline ? "true" : "false")
      << ", \"check_threads\": " << (o.check_threads ? "true" : "false")
      << ", \"timing_lock\": " << json_quote(o.timing_lock) << ", \"device_memory_bytes\": " << o.device_memory_bytes
      << "}";
  return out.str();
}

EvalOptions eval_options_from_json(const std::string& json) {
  simdjson::dom::parser parser;
  const auto doc = parse(parser, json);
  EvalOptions o;
  o.trials = static_cast<int>(doc["trials"].get_int64().value());
  o.warmup = static_cast<int>(doc["warmup"].get_int64().value());
  o.min_reps = static_cast<int>(doc["min_reps"].get_int64().value());
  o.max_reps = static_cast<int>(doc["max_reps"].get_int64().value());
  o.target_ms = as_double(doc["target_ms"]);
  o.input_sets = static_cast<int>(doc["input_sets"].get_int64().value());
  o.flush_cache = doc["flush_cache"].get_bool().value();
  o.check_roofline = doc["check_roofline"].get_bool().value();
  o.check_threads = doc["check_threads"].get_bool().value();
  o.timing_lock = str(doc["timing_lock"]);
  if (std::uint64_t told = 0; doc["device_memory_bytes"].get_uint64().get(told) == simdjson::SUCCESS) {
    o.device_memory_bytes = static_cast<std::size_t>(told);
  }
  return o;
}

}  // namespace kernelevolve::wire
