/* The complex (c64, c128) cholesky, triangular_solve (conjugate_a), lu,
 * solve, inv, det, slogdet, matrix_power, expm and norms against JAX goldens
 * (tests/golden/gen_linalg_complex_a.py): values and VJPs (a real cotangent
 * on a real output, so jax.grad of a real function of complex inputs),
 * eagerly and under jit; vmap and a batch sharded over two devices;
 * jx_check_grads; a Hermitian matrix that is not positive definite and a
 * singular one giving JAX's NaNs and zeros; errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "ir/program.h"
#include "test_util.h"
#include "trace/fn.h"

#include "test_close.h"
#include "test_linalg_golden.h"

/* The array `name` of case c in dtype dt ("" for a case of one dtype). */
static jx_array *golden_dt(const char *c, const char *dt, const char *name) {
  char cased[256];
  snprintf(cased, sizeof cased, "%s%s%s", c, *dt ? "_" : "", dt);
  return golden_in("linalg_complex_a", cased, name);
}

/* Both parts of a and b close (assert_close reads real parts only). */
static void assert_close_c(jx_array *a, jx_array *b, double tol) {
  assert_int_equal(jx_dtype_of(a), jx_dtype_of(b));
  assert_close(jx_real(a), jx_real(b), tol);
  if (jx_dtype_of(a) == JX_C64 || jx_dtype_of(a) == JX_C128)
    assert_close(jx_imag(a), jx_imag(b), tol);
}

static jx_array *slogdet_part(jx_array *a, int which) {
  jx_array *sign, *logabsdet;
  jx_linalg_slogdet(a, &sign, &logabsdet);
  return which ? logabsdet : sign;
}

/* The case bodies: out[0] from in[0] (and in[1]), as the generator's CASES. */
static void body(void *ctx, jx_array *const *in, jx_array **out) {
  const char *c = ctx;
  jx_array *a = in[0], *lu, *piv, *perm;
  if (!strcmp(c, "cholesky"))
    out[0] = jx_linalg_cholesky(a);
  else if (!strcmp(c, "cholesky_upper"))
    out[0] = jx_linalg_cholesky_ex(a, 1, 1);
  else if (!strcmp(c, "tri_left_lower_h"))
    out[0] = jx_linalg_triangular_solve_ex(a, in[1], 1, 1, 1, 1, 0);
  else if (!strcmp(c, "tri_right_upper_conj"))
    out[0] = jx_linalg_triangular_solve_ex(a, in[1], 0, 0, 0, 1, 0);
  else if (!strcmp(c, "tri_left_upper_t_unit"))
    out[0] = jx_linalg_triangular_solve(a, in[1], 1, 0, 1, 1);
  else if (!strcmp(c, "lu")) {
    jx_linalg_lu(a, &lu, &piv, &perm);
    out[0] = lu;
  } else if (!strcmp(c, "solve") || !strcmp(c, "solve_vector"))
    out[0] = jx_linalg_solve(a, in[1]);
  else if (!strcmp(c, "inv"))
    out[0] = jx_linalg_inv(a);
  else if (!strcmp(c, "det"))
    out[0] = jx_linalg_det(a);
  else if (!strcmp(c, "slogdet_sign"))
    out[0] = slogdet_part(a, 0);
  else if (!strcmp(c, "slogdet_logabsdet"))
    out[0] = slogdet_part(a, 1);
  else if (!strcmp(c, "matrix_power_3"))
    out[0] = jx_linalg_matrix_power(a, 3);
  else if (!strcmp(c, "matrix_power_neg2"))
    out[0] = jx_linalg_matrix_power(a, -2);
  else if (!strncmp(c, "expm", 4))
    out[0] = jx_linalg_expm(a);
  else if (!strcmp(c, "vector_norm_2"))
    out[0] = jx_linalg_vector_norm(a, 2);
  else if (!strcmp(c, "vector_norm_1"))
    out[0] = jx_linalg_vector_norm(a, 1);
  else if (!strcmp(c, "vector_norm_inf"))
    out[0] = jx_linalg_vector_norm(a, INFINITY);
  else if (!strcmp(c, "vector_norm_neg_inf"))
    out[0] = jx_linalg_vector_norm(a, -INFINITY);
  else if (!strcmp(c, "vector_norm_0"))
    out[0] = jx_linalg_vector_norm(a, 0);
  else if (!strcmp(c, "vector_norm_3"))
    out[0] = jx_linalg_vector_norm(a, 3);
  else if (!strcmp(c, "matrix_norm_fro"))
    out[0] = jx_linalg_matrix_norm(a, JX_NORM_FRO);
  else if (!strcmp(c, "matrix_norm_1"))
    out[0] = jx_linalg_matrix_norm(a, JX_NORM_1);
  else if (!strcmp(c, "matrix_norm_neg_1"))
    out[0] = jx_linalg_matrix_norm(a, JX_NORM_NEG_1);
  else if (!strcmp(c, "matrix_norm_inf"))
    out[0] = jx_linalg_matrix_norm(a, JX_NORM_INF);
  else
    out[0] = jx_linalg_matrix_norm(a, JX_NORM_NEG_INF);
}

static const struct {
  const char *name;
  int nin;
} CASES[] = {{"cholesky", 1},
             {"cholesky_upper", 1},
             {"tri_left_lower_h", 2},
             {"tri_right_upper_conj", 2},
             {"tri_left_upper_t_unit", 2},
             {"lu", 1},
             {"solve", 2},
             {"solve_vector", 2},
             {"inv", 1},
             {"det", 1},
             {"slogdet_sign", 1},
             {"slogdet_logabsdet", 1},
             {"matrix_power_3", 1},
             {"matrix_power_neg2", 1},
             {"expm", 1},
             {"expm_squared", 1},
             {"vector_norm_2", 1},
             {"vector_norm_1", 1},
             {"vector_norm_inf", 1},
             {"vector_norm_neg_inf", 1},
             {"vector_norm_0", 1},
             {"vector_norm_3", 1},
             {"matrix_norm_fro", 1},
             {"matrix_norm_1", 1},
             {"matrix_norm_neg_1", 1},
             {"matrix_norm_inf", 1},
             {"matrix_norm_neg_inf", 1}};
#define NCASES (sizeof CASES / sizeof *CASES)
static const char *const DTYPES[] = {"c64", "c128"};

static double tol_of(const char *dt) { return strcmp(dt, "c128") ? 2e-4 : 1e-9; }

/* The VJP run (primals and the cotangent in; the output and the inputs'
 * cotangents out) of case k in dtype dt against JAX. */
static void check_vjp(jx_fn *vjp, size_t k, const char *dt) {
  const char *c = CASES[k].name;
  int nin = CASES[k].nin;
  jx_array *in[3], *out[3];
  for (int i = 0; i < nin; i++) {
    char name[8];
    snprintf(name, sizeof name, "in%d", i);
    in[i] = golden_dt(c, dt, name);
  }
  in[nin] = golden_dt(c, dt, "ct");
  check_ok(jx_call(vjp, in, out));
  double tol = tol_of(dt);
  assert_close_c(out[0], golden_dt(c, dt, "out"), tol);
  for (int i = 0; i < nin; i++) {
    char name[8];
    snprintf(name, sizeof name, "vjp%d", i);
    assert_close_c(out[1 + i], golden_dt(c, dt, name), tol);
  }
}

static void values_and_vjps_match_jax(void **state) {
  (void)state;
  for (int jit = 0; jit < 2; jit++)
    for (size_t k = 0; k < NCASES; k++)
      for (int d = 0; d < 2; d++) {
        /* under jit (a compile per program): the primitives' cases in c64 */
        if (jit && (d == 1 || k > 7)) continue;
        jx_fn *f = jx_fn_create(CASES[k].name, CASES[k].nin, 1, body, (void *)CASES[k].name);
        jx_fn *vjp = jx_vjp(f);
        jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
        check_vjp(run, k, DTYPES[d]);
        if (jit) jx_fn_release(run);
        jx_fn_release(vjp);
        jx_fn_release(f);
      }
  /* lu's pivots and permutation */
  for (int d = 0; d < 2; d++) {
    jx_array *lu, *piv, *perm;
    check_ok(jx_linalg_lu(golden_dt("lu", DTYPES[d], "in0"), &lu, &piv, &perm));
    assert_close(piv, golden_dt("lu", DTYPES[d], "pivots"), 0);
    assert_close(perm, golden_dt("lu", DTYPES[d], "permutation"), 0);
  }
}

/* triangular_solve's conjugate_a is an int parameter (slot i4): the
 * traced program prints it, and programs that differ only in it differ */
static void conjugate_a_is_a_parameter(void **state) {
  (void)state;
  const char *cases[2] = {"tri_right_upper_conj", "tri_left_upper_t_unit"}; /* 1, then 0 */
  for (int c = 0; c < 2; c++) {
    jx_array *a = golden_dt(cases[c], "c64", "in0"), *b = golden_dt(cases[c], "c64", "in1");
    jx_aval av[2] = {{JX_C64, 0, jx_shape_of(a), 0}, {JX_C64, 0, jx_shape_of(b), 0}};
    jx_fn *f = jx_fn_create(cases[c], 2, 1, body, (void *)cases[c]), *jf = jx_jit(f, NULL);
    jx_program *prog = jx_fn_program(jf, av);
    assert_non_null(prog);
    char *ir = jx_program_print(prog);
    assert_non_null(strstr(ir, c ? "conjugate_a=0" : "conjugate_a=1"));
    free(ir);
    jx_program_release(prog);
    jx_fn_release(jf);
    jx_fn_release(f);
  }
}

/* The VJP of case k vmapped over the batch axis and jitted, then jitted
 * with the batch split over two devices: the stacked goldens. */
static void batched_and_sharded(void **state) {
  (void)state;
  const size_t cases[] = {0, 6}; /* cholesky (with its conjugate transposed solves), solve */
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    size_t k = cases[i];
    jx_fn *f = jx_fn_create(CASES[k].name, CASES[k].nin, 1, body, (void *)CASES[k].name);
    batched_vjps b = batched_vjps_of(f);
    check_vjp(b.mapped, k, "c128");
    if (b.sharded) check_vjp(b.sharded, k, "c128");
    batched_vjps_release(&b);
    jx_fn_release(f);
  }
}

static void body_logabsdet_of_parts(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx; /* a real function of real inputs through complex linear algebra */
  jx_array *a = jx_complex(in[0], in[1]);
  jx_array *l = jx_linalg_cholesky(jx_matmul(a, jx_conj(jx_swapaxes(a, -1, -2))));
  out[0] = jx_add(slogdet_part(jx_linalg_solve(l, jx_linalg_expm(a)), 1),
                  jx_linalg_matrix_norm(l, JX_NORM_FRO));
}

static void gradients_check(void **state) {
  (void)state;
  jx_array *a = golden_dt("inv", "c128", "in0");
  jx_array *in[2] = {jx_real(a), jx_imag(a)};
  jx_fn *f = jx_fn_create("complex_chain", 2, 1, body_logabsdet_of_parts, NULL);
  check_ok(jx_check_grads(f, in, 1, 0, 0));
  jx_fn_release(f);
}

static void nans_and_zeros_as_jax(void **state) {
  (void)state;
  jx_array *l = jx_linalg_cholesky(golden_dt("not_pd", "c128", "a"));
  double want[8], got[8];
  check_ok(jx_read(golden_dt("not_pd", "c128", "out"), want, sizeof want));
  check_ok(jx_read(l, got, sizeof got));
  for (int i = 0; i < 8; i++) assert_true(isnan(want[i]) ? isnan(got[i]) : got[i] == want[i]);
  jx_array *s = golden_dt("singular", "c128", "a"), *sign, *logabsdet;
  assert_close_c(jx_linalg_det(s), golden_dt("singular", "c128", "det"), 1e-12);
  check_ok(jx_linalg_slogdet(s, &sign, &logabsdet));
  assert_close_c(sign, golden_dt("singular", "c128", "sign"), 0);
  double v;
  check_ok(jx_read(logabsdet, &v, sizeof v));
  assert_true(isinf(v) && v < 0);
}

static void errors_name_the_operands(void **state) {
  (void)state;
  jx_array *c = jx_zeros(JX_C64, JX_SHAPE(2, 3));
  assert_true(jx_is_poisoned(jx_linalg_cholesky(c)));
  assert_error_has("jx_linalg_cholesky: operand c64[2,3] must be a square matrix");
  assert_true(jx_is_poisoned(jx_linalg_inv(jx_zeros(JX_I32, JX_SHAPE(2, 2)))));
  assert_error_has("jx_linalg_inv: operand i32[2,2] must be f32, f64, c64 or c128");
  jx_array *a = jx_zeros(JX_C128, JX_SHAPE(3, 3));
  assert_true(jx_is_poisoned(
      jx_linalg_triangular_solve_ex(a, jx_zeros(JX_C64, JX_SHAPE(3, 2)), 1, 1, 0, 1, 0)));
  assert_error_has("b c64[3,2] does not fit a c128[3,3]");
  assert_true(jx_is_poisoned(jx_linalg_solve(a, jx_zeros(JX_C128, JX_SHAPE(2)))));
  assert_error_has("jx_linalg_solve: b c128[2] does not fit a c128[3,3]");
  assert_true(jx_is_poisoned(jx_linalg_vector_norm(jx_zeros(JX_C64, JX_SHAPE()), 2)));
  assert_error_has("jx_linalg_vector_norm: operand c64[] needs at least 1 axes");
}

int main(void) {
  if (jx_set_cpu_device_count(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(values_and_vjps_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(batched_and_sharded, setup, teardown),
      cmocka_unit_test_setup_teardown(conjugate_a_is_a_parameter, setup, teardown),
      cmocka_unit_test_setup_teardown(gradients_check, setup, teardown),
      cmocka_unit_test_setup_teardown(nans_and_zeros_as_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(errors_name_the_operands, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
