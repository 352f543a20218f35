/* conv_general_dilated: lax.conv_general_dilated, any number of spatial dims.
 *
 * Dimension numbers are given as JAX's ConvDimensionNumbers: the lhs spec
 * lists the lhs dims that are (batch, feature, spatial...), the rhs spec
 * (out feature, in feature, spatial...), the out spec (batch, feature,
 * spatial...). In that canonical order, with G = feature_group_count and
 * BG = batch_group_count (at most one of them > 1):
 *   out[n, o, y] = sum over c < I and k of
 *                  lhs[bg * N/BG + n, g * I + c, (y * stride + k * rdil - lo) / ldil]
 *                  * rhs[o, c, k]
 * where g = o / (O/G), bg = o / (O/BG), and a position that falls into the
 * padding or between dilated lhs elements contributes nothing. Negative
 * padding crops. An empty strides, padding or dilation list means all 1 (all
 * 0 for padding); a non-empty one has an entry per spatial dim. Sums use the accumulators of
 * dot_general (dot.c): f32 for f16/bf16 results, f64 for f32/f64, wrapping 64-bit integers,
 * or-of-ands for bool. That is the reference kernel; eager evaluation runs f32
 * convolutions with group counts 1 and at least 2^15 multiply-adds through
 * im2col + sgemm instead (conv_blas.c), summing in f32 as XLA does. */
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "contract_rules.h"
#include "conv_kernels.h"
#include "prims.h"
#include "rules.h"

enum {
  STRIDES = JX_CONV_STRIDES,
  PAD_LO = JX_CONV_PAD_LO,
  PAD_HI = JX_CONV_PAD_HI,
  LHS_DIL = JX_CONV_LHS_DIL,
  RHS_DIL = JX_CONV_RHS_DIL,
  LHS_SPEC = JX_CONV_LHS_SPEC,
  RHS_SPEC = JX_CONV_RHS_SPEC,
  OUT_SPEC = JX_CONV_OUT_SPEC
};

/* ---- shape rule ---- */

static jx_status bad(jx_status code, const jx_aval *in, const char *msg) {
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  return jx_error_set(code, "conv_general_dilated: %s (lhs %s, rhs %s)", msg,
                      jx_aval_str(in[0].dtype, in[0].shape, sa),
                      jx_aval_str(in[1].dtype, in[1].shape, sb));
}

static jx_status check_spec(const jx_aval *in, const jx_ilist *l, int rank, const char *what) {
  char msg[160];
  if (l->n != rank) {
    snprintf(msg, sizeof msg, "the %s spec has %d dims but the operands have rank %d", what, l->n,
             rank);
    return bad(JX_ERR_INVALID_ARGUMENT, in, msg);
  }
  int seen[JX_MAX_RANK] = {0};
  for (int i = 0; i < l->n; i++) {
    if (l->v[i] < 0 || l->v[i] >= rank || seen[l->v[i]]) {
      snprintf(msg, sizeof msg,
               "the %s spec is not a permutation of the %d dims (entry %d is %lld)", what, rank, i,
               (long long)l->v[i]);
      return bad(JX_ERR_INVALID_ARGUMENT, in, msg);
    }
    seen[l->v[i]] = 1;
  }
  return JX_OK;
}

/* Entry i of a per-spatial-dim list (empty = dflt); lists must have nsp entries. */
static int64_t entry(const jx_ilist *l, int i, int64_t dflt) { return l->n ? l->v[i] : dflt; }

static jx_status check_list(const jx_aval *in, const jx_ilist *l, int nsp, const char *what,
                            int positive) {
  char msg[160];
  if (l->n != 0 && l->n != nsp) {
    snprintf(msg, sizeof msg, "%s has %d entries but there are %d spatial dims", what, l->n, nsp);
    return bad(JX_ERR_INVALID_ARGUMENT, in, msg);
  }
  for (int i = 0; positive && i < l->n; i++)
    if (l->v[i] < 1) {
      snprintf(msg, sizeof msg, "%s must be positive, got %lld for spatial dim %d", what,
               (long long)l->v[i], i);
      return bad(JX_ERR_INVALID_ARGUMENT, in, msg);
    }
  return JX_OK;
}

static int64_t dilate(int64_t d, int64_t dil) { return d == 0 ? 0 : 1 + dil * (d - 1); }

/* lax's rules for preferred_element_type, as dot_general (dot.c). */
static int preferred_ok(jx_dtype in, jx_dtype out) {
  if (jx_is_complex(in) || jx_is_complex(out)) /* complex to complex, not narrower */
    return jx_is_complex(in) && jx_is_complex(out) && jx_dtype_bits(out) >= jx_dtype_bits(in);
  if (in == out || in == JX_BOOL) return 1;
  if (jx_is_float(in)) return jx_is_float(out);
  if (jx_is_float(out)) return 1;
  return out != JX_BOOL && jx_dtype_bits(out) >= jx_dtype_bits(in);
}

static jx_status infer_conv(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  char msg[200];
  if (in[0].dtype != in[1].dtype) return bad(JX_ERR_DTYPE, in, "operands must have one dtype");
  int rank = in[0].shape.rank;
  if (rank != in[1].shape.rank || rank < 2)
    return bad(JX_ERR_SHAPE, in, "lhs and rhs must have the same rank, at least 2");
  int nsp = rank - 2;
  jx_status st;
  if ((st = check_spec(in, &p->l[LHS_SPEC], rank, "lhs")) ||
      (st = check_spec(in, &p->l[RHS_SPEC], rank, "rhs")) ||
      (st = check_spec(in, &p->l[OUT_SPEC], rank, "out")) ||
      (st = check_list(in, &p->l[STRIDES], nsp, "window strides", 1)) ||
      (st = check_list(in, &p->l[PAD_LO], nsp, "padding lo", 0)) ||
      (st = check_list(in, &p->l[PAD_HI], nsp, "padding hi", 0)) ||
      (st = check_list(in, &p->l[LHS_DIL], nsp, "lhs dilation", 1)) ||
      (st = check_list(in, &p->l[RHS_DIL], nsp, "rhs dilation", 1)))
    return st;
  int64_t G = p->i[0], BG = p->i[1];
  if (G < 1 || BG < 1) {
    snprintf(msg, sizeof msg,
             "feature_group_count (%lld) and batch_group_count (%lld) must be "
             ">= 1",
             (long long)G, (long long)BG);
    return bad(JX_ERR_INVALID_ARGUMENT, in, msg);
  }
  if (G > 1 && BG > 1) {
    snprintf(msg, sizeof msg,
             "at most one of feature_group_count (%lld) and batch_group_count "
             "(%lld) may be > 1",
             (long long)G, (long long)BG);
    return bad(JX_ERR_INVALID_ARGUMENT, in, msg);
  }
  const jx_shape *ls = &in[0].shape, *rs = &in[1].shape;
  int64_t N = ls->dims[p->l[LHS_SPEC].v[0]], C = ls->dims[p->l[LHS_SPEC].v[1]];
  int64_t O = rs->dims[p->l[RHS_SPEC].v[0]], I = rs->dims[p->l[RHS_SPEC].v[1]];
  if (C % G || C / G != I) {
    snprintf(msg, sizeof msg,
             "lhs feature size %lld divided by feature_group_count %lld must "
             "equal the rhs input feature size %lld",
             (long long)C, (long long)G, (long long)I);
    return bad(JX_ERR_SHAPE, in, msg);
  }
  if (O % G || O % BG) {
    snprintf(msg, sizeof msg,
             "rhs output feature size %lld must be a multiple of "
             "feature_group_count %lld and batch_group_count %lld",
             (long long)O, (long long)G, (long long)BG);
    return bad(JX_ERR_SHAPE, in, msg);
  }
  if (N % BG) {
    snprintf(msg, sizeof msg, "batch_group_count %lld must divide the lhs batch size %lld",
             (long long)BG, (long long)N);
    return bad(JX_ERR_SHAPE, in, msg);
  }
  jx_dtype dt = in[0].dtype;
  if (p->i[2]) {
    if (!jx_dtype_valid(p->dtype) || !preferred_ok(dt, p->dtype)) {
      snprintf(msg, sizeof msg, "preferred element type %s is incompatible with operand dtype %s",
               jx_dtype_name(p->dtype), jx_dtype_name(dt));
      return bad(JX_ERR_DTYPE, in, msg);
    }
    dt = p->dtype;
  }
  jx_shape s = {rank, {0}};
  s.dims[p->l[OUT_SPEC].v[0]] = N / BG;
  s.dims[p->l[OUT_SPEC].v[1]] = O;
  for (int i = 0; i < nsp; i++) {
    int64_t d = ls->dims[p->l[LHS_SPEC].v[2 + i]], k = rs->dims[p->l[RHS_SPEC].v[2 + i]];
    int64_t padded = dilate(d, entry(&p->l[LHS_DIL], i, 1)) + entry(&p->l[PAD_LO], i, 0) +
                     entry(&p->l[PAD_HI], i, 0);
    if (padded < 0) {
      snprintf(msg, sizeof msg,
               "negative padding (%lld, %lld) is larger than spatial dim %d "
               "of size %lld",
               (long long)entry(&p->l[PAD_LO], i, 0), (long long)entry(&p->l[PAD_HI], i, 0), i,
               (long long)d);
      return bad(JX_ERR_SHAPE, in, msg);
    }
    int64_t win = dilate(k, entry(&p->l[RHS_DIL], i, 1));
    s.dims[p->l[OUT_SPEC].v[2 + i]] =
        padded < win ? 0 : (padded - win) / entry(&p->l[STRIDES], i, 1) + 1;
  }
  out[0] = (jx_aval){dt, (uint8_t)(!p->i[2] && in[0].weak && in[1].weak), s, 0};
  return JX_OK;
}

/* ---- reference kernel ---- */

/* complex sums in c128, as real ones in f64 */
typedef enum { ACC_F32, ACC_F64, ACC_INT, ACC_BOOL, ACC_C128 } acc_kind;

static acc_kind accumulator(jx_dtype in, jx_dtype out) {
  if (jx_is_complex(out)) return ACC_C128;
  if (out == JX_BOOL) return ACC_BOOL;
  if (!jx_is_float(out)) return ACC_INT;
  if (out == JX_F32 || out == JX_F64 || in == JX_F32 || in == JX_F64) return ACC_F64;
  return ACC_F32;
}

/* Copies t into buf in the canonical order given by spec (canonical dim j is
 * t's dim spec[j]), converted to the accumulator type. */
static void pack(const jx_tensor *t, const jx_ilist *spec, acc_kind acc, void *buf) {
  int rank = t->shape.rank;
  int64_t st[JX_MAX_RANK], sizes[JX_MAX_RANK], strides[JX_MAX_RANK], idx[JX_MAX_RANK] = {0};
  jx_shape_strides(t->shape, st);
  for (int j = 0; j < rank; j++) {
    sizes[j] = t->shape.dims[spec->v[j]];
    strides[j] = st[spec->v[j]];
  }
  int64_t n = jx_shape_numel(t->shape), off = 0;
  for (int64_t i = 0; i < n; i++) {
    switch (acc) {
    case ACC_F32: ((float *)buf)[i] = (float)jx_load_f64(t->data, t->dtype, off); break;
    case ACC_F64: ((double *)buf)[i] = jx_load_f64(t->data, t->dtype, off); break;
    case ACC_C128: ((double _Complex *)buf)[i] = jx_load_c128(t->data, t->dtype, off); break;
    default: ((uint64_t *)buf)[i] = (uint64_t)jx_load_i64(t->data, t->dtype, off); break;
    }
    for (int d = rank - 1; d >= 0; d--) {
      off += strides[d];
      if (++idx[d] < sizes[d]) break;
      off -= strides[d] * sizes[d];
      idx[d] = 0;
    }
  }
}

typedef jx_conv_geom geom;

int64_t jx_conv_taps(const geom *g, int64_t y, int64_t *kpos, int64_t *lpos) {
  int64_t yi[JX_CONV_MAX_SP];
  for (int d = g->nsp - 1; d >= 0; d--) {
    yi[d] = y % g->out[d];
    y /= g->out[d];
  }
  int64_t count = 0;
  for (int64_t kf = 0; kf < g->k_sp; kf++) {
    int64_t rem = kf, loff = 0, mul = 1, ok = 1;
    for (int d = g->nsp - 1; d >= 0 && ok; d--) {
      int64_t kd = rem % g->k[d];
      rem /= g->k[d];
      int64_t q = yi[d] * g->stride[d] + kd * g->rdil[d] - g->lo[d]; /* in the dilated lhs */
      if (q < 0 || q % g->ldil[d] || q / g->ldil[d] >= g->in[d]) ok = 0;
      loff += (ok ? q / g->ldil[d] : 0) * mul;
      mul *= g->in[d];
    }
    if (ok) {
      kpos[count] = kf;
      lpos[count++] = loff;
    }
  }
  return count;
}

#define CONV_LOOP(NAME, T)                                                                         \
  static void NAME(const geom *g, int64_t ntap, const int64_t *kpos, const int64_t *lpos,          \
                   const T *L, const T *R, int64_t y, T *res) {                                    \
    int64_t og = g->O / g->G, obg = g->O / g->BG;                                                  \
    for (int64_t n = 0; n < g->on; n++)                                                            \
      for (int64_t o = 0; o < g->O; o++) {                                                         \
        int64_t ln = (o / obg) * g->on + n, c0 = (o / og) * g->I;                                  \
        T acc = 0;                                                                                 \
        for (int64_t c = 0; c < g->I; c++) {                                                       \
          const T *l = L + (ln * g->C + c0 + c) * g->in_sp;                                        \
          const T *r = R + (o * g->I + c) * g->k_sp;                                               \
          for (int64_t t = 0; t < ntap; t++) acc += l[lpos[t]] * r[kpos[t]];                       \
        }                                                                                          \
        res[(n * g->O + o) * g->out_sp + y] = acc;                                                 \
      }                                                                                            \
  }
CONV_LOOP(conv_f32, float)
CONV_LOOP(conv_f64, double)
CONV_LOOP(conv_u64, uint64_t)
CONV_LOOP(conv_c128, double _Complex)

void jx_conv_geometry(const jx_params *p, const jx_tensor *in, const jx_shape *os, geom *out) {
  geom g = {.nsp = in[0].shape.rank - 2, .G = p->i[0], .BG = p->i[1]};
  const jx_shape *ls = &in[0].shape, *rs = &in[1].shape;
  g.N = ls->dims[p->l[LHS_SPEC].v[0]];
  g.C = ls->dims[p->l[LHS_SPEC].v[1]];
  g.O = rs->dims[p->l[RHS_SPEC].v[0]];
  g.I = rs->dims[p->l[RHS_SPEC].v[1]];
  g.on = g.N / g.BG;
  g.in_sp = g.k_sp = g.out_sp = 1;
  for (int i = 0; i < g.nsp; i++) {
    g.in[i] = ls->dims[p->l[LHS_SPEC].v[2 + i]];
    g.k[i] = rs->dims[p->l[RHS_SPEC].v[2 + i]];
    g.out[i] = os->dims[p->l[OUT_SPEC].v[2 + i]];
    g.stride[i] = entry(&p->l[STRIDES], i, 1);
    g.lo[i] = entry(&p->l[PAD_LO], i, 0);
    g.ldil[i] = entry(&p->l[LHS_DIL], i, 1);
    g.rdil[i] = entry(&p->l[RHS_DIL], i, 1);
    g.in_sp *= g.in[i];
    g.k_sp *= g.k[i];
    g.out_sp *= g.out[i];
  }
  *out = g;
}

void jx_conv_reference(const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  const jx_shape *ls = &in[0].shape, *rs = &in[1].shape, *os = &out[0].shape;
  geom g;
  jx_conv_geometry(p, in, os, &g);
  int64_t total = g.on * g.O * g.out_sp;
  if (total == 0) return;

  acc_kind acc = accumulator(in[0].dtype, out[0].dtype);
  size_t es = acc == ACC_F32 ? sizeof(float) : acc == ACC_C128 ? 16 : 8;
  void *L = malloc(es * (size_t)(jx_shape_numel(*ls) + 1));
  void *R = malloc(es * (size_t)(jx_shape_numel(*rs) + 1));
  void *res = malloc(es * (size_t)total);
  int64_t *tap = malloc(sizeof(int64_t) * (size_t)(2 * g.k_sp + 1));
  if (!L || !R || !res || !tap) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "conv_general_dilated: out of memory");
    memset(out[0].data, 0, jx_dtype_size(out[0].dtype) * (size_t)total);
    goto done;
  }
  pack(&in[0], &p->l[LHS_SPEC], acc, L);
  pack(&in[1], &p->l[RHS_SPEC], acc, R);
  for (int64_t y = 0; y < g.out_sp; y++) {
    int64_t ntap = jx_conv_taps(&g, y, tap, tap + g.k_sp);
    switch (acc) {
    case ACC_F32: conv_f32(&g, ntap, tap, tap + g.k_sp, L, R, y, res); break;
    case ACC_F64: conv_f64(&g, ntap, tap, tap + g.k_sp, L, R, y, res); break;
    case ACC_C128: conv_c128(&g, ntap, tap, tap + g.k_sp, L, R, y, res); break;
    default: conv_u64(&g, ntap, tap, tap + g.k_sp, L, R, y, res); break;
    }
  }

  /* canonical [on, O, spatial...] -> the out spec's layout */
  int64_t ost[JX_MAX_RANK], cst[JX_MAX_RANK], idx[JX_MAX_RANK] = {0}, sizes[JX_MAX_RANK];
  jx_shape_strides(*os, ost);
  for (int j = 0; j < os->rank; j++) {
    cst[j] = ost[p->l[OUT_SPEC].v[j]];
    sizes[j] = os->dims[p->l[OUT_SPEC].v[j]];
  }
  jx_dtype dt = out[0].dtype;
  int64_t off = 0;
  for (int64_t i = 0; i < total; i++) {
    switch (acc) {
    case ACC_F32: {
      float v = ((float *)res)[i];
      ((uint16_t *)out[0].data)[off] = dt == JX_BF16 ? jx_f32_to_bf16(v) : jx_f32_to_f16(v);
      break;
    }
    case ACC_F64: jx_store_f64(out[0].data, dt, off, ((double *)res)[i]); break;
    case ACC_C128: jx_store_c128(out[0].data, dt, off, ((double _Complex *)res)[i]); break;
    case ACC_INT: jx_store_i64(out[0].data, dt, off, (int64_t)((uint64_t *)res)[i]); break;
    case ACC_BOOL: ((uint8_t *)out[0].data)[off] = ((uint64_t *)res)[i] != 0; break;
    }
    for (int d = os->rank - 1; d >= 0; d--) {
      off += cst[d];
      if (++idx[d] < sizes[d]) break;
      off -= cst[d] * sizes[d];
      idx[d] = 0;
    }
  }
done:
  free(L);
  free(R);
  free(res);
  free(tap);
}

/* Multiply-adds below which an f32 convolution stays on the reference, whose
 * f64 sums tests/golden/gen_contract.py's f32 goldens (1e-6) are written for;
 * an f32 sum in BLAS can miss those by a few ulps (see dot.c's eval_dot). */
enum { F32_SUM_MIN_WORK = 1 << 15 };

static void eval_conv(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  geom g;
  jx_conv_geometry(p, in, &out[0].shape, &g);
  double work = (double)g.on * (double)g.O * (double)g.out_sp * (double)g.I * (double)g.k_sp;
  if (work >= F32_SUM_MIN_WORK && jx_conv_blas(p, in, out)) return;
  jx_conv_reference(p, in, out);
}

const jx_prim jx_prim_conv_general_dilated = {
    .name = "conv_general_dilated",
    .id = JX_PRIM_conv_general_dilated,
    .nin = 2,
    .nout = 1,
    .params = "window_strides=l0 padding_lo=l1 padding_hi=l2 lhs_dilation=l3 rhs_dilation=l4 "
              "lhs_spec=l5 rhs_spec=l6 out_spec=l7 feature_group_count=i0 "
              "batch_group_count=i1 has_preferred_element_type=i2 preferred_element_type=dtype",
    .infer = infer_conv,
    .eval = eval_conv,
    .jvp = jx_jvp_bilinear,
    .transpose = jx_transpose_conv_general_dilated,
    .batch = jx_batch_conv_general_dilated};
const jx_prim *const jx_prims_conv[] = {&jx_prim_conv_general_dilated, NULL};
