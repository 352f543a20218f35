/* Complex numbers against JAX (tests/golden/gen_complex.py): every op
 * eagerly, under jit and under vmap, in c64 (JAX's default mode) and c128
 * (x64); gradients of real functions of complex inputs (jax.grad's
 * convention), holomorphic gradients, jx_check_grads, promotion, and the
 * clear errors of ops JAX does not define on complex numbers. */
#include <complex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */
#include <jx/jx.h>

#include "array/array.h"
#include "test_util.h"
#include "test_golden_close.h"

#define DIR JX_TEST_DATA "/complex/"

static jx_array *golden(int x64, const char *name) { return golden_at(DIR, x64, name); }

/* dtype and shape equal, elements within rtol of each element's |want| (at least 1) */
static void assert_close(const char *what, jx_array *got, jx_array *want, double rtol) {
  assert_close_golden(what, got, want, rtol, CLOSE_ELEMENTWISE);
}

static double tol(int x64) { return x64 ? 1e-12 : 5e-6; }

/* ---- the ops ---- */
typedef jx_array *(*op3)(jx_array *z, jx_array *w, jx_array *x);
static jx_array *o_exp(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_exp(z);
}
static jx_array *o_log(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_log(z);
}
static jx_array *o_sqrt(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_sqrt(z);
}
static jx_array *o_rsqrt(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_rsqrt(z);
}
static jx_array *o_tanh(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_tanh(z);
}
static jx_array *o_sin(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_sin(z);
}
static jx_array *o_cos(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_cos(z);
}
static jx_array *o_exp2(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_exp2(z);
}
static jx_array *o_expm1(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_expm1(z);
}
static jx_array *o_log1p(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_log1p(z);
}
static jx_array *o_tan(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_tan(z);
}
static jx_array *o_asin(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_asin(z);
}
static jx_array *o_acos(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_acos(z);
}
static jx_array *o_atan(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_atan(z);
}
static jx_array *o_sinh(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_sinh(z);
}
static jx_array *o_cosh(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_cosh(z);
}
static jx_array *o_asinh(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_asinh(z);
}
static jx_array *o_acosh(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_acosh(z);
}
static jx_array *o_atanh(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_atanh(z);
}
/* gen_complex.py's IDX (a repeated index) and conv */
static jx_array *idx_array(void) {
  return jx_array_from(JX_I32, JX_SHAPE(3), (int32_t[]){2, 0, 2});
}
static jx_array *conv(jx_array *z, jx_array *w) {
  jx_array *k = jx_at_get(w, 2, (jx_index[]){JX_ALL, JX_SLICE(0, 2, 1)});
  return jx_conv_general_dilated(jx_reshape(z, JX_SHAPE(1, 2, 3)), jx_reshape(k, JX_SHAPE(1, 2, 2)),
                                 JX_SHAPE(1), JX_SHAPE(1), JX_SHAPE(1), JX_SHAPE(), JX_SHAPE(2),
                                 "NCH,OIH,NCH", 1);
}
static jx_array *o_gather(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_at_get(z, 2, (jx_index[]){JX_ALL, JX_IDX(idx_array())});
}
static jx_array *o_scatter_add(jx_array *z, jx_array *w, jx_array *x) {
  return (void)x, jx_at_add(z, 2, (jx_index[]){JX_ALL, JX_IDX(idx_array())}, w);
}
static jx_array *o_conv(jx_array *z, jx_array *w, jx_array *x) { return (void)x, conv(z, w); }
static jx_array *o_abs(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_abs(z);
}
static jx_array *o_sign(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_sign(z);
}
static jx_array *o_square(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_square(z);
}
static jx_array *o_reciprocal(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_reciprocal(z);
}
static jx_array *o_cube(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_integer_pow(z, 3);
}
static jx_array *o_neg(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_neg(z);
}
static jx_array *o_conj(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_conj(z);
}
static jx_array *o_real(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_real(z);
}
static jx_array *o_imag(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_imag(z);
}
static jx_array *o_angle(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_angle(z);
}
static jx_array *o_add(jx_array *z, jx_array *w, jx_array *x) { return (void)x, jx_add(z, w); }
static jx_array *o_sub(jx_array *z, jx_array *w, jx_array *x) { return (void)x, jx_sub(z, w); }
static jx_array *o_mul(jx_array *z, jx_array *w, jx_array *x) { return (void)x, jx_mul(z, w); }
static jx_array *o_div(jx_array *z, jx_array *w, jx_array *x) { return (void)x, jx_div(z, w); }
static jx_array *o_pow(jx_array *z, jx_array *w, jx_array *x) { return (void)x, jx_pow(z, w); }
static jx_array *o_mul_real(jx_array *z, jx_array *w, jx_array *x) { return (void)w, jx_mul(z, x); }
static jx_array *o_add_scalar(jx_array *z, jx_array *w, jx_array *x) {
  (void)z, (void)w; /* a Python complex: weak */
  return jx_add(x, jx_complex_scalar(JX_C128, 2, -1));
}
static jx_array *o_complex(jx_array *z, jx_array *w, jx_array *x) {
  return (void)z, (void)w, jx_complex(x, jx_mul(x, jx_scalar(JX_F32, 2)));
}
static jx_array *o_where(jx_array *z, jx_array *w, jx_array *x) {
  return jx_where(jx_gt(x, jx_scalar(JX_F32, 0)), z, w);
}
static jx_array *o_eq(jx_array *z, jx_array *w, jx_array *x) { return jx_eq(z, o_where(z, w, x)); }
static jx_array *o_sum0(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_sum(z, JX_AXES(0), 0);
}
static jx_array *o_prod1(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_prod(z, JX_AXES(1), 0);
}
static jx_array *o_mean(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, (void)x, jx_mean(z, JX_AXES(), 0);
}
static jx_array *o_astype_real(jx_array *z, jx_array *w, jx_array *x) {
  return (void)w, jx_astype(z, jx_dtype_of(x));
}

static const struct {
  const char *name;
  op3 f;
  int elementwise; /* batches along axis 0 of z, w and x alike */
} OPS[] = {
    {"exp", o_exp, 1},
    {"log", o_log, 1},
    {"sqrt", o_sqrt, 1},
    {"rsqrt", o_rsqrt, 1},
    {"tanh", o_tanh, 1},
    {"sin", o_sin, 1},
    {"cos", o_cos, 1},
    {"exp2", o_exp2, 1},
    {"expm1", o_expm1, 1},
    {"log1p", o_log1p, 1},
    {"tan", o_tan, 1},
    {"asin", o_asin, 1},
    {"acos", o_acos, 1},
    {"atan", o_atan, 1},
    {"sinh", o_sinh, 1},
    {"cosh", o_cosh, 1},
    {"asinh", o_asinh, 1},
    {"acosh", o_acosh, 1},
    {"atanh", o_atanh, 1},
    {"abs", o_abs, 1},
    {"sign", o_sign, 1},
    {"square", o_square, 1},
    {"reciprocal", o_reciprocal, 1},
    {"cube", o_cube, 1},
    {"neg", o_neg, 1},
    {"conj", o_conj, 1},
    {"real", o_real, 1},
    {"imag", o_imag, 1},
    {"angle", o_angle, 1},
    {"add", o_add, 1},
    {"sub", o_sub, 1},
    {"mul", o_mul, 1},
    {"div", o_div, 1},
    {"pow", o_pow, 1},
    {"mul_real", o_mul_real, 1},
    {"add_scalar", o_add_scalar, 1},
    {"complex", o_complex, 1},
    {"where", o_where, 1},
    {"eq", o_eq, 1},
    {"gather", o_gather, 0},
    {"scatter_add", o_scatter_add, 0},
    {"conv", o_conv, 0},
    {"sum0", o_sum0, 0},
    {"prod1", o_prod1, 0},
    {"mean", o_mean, 0},
    {"astype_real", o_astype_real, 1},
};
enum { NOPS = sizeof OPS / sizeof *OPS };

static void body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = ((op3)ctx)(in[0], in[1], in[2]);
}

static void ops_match_jax(int x64) {
  jx_config_enable_x64(x64);
  jx_array *in[3] = {golden(x64, "z"), golden(x64, "w"), golden(x64, "x")};
  for (int k = 0; k < NOPS; k++) {
    jx_scope_begin();
    jx_array *want = golden(x64, OPS[k].name);
    char what[96];
    snprintf(what, sizeof what, "%s %s eager", mode_name(x64), OPS[k].name);
    assert_close(what, OPS[k].f(in[0], in[1], in[2]), want, tol(x64));
    /* under jit */
    jx_fn *f = jx_fn_create(OPS[k].name, 3, 1, body, (void *)OPS[k].f);
    jx_fn *jf = jx_jit(f, NULL);
    jx_array *out[1];
    check_ok(jx_call(jf, in, out));
    snprintf(what, sizeof what, "%s %s jit", mode_name(x64), OPS[k].name);
    assert_close(what, out[0], want, tol(x64));
    /* under vmap over the rows: the same numbers */
    if (OPS[k].elementwise) {
      jx_fn *vf = jx_vmap(f, JX_AXES(0), JX_AXES(0));
      check_ok(jx_call(vf, in, out));
      snprintf(what, sizeof what, "%s %s vmap", mode_name(x64), OPS[k].name);
      assert_close(what, out[0], want, tol(x64));
      jx_fn_release(vf);
    }
    jx_fn_release(jf);
    jx_fn_release(f);
    jx_scope_end();
  }
  jx_array *mm = jx_matmul(golden(x64, "a"), golden(x64, "b"));
  assert_close("matmul", mm, golden(x64, "matmul"), x64 ? 1e-12 : 2e-6);
  jx_config_enable_x64(0);
}

static void ops_match_jax_c64(void **state) {
  (void)state;
  ops_match_jax(0);
}
static void ops_match_jax_c128(void **state) {
  (void)state;
  ops_match_jax(1);
}

/* ---- gradients ---- */
static jx_array *sum_all(jx_array *a) { return jx_sum(a, JX_AXES(), 0); }
static jx_array *abs2(jx_array *a) { return jx_integer_pow(jx_abs(a), 2); }
static void g_abs2(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = sum_all(abs2(in[0]));
}
static void g_re_sq(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = sum_all(jx_real(jx_mul(in[0], in[0])));
}
static void g_abs_expw(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = sum_all(jx_abs(jx_mul(jx_exp(in[0]), in[1])));
}
static void g_im_logdiv(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = sum_all(jx_imag(jx_div(jx_log(in[0]), in[1])));
}
static void g_angle(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = sum_all(jx_mul(jx_angle(in[0]), jx_real(in[1])));
}
static void g_mixed(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] =
      sum_all(jx_add(jx_real(jx_mul(jx_sqrt(in[0]), jx_conj(in[1]))), jx_imag(jx_tanh(in[0]))));
}
static void g_trig(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *z = in[0], *w = in[1];
  out[0] = sum_all(
      jx_add(jx_abs(jx_add(jx_tan(z), jx_asin(w))), jx_real(jx_mul(jx_acos(z), jx_atan(w)))));
}
/* acosh(w + 3): JAX's JVP of acosh, 1/sqrt(x^2 - 1), is its derivative
 * only where Re x >= 0, which jx_check_grads would tell */
static void g_hyp(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *z = in[0], *w = in[1];
  out[0] = sum_all(jx_add(jx_imag(jx_add(jx_mul(jx_sinh(z), jx_cosh(w)), jx_asinh(z))),
                          jx_abs(jx_sub(jx_acosh(jx_add(w, jx_scalar(JX_F32, 3))), jx_atanh(z)))));
}
static void g_logexp1p(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = sum_all(jx_add(jx_abs(jx_mul(jx_exp2(in[1]), jx_expm1(in[0]))),
                          jx_real(jx_mul(jx_log1p(in[1]), in[0]))));
}
static void g_scatter(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *z = in[0], *w = in[1];
  jx_array *s = jx_at_add(z, 2, (jx_index[]){JX_ALL, JX_IDX(idx_array())}, jx_mul(w, z));
  out[0] = sum_all(jx_add(abs2(s), jx_real(jx_mul(o_gather(z, w, NULL), w))));
}
static void g_conv_lhs(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = sum_all(abs2(conv(in[0], in[1])));
}
static void g_conv_rhs(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *z = in[0], *w = in[1];
  out[0] = sum_all(jx_add(jx_imag(conv(w, z)), jx_real(conv(w, jx_mul(z, z)))));
}
static void h_inv(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *z = in[0], *w = in[1];
  jx_array *terms[] = {jx_mul(jx_atan(z), jx_sinh(w)), jx_mul(jx_log1p(z), jx_expm1(w)),
                       jx_asinh(z), jx_acos(z), jx_mul(jx_atanh(z), jx_tan(z))};
  jx_array *acc = terms[0];
  for (int k = 1; k < 5; k++) acc = jx_add(acc, terms[k]);
  out[0] = sum_all(acc);
}
static void h_sinz(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = sum_all(jx_mul(jx_sin(in[0]), in[0]));
}
static void h_poly(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = sum_all(jx_add(jx_mul(jx_integer_pow(in[0], 3), in[1]), jx_exp(in[0])));
}
static void g_matmul(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = sum_all(abs2(jx_matmul(in[0], in[1])));
}

static const struct {
  const char *name;
  jx_body f;
  int holomorphic;
} GRADS[] = {{"grad_abs2", g_abs2, 0},         {"grad_re_sq", g_re_sq, 0},
             {"grad_abs_expw", g_abs_expw, 0}, {"grad_im_logdiv", g_im_logdiv, 0},
             {"grad_angle", g_angle, 0},       {"grad_mixed", g_mixed, 0},
             {"grad_trig", g_trig, 0},         {"grad_hyp", g_hyp, 0},
             {"grad_logexp1p", g_logexp1p, 0}, {"hgrad_inv", h_inv, 1},
             {"grad_scatter", g_scatter, 0},   {"grad_conv_lhs", g_conv_lhs, 0},
             {"grad_conv_rhs", g_conv_rhs, 0}, {"hgrad_sinz", h_sinz, 1},
             {"hgrad_poly", h_poly, 1}};

static void grads_match_jax(int x64) {
  jx_config_enable_x64(x64);
  jx_array *zw[2] = {golden(x64, "z"), golden(x64, "w")};
  for (size_t k = 0; k < sizeof GRADS / sizeof *GRADS; k++) {
    jx_scope_begin();
    jx_fn *f = jx_fn_create(GRADS[k].name, 2, 1, GRADS[k].f, NULL);
    jx_fn *g = GRADS[k].holomorphic ? jx_grad_holomorphic(f, JX_AXES(0)) : jx_grad(f, JX_AXES(0));
    jx_fn *jg = jx_jit(g, NULL);
    jx_array *out[1];
    char what[96];
    check_ok(jx_call(g, zw, out));
    snprintf(what, sizeof what, "%s %s", mode_name(x64), GRADS[k].name);
    assert_close(what, out[0], golden(x64, GRADS[k].name), x64 ? 1e-11 : 2e-5);
    check_ok(jx_call(jg, zw, out));
    assert_close(what, out[0], golden(x64, GRADS[k].name), x64 ? 1e-11 : 2e-5);
    /* JVPs against central differences, VJPs against the JVPs, to order 2 */
    if (x64 && !GRADS[k].holomorphic) check_ok(jx_check_grads(f, zw, 2, 0, 0));
    jx_fn_release(jg);
    jx_fn_release(g);
    jx_fn_release(f);
    jx_scope_end();
  }
  jx_fn *f = jx_fn_create("matmul", 2, 1, g_matmul, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_array *ab[2] = {golden(x64, "a"), golden(x64, "b")}, *out[1];
  check_ok(jx_call(g, ab, out));
  assert_close("grad_matmul", out[0], golden(x64, "grad_matmul"), x64 ? 1e-11 : 2e-5);
  if (x64) check_ok(jx_check_grads(f, ab, 1, 0, 0));
  jx_fn_release(g);
  jx_fn_release(f);
  jx_config_enable_x64(0);
}

static void grads_match_jax_c64(void **state) {
  (void)state;
  grads_match_jax(0);
}
static void grads_match_jax_c128(void **state) {
  (void)state;
  grads_match_jax(1);
}

/* ---- promotion, conversion, errors ---- */
static void promotion_and_conversion(void **state) {
  (void)state;
  jx_array *f32 = jx_ones(JX_F32, JX_SHAPE(2)), *c64 = jx_ones(JX_C64, JX_SHAPE(2));
  assert_int_equal(jx_dtype_of(jx_add(f32, c64)), JX_C64);
  assert_int_equal(jx_dtype_of(jx_add(jx_ones(JX_F64, JX_SHAPE(2)), c64)), JX_C128);
  /* a Python complex with an int array: weak c64 in the default mode */
  jx_array *w = jx_add(jx_ones(JX_I32, JX_SHAPE(2)), jx_complex_scalar(JX_C128, 0, 1));
  assert_int_equal(jx_dtype_of(w), JX_C64);
  assert_true(jx_is_weak(w));
  jx_config_enable_x64(1);
  assert_int_equal(
      jx_dtype_of(jx_add(jx_ones(JX_I32, JX_SHAPE(2)), jx_complex_scalar(JX_C128, 0, 1))), JX_C128);
  jx_config_enable_x64(0);
  /* complex -> real keeps the real part; real -> complex has imaginary part 0 */
  float v[4] = {1.5f, -2, -3, 4};
  jx_array *z = jx_array_from(JX_C64, JX_SHAPE(2), v);
  float r[2];
  check_ok(jx_read(jx_astype(z, JX_F32), r, sizeof r));
  assert_true(r[0] == 1.5f && r[1] == -3);
  int32_t i[2];
  check_ok(jx_read(jx_astype(z, JX_I32), i, sizeof i));
  assert_true(i[0] == 1 && i[1] == -3);
  double d[4];
  check_ok(jx_read(jx_astype(jx_astype(z, JX_C128), JX_C128), d, sizeof d));
  assert_true(d[0] == 1.5 && d[1] == -2 && d[2] == -3 && d[3] == 4);
  check_ok(jx_read(jx_astype(jx_ones(JX_I32, JX_SHAPE(2)), JX_C128), d, sizeof d));
  assert_true(d[0] == 1 && d[1] == 0 && d[2] == 1 && d[3] == 0);
  uint8_t b[2];
  float nz[4] = {0, 0, 0, 1};
  check_ok(jx_read(jx_astype(jx_array_from(JX_C64, JX_SHAPE(2), nz), JX_BOOL), b, sizeof b));
  assert_true(b[0] == 0 && b[1] == 1);
  /* printing as NumPy */
  char *s = jx_format(z);
  assert_string_equal(s, "[ 1.5-2.j -3. +4.j]");
  free(s);
}

/* jnp.real and jnp.conj hand a real array back as it is: the gradient flows
 * through them (d/dx sum(real(x) * conj(x)) = 2x), eagerly and jitted. */
static void real_of_real(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_sum(jx_mul(jx_real(in[0]), jx_conj(in[0])), JX_AXES(), 0);
}

static void real_and_conj_of_real_keep_gradients(void **state) {
  (void)state;
  float x[3] = {1.5f, -2, 0.25f};
  jx_array *a = jx_array_from(JX_F32, JX_SHAPE(3), x);
  jx_fn *f = jx_fn_create("real_of_real", 1, 1, real_of_real, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0)), *jg = jx_jit(g, NULL);
  jx_fn *fns[2] = {g, jg};
  for (int k = 0; k < 2; k++) {
    jx_array *out[1];
    check_ok(jx_call(fns[k], &a, out));
    float d[3];
    check_ok(jx_read(out[0], d, sizeof d));
    for (int i = 0; i < 3; i++) assert_true(d[i] == 2 * x[i]);
  }
  jx_fn_release(jg);
  jx_fn_release(g);
  jx_fn_release(f);
}

static void refused_ops_name_op_and_dtype(void **state) {
  (void)state;
  jx_array *z = jx_ones(JX_C64, JX_SHAPE(3));
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_lt(z, z)));
  assert_error_has("lt: operand 0 is c64[3]; lt is not defined for complex numbers");
  assert_true(jx_is_poisoned(jx_floor(z)));
  assert_error_has("floor");
  assert_true(jx_is_poisoned(jx_erf(z)));
  assert_error_has("erf: operand 0 is c64[3]");
  assert_true(jx_is_poisoned(jx_max(z, JX_AXES(), 0)));
  assert_error_has("reduce_max");
  assert_true(jx_is_poisoned(jx_maximum(z, z)));
  assert_error_has("max: operand 0 is c64[3]");
  assert_true(jx_is_poisoned(jx_cumsum(z, 0)));
  assert_error_has("cumsum");
  assert_true(jx_is_poisoned(jx_sort(z, 0)));
  assert_error_has("sort");
  assert_true(jx_is_poisoned(jx_complex(z, z)));
  assert_error_has("jx_complex: operand 0 is c64[3]; the parts must be real");
  /* grad: a complex output needs holomorphic; holomorphic needs complex inputs */
  jx_fn *f = jx_fn_create("sin", 2, 1, h_sinz, NULL);
  jx_array *out[1], *in[2] = {z, z};
  jx_fn *gf = jx_grad(f, JX_AXES(0));
  assert_int_not_equal(jx_call(gf, in, out), JX_OK);
  assert_error_has("jx_grad_holomorphic");
  jx_fn *g = jx_fn_create("abs2", 2, 1, g_abs2, NULL);
  jx_array *rin[2] = {jx_ones(JX_F32, JX_SHAPE(3)), jx_ones(JX_F32, JX_SHAPE(3))};
  jx_fn *hg = jx_grad_holomorphic(g, JX_AXES(0));
  assert_int_not_equal(jx_call(hg, rin, out), JX_OK);
  assert_error_has("must return a complex scalar");
  jx_fn_release(hg);
  jx_fn_release(gf);
  jx_fn_release(f);
  jx_fn_release(g);
  jx_clear_error();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ops_match_jax_c64),
      cmocka_unit_test(ops_match_jax_c128),
      cmocka_unit_test(grads_match_jax_c64),
      cmocka_unit_test(grads_match_jax_c128),
      cmocka_unit_test(promotion_and_conversion),
      cmocka_unit_test(refused_ops_name_op_and_dtype),
      cmocka_unit_test(real_and_conj_of_real_keep_gradients),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
