/* Computation follows data, as in JAX: a jit without shardings (jx_jit(f,
 * NULL) or zeroed options) called on sharded arguments runs on their mesh,
 * partitioned by their layouts, and its outputs come back sharded as
 * propagation chose; an eager op on sharded arrays does the same. Oracles:
 * the jit with the same layouts given as in_shardings (the same per-device
 * program: equal bit for bit, equal output shardings) and the plain jit on
 * unsharded arrays (equal to rounding). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>
#include <jx/parallel.h>

#include "parallel/partition.h"
#include "test_capture.h"
#include "test_util.h"

static jx_mesh *mesh;  /* 4 x 2: "data", "model" */
static jx_mesh *mesh2; /* 2: "x" */

static jx_sharding *sh_(jx_mesh *m, const char *spec) {
  jx_sharding *s = jx_sharding_create(m, spec);
  assert_non_null(s);
  return s; /* the registry keeps every sharding alive */
}

static const char *spec_of(jx_array *a) {
  jx_sharding *s = jx_sharding_of(a);
  if (!s) fail_msg("the result is not sharded");
  return jx_sharding_spec(s);
}

/* The MLP layer pair: tanh(x w1 + b1) w2, and the squared-sum loss. */
static void f_mlp(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *h = jx_tanh(jx_add(jx_matmul(in[0], in[1]), in[2]));
  out[0] = jx_matmul(h, in[3]);
}
static void f_loss(void *c, jx_array *const *in, jx_array **out) {
  jx_array *y[1];
  f_mlp(c, in, y);
  out[0] = jx_sum(jx_mul(y[0], y[0]), JX_AXES(), 0);
}

enum { NIN = 4 };
static const char *const mlp_specs[NIN] = {"data", "None,model", "model", "model"};
static jx_array *mlp_in[NIN];

static void make_inputs(void) {
  jx_shape shapes[NIN] = {JX_SHAPE(16, 8), JX_SHAPE(8, 16), JX_SHAPE(16), JX_SHAPE(16, 8)};
  for (int i = 0; i < NIN; i++) mlp_in[i] = test_wave(shapes[i], i + 1, 1.0);
}

/* f jitted three ways: plain on sharded arguments (got), with the same
 * layouts as in_shardings (want, bit for bit, the same output shardings),
 * plain on unsharded arguments (the identity oracle). */
static void check_follows(jx_fn *f, const jx_jit_options *plain_opts, const char *what) {
  int nout = jx_fn_nout(f);
  jx_sharding *sh[NIN];
  jx_array *xs[NIN], *got[NIN], *want[NIN], *ref[NIN];
  for (int i = 0; i < NIN; i++) {
    sh[i] = sh_(mesh, mlp_specs[i]);
    xs[i] = jx_device_put(mlp_in[i], sh[i]);
  }
  jx_fn *plain = jx_jit(f, plain_opts);
  jx_fn *pj = jx_jit(f, &(jx_jit_options){.in_shardings = sh});
  check_ok(jx_call(plain, xs, got));
  check_ok(jx_call(pj, mlp_in, want));
  check_ok(jx_call(plain, mlp_in, ref));
  int exact;
  assert_true(test_max_rel_diff(got, want, nout, &exact) == 0);
  assert_true(exact);
  double d = test_max_rel_diff(got, ref, nout, &exact);
  if (d > 1e-5) fail_msg("%s: %g from the unsharded jit", what, d);
  for (int o = 0; o < nout; o++) {
    assert_string_equal(spec_of(got[o]), spec_of(want[o]));
    assert_null(jx_sharding_of(ref[o])); /* unsharded arguments: one device */
  }
  /* it ran partitioned: one per-device program, with the psum the split
   * contraction of the second matmul calls for */
  assert_int_equal(jx_sharded_jit_partitions(plain), 1);
  check_ok(jx_call(plain, xs, got));
  assert_int_equal(jx_sharded_jit_partitions(plain), 1);
  char *t = jx_sharded_jit_device_text(plain, xs), *tg = jx_sharded_jit_device_text(pj, xs);
  assert_non_null(t);
  assert_non_null(tg);
  assert_non_null(strstr(t, "psum"));
  assert_string_equal(t, tg); /* the same per-device program: the same speed */
  free(t);
  free(tg);
  jx_fn_release(pj);
  jx_fn_release(plain);
}

static void plain_jit_follows_argument_shardings(void **state) {
  (void)state;
  make_inputs();
  jx_fn *f = jx_fn_create("mlp", NIN, 1, f_mlp, NULL);
  check_follows(f, NULL, "jit(mlp)");
  check_follows(f, &(jx_jit_options){0}, "jit(mlp) with zeroed options");
  /* the output as propagation chose it: rows over data, the psum'ed
   * contraction replicated over model */
  jx_array *xs[NIN], *y[1];
  for (int i = 0; i < NIN; i++) xs[i] = jx_device_put(mlp_in[i], sh_(mesh, mlp_specs[i]));
  jx_fn *plain = jx_jit(f, NULL);
  check_ok(jx_call(plain, xs, y));
  assert_string_equal(spec_of(y[0]), "data");
  jx_fn_release(plain);
  jx_fn_release(f);
}

static void gradients_follow_argument_shardings(void **state) {
  (void)state;
  make_inputs();
  jx_fn *loss = jx_fn_create("loss", NIN, 1, f_loss, NULL);
  jx_fn *g = jx_grad(loss, JX_AXES(1, 2, 3));
  /* grad's inputs are the four arguments; its outputs the three gradients */
  check_follows(g, NULL, "jit(grad(loss))");
  jx_fn_release(g);
  jx_fn_release(loss);
}

static void mixed_and_mismatched_arguments(void **state) {
  (void)state;
  make_inputs();
  jx_fn *f = jx_fn_create("mlp", NIN, 1, f_mlp, NULL);
  jx_fn *plain = jx_jit(f, NULL);
  jx_array *ref[1], *got[1], *xs[NIN];
  check_ok(jx_call(plain, mlp_in, ref));
  /* one sharded argument: the others (uncommitted) follow it */
  for (int i = 0; i < NIN; i++) xs[i] = mlp_in[i];
  xs[0] = jx_device_put(mlp_in[0], sh_(mesh, "data"));
  check_ok(jx_call(plain, xs, got));
  assert_string_equal(spec_of(got[0]), "data");
  int exact;
  assert_true(test_max_rel_diff(got, ref, 1, &exact) <= 1e-5);
  /* arguments on different meshes: the sharded jit's error */
  xs[1] = jx_device_put(mlp_in[1], sh_(mesh2, "None,x"));
  assert_int_not_equal(jx_call(plain, xs, got), JX_OK);
  assert_error_has("on different meshes");
  assert_true(jx_is_poisoned(got[0]));
  jx_fn_release(plain);
  jx_fn_release(f);
}

/* (i, x) -> x / 2 + 1: a loop body */
static void f_step(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_add(jx_mul(in[1], jx_scalar(JX_F32, 0.5)), jx_scalar(JX_F32, 1));
}

/* Eager ops on sharded arrays run sharded; the values equal the same ops on
 * unsharded arrays. */
static void eager_ops_stay_sharded(void **state) {
  (void)state;
  jx_array *x = test_wave(JX_SHAPE(16, 8), 1, 1.0), *w = test_wave(JX_SHAPE(8, 16), 2, 1.0);
  jx_array *xs = jx_device_put(x, sh_(mesh, "data"));
  jx_array *ws = jx_device_put(w, sh_(mesh, "None,model"));
  jx_array *got[5] = {
      jx_mul(jx_tanh(xs), jx_scalar(JX_F32, 2)), /* elementwise, a weak scalar operand */
      jx_matmul(xs, ws),                         /* rows and columns split */
      jx_sum(xs, JX_AXES(0), 0),                 /* the split dim reduced: a psum */
      jx_transpose(xs, JX_AXES(1, 0)),
      jx_add(xs, x), /* an unsharded operand follows the sharded one */
  };
  jx_array *want[5] = {
      jx_mul(jx_tanh(x), jx_scalar(JX_F32, 2)), jx_matmul(x, w), jx_sum(x, JX_AXES(0), 0),
      jx_transpose(x, JX_AXES(1, 0)),           jx_add(x, x),
  };
  const char *specs[5] = {"data", "data,model", "", "None,data", "data"};
  for (int k = 0; k < 5; k++) {
    check_ok(jx_last_status());
    assert_string_equal(spec_of(got[k]), specs[k]);
    int exact;
    double d = test_max_rel_diff(&got[k], &want[k], 1, &exact);
    if (d > 1e-6) fail_msg("op %d: %g from the unsharded op", k, d);
  }
  /* control flow: the loop runs on the mesh (replicated: the partitioner's
   * fallback for loops) and gives the unsharded loop's values */
  jx_fn *step = jx_fn_create("step", 2, 1, f_step, NULL);
  jx_array *loop[2];
  check_ok(jx_fori(0, 3, step, 1, &xs, &loop[0]));
  check_ok(jx_fori(0, 3, step, 1, &x, &loop[1]));
  assert_non_null(jx_sharding_of(loop[0]));
  int same;
  assert_true(test_max_rel_diff(&loop[0], &loop[1], 1, &same) == 0);
  jx_fn_release(step);
  /* an op applied again with the same layouts reuses its per-device program */
  jx_array *again = jx_matmul(xs, ws);
  int exact;
  assert_true(test_max_rel_diff(&again, &got[1], 1, &exact) == 0 && exact);
  /* operands on different meshes: the sharded jit's error */
  jx_array *other = jx_device_put(test_wave(JX_SHAPE(16, 8), 3, 1.0), sh_(mesh2, "x"));
  assert_true(jx_is_poisoned(jx_add(xs, other)));
  assert_error_has("add: shardings on different meshes: input[0] is on the mesh (data=4, model=2");
  /* shape errors read as they do for unsharded operands */
  jx_array *bad = jx_add(xs, jx_zeros(JX_F32, JX_SHAPE(3)));
  assert_true(jx_is_poisoned(bad));
  assert_error_has("add");
}

/* debug_print shows the global value: its sharded argument is gathered, and
 * JX_LOG_COMPILES=1 says so, naming it. */
static jx_status print_sharded(void *ctx) {
  jx_array *xs = ctx;
  FILE *old = jx_debug_set_output(fopen("/dev/null", "w"));
  jx_debug_print("x = {}", 1, &xs);
  fclose(jx_debug_set_output(old));
  return jx_last_status();
}

/* A jitted function that holds a sharded array in its ctx: traced, the
 * array is a constant, one whole value. */
static void f_add_captured(void *c, jx_array *const *in, jx_array **out) {
  out[0] = jx_add(in[0], (jx_array *)c);
}
static jx_status call_capturing(void *ctx) {
  jx_array *xs = ctx, *y[1];
  jx_fn *f = jx_fn_create("add_captured", 1, 1, f_add_captured, xs);
  jx_fn *jf = jx_jit(f, NULL);
  jx_status st = jx_call(jf, &xs, y);
  jx_fn_release(jf);
  jx_fn_release(f);
  return st;
}

/* A function holding a shard_map: over the arguments' mesh the partitioner
 * inlines its body; over another mesh it cannot place it, and the function
 * runs on one device. Either way the values are 2 x + 1. */
static void f_double(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_mul(in[0], jx_scalar(JX_F32, 2));
}
static void f_around_smap(void *c, jx_array *const *in, jx_array **out) {
  jx_array *y[1];
  if (jx_call(c, in, y)) return;
  out[0] = jx_add(y[0], jx_scalar(JX_F32, 1));
}
typedef struct {
  jx_array *xs, *y;
  jx_mesh *smap_mesh;
  const char *spec;
} smap_call;
static jx_status call_around_smap(void *ctx) {
  smap_call *c = ctx;
  jx_fn *body = jx_fn_create("double", 1, 1, f_double, NULL);
  jx_fn *smap = jx_shard_map(body, c->smap_mesh, &c->spec, &c->spec);
  jx_fn *f = jx_fn_create("around_smap", 1, 1, f_around_smap, smap);
  jx_fn *jf = jx_jit(f, NULL);
  jx_status st = jx_call(jf, &c->xs, &c->y);
  float got[16];
  if (!st) st = jx_read(c->y, got, sizeof got);
  for (int i = 0; i < 16 && !st; i++)
    if (got[i] != 2 * (float)test_wave_value(i, (double[]){1, 1.0}) + 1)
      fail_msg("[%d]: %g", i, got[i]);
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_fn_release(smap);
  jx_fn_release(body);
  return st;
}

static void shard_maps_inside_follow_data(void **state) {
  (void)state;
  jx_array *xs = jx_device_put(test_wave(JX_SHAPE(16), 1, 1.0), sh_(mesh, "data"));
  setenv("JX_LOG_COMPILES", "1", 1);
  jx_status st;
  smap_call same = {xs, NULL, mesh, "data"}, other = {xs, NULL, mesh2, "x"};
  const char *log = captured(call_around_smap, &same, &st);
  check_ok(st);
  if (!strstr(log, "partitioning 'jit(around_smap)' for input shardings (data)"))
    fail_msg("log: %s", log);
  assert_string_equal(spec_of(same.y), "data");
  log = captured(call_around_smap, &other, &st);
  unsetenv("JX_LOG_COMPILES");
  check_ok(st);
  if (!strstr(log, "holds a shard_map the sharded jit cannot place on this mesh, so it runs on "
                   "one device: it gathers argument 0 (sharded data)"))
    fail_msg("log: %s", log);
  assert_null(jx_sharding_of(other.y));
}

static void gathering_is_logged(void **state) {
  (void)state;
  jx_array *xs = jx_device_put(test_wave(JX_SHAPE(16), 1, 1.0), sh_(mesh, "data"));
  setenv("JX_LOG_COMPILES", "1", 1);
  jx_status st;
  const char *log = captured(print_sharded, xs, &st);
  check_ok(st);
  if (!strstr(log, "'debug_print' gathers argument 0 (sharded data)")) fail_msg("log: %s", log);
  log = captured(call_capturing, xs, &st);
  check_ok(st);
  if (!strstr(log, "'add_captured' captures a sharded array (data) as a constant (argument 1 of "
                   "add)"))
    fail_msg("log: %s", log);
  unsetenv("JX_LOG_COMPILES");
}

int main(void) {
  jx_set_cpu_device_count(8);
  mesh = jx_mesh_create(JX_SHAPE(4, 2), (const char *[]){"data", "model"});
  mesh2 = jx_mesh_create(JX_SHAPE(2), (const char *[]){"x"});
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(plain_jit_follows_argument_shardings, setup, teardown),
      cmocka_unit_test_setup_teardown(gradients_follow_argument_shardings, setup, teardown),
      cmocka_unit_test_setup_teardown(mixed_and_mismatched_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(eager_ops_stay_sharded, setup, teardown),
      cmocka_unit_test_setup_teardown(shard_maps_inside_follow_data, setup, teardown),
      cmocka_unit_test_setup_teardown(gathering_is_logged, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_mesh_release(mesh2);
  jx_mesh_release(mesh);
  jx_shutdown();
  return failed;
}
