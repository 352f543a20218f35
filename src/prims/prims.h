/* Every primitive row, by family. A family file of this layer defines the
 * rows and its NULL-terminated list jx_prims_<family>, which registry.c
 * joins; the layers above register their rows at start-up with
 * JX_REGISTER_PRIMS (control flow in transform/, the sharding and collective
 * rows in parallel/, the linear algebra in linalg/). */
#ifndef JX_SRC_PRIMS_PRIMS_H
#define JX_SRC_PRIMS_PRIMS_H

#include "prim.h"

/* unary.c: elementwise, one operand, same shape (is_finite and not give bool)
 * round: i0 = 0 half away from zero, 1 half to even; integer_pow: i0 = exponent */
extern const jx_prim jx_prim_neg, jx_prim_abs, jx_prim_sign, jx_prim_floor, jx_prim_ceil,
    jx_prim_round, jx_prim_exp, jx_prim_exp2, jx_prim_expm1, jx_prim_log, jx_prim_log1p,
    jx_prim_sqrt, jx_prim_rsqrt, jx_prim_cbrt, jx_prim_tanh, jx_prim_logistic, jx_prim_sin,
    jx_prim_cos, jx_prim_tan, jx_prim_asin, jx_prim_acos, jx_prim_atan, jx_prim_sinh, jx_prim_cosh,
    jx_prim_asinh, jx_prim_acosh, jx_prim_atanh, jx_prim_erf, jx_prim_erf_inv, jx_prim_lgamma,
    jx_prim_digamma, jx_prim_is_finite, jx_prim_not, jx_prim_integer_pow, jx_prim_population_count,
    jx_prim_stop_gradient;
extern const jx_prim *const jx_prims_unary[];

/* binary.c: elementwise, two operands of one dtype and shape (comparisons give bool) */
extern const jx_prim jx_prim_add, jx_prim_sub, jx_prim_mul, jx_prim_div, jx_prim_rem, jx_prim_pow,
    jx_prim_max, jx_prim_min, jx_prim_atan2, jx_prim_and, jx_prim_or, jx_prim_xor,
    jx_prim_shift_left, jx_prim_shift_right_logical, jx_prim_shift_right_arithmetic,
    jx_prim_nextafter, jx_prim_eq, jx_prim_ne, jx_prim_lt, jx_prim_le, jx_prim_gt, jx_prim_ge;
extern const jx_prim *const jx_prims_binary[];

/* select.c: select_n (which, cases...), clamp (lo, x, hi) */
extern const jx_prim jx_prim_select_n, jx_prim_clamp;
extern const jx_prim *const jx_prims_select[];

/* fma.c: fma(a, b, c) = a * b + c rounded once (floats) */
extern const jx_prim jx_prim_fma;
extern const jx_prim *const jx_prims_fma[];

/* convert.c: convert_element_type (dtype; i0 = weak result), bitcast_convert_type (dtype) */
extern const jx_prim jx_prim_convert_element_type, jx_prim_bitcast_convert_type;
extern const jx_prim *const jx_prims_convert[];

/* shape.c */
extern const jx_prim jx_prim_broadcast_in_dim, jx_prim_reshape, jx_prim_squeeze,
    jx_prim_expand_dims, jx_prim_transpose, jx_prim_rev, jx_prim_iota;
extern const jx_prim *const jx_prims_shape[];

/* slicing.c */
extern const jx_prim jx_prim_pad, jx_prim_concatenate, jx_prim_slice, jx_prim_dynamic_slice,
    jx_prim_dynamic_update_slice;
extern const jx_prim *const jx_prims_slicing[];

/* gather.c */
extern const jx_prim jx_prim_gather, jx_prim_scatter, jx_prim_scatter_add, jx_prim_scatter_mul,
    jx_prim_scatter_min, jx_prim_scatter_max;
extern const jx_prim *const jx_prims_gather[];

/* reduce.c */
extern const jx_prim jx_prim_reduce_sum, jx_prim_reduce_prod, jx_prim_reduce_max,
    jx_prim_reduce_min, jx_prim_reduce_and, jx_prim_reduce_or, jx_prim_argmax, jx_prim_argmin;
extern const jx_prim *const jx_prims_reduce[];

/* cumulative.c */
extern const jx_prim jx_prim_cumsum, jx_prim_cumprod, jx_prim_cummax, jx_prim_cummin;
extern const jx_prim *const jx_prims_cumulative[];

/* sort.c */
extern const jx_prim jx_prim_sort, jx_prim_top_k;
extern const jx_prim *const jx_prims_sort[];

/* dot.c, conv.c, window.c */
extern const jx_prim jx_prim_dot_general;
extern const jx_prim *const jx_prims_dot[];
extern const jx_prim jx_prim_conv_general_dilated;
extern const jx_prim *const jx_prims_conv[];
extern const jx_prim jx_prim_reduce_window_sum, jx_prim_reduce_window_max,
    jx_prim_reduce_window_min;
extern const jx_prim *const jx_prims_window[];

/* random.c: threefry2x32 (k0, k1, x0, x1 -> y0, y1); random_bits (key u32[2] -> u32[shape]) */
extern const jx_prim jx_prim_threefry2x32, jx_prim_random_bits;
extern const jx_prim *const jx_prims_random[];
/* random_bits' values of width 8, 16, 32 or 64 for the row-major elements
 * first .. first + n - 1 under key, into out (n values of that width): what
 * the primitive computes, a run at a time (the eager samplers' fused path). */
void jx_random_bits_run(const uint32_t key[2], int width, uint64_t first, int64_t n, void *out);

/* complex.c: real, imag (complex -> its parts' dtype), conj, complex(re, im) */
extern const jx_prim jx_prim_real, jx_prim_imag, jx_prim_conj, jx_prim_complex;
extern const jx_prim *const jx_prims_complex[];
/* An error naming p unless p takes complex values or none of avals[0..n) is
 * complex (`what`: "operand", "result"); see complex.c. Run on the operands
 * and results of every application before its kernel. */
jx_status jx_prim_check_complex(const jx_prim *p, int n, const jx_aval *avals, const char *what);

/* transform/cond.c, while.c, scan.c: control flow (their rules apply the
 * transformations to their nested programs, so they live with them) */
extern const jx_prim jx_prim_cond, jx_prim_while, jx_prim_scan, jx_prim_remat,
    jx_prim_custom_vjp_call, jx_prim_custom_lin, jx_prim_custom_jvp_call, jx_prim_axis_index;

/* The row named `name`, or NULL. */
const jx_prim *jx_prim_lookup(const char *name);
/* Calls fn for every row: this layer's families, then the registered ones. */
void jx_prim_foreach(void (*fn)(const jx_prim *p, void *ctx), void *ctx);

#endif
