/* Conformance adapters for the elementwise ops (unary, binary, selection,
 * conversion). Keys shared by every adapter here:
 *   weak=[i,...]  inputs i (rank 0) become weakly typed scalars (jx_scalar of
 *                 their dtype and value), as Python scalars are in JAX;
 *   out_weak=0|1  also checks the weakness of the result. */
#include <math.h>
#include <string.h>

#include "conformance.h"

typedef jx_array *(*un_fn)(jx_array *);
typedef jx_array *(*bin_fn)(jx_array *, jx_array *);

static void weaken(const conf_case *c, int nin, jx_array *const *in, jx_array **out) {
  jx_axes w = conf_axes(c, "weak", JX_AXES());
  for (int i = 0; i < nin; i++) out[i] = in[i];
  for (int k = 0; k < w.n; k++)
    if (w.v[k] >= 0 && w.v[k] < nin)
      out[w.v[k]] = jx_scalar(jx_dtype_of(in[w.v[k]]), jx_item(in[w.v[k]]));
}

static jx_status finish(const conf_case *c, jx_array *r, int *nout, jx_array **out) {
  *nout = 1;
  out[0] = r;
  if (jx_last_status() != JX_OK) return jx_last_status();
  if (conf_has(c, "out_weak") && jx_is_weak(r) != (int)conf_int(c, "out_weak", 0)) {
    printf("  %s: result weak=%d, expected %d\n", c->id, jx_is_weak(r),
           (int)conf_int(c, "out_weak", 0));
    return JX_ERR_INTERNAL;
  }
  return JX_OK;
}

static jx_status unary(const conf_case *c, un_fn f, int nin, jx_array *const *in, int *nout,
                       jx_array **out) {
  jx_array *x[CONF_MAX_IO];
  weaken(c, nin, in, x);
  return finish(c, f(x[0]), nout, out);
}

static jx_status binary(const conf_case *c, bin_fn f, int nin, jx_array *const *in, int *nout,
                        jx_array **out) {
  jx_array *x[CONF_MAX_IO];
  weaken(c, nin, in, x);
  return finish(c, f(x[0], x[1]), nout, out);
}

#define UN(NAME)                                                                                   \
  static jx_status a_##NAME(const conf_case *c, int nin, jx_array *const *in, int *nout,           \
                            jx_array **out) {                                                      \
    return unary(c, jx_##NAME, nin, in, nout, out);                                                \
  }
#define BIN(NAME)                                                                                  \
  static jx_status a_##NAME(const conf_case *c, int nin, jx_array *const *in, int *nout,           \
                            jx_array **out) {                                                      \
    return binary(c, jx_##NAME, nin, in, nout, out);                                               \
  }

/* clang-format off */
UN(neg) UN(abs) UN(sign) UN(floor) UN(ceil) UN(round) UN(round_away) UN(exp) UN(exp2) UN(expm1)
UN(log) UN(log1p) UN(sqrt) UN(rsqrt) UN(cbrt) UN(square) UN(reciprocal) UN(tanh) UN(logistic)
UN(sin) UN(cos) UN(tan) UN(asin) UN(acos) UN(atan) UN(sinh) UN(cosh) UN(asinh) UN(acosh)
UN(atanh) UN(erf) UN(erf_inv) UN(lgamma) UN(digamma) UN(isfinite) UN(logical_not)
UN(bitwise_not) UN(population_count) UN(relu) UN(gelu) UN(gelu_exact) UN(silu) UN(softplus)
UN(stop_gradient)
BIN(add) BIN(sub) BIN(mul) BIN(div) BIN(floor_divide) BIN(rem) BIN(pow) BIN(maximum)
BIN(minimum) BIN(atan2) BIN(nextafter) BIN(eq) BIN(ne) BIN(lt) BIN(le) BIN(gt) BIN(ge)
BIN(logical_and) BIN(logical_or) BIN(logical_xor) BIN(bitwise_and) BIN(bitwise_or)
BIN(bitwise_xor) BIN(shift_left) BIN(shift_right_arithmetic) BIN(shift_right_logical)
    /* integer_pow n=<exponent> */
static jx_status a_integer_pow(const conf_case *c, int nin, jx_array *const *in, int *nout,
                               jx_array **out) {
  jx_array *x[CONF_MAX_IO];
  weaken(c, nin, in, x);
  return finish(c, jx_integer_pow(x[0], (int)conf_int(c, "n", 1)), nout, out);
}
/* clang-format on */

/* where: cond, a, b */
static jx_array *where3(jx_array **x) { return jx_where(x[0], x[1], x[2]); }
static jx_array *clamp3(jx_array **x) { return jx_clamp(x[0], x[1], x[2]); }
#define TERNARY(NAME, CALL)                                                                        \
  static jx_status a_##NAME(const conf_case *c, int nin, jx_array *const *in, int *nout,           \
                            jx_array **out) {                                                      \
    jx_array *x[CONF_MAX_IO];                                                                      \
    weaken(c, nin, in, x);                                                                         \
    return finish(c, CALL(x), nout, out);                                                          \
  }
TERNARY(where, where3)
TERNARY(clamp, clamp3)

/* select_n: in0 = which, the rest are the cases */
static jx_status a_select_n(const conf_case *c, int nin, jx_array *const *in, int *nout,
                            jx_array **out) {
  jx_array *x[CONF_MAX_IO];
  weaken(c, nin, in, x);
  return finish(c, jx_select_n(x[0], nin - 1, x + 1), nout, out);
}

/* clip lo=<v> hi=<v> (absent: +-inf, i.e. no bound) */
static jx_status a_clip(const conf_case *c, int nin, jx_array *const *in, int *nout,
                        jx_array **out) {
  jx_array *x[CONF_MAX_IO];
  weaken(c, nin, in, x);
  double lo = conf_double(c, "lo", -INFINITY), hi = conf_double(c, "hi", INFINITY);
  return finish(c, jx_clip(x[0], lo, hi), nout, out);
}

/* astype / bitcast_convert_type dtype=<target> */
static jx_status a_astype(const conf_case *c, int nin, jx_array *const *in, int *nout,
                          jx_array **out) {
  jx_array *x[CONF_MAX_IO];
  weaken(c, nin, in, x);
  return finish(c, jx_astype(x[0], conf_dtype(c, "dtype", JX_F32)), nout, out);
}
static jx_status a_bitcast_convert_type(const conf_case *c, int nin, jx_array *const *in, int *nout,
                                        jx_array **out) {
  jx_array *x[CONF_MAX_IO];
  weaken(c, nin, in, x);
  return finish(c, jx_bitcast_convert_type(x[0], conf_dtype(c, "dtype", JX_F32)), nout, out);
}

#define E(NAME) {#NAME, a_##NAME},
/* clang-format off */
const conf_op conf_ops_elementwise[] = {
    E(neg) E(abs) E(sign) E(floor) E(ceil) E(round) E(round_away) E(exp) E(exp2) E(expm1)
    E(log) E(log1p) E(sqrt) E(rsqrt) E(cbrt) E(square) E(reciprocal) E(tanh) E(logistic)
    E(sin) E(cos) E(tan) E(asin) E(acos) E(atan) E(sinh) E(cosh) E(asinh) E(acosh) E(atanh)
    E(erf) E(erf_inv) E(lgamma) E(digamma) E(isfinite) E(logical_not) E(bitwise_not)
    E(population_count) E(relu) E(gelu) E(gelu_exact) E(silu) E(softplus) E(stop_gradient)
    E(add) E(sub) E(mul) E(div) E(floor_divide) E(rem) E(pow) E(maximum) E(minimum) E(atan2)
    E(nextafter) E(eq) E(ne) E(lt) E(le) E(gt) E(ge) E(logical_and) E(logical_or)
    E(logical_xor) E(bitwise_and) E(bitwise_or) E(bitwise_xor) E(shift_left)
    E(shift_right_arithmetic) E(shift_right_logical) E(integer_pow) E(where) E(clamp)
    E(select_n) E(clip) E(astype) E(bitcast_convert_type)
    {NULL, NULL}};
/* clang-format on */
