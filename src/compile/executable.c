#include "executable.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../base/hash.h"
#include "../base/threadpool.h"
#include "../base/memstats.h"
#include "../base/spin.h"
#include "../base/hooks.h"
#include "async_collective.h"
#include "../prims/dot_kernels.h"
#include "../prims/pairwise_split.h"
#include "../trace/dispatch.h"
#include "../trace/trace.h"
#include "async_dispatch.h"
#include "attention_call.h"
#include "control_compile.h"
#include "cost.h"
#include "dump.h"
#include "fusion.h"
#include "kernel_batch.h"
#include "kernel_units.h"
#include "lower.h"
#include "render.h"
#include "render_c.h"
#include "toolchain.h"

typedef struct {
  jx_fusion_group group; /* kernel steps: what to load and store */
  jx_kernel_fn fn;       /* NULL: run equations [first, first + count) one by one */
  uint8_t with_next;     /* a GEMM run side by side with the next step's (pair_gemms) */
  uint8_t attention;     /* an attention call run as a fused kernel (attention_call.h: 1-3) */
  uint8_t epilogue;      /* a GEMM that runs the next step's kernel as its epilogue */
  int epi_bias, epi_resid, epi_out; /* its bias and residual variables (-1: none), its result */
} step;

/* JX_PROFILE_STEPS: a step's time, summed over runs: its wall time and the
 * CPU time of the thread that ran it (a device's own work where devices
 * time-share the cores and wall time counts the others' turns too; work a
 * step hands to the pool's threads is not in it), in nanoseconds. The
 * devices of a mesh run one executable at once, so the sums are atomic. */
typedef struct {
  atomic_llong wall_ns, cpu_ns;
} step_time;

struct jx_executable {
  int nsteps;
  step *steps;
  int *last_step;     /* per variable: the last step that reads it (-1: none; nsteps: an output) */
  uint8_t *temporary; /* per variable: produced by a step (not an input or constant) */
  step_time *profile; /* JX_PROFILE_STEPS: per step (else NULL) */
  atomic_int runs;    /* ... profiled */
  char (*labels)[96]; /* per step, for the profile's report */
  char name[64];
  /* per step, for the profiler (debug/): a name and the cost model's flops and bytes */
  char (*step_names)[80];
  double *step_flops, *step_bytes;
  jx_prof_estimate peak_estimate; /* the profiler's, kept from its first profiled run */
  /* jx_jit_options.donate: per input, 1 = the run may take its buffer */
  uint8_t *donate;
  uint8_t *warned; /* per input: the "not usable" line was logged */
  char *donor;     /* the jitted function's name, for messages */
  /* 1: never dispatched asynchronously (async_dispatch.c): it has a side
   * effect (a debug print, which the call's caller expects to see done) or
   * a shard_map, whose result keeps its layout only on the calling thread */
  int synchronous;
  /* jx_compile_attach: the lowered copy of the attached program that the
   * steps were built from and run (lower.h), or NULL: the program itself */
  jx_program *lowered;
  const jx_program *attached; /* the program it is attached to (jx_call runs that one) */
  /* the compiled nested programs of its control flow (control_compile.h),
   * found by jx_program_eval while it runs */
  jx_exec_nested nested;
  /* the kernels' final tier, still to come (kernel_units.h), or NULL */
  jx_kernel_units *tiers;
};

int jx_executable_kernels(const jx_executable *x, int *fused_eqns) {
  int n = 0, e = 0;
  for (int s = 0; s < x->nsteps; s++)
    if (x->steps[s].fn) {
      n++;
      e += x->steps[s].group.count;
    }
  if (fused_eqns) *fused_eqns = e;
  return n;
}

int jx_executable_distinct_kernels(const jx_executable *x) {
  int n = 0;
  for (int s = 0; s < x->nsteps; s++) {
    int seen = !x->steps[s].fn;
    for (int t = 0; t < s && !seen; t++) seen = x->steps[t].fn == x->steps[s].fn;
    n += !seen;
  }
  return n;
}

int jx_executable_final_tier(const jx_executable *x) {
  return !x->tiers || jx_kernel_units_ready(x->tiers);
}

int jx_executable_epilogues(const jx_executable *x) {
  int n = 0;
  for (int s = 0; s < x->nsteps; s++) n += x->steps[s].epilogue;
  return n;
}

int jx_executable_side_by_side(const jx_executable *x) {
  int n = 0;
  for (int s = 0; s < x->nsteps; s++) n += x->steps[s].with_next;
  return n;
}

/* Calls fn(x, v, k) for every variable step k reads as an array: a kernel's
 * loads, or the inputs of the equations a step runs one by one. */
static void step_reads(const jx_executable *x, const jx_program *p, int k,
                       void (*fn)(const jx_executable *, int, int, void *), void *ctx) {
  const step *s = &x->steps[k];
  JX_FUSION_FOR_READS(p, &s->group, s->fn != NULL, v, fn(x, v, k, ctx));
}

static void note_read(const jx_executable *x, int v, int k, void *ctx) {
  (void)ctx;
  x->last_step[v] = k;
}

/* The step after which each variable is dead, so the run can free it there. */
static jx_status plan_lifetimes(jx_executable *x, const jx_program *p) {
  x->last_step = malloc(sizeof *x->last_step * (size_t)(p->nvars + 1));
  x->temporary = calloc((size_t)p->nvars + 1, 1);
  if (!x->last_step || !x->temporary)
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
  for (int v = 0; v < p->nvars; v++) x->last_step[v] = -1;
  for (int k = 0; k < x->nsteps; k++) {
    const jx_fusion_group *g = &x->steps[k].group;
    step_reads(x, p, k, note_read, NULL);
    for (int e = g->first; e < g->first + g->count; e++)
      for (int o = 0; o < p->eqns[e].nout; o++) x->temporary[p->eqns[e].out[o]] = 1;
  }
  for (int o = 0; o < p->nout; o++) x->last_step[p->out[o]] = x->nsteps;
  return JX_OK;
}

static double now_s(void);

/* The profiler's name of step k ("kernel add+mul f32[8,4]", "dot_general
 * f32[8,4]") and its cost: flops by XLA's convention, bytes read and written. */
static void describe_step(jx_executable *x, const jx_program *p, int k) {
  const step *s = &x->steps[k];
  const jx_fusion_group *g = &s->group;
  char *name = x->step_names[k];
  size_t len = 0, cap = sizeof x->step_names[k];
  name[0] = '\0';
  double flops = 0, bytes = 0;
  if (s->fn) len += (size_t)snprintf(name, cap, "kernel ");
  for (int e = g->first; e < g->first + g->count; e++) {
    const jx_eqn *q = &p->eqns[e];
    flops += jx_eqn_flops(p, q);
    if (len < cap && (e < g->first + 3 || e == g->first + g->count - 1))
      len +=
          (size_t)snprintf(name + len, cap - len, "%s%s", e > g->first ? "+" : "", q->prim->name);
    else if (len < cap && e == g->first + 3)
      len += (size_t)snprintf(name + len, cap - len, "+..");
    if (!s->fn) {
      for (int i = 0; i < q->nin; i++) bytes += jx_aval_bytes(p->avals[q->in[i]]);
      for (int o = 0; o < q->nout; o++) bytes += jx_aval_bytes(p->avals[q->out[o]]);
    }
  }
  if (s->fn) {
    for (int l = 0; l < g->nloads; l++) bytes += jx_aval_bytes(p->avals[g->loads[l].var]);
    for (int o = 0; o < g->nstores; o++) bytes += jx_aval_bytes(p->avals[g->stores[o]]);
  }
  const jx_eqn *last = &p->eqns[g->first + g->count - 1];
  if (len < cap && last->nout > 0) {
    char sh[JX_AVAL_STR_CAP];
    jx_aval a = p->avals[last->out[0]];
    snprintf(name + len, cap - len, " %s", jx_aval_str(a.dtype, a.shape, sh));
  }
  x->step_flops[k] = flops;
  x->step_bytes[k] = bytes;
}

/* The dot_general step k runs, or -1. */
static int dot_eqn(const jx_executable *x, const jx_program *p, int k) {
  const step *s = &x->steps[k];
  if (s->fn || s->group.skip || s->group.count != 1) return -1;
  return p->eqns[s->group.first].prim == &jx_prim_dot_general ? s->group.first : -1;
}

/* Two dot_generals in consecutive steps, the second not reading the first,
 * run side by side: on the MLP step's backward pass, a layer's input and
 * weight gradients (two GEMMs of 256x512x512) each on one of two threads,
 * rather than each split over both with a hand-off between them. The blocks
 * are those each would run alone, so the bits do not change.
 * JX_GEMM_SIDE_BY_SIDE=0 runs them one after the other. */
static void pair_gemms(jx_executable *x, const jx_program *p) {
  if (!jx_env_flag("JX_GEMM_SIDE_BY_SIDE")) return;
  for (int k = 0; k + 1 < x->nsteps; k++) {
    int a = dot_eqn(x, p, k), b = dot_eqn(x, p, k + 1);
    if (a < 0 || b < 0 || x->steps[k + 1].epilogue) continue; /* the epilogue saves more */
    int reads = 0;
    for (int i = 0; i < p->eqns[b].nin; i++) reads |= p->eqns[b].in[i] == p->eqns[a].out[0];
    if (reads) continue;
    x->steps[k++].with_next = 1;
  }
}

/* A dot_general step whose f32 result only the next step reads, where that
 * step is an elementwise kernel that adds to it a bias over its last dim (a
 * broadcast_in_dim of an [N] vector, N the rhs's one free dim), a residual
 * of its own shape, or both, and stores only that sum (a dense layer's
 * x W + b, a residual block's x + (h W + b)): the product runs with the
 * sum as its epilogue (jx_dot_blas_epilogue), the bias added to each tile
 * of C while it is in cache and the residual's buffer, which must die at
 * that step, taken as C, and the kernel step is skipped. The GEMM's result is
 * never written out and read back. */
static void find_epilogues(jx_executable *x, const jx_program *p) {
  enum { MAX_MEMBERS = 8 };
  for (int k = 0; k + 1 < x->nsteps; k++) {
    step *s = &x->steps[k], *n = &x->steps[k + 1];
    const jx_fusion_group *g = &n->group;
    int e = dot_eqn(x, p, k);
    s->epi_bias = s->epi_resid = s->epi_out = -1;
    if (e < 0 || !n->fn || g->skip || g->reduces || g->windows || g->nstores != 1 ||
        g->count > MAX_MEMBERS)
      continue;
    const jx_eqn *dot = &p->eqns[e];
    int d = dot->out[0];
    jx_aval da = p->avals[d];
    jx_shape rs = p->avals[dot->in[1]].shape;
    jx_tensor ops[2] = {{NULL, p->avals[dot->in[0]].dtype, p->avals[dot->in[0]].shape},
                        {NULL, p->avals[dot->in[1]].dtype, rs}};
    if (da.dtype != JX_F32 || da.shape.rank < 1 || x->last_step[d] != k + 1 ||
        rs.rank - dot->params.l[JX_DOT_RC].n - dot->params.l[JX_DOT_RB].n != 1 ||
        !jx_dot_goes_to_blas(&dot->params, ops, da.dtype, da.shape))
      continue;
    int cur = d, bias = -1, resid = -1, ok = 1, nb = 0, bout[MAX_MEMBERS], bin[MAX_MEMBERS];
    for (int q = g->first; q < g->first + g->count && ok; q++) {
      const jx_eqn *m = &p->eqns[q];
      jx_aval ma = p->avals[m->out[0]];
      ok = m->nout == 1 && ma.dtype == JX_F32 && jx_shape_equal(ma.shape, da.shape);
      if (!ok) break;
      if (m->prim == &jx_prim_broadcast_in_dim) { /* [N] along the last dim */
        jx_aval b = p->avals[m->in[0]];
        const jx_ilist *bd = &m->params.l[1];
        ok = b.dtype == JX_F32 && b.shape.rank == 1 &&
             b.shape.dims[0] == da.shape.dims[da.shape.rank - 1] && bd->n == 1 &&
             bd->v[0] == da.shape.rank - 1;
        bout[nb] = m->out[0];
        bin[nb++] = m->in[0];
        continue;
      }
      ok = m->prim == &jx_prim_add && m->nin == 2 && (m->in[0] == cur) != (m->in[1] == cur);
      if (!ok) break;
      int other = m->in[0] == cur ? m->in[1] : m->in[0], b = -1;
      for (int i = 0; i < nb; i++)
        if (bout[i] == other) b = bin[i];
      if (b >= 0) {
        ok = bias < 0;
        bias = b;
      } else {
        ok = resid < 0 && p->avals[other].dtype == JX_F32 &&
             jx_shape_equal(p->avals[other].shape, da.shape);
        resid = other;
      }
      cur = m->out[0];
    }
    if (resid >= 0 && (resid == dot->in[0] || resid == dot->in[1] || resid == bias))
      continue; /* C would overwrite an operand the product still reads (h + h W) */
    if (!ok || cur == d || cur != g->stores[0] || (resid >= 0 && x->last_step[resid] != k + 1))
      continue; /* a residual read later keeps its values: the kernel adds into a new buffer */
    s->epilogue = 1;
    s->epi_bias = bias;
    s->epi_resid = resid;
    s->epi_out = cur;
  }
}

/* Runs the GEMMs of steps k and k + 1 side by side; *ran = 0 when they are
 * not both GEMMs through BLAS (the steps then run one by one). */
static jx_status run_pair(const jx_program *p, const jx_eqn *a, const jx_eqn *b, jx_array **env,
                          int *ran) {
  const jx_params *params[2] = {&a->params, &b->params};
  jx_array *in[4] = {env[a->in[0]], env[a->in[1]], env[b->in[0]], env[b->in[1]]};
  jx_aval avals[2] = {p->avals[a->out[0]], p->avals[b->out[0]]};
  jx_array *out[2];
  jx_status st = jx_dot_side_by_side(2, params, in, avals, out, ran);
  if (!st && *ran) {
    env[a->out[0]] = out[0];
    env[b->out[0]] = out[1];
  }
  return st;
}

jx_executable *jx_executable_build(const jx_program *p, const char *dump_prefix,
                                   jx_compile_times *times) {
  double t_begin = now_s(), t_codegen = 0, t_cc = 0;
  jx_kernel_stats ks0 = jx_kernel_cache_stats();
  jx_fusion_group *groups = NULL;
  int ng = jx_fuse(p, &groups);
  if (ng < 0) return NULL;
  jx_executable *x = calloc(1, sizeof *x);
  if (x) x->steps = calloc((size_t)ng + 1, sizeof *x->steps);
  if (!x || !x->steps) {
    free(x);
    free(groups);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
    return NULL;
  }
  /* every kernel of the program in one translation unit: one compiler run
   * (its start-up dominates small kernels); none at all when a batch
   * compiled with the program's control flow (control_compile.c) holds them */
  jx_kernel_tu tu;
  char(*names)[JX_KERNEL_NAME_CAP] = NULL;
  jx_status st = jx_kernel_tu_init(&tu);
  if (!st) {
    names = calloc((size_t)ng + 1, sizeof *names);
    if (!names) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
  }
  int nkernels = st ? 0 : jx_kernel_tu_add(&tu, p, groups, ng, names, NULL);
  if (nkernels < 0) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  const int distinct = tu.n; /* identical groups (a layer's, in every layer) share a kernel */
  for (int k = 0; k < ng && !st; k++) {
    step *sk = &x->steps[x->nsteps++];
    sk->group = groups[k];
    if (sk->group.count == 1 && !sk->group.skip)
      sk->attention = (uint8_t)jx_cpu_attention_call(p, &p->eqns[sk->group.first]);
  }
  t_codegen = now_s();
  int batched = 0, units = 1;
  if (!st && nkernels) {
    jx_dump_text(dump_prefix ? dump_prefix : p->name, "kernels.c", tu.text);
    for (int k = 0; k < x->nsteps; k++)
      if (names[k][0] && (x->steps[k].fn = (jx_kernel_fn)jx_kernel_find(names[k]))) batched++;
    if (batched < nkernels) {
      void **fns = calloc((size_t)x->nsteps + 1, sizeof *fns);
      if (!fns) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
      for (int k = 0; k < x->nsteps && fns; k++) fns[k] = (void *)x->steps[k].fn;
      if (!st)
        st = jx_kernel_units_build(&tu, x->nsteps, (const char(*)[JX_KERNEL_NAME_CAP])names, fns,
                                   &x->tiers, &units);
      for (int k = 0; k < x->nsteps && !st; k++) x->steps[k].fn = (jx_kernel_fn)fns[k];
      free(fns);
    }
  }
  t_cc = now_s();
  jx_kernel_tu_free(&tu);
  free(names);
  free(groups);
  if (!st) st = plan_lifetimes(x, p);
  if (!st) find_epilogues(x, p);
  if (!st) pair_gemms(x, p);
  for (int e = 0; e < p->neqns && !st; e++)
    if (jx_eqn_has_effect(&p->eqns[e]) || p->eqns[e].prim->id == JX_PRIM_shard_map)
      x->synchronous = 1;
  if (!st) {
    x->step_names = calloc((size_t)x->nsteps + 1, sizeof *x->step_names);
    x->step_flops = calloc((size_t)x->nsteps + 1, sizeof *x->step_flops);
    x->step_bytes = calloc((size_t)x->nsteps + 1, sizeof *x->step_bytes);
    if (!x->step_names || !x->step_flops || !x->step_bytes)
      st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
    for (int k = 0; k < x->nsteps && !st; k++) describe_step(x, p, k);
  }
  {
    jx_kernel_stats ks1 = jx_kernel_cache_stats();
    jx_compile_times scratch, *bt = times ? times : &scratch;
    bt->codegen = t_codegen - t_begin;
    bt->compile = t_cc - t_codegen;
    bt->kernels = nkernels;
    bt->cache = !nkernels                           ? "no kernels"
                : batched == nkernels && units == 1 ? "batch"
                : ks1.compiles > ks0.compiles       ? "compiled"
                : ks1.disk_hits > ks0.disk_hits     ? "disk cache"
                                                    : "memory cache";
    if (nkernels && jx_env_flag("JX_LOG_COMPILES"))
      fprintf(stderr,
              "jx: kernels of '%s': %d fused groups, %d distinct kernels in %d unit%s; codegen "
              "%.1f ms, C compile %.1f ms (%s)\n",
              p->name, nkernels, distinct, units, units > 1 ? "s" : "", bt->codegen * 1e3,
              bt->compile * 1e3, bt->cache);
  }
  if (!st && jx_env_flag("JX_PROFILE_STEPS")) {
    x->profile = calloc((size_t)x->nsteps + 1, sizeof *x->profile);
    x->labels = calloc((size_t)x->nsteps + 1, sizeof *x->labels);
    snprintf(x->name, sizeof x->name, "%s", p->name);
    for (int k = 0; k < x->nsteps && x->labels; k++) {
      const step *s = &x->steps[k];
      const jx_eqn *e = &p->eqns[s->group.first];
      jx_aval a = p->avals[e->out[0]];
      char sh[256];
      const char *what = s->attention == 1   ? "flash attention"
                         : s->attention == 2 ? "flash attention backward"
                         : s->attention == 3 ? "decode attention"
                                             : e->prim->name;
      snprintf(x->labels[k], sizeof x->labels[k], "%s%s x%d %s", s->fn ? "kernel " : "", what,
               s->group.count, jx_aval_str(a.dtype, a.shape, sh));
    }
    if (!x->labels) {
      free(x->profile);
      x->profile = NULL;
    }
  }
  if (st) {
    jx_executable_free(x);
    return NULL;
  }
  return x;
}

/* JX_PROFILE_STEPS=1: at the end, the steps that took the most time, per run. */
static void report_profile(const jx_executable *x) {
  int runs = atomic_load(&x->runs);
  if (!x->profile || !runs) return;
  double total = 0, total_cpu = 0, *wall = malloc(sizeof *wall * 2 * ((size_t)x->nsteps + 1));
  if (!wall) return;
  double *cpu = wall + x->nsteps + 1;
  for (int k = 0; k < x->nsteps; k++) {
    wall[k] = 1e-9 * (double)atomic_load(&x->profile[k].wall_ns);
    cpu[k] = 1e-9 * (double)atomic_load(&x->profile[k].cpu_ns);
    total += wall[k], total_cpu += cpu[k];
  }
  fprintf(stderr,
          "jx: %s: %d runs, %.3f ms per run in steps, %.3f ms of the running thread's CPU\n",
          x->name, runs, total * 1e3 / runs, total_cpu * 1e3 / runs);
  for (int k = 0; k < x->nsteps; k++)
    if (wall[k] >= 0.01 * total)
      fprintf(stderr, "  step %3d %-48s %7.3f ms %5.1f%%  CPU %7.3f ms\n", k, x->labels[k],
              wall[k] * 1e3 / runs, 100 * wall[k] / total, cpu[k] * 1e3 / runs);
  /* the same time by kind, with the GEMMs' rate: the first question of a
   * train step's profile is how much of it the BLAS has and at what speed */
  static const char *const kinds[4] = {"dot_general", "attention", "kernels", "the rest"};
  double by[4] = {0}, by_cpu[4] = {0}, dot_flops = 0;
  for (int k = 0; k < x->nsteps; k++) {
    const char *l = x->labels[k];
    int i = !strncmp(l, "dot_general", 11) ? 0
            : strstr(l, "attention")       ? 1
            : !strncmp(l, "kernel ", 7)    ? 2
                                           : 3;
    by[i] += wall[k];
    by_cpu[i] += cpu[k];
    if (i == 0) dot_flops += x->step_flops[k];
  }
  fprintf(stderr, "  by kind:");
  for (int i = 0; i < 4; i++) {
    fprintf(stderr, "%s %s %.3f ms %.1f%%", i ? "," : "", kinds[i], by[i] * 1e3 / runs,
            total > 0 ? 100 * by[i] / total : 0);
    if (i == 0 && by[0] > 0) fprintf(stderr, " (%.1f GFLOP/s)", dot_flops * runs / by[0] / 1e9);
  }
  fprintf(stderr, "\n  by kind, CPU:");
  for (int i = 0; i < 4; i++)
    fprintf(stderr, "%s %s %.3f ms", i ? "," : "", kinds[i], by_cpu[i] * 1e3 / runs);
  fprintf(stderr, "\n");
  free(wall);
}

void jx_executable_free(jx_executable *x) {
  if (!x) return;
  jx_kernel_units_free(x->tiers);
  report_profile(x);
  jx_exec_nested_free(&x->nested);
  jx_program_release(x->lowered);
  free(x->profile);
  free(x->labels);
  free(x->step_names);
  free(x->step_flops);
  free(x->step_bytes);
  free(x->last_step);
  free(x->temporary);
  free(x->donate);
  free(x->warned);
  free(x->donor);
  free(x->steps);
  free(x);
}

typedef struct {
  jx_kernel_fn fn;
  char **buf;
  const int64_t *dims, *strides;
  int64_t rows, inner, chunk; /* chunk: columns per work unit (inner when splitting rows) */
} kernel_job;

/* Units [begin, end) are whole rows when chunk == inner, else pieces of rows. */
static void run_units(void *ctx, int64_t begin, int64_t end) {
  kernel_job *j = ctx;
  if (j->chunk == j->inner) {
    j->fn(j->buf, j->dims, j->strides, begin, end, 0, j->inner);
    return;
  }
  int64_t per_row = (j->inner + j->chunk - 1) / j->chunk;
  for (int64_t u = begin; u < end; u++) {
    int64_t row = u / per_row, c0 = (u % per_row) * j->chunk;
    int64_t c1 = c0 + j->chunk < j->inner ? c0 + j->chunk : j->inner;
    j->fn(j->buf, j->dims, j->strides, row, row + 1, c0, c1);
  }
}

enum { MIN_UNIT = 16384 }; /* elements below which a piece is not worth a thread */

/* Donation: the run's own arrays (made by it or taken from donated inputs),
 * which it frees after their last use. */
typedef struct {
  const jx_executable *x;
  jx_array **env;
  uint8_t *owned; /* per variable: a donated input's buffer, taken by this run */
} run_state;

/* 1 when no other array shares a's buffer (a reshape's result shares its
 * operand's): only then may a step write over it. */
static int sole_holder(const jx_array *a) {
  return a->buf && atomic_load_explicit(&a->buf->refs, memory_order_acquire) == 1;
}

/* The donated buffer a kernel step k may write store `o` into, in place: a
 * load of a taken input that dies at this step and that the store may
 * reuse (jx_fusion_store_may_reuse). -1 when there is none; claimed marks
 * loads already reused. */
static int in_place_load(const run_state *r, const jx_program *p, int k, int o,
                         const uint8_t *claimed) {
  const jx_fusion_group *g = &r->x->steps[k].group;
  if (!r->owned) return -1;
  for (int l = 0; l < g->nloads; l++) {
    int v = g->loads[l].var;
    if (claimed[l] || !r->owned[v] || !r->env[v] || r->x->last_step[v] != k ||
        !sole_holder(r->env[v]))
      continue;
    if (jx_fusion_store_may_reuse(p, g, o, l)) return l;
  }
  return -1;
}

/* A column reduction's work: units of whole output columns (all the
 * reduced rows of a piece of a kernel row, in blocks of the dialect's
 * col_block columns) and, for a sum with too few of those for the pool,
 * subtrees of the reduced rows' pairwise tree: each sums its rows into a
 * partial row, and the partial rows are added in the tree's order
 * (prims/pairwise_split.h). The sums do not depend on the split. */
typedef struct {
  jx_kernel_fn fn;
  char **buf;
  int nbuf, red;                 /* buffers; the reduction's store among them */
  const int64_t *dims, *strides; /* dims: JX_MAX_RANK of them, then the reduced rows */
  int64_t inner, chunk, per_row, rows;
  char *partial; /* the pieces' partial rows (NULL: one piece, the output) */
  size_t piece_bytes;
  int64_t start[1 << JX_PAIRWISE_MAX_DEPTH], count[1 << JX_PAIRWISE_MAX_DEPTH];
} col_job;

static void run_col_units(void *ctx, int64_t begin, int64_t end) {
  const col_job *j = ctx;
  char *buf[JX_FUSION_MAX_LOADS + JX_FUSION_MAX_STORES];
  int64_t dims[JX_MAX_RANK + 2];
  memcpy(buf, j->buf, sizeof *buf * (size_t)j->nbuf);
  memcpy(dims, j->dims, sizeof dims);
  int64_t per_piece = j->rows * j->per_row;
  for (int64_t u = begin; u < end; u++) {
    int64_t k = u / per_piece, row = u % per_piece / j->per_row;
    int64_t c0 = u % j->per_row * j->chunk,
            c1 = c0 + j->chunk < j->inner ? c0 + j->chunk : j->inner;
    if (j->partial) buf[j->red] = j->partial + (size_t)k * j->piece_bytes;
    dims[JX_MAX_RANK] = j->start[k];
    dims[JX_MAX_RANK + 1] = j->start[k] + j->count[k];
    j->fn(buf, dims, j->strides, row, row + 1, c0, c1);
  }
}

static jx_status run_col_reduction(const jx_program *p, const jx_fusion_group *g, jx_kernel_fn fn,
                                   char **buf, const int64_t *dims, const int64_t *strides,
                                   int threads) {
  const jx_eqn *r = &p->eqns[g->first + g->count - 1];
  int rank = g->shape.rank, lead = 0, op = jx_fusion_col_reduce(r, p, &lead);
  col_job *j = malloc(sizeof *j);
  if (!j) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
  j->fn = fn;
  j->buf = buf;
  j->nbuf = g->nloads + g->nstores;
  j->red = -1;
  for (int o = 0; o < g->nstores; o++)
    if (g->stores[o] == r->out[0]) j->red = g->nloads + o;
  j->dims = dims;
  j->strides = strides;
  j->inner = dims[rank - 1];
  j->rows = jx_fusion_kernel_rows(g);
  int64_t nred = 1;
  for (int d = 0; d < lead; d++) nred *= dims[d];
  if (j->rows <= 0 || j->inner <= 0) { /* no output */
    free(j);
    return JX_OK;
  }
  /* columns: pieces of every kernel row, whole blocks of at least MIN_UNIT work */
  int64_t want = (4 * threads + j->rows - 1) / j->rows;
  int64_t chunk = (j->inner + want - 1) / (want ? want : 1);
  int64_t least = (MIN_UNIT + nred - 1) / (nred ? nred : 1);
  if (chunk < least) chunk = least;
  int64_t block = jx_dialect_c.col_block;
  j->chunk = (chunk + block - 1) / block * block;
  if (j->chunk > j->inner) j->chunk = j->inner > 0 ? j->inner : 1;
  j->per_row = (j->inner + j->chunk - 1) / j->chunk;
  /* rows: subtrees of the reduced rows, for a sum whose columns are too few units */
  int64_t units = j->rows * j->per_row, width = j->chunk < j->inner ? j->chunk : j->inner;
  jx_dtype dt = p->avals[r->out[0]].dtype;
  int depth = 0;
  if (op == 1 && jx_dialect_c.red_range && j->red >= 0 && units < 2 * threads &&
      (dt == JX_F32 || dt == JX_F64) && width > 0)
    depth = jx_pairwise_depth(nred, (2 * threads + units - 1) / units, MIN_UNIT / width);
  int pieces = jx_pairwise_pieces(nred, depth, j->start, j->count);
  int64_t out_n = j->rows * j->inner;
  j->piece_bytes = (size_t)out_n * jx_dtype_size(dt);
  j->partial = pieces > 1 ? malloc(j->piece_bytes * (size_t)pieces) : NULL;
  if (pieces > 1 && !j->partial) {
    free(j);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
  }
  int64_t unit_work = nred / pieces * width;
  jx_parallel_for(pieces * units, unit_work >= MIN_UNIT || unit_work < 1 ? 1 : MIN_UNIT / unit_work,
                  run_col_units, j);
  if (pieces > 1) {
    if (dt == JX_F32)
      jx_pairwise_combine_f32(nred, depth, (float *)j->partial, out_n);
    else
      jx_pairwise_combine_f64(nred, depth, (double *)j->partial, out_n);
    memcpy(buf[j->red], j->partial, j->piece_bytes);
  }
  free(j->partial);
  free(j);
  return JX_OK;
}

static jx_status run_kernel(const run_state *rs, const jx_program *p, int k) {
  const step *s = &rs->x->steps[k];
  jx_array **env = rs->env;
  uint8_t claimed[JX_FUSION_MAX_LOADS] = {0};
  const jx_fusion_group *g = &s->group;
  char *buf[JX_FUSION_MAX_LOADS + JX_FUSION_MAX_STORES];
  int64_t strides[JX_FUSION_MAX_LOADS * 8];
  int64_t dims[JX_MAX_RANK + 2] = {1}; /* + a column reduction's reduced rows (render.h) */
  int rank = g->shape.rank > 0 ? g->shape.rank : 1;
  for (int d = 0; d < g->shape.rank; d++) dims[d] = g->shape.dims[d];
  for (int k = 0; k < g->nloads; k++) {
    /* a value laid out over devices (a shard_map's result) is read whole */
    if (jx_array_ready(env[g->loads[k].var])) return jx_last_status();
    jx_array *in = env[g->loads[k].var]; /* from where a read-through slice starts */
    buf[k] = (char *)in->buf->data + g->loads[k].offset * (int64_t)jx_dtype_size(in->dtype);
    memcpy(strides + 8 * k, g->loads[k].strides, sizeof g->loads[k].strides);
  }
  for (int o = 0; o < g->nstores; o++) {
    jx_aval a = p->avals[g->stores[o]];
    int l = in_place_load(rs, p, k, o, claimed);
    jx_array *r;
    if (l >= 0) { /* shares the donated buffer, which is freed after this step */
      claimed[l] = 1;
      r = jx_array_alias(env[g->loads[l].var], a.shape);
      if (!r->poisoned) {
        r->dtype = a.dtype;
        r->weak = (uint8_t)(a.weak != 0);
      }
    } else {
      r = jx_array_alloc(a.dtype, a.shape, a.weak);
    }
    if (r->poisoned) return jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
    env[g->stores[o]] = r;
    buf[g->nloads + o] = r->buf->data;
  }
  int64_t inner = dims[rank - 1], rows = jx_shape_numel(g->shape) / (inner ? inner : 1);
  /* the kernels' final tier once compiled (kernel_units.h), else the first */
  jx_kernel_fn fn = (jx_kernel_fn)jx_kernel_units_final(rs->x->tiers, k);
  if (!fn) fn = s->fn;
  kernel_job job = {fn, buf, dims, strides, rows, inner, inner};
  int threads = jx_pool_threads();
  if (g->reduces && g->lead > 0) {
    return run_col_reduction(p, g, fn, buf, dims, strides, threads);
  } else if (rows < 2 * threads && inner >= 2 * MIN_UNIT && !g->reduces) {
    /* few long rows: split the rows themselves */
    int64_t pieces = (2 * threads + rows - 1) / rows;
    job.chunk = (inner + pieces - 1) / pieces;
    if (job.chunk < MIN_UNIT) job.chunk = MIN_UNIT;
    int64_t per_row = (inner + job.chunk - 1) / job.chunk;
    jx_parallel_for(rows * per_row, 1, run_units, &job);
  } else {
    int64_t grain = inner >= MIN_UNIT ? 1 : MIN_UNIT / (inner ? inner : 1);
    jx_parallel_for(rows, grain, run_units, &job);
  }
  return JX_OK;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int64_t thread_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A dynamic_update_slice whose operand is a donated buffer this run took
 * and that dies at this step writes its update into that buffer instead of
 * copying the operand (a key/value cache written one slot per decode step).
 * 1 when it ran (*st its status), 0 when the step runs as usual. */
static int update_in_place(const run_state *rs, const jx_program *p, int k, jx_status *st) {
  const step *s = &rs->x->steps[k];
  jx_array **env = rs->env;
  if (s->group.count != 1 || !rs->owned) return 0;
  const jx_eqn *e = &p->eqns[s->group.first];
  int v = e->in[0];
  if (e->prim != &jx_prim_dynamic_update_slice || e->nin > JX_MAX_RANK + 2 || !rs->owned[v] ||
      rs->x->last_step[v] != k || !env[v] || !sole_holder(env[v]))
    return 0;
  jx_tensor in[JX_MAX_RANK + 2];
  for (int i = 0; i < e->nin; i++) {
    jx_array *a = env[e->in[i]];
    if ((*st = jx_array_ready(a))) return 1;
    in[i] = (jx_tensor){a->buf->data, a->dtype, a->shape};
  }
  jx_tensor out = in[0]; /* the reference kernel skips the copy onto itself */
  e->prim->eval(&(jx_rule_ctx){e->prim, &e->params, e->nin, 1, 0, NULL}, in, &out);
  jx_array *r = jx_array_alias(env[v], env[v]->shape);
  if (r->poisoned) {
    *st = jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
    return 1;
  }
  r->weak = env[v]->weak;
  env[e->out[0]] = r;
  *st = JX_OK;
  return 1;
}

/* 1 when a is one whole concrete array (not poisoned, a tracer or
 * sharded over devices): a step may read its buffer once it is ready. */
static int whole_value(const jx_array *a) {
  return a && !a->poisoned && !jx_is_tracer(a) && !jx_array_shards(a);
}

/* 1 when a is a whole array in host memory that a kernel may read. */
static int on_host(const jx_array *a) {
  return whole_value(a) && a->storage == JX_STORAGE_HOST && a->buf;
}

/* Runs step k's GEMM with the next step's sum as its epilogue
 * (find_epilogues). 1 when it ran (*st its status; step k + 1 is then
 * done), 0 when the two steps run as usual: an operand not on the host, a
 * residual that later steps still read (or that the run does not own), a
 * product jx's GEMM does not take. */
static int run_epilogue(const run_state *rs, const jx_program *p, int k, jx_status *st) {
  const step *s = &rs->x->steps[k];
  jx_array **env = rs->env;
  const jx_eqn *e = &p->eqns[s->group.first];
  jx_array *a[4] = {env[e->in[0]], env[e->in[1]], s->epi_bias >= 0 ? env[s->epi_bias] : NULL,
                    s->epi_resid >= 0 ? env[s->epi_resid] : NULL};
  for (int i = 0; i < 4; i++) {
    if (i >= 2 && !a[i] && (i == 2 ? s->epi_bias : s->epi_resid) < 0) continue;
    if (!on_host(a[i])) return 0;
    if ((*st = jx_array_ready(a[i]))) return 1; /* a pending input arrives */
    if (a[i]->dtype != JX_F32) return 0;
  }
  jx_array *x = a[3];
  int v = s->epi_resid;
  if (x && (!(rs->x->temporary[v] || (rs->owned && rs->owned[v])) || rs->x->last_step[v] != k + 1 ||
            !sole_holder(x)))
    return 0; /* its values are read later: the sum goes to a buffer of its own */
  for (int i = 0; x && i < 3; i++)
    if (a[i] && a[i]->buf == x->buf) return 0; /* an operand's own buffer (a view of it) */
  jx_aval oa = p->avals[s->epi_out];
  jx_array *r = x ? jx_array_alias(x, oa.shape) : jx_array_alloc(oa.dtype, oa.shape, oa.weak);
  if (r->poisoned) {
    *st = jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
    return 1;
  }
  jx_tensor in[2] = {{a[0]->buf->data, a[0]->dtype, a[0]->shape},
                     {a[1]->buf->data, a[1]->dtype, a[1]->shape}};
  jx_tensor out = {r->buf->data, JX_F32, oa.shape};
  jx_gemm_epilogue epi = {x != NULL, a[2] ? (const float *)a[2]->buf->data : NULL};
  if (!jx_dot_blas_epilogue(&e->params, in, &out, &epi)) {
    jx_scope_release_now(r);
    return 0;
  }
  r->weak = (uint8_t)(oa.weak != 0);
  env[s->epi_out] = r;
  *st = JX_OK;
  return 1;
}

enum { DIRECT_MAX = 8 }; /* operands and results of an equation run_direct takes */

/* Runs e's kernel straight on env's arrays, its results allocated from the
 * program's avals (which its rule inferred when the program was traced):
 * what jx_bind would do for concrete host arrays, without inferring,
 * checking and dispatching again at every run (a scan runs its body's
 * small products thousands of times). 1 when it ran (*st its status), 0
 * when e needs jx_bind: an impl of its own, nested programs, operands laid
 * out over devices, or too many of them. */
static int run_direct(const jx_program *p, const jx_eqn *e, jx_array **env, jx_status *st) {
  const jx_prim *pr = e->prim;
  if (pr->impl || !pr->eval || e->nsub || e->nin > DIRECT_MAX || e->nout > DIRECT_MAX ||
      jx_trace_active())
    return 0;
  jx_tensor tin[DIRECT_MAX], tout[DIRECT_MAX];
  for (int i = 0; i < e->nin; i++) {
    jx_array *a = env[e->in[i]];
    if (!whole_value(a)) return 0;
    if ((*st = jx_array_ready(a))) return 1; /* a pending input arrives */
    tin[i] = (jx_tensor){a->buf->data, a->dtype, a->shape};
  }
  for (int o = 0; o < e->nout; o++) {
    jx_aval a = p->avals[e->out[o]];
    jx_array *r = jx_array_alloc(a.dtype, a.shape, a.weak);
    if (r->poisoned) {
      *st = jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
      return 1;
    }
    env[e->out[o]] = r;
    tout[o] = (jx_tensor){r->buf->data, a.dtype, a.shape};
  }
  pr->eval(&(jx_rule_ctx){pr, &e->params, e->nin, e->nout, 0, NULL}, tin, tout);
  *st = JX_OK;
  return 1;
}

/* A reshape is the same bytes in the same order (arrays are dense and
 * row-major): its result shares the operand's buffer rather than a copy of
 * it (the attention heads' q, k, v and their gradients, several MiB a
 * layer of the GPT step). 1 when it ran (*st its status), 0 when e is not
 * a reshape of a value on the host. */
static int reshape_shares(const jx_program *p, const jx_eqn *e, jx_array **env, jx_status *st) {
  if (e->prim != &jx_prim_reshape || e->nin != 1 || e->nout != 1 || jx_trace_active()) return 0;
  jx_array *a = env[e->in[0]];
  if (!whole_value(a)) return 0;
  if ((*st = jx_array_ready(a))) return 1; /* a pending input arrives */
  jx_aval o = p->avals[e->out[0]];
  if (a->storage != JX_STORAGE_HOST || a->dtype != o.dtype) return 0;
  jx_array *r = jx_array_alias(a, o.shape);
  if (r->poisoned) {
    *st = jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
    return 1;
  }
  r->weak = (uint8_t)(o.weak != 0);
  env[e->out[0]] = r;
  *st = JX_OK;
  return 1;
}

static jx_status run_eqn(const jx_program *p, const jx_eqn *e, jx_array **env) {
  jx_status direct;
  if (reshape_shares(p, e, env, &direct)) return direct;
  if (!jx_control_runs(e) && run_direct(p, e, env, &direct)) return direct;
  jx_array *ins_s[16], *outs_s[16];
  jx_array **ins = e->nin > 16 ? malloc(sizeof *ins * (size_t)e->nin) : ins_s;
  jx_array **outs = e->nout > 16 ? malloc(sizeof *outs * (size_t)e->nout) : outs_s;
  jx_status st = (ins && outs) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
  for (int i = 0; i < e->nin && !st; i++) ins[i] = env[e->in[i]];
  if (!st) /* a scan or while over compiled bodies runs its loop in control_compile.c */
    st = jx_control_runs(e) ? jx_control_run(e, ins, outs)
                            : jx_bind_sub(e->prim, e->nin, ins, &e->params, e->nsub, e->sub, outs);
  for (int o = 0; o < e->nout && !st; o++) env[e->out[o]] = outs[o];
  if (ins != ins_s) free(ins);
  if (outs != outs_s) free(outs);
  return st;
}

/* Frees v after step k when k is its last reader and the run made it (or
 * took it from a donated input). */
static void release_dead(const jx_executable *x, int v, int k, void *ctx) {
  const run_state *rs = ctx;
  jx_array **env = rs->env;
  if ((x->temporary[v] || (rs->owned && rs->owned[v])) && x->last_step[v] == k && env[v]) {
    jx_scope_release_now(env[v]);
    env[v] = NULL;
  }
}

/* Collectives in flight on this device (collective.h): started at their
 * step, finished before the first step that reads their result. */
enum { MAX_IN_FLIGHT = 16 };
typedef struct {
  int n;
  int var[MAX_IN_FLIGHT];
  jx_collective_pending *h[MAX_IN_FLIGHT];
  jx_status st; /* the first failure to finish one */
} in_flight;

static void finish_at(in_flight *f, int i) {
  jx_status st = jx_async_collective->finish(f->h[i]);
  if (st && !f->st) f->st = st;
  f->n--;
  f->var[i] = f->var[f->n];
  f->h[i] = f->h[f->n];
}

static void finish_if_read(const jx_executable *x, int v, int k, void *ctx) {
  (void)x;
  (void)k;
  in_flight *f = ctx;
  for (int i = 0; i < f->n; i++)
    if (f->var[i] == v) finish_at(f, i--);
}

/* Starts step s's collective, when it is one that can run ahead: 1
 * started, 0 run it as usual, -1 failed. Not while the NaN checker or the
 * step profiler look at each step's results as it ends. */
static int start_collective(const jx_program *p, const step *s, jx_array **env, in_flight *f) {
  if (s->fn || s->group.count != 1 || f->n == MAX_IN_FLIGHT ||
      (jx_debug_flags & (JX_DEBUG_NANS | JX_DEBUG_INFS)))
    return 0;
  const jx_eqn *e = &p->eqns[s->group.first];
  if (!e->prim->uses_axis || e->nin != 1 || e->nout != 1 || e->nsub) return 0;
  jx_collective_pending *h = NULL;
  int r = jx_async_collective->start(e->prim, &e->params, env[e->in[0]], &env[e->out[0]], &h);
  if (r == 1) {
    f->var[f->n] = e->out[0];
    f->h[f->n++] = h;
  }
  return r;
}

const char *jx_donation_conflict(const jx_program *p, jx_array *const *in, int i, char *why,
                                 size_t cap) {
  const jx_array *a = in[i];
  if (jx_array_shards(a)) return "it is laid out over several devices";
  for (int j = 0; j < p->nin; j++)
    if (j != i && in[j] == a) {
      snprintf(why, cap, "the same array is also passed as input %d (donated buffer passed twice)",
               j);
      return why;
    }
  for (int c = 0; c < p->nconst; c++)
    if (p->constval[c] == a) return "the function also holds it as a constant";
  return NULL;
}

/* Why donated input i cannot give its buffer to this run, or NULL. */
static const char *donation_refused(const jx_program *p, jx_array *const *in, int i, char *why,
                                    size_t cap) {
  const jx_array *a = in[i];
  if (jx_array_shards(a)) return "it is laid out over several devices";
  if (!a->buf) return "it has no buffer of its own";
  if (atomic_load_explicit(&a->buf->refs, memory_order_acquire) > 1)
    return "its buffer is shared with another array (a reshape or view of it, or its source)";
  return jx_donation_conflict(p, in, i, why, cap);
}

/* Takes the buffers of the donated inputs that can give them (run_state's
 * owned), marking the caller's arrays donated; the others run undonated,
 * with one line under JX_LOG_COMPILES=1, as JAX warns. */
static jx_status take_donated(const jx_executable *x, const jx_program *p, jx_array *const *in,
                              run_state *rs) {
  rs->owned = calloc((size_t)p->nvars + 1, 1);
  if (!rs->owned) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
  for (int i = 0; i < p->nin; i++) {
    if (!x->donate[i]) continue;
    char why[128];
    const char *refused = donation_refused(p, in, i, why, sizeof why);
    if (refused) {
      if (jx_env_flag("JX_LOG_COMPILES") && !x->warned[i]) {
        x->warned[i] = 1;
        fprintf(stderr, "jx: donated input %d of '%s' was not usable: %s\n", i, x->donor, refused);
      }
      continue;
    }
    int v = p->in[i];
    jx_array *t = jx_array_take_buffer(in[i], x->donor, i);
    if (t->poisoned) return jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
    rs->env[v] = t;
    rs->owned[v] = 1;
    if (x->last_step[v] < 0) { /* never read: free it now */
      jx_scope_release_now(t);
      rs->env[v] = NULL;
    }
  }
  return JX_OK;
}

jx_status jx_executable_run(const jx_executable *x, const jx_program *p, jx_array *const *in,
                            jx_array **out) {
  double t_run = x->tiers ? now_s() : 0;
  const void *top = jx_donation_swap(NULL);           /* only jx_call's own program donates */
  if (x->lowered && p == x->attached) p = x->lowered; /* the same inputs and outputs */
  jx_array **env = calloc((size_t)p->nvars + 1, sizeof *env);
  if (!env) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
  const jx_exec_nested *outer_nested = jx_exec_nested_enter(&x->nested);
  for (int i = 0; i < p->nin; i++) env[p->in[i]] = in[i];
  for (int c = 0; c < p->nconst; c++) env[p->constvar[c]] = p->constval[c];
  jx_status st = JX_OK;
  jx_scope_begin(); /* intermediates belong to the run, freed after their last use */
  run_state rs = {x, env, NULL};
  for (int i = 0; i < p->nin && !st; i++) /* dispatched runs still to end (async_dispatch.c) */
    if (jx_array_pending(in[i])) st = jx_array_ready(in[i]);
  /* only jx_call's own program donates; what it runs inside does not */
  if (top && (top == p || top == x->attached) && x->donate && !st) {
    jx_dispatch_wait_all(); /* queued runs may still read the buffers it takes */
    st = take_donated(x, p, in, &rs);
  }
  jx_debug_exec_enter();
  in_flight flight = {0};
  int started = 0, paired = 0, fused = 0;
  int profiled = jx_debug_flags & JX_DEBUG_PROFILE; /* the run's memory (base/hooks.h) */
  if (profiled) jx_prof_function_begin(p, &((jx_executable *)x)->peak_estimate);
  for (int k = 0; k < x->nsteps && !st; k++) {
    const step *s = &x->steps[k];
    const int k0 = k; /* a step that also ran the next one is profiled as this one */
    int64_t t0 = x->profile ? jx_now_ns() : 0, c0 = x->profile ? thread_cpu_ns() : 0;
    if (s->group.skip) continue;  /* read through by the kernels, or dead */
    int watched = jx_debug_flags; /* the debugging tools (base/hooks.h) */
    double tp = 0;
    if (watched & JX_DEBUG_PROFILE) {
      jx_prof_compute_begin();
      tp = jx_prof_now();
    }
    const char *old_op = jx_memstats_set_op(x->step_names[k]);
    if (flight.n) step_reads(x, p, k, finish_if_read, &flight);
    st = flight.st; /* a collective this step reads failed */
    paired = fused = 0;
    if (!st && s->with_next && !watched && !x->profile && !flight.n)
      st = run_pair(p, &p->eqns[s->group.first], &p->eqns[s[1].group.first], env, &paired);
    if (st || paired) {
      /* stop here, or this step and the next one ran */
    } else if (s->epilogue && !watched && !flight.n && (fused = run_epilogue(&rs, p, k, &st))) {
      /* the product and the next step's sum ran as one */
    } else if (s->fn) {
      st = run_kernel(&rs, p, k);
    } else if (s->attention) {
      st = jx_cpu_attention_run(&p->eqns[s->group.first], s->attention, env);
    } else if (update_in_place(&rs, p, k, &st)) {
      /* the operand's buffer took the update */
    } else if ((started = start_collective(p, s, env, &flight))) {
      if (started < 0) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
    } else {
      for (int e = s->group.first; e < s->group.first + s->group.count && !st; e++)
        st = run_eqn(p, &p->eqns[e], env);
    }
    jx_memstats_set_op(old_op);
    if (watched & JX_DEBUG_PROFILE)
      jx_prof_compute(x->step_names[k], tp, jx_prof_now(), x->step_flops[k], x->step_bytes[k]);
    if (!st && (watched & (JX_DEBUG_NANS | JX_DEBUG_INFS)))
      st = jx_debug_check_step(p, s->group.first, s->group.count, s->fn != NULL, env);
    if (!st && (paired || fused)) step_reads(x, p, k++, release_dead, &rs);
    if (!st) step_reads(x, p, k, release_dead, &rs);
    if (x->profile) {
      atomic_fetch_add(&x->profile[k0].wall_ns, jx_now_ns() - t0);
      atomic_fetch_add(&x->profile[k0].cpu_ns, thread_cpu_ns() - c0);
    }
  }
  while (flight.n) finish_at(&flight, 0); /* also after a failure: they hold buffers */
  if (!st) st = flight.st;
  if (profiled) jx_prof_function_end();
  jx_debug_exec_leave();
  if (x->profile) atomic_fetch_add(&((jx_executable *)x)->runs, 1);
  for (int o = 0; o < p->nout && !st; o++) out[o] = jx_keep(env[p->out[o]]);
  jx_scope_end();
  for (int o = 0; o < p->nout && !st; o++) jx_scope_adopt(out[o]);
  jx_exec_nested_leave(outer_nested);
  free(env);
  free(rs.owned);
  if (x->tiers && !st) jx_kernel_units_ran(x->tiers, now_s() - t_run);
  return st;
}

jx_status jx_executable_set_donation(jx_executable *x, int nin, const int *donate,
                                     const char *fn_name) {
  int any = 0;
  for (int i = 0; donate && i < nin; i++) any |= donate[i] != 0;
  if (!any) return JX_OK;
  x->donate = calloc((size_t)nin, 1);
  x->warned = calloc((size_t)nin, 1);
  x->donor = strdup(fn_name ? fn_name : "jit");
  if (!x->donate || !x->warned || !x->donor) {
    free(x->donate);
    free(x->warned);
    free(x->donor);
    x->donate = x->warned = NULL;
    x->donor = NULL;
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
  }
  for (int i = 0; i < nin; i++) x->donate[i] = donate[i] != 0;
  return JX_OK;
}

int jx_executable_donates(const jx_executable *x) { return x->donate != NULL; }
int jx_executable_synchronous(const jx_executable *x) { return x->synchronous; }

static jx_status run_attached(void *exec, const jx_program *p, jx_array *const *in,
                              jx_array **out) {
  if (jx_dispatch_wanted(exec, p)) return jx_dispatch_submit(exec, p, in, out);
  return jx_executable_run(exec, p, in, out);
}
static void free_attached(void *exec) { jx_executable_free(exec); }

const uint8_t *jx_program_donation(const jx_program *p) {
  jx_exec x = p ? jx_program_exec(p) : (jx_exec){0};
  return x.run == run_attached ? ((const jx_executable *)x.impl)->donate : NULL;
}

const jx_exec_nested *jx_executable_nested(const jx_executable *x) { return &x->nested; }

const jx_executable *jx_exec_cpu(jx_exec e) { return e.run == run_attached ? e.impl : NULL; }

jx_status jx_compile(const jx_program *p, const char *dump_prefix, jx_exec *out,
                     jx_compile_times *times) {
  double t0 = now_s();
  *out = (jx_exec){0};
  jx_compile_times t = {0};
  jx_program *run = jx_lower_custom_calls_keeping(p, jx_cpu_attention_kept);
  if (!run) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  /* the nested programs first, into a table of this executable's own */
  jx_exec_nested nested = {0};
  jx_status st = jx_compile_nested(run, dump_prefix, &nested);
  jx_executable *x = st ? NULL : jx_executable_build(run, dump_prefix, &t);
  if (x && run != p) x->lowered = jx_program_retain(run);
  if (x) {
    x->attached = p;
    x->nested = nested;
  } else {
    jx_exec_nested_free(&nested);
  }
  jx_program_release(run);
  if (st) return st;
  if (!x) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  t.total = now_s() - t0;
  if (jx_debug_flags & JX_DEBUG_PROFILE) /* the jit, shard_map and pmap all compile here */
    jx_prof_compile(p->name, t0, &t);
  if (times) *times = t;
  *out = (jx_exec){x, run_attached, free_attached};
  return JX_OK;
}

jx_status jx_compile_attach(const jx_program *p, const char *dump_prefix, jx_compile_times *times) {
  jx_exec x;
  jx_status st = jx_compile(p, dump_prefix, &x, times);
  if (!st) jx_program_attach(p, x);
  return st;
}
