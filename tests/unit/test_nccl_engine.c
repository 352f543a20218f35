/* The NCCL engine (src/cuda/nccl_engine.h) on a 2x2 mesh ('data', 'model')
 * of four CUDA devices, one thread each, against tests/cuda_fake's fake NCCL
 * and its driver (device memory = host memory, ranks = threads). Every
 * answer is computed here from the collective's definition: psum of
 * rank-dependent values for every dtype and op, all_gather's block order,
 * psum_scatter's blocks, all_to_all's blocks, a ppermute ring and a partial
 * permutation (zeros where nothing arrives), over 'data', over 'model', over
 * both and over both in the other order. Also: the axis communicators' sizes
 * and ranks; a rank that never calls costs its peer the deadline error
 * naming the axis, within the timeout, and no other communicator; bad
 * arguments are errors. Modes (argv[1]):
 *   (none)     the fake NCCL (JX_NCCL_PATH, JX_CUDA_DRIVER_PATH);
 *   --no-nccl  NCCL missing: creating the engine says so. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "cuda/nccl_engine.h"
#include "unit/test_util.h"

enum { DEVICES = 4, COUNT = 5 };

static jx_nccl_engine *engine;
static jx_mesh *mesh; /* 2x2 ('data', 'model'): position p = data * 2 + model = world rank p */

/* ---- values and their encodings ---- */

/* Rank-dependent, small and signed, so that every dtype holds every sum and
 * product of four exactly and max/min see negative numbers. */
static double value(int position, size_t i) { return (double)((position * 3 + (int)i) % 5 - 2); }

static uint16_t f16_of(double v) { /* exact for integers up to 2048 */
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  unsigned a = (unsigned)fabs(v), e = 0;
  while ((a >> e) > 1) e++;
  return (uint16_t)(sign | ((e + 15) << 10) | (((a << 10) >> e) & 1023));
}

static double f16_value(uint16_t h) {
  int e = (h >> 10) & 31;
  double v = e ? ldexp(1.0 + (h & 1023) / 1024.0, e - 15) : ldexp((h & 1023) / 1024.0, -14);
  return h >> 15 ? -v : v;
}

static void put(jx_dtype dt, void *buf, size_t i, double v) {
  char *p = buf;
  switch (dt) {
  case JX_F32: {
    float f = (float)v;
    memcpy(p + 4 * i, &f, 4);
    break;
  }
  case JX_F64: memcpy(p + 8 * i, &v, 8); break;
  case JX_I32: {
    int32_t x = (int32_t)v;
    memcpy(p + 4 * i, &x, 4);
    break;
  }
  case JX_F16: {
    uint16_t h = f16_of(v);
    memcpy(p + 2 * i, &h, 2);
    break;
  }
  default: { /* bf16: the high half of the f32, exact for these values */
    float f = (float)v;
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t h = (uint16_t)(x >> 16);
    memcpy(p + 2 * i, &h, 2);
  }
  }
}

static double get(jx_dtype dt, const void *buf, size_t i) {
  const char *p = buf;
  switch (dt) {
  case JX_F32: {
    float f;
    memcpy(&f, p + 4 * i, 4);
    return f;
  }
  case JX_F64: {
    double d;
    memcpy(&d, p + 8 * i, 8);
    return d;
  }
  case JX_I32: {
    int32_t x;
    memcpy(&x, p + 4 * i, 4);
    return x;
  }
  case JX_F16: {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return f16_value(h);
  }
  default: {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
  }
  }
}

static double combine(jx_reduce_op op, double a, double b) {
  switch (op) {
  case JX_REDUCE_SUM: return a + b;
  case JX_REDUCE_PROD: return a * b;
  case JX_REDUCE_MAX: return fmax(a, b);
  default: return fmin(a, b);
  }
}

/* ---- the mesh, by definition ---- */

typedef struct {
  const char *names[2];
  int naxes;
  int axis[2]; /* 0: data, 1: model */
} axes_spec;

static const axes_spec DATA = {{"data"}, 1, {0}};
static const axes_spec MODEL = {{"model"}, 1, {1}};
static const axes_spec BOTH = {{"data", "model"}, 2, {0, 1}};
static const axes_spec SWAPPED = {{"model", "data"}, 2, {1, 0}};

static int coord(int p, int axis) { return axis == 0 ? p / 2 : p % 2; }

/* The positions of p's group over the axes, in rank order; returns the size. */
static int group_of(const axes_spec *s, int p, int *members) {
  int n = 0;
  for (int key = 0; key < (s->naxes == 2 ? 4 : 2); key++)
    for (int q = 0; q < DEVICES; q++) {
      int same = 1, k = 0;
      for (int d = 0; d < 2; d++) {
        int in = 0;
        for (int i = 0; i < s->naxes; i++) in |= s->axis[i] == d;
        if (!in && coord(q, d) != coord(p, d)) same = 0;
      }
      for (int i = 0; i < s->naxes; i++) k = k * 2 + coord(q, s->axis[i]);
      if (same && k == key) members[n++] = q;
    }
  return n;
}

static int rank_of(const axes_spec *s, int p) {
  int members[DEVICES], n = group_of(s, p, members);
  for (int r = 0; r < n; r++)
    if (members[r] == p) return r;
  return -1;
}

static jx_nccl_axes *axes_of(const axes_spec *s) {
  jx_nccl_axes *a = NULL;
  check_ok(jx_nccl_engine_axes(engine, mesh, s->names, s->naxes, &a));
  return a;
}

/* ---- one thread per device ---- */

typedef struct rank_job rank_job;
typedef jx_status (*rank_fn)(rank_job *job);
struct rank_job {
  rank_fn fn;
  const void *ctx;
  int local;
  jx_status status;
  char why[2048];
  double seconds;
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *rank_main(void *arg) {
  rank_job *job = arg;
  double start = now();
  job->status = job->fn(job);
  job->seconds = now() - start;
  if (job->status && !job->why[0]) snprintf(job->why, sizeof job->why, "%s", jx_last_error());
  jx_clear_error();
  return NULL;
}

/* Runs fn on every device at once; jobs[k] says how device k fared. */
static void run_on_devices(rank_fn fn, const void *ctx, rank_job *jobs) {
  pthread_t threads[DEVICES];
  for (int k = 0; k < DEVICES; k++) {
    jobs[k] = (rank_job){.fn = fn, .ctx = ctx, .local = k};
    assert_int_equal(pthread_create(&threads[k], NULL, rank_main, &jobs[k]), 0);
  }
  for (int k = 0; k < DEVICES; k++) pthread_join(threads[k], NULL);
}

static void assert_all_ok(const rank_job *jobs) {
  for (int k = 0; k < DEVICES; k++)
    if (jobs[k].status) fprintf(stderr, "device %d: %s\n", k, jobs[k].why);
  for (int k = 0; k < DEVICES; k++) assert_int_equal(jobs[k].status, JX_OK);
}

/* A mismatch: the job's status and why. */
static jx_status wrong(rank_job *job, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(job->why, sizeof job->why, fmt, ap);
  va_end(ap);
  return JX_ERR_INTERNAL;
}

/* ---- device buffers: uploads and downloads go through the compute stream,
 * so a download sees a collective's result only if the engine ordered the
 * compute stream after it ---- */

typedef struct {
  jx_cuda_device *dev;
  CUdeviceptr send, recv;
  size_t bytes;
} buffers;

static jx_status buffers_make(int local, size_t send_bytes, size_t recv_bytes, buffers *b) {
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  *b = (buffers){jx_nccl_engine_device(engine, local), 0, 0, recv_bytes};
  jx_status st = jx_cuda_device_make_current(b->dev);
  if (!st) st = jx_cuda_check(cu->MemAlloc(&b->send, send_bytes), "cuMemAlloc", local);
  if (!st) st = jx_cuda_check(cu->MemAlloc(&b->recv, recv_bytes), "cuMemAlloc", local);
  /* recv starts as garbage, so a collective that writes nothing shows */
  if (!st)
    st = jx_cuda_check(cu->MemsetD8Async(b->recv, 0x7f, recv_bytes, b->dev->compute), "memset",
                       local);
  return st;
}

static jx_status upload(buffers *b, CUdeviceptr to, const void *from, size_t bytes) {
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  return jx_cuda_check(cu->MemcpyHtoDAsync(to, from, bytes, b->dev->compute), "upload", -1);
}

static jx_status download(buffers *b, void *to) {
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  jx_status st =
      jx_cuda_check(cu->MemcpyDtoHAsync(to, b->recv, b->bytes, b->dev->compute), "download", -1);
  if (!st) st = jx_cuda_check(cu->StreamSynchronize(b->dev->compute), "sync", -1);
  return st;
}

static void buffers_free(buffers *b) {
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  if (b->send) cu->MemFree(b->send);
  if (b->recv) cu->MemFree(b->recv);
}

/* ---- the communicators ---- */

static void axis_communicators_have_the_mesh_sizes_and_ranks(void **state) {
  (void)state;
  assert_int_equal(jx_nccl_engine_world_size(engine), DEVICES);
  const axes_spec *specs[] = {&DATA, &MODEL, &BOTH, &SWAPPED};
  const int sizes[] = {2, 2, 4, 4};
  for (int s = 0; s < 4; s++) {
    jx_nccl_axes *a = axes_of(specs[s]);
    assert_int_equal(jx_nccl_axes_size(a), sizes[s]);
    for (int k = 0; k < DEVICES; k++) {
      assert_int_equal(jx_nccl_engine_world_rank(engine, k), k);
      assert_int_equal(jx_nccl_axes_rank(a, k), rank_of(specs[s], k));
    }
    assert_ptr_equal(axes_of(specs[s]), a); /* made once */
  }
  /* spot checks of the definition itself */
  assert_int_equal(rank_of(&DATA, 3), 1);
  assert_int_equal(rank_of(&MODEL, 2), 0);
  assert_int_equal(rank_of(&SWAPPED, 1), 2);
  assert_string_equal(jx_nccl_axes_label(axes_of(&DATA)), "mesh axis 'data'");
  assert_string_equal(jx_nccl_axes_label(axes_of(&SWAPPED)), "mesh axes 'model', 'data'");

  jx_nccl_axes *a = NULL;
  assert_int_equal(jx_nccl_engine_axes(engine, mesh, (const char *[]){"pipe"}, 1, &a),
                   JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "the mesh has no axis 'pipe'"));
  jx_clear_error();
  assert_int_equal(jx_nccl_engine_axes(engine, mesh, (const char *[]){"data", "data"}, 2, &a),
                   JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "axis 'data' is named twice"));
  jx_clear_error();
}

/* ---- psum ---- */

typedef struct {
  const axes_spec *spec;
  jx_dtype dt;
  jx_reduce_op op;
  int in_place;
} psum_case;

static jx_status psum_rank(rank_job *job) {
  const psum_case *c = job->ctx;
  jx_nccl_axes *a = axes_of(c->spec);
  size_t es = jx_dtype_size(c->dt);
  char host[COUNT * 8], got[COUNT * 8];
  for (size_t i = 0; i < COUNT; i++) put(c->dt, host, i, value(job->local, i));
  buffers b;
  jx_status st = buffers_make(job->local, COUNT * es, COUNT * es, &b);
  CUdeviceptr src = c->in_place ? b.recv : b.send;
  if (!st) st = upload(&b, src, host, COUNT * es);
  if (!st) st = jx_nccl_psum(a, job->local, src, b.recv, COUNT, c->dt, c->op, 0);
  if (!st) st = download(&b, got);
  buffers_free(&b);
  if (st) return st;
  int members[DEVICES], n = group_of(c->spec, job->local, members);
  for (size_t i = 0; i < COUNT; i++) {
    double want = value(members[0], i);
    for (int r = 1; r < n; r++) want = combine(c->op, want, value(members[r], i));
    if (get(c->dt, got, i) != want)
      return wrong(job, "psum (%s) of %s over %s: element %zu is %g, want %g",
                   jx_reduce_op_name(c->op), jx_dtype_name(c->dt), jx_nccl_axes_label(a), i,
                   get(c->dt, got, i), want);
  }
  return JX_OK;
}

static void psum_every_dtype_op_and_axes(void **state) {
  (void)state;
  const axes_spec *specs[] = {&DATA, &MODEL, &BOTH};
  const jx_dtype dtypes[] = {JX_F32, JX_BF16, JX_F16, JX_F64, JX_I32};
  const jx_reduce_op ops[] = {JX_REDUCE_SUM, JX_REDUCE_MAX, JX_REDUCE_MIN, JX_REDUCE_PROD};
  for (int s = 0; s < 3; s++)
    for (int d = 0; d < 5; d++)
      for (int o = 0; o < 4; o++) {
        psum_case c = {specs[s], dtypes[d], ops[o], (s + d + o) % 2};
        rank_job jobs[DEVICES];
        run_on_devices(psum_rank, &c, jobs);
        assert_all_ok(jobs);
      }
}

/* ---- all_gather, psum_scatter, all_to_all ---- */

static jx_status all_gather_rank(rank_job *job) {
  const axes_spec *spec = job->ctx;
  jx_nccl_axes *a = axes_of(spec);
  int members[DEVICES], n = group_of(spec, job->local, members);
  float host[COUNT], got[DEVICES * COUNT];
  for (size_t i = 0; i < COUNT; i++) host[i] = (float)value(job->local, i);
  buffers b;
  jx_status st = buffers_make(job->local, sizeof host, (size_t)n * sizeof host, &b);
  if (!st) st = upload(&b, b.send, host, sizeof host);
  if (!st) st = jx_nccl_all_gather(a, job->local, b.send, b.recv, COUNT, JX_F32, 0);
  if (!st) st = download(&b, got);
  buffers_free(&b);
  if (st) return st;
  for (int q = 0; q < n; q++)
    for (size_t i = 0; i < COUNT; i++)
      if (got[q * COUNT + i] != (float)value(members[q], i))
        return wrong(job, "all_gather over %s: block %d element %zu is %g, want position %d's %g",
                     jx_nccl_axes_label(a), q, i, got[q * COUNT + i], members[q],
                     value(members[q], i));
  return JX_OK;
}

static void all_gather_blocks_in_rank_order(void **state) {
  (void)state;
  const axes_spec *specs[] = {&DATA, &MODEL, &BOTH, &SWAPPED};
  for (int s = 0; s < 4; s++) {
    rank_job jobs[DEVICES];
    run_on_devices(all_gather_rank, specs[s], jobs);
    assert_all_ok(jobs);
  }
}

static jx_status psum_scatter_rank(rank_job *job) {
  const axes_spec *spec = job->ctx;
  jx_nccl_axes *a = axes_of(spec);
  int members[DEVICES], n = group_of(spec, job->local, members), me = rank_of(spec, job->local);
  int32_t host[DEVICES * COUNT], got[COUNT];
  for (size_t i = 0; i < (size_t)n * COUNT; i++) host[i] = (int32_t)value(job->local, i);
  buffers b;
  jx_status st = buffers_make(job->local, (size_t)n * COUNT * 4, sizeof got, &b);
  if (!st) st = upload(&b, b.send, host, (size_t)n * COUNT * 4);
  if (!st)
    st = jx_nccl_psum_scatter(a, job->local, b.send, b.recv, COUNT, JX_I32, JX_REDUCE_SUM, 0);
  if (!st) st = download(&b, got);
  buffers_free(&b);
  if (st) return st;
  for (size_t i = 0; i < COUNT; i++) {
    double want = 0;
    for (int r = 0; r < n; r++) want += value(members[r], (size_t)me * COUNT + i);
    if (got[i] != want)
      return wrong(job, "psum_scatter over %s: rank %d element %zu is %d, want %g",
                   jx_nccl_axes_label(a), me, i, got[i], want);
  }
  return JX_OK;
}

static void psum_scatter_gives_each_rank_its_block(void **state) {
  (void)state;
  const axes_spec *specs[] = {&DATA, &MODEL, &BOTH};
  for (int s = 0; s < 3; s++) {
    rank_job jobs[DEVICES];
    run_on_devices(psum_scatter_rank, specs[s], jobs);
    assert_all_ok(jobs);
  }
}

/* the value block b of position p sends in all_to_all */
static double block_value(int p, int b, size_t i) { return 100.0 * p + 10.0 * b + (double)i; }

static jx_status all_to_all_rank(rank_job *job) {
  const axes_spec *spec = job->ctx;
  jx_nccl_axes *a = axes_of(spec);
  int members[DEVICES], n = group_of(spec, job->local, members), me = rank_of(spec, job->local);
  double host[DEVICES * COUNT], got[DEVICES * COUNT];
  for (int q = 0; q < n; q++)
    for (size_t i = 0; i < COUNT; i++) host[q * COUNT + i] = block_value(job->local, q, i);
  size_t bytes = (size_t)n * COUNT * sizeof(double);
  buffers b;
  jx_status st = buffers_make(job->local, bytes, bytes, &b);
  if (!st) st = upload(&b, b.send, host, bytes);
  if (!st) st = jx_nccl_all_to_all(a, job->local, b.send, b.recv, COUNT, JX_F64, 0);
  if (!st) st = download(&b, got);
  buffers_free(&b);
  if (st) return st;
  for (int q = 0; q < n; q++)
    for (size_t i = 0; i < COUNT; i++)
      if (got[q * COUNT + i] != block_value(members[q], me, i))
        return wrong(job, "all_to_all over %s: rank %d block %d element %zu is %g, want %g",
                     jx_nccl_axes_label(a), me, q, i, got[q * COUNT + i],
                     block_value(members[q], me, i));
  return JX_OK;
}

static void all_to_all_transposes_the_blocks(void **state) {
  (void)state;
  const axes_spec *specs[] = {&DATA, &MODEL, &BOTH, &SWAPPED};
  for (int s = 0; s < 4; s++) {
    rank_job jobs[DEVICES];
    run_on_devices(all_to_all_rank, specs[s], jobs);
    assert_all_ok(jobs);
  }
}

/* ---- ppermute ---- */

typedef struct {
  const axes_spec *spec;
  const int (*pairs)[2];
  int npairs;
} permute_case;

static jx_status ppermute_rank(rank_job *job) {
  const permute_case *c = job->ctx;
  jx_nccl_axes *a = axes_of(c->spec);
  int members[DEVICES], me = rank_of(c->spec, job->local);
  group_of(c->spec, job->local, members);
  float host[COUNT], got[COUNT];
  for (size_t i = 0; i < COUNT; i++) host[i] = (float)value(job->local, i) + 10;
  buffers b;
  jx_status st = buffers_make(job->local, sizeof host, sizeof got, &b);
  if (!st) st = upload(&b, b.send, host, sizeof host);
  if (!st)
    st = jx_nccl_ppermute(a, job->local, b.send, b.recv, COUNT, JX_F32, c->pairs, c->npairs, 0);
  if (!st) st = download(&b, got);
  buffers_free(&b);
  if (st) return st;
  int src = -1;
  for (int k = 0; k < c->npairs; k++)
    if (c->pairs[k][1] == me) src = c->pairs[k][0];
  for (size_t i = 0; i < COUNT; i++) {
    float want = src < 0 ? 0.0f : (float)value(members[src], i) + 10;
    if (got[i] != want)
      return wrong(job, "ppermute over %s: rank %d element %zu is %g, want %g",
                   jx_nccl_axes_label(a), me, i, got[i], want);
  }
  return JX_OK;
}

static void ppermute_ring_and_partial_permutation(void **state) {
  (void)state;
  static const int ring[4][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 0}};
  static const int one_way[1][2] = {{0, 1}}; /* rank 0 gets zeros */
  static const int swap[2][2] = {{0, 1}, {1, 0}};
  const permute_case cases[] = {
      {&BOTH, ring, 4}, {&SWAPPED, ring, 4}, {&DATA, one_way, 1}, {&MODEL, swap, 2}};
  for (int k = 0; k < 4; k++) {
    rank_job jobs[DEVICES];
    run_on_devices(ppermute_rank, &cases[k], jobs);
    assert_all_ok(jobs);
  }
  static const int twice_to_one[2][2] = {{0, 1}, {1, 1}};
  assert_int_equal(jx_nccl_ppermute(axes_of(&DATA), 0, 0, 0, COUNT, JX_F32, twice_to_one, 2, 0),
                   JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "pairs 0 and 1 share a destination (1)"));
  jx_clear_error();
  static const int outside[1][2] = {{0, 2}};
  assert_int_equal(jx_nccl_ppermute(axes_of(&DATA), 0, 0, 0, COUNT, JX_F32, outside, 1, 0),
                   JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "names a rank outside 0..1"));
  jx_clear_error();
}

/* ---- a peer that never calls ---- */

static jx_mesh *lonely_mesh; /* ('rows', 'cols'): communicators of its own, so the aborted one
                                breaks nothing the other tests use */
static const double DEADLINE = 0.3;

static jx_status all_but_position_3(rank_job *job) {
  jx_nccl_axes *rows = NULL;
  jx_status st = jx_nccl_engine_axes(engine, lonely_mesh, (const char *[]){"rows"}, 1, &rows);
  if (st || job->local == 3) return st; /* position 3 is the dead peer */
  float host[COUNT], got[COUNT];
  for (size_t i = 0; i < COUNT; i++) host[i] = (float)value(job->local, i);
  buffers b;
  st = buffers_make(job->local, sizeof host, sizeof got, &b);
  if (!st) st = upload(&b, b.send, host, sizeof host);
  if (!st)
    st = jx_nccl_psum(rows, job->local, b.send, b.recv, COUNT, JX_F32, JX_REDUCE_SUM, DEADLINE);
  if (!st) st = download(&b, got);
  buffers_free(&b);
  if (!st && got[0] != (float)(value(job->local, 0) + value(job->local ^ 2, 0)))
    return wrong(job, "psum over 'rows' of position %d: %g", job->local, got[0]);
  return st;
}

static jx_status psum_over_cols(rank_job *job) {
  jx_nccl_axes *cols = NULL;
  jx_status st = jx_nccl_engine_axes(engine, lonely_mesh, (const char *[]){"cols"}, 1, &cols);
  float host[COUNT], got[COUNT];
  for (size_t i = 0; i < COUNT; i++) host[i] = (float)value(job->local, i);
  buffers b = {0};
  if (!st) st = buffers_make(job->local, sizeof host, sizeof got, &b);
  if (!st) st = upload(&b, b.send, host, sizeof host);
  if (!st) st = jx_nccl_psum(cols, job->local, b.send, b.recv, COUNT, JX_F32, JX_REDUCE_SUM, 0);
  if (!st) st = download(&b, got);
  buffers_free(&b);
  if (!st && got[1] != (float)(value(job->local, 1) + value(job->local ^ 1, 1)))
    return wrong(job, "psum over 'cols' of position %d: %g", job->local, got[1]);
  return st;
}

static void a_peer_that_never_calls_costs_the_deadline_error(void **state) {
  (void)state;
  jx_nccl_axes *rows = NULL, *cols = NULL;
  check_ok(jx_nccl_engine_axes(engine, lonely_mesh, (const char *[]){"rows"}, 1, &rows));
  check_ok(jx_nccl_engine_axes(engine, lonely_mesh, (const char *[]){"cols"}, 1, &cols));
  rank_job jobs[DEVICES];
  run_on_devices(all_but_position_3, NULL, jobs);
  /* positions 0 and 2 share a communicator of 'rows' with no dead peer */
  for (int k = 0; k < 4; k += 2) {
    if (jobs[k].status) fprintf(stderr, "device %d: %s\n", k, jobs[k].why);
    assert_int_equal(jobs[k].status, JX_OK);
  }
  assert_int_equal(jobs[3].status, JX_OK);
  /* position 1 waited for position 3: the deadline, naming the axis, the rank and the size */
  printf("the dead peer's error after %.2f s: %s\n", jobs[1].seconds, jobs[1].why);
  assert_int_equal(jobs[1].status, JX_ERR_TIMEOUT);
  assert_non_null(strstr(jobs[1].why, "jx_nccl_psum over the mesh axis 'rows' on CUDA device 1"));
  assert_non_null(strstr(jobs[1].why, "communicator 'rows' (rank 0 of 2)"));
  assert_non_null(strstr(jobs[1].why, "did not finish within 0.3 s"));
  assert_true(jobs[1].seconds >= DEADLINE);
  assert_true(jobs[1].seconds < DEADLINE + 5);
  /* the aborted communicator fails at once from then on */
  assert_int_equal(jx_nccl_psum(rows, 1, 0, 0, COUNT, JX_F32, JX_REDUCE_SUM, DEADLINE),
                   JX_ERR_INTERNAL);
  assert_non_null(strstr(jx_last_error(), "aborted by an earlier failure"));
  jx_clear_error();
  /* every other communicator still works, the dead peer's own included */
  run_on_devices(psum_over_cols, NULL, jobs);
  assert_all_ok(jobs);
}

/* ---- setup ---- */

static int group_setup(void **state) {
  (void)state;
  check_ok(jx_set_cpu_device_count(DEVICES));
  mesh = jx_mesh_create(JX_SHAPE(2, 2), (const char *[]){"data", "model"});
  lonely_mesh = jx_mesh_create(JX_SHAPE(2, 2), (const char *[]){"rows", "cols"});
  assert_non_null(mesh);
  assert_non_null(lonely_mesh);
  check_ok(jx_nccl_engine_create((const int[]){0, 1, 2, 3}, DEVICES, &engine));
  /* made here, from one thread, as the engine requires; the rank threads find them */
  const axes_spec *specs[] = {&DATA, &MODEL, &BOTH, &SWAPPED};
  for (int s = 0; s < 4; s++) axes_of(specs[s]);
  jx_nccl_axes *a;
  check_ok(jx_nccl_engine_axes(engine, lonely_mesh, (const char *[]){"rows"}, 1, &a));
  check_ok(jx_nccl_engine_axes(engine, lonely_mesh, (const char *[]){"cols"}, 1, &a));
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  jx_nccl_engine_destroy(engine);
  jx_mesh_release(mesh);
  jx_mesh_release(lonely_mesh);
  return 0;
}

static void missing_nccl_is_a_clear_error(void **state) {
  (void)state;
  jx_nccl_engine *e = NULL;
  assert_int_equal(jx_nccl_engine_create((const int[]){0}, 1, &e), JX_ERR_UNIMPLEMENTED);
  assert_null(e);
  assert_non_null(strstr(jx_last_error(), "jx_nccl_engine_create: NCCL not found"));
  assert_non_null(strstr(jx_last_error(), "JX_NCCL_PATH=/nonexistent/libnccl.so.2"));
  jx_clear_error();
}

int main(int argc, char **argv) {
  setenv("JX_CUDA_DRIVER_PATH", JX_NCCL_FAKE, 1);
  if (argc > 1 && !strcmp(argv[1], "--no-nccl")) {
    setenv("JX_NCCL_PATH", "/nonexistent/libnccl.so.2", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(missing_nccl_is_a_clear_error, setup, teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  setenv("JX_NCCL_PATH", JX_NCCL_FAKE, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(axis_communicators_have_the_mesh_sizes_and_ranks, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(psum_every_dtype_op_and_axes, setup, teardown),
      cmocka_unit_test_setup_teardown(all_gather_blocks_in_rank_order, setup, teardown),
      cmocka_unit_test_setup_teardown(psum_scatter_gives_each_rank_its_block, setup, teardown),
      cmocka_unit_test_setup_teardown(all_to_all_transposes_the_blocks, setup, teardown),
      cmocka_unit_test_setup_teardown(ppermute_ring_and_partial_permutation, setup, teardown),
      cmocka_unit_test_setup_teardown(a_peer_that_never_calls_costs_the_deadline_error, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
