// `kernelevolve ask`: the model requests that runs left waiting (run --ask), from several databases, gathered into
// one OpenAI Batch API input file, so that one batch serves a whole suite of problems (docs/rounds.md).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"

namespace cli {

int cmd_ask(const std::vector<std::string>& args) {
  po::options_description d("ask options");
  std::vector<std::string> stores;
  std::string out;
  d.add_options()("help", "this help")("output,o", po::value(&out), "the batch file to write (JSONL)")(
      "db", po::value(&stores)->composing(), "a database of runs (also given as positionals)");
  po::positional_options_description positional;
  positional.add("db", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(d).positional(positional).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << "usage: kernelevolve ask DB... -o FILE.jsonl\n" << d;
    return 0;
  }
  if (stores.empty() || out.empty()) {
    std::cerr << "usage: kernelevolve ask DB... -o FILE.jsonl\n";
    return 2;
  }
  const ke::BatchCollection made = ke::write_batch_requests(stores, out);
  if (made.requests == 0) {
    std::fprintf(stderr, "no model requests are waiting in %zu database%s; %s not written\n", stores.size(),
                 stores.size() == 1 ? "" : "s", out.c_str());
    return 0;
  }
  std::fprintf(stderr, "%zu request%s of %zu run%s in %s\n", made.requests, made.requests == 1 ? "" : "s", made.runs,
               made.runs == 1 ? "" : "s", out.c_str());
  return 0;
}

}  // namespace cli
