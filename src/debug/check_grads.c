/* Numerical derivative checks, as jax.test_util.check_grads: forward mode
 * compares each JVP with a central difference along a random direction;
 * reverse mode compares <VJP(u), v> with <u, JVP(v)>; higher orders check the
 * JVP and VJP functions themselves. Complex inputs and outputs follow
 * jax.test_util: random directions with random real and imaginary parts,
 * and the VJP checked as Re<conj(vjp(conj(u))), v> = Re<jvp(v), u>. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jx/jx.h>

#include "../base/error.h"
#include "../trace/fn.h"

static int is_complex_dt(jx_dtype d) { return d == JX_C64 || d == JX_C128; }
static jx_dtype part_dt(jx_dtype d) { return d == JX_C64 ? JX_F32 : d == JX_C128 ? JX_F64 : d; }

typedef struct {
  const char *fn;
  int order;
  double atol, rtol;
  uint32_t seed;
} check_ctx;

static double eps_for(jx_dtype dt) { return part_dt(dt) == JX_F64 ? 1e-4 : 1e-3; }
static double default_tol(jx_dtype dt) {
  switch (part_dt(dt)) {
  case JX_F64: return 1e-5;
  case JX_F32: return 2e-2;
  default: return 1e-1;
  }
}

/* Host copy of a as doubles; caller frees. */
static double *host(jx_array *a, int64_t *n) {
  *n = jx_size(a);
  double *d = malloc(sizeof *d * (size_t)(*n ? *n : 1));
  if (d && jx_read(jx_astype(a, JX_F64), d, sizeof *d * (size_t)*n)) {
    free(d);
    return NULL;
  }
  return d;
}

static jx_array *random_like(jx_array *x, uint32_t seed) {
  jx_array *key = jx_random_fold_in(jx_random_key(1234), seed);
  jx_array *re = jx_random_normal(key, JX_F64, jx_shape_of(x));
  if (is_complex_dt(jx_dtype_of(x))) {
    jx_array *im = jx_random_normal(jx_random_fold_in(key, 1), JX_F64, jx_shape_of(x));
    return jx_astype(jx_complex(re, im), jx_dtype_of(x));
  }
  return jx_astype(re, jx_dtype_of(x));
}

/* a in the widest dtype of its kind: c128 for complex, else f64 */
static jx_array *widest(jx_array *a) {
  return jx_astype(a, is_complex_dt(jx_dtype_of(a)) ? JX_C128 : JX_F64);
}

/* Re(sum(a * b)), no conjugation */
static double inner(jx_array *a, jx_array *b) {
  return jx_item(jx_real(jx_sum(jx_mul(widest(a), widest(b)), JX_AXES(), 0)));
}

static jx_status compare(const check_ctx *c, const char *mode, int out, jx_array *got,
                         jx_array *want, double atol, double rtol) {
  if (is_complex_dt(jx_dtype_of(got)) || is_complex_dt(jx_dtype_of(want))) {
    jx_status st = compare(c, mode, out, jx_real(got), jx_real(want), atol, rtol);
    return st ? st : compare(c, mode, out, jx_imag(got), jx_imag(want), atol, rtol);
  }
  int64_t n, m;
  double *g = host(got, &n), *w = host(want, &m);
  jx_status st = JX_OK;
  if (!g || !w || n != m)
    st = jx_error_set(JX_ERR_INTERNAL, "check_grads: could not read results of '%s'", c->fn);
  double worst = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < n && !st; i++) {
    double err = fabs(g[i] - w[i]), lim = atol + rtol * fabs(w[i]);
    if (!(err <= lim) && (isnan(err) || err - lim > worst)) {
      worst = isnan(err) ? INFINITY : err - lim;
      at = i;
    }
  }
  if (!st && at >= 0)
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "check_grads: %s of '%s' at order %d: output %d element %lld is %.9g but "
                      "the numerical value is %.9g (atol %g, rtol %g)",
                      mode, c->fn, c->order, out, (long long)at, g[at], w[at], atol, rtol);
  free(g);
  free(w);
  return st;
}

/* floats and complex: the inputs and outputs that have derivatives */
static int is_float(jx_array *a) {
  jx_dtype d = jx_dtype_of(a);
  return d == JX_F16 || d == JX_BF16 || d == JX_F32 || d == JX_F64 || is_complex_dt(d);
}

static jx_status check(jx_fn *f, jx_array *const *in, int order, const check_ctx *parent);

static jx_status check_at(jx_fn *f, jx_array *const *in, const check_ctx *c) {
  int nin = jx_fn_nin(f), nout = jx_fn_nout(f);
  jx_array **v = calloc((size_t)nin + 1, sizeof *v), **xp = calloc((size_t)nin + 1, sizeof *xp);
  jx_array **xm = calloc((size_t)nin + 1, sizeof *xm);
  jx_array **jin = calloc(2 * (size_t)nin + 1, sizeof *jin),
           **jout = calloc(2 * (size_t)nout + 1, sizeof *jout);
  jx_array **yp = calloc((size_t)nout + 1, sizeof *yp), **ym = calloc((size_t)nout + 1, sizeof *ym);
  jx_array **vin = calloc((size_t)(nin + nout) + 1, sizeof *vin);
  jx_array **vout = calloc((size_t)(nin + nout) + 1, sizeof *vout);
  jx_fn *jf = jx_jvp(f), *vf = jx_vjp(f);
  jx_status st = (v && xp && xm && jin && jout && yp && ym && vin && vout && jf && vf)
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "check_grads: out of memory");
  double eps = 1e-4;
  for (int i = 0; i < nin && !st; i++) {
    if (is_float(in[i])) {
      v[i] = random_like(in[i], c->seed + (uint32_t)i);
      double e = eps_for(jx_dtype_of(in[i]));
      eps = e > eps ? e : eps;
    } else {
      v[i] = jx_zeros(jx_dtype_of(in[i]), jx_shape_of(in[i]));
    }
  }
  for (int i = 0; i < nin && !st; i++) {
    jx_array *step = jx_mul(v[i], jx_scalar(JX_F64, eps));
    xp[i] = is_float(in[i]) ? jx_add(in[i], step) : in[i];
    xm[i] = is_float(in[i]) ? jx_sub(in[i], step) : in[i];
    jin[i] = in[i];
    jin[nin + i] = v[i];
  }
  if (!st) st = jx_call(jf, jin, jout);
  if (!st) st = jx_call(f, xp, yp);
  if (!st) st = jx_call(f, xm, ym);
  /* the tolerance follows the least precise float among inputs and output:
   * differences of f32 inputs are f32-accurate even when the output is f64 */
  double in_tol = 0;
  for (int i = 0; i < nin; i++)
    if (is_float(in[i]) && default_tol(jx_dtype_of(in[i])) > in_tol)
      in_tol = default_tol(jx_dtype_of(in[i]));
  /* forward mode: JVP vs central difference */
  for (int o = 0; o < nout && !st; o++) {
    if (!is_float(jout[o])) continue;
    jx_array *num = jx_div(jx_sub(widest(yp[o]), widest(ym[o])), jx_scalar(JX_F64, 2 * eps));
    double tol = default_tol(jx_dtype_of(jout[o]));
    if (in_tol > tol) tol = in_tol;
    double atol = c->atol > 0 ? c->atol : tol;
    double rtol = c->rtol > 0 ? c->rtol : tol;
    st = compare(c, "jvp", o, jout[nout + o], num, atol, rtol);
  }
  /* reverse mode: <vjp(u), v> vs <u, jvp(v)> */
  if (!st) {
    double lhs = 0, rhs = 0, scale = 0;
    for (int i = 0; i < nin; i++) vin[i] = in[i];
    for (int o = 0; o < nout; o++) {
      /* u; the VJP is given conj(u), and Re<jvp(v), u> = Re sum(conj(jvp(v)) u) */
      jx_array *u = is_float(jout[o]) ? random_like(jout[o], c->seed + 1000u + (uint32_t)o)
                                      : jx_zeros(jx_dtype_of(jout[o]), jx_shape_of(jout[o]));
      vin[nin + o] = jx_conj(u);
      if (is_float(jout[o])) rhs += inner(jx_conj(jout[nout + o]), u);
    }
    st = jx_call(vf, vin, vout);
    jx_dtype worst_dt = JX_F64;
    for (int i = 0; i < nin && !st; i++)
      if (is_float(in[i])) {
        lhs += inner(vout[nout + i], v[i]);
        scale += fabs(inner(jx_abs(vout[nout + i]), jx_abs(v[i])));
        if (part_dt(jx_dtype_of(in[i])) != JX_F64) worst_dt = jx_dtype_of(in[i]);
      }
    double atol = c->atol > 0 ? c->atol : default_tol(worst_dt);
    double rtol = c->rtol > 0 ? c->rtol : default_tol(worst_dt);
    if (!st && !(fabs(lhs - rhs) <= atol * (1 + scale) + rtol * fabs(rhs)))
      st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "check_grads: vjp of '%s' at order %d: <vjp(u), v> = %.9g but "
                        "<u, jvp(v)> = %.9g (atol %g, rtol %g)",
                        c->fn, c->order, lhs, rhs, atol, rtol);
  }
  /* higher orders: the JVP and VJP functions must themselves be differentiable */
  if (!st && c->order > 1) {
    check_ctx sub = *c;
    sub.order = c->order - 1;
    sub.seed = c->seed * 7919u + 17u;
    st = check(jf, jin, c->order - 1, &sub);
    if (!st) st = check(vf, vin, c->order - 1, &sub);
  }
  jx_fn_release(jf);
  jx_fn_release(vf);
  free(v);
  free(xp);
  free(xm);
  free(jin);
  free(jout);
  free(yp);
  free(ym);
  free(vin);
  free(vout);
  return st;
}

static jx_status check(jx_fn *f, jx_array *const *in, int order, const check_ctx *parent) {
  check_ctx c = *parent;
  c.order = order;
  jx_scope_begin();
  jx_status st = check_at(f, in, &c);
  jx_scope_end();
  return st;
}

jx_status jx_check_grads(jx_fn *f, jx_array *const *in, int order, double atol, double rtol) {
  if (!f) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_check_grads: the function is NULL");
  if (order < 1)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_check_grads: order must be >= 1, got %d",
                        order);
  for (int i = 0; i < jx_fn_nin(f); i++)
    if (!in || !in[i] || jx_is_poisoned(in[i]))
      return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_check_grads: input %d is missing", i);
  check_ctx c = {jx_fn_name(f), order, atol, rtol, 1u};
  return check(f, in, order, &c);
}
