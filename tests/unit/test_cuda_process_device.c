/* The CUDA device a process runs its unsharded programs on
 * (jx_cuda_process_device): the GPU its local rank picks when several
 * processes of the job share a host, else device 0. On tests/cuda_fake's
 * four-device driver (JX_FAKE_CUDA_DEVICES); the job is one process joined
 * through JX_COORDINATOR_ADDRESS, whose JX_LOCAL_PROCESS_ID/COUNT say where
 * it stands on its host. The same for CUDA meshes (cuda_mesh.h): local
 * process 1 of 2 with 2 devices runs them on CUDA devices 2 and 3, and with
 * 3 devices (3..5 of 4) its mesh does not fit, naming the counts. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "cuda/cuda_device.h"
#include "cuda/cuda_mesh.h"

static void join_as_local_process(const char *id, const char *count) {
  setenv("JX_COORDINATOR_ADDRESS", "127.0.0.1:1", 1);
  setenv("JX_NUM_PROCESSES", "1", 1);
  setenv("JX_PROCESS_ID", "0", 1);
  setenv("JX_LOCAL_PROCESS_ID", id, 1);
  setenv("JX_LOCAL_PROCESS_COUNT", count, 1);
  assert_int_equal(jx_distributed_initialize(NULL), JX_OK);
}

static void a_process_alone_takes_device_0(void **state) {
  (void)state;
  int ordinal = -1;
  assert_int_equal(jx_cuda_process_device(&ordinal), JX_OK);
  assert_int_equal(ordinal, 0);
}

static void local_process_1_of_2_takes_device_1(void **state) {
  (void)state;
  join_as_local_process("1", "2");
  int ordinal = -1;
  assert_int_equal(jx_cuda_process_device(&ordinal), JX_OK);
  assert_int_equal(ordinal, 1);
  jx_cuda_device *d = NULL;
  assert_int_equal(jx_cuda_device_open(ordinal, &d), JX_OK);
  assert_string_equal(d->info.name, "jx fake GPU 1");
  assert_int_equal(jx_distributed_shutdown(), JX_OK);
}

static void more_processes_than_gpus_is_a_clear_error(void **state) {
  (void)state;
  join_as_local_process("4", "5");
  int ordinal = -1;
  assert_int_equal(jx_cuda_process_device(&ordinal), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "5 processes of the job but 4 visible GPU(s)"));
  jx_clear_error();
  assert_int_equal(jx_distributed_shutdown(), JX_OK);
}

/* JX_NUM_CPU_DEVICES is read once per process: run with --mesh2 / --mesh3 */
static void meshes_run_on_the_local_ranks_gpus(int devices) {
  char n[8];
  snprintf(n, sizeof n, "%d", devices);
  setenv("JX_NUM_CPU_DEVICES", n, 1);
  join_as_local_process("1", "2");
  assert_int_equal(jx_local_device_count(), devices);
  assert_int_equal(jx_cuda_mesh_first_ordinal(), devices); /* GPUs d .. 2d-1 of 4 */
  jx_mesh *m = jx_mesh_create(JX_SHAPE(devices), (const char *[]){"i"});
  assert_non_null(m);
  char why[512] = "";
  int fits = jx_cuda_mesh_fits(m, why, sizeof why);
  if (devices == 2) {
    assert_int_equal(fits, 1);
  } else {
    assert_int_equal(fits, 0);
    assert_non_null(strstr(why, "has 3 devices of this process, up to CUDA device 5, but there "
                                "are 4 CUDA devices"));
  }
  jx_mesh_release(m);
  assert_int_equal(jx_distributed_shutdown(), JX_OK);
}
static void two_devices_run_on_gpus_2_and_3(void **state) {
  (void)state;
  meshes_run_on_the_local_ranks_gpus(2);
}
static void three_devices_do_not_fit(void **state) {
  (void)state;
  meshes_run_on_the_local_ranks_gpus(3);
}

int main(int argc, char **argv) {
  setenv("JX_CUDA_DRIVER_PATH", JX_NCCL_FAKE, 1);
  setenv("JX_FAKE_CUDA_DEVICES", "4", 1);
  if (argc > 1 && !strcmp(argv[1], "--crowded")) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(more_processes_than_gpus_is_a_clear_error)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  if (argc > 1 && !strcmp(argv[1], "--mesh2")) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(two_devices_run_on_gpus_2_and_3)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  if (argc > 1 && !strcmp(argv[1], "--mesh3")) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(three_devices_do_not_fit)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(a_process_alone_takes_device_0),
                                     cmocka_unit_test(local_process_1_of_2_takes_device_1)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
