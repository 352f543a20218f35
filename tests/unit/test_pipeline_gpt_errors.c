/* The GPT over pipeline stages refuses bad input with the numbers and the
 * caller's place: layers not divisible into the stages, a batch not
 * divisible into the microbatches, a mesh without the stage axis. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"

enum { T = 8 };

/* The recorded error mentions every one of what[] (printing it when not);
 * then it is cleared. */
static void error_has_all(int n, const char *const *what) {
  fprintf(stderr, "%s\n", jx_last_error());
  for (int k = 0; k < n; k++) {
    if (!strstr(jx_last_error(), what[k])) fprintf(stderr, "missing: %s\n", what[k]);
    assert_non_null(strstr(jx_last_error(), what[k]));
  }
  jx_clear_error();
}
#define ERROR_HAS(...)                                                                             \
  error_has_all(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *),                      \
                (const char *const[]){__VA_ARGS__})

static jx_gpt_config config(int layers) {
  jx_gpt_config c = jx_gpt_config_default();
  c.n_layers = layers;
  c.d_model = 16;
  c.n_heads = 2;
  c.context = T;
  return c;
}

/* The GPT of `layers` layers over a 2-device mesh whose axis is named
 * mesh_axis, pipelined over axis "stage" with `microbatches`. */
static jx_fn *pipelined(const char *mesh_axis, int layers, int microbatches, jx_mesh **m,
                        jx_tree **params) {
  *m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){mesh_axis});
  jx_gpt_config c = config(layers);
  *params = jx_gpt_init(&c, jx_random_key(3), JX_F32);
  return jx_gpt_pipeline_loss_fn(&c, *params, *m, "stage", microbatches, JX_PIPELINE_GPIPE, 1,
                                 NULL);
}

static void layers_not_divisible(void **state) {
  (void)state;
  jx_mesh *m;
  jx_tree *params;
  assert_null(pipelined("stage", 3, 2, &m, &params));
  ERROR_HAS("3 layers", "2 stages", "test_pipeline_gpt_errors.c:");
  jx_tree_release(params);
  jx_mesh_release(m);
}

static void stage_axis_missing(void **state) {
  (void)state;
  jx_mesh *m;
  jx_tree *params;
  assert_null(pipelined("data", 2, 2, &m, &params));
  ERROR_HAS("no stage axis 'stage' (its axes: data=2)", "test_pipeline_gpt_errors.c:");
  jx_tree_release(params);
  jx_mesh_release(m);
}

static void batch_not_divisible(void **state) {
  (void)state;
  jx_mesh *m;
  jx_tree *params;
  jx_fn *pipe = pipelined("stage", 2, 4, &m, &params);
  assert_non_null(pipe);
  int np = jx_tree_size(params);
  jx_array **in = calloc((size_t)np + 2, sizeof *in), *out = NULL;
  jx_tree_flatten(params, in);
  int32_t tok[6 * T] = {0};
  in[np] = jx_array_from(JX_I32, JX_SHAPE(6, T), tok);
  in[np + 1] = jx_array_from(JX_I32, JX_SHAPE(6, T), tok);
  assert_int_not_equal(jx_call(pipe, in, &out), JX_OK);
  ERROR_HAS("i32[6,8]", "leading dim 6 is not divisible into 4 microbatches",
            "test_pipeline_gpt_errors.c:");
  free(in);
  jx_fn_release(pipe);
  jx_tree_release(params);
  jx_mesh_release(m);
}

int main(void) {
  jx_set_cpu_device_count(2);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(layers_not_divisible, setup, teardown),
      cmocka_unit_test_setup_teardown(stage_axis_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(batch_not_divisible, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
