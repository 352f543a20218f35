/* Measured planning figures (machine_model.h) and their caches. */
#define _POSIX_C_SOURCE 200809L
#include "machine_model.h"

#include <jx/jx.h>
#include <jx/parallel.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../base/error.h"
#include "../../base/str_append.h"
#include "../../base/hash.h"
#include "../../base/threadpool.h"
#include "../../base/spin.h"
#include "../../base/cache_dir.h"
#include "../../compile/attention_call.h"
#include "../../compile/cost.h"
#include "../../compile/fusion.h"
#include "../../compile/lower.h"
#include "../../prims/prims.h"
#include "../collective.h"
#include "../device.h"
#include "../propagate.h"

/* The calibrations' programs:
 * - products: chains of PRODUCTS products a call (a call's fixed cost,
 *   waking the devices and their first touch of its buffers, moved a single
 *   product's CPU time by a third from one process to the next), each with
 *   a weight of its own (a step's weights come from memory): SIDE-cubed
 *   ones, and batches of SMALL_BATCH SMALL_ROWS x SMALL_K by SMALL_K x
 *   SMALL_K ones, as an attention's heads multiply;
 * - elementwise kernels: one over STREAM floats per device (past the
 *   caches), a chain of HOT_KERNELS over CACHED_STREAM floats each reading
 *   the one before's result (in them), and one over TINY_STREAM floats (a
 *   call's own cost, which the other two's times are taken less);
 * - steps: a chain of CHAIN TINY x TINY products against one. */
enum {
  SIDE = 256,
  PRODUCTS = 16,
  SMALL_BATCH = 8,
  SMALL_ROWS = 128,
  SMALL_K = 64,
  STREAM = 1 << 19,        /* 4 MB moved */
  CACHED_STREAM = 1 << 16, /* 512 KB moved */
  HOT_KERNELS = 16,
  TINY_STREAM = 1 << 10,
  TINY = 8,
  CHAIN = 64,
  ROUNDS = 9,         /* of calls of each program, after one that compiles */
  KEPT = 16,          /* meshes whose figures the process keeps */
  IDLE_ROWS = 128,    /* the idle calibration's blocks per device: IDLE_ROWS x IDLE_COLS, */
  IDLE_COLS = 256,    /* a phase of about a quarter of a millisecond on one core */
  IDLE_PHASES = 24,   /* ... each ended by a collective */
  IDLE_ROUNDS = 32,   /* calls: enough idle clock ticks (10 ms) to count, and enough calls (a
                         call's share varies by half with where the kernel queues the devices) */
  FIGURES_VERSION = 7 /* of how they are measured: figures of another version are measured again */
};

/* The arithmetic intensity (flops per byte of operands and result) of a
 * SIDE-cubed product: the large products' rate holds from it up. */
#define LARGE_PRODUCT_INTENSITY (2.0 * SIDE / (3 * sizeof(float)))

/* The arithmetic intensity of the small products. */
#define SMALL_PRODUCT_INTENSITY                                                                    \
  (2.0 * SMALL_ROWS * SMALL_K * SMALL_K /                                                          \
   ((2.0 * SMALL_ROWS * SMALL_K + SMALL_K * SMALL_K) * sizeof(float)))

static atomic_llong measurements;

int64_t jx_machine_model_measurements(void) { return (int64_t)atomic_load(&measurements); }

/* A chain of products: x = x @ w, `products` times, w the next weight
 * input in turn (of `weights`), read transposed (x @ w^T) when asked. */
typedef struct {
  int products, weights, transposed;
} chain_spec;

static void matmul_fn(void *c, jx_array *const *in, jx_array **out) {
  const chain_spec *k = c;
  out[0] = in[0];
  for (int p = 0; p < k->products; p++) {
    jx_array *w = in[1 + p % k->weights];
    out[0] = k->transposed ? jx_dot_general(out[0], w, JX_AXES(1), JX_AXES(1), JX_AXES(), JX_AXES())
                           : jx_matmul(out[0], w);
  }
}

static void stream_fn(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_add(jx_mul(in[0], jx_scalar(JX_F32, 2)), jx_scalar(JX_F32, 1));
}

/* A chain of HOT_KERNELS elementwise kernels, each reading what the one
 * before wrote while it is still in the device's caches, as a step's
 * kernels read their producers' results: x = 0.5 x + 0.5 + 0 t, t the
 * product of x's first column and a 1x1 weight (which keeps the kernels
 * apart: the product needs x made). */
static void hot_stream_fn(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *x = in[0];
  int64_t rows = jx_shape_of(x).dims[0];
  for (int k = 0; k < HOT_KERNELS; k++) {
    jx_array *t = jx_matmul(jx_slice(x, JX_SHAPE(0, 0), JX_SHAPE(rows, 1), JX_SHAPE(1, 1)), in[1]);
    x = jx_add(jx_add(jx_mul(x, jx_scalar(JX_F32, 0.5f)), jx_scalar(JX_F32, 0.5f)),
               jx_mul(t, jx_scalar(JX_F32, 0)));
  }
  out[0] = x;
}

/* The process's CPU time, every thread, in seconds. */
static double cpu_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One call of j on in until its result is ready: its wall time in *ns and
 * the process's CPU seconds (every thread) in *cpu. The result is freed
 * before the next call, as a step's temporaries are. */
static jx_status timed_call(jx_fn *j, jx_array **in, int64_t *ns, double *cpu) {
  jx_scope_begin();
  int64_t t0 = jx_now_ns();
  double c0 = cpu_now_s();
  jx_array *out = NULL;
  jx_status st = jx_call(j, in, &out);
  if (!st) st = jx_block_until_ready(out);
  *ns = jx_now_ns() - t0;
  *cpu = cpu_now_s() - c0;
  jx_scope_end();
  return st;
}

jx_status jx_calibration_time(const jx_mesh *m, int n, const jx_calibration_program *p,
                              double *secs) {
  int64_t *best_ns = malloc(sizeof *best_ns * (size_t)n);
  double *least_cpu = malloc(sizeof *least_cpu * (size_t)n);
  if (!best_ns || !least_cpu) {
    free(best_ns);
    free(least_cpu);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_calibration_time: out of memory");
  }
  for (int i = 0; i < n; i++) best_ns[i] = INT64_MAX, least_cpu[i] = INFINITY;
  jx_status st = JX_OK;
  for (int r = 0; r <= ROUNDS && !st; r++) /* the first round compiles */
    for (int i = 0; i < n && !st; i++) {
      int64_t t;
      double used;
      st = timed_call(p[i].fn, p[i].in, &t, &used);
      if (r && t < best_ns[i]) best_ns[i] = t;
      if (r && used < least_cpu[i]) least_cpu[i] = used;
    }
  int per_core = jx_devices_per_core(m);
  for (int i = 0; i < n && !st; i++)
    secs[i] = per_core > 0 ? least_cpu[i] / m->ndev * per_core : 1e-9 * (double)best_ns[i];
  free(best_ns);
  free(least_cpu);
  return st;
}

/* A program of the compute calibration: body jitted over m, its first
 * input of shape `block` per device, its first dimension split over every
 * axis of m, then nin - 1 inputs of shape `weight`, whole, or per device
 * as the block is when batched (a batch of products). Their entries are
 * 1 / the weight's rows: a chain of products keeps the ones it starts
 * from. Each device runs its block with no communication. The inputs
 * belong to the caller's scope. */
typedef struct {
  jx_fn *body, *jit;
  jx_sharding *sh[1 + PRODUCTS];
  jx_array *in[1 + PRODUCTS];
} compute_program;

static jx_status compute_program_make(compute_program *c, jx_mesh *m, const char *name,
                                      jx_body body, void *ctx, int nin, jx_shape block,
                                      jx_shape weight, int batched) {
  memset(c, 0, sizeof *c);
  jx_pspec split = jx_pspec_replicated(block.rank);
  for (int a = 0; a < m->ndim; a++)
    if (m->size[a] > 1) split.ax[0][split.n[0]++] = (int8_t)a;
  c->sh[0] = jx_pspec_sharding(m, &split);
  for (int i = 1; i < nin; i++)
    c->sh[i] = batched ? jx_pspec_sharding(m, &split)
                       : jx_pspec_sharding(m, &(jx_pspec){.rank = weight.rank});
  jx_status st = JX_OK;
  for (int i = 0; i < nin && !st; i++)
    if (!c->sh[i]) st = jx_last_status();
  jx_shape global = block, w_global = weight;
  global.dims[0] *= m->ndev;
  if (batched) w_global.dims[0] *= m->ndev;
  if (!st) /* placed once: the calls time the programs, not the slicing of their inputs */
    c->in[0] = jx_device_put(jx_ones(JX_F32, global), c->sh[0]);
  for (int i = 1; i < nin && !st; i++)
    c->in[i] = jx_device_put(
        jx_mul(jx_ones(JX_F32, w_global), jx_scalar(JX_F32, 1.0 / weight.dims[weight.rank - 2])),
        c->sh[i]);
  for (int i = 0; i < nin && !st; i++) st = jx_block_until_ready(c->in[i]);
  if (!st) c->body = jx_fn_create(name, nin, 1, body, ctx);
  if (c->body) c->jit = jx_jit(c->body, &(jx_jit_options){.in_shardings = c->sh});
  if (!c->jit && !st) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  return st;
}

static void compute_program_free(compute_program *c) {
  jx_fn_release(c->jit);
  jx_fn_release(c->body);
  for (int i = 0; i < 1 + PRODUCTS; i++) jx_sharding_release(c->sh[i]);
}

/* The idle calibration's per-device program: phases of a matmul, each
 * ended by a psum over the mesh's split axes in turn, as a sharded step's
 * compute runs between its collectives. */
static void idle_fn(void *c, jx_array *const *in, jx_array **out) {
  const jx_mesh *m = c;
  jx_array *x = in[0];
  for (int phase = 0, a = 0; phase < IDLE_PHASES; phase++, a++) {
    while (m->size[a % m->ndim] < 2) a++; /* some axis is split: the mesh time-shares cores */
    x = jx_tanh(jx_matmul(x, in[1]));
    jx_array *total = jx_psum(jx_sum(x, JX_AXES(0), 1), m->name[a % m->ndim]);
    x = jx_add(x, jx_mul(total, jx_scalar(JX_F32, 1e-3f)));
  }
  out[0] = x;
}

double jx_machine_idle_s(void) {
  FILE *f = fopen("/proc/stat", "r");
  unsigned long long user, nice, sys, idle, iowait;
  int ok = f && fscanf(f, "cpu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle, &iowait) == 5;
  if (f) fclose(f);
  long hz = sysconf(_SC_CLK_TCK);
  return ok && hz > 0 ? (double)(idle + iowait) / (double)hz : -1;
}

void jx_every_axis_spec(const jx_mesh *m, char *out) {
  out[0] = '\0';
  jx_str_append(out, JX_EVERY_AXIS_SPEC_CAP, "(");
  for (int a = 0; a < m->ndim; a++)
    jx_str_append(out, JX_EVERY_AXIS_SPEC_CAP, "%s%s", a ? "," : "", m->name[a]);
  jx_str_append(out, JX_EVERY_AXIS_SPEC_CAP, ")");
}

jx_status jx_idle_share_calibrate(jx_mesh *m, jx_comm_model *cm) {
  cm->idle_share = 0;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (!jx_devices_per_core(m) || cores < 1) return JX_OK;
  char spec[JX_EVERY_AXIS_SPEC_CAP];
  jx_every_axis_spec(m, spec);
  jx_sharding *split = jx_sharding_create(m, spec);
  jx_fn *body = jx_fn_create("calibration_idle", 2, 1, idle_fn, m);
  jx_fn *mapped = body && split
                      ? jx_shard_map(body, m, (const char *[]){spec, ""}, (const char *[]){spec})
                      : NULL;
  jx_fn *j = mapped ? jx_jit(mapped, NULL) : NULL;
  jx_status st = j ? JX_OK : jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_scope_begin();
  jx_array *in[2] = {NULL, NULL};
  if (!st) { /* placed once: the calls time the program, not the slicing of its input */
    in[0] =
        jx_device_put(jx_ones(JX_F32, JX_SHAPE(IDLE_ROWS * (int64_t)m->ndev, IDLE_COLS)), split);
    in[1] = jx_mul(jx_ones(JX_F32, JX_SHAPE(IDLE_COLS, IDLE_COLS)), jx_scalar(JX_F32, 1e-2f));
    st = jx_block_until_ready(in[0]) ? jx_last_status() : jx_block_until_ready(in[1]);
  }
  double wall = 0, used = 0, idle0 = -1;
  for (int r = 0; r <= IDLE_ROUNDS && !st; r++) { /* the first call compiles */
    if (r == 1) idle0 = jx_machine_idle_s();
    int64_t t;
    double cpu;
    st = timed_call(j, in, &t, &cpu);
    if (r) wall += 1e-9 * (double)t, used += cpu;
  }
  double idle1 = jx_machine_idle_s();
  jx_scope_end();
  jx_fn_release(j);
  jx_fn_release(mapped);
  jx_fn_release(body);
  jx_sharding_release(split);
  if (st) return st;
  /* the idle the machine counted, against this process's busy time: time
   * other jobs (or the host of a virtual machine) took from the cores is
   * neither; without the count, all of the cores' time the calls did not use */
  double idle = idle0 >= 0 && idle1 >= idle0 ? idle1 - idle0 : wall * (double)cores - used;
  double share = used + idle > 0 ? idle / (used + idle) : 0;
  cm->idle_share = fmin(fmax(share, 0), 0.5);
  return JX_OK;
}

jx_status jx_compute_rate_calibrate(jx_mesh *m, jx_comm_model *cm) {
  static chain_spec large = {PRODUCTS, PRODUCTS, 0}, transposed = {PRODUCTS, PRODUCTS, 1},
                    one = {1, 1, 0}, chain = {CHAIN, 1, 0};
  const jx_shape side = JX_SHAPE(SIDE, SIDE), tiny = JX_SHAPE(TINY, TINY);
  enum { NN, NT, SMALL, STREAMED, HOT, CALL, STEP, STEPS, PROGRAMS };
  compute_program c[PROGRAMS];
  memset(c, 0, sizeof c);
  jx_scope_begin();
  jx_status st = compute_program_make(&c[NN], m, "calibration_matmul", matmul_fn, &large,
                                      1 + PRODUCTS, side, side, 0);
  if (!st)
    st = compute_program_make(&c[NT], m, "calibration_matmul_t", matmul_fn, &transposed,
                              1 + PRODUCTS, side, side, 0);
  if (!st)
    st = compute_program_make(&c[SMALL], m, "calibration_matmul_small", matmul_fn, &large,
                              1 + PRODUCTS, JX_SHAPE(SMALL_BATCH, SMALL_ROWS, SMALL_K),
                              JX_SHAPE(SMALL_BATCH, SMALL_K, SMALL_K), 1);
  if (!st)
    st = compute_program_make(&c[STREAMED], m, "calibration_stream", stream_fn, NULL, 1,
                              JX_SHAPE(STREAM / 1024, 1024), tiny, 0);
  if (!st)
    st = compute_program_make(&c[CALL], m, "calibration_stream_tiny", stream_fn, NULL, 1,
                              JX_SHAPE(TINY_STREAM / 1024, 1024), tiny, 0);
  if (!st)
    st = compute_program_make(&c[HOT], m, "calibration_stream_hot", hot_stream_fn, NULL, 2,
                              JX_SHAPE(CACHED_STREAM / 1024, 1024), JX_SHAPE(1, 1), 0);
  if (!st)
    st = compute_program_make(&c[STEP], m, "calibration_step", matmul_fn, &one, 2, tiny, tiny, 0);
  if (!st)
    st = compute_program_make(&c[STEPS], m, "calibration_steps", matmul_fn, &chain, 2, tiny, tiny,
                              0);
  double t[PROGRAMS];
  if (!st) {
    jx_calibration_program p[PROGRAMS];
    for (int i = 0; i < PROGRAMS; i++) p[i] = (jx_calibration_program){c[i].jit, c[i].in};
    st = jx_calibration_time(m, PROGRAMS, p, t);
  }
  jx_scope_end();
  for (int i = 0; i < PROGRAMS; i++) compute_program_free(&c[i]);
  if (st) return st;
  cm->flops_per_s = 2.0 * SIDE * SIDE * SIDE * PRODUCTS / t[NN];
  cm->transposed_flops_per_s = 2.0 * SIDE * SIDE * SIDE * PRODUCTS / t[NT];
  cm->small_flops_per_s = 2.0 * SMALL_BATCH * SMALL_ROWS * SMALL_K * SMALL_K * PRODUCTS / t[SMALL];
  cm->step_s = t[STEPS] > t[STEP] ? (t[STEPS] - t[STEP]) / (CHAIN - 1) : 0;
  /* each kernel reads its block once and writes it once; the times less a
   * call's own cost, a link of the hot chain less its slice's and
   * product's steps */
  double call = t[CALL] < t[STREAMED] ? t[CALL] : 0;
  cm->mem_bytes_per_s = 2.0 * STREAM * sizeof(float) / (t[STREAMED] - call);
  double link = (t[HOT] - call) / HOT_KERNELS - 2 * cm->step_s;
  cm->cached_bytes_per_s = 2.0 * CACHED_STREAM * sizeof(float) / link;
  if (!(link > 0) || cm->cached_bytes_per_s < cm->mem_bytes_per_s)
    cm->cached_bytes_per_s = cm->mem_bytes_per_s; /* timer noise */
  return JX_OK;
}

/* ---- the roofline ---- */

double jx_roofline_time(const jx_comm_model *cm, double flops, double bytes) {
  double t = flops / cm->flops_per_s;
  if (cm->mem_bytes_per_s > 0 && bytes / cm->mem_bytes_per_s > t) t = bytes / cm->mem_bytes_per_s;
  return t;
}

/* Whether a product reads its right operand transposed: its last
 * dimension is contracted (row-major, the BLAS reads it as w^T). */
static int right_transposed(const jx_program *p, const jx_eqn *e) {
  int rank = p->avals[e->in[1]].shape.rank;
  for (int i = 0; i < e->params.l[1].n; i++)
    if (e->params.l[1].v[i] == rank - 1) return 1;
  return 0;
}

/* Seconds of a product of these flops moving these bytes (its operands
 * and result): at the rate of its layout, scaled toward the small products'
 * rate as its arithmetic intensity falls from the large products' to
 * theirs (geometrically in the intensity). */
static double product_time(const jx_comm_model *cm, const jx_program *p, const jx_eqn *e,
                           double flops, double bytes) {
  double rate = right_transposed(p, e) && cm->transposed_flops_per_s > 0
                    ? cm->transposed_flops_per_s
                    : cm->flops_per_s;
  double intensity = bytes > 0 ? flops / bytes : LARGE_PRODUCT_INTENSITY;
  if (cm->small_flops_per_s > 0 && intensity < LARGE_PRODUCT_INTENSITY) {
    double toward_small = intensity <= SMALL_PRODUCT_INTENSITY
                              ? 1
                              : log(LARGE_PRODUCT_INTENSITY / intensity) /
                                    log(LARGE_PRODUCT_INTENSITY / SMALL_PRODUCT_INTENSITY);
    rate *= pow(cm->small_flops_per_s / cm->flops_per_s, toward_small);
  }
  return flops / rate;
}

double jx_bytes_time(const jx_comm_model *cm, double bytes) {
  if (!(cm->mem_bytes_per_s > 0)) return 0;
  double slow = 1 / cm->mem_bytes_per_s;
  double fast = cm->cached_bytes_per_s > 0 ? 1 / cm->cached_bytes_per_s : slow;
  double lo = 2.0 * CACHED_STREAM * sizeof(float), hi = 2.0 * STREAM * sizeof(float);
  double toward_slow = bytes <= lo ? 0 : bytes >= hi ? 1 : log(bytes / lo) / log(hi / lo);
  return bytes * fast * pow(slow / fast, toward_slow);
}

/* Seconds of one step (a kernel or an equation alone) of these flops
 * moving these bytes: the larger of its flops at the compute rate and its
 * bytes at the bandwidth of their size, plus the step's fixed cost. */
static double step_time(const jx_comm_model *cm, double flops, double bytes) {
  return fmax(flops / cm->flops_per_s, jx_bytes_time(cm, bytes)) + cm->step_s;
}

static int is_collective(const jx_eqn *e) {
  const jx_prim *q = e->prim;
  return q == &jx_prim_psum || q == &jx_prim_pmax || q == &jx_prim_pmin ||
         q == &jx_prim_all_gather || q == &jx_prim_psum_scatter || q == &jx_prim_all_to_all ||
         q == &jx_prim_ppermute;
}

static double program_time(const jx_comm_model *cm, const jx_program *given) {
  /* as the executable runs it: attention calls kept whole, run as one
   * fused kernel each */
  jx_program *p = jx_lower_custom_calls_keeping(given, jx_cpu_attention_kept);
  if (!p) {
    jx_clear_error();
    return 0;
  }
  jx_fusion_group *groups = NULL;
  int ng = jx_fuse(p, &groups);
  double t = 0;
  for (int k = 0; k < ng; k++) {
    const jx_fusion_group *g = &groups[k];
    if (g->skip) continue;
    if (jx_fusion_group_is_kernel(g)) {
      double flops = 0, bytes = 0;
      for (int e = g->first; e < g->first + g->count; e++) flops += jx_eqn_flops(p, &p->eqns[e]);
      for (int l = 0; l < g->nloads; l++) bytes += jx_aval_bytes(p->avals[g->loads[l].var]);
      for (int o = 0; o < g->nstores; o++) bytes += jx_aval_bytes(p->avals[g->stores[o]]);
      t += step_time(cm, flops, bytes);
      continue;
    }
    for (int e = g->first; e < g->first + g->count; e++) {
      const jx_eqn *q = &p->eqns[e];
      if (is_collective(q) || q->prim == &jx_prim_reshape || q->prim == &jx_prim_squeeze ||
          q->prim == &jx_prim_expand_dims)
        continue; /* priced by the alpha-beta model; a new shape of the same bytes */
      if (q->prim == &jx_prim_remat && q->nsub >= 1) {
        t += program_time(cm, q->sub[0]);
        continue;
      }
      if (jx_lower_is_custom_call(q)) { /* a kept attention call */
        jx_cost c = {0};
        jx_program_cost(q->sub[0], &c);
        double moved = 0; /* its operands and results once: the scores stay in the kernel */
        for (int i = 0; i < q->nin; i++) moved += jx_aval_bytes(p->avals[q->in[i]]);
        for (int o = 0; o < q->nout; o++) moved += jx_aval_bytes(p->avals[q->out[o]]);
        t += step_time(cm, c.flops, moved);
        continue;
      }
      double bytes = 0, flops = jx_eqn_flops(p, q);
      for (int o = 0; o < q->nout; o++) bytes += jx_aval_bytes(p->avals[q->out[o]]);
      if (q->prim == &jx_prim_slice || q->prim == &jx_prim_dynamic_slice)
        bytes *= 2; /* reads what it writes, not its whole operand */
      else
        for (int i = 0; i < q->nin; i++) bytes += jx_aval_bytes(p->avals[q->in[i]]);
      t += q->prim == &jx_prim_dot_general ? product_time(cm, p, q, flops, bytes) + cm->step_s
                                           : step_time(cm, flops, bytes);
    }
  }
  if (ng < 0) jx_clear_error();
  free(groups);
  jx_program_release(p);
  return t;
}

double jx_compute_time(const jx_comm_model *cm, const jx_program *device) {
  if (!(cm->mem_bytes_per_s > 0)) {
    jx_cost c = {0};
    jx_program_cost(device, &c);
    return c.flops / cm->flops_per_s;
  }
  return program_time(cm, device);
}

/* ---- caches ---- */

static uint64_t mesh_key(const jx_mesh *m) {
  uint64_t h = jx_hash_u64(JX_HASH_SEED, (uint64_t)m->ndim);
  for (int a = 0; a < m->ndim; a++) h = jx_hash_u64(h, (uint64_t)m->size[a]);
  h = jx_hash_u64(h, (uint64_t)jx_pool_threads());
  h = jx_hash_u64(h, FIGURES_VERSION);
  return jx_hash_u64(h, (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
}

typedef struct {
  uint64_t key;
  jx_comm_model cm;
} kept;

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static kept kept_models[KEPT];
static int nkept, next_kept; /* a ring of the last KEPT meshes */

/* Puts the figures of the meshes of one key in the process's list: in
 * place of older ones of that key, else in the ring's next slot. */
static void keep(uint64_t key, const jx_comm_model *cm) {
  pthread_mutex_lock(&kept_lock);
  int at = -1;
  for (int k = 0; k < nkept && at < 0; k++)
    if (kept_models[k].key == key) at = k;
  if (at < 0) {
    at = next_kept;
    next_kept = (next_kept + 1) % KEPT;
    if (nkept < KEPT) nkept++;
  }
  kept_models[at] = (kept){key, *cm};
  pthread_mutex_unlock(&kept_lock);
}

static int disk_path(char *out, size_t n, uint64_t key) {
  char dir[4096];
  if (!jx_kernel_cache_dir(dir, sizeof dir)) return 0;
  snprintf(out, n, "%s/machine_model_%016llx", dir, (unsigned long long)key);
  return 1;
}

/* A rate's three figures, read or written. */
static int rate_read(FILE *f, jx_byte_rate *r) {
  return fscanf(f, "%lf %lf %lf", &r->knee_bytes, &r->cached_s_per_byte, &r->s_per_byte) == 3 &&
         r->knee_bytes >= 0 && r->cached_s_per_byte >= 0 && r->s_per_byte >= 0;
}

static int rate_write(FILE *f, const jx_byte_rate *r) {
  return fprintf(f, " %.17g %.17g %.17g", r->knee_bytes, r->cached_s_per_byte, r->s_per_byte) > 0;
}

/* The figures a file holds, a line each: the compute rates (large,
 * transposed and small products), the bandwidths (past the caches, in
 * them), the cost of a step, the idle share, the reorder's rate and the
 * axes measured together; then per axis and for the axes together, alpha
 * and beta of each collective kind in turn. */
static int disk_read(const char *path, const jx_mesh *m, jx_comm_model *cm) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fscanf(f, "%lf %lf %lf %lf %lf %lf %lf", &cm->flops_per_s, &cm->transposed_flops_per_s,
                  &cm->small_flops_per_s, &cm->mem_bytes_per_s, &cm->cached_bytes_per_s,
                  &cm->step_s, &cm->idle_share) == 7 &&
           cm->flops_per_s > 0 && cm->transposed_flops_per_s > 0 && cm->small_flops_per_s > 0 &&
           cm->mem_bytes_per_s > 0 && cm->cached_bytes_per_s > 0 && cm->step_s >= 0 &&
           cm->idle_share >= 0 && cm->idle_share < 1 && rate_read(f, &cm->reorder);
  unsigned group = 0;
  ok = ok && fscanf(f, "%u", &group) == 1;
  cm->group_axes = group;
  for (int a = 0; a <= m->ndim && ok; a++) {
    jx_link_model *l = a < m->ndim ? &cm->link[a] : &cm->group;
    for (int k = 0; k < JX_COLL_KINDS && ok; k++)
      ok = fscanf(f, "%lf", &l->alpha_s[k]) == 1 && l->alpha_s[k] >= 0 && rate_read(f, &l->beta[k]);
  }
  fclose(f);
  return ok;
}

static void disk_write(const char *path, const jx_mesh *m, const jx_comm_model *cm) {
  /* written whole then renamed: a reader never sees half a model */
  char tmp[4500];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  int ok = fprintf(f, "%.17g %.17g %.17g %.17g %.17g %.17g %.17g", cm->flops_per_s,
                   cm->transposed_flops_per_s, cm->small_flops_per_s, cm->mem_bytes_per_s,
                   cm->cached_bytes_per_s, cm->step_s, cm->idle_share) > 0 &&
           rate_write(f, &cm->reorder) && fprintf(f, " %u\n", (unsigned)cm->group_axes) > 0;
  for (int a = 0; a <= m->ndim && ok; a++) {
    const jx_link_model *l = a < m->ndim ? &cm->link[a] : &cm->group;
    for (int k = 0; k < JX_COLL_KINDS && ok; k++)
      ok = fprintf(f, "%s%.17g", k ? " " : "", l->alpha_s[k]) > 0 && rate_write(f, &l->beta[k]);
    ok = ok && fputc('\n', f) != EOF;
  }
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) remove(tmp);
}

jx_status jx_comm_model_measured(jx_comm_model *cm, jx_mesh *m) {
  uint64_t key = mesh_key(m);
  pthread_mutex_lock(&kept_lock);
  for (int k = 0; k < nkept; k++)
    if (kept_models[k].key == key) {
      *cm = kept_models[k].cm;
      pthread_mutex_unlock(&kept_lock);
      return JX_OK;
    }
  pthread_mutex_unlock(&kept_lock);
  char path[4200];
  int on_disk = disk_path(path, sizeof path, key);
  jx_comm_model_uniform(cm, m, 0, 1, 1);
  jx_status st = JX_OK;
  if (!on_disk || !disk_read(path, m, cm)) {
    jx_comm_model_uniform(cm, m, 0, 1, 1);
    st = jx_compute_rate_calibrate(m, cm); /* first: the collectives' chains subtract compute */
    if (!st) st = jx_comm_model_calibrate(cm, m);
    if (!st) st = jx_idle_share_calibrate(m, cm);
    if (st) return st;
    atomic_fetch_add(&measurements, 1);
    if (on_disk) disk_write(path, m, cm);
  }
  keep(key, cm);
  return JX_OK;
}

void jx_comm_model_keep(const jx_mesh *m, const jx_comm_model *cm) { keep(mesh_key(m), cm); }

double jx_device_memory_default(const jx_mesh *m) {
  double host = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  int local = 0;
  for (int p = 0; p < m->ndev; p++) local += jx_device_is_local(m->device[p]);
  return host > 0 ? host / (local > 0 ? local : 1) : 1e300;
}
