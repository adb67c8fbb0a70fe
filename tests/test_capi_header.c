/* The C API header on its own: compiled as C99 with -Wall -Wextra -pedantic -Werror (test_capi_header)
 * and, through test_capi_header_cxx.cpp, as C++. At run time, a plain-C tour of the calls that need no
 * device: version, errors, statuses, a spec built field by field and read back, a host stop rule freeing
 * its user data. Exits 0 when all pass. */
#include <kernelevolve.h>
#include <kernelevolve.h> /* twice: the include guard holds */
#include <stdio.h>
#include <string.h>

static int failures = 0;
static int stop_rule_freed = 0;

static int stop_never(const ke_search_state* state, void* user_data) {
  (void)state;
  (void)user_data;
  return 0;
}

static void count_free(void* user_data) { *(int*)user_data += 1; }

#define EXPECT(cond)                                                                                       \
  do {                                                                                                     \
    if (!(cond)) {                                                                                         \
      fprintf(stderr, "%s:%d: failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, ke_last_error()); \
      failures += 1;                                                                                       \
    }                                                                                                      \
  } while (0)

int main(void) {
  ke_timing timing = KE_TIMING_INIT;
  ke_mismatch mismatch = KE_MISMATCH_INIT;
  ke_evolver_options options = KE_EVOLVER_OPTIONS_INIT;
  ke_param_mutator_options param_options = KE_PARAM_MUTATOR_OPTIONS_INIT;
  ke_command_mutator_options command_options = KE_COMMAND_MUTATOR_OPTIONS_INIT;
  ke_evolver_options by_function;
  int major = -1, minor = -1, patch = -1;
  const char* name = NULL;
  const char* json = NULL;
  ke_spec* spec = NULL;
  ke_spec* sentinel = (ke_spec*)&failures; /* never a spec: a failed call must leave it as it is */
  ke_spec* again = NULL;
  size_t count = 0;
  const char* shape_x[] = {"M", "N"};
  const char* shape_y[] = {"N"};
  const char* names[] = {"M", "N"};
  const int64_t sizes[] = {64, 48};
  const int64_t blocks[] = {1, 2, 4, 8};

  (void)timing;
  (void)mismatch;
  (void)param_options;
  (void)command_options;

  EXPECT(ke_version(&major, &minor, &patch) == KE_OK);
  EXPECT(major == KE_VERSION_MAJOR && minor == KE_VERSION_MINOR && patch == KE_VERSION_PATCH);
  EXPECT(ke_version(NULL, NULL, NULL) == KE_OK);
  EXPECT(ke_last_error() != NULL);

  EXPECT(ke_evolver_options_init(&by_function, KE_EVOLVER_OPTIONS_VERSION) == KE_OK);
  EXPECT(by_function.version == options.version && by_function.jobs == options.jobs &&
         by_function.seed == options.seed && by_function.trials == options.trials &&
         by_function.max_consecutive_mutator_failures == options.max_consecutive_mutator_failures &&
         by_function.device == NULL && by_function.in_process == 0);
  EXPECT(ke_evolver_options_init(&by_function, 999) == KE_ERROR_INVALID_ARGUMENT);

  EXPECT(ke_status_name(&name, KE_ERROR_BAD_SPEC) == KE_OK && strcmp(name, "bad_spec") == 0);
  EXPECT(ke_eval_status_name(&name, KE_EVAL_COMPILE_ERROR) == KE_OK && strcmp(name, "compile_error") == 0);

  /* A failed call names itself and its argument, and leaves the out-parameter alone. */
  EXPECT(ke_spec_load(&sentinel, "/nonexistent/spec.json") == KE_ERROR_INTERNAL);
  EXPECT(sentinel == (ke_spec*)&failures);
  EXPECT(strstr(ke_last_error(), "ke_spec_load") != NULL);
  EXPECT(ke_spec_load(&sentinel, NULL) == KE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(ke_last_error(), "path") != NULL);
  EXPECT(ke_spec_load(NULL, "x.json") == KE_ERROR_INVALID_ARGUMENT);
  EXPECT(ke_spec_destroy(NULL) == KE_OK);

  /* The colsum problem, field by field. */
  EXPECT(ke_spec_create(&spec, "colsum", "c", "colsum") == KE_OK);
  EXPECT(ke_spec_add_buffer(spec, "x", "f32", "in", shape_x, 2) == KE_OK);
  EXPECT(ke_spec_add_buffer(spec, "y", "f32", "out", shape_y, 1) == KE_OK);
  EXPECT(ke_spec_add_size(spec, "M", "i64") == KE_OK);
  EXPECT(ke_spec_add_size(spec, "N", "i64") == KE_OK);
  EXPECT(ke_spec_add_workload(spec, names, sizes, 2) == KE_OK);
  EXPECT(ke_spec_set_input(spec, "x", "normal", 0.0, 1.0) == KE_OK);
  EXPECT(ke_spec_set_tolerance(spec, 1e-4, 1e-5) == KE_OK);
  EXPECT(
      ke_spec_set_source(
          spec, KE_SOURCE_REFERENCE,
          "#include <stdint.h>\n"
          "void colsum(const float* x, float* y, int64_t M, int64_t N) {\n"
          "  for (int64_t j = 0; j < N; ++j) { float s = 0; for (int64_t i = 0; i < M; ++i) s += x[i*N+j]; y[j] = s; }\n"
          "}\n",
          NULL, NULL) == KE_OK);
  EXPECT(
      ke_spec_set_source(
          spec, KE_SOURCE_SEED,
          "#include <stdint.h>\n"
          "void colsum(const float* x, float* y, int64_t M, int64_t N) {\n"
          "  for (int64_t j = 0; j < N; ++j) { float s = 0; for (int64_t i = 0; i < M; ++i) s += x[i*N+j]; y[j] = s * BLOCK / BLOCK; }\n"
          "}\n",
          "c", NULL) == KE_OK);
  EXPECT(ke_spec_add_tunable(spec, "BLOCK", blocks, 4) == KE_OK);
  EXPECT(ke_spec_add_constraint(spec, "BLOCK <= N") == KE_OK);
  EXPECT(ke_spec_set_cost(spec, "M * N", "4 * M * N + 4 * N") == KE_OK);
  EXPECT(ke_spec_set_notes(spec, "built in C") == KE_OK);
  EXPECT(ke_spec_validate(spec) == KE_OK);
  EXPECT(ke_spec_name(&name, spec) == KE_OK && strcmp(name, "colsum") == 0);
  EXPECT(ke_spec_workload_count(&count, spec) == KE_OK && count == 1);

  /* Field errors are bad_spec and name the field. */
  EXPECT(ke_spec_add_size(spec, "K", "f99") == KE_ERROR_BAD_SPEC && strstr(ke_last_error(), "f99") != NULL);
  EXPECT(ke_spec_add_constraint(spec, "BLOCK <=") == KE_ERROR_BAD_SPEC &&
         strstr(ke_last_error(), "constraints[1]") != NULL);
  EXPECT(ke_spec_add_tunable(spec, "BLOCK", blocks, 4) == KE_ERROR_BAD_SPEC);
  EXPECT(ke_spec_set_source(spec, (ke_source_kind)7, "", NULL, NULL) == KE_ERROR_INVALID_ARGUMENT);

  /* Its JSON reads back as the same spec. */
  EXPECT(ke_spec_to_json(&json, spec) == KE_OK && strstr(json, "\"BLOCK\"") != NULL);
  EXPECT(ke_spec_parse(&again, json, NULL) == KE_OK);
  EXPECT(ke_spec_name(&name, again) == KE_OK && strcmp(name, "colsum") == 0);

  /* A handle of another kind is refused, not read. */
  {
    ke_stop_rule* rule = NULL;
    EXPECT(ke_stop_rule_max_evaluations(&rule, 3) == KE_OK);
    EXPECT(ke_spec_validate((const ke_spec*)(const void*)rule) == KE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(ke_last_error(), "not a live ke_spec") != NULL);
    EXPECT(ke_stop_rule_destroy(rule) == KE_OK);
  }

  /* A stop rule of the host's: its user data is finalized when the rule goes. */
  {
    ke_stop_rule* rule = NULL;
    EXPECT(ke_stop_rule_callback(&rule, "never", stop_never, &stop_rule_freed, count_free) == KE_OK);
    EXPECT(stop_rule_freed == 0);
    EXPECT(ke_stop_rule_destroy(rule) == KE_OK);
    EXPECT(stop_rule_freed == 1);
  }

  EXPECT(ke_spec_destroy(again) == KE_OK);
  EXPECT(ke_spec_destroy(spec) == KE_OK);
  if (failures == 0) printf("test_capi_header: all passed\n");
  return failures == 0 ? 0 : 1;
}
