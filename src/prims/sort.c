/* Sorting, as lax.sort and lax.top_k.
 *
 * sort: operands of one shape (dtypes may differ), one output per operand;
 * dimension = i0, num_keys = i1 (1 <= num_keys <= operands). Stable, and
 * lexicographic on the first num_keys operands. Float keys compare as JAX's
 * comparator after its canonicalization: -0.0 equals 0.0 and every NaN
 * (either sign) equals every other NaN and sorts after +inf; values
 * themselves come out unchanged (bits kept), so equal keys keep their order.
 *
 * top_k: k = i0 (0 <= k <= last dim); outputs the k largest values along the
 * last axis in descending order and their i32 indices. Unlike sort, XLA's
 * TopK orders floats by their bits (the IEEE total order):
 * -NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN; equal values keep the
 * lower index first. Transformation rules: sort_rules.c. */
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "prims.h"
#include "reduce_rules.h"

/* ---- a stable merge sort of positions under a comparison ---- */

typedef struct {
  const jx_tensor *keys;
  int nkeys;
  int64_t base, stride; /* element of position i: base + i * stride */
  int total_order;      /* top_k: IEEE total order, descending */
} line_cmp;

/* Sorting key of a float in IEEE total order, as an unsigned integer. */
static uint64_t total_key(jx_dtype dt, const void *data, int64_t i) {
  uint64_t u, top;
  switch (dt) {
  case JX_F64:
    memcpy(&u, (const char *)data + 8 * i, 8);
    top = 1ull << 63;
    break;
  case JX_F32: {
    uint32_t v;
    memcpy(&v, (const char *)data + 4 * i, 4);
    u = v;
    top = 1ull << 31;
    break;
  }
  default:
    u = ((const uint16_t *)data)[i];
    top = 1ull << 15;
    break;
  }
  return (u & top) ? (~u & ((top << 1) - 1)) : (u | top);
}

static int cmp_one(const jx_tensor *t, int total_order, int64_t a, int64_t b) {
  jx_dtype dt = t->dtype;
  if (jx_is_float(dt)) {
    if (total_order) {
      uint64_t x = total_key(dt, t->data, a), y = total_key(dt, t->data, b);
      return (x > y) - (x < y);
    }
    double x = jx_load_f64(t->data, dt, a), y = jx_load_f64(t->data, dt, b);
    int nx = x != x, ny = y != y;
    if (nx || ny) return nx - ny;
    return (x > y) - (x < y); /* -0.0 == 0.0 */
  }
  int64_t x = jx_load_i64(t->data, dt, a), y = jx_load_i64(t->data, dt, b);
  if (jx_is_signed_int(dt)) return (x > y) - (x < y);
  return ((uint64_t)x > (uint64_t)y) - ((uint64_t)x < (uint64_t)y);
}

/* <0 when position i goes before position j (ascending for sort, descending for top_k). */
static int cmp_pos(const line_cmp *c, int64_t i, int64_t j) {
  int64_t a = c->base + i * c->stride, b = c->base + j * c->stride;
  for (int k = 0; k < c->nkeys; k++) {
    int r = cmp_one(&c->keys[k], c->total_order, a, b);
    if (r) return c->total_order ? -r : r;
  }
  return 0;
}

/* Bottom-up merge sort of perm[0..n) (stable: ties keep the left run first). */
static void merge_sort(const line_cmp *c, int64_t *perm, int64_t *tmp, int64_t n) {
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t a = lo, b = mid, k = lo;
      while (a < mid && b < hi) tmp[k++] = cmp_pos(c, perm[b], perm[a]) < 0 ? perm[b++] : perm[a++];
      while (a < mid) tmp[k++] = perm[a++];
      while (b < hi) tmp[k++] = perm[b++];
    }
    memcpy(perm, tmp, sizeof *perm * (size_t)n);
  }
}

/* Splits shape around axis: outer * n * inner. */
static void split(jx_shape s, int ax, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  *n = s.dims[ax];
  for (int i = 0; i < ax; i++) *outer *= s.dims[i];
  for (int i = ax + 1; i < s.rank; i++) *inner *= s.dims[i];
}

/* ---- sort ---- */

static jx_status infer_sort(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
  for (int i = 1; i < ctx->nin; i++)
    if (!jx_shape_equal(in[i].shape, in[0].shape))
      return jx_error_set(JX_ERR_SHAPE, "sort: operands must have one shape, got %s and %s",
                          jx_aval_str(in[0].dtype, in[0].shape, a),
                          jx_aval_str(in[i].dtype, in[i].shape, b));
  if (p->i[0] < 0 || p->i[0] >= in[0].shape.rank)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "sort: dimension %lld is out of range for operand %s", (long long)p->i[0],
                        jx_aval_str(in[0].dtype, in[0].shape, a));
  if (p->i[1] < 1 || p->i[1] > ctx->nin)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "sort: num_keys %lld must be in [1, %d]",
                        (long long)p->i[1], ctx->nin);
  for (int i = 0; i < ctx->nin; i++) out[i] = in[i];
  return JX_OK;
}

static void eval_sort(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  int64_t outer, n, inner;
  split(in[0].shape, (int)p->i[0], &outer, &n, &inner);
  if (outer * n * inner == 0) return;
  int64_t *perm = malloc(sizeof *perm * (size_t)n * 2);
  if (!perm) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "sort: out of memory for a line of %lld", (long long)n);
    return;
  }
  line_cmp c = {.keys = in, .nkeys = (int)p->i[1], .stride = inner};
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < inner; k++) {
      c.base = o * n * inner + k;
      merge_sort(&c, perm, perm + n, n);
      for (int t = 0; t < ctx->nin; t++) {
        size_t es = jx_dtype_size(in[t].dtype);
        for (int64_t s = 0; s < n; s++)
          memcpy((char *)out[t].data + es * (size_t)(c.base + s * inner),
                 (const char *)in[t].data + es * (size_t)(c.base + perm[s] * inner), es);
      }
    }
  free(perm);
}

const jx_prim jx_prim_sort = {.name = "sort",
                              .id = JX_PRIM_sort,
                              .nin = JX_VARIADIC,
                              .nout = JX_NOUT_NIN,
                              .params = "dimension=i0 num_keys=i1",
                              .infer = infer_sort,
                              .eval = eval_sort,
                              .jvp = jx_jvp_sort,
                              .batch = jx_batch_sort};

/* ---- top_k ---- */

static jx_status infer_top_k(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  char a[JX_AVAL_STR_CAP];
  int r = in->shape.rank;
  if (r < 1)
    return jx_error_set(JX_ERR_SHAPE, "top_k: operand %s must have rank >= 1",
                        jx_aval_str(in->dtype, in->shape, a));
  if (p->i[0] < 0 || p->i[0] > in->shape.dims[r - 1])
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "top_k: k = %lld must be in [0, %lld], the last dimension of operand %s",
                        (long long)p->i[0], (long long)in->shape.dims[r - 1],
                        jx_aval_str(in->dtype, in->shape, a));
  out[0] = *in;
  out[0].shape.dims[r - 1] = p->i[0];
  out[1] = (jx_aval){JX_I32, 0, out[0].shape, 0};
  return JX_OK;
}

static void eval_top_k(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  int64_t outer, n, inner, k = ctx->params->i[0];
  split(in->shape, in->shape.rank - 1, &outer, &n, &inner);
  if (outer * k == 0) return;
  int64_t *perm = malloc(sizeof *perm * (size_t)n * 2);
  if (!perm) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "top_k: out of memory for a line of %lld", (long long)n);
    return;
  }
  size_t es = jx_dtype_size(in->dtype);
  line_cmp c = {.keys = in, .nkeys = 1, .stride = 1, .total_order = 1};
  for (int64_t o = 0; o < outer; o++) {
    c.base = o * n;
    merge_sort(&c, perm, perm + n, n);
    for (int64_t s = 0; s < k; s++) {
      memcpy((char *)out[0].data + es * (size_t)(o * k + s),
             (const char *)in->data + es * (size_t)(c.base + perm[s]), es);
      ((int32_t *)out[1].data)[o * k + s] = (int32_t)perm[s];
    }
  }
  free(perm);
}

const jx_prim jx_prim_top_k = {.name = "top_k",
                               .id = JX_PRIM_top_k,
                               .nin = 1,
                               .nout = 2,
                               .params = "k=i0",
                               .infer = infer_top_k,
                               .eval = eval_top_k,
                               .jvp = jx_jvp_top_k,
                               .batch = jx_batch_top_k};

const jx_prim *const jx_prims_sort[] = {&jx_prim_sort, &jx_prim_top_k, NULL};
