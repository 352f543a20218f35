/* Causal multi-head self-attention, the MLP block and the pre-norm
 * transformer block built from them (GPT-2's). */
#include <stdio.h>

#include "attention.h"
#include "attention_core.h"
#include "nn_util.h"

static jx_status set(jx_tree *t, const char *prefix, const char *name, jx_array *a) {
  char full[256];
  if (jx_is_poisoned(a)) return jx_last_status() ? jx_last_status() : JX_ERR_POISONED;
  jx_tree_set(t, nn_join(full, prefix, name), a);
  return jx_last_status();
}

jx_status jx_attention_init(jx_tree *t, const char *prefix, jx_array *key, int64_t d,
                            double wo_stddev, jx_dtype dt) {
  if (!t) return jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_attention_init: the tree is NULL");
  static const char *const w[4] = {"wq", "wk", "wv", "wo"}, *const b[4] = {"bq", "bk", "bv", "bo"};
  jx_array *keys = jx_random_split(key, 4);
  jx_status st = JX_OK;
  for (int i = 0; i < 4 && !st; i++)
    st = set(t, prefix, w[i],
             jx_init_normal(nn_key_at(keys, i), dt, JX_SHAPE(d, d), i == 3 ? wo_stddev : 0.02));
  for (int i = 0; i < 4 && !st; i++) st = set(t, prefix, b[i], jx_zeros(dt, JX_SHAPE(d)));
  return st;
}

/* A projection x @ w + b named "<prefix>.<w>" / "<prefix>.<b>": w [rows,
 * cols], b [cols] (a size < 0 matches any). With an axis the product is
 * row-parallel (Megatron's): w holds this device's rows, x its matching
 * columns, and the partial products add up over the axis before the bias. */
static jx_array *project(const jx_tree *t, const char *prefix, const char *wn, const char *bn,
                         jx_array *x, int64_t rows, int64_t cols, const char *axis, int *ok) {
  jx_array *w =
      nn_param("jx_causal_self_attention", t, prefix, wn, 2, (int64_t[]){rows, cols}, 0, ok);
  if (!*ok) return NULL;
  jx_array *b = nn_param("jx_causal_self_attention", t, prefix, bn, 1,
                         (int64_t[]){jx_shape_of(w).dims[1]}, 0, ok);
  if (!*ok) return NULL;
  jx_array *y = jx_dot_general(x, w, JX_AXES(2), JX_AXES(0), JX_AXES(), JX_AXES());
  return jx_add(axis ? jx_psum(y, axis) : y, b);
}

/* The attention; with an axis, Megatron's over it: wq, wk, wv and their
 * biases hold this device's columns (whole heads), wo its rows, so each
 * device runs its own heads and one psum over the axis joins them. */
static jx_array *attention(const jx_tree *t, const char *prefix, jx_array *x, int n_heads,
                           const char *axis) {
  const char *L = "jx_causal_self_attention";
  char buf[96];
  if (!nn_check_input(L, prefix, x, 2)) return nn_fail();
  jx_shape xs = jx_shape_of(x);
  int r = xs.rank;
  int64_t T = xs.dims[r - 2], d = xs.dims[r - 1], n = 1;
  if (n_heads < 1 || d % n_heads) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "%s '%s': %d heads do not divide the input %s's %lld features", L, prefix,
                    n_heads, nn_aval(x, buf), (long long)d);
    return nn_fail();
  }
  for (int i = 0; i < r - 2; i++) n *= xs.dims[i];
  int64_t dh = d / n_heads;
  /* every leading dim folded into one batch dim: [n, T, d] */
  jx_array *x3 = jx_reshape(x, JX_SHAPE(n, T, d));
  int ok = 1;
  jx_array *q = project(t, prefix, "wq", "bq", x3, d, axis ? -1 : d, NULL, &ok);
  if (!ok) return nn_fail();
  int64_t dl = jx_shape_of(q).dims[2], H = dl / dh; /* this device's features and heads */
  if (dl % dh) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "%s '%s': the shard's %lld columns of wq are not whole heads of %lld", L,
                    prefix, (long long)dl, (long long)dh);
    return nn_fail();
  }
  jx_array *k = project(t, prefix, "wk", "bk", x3, d, dl, NULL, &ok);
  jx_array *v = ok ? project(t, prefix, "wv", "bv", x3, d, dl, NULL, &ok) : NULL;
  if (!ok) return nn_fail();
  q = jx_reshape(q, JX_SHAPE(n, T, H, dh));
  k = jx_reshape(k, JX_SHAPE(n, T, H, dh));
  v = jx_reshape(v, JX_SHAPE(n, T, H, dh));
  /* o [n, H, T, dh]: softmax(q k^T / sqrt(dh), causal) v, one function with
   * its own derivative (attention_core.h: flash kernels on CUDA) */
  jx_array *o = nn_causal_attention_core(q, k, v);
  o = jx_reshape(jx_transpose(o, JX_AXES(0, 2, 1, 3)), JX_SHAPE(n, T, dl));
  o = project(t, prefix, "wo", "bo", o, dl, d, axis, &ok);
  if (!ok) return nn_fail();
  return jx_reshape(o, xs);
}

jx_array *jx_causal_self_attention(const jx_tree *t, const char *prefix, jx_array *x, int n_heads) {
  return attention(t, prefix, x, n_heads, NULL);
}

jx_status jx_mlp_init(jx_tree *t, const char *prefix, jx_array *key, int64_t d, int64_t hidden,
                      double proj_stddev, jx_dtype dt) {
  if (!t) return jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_mlp_init: the tree is NULL");
  jx_array *keys = jx_random_split(key, 2);
  jx_status st =
      set(t, prefix, "fc.w", jx_init_normal(nn_key_at(keys, 0), dt, JX_SHAPE(d, hidden), 0.02));
  if (!st) st = set(t, prefix, "fc.b", jx_zeros(dt, JX_SHAPE(hidden)));
  if (!st)
    st = set(t, prefix, "proj.w",
             jx_init_normal(nn_key_at(keys, 1), dt, JX_SHAPE(hidden, d), proj_stddev));
  if (!st) st = set(t, prefix, "proj.b", jx_zeros(dt, JX_SHAPE(d)));
  return st;
}

/* The MLP; with an axis, Megatron's over it: fc.w and fc.b hold this
 * device's columns, proj.w its rows, and a psum over the axis joins the
 * partial products before proj.b. */
static jx_array *mlp(const jx_tree *t, const char *prefix, jx_array *x, const char *axis) {
  const char *L = "jx_mlp";
  if (!nn_check_input(L, prefix, x, 1)) return nn_fail();
  int r = jx_ndim(x), ok = 1;
  int64_t d = jx_shape_of(x).dims[r - 1];
  jx_array *fw = nn_param(L, t, prefix, "fc.w", 2, (int64_t[]){d, -1}, 0, &ok);
  if (!ok) return nn_fail();
  int64_t h = jx_shape_of(fw).dims[1];
  jx_array *fb = nn_param(L, t, prefix, "fc.b", 1, (int64_t[]){h}, 0, &ok);
  jx_array *pw = nn_param(L, t, prefix, "proj.w", 2, (int64_t[]){h, d}, 0, &ok);
  jx_array *pb = nn_param(L, t, prefix, "proj.b", 1, (int64_t[]){d}, 0, &ok);
  if (!ok) return nn_fail();
  jx_array *y = jx_add(jx_dot_general(x, fw, JX_AXES(r - 1), JX_AXES(0), JX_AXES(), JX_AXES()), fb);
  y = jx_gelu(y);
  y = jx_dot_general(y, pw, JX_AXES(r - 1), JX_AXES(0), JX_AXES(), JX_AXES());
  return jx_add(axis ? jx_psum(y, axis) : y, pb);
}

jx_array *jx_mlp(const jx_tree *t, const char *prefix, jx_array *x) {
  return mlp(t, prefix, x, NULL);
}

jx_status jx_transformer_block_init(jx_tree *t, const char *prefix, jx_array *key, int64_t d,
                                    int64_t hidden, double resid_stddev, jx_dtype dt) {
  char name[256];
  if (!t)
    return jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_transformer_block_init: the tree is NULL");
  jx_array *keys = jx_random_split(key, 2);
  jx_status st = jx_layer_norm_init(t, nn_join(name, prefix, "ln1"), d, dt);
  if (!st)
    st = jx_attention_init(t, nn_join(name, prefix, "attn"), nn_key_at(keys, 0), d, resid_stddev,
                           dt);
  if (!st) st = jx_layer_norm_init(t, nn_join(name, prefix, "ln2"), d, dt);
  if (!st)
    st = jx_mlp_init(t, nn_join(name, prefix, "mlp"), nn_key_at(keys, 1), d, hidden, resid_stddev,
                     dt);
  return st;
}

jx_array *nn_transformer_block_over(const jx_tree *t, const char *prefix, jx_array *x, int n_heads,
                                    double eps, const char *axis) {
  char name[256];
  if (!nn_check_input("jx_transformer_block", prefix, x, 2)) return nn_fail();
  /* one name buffer per call: each layer reads its prefix before the next join */
  jx_array *h = jx_layer_norm(t, nn_join(name, prefix, "ln1"), x, eps);
  x = jx_add(x, attention(t, nn_join(name, prefix, "attn"), h, n_heads, axis));
  h = jx_layer_norm(t, nn_join(name, prefix, "ln2"), x, eps);
  jx_array *m = mlp(t, nn_join(name, prefix, "mlp"), h, axis);
  return jx_add(x, m);
}

jx_array *jx_transformer_block(const jx_tree *t, const char *prefix, jx_array *x, int n_heads,
                               double eps) {
  return nn_transformer_block_over(t, prefix, x, n_heads, eps, NULL);
}
