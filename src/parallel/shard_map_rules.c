/* shard_map's transformation rules, as JAX's (shard_map.py):
 *
 * JVP: a shard_map of the body's JVP; tangents are laid out like their
 * primals.
 * Partial evaluation: the body splits into a known and an unknown part; the
 * residuals are per-device values, handed over as outputs of the known
 * shard_map whose dim 0 is split over every mesh axis (scalars get a dim of
 * size 1), so each device reads back exactly its own.
 * Transpose: a shard_map of the body's transpose. With check_vma (the
 * default, trace/vma.h) the body's types did the work: an input invariant
 * over an axis got a cotangent summed over it where the body cast it to
 * varying, and psum's cotangent comes back unsummed. What is left is the
 * body's unchecked promises: an output an out spec replicates over an axis
 * although its type varies there has its cotangent divided by the axis size
 * (every device's copy counts once in the mean), and an input cotangent that
 * still varies over an axis its in spec replicates over is psum'ed over it.
 * Without check_vma (pmap, jx_shard_map_ex's no_check_vma) nothing is
 * typed: every replicated output's cotangent is divided by the size of the
 * axes it is replicated over and every replicated input's cotangent psum'ed
 * over them, which with psum transposing to psum gives the same gradients.
 * Batching: a shard_map of the batched body, the batch dim (moved to 0) an
 * unsplit entry of the specs. */
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../prims/prims.h"
#include "../prims/rules.h"
#include "../ir/axis_env.h"
#include "../trace/eval.h"
#include "../trace/vma.h"
#include "../transform/ad.h"
#include "../transform/build.h"
#include "../transform/partial_eval.h"
#include "collective.h"
#include "shard_map.h"
#include "spmd.h"

#define OOM() jx_error_set(JX_ERR_OUT_OF_MEMORY, "shard_map: out of memory")

static jx_status last_or_internal(void) {
  return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
}

/* ---- JVP ---- */
jx_status jx_smap_jvp(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t, jx_array **y,
                      jx_array **ty) {
  const jx_params *p = ctx->params;
  jx_mesh *m = NULL;
  uint8_t *wrt = calloc((size_t)ctx->nin + 1, 1), *sel = malloc((size_t)ctx->nout + 1);
  jx_sharding **ish = calloc(2 * (size_t)ctx->nin + 1, sizeof *ish);
  jx_sharding **osh = calloc(2 * (size_t)ctx->nout + 1, sizeof *osh);
  jx_array **args = calloc(2 * (size_t)ctx->nin + 1, sizeof *args);
  jx_array **res = calloc(2 * (size_t)ctx->nout + 1, sizeof *res);
  jx_status st = (wrt && sel && ish && osh && args && res) ? JX_OK : OOM();
  if (!st) st = jx_smap_decode(p, 1, ctx->nin, &m, ish);
  if (!st) st = jx_smap_decode(p, 2, ctx->nout, NULL, osh);
  int n = ctx->nin;
  for (int i = 0; i < ctx->nin && !st; i++) {
    args[i] = x[i];
    wrt[i] = t[i] && !jx_rule_no_tangent(x[i]->dtype);
  }
  for (int i = 0; i < ctx->nin && !st; i++)
    if (wrt[i]) {
      ish[n] = ish[i];
      args[n++] = t[i];
    }
  for (int o = 0; o < ctx->nout && !st; o++) osh[ctx->nout + o] = osh[o];
  jx_program *jb = NULL;
  if (!st) {
    memset(sel, 1, (size_t)ctx->nout);
    int pushed = jx_smap_push_axes(m, jx_smap_checks_vma(p));
    jb = jx_jvp_program(ctx->subs[0], wrt, sel);
    jx_smap_pop_axes(pushed);
    if (!jb) st = last_or_internal();
  }
  if (!st) st = jx_smap_bind(m, n, args, ish, 2 * ctx->nout, osh, jb, jx_smap_checks_vma(p), res);
  for (int o = 0; o < ctx->nout && !st; o++) {
    y[o] = res[o];
    ty[o] = jx_rule_no_tangent(res[o]->dtype) ? NULL : res[ctx->nout + o];
  }
  jx_program_release(jb);
  free(wrt);
  free(sel);
  free(ish);
  free(osh);
  free(args);
  free(res);
  return st;
}

/* ---- partial evaluation ---- */
typedef struct {
  const jx_program *prog;
  int nfirst; /* known: outputs before the residuals; unknown: 0 */
  int nres;
  const uint8_t *promoted; /* per residual: a scalar carried with shape [1] */
} pe_ctx;

/* known inputs -> (known outputs..., residuals (scalars as [1])...) */
static jx_status known_body(void *ctx, jx_array *const *in, jx_array **out) {
  pe_ctx *c = ctx;
  jx_status st = jx_program_eval(c->prog, in, out);
  for (int r = 0; r < c->nres && !st; r++)
    if (c->promoted[r]) out[c->nfirst + r] = jx_reshape(out[c->nfirst + r], JX_SHAPE(1));
  return st ? st : jx_last_status();
}

/* (residuals (scalars as [1])..., unknown inputs...) -> unknown outputs */
static jx_status unknown_body(void *ctx, jx_array *const *in, jx_array **out) {
  pe_ctx *c = ctx;
  jx_array **args = calloc((size_t)c->prog->nin + 1, sizeof *args);
  if (!args) return OOM();
  for (int i = 0; i < c->prog->nin; i++)
    args[i] = i < c->nres && c->promoted[i] ? jx_reshape(in[i], JX_SHAPE()) : in[i];
  jx_status st = jx_program_eval(c->prog, args, out);
  free(args);
  return st;
}

jx_status jx_smap_partial_eval(const jx_eqn *e, const jx_aval *in_avals, const uint8_t *unknown_in,
                               uint8_t *unknown_out, jx_pe_eqn *known, jx_pe_eqn *unknown,
                               int *nres, jx_aval **res_avals) {
  (void)in_avals;
  int nin = e->nin, nout = e->nout;
  jx_mesh *m = NULL;
  jx_split sp = {0};
  jx_sharding **ish = calloc((size_t)nin + 1, sizeof *ish);
  jx_sharding **osh = calloc((size_t)nout + 1, sizeof *osh);
  jx_status st = ish && osh ? JX_OK : OOM();
  if (!st) st = jx_smap_decode(&e->params, 1, nin, &m, ish);
  if (!st) st = jx_smap_decode(&e->params, 2, nout, NULL, osh);
  int pushed = st ? 0 : jx_smap_push_axes(m, jx_smap_checks_vma(&e->params));
  if (!st) st = jx_partial_eval(e->sub[0], unknown_in, NULL, &sp);
  int nr = st ? 0 : sp.nres, nk_out = 0, nu_out = 0, nk_in = 0, nu_in = 0;
  for (int o = 0; o < nout && !st; o++) {
    unknown_out[o] = sp.unknown_out[o];
    sp.unknown_out[o] ? nu_out++ : nk_out++;
  }
  for (int i = 0; i < nin; i++) unknown_in[i] ? nu_in++ : nk_in++;
  uint8_t *promoted = calloc((size_t)nr + 1, 1);
  jx_aval *rav = malloc(sizeof *rav * (size_t)(nr + 1)); /* global */
  jx_aval *kav = malloc(sizeof *kav * (size_t)(nin + 1));
  jx_aval *uav = malloc(sizeof *uav * (size_t)(nr + nin + 1));
  jx_sharding **kish = calloc((size_t)nin + 1, sizeof *kish);
  jx_sharding **kosh = calloc((size_t)(nout + nr) + 1, sizeof *kosh);
  jx_sharding **uish = calloc((size_t)(nr + nin) + 1, sizeof *uish);
  jx_sharding **uosh = calloc((size_t)nout + 1, sizeof *uosh);
  if (!st && !(promoted && rav && kav && uav && kish && kosh && uish && uosh)) st = OOM();
  jx_sharding *per = st ? NULL : jx_smap_per_device(m);
  if (!st && !per) st = last_or_internal();
  int nk = 0, nu = 0;
  for (int r = 0; r < nr && !st; r++) {
    jx_aval a = sp.known->avals[sp.known->out[nk_out + r]];
    a.weak = 0;
    if (a.shape.rank == 0) {
      promoted[r] = 1;
      a.shape = (jx_shape){1, {1}};
    }
    uav[nu] = a;
    uish[nu++] = per;
    kosh[nk_out + r] = per;
    a.shape.dims[0] *= m->ndev;
    rav[r] = a;
  }
  for (int i = 0; i < nin && !st; i++) {
    if (unknown_in[i]) {
      uav[nu] = sp.unknown->avals[sp.unknown->in[nu]];
      uish[nu++] = ish[i];
    } else {
      kav[nk] = sp.known->avals[sp.known->in[nk]];
      kish[nk++] = ish[i];
    }
  }
  for (int o = 0, a = 0, b = 0; o < nout && !st; o++) {
    if (sp.unknown_out[o])
      uosh[a++] = osh[o];
    else
      kosh[b++] = osh[o];
  }
  jx_program *kb = NULL, *ub = NULL;
  if (!st) {
    pe_ctx kc = {sp.known, nk_out, nr, promoted}, uc = {sp.unknown, 0, nr, promoted};
    kb = jx_program_build("shard_map_known", nk, kav, nk_out + nr, known_body, &kc);
    ub = kb ? jx_program_build("shard_map_unknown", nu, uav, nu_out, unknown_body, &uc) : NULL;
    if (!kb || !ub) st = last_or_internal();
  }
  jx_smap_pop_axes(pushed);
  if (!st) {
    /* the equations: parameters as jx_smap_bind would make them */
    known->prim = unknown->prim = &jx_prim_shard_map;
    known->params = unknown->params = e->params;
    int64_t *ids = malloc(sizeof *ids * (size_t)(nout + nr + nin + 1));
    if (!ids) st = OOM();
    for (int k = 0; k < nk && !st; k++) ids[k] = kish[k]->id;
    if (!st) known->params.i[1] = jx_intern_ints(ids, nk);
    for (int k = 0; k < nk_out + nr && !st; k++) ids[k] = kosh[k]->id;
    if (!st) known->params.i[2] = jx_intern_ints(ids, nk_out + nr);
    for (int k = 0; k < nu && !st; k++) ids[k] = uish[k]->id;
    if (!st) unknown->params.i[1] = jx_intern_ints(ids, nu);
    for (int k = 0; k < nu_out && !st; k++) ids[k] = uosh[k]->id;
    if (!st) unknown->params.i[2] = jx_intern_ints(ids, nu_out);
    free(ids);
    known->params.i[3] = nk_out + nr;
    unknown->params.i[3] = nu_out;
    known->sub[0] = kb;
    unknown->sub[0] = ub;
    kb = ub = NULL;
    known->nsub = unknown->nsub = 1;
    known->in = malloc(sizeof(int) * (size_t)(nk + 1));
    unknown->in = malloc(sizeof(int) * (size_t)(nu + 1));
    if (!st && (!known->in || !unknown->in)) st = OOM();
  }
  if (!st) {
    for (int i = 0; i < nin; i++)
      if (!unknown_in[i]) known->in[known->nin++] = i;
    for (int r = 0; r < nr; r++) unknown->in[unknown->nin++] = -1 - r;
    for (int i = 0; i < nin; i++)
      if (unknown_in[i]) unknown->in[unknown->nin++] = i;
    *nres = nr;
    *res_avals = rav;
    rav = NULL;
  }
  jx_program_release(kb);
  jx_program_release(ub);
  jx_split_free(&sp);
  free(ish);
  free(osh);
  free(promoted);
  free(rav);
  free(kav);
  free(uav);
  free(kish);
  free(kosh);
  free(uish);
  free(uosh);
  return st;
}

/* ---- transpose ---- */
typedef struct {
  const jx_program *t; /* (nonlinear inputs..., output cts...) -> linear inputs' cts */
  int nlin;
  int check_vma;
  const int64_t *axes; /* per linear input: up to JX_MAX_RANK ids of the axes its spec leaves
                          unnamed (the input is replicated over them) */
  const int *naxes;
} transpose_ctx;

static jx_status transposed_body(void *ctx, jx_array *const *in, jx_array **out) {
  transpose_ctx *c = ctx;
  jx_status st = jx_program_eval(c->t, in, out);
  for (int k = 0; k < c->nlin && !st; k++) {
    jx_params q = JX_PARAMS_INIT;
    const int64_t *unnamed = c->axes + (size_t)k * JX_MAX_RANK;
    if (c->check_vma) { /* those of them the cotangent still varies over */
      int64_t varying[JX_MAX_RANK];
      int nv = jx_vma_axes(jx_array_vma(out[k]), varying);
      for (int a = 0; a < c->naxes[k]; a++)
        for (int v = 0; v < nv; v++)
          if (varying[v] == unnamed[a]) q.l[0].v[q.l[0].n++] = unnamed[a];
    } else {
      q.l[0].n = c->naxes[k];
      memcpy(q.l[0].v, unnamed, sizeof *unnamed * (size_t)c->naxes[k]);
    }
    if (q.l[0].n) out[k] = jx_bind1(&jx_prim_psum, 1, &out[k], &q);
  }
  return st ? st : jx_last_status();
}

/* The product of the sizes of the axes s leaves unnamed; with check_vma, only
 * those of them in the set vma. */
static int64_t replicated_size(const jx_sharding *s, int check_vma, int vma) {
  int64_t ids[JX_MAX_RANK], in_vma[JX_MAX_RANK], k = 1;
  int n = jx_smap_unnamed_axes(s, ids), nv = jx_vma_axes(vma, in_vma);
  for (int a = 0; a < n; a++) {
    int counts = !check_vma;
    for (int v = 0; v < nv && !counts; v++) counts = in_vma[v] == ids[a];
    if (counts) k *= jx_mesh_axis_size(s->mesh, jx_axis_name((int)ids[a]));
  }
  return k;
}

jx_status jx_smap_transpose(const jx_rule_ctx *ctx, jx_array *const *in, const jx_aval *in_avals,
                            const uint8_t *linear, jx_array *const *ct, jx_array **ct_in) {
  const jx_params *p = ctx->params;
  (void)in_avals;
  const jx_program *body = ctx->subs[0];
  jx_mesh *m = NULL;
  jx_sharding **ish = calloc((size_t)ctx->nin + 1, sizeof *ish);
  jx_sharding **osh = calloc((size_t)ctx->nout + 1, sizeof *osh);
  jx_sharding **tish = calloc((size_t)(ctx->nin + ctx->nout) + 1, sizeof *tish);
  jx_sharding **tosh = calloc((size_t)ctx->nin + 1, sizeof *tosh);
  jx_array **args = calloc((size_t)(ctx->nin + ctx->nout) + 1, sizeof *args);
  jx_array **res = calloc((size_t)ctx->nin + 1, sizeof *res);
  jx_aval *av = malloc(sizeof *av * (size_t)(ctx->nin + ctx->nout + 1));
  int64_t *axes = calloc((size_t)(ctx->nin + 1) * JX_MAX_RANK, sizeof *axes);
  int *naxes = calloc((size_t)ctx->nin + 1, sizeof *naxes);
  jx_status st = (ish && osh && tish && tosh && args && res && av && axes && naxes) ? JX_OK : OOM();
  if (!st) st = jx_smap_decode(p, 1, ctx->nin, &m, ish);
  if (!st) st = jx_smap_decode(p, 2, ctx->nout, NULL, osh);
  int n = 0, nlin = 0, check_vma = jx_smap_checks_vma(p);
  int pushed = st ? 0 : jx_smap_push_axes(m, check_vma);
  for (int i = 0; i < ctx->nin && !st; i++) {
    if (linear[i]) {
      naxes[nlin] = jx_smap_unnamed_axes(ish[i], axes + (size_t)nlin * JX_MAX_RANK);
      tosh[nlin++] = ish[i];
      continue;
    }
    av[n] = body->avals[body->in[i]];
    tish[n] = ish[i];
    args[n++] = in[i];
  }
  for (int o = 0; o < ctx->nout && !st; o++) {
    jx_aval a = body->avals[body->out[o]];
    a.weak = 0;
    av[n] = a;
    tish[n] = osh[o];
    jx_array *c = ct[o];
    int64_t k = replicated_size(osh[o], check_vma, a.vma);
    if (!c) {
      a.shape = jx_sharding_global_shape(osh[o], a.shape);
      c = jx_rule_zeros(a);
    } else if (k > 1) {
      c = jx_mul(c, jx_full(c->dtype, (jx_shape){0, {0}}, 1.0 / (double)k));
    }
    args[n++] = c;
  }
  jx_program *t = NULL, *tb = NULL;
  if (!st) {
    t = jx_transpose_program_mask(body, linear);
    transpose_ctx c = {t, nlin, check_vma, axes, naxes};
    tb = t ? jx_program_build("shard_map_transpose", n, av, nlin, transposed_body, &c) : NULL;
    if (!tb) st = last_or_internal();
  }
  jx_smap_pop_axes(pushed);
  if (!st) st = jx_smap_bind(m, n, args, tish, nlin, tosh, tb, check_vma, res);
  for (int i = 0, k = 0; i < ctx->nin && !st; i++) ct_in[i] = linear[i] ? res[k++] : NULL;
  jx_program_release(t);
  jx_program_release(tb);
  free(ish);
  free(osh);
  free(tish);
  free(tosh);
  free(args);
  free(res);
  free(av);
  free(axes);
  free(naxes);
  return st;
}

/* ---- batching ---- */
jx_status jx_smap_batch(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim, int64_t size,
                        jx_array **out, int *out_bdim) {
  const jx_params *p = ctx->params;
  const char *op = "vmap of jx_shard_map";
  jx_mesh *m = NULL;
  uint8_t *b_in = calloc((size_t)ctx->nin + 1, 1), *b_out = calloc((size_t)ctx->nout + 1, 1);
  jx_sharding **ish = calloc((size_t)ctx->nin + 1, sizeof *ish);
  jx_sharding **osh = calloc((size_t)ctx->nout + 1, sizeof *osh);
  jx_sharding **made = calloc((size_t)(ctx->nin + ctx->nout) + 1, sizeof *made); /* references */
  jx_array **args = calloc((size_t)ctx->nin + 1, sizeof *args);
  jx_status st = (b_in && b_out && ish && osh && made && args) ? JX_OK : OOM();
  if (!st) st = jx_smap_decode(p, 1, ctx->nin, &m, ish);
  if (!st) st = jx_smap_decode(p, 2, ctx->nout, NULL, osh);
  int nmade = 0;
  for (int i = 0; i < ctx->nin && !st; i++) {
    b_in[i] = bdim[i] != JX_NOT_MAPPED;
    args[i] = b_in[i] ? jx_rule_moveaxis(in[i], bdim[i], 0) : in[i];
    if (!b_in[i]) continue;
    ish[i] = made[nmade++] = jx_smap_insert_dims(ish[i], 0, 1, op);
    if (!ish[i]) st = last_or_internal();
  }
  jx_program *bb = NULL;
  if (!st) {
    /* the mesh's axes are bound for the body's collectives, with the axis
     * being batched still the innermost (rules compare against it) */
    int inner = jx_axis_innermost_id();
    int pushed = jx_smap_push_axes(m, jx_smap_checks_vma(p));
    int repushed = !jx_axis_push(inner ? jx_axis_name(inner) : NULL, size);
    st = jx_batched_outputs(ctx->subs[0], b_in, b_out);
    if (!st) bb = jx_batch_program(ctx->subs[0], b_in, size, b_out);
    if (repushed) jx_axis_pop();
    jx_smap_pop_axes(pushed);
    if (!st && !bb) st = last_or_internal();
  }
  for (int o = 0; o < ctx->nout && !st; o++) {
    out_bdim[o] = b_out[o] ? 0 : JX_NOT_MAPPED;
    if (!b_out[o]) continue;
    osh[o] = made[nmade++] = jx_smap_insert_dims(osh[o], 0, 1, op);
    if (!osh[o]) st = last_or_internal();
  }
  if (!st)
    st = jx_smap_bind(m, ctx->nin, args, ish, ctx->nout, osh, bb, jx_smap_checks_vma(p), out);
  jx_program_release(bb);
  for (int k = 0; k < nmade; k++) jx_sharding_release(made[k]);
  free(b_in);
  free(b_out);
  free(ish);
  free(osh);
  free(made);
  free(args);
  return st;
}
