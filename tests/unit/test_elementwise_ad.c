/* Transformations of elementwise compositions: jx_grad, second derivatives
 * (grad of grad), jx_jvp and jx_vmap of small functions built from the
 * unary, binary, selection and conversion primitives, against JAX.
 *
 * The expected numbers were produced with JAX 0.10 in 64-bit mode by
 *   x = jnp.array([-2.0, -0.5, 0.25, 1.0, 3.0])
 *   softplus_loss = lambda x: jnp.sum(jax.nn.softplus(x) * x)
 *   gelu = lambda x: jax.nn.gelu(x, approximate=True)
 *   piece = lambda x: jnp.where(x > 0.5, jnp.sin(x) * x ** 2, jnp.expm1(x) - jnp.tanh(x))
 *   special = lambda x: jnp.sum(lax.lgamma(x + 3.0) + lax.digamma(x + 3.0) + lax.erf(x))
 *   clampy = lambda x: jnp.sum(lax.clamp(-1.0, x, 2.0) * x)
 *   conv = lambda x: jnp.sum(x.astype(jnp.float32).astype(jnp.float64) ** 3)
 *   sg = lambda x: jnp.sum(x * lax.stop_gradient(x))
 *   jax.grad(softplus_loss)(x)
 *   jax.grad(lambda x: jnp.sum(jax.grad(softplus_loss)(x)))(x)
 *   jax.vmap(jax.grad(gelu))(x), jax.vmap(jax.grad(jax.grad(gelu)))(x)   (same for piece)
 *   jax.grad(special)(x), jax.grad(lambda x: jnp.sum(jax.grad(special)(x)))(x)
 *   jax.grad(clampy)(x), jax.grad(conv)(x), jax.grad(sg)(x)
 *   t = jnp.array([1.0, -1.0, 0.5, 2.0, 0.25])
 *   jax.jvp(lambda x: jax.nn.softplus(x) * jnp.abs(x), (x,), (t,))
 * and printed with repr(). */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>

#include <math.h>
#include <string.h>
#include <cmocka.h>
#include "test_util.h"

enum { N = 5 };
static const double kX[N] = {-2.0, -0.5, 0.25, 1.0, 3.0};

static jx_array *vec(const double *v, int64_t n) { return jx_array_from(JX_F64, JX_SHAPE(n), v); }
static jx_array *f64(double v) { return jx_scalar(JX_F64, v); }
static jx_array *total(jx_array *a) { return jx_sum(a, JX_AXES(), 0); }

static void expect_values(jx_array *a, const double *want, int64_t n, double tol) {
  if (jx_last_status()) print_error("error: %s\n", jx_last_error());
  assert_int_equal(jx_last_status(), JX_OK);
  assert_int_equal(jx_size(a), n);
  assert_int_equal(jx_dtype_of(a), JX_F64);
  double got[16];
  assert_true(n <= 16);
  assert_int_equal(jx_read(a, got, sizeof(double) * (size_t)n), JX_OK);
  for (int64_t i = 0; i < n; i++) {
    double lim = tol * (1 + fabs(want[i]));
    if (!(fabs(got[i] - want[i]) <= lim))
      print_error("element %lld: %.17g, want %.17g\n", (long long)i, got[i], want[i]);
    assert_true(fabs(got[i] - want[i]) <= lim);
  }
}

/* Calls a one-input one-output function on x. */
static jx_array *call1(jx_fn *f, jx_array *x) {
  jx_array *out[1];
  jx_call(f, &x, out);
  return out[0];
}

/* ---- the functions ---- */
static void softplus_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = total(jx_mul(jx_softplus(in[0]), in[0]));
}
static void gelu(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_gelu(in[0]);
}
static void piece(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0];
  out[0] = jx_where(jx_gt(x, f64(0.5)), jx_mul(jx_sin(x), jx_integer_pow(x, 2)),
                    jx_sub(jx_expm1(x), jx_tanh(x)));
}
static void special(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x3 = jx_add(in[0], f64(3.0));
  out[0] = total(jx_add(jx_add(jx_lgamma(x3), jx_digamma(x3)), jx_erf(in[0])));
}
static void clampy(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = total(jx_mul(jx_clamp(f64(-1.0), in[0], f64(2.0)), in[0]));
}
static void conv(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = total(jx_integer_pow(jx_astype(jx_astype(in[0], JX_F32), JX_F64), 3));
}
static void sg(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = total(jx_mul(in[0], jx_stop_gradient(in[0])));
}
static void softplus_abs(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(jx_softplus(in[0]), jx_abs(in[0]));
}

/* sum(grad(f)(x)): its gradient is the row sums of f's Hessian */
static void sum_of_grad(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = total(call1(ctx, in[0]));
}

/* grad(f)(x) and grad(sum(grad(f)))(x) */
static void check_grad_and_hessian(jx_body body, const char *name, const double *g,
                                   const double *h) {
  jx_fn *f = jx_fn_create(name, 1, 1, body, NULL);
  jx_fn *df = jx_grad(f, JX_AXES());
  jx_array *x = vec(kX, N);
  expect_values(call1(df, x), g, N, 1e-12);
  jx_fn *s = jx_fn_create("sum_of_grad", 1, 1, sum_of_grad, df);
  jx_fn *ds = jx_grad(s, JX_AXES());
  expect_values(call1(ds, x), h, N, 1e-12);
  jx_fn_release(ds);
  jx_fn_release(s);
  jx_fn_release(df);
  jx_fn_release(f);
}

/* vmap(grad(f))(x) and vmap(grad(grad(f)))(x) for a scalar f */
static void check_vmap_grads(jx_body body, const char *name, const double *g, const double *h) {
  jx_fn *f = jx_fn_create(name, 1, 1, body, NULL);
  jx_fn *df = jx_grad(f, JX_AXES()), *ddf = jx_grad(df, JX_AXES());
  jx_fn *vdf = jx_vmap(df, JX_AXES(), JX_AXES()), *vddf = jx_vmap(ddf, JX_AXES(), JX_AXES());
  jx_array *x = vec(kX, N);
  expect_values(call1(vdf, x), g, N, 1e-12);
  expect_values(call1(vddf, x), h, N, 1e-12);
  jx_fn_release(vddf);
  jx_fn_release(vdf);
  jx_fn_release(ddf);
  jx_fn_release(df);
  jx_fn_release(f);
}

static void softplus_grad_and_hessian(void **state) {
  (void)state;
  static const double g[N] = {-0.11147783300126257, 0.285306649781034, 0.9664835451002932,
                              2.044320266148228, 5.906309732041041};
  static const double h[N] = {0.02841867323722208, 0.6375794814954936, 1.1858865224559958,
                              1.6587290905014918, 2.0406782328376027};
  check_grad_and_hessian(softplus_loss, "softplus_loss", g, h);
}

static void gelu_vmap_of_grad_and_grad_grad(void **state) {
  (void)state;
  static const double g[N] = {-0.08609925662361839, 0.1326300964653577, 0.6953540951510604,
                              1.0829640838457828, 1.0115841666309702};
  static const double h[N] = {-0.1078750799510784, 0.6155068951159849, 0.7489486142236502,
                              0.24214819798377296, -0.03176765888607594};
  check_vmap_grads(gelu, "gelu", g, h);
}

static void where_piecewise_vmap_of_grads(void **state) {
  (void)state;
  static const double g[N] = {0.06468445838344838, -0.17991707325329398, 0.3440105678813634,
                              2.2232442754839328, -8.063212421044806};
  static const double h[N] = {-0.0008834041905002588, -0.12033132167095384, 1.7444797755063073,
                              3.002680208280456, -12.867750015624416};
  check_vmap_grads(piece, "piece", g, h);
}

/* lgamma' = digamma, digamma' = polygamma(1), and their second derivatives
 * polygamma(1) and polygamma(2): checks the polygamma row as well */
static void special_functions_grad_and_hessian(void **state) {
  (void)state;
  static const double g[N] = {1.088385387300785, 2.0722969756809233, 2.436803330753873,
                              1.9550481215895106, 1.8875798772208625};
  static const double h[N] = {-0.6765117980545907, 1.1329362833939527, -0.2983657215175922,
                              -0.6264317713491885, 0.14769770518032038};
  jx_fn *f = jx_fn_create("special", 1, 1, special, NULL);
  jx_fn *df = jx_grad(f, JX_AXES());
  jx_array *x = vec(kX, N);
  expect_values(call1(df, x), g, N, 1e-12);
  jx_fn *s = jx_fn_create("sum_of_grad", 1, 1, sum_of_grad, df);
  jx_fn *ds = jx_grad(s, JX_AXES());
  expect_values(call1(ds, x), h, N, 1e-11); /* polygamma(2) through its series */
  jx_fn_release(ds);
  jx_fn_release(s);
  jx_fn_release(df);
  jx_fn_release(f);
}

static void clamp_convert_and_stop_gradient_grads(void **state) {
  (void)state;
  static const double gc[N] = {-1.0, -1.0, 0.5, 2.0, 2.0};
  static const double gv[N] = {12.0, 0.75, 0.1875, 3.0, 27.0};
  static const double gs[N] = {-2.0, -0.5, 0.25, 1.0, 3.0};
  jx_body bodies[3] = {clampy, conv, sg};
  const double *want[3] = {gc, gv, gs};
  for (int k = 0; k < 3; k++) {
    jx_fn *f = jx_fn_create("f", 1, 1, bodies[k], NULL);
    jx_fn *df = jx_grad(f, JX_AXES());
    expect_values(call1(df, vec(kX, N)), want[k], N, 0);
    jx_fn_release(df);
    jx_fn_release(f);
  }
}

static void jvp_of_softplus_times_abs(void **state) {
  (void)state;
  static const double t[N] = {1.0, -1.0, 0.5, 2.0, 0.25};
  static const double y[N] = {0.253856022085945, 0.23703849209005334, 0.20648485496971092,
                              1.3132616875182228, 9.145762054721226};
  static const double ty[N] = {0.11147783300126257, 0.285306649781034, 0.4832417725501466,
                               4.088640532296456, 1.4765774330102603};
  jx_fn *f = jx_fn_create("softplus_abs", 1, 1, softplus_abs, NULL);
  jx_fn *jf = jx_jvp(f);
  jx_array *in[2] = {vec(kX, N), vec(t, N)}, *out[2];
  assert_int_equal(jx_call(jf, in, out), JX_OK);
  expect_values(out[0], y, N, 1e-14);
  expect_values(out[1], ty, N, 1e-14);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* ---- vmap of select_n and clamp with per-example scalar operands ---- */
/* jax.nn.relu's derivative is 0 at 0 (a custom JVP; maximum's own rule
 * gives 1/2 there), under grad, vmap of grad, jvp and jit of grad; the
 * second derivative is 0 everywhere. */
static void relu_total(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = total(jx_mul(jx_relu(in[0]), f64(3)));
}

static void relu_grad_is_jax_nn_relus(void **state) {
  (void)state;
  static const double x[5] = {-1, -0.0, 0, 1e-300, 2}, g[5] = {0, 0, 0, 3, 3}, h[5] = {0};
  jx_fn *f = jx_fn_create("relu_total", 1, 1, relu_total, NULL);
  jx_fn *df = jx_grad(f, JX_AXES()), *jdf = jx_jit(df, NULL);
  jx_fn *s = jx_fn_create("sum_of_grad", 1, 1, sum_of_grad, df);
  jx_fn *ds = jx_grad(s, JX_AXES());
  expect_values(call1(df, vec(x, 5)), g, 5, 0);
  expect_values(call1(jdf, vec(x, 5)), g, 5, 0);
  expect_values(call1(ds, vec(x, 5)), h, 5, 0);
  jx_fn *jf = jx_jvp(f); /* tangent ones: 3 * (number of x > 0) */
  jx_array *out[2];
  double ones[5] = {1, 1, 1, 1, 1}, want = 6;
  assert_int_equal(jx_call(jf, (jx_array *[]){vec(x, 5), vec(ones, 5)}, out), JX_OK);
  expect_values(out[1], &want, 1, 0);
  jx_fn *fns[] = {jf, ds, s, jdf, df, f};
  for (int i = 0; i < 6; i++) jx_fn_release(fns[i]);
}

static void select_scalar_which(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *cases[2] = {in[1], jx_neg(in[1])};
  out[0] = jx_select_n(in[0], 2, cases);
}
static void clamp_scalar_lo(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_clamp(in[0], in[1], f64(1.0));
}

static void vmap_with_batched_scalar_predicate_and_bound(void **state) {
  (void)state;
  /* which: bool[3] mapped, cases f64[3, 2] mapped: row k is -a[k] where which[k] */
  const uint8_t w[3] = {1, 0, 1};
  const double a[6] = {1, 2, 3, 4, 5, 6};
  jx_fn *f = jx_fn_create("sel", 2, 1, select_scalar_which, NULL);
  jx_fn *vf = jx_vmap(f, JX_AXES(0, 0), JX_AXES(0));
  jx_array *in[2] = {jx_array_from(JX_BOOL, JX_SHAPE(3), w),
                     jx_array_from(JX_F64, JX_SHAPE(3, 2), a)},
           *out[1];
  assert_int_equal(jx_call(vf, in, out), JX_OK);
  static const double want_sel[6] = {-1, -2, 3, 4, -5, -6};
  expect_values(out[0], want_sel, 6, 0);
  /* the same with the cases unmapped: each row selects from a[0:2] */
  jx_fn *vf2 = jx_vmap(f, JX_AXES(0, JX_NONE), JX_AXES(0));
  in[1] = vec(a, 2);
  assert_int_equal(jx_call(vf2, in, out), JX_OK);
  static const double want_sel2[6] = {-1, -2, 1, 2, -1, -2};
  expect_values(out[0], want_sel2, 6, 0);
  /* clamp: lo mapped f64[3] (a per-example scalar), x unmapped f64[4] */
  const double lo[3] = {-1.0, 0.0, 0.5}, x[4] = {-2.0, -0.25, 0.75, 3.0};
  jx_fn *g = jx_fn_create("clamp_lo", 2, 1, clamp_scalar_lo, NULL);
  jx_fn *vg = jx_vmap(g, JX_AXES(0, JX_NONE), JX_AXES(0));
  jx_array *gin[2] = {vec(lo, 3), vec(x, 4)};
  assert_int_equal(jx_call(vg, gin, out), JX_OK);
  static const double want_clamp[12] = {-1.0, -0.25, 0.75, 1.0, 0.0,  0.0,
                                        0.75, 1.0,   0.5,  0.5, 0.75, 1.0};
  expect_values(out[0], want_clamp, 12, 0);
  jx_fn_release(vg);
  jx_fn_release(g);
  jx_fn_release(vf2);
  jx_fn_release(vf);
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(softplus_grad_and_hessian, setup, teardown),
      cmocka_unit_test_setup_teardown(relu_grad_is_jax_nn_relus, setup, teardown),
      cmocka_unit_test_setup_teardown(gelu_vmap_of_grad_and_grad_grad, setup, teardown),
      cmocka_unit_test_setup_teardown(where_piecewise_vmap_of_grads, setup, teardown),
      cmocka_unit_test_setup_teardown(special_functions_grad_and_hessian, setup, teardown),
      cmocka_unit_test_setup_teardown(clamp_convert_and_stop_gradient_grads, setup, teardown),
      cmocka_unit_test_setup_teardown(jvp_of_softplus_times_abs, setup, teardown),
      cmocka_unit_test_setup_teardown(vmap_with_batched_scalar_predicate_and_bound, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
