/* Elementwise binary primitives: two operands of one dtype and shape (the
 * NumPy layer broadcasts and promotes first). Integer semantics are XLA's:
 * arithmetic wraps, x / 0 = -1 (all ones), x % 0 = x, INT_MIN / -1 = INT_MIN,
 * shifts by >= the bit width give 0 (or the sign for arithmetic right).
 * Floats of 16 bits compute in f32 and round once, as XLA does on CPUs.
 * Complex operands (add, sub, mul, div, pow, eq, ne; complex.c lists them)
 * use C99's complex arithmetic and cpow. */
#include <complex.h>
#include <math.h>

#include "../base/error.h"
#include "binary_rules.h"
#include "elementwise.h"
#include "prims.h"
#include "rules.h"
#include "vloop.h"

typedef enum {
  B_ADD,
  B_SUB,
  B_MUL,
  B_DIV,
  B_REM,
  B_POW,
  B_MAX,
  B_MIN,
  B_ATAN2,
  B_AND,
  B_OR,
  B_XOR,
  B_SHL,
  B_SHR_LOGICAL,
  B_SHR_ARITH,
  B_NEXTAFTER,
  B_EQ,
  B_NE,
  B_LT,
  B_LE,
  B_GT,
  B_GE
} binop;

static int is_comparison(binop op) { return op >= B_EQ; }

/* ---- floats ---- */
#define FLOAT_OP(op, a, b, FMOD, POW, ATAN2, NEXT)                                                 \
  ((op) == B_ADD     ? (a) + (b)                                                                   \
   : (op) == B_SUB   ? (a) - (b)                                                                   \
   : (op) == B_MUL   ? (a) * (b)                                                                   \
   : (op) == B_DIV   ? (a) / (b)                                                                   \
   : (op) == B_REM   ? FMOD(a, b)                                                                  \
   : (op) == B_POW   ? POW(a, b)                                                                   \
   : (op) == B_MAX   ? JX_FMAX(a, b)                                                               \
   : (op) == B_MIN   ? JX_FMIN(a, b)                                                               \
   : (op) == B_ATAN2 ? ATAN2(a, b)                                                                 \
                     : NEXT(a, b))
/* The operands of the typed loops are restrict: outputs are fresh buffers. */
#define VLOOP JX_VLOOP

/* Loops are written once per op so that the op test sits outside the loop and
 * the simple ones vectorize. */
#define TYPED_LOOPS(T, FMOD, POW, ATAN2, NEXT)                                                     \
  static void loop_##T(binop op, int64_t n, const T *restrict x, const T *restrict y,              \
                       void *restrict out) {                                                       \
    if (is_comparison(op)) {                                                                       \
      uint8_t *restrict o = out;                                                                   \
      switch (op) {                                                                                \
      case B_EQ: VLOOP(n, o[i] = x[i] == y[i]); break;                                             \
      case B_NE: VLOOP(n, o[i] = x[i] != y[i]); break;                                             \
      case B_LT: VLOOP(n, o[i] = x[i] < y[i]); break;                                              \
      case B_LE: VLOOP(n, o[i] = x[i] <= y[i]); break;                                             \
      case B_GT: VLOOP(n, o[i] = x[i] > y[i]); break;                                              \
      default: VLOOP(n, o[i] = x[i] >= y[i]); break;                                               \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    T *restrict o = out;                                                                           \
    switch (op) {                                                                                  \
    case B_ADD: VLOOP(n, o[i] = x[i] + y[i]); break;                                               \
    case B_SUB: VLOOP(n, o[i] = x[i] - y[i]); break;                                               \
    case B_MUL: VLOOP(n, o[i] = x[i] * y[i]); break;                                               \
    case B_DIV: VLOOP(n, o[i] = x[i] / y[i]); break;                                               \
    default:                                                                                       \
      for (int64_t i = 0; i < n; i++) o[i] = FLOAT_OP(op, x[i], y[i], FMOD, POW, ATAN2, NEXT);     \
    }                                                                                              \
  }
TYPED_LOOPS(float, fmodf, powf, atan2f, nextafterf)
TYPED_LOOPS(double, fmod, pow, atan2, nextafter)

/* Complex loops: arithmetic, pow and (in)equality of both parts. */
#define COMPLEX_LOOP(NAME, T, POW)                                                                 \
  static void NAME(binop op, int64_t n, const T *restrict x, const T *restrict y,                  \
                   void *restrict out) {                                                           \
    T *restrict o = out;                                                                           \
    uint8_t *restrict c = out;                                                                     \
    switch (op) {                                                                                  \
    case B_ADD: VLOOP(n, o[i] = x[i] + y[i]); break;                                               \
    case B_SUB: VLOOP(n, o[i] = x[i] - y[i]); break;                                               \
    case B_MUL:                                                                                    \
      for (int64_t i = 0; i < n; i++) o[i] = x[i] * y[i];                                          \
      break;                                                                                       \
    case B_DIV:                                                                                    \
      for (int64_t i = 0; i < n; i++) o[i] = x[i] / y[i];                                          \
      break;                                                                                       \
    case B_POW:                                                                                    \
      for (int64_t i = 0; i < n; i++) o[i] = POW(x[i], y[i]);                                      \
      break;                                                                                       \
    case B_EQ:                                                                                     \
      for (int64_t i = 0; i < n; i++) c[i] = x[i] == y[i];                                         \
      break;                                                                                       \
    default:                                                                                       \
      for (int64_t i = 0; i < n; i++) c[i] = x[i] != y[i];                                         \
      break; /* B_NE */                                                                            \
    }                                                                                              \
  }
COMPLEX_LOOP(loop_c64, float _Complex, cpowf)
COMPLEX_LOOP(loop_c128, double _Complex, cpow)

/* nextafter in a 16-bit format, on the bits: step one unit toward y (neither is NaN). */
static uint16_t next16(uint16_t xb, uint16_t yb, float x, float y) {
  if (x == y) return yb;
  if (x == 0) return (uint16_t)((yb & 0x8000u) | 1u);
  int up = (x < y) == (x > 0); /* moving away from zero */
  return (uint16_t)(up ? xb + 1 : xb - 1);
}

/* f16 and bf16: widen a block to f32, run the f32 loop, round once (the
 * same float operation per element as computing one at a time); nextafter
 * works on the 16-bit bits. */
static void loop_half(binop op, int is_bf16, int64_t n, const uint16_t *x, const uint16_t *y,
                      void *out) {
  float (*load)(uint16_t) = is_bf16 ? jx_bf16_to_f32 : jx_f16_to_f32;
  uint16_t (*store)(float) = is_bf16 ? jx_f32_to_bf16 : jx_f32_to_f16;
  if (op == B_NEXTAFTER) {
    uint16_t nan = is_bf16 ? 0x7fc0u : 0x7e00u;
    for (int64_t i = 0; i < n; i++) {
      float a = load(x[i]), b = load(y[i]);
      ((uint16_t *)out)[i] = (a != a || b != b) ? nan : next16(x[i], y[i], a, b);
    }
    return;
  }
  enum { BLOCK = 256 };
  float a[BLOCK], b[BLOCK], r[BLOCK];
  for (int64_t s = 0; s < n; s += BLOCK) {
    int64_t m = n - s < BLOCK ? n - s : BLOCK;
    for (int64_t j = 0; j < m; j++) a[j] = load(x[s + j]), b[j] = load(y[s + j]);
    if (is_comparison(op)) {
      loop_float(op, m, a, b, (uint8_t *)out + s);
      continue;
    }
    loop_float(op, m, a, b, r);
    for (int64_t j = 0; j < m; j++) ((uint16_t *)out)[s + j] = store(r[j]);
  }
}

/* ---- integers and bool, computed in 64 bits and wrapped on store ---- */
static int64_t sign_extend(uint64_t v, int bits) {
  if (bits == 64) return (int64_t)v;
  uint64_t m = 1ull << (bits - 1);
  v &= (m << 1) - 1;
  return (int64_t)((v ^ m) - m);
}

static uint64_t ipow(uint64_t base, int64_t e, int is_signed) {
  if (e < 0) { /* only 1 and -1 have integer reciprocals */
    int64_t b = (int64_t)base;
    if (is_signed && b == -1) return (e & 1) ? (uint64_t)-1 : 1;
    return base == 1 ? 1 : 0;
  }
  uint64_t r = 1;
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return r;
}

static uint64_t int_op(binop op, uint64_t a, uint64_t b, int bits, int is_signed) {
  uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  int64_t sa = sign_extend(a, bits), sb = sign_extend(b, bits);
  uint64_t ua = a & mask, ub = b & mask;
  switch (op) {
  case B_ADD: return a + b;
  case B_SUB: return a - b;
  case B_MUL: return a * b;
  case B_DIV:
    if (ub == 0) return ~0ull;
    if (!is_signed) return ua / ub;
    if (sb == -1) return (uint64_t)0 - (uint64_t)sa; /* wraps INT_MIN / -1 to INT_MIN */
    return (uint64_t)(sa / sb);
  case B_REM:
    if (ub == 0) return a;
    if (!is_signed) return ua % ub;
    if (sb == -1) return 0;
    return (uint64_t)(sa % sb);
  case B_POW:
    return ipow(a, is_signed ? sb : (int64_t)(ub > INT64_MAX ? INT64_MAX : ub), is_signed);
  case B_MAX: return is_signed ? (sa > sb ? a : b) : (ua > ub ? a : b);
  case B_MIN: return is_signed ? (sa < sb ? a : b) : (ua < ub ? a : b);
  case B_AND: return a & b;
  case B_OR: return a | b;
  case B_XOR: return a ^ b;
  case B_SHL: return ub >= (uint64_t)bits ? 0 : ua << ub;
  case B_SHR_LOGICAL: return ub >= (uint64_t)bits ? 0 : ua >> ub;
  case B_SHR_ARITH:
    if (ub >= (uint64_t)bits) return sa < 0 ? ~0ull : 0;
    return (uint64_t)(sa >> ub);
  case B_EQ: return ua == ub;
  case B_NE: return ua != ub;
  case B_LT: return is_signed ? sa < sb : ua < ub;
  case B_LE: return is_signed ? sa <= sb : ua <= ub;
  case B_GT: return is_signed ? sa > sb : ua > ub;
  case B_GE: return is_signed ? sa >= sb : ua >= ub;
  default: return 0;
  }
}

/* Typed integer (and bool, as u8) loops for the ops whose wrapped result needs
 * no special case: +, -, * wrap in an unsigned type at least as wide (int
 * promotion would make a narrow product overflow), then truncate to T as
 * jx_store_i64 does; bitwise ops; max, min and comparisons in T. They give
 * int_op's results bit for bit. 0: op not covered, run int_op. */
#define INT_LOOPS(NAME, T, UT)                                                                     \
  static int NAME(binop op, int64_t n, const T *restrict x, const T *restrict y,                   \
                  void *restrict out) {                                                            \
    T *o = out;                                                                                    \
    uint8_t *c = out;                                                                              \
    switch (op) {                                                                                  \
    case B_ADD: VLOOP(n, o[i] = (T)((UT)x[i] + (UT)y[i])); return 1;                               \
    case B_SUB: VLOOP(n, o[i] = (T)((UT)x[i] - (UT)y[i])); return 1;                               \
    case B_MUL: VLOOP(n, o[i] = (T)((UT)x[i] * (UT)y[i])); return 1;                               \
    case B_AND: VLOOP(n, o[i] = x[i] & y[i]); return 1;                                            \
    case B_OR: VLOOP(n, o[i] = x[i] | y[i]); return 1;                                             \
    case B_XOR: VLOOP(n, o[i] = x[i] ^ y[i]); return 1;                                            \
    case B_MAX: VLOOP(n, o[i] = x[i] > y[i] ? x[i] : y[i]); return 1;                              \
    case B_MIN: VLOOP(n, o[i] = x[i] < y[i] ? x[i] : y[i]); return 1;                              \
    case B_EQ: VLOOP(n, c[i] = x[i] == y[i]); return 1;                                            \
    case B_NE: VLOOP(n, c[i] = x[i] != y[i]); return 1;                                            \
    case B_LT: VLOOP(n, c[i] = x[i] < y[i]); return 1;                                             \
    case B_LE: VLOOP(n, c[i] = x[i] <= y[i]); return 1;                                            \
    case B_GT: VLOOP(n, c[i] = x[i] > y[i]); return 1;                                             \
    case B_GE: VLOOP(n, c[i] = x[i] >= y[i]); return 1;                                            \
    default: return 0;                                                                             \
    }                                                                                              \
  }
INT_LOOPS(loop_i8, int8_t, unsigned)
INT_LOOPS(loop_i16, int16_t, unsigned)
INT_LOOPS(loop_i32, int32_t, unsigned)
INT_LOOPS(loop_i64, int64_t, uint64_t)
INT_LOOPS(loop_u8, uint8_t, unsigned)
INT_LOOPS(loop_u16, uint16_t, unsigned)
INT_LOOPS(loop_u32, uint32_t, unsigned)
INT_LOOPS(loop_u64, uint64_t, uint64_t)

static int int_fast(binop op, jx_dtype dt, int64_t n, const void *x, const void *y, void *out) {
  switch (dt) {
  case JX_BOOL: /* 0 or 1 bytes: and, or, xor, max, min and comparisons as u8 */
  case JX_U8: return loop_u8(op, n, x, y, out);
  case JX_U16: return loop_u16(op, n, x, y, out);
  case JX_U32: return loop_u32(op, n, x, y, out);
  case JX_U64: return loop_u64(op, n, x, y, out);
  case JX_I8: return loop_i8(op, n, x, y, out);
  case JX_I16: return loop_i16(op, n, x, y, out);
  case JX_I32: return loop_i32(op, n, x, y, out);
  case JX_I64: return loop_i64(op, n, x, y, out);
  default: return 0;
  }
}

static void binary_kernel(binop op, const jx_tensor *in, jx_tensor *out) {
  int64_t n = jx_shape_numel(in[0].shape);
  jx_dtype dt = in[0].dtype;
  switch (dt) {
  case JX_F32: loop_float(op, n, in[0].data, in[1].data, out[0].data); return;
  case JX_F64: loop_double(op, n, in[0].data, in[1].data, out[0].data); return;
  case JX_C64: loop_c64(op, n, in[0].data, in[1].data, out[0].data); return;
  case JX_C128: loop_c128(op, n, in[0].data, in[1].data, out[0].data); return;
  case JX_F16:
  case JX_BF16: loop_half(op, dt == JX_BF16, n, in[0].data, in[1].data, out[0].data); return;
  default: break;
  }
  if (int_fast(op, dt, n, in[0].data, in[1].data, out[0].data)) return;
  int bits = jx_dtype_bits(dt), is_signed = jx_is_signed_int(dt);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = int_op(op, (uint64_t)jx_load_i64(in[0].data, dt, i),
                        (uint64_t)jx_load_i64(in[1].data, dt, i), bits, is_signed);
    if (is_comparison(op))
      ((uint8_t *)out[0].data)[i] = (uint8_t)r;
    else
      jx_store_i64(out[0].data, dt, i, (int64_t)r);
  }
}

#define BINARY_ROW(NAME, OP, ACCEPT, OUT, JVP, TRANSPOSE)                                          \
  static jx_status infer_##NAME(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {         \
    return jx_infer_same(#NAME, ACCEPT, OUT, ctx->nin, in, out);                                   \
  }                                                                                                \
  static void eval_##NAME(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {           \
    (void)ctx;                                                                                     \
    binary_kernel(OP, in, out);                                                                    \
  }                                                                                                \
  const jx_prim jx_prim_##NAME = {.name = #NAME,                                                   \
                                  .id = JX_PRIM_##NAME,                                            \
                                  .nin = 2,                                                        \
                                  .nout = 1,                                                       \
                                  .params = "",                                                    \
                                  .infer = infer_##NAME,                                           \
                                  .eval = eval_##NAME,                                             \
                                  .jvp = JVP,                                                      \
                                  .transpose = TRANSPOSE,                                          \
                                  .elementwise = 1};

BINARY_ROW(add, B_ADD, JX_ACCEPT_NUMERIC, -1, jx_jvp_add, jx_transpose_add)
BINARY_ROW(sub, B_SUB, JX_ACCEPT_NUMERIC, -1, jx_jvp_sub, jx_transpose_sub)
BINARY_ROW(mul, B_MUL, JX_ACCEPT_NUMERIC, -1, jx_jvp_bilinear, jx_transpose_mul)
BINARY_ROW(div, B_DIV, JX_ACCEPT_NUMERIC, -1, jx_jvp_div, jx_transpose_div)
BINARY_ROW(rem, B_REM, JX_ACCEPT_NUMERIC, -1, jx_jvp_rem, NULL)
BINARY_ROW(pow, B_POW, JX_ACCEPT_NUMERIC, -1, jx_jvp_pow, NULL)
BINARY_ROW(max, B_MAX, JX_ACCEPT_ANY, -1, jx_jvp_max, NULL)
BINARY_ROW(min, B_MIN, JX_ACCEPT_ANY, -1, jx_jvp_min, NULL)
BINARY_ROW(atan2, B_ATAN2, JX_ACCEPT_FLOAT, -1, jx_jvp_atan2, NULL)
BINARY_ROW(and, B_AND, JX_ACCEPT_INT_OR_BOOL, -1, jx_jvp_zero, NULL)
BINARY_ROW(or, B_OR, JX_ACCEPT_INT_OR_BOOL, -1, jx_jvp_zero, NULL)
BINARY_ROW(xor, B_XOR, JX_ACCEPT_INT_OR_BOOL, -1, jx_jvp_zero, NULL)
BINARY_ROW(shift_left, B_SHL, JX_ACCEPT_INT, -1, jx_jvp_zero, NULL)
BINARY_ROW(shift_right_logical, B_SHR_LOGICAL, JX_ACCEPT_INT, -1, jx_jvp_zero, NULL)
BINARY_ROW(shift_right_arithmetic, B_SHR_ARITH, JX_ACCEPT_INT, -1, jx_jvp_zero, NULL)
BINARY_ROW(nextafter, B_NEXTAFTER, JX_ACCEPT_FLOAT, -1, NULL, NULL)
BINARY_ROW(eq, B_EQ, JX_ACCEPT_ANY, JX_BOOL, jx_jvp_zero, NULL)
BINARY_ROW(ne, B_NE, JX_ACCEPT_ANY, JX_BOOL, jx_jvp_zero, NULL)
BINARY_ROW(lt, B_LT, JX_ACCEPT_ANY, JX_BOOL, jx_jvp_zero, NULL)
BINARY_ROW(le, B_LE, JX_ACCEPT_ANY, JX_BOOL, jx_jvp_zero, NULL)
BINARY_ROW(gt, B_GT, JX_ACCEPT_ANY, JX_BOOL, jx_jvp_zero, NULL)
BINARY_ROW(ge, B_GE, JX_ACCEPT_ANY, JX_BOOL, jx_jvp_zero, NULL)

const jx_prim *const jx_prims_binary[] = {&jx_prim_add,
                                          &jx_prim_sub,
                                          &jx_prim_mul,
                                          &jx_prim_div,
                                          &jx_prim_rem,
                                          &jx_prim_pow,
                                          &jx_prim_max,
                                          &jx_prim_min,
                                          &jx_prim_atan2,
                                          &jx_prim_and,
                                          &jx_prim_or,
                                          &jx_prim_xor,
                                          &jx_prim_shift_left,
                                          &jx_prim_shift_right_logical,
                                          &jx_prim_shift_right_arithmetic,
                                          &jx_prim_nextafter,
                                          &jx_prim_eq,
                                          &jx_prim_ne,
                                          &jx_prim_lt,
                                          &jx_prim_le,
                                          &jx_prim_gt,
                                          &jx_prim_ge,
                                          NULL};
