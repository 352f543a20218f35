/* Fast, accurate f32 elementary functions that vectorize (jx_expf, jx_exp2f,
 * jx_expm1f, jx_logf, jx_log1pf, jx_tanhf, jx_logistic_f, jx_sinf,
 * jx_cosf, jx_erff).
 *
 * One definition serves both sides: the f32 reference kernels in unary.c
 * include this file, and the C renderer embeds its text verbatim in every
 * generated kernel (CMake turns it into a string, see render_c.c), so eager
 * and jit give identical bits. That needs the same operation order on both
 * sides: no fused multiply-add contraction (gcc's default under -std=c11;
 * clang gets the pragma below; where a function wants a fused multiply-add
 * it says fmaf) and no -ffast-math.
 *
 * Why not libm: glibc's expf, tanhf, ... are calls the vectorizer cannot
 * inline without -ffast-math (which breaks NaN/Inf semantics). Everything
 * here is straight-line code: integer bit tricks through memcpy, Horner
 * polynomials, and selects (?:) for the special cases, so gcc and clang
 * vectorize loops over them at -O3 -march=native -fno-math-errno
 * -fno-trapping-math.
 *
 * exp, exp2, log, tanh and logistic compute in f32 (8 lanes on AVX2;
 * tanh with fmaf, one instruction where the target has FMA);
 * expm1, log1p, sin, cos and erf compute in double and round once (their
 * f32 versions would need double-f32 tricks without FMA). Accuracy against
 * the correctly rounded result over all f32 inputs is asserted by
 * tests/unit/test_fastmath.c (exp, exp2, expm1, log, log1p, sin, cos,
 * erf: <= 1 ulp; logistic: <= 2 ulp; tanh, XLA's form: <= 5 ulp). NaN,
 * +-inf, +-0, overflow, underflow and subnormal results follow libm. sin
 * and cos reduce every finite argument exactly enough (a 2/pi table,
 * Payne-Hanek style, for |x| >= 1), so there is no range limit.
 *
 * f64 keeps libm: these are not as accurate as glibc's double functions. */
#ifndef JX_FASTMATH_H
#define JX_FASTMATH_H

/* Under NVRTC (the CUDA dialect, render_cuda.c) the prelude before this text
 * defines JX_FM_FN and JX_FM_TABLE as __device__ qualifiers, the
 * fixed-width integer types, INFINITY and NAN: NVRTC has no system headers
 * (its built-in memcpy and signbit serve the rest). */
#ifndef JX_FM_FN
#include <math.h>
#include <stdint.h>
#include <string.h>
#define JX_FM_FN    static inline
#define JX_FM_TABLE static const
#endif

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

JX_FM_FN uint32_t jx_fm_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
JX_FM_FN float jx_fm_float(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}
JX_FM_FN uint64_t jx_fm_bits64(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
JX_FM_FN double jx_fm_double(uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}
/* x with the sign bit of s */
JX_FM_FN float jx_fm_with_sign(float x, float s) {
  return jx_fm_float((jx_fm_bits(x) & 0x7fffffffu) | (jx_fm_bits(s) & 0x80000000u));
}

/* 2^n for n in [-151, 129] as two normal factors, so that p * a * b rounds
 * once even where the result is subnormal, and overflows to inf past the
 * top. Unsigned shifts: garbage n (from a NaN) stays defined. */
JX_FM_FN float jx_fm_scale(float p, int32_t n) {
  int32_t n1 = n >> 1;
  float a = jx_fm_float((uint32_t)(n1 + 127) << 23);
  float b = jx_fm_float((uint32_t)(n - n1 + 127) << 23);
  return p * a * b;
}

/* e^x = 2^n p for x in [-104, 89]: x = n ln2 + r, |r| <= ln2/2 (Cody-Waite,
 * n ln2_hi exact), p = e^r by a minimax polynomial. */
JX_FM_FN float jx_fm_exp_parts(float x, int32_t *n) {
  float t = x * 0x1.715476p+0f + 0x1.8p23f; /* round to nearest integer */
  *n = (int32_t)(jx_fm_bits(t) - 0x4b400000u);
  float k = t - 0x1.8p23f;
  float r = x - k * 0x1.62e4p-1f;
  r = r - k * 0x1.7f7d1cp-20f;
  float q = 0x1.6db422p-10f;
  q = q * r + 0x1.123b52p-7f;
  q = q * r + 0x1.55545ep-5f;
  q = q * r + 0x1.55548ep-3f;
  q = q * r + 0.5f;
  return 1.0f + (r + (r * r) * q);
}

/* e^x. The clamp makes +inf/overflow and -inf/underflow come out of the
 * arithmetic; NaN passes it. */
JX_FM_FN float jx_expf(float x) {
  float xc = x > 89.0f ? 89.0f : x;
  xc = xc < -104.0f ? -104.0f : xc;
  int32_t n;
  float p = jx_fm_exp_parts(xc, &n);
  return jx_fm_scale(p, n);
}

/* 2^x = 2^k 2^r, k = rint(x), |r| <= 1/2 exact */
JX_FM_FN float jx_exp2f(float x) {
  float xc = x > 129.0f ? 129.0f : x;
  xc = xc < -151.0f ? -151.0f : xc;
  float t = xc + 0x1.8p23f;
  int32_t n = (int32_t)(jx_fm_bits(t) - 0x4b400000u);
  float r = xc - (t - 0x1.8p23f);
  float q = 0x1.448d98p-13f;
  q = q * r + 0x1.5f47c8p-10f;
  q = q * r + 0x1.3b29aep-7f;
  q = q * r + 0x1.c6aed0p-5f;
  q = q * r + 0x1.ebfbe0p-3f;
  q = q * r + 0x1.62e430p-1f;
  float p = 1.0f + r * q;
  return jx_fm_scale(p, n);
}

/* e^x - 1 in double: 2^k (e^r - 1) + (2^k - 1), both exact but the last sum */
JX_FM_FN float jx_expm1f(float x) {
  double xd = x > 90.0f ? 90.0f : x;
  xd = xd < -20.0 ? -20.0 : xd; /* e^-20 - 1 rounds to -1 */
  double t = xd * 0x1.71547652b82fep+0 + 0x1.8p52;
  int64_t n = (int64_t)(jx_fm_bits64(t) - jx_fm_bits64(0x1.8p52));
  double k = t - 0x1.8p52;
  double r = (xd - k * 0x1.62e42feep-1) - k * 0x1.a39ef35793c76p-33;
  double q = 0x1.ae64567f544e4p-26;
  q = q * r + 0x1.27e4fb7789f5cp-22;
  q = q * r + 0x1.71de3a556c734p-19;
  q = q * r + 0x1.a01a01a01a01ap-16;
  q = q * r + 0x1.a01a01a01a01ap-13;
  q = q * r + 0x1.6c16c16c16c17p-10;
  q = q * r + 0x1.1111111111111p-7;
  q = q * r + 0x1.5555555555555p-5;
  q = q * r + 0x1.5555555555555p-3;
  q = q * r + 0.5;
  double p = r + (r * r) * q;
  double s = jx_fm_double((uint64_t)(n + 1023) << 52);
  float y = (float)(s * p + (s - 1.0));
  return x == 0.0f ? x : y; /* keeps -0 */
}

/* log: x = 2^k m, m in [sqrt(2)/2, sqrt(2)), log m = 2 atanh(f / (2 + f)),
 * f = m - 1, as fdlibm's logf (< 1 ulp in f32 arithmetic); subnormals are
 * scaled by 2^25 first. */
JX_FM_FN float jx_logf(float x) {
  int sub = jx_fm_bits(x) < 0x00800000u; /* +0 and positive subnormals */
  float xs = sub ? x * 0x1p25f : x;
  uint32_t ix = jx_fm_bits(xs);
  int32_t k = (int32_t)((ix >> 23) & 0xff) - 127 - (sub ? 25 : 0);
  uint32_t hx = ix & 0x007fffffu;
  uint32_t i = (hx + 0x4afb20u) & 0x800000u; /* m above sqrt(2): halve it */
  float m = jx_fm_float(hx | (i ^ 0x3f800000u));
  k += (int32_t)(i >> 23);
  float f = m - 1.0f;
  float s = f / (2.0f + f);
  float z = s * s, w = z * z;
  float t1 = w * (0x1.999c26p-2f + w * 0x1.f13c4cp-3f); /* Lg2, Lg4 */
  float t2 = z * (0x1.555554p-1f + w * 0x1.23d3dcp-2f); /* Lg1, Lg3 */
  float R = t2 + t1;
  float hfsq = 0.5f * f * f;
  float dk = (float)k;
  float y = dk * 0x1.62e300p-1f - ((hfsq - (s * (hfsq + R) + dk * 0x1.2fefa2p-17f)) - f);
  y = x == 0.0f ? -INFINITY : y;
  y = x < 0.0f ? NAN : y;
  y = x == INFINITY ? x : y;
  return x != x ? x : y;
}

/* log(1 + x) in double: u = 1 + x rounded, c = its rounding error, log u by
 * 2 atanh(f / (2 + f)) on the reduced mantissa, plus c / u. */
JX_FM_FN float jx_log1pf(float x) {
  double xd = x;
  double u = 1.0 + xd;
  double c = xd - (u - 1.0);
  uint64_t tmp = jx_fm_bits64(u) - 0x3fe6a09e667f3bcdull; /* sqrt(1/2) */
  int64_t k = (int64_t)tmp >> 52;
  double m = jx_fm_double(jx_fm_bits64(u) - (tmp & 0xfff0000000000000ull));
  double f = m - 1.0;
  double s = f / (2.0 + f);
  double z = s * s;
  double q = 0x1.1111111111111p-3;
  q = q * z + 0x1.3b13b13b13b14p-3;
  q = q * z + 0x1.745d1745d1746p-3;
  q = q * z + 0x1.c71c71c71c71cp-3;
  q = q * z + 0x1.2492492492492p-2;
  q = q * z + 0x1.999999999999ap-2;
  q = q * z + 0x1.5555555555555p-1;
  double lm = 2.0 * s + s * (z * q);
  float y = (float)((double)(int32_t)k * 0x1.62e42fefa39efp-1 + (lm + c / u));
  y = x == -1.0f ? -INFINITY : y;
  y = x < -1.0f ? NAN : y;
  y = x == INFINITY ? x : y;
  y = x == 0.0f ? x : y;
  return x != x ? x : y;
}

/* tanh as XLA's CPU backend computes it for f32 (so jitted programs give
 * JAX's bits): x itself below 0.0004, else x P(x^2) / Q(x^2) with the
 * argument clamped to +-7.99881172 (where the quotient is exactly 1), the
 * polynomials of degree 6 and 3 in x^2 (Eigen's rational interpolant)
 * evaluated by fused multiply-adds. At most 5 ulp from the correctly
 * rounded result (measured over every f32), with one division and no exp:
 * about half the operations of an e^2x form, and the GELU kernels are
 * bound by operations. NaN passes the clamp; +-inf give +-1; -0 and
 * subnormals come back unchanged. */
JX_FM_FN float jx_tanhf(float x) {
  float c = x > 7.99881172180175781f ? 7.99881172180175781f : x;
  c = c < -7.99881172180175781f ? -7.99881172180175781f : c;
  float z = c * c;
  float p = fmaf(z, -2.76076847742355e-16f, 2.00018790482477e-13f);
  p = fmaf(z, p, -8.60467152213735e-11f);
  p = fmaf(z, p, 5.12229709037114e-08f);
  p = fmaf(z, p, 1.48572235717979e-05f);
  p = fmaf(z, p, 6.37261928875436e-04f);
  p = fmaf(z, p, 4.89352455891786e-03f);
  float q = fmaf(z, 1.19825839466702e-06f, 1.18534705686654e-04f);
  q = fmaf(z, q, 2.26843463243900e-03f);
  q = fmaf(z, q, 4.89352518554385e-03f);
  float y = (c * p) / q;
  float a = jx_fm_float(jx_fm_bits(x) & 0x7fffffffu);
  return a < 0.0004f ? x : y;
}

/* 1 / (1 + e^-x), written with e = e^-|x| so that it never overflows and
 * keeps its relative accuracy for large negative x (e / (1 + e)). */
JX_FM_FN float jx_logistic_f(float x) {
  float e = jx_expf(jx_fm_float(jx_fm_bits(x) | 0x80000000u));
  float num = x >= 0.0f ? 1.0f : e; /* NaN: e is NaN */
  return num / (1.0f + e);
}

/* frac4(2^(e - 150) * 2/pi) for the biased exponents e = 127..254, as h (29
 * significant bits, so that h times a 24-bit mantissa is exact) + l. */
JX_FM_TABLE double jx_fm_2_over_pi[256] = {
    0x1.45f306d000000p-24, 0x1.9391054a7f09dp-53, 0x1.45f306d000000p-23, 0x1.9391054a7f09dp-52,
    0x1.45f306d000000p-22, 0x1.9391054a7f09dp-51, 0x1.45f306d000000p-21, 0x1.9391054a7f09dp-50,
    0x1.45f306d000000p-20, 0x1.9391054a7f09dp-49, 0x1.45f306d000000p-19, 0x1.9391054a7f09dp-48,
    0x1.45f306d000000p-18, 0x1.9391054a7f09dp-47, 0x1.45f306d000000p-17, 0x1.9391054a7f09dp-46,
    0x1.45f306d000000p-16, 0x1.9391054a7f09dp-45, 0x1.45f306d000000p-15, 0x1.9391054a7f09dp-44,
    0x1.45f306d000000p-14, 0x1.9391054a7f09dp-43, 0x1.45f306d000000p-13, 0x1.9391054a7f09dp-42,
    0x1.45f306d000000p-12, 0x1.9391054a7f09dp-41, 0x1.45f306d000000p-11, 0x1.9391054a7f09dp-40,
    0x1.45f306d000000p-10, 0x1.9391054a7f09dp-39, 0x1.45f306d000000p-9,  0x1.9391054a7f09dp-38,
    0x1.45f306d000000p-8,  0x1.9391054a7f09dp-37, 0x1.45f306d000000p-7,  0x1.9391054a7f09dp-36,
    0x1.45f306d000000p-6,  0x1.9391054a7f09dp-35, 0x1.45f306d000000p-5,  0x1.9391054a7f09dp-34,
    0x1.45f306d000000p-4,  0x1.9391054a7f09dp-33, 0x1.45f306d000000p-3,  0x1.9391054a7f09dp-32,
    0x1.45f306d000000p-2,  0x1.9391054a7f09dp-31, 0x1.45f306d000000p-1,  0x1.9391054a7f09dp-30,
    0x1.45f306d000000p+0,  0x1.9391054a7f09dp-29, 0x1.45f306d000000p+1,  0x1.9391054a7f09dp-28,
    0x1.17cc1b7000000p+0,  0x1.391054a7f09d6p-31, 0x1.17cc1b7000000p+1,  0x1.391054a7f09d6p-30,
    0x1.7cc1b72000000p-2,  0x1.c882a53f84eb0p-32, 0x1.7cc1b72000000p-1,  0x1.c882a53f84eb0p-31,
    0x1.7cc1b72000000p+0,  0x1.c882a53f84eb0p-30, 0x1.7cc1b72000000p+1,  0x1.c882a53f84eb0p-29,
    0x1.f306dc9000000p+0,  0x1.91054a7f09d5fp-29, 0x1.f306dc9000000p+1,  0x1.91054a7f09d5fp-28,
    0x1.e60db93000000p+1,  0x1.220a94fe13abfp-28, 0x1.cc1b727000000p+1,  0x1.1054a7f09d5f4p-30,
    0x1.9836e4e000000p+1,  0x1.1054a7f09d5f4p-29, 0x1.306dc9c000000p+1,  0x1.1054a7f09d5f4p-28,
    0x1.836e4e4000000p-1,  0x1.054a7f09d5f48p-31, 0x1.836e4e4000000p+0,  0x1.054a7f09d5f48p-30,
    0x1.836e4e4000000p+1,  0x1.054a7f09d5f48p-29, 0x1.06dc9c8000000p+1,  0x1.054a7f09d5f48p-28,
    0x1.b727220000000p-4,  0x1.529fc2757d1f5p-33, 0x1.b727220000000p-3,  0x1.529fc2757d1f5p-32,
    0x1.b727220000000p-2,  0x1.529fc2757d1f5p-31, 0x1.b727220000000p-1,  0x1.529fc2757d1f5p-30,
    0x1.b727220000000p+0,  0x1.529fc2757d1f5p-29, 0x1.b727220000000p+1,  0x1.529fc2757d1f5p-28,
    0x1.6e4e441000000p+1,  0x1.4a7f09d5f47d5p-29, 0x1.b939105000000p+0,  0x1.29fc2757d1f53p-30,
    0x1.b939105000000p+1,  0x1.29fc2757d1f53p-29, 0x1.727220a000000p+1,  0x1.29fc2757d1f53p-28,
    0x1.c9c882a000000p+0,  0x1.4fe13abe8fa9ap-30, 0x1.c9c882a000000p+1,  0x1.4fe13abe8fa9ap-29,
    0x1.9391054000000p+1,  0x1.4fe13abe8fa9ap-28, 0x1.27220a9000000p+1,  0x1.3f84eafa3ea6ap-29,
    0x1.391054a000000p-1,  0x1.fc2757d1f534ep-31, 0x1.391054a000000p+0,  0x1.fc2757d1f534ep-30,
    0x1.391054a000000p+1,  0x1.fc2757d1f534ep-29, 0x1.c882a53000000p-1,  0x1.f09d5f47d4d37p-30,
    0x1.c882a53000000p+0,  0x1.f09d5f47d4d37p-29, 0x1.c882a53000000p+1,  0x1.f09d5f47d4d37p-28,
    0x1.91054a7000000p+1,  0x1.e13abe8fa9a6fp-28, 0x1.220a94f000000p+1,  0x1.c2757d1f534dep-28,
    0x1.1054a7f000000p-1,  0x1.3abe8fa9a6ee0p-34, 0x1.1054a7f000000p+0,  0x1.3abe8fa9a6ee0p-33,
    0x1.1054a7f000000p+1,  0x1.3abe8fa9a6ee0p-32, 0x1.054a7f0000000p-2,  0x1.3abe8fa9a6ee0p-31,
    0x1.054a7f0000000p-1,  0x1.3abe8fa9a6ee0p-30, 0x1.054a7f0000000p+0,  0x1.3abe8fa9a6ee0p-29,
    0x1.054a7f0000000p+1,  0x1.3abe8fa9a6ee0p-28, 0x1.529fc27000000p-4,  0x1.5f47d4d377037p-34,
    0x1.529fc27000000p-3,  0x1.5f47d4d377037p-33, 0x1.529fc27000000p-2,  0x1.5f47d4d377037p-32,
    0x1.529fc27000000p-1,  0x1.5f47d4d377037p-31, 0x1.529fc27000000p+0,  0x1.5f47d4d377037p-30,
    0x1.529fc27000000p+1,  0x1.5f47d4d377037p-29, 0x1.4a7f09d000000p+0,  0x1.7d1f534ddc0dbp-30,
    0x1.4a7f09d000000p+1,  0x1.7d1f534ddc0dbp-29, 0x1.29fc275000000p+0,  0x1.f47d4d377036ep-30,
    0x1.29fc275000000p+1,  0x1.f47d4d377036ep-29, 0x1.4fe13ab000000p-1,  0x1.d1f534ddc0db6p-30,
    0x1.4fe13ab000000p+0,  0x1.d1f534ddc0db6p-29, 0x1.4fe13ab000000p+1,  0x1.d1f534ddc0db6p-28,
    0x1.3f84eaf000000p+0,  0x1.47d4d377036d9p-29, 0x1.3f84eaf000000p+1,  0x1.47d4d377036d9p-28,
    0x1.fc2757d000000p-1,  0x1.f534ddc0db629p-33, 0x1.fc2757d000000p+0,  0x1.f534ddc0db629p-32,
    0x1.fc2757d000000p+1,  0x1.f534ddc0db629p-31, 0x1.f84eafa000000p+1,  0x1.f534ddc0db629p-30,
    0x1.f09d5f4000000p+1,  0x1.f534ddc0db629p-29, 0x1.e13abe8000000p+1,  0x1.f534ddc0db629p-28,
    0x1.c2757d1000000p+1,  0x1.ea69bb81b6c53p-28, 0x1.84eafa3000000p+1,  0x1.d4d377036d8a5p-28,
    0x1.09d5f47000000p+1,  0x1.a9a6ee06db14bp-28, 0x1.3abe8fa000000p-3,  0x1.34ddc0db6295ap-32,
    0x1.3abe8fa000000p-2,  0x1.34ddc0db6295ap-31, 0x1.3abe8fa000000p-1,  0x1.34ddc0db6295ap-30,
    0x1.3abe8fa000000p+0,  0x1.34ddc0db6295ap-29, 0x1.3abe8fa000000p+1,  0x1.34ddc0db6295ap-28,
    0x1.d5f47d4000000p-1,  0x1.a6ee06db14acdp-30, 0x1.d5f47d4000000p+0,  0x1.a6ee06db14acdp-29,
    0x1.d5f47d4000000p+1,  0x1.a6ee06db14acdp-28, 0x1.abe8fa9000000p+1,  0x1.4ddc0db629599p-28,
    0x1.57d1f53000000p+1,  0x1.377036d8a5665p-29, 0x1.5f47d4d000000p+0,  0x1.bb81b6c52b328p-31,
    0x1.5f47d4d000000p+1,  0x1.bb81b6c52b328p-30, 0x1.7d1f534000000p+0,  0x1.bb81b6c52b328p-29,
    0x1.7d1f534000000p+1,  0x1.bb81b6c52b328p-28, 0x1.f47d4d3000000p+0,  0x1.dc0db6295993cp-30,
    0x1.f47d4d3000000p+1,  0x1.dc0db6295993cp-29, 0x1.e8fa9a6000000p+1,  0x1.dc0db6295993cp-28,
    0x1.d1f534d000000p+1,  0x1.b81b6c52b3279p-28, 0x1.a3ea69b000000p+1,  0x1.7036d8a5664f1p-28,
    0x1.47d4d37000000p+1,  0x1.c0db6295993c4p-29, 0x1.1f534dd000000p+0,  0x1.81b6c52b32788p-29,
    0x1.1f534dd000000p+1,  0x1.81b6c52b32788p-28, 0x1.f534ddc000000p-2,  0x1.b6c52b3278872p-35,
    0x1.f534ddc000000p-1,  0x1.b6c52b3278872p-34, 0x1.f534ddc000000p+0,  0x1.b6c52b3278872p-33,
    0x1.f534ddc000000p+1,  0x1.b6c52b3278872p-32, 0x1.ea69bb8000000p+1,  0x1.b6c52b3278872p-31,
    0x1.d4d3770000000p+1,  0x1.b6c52b3278872p-30, 0x1.a9a6ee0000000p+1,  0x1.b6c52b3278872p-29,
    0x1.534ddc0000000p+1,  0x1.b6c52b3278872p-28, 0x1.4d37703000000p+0,  0x1.b6295993c4390p-30,
    0x1.4d37703000000p+1,  0x1.b6295993c4390p-29, 0x1.34ddc0d000000p+0,  0x1.6c52b32788721p-29,
};

/* sin (c = 0) or cos (c = 1). |x| < 1 is its own reduced argument; above,
 * x = M 2^E with M a 24-bit integer, so x 2/pi mod 4 = M frac4(2^E 2/pi)
 * mod 4: M h is exact, the quadrant is the integer nearest M h + M l, and
 * what remains ((M h - k) + M l, exact when small) has 2^-54 absolute error,
 * far below the f32 ulp even for the floats closest to a multiple of pi/2. */
JX_FM_FN float jx_fm_sincos(float x, int c) {
  uint32_t ax = jx_fm_bits(x) & 0x7fffffffu;
  uint32_t e = ax >> 23;
  uint32_t ec = e > 127u ? e : 127u; /* max and min, not a branch */
  ec = ec < 254u ? ec : 254u;
  uint64_t idx = ec - 127u; /* 64 bits: gcc emulates the gather then */
  int small = e < 127u;
  /* M = 0 below 1 makes the reduction give k = 0 and r = 0, to which |x| is
   * added: selecting whole results instead would let gcc make the table
   * loads conditional (masked gathers, which it does not vectorize) */
  double M = small ? 0.0 : (double)(int32_t)((ax & 0x7fffffu) | 0x800000u);
  double t1 = M * jx_fm_2_over_pi[2 * idx], t2 = M * jx_fm_2_over_pi[2 * idx + 1];
  double t = (t1 + t2) + 0x1.8p52;
  uint32_t n = (uint32_t)jx_fm_bits64(t);
  double k = t - 0x1.8p52;
  double r = ((t1 - k) + t2) * 0x1.921fb54442d18p+0 + (small ? (double)jx_fm_float(ax) : 0.0);
  uint32_t quad = n + (uint32_t)c;
  double z = r * r;
  double ps = 0x1.6124613a86d09p-33;
  ps = ps * z - 0x1.ae64567f544e4p-26;
  ps = ps * z + 0x1.71de3a556c734p-19;
  ps = ps * z - 0x1.a01a01a01a01ap-13;
  ps = ps * z + 0x1.1111111111111p-7;
  ps = ps * z - 0x1.5555555555555p-3;
  double sn = r + (r * z) * ps;
  double pc = -0x1.93974a8c07c9dp-37;
  pc = pc * z + 0x1.1eed8eff8d898p-29;
  pc = pc * z - 0x1.27e4fb7789f5cp-22;
  pc = pc * z + 0x1.a01a01a01a01ap-16;
  pc = pc * z - 0x1.6c16c16c16c17p-10;
  pc = pc * z + 0x1.5555555555555p-5;
  double cs = (1.0 - 0.5 * z) + (z * z) * pc;
  double v = (quad & 1u) ? cs : sn;
  float y = (float)v;
  /* quadrants 2 and 3 negate; sin is odd in x, cos even */
  uint32_t neg = ((quad >> 1) & 1u) ^ (c ? 0u : jx_fm_bits(x) >> 31);
  y = jx_fm_float(jx_fm_bits(y) ^ (neg << 31));
  return e == 255u ? x - x : y; /* inf: NaN; NaN stays NaN */
}
JX_FM_FN float jx_sinf(float x) { return jx_fm_sincos(x, 0); }
JX_FM_FN float jx_cosf(float x) { return jx_fm_sincos(x, 1); }

/* erf in double: |x| P(x^2) below 1, a polynomial in |x| - 2.5 on [1, 4]
 * (minimax, < 1e-9), and erf rounds to 1 from 3.92 on. */
JX_FM_FN float jx_erff(float x) {
  double a = jx_fm_float(jx_fm_bits(x) & 0x7fffffffu);
  a = a > 4.0 ? 4.0 : a; /* NaN passes */
  double z = a * a;
  double p = -0x1.c225941a00000p-24;
  p = p * z + 0x1.9b048f9730000p-20;
  p = p * z - 0x1.f078be4e24000p-17;
  p = p * z + 0x1.f942cd3cc7c00p-14;
  p = p * z - 0x1.c02880868b600p-11;
  p = p * z + 0x1.565ba11bbaa70p-8;
  p = p * z - 0x1.b82ce166e26c8p-6;
  p = p * z + 0x1.ce2f2197fec32p-4;
  p = p * z - 0x1.812746b027bffp-2;
  p = p * z + 0x1.20dd750429b1cp+0;
  double lo = a * p;
  double t = a - 2.5;
  double q = 0x1.8e189bb1bda7ap-28;
  q = q * t - 0x1.7a6ef8fd53f03p-22;
  q = q * t + 0x1.c1e1e64a493c8p-21;
  q = q * t + 0x1.d20bb40353e34p-19;
  q = q * t - 0x1.04860e1671693p-16;
  q = q * t + 0x1.032b5ba688988p-17;
  q = q * t + 0x1.52a289b54931ep-14;
  q = q * t - 0x1.09acfe9700046p-12;
  q = q * t + 0x1.0fb35f626eba4p-12;
  q = q * t + 0x1.1d772bc595c95p-11;
  q = q * t - 0x1.6eb5be2230e10p-9;
  q = q * t + 0x1.90dbb8362790bp-8;
  q = q * t - 0x1.1a8b20a5645b9p-7;
  q = q * t + 0x1.119e9c5662581p-7;
  q = q * t - 0x1.64e39b3b370e1p-8;
  q = q * t + 0x1.1d82e88097100p-9;
  q = q * t + 0x1.ffcaa8f2c91a9p-1;
  float y = (float)(a < 1.0 ? lo : q);
  return jx_fm_with_sign(y, x);
}

#endif
