/* Running conformance cases under transformations:
 *  jit:  the adapter traced and called through jx_jit equals the goldens;
 *  vmap: the adapter under jx_vmap, with inputs stacked from rolled copies,
 *        equals a loop of eager calls over the batch (several in_axes);
 *  grad: jx_check_grads of the adapter (floating inputs in f64) in forward and
 *        reverse mode, to the order given by JX_CONFORMANCE_GRAD_ORDER (1). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

void conf_adapter_body(void *ctx, jx_array *const *in, jx_array **out) {
  conf_adapter *a = ctx;
  jx_array *tmp[CONF_MAX_IO];
  int n = 0;
  a->fn(a->c, a->nin, in, &n, tmp);
  for (int o = 0; o < a->nout; o++) out[o] = o < n ? tmp[o] : NULL;
}

static conf_result skip(const conf_case *c, const char *why) {
  printf("SKIP %s (%s): %s\n", c->id, c->op, why);
  return CONF_SKIP;
}

static conf_result fail(const conf_case *c, const char *mode) {
  printf("FAIL %s (%s) under %s: %s\n", c->id, c->op, mode, jx_last_error());
  return CONF_FAIL;
}

/* ---- jit ---- */
static conf_result run_jit(const conf_case *c, conf_adapter *a, jx_array *const *in,
                           jx_array *const *want) {
  jx_fn *f = jx_fn_create(c->op, a->nin, a->nout, conf_adapter_body, a);
  jx_fn *jf = jx_jit(f, NULL);
  jx_fn_release(f);
  jx_array *got[CONF_MAX_IO];
  jx_status st = jx_call(jf, in, got);
  jx_fn_release(jf);
  if (st == JX_ERR_TRACE) return skip(c, "the adapter reads its inputs on the host");
  if (st) return fail(c, "jit");
  for (int o = 0; o < a->nout; o++)
    if (!conf_compare(c, o, got[o], want[o], 1.0)) return CONF_FAIL;
  return CONF_PASS;
}

/* ---- vmap ---- */
enum { BATCH = 3 };

/* x with its elements rotated by k positions (flat order): a different but
 * equally valid input for every op. */
static jx_array *rolled(jx_array *x, int k) {
  int64_t n = jx_size(x);
  if (n <= 1 || k == 0) return x;
  size_t es = jx_dtype_size(jx_dtype_of(x)), bytes = es * (size_t)n;
  unsigned char *src = malloc(bytes), *dst = malloc(bytes);
  jx_array *r = x;
  if (src && dst && jx_read(x, src, bytes) == JX_OK) {
    size_t shift = es * (size_t)(k % n);
    memcpy(dst, src + shift, bytes - shift);
    memcpy(dst + bytes - shift, src, shift);
    r = jx_array_from(jx_dtype_of(x), jx_shape_of(x), dst);
  }
  free(src);
  free(dst);
  return r;
}

static conf_result run_vmap_axes(const conf_case *c, conf_adapter *a, jx_array *const *in,
                                 const int *axes, const char *label) {
  jx_array *batched[CONF_MAX_IO], *slices[BATCH][CONF_MAX_IO], *expect[CONF_MAX_IO];
  jx_axes in_axes = {a->nin, {0}};
  for (int i = 0; i < a->nin; i++) {
    int ax = axes[i];
    if (ax != JX_NONE && ax < 0) ax = jx_ndim(in[i]); /* a new last axis */
    in_axes.v[i] = ax;
    jx_array *parts[BATCH];
    for (int k = 0; k < BATCH; k++)
      slices[k][i] = parts[k] = ax == JX_NONE ? in[i] : rolled(in[i], k);
    batched[i] = ax == JX_NONE ? in[i] : jx_stack(BATCH, parts, ax);
  }
  /* the loop: eager calls per batch element, stacked */
  for (int o = 0; o < a->nout; o++) {
    jx_array *per[BATCH];
    for (int k = 0; k < BATCH; k++) {
      jx_array *outs[CONF_MAX_IO];
      int n = 0;
      a->fn(c, a->nin, slices[k], &n, outs);
      per[k] = outs[o];
    }
    expect[o] = jx_stack(BATCH, per, 0);
  }
  if (jx_last_status()) return fail(c, label);
  jx_fn *f = jx_fn_create(c->op, a->nin, a->nout, conf_adapter_body, a);
  jx_fn *vf = jx_vmap(f, in_axes, JX_AXES(0));
  jx_fn_release(f);
  jx_array *got[CONF_MAX_IO];
  jx_status st = jx_call(vf, batched, got);
  jx_fn_release(vf);
  if (st == JX_ERR_TRACE) return skip(c, "the adapter reads its inputs on the host");
  if (st) return fail(c, label);
  for (int o = 0; o < a->nout; o++)
    if (!conf_compare(c, o, got[o], expect[o], 10.0)) {
      printf("     (under %s)\n", label);
      return CONF_FAIL;
    }
  return CONF_PASS;
}

static conf_result run_vmap(const conf_case *c, conf_adapter *a, jx_array *const *in) {
  int axes[CONF_MAX_IO];
  for (int i = 0; i < a->nin; i++) axes[i] = 0;
  conf_result r = run_vmap_axes(c, a, in, axes, "vmap in_axes=0");
  if (r != CONF_PASS) return r;
  for (int i = 0; i < a->nin; i++) axes[i] = -1;
  r = run_vmap_axes(c, a, in, axes, "vmap in_axes=-1");
  if (r != CONF_PASS || a->nin < 2) return r;
  for (int i = 1; i < a->nin; i++) axes[i] = JX_NONE;
  axes[0] = 0;
  r = run_vmap_axes(c, a, in, axes, "vmap in_axes=(0, None...)");
  if (r != CONF_PASS) return r;
  for (int i = 0; i < a->nin; i++) axes[i] = i == a->nin - 1 ? -1 : JX_NONE;
  return run_vmap_axes(c, a, in, axes, "vmap in_axes=(None..., -1)");
}

/* ---- grad ---- */
static int is_float(jx_dtype d) {
  return d == JX_F16 || d == JX_BF16 || d == JX_F32 || d == JX_F64;
}

static int all_finite(jx_array *x) {
  if (!is_float(jx_dtype_of(x))) return 1;
  return jx_item(jx_all(jx_isfinite(x), JX_AXES(), 0)) != 0;
}

/* Ops whose derivative is zero almost everywhere or undefined at the points
 * the goldens probe (jumps, ties); their rules are checked by their own tests. */
static const char *const not_smooth[] = {"floor",  "ceil",         "round",  "round_away",
                                         "sign",   "argmax",       "argmin", "argsort",
                                         "astype", "floor_divide", "rem",    NULL};

static jx_dtype grad_dtype(void) {
  const char *v = getenv("JX_CONFORMANCE_GRAD_DTYPE");
  return v && strcmp(v, "f32") == 0 ? JX_F32 : JX_F64;
}

static conf_result run_grad(const conf_case *c, conf_adapter *a, jx_array *const *in,
                            jx_array *const *want) {
  for (const char *const *s = not_smooth; *s; s++)
    if (strcmp(*s, c->op) == 0) return skip(c, "not smooth");
  if (conf_int(c, "nograd", 0)) return skip(c, "marked nograd");
  const char *env = getenv("JX_CONFORMANCE_GRAD_ORDER");
  int order = env ? atoi(env) : 1;
  if (order >= 2 && conf_int(c, "nograd2", 0)) return skip(c, "marked nograd2");
  int any_in = 0, any_out = 0;
  jx_array *x[CONF_MAX_IO];
  for (int i = 0; i < a->nin; i++) {
    if (!all_finite(in[i])) return skip(c, "non-finite input");
    int fl = is_float(jx_dtype_of(in[i]));
    any_in |= fl && jx_size(in[i]) > 0;
    /* f64 by default; JX_CONFORMANCE_GRAD_DTYPE=f32 checks in f32 (looser tolerances) */
    x[i] = fl ? jx_astype(in[i], grad_dtype()) : in[i];
  }
  for (int o = 0; o < a->nout; o++)
    any_out |= is_float(jx_dtype_of(want[o])) && jx_size(want[o]) > 0;
  if (!any_in || !any_out) return skip(c, "no floating input and output");
  jx_fn *f = jx_fn_create(c->op, a->nin, a->nout, conf_adapter_body, a);
  jx_status st = jx_check_grads(f, x, order < 1 ? 1 : order, 0, 0);
  jx_fn_release(f);
  if (st == JX_ERR_TRACE) return skip(c, "the adapter reads its inputs on the host");
  return st ? fail(c, "grad") : CONF_PASS;
}

conf_result conf_run_mode(conf_mode mode, const conf_case *c, conf_fn fn, int nin,
                          jx_array *const *in, int nout, jx_array *const *want) {
  conf_adapter a = {fn, c, nin, nout};
  switch (mode) {
  case CONF_JIT: return run_jit(c, &a, in, want);
  case CONF_VMAP:
    if (nin == 0) return skip(c, "no inputs to batch");
    return run_vmap(c, &a, in);
  case CONF_GRAD: return run_grad(c, &a, in, want);
  case CONF_SHARDED: return conf_run_sharded(c, fn, nin, in, nout, want);
  default: return CONF_PASS;
  }
}
