/* The collectives' figures measured through the executor
 * (comm_model.h's jx_comm_model_calibrate). A collective in a step costs
 * more than its messages: the executor allocates its result, copies the
 * blocks in and out of the engine's buffers and meets the other devices at
 * a rendezvous, and what it costs beyond the messages differs by kind. So
 * each kind is timed as a step runs it: a per-device program (jx_shard_map
 * under jx_jit) chains CHAIN collectives of the kind over one group (a
 * mesh axis, or all its split axes together: a collective costs about
 * the same over any group, not per message, so a group's own figures
 * price it better than one axis's alpha per message), each result the
 * next one's operand, so that each intermediate is freed as a step's are:
 *
 *   all_reduce                   x = psum(x)
 *   all_gather, reduce_scatter   x = psum_scatter(all_gather(x)), half each
 *   all_to_all                   x = all_to_all(x)
 *   permute                      x = ppermute(x, each device to the next)
 *
 * with S (the formula's bytes, comm_model.h) n rows of 256 bytes, 256 KB
 * and 2 MB. A collective's time is its chain's less a call that returns
 * its block, over CHAIN; the ring formula's alpha follows from the two
 * smaller sizes, beta from the small to the middle one (blocks the caches
 * hold) and from the middle to the large one (past its knee: blocks the
 * devices' caches do not hold together). The bytes a collective over
 * another dimension reorders cost what an all_to_all along the columns
 * costs beyond one along the rows, at the middle and the large size. A
 * group's chains are timed together, in rounds (jx_calibration_time). */
#include "comm_model.h"

#include <jx/jx.h>
#include <jx/parallel.h>
#include <math.h>
#include <stdlib.h>

#include "../../base/error.h"
#include "../../base/str_append.h"
#include "../device.h"
#include "machine_model.h"

enum {
  CHAIN = 8,
  COLS = 64,                           /* floats per row of a block: 256 bytes */
  MID_ROWS = (256 << 10) / (COLS * 4), /* the middle block: 256 KB, the knee of beta */
  LARGE_ROWS = (2 << 20) / (COLS * 4), /* the large block: 2 MB; the small one n rows */
  SIZES = 3
};

typedef struct {
  jx_coll_kind kind; /* JX_COLL_KINDS: the baseline, which returns its block */
  const char *axis;
  int n;
  const int (*pairs)[2]; /* permute: each device of the axis to the next */
  int dim;               /* all_to_all: split and concatenate along it */
} chain_ctx;

static void chain_body(void *c, jx_array *const *in, jx_array **out) {
  const chain_ctx *k = c;
  jx_array *x = in[0];
  for (int s = 0; s < CHAIN && k->kind != JX_COLL_KINDS; s++) {
    switch (k->kind) {
    case JX_COLL_ALL_REDUCE: x = jx_psum(x, k->axis); break;
    case JX_COLL_ALL_GATHER: /* and reduce_scatter: a pair */
      x = jx_psum_scatter(jx_all_gather(x, k->axis, 0, 1), k->axis, 0, 1);
      break;
    case JX_COLL_REDUCE_SCATTER: break;
    case JX_COLL_ALL_TO_ALL: x = jx_all_to_all(x, k->axis, k->dim, k->dim); break;
    case JX_COLL_PERMUTE: x = jx_ppermute(x, k->axis, k->n, k->pairs); break;
    case JX_COLL_KINDS: break;
    }
  }
  out[0] = x;
}

/* A chain jitted over the mesh: its per-device program and the block it
 * runs on (the caller's scope's). */
typedef struct {
  chain_ctx ctx;
  jx_fn *body, *mapped, *jit;
  jx_array *block;
} chain;

/* Jits c's chain (its ctx and block set). */
static jx_status chain_make(chain *c, jx_mesh *m, const char *spec, jx_sharding *split) {
  c->body = jx_fn_create("calibration_collectives", 1, 1, chain_body, &c->ctx);
  c->mapped = c->body ? jx_shard_map(c->body, m, &spec, &spec) : NULL;
  c->jit = c->mapped ? jx_jit(c->mapped, &(jx_jit_options){.in_shardings = &split}) : NULL;
  return c->jit ? JX_OK : jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
}

static void chain_free(chain *c) {
  jx_fn_release(c->jit);
  jx_fn_release(c->mapped);
  jx_fn_release(c->body);
}

/* Seconds per byte between two sizes from the times there, non-negative
 * (timer noise), or `otherwise` where the times do not rise. */
static double slope(double b0, double t0, double b1, double t1, double otherwise) {
  double s = (t1 - t0) / (b1 - b0);
  return s > 0 && isfinite(s) ? s : otherwise;
}

/* alpha and beta (its knee at the middle size) of a kind over n devices
 * from its time per collective at the three sizes of the formula's S; a
 * fit that comes out non-positive (timer noise) charges the whole middle
 * time to bandwidth and the whole small time to latency, and past the knee
 * keeps the cached rate. */
static void fit(jx_coll_kind kind, double n, const double bytes[SIZES], const double secs[SIZES],
                double *alpha, jx_byte_rate *beta) {
  double messages, moved;
  jx_ring_terms(kind, n, &messages, &moved);
  double cached = slope(moved * bytes[0], secs[0], moved * bytes[1], secs[1],
                        fmax(secs[1], 1e-12) / (moved * bytes[1]));
  *beta = (jx_byte_rate){bytes[1], cached,
                         slope(moved * bytes[1], secs[1], moved * bytes[2], secs[2], cached)};
  *alpha = (secs[0] - moved * bytes[0] * cached) / messages;
  if (!(*alpha > 0) || !isfinite(*alpha)) *alpha = fmax(secs[0], 1e-12) / messages;
}

/* The chains of a group: per size, a call on the block of S and on the
 * block of S / n (the baselines), then per kind that is timed (all_gather
 * with reduce_scatter in pairs), then all_to_all along the columns on the
 * middle and the large block. */
enum {
  BASE = 0,
  BASE_GATHERED = SIZES,
  KINDS_TIMED = 2 * SIZES,
  ACROSS = KINDS_TIMED + (JX_COLL_KINDS - 1) * SIZES, /* at the middle size, then the large */
  CHAINS = ACROSS + SIZES - 1
};

/* The chain of kind k (not JX_COLL_REDUCE_SCATTER) at size z. */
static int timed_index(int k, int z) {
  return KINDS_TIMED + (k > JX_COLL_REDUCE_SCATTER ? k - 1 : k) * SIZES + z;
}

/* The figures of collectives over `axis` (one mesh axis, or several
 * "a,b") of n devices. */
static jx_status calibrate_group(jx_mesh *m, const char *axis, int n, jx_link_model *out,
                                 jx_byte_rate *reorder) {
  char spec[JX_EVERY_AXIS_SPEC_CAP];
  jx_every_axis_spec(m, spec);
  int(*pairs)[2] = malloc(sizeof *pairs * (size_t)n);
  chain *chains = calloc(CHAINS, sizeof *chains);
  jx_sharding *split = jx_sharding_create(m, spec);
  jx_status st = JX_OK;
  if (!pairs || !chains)
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_comm_model_calibrate: out of memory");
  else if (!split)
    st = jx_last_status();
  for (int d = 0; d < n && !st; d++) pairs[d][0] = d, pairs[d][1] = (d + 1) % n;
  /* the formula's S: n rows, 256 KB and 2 MB, in multiples of n rows (an
   * all_gather's block is S / n, a reduce_scatter splits S n ways) */
  const int64_t rows[SIZES] = {n, (MID_ROWS + n - 1) / n * n, (LARGE_ROWS + n - 1) / n * n};
  double bytes[SIZES];
  jx_scope_begin();
  const int(*p)[2] = (const int(*)[2])pairs;
  for (int z = 0; z < SIZES && !st; z++) {
    bytes[z] = (double)rows[z] * COLS * sizeof(float);
    /* placed once: the calls time the chains, not the slicing of their blocks */
    jx_array *block = jx_device_put(jx_ones(JX_F32, JX_SHAPE(rows[z] * m->ndev, COLS)), split);
    jx_array *gathered =
        jx_device_put(jx_ones(JX_F32, JX_SHAPE(rows[z] / n * m->ndev, COLS)), split);
    chains[BASE + z] = (chain){(chain_ctx){JX_COLL_KINDS, axis, n, p, 0}, .block = block};
    chains[BASE_GATHERED + z] =
        (chain){(chain_ctx){JX_COLL_KINDS, axis, n, p, 0}, .block = gathered};
    for (int k = 0; k < JX_COLL_KINDS; k++)
      if (k != JX_COLL_REDUCE_SCATTER)
        chains[timed_index(k, z)] = (chain){(chain_ctx){(jx_coll_kind)k, axis, n, p, 0},
                                            .block = k == JX_COLL_ALL_GATHER ? gathered : block};
    if (z > 0)
      chains[ACROSS + z - 1] =
          (chain){(chain_ctx){JX_COLL_ALL_TO_ALL, axis, n, p, 1}, .block = block};
  }
  int made = 0;
  for (; made < CHAINS && !st; made++) st = chain_make(&chains[made], m, spec, split);
  double secs[CHAINS] = {0};
  if (!st) {
    jx_calibration_program programs[CHAINS];
    for (int c = 0; c < CHAINS; c++)
      programs[c] = (jx_calibration_program){chains[c].jit, &chains[c].block};
    st = jx_calibration_time(m, CHAINS, programs, secs);
  }
  jx_scope_end();
  for (int c = 0; c < made; c++) chain_free(&chains[c]);
  for (int k = 0; k < JX_COLL_KINDS && !st; k++) {
    if (k == JX_COLL_REDUCE_SCATTER) continue; /* timed with all_gather */
    double per[SIZES];
    for (int z = 0; z < SIZES; z++) {
      int pair = k == JX_COLL_ALL_GATHER;
      per[z] = (secs[timed_index(k, z)] - secs[(pair ? BASE_GATHERED : BASE) + z]) / CHAIN /
               (pair ? 2 : 1);
    }
    fit((jx_coll_kind)k, n, bytes, per, &out->alpha_s[k], &out->beta[k]);
  }
  if (!st) {
    out->alpha_s[JX_COLL_REDUCE_SCATTER] = out->alpha_s[JX_COLL_ALL_GATHER];
    out->beta[JX_COLL_REDUCE_SCATTER] = out->beta[JX_COLL_ALL_GATHER];
    /* the reorder: all_to_all along the columns, whose blocks are put in
     * place before and after the exchange (2 S bytes), beyond one along
     * the rows, at the middle size (the knee) and the large one */
    double reordered[SIZES] = {0};
    for (int z = 1; z < SIZES; z++)
      reordered[z] =
          fmax(0, secs[ACROSS + z - 1] - secs[timed_index(JX_COLL_ALL_TO_ALL, z)]) / CHAIN;
    double cached = reordered[1] / (2 * bytes[1]);
    *reorder =
        (jx_byte_rate){2 * bytes[1], cached,
                       slope(2 * bytes[1], reordered[1], 2 * bytes[2], reordered[2], cached)};
  }
  free(pairs);
  free(chains);
  jx_sharding_release(split);
  if (st)
    return jx_error_set(st, "jx_comm_model_calibrate: mesh axes '%s': %s", axis, jx_last_error());
  return JX_OK;
}

jx_status jx_comm_model_calibrate(jx_comm_model *cm, jx_mesh *m) {
  if (!cm || !m)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_comm_model_calibrate: NULL %s",
                        cm ? "mesh" : "model");
  for (int p = 0; p < m->ndev; p++) {
    jx_device *d = jx_device_get(m->device[p]);
    if (!d) return jx_last_status();
    if (jx_device_process_index(d) != jx_devices_process_index())
      return jx_error_set(JX_ERR_UNIMPLEMENTED,
                          "jx_comm_model_calibrate: device %d of the mesh belongs to process %d; "
                          "calibration measures meshes of this process's devices only",
                          m->device[p], jx_device_process_index(d));
  }
  cm->naxes = m->ndim;
  cm->reorder = (jx_byte_rate){0, 0, 0};
  cm->group_axes = 0;
  char group[JX_MAX_RANK * (JX_MESH_NAME_CAP + 1)] = "";
  int split = 0;
  for (int a = 0; a <= m->ndim; a++) { /* each axis, then all the split ones together */
    jx_link_model *link = a < m->ndim ? &cm->link[a] : &cm->group;
    *link = jx_link_uniform(0, 0); /* an axis of one device has no links */
    if (a < m->ndim) cm->size[a] = m->size[a];
    if (a < m->ndim && m->size[a] > 1) {
      cm->group_axes |= 1u << a, split++;
      jx_str_append(group, sizeof group, "%s%s", *group ? "," : "", m->name[a]);
    }
    if (a < m->ndim ? m->size[a] < 2 : split < 2) continue;
    jx_byte_rate reorder = {0, 0, 0};
    jx_status st = a < m->ndim ? calibrate_group(m, m->name[a], (int)m->size[a], link, &reorder)
                               : calibrate_group(m, group, m->ndev, link, &reorder);
    if (st) return st;
    if (reorder.cached_s_per_byte + reorder.s_per_byte >
        cm->reorder.cached_s_per_byte + cm->reorder.s_per_byte)
      cm->reorder = reorder; /* the slowest group's: a device reorders alike on any */
  }
  if (split < 2) cm->group_axes = 0;
  return JX_OK;
}
