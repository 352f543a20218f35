/* One jitted training step of an MLP 784-512-512-10 (ReLU, softmax
 * cross-entropy) on a batch of 256 with AdamW, as docs/performance.md's MLP row:
 * value_and_grad of the loss and the AdamW update of all six parameters in
 * one jitted function. The steps run as a training loop runs them: each
 * takes the parameters and optimizer state the last one returned, donated
 * (written in place), as bench_gpt does and as compare.py's JAX twin does
 * with donate_argnums. Prints the median step time as a JSON line;
 * bench/compare.py times the same step in JAX (+ Optax-equivalent AdamW). */
#include "bench_util.h"
#include "bench_mlp_model.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum {
  BATCH = 256,
  IN = 784,
  H = 512,
  OUT = 10,
  NPARAM = 6,
  WARMUP = 3,
  RUNS = 15,
  MAX_RUNS = 1000
};

static jx_fn *grad_fn;
/* step(params..., m..., v..., x, y, t) -> (loss, params'..., m'..., v'...) with AdamW
 * (lr 1e-3, b1 0.9, b2 0.999, eps 1e-8, weight decay 1e-4), as optax.adamw */
static void step_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *args[8], *g[1 + NPARAM];
  for (int i = 0; i < NPARAM; i++) args[i] = in[i];
  args[6] = in[3 * NPARAM];
  args[7] = in[3 * NPARAM + 1];
  jx_call(grad_fn, args, g);
  jx_array *t = in[3 * NPARAM + 2];
  jx_array *b1 = jx_scalar(JX_F32, 0.9), *b2 = jx_scalar(JX_F32, 0.999);
  jx_array *one = jx_scalar(JX_F32, 1);
  jx_array *c1 = jx_sub(one, jx_pow(b1, t)), *c2 = jx_sub(one, jx_pow(b2, t));
  out[0] = g[0];
  for (int i = 0; i < NPARAM; i++) {
    jx_array *gi = g[1 + i];
    jx_array *m = jx_add(jx_mul(b1, in[NPARAM + i]), jx_mul(jx_sub(one, b1), gi));
    jx_array *v = jx_add(jx_mul(b2, in[2 * NPARAM + i]), jx_mul(jx_sub(one, b2), jx_mul(gi, gi)));
    jx_array *upd = jx_div(jx_div(m, c1), jx_add(jx_sqrt(jx_div(v, c2)), jx_scalar(JX_F32, 1e-8)));
    upd = jx_add(upd, jx_mul(jx_scalar(JX_F32, 1e-4), in[i]));
    out[1 + i] = jx_sub(in[i], jx_mul(jx_scalar(JX_F32, 1e-3), upd));
    out[1 + NPARAM + i] = m;
    out[1 + 2 * NPARAM + i] = v;
  }
}

/* The next step's parameters and moments are this one's outputs (the old
 * ones were donated to it). */
static void next_state(jx_array **in, jx_array *const *out) {
  for (int i = 0; i < 3 * NPARAM; i++) {
    jx_release(in[i]);
    in[i] = jx_keep(out[1 + i]);
  }
}

int main(int argc, char **argv) {
  /* argv[1]: timed steps (compare.py passes its --runs; at least 15 here, the step is short) */
  int runs = argc > 1 ? atoi(argv[1]) : RUNS;
  if (runs < RUNS) runs = RUNS;
  if (runs > MAX_RUNS) runs = MAX_RUNS;
  jx_fn *loss = jx_fn_create("mlp_loss", 8, 1, bench_mlp_loss_body, NULL);
  grad_fn = jx_value_and_grad(loss, JX_AXES(0, 1, 2, 3, 4, 5), 0);
  int donate[3 * NPARAM + 3] = {0}; /* the parameters and both moments */
  for (int i = 0; i < 3 * NPARAM; i++) donate[i] = 1;
  jx_fn *step = jx_jit(jx_fn_create("train_step", 3 * NPARAM + 3, 1 + 3 * NPARAM, step_body, NULL),
                       &(jx_jit_options){.donate = donate});
  jx_shape shapes[NPARAM] = {JX_SHAPE(IN, H), JX_SHAPE(H),      JX_SHAPE(H, H),
                             JX_SHAPE(H),     JX_SHAPE(H, OUT), JX_SHAPE(OUT)};
  jx_array *in[3 * NPARAM + 3];
  jx_array *key = jx_random_key(0);
  for (int i = 0; i < NPARAM; i++) {
    key = jx_random_fold_in(key, (uint32_t)i);
    in[i] = jx_keep(jx_mul(jx_random_normal(key, JX_F32, shapes[i]), jx_scalar(JX_F32, 0.05)));
    in[NPARAM + i] = jx_keep(jx_zeros(JX_F32, shapes[i]));
    in[2 * NPARAM + i] = jx_keep(jx_zeros(JX_F32, shapes[i]));
  }
  in[3 * NPARAM] = jx_keep(jx_random_normal(jx_random_key(1), JX_F32, JX_SHAPE(BATCH, IN)));
  in[3 * NPARAM + 1] = jx_keep(
      jx_one_hot(jx_random_categorical(jx_random_key(2), jx_zeros(JX_F32, JX_SHAPE(BATCH, OUT)), 1),
                 OUT, JX_F32));
  in[3 * NPARAM + 2] = jx_keep(jx_scalar(JX_F32, 1));
  jx_array *out[1 + 3 * NPARAM];
  double t0 = bench_now_s();
  if (jx_call(step, in, out)) {
    fprintf(stderr, "%s\n", jx_last_error());
    return 1;
  }
  double first = (bench_now_s() - t0) * 1e3;
  next_state(in, out);
  static double t[MAX_RUNS];
  for (int r = 0; r < WARMUP + runs; r++) {
    jx_scope_begin();
    double s = bench_now_s();
    if (jx_call(step, in, out)) {
      fprintf(stderr, "%s\n", jx_last_error());
      return 1;
    }
    jx_block_until_ready(out[0]);
    next_state(in, out);
    if (r >= WARMUP) t[r - WARMUP] = (bench_now_s() - s) * 1e3;
    if (r == WARMUP + runs - 1)
      printf("{\"bench\":\"mlp_step\",\"impl\":\"jx\",\"loss\":%.6f,", jx_item(out[0]));
    jx_scope_end();
  }
  qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
  printf("\"median_ns\":%.0f,\"runs\":%d}\n", t[runs / 2] * 1e6, runs);
  printf("{\"bench\":\"mlp_step_first_call\",\"impl\":\"jx\",\"median_ns\":%.0f,\"runs\":1}\n",
         first * 1e6);
  for (int i = 0; i < 3 * NPARAM + 3; i++) jx_release(in[i]);
  jx_fn_release(step);
  jx_fn_release(grad_fn);
  jx_fn_release(loss);
  jx_shutdown();
  return 0;
}
