// What the C API's files share (capi/*.cpp): the handle structs behind the opaque types of
// kernelevolve.h, the error plumbing (guard() turns every exception into a ke_status and the calling
// thread's last error), the argument checks and the helpers more than one family of entry points uses.
// Not installed: nothing outside capi/ includes it.
#pragma once

#include <atomic>
#include <cstdint>
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
#include <string>
#include <vector>

#include "kernelevolve.h"

namespace ke = kernelevolve;

namespace capi {

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
  program,
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

[[noreturn]] void fail(ke_status status, std::string message);

// Sets the calling thread's last error to "function: message" and returns `status`.
ke_status record(ke_status status, const char* function, const std::string& message) noexcept;
// The calling thread's last error, as record() set it ("" when none): what ke_last_error returns.
const char* last_error() noexcept;

ke_status status_of(ke::ErrorCode code);

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

std::string need_string(const char* text, const char* name);
std::string need_nonempty(const char* text, const char* name);

template <class T>
const T* need_array(const T* array, std::size_t count, const char* name) {
  if (!array && count > 0) fail(KE_ERROR_INVALID_ARGUMENT, std::string("'") + name + "' is NULL");
  return array;
}

void need_finite(double x, const char* name);

// A versioned struct the caller filled (or wants filled): its version must be one this library knows.
void need_version(unsigned int version, unsigned int newest, const char* what);

ke_eval_status to_c(ke::Status s);
std::optional<ke::Status> from_c(ke_eval_status s);
ke::Status need_status(ke_eval_status s, const char* name);

// The i-th entry of a map in key order.
template <class Map>
typename Map::const_iterator nth(const Map& map, std::size_t index, const char* what) {
  if (index >= map.size()) {
    fail(KE_ERROR_NOT_FOUND, std::string(what) + " index " + std::to_string(index) + " is out of range (there are " +
                                 std::to_string(map.size()) + ")");
  }
  return std::next(map.begin(), static_cast<std::ptrdiff_t>(index));
}

// Copies the search state into a C struct that has its fields (ke_search_state, ke_progress).
template <class C>
void copy_state(C& out, const ke::SearchState& s) {
  out.evaluations = s.evaluations;
  out.elapsed_s = s.elapsed_s;
  out.best_speedup = s.best_speedup;
  out.evaluations_since_improvement = s.evaluations_since_improvement;
  out.tokens = s.tokens;
  out.cost_usd = s.cost_usd;
}

// A file the caller names (not one a spec names): a path that does not exist or cannot be read is an
// I/O failure, KE_ERROR_INTERNAL, whose message names `what` and the path.
void need_readable_file(const std::string& path, const char* what);
// The whole of a source file the caller names, checked as need_readable_file does.
std::string read_file(const std::string& path);

// What every handle opens with: its tag, checked on every call (need()) and cleared when it is destroyed.
template <Tag kind>
struct Handle {
  static constexpr Tag kTag = kind;
  Tag tag = kind;
};

// How a mutator handle makes the mutator of a run: one instance shared by every run, or, for a mutator
// that keeps per-run state or wants the run's device, a fresh one for each run.
struct MutatorRecipe {
  std::string name;
  std::shared_ptr<ke::Mutator> instance;
  // Made per run when the mutator needs the run's device and language (the model's device facts).
  std::function<std::shared_ptr<ke::Mutator>(const ke::DeviceInfo&, ke::Language)> make;
  std::shared_ptr<ke::Mutator> for_run(const ke::DeviceInfo& device, ke::Language language) const {
    return make ? make(device, language) : instance;
  }
};

}  // namespace capi

// ---------------------------------------------------------------------------------------------------
// Handles. Each opens with its tag (capi::Handle); kTag and kName serve need().

struct ke_spec : capi::Handle<capi::Tag::spec> {
  static constexpr const char* kName = "ke_spec";
  ke::Spec spec;
  mutable std::mutex mutex;  // guards the cache for concurrent const calls
  mutable std::optional<std::string> json;
  void changed() { json.reset(); }
};

struct ke_device_info : capi::Handle<capi::Tag::device_info> {
  static constexpr const char* kName = "ke_device_info";
  ke::DeviceInfo info;
};

struct ke_device_list : capi::Handle<capi::Tag::device_list> {
  static constexpr const char* kName = "ke_device_list";
  std::vector<std::unique_ptr<ke_device_info>> devices;
};

struct ke_node : capi::Handle<capi::Tag::node> {
  static constexpr const char* kName = "ke_node";
  const ke::Node* node = nullptr;
};

struct ke_stop_rule : capi::Handle<capi::Tag::stop_rule> {
  static constexpr const char* kName = "ke_stop_rule";
  std::shared_ptr<ke::StopRule> rule;
};

struct ke_mutator : capi::Handle<capi::Tag::mutator> {
  static constexpr const char* kName = "ke_mutator";
  capi::MutatorRecipe recipe;
};

struct ke_store : capi::Handle<capi::Tag::store> {
  static constexpr const char* kName = "ke_store";
  std::shared_ptr<ke::Store> store;
  mutable std::mutex mutex;                          // guards the texts for concurrent const calls
  mutable std::map<std::string, std::string> texts;  // what show, best and export returned, kept till destroy
};

struct ke_program : capi::Handle<capi::Tag::program> {
  static constexpr const char* kName = "ke_program";
  std::unique_ptr<ke::CallableProgram> program;
  std::string provenance_json, spec_json;
  std::atomic<std::int64_t> calls{0};
};

struct ke_mutation : capi::Handle<capi::Tag::mutation> {
  static constexpr const char* kName = "ke_mutation";
  const ke::MutationContext* context = nullptr;
  std::vector<ke_node> parents;
  std::map<ke::NodeId, std::unique_ptr<ke_node>> nodes;  // views handed out by ke_mutation_node
  std::optional<std::string> request;
  ke::Candidate child;
  std::string note, error, prompt, answer;
  bool failed = false, exhausted = false;
  std::int64_t tokens = 0;
  double cost_usd = 0;
};

struct ke_candidate : capi::Handle<capi::Tag::candidate> {
  static constexpr const char* kName = "ke_candidate";
  const ke::Candidate* candidate = nullptr;
  std::size_t workloads = 0;
  std::uint64_t input_seed = 0;
};

struct ke_evaluation : capi::Handle<capi::Tag::evaluation> {
  static constexpr const char* kName = "ke_evaluation";
  ke::Evaluation evaluation;
  std::vector<bool> timed;
  bool status_set = false;
};

struct ke_result : capi::Handle<capi::Tag::result> {
  static constexpr const char* kName = "ke_result";
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

struct ke_evolver : capi::Handle<capi::Tag::evolver> {
  static constexpr const char* kName = "ke_evolver";
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
  int confirm_parent_rounds = 2;
  std::vector<ke::WarmKernel> warm_start;  // found at creation, from the options' stores

  capi::MutatorRecipe mutator{"param", std::make_shared<ke::ParamMutator>(), {}};
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

namespace capi {

template <class T>
T* need(T* handle, const char* name) {
  if (!handle) fail(KE_ERROR_INVALID_ARGUMENT, std::string("'") + name + "' is NULL");
  if (handle->tag != T::kTag) {
    fail(KE_ERROR_INVALID_ARGUMENT,
         std::string("'") + name + "' is not a live " + T::kName + " (destroyed, or a handle of another kind)");
  }
  return handle;
}

// The body of a plain getter: checks the out-parameter, then the handle, and writes what `field` reads.
template <class T, class H, class F>
ke_status get_field(const char* function, T* out, const H* handle, const char* name, F field) {
  return guard(function, [&] {
    need_out(out, "out");
    *out = field(*need(handle, name));
  });
}

// The body of an options struct's *_init function: the defaults of its _INIT macro, at `version`.
template <class Options>
ke_status init_options(const char* function, Options* options, unsigned int version, unsigned int newest,
                       const Options& defaults, const char* what) {
  return guard(function, [&] {
    need_out(options, "options");
    need_version(version, newest, what);
    *options = defaults;
    options->version = version;
  });
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

// A result handle over a copy of the run: one node view per graph node.
std::unique_ptr<ke_result> make_result(const ke::Spec& spec, const ke::SearchGraph& graph, const ke::RunResult& run,
                                       const ke::DeviceInfo& device, std::int64_t run_id, bool is_check);
// The RunResult of a run that did not return one (a callback aborted it), rebuilt from its graph.
ke::RunResult rebuild_run(const ke::SearchGraph& graph, double elapsed_s, std::string reason);

// The host's fitness callback as a C++ evaluator (capi/fitness.cpp).
std::shared_ptr<ke::FitnessEvaluator> make_callback_evaluator(std::size_t workloads, std::string device_name,
                                                              ke_evaluate_fn fn, void* user_data);

}  // namespace capi
