/* Losses and metrics with Optax's definitions. */
#include "nn_util.h"

#include <math.h>

static int is_int(jx_dtype dt) { return dt != JX_BOOL && !nn_is_float(dt); }

/* labels must be integers shaped like logits without its last dim. */
static int check_labels(const char *fn, jx_array *logits, jx_array *labels) {
  char a[96], b[96];
  if (jx_is_poisoned(logits) || jx_is_poisoned(labels)) {
    if (!logits || !labels) jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: NULL argument", fn);
    return 0;
  }
  jx_shape ls = jx_shape_of(logits), ys = jx_shape_of(labels);
  int fits = ls.rank >= 1 && ys.rank == ls.rank - 1;
  for (int i = 0; fits && i < ys.rank; i++) fits = ys.dims[i] == ls.dims[i];
  if (!nn_is_float(jx_dtype_of(logits)) || !is_int(jx_dtype_of(labels))) {
    jx_report_error(JX_ERR_DTYPE,
                    "%s: logits %s and labels %s: expected float logits and integer labels", fn,
                    nn_aval(logits, a), nn_aval(labels, b));
    return 0;
  }
  if (!fits) {
    jx_report_error(JX_ERR_SHAPE,
                    "%s: logits %s and labels %s: labels must have the logits' shape without its "
                    "last (class) dim",
                    fn, nn_aval(logits, a), nn_aval(labels, b));
    return 0;
  }
  return 1;
}

/* logits[..., label]: negative labels count from the end and out-of-range
 * ones give NaN, as take_along_axis's fill mode. Where the labels and the
 * classes are exact in the logits' float type (f32 for half types), the
 * logit is picked as a sum over the classes of where(class == label,
 * logits, 0): exact (one term, zeros elsewhere), and its gradient is a
 * select that fuses into the softmax's, where a gather's is a scatter into
 * a zeroed copy of the logits and a pass to add it. */
static jx_array *label_logit(jx_array *logits, jx_array *labels, int64_t c) {
  jx_dtype dt = jx_dtype_of(logits), cmp = dt == JX_F64 ? JX_F64 : JX_F32;
  if (c > (cmp == JX_F64 ? (int64_t)1 << 53 : (int64_t)1 << 24)) {
    jx_array *picked = jx_take_along_axis(logits, jx_expand_dims(labels, -1), -1);
    return jx_squeeze(picked, JX_AXES(-1));
  }
  jx_array *lab = jx_astype(labels, JX_I64);
  lab = jx_where(jx_lt(lab, jx_scalar(JX_I64, 0)), jx_add(lab, jx_scalar(JX_I64, (double)c)), lab);
  jx_array *valid =
      jx_logical_and(jx_ge(lab, jx_scalar(JX_I64, 0)), jx_lt(lab, jx_scalar(JX_I64, (double)c)));
  /* out-of-range labels as -1: no class matches (and any value would be
   * exact in cmp), so their sum is 0 before it is replaced by NaN */
  lab = jx_astype(jx_where(valid, lab, jx_scalar(JX_I64, -1)), cmp);
  int r = jx_shape_of(logits).rank;
  jx_shape cls = {r, {0}};
  for (int d = 0; d < r - 1; d++) cls.dims[d] = 1;
  cls.dims[r - 1] = c;
  jx_array *hot = jx_eq(jx_expand_dims(lab, -1), jx_iota(cmp, cls, r - 1));
  jx_array *picked = jx_sum(jx_where(hot, logits, jx_scalar(dt, 0)), JX_AXES(-1), 0);
  return jx_where(valid, picked, jx_scalar(dt, NAN));
}

jx_array *jx_softmax_cross_entropy(jx_array *logits, jx_array *labels, double label_smoothing) {
  const char *fn = "jx_softmax_cross_entropy";
  if (!check_labels(fn, logits, labels)) return nn_fail();
  double a = label_smoothing;
  if (!(a >= 0 && a < 1)) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: label_smoothing %g is not in [0, 1)", fn, a);
    return nn_fail();
  }
  jx_shape ls = jx_shape_of(logits);
  int64_t c = ls.dims[ls.rank - 1];
  if (a == 0) return jx_sub(jx_logsumexp(logits, JX_AXES(-1), 0), label_logit(logits, labels, c));
  /* optax.smooth_labels then optax.softmax_cross_entropy */
  jx_dtype dt = jx_dtype_of(logits);
  jx_array *target =
      jx_add(jx_mul(jx_one_hot(labels, c, dt), jx_scalar(dt, 1 - a)), jx_scalar(dt, a / (double)c));
  return jx_neg(jx_sum(jx_mul(target, jx_log_softmax(logits, -1)), JX_AXES(-1), 0));
}

jx_array *jx_mse(jx_array *pred, jx_array *target) {
  char a[96], b[96];
  if (jx_is_poisoned(pred) || jx_is_poisoned(target)) {
    if (!pred || !target) jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_mse: NULL argument");
    return nn_fail();
  }
  jx_shape ps = jx_shape_of(pred), ts = jx_shape_of(target);
  int same = ps.rank == ts.rank;
  for (int i = 0; same && i < ps.rank; i++) same = ps.dims[i] == ts.dims[i];
  if (!same) {
    jx_report_error(JX_ERR_SHAPE, "jx_mse: prediction %s and target %s differ in shape",
                    nn_aval(pred, a), nn_aval(target, b));
    return nn_fail();
  }
  return jx_mean(jx_square(jx_sub(pred, target)), JX_AXES(), 0);
}

jx_array *jx_accuracy(jx_array *logits, jx_array *labels) {
  if (!check_labels("jx_accuracy", logits, labels)) return nn_fail();
  jx_array *hit = jx_eq(jx_argmax(logits, -1), labels);
  return jx_mean(jx_astype(hit, JX_F32), JX_AXES(), 0);
}
