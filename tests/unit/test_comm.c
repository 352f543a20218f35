/* The `local` collectives engine: every collective on 1..8 rank threads against a plain
 * loop computing its definition; back-to-back rounds; asynchronous requests; deadlines
 * (missing devices named, the communicator broken afterwards); mismatched calls. */
#define _POSIX_C_SOURCE 200809L
#include <jx/jx.h>

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include "test_util.h"

#include "parallel/comm.h"

enum { MAXR = 8, ERRLEN = 1200 };
typedef enum {
  ALL_REDUCE,
  REDUCE_SCATTER,
  ALL_GATHER,
  ALL_TO_ALL,
  PERMUTE,
  BROADCAST,
  BARRIER
} kind;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_s(double s) {
  struct timespec t = {(time_t)s, (long)((s - floor(s)) * 1e9)};
  nanosleep(&t, NULL);
}

/* ---- running one function on n rank threads ---- */

typedef struct job job;
typedef jx_status (*rank_fn)(job *j, int rank);
struct job {
  jx_comm *c;
  int n;
  rank_fn fn;
  void *ctx;
  jx_status st[MAXR];
  char err[MAXR][ERRLEN];
  double secs[MAXR];
  int status_mismatch[MAXR]; /* the thread's recorded status differs from the returned one */
};
typedef struct {
  job *j;
  int rank;
} targ;

static void *rank_thread(void *p) {
  targ *a = p;
  job *j = a->j;
  int r = a->rank;
  double t0 = now_s();
  j->st[r] = j->fn(j, r);
  j->secs[r] = now_s() - t0;
  snprintf(j->err[r], ERRLEN, "%s", jx_last_error());
  j->status_mismatch[r] = j->st[r] != jx_last_status();
  jx_clear_error();
  return NULL;
}

static void run_job(job *j) {
  pthread_t t[MAXR];
  targ a[MAXR];
  for (int r = 0; r < j->n; r++) {
    a[r] = (targ){j, r};
    assert_int_equal(pthread_create(&t[r], NULL, rank_thread, &a[r]), 0);
  }
  for (int r = 0; r < j->n; r++) pthread_join(t[r], NULL);
  for (int r = 0; r < j->n; r++) assert_int_equal(j->status_mismatch[r], 0);
}

static void expect_all_ok(const job *j) {
  for (int r = 0; r < j->n; r++) {
    if (j->st[r]) fprintf(stderr, "rank %d: %s\n", r, j->err[r]);
    assert_int_equal(j->st[r], JX_OK);
  }
}

/* ---- data and the oracle ---- */

static uint64_t mix(uint64_t x) { /* splitmix64 */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* element i of a buffer filled for (seed): random bits per dtype; floats in [-4, 4)
 * with full mantissas (so sums round), a NaN at element 3 of seed 1 */
static void fill(void *buf, jx_dtype dt, size_t count, uint64_t seed) {
  for (size_t i = 0; i < count; i++) {
    uint64_t u = mix(seed * 0x100000001ull + i);
    double f = (double)(u >> 11) * 0x1p-53 * 8 - 4;
    if (seed % 16 == 1 && i == 3) f = NAN;
    switch (dt) {
    case JX_BOOL:
      ((uint8_t *)buf)[i] = (uint8_t)((u >> 7) % 3 != 0);
      break; /* and is not all-false */
    case JX_F32: ((float *)buf)[i] = (float)f; break;
    case JX_F64: ((double *)buf)[i] = f; break;
    case JX_BF16: ((uint16_t *)buf)[i] = jx_f32_to_bf16((float)f); break;
    case JX_F16: ((uint16_t *)buf)[i] = jx_f32_to_f16((float)f); break;
    default: memcpy((char *)buf + i * jx_dtype_size(dt), &u, jx_dtype_size(dt)); break;
    }
  }
}

static double getf(const void *b, jx_dtype dt, size_t i) {
  switch (dt) {
  case JX_F32: return ((const float *)b)[i];
  case JX_F64: return ((const double *)b)[i];
  case JX_BF16: return jx_bf16_to_f32(((const uint16_t *)b)[i]);
  case JX_F16: return jx_f16_to_f32(((const uint16_t *)b)[i]);
  default: return 0;
  }
}

static int64_t geti(const void *b, jx_dtype dt, size_t i) {
  switch (dt) {
  case JX_BOOL: return ((const uint8_t *)b)[i];
  case JX_I8: return ((const int8_t *)b)[i];
  case JX_I16: return ((const int16_t *)b)[i];
  case JX_I32: return ((const int32_t *)b)[i];
  case JX_I64: return ((const int64_t *)b)[i];
  case JX_U8: return ((const uint8_t *)b)[i];
  case JX_U16: return ((const uint16_t *)b)[i];
  case JX_U32: return ((const uint32_t *)b)[i];
  default: return (int64_t)((const uint64_t *)b)[i];
  }
}

static int is_float(jx_dtype dt) {
  return dt == JX_F16 || dt == JX_BF16 || dt == JX_F32 || dt == JX_F64;
}

/* The definition: srcs[0] op srcs[1] op ... in rank order, in f32 for 16-bit floats
 * (rounded once), in the dtype itself otherwise; integers wrap; NaN wins max/min. */
static void oracle(jx_dtype dt, jx_reduce_op op, const void *const *srcs, int n, size_t at,
                   void *out) {
  if (is_float(dt)) {
    if (dt == JX_F64) {
      double a = getf(srcs[0], dt, at);
      for (int q = 1; q < n; q++) {
        double x = getf(srcs[q], dt, at);
        if (op == JX_REDUCE_SUM)
          a = a + x;
        else if (op == JX_REDUCE_PROD)
          a = a * x;
        else if (isnan(a) || isnan(x))
          a = NAN;
        else
          a = op == JX_REDUCE_MAX ? fmax(a, x) : fmin(a, x);
      }
      memcpy(out, &a, 8);
      return;
    }
    float a = (float)getf(srcs[0], dt, at);
    for (int q = 1; q < n; q++) {
      float x = (float)getf(srcs[q], dt, at);
      if (op == JX_REDUCE_SUM)
        a = a + x;
      else if (op == JX_REDUCE_PROD)
        a = a * x;
      else if (isnan(a) || isnan(x))
        a = NAN;
      else
        a = op == JX_REDUCE_MAX ? fmaxf(a, x) : fminf(a, x);
    }
    uint16_t h = dt == JX_BF16 ? jx_f32_to_bf16(a) : jx_f32_to_f16(a);
    if (dt == JX_F32)
      memcpy(out, &a, 4);
    else
      memcpy(out, &h, 2);
    return;
  }
  int is_unsigned = dt == JX_U8 || dt == JX_U16 || dt == JX_U32 || dt == JX_U64;
  uint64_t a = (uint64_t)geti(srcs[0], dt, at);
  for (int q = 1; q < n; q++) {
    uint64_t x = (uint64_t)geti(srcs[q], dt, at);
    if (dt == JX_BOOL) {
      a = (op == JX_REDUCE_SUM || op == JX_REDUCE_MAX) ? (a | x) : (a & x);
    } else if (op == JX_REDUCE_SUM) {
      a = a + x;
    } else if (op == JX_REDUCE_PROD) {
      a = a * x;
    } else {
      int greater = is_unsigned ? a > x : (int64_t)a > (int64_t)x;
      a = (op == JX_REDUCE_MAX) == greater ? a : x;
    }
  }
  memcpy(out, &a, jx_dtype_size(dt)); /* little-endian truncation = wrap to the width */
}

/* equal bits, or both NaN */
static int same(const void *a, const void *b, jx_dtype dt) {
  size_t es = jx_dtype_size(dt);
  if (!memcmp(a, b, es)) return 1;
  return is_float(dt) && isnan(getf(a, dt, 0)) && isnan(getf(b, dt, 0));
}

/* ---- one collective on n ranks, checked against the definition ---- */

typedef struct {
  kind k;
  jx_dtype dt;
  jx_reduce_op op;
  size_t count;
  int root, inplace, async;
  int dst[MAXR], src[MAXR];
  char *send[MAXR], *recv[MAXR];
} coll;

static jx_status do_coll(job *j, int r) {
  coll *k = j->ctx;
  jx_comm *c = j->c;
  if (k->async) {
    jx_comm_request *q = NULL;
    switch (k->k) {
    case ALL_REDUCE:
      q = jx_comm_start_all_reduce(c, r, k->send[r], k->recv[r], k->count, k->dt, k->op);
      break;
    case REDUCE_SCATTER:
      q = jx_comm_start_reduce_scatter(c, r, k->send[r], k->recv[r], k->count, k->dt, k->op);
      break;
    case ALL_GATHER:
      q = jx_comm_start_all_gather(c, r, k->send[r], k->recv[r], k->count, k->dt);
      break;
    case ALL_TO_ALL:
      q = jx_comm_start_all_to_all(c, r, k->send[r], k->recv[r], k->count, k->dt);
      break;
    case PERMUTE:
      q = jx_comm_start_permute(c, r, k->send[r], k->recv[r], k->count, k->dt, k->dst[r],
                                k->src[r]);
      break;
    case BROADCAST: q = jx_comm_start_broadcast(c, r, k->recv[r], k->count, k->dt, k->root); break;
    case BARRIER: q = jx_comm_start_barrier(c, r); break;
    }
    return jx_comm_wait(q, 20);
  }
  switch (k->k) {
  case ALL_REDUCE:
    return jx_comm_all_reduce(c, r, k->send[r], k->recv[r], k->count, k->dt, k->op, 20);
  case REDUCE_SCATTER:
    return jx_comm_reduce_scatter(c, r, k->send[r], k->recv[r], k->count, k->dt, k->op, 20);
  case ALL_GATHER: return jx_comm_all_gather(c, r, k->send[r], k->recv[r], k->count, k->dt, 20);
  case ALL_TO_ALL: return jx_comm_all_to_all(c, r, k->send[r], k->recv[r], k->count, k->dt, 20);
  case PERMUTE:
    return jx_comm_permute(c, r, k->send[r], k->recv[r], k->count, k->dt, k->dst[r], k->src[r], 20);
  case BROADCAST: return jx_comm_broadcast(c, r, k->recv[r], k->count, k->dt, k->root, 20);
  case BARRIER: return jx_comm_barrier(c, r, 20);
  }
  return JX_ERR_INTERNAL;
}

static size_t send_len(const coll *k, int n) {
  return (k->k == REDUCE_SCATTER || k->k == ALL_TO_ALL) ? k->count * (size_t)n : k->count;
}
static size_t recv_len(const coll *k, int n) {
  return (k->k == ALL_GATHER || k->k == ALL_TO_ALL) ? k->count * (size_t)n : k->count;
}

/* Runs k on a fresh n-rank communicator and checks every rank's result. */
static void check_coll(coll k, int n) {
  double tq0 = now_s();
  jx_comm *c = jx_comm_local_create(n, "mesh axis 'test'", NULL);
  assert_non_null(c);
  size_t es = jx_dtype_size(k.dt), sl = send_len(&k, n), rl = recv_len(&k, n);
  char *orig[MAXR]; /* the inputs as they were, for the oracle */
  for (int r = 0; r < n; r++) {
    orig[r] = malloc(sl * es + 1);
    fill(orig[r], k.dt, sl, (uint64_t)r + 1);
    k.send[r] = malloc(sl * es + 1);
    memcpy(k.send[r], orig[r], sl * es);
    if (k.k == BROADCAST || (k.inplace && k.k == ALL_REDUCE)) {
      k.recv[r] = k.send[r];
    } else {
      k.recv[r] = malloc(rl * es + 1);
      memset(k.recv[r], 0xAB, rl * es); /* garbage the collective must overwrite */
    }
  }
  job j = {.c = c, .n = n, .fn = do_coll, .ctx = &k};
  run_job(&j);
  expect_all_ok(&j);
  const void *srcs[MAXR];
  char *want = malloc(rl * es + 1);
  size_t bad = 0;
  for (int r = 0; r < n; r++) {
    switch (k.k) {   /* want = rank r's result by the definition */
    case ALL_REDUCE: /* the same on every rank */
      for (int q = 0; q < n; q++) srcs[q] = orig[q];
      for (size_t i = 0; i < rl && r == 0; i++) oracle(k.dt, k.op, srcs, n, i, want + i * es);
      break;
    case REDUCE_SCATTER:
      for (int q = 0; q < n; q++) srcs[q] = orig[q] + (size_t)r * k.count * es;
      for (size_t i = 0; i < rl; i++) oracle(k.dt, k.op, srcs, n, i, want + i * es);
      break;
    case ALL_GATHER:
      for (int q = 0; q < n; q++) memcpy(want + (size_t)q * k.count * es, orig[q], k.count * es);
      break;
    case ALL_TO_ALL:
      for (int q = 0; q < n; q++)
        memcpy(want + (size_t)q * k.count * es, orig[q] + (size_t)r * k.count * es, k.count * es);
      break;
    case PERMUTE:
      if (k.src[r] >= 0)
        memcpy(want, orig[k.src[r]], rl * es);
      else
        memset(want, 0, rl * es);
      break;
    case BROADCAST: memcpy(want, orig[k.root], rl * es); break;
    case BARRIER: memset(want, 0xAB, rl * es); break; /* recv untouched */
    }
    if (!memcmp(want, k.recv[r], rl * es)) continue;
    for (size_t i = 0; i < rl; i++)
      if (!same(k.recv[r] + i * es, want + i * es, k.dt) && bad++ < 3)
        fprintf(stderr, "kind %d %s op %d n=%d count=%zu rank %d elem %zu differs\n", k.k,
                jx_dtype_name(k.dt), k.op, n, k.count, r, i);
  }
  free(want);
  assert_int_equal(bad, 0);
  for (int r = 0; r < n; r++) {
    if (k.recv[r] != k.send[r]) free(k.recv[r]);
    free(k.send[r]);
    free(orig[r]);
  }
  jx_comm_release(c);
  if (getenv("TEST_COMM_TIMES") && k.count > 100000)
    fprintf(stderr, "kind %d n %d: %.3f s (run %.3f)\n", k.k, n, now_s() - tq0, j.secs[0]);
}

static const int RANKS[] = {1, 2, 3, 4, 8};
static const size_t COUNTS[] = {0, 1, 7, 1000, 5000}; /* 5000 > JX_COMM_CHUNK: sliced path */
static const jx_dtype DTYPES[] = {JX_F32, JX_F64, JX_I32, JX_BF16, JX_BOOL};

static void reductions_match_the_definition(void **state) {
  (void)state;
  for (int kk = 0; kk < 2; kk++)
    for (size_t ni = 0; ni < 5; ni++)
      for (size_t di = 0; di < 5; di++)
        for (size_t ci = 0; ci < 5; ci++)
          for (int op = 0; op < 4; op++) {
            coll k = {.k = kk ? REDUCE_SCATTER : ALL_REDUCE,
                      .dt = DTYPES[di],
                      .op = op,
                      .count = COUNTS[ci]};
            k.inplace = kk == 0 && ci % 2 == 1;
            check_coll(k, RANKS[ni]);
          }
}

static void other_dtypes_reduce_in_their_rules(void **state) {
  (void)state; /* wrap in narrow integers (u16 * u16 must not overflow int), f16 in f32 */
  const jx_dtype more[] = {JX_I8, JX_U16, JX_U8, JX_I64, JX_U64, JX_F16, JX_I16, JX_U32};
  for (size_t di = 0; di < sizeof more / sizeof *more; di++)
    for (int op = 0; op < 4; op++)
      for (int kk = 0; kk < 2; kk++) {
        coll k = {.k = kk ? REDUCE_SCATTER : ALL_REDUCE, .dt = more[di], .op = op, .count = 3000};
        check_coll(k, 3);
        k.count = 33;
        check_coll(k, 4);
      }
}

static void large_buffers(void **state) {
  (void)state;
  for (int n = 2; n <= 8; n += 6) { /* 1 to 8 ranks and the sliced path: the tests above */
    size_t big = (size_t)1 << 20;
    check_coll(
        (coll){.k = ALL_REDUCE, .dt = JX_F32, .op = JX_REDUCE_SUM, .count = big, .inplace = n % 2},
        n);
    check_coll(
        (coll){.k = REDUCE_SCATTER, .dt = JX_F32, .op = JX_REDUCE_MAX, .count = big / (size_t)n},
        n);
    check_coll((coll){.k = ALL_GATHER, .dt = JX_F32, .count = big / (size_t)n}, n);
    check_coll((coll){.k = ALL_TO_ALL, .dt = JX_F32, .count = big / (size_t)n}, n);
    check_coll((coll){.k = BROADCAST, .dt = JX_F32, .count = big, .root = n - 1}, n);
    coll p = {.k = PERMUTE, .dt = JX_F32, .count = big};
    for (int r = 0; r < n; r++) {
      p.dst[r] = (r + 1) % n;
      p.src[r] = (r + n - 1) % n;
    }
    check_coll(p, n);
  }
}

static const jx_dtype MOVE_DTYPES[] = {JX_BOOL, JX_BF16, JX_F32, JX_F64, JX_I32};

static void data_movement_matches_the_definition(void **state) {
  (void)state;
  for (size_t ni = 0; ni < 5; ni++)
    for (size_t di = 0; di < 5; di++)
      for (size_t ci = 0; ci < 5; ci++) {
        int n = RANKS[ni];
        coll k = {.dt = MOVE_DTYPES[di], .count = COUNTS[ci]};
        k.k = ALL_GATHER;
        check_coll(k, n);
        k.k = ALL_TO_ALL;
        check_coll(k, n);
        k.k = BROADCAST;
        k.root = (int)(ci % (size_t)n);
        check_coll(k, n);
        k.k = PERMUTE; /* shift by one, but the last rank sends nothing and rank 0 gets zeros */
        for (int r = 0; r < n; r++) {
          k.dst[r] = r + 1 < n ? r + 1 : -1;
          k.src[r] = r - 1;
        }
        check_coll(k, n);
        k.k = BARRIER;
        check_coll(k, n);
      }
}

static void async_forms_match_the_definition(void **state) {
  (void)state;
  for (int kk = ALL_REDUCE; kk <= BARRIER; kk++)
    for (size_t ni = 1; ni < 5; ni++) {
      int n = RANKS[ni];
      coll k = {.k = kk, .dt = JX_F32, .op = JX_REDUCE_SUM, .count = 3001, .async = 1, .root = 1};
      for (int r = 0; r < n; r++) {
        k.dst[r] = (r + 2) % n;
        k.src[r] = (r + n - 2) % n;
      }
      check_coll(k, n);
    }
}

/* ---- back-to-back rounds ---- */

/* input element i of rank r in round t: small integers, so sums are exact in any order */
static int32_t val(int t, int r, size_t i) {
  return (int32_t)(mix((uint64_t)t * 1000 + (uint64_t)r * 7 + i) % 2001) - 1000;
}

typedef struct {
  int rounds;
  int wrong[MAXR];
} rounds_ctx;

static jx_status many_rounds(job *j, int r) {
  rounds_ctx *x = j->ctx;
  int n = j->n;
  static const size_t sizes[] = {1, 7, 1000, 5000};
  size_t maxc = 5000 * MAXR;
  int32_t *send = malloc(maxc * 4), *recv = malloc(maxc * 4);
  for (int t = 0; t < x->rounds; t++) {
    size_t cnt = sizes[(t / 7) % 4];
    int kind = t % 7;
    size_t sl = (kind == REDUCE_SCATTER || kind == ALL_TO_ALL) ? cnt * (size_t)n : cnt;
    for (size_t i = 0; i < sl; i++) send[i] = val(t, r, i);
    if ((mix((uint64_t)(t * 31 + r)) & 7) == 0) sleep_s(0.0005); /* shuffle who comes first */
    jx_status st = JX_OK;
    int inplace = t % 3 == 0;
    switch (kind) {
    case ALL_REDUCE:
      st = jx_comm_all_reduce(j->c, r, send, inplace ? send : recv, cnt, JX_I32, JX_REDUCE_SUM, 20);
      for (size_t i = 0; i < cnt; i++) {
        int32_t w = 0;
        for (int q = 0; q < n; q++) w += val(t, q, i);
        x->wrong[r] += (inplace ? send : recv)[i] != w;
      }
      break;
    case REDUCE_SCATTER:
      st = jx_comm_reduce_scatter(j->c, r, send, recv, cnt, JX_I32, JX_REDUCE_MAX, 20);
      for (size_t i = 0; i < cnt; i++) {
        int32_t w = INT32_MIN;
        for (int q = 0; q < n; q++)
          w = val(t, q, (size_t)r * cnt + i) > w ? val(t, q, (size_t)r * cnt + i) : w;
        x->wrong[r] += recv[i] != w;
      }
      break;
    case ALL_GATHER:
      st = jx_comm_all_gather(j->c, r, send, recv, cnt, JX_I32, 20);
      for (size_t i = 0; i < cnt * (size_t)n; i++)
        x->wrong[r] += recv[i] != val(t, (int)(i / cnt), i % cnt);
      break;
    case ALL_TO_ALL:
      st = jx_comm_all_to_all(j->c, r, send, recv, cnt, JX_I32, 20);
      for (size_t i = 0; i < cnt * (size_t)n; i++)
        x->wrong[r] += recv[i] != val(t, (int)(i / cnt), (size_t)r * cnt + i % cnt);
      break;
    case PERMUTE: {
      int shift = 1 + t % n;
      st = jx_comm_permute(j->c, r, send, recv, cnt, JX_I32, (r + shift) % n,
                           (r + n - shift % n) % n, 20);
      for (size_t i = 0; i < cnt; i++) x->wrong[r] += recv[i] != val(t, (r + n - shift % n) % n, i);
      break;
    }
    case BROADCAST:
      st = jx_comm_broadcast(j->c, r, send, cnt, JX_I32, t % n, 20);
      for (size_t i = 0; i < cnt; i++) x->wrong[r] += send[i] != val(t, t % n, i);
      break;
    default: st = jx_comm_barrier(j->c, r, 20); break;
    }
    if (st) break;
  }
  free(send);
  free(recv);
  return jx_last_status();
}

static void back_to_back_rounds(void **state) {
  (void)state;
  for (int n = 2; n <= MAXR; n += 6) {
    rounds_ctx x = {.rounds = 100};
    job j = {.c = jx_comm_local_create(n, "mesh axis 'rounds'", NULL),
             .n = n,
             .fn = many_rounds,
             .ctx = &x};
    run_job(&j);
    expect_all_ok(&j);
    for (int r = 0; r < n; r++) assert_int_equal(x.wrong[r], 0);
    jx_comm_release(j.c);
  }
}

/* ---- asynchronous requests overlapped with other work ---- */

typedef struct {
  float a[4][3000], b[4][3000], g[4][4 * 100], h[4][100];
  double start_secs[4];
  double work[4];
} async_ctx;

static jx_status overlapped(job *j, int r) {
  async_ctx *x = j->ctx;
  for (int i = 0; i < 3000; i++) x->a[r][i] = (float)(r * 3000 + i);
  for (int i = 0; i < 100; i++) x->h[r][i] = (float)(r + i);
  if (r == 3) sleep_s(0.3); /* rank 3 comes late: the others' starts must not wait for it */
  double t0 = now_s();
  jx_comm_request *q1 =
      jx_comm_start_all_reduce(j->c, r, x->a[r], x->b[r], 3000, JX_F32, JX_REDUCE_SUM);
  jx_comm_request *q2 = jx_comm_start_all_gather(j->c, r, x->h[r], x->g[r], 100, JX_F32);
  x->start_secs[r] = now_s() - t0;
  double acc = 0; /* other work while the requests run */
  for (int i = 1; i < 200000; i++) acc += 1.0 / i;
  x->work[r] = acc;
  /* a blocking call issued while requests are in flight runs after them */
  jx_status st = jx_comm_barrier(j->c, r, 20);
  jx_status s2 = jx_comm_wait(q2, 20), s1 = jx_comm_wait(q1, 20);
  return st ? st : s1 ? s1 : s2;
}

static void async_requests_overlap_other_work(void **state) {
  (void)state;
  async_ctx *x = calloc(1, sizeof *x);
  job j = {
      .c = jx_comm_local_create(4, "mesh axis 'async'", NULL), .n = 4, .fn = overlapped, .ctx = x};
  run_job(&j);
  expect_all_ok(&j);
  for (int r = 0; r < 3; r++) assert_true(x->start_secs[r] < 0.2);
  for (int r = 0; r < 4; r++) {
    assert_true(x->work[r] > 12);
    for (int i = 0; i < 3000; i++)
      assert_true(x->b[r][i] == (float)(0 * 3000 + i) + (float)(1 * 3000 + i) +
                                    (float)(2 * 3000 + i) + (float)(3 * 3000 + i));
    for (int q = 0; q < 4; q++)
      for (int i = 0; i < 100; i++) assert_true(x->g[r][q * 100 + i] == (float)(q + i));
  }
  jx_comm_release(j.c);
  free(x);
}

/* ---- deadlines ---- */

static jx_status first_two_reduce(job *j, int r) {
  float v = 1, out = 0;
  if (r >= 2) return JX_OK; /* ranks 2 and 3 never come */
  return jx_comm_all_reduce(j->c, r, &v, &out, 1, JX_F32, JX_REDUCE_SUM, 0.3);
}

static void missing_ranks_time_out_and_break_the_comm(void **state) {
  (void)state;
  const int devs[] = {10, 11, 12, 13};
  job j = {.c = jx_comm_local_create(4, "mesh axis 'data'", devs), .n = 4, .fn = first_two_reduce};
  run_job(&j);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(j.st[r], JX_ERR_TIMEOUT);
    assert_non_null(strstr(j.err[r], "all_reduce on mesh axis 'data' (4 ranks): devices 12, 13 "
                                     "did not arrive within 0.3 s"));
    assert_true(j.secs[r] >= 0.29 && j.secs[r] < 2.0);
  }
  /* the communicator is broken: a late rank and any later call fail at once, saying why */
  float v = 1, out;
  double t0 = now_s();
  assert_int_equal(jx_comm_all_reduce(j.c, 2, &v, &out, 1, JX_F32, JX_REDUCE_SUM, 5),
                   JX_ERR_TIMEOUT);
  assert_non_null(strstr(jx_last_error(), "unusable after an earlier failure"));
  assert_non_null(strstr(jx_last_error(), "devices 12, 13 did not arrive"));
  jx_clear_error();
  assert_int_equal(jx_comm_barrier(j.c, 0, 5), JX_ERR_TIMEOUT);
  assert_non_null(strstr(jx_last_error(),
                         "barrier on mesh axis 'data' (4 ranks): the communicator is unusable"));
  assert_true(now_s() - t0 < 1.0);
  jx_clear_error();
  jx_comm_release(j.c);
}

static jx_status only_rank0(job *j, int r) {
  if (r != 0) return JX_OK;
  return jx_comm_barrier(j->c, 0, 0); /* 0: the default from JX_COLLECTIVE_TIMEOUT */
}

static void default_deadline_comes_from_the_environment(void **state) {
  (void)state;
  setenv("JX_COLLECTIVE_TIMEOUT", "0.2", 1);
  assert_true(jx_comm_default_timeout() == 0.2);
  job j = {.c = jx_comm_local_create(2, NULL, NULL), .n = 2, .fn = only_rank0};
  run_job(&j);
  assert_int_equal(j.st[0], JX_ERR_TIMEOUT);
  assert_non_null(strstr(
      j.err[0], "barrier on local communicator (2 ranks): device 1 did not arrive within 0.2 s"));
  assert_true(j.secs[0] < 2.0);
  unsetenv("JX_COLLECTIVE_TIMEOUT");
  assert_true(jx_comm_default_timeout() == 300);
  setenv("JX_COLLECTIVE_TIMEOUT", "soon", 1);
  assert_true(jx_comm_default_timeout() == 300);
  unsetenv("JX_COLLECTIVE_TIMEOUT");
  jx_comm_release(j.c);
}

static void async_wait_times_out(void **state) {
  (void)state;
  jx_comm *c = jx_comm_local_create(3, "mesh axis 'model'", NULL);
  float v[4] = {1, 2, 3, 4}, out[4];
  jx_comm_request *q = jx_comm_start_all_reduce(c, 1, v, out, 4, JX_F32, JX_REDUCE_MAX);
  assert_non_null(q);
  double t0 = now_s();
  assert_int_equal(jx_comm_wait(q, 0.2), JX_ERR_TIMEOUT);
  assert_true(now_s() - t0 < 2.0);
  assert_non_null(strstr(
      jx_last_error(),
      "all_reduce on mesh axis 'model' (3 ranks): devices 0, 2 did not arrive within 0.2 s"));
  jx_clear_error();
  jx_comm_request *b = jx_comm_start_barrier(c, 0);
  assert_int_equal(jx_comm_wait(b, 1), JX_ERR_TIMEOUT);
  assert_non_null(strstr(jx_last_error(), "unusable"));
  jx_clear_error();
  assert_int_equal(jx_comm_wait(NULL, 1), JX_ERR_INVALID_ARGUMENT);
  jx_clear_error();
  jx_comm_release(c);
}

/* ---- disagreements and bad arguments ---- */

typedef struct {
  int variant;
} bad_ctx;

static jx_status disagree(job *j, int r) {
  bad_ctx *x = j->ctx;
  float a[8] = {0}, b[64] = {0};
  switch (x->variant) {
  case 0: /* counts differ */
    return jx_comm_all_reduce(j->c, r, a, b, r == 2 ? 6 : 5, JX_F32, JX_REDUCE_SUM, 5);
  case 1: /* operations differ */
    if (r == 1) return jx_comm_all_gather(j->c, r, a, b, 5, JX_F32, 5);
    return jx_comm_all_reduce(j->c, r, a, b, 5, JX_F32, JX_REDUCE_SUM, 5);
  case 2: /* dtypes differ */
    return jx_comm_all_reduce(j->c, r, a, b, 5, r == 3 ? JX_I32 : JX_F32, JX_REDUCE_SUM, 5);
  case 3: /* reduction ops differ */
    return jx_comm_reduce_scatter(j->c, r, a, b, 2, JX_F32, r == 1 ? JX_REDUCE_MAX : JX_REDUCE_SUM,
                                  5);
  case 4: /* ranks 0 and 2 both send to rank 1 */
    return jx_comm_permute(j->c, r, a, b, 4, JX_F32, r == 0 || r == 2 ? 1 : -1, r == 1 ? 0 : -1, 5);
  case 5: /* rank 0 sends to 1, but 1 expects from 3 */
    return jx_comm_permute(j->c, r, a, b, 4, JX_F32, r == 0 ? 1 : -1, r == 1 ? 3 : -1, 5);
  case 6: /* rank 2 passes a rank out of range: everyone fails fast */
    return jx_comm_barrier(j->c, r == 2 ? 7 : r, 5);
  case 7: /* rank 1 passes a NULL buffer */
    return jx_comm_all_gather(j->c, r, r == 1 ? NULL : a, b, 4, JX_F32, 5);
  case 8: /* broadcast roots differ */
    return jx_comm_broadcast(j->c, r, a, 4, JX_F32, r == 3 ? 2 : 0, 5);
  case 9: /* invalid dtype and reduction op */
    return jx_comm_all_reduce(j->c, r, a, b, 4, r == 0 ? (jx_dtype)99 : JX_F32,
                              r == 1 ? (jx_reduce_op)9 : JX_REDUCE_SUM, 5);
  }
  return JX_ERR_INTERNAL;
}

static void disagreements_fail_every_rank(void **state) {
  (void)state;
  static const char *const want[] = {
      "rank 0 (device 0) called all_reduce(count=5, f32, sum) but rank 2 (device 2) called "
      "all_reduce(count=6, f32, sum)",
      "rank 0 (device 0) called all_reduce(count=5, f32, sum) but rank 1 (device 1) called "
      "all_gather(count=5, f32)",
      "but rank 3 (device 3) called all_reduce(count=5, i32, sum)",
      "reduce_scatter(count=2, f32, sum) but rank 1 (device 1) called reduce_scatter(count=2, f32, "
      "max)",
      "ranks 0 and 2 (devices 0 and 2) both send to rank 1",
      "rank 0 (device 0) sends to rank 1, but rank 1 receives from 3",
      "rank 7 is out of range [0, 4)",
      "rank 1 (device 1) passed a NULL buffer with count 4",
      "called broadcast(count=4, f32, root=0) but rank 3 (device 3) called broadcast(count=4, f32, "
      "root=2)",
      "passed an invalid"};
  static const jx_status code[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
  for (int v = 0; v < 10; v++) {
    bad_ctx x = {v};
    job j = {
        .c = jx_comm_local_create(4, "mesh axis 'x'", NULL), .n = 4, .fn = disagree, .ctx = &x};
    double t0 = now_s();
    run_job(&j);
    assert_true(now_s() - t0 < 3.0); /* nobody waits for the 5 s deadline */
    for (int r = 0; r < 4; r++) {
      if (!strstr(j.err[r], want[v])) fprintf(stderr, "variant %d rank %d: %s\n", v, r, j.err[r]);
      assert_non_null(strstr(j.err[r], want[v]));
      if (code[v])
        assert_int_equal(j.st[r], JX_ERR_INVALID_ARGUMENT);
      else
        assert_int_not_equal(j.st[r], JX_OK);
    }
    jx_comm_release(j.c);
  }
}

static void bad_creation_and_null_comm(void **state) {
  (void)state;
  assert_null(jx_comm_local_create(0, "x", NULL));
  assert_non_null(strstr(jx_last_error(), "jx_comm_local_create: 0 ranks"));
  jx_clear_error();
  assert_int_equal(jx_comm_barrier(NULL, 0, 1), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "jx_comm_barrier: the communicator is NULL"));
  jx_clear_error();
  assert_null(jx_comm_start_all_gather(NULL, 0, NULL, NULL, 0, JX_F32));
  assert_non_null(strstr(jx_last_error(), "the communicator is NULL"));
  jx_clear_error();
  jx_comm *c = jx_comm_local_create(2, "mesh axis 'y'", NULL);
  assert_int_equal(jx_comm_size(c), 2);
  assert_string_equal(jx_comm_label(c), "mesh axis 'y'");
  jx_comm *c2 = jx_comm_retain(c);
  jx_comm_release(c);
  assert_int_equal(jx_comm_size(c2), 2); /* still alive: one reference left */
  jx_comm_release(c2);
}

static double t_start;
static int timed_setup(void **state) {
  t_start = now_s();
  return setup(state);
}
static int timed_teardown(void **state) {
  if (getenv("TEST_COMM_TIMES")) fprintf(stderr, "  %.2f s\n", now_s() - t_start);
  return teardown(state);
}
#define setup    timed_setup
#define teardown timed_teardown

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(reductions_match_the_definition, setup, teardown),
      cmocka_unit_test_setup_teardown(other_dtypes_reduce_in_their_rules, setup, teardown),
      cmocka_unit_test_setup_teardown(large_buffers, setup, teardown),
      cmocka_unit_test_setup_teardown(data_movement_matches_the_definition, setup, teardown),
      cmocka_unit_test_setup_teardown(async_forms_match_the_definition, setup, teardown),
      cmocka_unit_test_setup_teardown(back_to_back_rounds, setup, teardown),
      cmocka_unit_test_setup_teardown(async_requests_overlap_other_work, setup, teardown),
      cmocka_unit_test_setup_teardown(missing_ranks_time_out_and_break_the_comm, setup, teardown),
      cmocka_unit_test_setup_teardown(default_deadline_comes_from_the_environment, setup, teardown),
      cmocka_unit_test_setup_teardown(async_wait_times_out, setup, teardown),
      cmocka_unit_test_setup_teardown(disagreements_fail_every_rank, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_creation_and_null_comm, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
