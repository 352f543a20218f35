/* Async dispatch: jx_call of a jitted function returns before its run ends
 * (shown without timing: the run waits for an input that the test makes
 * after the call returned), results equal the synchronous ones
 * (JX_ASYNC_DISPATCH=0), and a run's error surfaces at jx_read and
 * jx_block_until_ready, also through a later call that reads its result. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "../../src/array/array.h"
#include "../../src/base/memstats.h"
#include "test_util.h"

enum { N = 64 };

/* ---- an input still being made: a pending array the test completes ----
 * A synchronous jx_call would wait for it inside the call; a watchdog then
 * fails the input after 30 s, so a broken dispatch fails the test instead
 * of hanging it. */
static sem_t test_done;
static jx_pending *input_done;

static void *watchdog(void *arg) {
  (void)arg;
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += 30;
  while (sem_timedwait(&test_done, &t) != 0)
    if (errno != EINTR) {
      jx_pending_finish(input_done, JX_ERR_INTERNAL, "the test's input was never made");
      break;
    }
  return NULL;
}

static void affine_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(in[0], jx_scalar(JX_F32, 2)), jx_scalar(JX_F32, 1));
}

static void chain_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_tanh(jx_matmul(in[0], in[1]));
  out[0] = jx_add(jx_mul(h, h), in[0]);
  out[1] = jx_sum(h, JX_AXES(1), 0);
}

static jx_array *ramp(double scale) {
  static float v[N * N];
  for (int i = 0; i < N * N; i++) v[i] = (float)(scale * sin(0.01 * i));
  return jx_array_from(JX_F32, JX_SHAPE(N, N), v);
}

static void read_all(jx_array *a, float *dst) {
  check_ok(jx_read(a, dst, sizeof(float) * (size_t)jx_size(a)));
}

static void call_returns_before_the_run_ends(void **state) {
  (void)state;
  setenv("JX_ASYNC_DISPATCH", "1", 1);
  jx_fn *f = jx_fn_create("affine", 1, 1, affine_body, NULL), *jf = jx_jit(f, NULL);
  jx_array *value = ramp(1), *out = NULL;
  check_ok(jx_call(jf, &value, &out)); /* compiles (and runs once) */
  check_ok(jx_block_until_ready(out));
  /* x: f32[N, N] that a run still to end will make */
  jx_array *x = jx_array_unbacked(JX_F32, JX_SHAPE(N, N), 0);
  input_done = jx_pending_new();
  assert_non_null(input_done);
  jx_pending_retain(input_done);
  x->pending = input_done;
  sem_init(&test_done, 0, 0);
  pthread_t dog;
  assert_int_equal(pthread_create(&dog, NULL, watchdog, NULL), 0);
  check_ok(jx_call(jf, &x, &out)); /* queued: its run waits for x */
  assert_non_null(out->pending);
  assert_false(jx_pending_done(out->pending)); /* returned before the run ended */
  assert_null(out->buf);
  assert_int_equal(jx_ndim(out), 2); /* the shape is known already */
  /* x is made: its buffer is value's, as a dispatched run hands it over */
  atomic_fetch_add(&value->buf->refs, 1);
  __atomic_store_n(&x->buf, value->buf, __ATOMIC_RELEASE);
  jx_pending_finish(input_done, JX_OK, NULL);
  sem_post(&test_done);
  pthread_join(dog, NULL);
  float got[N * N], want[N * N], xv[N * N];
  check_ok(jx_block_until_ready(out));
  read_all(out, got);
  read_all(value, xv);
  for (int i = 0; i < N * N; i++) want[i] = xv[i] * 2.0f + 1.0f;
  assert_memory_equal(got, want, sizeof got);
  jx_pending_release(input_done);
  sem_destroy(&test_done);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* Three chained calls (each reads the last one's pending outputs) give the
 * synchronous results bit for bit. */
static void results_equal_synchronous(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("chain", 2, 2, chain_body, NULL), *jf = jx_jit(f, NULL);
  float got[2][N * N], want[2][N * N];
  for (int mode = 0; mode < 2; mode++) {
    setenv("JX_ASYNC_DISPATCH", mode ? "1" : "0", 1);
    jx_scope_begin();
    jx_array *a = ramp(1), *b = ramp(0.5), *out[2];
    for (int r = 0; r < 3; r++) {
      check_ok(jx_call(jf, (jx_array *[]){a, b}, out));
      if (mode && r == 0) assert_non_null(out[0]->pending);
      if (!mode) assert_null(out[0]->pending);
      a = out[0];
    }
    read_all(out[0], mode ? got[0] : want[0]);
    read_all(out[1], mode ? got[1] : want[1]);
    jx_scope_end();
  }
  assert_memory_equal(got[0], want[0], sizeof got[0]);
  assert_memory_equal(got[1], want[1], sizeof(float) * N);
  setenv("JX_ASYNC_DISPATCH", "1", 1);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* A run that runs out of memory: jx_call succeeds, the error comes at the
 * first read of its outputs, and of the outputs of a call that reads them. */
static void run_errors_surface_when_read(void **state) {
  (void)state;
  setenv("JX_ASYNC_DISPATCH", "1", 1);
  jx_fn *f = jx_fn_create("chain", 2, 2, chain_body, NULL), *jf = jx_jit(f, NULL);
  jx_array *a = ramp(1), *b = ramp(0.5), *out[2], *next[2];
  check_ok(jx_call(jf, (jx_array *[]){a, b}, out)); /* compiled; this run succeeds */
  check_ok(jx_block_until_ready(out[0]));
  jx_memory_stats ms = {0};
  check_ok(jx_memory_stats(0, &ms));
  jx_memstats_set_limit(-1, ms.live_bytes + 1024); /* no room for the run's results */
  check_ok(jx_call(jf, (jx_array *[]){a, b}, out));
  check_ok(jx_call(jf, (jx_array *[]){out[0], b}, next));
  float buf[N * N];
  assert_int_equal(jx_read(out[0], buf, sizeof buf), JX_ERR_OUT_OF_MEMORY);
  assert_non_null(strstr(jx_last_error(), "out of memory"));
  jx_clear_error();
  assert_int_equal(jx_block_until_ready(out[1]), JX_ERR_OUT_OF_MEMORY);
  jx_clear_error();
  assert_int_not_equal(jx_read(next[0], buf, sizeof buf), JX_OK);
  jx_clear_error();
  assert_true(isnan(jx_item(jx_sum(next[1], JX_AXES(), 0))));
  jx_clear_error();
  jx_memstats_set_limit(-1, 0);
  check_ok(jx_call(jf, (jx_array *[]){a, b}, out)); /* and it works again */
  check_ok(jx_block_until_ready(out[0]));
  jx_fn_release(jf);
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(call_returns_before_the_run_ends, setup, teardown),
      cmocka_unit_test_setup_teardown(results_equal_synchronous, setup, teardown),
      cmocka_unit_test_setup_teardown(run_errors_surface_when_read, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
