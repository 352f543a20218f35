/* Uses that once gave a poisoned result with no message: an array passed as
 * both input and output of jx_call, an array used after its scope ended, a
 * weak scalar as an index, and a replicated sharding's spec in text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
// clang-format off
#include <cmocka.h>
// clang-format on
#include <jx/jx.h>

#include "test_util.h"

static void twice(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(in[0], jx_scalar(JX_F32, 2));
}

/* (a, b) -> (b, a + b): the outputs swap roles, so in-place updates must
 * read both inputs before writing either output */
static void fib(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = in[1];
  out[1] = jx_add(in[0], in[1]);
}

/* jx_call(f, &w, &w) updates w in place, plain and jitted. */
static void call_in_place(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("twice", 1, 1, twice, NULL), *jf = jx_jit(f, NULL);
  jx_fn *g = jx_fn_create("fib", 2, 2, fib, NULL), *jg = jx_jit(g, NULL);
  jx_fn *fns[2] = {f, jf}, *gs[2] = {g, jg};
  for (int k = 0; k < 2; k++) {
    jx_array *w = jx_full(JX_F32, JX_SHAPE(), 3);
    check_ok(jx_call(fns[k], &w, &w));
    check_ok(jx_call(fns[k], &w, &w));
    assert_true(jx_item(w) == 12);
    jx_array *ab[2] = {jx_full(JX_F32, JX_SHAPE(), 1), jx_full(JX_F32, JX_SHAPE(), 1)};
    for (int i = 0; i < 5; i++) check_ok(jx_call(gs[k], ab, ab));
    assert_true(jx_item(ab[0]) == 8 && jx_item(ab[1]) == 13);
  }
  jx_fn_release(jg);
  jx_fn_release(g);
  jx_fn_release(jf);
  jx_fn_release(f);
}

static void below_ten(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_lt(in[0], jx_scalar(JX_F32, 10));
}
static void count_up(void *ctx, jx_array *const *in, jx_array **out) { /* (i, c) -> c + i */
  (void)ctx;
  out[0] = jx_add(in[1], jx_astype(in[0], JX_F32));
}
static void running_sum(void *ctx, jx_array *const *in, jx_array **out) { /* (c, x) -> (c+x, c) */
  (void)ctx;
  out[0] = jx_add(in[0], in[1]);
  out[1] = in[0];
}

/* The control-flow entry points update their carries in place too. */
static void control_flow_in_place(void **state) {
  (void)state;
  jx_fn *dbl = jx_fn_create("twice", 1, 1, twice, NULL);
  jx_fn *cond = jx_fn_create("below_ten", 1, 1, below_ten, NULL);
  jx_fn *up = jx_fn_create("count_up", 2, 1, count_up, NULL);
  jx_fn *run = jx_fn_create("running_sum", 2, 2, running_sum, NULL);
  jx_array *x = jx_full(JX_F32, JX_SHAPE(), 3);
  check_ok(jx_while(cond, dbl, 1, &x, &x));
  assert_true(jx_item(x) == 12);
  check_ok(jx_cond(jx_scalar(JX_BOOL, 1), dbl, dbl, 1, &x, &x));
  assert_true(jx_item(x) == 24);
  check_ok(jx_fori(0, 4, up, 1, &x, &x));
  assert_true(jx_item(x) == 30);
  jx_array *io[2] = {jx_zeros(JX_F32, JX_SHAPE()), jx_arange(JX_F32, 1, 4, 1)};
  check_ok(jx_scan(run, 1, io, 1, io + 1, 3, 0, io)); /* carry in io[0], xs in io[1] */
  assert_true(jx_item(io[0]) == 6);
  float ys[3];
  check_ok(jx_read(io[1], ys, sizeof ys));
  assert_true(ys[0] == 0 && ys[1] == 1 && ys[2] == 3);
  jx_fn_release(run);
  jx_fn_release(up);
  jx_fn_release(cond);
  jx_fn_release(dbl);
}

/* call, with "made at <this file>:<this line>" written into buf first */
#define NOTE_LINE(buf, call) (snprintf(buf, sizeof buf, "made at %s:%d", __FILE__, __LINE__), call)

/* A use after the scope that owned the array ended names where it was made. */
static void use_after_scope(void **state) {
  (void)state;
  char made[512];
  jx_scope_begin();
  jx_array *x = NOTE_LINE(made, jx_ones(JX_F32, JX_SHAPE(2)));
  jx_scope_end();
  assert_true(jx_is_poisoned(jx_add(x, x)));
  assert_error_has("jx_add: argument 0 was released when the scope that owned it ended");
  assert_true(jx_is_poisoned(jx_add(jx_ones(JX_F32, JX_SHAPE(2)), x)));
  assert_error_has(made);
  float v[2];
  assert_int_equal(jx_read(x, v, sizeof v), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("jx_read: the array was released");
  jx_fn *f = jx_fn_create("twice", 1, 1, twice, NULL);
  jx_array *out[1];
  assert_int_equal(jx_call(f, &x, out), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("jx_call: argument 0 was released");
  jx_fn_release(f);
  /* a reference taken with jx_keep outlives the scope */
  jx_scope_begin();
  jx_array *kept = jx_keep(jx_ones(JX_F32, JX_SHAPE(2)));
  jx_scope_end();
  assert_true(jx_item(jx_sum(kept, JX_AXES(), 0)) == 2);
  jx_release(kept);
}

static void take_scalar(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_take(in[0], jx_scalar(JX_I32, -1), 0);
}

/* Weak scalar indices (written as literals) work wherever indices are taken. */
static void weak_scalar_indices(void **state) {
  (void)state;
  jx_array *a = jx_arange(JX_F32, 10, 15, 1); /* [10 11 12 13 14] */
  assert_true(jx_item(jx_take(a, jx_scalar(JX_I32, 3), 0)) == 13);
  assert_true(jx_item(jx_take(a, jx_scalar(JX_I32, -2), 0)) == 13);
  assert_true(jx_item(jx_take(a, jx_scalar(JX_I64, 1), 0)) == 11);
  jx_array *start = jx_scalar(JX_I32, -2);
  jx_array *s = jx_dynamic_slice(a, &start, JX_SHAPE(2));
  float v[2];
  check_ok(jx_read(s, v, sizeof v));
  assert_true(v[0] == 13 && v[1] == 14);
  jx_fn *f = jx_fn_create("take_scalar", 1, 1, take_scalar, NULL), *jf = jx_jit(f, NULL);
  jx_fn *g = jx_grad(jf, JX_AXES());
  jx_array *out[1];
  check_ok(jx_call(jf, &a, out));
  assert_true(jx_item(out[0]) == 14);
  check_ok(jx_call(g, &a, out));
  float dg[5];
  check_ok(jx_read(out[0], dg, sizeof dg));
  for (int i = 0; i < 5; i++) assert_true(dg[i] == (i == 4 ? 1.0f : 0.0f));
  jx_fn_release(g);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* jx_visualize_sharding's output for a */
static char *visualized(jx_array *a) {
  static char text[4096];
  FILE *f = tmpfile();
  assert_non_null(f);
  jx_visualize_sharding(a, f);
  rewind(f);
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = 0;
  fclose(f);
  return text;
}

static void replicated_spec_text(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *[]){"data"});
  jx_sharding *rep = jx_sharding_create(m, ""), *split = jx_sharding_create(m, "data,_");
  assert_string_equal(jx_sharding_spec(rep), "");
  assert_string_equal(jx_sharding_spec(split), "data,None");
  jx_array *x = jx_device_put(jx_zeros(JX_F32, JX_SHAPE(4, 2)), rep);
  char *text = visualized(x);
  if (!strstr(text, "sharded as 'PartitionSpec()'")) fprintf(stderr, "%s", text);
  assert_non_null(strstr(text, "sharded as 'PartitionSpec()'"));
  text = visualized(jx_device_put(jx_zeros(JX_F32, JX_SHAPE(4, 2)), split));
  assert_non_null(strstr(text, "sharded as 'data,None'"));
  jx_sharding_release(split);
  jx_sharding_release(rep);
  jx_mesh_release(m);
}

int main(void) {
  jx_set_cpu_device_count(2);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(call_in_place, setup, teardown),
      cmocka_unit_test_setup_teardown(control_flow_in_place, setup, teardown),
      cmocka_unit_test_setup_teardown(use_after_scope, setup, teardown),
      cmocka_unit_test_setup_teardown(weak_scalar_indices, setup, teardown),
      cmocka_unit_test_setup_teardown(replicated_spec_text, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
