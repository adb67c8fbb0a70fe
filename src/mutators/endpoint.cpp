// The endpoint protocol: a chat request's JSON body, the reply's text and usage, and the call with its retries;
// see endpoint.hpp.
#include "mutators/endpoint.hpp"

#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "kernelevolve/json.hpp"
#include "mutators/http_client.hpp"

namespace kernelevolve::mutators {

std::string request_body(const LlmOptions& options, const std::string& system, const std::string& user) {
  std::ostringstream out;
  out << "{\"model\": " << json_quote(options.model) << ", \"max_tokens\": " << options.max_tokens
      << ", \"temperature\": " << options.temperature << ", ";
  if (options.api == "anthropic") {
    out << "\"system\": " << json_quote(system)
        << ", \"messages\": [{\"role\": \"user\", \"content\": " << json_quote(user) << "}]}";
  } else {
    out << "\"messages\": [{\"role\": \"system\", \"content\": " << json_quote(system)
        << "}, {\"role\": \"user\", \"content\": " << json_quote(user) << "}]}";
  }
  return out.str();
}

// Parses the reply: the answer's text and the tokens it cost, or an error.
bool parse_reply(const std::string& api, const std::string& body, std::string& text, Usage& used, std::string& error) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc) != simdjson::SUCCESS) {
    error = "the model's reply is not JSON: " + body.substr(0, 200);
    return false;
  }
  std::string_view content;
  if (api == "anthropic") {
    simdjson::dom::array blocks;
    if (doc["content"].get_array().get(blocks) == simdjson::SUCCESS) {
      for (auto block : blocks) {
        std::string_view piece;
        if (block["text"].get_string().get(piece) == simdjson::SUCCESS) text += std::string(piece);
      }
    }
    if (doc["usage"]["input_tokens"].get_int64().get(used.prompt) != simdjson::SUCCESS) used.prompt = 0;
    if (doc["usage"]["output_tokens"].get_int64().get(used.completion) != simdjson::SUCCESS) used.completion = 0;
  } else {
    if (doc["choices"].at(0)["message"]["content"].get_string().get(content) == simdjson::SUCCESS) text = content;
    if (doc["usage"]["prompt_tokens"].get_int64().get(used.prompt) != simdjson::SUCCESS) used.prompt = 0;
    if (doc["usage"]["completion_tokens"].get_int64().get(used.completion) != simdjson::SUCCESS) used.completion = 0;
    // A total without its parts is priced as completion, the dearer kind: a cost never under-counted.
    std::int64_t total = 0;
    if (doc["usage"]["total_tokens"].get_int64().get(total) == simdjson::SUCCESS && total > used.total()) {
      used.completion = total - used.prompt;
    }
  }
  used.prompt = std::max<std::int64_t>(used.prompt, 0);
  used.completion = std::max<std::int64_t>(used.completion, 0);
  if (used.total() <= 0) {
    used.completion = static_cast<std::int64_t>(body.size() / 4);
    used.estimated = true;
  }
  if (text.empty()) {
    error = "the model's reply holds no answer text: " + body.substr(0, 200);
    return false;
  }
  return true;
}

// One call with retries; fills answer/tokens or error.
void Endpoint::call(const LlmOptions& options, const std::string& body, std::string& answer, Usage& used,
                    std::string& error) {
  std::vector<std::string> headers;
  const char* key = options.api_key_env.empty() ? nullptr : std::getenv(options.api_key_env.c_str());
  if (!options.api_key_env.empty() && (!key || !*key)) {
    error = "the environment variable " + options.api_key_env + " that should hold the API key is not set";
    return;
  }
  if (options.api == "anthropic") {
    if (key) headers.push_back(std::string("x-api-key: ") + key);
    headers.push_back("anthropic-version: 2023-06-01");
  } else if (key) {
    headers.push_back(std::string("Authorization: Bearer ") + key);
  }
  std::string base = options.base_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string url = base + (options.api == "anthropic" ? "/messages" : "/chat/completions");
  for (int attempt = 0;; ++attempt) {
    const mutators::HttpResponse r = mutators::http_post_json(url, headers, body, options.timeout_s);
    const bool retryable = r.status == 0 || r.status == 429 || r.status >= 500;
    if (r.status == 200) {
      parse_reply(options.api, r.body, answer, used, error);
      if (used.estimated) used.prompt = static_cast<std::int64_t>(body.size() / 4);
      return;
    }
    const std::string what = r.status == 0 ? "no answer (" + r.error + ")"
                                           : "HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 300);
    if (!retryable || attempt >= options.max_retries) {
      error = "the model request failed after " + std::to_string(attempt + 1) + " attempt(s): " + what;
      return;
    }
    double wait = std::min(options.backoff_max_s, options.backoff_initial_s * std::pow(2.0, attempt));
    {
      std::lock_guard lock(mutex_);
      wait *= std::uniform_real_distribution<double>(0.5, 1.0)(jitter_);
    }
    if (r.retry_after_s >= 0) wait = std::min(r.retry_after_s, options.backoff_max_s);
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
}

}  // namespace kernelevolve::mutators
