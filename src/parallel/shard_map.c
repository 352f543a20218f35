/* jx_shard_map: f traced once on the per-device blocks of its inputs (with
 * the mesh's axis names bound for the collectives), recorded as one
 * shard_map equation holding that body, and run concretely by the SPMD
 * runtime on every device of the mesh (jax.shard_map). By default the body's
 * values carry the manual axes they vary over (check_vma=True, trace/vma.h),
 * which makes gradients through psum right; jx_shard_map_ex can turn that
 * off. The transformation rules are in shard_map_rules.c. */
#include "shard_map.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../compile/backend.h"
#include "../ir/axis_env.h"
#include "../ir/exec.h"
#include "../trace/dispatch.h"
#include "../trace/eval.h"
#include "../trace/fn.h"
#include "../trace/trace.h"
#include "../trace/vma.h"
#include "../transform/build.h"
#include "collective.h"
#include "shards.h"
#include "spmd.h"

/* ---- parameters ---- */
jx_status jx_smap_decode(const jx_params *p, int slot, int n, jx_mesh **mesh, jx_sharding **sh) {
  jx_mesh *m = jx_mesh_from_id((int)p->i[0]);
  if (!m) return jx_error_set(JX_ERR_INTERNAL, "shard_map: unknown mesh %lld", (long long)p->i[0]);
  if (mesh) *mesh = m;
  if (!sh) return JX_OK;
  int len = 0;
  const int64_t *ids = jx_interned_ints((int)p->i[slot], &len);
  if (len != n || (n && !ids))
    return jx_error_set(JX_ERR_INTERNAL, "shard_map: %d %s shardings for %d %ss", len,
                        slot == 1 ? "input" : "output", n, slot == 1 ? "input" : "output");
  for (int k = 0; k < n; k++) {
    sh[k] = jx_sharding_from_id((int)ids[k]);
    if (!sh[k] || sh[k]->mesh != m)
      return jx_error_set(JX_ERR_INTERNAL, "shard_map: bad sharding %lld", (long long)ids[k]);
  }
  return JX_OK;
}

/* The interned number of the list of the shardings' ids. */
static int intern_shardings(int n, jx_sharding *const *sh) {
  int64_t *ids = malloc(sizeof *ids * (size_t)(n + 1));
  if (!ids) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "shard_map: out of memory");
    return 0;
  }
  for (int k = 0; k < n; k++) ids[k] = sh[k]->id;
  int id = jx_intern_ints(ids, n);
  free(ids);
  return id;
}

jx_status jx_smap_bind(jx_mesh *m, int nin, jx_array *const *in, jx_sharding *const *in_sh,
                       int nout, jx_sharding *const *out_sh, jx_program *body, int check_vma,
                       jx_array **out) {
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = m->id;
  p.i[1] = intern_shardings(nin, in_sh);
  p.i[2] = intern_shardings(nout, out_sh);
  p.i[3] = nout;
  p.f[0] = check_vma ? 1 : 0;
  if (!p.i[1] || !p.i[2]) {
    for (int o = 0; o < nout; o++) out[o] = jx_poison();
    return jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
  }
  return jx_bind_sub(&jx_prim_shard_map, nin, in, &p, 1, &body, out);
}

int jx_smap_checks_vma(const jx_params *p) { return p->f[0] != 0; }

/* ---- axes, specs ---- */
int jx_smap_push_axes(const jx_mesh *m, int check_vma) {
  int n = 0;
  for (int a = 0; a < m->ndim; a++)
    if (!(check_vma ? jx_axis_push_manual : jx_axis_push)(m->name[a], m->size[a])) n++;
  return n;
}

int jx_smap_named_vma(const jx_sharding *s) {
  int64_t ids[JX_MAX_RANK];
  int n = 0;
  for (int a = 0; a < s->mesh->ndim; a++)
    if (jx_sharding_uses_axis(s, a)) ids[n++] = jx_axis_id(s->mesh->name[a]);
  return jx_vma_add(0, n, ids);
}

void jx_smap_pop_axes(int n) {
  while (n-- > 0) jx_axis_pop();
}

jx_sharding *jx_smap_insert_dims(jx_sharding *s, int at, int by, const char *op) {
  int naxes[JX_MAX_RANK] = {0}, axis[JX_MAX_RANK][JX_MAX_RANK];
  memset(axis, 0, sizeof axis);
  if (s->ndims <= at) return jx_sharding_retain(s); /* the new dims are beyond the spec */
  if (s->ndims + by > JX_MAX_RANK) {
    jx_error_set(JX_ERR_SHAPE, "%s: the spec '%s' cannot take %d more dims (rank limit %d)", op,
                 s->spec, by, JX_MAX_RANK);
    return NULL;
  }
  for (int d = 0; d < s->ndims; d++) {
    int to = d < at ? d : d + by;
    naxes[to] = s->naxes[d];
    memcpy(axis[to], s->axis[d], sizeof axis[to]);
  }
  return jx_sharding_make(s->mesh, s->ndims + by, naxes, (const int(*)[JX_MAX_RANK])axis, op);
}

jx_sharding *jx_smap_per_device(jx_mesh *m) {
  int naxes[JX_MAX_RANK] = {0}, axis[JX_MAX_RANK][JX_MAX_RANK];
  memset(axis, 0, sizeof axis);
  naxes[0] = m->ndim;
  for (int a = 0; a < m->ndim; a++) axis[0][a] = a;
  jx_sharding *s = jx_sharding_make(m, 1, naxes, (const int(*)[JX_MAX_RANK])axis, "shard_map");
  jx_sharding_release(s); /* the registry keeps every sharding */
  return s;
}

int jx_smap_unnamed_axes(const jx_sharding *s, int64_t *ids) {
  int n = 0;
  for (int a = 0; a < s->mesh->ndim; a++)
    if (!jx_sharding_uses_axis(s, a)) ids[n++] = jx_axis_id(s->mesh->name[a]);
  return n;
}

/* ---- the row ---- */
static jx_status infer_smap(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  (void)out;
  jx_sharding *sh[JX_MAX_RANK * 8];
  jx_sharding **s =
      ctx->nin <= (int)(sizeof sh / sizeof *sh) ? sh : malloc(sizeof *s * (size_t)ctx->nin);
  if (!s) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "shard_map: out of memory");
  jx_status st = jx_smap_decode(ctx->params, 1, ctx->nin, NULL, s);
  for (int i = 0; i < ctx->nin && !st; i++) st = jx_sharding_check(s[i], in[i].shape, "shard_map");
  if (s != sh) free(s);
  return st; /* the outputs come from the body (smap_outputs) */
}

/* The outputs: the body's blocks, each scaled up by its out sharding. The
 * body's inputs must be the inputs' blocks. */
static jx_status smap_outputs(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  if (ctx->nsub != 1) return jx_error_set(JX_ERR_INTERNAL, "shard_map: needs one body");
  const jx_program *b = ctx->subs[0];
  if (b->nin != ctx->nin || b->nout != ctx->nout)
    return jx_error_set(JX_ERR_INTERNAL, "shard_map: the body takes %d and gives %d, not %d, %d",
                        b->nin, b->nout, ctx->nin, ctx->nout);
  jx_sharding **s = malloc(sizeof *s * (size_t)(ctx->nin + ctx->nout + 1));
  if (!s) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "shard_map: out of memory");
  jx_status st = jx_smap_decode(p, 1, ctx->nin, NULL, s);
  if (!st) st = jx_smap_decode(p, 2, ctx->nout, NULL, s + ctx->nin);
  for (int i = 0; i < ctx->nin && !st; i++) {
    int64_t start[JX_MAX_RANK];
    jx_shape local;
    jx_sharding_block(s[i], in[i].shape, 0, start, &local);
    jx_aval want = b->avals[b->in[i]];
    if (want.dtype != in[i].dtype || !jx_shape_equal(want.shape, local)) {
      char a1[JX_AVAL_STR_CAP], a2[JX_AVAL_STR_CAP];
      st = jx_error_set(JX_ERR_SHAPE, "shard_map: input %d's block is %s but the body takes %s", i,
                        jx_aval_str(in[i].dtype, local, a1),
                        jx_aval_str(want.dtype, want.shape, a2));
    }
  }
  for (int o = 0; o < ctx->nout && !st; o++) {
    jx_aval a = b->avals[b->out[o]];
    out[o] = a;
    out[o].shape = jx_sharding_global_shape(s[ctx->nin + o], a.shape);
    out[o].vma = 0; /* the body's axes are bound inside it only */
    st = jx_sharding_check(s[ctx->nin + o], out[o].shape, "shard_map: an output");
  }
  free(s);
  return st;
}

/* Bodies run compiled, as under jit (control flow elsewhere is interpreted,
 * but a shard_map body is the whole per-device program, the part worth
 * compiling). Compiled here, on the calling thread, once per body: the
 * device threads then only run it. The platform's backend compiles it where
 * the mesh fits the platform's devices (one executable per mesh position,
 * collectives on the devices), else the CPU's (jx_backend_attach_body); a
 * body is always run on the mesh it was compiled for (its equation names
 * it). */
static pthread_mutex_t compile_lock = PTHREAD_MUTEX_INITIALIZER;

static jx_status ensure_compiled(jx_program *body, jx_mesh *m) {
  pthread_mutex_lock(&compile_lock);
  jx_status st = JX_OK;
  if (!jx_program_executable(body)) {
    char prefix[300], what[300];
    snprintf(prefix, sizeof prefix, "shard_map.%s.%016llx", body->name,
             (unsigned long long)jx_program_hash(body));
    snprintf(what, sizeof what, "shard_map body '%s'", body->name);
    st = jx_backend_attach_body(body, m, what, prefix);
  }
  pthread_mutex_unlock(&compile_lock);
  return st;
}

static jx_status impl_smap(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out) {
  const jx_params *p = ctx->params;
  jx_mesh *m = NULL;
  jx_sharding **s = malloc(sizeof *s * (size_t)(ctx->nin + ctx->nout + 1));
  if (!s) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "shard_map: out of memory");
  jx_status st = jx_smap_decode(p, 1, ctx->nin, &m, s);
  if (!st) st = jx_smap_decode(p, 2, ctx->nout, NULL, s + ctx->nin);
  if (!st) st = ensure_compiled(ctx->subs[0], m);
  if (!st)
    st =
        jx_spmd_run(m, ctx->subs[0], ctx->nin, in, s, ctx->nout, s + ctx->nin, out, "jx_shard_map");
  free(s);
  return st;
}

static int bind_mesh_axes(const jx_params *p) {
  return jx_smap_push_axes(jx_mesh_from_id((int)p->i[0]), jx_smap_checks_vma(p));
}

const jx_prim jx_prim_shard_map = {.name = "shard_map",
                                   .id = JX_PRIM_shard_map,
                                   .nin = JX_VARIADIC,
                                   .nout = JX_NOUT_PARAM,
                                   .params = "mesh=i0 in_shardings=i1 out_shardings=i2 nout=i3",
                                   .infer = infer_smap,
                                   .outputs = smap_outputs,
                                   .impl = impl_smap,
                                   .jvp = jx_smap_jvp,
                                   .transpose = jx_smap_transpose,
                                   .batch = jx_smap_batch,
                                   .partial_eval = jx_smap_partial_eval,
                                   .bind_sub_axes = bind_mesh_axes};

JX_REGISTER_PRIMS(shard_map, &jx_prim_shard_map)

/* ---- the public function ---- */
typedef struct {
  jx_mesh *mesh;
  int nin, nout;
  int check_vma;
  jx_sharding **sh; /* nin input shardings, then nout output shardings; references */
} smap_data;

static void free_smap_data(void *data) {
  smap_data *d = data;
  if (!d) return;
  for (int k = 0; d->sh && k < d->nin + d->nout; k++) jx_sharding_release(d->sh[k]);
  free(d->sh);
  jx_mesh_release(d->mesh);
  free(d);
}

typedef struct {
  smap_data *d;
  jx_program *body;
} bind_ctx;

static jx_status bind_body(void *ctx, jx_array *const *in, jx_array **out) {
  bind_ctx *c = ctx;
  return jx_smap_bind(c->d->mesh, c->d->nin, in, c->d->sh, c->d->nout, c->d->sh + c->d->nin,
                      c->body, c->d->check_vma, out);
}

/* The body f traced to, its outputs cast to vary over every manual axis their
 * out specs name (a block that is the same on every device, laid out over an
 * axis, is used as a varying value there: its cotangent is summed back). */
typedef struct {
  const jx_program *f;
  jx_sharding *const *out_sh;
} cast_ctx;

static jx_status body_with_casts(void *ctx, jx_array *const *in, jx_array **out) {
  cast_ctx *c = ctx;
  jx_status st = jx_program_eval(c->f, in, out);
  for (int o = 0; o < c->f->nout && !st; o++) {
    int64_t ids[JX_MAX_RANK], missing[JX_MAX_RANK];
    int n = jx_vma_axes(jx_smap_named_vma(c->out_sh[o]), ids);
    jx_params q = JX_PARAMS_INIT;
    q.l[0].n = jx_vma_missing(jx_array_vma(out[o]), n, ids, missing);
    memcpy(q.l[0].v, missing, sizeof *missing * (size_t)q.l[0].n);
    if (q.l[0].n && jx_is_tracer(out[o])) out[o] = jx_bind1(&jx_prim_pvary, 1, &out[o], &q);
  }
  return st ? st : jx_last_status();
}

/* Whether some output of f varies over fewer manual axes than its spec names. */
static int needs_casts(const jx_program *f, jx_sharding *const *out_sh) {
  for (int o = 0; o < f->nout; o++) {
    int want = jx_smap_named_vma(out_sh[o]), have = f->avals[f->out[o]].vma;
    if (jx_vma_union(have, want) != have) return 1;
  }
  return 0;
}

static jx_program *smap_build(jx_fn *f, const jx_aval *in) {
  smap_data *d = f->data;
  jx_aval *local = calloc((size_t)d->nin + 1, sizeof *local);
  if (!local) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_shard_map: out of memory");
    return NULL;
  }
  jx_status st = JX_OK;
  for (int i = 0; i < d->nin && !st; i++) {
    char op[64];
    snprintf(op, sizeof op, "jx_shard_map: input %d", i);
    st = jx_sharding_check(d->sh[i], in[i].shape, op);
    int64_t start[JX_MAX_RANK];
    local[i] = in[i];
    if (!st) jx_sharding_block(d->sh[i], in[i].shape, 0, start, &local[i].shape);
  }
  jx_program *body = NULL, *p = NULL;
  if (!st) {
    int pushed = jx_smap_push_axes(d->mesh, d->check_vma);
    for (int i = 0; i < d->nin; i++) local[i].vma = jx_smap_named_vma(d->sh[i]);
    if (pushed == d->mesh->ndim) body = jx_fn_program(f->inner, local);
    if (body && d->check_vma && needs_casts(body, d->sh + d->nin)) {
      cast_ctx c = {body, d->sh + d->nin};
      jx_program *cast = jx_program_build(body->name, d->nin, local, d->nout, body_with_casts, &c);
      jx_program_release(body);
      body = cast;
    }
    jx_smap_pop_axes(pushed);
  }
  for (int o = 0; body && o < d->nout && !st; o++) {
    jx_aval a = body->avals[body->out[o]];
    char op[64];
    snprintf(op, sizeof op, "jx_shard_map: output %d", o);
    st = jx_sharding_check(d->sh[d->nin + o], jx_sharding_global_shape(d->sh[d->nin + o], a.shape),
                           op);
  }
  if (body && !st) {
    bind_ctx c = {d, body};
    p = jx_program_build(f->name, d->nin, in, d->nout, bind_body, &c);
  }
  jx_program_release(body);
  free(local);
  return p;
}

static const jx_fn_kind smap_kind = {
    .name = "shard_map", .build = smap_build, .free_data = free_smap_data};

/* The sharding of spec on m; errors name jx_shard_map, the argument and the spec. */
static jx_sharding *parse_spec(jx_mesh *m, const char *spec, const char *what, int k) {
  if (!spec) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_shard_map: %s[%d] is NULL", what, k);
    return NULL;
  }
  jx_sharding *s = jx_sharding_create(m, spec);
  if (s) return s;
  char context[400];
  snprintf(context, sizeof context, "jx_shard_map: %s %d ('%s')",
           what[0] == 'i' ? "input" : "output", k, spec);
  jx_sharding_restate_error(context);
  return NULL;
}

jx_fn *jx_shard_map(jx_fn *f, jx_mesh *m, const char *const *in_specs,
                    const char *const *out_specs) {
  return jx_shard_map_ex(f, m, in_specs, out_specs, NULL);
}

jx_fn *jx_shard_map_ex(jx_fn *f, jx_mesh *m, const char *const *in_specs,
                       const char *const *out_specs, const jx_shard_map_options *opts) {
  if (!f || !m) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_shard_map: the %s is NULL", f ? "mesh" : "function");
    return NULL;
  }
  if ((f->nin > 0 && !in_specs) || !out_specs) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_shard_map: %s is NULL for '%s'",
                 out_specs ? "in_specs" : "out_specs", f->name);
    return NULL;
  }
  smap_data *d = calloc(1, sizeof *d);
  if (d) d->sh = calloc((size_t)(f->nin + f->nout) + 1, sizeof *d->sh);
  if (!d || !d->sh) {
    free(d);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_shard_map: out of memory");
    return NULL;
  }
  d->mesh = jx_mesh_retain(m);
  d->check_vma = !(opts && opts->no_check_vma);
  d->nin = f->nin;
  d->nout = f->nout;
  int ok = 1;
  for (int i = 0; i < f->nin && ok; i++)
    ok = (d->sh[i] = parse_spec(m, in_specs[i], "in_specs", i)) != NULL;
  for (int o = 0; o < f->nout && ok; o++)
    ok = (d->sh[f->nin + o] = parse_spec(m, out_specs[o], "out_specs", o)) != NULL;
  if (!ok) {
    free_smap_data(d);
    return NULL;
  }
  return jx_fn_new_transform(&smap_kind, f, f->nin, f->nout, d);
}
