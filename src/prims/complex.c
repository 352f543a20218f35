/* Complex numbers: the rows real, imag, conj and complex, and which
 * primitives take complex operands at all.
 *
 * real and imag take c64/c128 and give the parts' dtype (f32/f64); complex
 * takes two f32 or two f64 operands and gives c64/c128; conj takes complex
 * (the NumPy layer returns a real operand as it is). All four are linear and
 * their transposes are JAX's (lax.py): real's cotangent ct goes back as
 * complex(ct, 0), imag's as complex(0, -ct), complex's as (real(ct),
 * -imag(ct)) and conj's as conj(ct): the plain transpose of each real-linear
 * map, which is what makes jx_grad of a real function of complex inputs the
 * conjugate of df/dz... exactly as jax.grad.
 *
 * A primitive runs on complex operands only when it is listed in
 * takes_complex below: the kernels of every other row read elements as real
 * numbers, so a complex operand would give silent garbage there; binding one
 * is an error naming the primitive and the operand instead (lt, max, floor,
 * erf, cumsum, sort, ...; lax refuses most of them too). */
#include <complex.h>

#include "../base/error.h"
#include "elementwise.h"
#include "prims.h"
#include "rules.h"

/* ---- which primitives take complex operands (or make complex results) ---- */
static const uint8_t takes_complex[JX_PRIM_COUNT] = {
    /* elementwise arithmetic with complex kernels (unary.c, binary.c) */
    [JX_PRIM_neg] = 1,
    [JX_PRIM_abs] = 1,
    [JX_PRIM_sign] = 1,
    [JX_PRIM_exp] = 1,
    [JX_PRIM_log] = 1,
    [JX_PRIM_sqrt] = 1,
    [JX_PRIM_rsqrt] = 1,
    [JX_PRIM_tanh] = 1,
    [JX_PRIM_sin] = 1,
    [JX_PRIM_cos] = 1,
    [JX_PRIM_exp2] = 1,
    [JX_PRIM_expm1] = 1,
    [JX_PRIM_log1p] = 1,
    [JX_PRIM_tan] = 1,
    [JX_PRIM_asin] = 1,
    [JX_PRIM_acos] = 1,
    [JX_PRIM_atan] = 1,
    [JX_PRIM_sinh] = 1,
    [JX_PRIM_cosh] = 1,
    [JX_PRIM_asinh] = 1,
    [JX_PRIM_acosh] = 1,
    [JX_PRIM_atanh] = 1,
    [JX_PRIM_integer_pow] = 1,
    [JX_PRIM_stop_gradient] = 1,
    [JX_PRIM_add] = 1,
    [JX_PRIM_sub] = 1,
    [JX_PRIM_mul] = 1,
    [JX_PRIM_div] = 1,
    [JX_PRIM_pow] = 1,
    [JX_PRIM_eq] = 1,
    [JX_PRIM_ne] = 1,
    [JX_PRIM_real] = 1,
    [JX_PRIM_imag] = 1,
    [JX_PRIM_conj] = 1,
    [JX_PRIM_complex] = 1,
    /* moves and copies of whole elements */
    [JX_PRIM_select_n] = 1,
    [JX_PRIM_convert_element_type] = 1,
    [JX_PRIM_broadcast_in_dim] = 1,
    [JX_PRIM_reshape] = 1,
    [JX_PRIM_squeeze] = 1,
    [JX_PRIM_expand_dims] = 1,
    [JX_PRIM_transpose] = 1,
    [JX_PRIM_rev] = 1,
    [JX_PRIM_pad] = 1,
    [JX_PRIM_concatenate] = 1,
    [JX_PRIM_slice] = 1,
    [JX_PRIM_dynamic_slice] = 1,
    [JX_PRIM_dynamic_update_slice] = 1,
    [JX_PRIM_gather] = 1,
    [JX_PRIM_scatter] = 1,
    [JX_PRIM_scatter_add] = 1,
    /* reductions and contractions with complex kernels */
    [JX_PRIM_reduce_sum] = 1,
    [JX_PRIM_reduce_prod] = 1,
    [JX_PRIM_dot_general] = 1,
    [JX_PRIM_conv_general_dilated] = 1,
    [JX_PRIM_fft] = 1,
    [JX_PRIM_eig] = 1,
    [JX_PRIM_cholesky] = 1,
    [JX_PRIM_triangular_solve] = 1,
    [JX_PRIM_lu] = 1,
    [JX_PRIM_eigh] = 1,
    [JX_PRIM_qr] = 1,
    [JX_PRIM_svd] = 1,
    [JX_PRIM_pinv] = 1,
    /* control flow and custom rules run nested programs of the rows above */
    [JX_PRIM_cond] = 1,
    [JX_PRIM_while] = 1,
    [JX_PRIM_scan] = 1,
    [JX_PRIM_remat] = 1,
    [JX_PRIM_custom_vjp_call] = 1,
    [JX_PRIM_custom_lin] = 1,
    [JX_PRIM_custom_jvp_call] = 1,
    /* layouts and collectives that move or sum whole elements */
    [JX_PRIM_sharding_constraint] = 1,
    [JX_PRIM_shard_map] = 1,
    [JX_PRIM_psum] = 1,
    [JX_PRIM_all_gather] = 1,
    [JX_PRIM_psum_scatter] = 1,
    [JX_PRIM_all_to_all] = 1,
    [JX_PRIM_ppermute] = 1,
    [JX_PRIM_pvary] = 1,
    [JX_PRIM_debug_print] = 1,
};

jx_status jx_prim_check_complex(const jx_prim *p, int n, const jx_aval *avals, const char *what) {
  if ((unsigned)p->id < JX_PRIM_COUNT && takes_complex[p->id]) return JX_OK;
  for (int i = 0; i < n; i++)
    if (jx_is_complex(avals[i].dtype)) {
      char s[JX_AVAL_STR_CAP];
      return jx_error_set(JX_ERR_DTYPE, "%s: %s %d is %s; %s is not defined for complex numbers",
                          p->name, what, i, jx_aval_str(avals[i].dtype, avals[i].shape, s),
                          p->name);
    }
  return JX_OK;
}

/* ---- real, imag, conj ---- */
typedef enum { C_REAL, C_IMAG, C_CONJ } cpart;

static jx_status infer_part(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out, int to_real) {
  char s[JX_AVAL_STR_CAP];
  if (!jx_is_complex(in[0].dtype))
    return jx_error_set(JX_ERR_DTYPE, "%s: operand 0 is %s but needs a complex dtype",
                        ctx->prim->name, jx_aval_str(in[0].dtype, in[0].shape, s));
  *out = in[0];
  out->dtype = to_real ? jx_complex_part(in[0].dtype) : in[0].dtype;
  return JX_OK;
}

/* real, imag or conj of n elements of parts T (float for c64, double for c128) */
#define PART_LOOP(T)                                                                               \
  do {                                                                                             \
    const T *x = in->data;                                                                         \
    T *o = out->data;                                                                              \
    switch (op) {                                                                                  \
    case C_REAL:                                                                                   \
      for (int64_t i = 0; i < n; i++) o[i] = x[2 * i];                                             \
      break;                                                                                       \
    case C_IMAG:                                                                                   \
      for (int64_t i = 0; i < n; i++) o[i] = x[2 * i + 1];                                         \
      break;                                                                                       \
    case C_CONJ:                                                                                   \
      for (int64_t i = 0; i < n; i++) o[2 * i] = x[2 * i], o[2 * i + 1] = -x[2 * i + 1];           \
      break;                                                                                       \
    }                                                                                              \
  } while (0)

static void part_kernel(cpart op, const jx_tensor *in, jx_tensor *out) {
  int64_t n = jx_shape_numel(in->shape);
  if (in->dtype == JX_C64)
    PART_LOOP(float);
  else
    PART_LOOP(double);
}

static jx_array *bind_complex(jx_array *re, jx_array *im) {
  return jx_bind1(&jx_prim_complex, 2, (jx_array *[]){re, im}, NULL);
}

/* real: ct -> complex(ct, 0) */
static jx_array *transpose_real_of(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  (void)ctx, (void)aval;
  return bind_complex(ct, jx_rule_zeros_like(ct));
}
/* imag: ct -> complex(0, -ct) */
static jx_array *transpose_imag_of(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  (void)ctx, (void)aval;
  return bind_complex(jx_rule_zeros_like(ct), jx_rule_neg(ct));
}
/* conj: ct -> conj(ct) */
static jx_array *transpose_conj_of(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  (void)ctx, (void)aval;
  return jx_bind1(&jx_prim_conj, 1, &ct, NULL);
}
static JX_DEFLINEAR_TRANSPOSE(transpose_real, transpose_real_of) static JX_DEFLINEAR_TRANSPOSE(
    transpose_imag, transpose_imag_of) static JX_DEFLINEAR_TRANSPOSE(transpose_conj,
                                                                     transpose_conj_of)

#define PART_ROW(NAME, OP, TO_REAL)                                                                \
  static jx_status infer_##NAME(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {         \
    return infer_part(ctx, in, out, TO_REAL);                                                      \
  }                                                                                                \
  static void eval_##NAME(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {           \
    (void)ctx;                                                                                     \
    part_kernel(OP, in, out);                                                                      \
  }                                                                                                \
  const jx_prim jx_prim_##NAME = {.name = #NAME,                                                   \
                                  .id = JX_PRIM_##NAME,                                            \
                                  .nin = 1,                                                        \
                                  .nout = 1,                                                       \
                                  .params = "",                                                    \
                                  .infer = infer_##NAME,                                           \
                                  .eval = eval_##NAME,                                             \
                                  .jvp = jx_jvp_linear_first,                                      \
                                  .transpose = transpose_##NAME,                                   \
                                  .elementwise = 1};
    PART_ROW(real, C_REAL, 1) PART_ROW(imag, C_IMAG, 1) PART_ROW(conj, C_CONJ, 0)

    /* ---- complex(re, im): two f32 or two f64 of one shape ---- */
    static jx_status infer_complex(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  char a[JX_AVAL_STR_CAP];
  for (int i = 0; i < 2; i++)
    if (in[i].dtype != JX_F32 && in[i].dtype != JX_F64)
      return jx_error_set(JX_ERR_DTYPE, "complex: operand %d is %s but needs f32 or f64", i,
                          jx_aval_str(in[i].dtype, in[i].shape, a));
  jx_status st = jx_infer_same("complex", JX_ACCEPT_FLOAT, -1, 2, in, out);
  if (st) return st;
  out->dtype = jx_complex_of(in[0].dtype);
  out->weak = 0;
  (void)ctx;
  return JX_OK;
}

static void eval_complex(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  int64_t n = jx_shape_numel(in[0].shape);
  if (in[0].dtype == JX_F32) {
    const float *re = in[0].data, *im = in[1].data;
    float *o = out->data;
    for (int64_t i = 0; i < n; i++) o[2 * i] = re[i], o[2 * i + 1] = im[i];
  } else {
    const double *re = in[0].data, *im = in[1].data;
    double *o = out->data;
    for (int64_t i = 0; i < n; i++) o[2 * i] = re[i], o[2 * i + 1] = im[i];
  }
}

/* JVP: complex(t_re, t_im), a missing tangent a zero of its operand */
static jx_status jvp_complex(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                             jx_array **y, jx_array **ty) {
  y[0] = jx_rule_apply1(ctx, x);
  ty[0] = NULL;
  if (t[0] || t[1])
    ty[0] = bind_complex(t[0] ? t[0] : jx_rule_zeros_like(x[0]),
                         t[1] ? t[1] : jx_rule_zeros_like(x[1]));
  return jx_last_status();
}

/* Transpose (lax.py's _complex_transpose_rule): re gets real(ct), im gets
 * imag(-ct). */
static jx_status transpose_complex(const jx_rule_ctx *ctx, jx_array *const *in,
                                   const jx_aval *avals, const uint8_t *linear, jx_array *const *ct,
                                   jx_array **ct_in) {
  (void)ctx, (void)in, (void)avals;
  ct_in[0] = ct_in[1] = NULL;
  if (!ct[0]) return JX_OK;
  jx_array *c = ct[0];
  if (linear[0]) ct_in[0] = jx_bind1(&jx_prim_real, 1, &c, NULL);
  if (linear[1]) {
    jx_array *neg = jx_rule_neg(c);
    ct_in[1] = jx_bind1(&jx_prim_imag, 1, &neg, NULL);
  }
  return jx_last_status();
}

const jx_prim jx_prim_complex = {.name = "complex",
                                 .id = JX_PRIM_complex,
                                 .nin = 2,
                                 .nout = 1,
                                 .params = "",
                                 .infer = infer_complex,
                                 .eval = eval_complex,
                                 .jvp = jvp_complex,
                                 .transpose = transpose_complex,
                                 .elementwise = 1};

const jx_prim *const jx_prims_complex[] = {&jx_prim_real, &jx_prim_imag, &jx_prim_conj,
                                           &jx_prim_complex, NULL};
