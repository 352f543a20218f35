/* Recursion and deep nesting of traced functions. A body that calls the
 * function being traced with the same input shapes would trace forever: it
 * fails with an error naming the function, the chain of calls and the
 * caller's file:line (eagerly, under jit, through another function).
 * Recursion on shrinking shapes ends and gives the exact sum; a chain of
 * nested calls past the limit fails with an error naming the function,
 * also on a thread with a 1 MiB stack, where the old unbounded descent
 * overflowed the stack. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"

/* ---- a function that calls the one in *ctx (itself, or its jit) ---- */
static void calls_slot(void *ctx, jx_array *const *in, jx_array **out) {
  jx_fn *callee = *(jx_fn **)ctx;
  jx_array *y = NULL;
  jx_call(callee, in, &y);
  out[0] = jx_add(y, jx_scalar(JX_F32, 1));
}

static jx_array *ones8(void) { return jx_add(jx_zeros(JX_F32, JX_SHAPE(8)), jx_scalar(JX_F32, 1)); }

static void self_call_is_an_error_eagerly(void **state) {
  (void)state;
  jx_fn *slot = NULL, *f = jx_fn_create("again", 1, 1, calls_slot, &slot);
  slot = f;
  jx_array *x = ones8(), *out = NULL;
  assert_int_equal(jx_call(f, &x, &out), JX_ERR_INVALID_ARGUMENT);
  assert_true(jx_is_poisoned(out));
  const char *msg = jx_last_error();
  assert_non_null(strstr(msg, "test_recursion.c:")); /* the body's jx_call */
  assert_non_null(strstr(msg, "('again' -> 'again')"));
  assert_error_has("'again' calls itself while it is being traced");
  /* the failed trace left nothing behind: the next call fails the same way */
  assert_int_equal(jx_call(f, &x, &out), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("'again' calls itself");
  jx_fn_release(f);
}

static void self_call_is_an_error_under_jit(void **state) {
  (void)state;
  jx_fn *slot = NULL, *f = jx_fn_create("again", 1, 1, calls_slot, &slot), *jf = jx_jit(f, NULL);
  jx_array *x = ones8(), *out = NULL;
  slot = jf; /* the body calls the jitted function that traces it */
  assert_int_equal(jx_call(jf, &x, &out), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("'jit(again)' calls itself while it is being traced, with the same input "
                   "shapes ('jit(again)' -> 'again' -> 'jit(again)')");
  slot = f; /* the body calls itself inside jit */
  assert_int_equal(jx_call(jf, &x, &out), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("'again' calls itself while it is being traced, with the same input shapes "
                   "('again' -> 'again'), so the trace would never end: a traced function "
                   "cannot recurse on values (use jx_while, jx_fori or jx_scan) (in jit of "
                   "'again')");
  jx_fn_release(jf);
  jx_fn_release(f);
}

static void mutual_recursion_is_an_error(void **state) {
  (void)state;
  jx_fn *to_pong = NULL, *to_ping = NULL;
  jx_fn *ping = jx_fn_create("ping", 1, 1, calls_slot, &to_pong);
  jx_fn *pong = jx_fn_create("pong", 1, 1, calls_slot, &to_ping);
  to_pong = pong;
  to_ping = ping;
  jx_array *x = ones8(), *out = NULL;
  assert_int_equal(jx_call(ping, &x, &out), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("'ping' calls itself while it is being traced, with the same input shapes "
                   "('ping' -> 'pong' -> 'ping')");
  jx_fn_release(ping);
  jx_fn_release(pong);
}

/* ---- recursion that ends: the sum of x by halves ---- */
static void sum_by_halves(void *ctx, jx_array *const *in, jx_array **out) {
  jx_fn *self = *(jx_fn **)ctx;
  int64_t n = jx_shape_of(in[0]).dims[0];
  if (n == 1) {
    out[0] = in[0];
    return;
  }
  jx_array *lo = jx_slice(in[0], JX_SHAPE(0), JX_SHAPE(n / 2), JX_SHAPE(1));
  jx_array *hi = jx_slice(in[0], JX_SHAPE(n / 2), JX_SHAPE(n), JX_SHAPE(1));
  jx_array *a = NULL, *b = NULL;
  jx_call(self, &lo, &a);
  jx_call(self, &hi, &b);
  out[0] = jx_add(a, b);
}

static void recursion_on_shrinking_shapes_ends(void **state) {
  (void)state;
  jx_fn *slot = NULL, *f = jx_fn_create("halves", 1, 1, sum_by_halves, &slot),
        *jf = jx_jit(f, NULL);
  jx_array *x = jx_arange(JX_F32, 1, 65, 1), *out = NULL; /* 1 .. 64 */
  slot = f;
  check_ok(jx_call(f, &x, &out));
  assert_int_equal(jx_ndim(out), 1);
  assert_true(jx_item(out) == 64.0 * 65.0 / 2);
  check_ok(jx_call(jf, &x, &out));
  assert_true(jx_item(out) == 64.0 * 65.0 / 2);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* ---- chains of nested calls: link k calls link k - 1; link 0 adds 1 ---- */
enum { LINKS = 5000 };
static jx_fn *links[LINKS];

static void link_body(void *ctx, jx_array *const *in, jx_array **out) {
  jx_fn **self = ctx;
  if (self == &links[0]) {
    out[0] = jx_add(in[0], jx_scalar(JX_F32, 1));
    return;
  }
  jx_array *y = NULL;
  jx_call(self[-1], in, &y);
  out[0] = jx_add(y, jx_scalar(JX_F32, 1));
}

static void make_links(void) {
  for (int k = 0; k < LINKS; k++) {
    char name[32];
    snprintf(name, sizeof name, "link%d", k);
    links[k] = jx_fn_create(name, 1, 1, link_body, &links[k]);
  }
}

static void release_links(void) {
  for (int k = 0; k < LINKS; k++) jx_fn_release(links[k]);
}

/* Calls link top - 1 (top links deep) on ones: JX_OK when every element
 * equals top + 1 (each link adds 1 to what its callee returned), or the
 * error's status. No cmocka asserts: it also runs on another thread. */
static jx_status call_chain(int top, int jit) {
  jx_fn *f = jit ? jx_jit(links[top - 1], NULL) : links[top - 1];
  jx_array *x = ones8(), *out = NULL;
  jx_status st = jx_call(f, &x, &out);
  float got[8];
  if (!st) st = jx_read(out, got, sizeof got);
  for (int i = 0; i < 8 && !st; i++)
    if (got[i] != (float)(top + 1)) st = JX_ERR_INTERNAL;
  if (jit) jx_fn_release(f);
  return st;
}

/* The error for a chain past the limit names the link where it stopped
 * (under jit, the jitted function is one more level). */
static void assert_depth_error(const char *msg, int jit) {
  const char *at = strstr(msg, "the limit is ");
  if (!at) fprintf(stderr, "error was: %s\n", msg);
  assert_non_null(at);
  int limit = atoi(at + strlen("the limit is "));
  assert_true(limit >= 100 && limit < LINKS);
  char want[128];
  /* link LINKS - 1 is traced at depth 0 (1 under jit) */
  int stopped = LINKS - 1 - limit + jit;
  snprintf(want, sizeof want,
           "'link%d' is called %d functions deep while being traced (called from 'link%d'", stopped,
           limit, stopped + 1);
  if (!strstr(msg, want)) fprintf(stderr, "error was: %s\n", msg);
  assert_non_null(strstr(msg, want));
}

static void deep_chains_are_bounded(void **state) {
  (void)state;
  make_links();
  check_ok(call_chain(100, 0));
  check_ok(call_chain(100, 1));
  assert_int_equal(call_chain(LINKS, 0), JX_ERR_INVALID_ARGUMENT);
  assert_depth_error(jx_last_error(), 0);
  jx_clear_error();
  assert_int_equal(call_chain(LINKS, 1), JX_ERR_INVALID_ARGUMENT);
  assert_depth_error(jx_last_error(), 1);
  jx_clear_error();
  release_links();
}

typedef struct {
  jx_status st;
  char msg[1024];
} chain_result;

static void *chain_on_thread(void *arg) {
  chain_result *r = arg;
  jx_scope_begin();
  r->st = call_chain(LINKS, 0);
  snprintf(r->msg, sizeof r->msg, "%s", jx_last_error());
  jx_scope_end();
  jx_thread_end();
  return NULL;
}

static void deep_chain_on_a_small_stack(void **state) {
  (void)state;
  make_links();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  pthread_t t;
  chain_result r = {0};
  assert_int_equal(pthread_create(&t, &attr, chain_on_thread, &r), 0);
  pthread_join(t, NULL);
  pthread_attr_destroy(&attr);
  assert_int_equal(r.st, JX_ERR_INVALID_ARGUMENT);
  assert_depth_error(r.msg, 0);
  release_links();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(self_call_is_an_error_eagerly, setup, teardown),
      cmocka_unit_test_setup_teardown(self_call_is_an_error_under_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(mutual_recursion_is_an_error, setup, teardown),
      cmocka_unit_test_setup_teardown(recursion_on_shrinking_shapes_ends, setup, teardown),
      cmocka_unit_test_setup_teardown(deep_chains_are_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(deep_chain_on_a_small_stack, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
