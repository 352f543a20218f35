/* The automatic sharding planner's integer linear program on a 2-layer MLP's
 * loss over a 2x2 mesh ("data", "model"), with hand-set figures (10 us,
 * 1 GB/s, 1 GFLOP/s): with a loose limit the plan is faster than running
 * replicated and the sharded jit with its input layouts gives the plain
 * jit's loss (and the layer-chain DP, exact on two layers, finds a plan of
 * the same price); a limit below that plan's memory gives a plan that fits it,
 * no faster, with the same loss; on one device the plan's time is the cost
 * model's flops at the model's rate and its memory the most bytes held while
 * any equation runs (counted here from the definition), below the sum of
 * every array's; a limit no plan meets is an error naming the least memory
 * a plan needs and what it holds then (the equation and the largest arrays,
 * with their source locations). A training step's donated parameters and
 * optimizer state come back in the layouts they are taken in (without
 * donation the plan gives some back in others), two steps of the loop give
 * the plain jit's values, and the plan's peak and time are its partitioned
 * program's. */
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

#include "compile/cost.h"
#include "compile/simplify.h"
#include "parallel/auto/dp.h"
#include "parallel/auto/plan.h"
#include "parallel/sharded_jit.h"
#include "auto_mlp.h"
#include "test_util.h"
#include "trace/fn.h"

typedef struct {
  jx_mesh *mesh;
  jx_comm_model model;
  jx_fn *loss;
  jx_program *p;
  jx_array *args[NIN];
  double want; /* the plain jit's loss */
} fixture;

static int fixture_setup(void **state) {
  setup(state);
  setenv("JX_JIT_KERNELS", "0", 1); /* the partitioner is under test, not the C compiler */
  static fixture f;
  const char *names[] = {"data", "model"};
  f.mesh = jx_mesh_create((jx_shape){2, {2, 2}}, names);
  jx_comm_model_uniform(&f.model, f.mesh, 1e-5, 1e9, 1e9);
  f.loss = jx_fn_create("mlp_loss", NIN, 1, mlp_loss, NULL);
  jx_aval in[NIN];
  uint64_t rng = 21;
  for (int i = 0; i < NIN; i++) {
    in[i] = (jx_aval){.dtype = JX_F32, .shape = shapes[i]};
    int64_t n = jx_shape_numel(shapes[i]);
    float *v = malloc(sizeof *v * (size_t)n);
    for (int64_t k = 0; k < n; k++) v[k] = (float)test_rng_uniform(&rng);
    f.args[i] = jx_array_from(JX_F32, shapes[i], v);
    free(v);
  }
  jx_program *traced = jx_fn_program(f.loss, in);
  f.p = traced ? jx_simplify(traced) : NULL;
  jx_program_release(traced);
  jx_fn *plain = jx_jit(f.loss, NULL);
  jx_array *out;
  check_ok(jx_call(plain, f.args, &out));
  f.want = jx_item(out);
  jx_fn_release(plain);
  *state = &f;
  return f.mesh && f.p ? 0 : -1;
}

static int fixture_teardown(void **state) {
  fixture *f = *state;
  jx_program_release(f->p);
  jx_fn_release(f->loss);
  jx_mesh_release(f->mesh);
  unsetenv("JX_JIT_KERNELS");
  return teardown(state);
}

/* The sharded jit's loss with the plan's input layouts. */
static double planned_loss(fixture *f, const jx_auto_plan *plan) {
  jx_sharding *sh[NIN];
  for (int i = 0; i < NIN; i++) {
    sh[i] = jx_pspec_sharding(f->mesh, &plan->in_spec[i]);
    assert_non_null(sh[i]);
  }
  jx_fn *pj = jx_jit(f->loss, &(jx_jit_options){.in_shardings = sh});
  jx_array *out;
  check_ok(jx_call(pj, f->args, &out));
  double got = jx_item(out);
  jx_fn_release(pj);
  for (int i = 0; i < NIN; i++) jx_sharding_release(sh[i]);
  return got;
}

static double replicated_time(const fixture *f) {
  double t = 0;
  for (int k = 0; k < f->p->neqns; k++) t += jx_eqn_flops(f->p, &f->p->eqns[k]);
  return t / f->model.flops_per_s;
}

static void loose_and_tight_limits(void **state) {
  fixture *f = *state;
  jx_auto_plan loose, tight;
  check_ok(jx_auto_plan_solve(&f->model, f->mesh, f->p, 1e12, &loose));
  char buf[JX_SPEC_CAP];
  for (int i = 0; i < NIN; i++)
    print_message("loose: input %d %s\n", i, jx_pspec_str(f->mesh, &loose.in_spec[i], buf));
  print_message("loose: %.3g s, %.0f bytes (replicated %.3g s)\n", loose.time_s, loose.memory_bytes,
                replicated_time(f));
  assert_true(loose.time_s > 0 && loose.time_s < replicated_time(f));
  /* the work is split, so inputs arrive split (the sharded jit below runs
   * on split operands, not on a replicated plan) */
  int split = 0;
  for (int i = 0; i < NIN; i++) split += jx_pspec_sharded(&loose.in_spec[i]);
  assert_true(jx_pspec_sharded(&loose.in_spec[0]));
  assert_true(split >= 2);
  assert_float_equal(planned_loss(f, &loose), f->want, 1e-5 * fabs(f->want));

  double limit = 0.9 * loose.memory_bytes;
  check_ok(jx_auto_plan_solve(&f->model, f->mesh, f->p, limit, &tight));
  print_message("tight: %.3g s, %.0f bytes (limit %.0f)\n", tight.time_s, tight.memory_bytes,
                limit);
  assert_true(tight.memory_bytes <= limit);
  assert_true(tight.time_s >= loose.time_s * (1 - 1e-9)); /* the loose plan was the cheapest */
  /* solved within the time limit, within branch and cut's 1 % of the bound */
  assert_false(loose.stopped || tight.stopped);
  assert_true(loose.gap >= 0 && loose.gap <= 0.01 + 1e-9 && tight.gap >= 0 &&
              tight.gap <= 0.01 + 1e-9);
  assert_float_equal(tight.time_limit_s, 10, 0);
  assert_float_equal(planned_loss(f, &tight), f->want, 1e-5 * fabs(f->want));
  jx_auto_plan_free(&tight);
  jx_auto_plan_free(&loose);
}

/* JX_PLAN_TIME_LIMIT bounds the search: past it branch and cut ends at
 * the first plan it holds (under the tight limit, where the relaxation is
 * fractional, that is a stopped search, its plan within the limit and the
 * gap it reports); a limit that is no positive number is an error naming
 * the variable. */
static void the_planning_time_limit(void **state) {
  fixture *f = *state;
  jx_auto_plan loose, plan;
  check_ok(jx_auto_plan_solve(&f->model, f->mesh, f->p, 1e12, &loose));
  double limit = 0.9 * loose.memory_bytes;
  setenv("JX_PLAN_TIME_LIMIT", "1e-9", 1);
  check_ok(jx_auto_plan_solve(&f->model, f->mesh, f->p, limit, &plan));
  print_message("at the time limit: %.3g s, %.0f bytes, stopped %d, gap %.3g\n", plan.time_s,
                plan.memory_bytes, plan.stopped, plan.gap);
  assert_true(plan.memory_bytes <= limit);
  assert_true(plan.stopped);
  assert_true(plan.gap >= 0 && plan.gap < 1);
  assert_float_equal(plan.time_limit_s, 1e-9, 0);
  assert_float_equal(planned_loss(f, &plan), f->want, 1e-5 * fabs(f->want));
  jx_auto_plan_free(&plan);
  setenv("JX_PLAN_TIME_LIMIT", "soon", 1);
  assert_int_equal(jx_auto_plan_solve(&f->model, f->mesh, f->p, 1e12, &plan),
                   JX_ERR_INVALID_ARGUMENT);
  assert_error_has("JX_PLAN_TIME_LIMIT is 'soon'; it must be a positive number of seconds");
  jx_clear_error();
  unsetenv("JX_PLAN_TIME_LIMIT");
  jx_auto_plan_free(&loose);
}

/* On one device nothing is split and nothing communicated: the plan's time
 * is the cost model's flops at the model's rate. */
static void one_device_runs_everything(void **state) {
  fixture *f = *state;
  const char *names[] = {"x"};
  jx_mesh *one = jx_mesh_create((jx_shape){1, {1}}, names);
  jx_comm_model cm;
  jx_comm_model_uniform(&cm, one, 1e-5, 1e9, 1e9);
  jx_auto_plan plan;
  check_ok(jx_auto_plan_solve(&cm, one, f->p, 1e12, &plan));
  for (int i = 0; i < NIN; i++) assert_false(jx_pspec_sharded(&plan.in_spec[i]));
  assert_float_equal(plan.time_s, replicated_time(f), 1e-9 * replicated_time(f));
  /* held while equation t runs: the inputs, and every result made by t and
   * read at t or later (or an output) */
  const jx_program *p = f->p;
  double peak = 0, all = 0;
  for (int v = 0; v < p->nvars; v++) all += jx_aval_bytes(p->avals[v]);
  for (int t = 0; t < p->neqns; t++) {
    double held = 0;
    for (int i = 0; i < p->nin; i++) held += jx_aval_bytes(p->avals[p->in[i]]);
    for (int e = 0; e <= t; e++)
      for (int o = 0; o < p->eqns[e].nout; o++) {
        int v = p->eqns[e].out[o], live = e == t;
        for (int r = t; r < p->neqns && !live; r++)
          for (int i = 0; i < p->eqns[r].nin; i++) live |= p->eqns[r].in[i] == v;
        for (int k = 0; k < p->nout; k++) live |= p->out[k] == v;
        if (live) held += jx_aval_bytes(p->avals[v]);
      }
    if (held > peak) peak = held;
  }
  print_message("peak %.0f bytes of %.0f in all\n", plan.memory_bytes, all);
  assert_float_equal(plan.memory_bytes, peak, 0.5);
  assert_true(plan.memory_bytes < all);
  jx_auto_plan_free(&plan);
  jx_mesh_release(one);
}

static void a_limit_no_plan_meets(void **state) {
  fixture *f = *state;
  jx_auto_plan plan;
  assert_int_equal(jx_auto_plan_solve(&f->model, f->mesh, f->p, 64, &plan),
                   JX_ERR_INVALID_ARGUMENT);
  assert_null(plan.in_spec);
  char err[2048];
  snprintf(err, sizeof err, "%s", jx_last_error());
  print_message("%s\n", err);
  assert_non_null(strstr(jx_last_error(), "bytes, while equation"));
  assert_non_null(strstr(jx_last_error(), "holding most"));
  double smallest = strtod(strstr(jx_last_error(), "peak found is") + 14, NULL);
  assert_error_has("fits 64 bytes per device; the smallest peak found is");
  /* what holds it: the equation of the peak with its source location, and
   * the largest arrays, largest first, each an input by index or made by
   * an equation named with its location (every equation here has one) */
  int at = atoi(strstr(err, "while equation ") + 15);
  assert_true(at >= 0 && at < f->p->neqns);
  const jx_eqn *e = &f->p->eqns[at];
  char want[512];
  assert_non_null(e->loc);
  snprintf(want, sizeof want, "(%s at %s) runs", e->prim->name, e->loc);
  assert_non_null(strstr(err, want));
  const char *entry = strstr(err, "holding most ") + 13;
  double prev = INFINITY;
  int listed = 0;
  for (const char *end; (end = strstr(entry, " bytes)")); entry = end + 7, listed++) {
    if (!strncmp(entry, ", ", 2)) entry += 2;
    char what[64];
    assert_int_equal(sscanf(entry, "%63s", what), 1);
    const char *open = end;
    while (open > entry && *open != '(') open--;
    double bytes = strtod(open + 1, NULL);
    assert_true(bytes > 0 && bytes <= prev);
    prev = bytes;
    int located = 0;
    if (!strcmp(what, "input")) located = atoi(entry + 6) >= 0 && atoi(entry + 6) < f->p->nin;
    for (int k = 0; k < f->p->neqns && !located; k++)
      if (!strcmp(f->p->eqns[k].prim->name, what) && f->p->eqns[k].loc) {
        snprintf(want, sizeof want, " at %s (", f->p->eqns[k].loc);
        located = strstr(entry, want) && strstr(entry, want) < end;
      }
    assert_true(located);
  }
  assert_int_equal(listed, 3);
  /* the smallest over plans, as the partitioned program holds them (the
   * search minimises the memory rows' count within the solver's 1 % gap,
   * and a limit's search partitions a few plans the rows admit): a plan
   * fits 1 % more, none fits 1.1 % less */
  check_ok(jx_auto_plan_solve(&f->model, f->mesh, f->p, smallest * 1.01, &plan));
  assert_true(plan.memory_bytes <= smallest * 1.01);
  jx_auto_plan_free(&plan);
  assert_int_equal(jx_auto_plan_solve(&f->model, f->mesh, f->p, smallest / 1.011, &plan),
                   JX_ERR_INVALID_ARGUMENT);
  assert_error_has("fits"); /* and cleared: the tests after it share the thread */
}

/* (x, w1, w2) -> (sum(tanh(x w1) w2), w1 * s, w2 * s) with s = 1 / (1 + that
 * sum squared), a scalar: an update of each weight scaled by a factor
 * every element shares, as gradient clipping scales Adam's. */
enum { ROWS = 8, D = 64, H = 256, WAYS = 4 };
static void scaled_update(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *y = jx_sum(jx_matmul(jx_tanh(jx_matmul(in[0], in[1])), in[2]), JX_AXES(), 0);
  jx_array *s = jx_div(jx_scalar(JX_F32, 1), jx_add(jx_scalar(JX_F32, 1), jx_square(y)));
  out[0] = y;
  out[1] = jx_mul(in[1], s);
  out[2] = jx_mul(in[2], s);
}

/* On 4 devices over "model", Megatron's layouts (w1 by columns, w2 by
 * rows, x whole) hold at their peak, by hand count in f32 bytes, x, the
 * weights' quarters, the updates' quarters (outputs, held to the end) and
 * the scalar y. The plan under that limit is found (its updates split like
 * their weights, not held whole after the scalar's broadcast) and is no
 * slower than Megatron's layouts fixed. */
static void at_least_megatron_where_it_fits(void **state) {
  (void)state;
  const char *names[] = {"model"};
  jx_mesh *m = jx_mesh_create((jx_shape){1, {WAYS}}, names);
  jx_comm_model cm;
  jx_comm_model_uniform(&cm, m, 1e-5, 1e9, 1e9);
  jx_fn *f = jx_fn_create("scaled_update", 3, 3, scaled_update, NULL);
  jx_aval in[3] = {{.dtype = JX_F32, .shape = {2, {ROWS, D}}},
                   {.dtype = JX_F32, .shape = {2, {D, H}}},
                   {.dtype = JX_F32, .shape = {2, {H, D}}}};
  jx_program *traced = jx_fn_program(f, in), *p = traced ? jx_simplify(traced) : NULL;
  assert_non_null(p);
  jx_pspec mega[3] = {jx_pspec_replicated(2), jx_pspec_replicated(2), jx_pspec_replicated(2)};
  mega[1].n[1] = mega[2].n[0] = 1; /* w1's columns, w2's rows over axis 0 */
  mega[1].ax[1][0] = mega[2].ax[0][0] = 0;
  const jx_pspec *fixed[3] = {&mega[0], &mega[1], &mega[2]};
  jx_auto_plan hand, plan;
  check_ok(jx_auto_plan_solve_fixed(&cm, m, p, fixed, 1e12, &hand));
  const double by_hand = 4.0 * ROWS * D + 4 * (4.0 * D * H / WAYS) + 4;
  print_message("Megatron's layouts: %.4g s, %.0f bytes (by hand %.0f)\n", hand.time_s,
                hand.memory_bytes, by_hand);
  assert_float_equal(hand.memory_bytes, by_hand, 0.5);
  /* the limit: what the partitioned program of Megatron's layouts holds,
   * which also makes the scaling factor's broadcast, a block of an update */
  jx_auto_plan_free(&hand);
  check_ok(jx_auto_plan_solve_fixed(&cm, m, p, fixed, 1.25 * by_hand, &hand));
  const double limit = hand.memory_bytes;
  print_message("as partitioned: %.0f bytes\n", limit);
  assert_true(limit >= by_hand && limit <= by_hand + 4 * D * H / WAYS + 16);
  check_ok(jx_auto_plan_solve(&cm, m, p, limit, &plan));
  print_message("plan: %.4g s, %.0f bytes\n", plan.time_s, plan.memory_bytes);
  assert_true(plan.memory_bytes <= limit);
  assert_true(plan.time_s <= hand.time_s * (1 + 1e-9));
  for (int o = 1; o < 3; o++) assert_true(jx_pspec_sharded(&plan.spec[p->out[o]]));
  jx_auto_plan_free(&plan);
  jx_auto_plan_free(&hand);
  jx_program_release(p);
  jx_program_release(traced);
  jx_fn_release(f);
  jx_mesh_release(m);
}

/* The layer-chain dynamic program (dp.h) on the MLP's two weights, the batch
 * split over "data": each weight replicated, split by rows or by columns
 * over "model". With two layers its time model is exact, so its plan is the
 * best of the 9 assignments priced one by one; and the ILP, choosing every
 * layout with these inputs fixed, finds a plan priced the same. */
static void dp_is_exact_on_two_layers(void **state) {
  fixture *f = *state;
  jx_sharding *rows = jx_sharding_create(f->mesh, "data");
  jx_pspec batch = jx_pspec_of(rows, 2);
  jx_sharding_release(rows);
  jx_pspec w[2][3];
  const char *text[3] = {"", "model", "None,model"};
  for (int l = 0; l < 2; l++)
    for (int c = 0; c < 3; c++) {
      jx_sharding *s = jx_sharding_create(f->mesh, text[c]);
      w[l][c] = jx_pspec_of(s, 2);
      jx_sharding_release(s);
    }
  const jx_pspec *layout[NIN] = {&batch, w[0], w[1], &batch};
  int layer[NIN] = {-1, 0, 1, -1}, nchoices[2] = {3, 3}, out_like[1] = {-1};
  jx_dp_problem dp = {2, layer, nchoices, layout, out_like};
  jx_dp_plan d;
  check_ok(jx_auto_dp_solve(&f->model, f->mesh, f->p, &dp, 1e12, &d));
  assert_int_equal(d.evaluations, 1 + 2 * 2 + 2 * 2 + 1);
  assert_true(fabs(d.model_time_s - d.time_s) <= 1e-9 * d.time_s);
  double best = INFINITY;
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++) {
      jx_pspec in[NIN] = {batch, w[0][a], w[1][b], batch};
      double t, peak;
      check_ok(jx_auto_layouts_estimate(&f->model, f->mesh, f->p, in, NULL, NULL, &t, &peak));
      best = fmin(best, t);
    }
  assert_true(fabs(d.time_s - best) <= 1e-9 * best);
  const jx_pspec *fixed[NIN] = {&batch, NULL, NULL, &batch};
  jx_auto_plan ilp;
  check_ok(jx_auto_plan_solve_fixed(&f->model, f->mesh, f->p, fixed, 1e12, &ilp));
  double t, peak;
  check_ok(
      jx_auto_layouts_estimate(&f->model, f->mesh, f->p, ilp.in_spec, NULL, ilp.spec, &t, &peak));
  /* Megatron, w1 by columns and w2 by rows; the ILP may keep an input
   * replicated that its reader slices for free, at the same price */
  assert_int_equal(d.choice[0], 2);
  assert_int_equal(d.choice[1], 1);
  assert_true(fabs(t - d.time_s) <= 1e-3 * d.time_s);
  jx_auto_plan_free(&ilp);
}

/* (w1, w2, x, y) -> the MLP's loss: its parameters first, as jx_train_step
 * takes them */
static void mlp_loss_params_first(void *c, jx_array *const *in, jx_array **out) {
  jx_array *args[NIN] = {in[2], in[0], in[1], in[3]};
  mlp_loss(c, args, out);
}

/* The MLP's SGD-with-momentum step, (w1, w2, count, m1, m2, x, y) ->
 * (loss, w1', w2', count', m1', m2'): STATE parameters and optimizer state,
 * then the batch. */
enum { STATE = 5, STEP_IN = STATE + 2, STEP_OUT = STATE + 1 };

/* The step jitted with every layout JX_AUTO but the loss's, the parameters
 * and state donated when `donate`; in[] gets its first arguments. */
static jx_fn *auto_train_step(fixture *f, jx_fn *step, const jx_tree *opt_state, int donate,
                              jx_array **in) {
  jx_sharding *in_sh[STEP_IN], *out_sh[STEP_OUT];
  int donated[STEP_IN] = {0};
  for (int i = 0; i < STEP_IN; i++) in_sh[i] = JX_AUTO, donated[i] = donate && i < STATE;
  out_sh[0] = jx_sharding_create(f->mesh, "");
  for (int o = 1; o < STEP_OUT; o++) out_sh[o] = JX_AUTO;
  jx_fn *j = jx_jit(step, &(jx_jit_options){.in_shardings = in_sh,
                                            .out_shardings = out_sh,
                                            .donate = donated,
                                            .mesh = f->mesh});
  jx_sharding_release(out_sh[0]);
  in[0] = f->args[1], in[1] = f->args[2]; /* w1, w2 */
  jx_tree_flatten(opt_state, in + 2);
  in[STATE] = f->args[0], in[STATE + 1] = f->args[3]; /* x, y */
  return j;
}

/* Whether every updated parameter and state (output 1 + i) comes back in
 * the layout input i is taken in; out[] are one call's results. */
static int given_back_as_taken(jx_fn *j, jx_array *const *in, jx_array *const *out) {
  jx_aval av[STEP_IN];
  for (int i = 0; i < STEP_IN; i++)
    av[i] = (jx_aval){.dtype = jx_dtype_of(in[i]), .shape = jx_shape_of(in[i])};
  int same = 1;
  for (int i = 0; i < STATE; i++) {
    jx_sharding *taken = jx_sharded_jit_in_layout(j, av, i);
    assert_non_null(taken);
    int rank = av[i].shape.rank;
    jx_pspec a = jx_pspec_of(taken, rank), b = jx_pspec_of(jx_sharding_of(out[1 + i]), rank);
    same &= jx_pspec_equal(&a, &b);
    jx_sharding_release(taken);
  }
  return same;
}

/* A training step's donated parameters and moments come back in the
 * layouts they are taken in, so that a training loop feeds them to the next
 * step as they come: without donation the plan gives some back in other
 * layouts (the case is one where it does), with it none, at the figures
 * of slow devices on fast links (the plan splits the work). Two steps of
 * the loop give the plain jit's losses and parameters; the plan's peak
 * (jx_auto_plan's peak_bytes, what JX_LOG_COMPILES prints) is the
 * partitioned program's as jx_sharding_estimate_of costs it, and under a
 * limit the rows count the plan over but it fits, the plan is the same. */
static void donated_state_comes_back_as_taken(void **state) {
  fixture *f = *state;
  double alpha[2] = {1e-7, 1e-7}, bw[2] = {1e11, 1e11};
  check_ok(jx_sharding_plan_figures(f->mesh, alpha, bw, 1e8));
  jx_tree *params = jx_tree_create();
  jx_tree_set(params, "w1", f->args[1]);
  jx_tree_set(params, "w2", f->args[2]);
  jx_optimizer *opt = jx_optim_sgd(0.1, 0.9);
  jx_tree *moments = jx_optim_init(opt, params);
  assert_int_equal(jx_tree_size(moments), STATE - 2);
  jx_fn *loss = jx_fn_create("mlp_loss_params_first", NIN, 1, mlp_loss_params_first, NULL);
  jx_fn *step = jx_train_step(loss, params, moments, opt);
  jx_array *in[STEP_IN], *out[STEP_OUT], *want[STEP_OUT], *plain_in[STEP_IN];
  jx_fn *free_out = auto_train_step(f, step, moments, 0, in);
  check_ok(jx_call(free_out, in, out));
  assert_false(given_back_as_taken(free_out, in, out));
  jx_fn_release(free_out);
  jx_fn *j = auto_train_step(f, step, moments, 1, in), *plain = jx_jit(step, NULL);
  for (int i = 0; i < STEP_IN; i++) plain_in[i] = in[i];
  for (int t = 0; t < 2; t++) { /* the loop: each step's outputs are the next one's inputs */
    check_ok(jx_call(j, in, out));
    check_ok(jx_call(plain, plain_in, want));
    assert_true(given_back_as_taken(j, in, out));
    assert_float_equal(jx_item(out[0]), jx_item(want[0]), 1e-5 * fabs(jx_item(want[0])));
    for (int o = 1; o < STEP_OUT; o++) {
      jx_array *d = jx_max(jx_abs(jx_sub(out[o], want[o])), JX_AXES(), 0);
      assert_true(jx_item(d) <= 1e-5);
      in[o - 1] = out[o], plain_in[o - 1] = want[o];
    }
  }
  /* the plan's peak against the partitioned program's */
  jx_aval av[STEP_IN];
  for (int i = 0; i < STEP_IN; i++)
    av[i] = (jx_aval){.dtype = jx_dtype_of(in[i]), .shape = jx_shape_of(in[i])};
  jx_program *traced = jx_fn_program(step, av), *p = traced ? jx_simplify(traced) : NULL;
  assert_non_null(p);
  jx_comm_model cm;
  jx_comm_model_uniform(&cm, f->mesh, 0, 1, 1e8);
  for (int a = 0; a < 2; a++) cm.link[a] = jx_link_uniform(alpha[a], 1 / bw[a]);
  int alias[STEP_OUT] = {-1, 0, 1, 2, 3, 4};
  jx_auto_plan plan;
  check_ok(jx_auto_plan_solve_aliased(&cm, f->mesh, p, NULL, alias, 1e12, &plan));
  jx_sharding_estimate est;
  check_ok(jx_sharding_estimate_of(j, in, &est));
  print_message("the plan's peak %.0f bytes, the partitioned program's %.0f (the rows' %.0f)\n",
                plan.peak_bytes, est.peak_bytes, plan.memory_bytes);
  print_message("time %.4g s, the partitioned program's estimate %.4g s\n", plan.time_s,
                est.step_s);
  assert_float_equal(plan.time_s, est.step_s, 0.01 * plan.time_s);
  assert_float_equal(plan.peak_bytes, est.peak_bytes, 0.5);
  /* under a limit between the partitioned program's peak and the rows'
   * count of the same plan, that plan is the one: it fits as it runs */
  assert_true(plan.memory_bytes > plan.peak_bytes + 1000);
  double between = (plan.memory_bytes + plan.peak_bytes) / 2;
  jx_auto_plan fits;
  check_ok(jx_auto_plan_solve_aliased(&cm, f->mesh, p, NULL, alias, between, &fits));
  print_message("under %.0f bytes: %.4g s, peak %.0f\n", between, fits.time_s, fits.peak_bytes);
  assert_float_equal(fits.time_s, plan.time_s, 1e-12 * plan.time_s);
  assert_float_equal(fits.peak_bytes, plan.peak_bytes, 0.5);
  assert_true(fits.memory_bytes <= between);
  jx_auto_plan_free(&fits);
  jx_auto_plan_free(&plan);
  jx_program_release(p);
  jx_program_release(traced);
  jx_fn_release(plain);
  jx_fn_release(j);
  jx_fn_release(step);
  jx_fn_release(loss);
  jx_tree_release(moments);
  jx_tree_release(params);
  jx_optim_release(opt);
}

int main(void) {
  jx_set_cpu_device_count(4);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(loose_and_tight_limits),
      cmocka_unit_test(the_planning_time_limit),
      cmocka_unit_test(one_device_runs_everything),
      cmocka_unit_test(a_limit_no_plan_meets),
      cmocka_unit_test(at_least_megatron_where_it_fits),
      cmocka_unit_test(dp_is_exact_on_two_layers),
      cmocka_unit_test(donated_state_comes_back_as_taken),
  };
  return cmocka_run_group_tests(tests, fixture_setup, fixture_teardown);
}
