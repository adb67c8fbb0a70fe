// `kernelevolve devices`: the devices found, with their properties, each backend with why it cannot be used, and
// the sandbox a worker gets here (`--sandbox-info`: only that).
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"

namespace cli {

int cmd_devices(const std::vector<std::string>& args) {
  po::options_description d("devices");
  Common c;
  bool sandbox_info = false;
  d.add_options()("json", po::bool_switch(&c.json), "JSON on stdout")(
      "sandbox-info", po::bool_switch(&sandbox_info), "only which confinements a worker gets on this machine");
  po::variables_map vm = parse(args, d, c);
  if (vm.count("help")) {
    std::cout << kUsage << d;
    return 0;
  }
  if (sandbox_info) {  // what a CPU worker started now would have (kernelevolve/sandbox.hpp)
    const ke::SandboxReport& sandbox = ke::sandbox_support();
    if (c.json) {
      std::cout << sandbox.to_json() << "\n";
    } else {
      std::cout << "sandbox: strict (the default; --sandbox basic|off to change)\n";
      for (const auto& a : sandbox.active) std::cout << "  active:  " << a << "\n";
      for (const auto& m : sandbox.missing) std::cout << "  missing: " << m << "\n";
      std::cout << "  GPU workers: seccomp allow-list with the driver's allowances, no namespaces\n";
    }
    return 0;
  }
  const auto devices = ke::list_devices();
  const auto backends = ke::backend_status();
  if (c.json) {
    // One object, as every --json: the devices, and each backend with why it cannot be used.
    std::string out = "{\"devices\": [";
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const auto& dv = devices[i];
      out += std::string(i ? ", " : "") + "{\"id\": " + ke::json_quote(dv.id) +
             ", \"kind\": " + ke::json_quote(dv.kind) + ", \"name\": " + ke::json_quote(dv.name) +
             ", \"compute_units\": " + std::to_string(dv.compute_units) +
             ", \"vector_bits\": " + std::to_string(dv.vector_bits) + ", \"properties\": {";
      bool first = true;
      for (const auto& [k, v] : dv.properties) {
        out += std::string(first ? "" : ", ") + ke::json_quote(k) + ": " + ke::json_quote(v);
        first = false;
      }
      out += "}}";
    }
    out += "], \"backends\": [";
    for (std::size_t i = 0; i < backends.size(); ++i) {
      const auto& b = backends[i];
      out += std::string(i ? ", " : "") + "{\"kind\": " + ke::json_quote(b.kind) +
             ", \"available\": " + (b.available ? "true" : "false") + ", \"devices\": " + std::to_string(b.devices) +
             ", \"reason\": " + ke::json_quote(b.reason) + "}";
    }
    // The confinements a worker gets here (the same as devices --sandbox-info --json).
    std::cout << out << "], \"sandbox\": " << ke::sandbox_support().to_json() << "}\n";
    return 0;
  }
  for (const auto& dv : devices) {
    std::cout << dv.id << "  " << dv.name << "  (" << dv.compute_units << " compute units, " << dv.vector_bits
              << "-bit vectors)\n";
    for (const auto& [k, v] : dv.properties) std::cout << "    " << k << ": " << v << "\n";
  }
  // Indented, so that no line but a device's starts with its id (scripts count "^cuda:" lines).
  std::cout << "backends:\n";
  for (const auto& b : backends) {
    std::cout << "  " << b.kind << std::string(b.kind.size() < 6 ? 6 - b.kind.size() : 1, ' ');
    if (b.available) std::cout << "available, " << b.devices << (b.devices == 1 ? " device\n" : " devices\n");
    else std::cout << "unavailable: " << b.reason << "\n";
  }
  // What a CPU worker gets here in the default mode (devices --sandbox-info: one per line).
  std::cout << "sandbox:\n  " << ke::sandbox_support().summary() << "\n";
  return 0;
}

}  // namespace cli
