/* The collective primitives (parameter slots: collective.h): shape rules, and
 * the concrete implementation, which runs on a device thread of jx_spmd_run
 * and moves the data through the communicator of the named mesh axes. The
 * differentiation and batching rules are in collective_rules.c.
 *
 * Data movement: the engine exchanges contiguous blocks, one per rank. A
 * collective along a dim d sees its operand as [A][n or 1][R] (A = the dims
 * before d, R = the rest in bytes), so packing blocks for the engine and
 * unpacking what it returns is one swap of the two outer axes; when A is 1
 * (d leading) the engine reads and writes the arrays directly.
 *
 * Beyond collective.h's slots, the collectives whose shapes or checks depend
 * on the group size carry it, as JAX's all_gather and psum_scatter do
 * (axis_size: i2 for all_gather, psum_scatter and all_to_all, i1 for
 * ppermute), so their shape rules hold wherever their programs are checked
 * or transformed, with or without the named axes bound. 0 there means: the
 * size of the named axes bound now (while tracing) or of the mesh (on a
 * device). psum, pmax and pmin keep their operand's shape and need no size. */
#include "collective.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/cpu_features.h"
#include "../base/env.h"
#include "../base/error.h"
#include "../base/hooks.h"
#include "../ir/axis_env.h"
#include "../trace/vma.h"
#include "collective_rules.h"
#include "comm.h"
#include "device.h"

const char *jx_collective_public_name(const char *prim) {
  static const char *const map[][2] = {
      {"psum", "jx_psum"},
      {"pmax", "jx_pmax"},
      {"pmin", "jx_pmin"},
      {"all_gather", "jx_all_gather"},
      {"psum_scatter", "jx_psum_scatter"},
      {"all_to_all", "jx_all_to_all"},
      {"ppermute", "jx_ppermute"},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(map[i][0], prim) == 0) return map[i][1];
  return prim;
}

/* The size of the named axis: bound by an enclosing transformation while
 * tracing, or the mesh's axis on a device thread of jx_spmd_run. */
static int64_t axis_size(const char *name) {
  int64_t n = jx_axis_env_size(name);
  const jx_spmd_ctx *c = jx_spmd_current();
  if (n < 0 && c) n = jx_mesh_axis_size(c->mesh, name);
  return n;
}

jx_status jx_collective_group_size(const jx_params *p, const char *op, int64_t given, int64_t *n) {
  *n = given > 0 ? given : 1;
  if (p->l[0].n < 1) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: names no axis", op);
  if (given > 0) return JX_OK;
  for (int k = 0; k < p->l[0].n; k++) {
    const char *name = jx_axis_name((int)p->l[0].v[k]);
    int64_t s = axis_size(name);
    if (s < 0)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: no enclosing shard_map, pmap or vmap binds an axis named '%s'", op,
                          name);
    for (int j = 0; j < k; j++)
      if (p->l[0].v[j] == p->l[0].v[k])
        return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the axis '%s' is named twice", op, name);
    *n *= s;
  }
  return JX_OK;
}

/* ---- shape rules ---- */

static jx_status check_dim(const char *op, const char *what, int64_t d, int lo_incl_rank,
                           const jx_aval *x) {
  int r = x->shape.rank + lo_incl_rank;
  if (d >= 0 && d < r) return JX_OK;
  char s[JX_AVAL_STR_CAP];
  return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %s %lld is out of range for an operand %s", op,
                      what, (long long)d, jx_aval_str(x->dtype, x->shape, s));
}

static jx_status infer_reduce(const char *prim, const jx_params *p, const jx_aval *in,
                              jx_aval *out) {
  int64_t n; /* the shape does not depend on the group: the size is not needed */
  jx_status st = jx_collective_group_size(p, jx_collective_public_name(prim), 1, &n);
  if (st) return st;
  out[0] = in[0];
  return JX_OK;
}

static jx_status infer_psum(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  return infer_reduce("psum", ctx->params, in, out);
}
static jx_status infer_pmax(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  return infer_reduce("pmax", ctx->params, in, out);
}
static jx_status infer_pmin(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  return infer_reduce("pmin", ctx->params, in, out);
}

static jx_status infer_all_gather(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  const char *op = "jx_all_gather";
  int64_t n, d = p->i[0];
  jx_status st = jx_collective_group_size(p, op, p->i[2], &n);
  if (!st) st = check_dim(op, "dim", d, p->i[1] ? 0 : 1, in);
  if (st) return st;
  out[0] = in[0];
  if (p->i[1]) {
    out[0].shape.dims[d] *= n;
    return JX_OK;
  }
  if (in[0].shape.rank == JX_MAX_RANK)
    return jx_error_set(JX_ERR_SHAPE, "%s: the result would have more than %d dims", op,
                        JX_MAX_RANK);
  out[0].shape.rank++;
  for (int k = out[0].shape.rank - 1; k > d; k--) out[0].shape.dims[k] = in[0].shape.dims[k - 1];
  out[0].shape.dims[d] = n;
  return JX_OK;
}

static jx_status infer_psum_scatter(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  const char *op = "jx_psum_scatter";
  int64_t n, d = p->i[0];
  jx_status st = jx_collective_group_size(p, op, p->i[2], &n);
  if (!st) st = check_dim(op, "dim", d, 0, in);
  if (st) return st;
  int64_t len = in[0].shape.dims[d];
  char s[JX_AVAL_STR_CAP];
  if (p->i[1] && len % n)
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: dim %lld of the operand %s has size %lld, not divisible by the "
                        "group size %lld",
                        op, (long long)d, jx_aval_str(in[0].dtype, in[0].shape, s), (long long)len,
                        (long long)n);
  if (!p->i[1] && len != n)
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: without tiling, dim %lld of the operand %s must equal the group "
                        "size %lld, but it is %lld",
                        op, (long long)d, jx_aval_str(in[0].dtype, in[0].shape, s), (long long)n,
                        (long long)len);
  out[0] = in[0];
  if (p->i[1]) {
    out[0].shape.dims[d] /= n;
    return JX_OK;
  }
  out[0].shape.rank--;
  for (int k = (int)d; k < out[0].shape.rank; k++) out[0].shape.dims[k] = in[0].shape.dims[k + 1];
  return JX_OK;
}

static jx_status infer_all_to_all(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  const char *op = "jx_all_to_all";
  int64_t n, sd = p->i[0], cd = p->i[1];
  jx_status st = jx_collective_group_size(p, op, p->i[2], &n);
  if (!st) st = check_dim(op, "split_dim", sd, 0, in);
  if (!st) st = check_dim(op, "concat_dim", cd, 0, in);
  if (st) return st;
  if (in[0].shape.dims[sd] % n) {
    char s[JX_AVAL_STR_CAP];
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: split_dim %lld of the operand %s has size %lld, not divisible by "
                        "the group size %lld",
                        op, (long long)sd, jx_aval_str(in[0].dtype, in[0].shape, s),
                        (long long)in[0].shape.dims[sd], (long long)n);
  }
  out[0] = in[0];
  out[0].shape.dims[sd] /= n;
  out[0].shape.dims[cd] *= n;
  return JX_OK;
}

jx_status jx_ppermute_pairs(const jx_params *p, int64_t n, const char *op, const int64_t **pairs,
                            int *npairs) {
  int len = 0;
  const int64_t *v = jx_interned_ints((int)p->i[0], &len);
  if (!v || len % 2)
    return jx_error_set(JX_ERR_INTERNAL, "%s: the permutation parameter is not a pair list", op);
  for (int k = 0; k < len; k += 2) {
    for (int j = 0; j < 2; j++)
      if (v[k + j] < 0 || v[k + j] >= n)
        return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                            "%s: pair %d (%lld, %lld) has a %s out of range for the group size "
                            "%lld",
                            op, k / 2, (long long)v[k], (long long)v[k + 1],
                            j ? "destination" : "source", (long long)n);
    for (int q = 0; q < k; q += 2)
      for (int j = 0; j < 2; j++)
        if (v[q + j] == v[k + j])
          return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                              "%s: pairs %d and %d have the same %s %lld (each device sends at "
                              "most once and receives at most once)",
                              op, q / 2, k / 2, j ? "destination" : "source", (long long)v[k + j]);
  }
  *pairs = v;
  *npairs = len / 2;
  return JX_OK;
}

static jx_status infer_ppermute(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  const char *op = "jx_ppermute";
  int64_t n;
  const int64_t *pairs;
  int npairs;
  jx_status st = jx_collective_group_size(p, op, p->i[1], &n);
  if (!st) st = jx_ppermute_pairs(p, n, op, &pairs, &npairs);
  if (st) return st;
  out[0] = in[0];
  return JX_OK;
}

/* ---- concrete execution on a device thread ---- */

typedef enum {
  K_PSUM,
  K_PMAX,
  K_PMIN,
  K_ALL_GATHER,
  K_PSUM_SCATTER,
  K_ALL_TO_ALL,
  K_PPERMUTE
} kind;

/* dst[q][p] = src[p][q] for blocks of r bytes (P x Q blocks). */
static void swap_outer(const char *src, char *dst, int64_t P, int64_t Q, size_t r) {
  for (int64_t p = 0; p < P; p++)
    for (int64_t q = 0; q < Q; q++)
      memcpy(dst + ((size_t)q * (size_t)P + (size_t)p) * r,
             src + ((size_t)p * (size_t)Q + (size_t)q) * r, r);
}

static int64_t prod(const jx_shape *s, int lo, int hi) {
  int64_t v = 1;
  for (int k = lo; k < hi; k++) v *= s->dims[k];
  return v;
}

/* The group size the program was traced for (0: not recorded; psum, pmax
 * and pmin keep their operand's shape and carry none). */
static int64_t traced_group_size(kind k, const jx_params *p) {
  return k == K_PPERMUTE ? p->i[1] : k >= K_ALL_GATHER ? p->i[2] : 0;
}

static jx_reduce_op reduce_op_of(kind k) {
  return k == K_PSUM ? JX_REDUCE_SUM : k == K_PMAX ? JX_REDUCE_MAX : JX_REDUCE_MIN;
}

/* Where rank sends (dst) and whence it receives (src) in ppermute's pairs
 * over a group of n; -1 for neither. */
static jx_status permute_peers(const jx_params *p, int64_t n, int rank, const char *op, int *dst,
                               int *src) {
  const int64_t *pairs;
  int npairs;
  jx_status st = jx_ppermute_pairs(p, n, op, &pairs, &npairs);
  *dst = *src = -1;
  for (int q = 0; q < npairs && !st; q++) {
    if (pairs[2 * q] == rank) *dst = (int)pairs[2 * q + 1];
    if (pairs[2 * q + 1] == rank) *src = (int)pairs[2 * q];
  }
  return st;
}

/* "a,b": the collective's axes, for the profiler. */
static void group_label(const jx_params *p, char *buf, size_t cap) {
  buf[0] = 0;
  for (int a = 0, len = 0; a < p->l[0].n && len < (int)cap; a++)
    len += snprintf(buf + len, cap - (size_t)len, "%s%s", a ? "," : "",
                    jx_axis_name((int)p->l[0].v[a]));
}

static jx_status exchange(kind k, const jx_params *p, const jx_tensor *x, jx_tensor *y,
                          const char *op) {
  size_t es = jx_dtype_size(x->dtype);
  size_t count = (size_t)jx_shape_numel(x->shape);               /* elements of x */
  if (count == 0 || jx_shape_numel(y->shape) == 0) return JX_OK; /* the same on every rank */
  int rank = 0;
  jx_comm *c = jx_spmd_comm(p->l[0].v, p->l[0].n, op, &rank);
  if (!c) return jx_last_status();
  int64_t n = jx_comm_size(c);
  int64_t want = traced_group_size(k, p);
  if (want > 0 && want != n)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: traced for a group of %lld devices, run on a group of %lld", op,
                        (long long)want, (long long)n);
  double t = jx_spmd_current()->timeout_s;
  char *tmp = NULL;
  jx_status st = JX_OK;
  switch (k) {
  case K_PSUM:
  case K_PMAX:
  case K_PMIN:
    return jx_comm_all_reduce(c, rank, x->data, y->data, count, x->dtype, reduce_op_of(k), t);
  case K_PPERMUTE: {
    int src, dst;
    if ((st = permute_peers(p, n, rank, op, &dst, &src))) return st;
    return jx_comm_permute(c, rank, x->data, y->data, count, x->dtype, dst, src, t);
  }
  case K_ALL_GATHER: { /* recv [n][A][R] -> y [A][n][R] */
    int d = (int)p->i[0];
    int64_t A = prod(&x->shape, 0, d);
    size_t R = (size_t)prod(&x->shape, d, x->shape.rank) * es;
    if (A == 1) return jx_comm_all_gather(c, rank, x->data, y->data, count, x->dtype, t);
    if (!(tmp = malloc(count * es * (size_t)n))) break;
    st = jx_comm_all_gather(c, rank, x->data, tmp, count, x->dtype, t);
    if (!st) swap_outer(tmp, y->data, n, A, R);
    free(tmp);
    return st;
  }
  case K_PSUM_SCATTER: { /* x [A][n][R] -> send [n][A][R] -> y [A][R] */
    int d = (int)p->i[0];
    int64_t A = prod(&x->shape, 0, d);
    size_t R = (size_t)prod(&x->shape, d, x->shape.rank) / (size_t)n * es;
    size_t out_count = count / (size_t)n;
    if (A == 1)
      return jx_comm_reduce_scatter(c, rank, x->data, y->data, out_count, x->dtype, JX_REDUCE_SUM,
                                    t);
    if (!(tmp = malloc(count * es))) break;
    swap_outer(x->data, tmp, A, n, R);
    st = jx_comm_reduce_scatter(c, rank, tmp, y->data, out_count, x->dtype, JX_REDUCE_SUM, t);
    free(tmp);
    return st;
  }
  case K_ALL_TO_ALL: {
    /* x [As][n][Rs] -> send [n][As][Rs]; recv [n][chunk], chunk = [Ac][Rc] -> y [Ac][n][Rc] */
    int sd = (int)p->i[0], cd = (int)p->i[1];
    jx_shape chunk = x->shape;
    chunk.dims[sd] /= n;
    int64_t As = prod(&x->shape, 0, sd), Ac = prod(&chunk, 0, cd);
    size_t Rs = (size_t)prod(&chunk, sd, chunk.rank) * es;
    size_t Rc = (size_t)prod(&chunk, cd, chunk.rank) * es;
    size_t per = count / (size_t)n; /* elements per block */
    if (!(tmp = malloc(count * es * (As == 1 || Ac == 1 ? 1 : 2)))) break;
    const char *send = As == 1 ? x->data : tmp;
    char *recv = Ac == 1 ? y->data : As == 1 ? tmp : tmp + count * es;
    if (As != 1) swap_outer(x->data, tmp, As, n, Rs);
    st = jx_comm_all_to_all(c, rank, send, recv, per, x->dtype, t);
    if (!st && Ac != 1) swap_outer(recv, y->data, n, Ac, Rc);
    free(tmp);
    return st;
  }
  }
  return jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
}

/* The exchange, timed for the profiler (base/hooks.h) while one runs. */
static jx_status run(kind k, const jx_params *p, const jx_tensor *x, jx_tensor *y, const char *op) {
  if (!(jx_debug_flags & JX_DEBUG_PROFILE)) return exchange(k, p, x, y, op);
  double t0 = jx_prof_now();
  jx_status st = exchange(k, p, x, y, op);
  char group[128];
  group_label(p, group, sizeof group);
  double bytes = (double)jx_shape_numel(x->shape) * (double)jx_dtype_size(x->dtype);
  jx_prof_collective(op + 3, t0, jx_prof_now(), bytes, "local shared memory", group);
  return st;
}

static jx_status impl(kind k, const jx_rule_ctx *ctx, const char *op, jx_array *const *in,
                      jx_array **out) {
  const jx_params *p = ctx->params;
  jx_status st = jx_array_ready(in[0]);
  if (st) return st;
  jx_aval a = {in[0]->dtype, in[0]->weak, in[0]->shape, 0}, o;
  if ((st = ctx->prim->infer(ctx, &a, &o))) return st;
  out[0] = jx_array_alloc(o.dtype, o.shape, o.weak);
  if (out[0]->poisoned) return jx_last_status();
  jx_tensor x = {in[0]->buf->data, a.dtype, a.shape}, y = {out[0]->buf->data, o.dtype, o.shape};
  return run(k, p, &x, &y, op);
}

/* ---- started now, finished later ----
 * The jit's executor starts a collective where the program has it and
 * finishes it where its result is first read, so the device computes what
 * lies between while the data moves (on the rank's helper thread of the
 * communicator). Only exchanges that read and write the arrays in place go
 * this way: all-reduces, permutes, and gathers and scatters along the
 * leading dim; the rest need packing around the exchange and run as usual.
 * Groups that span processes go ahead too: their requests run on one
 * helper thread per device in the order the device started them, which
 * keeps the one order MPI needs (comm.h). */
struct jx_collective_pending {
  jx_comm_request *req;
  jx_array *in; /* kept alive while the exchange reads it */
  const char *op;
  double bytes;
  char group[128];
};

static atomic_long async_started;

long jx_collective_async_started(void) { return atomic_load(&async_started); }

/* JX_ASYNC_COLLECTIVES, or, unset, whether the calling device's run has a
 * core per device: devices that outnumber the cores time-share them, so no
 * core is free to move a started collective's data while the device
 * computes, and the helper threads only lengthen the cores' queues (the
 * GPT step on 8 devices and 2 cores took a median 0.94 of its time with
 * them, its cores idle for less of it: docs/parallel.md). */
static int async_enabled(void) {
  static atomic_int given = -2; /* -2: unread; -1: unset; else the flag */
  int g = atomic_load(&given);
  if (g == -2) {
    const char *v = jx_env_string("JX_ASYNC_COLLECTIVES");
    g = v && *v ? jx_env_flag("JX_ASYNC_COLLECTIVES") : -1;
    atomic_store(&given, g);
  }
  if (g >= 0) return g;
  return jx_device_run_width() <= jx_cpu_count();
}

int jx_prim_is_collective(const jx_prim *p) {
  switch (p->id) {
  case JX_PRIM_psum:
  case JX_PRIM_pmax:
  case JX_PRIM_pmin:
  case JX_PRIM_all_gather:
  case JX_PRIM_psum_scatter:
  case JX_PRIM_all_to_all:
  case JX_PRIM_ppermute: return 1;
  default: return 0;
  }
}

int jx_collective_start(const jx_prim *prim, const jx_params *p, jx_array *in, jx_array **out,
                        jx_collective_pending **pending) {
  *pending = NULL;
  kind k;
  if (prim == &jx_prim_psum || prim == &jx_prim_pmax || prim == &jx_prim_pmin) {
    k = prim == &jx_prim_psum ? K_PSUM : prim == &jx_prim_pmax ? K_PMAX : K_PMIN;
  } else if (prim == &jx_prim_ppermute) {
    k = K_PPERMUTE;
  } else if (prim == &jx_prim_all_gather && p->i[0] == 0) {
    k = K_ALL_GATHER;
  } else if (prim == &jx_prim_psum_scatter && p->i[0] == 0) {
    k = K_PSUM_SCATTER;
  } else {
    return 0;
  }
  if (!async_enabled() || !jx_spmd_current()) return 0;
  const char *op = jx_collective_public_name(prim->name);
  if (jx_array_ready(in)) return -1;
  jx_aval a = {in->dtype, in->weak, in->shape, 0}, o;
  if (prim->infer(&(jx_rule_ctx){prim, p, 1, 1, 0, NULL}, &a, &o)) return -1;
  size_t count = (size_t)jx_shape_numel(a.shape);
  if (count == 0 || jx_shape_numel(o.shape) == 0) return 0; /* nothing moves */
  int rank = 0;
  jx_comm *c = jx_spmd_comm(p->l[0].v, p->l[0].n, op, &rank);
  if (!c) return -1;
  if (!jx_comm_runs_ahead(c)) return 0;
  int64_t n = jx_comm_size(c);
  int64_t want = traced_group_size(k, p);
  if (want > 0 && want != n) return 0; /* the synchronous path reports it */
  jx_collective_pending *h = calloc(1, sizeof *h);
  jx_array *y = h ? jx_array_alloc(o.dtype, o.shape, o.weak) : NULL;
  if (!h || y->poisoned) {
    free(h);
    if (!jx_last_status()) jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return -1;
  }
  void *src = in->buf->data, *dst = y->buf->data;
  switch (k) {
  case K_PSUM:
  case K_PMAX:
  case K_PMIN:
    h->req = jx_comm_start_all_reduce(c, rank, src, dst, count, a.dtype, reduce_op_of(k));
    break;
  case K_PPERMUTE: {
    int to, from;
    if (permute_peers(p, n, rank, op, &to, &from)) {
      free(h);
      return -1;
    }
    h->req = jx_comm_start_permute(c, rank, src, dst, count, a.dtype, to, from);
    break;
  }
  case K_ALL_GATHER: h->req = jx_comm_start_all_gather(c, rank, src, dst, count, a.dtype); break;
  default: /* K_PSUM_SCATTER */
    h->req =
        jx_comm_start_reduce_scatter(c, rank, src, dst, count / (size_t)n, a.dtype, JX_REDUCE_SUM);
  }
  if (!h->req) {
    free(h);
    return -1; /* the start recorded why */
  }
  h->in = jx_keep(in);
  h->op = op;
  h->bytes = (double)count * (double)jx_dtype_size(a.dtype);
  group_label(p, h->group, sizeof h->group);
  *out = y;
  *pending = h;
  atomic_fetch_add(&async_started, 1);
  return 1;
}

jx_status jx_collective_finish(jx_collective_pending *h) {
  if (!h) return JX_OK;
  const jx_spmd_ctx *ctx = jx_spmd_current();
  double t0 = jx_debug_flags & JX_DEBUG_PROFILE ? jx_prof_now() : 0;
  jx_status st = jx_comm_wait(h->req, ctx ? ctx->timeout_s : 0);
  if (jx_debug_flags & JX_DEBUG_PROFILE) /* the time the device waited for it */
    jx_prof_collective(h->op + 3, t0, jx_prof_now(), h->bytes, "started ahead (async)", h->group);
  jx_release(h->in);
  free(h);
  return st;
}

/* The kernel form, for callers that run kernels directly: the same
 * exchange; on failure (recorded in the thread's error) the output is zero. */
static void eval(kind k, const jx_params *p, const jx_tensor *in, jx_tensor *out, const char *op) {
  if (run(k, p, in, out, op))
    memset(out->data, 0, (size_t)jx_shape_numel(out->shape) * jx_dtype_size(out->dtype));
}

#define COLLECTIVE_ROW(NAME, KIND, PARAMS, JVP, TRANSPOSE, VMA)                                    \
  static jx_status impl_##NAME(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out) {      \
    return impl(KIND, ctx, "jx_" #NAME, in, out);                                                  \
  }                                                                                                \
  static void eval_##NAME(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {           \
    eval(KIND, ctx->params, in, out, "jx_" #NAME);                                                 \
  }                                                                                                \
  const jx_prim jx_prim_##NAME = {.name = #NAME,                                                   \
                                  .id = JX_PRIM_##NAME,                                            \
                                  .nin = 1,                                                        \
                                  .nout = 1,                                                       \
                                  .params = PARAMS,                                                \
                                  .infer = infer_##NAME,                                           \
                                  .eval = eval_##NAME,                                             \
                                  .impl = impl_##NAME,                                             \
                                  .jvp = JVP,                                                      \
                                  .transpose = TRANSPOSE,                                          \
                                  .batch = jx_batch_collective,                                    \
                                  .uses_axis = 1,                                                  \
                                  .vma = VMA};

COLLECTIVE_ROW(psum, K_PSUM, "axes=l0", jx_jvp_collective_linear, jx_transpose_collective,
               JX_VMA_REDUCE)
COLLECTIVE_ROW(pmax, K_PMAX, "axes=l0", jx_jvp_pmax_pmin, NULL, JX_VMA_REDUCE)
COLLECTIVE_ROW(pmin, K_PMIN, "axes=l0", jx_jvp_pmax_pmin, NULL, JX_VMA_REDUCE)
COLLECTIVE_ROW(all_gather, K_ALL_GATHER, "axes=l0 dim=i0 tiled=i1 axis_size=i2",
               jx_jvp_collective_linear, jx_transpose_collective, JX_VMA_COLLECTIVE)
COLLECTIVE_ROW(psum_scatter, K_PSUM_SCATTER, "axes=l0 dim=i0 tiled=i1", jx_jvp_collective_linear,
               jx_transpose_collective, JX_VMA_COLLECTIVE)
COLLECTIVE_ROW(all_to_all, K_ALL_TO_ALL, "axes=l0 split=i0 concat=i1 axis_size=i2",
               jx_jvp_collective_linear, jx_transpose_collective, JX_VMA_COLLECTIVE)
COLLECTIVE_ROW(ppermute, K_PPERMUTE, "axes=l0 perm=i0 axis_size=i1", jx_jvp_collective_linear,
               jx_transpose_collective, JX_VMA_COLLECTIVE)

JX_REGISTER_PRIMS(collectives, &jx_prim_psum, &jx_prim_pmax, &jx_prim_pmin, &jx_prim_all_gather,
                  &jx_prim_psum_scatter, &jx_prim_all_to_all, &jx_prim_ppermute)
