/* Recomputation of cheap values before their late reads (recompute.h).
 *
 * For each large value v made by a renderable elementwise equation, the
 * reads of v are split at their widest gap: the reads after it are late (a
 * backward pass reading a forward value). If a chain of at most MAX_CHAIN
 * renderable equations computes v again at its first late read from values
 * that are alive there anyway (their last read is later or a few equations
 * earlier, or they are inputs, constants or small), the chain is cloned there and the late reads
 * take the clone; v then dies after its early reads. Values are taken in program order, and the
 * lifetimes this changes are updated as it goes, so a later chain never leans on a value that an
 * earlier rewrite let die. A clone made for one late read serves others at most REUSE_WINDOW
 * equations later, when no equation that is not cloned (a GEMM) lies between: read across one,
 * it would be kept in memory over it, so it is made again. Broadcasts do not count in a chain's
 * length (a kernel reads them through).
 *
 * A value that would die in the forward pass can also be kept for the clones
 * (a GELU's pre-activation, made by a GEMM, which is not cloned: the GELU and
 * its custom derivative are functions of it alone). A first planning lets
 * any such value live on to the clones that need it and counts, per value,
 * the bytes of the values whose clones need it and no other such value; a
 * second planning keeps alive only the values made by equations that are
 * not cloned and that let more bytes die than they are. */
#include "recompute.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../prims/prims.h"
#include "cost.h"
#include "fusion.h"

enum {
  MIN_BYTES = 256 << 10,  /* smaller values are not worth a clone */
  SMALL_BYTES = 64 << 10, /* kept alive longer for a clone without a second thought */
  GAP_MIN = 48,           /* equations between early and late reads */
  MAX_CHAIN = 16,
  MAX_DEPTH = 12,
  REUSE_WINDOW = 16,
  EXTEND_WINDOW = 32, /* a value read up to this many equations before a clone lives on to it */
  MAX_CLONES = (MAX_CHAIN + 1) * 9 /* clones of one plan: its equations and their broadcasts */
};

typedef struct {
  int eqn, pos; /* the original equation, cloned just before equation pos */
  int in_at;    /* its inputs in ins[in_at ...]: >= 0 an original variable, <= -2 clone -r-2 */
} clone_rec;

typedef struct {
  const jx_program *p;
  int *def, *last;        /* per variable: defining equation (-1: input/constant), last read */
  int *redir_t, *redir_c; /* reads from equation redir_t on take clone redir_c */
  int *memo_c, *memo_pos; /* the latest clone of a variable, and where it is */
  clone_rec *clones;
  int nclones, cap_clones;
  int *ins;
  int nins, cap_ins;
  int *touched; /* variables whose memo an attempt set (undone when it fails) */
  int ntouched;
  const int *last0;     /* last reads before any plan */
  const uint8_t *keep;  /* values that may live on past their last read for a clone */
  int keep_all;         /* the first planning: any value may */
  double *gain;         /* per kept value: bytes of the values whose clones read it */
  int *seen_var, stamp; /* count_gain's marks */
  int *breaks;          /* per equation: how many before it are not cloneable */
} planner;

static double var_bytes(const jx_program *p, int v) { return jx_aval_bytes(p->avals[v]); }

static int cloneable(const jx_program *p, const jx_eqn *e) {
  return !e->prim->effect && jx_fusion_renderable(e, p);
}

static int available(const planner *pl, int w, int t) {
  return pl->def[w] < 0 || pl->last[w] >= t - EXTEND_WINDOW || var_bytes(pl->p, w) <= SMALL_BYTES;
}

static int ref(planner *pl, int w, int t, int depth, int *budget);

/* Clones equation k at t; returns the clone's reference, or -1. */
static int clone_eqn(planner *pl, int k, int t, int depth, int *budget) {
  const jx_eqn *e = &pl->p->eqns[k];
  /* a broadcast costs a kernel nothing (read through with stride 0), so it
   * leaves the budget to the chain's arithmetic */
  if (depth > MAX_DEPTH || !cloneable(pl->p, e) ||
      (e->prim != &jx_prim_broadcast_in_dim && --*budget < 0) || pl->ntouched == MAX_CLONES)
    return -1;
  int refs[8];
  if (e->nin > 8) return -1;
  for (int i = 0; i < e->nin; i++)
    if ((refs[i] = ref(pl, e->in[i], t, depth + 1, budget)) == -1) return -1;
  if (pl->nclones == pl->cap_clones || pl->nins + e->nin > pl->cap_ins) {
    int cc = pl->cap_clones * 2 + 16, ci = pl->cap_ins * 2 + 64;
    clone_rec *c = realloc(pl->clones, sizeof *c * (size_t)cc);
    if (c) pl->clones = c, pl->cap_clones = cc;
    int *in = realloc(pl->ins, sizeof *in * (size_t)ci);
    if (in) pl->ins = in, pl->cap_ins = ci;
    if (!c || !in) return -1;
  }
  pl->clones[pl->nclones] = (clone_rec){k, t, pl->nins};
  for (int i = 0; i < e->nin; i++) pl->ins[pl->nins++] = refs[i];
  int v = e->out[0];
  pl->memo_c[v] = pl->nclones;
  pl->memo_pos[v] = t;
  pl->touched[pl->ntouched++] = v;
  return -(pl->nclones++) - 2;
}

/* How equation t reads w: w itself, a clone (new or recent), or -1. */
static int ref(planner *pl, int w, int t, int depth, int *budget) {
  if (available(pl, w, t)) return w;
  int c = pl->memo_c[w];
  if (c >= 0 && pl->memo_pos[w] <= t && t - pl->memo_pos[w] <= REUSE_WINDOW &&
      pl->breaks[t] == pl->breaks[pl->memo_pos[w]])
    return -c - 2;
  int nclones = pl->nclones, nins = pl->nins, ntouched = pl->ntouched, left = *budget;
  int r = clone_eqn(pl, pl->def[w], t, depth, budget);
  if (r != -1 || !(pl->keep_all || (pl->keep && pl->keep[w]))) return r;
  for (int i = ntouched; i < pl->ntouched; i++) pl->memo_c[pl->touched[i]] = -1;
  pl->nclones = nclones, pl->nins = nins, pl->ntouched = ntouched, *budget = left;
  return w; /* kept alive to t instead */
}

/* The reads of v (equation indices, ascending), into r; returns how many. */
static int reads_of(const jx_program *p, int v, int from, int *r) {
  int n = 0;
  for (int k = from; k < p->neqns; k++)
    for (int i = 0; i < p->eqns[k].nin; i++)
      if (p->eqns[k].in[i] == v) {
        r[n++] = k;
        break;
      }
  return n;
}

/* The first planning's count: each value that the clone c of v reads (itself or
 * through the clones it reads, made for earlier values too) and that would
 * have died long before t gains v's bytes. */
static void count_gain(planner *pl, int c, int v, int t) {
  uint8_t *seen = calloc((size_t)pl->nclones, 1);
  int *stack = malloc(sizeof *stack * (size_t)pl->nclones);
  int n = 0, nkept = 0, kept = -1;
  if (!seen || !stack) goto done;
  pl->stamp++;
  stack[n++] = c;
  seen[c] = 1;
  while (n) {
    const clone_rec *k = &pl->clones[stack[--n]];
    const jx_eqn *e = &pl->p->eqns[k->eqn];
    for (int i = 0; i < e->nin; i++) {
      int r = pl->ins[k->in_at + i];
      if (r < 0) {
        if (!seen[-r - 2]) seen[-r - 2] = 1, stack[n++] = -r - 2;
      } else if (pl->seen_var[r] != pl->stamp) {
        pl->seen_var[r] = pl->stamp;
        if (pl->def[r] >= 0 && pl->last0[r] < t - EXTEND_WINDOW &&
            var_bytes(pl->p, r) > SMALL_BYTES)
          kept = nkept++ ? -1 : r;
      }
    }
  }
  if (nkept == 1) pl->gain[kept] += var_bytes(pl->p, v);
done:
  free(seen);
  free(stack);
}

/* Plans a clone for v (made by equation d): 1 when planned. */
static int plan_value(planner *pl, int d, int v, int *reads) {
  int n = reads_of(pl->p, v, d + 1, reads);
  if (n == 0) return 0;
  int split = -1, gap = GAP_MIN - 1, prev = d;
  for (int i = 0; i < n; i++) {
    if (reads[i] - prev > gap) gap = reads[i] - prev, split = i;
    prev = reads[i];
  }
  if (split < 0) return 0;
  int t = reads[split], budget = MAX_CHAIN, clones_before = pl->nclones, ins_before = pl->nins;
  pl->ntouched = 0;
  int c = clone_eqn(pl, d, t, 0, &budget);
  if (c == -1) { /* undo the attempt */
    for (int i = 0; i < pl->ntouched; i++) pl->memo_c[pl->touched[i]] = -1;
    pl->nclones = clones_before;
    pl->nins = ins_before;
    return 0;
  }
  pl->redir_t[v] = t;
  pl->redir_c[v] = -c - 2;
  pl->last[v] = split > 0 ? reads[split - 1] : d;
  /* the originals the new clones read now live until t */
  for (int k = clones_before; k < pl->nclones; k++) {
    const jx_eqn *e = &pl->p->eqns[pl->clones[k].eqn];
    for (int i = 0; i < e->nin; i++) {
      int r = pl->ins[pl->clones[k].in_at + i];
      if (r >= 0 && pl->last[r] < t) pl->last[r] = t;
    }
  }
  if (pl->gain) count_gain(pl, -c - 2, v, t);
  return 1;
}

/* The clones in order of position, then of creation (a clone's inputs were
 * made before it): a counting sort over positions. */
static int sort_by_pos(const planner *pl, int *order) {
  int ne = pl->p->neqns;
  int *start = calloc((size_t)ne + 2, sizeof *start);
  if (!start) return 0;
  for (int c = 0; c < pl->nclones; c++) start[pl->clones[c].pos + 1]++;
  for (int k = 0; k <= ne; k++) start[k + 1] += start[k];
  for (int c = 0; c < pl->nclones; c++) order[start[pl->clones[c].pos]++] = c;
  free(start);
  return 1;
}

/* The program with the planned clones placed before their equations. */
static jx_program *rebuild(planner *pl) {
  const jx_program *p = pl->p;
  jx_program *q = jx_program_new(p->name);
  int *map = malloc(sizeof *map * (size_t)(p->nvars + 1));
  int *in_map =
      malloc(sizeof *in_map * (size_t)(p->nvars + 1)); /* map, with clones for late reads */
  int *cvar = malloc(sizeof *cvar * (size_t)(pl->nclones + 1));
  int *order = malloc(sizeof *order * (size_t)(pl->nclones + 1));
  int *outs = malloc(sizeof *outs * (size_t)(p->nout + 1));
  jx_status st = (q && map && in_map && cvar && order && outs)
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "recompute: out of memory");
  for (int i = 0; i < p->nin && !st; i++)
    map[p->in[i]] = jx_program_add_input(q, p->avals[p->in[i]]);
  for (int c = 0; c < p->nconst && !st; c++)
    map[p->constvar[c]] = jx_program_add_const(q, p->constval[c]);
  if (!st && !sort_by_pos(pl, order))
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "recompute: out of memory");
  int next = 0;
  for (int k = 0; k < p->neqns && !st; k++) {
    for (; next < pl->nclones && pl->clones[order[next]].pos == k && !st; next++) {
      const clone_rec *c = &pl->clones[order[next]];
      const jx_eqn *e = &p->eqns[c->eqn];
      int in[8], out;
      for (int i = 0; i < e->nin; i++) {
        int r = pl->ins[c->in_at + i];
        in[i] = r >= 0 ? map[r] : cvar[-r - 2];
      }
      st = jx_program_add_eqn(q, e->prim, &e->params, e->nin, in, 1, &p->avals[e->out[0]], &out, 0,
                              NULL, e->loc);
      cvar[order[next]] = out;
    }
    const jx_eqn *e = &p->eqns[k];
    for (int i = 0; i < e->nin; i++) { /* late reads take the clone */
      int w = e->in[i];
      in_map[w] = pl->redir_t[w] <= k ? cvar[pl->redir_c[w]] : map[w];
    }
    if (!st) st = jx_program_copy_eqn(q, p, e, in_map, map);
  }
  for (int o = 0; o < p->nout && !st; o++) outs[o] = map[p->out[o]];
  if (!st) st = jx_program_set_outputs(q, p->nout, outs);
  free(map);
  free(in_map);
  free(cvar);
  free(order);
  free(outs);
  if (st) {
    jx_program_release(q);
    return NULL;
  }
  return q;
}

/* One planning over p from fresh lifetimes; returns how many values it plans. */
static int plan_all(planner *pl, const uint8_t *is_out, int *reads) {
  const jx_program *p = pl->p;
  int nv = p->nvars + 1, planned = 0;
  memcpy(pl->last, pl->last0, sizeof(int) * (size_t)nv);
  for (int v = 0; v < nv; v++) {
    pl->memo_c[v] = -1;
    pl->redir_t[v] = INT_MAX;
  }
  pl->nclones = pl->nins = 0;
  for (int k = 0; k < p->neqns; k++) {
    const jx_eqn *e = &p->eqns[k];
    if (!cloneable(p, e) || e->prim == &jx_prim_broadcast_in_dim) continue;
    int v = e->out[0];
    if (is_out[v] || var_bytes(p, v) < MIN_BYTES) continue;
    planned += plan_value(pl, k, v, reads);
  }
  return planned;
}

jx_program *jx_recompute(jx_program *p) {
  if (!jx_env_flag("JX_RECOMPUTE")) return jx_program_retain(p);
  int nv = p->nvars + 1, ne = p->neqns;
  planner pl = {.p = p};
  pl.def = malloc(sizeof(int) * (size_t)nv);
  pl.last = malloc(sizeof(int) * (size_t)nv);
  int *last0 = malloc(sizeof(int) * (size_t)nv);
  pl.redir_t = malloc(sizeof(int) * (size_t)nv);
  pl.redir_c = malloc(sizeof(int) * (size_t)nv);
  pl.memo_c = malloc(sizeof(int) * (size_t)nv);
  pl.memo_pos = malloc(sizeof(int) * (size_t)nv);
  pl.touched = malloc(sizeof(int) * (size_t)MAX_CLONES);
  pl.gain = calloc((size_t)nv, sizeof(double));
  pl.seen_var = calloc((size_t)nv, sizeof(int));
  pl.breaks = calloc((size_t)ne + 1, sizeof(int));
  uint8_t *keep = calloc((size_t)nv, 1);
  int *reads = malloc(sizeof(int) * (size_t)(ne + 1));
  uint8_t *is_out = calloc((size_t)nv, 1);
  jx_program *r = NULL;
  if (!pl.def || !pl.last || !last0 || !pl.redir_t || !pl.redir_c || !pl.memo_c || !pl.memo_pos ||
      !pl.touched || !pl.gain || !pl.seen_var || !pl.breaks || !keep || !reads || !is_out) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "recompute: out of memory");
    goto done;
  }
  for (int v = 0; v < nv; v++) pl.def[v] = last0[v] = -1;
  for (int k = 0; k < ne; k++) {
    for (int i = 0; i < p->eqns[k].nin; i++) last0[p->eqns[k].in[i]] = k;
    for (int o = 0; o < p->eqns[k].nout; o++) pl.def[p->eqns[k].out[o]] = k;
  }
  for (int o = 0; o < p->nout; o++) {
    last0[p->out[o]] = ne;
    is_out[p->out[o]] = 1;
  }
  for (int k = 0; k < ne; k++) pl.breaks[k + 1] = pl.breaks[k] + !cloneable(p, &p->eqns[k]);
  pl.last0 = last0;
  /* first: which dead values made by equations no clone repeats (GEMMs)
   * would let more bytes die than they are */
  pl.keep_all = 1;
  if (plan_all(&pl, is_out, reads))
    for (int v = 0; v < nv; v++)
      keep[v] =
          pl.gain[v] > 0 && pl.gain[v] > var_bytes(p, v) && !cloneable(p, &p->eqns[pl.def[v]]);
  pl.keep_all = 0;
  pl.keep = keep;
  free(pl.gain);
  pl.gain = NULL;
  int planned = plan_all(&pl, is_out, reads);
  r = planned ? rebuild(&pl) : jx_program_retain(p);
done:
  free(pl.def);
  free(pl.last);
  free(last0);
  free(pl.redir_t);
  free(pl.redir_c);
  free(pl.memo_c);
  free(pl.memo_pos);
  free(pl.touched);
  free(pl.gain);
  free(pl.seen_var);
  free(pl.breaks);
  free(pl.clones);
  free(pl.ins);
  free(keep);
  free(reads);
  free(is_out);
  return r;
}
