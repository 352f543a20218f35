/* NumPy-level reductions and cumulative ops, as jax.numpy and jax.nn, built
 * from the reduce_* / cum* / argmax primitives.
 *
 * Dtypes follow JAX, not NumPy, where they differ, in the mode jx runs in
 * (include/jx/array.h):
 * - sum, prod: bool and signed integers sum in JAX's canonical int (i32; i64
 *   under x64 or for i64 input), unsigned ones in u32 (u64); cumsum/cumprod
 *   keep integer dtypes and only turn bool into that int, as jnp.cumsum;
 *   floats keep theirs. argmax/argmin give that int too.
 * - mean, var, std, logsumexp, softmax, log_softmax of bool and integers of
 *   up to 32 bits give f32 and 64-bit integers give f64
 *   (jax.dtypes.to_inexact_dtype; NumPy gives f64 throughout). f16 and bf16
 *   accumulate in f32 and round back.
 * - max and min of an empty reduction are an error (no identity), as NumPy;
 *   logsumexp, softmax and log_softmax take the max from -inf instead.
 * Axes: JX_AXES() means every axis; negative axes count from the end; a
 * repeated axis is an error. keepdims leaves the reduced axes as size 1. */
#include <stdint.h>
#include <string.h>

#include "../array/array.h"
#include "ops_util.h"

/* ---- helpers ---- */

static jx_array *bind_axes(const jx_prim *p, jx_array *a, const jx_ilist *axes) {
  jx_params pp = JX_PARAMS_INIT;
  pp.l[0] = *axes;
  return jx_bind1(p, 1, &a, &pp);
}

static jx_array *bind1(const jx_prim *p, jx_array *a) { return jx_bind1(p, 1, &a, NULL); }
static jx_array *bind2(const jx_prim *p, jx_array *a, jx_array *b) {
  return jx_bind1(p, 2, (jx_array *[]){a, b}, NULL);
}

/* The shape of a with the reduced axes kept as size 1. */
static jx_shape kept_shape(jx_shape s, const jx_ilist *axes) {
  for (int i = 0; i < axes->n; i++) s.dims[axes->v[i]] = 1;
  return s;
}

/* r (a reduction of an array of shape s over axes) with the axes kept. */
static jx_array *keep(jx_array *r, jx_shape s, const jx_ilist *axes, int keepdims) {
  if (!keepdims || !r || r->poisoned) return r;
  return jx_reshape(r, kept_shape(s, axes));
}

/* r, a reduction of an array of shape s, broadcast back to s. */
static jx_array *back(jx_array *r, jx_shape s, const jx_ilist *axes) {
  return jx_ops_broadcast(keep(r, s, axes, 1), s);
}

/* A scalar of dtype dt (strong) broadcast to shape s. */
static jx_array *filled(jx_dtype dt, double v, jx_shape s) {
  return jx_ops_broadcast(jx_ops_convert(jx_scalar(dt, v), dt, 0), s);
}

/* The accumulator of an integer sum or product: JAX's canonical int of the
 * kind (i64/u64, 32-bit in the default mode unless the input is 64-bit).
 * Floats and complex keep their dtype (c128 stays c128 in the default mode,
 * as f64 does). */
static jx_dtype wide_int(jx_dtype dt) {
  jx_dtype w = dt;
  if (dt == JX_BOOL || jx_is_signed_int(dt)) w = JX_I64;
  if (jx_is_unsigned_int(dt)) w = JX_U64;
  if (w == dt) return dt;
  return jx_dtype_bits(dt) == 64 ? w : jx_dtype_canonical(w);
}

/* jax.dtypes.to_inexact_dtype */
static jx_dtype inexact(jx_dtype dt) {
  if (jx_is_inexact(dt)) return dt;
  return dt == JX_I64 || dt == JX_U64 ? JX_F64 : JX_F32;
}

static jx_dtype upcast16(jx_dtype dt) { return dt == JX_F16 || dt == JX_BF16 ? JX_F32 : dt; }

/* Checks the input and normalizes the axes; 0 on success. */
static int prepare(const char *op, jx_array *a, jx_axes ax, jx_ilist *axes) {
  if (jx_check_inputs(op, 1, &a)) return 1;
  return jx_ops_axes(op, ax, a->shape.rank, 1, axes) != JX_OK;
}

static double count(jx_shape s, const jx_ilist *axes) {
  double n = 1;
  for (int i = 0; i < axes->n; i++) n *= (double)s.dims[axes->v[i]];
  return n;
}

/* ---- sum, prod, max, min, all, any ---- */

static jx_array *accumulate(const char *op, const jx_prim *p, jx_array *a, jx_axes ax,
                            int keepdims) {
  jx_ilist axes;
  if (prepare(op, a, ax, &axes)) return jx_poison();
  jx_array *x = jx_ops_convert(a, wide_int(a->dtype), a->weak);
  return keep(bind_axes(p, x, &axes), a->shape, &axes, keepdims);
}

jx_array *jx_sum(jx_array *a, jx_axes ax, int keepdims) {
  return accumulate("jx_sum", &jx_prim_reduce_sum, a, ax, keepdims);
}
jx_array *jx_prod(jx_array *a, jx_axes ax, int keepdims) {
  return accumulate("jx_prod", &jx_prim_reduce_prod, a, ax, keepdims);
}

static jx_array *extremum(const char *op, const jx_prim *p, jx_array *a, jx_axes ax, int keepdims) {
  jx_ilist axes;
  if (prepare(op, a, ax, &axes)) return jx_poison();
  for (int i = 0; i < axes.n; i++)
    if (a->shape.dims[axes.v[i]] == 0) {
      char s[JX_AVAL_STR_CAP];
      jx_error_set(JX_ERR_SHAPE,
                   "%s: zero-size array to a reduction with no identity (operand %s, axis %lld "
                   "is empty)",
                   op, jx_aval_str(a->dtype, a->shape, s), (long long)axes.v[i]);
      return jx_poison();
    }
  return keep(bind_axes(p, a, &axes), a->shape, &axes, keepdims);
}

jx_array *jx_max(jx_array *a, jx_axes ax, int keepdims) {
  return extremum("jx_max", &jx_prim_reduce_max, a, ax, keepdims);
}
jx_array *jx_min(jx_array *a, jx_axes ax, int keepdims) {
  return extremum("jx_min", &jx_prim_reduce_min, a, ax, keepdims);
}

static jx_array *logical(const char *op, const jx_prim *p, jx_array *a, jx_axes ax, int keepdims) {
  jx_ilist axes;
  if (prepare(op, a, ax, &axes)) return jx_poison();
  jx_array *b = a->dtype == JX_BOOL ? a : bind2(&jx_prim_ne, a, filled(a->dtype, 0, a->shape));
  return keep(bind_axes(p, b, &axes), a->shape, &axes, keepdims);
}

jx_array *jx_all(jx_array *a, jx_axes ax, int keepdims) {
  return logical("jx_all", &jx_prim_reduce_and, a, ax, keepdims);
}
jx_array *jx_any(jx_array *a, jx_axes ax, int keepdims) {
  return logical("jx_any", &jx_prim_reduce_or, a, ax, keepdims);
}

/* ---- mean, var, std ---- */

/* sum(x over axes) / n in x's dtype */
static jx_array *mean_of(jx_array *x, jx_shape s, const jx_ilist *axes) {
  jx_array *sum = bind_axes(&jx_prim_reduce_sum, x, axes);
  if (!sum || sum->poisoned) return sum;
  return bind2(&jx_prim_div, sum, filled(x->dtype, count(s, axes), sum->shape));
}

jx_array *jx_mean(jx_array *a, jx_axes ax, int keepdims) {
  jx_ilist axes;
  if (prepare("jx_mean", a, ax, &axes)) return jx_poison();
  jx_dtype res = inexact(a->dtype);
  jx_array *m = mean_of(jx_ops_convert(a, upcast16(res), 0), a->shape, &axes);
  return keep(jx_ops_convert(m, res, 0), a->shape, &axes, keepdims);
}

static jx_array *variance(const char *op, jx_array *a, jx_axes ax, int keepdims, int root) {
  jx_ilist axes;
  if (prepare(op, a, ax, &axes)) return jx_poison();
  jx_dtype res = inexact(a->dtype);
  jx_array *x = jx_ops_convert(a, upcast16(res), 0);
  jx_array *c = bind2(&jx_prim_sub, x, back(mean_of(x, a->shape, &axes), a->shape, &axes));
  /* complex: |c|^2 = real(c conj(c)), and a real result (jnp.var) */
  jx_array *c2 =
      jx_is_complex(res) ? jx_real(bind2(&jx_prim_mul, c, jx_conj(c))) : bind2(&jx_prim_mul, c, c);
  if (jx_is_complex(res)) res = jx_complex_part(res);
  jx_array *v = jx_ops_convert(mean_of(c2, a->shape, &axes), res, 0);
  if (root) v = bind1(&jx_prim_sqrt, v);
  return keep(v, a->shape, &axes, keepdims);
}

jx_array *jx_var(jx_array *a, jx_axes ax, int keepdims) {
  return variance("jx_var", a, ax, keepdims, 0);
}
jx_array *jx_std(jx_array *a, jx_axes ax, int keepdims) {
  return variance("jx_std", a, ax, keepdims, 1);
}

/* ---- logsumexp, softmax, log_softmax (jax.nn / jax.scipy.special) ---- */

jx_array *jx_logsumexp(jx_array *a, jx_axes ax, int keepdims) {
  jx_ilist axes;
  if (prepare("jx_logsumexp", a, ax, &axes)) return jx_poison();
  jx_array *x = jx_ops_convert(a, inexact(a->dtype), 0);
  /* shift by the max where it is finite (all -inf, inf or NaN: by 0); the
   * shift cancels in exact arithmetic, so no gradient flows through it, as
   * in jax.nn.logsumexp (reverse mode then skips the max's derivative: a
   * compare, a count of the ties and a scatter over the whole operand) */
  jx_array *amax = bind_axes(&jx_prim_reduce_max, x, &axes);
  if (amax->poisoned) return amax;
  amax = jx_bind1(
      &jx_prim_select_n, 3,
      (jx_array *[]){bind1(&jx_prim_is_finite, amax), filled(x->dtype, 0, amax->shape), amax},
      NULL);
  amax = bind1(&jx_prim_stop_gradient, amax);
  jx_array *e = bind1(&jx_prim_exp, bind2(&jx_prim_sub, x, back(amax, a->shape, &axes)));
  jx_array *s = bind1(&jx_prim_abs, bind_axes(&jx_prim_reduce_sum, e, &axes));
  return keep(bind2(&jx_prim_add, bind1(&jx_prim_log, s), amax), a->shape, &axes, keepdims);
}

/* x - max(x, axis) broadcast back, in x's dtype, then made inexact as jnp.exp would;
 * *axes receives the normalized axis. */
static jx_array *shifted(const char *op, jx_array *a, int axis, jx_ilist *axes) {
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  if (a->dtype == JX_BOOL) {
    jx_error_set(JX_ERR_DTYPE, "%s: bool operands are not supported", op);
    return jx_poison();
  }
  if (jx_ops_axes(op, JX_AXES(axis), a->shape.rank, 0, axes)) return jx_poison();
  /* the max only keeps exp finite: no gradient flows through it, as in jax.nn */
  jx_array *m =
      back(bind1(&jx_prim_stop_gradient, bind_axes(&jx_prim_reduce_max, a, axes)), a->shape, axes);
  return jx_ops_convert(bind2(&jx_prim_sub, a, m), inexact(a->dtype), 0);
}

static jx_array *softmax_formula(jx_array *a, int axis) {
  jx_ilist axes;
  jx_array *u = bind1(&jx_prim_exp, shifted("jx_softmax", a, axis, &axes));
  if (u->poisoned) return u;
  return bind2(&jx_prim_div, u, back(bind_axes(&jx_prim_reduce_sum, u, &axes), a->shape, &axes));
}

/* softmax has jax.nn.softmax's custom JVP, t -> y * (t - sum(y * t)): reverse
 * mode then keeps only the output y for the backward pass, not exp's result
 * and the normalizer as well (the attention probabilities of a transformer
 * are its largest activations). One custom_jvp function per axis, made on
 * first use and kept for the process. */
static void softmax_body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = softmax_formula(in[0], (int)(intptr_t)ctx);
}

static void softmax_jvp_body(void *ctx, jx_array *const *in, jx_array **out) {
  int axis = (int)(intptr_t)ctx;
  jx_ilist axes = {1, {axis}};
  jx_array *y = softmax_formula(in[0], axis), *t = in[1];
  jx_array *dot =
      back(bind_axes(&jx_prim_reduce_sum, bind2(&jx_prim_mul, y, t), &axes), y->shape, &axes);
  out[0] = y;
  out[1] = bind2(&jx_prim_mul, y, bind2(&jx_prim_sub, t, dot));
}

static jx_fn *softmax_fn(int axis) {
  static _Atomic(jx_fn *) made[JX_MAX_RANK];
  return jx_ops_custom_jvp_once(&made[axis], "softmax", 1, 1, softmax_body, softmax_jvp_body,
                                (void *)(intptr_t)axis);
}

jx_array *jx_softmax(jx_array *a, int axis) {
  if (jx_check_inputs("jx_softmax", 1, &a)) return jx_poison();
  if (a->dtype == JX_BOOL) {
    jx_error_set(JX_ERR_DTYPE, "jx_softmax: bool operands are not supported");
    return jx_poison();
  }
  jx_ilist axes;
  if (jx_ops_axes("jx_softmax", JX_AXES(axis), a->shape.rank, 0, &axes)) return jx_poison();
  jx_array *x = jx_ops_convert(a, inexact(a->dtype), 0);
  return jx_ops_call1(softmax_fn((int)axes.v[0]), x);
}

jx_array *jx_log_softmax(jx_array *a, int axis) {
  jx_ilist axes;
  jx_array *x = shifted("jx_log_softmax", a, axis, &axes);
  if (x->poisoned) return x;
  jx_array *s = bind_axes(&jx_prim_reduce_sum, bind1(&jx_prim_exp, x), &axes);
  return bind2(&jx_prim_sub, x, back(bind1(&jx_prim_log, s), a->shape, &axes));
}

/* ---- argmax, argmin ---- */

static jx_array *arg(const char *op, const jx_prim *p, jx_array *a, int axis) {
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int ax = jx_normalize_axis(axis, a->shape.rank, op);
  if (ax < 0) return jx_poison();
  if (a->shape.dims[ax] == 0) {
    char s[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_SHAPE, "%s: attempt to get %s of an empty sequence (operand %s, axis %d)",
                 op, op + 3, jx_aval_str(a->dtype, a->shape, s), axis);
    return jx_poison();
  }
  jx_params pp = JX_PARAMS_INIT;
  pp.dtype = jx_default_int();
  pp.i[0] = ax;
  return jx_bind1(p, 1, &a, &pp);
}

jx_array *jx_argmax(jx_array *a, int axis) { return arg("jx_argmax", &jx_prim_argmax, a, axis); }
jx_array *jx_argmin(jx_array *a, int axis) { return arg("jx_argmin", &jx_prim_argmin, a, axis); }

/* ---- cumulative ---- */

static jx_array *cumulative(const char *fn, const char *op, jx_array *a, int axis, int reverse) {
  static const struct {
    const char *name;
    const jx_prim *prim;
  } ops[] = {{"sum", &jx_prim_cumsum},
             {"prod", &jx_prim_cumprod},
             {"max", &jx_prim_cummax},
             {"min", &jx_prim_cummin}};
  if (jx_check_inputs(fn, 1, &a)) return jx_poison();
  const jx_prim *p = NULL;
  for (int i = 0; op && i < 4; i++)
    if (strcmp(op, ops[i].name) == 0) p = ops[i].prim;
  if (!p) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: op \"%s\" is not one of sum, prod, max, min", fn,
                 op ? op : "(null)");
    return jx_poison();
  }
  int ax = jx_normalize_axis(axis, a->shape.rank, fn);
  if (ax < 0) return jx_poison();
  int is_sum = p == &jx_prim_cumsum || p == &jx_prim_cumprod;
  if (a->dtype == JX_BOOL && !is_sum) {
    jx_error_set(JX_ERR_DTYPE, "%s: bool operands are not supported for cumulative %s", fn, op);
    return jx_poison();
  }
  jx_params pp = JX_PARAMS_INIT;
  pp.i[0] = ax;
  pp.i[1] = reverse != 0;
  jx_array *x = a->dtype == JX_BOOL ? jx_ops_convert(a, jx_default_int(), a->weak) : a;
  return jx_bind1(p, 1, &x, &pp);
}

jx_array *jx_cumsum(jx_array *a, int axis) { return cumulative("jx_cumsum", "sum", a, axis, 0); }
jx_array *jx_cumprod(jx_array *a, int axis) { return cumulative("jx_cumprod", "prod", a, axis, 0); }
jx_array *jx_cummax(jx_array *a, int axis) { return cumulative("jx_cummax", "max", a, axis, 0); }
jx_array *jx_cummin(jx_array *a, int axis) { return cumulative("jx_cummin", "min", a, axis, 0); }
jx_array *jx_cumulative(jx_array *a, const char *op, int axis, int reverse) {
  return cumulative("jx_cumulative", op, a, axis, reverse);
}
