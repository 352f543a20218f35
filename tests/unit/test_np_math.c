/* jnp.isnan, isinf, nan_to_num, isclose, allclose, log2, log10, logaddexp,
 * hypot, clip with array bounds, and jax.nn.elu, leaky_relu, selu, glu,
 * standardize against JAX (tests/golden/gen_np_surface.py): values at NaN,
 * infinities and zero, gradients (logaddexp's custom rule), under jit; and
 * their errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"
#include "unit/np_golden.h"

NP_FN1(f_isnan, jx_isnan(a))
NP_FN1(f_isinf, jx_isinf(a))
NP_FN1(f_nan_to_num, jx_nan_to_num(a, 0, INFINITY, -INFINITY))
NP_FN1(f_nan_to_num_f64, jx_nan_to_num(a, -1, INFINITY, -7))
NP_FN2(f_isclose, jx_isclose(a, b, 1e-5, 1e-8, 0))
NP_FN2(f_isclose_nan, jx_isclose(a, b, 0.2, 0, 1))
NP_FN2(f_allclose, jx_allclose(a, b, 1e-5, 1e-8, 0))
NP_FN1(f_log2, jx_log2(a))
NP_FN1(f_log10, jx_log10(a))
NP_FN2(f_logaddexp, jx_logaddexp(a, b))
NP_FN2(f_hypot, jx_hypot(a, b))
static void f_clip_arrays(jx_array *const *in, jx_array **out) {
  out[0] = jx_clip_arrays(in[0], in[1], in[2]);
}
NP_FN2(f_clip_lo_only, jx_clip_arrays(a, b, NULL))
NP_FN1(f_elu, jx_elu(a, 0.7))
NP_FN1(f_leaky_relu, jx_leaky_relu(a, 0.1))
NP_FN1(f_selu, jx_selu(a))
NP_FN1(f_glu, jx_glu(a, 0))
NP_FN1(f_standardize, jx_standardize(a, JX_AXES(), 1e-5))
NP_FN1(f_standardize_axes, jx_standardize(a, JX_AXES(0, 2), 1e-3))

static const np_case cases[] = {
    NP("isnan", 1, 1, f_isnan),
    NP("isinf", 1, 1, f_isinf),
    NP("isnan_int", 1, 1, f_isnan),
    NP("nan_to_num", 1, 1, f_nan_to_num),
    NP("nan_to_num_f64", 1, 1, f_nan_to_num_f64),
    NP("isclose", 2, 1, f_isclose),
    NP("isclose_nan", 2, 1, f_isclose_nan),
    NP("allclose", 2, 1, f_allclose),
    NP("log2", 1, 1, f_log2),
    NP("log10", 1, 1, f_log10, .check_grads = 1),
    NP("log2_int", 1, 1, f_log2),
    NP("logaddexp", 2, 1, f_logaddexp),
    NP("logaddexp_f64", 2, 1, f_logaddexp, .check_grads = 1),
    NP("hypot", 2, 1, f_hypot),
    NP("clip_arrays", 3, 1, f_clip_arrays),
    NP("clip_lo_only", 2, 1, f_clip_lo_only),
    NP("elu", 1, 1, f_elu),
    NP("leaky_relu", 1, 1, f_leaky_relu),
    NP("selu", 1, 1, f_selu),
    NP("glu", 1, 1, f_glu),
    NP("standardize", 1, 1, f_standardize),
    NP("standardize_axes", 1, 1, f_standardize_axes, .check_grads = 1),
};
NP_GOLDEN_TESTS(cases)

static void test_errors(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(3)), *b = jx_zeros(JX_F32, JX_SHAPE(4));
  NP_EXPECT_ERROR(jx_isclose(a, b, 1e-5, 1e-8, 0), "jx_isclose: shapes [3] and [4]");
  NP_EXPECT_ERROR(jx_logaddexp(a, b), "jx_logaddexp: shapes [3] and [4]");
  NP_EXPECT_ERROR(jx_hypot(a, b), "jx_hypot");
  NP_EXPECT_ERROR(jx_glu(a, 0), "odd size 3");
  NP_EXPECT_ERROR(jx_glu(b, 1), "axis 1");
  NP_EXPECT_ERROR(jx_isnan(NULL), "jx_isnan: argument 0 is NULL");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_golden_eager, setup, teardown),
      cmocka_unit_test_setup_teardown(test_golden_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
