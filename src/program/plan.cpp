// A source's launch plan (program.hpp): found in the source, read from JSON, checked against the spec, and
// bound to a workload.
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "kernelevolve/error.hpp"
#include "kernelevolve/json.hpp"
#include "kernelevolve/program.hpp"

namespace kernelevolve {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

constexpr std::size_t kMaxSteps = 64;  // a plan longer than this is not a program a person would write

bool known_library(const std::string& name) {
  const auto& calls = library_calls();
  return std::find(calls.begin(), calls.end(), name) != calls.end();
}

// What a library step takes (docs/spec-format.md): `buffers` buffers, then `integers` integers (the sizes), then up
// to `optional` more buffers (a bias), and the options it knows. The device checks the rest when it makes the step
// (one float dtype for every buffer, the library there) and before each call (the sizes against the buffers).
enum class OptionKind { boolean, epilogue, extents, positive, math };
struct LibraryOption {
  const char* name;
  OptionKind kind;
  std::int64_t least = 0;  // extents: the smallest value each may take
};
struct LibraryForm {
  std::size_t buffers = 3, integers = 0, optional = 0;
  const char* layout = "";
  int spatial = 0;  // a convolution's or a pooling's spatial dimensions: how many values its extents options hold
  std::vector<LibraryOption> options;
  bool pool = false;      // a pooling: its output by kernel_size, stride and padding
  const char* what = "";  // what it computes, for the model's prompt (library_calls_text)
};

const std::vector<std::string>& epilogues() {
  static const std::vector<std::string> names = {"none", "relu", "gelu", "bias", "bias_relu", "bias_gelu"};
  return names;
}

const LibraryForm& library_form(const std::string& name) {
  static const std::map<std::string, LibraryForm> forms = [] {
    const LibraryOption a_t{"a_transposed", OptionKind::boolean}, b_t{"b_transposed", OptionKind::boolean};
    // "fp32" (the default) or "tf32": f32 data rounded to TF32 on tensor cores, where the run's precision allows it.
    const LibraryOption math{"math", OptionKind::math};
    std::vector<LibraryOption> conv = {{"stride", OptionKind::extents, 1},
                                       {"padding", OptionKind::extents, 0},
                                       {"dilation", OptionKind::extents, 1},
                                       {"groups", OptionKind::positive}};
    std::vector<LibraryOption> transposed = conv;
    transposed.push_back({"output_padding", OptionKind::extents, 0});
    conv.push_back(math);
    transposed.push_back(math);
    const char* conv2 = "x, w, y, N, C, H, W, K, R, S[, bias]";
    const char* conv3 = "x, w, y, N, C, D, H, W, K, T, R, S[, bias]";
    std::map<std::string, LibraryForm> out;
    out["cublaslt.matmul"] = {3,
                              3,
                              1,
                              "A, B, D, M, N, K[, bias]",
                              0,
                              {{"epilogue", OptionKind::epilogue}, b_t, math},
                              false,
                              "row-major D[M, N] = epilogue(A[M, K] B + bias[N]), B stored [K, N] or, b_transposed, "
                              "[N, K] (a Linear weight)"};
    out["cublas.gemm"] = {3,
                          3,
                          0,
                          "A, B, D, M, N, K",
                          0,
                          {a_t, b_t, math},
                          false,
                          "the same product through cuBLAS's GEMM, the call torch.mm makes, without an epilogue (add "
                          "a bias in the next kernel); A stored [M, K] or, a_transposed, [K, M]"};
    out["cublas.gemm_batched"] = {3,
                                  4,
                                  0,
                                  "A, B, D, BATCH, M, N, K",
                                  0,
                                  {a_t, b_t, math},
                                  false,
                                  "BATCH such products, each operand's matrices one after another, the call "
                                  "torch.bmm makes"};
    out["cudnn.conv2d"] = {3, 7, 1, conv2, 2, conv, false, "NCHW torch.nn.functional.conv2d, w [K, C / groups, R, S]"};
    out["cudnn.conv3d"] = {3, 9, 1, conv3, 3, conv, false, "NCDHW conv3d, w [K, C / groups, T, R, S]"};
    out["cudnn.conv_transpose2d"] = {3,
                                     7,
                                     1,
                                     conv2,
                                     2,
                                     transposed,
                                     false,
                                     "NCHW conv_transpose2d, w [C, K / groups, R, S] (ConvTranspose's weight); "
                                     "output_padding below the stride"};
    out["cudnn.conv_transpose3d"] = {3,
                                     9,
                                     1,
                                     conv3,
                                     3,
                                     transposed,
                                     false,
                                     "NCDHW conv_transpose3d, w [C, K / groups, T, R, S]; output_padding below the "
                                     "stride"};
    out["cudnn.avg_pool3d"] = {2,
                               5,
                               0,
                               "x, y, N, C, D, H, W",
                               3,
                               {{"kernel_size", OptionKind::extents, 1},
                                {"stride", OptionKind::extents, 1},
                                {"padding", OptionKind::extents, 0},
                                {"count_include_pad", OptionKind::boolean}},
                               true,
                               "NCDHW avg_pool3d without ceil_mode; kernel_size is needed"};
    return out;
  }();
  return forms.at(name);
}

// "2", or `count` values "1,2" / "1,2,3": one for every spatial dimension, or one each (outermost first). Empty
// when the text is neither.
std::vector<std::int64_t> parse_extents(const std::string& text, int count) {
  std::vector<std::int64_t> values;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    std::size_t used = 0;
    try {
      values.push_back(std::stoll(item, &used));
    } catch (const std::exception&) {
      return {};
    }
    if (used != item.size() || item.empty() || std::isspace(static_cast<unsigned char>(item[0]))) return {};
  }
  if (text.empty() || text.back() == ',') return {};
  if (values.size() == 1) values.assign(static_cast<std::size_t>(count), values[0]);
  if (values.size() != static_cast<std::size_t>(count)) return {};
  return values;
}

// A library step's option `key` read as its form says, or `fallback` in every dimension when absent. The plan
// was checked (check_library_step), so the text parses.
std::vector<std::int64_t> extents_option(const PlanStep& step, const char* key, int count, std::int64_t fallback) {
  const auto it = step.options.find(key);
  return it == step.options.end() ? std::vector<std::int64_t>(static_cast<std::size_t>(count), fallback)
                                  : parse_extents(it->second, count);
}

// The name a library call's library goes by in messages: "cuDNN", "cuBLAS" or "cuBLASLt".
std::string library_name(const std::string& call) {
  if (call.rfind("cudnn.", 0) == 0) return "cuDNN";
  return call.rfind("cublaslt.", 0) == 0 ? "cuBLASLt" : "cuBLAS";
}

// Checks a library step's arguments and options against its form, and its math against its data and the spec's
// precision; throws PlanError naming what is wrong.
void check_library_step(const PlanStep& step, const Spec& spec, const std::vector<Temporary>& temporaries,
                        const std::string& where) {
  const LibraryForm& form = library_form(step.library);
  const std::string call = "the plan's " + where + " (" + step.library + ")";
  const std::size_t given = step.args.size();
  if (given < form.buffers + form.integers || given > form.buffers + form.integers + form.optional) {
    throw PlanError(call + " takes " + form.layout + ": " + std::to_string(given) + " argument(s) given");
  }
  for (std::size_t i = 0; i < given; ++i) {
    const StepArg& a = step.args[i];
    const bool buffer = i < form.buffers || i >= form.buffers + form.integers;
    const Param* p = a.kind == StepArg::Kind::param ? &spec.params.at(a.index) : nullptr;
    const bool is_buffer = a.kind == StepArg::Kind::temporary || (p && p->is_buffer());
    const bool is_integer =
        a.kind == StepArg::Kind::value || (p && !p->is_buffer() && p->dtype != DType::f16 && p->dtype != DType::bf16 &&
                                           p->dtype != DType::f32 && p->dtype != DType::f64);
    if (buffer && !is_buffer) {
      throw PlanError(call + " takes " + form.layout + ": argument " + std::to_string(i + 1) + " ('" + a.text +
                      "') must be a buffer (a param's or a temporary)");
    }
    if (!buffer && !is_integer) {
      throw PlanError(call + " takes " + form.layout + ": argument " + std::to_string(i + 1) + " ('" + a.text +
                      "') must be an integer (a size or an expression)");
    }
  }
  std::string known;
  for (const LibraryOption& o : form.options) known += std::string(known.empty() ? "" : ", ") + o.name;
  for (const auto& [key, text] : step.options) {
    const auto option = std::find_if(form.options.begin(), form.options.end(),
                                     [&key = key](const LibraryOption& o) { return key == o.name; });
    if (option == form.options.end()) {
      throw PlanError(call + ": " + step.library + " has no option '" + key + "' (" + known + ")");
    }
    bool ok = true;
    std::string wanted;
    switch (option->kind) {
      case OptionKind::boolean:
        ok = text == "true" || text == "false";
        wanted = "\"true\" or \"false\"";
        break;
      case OptionKind::epilogue:
        ok = std::find(epilogues().begin(), epilogues().end(), text) != epilogues().end();
        wanted = "none, relu, gelu, bias, bias_relu or bias_gelu";
        break;
      // At most the libraries' int, as the sizes are (check_library_sizes): the output extents' arithmetic, here
      // and on the device, then stays within 64 bits.
      case OptionKind::extents: {
        const std::vector<std::int64_t> values = parse_extents(text, form.spatial);
        ok = !values.empty() && std::all_of(values.begin(), values.end(), [&](std::int64_t v) {
          return v >= option->least && v <= std::numeric_limits<std::int32_t>::max();
        });
        wanted = std::string("one integer or ") + (form.spatial == 3 ? "three (\"d,h,w\")" : "two (\"h,w\")") +
                 ", each at least " + std::to_string(option->least) + " and at most 2^31 - 1";
        break;
      }
      case OptionKind::positive: {
        const std::vector<std::int64_t> values = parse_extents(text, 1);
        ok = values.size() == 1 && values[0] >= 1 && values[0] <= std::numeric_limits<std::int32_t>::max();
        wanted = "an integer, at least 1 and at most 2^31 - 1";
        break;
      }
      case OptionKind::math:
        ok = text == "fp32" || text == "tf32";
        wanted = "\"fp32\" or \"tf32\"";
        break;
    }
    if (!ok) throw PlanError(call + ": " + key + " '" + text + "' is not " + wanted);
  }
  if (form.pool && !step.options.count("kernel_size")) {
    throw PlanError(call + " needs its kernel_size (one integer or three, \"d,h,w\")");
  }
  if (const auto math = step.options.find("math"); math != step.options.end() && math->second == "tf32") {
    // The first buffer's dtype is every buffer's (the device checks that they agree).
    const StepArg& first = step.args.front();
    const DType dtype =
        first.kind == StepArg::Kind::temporary ? temporaries.at(first.index).dtype : spec.params.at(first.index).dtype;
    if (dtype != DType::f32) {
      throw PlanError(call + ": \"math\": \"tf32\" is for f32 data, and its buffers are " + to_string(dtype) +
                      " (f16 and bf16 run on tensor cores already)");
    }
    if (const std::string why = tf32_refusal(spec.precision_in_effect(), step.library); !why.empty())
      throw PlanError(call + ": \"math\": \"tf32\": " + why);
  }
  if (step.library == "cublaslt.matmul") {
    const auto e = step.options.find("epilogue");
    const bool bias = e != step.options.end() && e->second.rfind("bias", 0) == 0;
    if (bias != (given == form.buffers + form.integers + 1)) {
      throw PlanError(call + (bias ? ": the epilogue " + e->second + " needs a bias, its 7th argument"
                                   : ": a 7th argument (a bias) needs an epilogue that adds it (bias, bias_relu, "
                                     "bias_gelu)"));
    }
  }
}

// Checks a library step's sizes at one workload: each integer at least 1 and within the libraries' int, and a
// convolution's output not empty (with the formulas of torch.nn.functional's conv and conv_transpose); throws
// PlanError naming the argument.
void check_library_sizes(const PlanStep& step, const std::vector<std::int64_t>& integers, const std::string& where) {
  const LibraryForm& form = library_form(step.library);
  const std::string call = "the plan's " + where + " (" + step.library + ")";
  for (std::size_t i = 0; i < integers.size(); ++i) {
    const StepArg& a = step.args[form.buffers + i];
    const std::string named = "argument " + std::to_string(form.buffers + i + 1) + " ('" + a.text +
                              "' = " + std::to_string(integers[i]) + ")";
    if (integers[i] < 1) throw PlanError(call + ": " + named + " must be at least 1");
    if (integers[i] > std::numeric_limits<std::int32_t>::max()) {
      throw PlanError(call + ": " + named + " is beyond the library's 32-bit sizes (at most 2^31 - 1)");
    }
  }
  if (form.spatial == 0) return;
  const auto n = static_cast<std::size_t>(form.spatial);
  if (form.pool) {
    // N, C, the input's extents. Whatever the stride, a window that fits the padded input makes one output.
    const auto kernel = extents_option(step, "kernel_size", form.spatial, 1);
    const auto padding = extents_option(step, "padding", form.spatial, 0);
    for (std::size_t d = 0; d < n; ++d) {
      if (2 * padding[d] > kernel[d]) {
        throw PlanError(call + ": padding " + std::to_string(padding[d]) + " is more than half its kernel " +
                        std::to_string(kernel[d]));
      }
      if (integers[2 + d] + 2 * padding[d] < kernel[d]) {
        throw PlanError(call + ": no output in spatial dimension " + std::to_string(d + 1) + " (input " +
                        std::to_string(integers[2 + d]) + ", kernel " + std::to_string(kernel[d]) + ", padding " +
                        std::to_string(padding[d]) + ")");
      }
    }
    return;
  }
  // N, C, the input's extents, K, the filter's extents.
  const std::int64_t c = integers[1], k = integers[2 + n];
  const bool transposed = step.library.find("transpose") != std::string::npos;
  const std::int64_t groups = extents_option(step, "groups", 1, 1)[0];
  if (c % groups != 0 || k % groups != 0) {
    throw PlanError(call + ": groups " + std::to_string(groups) + " must divide both C = " + std::to_string(c) +
                    " and K = " + std::to_string(k));
  }
  const auto stride = extents_option(step, "stride", form.spatial, 1);
  const auto padding = extents_option(step, "padding", form.spatial, 0);
  const auto dilation = extents_option(step, "dilation", form.spatial, 1);
  const auto output_padding = extents_option(step, "output_padding", form.spatial, 0);
  for (std::size_t d = 0; d < n; ++d) {
    const std::int64_t in = integers[2 + d], span = dilation[d] * (integers[3 + n + d] - 1) + 1;
    const std::int64_t out = transposed ? (in - 1) * stride[d] - 2 * padding[d] + span + output_padding[d]
                                        : (in + 2 * padding[d] - span) / stride[d] + 1;
    if (transposed && output_padding[d] >= stride[d]) {
      throw PlanError(call + ": output_padding " + std::to_string(output_padding[d]) + " must be below its stride " +
                      std::to_string(stride[d]) + " (cuDNN computes the forward convolution's gradient)");
    }
    if (out < 1 || (!transposed && in + 2 * padding[d] < span)) {
      throw PlanError(call + ": no output in spatial dimension " + std::to_string(d + 1) + " (input " +
                      std::to_string(in) + ", filter " + std::to_string(integers[3 + n + d]) + ", stride " +
                      std::to_string(stride[d]) + ", padding " + std::to_string(padding[d]) + ", dilation " +
                      std::to_string(dilation[d]) + ")");
    }
  }
}

std::string text_of(const element& value, const std::string& where) {
  switch (value.type()) {
    case element_type::STRING: return std::string(std::string_view(value.get_string().value()));
    case element_type::INT64: return std::to_string(int64_t(value.get_int64().value()));
    case element_type::UINT64: return std::to_string(uint64_t(value.get_uint64().value()));
    case element_type::BOOL: return value.get_bool().value() ? "true" : "false";
    default: throw PlanError("the plan's " + where + " must be a string or an integer");
  }
}

Expr expression(const element& value, const std::string& where) {
  const std::string text = text_of(value, where);
  try {
    return Expr::parse(text, "plan " + where);
  } catch (const Error& e) {
    throw PlanError(std::string("the plan's ") + where + ": " + e.what());
  }
}

// The names an expression may read: sizes, scalars and tunables.
void check_names(const Expr& e, const Spec& spec, const std::string& where) {
  for (const std::string& name : e.names()) {
    const Param* p = spec.find_param(name);
    const bool ok = (p && (p->role == Role::size || p->role == Role::scalar)) || spec.tunables.count(name);
    if (!ok) {
      throw PlanError("the plan's " + where + " reads '" + name +
                      "', which is not a size, a scalar or a tunable of the spec");
    }
  }
}

void dims3(const element& value, Expr (&out)[3], const std::string& where, const Spec& spec) {
  simdjson::dom::array list;
  if (value.get_array().get(list) || list.size() < 1 || list.size() > 3) {
    throw PlanError("the plan's " + where + " must be a list of 1 to 3 expressions");
  }
  std::size_t d = 0;
  for (element item : list) {
    out[d] = expression(item, where + "[" + std::to_string(d) + "]");
    check_names(out[d], spec, where);
    ++d;
  }
  for (; d < 3; ++d) out[d] = Expr::constant(1);
}

}  // namespace

bool Plan::calls_library() const {
  return std::any_of(steps.begin(), steps.end(), [](const PlanStep& s) { return s.is_library(); });
}

std::vector<Param> Plan::signature(const Spec& spec, std::size_t step) const {
  std::vector<Param> out;
  const PlanStep& s = steps.at(step);
  for (std::size_t i = 0; i < s.args.size(); ++i) {
    const StepArg& a = s.args[i];
    switch (a.kind) {
      case StepArg::Kind::param: out.push_back(spec.params.at(a.index)); break;
      case StepArg::Kind::temporary: {
        Param p;
        p.name = temporaries.at(a.index).name;
        p.dtype = temporaries.at(a.index).dtype;
        p.role = Role::inout;
        out.push_back(p);
        break;
      }
      case StepArg::Kind::value: {
        Param p;
        p.name = "arg" + std::to_string(i);
        p.dtype = DType::i64;
        p.role = Role::size;
        out.push_back(p);
        break;
      }
    }
  }
  return out;
}

namespace {

bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Where `marker` starts if the text at `at` is only whitespace and then the marker; npos otherwise.
std::size_t marker_after_space(const std::string& source, std::size_t at, const std::string& marker) {
  while (at < source.size() && std::isspace(static_cast<unsigned char>(source[at]))) ++at;
  return source.compare(at, marker.size(), marker) == 0 ? at : std::string::npos;
}

// The offsets of plan markers that open a block comment in C, C++, CUDA or HIP source ("/* kernelevolve-plan"),
// as the compiler would see them: not inside a string or character literal, a // comment, another comment's
// text, or lines that `#if 0` removes.
std::vector<std::size_t> c_plan_markers(const std::string& source, const std::string& marker) {
  std::vector<std::size_t> found;
  const std::size_t n = source.size();
  int skipped_depth = 0;  // > 0 inside `#if 0`: the #if nesting since it
  bool line_start = true;
  for (std::size_t at = 0; at < n;) {
    const char c = source[at];
    if (line_start) {
      std::size_t p = at;
      while (p < n && (source[p] == ' ' || source[p] == '\t')) ++p;
      if (p < n && source[p] == '#') {
        ++p;
        while (p < n && (source[p] == ' ' || source[p] == '\t')) ++p;
        std::size_t word_end = p;
        while (word_end < n && is_ident_char(source[word_end])) ++word_end;
        const std::string directive = source.substr(p, word_end - p);
        if (skipped_depth > 0) {
          if (directive == "if" || directive == "ifdef" || directive == "ifndef") ++skipped_depth;
          else if (directive == "endif") --skipped_depth;
          else if (skipped_depth == 1 && (directive == "else" || directive == "elif")) skipped_depth = 0;
        } else if (directive == "if") {
          std::size_t v = word_end;
          while (v < n && (source[v] == ' ' || source[v] == '\t')) ++v;
          if (v < n && source[v] == '0' && (v + 1 >= n || !is_ident_char(source[v + 1]))) skipped_depth = 1;
        }
      }
      if (skipped_depth > 0) {  // the whole line is gone
        const std::size_t eol = source.find('\n', at);
        at = eol == std::string::npos ? n : eol + 1;
        continue;
      }
      line_start = false;
    }
    if (c == '\n') {
      line_start = true;
      ++at;
    } else if (c == '/' && at + 1 < n && source[at + 1] == '/') {
      const std::size_t eol = source.find('\n', at);
      at = eol == std::string::npos ? n : eol;
    } else if (c == '/' && at + 1 < n && source[at + 1] == '*') {
      if (const std::size_t m = marker_after_space(source, at + 2, marker); m != std::string::npos) found.push_back(m);
      const std::size_t close = source.find("*/", at + 2);
      // Lines inside a comment do not start directives; the JSON's own lines are read by the caller.
      at = close == std::string::npos ? n : close + 2;
    } else if (c == 'R' && at + 1 < n && source[at + 1] == '"' && (at == 0 || !is_ident_char(source[at - 1]))) {
      const std::size_t open = source.find('(', at + 2);  // a C++ raw string: R"delim( ... )delim"
      if (open == std::string::npos) break;
      const std::string close = ")" + source.substr(at + 2, open - at - 2) + "\"";
      const std::size_t end = source.find(close, open + 1);
      at = end == std::string::npos ? n : end + close.size();
    } else if (c == '"' || c == '\'') {
      ++at;
      while (at < n && source[at] != c && source[at] != '\n') at += source[at] == '\\' ? 2 : 1;
      ++at;
    } else {
      ++at;
    }
  }
  return found;
}

// The offsets of plan markers that open a triple-quoted string standing as a statement of its own in Python (a
// Triton source's """kernelevolve-plan ... """): not in a # comment, nor inside another string.
std::vector<std::size_t> python_plan_markers(const std::string& source, const std::string& marker) {
  std::vector<std::size_t> found;
  const std::size_t n = source.size();
  bool line_blank = true;  // only whitespace since the line began
  for (std::size_t at = 0; at < n;) {
    const char c = source[at];
    if (c == '\n') {
      line_blank = true;
      ++at;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++at;
    } else if (c == '#') {
      const std::size_t eol = source.find('\n', at);
      at = eol == std::string::npos ? n : eol;
    } else if (c == '"' || c == '\'') {
      const bool statement = line_blank;
      line_blank = false;
      const bool triple = source.compare(at, 3, std::string(3, c)) == 0;
      if (triple) {
        if (statement) {
          if (const std::size_t m = marker_after_space(source, at + 3, marker); m != std::string::npos)
            found.push_back(m);
        }
        const std::size_t end = source.find(std::string(3, c), at + 3);
        at = end == std::string::npos ? n : end + 3;
      } else {
        ++at;
        while (at < n && source[at] != c && source[at] != '\n') at += source[at] == '\\' ? 2 : 1;
        ++at;
      }
    } else {
      // A string prefix (r, b, f, u) stays part of the statement's first token: the string after it is not one.
      line_blank = false;
      ++at;
    }
  }
  return found;
}

}  // namespace

PlanBlock find_plan_block(const std::string& source, Language language) {
  PlanBlock block;
  const std::string marker = kPlanMarker;
  if (source.find(marker) == std::string::npos) return block;  // the common case: no lexing
  const bool python = language == Language::triton || language == Language::pytorch;
  const std::vector<std::size_t> markers =
      python ? python_plan_markers(source, marker) : c_plan_markers(source, marker);
  if (markers.empty()) return block;
  if (markers.size() > 1) {
    throw PlanError(std::string("the source declares '") + kPlanMarker + "' twice: a program has one plan");
  }
  block.marker = markers.front();
  std::size_t at = block.marker + marker.size();
  while (at < source.size() && std::isspace(static_cast<unsigned char>(source[at]))) ++at;
  if (at >= source.size() || source[at] != '{') {
    throw PlanError(std::string("'") + kPlanMarker + "' must be followed by the plan, a JSON object in braces");
  }
  block.begin = at;
  int depth = 0;
  bool in_string = false;
  for (; at < source.size(); ++at) {
    const char c = source[at];
    if (in_string) {
      if (c == '\\') ++at;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{') ++depth;
    else if (c == '}' && --depth == 0) {
      block.end = at + 1;
      return block;
    }
  }
  throw PlanError(std::string("the plan after '") + kPlanMarker + "' never closes its braces");
}

Plan plan_of(const Spec& spec, const std::string& source, Language language) {
  Plan plan;
  const bool cpu = is_cpu_language(language);
  plan.cpu = cpu;
  const PlanBlock block = find_plan_block(source, language);
  if (!block.found()) {
    PlanStep step;
    step.kernel = spec.entry;
    if (spec.launch && !cpu) step.launch = *spec.launch;
    for (std::size_t i = 0; i < spec.params.size(); ++i) {
      StepArg a;
      a.kind = StepArg::Kind::param;
      a.index = i;
      a.text = spec.params[i].name;
      step.args.push_back(a);
    }
    plan.steps.push_back(std::move(step));
    return plan;
  }
  plan.declared = true;
  simdjson::dom::parser parser;
  element root;
  if (auto error = parser.parse(source.data() + block.begin, block.end - block.begin).get(root)) {
    throw PlanError(std::string("the plan is not valid JSON: ") + simdjson::error_message(error));
  }
  simdjson::dom::object object;
  if (root.get_object().get(object)) throw PlanError("the plan must be a JSON object");
  std::set<std::string> names;  // params and temporaries: what an argument may name
  for (const Param& p : spec.params) names.insert(p.name);
  for (auto field : object) {
    const std::string key(field.key);
    if (key == "temporaries") {
      simdjson::dom::array list;
      if (field.value.get_array().get(list)) throw PlanError("the plan's temporaries must be a list");
      for (element item : list) {
        const std::string where = "temporaries[" + std::to_string(plan.temporaries.size()) + "]";
        simdjson::dom::object t;
        if (item.get_object().get(t)) throw PlanError("the plan's " + where + " must be an object");
        Temporary temp;
        bool has_dtype = false, has_shape = false;
        for (auto f : t) {
          const std::string k(f.key);
          if (k == "name") {
            temp.name = text_of(f.value, where + ".name");
          } else if (k == "dtype") {
            const std::string d = text_of(f.value, where + ".dtype");
            const auto parsed = parse_dtype(d);
            if (!parsed) throw PlanError("the plan's " + where + ".dtype '" + d + "' is not a dtype");
            temp.dtype = *parsed;
            has_dtype = true;
          } else if (k == "shape") {
            simdjson::dom::array dims;
            if (f.value.get_array().get(dims) || dims.size() == 0) {
              throw PlanError("the plan's " + where + ".shape must be a non-empty list of expressions");
            }
            for (element dim : dims) {
              temp.shape.push_back(expression(dim, where + ".shape"));
              check_names(temp.shape.back(), spec, where + ".shape");
            }
            has_shape = true;
          } else {
            throw PlanError("the plan's " + where + " has an unknown field '" + k + "' (name, dtype, shape)");
          }
        }
        if (!is_identifier(temp.name)) throw PlanError("the plan's " + where + ".name must be an identifier");
        if (!has_dtype || !has_shape) throw PlanError("the plan's " + where + " needs a dtype and a shape");
        if (!names.insert(temp.name).second) {
          throw PlanError("the plan's temporary '" + temp.name + "' has the name of a param or another temporary");
        }
        plan.temporaries.push_back(std::move(temp));
      }
    } else if (key != "steps") {
      throw PlanError("the plan has an unknown field '" + key + "' (temporaries, steps)");
    }
  }
  element steps;
  simdjson::dom::array list;
  if (object["steps"].get(steps) || steps.get_array().get(list) || list.size() == 0) {
    throw PlanError("the plan needs \"steps\": a non-empty list of kernels (and library calls) to run in order");
  }
  if (list.size() > kMaxSteps) throw PlanError("the plan has more than " + std::to_string(kMaxSteps) + " steps");
  for (element item : list) {
    const std::string where = "steps[" + std::to_string(plan.steps.size()) + "]";
    simdjson::dom::object s;
    if (item.get_object().get(s)) throw PlanError("the plan's " + where + " must be an object");
    PlanStep step;
    if (spec.launch && !cpu) step.launch = *spec.launch;
    bool has_args = false;
    for (auto f : s) {
      const std::string k(f.key);
      if (k == "kernel") {
        step.kernel = text_of(f.value, where + ".kernel");
      } else if (k == "library") {
        step.library = text_of(f.value, where + ".library");
      } else if (k == "grid" || k == "block") {
        if (cpu)
          throw PlanError("the plan's " + where + "." + k + ": a CPU step runs on the calling thread, with no grid");
        dims3(f.value, k == "grid" ? step.launch.grid : step.launch.block, where + "." + k, spec);
      } else if (k == "shared_bytes") {
        if (cpu) throw PlanError("the plan's " + where + ".shared_bytes: a CPU step has no shared memory");
        step.launch.shared_bytes = expression(f.value, where + ".shared_bytes");
        check_names(step.launch.shared_bytes, spec, where + ".shared_bytes");
      } else if (k == "args") {
        simdjson::dom::array args;
        if (f.value.get_array().get(args)) throw PlanError("the plan's " + where + ".args must be a list");
        has_args = true;
        for (element a : args) {
          StepArg arg;
          arg.text = text_of(a, where + ".args[" + std::to_string(step.args.size()) + "]");
          auto is_temp = [&](const Temporary& t) { return t.name == arg.text; };
          const auto temp = std::find_if(plan.temporaries.begin(), plan.temporaries.end(), is_temp);
          const Param* p = spec.find_param(arg.text);
          if (p && p->is_buffer()) {
            arg.kind = StepArg::Kind::param;
            arg.index = static_cast<std::size_t>(p - spec.params.data());
          } else if (temp != plan.temporaries.end()) {
            arg.kind = StepArg::Kind::temporary;
            arg.index = static_cast<std::size_t>(temp - plan.temporaries.begin());
          } else if (p) {
            arg.kind = StepArg::Kind::param;  // a size or scalar, passed as the spec's params are
            arg.index = static_cast<std::size_t>(p - spec.params.data());
          } else {
            arg.kind = StepArg::Kind::value;
            const std::string at = where + ".args[" + std::to_string(step.args.size()) + "]";
            arg.value = expression(a, at);
            if (arg.value.names().size() == 1 && arg.value.names()[0] == arg.text && !spec.tunables.count(arg.text)) {
              throw PlanError("the plan's " + at + " names '" + arg.text +
                              "', which is neither a param, a temporary, nor a tunable");
            }
            check_names(arg.value, spec, at);
          }
          step.args.push_back(std::move(arg));
        }
      } else if (k == "num_warps" || k == "num_stages") {
        if (language != Language::triton)
          throw PlanError("the plan's " + where + "." + k + ": only a Triton kernel step takes its own " + k);
        Expr e = expression(f.value, where + "." + k);
        // Compile options are fixed for a candidate: tunables and numbers only, never a workload's size.
        for (const std::string& name : e.names()) {
          if (!spec.tunables.count(name))
            throw PlanError("the plan's " + where + "." + k + " names '" + name + "', which is not a tunable");
        }
        (k == "num_warps" ? step.num_warps : step.num_stages) = std::move(e);
      } else if (k == "options") {
        simdjson::dom::object options;
        if (f.value.get_object().get(options)) throw PlanError("the plan's " + where + ".options must be an object");
        for (auto o : options)
          step.options[std::string(o.key)] = text_of(o.value, where + ".options." + std::string(o.key));
      } else {
        throw PlanError("the plan's " + where + " has an unknown field '" + k +
                        "' (kernel or library, grid, block, shared_bytes, num_warps, num_stages, args, options)");
      }
    }
    if (step.kernel.empty() == step.library.empty()) {
      throw PlanError("the plan's " + where + " must name either a \"kernel\" of the source or a \"library\" call");
    }
    if (!step.kernel.empty() && !is_identifier(step.kernel)) {
      throw PlanError("the plan's " + where + ".kernel '" + step.kernel + "' is not an identifier");
    }
    if (step.is_library() && (step.num_warps || step.num_stages))
      throw PlanError("the plan's " + where + ": only a Triton kernel step takes its own num_warps and num_stages");
    if (step.is_library()) {
      if (!known_library(step.library)) {
        std::string known;
        for (const auto& c : library_calls()) known += (known.empty() ? "" : ", ") + c;
        throw PlanError("the plan's " + where + " calls '" + step.library + "', which is not a library call (" + known +
                        ")");
      }
      if (cpu)
        throw PlanError("the plan's " + where + " calls " + step.library + ", a GPU library, from a CPU program");
      if (!has_args) throw PlanError("the plan's " + where + " (" + step.library + ") needs its args");
      check_library_step(step, spec, plan.temporaries, where);
    } else if (!step.options.empty()) {
      throw PlanError("the plan's " + where + ".options: only a library step takes options");
    }
    if (!has_args) {
      // A kernel without its own list takes the spec's params in order, then the temporaries.
      for (std::size_t i = 0; i < spec.params.size(); ++i)
        step.args.push_back({StepArg::Kind::param, i, {}, spec.params[i].name});
      for (std::size_t i = 0; i < plan.temporaries.size(); ++i)
        step.args.push_back({StepArg::Kind::temporary, i, {}, plan.temporaries[i].name});
    }
    plan.steps.push_back(std::move(step));
  }
  return plan;
}

// Written from the forms the plan is checked against, so that what the model is told cannot drift from what is
// accepted.
std::string library_calls_text() {
  std::string text;
  for (const std::string& name : library_calls()) {
    const LibraryForm& form = library_form(name);
    std::string args = form.layout;
    const std::size_t bias = args.find("[, bias]");
    if (bias != std::string::npos) args = args.substr(0, bias) + "] (then bias";
    text += std::string(text.empty() ? "" : "; ") + "{\"library\": \"" + name + "\", \"args\": [" + args +
            (bias != std::string::npos ? ")" : "]");
    std::string options;
    for (const LibraryOption& o : form.options) {
      std::string values;
      switch (o.kind) {
        case OptionKind::boolean: values = "\"true\""; break;
        case OptionKind::epilogue:
          for (const std::string& e : epilogues()) values += (values.empty() ? "" : "|") + e;
          break;
        case OptionKind::extents: values = form.spatial == 3 ? "\"a\" or \"a,b,c\"" : "\"a\" or \"a,b\""; break;
        case OptionKind::positive: values = "an integer"; break;
        case OptionKind::math: values = "fp32|tf32"; break;
      }
      options += std::string(options.empty() ? "" : ", ") + "\"" + o.name + "\": " + values;
    }
    if (!options.empty()) text += ", \"options\": {" + options + "}";
    text += std::string("}: ") + form.what;
  }
  return text +
         ". Buffers of one dtype (f32, f16 or bf16; f32 accumulation; \"math\": \"tf32\" rounds f32 inputs to TF32 "
         "where the run's precision allows it, fp32 by default); any buffer may be a temporary";
}

std::string tf32_refusal(const Precision& precision, const std::string& library) {
  const std::string refused = "TF32 in " + library_name(library) + " is not allowed: the run's precision is ";
  if (precision.policy == PrecisionPolicy::strict) return refused + "strict (fp32 everywhere)";
  if (library.rfind("cudnn.", 0) == 0) {
    if (precision.cudnn_tf32) return "";
    return refused + "as-run, but your PyTorch runs convolutions in fp32 (torch.backends.cudnn.allow_tf32 is off)";
  }
  if (precision.matmul_tf32) return "";
  return refused +
         "as-run, but your PyTorch runs matrix products in fp32 (torch.backends.cuda.matmul.allow_tf32 is off)";
}

std::string to_json(const Plan& plan) {
  std::ostringstream out;
  auto list = [&](const auto& items, auto&& each) {
    out << "[";
    bool first = true;
    for (const auto& item : items) {
      if (!first) out << ", ";
      each(item);
      first = false;
    }
    out << "]";
  };
  out << "{";
  if (!plan.temporaries.empty()) {
    out << "\"temporaries\": ";
    list(plan.temporaries, [&](const Temporary& t) {
      out << "{\"name\": " << json_quote(t.name) << ", \"dtype\": \"" << to_string(t.dtype) << "\", \"shape\": ";
      list(t.shape, [&](const Expr& e) { out << json_quote(e.text()); });
      out << "}";
    });
    out << ", ";
  }
  out << "\"steps\": ";
  list(plan.steps, [&](const PlanStep& s) {
    if (s.is_library()) {
      out << "{\"library\": " << json_quote(s.library);
    } else if (plan.cpu) {
      out << "{\"kernel\": " << json_quote(s.kernel);
    } else {
      out << "{\"kernel\": " << json_quote(s.kernel) << ", \"grid\": ";
      list(s.launch.grid, [&](const Expr& e) { out << json_quote(e.text()); });
      out << ", \"block\": ";
      list(s.launch.block, [&](const Expr& e) { out << json_quote(e.text()); });
      out << ", \"shared_bytes\": " << json_quote(s.launch.shared_bytes.text());
      if (s.num_warps) out << ", \"num_warps\": " << json_quote(s.num_warps->text());
      if (s.num_stages) out << ", \"num_stages\": " << json_quote(s.num_stages->text());
    }
    out << ", \"args\": ";
    list(s.args, [&](const StepArg& a) { out << json_quote(a.text); });
    if (!s.options.empty()) {
      out << ", \"options\": {";
      bool first = true;
      for (const auto& [k, v] : s.options) {
        out << (first ? "" : ", ") << json_quote(k) << ": " << json_quote(v);
        first = false;
      }
      out << "}";
    }
    out << "}";
  });
  out << "}";
  return out.str();
}

BoundPlan bind_plan(const Plan& plan, const Spec& spec, const Bindings& workload, const Bindings& tunables) {
  BoundPlan bound;
  const Bindings names = spec.bindings(workload, tunables);
  auto eval = [&](const Expr& e, const std::string& where) {
    try {
      return e.eval(names);
    } catch (const Error& err) {
      throw PlanError("the plan's " + where + " cannot be evaluated: " + err.what());
    }
  };
  for (const Temporary& temp : plan.temporaries) {
    std::size_t elements = 1;
    for (const Expr& dim : temp.shape) {
      const std::int64_t d = eval(dim, "temporary '" + temp.name + "'");
      if (d < 0) {
        throw PlanError("the plan's temporary '" + temp.name + "' has a negative dimension (" + dim.text() + " = " +
                        std::to_string(d) + ")");
      }
      const auto u = static_cast<std::size_t>(d);
      if (u != 0 && elements > std::numeric_limits<std::size_t>::max() / 16 / u) {
        throw PlanError("the plan's temporary '" + temp.name + "' has more elements than memory could hold");
      }
      elements *= u;
    }
    bound.temporary_elements.push_back(elements);
    bound.temporary_bytes.push_back(elements * dtype_size(temp.dtype));
    bound.total_temporary_bytes += bound.temporary_bytes.back();
  }
  for (std::size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep& step = plan.steps[s];
    LaunchDims dims;
    if (!step.is_library()) {
      const std::string where = "steps[" + std::to_string(s) + "] (" + step.kernel + ")";
      for (int d = 0; d < 3; ++d) {
        dims.grid[d] = eval(step.launch.grid[d], where + " grid");
        dims.block[d] = eval(step.launch.block[d], where + " block");
      }
      dims.shared_bytes = eval(step.launch.shared_bytes, where + " shared_bytes");
    }
    bound.dims.push_back(dims);
    std::vector<std::int64_t> values;
    for (const StepArg& a : step.args)
      values.push_back(a.kind == StepArg::Kind::value ? eval(a.value, "steps[" + std::to_string(s) + "] args") : 0);
    if (step.is_library()) {
      // The integers a library step is given, a size's from the workload.
      const LibraryForm& form = library_form(step.library);
      std::vector<std::int64_t> integers;
      for (std::size_t i = form.buffers; i < form.buffers + form.integers && i < step.args.size(); ++i) {
        const StepArg& a = step.args[i];
        const auto named = a.kind == StepArg::Kind::param ? names.find(spec.params.at(a.index).name) : names.end();
        integers.push_back(a.kind == StepArg::Kind::value ? values[i] : named != names.end() ? named->second : 1);
      }
      if (integers.size() == form.integers) check_library_sizes(step, integers, "steps[" + std::to_string(s) + "]");
    }
    bound.values.push_back(std::move(values));
  }
  return bound;
}

std::size_t temporaries_limit(std::size_t device_bytes) {
  return device_bytes ? device_bytes / 4 : std::size_t{4} << 30;
}

}  // namespace kernelevolve
