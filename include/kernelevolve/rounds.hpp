// Rounds: a run that asks the model in batches. It stops where it needs the model, leaving its requests in the
// store and in a JSONL file in the OpenAI Batch API's request format, and goes on later from the batch's results
// file (or a folder of answers): each answer becomes a child of its request's parent, as a live answer would. No
// device waits on a model, and a batch (half the price of live calls) can serve a whole suite of problems.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernelevolve/mutator.hpp"
#include "kernelevolve/spec.hpp"
#include "kernelevolve/store.hpp"

namespace kernelevolve {

// What a run made of an answers file. Every answer that is not evaluated is recorded in the store (the
// request settled "failed" with why, a failed call of the mutator, an entry of the answers it took): none is
// skipped in silence.
struct AnswerTally {
  std::size_t evaluated = 0;   // answers made children of their parents, to be evaluated as the run goes on
  std::size_t failed = 0;      // answered, but unusable: an error object, a status not 200, no text, no code
  std::size_t missing = 0;     // requests of the run the file does not answer
  std::size_t duplicates = 0;  // a second answer to a request, or one to a request settled before: the first counts
  std::size_t unknown = 0;     // ids of this run's form that it never asked
  std::size_t garbled = 0;     // lines that are not a JSON object or name no custom_id
  std::size_t ignored = 0;     // other runs' answers (a suite's file): counted, left alone
  std::string text() const;    // one line, for people
};

// A run's rounds: the sink that keeps its deferred requests (LlmOptions::defer), the answers it takes, and the
// mutator that hands them to the search before asking again.
class Rounds {
 public:
  // `ask_file`: where the run's requests are written when it stops (empty: the store only); `per_round`: the
  // requests a round gathers before the run stops (parents as the search picks them).
  Rounds(Spec spec, std::string ask_file, int per_round = 1);
  ~Rounds();
  // The run the requests belong to, once the store has it (before its evolver runs).
  void attach(std::shared_ptr<Store> store, RunId run);
  // For LlmOptions::defer: keeps a request in the store under a fresh id; the round's last says why the run stops.
  std::function<DeferredReceipt(const DeferredRequest&)> sink();
  // The model's part of a run's mutator: each answer that take_answers made a child, in the order asked, then
  // `model` (which, with a sink, asks again).
  std::shared_ptr<Mutator> answering(std::shared_ptr<Mutator> model);
  // Takes the answers to the attached run's pending requests from `path`: a results file of the Batch API (JSONL:
  // custom_id, response.status_code, response.body with choices[0].message.content and usage, error), or a folder
  // of plain answers, one file per request named by its id (`ID`, `ID.md`, `ID.txt`). Tokens count from each
  // answer's usage (else estimated, 4 bytes a token) at `prices`. Throws Error(BadUsage) for a path that is
  // neither; a bad line is a recorded failure, never an exception.
  AnswerTally take_answers(const std::string& path, const std::map<std::string, LlmPrice>& prices);
  // Answers taken but never handed out (the run stopped first): recorded as failures, saying why.
  void settle_unused(const std::string& stop_reason);
  std::size_t pending() const;  // the attached run's requests waiting for answers
  std::size_t asked() const;    // requests kept by this process
  // Writes the attached run's pending requests to the ask file, a Batch API line each; returns how many.
  std::size_t write_requests() const;

  struct Impl;  // the state behind it, shared with the mutator `answering` makes (rounds.cpp)

 private:
  std::shared_ptr<Impl> impl_;
};

// One request as a line of the Batch API's input file: custom_id, method, url, body.
std::string batch_request_line(const ModelRequest& request);

// The pending requests of every run of the databases `stores`, written to `path` as one batch (ids are unique
// across databases: each carries its problem's name and a random token of its run; a collision is
// Error(BadUsage)). Nothing is written when none is pending.
struct BatchCollection {
  std::size_t requests = 0, runs = 0;
};
BatchCollection write_batch_requests(const std::vector<std::string>& stores, const std::string& path);

}  // namespace kernelevolve
