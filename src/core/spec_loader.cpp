// Reading a spec file (DESIGN.md, "The spec file"): JSON through simdjson's DOM into a Spec, with
// every field checked for its type and every unknown field refused, then Spec::validate().
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>
#include <system_error>

#include "core/text_file.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve {
namespace {

namespace fs = std::filesystem;
using simdjson::dom::element;
using simdjson::dom::element_type;

// Edit distance, to suggest the field a typo meant.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

const char* type_name(const element& value) {
  switch (value.type()) {
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
    case element_type::INT64:
    case element_type::UINT64: return "an integer";
    case element_type::DOUBLE: return "a number";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a boolean";
    case element_type::NULL_VALUE: return "null";
  }
  return "a value";
}

// Finds the first syntax error of a JSON text, for simdjson's DOM parser reports what went wrong
// but not where. Runs only after a failed parse.
class JsonSyntaxLocator {
 public:
  explicit JsonSyntaxLocator(std::string_view text) : text_(text) {}

  // "line L, column C" of the first error, or empty if none is found here.
  std::string locate() {
    space();
    if (value(0)) {
      space();
      if (pos_ == text_.size()) return {};
    }
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') ++line, column = 1;
      else ++column;
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
  }

 private:
  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  void space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool value(int depth) {
    if (depth > 512 || pos_ >= text_.size()) return false;
    switch (text_[pos_]) {
      case '{': return composite(depth, '}', true);
      case '[': return composite(depth, ']', false);
      case '"': return string();
      case 't': return word("true");
      case 'f': return word("false");
      case 'n': return word("null");
      default: return number();
    }
  }
  bool composite(int depth, char close, bool keyed) {
    ++pos_;
    space();
    if (at(close)) return ++pos_, true;
    for (;;) {
      if (keyed) {
        if (!at('"') || !string()) return false;
        space();
        if (!at(':')) return false;
        ++pos_;
        space();
      }
      if (!value(depth + 1)) return false;
      space();
      if (at(close)) return ++pos_, true;
      if (!at(',')) return false;
      ++pos_;
      space();
    }
  }
  bool string() {
    ++pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '"') return ++pos_, true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      pos_ += c == '\\' ? 2 : 1;
    }
    return false;
  }
  bool word(std::string_view expected) {
    if (text_.substr(pos_, expected.size()) != expected) return false;
    pos_ += expected.size();
    return true;
  }
  bool number() {
    const std::size_t start = pos_;
    if (at('-')) ++pos_;
    const std::size_t digits = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (pos_ == digits) return pos_ = start, false;
    if (at('.')) {
      ++pos_;
      const std::size_t fraction = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (pos_ == fraction) return false;
    }
    if (at('e') || at('E')) {
      ++pos_;
      if (at('+') || at('-')) ++pos_;
      const std::size_t exponent = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (pos_ == exponent) return false;
    }
    return true;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

using Fields = std::map<std::string, element, std::less<>>;

class Loader {
 public:
  Loader(const std::string& path) : origin_(path.empty() ? std::string("<spec>") : path) {
    base_dir_ = path.empty() ? fs::path(".") : fs::path(path).parent_path();
    if (base_dir_.empty()) base_dir_ = ".";
  }

  Spec load(const std::string& text, const std::string& path) {
    simdjson::dom::parser parser;
    element root;
    simdjson::padded_string padded(text);
    if (auto error = parser.parse(padded).get(root)) {
      const std::string where = JsonSyntaxLocator(text).locate();
      throw Error(ErrorCode::BadSpec, origin_ + ": " + (where.empty() ? "" : where + ": ") +
                                          "not valid JSON: " + simdjson::error_message(error));
    }

    Spec spec;
    spec.path = path;
    Fields top = fields(root, "",
                        {"name", "language", "entry", "params", "workloads", "inputs", "tolerance", "reference", "seed",
                         "launch", "tunables", "constraints", "cost", "notes", "family", "library_steps", "precision"});
    spec.name = string(required(top, "", "name"), "name");
    spec.language = language(required(top, "", "language"), "language");
    spec.entry = string(required(top, "", "entry"), "entry");
    read_params(required(top, "", "params"), spec);
    read_workloads(required(top, "", "workloads"), spec);
    if (auto* inputs = optional(top, "inputs")) read_inputs(*inputs, spec);
    if (auto* tolerance = optional(top, "tolerance")) {
      Fields t = fields(*tolerance, "tolerance", {"atol", "rtol"});
      if (auto* atol = optional(t, "atol")) spec.tolerance.atol = number(*atol, "tolerance.atol");
      if (auto* rtol = optional(t, "rtol")) spec.tolerance.rtol = number(*rtol, "tolerance.rtol");
    }
    spec.reference = source(required(top, "", "reference"), "reference", /*pytorch_allowed=*/true);
    // KernelBench's tolerances by dtype, where a PyTorch problem's spec gives none.
    if (spec.reference.pytorch && !optional(top, "tolerance")) spec.tolerance = pytorch_tolerance(spec);
    if (auto* seed = optional(top, "seed"); seed || !spec.reference.pytorch)
      spec.seed = source(required(top, "", "seed"), "seed");
    if (auto* launch = optional(top, "launch")) spec.launch = read_launch(*launch, spec.language == Language::triton);
    if (auto* tunables = optional(top, "tunables")) {
      for (const auto& [name, values] : fields(*tunables, "tunables", {})) {
        const std::string field = "tunables." + name;
        std::vector<std::int64_t>& list = spec.tunables[name];
        for (const element& value : array(values, field)) list.push_back(integer(value, item(field, list.size())));
      }
    }
    if (auto* constraints = optional(top, "constraints")) {
      std::size_t i = 0;
      for (const element& value : array(*constraints, "constraints"))
        spec.constraints.push_back(expr(value, item("constraints", i++)));
    }
    if (auto* cost = optional(top, "cost")) {
      Fields c = fields(*cost, "cost", {"flops", "bytes", "flops_floor"});
      if (auto* flops = optional(c, "flops")) spec.cost_flops = expr(*flops, "cost.flops");
      if (auto* floor = optional(c, "flops_floor")) {
        if (floor->get(spec.cost_flops_floor)) {
          fail("cost.flops_floor", std::string("expected true or false, not ") + type_name(*floor));
        }
      }
      if (auto* bytes = optional(c, "bytes")) spec.cost_bytes = expr(*bytes, "cost.bytes");
    }
    if (auto* notes = optional(top, "notes")) spec.notes = string(*notes, "notes");
    if (auto* library = optional(top, "library_steps")) {
      if (library->get(spec.library_steps)) {
        fail("library_steps", std::string("expected true or false, not ") + type_name(*library));
      }
    }
    if (auto* precision = optional(top, "precision")) spec.precision = read_precision(*precision);
    if (auto* family = optional(top, "family")) {
      spec.family = string(*family, "family");
      if (spec.family.empty()) fail("family", "is empty: name the operator (\"matmul\"), or leave the field out");
    }

    spec.validate();
    return spec;
  }

 private:
  // "as-run" or "strict", or the object a run stores: {"policy", "cudnn_tf32", "matmul_tf32",
  // "float32_matmul_precision"}. A policy alone takes that policy's switches as PyTorch ships them.
  Precision read_precision(const element& value) {
    auto policy_of = [&](const element& v, const std::string& field) {
      const std::string text = string(v, field);
      const std::optional<PrecisionPolicy> policy = parse_precision_policy(text);
      if (!policy) fail(field, "\"" + text + "\" is not a precision policy: \"as-run\" or \"strict\"");
      return *policy;
    };
    if (value.type() == simdjson::dom::element_type::STRING) {
      return policy_of(value, "precision") == PrecisionPolicy::as_run ? Precision::as_run_defaults()
                                                                      : Precision::strict_fp32();
    }
    Fields f = fields(value, "precision", {"policy", "cudnn_tf32", "matmul_tf32", "float32_matmul_precision"});
    Precision p = policy_of(required(f, "precision", "policy"), "precision.policy") == PrecisionPolicy::as_run
                      ? Precision::as_run_defaults()
                      : Precision::strict_fp32();
    for (auto [key, target] : {std::pair{"cudnn_tf32", &p.cudnn_tf32}, std::pair{"matmul_tf32", &p.matmul_tf32}}) {
      if (auto* v = optional(f, key); v && v->get(*target)) {
        fail(std::string("precision.") + key, std::string("expected true or false, not ") + type_name(*v));
      }
    }
    if (auto* v = optional(f, "float32_matmul_precision")) {
      p.float32_matmul_precision = string(*v, "precision.float32_matmul_precision");
      if (p.float32_matmul_precision != "highest" && p.float32_matmul_precision != "high" &&
          p.float32_matmul_precision != "medium")
        fail("precision.float32_matmul_precision",
             "\"" + p.float32_matmul_precision + "\" is not one of PyTorch's: \"highest\", \"high\", \"medium\"");
    }
    if (p.policy == PrecisionPolicy::strict &&
        (p.cudnn_tf32 || p.matmul_tf32 || p.float32_matmul_precision != "highest"))
      fail("precision", "strict is fp32 everywhere: it allows no TF32 switch");
    return p;
  }

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw Error(ErrorCode::BadSpec, origin_ + ": " + (field.empty() ? "" : field + ": ") + problem);
  }

  static std::string join_field(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
  }
  static std::string item(const std::string& field, std::size_t index) {
    return field + "[" + std::to_string(index) + "]";
  }

  // The object's fields; refuses a non-object, a duplicate key, and (when `known` is not empty) a
  // field it does not know, suggesting the nearest known one.
  Fields fields(const element& value, const std::string& field, std::initializer_list<const char*> known) const {
    simdjson::dom::object object;
    if (value.get(object)) fail(field, std::string("expected an object, not ") + type_name(value));
    Fields out;
    for (auto [key, member] : object) {
      const std::string name(key);
      const std::string member_field = join_field(field, name);
      if (known.size() != 0 && std::find(known.begin(), known.end(), std::string_view(name)) == known.end()) {
        std::string list, nearest;
        std::size_t best = 3;  // suggest only a close match
        for (const char* candidate : known) {
          list += std::string(list.empty() ? "" : " ") + candidate;
          const std::size_t distance = edit_distance(name, candidate);
          if (distance < best) best = distance, nearest = candidate;
        }
        fail(member_field, "unknown field" + (nearest.empty() ? "" : " (did you mean \"" + nearest + "\"?)") +
                               "; known fields: " + list);
      }
      if (!out.emplace(name, member).second) fail(member_field, "duplicate field");
    }
    return out;
  }

  const element& required(const Fields& in, const std::string& parent, const char* name) const {
    auto found = in.find(name);
    if (found == in.end()) fail(join_field(parent, name), "missing (required)");
    return found->second;
  }
  static const element* optional(const Fields& in, const char* name) {
    auto found = in.find(name);
    return found == in.end() ? nullptr : &found->second;
  }

  simdjson::dom::array array(const element& value, const std::string& field) const {
    simdjson::dom::array out;
    if (value.get(out)) fail(field, std::string("expected an array, not ") + type_name(value));
    return out;
  }

  std::string string(const element& value, const std::string& field) const {
    std::string_view text;
    if (value.get(text)) fail(field, std::string("expected a string, not ") + type_name(value));
    return std::string(text);
  }

  double number(const element& value, const std::string& field) const {
    switch (value.type()) {
      case element_type::INT64: return static_cast<double>(value.get_int64().value_unsafe());
      case element_type::UINT64: return static_cast<double>(value.get_uint64().value_unsafe());
      case element_type::DOUBLE: return value.get_double().value_unsafe();
      default: fail(field, std::string("expected a number, not ") + type_name(value));
    }
  }

  // An integer; a number with no fractional part (1e6) is accepted too.
  std::int64_t integer(const element& value, const std::string& field) const {
    switch (value.type()) {
      case element_type::INT64: return value.get_int64().value_unsafe();
      case element_type::UINT64: fail(field, "integer does not fit in 64 bits");
      case element_type::DOUBLE: {
        const double d = value.get_double().value_unsafe();
        if (std::trunc(d) != d || std::abs(d) >= 9.2233720368547758e18)
          fail(field, "expected an integer, not " + std::to_string(d));
        return static_cast<std::int64_t>(d);
      }
      default: fail(field, std::string("expected an integer, not ") + type_name(value));
    }
  }

  Expr expr(const element& value, const std::string& field) const {
    const std::string where = origin_ + ": " + field;
    if (value.type() == element_type::STRING) return Expr::parse(string(value, field), where);
    if (value.type() == element_type::INT64 || value.type() == element_type::UINT64 ||
        value.type() == element_type::DOUBLE)
      return Expr::parse(std::to_string(integer(value, field)), where);
    fail(field, std::string("expected an integer or an expression string, not ") + type_name(value));
  }

  Language language(const element& value, const std::string& field) const {
    const std::string text = string(value, field);
    auto parsed = parse_language(text);
    if (!parsed) fail(field, "unknown language \"" + text + "\" (expected one of c cpp cuda hip triton)");
    return *parsed;
  }

  void read_params(const element& value, Spec& spec) const {
    std::size_t i = 0;
    for (const element& entry : array(value, "params")) {
      const std::string field = item("params", i++);
      Fields f = fields(entry, field, {"name", "dtype", "shape", "role", "value"});
      Param param;
      param.name = string(required(f, field, "name"), field + ".name");
      const std::string dtype = string(required(f, field, "dtype"), field + ".dtype");
      auto parsed_dtype = parse_dtype(dtype);
      if (!parsed_dtype)
        fail(field + ".dtype", "unknown dtype \"" + dtype + "\" (expected one of f16 bf16 f32 f64 i8 u8 i32 i64)");
      param.dtype = *parsed_dtype;
      const std::string role = string(required(f, field, "role"), field + ".role");
      auto parsed_role = parse_role(role);
      if (!parsed_role)
        fail(field + ".role", "unknown role \"" + role + "\" (expected one of in out inout size scalar)");
      param.role = *parsed_role;
      if (auto* shape = optional(f, "shape")) {
        if (!param.is_buffer()) fail(field + ".shape", std::string("a ") + role + " param has no shape");
        for (const element& dim : array(*shape, field + ".shape")) {
          const std::string dim_field = item(field + ".shape", param.shape.size());
          if (dim.type() == element_type::STRING) param.shape.push_back(string(dim, dim_field));
          else param.shape.push_back(std::to_string(integer(dim, dim_field)));
        }
      } else if (param.is_buffer()) {
        fail(field + ".shape", "missing (required for a buffer: integers, size names or expressions over the sizes)");
      }
      if (auto* scalar_value = optional(f, "value")) {
        if (param.role != Role::scalar) fail(field + ".value", "only a scalar param takes a value");
        param.value = number(*scalar_value, field + ".value");
      } else if (param.role == Role::scalar) {
        fail(field + ".value", "missing (a scalar param needs its fixed value)");
      }
      spec.params.push_back(std::move(param));
    }
  }

  void read_workloads(const element& value, Spec& spec) const {
    for (const element& entry : array(value, "workloads")) {
      const std::string field = item("workloads", spec.workloads.size());
      Bindings workload;
      for (const auto& [name, size] : fields(entry, field, {})) workload[name] = integer(size, field + "." + name);
      spec.workloads.push_back(std::move(workload));
    }
  }

  // Params are read first: an integer buffer takes a range (low/high expressions, index_of, sorted), a
  // float buffer a distribution with its two numbers.
  void read_inputs(const element& value, Spec& spec) const {
    for (const auto& [name, entry] : fields(value, "inputs", {})) {
      const std::string field = "inputs." + name;
      Fields f = fields(entry, field, {"dist", "mean", "std", "low", "high", "index_of", "sorted"});
      const Param* param = spec.find_param(name);
      if (const element* d = optional(f, "dist");
          d && d->is_string() && std::string_view(d->get_string().value()) == "problem") {
        if (f.size() > 1) fail(field, "\"dist\": \"problem\" takes no other field");
        InputDist input;
        input.problem = true;
        spec.inputs[name] = input;
        continue;
      }
      if (param && param->is_buffer() && !is_float(param->dtype)) {
        spec.inputs[name] = integer_input(f, field);
        continue;
      }
      for (const char* key : {"index_of", "sorted"})
        if (optional(f, key)) fail(field + "." + key, "applies only to integer inputs");
      const std::string dist = string(required(f, field, "dist"), field + ".dist");
      InputDist input;
      const char* first = "mean";
      const char* second = "std";
      if (dist == "uniform") {
        input.kind = InputDist::Kind::uniform, input.a = -1.0, input.b = 1.0, first = "low", second = "high";
      } else if (dist == "normal" || dist == "laplace") {
        input.kind = dist == "normal" ? InputDist::Kind::normal : InputDist::Kind::laplace;
        input.a = 0.0, input.b = 1.0;
      } else {
        fail(field + ".dist", "unknown distribution \"" + dist + "\" (expected one of normal uniform laplace)");
      }
      for (const auto& [key, member] : f) {
        if (key == "dist") continue;
        if (key != first && key != second)
          fail(field + "." + key,
               "does not apply to the " + dist + " distribution (it takes " + first + " and " + second + ")");
        (key == first ? input.a : input.b) = number(member, field + "." + key);
      }
      spec.inputs[name] = input;
    }
  }

  InputDist integer_input(Fields& f, const std::string& field) const {
    InputDist input;
    input.kind = InputDist::Kind::integers;
    if (const element* dist = optional(f, "dist")) {
      const std::string text = string(*dist, field + ".dist");
      if (text != "uniform")
        fail(field + ".dist", "an integer input is drawn from a range, not \"" + text +
                                  "\": give low and high (or index_of), and optionally \"sorted\": true");
    }
    for (const char* key : {"mean", "std"})
      if (optional(f, key))
        fail(field + "." + key, "does not apply to an integer input (it takes low and high, or index_of)");
    const element* low = optional(f, "low");
    const element* high = optional(f, "high");
    if (const element* of = optional(f, "index_of")) {
      if (low || high) fail(field + ".index_of", "give index_of or low/high, not both");
      const Expr size = expr(*of, field + ".index_of");
      input.low = Expr::constant(0);
      input.high = Expr::parse("(" + size.text() + ") - 1", origin_ + ": " + field + ".index_of");
    } else if (low || high) {
      if (!low) fail(field + ".low", "missing (an integer range needs both low and high)");
      if (!high) fail(field + ".high", "missing (an integer range needs both low and high)");
      input.low = expr(*low, field + ".low");
      input.high = expr(*high, field + ".high");
    }
    if (const element* sorted = optional(f, "sorted")) {
      bool flag = false;
      if (sorted->get(flag)) fail(field + ".sorted", std::string("expected true or false, not ") + type_name(*sorted));
      input.sorted = flag;
    }
    return input;
  }

  SourceRef source(const element& value, const std::string& field, bool pytorch_allowed = false) const {
    Fields f =
        fields(value, field, {"file", "source", "language", "device", "pytorch", "dtype", "backward", "with_forward"});
    SourceRef ref;
    const element* pytorch = optional(f, "pytorch");
    if (pytorch && !pytorch_allowed) fail(field + ".pytorch", "only the reference may be a PyTorch module");
    // The problem a PyTorch module makes: its floats cast, its backward (Spec::reference, spec.hpp).
    for (const char* key : {"dtype", "backward", "with_forward"}) {
      if (optional(f, key) && !pytorch)
        fail(field + "." + key, "makes a problem of a PyTorch module: give \"pytorch\": \"model.py\"");
    }
    if (const element* dtype = optional(f, "dtype")) {
      const std::string text = string(*dtype, field + ".dtype");
      const auto parsed = parse_dtype(text);
      if (!parsed || (*parsed != DType::bf16 && *parsed != DType::f16))
        fail(field + ".dtype", "casts the module's floats to \"bf16\" or \"f16\", not \"" + text + "\"");
      ref.dtype = parsed;
    }
    for (const auto& [key, flag] :
         {std::pair{"backward", &ref.backward}, std::pair{"with_forward", &ref.with_forward}}) {
      if (const element* v = optional(f, key); v && v->get(*flag))
        fail(field + "." + key, std::string("expected true or false, not ") + type_name(*v));
    }
    const element* file = pytorch ? pytorch : optional(f, "file");
    const element* text = optional(f, "source");
    if (pytorch && optional(f, "file")) fail(field, "give \"pytorch\" or \"file\", not both");
    if (pytorch && optional(f, "language")) fail(field + ".language", "a PyTorch reference has no kernel language");
    ref.pytorch = pytorch != nullptr;
    const std::string file_key = pytorch ? "pytorch" : "file";
    // A PyTorch module is imported from its file; its text, written beside it by to_json, is for reading.
    if (pytorch) text = nullptr;
    if (file && text) fail(field, "give \"file\" or \"source\", not both");
    if (!file && !text) fail(field + ".file", "missing (give \"file\" or inline \"source\")");
    if (text) {
      ref.source = string(*text, field + ".source");
      if (ref.source.empty()) fail(field + ".source", "empty");
    } else {
      const std::string name = string(*file, field + "." + file_key);
      if (name.empty()) fail(field + "." + file_key, "empty file name");
      const fs::path resolved = fs::path(name).is_absolute() ? fs::path(name) : (base_dir_ / name).lexically_normal();
      std::string problem;
      std::error_code ec;
      // A device or a FIFO (/dev/zero) would be read for ever: only regular files hold sources.
      if (fs::exists(resolved, ec) && !fs::is_regular_file(resolved, ec))
        fail(field + "." + file_key, "cannot read \"" + resolved.string() + "\": not a regular file");
      if (!read_text(resolved, ref.source, problem))
        fail(field + "." + file_key, "cannot read \"" + resolved.string() + "\": " + problem);
      if (ref.source.empty()) fail(field + "." + file_key, "\"" + resolved.string() + "\" is empty");
      // A PyTorch module is imported by path, perhaps by another process in another directory.
      ref.file = pytorch ? fs::absolute(resolved).lexically_normal().string() : resolved.string();
    }
    if (auto* language_value = optional(f, "language")) ref.language = language(*language_value, field + ".language");
    if (auto* device = optional(f, "device")) ref.device = string(*device, field + ".device");
    return ref;
  }

  LaunchRule read_launch(const element& value, bool triton) const {
    Fields f = fields(value, "launch", {"grid", "block", "shared_bytes"});
    LaunchRule rule;
    for (const char* key : {"grid", "block"}) {
      const std::string field = std::string("launch.") + key;
      // A Triton kernel's block is 32 x num_warps threads; a block given is the one a CUDA reference gets.
      if (triton && std::string_view(key) == "block" && !optional(f, "block")) continue;
      Expr* dims = std::string_view(key) == "grid" ? rule.grid : rule.block;
      std::size_t count = 0;
      for (const element& dim : array(required(f, "launch", key), field)) {
        if (count == 3) fail(field, "more than 3 dimensions");
        dims[count] = expr(dim, item(field, count));
        ++count;
      }
      if (count == 0) fail(field, "empty (give 1 to 3 dimensions)");
    }
    if (auto* shared = optional(f, "shared_bytes")) rule.shared_bytes = expr(*shared, "launch.shared_bytes");
    return rule;
  }

  std::string origin_;
  fs::path base_dir_;
};

}  // namespace

Spec parse_spec(const std::string& json_text, const std::string& path) { return Loader(path).load(json_text, path); }

Spec load_spec(const std::string& path) {
  std::string text, problem;
  if (!read_text(path, text, problem))
    throw Error(ErrorCode::BadSpec, path + ": cannot read the spec file: " + problem);
  return parse_spec(text, path);
}

}  // namespace kernelevolve
