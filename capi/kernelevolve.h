/* kernelevolve.h: the stable C API of KernelEvolve, for C, Rust, Go and any language with a C FFI.
 *
 * KernelEvolve searches for faster compute kernels: from a spec (a reference kernel, a seed kernel, the
 * shapes it must serve, a tolerance, tunables) it grows a graph of kernel variants, verifies and times
 * each on a device, and returns the fastest correct one with its lineage.
 *
 * Conventions (libgit2's, mostly):
 * - C99. Every name starts with `ke_` (functions, types) or `KE_` (macros, enumerators).
 * - Every function returns a ke_status, except ke_last_error(). KE_OK is 0. On failure,
 *   ke_last_error() gives the calling thread's message, which names the argument, field or file at fault.
 * - Out-parameters come first and are written only on success: a failed call leaves them untouched.
 * - An object returned through `**out` belongs to the caller, who frees it with its `*_destroy`.
 *   `*_destroy(NULL)` does nothing and returns KE_OK.
 * - Getters return borrowed pointers (`const char*`, `const ke_node*`, ...) owned by the handle they came
 *   from; they live until that handle is destroyed (or, for a ke_spec, until it is next modified).
 *   A borrowed pointer passed to a callback lives until the callback returns.
 * - Every handle carries a tag: a NULL, destroyed or wrong kind of handle is refused with
 *   KE_ERROR_INVALID_ARGUMENT, never a crash (as far as the memory still holds the tag).
 * - Options are structs with a `version` field. Fill one with its `*_INIT` macro (C) or its `*_init`
 *   function (other languages), then change the fields you need. Fields are only ever appended, so a
 *   program built against an older header keeps working.
 * - Callbacks take `void* user_data` last. A callback that returns non-zero aborts the run:
 *   ke_evolver_run() then returns KE_ERROR_ABORTED, and ke_evolver_result() still gives what was found.
 *   The one exception is a stop rule's callback (ke_stop_rule_callback): its non-zero is a normal stop.
 *   The library passes `user_data` back as it was given and never frees it, except where a function
 *   takes a `ke_free_fn` for it; each setter says how long it must stay valid.
 * - No C++ exception crosses this API.
 * - Thread safety: different handles may be used from different threads at once. Functions that take a
 *   `const` handle may be called concurrently on the same handle; others may not. No handle is tied to
 *   the thread that made it: any may be handed to another thread between calls (ke_last_error() alone
 *   is per thread). Handle by handle:
 *   - ke_spec: one thread at a time while it is being built; its const functions (ke_spec_to_json's
 *     cache is locked) from any number of threads at once.
 *   - ke_device_list, ke_device_info, ke_result and the ke_node it lends: immutable once returned (a
 *     result's lazily made lineages and reports are locked): any number of threads at once.
 *   - ke_stop_rule, ke_mutator: immutable once made; one may be set on several evolvers, and those may run
 *     at once on different threads. The built-in rules and the param, command and model mutators are
 *     safe so; a mix gives each run a fresh state; calls to one ke_stop_rule_callback rule never
 *     overlap; a custom mutator's callback is called from each such run's thread, so may overlap.
 *   - ke_store: locked inside; any number of threads, and evolvers running at once, may use one.
 *   - ke_evolver: one call at a time, from any thread. While a run is in progress, calls on that evolver
 *     from its own callbacks are refused with KE_ERROR_INVALID_ARGUMENT; none may come from another thread.
 *   - ke_mutation, ke_candidate, ke_evaluation, and a ke_node passed to a callback: only during the
 *     callback, on the thread it was called on.
 * - ABI: within a major version, functions are added, never changed or removed; enumerations and
 *   library-filled structs only grow at the end.
 */
#ifndef KERNELEVOLVE_H
#define KERNELEVOLVE_H

#include <stddef.h>
#include <stdint.h>

#define KE_VERSION_MAJOR 0
#define KE_VERSION_MINOR 1
#define KE_VERSION_PATCH 0

#if defined(_WIN32)
#if defined(KE_BUILDING_LIBRARY)
#define KE_API __declspec(dllexport)
#else
#define KE_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define KE_API __attribute__((visibility("default")))
#else
#define KE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------
 * Status, errors, version
 */

typedef enum ke_status {
  KE_OK = 0,
  KE_ERROR_INVALID_ARGUMENT = 1,   /* NULL, a wrong or destroyed handle, a bad value, misuse */
  KE_ERROR_BAD_SPEC = 2,           /* the spec (file or built here) is invalid; the message names the field */
  KE_ERROR_DEVICE_UNAVAILABLE = 3, /* the device asked for is absent or cannot start */
  KE_ERROR_NOT_FOUND = 4,          /* no such node, index, tunable; no best kernel; no run yet */
  KE_ERROR_ABORTED = 5,            /* a callback returned non-zero */
  KE_ERROR_OUT_OF_MEMORY = 6,
  KE_ERROR_INTERNAL = 7,          /* anything else: I/O, a worker that cannot start, a bug */
  KE_STATUS_MAX_ENUM = 0x7fffffff /* not a value: keeps every ke_ enumeration 32 bits wide */
} ke_status;

/* The calling thread's message for its last failed call ("" if none). Never NULL. It stays valid until
 * this thread's next failed call. */
KE_API const char* ke_last_error(void);

/* The enumerator's name without prefix, e.g. "bad_spec". */
KE_API ke_status ke_status_name(const char** out, ke_status status);

/* The library's version (which may be newer than the header's KE_VERSION_*). Any pointer may be NULL. */
KE_API ke_status ke_version(int* major, int* minor, int* patch);

/* ---------------------------------------------------------------------------------------------------
 * Spec: the problem. Loaded from a spec file or built field by field. The spec file's JSON format, every
 * field, is described in spec-format.md, installed with the library in <prefix>/share/doc/kernelevolve/docs/
 * (docs/spec-format.md in the source tree), beside the README. Names of dtypes, roles, languages and
 * distributions are those of the spec file: "f32", "in", "c", ...
 *
 * The kernel. Its function is the spec's `entry`, with the params in order; in CUDA and HIP an
 * `extern "C" __global__` function, launched by the spec's launch rule. Each dtype is a C type:
 *   dtype  f16       bf16    f32    f64     i8      u8       i32      i64
 *   C      _Float16  __bf16  float  double  int8_t  uint8_t  int32_t  int64_t
 * A buffer is a pointer to its dtype (`const float*` for "in", `float*` for "out" and "inout"); a size
 * and a scalar are passed by value as their dtype (a size's is an integer one). A tunable is a
 * macro the kernel is compiled with, -DNAME=value (the candidate's value).
 *
 * The reference. It is compiled with the same `entry` name and params as the seed (a spec has one
 * `entry`), from its own source, on its own device when it names one (e.g. "cpu"). A GPU reference
 * (language "cuda" or "hip") is compiled with the seed's tunables as -D macros (the first value of
 * each) and launched with the launch rule at that point; a CPU reference ("c" or "cpp") gets no tunable
 * macros, so it must not read any. A spec file may instead name a PyTorch module as its reference
 * (spec-format.md): PyTorch runs it, nothing is compiled.
 */

typedef struct ke_spec ke_spec;

/* Loads and validates a spec file; paths inside it are relative to the file. A path ending in .py is a
 * PyTorch problem in KernelBench's format, its spec derived for C kernels on the CPU (docs/pytorch.md,
 * "Bring your PyTorch module"); KE_ERROR_DEVICE_UNAVAILABLE when no Python imports torch. KE_ERROR_INTERNAL (I/O) when
 * `path` does not exist or cannot be read, naming it; KE_ERROR_BAD_SPEC when its content is wrong, a
 * source file it names that cannot be read included. */
KE_API ke_status ke_spec_load(ke_spec** out, const char* path);
/* Parses spec JSON text. `path` (may be NULL) names it in messages and resolves relative source files. */
KE_API ke_status ke_spec_parse(ke_spec** out, const char* json, const char* path);
/* An empty spec to fill with the ke_spec_set_* and ke_spec_add_* calls, then ke_spec_validate().
 * `language` is "c", "cpp", "cuda" or "hip". */
KE_API ke_status ke_spec_create(ke_spec** out, const char* name, const char* language, const char* entry);
KE_API ke_status ke_spec_destroy(ke_spec* spec);

/* Params, in the kernel's argument order. A buffer (`role` "in", "out" or "inout") has a shape: each
 * dimension a size name or an integer literal. A size is bound by each workload. A scalar has a fixed value. */
KE_API ke_status ke_spec_add_buffer(ke_spec* spec, const char* name, const char* dtype, const char* role,
                                    const char* const* shape, size_t rank);
KE_API ke_status ke_spec_add_size(ke_spec* spec, const char* name, const char* dtype);
KE_API ke_status ke_spec_add_scalar(ke_spec* spec, const char* name, const char* dtype, double value);
/* One workload: a value for every size param. */
KE_API ke_status ke_spec_add_workload(ke_spec* spec, const char* const* names, const int64_t* values, size_t count);
/* How an input buffer's random values are drawn: "uniform" (a = low, b = high), "normal" or "laplace"
 * (a = mean, b = standard deviation). Default: uniform(-1, 1). */
KE_API ke_status ke_spec_set_input(ke_spec* spec, const char* buffer, const char* distribution, double a, double b);
/* An output passes where |out - ref| <= atol + rtol * |ref|. */
KE_API ke_status ke_spec_set_tolerance(ke_spec* spec, double atol, double rtol);

typedef enum ke_source_kind {
  KE_SOURCE_REFERENCE = 0, /* the trusted kernel outputs are compared with */
  KE_SOURCE_SEED = 1,      /* the kernel the search starts from */
  KE_SOURCE_MAX_ENUM = 0x7fffffff
} ke_source_kind;

/* The reference or seed kernel, from text or read from a file now. `language` (NULL: the spec's) and
 * `device` (NULL: the run's device; e.g. "cpu" for a CPU reference of a GPU problem) are optional.
 * ke_spec_set_source_file: KE_ERROR_INTERNAL (I/O) when `path` does not exist or cannot be read. */
KE_API ke_status ke_spec_set_source(ke_spec* spec, ke_source_kind kind, const char* source, const char* language,
                                    const char* device);
KE_API ke_status ke_spec_set_source_file(ke_spec* spec, ke_source_kind kind, const char* path, const char* language,
                                         const char* device);
/* A tunable: a macro the kernel is compiled with (-DNAME=value). The first value is the seed's. */
KE_API ke_status ke_spec_add_tunable(ke_spec* spec, const char* name, const int64_t* values, size_t count);
/* An integer expression over sizes and tunables that every candidate must satisfy, e.g. "ACC <= BLOCK". */
KE_API ke_status ke_spec_add_constraint(ke_spec* spec, const char* expression);
/* The launch rule of a GPU kernel: grid and block dimensions and dynamic shared memory, as expressions. */
KE_API ke_status ke_spec_set_launch(ke_spec* spec, const char* const grid[3], const char* const block[3],
                                    const char* shared_bytes);
/* The cost model for the roofline, as expressions; NULL leaves that part out. */
KE_API ke_status ke_spec_set_cost(ke_spec* spec, const char* flops, const char* bytes);
KE_API ke_status ke_spec_set_notes(ke_spec* spec, const char* notes);
/* Checks everything a user can get wrong; KE_ERROR_BAD_SPEC names the field. */
KE_API ke_status ke_spec_validate(const ke_spec* spec);

KE_API ke_status ke_spec_name(const char** out, const ke_spec* spec);
KE_API ke_status ke_spec_workload_count(size_t* out, const ke_spec* spec);
/* The spec as spec-file JSON with every source inline (ke_spec_parse reads it back). */
KE_API ke_status ke_spec_to_json(const char** out, const ke_spec* spec);

/* ---------------------------------------------------------------------------------------------------
 * Devices
 */

typedef struct ke_device_list ke_device_list;
typedef struct ke_device_info ke_device_info; /* borrowed from a ke_device_list or a ke_result */

/* The devices present ("cpu", "cuda:0", "hip:1", ...). Ceilings are not measured here (they read 0). */
KE_API ke_status ke_device_list_create(ke_device_list** out);
KE_API ke_status ke_device_list_destroy(ke_device_list* list);
KE_API ke_status ke_device_list_count(size_t* out, const ke_device_list* list);
KE_API ke_status ke_device_list_get(const ke_device_info** out, const ke_device_list* list, size_t index);

KE_API ke_status ke_device_info_id(const char** out, const ke_device_info* info);   /* "cuda:0" */
KE_API ke_status ke_device_info_kind(const char** out, const ke_device_info* info); /* "cuda" */
KE_API ke_status ke_device_info_name(const char** out, const ke_device_info* info); /* the model name */
KE_API ke_status ke_device_info_compute_units(int* out, const ke_device_info* info);
KE_API ke_status ke_device_info_vector_bits(int* out, const ke_device_info* info);
/* Measured ceilings: copy bandwidth (bytes read plus written per second) and FMA rate; 0 if unknown. */
KE_API ke_status ke_device_info_peak_bytes_per_s(double* out, const ke_device_info* info);
KE_API ke_status ke_device_info_peak_flops_per_s(double* out, const ke_device_info* info);
KE_API ke_status ke_device_info_property_count(size_t* out, const ke_device_info* info);
KE_API ke_status ke_device_info_property(const char** key, const char** value, const ke_device_info* info,
                                         size_t index);

/* ---------------------------------------------------------------------------------------------------
 * Nodes: kernel variants in the search graph, as a run reports them. Borrowed from a ke_result, or
 * passed to a callback.
 */

typedef struct ke_node ke_node;

typedef enum ke_eval_status {
  KE_EVAL_PENDING = 0, /* not evaluated (yet) */
  KE_EVAL_OK = 1,
  KE_EVAL_COMPILE_ERROR = 2,
  KE_EVAL_INCORRECT = 3,
  KE_EVAL_CRASHED = 4,
  KE_EVAL_TIMEOUT = 5,
  KE_EVAL_INVALID = 6, /* breaks the spec's rules, or a time under the roofline floor */
  KE_EVAL_MAX_ENUM = 0x7fffffff
} ke_eval_status;

/* The status as the reports write it: "ok", "compile_error", ... */
KE_API ke_status ke_eval_status_name(const char** out, ke_eval_status status);

/* One workload's timing. Set `version` (KE_TIMING_INIT) before passing it to be filled. */
typedef struct ke_timing {
  unsigned int version;
  double median_us;
  double min_us;
  double max_us;
  double mad_us; /* median absolute deviation: the spread */
  int samples;
} ke_timing;
#define KE_TIMING_VERSION 1
#define KE_TIMING_INIT \
  { KE_TIMING_VERSION, 0.0, 0.0, 0.0, 0.0, 0 }

/* The worst element seen when comparing with the reference. Set `version` before passing it. */
typedef struct ke_mismatch {
  unsigned int version;
  const char* buffer; /* owned by the node */
  size_t workload;
  int trial;
  int64_t index;
  double got;
  double expected;
  double excess; /* |got - expected| - (atol + rtol*|expected|): > 0 fails; +inf for NaN */
} ke_mismatch;
#define KE_MISMATCH_VERSION 1
#define KE_MISMATCH_INIT \
  { KE_MISMATCH_VERSION, NULL, 0, 0, -1, 0.0, 0.0, 0.0 }

KE_API ke_status ke_node_id(int64_t* out, const ke_node* node); /* dense, from 0 (the seed) */
KE_API ke_status ke_node_status(ke_eval_status* out, const ke_node* node);
KE_API ke_status ke_node_message(const char** out, const ke_node* node); /* why it is not ok, in one line */
KE_API ke_status ke_node_source(const char** out, const ke_node* node);
KE_API ke_status ke_node_language(const char** out, const ke_node* node);
/* "seed", "param", "command", the name of a custom mutator, or "reference" in a check. */
KE_API ke_status ke_node_mutator(const char** out, const ke_node* node);
KE_API ke_status ke_node_note(const char** out, const ke_node* node); /* the mutator's account of the change */
KE_API ke_status ke_node_compile_log(const char** out, const ke_node* node);
/* Geometric-mean speedup over the seed across workloads; 0 unless ok. */
KE_API ke_status ke_node_speedup(double* out, const ke_node* node);
KE_API ke_status ke_node_created_s(double* out, const ke_node* node); /* seconds since the run started */
KE_API ke_status ke_node_parent_count(size_t* out, const ke_node* node);
KE_API ke_status ke_node_parent(int64_t* out, const ke_node* node, size_t index);
KE_API ke_status ke_node_tunable_count(size_t* out, const ke_node* node);
/* Tunables in name order. */
KE_API ke_status ke_node_tunable(const char** name, int64_t* value, const ke_node* node, size_t index);
KE_API ke_status ke_node_tunable_value(int64_t* out, const ke_node* node, const char* name);
/* Timings, one per workload, when ok (otherwise none). */
KE_API ke_status ke_node_timing_count(size_t* out, const ke_node* node);
KE_API ke_status ke_node_timing(ke_timing* out, const ke_node* node, size_t workload);
/* KE_ERROR_NOT_FOUND if no comparison was made. */
KE_API ke_status ke_node_mismatch(ke_mismatch* out, const ke_node* node);
/* What a model or command mutator was asked and answered, and the tokens it spent. */
KE_API ke_status ke_node_prompt(const char** out, const ke_node* node);
KE_API ke_status ke_node_answer(const char** out, const ke_node* node);
KE_API ke_status ke_node_tokens(int64_t* out, const ke_node* node);
/* What the call that made the node cost, in US dollars (0 when its model has no price, or no model made it). */
KE_API ke_status ke_node_cost_usd(double* out, const ke_node* node);
/* The model that wrote the node; "" when no model did. */
KE_API ke_status ke_node_model(const char** out, const ke_node* node);

/* ---------------------------------------------------------------------------------------------------
 * Stop rules: when the search stops. Compose with any/all. A rule is shared, never copied: a composite or
 * an evolver (ke_evolver_set_stop_rule) keeps a reference to it, so its handle may be destroyed right
 * after, and the rule lives until the last of them lets go. Rules are asked at every step of the search
 * once the seed is evaluated, often more than once per evaluation: a rule judges the state it is given
 * (a resumed run's counts its earlier evaluations, time and tokens), it does not count its calls.
 */

typedef struct ke_stop_rule ke_stop_rule;

KE_API ke_status ke_stop_rule_max_evaluations(ke_stop_rule** out, int64_t evaluations); /* seed included */
KE_API ke_status ke_stop_rule_max_time(ke_stop_rule** out, double seconds);
KE_API ke_status ke_stop_rule_target_speedup(ke_stop_rule** out, double speedup);
/* Stops after this many evaluations without a better kernel. */
KE_API ke_status ke_stop_rule_plateau(ke_stop_rule** out, int64_t evaluations);
/* Stops once mutators have spent this many model tokens. */
KE_API ke_status ke_stop_rule_max_tokens(ke_stop_rule** out, int64_t tokens);
/* Stops once model calls have cost this many US dollars (priced models: ke_llm_mutator_options'
 * price_*_per_mtok, or ke_mutation_add_cost). */
KE_API ke_status ke_stop_rule_max_cost(ke_stop_rule** out, double usd);

/* What a stop rule sees: the search so far. Filled by the library; fields are only appended (check
 * `version`). */
typedef struct ke_search_state {
  unsigned int version;
  int64_t evaluations; /* the seed included */
  double elapsed_s;
  double best_speedup;
  int64_t evaluations_since_improvement;
  int64_t tokens;  /* model tokens the mutators spent */
  double cost_usd; /* version 2: what they cost, in US dollars */
} ke_search_state;
#define KE_SEARCH_STATE_VERSION 2

/* Non-zero: stop the search. Unlike every other callback's, a non-zero return is not an abort. */
typedef int (*ke_stop_fn)(const ke_search_state* state, void* user_data);
/* Frees a callback's user data, once, when the library no longer needs it. */
typedef void (*ke_free_fn)(void* user_data);

/* The host's own rule, `name`d in the stop reason: the way to stop a run deliberately (a deadline of its
 * own, a user's "stop"), where a progress callback's non-zero would abort it. When `should_stop` returns
 * non-zero the run ends as under any stop rule: ke_evolver_run returns KE_OK and its result, whose stop
 * reason names the rule ("the stop rule 'NAME' said stop at N evaluations"); candidates in flight are
 * finished, the best is confirmed, a store records the run as finished.
 * It is called on the thread that runs ke_evolver_run or ke_evolver_resume. With jobs > 1 it is also
 * asked before each further candidate starts, with `evaluations` counting those in flight: a non-zero
 * answer then holds new candidates back until those are in, and it is asked again. Calls to one rule
 * never overlap, even when it is set on evolvers that run at once on different threads.
 * `user_data` must stay valid while the rule lives (see above: until its handle, every composite and
 * every evolver holding it are destroyed or given another rule). `free_user_data` (may be NULL) is then
 * called with it, once, on the thread that let go last. A failed call does not call it. */
KE_API ke_status ke_stop_rule_callback(ke_stop_rule** out, const char* name, ke_stop_fn should_stop, void* user_data,
                                       ke_free_fn free_user_data);
KE_API ke_status ke_stop_rule_any(ke_stop_rule** out, const ke_stop_rule* const* rules, size_t count);
KE_API ke_status ke_stop_rule_all(ke_stop_rule** out, const ke_stop_rule* const* rules, size_t count);
KE_API ke_status ke_stop_rule_destroy(ke_stop_rule* rule);

/* ---------------------------------------------------------------------------------------------------
 * Mutators: make a child kernel from a parent.
 */

typedef struct ke_mutator ke_mutator;

typedef struct ke_param_mutator_options {
  unsigned int version;
  double restart_probability; /* chance of a random point instead of a neighbour of the parent */
} ke_param_mutator_options;
#define KE_PARAM_MUTATOR_OPTIONS_VERSION 1
#define KE_PARAM_MUTATOR_OPTIONS_INIT \
  { KE_PARAM_MUTATOR_OPTIONS_VERSION, 0.2 }
KE_API ke_status ke_param_mutator_options_init(ke_param_mutator_options* options, unsigned int version);

/* Searches the spec's tunables under its constraints. `options` may be NULL for the defaults. */
KE_API ke_status ke_mutator_param_create(ke_mutator** out, const ke_param_mutator_options* options);

typedef struct ke_command_mutator_options {
  unsigned int version;
  const char* command; /* run through /bin/sh once per child; required */
  double timeout_s;    /* time limit of one run */
} ke_command_mutator_options;
#define KE_COMMAND_MUTATOR_OPTIONS_VERSION 1
#define KE_COMMAND_MUTATOR_OPTIONS_INIT \
  { KE_COMMAND_MUTATOR_OPTIONS_VERSION, NULL, 300.0 }
KE_API ke_status ke_command_mutator_options_init(ke_command_mutator_options* options, unsigned int version);

/* Runs an external program per child: a JSON request on its standard input (the spec, the parent and
 * its results, recent failures, the best node), a source or SEARCH/REPLACE edits read from its output. */
KE_API ke_status ke_mutator_command_create(ke_mutator** out, const ke_command_mutator_options* options);

/* A custom mutator's view of one mutation, valid during the callback. The child starts as a copy of the
 * first parent (its source, language and tunables); the callback changes it with ke_mutation_set_*, or
 * records a failure with ke_mutation_fail (the search goes on), or says that it has nothing new to offer
 * with ke_mutation_set_exhausted. A child equal to a node already in the graph is not evaluated again. */
typedef struct ke_mutation ke_mutation;

/* Called on the thread that runs ke_evolver_run, once per child wanted. Non-zero aborts the run. */
typedef int (*ke_mutate_fn)(ke_mutation* mutation, void* user_data);

/* `name` is recorded on the nodes it makes. `user_data` must outlive the mutator and every evolver using it. */
KE_API ke_status ke_mutator_custom_create(ke_mutator** out, const char* name, ke_mutate_fn mutate, void* user_data);
KE_API ke_status ke_mutator_destroy(ke_mutator* mutator);

typedef struct ke_llm_mutator_options {
  unsigned int version;
  /* "openai": /chat/completions (OpenAI, vLLM, llama.cpp server, Ollama, LiteLLM); "anthropic": /messages.
   * NULL: "openai". */
  const char* api;
  const char* base_url;    /* e.g. "http://localhost:11434/v1"; NULL: the api's public endpoint */
  const char* model;       /* required */
  const char* api_key_env; /* the environment variable that holds the key, read at each request; NULL: none */
  double temperature;
  int max_tokens;    /* per answer */
  double timeout_s;  /* per request */
  int max_retries;   /* on 429, 5xx and transport errors, with backoff */
  int max_in_flight; /* requests at once */
  /* What the prompt remembers: "inherit" (the parent's lineage), "siblings" (the parent's other
   * children), "both", "fresh". NULL: "both". */
  const char* memory;
  const char* const* knowledge_dirs; /* markdown folders beside the shipped knowledge base */
  size_t knowledge_dir_count;
  /* The device and its roofline, for the prompt. NULL: written by the evolver from the run's device. */
  const char* device_description;
  /* Version 2. What the model's tokens cost, in US dollars per million prompt (input) and completion (output)
   * tokens; both 0: no price (a version-1 struct has none). A run recorded in a store keeps the prices it
   * began with when resumed. */
  double price_input_per_mtok;
  double price_output_per_mtok;
} ke_llm_mutator_options;
#define KE_LLM_MUTATOR_OPTIONS_VERSION 2
#define KE_LLM_MUTATOR_OPTIONS_INIT \
  { KE_LLM_MUTATOR_OPTIONS_VERSION, NULL, NULL, NULL, NULL, 0.7, 4096, 180.0, 5, 4, NULL, NULL, 0, NULL, 0.0, 0.0 }
KE_API ke_status ke_llm_mutator_options_init(ke_llm_mutator_options* options, unsigned int version);

/* Asks a language model for a rewrite of the parent (the prompt carries the device, the spec, the parent
 * with its measurements, its failed children, the best node and passages of the knowledge base). */
KE_API ke_status ke_mutator_llm_create(ke_mutator** out, const ke_llm_mutator_options* options);
/* One graph, two mutators: after each new structure from `model` that works, `params` takes
 * `param_steps` steps from it; `model_every` > 0 runs the model at least every that many mutations. */
KE_API ke_status ke_mutator_mix_create(ke_mutator** out, const ke_mutator* model, const ke_mutator* params,
                                       int param_steps, int model_every);

KE_API ke_status ke_mutation_parent_count(size_t* out, const ke_mutation* mutation);
KE_API ke_status ke_mutation_parent(const ke_node** out, const ke_mutation* mutation, size_t index);
/* Every node of the graph so far, by id. */
KE_API ke_status ke_mutation_node_count(size_t* out, const ke_mutation* mutation);
KE_API ke_status ke_mutation_node(const ke_node** out, const ke_mutation* mutation, int64_t id);
/* The request a model or command would get: the spec, the parent's source, tunables and results, its
 * recent failed children, the best node, as JSON. */
KE_API ke_status ke_mutation_request_json(const char** out, const ke_mutation* mutation);
/* A number from the run's random generator, so that a run with the same seed repeats. */
KE_API ke_status ke_mutation_random(uint64_t* out, ke_mutation* mutation);
KE_API ke_status ke_mutation_set_source(ke_mutation* mutation, const char* source);
KE_API ke_status ke_mutation_set_tunable(ke_mutation* mutation, const char* name, int64_t value);
KE_API ke_status ke_mutation_set_note(ke_mutation* mutation, const char* note);
/* What a model was asked and answered, kept on the node; `prompt` and `answer` may be NULL. */
KE_API ke_status ke_mutation_set_transcript(ke_mutation* mutation, const char* prompt, const char* answer);
KE_API ke_status ke_mutation_add_tokens(ke_mutation* mutation, int64_t tokens);
/* What the host's model call cost, in US dollars: counted by ke_stop_rule_max_cost, kept on the node. */
KE_API ke_status ke_mutation_add_cost(ke_mutation* mutation, double usd);
KE_API ke_status ke_mutation_fail(ke_mutation* mutation, const char* error);
KE_API ke_status ke_mutation_set_exhausted(ke_mutation* mutation, const char* reason);

/* ---------------------------------------------------------------------------------------------------
 * Custom fitness: the host judges candidates itself (its own device, simulator or benchmark harness).
 */

typedef struct ke_candidate ke_candidate;   /* valid during the callback */
typedef struct ke_evaluation ke_evaluation; /* filled during the callback */

/* Called on evaluation threads: with jobs > 1, several calls run at once. Fill `evaluation`: a status
 * (KE_EVAL_OK needs a time for every workload), a message, a compile log. Non-zero aborts the run. */
typedef int (*ke_evaluate_fn)(const ke_candidate* candidate, ke_evaluation* evaluation, void* user_data);

KE_API ke_status ke_candidate_source(const char** out, const ke_candidate* candidate);
KE_API ke_status ke_candidate_language(const char** out, const ke_candidate* candidate);
KE_API ke_status ke_candidate_tunable_count(size_t* out, const ke_candidate* candidate);
KE_API ke_status ke_candidate_tunable(const char** name, int64_t* value, const ke_candidate* candidate, size_t index);
KE_API ke_status ke_candidate_tunable_value(int64_t* out, const ke_candidate* candidate, const char* name);
KE_API ke_status ke_candidate_workload_count(size_t* out, const ke_candidate* candidate);
/* Seeds the candidate's random inputs: fresh for every evaluation, repeatable for a run's seed. */
KE_API ke_status ke_candidate_input_seed(uint64_t* out, const ke_candidate* candidate);

KE_API ke_status ke_evaluation_set_status(ke_evaluation* evaluation, ke_eval_status status);
KE_API ke_status ke_evaluation_set_message(ke_evaluation* evaluation, const char* message);
KE_API ke_status ke_evaluation_set_compile_log(ke_evaluation* evaluation, const char* log);
KE_API ke_status ke_evaluation_set_time_us(ke_evaluation* evaluation, size_t workload, double median_us,
                                           double spread_us);

/* ---------------------------------------------------------------------------------------------------
 * Results: what a run found. Immutable; every borrowed pointer lives until ke_result_destroy.
 */

typedef struct ke_result ke_result;

KE_API ke_status ke_result_destroy(ke_result* result);
KE_API ke_status ke_result_node_count(size_t* out, const ke_result* result);
KE_API ke_status ke_result_node(const ke_node** out, const ke_result* result, int64_t id);
KE_API ke_status ke_result_seed(const ke_node** out, const ke_result* result);
/* The fastest correct node (the seed if nothing beat it); KE_ERROR_NOT_FOUND if the seed failed. */
KE_API ke_status ke_result_best(const ke_node** out, const ke_result* result);
/* The chain of first parents from the seed to `id`, both included. */
KE_API ke_status ke_result_lineage(const int64_t** ids, size_t* count, const ke_result* result, int64_t id);
KE_API ke_status ke_result_children(const int64_t** ids, size_t* count, const ke_result* result, int64_t id);
KE_API ke_status ke_result_stop_reason(const char** out, const ke_result* result);
KE_API ke_status ke_result_evaluations(int64_t* out, const ke_result* result);
KE_API ke_status ke_result_status_count(int64_t* out, const ke_result* result, ke_eval_status status);
KE_API ke_status ke_result_elapsed_s(double* out, const ke_result* result);
KE_API ke_status ke_result_mutator_failures(int64_t* out, const ke_result* result);
KE_API ke_status ke_result_tokens(int64_t* out, const ke_result* result);
/* What the run's model calls cost, in US dollars (a resumed run's includes its earlier calls). */
KE_API ke_status ke_result_cost_usd(double* out, const ke_result* result);
/* The end-of-run confirmation of the best node: whether the search's figure was borne out when the best
 * and the seed were timed again, interleaved, on fresh inputs; the confirmed speedup (the one reported;
 * geometric mean over workloads) and the lowest and highest of the single rounds' speedups. Any out-pointer
 * may be NULL. KE_ERROR_NOT_FOUND when nothing was confirmed (the best is the seed, or confirmation is off). */
KE_API ke_status ke_result_confirmation(int* confirmed, double* speedup, double* speedup_low, double* speedup_high,
                                        const ke_result* result);
/* The device the run used, with its measured ceilings. */
KE_API ke_status ke_result_device(const ke_device_info** out, const ke_result* result);
/* The JSON object of `kernelevolve run --json` (or `check --json` for a check). */
KE_API ke_status ke_result_report_json(const char** out, const ke_result* result);
/* The table `kernelevolve run` prints. */
KE_API ke_status ke_result_report_text(const char** out, const ke_result* result);

/* ---------------------------------------------------------------------------------------------------
 * Evolver: composes the parts and runs the search. Defaults: the param mutator, the command-line tool's
 * default policy, a stop after 64 evaluations, candidates evaluated in worker processes on the CPU, no store.
 */

typedef struct ke_evolver ke_evolver;

typedef struct ke_evolver_options {
  unsigned int version;
  /* "cpu", "cuda", "cuda:N", "hip", "hip:N"; NULL: "cpu". Or several: a list ("cuda:0,cuda:1") or every
   * device of a kind ("cuda:all"), each timing only its own candidates; devices of different models
   * are separate classes, never compared (the result's best is on the first device's class). */
  const char* device;
  uint64_t seed; /* seeds selection, mutation and the random inputs */
  int jobs;      /* candidates evaluated at once (per device), each in its own worker */
  /* Non-zero: evaluate in this process, without workers. Faster, but a crashing candidate takes the
   * host with it: only for candidates you trust. One candidate at a time (jobs must be 1). */
  int in_process;
  double timeout_s;        /* per candidate, in workers; 0: 10x the seed's evaluation, at least 10 s */
  const char* worker_path; /* NULL: $KE_WORKER, else beside the library, ../libexec/kernelevolve */
  /* A file locked around each timing loop so that parallel runs on one device never time at once.
   * NULL: one per device in $TMPDIR (as the command-line tool does); "": none. */
  const char* timing_lock;
  int trials; /* verification trials per workload, each with fresh inputs */
  int max_consecutive_mutator_failures;
  /* Version 2. At the end of a run, the best node and the seed are evaluated again, interleaved, this many
   * times each, and the result's speedup is the confirmed one (ke_result_confirmation); 0: off. A version-1
   * struct gets the default, 3. */
  int confirm_rounds;
  /* Version 3. Warm start: databases of other runs (`warm_start_store_count` paths). Each run first evaluates,
   * right after its seed, the best kernels of this operator found there (a stored run whose spec has the same
   * name, family or signature, and the same language and arguments), at most `warm_start_max`, as nodes of
   * mutator "warm". ke_evolver_create fails (KE_ERROR_INVALID_ARGUMENT) for a path that is not a KernelEvolve
   * database; none matching is no error. A version-2 struct gets none. */
  const char* const* warm_start_stores;
  size_t warm_start_store_count;
  int warm_start_max;
  /* Version 4. Before a model mutator builds on a parent (or its prompt names the best), that node and the
   * seed are evaluated again, interleaved, this many times each, once per node and outside the evaluation
   * budget, and the prompt says whether the parent's figure was confirmed; 0: off, and the prompt says
   * "Single measurement". Twice as many on a noisy machine, as for confirm_rounds. A version-3 struct gets
   * the default, 2. */
  int confirm_parent_rounds;
} ke_evolver_options;
#define KE_EVOLVER_OPTIONS_VERSION 4
#define KE_EVOLVER_OPTIONS_INIT \
  { KE_EVOLVER_OPTIONS_VERSION, NULL, 1, 1, 0, 0.0, NULL, NULL, 5, 64, 3, NULL, 0, 3, 2 }
KE_API ke_status ke_evolver_options_init(ke_evolver_options* options, unsigned int version);

/* Copies and validates the spec (it may be destroyed after). `options` may be NULL for the defaults.
 * Nothing is started until a run. */
KE_API ke_status ke_evolver_create(ke_evolver** out, const ke_spec* spec, const ke_evolver_options* options);
/* Refused while a run is in progress (from a callback, say). */
KE_API ke_status ke_evolver_destroy(ke_evolver* evolver);

/* The mutator to use (the evolver keeps a reference: the handle may be destroyed after). */
KE_API ke_status ke_evolver_set_mutator(ke_evolver* evolver, const ke_mutator* mutator);
/* The stop rule to use (default: 64 evaluations). The evolver keeps a reference to the rule, not a copy,
 * until it is destroyed or given another: the handle may be destroyed right after. */
KE_API ke_status ke_evolver_set_stop_rule(ke_evolver* evolver, const ke_stop_rule* rule);
/* The selection policy, by name ("greedy", "epsilon-greedy", "tournament", "ucb", "islands", "random"),
 * with options as name/value pairs (`count` may be 0): "epsilon" (epsilon-greedy), "tournament_size"
 * (tournament), "exploration" (ucb), "islands", "migration_interval", "features" (comma-separated: a
 * tunable's name, "source_length", "resource:NAME") and "bins_per_octave" (islands). An option the
 * policy does not read is refused. Default: the command-line tool's default policy. */
KE_API ke_status ke_evolver_set_policy(ke_evolver* evolver, const char* name, const char* const* option_names,
                                       const char* const* option_values, size_t count);
/* The names ke_evolver_set_policy knows; a static array. */
KE_API ke_status ke_policy_names(const char* const** names, size_t* count);

typedef enum ke_progress_event {
  KE_PROGRESS_START = 0,           /* before the seed is evaluated; `node` is NULL */
  KE_PROGRESS_NODE = 1,            /* a node was evaluated */
  KE_PROGRESS_MUTATOR_FAILURE = 2, /* the mutator made no child; `message` says why */
  KE_PROGRESS_FINISH = 3,          /* the run stopped; `message` is the reason */
  KE_PROGRESS_MAX_ENUM = 0x7fffffff
} ke_progress_event;

/* What a progress callback sees. Filled by the library; fields are only appended (check `version`). */
typedef struct ke_progress {
  unsigned int version;
  ke_progress_event event;
  const ke_node* node; /* KE_PROGRESS_NODE: the node just evaluated; else NULL */
  int64_t evaluations; /* the seed included */
  double elapsed_s;
  double best_speedup;
  int64_t evaluations_since_improvement;
  int64_t tokens;
  const char* message; /* never NULL */
  double cost_usd;     /* version 2: what the model calls cost so far, in US dollars */
} ke_progress;
#define KE_PROGRESS_VERSION 2

/* Called on the thread that runs ke_evolver_run (or ke_evolver_resume). Non-zero aborts the run (to end
 * it normally instead, see ke_stop_rule_callback). NULL removes it. The evolver keeps `user_data` as is
 * and passes it only during its runs: it must stay valid through every later ke_evolver_run and
 * ke_evolver_resume of the evolver, until the callback is replaced or removed or the evolver destroyed.
 * The library never frees it. */
typedef int (*ke_progress_fn)(const ke_progress* progress, void* user_data);
KE_API ke_status ke_evolver_set_progress(ke_evolver* evolver, ke_progress_fn progress, void* user_data);

/* Replaces device evaluation with the host's own; `device_name` names it in reports. NULL `evaluate`
 * goes back to the device. `user_data` must stay valid through every later run and check of the evolver,
 * until it is replaced or the evolver destroyed; the library never frees it. */
KE_API ke_status ke_evolver_set_evaluator(ke_evolver* evolver, const char* device_name, ke_evaluate_fn evaluate,
                                          void* user_data);

/* Evaluates the seed, then searches until a stop rule fires or the space is exhausted. Each run is a new
 * search. A spec without a seed (a PyTorch problem) needs the command or model mutator, or a mix of one:
 * it writes the first kernel from the reference, node 0 (the run ends without nodes, its stop reason
 * saying why, if it cannot); with another mutator, KE_ERROR_INVALID_ARGUMENT.
 * KE_ERROR_DEVICE_UNAVAILABLE if the device cannot start; KE_ERROR_ABORTED if a callback returned non-zero. */
KE_API ke_status ke_evolver_run(ke_result** out, ke_evolver* evolver);
/* Evaluates only the seed (node 0) and the reference against itself (node 1, mutator "reference", when
 * it runs on the evolver's device and is not a PyTorch module), as `kernelevolve check` does. A spec
 * without a seed gives node 0 the status KE_EVAL_INVALID and a message that says so. */
KE_API ke_status ke_evolver_check(ke_result** out, ke_evolver* evolver);
/* What the last run or check found, even one that was aborted (nodes still in flight then read
 * KE_EVAL_PENDING). KE_ERROR_NOT_FOUND before the first run. */
KE_API ke_status ke_evolver_result(ke_result** out, const ke_evolver* evolver);

/* ---------------------------------------------------------------------------------------------------
 * Store: the SQLite database of runs. An evolver given a store commits each node as it is evaluated (a
 * killed process loses only the candidates in flight), can resume a stored run, and answers a candidate
 * measured before (same problem, same device) from the store instead of measuring it again. A store may
 * serve several evolvers; the evolvers keep it open as long as they need it.
 */

typedef struct ke_store ke_store;

/* Opens the database at `path`, creating it unless `read_only`. KE_ERROR_INVALID_ARGUMENT for a file that
 * is not a KernelEvolve database (or of a schema this library cannot use); KE_ERROR_INTERNAL for I/O. */
KE_API ke_status ke_store_open(ke_store** out, const char* path, int read_only);
KE_API ke_status ke_store_destroy(ke_store* store);
KE_API ke_status ke_store_path(const char** out, const ke_store* store);
/* Runs, oldest first. */
KE_API ke_status ke_store_run_count(size_t* out, const ke_store* store);
KE_API ke_status ke_store_run_id(int64_t* out, const ke_store* store, size_t index);
/* The newest run; KE_ERROR_NOT_FOUND when there is none. */
KE_API ke_status ke_store_latest_run(int64_t* out, const ke_store* store);
/* A stored run as a result: its spec, device, committed nodes and totals (`kernelevolve show`). */
KE_API ke_status ke_store_load(ke_result** out, const ke_store* store, int64_t run);
/* The table `kernelevolve show` prints; `limit` > 0 keeps it to the first nodes. */
KE_API ke_status ke_store_show(const char** out, const ke_store* store, int64_t run, size_t limit);
/* The best kernel's source with its tunables as #defines (`kernelevolve best`); KE_ERROR_NOT_FOUND if
 * the run has no correct kernel. */
KE_API ke_status ke_store_best_source(const char** out, const ke_store* store, int64_t run);
/* The run's graph as "json" or as Graphviz "dot" (`kernelevolve export`). */
KE_API ke_status ke_store_export(const char** out, const ke_store* store, int64_t run, const char* format);

/* Each later run of the evolver is recorded in `store` (NULL: none). With `reuse`, candidates the store
 * holds a measurement of (same spec measurements, same device kind and model) are not measured again. */
KE_API ke_status ke_evolver_set_store(ke_evolver* evolver, ke_store* store, int reuse);
/* Goes on with a stored run of the evolver's spec (`run` 0: the latest of this spec) on the same device
 * kind and model: its nodes are not evaluated again, and the stop rules count its totals so far. */
KE_API ke_status ke_evolver_resume(ke_result** out, ke_evolver* evolver, int64_t run);
/* The run's id: in the store when the evolver has one; else the evolver numbers its runs from 1. 0 for
 * a check. */
KE_API ke_status ke_result_run_id(int64_t* out, const ke_result* result);

/* ---------------------------------------------------------------------------------------------------
 * Program: what a run found, put to use. A verified node of a run database (the run's best by default),
 * compiled once for a device of the class it was verified on, and called on the caller's own buffers: CUDA and
 * HIP in the GPU's primary context (the CUDA and HIP runtimes' and PyTorch's) on the caller's stream, the CPU
 * on the calling thread. Programs of several kernels, temporaries and library steps are called the same way.
 *
 * A stored program is code that runs in the caller's process, with the caller's rights, outside any sandbox:
 * load only databases you trust, as you would a shared library.
 */

typedef struct ke_program ke_program;

typedef struct ke_program_options {
  unsigned int version;
  int64_t run;        /* 0: the database's latest run */
  int64_t node;       /* -1: the run's best (the node its end chose, or the graph's fastest) */
  const char* device; /* "cpu", "cuda", "cuda:N", "hip", "hip:N"; NULL: the kind it was verified on, device 0 */
} ke_program_options;
#define KE_PROGRAM_OPTIONS_VERSION 1
#define KE_PROGRAM_OPTIONS_INIT \
  { KE_PROGRAM_OPTIONS_VERSION, 0, -1, NULL }
KE_API ke_status ke_program_options_init(ke_program_options* options, unsigned int version);

/* Loads and compiles the node. KE_ERROR_INVALID_ARGUMENT, naming the database, run and node, when there is no
 * such run or node, the node was not verified, it is not what was recorded (the file edited after the run: the
 * message names sources.hash or nodes.key), the evidence of its verification is not whole (the message names
 * what is missing), it was verified on another class of device (another GPU model), or it does not compile here;
 * KE_ERROR_DEVICE_UNAVAILABLE when the device cannot be opened. */
KE_API ke_status ke_program_load(ke_program** out, const char* database, const ke_program_options* options);
KE_API ke_status ke_program_destroy(ke_program* program);

/* The signature: the spec's params in order (what a call's `args` follow). `role` is "in", "out", "inout",
 * "size" or "scalar"; `dtype` as a spec writes it ("f32", "i64", ...). */
KE_API ke_status ke_program_param_count(size_t* out, const ke_program* program);
KE_API ke_status ke_program_param(const char** name, const char** dtype, const char** role, const ke_program* program,
                                  size_t index);
/* The shape of buffer param `index` when the size params take `sizes` (`count` values, in the order the size
 * params come in the signature): `*ndim` dimensions written to `dims`, which holds `capacity`
 * (KE_ERROR_INVALID_ARGUMENT when too few, with `*ndim` still set). What a caller allocates outputs by. */
KE_API ke_status ke_program_shape(int64_t* dims, size_t capacity, size_t* ndim, const ke_program* program, size_t index,
                                  const int64_t* sizes, size_t count);

/* Flags of ke_program_call. */
#define KE_PROGRAM_ANY_SHAPE 1u /* run on sizes and scalars it was not verified on */
#define KE_PROGRAM_WAIT 2u      /* GPU: run on the library's own stream and return when done (`stream` NULL) */

/* Runs the program on `args` (`count` of them, one per param, in order): for a buffer, a pointer to the pointer
 * to its data (device memory for a GPU program, holding the elements its shape gives at these sizes); for a
 * size or scalar, a pointer to its value in its dtype. On a GPU it is queued on `stream` (a CUstream or
 * hipStream_t; NULL: the default stream) and the call returns without waiting, as a kernel launch does, so a
 * CUDA graph can capture it; on the CPU it runs now, on this thread, and `stream` must be NULL.
 * KE_ERROR_INVALID_ARGUMENT when the sizes and scalars are not a workload it was verified on (the message says
 * which were), unless KE_PROGRAM_ANY_SHAPE; and, naming the param, whatever the flags, for a NULL data pointer of
 * a buffer that has elements at these sizes, a negative size, or sizes whose buffers would overflow 64 bits of
 * bytes. KE_ERROR_INTERNAL when a step fails to run. Temporaries are allocated and poisoned at the first call of
 * each size and kept, as they were through verification; one call at a time per program, and calls on different
 * streams must be ordered by the caller. */
KE_API ke_status ke_program_call(ke_program* program, void* const* args, size_t count, void* stream,
                                 unsigned int flags);
/* Whether `args` (as ke_program_call takes them) are sizes and scalars it was verified on: 1 or 0 in `*out`
 * (KE_ERROR_INVALID_ARGUMENT for a NULL argument or a negative size). */
KE_API ke_status ke_program_verified(int* out, const ke_program* program, void* const* args, size_t count);
/* Calls made so far (each ke_program_call that queued or ran the program): proof that a host called it. */
KE_API ke_status ke_program_calls(int64_t* out, const ke_program* program);

/* Where it came from, as JSON: {"database", "run", "node", "problem", "device_class", "speedup"}. */
KE_API ke_status ke_program_provenance_json(const char** out, const ke_program* program);
/* The problem's spec as JSON, sources inline (a PyTorch problem's module under "reference"). */
KE_API ke_status ke_program_spec_json(const char** out, const ke_program* program);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KERNELEVOLVE_H */
