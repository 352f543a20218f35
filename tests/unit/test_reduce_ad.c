/* Transformations of the reduction family: jx_grad, jx_jvp and jx_vmap of
 * small composite functions (cross-entropy through log_softmax, logsumexp,
 * a layer-norm-like mean/var normalization, max pooling) and of the choosing
 * ops at their conventions (ties, zeros), against JAX.
 *
 * The expected numbers were produced with JAX 0.10.2 in 64-bit mode
 * (jax.config.update("jax_enable_x64", True)) by these lines (ramp as in
 * this file):
 *   ramp = lambda shape, mul, mod, sub, div, fine:
 *       (((i * mul) % mod - sub) / div + i / fine).reshape(shape), i = arange(size)
 *   X = ramp((4, 5), 7, 13, 6, 4, 128); W = ramp((4, 5), 3, 7, 3, 2, 64)
 *   L = np.eye(5)[[1, 4, 0, 2]]
 *   ce = lambda x: -jnp.sum(L * jax.nn.log_softmax(x, axis=-1)) / 4
 *   kCE = ce(X); kCEGrad = jax.grad(ce)(X)
 *   kLSEGrad = jax.grad(lambda x: jnp.sum(W[:, 0] * jax.nn.logsumexp(x, axis=1)))(X)
 *   kLSEHvp = jax.jvp(jax.grad(jax.nn.logsumexp), (X,), (W,))[1]
 *   ln = lambda x: jnp.sum(W * (x - jnp.mean(x, -1, keepdims=True))
 *                          / jnp.sqrt(jnp.var(x, -1, keepdims=True) + 1e-5))
 *   kLNGrad = jax.grad(ln)(X)
 *   P = ramp((1, 4, 5, 2), 5, 11, 5, 4, 256); PW = ramp((1, 2, 3, 2), 3, 5, 2, 2, 32)
 *   mp = lambda x: jnp.sum(PW * lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1),
 *                                                 (1, 2, 2, 1), "SAME"))
 *   kPoolGrad = jax.grad(mp)(P)
 *   kCEPerExample = jax.vmap(jax.grad(lambda x, l: -jnp.sum(l * jax.nn.log_softmax(x))))(X, L)
 *   kMaxTies = jax.grad(jnp.max)([1., 3., 2., 3.])
 *   kProdZeros = jax.grad(jnp.prod)([2., 0., 3., .5]); kProdTwoZeros: [2., 0., 3., 0.]
 *   S = [.5, -1., 2., .25, 1.5]; SW = [1., 2., 3., 4., 5.]
 *   kSortGrad = jax.grad(lambda x: jnp.sum(jnp.sort(x) * SW))(S)
 *   kCumprodGrad = jax.grad(lambda x: jnp.sum(jnp.cumprod(x) * SW))([2., 0., 3., .5, -1.])
 *   kCummaxGrad = jax.grad(lambda x: jnp.sum(lax.cummax(x) * SW))(S)
 *   kTopkGrad = jax.grad(lambda x: jnp.sum(lax.top_k(x, 2)[0] * SW[:2]))(S)
 *   kProdHess = jax.grad(lambda x: jnp.sum(jax.grad(jnp.prod)(x) * SW[:4]))([2., 0., 3., .5])
 * printed with repr (17 significant digits). */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "prims/prims.h"
#include "trace/dispatch.h"
#include "test_util.h"

static const double kCE[1] = {1.7440941772206728};
static const double kCEGrad[20] = {
    0.014393192551524573, -0.1665232745958028,  0.018772262010062216, 0.1088741747475351,
    0.02448364528668089,  0.05526715397580673,  0.01242848817991764,  0.07208195758309378,
    0.01620980443825593,  -0.15598740417707407, -0.22524345296993328, 0.1435814515082044,
    0.03228862433745554,  0.007261072030224973, 0.04211230509404834,  0.014393192551524573,
    0.08347672540419722,  -0.2312277379899378,  0.1088741747475351,   0.02448364528668089};
static const double kLSEGrad[20] = {
    -0.08635915530914745,  -0.5008603524251833,   -0.1126335720603733,   -0.6532450484852106,
    -0.14690187172008534,  -0.20379763028578732,  -0.045830050163446295, -0.2658022185876583,
    -0.059773653866068734, -0.3466714470970393,   -0.03404025216634175,  -0.19742449582378105,
    -0.04439685846400137,  -0.009983974041559339, -0.05790441950431647,  0.01349361801705429,
    0.07825943006643489,   0.017598995634433328,  0.10206953882581415,   0.022953417456263333};
static const double kLSEHvp[20] = {
    -0.014593208443339513, -0.014417674810295973, 0.012548632961891211, -0.04712881925555655,
    0.009996855369191222,  -0.0984098451817288,   0.00473077102379216,  -0.17653244710742533,
    -0.004665046636782721, 0.17612963261000392,   -0.0202160482566395,  0.1477563227990522,
    -0.04479788344068855,  0.0033273912486383034, -0.08246625285020279, -0.0010661132315333039,
    0.09518991826382181,   -0.008441030748127666, 0.08325968505289756,  -0.02020483936696767};
static const double kLNGrad[20] = {
    -2.1680270395204833,   0.018414223990451145, 1.5882874146352006,   -0.5042738948749591,
    1.0655992957697904,    -1.0655992957697906,  0.5042738948749592,   -1.5882874146352008,
    -0.018414223990451083, 2.1680270395204833,   -0.21407415570311036, 1.1872517852120066,
    -0.7302442589202027,   1.0034809915486014,   -1.246414362137295,   0.755056663364989,
    0.6156992786051655,    -0.11908547346133558, -0.258442858221159,   -0.9932276102876605};
static const double kPoolGrad[40] = {
    0.0,    0.0,      -1.0, 0.0,     -0.4375, 0.0,     0.0, 0.0, 0.125,   0.0,
    0.0,    0.0,      0.0,  0.53125, 0.0,     1.09375, 0.0, 0.0, 0.0,     -0.84375,
    0.0,    -0.28125, 0.0,  0.0,     1.25,    0.0,     0.0, 0.0, -0.6875, 0.0,
    0.6875, 0.0,      0.0,  0.0,     0.0,     0.28125, 0.0, 0.0, 0.0,     0.84375};
static const double kCEPerExample[20] = {
    0.057572770206098293, -0.6660930983832112,  0.07508904804024887, 0.4354966989901404,
    0.09793458114672356,  0.22106861590322693,  0.04971395271967056, 0.28832783033237513,
    0.06483921775302372,  -0.6239496167082963,  -0.9009738118797331, 0.5743258060328176,
    0.12915449734982215,  0.029044288120899892, 0.16844922037619336, 0.057572770206098293,
    0.3339069016167889,   -0.9249109519597511,  0.4354966989901404,  0.09793458114672356};
static const double kMaxTies[4] = {0.0, 0.5, 0.0, 0.5};
static const double kProdZeros[4] = {0.0, 3.0, 0.0, 0.0};
static const double kProdTwoZeros[4] = {0.0, 0.0, 0.0, 0.0};
static const double kSortGrad[5] = {3.0, 1.0, 5.0, 2.0, 4.0};
static const double kCumprodGrad[5] = {1.0, 19.0, 0.0, 0.0, 0.0};
static const double kCummaxGrad[5] = {3.0, 0.0, 12.0, 0.0, 0.0};
static const double kTopkGrad[5] = {0.0, 0.0, 1.0, 0.0, 2.0};
static const double kProdHess[4] = {3.0, 28.5, 2.0, 12.0};

/* An f64 array of shape s with elements ((i * mul) % mod - sub) / div + i / fine. */
static jx_array *ramp(jx_shape s, int mul, int mod, double sub, double div, double fine) {
  double buf[64];
  int64_t n = 1;
  for (int i = 0; i < s.rank; i++) n *= s.dims[i];
  assert_true(n <= 64);
  for (int64_t i = 0; i < n; i++)
    buf[i] = ((double)((i * mul) % mod) - sub) / div + (double)i / fine;
  return jx_array_from(JX_F64, s, buf);
}

static jx_array *vec(int n, const double *v) { return jx_array_from(JX_F64, JX_SHAPE(n), v); }

/* a equals want elementwise within 1e-12 (relative to max(1, |want|)) */
static void expect_values(jx_array *a, const double *want, int64_t n) {
  if (jx_last_status()) print_error("error: %s\n", jx_last_error());
  assert_int_equal(jx_last_status(), JX_OK);
  assert_int_equal(jx_size(a), n);
  assert_int_equal(jx_dtype_of(a), JX_F64);
  double got[128];
  assert_true(n <= 128);
  assert_int_equal(jx_read(a, got, sizeof(double) * (size_t)n), JX_OK);
  for (int64_t i = 0; i < n; i++) {
    double tol = 1e-12 * (fabs(want[i]) > 1 ? fabs(want[i]) : 1);
    if (!(fabs(got[i] - want[i]) <= tol))
      print_error("element %lld: %.17g, want %.17g\n", (long long)i, got[i], want[i]);
    assert_true(fabs(got[i] - want[i]) <= tol);
  }
}

/* grad of f (one input) at x equals want */
static void expect_grad(jx_body body, void *ctx, jx_array *x, const double *want) {
  jx_fn *f = jx_fn_create("f", 1, 1, body, ctx);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_array *out = NULL;
  assert_int_equal(jx_call(g, &x, &out), JX_OK);
  expect_values(out, want, jx_size(x));
  jx_fn_release(g);
  jx_fn_release(f);
}

static jx_array *dot_all(jx_array *a, jx_array *b) { return jx_sum(jx_mul(a, b), JX_AXES(), 0); }

static jx_array *X(void) { return ramp(JX_SHAPE(4, 5), 7, 13, 6, 4, 128); }
static jx_array *W(void) { return ramp(JX_SHAPE(4, 5), 3, 7, 3, 2, 64); }
static jx_array *labels(void) {
  static const int cls[4] = {1, 4, 0, 2};
  double l[20] = {0};
  for (int r = 0; r < 4; r++) l[r * 5 + cls[r]] = 1;
  return jx_array_from(JX_F64, JX_SHAPE(4, 5), l);
}

/* ---- softmax: jax.nn.softmax's custom JVP ---- */
static void softmax_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = dot_all(W(), jx_softmax(in[0], -1));
}

static int count_word(const char *text, const char *word) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, word)); p += strlen(word)) n++;
  return n;
}

/* The gradient is y * (w - sum(y * w)) per row (y the softmax, computed here
 * in double); reverse mode keeps only y: one exp and one division, and no
 * gradient through the row max (no eq mask). */
static void test_softmax_custom_jvp(void **state) {
  (void)state;
  double x[20], w[20], want[20];
  assert_int_equal(jx_read(X(), x, sizeof x), JX_OK);
  assert_int_equal(jx_read(W(), w, sizeof w), JX_OK);
  for (int r = 0; r < 4; r++) {
    double m = -INFINITY, z = 0, yw = 0, y[5];
    for (int c = 0; c < 5; c++) m = fmax(m, x[r * 5 + c]);
    for (int c = 0; c < 5; c++) z += y[c] = exp(x[r * 5 + c] - m);
    for (int c = 0; c < 5; c++) yw += (y[c] /= z) * w[r * 5 + c];
    for (int c = 0; c < 5; c++) want[r * 5 + c] = y[c] * (w[r * 5 + c] - yw);
  }
  expect_grad(softmax_body, NULL, X(), want);
  jx_fn *f = jx_fn_create("f", 1, 1, softmax_body, NULL);
  jx_fn *df = jx_grad(f, JX_AXES(0)), *g = jx_jit(df, NULL);
  jx_array *in = X();
  char *ir = jx_fn_ir(g, &in);
  assert_non_null(ir);
  assert_int_equal(count_word(ir, "= exp "), 1);
  assert_int_equal(count_word(ir, "= eq "), 0);
  assert_int_equal(count_word(ir, "= div "), 1); /* y itself: the backward pass divides nothing */
  free(ir);
  jx_fn_release(g);
  jx_fn_release(df);
  jx_fn_release(f);
}

/* ---- cross-entropy through log_softmax ---- */
static void ce_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *s = dot_all(labels(), jx_log_softmax(in[0], -1));
  out[0] = jx_div(jx_neg(s), jx_scalar(JX_F64, 4));
}

static void test_cross_entropy(void **state) {
  (void)state;
  jx_array *out;
  ce_body(NULL, (jx_array *[]){X()}, &out);
  expect_values(out, kCE, 1);
  expect_grad(ce_body, NULL, X(), kCEGrad);
}

/* per-example gradients: vmap of grad over the rows of logits and labels */
static void ce1_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_neg(dot_all(in[1], jx_log_softmax(in[0], -1)));
}

static void test_per_example_grad(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("ce1", 2, 1, ce1_body, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_fn *v = jx_vmap(g, JX_AXES(0, 0), JX_AXES(0));
  jx_array *out;
  assert_int_equal(jx_call(v, (jx_array *[]){X(), labels()}, &out), JX_OK);
  expect_values(out, kCEPerExample, 20);
  jx_fn_release(v);
  /* the same with the batch along the last axis of both inputs, out along axis 1 */
  v = jx_vmap(g, JX_AXES(1, 1), JX_AXES(1));
  jx_array *xt = jx_transpose(X(), JX_AXES(1, 0)), *lt = jx_transpose(labels(), JX_AXES(1, 0));
  assert_int_equal(jx_call(v, (jx_array *[]){xt, lt}, &out), JX_OK);
  expect_values(jx_transpose(out, JX_AXES(1, 0)), kCEPerExample, 20);
  jx_fn_release(v);
  jx_fn_release(g);
  jx_fn_release(f);
}

/* ---- logsumexp ---- */
static void lse_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *w0 = jx_slice(W(), JX_SHAPE(0, 0), JX_SHAPE(4, 1), JX_SHAPE());
  out[0] = dot_all(jx_reshape(w0, JX_SHAPE(4)), jx_logsumexp(in[0], JX_AXES(1), 0));
}

static void lse_all_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_logsumexp(in[0], JX_AXES(), 0);
}

static void test_logsumexp(void **state) {
  (void)state;
  expect_grad(lse_body, NULL, X(), kLSEGrad);
  /* a Hessian-vector product: jvp of grad (the transposes differentiated again) */
  jx_fn *f = jx_fn_create("lse", 1, 1, lse_all_body, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_fn *j = jx_jvp(g);
  jx_array *out[2];
  assert_int_equal(jx_call(j, (jx_array *[]){X(), W()}, out), JX_OK);
  expect_values(out[1], kLSEHvp, 20);
  jx_fn_release(j);
  jx_fn_release(g);
  jx_fn_release(f);
  /* vmap over the columns equals logsumexp over axis 0 */
  jx_fn *v = jx_vmap(f = jx_fn_create("lse", 1, 1, lse_all_body, NULL), JX_AXES(1), JX_AXES(0));
  jx_array *got;
  assert_int_equal(jx_call(v, (jx_array *[]){X()}, &got), JX_OK);
  double want[5];
  assert_int_equal(jx_read(jx_logsumexp(X(), JX_AXES(0), 0), want, sizeof want), JX_OK);
  expect_values(got, want, 5);
  jx_fn_release(v);
  jx_fn_release(f);
}

/* ---- layer-norm-like normalization ---- */
static void ln_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0];
  jx_array *m = jx_mean(x, JX_AXES(-1), 1), *v = jx_var(x, JX_AXES(-1), 1);
  jx_array *y = jx_div(jx_sub(x, m), jx_sqrt(jx_add(v, jx_scalar(JX_F64, 1e-5))));
  out[0] = dot_all(W(), y);
}

static void test_layer_norm(void **state) {
  (void)state;
  expect_grad(ln_body, NULL, X(), kLNGrad);
}

/* ---- max pooling ---- */
static jx_array *P(void) { return ramp(JX_SHAPE(1, 4, 5, 2), 5, 11, 5, 4, 256); }

static void pool_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *y = jx_max_pool(in[0], JX_SHAPE(2, 2), JX_SHAPE(2, 2), "SAME");
  out[0] = dot_all(ramp(JX_SHAPE(1, 2, 3, 2), 3, 5, 2, 2, 32), y);
}

static void test_max_pool(void **state) {
  (void)state;
  expect_grad(pool_body, NULL, P(), kPoolGrad);
  /* vmap of the gradient over a batch of the input and its negation equals
   * the two gradients (the rules of pad, slice and select_n batched) */
  jx_fn *f = jx_fn_create("pool", 1, 1, pool_body, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_fn *v = jx_vmap(g, JX_AXES(2), JX_AXES(0));
  jx_array *xs = jx_stack(2, (jx_array *[]){P(), jx_neg(P())}, 2), *got, *g0, *g1;
  assert_int_equal(jx_call(v, &xs, &got), JX_OK);
  assert_int_equal(jx_call(g, (jx_array *[]){P()}, &g0), JX_OK);
  assert_int_equal(jx_call(g, (jx_array *[]){jx_neg(P())}, &g1), JX_OK);
  double want[80];
  assert_int_equal(jx_read(jx_stack(2, (jx_array *[]){g0, g1}, 0), want, sizeof want), JX_OK);
  expect_values(got, want, 80);
  jx_fn_release(v);
  jx_fn_release(g);
  jx_fn_release(f);
}

/* ---- conventions at ties and zeros ---- */
static void max_body(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_max(in[0], JX_AXES(), 0);
}
static void prod_body(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_prod(in[0], JX_AXES(), 0);
}
static const double kSW[5] = {1, 2, 3, 4, 5};
static void sort_body(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = dot_all(jx_sort(in[0], 0), vec(5, kSW));
}
static void cumprod_body(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = dot_all(jx_cumprod(in[0], 0), vec(5, kSW));
}
static void cummax_body(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = dot_all(jx_cummax(in[0], 0), vec(5, kSW));
}
static void top_k_body(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *vals, *idx;
  jx_top_k(in[0], 2, &vals, &idx);
  out[0] = dot_all(vals, vec(2, kSW));
}

static void test_choosers_and_zeros(void **state) {
  (void)state;
  static const double ties[4] = {1, 3, 2, 3}, z1[4] = {2, 0, 3, 0.5}, z2[4] = {2, 0, 3, 0};
  static const double s[5] = {0.5, -1, 2, 0.25, 1.5}, c[5] = {2, 0, 3, 0.5, -1};
  expect_grad(max_body, NULL, vec(4, ties), kMaxTies);
  expect_grad(prod_body, NULL, vec(4, z1), kProdZeros);
  expect_grad(prod_body, NULL, vec(4, z2), kProdTwoZeros);
  expect_grad(sort_body, NULL, vec(5, s), kSortGrad);
  expect_grad(cumprod_body, NULL, vec(5, c), kCumprodGrad);
  expect_grad(cummax_body, NULL, vec(5, s), kCummaxGrad);
  expect_grad(top_k_body, NULL, vec(5, s), kTopkGrad);
}

/* second order through the product tree: grad of sum(grad(prod)(x) * w) */
typedef struct {
  jx_fn *grad_prod;
} hess_ctx;

static void hess_body(void *ctx, jx_array *const *in, jx_array **out) {
  hess_ctx *h = ctx;
  jx_array *g;
  jx_call(h->grad_prod, in, &g);
  out[0] = dot_all(g, vec(4, kSW));
}

static void test_prod_second_order(void **state) {
  (void)state;
  static const double z1[4] = {2, 0, 3, 0.5};
  jx_fn *f = jx_fn_create("prod", 1, 1, prod_body, NULL);
  hess_ctx h = {jx_grad(f, JX_AXES(0))};
  expect_grad(hess_body, &h, vec(4, z1), kProdHess);
  jx_fn_release(h.grad_prod);
  jx_fn_release(f);
}

/* ---- windows with base and window dilation (not reachable through the
 * public ops): derivatives against central differences to second order, and
 * vmap against a loop. The sum's padding exceeds the dilated window, so its
 * transpose crops (negative padding); every max window holds an element. ---- */
typedef struct {
  const jx_prim *prim;
  jx_params p;
} window_ctx;

static void window_body(void *ctx, jx_array *const *in, jx_array **out) {
  window_ctx *w = ctx;
  out[0] = jx_bind1(w->prim, 1, in, &w->p);
}

static window_ctx window_case(const jx_prim *prim, const int64_t *lo1hi1) {
  window_ctx w = {prim, {0}};
  static const int64_t win[2] = {2, 2}, str[2] = {2, 1}, bd[2] = {2, 1}, wd[2] = {1, 2};
  const int64_t *lists[6] = {win, str, NULL, NULL, bd, wd};
  for (int k = 0; k < 6; k++) {
    w.p.l[k].n = 2;
    for (int d = 0; d < 2; d++) w.p.l[k].v[d] = lists[k] ? lists[k][d] : 0;
  }
  w.p.l[2].v[0] = 1; /* lo 1 in dim 0 */
  w.p.l[2].v[1] = lo1hi1[0];
  w.p.l[3].v[1] = lo1hi1[1];
  if (prim == &jx_prim_reduce_window_sum) w.p.l[1].v[1] = 2;
  return w;
}

static void test_dilated_windows(void **state) {
  (void)state;
  static const int64_t sum_pad[2] = {2, 3}, max_pad[2] = {0, 2};
  window_ctx cases[3] = {window_case(&jx_prim_reduce_window_sum, sum_pad),
                         window_case(&jx_prim_reduce_window_max, max_pad),
                         window_case(&jx_prim_reduce_window_min, max_pad)};
  jx_array *x = ramp(JX_SHAPE(3, 4), 5, 7, 3, 2, 64);
  for (int k = 0; k < 3; k++) {
    jx_fn *f = jx_fn_create("window", 1, 1, window_body, &cases[k]);
    if (jx_check_grads(f, &x, 2, 0, 0)) print_error("%s\n", jx_last_error());
    assert_int_equal(jx_last_status(), JX_OK);
    jx_fn *v = jx_vmap(f, JX_AXES(1), JX_AXES(0));
    jx_array *xs = jx_stack(2, (jx_array *[]){x, jx_neg(x)}, 1), *got, *y0, *y1;
    assert_int_equal(jx_call(v, &xs, &got), JX_OK);
    window_body(&cases[k], &x, &y0);
    window_body(&cases[k], (jx_array *[]){jx_neg(x)}, &y1);
    double want[64];
    int64_t n = 2 * jx_size(y0);
    assert_true(n <= 64);
    assert_int_equal(
        jx_read(jx_stack(2, (jx_array *[]){y0, y1}, 0), want, sizeof(double) * (size_t)n), JX_OK);
    expect_values(got, want, n);
    jx_fn_release(v);
    jx_fn_release(f);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_softmax_custom_jvp, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cross_entropy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_per_example_grad, setup, teardown),
      cmocka_unit_test_setup_teardown(test_logsumexp, setup, teardown),
      cmocka_unit_test_setup_teardown(test_layer_norm, setup, teardown),
      cmocka_unit_test_setup_teardown(test_max_pool, setup, teardown),
      cmocka_unit_test_setup_teardown(test_choosers_and_zeros, setup, teardown),
      cmocka_unit_test_setup_teardown(test_prod_second_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dilated_windows, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
