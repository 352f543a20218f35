/* Trees in JAX's order and several trees at once: jx_tree_flatten_sorted
 * and jx_tree_unflatten_sorted against jax.tree_util's leaf order, and
 * jx_tree_map_n as tree_map(f, a, b). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"

/* Leaf i holds the value i. JAX's order of the same nested dict:
 *   t = {'b': {'10': 0, '2': 1, 'x': 2}, 'a-c': 3, 'a': {'z': 4, 'b': 5}, 'B': 6, 'a_c': 7}
 *   jax.tree_util.tree_leaves(t)  ->  [6, 5, 4, 3, 7, 0, 1, 2] */
static const char *const NAMES[] = {"b.10", "b.2", "b.x", "a-c", "a.z", "a.b", "B", "a_c"};
static const int JAX_LEAVES[] = {6, 5, 4, 3, 7, 0, 1, 2};
#define N 8

static jx_tree *numbered_tree(void) {
  jx_tree *t = jx_tree_create();
  for (int i = 0; i < N; i++) jx_tree_set(t, NAMES[i], jx_scalar(JX_F32, i));
  return t;
}

static float value(jx_array *a) {
  float v;
  check_ok(jx_read(a, &v, sizeof v));
  return v;
}

static void sorted_is_jax_order(void **state) {
  (void)state;
  jx_tree *t = numbered_tree();
  jx_array *flat[N];
  jx_tree_flatten_sorted(t, flat);
  for (int k = 0; k < N; k++) assert_int_equal((int)value(flat[k]), JAX_LEAVES[k]);
  /* the tree's own order stays the order of insertion */
  jx_tree_flatten(t, flat);
  for (int k = 0; k < N; k++) assert_int_equal((int)value(flat[k]), k);
  /* unflatten_sorted inverts flatten_sorted, keeping like's order */
  jx_array *leaves[N];
  for (int k = 0; k < N; k++) leaves[k] = jx_scalar(JX_F32, 100 + JAX_LEAVES[k]);
  jx_tree *u = jx_tree_unflatten_sorted(t, leaves);
  assert_int_equal(jx_tree_size(u), N);
  for (int i = 0; i < N; i++) {
    assert_string_equal(jx_tree_name(u, i), NAMES[i]);
    assert_int_equal((int)value(jx_tree_at(u, i)), 100 + i);
  }
  jx_tree_release(u);
  jx_tree_release(t);
}

/* a + 2 b - c of three trees; the first of fewer */
static jx_array *combine(void *ctx, const char *name, int n, jx_array *const *x) {
  (void)name;
  int *calls = ctx;
  ++*calls;
  return n == 3 ? jx_sub(jx_add(x[0], jx_mul(jx_scalar(JX_F32, 2), x[1])), x[2]) : x[0];
}

static jx_array *refuse(void *ctx, const char *name, int n, jx_array *const *x) {
  (void)ctx;
  (void)name;
  (void)n;
  (void)x;
  return NULL;
}

static void map_over_several_trees(void **state) {
  (void)state;
  jx_tree *a = numbered_tree(), *b = jx_tree_create(), *c = jx_tree_create();
  /* b and c hold the same names in other orders */
  for (int i = N - 1; i >= 0; i--) jx_tree_set(b, NAMES[i], jx_scalar(JX_F32, 10 * i));
  for (int k = 0; k < N; k++)
    jx_tree_set(c, NAMES[JAX_LEAVES[k]], jx_scalar(JX_F32, JAX_LEAVES[k]));
  int calls = 0;
  jx_tree *r = jx_tree_map_n(3, (const jx_tree *[]){a, b, c}, combine, &calls);
  assert_non_null(r);
  assert_int_equal(calls, N);
  for (int i = 0; i < N; i++) {
    assert_string_equal(jx_tree_name(r, i), NAMES[i]); /* the first tree's order */
    assert_int_equal((int)value(jx_tree_at(r, i)), i + 20 * i - i);
  }
  jx_tree_release(r);
  /* different names: an error naming the tree and the name */
  jx_tree *d = numbered_tree();
  jx_tree_set(d, "a_d", jx_scalar(JX_F32, 0));
  assert_null(jx_tree_map_n(2, (const jx_tree *[]){a, d}, combine, &calls));
  assert_error_has("tree 1 has 9 arrays but tree 0 has 8");
  jx_tree *e = jx_tree_create();
  for (int i = 0; i < N; i++) jx_tree_set(e, i == 3 ? "a-d" : NAMES[i], jx_scalar(JX_F32, i));
  assert_null(jx_tree_map_n(2, (const jx_tree *[]){a, e}, combine, &calls));
  assert_error_has("tree 1 has no 'a-c'");
  assert_null(jx_tree_map_n(2, (const jx_tree *[]){a, NULL}, combine, &calls));
  assert_error_has("tree 1 is NULL");
  assert_null(jx_tree_map_n(1, (const jx_tree *[]){a}, refuse, NULL));
  jx_tree_release(e);
  jx_tree_release(d);
  jx_tree_release(c);
  jx_tree_release(b);
  jx_tree_release(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(sorted_is_jax_order, setup, teardown),
      cmocka_unit_test_setup_teardown(map_over_several_trees, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
