/* jx/array.h: dtypes and arrays.
 *
 * Arrays are immutable, row-major and reference counted (see base.h for who
 * owns what). Creation functions copy the host data they are given.
 *
 * Type promotion follows JAX's lattice (docs/dtypes.md has the table):
 *   bool < int (weak) < {u8 < u16 < u32 < u64, i8 < i16 < i32 < i64}
 *   u8 -> i16, u16 -> i32, u32 -> i64, {u64, i64} -> float (weak)
 *   float (weak) < {bf16, f16} < f32 < f64
 *   float (weak) < complex (weak) < c64 < c128, f32 -> c64, f64 -> c128
 * jx_scalar returns a weakly typed scalar: in a binary op it takes the other
 * operand's dtype when that one is of the same or a higher kind
 * (bf16_array * jx_scalar(JX_F32, 2) is bf16) and keeps its own dtype when it
 * wins (i32_array * jx_scalar(JX_F32, 2) is f32). u64 + i64 is f64;
 * floating functions of integers (jx_div, jx_exp, ...) compute in f32 for
 * bool and integers up to 32 bits and in f64 for 64-bit integers, as JAX
 * does.
 *
 * Modes (docs/dtypes.md, "x32 and x64 modes"). By default jx gives what JAX
 * gives in its default mode (jax_enable_x64=False) wherever JAX could compute
 * the result there: a 64-bit result of arrays of up to 32 bits is 32-bit
 * (i32 + u32 is i32, i32_array * jx_scalar(JX_F64, 0.5) is f32, the sum of
 * i32 is i32), indices are i32, and jx_random_* draw default-mode JAX's
 * bits. Explicit i64, u64 and f64 arrays still work and stay 64-bit, with x64
 * JAX's rules, as do 64-bit weak scalars alone (jx_scalar(JX_F64, 1) *
 * jx_scalar(JX_F64, 2) is f64). JX_ENABLE_X64=1 in the
 * environment, or jx_config_enable_x64(1), switches to x64 JAX's rules everywhere. A
 * program is traced under the mode in force; functions cache their programs
 * per mode, so one called after a switch is traced again. */
#ifndef JX_ARRAY_H
#define JX_ARRAY_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { /* append-only */
               JX_BOOL,
               JX_I8,
               JX_I16,
               JX_I32,
               JX_I64,
               JX_U8,
               JX_U16,
               JX_U32,
               JX_U64,
               JX_F16,
               JX_BF16,
               JX_F32,
               JX_F64,
               JX_C64, /* complex: two f32 (real, imaginary), as C's float _Complex */
               JX_C128 /* two f64 */
} jx_dtype;
#define JX_NUM_DTYPES 15

JX_API const char *jx_dtype_name(jx_dtype dt); /* "f32", "bf16", ...; "?" if invalid */
JX_API size_t jx_dtype_size(jx_dtype dt);      /* bytes per element; 0 if invalid */
/* both strongly typed; JAX's promote_types, the same in both modes */
JX_API jx_dtype jx_promote_types(jx_dtype a, jx_dtype b);
/* 1: x64 JAX's rules; 0: the default mode */
JX_API void jx_config_enable_x64(int enable);
JX_API int jx_x64_enabled(void); /* the mode: JX_ENABLE_X64 until jx_config_enable_x64 sets it */

/* 16-bit float conversions, round to nearest even; NaN and inf are kept and
 * overflow goes to inf. */
JX_API uint16_t jx_f32_to_bf16(float x);
JX_API float jx_bf16_to_f32(uint16_t x);
JX_API uint16_t jx_f32_to_f16(float x);
JX_API float jx_f16_to_f32(uint16_t x);
JX_API uint16_t jx_f64_to_f16(double x); /* rounds once, not via f32 */
JX_API uint16_t jx_f64_to_bf16(double x);

/* ---- creation: results belong to the innermost scope ---- */
JX_API jx_array *jx_array_from(jx_dtype dt, jx_shape s, const void *host_data); /* copies */
JX_API jx_array *jx_scalar(jx_dtype dt, double v); /* weakly typed, see above */
/* A weakly typed complex scalar re + im*i (a Python complex in JAX); dt is
 * JX_C64 or JX_C128. */
JX_API jx_array *jx_complex_scalar(jx_dtype dt, double re, double im);
JX_API jx_array *jx_zeros(jx_dtype dt, jx_shape s);
/* A shape and dtype with no value, as jax.ShapeDtypeStruct: an example input
 * for what needs only shapes (jx_eval_shape, jx_fn_cost,
 * jx_sharding_estimate_of, jx_sharding_plan_print), so that a model larger
 * than this machine's memory can be costed and planned. Any use that needs a
 * value (an op, jx_call, jx_read) fails, naming where it was made. */
JX_API jx_array *jx_shape_dtype_struct(jx_dtype dt, jx_shape s);
JX_API jx_array *jx_ones(jx_dtype dt, jx_shape s);
JX_API jx_array *jx_full(jx_dtype dt, jx_shape s, double v);
JX_API jx_array *jx_arange(jx_dtype dt, double start, double stop, double step);
JX_API jx_array *jx_eye(jx_dtype dt, int64_t n);

/* ---- inspection ---- */
JX_API jx_dtype jx_dtype_of(const jx_array *a);
JX_API jx_shape jx_shape_of(const jx_array *a); /* a poisoned array has rank 0 */
JX_API int jx_ndim(const jx_array *a);
JX_API int64_t jx_size(const jx_array *a);    /* element count; -1 and an error for NULL */
JX_API int jx_is_weak(const jx_array *a);     /* 1 for a weakly typed value */
JX_API int jx_is_poisoned(const jx_array *a); /* 1 if an earlier error produced it */
/* waits; bytes must equal size * dtype size */
JX_API jx_status jx_read(const jx_array *a, void *dst, size_t bytes);
/* a one-element real array to double; NaN and an error on error, and for a
 * complex array (which jx_item_complex reads) */
JX_API double jx_item(const jx_array *a);
/* a one-element array's real and imaginary parts (im 0 for a real dtype);
 * both NaN on error */
JX_API jx_status jx_item_complex(const jx_array *a, double *re, double *im);
JX_API jx_status jx_block_until_ready(const jx_array *a);
JX_API void jx_print(const jx_array *a, FILE *f); /* NumPy-like text */
JX_API char *jx_format(const jx_array *a);        /* the same text; caller frees */

/* ---- .npy files (NumPy format 1.0-3.0; C or Fortran order; either byte order) ---- */
JX_API jx_status jx_save_npy(const char *path, const jx_array *a);
/* poisoned with an error naming the file when it is missing, corrupt or truncated */
JX_API jx_array *jx_load_npy(const char *path);

#ifndef JX_NO_LOCATION_MACROS
#define jx_array_from(...)         JX_LOCATED(jx_array_from, __VA_ARGS__)
#define jx_scalar(...)             JX_LOCATED(jx_scalar, __VA_ARGS__)
#define jx_complex_scalar(...)     JX_LOCATED(jx_complex_scalar, __VA_ARGS__)
#define jx_zeros(...)              JX_LOCATED(jx_zeros, __VA_ARGS__)
#define jx_shape_dtype_struct(...) JX_LOCATED(jx_shape_dtype_struct, __VA_ARGS__)
#define jx_ones(...)               JX_LOCATED(jx_ones, __VA_ARGS__)
#define jx_full(...)               JX_LOCATED(jx_full, __VA_ARGS__)
#define jx_arange(...)             JX_LOCATED(jx_arange, __VA_ARGS__)
#define jx_eye(...)                JX_LOCATED(jx_eye, __VA_ARGS__)
#define jx_read(...)               JX_LOCATED_STATUS(jx_read, __VA_ARGS__)
#define jx_item(...)               JX_LOCATED_DOUBLE(jx_item, __VA_ARGS__)
#define jx_item_complex(...)       JX_LOCATED_STATUS(jx_item_complex, __VA_ARGS__)
#define jx_save_npy(...)           JX_LOCATED_STATUS(jx_save_npy, __VA_ARGS__)
#define jx_load_npy(...)           JX_LOCATED(jx_load_npy, __VA_ARGS__)

#define jx_size(...)              JX_LOCATED_I64(jx_size, __VA_ARGS__)
#define jx_block_until_ready(...) JX_LOCATED_STATUS(jx_block_until_ready, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
