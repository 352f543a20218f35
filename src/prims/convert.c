/* Conversions between dtypes.
 *
 * convert_element_type follows XLA's convert, as JAX does: float -> int
 * truncates toward zero and saturates at the target's range, NaN -> 0;
 * int -> int wraps; anything -> bool is x != 0 (so NaN -> true); every
 * conversion to a float rounds once to nearest even, including i64/u64 -> f16,
 * bf16 and f32, which are rounded from the exact integer rather than through
 * double. Complex -> real keeps the real part (lax's convert of complex to a
 * real dtype, which JAX applies without warning); real -> complex has
 * imaginary part 0; complex -> bool is x != 0 (either part non-zero).
 *
 * bitcast_convert_type reinterprets the bytes (little-endian, as on every host
 * jx runs on): a narrower target appends a last dim of size width ratio, a
 * wider one requires that last dim and removes it (lax.bitcast_convert_type). */
#include "../base/error.h"
#include "binary_rules.h"
#include "elementwise.h"
#include "prims.h"
#include "rules.h"

/* ---- convert_element_type: dtype = target, i0 = 1 for a weakly typed result ---- */

static jx_status infer_convert(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  if (!jx_dtype_valid(p->dtype))
    return jx_error_set(JX_ERR_DTYPE, "convert_element_type: invalid target dtype %d",
                        (int)p->dtype);
  out->dtype = p->dtype;
  out->shape = in[0].shape;
  out->weak = p->i[0] != 0;
  return JX_OK;
}

/* An integer magnitude rounded to `bits` significant bits, to nearest even;
 * the result is exact in double (bits <= 53) and so converts exactly after. */
static double round_u64(uint64_t m, int bits) {
  int len = 0;
  for (uint64_t t = m; t; t >>= 1) len++;
  if (len <= bits) return (double)m;
  int shift = len - bits;
  uint64_t q = m >> shift, rem = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return ldexp((double)q, shift);
}

static int mantissa_bits(jx_dtype dt) {
  switch (dt) {
  case JX_F16: return 11;
  case JX_BF16: return 8;
  case JX_F32: return 24;
  default: return 53;
  }
}

static double int_to_float(int64_t v, int is_unsigned, jx_dtype dst) {
  int bits = mantissa_bits(dst);
  if (is_unsigned) return round_u64((uint64_t)v, bits);
  if (v >= 0) return round_u64((uint64_t)v, bits);
  return -round_u64((uint64_t)0 - (uint64_t)v, bits);
}

static void copy_same(const jx_tensor *in, jx_tensor *out, int64_t n) {
  if (n) memcpy(out->data, in->data, (size_t)n * jx_dtype_size(in->dtype));
}

static void eval_convert(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  jx_dtype s = in[0].dtype, d = out[0].dtype;
  int64_t n = jx_shape_numel(in[0].shape);
  const void *x = in[0].data;
  void *y = out[0].data;
  if (s == d) {
    copy_same(&in[0], &out[0], n);
    return;
  }
  /* the common float pairs, typed */
  if (s == JX_F32 && d == JX_F64) {
    for (int64_t i = 0; i < n; i++) ((double *)y)[i] = ((const float *)x)[i];
    return;
  }
  if (s == JX_F64 && d == JX_F32) {
    for (int64_t i = 0; i < n; i++) ((float *)y)[i] = (float)((const double *)x)[i];
    return;
  }
  if (jx_is_complex(s) && jx_is_complex(d)) {
    for (int64_t i = 0; i < n; i++) jx_store_c128(y, d, i, jx_load_c128(x, s, i));
    return;
  }
  if (jx_is_complex(s) && d == JX_BOOL) {
    for (int64_t i = 0; i < n; i++) ((uint8_t *)y)[i] = jx_load_c128(x, s, i) != 0;
    return;
  }
  if (d == JX_BOOL) { /* x != 0, NaN included */
    for (int64_t i = 0; i < n; i++)
      ((uint8_t *)y)[i] = jx_is_float(s) ? jx_load_f64(x, s, i) != 0 : jx_load_i64(x, s, i) != 0;
    return;
  }
  if (jx_is_inexact(s)) { /* exact in double; the store truncates, saturates or rounds once */
    for (int64_t i = 0; i < n; i++) jx_store_f64(y, d, i, jx_load_f64(x, s, i));
    return;
  }
  /* bool or integer source */
  int uns = jx_is_unsigned_int(s);
  if (jx_is_inexact(d)) {
    for (int64_t i = 0; i < n; i++)
      jx_store_f64(y, d, i, int_to_float(jx_load_i64(x, s, i), uns, jx_complex_part(d)));
    return;
  }
  for (int64_t i = 0; i < n; i++) jx_store_i64(y, d, i, jx_load_i64(x, s, i));
}

/* JVP (lax.py): the tangent converted alike; none when the target is not
 * inexact (an integer input has no tangent to begin with). */
static jx_status jvp_convert(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                             jx_array **y, jx_array **ty) {
  const jx_params *p = ctx->params;
  y[0] = jx_bind1(&jx_prim_convert_element_type, 1, x, p);
  ty[0] =
      (t[0] && jx_is_inexact(p->dtype)) ? jx_bind1(&jx_prim_convert_element_type, 1, t, p) : NULL;
  return jx_last_status();
}

/* Transpose: the cotangent converted back to the operand's dtype and
 * weakness (a complex cotangent of a real operand gives its real part, as
 * JAX); zero for an operand that is not inexact. */
static jx_status transpose_convert(const jx_rule_ctx *ctx, jx_array *const *in,
                                   const jx_aval *avals, const uint8_t *linear, jx_array *const *ct,
                                   jx_array **ct_in) {
  (void)ctx, (void)in;
  ct_in[0] = NULL;
  if (!linear[0] || !ct[0] || !jx_is_inexact(avals[0].dtype)) return JX_OK;
  jx_params q = JX_PARAMS_INIT;
  q.dtype = avals[0].dtype;
  q.i[0] = avals[0].weak;
  ct_in[0] = jx_bind1(&jx_prim_convert_element_type, 1, ct, &q);
  return jx_last_status();
}

const jx_prim jx_prim_convert_element_type = {.name = "convert_element_type",
                                              .id = JX_PRIM_convert_element_type,
                                              .nin = 1,
                                              .nout = 1,
                                              .params = "new_dtype=dtype weak_type=i0",
                                              .infer = infer_convert,
                                              .eval = eval_convert,
                                              .jvp = jvp_convert,
                                              .transpose = transpose_convert,
                                              .elementwise = 1};

/* ---- bitcast_convert_type: dtype = target ---- */

jx_status jx_bitcast_rule(const char *name, jx_dtype d, const jx_aval *in, jx_aval *out) {
  char a[JX_AVAL_STR_CAP];
  jx_dtype s = in[0].dtype;
  if (!jx_dtype_valid(d))
    return jx_error_set(JX_ERR_DTYPE, "%s: invalid target dtype %d", name, (int)d);
  if ((s == JX_BOOL) != (d == JX_BOOL) && s != d)
    return jx_error_set(JX_ERR_DTYPE,
                        "%s: cannot bitcast %s to %s (bool "
                        "converts only to bool)",
                        name, jx_aval_str(s, in[0].shape, a), jx_dtype_name(d));
  size_t ws = jx_dtype_size(s), wd = jx_dtype_size(d);
  jx_shape sh = in[0].shape;
  if (wd < ws) {
    if (sh.rank >= JX_MAX_RANK)
      return jx_error_set(JX_ERR_SHAPE,
                          "%s: %s to %s would need more than %d "
                          "dimensions",
                          name, jx_aval_str(s, sh, a), jx_dtype_name(d), JX_MAX_RANK);
    sh.dims[sh.rank++] = (int64_t)(ws / wd);
  } else if (wd > ws) {
    int64_t ratio = (int64_t)(wd / ws);
    if (sh.rank == 0 || sh.dims[sh.rank - 1] != ratio)
      return jx_error_set(JX_ERR_SHAPE,
                          "%s: %s to %s needs a last dimension "
                          "of size %lld",
                          name, jx_aval_str(s, sh, a), jx_dtype_name(d), (long long)ratio);
    sh.rank--;
  }
  out->dtype = d;
  out->shape = sh;
  out->weak = 0;
  return JX_OK;
}

static jx_status infer_bitcast(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  return jx_bitcast_rule("bitcast_convert_type", ctx->params->dtype, in, out);
}

static void eval_bitcast(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  size_t bytes = (size_t)jx_shape_numel(in[0].shape) * jx_dtype_size(in[0].dtype);
  if (bytes) memcpy(out[0].data, in[0].data, bytes);
}

const jx_prim jx_prim_bitcast_convert_type = {.name = "bitcast_convert_type",
                                              .id = JX_PRIM_bitcast_convert_type,
                                              .nin = 1,
                                              .nout = 1,
                                              .params = "new_dtype=dtype",
                                              .infer = infer_bitcast,
                                              .eval = eval_bitcast,
                                              .jvp = jx_jvp_zero,
                                              /* acts on the trailing dim only, so the
                                                 batch axis can go to the front */
                                              .batch = jx_batch_vectorized};

const jx_prim *const jx_prims_convert[] = {&jx_prim_convert_element_type,
                                           &jx_prim_bitcast_convert_type, NULL};
