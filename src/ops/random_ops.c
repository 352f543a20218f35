/* jax.random on top of the threefry2x32 and random_bits primitives
 * (include/jx/random.h). Every sampler is JAX's own recipe from
 * jax/_src/random/core.py and threefry2x32.py (partitionable mode), written
 * with primitives so that it traces like any other op:
 *   key(seed)        = (seed >> 32, seed & 0xffffffff) as u32[2] under x64;
 *                      (0, seed & 0xffffffff) in the default mode, where JAX's
 *                      seed is 32-bit and its shift by 32 gives 0
 *   split(key, n)    = threefry2x32(key[0], key[1], 0, iota(n)), stacked as u32[n,2]
 *   fold_in(key, d)  = threefry2x32(key[0], key[1], 0, d) as u32[2]
 *   uniform          = random bits put into the mantissa of a float in [1, 2),
 *                      minus 1, scaled to [lo, hi) by one fused multiply-add
 *                      (f32, f64), as XLA's CPU kernels contract it
 *   normal           = sqrt(2) * erf_inv(uniform in (-1, 1))
 *   truncated_normal = sqrt(2) * erf_inv(uniform in (erf(lo/sqrt2), erf(hi/sqrt2))),
 *                      clipped into the open interval (lo, hi)
 *   bernoulli        = uniform < p, in f32 (f64 under x64: p is a Python float)
 *   categorical      = argmax(logits + Gumbel noise) (the Gumbel-max trick)
 *   permutation      = arange(n) sorted by fresh random 32-bit keys, repeated
 *                      for enough rounds that collisions become negligible.
 * categorical and permutation return JAX's default int: i32, i64 under x64.
 *
 * Drawn eagerly in f32 or f64, uniform, normal and truncated_normal run the
 * same recipe fused (draw_fused): a block of elements at a time goes from
 * bits to the result in the output's own buffer, with the same float
 * operations in the same order, so the bits are the traced recipe's while
 * none of its dozen-odd arrays of the result's size is made. */
#include <jx/random.h>
#include <math.h>
#include <string.h>

#include "../array/dtype.h"
#include "../base/hooks.h"
#include "../trace/follow_data.h"
#include "../prims/elementwise.h"
#include "../trace/trace.h"
#include "ops_util.h"

/* ---- small helpers ---- */

static jx_array *bind2(const jx_prim *p, jx_array *a, jx_array *b) {
  return jx_bind1(p, 2, (jx_array *[]){a, b}, NULL);
}
static jx_array *bind1(const jx_prim *p, jx_array *a) { return jx_bind1(p, 1, &a, NULL); }

/* A key is a u32[2] array; anything else is a user error named after op. */
static jx_status check_key(const char *op, jx_array *key) {
  jx_status st = jx_check_inputs(op, 1, &key);
  if (st) return st;
  if (key->dtype != JX_U32 || key->shape.rank != 1 || key->shape.dims[0] != 2) {
    char a[JX_AVAL_STR_CAP];
    return jx_error_set(key->dtype != JX_U32 ? JX_ERR_DTYPE : JX_ERR_SHAPE,
                        "%s: the key is %s but must be u32[2] (from jx_random_key, "
                        "jx_random_split or jx_random_fold_in)",
                        op, jx_aval_str(key->dtype, key->shape, a));
  }
  return JX_OK;
}

/* random_bits(key) of the given width and shape (the key already checked). */
static jx_array *bits_of(jx_array *key, int width, jx_shape s) {
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = width;
  p.l[0].n = s.rank;
  for (int i = 0; i < s.rank; i++) p.l[0].v[i] = s.dims[i];
  return jx_bind1(&jx_prim_random_bits, 1, &key, &p);
}

static jx_array *convert(jx_array *a, jx_dtype dt) {
  jx_params p = JX_PARAMS_INIT;
  p.dtype = dt;
  return jx_bind1(&jx_prim_convert_element_type, 1, &a, &p);
}

static jx_array *bitcast(jx_array *a, jx_dtype dt) {
  jx_params p = JX_PARAMS_INIT;
  p.dtype = dt;
  return jx_bind1(&jx_prim_bitcast_convert_type, 1, &a, &p);
}

/* key[i] as a u32 array of shape s (rank >= 1). */
static jx_array *key_word(jx_array *key, int64_t i, jx_shape s) {
  jx_array *w = jx_slice(key, JX_SHAPE(i), JX_SHAPE(i + 1), JX_SHAPE());
  return jx_broadcast_to(w, s);
}

/* ---- keys ---- */

jx_array *jx_random_key(uint64_t seed) {
  /* x64 JAX bit-casts a 64-bit seed to (high word, low word); a negative
   * int64 seed is its two's complement, which a uint64 already is. The
   * default mode's seed is 32-bit: its high word is 0. */
  uint32_t words[2] = {jx_x64_enabled() ? (uint32_t)(seed >> 32) : 0, (uint32_t)seed};
  return jx_array_from(JX_U32, JX_SHAPE(2), words);
}

/* Both hash words of the counters (0, lo) under key, lo of shape s. */
static jx_status hash_pairs(jx_array *key, jx_array *lo, jx_shape s, jx_array **y) {
  jx_array *in[4] = {key_word(key, 0, s), key_word(key, 1, s), jx_zeros(JX_U32, s), lo};
  return jx_bind(&jx_prim_threefry2x32, 4, in, NULL, y);
}

jx_array *jx_random_split(jx_array *key, int64_t n) {
  const char *op = "jx_random_split";
  if (check_key(op, key)) return jx_poison();
  if (n < 0 || n > UINT32_MAX) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the number of keys is %lld, not in [0, 2^32)", op,
                 (long long)n);
    return jx_poison();
  }
  /* Partitionable split: key i hashes the 64-bit counter i (below 2^32 here,
   * so its high word is 0); the two hash words are the new key. */
  jx_array *y[2];
  if (hash_pairs(key, jx_arange(JX_U32, 0, (double)n, 1), JX_SHAPE(n), y)) return jx_poison();
  return jx_stack(2, y, 1);
}

jx_array *jx_random_fold_in(jx_array *key, uint32_t data) {
  if (check_key("jx_random_fold_in", key)) return jx_poison();
  /* JAX hashes threefry_seed(data) = (0, data) as one counter pair. */
  jx_array *y[2];
  if (hash_pairs(key, jx_full(JX_U32, JX_SHAPE(1), data), JX_SHAPE(1), y)) return jx_poison();
  return jx_concatenate(2, y, 0);
}

jx_array *jx_random_bits(jx_array *key, jx_shape s) {
  const char *op = "jx_random_bits";
  if (check_key(op, key) || jx_shape_check(s, op, "shape")) return jx_poison();
  return bits_of(key, 32, s);
}

jx_status jx_threefry2x32(jx_array *k0, jx_array *k1, jx_array *x0, jx_array *x1, jx_array **out0,
                          jx_array **out1) {
  if (!out0 || !out1)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_threefry2x32: output pointer is NULL");
  jx_array *in[4] = {k0, k1, x0, x1}, *y[2];
  *out0 = *out1 = jx_poison();
  jx_status st = jx_check_inputs("jx_threefry2x32", 4, in);
  if (st) return st;
  st = jx_bind(&jx_prim_threefry2x32, 4, in, NULL, y);
  *out0 = y[0];
  *out1 = y[1];
  return st;
}

/* ---- floats from bits ---- */

typedef struct {
  int nbits, nmant;  /* total and explicit mantissa bits (finfo.bits, finfo.nmant) */
  uint64_t one_bits; /* the bit pattern of 1.0 */
  double tiny;       /* the smallest normal number (finfo.tiny) */
  double below_one;  /* the largest number below 1, negated: nextafter(-1, 0) */
} float_info;

static int float_info_of(jx_dtype dt, float_info *fi) {
  switch (dt) {
  case JX_F16: *fi = (float_info){16, 10, 0x3C00u, 0x1p-14, -(1 - 0x1p-11)}; return 1;
  case JX_BF16: *fi = (float_info){16, 7, 0x3F80u, 0x1p-126, -(1 - 0x1p-8)}; return 1;
  case JX_F32: *fi = (float_info){32, 23, 0x3F800000u, 0x1p-126, -(1 - 0x1p-24)}; return 1;
  case JX_F64: *fi = (float_info){64, 52, 0x3FF0000000000000u, 0x1p-1022, -(1 - 0x1p-53)}; return 1;
  default: return 0;
  }
}

static jx_status check_float(const char *op, jx_dtype dt, jx_shape s, float_info *fi) {
  if (!jx_dtype_valid(dt) || !float_info_of(dt, fi))
    return jx_error_set(JX_ERR_DTYPE, "%s: dtype %s is not a floating dtype (f16, bf16, f32, f64)",
                        op, jx_dtype_name(dt));
  return jx_shape_check(s, op, "shape");
}

static jx_dtype uint_of_width(int bits) {
  return bits == 16 ? JX_U16 : bits == 32 ? JX_U32 : JX_U64;
}

/* JAX's _uniform with bounds already of dtype dt and shape s: the top nmant
 * random bits become the mantissa of a float in [1, 2); subtracting 1 gives
 * [0, 1), which is scaled to [lo, hi) and kept >= lo against rounding.
 * Formats with fewer than 8 mantissa bits (bf16) draw 8 bits, not 16. XLA's
 * CPU kernels fuse the f32 and f64 scaling into one multiply-add; f16 and
 * bf16 round after each operation. */
static jx_array *uniform_between(jx_array *key, jx_dtype dt, const float_info *fi, jx_shape s,
                                 jx_array *lo, jx_array *hi) {
  int rng_bits = fi->nmant < 8 ? 8 : fi->nbits;
  jx_dtype ut = uint_of_width(fi->nbits);
  jx_array *bits = bits_of(key, rng_bits, s);
  if (rng_bits != fi->nbits) bits = convert(bits, ut);
  jx_array *mant =
      bind2(&jx_prim_shift_right_logical, bits, jx_full(ut, s, (double)(rng_bits - fi->nmant)));
  jx_array *fbits = bind2(&jx_prim_or, mant, jx_full(ut, s, (double)fi->one_bits));
  jx_array *floats = bind2(&jx_prim_sub, bitcast(fbits, dt), jx_full(dt, s, 1.0));
  jx_array *range = bind2(&jx_prim_sub, hi, lo), *scaled;
  if (dt == JX_F32 || dt == JX_F64)
    scaled = jx_bind1(&jx_prim_fma, 3, (jx_array *[]){floats, range, lo}, NULL);
  else
    scaled = bind2(&jx_prim_add, bind2(&jx_prim_mul, floats, range), lo);
  return bind2(&jx_prim_max, lo, scaled);
}

/* ---- the eager fused draw ---- */

/* One draw as the recipe above computes it per element, with the bounds as
 * values of the dtype: u = max(lo, fma(unit, hi - lo, lo)) from the bits;
 * for the normals v = sqrt(2) * erf_inv(u), then for the truncated one
 * v = min(below, max(above, v)). */
typedef struct {
  double lo, hi;
  int normal, clip;
  double above, below;
} fused_draw;

enum { DRAW_BLOCK = 512 };
static const jx_params no_params = JX_PARAMS_INIT;

/* The f32 and f64 loops: WIDTH random bits per element, NMANT of them the
 * mantissa; erf_inv is the primitive's own kernel, run on each block. */
#define FUSED_DRAW(NAME, T, UT, DT, WIDTH, NMANT, ONE, FMA)                                        \
  static void NAME(const uint32_t key[2], const fused_draw *d, int64_t n, T *out) {                \
    const T lo = (T)d->lo, range = (T)d->hi - (T)d->lo, sqrt2 = (T)M_SQRT2;                        \
    const T above = (T)d->above, below = (T)d->below;                                              \
    UT bits[DRAW_BLOCK];                                                                           \
    T u[DRAW_BLOCK];                                                                               \
    for (int64_t s = 0; s < n; s += DRAW_BLOCK) {                                                  \
      int64_t m = n - s < DRAW_BLOCK ? n - s : DRAW_BLOCK;                                         \
      T *o = out + s, *dst = d->normal ? u : o;                                                    \
      jx_random_bits_run(key, WIDTH, (uint64_t)s, m, bits);                                        \
      for (int64_t j = 0; j < m; j++) {                                                            \
        UT b = (bits[j] >> (WIDTH - NMANT)) | ONE;                                                 \
        T f;                                                                                       \
        memcpy(&f, &b, sizeof f);                                                                  \
        T x = FMA(f - (T)1, range, lo);                                                            \
        dst[j] = JX_FMAX(lo, x);                                                                   \
      }                                                                                            \
      if (!d->normal) continue;                                                                    \
      jx_tensor tin = {u, DT, JX_SHAPE(m)}, tout = {o, DT, JX_SHAPE(m)};                           \
      jx_prim_erf_inv.eval(&(jx_rule_ctx){&jx_prim_erf_inv, &no_params, 1, 1, 0, NULL}, &tin,      \
                           &tout);                                                                 \
      for (int64_t j = 0; j < m; j++) {                                                            \
        T v = sqrt2 * o[j];                                                                        \
        o[j] = d->clip ? JX_FMIN(below, JX_FMAX(above, v)) : v;                                    \
      }                                                                                            \
    }                                                                                              \
  }
FUSED_DRAW(fused_draw_f32, float, uint32_t, JX_F32, 32, 23, 0x3F800000u, fmaf)
FUSED_DRAW(fused_draw_f64, double, uint64_t, JX_F64, 64, 52, 0x3FF0000000000000u, fma)
#undef FUSED_DRAW

/* The draw d of dtype dt and shape s, fused, when it runs eagerly: no trace
 * is recording, the key is concrete and on no mesh, the dtype is f32 or f64
 * and no debugging tool watches each primitive. NULL otherwise: the caller
 * runs the recipe with primitives. */
static jx_array *draw_fused(jx_array *key, jx_dtype dt, jx_shape s, const fused_draw *d) {
  if (jx_trace_active() || jx_is_tracer(key) || jx_debug_flags || (dt != JX_F32 && dt != JX_F64) ||
      jx_follow_data->eager_follows(&jx_prim_random_bits, 1, &key, 0, NULL))
    return NULL;
  if (jx_array_ready(key)) return jx_poison();
  uint32_t k[2];
  memcpy(k, jx_array_data(key), sizeof k);
  jx_array *out = jx_array_alloc(dt, s, 0);
  if (out->poisoned) return out;
  if (dt == JX_F32)
    fused_draw_f32(k, d, jx_shape_numel(s), jx_array_data(out));
  else
    fused_draw_f64(k, d, jx_shape_numel(s), jx_array_data(out));
  return out;
}

jx_array *jx_random_uniform(jx_array *key, jx_dtype dt, jx_shape s, double lo, double hi) {
  const char *op = "jx_random_uniform";
  float_info fi;
  if (check_key(op, key) || check_float(op, dt, s, &fi)) return jx_poison();
  jx_array *fused = draw_fused(key, dt, s, &(fused_draw){.lo = lo, .hi = hi});
  if (fused) return fused;
  return uniform_between(key, dt, &fi, s, jx_full(dt, s, lo), jx_full(dt, s, hi));
}

jx_array *jx_random_normal(jx_array *key, jx_dtype dt, jx_shape s) {
  const char *op = "jx_random_normal";
  float_info fi;
  if (check_key(op, key) || check_float(op, dt, s, &fi)) return jx_poison();
  jx_array *fused = draw_fused(key, dt, s, &(fused_draw){.lo = fi.below_one, .hi = 1, .normal = 1});
  if (fused) return fused;
  jx_array *u = uniform_between(key, dt, &fi, s, jx_full(dt, s, fi.below_one), jx_full(dt, s, 1));
  return bind2(&jx_prim_mul, jx_full(dt, s, M_SQRT2), bind1(&jx_prim_erf_inv, u));
}

/* erf in f32 as XLA's CPU kernels compute it (a rational function of x^2
 * with explicit fused multiply-adds, +-1 from |x| >= 3.8325), which is not
 * always the correctly rounded erf that jx_erf gives. */
static float xla_erff(float x) {
  if (fabsf(x) >= 0x1.ea8f96p+1f) return copysignf(1.0f, x);
  static const float num[5] = {0x1.e05aa2p-13f, 0x1.bebb44p-9f, 0x1.a16dd6p-5f, 0x1.7b4e80p-3f,
                               0x1.20dd74p+0f};
  static const float den[7] = {-0x1.fa720cp-24f,
                               0x1.8b11bep-16f,
                               0x1.0ada50p-10f,
                               0x1.cd0fa8p-7f,
                               0x1.c69842p-4f,
                               0x1.fd6894p-2f,
                               1.0f};
  float x2 = x * x, p = fmaf(x2, num[0], num[1]), q = fmaf(x2, den[0], den[1]);
  for (int i = 2; i < 5; i++) p = fmaf(x2, p, num[i]);
  for (int i = 2; i < 7; i++) q = fmaf(x2, q, den[i]);
  return x * p / q;
}

/* v rounded to dt, as the host value of a dt scalar */
static double round_to(jx_dtype dt, double v) {
  unsigned char buf[8];
  jx_store_f64(buf, dt, 0, v);
  return jx_load_f64(buf, dt, 0);
}

/* erf(bound / sqrt(2)) in dt, as JAX's kernel computes it from the bound:
 * f32 (f16 and bf16 widened to it, each result rounded back) with XLA's erf,
 * f64 with libm's. */
static double erf_of_bound(jx_dtype dt, double bound) {
  double b = round_to(dt, bound), sqrt2 = round_to(dt, M_SQRT2);
  if (dt == JX_F64) return erf(b / sqrt2);
  return round_to(dt, xla_erff((float)round_to(dt, (float)b / (float)sqrt2)));
}

/* x with its subnormal values made 0: XLA's CPU kernels run with
 * flush-to-zero, so the bound just above 0 that JAX clips to is 0. */
static jx_array *flush_subnormal(jx_array *x, jx_dtype dt, jx_shape s, double tiny) {
  jx_array *small = bind2(&jx_prim_lt, bind1(&jx_prim_abs, x), jx_full(dt, s, tiny));
  return jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){small, x, jx_zeros(dt, s)}, NULL);
}

/* The host value of flush_subnormal(nextafter(bound, toward)) in dt (f32
 * or f64): the end of the open interval the fused draw clips into. */
static double open_bound(jx_dtype dt, double bound, double toward, double tiny) {
  double x = dt == JX_F32 ? nextafterf((float)bound, (float)toward) : nextafter(bound, toward);
  return fabs(x) < tiny ? 0 : x;
}

jx_array *jx_random_truncated_normal(jx_array *key, jx_dtype dt, jx_shape s, double lo, double hi) {
  const char *op = "jx_random_truncated_normal";
  float_info fi;
  if (check_key(op, key) || check_float(op, dt, s, &fi)) return jx_poison();
  if (isnan(lo) || isnan(hi)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the bounds are %g and %g; they must not be NaN", op,
                 lo, hi);
    return jx_poison();
  }
  jx_array *fused = draw_fused(key, dt, s,
                               &(fused_draw){.lo = erf_of_bound(dt, lo),
                                             .hi = erf_of_bound(dt, hi),
                                             .normal = 1,
                                             .clip = 1,
                                             .above = open_bound(dt, lo, INFINITY, fi.tiny),
                                             .below = open_bound(dt, hi, -INFINITY, fi.tiny)});
  if (fused) return fused;
  jx_array *sqrt2 = jx_full(dt, s, M_SQRT2);
  jx_array *lower = jx_full(dt, s, lo), *upper = jx_full(dt, s, hi);
  jx_array *a = jx_full(dt, s, erf_of_bound(dt, lo)), *b = jx_full(dt, s, erf_of_bound(dt, hi));
  jx_array *u = uniform_between(key, dt, &fi, s, a, b);
  jx_array *out = bind2(&jx_prim_mul, sqrt2, bind1(&jx_prim_erf_inv, u));
  /* rounding (or drawing exactly a) may land on a bound: clip into the open
   * interval, as jnp.clip(out, nextafter(lo, inf), nextafter(hi, -inf)) */
  jx_array *above = bind2(&jx_prim_nextafter, lower, jx_full(dt, s, INFINITY));
  jx_array *below = bind2(&jx_prim_nextafter, upper, jx_full(dt, s, -INFINITY));
  above = flush_subnormal(above, dt, s, fi.tiny);
  below = flush_subnormal(below, dt, s, fi.tiny);
  return bind2(&jx_prim_min, below, bind2(&jx_prim_max, above, out));
}

jx_array *jx_random_bernoulli(jx_array *key, double p, jx_shape s) {
  const char *op = "jx_random_bernoulli";
  float_info fi;
  /* JAX draws uniforms of p's dtype: a Python float is f32, f64 under x64 */
  jx_dtype dt = jx_dtype_canonical(JX_F64);
  if (check_key(op, key) || check_float(op, dt, s, &fi)) return jx_poison();
  if (!(p >= 0 && p <= 1)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: p is %g but must be in [0, 1]", op, p);
    return jx_poison();
  }
  jx_array *u = uniform_between(key, dt, &fi, s, jx_zeros(dt, s), jx_ones(dt, s));
  return bind2(&jx_prim_lt, u, jx_full(dt, s, p));
}

jx_array *jx_random_categorical(jx_array *key, jx_array *logits, int axis) {
  const char *op = "jx_random_categorical";
  if (check_key(op, key) || jx_check_inputs(op, 1, &logits)) return jx_poison();
  char a[JX_AVAL_STR_CAP];
  float_info fi;
  jx_dtype dt = logits->dtype;
  jx_shape s = logits->shape;
  if (!float_info_of(dt, &fi)) {
    jx_error_set(JX_ERR_DTYPE, "%s: logits are %s but must have a floating dtype", op,
                 jx_aval_str(dt, s, a));
    return jx_poison();
  }
  if (s.rank == 0) {
    jx_error_set(JX_ERR_SHAPE, "%s: logits are %s but need at least one axis", op,
                 jx_aval_str(dt, s, a));
    return jx_poison();
  }
  int ax = jx_normalize_axis(axis, s.rank, op);
  if (ax < 0) return jx_poison();
  if (s.dims[ax] == 0) {
    jx_error_set(JX_ERR_SHAPE, "%s: logits %s have no categories along axis %d", op,
                 jx_aval_str(dt, s, a), axis);
    return jx_poison();
  }
  /* Gumbel noise -log(-log(u)), u uniform in [tiny, 1) of the logits' dtype */
  jx_array *u = uniform_between(key, dt, &fi, s, jx_full(dt, s, fi.tiny), jx_ones(dt, s));
  jx_array *g =
      bind1(&jx_prim_neg, bind1(&jx_prim_log, bind1(&jx_prim_neg, bind1(&jx_prim_log, u))));
  jx_params p = JX_PARAMS_INIT; /* first maximum wins, as jnp.argmax */
  p.i[0] = ax;
  p.dtype = jx_default_int();
  return jx_bind1(&jx_prim_argmax, 1, (jx_array *[]){bind2(&jx_prim_add, g, logits)}, &p);
}

jx_array *jx_random_permutation(jx_array *key, int64_t n) {
  const char *op = "jx_random_permutation";
  if (check_key(op, key)) return jx_poison();
  if (n < 0 || n > INT32_MAX) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: n is %lld but must be in [0, 2^31 - 1]", op,
                 (long long)n);
    return jx_poison();
  }
  /* Sorting by random 32-bit keys is a uniform shuffle once no two elements
   * share their string of keys; JAX's static round count (exponent 3, as in
   * TensorFlow's random_ops.cc) makes that likely enough. */
  int rounds = (int)ceil(3 * log((double)(n > 1 ? n : 1)) / log(4294967295.0));
  jx_array *x = jx_arange(JX_I32, 0, (double)n, 1);
  for (int r = 0; r < rounds; r++) {
    jx_array *keys = jx_random_split(key, 2);
    key = jx_reshape(jx_slice(keys, JX_SHAPE(0, 0), JX_SHAPE(1, 2), JX_SHAPE()), JX_SHAPE(2));
    jx_array *sub =
        jx_reshape(jx_slice(keys, JX_SHAPE(1, 0), JX_SHAPE(2, 2), JX_SHAPE()), JX_SHAPE(2));
    jx_array *sorted[2];
    if (jx_check_inputs(op, 1, &sub) ||
        jx_sort_multi(2, (jx_array *[]){bits_of(sub, 32, JX_SHAPE(n)), x}, 0, 1, sorted))
      return jx_poison();
    x = sorted[1];
  }
  return jx_default_int() == JX_I32 ? x : convert(x, jx_default_int());
}
