/* Helpers shared by the parallel and kernel tests: deterministic values and
 * closeness of two arrays. Include after test_util.h. */
#ifndef JX_TESTS_UNIT_TEST_CLOSE_H
#define JX_TESTS_UNIT_TEST_CLOSE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Deterministic f64 values of shape s, different per seed. */
static inline jx_array *val(jx_shape s, double seed) {
  int64_t n = 1;
  for (int d = 0; d < s.rank; d++) n *= s.dims[d];
  jx_array *r = jx_arange(JX_F64, 0, (double)n, 1);
  return jx_reshape(jx_sin(jx_add(jx_mul(r, jx_scalar(JX_F64, 0.37)), jx_scalar(JX_F64, seed))), s);
}

/* Same shape, and |a - b| <= tol (1 + |b|) elementwise. */
static inline void assert_close(jx_array *a, jx_array *b, double tol) {
  if (jx_is_poisoned(a) || jx_is_poisoned(b)) fprintf(stderr, "%s\n", jx_last_error());
  assert_false(jx_is_poisoned(a));
  assert_false(jx_is_poisoned(b));
  jx_shape sa = jx_shape_of(a), sb = jx_shape_of(b);
  assert_int_equal(sa.rank, sb.rank);
  for (int d = 0; d < sa.rank; d++) assert_int_equal(sa.dims[d], sb.dims[d]);
  int64_t n = jx_size(a);
  double *x = malloc(sizeof(double) * (size_t)(n + 1)),
         *y = malloc(sizeof(double) * (size_t)(n + 1));
  check_ok(jx_read(jx_astype(a, JX_F64), x, sizeof(double) * (size_t)n));
  check_ok(jx_read(jx_astype(b, JX_F64), y, sizeof(double) * (size_t)n));
  for (int64_t k = 0; k < n; k++) {
    if (fabs(x[k] - y[k]) > tol * (1 + fabs(y[k])))
      fprintf(stderr, "element %lld: %.17g vs %.17g\n", (long long)k, x[k], y[k]);
    assert_true(fabs(x[k] - y[k]) <= tol * (1 + fabs(y[k])));
  }
  free(x);
  free(y);
}

/* max |got - want| / max |want| over the elements, in f32 (a NaN anywhere in
 * the difference gives infinity); the plain max difference when want is all
 * zeros. */
static inline double relative_error(jx_array *want, jx_array *got) {
  jx_shape sw = jx_shape_of(want), sg = jx_shape_of(got);
  assert_int_equal(sw.rank, sg.rank);
  for (int d = 0; d < sw.rank; d++) assert_int_equal(sw.dims[d], sg.dims[d]);
  int64_t n = jx_size(want);
  float *a = malloc(sizeof *a * (size_t)(n + 1)), *b = malloc(sizeof *b * (size_t)(n + 1));
  assert_non_null(a);
  assert_non_null(b);
  check_ok(jx_read(jx_astype(want, JX_F32), a, sizeof *a * (size_t)n));
  check_ok(jx_read(jx_astype(got, JX_F32), b, sizeof *b * (size_t)n));
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]);
    diff = isnan(e) ? INFINITY : e > diff ? e : diff;
    scale = fabs((double)a[i]) > scale ? fabs((double)a[i]) : scale;
  }
  free(a);
  free(b);
  return scale > 0 ? diff / scale : diff;
}

#endif
