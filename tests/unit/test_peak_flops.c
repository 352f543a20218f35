/* The peak FLOP/s behind MFU (jx_peak_flops): JX_PEAK_FLOPS overrides the
 * measurement; the measured peak is at least the GEMM throughput measured
 * beside it (no kernel beats the FMA units), so MFU of that GEMM lies in
 * (0, 1]; the figure is cached per machine, so a second call reads it
 * instead of measuring again. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "../../src/debug/peak_flops.h"

static char cache_dir[64];

/* Every test starts with an empty cache directory of its own and no override. */
static int fresh_cache(void **state) {
  (void)state;
  snprintf(cache_dir, sizeof cache_dir, "/tmp/jx_peak_XXXXXX");
  if (!mkdtemp(cache_dir)) return -1;
  setenv("JX_CACHE_DIR", cache_dir, 1);
  unsetenv("JX_PEAK_FLOPS");
  return 0;
}

static int remove_cache(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void env_overrides_measurement(void **state) {
  (void)state;
  int64_t before = jx_peak_flops_measurements();
  setenv("JX_PEAK_FLOPS", "1.5e12", 1);
  assert_true(jx_peak_flops() == 1.5e12);
  assert_int_equal(jx_peak_flops_measurements(), before);
  /* not a number: measured instead (with a message), never 0 or garbage */
  setenv("JX_PEAK_FLOPS", "fast", 1);
  double measured = jx_peak_flops();
  assert_true(measured > 0 && measured != 1.5e12);
  assert_int_equal(jx_peak_flops_measurements(), before + 1);
}

static void peak_bounds_gemm_throughput(void **state) {
  (void)state;
  double peak = jx_peak_flops(), gemm = jx_gemm_flops();
  double mfu = gemm / peak;
  if (!(mfu > 0 && mfu <= 1)) print_error("peak %.3e FLOP/s, GEMM %.3e FLOP/s\n", peak, gemm);
  assert_true(mfu > 0);
  assert_true(mfu <= 1);
}

static void second_call_reads_the_cache(void **state) {
  (void)state;
  int64_t before = jx_peak_flops_measurements();
  double first = jx_peak_flops();
  assert_int_equal(jx_peak_flops_measurements(), before + 1);
  double second = jx_peak_flops();
  assert_int_equal(jx_peak_flops_measurements(), before + 1);
  assert_true(second == first);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(env_overrides_measurement, fresh_cache, remove_cache),
      cmocka_unit_test_setup_teardown(peak_bounds_gemm_throughput, fresh_cache, remove_cache),
      cmocka_unit_test_setup_teardown(second_call_reads_the_cache, fresh_cache, remove_cache),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
