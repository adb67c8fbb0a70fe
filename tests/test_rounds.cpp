// Rounds (docs/rounds.md): a run that stops where it needs the model and leaves its requests as an OpenAI Batch API
// file, then goes on from the batch's results, as the command line drives it on the CPU (no network: the tests
// write the results file a batch would return). Answers out of order, missing, duplicated, garbled, with an
// unknown id or another run's; a suite's requests in one file.
#include <doctest/doctest.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernelevolve/json.hpp"
#include "kernelevolve/store.hpp"
#include "support/cli_runner.hpp"

namespace ke = kernelevolve;

namespace {

using ke_test::TempDir;

std::string fixture(const std::string& name) { return std::string(KE_FIXTURES) + "/" + name; }

// A model's run over the column sum, its requests asked, never sent.
std::string model_run(const std::string& db) {
  return "run " + fixture("e2e/colsum.json") + " --db " + db +
         " --in-process --mutator llm --llm-model batch-model --llm-price 1,2 --max-evals 40";
}

struct Request {
  std::string id, model, system, user;
};

// The ask file read back as the Batch API reads it: every line an object with custom_id, method POST, the chat
// completions url and a body with the model and its messages.
std::vector<Request> read_ask_file(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::vector<Request> out;
  std::string line;
  simdjson::dom::parser parser;
  while (std::getline(in, line)) {
    simdjson::dom::object doc;
    REQUIRE(parser.parse(line).get_object().get(doc) == simdjson::SUCCESS);
    Request r;
    std::string_view text;
    REQUIRE(doc["custom_id"].get_string().get(text) == simdjson::SUCCESS);
    r.id = text;
    CHECK(r.id.size() <= 64);  // the Batch API's limit on a custom_id
    REQUIRE(doc["method"].get_string().get(text) == simdjson::SUCCESS);
    CHECK(text == "POST");
    REQUIRE(doc["url"].get_string().get(text) == simdjson::SUCCESS);
    CHECK(text == "/v1/chat/completions");
    REQUIRE(doc["body"]["model"].get_string().get(text) == simdjson::SUCCESS);
    r.model = text;
    simdjson::dom::array messages;
    REQUIRE(doc["body"]["messages"].get_array().get(messages) == simdjson::SUCCESS);
    REQUIRE(messages.size() == 2);
    REQUIRE(messages.at(0)["role"].get_string().get(text) == simdjson::SUCCESS);
    CHECK(text == "system");
    REQUIRE(messages.at(0)["content"].get_string().get(text) == simdjson::SUCCESS);
    r.system = text;
    REQUIRE(messages.at(1)["role"].get_string().get(text) == simdjson::SUCCESS);
    CHECK(text == "user");
    REQUIRE(messages.at(1)["content"].get_string().get(text) == simdjson::SUCCESS);
    r.user = text;
    std::int64_t max_tokens = 0;
    CHECK(doc["body"]["max_tokens"].get_int64().get(max_tokens) == simdjson::SUCCESS);
    CHECK(max_tokens > 0);
    out.push_back(std::move(r));
  }
  return out;
}

// A line of the results file a batch returns for a request answered with `content`.
std::string result_line(const std::string& id, const std::string& content, int prompt_tokens = 100,
                        int completion_tokens = 50) {
  return "{\"id\": \"batch_req_" + id + "\", \"custom_id\": " + ke::json_quote(id) +
         ", \"response\": {\"status_code\": 200, \"request_id\": \"req\", \"body\": {\"id\": \"chatcmpl-1\", "
         "\"object\": \"chat.completion\", \"model\": \"batch-model\", \"choices\": [{\"index\": 0, \"message\": "
         "{\"role\": \"assistant\", \"content\": " +
         ke::json_quote(content) +
         "}, \"finish_reason\": \"stop\"}], \"usage\": {\"prompt_tokens\": " + std::to_string(prompt_tokens) +
         ", \"completion_tokens\": " + std::to_string(completion_tokens) +
         ", \"total_tokens\": " + std::to_string(prompt_tokens + completion_tokens) + "}}}, \"error\": null}";
}

// Rows outer, columns inner: each column's sum in the reference's order, contiguous loads.
const char* const kRowsOuter =
    "Walk the rows contiguously.\n```c\n#include <stdint.h>\n"
    "void colsum(const float* x, float* y, int64_t M, int64_t N) {\n"
    "  for (int64_t j = 0; j < N; ++j) y[j] = 0.0f;\n"
    "  for (int64_t i = 0; i < M; ++i) {\n"
    "    const float* row = x + i * N;\n"
    "    for (int64_t j = 0; j < N; ++j) y[j] += row[j];\n"
    "  }\n}\n```\n";

// An edit of the seed: the row pointer offset once per block.
const char* const kEdit =
    "Offset the row once.\n<<<<<<< SEARCH\n"
    "      const float* row = x + i * N;\n"
    "      for (int64_t j = j0; j < j1; ++j) acc[j - j0] += row[j];\n"
    "=======\n"
    "      const float* row = x + i * N + j0;\n"
    "      for (int64_t j = 0; j < j1 - j0; ++j) acc[j] += row[j];\n"
    ">>>>>>> REPLACE\n";

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::map<std::string, ke::ModelRequest> requests_by_id(ke::Store& store, ke::RunId run) {
  std::map<std::string, ke::ModelRequest> out;
  for (const ke::ModelRequest& r : store.model_requests(run)) out[r.id] = r;
  return out;
}

}  // namespace

TEST_CASE("--ask: the run stops where it needs the model, its requests in the store and a Batch API file") {
  TempDir dir("ke_rounds");
  const std::string db = dir / "runs.db", ask = dir / "round1.jsonl";
  const auto o = ke_test::run_cli(model_run(db) + " --ask " + ask + " --ask-count 3");
  REQUIRE_MESSAGE(o.code == 0, o.err);
  CHECK_MESSAGE(o.err.find("asked the model: 3 requests in " + ask) != std::string::npos, o.err);
  CHECK_MESSAGE(o.out.find("asked the model: 3 requests (round 1) in " + ask) != std::string::npos, o.out);
  const std::vector<Request> asked = read_ask_file(ask);
  REQUIRE(asked.size() == 3);
  std::set<std::string> ids;
  for (const Request& r : asked) {
    ids.insert(r.id);
    CHECK(r.model == "batch-model");
    CHECK(r.user.find("## Parent kernel (node 0)") != std::string::npos);  // the seed, the only node
    CHECK(r.system.find("SEARCH") != std::string::npos);
  }
  CHECK(ids.size() == 3);
  ke::Store store(db);
  const ke::RunId run = *store.latest_run();
  const ke::RunInfo info = store.run(run);
  CHECK(info.nodes == 1);  // the seed alone: nothing waited on the model
  CHECK(info.tokens == 0);
  CHECK(info.mutator_failures == 0);
  CHECK(store.mutator_calls(run).empty());  // a kept request is no failed call
  const auto requests = store.model_requests(run);
  REQUIRE(requests.size() == 3);
  for (const ke::ModelRequest& r : requests) {
    CHECK(ids.count(r.id) == 1);
    CHECK(r.state == "pending");
    CHECK(r.parent == 0);
    CHECK(r.round == 1);
    CHECK(r.prompt.find("[user]") != std::string::npos);
  }

  // Going on without the answers is refused: the requests would never be settled.
  const auto again = ke_test::run_cli(model_run(db) + " --resume --ask " + (dir / "round2.jsonl"));
  CHECK(again.code == 2);
  CHECK_MESSAGE(again.err.find("3 model requests waiting for their answers") != std::string::npos, again.err);
}

TEST_CASE("--answers: out of order, each a child of its parent; missing, duplicate, garbled, unknown recorded") {
  TempDir dir("ke_rounds");
  const std::string db = dir / "runs.db", ask = dir / "round1.jsonl", next = dir / "round2.jsonl";
  REQUIRE(ke_test::run_cli(model_run(db) + " --ask " + ask + " --ask-count 3").code == 0);
  const std::vector<Request> asked = read_ask_file(ask);
  REQUIRE(asked.size() == 3);
  const std::string prefix = asked[0].id.substr(0, asked[0].id.rfind("-1-"));
  // The third answered first, the second not at all, the first twice; a line that is no JSON, one with an id this
  // run never asked, and one of another run (a suite's batch).
  const std::string results = dir / "results.jsonl";
  write_file(results, result_line(asked[2].id, kRowsOuter, 1000, 500) + "\n" + "{not json at all\n" +
                          result_line(asked[0].id, kEdit, 200, 100) + "\n" + result_line(asked[0].id, kRowsOuter) +
                          "\n" + result_line(prefix + "-9-9", kRowsOuter) + "\n" +
                          result_line("other_problem-0123456789-1-1", kRowsOuter) + "\n\n");
  const auto o = ke_test::run_cli(model_run(db) + " --resume --answers " + results + " --ask " + next);
  REQUIRE_MESSAGE(o.code == 0, o.err);
  CHECK_MESSAGE(o.err.find("2 to evaluate, 0 failed, 1 missing, 1 duplicate, 1 with an unknown id, 1 garbled line; 1 "
                           "for other runs ignored") != std::string::npos,
                o.err);

  ke::Store store(db);
  const ke::RunId run = *store.latest_run();
  const ke::Checkpoint cp = store.load(run);
  // The answers in the order asked: the first's edit is node 1, the third's rewrite node 2; both children of the
  // seed, the model named, ok.
  REQUIRE(cp.graph.size() == 3);
  for (ke::NodeId id : {1, 2}) {
    const ke::Node& n = cp.graph.node(id);
    CHECK(n.parents == std::vector<ke::NodeId>{0});
    CHECK(n.mutator == "llm");
    CHECK(n.model == "batch-model");
    CHECK_MESSAGE(n.evaluation.status == ke::Status::ok, n.evaluation.message);
  }
  CHECK(cp.graph.node(1).note.find("llm (edits)") == 0);
  CHECK(cp.graph.node(1).note.find("[request " + asked[0].id + "]") != std::string::npos);
  CHECK(cp.graph.node(2).note.find("[request " + asked[2].id + "]") != std::string::npos);
  CHECK(cp.graph.node(1).tokens == 300);
  CHECK(cp.graph.node(2).tokens == 1500);
  CHECK(cp.graph.node(2).cost_usd == doctest::Approx((1000 * 1 + 500 * 2) / 1e6));
  CHECK(cp.graph.node(1).answer == kEdit);  // the first answer counts, not the duplicate
  // The run's totals count the answers' tokens as live calls' are counted.
  CHECK(store.run(run).tokens == 1800);

  auto requests = requests_by_id(store, run);
  CHECK(requests[asked[0].id].state == "answered");
  CHECK(requests[asked[0].id].outcome == "evaluated as node 1");
  CHECK(requests[asked[2].id].outcome == "evaluated as node 2");
  CHECK(requests[asked[1].id].state == "failed");
  CHECK(requests[asked[1].id].outcome.find("missing: no answer in " + results) == 0);
  // Every line that was not evaluated is on record, naming the id and why.
  std::map<std::string, std::string> recorded;
  for (const ke::ModelAnswerRecord& a : store.model_answers(run))
    recorded[a.request_id.empty() ? a.source : a.request_id] += a.outcome + ";";
  CHECK(recorded[results + ":2"].find("garbled: not a JSON object") != std::string::npos);
  CHECK(recorded[asked[0].id].find("duplicate: answered again in the same file") != std::string::npos);
  CHECK(recorded[prefix + "-9-9"].find("unknown id") != std::string::npos);
  CHECK(recorded[asked[1].id].find("missing") != std::string::npos);
  CHECK(recorded.count("other_problem-0123456789-1-1") == 0);  // another run's, only counted
  bool missing_call = false;  // the missing answer is a failed call of the mutator too, with its parent
  for (const ke::MutatorCallRecord& c : store.mutator_calls(run)) {
    if (c.error.find("request " + asked[1].id + ": missing") == 0) {
      missing_call = true;
      CHECK(c.parents == std::vector<ke::NodeId>{0});
    }
  }
  CHECK(missing_call);

  // And it asked again: a second round, about the nodes it has now.
  const std::vector<Request> second = read_ask_file(next);
  REQUIRE(second.size() == 1);
  CHECK(second[0].id == prefix + "-2-1");
  CHECK(requests[second[0].id].state == "pending");
  CHECK(requests[second[0].id].round == 2);

  // An answer given again in a later file is a duplicate of the settled request, recorded, not evaluated twice.
  const std::string late = dir / "late.jsonl";
  write_file(late, result_line(asked[2].id, kRowsOuter) + "\n" + result_line(second[0].id, "no code here") + "\n");
  const auto o2 = ke_test::run_cli(model_run(db) + " --resume --answers " + late + " --ask " + (dir / "round3.jsonl"));
  REQUIRE_MESSAGE(o2.code == 0, o2.err);
  CHECK_MESSAGE(o2.err.find("0 to evaluate, 1 failed, 0 missing, 1 duplicate") != std::string::npos, o2.err);
  ke::Store after(db);
  CHECK(after.load(run).graph.size() == 3);
  requests = requests_by_id(after, run);
  CHECK(requests[second[0].id].state == "failed");
  CHECK(requests[second[0].id].outcome.find("neither a fenced code block nor SEARCH/REPLACE edits") !=
        std::string::npos);
}

TEST_CASE("--answers: an error object, a status not 200, no content, a garbled file: recorded failures, no crash") {
  TempDir dir("ke_rounds");
  const std::string db = dir / "runs.db", ask = dir / "round1.jsonl";
  REQUIRE(ke_test::run_cli(model_run(db) + " --ask " + ask + " --ask-count 3").code == 0);
  const std::vector<Request> asked = read_ask_file(ask);
  REQUIRE(asked.size() == 3);
  const std::string results = dir / "results.jsonl";
  write_file(results,
             "{\"id\": \"b1\", \"custom_id\": " + ke::json_quote(asked[0].id) +
                 ", \"response\": null, \"error\": {\"code\": \"batch_expired\", \"message\": \"This request could "
                 "not be executed before the completion window expired.\"}}\n" +
                 "{\"id\": \"b2\", \"custom_id\": " + ke::json_quote(asked[1].id) +
                 ", \"response\": {\"status_code\": 500, \"body\": {\"error\": {\"message\": \"server error\"}}}, "
                 "\"error\": null}\n" +
                 "{\"id\": \"b3\", \"custom_id\": " + ke::json_quote(asked[2].id) +
                 ", \"response\": {\"status_code\": 200, \"body\": {\"choices\": []}}, \"error\": null}\n" +
                 "[1, 2, 3]\n{\"custom_id\": 7}\n");
  const auto o = ke_test::run_cli(model_run(db) + " --resume --answers " + results + " --ask " + (dir / "r2.jsonl"));
  REQUIRE_MESSAGE(o.code == 0, o.err);
  CHECK_MESSAGE(o.err.find("0 to evaluate, 3 failed, 0 missing, 0 duplicates, 0 with an unknown id, 2 garbled lines") !=
                    std::string::npos,
                o.err);
  ke::Store store(db);
  const ke::RunId run = *store.latest_run();
  auto requests = requests_by_id(store, run);
  CHECK(requests[asked[0].id].outcome.find("the batch reported an error") == 0);
  CHECK(requests[asked[0].id].outcome.find("batch_expired") != std::string::npos);
  CHECK(requests[asked[1].id].outcome.find("HTTP 500") == 0);
  CHECK(requests[asked[2].id].outcome.find("no answer text") != std::string::npos);
  CHECK(store.run(run).mutator_failures == 3);
  CHECK(store.load(run).graph.size() == 1);

  // A file of junk (bytes that are no text at all) is garbled lines and a missing answer, never a crash.
  const std::string junk = dir / "junk.jsonl";
  {
    std::ofstream out(junk, std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>((i * 7919) % 256));
  }
  const auto j = ke_test::run_cli(model_run(db) + " --resume --answers " + junk + " --ask " + (dir / "r3.jsonl"));
  CHECK_MESSAGE(j.code == 0, j.err);
  CHECK_MESSAGE(j.err.find("0 to evaluate, 0 failed, 1 missing") != std::string::npos, j.err);
  // A path that is not there is bad usage.
  const auto none = ke_test::run_cli(model_run(db) + " --resume --answers " + (dir / "nothing.jsonl"));
  CHECK(none.code == 2);
  CHECK(none.err.find("no file or folder at") != std::string::npos);
}

TEST_CASE("ask DB...: a suite's waiting requests in one batch; each run takes its own answers from it") {
  TempDir dir("ke_rounds");
  const std::string a = dir / "a.db", b = dir / "b.db";
  REQUIRE(ke_test::run_cli(model_run(a) + " --ask " + (dir / "a.jsonl")).code == 0);
  REQUIRE(ke_test::run_cli(model_run(b) + " --ask " + (dir / "b.jsonl") + " --ask-count 2").code == 0);
  const std::string batch = dir / "suite.jsonl";
  const auto o = ke_test::run_cli("ask " + a + " " + b + " -o " + batch);
  REQUIRE_MESSAGE(o.code == 0, o.err);
  CHECK_MESSAGE(o.err.find("3 requests of 2 runs in " + batch) != std::string::npos, o.err);
  const std::vector<Request> all = read_ask_file(batch);
  REQUIRE(all.size() == 3);
  std::set<std::string> ids;
  for (const Request& r : all) ids.insert(r.id);
  CHECK(ids.size() == 3);  // unique across the databases
  const std::vector<Request> own = read_ask_file(dir / "a.jsonl");
  REQUIRE(own.size() == 1);
  CHECK(ids.count(own[0].id) == 1);

  // One results file for the suite, in the order the batch returned it: a's run takes its one answer and ignores b's.
  std::string results;
  for (auto it = all.rbegin(); it != all.rend(); ++it) results += result_line(it->id, kRowsOuter) + "\n";
  write_file(dir / "suite_results.jsonl", results);
  const auto r = ke_test::run_cli(model_run(a) + " --resume --answers " + (dir / "suite_results.jsonl") + " --ask " +
                                  (dir / "a2.jsonl"));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK_MESSAGE(r.err.find("1 to evaluate, 0 failed, 0 missing") != std::string::npos, r.err);
  CHECK_MESSAGE(r.err.find("2 for other runs ignored") != std::string::npos, r.err);
  ke::Store store(a);
  CHECK(store.load(*store.latest_run()).graph.size() == 2);

  // A folder of plain answers, one file per request id: b's two.
  const std::vector<Request> b_own = read_ask_file(dir / "b.jsonl");
  REQUIRE(b_own.size() == 2);
  std::filesystem::create_directories(dir / "answers");
  write_file(dir / ("answers/" + b_own[1].id + ".md"), kRowsOuter);
  write_file(dir / ("answers/" + b_own[0].id + ".md"), kEdit);
  const auto f =
      ke_test::run_cli(model_run(b) + " --resume --answers " + (dir / "answers") + " --ask " + (dir / "b2.jsonl"));
  REQUIRE_MESSAGE(f.code == 0, f.err);
  CHECK_MESSAGE(f.err.find("2 to evaluate, 0 failed, 0 missing") != std::string::npos, f.err);
  ke::Store bs(b);
  const ke::Checkpoint cp = bs.load(*bs.latest_run());
  REQUIRE(cp.graph.size() == 3);
  CHECK(cp.graph.node(1).note.find("llm (edits)") == 0);  // b_own[0], asked first, evaluated first
  CHECK(cp.tokens > 0);                                   // estimated from the lengths where no usage came
  // A database that is not there is bad usage, and nothing is written.
  const auto none = ke_test::run_cli("ask " + (dir / "none.db") + " -o " + (dir / "none.jsonl"));
  CHECK(none.code == 2);
  CHECK(none.err.find("no database at") != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "none.jsonl"));
  CHECK(!std::filesystem::exists(dir / "none.db"));
}

TEST_CASE("--llm-children: a round's answer holds several children, each its own node; a malformed one recorded") {
  TempDir dir("ke_rounds");
  const std::string db = dir / "k.db", ask = dir / "k.jsonl";
  REQUIRE(ke_test::run_cli(model_run(db) + " --llm-children 3 --ask " + ask).code == 0);
  const std::vector<Request> asked = read_ask_file(ask);
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].system.find("Write 3 different kernels") != std::string::npos);
  CHECK(asked[0].user.find("### Child 1") != std::string::npos);
  // Child 1 a whole source, child 2 no code, child 3 an edit of the parent.
  const std::string answer =
      std::string("### Child 1\n") + kRowsOuter + "### Child 2\nI would tile it.\n### Child 3\n" + kEdit;
  write_file(dir / "results.jsonl", result_line(asked[0].id, answer) + "\n");
  const auto o = ke_test::run_cli(model_run(db) + " --llm-children 3 --resume --answers " + (dir / "results.jsonl") +
                                  " --ask " + (dir / "k2.jsonl"));
  REQUIRE_MESSAGE(o.code == 0, o.err);
  CHECK_MESSAGE(o.err.find("2 to evaluate, 1 failed, 0 missing") != std::string::npos, o.err);
  ke::Store store(db);
  const ke::RunId run = *store.latest_run();
  const ke::Checkpoint cp = store.load(run);
  REQUIRE(cp.graph.size() == 3);
  CHECK(cp.graph.node(1).note.find("llm (fenced, child 1 of 3)") == 0);
  CHECK(cp.graph.node(2).note.find("llm (edits, child 3 of 3)") == 0);
  CHECK(cp.graph.node(1).parents == std::vector<ke::NodeId>{0});
  CHECK(cp.graph.node(2).parents == std::vector<ke::NodeId>{0});
  // The call's tokens counted once, with its first child.
  CHECK(cp.graph.node(1).tokens == 150);
  CHECK(cp.graph.node(2).tokens == 0);
  bool recorded = false;
  for (const ke::ModelAnswerRecord& a : store.model_answers(run))
    recorded = recorded || (a.request_id == asked[0].id &&
                            a.outcome.find("child 2 of 3: the model's answer was not usable") != std::string::npos);
  CHECK(recorded);
}
