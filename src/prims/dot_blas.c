/* dot_general through BLAS, for float operands with a float result.
 *
 * The contraction is B independent products [M, K] x [K, N] -> [M, N]
 * (B, M, K, N the flat sizes of the batch, lhs free, contracting and rhs
 * free dims). An operand whose row dims and column dims each form one
 * strided run can be handed to BLAS where it lies: row-major (NoTrans) when
 * its columns are contiguous, column-major (Trans) when its rows are; batch
 * dims only need an offset per batch. Contracting pairs may be visited in
 * any order, so the order that needs fewer copies is chosen. Otherwise, or
 * when the dtype differs from the one BLAS computes in, the operand is
 * packed into a contiguous [B, rows, cols] buffer of that type.
 *
 * BLAS computes in f64 when either the operands or the result are f64, else
 * in f32: f32 sums in f32 as XLA does on CPU (the reference sums f32 in f64,
 * so the two differ by f32 rounding of the sum); f16 and bf16 are widened to
 * f32 exactly and the result rounded once, as the reference does. Matrix x
 * vector shapes (M = 1 or N = 1) go through gemv. f32 GEMMs run jx's own
 * packed kernel (gemm_f32.c) where the CPU has AVX2 and FMA, as fast as
 * OpenBLAS's sgemm on the GPT's products or faster, and its bits do not
 * depend on how C is split; narrow ones run dot_skinny.c's loops. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "blas_threads.h"
#include "dot_gemv.h"
#include "dot_kernels.h"
#include "dot_skinny.h"
#include "gemm_f32.h"
#include "../array/array.h"
#include "../base/cpu_features.h"
#include "../base/threadpool.h"

#ifndef JX_HAVE_BLAS
const int jx_dot_have_blas = 0;

int jx_dot_blas(const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  (void)p;
  (void)in;
  (void)out;
  return 0;
}

int jx_dot_blas_side_by_side(int n, const jx_params *const *p, const jx_tensor *const *in,
                             jx_tensor *const *out) {
  (void)n;
  (void)p;
  (void)in;
  (void)out;
  return 0;
}

int jx_dot_blas_epilogue(const jx_params *p, const jx_tensor *in, jx_tensor *out,
                         const jx_gemm_epilogue *e) {
  (void)p, (void)in, (void)out, (void)e;
  return 0;
}
#else
#include <cblas.h>

const int jx_dot_have_blas = 1;

/* One group of dims of an operand, outer first: sizes and element strides. */
typedef struct {
  int n;
  int64_t count;
  int64_t size[JX_MAX_RANK], stride[JX_MAX_RANK];
} group;

static void group_add(group *g, int64_t size, int64_t stride) {
  g->size[g->n] = size;
  g->stride[g->n++] = stride;
  g->count *= size;
}

static int is_member(const jx_ilist *l, int64_t d) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == d) return 1;
  return 0;
}

/* The stride of the group's flat index when its dims form one strided run
 * (size-1 dims do not count), 0 when it has at most one element, -1 when it
 * is not a run. */
static int64_t run_stride(const group *g) {
  int64_t s = 0, next = 0;
  int have = 0;
  for (int d = g->n - 1; d >= 0; d--) {
    if (g->size[d] == 1) continue;
    if (!have) {
      s = g->stride[d];
      have = 1;
    } else if (g->stride[d] != next) {
      return -1;
    }
    next = g->stride[d] * g->size[d];
  }
  return s;
}

/* How BLAS reads one [rows, cols] matrix of an operand. */
typedef struct {
  CBLAS_TRANSPOSE trans; /* NoTrans: stored row-major rows x cols; Trans: cols x rows */
  int64_t ld;
  int copy; /* 1: the operand is packed into a contiguous buffer first */
} view;

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* A no-copy view of a matrix whose rows step by rs and columns by cs
 * (-1: not a run), or copy = 1 when there is none. */
static view view_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (rs >= 0 && cs >= 0) {
    if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= cols))
      return (view){CblasNoTrans, rows <= 1 ? max64(cols, 1) : rs, 0};
    if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= rows))
      return (view){CblasTrans, cols <= 1 ? max64(rows, 1) : cs, 0};
  }
  return (view){CblasNoTrans, max64(cols, 1), 1};
}

/* Element offsets of every multi-index of g, row-major order. */
static void offsets(const group *g, int64_t *out) {
  int64_t idx[JX_MAX_RANK] = {0}, off = 0;
  for (int64_t i = 0; i < g->count; i++) {
    out[i] = off;
    for (int d = g->n - 1; d >= 0; d--) {
      off += g->stride[d];
      if (++idx[d] < g->size[d]) break;
      off -= g->stride[d] * g->size[d];
      idx[d] = 0;
    }
  }
}

/* Packs t's [batch][rows][cols] into buf, converted to f64 (dbl) or f32. */
#define PACK_LOOP(DST, SRCT, CONV)                                                                 \
  for (int64_t r = 0; r < rg->count; r++) {                                                        \
    const SRCT *s = (const SRCT *)t->data + tb[b] + tr[r];                                         \
    for (int64_t c = 0; c < cg->count; c++) *DST++ = CONV(s[tc[c]]);                               \
  }
#define AS_IS(x) (x)

static int pack(const jx_tensor *t, int dbl, const group *bg, const group *rg, const group *cg,
                void *buf) {
  int64_t *tab = malloc(sizeof(int64_t) * (size_t)(bg->count + rg->count + cg->count + 1));
  if (!tab) return 0;
  int64_t *tb = tab, *tr = tb + bg->count, *tc = tr + rg->count;
  offsets(bg, tb);
  offsets(rg, tr);
  offsets(cg, tc);
  float *f = buf;
  double *d = buf;
  for (int64_t b = 0; b < bg->count; b++) switch (t->dtype) {
    case JX_F64:
      if (dbl)
        PACK_LOOP(d, double, AS_IS)
      else
        PACK_LOOP(f, double, (float))
      break;
    case JX_F32:
      if (dbl)
        PACK_LOOP(d, float, (double))
      else
        PACK_LOOP(f, float, AS_IS)
      break;
    case JX_F16:
      if (dbl)
        PACK_LOOP(d, uint16_t, (double)jx_f16_to_f32)
      else
        PACK_LOOP(f, uint16_t, jx_f16_to_f32)
      break;
    default: /* JX_BF16 */
      if (dbl)
        PACK_LOOP(d, uint16_t, (double)jx_bf16_to_f32)
      else
        PACK_LOOP(f, uint16_t, jx_bf16_to_f32)
      break;
    }
  free(tab);
  return 1;
}

/* One operand as BLAS sees it: base pointer, per-batch offsets, view. */
typedef struct {
  const void *base;
  int64_t *boff;
  view v;
  void *packed; /* owned copy, or NULL */
} operand;

/* bf16 <-> f32 over the pool for large arrays, inline conversions (no call
 * per element): a bf16 GEMM widens its operands and rounds its result around
 * an f32 one. */
typedef struct {
  const void *src;
  void *dst;
} half_job;

static void widen_bf16(void *ctx, int64_t begin, int64_t end) {
  const half_job *j = ctx;
  const uint16_t *h = j->src;
  float *w = j->dst;
  for (int64_t i = begin; i < end; i++) w[i] = jx_bf16_to_f32_inline(h[i]);
}

static void round_bf16(void *ctx, int64_t begin, int64_t end) {
  const half_job *j = ctx;
  const float *f = j->src;
  uint16_t *h = j->dst;
  for (int64_t i = begin; i < end; i++) h[i] = jx_f32_to_bf16_inline(f[i]);
}

enum { HALF_GRAIN = 1 << 16 };

/* Prepares operand t of groups (batch bg, rows rg, cols cg); 0 when out of memory. */
static int prepare(const jx_tensor *t, int dbl, const group *bg, const group *rg, const group *cg,
                   operand *o) {
  jx_dtype want = dbl ? JX_F64 : JX_F32;
  o->v = view_of(rg->count, cg->count, run_stride(rg), run_stride(cg));
  o->packed = NULL;
  o->boff = malloc(sizeof(int64_t) * (size_t)bg->count);
  if (!o->boff) return 0;
  if (t->dtype == JX_BF16 && !dbl && !o->v.copy) {
    /* widened where it lies: BLAS then reads it as the f32 operand would be read */
    size_t n = (size_t)jx_shape_numel(t->shape);
    o->packed = malloc(sizeof(float) * (n ? n : 1));
    if (!o->packed) return 0;
    half_job j = {t->data, o->packed};
    jx_parallel_for((int64_t)n, HALF_GRAIN, widen_bf16, &j);
    o->base = o->packed;
    offsets(bg, o->boff);
    return 1;
  }
  if (t->dtype != want) o->v = view_of(rg->count, cg->count, -1, -1);
  if (!o->v.copy) {
    o->base = t->data;
    offsets(bg, o->boff);
    return 1;
  }
  size_t n = (size_t)(bg->count * rg->count * cg->count);
  o->packed = malloc((dbl ? sizeof(double) : sizeof(float)) * (n ? n : 1));
  if (!o->packed || !pack(t, dbl, bg, rg, cg, o->packed)) return 0;
  o->base = o->packed;
  for (int64_t b = 0; b < bg->count; b++) o->boff[b] = b * rg->count * cg->count;
  return 1;
}

static int fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* One gemm, C = L x R over blocks of C's rows or columns. */
typedef struct {
  int dbl;
  int64_t M, N, K;
  const operand *L, *R;
  void *C;
  int64_t pieces, quanta;      /* blocks per batch; rows (or columns) in quantum units */
  int cols;                    /* 1: the blocks split C's columns, 0: its rows */
  const jx_gemm_epilogue *epi; /* jx_dot_blas_epilogue's, else NULL */
} gemm_job;

/* C[b] rows [m0, m1), columns [n0, n1). */
static void gemm_block(const gemm_job *j, int64_t b, int64_t m0, int64_t m1, int64_t n0,
                       int64_t n1) {
  const operand *L = j->L, *R = j->R;
  int lda = (int)L->v.ld, ldb = (int)R->v.ld, ldc = (int)j->N, k = (int)j->K;
  int m = (int)(m1 - m0), n = (int)(n1 - n0);
  size_t lo = (size_t)L->boff[b], ro = (size_t)R->boff[b];
  size_t co = (size_t)((b * j->M + m0) * j->N + n0);
  lo += (size_t)(L->v.trans == CblasNoTrans ? m0 * lda : m0);
  ro += (size_t)(R->v.trans == CblasNoTrans ? n0 : n0 * ldb);
  if (j->epi) { /* jx_dot_blas_epilogue checked that jx's GEMM runs here */
    jx_gemm_epilogue e = *j->epi;
    if (e.bias) e.bias += n0;
    jx_sgemm_packed(L->v.trans == CblasTrans, R->v.trans == CblasTrans, m, n, k,
                    (const float *)L->base + lo, lda, (const float *)R->base + ro, ldb,
                    (float *)j->C + co, ldc, &e);
    return;
  }
  if (!j->dbl && jx_sgemm_skinny(L->v.trans == CblasTrans, R->v.trans == CblasTrans, m, n, k,
                                 (const float *)L->base + lo, lda, (const float *)R->base + ro, ldb,
                                 (float *)j->C + co, ldc))
    return;
  if (!j->dbl && jx_sgemm_packed(L->v.trans == CblasTrans, R->v.trans == CblasTrans, m, n, k,
                                 (const float *)L->base + lo, lda, (const float *)R->base + ro, ldb,
                                 (float *)j->C + co, ldc, NULL))
    return;
  if (j->dbl)
    cblas_dgemm(CblasRowMajor, L->v.trans, R->v.trans, m, n, k, 1.0, (const double *)L->base + lo,
                lda, (const double *)R->base + ro, ldb, 0.0, (double *)j->C + co, ldc);
  else
    cblas_sgemm(CblasRowMajor, L->v.trans, R->v.trans, m, n, k, 1.0f, (const float *)L->base + lo,
                lda, (const float *)R->base + ro, ldb, 0.0f, (float *)j->C + co, ldc);
}

/* Row blocks: ROW_QUANTUM-row units shared out evenly, so that the pieces
 * the threads take are as equal as the quantum allows; column blocks the
 * same in COL_QUANTUM-column units. */
enum { ROW_QUANTUM = 16, COL_QUANTUM = 64 };

static void gemm_units(void *ctx, int64_t begin, int64_t end) {
  const gemm_job *j = ctx;
  for (int64_t u = begin; u < end; u++) {
    int64_t b = u / j->pieces, p = u % j->pieces;
    int64_t q = j->cols ? COL_QUANTUM : ROW_QUANTUM, size = j->cols ? j->N : j->M;
    int64_t i0 = p * j->quanta / j->pieces * q, i1 = (p + 1) * j->quanta / j->pieces * q;
    if (i1 > size) i1 = size;
    if (i0 >= i1) continue;
    if (j->cols)
      gemm_block(j, b, 0, j->M, i0, i1);
    else
      gemm_block(j, b, i0, i1, 0, j->N);
  }
}

/* A GEMM is split into one row block per thread of the pool (one when the
 * caller is itself one of the pool's jobs, a device thread), in units of
 * ROW_QUANTUM rows: each block is one sgemm call, which packs the whole of
 * B, so more blocks than threads only pack B more often (two blocks per
 * thread made the MLP step 5 % slower than one). With jx's f32 GEMM a row's
 * sums do not depend on its block; through OpenBLAS (f64, or JX_GEMM=0)
 * they depend on where its block starts (its kernels walk the rows in steps
 * of 48 and finish with narrower ones), so results depend on the number of
 * threads, as XLA's do, and are the same from run to run for a given
 * JX_NUM_THREADS. A piece smaller than MIN_PIECE_MACS is not worth a
 * thread's hand-off; skinny products are (an MLP's 256 x 512 x 10 output
 * layer and its gradients run at a fifth of OpenBLAS's speed on big ones,
 * and halving them made the jitted MLP step 4 % faster); a block has at
 * least MIN_PIECE_QUANTA units, since one more B to pack does not pay for
 * fewer rows than that. A product with too few rows for two blocks (a
 * decode step's 16 sequences times a weight matrix) is split by columns
 * instead: each block then packs only its own columns of B, and a column's
 * sums do not depend on the block it falls in. So is a product with at least
 * twice as many columns as rows (a weight gradient x^T dy, 128 x 512 over
 * 2048 in the small GPT's MLP): row blocks would each pack all of the larger
 * B, column blocks pack their own part of it and the smaller A twice
 * (measured in CPU time on one such product: 10-25 % faster at 128 rows,
 * 1-4 % at 256 and 512). */
enum { MIN_PIECE_MACS = 1 << 19, MIN_PIECE_QUANTA = 4, MIN_COL_QUANTA = 2 };

/* Every batch's gemm, a single one's rows or columns split into blocks: the
 * job's units, B * pieces of them, each one sgemm/dgemm call. */
static gemm_job gemm_plan(int dbl, int64_t B, int64_t M, int64_t N, int64_t K, const operand *L,
                          const operand *R, void *C) {
  int64_t quanta = (M + ROW_QUANTUM - 1) / ROW_QUANTUM;
  gemm_job j = {dbl, M, N, K, L, R, C, 1, quanta, 0, NULL};
  int64_t want = jx_blas_own_threads() && B == 1 ? M * N * K / MIN_PIECE_MACS : 1;
  int64_t threads = jx_pool_inside() ? 1 : jx_pool_threads();
  if (want > threads) want = threads;
  int64_t col_quanta = (N + COL_QUANTUM - 1) / COL_QUANTUM;
  if (want > 1 &&
      (quanta / MIN_PIECE_QUANTA < 2 || (N >= 2 * M && col_quanta / MIN_COL_QUANTA >= want))) {
    j.cols = 1;
    j.quanta = col_quanta;
    if (want > j.quanta / MIN_COL_QUANTA) want = j.quanta / MIN_COL_QUANTA;
  } else if (want > quanta / MIN_PIECE_QUANTA) {
    want = quanta / MIN_PIECE_QUANTA;
  }
  if (want > 1)
    j.pieces = want;
  else
    j.quanta = quanta, j.cols = 0;
  return j;
}

static void gemm_all(int dbl, int64_t B, int64_t M, int64_t N, int64_t K, const operand *L,
                     const operand *R, void *C) {
  gemm_job j = gemm_plan(dbl, B, M, N, K, L, R, C);
  jx_parallel_for(B * j.pieces, 1, gemm_units, &j);
}

/* Matrix x vector products, c[b] = l[b] R[b] (M = 1) or L[b] r[b] (N = 1),
 * outputs [i0, i1) of its N (or M). */
static void gemv_block(const gemm_job *j, int64_t b, int64_t i0, int64_t i1) {
  const operand *L = j->L, *R = j->R;
  int n = (int)(i1 - i0), k = (int)j->K, lda = (int)L->v.ld, ldb = (int)R->v.ld;
  size_t lo = (size_t)L->boff[b], ro = (size_t)R->boff[b], co = (size_t)(b * j->M * j->N + i0);
  if (j->M == 1) { /* c[N] = R^T l: R stored K x N (NoTrans) or N x K (Trans) */
    int rt = R->v.trans == CblasNoTrans, incl = L->v.trans == CblasNoTrans ? 1 : lda;
    ro += (size_t)(rt ? i0 : i0 * ldb);
    if (!j->dbl && rt &&
        jx_sgemv_rows(0, n, k, (const float *)L->base + lo, incl, (const float *)R->base + ro, ldb,
                      (float *)j->C + co))
      return;
    if (j->dbl)
      cblas_dgemv(CblasRowMajor, rt ? CblasTrans : CblasNoTrans, rt ? k : n, rt ? n : k, 1.0,
                  (const double *)R->base + ro, ldb, (const double *)L->base + lo, incl, 0.0,
                  (double *)j->C + co, 1);
    else
      cblas_sgemv(CblasRowMajor, rt ? CblasTrans : CblasNoTrans, rt ? k : n, rt ? n : k, 1.0f,
                  (const float *)R->base + ro, ldb, (const float *)L->base + lo, incl, 0.0f,
                  (float *)j->C + co, 1);
  } else { /* c[M] = L r: L stored M x K (NoTrans) or K x M (Trans) */
    int lt = L->v.trans == CblasNoTrans, incr = R->v.trans == CblasNoTrans ? ldb : 1;
    lo += (size_t)(lt ? i0 * lda : i0);
    if (j->dbl)
      cblas_dgemv(CblasRowMajor, lt ? CblasNoTrans : CblasTrans, lt ? n : k, lt ? k : n, 1.0,
                  (const double *)L->base + lo, lda, (const double *)R->base + ro, incr, 0.0,
                  (double *)j->C + co, 1);
    else
      cblas_sgemv(CblasRowMajor, lt ? CblasNoTrans : CblasTrans, lt ? n : k, lt ? k : n, 1.0f,
                  (const float *)L->base + lo, lda, (const float *)R->base + ro, incr, 0.0f,
                  (float *)j->C + co, 1);
  }
}

static void gemv_units(void *ctx, int64_t begin, int64_t end) {
  const gemm_job *j = ctx;
  for (int64_t b = begin; b < end; b++) gemv_block(j, b, 0, j->M == 1 ? j->N : j->M);
}

/* Columns [i * quanta, (i + 1) * quanta) of one f32 x W gemv per unit i
 * (jx_sgemv_rows: each output's bits are the same however they are split). */
static void gemv_cols(void *ctx, int64_t begin, int64_t end) {
  const gemm_job *j = ctx;
  for (int64_t i = begin; i < end; i++) {
    int64_t i0 = i * j->quanta, i1 = i0 + j->quanta < j->N ? i0 + j->quanta : j->N;
    if (i0 < i1) gemv_block(j, 0, i0, i1);
  }
}

/* A batch of small gemvs (attention over a key/value cache, one per
 * sequence and head) is shared out whole over the pool once it has at least
 * MIN_GEMV_PIECE multiply-adds a thread. A single f32 x W gemv with W
 * row-major (a decode step's projection at batch 1) is split by blocks of
 * GEMV_COL_QUANTUM columns, each thread streaming its part of every row
 * through jx_sgemv_rows; other single gemvs stay on one thread (BLAS's
 * gemv, whose bits could depend on the split). */
enum { MIN_GEMV_PIECE = 1 << 17, MIN_GEMV_SPLIT = 1 << 17, GEMV_COL_QUANTUM = 64 };

static void gemv_all(int dbl, int64_t B, int64_t M, int64_t N, int64_t K, const operand *L,
                     const operand *R, void *C) {
  int64_t size = M == 1 ? N : M;
  gemm_job j = {dbl, M, N, K, L, R, C, 1, 1, 0, NULL};
  int64_t threads = jx_pool_inside() || !jx_blas_own_threads() ? 1 : jx_pool_threads();
  if (B == 1 && M == 1 && !dbl && R->v.trans == CblasNoTrans && jx_cpu_has_avx2_fma()) {
    int64_t want = N * K / MIN_GEMV_SPLIT, blocks = (N + GEMV_COL_QUANTUM - 1) / GEMV_COL_QUANTUM;
    if (want > threads) want = threads;
    if (want > blocks) want = blocks;
    if (want > 1) {
      j.quanta = (blocks + want - 1) / want * GEMV_COL_QUANTUM;
      jx_parallel_for((N + j.quanta - 1) / j.quanta, 1, gemv_cols, &j);
      return;
    }
  }
  int64_t want = B * size * K / MIN_GEMV_PIECE;
  if (want > threads) want = threads;
  if (B > 1 && want > 1)
    jx_parallel_for(B, (B + want - 1) / want, gemv_units, &j);
  else
    gemv_units(&j, 0, B);
}

/* C[b] = L[b] x R[b] for every batch: gemv for a single row or column, else gemm. */
static void multiply(int dbl, int64_t B, int64_t M, int64_t N, int64_t K, const operand *L,
                     const operand *R, void *C) {
  if (M != 1 && N != 1)
    gemm_all(dbl, B, M, N, K, L, R, C);
  else
    gemv_all(dbl, B, M, N, K, L, R, C);
}

/* Rounds the computed result into out's dtype (f64 -> f32, f32 -> f16, ...). */
static void store(int dbl, const void *c, int64_t n, jx_tensor *out) {
  if (!dbl && out->dtype == JX_BF16) {
    half_job j = {c, out->data};
    jx_parallel_for(n, HALF_GRAIN, round_bf16, &j);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    if (dbl)
      jx_store_f64(out->data, out->dtype, i, ((const double *)c)[i]);
    else if (out->dtype == JX_BF16)
      ((uint16_t *)out->data)[i] = jx_f32_to_bf16(((const float *)c)[i]);
    else
      ((uint16_t *)out->data)[i] = jx_f32_to_f16(((const float *)c)[i]);
  }
}

/* Contracting dims as (lhs group, rhs group) visited in the order of pairs perm. */
static void contracting(const jx_params *p, const int *perm, const int64_t *ls, const int64_t *rs,
                        const jx_shape *lsh, const jx_shape *rsh, group *lk, group *rk) {
  *lk = *rk = (group){0, 1, {0}, {0}};
  for (int i = 0; i < p->l[JX_DOT_LC].n; i++) {
    int64_t a = p->l[JX_DOT_LC].v[perm[i]], b = p->l[JX_DOT_RC].v[perm[i]];
    group_add(lk, lsh->dims[a], ls[a]);
    group_add(rk, rsh->dims[b], rs[b]);
  }
}

/* Pair order sorted by the lhs (side 0) or the rhs (side 1) dim numbers. */
static void sorted_pairs(const jx_ilist *l, int *perm) {
  for (int i = 0; i < l->n; i++) perm[i] = i;
  for (int i = 1; i < l->n; i++)
    for (int j = i; j > 0 && l->v[perm[j]] < l->v[perm[j - 1]]; j--) {
      int t = perm[j];
      perm[j] = perm[j - 1];
      perm[j - 1] = t;
    }
}

/* One dot_general as BLAS products: planned (operands viewed or packed, a
 * buffer for a result BLAS cannot write in place), multiplied, finished
 * (rounded into the result's dtype, buffers freed). */
typedef struct {
  int dbl, direct, done; /* done: nothing to multiply (an empty result or empty sums) */
  int64_t B, M, N, K, total;
  operand L, R;
  void *tmp;
  jx_tensor *out;
} dot_call;

static void dot_free(dot_call *c) {
  free(c->tmp);
  free(c->L.boff);
  free(c->L.packed);
  free(c->R.boff);
  free(c->R.packed);
}

/* 0 when BLAS does not apply (then c holds nothing to free). */
static int dot_plan(const jx_params *p, const jx_tensor *in, jx_tensor *out, dot_call *c) {
  *c = (dot_call){0};
  jx_dtype idt = in[0].dtype, odt = out->dtype;
  if (!jx_is_float(idt) || !jx_is_float(odt)) return 0;
  int dbl = idt == JX_F64 || odt == JX_F64;
  jx_shape lsh = in[0].shape, rsh = in[1].shape;
  int64_t ls[JX_MAX_RANK], rs[JX_MAX_RANK];
  jx_shape_strides(lsh, ls);
  jx_shape_strides(rsh, rs);
  group lb = {0, 1, {0}, {0}}, rb = lb, lm = lb, rn = lb, lk, rk;
  for (int i = 0; i < p->l[JX_DOT_LB].n; i++) {
    int64_t a = p->l[JX_DOT_LB].v[i], b = p->l[JX_DOT_RB].v[i];
    group_add(&lb, lsh.dims[a], ls[a]);
    group_add(&rb, rsh.dims[b], rs[b]);
  }
  for (int d = 0; d < lsh.rank; d++)
    if (!is_member(&p->l[JX_DOT_LC], d) && !is_member(&p->l[JX_DOT_LB], d))
      group_add(&lm, lsh.dims[d], ls[d]);
  for (int d = 0; d < rsh.rank; d++)
    if (!is_member(&p->l[JX_DOT_RC], d) && !is_member(&p->l[JX_DOT_RB], d))
      group_add(&rn, rsh.dims[d], rs[d]);
  /* the contracting order that leaves fewer operands to copy */
  int by_l[JX_MAX_RANK], by_r[JX_MAX_RANK];
  sorted_pairs(&p->l[JX_DOT_LC], by_l);
  sorted_pairs(&p->l[JX_DOT_RC], by_r);
  contracting(p, by_l, ls, rs, &lsh, &rsh, &lk, &rk);
  int64_t B = lb.count, M = lm.count, N = rn.count, K = lk.count;
  if (view_of(M, K, run_stride(&lm), run_stride(&lk)).copy +
          view_of(K, N, run_stride(&rk), run_stride(&rn)).copy >
      0) {
    group lk2, rk2;
    contracting(p, by_r, ls, rs, &lsh, &rsh, &lk2, &rk2);
    if (view_of(M, K, run_stride(&lm), run_stride(&lk2)).copy +
            view_of(K, N, run_stride(&rk2), run_stride(&rn)).copy <
        view_of(M, K, run_stride(&lm), run_stride(&lk)).copy +
            view_of(K, N, run_stride(&rk), run_stride(&rn)).copy)
      lk = lk2, rk = rk2;
  }

  if (!fits_int(M) || !fits_int(N) || !fits_int(K)) return 0;
  c->dbl = dbl;
  c->direct = odt == (dbl ? JX_F64 : JX_F32);
  c->B = B, c->M = M, c->N = N, c->K = K, c->total = B * M * N;
  c->out = out;
  if (c->total == 0) {
    c->done = 1;
    return 1;
  }
  if (K == 0) { /* empty sums: zeros (all-zero bits in every float dtype) */
    memset(out->data, 0, jx_dtype_size(odt) * (size_t)c->total);
    c->done = 1;
    return 1;
  }
  int ok = prepare(&in[0], dbl, &lb, &lm, &lk, &c->L) &&
           prepare(&in[1], dbl, &rb, &rk, &rn, &c->R) && fits_int(c->L.v.ld) && fits_int(c->R.v.ld);
  if (ok && !c->direct) ok = (c->tmp = malloc((dbl ? 8 : 4) * (size_t)c->total)) != NULL;
  if (!ok) dot_free(c);
  return ok;
}

static void *dot_result(const dot_call *c) { return c->direct ? c->out->data : c->tmp; }

static void dot_finish(dot_call *c) {
  if (!c->done && !c->direct) store(c->dbl, c->tmp, c->total, c->out);
  dot_free(c);
}

int jx_dot_blas(const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  dot_call c;
  if (!dot_plan(p, in, out, &c)) return 0;
  if (!c.done) multiply(c.dbl, c.B, c.M, c.N, c.K, &c.L, &c.R, dot_result(&c));
  dot_finish(&c);
  return 1;
}

int jx_dot_blas_epilogue(const jx_params *p, const jx_tensor *in, jx_tensor *out,
                         const jx_gemm_epilogue *e) {
  if (in[0].dtype != JX_F32 || in[1].dtype != JX_F32 || out->dtype != JX_F32 ||
      !jx_sgemm_packed_usable())
    return 0;
  int64_t K = 1; /* empty sums would be written as zeros by dot_plan */
  for (int i = 0; i < p->l[JX_DOT_LC].n; i++) K *= in[0].shape.dims[p->l[JX_DOT_LC].v[i]];
  if (K == 0 || jx_shape_numel(out->shape) == 0) return 0;
  dot_call c;
  if (!dot_plan(p, in, out, &c)) return 0;
  if (!c.direct || c.M == 1 || c.N == 1) {
    dot_free(&c);
    return 0;
  }
  gemm_job j = gemm_plan(0, c.B, c.M, c.N, c.K, &c.L, &c.R, out->data);
  j.epi = e;
  jx_parallel_for(c.B * j.pieces, 1, gemm_units, &j);
  dot_finish(&c);
  return 1;
}

/* The units of several GEMM jobs as one range: unit u of the whole is unit
 * u - first[i] of job i. */
typedef struct {
  int n;
  gemm_job *job;
  const int64_t *first; /* n + 1 entries */
} gemm_jobs;

static void gemm_jobs_units(void *ctx, int64_t begin, int64_t end) {
  const gemm_jobs *g = ctx;
  for (int i = 0; i < g->n && begin < end; i++) {
    int64_t b = begin > g->first[i] ? begin : g->first[i];
    int64_t e = end < g->first[i + 1] ? end : g->first[i + 1];
    if (b < e) gemm_units(&g->job[i], b - g->first[i], e - g->first[i]);
  }
}

int jx_dot_blas_side_by_side(int n, const jx_params *const *p, const jx_tensor *const *in,
                             jx_tensor *const *out) {
  enum { MAX_SIDE = 8 };
  if (n < 1 || n > MAX_SIDE) return 0;
  dot_call c[MAX_SIDE];
  int planned = 0, ok = 1;
  while (planned < n && ok)
    if ((ok = dot_plan(p[planned], &in[planned][0], out[planned], &c[planned]))) planned++;
  for (int i = 0; i < planned && ok; i++) /* GEMMs only: gemv and empty products run alone */
    ok = !c[i].done && c[i].M > 1 && c[i].N > 1;
  if (!ok) {
    for (int i = 0; i < planned; i++) dot_free(&c[i]);
    return 0;
  }
  gemm_job job[MAX_SIDE];
  int64_t first[MAX_SIDE + 1] = {0};
  for (int i = 0; i < n; i++) {
    job[i] =
        gemm_plan(c[i].dbl, c[i].B, c[i].M, c[i].N, c[i].K, &c[i].L, &c[i].R, dot_result(&c[i]));
    first[i + 1] = first[i] + c[i].B * job[i].pieces;
  }
  gemm_jobs all = {n, job, first};
  jx_parallel_for(first[n], 1, gemm_jobs_units, &all);
  for (int i = 0; i < n; i++) dot_finish(&c[i]);
  return 1;
}
#endif
