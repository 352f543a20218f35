/* Linear algebra (jx/linalg.h) against JAX goldens (tests/golden/gen_linalg.py):
 * values and VJPs of cholesky and triangular_solve for f32 and f64, every
 * flag of triangular_solve, batched stacks, eagerly, under jit and under
 * vmap; lu and solve, inv, det, slogdet built on it; a sharded jit (the
 * primitives run replicated); derivatives against finite differences
 * (jx_check_grads); a matrix that is not positive definite, a singular one,
 * one holding a NaN; errors naming the shapes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"

#include "test_linalg_golden.h"

/* got matches want elementwise within tol relative to max(1, |want|); NaNs
 * must be where want has them. */
static void assert_close(jx_array *got, jx_array *want, double tol, const char *what) {
  check_ok(jx_last_status());
  assert_int_equal(jx_dtype_of(got), jx_dtype_of(want));
  int64_t n = jx_size(want);
  assert_int_equal(jx_size(got), n);
  double *g = malloc(sizeof *g * (size_t)(n + 1)), *w = malloc(sizeof *w * (size_t)(n + 1));
  assert_true(g && w);
  check_ok(jx_read(jx_astype(got, JX_F64), g, sizeof *g * (size_t)n));
  check_ok(jx_read(jx_astype(want, JX_F64), w, sizeof *w * (size_t)n));
  for (int64_t i = 0; i < n; i++) {
    int ok = isnan(w[i]) ? isnan(g[i]) : fabs(g[i] - w[i]) <= tol * fmax(1, fabs(w[i]));
    if (!ok) fail_msg("%s [%lld]: %.17g, want %.17g", what, (long long)i, g[i], w[i]);
  }
  free(g);
  free(w);
}

static double tol_of(jx_array *x) { return jx_dtype_of(x) == JX_F64 ? 1e-10 : 2e-5; }

/* ---- the functions under test ---- */

static void cholesky_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_cholesky(in[0]);
}

typedef struct {
  int left, lower, trans, unit;
} solve_flags;

static void solve_body(void *ctx, jx_array *const *in, jx_array **out) {
  const solve_flags *f = ctx;
  out[0] = jx_linalg_triangular_solve(in[0], in[1], f->left, f->lower, f->trans, f->unit);
}

/* f itself, or jitted when jit is set (released with the result). */
static jx_fn *maybe_jit(jx_fn *f, int jit) {
  if (!jit) return f;
  jx_fn *j = jx_jit(f, NULL);
  jx_fn_release(f);
  return j;
}

/* ---- cholesky ---- */

static void cholesky_matches_jax(void **state) {
  (void)state;
  const char *cases[] = {"chol_f64", "chol_f32", "chol_batch_f64"};
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      jx_array *a = golden(cases[c], "a"), *ct = golden(cases[c], "ct");
      jx_fn *f = jx_fn_create("cholesky", 1, 1, cholesky_body, NULL);
      jx_fn *vjp = maybe_jit(jx_vjp(f), jit);
      jx_array *in[2] = {a, ct}, *out[2];
      check_ok(jx_call(vjp, in, out));
      assert_close(out[0], golden(cases[c], "out"), tol_of(a), cases[c]);
      assert_close(out[1], golden(cases[c], "ct_a"), tol_of(a) * 10, cases[c]);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

/* the cholesky VJP's value and cotangent against the stacked goldens */
static void check_cholesky_batch(jx_fn *vjp, const char *how) {
  jx_array *in[2] = {golden("chol_batch_f64", "a"), golden("chol_batch_f64", "ct")}, *out[2];
  check_ok(jx_call(vjp, in, out));
  assert_close(out[0], golden("chol_batch_f64", "out"), 1e-10, how);
  assert_close(out[1], golden("chol_batch_f64", "ct_a"), 1e-9, how);
}

static void cholesky_under_vmap_and_sharded_jit(void **state) {
  (void)state;
  /* the stack mapped through the VJP, jitted; then split over two devices,
   * where cholesky runs replicated (the partitioner gathers it whole) */
  jx_fn *f = jx_fn_create("cholesky", 1, 1, cholesky_body, NULL);
  batched_vjps b = batched_vjps_of(f);
  check_cholesky_batch(b.mapped, "vmap cholesky");
  if (b.sharded) check_cholesky_batch(b.sharded, "sharded cholesky");
  batched_vjps_release(&b);
  jx_fn_release(f);
}

static void cholesky_not_positive_definite_gives_nans(void **state) {
  (void)state;
  /* the first matrix factors, the second gives NaNs (lower triangle) as JAX */
  jx_array *got = jx_linalg_cholesky(golden("chol_not_pd", "a"));
  assert_close(got, golden("chol_not_pd", "out"), 1e-12, "not positive definite");
  double v[8];
  check_ok(jx_read(got, v, sizeof v));
  assert_true(isnan(v[4]) && isnan(v[6]) && isnan(v[7]) && v[5] == 0);
}

static void cholesky_gradients_match_finite_differences(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("cholesky", 1, 1, cholesky_body, NULL);
  jx_array *a = golden("chol_f64", "a");
  check_ok(jx_check_grads(f, &a, 2, 0, 0));
  jx_fn_release(f);
}

/* ---- triangular_solve ---- */

static void triangular_solve_matches_jax(void **state) {
  (void)state;
  const char *cases[] = {
      "tri_f64_l0_lo0_t0_u0", "tri_f64_l0_lo0_t1_u0", "tri_f64_l0_lo1_t0_u0",
      "tri_f64_l0_lo1_t1_u0", "tri_f64_l1_lo0_t0_u0", "tri_f64_l1_lo0_t1_u0",
      "tri_f64_l1_lo1_t0_u0", "tri_f64_l1_lo1_t1_u0", "tri_f64_l1_lo1_t0_u1",
      "tri_f64_l0_lo0_t1_u1", "tri_f32_l0_lo0_t0_u0", "tri_f32_l0_lo0_t1_u0",
      "tri_f32_l0_lo1_t0_u0", "tri_f32_l0_lo1_t1_u0", "tri_f32_l1_lo0_t0_u0",
      "tri_f32_l1_lo0_t1_u0", "tri_f32_l1_lo1_t0_u0", "tri_f32_l1_lo1_t1_u0",
      "tri_f32_l1_lo1_t0_u1", "tri_f32_l0_lo0_t1_u1", "tri_batch_f64",
  };
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      solve_flags fl = {1, 1, 1, 0}; /* tri_batch_f64's */
      if (strncmp(cases[c], "tri_batch", 9))
        assert_int_equal(
            sscanf(cases[c] + 8, "l%d_lo%d_t%d_u%d", &fl.left, &fl.lower, &fl.trans, &fl.unit), 4);
      jx_fn *f = jx_fn_create("triangular_solve", 2, 1, solve_body, &fl);
      jx_fn *vjp = maybe_jit(jx_vjp(f), jit);
      jx_array *a = golden(cases[c], "a");
      jx_array *in[3] = {a, golden(cases[c], "b"), golden(cases[c], "ct")}, *out[3];
      check_ok(jx_call(vjp, in, out));
      assert_close(out[0], golden(cases[c], "out"), tol_of(a), cases[c]);
      assert_close(out[1], golden(cases[c], "ct_a"), tol_of(a) * 10, cases[c]);
      assert_close(out[2], golden(cases[c], "ct_b"), tol_of(a) * 10, cases[c]);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

static void triangular_solve_under_vmap(void **state) {
  (void)state;
  /* the batched case's stack mapped, b mapped along its last axis (moved) */
  solve_flags fl = {1, 1, 1, 0};
  jx_fn *f = jx_fn_create("triangular_solve", 2, 1, solve_body, &fl);
  jx_fn *vjp = jx_vjp(f);
  jx_fn *vf = jx_vmap(vjp, JX_AXES(0, 2, 0), JX_AXES(0, 0, 0));
  jx_array *b = jx_transpose(golden("tri_batch_f64", "b"), JX_AXES(1, 2, 0));
  jx_array *in[3] = {golden("tri_batch_f64", "a"), b, golden("tri_batch_f64", "ct")}, *out[3];
  check_ok(jx_call(vf, in, out));
  assert_close(out[0], golden("tri_batch_f64", "out"), 1e-10, "vmap value");
  assert_close(out[1], golden("tri_batch_f64", "ct_a"), 1e-9, "vmap ct_a");
  assert_close(out[2], golden("tri_batch_f64", "ct_b"), 1e-9, "vmap ct_b");
  /* a unmapped: every b solved with the same matrix */
  solve_flags upper = {1, 0, 0, 0};
  jx_fn *g = jx_fn_create("triangular_solve", 2, 1, solve_body, &upper);
  jx_fn *vs = jx_vmap(g, JX_AXES(JX_NONE, 0), JX_AXES(0));
  jx_array *a0 = golden("tri_f64_l1_lo0_t0_u0", "a"), *b0 = golden("tri_f64_l1_lo0_t0_u0", "b");
  jx_array *stacked = jx_stack(2, (jx_array *[]){b0, jx_mul(b0, jx_scalar(JX_F64, 2))}, 0);
  jx_array *vin[2] = {a0, stacked}, *vout;
  check_ok(jx_call(vs, vin, &vout));
  jx_array *want = golden("tri_f64_l1_lo0_t0_u0", "out");
  assert_close(vout, jx_stack(2, (jx_array *[]){want, jx_mul(want, jx_scalar(JX_F64, 2))}, 0),
               1e-10, "vmap unmapped a");
  jx_fn_release(vs);
  jx_fn_release(g);
  jx_fn_release(vf);
  jx_fn_release(vjp);
  jx_fn_release(f);
}

static void triangular_solve_gradients_match_finite_differences(void **state) {
  (void)state;
  const char *cases[] = {"tri_f64_l1_lo1_t0_u0", "tri_f64_l0_lo0_t1_u0", "tri_f64_l1_lo1_t0_u1"};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    solve_flags fl;
    assert_int_equal(
        sscanf(cases[c] + 8, "l%d_lo%d_t%d_u%d", &fl.left, &fl.lower, &fl.trans, &fl.unit), 4);
    jx_fn *f = jx_fn_create("triangular_solve", 2, 1, solve_body, &fl);
    /* a's unread triangle does not matter: its finite differences are 0, and
     * so is the rule's tangent there */
    jx_array *in[2] = {golden(cases[c], "a"), golden(cases[c], "b")};
    check_ok(jx_check_grads(f, in, 2, 0, 0));
    jx_fn_release(f);
  }
}

/* ---- LU and what is built on it ---- */

static void lu_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *piv, *perm;
  jx_linalg_lu(in[0], &out[0], &piv, &perm);
}
static void solve_lu_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_solve(in[0], in[1]);
}
static void inv_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_inv(in[0]);
}
static void det_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_det(in[0]);
}
static void logdet_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *sign;
  jx_linalg_slogdet(in[0], &sign, &out[0]);
}

typedef struct {
  const char *golden;
  jx_body body;
  int nin;
} lu_case;

static const lu_case LU_CASES[] = {
    {"lu_f64", lu_body, 1},
    {"lu_f32", lu_body, 1},
    {"lu_batch_f64", lu_body, 1},
    {"solve_f64", solve_lu_body, 2},
    {"solve_f32", solve_lu_body, 2},
    {"solve_vec_f64", solve_lu_body, 2},
    {"solve_vec_f32", solve_lu_body, 2},
    {"solve_batch_f64", solve_lu_body, 2},
    {"inv_f64", inv_body, 1},
    {"inv_f32", inv_body, 1},
    {"det_f64", det_body, 1},
    {"det_f32", det_body, 1},
    {"det_batch_f64", det_body, 1},
    {"logdet_f64", logdet_body, 1},
    {"logdet_f32", logdet_body, 1},
};

static void lu_family_matches_jax(void **state) {
  (void)state;
  static const char *const names[] = {"a", "b"};
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < sizeof LU_CASES / sizeof *LU_CASES; c++) {
      const lu_case *k = &LU_CASES[c];
      jx_fn *f = jx_fn_create(k->golden, k->nin, 1, k->body, NULL);
      jx_fn *vjp = maybe_jit(jx_vjp(f), jit);
      jx_array *in[3], *out[3];
      for (int i = 0; i < k->nin; i++) in[i] = golden(k->golden, names[i]);
      in[k->nin] = golden(k->golden, "ct");
      check_ok(jx_call(vjp, in, out));
      double tol = tol_of(in[0]) * 10;
      assert_close(out[0], golden(k->golden, "out"), tol, k->golden);
      char ct[8];
      for (int i = 0; i < k->nin; i++) {
        snprintf(ct, sizeof ct, "ct_%s", names[i]);
        assert_close(out[1 + i], golden(k->golden, ct), tol * 10, k->golden);
      }
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

static void lu_pivots_and_signs_match_jax(void **state) {
  (void)state;
  const char *cases[] = {"lu_f64", "lu_f32", "lu_batch_f64"};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    jx_array *lu, *piv, *perm;
    check_ok(jx_linalg_lu(golden(cases[c], "a"), &lu, &piv, &perm));
    assert_close(piv, golden(cases[c], "pivots"), 0, cases[c]);
    assert_close(perm, golden(cases[c], "permutation"), 0, cases[c]);
  }
  /* f32's matrix has an odd permutation: sign -1 */
  const char *tags[] = {"f64", "f32"};
  for (int t = 0; t < 2; t++) {
    char a[32], s[32];
    snprintf(a, sizeof a, "logdet_%s", tags[t]);
    snprintf(s, sizeof s, "sign_%s", tags[t]);
    jx_array *sign, *logdet;
    check_ok(jx_linalg_slogdet(golden(a, "a"), &sign, &logdet));
    assert_close(sign, golden(s, "out"), 0, s);
  }
  /* a singular matrix: det 0, sign 0, log |det| -inf, as JAX */
  jx_array *a = golden("singular", "a"), *sign, *logdet;
  assert_close(jx_linalg_det(a), golden("singular", "det"), 1e-15, "singular det");
  check_ok(jx_linalg_slogdet(a, &sign, &logdet));
  assert_close(sign, golden("singular", "sign"), 0, "singular sign");
  double v;
  check_ok(jx_read(logdet, &v, sizeof v));
  assert_true(isinf(v) && v < 0);
}

static void nan_matrix_gives_jax_nans(void **state) {
  (void)state;
  /* LAPACKE's NaN pre-check once left getrf's pivots unset (a crash); the
   * routines now run on the NaNs as JAX runs them */
  jx_array *a = golden("nan", "a"), *lu, *piv, *perm, *q, *r;
  check_ok(jx_linalg_lu(a, &lu, &piv, &perm));
  assert_close(lu, golden("nan", "lu"), 1e-15, "nan lu");
  assert_close(piv, golden("nan", "pivots"), 0, "nan pivots");
  assert_close(perm, golden("nan", "permutation"), 0, "nan permutation");
  check_ok(jx_linalg_qr(a, 0, &q, &r));
  assert_close(q, golden("nan", "q"), 1e-15, "nan q");
  assert_close(r, golden("nan", "r"), 1e-15, "nan r");
  assert_close(jx_linalg_det(a), golden("nan", "det"), 0, "nan det");
  assert_close(jx_linalg_solve(a, jx_ones(JX_F64, JX_SHAPE(2))), golden("nan", "solve"), 0,
               "nan solve");
}

/* the solve VJP's value and cotangents against the stacked goldens */
static void check_solve_batch(jx_fn *vjp, const char *how) {
  jx_array *in[3] = {golden("solve_batch_f64", "a"), golden("solve_batch_f64", "b"),
                     golden("solve_batch_f64", "ct")},
           *out[3];
  check_ok(jx_call(vjp, in, out));
  assert_close(out[0], golden("solve_batch_f64", "out"), 1e-10, how);
  assert_close(out[1], golden("solve_batch_f64", "ct_a"), 1e-9, how);
  assert_close(out[2], golden("solve_batch_f64", "ct_b"), 1e-9, how);
}

static void lu_family_under_vmap_and_sharded_jit(void **state) {
  (void)state;
  /* solve's VJP mapped over the stack and jitted, then split over two
   * devices (solve runs replicated); det mapped over the stack */
  jx_fn *s = jx_fn_create("solve", 2, 1, solve_lu_body, NULL),
        *d = jx_fn_create("det", 1, 1, det_body, NULL);
  batched_vjps b = batched_vjps_of(s);
  check_solve_batch(b.mapped, "vmap solve");
  if (b.sharded) check_solve_batch(b.sharded, "sharded solve");
  batched_vjps_release(&b);
  jx_fn *vd = jx_vmap(d, JX_AXES(0), JX_AXES(0));
  jx_array *a = golden("solve_batch_f64", "a"), *det;
  check_ok(jx_call(vd, &a, &det));
  assert_close(det, golden("det_batch_f64", "out"), 1e-10, "vmap det");
  jx_fn_release(vd);
  jx_fn_release(d);
  jx_fn_release(s);
}

static void lu_family_gradients_match_finite_differences(void **state) {
  (void)state;
  const lu_case cases[] = {{"solve_f64", solve_lu_body, 2},
                           {"inv_f64", inv_body, 1},
                           {"det_f64", det_body, 1},
                           {"logdet_f64", logdet_body, 1}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    jx_fn *f = jx_fn_create(cases[c].golden, cases[c].nin, 1, cases[c].body, NULL);
    jx_array *in[2] = {golden(cases[c].golden, "a"), NULL};
    if (cases[c].nin == 2) in[1] = golden(cases[c].golden, "b");
    jx_status st = jx_check_grads(f, in, 2, 0, 0);
    if (st) fprintf(stderr, "%s: ", cases[c].golden);
    check_ok(st);
    jx_fn_release(f);
  }
}

/* ---- errors ---- */

static void errors_name_the_shapes(void **state) {
  (void)state;
  jx_array *r = jx_linalg_cholesky(jx_zeros(JX_F32, JX_SHAPE(3, 4)));
  assert_true(jx_is_poisoned(r));
  assert_error_has("jx_linalg_cholesky: operand f32[3,4] must be a square matrix");
  r = jx_linalg_cholesky(jx_zeros(JX_F32, JX_SHAPE(4)));
  assert_error_has("f32[4] must be a square matrix");
  r = jx_linalg_cholesky(jx_zeros(JX_I32, JX_SHAPE(2, 2)));
  assert_error_has("jx_linalg_cholesky: operand i32[2,2] must be f32, f64, c64 or c128");
  jx_array *a = jx_eye(JX_F32, 3);
  r = jx_linalg_triangular_solve(a, jx_zeros(JX_F32, JX_SHAPE(2, 4)), 1, 1, 0, 0);
  assert_true(jx_is_poisoned(r));
  assert_error_has("b f32[2,4] does not fit a f32[3,3]");
  r = jx_linalg_triangular_solve(a, jx_zeros(JX_F64, JX_SHAPE(3, 2)), 1, 1, 0, 0);
  assert_error_has("b f64[3,2] does not fit a f32[3,3]");
  r = jx_linalg_triangular_solve(jx_zeros(JX_F32, JX_SHAPE(2, 3)), a, 1, 1, 0, 0);
  assert_error_has("jx_linalg_triangular_solve: a f32[2,3] must be a square matrix");
  r = jx_linalg_solve(a, jx_zeros(JX_F32, JX_SHAPE(4)));
  assert_true(jx_is_poisoned(r));
  assert_error_has("jx_linalg_solve: b f32[4] does not fit a f32[3,3]");
  r = jx_linalg_det(jx_zeros(JX_F64, JX_SHAPE(2, 2, 3)));
  assert_error_has("jx_linalg_det: operand f64[2,2,3] must be a square matrix");
  jx_array *sign, *logdet;
  assert_int_equal(jx_linalg_slogdet(jx_zeros(JX_I32, JX_SHAPE(2, 2)), &sign, &logdet),
                   JX_ERR_DTYPE);
  assert_true(jx_is_poisoned(sign) && jx_is_poisoned(logdet));
  assert_error_has("jx_linalg_slogdet: operand i32[2,2] must be f32, f64, c64 or c128");
}

int main(void) {
  if (jx_set_cpu_device_count(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(cholesky_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(cholesky_under_vmap_and_sharded_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(cholesky_not_positive_definite_gives_nans, setup, teardown),
      cmocka_unit_test_setup_teardown(cholesky_gradients_match_finite_differences, setup, teardown),
      cmocka_unit_test_setup_teardown(triangular_solve_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(triangular_solve_under_vmap, setup, teardown),
      cmocka_unit_test_setup_teardown(triangular_solve_gradients_match_finite_differences, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(lu_family_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(lu_pivots_and_signs_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(nan_matrix_gives_jax_nans, setup, teardown),
      cmocka_unit_test_setup_teardown(lu_family_under_vmap_and_sharded_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(lu_family_gradients_match_finite_differences, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(errors_name_the_shapes, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
