/* Losses and metrics with Optax's definitions. */
#include "nn_util.h"

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
  if (a == 0) {
    /* optax: logsumexp(logits) - logits[label] */
    jx_array *picked = jx_take_along_axis(logits, jx_expand_dims(labels, -1), -1);
    return jx_sub(jx_logsumexp(logits, JX_AXES(-1), 0), jx_squeeze(picked, JX_AXES(-1)));
  }
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
