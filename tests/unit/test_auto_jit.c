/* JX_AUTO in jx_jit_options: the 2-layer tanh MLP's loss and its gradient,
 * jitted with every input and output JX_AUTO on a 2x2 mesh of 4 CPU devices,
 * give the plain jit's values, and the layouts the jit gives its inputs and
 * outputs are the planner's own for the traced program at the mesh's
 * measured figures, under the device's memory or a limit; the relu MLP
 * with a JX_AUTO constraint on its hidden layer gets that layer split (relu,
 * a custom_jvp call, planned through its body) and the plain values, under
 * jit, grad and eagerly; a program planned again under the same limit is
 * not solved again; the estimate and report of a jit with shardings match
 * jx_fn_cost and the figures set for the mesh, and its peak jx's measured
 * peak; a memory limit no plan meets is the planner's error
 * at the caller's line; JX_AUTO outside jx_jit's options and constraints is
 * an error. */
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

#include "compile/lower.h"
#include "compile/simplify.h"
#include "parallel/auto/machine_model.h"
#include "parallel/auto/plan.h"
#include "parallel/auto/plan_cache.h"
#include "parallel/sharded_jit.h"
#include "auto_mlp.h"
#include "test_util.h"
#include "trace/fn.h"

typedef struct {
  jx_mesh *mesh;
  jx_fn *loss, *grad, *relu_loss;
  jx_aval av[NIN];
  jx_array *args[NIN];
  jx_sharding *autos[NIN];
} fixture;

static int fixture_setup(void **state) {
  setup(state);
  setenv("JX_JIT_KERNELS", "0", 1); /* the planner and partitioner are under test */
  static fixture f;
  const char *names[] = {"data", "model"};
  f.mesh = jx_mesh_create((jx_shape){2, {2, 2}}, names);
  f.loss = jx_fn_create("mlp_loss", NIN, 1, mlp_loss, NULL);
  f.grad = jx_grad(f.loss, JX_AXES(0, 1, 2, 3));
  f.relu_loss = jx_fn_create("mlp_relu_loss", NIN, 1, mlp_relu_loss, NULL);
  uint64_t rng = 21;
  for (int i = 0; i < NIN; i++) {
    f.av[i] = (jx_aval){.dtype = JX_F32, .shape = shapes[i]};
    int64_t n = jx_shape_numel(shapes[i]);
    float *v = malloc(sizeof *v * (size_t)n);
    for (int64_t k = 0; k < n; k++) v[k] = (float)test_rng_uniform(&rng);
    f.args[i] = jx_array_from(JX_F32, shapes[i], v);
    free(v);
    f.autos[i] = JX_AUTO;
  }
  *state = &f;
  return f.mesh && f.grad ? 0 : -1;
}

static int fixture_teardown(void **state) {
  fixture *f = *state;
  jx_fn_release(f->grad);
  jx_fn_release(f->loss);
  jx_fn_release(f->relu_loss);
  jx_mesh_release(f->mesh);
  unsetenv("JX_JIT_KERNELS");
  return teardown(state);
}

/* The program the auto jit plans: f traced, simplified, its custom calls
 * inlined. */
static jx_program *planned_program(fixture *fx, jx_fn *f) {
  jx_program *traced = jx_fn_program(f, fx->av);
  jx_program *s = jx_simplify(traced);
  jx_program *p = jx_lower_custom_calls(s);
  jx_program_release(traced);
  jx_program_release(s);
  assert_non_null(p);
  return p;
}

static void assert_values_equal(jx_array *got, jx_array *want) {
  int64_t n = jx_size(want);
  size_t bytes = sizeof(float) * (size_t)n;
  float *a = malloc(sizeof *a * (size_t)n), *b = malloc(sizeof *b * (size_t)n);
  check_ok(jx_read(want, a, bytes));
  check_ok(jx_read(got, b, bytes));
  for (int64_t k = 0; k < n; k++) assert_float_equal(b[k], a[k], 1e-5 + 1e-5 * fabs(a[k]));
  free(a);
  free(b);
}

/* f's outputs jitted plainly and with every input JX_AUTO agree; the auto
 * jit (outputs JX_AUTO too) gives its inputs and outputs the planner's
 * layouts. */
static void check_auto_matches_plain(fixture *fx, jx_fn *f, int nout, int64_t limit) {
  jx_fn *plain = jx_jit(f, NULL);
  jx_fn *autoj = jx_jit(f, &(jx_jit_options){.in_shardings = fx->autos,
                                             .out_shardings = fx->autos,
                                             .mesh = fx->mesh,
                                             .memory_limit = limit});
  assert_non_null(autoj);
  jx_array *want[NIN], *got[NIN];
  check_ok(jx_call(plain, fx->args, want));
  check_ok(jx_call(autoj, fx->args, got));
  for (int o = 0; o < nout; o++) assert_values_equal(got[o], want[o]);

  /* the planner on the same program, with the jit's figures */
  jx_program *p = planned_program(fx, f);
  jx_comm_model cm;
  check_ok(jx_comm_model_measured(&cm, fx->mesh));
  jx_auto_plan plan;
  check_ok(jx_auto_plan_solve(&cm, fx->mesh, p,
                              limit ? (double)limit : jx_device_memory_default(fx->mesh), &plan));
  char want_spec[JX_SPEC_CAP];
  for (int i = 0; i < NIN; i++) {
    jx_sharding *s = jx_sharded_jit_in_layout(autoj, fx->av, i);
    assert_non_null(s);
    jx_sharding *w = jx_pspec_sharding(fx->mesh, &plan.in_spec[i]);
    print_message("%s input %d: %s\n", jx_fn_name(f), i,
                  jx_pspec_str(fx->mesh, &plan.in_spec[i], want_spec));
    assert_string_equal(s->spec, w->spec);
    jx_sharding_release(s);
    jx_sharding_release(w);
  }
  for (int o = 0; o < nout; o++) { /* JX_AUTO outputs come out as planned */
    jx_sharding *w = jx_pspec_sharding(fx->mesh, &plan.spec[p->out[o]]);
    assert_non_null(jx_sharding_of(got[o]));
    print_message("%s output %d: %s\n", jx_fn_name(f), o, w->spec);
    assert_string_equal(jx_sharding_of(got[o])->spec, w->spec);
    jx_sharding_release(w);
  }
  if (limit) assert_true(plan.memory_bytes <= (double)limit);
  jx_auto_plan_free(&plan);
  jx_program_release(p);
  jx_fn_release(autoj);
  jx_fn_release(plain);
}

static void loss_with_auto_inputs(void **state) {
  fixture *f = *state;
  /* at the mesh's measured figures this small a loss may run replicated
   * (test_auto_plan checks the split at hand-set figures) */
  check_auto_matches_plain(f, f->loss, 1, 0);
}

static void grad_with_auto_inputs(void **state) {
  fixture *f = *state;
  /* without a limit the planner keeps the gradient's inputs replicated (a
   * replicated input is sliced for
   * free into whatever layout each of its readers wants (x is read split by
   * rows forward and by columns for w1's gradient), and the gradients come
   * out split, so no collective runs at all); under a limit it splits more */
  check_auto_matches_plain(f, f->grad, NIN, 0);
  check_auto_matches_plain(f, f->grad, NIN, 40000);
}

/* The relu MLP with a JX_AUTO constraint on its hidden layer: planned
 * through relu's body, the hidden layer split; the plain values under jit,
 * grad and eagerly (where the constraint leaves the value as it is). */
static void relu_and_an_auto_constraint(void **state) {
  fixture *fx = *state;
  jx_program *p = planned_program(fx, fx->relu_loss);
  int hidden = -1;
  for (int k = 0; k < p->neqns; k++) {
    assert_string_not_equal(p->eqns[k].prim->name, "custom_jvp_call");
    if (!strcmp(p->eqns[k].prim->name, "sharding_constraint")) hidden = p->eqns[k].out[0];
  }
  assert_true(hidden >= 0);
  jx_comm_model cm;
  jx_comm_model_uniform(&cm, fx->mesh, 1e-5, 1e9, 1e9);
  jx_auto_plan plan;
  check_ok(jx_auto_plan_solve(&cm, fx->mesh, p, 1e300, &plan));
  char spec[JX_SPEC_CAP];
  print_message("relu hidden layer: %s\n", jx_pspec_str(fx->mesh, &plan.spec[hidden], spec));
  assert_true(jx_pspec_sharded(&plan.spec[hidden]));
  jx_auto_plan_free(&plan);
  jx_program_release(p);

  jx_array *want, *got, *eager;
  jx_fn *plain = jx_jit(fx->relu_loss, NULL);
  check_ok(jx_call(plain, fx->args, &want));
  check_ok(jx_call(fx->relu_loss, fx->args, &eager));
  assert_values_equal(eager, want);
  /* the constraint alone asks for a plan: no JX_AUTO entry, the mesh given */
  jx_fn *autoj = jx_jit(fx->relu_loss, &(jx_jit_options){.mesh = fx->mesh});
  check_ok(jx_call(autoj, fx->args, &got));
  assert_values_equal(got, want);
  jx_fn *g = jx_grad(fx->relu_loss, JX_AXES(1));
  jx_fn *gplain = jx_jit(g, NULL);
  jx_fn *gauto = jx_jit(g, &(jx_jit_options){.in_shardings = fx->autos, .mesh = fx->mesh});
  check_ok(jx_call(gplain, fx->args, &want));
  check_ok(jx_call(gauto, fx->args, &got));
  assert_values_equal(got, want);
  jx_fn_release(gauto);
  jx_fn_release(gplain);
  jx_fn_release(g);
  jx_fn_release(autoj);
  jx_fn_release(plain);
}

/* A program planned again on the same mesh under the same limit (another
 * jit of the same function) takes the plan made before; another limit, or
 * another planning time limit (JX_PLAN_TIME_LIMIT), is planned anew. */
static void plans_are_cached(void **state) {
  fixture *f = *state;
  int64_t before = jx_auto_plan_solves();
  int64_t limits[] = {1 << 30, 1 << 30, 1 << 29, 1 << 29, 1 << 29};
  /* the last two under another planning time limit: planned anew once */
  const char *time_limits[] = {NULL, NULL, NULL, "20", "20"};
  int64_t want[] = {1, 1, 2, 3, 3};
  for (int k = 0; k < 5; k++) {
    if (time_limits[k]) setenv("JX_PLAN_TIME_LIMIT", time_limits[k], 1);
    jx_fn *j = jx_jit(
        f->loss,
        &(jx_jit_options){.in_shardings = f->autos, .mesh = f->mesh, .memory_limit = limits[k]});
    jx_array *out;
    check_ok(jx_call(j, f->args, &out));
    assert_int_equal(jx_auto_plan_solves() - before, want[k]);
    jx_fn_release(j);
  }
  unsetenv("JX_PLAN_TIME_LIMIT");
}

/* The estimate of a jit with shardings: replicated, every device runs the
 * whole program (jx_fn_cost's flops and peak, no collectives); data
 * parallel over 4, a device computes about a quarter and the gradients
 * are summed; at figures set for the mesh's shape, each all_reduce costs
 * 2(n-1) alpha and the compute its flops at the given rate. The report names
 * the plan, its inputs and the recipe compared. */
static void estimates_and_the_report(void **state) {
  fixture *fx = *state;
  jx_fn *plain = jx_jit(fx->grad, NULL);
  jx_cost whole;
  check_ok(jx_fn_cost(plain, fx->args, &whole));
  const char *names[] = {"d"};
  jx_mesh *line = jx_mesh_create((jx_shape){1, {4}}, names);
  double alpha = 1e-4, bw = 1e30, rate = 2e9;
  check_ok(jx_sharding_plan_figures(line, &alpha, &bw, rate));
  jx_sharding *rep = jx_sharding_create(line, ""), *rows = jx_sharding_create(line, "d");
  jx_sharding *repl[NIN] = {rep, rep, rep, rep}, *dp[NIN] = {rows, rep, rep, rows};
  jx_fn *r = jx_jit(fx->grad, &(jx_jit_options){.in_shardings = repl});
  jx_fn *d = jx_jit(fx->grad, &(jx_jit_options){.in_shardings = dp});
  jx_sharding_estimate er, ed;
  check_ok(jx_sharding_estimate_of(r, fx->args, &er));
  check_ok(jx_sharding_estimate_of(d, fx->args, &ed));
  print_message("replicated: %.0f flops, peak %.0f; data parallel: %.0f flops, %d collectives, "
                "%.3g s\n",
                er.flops, er.peak_bytes, ed.flops, ed.collectives, ed.comm_s);
  assert_float_equal(er.flops, whole.flops, 1e-9 * whole.flops);
  assert_float_equal(er.peak_bytes, whole.peak_bytes_per_device, 0.5);
  assert_int_equal(er.collectives, 0);
  assert_float_equal(er.compute_s, er.flops / rate, 1e-12);
  assert_true(ed.flops < 0.35 * whole.flops && ed.flops > 0.2 * whole.flops);
  assert_true(ed.collectives >= 2); /* w1's and w2's gradients at least */
  assert_float_equal(ed.comm_s, ed.collectives * 6 * alpha, 1e-9);

  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  jx_fn *planned = jx_jit(fx->grad, &(jx_jit_options){.in_shardings = fx->autos, .mesh = line});
  check_ok(jx_sharding_plan_print(planned, fx->args, d, "data parallel", out));
  fclose(out);
  print_message("%s", text);
  assert_non_null(strstr(text, "plan of 'jit(grad(mlp_loss))' on the mesh (d=4"));
  assert_non_null(strstr(text, "search complete: within "));
  assert_non_null(strstr(text, "input 3"));
  assert_non_null(strstr(text, "estimated"));
  assert_non_null(strstr(text, "data parallel"));
  free(text);
  assert_int_equal(jx_sharding_estimate_of(plain, fx->args, &er), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("is not a jit with shardings");
  jx_fn_release(planned);
  jx_fn_release(d);
  jx_fn_release(r);
  jx_sharding_release(rep);
  jx_sharding_release(rows);
  jx_mesh_release(line);
  jx_fn_release(plain);
}

/* The most bytes any device but 0 (which holds the unsharded arguments) held
 * during one call of f, with its inputs' blocks: what the estimate's peak
 * counts (the profiler measures a jitted function's peak the same way). */
static double measured_peak(jx_fn *f, jx_array *const *in, int nout, int ndev) {
  double inputs = 0, peak = 0;
  for (int i = 0; i < NIN; i++) {
    jx_shape s;
    check_ok(jx_sharding_shard_shape(jx_sharding_of(in[i]), jx_shape_of(in[i]), &s));
    inputs += sizeof(float) * (double)jx_shape_numel(s);
  }
  int64_t live0[8];
  for (int d = 1; d < ndev; d++) {
    jx_memory_stats ms;
    check_ok(jx_memory_stats(d, &ms));
    live0[d] = ms.live_bytes;
  }
  jx_scope_begin();
  jx_memory_reset_peak(-1);
  jx_array *out[NIN];
  check_ok(jx_call(f, in, out));
  for (int o = 0; o < nout; o++) check_ok(jx_block_until_ready(out[o]));
  for (int d = 1; d < ndev; d++) {
    jx_memory_stats ms;
    check_ok(jx_memory_stats(d, &ms));
    peak = fmax(peak, inputs + (double)(ms.peak_bytes - live0[d]));
  }
  jx_scope_end();
  return peak;
}

/* The estimate's peak per device is jx's measured peak (the allocator's
 * count while the per-device programs run), for the gradient laid out as
 * data parallel, as Megatron over "model" with the batch over "data", and as
 * planned: deterministic figures, within 2 % and 4 KB. Run an equation at
 * a time (no kernels), the executable holds one more hidden-layer block
 * (2 KB, and for data parallel an input block) at its peak than the
 * estimate's liveness counts: 3 KB of 32 KB here; on the GPT's step (tens of
 * MB, fused) the two are within 3 %. */
static void the_estimated_peak_is_measured(void **state) {
  fixture *fx = *state;
  const char *recipes[3][NIN] = {
      {"data", "", "", "data"}, {"data", "None,model", "model", "data"}, {0}};
  for (int r = 0; r < 3; r++) {
    jx_sharding *sh[NIN];
    for (int i = 0; i < NIN; i++)
      sh[i] = recipes[r][i] ? jx_sharding_create(fx->mesh, recipes[r][i]) : JX_AUTO;
    jx_fn *f = jx_jit(fx->grad, &(jx_jit_options){.in_shardings = sh, .mesh = fx->mesh});
    jx_sharding_estimate est;
    check_ok(jx_sharding_estimate_of(f, fx->args, &est));
    jx_array *in[NIN];
    jx_scope_begin();
    for (int i = 0; i < NIN; i++) { /* placed as the step takes them */
      jx_sharding *want = sh[i] != JX_AUTO ? sh[i] : jx_sharded_jit_in_layout(f, fx->av, i);
      in[i] = jx_device_put(fx->args[i], want);
      if (sh[i] == JX_AUTO) jx_sharding_release(want);
    }
    measured_peak(f, in, NIN, 4); /* warm */
    double got = measured_peak(f, in, NIN, 4);
    print_message("recipe %d: estimated peak %.0f, measured %.0f bytes\n", r, est.peak_bytes, got);
    assert_true(fabs(got - est.peak_bytes) <= 0.02 * est.peak_bytes + 4096);
    jx_scope_end();
    jx_fn_release(f);
    for (int i = 0; i < NIN; i++)
      if (sh[i] != JX_AUTO) jx_sharding_release(sh[i]);
  }
}

/* Under a limit that binds, the plan fits by the partitioned program's
 * count (jx_fn_cost's liveness of the per-device program the sharded jit
 * runs, which the memory rows approach: they count the copies the
 * partitioner relays operands into and the summed copies of partial
 * results, not what fusion keeps out of memory), and the plan's peak is
 * that count. The limit is halfway from the smallest peak a plan has (the
 * error of a limit no plan meets names it) to the unlimited plan's. */
static void the_plan_fits_as_partitioned(void **state) {
  fixture *fx = *state;
  /* figures on paper, so that the plans and the limit are the same on any
   * machine (the last test of the file: the figures stay the mesh's); slow
   * links, so that the unlimited plan holds enough for the limit to bind */
  double alpha[2] = {1e-4, 1e-4}, bw[2] = {1e8, 1e8};
  check_ok(jx_sharding_plan_figures(fx->mesh, alpha, bw, 1e12));
  double limit = 0;
  for (int r = 0; r < 2; r++) {
    jx_fn *autoj = jx_jit(fx->grad, &(jx_jit_options){.in_shardings = fx->autos,
                                                      .mesh = fx->mesh,
                                                      .memory_limit = (int64_t)limit});
    jx_sharding_estimate est;
    check_ok(jx_sharding_estimate_of(autoj, fx->args, &est));
    jx_program *p = planned_program(fx, fx->grad);
    jx_comm_model cm;
    check_ok(jx_comm_model_measured(&cm, fx->mesh));
    jx_auto_plan plan;
    check_ok(jx_auto_plan_solve(&cm, fx->mesh, p,
                                limit ? limit : jx_device_memory_default(fx->mesh), &plan));
    print_message("limit %.0f: the plan's peak %.0f bytes, the partitioned program's %.0f\n", limit,
                  plan.memory_bytes, est.peak_bytes);
    if (limit) {
      assert_true(est.peak_bytes <= limit);
      assert_float_equal(plan.memory_bytes, est.peak_bytes, 0.5);
    } else {
      jx_auto_plan none;
      assert_int_equal(jx_auto_plan_solve(&cm, fx->mesh, p, 64, &none), JX_ERR_INVALID_ARGUMENT);
      const char *at = strstr(jx_last_error(), "the smallest peak found is ");
      assert_non_null(at);
      double smallest = strtod(at + strlen("the smallest peak found is "), NULL);
      jx_clear_error();
      print_message("the smallest peak found: %.0f bytes\n", smallest);
      assert_true(smallest > 64 && smallest <= est.peak_bytes);
      limit = (double)(int64_t)((smallest + est.peak_bytes) / 2);
    }
    jx_auto_plan_free(&plan);
    jx_program_release(p);
    jx_fn_release(autoj);
  }
}

static void a_limit_no_plan_meets(void **state) {
  fixture *f = *state;
  jx_fn *autoj = jx_jit(
      f->loss, &(jx_jit_options){.in_shardings = f->autos, .mesh = f->mesh, .memory_limit = 64});
  assert_non_null(autoj);
  jx_array *out;
  assert_int_equal(jx_call(autoj, f->args, &out), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "test_auto_jit.c:")); /* the caller's line */
  assert_error_has("fits 64 bytes per device; the smallest peak found is");
  jx_fn_release(autoj);
}

static void auto_without_a_mesh(void **state) {
  fixture *f = *state;
  assert_null(jx_jit(f->loss, &(jx_jit_options){.in_shardings = f->autos}));
  assert_error_has("JX_AUTO layouts but no other sharding names a mesh");
}

/* JX_AUTO is for jx_jit's options only: elsewhere a clear error. */
static void auto_elsewhere_is_an_error(void **state) {
  fixture *f = *state;
  jx_array *y = jx_device_put(f->args[0], JX_AUTO);
  assert_true(jx_is_poisoned(y));
  assert_error_has("jx_device_put: JX_AUTO is a layout only jx_jit's in_shardings");
}

/* A JX_AUTO constraint needs a mesh to plan on. */
static void auto_constraint_without_a_mesh(void **state) {
  fixture *f = *state;
  jx_sharding *none[NIN] = {0};
  jx_fn *j = jx_jit(f->relu_loss, &(jx_jit_options){.in_shardings = none});
  jx_array *out;
  assert_int_equal(jx_call(j, f->args, &out), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("holds a JX_AUTO sharding constraint but no sharding names a mesh");
  jx_fn_release(j);
}

int main(void) {
  jx_set_cpu_device_count(4);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(loss_with_auto_inputs),
      cmocka_unit_test(grad_with_auto_inputs),
      cmocka_unit_test(a_limit_no_plan_meets),
      cmocka_unit_test(auto_without_a_mesh),
      cmocka_unit_test(auto_elsewhere_is_an_error),
      cmocka_unit_test(relu_and_an_auto_constraint),
      cmocka_unit_test(auto_constraint_without_a_mesh),
      cmocka_unit_test(plans_are_cached),
      cmocka_unit_test(estimates_and_the_report),
      cmocka_unit_test(the_estimated_peak_is_measured),
      cmocka_unit_test(the_plan_fits_as_partitioned),
  };
  return cmocka_run_group_tests(tests, fixture_setup, fixture_teardown);
}
