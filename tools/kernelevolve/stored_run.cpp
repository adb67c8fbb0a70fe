// The commands that read a run database: `show` (a table of a run's nodes, or one node in full), `best` (the best
// kernel's source) and `export` (the run's graph as JSON or Graphviz, or a node as a PyTorch operator).
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"

namespace cli {

namespace {

// The options shared by show, best and export: the database and the run in it.
struct StoredRun {
  std::shared_ptr<ke::Store> store;
  ke::RunId run = 0;
};

StoredRun open_run(const std::string& db, const po::variables_map& vm, ke::RunId run_id) {
  StoredRun r;
  r.store = std::make_shared<ke::Store>(db, ke::Store::Mode::read_only);
  if (vm.count("run")) {
    r.run = r.store->run(run_id).id;  // throws for an unknown run
  } else if (const auto latest = r.store->latest_run()) {
    r.run = *latest;
  } else {
    throw ke::Error(ke::ErrorCode::BadUsage, db + " holds no run yet");
  }
  return r;
}

void write_output(const std::string& text, const std::string& file) {
  if (file.empty() || file == "-") {
    std::cout << text;
    return;
  }
  std::ofstream out(file, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw ke::Error(ke::ErrorCode::BadUsage, "cannot write " + file);
}

po::variables_map parse_db_command(const std::vector<std::string>& args, po::options_description& d, std::string& db) {
  d.add_options()("help,h", "this help")("db", po::value(&db), "the database");
  po::positional_options_description pos;
  pos.add("db", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
  po::notify(vm);
  return vm;
}

}  // namespace

int cmd_show(const std::vector<std::string>& args) {
  po::options_description d("show options");
  std::string db;
  ke::RunId run_id = 0;
  std::size_t limit = 0;
  ke::NodeId node = -1;
  bool list_runs = false;
  d.add_options()("run", po::value(&run_id), "the run (default: the latest)")(
      "limit", po::value(&limit)->default_value(0), "show only the first N nodes (0: all)")(
      "node", po::value(&node), "show one node in full: its times, diagnosis, resources, mismatch and compiler log")(
      "runs", po::bool_switch(&list_runs), "list the database's runs as JSON, one object per line");
  po::variables_map vm = parse_db_command(args, d, db);
  if (vm.count("help") || db.empty()) {
    (vm.count("help") ? std::cout : std::cerr) << kUsage << d;
    return vm.count("help") ? 0 : 2;
  }
  if (list_runs) {
    // For scripts that need to know what a database holds (optimize's driver asks whether a region's run
    // finished) without reading its tables, whose schema is the store's alone.
    const ke::Store store(db, ke::Store::Mode::read_only);
    for (const ke::RunInfo& info : store.runs()) {
      std::cout << "{\"id\": " << info.id << ", \"problem\": " << ke::json_quote(info.spec_name)
                << ", \"nodes\": " << info.nodes << ", \"started_at\": " << ke::json_quote(info.started_at)
                << ", \"finished_at\": "
                << (info.finished_at.empty() ? std::string("null") : ke::json_quote(info.finished_at))
                << ", \"stop_reason\": " << ke::json_quote(info.stop_reason) << "}\n";
    }
    return 0;
  }
  const StoredRun r = open_run(db, vm, run_id);
  const auto runs = r.store->runs();
  if (runs.size() > 1) {
    std::cout << db << " holds " << runs.size() << " runs:";
    for (const auto& info : runs)
      std::cout << " " << info.id << " (" << info.spec_name << ", " << info.nodes << " nodes)";
    std::cout << "; --run ID picks one\n";
  }
  if (vm.count("node")) {
    std::cout << ke::show_node_text(*r.store, r.run, node);
    return 0;
  }
  std::cout << ke::show_run_text(*r.store, r.run, limit);
  return 0;
}

int cmd_best(const std::vector<std::string>& args) {
  po::options_description d("best options");
  std::string db, output;
  ke::RunId run_id = 0;
  d.add_options()("run", po::value(&run_id), "the run (default: the latest)")(
      "output,o", po::value(&output), "write the source to FILE (default: standard output)");
  po::variables_map vm = parse_db_command(args, d, db);
  if (vm.count("help") || db.empty()) {
    (vm.count("help") ? std::cout : std::cerr) << kUsage << d;
    return vm.count("help") ? 0 : 2;
  }
  const StoredRun r = open_run(db, vm, run_id);
  const auto source = ke::best_kernel_source(*r.store, r.run);
  if (!source) {
    std::cerr << "kernelevolve: run " << r.run << " of " << db << " has no correct kernel\n";
    return 1;
  }
  write_output(*source, output);
  return 0;
}

int cmd_export(const std::vector<std::string>& args) {
  po::options_description d("export options");
  std::string db, output, format;
  ke::RunId run_id = 0;
  ke::NodeId node = -1;
  d.add_options()("run", po::value(&run_id), "the run (default: the latest)")(
      "format", po::value(&format), "json or dot (Graphviz): the run's graph; torch: a PyTorch operator's module")(
      "node", po::value(&node), "torch: the node (default: the run's best)")(
      "output,o", po::value(&output), "write to FILE (default: standard output)");
  po::variables_map vm = parse_db_command(args, d, db);
  if (vm.count("help") || db.empty()) {
    (vm.count("help") ? std::cout : std::cerr) << kUsage << d;
    return vm.count("help") ? 0 : 2;
  }
  if (format.empty() && output.size() > 4) format = output.substr(output.rfind('.') + 1);
  if (format == "gv") format = "dot";
  if (format == "py") format = "torch";
  if (format != "json" && format != "dot" && format != "torch") {
    throw ke::Error(ke::ErrorCode::BadUsage, "--format must be json, dot or torch");
  }
  if (vm.count("node") && format != "torch") throw ke::Error(ke::ErrorCode::BadUsage, "--node is for --format torch");
  const StoredRun r = open_run(db, vm, run_id);
  if (format == "torch") {
    ke::CallableChoice choice;
    choice.run = r.run;
    if (vm.count("node")) choice.node = node;
    const ke::StoredProgram found = ke::find_stored_program(db, choice);
    write_output(ke::torch_module_source(found.provenance, output == "-" ? "" : output), output);
    if (!output.empty() && output != "-") {
      std::cerr << "kernelevolve: wrote " << output << ": run " << found.provenance.run << ", node "
                << found.provenance.node << " of " << db << " as a PyTorch operator (import it; see its docstring)\n";
    }
    return 0;
  }
  write_output(format == "json" ? ke::export_json(*r.store, r.run) : ke::export_dot(*r.store, r.run), output);
  return 0;
}

}  // namespace cli
