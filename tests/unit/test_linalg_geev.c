/* The general eigendecomposition (jx_linalg_eig, jx_linalg_eigvals,
 * jx_linalg_eig_ex) against JAX goldens (tests/golden/gen_linalg_eig.py):
 * eigenvalues and left and right eigenvectors as LAPACK's geev gives them
 * (order and normalization), compared directly and by a v = v diag(w) and
 * u^H a = diag(w) u^H; the VJP of the eigenvalues and, with
 * enable_eigvec_derivs, of the eigenvectors; f32, f64, c64 and c128, stacks;
 * eagerly, under jit, vmap and a sharded jit; NaN input; errors, among them
 * the eigenvectors' derivative without the opt-in. */
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
#define LINALG_GOLDEN_DIR "linalg_eig"
#include "test_linalg_golden.h"

static int is_double(jx_array *x) {
  jx_dtype d = jx_dtype_of(x);
  return d == JX_F64 || d == JX_C128;
}

/* Both parts of a and b close (assert_close reads real parts only). */
static void assert_close_c(jx_array *a, jx_array *b, double tol) {
  assert_int_equal(jx_dtype_of(a), jx_dtype_of(b));
  if (jx_dtype_of(a) != JX_C64 && jx_dtype_of(a) != JX_C128) {
    assert_close(a, b, tol);
    return;
  }
  assert_close(jx_real(a), jx_real(b), tol);
  assert_close(jx_imag(a), jx_imag(b), tol);
}

static const char *const CASES[] = {"eig_f64", "eig_c128", "eig_batch_f64", "eig_batch_c128",
                                    "eig_f32", "eig_c64",  "eig_batch_f32"};
#define NCASES (sizeof CASES / sizeof *CASES)

/* ctx: the jx_eig_options; outputs w, then vl and vr as asked. */
static void eig_body(void *ctx, jx_array *const *in, jx_array **out) {
  const jx_eig_options *o = ctx;
  jx_array *w, *vl, *vr;
  jx_linalg_eig_ex(in[0], o, &w, &vl, &vr);
  int k = 0;
  out[k++] = w;
  if (o->compute_left_eigenvectors) out[k++] = vl;
  if (o->compute_right_eigenvectors) out[k++] = vr;
}

static const jx_eig_options ALL = {1, 1, 0}, VALUES = {0, 0, 0}, RIGHT_DERIVS = {0, 1, 1},
                            ALL_DERIVS = {1, 1, 1};

static int nout_of(const jx_eig_options *o) {
  return 1 + (o->compute_left_eigenvectors != 0) + (o->compute_right_eigenvectors != 0);
}

/* a v = v diag(w) and u^H a = diag(w) u^H for every matrix of the stack. */
static void check_identities(jx_array *a, jx_array *w, jx_array *vl, jx_array *vr, double tol) {
  jx_array *ac = jx_astype(a, jx_dtype_of(w));
  int r = jx_shape_of(a).rank;
  jx_array *w_row = jx_expand_dims(w, r - 2), *w_col = jx_expand_dims(w, r - 1);
  assert_close_c(jx_matmul(ac, vr), jx_mul(vr, w_row), tol);
  jx_array *uh = jx_conj(jx_swapaxes(vl, -1, -2));
  assert_close_c(jx_matmul(uh, ac), jx_mul(w_col, uh), tol);
}

static void eig_matches_jax(void **state) {
  (void)state;
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < NCASES; c++) {
      jx_fn *f = jx_fn_create("eig", 1, 3, eig_body, (void *)&ALL);
      jx_fn *run = jit ? jx_jit(f, NULL) : f;
      jx_array *a = golden(CASES[c], "a"), *out[3];
      check_ok(jx_call(run, &a, out));
      double tol = is_double(a) ? 1e-9 : 1e-4;
      assert_close_c(out[0], golden(CASES[c], "w"), tol);
      assert_close_c(out[1], golden(CASES[c], "vl"), tol);
      assert_close_c(out[2], golden(CASES[c], "vr"), tol);
      check_identities(a, out[0], out[1], out[2], tol * 10);
      if (jit) jx_fn_release(run);
      jx_fn_release(f);
    }
  /* jnp.linalg.eig and eigvals: the same vectors and values */
  jx_array *a = golden("eig_f64", "a"), *w, *v;
  check_ok(jx_linalg_eig(a, &w, &v));
  assert_close_c(w, golden("eig_f64", "w"), 1e-9);
  assert_close_c(v, golden("eig_f64", "vr"), 1e-9);
  assert_close_c(jx_linalg_eigvals(a), golden("eig_f64", "w"), 1e-9);
  /* real eigenvalues of a symmetric matrix: imaginary parts exactly 0 */
  a = golden("eig_symmetric", "a");
  check_ok(jx_linalg_eig(a, &w, &v));
  assert_close_c(w, golden("eig_symmetric", "w"), 1e-9);
  assert_close_c(v, golden("eig_symmetric", "vr"), 1e-9);
}

/* vjp of eig_body with options o at case c: ct_a against golden ct_name. */
static void check_vjp(jx_fn *vjp, const char *c, const jx_eig_options *o, const char *ct_name) {
  int nout = nout_of(o), k = 0;
  jx_array *in[4], *out[4];
  in[k++] = golden(c, "a");
  in[k++] = golden(c, "ct_w");
  if (o->compute_left_eigenvectors) in[k++] = golden(c, "ct_vl");
  if (o->compute_right_eigenvectors) in[k++] = golden(c, "ct_vr");
  check_ok(jx_call(vjp, in, out));
  double tol = is_double(in[0]) ? 1e-9 : 1e-4;
  assert_close_c(out[0], golden(c, "w"), tol);
  assert_close_c(out[nout], golden(c, ct_name), tol);
}

static void vjps_match_jax(void **state) {
  (void)state;
  const struct {
    const jx_eig_options *opts;
    const char *ct;
  } kinds[] = {{&VALUES, "ct_a"}, {&RIGHT_DERIVS, "ct_a_right"}, {&ALL_DERIVS, "ct_a_both"}};
  for (int jit = 0; jit < 2; jit++)
    for (size_t k = 0; k < 3; k++)
      for (size_t c = 0; c < NCASES; c++) {
        jx_fn *f = jx_fn_create("eig", 1, nout_of(kinds[k].opts), eig_body, (void *)kinds[k].opts);
        jx_fn *vjp = jx_vjp(f);
        jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
        check_vjp(run, CASES[c], kinds[k].opts, kinds[k].ct);
        if (jit) jx_fn_release(run);
        jx_fn_release(vjp);
        jx_fn_release(f);
      }
}

static void eig_under_vmap_and_sharded_jit(void **state) {
  (void)state;
  /* vmap of the VJP over the stack's axis, jitted: as the stacked goldens;
   * then the stack split over two devices, where eig runs replicated */
  jx_fn *f = jx_fn_create("eig", 1, 2, eig_body, (void *)&RIGHT_DERIVS);
  batched_vjps b = batched_vjps_of(f);
  check_vjp(b.mapped, "eig_batch_f64", &RIGHT_DERIVS, "ct_a_right");
  check_vjp(b.mapped, "eig_batch_f32", &RIGHT_DERIVS, "ct_a_right");
  if (b.sharded) check_vjp(b.sharded, "eig_batch_f64", &RIGHT_DERIVS, "ct_a_right");
  batched_vjps_release(&b);
  jx_fn_release(f);
}

static void nan_input_gives_nans(void **state) {
  (void)state;
  jx_array *w, *v;
  check_ok(jx_linalg_eig(golden("eig_nan", "a"), &w, &v));
  double wv[4], vv[8];
  check_ok(jx_read(w, wv, sizeof wv));
  check_ok(jx_read(v, vv, sizeof vv));
  for (int i = 0; i < 4; i++) assert_true(isnan(wv[i]));
  for (int i = 0; i < 8; i++) assert_true(isnan(vv[i]));
}

static void errors_name_the_shapes(void **state) {
  (void)state;
  jx_array *w, *v;
  assert_int_equal(jx_linalg_eig(jx_zeros(JX_F64, JX_SHAPE(2, 3, 4)), &w, &v), JX_ERR_SHAPE);
  assert_true(jx_is_poisoned(w) && jx_is_poisoned(v));
  assert_error_has("jx_linalg_eig: operand f64[2,3,4] must be a square matrix");
  assert_true(jx_is_poisoned(jx_linalg_eigvals(jx_zeros(JX_I32, JX_SHAPE(2, 2)))));
  assert_error_has("jx_linalg_eigvals: operand i32[2,2] must be f32, f64, c64 or c128");
  assert_true(jx_is_poisoned(jx_linalg_eigvals(jx_zeros(JX_F32, JX_SHAPE(3)))));
  assert_error_has("jx_linalg_eigvals: operand f32[3] must be a square matrix");
  assert_int_equal(jx_linalg_eig_ex(jx_zeros(JX_F32, JX_SHAPE(2, 2)), NULL, &w, NULL, &v),
                   JX_ERR_INVALID_ARGUMENT);
  assert_error_has("jx_linalg_eig_ex: an output pointer is NULL");
  /* as in JAX, the eigenvectors' derivative needs the opt-in */
  jx_fn *f = jx_fn_create("eig", 1, 2, eig_body, (void *)&(jx_eig_options){0, 1, 0});
  jx_fn *vjp = jx_vjp(f);
  jx_array *in[3] = {golden("eig_f64", "a"), golden("eig_f64", "ct_w"), golden("eig_f64", "ct_vr")},
           *res[3];
  assert_int_equal(jx_call(vjp, in, res), JX_ERR_UNIMPLEMENTED);
  assert_error_has("eig: the derivative of eigenvectors of a general matrix");
  jx_fn_release(vjp);
  jx_fn_release(f);
}

int main(void) {
  if (jx_set_cpu_device_count(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(eig_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(vjps_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(eig_under_vmap_and_sharded_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(nan_input_gives_nans, setup, teardown),
      cmocka_unit_test_setup_teardown(errors_name_the_shapes, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
