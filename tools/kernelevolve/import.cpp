// `kernelevolve import`: the spec derived from a PyTorch module (KernelBench format), written as JSON for a
// person to read and edit.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "cli.hpp"

namespace cli {

namespace {

// JSON one line long, indented for a person to edit: objects and arrays of objects or arrays open a
// line per member; arrays of scalars (shapes, tunable lists) stay on one line.
std::string pretty_json(const std::string& text) {
  std::string out;
  int depth = 0;
  bool in_string = false;
  std::vector<bool> broken;  // per open bracket: whether its members go on lines of their own
  auto newline = [&] { out += "\n" + std::string(static_cast<std::size_t>(2 * depth), ' '); };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size()) out += text[++i];
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    if (ch == '{' || ch == '[') {
      std::size_t j = i + 1;
      while (j < text.size() && text[j] == ' ') ++j;
      const bool breaks = ch == '{' || (j < text.size() && (text[j] == '{' || text[j] == '['));
      broken.push_back(breaks);
      out += ch;
      if (breaks) ++depth, newline();
      continue;
    }
    if (ch == '}' || ch == ']') {
      if (!broken.empty() && broken.back()) --depth, newline();
      if (!broken.empty()) broken.pop_back();
      out += ch;
      continue;
    }
    if (ch == ',' && !broken.empty() && broken.back()) {
      out += ',';
      newline();
      while (i + 1 < text.size() && text[i + 1] == ' ') ++i;
      continue;
    }
    out += ch;
  }
  return out + "\n";
}

}  // namespace

int cmd_import(const std::vector<std::string>& args) {
  po::options_description d("import");
  Common c;
  std::string dir;
  add_common(d, c);
  d.add_options()("output,o", po::value(&dir), "the folder to write the spec into (made if absent)");
  po::variables_map vm = parse(args, d, c);
  if (vm.count("help") || c.spec_path.empty() || dir.empty()) {
    (vm.count("help") ? std::cout : std::cerr) << kUsage << d;
    return vm.count("help") ? 0 : 2;
  }
  if (!ke::is_pytorch_problem(c.spec_path)) {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    c.spec_path + " is not a PyTorch problem (a .py file in KernelBench's format)");
  }
  ke::Spec spec = load_cli_problem(c);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ke::Error(ke::ErrorCode::BadUsage, "-o " + dir + ": " + ec.message());
  const char* kind = spec.language == ke::Language::cuda     ? "cuda"
                     : spec.language == ke::Language::hip    ? "hip"
                     : spec.language == ke::Language::triton ? "triton"
                                                             : "cpu";
  const fs::path out = fs::path(dir) / (std::string(kind) + ".json");
  // The module by a path relative to the spec, and not inline: the spec is for a person to edit.
  ke::Spec written = spec;
  written.reference.file = fs::relative(fs::absolute(spec.reference.file), fs::absolute(dir), ec).string();
  if (ec || written.reference.file.empty()) written.reference.file = fs::absolute(spec.reference.file).string();
  written.reference.source.clear();
  std::ofstream file(out);
  file << pretty_json(ke::to_json(written));
  if (!file.flush()) throw ke::Error(ke::ErrorCode::BadUsage, "cannot write " + out.string());
  std::cout << "wrote " << out.string() << ": " << spec.name << ", " << ke::to_string(spec.language) << " kernel\n  "
            << ke::kernel_signature(spec) << "\n";
  for (const ke::Bindings& w : spec.workloads) {
    std::cout << "  workload:";
    for (const auto& [k, v] : w) std::cout << " " << k << "=" << v;
    std::cout << "\n";
  }
  // The notes say how the signature was derived (on meta, or by a real call and why) and name the module's
  // constants: what a person should read before trusting the derived names.
  std::cout << "  cost: bytes " << (spec.cost_bytes ? spec.cost_bytes->text() : "unknown") << ", flops "
            << (spec.cost_flops ? spec.cost_flops->text() : "unknown") << "\n";
  std::cout << "  notes: " << spec.notes << "\n";
  std::cout << "next: add tunables and a seed to it, then: kernelevolve check " << out.string()
            << "\n  (or let a model or a command write the first kernel: kernelevolve run " << out.string()
            << " --mutator command|llm|mix ...)\n";
  return 0;
}

}  // namespace cli
