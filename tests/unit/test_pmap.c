/* jx_pmap over the 8 CPU devices, checked against a loop over the mapped
 * axis (the oracle): in_axes/out_axes (JX_NONE included), jx_axis_index,
 * psum and its gradient, jit, and the errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"
#include "test_close.h"

/* slice k of x along axis a, without that axis */
static jx_array *take(jx_array *x, int a, int64_t k) {
  jx_shape s = jx_shape_of(x), lo = {s.rank, {0}}, hi = s;
  lo.dims[a] = k;
  hi.dims[a] = k + 1;
  return jx_squeeze(jx_slice(x, lo, hi, JX_SHAPE()), JX_AXES(a));
}

static jx_array *stack_at(int n, jx_array *const *xs, int a) { return jx_stack(n, xs, a); }

/* sin(x) * w + axis_index */
static void body_index(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(jx_sin(in[0]), in[1]), jx_astype(jx_axis_index("i"), JX_F64));
}

static void in_out_axes_and_axis_index(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("body_index", 2, 1, body_index, NULL);
  jx_array *w = val(JX_SHAPE(3), 0.9);
  /* mapped axis 0 in, 0 out */
  jx_array *x = val(JX_SHAPE(8, 3), 0.1), *out[1];
  jx_fn *p = jx_pmap(f, "i", (jx_axes){2, {0, JX_NONE}}, JX_AXES(0));
  assert_non_null(p);
  check_ok(jx_call(p, (jx_array *[]){x, w}, out));
  jx_array *rows[8];
  for (int k = 0; k < 8; k++)
    rows[k] = jx_add(jx_mul(jx_sin(take(x, 0, k)), w), jx_scalar(JX_F64, k));
  assert_close(out[0], stack_at(8, rows, 0), 1e-15);
  /* mapped axis 1 in, axis 1 out */
  jx_array *x1 = val(JX_SHAPE(3, 8), 0.2);
  jx_fn *p1 = jx_pmap(f, "i", (jx_axes){2, {1, JX_NONE}}, JX_AXES(1));
  check_ok(jx_call(p1, (jx_array *[]){x1, w}, out));
  for (int k = 0; k < 8; k++)
    rows[k] = jx_add(jx_mul(jx_sin(take(x1, 1, k)), w), jx_scalar(JX_F64, k));
  assert_close(out[0], stack_at(8, rows, 1), 1e-15);
  /* both mapped (negative axis), out at -1 */
  jx_array *w8 = val(JX_SHAPE(8, 3), 0.4);
  jx_fn *p2 = jx_pmap(f, "i", (jx_axes){2, {-1, 0}}, JX_AXES(-1));
  check_ok(jx_call(p2, (jx_array *[]){x1, w8}, out));
  for (int k = 0; k < 8; k++)
    rows[k] = jx_add(jx_mul(jx_sin(take(x1, 1, k)), take(w8, 0, k)), jx_scalar(JX_F64, k));
  assert_close(out[0], stack_at(8, rows, 1), 1e-15);
  /* under jit, traced once */
  jx_fn *j = jx_jit(p, NULL);
  for (int k = 0; k < 2; k++) {
    check_ok(jx_call(j, (jx_array *[]){x, w}, out));
    for (int r = 0; r < 8; r++)
      rows[r] = jx_add(jx_mul(jx_sin(take(x, 0, r)), w), jx_scalar(JX_F64, r));
    assert_close(out[0], stack_at(8, rows, 0), 1e-15);
  }
  assert_int_equal(jx_fn_trace_count(j), 1);
  assert_int_equal(jx_fn_trace_count(f), 1);
  jx_fn_release(j);
  jx_fn_release(p2);
  jx_fn_release(p1);
  jx_fn_release(p);
  jx_fn_release(f);
}

/* x / psum(x) (normalized over devices), and the total as a replicated output */
static void body_normalize(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *t = jx_psum(in[0], "i");
  out[0] = jx_div(jx_sin(in[0]), jx_add(t, jx_scalar(JX_F64, 10)));
  out[1] = t;
}

static void psum_and_its_gradient(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("normalize", 1, 2, body_normalize, NULL);
  jx_fn *p = jx_pmap(f, "i", JX_AXES(0), (jx_axes){2, {0, JX_NONE}});
  jx_array *x = val(JX_SHAPE(8, 2), 0.3), *out[2];
  check_ok(jx_call(p, &x, out));
  jx_array *total = jx_sum(x, JX_AXES(0), 0);
  assert_close(out[1], total, 1e-14);
  assert_close(out[0], jx_div(jx_sin(x), jx_add(total, jx_scalar(JX_F64, 10))), 1e-14);
  check_ok(jx_check_grads(p, &x, 2, 0, 0));
  jx_fn_release(p);
  jx_fn_release(f);
}

/* (x0..x4 mapped, c0..c4 replicated) -> sum_i (i + 1) x_i c_i: more axes
 * than a jx_axes list holds. */
static void ten_inputs_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *acc = jx_zeros(JX_F32, JX_SHAPE(3));
  for (int i = 0; i < 5; i++)
    acc = jx_add(acc, jx_mul(jx_scalar(JX_F32, i + 1), jx_mul(in[i], in[5 + i])));
  out[0] = acc;
}

static void many_axes(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("ten", 10, 1, ten_inputs_body, NULL);
  const int in_axes[10] = {0, 0, 0, 0, 0, JX_NONE, JX_NONE, JX_NONE, JX_NONE, JX_NONE};
  const int out_axes[1] = {0};
  jx_fn *p = jx_pmap_n(f, "i", 10, in_axes, 1, out_axes);
  assert_non_null(p);
  jx_array *in[10];
  for (int i = 0; i < 5; i++)
    in[i] = jx_add(jx_reshape(jx_arange(JX_F32, 0, 24, 1), JX_SHAPE(8, 3)), jx_scalar(JX_F32, i));
  for (int i = 5; i < 10; i++) in[i] = jx_full(JX_F32, JX_SHAPE(3), i);
  jx_array *out;
  check_ok(jx_call(p, in, &out));
  float got[24];
  check_ok(jx_read(out, got, sizeof got));
  for (int d = 0; d < 8; d++)
    for (int j = 0; j < 3; j++) {
      double want = 0;
      for (int i = 0; i < 5; i++) want += (i + 1) * (double)(d * 3 + j + i) * (5 + i);
      assert_true(fabs(got[d * 3 + j] - want) <= 1e-4 * fabs(want));
    }
  assert_null(jx_pmap_n(f, "i", 9, in_axes, 1, out_axes));
  assert_non_null(strstr(jx_last_error(), "in_axes has 9 entries but 'ten' has 10 inputs"));
  jx_clear_error();
  jx_fn_release(p);
  jx_fn_release(f);
}

static void errors(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("body_index", 2, 1, body_index, NULL);
  assert_null(jx_pmap(f, "i", JX_AXES(0, 0, 0), JX_AXES(0)));
  assert_error_has("jx_pmap: in_axes has 3 entries but 'body_index' has 2 inputs");
  assert_null(jx_pmap(f, "i", JX_AXES(0), JX_AXES(0, 1)));
  assert_error_has("jx_pmap: out_axes has 2 entries but 'body_index' has 1 outputs");
  jx_fn *p = jx_pmap(f, "i", (jx_axes){2, {0, JX_NONE}}, JX_AXES(0));
  jx_array *out[1];
  assert_int_not_equal(jx_call(p, (jx_array *[]){val(JX_SHAPE(4, 3), 0), val(JX_SHAPE(3), 0)}, out),
                       JX_OK);
  assert_error_has("jx_pmap: input 0 is f64[4,3]; its mapped axis 0 has size 4 but there are 8 "
                   "devices");
  assert_int_not_equal(jx_call(p, (jx_array *[]){val(JX_SHAPE(), 0), val(JX_SHAPE(3), 0)}, out),
                       JX_OK);
  assert_error_has("jx_pmap: in_axes[0] = 0 is out of range for input 0");
  jx_fn_release(p);
  jx_fn_release(f);
}

int main(void) {
  jx_set_cpu_device_count(8);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(in_out_axes_and_axis_index, setup, teardown),
      cmocka_unit_test_setup_teardown(psum_and_its_gradient, setup, teardown),
      cmocka_unit_test_setup_teardown(many_axes, setup, teardown),
      cmocka_unit_test_setup_teardown(errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
