/* jx/random.h: counter-based random numbers, bit-identical to JAX's default
 * PRNG (threefry2x32 in partitionable mode): the same key gives the same bits
 * and, for floats, the same values as jax.random on a CPU, in the mode jx
 * runs in (include/jx/array.h): default-mode JAX's by default, x64 JAX's
 * under JX_ENABLE_X64=1. Every f16, bf16 and f32 sampler matches bit for bit
 * (the f32 ones as XLA computes them with fused multiply-adds, which x86-64
 * CPUs with FMA3 and AArch64 have); f64 normal and truncated_normal differ
 * from XLA's f64 erf_inv polynomial by a few ulp.
 *
 * A key is a u32[2] array (jax.random.key_data of jax.random.key(seed)); the
 * default mode's seed is 32-bit, so jx_random_key keeps its low word there.
 * Keys are values: reusing one reuses its randomness; split or fold_in to get
 * new ones. */
#ifndef JX_RANDOM_H
#define JX_RANDOM_H

#include "array.h"

#ifdef __cplusplus
extern "C" {
#endif

JX_API jx_array *jx_random_key(uint64_t seed);              /* u32[2] */
JX_API jx_array *jx_random_split(jx_array *key, int64_t n); /* u32[n,2] */
JX_API jx_array *jx_random_fold_in(jx_array *key, uint32_t data);
JX_API jx_array *jx_random_bits(jx_array *key, jx_shape s); /* u32 */
JX_API jx_array *jx_random_uniform(jx_array *key, jx_dtype dt, jx_shape s, double lo, double hi);
JX_API jx_array *jx_random_normal(jx_array *key, jx_dtype dt, jx_shape s);
JX_API jx_array *jx_random_truncated_normal(jx_array *key, jx_dtype dt, jx_shape s, double lo,
                                            double hi);
/* bernoulli: uniforms of p's dtype, f32 (f64 under x64), below p */
JX_API jx_array *jx_random_bernoulli(jx_array *key, double p, jx_shape s); /* bool */
/* categorical and permutation: i32 (i64 under x64) */
JX_API jx_array *jx_random_categorical(jx_array *key, jx_array *logits, int axis);
JX_API jx_array *jx_random_permutation(jx_array *key, int64_t n);

/* the hash itself (lax-level): four u32 arrays of one shape -> two */
JX_API jx_status jx_threefry2x32(jx_array *k0, jx_array *k1, jx_array *x0, jx_array *x1,
                                 jx_array **out0, jx_array **out1);

#ifndef JX_NO_LOCATION_MACROS
#define jx_random_key(...)              JX_LOCATED(jx_random_key, __VA_ARGS__)
#define jx_random_split(...)            JX_LOCATED(jx_random_split, __VA_ARGS__)
#define jx_random_fold_in(...)          JX_LOCATED(jx_random_fold_in, __VA_ARGS__)
#define jx_random_bits(...)             JX_LOCATED(jx_random_bits, __VA_ARGS__)
#define jx_random_uniform(...)          JX_LOCATED(jx_random_uniform, __VA_ARGS__)
#define jx_random_normal(...)           JX_LOCATED(jx_random_normal, __VA_ARGS__)
#define jx_random_truncated_normal(...) JX_LOCATED(jx_random_truncated_normal, __VA_ARGS__)
#define jx_random_bernoulli(...)        JX_LOCATED(jx_random_bernoulli, __VA_ARGS__)
#define jx_random_categorical(...)      JX_LOCATED(jx_random_categorical, __VA_ARGS__)
#define jx_random_permutation(...)      JX_LOCATED(jx_random_permutation, __VA_ARGS__)
#define jx_threefry2x32(...)            JX_LOCATED_STATUS(jx_threefry2x32, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
