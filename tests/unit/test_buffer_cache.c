/* The process's cache of released buffers (src/array/array.c): a released
 * buffer of 256 B..64 MiB is handed to the next allocation of its size class
 * on any thread, small and huge ones are not kept, and jx_shutdown empties
 * it. Run under AddressSanitizer with detect_leaks=1, this also checks that
 * nothing cached is leaked. */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>
#include <pthread.h>
#include <string.h>
#include <cmocka.h>

#include "array/array.h"

static void *data_of(jx_array *a) { return jx_array_data(a); }

/* Allocates n bytes of u8 in a scope, notes its storage, ends the scope. */
static void *alloc_release(int64_t n) {
  jx_scope_begin();
  jx_array *a = jx_zeros(JX_U8, JX_SHAPE(n));
  assert_false(jx_is_poisoned(a));
  void *p = data_of(a);
  jx_scope_end();
  return p;
}

/* The storage a new n-byte array of ones gets (checked, then released). */
static void *next_storage(int64_t n) {
  jx_scope_begin();
  jx_array *a = jx_ones(JX_U8, JX_SHAPE(n));
  assert_false(jx_is_poisoned(a));
  unsigned char *d = data_of(a);
  assert_int_equal(d[0], 1);
  assert_int_equal(d[n - 1], 1);
  jx_scope_end();
  return d;
}

static void reuses_within_a_class(void **state) {
  (void)state;
  jx_scope_begin();
  jx_buffer_cache_clear();
  void *p = alloc_release(1000000);
  /* 1,000,100 bytes fall in the same class (quarter steps: (786432, 1048576]) */
  jx_array *b = jx_zeros(JX_U8, JX_SHAPE(1000100));
  assert_ptr_equal(data_of(b), p);
  /* the reused memory is written in full: zeros, whatever it held */
  unsigned char *d = data_of(b);
  for (int64_t i = 0; i < 1000100; i += 4099) assert_int_equal(d[i], 0);
  /* a buffer of another class does not take it */
  jx_array *c = jx_zeros(JX_U8, JX_SHAPE(3000000));
  assert_ptr_not_equal(data_of(c), p);
  jx_scope_end();
}

static void repeated_shapes_reuse(void **state) {
  (void)state;
  jx_buffer_cache_clear();
  void *first[2] = {0};
  for (int it = 0; it < 5; it++) {
    jx_scope_begin();
    jx_array *x = jx_ones(JX_F32, JX_SHAPE(512, 512)); /* 1 MiB each */
    jx_array *y = jx_add(x, x);
    float v;
    assert_int_equal(jx_read(jx_slice(y, JX_SHAPE(3, 4), JX_SHAPE(4, 5), JX_SHAPE()), &v, 4),
                     JX_OK);
    assert_true(v == 2.0f);
    if (it == 0)
      first[0] = data_of(x), first[1] = data_of(y);
    else {
      /* the same two blocks come back, in some order */
      void *px = data_of(x), *py = data_of(y);
      assert_true(px == first[0] || px == first[1]);
      assert_true(py == first[0] || py == first[1]);
    }
    jx_scope_end();
  }
}

/* The smallest and the largest cached classes: (256 B, 320 B] and (56 MiB, 64 MiB];
 * a scan step's f32[8,64] (2 KiB) is cached. */
static void class_bounds(void **state) {
  (void)state;
  jx_buffer_cache_clear();
  void *p = alloc_release(257);
  assert_ptr_equal(next_storage(320), p);
  void *s = alloc_release(2048);
  assert_ptr_equal(next_storage(2000), s);
  void *q = alloc_release((int64_t)64 << 20);
  assert_ptr_equal(next_storage(((int64_t)64 << 20) - 1000), q);
  /* above 64 MiB nothing is kept; two in a row still work */
  alloc_release((int64_t)65 << 20);
  next_storage((int64_t)65 << 20);
}

/* The async dispatch thread's pattern: one thread releases what another
 * allocates next. */
static void *other_thread(void *arg) {
  void **seen = arg;
  seen[1] = alloc_release(1000000); /* the main thread's block, released again here */
  jx_shutdown();                    /* this thread's scopes (and the cache) */
  return NULL;
}

static void threads_share_one_cache(void **state) {
  (void)state;
  jx_buffer_cache_clear();
  void *seen[2] = {alloc_release(1000000), NULL};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, other_thread, seen), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_ptr_equal(seen[1], seen[0]);
}

static void bounded_per_class(void **state) {
  (void)state;
  jx_buffer_cache_clear();
  enum { N = JX_BUFFER_CLASS_KEEP + 8 };
  void *mine[N];
  jx_scope_begin();
  for (int i = 0; i < N; i++) mine[i] = data_of(jx_zeros(JX_U8, JX_SHAPE(100000)));
  jx_scope_end(); /* released in order: the first KEEP are kept, the rest freed */
  jx_scope_begin();
  int reused = 0;
  for (int i = 0; i < N; i++) {
    void *d = data_of(jx_zeros(JX_U8, JX_SHAPE(100000)));
    if (i < JX_BUFFER_CLASS_KEEP)
      reused += d == mine[JX_BUFFER_CLASS_KEEP - 1 - i]; /* newest first */
  }
  assert_int_equal(reused, JX_BUFFER_CLASS_KEEP);
  jx_scope_end();
}

static void shutdown_empties(void **state) {
  (void)state;
  alloc_release(1000000);
  jx_shutdown(); /* frees the cached block (the leak checker would see it otherwise) */
  next_storage(1000000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reuses_within_a_class), cmocka_unit_test(repeated_shapes_reuse),
      cmocka_unit_test(class_bounds),          cmocka_unit_test(threads_share_one_cache),
      cmocka_unit_test(bounded_per_class),     cmocka_unit_test(shutdown_empties),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
