/* Conformance adapters for composite functions under transformations (the
 * goldens come from tests/golden/gen_composites.py, which writes the same
 * functions in JAX). */
#include <stdlib.h>

#include "conformance.h"

/* ---- the functions ---- */
static void mlp_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_tanh(jx_add(jx_matmul(in[4], in[0]), in[1]));
  jx_array *logits = jx_add(jx_matmul(h, in[2]), in[3]);
  jx_array *ce = jx_sum(jx_mul(in[5], jx_log_softmax(logits, 1)), JX_AXES(1), 0);
  out[0] = jx_neg(jx_mean(ce, JX_AXES(), 0));
}

static void layer_norm(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *mu = jx_mean(in[0], JX_AXES(-1), 1), *var = jx_var(in[0], JX_AXES(-1), 1);
  jx_array *xhat = jx_div(jx_sub(in[0], mu), jx_sqrt(jx_add(var, jx_scalar(JX_F64, 1e-5))));
  out[0] = jx_add(jx_mul(xhat, in[1]), in[2]);
}

/* causal self-attention with 2 heads; x: [t, d] */
static jx_array *heads_first(jx_array *x, int64_t t, int64_t h, int64_t hd) {
  return jx_transpose(jx_reshape(x, JX_SHAPE(t, h, hd)), JX_AXES(1, 0, 2));
}
static jx_array *attention(jx_array *const *in) {
  jx_shape s = jx_shape_of(in[0]);
  int64_t t = s.dims[0], d = s.dims[1], h = 2, hd = d / h;
  jx_array *q = heads_first(jx_matmul(in[0], in[1]), t, h, hd);
  jx_array *k = heads_first(jx_matmul(in[0], in[2]), t, h, hd);
  jx_array *v = heads_first(jx_matmul(in[0], in[3]), t, h, hd);
  jx_array *qk[2] = {q, k};
  jx_array *sc = jx_div(jx_einsum("hqd,hkd->hqk", 2, qk), jx_sqrt(jx_scalar(JX_F64, (double)hd)));
  jx_array *mask = jx_ge(jx_iota(JX_I32, JX_SHAPE(t, t), 0), jx_iota(JX_I32, JX_SHAPE(t, t), 1));
  sc = jx_where(mask, sc, jx_scalar(JX_F64, -1e9));
  jx_array *pv[2] = {jx_softmax(sc, -1), v};
  jx_array *o = jx_einsum("hqk,hkd->hqd", 2, pv);
  o = jx_reshape(jx_transpose(o, JX_AXES(1, 0, 2)), JX_SHAPE(t, d));
  return jx_matmul(o, in[4]);
}
static void attention_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_mul(attention(in), in[5]), JX_AXES(), 0);
}

/* h' = tanh(h @ wh + x @ wx + b), y = sum(h'^2); loss = sum(h_T) + sum(ys) */
static void rnn_step(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx; /* (wh, wx, b, h, x) -> (wh, wx, b, h', y) */
  jx_array *h = jx_tanh(jx_add(jx_add(jx_matmul(in[3], in[0]), jx_matmul(in[4], in[1])), in[2]));
  out[0] = in[0];
  out[1] = in[1];
  out[2] = in[2];
  out[3] = h;
  out[4] = jx_sum(jx_mul(h, h), JX_AXES(), 0);
}
static jx_fn *rnn_step_fn;
static void rnn_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *init[4] = {in[0], in[1], in[2], in[3]}, *xs[1] = {in[4]}, *o[5];
  jx_scan(rnn_step_fn, 4, init, 1, xs, -1, 0, o);
  out[0] = jx_add(jx_sum(o[3], JX_AXES(), 0), jx_sum(o[4], JX_AXES(), 0));
}

static void example_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *e = jx_sub(jx_tanh(jx_matmul(in[1], in[0])), in[2]);
  out[0] = jx_mul(e, e);
}

static void energy(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *t = jx_tanh(in[0]);
  jx_array *head = jx_slice(in[0], JX_SHAPE(0), JX_SHAPE(2), JX_SHAPE());
  out[0] = jx_add(jx_sum(jx_mul(jx_mul(t, t), in[0]), JX_AXES(), 0), jx_prod(head, JX_AXES(), 0));
}

/* ---- adapters ---- */
static jx_status run(jx_fn *f, jx_array *const *in, int nout, int skip, int *n, jx_array **out) {
  jx_array *tmp[CONF_MAX_IO];
  jx_status st = jx_call(f, in, tmp);
  for (int o = skip; o < nout; o++) out[o - skip] = tmp[o];
  *n = nout - skip;
  jx_fn_release(f);
  return st;
}

static jx_status mlp_value_and_grad(const conf_case *c, int nin, jx_array *const *in, int *nout,
                                    jx_array **out) {
  (void)c;
  (void)nin;
  jx_fn *f = jx_fn_create("mlp_loss", 6, 1, mlp_loss, NULL);
  jx_fn *vg = jx_value_and_grad(f, JX_AXES(0, 1, 2, 3), 0);
  jx_fn_release(f);
  return run(vg, in, 5, 0, nout, out);
}

static jx_status mlp_checkpoint_grad(const conf_case *c, int nin, jx_array *const *in, int *nout,
                                     jx_array **out) {
  (void)c;
  (void)nin;
  jx_fn *f = jx_fn_create("mlp_loss", 6, 1, mlp_loss, NULL);
  jx_fn *ck = jx_checkpoint(f);
  jx_fn *g = jx_grad(ck, JX_AXES(0, 1, 2, 3));
  jx_fn_release(f);
  jx_fn_release(ck);
  return run(g, in, 4, 0, nout, out);
}

static jx_status layer_norm_jvp(const conf_case *c, int nin, jx_array *const *in, int *nout,
                                jx_array **out) {
  (void)c;
  (void)nin;
  jx_fn *f = jx_fn_create("layer_norm", 3, 1, layer_norm, NULL);
  jx_fn *j = jx_jvp(f);
  jx_fn_release(f);
  return run(j, in, 2, 0, nout, out);
}

static jx_status layer_norm_vjp(const conf_case *c, int nin, jx_array *const *in, int *nout,
                                jx_array **out) {
  (void)c;
  (void)nin;
  jx_fn *f = jx_fn_create("layer_norm", 3, 1, layer_norm, NULL);
  jx_fn *v = jx_vjp(f);
  jx_fn_release(f);
  return run(v, in, 4, 1, nout, out); /* drop the primal output */
}

static jx_status attention_grad(const conf_case *c, int nin, jx_array *const *in, int *nout,
                                jx_array **out) {
  (void)c;
  (void)nin;
  jx_fn *f = jx_fn_create("attention_loss", 6, 1, attention_loss, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0, 1, 2, 3, 4));
  jx_fn_release(f);
  out[0] = attention(in);
  jx_status st = run(g, in, 5, 0, nout, out + 1);
  *nout = 6;
  return st;
}

static jx_status rnn_value_and_grad(const conf_case *c, int nin, jx_array *const *in, int *nout,
                                    jx_array **out) {
  (void)c;
  (void)nin;
  rnn_step_fn = jx_fn_create("rnn_step", 5, 5, rnn_step, NULL);
  jx_fn *f = jx_fn_create("rnn_loss", 5, 1, rnn_loss, NULL);
  jx_fn *vg = jx_value_and_grad(f, JX_AXES(0, 1, 2, 3, 4), 0);
  jx_fn_release(f);
  jx_status st = run(vg, in, 6, 0, nout, out);
  jx_fn_release(rnn_step_fn);
  return st;
}

static jx_status per_example_grads(const conf_case *c, int nin, jx_array *const *in, int *nout,
                                   jx_array **out) {
  (void)c;
  (void)nin;
  jx_fn *f = jx_fn_create("example_loss", 3, 1, example_loss, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_fn *v = jx_vmap(g, JX_AXES(JX_NONE, 0, 0), JX_AXES(0));
  jx_fn_release(f);
  jx_fn_release(g);
  return run(v, in, 1, 0, nout, out);
}

static jx_status hessian(const conf_case *c, int nin, jx_array *const *in, int *nout,
                         jx_array **out) {
  (void)c;
  (void)nin;
  jx_fn *f = jx_fn_create("energy", 1, 1, energy, NULL);
  jx_fn *h = jx_hessian(f, 0);
  jx_fn_release(f);
  return run(h, in, 1, 0, nout, out);
}

const conf_op conf_ops_composites[] = {
    {"mlp_value_and_grad", mlp_value_and_grad},
    {"mlp_checkpoint_grad", mlp_checkpoint_grad},
    {"layer_norm_jvp", layer_norm_jvp},
    {"layer_norm_vjp", layer_norm_vjp},
    {"attention_grad", attention_grad},
    {"rnn_value_and_grad", rnn_value_and_grad},
    {"per_example_grads", per_example_grads},
    {"hessian", hessian},
    {NULL, NULL},
};
