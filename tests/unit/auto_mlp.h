/* The 2-layer MLP the automatic sharding tests plan: its inputs (x, w1, w2,
 * y) and its loss, with tanh or with relu (a custom_jvp call) and a JX_AUTO
 * sharding constraint on the hidden layer. */
#ifndef JX_TESTS_AUTO_MLP_H
#define JX_TESTS_AUTO_MLP_H

#include <jx/jx.h>
#include <jx/parallel.h>

enum { NIN = 4 };
static const jx_shape shapes[NIN] = {{2, {16, 32}}, {2, {32, 64}}, {2, {64, 8}}, {2, {16, 8}}};

/* (x, w1, w2, y) -> mean((tanh(x w1) w2 - y)^2) */
static void mlp_loss(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *h = jx_tanh(jx_matmul(in[0], in[1]));
  out[0] = jx_mean(jx_square(jx_sub(jx_matmul(h, in[2]), in[3])), JX_AXES(), 0);
}

/* (x, w1, w2, y) -> mean((constrain(relu(x w1)) w2 - y)^2), the hidden
 * layer's layout JX_AUTO */
static inline void mlp_relu_loss(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *h = jx_with_sharding_constraint(jx_relu(jx_matmul(in[0], in[1])), JX_AUTO);
  out[0] = jx_mean(jx_square(jx_sub(jx_matmul(h, in[2]), in[3])), JX_AXES(), 0);
}

#endif
