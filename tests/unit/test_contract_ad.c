/* Transformations of the contractions: jx_grad of small matmul and conv
 * losses against gradients computed with JAX, and vmap of matmul against the
 * batched matmul.
 *
 * The expected numbers were produced with JAX 64-bit mode by
 *   X = (np.arange(12.0).reshape(3, 4) - 5) / 8
 *   W = (np.arange(8.0).reshape(4, 2) - 3) / 4
 *   loss = lambda X, W: jnp.sum((X @ W) ** 3)
 *   jax.grad(loss, argnums=(0, 1))(X, W)
 *   jax.grad(lambda X, W: jnp.sum(jax.grad(loss, argnums=1)(X, W)))(X, W)   # second order
 * and for the conv
 *   x = (np.arange(40.0).reshape(1, 2, 5, 4) % 7 - 3) / 4
 *   w = (np.arange(24.0).reshape(4, 1, 3, 2) % 5 - 2) / 2
 *   y = lax.conv_general_dilated(x, w, (2, 1), [(1, 1), (0, 1)], rhs_dilation=(1, 2),
 *         dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=2)
 *   jax.grad(lambda x, w: jnp.sum(y(x, w) ** 2), argnums=(0, 1))(x, w)
 * and for a preferred element type (bf16 operands, f32 result, bf16 gradients)
 *   x = ((np.arange(6.0).reshape(2, 3) - 2) / 4).astype(jnp.bfloat16)
 *   w = ((np.arange(6.0).reshape(3, 2) % 5 - 1) / 2).astype(jnp.bfloat16)
 *   y = lax.dot_general(x, w, (([1], [0]), ([], [])), preferred_element_type=jnp.float32)
 *   jax.grad(lambda x, w: jnp.sum(y(x, w) ** 3), argnums=(0, 1))(x, w)
 * All inputs and results are dyadic fractions, so the checks are tight. */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>

#include <math.h>
#include <string.h>
#include <cmocka.h>
#include "test_util.h"

/* An f64 array of shape s with elements (i % mod - sub) / div. */
static jx_array *ramp(jx_shape s, int mod, double sub, double div) {
  double buf[64];
  int64_t n = 1;
  for (int i = 0; i < s.rank; i++) n *= s.dims[i];
  assert_true(n <= 64);
  for (int64_t i = 0; i < n; i++) buf[i] = ((double)(i % mod) - sub) / div;
  return jx_array_from(JX_F64, s, buf);
}

static void expect_values(jx_array *a, const double *want, int64_t n) {
  if (jx_last_status()) print_error("error: %s\n", jx_last_error());
  assert_int_equal(jx_last_status(), JX_OK);
  assert_int_equal(jx_size(a), n);
  assert_int_equal(jx_dtype_of(a), JX_F64);
  double got[64];
  assert_true(n <= 64);
  assert_int_equal(jx_read(a, got, sizeof(double) * (size_t)n), JX_OK);
  for (int64_t i = 0; i < n; i++) {
    if (fabs(got[i] - want[i]) > 1e-12)
      print_error("element %lld: %.17g, want %.17g\n", (long long)i, got[i], want[i]);
    assert_true(fabs(got[i] - want[i]) <= 1e-12);
  }
}

/* sum(a * b) over every dim, as one dot_general (a scalar). */
static jx_array *inner(jx_array *a, jx_array *b) {
  jx_axes all = {jx_ndim(a), {0}};
  for (int i = 0; i < all.n; i++) all.v[i] = i;
  return jx_dot_general(a, b, all, all, JX_AXES(), JX_AXES());
}

/* sum((X @ W) ** 3) */
static void cube_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *y = jx_matmul(in[0], in[1]);
  out[0] = inner(jx_mul(y, y), y);
}

static const double kGX[12] = {-0.2431640625, -0.0732421875, 0.0966796875, 0.2666015625,
                               -0.4306640625, -0.0732421875, 0.2841796875, 0.6416015625,
                               -1.3681640625, -0.0732421875, 1.2216796875, 2.5166015625};
static const double kGW[8] = {-0.10986328125, 0.779296875, 0.,           1.125,
                              0.10986328125,  1.470703125, 0.2197265625, 1.81640625};
static const double kHX[12] = {2.14453125,  1.16015625, 0.17578125, -0.80859375,
                               0.08203125,  0.59765625, 1.11328125, 1.62890625,
                               -6.48046875, 1.53515625, 9.55078125, 17.56640625};

static void test_grad_matmul_loss(void **state) {
  (void)state;
  jx_array *x[2] = {ramp(JX_SHAPE(3, 4), 12, 5, 8), ramp(JX_SHAPE(4, 2), 8, 3, 4)};
  jx_fn *f = jx_fn_create("cube_loss", 2, 1, cube_loss, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0, 1));
  jx_array *out[2];
  assert_int_equal(jx_call(g, x, out), JX_OK);
  expect_values(out[0], kGX, 12);
  expect_values(out[1], kGW, 8);
  jx_fn_release(g);
  jx_fn_release(f);
}

/* sum(grad_W loss): differentiating it again runs the JVP of the transposed
 * dot_generals of the first gradient. */
typedef struct {
  jx_fn *grad_w;
} sum_grad_ctx;

static void sum_grad_w(void *ctx, jx_array *const *in, jx_array **out) {
  sum_grad_ctx *c = ctx;
  jx_array *gw;
  jx_call(c->grad_w, in, &gw);
  out[0] = inner(gw, jx_ones(JX_F64, JX_SHAPE(4, 2)));
}

static void test_second_order_matmul_loss(void **state) {
  (void)state;
  jx_array *x[2] = {ramp(JX_SHAPE(3, 4), 12, 5, 8), ramp(JX_SHAPE(4, 2), 8, 3, 4)};
  jx_fn *f = jx_fn_create("cube_loss", 2, 1, cube_loss, NULL);
  sum_grad_ctx c = {jx_grad(f, JX_AXES(1))};
  jx_fn *s = jx_fn_create("sum_grad_w", 2, 1, sum_grad_w, &c);
  jx_fn *h = jx_grad(s, JX_AXES(0));
  jx_array *out;
  assert_int_equal(jx_call(h, x, &out), JX_OK);
  expect_values(out, kHX, 12);
  jx_fn_release(h);
  jx_fn_release(s);
  jx_fn_release(c.grad_w);
  jx_fn_release(f);
}

/* sum(conv(x, w) ** 2) with feature groups, strides, padding and rhs dilation */
static void conv_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *y =
      jx_conv_general_dilated(in[0], in[1], JX_SHAPE(2, 1), JX_SHAPE(1, 0), JX_SHAPE(1, 1),
                              JX_SHAPE(), JX_SHAPE(1, 2), "NCHW,OIHW,NCHW", 2);
  out[0] = inner(y, y);
}

static const double kConvGX[40] = {-1.25,  -0.375, -4.,   0.5,    0.5,   1.375, 7.75,   -3.375,
                                   -0.5,   -0.625, 0.,    0.,     2.375, 4.125, -6.5,   -1.625,
                                   -0.125, 0.125,  0.25,  0.,     3.,    -3.75, -4.75,  0.,
                                   0.5,    1.625,  4.125, 2.875,  -4.25, -2.75, -3.25,  -0.25,
                                   1.75,   0.,     5.375, -0.625, -3.,   -1.,   -1.875, 2.125};
static const double kConvGW[24] = {-2.1875, -0.6875, -1.5625, 0.6875,  6.8125,  -5.,
                                   -1.,     0.25,    3.8125,  0.375,   -4.3125, 0.0625,
                                   -1.75,   0.1875,  5.375,   -1.1875, -2.5625, 0.3125,
                                   1.875,   5.875,   -7.8125, -1.4375, 3.75,    2.75};

static void test_grad_conv_loss(void **state) {
  (void)state;
  jx_array *x[2] = {ramp(JX_SHAPE(1, 2, 5, 4), 7, 3, 4), ramp(JX_SHAPE(4, 1, 3, 2), 5, 2, 2)};
  jx_fn *f = jx_fn_create("conv_loss", 2, 1, conv_loss, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0, 1));
  jx_array *out[2];
  assert_int_equal(jx_call(g, x, out), JX_OK);
  expect_values(out[0], kConvGX, 40);
  expect_values(out[1], kConvGW, 24);
  jx_fn_release(g);
  jx_fn_release(f);
}

/* sum(dot(x, w) ** 3) with bf16 operands and an f32 result */
static void pref_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *y =
      jx_dot_general_typed(in[0], in[1], JX_AXES(1), JX_AXES(0), JX_AXES(), JX_AXES(), JX_F32);
  out[0] = inner(jx_mul(y, y), y);
}

static void test_grad_preferred_type(void **state) {
  (void)state;
  static const double gx[6] = {-0.0234375, 0.2109375, -0.0234375, -2.34375, 2.390625, 7.0};
  static const double gw[6] = {1.1484375, -0.08203125, 2.328125, -0.0234375, 3.515625, 0.03515625};
  jx_array *x[2] = {jx_astype(ramp(JX_SHAPE(2, 3), 6, 2, 4), JX_BF16),
                    jx_astype(ramp(JX_SHAPE(3, 2), 5, 1, 2), JX_BF16)};
  jx_fn *f = jx_fn_create("pref_loss", 2, 1, pref_loss, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0, 1));
  jx_array *out[2];
  assert_int_equal(jx_call(g, x, out), JX_OK);
  assert_int_equal(jx_dtype_of(out[0]), JX_BF16);
  assert_int_equal(jx_dtype_of(out[1]), JX_BF16);
  expect_values(jx_astype(out[0], JX_F64), gx, 6);
  expect_values(jx_astype(out[1], JX_F64), gw, 6);
  jx_fn_release(g);
  jx_fn_release(f);
}

static void matmul_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_matmul(in[0], in[1]);
}

/* got and want have one shape and equal elements (exact: both are f64 sums of
 * the same products in the same order) */
static void expect_same(jx_array *got, jx_array *want) {
  if (jx_last_status()) print_error("error: %s\n", jx_last_error());
  assert_int_equal(jx_last_status(), JX_OK);
  jx_shape gs = jx_shape_of(got), ws = jx_shape_of(want);
  assert_int_equal(gs.rank, ws.rank);
  for (int i = 0; i < ws.rank; i++) assert_int_equal(gs.dims[i], ws.dims[i]);
  double a[128], b[128];
  assert_true(jx_size(want) <= 128);
  size_t bytes = sizeof(double) * (size_t)jx_size(want);
  assert_int_equal(jx_read(got, a, bytes), JX_OK);
  assert_int_equal(jx_read(want, b, bytes), JX_OK);
  assert_memory_equal(a, b, bytes);
}

static void test_vmap_matmul(void **state) {
  (void)state;
  jx_array *a = ramp(JX_SHAPE(5, 3, 4), 60, 29, 16), *b = ramp(JX_SHAPE(5, 4, 2), 40, 17, 8);
  jx_array *b0 = ramp(JX_SHAPE(4, 2), 8, 3, 4), *a0 = ramp(JX_SHAPE(3, 4), 12, 5, 8);
  jx_fn *f = jx_fn_create("matmul", 2, 1, matmul_body, NULL);
  jx_array *out;
  /* both mapped: a batched matmul */
  jx_fn *v = jx_vmap(f, JX_AXES(0, 0), JX_AXES(0));
  assert_int_equal(jx_call(v, (jx_array *[]){a, b}, &out), JX_OK);
  expect_same(out, jx_matmul(a, b));
  jx_fn_release(v);
  /* lhs mapped only: the batch becomes a free dim of the lhs */
  v = jx_vmap(f, JX_AXES(0, JX_NONE), JX_AXES(0));
  assert_int_equal(jx_call(v, (jx_array *[]){a, b0}, &out), JX_OK);
  expect_same(out, jx_matmul(a, b0));
  jx_fn_release(v);
  /* rhs mapped along its middle axis, results stacked last */
  v = jx_vmap(f, JX_AXES(JX_NONE, 1), JX_AXES(2));
  jx_array *bt = jx_transpose(b, JX_AXES(1, 0, 2)); /* [4, 5, 2] */
  assert_int_equal(jx_call(v, (jx_array *[]){a0, bt}, &out), JX_OK);
  expect_same(out, jx_transpose(jx_matmul(a0, b), JX_AXES(1, 2, 0)));
  jx_fn_release(v);
  jx_fn_release(f);
}

static void conv_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_conv_general_dilated(in[0], in[1], JX_SHAPE(2, 1), JX_SHAPE(1, 0), JX_SHAPE(1, 1),
                                   JX_SHAPE(), JX_SHAPE(1, 2), "NCHW,OIHW,NCHW", 2);
}

/* vmap of a grouped conv with the kernel mapped equals a loop over the kernels;
 * over an empty batch it gives an empty result of the right shape */
static void test_vmap_conv(void **state) {
  (void)state;
  jx_array *x = ramp(JX_SHAPE(1, 2, 5, 4), 7, 3, 4);
  jx_array *w[2] = {ramp(JX_SHAPE(4, 1, 3, 2), 5, 2, 2), ramp(JX_SHAPE(4, 1, 3, 2), 7, 3, 4)};
  jx_fn *f = jx_fn_create("conv", 2, 1, conv_body, NULL);
  jx_fn *v = jx_vmap(f, JX_AXES(JX_NONE, 0), JX_AXES(0));
  jx_array *out, *per[2];
  assert_int_equal(jx_call(v, (jx_array *[]){x, jx_stack(2, w, 0)}, &out), JX_OK);
  for (int k = 0; k < 2; k++) assert_int_equal(jx_call(f, (jx_array *[]){x, w[k]}, &per[k]), JX_OK);
  expect_same(out, jx_stack(2, per, 0));
  jx_fn_release(v);
  v = jx_vmap(f, JX_AXES(0, JX_NONE), JX_AXES(0));
  assert_int_equal(
      jx_call(v, (jx_array *[]){jx_zeros(JX_F64, JX_SHAPE(0, 1, 2, 5, 4)), w[0]}, &out), JX_OK);
  jx_shape s = jx_shape_of(out);
  assert_int_equal(s.rank, 5);
  assert_int_equal(s.dims[0], 0);
  assert_int_equal(s.dims[2], 4);
  assert_int_equal(s.dims[3], 3);
  assert_int_equal(s.dims[4], 3);
  jx_fn_release(v);
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_grad_matmul_loss, setup, teardown),
      cmocka_unit_test_setup_teardown(test_second_order_matmul_loss, setup, teardown),
      cmocka_unit_test_setup_teardown(test_grad_conv_loss, setup, teardown),
      cmocka_unit_test_setup_teardown(test_grad_preferred_type, setup, teardown),
      cmocka_unit_test_setup_teardown(test_vmap_matmul, setup, teardown),
      cmocka_unit_test_setup_teardown(test_vmap_conv, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
