/* The QR factorization (jx_linalg_qr) against JAX goldens
 * (tests/golden/gen_linalg.py): q, r and the VJP against both, for tall,
 * wide and square matrices, reduced and complete, f32 and f64, a stack;
 * eagerly, under jit, vmap and a sharded jit; second-order derivatives
 * against finite differences; q r = a and qᵀ q = I; errors. */
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
#include "test_linalg_golden.h"

static void qr_body(void *ctx, jx_array *const *in, jx_array **out) {
  jx_linalg_qr(in[0], *(const int *)ctx, &out[0], &out[1]);
}

typedef struct {
  const char *golden;
  int full_matrices;
} qr_case;

static const qr_case CASES[] = {
    {"qr_tall_f64", 0}, {"qr_tall_complete_f64", 1},
    {"qr_wide_f64", 0}, {"qr_wide_complete_f64", 1},
    {"qr_f32", 0},      {"qr_batch_f64", 1},
};
#define NCASES (sizeof CASES / sizeof *CASES)

static double tol_of(jx_array *x) { return jx_dtype_of(x) == JX_F64 ? 1e-9 : 1e-4; }

/* vjp(qr) at case c's golden inputs, checked against JAX. */
static void check_vjp(jx_fn *vjp, const char *c) {
  jx_array *a = golden(c, "a");
  jx_array *in[3] = {a, golden(c, "ct_q"), golden(c, "ct_r")}, *out[3];
  check_ok(jx_call(vjp, in, out));
  double tol = tol_of(a);
  assert_close(out[0], golden(c, "q"), tol);
  assert_close(out[1], golden(c, "r"), tol);
  assert_close(out[2], golden(c, "ct_a"), tol * 10);
}

static void qr_matches_jax(void **state) {
  (void)state;
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < NCASES; c++) {
      jx_fn *f = jx_fn_create("qr", 1, 2, qr_body, (void *)&CASES[c].full_matrices);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      check_vjp(run, CASES[c].golden);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

static void qr_factors_reconstruct_the_matrix(void **state) {
  (void)state;
  for (size_t c = 0; c < NCASES; c++) {
    jx_array *a = golden(CASES[c].golden, "a"), *q, *r;
    check_ok(jx_linalg_qr(a, CASES[c].full_matrices, &q, &r));
    jx_shape qs = jx_shape_of(q);
    int rank = qs.rank;
    jx_axes swap = rank == 2 ? JX_AXES(1, 0) : JX_AXES(0, 2, 1);
    assert_close(jx_matmul(q, r), a, tol_of(a));
    jx_shape es = qs;
    es.dims[rank - 2] = qs.dims[rank - 1];
    assert_close(jx_matmul(jx_transpose(q, swap), q),
                 jx_broadcast_to(jx_eye(jx_dtype_of(a), qs.dims[rank - 1]), es), tol_of(a));
  }
}

static void qr_under_vmap_and_sharded_jit(void **state) {
  (void)state;
  /* the stack mapped through the VJP, jitted; then split over two devices,
   * where qr runs replicated */
  int full = 1;
  jx_fn *f = jx_fn_create("qr", 1, 2, qr_body, &full);
  batched_vjps b = batched_vjps_of(f);
  check_vjp(b.mapped, "qr_batch_f64");
  if (b.sharded) check_vjp(b.sharded, "qr_batch_f64");
  batched_vjps_release(&b);
  jx_fn_release(f);
}

static void qr_gradients_match_finite_differences(void **state) {
  (void)state;
  for (size_t c = 0; c < NCASES; c++) {
    if (!strstr(CASES[c].golden, "f64") || strstr(CASES[c].golden, "batch")) continue;
    jx_fn *f = jx_fn_create("qr", 1, 2, qr_body, (void *)&CASES[c].full_matrices);
    jx_array *a = golden(CASES[c].golden, "a");
    jx_status st = jx_check_grads(f, &a, 2, 0, 0);
    if (st) fprintf(stderr, "%s: ", CASES[c].golden);
    check_ok(st);
    jx_fn_release(f);
  }
}

static void qr_errors_name_the_shapes(void **state) {
  (void)state;
  jx_array *q, *r;
  assert_int_equal(jx_linalg_qr(jx_zeros(JX_F32, JX_SHAPE(4)), 0, &q, &r), JX_ERR_SHAPE);
  assert_true(jx_is_poisoned(q) && jx_is_poisoned(r));
  assert_error_has("jx_linalg_qr: operand f32[4] must be a matrix");
  assert_int_equal(jx_linalg_qr(jx_zeros(JX_I32, JX_SHAPE(2, 3)), 0, &q, &r), JX_ERR_DTYPE);
  assert_error_has("jx_linalg_qr: operand i32[2,3] must be f32, f64, c64 or c128");
  assert_int_equal(jx_linalg_qr(jx_zeros(JX_F32, JX_SHAPE(2, 3)), 0, NULL, &r),
                   JX_ERR_INVALID_ARGUMENT);
  assert_error_has("jx_linalg_qr: an output pointer is NULL");
}

int main(void) {
  if (jx_set_cpu_device_count(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(qr_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(qr_factors_reconstruct_the_matrix, setup, teardown),
      cmocka_unit_test_setup_teardown(qr_under_vmap_and_sharded_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(qr_gradients_match_finite_differences, setup, teardown),
      cmocka_unit_test_setup_teardown(qr_errors_name_the_shapes, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
