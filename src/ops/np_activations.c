/* jax.nn's activations beyond those of unary_ops.c: elu, leaky_relu, selu,
 * glu, standardize (with its mean, variance, where and algorithm), written as jax.nn writes them
 * (jnp.where selects, so that the derivative at a kink is the one JAX gives). */
#include "ops_util.h"

jx_array *jx_elu(jx_array *a, double alpha) {
  if (jx_check_inputs("jx_elu", 1, &a)) return jx_poison();
  jx_array *pos = jx_gt(a, jx_scalar(JX_I64, 0));
  jx_array *safe = jx_where(pos, jx_scalar(JX_F64, 0), a); /* expm1 never sees a large x */
  return jx_where(pos, a, jx_mul(jx_scalar(JX_F64, alpha), jx_expm1(safe)));
}

jx_array *jx_leaky_relu(jx_array *a, double negative_slope) {
  if (jx_check_inputs("jx_leaky_relu", 1, &a)) return jx_poison();
  return jx_where(jx_ge(a, jx_scalar(JX_I64, 0)), a, jx_mul(jx_scalar(JX_F64, negative_slope), a));
}

jx_array *jx_selu(jx_array *a) {
  if (jx_check_inputs("jx_selu", 1, &a)) return jx_poison();
  return jx_mul(jx_scalar(JX_F64, 1.0507009873554804934193349852946),
                jx_elu(a, 1.6732632423543772848170429916717));
}

jx_array *jx_glu(jx_array *a, int axis) {
  const char *op = "jx_glu";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int ax = jx_normalize_axis(axis, a->shape.rank, op);
  if (ax < 0) return jx_poison();
  if (a->shape.dims[ax] % 2) {
    char s[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_SHAPE, "%s: axis %d of %s has odd size %lld; it must split in two", op, ax,
                 jx_aval_str(a->dtype, a->shape, s), (long long)a->shape.dims[ax]);
    return jx_poison();
  }
  jx_array *half[2];
  if (jx_split_sections(a, 2, ax, half)) return jx_poison();
  return jx_mul(half[0], jx_logistic(half[1]));
}

/* jax.nn.standardize's default ("fast") variance: mean(x^2) - mean(x)^2, clipped at 0 */
/* the mean over ax, kept, of the elements where the mask m holds (NULL: all) */
static jx_array *mean_over(jx_array *x, jx_axes ax, jx_array *m) {
  return m ? jx_ops_mean_where(x, ax, m, 1) : jx_mean(x, ax, 1);
}

/* jax.nn.standardize: the given mean and variance, or those of a over ax (where the mask holds)
 * by the "fast" algorithm, mean(a^2) - mean(a)^2 clipped at 0, or the "stable" two-pass one */
static jx_array *standardize(const char *op, jx_array *a, jx_axes ax, double epsilon,
                             jx_array *mean, jx_array *variance, jx_array *where, int stable) {
  jx_array *opt[3] = {mean, variance, where};
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  for (int i = 0; i < 3; i++)
    if (opt[i] && jx_check_inputs(op, 1, &opt[i])) return jx_poison();
  if (ax.n == 0) ax = JX_AXES(-1);
  jx_array *m = where ? jx_ops_where_mask(op, where, a) : NULL;
  if (where && !m) return jx_poison();
  jx_array *x = jx_ops_inexact(a);
  if (!mean) mean = mean_over(x, ax, m);
  if (!variance)
    variance = stable
                   ? mean_over(jx_square(jx_sub(x, mean)), ax, m)
                   : jx_clip(jx_sub(mean_over(jx_square(x), ax, m), jx_square(mean)), 0, INFINITY);
  return jx_mul(jx_sub(a, mean), jx_rsqrt(jx_add(variance, jx_scalar(JX_F64, epsilon))));
}

jx_array *jx_standardize(jx_array *a, jx_axes ax, double epsilon) {
  return standardize("jx_standardize", a, ax, epsilon, NULL, NULL, NULL, 0);
}

jx_array *jx_standardize_with(jx_array *a, jx_axes ax, double epsilon, jx_array *mean,
                              jx_array *variance, jx_array *where, const char *algorithm) {
  const char *op = "jx_standardize_with";
  int stable = algorithm && !strcmp(algorithm, "stable");
  if (algorithm && !stable && strcmp(algorithm, "fast")) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: algorithm \"%s\" is not \"fast\" or \"stable\"", op,
                 algorithm);
    return jx_poison();
  }
  return standardize(op, a, ax, epsilon, mean, variance, where, stable);
}
