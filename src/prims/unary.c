/* Elementwise unary primitives: one operand, same shape; the result keeps the
 * dtype and weakness except is_finite (bool).
 *
 * Dtypes are lax's: floor, ceil, round and the transcendental functions take
 * floats only (the NumPy layer promotes integers); neg, abs, sign and
 * integer_pow take ints and floats; not takes bool and ints (bitwise);
 * population_count ints; stop_gradient anything. Integer neg and abs wrap
 * (abs(INT_MIN) = INT_MIN), as XLA. Float semantics are XLA's: sign(±0) = ±0
 * and sign(NaN) = NaN; erf_inv(±1) = ±inf and NaN outside [-1, 1]; lgamma is
 * +inf at the poles; digamma is NaN at 0 and the negative integers (JAX's
 * values, where SciPy gives -inf at 0).
 *
 * f32 and f64 run typed loops with the op chosen outside the loop (these are
 * the kernels eager mode runs); f16 and bf16 compute in f32 and round once,
 * as XLA does on CPUs. f32 erf_inv (f16 and bf16 too) is XLA's own f32
 * evaluation, bit for bit (see erf_inv_f); f64 erf_inv and digamma are
 * computed in double, digamma's f32 results rounded once.
 * exp, exp2, expm1, log, log1p, tanh, logistic, sin, cos and erf take their
 * f32 values from fastmath.h, the same code the jit's kernels embed, so
 * eager and jit agree bit for bit (f64 uses libm).
 *
 * Complex operands (c64, c128; the rows complex.c lists: neg, abs, sign,
 * exp, exp2, expm1, log, log1p, sqrt, rsqrt, tanh, sin, cos, tan, the inverse
 * trigonometric and the hyperbolic functions, integer_pow, stop_gradient)
 * run C99's <complex.h> functions, c64 in float _Complex; abs gives the
 * parts' dtype (hypot of the parts), sign is z / |z| (0 at 0), as XLA.
 *
 * polygamma (m = i0 >= 1) is an extra row, floats only, for digamma's
 * derivative. Transformation rules are in unary_rules.c; sign, floor, ceil,
 * round, is_finite, not, population_count and stop_gradient have zero
 * derivative (jx_jvp_zero), and every row batches elementwise. */
#include <complex.h>

#include "../base/error.h"
#include "complex_special.h"
#include "elementwise.h"
#include "fastmath.h"
#include "prims.h"
#include "rules.h"
#include "unary_rules.h"
#include "vloop.h"

typedef enum {
  U_NEG,
  U_ABS,
  U_SIGN,
  U_FLOOR,
  U_CEIL,
  U_ROUND_AWAY,
  U_ROUND_EVEN,
  U_EXP,
  U_EXP2,
  U_EXPM1,
  U_LOG,
  U_LOG1P,
  U_SQRT,
  U_RSQRT,
  U_CBRT,
  U_TANH,
  U_LOGISTIC,
  U_SIN,
  U_COS,
  U_TAN,
  U_ASIN,
  U_ACOS,
  U_ATAN,
  U_SINH,
  U_COSH,
  U_ASINH,
  U_ACOSH,
  U_ATANH,
  U_ERF,
  U_ERF_INV,
  U_LGAMMA,
  U_DIGAMMA,
  U_IS_FINITE,
  U_NOT,
  U_INTEGER_POW,
  U_POPCOUNT,
  U_STOP_GRADIENT,
  U_POLYGAMMA
} unop;

/* ---- special functions in double ---- */

/* erf^-1: M. Giles' approximation ("Approximating the erfinv function", as
 * XLA uses for f32) refined by Newton steps on erf, or on erfc above 0.5 so
 * that the tail keeps its relative accuracy (1 - |y| is exact there). */
static double erf_inv_d(double y) {
  if (y != y || y < -1 || y > 1) return NAN;
  if (y == 1 || y == -1) return y * INFINITY;
  if (y == 0) return y;
  double ay = fabs(y), w = -log((1 - ay) * (1 + ay)), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * ay, tail = 1 - ay;
  for (int k = 0; k < 20; k++) {
    double d = 1.1283791670955126 * exp(-x * x); /* erf'(x) = 2/sqrt(pi) e^-x^2 */
    /* below 0.5 solve erf(x) = |y|; above, log erfc(x) = log(1 - |y|), which
     * is nearly quadratic in the tail where erfc itself is too steep */
    double dx = ay <= 0.5 ? (erf(x) - ay) / d : log(erfc(x) / tail) * erfc(x) / -d;
    x -= dx;
    if (fabs(dx) <= 2e-16 * fabs(x)) break;
  }
  return y < 0 ? -x : x;
}

/* erf^-1 in f32 exactly as XLA's CPU kernels compute it, so that
 * jax.random.normal's f32 bits come out the same: Giles' single-precision
 * polynomial (XLA's ErfInv32) in w = -log1p(-x^2), with log1p itself XLA's
 * f32 one (Cephes' rational function below sqrt(2) - 1, else XLA's logf of
 * 1 + a), and every multiply-add that LLVM contracts there (XLA's CPU
 * compiler allows it) written as fmaf. Those contractions are what an x86-64
 * CPU with FMA3 (or any AArch64) executes; JAX on a CPU without FMA rounds
 * them twice and gives other bits. */
static float xla_log1pf(float a) {
  float z = a * a, zero = a * 0.0f; /* zero: keeps NaN and inf as XLA's a * 0 */
  float num = zero + 0x1.7bc096p-15f, den = zero + 1.0f;
  static const float nc[6] = {0x1.fe818ap-2f, 0x1.a509f4p+2f, 0x1.de9738p+4f,
                              0x1.e798ecp+5f, 0x1.c8e75ap+5f, 0x1.40a202p+4f};
  static const float dc[6] = {0x1.e2035ap+3f, 0x1.4c30b6p+6f, 0x1.bb865ap+7f,
                              0x1.351946p+8f, 0x1.b0db14p+7f, 0x1.e0f304p+5f};
  for (int i = 0; i < 6; i++) {
    num = fmaf(num, a, nc[i]);
    den = fmaf(den, a, dc[i]);
  }
  if (fabsf(a) < 0x1.a8279ap-2f) return a + fmaf(-0.5f, z, (a * z) * (num / den));
  /* log(v), v = 1 + a: v = 2^e m with m in [sqrt(1/2), sqrt(2)), then a
   * polynomial in m - 1 and e ln 2 in two parts */
  float v = a + 1.0f;
  if (v != v || v < 0) return NAN;
  if (v == 0) return -INFINITY;
  if (v == INFINITY) return v;
  float vm = v > 0x1p-126f ? v : 0x1p-126f;
  uint32_t bits;
  memcpy(&bits, &vm, 4);
  float e = (float)((int32_t)(bits >> 23) - 127) + 1.0f, m;
  bits = (bits & 0x807fffffu) | 0x3f000000u;
  memcpy(&m, &bits, 4);
  int small_m = m < 0x1.6a09e6p-1f;
  if (small_m) e -= 1.0f;
  float x = (m - 1.0f) + (small_m ? m : 0.0f);
  float x2 = x * x, x3 = x2 * x;
  float y1 = fmaf(fmaf(x, 0x1.204376p-4f, -0x1.d7a37p-4f), x, 0x1.de4a34p-4f);
  float y2 = fmaf(fmaf(x, -0x1.fcba9ep-4f, 0x1.23d37ep-3f), x, -0x1.555ca0p-3f);
  float y3 = fmaf(fmaf(x, 0x1.999d58p-3f, -0x1.fffff8p-3f), x, 0x1.555554p-2f);
  float y = fmaf(fmaf(y1, x3, y2), x3, y3);
  float r = fmaf(-0.5f, x2, x) + fmaf(y, x3, e * -0x1.bd0106p-13f);
  return fmaf(e, 0x1.63p-1f, r);
}

static float erf_inv_f(float x) {
  /* XLA's ErfInv32 coefficients, for w < 5 and w >= 5 */
  static const float lo[9] = {2.81022636e-08f,  3.43273939e-07f, -3.5233877e-06f,
                              -4.39150654e-06f, 0.00021858087f,  -0.00125372503f,
                              -0.00417768164f,  0.246640727f,    1.50140941f};
  static const float hi[9] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                              -0.00367342844f,  0.00573950773f,  -0.0076224613f,
                              0.00943887047f,   1.00167406f,     2.83297682f};
  float l = xla_log1pf(x * -x);
  int central = l > -5.0f; /* w = -l < 5 */
  const float *c = central ? lo : hi;
  float w = central ? -2.5f - l : sqrtf(-l) + -3.0f;
  float p = fmaf(c[0], w, c[1]);
  for (int i = 2; i < 9; i++) p = fmaf(w, p, c[i]);
  return x * (fabsf(x) == 1.0f ? INFINITY : p);
}

/* psi(x): reflection for negative x, the recurrence up to x >= 10, then the
 * asymptotic series (error below 1e-17 there). */
static double digamma_d(double x) {
  if (x != x || x == INFINITY) return x;
  if (x <= 0 && x == floor(x)) return NAN; /* poles, and -inf */
  double r = 0;
  if (x < 0) { /* psi(x) = psi(1 - x) - pi / tan(pi x); tan has period pi */
    r = -M_PI / tan(M_PI * (x - nearbyint(x)));
    x = 1 - x;
  }
  for (; x < 10; x += 1) r -= 1 / x;
  double f = 1 / (x * x);
  double t =
      f * (-1.0 / 12 +
           f * (1.0 / 120 +
                f * (-1.0 / 252 +
                     f * (1.0 / 240 + f * (-1.0 / 132 + f * (691.0 / 32760 + f * (-1.0 / 12)))))));
  return r + log(x) - 0.5 / x + t;
}

/* psi^(m)(x) = (-1)^(m+1) m! zeta(m + 1, x) for m >= 1: the Hurwitz zeta sum
 * term by term up to x >= 20 + m (negative x too, since m + 1 is an
 * integer), then the Euler-Maclaurin tail. +-inf at the poles (x a
 * non-positive integer), as JAX's zeta-based polygamma. */
double jx_polygamma_d(int m, double x) {
  if (m < 1) return digamma_d(x);
  if (x != x || x == -INFINITY) return NAN;
  double fact = 1, sgn = (m & 1) ? 1 : -1;
  for (int k = 2; k <= m; k++) fact *= k;
  if (x == INFINITY) return 0;
  if (x <= 0 && x == floor(x)) return sgn * INFINITY;
  if (x < -1e7) return NAN; /* the recurrence would take too long; no use case */
  double s = m + 1, z = 0;
  for (; x < 20 + m; x += 1) z += pow(x, -s);
  static const double b2j[] = {1.0 / 6,  -1.0 / 30,       1.0 / 42, -1.0 / 30,
                               5.0 / 66, -691.0 / 2730.0, 7.0 / 6,  -3617.0 / 510};
  double tail = pow(x, 1 - s) / (s - 1) + 0.5 * pow(x, -s);
  double poch = s, fac2j = 2, xp = pow(x, -s - 1); /* s(s+1)..(s+2j-2), (2j)!, x^(-s-2j+1) */
  for (int j = 1; j <= 8; j++) {
    tail += b2j[j - 1] / fac2j * poch * xp;
    poch *= (s + 2 * j - 1) * (s + 2 * j);
    fac2j *= (2.0 * j + 1) * (2.0 * j + 2);
    xp /= x * x;
  }
  return sgn * fact * (z + tail);
}

static double lgamma64(double x) {
  int sign;
  return lgamma_r(x, &sign); /* lgamma itself writes the global signgam */
}
static float lgamma32(float x) {
  int sign;
  return lgammaf_r(x, &sign);
}

/* ---- float loops ---- */
#define SIGN_OF(x) ((x) != (x) ? (x) : (x) > 0 ? 1 : (x) < 0 ? -1 : (x))

/* op, f32 expression, f64 expression, in x */
#define FLOAT_UNOPS(X)                                                                             \
  X(U_NEG, -x, -x)                                                                                 \
  X(U_ABS, fabsf(x), fabs(x))                                                                      \
  X(U_SIGN, SIGN_OF(x), SIGN_OF(x))                                                                \
  X(U_FLOOR, floorf(x), floor(x))                                                                  \
  X(U_CEIL, ceilf(x), ceil(x))                                                                     \
  X(U_ROUND_AWAY, roundf(x), round(x))                                                             \
  X(U_ROUND_EVEN, rintf(x), rint(x))                                                               \
  X(U_EXP, jx_expf(x), exp(x))                                                                     \
  X(U_EXP2, jx_exp2f(x), exp2(x))                                                                  \
  X(U_EXPM1, jx_expm1f(x), expm1(x))                                                               \
  X(U_LOG, jx_logf(x), log(x))                                                                     \
  X(U_LOG1P, jx_log1pf(x), log1p(x))                                                               \
  X(U_SQRT, sqrtf(x), sqrt(x))                                                                     \
  X(U_RSQRT, 1.0f / sqrtf(x), 1.0 / sqrt(x))                                                       \
  X(U_CBRT, cbrtf(x), cbrt(x))                                                                     \
  X(U_TANH, jx_tanhf(x), tanh(x))                                                                  \
  X(U_LOGISTIC, jx_logistic_f(x), x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)))        \
  X(U_SIN, jx_sinf(x), sin(x))                                                                     \
  X(U_COS, jx_cosf(x), cos(x))                                                                     \
  X(U_TAN, tanf(x), tan(x))                                                                        \
  X(U_ASIN, asinf(x), asin(x))                                                                     \
  X(U_ACOS, acosf(x), acos(x))                                                                     \
  X(U_ATAN, atanf(x), atan(x))                                                                     \
  X(U_SINH, sinhf(x), sinh(x))                                                                     \
  X(U_COSH, coshf(x), cosh(x))                                                                     \
  X(U_ASINH, asinhf(x), asinh(x))                                                                  \
  X(U_ACOSH, acoshf(x), acosh(x))                                                                  \
  X(U_ATANH, atanhf(x), atanh(x))                                                                  \
  X(U_ERF, jx_erff(x), erf(x))                                                                     \
  X(U_ERF_INV, erf_inv_f(x), erf_inv_d(x))                                                         \
  X(U_LGAMMA, lgamma32(x), lgamma64(x))                                                            \
  X(U_DIGAMMA, (float)digamma_d(x), digamma_d(x))                                                  \
  X(U_STOP_GRADIENT, x, x)

/* x**e by squaring in the order lax.integer_pow multiplies (acc * x), so
 * f32 and f64 results round exactly as JAX's; e < 0 takes the reciprocal. */
#define FLOAT_IPOW(T)                                                                              \
  static T ipow_##T(T x, int64_t e) {                                                              \
    int recip = e < 0;                                                                             \
    uint64_t m = recip ? (uint64_t)0 - (uint64_t)e : (uint64_t)e;                                  \
    T acc = 1;                                                                                     \
    int first = 1;                                                                                 \
    while (m) {                                                                                    \
      if (m & 1) {                                                                                 \
        acc = first ? x : acc * x;                                                                 \
        first = 0;                                                                                 \
      }                                                                                            \
      m >>= 1;                                                                                     \
      if (m) x = x * x;                                                                            \
    }                                                                                              \
    return recip ? (T)1 / acc : acc;                                                               \
  }
FLOAT_IPOW(float)
FLOAT_IPOW(double)

/* Chunked loops (vloop.h) over restrict operands, so that neg, abs, sign,
 * sqrt, rsqrt (sqrt needs -fno-math-errno, set for the library) and
 * is_finite vectorize; the others call libm per element either way. */
#define CASE_F32(OP, F, D)                                                                         \
  case OP:                                                                                         \
    JX_VLOOP(n, {                                                                                  \
      float x = in[i];                                                                             \
      o[i] = F;                                                                                    \
    });                                                                                            \
    break;
#define CASE_F64(OP, F, D)                                                                         \
  case OP:                                                                                         \
    JX_VLOOP(n, {                                                                                  \
      double x = in[i];                                                                            \
      o[i] = D;                                                                                    \
    });                                                                                            \
    break;

/* jx_tanhf is fused multiply-adds: one instruction each where the target
 * has FMA, a libm call each (5x slower) where the compiler may not assume
 * it, as for this library's baseline x86-64. So on x86-64 the loop has an
 * AVX2 + FMA copy too, taken when the CPU has them (a test, not an ifunc,
 * which ThreadSanitizer's runtime cannot resolve); fmaf rounds once either
 * way, so both give the jit's kernels' bits. */
#if defined(__x86_64__) && defined(__GNUC__)
#define TANH_FMA_COPY 1
__attribute__((target("avx2,fma"))) static void tanh_f32_fma(int64_t n, const float *restrict in,
                                                             float *restrict o) {
  JX_VLOOP(n, o[i] = jx_tanhf(in[i]));
}
#endif

static void tanh_f32(int64_t n, const float *restrict in, float *restrict o) {
#ifdef TANH_FMA_COPY
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    tanh_f32_fma(n, in, o);
    return;
  }
#endif
  JX_VLOOP(n, o[i] = jx_tanhf(in[i]));
}

static void loop_f32(unop op, int64_t e, int64_t n, const float *restrict in, float *restrict o) {
  if (op == U_TANH) {
    tanh_f32(n, in, o);
    return;
  }
  switch (op) {
    FLOAT_UNOPS(CASE_F32)
  case U_INTEGER_POW:
    for (int64_t i = 0; i < n; i++) o[i] = ipow_float(in[i], e);
    break;
  case U_POLYGAMMA:
    for (int64_t i = 0; i < n; i++) o[i] = (float)jx_polygamma_d((int)e, in[i]);
    break;
  default: break; /* the rules admit no other op for floats */
  }
}

static void loop_f64(unop op, int64_t e, int64_t n, const double *restrict in, double *restrict o) {
  switch (op) {
    FLOAT_UNOPS(CASE_F64)
  case U_INTEGER_POW:
    for (int64_t i = 0; i < n; i++) o[i] = ipow_double(in[i], e);
    break;
  case U_POLYGAMMA:
    for (int64_t i = 0; i < n; i++) o[i] = jx_polygamma_d((int)e, in[i]);
    break;
  default: break;
  }
}

/* f16 and bf16: widen a block to f32, run the f32 loop, round once. */
static void loop_half(unop op, int64_t e, int is_bf16, int64_t n, const uint16_t *in, uint16_t *o) {
  enum { BLOCK = 256 };
  float a[BLOCK], r[BLOCK];
  for (int64_t s = 0; s < n; s += BLOCK) {
    int64_t m = n - s < BLOCK ? n - s : BLOCK;
    for (int64_t j = 0; j < m; j++)
      a[j] = is_bf16 ? jx_bf16_to_f32(in[s + j]) : jx_f16_to_f32(in[s + j]);
    loop_f32(op, e, m, a, r);
    for (int64_t j = 0; j < m; j++) o[s + j] = is_bf16 ? jx_f32_to_bf16(r[j]) : jx_f32_to_f16(r[j]);
  }
}

/* ---- integers and bool, in 64 bits, wrapped to the width on store ---- */
static uint64_t int_ipow(uint64_t x, int64_t e) {
  uint64_t acc = 1;
  for (uint64_t m = (uint64_t)e; m; m >>= 1) {
    if (m & 1) acc *= x;
    x *= x;
  }
  return acc;
}

/* Typed integer loops for neg, abs, not and stop_gradient (wrapping in an
 * unsigned type at least as wide, truncated to T as jx_store_i64 does: the
 * generic loop's results bit for bit); 0: not covered. */
#define INT_UNARY(NAME, T, UT, ABS)                                                                \
  static int NAME(unop op, int64_t n, const T *restrict x, T *restrict o) {                        \
    switch (op) {                                                                                  \
    case U_NEG: JX_VLOOP(n, o[i] = (T)((UT)0 - (UT)x[i])); return 1;                               \
    case U_ABS: JX_VLOOP(n, o[i] = ABS); return 1;                                                 \
    case U_NOT: JX_VLOOP(n, o[i] = (T)~x[i]); return 1;                                            \
    case U_STOP_GRADIENT: JX_VLOOP(n, o[i] = x[i]); return 1;                                      \
    default: return 0;                                                                             \
    }                                                                                              \
  }
INT_UNARY(unary_i8, int8_t, unsigned, x[i] < 0 ? (int8_t)((unsigned)0 - (unsigned)x[i]) : x[i])
INT_UNARY(unary_i16, int16_t, unsigned, x[i] < 0 ? (int16_t)((unsigned)0 - (unsigned)x[i]) : x[i])
INT_UNARY(unary_i32, int32_t, unsigned, x[i] < 0 ? (int32_t)((unsigned)0 - (unsigned)x[i]) : x[i])
INT_UNARY(unary_i64, int64_t, uint64_t, x[i] < 0 ? (int64_t)((uint64_t)0 - (uint64_t)x[i]) : x[i])
INT_UNARY(unary_u8, uint8_t, unsigned, x[i])
INT_UNARY(unary_u16, uint16_t, unsigned, x[i])
INT_UNARY(unary_u32, uint32_t, unsigned, x[i])
INT_UNARY(unary_u64, uint64_t, uint64_t, x[i])

static int int_fast(unop op, jx_dtype dt, int64_t n, const void *x, void *o) {
  switch (dt) {
  case JX_I8: return unary_i8(op, n, x, o);
  case JX_I16: return unary_i16(op, n, x, o);
  case JX_I32: return unary_i32(op, n, x, o);
  case JX_I64: return unary_i64(op, n, x, o);
  case JX_U8: return unary_u8(op, n, x, o);
  case JX_U16: return unary_u16(op, n, x, o);
  case JX_U32: return unary_u32(op, n, x, o);
  case JX_U64: return unary_u64(op, n, x, o);
  default: return 0; /* bool: not is logical, not bitwise */
  }
}

static void loop_int(unop op, int64_t e, int64_t n, const jx_tensor *t, void *o) {
  jx_dtype dt = t->dtype;
  if (int_fast(op, dt, n, t->data, o)) return;
  int uns = jx_is_unsigned_int(dt), bits = jx_dtype_bits(dt);
  uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = jx_load_i64(t->data, dt, i);
    uint64_t u = (uint64_t)v, r;
    switch (op) {
    case U_NEG: r = (uint64_t)0 - u; break;
    case U_ABS: r = (uns || v >= 0) ? u : (uint64_t)0 - u; break;
    case U_SIGN: r = uns ? (u != 0) : (uint64_t)(int64_t)((v > 0) - (v < 0)); break;
    case U_NOT: r = dt == JX_BOOL ? (uint64_t)(v == 0) : ~u; break;
    case U_INTEGER_POW: r = int_ipow(u, e); break;
    case U_POPCOUNT: r = (uint64_t)__builtin_popcountll(u & mask); break;
    default: r = u; break; /* stop_gradient */
    }
    jx_store_i64(o, dt, i, (int64_t)r);
  }
}

/* ---- complex ----
 * C99's <complex.h> function of each row (F: "f" for c64, empty for c128);
 * exp2, expm1 and log1p, which C99 lacks, as XLA forms them
 * (complex_special.h, the text fused kernels compile too). */
JX_COMPLEX_SPECIAL(static, float _Complex, float, f)
JX_COMPLEX_SPECIAL(static, double _Complex, double, )

#define COMPLEX_LOOP(NAME, T, R, F)                                                                \
  static void NAME(unop op, int64_t e, int64_t n, const T *restrict in, void *restrict out) {      \
    T *restrict o = out;                                                                           \
    switch (op) {                                                                                  \
    case U_NEG: JX_VLOOP(n, o[i] = -in[i]); break;                                                 \
    case U_ABS: {                                                                                  \
      R *restrict r = out;                                                                         \
      for (int64_t i = 0; i < n; i++) r[i] = cabs##F(in[i]);                                       \
      break;                                                                                       \
    }                                                                                              \
    case U_SIGN:                                                                                   \
      for (int64_t i = 0; i < n; i++) {                                                            \
        R a = cabs##F(in[i]);                                                                      \
        o[i] = a == 0 ? (T)0 : in[i] / a;                                                          \
      }                                                                                            \
      break;                                                                                       \
    case U_RSQRT:                                                                                  \
      for (int64_t i = 0; i < n; i++) o[i] = (T)1 / csqrt##F(in[i]);                               \
      break;                                                                                       \
    case U_INTEGER_POW: {                                                                          \
      /* by squaring, in lax.integer_pow's order, as the float loops */                            \
      int recip = e < 0;                                                                           \
      uint64_t m0 = recip ? (uint64_t)0 - (uint64_t)e : (uint64_t)e;                               \
      for (int64_t i = 0; i < n; i++) {                                                            \
        T x = in[i], acc = 1;                                                                      \
        int first = 1;                                                                             \
        for (uint64_t m = m0; m; m >>= 1) {                                                        \
          if (m & 1) {                                                                             \
            acc = first ? x : acc * x;                                                             \
            first = 0;                                                                             \
          }                                                                                        \
          if (m >> 1) x = x * x;                                                                   \
        }                                                                                          \
        o[i] = recip ? (T)1 / acc : acc;                                                           \
      }                                                                                            \
      break;                                                                                       \
    }                                                                                              \
    case U_STOP_GRADIENT: JX_VLOOP(n, o[i] = in[i]); break;                                        \
    default: {                                                                                     \
      T(*f)                                                                                        \
      (T) = op == U_EXP     ? cexp##F                                                              \
            : op == U_EXP2  ? jx_cexp2##F                                                          \
            : op == U_EXPM1 ? jx_cexpm1##F                                                         \
            : op == U_LOG   ? clog##F                                                              \
            : op == U_LOG1P ? jx_clog1p##F                                                         \
            : op == U_SQRT  ? csqrt##F                                                             \
            : op == U_TANH  ? ctanh##F                                                             \
            : op == U_SIN   ? csin##F                                                              \
            : op == U_COS   ? ccos##F                                                              \
            : op == U_TAN   ? ctan##F                                                              \
            : op == U_ASIN  ? casin##F                                                             \
            : op == U_ACOS  ? cacos##F                                                             \
            : op == U_ATAN  ? catan##F                                                             \
            : op == U_SINH  ? csinh##F                                                             \
            : op == U_COSH  ? ccosh##F                                                             \
            : op == U_ASINH ? casinh##F                                                            \
            : op == U_ACOSH ? cacosh##F                                                            \
                            : catanh##F; /* complex.c lists no other row */                        \
      for (int64_t i = 0; i < n; i++) o[i] = f(in[i]);                                             \
    }                                                                                              \
    }                                                                                              \
  }
COMPLEX_LOOP(loop_c64, float _Complex, float, f)
COMPLEX_LOOP(loop_c128, double _Complex, double, )

static void unary_kernel(unop op, const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  int64_t n = jx_shape_numel(in->shape), e = p->i[0];
  jx_dtype dt = in->dtype;
  if (op == U_IS_FINITE) {
    uint8_t *o = out->data;
    if (dt == JX_F32)
      for (int64_t i = 0; i < n; i++) o[i] = (uint8_t)isfinite(((const float *)in->data)[i]);
    else
      for (int64_t i = 0; i < n; i++) o[i] = (uint8_t)isfinite(jx_load_f64(in->data, dt, i));
    return;
  }
  switch (dt) {
  case JX_F32: loop_f32(op, e, n, in->data, out->data); return;
  case JX_F64: loop_f64(op, e, n, in->data, out->data); return;
  case JX_C64: loop_c64(op, e, n, in->data, out->data); return;
  case JX_C128: loop_c128(op, e, n, in->data, out->data); return;
  case JX_F16:
  case JX_BF16: loop_half(op, e, dt == JX_BF16, n, in->data, out->data); return;
  default: loop_int(op, e, n, in, out->data); return;
  }
}

/* ---- rules ---- */
static jx_status infer_unary(const jx_rule_ctx *ctx, jx_accept acc, const jx_aval *in,
                             jx_aval *out) {
  return jx_infer_same(ctx->prim->name, acc, -1, 1, in, out);
}

/* Every row batches with the generic elementwise rule. */
#define UNARY_ROW(NAME, OP, ACCEPT, JVP, TRANSPOSE)                                                \
  static jx_status infer_##NAME(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {         \
    return infer_unary(ctx, ACCEPT, in, out);                                                      \
  }                                                                                                \
  static void eval_##NAME(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {           \
    unary_kernel(OP, ctx->params, in, out);                                                        \
  }                                                                                                \
  const jx_prim jx_prim_##NAME = {.name = #NAME,                                                   \
                                  .id = JX_PRIM_##NAME,                                            \
                                  .nin = 1,                                                        \
                                  .nout = 1,                                                       \
                                  .params = "",                                                    \
                                  .infer = infer_##NAME,                                           \
                                  .eval = eval_##NAME,                                             \
                                  .jvp = JVP,                                                      \
                                  .transpose = TRANSPOSE,                                          \
                                  .elementwise = 1};

UNARY_ROW(neg, U_NEG, JX_ACCEPT_NUMERIC, jx_jvp_linear_first, jx_transpose_neg)
UNARY_ROW(sign, U_SIGN, JX_ACCEPT_NUMERIC, jx_jvp_zero, NULL)
UNARY_ROW(floor, U_FLOOR, JX_ACCEPT_FLOAT, jx_jvp_zero, NULL)
UNARY_ROW(ceil, U_CEIL, JX_ACCEPT_FLOAT, jx_jvp_zero, NULL)
UNARY_ROW(exp, U_EXP, JX_ACCEPT_INEXACT, jx_jvp_exp, NULL)
UNARY_ROW(exp2, U_EXP2, JX_ACCEPT_INEXACT, jx_jvp_exp2, NULL)
UNARY_ROW(expm1, U_EXPM1, JX_ACCEPT_INEXACT, jx_jvp_expm1, NULL)
UNARY_ROW(log, U_LOG, JX_ACCEPT_INEXACT, jx_jvp_log, NULL)
UNARY_ROW(log1p, U_LOG1P, JX_ACCEPT_INEXACT, jx_jvp_log1p, NULL)
UNARY_ROW(sqrt, U_SQRT, JX_ACCEPT_INEXACT, jx_jvp_sqrt, NULL)
UNARY_ROW(rsqrt, U_RSQRT, JX_ACCEPT_INEXACT, jx_jvp_rsqrt, NULL)
UNARY_ROW(cbrt, U_CBRT, JX_ACCEPT_FLOAT, jx_jvp_cbrt, NULL)
UNARY_ROW(tanh, U_TANH, JX_ACCEPT_INEXACT, jx_jvp_tanh, NULL)
UNARY_ROW(logistic, U_LOGISTIC, JX_ACCEPT_FLOAT, jx_jvp_logistic, NULL)
UNARY_ROW(sin, U_SIN, JX_ACCEPT_INEXACT, jx_jvp_sin, NULL)
UNARY_ROW(cos, U_COS, JX_ACCEPT_INEXACT, jx_jvp_cos, NULL)
UNARY_ROW(tan, U_TAN, JX_ACCEPT_INEXACT, jx_jvp_tan, NULL)
UNARY_ROW(asin, U_ASIN, JX_ACCEPT_INEXACT, jx_jvp_asin, NULL)
UNARY_ROW(acos, U_ACOS, JX_ACCEPT_INEXACT, jx_jvp_acos, NULL)
UNARY_ROW(atan, U_ATAN, JX_ACCEPT_INEXACT, jx_jvp_atan, NULL)
UNARY_ROW(sinh, U_SINH, JX_ACCEPT_INEXACT, jx_jvp_sinh, NULL)
UNARY_ROW(cosh, U_COSH, JX_ACCEPT_INEXACT, jx_jvp_cosh, NULL)
UNARY_ROW(asinh, U_ASINH, JX_ACCEPT_INEXACT, jx_jvp_asinh, NULL)
UNARY_ROW(acosh, U_ACOSH, JX_ACCEPT_INEXACT, jx_jvp_acosh, NULL)
UNARY_ROW(atanh, U_ATANH, JX_ACCEPT_INEXACT, jx_jvp_atanh, NULL)
UNARY_ROW(erf, U_ERF, JX_ACCEPT_FLOAT, jx_jvp_erf, NULL)
UNARY_ROW(erf_inv, U_ERF_INV, JX_ACCEPT_FLOAT, jx_jvp_erf_inv, NULL)
UNARY_ROW(lgamma, U_LGAMMA, JX_ACCEPT_FLOAT, jx_jvp_lgamma, NULL)
UNARY_ROW(digamma, U_DIGAMMA, JX_ACCEPT_FLOAT, jx_jvp_digamma, NULL)
UNARY_ROW(not, U_NOT, JX_ACCEPT_INT_OR_BOOL, jx_jvp_zero, NULL)
UNARY_ROW(population_count, U_POPCOUNT, JX_ACCEPT_INT, jx_jvp_zero, NULL)
UNARY_ROW(stop_gradient, U_STOP_GRADIENT, JX_ACCEPT_ANY, jx_jvp_zero, NULL)

/* abs: numeric; complex gives the parts' dtype (lax.abs) */
static jx_status infer_abs(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  jx_status st = infer_unary(ctx, JX_ACCEPT_NUMERIC, in, out);
  if (!st && jx_is_complex(in[0].dtype)) {
    out->dtype = jx_complex_part(in[0].dtype);
    out->weak = 0;
  }
  return st;
}
static void eval_abs(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  unary_kernel(U_ABS, ctx->params, in, out);
}
const jx_prim jx_prim_abs = {.name = "abs",
                             .id = JX_PRIM_abs,
                             .nin = 1,
                             .nout = 1,
                             .params = "",
                             .infer = infer_abs,
                             .eval = eval_abs,
                             .jvp = jx_jvp_abs,
                             .elementwise = 1};

/* round: i0 = 0 half away from zero (lax.round's default), 1 half to even */
static jx_status infer_round(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  if (p->i[0] != 0 && p->i[0] != 1)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "round: rounding_method must be 0 (away from zero) or 1 (to even), "
                        "got %lld",
                        (long long)p->i[0]);
  return infer_unary(ctx, JX_ACCEPT_FLOAT, in, out);
}
static void eval_round(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  unary_kernel(p->i[0] ? U_ROUND_EVEN : U_ROUND_AWAY, p, in, out);
}
const jx_prim jx_prim_round = {.name = "round",
                               .id = JX_PRIM_round,
                               .nin = 1,
                               .nout = 1,
                               .params = "rounding_method=i0",
                               .infer = infer_round,
                               .eval = eval_round,
                               .jvp = jx_jvp_zero,
                               .elementwise = 1};

/* is_finite: floats -> bool */
static jx_status infer_is_finite(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  return jx_infer_same(ctx->prim->name, JX_ACCEPT_FLOAT, JX_BOOL, 1, in, out);
}
static void eval_is_finite(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  unary_kernel(U_IS_FINITE, ctx->params, in, out);
}
const jx_prim jx_prim_is_finite = {.name = "is_finite",
                                   .id = JX_PRIM_is_finite,
                                   .nin = 1,
                                   .nout = 1,
                                   .params = "",
                                   .infer = infer_is_finite,
                                   .eval = eval_is_finite,
                                   .jvp = jx_jvp_zero,
                                   .elementwise = 1};

/* integer_pow: i0 = exponent; a negative one needs a float dtype */
static jx_status infer_integer_pow(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  char a[JX_AVAL_STR_CAP];
  jx_status st = infer_unary(ctx, JX_ACCEPT_NUMERIC, in, out);
  if (st) return st;
  if (p->i[0] < 0 && !jx_is_inexact(in[0].dtype))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "integer_pow: integers cannot be raised to the negative power %lld (%s)",
                        (long long)p->i[0], jx_aval_str(in[0].dtype, in[0].shape, a));
  return JX_OK;
}
static void eval_integer_pow(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  unary_kernel(U_INTEGER_POW, ctx->params, in, out);
}
const jx_prim jx_prim_integer_pow = {.name = "integer_pow",
                                     .id = JX_PRIM_integer_pow,
                                     .nin = 1,
                                     .nout = 1,
                                     .params = "y=i0",
                                     .infer = infer_integer_pow,
                                     .eval = eval_integer_pow,
                                     .jvp = jx_jvp_integer_pow,
                                     .elementwise = 1};

/* polygamma: i0 = m >= 1 (see unary_rules.h); floats, computed in double */
static jx_status infer_polygamma(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  if (p->i[0] < 1 || p->i[0] > 100)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "polygamma: the order m must be in [1, 100], got %lld", (long long)p->i[0]);
  return infer_unary(ctx, JX_ACCEPT_FLOAT, in, out);
}
static void eval_polygamma(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  unary_kernel(U_POLYGAMMA, ctx->params, in, out);
}
const jx_prim jx_prim_polygamma = {.name = "polygamma",
                                   .id = JX_PRIM_polygamma,
                                   .nin = 1,
                                   .nout = 1,
                                   .params = "m=i0",
                                   .infer = infer_polygamma,
                                   .eval = eval_polygamma,
                                   .jvp = jx_jvp_polygamma,
                                   .elementwise = 1};

const jx_prim *const jx_prims_unary[] = {&jx_prim_neg,
                                         &jx_prim_abs,
                                         &jx_prim_sign,
                                         &jx_prim_floor,
                                         &jx_prim_ceil,
                                         &jx_prim_round,
                                         &jx_prim_exp,
                                         &jx_prim_exp2,
                                         &jx_prim_expm1,
                                         &jx_prim_log,
                                         &jx_prim_log1p,
                                         &jx_prim_sqrt,
                                         &jx_prim_rsqrt,
                                         &jx_prim_cbrt,
                                         &jx_prim_tanh,
                                         &jx_prim_logistic,
                                         &jx_prim_sin,
                                         &jx_prim_cos,
                                         &jx_prim_tan,
                                         &jx_prim_asin,
                                         &jx_prim_acos,
                                         &jx_prim_atan,
                                         &jx_prim_sinh,
                                         &jx_prim_cosh,
                                         &jx_prim_asinh,
                                         &jx_prim_acosh,
                                         &jx_prim_atanh,
                                         &jx_prim_erf,
                                         &jx_prim_erf_inv,
                                         &jx_prim_lgamma,
                                         &jx_prim_digamma,
                                         &jx_prim_is_finite,
                                         &jx_prim_not,
                                         &jx_prim_integer_pow,
                                         &jx_prim_population_count,
                                         &jx_prim_stop_gradient,
                                         &jx_prim_polygamma,
                                         NULL};
