/* The C API from an installed tree: a short evolution in worker processes (so the installed library
 * must find the installed worker), then the best kernel. consumer_c SPEC */
#include <kernelevolve.h>
#include <stdio.h>

#define CHECK(call)                                         \
  do {                                                      \
    if ((call) != KE_OK) {                                  \
      fprintf(stderr, "consumer_c: %s\n", ke_last_error()); \
      return 1;                                             \
    }                                                       \
  } while (0)

int main(int argc, char** argv) {
  ke_spec* spec = NULL;
  ke_evolver* evolver = NULL;
  ke_stop_rule* stop = NULL;
  ke_result* result = NULL;
  const ke_node* best = NULL;
  double speedup = 0;
  int64_t evaluations = 0;
  if (argc < 2) {
    fprintf(stderr, "usage: consumer_c SPEC\n");
    return 2;
  }
  CHECK(ke_spec_load(&spec, argv[1]));
  CHECK(ke_evolver_create(&evolver, spec, NULL));
  CHECK(ke_stop_rule_max_evaluations(&stop, 4));
  CHECK(ke_evolver_set_stop_rule(evolver, stop));
  CHECK(ke_evolver_run(&result, evolver));
  CHECK(ke_result_evaluations(&evaluations, result));
  CHECK(ke_result_best(&best, result));
  CHECK(ke_node_speedup(&speedup, best));
  printf("consumer_c: %lld evaluations, best %.2fx\n", (long long)evaluations, speedup);
  CHECK(ke_result_destroy(result));
  CHECK(ke_stop_rule_destroy(stop));
  CHECK(ke_evolver_destroy(evolver));
  CHECK(ke_spec_destroy(spec));
  return evaluations == 4 && speedup >= 1.0 ? 0 : 1;
}
