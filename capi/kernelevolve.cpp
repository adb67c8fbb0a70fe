// The C API over the C++ classes. Every entry point runs its body inside guard(), which turns every
// exception into a ke_status and the calling thread's last error; nothing throws past it. Handles are
// structs whose first member is a tag, checked on every call, and cleared when the handle is destroyed.
#include "kernelevolve.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <kernelevolve/distributed.hpp>
#include <kernelevolve/kernelevolve.hpp>
#include <kernelevolve/store.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ke = kernelevolve;

static_assert(KE_VERSION_MAJOR == KE_PROJECT_VERSION_MAJOR && KE_VERSION_MINOR == KE_PROJECT_VERSION_MINOR &&
                  KE_VERSION_PATCH == KE_PROJECT_VERSION_PATCH,
              "kernelevolve.h's KE_VERSION_* must match the project's version in CMakeLists.txt");

namespace {

// Tags that open every handle: a NULL, foreign or destroyed handle is told apart from a live one.
enum class Tag : std::uint32_t {
  dead = 0xdeadbeefu,
  spec = 0x6b650001u,
  device_list,
  device_info,
  node,
  stop_rule,
  mutator,
  mutation,
  candidate,
  evaluation,
  result,
  evolver,
  store,
};

// An error raised inside the C layer itself.
struct Failure {
  ke_status status;
  std::string message;
};

// A callback returned non-zero. Thrown through the Evolver (which joins its threads on the way out) and
// caught at the entry point.
struct Aborted {
  std::string message;
};

[[noreturn]] void fail(ke_status status, std::string message) { throw Failure{status, std::move(message)}; }

thread_local std::string t_last_error;

ke_status record(ke_status status, const char* function, const std::string& message) noexcept {
  try {
    t_last_error = std::string(function) + ": " + message;
  } catch (...) {
    t_last_error.clear();  // out of memory: an empty message is better than none at all
  }
  return status;
}

ke_status status_of(ke::ErrorCode code) {
  switch (code) {
    case ke::ErrorCode::BadSpec: return KE_ERROR_BAD_SPEC;
    case ke::ErrorCode::BadUsage: return KE_ERROR_INVALID_ARGUMENT;
    case ke::ErrorCode::DeviceUnavailable: return KE_ERROR_DEVICE_UNAVAILABLE;
    default: return KE_ERROR_INTERNAL;
  }
}

// Runs an entry point's body; every exception becomes a status and the thread's last error.
template <class F>
ke_status guard(const char* function, F&& body) noexcept {
  try {
    body();
    return KE_OK;
  } catch (const Failure& e) {
    return record(e.status, function, e.message);
  } catch (const Aborted& e) {
    return record(KE_ERROR_ABORTED, function, e.message);
  } catch (const ke::Error& e) {
    return record(status_of(e.code()), function, e.what());
  } catch (const std::bad_alloc&) {
    return record(KE_ERROR_OUT_OF_MEMORY, function, "out of memory");
  } catch (const std::exception& e) {
    return record(KE_ERROR_INTERNAL, function, e.what());
  } catch (...) {
    return record(KE_ERROR_INTERNAL, function, "an unknown exception");
  }
}

template <class T>
T* need_out(T* out, const char* name) {
  if (!out) fail(KE_ERROR_INVALID_ARGUMENT, std::string("the out-parameter '") + name + "' is NULL");
  return out;
}

std::string need_string(const char* text, const char* name) {
  if (!text) fail(KE_ERROR_INVALID_ARGUMENT, std::string("'") + name + "' is NULL");
  return text;
}

std::string need_nonempty(const char* text, const char* name) {
  std::string s = need_string(text, name);
  if (s.empty()) fail(KE_ERROR_INVALID_ARGUMENT, std::string("'") + name + "' is empty");
  return s;
}

template <class T>
const T* need_array(const T* array, std::size_t count, const char* name) {
  if (!array && count > 0) fail(KE_ERROR_INVALID_ARGUMENT, std::string("'") + name + "' is NULL");
  return array;
}

void need_finite(double x, const char* name) {
  if (!std::isfinite(x)) fail(KE_ERROR_INVALID_ARGUMENT, std::string("'") + name + "' is not a finite number");
}

// A versioned struct the caller filled (or wants filled): its version must be one this library knows.
void need_version(unsigned int version, unsigned int newest, const char* what) {
  if (version < 1 || version > newest) {
    fail(KE_ERROR_INVALID_ARGUMENT, std::string(what) + " version " + std::to_string(version) +
                                        " is not known to this library (it knows 1 to " + std::to_string(newest) +
                                        "); initialise it with its _INIT macro or _init function");
  }
}

ke_eval_status to_c(ke::Status s) {
  switch (s) {
    case ke::Status::pending: return KE_EVAL_PENDING;
    case ke::Status::ok: return KE_EVAL_OK;
    case ke::Status::compile_error: return KE_EVAL_COMPILE_ERROR;
    case ke::Status::incorrect: return KE_EVAL_INCORRECT;
    case ke::Status::crashed: return KE_EVAL_CRASHED;
    case ke::Status::timeout: return KE_EVAL_TIMEOUT;
    case ke::Status::invalid: return KE_EVAL_INVALID;
  }
  return KE_EVAL_PENDING;
}

std::optional<ke::Status> from_c(ke_eval_status s) {
  switch (s) {
    case KE_EVAL_PENDING: return ke::Status::pending;
    case KE_EVAL_OK: return ke::Status::ok;
    case KE_EVAL_COMPILE_ERROR: return ke::Status::compile_error;
    case KE_EVAL_INCORRECT: return ke::Status::incorrect;
    case KE_EVAL_CRASHED: return ke::Status::crashed;
    case KE_EVAL_TIMEOUT: return ke::Status::timeout;
    case KE_EVAL_INVALID: return ke::Status::invalid;
    case KE_EVAL_MAX_ENUM: break;
  }
  return std::nullopt;
}

ke::Status need_status(ke_eval_status s, const char* name) {
  const auto status = from_c(s);
  if (!status) fail(KE_ERROR_INVALID_ARGUMENT, std::string("'") + name + "' is not a ke_eval_status (" +
                                                   std::to_string(static_cast<long long>(s)) + ")");
  return *status;
}

// The i-th entry of a map in key order.
template <class Map>
typename Map::const_iterator nth(const Map& map, std::size_t index, const char* what) {
  if (index >= map.size()) {
    fail(KE_ERROR_NOT_FOUND, std::string(what) + " index " + std::to_string(index) + " is out of range (there are " +
                                 std::to_string(map.size()) + ")");
  }
  return std::next(map.begin(), static_cast<std::ptrdiff_t>(index));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(KE_ERROR_BAD_SPEC, "cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// How a mutator handle makes the mutator of a run: one instance shared by every run, or, for a mutator
// that keeps per-run state or wants the run's device, a fresh one for each run.
struct MutatorRecipe {
  std::string name;
  std::shared_ptr<ke::Mutator> instance;
  std::function<std::shared_ptr<ke::Mutator>(const ke::DeviceInfo&)> make;
  std::shared_ptr<ke::Mutator> for_run(const ke::DeviceInfo& device) const { return make ? make(device) : instance; }
};

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Handles. Each opens with its tag; kTag and kName serve need().

struct ke_spec {
  static constexpr Tag kTag = Tag::spec;
  static constexpr const char* kName = "ke_spec";
  Tag tag = kTag;
  ke::Spec spec;
  mutable std::mutex mutex;  // guards the cache for concurrent const calls
  mutable std::optional<std::string> json;
  void changed() { json.reset(); }
};

struct ke_device_info {
  static constexpr Tag kTag = Tag::device_info;
  static constexpr const char* kName = "ke_device_info";
  Tag tag = kTag;
  ke::DeviceInfo info;
};

struct ke_device_list {
  static constexpr Tag kTag = Tag::device_list;
  static constexpr const char* kName = "ke_device_list";
  Tag tag = kTag;
  std::vector<std::unique_ptr<ke_device_info>> devices;
};

struct ke_node {
  static constexpr Tag kTag = Tag::node;
  static constexpr const char* kName = "ke_node";
  Tag tag = kTag;
  const ke::Node* node = nullptr;
};

struct ke_stop_rule {
  static constexpr Tag kTag = Tag::stop_rule;
  static constexpr const char* kName = "ke_stop_rule";
  Tag tag = kTag;
  std::shared_ptr<ke::StopRule> rule;
};

struct ke_mutator {
  static constexpr Tag kTag = Tag::mutator;
  static constexpr const char* kName = "ke_mutator";
  Tag tag = kTag;
  MutatorRecipe recipe;
};

struct ke_store {
  static constexpr Tag kTag = Tag::store;
  static constexpr const char* kName = "ke_store";
  Tag tag = kTag;
  std::shared_ptr<ke::Store> store;
  mutable std::mutex mutex;                        // guards the texts for concurrent const calls
  mutable std::map<std::string, std::string> texts;  // what show, best and export returned, kept till destroy
};

struct ke_mutation {
  static constexpr Tag kTag = Tag::mutation;
  static constexpr const char* kName = "ke_mutation";
  Tag tag = kTag;
  const ke::MutationContext* context = nullptr;
  std::vector<ke_node> parents;
  std::map<ke::NodeId, std::unique_ptr<ke_node>> nodes;  // views handed out by ke_mutation_node
  std::optional<std::string> request;
  ke::Candidate child;
  std::string note, error, prompt, answer;
  bool failed = false, exhausted = false;
  std::int64_t tokens = 0;
};

struct ke_candidate {
  static constexpr Tag kTag = Tag::candidate;
  static constexpr const char* kName = "ke_candidate";
  Tag tag = kTag;
  const ke::Candidate* candidate = nullptr;
  std::size_t workloads = 0;
  std::uint64_t input_seed = 0;
};

struct ke_evaluation {
  static constexpr Tag kTag = Tag::evaluation;
  static constexpr const char* kName = "ke_evaluation";
  Tag tag = kTag;
  ke::Evaluation evaluation;
  std::vector<bool> timed;
  bool status_set = false;
};

struct ke_result {
  static constexpr Tag kTag = Tag::result;
  static constexpr const char* kName = "ke_result";
  Tag tag = kTag;
  bool is_check = false;
  ke::Spec spec;
  ke::SearchGraph graph;
  ke::RunResult run;
  std::int64_t run_id = 1;
  ke_device_info device;
  std::vector<std::unique_ptr<ke_node>> nodes;  // one view per graph node, made once
  mutable std::mutex mutex;                     // guards the caches below for concurrent const calls
  mutable std::map<ke::NodeId, std::vector<std::int64_t>> lineages, children;
  mutable std::optional<std::string> json, text;
};

struct ke_evolver {
  static constexpr Tag kTag = Tag::evolver;
  static constexpr const char* kName = "ke_evolver";
  Tag tag = kTag;
  ke::Spec spec;
  std::string device = "cpu";
  std::uint64_t seed = 1;
  int jobs = 1;
  bool in_process = false;
  double timeout_s = 0;
  std::string worker_path;
  std::optional<std::string> timing_lock;
  int trials = 5;
  int max_consecutive_mutator_failures = 64;
  int confirm_rounds = 3;

  MutatorRecipe mutator{"param", std::make_shared<ke::ParamMutator>(), {}};
  std::string policy = ke::default_policy_name();
  ke::PolicyOptions policy_options;
  std::shared_ptr<ke::Store> store;
  bool reuse = false;
  std::shared_ptr<ke::StopRule> stop = ke::max_evaluations(64);
  ke_progress_fn progress = nullptr;
  void* progress_data = nullptr;
  ke_evaluate_fn evaluate = nullptr;
  void* evaluate_data = nullptr;
  std::string evaluate_device;

  std::atomic<bool> running{false};
  std::int64_t runs = 0;
  // The last run or check, kept so that ke_evolver_result can report it, aborted or not.
  std::unique_ptr<ke_result> last;
};

namespace {

template <class T>
T* need(T* handle, const char* name) {
  if (!handle) fail(KE_ERROR_INVALID_ARGUMENT, std::string("'") + name + "' is NULL");
  if (handle->tag != T::kTag) {
    fail(KE_ERROR_INVALID_ARGUMENT, std::string("'") + name + "' is not a live " + T::kName +
                                        " (destroyed, or a handle of another kind)");
  }
  return handle;
}

template <class T>
ke_status destroy(const char* function, T* handle) noexcept {
  if (!handle) return KE_OK;
  return guard(function, [&] {
    need(handle, "handle");
    handle->tag = Tag::dead;
    delete handle;
  });
}

// Hands a freshly built handle to the caller: the out-parameter is written last, once nothing can fail.
template <class T>
void give(T** out, std::unique_ptr<T> handle) {
  *out = handle.release();
}

// A node view for the length of a callback; its tag is cleared when the callback returns, so a pointer
// kept past it is refused rather than read.
struct ScopedNode {
  ke_node view;
  explicit ScopedNode(const ke::Node& node) { view.node = &node; }
  ~ScopedNode() { view.tag = Tag::dead; }
};

std::unique_ptr<ke_result> make_result(const ke::Spec& spec, const ke::SearchGraph& graph, const ke::RunResult& run,
                                       const ke::DeviceInfo& device, std::int64_t run_id, bool is_check) {
  auto r = std::make_unique<ke_result>();
  r->spec = spec;
  r->graph = graph;
  r->run = run;
  r->run_id = run_id;
  r->device.info = device;
  r->is_check = is_check;
  r->nodes.reserve(r->graph.size());
  for (const ke::Node& n : r->graph.nodes()) {
    auto view = std::make_unique<ke_node>();
    view->node = &n;
    r->nodes.push_back(std::move(view));
  }
  return r;
}

// The RunResult of a run that did not return one (a callback aborted it), rebuilt from its graph.
ke::RunResult rebuild_run(const ke::SearchGraph& graph, double elapsed_s, std::string reason) {
  ke::RunResult run;
  run.seed = graph.size() > 0 ? 0 : -1;
  run.best = graph.best();
  run.stop_reason = std::move(reason);
  run.state.elapsed_s = elapsed_s;
  for (const ke::Node& n : graph.nodes()) {
    if (n.evaluation.status != ke::Status::pending) run.state.evaluations += 1;
    run.state.best_speedup = std::max(run.state.best_speedup, n.speedup);
    run.state.tokens += n.tokens;
  }
  return run;
}

// ---------------------------------------------------------------------------------------------------
// C callbacks behind the C++ interfaces.

class TokenBudget final : public ke::StopRule {
 public:
  explicit TokenBudget(std::int64_t tokens) : tokens_(tokens) {}
  std::optional<std::string> should_stop(const ke::SearchState& state) override {
    if (state.tokens >= tokens_) return "spent the budget of " + std::to_string(tokens_) + " tokens";
    return std::nullopt;
  }

 private:
  std::int64_t tokens_;
};

class CallbackMutator final : public ke::Mutator {
 public:
  CallbackMutator(std::string name, ke_mutate_fn fn, void* user_data)
      : name_(std::move(name)), fn_(fn), user_data_(user_data) {}
  std::string name() const override { return name_; }

  ke::Mutation mutate(const ke::MutationContext& context) override {
    ke_mutation m;
    m.context = &context;
    m.parents.resize(context.parents.size());
    for (std::size_t i = 0; i < context.parents.size(); ++i) m.parents[i].node = &context.graph.node(context.parents[i]);
    if (!context.parents.empty()) m.child = context.graph.node(context.parents.front()).candidate;
    const int rc = fn_(&m, user_data_);
    m.tag = Tag::dead;
    for (ke_node& p : m.parents) p.tag = Tag::dead;
    for (auto& [id, view] : m.nodes) view->tag = Tag::dead;
    if (rc != 0) throw Aborted{"the mutator '" + name_ + "' returned " + std::to_string(rc) + ": the run is aborted"};
    ke::Mutation out;
    out.prompt = std::move(m.prompt);
    out.answer = std::move(m.answer);
    out.tokens = m.tokens;
    if (m.exhausted) {
      out.exhausted = true;
      out.error = m.error.empty() ? "the mutator '" + name_ + "' has nothing new to offer" : m.error;
    } else if (m.failed) {
      out.error = m.error;
    } else {
      out.child = std::move(m.child);
      out.note = m.note.empty() ? "made by the mutator '" + name_ + "'" : m.note;
    }
    return out;
  }

 private:
  std::string name_;
  ke_mutate_fn fn_;
  void* user_data_;
};

class CallbackEvaluator final : public ke::FitnessEvaluator {
 public:
  CallbackEvaluator(std::size_t workloads, std::string device_name, ke_evaluate_fn fn, void* user_data)
      : workloads_(workloads), fn_(fn), user_data_(user_data) {
    info_.id = "custom";
    info_.kind = "custom";
    info_.name = std::move(device_name);
  }

  ke::Evaluation evaluate(const ke::Candidate& candidate, std::uint64_t input_seed) override {
    ke_candidate c;
    c.candidate = &candidate;
    c.workloads = workloads_;
    c.input_seed = input_seed;
    ke_evaluation e;
    e.timed.assign(workloads_, false);
    e.evaluation.status = ke::Status::crashed;
    const int rc = fn_(&c, &e, user_data_);
    c.tag = Tag::dead;
    e.tag = Tag::dead;
    if (rc != 0) throw Aborted{"the fitness callback returned " + std::to_string(rc) + ": the run is aborted"};
    ke::Evaluation out = std::move(e.evaluation);
    if (!e.status_set) {
      out = ke::Evaluation{};
      out.status = ke::Status::crashed;
      out.message = "the fitness callback set no status";
    } else if (out.status == ke::Status::ok) {
      for (std::size_t w = 0; w < workloads_; ++w) {
        if (!e.timed[w]) {
          out.status = ke::Status::invalid;
          out.message = "the fitness callback said ok without a time for workload " + std::to_string(w);
          out.timings.clear();
          break;
        }
      }
    } else {
      out.timings.clear();  // only an ok candidate has times
    }
    return out;
  }

  ke::DeviceInfo device_info() override { return info_; }

 private:
  std::size_t workloads_;
  ke_evaluate_fn fn_;
  void* user_data_;
  ke::DeviceInfo info_;
};

class CallbackObserver final : public ke::Observer {
 public:
  CallbackObserver(ke_progress_fn fn, void* user_data) : fn_(fn), user_data_(user_data) {}

  void on_start(const ke::Spec&, const ke::DeviceInfo&) override {
    ke_progress p = base(KE_PROGRESS_START, ke::SearchState{});
    call(p);
  }
  void on_node(const ke::Node& node, const ke::SearchState& state) override {
    state_ = state;
    ScopedNode view(node);
    ke_progress p = base(KE_PROGRESS_NODE, state);
    p.node = &view.view;
    call(p);
  }
  void on_mutator_failure(const ke::Mutation& m, const std::vector<ke::NodeId>&) override {
    ke_progress p = base(KE_PROGRESS_MUTATOR_FAILURE, state_);
    p.message = m.error.c_str();
    call(p);
  }
  void on_finish(const ke::RunResult& result, const ke::SearchGraph&) override {
    ke_progress p = base(KE_PROGRESS_FINISH, result.state);
    p.message = result.stop_reason.c_str();
    call(p);
  }

 private:
  static ke_progress base(ke_progress_event event, const ke::SearchState& s) {
    ke_progress p;
    p.version = KE_PROGRESS_VERSION;
    p.event = event;
    p.node = nullptr;
    p.evaluations = s.evaluations;
    p.elapsed_s = s.elapsed_s;
    p.best_speedup = s.best_speedup;
    p.evaluations_since_improvement = s.evaluations_since_improvement;
    p.tokens = s.tokens;
    p.message = "";
    return p;
  }
  void call(const ke_progress& p) {
    const int rc = fn_(&p, user_data_);
    if (rc != 0) throw Aborted{"the progress callback returned " + std::to_string(rc) + ": the run is aborted"};
  }

  ke_progress_fn fn_;
  void* user_data_;
  ke::SearchState state_;
};

std::shared_ptr<ke::FitnessEvaluator> make_evaluator(const ke_evolver& ev) {
  if (ev.evaluate) {
    return std::make_shared<CallbackEvaluator>(ev.spec.workloads.size(), ev.evaluate_device, ev.evaluate,
                                               ev.evaluate_data);
  }
  ke::EvalOptions eval;
  eval.trials = ev.trials;
  // One lock file per device, shared by every run on this host (as the command-line tool does).
  eval.timing_lock = ev.timing_lock ? *ev.timing_lock : ke::default_timing_lock(ev.device);
  const bool list = ke::is_device_list(ev.device);
  if (ev.in_process && list) fail(KE_ERROR_INVALID_ARGUMENT, "in_process evaluates on one device, not on '" + ev.device + "'");
  if (ev.in_process) return std::make_shared<ke::LocalEvaluator>(ev.spec, ke::open_device(ev.device), eval);
  ke::WorkerOptions wo;
  wo.jobs = ev.jobs;
  wo.timeout_s = ev.timeout_s;
  wo.worker_path = ev.worker_path;
  wo.eval = eval;
  if (list) {
    // A worker (jobs of them) per device, each device with its own timing lock.
    return std::make_shared<ke::MultiDeviceEvaluator>(ev.spec, ke::expand_device_list(ev.device), wo, ev.jobs);
  }
  return std::make_shared<ke::WorkerEvaluator>(ev.spec, ev.device, wo);
}

// Marks an evolver busy for the length of a run, so that a callback cannot destroy or rerun it.
class RunningFlag {
 public:
  explicit RunningFlag(ke_evolver& ev) : ev_(ev) {
    bool expected = false;
    if (!ev_.running.compare_exchange_strong(expected, true)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "a run of this evolver is in progress");
    }
  }
  ~RunningFlag() { ev_.running = false; }

 private:
  ke_evolver& ev_;
};

std::string times_json(const ke::Evaluation& e) {
  std::string out = "[";
  for (std::size_t i = 0; i < e.timings.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", e.timings[i].median_us);
    out += std::string(i ? ", " : "") + buf;
  }
  return out + "]";
}

// The JSON of `kernelevolve check --json`: the seed's and the reference's evaluations.
std::string check_report_json(const ke_result& r) {
  const ke::Node& seed = r.graph.node(0);
  const bool has_reference = r.graph.size() > 1;
  const ke::Evaluation reference = has_reference ? r.graph.node(1).evaluation : ke::Evaluation{};
  return "{\"spec\": " + ke::json_quote(r.spec.name) + ", \"device\": " +
         ke::json_quote(r.device.info.id + " " + r.device.info.name) + ", \"seed\": {\"status\": " +
         ke::json_quote(ke::to_string(seed.evaluation.status)) + ", \"message\": " +
         ke::json_quote(seed.evaluation.message) + ", \"time_us\": " + times_json(seed.evaluation) +
         "}, \"reference\": {\"status\": " + ke::json_quote(ke::to_string(reference.status)) +
         ", \"time_us\": " + times_json(reference) + "}}";
}

std::string check_report_text(const ke_result& r) {
  const ke::Evaluation& seed = r.graph.node(0).evaluation;
  const ke::Evaluation reference = r.graph.size() > 1 ? r.graph.node(1).evaluation : ke::Evaluation{};
  std::string out = r.spec.name + " on " + r.device.info.id + " (" + r.device.info.name + ")\n";
  for (std::size_t w = 0; w < r.spec.workloads.size(); ++w) {
    std::string name;
    for (const auto& [k, v] : r.spec.workloads[w]) name += (name.empty() ? "" : " ") + k + "=" + std::to_string(v);
    char line[160];
    std::snprintf(line, sizeof line, "  %-28s seed %10.1f us   reference %10.1f us\n", name.c_str(),
                  seed.status == ke::Status::ok ? seed.timings[w].median_us : NAN,
                  reference.status == ke::Status::ok ? reference.timings[w].median_us : NAN);
    out += line;
  }
  out += std::string("  seed: ") + ke::to_string(seed.status) + (seed.message.empty() ? "" : ": ") + seed.message + "\n";
  if (seed.status == ke::Status::compile_error) out += seed.compile_log + "\n";
  if (reference.status != ke::Status::ok && reference.status != ke::Status::pending) {
    out += std::string("  reference against itself: ") + ke::to_string(reference.status) + ": " + reference.message +
           "\n";
  }
  return out;
}

const ke::Node& node_of(const ke_node* node) { return *need(node, "node")->node; }

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Status, errors, version. The definitions take their C linkage from the declarations in the header.

KE_API const char* ke_last_error(void) { return t_last_error.c_str(); }

KE_API ke_status ke_status_name(const char** out, ke_status status) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const char* name = nullptr;
    switch (status) {
      case KE_OK: name = "ok"; break;
      case KE_ERROR_INVALID_ARGUMENT: name = "invalid_argument"; break;
      case KE_ERROR_BAD_SPEC: name = "bad_spec"; break;
      case KE_ERROR_DEVICE_UNAVAILABLE: name = "device_unavailable"; break;
      case KE_ERROR_NOT_FOUND: name = "not_found"; break;
      case KE_ERROR_ABORTED: name = "aborted"; break;
      case KE_ERROR_OUT_OF_MEMORY: name = "out_of_memory"; break;
      case KE_ERROR_INTERNAL: name = "internal"; break;
      case KE_STATUS_MAX_ENUM: break;
    }
    if (!name) fail(KE_ERROR_INVALID_ARGUMENT, "'status' is not a ke_status (" + std::to_string(status) + ")");
    *out = name;
  });
}

KE_API ke_status ke_version(int* major, int* minor, int* patch) {
  return guard(__func__, [&] {
    if (major) *major = KE_VERSION_MAJOR;
    if (minor) *minor = KE_VERSION_MINOR;
    if (patch) *patch = KE_VERSION_PATCH;
  });
}

// ---------------------------------------------------------------------------------------------------
// Spec

KE_API ke_status ke_spec_load(ke_spec** out, const char* path) {
  return guard(__func__, [&] {
    need_out(out, "out");
    auto s = std::make_unique<ke_spec>();
    s->spec = ke::load_spec(need_nonempty(path, "path"));
    give(out, std::move(s));
  });
}

KE_API ke_status ke_spec_parse(ke_spec** out, const char* json, const char* path) {
  return guard(__func__, [&] {
    need_out(out, "out");
    auto s = std::make_unique<ke_spec>();
    s->spec = ke::parse_spec(need_string(json, "json"), path ? path : "");
    give(out, std::move(s));
  });
}

KE_API ke_status ke_spec_create(ke_spec** out, const char* name, const char* language, const char* entry) {
  return guard(__func__, [&] {
    need_out(out, "out");
    auto s = std::make_unique<ke_spec>();
    s->spec.name = need_nonempty(name, "name");
    const std::string lang = need_string(language, "language");
    const auto parsed = ke::parse_language(lang);
    if (!parsed) fail(KE_ERROR_BAD_SPEC, "language '" + lang + "' is not one of c, cpp, cuda, hip");
    s->spec.language = *parsed;
    s->spec.entry = need_nonempty(entry, "entry");
    give(out, std::move(s));
  });
}

KE_API ke_status ke_spec_destroy(ke_spec* spec) { return destroy(__func__, spec); }

namespace {

ke::DType need_dtype(const char* dtype) {
  const std::string text = need_string(dtype, "dtype");
  const auto parsed = ke::parse_dtype(text);
  if (!parsed) fail(KE_ERROR_BAD_SPEC, "dtype '" + text + "' is not one of f16, bf16, f32, f64, i8, u8, i32, i64");
  return *parsed;
}

void add_param(ke_spec* spec, ke::Param param) {
  for (const ke::Param& p : spec->spec.params) {
    if (p.name == param.name) fail(KE_ERROR_BAD_SPEC, "params: '" + param.name + "' is already a param");
  }
  spec->spec.params.push_back(std::move(param));
  spec->changed();
}

}  // namespace

KE_API ke_status ke_spec_add_buffer(ke_spec* spec, const char* name, const char* dtype, const char* role,
                                    const char* const* shape, size_t rank) {
  return guard(__func__, [&] {
    need(spec, "spec");
    ke::Param p;
    p.name = need_nonempty(name, "name");
    p.dtype = need_dtype(dtype);
    const std::string role_text = need_string(role, "role");
    const auto parsed = ke::parse_role(role_text);
    if (!parsed || !(*parsed == ke::Role::in || *parsed == ke::Role::out || *parsed == ke::Role::inout)) {
      fail(KE_ERROR_BAD_SPEC, "params: '" + p.name + "': a buffer's role is in, out or inout, not '" + role_text + "'");
    }
    p.role = *parsed;
    need_array(shape, rank, "shape");
    if (rank == 0) fail(KE_ERROR_BAD_SPEC, "params: '" + p.name + "': a buffer needs a shape of at least one dimension");
    for (std::size_t i = 0; i < rank; ++i) p.shape.push_back(need_nonempty(shape[i], "shape[i]"));
    add_param(spec, std::move(p));
  });
}

KE_API ke_status ke_spec_add_size(ke_spec* spec, const char* name, const char* dtype) {
  return guard(__func__, [&] {
    need(spec, "spec");
    ke::Param p;
    p.name = need_nonempty(name, "name");
    p.dtype = need_dtype(dtype);
    p.role = ke::Role::size;
    add_param(spec, std::move(p));
  });
}

KE_API ke_status ke_spec_add_scalar(ke_spec* spec, const char* name, const char* dtype, double value) {
  return guard(__func__, [&] {
    need(spec, "spec");
    ke::Param p;
    p.name = need_nonempty(name, "name");
    p.dtype = need_dtype(dtype);
    p.role = ke::Role::scalar;
    need_finite(value, "value");
    p.value = value;
    add_param(spec, std::move(p));
  });
}

KE_API ke_status ke_spec_add_workload(ke_spec* spec, const char* const* names, const int64_t* values, size_t count) {
  return guard(__func__, [&] {
    need(spec, "spec");
    need_array(names, count, "names");
    need_array(values, count, "values");
    ke::Bindings workload;
    for (std::size_t i = 0; i < count; ++i) {
      const std::string name = need_nonempty(names[i], "names[i]");
      if (!workload.emplace(name, values[i]).second) {
        fail(KE_ERROR_BAD_SPEC, "workloads[" + std::to_string(spec->spec.workloads.size()) + "]: '" + name +
                                    "' is given twice");
      }
    }
    spec->spec.workloads.push_back(std::move(workload));
    spec->changed();
  });
}

KE_API ke_status ke_spec_set_input(ke_spec* spec, const char* buffer, const char* distribution, double a, double b) {
  return guard(__func__, [&] {
    need(spec, "spec");
    const std::string name = need_nonempty(buffer, "buffer");
    const std::string dist = need_string(distribution, "distribution");
    ke::InputDist d;
    if (dist == "uniform") {
      d.kind = ke::InputDist::Kind::uniform;
    } else if (dist == "normal") {
      d.kind = ke::InputDist::Kind::normal;
    } else if (dist == "laplace") {
      d.kind = ke::InputDist::Kind::laplace;
    } else {
      fail(KE_ERROR_BAD_SPEC, "inputs." + name + ": distribution '" + dist + "' is not one of uniform, normal, laplace");
    }
    need_finite(a, "a");
    need_finite(b, "b");
    d.a = a;
    d.b = b;
    spec->spec.inputs[name] = d;
    spec->changed();
  });
}

KE_API ke_status ke_spec_set_tolerance(ke_spec* spec, double atol, double rtol) {
  return guard(__func__, [&] {
    need(spec, "spec");
    need_finite(atol, "atol");
    need_finite(rtol, "rtol");
    if (atol < 0 || rtol < 0) fail(KE_ERROR_BAD_SPEC, "tolerance: atol and rtol must not be negative");
    spec->spec.tolerance = ke::Tolerance{atol, rtol};
    spec->changed();
  });
}

namespace {

ke::SourceRef& source_of(ke_spec* spec, ke_source_kind kind) {
  switch (kind) {
    case KE_SOURCE_REFERENCE: return spec->spec.reference;
    case KE_SOURCE_SEED: return spec->spec.seed;
    case KE_SOURCE_MAX_ENUM: break;
  }
  fail(KE_ERROR_INVALID_ARGUMENT, "'kind' is not a ke_source_kind (" + std::to_string(static_cast<int>(kind)) + ")");
}

void set_source(ke_spec* spec, ke_source_kind kind, std::string text, std::string file, const char* language,
                const char* device) {
  ke::SourceRef& target = source_of(spec, kind);
  ke::SourceRef ref;
  ref.source = std::move(text);
  ref.file = std::move(file);
  if (language) {
    const auto parsed = ke::parse_language(language);
    if (!parsed) fail(KE_ERROR_BAD_SPEC, std::string("language '") + language + "' is not one of c, cpp, cuda, hip");
    ref.language = *parsed;
  }
  if (device) ref.device = need_nonempty(device, "device");
  target = std::move(ref);
  spec->changed();
}

}  // namespace

KE_API ke_status ke_spec_set_source(ke_spec* spec, ke_source_kind kind, const char* source, const char* language,
                                    const char* device) {
  return guard(__func__, [&] {
    need(spec, "spec");
    set_source(spec, kind, need_string(source, "source"), "", language, device);
  });
}

KE_API ke_status ke_spec_set_source_file(ke_spec* spec, ke_source_kind kind, const char* path, const char* language,
                                         const char* device) {
  return guard(__func__, [&] {
    need(spec, "spec");
    source_of(spec, kind);  // the kind is checked before the file is read
    const std::string file = need_nonempty(path, "path");
    set_source(spec, kind, read_file(file), file, language, device);
  });
}

KE_API ke_status ke_spec_add_tunable(ke_spec* spec, const char* name, const int64_t* values, size_t count) {
  return guard(__func__, [&] {
    need(spec, "spec");
    const std::string tunable = need_nonempty(name, "name");
    need_array(values, count, "values");
    if (count == 0) fail(KE_ERROR_BAD_SPEC, "tunables." + tunable + ": needs at least one value");
    if (spec->spec.tunables.count(tunable)) fail(KE_ERROR_BAD_SPEC, "tunables." + tunable + ": is already defined");
    spec->spec.tunables[tunable] = std::vector<std::int64_t>(values, values + count);
    spec->changed();
  });
}

KE_API ke_status ke_spec_add_constraint(ke_spec* spec, const char* expression) {
  return guard(__func__, [&] {
    need(spec, "spec");
    const std::string where = "constraints[" + std::to_string(spec->spec.constraints.size()) + "]";
    spec->spec.constraints.push_back(ke::Expr::parse(need_nonempty(expression, "expression"), where));
    spec->changed();
  });
}

KE_API ke_status ke_spec_set_launch(ke_spec* spec, const char* const grid[3], const char* const block[3],
                                    const char* shared_bytes) {
  return guard(__func__, [&] {
    need(spec, "spec");
    need_array(grid, 3, "grid");
    need_array(block, 3, "block");
    ke::LaunchRule rule;
    for (int i = 0; i < 3; ++i) {
      const std::string index = "[" + std::to_string(i) + "]";
      rule.grid[i] = ke::Expr::parse(need_nonempty(grid[i], "grid[i]"), "launch.grid" + index);
      rule.block[i] = ke::Expr::parse(need_nonempty(block[i], "block[i]"), "launch.block" + index);
    }
    rule.shared_bytes = ke::Expr::parse(shared_bytes ? shared_bytes : "0", "launch.shared_bytes");
    spec->spec.launch = std::move(rule);
    spec->changed();
  });
}

KE_API ke_status ke_spec_set_cost(ke_spec* spec, const char* flops, const char* bytes) {
  return guard(__func__, [&] {
    need(spec, "spec");
    std::optional<ke::Expr> f, b;
    if (flops) f = ke::Expr::parse(flops, "cost.flops");
    if (bytes) b = ke::Expr::parse(bytes, "cost.bytes");
    spec->spec.cost_flops = std::move(f);
    spec->spec.cost_bytes = std::move(b);
    spec->changed();
  });
}

KE_API ke_status ke_spec_set_notes(ke_spec* spec, const char* notes) {
  return guard(__func__, [&] {
    need(spec, "spec");
    spec->spec.notes = need_string(notes, "notes");
    spec->changed();
  });
}

KE_API ke_status ke_spec_validate(const ke_spec* spec) {
  return guard(__func__, [&] { need(spec, "spec")->spec.validate(); });
}

KE_API ke_status ke_spec_name(const char** out, const ke_spec* spec) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(spec, "spec")->spec.name.c_str();
  });
}

KE_API ke_status ke_spec_workload_count(size_t* out, const ke_spec* spec) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(spec, "spec")->spec.workloads.size();
  });
}

KE_API ke_status ke_spec_to_json(const char** out, const ke_spec* spec) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(spec, "spec");
    std::lock_guard lock(spec->mutex);
    if (!spec->json) spec->json = ke::to_json(spec->spec);
    *out = spec->json->c_str();
  });
}

// ---------------------------------------------------------------------------------------------------
// Devices

KE_API ke_status ke_device_list_create(ke_device_list** out) {
  return guard(__func__, [&] {
    need_out(out, "out");
    auto list = std::make_unique<ke_device_list>();
    for (ke::DeviceInfo& info : ke::list_devices()) {
      auto view = std::make_unique<ke_device_info>();
      view->info = std::move(info);
      list->devices.push_back(std::move(view));
    }
    give(out, std::move(list));
  });
}

KE_API ke_status ke_device_list_destroy(ke_device_list* list) {
  if (list && list->tag == Tag::device_list) {
    for (auto& d : list->devices) d->tag = Tag::dead;
  }
  return destroy(__func__, list);
}

KE_API ke_status ke_device_list_count(size_t* out, const ke_device_list* list) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(list, "list")->devices.size();
  });
}

KE_API ke_status ke_device_list_get(const ke_device_info** out, const ke_device_list* list, size_t index) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(list, "list");
    if (index >= list->devices.size()) {
      fail(KE_ERROR_NOT_FOUND, "device index " + std::to_string(index) + " is out of range (there are " +
                                   std::to_string(list->devices.size()) + ")");
    }
    *out = list->devices[index].get();
  });
}

namespace {

template <class T, class F>
ke_status device_field(const char* function, T* out, const ke_device_info* info, F field) {
  return guard(function, [&] {
    need_out(out, "out");
    *out = field(need(info, "info")->info);
  });
}

}  // namespace

KE_API ke_status ke_device_info_id(const char** out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.id.c_str(); });
}
KE_API ke_status ke_device_info_kind(const char** out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.kind.c_str(); });
}
KE_API ke_status ke_device_info_name(const char** out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.name.c_str(); });
}
KE_API ke_status ke_device_info_compute_units(int* out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.compute_units; });
}
KE_API ke_status ke_device_info_vector_bits(int* out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.vector_bits; });
}
KE_API ke_status ke_device_info_peak_bytes_per_s(double* out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.peak_bytes_per_s; });
}
KE_API ke_status ke_device_info_peak_flops_per_s(double* out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.peak_flops_per_s; });
}
KE_API ke_status ke_device_info_property_count(size_t* out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.properties.size(); });
}

KE_API ke_status ke_device_info_property(const char** key, const char** value, const ke_device_info* info,
                                         size_t index) {
  return guard(__func__, [&] {
    need_out(key, "key");
    need_out(value, "value");
    const auto it = nth(need(info, "info")->info.properties, index, "property");
    *key = it->first.c_str();
    *value = it->second.c_str();
  });
}

// ---------------------------------------------------------------------------------------------------
// Nodes

KE_API ke_status ke_eval_status_name(const char** out, ke_eval_status status) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = ke::to_string(need_status(status, "status"));
  });
}

namespace {

template <class T, class F>
ke_status node_field(const char* function, T* out, const ke_node* node, F field) {
  return guard(function, [&] {
    need_out(out, "out");
    *out = field(node_of(node));
  });
}

}  // namespace

KE_API ke_status ke_node_id(int64_t* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return std::int64_t{n.id}; });
}
KE_API ke_status ke_node_status(ke_eval_status* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return to_c(n.evaluation.status); });
}
KE_API ke_status ke_node_message(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.evaluation.message.c_str(); });
}
KE_API ke_status ke_node_source(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.candidate.source.c_str(); });
}
KE_API ke_status ke_node_language(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return ke::to_string(n.candidate.language); });
}
KE_API ke_status ke_node_mutator(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.mutator.c_str(); });
}
KE_API ke_status ke_node_note(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.note.c_str(); });
}
KE_API ke_status ke_node_compile_log(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.evaluation.compile_log.c_str(); });
}
KE_API ke_status ke_node_speedup(double* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.speedup; });
}
KE_API ke_status ke_node_created_s(double* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.created_s; });
}
KE_API ke_status ke_node_parent_count(size_t* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.parents.size(); });
}

KE_API ke_status ke_node_parent(int64_t* out, const ke_node* node, size_t index) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const ke::Node& n = node_of(node);
    if (index >= n.parents.size()) {
      fail(KE_ERROR_NOT_FOUND, "parent index " + std::to_string(index) + " is out of range (node " +
                                   std::to_string(n.id) + " has " + std::to_string(n.parents.size()) + ")");
    }
    *out = n.parents[index];
  });
}

KE_API ke_status ke_node_tunable_count(size_t* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.candidate.tunables.size(); });
}

KE_API ke_status ke_node_tunable(const char** name, int64_t* value, const ke_node* node, size_t index) {
  return guard(__func__, [&] {
    need_out(name, "name");
    need_out(value, "value");
    const auto it = nth(node_of(node).candidate.tunables, index, "tunable");
    *name = it->first.c_str();
    *value = it->second;
  });
}

KE_API ke_status ke_node_tunable_value(int64_t* out, const ke_node* node, const char* name) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const std::string key = need_string(name, "name");
    const ke::Node& n = node_of(node);
    const auto it = n.candidate.tunables.find(key);
    if (it == n.candidate.tunables.end()) {
      fail(KE_ERROR_NOT_FOUND, "node " + std::to_string(n.id) + " has no tunable '" + key + "'");
    }
    *out = it->second;
  });
}

KE_API ke_status ke_node_timing_count(size_t* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.evaluation.timings.size(); });
}

KE_API ke_status ke_node_timing(ke_timing* out, const ke_node* node, size_t workload) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need_version(out->version, KE_TIMING_VERSION, "ke_timing");
    const ke::Node& n = node_of(node);
    if (workload >= n.evaluation.timings.size()) {
      fail(KE_ERROR_NOT_FOUND, "node " + std::to_string(n.id) + " has no timing for workload " +
                                   std::to_string(workload) + " (it has " +
                                   std::to_string(n.evaluation.timings.size()) + ")");
    }
    const ke::WorkloadTiming& t = n.evaluation.timings[workload];
    out->median_us = t.median_us;
    out->min_us = t.min_us;
    out->max_us = t.max_us;
    out->mad_us = t.mad_us;
    out->samples = t.samples;
  });
}

KE_API ke_status ke_node_mismatch(ke_mismatch* out, const ke_node* node) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need_version(out->version, KE_MISMATCH_VERSION, "ke_mismatch");
    const ke::Node& n = node_of(node);
    if (!n.evaluation.worst) fail(KE_ERROR_NOT_FOUND, "node " + std::to_string(n.id) + " has no recorded mismatch");
    const ke::Mismatch& m = *n.evaluation.worst;
    out->buffer = m.buffer.c_str();
    out->workload = m.workload;
    out->trial = m.trial;
    out->index = m.index;
    out->got = m.got;
    out->expected = m.expected;
    out->excess = m.excess;
  });
}

KE_API ke_status ke_node_prompt(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.prompt.c_str(); });
}
KE_API ke_status ke_node_answer(const char** out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return n.answer.c_str(); });
}
KE_API ke_status ke_node_tokens(int64_t* out, const ke_node* node) {
  return node_field(__func__, out, node, [](const ke::Node& n) { return std::int64_t{n.tokens}; });
}

// ---------------------------------------------------------------------------------------------------
// Stop rules

namespace {

ke_status make_rule(const char* function, ke_stop_rule** out, const std::function<std::shared_ptr<ke::StopRule>()>& make) {
  return guard(function, [&] {
    need_out(out, "out");
    auto rule = std::make_unique<ke_stop_rule>();
    rule->rule = make();
    give(out, std::move(rule));
  });
}

std::vector<std::shared_ptr<ke::StopRule>> rules_of(const ke_stop_rule* const* rules, std::size_t count) {
  need_array(rules, count, "rules");
  if (count == 0) fail(KE_ERROR_INVALID_ARGUMENT, "'count' is 0: a composite needs at least one rule");
  std::vector<std::shared_ptr<ke::StopRule>> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(need(rules[i], "rules[i]")->rule);
  return out;
}

}  // namespace

KE_API ke_status ke_stop_rule_max_evaluations(ke_stop_rule** out, int64_t evaluations) {
  return make_rule(__func__, out, [&] {
    if (evaluations < 1) fail(KE_ERROR_INVALID_ARGUMENT, "'evaluations' must be at least 1");
    return ke::max_evaluations(evaluations);
  });
}

KE_API ke_status ke_stop_rule_max_time(ke_stop_rule** out, double seconds) {
  return make_rule(__func__, out, [&] {
    if (!(seconds > 0) || !std::isfinite(seconds)) fail(KE_ERROR_INVALID_ARGUMENT, "'seconds' must be positive");
    return ke::max_time(seconds);
  });
}

KE_API ke_status ke_stop_rule_target_speedup(ke_stop_rule** out, double speedup) {
  return make_rule(__func__, out, [&] {
    if (!(speedup > 0) || !std::isfinite(speedup)) fail(KE_ERROR_INVALID_ARGUMENT, "'speedup' must be positive");
    return ke::target_speedup(speedup);
  });
}

KE_API ke_status ke_stop_rule_plateau(ke_stop_rule** out, int64_t evaluations) {
  return make_rule(__func__, out, [&] {
    if (evaluations < 1) fail(KE_ERROR_INVALID_ARGUMENT, "'evaluations' must be at least 1");
    return ke::plateau(evaluations);
  });
}

KE_API ke_status ke_stop_rule_max_tokens(ke_stop_rule** out, int64_t tokens) {
  return make_rule(__func__, out, [&]() -> std::shared_ptr<ke::StopRule> {
    if (tokens < 1) fail(KE_ERROR_INVALID_ARGUMENT, "'tokens' must be at least 1");
    return std::make_shared<TokenBudget>(tokens);
  });
}

KE_API ke_status ke_stop_rule_any(ke_stop_rule** out, const ke_stop_rule* const* rules, size_t count) {
  return make_rule(__func__, out, [&] { return ke::any_of(rules_of(rules, count)); });
}

KE_API ke_status ke_stop_rule_all(ke_stop_rule** out, const ke_stop_rule* const* rules, size_t count) {
  return make_rule(__func__, out, [&] { return ke::all_of(rules_of(rules, count)); });
}

KE_API ke_status ke_stop_rule_destroy(ke_stop_rule* rule) { return destroy(__func__, rule); }

// ---------------------------------------------------------------------------------------------------
// Mutators

KE_API ke_status ke_param_mutator_options_init(ke_param_mutator_options* options, unsigned int version) {
  return guard(__func__, [&] {
    need_out(options, "options");
    need_version(version, KE_PARAM_MUTATOR_OPTIONS_VERSION, "ke_param_mutator_options");
    const ke_param_mutator_options defaults = KE_PARAM_MUTATOR_OPTIONS_INIT;
    *options = defaults;
    options->version = version;
  });
}

KE_API ke_status ke_mutator_param_create(ke_mutator** out, const ke_param_mutator_options* options) {
  return guard(__func__, [&] {
    need_out(out, "out");
    ke_param_mutator_options o = KE_PARAM_MUTATOR_OPTIONS_INIT;
    if (options) {
      need_version(options->version, KE_PARAM_MUTATOR_OPTIONS_VERSION, "ke_param_mutator_options");
      o.restart_probability = options->restart_probability;
    }
    if (!(o.restart_probability >= 0 && o.restart_probability <= 1)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'restart_probability' must be between 0 and 1");
    }
    auto m = std::make_unique<ke_mutator>();
    m->recipe = {"param", std::make_shared<ke::ParamMutator>(o.restart_probability), {}};
    give(out, std::move(m));
  });
}

KE_API ke_status ke_command_mutator_options_init(ke_command_mutator_options* options, unsigned int version) {
  return guard(__func__, [&] {
    need_out(options, "options");
    need_version(version, KE_COMMAND_MUTATOR_OPTIONS_VERSION, "ke_command_mutator_options");
    const ke_command_mutator_options defaults = KE_COMMAND_MUTATOR_OPTIONS_INIT;
    *options = defaults;
    options->version = version;
  });
}

KE_API ke_status ke_mutator_command_create(ke_mutator** out, const ke_command_mutator_options* options) {
  return guard(__func__, [&] {
    need_out(out, "out");
    if (!options) fail(KE_ERROR_INVALID_ARGUMENT, "'options' is NULL: the command mutator needs a command");
    need_version(options->version, KE_COMMAND_MUTATOR_OPTIONS_VERSION, "ke_command_mutator_options");
    const std::string command = need_nonempty(options->command, "options->command");
    if (!(options->timeout_s > 0) || !std::isfinite(options->timeout_s)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'options->timeout_s' must be positive");
    }
    auto m = std::make_unique<ke_mutator>();
    m->recipe = {"command", std::make_shared<ke::CommandMutator>(command, options->timeout_s), {}};
    give(out, std::move(m));
  });
}

KE_API ke_status ke_mutator_custom_create(ke_mutator** out, const char* name, ke_mutate_fn mutate, void* user_data) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const std::string n = need_nonempty(name, "name");
    if (n == "seed" || n == "reference") fail(KE_ERROR_INVALID_ARGUMENT, "'" + n + "' is a reserved mutator name");
    if (!mutate) fail(KE_ERROR_INVALID_ARGUMENT, "'mutate' is NULL");
    auto m = std::make_unique<ke_mutator>();
    m->recipe = {n, std::make_shared<CallbackMutator>(n, mutate, user_data), {}};
    give(out, std::move(m));
  });
}

KE_API ke_status ke_mutator_destroy(ke_mutator* mutator) { return destroy(__func__, mutator); }

KE_API ke_status ke_llm_mutator_options_init(ke_llm_mutator_options* options, unsigned int version) {
  return guard(__func__, [&] {
    need_out(options, "options");
    need_version(version, KE_LLM_MUTATOR_OPTIONS_VERSION, "ke_llm_mutator_options");
    const ke_llm_mutator_options defaults = KE_LLM_MUTATOR_OPTIONS_INIT;
    *options = defaults;
    options->version = version;
  });
}

#if KE_CAPI_WITH_LLM
namespace {

// The device as a model should see it: what it is and the ceilings its kernels are measured against.
std::string describe_device(const ke::DeviceInfo& d) {
  std::ostringstream out;
  out << d.name << " (" << d.id << "): " << d.compute_units << " compute units, " << d.vector_bits << "-bit vectors";
  if (d.peak_bytes_per_s > 0) out << "; measured copy bandwidth " << d.peak_bytes_per_s / 1e9 << " GB/s";
  if (d.peak_flops_per_s > 0) out << "; peak " << d.peak_flops_per_s / 1e9 << " GFLOP/s";
  for (const auto& [k, v] : d.properties) out << "; " << k << ": " << v;
  return out.str();
}

}  // namespace
#endif

KE_API ke_status ke_mutator_llm_create(ke_mutator** out, const ke_llm_mutator_options* options) {
  return guard(__func__, [&] {
    need_out(out, "out");
#if KE_CAPI_WITH_LLM
    if (!options) fail(KE_ERROR_INVALID_ARGUMENT, "'options' is NULL: the model mutator needs at least a model");
    need_version(options->version, KE_LLM_MUTATOR_OPTIONS_VERSION, "ke_llm_mutator_options");
    ke::LlmOptions o;
    if (options->api) o.api = options->api;
    if (options->base_url) o.base_url = options->base_url;
    o.model = need_nonempty(options->model, "options->model");
    if (options->api_key_env) o.api_key_env = options->api_key_env;
    need_finite(options->temperature, "options->temperature");
    o.temperature = options->temperature;
    if (options->max_tokens < 1) fail(KE_ERROR_INVALID_ARGUMENT, "'options->max_tokens' must be at least 1");
    o.max_tokens = options->max_tokens;
    if (!(options->timeout_s > 0) || !std::isfinite(options->timeout_s)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'options->timeout_s' must be positive");
    }
    o.timeout_s = options->timeout_s;
    if (options->max_retries < 0) fail(KE_ERROR_INVALID_ARGUMENT, "'options->max_retries' must not be negative");
    o.max_retries = options->max_retries;
    o.max_in_flight = options->max_in_flight;
    if (options->memory) o.memory = options->memory;
    need_array(options->knowledge_dirs, options->knowledge_dir_count, "options->knowledge_dirs");
    for (std::size_t i = 0; i < options->knowledge_dir_count; ++i) {
      o.knowledge_dirs.push_back(need_nonempty(options->knowledge_dirs[i], "options->knowledge_dirs[i]"));
    }
    auto m = std::make_unique<ke_mutator>();
    if (options->device_description) {
      o.device_description = options->device_description;
      m->recipe = {"llm", std::make_shared<ke::LlmMutator>(o), {}};
    } else {
      ke::LlmMutator check(o);  // the options are checked now, not at the first run
      m->recipe = {"llm", nullptr, [o](const ke::DeviceInfo& device) {
                     ke::LlmOptions with_device = o;
                     with_device.device_description = describe_device(device);
                     return std::make_shared<ke::LlmMutator>(with_device);
                   }};
    }
    give(out, std::move(m));
#else
    (void)options;
    fail(KE_ERROR_INTERNAL, "this build of the library has no model mutator (it was built without ke_llm)");
#endif
  });
}

KE_API ke_status ke_mutator_mix_create(ke_mutator** out, const ke_mutator* model, const ke_mutator* params,
                                       int param_steps, int model_every) {
  return guard(__func__, [&] {
    need_out(out, "out");
#if KE_CAPI_WITH_LLM
    const MutatorRecipe model_recipe = need(model, "model")->recipe;
    const MutatorRecipe params_recipe = need(params, "params")->recipe;
    if (param_steps < 0 || model_every < 0) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'param_steps' and 'model_every' must not be negative");
    }
    auto m = std::make_unique<ke_mutator>();
    // The mix keeps the state of its alternation, so every run gets a fresh one.
    m->recipe = {"mix", nullptr, [model_recipe, params_recipe, param_steps, model_every](const ke::DeviceInfo& device) {
                   return std::make_shared<ke::MixMutator>(model_recipe.for_run(device), params_recipe.for_run(device),
                                                           param_steps, model_every);
                 }};
    give(out, std::move(m));
#else
    (void)model;
    (void)params;
    (void)param_steps;
    (void)model_every;
    fail(KE_ERROR_INTERNAL, "this build of the library has no model mutator (it was built without ke_llm)");
#endif
  });
}

KE_API ke_status ke_mutation_parent_count(size_t* out, const ke_mutation* mutation) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(mutation, "mutation")->parents.size();
  });
}

KE_API ke_status ke_mutation_parent(const ke_node** out, const ke_mutation* mutation, size_t index) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(mutation, "mutation");
    if (index >= mutation->parents.size()) {
      fail(KE_ERROR_NOT_FOUND, "parent index " + std::to_string(index) + " is out of range (there are " +
                                   std::to_string(mutation->parents.size()) + ")");
    }
    *out = &mutation->parents[index];
  });
}

KE_API ke_status ke_mutation_node_count(size_t* out, const ke_mutation* mutation) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(mutation, "mutation")->context->graph.size();
  });
}

KE_API ke_status ke_mutation_node(const ke_node** out, const ke_mutation* mutation, int64_t id) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(mutation, "mutation");
    const ke::SearchGraph& graph = mutation->context->graph;
    if (id < 0 || static_cast<std::size_t>(id) >= graph.size()) {
      fail(KE_ERROR_NOT_FOUND, "no node " + std::to_string(id) + " (the graph has " + std::to_string(graph.size()) + ")");
    }
    // The views are made on the callback's own thread, so the const_cast races with nothing.
    auto& views = const_cast<ke_mutation*>(mutation)->nodes;
    auto& view = views[id];
    if (!view) {
      view = std::make_unique<ke_node>();
      view->node = &graph.node(id);
    }
    *out = view.get();
  });
}

KE_API ke_status ke_mutation_request_json(const char** out, const ke_mutation* mutation) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(mutation, "mutation");
    auto& request = const_cast<ke_mutation*>(mutation)->request;
    if (!request) request = ke::mutation_request_json(*mutation->context);
    *out = request->c_str();
  });
}

KE_API ke_status ke_mutation_random(uint64_t* out, ke_mutation* mutation) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(mutation, "mutation")->context->rng();
  });
}

KE_API ke_status ke_mutation_set_source(ke_mutation* mutation, const char* source) {
  return guard(__func__, [&] { need(mutation, "mutation")->child.source = need_string(source, "source"); });
}

KE_API ke_status ke_mutation_set_tunable(ke_mutation* mutation, const char* name, int64_t value) {
  return guard(__func__, [&] {
    need(mutation, "mutation");
    const std::string key = need_nonempty(name, "name");
    if (!mutation->context->spec.tunables.count(key)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "the spec has no tunable '" + key + "'");
    }
    mutation->child.tunables[key] = value;
  });
}

KE_API ke_status ke_mutation_set_note(ke_mutation* mutation, const char* note) {
  return guard(__func__, [&] { need(mutation, "mutation")->note = need_string(note, "note"); });
}

KE_API ke_status ke_mutation_set_transcript(ke_mutation* mutation, const char* prompt, const char* answer) {
  return guard(__func__, [&] {
    need(mutation, "mutation");
    mutation->prompt = prompt ? prompt : "";
    mutation->answer = answer ? answer : "";
  });
}

KE_API ke_status ke_mutation_add_tokens(ke_mutation* mutation, int64_t tokens) {
  return guard(__func__, [&] {
    need(mutation, "mutation");
    if (tokens < 0) fail(KE_ERROR_INVALID_ARGUMENT, "'tokens' must not be negative");
    mutation->tokens += tokens;
  });
}

KE_API ke_status ke_mutation_fail(ke_mutation* mutation, const char* error) {
  return guard(__func__, [&] {
    need(mutation, "mutation");
    mutation->error = need_nonempty(error, "error");
    mutation->failed = true;
  });
}

KE_API ke_status ke_mutation_set_exhausted(ke_mutation* mutation, const char* reason) {
  return guard(__func__, [&] {
    need(mutation, "mutation");
    mutation->error = reason ? reason : "";
    mutation->exhausted = true;
  });
}

// ---------------------------------------------------------------------------------------------------
// Custom fitness

KE_API ke_status ke_candidate_source(const char** out, const ke_candidate* candidate) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(candidate, "candidate")->candidate->source.c_str();
  });
}

KE_API ke_status ke_candidate_language(const char** out, const ke_candidate* candidate) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = ke::to_string(need(candidate, "candidate")->candidate->language);
  });
}

KE_API ke_status ke_candidate_tunable_count(size_t* out, const ke_candidate* candidate) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(candidate, "candidate")->candidate->tunables.size();
  });
}

KE_API ke_status ke_candidate_tunable(const char** name, int64_t* value, const ke_candidate* candidate, size_t index) {
  return guard(__func__, [&] {
    need_out(name, "name");
    need_out(value, "value");
    const auto it = nth(need(candidate, "candidate")->candidate->tunables, index, "tunable");
    *name = it->first.c_str();
    *value = it->second;
  });
}

KE_API ke_status ke_candidate_tunable_value(int64_t* out, const ke_candidate* candidate, const char* name) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const std::string key = need_string(name, "name");
    const ke::Bindings& tunables = need(candidate, "candidate")->candidate->tunables;
    const auto it = tunables.find(key);
    if (it == tunables.end()) fail(KE_ERROR_NOT_FOUND, "the candidate has no tunable '" + key + "'");
    *out = it->second;
  });
}

KE_API ke_status ke_candidate_workload_count(size_t* out, const ke_candidate* candidate) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(candidate, "candidate")->workloads;
  });
}

KE_API ke_status ke_candidate_input_seed(uint64_t* out, const ke_candidate* candidate) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(candidate, "candidate")->input_seed;
  });
}

KE_API ke_status ke_evaluation_set_status(ke_evaluation* evaluation, ke_eval_status status) {
  return guard(__func__, [&] {
    need(evaluation, "evaluation");
    const ke::Status s = need_status(status, "status");
    if (s == ke::Status::pending) fail(KE_ERROR_INVALID_ARGUMENT, "an evaluation cannot end pending");
    evaluation->evaluation.status = s;
    evaluation->status_set = true;
  });
}

KE_API ke_status ke_evaluation_set_message(ke_evaluation* evaluation, const char* message) {
  return guard(__func__, [&] { need(evaluation, "evaluation")->evaluation.message = need_string(message, "message"); });
}

KE_API ke_status ke_evaluation_set_compile_log(ke_evaluation* evaluation, const char* log) {
  return guard(__func__, [&] { need(evaluation, "evaluation")->evaluation.compile_log = need_string(log, "log"); });
}

KE_API ke_status ke_evaluation_set_time_us(ke_evaluation* evaluation, size_t workload, double median_us,
                                           double spread_us) {
  return guard(__func__, [&] {
    need(evaluation, "evaluation");
    if (workload >= evaluation->timed.size()) {
      fail(KE_ERROR_INVALID_ARGUMENT, "workload " + std::to_string(workload) + " is out of range (the spec has " +
                                          std::to_string(evaluation->timed.size()) + ")");
    }
    if (!(median_us > 0) || !std::isfinite(median_us)) fail(KE_ERROR_INVALID_ARGUMENT, "'median_us' must be positive");
    if (!(spread_us >= 0) || !std::isfinite(spread_us)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'spread_us' must not be negative");
    }
    auto& timings = evaluation->evaluation.timings;
    timings.resize(evaluation->timed.size());
    timings[workload] = ke::WorkloadTiming{median_us, median_us, median_us, spread_us, 1};
    evaluation->timed[workload] = true;
  });
}

// ---------------------------------------------------------------------------------------------------
// Results

KE_API ke_status ke_result_destroy(ke_result* result) {
  if (result && result->tag == Tag::result) {
    for (auto& n : result->nodes) n->tag = Tag::dead;
    result->device.tag = Tag::dead;
  }
  return destroy(__func__, result);
}

KE_API ke_status ke_result_node_count(size_t* out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(result, "result")->nodes.size();
  });
}

namespace {

const ke_node* node_in(const ke_result* result, std::int64_t id) {
  if (id < 0 || static_cast<std::size_t>(id) >= result->nodes.size()) {
    fail(KE_ERROR_NOT_FOUND, "no node " + std::to_string(id) + " (the result has " +
                                 std::to_string(result->nodes.size()) + ")");
  }
  return result->nodes[static_cast<std::size_t>(id)].get();
}

}  // namespace

KE_API ke_status ke_result_node(const ke_node** out, const ke_result* result, int64_t id) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = node_in(need(result, "result"), id);
  });
}

KE_API ke_status ke_result_seed(const ke_node** out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(result, "result");
    if (result->run.seed < 0) fail(KE_ERROR_NOT_FOUND, "the run has no seed node");
    *out = node_in(result, result->run.seed);
  });
}

KE_API ke_status ke_result_best(const ke_node** out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(result, "result");
    if (!result->run.best) fail(KE_ERROR_NOT_FOUND, "no correct kernel: " + result->run.stop_reason);
    *out = node_in(result, *result->run.best);
  });
}

KE_API ke_status ke_result_lineage(const int64_t** ids, size_t* count, const ke_result* result, int64_t id) {
  return guard(__func__, [&] {
    need_out(ids, "ids");
    need_out(count, "count");
    node_in(need(result, "result"), id);
    std::lock_guard lock(result->mutex);
    auto it = result->lineages.find(id);
    if (it == result->lineages.end()) {
      const auto chain = result->graph.lineage(id);
      it = result->lineages.emplace(id, std::vector<std::int64_t>(chain.begin(), chain.end())).first;
    }
    *ids = it->second.data();
    *count = it->second.size();
  });
}

KE_API ke_status ke_result_children(const int64_t** ids, size_t* count, const ke_result* result, int64_t id) {
  return guard(__func__, [&] {
    need_out(ids, "ids");
    need_out(count, "count");
    node_in(need(result, "result"), id);
    std::lock_guard lock(result->mutex);
    auto it = result->children.find(id);
    if (it == result->children.end()) {
      const auto kids = result->graph.children(id);
      it = result->children.emplace(id, std::vector<std::int64_t>(kids.begin(), kids.end())).first;
    }
    *ids = it->second.data();
    *count = it->second.size();
  });
}

KE_API ke_status ke_result_stop_reason(const char** out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(result, "result")->run.stop_reason.c_str();
  });
}

KE_API ke_status ke_result_evaluations(int64_t* out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(result, "result")->run.state.evaluations;
  });
}

KE_API ke_status ke_result_status_count(int64_t* out, const ke_result* result, ke_eval_status status) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const ke::Status s = need_status(status, "status");
    std::int64_t n = 0;
    for (const ke::Node& node : need(result, "result")->graph.nodes()) n += node.evaluation.status == s ? 1 : 0;
    *out = n;
  });
}

KE_API ke_status ke_result_elapsed_s(double* out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(result, "result")->run.state.elapsed_s;
  });
}

KE_API ke_status ke_result_mutator_failures(int64_t* out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(result, "result")->run.mutator_failures;
  });
}

KE_API ke_status ke_result_tokens(int64_t* out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(result, "result")->run.state.tokens;
  });
}

KE_API ke_status ke_result_confirmation(int* confirmed, double* speedup, double* speedup_low, double* speedup_high,
                                        const ke_result* result) {
  return guard(__func__, [&] {
    const auto& c = need(result, "result")->run.confirmation;
    if (!c) fail(KE_ERROR_NOT_FOUND, "the run confirmed nothing (its best is the seed, or confirmation was off)");
    if (confirmed) *confirmed = c->confirmed ? 1 : 0;
    if (speedup) *speedup = c->speedup;
    if (speedup_low) *speedup_low = c->speedup_low;
    if (speedup_high) *speedup_high = c->speedup_high;
  });
}

KE_API ke_status ke_result_device(const ke_device_info** out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = &need(result, "result")->device;
  });
}

KE_API ke_status ke_result_report_json(const char** out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(result, "result");
    std::lock_guard lock(result->mutex);
    if (!result->json) {
      result->json = result->is_check ? check_report_json(*result)
                                      : ke::run_report_json(result->spec, result->device.info, result->graph,
                                                            result->run, result->run_id);
    }
    *out = result->json->c_str();
  });
}

KE_API ke_status ke_result_report_text(const char** out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(result, "result");
    std::lock_guard lock(result->mutex);
    if (!result->text) {
      result->text = result->is_check
                         ? check_report_text(*result)
                         : ke::run_report_text(result->spec, result->device.info, result->graph, result->run);
    }
    *out = result->text->c_str();
  });
}

// ---------------------------------------------------------------------------------------------------
// Evolver

KE_API ke_status ke_evolver_options_init(ke_evolver_options* options, unsigned int version) {
  return guard(__func__, [&] {
    need_out(options, "options");
    need_version(version, KE_EVOLVER_OPTIONS_VERSION, "ke_evolver_options");
    const ke_evolver_options defaults = KE_EVOLVER_OPTIONS_INIT;
    *options = defaults;
    options->version = version;
  });
}

KE_API ke_status ke_evolver_create(ke_evolver** out, const ke_spec* spec, const ke_evolver_options* options) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(spec, "spec");
    auto ev = std::make_unique<ke_evolver>();
    ev->spec = spec->spec;
    ev->spec.validate();
    if (options) {
      need_version(options->version, KE_EVOLVER_OPTIONS_VERSION, "ke_evolver_options");
      if (options->device) ev->device = need_nonempty(options->device, "options->device");
      ev->seed = options->seed;
      ev->jobs = options->jobs;
      ev->in_process = options->in_process != 0;
      ev->timeout_s = options->timeout_s;
      if (options->worker_path) ev->worker_path = options->worker_path;
      if (options->timing_lock) ev->timing_lock = options->timing_lock;
      ev->trials = options->trials;
      ev->max_consecutive_mutator_failures = options->max_consecutive_mutator_failures;
      if (options->version >= 2) ev->confirm_rounds = options->confirm_rounds;
    }
    if (ev->confirm_rounds < 0) fail(KE_ERROR_INVALID_ARGUMENT, "'options->confirm_rounds' must not be negative");
    if (ev->jobs < 1) fail(KE_ERROR_INVALID_ARGUMENT, "'options->jobs' must be at least 1");
    if (ev->in_process && ev->jobs > 1) {
      fail(KE_ERROR_INVALID_ARGUMENT, "in-process evaluation runs one candidate at a time: 'options->jobs' must be 1");
    }
    if (!(ev->timeout_s >= 0) || !std::isfinite(ev->timeout_s)) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'options->timeout_s' must not be negative");
    }
    if (ev->trials < 1) fail(KE_ERROR_INVALID_ARGUMENT, "'options->trials' must be at least 1");
    if (ev->max_consecutive_mutator_failures < 1) {
      fail(KE_ERROR_INVALID_ARGUMENT, "'options->max_consecutive_mutator_failures' must be at least 1");
    }
    give(out, std::move(ev));
  });
}

KE_API ke_status ke_evolver_destroy(ke_evolver* evolver) {
  if (evolver && evolver->tag == Tag::evolver && evolver->running) {
    return record(KE_ERROR_INVALID_ARGUMENT, __func__, "a run of this evolver is in progress: destroy it after");
  }
  return destroy(__func__, evolver);
}

KE_API ke_status ke_evolver_set_mutator(ke_evolver* evolver, const ke_mutator* mutator) {
  return guard(__func__, [&] {
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    evolver->mutator = need(mutator, "mutator")->recipe;
  });
}

KE_API ke_status ke_evolver_set_stop_rule(ke_evolver* evolver, const ke_stop_rule* rule) {
  return guard(__func__, [&] {
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    evolver->stop = need(rule, "rule")->rule;
  });
}

namespace {

// The options each policy reads; a policy unknown here (a newer one) may take any of them.
const std::map<std::string, std::vector<std::string>>& policy_option_names() {
  static const std::map<std::string, std::vector<std::string>> names = {
      {"greedy", {}},
      {"random", {}},
      {"epsilon-greedy", {"epsilon"}},
      {"tournament", {"tournament_size"}},
      {"ucb", {"exploration"}},
      {"islands", {"islands", "migration_interval", "features", "bins_per_octave"}},
      {"map-elites", {"islands", "migration_interval", "features", "bins_per_octave"}},
  };
  return names;
}

double parse_number(const std::string& option, const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(value)) {
    fail(KE_ERROR_INVALID_ARGUMENT, "policy option '" + option + "': '" + text + "' is not a number");
  }
  return value;
}

int parse_int(const std::string& option, const std::string& text) {
  const double value = parse_number(option, text);
  if (value != std::floor(value) || value < -2147483648.0 || value > 2147483647.0) {
    fail(KE_ERROR_INVALID_ARGUMENT, "policy option '" + option + "': '" + text + "' is not an integer");
  }
  return static_cast<int>(value);
}

void set_policy_option(ke::PolicyOptions& o, const std::string& policy, std::string name, const std::string& value) {
  for (char& ch : name) {
    if (ch == '-') ch = '_';  // the command-line spelling works too
  }
  if (name == "ucb_c") name = "exploration";
  const auto& table = policy_option_names();
  if (const auto it = table.find(policy); it != table.end()) {
    if (std::find(it->second.begin(), it->second.end(), name) == it->second.end()) {
      std::string known;
      for (const auto& n : it->second) known += (known.empty() ? "" : ", ") + n;
      fail(KE_ERROR_INVALID_ARGUMENT, "the policy '" + policy + "' has no option '" + name + "' (it has " +
                                          (known.empty() ? std::string("none") : known) + ")");
    }
  }
  if (name == "epsilon") {
    o.epsilon = parse_number(name, value);
  } else if (name == "tournament_size") {
    o.tournament_size = parse_int(name, value);
  } else if (name == "exploration") {
    o.exploration = parse_number(name, value);
  } else if (name == "islands") {
    o.islands = parse_int(name, value);
  } else if (name == "migration_interval") {
    o.migration_interval = parse_int(name, value);
  } else if (name == "bins_per_octave") {
    o.bins_per_octave = parse_number(name, value);
  } else if (name == "features") {
    o.features.clear();
    std::string item;
    std::istringstream in(value);
    while (std::getline(in, item, ',')) {
      item.erase(0, item.find_first_not_of(" \t"));
      item.erase(item.find_last_not_of(" \t") + 1);
      if (!item.empty()) o.features.push_back(item);
    }
  } else {
    fail(KE_ERROR_INVALID_ARGUMENT, "no policy has an option '" + name + "'");
  }
}

}  // namespace

KE_API ke_status ke_evolver_set_policy(ke_evolver* evolver, const char* name, const char* const* option_names,
                                       const char* const* option_values, size_t count) {
  return guard(__func__, [&] {
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    const std::string policy = need_nonempty(name, "name");
    need_array(option_names, count, "option_names");
    need_array(option_values, count, "option_values");
    ke::PolicyOptions options;
    for (std::size_t i = 0; i < count; ++i) {
      set_policy_option(options, policy, need_nonempty(option_names[i], "option_names[i]"),
                        need_string(option_values[i], "option_values[i]"));
    }
    ke::make_policy(policy, options);  // an unknown name or a bad value fails here, naming the known ones
    evolver->policy = policy;
    evolver->policy_options = std::move(options);
  });
}

KE_API ke_status ke_policy_names(const char* const** names, size_t* count) {
  return guard(__func__, [&] {
    need_out(names, "names");
    need_out(count, "count");
    // Made once, on first use, and kept for the life of the process (the header calls it static).
    static const auto storage = [] {
      auto s = std::make_unique<std::pair<std::vector<std::string>, std::vector<const char*>>>();
      s->first = ke::policy_names();
      for (const std::string& n : s->first) s->second.push_back(n.c_str());
      return s;
    }();
    *names = storage->second.data();
    *count = storage->second.size();
  });
}

KE_API ke_status ke_evolver_set_progress(ke_evolver* evolver, ke_progress_fn progress, void* user_data) {
  return guard(__func__, [&] {
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    evolver->progress = progress;
    evolver->progress_data = progress ? user_data : nullptr;
  });
}

KE_API ke_status ke_evolver_set_evaluator(ke_evolver* evolver, const char* device_name, ke_evaluate_fn evaluate,
                                          void* user_data) {
  return guard(__func__, [&] {
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    if (evaluate) {
      evolver->evaluate_device = need_nonempty(device_name, "device_name");
    } else {
      evolver->evaluate_device.clear();
    }
    evolver->evaluate = evaluate;
    evolver->evaluate_data = evaluate ? user_data : nullptr;
  });
}

namespace {

// A run of the evolver: a new search, or (with `resume`) the continuation of a stored one (0: the
// latest of the spec on this device). Records into the evolver's store as it goes, if it has one.
void run_search(ke_result** out, ke_evolver& ev, std::optional<std::int64_t> resume) {
  RunningFlag busy(ev);
  ev.last.reset();
  if (resume && !ev.store) fail(KE_ERROR_INVALID_ARGUMENT, "the evolver has no store to resume a run from");
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<ke::FitnessEvaluator> evaluator = make_evaluator(ev);
  const ke::DeviceInfo device = evaluator->device_info();
  std::int64_t run_id = 0;
  std::optional<ke::Checkpoint> checkpoint;
  std::shared_ptr<ke::ReusingEvaluator> reusing;
  if (ev.store) {
    if (resume) {
      std::optional<ke::RunId> found = *resume > 0 ? std::optional<ke::RunId>(*resume) : ev.store->latest_run(ev.spec, &device);
      if (!found) {
        fail(KE_ERROR_NOT_FOUND, ev.store->path() + " holds no run of " + ev.spec.name + " on " + device.id + " (" +
                                     device.name + ") to resume");
      }
      const ke::RunInfo stored = ev.store->run(*found);
      if (stored.spec_hash != ke::spec_hash(ev.spec)) {
        fail(KE_ERROR_INVALID_ARGUMENT, "run " + std::to_string(stored.id) + " of " + ev.store->path() +
                                            " was of another spec (" + stored.spec_name +
                                            ", or this one since edited): it cannot be resumed with this one");
      }
      if (stored.device.kind != device.kind || stored.device.name != device.name) {
        fail(KE_ERROR_INVALID_ARGUMENT, "run " + std::to_string(stored.id) + " of " + ev.store->path() + " ran on " +
                                            stored.device.id + " (" + stored.device.name + "), not on " + device.id +
                                            " (" + device.name + ")");
      }
      run_id = stored.id;
      checkpoint = ev.store->resume(run_id);
    } else {
      run_id = ev.store->begin_run(ev.spec, device, {ev.policy, ev.mutator.name, ev.seed, "C API"});
    }
    if (ev.reuse) {
      reusing = std::make_shared<ke::ReusingEvaluator>(evaluator, ev.store, ev.spec);
      evaluator = reusing;
    }
    ev.runs = run_id;
  } else {
    run_id = ++ev.runs;
  }
  ke::EvolverOptions options;
  options.seed = ev.seed;
  options.jobs = ev.jobs;
  if (const auto multi = std::dynamic_pointer_cast<ke::MultiDeviceEvaluator>(evaluator)) options.jobs = multi->slots();
  options.max_consecutive_mutator_failures = ev.max_consecutive_mutator_failures;
  options.confirm_rounds = ev.confirm_rounds;
  ke::Evolver evolver_cxx(ev.spec, evaluator, ev.mutator.for_run(device), ke::make_policy(ev.policy, ev.policy_options),
                          ev.stop, options);
  if (checkpoint) evolver_cxx.resume(std::move(*checkpoint));
  // The store records a node before the host's callback sees it, so a callback that aborts loses nothing.
  std::optional<ke::StoreRecorder> recorder;
  if (ev.store) {
    recorder.emplace(ev.store, run_id, reusing.get());
    evolver_cxx.add_observer(&*recorder);
  }
  std::optional<CallbackObserver> observer;
  if (ev.progress) {
    observer.emplace(ev.progress, ev.progress_data);
    evolver_cxx.add_observer(&*observer);
  }
  // Keeps what the run found before it was stopped, for ke_evolver_result.
  auto keep_partial = [&](const std::string& reason) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ev.last = make_result(ev.spec, evolver_cxx.graph(), rebuild_run(evolver_cxx.graph(), elapsed, reason), device,
                          run_id, false);
  };
  try {
    const ke::RunResult run = evolver_cxx.run();
    ev.last = make_result(ev.spec, evolver_cxx.graph(), run, evaluator->device_info(), run_id, false);
  } catch (const Aborted& e) {
    keep_partial(e.message);
    throw;
  } catch (const std::exception& e) {
    keep_partial(std::string("the run failed: ") + e.what());
    throw;
  }
  give(out, make_result(ev.last->spec, ev.last->graph, ev.last->run, ev.last->device.info, run_id, false));
}

}  // namespace

KE_API ke_status ke_evolver_run(ke_result** out, ke_evolver* evolver) {
  return guard(__func__, [&] {
    need_out(out, "out");
    run_search(out, *need(evolver, "evolver"), std::nullopt);
  });
}

KE_API ke_status ke_evolver_resume(ke_result** out, ke_evolver* evolver, int64_t run) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(evolver, "evolver");
    if (run < 0) fail(KE_ERROR_INVALID_ARGUMENT, "'run' must not be negative (0: the latest run of the spec)");
    run_search(out, *evolver, run);
  });
}

KE_API ke_status ke_evolver_set_store(ke_evolver* evolver, ke_store* store, int reuse) {
  return guard(__func__, [&] {
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    evolver->store = store ? need(store, "store")->store : nullptr;
    evolver->reuse = store && reuse != 0;
  });
}

KE_API ke_status ke_result_run_id(int64_t* out, const ke_result* result) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(result, "result")->run_id;
  });
}

// ---------------------------------------------------------------------------------------------------
// Store

KE_API ke_status ke_store_open(ke_store** out, const char* path, int read_only) {
  return guard(__func__, [&] {
    need_out(out, "out");
    auto s = std::make_unique<ke_store>();
    s->store = std::make_shared<ke::Store>(need_nonempty(path, "path"),
                                           read_only ? ke::Store::Mode::read_only : ke::Store::Mode::read_write);
    give(out, std::move(s));
  });
}

KE_API ke_status ke_store_destroy(ke_store* store) { return destroy(__func__, store); }

KE_API ke_status ke_store_path(const char** out, const ke_store* store) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(store, "store")->store->path().c_str();
  });
}

KE_API ke_status ke_store_run_count(size_t* out, const ke_store* store) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = need(store, "store")->store->runs().size();
  });
}

KE_API ke_status ke_store_run_id(int64_t* out, const ke_store* store, size_t index) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const auto runs = need(store, "store")->store->runs();
    if (index >= runs.size()) {
      fail(KE_ERROR_NOT_FOUND, "run index " + std::to_string(index) + " is out of range (the store holds " +
                                   std::to_string(runs.size()) + ")");
    }
    *out = runs[index].id;
  });
}

KE_API ke_status ke_store_latest_run(int64_t* out, const ke_store* store) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const auto latest = need(store, "store")->store->latest_run();
    if (!latest) fail(KE_ERROR_NOT_FOUND, store->store->path() + " holds no run");
    *out = *latest;
  });
}

namespace {

// The run's info, or KE_ERROR_NOT_FOUND naming the store (the C++ store says BadUsage).
ke::RunInfo stored_run(const ke_store* store, std::int64_t run) {
  const auto runs = store->store->runs();
  for (const ke::RunInfo& r : runs) {
    if (r.id == run) return r;
  }
  fail(KE_ERROR_NOT_FOUND, store->store->path() + " holds no run " + std::to_string(run));
}

// A text the store made, kept in the handle so the pointer lives until it is destroyed.
const char* keep_text(const ke_store* store, const std::string& key, const std::function<std::string()>& make) {
  std::lock_guard lock(store->mutex);
  auto it = store->texts.find(key);
  if (it == store->texts.end()) it = store->texts.emplace(key, make()).first;
  return it->second.c_str();
}

}  // namespace

KE_API ke_status ke_store_load(ke_result** out, const ke_store* store, int64_t run) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(store, "store");
    const ke::RunInfo info = stored_run(store, run);
    const ke::Checkpoint checkpoint = store->store->load(run);
    const ke::Spec spec = ke::parse_spec(info.spec_json, info.spec_path);
    ke::RunResult result = rebuild_run(checkpoint.graph, checkpoint.elapsed_s,
                                       info.finished_at.empty() ? "unfinished" : info.stop_reason);
    result.state.tokens = checkpoint.tokens;
    result.mutator_failures = checkpoint.mutator_failures;
    give(out, make_result(spec, checkpoint.graph, result, info.device, run, false));
  });
}

KE_API ke_status ke_store_show(const char** out, const ke_store* store, int64_t run, size_t limit) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(store, "store");
    stored_run(store, run);
    *out = keep_text(store, "show " + std::to_string(run) + " " + std::to_string(limit),
                     [&] { return ke::show_run_text(*store->store, run, limit); });
  });
}

KE_API ke_status ke_store_best_source(const char** out, const ke_store* store, int64_t run) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(store, "store");
    stored_run(store, run);
    const auto source = ke::best_kernel_source(*store->store, run);
    if (!source) fail(KE_ERROR_NOT_FOUND, "run " + std::to_string(run) + " has no correct kernel");
    *out = keep_text(store, "best " + std::to_string(run), [&] { return *source; });
  });
}

KE_API ke_status ke_store_export(const char** out, const ke_store* store, int64_t run, const char* format) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(store, "store");
    const std::string f = need_string(format, "format");
    if (f != "json" && f != "dot") fail(KE_ERROR_INVALID_ARGUMENT, "format '" + f + "' is not json or dot");
    stored_run(store, run);
    *out = keep_text(store, f + " " + std::to_string(run), [&] {
      return f == "json" ? ke::export_json(*store->store, run) : ke::export_dot(*store->store, run);
    });
  });
}

KE_API ke_status ke_evolver_check(ke_result** out, ke_evolver* evolver) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(evolver, "evolver");
    RunningFlag busy(*evolver);
    ke_evolver& ev = *evolver;
    ev.last.reset();
    const std::int64_t run_id = 0;  // a check is not a run: it is neither numbered nor stored
    const auto start = std::chrono::steady_clock::now();
    std::shared_ptr<ke::FitnessEvaluator> evaluator = make_evaluator(ev);
    const ke::DeviceInfo info = evaluator->device_info();
    ke::SearchGraph graph;
    ke::Node seed;
    seed.mutator = "seed";
    seed.note = "the spec's seed kernel at the first value of each tunable";
    seed.candidate = ke::Candidate{ev.spec.seed.source, ev.spec.seed.language.value_or(ev.spec.language),
                                   ev.spec.seed_tunables()};
    seed.evaluation = evaluator->evaluate(seed.candidate, 1);
    seed.speedup = seed.evaluation.status == ke::Status::ok ? 1.0 : 0.0;
    const ke::Evaluation seed_evaluation = seed.evaluation;
    graph.add(std::move(seed));
    // The reference against itself: it must be deterministic, and it gives the time to beat.
    if (!ev.spec.reference.device || *ev.spec.reference.device == info.kind) {
      ke::Node reference;
      reference.mutator = "reference";
      reference.note = "the spec's reference kernel, checked against itself";
      reference.candidate = ke::Candidate{ev.spec.reference.source,
                                          ev.spec.reference.language.value_or(ev.spec.language), ev.spec.seed_tunables()};
      reference.evaluation = evaluator->evaluate(reference.candidate, 2);
      reference.speedup = ke::speedup(seed_evaluation, reference.evaluation);
      graph.add(std::move(reference));
    }
    ke::RunResult run;
    run.seed = 0;
    if (seed_evaluation.status == ke::Status::ok) run.best = 0;
    run.stop_reason = "checked the seed and the reference";
    run.state.evaluations = static_cast<std::int64_t>(graph.size());
    run.state.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run.state.best_speedup = run.best ? 1.0 : 0.0;
    ev.last = make_result(ev.spec, graph, run, evaluator->device_info(), run_id, true);
    give(out, make_result(ev.spec, graph, run, ev.last->device.info, run_id, true));
  });
}

KE_API ke_status ke_evolver_result(ke_result** out, const ke_evolver* evolver) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(evolver, "evolver");
    if (evolver->running) fail(KE_ERROR_INVALID_ARGUMENT, "a run of this evolver is in progress");
    if (!evolver->last) fail(KE_ERROR_NOT_FOUND, "the evolver has not run yet (or its last run failed to start)");
    const ke_result& last = *evolver->last;
    give(out, make_result(last.spec, last.graph, last.run, last.device.info, last.run_id, last.is_check));
  });
}
