#include "triton/triton_compiler.hpp"

#include <unistd.h>

#include <vector>

#include <simdjson.h>

#include "core/shipped_file.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/json.hpp"

namespace kernelevolve::triton {

namespace {

std::mutex g_mode_mutex;
SandboxMode g_mode = SandboxMode::strict;

// An interpreter whose helper probe says Triton imports and is recent enough, or the reasons none did.
std::string find_python(std::string& reasons) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("KE_PYTHON"); env && *env) candidates.push_back(env);
  for (const char* c : {"python3", "/usr/bin/python3"}) candidates.push_back(c);
  for (const std::string& python : candidates) {
    std::string why;
    try {
      const std::string out = run_script(python, kHelperScript, {"probe"}, 120, "Triton's probe");
      simdjson::dom::parser parser;
      simdjson::dom::element doc;
      if (parser.parse(out).get(doc) == simdjson::SUCCESS) {
        bool ok = false;
        if (doc["ok"].get(ok) == simdjson::SUCCESS && ok) return python;
        std::string_view error;
        if (doc["error"].get(error) == simdjson::SUCCESS) why = std::string(error);
      }
      if (why.empty()) why = "its probe printed no answer";
    } catch (const Error& e) {
      why = e.what();
    }
    reasons += "\n  " + python + ": " + why;
  }
  return {};
}

}  // namespace

void set_sandbox_mode(SandboxMode mode) {
  std::lock_guard lock(g_mode_mutex);
  g_mode = mode;
}

std::string find_confine_library() {
  return find_shipped_file("libkernelevolve_confine.so", {".", "..", "../lib", "../libexec/kernelevolve"}, R_OK).path;
}

std::shared_ptr<Compiler> Compiler::shared() {
  static std::mutex mutex;
  static std::shared_ptr<Compiler> compiler;
  static std::string failure;
  std::lock_guard lock(mutex);
  if (compiler) return compiler;
  if (!failure.empty()) throw Error(ErrorCode::DeviceUnavailable, failure);
  SandboxMode mode;
  {
    std::lock_guard mode_lock(g_mode_mutex);
    mode = g_mode;
  }
  try {
    std::string reasons;
    const std::string python = find_python(reasons);
    if (python.empty()) {
      throw Error(ErrorCode::DeviceUnavailable,
                  "Triton kernels need Triton 3.4 or later, and no Python here has it:" + reasons +
                      "\nInstall Triton (pip install triton) for an interpreter, or name one with KE_PYTHON");
    }
    std::string library;
    if (mode != SandboxMode::off) {
      library = find_confine_library();
      if (library.empty()) {
        throw Error(ErrorCode::DeviceUnavailable,
                    "libkernelevolve_confine.so is not beside the worker or the library: a Triton candidate is "
                    "model-written Python that Triton runs when it compiles it, and KernelEvolve compiles it only "
                    "confined (build the target kernelevolve_confine, or run with --sandbox off)");
      }
    }
    compiler.reset(new Compiler(python, library, mode));
    return compiler;
  } catch (const Error& e) {
    failure = e.what();
    throw;
  }
}

Compiler::Compiler(const std::string& python, const std::string& confine_library, SandboxMode mode) {
  // Spelled here rather than by the sandbox's to_string: the devices do not link the sandbox.
  const char* mode_name = mode == SandboxMode::strict ? "strict" : mode == SandboxMode::basic ? "basic" : "off";
  std::vector<std::string> args = {"serve", "--mode", mode_name};
  if (!confine_library.empty()) args.insert(args.end(), {"--confine", confine_library});
  helper_ = std::make_unique<ScriptProcess>(python, kHelperScript, args, std::vector<int>{},
                                            "Triton's compile helper (" + python + ")");
  // Its first line comes once Triton is imported and a first kernel compiled (about a second).
  const std::string greeting = helper_->greeting(120);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  bool ok = false;
  if (parser.parse(greeting).get(doc) != simdjson::SUCCESS || doc["ok"].get(ok) != simdjson::SUCCESS) {
    throw Error(ErrorCode::DeviceUnavailable,
                "Triton's compile helper (" + python + ") did not start: " + greeting + "\n" + helper_->error_tail());
  }
  if (!ok) {
    std::string_view error, log;
    if (doc["error"].get(error) != simdjson::SUCCESS) error = "Triton's compile helper failed to start";
    if (doc["log"].get(log) != simdjson::SUCCESS) log = {};
    throw Error(ErrorCode::DeviceUnavailable, std::string(error) + (log.empty() ? "" : "\n" + std::string(log)));
  }
  std::string_view v, s;
  if (doc["triton"].get(v) == simdjson::SUCCESS) version_ = std::string(v);
  if (doc["sandbox"].get(s) == simdjson::SUCCESS) sandbox_ = std::string(s);
}

Compiled Compiler::compile(const KernelSource& ks, const Target& target, std::string& log,
                           const std::vector<std::size_t>& divisible) {
  std::string request = "{\"op\": \"compile\", \"source\": " + json_quote(ks.source) +
                        ", \"entry\": " + json_quote(ks.entry) + ", \"params\": [";
  for (std::size_t i = 0; i < ks.params.size(); ++i) request += (i ? ", " : "") + json_quote(triton_type(ks.params[i]));
  request += "], \"constexprs\": {";
  int num_warps = 4, num_stages = 3;
  bool first = true;
  for (const auto& [name, value] : ks.defines) {
    if (name == "num_warps") {
      num_warps = static_cast<int>(value);
    } else if (name == "num_stages") {
      num_stages = static_cast<int>(value);
    } else {
      request += (first ? "" : ", ") + json_quote(name) + ": " + std::to_string(value);
      first = false;
    }
  }
  const bool numeric_arch = !target.arch.empty() && std::isdigit(static_cast<unsigned char>(target.arch[0]));
  request += "}, \"num_warps\": " + std::to_string(num_warps) + ", \"num_stages\": " + std::to_string(num_stages) +
             ", \"backend\": " + json_quote(target.backend) +
             ", \"arch\": " + (numeric_arch ? target.arch : json_quote(target.arch)) +
             ", \"warp_size\": " + std::to_string(target.warp_size) +
             ", \"timeout_s\": " + std::to_string(static_cast<int>(kCompileTimeoutS));
  if (!divisible.empty()) {
    request += ", \"divisible\": [";
    for (std::size_t i = 0; i < divisible.size(); ++i) request += (i ? ", " : "") + std::to_string(divisible[i]);
    request += "]";
  }
  request += "}";
  std::string reply;
  {
    std::lock_guard lock(mutex_);
    reply = helper_->request(request, kCompileTimeoutS + 30);
  }
  Compiled out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(reply).get(doc) != simdjson::SUCCESS || doc["ok"].get(out.ok) != simdjson::SUCCESS) {
    throw Error(ErrorCode::Internal, "Triton's compile helper answered what is not a reply: " + reply.substr(0, 200));
  }
  auto text = [&](const char* key) {
    std::string_view v;
    return doc[key].get(v) == simdjson::SUCCESS ? std::string(v) : std::string();
  };
  auto number = [&](const char* key, std::uint64_t fallback) {
    std::uint64_t v = 0;
    if (doc[key].get(v) == simdjson::SUCCESS) return v;
    double d = 0;
    return doc[key].get(d) == simdjson::SUCCESS ? static_cast<std::uint64_t>(d) : fallback;
  };
  if (!out.ok) {
    out.error = text("error");
    if (doc["refused"].get(out.refused) != simdjson::SUCCESS) out.refused = false;
    log += "error: " + out.error + "\n" + text("log");
    if (!log.empty() && log.back() != '\n') log += "\n";
    return out;
  }
  out.format = text("format");
  out.image = text("image");
  out.symbol = text("name");
  out.num_warps = static_cast<int>(number("num_warps", 4));
  out.shared_bytes = number("shared", 0);
  out.global_scratch_bytes = number("global_scratch_size", 0);
  out.global_scratch_align = std::max<std::uint64_t>(1, number("global_scratch_align", 1));
  out.profile_scratch_bytes = number("profile_scratch_size", 0);
  out.profile_scratch_align = std::max<std::uint64_t>(1, number("profile_scratch_align", 1));
  double ms = 0;
  if (doc["compile_ms"].get(ms) == simdjson::SUCCESS) out.compile_ms = ms;
  return out;
}

}  // namespace kernelevolve::triton
