// The C API (capi/kernelevolve.h) through its entry points, as a C host uses it: argument checks and
// error paths (NULL, wrong handles, bad values, untouched out-parameters, per-thread messages), specs
// loaded and built, devices, stop rules, policies, mutators (param, command, custom), custom fitness,
// callbacks that abort, results with their lineage and reports, and real runs on the CPU in process and
// in workers; a stored program's calls and loads refused by name (issue 49). Links only the C library (and
// SQLite, to edit a run's database behind the library's back).
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "kernelevolve.h"
#include "support/centre_program.hpp"
#include "support/cli_runner.hpp"
#include "support/fake_model_server.hpp"

namespace {

std::string fixture(const std::string& name) { return std::string(KE_FIXTURES) + "/" + name; }

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool contains(const char* text, const std::string& part) { return text && std::strstr(text, part.c_str()) != nullptr; }

// Owns a handle for the length of a test.
template <class T, ke_status (*Destroy)(T*)>
struct Owned {
  T* p = nullptr;
  Owned() = default;
  Owned(const Owned&) = delete;
  ~Owned() {
    if (p) CHECK(Destroy(p) == KE_OK);
  }
  T** out() { return &p; }
  operator T*() const { return p; }
};
using Spec = Owned<ke_spec, ke_spec_destroy>;
using Evolver = Owned<ke_evolver, ke_evolver_destroy>;
using Result = Owned<ke_result, ke_result_destroy>;
using Rule = Owned<ke_stop_rule, ke_stop_rule_destroy>;
using Mutator = Owned<ke_mutator, ke_mutator_destroy>;
using DeviceList = Owned<ke_device_list, ke_device_list_destroy>;

std::int64_t node_id(const ke_node* n) {
  std::int64_t id = -1;
  REQUIRE(ke_node_id(&id, n) == KE_OK);
  return id;
}

std::int64_t tunable(const ke_node* n, const char* name) {
  std::int64_t v = -1;
  REQUIRE(ke_node_tunable_value(&v, n, name) == KE_OK);
  return v;
}

double speedup(const ke_node* n) {
  double s = -1;
  REQUIRE(ke_node_speedup(&s, n) == KE_OK);
  return s;
}

ke_eval_status status(const ke_node* n) {
  ke_eval_status s = KE_EVAL_PENDING;
  REQUIRE(ke_node_status(&s, n) == KE_OK);
  return s;
}

std::int64_t evaluations(const ke_result* r) {
  std::int64_t n = -1;
  REQUIRE(ke_result_evaluations(&n, r) == KE_OK);
  return n;
}

std::size_t node_count(const ke_result* r) {
  std::size_t n = 0;
  REQUIRE(ke_result_node_count(&n, r) == KE_OK);
  return n;
}

std::string stop_reason(const ke_result* r) {
  const char* reason = nullptr;
  REQUIRE(ke_result_stop_reason(&reason, r) == KE_OK);
  return reason;
}

std::string text(ke_status (*get)(const char**, const ke_node*), const ke_node* n) {
  const char* out = nullptr;
  REQUIRE(get(&out, n) == KE_OK);
  return out;
}

// A fitness that needs no compiler: the time of each workload is 1000 us / BLOCK, so speedup = BLOCK.
struct FakeFitness {
  std::mutex mutex;
  int calls = 0;
  int abort_on_call = -1;          // return non-zero on this call
  std::set<std::int64_t> no_time;  // BLOCK values reported ok without times
  std::set<std::int64_t> broken;   // BLOCK values reported compile_error
};

int fake_evaluate(const ke_candidate* c, ke_evaluation* e, void* user_data) {
  auto* f = static_cast<FakeFitness*>(user_data);
  int call;
  {
    std::lock_guard lock(f->mutex);
    call = f->calls++;
  }
  if (call == f->abort_on_call) return 7;
  std::int64_t block = 0;
  if (ke_candidate_tunable_value(&block, c, "BLOCK") != KE_OK) return 1;
  std::size_t workloads = 0;
  if (ke_candidate_workload_count(&workloads, c) != KE_OK) return 1;
  const char* source = nullptr;
  if (ke_candidate_source(&source, c) != KE_OK || !contains(source, "colsum")) return 1;
  if (f->broken.count(block)) {
    ke_evaluation_set_status(e, KE_EVAL_COMPILE_ERROR);
    ke_evaluation_set_message(e, "made up");
    ke_evaluation_set_compile_log(e, "error: made up");
    return 0;
  }
  ke_evaluation_set_status(e, KE_EVAL_OK);
  if (!f->no_time.count(block)) {
    for (std::size_t w = 0; w < workloads; ++w) ke_evaluation_set_time_us(e, w, 1000.0 / double(block), 1.0);
  }
  return 0;
}

// A mutator that doubles the largest BLOCK in the graph (so it never proposes a known point, whatever
// failed), and says it is exhausted past the largest value.
struct Doubler {
  int calls = 0;
  int abort_on_call = -1;
  std::set<int> fail_on_calls;
  std::int64_t tokens_per_call = 0;
  bool saw_request = false;
};

int doubler_mutate(ke_mutation* m, void* user_data) {
  auto* d = static_cast<Doubler*>(user_data);
  const int call = d->calls++;
  if (call == d->abort_on_call) return 5;
  if (d->tokens_per_call) {
    ke_mutation_add_tokens(m, d->tokens_per_call);
    ke_mutation_set_transcript(m, "double it", "doubled");
  }
  if (d->fail_on_calls.count(call)) return ke_mutation_fail(m, "told to fail") == KE_OK ? 0 : 1;
  const char* request = nullptr;
  if (ke_mutation_request_json(&request, m) == KE_OK && contains(request, "colsum")) d->saw_request = true;
  std::size_t parents = 0;
  const ke_node* parent = nullptr;
  if (ke_mutation_parent_count(&parents, m) != KE_OK || parents < 1) return 1;
  if (ke_mutation_parent(&parent, m, 0) != KE_OK) return 1;
  std::size_t nodes = 0;
  if (ke_mutation_node_count(&nodes, m) != KE_OK || nodes < 1) return 1;
  std::int64_t block = 0;
  for (std::size_t i = 0; i < nodes; ++i) {
    const ke_node* node = nullptr;
    std::int64_t b = 0;
    if (ke_mutation_node(&node, m, std::int64_t(i)) != KE_OK || ke_node_tunable_value(&b, node, "BLOCK") != KE_OK) {
      return 1;
    }
    block = std::max(block, b);
  }
  std::uint64_t r = 0;
  if (ke_mutation_random(&r, m) != KE_OK) return 1;
  if (block >= 512) return ke_mutation_set_exhausted(m, "BLOCK is at its largest") == KE_OK ? 0 : 1;
  if (ke_mutation_set_tunable(m, "BLOCK", block * 2) != KE_OK) return 1;
  if (ke_mutation_set_tunable(m, "NO_SUCH", 1) != KE_ERROR_INVALID_ARGUMENT) return 1;
  const std::string note = "BLOCK " + std::to_string(block) + " -> " + std::to_string(block * 2);
  return ke_mutation_set_note(m, note.c_str()) == KE_OK ? 0 : 1;
}

struct ProgressLog {
  std::map<int, int> events;
  std::vector<std::int64_t> nodes;
  int abort_at_node = -1;  // abort when this many nodes have been seen
  std::string finish_message;
  std::string failure_message;
  ke_evolver* evolver = nullptr;  // when set, tries to misuse it from inside the callback
  bool misuse_refused = true;
};

int log_progress(const ke_progress* p, void* user_data) {
  auto* log = static_cast<ProgressLog*>(user_data);
  CHECK(p->version == KE_PROGRESS_VERSION);
  CHECK(p->message != nullptr);
  log->events[p->event] += 1;
  if (p->event == KE_PROGRESS_NODE) {
    REQUIRE(p->node != nullptr);
    log->nodes.push_back(node_id(p->node));
  } else {
    CHECK(p->node == nullptr);
  }
  if (p->event == KE_PROGRESS_FINISH) log->finish_message = p->message;
  if (p->event == KE_PROGRESS_MUTATOR_FAILURE) log->failure_message = p->message;
  if (log->evolver && p->event == KE_PROGRESS_NODE) {
    ke_result* r = nullptr;
    ke_mutator* m = nullptr;
    REQUIRE(ke_mutator_param_create(&m, nullptr) == KE_OK);
    log->misuse_refused = log->misuse_refused && ke_evolver_destroy(log->evolver) == KE_ERROR_INVALID_ARGUMENT &&
                          ke_evolver_run(&r, log->evolver) == KE_ERROR_INVALID_ARGUMENT && r == nullptr &&
                          ke_evolver_set_mutator(log->evolver, m) == KE_ERROR_INVALID_ARGUMENT &&
                          ke_evolver_result(&r, log->evolver) == KE_ERROR_INVALID_ARGUMENT;
    ke_mutator_destroy(m);
  }
  if (log->abort_at_node >= 0 && int(log->nodes.size()) >= log->abort_at_node) return 3;
  return 0;
}

// The colsum fixture, the fake fitness and the doubling mutator, and an evolver over them that start()
// builds (so a test sets the fakes' behaviour first).
struct FakeRun {
  Spec spec;
  FakeFitness fitness;
  Doubler doubler;
  Evolver ev;
  Mutator mutator;

  FakeRun() { REQUIRE(ke_spec_load(spec.out(), fixture("e2e/colsum.json").c_str()) == KE_OK); }
  void start(int jobs = 1) {
    ke_evolver_options o = KE_EVOLVER_OPTIONS_INIT;
    o.jobs = jobs;
    REQUIRE(ke_evolver_create(ev.out(), spec, &o) == KE_OK);
    REQUIRE(ke_evolver_set_evaluator(ev, "made-up device", fake_evaluate, &fitness) == KE_OK);
    REQUIRE(ke_mutator_custom_create(mutator.out(), "doubler", doubler_mutate, &doubler) == KE_OK);
    REQUIRE(ke_evolver_set_mutator(ev, mutator) == KE_OK);
  }
};

}  // namespace

TEST_CASE("capi: version, status names") {
  int major = -1, minor = -1, patch = -1;
  CHECK(ke_version(&major, &minor, &patch) == KE_OK);
  CHECK(major == KE_VERSION_MAJOR);
  CHECK(minor == KE_VERSION_MINOR);
  CHECK(patch == KE_VERSION_PATCH);
  const char* name = nullptr;
  CHECK(ke_status_name(&name, KE_ERROR_ABORTED) == KE_OK);
  CHECK(std::string(name) == "aborted");
  CHECK(ke_status_name(&name, static_cast<ke_status>(99)) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(name) == "aborted");  // untouched by the failed call
  CHECK(ke_eval_status_name(&name, KE_EVAL_TIMEOUT) == KE_OK);
  CHECK(std::string(name) == "timeout");
  CHECK(ke_eval_status_name(&name, static_cast<ke_eval_status>(99)) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_eval_status_name(nullptr, KE_EVAL_OK) == KE_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("capi: NULL, wrong and destroyed handles are refused; out-parameters stay untouched") {
  Spec spec;
  REQUIRE(ke_spec_load(spec.out(), fixture("e2e/colsum.json").c_str()) == KE_OK);
  ke_spec* sentinel = reinterpret_cast<ke_spec*>(0x1234);
  CHECK(ke_spec_load(&sentinel, nullptr) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(sentinel == reinterpret_cast<ke_spec*>(0x1234));
  CHECK(contains(ke_last_error(), "ke_spec_load"));
  CHECK(contains(ke_last_error(), "'path' is NULL"));

  const char* name = "untouched";
  CHECK(ke_spec_name(&name, nullptr) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(name) == "untouched");
  CHECK(ke_spec_name(nullptr, spec) == KE_ERROR_INVALID_ARGUMENT);

  // A handle of another kind, given where a spec belongs.
  Rule rule;
  REQUIRE(ke_stop_rule_max_evaluations(rule.out(), 2) == KE_OK);
  auto* not_a_spec = reinterpret_cast<ke_spec*>(rule.p);
  CHECK(ke_spec_name(&name, not_a_spec) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(contains(ke_last_error(), "not a live ke_spec"));
  CHECK(ke_spec_destroy(not_a_spec) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(name) == "untouched");

  ke_evolver* ev_sentinel = reinterpret_cast<ke_evolver*>(0x1);
  CHECK(ke_evolver_create(&ev_sentinel, not_a_spec, nullptr) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ev_sentinel == reinterpret_cast<ke_evolver*>(0x1));

  // Every destroy takes NULL.
  CHECK(ke_spec_destroy(nullptr) == KE_OK);
  CHECK(ke_evolver_destroy(nullptr) == KE_OK);
  CHECK(ke_result_destroy(nullptr) == KE_OK);
  CHECK(ke_stop_rule_destroy(nullptr) == KE_OK);
  CHECK(ke_mutator_destroy(nullptr) == KE_OK);
  CHECK(ke_device_list_destroy(nullptr) == KE_OK);

  // Getters of borrowed views check theirs too.
  std::int64_t id = 42;
  CHECK(ke_node_id(&id, nullptr) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_node_id(&id, reinterpret_cast<const ke_node*>(spec.p)) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(id == 42);
}

TEST_CASE("capi: the last error is per thread") {
  ke_spec* out = nullptr;
  CHECK(ke_spec_load(&out, "/nonexistent/one.json") == KE_ERROR_INTERNAL);
  const std::string mine = ke_last_error();
  CHECK(contains(mine.c_str(), "one.json"));
  std::string theirs;
  std::thread([&] {
    theirs = ke_last_error();  // nothing failed on this thread yet
    ke_spec* other = nullptr;
    CHECK(ke_spec_load(&other, "/nonexistent/two.json") == KE_ERROR_INTERNAL);
  }).join();
  CHECK(theirs.empty());
  CHECK(std::string(ke_last_error()) == mine);
}

TEST_CASE("capi: specs from files and JSON; field errors are bad_spec and name the field") {
  Spec spec;
  REQUIRE(ke_spec_load(spec.out(), fixture("e2e/colsum.json").c_str()) == KE_OK);
  const char* name = nullptr;
  CHECK(ke_spec_name(&name, spec) == KE_OK);
  CHECK(std::string(name) == "colsum");
  std::size_t workloads = 0;
  CHECK(ke_spec_workload_count(&workloads, spec) == KE_OK);
  CHECK(workloads == 2);
  CHECK(ke_spec_validate(spec) == KE_OK);

  const char* json = nullptr;
  REQUIRE(ke_spec_to_json(&json, spec) == KE_OK);
  const char* again = nullptr;
  CHECK(ke_spec_to_json(&again, spec) == KE_OK);
  CHECK(again == json);  // owned by the handle, stable until it changes
  Spec copy;
  CHECK(ke_spec_parse(copy.out(), json, nullptr) == KE_OK);
  CHECK(ke_spec_validate(copy) == KE_OK);

  ke_spec* bad = nullptr;
  CHECK(ke_spec_load(&bad, fixture("cli/unknown_field.json").c_str()) == KE_ERROR_BAD_SPEC);
  CHECK(contains(ke_last_error(), "unknown_field.json"));
  CHECK(bad == nullptr);
  CHECK(ke_spec_parse(&bad, "{not json", "inline.json") == KE_ERROR_BAD_SPEC);
  CHECK(ke_spec_parse(&bad, nullptr, nullptr) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(bad == nullptr);
}

TEST_CASE("capi: a spec file that is absent or unreadable is I/O (internal); one that is wrong is bad_spec") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ke_capi_files_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ke_spec* untouched = reinterpret_cast<ke_spec*>(0x5);

  const std::string absent = (dir / "absent.json").string();
  CHECK(ke_spec_load(&untouched, absent.c_str()) == KE_ERROR_INTERNAL);
  CHECK(contains(ke_last_error(), "ke_spec_load: cannot read the spec file '" + absent + "'"));
  CHECK(contains(ke_last_error(), "No such file"));
  CHECK(ke_spec_load(&untouched, dir.string().c_str()) == KE_ERROR_INTERNAL);
  CHECK(contains(ke_last_error(), "directory"));

  // Readable, but naming a source file that is not there: the spec is at fault.
  std::string text = read(fixture("e2e/colsum.json"));
  auto replace = [&](const std::string& from, const std::string& to) {
    REQUIRE(text.find(from) != std::string::npos);
    text.replace(text.find(from), from.size(), to);
  };
  replace("\"colsum_ref.c\"", "\"" + fixture("e2e/colsum_ref.c") + "\"");
  replace("\"colsum_seed.c\"", "\"no_such_seed.c\"");
  const std::string broken = (dir / "broken.json").string();
  std::ofstream(broken) << text;
  CHECK(ke_spec_load(&untouched, broken.c_str()) == KE_ERROR_BAD_SPEC);
  CHECK(contains(ke_last_error(), "no_such_seed.c"));

  if (::geteuid() != 0) {  // root reads every file
    const std::string locked = (dir / "locked.json").string();
    std::filesystem::copy_file(fixture("e2e/colsum.json"), locked);
    std::filesystem::permissions(locked, std::filesystem::perms::none);
    CHECK(ke_spec_load(&untouched, locked.c_str()) == KE_ERROR_INTERNAL);
    CHECK(contains(ke_last_error(), "Permission denied"));
  }
  CHECK(untouched == reinterpret_cast<ke_spec*>(0x5));
  std::filesystem::remove_all(dir);
}

TEST_CASE("capi: a spec built field by field") {
  Spec spec;
  REQUIRE(ke_spec_create(spec.out(), "colsum", "c", "colsum") == KE_OK);
  const char* x_shape[] = {"M", "N"};
  const char* y_shape[] = {"N"};
  CHECK(ke_spec_add_buffer(spec, "x", "f32", "in", x_shape, 2) == KE_OK);
  CHECK(ke_spec_add_buffer(spec, "y", "f32", "out", y_shape, 1) == KE_OK);
  CHECK(ke_spec_add_size(spec, "M", "i64") == KE_OK);
  CHECK(ke_spec_add_size(spec, "N", "i64") == KE_OK);
  // Not valid yet: no workloads, no sources.
  CHECK(ke_spec_validate(spec) == KE_ERROR_BAD_SPEC);
  const char* names[] = {"M", "N"};
  const std::int64_t sizes[] = {256, 320};
  CHECK(ke_spec_add_workload(spec, names, sizes, 2) == KE_OK);
  CHECK(ke_spec_set_input(spec, "x", "laplace", 0.0, 2.0) == KE_OK);
  CHECK(ke_spec_set_tolerance(spec, 1e-4, 1e-5) == KE_OK);
  CHECK(ke_spec_set_source_file(spec, KE_SOURCE_REFERENCE, fixture("e2e/colsum_ref.c").c_str(), nullptr, nullptr) ==
        KE_OK);
  CHECK(ke_spec_set_source_file(spec, KE_SOURCE_SEED, fixture("e2e/colsum_seed.c").c_str(), "c", nullptr) == KE_OK);
  const std::int64_t blocks[] = {1, 8, 64};
  CHECK(ke_spec_add_tunable(spec, "BLOCK", blocks, 3) == KE_OK);
  CHECK(ke_spec_add_constraint(spec, "BLOCK <= N") == KE_OK);
  CHECK(ke_spec_set_cost(spec, "M * N", "4 * M * N + 4 * N") == KE_OK);
  CHECK(ke_spec_set_notes(spec, "built through the C API") == KE_OK);
  CHECK(ke_spec_validate(spec) == KE_OK);

  SUBCASE("field errors") {
    CHECK(ke_spec_add_size(spec, "K", "q7") == KE_ERROR_BAD_SPEC);
    CHECK(contains(ke_last_error(), "q7"));
    CHECK(ke_spec_add_buffer(spec, "z", "f32", "size", x_shape, 2) == KE_ERROR_BAD_SPEC);
    CHECK(ke_spec_add_buffer(spec, "z", "f32", "in", x_shape, 0) == KE_ERROR_BAD_SPEC);
    CHECK(ke_spec_add_buffer(spec, "z", "f32", "in", nullptr, 2) == KE_ERROR_INVALID_ARGUMENT);
    CHECK(ke_spec_add_size(spec, "M", "i64") == KE_ERROR_BAD_SPEC);  // a param twice
    CHECK(ke_spec_add_constraint(spec, "BLOCK <") == KE_ERROR_BAD_SPEC);
    CHECK(contains(ke_last_error(), "constraints[1]"));
    CHECK(ke_spec_add_tunable(spec, "BLOCK", blocks, 3) == KE_ERROR_BAD_SPEC);
    CHECK(ke_spec_add_tunable(spec, "EMPTY", blocks, 0) == KE_ERROR_BAD_SPEC);
    CHECK(ke_spec_set_input(spec, "x", "cauchy", 0, 1) == KE_ERROR_BAD_SPEC);
    CHECK(ke_spec_set_input(spec, "x", "normal", NAN, 1) == KE_ERROR_INVALID_ARGUMENT);
    CHECK(ke_spec_set_tolerance(spec, -1, 0) == KE_ERROR_BAD_SPEC);
    CHECK(ke_spec_set_source_file(spec, KE_SOURCE_SEED, "/nonexistent/seed.c", nullptr, nullptr) == KE_ERROR_INTERNAL);
    CHECK(contains(ke_last_error(), "cannot read the source file '/nonexistent/seed.c'"));
    CHECK(ke_spec_set_source(spec, KE_SOURCE_SEED, "x", "fortran", nullptr) == KE_ERROR_BAD_SPEC);
    CHECK(ke_spec_set_cost(spec, "M *", nullptr) == KE_ERROR_BAD_SPEC);
    const char* dup_names[] = {"M", "M"};
    CHECK(ke_spec_add_workload(spec, dup_names, sizes, 2) == KE_ERROR_BAD_SPEC);
    const char* grid[] = {"cdiv(N, BLOCK)", "1", "1"};
    const char* bad_block[] = {"64", nullptr, "1"};
    CHECK(ke_spec_set_launch(spec, grid, bad_block, nullptr) == KE_ERROR_INVALID_ARGUMENT);
    ke_spec* out = nullptr;
    CHECK(ke_spec_create(&out, "x", "cobol", "x") == KE_ERROR_BAD_SPEC);
    CHECK(ke_spec_create(&out, "", "c", "x") == KE_ERROR_INVALID_ARGUMENT);
    CHECK(out == nullptr);
    // None of that changed the spec.
    CHECK(ke_spec_validate(spec) == KE_OK);
  }

  SUBCASE("it runs, in process") {
    ke_evolver_options o = KE_EVOLVER_OPTIONS_INIT;
    o.in_process = 1;
    Evolver ev;
    REQUIRE(ke_evolver_create(ev.out(), spec, &o) == KE_OK);
    Rule stop;
    REQUIRE(ke_stop_rule_max_evaluations(stop.out(), 3) == KE_OK);
    REQUIRE(ke_evolver_set_stop_rule(ev, stop) == KE_OK);
    Result r;
    REQUIRE(ke_evolver_run(r.out(), ev) == KE_OK);
    const ke_node* best = nullptr;
    REQUIRE(ke_result_best(&best, r) == KE_OK);
    CHECK(status(best) == KE_EVAL_OK);
    CHECK(speedup(best) >= 1.0);
  }

  SUBCASE("a GPU launch rule") {
    const char* grid[] = {"cdiv(N, BLOCK)", "1", "1"};
    const char* block[] = {"BLOCK", "1", "1"};
    CHECK(ke_spec_set_launch(spec, grid, block, "4 * BLOCK") == KE_OK);
    const char* json = nullptr;
    REQUIRE(ke_spec_to_json(&json, spec) == KE_OK);
    CHECK(contains(json, "cdiv(N, BLOCK)"));
  }
}

TEST_CASE("capi: devices") {
  DeviceList list;
  REQUIRE(ke_device_list_create(list.out()) == KE_OK);
  std::size_t n = 0;
  REQUIRE(ke_device_list_count(&n, list) == KE_OK);
  REQUIRE(n >= 1);
  const ke_device_info* cpu = nullptr;
  REQUIRE(ke_device_list_get(&cpu, list, 0) == KE_OK);
  const char* id = nullptr;
  CHECK(ke_device_info_id(&id, cpu) == KE_OK);
  CHECK(std::string(id) == "cpu");
  const char* kind = nullptr;
  CHECK(ke_device_info_kind(&kind, cpu) == KE_OK);
  CHECK(std::string(kind) == "cpu");
  int units = 0;
  CHECK(ke_device_info_compute_units(&units, cpu) == KE_OK);
  CHECK(units >= 1);
  std::size_t properties = 0;
  CHECK(ke_device_info_property_count(&properties, cpu) == KE_OK);
  for (std::size_t i = 0; i < properties; ++i) {
    const char *key = nullptr, *value = nullptr;
    CHECK(ke_device_info_property(&key, &value, cpu, i) == KE_OK);
    CHECK(key != nullptr);
  }
  const char *key = "k", *value = "v";
  CHECK(ke_device_info_property(&key, &value, cpu, properties) == KE_ERROR_NOT_FOUND);
  CHECK(std::string(key) == "k");
  const ke_device_info* none = nullptr;
  CHECK(ke_device_list_get(&none, list, n) == KE_ERROR_NOT_FOUND);
  CHECK(none == nullptr);
}

TEST_CASE("capi: stop rules, mutators, policies and options refuse bad values") {
  ke_stop_rule* rule = nullptr;
  CHECK(ke_stop_rule_max_evaluations(&rule, 0) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_stop_rule_max_time(&rule, -1) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_stop_rule_max_time(&rule, INFINITY) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_stop_rule_target_speedup(&rule, 0) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_stop_rule_plateau(&rule, -3) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_stop_rule_max_tokens(&rule, 0) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_stop_rule_any(&rule, nullptr, 0) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_stop_rule_all(&rule, nullptr, 2) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(rule == nullptr);
  Rule a, b, any, all;
  REQUIRE(ke_stop_rule_max_time(a.out(), 100) == KE_OK);
  REQUIRE(ke_stop_rule_target_speedup(b.out(), 2) == KE_OK);
  const ke_stop_rule* parts[] = {a, b};
  CHECK(ke_stop_rule_any(any.out(), parts, 2) == KE_OK);
  CHECK(ke_stop_rule_all(all.out(), parts, 2) == KE_OK);
  const ke_stop_rule* with_null[] = {a, nullptr};
  CHECK(ke_stop_rule_any(&rule, with_null, 2) == KE_ERROR_INVALID_ARGUMENT);

  ke_mutator* m = nullptr;
  ke_param_mutator_options po = KE_PARAM_MUTATOR_OPTIONS_INIT;
  po.restart_probability = 1.5;
  CHECK(ke_mutator_param_create(&m, &po) == KE_ERROR_INVALID_ARGUMENT);
  po.restart_probability = 0.5;
  po.version = 0;
  CHECK(ke_mutator_param_create(&m, &po) == KE_ERROR_INVALID_ARGUMENT);
  po.version = KE_PARAM_MUTATOR_OPTIONS_VERSION + 1;  // from a newer header than this library
  CHECK(ke_mutator_param_create(&m, &po) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(contains(ke_last_error(), "version"));
  ke_command_mutator_options co;
  CHECK(ke_command_mutator_options_init(&co, KE_COMMAND_MUTATOR_OPTIONS_VERSION) == KE_OK);
  CHECK(co.timeout_s == 300.0);
  CHECK(ke_mutator_command_create(&m, &co) == KE_ERROR_INVALID_ARGUMENT);  // no command
  CHECK(ke_mutator_command_create(&m, nullptr) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_mutator_custom_create(&m, "mine", nullptr, nullptr) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_mutator_custom_create(&m, "seed", doubler_mutate, nullptr) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(m == nullptr);

  const char* const* names = nullptr;
  std::size_t count = 0;
  REQUIRE(ke_policy_names(&names, &count) == KE_OK);
  bool greedy = false;
  for (std::size_t i = 0; i < count; ++i) greedy = greedy || std::string(names[i]) == "greedy";
  CHECK(greedy);

  Spec spec;
  REQUIRE(ke_spec_load(spec.out(), fixture("e2e/colsum.json").c_str()) == KE_OK);
  ke_evolver* ev = nullptr;
  ke_evolver_options o = KE_EVOLVER_OPTIONS_INIT;
  o.jobs = 0;
  CHECK(ke_evolver_create(&ev, spec, &o) == KE_ERROR_INVALID_ARGUMENT);
  o.jobs = 2;
  o.in_process = 1;
  CHECK(ke_evolver_create(&ev, spec, &o) == KE_ERROR_INVALID_ARGUMENT);
  o.in_process = 0;
  o.timeout_s = -1;
  CHECK(ke_evolver_create(&ev, spec, &o) == KE_ERROR_INVALID_ARGUMENT);
  o.timeout_s = 0;
  o.trials = 0;
  CHECK(ke_evolver_create(&ev, spec, &o) == KE_ERROR_INVALID_ARGUMENT);
  o.trials = 5;
  o.version = 7;
  CHECK(ke_evolver_create(&ev, spec, &o) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ev == nullptr);

  Evolver evolver;
  REQUIRE(ke_evolver_create(evolver.out(), spec, nullptr) == KE_OK);
  CHECK(ke_evolver_set_policy(evolver, "no-such-policy", nullptr, nullptr, 0) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(contains(ke_last_error(), "greedy"));  // names the known ones
  const char* option_names[] = {"no_such_option"};
  const char* option_values[] = {"1"};
  CHECK(ke_evolver_set_policy(evolver, "greedy", option_names, option_values, 1) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_evolver_set_policy(evolver, "greedy", nullptr, nullptr, 0) == KE_OK);
  CHECK(ke_evolver_set_evaluator(evolver, nullptr, fake_evaluate, nullptr) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_evolver_set_evaluator(evolver, nullptr, nullptr, nullptr) == KE_OK);
  ke_result* r = nullptr;
  CHECK(ke_evolver_result(&r, evolver) == KE_ERROR_NOT_FOUND);  // no run yet
  CHECK(r == nullptr);
}

TEST_CASE("capi: custom fitness and a custom mutator: results, lineage, reports, progress") {
  FakeRun fake;
  auto& [spec, fitness, doubler, ev, mutator] = fake;
  fake.start();
  ProgressLog log;
  log.evolver = ev;
  REQUIRE(ke_evolver_set_progress(ev, log_progress, &log) == KE_OK);
  Rule stop;
  REQUIRE(ke_stop_rule_max_evaluations(stop.out(), 100) == KE_OK);
  REQUIRE(ke_evolver_set_stop_rule(ev, stop) == KE_OK);

  Result r;
  REQUIRE(ke_evolver_run(r.out(), ev) == KE_OK);
  CHECK(log.misuse_refused);
  CHECK(doubler.saw_request);
  // BLOCK 1, 2, 4, ..., 512: ten nodes, then the mutator has nothing new.
  std::size_t n = 0;
  REQUIRE(ke_result_node_count(&n, r) == KE_OK);
  CHECK(n == 10);
  const char* reason = nullptr;
  REQUIRE(ke_result_stop_reason(&reason, r) == KE_OK);
  CHECK(contains(reason, "BLOCK is at its largest"));
  CHECK(log.finish_message == reason);
  CHECK(log.events[KE_PROGRESS_START] == 1);
  CHECK(log.events[KE_PROGRESS_NODE] == 10);
  CHECK(log.events[KE_PROGRESS_FINISH] == 1);
  CHECK(log.nodes.size() == 10);

  const ke_node* best = nullptr;
  REQUIRE(ke_result_best(&best, r) == KE_OK);
  CHECK(tunable(best, "BLOCK") == 512);
  CHECK(speedup(best) == doctest::Approx(512.0));
  CHECK(text(ke_node_mutator, best) == "doubler");
  CHECK(text(ke_node_note, best) == "BLOCK 256 -> 512");
  CHECK(text(ke_node_language, best) == "c");
  CHECK(contains(text(ke_node_source, best).c_str(), "colsum"));
  std::size_t timings = 0;
  REQUIRE(ke_node_timing_count(&timings, best) == KE_OK);
  CHECK(timings == 2);
  ke_timing t = KE_TIMING_INIT;
  REQUIRE(ke_node_timing(&t, best, 1) == KE_OK);
  CHECK(t.median_us == doctest::Approx(1000.0 / 512));
  ke_timing stale = KE_TIMING_INIT;
  stale.version = 0;
  stale.median_us = -5;
  CHECK(ke_node_timing(&stale, best, 0) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(stale.median_us == -5);
  CHECK(ke_node_timing(&t, best, 2) == KE_ERROR_NOT_FOUND);
  ke_mismatch mm = KE_MISMATCH_INIT;
  CHECK(ke_node_mismatch(&mm, best) == KE_ERROR_NOT_FOUND);  // the fake fitness compares nothing

  const std::int64_t* ids = nullptr;
  std::size_t count = 0;
  REQUIRE(ke_result_lineage(&ids, &count, r, node_id(best)) == KE_OK);
  REQUIRE(count == 10);
  for (std::size_t i = 0; i < count; ++i) CHECK(ids[i] == std::int64_t(i));
  const std::int64_t* kids = nullptr;
  REQUIRE(ke_result_children(&kids, &count, r, 0) == KE_OK);
  REQUIRE(count == 1);
  CHECK(kids[0] == 1);
  std::size_t parents = 0;
  REQUIRE(ke_node_parent_count(&parents, best) == KE_OK);
  REQUIRE(parents == 1);
  std::int64_t parent = -1;
  REQUIRE(ke_node_parent(&parent, best, 0) == KE_OK);
  CHECK(parent == 8);
  CHECK(ke_node_parent(&parent, best, 1) == KE_ERROR_NOT_FOUND);
  CHECK(ke_result_lineage(&ids, &count, r, 10) == KE_ERROR_NOT_FOUND);

  const ke_node* seed = nullptr;
  REQUIRE(ke_result_seed(&seed, r) == KE_OK);
  CHECK(node_id(seed) == 0);
  CHECK(text(ke_node_mutator, seed) == "seed");
  std::int64_t count_ok = 0, evaluations = 0;
  CHECK(ke_result_status_count(&count_ok, r, KE_EVAL_OK) == KE_OK);
  CHECK(count_ok == 10);
  CHECK(ke_result_evaluations(&evaluations, r) == KE_OK);
  CHECK(evaluations == 10);
  const ke_device_info* device = nullptr;
  REQUIRE(ke_result_device(&device, r) == KE_OK);
  const char* device_name = nullptr;
  CHECK(ke_device_info_name(&device_name, device) == KE_OK);
  CHECK(std::string(device_name) == "made-up device");

  const char* json = nullptr;
  REQUIRE(ke_result_report_json(&json, r) == KE_OK);
  CHECK(contains(json, "\"spec\": \"colsum\""));
  CHECK(contains(json, "\"best\": {\"node\": 9"));
  const char* table = nullptr;
  REQUIRE(ke_result_report_text(&table, r) == KE_OK);
  CHECK(contains(table, "colsum"));

  // The evolver keeps the last run; a second result is a handle of its own.
  Result again;
  REQUIRE(ke_evolver_result(again.out(), ev) == KE_OK);
  REQUIRE(ke_result_node_count(&n, again) == KE_OK);
  CHECK(n == 10);
}

TEST_CASE("capi: failed mutations and evaluations are data, not errors") {
  FakeRun fake;
  auto& [spec, fitness, doubler, ev, mutator] = fake;
  fitness.no_time = {4};
  fitness.broken = {8};
  doubler.fail_on_calls = {0};
  fake.start(3);  // three evaluations at once
  ProgressLog log;
  REQUIRE(ke_evolver_set_progress(ev, log_progress, &log) == KE_OK);
  Result r;
  REQUIRE(ke_evolver_run(r.out(), ev) == KE_OK);
  CHECK(log.events[KE_PROGRESS_MUTATOR_FAILURE] == 1);
  CHECK(log.failure_message == "told to fail");
  std::int64_t failures = 0;
  CHECK(ke_result_mutator_failures(&failures, r) == KE_OK);
  CHECK(failures == 1);
  std::size_t n = 0;
  REQUIRE(ke_result_node_count(&n, r) == KE_OK);
  REQUIRE(n >= 4);
  std::map<std::int64_t, const ke_node*> by_block;
  for (std::size_t i = 0; i < n; ++i) {
    const ke_node* node = nullptr;
    REQUIRE(ke_result_node(&node, r, std::int64_t(i)) == KE_OK);
    by_block[tunable(node, "BLOCK")] = node;
  }
  REQUIRE(by_block.count(4));
  CHECK(status(by_block[4]) == KE_EVAL_INVALID);
  CHECK(contains(text(ke_node_message, by_block[4]).c_str(), "without a time"));
  REQUIRE(by_block.count(8));
  CHECK(status(by_block[8]) == KE_EVAL_COMPILE_ERROR);
  CHECK(text(ke_node_compile_log, by_block[8]) == "error: made up");
  std::int64_t errors = 0;
  CHECK(ke_result_status_count(&errors, r, KE_EVAL_COMPILE_ERROR) == KE_OK);
  CHECK(errors == 1);
}

TEST_CASE("capi: a callback that returns non-zero aborts the run; what was found stays reachable") {
  FakeRun fake;
  auto& [spec, fitness, doubler, ev, mutator] = fake;
  fake.start();
  ke_result* untouched = reinterpret_cast<ke_result*>(0x99);

  SUBCASE("progress") {
    ProgressLog log;
    log.abort_at_node = 3;
    REQUIRE(ke_evolver_set_progress(ev, log_progress, &log) == KE_OK);
    CHECK(ke_evolver_run(&untouched, ev) == KE_ERROR_ABORTED);
    CHECK(contains(ke_last_error(), "progress callback returned 3"));
    CHECK(untouched == reinterpret_cast<ke_result*>(0x99));
    Result r;
    REQUIRE(ke_evolver_result(r.out(), ev) == KE_OK);
    std::size_t n = 0;
    REQUIRE(ke_result_node_count(&n, r) == KE_OK);
    CHECK(n >= 3);
    const char* reason = nullptr;
    REQUIRE(ke_result_stop_reason(&reason, r) == KE_OK);
    CHECK(contains(reason, "progress callback"));
    const ke_node* best = nullptr;
    REQUIRE(ke_result_best(&best, r) == KE_OK);
    CHECK(tunable(best, "BLOCK") == 4);
    // The evolver runs again after an abort, from the seed.
    REQUIRE(ke_evolver_set_progress(ev, nullptr, nullptr) == KE_OK);
    Result second;
    CHECK(ke_evolver_run(second.out(), ev) == KE_OK);
  }
  SUBCASE("mutator") {
    doubler.abort_on_call = 2;
    CHECK(ke_evolver_run(&untouched, ev) == KE_ERROR_ABORTED);
    CHECK(contains(ke_last_error(), "'doubler' returned 5"));
    Result r;
    REQUIRE(ke_evolver_result(r.out(), ev) == KE_OK);
    std::size_t n = 0;
    REQUIRE(ke_result_node_count(&n, r) == KE_OK);
    CHECK(n == 3);
  }
  SUBCASE("fitness") {
    fitness.abort_on_call = 1;
    CHECK(ke_evolver_run(&untouched, ev) == KE_ERROR_ABORTED);
    CHECK(contains(ke_last_error(), "fitness callback returned 7"));
    Result r;
    REQUIRE(ke_evolver_result(r.out(), ev) == KE_OK);
  }
  CHECK(untouched == reinterpret_cast<ke_result*>(0x99));
}

TEST_CASE("capi: a token budget stops the run; transcripts and tokens stay on the nodes") {
  FakeRun fake;
  auto& [spec, fitness, doubler, ev, mutator] = fake;
  doubler.tokens_per_call = 10;
  fake.start();
  Rule tokens;
  REQUIRE(ke_stop_rule_max_tokens(tokens.out(), 30) == KE_OK);
  REQUIRE(ke_evolver_set_stop_rule(ev, tokens) == KE_OK);
  Result r;
  REQUIRE(ke_evolver_run(r.out(), ev) == KE_OK);
  std::int64_t spent = 0;
  REQUIRE(ke_result_tokens(&spent, r) == KE_OK);
  CHECK(spent >= 30);
  const char* reason = nullptr;
  REQUIRE(ke_result_stop_reason(&reason, r) == KE_OK);
  CHECK(contains(reason, "tokens"));
  const ke_node* node = nullptr;
  REQUIRE(ke_result_node(&node, r, 1) == KE_OK);
  std::int64_t node_tokens = 0;
  CHECK(ke_node_tokens(&node_tokens, node) == KE_OK);
  CHECK(node_tokens == 10);
  CHECK(text(ke_node_prompt, node) == "double it");
  CHECK(text(ke_node_answer, node) == "doubled");
}

namespace {

// The doubler, as a host's mutator that calls a priced model of its own would: each call costs something.
struct PricedDoubler {
  Doubler doubler;
  double cost_per_call = 0.01;
  double cost_seen = 0;  // the most a stop rule's state said was spent
};

int priced_mutate(ke_mutation* m, void* user_data) {
  auto* p = static_cast<PricedDoubler*>(user_data);
  if (ke_mutation_add_cost(m, p->cost_per_call) != KE_OK) return 1;
  return doubler_mutate(m, &p->doubler);
}

int watch_cost(const ke_search_state* state, void* user_data) {
  auto* p = static_cast<PricedDoubler*>(user_data);
  if (state->version >= 2) p->cost_seen = std::max(p->cost_seen, state->cost_usd);
  return 0;
}

}  // namespace

TEST_CASE("capi: a cost budget stops the run; the nodes keep their cost and the result the total; model prices") {
  Spec spec;
  REQUIRE(ke_spec_load(spec.out(), fixture("e2e/colsum.json").c_str()) == KE_OK);
  FakeFitness fitness;
  PricedDoubler priced;
  ke_evolver_options o = KE_EVOLVER_OPTIONS_INIT;
  Evolver ev;
  REQUIRE(ke_evolver_create(ev.out(), spec, &o) == KE_OK);
  REQUIRE(ke_evolver_set_evaluator(ev, "made-up device", fake_evaluate, &fitness) == KE_OK);
  Mutator mutator;
  REQUIRE(ke_mutator_custom_create(mutator.out(), "priced", priced_mutate, &priced) == KE_OK);
  REQUIRE(ke_evolver_set_mutator(ev, mutator) == KE_OK);
  ke_stop_rule* refused = nullptr;
  CHECK(ke_stop_rule_max_cost(&refused, 0) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_stop_rule_max_cost(&refused, -1) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(refused == nullptr);
  Rule budget, watch, both;
  REQUIRE(ke_stop_rule_max_cost(budget.out(), 0.035) == KE_OK);
  REQUIRE(ke_stop_rule_callback(watch.out(), "watch", watch_cost, &priced, nullptr) == KE_OK);
  const ke_stop_rule* rules[] = {budget, watch};
  REQUIRE(ke_stop_rule_any(both.out(), rules, 2) == KE_OK);
  REQUIRE(ke_evolver_set_stop_rule(ev, both) == KE_OK);
  Result r;
  REQUIRE(ke_evolver_run(r.out(), ev) == KE_OK);
  double spent = 0;
  REQUIRE(ke_result_cost_usd(&spent, r) == KE_OK);
  CHECK(spent == doctest::Approx(0.04));  // four calls: the fourth passes the budget
  CHECK(priced.doubler.calls == 4);
  CHECK(priced.cost_seen == doctest::Approx(0.03));  // the callback saw the cost before the last call
  const char* reason = nullptr;
  REQUIRE(ke_result_stop_reason(&reason, r) == KE_OK);
  CHECK(contains(reason, "budget of $0.035"));
  const ke_node* node = nullptr;
  REQUIRE(ke_result_node(&node, r, 1) == KE_OK);
  double node_cost = 0;
  CHECK(ke_node_cost_usd(&node_cost, node) == KE_OK);
  CHECK(node_cost == doctest::Approx(0.01));
  CHECK(text(ke_node_model, node).empty());  // no model wrote it: the host's mutator did

  // The model mutator's prices (version 2 of its options): checked when it is made; version 1 has none.
  ke_llm_mutator_options lo;
  REQUIRE(ke_llm_mutator_options_init(&lo, KE_LLM_MUTATOR_OPTIONS_VERSION) == KE_OK);
  CHECK(lo.price_input_per_mtok == 0);
  CHECK(lo.price_output_per_mtok == 0);
  lo.model = "priced-model";
  lo.price_input_per_mtok = -1;
  ke_mutator* m = nullptr;
  const ke_status made = ke_mutator_llm_create(&m, &lo);
  if (made == KE_ERROR_INTERNAL && contains(ke_last_error(), "no model mutator")) return;
  CHECK(made == KE_ERROR_INVALID_ARGUMENT);
  CHECK(contains(ke_last_error(), "price_input_per_mtok"));
  lo.price_input_per_mtok = 2.5;
  lo.price_output_per_mtok = 10;
  Mutator llm;
  CHECK(ke_mutator_llm_create(llm.out(), &lo) == KE_OK);
  lo.version = 1;  // an older caller's struct ends before the prices: they are not read
  lo.price_input_per_mtok = -1;
  Mutator old;
  CHECK(ke_mutator_llm_create(old.out(), &lo) == KE_OK);
}

namespace {

// A host's stop rule: stops once `after` evaluations are in; counts its calls and its finalization.
struct StopAfter {
  std::int64_t after = 0;
  int calls = 0;
  int freed = 0;
  bool states_ok = true;
};

int stop_after(const ke_search_state* state, void* user_data) {
  auto* s = static_cast<StopAfter*>(user_data);
  s->calls += 1;
  s->states_ok = s->states_ok && state->version == KE_SEARCH_STATE_VERSION && state->evaluations >= 1 &&
                 state->elapsed_s >= 0 && state->best_speedup >= 1.0 && state->tokens == 0;
  return state->evaluations >= s->after ? 1 : 0;
}

void free_stop_after(void* user_data) { static_cast<StopAfter*>(user_data)->freed += 1; }

}  // namespace

TEST_CASE("capi: a stop rule callback ends the run normally: success, its reason, the result and the store intact") {
  SUBCASE("refused without a name or a function; a failed call does not free the user data") {
    StopAfter stop;
    ke_stop_rule* rule = reinterpret_cast<ke_stop_rule*>(0x7);
    CHECK(ke_stop_rule_callback(&rule, "", stop_after, &stop, free_stop_after) == KE_ERROR_INVALID_ARGUMENT);
    CHECK(ke_stop_rule_callback(&rule, "host", nullptr, &stop, free_stop_after) == KE_ERROR_INVALID_ARGUMENT);
    CHECK(contains(ke_last_error(), "'should_stop' is NULL"));
    CHECK(ke_stop_rule_callback(nullptr, "host", stop_after, &stop, free_stop_after) == KE_ERROR_INVALID_ARGUMENT);
    CHECK(rule == reinterpret_cast<ke_stop_rule*>(0x7));
    CHECK(stop.freed == 0);
  }

  SUBCASE("after N evaluations, with a store; the rule outlives its handle, freed with the evolver") {
    const std::string db =
        (std::filesystem::temp_directory_path() / ("ke_capi_stop_" + std::to_string(::getpid()) + ".db")).string();
    std::remove(db.c_str());
    Owned<ke_store, ke_store_destroy> store;
    REQUIRE(ke_store_open(store.out(), db.c_str(), 0) == KE_OK);
    StopAfter stop;
    stop.after = 4;
    {
      FakeRun fake;
      fake.start();
      REQUIRE(ke_evolver_set_store(fake.ev, store, 0) == KE_OK);
      ke_stop_rule* rule = nullptr;
      REQUIRE(ke_stop_rule_callback(&rule, "host", stop_after, &stop, free_stop_after) == KE_OK);
      REQUIRE(ke_evolver_set_stop_rule(fake.ev, rule) == KE_OK);
      REQUIRE(ke_stop_rule_destroy(rule) == KE_OK);
      CHECK(stop.freed == 0);  // the evolver still holds it

      Result r;
      REQUIRE(ke_evolver_run(r.out(), fake.ev) == KE_OK);
      CHECK(stop.states_ok);
      CHECK(stop.calls >= 4);  // at every step: after the seed, and more than once per child
      CHECK(evaluations(r) == 4);
      CHECK(node_count(r) == 4);
      CHECK(stop_reason(r) == "the stop rule 'host' said stop at 4 evaluations");
      const ke_node* best = nullptr;
      REQUIRE(ke_result_best(&best, r) == KE_OK);
      CHECK(tunable(best, "BLOCK") == 8);

      // The store holds the whole run, finished with that reason.
      std::int64_t run = 0;
      REQUIRE(ke_result_run_id(&run, r) == KE_OK);
      Result loaded;
      REQUIRE(ke_store_load(loaded.out(), store, run) == KE_OK);
      CHECK(node_count(loaded) == 4);
      CHECK(stop_reason(loaded) == "the stop rule 'host' said stop at 4 evaluations");
      CHECK(stop.freed == 0);
    }
    CHECK(stop.freed == 1);  // the evolver was its last holder
    std::remove(db.c_str());
    std::remove((db + "-wal").c_str());
    std::remove((db + "-shm").c_str());
  }

  SUBCASE("freed when the evolver that held it last is given another rule") {
    StopAfter stop;
    FakeRun fake;
    fake.start();
    ke_stop_rule* rule = nullptr;
    REQUIRE(ke_stop_rule_callback(&rule, "host", stop_after, &stop, free_stop_after) == KE_OK);
    REQUIRE(ke_evolver_set_stop_rule(fake.ev, rule) == KE_OK);
    REQUIRE(ke_stop_rule_destroy(rule) == KE_OK);
    CHECK(stop.freed == 0);
    Rule other;
    REQUIRE(ke_stop_rule_max_evaluations(other.out(), 2) == KE_OK);
    REQUIRE(ke_evolver_set_stop_rule(fake.ev, other) == KE_OK);
    CHECK(stop.freed == 1);
    CHECK(stop.calls == 0);
  }

  SUBCASE("inside a composite, with candidates in flight") {
    StopAfter stop;
    stop.after = 5;
    ke_stop_rule* rule = nullptr;
    REQUIRE(ke_stop_rule_callback(&rule, "host", stop_after, &stop, free_stop_after) == KE_OK);
    Rule far, any;
    REQUIRE(ke_stop_rule_max_evaluations(far.out(), 100) == KE_OK);
    const ke_stop_rule* parts[] = {far, rule};
    REQUIRE(ke_stop_rule_any(any.out(), parts, 2) == KE_OK);
    REQUIRE(ke_stop_rule_destroy(rule) == KE_OK);
    CHECK(stop.freed == 0);  // the composite holds it
    {
      FakeRun fake;
      fake.start(3);
      REQUIRE(ke_evolver_set_stop_rule(fake.ev, any) == KE_OK);
      Result r;
      REQUIRE(ke_evolver_run(r.out(), fake.ev) == KE_OK);
      CHECK(evaluations(r) >= 5);
      CHECK(evaluations(r) < 5 + 3);  // what was in flight is finished, nothing more is started
      CHECK(contains(stop_reason(r).c_str(), "the stop rule 'host' said stop"));
    }
    CHECK(stop.freed == 0);
    REQUIRE(ke_stop_rule_destroy(any.p) == KE_OK);
    any.p = nullptr;
    CHECK(stop.freed == 1);
  }
}

TEST_CASE("capi: real runs on the CPU: in process, in workers, a check, the command mutator") {
  Spec spec;
  REQUIRE(ke_spec_load(spec.out(), fixture("e2e/colsum.json").c_str()) == KE_OK);
  Rule stop;
  REQUIRE(ke_stop_rule_max_evaluations(stop.out(), 4) == KE_OK);
  ke_evolver_options o = KE_EVOLVER_OPTIONS_INIT;
  o.seed = 3;
  // Runs the evolver that `options` make, with the four-evaluation stop rule, into `r`.
  auto run_with = [&](const ke_evolver_options& options, Evolver& ev, Result& r) {
    REQUIRE(ke_evolver_create(ev.out(), spec, &options) == KE_OK);
    REQUIRE(ke_evolver_set_stop_rule(ev, stop) == KE_OK);
    REQUIRE(ke_evolver_run(r.out(), ev) == KE_OK);
  };

  SUBCASE("in process") {
    o.in_process = 1;
    Evolver ev;
    Result r;
    run_with(o, ev, r);
    std::int64_t evaluations = 0;
    REQUIRE(ke_result_evaluations(&evaluations, r) == KE_OK);
    CHECK(evaluations == 4);
    const ke_node* best = nullptr;
    REQUIRE(ke_result_best(&best, r) == KE_OK);
    CHECK(speedup(best) >= 1.0);
    ke_timing t = KE_TIMING_INIT;
    REQUIRE(ke_node_timing(&t, best, 0) == KE_OK);
    CHECK(t.median_us > 0);
    CHECK(t.samples >= 5);
    CHECK(t.min_us <= t.median_us);
    ke_mismatch mm = KE_MISMATCH_INIT;
    const ke_status s = ke_node_mismatch(&mm, best);
    CHECK((s == KE_OK || s == KE_ERROR_NOT_FOUND));
    if (s == KE_OK) CHECK(mm.excess <= 0);
    const ke_device_info* device = nullptr;
    REQUIRE(ke_result_device(&device, r) == KE_OK);
    double peak = 0;
    CHECK(ke_device_info_peak_bytes_per_s(&peak, device) == KE_OK);
    CHECK(peak > 0);
  }
  SUBCASE("in workers, two at once") {
    o.jobs = 2;
    Evolver ev;
    Result r;
    run_with(o, ev, r);
    const char* json = nullptr;
    REQUIRE(ke_result_report_json(&json, r) == KE_OK);
    CHECK(contains(json, "\"evaluations\": 4"));
    CHECK(contains(json, "\"best\""));
  }
  SUBCASE("a check: the seed and the reference") {
    Evolver ev;
    REQUIRE(ke_evolver_create(ev.out(), spec, &o) == KE_OK);
    Result r;
    REQUIRE(ke_evolver_check(r.out(), ev) == KE_OK);
    std::size_t n = 0;
    REQUIRE(ke_result_node_count(&n, r) == KE_OK);
    CHECK(n == 2);
    const ke_node* reference = nullptr;
    REQUIRE(ke_result_node(&reference, r, 1) == KE_OK);
    CHECK(text(ke_node_mutator, reference) == "reference");
    CHECK(status(reference) == KE_EVAL_OK);
    const char* json = nullptr;
    REQUIRE(ke_result_report_json(&json, r) == KE_OK);
    CHECK(contains(json, "\"reference\": {\"status\": \"ok\""));
    const char* table = nullptr;
    REQUIRE(ke_result_report_text(&table, r) == KE_OK);
    CHECK(contains(table, "seed: ok"));
  }
  SUBCASE("the command mutator") {
    o.in_process = 1;
    Evolver ev;
    REQUIRE(ke_evolver_create(ev.out(), spec, &o) == KE_OK);
    // A stand-in agent: answers with the seed's source, reworded and with a line of new code (a comment alone
    // would be the same kernel), in a fenced block.
    const std::string command =
        "cat >/dev/null; printf '```c\\nenum { reworded = 1 };\\n'; sed 's/Columns are summed/Columns get summed/' '" +
        fixture("e2e/colsum_seed.c") + "'; printf '```\\n'";
    ke_command_mutator_options co = KE_COMMAND_MUTATOR_OPTIONS_INIT;
    co.command = command.c_str();
    co.timeout_s = 60;
    Mutator m;
    REQUIRE(ke_mutator_command_create(m.out(), &co) == KE_OK);
    REQUIRE(ke_evolver_set_mutator(ev, m) == KE_OK);
    Rule two;
    REQUIRE(ke_stop_rule_max_evaluations(two.out(), 2) == KE_OK);
    REQUIRE(ke_evolver_set_stop_rule(ev, two) == KE_OK);
    Result r;
    REQUIRE(ke_evolver_run(r.out(), ev) == KE_OK);
    const ke_node* child = nullptr;
    REQUIRE(ke_result_node(&child, r, 1) == KE_OK);
    CHECK(text(ke_node_mutator, child) == "command");
    CHECK(status(child) == KE_EVAL_OK);
    CHECK(contains(text(ke_node_source, child).c_str(), "Columns get summed"));
  }
  SUBCASE("a device list: every device of a kind, each with its own workers") {
    o.device = "cpu:all";
    o.jobs = 2;
    Evolver ev;
    Result r;
    run_with(o, ev, r);
    std::int64_t evaluations = 0;
    REQUIRE(ke_result_evaluations(&evaluations, r) == KE_OK);
    CHECK(evaluations == 4);
    const ke_node* best = nullptr;
    REQUIRE(ke_result_best(&best, r) == KE_OK);
    CHECK(status(best) == KE_EVAL_OK);
    ke_result* none = nullptr;
    o.device = "cpu,cpu";
    Evolver twice;
    REQUIRE(ke_evolver_create(twice.out(), spec, &o) == KE_OK);
    CHECK(ke_evolver_run(&none, twice) == KE_ERROR_INVALID_ARGUMENT);
    CHECK(contains(ke_last_error(), "twice"));
    o.device = "cpu:all";
    o.jobs = 1;
    o.in_process = 1;
    Evolver in_process;
    REQUIRE(ke_evolver_create(in_process.out(), spec, &o) == KE_OK);
    CHECK(ke_evolver_run(&none, in_process) == KE_ERROR_INVALID_ARGUMENT);
    CHECK(none == nullptr);
  }
  SUBCASE("devices that are not there") {
    o.device = "tpu:x";
    Evolver bad_id;
    REQUIRE(ke_evolver_create(bad_id.out(), spec, &o) == KE_OK);
    ke_result* r = nullptr;
    CHECK(ke_evolver_run(&r, bad_id) == KE_ERROR_INVALID_ARGUMENT);
    o.device = "cuda:99";
    o.in_process = 1;
    Evolver absent;
    REQUIRE(ke_evolver_create(absent.out(), spec, &o) == KE_OK);
    CHECK(ke_evolver_run(&r, absent) == KE_ERROR_DEVICE_UNAVAILABLE);
    CHECK(r == nullptr);
  }
}

TEST_CASE("capi: policies with options") {
  FakeRun fake;
  auto& [spec, fitness, doubler, ev, mutator] = fake;
  fake.start();
  const char* eps_name[] = {"epsilon"};
  const char* eps_value[] = {"0.5"};
  CHECK(ke_evolver_set_policy(ev, "epsilon-greedy", eps_name, eps_value, 1) == KE_OK);
  const char* size_name[] = {"tournament-size"};  // the command-line spelling
  const char* size_value[] = {"4"};
  CHECK(ke_evolver_set_policy(ev, "tournament", size_name, size_value, 1) == KE_OK);
  const char* not_a_number[] = {"four"};
  CHECK(ke_evolver_set_policy(ev, "tournament", size_name, not_a_number, 1) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(contains(ke_last_error(), "four"));
  const char* not_an_int[] = {"2.5"};
  CHECK(ke_evolver_set_policy(ev, "tournament", size_name, not_an_int, 1) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_evolver_set_policy(ev, "ucb", eps_name, eps_value, 1) == KE_ERROR_INVALID_ARGUMENT);  // not ucb's
  CHECK(contains(ke_last_error(), "exploration"));
  const char* island_names[] = {"islands", "migration_interval", "features"};
  const char* island_values[] = {"2", "3", "BLOCK"};
  REQUIRE(ke_evolver_set_policy(ev, "islands", island_names, island_values, 3) == KE_OK);
  Result r;
  REQUIRE(ke_evolver_run(r.out(), ev) == KE_OK);
  const ke_node* best = nullptr;
  REQUIRE(ke_result_best(&best, r) == KE_OK);
  CHECK(tunable(best, "BLOCK") == 512);
}

TEST_CASE("capi: the model mutator and the mix") {
  Spec spec;
  REQUIRE(ke_spec_load(spec.out(), fixture("e2e/colsum.json").c_str()) == KE_OK);
  ke_llm_mutator_options lo;
  REQUIRE(ke_llm_mutator_options_init(&lo, KE_LLM_MUTATOR_OPTIONS_VERSION) == KE_OK);
  ke_mutator* m = nullptr;
  lo.model = "probe";
  if (ke_mutator_llm_create(&m, &lo) == KE_ERROR_INTERNAL && contains(ke_last_error(), "no model mutator")) {
    MESSAGE("this build has no model mutator (no ke_llm): only its refusal is checked");
    return;
  }
  CHECK(ke_mutator_destroy(m) == KE_OK);
  m = nullptr;
  lo.model = nullptr;
  CHECK(ke_mutator_llm_create(&m, &lo) == KE_ERROR_INVALID_ARGUMENT);  // no model
  lo.model = "some-model";
  lo.api = "telepathy";
  CHECK(ke_mutator_llm_create(&m, &lo) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(contains(ke_last_error(), "telepathy"));
  lo.api = nullptr;
  lo.memory = "forgetful";
  CHECK(ke_mutator_llm_create(&m, &lo) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(m == nullptr);
  lo.memory = "fresh";
  lo.base_url = "http://127.0.0.1:9/v1";  // nothing listens there: every request fails at once
  lo.max_retries = 0;
  lo.timeout_s = 5;
  Mutator llm;
  REQUIRE(ke_mutator_llm_create(llm.out(), &lo) == KE_OK);

  FakeFitness fitness;
  ke_evolver_options o = KE_EVOLVER_OPTIONS_INIT;
  o.max_consecutive_mutator_failures = 3;
  Evolver ev;
  REQUIRE(ke_evolver_create(ev.out(), spec, &o) == KE_OK);
  REQUIRE(ke_evolver_set_evaluator(ev, "made-up device", fake_evaluate, &fitness) == KE_OK);
  REQUIRE(ke_evolver_set_mutator(ev, llm) == KE_OK);
  ProgressLog log;
  REQUIRE(ke_evolver_set_progress(ev, log_progress, &log) == KE_OK);
  Result r;
  REQUIRE(ke_evolver_run(r.out(), ev) == KE_OK);  // a model that cannot be reached is data, not an error
  std::int64_t failures = 0;
  CHECK(ke_result_mutator_failures(&failures, r) == KE_OK);
  CHECK(failures == 3);
  CHECK(log.events[KE_PROGRESS_MUTATOR_FAILURE] == 3);
  CHECK(!log.failure_message.empty());

  // The mix: a model (here the doubler) writes, the parameter search tunes after each success.
  Doubler doubler;
  Mutator model, params, mix;
  REQUIRE(ke_mutator_custom_create(model.out(), "doubler", doubler_mutate, &doubler) == KE_OK);
  REQUIRE(ke_mutator_param_create(params.out(), nullptr) == KE_OK);
  CHECK(ke_mutator_mix_create(mix.out(), model, params, -1, 0) == KE_ERROR_INVALID_ARGUMENT);
  REQUIRE(ke_mutator_mix_create(mix.out(), model, params, 2, 0) == KE_OK);
  REQUIRE(ke_evolver_set_mutator(ev, mix) == KE_OK);
  Rule stop;
  REQUIRE(ke_stop_rule_max_evaluations(stop.out(), 7) == KE_OK);
  REQUIRE(ke_evolver_set_stop_rule(ev, stop) == KE_OK);
  Result mixed;
  REQUIRE(ke_evolver_run(mixed.out(), ev) == KE_OK);
  std::set<std::string> makers;
  std::size_t n = 0;
  REQUIRE(ke_result_node_count(&n, mixed) == KE_OK);
  for (std::size_t i = 1; i < n; ++i) {
    const ke_node* node = nullptr;
    REQUIRE(ke_result_node(&node, mixed, std::int64_t(i)) == KE_OK);
    makers.insert(text(ke_node_mutator, node));
  }
  CHECK(makers.count("doubler") == 1);
}

TEST_CASE("capi: the store: record, show, best, export, resume, reuse") {
  const std::string db =
      (std::filesystem::temp_directory_path() / ("ke_capi_store_" + std::to_string(::getpid()) + ".db")).string();
  std::remove(db.c_str());
  ke_store* missing = nullptr;
  CHECK(ke_store_open(&missing, (db + ".absent").c_str(), 1) != KE_OK);  // read-only: not created
  CHECK(ke_store_open(&missing, fixture("e2e/colsum.json").c_str(), 0) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(missing == nullptr);
  Owned<ke_store, ke_store_destroy> store;
  REQUIRE(ke_store_open(store.out(), db.c_str(), 0) == KE_OK);
  std::int64_t latest = -1;
  CHECK(ke_store_latest_run(&latest, store) == KE_ERROR_NOT_FOUND);

  FakeRun fake;
  auto& [spec, fitness, doubler, ev, mutator] = fake;
  fake.start();
  Result none;
  CHECK(ke_evolver_resume(none.out(), ev, 0) == KE_ERROR_INVALID_ARGUMENT);  // no store yet
  REQUIRE(ke_evolver_set_store(ev, store, 0) == KE_OK);
  Rule five;
  REQUIRE(ke_stop_rule_max_evaluations(five.out(), 5) == KE_OK);
  REQUIRE(ke_evolver_set_stop_rule(ev, five) == KE_OK);

  Result first;
  REQUIRE(ke_evolver_run(first.out(), ev) == KE_OK);
  std::int64_t run = 0;
  REQUIRE(ke_result_run_id(&run, first) == KE_OK);
  CHECK(run == 1);
  std::size_t runs = 0;
  REQUIRE(ke_store_run_count(&runs, store) == KE_OK);
  CHECK(runs == 1);
  REQUIRE(ke_store_run_id(&latest, store, 0) == KE_OK);
  CHECK(latest == 1);

  Result loaded;
  REQUIRE(ke_store_load(loaded.out(), store, 1) == KE_OK);
  std::size_t n = 0;
  REQUIRE(ke_result_node_count(&n, loaded) == KE_OK);
  CHECK(n == 5);
  const ke_node* best = nullptr;
  REQUIRE(ke_result_best(&best, loaded) == KE_OK);
  CHECK(tunable(best, "BLOCK") == 16);
  const char* table = nullptr;
  REQUIRE(ke_store_show(&table, store, 1, 0) == KE_OK);
  CHECK(contains(table, "BLOCK"));
  const char* source = nullptr;
  REQUIRE(ke_store_best_source(&source, store, 1) == KE_OK);
  CHECK(contains(source, "colsum"));
  CHECK(contains(source, "16"));
  const char* json = nullptr;
  REQUIRE(ke_store_export(&json, store, 1, "json") == KE_OK);
  CHECK(contains(json, "\"nodes\""));
  const char* dot = nullptr;
  REQUIRE(ke_store_export(&dot, store, 1, "dot") == KE_OK);
  CHECK(contains(dot, "digraph"));
  CHECK(ke_store_export(&dot, store, 1, "svg") == KE_ERROR_INVALID_ARGUMENT);
  CHECK(ke_store_show(&table, store, 99, 0) == KE_ERROR_NOT_FOUND);
  Result absent;
  CHECK(ke_store_load(absent.out(), store, 99) == KE_ERROR_NOT_FOUND);

  // A run stopped by its host after three nodes goes on where it stood.
  ProgressLog log;
  log.abort_at_node = 3;
  REQUIRE(ke_evolver_set_progress(ev, log_progress, &log) == KE_OK);
  ke_result* aborted = nullptr;
  CHECK(ke_evolver_run(&aborted, ev) == KE_ERROR_ABORTED);
  REQUIRE(ke_evolver_set_progress(ev, nullptr, nullptr) == KE_OK);
  Rule eight;
  REQUIRE(ke_stop_rule_max_evaluations(eight.out(), 8) == KE_OK);
  REQUIRE(ke_evolver_set_stop_rule(ev, eight) == KE_OK);
  const int calls_before = fitness.calls;
  Result resumed;
  REQUIRE(ke_evolver_resume(resumed.out(), ev, 0) == KE_OK);
  REQUIRE(ke_result_run_id(&run, resumed) == KE_OK);
  CHECK(run == 2);
  REQUIRE(ke_result_node_count(&n, resumed) == KE_OK);
  CHECK(n == 8);
  // The three stored nodes are not measured again; confirmation evaluates the best and the seed 3 times each.
  int confirmed = -1;
  double confirmed_speedup = 0;
  const bool has_confirmation =
      ke_result_confirmation(&confirmed, &confirmed_speedup, nullptr, nullptr, resumed) == KE_OK;
  CHECK(fitness.calls - calls_before == 5 + (has_confirmation ? 6 : 0));
  if (has_confirmation) CHECK(confirmed_speedup > 0);

  // A new run with reuse answers known points from the store.
  REQUIRE(ke_evolver_set_store(ev, store, 1) == KE_OK);
  const int calls_then = fitness.calls;
  Result reused;
  REQUIRE(ke_evolver_run(reused.out(), ev) == KE_OK);
  REQUIRE(ke_result_run_id(&run, reused) == KE_OK);
  CHECK(run == 3);
  // BLOCK 1 to 128 were all measured before: only confirmation measures again (never from the store).
  const bool reused_confirmation = ke_result_confirmation(nullptr, nullptr, nullptr, nullptr, reused) == KE_OK;
  CHECK(fitness.calls == calls_then + (reused_confirmation ? 6 : 0));
  REQUIRE(ke_store_latest_run(&latest, store) == KE_OK);
  CHECK(latest == 3);
  std::remove(db.c_str());
  std::remove((db + "-wal").c_str());
  std::remove((db + "-shm").c_str());
}

TEST_CASE(
    "capi: warm start from another problem's store (options version 3); a bad store is refused; an older "
    "struct is filled only as far as its version goes") {
  const std::string db =
      (std::filesystem::temp_directory_path() / ("ke_capi_warm_" + std::to_string(::getpid()) + ".db")).string();
  std::remove(db.c_str());
  {
    // Another problem: the colsum fixture under another name (the same signature), run to BLOCK 8, stored.
    Spec base;
    REQUIRE(ke_spec_load(base.out(), fixture("e2e/colsum.json").c_str()) == KE_OK);
    const char* json = nullptr;
    REQUIRE(ke_spec_to_json(&json, base) == KE_OK);
    std::string text = json;
    const std::string name = "\"name\": \"colsum\"";
    REQUIRE(text.find(name) != std::string::npos);
    text.replace(text.find(name), name.size(), "\"name\": \"colsum_elsewhere\"");
    Spec other;
    REQUIRE(ke_spec_parse(other.out(), text.c_str(), fixture("e2e/colsum.json").c_str()) == KE_OK);
    Owned<ke_store, ke_store_destroy> store;
    REQUIRE(ke_store_open(store.out(), db.c_str(), 0) == KE_OK);
    FakeFitness fitness;
    Doubler doubler;
    Evolver ev;
    REQUIRE(ke_evolver_create(ev.out(), other, nullptr) == KE_OK);
    REQUIRE(ke_evolver_set_evaluator(ev, "made-up device", fake_evaluate, &fitness) == KE_OK);
    Mutator mutator;
    REQUIRE(ke_mutator_custom_create(mutator.out(), "doubler", doubler_mutate, &doubler) == KE_OK);
    REQUIRE(ke_evolver_set_mutator(ev, mutator) == KE_OK);
    REQUIRE(ke_evolver_set_store(ev, store, 0) == KE_OK);
    Rule four;
    REQUIRE(ke_stop_rule_max_evaluations(four.out(), 4) == KE_OK);
    REQUIRE(ke_evolver_set_stop_rule(ev, four) == KE_OK);
    Result done;
    REQUIRE(ke_evolver_run(done.out(), ev) == KE_OK);
  }
  Spec spec;
  REQUIRE(ke_spec_load(spec.out(), fixture("e2e/colsum.json").c_str()) == KE_OK);
  ke_evolver_options o = KE_EVOLVER_OPTIONS_INIT;
  CHECK(o.warm_start_max == 3);
  const char* stores[] = {db.c_str()};
  o.warm_start_stores = stores;
  o.warm_start_store_count = 1;
  FakeFitness fitness;
  Doubler doubler;
  Evolver ev;
  REQUIRE(ke_evolver_create(ev.out(), spec, &o) == KE_OK);
  REQUIRE(ke_evolver_set_evaluator(ev, "made-up device", fake_evaluate, &fitness) == KE_OK);
  Mutator mutator;
  REQUIRE(ke_mutator_custom_create(mutator.out(), "doubler", doubler_mutate, &doubler) == KE_OK);
  REQUIRE(ke_evolver_set_mutator(ev, mutator) == KE_OK);
  Rule three;
  REQUIRE(ke_stop_rule_max_evaluations(three.out(), 3) == KE_OK);
  REQUIRE(ke_evolver_set_stop_rule(ev, three) == KE_OK);
  Result result;
  REQUIRE(ke_evolver_run(result.out(), ev) == KE_OK);
  const ke_node* warm = nullptr;
  REQUIRE(ke_result_node(&warm, result, 1) == KE_OK);
  CHECK(text(ke_node_mutator, warm) == "warm");
  CHECK(text(ke_node_note, warm).find("warm start from colsum_elsewhere") != std::string::npos);
  CHECK(tunable(warm, "BLOCK") == 8);
  CHECK(speedup(warm) == doctest::Approx(8.0));
  Mutator reserved;
  CHECK(ke_mutator_custom_create(reserved.out(), "warm", doubler_mutate, &doubler) == KE_ERROR_INVALID_ARGUMENT);

  // A store that does not exist: the evolver is not made, and the message names the file.
  const std::string absent = db + ".absent";
  const char* bad[] = {absent.c_str()};
  o.warm_start_stores = bad;
  ke_evolver* none = nullptr;
  CHECK(ke_evolver_create(&none, spec, &o) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(none == nullptr);
  CHECK(contains(ke_last_error(), absent));
  o.warm_start_stores = stores;
  o.warm_start_max = 0;
  CHECK(ke_evolver_create(&none, spec, &o) == KE_ERROR_INVALID_ARGUMENT);

  // A caller built against the version-2 header has no warm-start fields: init writes none of them.
  ke_evolver_options older;
  std::memset(&older, 0xab, sizeof older);
  REQUIRE(ke_evolver_options_init(&older, 2) == KE_OK);
  CHECK(older.version == 2);
  CHECK(older.confirm_rounds == 3);
  const auto* tail = reinterpret_cast<const unsigned char*>(&older) + offsetof(ke_evolver_options, warm_start_stores);
  CHECK(
      std::all_of(tail, reinterpret_cast<const unsigned char*>(&older + 1), [](unsigned char b) { return b == 0xab; }));
  std::remove(db.c_str());
  std::remove((db + "-wal").c_str());
  std::remove((db + "-shm").c_str());
}

namespace {

// A model's rewrites, each faster than the last: its `pass` (code, not a comment: the graph knows a kernel by its
// code) sets its time.
std::string rewrite(int pass) {
  return "Sum more columns per pass.\n```c\n#include <stdint.h>\nstatic const int pass = " + std::to_string(pass) +
         ";\nvoid colsum(const float* x, float* y, int64_t M, int64_t N) {\n"
         "  for (int64_t j = 0; j < N; ++j) { float s = 0; for (int64_t i = 0; i < M; ++i) s += x[i * N + j]; y[j] = s; }\n"
         "}\n```\n";
}

// Times a kernel by its pass (1000 us for the seed, 1000 / (pass + 1) for pass N) and counts the calls.
int pass_evaluate(const ke_candidate* c, ke_evaluation* e, void* user_data) {
  auto* calls = static_cast<int*>(user_data);
  *calls += 1;
  const char* source = nullptr;
  std::size_t workloads = 0;
  if (ke_candidate_source(&source, c) != KE_OK || ke_candidate_workload_count(&workloads, c) != KE_OK) return 1;
  const char* pass = std::strstr(source, "static const int pass = ");
  const double time_us = pass ? 1000.0 / (std::atoi(pass + 24) + 1) : 1000.0;
  ke_evaluation_set_status(e, KE_EVAL_OK);
  for (std::size_t w = 0; w < workloads; ++w) ke_evaluation_set_time_us(e, w, time_us, 1.0);
  return 0;
}

}  // namespace

TEST_CASE("capi: confirm_parent_rounds (options version 4): the parent a model builds on is measured again, or not") {
  Spec spec;
  REQUIRE(ke_spec_load(spec.out(), fixture("e2e/colsum.json").c_str()) == KE_OK);
  ke_evolver_options o = KE_EVOLVER_OPTIONS_INIT;
  CHECK(o.confirm_parent_rounds == 2);
  o.confirm_rounds = 0;  // only the parents' confirmations are counted here
  o.confirm_parent_rounds = -1;
  ke_evolver* refused = nullptr;
  CHECK(ke_evolver_create(&refused, spec, &o) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(contains(ke_last_error(), "confirm_parent_rounds"));

  // Three evaluations: the seed, a rewrite of it, then a rewrite of that (greedy: the best is the parent).
  struct Outcome {
    int calls = 0;
    std::string second_prompt;
  };
  auto run_with = [&](int rounds) -> std::optional<Outcome> {
    ke_test::FakeModelServer server;
    for (int pass = 1; pass <= 3; ++pass) server.push({200, ke_test::FakeModelServer::openai(rewrite(pass))});
    ke_llm_mutator_options lo;
    REQUIRE(ke_llm_mutator_options_init(&lo, KE_LLM_MUTATOR_OPTIONS_VERSION) == KE_OK);
    const std::string url = server.url();
    lo.base_url = url.c_str();
    lo.model = "test-model";
    lo.max_retries = 0;
    lo.timeout_s = 5;
    lo.device_description = "cpu: a test CPU";
    Mutator llm;
    if (ke_mutator_llm_create(llm.out(), &lo) != KE_OK) return std::nullopt;  // a build without the model mutator
    o.confirm_parent_rounds = rounds;
    Evolver ev;
    REQUIRE(ke_evolver_create(ev.out(), spec, &o) == KE_OK);
    Outcome out;
    REQUIRE(ke_evolver_set_evaluator(ev, "made-up device", pass_evaluate, &out.calls) == KE_OK);
    REQUIRE(ke_evolver_set_mutator(ev, llm) == KE_OK);
    REQUIRE(ke_evolver_set_policy(ev, "greedy", nullptr, nullptr, 0) == KE_OK);
    Rule three;
    REQUIRE(ke_stop_rule_max_evaluations(three.out(), 3) == KE_OK);
    REQUIRE(ke_evolver_set_stop_rule(ev, three) == KE_OK);
    Result r;
    REQUIRE_MESSAGE(ke_evolver_run(r.out(), ev) == KE_OK, ke_last_error());
    std::size_t n = 0;
    REQUIRE(ke_result_node_count(&n, r) == KE_OK);
    REQUIRE(n == 3);
    const ke_node* second = nullptr;
    REQUIRE(ke_result_node(&second, r, 2) == KE_OK);
    std::int64_t parent = -1;
    REQUIRE(ke_node_parent(&parent, second, 0) == KE_OK);
    CHECK(parent == 1);
    out.second_prompt = text(ke_node_prompt, second);
    return out;
  };
  const auto off = run_with(0);
  if (!off) {
    MESSAGE("this build has no model mutator (no ke_llm): only the option's refusal is checked");
    return;
  }
  CHECK(off->calls == 3);  // nothing measured again
  CHECK_MESSAGE(contains(off->second_prompt.c_str(), "Single measurement: its figures are one evaluation's"),
                off->second_prompt);
  const auto on = run_with(3);
  REQUIRE(on);
  CHECK(on->calls == 3 + 2 * 3);  // node 1 and the seed, three rounds each, once
  CHECK_MESSAGE(contains(on->second_prompt.c_str(),
                         "Confirmed: measured again against the seed, interleaved, 3 rounds on "
                         "fresh inputs: 2x"),
                on->second_prompt);

  // A caller built against the version-3 header has no confirm_parent_rounds: init writes nothing there, and
  // create gives it the default.
  ke_evolver_options older;
  std::memset(&older, 0xab, sizeof older);
  REQUIRE(ke_evolver_options_init(&older, 3) == KE_OK);
  CHECK(older.version == 3);
  CHECK(older.warm_start_max == 3);
  const auto* tail =
      reinterpret_cast<const unsigned char*>(&older) + offsetof(ke_evolver_options, confirm_parent_rounds);
  CHECK(std::all_of(tail, tail + sizeof older.confirm_parent_rounds, [](unsigned char b) { return b == 0xab; }));
  Evolver old_caller;
  CHECK(ke_evolver_create(old_caller.out(), spec, &older) == KE_OK);  // 0xabababab is not read as rounds
}

TEST_CASE(
    "capi: a PyTorch problem without a seed: the parameter mutator is refused, check says so, a command writes it") {
  Spec spec;
  const ke_status loaded = ke_spec_load(spec.out(), fixture("pytorch/linear_relu_scale.py").c_str());
  if (loaded == KE_ERROR_DEVICE_UNAVAILABLE) {
    MESSAGE("skipping: no Python here imports torch (" << ke_last_error() << ")");
    return;
  }
  REQUIRE_MESSAGE(loaded == KE_OK, ke_last_error());
  Evolver ev;
  REQUIRE(ke_evolver_create(ev.out(), spec, nullptr) == KE_OK);  // the param mutator by default
  Rule stop;
  REQUIRE(ke_stop_rule_max_evaluations(stop.out(), 2) == KE_OK);
  REQUIRE(ke_evolver_set_stop_rule(ev, stop) == KE_OK);
  ke_result* refused = nullptr;
  CHECK(ke_evolver_run(&refused, ev) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(refused == nullptr);
  CHECK(contains(ke_last_error(), "no seed kernel"));

  // A check evaluates nothing for the missing seed, and says why.
  Result checked;
  REQUIRE_MESSAGE(ke_evolver_check(checked.out(), ev) == KE_OK, ke_last_error());
  const ke_node* seed = nullptr;
  REQUIRE(ke_result_seed(&seed, checked) == KE_OK);
  CHECK(status(seed) == KE_EVAL_INVALID);
  CHECK(contains(text(ke_node_message, seed).c_str(), "no seed kernel"));
  CHECK(node_count(checked) == 1);  // a PyTorch module is not checked against itself as a kernel

  Mutator command;
  ke_command_mutator_options co = KE_COMMAND_MUTATOR_OPTIONS_INIT;
  const std::string writer = "sh " + fixture("pytorch/first_kernel_writer.sh");
  co.command = writer.c_str();
  REQUIRE(ke_mutator_command_create(command.out(), &co) == KE_OK);
  REQUIRE(ke_evolver_set_mutator(ev, command) == KE_OK);
  Result r;
  REQUIRE_MESSAGE(ke_evolver_run(r.out(), ev) == KE_OK, ke_last_error());
  REQUIRE(ke_result_seed(&seed, r) == KE_OK);
  CHECK(status(seed) == KE_EVAL_OK);
  CHECK(text(ke_node_mutator, seed) == "command");
  CHECK(contains(text(ke_node_note, seed).c_str(), "first kernel, written from the reference"));
  CHECK(evaluations(r) == 2);
}

TEST_CASE("capi: a stored program refuses null data, impossible sizes and a database edited after the run") {
  ke_test::TempDir dir("ke_capi_program");
  const std::string db = ke_test::centre_run(dir);

  Owned<ke_program, ke_program_destroy> program;
  REQUIRE_MESSAGE(ke_program_load(program.out(), db.c_str(), nullptr) == KE_OK, ke_last_error());
  std::vector<float> x(777, 2.0f), y(777, 0.0f);
  std::int64_t n = 777;
  void* xp = x.data();
  void* yp = y.data();
  void* null_data = nullptr;
  void* args[] = {&xp, &yp, &n};
  REQUIRE_MESSAGE(ke_program_call(program, args, 3, nullptr, 0) == KE_OK, ke_last_error());
  CHECK(std::fabs(y[0]) < 1e-4);
  // NULL data: refused with a status, naming the buffer, on a first call of the sizes and on a repeat.
  for (void** slot : {&args[0], &args[1]}) {
    *slot = &null_data;
    CHECK(ke_program_call(program, args, 3, nullptr, 0) == KE_ERROR_INVALID_ARGUMENT);
    CHECK_MESSAGE(contains(ke_last_error(), slot == &args[0] ? "'x' is NULL" : "'y' is NULL"), ke_last_error());
    args[0] = &xp, args[1] = &yp;
  }
  // Sizes compared as integers; INT64_MAX named as it is, and refused for its bytes with any shape; a negative
  // size refused by name.
  n = INT64_MAX;
  CHECK(ke_program_call(program, args, 3, nullptr, 0) == KE_ERROR_INVALID_ARGUMENT);
  CHECK_MESSAGE(contains(ke_last_error(), "n = 9223372036854775807"), ke_last_error());
  CHECK(ke_program_call(program, args, 3, nullptr, KE_PROGRAM_ANY_SHAPE) == KE_ERROR_INVALID_ARGUMENT);
  CHECK_MESSAGE(contains(ke_last_error(), "'x' would hold more than 2^63 bytes"), ke_last_error());
  n = -1;
  CHECK(ke_program_call(program, args, 3, nullptr, KE_PROGRAM_ANY_SHAPE) == KE_ERROR_INVALID_ARGUMENT);
  CHECK_MESSAGE(contains(ke_last_error(), "size 'n' is -1"), ke_last_error());
  int verified = -1;
  CHECK(ke_program_verified(&verified, program, args, 3) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(verified == -1);
  const std::int64_t negative[] = {-1};
  std::int64_t dims[2] = {0, 0};
  std::size_t ndim = 0;
  CHECK(ke_program_shape(dims, 2, &ndim, program, 0, negative, 1) == KE_ERROR_INVALID_ARGUMENT);
  CHECK(contains(ke_last_error(), "size 'n' is -1"));
  std::int64_t calls = -1;
  CHECK(ke_program_calls(&calls, program) == KE_OK);
  CHECK(calls == 1);  // refused calls are not counted
  n = 777;
  CHECK(ke_program_call(program, args, 3, nullptr, 0) == KE_OK);

  // A node edited in the file after the run is not loaded: its source (sources.hash), its tunables (nodes.key),
  // a crashed node's status (no evidence of a verification).
  const std::pair<const char*, const char*> edits[] = {
      {"UPDATE sources SET text = replace(text, 'partial[c] = s;', 'partial[c] = s + 1;')", "sources.hash"},
      {"UPDATE nodes SET tunables = '{\"CHUNK\": 999}' WHERE seq = 1", "nodes.key"},
      {"UPDATE nodes SET status = 'ok', worst = NULL WHERE seq = 1; "
       "DELETE FROM timings WHERE node = (SELECT uid FROM nodes WHERE seq = 1)",
       "no recorded evaluation"}};
  int k = 0;
  for (const auto& [sql, field] : edits) {
    const std::string copy = dir / ("edited" + std::to_string(k++) + ".db");
    sqlite3* from = nullptr;
    sqlite3* handle = nullptr;
    REQUIRE(sqlite3_open_v2(db.c_str(), &from, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_open(copy.c_str(), &handle) == SQLITE_OK);
    sqlite3_backup* backup = sqlite3_backup_init(handle, "main", from, "main");  // the log's pages too
    REQUIRE(backup != nullptr);
    CHECK(sqlite3_backup_step(backup, -1) == SQLITE_DONE);
    sqlite3_backup_finish(backup);
    sqlite3_close(from);
    REQUIRE(sqlite3_exec(handle, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(handle);
    ke_program_options options = KE_PROGRAM_OPTIONS_INIT;
    options.node = 1;
    ke_program* refused = nullptr;
    CHECK(ke_program_load(&refused, copy.c_str(), &options) == KE_ERROR_INVALID_ARGUMENT);
    CHECK(refused == nullptr);
    CHECK_MESSAGE(contains(ke_last_error(), field), ke_last_error());
    CHECK(contains(ke_last_error(), "node 1"));
  }
}
