/* Batching: jx_vmap runs the program of the unbatched function through each
 * primitive's batching rule, tracking which axis of each value is the batch
 * axis (or that it is not batched). */
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../ir/axis_env.h"
#include "../trace/fn.h"
#include "../trace/trace.h"
#include "transform_util.h"
#include "vmap.h"

jx_status jx_vmap_eval(const jx_program *p, jx_array *const *x, const int *bdim, int64_t axis_size,
                       jx_array **y, int *ybdim) {
  jx_array **env = calloc((size_t)p->nvars + 1, sizeof *env);
  int *bd = malloc(sizeof *bd * (size_t)(p->nvars + 1));
  jx_status st = (env && bd) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "vmap: out of memory");
  for (int v = 0; v < p->nvars && !st; v++) bd[v] = JX_NOT_MAPPED;
  for (int i = 0; i < p->nin && !st; i++) {
    env[p->in[i]] = x[i];
    bd[p->in[i]] = bdim[i];
  }
  for (int c = 0; c < p->nconst && !st; c++) env[p->constvar[c]] = p->constval[c];
  for (int k = 0; k < p->neqns && !st; k++) {
    const jx_eqn *e = &p->eqns[k];
    jx_eqn_io io;
    st = jx_eqn_io_open(&io, e);
    if (st) break;
    int small_b[16], small_ob[16];
    int *ib = e->nin > 16 ? malloc(sizeof *ib * (size_t)e->nin) : small_b;
    int *ob = e->nout > 16 ? malloc(sizeof *ob * (size_t)e->nout) : small_ob;
    int any = 0;
    if (!ib || !ob) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "vmap: out of memory");
    for (int i = 0; i < e->nin && !st; i++) {
      io.in[i] = env[e->in[i]];
      ib[i] = bd[e->in[i]];
      any |= ib[i] != JX_NOT_MAPPED;
    }
    const char *old = jx_trace_set_default_loc(e->loc);
    const jx_rule_ctx ctx = jx_eqn_rule_ctx(e);
    if (st) {
    } else if (!any && !e->prim->uses_axis) {
      st = jx_bind_sub(e->prim, e->nin, io.in, &e->params, e->nsub, e->sub, io.out);
      for (int o = 0; o < e->nout; o++) ob[o] = JX_NOT_MAPPED;
    } else if (e->prim->batch) {
      st = e->prim->batch(&ctx, io.in, ib, axis_size, io.out, ob);
    } else if (e->prim->elementwise) {
      st = jx_batch_vectorized(&ctx, io.in, ib, axis_size, io.out, ob);
    } else {
      st = jx_error_set(JX_ERR_UNIMPLEMENTED, "%s%s%s has no batching rule (vmap)",
                        e->loc ? e->loc : "", e->loc ? ": " : "", e->prim->name);
    }
    jx_trace_set_default_loc(old);
    for (int o = 0; o < e->nout && !st; o++) {
      env[e->out[o]] = io.out[o];
      bd[e->out[o]] = ob[o];
    }
    if (ib != small_b) free(ib);
    if (ob != small_ob) free(ob);
    jx_eqn_io_close(&io);
  }
  if (!st)
    for (int o = 0; o < p->nout; o++) {
      y[o] = env[p->out[o]];
      ybdim[o] = bd[p->out[o]];
    }
  free(env);
  free(bd);
  return st;
}

/* ---- jx_vmap ---- */
typedef struct {
  int nin, nout;
  int *in_axes, *out_axes; /* JX_NONE: not mapped */
  char *axis_name;         /* NULL: anonymous */
} vmap_data;

static void free_vmap_data(void *d) {
  vmap_data *v = d;
  free(v->in_axes);
  free(v->out_axes);
  free(v->axis_name);
  free(v);
}

static jx_program *vmap_build(jx_fn *f, const jx_aval *in) {
  const vmap_data *vd = f->data;
  jx_fn *inner = f->inner;
  int n = inner->nin;
  int64_t size = -1;
  int first = -1;
  jx_aval *unb = malloc(sizeof *unb * (size_t)(n + 1));
  int *bdim = malloc(sizeof *bdim * (size_t)(n + 1));
  if (!unb || !bdim) {
    free(unb);
    free(bdim);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "vmap: out of memory");
    return NULL;
  }
  jx_status st = JX_OK;
  for (int i = 0; i < n && !st; i++) {
    unb[i] = in[i];
    bdim[i] = JX_NOT_MAPPED;
    int ax = vd->in_axes[i];
    if (ax == JX_NONE) continue;
    int r = in[i].shape.rank;
    int a = ax < 0 ? ax + r : ax;
    if (a < 0 || a >= r) {
      char s[JX_AVAL_STR_CAP];
      st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "vmap: in_axes[%d] = %d is out of range for input %d, %s", i, ax, i,
                        jx_aval_str(in[i].dtype, in[i].shape, s));
      break;
    }
    int64_t d = in[i].shape.dims[a];
    if (size >= 0 && d != size) {
      char s1[JX_AVAL_STR_CAP], s2[JX_AVAL_STR_CAP];
      st = jx_error_set(JX_ERR_SHAPE,
                        "vmap: inconsistent batch sizes: input %d (%s) has %lld along axis %d "
                        "but input %d (%s) has %lld",
                        first, jx_aval_str(in[first].dtype, in[first].shape, s1), (long long)size,
                        vd->in_axes[first], i, jx_aval_str(in[i].dtype, in[i].shape, s2),
                        (long long)d);
      break;
    }
    size = d;
    if (first < 0) first = i;
    bdim[i] = a;
    unb[i].shape.rank = r - 1;
    for (int k = a; k < r - 1; k++) unb[i].shape.dims[k] = in[i].shape.dims[k + 1];
  }
  if (!st && size < 0)
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "vmap: no input of '%s' is mapped (all in_axes are JX_NONE)", inner->name);
  /* the axis is bound while the body is traced (jx_axis_size) and batched */
  int pushed = !st && !jx_axis_push(vd->axis_name, size);
  jx_program *p = st || !pushed ? NULL : jx_fn_program(inner, unb);
  jx_program *result = NULL;
  jx_trace *tr = p ? jx_trace_begin(f->name) : NULL;
  if (tr) {
    jx_scope_begin();
    jx_array **x = calloc((size_t)n + 1, sizeof *x), **y = calloc((size_t)p->nout + 1, sizeof *y);
    int *yb = malloc(sizeof *yb * (size_t)(p->nout + 1));
    st = (x && y && yb) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "vmap: out of memory");
    for (int i = 0; i < n && !st; i++) x[i] = jx_trace_input(tr, in[i]);
    if (!st) st = jx_vmap_eval(p, x, bdim, size, y, yb);
    for (int o = 0; o < p->nout && !st; o++) {
      int want = vd->out_axes[o];
      if (want == JX_NONE) {
        if (yb[o] != JX_NOT_MAPPED)
          st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                            "vmap: out_axes[%d] is JX_NONE but output %d of '%s' depends on "
                            "the mapped inputs",
                            o, o, inner->name);
        continue;
      }
      int r = y[o]->shape.rank + (yb[o] == JX_NOT_MAPPED);
      int a = want < 0 ? want + r : want;
      if (a < 0 || a >= r) {
        st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "vmap: out_axes[%d] = %d is out of range for rank %d", o, want, r);
        break;
      }
      y[o] = jx_rule_moveaxis(jx_rule_batch_to_front(y[o], yb[o], size), 0, a);
    }
    if (st)
      jx_trace_abort(tr);
    else
      result = jx_trace_end(tr, p->nout, y);
    jx_scope_end();
    free(x);
    free(y);
    free(yb);
  }
  if (pushed) jx_axis_pop();
  jx_program_release(p);
  free(unb);
  free(bdim);
  return result;
}

static const jx_fn_kind vmap_kind = {
    .name = "vmap", .build = vmap_build, .free_data = free_vmap_data};

/* One entry per input (output); a single entry applies to all of them. */
static int *expand_axes(jx_axes ax, int n, const char *what, jx_fn *f) {
  if (ax.n != n && ax.n != 1 && !(ax.n == 0 && n == 0)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_vmap: %s has %d entries but '%s' has %d %ss", what,
                 ax.n, f->name, n, what[0] == 'i' ? "input" : "output");
    return NULL;
  }
  int *v = malloc(sizeof *v * (size_t)(n + 1));
  if (!v) return NULL;
  for (int i = 0; i < n; i++) v[i] = ax.n == 1 ? ax.v[0] : ax.v[i];
  return v;
}

jx_fn *jx_vmap(jx_fn *f, jx_axes in_axes, jx_axes out_axes) {
  return jx_vmap_axis(f, in_axes, out_axes, NULL);
}

jx_fn *jx_vmap_axis(jx_fn *f, jx_axes in_axes, jx_axes out_axes, const char *axis_name) {
  if (!f) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_vmap: the function is NULL");
    return NULL;
  }
  if (in_axes.n == 0) in_axes = (jx_axes){1, {0}};
  if (out_axes.n == 0) out_axes = (jx_axes){1, {0}};
  vmap_data *vd = calloc(1, sizeof *vd);
  if (!vd) return NULL;
  vd->in_axes = expand_axes(in_axes, f->nin, "in_axes", f);
  vd->out_axes = expand_axes(out_axes, f->nout, "out_axes", f);
  vd->axis_name = axis_name ? strdup(axis_name) : NULL;
  if (!vd->in_axes || !vd->out_axes || (axis_name && !vd->axis_name)) {
    free_vmap_data(vd);
    return NULL;
  }
  return jx_fn_new_transform(&vmap_kind, f, f->nin, f->nout, vd);
}
