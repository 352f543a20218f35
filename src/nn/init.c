/* Initializers with jax.nn.initializers' distributions, scales and
 * roundings: the variance is rounded to the parameter dtype before its
 * square root is taken, as JAX does (jnp.array(scale / fan, dtype)), so the
 * same key gives the same bits. Each draw runs in a scope of its own and
 * hands only its result to the caller's scope: a sampler makes several
 * arrays the size of the parameter on the way (bits, uniforms, their
 * transforms), and a model initialized in one scope would otherwise hold
 * every parameter's intermediates until that scope ends. */
#include <math.h>
#include <string.h>

#include "nn_util.h"

/* The stddev of a standard normal truncated to (-2, 2). */
#define TRUNC_STD 0.87962566103423978

static int check(const char *fn, jx_array *key, jx_dtype dt, jx_shape s, int min_rank) {
  if (jx_is_poisoned(key)) {
    if (!key) jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the key is NULL", fn);
    return 0;
  }
  if (!nn_is_float(dt)) {
    jx_report_error(JX_ERR_DTYPE, "%s: dtype %s is not a float dtype", fn, jx_dtype_name(dt));
    return 0;
  }
  if (s.rank < min_rank) {
    jx_report_error(JX_ERR_SHAPE,
                    "%s: a shape of rank %d has no fan in and fan out (rank >= 2 needed: "
                    "[..., in, out])",
                    fn, s.rank);
    return 0;
  }
  return 1;
}

/* A strongly typed scalar of dtype dt: the constants JAX builds with
 * jnp.array(v, dtype). */
static jx_array *constant(jx_dtype dt, double v) { return jx_full(dt, JX_SHAPE(), v); }

/* Ends the draw's scope, keeping only its result r (in the caller's scope). */
static jx_array *only_result(jx_array *r) {
  jx_keep(r);
  jx_scope_end();
  return jx_scope_own(r);
}

static jx_array *draw_variance_scaling(const char *fn, jx_array *key, jx_dtype dt, jx_shape s,
                                       double scale, const char *mode, const char *distribution) {
  if (!check(fn, key, dt, s, 2)) return nn_fail();
  double in = (double)s.dims[s.rank - 2], out = (double)s.dims[s.rank - 1], prod = 1;
  for (int i = 0; i < s.rank; i++) prod *= (double)s.dims[i];
  if (prod == 0) return jx_zeros(dt, s); /* JAX divides by zero here; nothing to draw */
  double field = prod / in / out, fan_in = in * field, fan_out = out * field, den;
  if (!mode) mode = "";
  if (!strcmp(mode, "fan_in"))
    den = fan_in;
  else if (!strcmp(mode, "fan_out"))
    den = fan_out;
  else if (!strcmp(mode, "fan_avg"))
    den = (fan_in + fan_out) / 2;
  else if (!strcmp(mode, "fan_geo_avg"))
    den = sqrt(fan_in * fan_out);
  else {
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "%s: mode '%s' is not one of fan_in, fan_out, fan_avg, fan_geo_avg", fn, mode);
    return nn_fail();
  }
  jx_array *variance = constant(dt, scale / den);
  if (!distribution) distribution = "";
  if (!strcmp(distribution, "truncated_normal")) {
    jx_array *std = jx_div(jx_sqrt(variance), constant(dt, TRUNC_STD));
    return jx_mul(jx_random_truncated_normal(key, dt, s, -2, 2), std);
  }
  if (!strcmp(distribution, "normal"))
    return jx_mul(jx_random_normal(key, dt, s), jx_sqrt(variance));
  if (!strcmp(distribution, "uniform"))
    return jx_mul(jx_random_uniform(key, dt, s, -1, 1),
                  jx_sqrt(jx_mul(jx_scalar(dt, 3), variance)));
  jx_report_error(JX_ERR_INVALID_ARGUMENT,
                  "%s: distribution '%s' is not one of truncated_normal, normal, uniform", fn,
                  distribution);
  return nn_fail();
}

static jx_array *variance_scaling(const char *fn, jx_array *key, jx_dtype dt, jx_shape s,
                                  double scale, const char *mode, const char *distribution) {
  jx_scope_begin();
  return only_result(draw_variance_scaling(fn, key, dt, s, scale, mode, distribution));
}

jx_array *jx_init_variance_scaling(jx_array *key, jx_dtype dt, jx_shape s, double scale,
                                   const char *mode, const char *distribution) {
  return variance_scaling("jx_init_variance_scaling", key, dt, s, scale, mode, distribution);
}

jx_array *jx_init_glorot_uniform(jx_array *key, jx_dtype dt, jx_shape s) {
  return variance_scaling("jx_init_glorot_uniform", key, dt, s, 1, "fan_avg", "uniform");
}
jx_array *jx_init_glorot_normal(jx_array *key, jx_dtype dt, jx_shape s) {
  return variance_scaling("jx_init_glorot_normal", key, dt, s, 1, "fan_avg", "truncated_normal");
}
jx_array *jx_init_lecun_uniform(jx_array *key, jx_dtype dt, jx_shape s) {
  return variance_scaling("jx_init_lecun_uniform", key, dt, s, 1, "fan_in", "uniform");
}
jx_array *jx_init_lecun_normal(jx_array *key, jx_dtype dt, jx_shape s) {
  return variance_scaling("jx_init_lecun_normal", key, dt, s, 1, "fan_in", "truncated_normal");
}
jx_array *jx_init_he_uniform(jx_array *key, jx_dtype dt, jx_shape s) {
  return variance_scaling("jx_init_he_uniform", key, dt, s, 2, "fan_in", "uniform");
}
jx_array *jx_init_he_normal(jx_array *key, jx_dtype dt, jx_shape s) {
  return variance_scaling("jx_init_he_normal", key, dt, s, 2, "fan_in", "truncated_normal");
}

jx_array *jx_init_normal(jx_array *key, jx_dtype dt, jx_shape s, double stddev) {
  if (!check("jx_init_normal", key, dt, s, 0)) return nn_fail();
  jx_scope_begin();
  return only_result(jx_mul(jx_random_normal(key, dt, s), constant(dt, stddev)));
}

jx_array *jx_init_truncated_normal(jx_array *key, jx_dtype dt, jx_shape s, double stddev) {
  if (!check("jx_init_truncated_normal", key, dt, s, 0)) return nn_fail();
  jx_scope_begin();
  return only_result(jx_mul(jx_random_truncated_normal(key, dt, s, -2, 2), constant(dt, stddev)));
}
