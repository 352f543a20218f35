/* The elementwise reductions of the collectives: acc op= x over chunks.
 *
 * Loops run in fixed blocks over restrict pointers (JX_VLOOP) so that gcc
 * vectorises them even at -O2; the tail of a chunk runs scalar. Signed
 * integers add and multiply in the unsigned type of their width, which wraps
 * as XLA does (and is defined behaviour in C). */
#include "comm.h"

#include "../array/dtype.h"
#include "../prims/vloop.h"
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

const char *jx_reduce_op_name(jx_reduce_op op) {
  switch (op) {
  case JX_REDUCE_SUM: return "sum";
  case JX_REDUCE_PROD: return "prod";
  case JX_REDUCE_MAX: return "max";
  case JX_REDUCE_MIN: return "min";
  }
  return "?";
}

/* One loop over n elements in fixed blocks (prims/vloop.h); n is a size_t
 * count here. */
#define LOOP(n, BODY) JX_VLOOP((int64_t)(n), BODY)

/* Floats: NaN wins in max/min: a stays when it is NaN or beats x; else x
 * (which is NaN when x is). A bitwise | (not ||) keeps the loop branch-free,
 * which gcc needs to vectorise it. */
#define FLOAT_KERNEL(NAME, T)                                                                      \
  static void NAME(T *restrict a, const T *restrict x, size_t n, jx_reduce_op op) {                \
    switch (op) {                                                                                  \
    case JX_REDUCE_SUM: LOOP(n, a[i] = a[i] + x[i]); break;                                        \
    case JX_REDUCE_PROD: LOOP(n, a[i] = a[i] * x[i]); break;                                       \
    case JX_REDUCE_MAX: LOOP(n, a[i] = ((a[i] != a[i]) | (a[i] > x[i])) ? a[i] : x[i]); break;     \
    case JX_REDUCE_MIN: LOOP(n, a[i] = ((a[i] != a[i]) | (a[i] < x[i])) ? a[i] : x[i]); break;     \
    }                                                                                              \
  }
FLOAT_KERNEL(red_f32, float)
FLOAT_KERNEL(red_f64, double)

/* Integers: T the stored type, U the unsigned type the arithmetic wraps in
 * (at least unsigned int wide, so no promotion to signed int can overflow). */
#define INT_KERNEL(NAME, T, U)                                                                     \
  static void NAME(T *restrict a, const T *restrict x, size_t n, jx_reduce_op op) {                \
    switch (op) {                                                                                  \
    case JX_REDUCE_SUM: LOOP(n, a[i] = (T)((U)a[i] + (U)x[i])); break;                             \
    case JX_REDUCE_PROD: LOOP(n, a[i] = (T)((U)a[i] * (U)x[i])); break;                            \
    case JX_REDUCE_MAX: LOOP(n, a[i] = a[i] > x[i] ? a[i] : x[i]); break;                          \
    case JX_REDUCE_MIN: LOOP(n, a[i] = a[i] < x[i] ? a[i] : x[i]); break;                          \
    }                                                                                              \
  }
INT_KERNEL(red_i8, int8_t, uint32_t)
INT_KERNEL(red_i16, int16_t, uint32_t)
INT_KERNEL(red_i32, int32_t, uint32_t)
INT_KERNEL(red_i64, int64_t, uint64_t)
INT_KERNEL(red_u8, uint8_t, uint32_t)
INT_KERNEL(red_u16, uint16_t, uint32_t)
INT_KERNEL(red_u32, uint32_t, uint32_t)
INT_KERNEL(red_u64, uint64_t, uint64_t)

/* bool is one byte holding 0 or 1: or for sum/max, and for prod/min. */
static void red_bool(uint8_t *restrict a, const uint8_t *restrict x, size_t n, jx_reduce_op op) {
  if (op == JX_REDUCE_SUM || op == JX_REDUCE_MAX)
    LOOP(n, a[i] = (uint8_t)(a[i] | (x[i] != 0)));
  else
    LOOP(n, a[i] = (uint8_t)(a[i] & (x[i] != 0)));
}

/* bf16 -> f32 is exact: the 16 bits are the top half of the f32. */
static inline float bf16_load(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static void load_half(float *restrict a, const uint16_t *restrict x, size_t n, jx_dtype dt) {
  if (dt == JX_BF16)
    LOOP(n, a[i] = bf16_load(x[i]));
  else
    for (size_t i = 0; i < n; i++) a[i] = jx_f16_to_f32(x[i]);
}

/* acc (dt, or f32 for f16/bf16) op= x (dt) */
static void reduce_into(void *acc, const void *x, size_t n, jx_dtype dt, jx_reduce_op op,
                        float *scratch) {
  switch (dt) {
  case JX_BOOL: red_bool(acc, x, n, op); break;
  case JX_I8: red_i8(acc, x, n, op); break;
  case JX_I16: red_i16(acc, x, n, op); break;
  case JX_I32: red_i32(acc, x, n, op); break;
  case JX_I64: red_i64(acc, x, n, op); break;
  case JX_U8: red_u8(acc, x, n, op); break;
  case JX_U16: red_u16(acc, x, n, op); break;
  case JX_U32: red_u32(acc, x, n, op); break;
  case JX_U64: red_u64(acc, x, n, op); break;
  case JX_F16:
  case JX_BF16:
    load_half(scratch, x, n, dt);
    red_f32(acc, scratch, n, op);
    break;
  case JX_F32: red_f32(acc, x, n, op); break;
  case JX_F64: red_f64(acc, x, n, op); break;
  /* complex: a sum is the sums of the parts; psum is the only reduction
     whose rule admits complex (pmax and pmin are lax.max's, not defined) */
  case JX_C64: red_f32(acc, x, 2 * n, op); break;
  case JX_C128: red_f64(acc, x, 2 * n, op); break;
  }
}

/* Copies in 64-byte steps of 16-byte loads and stores; streaming stores go
 * around the cache (the destination of a large collective is not read again
 * soon, and a normal store first reads the line it writes: a third more
 * memory traffic). Not memcpy: glibc 2.33-2.38 copies mid sizes with
 * `rep movsb`, which some AMD EPYC parts run at a fraction of the speed of
 * plain vector moves (seen here: 16 KiB at 2 GB/s). */
void jx_comm_copy(void *dst_, const void *src_, size_t n, int streaming) {
  char *dst = dst_;
  const char *src = src_;
#if defined(__SSE2__)
  size_t i = 0;
  if (streaming) { /* streamed stores need 16-byte aligned destinations */
    i = (size_t)(-(uintptr_t)dst & 15);
    if (i > n) i = n;
    memcpy(dst, src, i);
  }
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
    __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
    if (streaming) {
      _mm_stream_si128((__m128i *)(dst + i), a);
      _mm_stream_si128((__m128i *)(dst + i + 16), b);
      _mm_stream_si128((__m128i *)(dst + i + 32), c);
      _mm_stream_si128((__m128i *)(dst + i + 48), d);
    } else {
      _mm_storeu_si128((__m128i *)(dst + i), a);
      _mm_storeu_si128((__m128i *)(dst + i + 16), b);
      _mm_storeu_si128((__m128i *)(dst + i + 32), c);
      _mm_storeu_si128((__m128i *)(dst + i + 48), d);
    }
  }
  memcpy(dst + i, src + i, n - i);
  if (streaming) _mm_sfence(); /* streamed stores are weakly ordered: publish them */
#else
  (void)streaming;
  memcpy(dst, src, n);
#endif
}

void jx_comm_reduce_range(jx_dtype dt, jx_reduce_op op, const char *const *srcs, int nsrc,
                          char *const *dsts, int ndst, size_t len, int streaming) {
  /* acc is double-typed only for alignment; it holds CHUNK elements of any dtype */
  double acc[JX_COMM_CHUNK];
  float scratch[JX_COMM_CHUNK];
  uint16_t half[JX_COMM_CHUNK];
  const int is_half = dt == JX_F16 || dt == JX_BF16;
  const size_t es = jx_dtype_size(dt);
  for (size_t off = 0; off < len; off += JX_COMM_CHUNK) {
    size_t k = len - off < JX_COMM_CHUNK ? len - off : JX_COMM_CHUNK;
    size_t at = off * es;
    if (is_half)
      load_half((float *)acc, (const uint16_t *)(srcs[0] + at), k, dt);
    else
      jx_comm_copy(acc, srcs[0] + at, k * es, 0);
    for (int q = 1; q < nsrc; q++) reduce_into(acc, srcs[q] + at, k, dt, op, scratch);
    const void *out = acc;
    if (is_half) { /* round once, then copy the rounded bits to every destination */
      const float *a = (const float *)acc;
      for (size_t i = 0; i < k; i++)
        half[i] = dt == JX_BF16 ? jx_f32_to_bf16(a[i]) : jx_f32_to_f16(a[i]);
      out = half;
    }
    for (int d = 0; d < ndst; d++) jx_comm_copy(dsts[d] + at, out, k * es, streaming);
  }
}
