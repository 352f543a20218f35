/* Transformations of the shape, slicing and indexing primitives: jx_grad,
 * jx_jvp and jx_vmap at the points the conformance grad mode cannot probe
 * (ties, duplicate indices, zero updates, gather's NaN fill, negative
 * padding), against numbers computed with JAX.
 *
 * The expected numbers were produced with JAX 0.x in 64-bit mode
 * (jax.config.update("jax_enable_x64", True)) by:
 *   dn = lax.ScatterDimensionNumbers((), (0,), (0,))
 *   # scatter_mul: JAX raises NotImplementedError for duplicate indices, so the
 *   # reference is the same function written as a product (jnp.prod's
 *   # gradient handles the zero update):
 *   x = [1.5, -2, .5, 3]; idx = [2, 0, 2, 2, 1]; u = [2, -.5, 0, 4, 1.5]; w = [1, 2, 3, 4]
 *   ref = lambda x, u: jnp.sum(w * x * jnp.prod(jnp.where(idx[:, None] == jnp.arange(4),
 *                                                         u[:, None], 1.), axis=0))
 *   jax.grad(ref, (0, 1))(x, u)
 *   # scatter_max with a tie with the operand and between updates:
 *   jax.grad(lambda x, u: jnp.sum(jnp.array([1., 2., 3.]) * lax.scatter_max(
 *       x, jnp.array([[1], [1], [0], [2]]), u, dn)), (0, 1))([1., 5., 2.], [5., 5., .5, 3.])
 *   # scatter with duplicates (the last update wins):
 *   jax.grad(lambda x, u: jnp.sum(jnp.array([1., 2., 3.]) * lax.scatter(
 *       x, jnp.array([[0], [2], [0]]), u, dn)), (0, 1))([1., 2., 3.], [10., 20., 30.])
 *   # gather in fill mode (tangents of filled rows are 0):
 *   gdn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
 *                                    start_index_map=(0,))
 *   g = lambda x: lax.gather(x, jnp.array([[2], [5], [0], [-1], [2]]), gdn, (1, 2), mode="fill")
 *   jax.grad(lambda x: jnp.sum(wg * jnp.nan_to_num(g(x))))(np.arange(6.).reshape(3, 2))
 *     with wg = np.arange(10.).reshape(5, 2) + 1
 *   # pad with negative low and interior padding:
 *   jax.grad(lambda x, v: jnp.sum(np.arange(1., 13.).reshape(4, 3) * lax.pad(
 *       x, v, [(-1, 2, 1), (1, -1, 0)])), (0, 1))([[1., 2, 3], [4, 5, 6]], .5)
 *   # dynamic_update_slice (start 3 clamps to 2):
 *   jax.grad(lambda x, u: jnp.sum(np.arange(1., 5.) * lax.dynamic_update_slice(
 *       x, u, (3,))), (0, 1))(np.zeros(4), np.zeros(2))
 *   # broadcast_in_dim with an expanded size-1 dim:
 *   jax.grad(lambda x: jnp.sum(np.arange(1., 13.).reshape(3, 2, 2) *
 *       lax.broadcast_in_dim(x, (3, 2, 2), (1, 2))))(np.array([[1.], [2.]]))
 *   # vmap with batched indices / starts (negative starts wrap once, then clamp):
 *   xb = np.arange(12.).reshape(3, 4)
 *   jax.vmap(lambda a, i: jnp.take(a, i, mode="fill"))(xb, [[3, 0], [1, 1], [2, -1]])
 *   jax.vmap(lambda a, s: lax.dynamic_slice(a, (s,), (2,)))(xb, [2, -1, 1])
 *   jax.vmap(lambda a, s: lax.dynamic_update_slice(a, np.array([-1., -2.]), (s,)))(
 *       xb, [2, -1, 1]) */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "test_util.h"

static jx_array *f64(jx_shape s, const double *v) { return jx_array_from(JX_F64, s, v); }
static jx_array *i32(jx_shape s, const int32_t *v) { return jx_array_from(JX_I32, s, v); }

static void expect_values(jx_array *a, const double *want, int64_t n) {
  if (jx_last_status()) print_error("error: %s\n", jx_last_error());
  assert_int_equal(jx_last_status(), JX_OK);
  assert_int_equal(jx_size(a), n);
  double got[64];
  jx_array *d = jx_astype(a, JX_F64);
  assert_int_equal(jx_read(d, got, sizeof(double) * (size_t)n), JX_OK);
  for (int64_t i = 0; i < n; i++) {
    if (fabs(got[i] - want[i]) > 1e-12)
      print_error("element %lld: %.17g, want %.17g\n", (long long)i, got[i], want[i]);
    assert_true(fabs(got[i] - want[i]) <= 1e-12);
  }
}

/* sum(w * y) over all dims */
static jx_array *weighted(jx_array *w, jx_array *y) { return jx_sum(jx_mul(w, y), JX_AXES(), 0); }

/* A scalar-index scatter along dim 0 of a rank-1 operand: dims ((), (0,), (0,)). */
typedef struct {
  jx_array *idx, *w;
  jx_scatter_op op;
} scatter_ctx;

static void scatter_loss(void *ctx, jx_array *const *in, jx_array **out) {
  scatter_ctx *c = ctx;
  const jx_scatter_dims kScalarScatter = {JX_AXES(), JX_AXES(0), JX_AXES(0), 1};
  out[0] =
      weighted(c->w, jx_scatter(in[0], c->idx, in[1], &kScalarScatter, c->op, JX_SCATTER_DROP));
}

static void grad2(scatter_ctx *c, jx_array *x, jx_array *u, jx_array **g) {
  jx_fn *f = jx_fn_create("scatter_loss", 2, 1, scatter_loss, c);
  jx_fn *gf = jx_grad(f, JX_AXES(0, 1));
  assert_int_equal(jx_call(gf, (jx_array *[]){x, u}, g), JX_OK);
  jx_fn_release(gf);
  jx_fn_release(f);
}

/* Duplicate indices and a zero update: each update's derivative is the
 * product of the others at its element (JAX needs unique_indices here). */
static void test_scatter_mul_duplicates(void **state) {
  (void)state;
  static const double x[] = {1.5, -2, 0.5, 3}, u[] = {2, -0.5, 0, 4, 1.5}, w[] = {1, 2, 3, 4};
  static const int32_t idx[] = {2, 0, 2, 2, 1};
  scatter_ctx c = {i32(JX_SHAPE(5, 1), idx), f64(JX_SHAPE(4), w), JX_SCATTER_MUL};
  jx_array *g[2];
  grad2(&c, f64(JX_SHAPE(4), x), f64(JX_SHAPE(5), u), g);
  static const double gx[] = {-0.5, 3.0, 0.0, 4.0}, gu[] = {0.0, 1.5, 12.0, 0.0, -4.0};
  expect_values(g[0], gx, 4);
  expect_values(g[1], gu, 5);
}

/* Ties share the tangent: JAX's _scatter_extremal_jvp. */
static void test_scatter_max_ties(void **state) {
  (void)state;
  static const double x[] = {1, 5, 2}, u[] = {5, 5, 0.5, 3}, w[] = {1, 2, 3};
  static const int32_t idx[] = {1, 1, 0, 2};
  scatter_ctx c = {i32(JX_SHAPE(4, 1), idx), f64(JX_SHAPE(3), w), JX_SCATTER_MAX};
  jx_array *g[2];
  grad2(&c, f64(JX_SHAPE(3), x), f64(JX_SHAPE(4), u), g);
  static const double gx[] = {1.0, 0.6666666666666665, 0.0};
  static const double gu[] = {0.6666666666666666, 0.6666666666666666, 0.0, 3.0};
  expect_values(g[0], gx, 3);
  expect_values(g[1], gu, 4);
}

/* Only the winning (last) update of a duplicated index gets a gradient. */
static void test_scatter_set_duplicates(void **state) {
  (void)state;
  static const double x[] = {1, 2, 3}, u[] = {10, 20, 30}, w[] = {1, 2, 3};
  static const int32_t idx[] = {0, 2, 0};
  scatter_ctx c = {i32(JX_SHAPE(3, 1), idx), f64(JX_SHAPE(3), w), JX_SCATTER_REPLACE};
  jx_array *g[2];
  grad2(&c, f64(JX_SHAPE(3), x), f64(JX_SHAPE(3), u), g);
  static const double gx[] = {0, 2, 0}, gu[] = {0, 3, 1};
  expect_values(g[0], gx, 3);
  expect_values(g[1], gu, 3);
}

/* ---- gather in fill mode: the filled rows have zero tangent ---- */
static const int32_t kGatherIdx[] = {2, 5, 0, -1, 2};

static void gather_body(void *ctx, jx_array *const *in, jx_array **out) {
  const jx_gather_dims kRows = {JX_AXES(1), JX_AXES(0), JX_AXES(0), 1};
  out[0] = jx_gather(in[0], ctx, &kRows, JX_SHAPE(1, 2), JX_GATHER_FILL);
}

static void test_gather_fill(void **state) {
  (void)state;
  double x[6], w[10];
  for (int i = 0; i < 6; i++) x[i] = i;
  for (int i = 0; i < 10; i++) w[i] = i + 1;
  jx_array *idx = i32(JX_SHAPE(5, 1), kGatherIdx), *xa = f64(JX_SHAPE(3, 2), x);
  jx_fn *g = jx_fn_create("gather", 1, 1, gather_body, idx);
  jx_fn *j = jx_jvp(g);
  jx_array *out[2];
  double ones[6] = {1, 1, 1, 1, 1, 1};
  assert_int_equal(jx_call(j, (jx_array *[]){xa, f64(JX_SHAPE(3, 2), ones)}, out), JX_OK);
  static const double tangent[] = {1, 1, 0, 0, 1, 1, 0, 0, 1, 1};
  expect_values(out[1], tangent, 10);
  /* the cotangent: sum(w * gather(x)) is NaN, its gradient is not */
  jx_fn *v = jx_vjp(g);
  jx_array *vo[2];
  assert_int_equal(jx_call(v, (jx_array *[]){xa, f64(JX_SHAPE(5, 2), w)}, vo), JX_OK);
  static const double gx[] = {5, 6, 0, 0, 10, 12};
  expect_values(vo[1], gx, 6);
  jx_fn_release(v);
  jx_fn_release(j);
  jx_fn_release(g);
}

/* ---- pad, dynamic_update_slice, broadcast_in_dim ---- */
static void pad_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  double w[12];
  for (int i = 0; i < 12; i++) w[i] = i + 1;
  jx_array *y = jx_pad_general(in[0], in[1], JX_SHAPE(-1, 1), JX_SHAPE(2, -1), JX_SHAPE(1, 0));
  out[0] = weighted(f64(JX_SHAPE(4, 3), w), y);
}

static void test_pad_negative_interior(void **state) {
  (void)state;
  static const double x[] = {1, 2, 3, 4, 5, 6}, v = 0.5;
  jx_fn *f = jx_fn_create("pad_loss", 2, 1, pad_loss, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0, 1));
  jx_array *out[2];
  assert_int_equal(jx_call(g, (jx_array *[]){f64(JX_SHAPE(2, 3), x), f64(JX_SHAPE(), &v)}, out),
                   JX_OK);
  static const double gx[] = {0, 0, 0, 5, 6, 0}, gv[] = {67};
  expect_values(out[0], gx, 6);
  expect_values(out[1], gv, 1);
  jx_fn_release(g);
  jx_fn_release(f);
}

static void dus_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  static const double w[] = {1, 2, 3, 4};
  static const int32_t start = 3;
  jx_array *s = jx_array_from(JX_I32, JX_SHAPE(), &start);
  out[0] = weighted(f64(JX_SHAPE(4), w), jx_dynamic_update_slice(in[0], in[1], &s));
}

static void test_dynamic_update_slice_clamped(void **state) {
  (void)state;
  static const double z[4] = {0};
  jx_fn *f = jx_fn_create("dus_loss", 2, 1, dus_loss, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0, 1));
  jx_array *out[2];
  assert_int_equal(jx_call(g, (jx_array *[]){f64(JX_SHAPE(4), z), f64(JX_SHAPE(2), z)}, out),
                   JX_OK);
  static const double gx[] = {1, 2, 0, 0}, gu[] = {3, 4};
  expect_values(out[0], gx, 4);
  expect_values(out[1], gu, 2);
  jx_fn_release(g);
  jx_fn_release(f);
}

static void bcast_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  double w[12];
  for (int i = 0; i < 12; i++) w[i] = i + 1;
  out[0] = weighted(f64(JX_SHAPE(3, 2, 2), w),
                    jx_broadcast_in_dim(in[0], JX_SHAPE(3, 2, 2), JX_AXES(1, 2)));
}

static void test_broadcast_in_dim_expanded(void **state) {
  (void)state;
  static const double x[] = {1, 2};
  jx_fn *f = jx_fn_create("bcast_loss", 1, 1, bcast_loss, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_array *out;
  assert_int_equal(jx_call(g, (jx_array *[]){f64(JX_SHAPE(2, 1), x)}, &out), JX_OK);
  static const double gx[] = {33, 45};
  expect_values(out, gx, 2);
  jx_fn_release(g);
  jx_fn_release(f);
}

/* ---- vmap with batched indices and starts ---- */
static void take_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_take(in[0], in[1], 0);
}
static void ds_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_dynamic_slice(in[0], &in[1], JX_SHAPE(2));
}
static void dus_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  static const double u[] = {-1, -2};
  out[0] = jx_dynamic_update_slice(in[0], f64(JX_SHAPE(2), u), &in[1]);
}

static jx_array *vmapped(const char *name, jx_body body, jx_array *a, jx_array *b) {
  jx_fn *f = jx_fn_create(name, 2, 1, body, NULL);
  jx_fn *v = jx_vmap(f, JX_AXES(0, 0), JX_AXES(0));
  jx_array *out = NULL;
  assert_int_equal(jx_call(v, (jx_array *[]){a, b}, &out), JX_OK);
  jx_fn_release(v);
  jx_fn_release(f);
  return out;
}

static void test_vmap_batched_indices(void **state) {
  (void)state;
  double x[12];
  for (int i = 0; i < 12; i++) x[i] = i;
  jx_array *xb = f64(JX_SHAPE(3, 4), x);
  static const int32_t ib[] = {3, 0, 1, 1, 2, -1}, sb[] = {2, -1, 1};
  static const double take[] = {3, 0, 5, 5, 10, 11}, ds[] = {2, 3, 6, 7, 9, 10};
  static const double dus[] = {0, 1, -1, -2, 4, 5, -1, -2, 8, -1, -2, 11};
  expect_values(vmapped("take", take_body, xb, i32(JX_SHAPE(3, 2), ib)), take, 6);
  expect_values(vmapped("ds", ds_body, xb, i32(JX_SHAPE(3), sb)), ds, 6);
  expect_values(vmapped("dus", dus_body, xb, i32(JX_SHAPE(3), sb)), dus, 12);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_scatter_mul_duplicates, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scatter_max_ties, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scatter_set_duplicates, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gather_fill, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pad_negative_interior, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dynamic_update_slice_clamped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_broadcast_in_dim_expanded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_vmap_batched_indices, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
