/* Evolves a kernel from a spec file through the C API, as a C host would: load the spec, compose an
 * evolver (parameter search, a stop rule, a progress callback), run it, and read the best kernel with
 * its lineage and the JSON report.
 *
 *   evolve_c SPEC [MAX_EVALS]        e.g. evolve_c problems/level1/row_sum/cpu.json 24
 */
#include <kernelevolve.h>
#include <stdio.h>
#include <stdlib.h>

/* Prints the failed call's message and leaves; every ke_ call returns a status. */
#define CHECK(call)                                                                                   \
  do {                                                                                                \
    ke_status check_status_ = (call);                                                                 \
    if (check_status_ != KE_OK) {                                                                     \
      fprintf(stderr, "evolve_c: %s\n", ke_last_error());                                             \
      exit(check_status_ == KE_ERROR_BAD_SPEC || check_status_ == KE_ERROR_INVALID_ARGUMENT ? 2 : 1); \
    }                                                                                                 \
  } while (0)

struct progress_state {
  double best;
};

/* Called after each evaluation: prints each improvement. Returning non-zero would abort the run. */
static int on_progress(const ke_progress* progress, void* user_data) {
  struct progress_state* state = (struct progress_state*)user_data;
  double speedup = 0;
  int64_t id = 0;
  const char* note = "";
  if (progress->event != KE_PROGRESS_NODE) return 0;
  CHECK(ke_node_speedup(&speedup, progress->node));
  if (speedup <= state->best) return 0;
  state->best = speedup;
  CHECK(ke_node_id(&id, progress->node));
  CHECK(ke_node_note(&note, progress->node));
  fprintf(stderr, "node %lld: %.2fx after %lld evaluations (%s)\n", (long long)id, speedup,
          (long long)progress->evaluations, note);
  return 0;
}

int main(int argc, char** argv) {
  ke_spec* spec = NULL;
  ke_evolver* evolver = NULL;
  ke_mutator* mutator = NULL;
  ke_stop_rule* rules[2] = {NULL, NULL};
  ke_stop_rule* stop = NULL;
  ke_result* result = NULL;
  const ke_node* best = NULL;
  const int64_t* lineage = NULL;
  const char* json = NULL;
  const char* text = NULL;
  size_t lineage_length = 0, tunables = 0, i = 0;
  double speedup = 0;
  int major = 0, minor = 0, patch = 0;
  long max_evals = argc > 2 ? strtol(argv[2], NULL, 10) : 24;
  struct progress_state state = {0.0};
  ke_evolver_options options = KE_EVOLVER_OPTIONS_INIT;

  if (argc < 2) {
    fprintf(stderr, "usage: evolve_c SPEC [MAX_EVALS]\n");
    return 2;
  }
  CHECK(ke_version(&major, &minor, &patch));
  fprintf(stderr, "KernelEvolve %d.%d.%d (header %d.%d.%d)\n", major, minor, patch, KE_VERSION_MAJOR, KE_VERSION_MINOR,
          KE_VERSION_PATCH);

  CHECK(ke_spec_load(&spec, argv[1]));
  options.device = "cpu";
  options.seed = 7;
  CHECK(ke_evolver_create(&evolver, spec, &options));

  CHECK(ke_mutator_param_create(&mutator, NULL));
  CHECK(ke_evolver_set_mutator(evolver, mutator));
  CHECK(ke_stop_rule_max_evaluations(&rules[0], max_evals));
  CHECK(ke_stop_rule_plateau(&rules[1], 40));
  CHECK(ke_stop_rule_any(&stop, (const ke_stop_rule* const*)rules, 2));
  CHECK(ke_evolver_set_stop_rule(evolver, stop));
  CHECK(ke_evolver_set_progress(evolver, on_progress, &state));

  CHECK(ke_evolver_run(&result, evolver));

  CHECK(ke_result_report_text(&text, result));
  fputs(text, stderr);
  CHECK(ke_result_best(&best, result));
  CHECK(ke_node_speedup(&speedup, best));
  CHECK(ke_node_tunable_count(&tunables, best));
  printf("best speedup %.2fx with", speedup);
  for (i = 0; i < tunables; ++i) {
    const char* name = NULL;
    int64_t value = 0;
    CHECK(ke_node_tunable(&name, &value, best, i));
    printf(" %s=%lld", name, (long long)value);
  }
  {
    int64_t best_id = 0;
    CHECK(ke_node_id(&best_id, best));
    CHECK(ke_result_lineage(&lineage, &lineage_length, result, best_id));
  }
  printf("\nlineage:");
  for (i = 0; i < lineage_length; ++i) printf(" %lld", (long long)lineage[i]);
  CHECK(ke_result_report_json(&json, result));
  printf("\n%s\n", json);

  /* Every handle has its destroy; the borrowed pointers above die with `result`. */
  CHECK(ke_result_destroy(result));
  CHECK(ke_evolver_destroy(evolver));
  CHECK(ke_stop_rule_destroy(stop));
  CHECK(ke_stop_rule_destroy(rules[0]));
  CHECK(ke_stop_rule_destroy(rules[1]));
  CHECK(ke_mutator_destroy(mutator));
  CHECK(ke_spec_destroy(spec));
  return speedup >= 1.0 ? 0 : 1;
}
