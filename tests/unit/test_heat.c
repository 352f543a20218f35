/* The heat simulator of examples/heat_inverse.c (examples/heat.c, compiled
 * into this test): its rollout equals the NumPy reference
 * (tests/golden/gen_heat.py); split over 2, 4 and 8 devices (shard_map with
 * ppermute halos) it equals the unsharded one, values and gradients; the
 * gradient through the rollout passes jx_check_grads (finite differences);
 * a short inverse run lowers the loss and gives the same numbers on 1 and 4
 * devices. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "heat.h"
#include "test_util.h"

/* gen_heat.py's sizes */
static const heat_config GOLDEN = {
    .n = 16, .batch = 2, .steps = 4, .nobs = 3, .bumps = 2, .r = 0.1, .k0 = 0.5, .width = 0.25};
/* a small inverse problem */
static const heat_config SMALL = {
    .n = 16, .batch = 2, .steps = 5, .nobs = 2, .bumps = 2, .r = 0.1, .k0 = 0.5, .width = 0.25};

static double max_abs_diff(jx_array *a, jx_array *b) {
  if (jx_is_poisoned(a) || jx_is_poisoned(b)) fprintf(stderr, "%s\n", jx_last_error());
  assert_false(jx_is_poisoned(a));
  assert_false(jx_is_poisoned(b));
  jx_shape sa = jx_shape_of(a), sb = jx_shape_of(b);
  assert_int_equal(sa.rank, sb.rank);
  for (int d = 0; d < sa.rank; d++) assert_int_equal(sa.dims[d], sb.dims[d]);
  return jx_item(jx_max(jx_abs(jx_sub(a, b)), JX_AXES(), 0));
}

static void assert_close(jx_array *a, jx_array *b, double tol) {
  double d = max_abs_diff(a, b);
  if (!(d <= tol)) fprintf(stderr, "max abs difference %.3g > %.3g\n", d, tol);
  assert_true(d <= tol);
}

static jx_array *golden(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/heat/%s", JX_TEST_DATA, name);
  jx_array *a = jx_load_npy(path);
  if (jx_is_poisoned(a)) fprintf(stderr, "%s\n", jx_last_error());
  assert_false(jx_is_poisoned(a));
  return a;
}

static jx_array *rollout(heat_sim *s, jx_array *u0, jx_array *kappa) {
  jx_array *out;
  check_ok(jx_call(heat_rollout_fn(s), (jx_array *[]){u0, kappa}, &out));
  return out;
}

static void equals_numpy(void **state) {
  (void)state;
  jx_array *u0 = golden("u0.npy"), *kappa = golden("kappa.npy"), *want = golden("snapshots.npy");
  heat_sim *s = heat_sim_create(&GOLDEN, 0);
  assert_non_null(s);
  /* f64: the same operations in the same order as NumPy's */
  jx_array *got = rollout(s, u0, kappa);
  assert_int_equal(jx_dtype_of(got), JX_F64);
  assert_close(got, want, 1e-13);
  /* the simulation moved: a rollout that returned u0 would fail here */
  assert_true(max_abs_diff(want, jx_broadcast_to(u0, jx_shape_of(want))) > 0.1);
  /* f32 works in f32 */
  got = rollout(s, jx_astype(u0, JX_F32), jx_astype(kappa, JX_F32));
  assert_int_equal(jx_dtype_of(got), JX_F32);
  assert_close(jx_astype(got, JX_F64), want, 1e-5);
  heat_sim_release(s);
}

static void sharded_equals_unsharded(void **state) {
  (void)state;
  jx_array *u0 = golden("u0.npy"), *kappa = golden("kappa.npy"), *want = golden("snapshots.npy");
  heat_sim *plain = heat_sim_create(&SMALL, 0);
  assert_non_null(plain);
  int nb = SMALL.bumps * SMALL.bumps;
  jx_array *phi = heat_basis(&SMALL, JX_F64);
  jx_array *a = jx_array_from(JX_F64, JX_SHAPE(4), (double[]){0.3, 0.9, 0.1, 0.6});
  jx_array *obs = jx_mul(rollout(plain, u0, heat_kappa(&SMALL, a, phi)), jx_scalar(JX_F64, 1.1));
  jx_array *a1 = jx_full(JX_F64, JX_SHAPE(nb), 0.4), *ref[2];
  check_ok(jx_call(heat_value_and_grad_fn(plain), (jx_array *[]){a1, phi, u0, obs}, ref));
  assert_true(jx_item(jx_sum(jx_abs(ref[1]), JX_AXES(), 0)) > 1e-6);

  static const int devices[] = {2, 4, 8};
  for (int i = 0; i < 3; i++) {
    heat_sim *s = heat_sim_create(&GOLDEN, devices[i]);
    assert_non_null(s);
    int px, py;
    assert_true(heat_sim_mesh_shape(s, &px, &py));
    assert_int_equal(px * py, devices[i]);
    /* every element is computed by the same operations: equal to the bit */
    jx_array *got = rollout(s, u0, kappa);
    assert_non_null(jx_sharding_of(got));
    assert_close(got, want, 1e-13);
    heat_sim_release(s);

    s = heat_sim_create(&SMALL, devices[i]);
    jx_array *vg[2];
    check_ok(jx_call(heat_value_and_grad_fn(s), (jx_array *[]){a1, phi, u0, obs}, vg));
    /* the loss is a psum of per-block sums: another order of addition */
    assert_close(vg[0], ref[0], 1e-12 * fabs(jx_item(ref[0])));
    assert_close(vg[1], ref[1], 1e-10);
    heat_sim_release(s);
  }
  heat_sim_release(plain);
}

static void gradient_matches_finite_differences(void **state) {
  (void)state;
  heat_config c = SMALL;
  c.n = 8;
  c.steps = 3;
  jx_array *phi = heat_basis(&c, JX_F64), *u0 = heat_initial(&c, JX_F64, 3);
  jx_array *a = jx_array_from(JX_F64, JX_SHAPE(4), (double[]){0.3, 0.9, 0.1, 0.6});
  jx_array *obs = jx_mul(jx_full(JX_F64, JX_SHAPE(c.nobs, c.batch, c.n, c.n), 0.05),
                         jx_reshape(jx_arange(JX_F64, 0, c.n, 1), JX_SHAPE(c.n, 1)));
  for (int devices = 0; devices <= 4; devices += 4) {
    heat_sim *s = heat_sim_create(&c, devices);
    assert_non_null(s);
    /* JVPs against central differences, VJPs against the JVPs: through
     * both scans, the checkpointed step and (sharded) the ppermutes */
    check_ok(jx_check_grads(heat_loss_fn(s), (jx_array *[]){a, phi, u0, obs}, 1, 1e-6, 1e-5));
    heat_sim_release(s);
  }
}

typedef struct {
  int n;
  double loss[8];
} losses;

static void record(void *ctx, const heat_progress *p) {
  losses *l = ctx;
  if (l->n < 8) l->loss[l->n++] = p->loss;
}

static void short_inverse_run(void **state) {
  (void)state;
  int nb = SMALL.bumps * SMALL.bumps;
  jx_array *phi = heat_basis(&SMALL, JX_F32), *u0 = heat_initial(&SMALL, JX_F32, 0);
  jx_array *a_true = jx_array_from(JX_F32, JX_SHAPE(4), (float[]){0.3f, 0.9f, 0.1f, 0.6f});
  losses run[2] = {{0}, {0}};
  static const int devices[] = {1, 4};
  for (int i = 0; i < 2; i++) {
    heat_sim *s = heat_sim_create(&SMALL, devices[i]);
    assert_non_null(s);
    jx_array *obs = rollout(s, u0, heat_kappa(&SMALL, a_true, phi)), *a_fit;
    check_ok(heat_fit(s, phi, u0, obs, jx_zeros(JX_F32, JX_SHAPE(nb)), a_true, 4, 0.05, record,
                      &run[i], &a_fit));
    assert_int_equal(run[i].n, 5);
    for (int k = 1; k < 5; k++) assert_true(run[i].loss[k] < run[i].loss[k - 1]);
    assert_true(run[i].loss[4] < 0.5 * run[i].loss[0]);
    jx_release(a_fit);
    heat_sim_release(s);
  }
  for (int k = 0; k < 5; k++)
    assert_true(fabs(run[0].loss[k] - run[1].loss[k]) <= 1e-5 * run[0].loss[k]);
}

static void errors(void **state) {
  (void)state;
  heat_config c = GOLDEN;
  assert_null(heat_sim_create(&c, 3));
  assert_non_null(strstr(jx_last_error(), "a 16x16 grid does not split over a 3x1 mesh"));
  jx_clear_error();
  c.steps = 0;
  assert_null(heat_sim_create(&c, 0));
  assert_non_null(strstr(jx_last_error(), "heat_sim_create: bad configuration"));
  assert_non_null(strstr(jx_last_error(), "steps 0"));
  jx_clear_error();
  assert_null(heat_sim_create(&GOLDEN, 65));
  assert_non_null(strstr(jx_last_error(), "heat_sim_create: 65 devices (0 to 64)"));
  jx_clear_error();
}

int main(void) {
  if (jx_set_cpu_device_count(8)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(equals_numpy, setup, teardown),
      cmocka_unit_test_setup_teardown(sharded_equals_unsharded, setup, teardown),
      cmocka_unit_test_setup_teardown(gradient_matches_finite_differences, setup, teardown),
      cmocka_unit_test_setup_teardown(short_inverse_run, setup, teardown),
      cmocka_unit_test_setup_teardown(errors, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
