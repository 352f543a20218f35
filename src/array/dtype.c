#include "dtype.h"

#include <complex.h>
#include <pthread.h>
#include <stdint.h>

#include "../base/env.h"

static const char *const names[JX_NUM_DTYPES] = {"bool", "i8",  "i16", "i32", "i64",
                                                 "u8",   "u16", "u32", "u64", "f16",
                                                 "bf16", "f32", "f64", "c64", "c128"};
static const size_t sizes[JX_NUM_DTYPES] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};

const char *jx_dtype_name(jx_dtype dt) { return jx_dtype_valid(dt) ? names[dt] : "?"; }
size_t jx_dtype_size(jx_dtype dt) { return jx_dtype_valid(dt) ? sizes[dt] : 0; }
int jx_dtype_bits(jx_dtype dt) { return (int)(8 * jx_dtype_size(dt)); }

jx_kind jx_dtype_kind(jx_dtype dt) {
  switch (dt) {
  case JX_BOOL: return JX_KIND_BOOL;
  case JX_I8:
  case JX_I16:
  case JX_I32:
  case JX_I64: return JX_KIND_INT;
  case JX_U8:
  case JX_U16:
  case JX_U32:
  case JX_U64: return JX_KIND_UINT;
  case JX_C64:
  case JX_C128: return JX_KIND_COMPLEX;
  default: return JX_KIND_FLOAT;
  }
}

/* ---- promotion: JAX's lattice ----
 * Nodes are the 15 dtypes plus the weak kinds int*, float* and complex*.
 * Each dtype's set of lower-or-equal nodes is precomputed as a bit mask; the
 * join of two nodes is the unique least node above both. */
enum { N_WEAK_INT = JX_NUM_DTYPES, N_WEAK_FLOAT, N_WEAK_COMPLEX, N_NODES };

static const int edges[N_NODES][3] = {
    [JX_BOOL] = {N_WEAK_INT, -1, -1},
    [N_WEAK_INT] = {JX_U8, JX_I8, -1},
    [JX_U8] = {JX_I16, JX_U16, -1},
    [JX_U16] = {JX_I32, JX_U32, -1},
    [JX_U32] = {JX_I64, JX_U64, -1},
    [JX_U64] = {N_WEAK_FLOAT, -1, -1},
    [JX_I8] = {JX_I16, -1, -1},
    [JX_I16] = {JX_I32, -1, -1},
    [JX_I32] = {JX_I64, -1, -1},
    [JX_I64] = {N_WEAK_FLOAT, -1, -1},
    [N_WEAK_FLOAT] = {JX_BF16, JX_F16, N_WEAK_COMPLEX},
    [JX_BF16] = {JX_F32, -1, -1},
    [JX_F16] = {JX_F32, -1, -1},
    [JX_F32] = {JX_F64, JX_C64, -1},
    [JX_F64] = {JX_C128, -1, -1},
    [N_WEAK_COMPLEX] = {JX_C64, -1, -1},
    [JX_C64] = {JX_C128, -1, -1},
    [JX_C128] = {-1, -1, -1},
};

static unsigned upper[N_NODES]; /* bit j set: node j is >= node i */
static pthread_once_t upper_once = PTHREAD_ONCE_INIT;

static unsigned reach(int n) {
  unsigned m = 1u << n;
  for (int k = 0; k < 3 && edges[n][k] >= 0; k++) m |= reach(edges[n][k]);
  return m;
}

static void init_upper(void) {
  for (int i = 0; i < N_NODES; i++) upper[i] = reach(i);
}

static int join(int a, int b) {
  pthread_once(&upper_once, init_upper); /* any thread may promote first */
  unsigned common = upper[a] & upper[b];
  for (int c = 0; c < N_NODES; c++)
    if ((common >> c) & 1u) {
      /* the least element: every other common node is above c */
      if ((upper[c] & common) == common) return c;
    }
  return JX_C128;
}

static int node_of(jx_dtype dt, int weak) {
  if (!weak) return dt;
  switch (jx_dtype_kind(dt)) {
  case JX_KIND_BOOL: return JX_BOOL;
  case JX_KIND_FLOAT: return N_WEAK_FLOAT;
  case JX_KIND_COMPLEX: return N_WEAK_COMPLEX;
  default: return N_WEAK_INT;
  }
}

/* ---- the x32 / x64 mode ----
 * -1 until the first question, which reads JX_ENABLE_X64 unless
 * jx_config_enable_x64 has set it first. Racing first readers store the same
 * value. */
static _Atomic int x64_mode = -1;

int jx_x64_enabled(void) {
  int m = x64_mode;
  if (m < 0) {
    m = jx_env_flag("JX_ENABLE_X64");
    x64_mode = m;
  }
  return m;
}

void jx_config_enable_x64(int enable) { x64_mode = enable != 0; }

jx_dtype jx_dtype_canonical(jx_dtype dt) {
  if (jx_x64_enabled()) return dt;
  switch (dt) {
  case JX_I64: return JX_I32;
  case JX_U64: return JX_U32;
  case JX_F64: return JX_F32;
  case JX_C128: return JX_C64;
  default: return dt;
  }
}

/* The dtypes the default mode narrows: i64, u64, f64 and c128. */
static int is_x64_dtype(jx_dtype dt) {
  return dt == JX_I64 || dt == JX_U64 || dt == JX_F64 || dt == JX_C128;
}

jx_dtype jx_default_int(void) { return jx_x64_enabled() ? JX_I64 : JX_I32; }

static jx_dtype promote_lattice(jx_dtype a, int a_weak, jx_dtype b, int b_weak, int *out_weak) {
  int na = node_of(a, a_weak), nb = node_of(b, b_weak);
  int j = join(na, nb);
  if (j < JX_NUM_DTYPES) {
    if (out_weak) *out_weak = 0;
    /* bool joined with bool is bool; weakness of a weak bool is kept */
    if (j == JX_BOOL && out_weak) *out_weak = a_weak && b_weak;
    return (jx_dtype)j;
  }
  /* a weak kind won: it takes the dtype of the weak operand of that kind */
  if (out_weak) *out_weak = 1;
  jx_kind want = j == N_WEAK_COMPLEX ? JX_KIND_COMPLEX
                 : j == N_WEAK_FLOAT ? JX_KIND_FLOAT
                                     : JX_KIND_INT;
  if (a_weak && jx_dtype_kind(a) == want && b_weak && jx_dtype_kind(b) == want) {
    int both = join(a, b); /* two weak values: the wider of their dtypes */
    return both < JX_NUM_DTYPES ? (jx_dtype)both : JX_C128;
  }
  if (a_weak && jx_dtype_kind(a) == want) return a;
  if (b_weak && jx_dtype_kind(b) == want) return b;
  /* reached from strong integers alone (u64 with i64): f64, as NumPy */
  if (out_weak) *out_weak = 0;
  return want == JX_KIND_FLOAT ? JX_F64 : JX_I64;
}

/* The default mode keeps a 64-bit result only where the operands ask for
 * it: a strong 64-bit operand, or weak 64-bit scalars alone (jx_scalar was
 * told the dtype). Anything else is what JAX's default mode canonicalizes
 * to 32 bits: i32 + u32, an integer array with a weak float scalar. */
jx_dtype jx_promote_weak(jx_dtype a, int a_weak, jx_dtype b, int b_weak, int *out_weak) {
  jx_dtype r = promote_lattice(a, a_weak, b, b_weak, out_weak);
  int wide_a = is_x64_dtype(a), wide_b = is_x64_dtype(b);
  int asked = (!a_weak && wide_a) || (!b_weak && wide_b) || (a_weak && b_weak && wide_a && wide_b);
  return asked ? r : jx_dtype_canonical(r);
}

/* JAX's promote_types: the lattice alone, the same in both modes. */
jx_dtype jx_promote_types(jx_dtype a, jx_dtype b) { return promote_lattice(a, 0, b, 0, NULL); }

/* JAX's rule: integers of up to 32 bits and bool compute in f32, 64-bit
 * integers in f64 (jnp.sin(int32) is f32 even with 64-bit types enabled);
 * floats and complex stay. */
jx_dtype jx_to_inexact(jx_dtype dt) {
  if (jx_is_inexact(dt)) return dt;
  return (dt == JX_I64 || dt == JX_U64) ? JX_F64 : JX_F32;
}

/* ---- 16-bit floats ---- */
static inline uint32_t f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
static inline float bits_f32(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}
static inline uint64_t f64_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, 8);
  return u;
}

uint16_t jx_f32_to_bf16(float x) { return jx_f32_to_bf16_inline(x); }
float jx_bf16_to_f32(uint16_t x) { return jx_bf16_to_f32_inline(x); }

uint16_t jx_f64_to_bf16(double x) {
  uint64_t u = f64_bits(x);
  uint16_t sign = (uint16_t)((u >> 48) & 0x8000u);
  if (x != x) return (uint16_t)(sign | 0x7fc0u);
  /* round to a float with 8 significant bits once, then the conversion is exact */
  double ax = fabs(x);
  if (ax == 0) return sign;
  int e;
  frexp(ax, &e);
  int emin = -125; /* bf16 has f32's exponent range; subnormals scale */
  int q = (e < emin ? emin : e) - 8;
  double r = nearbyint(ldexp(ax, -q)); /* default rounding mode: to nearest even */
  double v = ldexp(r, q);
  uint16_t h = jx_f32_to_bf16((float)v); /* exact unless it overflows to inf */
  return (uint16_t)(sign | (h & 0x7fffu));
}

uint16_t jx_f32_to_f16(float x) {
  uint32_t u = f32_bits(x);
  /* NaN: quiet, with the top payload bits kept, as XLA (vcvtps2ph) does */
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu));
  return jx_f64_to_f16((double)x); /* exact widening, then one rounding */
}

uint16_t jx_f64_to_f16(double x) {
  uint64_t u = f64_bits(x);
  uint16_t sign = (uint16_t)((u >> 48) & 0x8000u);
  if (x != x) return (uint16_t)(sign | 0x7e00u);
  double ax = fabs(x);
  if (isinf(ax)) return (uint16_t)(sign | 0x7c00u);
  if (ax == 0) return sign;
  int e;
  frexp(ax, &e);                    /* ax = m * 2^e, m in [0.5, 1) */
  int q = (e < -13 ? -13 : e) - 11; /* 11 significant bits; subnormals step 2^-24 */
  double r = nearbyint(ldexp(ax, -q));
  double v = ldexp(r, q);
  if (v >= 65520.0 || v > 65504.0) return (uint16_t)(sign | 0x7c00u);
  if (v < ldexp(1, -14)) return (uint16_t)(sign | (uint16_t)ldexp(v, 24)); /* subnormal */
  int ve;
  double vm = frexp(v, &ve); /* v = vm * 2^ve */
  uint16_t exp16 = (uint16_t)(ve - 1 + 15);
  uint16_t mant = (uint16_t)(ldexp(vm, 11) - 1024.0);
  return (uint16_t)(sign | (exp16 << 10) | mant);
}

float jx_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) /* inf, or NaN made quiet (as XLA does) */
    return bits_f32(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
  if (e == 0) {
    float v = ldexpf((float)m, -24);
    return sign ? -v : v;
  }
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* ---- element access ---- */
double jx_load_f64(const void *base, jx_dtype dt, int64_t i) {
  switch (dt) {
  case JX_BOOL: return ((const uint8_t *)base)[i] != 0;
  case JX_I8: return ((const int8_t *)base)[i];
  case JX_I16: return ((const int16_t *)base)[i];
  case JX_I32: return ((const int32_t *)base)[i];
  case JX_I64: return (double)((const int64_t *)base)[i];
  case JX_U8: return ((const uint8_t *)base)[i];
  case JX_U16: return ((const uint16_t *)base)[i];
  case JX_U32: return ((const uint32_t *)base)[i];
  case JX_U64: return (double)((const uint64_t *)base)[i];
  case JX_F16: return jx_f16_to_f32(((const uint16_t *)base)[i]);
  case JX_BF16: return jx_bf16_to_f32(((const uint16_t *)base)[i]);
  case JX_F32: return ((const float *)base)[i];
  case JX_F64: return ((const double *)base)[i];
  case JX_C64: return ((const float *)base)[2 * i];
  case JX_C128: return ((const double *)base)[2 * i];
  }
  return 0;
}

double _Complex jx_load_c128(const void *base, jx_dtype dt, int64_t i) {
  switch (dt) {
  case JX_C64: return ((const float _Complex *)base)[i];
  case JX_C128: return ((const double _Complex *)base)[i];
  default: return jx_load_f64(base, dt, i); /* imaginary part 0 */
  }
}

void jx_store_c128(void *base, jx_dtype dt, int64_t i, double _Complex v) {
  switch (dt) {
  case JX_C64: ((float _Complex *)base)[i] = (float _Complex)v; break;
  case JX_C128: ((double _Complex *)base)[i] = v; break;
  default: jx_store_f64(base, dt, i, creal(v)); break;
  }
}

/* float -> integer: truncate toward zero, saturate at the type's range, NaN -> 0
 * (XLA's convert semantics). */
static int64_t sat_i64(double v, int bits) {
  if (v != v) return 0;
  double hi = ldexp(1, bits - 1), lo = -hi;
  if (v >= hi) return (int64_t)(bits == 64 ? INT64_MAX : (int64_t)hi - 1);
  if (v <= lo) return bits == 64 ? INT64_MIN : (int64_t)lo;
  return (int64_t)v;
}
static uint64_t sat_u64(double v, int bits) {
  if (v != v || v <= 0) return 0;
  double hi = ldexp(1, bits);
  if (v >= hi) return bits == 64 ? UINT64_MAX : (uint64_t)hi - 1;
  return (uint64_t)v;
}

void jx_store_f64(void *base, jx_dtype dt, int64_t i, double v) {
  switch (dt) {
  case JX_BOOL: ((uint8_t *)base)[i] = v != 0; break;
  case JX_I8: ((int8_t *)base)[i] = (int8_t)sat_i64(v, 8); break;
  case JX_I16: ((int16_t *)base)[i] = (int16_t)sat_i64(v, 16); break;
  case JX_I32: ((int32_t *)base)[i] = (int32_t)sat_i64(v, 32); break;
  case JX_I64: ((int64_t *)base)[i] = sat_i64(v, 64); break;
  case JX_U8: ((uint8_t *)base)[i] = (uint8_t)sat_u64(v, 8); break;
  case JX_U16: ((uint16_t *)base)[i] = (uint16_t)sat_u64(v, 16); break;
  case JX_U32: ((uint32_t *)base)[i] = (uint32_t)sat_u64(v, 32); break;
  case JX_U64: ((uint64_t *)base)[i] = sat_u64(v, 64); break;
  case JX_F16: ((uint16_t *)base)[i] = jx_f64_to_f16(v); break;
  case JX_BF16: ((uint16_t *)base)[i] = jx_f64_to_bf16(v); break;
  case JX_F32: ((float *)base)[i] = (float)v; break;
  case JX_F64: ((double *)base)[i] = v; break;
  case JX_C64: ((float *)base)[2 * i] = (float)v, ((float *)base)[2 * i + 1] = 0; break;
  case JX_C128: ((double *)base)[2 * i] = v, ((double *)base)[2 * i + 1] = 0; break;
  }
}

int64_t jx_load_i64(const void *base, jx_dtype dt, int64_t i) {
  switch (dt) {
  case JX_BOOL: return ((const uint8_t *)base)[i] != 0;
  case JX_I8: return ((const int8_t *)base)[i];
  case JX_I16: return ((const int16_t *)base)[i];
  case JX_I32: return ((const int32_t *)base)[i];
  case JX_I64: return ((const int64_t *)base)[i];
  case JX_U8: return ((const uint8_t *)base)[i];
  case JX_U16: return ((const uint16_t *)base)[i];
  case JX_U32: return ((const uint32_t *)base)[i];
  case JX_U64: return (int64_t)((const uint64_t *)base)[i];
  default: return sat_i64(jx_load_f64(base, dt, i), 64);
  }
}

uint64_t jx_load_u64(const void *base, jx_dtype dt, int64_t i) {
  if (jx_is_inexact(dt)) return sat_u64(jx_load_f64(base, dt, i), 64);
  return (uint64_t)jx_load_i64(base, dt, i);
}

void jx_store_i64(void *base, jx_dtype dt, int64_t i, int64_t v) {
  switch (dt) {
  case JX_BOOL: ((uint8_t *)base)[i] = v != 0; break;
  case JX_I8:
  case JX_U8: ((uint8_t *)base)[i] = (uint8_t)v; break;
  case JX_I16:
  case JX_U16: ((uint16_t *)base)[i] = (uint16_t)v; break;
  case JX_I32:
  case JX_U32: ((uint32_t *)base)[i] = (uint32_t)v; break;
  case JX_I64:
  case JX_U64: ((uint64_t *)base)[i] = (uint64_t)v; break;
  case JX_F64: ((double *)base)[i] = (double)v; break;
  /* Round v to f32 once (via double would round twice: 2^60 + 2^36 + 1), then
   * to 16 bits as XLA does: exact below 2^24, and f16 overflows long before. */
  case JX_F32: ((float *)base)[i] = (float)v; break;
  case JX_F16: ((uint16_t *)base)[i] = jx_f32_to_f16((float)v); break;
  case JX_BF16: ((uint16_t *)base)[i] = jx_f32_to_bf16((float)v); break;
  case JX_C64: ((float *)base)[2 * i] = (float)v, ((float *)base)[2 * i + 1] = 0; break;
  case JX_C128: ((double *)base)[2 * i] = (double)v, ((double *)base)[2 * i + 1] = 0; break;
  }
}
