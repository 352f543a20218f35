/* Conformance adapters for reductions, cumulative ops, sorting and windows
 * (goldens: tests/golden/gen_reduce.py). Keys: axes=[..] (absent: all),
 * keepdims=0/1, axis=, how=sum|prod|max|min, reverse=, k=, num_keys=,
 * window= strides= pad_lo= pad_hi= padding=VALID|SAME. */
#include "conformance.h"

#define AXES_OF(c) conf_axes(c, "axes", JX_AXES())
#define KEEP(c)    ((int)conf_int(c, "keepdims", 0))
#define AXIS(c)    ((int)conf_int(c, "axis", -1))

CONF_ONE(c_sum, jx_sum(in[0], AXES_OF(c), KEEP(c)))
CONF_ONE(c_prod, jx_prod(in[0], AXES_OF(c), KEEP(c)))
CONF_ONE(c_max, jx_max(in[0], AXES_OF(c), KEEP(c)))
CONF_ONE(c_min, jx_min(in[0], AXES_OF(c), KEEP(c)))
CONF_ONE(c_all, jx_all(in[0], AXES_OF(c), KEEP(c)))
CONF_ONE(c_any, jx_any(in[0], AXES_OF(c), KEEP(c)))
CONF_ONE(c_mean, jx_mean(in[0], AXES_OF(c), KEEP(c)))
CONF_ONE(c_var, jx_var(in[0], AXES_OF(c), KEEP(c)))
CONF_ONE(c_std, jx_std(in[0], AXES_OF(c), KEEP(c)))
CONF_ONE(c_logsumexp, jx_logsumexp(in[0], AXES_OF(c), KEEP(c)))
CONF_ONE(c_argmax, jx_argmax(in[0], AXIS(c)))
CONF_ONE(c_argmin, jx_argmin(in[0], AXIS(c)))
CONF_ONE(c_softmax, jx_softmax(in[0], AXIS(c)))
CONF_ONE(c_log_softmax, jx_log_softmax(in[0], AXIS(c)))
CONF_ONE(c_cumsum, jx_cumsum(in[0], AXIS(c)))
CONF_ONE(c_cumprod, jx_cumprod(in[0], AXIS(c)))
CONF_ONE(c_cummax, jx_cummax(in[0], AXIS(c)))
CONF_ONE(c_cummin, jx_cummin(in[0], AXIS(c)))
CONF_ONE(c_cumulative,
         jx_cumulative(in[0], conf_str(c, "how", "?"), AXIS(c), (int)conf_int(c, "reverse", 0)))
CONF_ONE(c_sort, jx_sort(in[0], AXIS(c)))
CONF_ONE(c_argsort, jx_argsort(in[0], AXIS(c)))
CONF_ONE(c_reduce_window,
         jx_reduce_window(in[0], conf_str(c, "how", "?"), conf_shape(c, "window", JX_SHAPE()),
                          conf_shape(c, "strides", JX_SHAPE()), conf_shape(c, "pad_lo", JX_SHAPE()),
                          conf_shape(c, "pad_hi", JX_SHAPE())))
CONF_ONE(c_max_pool,
         jx_max_pool(in[0], conf_shape(c, "window", JX_SHAPE()),
                     conf_shape(c, "strides", JX_SHAPE()), conf_str(c, "padding", "VALID")))
CONF_ONE(c_avg_pool,
         jx_avg_pool(in[0], conf_shape(c, "window", JX_SHAPE()),
                     conf_shape(c, "strides", JX_SHAPE()), conf_str(c, "padding", "VALID")))

static jx_status c_sort_multi(const conf_case *c, int nin, jx_array *const *in, int *nout,
                              jx_array **out) {
  *nout = nin;
  return jx_sort_multi(nin, in, AXIS(c), (int)conf_int(c, "num_keys", 1), out);
}

static jx_status c_top_k(const conf_case *c, int nin, jx_array *const *in, int *nout,
                         jx_array **out) {
  (void)nin;
  *nout = 2;
  return jx_top_k(in[0], (int)conf_int(c, "k", 1), &out[0], &out[1]);
}

const conf_op conf_ops_reduce[] = {
    {"sum", c_sum},
    {"prod", c_prod},
    {"max", c_max},
    {"min", c_min},
    {"all", c_all},
    {"any", c_any},
    {"mean", c_mean},
    {"var", c_var},
    {"std", c_std},
    {"logsumexp", c_logsumexp},
    {"argmax", c_argmax},
    {"argmin", c_argmin},
    {"softmax", c_softmax},
    {"log_softmax", c_log_softmax},
    {"cumsum", c_cumsum},
    {"cumprod", c_cumprod},
    {"cummax", c_cummax},
    {"cummin", c_cummin},
    {"cumulative", c_cumulative},
    {"sort", c_sort},
    {"argsort", c_argsort},
    {"sort_multi", c_sort_multi},
    {"top_k", c_top_k},
    {"reduce_window", c_reduce_window},
    {"max_pool", c_max_pool},
    {"avg_pool", c_avg_pool},
    {NULL, NULL},
};
