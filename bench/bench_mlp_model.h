/* The MLP 784-512-512-10 of the MLP benchmarks (ReLU, softmax
 * cross-entropy), as a jx_fn body:
 * loss(w1, b1, w2, b2, w3, b3, x, y) with y one-hot. */
#ifndef JX_BENCH_MLP_MODEL_H
#define JX_BENCH_MLP_MODEL_H

#include <jx/jx.h>

static void bench_mlp_loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_relu(jx_add(jx_matmul(in[6], in[0]), in[1]));
  h = jx_relu(jx_add(jx_matmul(h, in[2]), in[3]));
  jx_array *logits = jx_add(jx_matmul(h, in[4]), in[5]);
  jx_array *ce = jx_sum(jx_mul(in[7], jx_log_softmax(logits, 1)), JX_AXES(1), 0);
  out[0] = jx_neg(jx_mean(ce, JX_AXES(), 0));
}

#endif
