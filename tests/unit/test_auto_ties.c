/* The planner's ties (parallel/auto/ties.h) on an 8-layer tanh MLP's
 * gradient, every layer 16x16: the middle layers' equations and weights
 * tie with the layer before them (each tie the same primitive on the same
 * types), the first and last layers, next to the input and the loss, stay
 * on their own; and the plan with ties costs what the untied plan costs
 * over a 2x2 mesh (within the solver's 1 % gap), its layouts giving the
 * plain jit's gradient. */
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
#include "parallel/auto/ties.h"
#include "test_util.h"
#include "trace/fn.h"

enum { LAYERS = 8, NIN = LAYERS + 2, WIDTH = 16, BATCH = 8 };

/* (w0..w5, x, y) -> mean((tanh(...tanh(x w0)... w5) - y)^2) */
static void deep_loss(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *h = in[LAYERS];
  for (int l = 0; l < LAYERS; l++) h = jx_tanh(jx_matmul(h, in[l]));
  out[0] = jx_mean(jx_square(jx_sub(h, in[LAYERS + 1])), JX_AXES(), 0);
}

typedef struct {
  jx_fn *grad;
  jx_program *p;
  jx_array *args[NIN];
} fixture;

static int fixture_setup(void **state) {
  setup(state);
  setenv("JX_JIT_KERNELS", "0", 1); /* the partitioner is under test, not the C compiler */
  static fixture f;
  jx_fn *loss = jx_fn_create("deep_loss", NIN, 1, deep_loss, NULL);
  f.grad = jx_grad(loss, JX_AXES(0, 1, 2, 3, 4, 5, 6, 7));
  jx_fn_release(loss);
  jx_aval in[NIN];
  uint64_t rng = 5;
  for (int i = 0; i < NIN; i++) {
    jx_shape g = i < LAYERS ? JX_SHAPE(WIDTH, WIDTH) : JX_SHAPE(BATCH, WIDTH);
    in[i] = (jx_aval){.dtype = JX_F32, .shape = g};
    float v[WIDTH * WIDTH];
    for (int64_t k = 0; k < jx_shape_numel(g); k++)
      v[k] = (float)(test_rng_uniform(&rng) - 0.5) * (i < LAYERS ? 0.5f : 2.0f);
    f.args[i] = jx_array_from(JX_F32, g, v);
  }
  jx_program *traced = jx_fn_program(f.grad, in);
  f.p = traced ? jx_simplify(traced) : NULL;
  jx_program_release(traced);
  *state = &f;
  return f.p ? 0 : -1;
}

static int fixture_teardown(void **state) {
  fixture *f = *state;
  jx_program_release(f->p);
  jx_fn_release(f->grad);
  unsetenv("JX_JIT_KERNELS");
  return teardown(state);
}

static void middle_layers_tie(void **state) {
  fixture *f = *state;
  const jx_program *p = f->p;
  int *eqn_rep = calloc((size_t)p->neqns, sizeof *eqn_rep), in_rep[NIN];
  check_ok(jx_auto_ties(p, NULL, eqn_rep, in_rep));
  int tied = 0, dots = 0, dots_tied = 0;
  for (int e = 0; e < p->neqns; e++) {
    const jx_eqn *a = &p->eqns[e], *b = &p->eqns[eqn_rep[e]];
    assert_true(eqn_rep[e] <= e);
    assert_int_equal(eqn_rep[eqn_rep[e]], eqn_rep[e]); /* a representative is its own */
    assert_ptr_equal(a->prim, b->prim);
    for (int i = 0; i < a->nin; i++)
      assert_true(jx_shape_equal(p->avals[a->in[i]].shape, p->avals[b->in[i]].shape));
    tied += eqn_rep[e] != e;
    if (!strcmp(a->prim->name, "dot_general")) {
      dots++;
      dots_tied += eqn_rep[e] != e;
    }
  }
  /* the forward products, the weights' gradients and the cotangents (none for x):
   * those of layers 2..3 and their gradients tie at least */
  assert_int_equal(dots, 3 * LAYERS - 1);
  assert_true(dots_tied >= 4);
  assert_true(tied >= p->neqns / 6);
  /* the weights: the middle ones tie with one before them; the first
   * (read by x's product) and the last (next to the loss) do not */
  assert_int_equal(in_rep[0], 0);
  assert_int_equal(in_rep[LAYERS - 1], LAYERS - 1);
  for (int l = 3; l <= LAYERS - 3; l++) assert_true(in_rep[l] < l && in_rep[l] >= 1);
  assert_int_equal(in_rep[LAYERS], LAYERS); /* x and y: their own */
  assert_int_equal(in_rep[LAYERS + 1], LAYERS + 1);
  free(eqn_rep);
}

static void ties_cost_nothing_here(void **state) {
  fixture *f = *state;
  const char *names[] = {"data", "model"};
  jx_mesh *m = jx_mesh_create((jx_shape){2, {2, 2}}, names);
  jx_comm_model cm;
  jx_comm_model_uniform(&cm, m, 1e-5, 1e9, 1e9);
  jx_auto_plan tied, untied;
  check_ok(jx_auto_plan_solve(&cm, m, f->p, 1e12, &tied));
  check_ok(jx_auto_plan_solve_untied(&cm, m, f->p, 1e12, &untied));
  assert_true(tied.time_s > 0);
  assert_true(fabs(tied.time_s - untied.time_s) <= 0.01 * untied.time_s);
  /* tied inputs are laid out alike */
  int in_rep[NIN], *eqn_rep = calloc((size_t)f->p->neqns, sizeof *eqn_rep);
  check_ok(jx_auto_ties(f->p, NULL, eqn_rep, in_rep));
  for (int i = 0; i < NIN; i++)
    assert_true(jx_pspec_equal(&tied.in_spec[i], &tied.in_spec[in_rep[i]]));
  free(eqn_rep);
  /* the tied plan's layouts give the plain jit's gradients */
  jx_sharding *sh[NIN];
  for (int i = 0; i < NIN; i++) assert_non_null(sh[i] = jx_pspec_sharding(m, &tied.in_spec[i]));
  jx_fn *plain = jx_jit(f->grad, NULL),
        *planned = jx_jit(f->grad, &(jx_jit_options){.in_shardings = sh});
  jx_array *want[LAYERS], *got[LAYERS];
  check_ok(jx_call(plain, f->args, want));
  check_ok(jx_call(planned, f->args, got));
  for (int l = 0; l < LAYERS; l++) {
    float w[WIDTH * WIDTH], g[WIDTH * WIDTH];
    check_ok(jx_read(want[l], w, sizeof w));
    check_ok(jx_read(got[l], g, sizeof g));
    for (int k = 0; k < WIDTH * WIDTH; k++)
      assert_float_equal(g[k], w[k], 1e-6 + 1e-5 * fabsf(w[k]));
  }
  jx_fn_release(plain);
  jx_fn_release(planned);
  for (int i = 0; i < NIN; i++) jx_sharding_release(sh[i]);
  jx_auto_plan_free(&tied);
  jx_auto_plan_free(&untied);
  jx_mesh_release(m);
}

int main(void) {
  jx_set_cpu_device_count(4);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(middle_layers_tie),
      cmocka_unit_test(ties_cost_nothing_here),
  };
  return cmocka_run_group_tests(tests, fixture_setup, fixture_teardown);
}
