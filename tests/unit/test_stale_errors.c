#define _GNU_SOURCE /* mkdtemp */
/* An error left recorded by an earlier, failed call never makes a later
 * valid call fail: every public API family runs correctly (status, values)
 * after a stale error, and the stale error stays recorded for the caller
 * until jx_clear_error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
// clang-format off
#include <cmocka.h>
// clang-format on
#include <jx/jx.h>

#include "test_util.h"

/* A failed eager op (f32[2] + f32[3]) whose error stays recorded. */
static void leave_stale_error(void) {
  jx_add(jx_zeros(JX_F32, JX_SHAPE(2)), jx_zeros(JX_F32, JX_SHAPE(3)));
  assert_int_equal(jx_last_status(), JX_ERR_SHAPE);
}

/* The stale error is still the one recorded: nothing in between failed. */
static void assert_stale_error_kept(void) {
  assert_int_equal(jx_last_status(), JX_ERR_SHAPE);
  assert_error_has("jx_add: ");
}

static jx_array *vec(float a, float b, float c) {
  return jx_array_from(JX_F32, JX_SHAPE(3), (const float[]){a, b, c});
}

static void expect3(jx_array *x, float a, float b, float c) {
  float got[3];
  jx_status st = jx_read(x, got, sizeof got);
  if (st) fprintf(stderr, "%s\n", jx_last_error());
  assert_int_equal(st, JX_OK);
  assert_true(got[0] == a && got[1] == b && got[2] == c);
}

/* sum(x * x): its gradient is 2 x */
static void sum_sq(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_mul(in[0], in[0]), JX_AXES(), 0);
}
static void twice(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(in[0], jx_scalar(JX_F32, 2));
}

static void eager_ops(void **state) {
  (void)state;
  leave_stale_error();
  expect3(jx_add(vec(1, 2, 3), vec(10, 20, 30)), 11, 22, 33);
  assert_true(jx_item(jx_sum(vec(1, 2, 3), JX_AXES(), 0)) == 6);
  assert_stale_error_kept();
}

static void jit(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("twice", 1, 1, twice, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  leave_stale_error();
  jx_array *x = vec(1, 2, 3), *out[1];
  check_ok(jx_call(jf, &x, out));
  expect3(out[0], 2, 4, 6);
  assert_stale_error_kept();
  jx_fn_release(jf);
  jx_fn_release(f);
}

static void grad_vjp_jvp(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("sum_sq", 1, 1, sum_sq, NULL);
  leave_stale_error();
  jx_fn *g = jx_grad(f, JX_AXES());
  jx_fn *vjp = jx_vjp(f), *jvp = jx_jvp(f);
  jx_array *x = vec(1, 2, 3), *out[2];
  check_ok(jx_call(g, &x, out));
  expect3(out[0], 2, 4, 6);
  jx_array *vin[2] = {x, jx_scalar(JX_F32, 1)};
  check_ok(jx_call(vjp, vin, out));
  assert_true(jx_item(out[0]) == 14);
  expect3(out[1], 2, 4, 6);
  jx_array *jin[2] = {x, vec(1, 0, 0)};
  check_ok(jx_call(jvp, jin, out));
  assert_true(jx_item(out[0]) == 14 && jx_item(out[1]) == 2);
  assert_stale_error_kept();
  jx_fn_release(jvp);
  jx_fn_release(vjp);
  jx_fn_release(g);
  jx_fn_release(f);
}

static void vmap(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("sum_sq", 1, 1, sum_sq, NULL);
  leave_stale_error();
  jx_fn *vf = jx_vmap(f, JX_AXES(0), JX_AXES(0));
  jx_array *x = jx_reshape(jx_arange(JX_F32, 0, 6, 1), JX_SHAPE(3, 2)), *out[1];
  check_ok(jx_call(vf, &x, out));
  expect3(out[0], 1, 13, 41);
  assert_stale_error_kept();
  jx_fn_release(vf);
  jx_fn_release(f);
}

static void below_ten(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_lt(in[0], jx_scalar(JX_F32, 10));
}
static void add_xs(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(in[0], in[1]);
  out[1] = out[0];
}

static void control_flow(void **state) {
  (void)state;
  jx_fn *dbl = jx_fn_create("twice", 1, 1, twice, NULL);
  jx_fn *sq = jx_fn_create("sum_sq", 1, 1, sum_sq, NULL);
  jx_fn *cond = jx_fn_create("below_ten", 1, 1, below_ten, NULL);
  jx_fn *body = jx_fn_create("add_xs", 2, 2, add_xs, NULL);
  leave_stale_error();
  jx_array *one = jx_scalar(JX_F32, 1), *out[2];
  check_ok(jx_cond(jx_scalar(JX_BOOL, 1), dbl, dbl, 1, &one, out));
  assert_true(jx_item(out[0]) == 2);
  check_ok(jx_while(cond, dbl, 1, &one, out));
  assert_true(jx_item(out[0]) == 16);
  jx_array *zero = jx_zeros(JX_F32, JX_SHAPE()), *xs = vec(1, 2, 3);
  check_ok(jx_scan(body, 1, &zero, 1, &xs, 3, 0, out));
  assert_true(jx_item(out[0]) == 6);
  expect3(out[1], 1, 3, 6);
  assert_stale_error_kept();
  jx_fn_release(body);
  jx_fn_release(cond);
  jx_fn_release(sq);
  jx_fn_release(dbl);
}

static void shard_map_pmap(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *[]){"i"});
  jx_fn *f = jx_fn_create("twice", 1, 1, twice, NULL);
  leave_stale_error();
  const char *spec[1] = {"i"};
  jx_fn *sm = jx_shard_map(f, m, spec, spec);
  jx_fn *pm = jx_pmap(f, "i", JX_AXES(0), JX_AXES(0));
  jx_array *x = jx_arange(JX_F32, 0, 4, 1), *out[1];
  check_ok(jx_call(sm, &x, out));
  float got[4];
  check_ok(jx_read(out[0], got, sizeof got));
  assert_true(got[0] == 0 && got[1] == 2 && got[2] == 4 && got[3] == 6);
  jx_array *y = jx_reshape(x, JX_SHAPE(2, 2));
  check_ok(jx_call(pm, &y, out));
  check_ok(jx_read(out[0], got, sizeof got));
  assert_true(got[0] == 0 && got[1] == 2 && got[2] == 4 && got[3] == 6);
  assert_stale_error_kept();
  jx_fn_release(pm);
  jx_fn_release(sm);
  jx_fn_release(f);
  jx_mesh_release(m);
}

static void optimizers(void **state) {
  (void)state;
  jx_tree *params = jx_tree_create(), *grads = jx_tree_create();
  jx_tree_set(params, "w", vec(1, 2, 3));
  jx_tree_set(grads, "w", vec(10, 10, 10));
  jx_optimizer *opt = jx_optim_sgd(0.1, 0);
  jx_tree *st = jx_optim_init(opt, params);
  leave_stale_error();
  jx_optim_update(opt, grads, st, params);
  expect3(jx_tree_get(params, "w"), 0, 1, 2);
  assert_true(jx_item(jx_tree_get(st, "count")) == 1);
  assert_stale_error_kept();
  jx_tree_release(st);
  jx_optim_release(opt);
  jx_tree_release(grads);
  jx_tree_release(params);
}

/* loss(w, x) = sum(w * x) */
static void dot_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_mul(in[0], in[1]), JX_AXES(), 0);
}

static void train_step(void **state) {
  (void)state;
  jx_tree *params = jx_tree_create();
  jx_tree_set(params, "w", vec(1, 2, 3));
  jx_optimizer *opt = jx_optim_sgd(0.5, 0);
  jx_tree *st = jx_optim_init(opt, params);
  jx_fn *loss = jx_fn_create("dot_loss", 2, 1, dot_loss, NULL);
  leave_stale_error();
  jx_fn *plain = jx_train_step(loss, params, st, opt), *step = jx_jit(plain, NULL);
  int ns = jx_tree_size(st);
  jx_array *in[8], *out[8];
  in[0] = jx_tree_get(params, "w");
  jx_tree_flatten(st, in + 1);
  in[1 + ns] = vec(2, 2, 2);
  check_ok(jx_call(step, in, out));
  assert_true(jx_item(out[0]) == 12);
  expect3(out[1], 0, 1, 2);
  assert_stale_error_kept();
  jx_fn_release(step);
  jx_fn_release(plain);
  jx_fn_release(loss);
  jx_tree_release(st);
  jx_optim_release(opt);
  jx_tree_release(params);
}

static void checkpoints(void **state) {
  (void)state;
  char dir[512];
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/stale_errors_XXXXXX", tmp ? tmp : "/tmp");
  assert_non_null(mkdtemp(dir));
  jx_tree *t = jx_tree_create();
  jx_tree_set(t, "w", vec(1, 2, 3));
  leave_stale_error();
  check_ok(jx_checkpoint_save(dir, 7, t));
  assert_int_equal(jx_checkpoint_latest(dir), 7);
  jx_tree *back = jx_checkpoint_load(dir, 7, NULL);
  assert_non_null(back);
  expect3(jx_tree_get(back, "w"), 1, 2, 3);
  /* an array that carries the earlier error still fails the save */
  jx_tree_set(t, "bad", jx_add(vec(1, 2, 3), jx_zeros(JX_F32, JX_SHAPE(2))));
  assert_int_not_equal(jx_checkpoint_save(dir, 8, t), JX_OK);
  assert_int_equal(jx_checkpoint_latest(dir), 7);
  assert_stale_error_kept();
  jx_tree_release(back);
  jx_tree_release(t);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

static void data_loaders(void **state) {
  (void)state;
  jx_array *rows = jx_reshape(jx_arange(JX_F32, 0, 12, 1), JX_SHAPE(4, 3));
  jx_dataset *d = jx_dataset_from_arrays(1, &rows);
  jx_loader_options o = {.batch = 2};
  leave_stale_error();
  jx_loader *l = jx_loader_create(d, &o);
  assert_non_null(l);
  jx_array *out[1];
  check_ok(jx_loader_next(l, out));
  float got[6];
  check_ok(jx_read(out[0], got, sizeof got));
  for (int i = 0; i < 6; i++) assert_true(got[i] == (float)i);
  assert_stale_error_kept();
  jx_loader_release(l);
  jx_dataset_release(d);
}

/* A later call that fails says so by its own result; the message stays the
 * thread's first error until jx_clear_error. */
static void a_later_failure_reports_itself(void **state) {
  (void)state;
  leave_stale_error();
  jx_fn *f = jx_fn_create("twice", 1, 1, twice, NULL);
  jx_array *out[1];
  assert_int_equal(jx_call(f, NULL, out), JX_ERR_INVALID_ARGUMENT);
  assert_true(jx_is_poisoned(out[0]));
  assert_true(jx_is_poisoned(jx_reshape(vec(1, 2, 3), JX_SHAPE(2, 2))));
  assert_stale_error_kept();
  jx_fn_release(f);
}

/* A body that clears errors clears only those of the call it runs in. */
static void clearing_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_clear_error();
  assert_int_equal(jx_last_status(), JX_OK);
  out[0] = jx_mul(in[0], jx_scalar(JX_F32, 2));
}

static void clearing_inside_a_call(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("clearing", 1, 1, clearing_body, NULL);
  leave_stale_error();
  jx_array *x = vec(1, 2, 3), *out[1];
  check_ok(jx_call(f, &x, out));
  expect3(out[0], 2, 4, 6);
  assert_stale_error_kept();
  jx_fn_release(f);
}

int main(void) {
  jx_set_cpu_device_count(2);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(eager_ops, setup, teardown),
      cmocka_unit_test_setup_teardown(jit, setup, teardown),
      cmocka_unit_test_setup_teardown(grad_vjp_jvp, setup, teardown),
      cmocka_unit_test_setup_teardown(vmap, setup, teardown),
      cmocka_unit_test_setup_teardown(control_flow, setup, teardown),
      cmocka_unit_test_setup_teardown(shard_map_pmap, setup, teardown),
      cmocka_unit_test_setup_teardown(optimizers, setup, teardown),
      cmocka_unit_test_setup_teardown(train_step, setup, teardown),
      cmocka_unit_test_setup_teardown(checkpoints, setup, teardown),
      cmocka_unit_test_setup_teardown(data_loaders, setup, teardown),
      cmocka_unit_test_setup_teardown(a_later_failure_reports_itself, setup, teardown),
      cmocka_unit_test_setup_teardown(clearing_inside_a_call, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
