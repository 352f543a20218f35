/* Tracing: bodies become programs once per signature; calls inline; escaped
 * and concretized tracers are errors that say what to do. */
#include <jx/jx.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "test_util.h"
#include "ir/program.h"
#include "prims/prims.h"

/* f(x, y) = x * x + 3 * y (one op a statement: C leaves the order in which
 * arguments are evaluated open, and the printed program follows it) */
static int add_line; /* where poly_body adds, for the error test */
static void poly_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *xx = jx_mul(in[0], in[0]);
  jx_array *y3 = jx_mul(jx_scalar(JX_F32, 3), in[1]);
  add_line = __LINE__ + 1;
  out[0] = jx_add(xx, y3);
}

static void call_matches_eager_and_caches(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("poly", 2, 1, poly_body, NULL);
  float xv[3] = {1, 2, -3}, yv[3] = {0.5f, -1, 2};
  jx_array *in[2] = {jx_array_from(JX_F32, JX_SHAPE(3), xv),
                     jx_array_from(JX_F32, JX_SHAPE(3), yv)};
  jx_array *out[1];
  assert_int_equal(jx_call(f, in, out), JX_OK);
  float got[3];
  assert_int_equal(jx_read(out[0], got, sizeof got), JX_OK);
  for (int i = 0; i < 3; i++) assert_float_equal(got[i], xv[i] * xv[i] + 3 * yv[i], 1e-6);
  assert_int_equal(jx_call(f, in, out), JX_OK);
  assert_int_equal(jx_fn_trace_count(f), 1); /* same signature: no retrace */
  jx_array *in2[2] = {jx_zeros(JX_F32, JX_SHAPE(4)), jx_zeros(JX_F32, JX_SHAPE(4))};
  assert_int_equal(jx_call(f, in2, out), JX_OK);
  assert_int_equal(jx_fn_trace_count(f), 2); /* a new shape retraces */
  jx_fn_release(f);
}

static void ir_prints_like_a_jaxpr(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("poly", 2, 1, poly_body, NULL);
  jx_array *in[2] = {jx_zeros(JX_F32, JX_SHAPE(3)), jx_zeros(JX_F32, JX_SHAPE(3))};
  char *ir = jx_fn_ir(f, in);
  assert_non_null(ir);
  /* the weak scalar 3 is converted and broadcast to y's type, as promotion says */
  const char *want = "{ lambda ; a:f32[3] b:f32[3]. let\n"
                     "    c:f32[3] = mul a a\n"
                     "    d:f32[] = convert_element_type[new_dtype=f32 weak_type=0] 3.0:f32[]\n"
                     "    e:f32[3] = broadcast_in_dim[shape=(3,) broadcast_dimensions=()] d\n"
                     "    f:f32[3] = mul e b\n"
                     "    g:f32[3] = add c f\n"
                     "  in (g,) }\n";
  assert_string_equal(ir, want);
  free(ir);
  jx_fn_release(f);
}

static jx_fn *inner_fn;
static void outer_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *args[2] = {in[0], in[0]};
  jx_array *r[1];
  jx_call(inner_fn, args, r); /* inlined into this trace */
  out[0] = jx_sub(r[0], in[0]);
}

static void nested_call_inlines(void **state) {
  (void)state;
  inner_fn = jx_fn_create("poly", 2, 1, poly_body, NULL);
  jx_fn *outer = jx_fn_create("outer", 1, 1, outer_body, NULL);
  double x = 2.0;
  jx_array *in[1] = {jx_array_from(JX_F64, JX_SHAPE(), &x)};
  jx_array *out[1];
  assert_int_equal(jx_call(outer, in, out), JX_OK);
  assert_float_equal(jx_item(out[0]), 2 * 2 + 3 * 2 - 2, 1e-12);
  char *ir = jx_fn_ir(outer, in);
  assert_non_null(strstr(ir, "sub"));
  assert_null(strstr(ir, "pjit")); /* plain equations, no call */
  free(ir);
  jx_fn_release(outer);
  jx_fn_release(inner_fn);
}

static jx_array *leaked;
static void leaking_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  leaked = jx_keep(in[0]);
  out[0] = jx_add(in[0], in[0]);
}

static void escaped_tracer_is_an_error(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("leaky", 1, 1, leaking_body, NULL);
  jx_array *in[1] = {jx_zeros(JX_F32, JX_SHAPE(2))}, *out[1];
  assert_int_equal(jx_call(f, in, out), JX_OK);
  jx_array *bad = jx_add(leaked, in[0]);
  assert_true(jx_is_poisoned(bad));
  assert_int_equal(jx_last_status(), JX_ERR_TRACE);
  assert_non_null(strstr(jx_last_error(), "escaped its trace"));
  jx_release(leaked);
  jx_fn_release(f);
}

static void concretizing_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  double v = jx_item(in[0]);
  out[0] = v > 0 ? in[0] : jx_mul(in[0], in[0]);
}

static void concretizing_a_tracer_is_an_error(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("branchy", 1, 1, concretizing_body, NULL);
  jx_array *in[1] = {jx_scalar(JX_F32, 1)}, *out[1];
  assert_int_equal(jx_call(f, in, out), JX_ERR_TRACE);
  assert_true(jx_is_poisoned(out[0]));
  assert_non_null(strstr(jx_last_error(), "jx_item"));
  assert_non_null(strstr(jx_last_error(), "tracer"));
  assert_non_null(strstr(jx_last_error(), "jx_cond"));
  assert_non_null(strstr(jx_last_error(), "test_trace.c:"));
  jx_fn_release(f);
}

static void shape_error_in_body_names_the_line(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("poly", 2, 1, poly_body, NULL);
  jx_array *in[2] = {jx_zeros(JX_F32, JX_SHAPE(3)), jx_zeros(JX_F32, JX_SHAPE(4))}, *out[1];
  assert_int_equal(jx_call(f, in, out), JX_ERR_SHAPE);
  char where[64];
  snprintf(where, sizeof where, "test_trace.c:%d: jx_add", add_line);
  assert_non_null(strstr(jx_last_error(), where));
  jx_fn_release(f);
}

static void jit_gives_the_same_numbers(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("poly", 2, 1, poly_body, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_fn_release(f); /* the jitted function keeps its own reference */
  float xv[2] = {1.5f, -2}, yv[2] = {1, 1};
  jx_array *in[2] = {jx_array_from(JX_F32, JX_SHAPE(2), xv),
                     jx_array_from(JX_F32, JX_SHAPE(2), yv)};
  jx_array *out[1];
  assert_int_equal(jx_call(jf, in, out), JX_OK);
  float got[2];
  jx_read(out[0], got, sizeof got);
  assert_float_equal(got[0], 1.5f * 1.5f + 3, 1e-6);
  assert_float_equal(got[1], 4 + 3, 1e-6);
  jx_fn_release(jf);
}

/* The verifier catches what a broken transformation rule could produce. */
static void verifier_rejects_broken_programs(void **state) {
  (void)state;
  jx_aval f3 = {JX_F32, 0, {1, {3}}, 0}, f4 = {JX_F32, 0, {1, {4}}, 0};
  jx_program *p = jx_program_new("bad");
  int a = jx_program_add_input(p, f3), out;
  int in2[2] = {a, a};
  /* add's rule gives f32[3], but the equation claims f32[4] */
  assert_int_equal(jx_program_add_eqn(p, &jx_prim_add, NULL, 2, in2, 1, &f4, &out, 0, NULL, NULL),
                   JX_OK);
  jx_program_set_outputs(p, 1, &out);
  assert_int_equal(jx_program_verify(p), JX_ERR_INTERNAL);
  assert_non_null(strstr(jx_last_error(), "add output 0 is f32[4] but its rule gives f32[3]"));
  jx_program_release(p);
  jx_clear_error();
  p = jx_program_new("early");
  a = jx_program_add_input(p, f3);
  int later = jx_program_add_var(p, f3); /* never defined */
  int use[2] = {a, later};
  assert_int_equal(jx_program_add_eqn(p, &jx_prim_mul, NULL, 2, use, 1, &f3, &out, 0, NULL, NULL),
                   JX_OK);
  jx_program_set_outputs(p, 1, &out);
  assert_int_equal(jx_program_verify(p), JX_ERR_INTERNAL);
  assert_non_null(strstr(jx_last_error(), "before it is defined"));
  jx_program_release(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(call_matches_eager_and_caches, setup, teardown),
      cmocka_unit_test_setup_teardown(ir_prints_like_a_jaxpr, setup, teardown),
      cmocka_unit_test_setup_teardown(nested_call_inlines, setup, teardown),
      cmocka_unit_test_setup_teardown(escaped_tracer_is_an_error, setup, teardown),
      cmocka_unit_test_setup_teardown(concretizing_a_tracer_is_an_error, setup, teardown),
      cmocka_unit_test_setup_teardown(shape_error_in_body_names_the_line, setup, teardown),
      cmocka_unit_test_setup_teardown(jit_gives_the_same_numbers, setup, teardown),
      cmocka_unit_test_setup_teardown(verifier_rejects_broken_programs, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
