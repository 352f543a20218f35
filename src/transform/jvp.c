/* Forward mode: the JVP interpreter and jx_jvp. */
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../trace/eval.h"
#include "../trace/fn.h"
#include "../trace/trace.h"
#include "ad.h"
#include "transform_util.h"

jx_status jx_jvp_eval(const jx_program *p, jx_array *const *x, jx_array *const *t, jx_array **y,
                      jx_array **ty) {
  jx_array **env = calloc((size_t)p->nvars + 1, sizeof *env);
  jx_array **tan = calloc((size_t)p->nvars + 1, sizeof *tan);
  jx_status st = (env && tan) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jvp: out of memory");
  for (int i = 0; i < p->nin && !st; i++) {
    env[p->in[i]] = x[i];
    tan[p->in[i]] = (t && t[i] && !jx_rule_no_tangent(x[i]->dtype)) ? t[i] : NULL;
  }
  for (int c = 0; c < p->nconst && !st; c++) env[p->constvar[c]] = p->constval[c];
  for (int k = 0; k < p->neqns && !st; k++) {
    const jx_eqn *e = &p->eqns[k];
    jx_eqn_io io;
    st = jx_eqn_io_open(&io, e);
    if (st) break;
    int any = 0;
    for (int i = 0; i < e->nin; i++) {
      io.in[i] = env[e->in[i]];
      io.in2[i] = tan[e->in[i]];
      any |= io.in2[i] != NULL;
    }
    const char *old = jx_trace_set_default_loc(e->loc);
    if (!any) {
      st = jx_bind_sub(e->prim, e->nin, io.in, &e->params, e->nsub, e->sub, io.out);
      for (int o = 0; o < e->nout; o++) io.out2[o] = NULL;
    } else if (!e->prim->jvp) {
      st = jx_error_set(JX_ERR_UNIMPLEMENTED, "%s%s%s is not differentiable (no JVP rule)",
                        e->loc ? e->loc : "", e->loc ? ": " : "", e->prim->name);
    } else {
      const jx_rule_ctx ctx = jx_eqn_rule_ctx(e);
      st = e->prim->jvp(&ctx, io.in, io.in2, io.out, io.out2);
    }
    jx_trace_set_default_loc(old);
    for (int o = 0; o < e->nout && !st; o++) {
      env[e->out[o]] = io.out[o];
      tan[e->out[o]] = (io.out2[o] && !jx_rule_no_tangent(io.out[o]->dtype)) ? io.out2[o] : NULL;
    }
    jx_eqn_io_close(&io);
  }
  if (!st)
    for (int o = 0; o < p->nout; o++) {
      y[o] = env[p->out[o]];
      ty[o] = tan[p->out[o]];
    }
  free(env);
  free(tan);
  return st;
}

jx_program *jx_jvp_program(const jx_program *p, const uint8_t *wrt, const uint8_t *out_sel) {
  char name[300];
  snprintf(name, sizeof name, "jvp(%s)", p->name);
  jx_trace *tr = jx_trace_begin(name);
  if (!tr) return NULL;
  jx_scope_begin();
  jx_array **x = calloc((size_t)p->nin + 1, sizeof *x), **t = calloc((size_t)p->nin + 1, sizeof *t);
  jx_array **y = calloc((size_t)p->nout + 1, sizeof *y),
           **ty = calloc((size_t)p->nout + 1, sizeof *ty);
  jx_array **outs = calloc(2 * (size_t)p->nout + 1, sizeof *outs);
  jx_program *result = NULL;
  jx_status st = (x && t && y && ty && outs)
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jvp: out of memory");
  for (int i = 0; i < p->nin && !st; i++) x[i] = jx_trace_input(tr, p->avals[p->in[i]]);
  for (int i = 0; i < p->nin && !st; i++)
    if (wrt[i]) {
      jx_aval a = p->avals[p->in[i]];
      a.weak = 0;
      t[i] = jx_trace_input(tr, a);
    }
  if (!st) st = jx_jvp_eval(p, x, t, y, ty);
  int n = 0;
  for (int o = 0; o < p->nout && !st; o++) outs[n++] = y[o];
  for (int o = 0; o < p->nout && !st; o++)
    if (out_sel[o]) outs[n++] = ty[o] ? ty[o] : jx_rule_zeros_like(y[o]);
  if (st)
    jx_trace_abort(tr);
  else
    result = jx_trace_end(tr, n, outs);
  jx_scope_end();
  free(x);
  free(t);
  free(y);
  free(ty);
  free(outs);
  return result;
}

/* ---- jx_jvp and jx_jvp_argnums ----
 * jx_jvp: (primals..., tangents...) -> (outs..., tangent outs...);
 * jx_jvp_argnums: (primals..., tangents of argnums[0..nargs)...) -> the same;
 * the other inputs' tangents are zero, and their contributions are never
 * computed. */
typedef struct {
  int nargs;     /* -1: every input, in order (jx_jvp) */
  int argnums[]; /* nargs entries, each in [0, nin), no repeats */
} jvp_data;

static const char *jvp_op(const jvp_data *d) { return d->nargs < 0 ? "jx_jvp" : "jx_jvp_argnums"; }

static jx_program *jvp_build(jx_fn *f, const jx_aval *in) {
  const jvp_data *d = f->data;
  int n = f->inner->nin, nt = d->nargs < 0 ? n : d->nargs;
  for (int k = 0; k < nt; k++) {
    int i = d->nargs < 0 ? k : d->argnums[k];
    if (!jx_shape_equal(in[i].shape, in[n + k].shape) ||
        (jx_is_inexact(in[i].dtype) && in[i].dtype != in[n + k].dtype)) {
      char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
      jx_error_set(JX_ERR_SHAPE, "%s: tangent %d is %s but its primal (input %d) is %s", jvp_op(d),
                   k, jx_aval_str(in[n + k].dtype, in[n + k].shape, a), i,
                   jx_aval_str(in[i].dtype, in[i].shape, b));
      return NULL;
    }
  }
  jx_program *p = jx_fn_program(f->inner, in);
  if (!p) return NULL;
  uint8_t *wrt = calloc((size_t)n + 1, 1), *sel = malloc((size_t)p->nout + 1);
  jx_program *j = NULL, *result = NULL;
  if (wrt && sel) {
    for (int k = 0; k < nt; k++) wrt[d->nargs < 0 ? k : d->argnums[k]] = 1;
    memset(sel, 1, (size_t)p->nout);
    j = jx_jvp_program(p, wrt, sel);
  } else {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", jvp_op(d));
  }
  /* Tangents for integer inputs are accepted and ignored, like JAX's float0.
   * j takes the selected inputs' tangents in input order; jx_jvp_argnums's
   * caller gives them in argnums order. */
  if (j && d->nargs < 0) {
    result = j;
    j = NULL;
  }
  jx_trace *tr = j ? jx_trace_begin(f->name) : NULL;
  if (tr) {
    jx_scope_begin();
    jx_array **x = calloc((size_t)(2 * n) + 1, sizeof *x),
             **y = calloc(2 * (size_t)p->nout + 1, sizeof *y);
    jx_status st = x && y ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jvp: out of memory");
    for (int i = 0; i < n + nt && !st; i++) x[i] = jx_trace_input(tr, in[i]);
    if (!st) { /* tangents to input order, behind the primals */
      jx_array **t = x + n, **given = malloc(sizeof *given * (size_t)(nt + 1));
      if (!given) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jvp: out of memory");
      for (int k = 0; k < nt && !st; k++) given[k] = t[k];
      for (int i = 0, m = 0; i < n && !st; i++)
        for (int k = 0; k < nt; k++)
          if (d->argnums[k] == i) t[m++] = given[k];
      free(given);
    }
    if (!st) st = jx_program_eval(j, x, y);
    if (st)
      jx_trace_abort(tr);
    else
      result = jx_trace_end(tr, 2 * p->nout, y);
    jx_scope_end();
    free(x);
    free(y);
  }
  free(wrt);
  free(sel);
  jx_program_release(j);
  jx_program_release(p);
  return result;
}

static void free_jvp_data(void *d) { free(d); }
static const jx_fn_kind jvp_kind = {.name = "jvp", .build = jvp_build, .free_data = free_jvp_data};

static jx_fn *jvp(const char *op, jx_fn *f, int nargs, const int *args) {
  if (!f) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the function is NULL", op);
    return NULL;
  }
  if (nargs > 0 && !args) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: argnums is NULL", op);
    return NULL;
  }
  jvp_data *d = calloc(1, sizeof *d + sizeof *d->argnums * (size_t)(nargs > 0 ? nargs : 1));
  if (!d) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return NULL;
  }
  d->nargs = nargs;
  if (jx_argnums_normalize(op, f->name, f->nin, nargs, args, d->argnums)) {
    free(d);
    return NULL;
  }
  return jx_fn_new_transform(&jvp_kind, f, f->nin + (nargs < 0 ? f->nin : nargs), 2 * f->nout, d);
}

jx_fn *jx_jvp(jx_fn *f) { return jvp("jx_jvp", f, -1, NULL); }

jx_fn *jx_jvp_argnums(jx_fn *f, int n, const int *argnums) {
  if (n < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_jvp_argnums: n = %d is negative", n);
    return NULL;
  }
  return jvp("jx_jvp_argnums", f, n, argnums);
}
