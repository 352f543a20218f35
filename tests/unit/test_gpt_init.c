/* jx_gpt_init's memory and bits (src/nn/gpt.c, src/nn/init.c,
 * src/ops/random_ops.c): the parameters of a 6-layer model are drawn with
 * at most the parameters and one draw's result and its scaled copy alive
 * at once (an eager sampler writes its draw straight into its result; the
 * recipe's primitives make about eighteen arrays of the parameter's size,
 * and with every draw's intermediates kept to the end the peak was
 * nineteen times the parameters), and each parameter is bit for bit the
 * documented draw: jx_random_normal of row i of jx_random_split(key, n)
 * times its stddev (JAX's goldens are checked in test_gpt). The shape-only
 * twins, jx_gpt_init_shapes and jx_optim_init_shapes, give jx_gpt_init's
 * and jx_optim_init's names, shapes and dtypes and allocate nothing; a bad
 * config is an error naming the call. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"

static jx_gpt_config six_layers(void) {
  jx_gpt_config c = jx_gpt_config_default();
  c.n_layers = 6;
  c.d_model = 64;
  c.n_heads = 4;
  c.context = 64;
  return c;
}

static void peak_is_parameters_and_one_draw(void **state) {
  (void)state;
  jx_gpt_config c = six_layers();
  jx_array *key = jx_random_key(0);
  jx_memory_stats before, after;
  check_ok(jx_memory_stats(0, &before));
  jx_memory_reset_peak(0);
  jx_tree *t = jx_gpt_init(&c, key, JX_F32);
  assert_non_null(t);
  check_ok(jx_memory_stats(0, &after));
  int64_t param_bytes = jx_tree_numel(t) * 4;
  int64_t peak = after.peak_bytes - before.live_bytes;
  /* the largest parameters are [256, 64] and [64, 256]: 16 Ki floats each,
   * about 1/20 of the 313 Ki; the draw and its scaled copy make 1.1 x
   * (the recipe's eighteen arrays in flight made 1.9 x) */
  if (peak > param_bytes * 6 / 5)
    fail_msg("peak %lld bytes for %lld bytes of parameters", (long long)peak,
             (long long)param_bytes);
  jx_tree_release(t);
}

static void parameters_are_the_documented_draws(void **state) {
  (void)state;
  jx_gpt_config c = six_layers();
  jx_array *key = jx_random_key(7);
  jx_tree *t = jx_gpt_init(&c, key, JX_F32);
  assert_non_null(t);
  int n = jx_tree_size(t), draws = 0;
  jx_array *keys = jx_random_split(key, n);
  double resid = 0.02 / sqrt(2.0 * (double)c.n_layers);
  for (int i = 0; i < n; i++) {
    const char *name = jx_tree_name(t, i);
    jx_array *got = jx_tree_at(t, i);
    jx_shape s = jx_shape_of(got);
    jx_array *want;
    if (jx_ndim(got) == 1) { /* norms' scales are ones, biases zeros */
      want = strstr(name, ".scale") ? jx_ones(JX_F32, s) : jx_zeros(JX_F32, s);
    } else {
      jx_array *k =
          jx_reshape(jx_slice(keys, JX_SHAPE(i, 0), JX_SHAPE(i + 1, 2), JX_SHAPE()), JX_SHAPE(2));
      double std = strstr(name, "attn.wo") || strstr(name, "mlp.proj.w") ? resid : 0.02;
      want = jx_mul(jx_random_normal(k, JX_F32, s), jx_full(JX_F32, JX_SHAPE(), std));
      draws++;
    }
    size_t bytes = (size_t)jx_size(got) * 4;
    float *g = malloc(bytes), *w = malloc(bytes);
    check_ok(jx_read(got, g, bytes));
    check_ok(jx_read(want, w, bytes));
    if (memcmp(g, w, bytes) != 0) fail_msg("%s differs from its draw", name);
    free(g);
    free(w);
  }
  assert_int_equal(draws, 2 + 6 * 6); /* wte, wpe; wq, wk, wv, wo, fc.w, proj.w per layer */
  jx_tree_release(t);
}

static void shapes_are_the_inits_without_memory(void **state) {
  (void)state;
  jx_gpt_config c = six_layers();
  jx_optimizer *opt = jx_optim_adamw(1e-3, 0.9, 0.95, 1e-8, 0.1);
  jx_tree *real = jx_gpt_init(&c, jx_random_key(0), JX_F32);
  jx_tree *real_state = jx_optim_init(opt, real);
  jx_memory_stats before, after;
  check_ok(jx_memory_stats(0, &before));
  jx_memory_reset_peak(0);
  jx_tree *shapes = jx_gpt_init_shapes(&c, JX_F32);
  jx_tree *state_shapes = jx_optim_init_shapes(opt, shapes);
  check_ok(jx_memory_stats(0, &after));
  assert_true(after.peak_bytes <= before.live_bytes);
  const jx_tree *pairs[2][2] = {{real, shapes}, {real_state, state_shapes}};
  for (int k = 0; k < 2; k++) {
    assert_int_equal(jx_tree_size(pairs[k][0]), jx_tree_size(pairs[k][1]));
    for (int i = 0; i < jx_tree_size(pairs[k][0]); i++) {
      jx_array *a = jx_tree_at(pairs[k][0], i), *b = jx_tree_at(pairs[k][1], i);
      assert_string_equal(jx_tree_name(pairs[k][0], i), jx_tree_name(pairs[k][1], i));
      assert_int_equal(jx_dtype_of(a), jx_dtype_of(b));
      jx_shape sa = jx_shape_of(a), sb = jx_shape_of(b);
      assert_int_equal(sa.rank, sb.rank);
      for (int d = 0; d < sa.rank; d++) assert_int_equal(sa.dims[d], sb.dims[d]);
    }
  }
  /* a struct has no value to read */
  float v;
  assert_int_not_equal(jx_read(jx_tree_at(shapes, jx_tree_size(shapes) - 1), &v, sizeof v), JX_OK);
  assert_non_null(strstr(jx_last_error(), "jx_shape_dtype_struct"));
  jx_clear_error();
  c.n_heads = 5; /* does not divide d 64 */
  assert_null(jx_gpt_init_shapes(&c, JX_F32));
  assert_non_null(strstr(jx_last_error(), "jx_gpt_init_shapes: bad config"));
  jx_clear_error();
  assert_null(jx_optim_init_shapes(opt, NULL));
  assert_non_null(strstr(jx_last_error(), "jx_optim_init_shapes: the parameter tree is NULL"));
  jx_clear_error();
  jx_tree_release(state_shapes);
  jx_tree_release(shapes);
  jx_tree_release(real_state);
  jx_tree_release(real);
  jx_optim_release(opt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(peak_is_parameters_and_one_draw, setup, teardown),
      cmocka_unit_test_setup_teardown(parameters_are_the_documented_draws, setup, teardown),
      cmocka_unit_test_setup_teardown(shapes_are_the_inits_without_memory, setup, teardown),
  };
  int r = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return r;
}
