/* Async dispatch: jx_call of a jitted function returns before its run ends
 * (shown without timing: the run waits for an input that the test makes
 * after the call returned), results equal the synchronous ones
 * (JX_ASYNC_DISPATCH=0), and a run's error surfaces at jx_read and
 * jx_block_until_ready, also through a later call that reads its result.
 * The hand-offs' spinning (base/spin.h) stops at once where it would not
 * pay: after long waits, and while the thread pool holds every CPU.
 * (bench_dispatch times a blocked call.) */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "../../src/array/array.h"
#include "../../src/base/memstats.h"
#include "../../src/base/spin.h"
#include "../../src/base/threadpool.h"
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
  jx_array_set_pending(x, input_done);
  sem_init(&test_done, 0, 0);
  pthread_t dog;
  assert_int_equal(pthread_create(&dog, NULL, watchdog, NULL), 0);
  check_ok(jx_call(jf, &x, &out)); /* queued: its run waits for x */
  assert_non_null(jx_array_pending(out));
  assert_false(jx_pending_done(jx_array_pending(out))); /* returned before the run ended */
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
      if (mode && r == 0) assert_non_null(jx_array_pending(out[0]));
      if (!mode) assert_null(jx_array_pending(out[0]));
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

/* ---- spinning ---- */
static int never_ready(const void *polls) {
  atomic_fetch_add((atomic_int *)polls, 1);
  return 0;
}

static int ready_after_100_polls(const void *polls) {
  return atomic_fetch_add((atomic_int *)polls, 1) >= 100;
}

/* A site whose recent waits were long sleeps at once (one look at the
 * condition, no polling); one whose waits were short polls, unless the
 * machine has no free core now, and not for long. */
static void spin_only_after_short_waits(void **state) {
  (void)state;
  jx_spin_site site = {0};
  atomic_int polls = 0;
  for (int i = 0; i < 8; i++) jx_spin_note(&site, 10 * (int64_t)JX_SPIN_MAX_NS);
  assert_false(jx_spin_until(&site, never_ready, &polls));
  assert_int_equal(atomic_load(&polls), 1);
  for (int i = 0; i < 32; i++) jx_spin_note(&site, 2000);
  atomic_store(&polls, 0);
  int64_t t0 = jx_now_ns();
  if (jx_spin_until(&site, ready_after_100_polls, &polls)) /* else no free core now */
    assert_int_equal(atomic_load(&polls), 101);
  assert_false(jx_spin_until(&site, never_ready, &polls));
  /* bounded by the budget (a preemption of the test may add to it) */
  assert_true(jx_now_ns() - t0 < 1000000000);
}

/* While jx_parallel_for runs on as many threads as there are CPUs, the
 * pool says so, and a hand-off does not spin: every piece looks once and
 * gives up. (Under load from other processes the caller runs every piece
 * itself, the pool idle.) */
static atomic_int pieces_that_spun, pieces_unseen, pieces_inline;
static long cpus;

static void poll_in_piece(void *short_waits, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i++) {
    atomic_int polls = 0;
    jx_spin_until(short_waits, never_ready, &polls);
    if (atomic_load(&polls) > 1) atomic_fetch_add(&pieces_that_spun, 1);
    if (jx_pool_busy_threads() == 0)
      atomic_fetch_add(&pieces_inline, 1);
    else if (jx_pool_busy_threads() < cpus)
      atomic_fetch_add(&pieces_unseen, 1);
  }
}

static void no_spin_while_the_pool_holds_every_cpu(void **state) {
  (void)state;
  cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 2 || jx_pool_threads() < cpus) skip(); /* the pool leaves a core free */
  jx_spin_site short_waits = {0};
  for (int i = 0; i < 8; i++) jx_spin_note(&short_waits, 1000);
  atomic_store(&pieces_that_spun, 0);
  jx_parallel_for(4 * jx_pool_threads(), 1, poll_in_piece, &short_waits);
  assert_int_equal(atomic_load(&pieces_that_spun), 0);
  if (atomic_load(&pieces_inline) == 4 * jx_pool_threads()) skip(); /* no room: all inline */
  assert_int_equal(atomic_load(&pieces_unseen), 0);
  assert_int_equal(jx_pool_busy_threads(), 0); /* and not after */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(call_returns_before_the_run_ends, setup, teardown),
      cmocka_unit_test_setup_teardown(results_equal_synchronous, setup, teardown),
      cmocka_unit_test_setup_teardown(run_errors_surface_when_read, setup, teardown),
      cmocka_unit_test(spin_only_after_short_waits),
      cmocka_unit_test(no_spin_while_the_pool_holds_every_cpu),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
