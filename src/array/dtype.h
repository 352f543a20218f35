/* Internal dtype facts and the element access used by reference kernels. */
#ifndef JX_SRC_ARRAY_DTYPE_H
#define JX_SRC_ARRAY_DTYPE_H

#include <jx/array.h>
#include <math.h>
#include <string.h>

typedef enum { JX_KIND_BOOL, JX_KIND_INT, JX_KIND_UINT, JX_KIND_FLOAT, JX_KIND_COMPLEX } jx_kind;

static inline int jx_dtype_valid(jx_dtype dt) { return (unsigned)dt < JX_NUM_DTYPES; }
jx_kind jx_dtype_kind(jx_dtype dt);
static inline int jx_is_float(jx_dtype dt) { return jx_dtype_kind(dt) == JX_KIND_FLOAT; }
static inline int jx_is_int(jx_dtype dt) {
  jx_kind k = jx_dtype_kind(dt);
  return k == JX_KIND_INT || k == JX_KIND_UINT;
}
static inline int jx_is_complex(jx_dtype dt) { return dt == JX_C64 || dt == JX_C128; }
/* float or complex: what JAX calls inexact */
static inline int jx_is_inexact(jx_dtype dt) { return jx_is_float(dt) || jx_is_complex(dt); }
/* The dtype of a complex dtype's parts (c64 -> f32, c128 -> f64); other
 * dtypes are their own. */
static inline jx_dtype jx_complex_part(jx_dtype dt) {
  return dt == JX_C64 ? JX_F32 : dt == JX_C128 ? JX_F64 : dt;
}
/* The complex dtype with parts of dtype dt: f64 -> c128, any other float
 * (and c64) -> c64, c128 -> c128. */
static inline jx_dtype jx_complex_of(jx_dtype dt) {
  return (dt == JX_F64 || dt == JX_C128) ? JX_C128 : JX_C64;
}
static inline int jx_is_signed_int(jx_dtype dt) { return jx_dtype_kind(dt) == JX_KIND_INT; }
static inline int jx_is_unsigned_int(jx_dtype dt) { return jx_dtype_kind(dt) == JX_KIND_UINT; }
int jx_dtype_bits(jx_dtype dt);

/* bf16 <-> f32, inline for loops that convert whole arrays (a GEMM's
 * operands): the same bits as jx_f32_to_bf16 / jx_bf16_to_f32, which call
 * them. To nearest even; NaN becomes the canonical quiet NaN with its sign,
 * as XLA and ml_dtypes. */
static inline uint16_t jx_f32_to_bf16_inline(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);
  u += 0x7fffu + ((u >> 16) & 1u); /* overflow carries into inf */
  return (uint16_t)(u >> 16);
}
static inline float jx_bf16_to_f32_inline(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float x;
  memcpy(&x, &u, 4);
  return x;
}

/* The x32 mode (include/jx/array.h): JAX's dtypes.canonicalize_dtype, which
 * maps i64, u64 and f64 to their 32-bit kin unless x64 is enabled, and
 * dtypes.int_ (i32, or i64 under x64) for indices JAX returns. */
jx_dtype jx_dtype_canonical(jx_dtype dt);
jx_dtype jx_default_int(void);

/* Promotion with weak types (JAX's lattice, see include/jx/array.h); in the
 * default mode a 64-bit result of 32-bit strong operands is canonicalized. */
jx_dtype jx_promote_weak(jx_dtype a, int a_weak, jx_dtype b, int b_weak, int *out_weak);
/* The float dtype an integer or bool input of a floating op is computed in:
 * f32 up to 32 bits, f64 for 64-bit integers (as JAX). */
jx_dtype jx_to_inexact(jx_dtype dt);

/* Element access by dtype, for reference kernels: every value of every real
 * dtype round-trips exactly through either double (floats, bool) or
 * int64/uint64, every complex one through double _Complex. A complex element
 * loads as its real part (the imaginary part is discarded, as a complex ->
 * real convert) and a real value stores into a complex dtype with imaginary
 * part 0. (No <complex.h> here: its macro I would leak into every file.) */
double jx_load_f64(const void *base, jx_dtype dt, int64_t i);
void jx_store_f64(void *base, jx_dtype dt, int64_t i, double v); /* float->int saturates,
                                                                 NaN -> 0 */
/* re + im i, exactly (C11's CMPLX, which glibc leaves undefined under clang):
 * a complex value is laid out as an array of its two parts */
static inline double _Complex jx_cmplx(double re, double im) {
  double _Complex z;
  double parts[2] = {re, im};
  memcpy(&z, parts, sizeof z);
  return z;
}
static inline float _Complex jx_cmplxf(float re, float im) {
  float _Complex z;
  float parts[2] = {re, im};
  memcpy(&z, parts, sizeof z);
  return z;
}
double _Complex jx_load_c128(const void *base, jx_dtype dt, int64_t i);    /* real: imag 0 */
void jx_store_c128(void *base, jx_dtype dt, int64_t i, double _Complex v); /* real: the real part */
int64_t jx_load_i64(const void *base, jx_dtype dt, int64_t i); /* ints wrap, floats truncate */
uint64_t jx_load_u64(const void *base, jx_dtype dt, int64_t i);
void jx_store_i64(void *base, jx_dtype dt, int64_t i, int64_t v); /* wraps to width */

#endif
