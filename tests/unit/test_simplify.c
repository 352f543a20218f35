/* The simplifier under jx_jit: identities, constant folding, CSE and DCE
 * remove work and never change a result. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>

static int count(const char *text, const char *word) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, word)); p += strlen(word)) n++;
  return n;
}

static void f_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *s = jx_sin(in[0]);
  out[0] = jx_sum(jx_mul(s, in[0]), JX_AXES(), 0);
}

static void grad_of_sum_loses_its_dead_forward_value(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("f", 1, 1, f_body, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_fn *jg = jx_jit(g, NULL);
  jx_array *in[1] = {jx_zeros(JX_F32, JX_SHAPE(3))};
  char *plain = jx_fn_ir(g, in), *opt = jx_fn_ir(jg, in);
  assert_int_equal(count(plain, "reduce_sum"), 1);
  assert_int_equal(count(opt, "reduce_sum"), 0); /* the loss value is not an output */
  assert_int_equal(count(opt, "= sin "), 1);
  assert_int_equal(count(opt, "= cos "), 1);
  free(plain);
  free(opt);
  float xs[3] = {0.5f, -1, 2}, a[3], b[3];
  jx_array *x[1] = {jx_array_from(JX_F32, JX_SHAPE(3), xs)}, *o1[1], *o2[1];
  assert_int_equal(jx_call(g, x, o1), JX_OK);
  assert_int_equal(jx_call(jg, x, o2), JX_OK);
  jx_read(o1[0], a, sizeof a);
  jx_read(o2[0], b, sizeof b);
  assert_memory_equal(a, b, sizeof a); /* bit for bit */
  jx_fn_release(jg);
  jx_fn_release(g);
  jx_fn_release(f);
}

/* (x * 1) + sin(x) + sin(x) with a same-dtype convert: one sin, no mul, no convert */
static void redundant_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *a = jx_mul(in[0], jx_scalar(JX_F32, 1));
  jx_array *b = jx_sin(jx_astype(in[0], JX_F32));
  jx_array *c = jx_sin(in[0]);
  out[0] = jx_add(jx_add(a, b), c);
}

static void identities_and_cse(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("redundant", 1, 1, redundant_body, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *in[1] = {jx_zeros(JX_F32, JX_SHAPE(4))};
  char *plain = jx_fn_ir(f, in), *opt = jx_fn_ir(jf, in);
  assert_int_equal(count(plain, "= sin "), 2);
  assert_int_equal(count(opt, "= sin "), 1);
  assert_int_equal(count(opt, "= mul "), 0);
  assert_int_equal(count(opt, "convert_element_type"), 0);
  free(plain);
  free(opt);
  float xs[4] = {-0.0f, 1, -2.5f, 1e30f}, a[4], b[4];
  jx_array *x[1] = {jx_array_from(JX_F32, JX_SHAPE(4), xs)}, *o1[1], *o2[1];
  assert_int_equal(jx_call(f, x, o1), JX_OK);
  assert_int_equal(jx_call(jf, x, o2), JX_OK);
  jx_read(o1[0], a, sizeof a);
  jx_read(o2[0], b, sizeof b);
  assert_memory_equal(a, b, sizeof a);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* x + 0 must stay: -0 + 0 is +0 */
static void plus_zero(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(in[0], jx_scalar(JX_F32, 0));
}

static void no_inexact_rewrites(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("plus_zero", 1, 1, plus_zero, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  float z = -0.0f, r;
  jx_array *x[1] = {jx_array_from(JX_F32, JX_SHAPE(), &z)}, *o[1];
  assert_int_equal(jx_call(jf, x, o), JX_OK);
  jx_read(o[0], &r, sizeof r);
  assert_false(signbit(r));
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* reshape(reshape(x, [6]), [2, 3]) is x again */
static void reshape_round_trip(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *flat = jx_reshape(in[0], JX_SHAPE(6));
  out[0] = jx_mul(jx_reshape(flat, JX_SHAPE(2, 3)), in[0]);
}

static void reshape_chains_collapse(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("round_trip", 1, 1, reshape_round_trip, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  float xs[6] = {1, -2, 3, -4, 5, -6}, y[6];
  jx_array *in[1] = {jx_array_from(JX_F32, JX_SHAPE(2, 3), xs)}, *out[1];
  char *opt = jx_fn_ir(jf, in);
  assert_int_equal(count(opt, "reshape"), 0);
  free(opt);
  assert_int_equal(jx_call(jf, in, out), JX_OK);
  jx_read(out[0], y, sizeof y);
  for (int i = 0; i < 6; i++) assert_float_equal(y[i], xs[i] * xs[i], 0);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* x + exp(2) * 3: exp(2) * 3 folds to one constant */
static void folded_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(in[0], jx_mul(jx_exp(jx_scalar(JX_F32, 2)), jx_scalar(JX_F32, 3)));
}

/* A folded constant is the program's alone: outside any scope, jitting and
 * releasing a function leaves no buffer behind (it was kept by the
 * caller's root scope until jx_shutdown, one per folded constant of every
 * program, which tracing a 48-layer model filled past 10000). */
static void folded_constants_leave_nothing_behind(void **state) {
  (void)state;
  jx_array *in[1] = {jx_zeros(JX_F32, JX_SHAPE(3))};
  jx_memory_stats before, after;
  jx_fn *f = jx_fn_create("folded", 1, 1, folded_body, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  char *opt = jx_fn_ir(jf, in);
  assert_int_equal(count(opt, "exp"), 0); /* folded */
  free(opt);
  jx_fn_release(jf);
  assert_int_equal(jx_memory_stats(0, &before), JX_OK);
  jf = jx_jit(f, NULL);
  opt = jx_fn_ir(jf, in);
  free(opt);
  jx_fn_release(jf);
  assert_int_equal(jx_memory_stats(0, &after), JX_OK);
  assert_int_equal(after.live_buffers, before.live_buffers);
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(grad_of_sum_loses_its_dead_forward_value),
      cmocka_unit_test(identities_and_cse),
      cmocka_unit_test(no_inexact_rewrites),
      cmocka_unit_test(reshape_chains_collapse),
      cmocka_unit_test(folded_constants_leave_nothing_behind),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
