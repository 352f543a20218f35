/* jx_jit with shardings (pjit). The jitted function's program is the global
 * program, simplified: what transformations see (grad or vmap of a sharded
 * jit trace it; jit-with-shardings of grad(f) partitions the gradient's
 * program). Its attached executable, run on concrete arguments, looks at the
 * arguments' shardings (or in_shardings), propagates layouts through the
 * program (propagate.c), partitions it into one per-device program
 * (partition.c), compiles that for the platform's devices (the backend's
 * mesh_attach, compile/backend.h), and runs it on every device of the mesh
 * (jx_spmd_run). Per-device programs are cached by the tuple of input
 * shardings; JX_LOG_COMPILES=1 says why one is made. JX_AUTO entries are
 * planned when the function is built for an input signature (auto/plan.h)
 * and replaced by the plan's layouts in that build's copy of the options, so
 * the plan lives as long as the program it was made for. */
#include "sharded_jit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../array/array.h"
#include "../base/env.h"
#include "../base/error.h"
#include "../compile/backend.h"
#include "../compile/lower.h"
#include "../compile/simplify.h"
#include "../ir/exec.h"
#include "../trace/fn.h"
#include "auto/machine_model.h"
#include "auto/plan_cache.h"
#include "auto/report.h"
#include "collective.h"
#include "constraint.h"
#include "partition.h"
#include "shard_map.h"
#include "spmd.h"

typedef struct {
  int nin, nout;
  jx_sharding **in_sh;  /* NULL, or nin entries (NULL entries: as given) */
  jx_sharding **out_sh; /* NULL, or nout entries (NULL entries: propagation's choice) */
  jx_mesh *mesh;        /* JX_AUTO's mesh: the entries', else the options' (a reference) */
  int64_t memory_limit; /* JX_AUTO's bytes per device, 0: none */
  int *donate;          /* NULL, or nin entries: the donated inputs (JX_AUTO's aliases) */
} pjit_opts;

/* JX_AUTO: a marker no sharding is, never retained or released. */
static jx_sharding auto_marker;

jx_sharding *jx_sharding_auto(void) { return &auto_marker; }

static int is_auto(const jx_sharding *s) { return s == &auto_marker; }

static int has_auto(const pjit_opts *o) {
  for (int i = 0; o->in_sh && i < o->nin; i++)
    if (is_auto(o->in_sh[i])) return 1;
  for (int i = 0; o->out_sh && i < o->nout; i++)
    if (is_auto(o->out_sh[i])) return 1;
  return 0;
}

static jx_sharding *retain_entry(jx_sharding *s) { return is_auto(s) ? s : jx_sharding_retain(s); }

static void release_entry(jx_sharding *s) {
  if (!is_auto(s)) jx_sharding_release(s);
}

typedef struct entry {
  int *key;             /* per input: the sharding id it came with, 0 for none */
  jx_sharding **in_sh;  /* per input: the layout the device program reads */
  jx_sharding **out_sh; /* per output: the layout it gives */
  jx_program *prog;     /* compiled per-device program */
  struct entry *next;
} entry;

typedef struct {
  pjit_opts o; /* a copy with its own references */
  char *name;
  const char *op;       /* for errors: "jx_jit", or the eager op's primitive */
  int interpret;        /* the per-device programs run uncompiled (eager ops on sharded arrays) */
  jx_mesh *manual_mesh; /* follow data: the mesh of the program's shard_maps, NULL for none */
  int unplaced;         /* follow data: shard_maps the partitioner does not place (nested in control
                           flow, or over several meshes): the program runs on one device */
  pthread_mutex_t lock;
  entry *cache;
  int64_t partitions;
  /* a planned build (JX_AUTO): the program planned and partitioned (the
   * global one with its custom calls inlined, so relu's layouts are
   * elementwise), and the plan's layout of each of its variables */
  jx_program *planned;
  jx_pspec *plan_spec;
  double plan_gap, plan_time_limit_s; /* how its search ended (jx_auto_plan's) */
  int plan_stopped;
} pjit_exec;

static jx_status pjit_run(void *exec, const jx_program *p, jx_array *const *in, jx_array **out);
static void pjit_exec_free(void *exec);

/* ---- options ---- */
static void opts_free(pjit_opts *o) {
  for (int i = 0; o->in_sh && i < o->nin; i++) release_entry(o->in_sh[i]);
  for (int i = 0; o->out_sh && i < o->nout; i++) release_entry(o->out_sh[i]);
  free(o->in_sh);
  free(o->out_sh);
  free(o->donate);
  o->in_sh = o->out_sh = NULL;
  o->donate = NULL;
  if (o->mesh) jx_mesh_release(o->mesh);
  o->mesh = NULL;
}

static int opts_copy(pjit_opts *dst, const pjit_opts *src) {
  *dst = (pjit_opts){src->nin, src->nout, NULL, NULL, NULL, src->memory_limit, NULL};
  if (src->mesh) dst->mesh = jx_mesh_retain(src->mesh);
  if (src->donate) {
    dst->donate = malloc(sizeof *dst->donate * ((size_t)src->nin + 1));
    if (!dst->donate) return 0;
    memcpy(dst->donate, src->donate, sizeof *dst->donate * (size_t)src->nin);
  }
  if (src->in_sh) {
    dst->in_sh = calloc((size_t)src->nin + 1, sizeof *dst->in_sh);
    if (!dst->in_sh) return 0;
    for (int i = 0; i < src->nin; i++) dst->in_sh[i] = retain_entry(src->in_sh[i]);
  }
  if (src->out_sh) {
    dst->out_sh = calloc((size_t)src->nout + 1, sizeof *dst->out_sh);
    if (!dst->out_sh) return 0;
    for (int i = 0; i < src->nout; i++) dst->out_sh[i] = retain_entry(src->out_sh[i]);
  }
  return 1;
}

static void free_data(void *d) {
  if (!d) return;
  opts_free(d);
  free(d);
}
static const char *sharding_text(const jx_sharding *s) {
  return !s ? "unsharded" : s->spec[0] ? s->spec : "replicated";
}

/* Checks that the given shardings share one mesh; *m receives it. Errors
 * name op. */
static jx_status same_mesh(const char *op, const char *what, jx_sharding *const *sh, int n,
                           jx_mesh **m, const char **m_what, int *m_at) {
  char a[512], b[512];
  for (int i = 0; sh && i < n; i++) {
    if (!sh[i] || is_auto(sh[i])) continue;
    if (!*m) {
      *m = sh[i]->mesh;
      *m_what = what;
      *m_at = i;
    } else if (sh[i]->mesh != *m) {
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: shardings on different meshes: %s[%d] is on the mesh (%s) but "
                          "%s[%d] on the mesh (%s)",
                          op, *m_what, *m_at, jx_mesh_text(*m, 1, a, sizeof a), what, i,
                          jx_mesh_text(sh[i]->mesh, 1, b, sizeof b));
    }
  }
  return JX_OK;
}

/* ---- building: the global program with the sharded executable attached ---- */

/* A JX_AUTO sharding constraint in p. */
static int holds_auto_constraint(const jx_program *p) {
  for (int k = 0; k < p->neqns; k++)
    if (p->eqns[k].prim == &jx_prim_sharding_constraint && !jx_constraint_sharding(&p->eqns[k]))
      return 1;
  return 0;
}

/* Per output of p (a new array, NULL when out of memory): the donated
 * input it is given back for, -1 none. A donated input's buffer goes to the
 * first output of its type that no input before took (JAX's pairing); such
 * an output, when JX_AUTO, takes the input's planned layout, so that a
 * training loop feeds it to the next call as it is (plan.h's aliases). */
static int *donation_aliases(const pjit_opts *o, const jx_program *p) {
  int *alias = malloc(sizeof *alias * ((size_t)p->nout + 1));
  uint8_t *taken = calloc((size_t)p->nout + 1, 1);
  for (int k = 0; alias && k < p->nout; k++) alias[k] = -1;
  for (int i = 0; alias && taken && o->donate && i < p->nin; i++) {
    if (!o->donate[i]) continue;
    jx_aval a = p->avals[p->in[i]], *b = NULL;
    int k = 0;
    for (; k < p->nout; k++) {
      b = &p->avals[p->out[k]];
      if (!taken[k] && b->dtype == a.dtype && jx_shape_equal(b->shape, a.shape)) break;
    }
    if (k == p->nout) continue;
    taken[k] = 1;
    if (o->out_sh && is_auto(o->out_sh[k])) alias[k] = i;
  }
  if (!taken) {
    free(alias);
    alias = NULL;
  }
  free(taken);
  return alias;
}

/* Plans x's program s for its JX_AUTO entries and constraints with the
 * mesh's figures (auto/report.h's jx_plan_figures), under the options' memory
 * limit or else the device's memory: every JX_AUTO entry takes the plan's
 * layout, and the plan's layout of every variable is kept for the
 * partitioner (x->plan_spec over x->planned). */
static jx_status plan_auto(pjit_exec *x, const jx_program *s) {
  pjit_opts *o = &x->o;
  const char *name = x->name;
  if (!o->mesh)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_jit: '%s' holds a JX_AUTO sharding constraint but no sharding names a "
                        "mesh and the options' mesh is NULL",
                        name);
  jx_program *p = x->planned = jx_lower_custom_calls(s);
  if (!p) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_comm_model cm;
  jx_plan_figures(&cm, o->mesh);
  double limit = o->memory_limit > 0 ? (double)o->memory_limit : jx_device_memory_default(o->mesh);
  /* inputs without a JX_AUTO entry keep theirs (none: replicated) */
  jx_pspec *given = calloc((size_t)p->nin + 1, sizeof *given);
  const jx_pspec **fixed = calloc((size_t)p->nin + 1, sizeof *fixed);
  if (!given || !fixed) {
    free(given);
    free(fixed);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory");
  }
  for (int i = 0; i < p->nin; i++) {
    jx_sharding *e = o->in_sh ? o->in_sh[i] : NULL;
    if (is_auto(e)) continue;
    given[i] = jx_pspec_of(e, p->avals[p->in[i]].shape.rank);
    fixed[i] = &given[i];
  }
  int *alias = donation_aliases(o, p);
  jx_auto_plan plan;
  jx_status st = alias ? jx_auto_plan_cached(&cm, o->mesh, p, fixed, alias, limit, &plan)
                       : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory");
  free(given);
  free(fixed);
  if (st) {
    free(alias);
    return st;
  }
  int log = jx_env_flag("JX_LOG_COMPILES");
  char mesh[512], spec[JX_SPEC_CAP];
  if (log)
    fprintf(stderr, "jx: planned '%s' on the mesh (%s):", name,
            jx_mesh_text(o->mesh, 1, mesh, sizeof mesh));
  for (int i = 0; o->in_sh && i < o->nin && !st; i++) {
    if (!is_auto(o->in_sh[i])) continue;
    o->in_sh[i] = jx_pspec_sharding(o->mesh, &plan.in_spec[i]);
    if (!o->in_sh[i]) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
    if (log && !st)
      fprintf(stderr, " input %d %s;", i, jx_pspec_str(o->mesh, &plan.in_spec[i], spec));
  }
  for (int i = 0; o->out_sh && i < o->nout && !st; i++) {
    if (!is_auto(o->out_sh[i])) continue;
    const jx_pspec *given_back = alias[i] >= 0 ? &plan.in_spec[alias[i]] : &plan.spec[p->out[i]];
    o->out_sh[i] = jx_pspec_sharding(o->mesh, given_back);
    if (!o->out_sh[i]) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
    if (log && !st) fprintf(stderr, " output %d %s;", i, jx_pspec_str(o->mesh, given_back, spec));
  }
  free(alias);
  x->plan_spec = plan.spec;
  x->plan_gap = plan.gap;
  x->plan_stopped = plan.stopped;
  x->plan_time_limit_s = plan.time_limit_s;
  plan.spec = NULL;
  if (log)
    fprintf(stderr, " estimated %.3g s per step, %.0f bytes per device\n", plan.time_s,
            plan.peak_bytes);
  jx_auto_plan_free(&plan);
  return st;
}
static jx_program *pjit_build(jx_fn *f, const jx_aval *in) {
  const pjit_opts *o = f->data;
  jx_program *p = jx_fn_program(f->inner, in);
  if (!p) return NULL;
  jx_program *s = jx_simplify(p);
  jx_program_release(p);
  if (!s) return NULL;
  jx_status st = JX_OK;
  char what[64];
  for (int i = 0; o->in_sh && i < o->nin && !st; i++)
    if (o->in_sh[i] && !is_auto(o->in_sh[i])) {
      snprintf(what, sizeof what, "jx_jit: in_shardings[%d]", i);
      st = jx_sharding_check(o->in_sh[i], in[i].shape, what);
    }
  for (int i = 0; o->out_sh && i < o->nout && !st; i++)
    if (o->out_sh[i] && !is_auto(o->out_sh[i])) {
      snprintf(what, sizeof what, "jx_jit: out_shardings[%d]", i);
      st = jx_sharding_check(o->out_sh[i], s->avals[s->out[i]].shape, what);
    }
  pjit_exec *x = st ? NULL : calloc(1, sizeof *x);
  if (!st && (!x || !opts_copy(&x->o, o) || !(x->name = strdup(f->name)))) {
    if (x) {
      opts_free(&x->o);
      free(x);
      x = NULL;
    }
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory");
  }
  if (!st && (has_auto(&x->o) || holds_auto_constraint(s))) st = plan_auto(x, s);
  if (st) {
    if (x) {
      opts_free(&x->o);
      jx_program_release(x->planned);
      free(x->plan_spec);
      free(x->name);
      free(x);
    }
    jx_program_release(s);
    return NULL;
  }
  x->op = "jx_jit";
  pthread_mutex_init(&x->lock, NULL);
  jx_program_attach(s, (jx_exec){x, pjit_run, pjit_exec_free});
  return s;
}

static void pjit_exec_free(void *exec) {
  pjit_exec *x = exec;
  for (entry *e = x->cache, *next; e; e = next) {
    next = e->next;
    for (int i = 0; i < x->o.nin; i++) jx_sharding_release(e->in_sh[i]);
    for (int i = 0; i < x->o.nout; i++) jx_sharding_release(e->out_sh[i]);
    free(e->key);
    free(e->in_sh);
    free(e->out_sh);
    jx_program_release(e->prog);
    free(e);
  }
  opts_free(&x->o);
  jx_program_release(x->planned);
  free(x->plan_spec);
  pthread_mutex_destroy(&x->lock);
  free(x->name);
  free(x);
}

static const jx_fn_kind pjit_kind = {.name = "jit", .build = pjit_build, .free_data = free_data};

jx_fn *jx_jit_sharded(jx_fn *f, const jx_jit_options *opts) {
  pjit_opts given = {f->nin,
                     f->nout,
                     (jx_sharding **)opts->in_shardings,
                     (jx_sharding **)opts->out_shardings,
                     NULL,
                     opts->memory_limit,
                     (int *)opts->donate};
  jx_mesh *m = NULL, *mo = NULL;
  const char *mw = NULL, *mwo = NULL;
  int at = 0, ato = 0;
  if (same_mesh("jx_jit", "in_shardings", given.in_sh, f->nin, &m, &mw, &at) ||
      same_mesh("jx_jit", "out_shardings", given.out_sh, f->nout, &mo, &mwo, &ato))
    return NULL;
  if (m && mo && m != mo) {
    char a[512], b[512];
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_jit: in_shardings are on the mesh (%s) but out_shardings on the mesh (%s); "
                 "one jit runs on one mesh",
                 jx_mesh_text(m, 1, a, sizeof a), jx_mesh_text(mo, 1, b, sizeof b));
    return NULL;
  }
  given.mesh = m ? m : mo ? mo : opts->mesh;
  if (has_auto(&given) && !given.mesh) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_jit: '%s' asks for JX_AUTO layouts but no other sharding names a mesh and "
                 "the options' mesh is NULL",
                 f->name);
    return NULL;
  }
  if (given.memory_limit < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_jit: memory_limit of '%s' is %lld bytes; it must be positive, or 0 for none",
                 f->name, (long long)given.memory_limit);
    return NULL;
  }
  pjit_opts *data = calloc(1, sizeof *data);
  if (!data || !opts_copy(data, &given)) {
    free_data(data);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory");
    return NULL;
  }
  return jx_fn_new_transform(&pjit_kind, f, f->nin, f->nout, data);
}

/* ---- running ---- */

static void log_partition(const pjit_exec *x, jx_sharding *const *sh) {
  if (!jx_env_flag("JX_LOG_COMPILES")) return;
  fprintf(stderr, "jx: partitioning '%s' for input shardings (", x->name);
  for (int i = 0; i < x->o.nin; i++) fprintf(stderr, "%s%s", i ? "; " : "", sharding_text(sh[i]));
  fprintf(stderr, ")");
  if (!x->cache) {
    fprintf(stderr, ": first call\n");
    return;
  }
  const entry *prev = x->cache;
  for (int i = 0; i < x->o.nin; i++)
    if (prev->key[i] != (sh[i] ? sh[i]->id : 0)) {
      fprintf(stderr, ": input %d's sharding changed from %s to %s", i,
              sharding_text(prev->key[i] ? jx_sharding_from_id(prev->key[i]) : NULL),
              sharding_text(sh[i]));
      break;
    }
  fprintf(stderr, "\n");
}

/* Whether the arguments laid out by sh are as x's plan has them. */
static int as_planned(const pjit_exec *x, jx_sharding *const *sh) {
  const jx_program *p = x->planned;
  for (int i = 0; i < p->nin; i++) {
    jx_pspec a = jx_pspec_of(sh[i], p->avals[p->in[i]].shape.rank);
    if (!jx_pspec_equal(&a, &x->plan_spec[p->in[i]])) return 0;
  }
  return 1;
}

/* The layout of every variable of p (spec, p->nvars entries, then p->nout
 * for the outputs as given back) for arguments laid out by sh: the plan's
 * when x is planned and the arguments come as planned, else
 * propagation's. */
static jx_status layouts_for(const pjit_exec *x, const jx_program *p, jx_mesh *m,
                             jx_sharding *const *sh, jx_pspec *spec) {
  jx_status st = JX_OK;
  if (x->plan_spec && m == x->o.mesh && as_planned(x, sh))
    memcpy(spec, x->plan_spec, sizeof *spec * (size_t)p->nvars);
  else
    st = jx_propagate(m, p, sh, x->o.out_sh, spec);
  for (int o = 0; o < p->nout && !st; o++) {
    jx_sharding *want = x->o.out_sh ? x->o.out_sh[o] : NULL;
    spec[p->nvars + o] = want ? jx_pspec_of(want, p->avals[p->out[o]].shape.rank) : spec[p->out[o]];
  }
  return st;
}

/* The per-device program for arguments laid out by sh (made on a miss;
 * x->lock held). */
static entry *partition_for(pjit_exec *x, const jx_program *p, jx_mesh *m, jx_sharding *const *sh) {
  if (x->planned) p = x->planned;
  for (entry *e = x->cache; e; e = e->next) {
    int hit = 1;
    for (int i = 0; i < x->o.nin && hit; i++) hit = e->key[i] == (sh[i] ? sh[i]->id : 0);
    if (hit) return e;
  }
  log_partition(x, sh);
  jx_pspec *spec = malloc(sizeof *spec * (size_t)(p->nvars + p->nout + 1));
  entry *e = calloc(1, sizeof *e);
  if (e) {
    e->key = calloc((size_t)x->o.nin + 1, sizeof *e->key);
    e->in_sh = calloc((size_t)x->o.nin + 1, sizeof *e->in_sh);
    e->out_sh = calloc((size_t)x->o.nout + 1, sizeof *e->out_sh);
  }
  jx_status st = JX_OK;
  if (!spec || !e || !e->key || !e->in_sh || !e->out_sh)
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory");
  if (!st) st = layouts_for(x, p, m, sh, spec);
  jx_pspec *out_spec = spec ? spec + p->nvars : NULL;
  for (int o = 0; o < p->nout && !st; o++) {
    e->out_sh[o] = jx_pspec_sharding(m, &out_spec[o]);
    if (!e->out_sh[o]) st = jx_last_status();
  }
  for (int i = 0; i < p->nin && !st; i++) {
    e->key[i] = sh[i] ? sh[i]->id : 0;
    e->in_sh[i] = jx_pspec_sharding(m, &spec[p->in[i]]);
    if (!e->in_sh[i]) st = jx_last_status();
  }
  jx_program *d = st ? NULL : jx_partition(m, p, spec, out_spec);
  if (!st && !d) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  if (!st) {
    e->prog = jx_simplify(d);
    if (!e->prog) st = jx_last_status();
  }
  jx_program_release(d);
  if (!st && x->planned && jx_env_flag("JX_LOG_SHARDING")) {
    jx_comm_model cm;
    jx_plan_figures(&cm, m);
    jx_sharded_view v = {(jx_program *)p,
                         spec,
                         e->prog,
                         m,
                         x->plan_spec && as_planned(x, sh),
                         x->plan_gap,
                         x->plan_stopped,
                         x->plan_time_limit_s};
    jx_sharding_report(stderr, x->name, &v, &cm);
  }
  if (!st) {
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s.spmd.%016llx", x->name,
             (unsigned long long)jx_program_hash(e->prog));
    /* the platform's executables, one per mesh position (backend.h) */
    if (!x->interpret) st = jx_backend_attach_mesh(e->prog, m, x->name, prefix);
  }
  free(spec);
  if (st) {
    if (e) {
      for (int i = 0; e->in_sh && i < x->o.nin; i++) jx_sharding_release(e->in_sh[i]);
      for (int i = 0; e->out_sh && i < x->o.nout; i++) jx_sharding_release(e->out_sh[i]);
      jx_program_release(e->prog);
      free(e->key);
      free(e->in_sh);
      free(e->out_sh);
      free(e);
    }
    return NULL;
  }
  e->next = x->cache;
  x->cache = e;
  x->partitions++;
  return e;
}

/* The layout of each argument (in_shardings, else its own) and the mesh. */
static jx_status resolve(const pjit_exec *x, jx_array *const *in, jx_sharding **sh, jx_mesh **m) {
  for (int i = 0; i < x->o.nin; i++) {
    sh[i] = x->o.in_sh ? x->o.in_sh[i] : NULL;
    if (!sh[i]) sh[i] = jx_sharding_of(in[i]);
  }
  const char *w = NULL;
  int at = 0;
  *m = NULL;
  jx_status st = same_mesh(x->op, "input", sh, x->o.nin, m, &w, &at);
  if (!st) st = same_mesh(x->op, "out_shardings", x->o.out_sh, x->o.nout, m, &w, &at);
  if (!st && !*m)
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "jx_jit: no sharding names a mesh (no in_shardings, out_shardings or "
                      "sharded argument)");
  return st;
}

static jx_status pjit_run(void *exec, const jx_program *p, jx_array *const *in, jx_array **out) {
  pjit_exec *x = exec;
  jx_sharding **sh = calloc((size_t)x->o.nin + 1, sizeof *sh);
  if (!sh) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory");
  jx_mesh *m = NULL;
  jx_status st = resolve(x, in, sh, &m);
  entry *e = NULL;
  if (!st) {
    pthread_mutex_lock(&x->lock);
    e = partition_for(x, p, m, sh);
    pthread_mutex_unlock(&x->lock);
    if (!e) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  free(sh);
  if (st) return st;
  return jx_spmd_run(m, e->prog, x->o.nin, in, e->in_sh, x->o.nout, e->out_sh, out, x->op);
}

/* ---- computation follows data ---- */

/* Guards the making of a program's follow-data executable (jx_program_follow). */
static pthread_mutex_t follow_lock = PTHREAD_MUTEX_INITIALIZER;

int jx_program_holds_shard_map(const jx_program *p) {
  for (int k = 0; k < p->neqns; k++) {
    const jx_eqn *e = &p->eqns[k];
    if (e->prim == &jx_prim_shard_map) return 1;
    for (int s = 0; s < e->nsub; s++)
      if (jx_program_holds_shard_map(e->sub[s])) return 1;
  }
  return 0;
}

/* The mesh of p's shard_map equations (NULL: none); *unplaced: some are
 * nested in other equations' programs or they are over several meshes. */
static jx_mesh *manual_mesh(const jx_program *p, int *unplaced) {
  jx_mesh *m = NULL;
  for (int k = 0; k < p->neqns; k++) {
    const jx_eqn *e = &p->eqns[k];
    for (int s = 0; s < e->nsub; s++) *unplaced |= jx_program_holds_shard_map(e->sub[s]);
    if (e->prim != &jx_prim_shard_map) continue;
    jx_mesh *here = jx_mesh_from_id((int)e->params.i[0]);
    if (m && here != m) *unplaced = 1;
    m = here;
  }
  return m;
}

/* p's sharded executable without shardings of its own (made once, *made
 * set then; NULL with an error when memory runs out). A program that is not
 * compiled gets per-device programs that are not compiled either. */
static pjit_exec *follow_exec(const jx_program *p, int *made) {
  pthread_mutex_lock(&follow_lock);
  pjit_exec *x = jx_program_follow(p);
  if (!x) {
    *made = 1;
    int compiled = jx_program_exec(p).run != NULL;
    x = calloc(1, sizeof *x);
    /* named as messages name a jitted function, or as the eager op */
    char name[300];
    snprintf(name, sizeof name, compiled ? "jit(%s)" : "%s", p->name);
    if (x && !(x->name = strdup(name))) {
      free(x);
      x = NULL;
    }
    if (x) {
      x->o = (pjit_opts){p->nin, p->nout, NULL, NULL, NULL, 0, NULL};
      x->interpret = !compiled;
      x->op = x->interpret ? x->name : "jx_jit";
      x->manual_mesh = manual_mesh(p, &x->unplaced);
      pthread_mutex_init(&x->lock, NULL);
      /* kept beside the program, as f->cache is kept with f */
      x = jx_program_set_follow(p, x, pjit_exec_free);
    }
  }
  pthread_mutex_unlock(&follow_lock);
  if (!x) jx_error_set(JX_ERR_OUT_OF_MEMORY, "'%s': out of memory", p->name);
  return x;
}

int jx_follows_data(const jx_program *p, jx_array *const *in) {
  /* a jit with shardings places its arguments itself; on a device's thread
   * the arguments are that device's blocks */
  if (jx_program_exec(p).run == pjit_run || jx_spmd_current()) return 0;
  int sharded = 0;
  for (int i = 0; i < p->nin && !sharded; i++) sharded = jx_array_shards(in[i]) != NULL;
  if (!sharded) return 0;
  int made = 0;
  pjit_exec *x = follow_exec(p, &made);
  if (!x) return 1; /* the run reports it */
  /* a program whose shard_maps the partitioner cannot place (nested ones,
   * several meshes, another mesh than the arguments') runs on one device,
   * reading its sharded arguments whole where its kernels read them */
  jx_mesh *args_mesh = NULL;
  for (int i = 0; i < p->nin && !args_mesh; i++)
    if (jx_array_shards(in[i])) args_mesh = jx_sharding_of(in[i])->mesh;
  int whole = x->unplaced || (x->manual_mesh && x->manual_mesh != args_mesh);
  if (whole && made && jx_env_flag("JX_LOG_COMPILES"))
    for (int i = 0; i < p->nin; i++)
      if (jx_array_shards(in[i]))
        fprintf(stderr,
                "jx: '%s' holds a shard_map the sharded jit cannot place%s, so it runs on one "
                "device: it gathers argument %d (sharded %s) where it reads it whole\n",
                x->name, x->unplaced ? " (nested, or over several meshes)" : " on this mesh", i,
                sharding_text(jx_sharding_of(in[i])));
  return !whole;
}

jx_status jx_follow_data_run(const jx_program *p, jx_array *const *in, jx_array **out) {
  for (int o = 0; o < p->nout; o++) out[o] = jx_poison();
  int made = 0;
  pjit_exec *x = follow_exec(p, &made);
  return x ? pjit_run(x, p, in, out) : jx_last_status();
}

/* ---- for tests ---- */
static pjit_exec *exec_of(const jx_program *p) {
  if (!p) return NULL;
  jx_exec own = jx_program_exec(p);
  return own.run == pjit_run ? own.impl : jx_program_follow(p);
}

jx_program *jx_sharded_jit_device_program(jx_fn *f, jx_array *const *in) {
  jx_aval *av = malloc(sizeof *av * (size_t)(f->nin + 1));
  jx_sharding **sh = calloc((size_t)f->nin + 1, sizeof *sh);
  jx_program *prog = NULL;
  if (av && sh) {
    for (int i = 0; i < f->nin; i++) av[i] = (jx_aval){in[i]->dtype, in[i]->weak, in[i]->shape, 0};
    jx_program *p = jx_fn_program(f, av);
    pjit_exec *x = exec_of(p);
    jx_mesh *m = NULL;
    if (p && !x)
      jx_error_set(JX_ERR_INVALID_ARGUMENT,
                   "'%s' is not a jit with shardings, nor called with sharded arguments", f->name);
    if (x && !resolve(x, in, sh, &m)) {
      pthread_mutex_lock(&x->lock);
      entry *e = partition_for(x, p, m, sh);
      if (e) prog = jx_program_retain(e->prog);
      pthread_mutex_unlock(&x->lock);
    }
    jx_program_release(p);
  }
  free(av);
  free(sh);
  return prog;
}

jx_sharding *jx_sharded_jit_in_layout(jx_fn *f, const jx_aval *in, int i) {
  jx_program *p = jx_fn_program(f, in);
  jx_exec own = p ? jx_program_exec(p) : (jx_exec){0};
  jx_sharding *s = NULL;
  if (p && own.run != pjit_run)
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "'%s' is not a jit with shardings", f->name);
  else if (p) {
    const pjit_exec *x = own.impl;
    s = x->o.in_sh && x->o.in_sh[i] ? jx_sharding_retain(x->o.in_sh[i]) : NULL;
  }
  jx_program_release(p);
  return s;
}

jx_status jx_sharded_jit_view(jx_fn *f, const jx_aval *in, jx_sharded_view *out) {
  memset(out, 0, sizeof *out);
  jx_program *p = jx_fn_program(f, in);
  if (!p) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_exec own = jx_program_exec(p);
  jx_status st = JX_OK;
  if (own.run != pjit_run)
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT, "'%s' is not a jit with shardings", jx_fn_name(f));
  const pjit_exec *x = st ? NULL : own.impl;
  const jx_program *q = x && x->planned ? x->planned : p;
  jx_sharding **sh = calloc((size_t)p->nin + 1, sizeof *sh);
  jx_pspec *spec = malloc(sizeof *spec * (size_t)(q->nvars + q->nout + 1));
  if (!st && (!sh || !spec)) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory");
  for (int i = 0; !st && x->o.in_sh && i < p->nin; i++) sh[i] = x->o.in_sh[i];
  if (!st) st = layouts_for(x, q, x->o.mesh, sh, spec);
  jx_program *d = st ? NULL : jx_partition(x->o.mesh, q, spec, spec + q->nvars);
  if (!st && !d) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  if (!st && !(out->device = jx_simplify(d))) st = jx_last_status();
  jx_program_release(d);
  free(sh);
  if (!st) {
    out->global = jx_program_retain((jx_program *)q);
    out->spec = spec;
    out->mesh = x->o.mesh;
    out->planned = x->planned != NULL;
    out->plan_gap = x->plan_gap;
    out->plan_stopped = x->plan_stopped;
    out->plan_time_limit_s = x->plan_time_limit_s;
  } else {
    free(spec);
    jx_sharded_view_free(out);
  }
  jx_program_release(p);
  return st;
}

void jx_sharded_view_free(jx_sharded_view *v) {
  jx_program_release(v->device);
  jx_program_release(v->global);
  free(v->spec);
  memset(v, 0, sizeof *v);
}

char *jx_sharded_jit_device_text(jx_fn *f, jx_array *const *in) {
  jx_program *p = jx_sharded_jit_device_program(f, in);
  char *text = p ? jx_program_print(p) : NULL;
  jx_program_release(p);
  return text;
}

int64_t jx_sharded_jit_partitions(jx_fn *f) {
  int64_t n = 0;
  pthread_mutex_lock(&f->lock);
  for (fn_cache_entry *c = f->cache; c; c = c->next) {
    pjit_exec *x = exec_of(c->prog);
    if (!x) continue;
    pthread_mutex_lock(&x->lock);
    n += x->partitions;
    pthread_mutex_unlock(&x->lock);
  }
  pthread_mutex_unlock(&f->lock);
  return n;
}
