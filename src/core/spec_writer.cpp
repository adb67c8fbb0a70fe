// Writing a Spec back as spec-file JSON, sources inline: how a spec built in C++ reaches a worker
// process or an external mutator.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "kernelevolve/json.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve {

namespace {

std::string quote(const std::string& text) { return json_quote(text); }

std::string number(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  std::string s = buf;
  // Keep it a JSON number that reads back as a double ("1e-05" and "2" are fine; "inf" is not).
  if (!std::isfinite(x)) return "0";
  // "-0" reads back as the integer 0: a scalar of -0.0 (1/alpha is -inf) would reach a worker as +0.0.
  if (x == 0 && std::signbit(x)) return "-0.0";
  return s;
}

std::string source_ref(const SourceRef& ref) {
  // A PyTorch module is imported from its file (it may import its neighbours); its text rides along.
  if (ref.pytorch) {
    std::string variant;
    if (ref.dtype) variant += ", \"dtype\": " + quote(to_string(*ref.dtype));
    if (ref.backward) variant += ", \"backward\": true";
    if (ref.with_forward) variant += ", \"with_forward\": true";
    return "{\"pytorch\": " + quote(ref.file) + variant +
           (ref.source.empty() ? "" : ", \"source\": " + quote(ref.source)) + "}";
  }
  std::string out = "{\"source\": " + quote(ref.source);
  if (ref.language) out += ", \"language\": " + quote(to_string(*ref.language));
  if (ref.device) out += ", \"device\": " + quote(*ref.device);
  return out + "}";
}

}  // namespace

std::string to_json(const Param& p) {
  std::ostringstream out;
  out << "{\"name\": " << quote(p.name) << ", \"dtype\": " << quote(to_string(p.dtype))
      << ", \"role\": " << quote(to_string(p.role));
  if (p.is_buffer()) {
    out << ", \"shape\": [";
    for (std::size_t d = 0; d < p.shape.size(); ++d) out << (d ? ", " : "") << quote(p.shape[d]);
    out << "]";
  }
  if (p.role == Role::scalar) out << ", \"value\": " << number(p.value);
  out << "}";
  return out.str();
}

std::string to_json(const Spec& spec) {
  std::ostringstream out;
  out << "{\"name\": " << quote(spec.name) << ", \"language\": " << quote(to_string(spec.language))
      << ", \"entry\": " << quote(spec.entry) << ", \"params\": [";
  for (std::size_t i = 0; i < spec.params.size(); ++i) out << (i ? ", " : "") << to_json(spec.params[i]);
  out << "], \"workloads\": [";
  for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
    out << (w ? ", " : "") << "{";
    bool first = true;
    for (const auto& [k, v] : spec.workloads[w]) {
      out << (first ? "" : ", ") << quote(k) << ": " << v;
      first = false;
    }
    out << "}";
  }
  out << "]";
  if (!spec.inputs.empty()) {
    out << ", \"inputs\": {";
    bool first = true;
    for (const auto& [name, d] : spec.inputs) {
      out << (first ? "" : ", ") << quote(name) << ": ";
      const Param* param = spec.find_param(name);
      if (param && !is_float(param->dtype)) {
        out << "{\"dist\": \"uniform\"";
        if (d.low && d.high) out << ", \"low\": " << quote(d.low->text()) << ", \"high\": " << quote(d.high->text());
        if (d.sorted) out << ", \"sorted\": true";
        out << "}";
      } else if (d.kind == InputDist::Kind::uniform) {
        out << "{\"dist\": \"uniform\", \"low\": " << number(d.a) << ", \"high\": " << number(d.b) << "}";
      } else {
        out << "{\"dist\": " << (d.kind == InputDist::Kind::normal ? "\"normal\"" : "\"laplace\"")
            << ", \"mean\": " << number(d.a) << ", \"std\": " << number(d.b) << "}";
      }
      first = false;
    }
    out << "}";
  }
  out << ", \"tolerance\": {\"atol\": " << number(spec.tolerance.atol) << ", \"rtol\": " << number(spec.tolerance.rtol)
      << "}, \"reference\": " << source_ref(spec.reference);
  if (!spec.seed.source.empty()) out << ", \"seed\": " << source_ref(spec.seed);
  if (spec.launch) {
    auto dims = [&](const Expr* e) {
      return "[" + quote(e[0].text()) + ", " + quote(e[1].text()) + ", " + quote(e[2].text()) + "]";
    };
    out << ", \"launch\": {\"grid\": " << dims(spec.launch->grid) << ", \"block\": " << dims(spec.launch->block)
        << ", \"shared_bytes\": " << quote(spec.launch->shared_bytes.text()) << "}";
  }
  if (!spec.tunables.empty()) {
    out << ", \"tunables\": {";
    bool first = true;
    for (const auto& [name, values] : spec.tunables) {
      out << (first ? "" : ", ") << quote(name) << ": [";
      for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
      out << "]";
      first = false;
    }
    out << "}";
  }
  if (!spec.constraints.empty()) {
    out << ", \"constraints\": [";
    for (std::size_t i = 0; i < spec.constraints.size(); ++i)
      out << (i ? ", " : "") << quote(spec.constraints[i].text());
    out << "]";
  }
  if (spec.cost_flops || spec.cost_bytes) {
    out << ", \"cost\": {";
    if (spec.cost_flops) out << "\"flops\": " << quote(spec.cost_flops->text());
    if (spec.cost_bytes) out << (spec.cost_flops ? ", " : "") << "\"bytes\": " << quote(spec.cost_bytes->text());
    if (spec.cost_flops && !spec.cost_flops_floor) out << ", \"flops_floor\": false";
    out << "}";
  }
  if (!spec.notes.empty()) out << ", \"notes\": " << quote(spec.notes);
  if (!spec.family.empty()) out << ", \"family\": " << quote(spec.family);
  if (!spec.library_steps) out << ", \"library_steps\": false";
  if (spec.precision) {
    const Precision& p = *spec.precision;
    out << ", \"precision\": {\"policy\": " << quote(to_string(p.policy))
        << ", \"cudnn_tf32\": " << (p.cudnn_tf32 ? "true" : "false")
        << ", \"matmul_tf32\": " << (p.matmul_tf32 ? "true" : "false")
        << ", \"float32_matmul_precision\": " << quote(p.float32_matmul_precision) << "}";
  }
  out << "}";
  return out.str();
}

}  // namespace kernelevolve
