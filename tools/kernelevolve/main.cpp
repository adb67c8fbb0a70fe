// kernelevolve: the command-line tool. Evolves a kernel from a spec file (keeping the run in a database),
// checks a spec, shows a stored run, writes its best kernel, exports its graph, lists devices.
// Exit codes: 0 done; 2 bad usage or spec; 3 device not available; 1 anything else.
// This file reads the command and dispatches it to its file (cli.hpp names them).
#include <exception>
#include <iostream>
#include <kernelevolve/distributed.hpp>
#include <string>
#include <vector>

#include "cli.hpp"

namespace cli {

const char* const kUsage =
    "usage:\n"
    "  kernelevolve run SPEC [--device cpu|cuda[:N]|hip[:N]] [--db FILE | --no-db] [--resume [--run ID]] [--no-reuse]\n"
    "                        [--max-evals N] [--max-time SEC] [--target-speedup X] [--plateau N] [--max-tokens N]\n"
    "                        [--max-cost USD]\n"
    "                        [--policy greedy|ucb|epsilon-greedy|tournament|islands|random|model] [policy options]\n"
    "                        [--mutator param|command|llm|mix] [--command CMD] [--llm-url URL --llm-model NAME\n"
    "                        --llm-api-key-env VAR [--llm-price IN,OUT]]... [llm options] [--jobs N] [--timeout SEC]\n"
    "                        [--in-process]\n"
    "                        [--mpi [--mpi-rank-timeout SEC]]   (under mpirun: rank 0 searches, the others evaluate)\n"
    "                        [--sandbox strict|basic|off] [--warm-start DB [--warm-start-max N]] [--seed N] [--json]\n"
    "                        [--counters [--ncu PATH]]   (a GPU's hardware counters of each new best, by Nsight Compute)\n"
    "                        [--ask FILE.jsonl [--ask-count N]] [--resume --answers RESULTS.jsonl|DIR]   (rounds: the\n"
    "                        model asked in batches, docs/rounds.md)\n"
    "  kernelevolve check SPEC [--device ...] [--sandbox MODE] [--json]   evaluate the reference and the seed only\n"
    "  kernelevolve import PROBLEM.py -o DIR [--device cpu|cuda] [--language c|cpp|cuda|triton]\n"
    "                        [--dtype bf16|fp16] [--backward [--with-forward]]\n"
    "                        write the spec derived from a PyTorch module (KernelBench format), to read and edit\n"
    "  kernelevolve baseline PROBLEM.py [--device cpu|cuda[:N]] [--json] [--timeout SEC] [--sandbox MODE]\n"
    "                        PyTorch eager's and torch.compile's times per workload, measured as a run measures them\n"
    "  SPEC is a spec file (.json) or a PyTorch problem (.py, KernelBench format: run and check take\n"
    "  --language for its candidates, and --seed-kernel FILE for a seed, unless a --mutator command, llm or\n"
    "  mix writes the first kernel from the module; without either, --first compile, the default on a CUDA GPU\n"
    "  and, with PyTorch 2.x, on the CPU: node 0 is what torch.compile generates, translated (Triton, C++)).\n"
    "  run, check, import, sweep and baseline take\n"
    "  --dtype bf16|fp16 (its floats cast, the reference in that dtype) and --backward [--with-forward] (its\n"
    "  gradients, checked against autograd in float64) to make another problem of the module\n"
    "  kernelevolve sweep SPEC --out FILE.tsv [--device cpu|cuda[:N]|hip[:N]] [--jobs N] [--max-points N]\n"
    "                        [--time-limit SEC] [--timeout SEC] [--sandbox MODE] [--commit TEXT] [--count]\n"
    "                        measure every valid point of the tunable space into FILE (resumes it if it exists)\n"
    "  kernelevolve show DB [--run ID] [--limit N]         a table of the run's nodes, the best one's diagnosis and lineage\n"
    "  kernelevolve show DB [--run ID] --node N            one node in full: times, diagnosis, resources, compiler log\n"
    "  kernelevolve show DB --runs                         the database's runs, one JSON object per line\n"
    "  kernelevolve best DB [--run ID] [-o FILE]           the best kernel's source, tunables as #defines (a comment for Triton)\n"
    "  kernelevolve export DB [--run ID] --format json|dot [-o FILE]   the run's graph for tools or Graphviz\n"
    "  kernelevolve export DB [--run ID] [--node N] --format torch -o op.py   the best node as a PyTorch operator\n"
    "  kernelevolve devices [--json] [--sandbox-info]    the devices found, with their properties; the sandbox\n"
    "  kernelevolve ask DB... -o FILE.jsonl              the model requests runs left waiting (run --ask), of several\n"
    "                        databases, as one OpenAI Batch API input file (docs/rounds.md)\n"
    "  kernelevolve optimize MODEL.py [--device cpu|cuda[:N]] [--out DIR] [--min-share F] [--max-evals N]\n"
    "                        [--mutator M --command CMD ...] [--no-evolve] [--devices D1,D2] [--mpi] [--json]\n"
    "                        a whole model (KernelBench format) profiled, cut into regions, each written as a\n"
    "                        problem, ranked by share of the model's time, evolved, the winners put back\n"
    "                        (OUT/optimized.py), the speedup proved (issue 30)\n"
    "run 'kernelevolve COMMAND --help' for a command's options\n";

}  // namespace cli

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << cli::kUsage;
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "run") {
      const int rc = cli::cmd_run(args);
      ke::mpi_finalize();  // after every MPI user is gone; nothing when MPI was not used
      return rc;
    }
    if (command == "check") return cli::cmd_check(args);
    if (command == "sweep") return cli::cmd_sweep(args);
    if (command == "import") return cli::cmd_import(args);
    if (command == "baseline") return cli::cmd_baseline(args);
    if (command == "show") return cli::cmd_show(args);
    if (command == "best") return cli::cmd_best(args);
    if (command == "export") return cli::cmd_export(args);
    if (command == "devices") return cli::cmd_devices(args);
    if (command == "optimize") return cli::cmd_optimize(args);
    if (command == "ask") return cli::cmd_ask(args);
    if (command == "--help" || command == "-h" || command == "help") {
      std::cout << cli::kUsage;
      return 0;
    }
    std::cerr << "kernelevolve: unknown command '" << command << "'\n" << cli::kUsage;
    return 2;
  } catch (const ke::Error& e) {
    std::cerr << "kernelevolve: " << e.what() << "\n";
    return e.exit_code();
  } catch (const po::error& e) {
    std::cerr << "kernelevolve: " << e.what() << "\n" << cli::kUsage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kernelevolve: " << e.what() << "\n";
    return 1;
  }
}
