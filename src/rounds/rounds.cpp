// Rounds: deferred model requests kept in the store and written as a Batch API file, and a results file (or a
// folder of answers) taken back, each answer a child of its request's parent.
#include "kernelevolve/rounds.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

#include "core/text_file.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/json.hpp"
#include "mutators/answer.hpp"

namespace kernelevolve {

namespace {

// What every request id of a run starts with: its problem's name (for people reading a suite's batch) and a
// random token, so that the ids of two runs of one problem, in two databases, never meet.
std::string make_prefix(const std::string& spec_name) {
  std::string name;
  for (char c : spec_name.substr(0, 24)) name += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  std::random_device device;
  std::ostringstream token;
  token << std::hex << (static_cast<std::uint64_t>(device()) << 32 | device());
  return (name.empty() ? "ke" : name) + "-" + token.str().substr(0, 10);
}

// An answer as the results file (or a folder) gives it, before it is judged.
struct Answer {
  std::string id;
  std::string source;  // FILE:LINE or the answer's file
  std::string text;    // the model's message
  std::string error;   // why there is no usable text
  std::int64_t prompt_tokens = -1, completion_tokens = -1, total_tokens = -1;
  std::size_t reply_bytes = 0;  // for the estimate of a reply without usage
};

// One line of a results file: {"custom_id", "response": {"status_code", "body": {choices, usage}}, "error"}.
// False with `why` for a line that names no request.
bool parse_result_line(const std::string& line, Answer& a, std::string& why) {
  simdjson::dom::parser parser;
  simdjson::dom::object doc;
  if (parser.parse(line).get_object().get(doc) != simdjson::SUCCESS) {
    why = "garbled: not a JSON object";
    return false;
  }
  std::string_view id;
  if (doc["custom_id"].get_string().get(id) != simdjson::SUCCESS || id.empty()) {
    why = "garbled: no custom_id";
    return false;
  }
  a.id = id;
  a.reply_bytes = line.size();
  simdjson::dom::element error;
  if (doc["error"].get(error) == simdjson::SUCCESS && !error.is_null()) {
    a.error = "the batch reported an error: " + simdjson::to_string(error).substr(0, 300);
    return true;
  }
  simdjson::dom::element response;
  if (doc["response"].get(response) != simdjson::SUCCESS || response.is_null()) {
    a.error = "the line has neither a response nor an error";
    return true;
  }
  std::int64_t status = 0;
  if (response["status_code"].get_int64().get(status) != simdjson::SUCCESS) {
    a.error = "the response has no status_code";
    return true;
  }
  simdjson::dom::element body;
  const bool has_body = response["body"].get(body) == simdjson::SUCCESS;
  if (status != 200) {
    a.error = "HTTP " + std::to_string(status) + (has_body ? ": " + simdjson::to_string(body).substr(0, 300) : "");
    return true;
  }
  if (!has_body) {
    a.error = "the response has no body";
    return true;
  }
  std::string_view content;
  if (body["choices"].at(0)["message"]["content"].get_string().get(content) != simdjson::SUCCESS || content.empty()) {
    a.error = "the response holds no answer text (choices[0].message.content)";
  } else {
    a.text = content;
  }
  // As a live call counts them (mutators/endpoint.cpp, parse_reply): the prompt's and the answer's, or a total.
  std::int64_t n = 0;
  if (body["usage"]["prompt_tokens"].get_int64().get(n) == simdjson::SUCCESS) a.prompt_tokens = n;
  if (body["usage"]["completion_tokens"].get_int64().get(n) == simdjson::SUCCESS) a.completion_tokens = n;
  if (body["usage"]["total_tokens"].get_int64().get(n) == simdjson::SUCCESS) a.total_tokens = n;
  return true;
}

}  // namespace

std::string AnswerTally::text() const {
  std::ostringstream out;
  out << evaluated << " to evaluate, " << failed << " failed, " << missing << " missing, " << duplicates << " duplicate"
      << (duplicates == 1 ? "" : "s") << ", " << unknown << " with an unknown id, " << garbled << " garbled line"
      << (garbled == 1 ? "" : "s") << "; " << ignored << " for other runs ignored";
  return out.str();
}

struct Rounds::Impl {
  Spec spec;
  std::string ask_file;
  int per_round = 1;
  std::shared_ptr<Store> store;
  RunId run = -1;
  mutable std::mutex mutex;
  std::string prefix;
  std::int64_t round = 0;  // this process's round, once it asks
  std::int64_t next_seq = 0;
  std::size_t asked = 0;
  double created_s = 0;  // the run's time when its answers were taken (their failures are recorded at it)

  struct Ready {
    ModelRequest request;
    Candidate child;
    std::string note, answer, source;
    std::int64_t tokens = 0;
    double cost_usd = 0;
  };
  std::deque<Ready> ready;

  void require_run() const {
    if (!store || run < 0) throw Error(ErrorCode::BadUsage, "rounds: no run attached (Rounds::attach)");
  }

  // Parts of an answer that could not be used while others of it are evaluated: a failed call of the mutator and an
  // entry of the answers, the request left to be settled by its evaluated children.
  void fail_part(const ModelRequest& r, const std::string& source, const std::string& why, const std::string& answer) {
    store->record_model_answer(run, {r.id, source, why});
    Mutation m;
    m.note = "answer to request " + r.id;
    m.prompt = r.prompt;
    m.answer = answer;
    m.error = "request " + r.id + ": " + why;
    m.model = r.model;
    store->record_mutator_failure(run, "llm", m, r.parent >= 0 ? std::vector<NodeId>{r.parent} : std::vector<NodeId>{},
                                  created_s, 0);
  }

  // An answer that is not evaluated: the request settled, a failed call of the mutator, an entry of the answers.
  void fail(const ModelRequest& r, const std::string& source, const std::string& why, const std::string& answer,
            std::int64_t tokens, double cost) {
    store->settle_model_request(run, r.id, "failed", why);
    store->record_model_answer(run, {r.id, source, why});
    Mutation m;
    m.note = "answer to request " + r.id;
    m.prompt = r.prompt;
    m.answer = answer;
    m.error = "request " + r.id + ": " + why;
    m.tokens = tokens;
    m.cost_usd = cost;
    m.model = r.model;
    store->record_mutator_failure(run, "llm", m, r.parent >= 0 ? std::vector<NodeId>{r.parent} : std::vector<NodeId>{},
                                  created_s, 0);
  }
};

namespace {

// The model's part of a run's mutator in rounds: the answers taken, one per call, then the model itself.
class AnsweringMutator final : public Mutator {
 public:
  AnsweringMutator(std::shared_ptr<Rounds::Impl> rounds, std::shared_ptr<Mutator> model)
      : rounds_(std::move(rounds)), model_(std::move(model)) {}
  std::string name() const override { return model_->name(); }
  bool writes_first_kernel() const override { return model_->writes_first_kernel(); }
  std::map<std::string, LlmPrice> prices() const override { return model_->prices(); }
  void set_prices(const std::map<std::string, LlmPrice>& prices) override { model_->set_prices(prices); }

  Mutation mutate(const MutationContext& ctx) override {
    Rounds::Impl& r = *rounds_;
    for (;;) {
      std::unique_lock lock(r.mutex);
      if (r.ready.empty()) break;
      Rounds::Impl::Ready next = std::move(r.ready.front());
      r.ready.pop_front();
      // Two answers that wrote the same kernel, or one that is its parent again under new comments: measured once.
      if (ctx.graph.contains(next.child)) {
        r.fail(next.request, next.source, "its kernel is one the graph holds already", next.answer, next.tokens,
               next.cost_usd);
        continue;
      }
      Mutation m;
      m.child = std::move(next.child);
      m.note = next.note + " [request " + next.request.id + "]";
      m.prompt = next.request.prompt;
      m.answer = std::move(next.answer);
      m.tokens = next.tokens;
      m.cost_usd = next.cost_usd;
      m.model = next.request.model;
      m.mutator = model_->name();
      if (next.request.parent >= 0) m.parents = {next.request.parent};
      // The id the evolver gives the child next (MixMutator counts on it too).
      const std::string node = "node " + std::to_string(ctx.graph.size());
      r.store->settle_model_request(r.run, next.request.id, "answered", "evaluated as " + node);
      r.store->record_model_answer(r.run, {next.request.id, next.source, "evaluated as " + node});
      return m;
    }
    return model_->mutate(ctx);
  }

 private:
  std::shared_ptr<Rounds::Impl> rounds_;
  std::shared_ptr<Mutator> model_;
};

}  // namespace

Rounds::Rounds(Spec spec, std::string ask_file, int per_round) : impl_(std::make_shared<Impl>()) {
  if (per_round < 1) throw Error(ErrorCode::BadUsage, "rounds: a round asks for at least one request");
  impl_->spec = std::move(spec);
  impl_->ask_file = std::move(ask_file);
  impl_->per_round = per_round;
}

Rounds::~Rounds() = default;

void Rounds::attach(std::shared_ptr<Store> store, RunId run) {
  std::lock_guard lock(impl_->mutex);
  impl_->store = std::move(store);
  impl_->run = run;
  impl_->require_run();
  const std::vector<ModelRequest> requests = impl_->store->model_requests(run);
  impl_->prefix = requests.empty() ? make_prefix(impl_->spec.name) : requests.front().prefix;
  impl_->next_seq = requests.empty() ? 0 : requests.back().seq + 1;
  std::int64_t last_round = 0;
  for (const ModelRequest& r : requests) last_round = std::max(last_round, r.round);
  impl_->round = last_round + 1;
  impl_->created_s = impl_->store->run(run).elapsed_s;
}

std::function<DeferredReceipt(const DeferredRequest&)> Rounds::sink() {
  std::shared_ptr<Impl> impl = impl_;
  return [impl](const DeferredRequest& asked) {
    std::lock_guard lock(impl->mutex);
    impl->require_run();
    ModelRequest r;
    r.prefix = impl->prefix;
    r.round = impl->round;
    r.seq = impl->next_seq++;
    impl->asked += 1;
    r.id = impl->prefix + "-" + std::to_string(r.round) + "-" + std::to_string(impl->asked);
    r.parent = asked.parents.empty() ? -1 : asked.parents.front();
    r.model = asked.model;
    r.prompt = asked.prompt;
    r.body = asked.body;
    impl->store->add_model_request(impl->run, r);
    DeferredReceipt receipt{r.id, ""};
    if (impl->asked >= static_cast<std::size_t>(impl->per_round)) {
      receipt.stop_run = "asked the model: " + std::to_string(impl->asked) + " request" +
                         (impl->asked == 1 ? "" : "s") + " (round " + std::to_string(r.round) + ") in " +
                         (impl->ask_file.empty() ? "the database" : impl->ask_file);
    }
    return receipt;
  };
}

std::shared_ptr<Mutator> Rounds::answering(std::shared_ptr<Mutator> model) {
  if (!model) throw Error(ErrorCode::BadUsage, "rounds: the model's mutator is required");
  return std::make_shared<AnsweringMutator>(impl_, std::move(model));
}

AnswerTally Rounds::take_answers(const std::string& path, const std::map<std::string, LlmPrice>& prices) {
  std::lock_guard lock(impl_->mutex);
  Impl& s = *impl_;
  s.require_run();
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(ErrorCode::BadUsage, "--answers: no file or folder at " + path);
  AnswerTally tally;
  std::vector<Answer> answers;
  std::vector<std::pair<std::string, std::string>> garbled;  // source, why
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(path, ec))
      if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      Answer a;
      a.id = file.extension() == ".md" || file.extension() == ".txt" ? file.stem().string() : file.filename().string();
      a.source = file.string();
      std::string problem;
      if (!read_text(file, a.text, problem)) a.error = "the answer file cannot be read: " + problem;
      if (a.error.empty() && a.text.find_first_not_of(" \t\r\n") == std::string::npos) a.error = "the answer is empty";
      a.reply_bytes = a.text.size();
      answers.push_back(std::move(a));
    }
  } else {
    std::ifstream in(path);
    if (!in) throw Error(ErrorCode::BadUsage, "--answers: cannot read " + path);
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      Answer a;
      a.source = path + ":" + std::to_string(number);
      std::string why;
      if (parse_result_line(line, a, why)) {
        answers.push_back(std::move(a));
      } else {
        garbled.emplace_back(a.source, why);
      }
    }
  }
  // A line that names no request may be anyone's: it is recorded, with where it is, in every run that reads it.
  for (const auto& [source, why] : garbled) {
    s.store->record_model_answer(s.run, {"", source, why});
    tally.garbled += 1;
  }
  std::vector<ModelRequest> requests = s.store->model_requests(s.run);
  std::map<std::string, const ModelRequest*> by_id;
  for (const ModelRequest& r : requests) by_id[r.id] = &r;
  const Checkpoint stored = s.store->load(s.run);
  std::set<std::string> taken;
  for (Answer& a : answers) {
    if (s.prefix.empty() || a.id.rfind(s.prefix + "-", 0) != 0) {
      tally.ignored += 1;  // another run's: a suite's batch serves many
      continue;
    }
    const auto it = by_id.find(a.id);
    if (it == by_id.end()) {
      s.store->record_model_answer(s.run, {a.id, a.source, "unknown id: this run asked no such request"});
      tally.unknown += 1;
      continue;
    }
    const ModelRequest& r = *it->second;
    if (taken.count(a.id) || r.state != "pending") {
      s.store->record_model_answer(
          s.run, {a.id, a.source,
                  taken.count(a.id) ? "duplicate: answered again in the same file; the first answer counts"
                                    : "duplicate: the request was settled before (" + r.state + ": " + r.outcome +
                                          "); the first answer counts"});
      tally.duplicates += 1;
      continue;
    }
    taken.insert(a.id);
    // Tokens as a live call counts them; without usage, estimated from the lengths, 4 bytes a token.
    std::int64_t prompt = std::max<std::int64_t>(a.prompt_tokens, 0);
    std::int64_t completion = std::max<std::int64_t>(a.completion_tokens, 0);
    if (a.total_tokens > prompt + completion) completion = a.total_tokens - prompt;
    if (prompt + completion <= 0) {
      prompt = static_cast<std::int64_t>(r.body.size() / 4);
      completion = static_cast<std::int64_t>(a.reply_bytes / 4);
    }
    const auto price = prices.find(r.model);
    const double cost = price == prices.end() ? 0 : price->second.cost_usd(prompt, completion);
    if (!a.error.empty()) {
      s.fail(r, a.source, a.error, a.text, prompt + completion, cost);
      tally.failed += 1;
      continue;
    }
    const bool first_kernel = r.parent < 0;
    if (!first_kernel && static_cast<std::size_t>(r.parent) >= stored.graph.size()) {
      s.fail(r, a.source, "its parent, node " + std::to_string(r.parent) + ", is not in the run", a.text,
             prompt + completion, cost);
      tally.failed += 1;
      continue;
    }
    const Candidate base =
        first_kernel ? Candidate{"", s.spec.language, s.spec.seed_tunables()} : stored.graph.node(r.parent).candidate;
    // Each child the answer holds (several where the prompt asked for them, LlmOptions::children) judged on its
    // own, as a live answer's are: a part that cannot be used is a recorded failure, and the others stand.
    std::vector<mutators::ModelChild> made = mutators::model_children(s.spec, base, a.text);
    const bool any = std::any_of(made.begin(), made.end(), [](const mutators::ModelChild& m) { return m.child; });
    std::string failures;
    for (const mutators::ModelChild& m : made)
      if (!m.child) failures += (failures.empty() ? "" : "; ") + m.error;
    if (!any) {
      s.fail(r, a.source, failures, a.text, prompt + completion, cost);
      tally.failed += 1;
      continue;
    }
    if (!failures.empty()) {  // recorded, without settling the request: its other children are evaluated
      s.fail_part(r, a.source, failures, a.text);
      tally.failed += 1;
    }
    bool first = true;
    for (mutators::ModelChild& m : made) {
      if (!m.child) continue;
      // The call's tokens and cost go with its first child, as a live call's do.
      s.ready.push_back(
          {r, std::move(*m.child), m.note, a.text, a.source, first ? prompt + completion : 0, first ? cost : 0});
      first = false;
      tally.evaluated += 1;
    }
  }
  for (const ModelRequest& r : requests) {
    if (r.state != "pending" || taken.count(r.id)) continue;
    s.fail(r, path, "missing: no answer in " + path, "", 0, 0);
    tally.missing += 1;
  }
  // In the order asked, whatever the order of the file.
  std::stable_sort(s.ready.begin(), s.ready.end(),
                   [](const Impl::Ready& a, const Impl::Ready& b) { return a.request.seq < b.request.seq; });
  return tally;
}

void Rounds::settle_unused(const std::string& stop_reason) {
  std::lock_guard lock(impl_->mutex);
  while (!impl_->ready.empty()) {
    const Impl::Ready r = std::move(impl_->ready.front());
    impl_->ready.pop_front();
    impl_->fail(r.request, r.source, "not evaluated: the run stopped first (" + stop_reason + ")", r.answer, 0, 0);
  }
}

std::size_t Rounds::pending() const {
  std::lock_guard lock(impl_->mutex);
  impl_->require_run();
  std::size_t n = 0;
  for (const ModelRequest& r : impl_->store->model_requests(impl_->run)) n += r.state == "pending";
  return n;
}

std::size_t Rounds::asked() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->asked;
}

std::string batch_request_line(const ModelRequest& r) {
  return "{\"custom_id\": " + json_quote(r.id) +
         ", \"method\": \"POST\", \"url\": \"/v1/chat/completions\", \"body\": " + r.body + "}";
}

std::size_t Rounds::write_requests() const {
  std::lock_guard lock(impl_->mutex);
  impl_->require_run();
  std::ofstream out(impl_->ask_file, std::ios::trunc);
  if (!out) throw Error(ErrorCode::BadUsage, "--ask: cannot write " + impl_->ask_file);
  std::size_t n = 0;
  for (const ModelRequest& r : impl_->store->model_requests(impl_->run)) {
    if (r.state != "pending") continue;
    out << batch_request_line(r) << "\n";
    n += 1;
  }
  out.close();
  if (!out) throw Error(ErrorCode::Internal, "--ask: writing " + impl_->ask_file + " failed");
  return n;
}

BatchCollection write_batch_requests(const std::vector<std::string>& stores, const std::string& path) {
  BatchCollection made;
  std::vector<std::string> lines;
  std::map<std::string, std::string> seen;  // id -> where it came from
  for (const std::string& file : stores) {
    if (!std::filesystem::exists(file)) throw Error(ErrorCode::BadUsage, "ask: no database at " + file);
    Store store(file);
    for (const RunInfo& run : store.runs()) {
      bool any = false;
      for (const ModelRequest& r : store.model_requests(run.id)) {
        if (r.state != "pending") continue;
        const std::string where = file + ", run " + std::to_string(run.id);
        if (const auto [it, fresh] = seen.emplace(r.id, where); !fresh) {
          throw Error(ErrorCode::BadUsage, "request id " + r.id + " is pending in both " + it->second + " and " +
                                               where + ": a batch needs each id once (is one database a copy?)");
        }
        lines.push_back(batch_request_line(r));
        any = true;
      }
      made.runs += any;
    }
  }
  made.requests = lines.size();
  if (lines.empty()) return made;
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw Error(ErrorCode::BadUsage, "ask: cannot write " + path);
  for (const std::string& line : lines) out << line << "\n";
  out.close();
  if (!out) throw Error(ErrorCode::Internal, "ask: writing " + path + " failed");
  return made;
}

}  // namespace kernelevolve
