/* The planner under a falling memory limit, on a 4-layer tanh MLP's
 * gradient (64x64 weights, a batch of 16) over 4 devices in 1-D ("data"),
 * with hand-set figures (100 us per message, 1 GB/s, 1 GFLOP/s: messages
 * are dear): with room the plan is data parallel (no weight split); as the
 * limit falls by steps of 20 % from the peak of data parallel's layouts,
 * weights are split one after another until all are, each point's peak
 * fits its limit and its estimated time never falls; below the smallest
 * peak a plan can have the error names that peak, and that peak is itself
 * a limit a plan meets. Every plan's layouts give the plain jit's
 * gradients. */
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

#include "compile/simplify.h"
#include "parallel/auto/plan.h"
#include "test_util.h"
#include "trace/fn.h"

enum { LAYERS = 4, NIN = LAYERS + 2, WIDTH = 64, BATCH = 16, POINTS = 8 };

static void deep_loss(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *h = in[LAYERS];
  for (int l = 0; l < LAYERS; l++) h = jx_tanh(jx_matmul(h, in[l]));
  out[0] = jx_mean(jx_square(jx_sub(h, in[LAYERS + 1])), JX_AXES(), 0);
}

static void sweep(void **state) {
  (void)state;
  setenv("JX_JIT_KERNELS", "0", 1);
  const char *names[] = {"data"};
  jx_mesh *m = jx_mesh_create((jx_shape){1, {4}}, names);
  jx_comm_model cm;
  jx_comm_model_uniform(&cm, m, 1e-4, 1e9, 1e9);
  jx_fn *loss = jx_fn_create("deep_loss", NIN, 1, deep_loss, NULL);
  jx_fn *grad = jx_grad(loss, JX_AXES(0, 1, 2, 3));
  jx_aval in[NIN];
  jx_array *args[NIN];
  uint64_t rng = 9;
  for (int i = 0; i < NIN; i++) {
    jx_shape g = i < LAYERS ? JX_SHAPE(WIDTH, WIDTH) : JX_SHAPE(BATCH, WIDTH);
    in[i] = (jx_aval){.dtype = JX_F32, .shape = g};
    static float v[WIDTH * WIDTH];
    for (int64_t k = 0; k < jx_shape_numel(g); k++)
      v[k] = (float)test_rng_uniform(&rng) * (i < LAYERS ? 0.2f : 1.0f);
    args[i] = jx_array_from(JX_F32, g, v);
  }
  jx_program *traced = jx_fn_program(grad, in), *p = jx_simplify(traced);
  jx_program_release(traced);
  jx_fn *plain = jx_jit(grad, NULL);
  jx_array *want[LAYERS];
  check_ok(jx_call(plain, args, want));

  /* data parallel's peak: the weights replicated, the batch split */
  jx_pspec dp[NIN];
  const jx_pspec *fixed[NIN];
  for (int i = 0; i < NIN; i++) {
    dp[i] = jx_pspec_replicated(2);
    if (i >= LAYERS) dp[i].ax[0][dp[i].n[0]++] = 0;
    fixed[i] = &dp[i];
  }
  jx_auto_plan plan;
  check_ok(jx_auto_plan_solve_fixed(&cm, m, p, fixed, 1e12, &plan));
  double dp_peak = plan.memory_bytes, last_time = 0;
  jx_auto_plan_free(&plan);
  print_message("data parallel: peak %.0f bytes\n", dp_peak);
  print_message("%8s %10s %12s %s\n", "limit", "time", "peak", "weights split");
  int split_at_start = -1, split_at_end = -1;
  double fraction = 1;
  for (int k = 0; k < POINTS; k++, fraction *= 0.8) {
    double limit = fraction * dp_peak;
    jx_status st = jx_auto_plan_solve(&cm, m, p, limit, &plan);
    if (st) {
      /* below the smallest peak: the error names it, and 1 % more (the
       * searches' gap: they minimise the memory rows' count, and the plan is
       * held to the partitioned program's) is a limit a
       * plan meets */
      const char *err = strstr(jx_last_error(), "the smallest peak found is ");
      assert_non_null(err);
      double smallest = strtod(err + strlen("the smallest peak found is "), NULL);
      print_message("%7.0f%% no plan: the smallest peak is %.0f bytes\n", 100 * fraction, smallest);
      jx_clear_error();
      assert_true(smallest > limit && smallest <= limit / 0.8);
      check_ok(jx_auto_plan_solve(&cm, m, p, smallest * 1.01, &plan));
      assert_true(plan.memory_bytes <= smallest * 1.01);
      jx_auto_plan_free(&plan);
      break;
    }
    int split = 0;
    for (int l = 0; l < LAYERS; l++) split += jx_pspec_sharded(&plan.in_spec[l]);
    print_message("%7.0f%% %10.3g %12.0f %d\n", 100 * fraction, plan.time_s, plan.memory_bytes,
                  split);
    assert_true(plan.memory_bytes <= limit);
    assert_true(plan.time_s >= last_time * (1 - 1e-9));
    last_time = plan.time_s;
    if (k == 0) split_at_start = split;
    split_at_end = split;
    /* its layouts give the plain jit's gradients */
    jx_sharding *sh[NIN];
    for (int i = 0; i < NIN; i++) assert_non_null(sh[i] = jx_pspec_sharding(m, &plan.in_spec[i]));
    jx_fn *planned = jx_jit(grad, &(jx_jit_options){.in_shardings = sh});
    jx_array *got[LAYERS];
    check_ok(jx_call(planned, args, got));
    for (int l = 0; l < LAYERS; l++) {
      static float w[WIDTH * WIDTH], g[WIDTH * WIDTH];
      check_ok(jx_read(want[l], w, sizeof w));
      check_ok(jx_read(got[l], g, sizeof g));
      for (int e = 0; e < WIDTH * WIDTH; e++)
        assert_float_equal(g[e], w[e], 1e-6 + 1e-5 * fabsf(w[e]));
    }
    jx_fn_release(planned);
    for (int i = 0; i < NIN; i++) jx_sharding_release(sh[i]);
    jx_auto_plan_free(&plan);
  }
  assert_int_equal(split_at_start, 0); /* data parallel */
  assert_true(split_at_end == LAYERS); /* every weight split */
  jx_fn_release(plain);
  jx_fn_release(grad);
  jx_fn_release(loss);
  jx_program_release(p);
  jx_mesh_release(m);
  unsetenv("JX_JIT_KERNELS");
}

int main(void) {
  jx_set_cpu_device_count(4);
  const struct CMUnitTest tests[] = {cmocka_unit_test_setup_teardown(sweep, setup, teardown)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
