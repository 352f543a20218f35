/* Values and gradients at kinks and special points against JAX's default
 * mode (tests/golden/gen_kinks.py): ties of maximum/minimum/max split the
 * derivative in half, relu and relu6 give 0 at their corners, softplus and
 * log_sigmoid differentiate to sigmoid, logsumexp of -inf entries, sqrt and
 * pow at 0, NaN from an unselected branch of where, sort and top_k ties,
 * argmax ties and NaN, second derivatives of the custom rules, max pooling
 * ties, products through zeros, the spread
 * of a constant. Each case runs eagerly and under jit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"

#define DIR JX_TEST_DATA "/kinks/"

typedef void (*kink_fn)(jx_array *const *in, jx_array **out);
typedef struct {
  const char *name;
  int nin, nout, grad;
  kink_fn fn;
} kink_case;

static jx_array *arange_f32(int64_t n) { return jx_iota(JX_F32, JX_SHAPE(n), 0); }

#define UNARY(NAME, EXPR)                                                                          \
  static void NAME(jx_array *const *in, jx_array **out) {                                          \
    jx_array *x = in[0];                                                                           \
    out[0] = (EXPR);                                                                               \
  }
UNARY(k_softplus, jx_softplus(x))
UNARY(k_log_sigmoid, jx_log_sigmoid(x))
UNARY(k_relu, jx_relu(x))
UNARY(k_relu6, jx_relu6(x))
UNARY(k_abs, jx_abs(x))
UNARY(k_sign, jx_sign(x))
UNARY(k_sigmoid, jx_logistic(x))
UNARY(k_silu, jx_silu(x))
UNARY(k_gelu, jx_gelu(x))
UNARY(k_max_reduce, jx_max(x, JX_AXES(1), 0))
UNARY(k_min_reduce, jx_min(x, JX_AXES(1), 0))
UNARY(k_clip, jx_clip(x, -1, 1))
UNARY(k_cummax, jx_mul(jx_cummax(x, 0), arange_f32(4)))
UNARY(k_cummin, jx_mul(jx_cummin(x, 0), arange_f32(4)))
UNARY(k_max_pool, jx_max_pool(x, JX_SHAPE(2, 2), JX_SHAPE(2, 2), "VALID"))
UNARY(k_prod, jx_prod(x, JX_AXES(1), 0))
UNARY(k_cumprod, jx_mul(jx_cumprod(x, 0), arange_f32(3)))
UNARY(k_var, jx_var(x, JX_AXES(), 0))
UNARY(k_std, jx_std(x, JX_AXES(), 0))
UNARY(k_logsumexp, jx_logsumexp(x, JX_AXES(1), 0))
UNARY(k_softmax, jx_mul(jx_softmax(x, 1), arange_f32(3)))
UNARY(k_log_softmax, jx_mul(jx_log_softmax(x, 1), arange_f32(3)))
UNARY(k_sqrt, jx_sqrt(x))
UNARY(k_rsqrt, jx_rsqrt(x))
UNARY(k_where_sqrt, jx_where(jx_gt(x, jx_scalar(JX_F32, 0)), jx_sqrt(x), jx_scalar(JX_F32, 0)))
UNARY(k_where_log, jx_where(jx_gt(x, jx_scalar(JX_F32, 0)), jx_log(x), jx_scalar(JX_F32, 0)))
/* jnp.linalg.norm of a vector: sqrt(sum(x * x)) */
UNARY(k_norm, jx_sqrt(jx_sum(jx_mul(x, x), JX_AXES(), 0)))
UNARY(k_sort, jx_mul(jx_sort(x, 0), arange_f32(5)))
UNARY(k_argmax, jx_argmax(x, 1))
UNARY(k_argmin, jx_argmin(x, 1))

/* x -> f'(x) elementwise, through jx_grad of sum(f(x)): its gradient is
 * f'' (the custom derivatives' own derivatives) */
typedef jx_array *(*unary_op)(jx_array *);
static void sum_of(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = jx_sum(((unary_op)ctx)(in[0]), JX_AXES(), 0);
}
static jx_array *derivative(unary_op op, jx_array *x) {
  jx_fn *f = jx_fn_create("sum_of", 1, 1, sum_of, (void *)op);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_array *d = NULL;
  jx_call(g, &x, &d); /* on error d is poisoned */
  jx_fn_release(g);
  jx_fn_release(f);
  return d;
}
static jx_array *softplus_op(jx_array *x) { return jx_softplus(x); }
static jx_array *log_sigmoid_op(jx_array *x) { return jx_log_sigmoid(x); }
static jx_array *relu_op(jx_array *x) { return jx_relu(x); }
static jx_array *relu6_op(jx_array *x) { return jx_relu6(x); }
static jx_array *abs_op(jx_array *x) { return jx_abs(x); }
UNARY(k_softplus_d1, derivative(softplus_op, x))
UNARY(k_log_sigmoid_d1, derivative(log_sigmoid_op, x))
UNARY(k_relu_d1, derivative(relu_op, x))
UNARY(k_relu6_d1, derivative(relu6_op, x))
UNARY(k_abs_d1, derivative(abs_op, x))

static void k_maximum(jx_array *const *in, jx_array **out) { out[0] = jx_maximum(in[0], in[1]); }
static void k_minimum(jx_array *const *in, jx_array **out) { out[0] = jx_minimum(in[0], in[1]); }
static void k_pow(jx_array *const *in, jx_array **out) { out[0] = jx_pow(in[0], in[1]); }
static void k_clamp(jx_array *const *in, jx_array **out) { out[0] = jx_clamp(in[0], in[1], in[2]); }
static void k_top_k(jx_array *const *in, jx_array **out) {
  jx_array *v = NULL, *i = NULL;
  jx_top_k(in[0], 3, &v, &i);
  out[0] = jx_mul(v, arange_f32(3));
  out[1] = i;
}

static const kink_case cases[] = {
    {"softplus", 1, 1, 1, k_softplus},
    {"log_sigmoid", 1, 1, 1, k_log_sigmoid},
    {"relu", 1, 1, 1, k_relu},
    {"relu6", 1, 1, 1, k_relu6},
    {"abs", 1, 1, 1, k_abs},
    {"sign", 1, 1, 1, k_sign},
    {"sigmoid", 1, 1, 1, k_sigmoid},
    {"softplus_d1", 1, 1, 1, k_softplus_d1},
    {"log_sigmoid_d1", 1, 1, 1, k_log_sigmoid_d1},
    {"relu_d1", 1, 1, 1, k_relu_d1},
    {"relu6_d1", 1, 1, 1, k_relu6_d1},
    {"abs_d1", 1, 1, 1, k_abs_d1},
    {"silu", 1, 1, 1, k_silu},
    {"gelu", 1, 1, 1, k_gelu},
    {"maximum", 2, 1, 1, k_maximum},
    {"minimum", 2, 1, 1, k_minimum},
    {"max_reduce", 1, 1, 1, k_max_reduce},
    {"min_reduce", 1, 1, 1, k_min_reduce},
    {"clip", 1, 1, 1, k_clip},
    {"clamp", 3, 1, 1, k_clamp},
    {"cummax", 1, 1, 1, k_cummax},
    {"cummin", 1, 1, 1, k_cummin},
    {"max_pool", 1, 1, 1, k_max_pool},
    {"prod", 1, 1, 1, k_prod},
    {"cumprod", 1, 1, 1, k_cumprod},
    {"var", 1, 1, 1, k_var},
    {"std", 1, 1, 1, k_std},
    {"logsumexp", 1, 1, 1, k_logsumexp},
    {"softmax", 1, 1, 1, k_softmax},
    {"log_softmax", 1, 1, 1, k_log_softmax},
    {"sqrt", 1, 1, 1, k_sqrt},
    {"rsqrt", 1, 1, 1, k_rsqrt},
    {"pow", 2, 1, 1, k_pow},
    {"where_sqrt", 1, 1, 1, k_where_sqrt},
    {"where_log", 1, 1, 1, k_where_log},
    {"norm", 1, 1, 1, k_norm},
    {"norm_nonzero", 1, 1, 1, k_norm},
    {"sort", 1, 1, 1, k_sort},
    {"top_k", 1, 2, 1, k_top_k},
    {"argmax", 1, 1, 0, k_argmax},
    {"argmin", 1, 1, 0, k_argmin},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void body(void *ctx, jx_array *const *in, jx_array **out) {
  ((const kink_case *)ctx)->fn(in, out);
}

/* sum(out[0]): what the goldens differentiate */
static void loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  jx_array *o[2] = {NULL, NULL};
  ((const kink_case *)ctx)->fn(in, o);
  out[0] = jx_sum(o[0], JX_AXES(), 0);
}

static jx_array *load(const char *name, const char *kind, int i) {
  char path[512];
  snprintf(path, sizeof path, DIR "%s.%s%d.npy", name, kind, i);
  jx_array *a = jx_load_npy(path);
  if (jx_is_poisoned(a)) fprintf(stderr, "%s\n", jx_last_error());
  assert_false(jx_is_poisoned(a));
  return a;
}

/* 1 when got equals want: same shape and dtype, NaN where JAX has NaN,
 * infinities of the same sign, and finite values within 2e-6 relative (zeros
 * of either sign are equal); else 0, printing each difference. */
static int matches(jx_array *got, jx_array *want, const char *name, const char *what) {
  if (jx_is_poisoned(got)) fprintf(stderr, "%s %s: %s\n", name, what, jx_last_error());
  assert_false(jx_is_poisoned(got));
  jx_shape gs = jx_shape_of(got), ws = jx_shape_of(want);
  assert_int_equal(gs.rank, ws.rank);
  for (int d = 0; d < gs.rank; d++) assert_int_equal(gs.dims[d], ws.dims[d]);
  assert_int_equal(jx_dtype_of(got), jx_dtype_of(want));
  int64_t n = jx_size(want);
  double *g = calloc((size_t)n + 1, sizeof *g), *w = calloc((size_t)n + 1, sizeof *w);
  assert_true(g && w);
  check_ok(jx_read(jx_astype(got, JX_F64), g, sizeof *g * (size_t)n));
  check_ok(jx_read(jx_astype(want, JX_F64), w, sizeof *w * (size_t)n));
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    int same = isnan(w[i])   ? isnan(g[i])
               : isinf(w[i]) ? g[i] == w[i]
                             : fabs(g[i] - w[i]) <= 2e-6 * fmax(1, fabs(w[i]));
    if (!same) {
      fprintf(stderr, "%s %s[%lld]: %.9g, JAX %.9g\n", name, what, (long long)i, g[i], w[i]);
      bad = 1;
    }
  }
  free(g);
  free(w);
  return !bad;
}

/* The number of the case's outputs and gradients that differ from JAX's. */
static int run_case(const kink_case *c, int jit) {
  const char *mode = jit ? "jit" : "eager";
  jx_array *in[3], *out[2], *grads[3];
  int wrong = 0;
  for (int i = 0; i < c->nin; i++) in[i] = load(c->name, "in", i);
  jx_fn *f = jx_fn_create(c->name, c->nin, c->nout, body, (void *)c);
  jx_fn *run = jit ? jx_jit(f, NULL) : f;
  check_ok(jx_call(run, in, out));
  for (int k = 0; k < c->nout; k++) {
    char what[32];
    snprintf(what, sizeof what, "%s out%d", mode, k);
    wrong += !matches(out[k], load(c->name, "out", k), c->name, what);
  }
  if (c->grad) {
    jx_fn *loss = jx_fn_create(c->name, c->nin, 1, loss_body, (void *)c);
    jx_axes argnums = {.n = c->nin};
    for (int i = 0; i < c->nin; i++) argnums.v[i] = i;
    jx_fn *g = jx_grad(loss, argnums);
    jx_fn *grun = jit ? jx_jit(g, NULL) : g;
    check_ok(jx_call(grun, in, grads));
    for (int i = 0; i < c->nin; i++) {
      char what[32];
      snprintf(what, sizeof what, "%s grad%d", mode, i);
      wrong += !matches(grads[i], load(c->name, "grad", i), c->name, what);
    }
    if (jit) jx_fn_release(grun);
    jx_fn_release(g);
    jx_fn_release(loss);
  }
  if (jit) jx_fn_release(run);
  jx_fn_release(f);
  return wrong;
}

static void test_kinks_eager(void **state) {
  (void)state;
  int wrong = 0;
  for (int i = 0; i < NCASES; i++) wrong += run_case(&cases[i], 0);
  assert_int_equal(wrong, 0);
}

static void test_kinks_jit(void **state) {
  (void)state;
  int wrong = 0;
  for (int i = 0; i < NCASES; i++) wrong += run_case(&cases[i], 1);
  assert_int_equal(wrong, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_kinks_eager, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kinks_jit, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
