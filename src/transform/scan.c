/* scan: a loop over the leading axis of its xs with carries (lax.scan).
 * Operands: (carries..., xs...); subs: the body (carry..., x...) -> (carry...,
 * y...); params: i0 carries, i1 length, i2 reverse, i3 outputs. Outputs: the
 * final carries, then the ys stacked along a new leading axis.
 *
 * Rules, as JAX's: JVP runs the JVP of the body with tangent carries (found
 * by a fixpoint); partial evaluation splits the body into a known scan that
 * also stacks the residuals as extra ys and an unknown scan that reads them
 * as xs; the transpose is a scan in the other direction over the transposed
 * body; batching batches the body, with the batch axis of xs and ys at 1. */
#include <stdlib.h>
#include <string.h>

#include <jx/transform.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../trace/eval.h"
#include "../trace/fn.h"
#include "../trace/dispatch.h"
#include "ad.h"
#include "build.h"
#include "control.h"
#include "partial_eval.h"

#define NCARRY(p)  ((int)(p)->i[0])
#define LENGTH(p)  ((p)->i[1])
#define REVERSE(p) ((int)(p)->i[2])

static jx_status infer_scan(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  (void)out;
  if (NCARRY(p) < 0 || NCARRY(p) > ctx->nin || LENGTH(p) < 0)
    return jx_error_set(JX_ERR_INTERNAL, "scan: bad parameters");
  for (int i = NCARRY(p); i < ctx->nin; i++)
    if (in[i].shape.rank < 1 || in[i].shape.dims[0] != LENGTH(p)) {
      char a[JX_AVAL_STR_CAP];
      return jx_error_set(JX_ERR_SHAPE, "scan: xs %d is %s but its leading axis must be %lld",
                          i - NCARRY(p), jx_aval_str(in[i].dtype, in[i].shape, a),
                          (long long)LENGTH(p));
    }
  return JX_OK;
}

static jx_status scan_outputs(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  if (ctx->nsub != 1) return jx_error_set(JX_ERR_INTERNAL, "scan: needs one body");
  const jx_program *b = ctx->subs[0];
  int nc = NCARRY(p);
  if (b->nout != ctx->nout) return jx_error_set(JX_ERR_INTERNAL, "scan: body output count");
  for (int o = 0; o < nc; o++) {
    out[o] = in[o];
    out[o].weak = in[o].weak && b->avals[b->out[o]].weak;
  }
  for (int o = nc; o < ctx->nout; o++) out[o] = jx_aval_stacked(b->avals[b->out[o]], LENGTH(p));
  return JX_OK;
}

/* x[t] of a stacked array */
static jx_array *index0(jx_array *x, int64_t t) {
  jx_shape start = {x->shape.rank, {0}}, stop = x->shape, sl = {x->shape.rank - 1, {0}};
  start.dims[0] = t;
  stop.dims[0] = t + 1;
  for (int i = 1; i < x->shape.rank; i++) sl.dims[i - 1] = x->shape.dims[i];
  return jx_reshape(jx_slice(x, start, stop, (jx_shape){0, {0}}), sl);
}

static jx_status impl_scan(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out) {
  const jx_params *p = ctx->params;
  int nc = NCARRY(p), nx = ctx->nin - nc, ny = ctx->nout - nc;
  int64_t len = LENGTH(p);
  const jx_program *body = ctx->subs[0];
  jx_array **c = calloc((size_t)nc + 1, sizeof *c),
           **args = calloc((size_t)ctx->nin + 1, sizeof *args);
  jx_array **res = calloc((size_t)ctx->nout + 1, sizeof *res);
  jx_array **ys = calloc((size_t)(ny * (len ? len : 1)) + 1, sizeof *ys);
  jx_status st =
      (c && args && res && ys) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
  for (int i = 0; i < nc && !st; i++) c[i] = jx_keep(in[i]);
  for (int64_t k = 0; k < len && !st; k++) {
    int64_t t = REVERSE(p) ? len - 1 - k : k;
    jx_scope_begin(); /* the iteration's temporaries die here; carries and ys are kept */
    for (int i = 0; i < nc; i++) args[i] = c[i];
    for (int i = 0; i < nx; i++) args[nc + i] = index0(in[nc + i], t);
    st = jx_program_eval(body, args, res);
    for (int i = 0; i < nc && !st; i++) {
      jx_array *next = jx_keep(res[i]);
      jx_release(c[i]);
      c[i] = next;
    }
    for (int j = 0; j < ny && !st; j++) ys[t * ny + j] = jx_keep(res[nc + j]);
    jx_scope_end();
  }
  for (int i = 0; i < nc && !st; i++) {
    jx_scope_adopt(c[i]); /* the kept reference moves to the caller's scope */
    out[i] = c[i];
    c[i] = NULL;
  }
  for (int j = 0; j < ny && !st; j++) {
    if (len == 0) {
      jx_aval a = jx_aval_stacked(body->avals[body->out[nc + j]], 0);
      out[nc + j] = jx_zeros(a.dtype, a.shape);
      continue;
    }
    jx_array **col = malloc(sizeof *col * (size_t)len);
    if (!col) {
      st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
      break;
    }
    for (int64_t t = 0; t < len; t++) col[t] = ys[t * ny + j];
    out[nc + j] = jx_stack((int)len, col, 0);
    free(col);
  }
  for (int i = 0; i < nc && c; i++) jx_release(c[i]);
  for (int64_t k = 0; ys && k < ny * len; k++) jx_release(ys[k]);
  free(c);
  free(args);
  free(res);
  free(ys);
  return st ? st : jx_last_status();
}

/* ---- JVP ---- */
typedef struct {
  const jx_program *body;
  int nc, nx, ny;
  const uint8_t *nzc, *nzx;
} scan_jvp_ctx;

/* (c..., tc_nz..., x..., tx_nz...) -> (c'..., tc'_nz..., y..., ty...) */
static jx_status jvp_body(void *ctx, jx_array *const *in, jx_array **out) {
  scan_jvp_ctx *s = ctx;
  int n = s->nc + s->nx;
  jx_array **x = calloc((size_t)n + 1, sizeof *x), **t = calloc((size_t)n + 1, sizeof *t);
  jx_array **y = calloc((size_t)(s->nc + s->ny) + 1, sizeof *y),
           **ty = calloc((size_t)(s->nc + s->ny) + 1, sizeof *ty);
  if (!x || !t || !y || !ty) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
  int k = 0;
  for (int i = 0; i < s->nc; i++) x[i] = in[k++];
  for (int i = 0; i < s->nc; i++)
    if (s->nzc[i]) t[i] = in[k++];
  for (int i = 0; i < s->nx; i++) x[s->nc + i] = in[k++];
  for (int i = 0; i < s->nx; i++)
    if (s->nzx[i]) t[s->nc + i] = in[k++];
  jx_status st = jx_jvp_eval(s->body, x, t, y, ty);
  k = 0;
  for (int i = 0; i < s->nc && !st; i++) out[k++] = y[i];
  for (int i = 0; i < s->nc && !st; i++)
    if (s->nzc[i]) out[k++] = ty[i] ? ty[i] : jx_rule_zeros_like(y[i]);
  for (int j = 0; j < s->ny && !st; j++) out[k++] = y[s->nc + j];
  for (int j = 0; j < s->ny && !st; j++)
    out[k++] = ty[s->nc + j] ? ty[s->nc + j] : jx_rule_zeros_like(y[s->nc + j]);
  free(x);
  free(t);
  free(y);
  free(ty);
  return st;
}

static jx_status jvp_scan(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                          jx_array **y, jx_array **ty) {
  const jx_params *p = ctx->params;
  const jx_program *body = ctx->subs[0];
  int nc = NCARRY(p), nx = ctx->nin - nc, ny = ctx->nout - nc;
  uint8_t *nz = calloc((size_t)ctx->nin + 1, 1), *nz_out = calloc((size_t)ctx->nout + 1, 1);
  jx_aval *av = malloc(sizeof *av * (size_t)(2 * ctx->nin + 1));
  jx_array **args = calloc(2 * (size_t)ctx->nin + 1, sizeof *args),
           **res = calloc(2 * (size_t)ctx->nout + 1, sizeof *res);
  jx_program *jb = NULL;
  jx_status st = (nz && nz_out && av && args && res)
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
  uint8_t *has_tangent = calloc((size_t)ctx->nin + 1, 1);
  if (!has_tangent && !st) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
  for (int i = 0; i < ctx->nin && !st; i++) {
    has_tangent[i] = !jx_rule_no_tangent(x[i]->dtype);
    nz[i] = t[i] != NULL && has_tangent[i];
  }
  if (!st) st = jx_carry_fixpoint(body, nc, jx_jvp_nonzero_outputs, has_tangent, nz, nz_out);
  free(has_tangent);
  int n = 0, nnzc = 0;
  for (int i = 0; i < nc && !st; i++) av[n++] = body->avals[body->in[i]];
  for (int i = 0; i < nc && !st; i++)
    if (nz[i]) {
      jx_aval a = body->avals[body->in[i]];
      a.weak = 0;
      av[n++] = a;
      nnzc++;
    }
  for (int i = 0; i < nx && !st; i++) av[n++] = body->avals[body->in[nc + i]];
  for (int i = 0; i < nx && !st; i++)
    if (nz[nc + i]) {
      jx_aval a = body->avals[body->in[nc + i]];
      a.weak = 0;
      av[n++] = a;
    }
  if (!st) {
    scan_jvp_ctx c = {body, nc, nx, ny, nz, nz + nc};
    jb = jx_program_build("scan_jvp_body", n, av, nc + nnzc + 2 * ny, jvp_body, &c);
    if (!jb) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  int k = 0;
  for (int i = 0; i < nc && !st; i++) args[k++] = x[i];
  for (int i = 0; i < nc && !st; i++)
    if (nz[i]) args[k++] = t[i] ? t[i] : jx_rule_zeros_like(x[i]);
  for (int i = 0; i < nx && !st; i++) args[k++] = x[nc + i];
  for (int i = 0; i < nx && !st; i++)
    if (nz[nc + i]) args[k++] = t[nc + i];
  if (!st) {
    jx_params q = *p;
    q.i[0] = nc + nnzc;
    q.i[3] = nc + nnzc + 2 * ny;
    st = jx_bind_sub(&jx_prim_scan, k, args, &q, 1, &jb, res);
  }
  for (int i = 0, j = nc; i < nc && !st; i++) {
    y[i] = res[i];
    ty[i] = nz[i] ? res[j++] : NULL;
  }
  for (int j = 0; j < ny && !st; j++) {
    y[nc + j] = res[nc + nnzc + j];
    ty[nc + j] = jx_rule_no_tangent(y[nc + j]->dtype) ? NULL : res[nc + nnzc + ny + j];
  }
  jx_program_release(jb);
  free(nz);
  free(nz_out);
  free(av);
  free(args);
  free(res);
  return st;
}

/* ---- partial evaluation ---- */
typedef struct {
  const jx_program *prog;
  int nres, nuc;
} reorder_ctx;

/* (unknown c..., res..., unknown x...) -> the unknown body's (res, c, x) order */
static jx_status unknown_body(void *ctx, jx_array *const *in, jx_array **out) {
  reorder_ctx *r = ctx;
  int n = r->prog->nin;
  jx_array **args = calloc((size_t)n + 1, sizeof *args);
  if (!args) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
  for (int i = 0; i < r->nres; i++) args[i] = in[r->nuc + i];
  for (int i = 0; i < r->nuc; i++) args[r->nres + i] = in[i];
  for (int i = r->nres + r->nuc; i < n; i++) args[i] = in[i];
  jx_status st = jx_program_eval(r->prog, args, out);
  free(args);
  return st;
}

static jx_status pe_scan(const jx_eqn *e, const jx_aval *in_avals, const uint8_t *unknown_in,
                         uint8_t *unknown_out, jx_pe_eqn *known, jx_pe_eqn *unknown, int *nres,
                         jx_aval **res_avals) {
  const jx_params *p = &e->params;
  const jx_program *body = e->sub[0];
  int nc = NCARRY(p), nin = e->nin, nout = e->nout, ny = nout - nc;
  uint8_t *uin = malloc((size_t)nin + 1), *uo = calloc((size_t)nout + 1, 1),
          *force = calloc((size_t)nout + 1, 1);
  jx_split sp = {0};
  jx_status st =
      (uin && uo && force) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
  if (!st) memcpy(uin, unknown_in, (size_t)nin);
  if (!st) st = jx_carry_fixpoint(body, nc, jx_unknown_outputs, NULL, uin, uo);
  for (int i = 0; i < nc && !st; i++) force[i] = uin[i];
  if (!st) st = jx_partial_eval(body, uin, force, &sp);
  int nkc = 0, nuc = 0, nky = 0, nuy = 0, nkx = 0, nux = 0;
  for (int i = 0; i < nc; i++) uin[i] ? nuc++ : nkc++;
  for (int i = nc; i < nin; i++) uin[i] ? nux++ : nkx++;
  for (int j = 0; j < ny && !st; j++) sp.unknown_out[nc + j] ? nuy++ : nky++;
  int nr = st ? 0 : sp.nres;
  jx_aval *rav = malloc(sizeof *rav * (size_t)(nr + 1));
  jx_aval *uav = malloc(sizeof *uav * (size_t)(nuc + nr + nux + 1));
  if (!rav || !uav) st = st ? st : jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
  for (int r = 0; r < nr && !st; r++) {
    jx_aval a = sp.known->avals[sp.known->out[nkc + nky + r]];
    a.weak = 0;
    rav[r] = jx_aval_stacked(a, LENGTH(p));
  }
  /* the unknown body in scan order: (unknown c..., res slices..., unknown x...) */
  jx_program *ub = NULL;
  if (!st) {
    const jx_program *u = sp.unknown;
    int k = 0;
    for (int i = 0; i < nuc; i++) uav[k++] = u->avals[u->in[nr + i]];
    for (int r = 0; r < nr; r++) uav[k++] = u->avals[u->in[r]];
    for (int i = 0; i < nux; i++) uav[k++] = u->avals[u->in[nr + nuc + i]];
    reorder_ctx rc = {u, nr, nuc};
    ub = jx_program_build("scan_unknown_body", k, uav, nuc + nuy, unknown_body, &rc);
    if (!ub) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  if (!st) {
    known->prim = unknown->prim = &jx_prim_scan;
    known->params = unknown->params = *p;
    known->params.i[0] = nkc;
    known->params.i[3] = nkc + nky + nr;
    known->sub[0] = jx_program_retain(sp.known);
    known->nsub = 1;
    unknown->params.i[0] = nuc;
    unknown->params.i[3] = nuc + nuy;
    unknown->sub[0] = ub;
    unknown->nsub = 1;
    ub = NULL;
    known->in = malloc(sizeof(int) * (size_t)(nkc + nkx + 1));
    unknown->in = malloc(sizeof(int) * (size_t)(nuc + nr + nux + 1));
    if (!known->in || !unknown->in) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
  }
  if (!st) {
    for (int i = 0; i < nin; i++)
      if (!uin[i]) known->in[known->nin++] = i;
    for (int i = 0; i < nc; i++)
      if (uin[i]) unknown->in[unknown->nin++] = i;
    for (int r = 0; r < nr; r++) unknown->in[unknown->nin++] = -1 - r;
    for (int i = nc; i < nin; i++)
      if (uin[i]) unknown->in[unknown->nin++] = i;
    for (int i = 0; i < nc; i++) unknown_out[i] = uin[i];
    for (int j = 0; j < ny; j++) unknown_out[nc + j] = sp.unknown_out[nc + j];
    *nres = nr;
    *res_avals = rav;
    rav = NULL;
  }
  (void)in_avals;
  jx_program_release(ub);
  jx_split_free(&sp);
  free(uin);
  free(uo);
  free(force);
  free(rav);
  free(uav);
  return st;
}

/* ---- transpose ---- */
typedef struct {
  const jx_program *t; /* (nonlinear x..., ct c'..., ct y...) -> (ct c..., ct x_lin...) */
  int nc, nnl, ny;
} transposed_body;

/* scan order: (ct c'..., nonlinear x..., ct y...) */
static jx_status run_transposed(void *ctx, jx_array *const *in, jx_array **out) {
  transposed_body *tb = ctx;
  int n = tb->nnl + tb->nc + tb->ny;
  jx_array **args = calloc((size_t)n + 1, sizeof *args);
  if (!args) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
  for (int i = 0; i < tb->nnl; i++) args[i] = in[tb->nc + i];
  for (int i = 0; i < tb->nc; i++) args[tb->nnl + i] = in[i];
  for (int j = 0; j < tb->ny; j++) args[tb->nnl + tb->nc + j] = in[tb->nc + tb->nnl + j];
  jx_status st = jx_program_eval(tb->t, args, out);
  free(args);
  return st;
}

static jx_status transpose_scan(const jx_rule_ctx *ctx, jx_array *const *in, const jx_aval *avals,
                                const uint8_t *linear, jx_array *const *ct, jx_array **ct_in) {
  const jx_params *p = ctx->params;
  const jx_program *body = ctx->subs[0];
  int nc = NCARRY(p), ny = ctx->nout - nc;
  uint8_t *mask = calloc((size_t)ctx->nin + 1, 1);
  jx_aval *av = malloc(sizeof *av * (size_t)(ctx->nin + ctx->nout + 1));
  jx_array **args = calloc((size_t)(ctx->nin + ctx->nout) + 1, sizeof *args),
           **res = calloc((size_t)ctx->nin + 1, sizeof *res);
  jx_program *t = NULL, *tb = NULL;
  jx_status st = (mask && av && args && res)
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
  int nnl = 0, nlx = 0;
  for (int i = 0; i < ctx->nin && !st; i++) {
    mask[i] = i < nc ? 1 : linear[i];
    if (i >= nc) linear[i] ? nlx++ : nnl++;
  }
  if (!st) {
    t = jx_transpose_program_mask(body, mask);
    if (!t) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  int k = 0;
  for (int i = 0; i < nc && !st; i++) {
    jx_aval a = body->avals[body->out[i]];
    a.weak = 0;
    av[k++] = a;
  }
  for (int i = nc; i < ctx->nin && !st; i++)
    if (!linear[i]) av[k++] = body->avals[body->in[i]];
  for (int j = 0; j < ny && !st; j++) {
    jx_aval a = body->avals[body->out[nc + j]];
    a.weak = 0;
    av[k++] = a;
  }
  if (!st) {
    transposed_body c = {t, nc, nnl, ny};
    tb = jx_program_build("scan_transposed_body", k, av, nc + nlx, run_transposed, &c);
    if (!tb) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  k = 0;
  for (int i = 0; i < nc && !st; i++) {
    jx_aval a = avals[i];
    a.weak = 0;
    args[k++] = ct[i] ? ct[i] : jx_rule_zeros(a);
  }
  for (int i = nc; i < ctx->nin && !st; i++)
    if (!linear[i]) args[k++] = in[i];
  for (int j = 0; j < ny && !st; j++) {
    jx_aval a = jx_aval_stacked(body->avals[body->out[nc + j]], LENGTH(p));
    a.weak = 0;
    args[k++] = ct[nc + j] ? ct[nc + j] : jx_rule_zeros(a);
  }
  if (!st) {
    jx_params q = *p;
    q.i[2] = !REVERSE(p);
    q.i[3] = nc + nlx;
    st = jx_bind_sub(&jx_prim_scan, k, args, &q, 1, &tb, res);
  }
  for (int i = 0; i < nc && !st; i++) ct_in[i] = linear[i] ? res[i] : NULL;
  for (int i = nc, j = nc; i < ctx->nin && !st; i++) ct_in[i] = linear[i] ? res[j++] : NULL;
  jx_program_release(t);
  jx_program_release(tb);
  free(mask);
  free(av);
  free(args);
  free(res);
  return st;
}

/* ---- batching ---- */
static jx_status batch_scan(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim,
                            int64_t size, jx_array **out, int *out_bdim) {
  const jx_params *p = ctx->params;
  const jx_program *body = ctx->subs[0];
  int nc = NCARRY(p);
  uint8_t *b = calloc((size_t)ctx->nin + 1, 1), *bo = calloc((size_t)ctx->nout + 1, 1);
  jx_array **args = calloc((size_t)ctx->nin + 1, sizeof *args);
  jx_program *bb = NULL;
  jx_status st =
      (b && bo && args) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
  for (int i = 0; i < ctx->nin && !st; i++) b[i] = bdim[i] != JX_NOT_MAPPED;
  if (!st) st = jx_carry_fixpoint(body, nc, jx_batched_outputs, NULL, b, bo);
  for (int i = 0; i < nc && !st; i++) bo[i] = b[i];
  if (!st) {
    bb = jx_batch_program(body, b, size, bo);
    if (!bb) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  for (int i = 0; i < ctx->nin && !st; i++) {
    if (!b[i])
      args[i] = in[i];
    else if (i < nc)
      args[i] = jx_rule_batch_to_front(in[i], bdim[i], size);
    else /* the scan axis stays first; the batch goes second */
      args[i] = bdim[i] == JX_NOT_MAPPED
                    ? jx_rule_moveaxis(jx_rule_batch_to_front(in[i], bdim[i], size), 0, 1)
                    : jx_rule_moveaxis(in[i], bdim[i], 1);
  }
  if (!st) st = jx_bind_sub(&jx_prim_scan, ctx->nin, args, p, 1, &bb, out);
  for (int o = 0; o < ctx->nout; o++) out_bdim[o] = bo && bo[o] ? (o < nc ? 0 : 1) : JX_NOT_MAPPED;
  jx_program_release(bb);
  free(b);
  free(bo);
  free(args);
  return st;
}

const jx_prim jx_prim_scan = {.name = "scan",
                              .id = JX_PRIM_scan,
                              .nin = JX_VARIADIC,
                              .nout = JX_NOUT_PARAM,
                              .params = "num_carry=i0 length=i1 reverse=i2",
                              .infer = infer_scan,
                              .outputs = scan_outputs,
                              .impl = impl_scan,
                              .jvp = jvp_scan,
                              .transpose = transpose_scan,
                              .batch = batch_scan,
                              .partial_eval = pe_scan};

JX_REGISTER_PRIMS(scan, &jx_prim_scan)

/* ---- the public functions ---- */
static jx_status scan_call(jx_fn *body, int ncarry, jx_array *const *init, int nxs,
                           jx_array *const *xs, int64_t length, int reverse, jx_array **out) {
  const char *op = "jx_scan";
  if (!body || !out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: body or out is NULL", op);
  for (int o = 0; o < body->nout; o++) out[o] = jx_poison();
  if (ncarry < 0 || nxs < 0 || (ncarry > 0 && !init) || (nxs > 0 && !xs))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: bad carry or xs counts (%d, %d)", op, ncarry,
                        nxs);
  jx_status st = JX_OK;
  if (ncarry) st = jx_check_inputs(op, ncarry, init);
  if (!st && nxs) st = jx_check_inputs(op, nxs, xs);
  if (st) return st;
  for (int i = 0; i < nxs; i++) {
    if (xs[i]->shape.rank < 1) {
      char a[JX_AVAL_STR_CAP];
      return jx_error_set(JX_ERR_SHAPE, "%s: xs %d is %s; xs need a leading axis to scan over", op,
                          i, jx_aval_str(xs[i]->dtype, xs[i]->shape, a));
    }
    if (length < 0) length = xs[i]->shape.dims[0];
    if (xs[i]->shape.dims[0] != length) {
      char a[JX_AVAL_STR_CAP];
      return jx_error_set(JX_ERR_SHAPE, "%s: xs %d is %s but the length is %lld", op, i,
                          jx_aval_str(xs[i]->dtype, xs[i]->shape, a), (long long)length);
    }
  }
  if (length < 0)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the length is %lld", op, (long long)length);
  int n = ncarry + nxs;
  jx_aval *av = malloc(sizeof *av * (size_t)(n + 1));
  jx_array **args = malloc(sizeof *args * (size_t)(n + 1));
  if (!av || !args) {
    free(av);
    free(args);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  for (int i = 0; i < ncarry; i++) {
    av[i] = (jx_aval){init[i]->dtype, init[i]->weak, init[i]->shape, jx_array_vma(init[i])};
    args[i] = init[i];
  }
  for (int i = 0; i < nxs; i++) {
    av[ncarry + i] =
        jx_aval_unstacked((jx_aval){xs[i]->dtype, xs[i]->weak, xs[i]->shape, jx_array_vma(xs[i])});
    args[ncarry + i] = xs[i];
  }
  jx_program *prog = jx_control_trace(op, "body", body, n, av);
  if (!prog) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  if (!st && prog->nout < ncarry)
    st = jx_error_set(JX_ERR_SHAPE, "%s: the body returns %d values but there are %d carries", op,
                      prog->nout, ncarry);
  for (int i = 0; i < ncarry && !st; i++) {
    jx_aval o = prog->avals[prog->out[i]];
    if (!jx_aval_same_type(o, av[i])) {
      char s1[JX_AVAL_STR_CAP], s2[JX_AVAL_STR_CAP];
      st = jx_error_set(JX_ERR_SHAPE, "%s: the body returns %s for carry %d, which is %s", op,
                        jx_aval_str(o.dtype, o.shape, s1), i,
                        jx_aval_str(av[i].dtype, av[i].shape, s2));
    }
  }
  if (!st) {
    jx_params p = JX_PARAMS_INIT;
    p.i[0] = ncarry;
    p.i[1] = length;
    p.i[2] = reverse != 0;
    p.i[3] = prog->nout;
    st = jx_bind_sub(&jx_prim_scan, n, args, &p, 1, &prog, out);
  }
  jx_program_release(prog);
  free(av);
  free(args);
  return st;
}

jx_status jx_scan(jx_fn *body, int ncarry, jx_array *const *init, int nxs, jx_array *const *xs,
                  int64_t length, int reverse, jx_array **out) {
  int nout = body ? body->nout : 0;
  jx_array **init_copy, **xs_copy; /* jx_scan(b, n, x, 0, NULL, len, 0, x) */
  init = jx_inputs_apart("jx_scan", init, ncarry, out, nout, &init_copy);
  xs = jx_inputs_apart("jx_scan", xs, nxs, out, nout, &xs_copy);
  jx_status st = scan_call(body, ncarry, init, nxs, xs, length, reverse, out);
  free(init_copy);
  free(xs_copy);
  return st;
}

/* fori as a scan whose carry starts with the counter */
typedef struct {
  jx_fn *body;
} fori_ctx;

static void fori_body(void *ctx, jx_array *const *in, jx_array **out) {
  jx_fn *body = ctx;
  jx_status st = jx_call(body, in, out + 1);
  (void)st;
  out[0] = jx_add(in[0], jx_scalar(JX_I32, 1));
}

static jx_status fori_call(int64_t lo, int64_t hi, jx_fn *body, int n, jx_array *const *init,
                           jx_array **out) {
  const char *op = "jx_fori";
  if (!body || !out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: body or out is NULL", op);
  for (int i = 0; i < n; i++) out[i] = jx_poison();
  if (body->nin != n + 1 || body->nout != n)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: the body '%s' must take (i, %d carries) and return %d carries; it "
                        "takes %d and returns %d",
                        op, body->name, n, n, body->nin, body->nout);
  if (lo < INT32_MIN || hi > INT32_MAX)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: bounds [%lld, %lld) exceed i32", op,
                        (long long)lo, (long long)hi);
  jx_fn *wrapper = jx_fn_fori_wrapper(body, fori_body);
  if (!wrapper) return jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
  jx_array **args = malloc(sizeof *args * (size_t)(n + 1)),
           **res = malloc(sizeof *res * (size_t)(n + 1));
  jx_status st =
      (args && res) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  if (!st) {
    args[0] = jx_full(JX_I32, (jx_shape){0, {0}}, (double)lo);
    for (int i = 0; i < n; i++) args[i + 1] = init[i];
    st = jx_scan(wrapper, n + 1, args, 0, NULL, hi > lo ? hi - lo : 0, 0, res);
    for (int i = 0; i < n && !st; i++) out[i] = res[i + 1];
  }
  free(args);
  free(res);
  return st;
}

jx_status jx_fori(int64_t lo, int64_t hi, jx_fn *body, int n, jx_array *const *init,
                  jx_array **out) {
  jx_array **copy; /* jx_fori(lo, hi, b, n, x, x) */
  init = jx_inputs_apart("jx_fori", init, n, out, n, &copy);
  jx_status st = fori_call(lo, hi, body, n, init, out);
  free(copy);
  return st;
}
