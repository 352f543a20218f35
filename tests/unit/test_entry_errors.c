/* Errors of the entry points that make functions, trees and optimizer steps
 * name the caller's file:line and the parameter at fault. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
// clang-format off
#include <cmocka.h>
// clang-format on
#include <jx/jx.h>

#include "test_util.h"

/* Runs `call` and asserts that the error it recorded starts with this
 * file:line and mentions `what`; one line, so both see the same __LINE__. */
#define EXPECT_LOCATED(call, what)                                                                 \
  do {                                                                                             \
    jx_clear_error();                                                                              \
    call;                                                                                          \
    expect_located(__FILE__, __LINE__, what);                                                      \
  } while (0)

static void expect_located(const char *file, int line, const char *what) {
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s:%d: ", file, line);
  const char *e = jx_last_error();
  if (strncmp(e, prefix, strlen(prefix)) != 0 || !strstr(e, what))
    fprintf(stderr, "want '%s...%s', got '%s'\n", prefix, what, e);
  assert_int_equal(strncmp(e, prefix, strlen(prefix)), 0);
  assert_non_null(strstr(e, what));
  jx_clear_error();
}

static void ident(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = in[0];
}

static void function_makers(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("ident", 1, 1, ident, NULL), *g = f;
  EXPECT_LOCATED(g = jx_grad(f, JX_AXES(3)), "argnum 3 is out of range for 'ident'");
  assert_null(g);
  EXPECT_LOCATED(g = jx_vmap(f, JX_AXES(0, 0), JX_AXES(0)), "in_axes has 2 entries");
  assert_null(g);
  EXPECT_LOCATED(g = jx_fn_create("neg", -1, 1, ident, NULL), "nin >= 0");
  assert_null(g);
  EXPECT_LOCATED(g = jx_fn_create("none", 1, 1, NULL, NULL), "'none' has no body");
  assert_null(g);
  jx_fn_release(f);
}

static void trees(void **state) {
  (void)state;
  jx_tree *t = jx_tree_create();
  EXPECT_LOCATED(jx_tree_set(t, NULL, jx_zeros(JX_F32, JX_SHAPE())), "the name is NULL");
  EXPECT_LOCATED(jx_tree_set(t, "w", NULL), "the array is NULL");
  assert_int_equal(jx_tree_size(t), 0);
  jx_tree_release(t);
}

/* A gradient of the wrong shape is named with its parameter, and the step
 * changes nothing. */
static void optimizer_step(void **state) {
  (void)state;
  jx_tree *params = jx_tree_create(), *grads = jx_tree_create();
  jx_tree_set(params, "w", jx_ones(JX_F32, JX_SHAPE(3, 2)));
  jx_tree_set(grads, "w", jx_ones(JX_F32, JX_SHAPE(2, 3)));
  jx_optimizer *opt = jx_optim_adam(0.1, 0.9, 0.999, 1e-8);
  jx_tree *st = jx_optim_init(opt, params);
  jx_array *w = jx_tree_get(params, "w");
  EXPECT_LOCATED(jx_optim_update(opt, grads, st, params), "grads: the gradient of 'w' is f32[2,3]");
  assert_ptr_equal(jx_tree_get(params, "w"), w);
  assert_true(jx_item(jx_tree_get(st, "count")) == 0);
  jx_tree_release(st);
  jx_optim_release(opt);
  jx_tree_release(grads);
  jx_tree_release(params);
}

static void size_of_nothing(void **state) {
  (void)state;
  int64_t n = 0;
  EXPECT_LOCATED(n = jx_size(NULL), "jx_size: the array is NULL");
  assert_int_equal(n, -1);
  assert_int_equal(jx_size(jx_zeros(JX_F32, JX_SHAPE(2, 0, 3))), 0);
  assert_int_equal(jx_size(jx_zeros(JX_F32, JX_SHAPE())), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(function_makers, setup, teardown),
      cmocka_unit_test_setup_teardown(trees, setup, teardown),
      cmocka_unit_test_setup_teardown(optimizer_step, setup, teardown),
      cmocka_unit_test_setup_teardown(size_of_nothing, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
