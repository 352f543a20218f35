/* jx/ops.h: operations on arrays.
 *
 * NumPy-level names follow NumPy's broadcasting and JAX's promotion (array.h);
 * lax-level names (jx_dot_general, jx_gather, jx_reduce_window, ...) give the
 * primitives themselves where NumPy has no name. Every op works eagerly and,
 * once the transformations exist, under every transformation.
 *
 * Every result belongs to the innermost scope. A bad call records an error
 * naming the op, the shapes and dtypes involved and the caller's file:line,
 * and returns a poisoned array; an op given a poisoned array returns one. */
#ifndef JX_OPS_H
#define JX_OPS_H

#include "array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise, binary (broadcasting, promotion) ---- */
JX_API jx_array *jx_add(jx_array *a, jx_array *b);
JX_API jx_array *jx_sub(jx_array *a, jx_array *b);
JX_API jx_array *jx_mul(jx_array *a, jx_array *b);
/* true division: integers give floats */
JX_API jx_array *jx_div(jx_array *a, jx_array *b);
JX_API jx_array *jx_floor_divide(jx_array *a, jx_array *b); /* NumPy //, floats and integers */
/* C fmod semantics: sign of a (lax.rem) */
JX_API jx_array *jx_rem(jx_array *a, jx_array *b);
/* integers: negative exponents give 0 (1 and -1 excepted), as lax.pow */
JX_API jx_array *jx_pow(jx_array *a, jx_array *b);
JX_API jx_array *jx_maximum(jx_array *a, jx_array *b); /* NaN-propagating */
JX_API jx_array *jx_minimum(jx_array *a, jx_array *b);
JX_API jx_array *jx_atan2(jx_array *a, jx_array *b);
JX_API jx_array *jx_nextafter(jx_array *a, jx_array *b);
JX_API jx_array *jx_eq(jx_array *a, jx_array *b); /* comparisons give bool */
JX_API jx_array *jx_ne(jx_array *a, jx_array *b);
JX_API jx_array *jx_lt(jx_array *a, jx_array *b);
JX_API jx_array *jx_le(jx_array *a, jx_array *b);
JX_API jx_array *jx_gt(jx_array *a, jx_array *b);
JX_API jx_array *jx_ge(jx_array *a, jx_array *b);
JX_API jx_array *jx_logical_and(jx_array *a, jx_array *b); /* operands tested != 0; bool result */
JX_API jx_array *jx_logical_or(jx_array *a, jx_array *b);
JX_API jx_array *jx_logical_xor(jx_array *a, jx_array *b);
JX_API jx_array *jx_bitwise_and(jx_array *a, jx_array *b); /* bool and integer dtypes */
JX_API jx_array *jx_bitwise_or(jx_array *a, jx_array *b);
JX_API jx_array *jx_bitwise_xor(jx_array *a, jx_array *b);
JX_API jx_array *jx_shift_left(jx_array *a, jx_array *b); /* integers; shifts >= bit width give 0 */
JX_API jx_array *jx_shift_right_arithmetic(jx_array *a, jx_array *b);
JX_API jx_array *jx_shift_right_logical(jx_array *a, jx_array *b);

/* ---- elementwise, unary (floating ops take integers as f32, 64-bit ones as f64) ---- */
JX_API jx_array *jx_neg(jx_array *a);
JX_API jx_array *jx_abs(jx_array *a);
JX_API jx_array *jx_sign(jx_array *a);
JX_API jx_array *jx_floor(jx_array *a);
JX_API jx_array *jx_ceil(jx_array *a);
JX_API jx_array *jx_round(jx_array *a);      /* half to even, as NumPy */
JX_API jx_array *jx_round_away(jx_array *a); /* half away from zero (lax.round default) */
JX_API jx_array *jx_exp(jx_array *a);
JX_API jx_array *jx_exp2(jx_array *a);
JX_API jx_array *jx_expm1(jx_array *a);
JX_API jx_array *jx_log(jx_array *a);
JX_API jx_array *jx_log1p(jx_array *a);
JX_API jx_array *jx_sqrt(jx_array *a);
JX_API jx_array *jx_rsqrt(jx_array *a);
JX_API jx_array *jx_cbrt(jx_array *a);
JX_API jx_array *jx_square(jx_array *a);
JX_API jx_array *jx_reciprocal(jx_array *a);
JX_API jx_array *jx_tanh(jx_array *a);
JX_API jx_array *jx_logistic(jx_array *a); /* sigmoid */
JX_API jx_array *jx_sin(jx_array *a);
JX_API jx_array *jx_cos(jx_array *a);
JX_API jx_array *jx_tan(jx_array *a);
JX_API jx_array *jx_asin(jx_array *a);
JX_API jx_array *jx_acos(jx_array *a);
JX_API jx_array *jx_atan(jx_array *a);
JX_API jx_array *jx_sinh(jx_array *a);
JX_API jx_array *jx_cosh(jx_array *a);
JX_API jx_array *jx_asinh(jx_array *a);
JX_API jx_array *jx_acosh(jx_array *a);
JX_API jx_array *jx_atanh(jx_array *a);
JX_API jx_array *jx_erf(jx_array *a);
JX_API jx_array *jx_erf_inv(jx_array *a);
JX_API jx_array *jx_lgamma(jx_array *a);
JX_API jx_array *jx_digamma(jx_array *a);
JX_API jx_array *jx_isfinite(jx_array *a);           /* bool */
JX_API jx_array *jx_logical_not(jx_array *a);        /* bool */
JX_API jx_array *jx_bitwise_not(jx_array *a);        /* bool and integer dtypes */
JX_API jx_array *jx_population_count(jx_array *a);   /* integers */
JX_API jx_array *jx_integer_pow(jx_array *a, int n); /* a**n by repeated multiplication */
JX_API jx_array *jx_relu(jx_array *a);               /* derivative 0 at 0, as jax.nn.relu */
/* min(max(x, 0), 6); derivative 0 at 0 and 6 */
JX_API jx_array *jx_relu6(jx_array *a);
JX_API jx_array *jx_gelu(jx_array *a);       /* tanh approximation, as jax.nn.gelu */
JX_API jx_array *jx_gelu_exact(jx_array *a); /* erf form */
JX_API jx_array *jx_silu(jx_array *a);
JX_API jx_array *jx_softplus(jx_array *a);    /* logaddexp(x, 0); derivative sigmoid(x) */
JX_API jx_array *jx_log_sigmoid(jx_array *a); /* -softplus(-x) */

/* ---- selection and conversion ---- */
JX_API jx_array *jx_where(jx_array *cond, jx_array *a, jx_array *b); /* broadcasting */
/* lax.select_n: which is bool (n = 2) or i32; same-shaped cases */
JX_API jx_array *jx_select_n(jx_array *which, int n, jx_array *const *cases);
JX_API jx_array *jx_clip(jx_array *a, double lo, double hi);
JX_API jx_array *jx_clamp(jx_array *lo, jx_array *a, jx_array *hi); /* lax.clamp */
/* float->int truncates and saturates, NaN -> 0; int->int wraps */
JX_API jx_array *jx_astype(jx_array *a, jx_dtype dt);
/* reinterprets bits; a narrower dt adds a last dim, a wider one eats it */
JX_API jx_array *jx_bitcast_convert_type(jx_array *a, jx_dtype dt);
JX_API jx_array *jx_stop_gradient(jx_array *a);

/* ---- reductions (keepdims 0/1; JX_AXES() = all axes; negative axes count from the end) ---- */
/* ints sum in i32 (i64 under x64) */
JX_API jx_array *jx_sum(jx_array *a, jx_axes ax, int keepdims);
JX_API jx_array *jx_prod(jx_array *a, jx_axes ax, int keepdims);
JX_API jx_array *jx_max(jx_array *a, jx_axes ax, int keepdims);
JX_API jx_array *jx_min(jx_array *a, jx_axes ax, int keepdims);
JX_API jx_array *jx_all(jx_array *a, jx_axes ax, int keepdims); /* bool */
JX_API jx_array *jx_any(jx_array *a, jx_axes ax, int keepdims);
JX_API jx_array *jx_mean(jx_array *a, jx_axes ax, int keepdims);
JX_API jx_array *jx_var(jx_array *a, jx_axes ax, int keepdims); /* ddof 0 */
JX_API jx_array *jx_std(jx_array *a, jx_axes ax, int keepdims);
JX_API jx_array *jx_logsumexp(jx_array *a, jx_axes ax, int keepdims);
/* i32 (i64 under x64); first of ties; NaN wins */
JX_API jx_array *jx_argmax(jx_array *a, int axis);
JX_API jx_array *jx_argmin(jx_array *a, int axis);
JX_API jx_array *jx_softmax(jx_array *a, int axis);
JX_API jx_array *jx_log_softmax(jx_array *a, int axis);
JX_API jx_array *jx_cumsum(jx_array *a, int axis);
JX_API jx_array *jx_cumprod(jx_array *a, int axis);
JX_API jx_array *jx_cummax(jx_array *a, int axis);
JX_API jx_array *jx_cummin(jx_array *a, int axis);
/* op: "sum", "prod", "max", "min" */
JX_API jx_array *jx_cumulative(jx_array *a, const char *op, int axis, int reverse);

/* ---- shapes ---- */
JX_API jx_array *jx_reshape(jx_array *a, jx_shape s);     /* one -1 allowed */
JX_API jx_array *jx_transpose(jx_array *a, jx_axes perm); /* JX_AXES() reverses */
JX_API jx_array *jx_broadcast_to(jx_array *a, jx_shape s);
JX_API jx_array *jx_broadcast_in_dim(jx_array *a, jx_shape s, jx_axes dims); /* lax form */
JX_API jx_array *jx_expand_dims(jx_array *a, int axis);
JX_API jx_array *jx_squeeze(jx_array *a, jx_axes ax); /* JX_AXES() = all size-1 dims */
JX_API jx_array *jx_flip(jx_array *a, jx_axes ax);    /* lax.rev; JX_AXES() = all */
JX_API jx_array *jx_concatenate(int n, jx_array *const *xs, int axis);
JX_API jx_array *jx_stack(int n, jx_array *const *xs, int axis);
/* step JX_SHAPE() = all 1; positive steps */
JX_API jx_array *jx_slice(jx_array *a, jx_shape start, jx_shape stop, jx_shape step);
/* starts: integer scalars, clamped into range */
JX_API jx_array *jx_dynamic_slice(jx_array *a, jx_array *const *starts, jx_shape sizes);
JX_API jx_array *jx_dynamic_update_slice(jx_array *a, jx_array *update, jx_array *const *starts);
JX_API jx_array *jx_pad(jx_array *a, jx_shape lo, jx_shape hi, double value);
/* lax.pad: negative lo/hi crop */
JX_API jx_array *jx_pad_general(jx_array *a, jx_array *value, jx_shape lo, jx_shape hi,
                                jx_shape interior);
JX_API jx_array *jx_iota(jx_dtype dt, jx_shape s, int axis);

/* ---- indexing ---- */
/* negative indices wrap once; out of range gives NaN / INT_MIN / true */
JX_API jx_array *jx_take(jx_array *a, jx_array *indices, int axis);
JX_API jx_array *jx_take_along_axis(jx_array *a, jx_array *indices, int axis);
JX_API jx_array *jx_one_hot(jx_array *indices, int64_t n, jx_dtype dt);
/* ids out of [0, n) are dropped */
JX_API jx_array *jx_segment_sum(jx_array *data, jx_array *segment_ids, int64_t n);

/* lax.gather / lax.scatter with XLA's dimension numbers */
typedef enum {
  JX_GATHER_CLIP,
  JX_GATHER_FILL
} jx_gather_mode; /* out-of-range starts:
clamped, or the slice filled with NaN/INT_MIN/true */
typedef struct {
  jx_axes offset_dims, collapsed_slice_dims, start_index_map;
  int index_vector_dim;
} jx_gather_dims;
JX_API jx_array *jx_gather(jx_array *operand, jx_array *indices, const jx_gather_dims *dims,
                           jx_shape slice_sizes, jx_gather_mode mode);

typedef enum {
  JX_SCATTER_REPLACE,
  JX_SCATTER_ADD,
  JX_SCATTER_MUL,
  JX_SCATTER_MIN,
  JX_SCATTER_MAX
} jx_scatter_op;
typedef enum { JX_SCATTER_DROP, JX_SCATTER_CLIP } jx_scatter_mode; /* out-of-range windows */
typedef struct {
  jx_axes update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
  int index_vector_dim;
} jx_scatter_dims;
JX_API jx_array *jx_scatter(jx_array *operand, jx_array *indices, jx_array *updates,
                            const jx_scatter_dims *dims, jx_scatter_op op, jx_scatter_mode mode);

/* ---- sorting ---- */
JX_API jx_array *jx_sort(jx_array *a, int axis);    /* stable; NaNs last */
JX_API jx_array *jx_argsort(jx_array *a, int axis); /* stable; i32 (i64 under x64) */
/* lax.sort: lexicographic on the first num_keys operands, stable */
JX_API jx_status jx_sort_multi(int n, jx_array *const *operands, int axis, int num_keys,
                               jx_array **out);
/* last axis; ties keep the lower index */
JX_API jx_status jx_top_k(jx_array *a, int k, jx_array **values, jx_array **indices);

/* ---- contractions and windows ---- */
JX_API jx_array *jx_matmul(jx_array *a, jx_array *b); /* NumPy matmul rules */
/* "ij,jk->ik"; implicit output and "..." supported */
JX_API jx_array *jx_einsum(const char *spec, int n, jx_array *const *xs);
JX_API jx_array *jx_dot_general(jx_array *a, jx_array *b, jx_axes lhs_contract,
                                jx_axes rhs_contract, jx_axes lhs_batch, jx_axes rhs_batch);
/* result: batch dims, then a's free dims, then b's free dims */
/* preferred_element_type */
JX_API jx_array *jx_dot_general_typed(jx_array *a, jx_array *b, jx_axes lhs_contract,
                                      jx_axes rhs_contract, jx_axes lhs_batch, jx_axes rhs_batch,
                                      jx_dtype preferred);
/* "NHWC,HWIO,NHWC" or "NCHW,OIHW,NCHW" */
JX_API jx_array *jx_conv(jx_array *x, jx_array *w, jx_shape strides, jx_shape pad_lo,
                         jx_shape pad_hi, const char *layout);
JX_API jx_array *jx_conv_general_dilated(jx_array *x, jx_array *w, jx_shape strides,
                                         jx_shape pad_lo, jx_shape pad_hi, jx_shape lhs_dilation,
                                         jx_shape rhs_dilation, const char *layout,
                                         int feature_group_count);
/* JX_SHAPE() for strides or dilations means all 1; layout letters: N batch,
   C feature, H W D ... spatial (any letters), O/I for the kernel */
/* op: "sum", "max", "min"; padding takes the op's identity */
JX_API jx_array *jx_reduce_window(jx_array *a, const char *op, jx_shape window, jx_shape strides,
                                  jx_shape pad_lo, jx_shape pad_hi);
JX_API jx_array *jx_max_pool(jx_array *x, jx_shape window, jx_shape strides, const char *padding);
JX_API jx_array *jx_avg_pool(jx_array *x, jx_shape window, jx_shape strides, const char *padding);
/* NHWC; padding "VALID" or "SAME" */

/* ---- complex numbers (docs/dtypes.md, "Complex numbers") ----
 * jnp.real / jnp.imag: the parts of a complex array in its parts' dtype (a
 * real array is its own real part and has imaginary part 0); jnp.conj: the
 * conjugate (a real array is returned as it is); jx_complex(re, im): lax.complex
 * after promoting both to one float dtype (ints compute in f32, see
 * jx_to_inexact), c64 from f32 and c128 from f64; jnp.angle: atan2(imag,
 * real), real-valued. jx_abs of a complex array is its modulus (real). */
JX_API jx_array *jx_real(jx_array *a);
JX_API jx_array *jx_imag(jx_array *a);
JX_API jx_array *jx_conj(jx_array *a);
JX_API jx_array *jx_complex(jx_array *re, jx_array *im);
JX_API jx_array *jx_angle(jx_array *a);

#ifndef JX_NO_LOCATION_MACROS
#define jx_add(...)                    JX_LOCATED(jx_add, __VA_ARGS__)
#define jx_sub(...)                    JX_LOCATED(jx_sub, __VA_ARGS__)
#define jx_mul(...)                    JX_LOCATED(jx_mul, __VA_ARGS__)
#define jx_div(...)                    JX_LOCATED(jx_div, __VA_ARGS__)
#define jx_floor_divide(...)           JX_LOCATED(jx_floor_divide, __VA_ARGS__)
#define jx_rem(...)                    JX_LOCATED(jx_rem, __VA_ARGS__)
#define jx_pow(...)                    JX_LOCATED(jx_pow, __VA_ARGS__)
#define jx_maximum(...)                JX_LOCATED(jx_maximum, __VA_ARGS__)
#define jx_minimum(...)                JX_LOCATED(jx_minimum, __VA_ARGS__)
#define jx_atan2(...)                  JX_LOCATED(jx_atan2, __VA_ARGS__)
#define jx_nextafter(...)              JX_LOCATED(jx_nextafter, __VA_ARGS__)
#define jx_eq(...)                     JX_LOCATED(jx_eq, __VA_ARGS__)
#define jx_ne(...)                     JX_LOCATED(jx_ne, __VA_ARGS__)
#define jx_lt(...)                     JX_LOCATED(jx_lt, __VA_ARGS__)
#define jx_le(...)                     JX_LOCATED(jx_le, __VA_ARGS__)
#define jx_gt(...)                     JX_LOCATED(jx_gt, __VA_ARGS__)
#define jx_ge(...)                     JX_LOCATED(jx_ge, __VA_ARGS__)
#define jx_logical_and(...)            JX_LOCATED(jx_logical_and, __VA_ARGS__)
#define jx_logical_or(...)             JX_LOCATED(jx_logical_or, __VA_ARGS__)
#define jx_logical_xor(...)            JX_LOCATED(jx_logical_xor, __VA_ARGS__)
#define jx_bitwise_and(...)            JX_LOCATED(jx_bitwise_and, __VA_ARGS__)
#define jx_bitwise_or(...)             JX_LOCATED(jx_bitwise_or, __VA_ARGS__)
#define jx_bitwise_xor(...)            JX_LOCATED(jx_bitwise_xor, __VA_ARGS__)
#define jx_shift_left(...)             JX_LOCATED(jx_shift_left, __VA_ARGS__)
#define jx_shift_right_arithmetic(...) JX_LOCATED(jx_shift_right_arithmetic, __VA_ARGS__)
#define jx_shift_right_logical(...)    JX_LOCATED(jx_shift_right_logical, __VA_ARGS__)
#define jx_neg(...)                    JX_LOCATED(jx_neg, __VA_ARGS__)
#define jx_abs(...)                    JX_LOCATED(jx_abs, __VA_ARGS__)
#define jx_sign(...)                   JX_LOCATED(jx_sign, __VA_ARGS__)
#define jx_floor(...)                  JX_LOCATED(jx_floor, __VA_ARGS__)
#define jx_ceil(...)                   JX_LOCATED(jx_ceil, __VA_ARGS__)
#define jx_round(...)                  JX_LOCATED(jx_round, __VA_ARGS__)
#define jx_round_away(...)             JX_LOCATED(jx_round_away, __VA_ARGS__)
#define jx_exp(...)                    JX_LOCATED(jx_exp, __VA_ARGS__)
#define jx_exp2(...)                   JX_LOCATED(jx_exp2, __VA_ARGS__)
#define jx_expm1(...)                  JX_LOCATED(jx_expm1, __VA_ARGS__)
#define jx_log(...)                    JX_LOCATED(jx_log, __VA_ARGS__)
#define jx_log1p(...)                  JX_LOCATED(jx_log1p, __VA_ARGS__)
#define jx_sqrt(...)                   JX_LOCATED(jx_sqrt, __VA_ARGS__)
#define jx_rsqrt(...)                  JX_LOCATED(jx_rsqrt, __VA_ARGS__)
#define jx_cbrt(...)                   JX_LOCATED(jx_cbrt, __VA_ARGS__)
#define jx_square(...)                 JX_LOCATED(jx_square, __VA_ARGS__)
#define jx_reciprocal(...)             JX_LOCATED(jx_reciprocal, __VA_ARGS__)
#define jx_tanh(...)                   JX_LOCATED(jx_tanh, __VA_ARGS__)
#define jx_logistic(...)               JX_LOCATED(jx_logistic, __VA_ARGS__)
#define jx_sin(...)                    JX_LOCATED(jx_sin, __VA_ARGS__)
#define jx_cos(...)                    JX_LOCATED(jx_cos, __VA_ARGS__)
#define jx_tan(...)                    JX_LOCATED(jx_tan, __VA_ARGS__)
#define jx_asin(...)                   JX_LOCATED(jx_asin, __VA_ARGS__)
#define jx_acos(...)                   JX_LOCATED(jx_acos, __VA_ARGS__)
#define jx_atan(...)                   JX_LOCATED(jx_atan, __VA_ARGS__)
#define jx_sinh(...)                   JX_LOCATED(jx_sinh, __VA_ARGS__)
#define jx_cosh(...)                   JX_LOCATED(jx_cosh, __VA_ARGS__)
#define jx_asinh(...)                  JX_LOCATED(jx_asinh, __VA_ARGS__)
#define jx_acosh(...)                  JX_LOCATED(jx_acosh, __VA_ARGS__)
#define jx_atanh(...)                  JX_LOCATED(jx_atanh, __VA_ARGS__)
#define jx_erf(...)                    JX_LOCATED(jx_erf, __VA_ARGS__)
#define jx_erf_inv(...)                JX_LOCATED(jx_erf_inv, __VA_ARGS__)
#define jx_lgamma(...)                 JX_LOCATED(jx_lgamma, __VA_ARGS__)
#define jx_digamma(...)                JX_LOCATED(jx_digamma, __VA_ARGS__)
#define jx_isfinite(...)               JX_LOCATED(jx_isfinite, __VA_ARGS__)
#define jx_logical_not(...)            JX_LOCATED(jx_logical_not, __VA_ARGS__)
#define jx_bitwise_not(...)            JX_LOCATED(jx_bitwise_not, __VA_ARGS__)
#define jx_population_count(...)       JX_LOCATED(jx_population_count, __VA_ARGS__)
#define jx_integer_pow(...)            JX_LOCATED(jx_integer_pow, __VA_ARGS__)
#define jx_relu(...)                   JX_LOCATED(jx_relu, __VA_ARGS__)
#define jx_relu6(...)                  JX_LOCATED(jx_relu6, __VA_ARGS__)
#define jx_gelu(...)                   JX_LOCATED(jx_gelu, __VA_ARGS__)
#define jx_gelu_exact(...)             JX_LOCATED(jx_gelu_exact, __VA_ARGS__)
#define jx_silu(...)                   JX_LOCATED(jx_silu, __VA_ARGS__)
#define jx_softplus(...)               JX_LOCATED(jx_softplus, __VA_ARGS__)
#define jx_log_sigmoid(...)            JX_LOCATED(jx_log_sigmoid, __VA_ARGS__)
#define jx_where(...)                  JX_LOCATED(jx_where, __VA_ARGS__)
#define jx_select_n(...)               JX_LOCATED(jx_select_n, __VA_ARGS__)
#define jx_clip(...)                   JX_LOCATED(jx_clip, __VA_ARGS__)
#define jx_clamp(...)                  JX_LOCATED(jx_clamp, __VA_ARGS__)
#define jx_astype(...)                 JX_LOCATED(jx_astype, __VA_ARGS__)
#define jx_bitcast_convert_type(...)   JX_LOCATED(jx_bitcast_convert_type, __VA_ARGS__)
#define jx_stop_gradient(...)          JX_LOCATED(jx_stop_gradient, __VA_ARGS__)
#define jx_sum(...)                    JX_LOCATED(jx_sum, __VA_ARGS__)
#define jx_prod(...)                   JX_LOCATED(jx_prod, __VA_ARGS__)
#define jx_max(...)                    JX_LOCATED(jx_max, __VA_ARGS__)
#define jx_min(...)                    JX_LOCATED(jx_min, __VA_ARGS__)
#define jx_all(...)                    JX_LOCATED(jx_all, __VA_ARGS__)
#define jx_any(...)                    JX_LOCATED(jx_any, __VA_ARGS__)
#define jx_mean(...)                   JX_LOCATED(jx_mean, __VA_ARGS__)
#define jx_var(...)                    JX_LOCATED(jx_var, __VA_ARGS__)
#define jx_std(...)                    JX_LOCATED(jx_std, __VA_ARGS__)
#define jx_logsumexp(...)              JX_LOCATED(jx_logsumexp, __VA_ARGS__)
#define jx_argmax(...)                 JX_LOCATED(jx_argmax, __VA_ARGS__)
#define jx_argmin(...)                 JX_LOCATED(jx_argmin, __VA_ARGS__)
#define jx_softmax(...)                JX_LOCATED(jx_softmax, __VA_ARGS__)
#define jx_log_softmax(...)            JX_LOCATED(jx_log_softmax, __VA_ARGS__)
#define jx_cumsum(...)                 JX_LOCATED(jx_cumsum, __VA_ARGS__)
#define jx_cumprod(...)                JX_LOCATED(jx_cumprod, __VA_ARGS__)
#define jx_cummax(...)                 JX_LOCATED(jx_cummax, __VA_ARGS__)
#define jx_cummin(...)                 JX_LOCATED(jx_cummin, __VA_ARGS__)
#define jx_cumulative(...)             JX_LOCATED(jx_cumulative, __VA_ARGS__)
#define jx_reshape(...)                JX_LOCATED(jx_reshape, __VA_ARGS__)
#define jx_transpose(...)              JX_LOCATED(jx_transpose, __VA_ARGS__)
#define jx_broadcast_to(...)           JX_LOCATED(jx_broadcast_to, __VA_ARGS__)
#define jx_broadcast_in_dim(...)       JX_LOCATED(jx_broadcast_in_dim, __VA_ARGS__)
#define jx_expand_dims(...)            JX_LOCATED(jx_expand_dims, __VA_ARGS__)
#define jx_squeeze(...)                JX_LOCATED(jx_squeeze, __VA_ARGS__)
#define jx_flip(...)                   JX_LOCATED(jx_flip, __VA_ARGS__)
#define jx_concatenate(...)            JX_LOCATED(jx_concatenate, __VA_ARGS__)
#define jx_stack(...)                  JX_LOCATED(jx_stack, __VA_ARGS__)
#define jx_slice(...)                  JX_LOCATED(jx_slice, __VA_ARGS__)
#define jx_dynamic_slice(...)          JX_LOCATED(jx_dynamic_slice, __VA_ARGS__)
#define jx_dynamic_update_slice(...)   JX_LOCATED(jx_dynamic_update_slice, __VA_ARGS__)
#define jx_pad(...)                    JX_LOCATED(jx_pad, __VA_ARGS__)
#define jx_pad_general(...)            JX_LOCATED(jx_pad_general, __VA_ARGS__)
#define jx_iota(...)                   JX_LOCATED(jx_iota, __VA_ARGS__)
#define jx_take(...)                   JX_LOCATED(jx_take, __VA_ARGS__)
#define jx_take_along_axis(...)        JX_LOCATED(jx_take_along_axis, __VA_ARGS__)
#define jx_one_hot(...)                JX_LOCATED(jx_one_hot, __VA_ARGS__)
#define jx_segment_sum(...)            JX_LOCATED(jx_segment_sum, __VA_ARGS__)
#define jx_gather(...)                 JX_LOCATED(jx_gather, __VA_ARGS__)
#define jx_scatter(...)                JX_LOCATED(jx_scatter, __VA_ARGS__)
#define jx_sort(...)                   JX_LOCATED(jx_sort, __VA_ARGS__)
#define jx_argsort(...)                JX_LOCATED(jx_argsort, __VA_ARGS__)
#define jx_sort_multi(...)             JX_LOCATED_STATUS(jx_sort_multi, __VA_ARGS__)
#define jx_top_k(...)                  JX_LOCATED_STATUS(jx_top_k, __VA_ARGS__)
#define jx_matmul(...)                 JX_LOCATED(jx_matmul, __VA_ARGS__)
#define jx_einsum(...)                 JX_LOCATED(jx_einsum, __VA_ARGS__)
#define jx_dot_general(...)            JX_LOCATED(jx_dot_general, __VA_ARGS__)
#define jx_dot_general_typed(...)      JX_LOCATED(jx_dot_general_typed, __VA_ARGS__)
#define jx_conv(...)                   JX_LOCATED(jx_conv, __VA_ARGS__)
#define jx_conv_general_dilated(...)   JX_LOCATED(jx_conv_general_dilated, __VA_ARGS__)
#define jx_reduce_window(...)          JX_LOCATED(jx_reduce_window, __VA_ARGS__)
#define jx_max_pool(...)               JX_LOCATED(jx_max_pool, __VA_ARGS__)
#define jx_avg_pool(...)               JX_LOCATED(jx_avg_pool, __VA_ARGS__)

#define jx_real(...)    JX_LOCATED(jx_real, __VA_ARGS__)
#define jx_imag(...)    JX_LOCATED(jx_imag, __VA_ARGS__)
#define jx_conj(...)    JX_LOCATED(jx_conj, __VA_ARGS__)
#define jx_complex(...) JX_LOCATED(jx_complex, __VA_ARGS__)
#define jx_angle(...)   JX_LOCATED(jx_angle, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
