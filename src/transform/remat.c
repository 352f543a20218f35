/* Rematerialization (jax.checkpoint): the region is one `remat` equation
 * holding its program. In reverse mode its partial evaluation saves nothing
 * from inside the region (or, with JX_SAVE_DOTS, only dot_general results):
 * the backward pass recomputes the rest from the region's inputs. Params:
 * i0 policy, i3 outputs. */
#include <stdlib.h>
#include <string.h>

#include <jx/transform.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../trace/eval.h"
#include "../trace/fn.h"
#include "ad.h"
#include "build.h"
#include "control.h"
#include "partial_eval.h"
#include "vmap.h"

static jx_status jvp_remat(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                           jx_array **y, jx_array **ty) {
  uint8_t *wrt = calloc((size_t)ctx->nin + 1, 1), *sel = malloc((size_t)ctx->nout + 1);
  jx_array **args = calloc(2 * (size_t)ctx->nin + 1, sizeof *args),
           **res = calloc(2 * (size_t)ctx->nout + 1, sizeof *res);
  jx_program *j = NULL;
  jx_status st = (wrt && sel && args && res)
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "remat: out of memory");
  int n = 0;
  for (int i = 0; i < ctx->nin && !st; i++) args[n++] = x[i];
  for (int i = 0; i < ctx->nin && !st; i++)
    if (t[i]) {
      wrt[i] = 1;
      args[n++] = t[i];
    }
  if (!st) {
    memset(sel, 1, (size_t)ctx->nout);
    j = jx_jvp_program(ctx->subs[0], wrt, sel);
    if (!j) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  if (!st) {
    jx_params q = *ctx->params;
    q.i[3] = 2 * ctx->nout;
    st = jx_bind_sub(&jx_prim_remat, n, args, &q, 1, &j, res);
  }
  for (int o = 0; o < ctx->nout && !st; o++) {
    y[o] = res[o];
    ty[o] = jx_rule_no_tangent(res[o]->dtype) ? NULL : res[ctx->nout + o];
  }
  jx_program_release(j);
  free(wrt);
  free(sel);
  free(args);
  free(res);
  return st;
}

/* ---- partial evaluation: recompute instead of saving ---- */
static int saveable(const jx_eqn *e, int policy) {
  return policy == JX_SAVE_DOTS && e->prim == &jx_prim_dot_general;
}

/* The known side: the region's known outputs, then the saved values. */
typedef struct {
  const jx_program *p;
  const uint8_t *uin, *uout, *saved_var;
  int nsaved;
} split_ctx;

static jx_status known_side(void *ctx, jx_array *const *in, jx_array **out) {
  split_ctx *c = ctx;
  const jx_program *p = c->p;
  jx_array **env = calloc((size_t)p->nvars + 1, sizeof *env);
  if (!env) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "remat: out of memory");
  int k = 0;
  uint8_t *known = calloc((size_t)p->nvars + 1, 1);
  if (!known) {
    free(env);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "remat: out of memory");
  }
  for (int i = 0; i < p->nin; i++)
    if (!c->uin[i]) {
      env[p->in[i]] = in[k++];
      known[p->in[i]] = 1;
    }
  for (int i = 0; i < p->nconst; i++) {
    env[p->constvar[i]] = p->constval[i];
    known[p->constvar[i]] = 1;
  }
  jx_status st = JX_OK;
  for (int q = 0; q < p->neqns && !st; q++) {
    const jx_eqn *e = &p->eqns[q];
    int all = 1;
    for (int i = 0; i < e->nin && all; i++) all = known[e->in[i]];
    if (!all) continue;
    jx_array *ins[64], *outs[64];
    if (e->nin > 64 || e->nout > 64) {
      st = jx_error_set(JX_ERR_UNIMPLEMENTED, "remat: an equation with more than 64 operands");
      break;
    }
    for (int i = 0; i < e->nin; i++) ins[i] = env[e->in[i]];
    st = jx_bind_sub(e->prim, e->nin, ins, &e->params, e->nsub, e->sub, outs);
    for (int o = 0; o < e->nout && !st; o++) {
      env[e->out[o]] = outs[o];
      known[e->out[o]] = 1;
    }
  }
  int n = 0;
  for (int o = 0; o < p->nout && !st; o++)
    if (!c->uout[o]) out[n++] = env[p->out[o]];
  for (int v = 0; v < p->nvars && !st; v++)
    if (c->saved_var[v]) out[n++] = env[v];
  free(env);
  free(known);
  return st;
}

/* The unknown side: (saved values..., the region's inputs...) -> unknown
 * outputs, recomputing everything that was not saved. */
static jx_status unknown_side(void *ctx, jx_array *const *in, jx_array **out) {
  split_ctx *c = ctx;
  const jx_program *p = c->p;
  jx_array **env = calloc((size_t)p->nvars + 1, sizeof *env);
  if (!env) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "remat: out of memory");
  int k = 0;
  for (int v = 0; v < p->nvars; v++)
    if (c->saved_var[v]) env[v] = in[k++];
  for (int i = 0; i < p->nin; i++) env[p->in[i]] = in[k++];
  for (int i = 0; i < p->nconst; i++) env[p->constvar[i]] = p->constval[i];
  jx_status st = JX_OK;
  for (int q = 0; q < p->neqns && !st; q++) {
    const jx_eqn *e = &p->eqns[q];
    if (e->nout > 0 && c->saved_var[e->out[0]]) continue;
    jx_array *ins[64], *outs[64];
    if (e->nin > 64 || e->nout > 64) {
      st = jx_error_set(JX_ERR_UNIMPLEMENTED, "remat: an equation with more than 64 operands");
      break;
    }
    for (int i = 0; i < e->nin; i++) ins[i] = env[e->in[i]];
    st = jx_bind_sub(e->prim, e->nin, ins, &e->params, e->nsub, e->sub, outs);
    for (int o = 0; o < e->nout && !st; o++) env[e->out[o]] = outs[o];
  }
  int n = 0;
  for (int o = 0; o < p->nout && !st; o++)
    if (c->uout[o]) out[n++] = env[p->out[o]];
  free(env);
  return st;
}

static jx_status pe_remat(const jx_eqn *e, const jx_aval *in_avals, const uint8_t *unknown_in,
                          uint8_t *unknown_out, jx_pe_eqn *known, jx_pe_eqn *unknown, int *nres,
                          jx_aval **res_avals) {
  const jx_program *p = e->sub[0];
  int policy = (int)e->params.i[0];
  uint8_t *unk = calloc((size_t)p->nvars + 1, 1), *saved = calloc((size_t)p->nvars + 1, 1);
  jx_status st =
      (unk && saved) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "remat: out of memory");
  for (int i = 0; i < p->nin && !st; i++) unk[p->in[i]] = unknown_in[i];
  for (int q = 0; q < p->neqns && !st; q++) {
    const jx_eqn *x = &p->eqns[q];
    int u = 0;
    for (int i = 0; i < x->nin; i++) u |= unk[x->in[i]];
    for (int o = 0; o < x->nout; o++) unk[x->out[o]] = (uint8_t)u;
    if (!u && saveable(x, policy))
      for (int o = 0; o < x->nout; o++) saved[x->out[o]] = 1;
  }
  int nk = 0, nu = 0, ns = 0, nkin = 0;
  for (int o = 0; o < p->nout; o++) {
    unknown_out[o] = unk[p->out[o]];
    unknown_out[o] ? nu++ : nk++;
  }
  for (int v = 0; v < p->nvars; v++) ns += saved[v];
  for (int i = 0; i < p->nin; i++) nkin += !unknown_in[i];
  jx_aval *kav = malloc(sizeof *kav * (size_t)(nkin + 1)),
          *uav = malloc(sizeof *uav * (size_t)(ns + p->nin + 1));
  jx_aval *rav = malloc(sizeof *rav * (size_t)(ns + 1));
  if (!kav || !uav || !rav)
    st = st ? st : jx_error_set(JX_ERR_OUT_OF_MEMORY, "remat: out of memory");
  int k = 0, r = 0;
  for (int i = 0; i < p->nin && !st; i++)
    if (!unknown_in[i]) kav[k++] = in_avals[i];
  for (int v = 0; v < p->nvars && !st; v++)
    if (saved[v]) {
      rav[r] = p->avals[v];
      rav[r].weak = 0;
      uav[r] = rav[r];
      r++;
    }
  for (int i = 0; i < p->nin && !st; i++) uav[ns + i] = in_avals[i];
  split_ctx c = {p, unknown_in, unknown_out, saved, ns};
  if (!st) {
    known->sub[0] = jx_program_build("remat_known", nkin, kav, nk + ns, known_side, &c);
    unknown->sub[0] = jx_program_build("remat_recompute", ns + p->nin, uav, nu, unknown_side, &c);
    known->nsub = unknown->nsub = 1;
    if (!known->sub[0] || !unknown->sub[0])
      st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  if (!st) {
    known->prim = unknown->prim = &jx_prim_remat;
    known->params = unknown->params = e->params;
    known->params.i[3] = nk + ns;
    unknown->params.i[3] = nu;
    known->in = malloc(sizeof(int) * (size_t)(nkin + 1));
    unknown->in = malloc(sizeof(int) * (size_t)(ns + p->nin + 1));
    if (!known->in || !unknown->in) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "remat: out of memory");
  }
  if (!st) {
    for (int i = 0; i < p->nin; i++)
      if (!unknown_in[i]) known->in[known->nin++] = i;
    for (int s = 0; s < ns; s++) unknown->in[unknown->nin++] = -1 - s;
    for (int i = 0; i < p->nin; i++) unknown->in[unknown->nin++] = i;
    *nres = ns;
    *res_avals = rav;
    rav = NULL;
  }
  free(unk);
  free(saved);
  free(kav);
  free(uav);
  free(rav);
  return st;
}

static jx_status transpose_remat(const jx_rule_ctx *ctx, jx_array *const *in, const jx_aval *avals,
                                 const uint8_t *linear, jx_array *const *ct, jx_array **ct_in) {
  (void)avals;
  jx_program *t = jx_transpose_program_mask(ctx->subs[0], linear);
  if (!t) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_array **args = calloc((size_t)(ctx->nin + ctx->nout) + 1, sizeof *args),
           **res = calloc((size_t)ctx->nin + 1, sizeof *res);
  jx_status st = (args && res) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "remat: out of memory");
  int n = 0;
  for (int i = 0; i < ctx->nin && !st; i++)
    if (!linear[i]) args[n++] = in[i];
  for (int o = 0; o < ctx->nout && !st; o++) {
    jx_aval a = ctx->subs[0]->avals[ctx->subs[0]->out[o]];
    a.weak = 0;
    args[n++] = ct[o] ? ct[o] : jx_rule_zeros(a);
  }
  if (!st) st = jx_program_eval(t, args, res); /* the recomputation happens here, backward */
  for (int i = 0, k = 0; i < ctx->nin && !st; i++) ct_in[i] = linear[i] ? res[k++] : NULL;
  jx_program_release(t);
  free(args);
  free(res);
  return st;
}

static jx_status batch_remat(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim,
                             int64_t n, jx_array **out, int *out_bdim) {
  uint8_t *b = calloc((size_t)ctx->nin + 1, 1), *bo = calloc((size_t)ctx->nout + 1, 1);
  jx_array **args = calloc((size_t)ctx->nin + 1, sizeof *args);
  jx_program *bp = NULL;
  jx_status st =
      (b && bo && args) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "remat: out of memory");
  for (int i = 0; i < ctx->nin && !st; i++) {
    b[i] = bdim[i] != JX_NOT_MAPPED;
    args[i] = b[i] ? jx_rule_moveaxis(in[i], bdim[i], 0) : in[i];
  }
  if (!st) st = jx_batched_outputs(ctx->subs[0], b, bo);
  if (!st) {
    bp = jx_batch_program(ctx->subs[0], b, n, bo);
    if (!bp) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  if (!st) st = jx_bind_sub(&jx_prim_remat, ctx->nin, args, ctx->params, 1, &bp, out);
  for (int o = 0; o < ctx->nout; o++) out_bdim[o] = bo && bo[o] ? 0 : JX_NOT_MAPPED;
  jx_program_release(bp);
  free(b);
  free(bo);
  free(args);
  return st;
}

const jx_prim jx_prim_remat = {.name = "remat",
                               .id = JX_PRIM_remat,
                               .nin = JX_VARIADIC,
                               .nout = JX_NOUT_PARAM,
                               .params = "policy=i0",
                               .infer = jx_wrapper_infer,
                               .outputs = jx_wrapper_outputs,
                               .impl = jx_wrapper_impl,
                               .jvp = jvp_remat,
                               .transpose = transpose_remat,
                               .batch = batch_remat,
                               .partial_eval = pe_remat};

JX_REGISTER_PRIMS(remat, &jx_prim_remat)

/* ---- jx_checkpoint ---- */
typedef struct {
  jx_remat_policy policy;
} remat_data;

typedef struct {
  const jx_program *p;
  int policy;
} region_ctx;

static jx_status region(void *ctx, jx_array *const *in, jx_array **out) {
  region_ctx *c = ctx;
  jx_params q = JX_PARAMS_INIT;
  q.i[0] = c->policy;
  q.i[3] = c->p->nout;
  jx_program *sub = (jx_program *)c->p;
  return jx_bind_sub(&jx_prim_remat, c->p->nin, in, &q, 1, &sub, out);
}

static jx_program *checkpoint_build(jx_fn *f, const jx_aval *in) {
  const remat_data *d = f->data;
  jx_program *p = jx_fn_program(f->inner, in);
  if (!p) return NULL;
  region_ctx c = {p, (int)d->policy};
  jx_program *r = jx_program_build(f->name, f->nin, in, f->nout, region, &c);
  jx_program_release(p);
  return r;
}

static void free_remat(void *d) { free(d); }
static const jx_fn_kind checkpoint_kind = {
    .name = "checkpoint", .build = checkpoint_build, .free_data = free_remat};

jx_fn *jx_checkpoint_with_policy(jx_fn *f, jx_remat_policy policy) {
  if (!f) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_checkpoint: the function is NULL");
    return NULL;
  }
  if (policy != JX_SAVE_NOTHING && policy != JX_SAVE_DOTS) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_checkpoint: unknown policy %d", (int)policy);
    return NULL;
  }
  remat_data *d = malloc(sizeof *d);
  if (!d) return NULL;
  d->policy = policy;
  return jx_fn_new_transform(&checkpoint_kind, f, f->nin, f->nout, d);
}

jx_fn *jx_checkpoint(jx_fn *f) { return jx_checkpoint_with_policy(f, JX_SAVE_NOTHING); }
