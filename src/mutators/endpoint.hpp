// How a model is called (the endpoint protocol): the JSON body of a chat request, OpenAI's or Anthropic's; the
// reply's text and the tokens it cost; one call with retries and backoff. The model mutator sends what its
// prompts (prompt_sections.hpp) wrote; a round (rounds.hpp) keeps request_body's output to be sent as a batch.
#pragma once
#include <cstdint>
#include <mutex>
#include <random>
#include <string>

#include "kernelevolve/mutator.hpp"

namespace kernelevolve::mutators {

// What a call spent: the prompt's tokens and the answer's, as the server reported them.
struct Usage {
  std::int64_t prompt = 0, completion = 0;
  bool estimated = false;  // the server reported none: counted from the lengths, 4 bytes a token
  std::int64_t total() const { return prompt + completion; }
};

// The request's JSON body: model, max_tokens, temperature, and the system and user messages as `options.api` takes
// them ("openai": a system message; "anthropic": a system field).
std::string request_body(const LlmOptions& options, const std::string& system, const std::string& user);

// Parses a reply of `api`: the answer's text and the tokens it cost, or false with an error.
bool parse_reply(const std::string& api, const std::string& body, std::string& text, Usage& used, std::string& error);

// Calls the endpoint of `options`, retrying on 429, 5xx and transport errors with exponential backoff and jitter
// (Retry-After wins where given); fills answer and used, or error. Safe to call from several threads at once.
class Endpoint {
 public:
  void call(const LlmOptions& options, const std::string& body, std::string& answer, Usage& used, std::string& error);

 private:
  std::mutex mutex_;  // for the jitter's generator
  std::mt19937_64 jitter_{std::random_device{}()};
};

}  // namespace kernelevolve::mutators
