/* The singular value decomposition (jx_linalg_svd, jx_linalg_svdvals)
 * against JAX goldens (tests/golden/gen_linalg.py). The singular vectors'
 * signs are arbitrary, so the goldens are sign-invariant: the singular
 * values, the vectors' squares and their VJPs; the vectors themselves are
 * checked by identities (a = u diag(s) vh, uᵀ u = I, vh vhᵀ = I). Tall, wide
 * and square, reduced and full, f32 and f64, stacks, eagerly, under jit,
 * vmap and a sharded jit; second-order derivatives against finite
 * differences; a NaN matrix; errors. */
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

/* (s, u * u, vh * vh): what does not depend on the signs LAPACK picks;
 * ctx points to full_matrices. */
static void parts_body(void *ctx, jx_array *const *in, jx_array **out) {
  jx_array *u, *vh;
  jx_linalg_svd(in[0], *(const int *)ctx, 1, &u, &out[0], &vh);
  out[1] = jx_mul(u, u);
  out[2] = jx_mul(vh, vh);
}

static void svdvals_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_svdvals(in[0]);
}

static void nuc_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_matrix_norm(in[0], JX_NORM_NUC);
}

typedef struct {
  const char *golden;
  int full_matrices;
} svd_case;

static const svd_case CASES[] = {
    {"svd_tall_f64", 0}, {"svd_wide_f64", 0},  {"svd_square_full_f64", 1},
    {"svd_f32", 0},      {"svd_batch_f64", 0}, {"svd_batch_f32", 0},
};
#define NCASES (sizeof CASES / sizeof *CASES)

/* vjp(parts) at case c's golden inputs, checked against JAX. */
static void check_vjp(jx_fn *vjp, const char *c) {
  jx_array *a = golden(c, "a");
  jx_array *in[4] = {a, golden(c, "ct_s"), golden(c, "ct_u"), golden(c, "ct_v")}, *out[4];
  check_ok(jx_call(vjp, in, out));
  double tol = tol_of(a);
  assert_close(out[0], golden(c, "s"), tol);
  assert_close(out[1], golden(c, "uu"), tol * 10);
  assert_close(out[2], golden(c, "vv"), tol * 10);
  assert_close(out[3], golden(c, "ct_a"), tol * 100);
}

static void svd_matches_jax(void **state) {
  (void)state;
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < NCASES; c++) {
      jx_fn *f = jx_fn_create("svd", 1, 3, parts_body, (void *)&CASES[c].full_matrices);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      check_vjp(run, CASES[c].golden);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

/* u diag(s) vh = a, uᵀ u = I and vh vhᵀ = I for a's svd. */
static void check_factors(jx_array *a, int full_matrices) {
  jx_array *u, *s, *vh;
  check_ok(jx_linalg_svd(a, full_matrices, 1, &u, &s, &vh));
  jx_shape as = jx_shape_of(a);
  int r = as.rank;
  int64_t m = as.dims[r - 2], n = as.dims[r - 1], k = m < n ? m : n;
  jx_axes swap = r == 2 ? JX_AXES(1, 0) : JX_AXES(0, 2, 1);
  jx_dtype dt = jx_dtype_of(a);
  jx_array *uk = u, *vk = vh;
  if (full_matrices) { /* the first k columns of u and rows of vh meet s */
    assert_int_equal(jx_shape_of(u).dims[r - 1], m);
    assert_int_equal(jx_shape_of(vh).dims[r - 2], n);
    uk = jx_slice(u, JX_SHAPE(0, 0), JX_SHAPE(m, k), JX_SHAPE(1, 1));
    vk = jx_slice(vh, JX_SHAPE(0, 0), JX_SHAPE(k, n), JX_SHAPE(1, 1));
  }
  assert_close(jx_matmul(jx_mul(uk, jx_expand_dims(s, r - 2)), vk), a, tol_of(a));
  jx_shape us = jx_shape_of(u), vs = jx_shape_of(vh);
  jx_shape ue = us, ve = vs;
  ue.dims[r - 2] = us.dims[r - 1];
  ve.dims[r - 1] = vs.dims[r - 2];
  assert_close(jx_matmul(jx_transpose(u, swap), u), jx_broadcast_to(jx_eye(dt, us.dims[r - 1]), ue),
               tol_of(a));
  assert_close(jx_matmul(vh, jx_transpose(vh, swap)),
               jx_broadcast_to(jx_eye(dt, vs.dims[r - 2]), ve), tol_of(a));
  /* the values alone are the same values */
  jx_array *s_only;
  check_ok(jx_linalg_svd(a, full_matrices, 0, NULL, &s_only, NULL));
  assert_close(s_only, s, tol_of(a));
}

static void svd_factors_reconstruct_the_matrix(void **state) {
  (void)state;
  for (size_t c = 0; c < NCASES; c++)
    check_factors(golden(CASES[c].golden, "a"), CASES[c].full_matrices);
  /* full_matrices of a tall matrix: u square, its last columns any
   * orthonormal completion */
  jx_array *a = golden("svd_tall_full_f64", "a");
  check_factors(a, 1);
  assert_close(jx_linalg_svdvals(a), golden("svd_tall_full_f64", "s"), 1e-12);
}

static void svdvals_matches_jax(void **state) {
  (void)state;
  const char *cases[] = {"svdvals_f64", "svdvals_f32", "svdvals_batch_f64"};
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      jx_fn *f = jx_fn_create("svdvals", 1, 1, svdvals_body, NULL);
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

static void norms_of_singular_values_match_jax(void **state) {
  (void)state;
  /* "nuc", 2 and -2 against the sum, largest and smallest of JAX's values */
  const char *cases[] = {"svdvals_f64", "svdvals_batch_f64"};
  for (size_t c = 0; c < 2; c++) {
    jx_array *a = golden(cases[c], "a"), *s = golden(cases[c], "out");
    int ax = jx_shape_of(s).rank - 1;
    assert_close(jx_linalg_matrix_norm(a, JX_NORM_NUC), jx_sum(s, JX_AXES(ax), 0), 1e-12);
    assert_close(jx_linalg_matrix_norm(a, JX_NORM_2), jx_max(s, JX_AXES(ax), 0), 1e-12);
    assert_close(jx_linalg_matrix_norm(a, JX_NORM_NEG_2), jx_min(s, JX_AXES(ax), 0), 1e-12);
  }
  jx_fn *f = jx_fn_create("nuc", 1, 1, nuc_body, NULL);
  jx_array *a = golden("svdvals_f64", "a");
  check_ok(jx_check_grads(f, &a, 2, 0, 0));
  jx_fn_release(f);
}

static void svd_under_vmap(void **state) {
  (void)state;
  /* the stacks mapped through the VJP, jitted */
  int full = 0;
  jx_fn *f = jx_fn_create("svd", 1, 3, parts_body, &full);
  jx_fn *vjp = jx_vjp(f);
  jx_fn *vf = jx_vmap(vjp, JX_AXES(0, 0, 0, 0), JX_AXES(0, 0, 0, 0));
  jx_fn *jvf = jx_jit(vf, NULL);
  check_vjp(jvf, "svd_batch_f64");
  check_vjp(jvf, "svd_batch_f32");
  jx_fn_release(jvf);
  jx_fn_release(vf);
  jx_fn_release(vjp);
  jx_fn_release(f);
}

static void svd_sharded_jit_matches_jax(void **state) {
  (void)state;
  TEST_SKIP_ON_CUDA("there are no CUDA meshes");
  /* the stack split over two devices; svd runs replicated */
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *[]){"x"});
  jx_sharding *sh = jx_sharding_create(m, "x");
  assert_non_null(sh);
  int full = 0;
  jx_fn *f = jx_fn_create("svd", 1, 3, parts_body, &full);
  jx_fn *vjp = jx_vjp(f);
  jx_fn *j = jx_jit(vjp, &(jx_jit_options){.in_shardings = (jx_sharding *[]){sh, sh, sh, sh}});
  check_vjp(j, "svd_batch_f64");
  jx_fn_release(j);
  jx_fn_release(vjp);
  jx_fn_release(f);
  jx_sharding_release(sh);
  jx_mesh_release(m);
}

static void svd_gradients_match_finite_differences(void **state) {
  (void)state;
  const char *cases[] = {"svd_tall_f64", "svd_wide_f64", "svd_square_full_f64"};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    int full = strstr(cases[c], "full") != NULL;
    jx_fn *f = jx_fn_create("svd", 1, 3, parts_body, &full);
    jx_array *a = golden(cases[c], "a");
    jx_status st = jx_check_grads(f, &a, 2, 0, 0);
    if (st) fprintf(stderr, "%s: ", cases[c]);
    check_ok(st);
    jx_fn_release(f);
  }
}

/* The reduced svd of the f32 matrix a[m, n] by LAPACK's sgesdd itself, as
 * svd.c calls it: on a's bytes read as the column-major n x m matrix aᵀ,
 * whose left factor is vh's bytes and right one u's. */
static void gesdd_oracle(jx_array *a, jx_array **u, jx_array **s, jx_array **vh) {
  int64_t m = jx_shape_of(a).dims[0], n = jx_shape_of(a).dims[1], k = m < n ? m : n;
  float *x = linalg_read_f32(a), *sv = malloc(sizeof(float) * (size_t)k),
        *uv = malloc(sizeof(float) * (size_t)(m * k)),
        *vv = malloc(sizeof(float) * (size_t)(k * n));
  assert_int_equal(LAPACKE_sgesdd(LAPACK_COL_MAJOR, 'S', n, m, x, n, sv, vv, n, uv, k), 0);
  *u = jx_array_from(JX_F32, JX_SHAPE(m, k), uv);
  *s = jx_array_from(JX_F32, JX_SHAPE(k), sv);
  *vh = jx_array_from(JX_F32, JX_SHAPE(k, n), vv);
  free(x);
  free(sv);
  free(uv);
  free(vv);
}

/* A matrix of 384 or more vectors splits its back-transformations into
 * blocks over the pool (svd.c): its factors are still gesdd's bits, and the same
 * matrix in a stack of two (each decomposed on one thread, its blocks in
 * turn) gives the bits it gives alone. Also a matrix gesdd scales (entries
 * below its range, and above), small enough for one block: gesdd's bits. */
static void split_svd_is_lapacks(void **state) {
  (void)state;
  const int64_t shapes[][2] = {{400, 400}, {480, 384}, {384, 480}, {7, 5}, {7, 5}};
  const double scales[] = {1, 1, 1, 1e-20, 1e15};
  for (int c = 0; c < 5; c++) {
    int64_t m = shapes[c][0], n = shapes[c][1], k = m < n ? m : n;
    jx_array *a = jx_mul(jx_random_normal(jx_random_key((uint64_t)c), JX_F32, JX_SHAPE(m, n)),
                         jx_scalar(JX_F32, scales[c]));
    jx_array *u, *s, *vh, *wu, *ws, *wvh;
    check_ok(jx_linalg_svd(a, 0, 1, &u, &s, &vh));
    gesdd_oracle(a, &wu, &ws, &wvh);
    assert_same_f32_bits(ws, s);
    assert_same_f32_bits(wvh, vh);
    assert_same_f32_bits(wu, u);
    if (c > 0) continue;
    jx_array *su, *ss, *svh, *two = jx_broadcast_to(jx_expand_dims(a, 0), JX_SHAPE(2, m, n));
    check_ok(jx_linalg_svd(two, 0, 1, &su, &ss, &svh));
    assert_same_f32_bits(u, jx_slice(su, JX_SHAPE(1, 0, 0), JX_SHAPE(2, m, k), JX_SHAPE(1, 1, 1)));
    assert_same_f32_bits(vh,
                         jx_slice(svh, JX_SHAPE(1, 0, 0), JX_SHAPE(2, k, n), JX_SHAPE(1, 1, 1)));
  }
}

static void svd_of_a_nan_matrix_is_nan(void **state) {
  (void)state;
  /* JAX's result: NaNs throughout, not an error */
  jx_array *a = golden("svd_nan", "a"), *u, *s, *vh;
  check_ok(jx_linalg_svd(a, 0, 1, &u, &s, &vh));
  const char *names[] = {"u", "s", "vh"};
  jx_array *got[] = {u, s, vh};
  for (int i = 0; i < 3; i++) {
    jx_array *want = golden("svd_nan", names[i]);
    assert_int_equal(jx_size(got[i]), jx_size(want));
    double v[8];
    check_ok(jx_read(jx_astype(got[i], JX_F64), v, sizeof(double) * (size_t)jx_size(got[i])));
    for (int64_t k = 0; k < jx_size(got[i]); k++) assert_true(isnan(v[k]));
  }
}

static void svd_errors_name_the_shapes(void **state) {
  (void)state;
  jx_array *u, *s, *vh;
  assert_int_equal(jx_linalg_svd(jx_zeros(JX_F32, JX_SHAPE(4)), 0, 1, &u, &s, &vh), JX_ERR_SHAPE);
  assert_true(jx_is_poisoned(u) && jx_is_poisoned(s) && jx_is_poisoned(vh));
  assert_error_has("jx_linalg_svd: operand f32[4] must be a matrix");
  assert_true(jx_is_poisoned(jx_linalg_svdvals(jx_zeros(JX_I32, JX_SHAPE(2, 3)))));
  assert_error_has("jx_linalg_svdvals: operand i32[2,3] must be f32, f64, c64 or c128");
  assert_int_equal(jx_linalg_svd(jx_zeros(JX_F32, JX_SHAPE(2, 3)), 0, 1, NULL, &s, &vh),
                   JX_ERR_INVALID_ARGUMENT);
  assert_error_has("jx_linalg_svd: an output pointer is NULL");
  /* as in JAX, u and vh of a non-square matrix with full_matrices have no derivative */
  int full = 1;
  jx_fn *f = jx_fn_create("svd", 1, 3, parts_body, &full);
  jx_fn *vjp = jx_vjp(f);
  jx_array *a = golden("svd_tall_full_f64", "a");
  jx_array *in[4] = {a, jx_ones(JX_F64, JX_SHAPE(3)), jx_ones(JX_F64, JX_SHAPE(5, 5)),
                     jx_ones(JX_F64, JX_SHAPE(3, 3))},
           *res[4];
  assert_int_equal(jx_call(vjp, in, res), JX_ERR_UNIMPLEMENTED);
  assert_error_has("svd: the derivative with full_matrices of a non-square matrix 5x3");
  jx_fn_release(vjp);
  jx_fn_release(f);
}

int main(void) {
  if (jx_set_cpu_device_count(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(svd_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(svd_factors_reconstruct_the_matrix, setup, teardown),
      cmocka_unit_test_setup_teardown(svdvals_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(norms_of_singular_values_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(svd_under_vmap, setup, teardown),
      cmocka_unit_test_setup_teardown(svd_sharded_jit_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(svd_gradients_match_finite_differences, setup, teardown),
      cmocka_unit_test_setup_teardown(split_svd_is_lapacks, setup, teardown),
      cmocka_unit_test_setup_teardown(svd_of_a_nan_matrix_is_nan, setup, teardown),
      cmocka_unit_test_setup_teardown(svd_errors_name_the_shapes, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
