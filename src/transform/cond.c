/* cond: choose one of several nested programs by an integer index (lax.cond
 * and lax.switch). Operands: (index, ops...); subs: the branches, each
 * ops... -> outs...; params i3 = number of outputs.
 *
 * Rules, as JAX's: JVP differentiates every branch; partial evaluation splits
 * every branch into known and unknown parts whose residuals are the union over
 * branches (each branch fills the others' with zeros); the transpose
 * transposes every branch; batching with a batched index computes every
 * branch and selects, otherwise it batches the branches. */
#include <stdlib.h>
#include <string.h>

#include <jx/transform.h>

#include "../base/error.h"
#include "../base/hooks.h"
#include "../prims/rules.h"
#include "../trace/eval.h"
#include "../trace/fn.h"
#include "../trace/dispatch.h"
#include "ad.h"
#include "build.h"
#include "control.h"
#include "partial_eval.h"
#include "vmap.h"

static jx_status infer_cond(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  (void)out;
  char a[JX_AVAL_STR_CAP];
  if (ctx->nin < 1 || in[0].shape.rank != 0 || !jx_is_int(in[0].dtype))
    return jx_error_set(JX_ERR_SHAPE, "cond: the index must be an integer scalar, got %s",
                        jx_aval_str(in[0].dtype, in[0].shape, a));
  /* the output avals are the first branch's; the API checks the branches agree */
  return JX_OK;
}

/* The outputs are the branches' (the public functions check they agree). */
static jx_status cond_outputs(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  (void)in;
  if (ctx->nsub < 1) return jx_error_set(JX_ERR_INTERNAL, "cond: no branches");
  const jx_program *b = ctx->subs[0];
  if (b->nout != ctx->nout) return jx_error_set(JX_ERR_INTERNAL, "cond: branch output count");
  for (int o = 0; o < ctx->nout; o++) out[o] = b->avals[b->out[o]];
  return JX_OK;
}

static int64_t clamp_index(int64_t i, int n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

static jx_status impl_cond(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out) {
  int64_t k = clamp_index((int64_t)jx_item(in[0]), ctx->nsub);
  const jx_ilist *label = &ctx->params->l[0];
  if (label->n != 2 || !(jx_debug_flags & JX_DEBUG_PROFILE))
    return jx_program_eval(ctx->subs[k], in + 1, out);
  /* a labeled switch, profiled: which branch ran, for how long, on what */
  int at = (int)label->v[0];
  const jx_array *l = at > 0 && at < ctx->nin ? in[at] : NULL;
  int64_t value = l && l->shape.rank == 0 && jx_is_int(l->dtype) ? (int64_t)jx_item(l) : -1;
  double t0 = jx_prof_now();
  jx_status st = jx_program_eval(ctx->subs[k], in + 1, out);
  jx_prof_branch(ctx->subs[k]->name, (int)k, value, (int)label->v[1], t0, jx_prof_now());
  return st;
}

/* ---- JVP ---- */
static jx_status jvp_cond(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                          jx_array **y, jx_array **ty) {
  int nops = ctx->nin - 1;
  uint8_t *wrt = calloc((size_t)nops + 1, 1), *sel = malloc((size_t)ctx->nout + 1);
  jx_program *branches[JX_EQN_SUBS] = {0};
  jx_array **args = calloc(2 * (size_t)ctx->nin + 1, sizeof *args);
  jx_array **res = calloc(2 * (size_t)ctx->nout + 1, sizeof *res);
  jx_status st = (wrt && sel && args && res)
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "cond: out of memory");
  int nt = 0;
  for (int i = 0; i < nops && !st; i++)
    if (t[i + 1]) {
      wrt[i] = 1;
      nt++;
    }
  if (!st) memset(sel, 1, (size_t)ctx->nout);
  for (int k = 0; k < ctx->nsub && !st; k++) {
    branches[k] = jx_jvp_program(ctx->subs[k], wrt, sel);
    if (!branches[k]) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  int n = 0;
  args[n++] = x[0];
  for (int i = 0; i < nops; i++) args[n++] = x[i + 1];
  for (int i = 0; i < nops; i++)
    if (wrt[i]) args[n++] = t[i + 1];
  if (!st) {
    jx_params q = *ctx->params;
    q.i[3] = 2 * ctx->nout;
    st = jx_bind_sub(&jx_prim_cond, n, args, &q, ctx->nsub, branches, res);
  }
  for (int o = 0; o < ctx->nout && !st; o++) {
    y[o] = res[o];
    ty[o] = jx_rule_no_tangent(res[o]->dtype) ? NULL : res[ctx->nout + o];
  }
  for (int k = 0; k < ctx->nsub; k++) jx_program_release(branches[k]);
  free(wrt);
  free(sel);
  free(args);
  free(res);
  (void)nt;
  return st;
}

/* ---- partial evaluation ---- */
typedef struct {
  const jx_split *splits;
  int nsub, k;
  int nres_total;
  const int *res_off;
  const jx_aval *res_avals;
  int nknown_in, nk_out;
} cond_pe_ctx;

/* known branch k: known ops -> known outs, then every branch's residuals
 * (its own computed, the others zero) */
static jx_status known_branch(void *ctx, jx_array *const *in, jx_array **out) {
  cond_pe_ctx *c = ctx;
  const jx_split *s = &c->splits[c->k];
  jx_array **tmp = calloc((size_t)s->known->nout + 1, sizeof *tmp);
  if (!tmp) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "cond: out of memory");
  jx_status st = jx_program_eval(s->known, in, tmp);
  for (int o = 0; o < c->nk_out && !st; o++) out[o] = tmp[o];
  for (int r = 0; r < c->nres_total && !st; r++) {
    int lo = c->res_off[c->k], hi = c->res_off[c->k + 1];
    out[c->nk_out + r] =
        (r >= lo && r < hi) ? tmp[c->nk_out + (r - lo)] : jx_rule_zeros(c->res_avals[r]);
  }
  free(tmp);
  return st;
}

/* unknown branch k: (all residuals..., unknown ops...) -> unknown outs */
static jx_status unknown_branch(void *ctx, jx_array *const *in, jx_array **out) {
  cond_pe_ctx *c = ctx;
  const jx_split *s = &c->splits[c->k];
  int lo = c->res_off[c->k], hi = c->res_off[c->k + 1];
  int nun = s->unknown->nin - (hi - lo);
  jx_array **args = calloc((size_t)s->unknown->nin + 1, sizeof *args);
  if (!args) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "cond: out of memory");
  for (int r = lo; r < hi; r++) args[r - lo] = in[r];
  for (int i = 0; i < nun; i++) args[hi - lo + i] = in[c->nres_total + i];
  jx_status st = jx_program_eval(s->unknown, args, out);
  free(args);
  return st;
}

static jx_status pe_cond(const jx_eqn *e, const jx_aval *in_avals, const uint8_t *unknown_in,
                         uint8_t *unknown_out, jx_pe_eqn *known, jx_pe_eqn *unknown, int *nres,
                         jx_aval **res_avals_out) {
  if (unknown_in[0])
    return jx_error_set(JX_ERR_UNIMPLEMENTED, "cond: the branch index depends on tangents");
  int nsub = e->nsub, nops = e->nin - 1, nout = e->nout;
  jx_split splits[JX_EQN_SUBS];
  memset(splits, 0, sizeof splits);
  uint8_t *force = calloc((size_t)nout + 1, 1), *tmp = calloc((size_t)nout + 1, 1);
  int res_off[JX_EQN_SUBS + 1] = {0};
  jx_aval *rav = NULL;
  jx_status st = (force && tmp) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "cond: out of memory");
  /* outputs unknown in any branch are unknown in all */
  for (int k = 0; k < nsub && !st; k++) {
    st = jx_unknown_outputs(e->sub[k], unknown_in + 1, tmp);
    for (int o = 0; o < nout && !st; o++) force[o] |= tmp[o];
  }
  for (int k = 0; k < nsub && !st; k++) {
    st = jx_partial_eval(e->sub[k], unknown_in + 1, force, &splits[k]);
    res_off[k + 1] = res_off[k] + (st ? 0 : splits[k].nres);
  }
  int nr = res_off[nsub], nk_out = 0, nu_out = 0;
  for (int o = 0; o < nout; o++) {
    unknown_out[o] = force[o];
    nk_out += !force[o];
    nu_out += force[o];
  }
  if (!st) {
    rav = malloc(sizeof *rav * (size_t)(nr + 1));
    if (!rav) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "cond: out of memory");
    for (int k = 0; k < nsub && !st; k++)
      for (int r = 0; r < splits[k].nres; r++) {
        const jx_program *kp = splits[k].known;
        jx_aval a = kp->avals[kp->out[nk_out + r]];
        a.weak = 0;
        rav[res_off[k] + r] = a;
      }
  }
  int nkin = 0;
  jx_aval *kin = malloc(sizeof *kin * (size_t)(nops + 1));
  jx_aval *uin = malloc(sizeof *uin * (size_t)(nr + nops + 1));
  if (!kin || !uin) st = st ? st : jx_error_set(JX_ERR_OUT_OF_MEMORY, "cond: out of memory");
  for (int i = 0; i < nops && !st; i++)
    if (!unknown_in[i + 1]) kin[nkin++] = in_avals[i + 1];
  int nuin = 0;
  for (int r = 0; r < nr && !st; r++) uin[nuin++] = rav[r];
  for (int i = 0; i < nops && !st; i++)
    if (unknown_in[i + 1]) uin[nuin++] = in_avals[i + 1];
  cond_pe_ctx c = {splits, nsub, 0, nr, res_off, rav, nkin, nk_out};
  known->prim = unknown->prim = &jx_prim_cond;
  known->params = unknown->params = e->params;
  known->params.l[0].n = unknown->params.l[0].n = 0; /* the operands move: no label */
  known->params.i[3] = nk_out + nr;
  unknown->params.i[3] = nu_out;
  for (int k = 0; k < nsub && !st; k++) {
    c.k = k;
    known->sub[k] = jx_program_build("cond_known", nkin, kin, nk_out + nr, known_branch, &c);
    unknown->sub[k] = jx_program_build("cond_unknown", nuin, uin, nu_out, unknown_branch, &c);
    if (!known->sub[k] || !unknown->sub[k])
      st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
    known->nsub = unknown->nsub = k + 1;
  }
  if (!st) {
    known->in = malloc(sizeof(int) * (size_t)(nkin + 1));
    unknown->in = malloc(sizeof(int) * (size_t)(1 + nuin + 1));
    if (!known->in || !unknown->in) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "cond: out of memory");
  }
  if (!st) {
    known->in[known->nin++] = 0;
    for (int i = 0; i < nops; i++)
      if (!unknown_in[i + 1]) known->in[known->nin++] = i + 1;
    unknown->in[unknown->nin++] = 0;
    for (int r = 0; r < nr; r++) unknown->in[unknown->nin++] = -1 - r;
    for (int i = 0; i < nops; i++)
      if (unknown_in[i + 1]) unknown->in[unknown->nin++] = i + 1;
    *nres = nr;
    *res_avals_out = rav;
    rav = NULL;
  }
  for (int k = 0; k < nsub; k++) jx_split_free(&splits[k]);
  free(force);
  free(tmp);
  free(kin);
  free(uin);
  free(rav);
  return st;
}

/* ---- transpose ---- */
static jx_status transpose_cond(const jx_rule_ctx *ctx, jx_array *const *in, const jx_aval *avals,
                                const uint8_t *linear, jx_array *const *ct, jx_array **ct_in) {
  (void)avals;
  if (linear[0]) return jx_error_set(JX_ERR_INTERNAL, "cond: the index cannot be linear");
  jx_program *branches[JX_EQN_SUBS] = {0};
  int nlin = 0;
  for (int i = 1; i < ctx->nin; i++) nlin += linear[i];
  jx_array **args = calloc((size_t)(ctx->nin + ctx->nout) + 1, sizeof *args);
  jx_array **res = calloc((size_t)nlin + 1, sizeof *res);
  jx_status st = (args && res) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "cond: out of memory");
  for (int k = 0; k < ctx->nsub && !st; k++) {
    branches[k] = jx_transpose_program_mask(ctx->subs[k], linear + 1);
    if (!branches[k]) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  int n = 0;
  args[n++] = in[0];
  for (int i = 1; i < ctx->nin; i++)
    if (!linear[i]) args[n++] = in[i];
  for (int o = 0; o < ctx->nout && !st; o++) {
    const jx_program *b = ctx->subs[0];
    jx_aval a = b->avals[b->out[o]];
    a.weak = 0;
    args[n++] = ct[o] ? ct[o] : jx_rule_zeros(a);
  }
  if (!st) {
    jx_params q = *ctx->params;
    q.i[3] = nlin;
    st = jx_bind_sub(&jx_prim_cond, n, args, &q, ctx->nsub, branches, res);
  }
  for (int i = 1, k = 0; i < ctx->nin && !st; i++) ct_in[i] = linear[i] ? res[k++] : NULL;
  ct_in[0] = NULL;
  for (int k = 0; k < ctx->nsub; k++) jx_program_release(branches[k]);
  free(args);
  free(res);
  return st;
}

/* ---- batching ---- */
static jx_status batch_cond(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim, int64_t n,
                            jx_array **out, int *out_bdim) {
  int nops = ctx->nin - 1;
  uint8_t *b_in = calloc((size_t)nops + 1, 1), *b_out = calloc((size_t)ctx->nout + 1, 1);
  uint8_t *tmp = calloc((size_t)ctx->nout + 1, 1);
  jx_array **ops = calloc((size_t)ctx->nin + 1, sizeof *ops);
  jx_program *branches[JX_EQN_SUBS] = {0};
  jx_status st = (b_in && b_out && tmp && ops)
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "cond: out of memory");
  int index_batched = bdim[0] != JX_NOT_MAPPED;
  for (int i = 0; i < nops && !st; i++) {
    b_in[i] = bdim[i + 1] != JX_NOT_MAPPED;
    ops[i + 1] = b_in[i] ? jx_rule_moveaxis(in[i + 1], bdim[i + 1], 0) : in[i + 1];
  }
  for (int k = 0; k < ctx->nsub && !st; k++) {
    st = jx_batched_outputs(ctx->subs[k], b_in, tmp);
    for (int o = 0; o < ctx->nout && !st; o++) b_out[o] |= tmp[o] || index_batched;
  }
  for (int k = 0; k < ctx->nsub && !st; k++) {
    branches[k] = jx_batch_program(ctx->subs[k], b_in, n, b_out);
    if (!branches[k]) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  if (!st && !index_batched) {
    ops[0] = in[0];
    st = jx_bind_sub(&jx_prim_cond, ctx->nin, ops, ctx->params, ctx->nsub, branches, out);
    for (int o = 0; o < ctx->nout; o++) out_bdim[o] = b_out[o] ? 0 : JX_NOT_MAPPED;
  } else if (!st) {
    /* a batched index: run every branch and pick per lane */
    jx_array **per = calloc((size_t)(ctx->nsub * ctx->nout) + 1, sizeof *per);
    if (!per) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "cond: out of memory");
    for (int k = 0; k < ctx->nsub && !st; k++)
      st = jx_program_eval(branches[k], ops + 1, per + k * ctx->nout);
    jx_array *idx = jx_rule_moveaxis(in[0], bdim[0], 0);
    idx = jx_clip(jx_astype(idx, JX_I32), 0, ctx->nsub - 1);
    for (int o = 0; o < ctx->nout && !st; o++) {
      jx_array *cases[JX_EQN_SUBS + 1];
      cases[0] = jx_broadcast_in_dim(idx, jx_shape_of(per[o]), JX_AXES(0));
      for (int k = 0; k < ctx->nsub; k++) cases[k + 1] = per[k * ctx->nout + o];
      if (ctx->nsub == 1)
        out[o] = per[o];
      else
        out[o] = jx_bind1(&jx_prim_select_n, ctx->nsub + 1, cases, NULL);
      out_bdim[o] = 0;
    }
    free(per);
    if (!st) st = jx_last_status();
  }
  for (int k = 0; k < ctx->nsub; k++) jx_program_release(branches[k]);
  free(b_in);
  free(b_out);
  free(tmp);
  free(ops);
  return st;
}

const jx_prim jx_prim_cond = {.name = "cond",
                              .id = JX_PRIM_cond,
                              .nin = JX_VARIADIC,
                              .nout = JX_NOUT_PARAM,
                              .params = "nout=i3 label=l0",
                              .infer = infer_cond,
                              .outputs = cond_outputs,
                              .impl = impl_cond,
                              .jvp = jvp_cond,
                              .transpose = transpose_cond,
                              .batch = batch_cond,
                              .partial_eval = pe_cond};

JX_REGISTER_PRIMS(cond, &jx_prim_cond)

/* ---- the public functions ---- */
static jx_status switch_call(jx_array *index, int nbranches, jx_fn *const *branches, int n,
                             jx_array *const *ops, int label_op, int tag, jx_array **out) {
  const char *op = "jx_switch";
  if (nbranches < 1 || nbranches > JX_EQN_SUBS)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %d branches; 1 to %d are supported", op,
                        nbranches, JX_EQN_SUBS);
  if (!branches || !out)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: branches or out is NULL", op);
  for (int k = 0; k < nbranches; k++)
    if (!branches[k]) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: branch %d is NULL", op, k);
  int nout = branches[0]->nout;
  for (int o = 0; o < nout; o++) out[o] = jx_poison();
  jx_status st = jx_check_inputs(op, 1, &index);
  if (!st && n > 0) st = jx_check_inputs(op, n, ops);
  if (st) return st;
  if (index->shape.rank != 0 || !(jx_is_int(index->dtype) || index->dtype == JX_BOOL)) {
    char a[JX_AVAL_STR_CAP];
    return jx_error_set(JX_ERR_SHAPE, "%s: the index must be an integer scalar, got %s", op,
                        jx_aval_str(index->dtype, index->shape, a));
  }
  jx_program *progs[JX_EQN_SUBS] = {0};
  st = jx_control_trace_branches(op, nbranches, branches, n, ops, progs);
  if (!st) {
    jx_array *idx = jx_clip(jx_astype(index, JX_I32), 0, nbranches - 1);
    jx_array **args = malloc(sizeof *args * (size_t)(n + 1));
    if (!args) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    if (!st) {
      args[0] = idx;
      for (int i = 0; i < n; i++) args[i + 1] = ops[i];
      jx_params p = JX_PARAMS_INIT;
      p.i[3] = nout;
      if (label_op >= 0 && label_op < n) {
        p.l[0].n = 2;
        p.l[0].v[0] = 1 + label_op, p.l[0].v[1] = tag;
      }
      st = jx_bind_sub(&jx_prim_cond, n + 1, args, &p, nbranches, progs, out);
    }
    free(args);
  }
  for (int k = 0; k < nbranches; k++) jx_program_release(progs[k]);
  return st;
}

jx_status jx_switch(jx_array *index, int nbranches, jx_fn *const *branches, int n,
                    jx_array *const *ops, jx_array **out) {
  int nout = branches && nbranches > 0 && branches[0] ? branches[0]->nout : 0;
  jx_array **copy; /* jx_switch(i, k, b, n, x, x) */
  ops = jx_inputs_apart("jx_switch", ops, n, out, nout, &copy);
  jx_status st = switch_call(index, nbranches, branches, n, ops, -1, 0, out);
  free(copy);
  return st;
}

jx_status jx_switch_labeled(jx_array *index, int label_op, int tag, int nbranches,
                            jx_fn *const *branches, int n, jx_array *const *ops, jx_array **out) {
  int nout = branches && nbranches > 0 && branches[0] ? branches[0]->nout : 0;
  jx_array **copy;
  ops = jx_inputs_apart("jx_switch", ops, n, out, nout, &copy);
  jx_status st = switch_call(index, nbranches, branches, n, ops, label_op, tag, out);
  free(copy);
  return st;
}

jx_status jx_cond(jx_array *pred, jx_fn *then_fn, jx_fn *else_fn, int n, jx_array *const *ops,
                  jx_array **out) {
  if (jx_check_inputs("jx_cond", 1, &pred)) {
    int nout = then_fn ? then_fn->nout : 0;
    for (int o = 0; o < nout && out; o++) out[o] = jx_poison();
    return jx_last_status() ? jx_last_status() : JX_ERR_POISONED;
  }
  if (pred->shape.rank != 0) {
    char a[JX_AVAL_STR_CAP];
    return jx_error_set(JX_ERR_SHAPE, "jx_cond: the predicate must be a scalar, got %s",
                        jx_aval_str(pred->dtype, pred->shape, a));
  }
  jx_array *zero = jx_zeros(pred->dtype, (jx_shape){0, {0}});
  jx_array *index = jx_astype(jx_ne(pred, zero), JX_I32);
  jx_fn *branches[2] = {else_fn, then_fn};
  return jx_switch(index, 2, branches, n, ops, out);
}
