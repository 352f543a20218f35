/* Reductions over axes, as lax.reduce_{sum,prod,max,min,and,or} and
 * lax.argmax/argmin.
 *
 * reduce_*: axes = l0 (sorted, distinct, in range); the result drops them and
 * keeps the operand's dtype and weak type. An empty reduction gives the
 * identity: sum 0, prod 1, max -inf (integers: their minimum, bool false),
 * min +inf (integers: their maximum, bool true), and all ones, or 0.
 * Accumulation: integers wrap (computed in 64 bits, stored to width); f32,
 * f16 and bf16 sums accumulate in f32 with NumPy's pairwise tree (eight
 * partial sums per block of 128, error ~ log2(n) ulps; NumPy's bits for
 * contiguous f32/f64 sums) and round once; f64 sums are pairwise in f64;
 * products multiply sequentially in f32 (f64 for f64) and round once. Float
 * max/min propagate NaN. sum/prod take numbers, max/min every dtype (bool
 * max is or), and/or bool and integers (bitwise). Complex (sum and prod
 * only; complex.c): sums are pairwise per part, products in order in the
 * complex dtype.
 *
 * argmax/argmin: axis = i0, index dtype = dtype (i32 or i64). The first index
 * of ties wins; NaN counts as the extreme and the first NaN wins, as JAX.
 * The reduced dimension must not be empty.
 * Transformation rules: reduce_rules.c. */
#include <complex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/threadpool.h"
#include "pairwise_split.h"
#include "prims.h"
#include "reduce_rules.h"
#include "rules.h"
#include "structural_rules.h"
#include "vloop.h"

typedef enum { R_SUM, R_PROD, R_MAX, R_MIN, R_AND, R_OR } rop;

/* ---- shape rule ---- */

static jx_status check_axes(const char *name, const jx_ilist *axes, const jx_aval *a) {
  char s[JX_AVAL_STR_CAP];
  if (axes->n < 0 || axes->n > a->shape.rank)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %d axes given for operand %s", name, axes->n,
                        jx_aval_str(a->dtype, a->shape, s));
  for (int i = 0; i < axes->n; i++) {
    int64_t d = axes->v[i];
    if (d < 0 || d >= a->shape.rank)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: axis %lld is out of range for operand %s",
                          name, (long long)d, jx_aval_str(a->dtype, a->shape, s));
    if (i > 0 && d <= axes->v[i - 1])
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: axes must be sorted and distinct (axis %lld after %lld) for "
                          "operand %s",
                          name, (long long)d, (long long)axes->v[i - 1],
                          jx_aval_str(a->dtype, a->shape, s));
  }
  return JX_OK;
}

static int dtype_ok(rop op, jx_dtype dt) {
  switch (op) {
  case R_SUM:
  case R_PROD: return dt != JX_BOOL;
  case R_AND:
  case R_OR: return !jx_is_float(dt);
  default: return 1;
  }
}

static jx_status infer_reduce(rop op, const char *name, const jx_params *p, const jx_aval *in,
                              jx_aval *out) {
  char s[JX_AVAL_STR_CAP];
  if (!dtype_ok(op, in->dtype))
    return jx_error_set(
        JX_ERR_DTYPE, "%s: operand %s needs %s", name, jx_aval_str(in->dtype, in->shape, s),
        op == R_AND || op == R_OR ? "a bool or integer dtype" : "a numeric (non-bool) dtype");
  jx_status st = check_axes(name, &p->l[0], in);
  if (st) return st;
  int drop[JX_MAX_RANK] = {0};
  for (int i = 0; i < p->l[0].n; i++) drop[p->l[0].v[i]] = 1;
  out->dtype = in->dtype;
  out->weak = in->weak;
  out->shape.rank = 0;
  for (int i = 0; i < in->shape.rank; i++)
    if (!drop[i]) out->shape.dims[out->shape.rank++] = in->shape.dims[i];
  return JX_OK;
}

/* ---- iteration: the operand split into kept and reduced dims ---- */

typedef struct {
  int nkeep;
  int64_t keep_dims[JX_MAX_RANK], keep_strides[JX_MAX_RANK];
  int64_t nred;    /* elements reduced into each output */
  int64_t *offset; /* offset[r]: element offset of the r-th reduced position */
} layout;

/* Returns 0 when out of memory. */
static int make_layout(jx_shape s, const jx_ilist *axes, layout *L) {
  int64_t strides[JX_MAX_RANK];
  jx_shape_strides(s, strides);
  int drop[JX_MAX_RANK] = {0}, nred_dims = 0;
  int64_t red_dims[JX_MAX_RANK], red_strides[JX_MAX_RANK];
  for (int i = 0; i < axes->n; i++) drop[axes->v[i]] = 1;
  L->nkeep = 0;
  L->nred = 1;
  for (int i = 0; i < s.rank; i++) {
    if (drop[i]) {
      red_dims[nred_dims] = s.dims[i];
      red_strides[nred_dims++] = strides[i];
      L->nred *= s.dims[i];
    } else {
      L->keep_dims[L->nkeep] = s.dims[i];
      L->keep_strides[L->nkeep++] = strides[i];
    }
  }
  L->offset = malloc(sizeof *L->offset * (size_t)(L->nred ? L->nred : 1));
  if (!L->offset) return 0;
  int64_t idx[JX_MAX_RANK] = {0};
  for (int64_t r = 0; r < L->nred; r++) { /* row-major walk of the reduced dims */
    int64_t off = 0;
    for (int d = 0; d < nred_dims; d++) off += idx[d] * red_strides[d];
    L->offset[r] = off;
    for (int d = nred_dims - 1; d >= 0; d--) {
      if (++idx[d] < red_dims[d]) break;
      idx[d] = 0;
    }
  }
  return 1;
}

/* Offset of the first reduced element of output o (row-major over kept dims). */
static int64_t base_offset(const layout *L, int64_t o) {
  int64_t off = 0;
  for (int d = L->nkeep - 1; d >= 0; d--) {
    off += (o % L->keep_dims[d]) * L->keep_strides[d];
    o /= L->keep_dims[d];
  }
  return off;
}

/* ---- accumulation ---- */

/* Pairwise sums, NumPy's tree (pairwise_sum in its loops_utils): under 8
 * elements in order; up to 128 in eight interleaved partial sums (lane k
 * takes elements k, k + 8, ...), combined as ((0+1)+(2+3))+((4+5)+(6+7)),
 * then the tail in order; longer spans split at a multiple of 8 near the
 * middle. The eight partial sums are one vector register, so the loop runs
 * at memory speed, and a contiguous f32/f64 sum gives NumPy's bits. The
 * fused kernels of the jit (src/compile/render_c.c) use the same tree. */
#define PAIRWISE(T, NAME)                                                                          \
  static T NAME(const T *restrict x, int64_t n) {                                                  \
    if (n < 8) {                                                                                   \
      T s = 0;                                                                                     \
      for (int64_t i = 0; i < n; i++) s += x[i];                                                   \
      return s;                                                                                    \
    }                                                                                              \
    if (n <= 128) {                                                                                \
      T r[8];                                                                                      \
      for (int k = 0; k < 8; k++) r[k] = x[k];                                                     \
      int64_t i = 8;                                                                               \
      for (; i < n - (n % 8); i += 8)                                                              \
        for (int k = 0; k < 8; k++) r[k] += x[i + k];                                              \
      T s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));                     \
      for (; i < n; i++) s += x[i];                                                                \
      return s;                                                                                    \
    }                                                                                              \
    int64_t h = n / 2;                                                                             \
    h -= h % 8;                                                                                    \
    return NAME(x, h) + NAME(x + h, n - h);                                                        \
  }
PAIRWISE(float, pairwise_f)
PAIRWISE(double, pairwise_d)

static double float_reduce(rop op, jx_dtype dt, const void *x, int64_t base, const layout *L,
                           void *scratch) {
  int64_t n = L->nred;
  if (op == R_SUM) {
    if (dt == JX_F64) {
      double *b = scratch;
      for (int64_t r = 0; r < n; r++) b[r] = ((const double *)x)[base + L->offset[r]];
      return pairwise_d(b, n);
    }
    float *b = scratch;
    for (int64_t r = 0; r < n; r++) b[r] = (float)jx_load_f64(x, dt, base + L->offset[r]);
    return pairwise_f(b, n);
  }
  if (op == R_PROD) {
    if (dt == JX_F64) {
      double acc = 1;
      for (int64_t r = 0; r < n; r++) acc *= ((const double *)x)[base + L->offset[r]];
      return acc;
    }
    float acc = 1;
    for (int64_t r = 0; r < n; r++) acc *= (float)jx_load_f64(x, dt, base + L->offset[r]);
    return acc;
  }
  double acc = op == R_MAX ? -INFINITY : INFINITY;
  for (int64_t r = 0; r < n; r++) {
    double v = jx_load_f64(x, dt, base + L->offset[r]);
    if (v != v) return v;
    if (op == R_MAX ? v > acc : v < acc) acc = v;
  }
  return acc;
}

/* Complex sum and product (the only complex reductions, as in lax): a sum
 * is the pairwise sums of the real and the imaginary parts, each in the
 * parts' dtype; a product multiplies in order in the complex dtype. */
static double _Complex complex_reduce(rop op, jx_dtype dt, const void *x, int64_t base,
                                      const layout *L, void *scratch) {
  int64_t n = L->nred;
  if (op == R_SUM) {
    if (dt == JX_C128) {
      double *re = scratch, *im = re + n;
      for (int64_t r = 0; r < n; r++) {
        const double *e = (const double *)x + 2 * (base + L->offset[r]);
        re[r] = e[0], im[r] = e[1];
      }
      return jx_cmplx(pairwise_d(re, n), pairwise_d(im, n));
    }
    float *re = scratch, *im = re + n;
    for (int64_t r = 0; r < n; r++) {
      const float *e = (const float *)x + 2 * (base + L->offset[r]);
      re[r] = e[0], im[r] = e[1];
    }
    return jx_cmplx(pairwise_f(re, n), pairwise_f(im, n));
  }
  if (dt == JX_C128) {
    double _Complex acc = 1;
    for (int64_t r = 0; r < n; r++) acc *= ((const double _Complex *)x)[base + L->offset[r]];
    return acc;
  }
  float _Complex acc = 1;
  for (int64_t r = 0; r < n; r++) acc *= ((const float _Complex *)x)[base + L->offset[r]];
  return acc;
}

/* Integers and bool: 64-bit arithmetic, wrapped to width on store. */
static uint64_t int_identity(rop op, jx_dtype dt) {
  int bits = jx_dtype_bits(dt), sgn = jx_is_signed_int(dt);
  uint64_t top = 1ull << (bits - 1);
  switch (op) {
  case R_SUM:
  case R_OR: return 0;
  case R_PROD: return 1;
  case R_AND: return ~0ull;
  case R_MAX: return dt == JX_BOOL ? 0 : sgn ? (uint64_t)0 - top : 0;
  case R_MIN: return dt == JX_BOOL ? 1 : sgn ? top - 1 : ~0ull;
  }
  return 0;
}

static uint64_t int_reduce(rop op, jx_dtype dt, const void *x, int64_t base, const layout *L) {
  int sgn = jx_is_signed_int(dt);
  uint64_t acc = int_identity(op, dt);
  for (int64_t r = 0; r < L->nred; r++) {
    uint64_t v = (uint64_t)jx_load_i64(x, dt, base + L->offset[r]);
    switch (op) {
    case R_SUM: acc += v; break;
    case R_PROD: acc *= v; break;
    case R_AND: acc &= v; break;
    case R_OR: acc |= v; break;
    case R_MAX:
      if (sgn ? (int64_t)v > (int64_t)acc : v > acc) acc = v;
      break;
    case R_MIN:
      if (sgn ? (int64_t)v < (int64_t)acc : v < acc) acc = v;
      break;
    }
  }
  return acc;
}

/* ---- fast paths: f32/f64 sums and extrema over a contiguous suffix (rows)
 * or prefix (columns) of the axes, giving the generic path's exact bits ---- */

/* acc[j] += x[j] for j < m, vectorized at -O2 (vloop.h) */
#define ADD_ROW(T, SUF)                                                                            \
  static void add_row_##SUF(T *restrict acc, const T *restrict x, int64_t m) {                     \
    JX_VLOOP(m, acc[i] += x[i]);                                                                   \
  }
ADD_ROW(float, f)
ADD_ROW(double, d)

/* acc[j] = (((acc[j] + x[j]) + x[s + j]) + x[2s + j]) + x[3s + j] for j < m,
 * or from x[j] itself when first: four rows added to one partial row in a
 * pass, in the order four add_row calls add them (the same bits), so the
 * partial row is read and written once for four rows of x. A leaf's eight
 * partial rows of up to COL_BLOCK columns live in L2; one row a pass moved
 * two bytes through L2 for each byte read from memory and ran the column
 * sum at half the row sum's CPU time per byte. */
#define ADD_ROWS4(T, SUF)                                                                          \
  static void add_rows4_##SUF(T *restrict acc, const T *restrict x, int64_t s, int64_t m,          \
                              int first) {                                                         \
    const T *restrict b = x + s, *restrict c = x + 2 * s, *restrict d = x + 3 * s;                 \
    if (first)                                                                                     \
      JX_VLOOP(m, acc[i] = ((x[i] + b[i]) + c[i]) + d[i]);                                         \
    else                                                                                           \
      JX_VLOOP(m, acc[i] = (((acc[i] + x[i]) + b[i]) + c[i]) + d[i]);                              \
  }
ADD_ROWS4(float, f)
ADD_ROWS4(double, d)

/* Room for a leaf's eight partial rows of m columns, rows `*ld` apart,
 * placed half a page away from x modulo 4 KiB and each row 64 bytes further
 * on: a load of x whose address matched an earlier store's in its low 12
 * bits waited for that store (4K aliasing), and rows of a multiple of 1024
 * f32 put every partial row at x's offset (a 4096-column sum ran 3x slower).
 * free() takes *block. */
static void *partial_rows(const void *x, int64_t m, size_t es, int64_t *ld, void **block) {
  *ld = m + (int64_t)(64 / es);
  char *b = malloc(es * (size_t)(8 * *ld) + 8192);
  *block = b;
  if (!b) return NULL;
  uintptr_t want = ((uintptr_t)x + 2048) & 4095, at = (uintptr_t)b & 4095;
  return b + ((want - at) & 4095);
}

/* Columnwise pairwise sums of an n x m block (rows ld apart) into out[m]:
 * the tree of pairwise_f/_d applied to each column, vectorized across
 * columns (the eight partial sums are eight rows of m). */
#define PAIRWISE_COLS(T, SUF)                                                                      \
  static int pairwise_cols_##SUF(const T *x, int64_t n, int64_t ld, int64_t m, T *out) {           \
    if (n < 8) {                                                                                   \
      for (int64_t j = 0; j < m; j++) out[j] = 0;                                                  \
      for (int64_t i = 0; i < n; i++) add_row_##SUF(out, x + i * ld, m);                           \
      return 1;                                                                                    \
    }                                                                                              \
    if (n <= 128) {                                                                                \
      void *block;                                                                                 \
      int64_t rl;                                                                                  \
      T *r = partial_rows(x, m, sizeof(T), &rl, &block);                                           \
      if (!r) return 0;                                                                            \
      int64_t i = 0;                                                                               \
      for (; i + 32 <= n - (n % 8); i += 32) /* partial row k: rows i + k, i + k + 8, ... */       \
        for (int k = 0; k < 8; k++) add_rows4_##SUF(r + k * rl, x + (i + k) * ld, 8 * ld, m, !i);  \
      if (i == 0) {                                                                                \
        for (int k = 0; k < 8; k++) memcpy(r + k * rl, x + k * ld, sizeof *r * (size_t)m);         \
        i = 8;                                                                                     \
      }                                                                                            \
      for (; i < n - (n % 8); i += 8)                                                              \
        for (int k = 0; k < 8; k++) add_row_##SUF(r + k * rl, x + (i + k) * ld, m);                \
      for (int64_t j = 0; j < m; j++)                                                              \
        out[j] = ((r[j] + r[rl + j]) + (r[2 * rl + j] + r[3 * rl + j])) +                          \
                 ((r[4 * rl + j] + r[5 * rl + j]) + (r[6 * rl + j] + r[7 * rl + j]));              \
      for (; i < n; i++) add_row_##SUF(out, x + i * ld, m);                                        \
      free(block);                                                                                 \
      return 1;                                                                                    \
    }                                                                                              \
    int64_t h = n / 2;                                                                             \
    h -= h % 8;                                                                                    \
    T *tmp = malloc(sizeof *tmp * (size_t)m);                                                      \
    if (!tmp) return 0;                                                                            \
    int ok = pairwise_cols_##SUF(x, h, ld, m, out) &&                                              \
             pairwise_cols_##SUF(x + h * ld, n - h, ld, m, tmp);                                   \
    if (ok) add_row_##SUF(out, tmp, m);                                                            \
    free(tmp);                                                                                     \
    return ok;                                                                                     \
  }
PAIRWISE_COLS(float, f)
PAIRWISE_COLS(double, d)

/* A column sum over the pool. A thread walks whole rows of up to COL_BLOCK
 * columns, in order, so that it reads memory as one stream (narrower column
 * blocks of long rows read a few KiB per row at a stride, each piece a new
 * page the prefetchers had not followed: a 4096^2 sum ran at 1.4 GB/s in
 * 1024-column blocks against 21 GB/s for the row sum); the eight partial
 * rows of a leaf (8 x COL_BLOCK) stay in L2. The threads share the work by
 * subtrees of the rows' pairwise tree, summed into partial rows and added
 * in the tree's order (pairwise_split.h), and by column blocks when the
 * rows are wider: the bits do not depend on the split. */
enum { COL_BLOCK = 8192, COL_MIN_UNIT = 1 << 16 /* elements below which a unit is not split */ };

typedef struct {
  jx_dtype dt;
  const void *x;
  void *out;         /* the result, or the pieces' partial rows (piece k at k * m) */
  int64_t m, blocks; /* columns, blocks of them */
  int64_t start[1 << JX_PAIRWISE_MAX_DEPTH], count[1 << JX_PAIRWISE_MAX_DEPTH];
  atomic_int failed; /* out of memory in a unit */
} cols_job;

static void reduce_cols(void *ctx, int64_t begin, int64_t end) {
  cols_job *j = ctx;
  size_t es = jx_dtype_size(j->dt);
  for (int64_t u = begin; u < end; u++) {
    int64_t k = u / j->blocks, c0 = (u % j->blocks) * COL_BLOCK;
    int64_t w = j->m - c0 < COL_BLOCK ? j->m - c0 : COL_BLOCK;
    const char *x = (const char *)j->x + (size_t)(j->start[k] * j->m + c0) * es;
    char *o = (char *)j->out + (size_t)(k * j->m + c0) * es;
    int ok = j->dt == JX_F32
                 ? pairwise_cols_f((const float *)x, j->count[k], j->m, w, (float *)o)
                 : pairwise_cols_d((const double *)x, j->count[k], j->m, w, (double *)o);
    if (!ok) atomic_store(&j->failed, 1);
  }
}

/* out[j] = the pairwise sum of x[i * m + j] over i < n; 0 when out of memory. */
static int sum_cols(jx_dtype dt, const void *x, int64_t n, int64_t m, void *out) {
  cols_job *j = malloc(sizeof *j);
  if (!j) return 0;
  j->dt = dt;
  j->x = x;
  j->m = m;
  j->blocks = (m + COL_BLOCK - 1) / COL_BLOCK;
  atomic_init(&j->failed, 0);
  int64_t threads = jx_pool_threads(), block_work = n * (m < COL_BLOCK ? m : COL_BLOCK);
  int depth = j->blocks >= 2 * threads || block_work < 2 * COL_MIN_UNIT
                  ? 0
                  : jx_pairwise_depth(n, (2 * threads + j->blocks - 1) / j->blocks,
                                      COL_MIN_UNIT / (m < COL_BLOCK ? m : COL_BLOCK));
  int pieces = jx_pairwise_pieces(n, depth, j->start, j->count);
  size_t es = jx_dtype_size(dt);
  j->out = pieces > 1 ? malloc(es * (size_t)(pieces * m)) : out;
  int ok = j->out != NULL;
  int64_t unit_work = n / pieces * (m < COL_BLOCK ? m : COL_BLOCK);
  if (ok)
    jx_parallel_for(pieces * j->blocks,
                    unit_work >= COL_MIN_UNIT || unit_work < 1 ? 1 : COL_MIN_UNIT / unit_work,
                    reduce_cols, j);
  ok = ok && !atomic_load(&j->failed);
  if (ok && pieces > 1) {
    if (dt == JX_F32)
      jx_pairwise_combine_f32(n, depth, j->out, m);
    else
      jx_pairwise_combine_f64(n, depth, j->out, m);
    memcpy(out, j->out, es * (size_t)m);
  }
  if (pieces > 1) free(j->out);
  free(j);
  return ok;
}

#define EXTREMUM_ROWS(T, NAME)                                                                     \
  static T NAME(int is_max, const T *x, int64_t n) {                                               \
    T acc = is_max ? -INFINITY : INFINITY;                                                         \
    for (int64_t i = 0; i < n; i++) {                                                              \
      T v = x[i];                                                                                  \
      if (v != v) return v;                                                                        \
      if (is_max ? v > acc : v < acc) acc = v;                                                     \
    }                                                                                              \
    return acc;                                                                                    \
  }
EXTREMUM_ROWS(float, extremum_f)
EXTREMUM_ROWS(double, extremum_d)

typedef struct {
  rop op;
  jx_dtype dt;
  const void *x;
  void *out;
  int64_t n;
} rows_job;

static void reduce_rows(void *ctx, int64_t begin, int64_t end) {
  const rows_job *j = ctx;
  for (int64_t o = begin; o < end; o++) {
    if (j->dt == JX_F32) {
      const float *x = (const float *)j->x + o * j->n;
      ((float *)j->out)[o] =
          j->op == R_SUM ? pairwise_f(x, j->n) : extremum_f(j->op == R_MAX, x, j->n);
    } else {
      const double *x = (const double *)j->x + o * j->n;
      ((double *)j->out)[o] =
          j->op == R_SUM ? pairwise_d(x, j->n) : extremum_d(j->op == R_MAX, x, j->n);
    }
  }
}

/* Returns 1 when it handled the reduction. */
static int fast_reduce(rop op, const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  jx_dtype dt = in->dtype;
  if ((dt != JX_F32 && dt != JX_F64) || (op != R_SUM && op != R_MAX && op != R_MIN)) return 0;
  const jx_ilist *ax = &p->l[0];
  int r = in->shape.rank, k = ax->n;
  if (k == 0) return 0;
  int suffix = 1, prefix = 1;
  for (int i = 0; i < k; i++) {
    suffix &= ax->v[i] == r - k + i;
    prefix &= ax->v[i] == i;
  }
  int64_t total = jx_shape_numel(in->shape), nout = jx_shape_numel(out->shape);
  int64_t n = nout ? total / nout : 0;
  if (suffix) { /* out[o] reduces the n contiguous elements from o * n */
    rows_job j = {op, dt, in->data, out->data, n};
    /* rows split over the pool in pieces of at least ~64K elements */
    jx_parallel_for(nout, n ? (65536 + n - 1) / n : nout, reduce_rows, &j);
    return 1;
  }
  if (prefix && op == R_SUM) /* columns: out[j] sums x[i * nout + j] over i */
    return sum_cols(dt, in->data, n, nout, out->data);
  return 0;
}

static void eval_reduce(rop op, const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  layout L;
  int64_t nout = jx_shape_numel(out->shape);
  if (nout == 0) return;
  if (fast_reduce(op, p, in, out)) return;
  if (!make_layout(in->shape, &p->l[0], &L)) goto oom;
  void *scratch = NULL;
  if (jx_is_inexact(in->dtype) && op == R_SUM) {
    scratch = malloc(16 * (size_t)(L.nred ? L.nred : 1));
    if (!scratch) {
      free(L.offset);
      goto oom;
    }
  }
  for (int64_t o = 0; o < nout; o++) {
    int64_t base = base_offset(&L, o);
    if (jx_is_complex(in->dtype))
      jx_store_c128(out->data, out->dtype, o,
                    complex_reduce(op, in->dtype, in->data, base, &L, scratch));
    else if (jx_is_float(in->dtype))
      jx_store_f64(out->data, out->dtype, o,
                   float_reduce(op, in->dtype, in->data, base, &L, scratch));
    else
      jx_store_i64(out->data, out->dtype, o,
                   (int64_t)int_reduce(op, in->dtype, in->data, base, &L));
  }
  free(scratch);
  free(L.offset);
  return;
oom:
  jx_error_set(JX_ERR_OUT_OF_MEMORY, "reduce: out of memory for operand of %lld elements",
               (long long)jx_shape_numel(in->shape));
}

#define REDUCE_ROW(NAME, OP, JVP, T)                                                               \
  static jx_status infer_##NAME(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {         \
    return infer_reduce(OP, #NAME, ctx->params, in, out);                                          \
  }                                                                                                \
  static void eval_##NAME(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {           \
    eval_reduce(OP, ctx->params, in, out);                                                         \
  }                                                                                                \
  const jx_prim jx_prim_##NAME = {.name = #NAME,                                                   \
                                  .id = JX_PRIM_##NAME,                                            \
                                  .nin = 1,                                                        \
                                  .nout = 1,                                                       \
                                  .params = "axes=l0",                                             \
                                  .infer = infer_##NAME,                                           \
                                  .eval = eval_##NAME,                                             \
                                  .jvp = JVP,                                                      \
                                  .transpose = T,                                                  \
                                  .batch = jx_batch_reduce};

REDUCE_ROW(reduce_sum, R_SUM, jx_jvp_linear_first, jx_transpose_reduce_sum)
REDUCE_ROW(reduce_prod, R_PROD, jx_jvp_reduce_prod, NULL)
REDUCE_ROW(reduce_max, R_MAX, jx_jvp_reduce_chooser, NULL)
REDUCE_ROW(reduce_min, R_MIN, jx_jvp_reduce_chooser, NULL)
REDUCE_ROW(reduce_and, R_AND, jx_jvp_zero, NULL)
REDUCE_ROW(reduce_or, R_OR, jx_jvp_zero, NULL)

/* ---- argmax / argmin ---- */

static jx_status infer_arg(const char *name, const jx_params *p, const jx_aval *in, jx_aval *out) {
  char s[JX_AVAL_STR_CAP];
  if (p->dtype != JX_I32 && p->dtype != JX_I64)
    return jx_error_set(JX_ERR_DTYPE, "%s: index dtype must be i32 or i64, got %s", name,
                        jx_dtype_name(p->dtype));
  int64_t ax = p->i[0];
  if (ax < 0 || ax >= in->shape.rank)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: axis %lld is out of range for operand %s",
                        name, (long long)ax, jx_aval_str(in->dtype, in->shape, s));
  if (in->shape.dims[ax] == 0)
    return jx_error_set(JX_ERR_SHAPE, "%s: the reduced axis %lld of operand %s is empty", name,
                        (long long)ax, jx_aval_str(in->dtype, in->shape, s));
  out->dtype = p->dtype;
  out->weak = 0;
  out->shape.rank = 0;
  for (int i = 0; i < in->shape.rank; i++)
    if (i != ax) out->shape.dims[out->shape.rank++] = in->shape.dims[i];
  return JX_OK;
}

/* 1 when v should replace the current best b (neither compared once b is NaN). */
static int better_f(int is_max, double v, double b) {
  if (v != v) return 1;
  return is_max ? v > b : v < b;
}

static void eval_arg(int is_max, const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  int ax = (int)p->i[0];
  int64_t outer = 1, inner = 1, n = in->shape.dims[ax];
  for (int i = 0; i < ax; i++) outer *= in->shape.dims[i];
  for (int i = ax + 1; i < in->shape.rank; i++) inner *= in->shape.dims[i];
  jx_dtype dt = in->dtype;
  int sgn = jx_is_signed_int(dt);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < inner; k++) {
      int64_t base = o * n * inner + k, best = 0;
      if (jx_is_float(dt)) {
        double b = jx_load_f64(in->data, dt, base);
        for (int64_t i = 1; i < n && b == b; i++) {
          double v = jx_load_f64(in->data, dt, base + i * inner);
          if (better_f(is_max, v, b)) b = v, best = i;
        }
      } else {
        uint64_t b = (uint64_t)jx_load_i64(in->data, dt, base);
        for (int64_t i = 1; i < n; i++) {
          uint64_t v = (uint64_t)jx_load_i64(in->data, dt, base + i * inner);
          int gt = sgn ? (int64_t)v > (int64_t)b : v > b;
          int lt = sgn ? (int64_t)v < (int64_t)b : v < b;
          if (is_max ? gt : lt) b = v, best = i;
        }
      }
      jx_store_i64(out->data, out->dtype, o * inner + k, best);
    }
}

#define ARG_ROW(NAME, IS_MAX)                                                                      \
  static jx_status infer_##NAME(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {         \
    return infer_arg(#NAME, ctx->params, in, out);                                                 \
  }                                                                                                \
  static void eval_##NAME(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {           \
    eval_arg(IS_MAX, ctx->params, in, out);                                                        \
  }                                                                                                \
  const jx_prim jx_prim_##NAME = {.name = #NAME,                                                   \
                                  .id = JX_PRIM_##NAME,                                            \
                                  .nin = 1,                                                        \
                                  .nout = 1,                                                       \
                                  .params = "axis=i0 index_dtype=dtype",                           \
                                  .infer = infer_##NAME,                                           \
                                  .eval = eval_##NAME,                                             \
                                  .jvp = jx_jvp_zero,                                              \
                                  .batch = jx_batch_arg};

ARG_ROW(argmax, 1)
ARG_ROW(argmin, 0)

const jx_prim *const jx_prims_reduce[] = {
    &jx_prim_reduce_sum, &jx_prim_reduce_prod, &jx_prim_reduce_max,
    &jx_prim_reduce_min, &jx_prim_reduce_and,  &jx_prim_reduce_or,
    &jx_prim_argmax,     &jx_prim_argmin,      NULL};
