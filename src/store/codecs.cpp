// Column codecs (codecs.hpp): values written into the store's columns and read back.
#include "store/codecs.hpp"

#include <cmath>
#include <cstdio>

#include "kernelevolve/json.hpp"

namespace kernelevolve::store {

std::string number(double x) {
  if (!std::isfinite(x)) return x > 0 ? "1e308" : (x < 0 ? "-1e308" : "null");
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

std::string int_map_json(const std::map<std::string, std::int64_t>& m) {
  std::string out = "{";
  for (const auto& [k, v] : m) out += (out.size() > 1 ? ", " : "") + json_quote(k) + ": " + std::to_string(v);
  return out + "}";
}

std::string ids_json(const std::vector<std::int64_t>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

std::string mismatch_json(const Mismatch& m) {
  return "{\"buffer\": " + json_quote(m.buffer) + ", \"workload\": " + std::to_string(m.workload) +
         ", \"trial\": " + std::to_string(m.trial) + ", \"index\": " + std::to_string(m.index) +
         ", \"got\": " + number(m.got) + ", \"expected\": " + number(m.expected) + ", \"excess\": " + number(m.excess) +
         "}";
}

double json_double(simdjson::dom::element e) {
  double d;
  if (e.get_double().get(d) == simdjson::SUCCESS) return d;
  std::int64_t i;
  if (e.get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
  return NAN;  // null: a NaN that was stored
}

std::map<std::string, std::int64_t> parse_int_map(simdjson::dom::parser& parser, const std::string& json) {
  std::map<std::string, std::int64_t> out;
  simdjson::dom::object obj;
  if (parser.parse(json).get_object().get(obj) != simdjson::SUCCESS) return out;
  for (auto [k, v] : obj) {
    std::int64_t x = 0;
    if (v.get_int64().get(x) == simdjson::SUCCESS) out[std::string(k)] = x;
  }
  return out;
}

std::string prices_json(const std::map<std::string, LlmPrice>& prices) {
  std::string out = "{";
  for (const auto& [model, p] : prices) {
    out += (out.size() > 1 ? ", " : "") + json_quote(model) + ": [" + number(p.input_per_mtok) + ", " +
           number(p.output_per_mtok) + "]";
  }
  return out + "}";
}

std::map<std::string, LlmPrice> parse_prices(const std::string& json) {
  std::map<std::string, LlmPrice> out;
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  if (json.empty() || parser.parse(json).get_object().get(obj) != simdjson::SUCCESS) return out;
  for (auto [model, v] : obj) {
    simdjson::dom::array pair;
    if (v.get_array().get(pair) != simdjson::SUCCESS || pair.size() != 2) continue;
    out[std::string(model)] = {json_double(pair.at(0).value_unsafe()), json_double(pair.at(1).value_unsafe())};
  }
  return out;
}

std::vector<std::int64_t> parse_ids(simdjson::dom::parser& parser, const std::string& json) {
  std::vector<std::int64_t> out;
  simdjson::dom::array arr;
  if (parser.parse(json).get_array().get(arr) != simdjson::SUCCESS) return out;
  for (auto v : arr) {
    std::int64_t x = 0;
    if (v.get_int64().get(x) == simdjson::SUCCESS) out.push_back(x);
  }
  return out;
}

std::optional<Mismatch> parse_mismatch(simdjson::dom::parser& parser, const std::string& json) {
  simdjson::dom::element w;
  if (json.empty() || parser.parse(json).get(w) != simdjson::SUCCESS) return std::nullopt;
  Mismatch m;
  std::string_view buffer;
  if (w["buffer"].get_string().get(buffer) == simdjson::SUCCESS) m.buffer = buffer;
  std::int64_t i = 0;
  if (w["workload"].get_int64().get(i) == simdjson::SUCCESS) m.workload = static_cast<std::size_t>(i);
  if (w["trial"].get_int64().get(i) == simdjson::SUCCESS) m.trial = static_cast<int>(i);
  if (w["index"].get_int64().get(i) == simdjson::SUCCESS) m.index = i;
  m.got = json_double(w["got"].value_unsafe());
  m.expected = json_double(w["expected"].value_unsafe());
  m.excess = json_double(w["excess"].value_unsafe());
  return m;
}

}  // namespace kernelevolve::store
