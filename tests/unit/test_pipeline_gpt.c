/* The reference GPT through a pipeline (jx_gpt_pipeline_loss_fn): its loss
 * and gradients equal jx_gpt_loss_fn's (the oracle: the unpipelined model
 * on one device) for 2 and 4 stages, GPipe, 1F1B and interleaved (2 x 2
 * virtual stages), alone and with the
 * batch split over a data axis, and three AdamW steps of jx_train_step
 * through it give the unpipelined model's losses. (Not its parameters to
 * 1e-4: where a gradient is rounding noise, as the attention's key biases'
 * is, AdamW's first steps move by the learning rate either way.) */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"
#include "test_close.h"
#include "gpt_pipeline_oracle.h"

enum { BATCH = 8, T = 8 };

static jx_gpt_config config(void) {
  jx_gpt_config c = jx_gpt_config_default();
  c.n_layers = 4;
  c.d_model = 16;
  c.n_heads = 2;
  c.context = T;
  return c;
}

static void check_gradients(jx_mesh *m, int microbatches, jx_pipeline_schedule schedule,
                            const char *batch_spec) {
  jx_gpt_config c = config();
  jx_tree *params = jx_gpt_init(&c, jx_random_key(3), JX_F32);
  int np = jx_tree_size(params);
  jx_fn *pipe = jx_gpt_pipeline_loss_fn(&c, params, m, "stage", microbatches, schedule,
                                        schedule == JX_PIPELINE_INTERLEAVED ? 2 : 1, batch_spec);
  assert_non_null(pipe);
  jx_array **in = calloc((size_t)np + 2, sizeof *in), **want = calloc((size_t)np + 1, sizeof *want),
           **got = calloc((size_t)np + 1, sizeof *got);
  gpt_pipeline_check(&c, params, pipe, BATCH, T, in, want, got);
  jx_array *primal = NULL;
  check_ok(jx_call(pipe, in, &primal));
  assert_close(primal, want[0], 1e-6);
  free(in);
  free(want);
  free(got);
  jx_fn_release(pipe);
  jx_tree_release(params);
}

static void two_stages(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  check_gradients(m, 4, JX_PIPELINE_1F1B, NULL);
  check_gradients(m, 2, JX_PIPELINE_GPIPE, NULL);
  jx_mesh_release(m);
}

/* 2 devices x 2 virtual stages, a layer each */
static void interleaved(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  check_gradients(m, 2, JX_PIPELINE_INTERLEAVED, NULL);
  jx_mesh_release(m);
}

static void four_stages(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4), (const char *const[]){"stage"});
  check_gradients(m, 4, JX_PIPELINE_1F1B, NULL);
  jx_mesh_release(m);
}

static void stages_and_data(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2), (const char *const[]){"stage", "data"});
  check_gradients(m, 2, JX_PIPELINE_1F1B, "data");
  jx_mesh_release(m);
}

/* Three AdamW steps of jx_train_step: the same losses. */
static void training_steps(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  jx_gpt_config c = config();
  double losses[2][3];
  for (int run = 0; run < 2; run++) {
    jx_tree *params = jx_gpt_init(&c, jx_random_key(5), JX_F32);
    jx_optimizer *opt = jx_optim_adamw(1e-2, 0.9, 0.95, 1e-8, 0.1);
    jx_tree *st = jx_optim_init(opt, params);
    int np = jx_tree_size(params), ns = jx_tree_size(st);
    jx_fn *loss =
        run ? jx_gpt_pipeline_loss_fn(&c, params, m, "stage", 4, JX_PIPELINE_1F1B, 1, NULL)
            : jx_gpt_loss_fn(&c, params);
    jx_fn *step = jx_train_step(loss, params, st, opt);
    jx_array **in = calloc((size_t)(np + ns + 2), sizeof *in);
    jx_array **out = calloc((size_t)(1 + np + ns), sizeof *out);
    for (int s = 0; s < 3; s++) {
      jx_tree_flatten(params, in);
      jx_tree_flatten(st, in + np);
      gpt_pipeline_batch(BATCH, T, &in[np + ns], &in[np + ns + 1]);
      check_ok(jx_call(step, in, out));
      losses[run][s] = jx_item(out[0]);
      for (int i = 0; i < np; i++) jx_tree_set(params, jx_tree_name(params, i), out[1 + i]);
      for (int i = 0; i < ns; i++) jx_tree_set(st, jx_tree_name(st, i), out[1 + np + i]);
    }
    jx_tree_release(params);
    free(in);
    free(out);
    jx_fn_release(step);
    jx_fn_release(loss);
    jx_tree_release(st);
    jx_optim_release(opt);
  }
  for (int s = 0; s < 3; s++) assert_true(fabs(losses[1][s] - losses[0][s]) < 1e-5 * losses[0][s]);
  assert_true(losses[0][2] < losses[0][0] - 0.05); /* it trains */
  jx_mesh_release(m);
}

static void bad_input(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(3), (const char *const[]){"stage"});
  jx_gpt_config c = config();
  jx_tree *params = jx_gpt_init(&c, jx_random_key(3), JX_F32);
  assert_null(jx_gpt_pipeline_loss_fn(&c, params, m, "stage", 4, JX_PIPELINE_1F1B, 1, NULL));
  assert_error_has("4 layers do not split evenly into 3 stages of mesh axis 'stage'");
  assert_null(jx_gpt_pipeline_loss_fn(&c, params, m, "pipe", 4, JX_PIPELINE_1F1B, 1, NULL));
  assert_error_has("the mesh has no stage axis 'pipe'");
  jx_mesh *two = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  assert_null(jx_gpt_pipeline_loss_fn(&c, params, two, "stage", 1, JX_PIPELINE_1F1B, 1, NULL));
  assert_error_has("got 1 microbatches for 2 stages");
  jx_mesh_release(two);
  jx_tree_release(params);
  jx_mesh_release(m);
}

int main(void) {
  jx_set_cpu_device_count(4);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(two_stages, setup, teardown),
      cmocka_unit_test_setup_teardown(four_stages, setup, teardown),
      cmocka_unit_test_setup_teardown(interleaved, setup, teardown),
      cmocka_unit_test_setup_teardown(stages_and_data, setup, teardown),
      cmocka_unit_test_setup_teardown(training_steps, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_input, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
