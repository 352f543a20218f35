/* exp2, expm1 and log1p of a complex number, which C99's <complex.h> lacks,
 * as XLA forms them: exp2(z) = exp(z ln 2); expm1(a + ib) =
 * expm1(a) cos(b) - 2 sin^2(b/2) + i e^a sin(b), without the cancellation of
 * e^a cos(b) - 1 near 0; log1p(z) = log|1 + z| + i arg(1 + z), the modulus
 * through log1p(a (a + 2) + b^2) when that is small.
 *
 * One text for the eager kernels (unary.c expands it as code) and for the
 * fused ones (the kernel renderers' preludes take it as a string,
 * JX_COMPLEX_SPECIAL_TEXT), so a fused kernel computes what the eager one
 * does. It needs, for complex type T of real parts R (F: "f" for float,
 * empty for double): creal, cimag, cexp (C99's, or the CUDA dialect's on its
 * structs), jx_cmplx (the number re + i im) and the real math functions. */
#ifndef JX_SRC_PRIMS_COMPLEX_SPECIAL_H
#define JX_SRC_PRIMS_COMPLEX_SPECIAL_H

#define JX_COMPLEX_SPECIAL(QUAL, T, R, F)                                                          \
  QUAL T jx_cexpm1##F(T z) {                                                                       \
    R a = creal##F(z), b = cimag##F(z), h = sin##F(b / 2);                                         \
    return jx_cmplx##F(expm1##F(a) * cos##F(b) - 2 * h * h, exp##F(a) * sin##F(b));                \
  }                                                                                                \
  QUAL T jx_cexp2##F(T z) { return cexp##F(z * (R)0.69314718055994530942); }                       \
  QUAL T jx_clog1p##F(T z) {                                                                       \
    R a = creal##F(z), b = cimag##F(z), s = a * (a + 2) + b * b;                                   \
    R re = fabs##F(s) < (R)0.5 ? log1p##F(s) / 2 : log##F(hypot##F(a + 1, b));                     \
    return jx_cmplx##F(re, atan2##F(b, a + 1));                                                    \
  }

#define JX_COMPLEX_SPECIAL_STR_(...) #__VA_ARGS__
#define JX_COMPLEX_SPECIAL_STR(...)  JX_COMPLEX_SPECIAL_STR_(__VA_ARGS__)
/* The functions as kernel source text, qualified JX_FN (the prelude's). */
#define JX_COMPLEX_SPECIAL_TEXT(T, R, F)                                                           \
  JX_COMPLEX_SPECIAL_STR(JX_COMPLEX_SPECIAL(JX_FN, T, R, F)) "\n"

#endif
