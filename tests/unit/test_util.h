/* Shared fixtures of the cmocka unit tests: every test runs in its own scope
 * with a clean error state; error checks; fixed pseudo-random operands.
 * Include after <cmocka.h> and <jx/jx.h>. Header only: each test is an
 * executable of its own. */
#ifndef JX_TESTS_UNIT_TEST_UTIL_H
#define JX_TESTS_UNIT_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int setup(void **state) {
  (void)state;
  jx_clear_error();
  jx_scope_begin();
  return 0;
}

static inline int teardown(void **state) {
  (void)state;
  jx_scope_end();
  jx_clear_error();
  return 0;
}

/* Asserts success, printing the error first so a failure says why. */
static inline void check_ok(jx_status st) {
  if (st) fprintf(stderr, "%s\n", jx_last_error());
  assert_int_equal(st, JX_OK);
}

/* Asserts that the recorded error mentions `what` (printing it when not),
 * then clears it. */
static inline void assert_error_has(const char *what) {
  if (!strstr(jx_last_error(), what)) fprintf(stderr, "error was: %s\n", jx_last_error());
  assert_non_null(strstr(jx_last_error(), what));
  jx_clear_error();
}

/* xorshift64: the same sequence on every machine, from each test's own
 * nonzero seed in *state. */
static inline uint64_t test_rng_next(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

/* Uniform in [-1, 1), 53 random bits. */
static inline double test_rng_uniform(uint64_t *state) {
  return (double)(test_rng_next(state) >> 11) / 9007199254740992.0 * 2 - 1;
}

/* The backend the jitted programs of this run use: the suite's cuda.* CTest
 * entries (tests/CMakeLists.txt) run the same programs with JX_PLATFORM=cuda.
 * 1 when they run on CUDA device 0. */
static inline int test_on_cuda(void) {
  const char *p = getenv("JX_PLATFORM");
  return p && !strcmp(p, "cuda");
}

/* Guards a test's CPU-specific expectations (the CPU executable's kernel
 * counts, its disk cache of .so files, ...): 1 on the CPU; under CUDA it
 * prints what is not checked and why, and gives 0. */
static inline int test_cpu_only_check(const char *test, const char *why) {
  if (!test_on_cuda()) return 1;
  printf("[ cuda     ] %s: not checked under JX_PLATFORM=cuda: %s\n", test, why);
  return 0;
}
#define TEST_CPU_ONLY(why) test_cpu_only_check(__func__, why)

/* Skips the whole test under CUDA (cmocka reports it SKIPPED), printing why. */
#define TEST_SKIP_ON_CUDA(why)                                                                     \
  do {                                                                                             \
    if (test_on_cuda()) {                                                                          \
      printf("[ cuda     ] %s: skipped under JX_PLATFORM=cuda: %s\n", __func__, why);              \
      skip();                                                                                      \
    }                                                                                              \
  } while (0)

/* The relative tolerance for f32 GEMM results compared with the CPU's: 0
 * (bit for bit) on the CPU and under the fake CUDA driver (which runs
 * dot_general on the host), 1e-5 on a real GPU, where cuBLASLt sums in its
 * own order (scripts/gpu-check.sh's JX_TEST_CUDA_DRIVER=real). */
static inline double test_gemm_rtol(void) {
  const char *src = getenv("JX_CUDA_MODULE_SOURCE");
  return test_on_cuda() && !(src && !strcmp(src, "1")) ? 1e-5 : 0;
}

/* got equals want bit for bit when rtol is 0, else within rtol relative
 * (against max(1, |want|)). */
static inline void assert_f32_close(const float *got, const float *want, size_t n, double rtol) {
  if (rtol == 0) {
    assert_memory_equal(got, want, n * sizeof *got);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    double w = want[i], m = w < 0 ? -w : w;
    double d = got[i] - w;
    if ((d < 0 ? -d : d) > rtol * (m > 1 ? m : 1))
      fail_msg("[%zu]: %.9g, want %.9g", i, got[i], want[i]);
  }
}

/* The largest |got - want| / max(1, |want|) over n pairs of f32 arrays (a
 * NaN makes it NaN); *bit_exact: 1 when every pair is equal bit for bit. */
static inline double test_max_rel_diff(jx_array *const *got, jx_array *const *want, int n,
                                       int *bit_exact) {
  double worst = 0;
  *bit_exact = 1;
  for (int o = 0; o < n; o++) {
    int64_t numel = jx_size(want[o]);
    assert_int_equal(jx_size(got[o]), numel);
    float *g = malloc(sizeof *g * (size_t)(numel + 1)),
          *w = malloc(sizeof *w * (size_t)(numel + 1));
    assert_true(g && w);
    check_ok(jx_read(got[o], g, sizeof *g * (size_t)numel));
    check_ok(jx_read(want[o], w, sizeof *w * (size_t)numel));
    *bit_exact &= !memcmp(g, w, sizeof *g * (size_t)numel);
    for (int64_t i = 0; i < numel; i++) {
      double m = w[i] < 0 ? -(double)w[i] : w[i], d = (double)g[i] - w[i];
      d = (d < 0 ? -d : d) / (m > 1 ? m : 1);
      if (!(d <= worst)) worst = d; /* NaN too */
    }
    free(g);
    free(w);
  }
  return worst;
}

/* An f32 or f64 array of shape s (owned by the innermost scope) whose
 * element i is value(i, ctx), computed in double and rounded once for f32. */
static inline jx_array *test_array_of(jx_dtype dt, jx_shape s,
                                      double (*value)(int64_t i, const void *ctx),
                                      const void *ctx) {
  int64_t n = 1;
  for (int d = 0; d < s.rank; d++) n *= s.dims[d];
  double *h = malloc(sizeof *h * (size_t)(n ? n : 1));
  float *f = malloc(sizeof *f * (size_t)(n ? n : 1));
  assert_non_null(h);
  assert_non_null(f);
  for (int64_t i = 0; i < n; i++) {
    h[i] = value(i, ctx);
    f[i] = (float)h[i];
  }
  jx_array *a = jx_array_from(dt, s, dt == JX_F64 ? (void *)h : (void *)f);
  free(h);
  free(f);
  return a;
}

/* An f32 array of shape s whose element i is a smooth wave of the given
 * amplitude, varied by seed: amplitude sin(0.37 i + 1.3 seed) (1 + i % 5) / 4. */
static inline double test_wave_value(int64_t i, const void *ctx) {
  const double *sa = ctx; /* seed, amplitude */
  return sa[1] * sin(0.37 * (double)i + 1.3 * sa[0]) * (1 + (double)(i % 5)) * 0.25;
}
static inline jx_array *test_wave(jx_shape s, int seed, double amplitude) {
  double sa[2] = {seed, amplitude};
  return test_array_of(JX_F32, s, test_wave_value, sa);
}

#endif
