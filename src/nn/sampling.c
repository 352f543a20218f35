/* The next token from logits, on the device: repetition penalty,
 * temperature (0: greedy), top-k and nucleus (top-p) filtering, then a
 * categorical draw with jx's PRNG. Filtering is by threshold: a row keeps
 * the logits at or above its k-th largest (top-k) and at or above the
 * smallest of its nucleus (top-p), so ties at an edge stay together. */
#include <math.h>

#include "nn_util.h"

jx_array *jx_sample_logits(jx_array *logits, jx_array *key, jx_array *seen, const jx_sampling *s) {
  const char *fn = "jx_sample_logits";
  char buf[96], buf2[96];
  if (!s) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the sampling settings are NULL", fn);
    return nn_fail();
  }
  if (jx_is_poisoned(logits) || jx_is_poisoned(key) || (seen && jx_is_poisoned(seen))) {
    if (!logits || !key) jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: NULL logits or key", fn);
    return nn_fail();
  }
  jx_shape ls = jx_shape_of(logits);
  if (ls.rank != 2 || !nn_is_float(jx_dtype_of(logits))) {
    jx_report_error(JX_ERR_SHAPE, "%s: logits %s: expected floats [batch, vocab]", fn,
                    nn_aval(logits, buf));
    return nn_fail();
  }
  jx_shape ss = seen ? jx_shape_of(seen) : ls;
  if (seen && (jx_dtype_of(seen) != JX_BOOL || ss.rank != 2 || ss.dims[0] != ls.dims[0] ||
               ss.dims[1] != ls.dims[1])) {
    jx_report_error(JX_ERR_SHAPE, "%s: seen %s: expected bool of the logits' shape %s", fn,
                    nn_aval(seen, buf), nn_aval(logits, buf2));
    return nn_fail();
  }
  if (!(s->temperature >= 0) || s->top_k < 0 || !(s->top_p >= 0) || !(s->repetition_penalty >= 0)) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "%s: temperature %g, top_k %lld, top_p %g, repetition_penalty %g: none may "
                    "be negative",
                    fn, s->temperature, (long long)s->top_k, s->top_p, s->repetition_penalty);
    return nn_fail();
  }
  int64_t B = ls.dims[0], V = ls.dims[1];
  jx_array *x = jx_astype(logits, JX_F32);
  double r = s->repetition_penalty;
  if (seen && r > 0 && r != 1) {
    jx_array *penalized = jx_where(jx_gt(x, jx_scalar(JX_F32, 0)), jx_div(x, jx_scalar(JX_F32, r)),
                                   jx_mul(x, jx_scalar(JX_F32, r)));
    x = jx_where(seen, penalized, x);
  }
  if (s->temperature == 0) return jx_argmax(x, 1);
  x = jx_div(x, jx_scalar(JX_F32, s->temperature));
  jx_array *cut = jx_scalar(JX_F32, -INFINITY);
  if (s->top_k > 0 && s->top_k < V) {
    jx_array *top, *idx;
    if (jx_top_k(x, (int)s->top_k, &top, &idx)) return nn_fail();
    jx_array *kth = jx_slice(top, JX_SHAPE(0, s->top_k - 1), JX_SHAPE(B, s->top_k), JX_SHAPE());
    x = jx_where(jx_ge(x, kth), x, cut);
  }
  if (s->top_p > 0 && s->top_p < 1) {
    jx_array *sorted, *idx; /* descending */
    if (jx_top_k(x, (int)V, &sorted, &idx)) return nn_fail();
    jx_array *p = jx_softmax(sorted, 1);
    /* a token is in the nucleus when the mass before it is below top_p */
    jx_array *before = jx_sub(jx_cumsum(p, 1), p);
    jx_array *n = jx_sum(jx_astype(jx_lt(before, jx_scalar(JX_F32, s->top_p)), JX_I32), JX_AXES(1),
                         1); /* >= 1: the first token's mass before is 0 */
    jx_array *edge = jx_take_along_axis(sorted, jx_sub(n, jx_scalar(JX_I32, 1)), 1);
    x = jx_where(jx_ge(x, edge), x, cut);
  }
  return jx_random_categorical(key, x, 1);
}
