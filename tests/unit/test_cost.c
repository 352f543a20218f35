/* jx_fn_cost of checkpointed programs counts the recomputed work: a
 * value_and_grad through jx_checkpoint costs the plain one plus the
 * region's forward flops (recomputed in the backward pass), and with
 * JX_SAVE_DOTS plus only the region's non-dot flops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"

enum { B = 8, D_IN = 16, H = 32, D_OUT = 4 };

/* tanh(tanh(x @ w1) @ w2) */
static void mlp(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_tanh(jx_matmul(jx_tanh(jx_matmul(in[0], in[1])), in[2]));
}

static void loss(void *ctx, jx_array *const *in, jx_array **out) {
  jx_array *r[1];
  jx_call((jx_fn *)ctx, in, r);
  out[0] = jx_sum(r[0], JX_AXES(), 0);
}

static double step_flops(jx_fn *region, jx_array *const *in) {
  jx_fn *l = jx_fn_create("loss", 3, 1, loss, region);
  jx_fn *vg = jx_value_and_grad(l, JX_AXES(0, 1, 2), 0);
  jx_cost c;
  check_ok(jx_fn_cost(vg, in, &c));
  jx_fn_release(vg);
  jx_fn_release(l);
  return c.flops;
}

static void checkpoint_counts_recomputation(void **state) {
  (void)state;
  jx_array *in[3] = {jx_ones(JX_F32, JX_SHAPE(B, D_IN)), jx_ones(JX_F32, JX_SHAPE(D_IN, H)),
                     jx_ones(JX_F32, JX_SHAPE(H, D_OUT))};
  jx_fn *m = jx_fn_create("mlp", 3, 1, mlp, NULL);
  jx_fn *ck = jx_checkpoint(m), *ck_dots = jx_checkpoint_with_policy(m, JX_SAVE_DOTS);
  jx_cost fwd;
  check_ok(jx_fn_cost(m, in, &fwd));
  double dots = 2.0 * B * D_IN * H + 2.0 * B * H * D_OUT;
  assert_float_equal(fwd.flops, dots + B * H + B * D_OUT, 0); /* two dots, two tanh */
  double plain = step_flops(m, in);
  assert_float_equal(step_flops(ck, in), plain + fwd.flops, 0);
  assert_float_equal(step_flops(ck_dots, in), plain + fwd.flops - dots, 0);
  jx_fn_release(ck_dots);
  jx_fn_release(ck);
  jx_fn_release(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(checkpoint_counts_recomputation, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
