/* The options of the linear algebra functions against JAX goldens
 * (tests/golden/gen_linalg_options.py): svd's and pinv's hermitian
 * (jx_linalg_svd_ex, jx_linalg_pinv_ex; a non-symmetric input counts by its
 * symmetric part, rank-deficient, an explicit rtol, stacks) and expm's
 * upper_triangular and max_squarings (jx_linalg_expm_ex; every Pade degree
 * of both dtypes) and cholesky's upper and symmetrize_input
 * (jx_linalg_cholesky_ex), values and VJPs in f32 and f64, eagerly, under
 * jit, vmap and a sharded jit; svd's factors by u diag(s) vh = (a + a^T) / 2;
 * jx_linalg_matrix_rank (default and given rtol, hermitian, stacks, zero
 * matrices, vectors); errors. */
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

static jx_array *golden(const char *c, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/linalg_options/%s_%s.npy", JX_TEST_DATA, c, name);
  jx_array *a = jx_load_npy(path);
  check_ok(jx_last_status());
  return a;
}

static double tol_of(jx_array *x) { return jx_dtype_of(x) == JX_F64 ? 1e-9 : 1e-4; }

/* (s, u * u, vh * vh) of the hermitian SVD: sign-invariant */
static void svd_parts_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *u, *vh;
  jx_linalg_svd_ex(in[0], 0, 1, 1, &u, &out[0], &vh);
  out[1] = jx_mul(u, u);
  out[2] = jx_mul(vh, vh);
}

static void svd_values_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_linalg_svd_ex(in[0], 0, 0, 1, NULL, &out[0], NULL);
}

/* ctx points to rtol */
static void pinv_body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = jx_linalg_pinv_ex(in[0], *(const double *)ctx, 1);
}

static void expm_upper_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_expm_ex(in[0], 1, 16);
}

/* ctx points to max_squarings */
static void expm_max_body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = jx_linalg_expm_ex(in[0], 0, *(const int *)ctx);
}

static void chol_upper_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_cholesky_ex(in[0], 1, 1);
}

static void chol_nosym_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_cholesky_ex(in[0], 0, 0);
}

typedef struct {
  const char *golden;
  jx_body body;
  int nout;
  const void *ctx;
} option_case;

static const double DEFAULT_RTOL = NAN, RTOL_01 = 0.1;
static const int MAX3 = 3;

static const option_case CASES[] = {
    {"svd_herm_f64", svd_parts_body, 3, NULL},
    {"svd_herm_f32", svd_parts_body, 3, NULL},
    {"svd_herm_batch_f64", svd_parts_body, 3, NULL},
    {"svd_herm_batch_f32", svd_parts_body, 3, NULL},
    {"svdvals_herm_f64", svd_values_body, 1, NULL},
    {"svdvals_herm_f32", svd_values_body, 1, NULL},
    {"pinv_herm_f64", pinv_body, 1, &DEFAULT_RTOL},
    {"pinv_herm_f32", pinv_body, 1, &DEFAULT_RTOL},
    {"pinv_herm_batch_f64", pinv_body, 1, &DEFAULT_RTOL},
    {"pinv_herm_batch_f32", pinv_body, 1, &DEFAULT_RTOL},
    {"pinv_herm_rank2_f64", pinv_body, 1, &DEFAULT_RTOL},
    {"pinv_herm_rtol_f64", pinv_body, 1, &RTOL_01},
    {"expm_upper_0_f64", expm_upper_body, 1, NULL},
    {"expm_upper_1_f64", expm_upper_body, 1, NULL},
    {"expm_upper_2_f64", expm_upper_body, 1, NULL},
    {"expm_upper_3_f64", expm_upper_body, 1, NULL},
    {"expm_upper_0_f32", expm_upper_body, 1, NULL},
    {"expm_upper_1_f32", expm_upper_body, 1, NULL},
    {"expm_upper_2_f32", expm_upper_body, 1, NULL},
    {"expm_upper_batch_f64", expm_upper_body, 1, NULL},
    {"expm_max3_f64", expm_max_body, 1, &MAX3},
    {"chol_upper_f64", chol_upper_body, 1, NULL},
    {"chol_upper_f32", chol_upper_body, 1, NULL},
    {"chol_nosym_f64", chol_nosym_body, 1, NULL},
    {"chol_nosym_f32", chol_nosym_body, 1, NULL},
};
#define NCASES (sizeof CASES / sizeof *CASES)

/* vjp (inputs a, ct0..) of case c against JAX's outputs and ct_a. */
static void check_vjp(jx_fn *vjp, const option_case *c) {
  jx_array *in[4], *out[4];
  char name[8];
  in[0] = golden(c->golden, "a");
  for (int i = 0; i < c->nout; i++) {
    snprintf(name, sizeof name, "ct%d", i);
    in[1 + i] = golden(c->golden, name);
  }
  check_ok(jx_call(vjp, in, out));
  double tol = tol_of(in[0]);
  for (int i = 0; i < c->nout; i++) {
    snprintf(name, sizeof name, "out%d", i);
    assert_close(out[i], golden(c->golden, name), tol);
  }
  assert_close(out[c->nout], golden(c->golden, "ct_a"), tol * 100);
}

static void options_match_jax(void **state) {
  (void)state;
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < NCASES; c++) {
      if (jit && c % 12 != 0) continue; /* jitted: svd and expm (pinv below); compiling is slow */
      jx_fn *f =
          jx_fn_create(CASES[c].golden, 1, CASES[c].nout, CASES[c].body, (void *)CASES[c].ctx);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      check_vjp(run, &CASES[c]);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

static void hermitian_svd_reconstructs_the_symmetric_part(void **state) {
  (void)state;
  const char *cases[] = {"svd_herm_f64", "svd_herm_batch_f64"};
  for (size_t c = 0; c < 2; c++) {
    jx_array *a = golden(cases[c], "a"), *u, *s, *vh;
    check_ok(jx_linalg_svd_ex(a, 1, 1, 1, &u, &s, &vh));
    jx_array *sym = jx_mul(jx_add(a, jx_swapaxes(a, -1, -2)), jx_scalar(JX_F64, 0.5));
    int r = jx_shape_of(a).rank;
    assert_close(jx_matmul(jx_mul(u, jx_expand_dims(s, r - 2)), vh), sym, 1e-12);
  }
}

static void options_under_vmap_and_sharded_jit(void **state) {
  (void)state;
  const option_case *stacks[] = {&CASES[2], &CASES[8], &CASES[19]};
  for (size_t c = 0; c < 3; c++) {
    jx_fn *f = jx_fn_create("stack", 1, stacks[c]->nout, stacks[c]->body, (void *)stacks[c]->ctx);
    jx_fn *vjp = jx_vjp(f);
    jx_axes axes = stacks[c]->nout == 3 ? JX_AXES(0, 0, 0, 0) : JX_AXES(0, 0);
    jx_fn *vf = jx_vmap(vjp, axes, axes);
    check_vjp(vf, stacks[c]);
    jx_fn_release(vf);
    jx_fn_release(vjp);
    jx_fn_release(f);
  }
  TEST_SKIP_ON_CUDA("there are no CUDA meshes");
  /* pinv's stack split over two devices; it runs replicated */
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *[]){"x"});
  jx_sharding *sh = jx_sharding_create(m, "x");
  jx_fn *f = jx_fn_create("pinv", 1, 1, pinv_body, (void *)&DEFAULT_RTOL);
  jx_fn *vjp = jx_vjp(f);
  jx_fn *j = jx_jit(vjp, &(jx_jit_options){.in_shardings = (jx_sharding *[]){sh, sh}});
  check_vjp(j, &CASES[8]);
  jx_fn_release(j);
  jx_fn_release(vjp);
  jx_fn_release(f);
  jx_sharding_release(sh);
  jx_mesh_release(m);
}

static void too_few_squarings_give_nans(void **state) {
  (void)state;
  jx_array *out = jx_linalg_expm_ex(golden("expm_max2_f64", "a"), 0, 2);
  double v[9];
  check_ok(jx_read(out, v, sizeof v));
  for (int i = 0; i < 9; i++) assert_true(isnan(v[i]));
  /* JAX's too: the golden is all NaN */
  check_ok(jx_read(golden("expm_max2_f64", "out0"), v, sizeof v));
  assert_true(isnan(v[0]) && isnan(v[8]));
}

static void matrix_rank_matches_jax(void **state) {
  (void)state;
  const struct {
    const char *golden;
    double rtol;
    int hermitian;
  } cases[] = {{"rank_full", NAN, 0},   {"rank_low", NAN, 0},         {"rank_rtol", 0.01, 0},
               {"rank_herm", NAN, 1},   {"rank_batch", NAN, 0},       {"rank_zero", NAN, 0},
               {"rank_vector", NAN, 0}, {"rank_zero_vector", NAN, 0}, {"rank_low_f32", NAN, 0}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    jx_array *r =
        jx_linalg_matrix_rank(golden(cases[c].golden, "a"), cases[c].rtol, cases[c].hermitian);
    jx_array *want = golden(cases[c].golden, "out0");
    assert_true(jx_dtype_of(r) == JX_I32 || jx_dtype_of(r) == JX_I64);
    if (jx_shape_of(want).rank == 0) assert_int_equal(jx_shape_of(r).rank, 0);
    assert_close(r, want, 0);
  }
}

static void errors_name_the_shapes(void **state) {
  (void)state;
  jx_array *u, *s, *vh;
  assert_int_equal(jx_linalg_svd_ex(jx_zeros(JX_F64, JX_SHAPE(3, 4)), 0, 1, 1, &u, &s, &vh),
                   JX_ERR_SHAPE);
  assert_error_has("jx_linalg_svd_ex: operand f64[3,4] must be a square matrix");
  assert_true(jx_is_poisoned(jx_linalg_pinv_ex(jx_zeros(JX_F32, JX_SHAPE(2, 3)), NAN, 1)));
  assert_error_has("jx_linalg_pinv_ex: operand f32[2,3] must be a square matrix");
  assert_true(jx_is_poisoned(jx_linalg_expm_ex(jx_zeros(JX_F32, JX_SHAPE(2, 2)), 0, -1)));
  assert_error_has("jx_linalg_expm_ex: max_squarings -1 is negative");
  assert_true(jx_is_poisoned(jx_linalg_expm_ex(jx_zeros(JX_F32, JX_SHAPE(2, 3)), 1, 16)));
  assert_error_has("jx_linalg_expm_ex: operand f32[2,3] must be a square matrix");
  assert_true(jx_is_poisoned(jx_linalg_cholesky_ex(jx_zeros(JX_F64, JX_SHAPE(2, 3)), 1, 1)));
  assert_error_has("jx_linalg_cholesky_ex: operand f64[2,3] must be a square matrix");
  assert_true(jx_is_poisoned(jx_linalg_matrix_rank(jx_zeros(JX_F64, JX_SHAPE(2, 3)), NAN, 1)));
  assert_error_has("jx_linalg_matrix_rank: operand f64[2,3] must be a square matrix");
}

int main(void) {
  if (jx_set_cpu_device_count(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(options_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(hermitian_svd_reconstructs_the_symmetric_part, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(options_under_vmap_and_sharded_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(too_few_squarings_give_nans, setup, teardown),
      cmocka_unit_test_setup_teardown(matrix_rank_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(errors_name_the_shapes, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
