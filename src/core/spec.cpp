// Spec: names of the enums, and the checks of everything a user can get wrong in a problem,
// whether the spec came from a file or was built in C++.
#include "kernelevolve/spec.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

#include "kernelevolve/error.hpp"

namespace kernelevolve {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

const char* to_string(Role role) {
  switch (role) {
    case Role::in: return "in";
    case Role::out: return "out";
    case Role::inout: return "inout";
    case Role::size: return "size";
    case Role::scalar: return "scalar";
  }
  return "?";
}

const char* to_string(Language language) {
  switch (language) {
    case Language::c: return "c";
    case Language::cpp: return "cpp";
    case Language::cuda: return "cuda";
    case Language::hip: return "hip";
    case Language::pytorch: return "pytorch";
    case Language::triton: return "triton";
  }
  return "?";
}

const char* to_string(PrecisionPolicy policy) { return policy == PrecisionPolicy::as_run ? "as-run" : "strict"; }

std::optional<PrecisionPolicy> parse_precision_policy(const std::string& text) {
  if (text == "as-run") return PrecisionPolicy::as_run;
  if (text == "strict") return PrecisionPolicy::strict;
  return std::nullopt;
}

Precision Precision::as_run_defaults() {
  Precision p;
  p.policy = PrecisionPolicy::as_run;
  p.cudnn_tf32 = true;
  return p;
}

std::string Precision::text() const {
  if (policy == PrecisionPolicy::strict) return "strict (fp32, TF32 off everywhere)";
  return std::string("as-run (cuDNN TF32 ") + (cudnn_tf32 ? "on" : "off") + ", matmul TF32 " +
         (matmul_tf32 ? "on" : "off") + ", float32 matmul precision " + float32_matmul_precision + ")";
}

std::optional<DType> parse_dtype(const std::string& text) {
  for (DType dtype : {DType::f16, DType::bf16, DType::f32, DType::f64, DType::i8, DType::u8, DType::i32, DType::i64})
    if (text == to_string(dtype)) return dtype;
  return std::nullopt;
}

std::optional<Role> parse_role(const std::string& text) {
  for (Role role : {Role::in, Role::out, Role::inout, Role::size, Role::scalar})
    if (text == to_string(role)) return role;
  return std::nullopt;
}

std::optional<Language> parse_language(const std::string& text) {
  for (Language language : {Language::c, Language::cpp, Language::cuda, Language::hip, Language::triton})
    if (text == to_string(language)) return language;
  return std::nullopt;
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::i8:
    case DType::u8: return 1;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f64:
    case DType::i64: return 8;
  }
  return 0;
}

const char* c_type(DType dtype) {
  switch (dtype) {
    case DType::f16: return "_Float16";
    case DType::bf16: return "__bf16";
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i8: return "int8_t";
    case DType::u8: return "uint8_t";
    case DType::i32: return "int32_t";
    case DType::i64: return "int64_t";
  }
  return "int64_t";
}

bool is_float(DType dtype) {
  return dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f32 || dtype == DType::f64;
}

bool is_cpu_language(Language language) { return language == Language::c || language == Language::cpp; }

const char* device_kind(Language language) {
  return is_cpu_language(language) ? "cpu" : language == Language::hip ? "hip" : "cuda";
}

bool is_identifier(const std::string& text) {
  if (text.empty() || !(std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_')) return false;
  for (char c : text)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

namespace {

// A shape item that is an integer literal: its value; otherwise nullopt (it names a size).
std::optional<std::int64_t> parse_literal(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::size_t start = text[0] == '-' || text[0] == '+' ? 1 : 0;
  if (start == text.size()) return std::nullopt;
  std::int64_t value = 0;
  for (std::size_t i = start; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
    if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, text[i] - '0', &value))
      return std::nullopt;
  }
  return text[0] == '-' ? -value : value;
}

// A buffer's dimension under a workload: an integer literal, a size's name, or an integer expression over
// the sizes ("H - K + 1", "C * H * W", "cdiv(N, 2)"). Throws Error(BadSpec) on an unbound name.
std::int64_t dimension(const std::string& dim, const Bindings& workload) {
  if (auto literal = parse_literal(dim)) return *literal;
  if (auto found = workload.find(dim); found != workload.end()) return found->second;
  return Expr::parse(dim, "dimension \"" + dim + "\"").eval(workload);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : " ") + item;
  return out.empty() ? "(none)" : out;
}

std::pair<double, double> integer_limits(DType dtype) {
  switch (dtype) {
    case DType::i8: return {-128, 127};
    case DType::u8: return {0, 255};
    case DType::i32: return {-2147483648.0, 2147483647.0};
    default: return {-9.2233720368547758e18, 9.2233720368547758e18};
  }
}

// Collects the checks' context: where messages point, and the names expressions may read.
class Validator {
 public:
  explicit Validator(const Spec& spec) : spec_(spec) {
    origin_ = !spec.path.empty() ? spec.path : !spec.name.empty() ? spec.name : std::string("<spec>");
  }

  void run() {
    check_header();
    check_params();
    check_workloads();
    check_inputs();
    check_tolerance();
    check_source(spec_.reference, "reference");
    // A PyTorch problem may come without a seed: a mutator writes the first kernel from the module.
    if (!(spec_.reference.pytorch && spec_.seed.source.empty() && spec_.seed.file.empty()))
      check_source(spec_.seed, "seed");
    check_tunables();
    check_expressions();
    check_seed_point();
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw Error(ErrorCode::BadSpec, origin_ + ": " + field + ": " + problem);
  }

  void check_header() {
    if (spec_.name.empty()) fail("name", "missing (a short name for the problem)");
    if (spec_.entry.empty()) fail("entry", "missing (the kernel's function name)");
    if (!is_identifier(spec_.entry)) fail("entry", "\"" + spec_.entry + "\" is not a C identifier");
  }

  void check_params() {
    if (spec_.params.empty()) fail("params", "missing or empty (the kernel's parameters)");
    std::set<std::string> seen;
    for (std::size_t i = 0; i < spec_.params.size(); ++i) {
      const Param& param = spec_.params[i];
      const std::string field = "params[" + std::to_string(i) + "]";
      if (param.name.empty()) fail(field + ".name", "missing");
      if (!is_identifier(param.name)) fail(field + ".name", "\"" + param.name + "\" is not a C identifier");
      if (!seen.insert(param.name).second) fail(field + ".name", "duplicate param name \"" + param.name + "\"");
      if (param.role == Role::size) {
        if (is_float(param.dtype))
          fail(field + ".dtype",
               "size \"" + param.name + "\" must have an integer dtype (i32 or i64), not " + to_string(param.dtype));
        sizes_.insert(param.name);
      } else if (param.role == Role::scalar) {
        if (!std::isfinite(param.value)) fail(field + ".value", "scalar \"" + param.name + "\" is not finite");
        scalars_.insert(param.name);
      }
      if (!param.is_buffer() && !param.shape.empty())
        fail(field + ".shape", std::string("a ") + to_string(param.role) + " param has no shape");
    }
    for (std::size_t i = 0; i < spec_.params.size(); ++i) {
      const Param& param = spec_.params[i];
      if (!param.is_buffer()) continue;
      const std::string field = "params[" + std::to_string(i) + "].shape";
      if (param.shape.empty()) fail(field, "buffer \"" + param.name + "\" needs a shape (use [1] for one element)");
      for (std::size_t d = 0; d < param.shape.size(); ++d) {
        const std::string& dim = param.shape[d];
        const std::string dim_field = field + "[" + std::to_string(d) + "]";
        if (auto literal = parse_literal(dim)) {
          if (*literal <= 0) fail(dim_field, "dimension " + dim + " must be positive");
        } else if (is_identifier(dim)) {
          if (!sizes_.count(dim))
            fail(dim_field,
                 "\"" + dim + "\" is not a size param (sizes: " + join({sizes_.begin(), sizes_.end()}) + ")");
        } else {
          // An expression over the sizes, evaluated per workload (check_workloads: it must be positive there).
          std::optional<Expr> expr;
          try {
            expr = Expr::parse(dim, dim_field);
          } catch (const Error&) {
            fail(dim_field, "\"" + dim +
                                "\" is neither an integer, a size param nor an integer expression over the "
                                "sizes (+ - * / %, cdiv, min, max, parentheses)");
          }
          for (const auto& name : expr->names())
            if (!sizes_.count(name))
              fail(dim_field, "\"" + name + "\" in \"" + dim + "\" is not a size param (sizes: " +
                                  join({sizes_.begin(), sizes_.end()}) + "); a dimension reads the sizes only");
        }
      }
    }
  }

  void check_workloads() {
    if (spec_.workloads.empty()) fail("workloads", "missing or empty (at least one binding of the sizes)");
    for (std::size_t w = 0; w < spec_.workloads.size(); ++w) {
      const Bindings& workload = spec_.workloads[w];
      const std::string field = "workloads[" + std::to_string(w) + "]";
      for (const auto& [name, value] : workload) {
        if (!sizes_.count(name))
          fail(field + "." + name,
               "\"" + name + "\" is not a size param (sizes: " + join({sizes_.begin(), sizes_.end()}) + ")");
        if (value <= 0) fail(field + "." + name, "size must be positive, not " + std::to_string(value));
      }
      for (const auto& size : sizes_)
        if (!workload.count(size)) fail(field, "missing size \"" + size + "\"");
      for (const Param& param : spec_.params) {
        if (!param.is_buffer()) continue;
        std::int64_t bytes = static_cast<std::int64_t>(dtype_size(param.dtype));
        for (std::size_t d = 0; d < param.shape.size(); ++d) {
          const std::string& dim = param.shape[d];
          std::int64_t extent = 0;
          try {
            extent = dimension(dim, workload);
          } catch (const Error& error) {
            std::string problem = error.what();
            const std::size_t start = problem.find("cannot evaluate ");
            if (start != std::string::npos) problem.erase(0, start);
            fail(field,
                 "buffer \"" + param.name + "\" dimension " + std::to_string(d) + " \"" + dim + "\": " + problem);
          }
          if (extent <= 0)
            fail(field, "buffer \"" + param.name + "\" dimension " + std::to_string(d) + " \"" + dim + "\" is " +
                            std::to_string(extent) + " here: a dimension must be positive");
          if (__builtin_mul_overflow(bytes, extent, &bytes))
            fail(field, "buffer \"" + param.name + "\" is too large for 64-bit sizes");
        }
      }
    }
  }

  void check_inputs() {
    for (const auto& [name, dist] : spec_.inputs) {
      const std::string field = "inputs." + name;
      const Param* param = spec_.find_param(name);
      if (!param) fail(field, "\"" + name + "\" is not a param");
      if (param->role != Role::in && param->role != Role::inout)
        fail(field, "\"" + name + "\" is not an input buffer (role " + to_string(param->role) + ")");
      if (dist.problem) {
        if (!spec_.reference.pytorch)
          fail(field + ".dist", "\"problem\" draws from a PyTorch problem's get_inputs(): the reference is not one");
        continue;
      }
      if (!is_float(param->dtype)) {
        check_integer_range(*param, dist, field);
        continue;
      }
      if (dist.low || dist.high || dist.sorted || dist.kind > InputDist::Kind::laplace)
        fail(field, "\"" + name + "\" is a float input: a range, index_of and sorted apply to integer inputs only");
      if (!std::isfinite(dist.a) || !std::isfinite(dist.b)) fail(field, "parameters must be finite");
      if (dist.kind == InputDist::Kind::uniform) {
        if (dist.a > dist.b) fail(field + ".low", "low must not exceed high");
      } else if (dist.b < 0) {
        fail(field + ".std", "std must not be negative");
      }
    }
  }

  // A range reads sizes and scalars only (not tunables: the inputs are the problem's, not a candidate's),
  // and on every workload low <= high within the type.
  void check_integer_range(const Param& param, const InputDist& dist, const std::string& field) {
    if (dist.kind != InputDist::Kind::integers && dist.kind != InputDist::Kind::uniform)
      fail(field, "an integer input is drawn from a range: give low and high, or index_of");
    if (!dist.low != !dist.high) fail(field, "an integer range needs both low and high");
    if (!dist.low) return;
    for (const auto* bound : {&*dist.low, &*dist.high}) {
      for (const auto& name : bound->names()) {
        if (sizes_.count(name) || scalars_.count(name)) continue;
        fail(field, "unknown name \"" + name + "\" in \"" + bound->text() +
                        "\" (a range may read the sizes: " + join({sizes_.begin(), sizes_.end()}) +
                        "; and scalars: " + join({scalars_.begin(), scalars_.end()}) + ")");
      }
    }
    for (std::size_t w = 0; w < spec_.workloads.size(); ++w) {
      const Bindings names = spec_.bindings(spec_.workloads[w], {});
      const std::int64_t low = dist.low->eval(names), high = dist.high->eval(names);
      const std::string where = field + " (workload " + std::to_string(w) + ")";
      if (low > high)
        fail(where, "the range [" + std::to_string(low) + ", " + std::to_string(high) +
                        "] is empty: low must not exceed high");
      const auto [type_low, type_high] = integer_limits(param.dtype);
      if (low < type_low || high > type_high)
        fail(where, "the range [" + std::to_string(low) + ", " + std::to_string(high) + "] does not fit " +
                        to_string(param.dtype));
    }
  }

  void check_tolerance() {
    if (!(spec_.tolerance.atol >= 0) || !std::isfinite(spec_.tolerance.atol))
      fail("tolerance.atol", "must be a finite number >= 0, not " + std::to_string(spec_.tolerance.atol));
    if (!(spec_.tolerance.rtol >= 0) || !std::isfinite(spec_.tolerance.rtol))
      fail("tolerance.rtol", "must be a finite number >= 0, not " + std::to_string(spec_.tolerance.rtol));
  }

  void check_source(const SourceRef& ref, const std::string& field) {
    if (ref.source.empty())
      fail(field, ref.file.empty() ? std::string("missing (give \"file\" or \"source\")")
                                   : "source file \"" + ref.file + "\" is empty");
    if (!ref.pytorch && (ref.dtype || ref.backward || ref.with_forward))
      fail(field, "dtype, backward and with_forward make a problem of a PyTorch module: the " + field + " is not one");
    if (ref.dtype && *ref.dtype != DType::bf16 && *ref.dtype != DType::f16)
      fail(field + ".dtype", std::string("casts the module to bf16 or f16, not ") + to_string(*ref.dtype));
    if (ref.with_forward && !ref.backward)
      fail(field + ".with_forward", "adds the forward's outputs to a backward problem: give \"backward\": true too");
  }

  void check_tunables() {
    for (const auto& [name, values] : spec_.tunables) {
      const std::string field = "tunables." + name;
      if (!is_identifier(name)) fail(field, "\"" + name + "\" is not a valid macro name");
      if (spec_.find_param(name)) fail(field, "\"" + name + "\" is also a param name");
      if (values.empty()) fail(field, "empty list (give at least one value; the first is the seed's)");
      std::set<std::int64_t> seen;
      for (std::int64_t value : values)
        if (!seen.insert(value).second) fail(field, "value " + std::to_string(value) + " is listed twice");
      if (spec_.language != Language::triton) continue;
      // Triton's launch options, not parameters: what its compiler accepts.
      for (std::int64_t value : values) {
        if (const std::string takes = triton_option_refusal(name, value); !takes.empty())
          fail(field, std::to_string(value) + " is not " + takes + " (Triton's " + name + ")");
      }
    }
  }

  void check_names(const Expr& expr, const std::string& field) {
    for (const auto& name : expr.names()) {
      if (sizes_.count(name) || scalars_.count(name) || spec_.tunables.count(name)) continue;
      std::vector<std::string> tunables;
      for (const auto& entry : spec_.tunables) tunables.push_back(entry.first);
      fail(field, "unknown name \"" + name + "\" in \"" + expr.text() +
                      "\" (sizes: " + join({sizes_.begin(), sizes_.end()}) +
                      "; scalars: " + join({scalars_.begin(), scalars_.end()}) + "; tunables: " + join(tunables) + ")");
    }
  }

  void check_expressions() {
    const bool gpu = !is_cpu_language(spec_.language);
    if (gpu && !spec_.launch)
      fail("launch", std::string("missing (required for ") + to_string(spec_.language) + ": grid and block)");
    if (spec_.launch) {
      for (int i = 0; i < 3; ++i) {
        check_names(spec_.launch->grid[i], "launch.grid[" + std::to_string(i) + "]");
        check_names(spec_.launch->block[i], "launch.block[" + std::to_string(i) + "]");
      }
      check_names(spec_.launch->shared_bytes, "launch.shared_bytes");
    }
    for (std::size_t i = 0; i < spec_.constraints.size(); ++i)
      check_names(spec_.constraints[i], "constraints[" + std::to_string(i) + "]");
    if (spec_.cost_flops) check_names(*spec_.cost_flops, "cost.flops");
    if (spec_.cost_bytes) check_names(*spec_.cost_bytes, "cost.bytes");
  }

  // The seed must be a runnable point: it satisfies the constraints and its launch evaluates to a
  // real grid on every workload.
  void check_seed_point() {
    const Bindings seed = spec_.seed_tunables();
    for (std::size_t w = 0; w < spec_.workloads.size(); ++w) {
      const Bindings names = spec_.bindings(spec_.workloads[w], seed);
      const std::string for_workload = " for workloads[" + std::to_string(w) + "] at the seed point " + point(seed);
      for (std::size_t i = 0; i < spec_.constraints.size(); ++i) {
        const std::string field = "constraints[" + std::to_string(i) + "]";
        if (evaluate(spec_.constraints[i], names, field, for_workload) == 0)
          fail(field, "\"" + spec_.constraints[i].text() + "\" is false" + for_workload +
                          " (the first value of each tunable must satisfy the constraints)");
      }
      if (spec_.launch) {
        for (int i = 0; i < 3; ++i) {
          for (const auto& [exprs, what] : {std::pair{spec_.launch->grid, "grid"}, {spec_.launch->block, "block"}}) {
            const std::string field = std::string("launch.") + what + "[" + std::to_string(i) + "]";
            const std::int64_t value = evaluate(exprs[i], names, field, for_workload);
            if (value < 1) fail(field, "\"" + exprs[i].text() + "\" is " + std::to_string(value) + for_workload);
          }
        }
        const std::int64_t shared = evaluate(spec_.launch->shared_bytes, names, "launch.shared_bytes", for_workload);
        if (shared < 0) fail("launch.shared_bytes", "negative" + for_workload);
      }
      if (spec_.cost_flops) evaluate(*spec_.cost_flops, names, "cost.flops", for_workload);
      if (spec_.cost_bytes) evaluate(*spec_.cost_bytes, names, "cost.bytes", for_workload);
    }
  }

  std::int64_t evaluate(const Expr& expr, const Bindings& names, const std::string& field,
                        const std::string& context) const {
    try {
      return expr.eval(names);
    } catch (const Error& error) {
      // The expression's own message starts with where it was parsed, which may repeat the file and
      // field; keep only the problem.
      std::string problem = error.what();
      const std::size_t start = problem.find("cannot evaluate ");
      if (start != std::string::npos) problem.erase(0, start);
      fail(field, problem + context);
    }
  }

  static std::string point(const Bindings& tunables) {
    std::string out = "{";
    for (const auto& [name, value] : tunables) out += (out.size() > 1 ? ", " : "") + name + "=" + std::to_string(value);
    return out + "}";
  }

  const Spec& spec_;
  std::string origin_;
  std::set<std::string> sizes_;
  std::set<std::string> scalars_;
};

}  // namespace

void Spec::validate() const { Validator(*this).run(); }

Precision Spec::precision_in_effect() const {
  if (precision) return *precision;
  return reference.pytorch ? Precision::as_run_defaults() : Precision::strict_fp32();
}

Bindings Spec::seed_tunables() const {
  Bindings point;
  for (const auto& [name, values] : tunables)
    if (!values.empty()) point[name] = values.front();
  return point;
}

bool Spec::satisfies_constraints(const Bindings& point) const {
  if (workloads.empty()) return failed_constraint({}, point) == nullptr;
  for (const Bindings& workload : workloads)
    if (failed_constraint(workload, point)) return false;
  return true;
}

const Expr* Spec::failed_constraint(const Bindings& workload, const Bindings& tunables) const {
  const Bindings names = bindings(workload, tunables);
  for (const Expr& constraint : constraints) {
    try {
      if (constraint.eval(names) == 0) return &constraint;
    } catch (const Error&) {
      return &constraint;  // a point a constraint cannot even be evaluated at is not a valid point
    }
  }
  return nullptr;
}

std::int64_t Spec::element_count(const Param& buffer, const Bindings& workload) const {
  std::int64_t count = 1;
  for (const std::string& dim : buffer.shape) {
    std::int64_t extent = 0;
    if (!parse_literal(dim) && is_identifier(dim) && !workload.count(dim))
      throw Error(ErrorCode::BadSpec, (path.empty() ? name : path) + ": param \"" + buffer.name +
                                          "\": the workload does not bind size \"" + dim + "\"");
    try {
      extent = dimension(dim, workload);
    } catch (const Error& error) {
      throw Error(ErrorCode::BadSpec,
                  (path.empty() ? name : path) + ": param \"" + buffer.name + "\": " + error.what());
    }
    if (__builtin_mul_overflow(count, extent, &count))
      throw Error(ErrorCode::BadSpec,
                  (path.empty() ? name : path) + ": param \"" + buffer.name + "\": element count overflows 64 bits");
  }
  return count;
}

Bindings Spec::bindings(const Bindings& workload, const Bindings& point) const {
  Bindings names = workload;
  for (const Param& param : params) {
    if (param.role != Role::scalar) continue;
    // Scalars are read as integers in launch and cost expressions: truncated, saturated at the ends.
    const double value = std::trunc(param.value);
    std::int64_t integer = 0;
    if (value >= 9.2233720368547758e18) integer = std::numeric_limits<std::int64_t>::max();
    else if (value <= -9.2233720368547758e18) integer = std::numeric_limits<std::int64_t>::min();
    else if (!std::isnan(value)) integer = static_cast<std::int64_t>(value);
    names[param.name] = integer;
  }
  for (const auto& [tunable, value] : point) names[tunable] = value;
  return names;
}

InputDist Spec::input_distribution(const Param& buffer, const Bindings& workload) const {
  const auto it = inputs.find(buffer.name);
  InputDist dist = it != inputs.end() ? it->second : InputDist{};
  if (is_float(buffer.dtype)) return dist;
  const auto [type_low, type_high] = integer_limits(buffer.dtype);
  double low = kDefaultIntegerLow, high = kDefaultIntegerHigh;
  if (dist.low && dist.high) {
    const Bindings names = bindings(workload, {});
    low = static_cast<double>(dist.low->eval(names));
    high = static_cast<double>(dist.high->eval(names));
  }
  dist.kind = InputDist::Kind::integers;
  dist.a = std::max(low, type_low);
  dist.b = std::min(high, type_high);
  return dist;
}

std::string argument_type(const Param& param) {
  if (!param.is_buffer()) return c_type(param.dtype);
  return std::string(param.role == Role::in ? "const " : "") + c_type(param.dtype) + "*";
}

std::string triton_type(const Param& param) {
  const char* name = "fp32";
  switch (param.dtype) {
    case DType::f16: name = "fp16"; break;
    case DType::bf16: name = "bf16"; break;
    case DType::f32: name = "fp32"; break;
    case DType::f64: name = "fp64"; break;
    case DType::i8: name = "i8"; break;
    case DType::u8: name = "u8"; break;
    case DType::i32: name = "i32"; break;
    case DType::i64: name = "i64"; break;
  }
  return (param.is_buffer() ? "*" : "") + std::string(name);
}

std::string triton_option_refusal(const std::string& name, std::int64_t value) {
  if (name == "num_warps" && (value < 1 || value > 32 || (value & (value - 1)))) return "a power of two from 1 to 32";
  if (name == "num_stages" && (value < 1 || value > 8)) return "1 to 8";
  return "";
}

std::string kernel_signature(const Spec& spec) {
  if (spec.language == Language::triton) {
    std::string out = "@triton.jit\ndef " + spec.entry + "(";
    for (std::size_t i = 0; i < spec.params.size(); ++i) out += (i ? ", " : "") + spec.params[i].name;
    for (const auto& [name, values] : spec.tunables) {
      if (name != "num_warps" && name != "num_stages") out += ", " + name + ": tl.constexpr";
    }
    return out + ")";
  }
  std::string out = is_cpu_language(spec.language) ? "void " : "extern \"C\" __global__ void ";
  out += spec.entry + "(";
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    out += (i ? ", " : "") + argument_type(spec.params[i]) + " " + spec.params[i].name;
  }
  return out + ")";
}

Tolerance pytorch_tolerance(const Spec& spec) {
  Tolerance t{1e-4, 1e-4};
  if (spec.reference.dtype == DType::f16 || spec.reference.dtype == DType::bf16) t = {1e-2, 1e-2};
  for (const Param& p : spec.params) {
    if ((p.role == Role::out || p.role == Role::inout) && (p.dtype == DType::f16 || p.dtype == DType::bf16))
      t = {1e-2, 1e-2};
  }
  return t;
}

std::string pytorch_variant_text(const SourceRef& reference) {
  if (!reference.pytorch || (!reference.dtype && !reference.backward)) return {};
  std::string out = reference.backward ? (reference.with_forward ? "the module's forward and backward, one problem"
                                                                 : "the module's backward")
                                       : "the module's forward";
  if (reference.dtype)
    out += std::string(", in ") + to_string(*reference.dtype) + " (its float inputs and weights cast)";
  if (reference.backward) {
    out +=
        ": given grad_<output>, the gradient of each output, the kernel writes grad_<input> and grad_<weight>, the "
        "gradients of the float inputs and the weights (the module in eval mode)";
    if (reference.with_forward) out += ", and the forward's outputs";
    out += "; checked against autograd in float64";
  }
  return out;
}

std::string describe_input(const Spec& spec, const Param& buffer) {
  const auto it = spec.inputs.find(buffer.name);
  const InputDist dist = it != spec.inputs.end() ? it->second : InputDist{};
  if (spec.reference.pytorch) {
    // A backward's output gradients are the bridge's own draw (get_inputs() does not make them).
    if (spec.reference.backward && buffer.name.rfind("grad_", 0) == 0 && !dist.problem && is_float(buffer.dtype))
      return "an output's gradient, unit normal; later trials signed, heavy-tailed, skewed";
    if (dist.problem || !is_float(buffer.dtype))
      return "the problem's get_inputs() (or the module's weights), every trial";
    return "the problem's get_inputs() (or the module's weights); later trials signed, heavy-tailed, skewed";
  }
  auto number = [](double x) {
    std::string text = std::to_string(x);
    text.erase(text.find_last_not_of('0') + 1);
    if (!text.empty() && text.back() == '.') text.pop_back();
    return text;
  };
  if (!is_float(buffer.dtype)) {
    std::string range;
    if (dist.low && dist.high) {
      range = "[" + dist.low->text() + ", " + dist.high->text() + "]";
    } else {
      const auto [type_low, type_high] = integer_limits(buffer.dtype);
      range = "[" + number(std::max<double>(kDefaultIntegerLow, type_low)) + ", " +
              number(std::min<double>(kDefaultIntegerHigh, type_high)) + "] (the default: no range declared)";
    }
    return std::string(dist.sorted ? "sorted " : "") + "integers in " + range +
           " on every trial: uniform, edge-heavy, repeated, sorted";
  }
  switch (dist.kind) {
    case InputDist::Kind::normal:
      return "normal, mean " + number(dist.a) + ", std " + number(dist.b) +
             "; later trials signed, heavy-tailed, skewed";
    case InputDist::Kind::laplace:
      return "Laplace, mean " + number(dist.a) + ", std " + number(dist.b) +
             "; later trials signed, heavy-tailed, skewed";
    default:
      return "uniform in [" + number(dist.a) + ", " + number(dist.b) + ")" +
             (it == spec.inputs.end() ? " (the default)" : "") + "; later trials signed, heavy-tailed, skewed";
  }
}

const Param* Spec::find_param(const std::string& param_name) const {
  for (const Param& param : params)
    if (param.name == param_name) return &param;
  return nullptr;
}

}  // namespace kernelevolve
