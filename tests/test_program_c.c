/* A stored program called from C (issue 29): test_program_use.cmake makes a real run's database of the column-sum
 * spec (tests/fixtures/e2e/colsum.json: x M x N in, y N out; workloads 1024 x 1024 and 777 x 1531) on the CPU,
 * and this program loads its best node through the C API and calls it on its own buffers.
 *   test_program_c RUN.db */
#include <kernelevolve.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, what)                                                                                 \
  do {                                                                                                    \
    if (!(cond)) {                                                                                        \
      fprintf(stderr, "%s:%d: FAILED: %s (last error: %s)\n", __FILE__, __LINE__, what, ke_last_error()); \
      ++failures;                                                                                         \
    }                                                                                                     \
  } while (0)

static ke_status call(ke_program* p, const float* x, float* y, int64_t m, int64_t n, void* stream, unsigned flags) {
  const void* px = x;
  void* py = y;
  void* args[4];
  args[0] = (void*)&px;
  args[1] = &py;
  args[2] = &m;
  args[3] = &n;
  return ke_program_call(p, args, 4, stream, flags);
}

/* y against column sums in double, within the spec's tolerance (atol 1e-4, rtol 1e-5). */
static int column_sums_match(const float* x, const float* y, int64_t m, int64_t n) {
  int64_t i, j;
  for (j = 0; j < n; ++j) {
    double sum = 0;
    for (i = 0; i < m; ++i) sum += x[i * n + j];
    if (!(fabs(y[j] - sum) <= 1e-4 + 1e-5 * fabs(sum))) {
      fprintf(stderr, "y[%ld] = %g, the column sum is %g\n", (long)j, y[j], sum);
      return 0;
    }
  }
  return 1;
}

static float* random_matrix(int64_t count) {
  float* x = malloc((size_t)count * sizeof(float));
  int64_t i;
  for (i = 0; i < count; ++i) x[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
  return x;
}

int main(int argc, char** argv) {
  ke_program_options options;
  ke_program* p = NULL;
  ke_program* none = NULL;
  const char *name, *dtype, *role, *json;
  size_t count = 0, ndim = 0;
  int64_t dims[4], sizes[2] = {777, 1531}, calls = -1;
  int verified = -1;
  float *x, *y;
  if (argc != 2) {
    fprintf(stderr, "usage: test_program_c RUN.db\n");
    return 2;
  }
  CHECK(ke_program_options_init(&options, KE_PROGRAM_OPTIONS_VERSION) == KE_OK, "options");
  CHECK(ke_program_load(&p, argv[1], &options) == KE_OK, "loading the run's best");
  if (!p) return 1;

  /* The signature, and the output's shape at a workload. */
  CHECK(ke_program_param_count(&count, p) == KE_OK && count == 4, "four params");
  CHECK(ke_program_param(&name, &dtype, &role, p, 0) == KE_OK && !strcmp(name, "x") && !strcmp(dtype, "f32") &&
            !strcmp(role, "in"),
        "param 0 is x, f32, in");
  CHECK(ke_program_param(&name, &dtype, &role, p, 1) == KE_OK && !strcmp(name, "y") && !strcmp(role, "out"),
        "param 1 is y, out");
  CHECK(ke_program_param(&name, &dtype, &role, p, 3) == KE_OK && !strcmp(name, "N") && !strcmp(role, "size") &&
            !strcmp(dtype, "i64"),
        "param 3 is N, an i64 size");
  CHECK(ke_program_param(&name, &dtype, &role, p, 4) == KE_ERROR_NOT_FOUND, "no param 4");
  CHECK(ke_program_shape(dims, 4, &ndim, p, 0, sizes, 2) == KE_OK && ndim == 2 && dims[0] == 777 && dims[1] == 1531,
        "x is 777 x 1531");
  CHECK(ke_program_shape(dims, 4, &ndim, p, 1, sizes, 2) == KE_OK && ndim == 1 && dims[0] == 1531, "y is 1531");
  CHECK(ke_program_shape(dims, 4, &ndim, p, 2, sizes, 2) == KE_ERROR_INVALID_ARGUMENT, "M has no shape");
  CHECK(ke_program_shape(dims, 1, &ndim, p, 0, sizes, 2) == KE_ERROR_INVALID_ARGUMENT && ndim == 2,
        "too small a dims array is refused, with the rank given");

  /* Where it came from. */
  CHECK(ke_program_provenance_json(&json, p) == KE_OK && strstr(json, argv[1]) && strstr(json, "\"run\": 1") &&
            strstr(json, "\"device_class\": \"cpu ") && strstr(json, "\"problem\": \"colsum\""),
        "provenance names the database, run 1, the CPU and the problem");
  CHECK(ke_program_spec_json(&json, p) == KE_OK && strstr(json, "\"colsum\""), "the spec");

  /* A verified workload, on the caller's buffers. */
  x = random_matrix(777 * 1531);
  y = malloc(1531 * sizeof(float));
  memset(y, 0, 1531 * sizeof(float));
  CHECK(call(p, x, y, 777, 1531, NULL, 0) == KE_OK, "a call at a verified workload");
  CHECK(column_sums_match(x, y, 777, 1531), "its answer is the column sums");
  memset(y, 0, 1531 * sizeof(float));
  CHECK(call(p, x, y, 777, 1531, NULL, KE_PROGRAM_WAIT) == KE_OK && column_sums_match(x, y, 777, 1531),
        "KE_PROGRAM_WAIT gives the same");
  CHECK(ke_program_calls(&calls, p) == KE_OK && calls == 2, "two calls counted");

  /* A shape it was not verified on: refused, saying which were; run with KE_PROGRAM_ANY_SHAPE. */
  CHECK(call(p, x, y, 5, 3, NULL, 0) == KE_ERROR_INVALID_ARGUMENT, "5 x 3 is refused");
  CHECK(strstr(ke_last_error(), "not a workload it was verified on") && strstr(ke_last_error(), "M = 777"),
        "the refusal names the verified workloads");
  {
    int64_t m = 5, n = 3;
    const void* px = x;
    void* py = y;
    void* args[4];
    args[0] = (void*)&px, args[1] = &py, args[2] = &m, args[3] = &n;
    CHECK(ke_program_verified(&verified, p, args, 4) == KE_OK && verified == 0, "5 x 3 is not verified");
    m = 1024, n = 1024;
    CHECK(ke_program_verified(&verified, p, args, 4) == KE_OK && verified == 1, "1024 x 1024 is");
    CHECK(ke_program_call(p, args, 3, NULL, 0) == KE_ERROR_INVALID_ARGUMENT, "three arguments for four params");
  }
  CHECK(call(p, x, y, 5, 3, NULL, KE_PROGRAM_ANY_SHAPE) == KE_OK && column_sums_match(x, y, 5, 3),
        "5 x 3 with KE_PROGRAM_ANY_SHAPE is right");
  CHECK(call(p, x, y, 777, 1531, (void*)x, 0) == KE_ERROR_INVALID_ARGUMENT, "a stream on the CPU is refused");
  CHECK(call(p, x, y, 777, 1531, NULL, 8u) == KE_ERROR_INVALID_ARGUMENT, "an unknown flag is refused");
  CHECK(ke_program_calls(&calls, p) == KE_OK && calls == 3, "refused calls are not counted");

  /* Other nodes: the seed loads and answers the same; a node that is not there is named. */
  options.node = 0;
  CHECK(ke_program_load(&none, argv[1], &options) == KE_OK, "node 0, the seed");
  memset(y, 0, 1531 * sizeof(float));
  CHECK(none && call(none, x, y, 777, 1531, NULL, 0) == KE_OK && column_sums_match(x, y, 777, 1531),
        "the seed's answer");
  CHECK(ke_program_destroy(none) == KE_OK, "destroy");
  none = NULL;
  options.node = 9999;
  CHECK(ke_program_load(&none, argv[1], &options) == KE_ERROR_INVALID_ARGUMENT && !none &&
            strstr(ke_last_error(), "has no node 9999"),
        "node 9999 is refused, by number");
  options.node = -1;
  options.run = 42;
  CHECK(ke_program_load(&none, argv[1], &options) == KE_ERROR_INVALID_ARGUMENT && !none, "run 42 is refused");
  options.run = 0;
  CHECK(ke_program_load(&none, "/nonexistent/run.db", &options) != KE_OK && !none, "a missing database");
  CHECK(ke_program_load(&none, argv[1], NULL) == KE_OK && none, "NULL options: the defaults");
  CHECK(ke_program_destroy(none) == KE_OK && ke_program_destroy(NULL) == KE_OK, "destroy, and destroy(NULL)");

  CHECK(ke_program_destroy(p) == KE_OK, "destroy");
  free(x);
  free(y);
  if (failures) {
    fprintf(stderr, "test_program_c: %d checks failed\n", failures);
    return 1;
  }
  printf("test_program_c: every check passed\n");
  return 0;
}
