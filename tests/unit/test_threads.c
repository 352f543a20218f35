/* Threads, as jx.h's contract states them: jx_shutdown on one thread while
 * others call jitted functions lets every call end with its right result
 * (a call queued while the dispatch thread stopped used to wait forever);
 * jx's own threads (the checkpoint writer, the data loader) end without
 * stopping the dispatch thread, so a queued run that is still waiting stays
 * queued; functions traced and kernels run on several threads at once give
 * each thread its own right answer. scripts/test.sh also runs this under
 * ThreadSanitizer, which fails on any data race. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "../../src/array/array.h"
#include "test_util.h"

enum { THREADS = 3, CALLS = 200, LEN = 8, DEADLINE_S = 60 };

static void affine_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(in[0], jx_scalar(JX_F32, 2)), jx_scalar(JX_F32, 1));
}

static struct timespec deadline(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += DEADLINE_S;
  return t;
}

/* Joins t, or fails the test when it has not ended by `until` (a hang then
 * fails instead of blocking the suite). */
static void join_or_fail(pthread_t t, struct timespec until, const char *what) {
  int rc = pthread_timedjoin_np(t, NULL, &until);
  if (rc == ETIMEDOUT) fail_msg("%s did not end within %d s", what, DEADLINE_S);
  assert_int_equal(rc, 0);
}

/* ---- jx_shutdown on one thread, jitted calls on the others ---- */
typedef struct {
  jx_fn *jf;
  int id;
  int wrong; /* calls that failed or gave a wrong value */
  char error[256];
  atomic_int *running;
} caller;

static void *call_repeatedly(void *arg) {
  caller *c = arg;
  for (int k = 0; k < CALLS; k++) {
    jx_scope_begin();
    float v[LEN], got[LEN];
    for (int i = 0; i < LEN; i++) v[i] = (float)(c->id * 1000 + k + i);
    jx_array *x = jx_array_from(JX_F32, JX_SHAPE(LEN), v), *out = NULL;
    jx_status st = jx_call(c->jf, &x, &out);
    if (!st) st = jx_read(out, got, sizeof got);
    for (int i = 0; i < LEN && !st; i++)
      if (got[i] != v[i] * 2 + 1) st = JX_ERR_INTERNAL;
    if (st && !c->wrong++) snprintf(c->error, sizeof c->error, "%s", jx_last_error());
    jx_clear_error();
    jx_scope_end();
  }
  jx_thread_end();
  atomic_fetch_sub(c->running, 1);
  return NULL;
}

static void shutdown_while_other_threads_call(void **state) {
  (void)state;
  setenv("JX_ASYNC_DISPATCH", "1", 1);
  jx_fn *f = jx_fn_create("affine", 1, 1, affine_body, NULL), *jf = jx_jit(f, NULL);
  jx_scope_begin();
  jx_array *one = jx_zeros(JX_F32, JX_SHAPE(LEN)), *out = NULL;
  check_ok(jx_call(jf, &one, &out)); /* compiled before the threads start */
  check_ok(jx_block_until_ready(out));
  jx_scope_end();
  atomic_int running = THREADS;
  caller c[THREADS];
  pthread_t t[THREADS];
  for (int k = 0; k < THREADS; k++) {
    c[k] = (caller){.jf = jf, .id = k, .running = &running};
    assert_int_equal(pthread_create(&t[k], NULL, call_repeatedly, &c[k]), 0);
  }
  int stops = 0;
  struct timespec until = deadline(), now;
  do { /* stops the dispatch thread again and again */
    jx_shutdown();
    stops++;
    clock_gettime(CLOCK_REALTIME, &now);
  } while (atomic_load(&running) > 0 && now.tv_sec < until.tv_sec);
  for (int k = 0; k < THREADS; k++) {
    join_or_fail(t[k], until,
                 "a thread calling a jitted function while another called jx_shutdown");
    if (c[k].wrong) fprintf(stderr, "thread %d: %d calls failed: %s\n", k, c[k].wrong, c[k].error);
    assert_int_equal(c[k].wrong, 0);
  }
  assert_true(stops > 0);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* ---- a queued run held until the test lets it go ----
 * Its input is a pending array that the test completes; a watchdog fails
 * the input after DEADLINE_S, so a thread that waits for the run (the old
 * writer and loader did, inside jx_shutdown) ends the test instead of
 * hanging it. */
typedef struct {
  jx_fn *f, *jf;
  jx_array *x, *out, *value;
  jx_pending *input_done;
  sem_t released;
  pthread_t dog;
} held_run;

static void *watchdog(void *arg) {
  held_run *h = arg;
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += DEADLINE_S;
  while (sem_timedwait(&h->released, &t) != 0)
    if (errno != EINTR) {
      jx_pending_finish(h->input_done, JX_ERR_INTERNAL, "the test's input was never made");
      break;
    }
  return NULL;
}

static void hold_run(held_run *h) {
  h->f = jx_fn_create("affine", 1, 1, affine_body, NULL);
  h->jf = jx_jit(h->f, NULL);
  float v[LEN];
  for (int i = 0; i < LEN; i++) v[i] = (float)(i - 3);
  h->value = jx_array_from(JX_F32, JX_SHAPE(LEN), v);
  check_ok(jx_call(h->jf, &h->value, &h->out)); /* compiled */
  check_ok(jx_block_until_ready(h->out));
  h->x = jx_array_unbacked(JX_F32, JX_SHAPE(LEN), 0);
  h->input_done = jx_pending_new();
  assert_non_null(h->input_done);
  jx_pending_retain(h->input_done);
  jx_array_set_pending(h->x, h->input_done);
  sem_init(&h->released, 0, 0);
  assert_int_equal(pthread_create(&h->dog, NULL, watchdog, h), 0);
  check_ok(jx_call(h->jf, &h->x, &h->out)); /* queued: its run waits for x */
  assert_non_null(jx_array_pending(h->out));
}

/* Lets the run go (x takes value's buffer) and checks its result. */
static void release_run(held_run *h) {
  atomic_fetch_add(&h->value->buf->refs, 1);
  __atomic_store_n(&h->x->buf, h->value->buf, __ATOMIC_RELEASE);
  jx_pending_finish(h->input_done, JX_OK, NULL);
  sem_post(&h->released);
  pthread_join(h->dog, NULL);
  float got[LEN];
  check_ok(jx_read(h->out, got, sizeof got));
  for (int i = 0; i < LEN; i++) assert_true(got[i] == (float)(i - 3) * 2 + 1);
  jx_pending_release(h->input_done);
  sem_destroy(&h->released);
  jx_fn_release(h->jf);
  jx_fn_release(h->f);
}

static void library_threads_leave_the_dispatcher_running(void **state) {
  (void)state;
  setenv("JX_ASYNC_DISPATCH", "1", 1);
  held_run h;
  hold_run(&h);

  /* a background checkpoint save: its writer thread ends before wait returns */
  char dir[256];
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/jx_threads_XXXXXX", tmp ? tmp : "/tmp");
  assert_non_null(mkdtemp(dir));
  jx_tree *t = jx_tree_create();
  jx_tree_set(t, "w", jx_arange(JX_F32, 0, 6, 1));
  jx_checkpoint_job *job = jx_checkpoint_save_async(dir, 1, t);
  assert_non_null(job);
  check_ok(jx_checkpoint_wait(job));
  assert_false(jx_pending_done(jx_array_pending(h.out))); /* the run still waits, still queued */

  /* a data loader: its producer thread ends inside release */
  jx_array *examples = jx_arange(JX_F32, 0, 16, 1);
  jx_dataset *d = jx_dataset_from_arrays(1, &examples);
  jx_loader *l = jx_loader_create(d, &(jx_loader_options){.batch = 4});
  assert_non_null(l);
  jx_array *batch = NULL;
  check_ok(jx_loader_next(l, &batch));
  float first[4];
  check_ok(jx_read(batch, first, sizeof first));
  for (int i = 0; i < 4; i++) assert_true(first[i] == (float)i);
  jx_loader_release(l);
  jx_dataset_release(d);
  assert_false(jx_pending_done(jx_array_pending(h.out)));

  release_run(&h);
  jx_tree *back = jx_checkpoint_load(dir, 1, NULL);
  assert_non_null(back);
  float w[6];
  check_ok(jx_read(jx_tree_get(back, "w"), w, sizeof w));
  for (int i = 0; i < 6; i++) assert_true(w[i] == (float)i);
  jx_tree_release(back);
  jx_tree_release(t);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* ---- tracing and kernels on several threads at once ----
 * Each thread traces its own function (the tracer's location hook is set by
 * every trace and read by every located call), runs it eagerly and jitted,
 * and adds arrays large enough to be split over the thread pool. */
enum { BIG = 1 << 18 };

static void scaled_body(void *ctx, jx_array *const *in, jx_array **out) {
  float s = *(const float *)ctx;
  out[0] = jx_sum(jx_mul(in[0], jx_scalar(JX_F32, s)), JX_AXES(), 0);
}

typedef struct {
  float scale;
  int wrong;
} tracer_job;

static void *trace_and_run(void *arg) {
  tracer_job *j = arg;
  for (int round = 0; round < 4; round++) {
    jx_scope_begin();
    char name[32];
    snprintf(name, sizeof name, "scaled%d", round);
    jx_fn *f = jx_fn_create(name, 1, 1, scaled_body, &j->scale), *jf = jx_jit(f, NULL);
    jx_array *x = jx_arange(JX_F32, 0, LEN + round, 1), *eager = NULL, *jitted = NULL;
    jx_call(f, &x, &eager);
    jx_call(jf, &x, &jitted);
    int n = LEN + round; /* sum of 0 .. n - 1, scaled: exact in f32 */
    double want = j->scale * (double)n * (n - 1) / 2;
    if (jx_item(eager) != want || jx_item(jitted) != want) j->wrong++;
    /* an elementwise op the thread pool splits: every element 3 */
    jx_array *big = jx_add(jx_zeros(JX_F32, JX_SHAPE(BIG)), jx_scalar(JX_F32, 3));
    if (jx_item(jx_sum(big, JX_AXES(), 0)) != 3.0 * BIG) j->wrong++;
    if (jx_last_status()) j->wrong++;
    jx_clear_error();
    jx_fn_release(jf);
    jx_fn_release(f);
    jx_scope_end();
  }
  jx_thread_end();
  return NULL;
}

static void tracing_on_several_threads_at_once(void **state) {
  (void)state;
  tracer_job jobs[THREADS];
  pthread_t t[THREADS];
  for (int k = 0; k < THREADS; k++) {
    jobs[k] = (tracer_job){.scale = (float)(k + 1)};
    assert_int_equal(pthread_create(&t[k], NULL, trace_and_run, &jobs[k]), 0);
  }
  struct timespec until = deadline();
  for (int k = 0; k < THREADS; k++) {
    join_or_fail(t[k], until, "a thread tracing and running functions");
    assert_int_equal(jobs[k].wrong, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      /* no fixture scope: the test's own jx_shutdown calls end every scope of the thread */
      cmocka_unit_test(shutdown_while_other_threads_call),
      cmocka_unit_test_setup_teardown(library_threads_leave_the_dispatcher_running, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(tracing_on_several_threads_at_once, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
