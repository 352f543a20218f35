/* The automatic sharding planner on a CNN: a small image classifier (two
 * 3x3 convolutions with relu, a 2x2 max pool between them, a dense head,
 * softmax cross-entropy) trained by SGD with momentum, its step jitted with
 * every parameter, optimizer state and batch layout JX_AUTO (the loss
 * replicated) on a 2x2 mesh of 4 CPU devices, planned with the figures
 * of slow devices on fast links (1 us, 10 GB/s, 100 MFLOP/s) so that the
 * plan splits the work and communicates. Over 20 steps its losses and its
 * final first-layer kernel equal the step's on one device (f32
 * tolerance). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>
#include <jx/parallel.h>

#include "test_util.h"

enum { BATCH = 8, SIDE = 8, CLASSES = 10, STEPS = 20, MAX_IN = 32 };

static jx_tree *params_like;

/* (params..., images [B, 8, 8, 1], labels [B]) -> mean cross-entropy */
static void cnn_loss(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  int np = jx_tree_size(params_like);
  jx_tree *p = jx_tree_unflatten(params_like, in);
  jx_array *x = jx_relu(jx_conv2d(p, "conv1", in[np], JX_SHAPE(), "SAME"));
  x = jx_max_pool(x, JX_SHAPE(2, 2), JX_SHAPE(2, 2), "VALID"); /* 4x4x8 */
  x = jx_relu(jx_conv2d(p, "conv2", x, JX_SHAPE(), "SAME"));
  jx_array *logits = jx_dense(p, "out", jx_reshape(x, JX_SHAPE(BATCH, 4 * 4 * 16)));
  out[0] = jx_mean(jx_softmax_cross_entropy(logits, in[np + 1], 0), JX_AXES(), 0);
  jx_tree_release(p);
}

/* Runs STEPS steps of f from the same start; losses[STEPS] and the final
 * first-conv kernel out. */
static void train(jx_fn *f, jx_array *const *start, int nin, int nout, double *losses,
                  float *kernel, size_t kernel_bytes) {
  jx_array *in[MAX_IN], *out[MAX_IN];
  for (int i = 0; i < nin; i++) in[i] = start[i];
  for (int s = 0; s < STEPS; s++) {
    check_ok(jx_call(f, in, out));
    losses[s] = jx_item(out[0]);
    for (int o = 1; o < nout; o++) in[o - 1] = out[o]; /* params' and state' */
  }
  check_ok(jx_read(in[0], kernel, kernel_bytes));
}

static void cnn_auto_equals_one_device(void **state) {
  (void)state;
  setenv("JX_JIT_KERNELS", "0", 1); /* the partitioner is under test, not the C compiler */
  jx_array *key = jx_random_key(3);
  params_like = jx_tree_create();
  check_ok(jx_conv2d_init(params_like, "conv1", jx_random_fold_in(key, 0), 3, 3, 1, 8, JX_F32));
  check_ok(jx_conv2d_init(params_like, "conv2", jx_random_fold_in(key, 1), 3, 3, 8, 16, JX_F32));
  check_ok(
      jx_dense_init(params_like, "out", jx_random_fold_in(key, 2), 4 * 4 * 16, CLASSES, JX_F32));
  jx_optimizer *opt = jx_optim_sgd(0.02, 0.9);
  jx_tree *opt_state = jx_optim_init(opt, params_like);
  int np = jx_tree_size(params_like), ns = jx_tree_size(opt_state);
  int nin = np + ns + 2, nout = 1 + np + ns;
  assert_true(nin <= MAX_IN);
  jx_fn *loss = jx_fn_create("cnn_loss", np + 2, 1, cnn_loss, NULL);
  jx_fn *step = jx_train_step(loss, params_like, opt_state, opt);
  jx_array *start[MAX_IN];
  jx_tree_flatten(params_like, start);
  jx_tree_flatten(opt_state, start + np);
  start[np + ns] =
      jx_random_normal(jx_random_fold_in(key, 7), JX_F32, JX_SHAPE(BATCH, SIDE, SIDE, 1));
  start[np + ns + 1] = jx_astype(
      jx_floor(jx_random_uniform(jx_random_fold_in(key, 8), JX_F32, JX_SHAPE(BATCH), 0, CLASSES)),
      JX_I32);

  /* one device */
  jx_fn *plain = jx_jit(step, NULL);
  double want[STEPS], got[STEPS];
  float want_k[3 * 3 * 8], got_k[3 * 3 * 8];
  train(plain, start, nin, nout, want, want_k, sizeof want_k);

  /* planned on 2x2 */
  const char *names[] = {"data", "model"};
  jx_mesh *m = jx_mesh_create((jx_shape){2, {2, 2}}, names);
  /* figures of slow devices on fast links, so that splitting the work pays
   * on so small a model */
  check_ok(
      jx_sharding_plan_figures(m, (const double[]){1e-6, 1e-6}, (const double[]){1e10, 1e10}, 1e8));
  jx_sharding *replicated = jx_sharding_create(m, "");
  jx_sharding *in_sh[MAX_IN], *out_sh[MAX_IN];
  for (int i = 0; i < nin; i++) in_sh[i] = JX_AUTO;
  out_sh[0] = replicated;
  for (int o = 1; o < nout; o++) out_sh[o] = JX_AUTO;
  jx_fn *planned =
      jx_jit(step, &(jx_jit_options){.in_shardings = in_sh, .out_shardings = out_sh, .mesh = m});
  jx_sharding_estimate est;
  check_ok(jx_sharding_estimate_of(planned, start, &est));
  print_message("plan: %.3g s (compute %.3g s, communication %.3g s in %d collectives, cores idle "
                "%.3g s), peak %.0f bytes per device\n",
                est.step_s, est.compute_s, est.comm_s, est.collectives, est.idle_s, est.peak_bytes);
  assert_true(est.compute_s > 0 && est.peak_bytes > 0);
  assert_true(est.collectives > 0); /* the work is split */
  train(planned, start, nin, nout, got, got_k, sizeof got_k);
  for (int s = 0; s < STEPS; s++) {
    print_message("step %2d: loss %.6f (one device %.6f)\n", s, got[s], want[s]);
    assert_float_equal(got[s], want[s], 2e-5 * fabs(want[s]) + 1e-6);
  }
  assert_true(want[STEPS - 1] < 0.8 * want[0]); /* it trains */
  for (int k = 0; k < 3 * 3 * 8; k++)
    assert_float_equal(got_k[k], want_k[k], 1e-4 * fabsf(want_k[k]) + 1e-5);
  jx_fn_release(planned);
  jx_fn_release(plain);
  jx_fn_release(step);
  jx_fn_release(loss);
  jx_sharding_release(replicated);
  jx_mesh_release(m);
  jx_tree_release(opt_state);
  jx_tree_release(params_like);
  jx_optim_release(opt);
  unsetenv("JX_JIT_KERNELS");
}

int main(void) {
  jx_set_cpu_device_count(4);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(cnn_auto_equals_one_device, setup, teardown)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
