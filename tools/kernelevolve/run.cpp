// `kernelevolve run`: a search, from the command line's options to the report. The run itself is assembled as the
// C API assembles one (src/run/run_assembly.hpp); this file checks the options, makes the mutator and says what
// happens.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <kernelevolve/distributed.hpp>
#include <kernelevolve/rounds.hpp>
#include <kernelevolve/store.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "progress.hpp"
#include "run/run_assembly.hpp"

namespace cli {

namespace {

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (char ch : text + ",") {
    if (ch == ',') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else if (ch != ' ') {
      item += ch;
    }
  }
  return out;
}

// Opens the store of a run, with a hint when the default place beside the spec cannot be written.
std::shared_ptr<ke::Store> open_store(const std::string& path, bool defaulted) {
  try {
    return std::make_shared<ke::Store>(path);
  } catch (const ke::Error& e) {
    if (e.code() != ke::ErrorCode::Internal || !defaulted) throw;
    throw ke::Error(e.code(),
                    std::string(e.what()) +
                        " (the default database sits beside the spec; choose another with --db FILE, or --no-db)");
  }
}

// --llm-price IN,OUT: US dollars per million prompt and completion tokens.
ke::LlmPrice parse_llm_price(const std::string& text) {
  auto refuse = [&](const std::string& why) {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    "--llm-price takes IN,OUT, the US dollars per million prompt and completion "
                    "tokens (e.g. --llm-price 2.5,10): '" +
                        text + "' " + why);
  };
  const std::size_t comma = text.find(',');
  if (comma == std::string::npos || text.find(',', comma + 1) != std::string::npos) refuse("is not two numbers");
  double price[2];
  const std::string parts[2] = {text.substr(0, comma), text.substr(comma + 1)};
  for (int i = 0; i < 2; ++i) {
    char* end = nullptr;
    price[i] = std::strtod(parts[i].c_str(), &end);
    if (parts[i].empty() || end != parts[i].c_str() + parts[i].size() || !std::isfinite(price[i]))
      refuse("is not two numbers");
    if (price[i] < 0) refuse("has a negative price");
  }
  return {price[0], price[1]};
}

// A per-model option (--llm-url, --llm-api-key-env, --llm-api, --llm-price): given once, for every model; or
// once per --llm-model, paired in order; `fallback` when not given.
std::vector<std::string> per_model(const std::vector<std::string>& given, std::size_t models,
                                   const std::string& fallback, const std::string& option) {
  if (given.empty()) return std::vector<std::string>(models, fallback);
  if (given.size() == 1) return std::vector<std::string>(models, given[0]);
  if (given.size() == models) return given;
  throw ke::Error(ke::ErrorCode::BadUsage,
                  "--" + option + " is given " + std::to_string(given.size()) + " times for " + std::to_string(models) +
                      " --llm-model: give it once for every model, or " + "once per model, in the order of the models");
}

// "--llm-price -1,2": a value that starts with '-' would read as an option; joined to its option it reads
// as the value it is, and is refused for what it says.
std::vector<std::string> join_signed_values(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool takes_number = args[i] == "--llm-price" || args[i] == "--max-cost";
    if (takes_number && i + 1 < args.size() && args[i + 1].size() > 1 && args[i + 1][0] == '-' &&
        (std::isdigit(static_cast<unsigned char>(args[i + 1][1])) || args[i + 1][1] == '.')) {
      out.push_back(args[i] + "=" + args[i + 1]);
      ++i;
    } else {
      out.push_back(args[i]);
    }
  }
  return out;
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  po::options_description d("run options");
  Common c;
  add_common(d, c);
  std::int64_t max_evals = 64, plateau = 0, max_tokens = 0, run_id = 0;
  double max_time = 0, target = 0;
  std::string policy = ke::default_policy_name(), mutator = "param", command, db, features;
  std::uint64_t seed = 1;
  int jobs = 0;  // 0: by device (see --jobs)
  double timeout = 0, command_timeout = 300;
  bool in_process = false, resume = false, no_db = false, no_reuse = false, use_mpi = false, counters = false;
  double mpi_rank_timeout = 15;
  std::string ncu_path;
  std::string sandbox_name = "strict";
  ke::PolicyOptions popt;
  ke::LlmOptions llm;
  // Per model, paired in order (per_model): several models share the run through a bandit (ModelPoolMutator).
  std::vector<std::string> llm_urls, llm_models, llm_key_envs, llm_apis, llm_price_texts;
  double max_cost = 0;
  int llm_param_steps = 4;
  std::vector<std::string> warm_stores;
  int warm_max = 3;
  std::string prior_sweep;
  std::string ask_file, answers_path;  // rounds (docs/rounds.md)
  int ask_count = 1;
  d.add_options()("max-evals", po::value(&max_evals)->default_value(64),
                  "stop after N evaluations (the seed included)")(
      "max-time", po::value(&max_time), "stop after SEC seconds")("target-speedup", po::value(&target),
                                                                  "stop once the best is X times faster than the seed")(
      "plateau", po::value(&plateau), "stop after N evaluations without an improvement")(
      "max-tokens", po::value(&max_tokens), "stop once the mutator has spent N model tokens")(
      "max-cost", po::value(&max_cost), "stop once the model calls have cost USD dollars (needs --llm-price)")(
      "policy", po::value(&policy)->default_value(ke::default_policy_name()),
      "selection policy: greedy, ucb, epsilon-greedy, tournament, islands, random or model (default: model for a "
      "space of 3 points or more where the build has XGBoost, else greedy)")(
      "epsilon", po::value(&popt.epsilon)->default_value(popt.epsilon, "0.2"),
      "epsilon-greedy: chance of a random ok node")(
      "tournament-size", po::value(&popt.tournament_size)->default_value(popt.tournament_size),
      "tournament: nodes drawn per selection")("ucb-c",
                                               po::value(&popt.exploration)->default_value(popt.exploration, "0.2"),
                                               "ucb: weight of the exploration term")(
      "islands", po::value(&popt.islands)->default_value(popt.islands), "islands: number of islands")(
      "migration-interval", po::value(&popt.migration_interval)->default_value(popt.migration_interval),
      "islands: evaluations between migrations")(
      "prior-sweep", po::value(&prior_sweep),
      "model: a sweep of this problem on another device (kernelevolve sweep), as the model's prior knowledge")(
      "features", po::value(&features),
      "islands: MAP-Elites axes, comma-separated: a tunable's name, source_length, resource:NAME (default: the first tunable)")(
      "mutator", po::value(&mutator)->default_value("param"),
      "param (the tunables), command (an external program), llm (a language model), or mix (the model or the "
      "command writes structures, the parameter search tunes each)")(
      "llm-url", po::value(&llm_urls)->composing(),
      "the model server's base URL, e.g. https://api.openai.com/v1 (once for every model, or once per --llm-model)")(
      "llm-model", po::value(&llm_models)->composing(),
      "the model's name; give it again for more models, among which a bandit picks by improvement per dollar")(
      "llm-api-key-env", po::value(&llm_key_envs)->composing(),
      "the environment variable that holds the API key (once, or once per model)")(
      "llm-api", po::value(&llm_apis)->composing(),
      "openai (chat completions, the default) or anthropic (messages); once, or once per model")(
      "llm-price", po::value(&llm_price_texts)->composing(),
      "IN,OUT: US dollars per million prompt and completion tokens (once, or once per model); a resumed run keeps its own")(
      "llm-memory", po::value(&llm.memory)->default_value("both"),
      "what the prompt remembers: inherit, siblings, both or fresh")(
      "llm-knowledge", po::value(&llm.knowledge_dirs)->composing(),
      "a folder of your own markdown for the knowledge base")("llm-timeout",
                                                              po::value(&llm.timeout_s)->default_value(llm.timeout_s),
                                                              "time limit of one model request, seconds")(
      "llm-temperature", po::value(&llm.temperature)->default_value(llm.temperature, "0.7"), "sampling temperature")(
      "llm-max-answer-tokens", po::value(&llm.max_tokens)->default_value(llm.max_tokens),
      "the longest answer, in tokens")("llm-in-flight", po::value(&llm.max_in_flight)->default_value(llm.max_in_flight),
                                       "model requests at once, at most")(
      "llm-children", po::value(&llm.children)->default_value(llm.children),
      "children asked for per model prompt, each its own node, judged on its own")(
      "llm-param-steps", po::value(&llm_param_steps)->default_value(4),
      "mix: parameter steps on each new structure before the model runs again")(
      "ask", po::value(&ask_file),
      "rounds: no model call waits; the run stops where it needs the model, its requests kept in the database and "
      "written to FILE.jsonl in the OpenAI Batch API's request format (docs/rounds.md)")(
      "ask-count", po::value(&ask_count)->default_value(1), "with --ask: the requests a round gathers before it stops")(
      "answers", po::value(&answers_path),
      "with --resume: the answers to the run's requests, a Batch API results file (JSONL) or a folder of files named "
      "by request id; each is evaluated as a child of its request's parent, then the run goes on")(
      "command", po::value(&command), "the command mutator's program, run through /bin/sh once per child")(
      "command-timeout", po::value(&command_timeout)->default_value(300), "time limit of one command run, seconds")(
      "jobs", po::value(&jobs),
      "candidates evaluated at once per device, each in its own worker (default: 1 on a CPU, whose timings "
      "other work would disturb; 3 on a GPU, where the next candidates compile and verify while one is timed)")(
      "timeout", po::value(&timeout)->default_value(0),
      "time limit per candidate, seconds (0: 10x the seed's evaluation, at least 10 s)")(
      "in-process", po::bool_switch(&in_process),
      "evaluate in this process, without workers: faster, but a crashing candidate ends the run")(
      "seed", po::value(&seed)->default_value(1), "random seed of the search")(
      "mpi", po::bool_switch(&use_mpi), "evaluate on MPI ranks: rank 0 searches and keeps the database")(
      "mpi-rank-timeout", po::value(&mpi_rank_timeout)->default_value(15),
      "a busy rank silent this long (seconds) is given up on, and its candidate re-queued")(
      "db", po::value(&db), "the database of runs (default: SPEC.kernelevolve.db beside the spec)")(
      "no-db", po::bool_switch(&no_db), "keep nothing on disk")(
      "resume", po::bool_switch(&resume), "go on with the latest run of this spec in the database (or --run ID)")(
      "run", po::value(&run_id), "with --resume: the run to go on with")(
      "no-reuse", po::bool_switch(&no_reuse),
      "measure every candidate, even one the database holds a measurement of (same spec, same device)")(
      "sandbox", po::value(&sandbox_name)->default_value("strict"),
      "how workers confine candidates: strict (allow-list, namespaces), basic (deny-list) or off")(
      "warm-start", po::value(&warm_stores)->composing(),
      "a database of other runs: their best kernels of this operator (same spec name, family or signature) are "
      "tried first, as extra parents; repeatable")("warm-start-max", po::value(&warm_max)->default_value(3),
                                                   "with --warm-start: how many kernels to take, at most")(
      "counters", po::bool_switch(&counters),
      "on a GPU, read each new best's hardware counters (DRAM throughput, achieved occupancy, stall reasons) with "
      "Nsight Compute: kept on the node, shown by show and given to the model; seconds per new best")(
      "ncu", po::value(&ncu_path),
      "with --counters: Nsight Compute's ncu (default: $KE_NCU, ncu on PATH, /usr/local/cuda/bin/ncu)");
  po::variables_map vm = parse(join_signed_values(args), d, c);
  if (vm.count("help")) {
    std::cout << kUsage << d;
    return 0;
  }
  if (c.spec_path.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  // The models, each with its endpoint, key, api and price: checked before any worker starts.
  std::vector<ke::LlmPrice> llm_prices;
  for (const std::string& text : per_model(llm_price_texts, llm_models.size(), "0,0", "llm-price")) {
    llm_prices.push_back(parse_llm_price(text));
  }
  if (!llm_price_texts.empty() && llm_models.empty()) {
    throw ke::Error(ke::ErrorCode::BadUsage, "--llm-price prices the calls of a --llm-model: give one");
  }
  llm_urls = per_model(llm_urls, llm_models.size(), "", "llm-url");
  llm_key_envs = per_model(llm_key_envs, llm_models.size(), "", "llm-api-key-env");
  llm_apis = per_model(llm_apis, llm_models.size(), "openai", "llm-api");
  if (vm.count("max-cost") && (!(max_cost > 0) || !std::isfinite(max_cost))) {
    throw ke::Error(ke::ErrorCode::BadUsage, "--max-cost must be a positive number of US dollars");
  }
  if (vm.count("max-cost") && (llm_models.empty() || (llm_price_texts.empty() && !resume))) {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    "--max-cost needs model calls with a price: --llm-model NAME --llm-price IN,OUT");
  }
  if (mutator == "llm" && llm_models.empty())
    throw ke::Error(ke::ErrorCode::BadUsage, "--mutator llm needs --llm-model NAME");
  if (max_evals < 1) throw ke::Error(ke::ErrorCode::BadUsage, "--max-evals must be at least 1");
  if (vm.count("jobs") && jobs < 1) throw ke::Error(ke::ErrorCode::BadUsage, "--jobs must be at least 1");
  if (timeout < 0) throw ke::Error(ke::ErrorCode::BadUsage, "--timeout must not be negative");
  if (vm.count("plateau") && plateau < 1) throw ke::Error(ke::ErrorCode::BadUsage, "--plateau must be at least 1");
  if (vm.count("max-tokens") && max_tokens < 1)
    throw ke::Error(ke::ErrorCode::BadUsage, "--max-tokens must be at least 1");
  if (in_process && jobs > 1)
    throw ke::Error(ke::ErrorCode::BadUsage, "--in-process evaluates one candidate at a time: drop --jobs");
  if (no_db && (vm.count("db") || resume))
    throw ke::Error(ke::ErrorCode::BadUsage, "--no-db cannot go with --db or --resume");
  if (vm.count("run") && !resume) throw ke::Error(ke::ErrorCode::BadUsage, "--run ID goes with --resume");
  popt.features = split_list(features);
  // Rounds: the model's requests are answered later, in a batch (docs/rounds.md).
  if (vm.count("ask") || vm.count("answers")) {
    if (mutator != "llm" && mutator != "mix")
      throw ke::Error(ke::ErrorCode::BadUsage, "--ask and --answers are for a model's run: --mutator llm or mix");
    if (llm_models.empty()) throw ke::Error(ke::ErrorCode::BadUsage, "--ask and --answers need --llm-model NAME");
    if (no_db)
      throw ke::Error(ke::ErrorCode::BadUsage, "--ask and --answers keep the requests in the database: drop --no-db");
    if (vm.count("answers") && !resume)
      throw ke::Error(ke::ErrorCode::BadUsage, "--answers FILE answers a stored run's requests: add --resume");
    if (ask_count < 1) throw ke::Error(ke::ErrorCode::BadUsage, "--ask-count must be at least 1");
    for (const std::string& api : llm_apis) {
      if (vm.count("ask") && api != "openai") {
        throw ke::Error(
            ke::ErrorCode::BadUsage,
            "--ask writes OpenAI Batch API requests (chat completions): --llm-api " + api + " has no such format here");
      }
    }
  }
  // The mutator's choice is checked before any worker starts.
  if (mutator != "param" && mutator != "command" && mutator != "llm" && mutator != "mix") {
    throw ke::Error(ke::ErrorCode::BadUsage, "unknown mutator '" + mutator + "' (known: param, command, llm, mix)");
  }
  if ((mutator == "command" || (mutator == "mix" && llm_models.empty())) && command.empty()) {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    "--mutator " + mutator + " needs --command CMD" + (mutator == "mix" ? " or --llm-model NAME" : ""));
  }
  // A PyTorch problem has no seed: without one or a model, the first program is torch.compile's (issue 31), the
  // problem derived in the language Inductor writes, unless the user chose another: Triton on a CUDA GPU, C++ on
  // the CPU (where PyTorch has no Inductor, 1.13, the capture says so).
  if (mutator != "param") c.writer = mutator;
  if (mutator == "param" && c.first.empty() && c.seed_kernel.empty() && ke::is_pytorch_problem(c.spec_path) &&
      ((c.device.rfind("cuda", 0) == 0 && (c.language.empty() || c.language == "triton")) ||
       (c.device.rfind("cpu", 0) == 0 && (c.language.empty() || c.language == "cpp")))) {
    c.first = "compile";
    c.first_by_default = true;
  }
  // Where a run's fixed cost goes, per step (issue 52: optimize reports each region's): the problem (a module
  // described, torch.compile's program captured), the evaluator started, then node 0, the baselines, the search.
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point from) {
    return std::chrono::duration<double>(Clock::now() - from).count();
  };
  const Clock::time_point loading = Clock::now();
  ke::Spec spec = load_cli_problem(c);
  const double problem_s = seconds_since(loading);
  // Other runs' kernels of this operator, found before any worker starts: a bad database is bad input.
  std::vector<ke::WarmKernel> warm;
  if (!warm_stores.empty()) {
    if (warm_max < 1) throw ke::Error(ke::ErrorCode::BadUsage, "--warm-start-max must be at least 1");
    warm = ke::find_warm_kernels(warm_stores, spec, static_cast<std::size_t>(warm_max));
    std::string where;
    for (const std::string& store : warm_stores) where += (where.empty() ? "" : ", ") + store;
    if (warm.empty()) {
      std::fprintf(stderr,
                   "kernelevolve: --warm-start: no run in %s has a correct kernel of this operator (same name, "
                   "family or signature, same language and arguments); the run starts from its seed alone\n",
                   where.c_str());
    } else if (!c.json) {
      for (const ke::WarmKernel& w : warm) {
        std::fprintf(stderr, "warm start: %s (run %lld of %s, %s): %.2fx over its seed there, same %s\n",
                     w.spec_name.c_str(), (long long)w.run, w.store.c_str(), w.device.c_str(), w.speedup,
                     w.match.c_str());
      }
    }
  }
  if (vm["policy"].defaulted()) {  // by the size of the space: the model where it pays (default_policy_name)
    std::size_t points = 0;
    try {
      points = ke::tunable_space(spec).size();
    } catch (const ke::Error&) {
      points = static_cast<std::size_t>(-1);  // too large to count: large
    }
    policy = ke::default_policy_name(points);
  }
  if (!prior_sweep.empty()) {
    if (policy != "model")
      throw ke::Error(ke::ErrorCode::BadUsage, "--prior-sweep is the model policy's prior: it needs --policy model");
    popt.prior = ke::sweep_prior(ke::read_sweep(prior_sweep), spec);
  }
  if (!vm.count("jobs")) {
    // Timing on a GPU holds the device alone, and compilation and verification are host work: overlap them.
    const bool gpu = c.device.rfind("cuda", 0) == 0 || c.device.rfind("hip", 0) == 0;
    jobs = gpu && !in_process ? 3 : 1;
  }
  // Without a seed, a model or a command writes the first kernel; the parameter search has nothing to tune.
  if (spec.seed.source.empty() && mutator == "param") {
    throw ke::Error(ke::ErrorCode::BadUsage,
                    c.spec_path +
                        " has no seed kernel, and the parameter mutator only tunes an existing kernel, so "
                        "it cannot write the first one: give a seed with --seed-kernel FILE (or \"seed\" in the spec), "
                        "have one written from the reference with --mutator command, llm or mix, or (a PyTorch "
                        "problem on a CUDA GPU, or on the CPU with PyTorch 2.x) start from torch.compile's program "
                        "with --first compile.");
  }
  ke::WorkerOptions wo;
  wo.jobs = jobs;
  wo.timeout_s = timeout;
  // Parallel workers must not time at once: one lock file per device, shared by every run on this host.
  wo.eval.timing_lock = ke::default_timing_lock(c.device);
  const std::optional<ke::SandboxMode> sandbox = ke::parse_sandbox_mode(sandbox_name);
  if (!sandbox)
    throw ke::Error(ke::ErrorCode::BadUsage, "--sandbox is strict, basic or off, not '" + sandbox_name + "'");
  wo.sandbox = *sandbox;
  if (counters) {
    if (c.device.rfind("cpu", 0) == 0) {
      throw ke::Error(ke::ErrorCode::BadUsage,
                      "--counters reads a GPU's hardware counters with Nsight Compute; the "
                      "device " +
                          c.device + " has none to read (pick a GPU with --device)");
    }
    if (in_process)
      throw ke::Error(ke::ErrorCode::BadUsage, "--counters profiles a worker under Nsight Compute: drop --in-process");
    wo.nsight_compute = ncu_path.empty() ? ke::find_nsight_compute() : ncu_path;
    if (wo.nsight_compute.empty() || ::access(wo.nsight_compute.c_str(), X_OK) != 0) {
      throw ke::Error(ke::ErrorCode::BadUsage,
                      "--counters needs Nsight Compute's ncu: " +
                          (ncu_path.empty() ? std::string("none in $KE_NCU, on PATH or at /usr/local/cuda/bin/ncu")
                                            : "'" + ncu_path + "' is not an executable") +
                          "; give its path with --ncu, or drop --counters");
    }
  }
  // What the report and the database say of it: `off` is never silent.
  const std::string sandbox_said = in_process ? "none (--in-process: candidates ran in this process)"
                                   : *sandbox == ke::SandboxMode::off
                                       ? "off (asked for): candidates ran with all of this user's rights"
                                       : sandbox_name;
  if (use_mpi) {
    if (in_process) throw ke::Error(ke::ErrorCode::BadUsage, "--mpi evaluates on other ranks: drop --in-process");
    if (ke::mpi_init(nullptr, nullptr) != 0) {
      // Every rank but 0 serves evaluations on its own device, and keeps nothing.
      const long served = ke::mpi_serve(c.device, wo);
      if (!c.json) std::fprintf(stderr, "rank %d: evaluated %ld candidates\n", ke::mpi_rank(), served);
      return 0;
    }
  }
  std::shared_ptr<ke::SelectionPolicy> pol = ke::make_policy(policy, popt);
  std::vector<std::shared_ptr<ke::StopRule>> rules{ke::max_evaluations(max_evals)};
  if (vm.count("max-time")) rules.push_back(ke::max_time(max_time));
  if (vm.count("target-speedup")) rules.push_back(ke::target_speedup(target));
  if (vm.count("plateau")) rules.push_back(ke::plateau(plateau));
  if (vm.count("max-tokens")) rules.push_back(ke::token_budget(max_tokens));
  if (vm.count("max-cost")) rules.push_back(ke::cost_budget(max_cost));
  const Clock::time_point starting = Clock::now();
  ke::RunEvaluator made;  // the devices' workers, or (--mpi) the other ranks
  std::shared_ptr<ke::MpiEvaluator> mpi;
  if (use_mpi) {
    ke::MpiOptions mo;
    mo.rank_silence_s = mpi_rank_timeout;
    mpi = std::make_shared<ke::MpiEvaluator>(spec, wo, mo);
    made.slots = mpi->live_ranks();
    std::fprintf(stderr, "MPI: %d evaluation ranks\n", made.slots);
    for (const auto& lost : mpi->lost_ranks()) std::fprintf(stderr, "MPI: lost %s\n", lost.c_str());
    made.evaluator = mpi;
  } else {
    if (in_process && ke::is_device_list(c.device))
      throw ke::Error(ke::ErrorCode::BadUsage, "--in-process evaluates on one device: give one --device");
    made = ke::make_run_evaluator(spec, c.device, wo,
                                  in_process ? std::optional<ke::EvalOptions>(ke::EvalOptions{}) : std::nullopt);
  }
  const ke::DeviceInfo info = made.evaluator->device_info();
  const double start_s = seconds_since(starting);
  // What the model is told of the device: the ceilings a kernel can reach, the toolchain, the limits.
  llm.device_description = ke::describe_device_for_model(info, spec.language, &wo);
  // And the limit in force, once the seed's evaluation has set it (the description gives the rule).
  if (const auto workers = std::dynamic_pointer_cast<ke::WorkerEvaluator>(made.evaluator))
    llm.time_limit_s = [workers] { return workers->timeout_s(); };
  std::shared_ptr<ke::Rounds> rounds;
  if (vm.count("ask") || vm.count("answers")) {
    rounds = std::make_shared<ke::Rounds>(spec, ask_file, ask_count);
    if (vm.count("ask")) llm.defer = rounds->sink();  // no request is sent: each waits in the store for its answer
  }
  std::shared_ptr<ke::Mutator> mut;
  std::shared_ptr<ke::Mutator> writer;  // what writes new structures, for llm and mix
  if (mutator == "llm" || (mutator == "mix" && !llm_models.empty())) {
    std::vector<std::shared_ptr<ke::LlmMutator>> models;
    for (std::size_t i = 0; i < llm_models.size(); ++i) {
      ke::LlmOptions o = llm;
      o.model = llm_models[i];
      o.base_url = llm_urls[i];
      o.api_key_env = llm_key_envs[i];
      o.api = llm_apis[i];
      o.price = llm_prices[i];
      models.push_back(std::make_shared<ke::LlmMutator>(o));  // refuses a missing model or a bad memory mode
    }
    if (models.size() == 1) {
      writer = models.front();
    } else {
      writer = std::make_shared<ke::ModelPoolMutator>(models);  // refuses a model given twice
    }
    // The answers a round took come first, each as the model's child of its request's parent.
    if (rounds) writer = rounds->answering(writer);
  } else if (mutator == "command" || mutator == "mix") {
    writer = std::make_shared<ke::CommandMutator>(command, command_timeout);
  }
  if (mutator == "param") {
    mut = std::make_shared<ke::ParamMutator>();
  } else if (mutator == "mix") {
    mut = std::make_shared<ke::MixMutator>(writer, std::make_shared<ke::ParamMutator>(), llm_param_steps);
  } else {
    mut = writer;
  }
  if (vm.count("max-cost") && !resume && mut->prices().empty()) {  // --llm-price 0,0, say: a budget never spent
    throw ke::Error(ke::ErrorCode::BadUsage, "--max-cost needs model calls with a price, and no model has one above 0");
  }

  // The database is opened once the device is: a run that cannot start leaves no file behind.
  std::shared_ptr<ke::Store> store;
  if (!no_db) store = open_store(db.empty() ? ke::default_store_path(c.spec_path) : db, db.empty());
  ke::RunKeeping keeping;
  keeping.store = store;
  keeping.reuse = !no_reuse;
  if (store && resume) {
    keeping.resume = vm.count("run") ? std::optional<ke::RunId>(run_id) : store->latest_run(spec);
    if (!keeping.resume) {
      throw ke::Error(ke::ErrorCode::BadUsage, store->path() + " holds no run of this spec (" + spec.name +
                                                   ") to resume; drop --resume to start one");
    }
    keeping.spec_named = c.spec_path;
    keeping.other_device_hint = ": resume it there, or drop --resume to start a run here";
    keeping.check = [&](const ke::RunInfo& r) {
      if (vm.count("max-cost") && r.settings.llm_prices.empty() && llm_price_texts.empty()) {
        throw ke::Error(ke::ErrorCode::BadUsage, "--max-cost: run " + std::to_string(r.id) +
                                                     " has no price for its "
                                                     "models; give one with --llm-price IN,OUT");
      }
    };
    // The run goes on at the prices it began with, whatever this command line says (docs/model-mutator.md, "Cost in
    // dollars").
    keeping.on_prices_kept = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    keeping.on_resume = [&](ke::RunId run, std::size_t nodes) {
      if (!c.json)
        std::fprintf(stderr, "resuming run %lld of %s: %zu nodes\n", (long long)run, store->path().c_str(), nodes);
    };
    if (rounds) {
      // Before the run is resumed: an answer that fails is recorded now, its tokens in the run's totals.
      rounds->attach(store, *keeping.resume);
      if (vm.count("answers")) {
        std::map<std::string, ke::LlmPrice> prices = store->run(*keeping.resume).settings.llm_prices;
        prices.merge(mut->prices());  // the run's own prices first, as the run goes on at them
        const ke::AnswerTally tally = rounds->take_answers(answers_path, prices);
        std::fprintf(stderr, "answers %s: %s\n", answers_path.c_str(), tally.text().c_str());
      } else if (const std::size_t waiting = rounds->pending(); waiting > 0) {
        throw ke::Error(ke::ErrorCode::BadUsage,
                        "run " + std::to_string(*keeping.resume) + " of " + store->path() + " has " +
                            std::to_string(waiting) +
                            " model requests waiting for their answers: give them with --answers FILE (a missing "
                            "answer is recorded as one)");
      }
    }
  } else if (store) {
    // The sandbox's mode is stored with the run's options, named even when it was the default.
    const std::string options_text =
        joined(args) + (vm["sandbox"].defaulted() && !in_process ? " --sandbox strict" : "");
    keeping.settings = {policy, mutator, seed, options_text, mut->prices()};
  }
  ke::EvolverOptions options;
  options.seed = seed;
  options.jobs = std::max(1, made.slots);
  options.warm_start = std::move(warm);
  options.hardware_counters = counters;
  const ke::AssembledRun assembled =
      ke::assemble_run(spec, made.evaluator, info, mut, pol, ke::any_of(rules), options, keeping);
  const ke::RunId run = store ? assembled.run : 1;
  if (rounds && !resume) rounds->attach(store, run);
  const std::shared_ptr<ke::ReusingEvaluator>& reusing = assembled.reusing;
  ke::Evolver& evolver = *assembled.evolver;
  Progress progress(max_evals, vm.count("max-time") ? max_time : 0, false);
  evolver.add_observer(&progress);
  const ke::RunResult result = evolver.run();
  std::size_t asked = 0;
  if (rounds) {
    rounds->settle_unused(result.stop_reason);
    if (vm.count("ask") && rounds->asked() > 0) {
      asked = rounds->write_requests();
      std::fprintf(stderr,
                   "asked the model: %zu request%s in %s (answer them, then: kernelevolve run ... --resume "
                   "--answers RESULTS --ask NEXT.jsonl)\n",
                   asked, asked == 1 ? "" : "s", ask_file.c_str());
    } else if (vm.count("ask")) {
      std::fprintf(stderr, "no requests to ask: the run stopped first (%s); %s not written\n",
                   result.stop_reason.c_str(), ask_file.c_str());
    }
  }
  if (mpi) {
    for (const auto& lost : mpi->lost_ranks()) std::fprintf(stderr, "MPI: lost %s\n", lost.c_str());
  }
  if (made.devices) {  // on stderr, so that --json output stays one document
    const std::vector<long> counts = made.devices->evaluations_per_device();
    std::string line = "evaluations per device:";
    for (std::size_t i = 0; i < made.device_ids.size() && i < counts.size(); ++i) {
      line += (i ? ", " : " ") + made.device_ids[i] + " " + std::to_string(counts[i]);
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  if (counters && !result.counters_error.empty()) {  // on stderr, as above
    std::fprintf(stderr, "hardware counters: %s%s\n", result.counters_error.c_str(),
                 result.counted_nodes ? "" : " (none were read in this run)");
  }
  if (result.best_by_device.size() > 1 && !c.json) {
    for (const auto& [cls, id] : result.best_by_device) {
      std::fprintf(stderr, "best on %s: node %lld, %.2fx over the seed there\n", cls.c_str(), (long long)id,
                   evolver.graph().node(id).speedup);
    }
  }
  // The search is what the run's time holds beyond node 0 and the baselines (a resumed run's earlier time too).
  const double search_s = std::max(0.0, result.state.elapsed_s - result.node0_s - result.baselines_s);
  char steps[320];
  std::snprintf(steps, sizeof steps,
                "\"describe\": %.3f, \"capture\": %.3f, \"start\": %.3f, \"node0\": %.3f, \"baselines\": %.3f, "
                "\"search\": %.3f",
                std::max(0.0, problem_s - c.capture_s), c.capture_s, start_s, result.node0_s, result.baselines_s,
                search_s);
  if (c.json) {
    std::string report = ke::run_report_json(spec, info, evolver.graph(), result, run);
    if (const auto end = report.rfind('}'); end != std::string::npos) {
      report.insert(end, ", \"sandbox\": " + ke::json_quote(in_process ? "none" : sandbox_name) + ", \"steps_s\": {" +
                             steps + "}");
    }
    std::cout << report << "\n";
  } else {
    std::cout << ke::run_report_text(spec, info, evolver.graph(), result);
    std::cout << "  sandbox: " << sandbox_said << "\n";
    char line[320];
    std::snprintf(line, sizeof line,
                  "  steps: the problem %.1f s (torch.compile's capture %.1f s of it), the evaluator's start %.1f s, "
                  "node 0 %.1f s, baselines %.1f s, search %.1f s\n",
                  problem_s, c.capture_s, start_s, result.node0_s, result.baselines_s, search_s);
    std::cout << line;
    if (store) {
      std::cout << "  database: " << store->path() << ", run " << run;
      if (reusing && reusing->reused() > 0) std::cout << " (" << reusing->reused() << " measurements reused)";
      std::cout << "\n";
    }
  }
  return result.best || asked > 0 ? 0 : 1;  // a round that asked for the first kernel has no best yet
}

}  // namespace cli
