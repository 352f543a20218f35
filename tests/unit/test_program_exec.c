/* What is kept beside a program (ir/exec.h): the executable attached to a
 * program runs it in place of the interpreter and is freed with the
 * program's last reference, the first of two attached stays, a nested
 * table entered by a running executable comes first, and jx_compile
 * returns the build's times to its caller. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "compile/executable.h"
#include "ir/exec.h"
#include "trace/eval.h"
#include "trace/fn.h"
#include "test_util.h"

/* An executable that counts its runs and frees, and returns 2 * its input
 * (the program itself returns its input unchanged). */
typedef struct {
  int runs, *freed;
} counting;

static jx_status run_doubling(void *impl, const jx_program *p, jx_array *const *in,
                              jx_array **out) {
  (void)p;
  ((counting *)impl)->runs++;
  out[0] = jx_mul(in[0], jx_scalar(JX_F32, 2));
  return jx_last_status();
}

static void free_counting(void *impl) {
  ++*((counting *)impl)->freed;
  free(impl);
}

static jx_exec counting_exec(int *freed) {
  counting *c = calloc(1, sizeof *c);
  assert_non_null(c);
  c->freed = freed;
  return (jx_exec){c, run_doubling, free_counting};
}

/* The program x -> x on f32[3]. */
static jx_program *identity(void) {
  jx_program *p = jx_program_new("identity");
  int v = jx_program_add_input(p, (jx_aval){JX_F32, 0, {1, {3}}, 0});
  assert_true(v >= 0);
  check_ok(jx_program_set_outputs(p, 1, &v));
  return p;
}

static float first(jx_array *a) {
  float v[3];
  check_ok(jx_read(a, v, sizeof v));
  return v[0];
}

static void attached_runs_and_goes_with_the_program(void **state) {
  (void)state;
  jx_scope_begin();
  jx_program *p = identity();
  jx_array *x = jx_full(JX_F32, JX_SHAPE(3), 5), *y = NULL;
  check_ok(jx_program_eval(p, &x, &y));
  assert_true(first(y) == 5); /* interpreted */
  int freed = 0;
  jx_exec a = counting_exec(&freed), b = counting_exec(&freed);
  jx_program_attach(p, a);
  jx_program_attach(p, b); /* a second one: freed, the first stays */
  assert_int_equal(freed, 1);
  assert_ptr_equal(jx_program_executable(p), a.impl);
  check_ok(jx_program_eval(p, &x, &y));
  assert_true(first(y) == 10);
  assert_int_equal(((counting *)a.impl)->runs, 1);
  jx_program *q = jx_program_retain(p);
  jx_program_release(p);
  assert_int_equal(freed, 1); /* q still holds the program */
  jx_program_release(q);
  assert_int_equal(freed, 2);
  jx_scope_end();
}

static void nested_table_comes_first(void **state) {
  (void)state;
  jx_scope_begin();
  jx_program *p = identity();
  int freed = 0;
  jx_exec_nested t = {0};
  check_ok(jx_exec_nested_add(&t, p, counting_exec(&freed)));
  jx_array *x = jx_full(JX_F32, JX_SHAPE(3), 1), *y = NULL;
  const jx_exec_nested *outer = jx_exec_nested_enter(&t);
  check_ok(jx_program_eval(p, &x, &y));
  jx_exec_nested_leave(outer);
  assert_true(first(y) == 2);
  assert_null(jx_program_executable(p)); /* the program itself has none */
  check_ok(jx_program_eval(p, &x, &y));
  assert_true(first(y) == 1); /* outside the run: interpreted */
  jx_exec_nested_free(&t);
  assert_int_equal(freed, 1);
  jx_program_release(p);
  jx_scope_end();
}

static void body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_tanh(jx_add(jx_mul(in[0], in[0]), jx_scalar(JX_F32, 1)));
}

static void compile_returns_its_times(void **state) {
  (void)state;
  TEST_SKIP_ON_CUDA("jx_compile builds the CPU executable");
  jx_fn *f = jx_fn_create("times", 1, 1, body, NULL);
  jx_aval av = {JX_F32, 0, {1, {64}}, 0};
  jx_program *p = jx_fn_program(f, &av);
  assert_non_null(p);
  jx_exec x = {0};
  jx_compile_times t = {0};
  check_ok(jx_compile(p, NULL, &x, &t));
  assert_non_null(jx_exec_cpu(x));
  assert_int_equal(t.kernels, 1); /* the fused elementwise chain */
  assert_non_null(t.cache);
  assert_true(t.codegen >= 0 && t.compile >= 0 && t.total >= t.codegen + t.compile);
  assert_null(jx_program_executable(p)); /* compiled, not attached */
  x.free(x.impl);
  jx_program_release(p);
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(attached_runs_and_goes_with_the_program),
      cmocka_unit_test(nested_table_comes_first),
      cmocka_unit_test(compile_returns_its_times),
  };
  int r = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return r;
}
