/* The driver a test of the CUDA executor runs on: the fake one
 * (JX_CUDA_FAKE_DRIVER: device memory is host memory, kernels run in
 * tests/cuda_emu's emulator), or with --real the machine's (GPU checks). */
#ifndef JX_TESTS_CUDA_TEST_DRIVER_H
#define JX_TESTS_CUDA_TEST_DRIVER_H

#include <stdio.h>
#include <stdlib.h>

#include "compile/async_dispatch.h"
#include "cuda/cuda_device.h"
#include "cuda_emu/cuda_emu_runner.h"
#include "test_util.h"

/* Points jx at the driver. Returns -1 when the test goes on, else its exit
 * code: 0 when it is skipped (no C++ compiler for the emulator, or no GPU
 * with --real), 1 when the fake driver did not load (it always must). */
static inline int cuda_test_driver(const char *test, int real_driver) {
  if (!real_driver) {
    if (!cuda_emu_available()) {
      printf("%s: skipped: %s (the fake driver runs kernels through it)\n", test,
             cuda_emu_missing());
      return 0;
    }
    setenv("JX_CUDA_DRIVER_PATH", JX_CUDA_FAKE_DRIVER, 1);
    setenv("JX_CUDA_MODULE_SOURCE", "1", 1);
  }
  if (jx_cuda_device_count() == 0) {
    printf("%s: skipped: %s\n", test, jx_cuda_status());
    return real_driver ? 0 : 1;
  }
  return -1;
}

/* Device 0's bytes handed out by its allocator, once every queued run has
 * ended (a jitted call may return before its run does: async dispatch). */
static inline size_t cuda_test_bytes_in_use(void) {
  jx_dispatch_wait_all();
  jx_cuda_device *d = NULL;
  check_ok(jx_cuda_device_open(0, &d));
  return jx_cuda_allocator_stats(d->memory).in_use;
}

/* The CPU's output want and CUDA's got, of one shape and dtype, read into
 * host buffers *a and *b (malloc'ed): their size in bytes. */
static inline size_t cuda_test_read_pair(jx_array *want, jx_array *got, char **a, char **b) {
  assert_true(jx_shape_equal(jx_shape_of(want), jx_shape_of(got)));
  assert_int_equal(jx_dtype_of(want), jx_dtype_of(got));
  size_t bytes = (size_t)jx_shape_numel(jx_shape_of(want)) * jx_dtype_size(jx_dtype_of(want));
  *a = malloc(bytes + 1);
  *b = malloc(bytes + 1);
  assert_non_null(*a);
  assert_non_null(*b);
  check_ok(jx_read(want, *a, bytes));
  check_ok(jx_read(got, *b, bytes));
  return bytes;
}

#endif
