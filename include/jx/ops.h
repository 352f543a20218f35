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

/* ==== the jax.numpy / jax.nn surface: composites of the ops above ====
 * Each is built from the ops and primitives above as jax.numpy builds it, so
 * grad, vmap, jit and sharding apply unchanged; values, dtypes and
 * gradients follow JAX (docs/numpy.md lists the surface). An `int axis`
 * documented as "JX_NONE flattens" takes JX_NONE for NumPy's axis=None. */

/* ---- linear algebra helpers (jnp.dot, vdot, tensordot, outer, kron, trace, diag, tri) ---- */
/* 0-d: product; 1-D.1-D: inner; N-D.1-D: over a's last axis; N-D.M-D: a's last with b's
   second-to-last */
JX_API jx_array *jx_dot(jx_array *a, jx_array *b);
JX_API jx_array *jx_vdot(jx_array *a, jx_array *b); /* both flattened; equal sizes */
/* a's last n axes with b's first n */
JX_API jx_array *jx_tensordot(jx_array *a, jx_array *b, int n);
/* a_axes[i] contracted with b_axes[i]; result: a's free axes, then b's */
JX_API jx_array *jx_tensordot_axes(jx_array *a, jx_array *b, jx_axes a_axes, jx_axes b_axes);
JX_API jx_array *jx_outer(jx_array *a, jx_array *b); /* both flattened */
JX_API jx_array *jx_kron(jx_array *a, jx_array *b);
/* the offset diagonal of the planes (axis1, axis2), as a new last axis */
JX_API jx_array *jx_diagonal(jx_array *a, int offset, int axis1, int axis2);
/* jnp.trace (jx_trace is another name inside jx): the sum of jx_diagonal */
JX_API jx_array *jx_matrix_trace(jx_array *a, int offset, int axis1, int axis2);
/* 1-D: a square matrix with v on diagonal k; 2-D: its diagonal k */
JX_API jx_array *jx_diag(jx_array *v, int k);
JX_API jx_array *jx_tril(jx_array *a, int k); /* last two axes; zero above diagonal k */
JX_API jx_array *jx_triu(jx_array *a, int k); /* zero below diagonal k */

/* ---- construction ---- */
JX_API jx_array *jx_zeros_like(jx_array *a); /* a's dtype (and weak type) and shape */
JX_API jx_array *jx_ones_like(jx_array *a);
JX_API jx_array *jx_full_like(jx_array *a, double v);
/* num points from start to stop (broadcast together; the points along axis of the result),
   stop included when endpoint; dtype: the inexact type of start and stop; differentiable in
   start and stop */
JX_API jx_array *jx_linspace(jx_array *start, jx_array *stop, int64_t num, int endpoint, int axis);
JX_API jx_array *jx_logspace(jx_array *start, jx_array *stop, int64_t num, int endpoint,
                             double base, int axis); /* base ** linspace */
/* indexing "xy" (the first two outputs' axes swapped) or "ij"; out[0..n) */
JX_API jx_status jx_meshgrid(int n, jx_array *const *xs, const char *indexing, jx_array **out);
/* jnp.meshgrid(..., sparse=True): out[i] has xs[i]'s length on its grid axis and 1 elsewhere */
JX_API jx_status jx_meshgrid_sparse(int n, jx_array *const *xs, const char *indexing,
                                    jx_array **out);

/* ---- shapes ---- */
/* jnp.split(a, n): n equal parts along axis (out[0..n)); the axis must divide evenly */
JX_API jx_status jx_split_sections(jx_array *a, int n, int axis, jx_array **out);
/* at the positions idx[0..n) (non-decreasing, in [0, len]): out[0..n] */
JX_API jx_status jx_split_at(jx_array *a, int n, const int64_t *idx, int axis, jx_array **out);
/* n parts, the first len % n of them one longer */
JX_API jx_status jx_array_split(jx_array *a, int n, int axis, jx_array **out);
JX_API jx_array *jx_tile(jx_array *a, jx_shape reps);
/* each element repeats times along axis (JX_NONE flattens first) */
JX_API jx_array *jx_repeat(jx_array *a, int64_t repeats, int axis);
/* element i repeats[i] times (n = the axis' length) */
JX_API jx_array *jx_repeat_counts(jx_array *a, int n, const int64_t *repeats, int axis);
/* shift elements along axis (JX_NONE: the flattened array, reshaped back); negative shifts
   roll backwards */
JX_API jx_array *jx_roll(jx_array *a, int64_t shift, int axis);
/* jnp.roll(a, shifts, axes) with sequences: shifts[i] along axes[i], in turn (i < n) */
JX_API jx_array *jx_roll_axes(jx_array *a, int n, const int64_t *shifts, const int *axes);
JX_API jx_array *jx_moveaxis(jx_array *a, jx_axes source, jx_axes destination);
JX_API jx_array *jx_swapaxes(jx_array *a, int axis1, int axis2);
JX_API jx_array *jx_diff(jx_array *a, int n, int axis); /* n-th difference; bool: != */
/* jnp.diff(a, n, axis, prepend=, append=): each (NULL: none) concatenated along axis first, a
   scalar as one slice of a's shape */
JX_API jx_array *jx_diff_with(jx_array *a, int n, int axis, jx_array *prepend, jx_array *append);
/* jnp.pad modes: "constant" (value), "edge", "reflect", "symmetric", "wrap", "linear_ramp"
   (ramps to value), "empty" (zeros, as JAX fills it); reflect and symmetric are NumPy's even
   reflections */
JX_API jx_array *jx_pad_mode(jx_array *a, jx_shape lo, jx_shape hi, const char *mode, double value);
/* jnp.pad's statistic modes "maximum", "minimum", "mean", "median": each axis in turn is padded
   with the statistic of its first stat_lo[d] elements before and of its last stat_hi[d] after
   (JX_SHAPE() for both: the whole axis; lengths >= 1, at most the axis), rounded for integers */
JX_API jx_array *jx_pad_stat(jx_array *a, jx_shape lo, jx_shape hi, const char *mode,
                             jx_shape stat_lo, jx_shape stat_hi);
/* mode "reflect" or "symmetric" with jnp.pad's reflect_type: "even" (NULL, jx_pad_mode's) or
   "odd" (each mirror image goes through the edge value: 2 * edge - image) */
JX_API jx_array *jx_pad_reflect(jx_array *a, jx_shape lo, jx_shape hi, const char *mode,
                                const char *reflect_type);

/* ---- elementwise ---- */
JX_API jx_array *jx_isnan(jx_array *a); /* bool */
JX_API jx_array *jx_isinf(jx_array *a);
/* NaN -> nan, +inf -> posinf, -inf -> neginf; posinf = +inf / neginf = -inf pick the dtype's
   largest / lowest finite value (JAX's None) */
JX_API jx_array *jx_nan_to_num(jx_array *a, double nan, double posinf, double neginf);
/* |a - b| <= atol + rtol * |b|; infinities equal when equal; NaNs equal when equal_nan */
JX_API jx_array *jx_isclose(jx_array *a, jx_array *b, double rtol, double atol, int equal_nan);
JX_API jx_array *jx_allclose(jx_array *a, jx_array *b, double rtol, double atol,
                             int equal_nan); /* a bool scalar */
JX_API jx_array *jx_log2(jx_array *a);
JX_API jx_array *jx_log10(jx_array *a);
/* log(exp(a) + exp(b)) without overflow; JAX's custom derivative */
JX_API jx_array *jx_logaddexp(jx_array *a, jx_array *b);
JX_API jx_array *jx_hypot(jx_array *a, jx_array *b);
/* jnp.clip with array bounds (NULL: no bound): minimum(maximum(lo, a), hi) */
JX_API jx_array *jx_clip_arrays(jx_array *a, jx_array *lo, jx_array *hi);

/* ---- jax.nn activations ---- */
JX_API jx_array *jx_elu(jx_array *a, double alpha);
JX_API jx_array *jx_leaky_relu(jx_array *a, double negative_slope);
JX_API jx_array *jx_selu(jx_array *a);
JX_API jx_array *jx_glu(jx_array *a, int axis); /* first half * sigmoid(second half) */
/* (a - mean) * rsqrt(var + epsilon) over axes (JX_AXES(): the last axis) */
JX_API jx_array *jx_standardize(jx_array *a, jx_axes ax, double epsilon);
/* with jax.nn.standardize's options: mean and variance (NULL: a's over ax, where the bool `where`
   holds, NULL: everywhere); algorithm "fast" (NULL: mean(a^2) - mean(a)^2, clipped at 0) or
   "stable" (mean((a - mean)^2)) */
JX_API jx_array *jx_standardize_with(jx_array *a, jx_axes ax, double epsilon, jx_array *mean,
                                     jx_array *variance, jx_array *where, const char *algorithm);

/* ---- statistics ---- */
/* divided by n - ddof (NaN when that is not positive, as in JAX) */
JX_API jx_array *jx_var_ddof(jx_array *a, jx_axes ax, double ddof, int keepdims);
JX_API jx_array *jx_std_ddof(jx_array *a, jx_axes ax, double ddof, int keepdims);
/* over the elements where the bool `where` (broadcast to a's shape; NULL: all) holds, divided
   by their count - ddof (jnp.var(..., where=)); NaN where that count - ddof <= 0, as in JAX */
JX_API jx_array *jx_var_where(jx_array *a, jx_axes ax, double ddof, int keepdims, jx_array *where);
JX_API jx_array *jx_std_where(jx_array *a, jx_axes ax, double ddof, int keepdims, jx_array *where);
/* q: a scalar or 1-D (its axis leads the result); over axes (JX_AXES(): all); method:
   "linear" (NULL), "lower", "higher", "nearest", "midpoint", "inverted_cdf" (the first sorted
   value whose cumulative count reaches q * n); a NaN along the axes gives NaN */
JX_API jx_array *jx_quantile(jx_array *a, jx_array *q, jx_axes ax, const char *method,
                             int keepdims);
JX_API jx_array *jx_percentile(jx_array *a, jx_array *q, jx_axes ax, const char *method,
                               int keepdims); /* q in [0, 100] */
/* jnp.quantile(..., weights=): only method "inverted_cdf" takes weights (of a's shape or of the
   reduced axes' shape); a negative or NaN weight along the axes gives NaN */
JX_API jx_array *jx_quantile_weighted(jx_array *a, jx_array *q, jx_axes ax, jx_array *weights,
                                      const char *method, int keepdims);
JX_API jx_array *jx_percentile_weighted(jx_array *a, jx_array *q, jx_axes ax, jx_array *weights,
                                        const char *method, int keepdims);
JX_API jx_array *jx_median(jx_array *a, jx_axes ax, int keepdims);
/* counts of a (flattened) in bins equal bins over [lo, hi] (both NaN: a's min and max, widened
   by 0.5 when equal); the last bin includes hi; weights NULL counts 1; density divides by the
   total and the width. *hist: bins values; *edges: bins + 1. */
JX_API jx_status jx_histogram(jx_array *a, int64_t bins, double lo, double hi, jx_array *weights,
                              int density, jx_array **hist, jx_array **edges);
/* the same over the given 1-D bin_edges (jnp.histogram with an array of bins) */
JX_API jx_status jx_histogram_edges(jx_array *a, jx_array *bin_edges, jx_array *weights,
                                    int density, jx_array **hist);
/* counts of each value of the 1-D non-negative integer x in [0, length) (negative values count
   as 0, values >= length are dropped); weights NULL counts 1 */
JX_API jx_array *jx_bincount(jx_array *x, jx_array *weights, int64_t length);
/* insertion points of v in the 1-D sorted a: side "left" (NULL) or "right"; NaNs sort last */
JX_API jx_array *jx_searchsorted(jx_array *a, jx_array *v, const char *side);
/* the same in a taken in the order of sorter (indices that sort the 1-D a, as argsort gives) */
JX_API jx_array *jx_searchsorted_sorter(jx_array *a, jx_array *v, const char *side,
                                        jx_array *sorter);
/* the bin of each x in the 1-D monotonic bins (right: intervals closed on the right) */
JX_API jx_array *jx_digitize(jx_array *x, jx_array *bins, int right);
/* piecewise-linear interpolation of (xp, fp) at x; left/right (NULL: fp[0], fp[-1]) outside */
JX_API jx_array *jx_interp(jx_array *x, jx_array *xp, jx_array *fp, const double *left,
                           const double *right);
/* jnp.interp's options: left / right (NULL: fp[0] / fp[-1]) are arrays broadcasting with x,
   differentiable; extrapolate_left / _right extend the first / last segment's line instead (JAX's
   "extrapolate"); period (NULL: none), a scalar, wraps x and xp onto [0, |period|) and
   interpolates around the circle (left and right then play no part) */
typedef struct {
  jx_array *left, *right;
  int extrapolate_left, extrapolate_right;
  jx_array *period;
} jx_interp_options;
JX_API jx_array *jx_interp_with(jx_array *x, jx_array *xp, jx_array *fp,
                                const jx_interp_options *o); /* o NULL: jx_interp's defaults */
/* 1-D: mode "full" (NULL), "same" or "valid"; convolve flips v, correlate does not */
JX_API jx_array *jx_convolve(jx_array *a, jx_array *v, const char *mode);
JX_API jx_array *jx_correlate(jx_array *a, jx_array *v, const char *mode);

/* ---- sets and nonzero, with the static size JAX requires under jit ---- */
/* the sorted distinct values of a (flattened; NaNs equal), the first size of them, padded with
   fill (NULL: the smallest value) */
JX_API jx_array *jx_unique(jx_array *a, int64_t size, jx_array *fill);
/* jnp.unique(a, return_index=, return_inverse=, return_counts=, size=, fill_value=): *values as
   jx_unique gives them; each other output is computed when its pointer is non-NULL: *index, the
   flat position in a of each value's first occurrence (padding: the smallest value's); *inverse,
   of a's shape, each element's position among the values; *counts, each value's occurrences
   (padding: 0) */
JX_API jx_status jx_unique_all(jx_array *a, int64_t size, jx_array *fill, jx_array **values,
                               jx_array **index, jx_array **inverse, jx_array **counts);
/* out[0..ndim): the indices of a's nonzero elements per axis, in row-major order, the first
   size of them, padded with fill */
JX_API jx_status jx_nonzero(jx_array *a, int64_t size, int64_t fill, jx_array **out);
JX_API jx_array *jx_argwhere(jx_array *a, int64_t size, int64_t fill); /* [size, ndim] */
/* jnp.where(cond, size=, fill_value=): jx_nonzero */
JX_API jx_status jx_where_indices(jx_array *cond, int64_t size, int64_t fill, jx_array **out);

/* ---- segment reductions (ids out of [0, n) are dropped; empty segments hold the identity) */
JX_API jx_array *jx_segment_max(jx_array *data, jx_array *segment_ids, int64_t n);
JX_API jx_array *jx_segment_min(jx_array *data, jx_array *segment_ids, int64_t n);
JX_API jx_array *jx_segment_prod(jx_array *data, jx_array *segment_ids, int64_t n);

/* ---- x.at[idx]: the gather/scatter of an index expression ----
 * idx[0..n) index a's leading n axes as NumPy does: an integer array (every array entry
 * broadcast together; their dims replace the indexed axes where those are adjacent, else lead
 * the result) or a static slice start:stop:step (JX_END: NumPy's empty bound). Negative
 * indices wrap once; reads clamp an out-of-range index (and drop its gradient), updates drop it
 * (JAX's defaults).
 * values broadcast to the shape jx_at_get gives and take a's dtype. */
#define JX_END INT64_MIN
typedef struct {
  jx_array *array; /* NULL: the slice */
  int64_t start, stop, step;
} jx_index;
#define JX_IDX(a)                   ((jx_index){(a), 0, 0, 0})
#define JX_SLICE(start, stop, step) ((jx_index){NULL, (start), (stop), (step)})
#define JX_ALL                      JX_SLICE(JX_END, JX_END, 1)
JX_API jx_array *jx_at_get(jx_array *a, int n, const jx_index *idx);
JX_API jx_array *jx_at_set(jx_array *a, int n, const jx_index *idx, jx_array *values);
JX_API jx_array *jx_at_add(jx_array *a, int n, const jx_index *idx, jx_array *values);
JX_API jx_array *jx_at_mul(jx_array *a, int n, const jx_index *idx, jx_array *values);
JX_API jx_array *jx_at_min(jx_array *a, int n, const jx_index *idx, jx_array *values);
JX_API jx_array *jx_at_max(jx_array *a, int n, const jx_index *idx, jx_array *values);
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
/* the jax.numpy / jax.nn surface */
#define jx_dot(...)                 JX_LOCATED(jx_dot, __VA_ARGS__)
#define jx_vdot(...)                JX_LOCATED(jx_vdot, __VA_ARGS__)
#define jx_tensordot(...)           JX_LOCATED(jx_tensordot, __VA_ARGS__)
#define jx_tensordot_axes(...)      JX_LOCATED(jx_tensordot_axes, __VA_ARGS__)
#define jx_outer(...)               JX_LOCATED(jx_outer, __VA_ARGS__)
#define jx_kron(...)                JX_LOCATED(jx_kron, __VA_ARGS__)
#define jx_diagonal(...)            JX_LOCATED(jx_diagonal, __VA_ARGS__)
#define jx_matrix_trace(...)        JX_LOCATED(jx_matrix_trace, __VA_ARGS__)
#define jx_diag(...)                JX_LOCATED(jx_diag, __VA_ARGS__)
#define jx_tril(...)                JX_LOCATED(jx_tril, __VA_ARGS__)
#define jx_triu(...)                JX_LOCATED(jx_triu, __VA_ARGS__)
#define jx_zeros_like(...)          JX_LOCATED(jx_zeros_like, __VA_ARGS__)
#define jx_ones_like(...)           JX_LOCATED(jx_ones_like, __VA_ARGS__)
#define jx_full_like(...)           JX_LOCATED(jx_full_like, __VA_ARGS__)
#define jx_linspace(...)            JX_LOCATED(jx_linspace, __VA_ARGS__)
#define jx_logspace(...)            JX_LOCATED(jx_logspace, __VA_ARGS__)
#define jx_meshgrid(...)            JX_LOCATED_STATUS(jx_meshgrid, __VA_ARGS__)
#define jx_meshgrid_sparse(...)     JX_LOCATED_STATUS(jx_meshgrid_sparse, __VA_ARGS__)
#define jx_split_sections(...)      JX_LOCATED_STATUS(jx_split_sections, __VA_ARGS__)
#define jx_split_at(...)            JX_LOCATED_STATUS(jx_split_at, __VA_ARGS__)
#define jx_array_split(...)         JX_LOCATED_STATUS(jx_array_split, __VA_ARGS__)
#define jx_tile(...)                JX_LOCATED(jx_tile, __VA_ARGS__)
#define jx_repeat(...)              JX_LOCATED(jx_repeat, __VA_ARGS__)
#define jx_repeat_counts(...)       JX_LOCATED(jx_repeat_counts, __VA_ARGS__)
#define jx_roll(...)                JX_LOCATED(jx_roll, __VA_ARGS__)
#define jx_roll_axes(...)           JX_LOCATED(jx_roll_axes, __VA_ARGS__)
#define jx_moveaxis(...)            JX_LOCATED(jx_moveaxis, __VA_ARGS__)
#define jx_swapaxes(...)            JX_LOCATED(jx_swapaxes, __VA_ARGS__)
#define jx_diff(...)                JX_LOCATED(jx_diff, __VA_ARGS__)
#define jx_diff_with(...)           JX_LOCATED(jx_diff_with, __VA_ARGS__)
#define jx_pad_mode(...)            JX_LOCATED(jx_pad_mode, __VA_ARGS__)
#define jx_pad_stat(...)            JX_LOCATED(jx_pad_stat, __VA_ARGS__)
#define jx_pad_reflect(...)         JX_LOCATED(jx_pad_reflect, __VA_ARGS__)
#define jx_isnan(...)               JX_LOCATED(jx_isnan, __VA_ARGS__)
#define jx_isinf(...)               JX_LOCATED(jx_isinf, __VA_ARGS__)
#define jx_nan_to_num(...)          JX_LOCATED(jx_nan_to_num, __VA_ARGS__)
#define jx_isclose(...)             JX_LOCATED(jx_isclose, __VA_ARGS__)
#define jx_allclose(...)            JX_LOCATED(jx_allclose, __VA_ARGS__)
#define jx_log2(...)                JX_LOCATED(jx_log2, __VA_ARGS__)
#define jx_log10(...)               JX_LOCATED(jx_log10, __VA_ARGS__)
#define jx_logaddexp(...)           JX_LOCATED(jx_logaddexp, __VA_ARGS__)
#define jx_hypot(...)               JX_LOCATED(jx_hypot, __VA_ARGS__)
#define jx_clip_arrays(...)         JX_LOCATED(jx_clip_arrays, __VA_ARGS__)
#define jx_elu(...)                 JX_LOCATED(jx_elu, __VA_ARGS__)
#define jx_leaky_relu(...)          JX_LOCATED(jx_leaky_relu, __VA_ARGS__)
#define jx_selu(...)                JX_LOCATED(jx_selu, __VA_ARGS__)
#define jx_glu(...)                 JX_LOCATED(jx_glu, __VA_ARGS__)
#define jx_var_ddof(...)            JX_LOCATED(jx_var_ddof, __VA_ARGS__)
#define jx_std_ddof(...)            JX_LOCATED(jx_std_ddof, __VA_ARGS__)
#define jx_var_where(...)           JX_LOCATED(jx_var_where, __VA_ARGS__)
#define jx_std_where(...)           JX_LOCATED(jx_std_where, __VA_ARGS__)
#define jx_quantile(...)            JX_LOCATED(jx_quantile, __VA_ARGS__)
#define jx_percentile(...)          JX_LOCATED(jx_percentile, __VA_ARGS__)
#define jx_quantile_weighted(...)   JX_LOCATED(jx_quantile_weighted, __VA_ARGS__)
#define jx_percentile_weighted(...) JX_LOCATED(jx_percentile_weighted, __VA_ARGS__)
#define jx_median(...)              JX_LOCATED(jx_median, __VA_ARGS__)
#define jx_histogram(...)           JX_LOCATED_STATUS(jx_histogram, __VA_ARGS__)
#define jx_histogram_edges(...)     JX_LOCATED_STATUS(jx_histogram_edges, __VA_ARGS__)
#define jx_bincount(...)            JX_LOCATED(jx_bincount, __VA_ARGS__)
#define jx_searchsorted(...)        JX_LOCATED(jx_searchsorted, __VA_ARGS__)
#define jx_searchsorted_sorter(...) JX_LOCATED(jx_searchsorted_sorter, __VA_ARGS__)
#define jx_digitize(...)            JX_LOCATED(jx_digitize, __VA_ARGS__)
#define jx_interp(...)              JX_LOCATED(jx_interp, __VA_ARGS__)
#define jx_interp_with(...)         JX_LOCATED(jx_interp_with, __VA_ARGS__)
#define jx_convolve(...)            JX_LOCATED(jx_convolve, __VA_ARGS__)
#define jx_correlate(...)           JX_LOCATED(jx_correlate, __VA_ARGS__)
#define jx_unique(...)              JX_LOCATED(jx_unique, __VA_ARGS__)
#define jx_unique_all(...)          JX_LOCATED_STATUS(jx_unique_all, __VA_ARGS__)
#define jx_nonzero(...)             JX_LOCATED_STATUS(jx_nonzero, __VA_ARGS__)
#define jx_argwhere(...)            JX_LOCATED(jx_argwhere, __VA_ARGS__)
#define jx_where_indices(...)       JX_LOCATED_STATUS(jx_where_indices, __VA_ARGS__)
#define jx_segment_max(...)         JX_LOCATED(jx_segment_max, __VA_ARGS__)
#define jx_segment_min(...)         JX_LOCATED(jx_segment_min, __VA_ARGS__)
#define jx_segment_prod(...)        JX_LOCATED(jx_segment_prod, __VA_ARGS__)
#define jx_at_get(...)              JX_LOCATED(jx_at_get, __VA_ARGS__)
#define jx_at_set(...)              JX_LOCATED(jx_at_set, __VA_ARGS__)
#define jx_at_add(...)              JX_LOCATED(jx_at_add, __VA_ARGS__)
#define jx_at_mul(...)              JX_LOCATED(jx_at_mul, __VA_ARGS__)
#define jx_at_min(...)              JX_LOCATED(jx_at_min, __VA_ARGS__)
#define jx_at_max(...)              JX_LOCATED(jx_at_max, __VA_ARGS__)
#define jx_standardize(...)         JX_LOCATED(jx_standardize, __VA_ARGS__)
#define jx_standardize_with(...)    JX_LOCATED(jx_standardize_with, __VA_ARGS__)

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
