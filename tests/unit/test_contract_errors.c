/* Errors of the contractions: dot_general, matmul, einsum and conv reject bad
 * input with a message naming the op, the shapes and the bad value. */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>

#include <string.h>
#include <cmocka.h>

#include "trace/dispatch.h"
#include "test_util.h"

/* Checks that r is poisoned, the status is code, and the message holds every
 * NULL-terminated fragment; then clears the error for the next check. */
static void expect_error_(jx_array *r, jx_status code, const char *first, ...) {
  if (!jx_is_poisoned(r)) print_error("no error where one naming '%s' was expected\n", first);
  assert_true(jx_is_poisoned(r));
  if (jx_last_status() != code) print_error("message: %s\n", jx_last_error());
  assert_int_equal(jx_last_status(), code);
  va_list ap;
  va_start(ap, first);
  for (const char *s = first; s; s = va_arg(ap, const char *)) {
    if (!strstr(jx_last_error(), s)) print_error("'%s' not in: %s\n", s, jx_last_error());
    assert_non_null(strstr(jx_last_error(), s));
  }
  va_end(ap);
  jx_clear_error();
}
#define expect_error(r, code, ...) expect_error_((r), (code), __VA_ARGS__, (const char *)NULL)

static jx_array *f32(jx_shape s) { return jx_zeros(JX_F32, s); }

static void matmul_errors(void **state) {
  (void)state;
  int line = __LINE__ + 1;
  jx_array *r = jx_matmul(f32(JX_SHAPE(2, 3)), f32(JX_SHAPE(4, 5)));
  char where[64];
  snprintf(where, sizeof where, "test_contract_errors.c:%d: jx_matmul:", line);
  expect_error(r, JX_ERR_SHAPE, where, "inner dimensions differ", "f32[2,3]", "f32[4,5]",
               "(3 vs 4)");
  expect_error(jx_matmul(f32(JX_SHAPE(3)), f32(JX_SHAPE(2, 4))), JX_ERR_SHAPE, "jx_matmul",
               "(3 vs 2)");
  expect_error(jx_matmul(f32(JX_SHAPE()), f32(JX_SHAPE(3))), JX_ERR_SHAPE, "jx_matmul",
               "at least 1-D", "f32[]");
  expect_error(jx_matmul(f32(JX_SHAPE(2, 3, 4)), f32(JX_SHAPE(3, 4, 5))), JX_ERR_SHAPE, "jx_matmul",
               "do not broadcast", "[2]", "[3]");
  expect_error(jx_matmul(NULL, f32(JX_SHAPE(3))), JX_ERR_INVALID_ARGUMENT, "jx_matmul",
               "argument 0 is NULL");
}

static void poison_propagates_without_a_new_error(void **state) {
  (void)state;
  jx_array *bad = jx_matmul(f32(JX_SHAPE(2, 3)), f32(JX_SHAPE(4, 5)));
  jx_array *r = jx_einsum("ij,jk->ik", 2, (jx_array *[]){bad, f32(JX_SHAPE(5, 2))});
  r = jx_conv(r, f32(JX_SHAPE(1, 1, 1, 1)), JX_SHAPE(), JX_SHAPE(), JX_SHAPE(), NULL);
  expect_error(r, JX_ERR_SHAPE, "jx_matmul", "inner dimensions differ");
}

static void dot_general_errors(void **state) {
  (void)state;
  jx_array *a = f32(JX_SHAPE(2, 3)), *b = f32(JX_SHAPE(4, 5));
  expect_error(jx_dot_general(a, b, JX_AXES(1), JX_AXES(1), JX_AXES(), JX_AXES()), JX_ERR_SHAPE,
               "dot_general", "contracting dimensions differ in size", "lhs dim 1 has size 3",
               "rhs dim 1 has size 5", "f32[2,3]", "f32[4,5]");
  expect_error(jx_dot_general(a, b, JX_AXES(2), JX_AXES(0), JX_AXES(), JX_AXES()),
               JX_ERR_INVALID_ARGUMENT, "dot_general", "lhs contracting dimension 2",
               "out of range for rank 2");
  expect_error(jx_dot_general(a, a, JX_AXES(1, 1), JX_AXES(1, 0), JX_AXES(), JX_AXES()),
               JX_ERR_INVALID_ARGUMENT, "lhs contracting dimension 1 appears twice", "[1,1]");
  expect_error(jx_dot_general(a, a, JX_AXES(1), JX_AXES(), JX_AXES(), JX_AXES()),
               JX_ERR_INVALID_ARGUMENT, "as many lhs as rhs contracting dimensions", "[1]", "[]");
  expect_error(jx_dot_general(a, a, JX_AXES(0), JX_AXES(0), JX_AXES(0), JX_AXES(1)),
               JX_ERR_INVALID_ARGUMENT, "dimension 0 is both a lhs contracting and a lhs batch");
  expect_error(jx_dot_general(f32(JX_SHAPE(2, 3, 4)), f32(JX_SHAPE(3, 4, 5)), JX_AXES(2),
                              JX_AXES(1), JX_AXES(0), JX_AXES(0)),
               JX_ERR_SHAPE, "batch dimensions differ in size", "lhs dim 0 has size 2",
               "rhs dim 0 has size 3");
  expect_error(jx_dot_general_typed(a, f32(JX_SHAPE(3, 2)), JX_AXES(1), JX_AXES(0), JX_AXES(),
                                    JX_AXES(), JX_I32),
               JX_ERR_DTYPE, "preferred element type i32 is incompatible with operand dtype f32");
  jx_array *i = jx_zeros(JX_I32, JX_SHAPE(2, 2));
  expect_error(jx_dot_general_typed(i, i, JX_AXES(1), JX_AXES(0), JX_AXES(), JX_AXES(), JX_I8),
               JX_ERR_DTYPE, "preferred element type i8 is incompatible with operand dtype i32");
}

static void dot_general_primitive_rejects_mixed_dtypes(void **state) {
  (void)state;
  jx_array *in[2] = {f32(JX_SHAPE(2)), jx_zeros(JX_F64, JX_SHAPE(2))};
  jx_params p = JX_PARAMS_INIT;
  expect_error(jx_bind1(&jx_prim_dot_general, 2, in, &p), JX_ERR_DTYPE,
               "dot_general: operands must have one dtype", "f32[2]", "f64[2]");
}

static void einsum_errors(void **state) {
  (void)state;
  jx_array *m = f32(JX_SHAPE(2, 3)), *n = f32(JX_SHAPE(4, 5)), *c = f32(JX_SHAPE(2, 3, 4));
  expect_error(jx_einsum("ij,jk->ik", 1, &m), JX_ERR_INVALID_ARGUMENT, "jx_einsum",
               "names 2 operands but 1 were given");
  expect_error(jx_einsum("ij->k", 1, &m), JX_ERR_INVALID_ARGUMENT,
               "output label 'k' is not an input label");
  expect_error(jx_einsum("ij->ii", 1, &m), JX_ERR_INVALID_ARGUMENT,
               "output label 'i' appears twice");
  expect_error(jx_einsum("i.j", 1, &m), JX_ERR_INVALID_ARGUMENT, "'.' that is not part of");
  expect_error(jx_einsum("i1", 1, &m), JX_ERR_INVALID_ARGUMENT, "invalid character '1'");
  expect_error(jx_einsum("...i...", 1, &m), JX_ERR_INVALID_ARGUMENT, "more than one \"...\"");
  expect_error(jx_einsum("ij->i->j", 1, &m), JX_ERR_INVALID_ARGUMENT, "malformed \"->\"");
  expect_error(jx_einsum("i>j", 1, &m), JX_ERR_INVALID_ARGUMENT, "malformed \"->\"");
  expect_error(jx_einsum("ij", 1, &c), JX_ERR_SHAPE, "term \"ij\" names 2 dims",
               "operand 0 is f32[2,3,4]");
  expect_error(jx_einsum("ij,jk->ik", 2, (jx_array *[]){m, n}), JX_ERR_SHAPE,
               "label 'j' has size 4 in operand 1 but 3");
  expect_error(jx_einsum("ii->i", 1, &m), JX_ERR_SHAPE, "label 'i' repeats in operand 0",
               "sizes 2 and 3");
  expect_error(jx_einsum("...i,...i", 2, (jx_array *[]){c, f32(JX_SHAPE(2, 4))}), JX_ERR_SHAPE,
               "\"...\" dims of operand 1 do not broadcast");
  expect_error(jx_einsum(NULL, 1, &m), JX_ERR_INVALID_ARGUMENT, "jx_einsum", "no spec");
  expect_error(jx_einsum("ij", 0, &m), JX_ERR_INVALID_ARGUMENT, "jx_einsum");
}

static void conv_errors(void **state) {
  (void)state;
  jx_array *x = f32(JX_SHAPE(1, 5, 5, 3)), *w = f32(JX_SHAPE(3, 3, 2, 4));
  const char *nhwc = "NHWC,HWIO,NHWC";
  expect_error(jx_conv(x, w, JX_SHAPE(), JX_SHAPE(), JX_SHAPE(), nhwc), JX_ERR_SHAPE, "jx_conv",
               "f32[1,5,5,3] has 3 features", "f32[3,3,2,4] expects 2");
  jx_array *w3 = f32(JX_SHAPE(3, 3, 3, 4));
  expect_error(jx_conv(x, w3, JX_SHAPE(), JX_SHAPE(), JX_SHAPE(), "NHWC,HWIO"),
               JX_ERR_INVALID_ARGUMENT, "jx_conv", "three comma-separated specs");
  expect_error(jx_conv(x, w3, JX_SHAPE(), JX_SHAPE(), JX_SHAPE(), "XHWC,HWIO,NHWC"),
               JX_ERR_INVALID_ARGUMENT, "\"XHWC\" needs one 'N'");
  expect_error(jx_conv(x, w3, JX_SHAPE(), JX_SHAPE(), JX_SHAPE(), "NHWC,HWOO,NHWC"),
               JX_ERR_INVALID_ARGUMENT, "letter 'O' repeats");
  expect_error(jx_conv(x, w3, JX_SHAPE(), JX_SHAPE(), JX_SHAPE(), "NHWC,HDIO,NHWC"),
               JX_ERR_INVALID_ARGUMENT, "spatial dim 'D' of the kernel is missing");
  expect_error(jx_conv(x, w3, JX_SHAPE(), JX_SHAPE(), JX_SHAPE(), "NWC,WIO,NWC"), JX_ERR_SHAPE,
               "\"NWC\" has 3 letters but the operands have rank 4");
  expect_error(jx_conv(x, w3, JX_SHAPE(1), JX_SHAPE(), JX_SHAPE(), nhwc), JX_ERR_INVALID_ARGUMENT,
               "strides has 1 entries but there are 2 spatial dims");
  expect_error(jx_conv(x, w3, JX_SHAPE(0, 1), JX_SHAPE(), JX_SHAPE(), nhwc),
               JX_ERR_INVALID_ARGUMENT, "window strides must be positive, got 0");
  expect_error(jx_conv(x, w3, JX_SHAPE(), JX_SHAPE(-3, 0), JX_SHAPE(-3, 0), nhwc), JX_ERR_SHAPE,
               "negative padding (-3, -3) is larger than spatial dim 0 of size 5");
  expect_error(jx_conv(x, f32(JX_SHAPE(3, 3, 3)), JX_SHAPE(), JX_SHAPE(), JX_SHAPE(), nhwc),
               JX_ERR_SHAPE, "jx_conv", "one rank");
  /* groups: 4 features in 2 groups need I = 2 and O a multiple of 2 */
  jx_array *x4 = f32(JX_SHAPE(1, 5, 5, 4));
  expect_error(jx_conv_general_dilated(x4, f32(JX_SHAPE(3, 3, 2, 3)), JX_SHAPE(), JX_SHAPE(),
                                       JX_SHAPE(), JX_SHAPE(), JX_SHAPE(), nhwc, 2),
               JX_ERR_SHAPE, "output feature size 3 must be a multiple of feature_group_count 2");
  expect_error(jx_conv_general_dilated(x4, f32(JX_SHAPE(3, 3, 1, 4)), JX_SHAPE(), JX_SHAPE(),
                                       JX_SHAPE(), JX_SHAPE(), JX_SHAPE(), nhwc, 2),
               JX_ERR_SHAPE, "has 4 features", "expects 1 x 2 groups = 2");
  expect_error(jx_conv_general_dilated(x4, f32(JX_SHAPE(3, 3, 4, 4)), JX_SHAPE(), JX_SHAPE(),
                                       JX_SHAPE(), JX_SHAPE(), JX_SHAPE(0, 1), nhwc, 1),
               JX_ERR_INVALID_ARGUMENT, "rhs dilation must be positive");
  expect_error(jx_conv_general_dilated(x4, f32(JX_SHAPE(3, 3, 4, 4)), JX_SHAPE(), JX_SHAPE(),
                                       JX_SHAPE(), JX_SHAPE(), JX_SHAPE(), nhwc, 0),
               JX_ERR_INVALID_ARGUMENT, "feature_group_count (0)");
}

static void conv_primitive_group_errors(void **state) {
  (void)state;
  jx_params p = JX_PARAMS_INIT;
  for (int s = 5; s < 8; s++) {
    p.l[s].n = 3;
    for (int i = 0; i < 3; i++) p.l[s].v[i] = i;
  }
  p.i[0] = 2;
  p.i[1] = 2;
  jx_array *in[2] = {f32(JX_SHAPE(4, 4, 5)), f32(JX_SHAPE(4, 2, 3))};
  expect_error(jx_bind1(&jx_prim_conv_general_dilated, 2, in, &p), JX_ERR_INVALID_ARGUMENT,
               "conv_general_dilated",
               "at most one of feature_group_count (2) and "
               "batch_group_count (2)");
  p.i[0] = 1;
  p.i[1] = 3;
  in[1] = f32(JX_SHAPE(6, 4, 3));
  expect_error(jx_bind1(&jx_prim_conv_general_dilated, 2, in, &p), JX_ERR_SHAPE,
               "batch_group_count 3 must divide the lhs batch size 4");
  p.i[1] = 1;
  p.l[6].v[2] = 0; /* not a permutation */
  expect_error(jx_bind1(&jx_prim_conv_general_dilated, 2, in, &p), JX_ERR_INVALID_ARGUMENT,
               "the rhs spec is not a permutation");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(matmul_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(poison_propagates_without_a_new_error, setup, teardown),
      cmocka_unit_test_setup_teardown(dot_general_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(dot_general_primitive_rejects_mixed_dtypes, setup, teardown),
      cmocka_unit_test_setup_teardown(einsum_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(conv_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(conv_primitive_group_errors, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
