/* f32 x W with W row-major (src/prims/dot_gemv.h), the batch-1 decode
 * step's projections. Oracle: f64 sums, against which each output must lie
 * within the bound of a K-term FMA chain, |s - c| <= gamma_K sum_k |x_k
 * w_kj| (gamma_K = K u / (1 - K u), u = 2^-24) plus the oracle's rounding u
 * |c|. A column's bits do not depend on where a split of the columns puts
 * it (vector blocks of 16 and 8, the scalar tail), nor on how dot_general
 * shares a large gemv out over the pool: its result is jx_sgemv_rows's
 * over all columns, bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/cpu_features.h"
#include "prims/dot_gemv.h"
#include "test_util.h"

static float *random_floats(int64_t n, uint64_t seed) {
  float *v = malloc(sizeof *v * (size_t)(n + 1));
  assert_non_null(v);
  for (int64_t i = 0; i < n; i++) v[i] = (float)(2 * test_rng_uniform(&seed) - 1);
  return v;
}

/* c from jx_sgemv_rows against the f64 oracle; k rows, n columns, x read
 * every incx, W rows ldw apart. */
static void check_bound(int64_t k, int64_t n, int64_t incx, int64_t ldw) {
  float *x = random_floats(k * incx, 1), *w = random_floats(k * ldw, 2);
  float *c = malloc(sizeof *c * (size_t)(n + 1));
  assert_non_null(c);
  assert_true(jx_sgemv_rows(0, n, k, x, incx, w, ldw, c));
  const double u = 0x1p-24, gamma = (double)k * u / (1 - (double)k * u);
  for (int64_t j = 0; j < n; j++) {
    double want = 0, mag = 0;
    for (int64_t i = 0; i < k; i++) {
      want += (double)x[i * incx] * w[i * ldw + j];
      mag += fabs((double)x[i * incx] * w[i * ldw + j]);
    }
    if (!(fabs(c[j] - want) <= gamma * mag + u * fabs(want)))
      fail_msg("k %lld n %lld column %lld: %.9g, f64 oracle %.9g", (long long)k, (long long)n,
               (long long)j, c[j], want);
  }
  free(x);
  free(w);
  free(c);
}

static void test_within_fma_chain_bound(void **state) {
  (void)state;
  if (!jx_cpu_has_avx2_fma()) skip();
  const int64_t ks[] = {1, 7, 8, 9, 37, 256}, ns[] = {1, 8, 15, 16, 17, 100, 256};
  for (size_t a = 0; a < sizeof ks / sizeof *ks; a++)
    for (size_t b = 0; b < sizeof ns / sizeof *ns; b++) check_bound(ks[a], ns[b], 1, ns[b]);
  check_bound(33, 40, 3, 45); /* x strided, W rows padded */
}

/* Any split of the columns gives the same bits as the whole. */
static void test_split_columns_same_bits(void **state) {
  (void)state;
  if (!jx_cpu_has_avx2_fma()) skip();
  enum { K = 45, N = 203 };
  float *x = random_floats(K, 3), *w = random_floats(K * N, 4), whole[N], parts[N];
  assert_true(jx_sgemv_rows(0, N, K, x, 1, w, N, whole));
  const int64_t cuts[] = {0, 5, 13, 64, 65, 150, N};
  for (size_t i = 0; i + 1 < sizeof cuts / sizeof *cuts; i++)
    assert_true(jx_sgemv_rows(cuts[i], cuts[i + 1], K, x, 1, w, N, parts));
  assert_memory_equal(whole, parts, sizeof whole);
  free(x);
  free(w);
}

/* dot_general of x [1, K] and W [K, N], large enough to be split over the
 * pool, eagerly and jitted: jx_sgemv_rows's bits. */
static void test_dot_general_takes_it(void **state) {
  (void)state;
  if (!jx_cpu_has_avx2_fma()) skip();
  enum { K = 256, N = 1024 };
  float *x = random_floats(K, 5), *w = random_floats(K * N, 6), *want = malloc(sizeof(float) * N),
        *got = malloc(sizeof(float) * N);
  assert_non_null(want);
  assert_non_null(got);
  assert_true(jx_sgemv_rows(0, N, K, x, 1, w, N, want));
  jx_array *xa = jx_array_from(JX_F32, JX_SHAPE(1, K), x),
           *wa = jx_array_from(JX_F32, JX_SHAPE(K, N), w);
  check_ok(jx_read(jx_matmul(xa, wa), got, sizeof(float) * N));
  assert_memory_equal(want, got, sizeof(float) * N);
  free(x);
  free(w);
  free(want);
  free(got);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_within_fma_chain_bound, setup, teardown),
      cmocka_unit_test_setup_teardown(test_split_columns_same_bits, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dot_general_takes_it, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
