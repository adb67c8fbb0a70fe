// The sweep file: reading it back, and the header and point lines that run_sweep appends.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kernelevolve/error.hpp"
#include "kernelevolve/store.hpp"
#include "kernelevolve/sweep.hpp"

namespace kernelevolve {

namespace {

constexpr const char* kMagic = "# kernelevolve sweep ";

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  for (char c : line) {
    if (c == '\t') {
      out.push_back(field);
      field.clear();
    } else {
      field += c;
    }
  }
  out.push_back(field);
  return out;
}

std::string one_line(std::string text, std::size_t max) {
  for (char& c : text)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  if (text.size() > max) text = text.substr(0, max - 3) + "...";
  return text;
}

std::string workload_text(const Bindings& workload) {
  std::string out;
  for (const auto& [name, value] : workload) out += (out.empty() ? "" : " ") + name + "=" + std::to_string(value);
  return out;
}

}  // namespace

const SweepPoint* Sweep::find(const Bindings& point) const {
  for (const SweepPoint& p : points) {
    bool same = true;
    for (const auto& name : tunables) {
      const auto it = point.find(name);
      if (it == point.end() || it->second != p.tunables.at(name)) {
        same = false;
        break;
      }
    }
    if (same) return &p;
  }
  return nullptr;
}

std::string sweep_header(const Spec& spec, const std::vector<std::string>& tunables, const std::string& spec_file,
                         const std::string& device, const std::string& commit, const std::string& started) {
  std::string out = std::string(kMagic) + "1\n";
  out += "# spec: " + spec.name + "\n";
  out += "# spec_file: " + spec_file + "\n";
  out += "# spec_hash: " + spec_hash(spec) + "\n";
  // The whole spec, sources inline, on one line (JSON escapes the newlines of its strings): a replay needs
  // no spec file, nor one unchanged since the sweep.
  std::string json = to_json(spec);
  for (char& c : json)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  out += "# spec_json: " + json + "\n";
  out += "# device: " + one_line(device, 200) + "\n";
  out += "# commit: " + one_line(commit, 200) + "\n";
  out += "# started: " + started + "\n";
  for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
    out += "# workload " + std::to_string(w) + ": " + workload_text(spec.workloads[w]) + "\n";
  }
  for (const auto& name : tunables) out += name + "\t";
  out += "status";
  for (std::size_t w = 0; w < spec.workloads.size(); ++w) out += "\tus" + std::to_string(w);
  return out + "\tnote\n";
}

std::string sweep_line(const std::vector<std::string>& tunables, const SweepPoint& point) {
  std::string out;
  for (const auto& name : tunables) out += std::to_string(point.tunables.at(name)) + "\t";
  out += to_string(point.status);
  char number[32];
  for (double us : point.median_us) {
    std::snprintf(number, sizeof number, "\t%.6g", us);
    out += number;
  }
  return out + "\t" + one_line(point.note, 160) + "\n";
}

Spec sweep_spec(const Sweep& sweep) {
  if (sweep.spec_json.empty()) throw Error(ErrorCode::BadUsage, sweep.path + ": the header holds no spec_json");
  Spec spec = parse_spec(sweep.spec_json, sweep.path);
  if (spec_hash(spec) != sweep.spec_hash) {
    throw Error(ErrorCode::BadUsage, sweep.path + ": its spec_json does not match its spec_hash (an edited file?)");
  }
  return spec;
}

std::vector<PriorPoint> sweep_prior(const Sweep& sweep, const Spec& spec) {
  for (const auto& name : sweep.tunables) {
    if (!spec.tunables.count(name)) {
      throw Error(ErrorCode::BadUsage,
                  sweep.path + " sweeps the tunable " + name + ", which " + spec.name + " lacks: not a prior for it");
    }
  }
  const Spec swept = sweep_spec(sweep);
  Bindings seed_point;
  const Bindings all = swept.seed_tunables();
  for (const auto& name : sweep.tunables) seed_point[name] = all.at(name);
  const SweepPoint* seed = sweep.find(seed_point);
  if (!seed || seed->status != Status::ok) {
    throw Error(ErrorCode::BadUsage, sweep.path + ": its seed point is not measured ok, so its speedups have no base");
  }
  std::vector<PriorPoint> out;
  for (const SweepPoint& p : sweep.points) {
    double log_sum = 0;
    if (p.status == Status::ok && p.median_us.size() == seed->median_us.size()) {
      for (std::size_t w = 0; w < p.median_us.size(); ++w) log_sum += std::log(seed->median_us[w] / p.median_us[w]);
      out.push_back({p.tunables, std::exp(log_sum / static_cast<double>(p.median_us.size()))});
    } else {
      out.push_back({p.tunables, 0});
    }
  }
  return out;
}

Sweep read_sweep(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::BadUsage, "cannot read the sweep file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  Sweep s;
  s.path = path;
  auto fail = [&](std::size_t line, const std::string& why) -> Error {
    return Error(ErrorCode::BadUsage, path + ":" + std::to_string(line) + ": " + why);
  };
  if (all.rfind(kMagic, 0) != 0)
    throw fail(1, "not a kernelevolve sweep file (its first line is not '# kernelevolve sweep 1')");
  std::size_t line_no = 0, at = 0;
  bool columns = false;
  std::size_t workload_columns = 0;
  while (at < all.size()) {
    const std::size_t end = all.find('\n', at);
    if (end == std::string::npos) break;  // cut short by a kill mid-write: not a point
    const std::string line = all.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (line_no == 1) {
        s.format = std::atoi(line.substr(std::string(kMagic).size()).c_str());
        if (s.format != 1)
          throw fail(1, "sweep format " + std::to_string(s.format) + " is not one this build reads (1)");
        continue;
      }
      const std::size_t colon = line.find(": ");
      if (colon == std::string::npos) continue;  // a comment
      const std::string key = line.substr(2, colon - 2), value = line.substr(colon + 2);
      if (key == "spec") s.spec_name = value;
      else if (key == "spec_file") s.spec_file = value;
      else if (key == "spec_hash") s.spec_hash = value;
      else if (key == "spec_json") s.spec_json = value;
      else if (key == "device") s.device = value;
      else if (key == "commit") s.commit = value;
      else if (key == "started") s.started = value;
      else if (key == "resumed") s.resumed.push_back(value);
      else if (key.rfind("workload ", 0) == 0) s.workloads.push_back(value);
      continue;
    }
    const std::vector<std::string> fields = split_tabs(line);
    if (!columns) {
      std::size_t status_at = 0;
      while (status_at < fields.size() && fields[status_at] != "status") ++status_at;
      if (status_at == fields.size() || fields.back() != "note") {
        throw fail(line_no, "the column line must name the tunables, then status, us0, us1, ..., note");
      }
      s.tunables.assign(fields.begin(), fields.begin() + static_cast<std::ptrdiff_t>(status_at));
      workload_columns = fields.size() - status_at - 2;
      if (workload_columns != s.workloads.size()) {
        throw fail(line_no, std::to_string(workload_columns) + " time columns for " +
                                std::to_string(s.workloads.size()) + " workloads in the header");
      }
      columns = true;
      continue;
    }
    SweepPoint p;
    const std::size_t n = s.tunables.size();
    if (fields.size() < n + 2) throw fail(line_no, "too few fields (" + std::to_string(fields.size()) + ")");
    for (std::size_t i = 0; i < n; ++i) {
      char* stop = nullptr;
      errno = 0;
      const long long v = std::strtoll(fields[i].c_str(), &stop, 10);
      if (fields[i].empty() || *stop != '\0' || errno != 0) {
        throw fail(line_no, s.tunables[i] + " is '" + fields[i] + "', not an integer");
      }
      p.tunables[s.tunables[i]] = v;
    }
    const auto status = parse_status(fields[n]);
    if (!status) throw fail(line_no, "unknown status '" + fields[n] + "'");
    p.status = *status;
    const std::size_t times = fields.size() - n - 2;  // between the status and the note
    if (p.status == Status::ok) {
      if (times != workload_columns) {
        throw fail(line_no,
                   "an ok point needs " + std::to_string(workload_columns) + " times, it has " + std::to_string(times));
      }
      for (std::size_t w = 0; w < times; ++w) {
        char* stop = nullptr;
        const double us = std::strtod(fields[n + 1 + w].c_str(), &stop);
        if (fields[n + 1 + w].empty() || *stop != '\0' || !(us > 0) || !std::isfinite(us)) {
          throw fail(line_no, "us" + std::to_string(w) + " is '" + fields[n + 1 + w] + "', not a positive time");
        }
        p.median_us.push_back(us);
      }
    } else if (times != 0) {
      throw fail(line_no, "a point that is not ok has no times");
    }
    p.note = fields.back();
    s.points.push_back(std::move(p));
  }
  if (!columns) throw fail(line_no, "no column line (tunables, status, us0, ..., note)");
  if (s.spec_hash.empty() || s.device.empty()) throw fail(line_no, "the header lacks spec_hash or device");
  return s;
}

}  // namespace kernelevolve
