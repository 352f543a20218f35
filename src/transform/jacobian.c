/* Jacobians and the Hessian, as JAX builds them: jacfwd maps the JVP over the
 * standard basis of the input's tangent space, jacrev maps the VJP over the
 * basis of each output's cotangent space; hessian = jacfwd(jacrev). The
 * result for output o and input a has shape out_o.shape + in_a.shape; with
 * several argnums, output o's Jacobians come together, one per argnum (JAX's
 * nested tuples, flattened). */
#include <stdlib.h>
#include <string.h>

#include <jx/jx.h>

#include "../base/error.h"
#include "../trace/fn.h"
#include "build.h"
#include "transform_util.h"

typedef struct {
  int reverse;
  int nargs;
  int argnums[]; /* nargs entries, each in [0, nin), no repeats */
} jac_data;

typedef struct {
  jx_fn *f;        /* the function differentiated */
  jx_fn *d;        /* its jvp at argnum alone, or its vjp */
  int argnum, out; /* the input, and for jacrev the output, in question */
} basis_ctx;

/* (primals..., t) -> tangent outputs of f for tangent t at argnum */
static void jvp_column(void *ctx, jx_array *const *in, jx_array **out) {
  basis_ctx *c = ctx;
  int m = c->f->nout;
  jx_array **res = calloc(2 * (size_t)m + 1, sizeof *res);
  if (!res) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jacfwd: out of memory");
  } else {
    jx_call(c->d, in, res);
    for (int o = 0; o < m; o++) out[o] = res[m + o];
  }
  free(res);
}

/* (primals..., ct) -> the cotangent of input argnum for cotangent ct on output out */
static void vjp_row(void *ctx, jx_array *const *in, jx_array **out) {
  basis_ctx *c = ctx;
  int n = c->f->nin, m = c->f->nout;
  jx_array **args = calloc((size_t)(n + m) + 1, sizeof *args),
           **res = calloc((size_t)(n + m) + 1, sizeof *res);
  jx_array **y = calloc((size_t)m + 1, sizeof *y);
  if (!args || !res || !y) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jacrev: out of memory");
  } else {
    jx_call(c->f, in, y); /* for the shapes of the other outputs' zero cotangents */
    for (int i = 0; i < n; i++) args[i] = in[i];
    for (int o = 0; o < m; o++)
      args[n + o] = o == c->out ? in[n] : jx_zeros(jx_dtype_of(y[o]), jx_shape_of(y[o]));
    jx_call(c->d, args, res);
    out[0] = res[m + c->argnum];
  }
  free(args);
  free(res);
  free(y);
}

typedef struct {
  jx_fn *f;
  const jac_data *jd;
  const jx_aval *in;
  const jx_program *p;
} jac_ctx;

static jx_array *basis(jx_aval x, int64_t n) {
  jx_shape s = {x.shape.rank + 1, {n}};
  for (int i = 0; i < x.shape.rank; i++) s.dims[i + 1] = x.shape.dims[i];
  return jx_reshape(jx_eye(x.dtype, n), s);
}

/* (k, *a.shape) -> (*a.shape, *b.shape) where k = numel(b) */
static jx_array *to_jacobian(jx_array *stacked, jx_shape lead, jx_shape trail) {
  int r = jx_ndim(stacked);
  jx_axes perm = {r, {0}};
  for (int i = 1; i < r; i++) perm.v[i - 1] = i;
  perm.v[r - 1] = 0;
  jx_array *t = jx_transpose(stacked, perm);
  jx_shape s = {lead.rank + trail.rank, {0}};
  for (int i = 0; i < lead.rank; i++) s.dims[i] = lead.dims[i];
  for (int i = 0; i < trail.rank; i++) s.dims[lead.rank + i] = trail.dims[i];
  return jx_reshape(t, s);
}

/* out[o * stride] = the Jacobian of output o with respect to input a */
static jx_status jacobian_of(jac_ctx *c, jx_array *const *in, int a, int stride, jx_array **out) {
  int n = c->f->nin, m = c->f->nout;
  jx_aval x = c->in[a];
  int64_t nx = 1;
  for (int i = 0; i < x.shape.rank; i++) nx *= x.shape.dims[i];
  jx_array **args = calloc((size_t)n + 2, sizeof *args);
  if (!args) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jacobian: out of memory");
  for (int i = 0; i < n; i++) args[i] = in[i];
  jx_axes in_axes = {n + 1, {0}};
  for (int i = 0; i < n; i++) in_axes.v[i] = JX_NONE;
  in_axes.v[n] = 0;
  jx_status st = JX_OK;
  if (!c->jd->reverse) {
    basis_ctx bc = {c->f, jx_jvp_argnums(c->f, 1, &a), a, 0};
    jx_fn *col = jx_fn_create("jacfwd_column", n + 1, m, jvp_column, &bc);
    jx_fn *cols = jx_vmap(col, in_axes, JX_AXES(0));
    jx_array **res = calloc((size_t)m + 1, sizeof *res);
    args[n] = basis(x, nx);
    if (!res) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jacfwd: out of memory");
    if (!st) st = jx_call(cols, args, res);
    for (int o = 0; o < m && !st; o++)
      out[o * stride] = to_jacobian(res[o], c->p->avals[c->p->out[o]].shape, x.shape);
    free(res);
    jx_fn_release(cols);
    jx_fn_release(col);
    jx_fn_release(bc.d);
  } else {
    jx_fn *vjp = jx_vjp(c->f);
    for (int o = 0; o < m && !st; o++) {
      jx_aval y = c->p->avals[c->p->out[o]];
      int64_t ny = 1;
      for (int i = 0; i < y.shape.rank; i++) ny *= y.shape.dims[i];
      basis_ctx bc = {c->f, vjp, a, o};
      jx_fn *row = jx_fn_create("jacrev_row", n + 1, 1, vjp_row, &bc);
      jx_fn *rows = jx_vmap(row, in_axes, JX_AXES(0));
      jx_array *res[1];
      y.weak = 0;
      args[n] = basis(y, ny);
      st = jx_call(rows, args, res);
      if (!st) {
        /* (ny, *x.shape) -> (*y.shape, *x.shape) */
        jx_shape s = {y.shape.rank + x.shape.rank, {0}};
        for (int i = 0; i < y.shape.rank; i++) s.dims[i] = y.shape.dims[i];
        for (int i = 0; i < x.shape.rank; i++) s.dims[y.shape.rank + i] = x.shape.dims[i];
        out[o * stride] = jx_reshape(res[0], s);
      }
      jx_fn_release(rows);
      jx_fn_release(row);
    }
    jx_fn_release(vjp);
  }
  free(args);
  return st ? st : jx_last_status();
}

static jx_status build_jacobian(void *ctx, jx_array *const *in, jx_array **out) {
  jac_ctx *c = ctx;
  jx_status st = JX_OK;
  for (int k = 0; k < c->jd->nargs && !st; k++)
    st = jacobian_of(c, in, c->jd->argnums[k], c->jd->nargs, out + k);
  return st;
}

static jx_program *jac_build(jx_fn *f, const jx_aval *in) {
  const jac_data *jd = f->data;
  jx_fn *inner = f->inner;
  for (int k = 0; k < jd->nargs; k++) {
    int a = jd->argnums[k];
    if (!jx_is_float(in[a].dtype)) {
      char s[JX_AVAL_STR_CAP];
      jx_error_set(JX_ERR_DTYPE, "%s: argument %d is %s; Jacobians need a float input",
                   jd->reverse ? "jacrev" : "jacfwd", a, jx_aval_str(in[a].dtype, in[a].shape, s));
      return NULL;
    }
  }
  jx_program *p = jx_fn_program(inner, in);
  if (!p) return NULL;
  jac_ctx c = {inner, jd, in, p};
  jx_program *r =
      jx_program_build(f->name, inner->nin, in, inner->nout * jd->nargs, build_jacobian, &c);
  jx_program_release(p);
  return r;
}

static void free_jac(void *d) { free(d); }
static const jx_fn_kind jacfwd_kind = {.name = "jacfwd", .build = jac_build, .free_data = free_jac};
static const jx_fn_kind jacrev_kind = {.name = "jacrev", .build = jac_build, .free_data = free_jac};

static jx_fn *make(const char *op, jx_fn *f, int nargs, const int *args, int reverse) {
  if (!f) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the function is NULL", op);
    return NULL;
  }
  if (nargs < 1 || !args) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %s", op,
                 nargs < 1 ? "needs at least one argnum" : "argnums is NULL");
    return NULL;
  }
  jac_data *d = calloc(1, sizeof *d + sizeof *d->argnums * (size_t)nargs);
  if (!d) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return NULL;
  }
  d->reverse = reverse;
  d->nargs = nargs;
  if (jx_argnums_normalize(op, f->name, f->nin, nargs, args, d->argnums)) {
    free(d);
    return NULL;
  }
  return jx_fn_new_transform(reverse ? &jacrev_kind : &jacfwd_kind, f, f->nin, f->nout * nargs, d);
}

jx_fn *jx_jacfwd(jx_fn *f, int argnum) { return make("jx_jacfwd", f, 1, &argnum, 0); }
jx_fn *jx_jacrev(jx_fn *f, int argnum) { return make("jx_jacrev", f, 1, &argnum, 1); }
jx_fn *jx_jacfwd_argnums(jx_fn *f, int n, const int *argnums) {
  return make("jx_jacfwd_argnums", f, n, argnums, 0);
}
jx_fn *jx_jacrev_argnums(jx_fn *f, int n, const int *argnums) {
  return make("jx_jacrev_argnums", f, n, argnums, 1);
}

jx_fn *jx_hessian(jx_fn *f, int argnum) {
  jx_fn *r = jx_jacrev(f, argnum);
  if (!r) return NULL;
  jx_fn *h = jx_jacfwd(r, argnum);
  jx_fn_release(r); /* h holds its own reference */
  return h;
}
