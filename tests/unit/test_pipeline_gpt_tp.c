/* The reference GPT through a pipeline on a 3-D mesh, stage x data x model
 * (2 x 2 x 2 CPU devices): its stages run Megatron's tensor parallelism
 * over model (jx_gpt_param_specs's specs for the stacked block
 * parameters), the batch splits over data. Its loss and gradients equal
 * jx_gpt_loss_fn's on one device (f32, 1e-5) for GPipe and 1F1B, and the
 * gradients of the block's column- and row-parallel weights come back
 * split over model, as the stages held them. With heads the model axis
 * does not divide (1 head), the stages keep the whole block and still
 * agree. */
#define _POSIX_C_SOURCE 200809L
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

static jx_gpt_config config(int heads) {
  jx_gpt_config c = jx_gpt_config_default();
  c.n_layers = 2;
  c.d_model = 16;
  c.n_heads = heads;
  c.context = T;
  return c;
}

/* 1 if the array's sharding names the model axis */
static int split_over_model(const jx_array *a) {
  jx_sharding *s = jx_sharding_of(a);
  return s && strstr(jx_sharding_spec(s), "model") != NULL;
}

static void check(int heads, jx_pipeline_schedule schedule, int want_split) {
  jx_scope_begin();
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2, 2), (const char *const[]){"stage", "data", "model"});
  jx_gpt_config c = config(heads);
  jx_tree *params = jx_gpt_init(&c, jx_random_key(3), JX_F32);
  int np = jx_tree_size(params);
  jx_fn *pipe = jx_gpt_pipeline_loss_fn(&c, params, m, "stage", 2, schedule, 1, "data");
  if (!pipe) fprintf(stderr, "%s\n", jx_last_error());
  assert_non_null(pipe);
  jx_array **in = calloc((size_t)np + 2, sizeof *in), **want = calloc((size_t)np + 1, sizeof *want),
           **got = calloc((size_t)np + 1, sizeof *got);
  gpt_pipeline_check(&c, params, pipe, BATCH, T, in, want, got);
  int weights = 0;
  for (int i = 0; i < np; i++) {
    const char *name = jx_tree_name(params, i);
    if (!strcmp(name, "blocks.1.attn.wq") || !strcmp(name, "blocks.0.attn.wo") ||
        !strcmp(name, "blocks.0.mlp.fc.w") || !strcmp(name, "blocks.1.mlp.proj.w")) {
      assert_int_equal(split_over_model(got[1 + i]), want_split);
      weights++;
    }
    if (!strcmp(name, "blocks.0.ln1.scale") || !strcmp(name, "blocks.0.attn.bo"))
      assert_false(split_over_model(got[1 + i])); /* whole in every stage */
  }
  assert_int_equal(weights, 4);
  free(in);
  free(want);
  free(got);
  jx_fn_release(pipe);
  jx_tree_release(params);
  jx_mesh_release(m);
  jx_scope_end();
}

static void one_f_one_b_tensor_parallel(void **state) {
  (void)state;
  check(2, JX_PIPELINE_1F1B, 1);
}

static void gpipe_tensor_parallel(void **state) {
  (void)state;
  check(2, JX_PIPELINE_GPIPE, 1);
}

/* one head cannot split over 2 devices: the stages keep the whole block */
static void heads_not_divisible(void **state) {
  (void)state;
  check(1, JX_PIPELINE_1F1B, 0);
}

int main(void) {
  jx_set_cpu_device_count(8);
  setenv("JX_JIT_KERNELS", "0", 1); /* the stages' sharding is under test, not the C compiler */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_f_one_b_tensor_parallel),
      cmocka_unit_test(gpipe_tensor_parallel),
      cmocka_unit_test(heads_not_divisible),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
