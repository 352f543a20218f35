/* The layers that plug into lower ones at load do so in a static link too
 * (CMakeLists.txt: JX_STARTUP_SYMBOLS), though this program names nothing
 * in their installers' files: JX_DEBUG_NANS=1 from the environment (set by
 * ctest) makes a NaN an error (debug/tools.c), relu's custom JVP can be
 * made (transform/install.c), and an eager op on sharded arrays stays
 * sharded (parallel/install.c). Oracles: the error JAX's jax_debug_nans
 * raises, max(x, 0), and 2x laid out as x is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>
#include <jx/jx.h>
#include <jx/parallel.h>

#include "test_util.h"

static jx_mesh *mesh; /* 2: "x" */

static void nans_are_errors_from_the_environment(void **state) {
  (void)state;
  jx_array *y = jx_log(jx_full(JX_F32, JX_SHAPE(3), -1.0));
  assert_true(jx_is_poisoned(y));
  assert_error_has("JX_DEBUG_NANS: log produced NaN");
}

static void custom_jvp_ops_are_made(void **state) {
  (void)state;
  float got[4];
  check_ok(jx_read(jx_relu(jx_arange(JX_F32, -2, 2, 1)), got, sizeof got));
  const float want[4] = {0, 0, 0, 1};
  assert_memory_equal(got, want, sizeof got);
}

static void eager_ops_follow_sharded_data(void **state) {
  (void)state;
  jx_sharding *s = jx_sharding_create(mesh, "x");
  assert_non_null(s);
  jx_array *x = jx_device_put(jx_arange(JX_F32, 0, 4, 1), s);
  jx_array *y = jx_add(x, x);
  jx_sharding *got = jx_sharding_of(y);
  if (!got) fail_msg("the sum is not sharded: %s", jx_last_error());
  assert_string_equal(jx_sharding_spec(got), jx_sharding_spec(s));
  float v[4];
  check_ok(jx_read(y, v, sizeof v));
  const float want[4] = {0, 2, 4, 6};
  assert_memory_equal(v, want, sizeof v);
}

int main(void) {
  jx_set_cpu_device_count(2);
  mesh = jx_mesh_create(JX_SHAPE(2), (const char *[]){"x"});
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(nans_are_errors_from_the_environment, setup, teardown),
      cmocka_unit_test_setup_teardown(custom_jvp_ops_are_made, setup, teardown),
      cmocka_unit_test_setup_teardown(eager_ops_follow_sharded_data, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
