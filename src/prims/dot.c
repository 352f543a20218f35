/* dot_general: lax.dot_general on two operands of one dtype.
 *
 * The result's dims are the batch dims (in lhs_batch order), then the lhs free
 * dims, then the rhs free dims, each in ascending order, as in JAX. The
 * reference kernel forms sums in an accumulator chosen by the result dtype:
 *   f16, bf16        f32, rounded once at the end (XLA on CPU does the same);
 *   f32, f64         f64, rounded once at the end: at least as accurate as
 *                    XLA's f32 accumulation, so results can differ from JAX's
 *                    by the rounding error of its f32 sum (a few ulps);
 *   integers         64-bit wrapping arithmetic, wrapped to the result width
 *                    (identical to wrapping at every step);
 *   bool             or of ands.
 * A preferred element type (i0 = 1, dtype) gives the result dtype; the operand
 * values are converted into its accumulator first, so bf16 x bf16 -> f32 sums
 * exact products in f64 and i8 x i8 -> i32 wraps in 32 bits. Accepted pairs
 * follow lax: bool -> anything, integer -> float, integer -> integer no
 * narrower, float -> float. Unlike JAX, float -> integer is rejected (its
 * meaning in XLA is a conversion nobody relies on).
 *
 * Eager evaluation runs float contractions through BLAS instead (dot_blas.c):
 * f64 sums in f64 and f16/bf16 in f32 as above; f32 results of at least 2^15
 * multiply-adds sum in f32, as XLA does. Smaller f32 x f32 -> f32 products
 * (and wide-rowed ones up to 2^18) sum in f32 too, in dot_small.c's loops;
 * other small ones with an f32 operand or result keep the reference's f64
 * sum (see route). */
#include <complex.h>
#ifdef JX_HAVE_BLAS
#include <cblas.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/threadpool.h"
#include "contract_rules.h"
#include "dot_kernels.h"
#include "dot_small.h"
#include "prims.h"
#include "rules.h"

enum { LC, RC, LB, RB }; /* parameter list slots */

/* ---- shape rule ---- */

static const char *list_name[4] = {"lhs contracting", "rhs contracting", "lhs batch", "rhs batch"};

static char *list_str(const jx_ilist *l, char *buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < l->n && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, i ? ",%lld" : "%lld", (long long)l->v[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
  return buf;
}

/* Records "dot_general: <msg> (operands f32[2,3] and f32[4,5])". */
static jx_status bad(jx_status code, const jx_aval *in, const char *msg) {
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  return jx_error_set(code, "dot_general: %s (operands %s and %s)", msg,
                      jx_aval_str(in[0].dtype, in[0].shape, sa),
                      jx_aval_str(in[1].dtype, in[1].shape, sb));
}

/* Checks that the dims of list w are in range, distinct, and not in list o. */
static jx_status check_dims(const jx_params *p, const jx_aval *in, int w, int o) {
  const jx_ilist *l = &p->l[w];
  int rank = in[w & 1].shape.rank;
  char msg[160], ls[96];
  if (l->n < 0 || l->n > rank) {
    snprintf(msg, sizeof msg, "%s has %d dims but the operand has rank %d", list_name[w], l->n,
             rank);
    return bad(JX_ERR_INVALID_ARGUMENT, in, msg);
  }
  for (int i = 0; i < l->n; i++) {
    int64_t d = l->v[i];
    if (d < 0 || d >= rank) {
      snprintf(msg, sizeof msg, "%s dimension %lld is out of range for rank %d (dims %s)",
               list_name[w], (long long)d, rank, list_str(l, ls, sizeof ls));
      return bad(JX_ERR_INVALID_ARGUMENT, in, msg);
    }
    for (int j = 0; j < i; j++)
      if (l->v[j] == d) {
        snprintf(msg, sizeof msg, "%s dimension %lld appears twice (dims %s)", list_name[w],
                 (long long)d, list_str(l, ls, sizeof ls));
        return bad(JX_ERR_INVALID_ARGUMENT, in, msg);
      }
    for (int j = 0; j < p->l[o].n; j++)
      if (p->l[o].v[j] == d) {
        snprintf(msg, sizeof msg, "dimension %lld is both a %s and a %s dimension", (long long)d,
                 list_name[w], list_name[o]);
        return bad(JX_ERR_INVALID_ARGUMENT, in, msg);
      }
  }
  return JX_OK;
}

/* Checks that lists w (lhs) and w + 1 (rhs) pair dims of equal sizes. */
static jx_status check_pairs(const jx_params *p, const jx_aval *in, int w, const char *kind) {
  const jx_ilist *l = &p->l[w], *r = &p->l[w + 1];
  char msg[320], ls[96], rs[96];
  if (l->n != r->n) {
    snprintf(msg, sizeof msg, "needs as many lhs as rhs %s dimensions, got %s and %s", kind,
             list_str(l, ls, sizeof ls), list_str(r, rs, sizeof rs));
    return bad(JX_ERR_INVALID_ARGUMENT, in, msg);
  }
  for (int i = 0; i < l->n; i++) {
    int64_t a = in[0].shape.dims[l->v[i]], b = in[1].shape.dims[r->v[i]];
    if (a != b) {
      snprintf(msg, sizeof msg,
               "%s dimensions differ in size: lhs dim %lld has size %lld, rhs dim %lld has "
               "size %lld",
               kind, (long long)l->v[i], (long long)a, (long long)r->v[i], (long long)b);
      return bad(JX_ERR_SHAPE, in, msg);
    }
  }
  return JX_OK;
}

/* lax's rules for preferred_element_type (see the header comment). */
static int preferred_ok(jx_dtype in, jx_dtype out) {
  if (in == out) return 1;
  if (jx_is_complex(in) || jx_is_complex(out)) return 0; /* complex: its own dtype only */
  if (in == JX_BOOL) return 1;
  if (jx_is_float(in)) return jx_is_float(out);
  if (jx_is_float(out)) return 1;
  return out != JX_BOOL && jx_dtype_bits(out) >= jx_dtype_bits(in);
}

static int is_member(const jx_ilist *l, int64_t d) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == d) return 1;
  return 0;
}

static jx_status infer_dot(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  if (in[0].dtype != in[1].dtype) return bad(JX_ERR_DTYPE, in, "operands must have one dtype");
  jx_status st;
  if ((st = check_dims(p, in, LC, LB)) || (st = check_dims(p, in, RC, RB)) ||
      (st = check_dims(p, in, LB, LC)) || (st = check_dims(p, in, RB, RC)))
    return st;
  if ((st = check_pairs(p, in, LC, "contracting")) || (st = check_pairs(p, in, LB, "batch")))
    return st;
  jx_dtype dt = in[0].dtype;
  if (p->i[0]) {
    if (!jx_dtype_valid(p->dtype))
      return bad(JX_ERR_DTYPE, in, "preferred element type is not a valid dtype");
    if (!preferred_ok(dt, p->dtype)) {
      char msg[192];
      snprintf(msg, sizeof msg,
               "preferred element type %s is incompatible with operand dtype %s (allowed: "
               "bool->any, int->float, int->int no narrower, float->float)",
               jx_dtype_name(p->dtype), jx_dtype_name(dt));
      return bad(JX_ERR_DTYPE, in, msg);
    }
    dt = p->dtype;
  }
  jx_shape s = {0, {0}};
  int nb = p->l[LB].n;
  int rank = nb + in[0].shape.rank + in[1].shape.rank - 2 * (nb + p->l[LC].n);
  if (rank > JX_MAX_RANK) return bad(JX_ERR_SHAPE, in, "the result would have more than 8 dims");
  for (int i = 0; i < nb; i++) s.dims[s.rank++] = in[0].shape.dims[p->l[LB].v[i]];
  for (int side = 0; side < 2; side++)
    for (int d = 0; d < in[side].shape.rank; d++)
      if (!is_member(&p->l[LC + side], d) && !is_member(&p->l[LB + side], d))
        s.dims[s.rank++] = in[side].shape.dims[d];
  out[0] = (jx_aval){dt, (uint8_t)(!p->i[0] && in[0].weak && in[1].weak), s, 0};
  return JX_OK;
}

/* ---- reference kernel ----
 * jx_dot_reference (dot_kernels.h) is the spec that the BLAS path is tested
 * against, and the kernel for integer and bool operands.
 * Both operands are packed into canonical [B, M, K] and [B, K, N] buffers of
 * the accumulator type, through offset tables that map each flat group index
 * to its element offset. The loop nest b, m-block, k, n then reads every
 * buffer contiguously in its inner loop, whatever the operands' layouts. */

typedef enum { ACC_F32, ACC_F64, ACC_INT, ACC_BOOL } acc_kind;

static acc_kind accumulator(jx_dtype in, jx_dtype out) {
  if (out == JX_BOOL) return ACC_BOOL;
  if (!jx_is_float(out)) return ACC_INT;
  if (out == JX_F32 || out == JX_F64 || in == JX_F32 || in == JX_F64) return ACC_F64;
  return ACC_F32;
}

/* Element offsets of every multi-index over `n` dims (row-major order). */
static void offsets(int n, const int64_t *sizes, const int64_t *strides, int64_t count,
                    int64_t *out) {
  int64_t idx[JX_MAX_RANK] = {0}, off = 0;
  for (int64_t i = 0; i < count; i++) {
    out[i] = off;
    for (int d = n - 1; d >= 0; d--) {
      off += strides[d];
      if (++idx[d] < sizes[d]) break;
      off -= strides[d] * sizes[d];
      idx[d] = 0;
    }
  }
}

typedef struct {
  int64_t count;
  int n;
  int64_t sizes[JX_MAX_RANK], strides[JX_MAX_RANK];
} group;

static void group_add(group *g, int64_t size, int64_t stride) {
  g->sizes[g->n] = size;
  g->strides[g->n++] = stride;
  g->count *= size;
}

/* Packs t into buf (elements of the accumulator) as [outer][mid][inner]. */
static void pack(const jx_tensor *t, acc_kind acc, const group *outer, const group *mid,
                 const group *inner, const int64_t *tab_o, const int64_t *tab_m,
                 const int64_t *tab_i, void *buf) {
  int64_t i = 0;
  for (int64_t a = 0; a < outer->count; a++)
    for (int64_t b = 0; b < mid->count; b++)
      for (int64_t c = 0; c < inner->count; c++, i++) {
        int64_t src = tab_o[a] + tab_m[b] + tab_i[c];
        switch (acc) {
        case ACC_F32: ((float *)buf)[i] = (float)jx_load_f64(t->data, t->dtype, src); break;
        case ACC_F64: ((double *)buf)[i] = jx_load_f64(t->data, t->dtype, src); break;
        default: ((uint64_t *)buf)[i] = (uint64_t)jx_load_i64(t->data, t->dtype, src); break;
        }
      }
}

/* rows[r][n] += sum over k of L[r][k] * R[k][n] for MB rows at once, so that
 * each row of R is loaded once per block; the inner loops are contiguous. */
enum { MB = 4, VW = 8 }; /* rows per block (they stay in cache), vector chunk */

/* o_i[n] += a_i * r[n] for four rows; fixed-width chunks so that gcc
 * vectorizes it even at -O2, restrict parameters so that it may. */
#define AXPY4(NAME, T)                                                                             \
  static void NAME(int64_t N, const T *restrict r, T a0, T a1, T a2, T a3, T *restrict o0,         \
                   T *restrict o1, T *restrict o2, T *restrict o3) {                               \
    int64_t n = 0;                                                                                 \
    for (; n + VW <= N; n += VW)                                                                   \
      for (int j = 0; j < VW; j++) {                                                               \
        o0[n + j] += a0 * r[n + j];                                                                \
        o1[n + j] += a1 * r[n + j];                                                                \
        o2[n + j] += a2 * r[n + j];                                                                \
        o3[n + j] += a3 * r[n + j];                                                                \
      }                                                                                            \
    for (; n < N; n++) {                                                                           \
      o0[n] += a0 * r[n];                                                                          \
      o1[n] += a1 * r[n];                                                                          \
      o2[n] += a2 * r[n];                                                                          \
      o3[n] += a3 * r[n];                                                                          \
    }                                                                                              \
  }

/* rows[i][n] += sum over k of L[i][k] * R[k][n] for the mb <= MB rows of a
 * block, so that each row of R is loaded once per block. */
#define KERNEL(NAME, AXPY, T)                                                                      \
  AXPY4(AXPY, T)                                                                                   \
  static void NAME(int64_t mb, int64_t K, int64_t N, const T *L, const T *R, T *rows) {            \
    for (int64_t k = 0; k < K; k++) {                                                              \
      T a[MB];                                                                                     \
      for (int i = 0; i < MB; i++) a[i] = i < mb ? L[i * K + k] : 0;                               \
      /* rows past mb are scratch: the buffer always holds MB rows */                              \
      AXPY(N, R + k * N, a[0], a[1], a[2], a[3], rows, rows + N, rows + 2 * N, rows + 3 * N);      \
    }                                                                                              \
  }

KERNEL(kernel_f32, axpy4_f32, float)
KERNEL(kernel_f64, axpy4_f64, double)
KERNEL(kernel_u64, axpy4_u64, uint64_t)

static void store_rows(acc_kind acc, const void *rows, int64_t count, void *out, jx_dtype dt,
                       int64_t at) {
  for (int64_t i = 0; i < count; i++) switch (acc) {
    case ACC_F32: {
      float v = ((const float *)rows)[i];
      if (dt == JX_BF16)
        ((uint16_t *)out)[at + i] = jx_f32_to_bf16(v);
      else
        ((uint16_t *)out)[at + i] = jx_f32_to_f16(v);
      break;
    }
    case ACC_F64: jx_store_f64(out, dt, at + i, ((const double *)rows)[i]); break;
    case ACC_INT: jx_store_i64(out, dt, at + i, (int64_t)((const uint64_t *)rows)[i]); break;
    case ACC_BOOL: ((uint8_t *)out)[at + i] = ((const uint64_t *)rows)[i] != 0; break;
    }
}

/* The operands' dims as the groups of the canonical [B, M, K] x [B, K, N]. */
typedef struct {
  group lb, rb, lk, rk, lm, rn;
} groups;

static groups groups_of(const jx_params *p, const jx_tensor *in) {
  int64_t ls[JX_MAX_RANK], rs[JX_MAX_RANK];
  jx_shape lsh = in[0].shape, rsh = in[1].shape;
  jx_shape_strides(lsh, ls);
  jx_shape_strides(rsh, rs);
  group e = {1, 0, {0}, {0}};
  groups g = {e, e, e, e, e, e};
  for (int i = 0; i < p->l[LB].n; i++) {
    group_add(&g.lb, lsh.dims[p->l[LB].v[i]], ls[p->l[LB].v[i]]);
    group_add(&g.rb, rsh.dims[p->l[RB].v[i]], rs[p->l[RB].v[i]]);
  }
  for (int i = 0; i < p->l[LC].n; i++) {
    group_add(&g.lk, lsh.dims[p->l[LC].v[i]], ls[p->l[LC].v[i]]);
    group_add(&g.rk, rsh.dims[p->l[RC].v[i]], rs[p->l[RC].v[i]]);
  }
  for (int d = 0; d < lsh.rank; d++)
    if (!is_member(&p->l[LC], d) && !is_member(&p->l[LB], d)) group_add(&g.lm, lsh.dims[d], ls[d]);
  for (int d = 0; d < rsh.rank; d++)
    if (!is_member(&p->l[RC], d) && !is_member(&p->l[RB], d)) group_add(&g.rn, rsh.dims[d], rs[d]);
  return g;
}

void jx_dot_reference(const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  groups g = groups_of(p, in);
  group lb = g.lb, rb = g.rb, lk = g.lk, rk = g.rk, lm = g.lm, rn = g.rn;
  int64_t B = lb.count, M = lm.count, K = lk.count, N = rn.count;
  if (B * M * N == 0) return;

  acc_kind acc = accumulator(in[0].dtype, out[0].dtype);
  size_t es = acc == ACC_F32 ? sizeof(float) : 8;
  int64_t *tab = malloc(sizeof(int64_t) * (size_t)(2 * B + M + 2 * K + N + 1));
  void *L = malloc(es * (size_t)(B * M * K + 1)), *R = malloc(es * (size_t)(B * K * N + 1));
  void *rows = calloc((size_t)(MB * N), es);
  if (!tab || !L || !R || !rows) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY,
                 "dot_general: out of memory for a [%lld,%lld,%lld,%lld] "
                 "contraction",
                 (long long)B, (long long)M, (long long)K, (long long)N);
    memset(out[0].data, 0, jx_dtype_size(out[0].dtype) * (size_t)(B * M * N));
    goto done;
  }
  int64_t *tlb = tab, *trb = tlb + B, *tlm = trb + B, *tlk = tlm + M, *trk = tlk + K,
          *trn = trk + K;
  offsets(lb.n, lb.sizes, lb.strides, B, tlb);
  offsets(rb.n, rb.sizes, rb.strides, B, trb);
  offsets(lm.n, lm.sizes, lm.strides, M, tlm);
  offsets(lk.n, lk.sizes, lk.strides, K, tlk);
  offsets(rk.n, rk.sizes, rk.strides, K, trk);
  offsets(rn.n, rn.sizes, rn.strides, N, trn);
  pack(&in[0], acc, &lb, &lm, &lk, tlb, tlm, tlk, L);
  pack(&in[1], acc, &rb, &rk, &rn, trb, trk, trn, R);

  for (int64_t b = 0; b < B; b++)
    for (int64_t m = 0; m < M; m += MB) {
      int64_t mb = M - m < MB ? M - m : MB;
      memset(rows, 0, es * (size_t)(mb * N));
      size_t lo = (size_t)((b * M + m) * K), ro = (size_t)(b * K * N);
      switch (acc) {
      case ACC_F32: kernel_f32(mb, K, N, (float *)L + lo, (float *)R + ro, rows); break;
      case ACC_F64: kernel_f64(mb, K, N, (double *)L + lo, (double *)R + ro, rows); break;
      default: kernel_u64(mb, K, N, (uint64_t *)L + lo, (uint64_t *)R + ro, rows); break;
      }
      store_rows(acc, rows, mb * N, out[0].data, out[0].dtype, (b * M + m) * N);
    }
done:
  free(tab);
  free(L);
  free(R);
  free(rows);
}

/* Multiply-adds below which a contraction that the reference sums in f64
 * but BLAS would sum in f32 stays off BLAS: at that size BLAS saves
 * microseconds at most. f32 x f32 -> f32 ones run dot_small.c's f32 loops
 * (summed in f32 as BLAS and XLA sum); f16 and bf16 operands or results
 * keep the reference's sum. */
enum { F32_SUM_MIN_WORK = 1 << 15 };

/* f32 products up to SMALL_MAX_WORK multiply-adds whose rows are at least
 * a vector (8 columns) wide run dot_small.c's loops too: a [8, 64] x
 * [64, 64] RNN step took 8 us through sgemm, under 1 us there. Narrower
 * rows are scalar FMA chains there, slower than gemv past F32_SUM_MIN_WORK. */
enum { SMALL_MAX_WORK = 1 << 18, SMALL_MIN_WIDE_N = 8 };

/* The multiply-adds of the product, and its rhs free size N. */
static int64_t work_of(const jx_params *p, const jx_tensor *in, jx_shape out, int64_t *n) {
  int64_t work = jx_shape_numel(out), N = 1;
  for (int i = 0; i < p->l[LC].n; i++) work *= in[0].shape.dims[p->l[LC].v[i]];
  for (int d = 0; d < in[1].shape.rank; d++)
    if (!is_member(&p->l[RC], d) && !is_member(&p->l[RB], d)) N *= in[1].shape.dims[d];
  *n = N;
  return work;
}

/* Where eval_dot sends a float product: 0 BLAS, 1 dot_small.c, 2 the reference. */
enum { VIA_BLAS, VIA_SMALL, VIA_REFERENCE };

static int sums_f32_in_blas(jx_dtype in, jx_dtype out) {
  return out != JX_F64 && in != JX_F64 && (in == JX_F32 || out == JX_F32);
}

static int route(const jx_params *p, const jx_tensor *in, jx_dtype odt, jx_shape out) {
  if (!sums_f32_in_blas(in[0].dtype, odt)) return VIA_BLAS;
  int64_t N, work = work_of(p, in, out, &N);
  /* a single row is a gemv, which streams the rhs where it lies; the loops
   * would first copy a transposed one (a decode step's tied output head) */
  int one_row = jx_shape_numel(out) == N;
  if (in[0].dtype == JX_F32 && odt == JX_F32 &&
      (work < F32_SUM_MIN_WORK || (work < SMALL_MAX_WORK && N >= SMALL_MIN_WIDE_N && !one_row)))
    return VIA_SMALL;
  return work < F32_SUM_MIN_WORK ? VIA_REFERENCE : VIA_BLAS;
}

int jx_dot_goes_to_blas(const jx_params *p, const jx_tensor *in, jx_dtype odt, jx_shape out) {
  return jx_is_float(in[0].dtype) && jx_is_float(odt) && route(p, in, odt, out) == VIA_BLAS;
}

/* 1 when the dims of outer, mid and inner, in that order, are the
 * row-major layout of a contiguous array (size-1 dims do not count): the
 * operand already is its canonical buffer. */
static int is_canonical(const group *outer, const group *mid, const group *inner) {
  const group *gs[3] = {outer, mid, inner};
  int64_t want = 1;
  for (int g = 2; g >= 0; g--)
    for (int d = gs[g]->n - 1; d >= 0; d--) {
      if (gs[g]->sizes[d] == 1) continue;
      if (gs[g]->strides[d] != want) return 0;
      want *= gs[g]->sizes[d];
    }
  return 1;
}

/* t's f32 elements as [outer][mid][inner]: t's own data when it lies so,
 * else a copy in *owned (NULL when out of memory). */
static const float *canonical_f32(const jx_tensor *t, const group *outer, const group *mid,
                                  const group *inner, float **owned) {
  *owned = NULL;
  if (is_canonical(outer, mid, inner)) return t->data;
  int64_t *tab = malloc(sizeof(int64_t) * (size_t)(outer->count + mid->count + inner->count));
  float *buf = malloc(sizeof(float) * (size_t)(outer->count * mid->count * inner->count + 1));
  if (tab && buf) {
    int64_t *to = tab, *tm = to + outer->count, *ti = tm + mid->count, i = 0;
    offsets(outer->n, outer->sizes, outer->strides, outer->count, to);
    offsets(mid->n, mid->sizes, mid->strides, mid->count, tm);
    offsets(inner->n, inner->sizes, inner->strides, inner->count, ti);
    const float *src = t->data;
    for (int64_t a = 0; a < outer->count; a++)
      for (int64_t b = 0; b < mid->count; b++)
        for (int64_t c = 0; c < inner->count; c++) buf[i++] = src[to[a] + tm[b] + ti[c]];
    *owned = buf;
  } else {
    free(buf);
  }
  free(tab);
  return *owned;
}

/* f32 x f32 -> f32 through dot_small.c's loops, summed in f32 as BLAS and
 * XLA sum; 0, writing nothing, when they cannot run (no AVX2/FMA, out of
 * memory). */
static int dot_small_f32(const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  /* a plain [M, K] x [K, N]: the operands are their canonical buffers (a
   * scan's RNN step spent 4 % of its time grouping the dims) */
  if (p->l[LB].n == 0 && p->l[LC].n == 1 && in[0].shape.rank == 2 && in[1].shape.rank == 2 &&
      p->l[LC].v[0] == 1 && p->l[RC].v[0] == 0)
    return jx_sgemm_small(in[0].shape.dims[0], in[1].shape.dims[1], in[0].shape.dims[1], in[0].data,
                          in[1].data, out->data);
  groups g = groups_of(p, in);
  int64_t B = g.lb.count, M = g.lm.count, K = g.lk.count, N = g.rn.count;
  float *lo, *ro;
  const float *L = canonical_f32(&in[0], &g.lb, &g.lm, &g.lk, &lo);
  const float *R = L ? canonical_f32(&in[1], &g.rb, &g.rk, &g.rn, &ro) : NULL;
  int ok = L && R;
  for (int64_t b = 0; ok && b < B; b++)
    ok = jx_sgemm_small(M, N, K, L + b * M * K, R + b * K * N, (float *)out->data + b * M * N);
  if (L) free(lo);
  if (R) free(ro);
  return ok;
}

/* ---- complex: c64 x c64 -> c64, c128 x c128 -> c128 ----
 * Both operands packed into canonical [B, M, K] and [B, K, N] buffers, then
 * one cgemm/zgemm per batch element through OpenBLAS's cblas (the sums are
 * BLAS's, as XLA's CPU dot of complex calls Eigen's); without BLAS the same
 * product in plain loops. */
#define COMPLEX_DOT(NAME, T, GEMM)                                                                 \
  static void NAME(const jx_params *p, const jx_tensor *in, jx_tensor *out) {                      \
    groups g = groups_of(p, in);                                                                   \
    int64_t B = g.lb.count, M = g.lm.count, K = g.lk.count, N = g.rn.count;                        \
    T *o = out[0].data;                                                                            \
    if (B * M * N == 0) return;                                                                    \
    int64_t *tab = malloc(sizeof(int64_t) * (size_t)(2 * B + M + 2 * K + N + 1));                  \
    T *L = malloc(sizeof(T) * (size_t)(B * M * K + 1)),                                            \
      *R = malloc(sizeof(T) * (size_t)(B * K * N + 1));                                            \
    if (!tab || !L || !R) {                                                                        \
      jx_error_set(JX_ERR_OUT_OF_MEMORY, "dot_general: out of memory for a complex contraction");  \
      memset(o, 0, sizeof(T) * (size_t)(B * M * N));                                               \
      goto done;                                                                                   \
    }                                                                                              \
    int64_t *tlb = tab, *trb = tlb + B, *tlm = trb + B, *tlk = tlm + M, *trk = tlk + K,            \
            *trn = trk + K;                                                                        \
    offsets(g.lb.n, g.lb.sizes, g.lb.strides, B, tlb);                                             \
    offsets(g.rb.n, g.rb.sizes, g.rb.strides, B, trb);                                             \
    offsets(g.lm.n, g.lm.sizes, g.lm.strides, M, tlm);                                             \
    offsets(g.lk.n, g.lk.sizes, g.lk.strides, K, tlk);                                             \
    offsets(g.rk.n, g.rk.sizes, g.rk.strides, K, trk);                                             \
    offsets(g.rn.n, g.rn.sizes, g.rn.strides, N, trn);                                             \
    const T *x = in[0].data, *y = in[1].data;                                                      \
    int64_t i = 0;                                                                                 \
    for (int64_t b = 0; b < B; b++)                                                                \
      for (int64_t m = 0; m < M; m++)                                                              \
        for (int64_t k = 0; k < K; k++) L[i++] = x[tlb[b] + tlm[m] + tlk[k]];                      \
    i = 0;                                                                                         \
    for (int64_t b = 0; b < B; b++)                                                                \
      for (int64_t k = 0; k < K; k++)                                                              \
        for (int64_t n = 0; n < N; n++) R[i++] = y[trb[b] + trk[k] + trn[n]];                      \
    for (int64_t b = 0; b < B; b++) GEMM(M, N, K, L + b * M * K, R + b * K * N, o + b * M * N);    \
  done:                                                                                            \
    free(tab);                                                                                     \
    free(L);                                                                                       \
    free(R);                                                                                       \
  }

#ifdef JX_HAVE_BLAS
static void gemm_c64(int64_t M, int64_t N, int64_t K, const float _Complex *a,
                     const float _Complex *b, float _Complex *c) {
  const float _Complex one = 1, zero = 0;
  if (K == 0) {
    memset(c, 0, sizeof *c * (size_t)(M * N));
    return;
  }
  cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, &one,
              a, (blasint)K, b, (blasint)N, &zero, c, (blasint)N);
}
static void gemm_c128(int64_t M, int64_t N, int64_t K, const double _Complex *a,
                      const double _Complex *b, double _Complex *c) {
  const double _Complex one = 1, zero = 0;
  if (K == 0) {
    memset(c, 0, sizeof *c * (size_t)(M * N));
    return;
  }
  cblas_zgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, &one,
              a, (blasint)K, b, (blasint)N, &zero, c, (blasint)N);
}
#else
#define LOOP_GEMM(NAME, T)                                                                         \
  static void NAME(int64_t M, int64_t N, int64_t K, const T *a, const T *b, T *c) {                \
    for (int64_t m = 0; m < M; m++)                                                                \
      for (int64_t n = 0; n < N; n++) {                                                            \
        T s = 0;                                                                                   \
        for (int64_t k = 0; k < K; k++) s += a[m * K + k] * b[k * N + n];                          \
        c[m * N + n] = s;                                                                          \
      }                                                                                            \
  }
LOOP_GEMM(gemm_c64, float _Complex)
LOOP_GEMM(gemm_c128, double _Complex)
#endif
COMPLEX_DOT(dot_c64, float _Complex, gemm_c64)
COMPLEX_DOT(dot_c128, double _Complex, gemm_c128)

/* Floats go through BLAS (dot_blas.c) when the build has it, small f32
 * products through dot_small.c (see route); the reference kernel runs
 * everything else, and whatever those decline. */
static void eval_dot(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  if (in[0].dtype == JX_C64) {
    dot_c64(p, in, out);
    return;
  }
  if (in[0].dtype == JX_C128) {
    dot_c128(p, in, out);
    return;
  }
  switch (route(p, in, out[0].dtype, out[0].shape)) {
  case VIA_SMALL:
    if (!dot_small_f32(p, in, out)) jx_dot_reference(p, in, out);
    return;
  case VIA_REFERENCE: jx_dot_reference(p, in, out); return;
  default:
    if (!jx_dot_blas(p, in, out)) jx_dot_reference(p, in, out);
  }
}

jx_status jx_dot_side_by_side(int n, const jx_params *const *p, jx_array *const *in,
                              const jx_aval *avals, jx_array **out, int *ran) {
  enum { MAX_SIDE = 8 };
  *ran = 0;
  /* on one thread the products would run one after the other anyway, but
   * with every output made before the first runs: the usual path makes
   * each at its step, after the steps before have freed their inputs */
  if (n < 1 || n > MAX_SIDE || jx_pool_inside() || jx_pool_threads() < 2) return JX_OK;
  jx_tensor tin[2 * MAX_SIDE], tout[MAX_SIDE];
  const jx_tensor *ins[MAX_SIDE];
  jx_tensor *outs[MAX_SIDE];
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < 2; j++) {
      jx_array *a = in[2 * i + j];
      if (a->poisoned || jx_array_shards(a) || jx_array_pending(a) || !a->buf)
        return JX_OK; /* the usual path */
      tin[2 * i + j] = (jx_tensor){a->buf->data, a->dtype, a->shape};
    }
    tout[i] = (jx_tensor){NULL, avals[i].dtype, avals[i].shape};
    if (!sums_f32_in_blas(tin[2 * i].dtype, avals[i].dtype) ||
        route(p[i], &tin[2 * i], avals[i].dtype, avals[i].shape) != VIA_BLAS)
      return JX_OK; /* f32 GEMMs only, as eval_dot runs them */
    ins[i] = &tin[2 * i];
    outs[i] = &tout[i];
  }
  for (int i = 0; i < n; i++) {
    out[i] = jx_array_alloc(avals[i].dtype, avals[i].shape, avals[i].weak);
    if (out[i]->poisoned) {
      for (int j = 0; j <= i; j++) jx_scope_release_now(out[j]);
      return jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
    }
    tout[i].data = out[i]->buf->data;
  }
  *ran = jx_dot_blas_side_by_side(n, (const jx_params *const *)p, ins, outs);
  if (!*ran)
    for (int i = 0; i < n; i++) jx_scope_release_now(out[i]);
  return JX_OK;
}

const jx_prim jx_prim_dot_general = {
    .name = "dot_general",
    .id = JX_PRIM_dot_general,
    .nin = 2,
    .nout = 1,
    .params = "lhs_contracting=l0 rhs_contracting=l1 lhs_batch=l2 rhs_batch=l3 "
              "has_preferred_element_type=i0 preferred_element_type=dtype",
    .infer = infer_dot,
    .eval = eval_dot,
    .jvp = jx_jvp_bilinear,
    .transpose = jx_transpose_dot_general,
    .batch = jx_batch_dot_general};
const jx_prim *const jx_prims_dot[] = {&jx_prim_dot_general, NULL};
