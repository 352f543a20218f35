/* The complex (c64, c128) Hermitian eigendecomposition (jx_linalg_eigh,
 * jx_linalg_eigvalsh), QR (jx_linalg_qr), SVD (jx_linalg_svd, svdvals) and
 * least squares (jx_linalg_lstsq) against JAX goldens
 * (tests/golden/gen_linalg_complex_b.py). Eigenvectors and singular vectors
 * carry an arbitrary phase per column, so they are checked through
 * phase-invariant quantities: the values, the vectors' squared moduli and the
 * VJP of both, eagerly, under jit, vmap and a sharded jit, plus
 * a = V diag(w) V^H and V^H V = I; eigvalsh's, svdvals' and lstsq's
 * gradients as jax.grad gives them; finite differences; a NaN input; q and r
 * as LAPACK's ungqr gives them to JAX; errors. */
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

#include "test_close.h"
#define LINALG_GOLDEN_DIR "linalg_complex_b"
#include "test_linalg_golden.h"

static int is_c128(jx_array *x) { return jx_dtype_of(x) == JX_C128 || jx_dtype_of(x) == JX_F64; }

static double tol_of(jx_array *x) { return is_c128(x) ? 1e-9 : 1e-4; }

/* assert_close of the real and the imaginary parts. */
static void assert_close_c(jx_array *a, jx_array *b, double tol) {
  assert_int_equal(jx_dtype_of(a), jx_dtype_of(b));
  assert_close(jx_real(a), jx_real(b), tol);
  assert_close(jx_imag(a), jx_imag(b), tol);
}

/* (w, |v|^2): the eigenvalues and the vectors' squared moduli, which do not
 * depend on the phases LAPACK picks. */
static void values_and_moduli_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *w, *v;
  jx_linalg_eigh(in[0], &w, &v);
  jx_array *m = jx_abs(v);
  out[0] = w;
  out[1] = jx_mul(m, m);
}

static const char *const EIGH_CASES[] = {"eigh_c128", "eigh_c64", "eigh_batch_c128"};
#define NCASES (sizeof EIGH_CASES / sizeof *EIGH_CASES)

/* vjp(values_and_moduli) at case c's golden inputs, checked against JAX. */
static void check_vjp(jx_fn *vjp, const char *c) {
  jx_array *a = golden(c, "a");
  jx_array *in[3] = {a, golden(c, "ct_w"), golden(c, "ct_v")}, *out[3];
  check_ok(jx_call(vjp, in, out));
  double tol = tol_of(a);
  assert_close(out[0], golden(c, "w"), tol);
  assert_close(out[1], golden(c, "moduli"), tol * 10);
  assert_close_c(out[2], golden(c, "ct_a"), tol * 100);
}

static void eigh_complex_matches_jax(void **state) {
  (void)state;
  for (int jit = 0; jit < 2; jit++) /* every case eagerly, the first under jit */
    for (size_t c = 0; c < (jit ? 1 : NCASES); c++) {
      jx_fn *f = jx_fn_create("eigh", 1, 2, values_and_moduli_body, NULL);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      check_vjp(run, EIGH_CASES[c]);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

static void eigh_complex_vectors_reconstruct_the_matrix(void **state) {
  (void)state;
  for (size_t c = 0; c < NCASES; c++) {
    jx_array *a = golden(EIGH_CASES[c], "a"), *w, *v;
    check_ok(jx_linalg_eigh(a, &w, &v));
    assert_int_equal(jx_dtype_of(w), is_c128(a) ? JX_F64 : JX_F32);
    int r = jx_shape_of(a).rank;
    jx_axes swap = r == 2 ? JX_AXES(1, 0) : JX_AXES(0, 2, 1);
    jx_array *herm = jx_mul(jx_add(a, jx_conj(jx_transpose(a, swap))),
                            jx_complex_scalar(jx_dtype_of(a), 0.5, 0));
    jx_array *vh = jx_conj(jx_transpose(v, swap));
    jx_array *vw = jx_mul(v, jx_astype(jx_expand_dims(w, r - 2), jx_dtype_of(a)));
    assert_close_c(jx_matmul(vw, vh), herm, tol_of(a) * 10);
    jx_array *eye =
        jx_broadcast_to(jx_eye(jx_dtype_of(a), jx_shape_of(a).dims[r - 1]), jx_shape_of(a));
    assert_close_c(jx_matmul(vh, v), eye, tol_of(a) * 10);
  }
}

static void eigvalsh_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_eigvalsh(in[0]);
}

/* vjp(eigvalsh) against ct_w is jax.grad of sum(eigvalsh(a) ct_w), a real
 * function of a complex input. */
static void eigvalsh_grad_matches_jax_grad(void **state) {
  (void)state;
  for (size_t c = 0; c < NCASES; c++) {
    jx_fn *f = jx_fn_create("eigvalsh", 1, 1, eigvalsh_body, NULL);
    jx_fn *vjp = jx_vjp(f);
    jx_array *a = golden(EIGH_CASES[c], "a");
    jx_array *in[2] = {a, golden(EIGH_CASES[c], "ct_w")}, *out[2];
    check_ok(jx_call(vjp, in, out));
    assert_close(out[0], golden(EIGH_CASES[c], "w"), tol_of(a));
    assert_close_c(out[1], golden(EIGH_CASES[c], "grad_eigvalsh"), tol_of(a) * 10);
    jx_fn_release(vjp);
    jx_fn_release(f);
  }
}

static void eigh_complex_under_vmap_and_sharded_jit(void **state) {
  (void)state;
  /* the stack mapped through the VJP, jitted; then split over two devices,
   * where eigh runs replicated */
  jx_fn *f = jx_fn_create("eigh", 1, 2, values_and_moduli_body, NULL);
  batched_vjps b = batched_vjps_of(f);
  check_vjp(b.mapped, "eigh_batch_c128");
  if (b.sharded) check_vjp(b.sharded, "eigh_batch_c128");
  batched_vjps_release(&b);
  jx_fn_release(f);
}

static void eigh_complex_gradients_match_finite_differences(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("eigh", 1, 2, values_and_moduli_body, NULL);
  jx_array *a = golden("eigh_c128", "a");
  check_ok(jx_check_grads(f, &a, 1, 0, 0));
  jx_fn_release(f);
}

static void eigh_complex_nan_gives_nans(void **state) {
  (void)state;
  jx_array *w, *v;
  check_ok(jx_linalg_eigh(golden("eigh_nan", "a"), &w, &v));
  assert_true(jx_item(jx_all(jx_isnan(w), JX_AXES(), 0)) != 0);
  assert_true(jx_item(jx_all(jx_isnan(jx_real(v)), JX_AXES(), 0)) != 0);
}

static void qr_body(void *ctx, jx_array *const *in, jx_array **out) {
  jx_linalg_qr(in[0], *(const int *)ctx, &out[0], &out[1]);
}

static void qr_complex_matches_jax(void **state) {
  (void)state;
  static const struct {
    const char *golden;
    int full_matrices;
  } cases[] = {
      {"qr_tall_c128", 0}, {"qr_complete_c128", 1}, {"qr_wide_c64", 0}, {"qr_batch_c128", 0}};
  for (int jit = 0; jit < 2; jit++) /* every case eagerly, the first under jit */
    for (size_t c = 0; c < (jit ? 1 : sizeof cases / sizeof *cases); c++) {
      jx_fn *f = jx_fn_create("qr", 1, 2, qr_body, (void *)&cases[c].full_matrices);
      jx_fn *run = jit ? jx_jit(f, NULL) : f;
      jx_array *a = golden(cases[c].golden, "a"), *out[2];
      check_ok(jx_call(run, &a, out));
      assert_close_c(out[0], golden(cases[c].golden, "q"), tol_of(a));
      assert_close_c(out[1], golden(cases[c].golden, "r"), tol_of(a));
      if (!cases[c].full_matrices) assert_close_c(jx_matmul(out[0], out[1]), a, tol_of(a) * 10);
      if (jit) jx_fn_release(run);
      jx_fn_release(f);
    }
}

/* (s, |u|^2, |vh|^2) of the reduced SVD: the phases cancel in each. */
static void svd_moduli_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *u, *s, *vh;
  jx_linalg_svd(in[0], 0, 1, &u, &s, &vh);
  jx_array *mu = jx_abs(u), *mvh = jx_abs(vh);
  out[0] = s;
  out[1] = jx_mul(mu, mu);
  out[2] = jx_mul(mvh, mvh);
}

static void svdvals_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_svdvals(in[0]);
}

static const char *const SVD_CASES[] = {"svd_tall_c128", "svd_wide_c64", "svd_batch_c128"};

static void check_svd_vjp(jx_fn *vjp, const char *c) {
  jx_array *a = golden(c, "a");
  jx_array *in[4] = {a, golden(c, "ct_s"), golden(c, "ct_u"), golden(c, "ct_vh")}, *out[4];
  check_ok(jx_call(vjp, in, out));
  double tol = tol_of(a);
  assert_close(out[0], golden(c, "s"), tol);
  assert_close(out[1], golden(c, "moduli_u"), tol * 10);
  assert_close(out[2], golden(c, "moduli_vh"), tol * 10);
  assert_close_c(out[3], golden(c, "ct_a"), tol * 100);
}

static void svd_complex_matches_jax(void **state) {
  (void)state;
  for (int jit = 0; jit < 2; jit++) /* every case eagerly, the first under jit */
    for (size_t c = 0; c < (jit ? 1 : sizeof SVD_CASES / sizeof *SVD_CASES); c++) {
      jx_fn *f = jx_fn_create("svd", 1, 3, svd_moduli_body, NULL);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      check_svd_vjp(run, SVD_CASES[c]);
      /* svdvals' VJP against ct_s is jax.grad of sum(svdvals(a) ct_s) */
      jx_fn *g = jx_fn_create("svdvals", 1, 1, svdvals_body, NULL), *gv = jx_vjp(g);
      jx_array *in[2] = {golden(SVD_CASES[c], "a"), golden(SVD_CASES[c], "ct_s")}, *out[2];
      check_ok(jx_call(gv, in, out));
      assert_close_c(out[1], golden(SVD_CASES[c], "grad_svdvals"), tol_of(in[0]) * 10);
      jx_fn_release(gv);
      jx_fn_release(g);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

static void svd_complex_under_vmap_and_reconstructs(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("svd", 1, 3, svd_moduli_body, NULL);
  jx_fn *vjp = jx_vjp(f);
  jx_fn *vf = jx_vmap(vjp, JX_AXES(0, 0, 0, 0), JX_AXES(0, 0, 0, 0));
  check_svd_vjp(vf, "svd_batch_c128");
  jx_fn_release(vf);
  jx_fn_release(vjp);
  jx_fn_release(f);
  jx_array *a = golden("svd_tall_c128", "a"), *u, *s, *vh;
  check_ok(jx_linalg_svd(a, 0, 1, &u, &s, &vh));
  assert_int_equal(jx_dtype_of(s), JX_F64);
  assert_close_c(jx_matmul(jx_mul(u, jx_astype(jx_expand_dims(s, 0), JX_C128)), vh), a, 1e-9);
  /* hermitian: u diag(s) vh rebuilds the Hermitian part, s = |w| descending */
  jx_array *h = golden("eigh_c128", "a");
  check_ok(jx_linalg_svd_ex(h, 0, 1, 1, &u, &s, &vh));
  jx_array *herm = jx_mul(jx_add(h, jx_conj(jx_transpose(h, JX_AXES(1, 0)))),
                          jx_complex_scalar(JX_C128, 0.5, 0));
  assert_close_c(jx_matmul(jx_mul(u, jx_astype(jx_expand_dims(s, 0), JX_C128)), vh), herm, 1e-9);
  assert_close(s, jx_flip(jx_sort(jx_abs(golden("eigh_c128", "w")), 0), JX_AXES(0)), 1e-9);
}

static void pinv_body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = jx_linalg_pinv_ex(in[0], NAN, *(const int *)ctx);
}

static void svd_and_pinv_gradients_match_finite_differences(void **state) {
  (void)state;
  jx_array *a = golden("svd_tall_c128", "a");
  jx_fn *f = jx_fn_create("svd", 1, 3, svd_moduli_body, NULL);
  check_ok(jx_check_grads(f, &a, 1, 0, 0));
  jx_fn_release(f);
  static const int plain = 0;
  jx_fn *p = jx_fn_create("pinv", 1, 1, pinv_body, (void *)&plain);
  check_ok(jx_check_grads(p, &a, 1, 0, 0));
  jx_fn_release(p);
}

static void lstsq_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *rank, *s;
  jx_linalg_lstsq(in[0], in[1], NAN, &out[0], &out[1], &rank, &s);
}

/* lstsq's x and residuals, and the VJP of (x, residuals) against
 * (conj(ct_x), 1), which is jax.grad of re<ct_x, x> + sum(residuals): JAX's
 * VJP is linear in the cotangent, and re(conj(ct_x) x) pulls back
 * conj(ct_x). */
static void lstsq_complex_matches_jax(void **state) {
  (void)state;
  const char *cases[] = {"lstsq_c128", "lstsq_c64"};
  for (size_t c = 0; c < 2; c++) {
    jx_fn *f = jx_fn_create("lstsq", 2, 2, lstsq_body, NULL), *vjp = jx_vjp(f);
    jx_array *a = golden(cases[c], "a"), *resid = golden(cases[c], "resid");
    jx_array *in[4] = {a, golden(cases[c], "b"), jx_conj(golden(cases[c], "ct_x")),
                       jx_ones(jx_dtype_of(resid), jx_shape_of(resid))},
             *out[4];
    check_ok(jx_call(vjp, in, out));
    double tol = tol_of(a);
    assert_close_c(out[0], golden(cases[c], "x"), tol * 10);
    assert_close(out[1], resid, tol * 10);
    assert_close_c(out[2], golden(cases[c], "grad_a"), tol * 100);
    assert_close_c(out[3], golden(cases[c], "grad_b"), tol * 100);
    jx_fn_release(vjp);
    jx_fn_release(f);
  }
}

/* pinv and its VJP against a complex cotangent, plain and Hermitian, jitted. */
static void pinv_complex_matches_jax(void **state) {
  (void)state;
  static const struct {
    const char *golden;
    int hermitian;
  } cases[] = {{"pinv_c128", 0}, {"pinv_wide_c64", 0}, {"pinv_hermitian_c128", 1}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    jx_fn *f = jx_fn_create("pinv", 1, 1, pinv_body, (void *)&cases[c].hermitian);
    jx_fn *vjp = jx_vjp(f), *run = jx_jit(vjp, NULL);
    jx_array *a = golden(cases[c].golden, "a");
    jx_array *in[2] = {a, golden(cases[c].golden, "ct")}, *out[2];
    check_ok(jx_call(run, in, out));
    assert_close_c(out[0], golden(cases[c].golden, "p"), tol_of(a) * 10);
    assert_close_c(out[1], golden(cases[c].golden, "ct_a"), tol_of(a) * 100);
    jx_fn_release(run);
    jx_fn_release(vjp);
    jx_fn_release(f);
  }
}

/* qr's VJP against complex cotangents: its JVP solves with r, so it runs
 * where triangular_solve takes complex matrices and is skipped otherwise. */
static void qr_complex_vjp_matches_jax(void **state) {
  (void)state;
  jx_array *probe = jx_eye(JX_C64, 2);
  if (jx_is_poisoned(jx_linalg_triangular_solve(probe, probe, 1, 0, 0, 0))) {
    jx_clear_error();
    skip();
  }
  static const struct {
    const char *golden;
    int full_matrices;
  } cases[] = {{"qr_vjp_tall_c128", 0}, {"qr_vjp_complete_c128", 1}, {"qr_vjp_wide_c64", 0}};
  for (int jit = 0; jit < 2; jit++) /* every case eagerly, the first under jit */
    for (size_t c = 0; c < (jit ? 1 : sizeof cases / sizeof *cases); c++) {
      jx_fn *f = jx_fn_create("qr", 1, 2, qr_body, (void *)&cases[c].full_matrices);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      const char *g = cases[c].golden;
      jx_array *a = golden(g, "a"), *in[3] = {a, golden(g, "ct_q"), golden(g, "ct_r")}, *out[3];
      check_ok(jx_call(run, in, out));
      assert_close_c(out[0], golden(g, "q"), tol_of(a));
      assert_close_c(out[1], golden(g, "r"), tol_of(a));
      assert_close_c(out[2], golden(g, "ct_a"), tol_of(a) * 100);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

static void complex_errors_name_the_shapes(void **state) {
  (void)state;
  jx_array *w, *v;
  assert_int_equal(jx_linalg_eigh(jx_zeros(JX_C64, JX_SHAPE(3, 4)), &w, &v), JX_ERR_SHAPE);
  assert_true(jx_is_poisoned(w) && jx_is_poisoned(v));
  assert_error_has("jx_linalg_eigh: operand c64[3,4] must be a square matrix");
  jx_array *q, *r;
  assert_int_equal(jx_linalg_qr(jx_zeros(JX_C128, JX_SHAPE(3)), 0, &q, &r), JX_ERR_SHAPE);
  assert_error_has("jx_linalg_qr: operand c128[3] must be a matrix");
  assert_true(jx_is_poisoned(jx_linalg_eigvalsh(jx_zeros(JX_I32, JX_SHAPE(2, 2)))));
  assert_error_has("jx_linalg_eigvalsh: operand i32[2,2] must be f32, f64, c64 or c128");
}

int main(void) {
  if (jx_set_cpu_device_count(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(eigh_complex_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(eigh_complex_vectors_reconstruct_the_matrix, setup, teardown),
      cmocka_unit_test_setup_teardown(eigvalsh_grad_matches_jax_grad, setup, teardown),
      cmocka_unit_test_setup_teardown(eigh_complex_under_vmap_and_sharded_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(eigh_complex_gradients_match_finite_differences, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(eigh_complex_nan_gives_nans, setup, teardown),
      cmocka_unit_test_setup_teardown(qr_complex_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(qr_complex_vjp_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(svd_complex_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(svd_complex_under_vmap_and_reconstructs, setup, teardown),
      cmocka_unit_test_setup_teardown(pinv_complex_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(svd_and_pinv_gradients_match_finite_differences, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(lstsq_complex_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(complex_errors_name_the_shapes, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
