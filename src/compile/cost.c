/* jx_fn_cost: what a call will cost, before running it, from the program the
 * jit would run and its fusion plan: flops (XLA's convention: one per
 * elementwise result, 2*M*N*K per contraction), bytes moved between memory
 * and the kernels, and the peak of live buffers when every intermediate is
 * freed after its last use, as the executable does. A checkpointed region
 * (remat) counts the work of its nested program where it runs: the forward
 * pass runs it whole, and the backward pass's recomputation is ordinary
 * equations of the program, so a checkpointed gradient costs its
 * recomputed forward work on top of the plain one. */
#include <stdlib.h>
#include <string.h>

#include <jx/transform.h>

#include "../base/error.h"
#include "../prims/prims.h"
#include "../trace/fn.h"
#include "fusion.h"
#include "cost.h"
#include "executable.h"
#include "lower.h"
#include "simplify.h"

double jx_aval_bytes(jx_aval a) {
  return (double)jx_shape_numel(a.shape) * (double)jx_dtype_size(a.dtype);
}

double jx_eqn_flops(const jx_program *p, const jx_eqn *e) {
  if (e->nout < 1) return 0;
  jx_aval out = p->avals[e->out[0]];
  double n = (double)jx_shape_numel(out.shape);
  switch (e->prim->id) {
  case JX_PRIM_dot_general: {
    jx_aval a = p->avals[e->in[0]];
    double k = 1;
    for (int i = 0; i < e->params.l[0].n; i++) k *= (double)a.shape.dims[e->params.l[0].v[i]];
    return 2 * n * k;
  }
  case JX_PRIM_conv_general_dilated: {
    jx_aval w = p->avals[e->in[1]];
    double per = (double)jx_shape_numel(w.shape) / (double)w.shape.dims[e->params.l[6].v[0]];
    return 2 * n * per;
  }
  case JX_PRIM_reduce_sum:
  case JX_PRIM_reduce_max:
  case JX_PRIM_reduce_min:
  case JX_PRIM_reduce_prod: return (double)jx_shape_numel(p->avals[e->in[0]].shape);
  default: return e->prim->elementwise ? n : 0;
  }
}

static void program_cost(const jx_program *given, const uint8_t *donate, jx_cost *c);

/* The most any of q's nested programs holds at once beyond its inputs. */
static double sub_temporaries(const jx_eqn *q) {
  double most = 0;
  for (int b = 0; b < q->nsub; b++) {
    const jx_program *sp = q->sub[b];
    jx_cost sub = {0};
    program_cost(sp, NULL, &sub);
    double inputs = 0;
    for (int i = 0; i < sp->nin; i++) inputs += jx_aval_bytes(sp->avals[sp->in[i]]);
    for (int i = 0; i < sp->nconst; i++) inputs += jx_aval_bytes(sp->avals[sp->constvar[i]]);
    if (sub.peak_bytes_per_device - inputs > most) most = sub.peak_bytes_per_device - inputs;
  }
  return most;
}

/* donate (per input, or NULL): inputs the run frees after their last use,
 * as an executable does with donated buffers (executable.c). The program
 * costed is the lowered one the executable runs (lower.h): a custom call's
 * equations, inlined, have their own flops and temporaries (attention's
 * T x T scores inside its custom_vjp calls). */
static void program_cost(const jx_program *given, const uint8_t *donate, jx_cost *c) {
  /* lowering only takes a reference to a program without custom calls */
  jx_program *p = jx_lower_custom_calls((jx_program *)given);
  if (!p) return;
  jx_fusion_group *groups = NULL;
  int ng = jx_fuse(p, &groups);
  if (ng < 0) {
    jx_program_release(p);
    return;
  }
  int *last = malloc(sizeof *last * (size_t)(p->nvars + 1));
  uint8_t *temp = calloc((size_t)p->nvars + 1, 1);
  if (!last || !temp) {
    free(groups);
    free(last);
    free(temp);
    jx_program_release(p);
    return;
  }
  /* what each group reads as arrays, as the executable does */
#define FOR_READS(g, v, BODY) JX_FUSION_FOR_READS(p, g, jx_fusion_group_is_kernel(g), v, BODY)
  for (int v = 0; v < p->nvars; v++) last[v] = -1;
  for (int k = 0; k < ng; k++) FOR_READS(&groups[k], v, last[v] = k);
  for (int o = 0; o < p->nout; o++) last[p->out[o]] = ng;
  double live = 0, peak = 0;
  for (int i = 0; i < p->nin; i++) live += jx_aval_bytes(p->avals[p->in[i]]);
  for (int i = 0; i < p->nconst; i++) live += jx_aval_bytes(p->avals[p->constvar[i]]);
  for (int i = 0; donate && i < p->nin; i++)
    if (donate[i]) {
      temp[p->in[i]] = 1;
      if (last[p->in[i]] < 0) live -= jx_aval_bytes(p->avals[p->in[i]]); /* freed at once */
    }
  peak = live;
  for (int k = 0; k < ng; k++) {
    const jx_fusion_group *g = &groups[k];
    if (g->skip) continue;
    int fused = jx_fusion_group_is_kernel(g);
    for (int e = g->first; e < g->first + g->count; e++) {
      const jx_eqn *q = &p->eqns[e];
      c->flops += jx_eqn_flops(p, q);
      for (int o = 0; o < q->nout; o++) temp[q->out[o]] = 1;
      if (fused) continue;
      if (q->prim == &jx_prim_remat && q->nsub >= 1) {
        /* its program's own traffic and temporaries, beside what is live */
        jx_cost sub = {0};
        program_cost(q->sub[0], NULL, &sub);
        c->flops += sub.flops;
        c->bytes_accessed += sub.bytes_accessed;
        double inputs = 0;
        for (int i = 0; i < q->nin; i++) inputs += jx_aval_bytes(p->avals[q->in[i]]);
        if (live + sub.peak_bytes_per_device - inputs > peak)
          peak = live + sub.peak_bytes_per_device - inputs;
        for (int o = 0; o < q->nout; o++) live += jx_aval_bytes(p->avals[q->out[o]]);
        continue;
      }
      if (q->nsub >= 1 && (q->prim->id == JX_PRIM_cond || q->prim->id == JX_PRIM_shard_map)) {
        /* the temporaries of the branch that needs most (of the body: a
         * shard_map's body is the program each device runs), beside what
         * is live; its work is not added to the totals */
        double extra = sub_temporaries(q);
        if (live + extra > peak) peak = live + extra;
      }
      for (int i = 0; i < q->nin; i++) c->bytes_accessed += jx_aval_bytes(p->avals[q->in[i]]);
      for (int o = 0; o < q->nout; o++) {
        c->bytes_accessed += jx_aval_bytes(p->avals[q->out[o]]);
        live += jx_aval_bytes(p->avals[q->out[o]]);
      }
    }
    if (fused) {
      for (int l = 0; l < g->nloads; l++)
        c->bytes_accessed += jx_aval_bytes(p->avals[g->loads[l].var]);
      for (int s = 0; s < g->nstores; s++) {
        c->bytes_accessed += jx_aval_bytes(p->avals[g->stores[s]]);
        live += jx_aval_bytes(p->avals[g->stores[s]]);
      }
    }
    if (live > peak) peak = live;
    FOR_READS(
        g, v, if (temp[v] && last[v] == k) {
          live -= jx_aval_bytes(p->avals[v]);
          last[v] = -2; /* counted once */
        });
  }
#undef FOR_READS
  if (peak > c->peak_bytes_per_device) c->peak_bytes_per_device = peak;
  free(groups);
  free(last);
  free(temp);
  jx_program_release(p);
}

void jx_program_cost(const jx_program *p, jx_cost *c) { program_cost(p, NULL, c); }

jx_status jx_fn_cost(jx_fn *f, jx_array *const *example_in, jx_cost *out) {
  if (!f || !out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_fn_cost: f or out is NULL");
  memset(out, 0, sizeof *out);
  jx_aval *av = malloc(sizeof *av * (size_t)(f->nin + 1));
  if (!av) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_fn_cost: out of memory");
  for (int i = 0; i < f->nin; i++) {
    if (!example_in || !example_in[i] || example_in[i]->poisoned) {
      free(av);
      return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_fn_cost: input %d is missing", i);
    }
    av[i] = (jx_aval){example_in[i]->dtype, example_in[i]->weak, example_in[i]->shape, 0};
  }
  jx_program *p = jx_fn_program(f, av);
  free(av);
  if (!p) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_program *s = jx_program_executable(p) ? jx_program_retain(p) : jx_simplify(p); /* as run */
  jx_program_release(p);
  if (!s) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  program_cost(s, jx_program_donation(s), out);
  jx_program_release(s);
  return JX_OK;
}
