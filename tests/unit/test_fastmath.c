/* fastmath.h: accuracy against libm's double result rounded to f32 (the
 * correctly rounded value but for rare double-rounding cases), over every
 * 97th f32 bit pattern (all exponents, both signs, NaNs) and dense samples
 * where the functions are used; special values exactly; the jit's kernels
 * (which embed the same text) give the eager kernels' bits; and tanh gives
 * jax.jit's. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "prims/fastmath.h"

static double logistic_d(double x) { return 1.0 / (1.0 + exp(-x)); }
static double exp2_d(double x) { return exp2(x); }

typedef struct {
  const char *name;
  float (*f)(float);
  double (*ref)(double);
  int max_ulp;  /* asserted; the measured maximum, see the header */
  float lo, hi; /* the dense range */
} fn_case;

static const fn_case fns[] = {
    {"exp", jx_expf, exp, 1, -104.0f, 89.0f},
    {"exp2", jx_exp2f, exp2_d, 1, -150.0f, 128.0f},
    {"expm1", jx_expm1f, expm1, 1, -20.0f, 89.0f},
    {"log", jx_logf, log, 1, 0.0f, 16.0f},
    {"log1p", jx_log1pf, log1p, 1, -1.0f, 16.0f},
    {"tanh", jx_tanhf, tanh, 5, -10.0f, 10.0f},
    {"logistic", jx_logistic_f, logistic_d, 2, -110.0f, 30.0f},
    {"sin", jx_sinf, sin, 1, -1e4f, 1e4f},
    {"cos", jx_cosf, cos, 1, -1e4f, 1e4f},
    {"erf", jx_erff, erf, 1, -5.0f, 5.0f},
};
enum { NFN = sizeof fns / sizeof fns[0] };

/* integer order of the f32 values: adjacent floats differ by 1, +0 = -0 */
static int64_t order(float f) {
  int32_t i;
  memcpy(&i, &f, sizeof i);
  return i < 0 ? (int64_t)INT32_MIN - i : i;
}

/* 0: same special class and ulp distance into *ulp; 1: a class mismatch */
static int compare(float want, float got, int64_t *ulp) {
  *ulp = 0;
  if (isnan(want) || isnan(got)) return isnan(want) != isnan(got);
  if (isinf(want) || isinf(got)) return want != got;
  if (want == 0 && got == 0) return signbit(want) != signbit(got);
  *ulp = llabs(order(want) - order(got));
  return 0;
}

typedef struct {
  int64_t worst;
  float at;
  long mismatches;
} tally;

static void check(const fn_case *c, float x, tally *t) {
  float want = (float)c->ref((double)x), got = c->f(x);
  int64_t u;
  if (compare(want, got, &u)) {
    if (t->mismatches++ < 5)
      print_message("%s(%a): want %a, got %a\n", c->name, (double)x, (double)want, (double)got);
  } else if (u > t->worst) {
    t->worst = u;
    t->at = x;
  }
}

/* Every STRIDE-th bit pattern is checked; the sanitized build (ten times
 * slower per check) samples more sparsely, the plain build covers the
 * density that matters. */
#if defined(__SANITIZE_ADDRESS__)
#define STRIDE 997
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRIDE 997
#endif
#endif
#ifndef STRIDE
#define STRIDE 97
#endif

static void accuracy(void **state) {
  (void)state;
  for (int k = 0; k < NFN; k++) {
    const fn_case *c = &fns[k];
    tally all = {0}, dense = {0};
    for (uint64_t b = 0; b < (1ull << 32); b += STRIDE) check(c, jx_fm_float((uint32_t)b), &all);
    enum { DENSE = 1 << 20 };
    for (int i = 0; i <= DENSE; i++) check(c, c->lo + (c->hi - c->lo) * (float)i / DENSE, &dense);
    print_message("%-9s every %dth pattern: max ulp %lld at %a; dense [%g, %g]: %lld at %a\n",
                  c->name, STRIDE, (long long)all.worst, (double)all.at, (double)c->lo,
                  (double)c->hi, (long long)dense.worst, (double)dense.at);
    assert_int_equal(all.mismatches, 0);
    assert_int_equal(dense.mismatches, 0);
    assert_true(all.worst <= c->max_ulp);
    assert_true(dense.worst <= c->max_ulp);
  }
}

/* Special values (+-0, +-inf, NaN, +-1) exactly as libm, and so are zero,
 * infinite and NaN results at the overflow, underflow and domain edges;
 * the other thresholds within the function's ulp bound. */
static void special_values(void **state) {
  (void)state;
  const float xs[] = {0.0f,
                      -0.0f,
                      INFINITY,
                      -INFINITY,
                      NAN,
                      -NAN,
                      1.0f,
                      -1.0f,
                      0x1p-149f,
                      -0x1p-149f,
                      0x1p-126f,
                      0x1.fffffep-127f,
                      0x1.fffffep127f,
                      -0x1.fffffep127f,
                      0x1.62e42ep6f,  /* expf's last finite */
                      0x1.62e430p6f,  /* expf overflows */
                      -0x1.5d589ep6f, /* expf subnormal */
                      -0x1.9fe368p6f, /* expf's last nonzero */
                      -0x1.9fe36ap6f,
                      127.99999f,
                      128.0f,
                      -149.0f,
                      -149.5f,
                      -150.0f,
                      -17.4f,
                      9.02f,
                      -9.02f,
                      3.92f,
                      -0.99999994f,
                      -1.0000001f,
                      1e-30f,
                      -1e-30f,
                      0x1.921fb6p0f, /* pi/2 */
                      0x1.921fb6p1f,
                      1e4f,
                      0x1.5bp+23f,
                      1e30f,
                      0x1.b6aa2ap+20f};
  for (int k = 0; k < NFN; k++)
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
      float want = (float)fns[k].ref((double)xs[i]), got = fns[k].f(xs[i]);
      int64_t u;
      int bad = compare(want, got, &u);
      if (bad || u > fns[k].max_ulp)
        print_message("%s(%a): want %a, got %a\n", fns[k].name, (double)xs[i], (double)want,
                      (double)got);
      assert_false(bad); /* NaN, inf, zero (with its sign) exactly */
      assert_true(u <= fns[k].max_ulp);
      if (i < 8 || want == 0 || isinf(want) || isnan(want)) assert_int_equal(u, 0);
    }
}

/* op(x + z) with z = 0 at run time: the simplifier cannot drop the add, so
 * the op runs in a generated kernel */
typedef jx_array *(*unary_op)(jx_array *);
static void body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = ((unary_op)ctx)(jx_add(in[0], in[1]));
}

static void jit_gives_eager_bits(void **state) {
  (void)state;
  enum { N = 4096 };
  static float x[N], z[N], a[N], b[N];
  for (int i = 0; i < N; i++) {
    uint32_t u = (uint32_t)i * 2654435761u; /* patterns of every exponent */
    x[i] = i < N / 2 ? jx_fm_float(u) : (float)(i - N * 3 / 4) * 0.0137f;
  }
  x[0] = NAN;
  x[1] = INFINITY;
  x[2] = -INFINITY;
  x[3] = -0.0f;
  jx_array *in[2] = {jx_keep(jx_array_from(JX_F32, JX_SHAPE(N), x)),
                     jx_keep(jx_array_from(JX_F32, JX_SHAPE(N), z))};
  const unary_op ops[] = {jx_exp,  jx_exp2,     jx_expm1, jx_log, jx_log1p,
                          jx_tanh, jx_logistic, jx_sin,   jx_cos, jx_erf};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    jx_fn *f = jx_fn_create("op", 2, 1, body, (void *)ops[k]);
    jx_fn *jf = jx_jit(f, NULL);
    jx_array *want[1], *got[1];
    assert_int_equal(jx_call(f, in, want), JX_OK);
    assert_int_equal(jx_call(jf, in, got), JX_OK);
    assert_int_equal(jx_read(want[0], a, sizeof a), JX_OK);
    assert_int_equal(jx_read(got[0], b, sizeof b), JX_OK);
    assert_memory_equal(a, b, sizeof a);
    /* and the eager kernel is fastmath.h's */
    for (int i = 0; i < N; i++) {
      float r = fns[k].f(x[i] + z[i]);
      assert_memory_equal(&r, &a[i], sizeof r);
    }
    jx_fn_release(jf);
    jx_fn_release(f);
  }
  jx_release(in[0]);
  jx_release(in[1]);
}

/* tanh gives jax.jit's bits on the CPU (tests/golden/gen_fastmath.py): the
 * same rational form with the same fused multiply-adds, eagerly and jitted
 * (jit_gives_eager_bits), and so the function itself. */
static void tanh_gives_jax_bits(void **state) {
  (void)state;
  jx_array *x = jx_load_npy(JX_TEST_DATA "/fastmath/tanh.in.npy");
  jx_array *want = jx_load_npy(JX_TEST_DATA "/fastmath/tanh.out.npy");
  assert_false(jx_is_poisoned(x) || jx_is_poisoned(want));
  int64_t n = jx_size(x);
  assert_int_equal(n, jx_size(want));
  float *in = malloc((size_t)n * sizeof *in), *w = malloc((size_t)n * sizeof *w),
        *got = malloc((size_t)n * sizeof *got);
  assert_non_null(in && w && got);
  assert_int_equal(jx_read(x, in, (size_t)n * sizeof *in), JX_OK);
  assert_int_equal(jx_read(want, w, (size_t)n * sizeof *w), JX_OK);
  assert_int_equal(jx_read(jx_tanh(x), got, (size_t)n * sizeof *got), JX_OK);
  long differ = 0;
  for (int64_t i = 0; i < n; i++) {
    float f = jx_tanhf(in[i]);
    int same = !memcmp(&got[i], &w[i], sizeof f) && !memcmp(&f, &w[i], sizeof f);
    if (!same && differ++ < 5)
      print_message("tanh(%a): jax %a, jx %a (eager %a)\n", (double)in[i], (double)w[i], (double)f,
                    (double)got[i]);
  }
  assert_int_equal(differ, 0);
  free(in);
  free(w);
  free(got);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(special_values),
      cmocka_unit_test(jit_gives_eager_bits),
      cmocka_unit_test(tanh_gives_jax_bits),
      cmocka_unit_test(accuracy),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
