/* Layers without attention: dense, embedding, layer and RMS norm, conv2d,
 * dropout. Each reads its parameters by name from a tree and checks them
 * against its input, so a mismatch names the layer and the parameter. */
#include <string.h>

#include "nn_util.h"

static jx_status set(jx_tree *t, const char *prefix, const char *name, jx_array *a) {
  char full[256];
  if (jx_is_poisoned(a)) return jx_last_status() ? jx_last_status() : JX_ERR_POISONED;
  jx_tree_set(t, nn_join(full, prefix, name), a);
  return jx_last_status();
}

static int check_tree(const char *fn, jx_tree *t) {
  if (t) return 1;
  jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the tree is NULL", fn);
  return 0;
}

/* ---- dense ---- */

jx_status jx_dense_init(jx_tree *t, const char *prefix, jx_array *key, int64_t in, int64_t out,
                        jx_dtype dt) {
  if (!check_tree("jx_dense_init", t)) return JX_ERR_INVALID_ARGUMENT;
  jx_status st = set(t, prefix, "w", jx_init_lecun_normal(key, dt, JX_SHAPE(in, out)));
  return st ? st : set(t, prefix, "b", jx_zeros(dt, JX_SHAPE(out)));
}

jx_array *jx_dense(const jx_tree *t, const char *prefix, jx_array *x) {
  if (!nn_check_input("jx_dense", prefix, x, 1)) return nn_fail();
  int r = jx_ndim(x), ok = 1;
  int64_t in = jx_shape_of(x).dims[r - 1];
  jx_array *w = nn_param("jx_dense", t, prefix, "w", 2, (int64_t[]){in, -1}, 0, &ok);
  if (!ok) return nn_fail();
  int64_t out = jx_shape_of(w).dims[1];
  jx_array *b = nn_param("jx_dense", t, prefix, "b", 1, (int64_t[]){out}, 1, &ok);
  if (!ok) return nn_fail();
  jx_array *y = jx_dot_general(x, w, JX_AXES(r - 1), JX_AXES(0), JX_AXES(), JX_AXES());
  return b ? jx_add(y, b) : y;
}

/* ---- embedding ---- */

jx_status jx_embedding_init(jx_tree *t, const char *prefix, jx_array *key, int64_t vocab,
                            int64_t dim, jx_dtype dt) {
  if (!check_tree("jx_embedding_init", t)) return JX_ERR_INVALID_ARGUMENT;
  /* Flax's nn.Embed: variance_scaling(1, fan_in, normal, out_axis=0), whose
   * fan_in works out to dim: our fan_out of a [vocab, dim] table */
  return set(t, prefix, "table",
             jx_init_variance_scaling(key, dt, JX_SHAPE(vocab, dim), 1, "fan_out", "normal"));
}

jx_array *jx_embedding(const jx_tree *t, const char *prefix, jx_array *ids) {
  char buf[96];
  if (jx_is_poisoned(ids)) {
    if (!ids) jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_embedding '%s': ids are NULL", prefix);
    return nn_fail();
  }
  jx_dtype it = jx_dtype_of(ids);
  if (it == JX_BOOL || nn_is_float(it)) {
    jx_report_error(JX_ERR_DTYPE, "jx_embedding '%s': ids are %s, expected integers", prefix,
                    nn_aval(ids, buf));
    return nn_fail();
  }
  int ok = 1;
  jx_array *table = nn_param("jx_embedding", t, prefix, "table", 2, (int64_t[]){-1, -1}, 0, &ok);
  if (!ok) return nn_fail();
  return jx_take(table, ids, 0);
}

/* ---- norms ---- */

jx_status jx_layer_norm_init(jx_tree *t, const char *prefix, int64_t dim, jx_dtype dt) {
  if (!check_tree("jx_layer_norm_init", t)) return JX_ERR_INVALID_ARGUMENT;
  jx_status st = set(t, prefix, "scale", jx_ones(dt, JX_SHAPE(dim)));
  return st ? st : set(t, prefix, "bias", jx_zeros(dt, JX_SHAPE(dim)));
}

jx_status jx_rms_norm_init(jx_tree *t, const char *prefix, int64_t dim, jx_dtype dt) {
  if (!check_tree("jx_rms_norm_init", t)) return JX_ERR_INVALID_ARGUMENT;
  return set(t, prefix, "scale", jx_ones(dt, JX_SHAPE(dim)));
}

/* x normalized over its last dim and scaled, in f32 for 16-bit floats; the
 * result in x's dtype. rms: no centering and no bias. */
static jx_array *norm(const char *layer, const jx_tree *t, const char *prefix, jx_array *x,
                      double eps, int rms) {
  if (!nn_check_input(layer, prefix, x, 1)) return nn_fail();
  int ok = 1;
  jx_dtype dt = jx_dtype_of(x);
  int64_t d = jx_shape_of(x).dims[jx_ndim(x) - 1];
  jx_array *scale = nn_param(layer, t, prefix, "scale", 1, (int64_t[]){d}, 0, &ok);
  jx_array *bias = rms ? NULL : nn_param(layer, t, prefix, "bias", 1, (int64_t[]){d}, 0, &ok);
  if (!ok) return nn_fail();
  jx_array *xf = nn_is_low_float(dt) ? jx_astype(x, JX_F32) : x;
  jx_array *y;
  if (rms) {
    jx_array *ms = jx_mean(jx_square(xf), JX_AXES(-1), 1);
    y = jx_mul(xf, jx_rsqrt(jx_add(ms, jx_scalar(JX_F32, eps))));
  } else {
    jx_array *xc = jx_sub(xf, jx_mean(xf, JX_AXES(-1), 1));
    jx_array *var = jx_mean(jx_square(xc), JX_AXES(-1), 1);
    y = jx_mul(xc, jx_rsqrt(jx_add(var, jx_scalar(JX_F32, eps))));
  }
  y = jx_mul(y, scale);
  if (bias) y = jx_add(y, bias);
  return jx_astype(y, dt);
}

jx_array *jx_layer_norm(const jx_tree *t, const char *prefix, jx_array *x, double eps) {
  return norm("jx_layer_norm", t, prefix, x, eps, 0);
}
jx_array *jx_rms_norm(const jx_tree *t, const char *prefix, jx_array *x, double eps) {
  return norm("jx_rms_norm", t, prefix, x, eps, 1);
}

/* ---- conv2d ---- */

jx_status jx_conv2d_init(jx_tree *t, const char *prefix, jx_array *key, int64_t kh, int64_t kw,
                         int64_t cin, int64_t cout, jx_dtype dt) {
  if (!check_tree("jx_conv2d_init", t)) return JX_ERR_INVALID_ARGUMENT;
  jx_status st = set(t, prefix, "w", jx_init_lecun_normal(key, dt, JX_SHAPE(kh, kw, cin, cout)));
  return st ? st : set(t, prefix, "b", jx_zeros(dt, JX_SHAPE(cout)));
}

jx_array *jx_conv2d(const jx_tree *t, const char *prefix, jx_array *x, jx_shape strides,
                    const char *padding) {
  char buf[96];
  if (!nn_check_input("jx_conv2d", prefix, x, 4)) return nn_fail();
  jx_shape xs = jx_shape_of(x);
  if (xs.rank != 4) {
    jx_report_error(JX_ERR_SHAPE, "jx_conv2d '%s': the input is %s, expected NHWC (rank 4)", prefix,
                    nn_aval(x, buf));
    return nn_fail();
  }
  int ok = 1;
  jx_array *w =
      nn_param("jx_conv2d", t, prefix, "w", 4, (int64_t[]){-1, -1, xs.dims[3], -1}, 0, &ok);
  if (!ok) return nn_fail();
  jx_shape ws = jx_shape_of(w);
  jx_array *b = nn_param("jx_conv2d", t, prefix, "b", 1, (int64_t[]){ws.dims[3]}, 1, &ok);
  if (!ok) return nn_fail();
  if (strides.rank == 0) strides = JX_SHAPE(1, 1);
  if (strides.rank != 2 || strides.dims[0] < 1 || strides.dims[1] < 1) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "jx_conv2d '%s': strides must be two positive numbers (or JX_SHAPE())", prefix);
    return nn_fail();
  }
  jx_shape lo = JX_SHAPE(0, 0), hi = JX_SHAPE(0, 0);
  if (padding && !strcmp(padding, "SAME")) {
    /* lax.padtype_to_pads: out = ceil(in / stride), the odd pad at the end */
    for (int i = 0; i < 2; i++) {
      int64_t in = xs.dims[1 + i], s = strides.dims[i], k = ws.dims[i];
      int64_t out = (in + s - 1) / s, need = (out - 1) * s + k - in;
      if (need < 0) need = 0;
      lo.dims[i] = need / 2;
      hi.dims[i] = need - need / 2;
    }
  } else if (!padding || strcmp(padding, "VALID")) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_conv2d '%s': padding '%s' is not SAME or VALID",
                    prefix, padding ? padding : "(null)");
    return nn_fail();
  }
  jx_array *y = jx_conv(x, w, strides, lo, hi, "NHWC,HWIO,NHWC");
  return b ? jx_add(y, b) : y;
}

/* ---- dropout ---- */

jx_array *jx_dropout(jx_array *key, jx_array *x, double rate, int training) {
  if (!nn_check_input("jx_dropout", "", x, 0)) return nn_fail();
  if (!(rate >= 0 && rate <= 1)) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_dropout: rate %g is not in [0, 1]", rate);
    return nn_fail();
  }
  if (!training || rate == 0) return x;
  jx_dtype dt = jx_dtype_of(x);
  if (rate == 1) return jx_zeros(dt, jx_shape_of(x));
  if (jx_is_poisoned(key)) {
    if (!key) jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_dropout: the key is NULL");
    return nn_fail();
  }
  double keep = 1 - rate;
  jx_array *mask = jx_random_bernoulli(key, keep, jx_shape_of(x));
  return jx_where(mask, jx_div(x, jx_scalar(dt, keep)), jx_scalar(dt, 0));
}
