/* jx_map, jx_associative_scan and jx_reduce (lax.map, lax.associative_scan,
 * lax.reduce with a generic monoid) against JAX
 * (tests/golden/gen_np_surface.py): values, gradients, a non-commutative
 * combination (matmul), a pair of arrays (affine maps), reverse, under jit
 * and vmap; and their errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"
#include "unit/np_golden.h"

static void map_f(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(jx_sin(in[0]), jx_sum(jx_mul(in[0], in[1]), JX_AXES(), 0));
}
static void add_f(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(in[0], in[1]);
}
static void mul_f(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(in[0], in[1]);
}
static void matmul_f(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_matmul(in[0], in[1]);
}
/* (a1, b1) then (a2, b2): x -> a2 (a1 x + b1) + b2 */
static void affine_f(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(in[0], in[2]);
  out[1] = jx_add(jx_mul(in[2], in[1]), in[3]);
}
static void lse_f(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_logaddexp(in[0], in[1]);
}

static jx_fn *fn(const char *name, int nin, int nout, jx_body body) {
  return jx_fn_create(name, nin, nout, body, NULL);
}

static void f_map(jx_array *const *in, jx_array **out) {
  jx_fn *f = fn("map_f", 2, 1, map_f);
  check_ok(jx_map(f, 2, in, out));
  jx_fn_release(f);
}
static void f_map_batched(jx_array *const *in, jx_array **out) {
  jx_fn *f = fn("map_f", 2, 1, map_f);
  check_ok(jx_map_batched(f, 3, 2, in, out));
  jx_fn_release(f);
}
static void assoc1(jx_array *const *in, jx_array **out, jx_body body, int reverse, int axis) {
  jx_fn *f = fn("combine", 2, 1, body);
  check_ok(jx_associative_scan(f, 1, in, reverse, axis, out));
  jx_fn_release(f);
}
static void f_assoc_add(jx_array *const *in, jx_array **out) { assoc1(in, out, add_f, 0, 1); }
static void f_assoc_add_rev(jx_array *const *in, jx_array **out) { assoc1(in, out, add_f, 1, 0); }
static void f_assoc_matmul(jx_array *const *in, jx_array **out) { assoc1(in, out, matmul_f, 0, 0); }
static void f_assoc_affine(jx_array *const *in, jx_array **out) {
  jx_fn *f = fn("affine", 4, 2, affine_f);
  check_ok(jx_associative_scan(f, 2, in, 0, 0, out));
  jx_fn_release(f);
}
static void reduce1(jx_array *const *in, jx_array **out, jx_body body, double init, jx_axes ax) {
  jx_fn *f = fn("monoid", 2, 1, body);
  jx_array *i0 = jx_full(jx_dtype_of(in[0]), JX_SHAPE(), init);
  check_ok(jx_reduce(f, 1, in, &i0, ax, out));
  jx_fn_release(f);
}
static void f_reduce_mul(jx_array *const *in, jx_array **out) {
  reduce1(in, out, mul_f, 1, JX_AXES(1));
}
static void f_reduce_mul0(jx_array *const *in, jx_array **out) {
  reduce1(in, out, mul_f, 1, JX_AXES(0));
}
static void f_reduce_lse(jx_array *const *in, jx_array **out) {
  reduce1(in, out, lse_f, -INFINITY, JX_AXES(0, 2));
}

static const np_case cases[] = {
    NP("map", 2, 1, f_map),
    NP("map_batched", 2, 1, f_map_batched),
    NP("assoc_add", 1, 1, f_assoc_add),
    NP("assoc_add_rev", 1, 1, f_assoc_add_rev, .check_grads = 1),
    NP("assoc_matmul", 1, 1, f_assoc_matmul),
    NP("assoc_affine", 2, 2, f_assoc_affine),
    NP("reduce_mul", 1, 1, f_reduce_mul),
    NP("reduce_lse", 1, 1, f_reduce_lse, .check_grads = 1),
    NP("reduce_vmap", 1, 1, f_reduce_mul0, .vmap = 1),
    NP("assoc_matmul_vmap", 1, 1, f_assoc_matmul, .vmap = 1),
    NP("map_vmap", 2, 1, f_map, .vmap = 1, .in_axes = {0, JX_NONE}),
};
NP_GOLDEN_TESTS(cases)

static void test_errors(void **state) {
  (void)state;
  jx_fn *add = jx_fn_create("add", 2, 1, add_f, NULL);
  jx_array *v = jx_zeros(JX_F32, JX_SHAPE(4)), *m = jx_zeros(JX_F32, JX_SHAPE(3, 2)), *out[2];
  jx_clear_error();
  assert_int_not_equal(jx_map(add, 1, &v, out), JX_OK);
  assert_error_has("add takes 2 inputs, given 1 xs");
  assert_int_not_equal(jx_map(add, 2, (jx_array *[]){v, m}, out), JX_OK);
  assert_error_has("must have the leading axis of xs 0 f32[4]");
  assert_int_not_equal(jx_map_batched(add, 0, 2, (jx_array *[]){v, v}, out), JX_OK);
  assert_error_has("batch_size 0 must be >= 1");
  assert_int_not_equal(jx_associative_scan(add, 2, (jx_array *[]){v, v}, 0, 0, out), JX_OK);
  assert_error_has("add must take 4 inputs");
  assert_int_not_equal(jx_associative_scan(add, 1, &v, 0, 1, out), JX_OK);
  assert_error_has("axis 1");
  assert_true(jx_is_poisoned(out[0]));
  jx_array *i0 = jx_zeros(JX_F64, JX_SHAPE());
  assert_int_not_equal(jx_reduce(add, 1, &m, &i0, JX_AXES(0), out), JX_OK);
  assert_error_has("init 0 f64[] must be a scalar of operand 0's dtype f32");
  i0 = jx_zeros(JX_F32, JX_SHAPE());
  assert_int_not_equal(jx_reduce(add, 1, &m, &i0, JX_AXES(2), out), JX_OK);
  assert_error_has("axis 2");
  jx_fn_release(add);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_golden_eager, setup, teardown),
      cmocka_unit_test_setup_teardown(test_golden_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
