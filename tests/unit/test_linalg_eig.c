/* The symmetric eigendecomposition (jx_linalg_eigh, jx_linalg_eigvalsh)
 * against JAX goldens (tests/golden/gen_linalg.py). The eigenvectors' signs
 * are arbitrary, so the goldens are sign-invariant: the eigenvalues, the
 * eigenvectors' squares and their VJPs; the vectors themselves are checked
 * by identities (a = V diag(w) V^T, V^T V = I). f32 and f64, stacks, eagerly,
 * under jit, vmap and a sharded jit; second-order derivatives against finite
 * differences; equal eigenvalues; errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>
#include <lapacke.h>

#include "test_util.h"

#include "test_close.h"
#include "test_linalg_golden.h"

static double tol_of(jx_array *x) { return jx_dtype_of(x) == JX_F64 ? 1e-9 : 1e-4; }

/* (w, v * v): the eigenvalues and the eigenvectors' squares, which do not
 * depend on the signs LAPACK picks. */
static void values_and_squares_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *w, *v;
  jx_linalg_eigh(in[0], &w, &v);
  out[0] = w;
  out[1] = jx_mul(v, v);
}

static void eigvalsh_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_eigvalsh(in[0]);
}

static const char *const EIGH_CASES[] = {"eigh_f64", "eigh_f32", "eigh_batch_f64"};
#define NCASES (sizeof EIGH_CASES / sizeof *EIGH_CASES)

/* vjp(values_and_squares) at case c's golden inputs, checked against JAX. */
static void check_vjp(jx_fn *vjp, const char *c) {
  jx_array *a = golden(c, "a");
  jx_array *in[3] = {a, golden(c, "ct_w"), golden(c, "ct_v")}, *out[3];
  check_ok(jx_call(vjp, in, out));
  double tol = tol_of(a);
  assert_close(out[0], golden(c, "w"), tol);
  assert_close(out[1], golden(c, "squares"), tol * 10);
  assert_close(out[2], golden(c, "ct_a"), tol * 100);
}

static void eigh_matches_jax(void **state) {
  (void)state;
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < NCASES; c++) {
      jx_fn *f = jx_fn_create("eigh", 1, 2, values_and_squares_body, NULL);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      check_vjp(run, EIGH_CASES[c]);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

static void eigh_vectors_reconstruct_the_matrix(void **state) {
  (void)state;
  for (size_t c = 0; c < NCASES; c++) {
    jx_array *a = golden(EIGH_CASES[c], "a"), *w, *v;
    check_ok(jx_linalg_eigh(a, &w, &v));
    int r = jx_shape_of(a).rank;
    jx_axes swap = r == 2 ? JX_AXES(1, 0) : JX_AXES(0, 2, 1);
    jx_array *sym = jx_mul(jx_add(a, jx_transpose(a, swap)), jx_scalar(jx_dtype_of(a), 0.5));
    jx_array *vt = jx_transpose(v, swap);
    assert_close(jx_matmul(jx_mul(v, jx_expand_dims(w, r - 2)), vt), sym, tol_of(a));
    jx_array *eye =
        jx_broadcast_to(jx_eye(jx_dtype_of(a), jx_shape_of(a).dims[r - 1]), jx_shape_of(a));
    assert_close(jx_matmul(vt, v), eye, tol_of(a));
  }
}

static void eigvalsh_matches_jax(void **state) {
  (void)state;
  /* eigvalsh_degenerate has a double eigenvalue: the eigenvectors' tangent
   * is infinite there, yet the eigenvalues' VJP is finite, as in JAX */
  const char *cases[] = {"eigvalsh_f64", "eigvalsh_f32", "eigvalsh_batch_f64",
                         "eigvalsh_degenerate"};
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      jx_fn *f = jx_fn_create("eigvalsh", 1, 1, eigvalsh_body, NULL);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      jx_array *a = golden(cases[c], "a");
      jx_array *in[2] = {a, golden(cases[c], "ct")}, *out[2];
      check_ok(jx_call(run, in, out));
      assert_close(out[0], golden(cases[c], "out"), tol_of(a));
      assert_close(out[1], golden(cases[c], "ct_a"), tol_of(a) * 10);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

static void eigh_under_vmap_and_sharded_jit(void **state) {
  (void)state;
  /* the stack mapped through the VJP, jitted; then split over two devices,
   * where eigh runs replicated */
  jx_fn *f = jx_fn_create("eigh", 1, 2, values_and_squares_body, NULL);
  batched_vjps b = batched_vjps_of(f);
  check_vjp(b.mapped, "eigh_batch_f64");
  if (b.sharded) check_vjp(b.sharded, "eigh_batch_f64");
  batched_vjps_release(&b);
  jx_fn_release(f);
}

static void eigh_gradients_match_finite_differences(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("eigh", 1, 2, values_and_squares_body, NULL);
  jx_array *a = golden("eigh_f64", "a");
  check_ok(jx_check_grads(f, &a, 2, 0, 0));
  jx_fn_release(f);
}

/* A real matrix of 384 or more rows splits its back-transformation into
 * column blocks over the pool (eigh.c): w and v are still LAPACK's ssyevd's
 * bits, and the same matrix in a stack of two (each on one thread, its
 * blocks in turn) gives the bits it gives alone. Also a matrix syevd scales
 * (entries below its range): its bits. The matrices are exactly symmetric,
 * so eigh's symmetrization keeps their bits. */
static void split_eigh_is_lapacks(void **state) {
  (void)state;
  const int64_t sizes[] = {400, 6};
  const double scales[] = {1, 1e-20};
  for (int c = 0; c < 2; c++) {
    int64_t n = sizes[c];
    jx_array *a = jx_mul(jx_random_normal(jx_random_key((uint64_t)c), JX_F32, JX_SHAPE(n, n)),
                         jx_scalar(JX_F32, scales[c]));
    a = jx_add(a, jx_transpose(a, JX_AXES(1, 0)));
    jx_array *w, *v;
    check_ok(jx_linalg_eigh(a, &w, &v));
    float *x = linalg_read_f32(a), *wv = malloc(sizeof(float) * (size_t)n);
    assert_int_equal(LAPACKE_ssyevd(LAPACK_COL_MAJOR, 'V', 'L', n, x, n, wv), 0);
    assert_same_f32_bits(jx_array_from(JX_F32, JX_SHAPE(n), wv), w);
    /* the eigenvectors in x's columns, column-major: vᵀ's rows */
    assert_same_f32_bits(jx_array_from(JX_F32, JX_SHAPE(n, n), x), jx_transpose(v, JX_AXES(1, 0)));
    free(x);
    free(wv);
    if (c > 0) continue;
    jx_array *sw, *sv, *two = jx_broadcast_to(jx_expand_dims(a, 0), JX_SHAPE(2, n, n));
    check_ok(jx_linalg_eigh(two, &sw, &sv));
    assert_same_f32_bits(v, jx_slice(sv, JX_SHAPE(1, 0, 0), JX_SHAPE(2, n, n), JX_SHAPE(1, 1, 1)));
  }
}

static void eigh_errors_name_the_shapes(void **state) {
  (void)state;
  jx_array *w, *v;
  assert_int_equal(jx_linalg_eigh(jx_zeros(JX_F32, JX_SHAPE(3, 4)), &w, &v), JX_ERR_SHAPE);
  assert_true(jx_is_poisoned(w) && jx_is_poisoned(v));
  assert_error_has("jx_linalg_eigh: operand f32[3,4] must be a square matrix");
  assert_int_equal(jx_linalg_eigh(jx_zeros(JX_F32, JX_SHAPE(2, 2)), &w, NULL),
                   JX_ERR_INVALID_ARGUMENT);
  assert_error_has("jx_linalg_eigh: an output pointer is NULL");
  jx_array *r = jx_linalg_eigvalsh(jx_zeros(JX_I32, JX_SHAPE(2, 2)));
  assert_true(jx_is_poisoned(r));
  assert_error_has("jx_linalg_eigvalsh: operand i32[2,2] must be f32, f64, c64 or c128");
}

int main(void) {
  if (jx_set_cpu_device_count(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(eigh_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(eigh_vectors_reconstruct_the_matrix, setup, teardown),
      cmocka_unit_test_setup_teardown(eigvalsh_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(eigh_under_vmap_and_sharded_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(eigh_gradients_match_finite_differences, setup, teardown),
      cmocka_unit_test_setup_teardown(split_eigh_is_lapacks, setup, teardown),
      cmocka_unit_test_setup_teardown(eigh_errors_name_the_shapes, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
