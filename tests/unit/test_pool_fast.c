/* reduce_window's fast path (src/prims/window_fast.c) against the reference
 * kernel, its spec: random windows, strides, window dilations and ranks over
 * f32 and f64 data with NaNs (distinct payloads), signed zeros and
 * infinities, for sum, max and min. The two must agree bit for bit and the
 * fast path must write every element; it must decline padding, base
 * dilation and other dtypes, and give the same bits on one thread as on the
 * pool. A hand-made window pins the semantics (first NaN wins, ties keep the
 * first element). */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "array/array.h"
#include "base/threadpool.h"
#include "prims/prims.h"
#include "prims/window_kernels.h"
#include "test_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) { return test_rng_next(&rng); }
static int pick(int n) { return (int)(next() % (uint64_t)n); }

static const jx_prim *const prim_of[3] = {&jx_prim_reduce_window_sum, &jx_prim_reduce_window_max,
                                          &jx_prim_reduce_window_min};

/* A value with the odd NaN (payload i), infinity, signed zero or tie. */
static double special(int64_t i) {
  switch (pick(16)) {
  case 0: {
    uint64_t b = 0x7ff8000000000000ull | (uint64_t)(i + 1);
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
  }
  case 1: return INFINITY;
  case 2: return -INFINITY;
  case 3: return 0.0;
  case 4: return -0.0;
  case 5: return 1.0;
  default: return (double)(int64_t)(next() % 2001) / 100.0 - 10.0;
  }
}

static int compared;

/* n elements equal bit for bit (a NaN sum matching any NaN). */
static int same(jx_window_op op, jx_dtype dt, const void *a, const void *b, int64_t n) {
  size_t es = jx_dtype_size(dt);
  for (int64_t i = 0; i < n; i++) {
    double x = jx_load_f64(a, dt, i), y = jx_load_f64(b, dt, i);
    if (op == JX_WINDOW_SUM && x != x && y != y) continue;
    if (memcmp((const char *)a + (size_t)i * es, (const char *)b + (size_t)i * es, es)) return 0;
  }
  return 1;
}

/* Runs the window both ways; 0 when the rule rejects it. With `fast`, the
 * fast path must take it, else it must decline. */
static int check(jx_window_op op, jx_dtype dt, jx_shape s, const jx_params *p, int fast) {
  jx_aval a = {dt, 0, s, 0}, oa;
  if (prim_of[op]->infer(&(jx_rule_ctx){prim_of[op], p, 1, 1, 0, NULL}, &a, &oa) != JX_OK) {
    jx_clear_error();
    return 0;
  }
  jx_window_params w;
  assert_int_equal(jx_window_read_params("test", p, &a, &w), JX_OK);
  int64_t n = jx_shape_numel(s), no = jx_shape_numel(oa.shape);
  size_t es = jx_dtype_size(dt);
  void *x = malloc(es * (size_t)n + 8), *got = malloc(es * (size_t)no + 8),
       *want = malloc(es * (size_t)no + 8), *one = malloc(es * (size_t)no + 8);
  assert_true(x && got && want && one);
  for (int64_t i = 0; i < n; i++) {
    double v = special(i);
    if (dt == JX_F32) {
      float f = (float)v;
      if (v != v) { /* keep the payload in the float's mantissa */
        uint32_t b = 0x7fc00000u | (uint32_t)(i + 1);
        memcpy(&f, &b, sizeof f);
      }
      ((float *)x)[i] = f;
    } else if (dt == JX_F64) {
      ((double *)x)[i] = v;
    } else {
      jx_store_f64(x, dt, i, isfinite(v) ? v : 1);
    }
  }
  memset(got, 0xA5, es * (size_t)no); /* garbage: every element must be written */
  memset(one, 0xA5, es * (size_t)no);
  jx_tensor tin = {x, dt, s}, tg = {got, dt, oa.shape}, tw = {want, dt, oa.shape},
            t1 = {one, dt, oa.shape};
  assert_int_equal(jx_reduce_window_fast(op, &w, &tin, &tg), fast);
  if (fast) {
    jx_reduce_window_reference(op, p, &tin, &tw);
    /* sums: which NaN an addition of NaNs returns is the compiler's choice
     * (it may swap the operands), so there any NaN matches any NaN */
    if (!same(op, dt, got, want, no)) {
      for (int64_t i = 0; i < no; i++)
        if (!same(op, dt, (char *)got + i * (int64_t)es, (char *)want + i * (int64_t)es, 1))
          print_error("%s op %d: out[%lld] = %.9g, reference %.9g\n",
                      jx_aval_str(dt, s, (char[JX_AVAL_STR_CAP]){0}), (int)op, (long long)i,
                      jx_load_f64(got, dt, i), jx_load_f64(want, dt, i));
      fail();
    }
    jx_pool_run_inline(1); /* one thread: the same bits */
    assert_int_equal(jx_reduce_window_fast(op, &w, &tin, &t1), 1);
    jx_pool_run_inline(0);
    assert_memory_equal(one, got, es * (size_t)no);
    compared++;
  } else {
    unsigned char g0 = 0xA5;
    for (size_t i = 0; i < es * (size_t)no; i++) assert_int_equal(((unsigned char *)got)[i], g0);
  }
  free(x);
  free(got);
  free(want);
  free(one);
  return 1;
}

static jx_params window_params(int r, const int64_t *win, const int64_t *stride,
                               const int64_t *wdil) {
  jx_params p = {0};
  p.l[0].n = p.l[1].n = p.l[5].n = r;
  for (int d = 0; d < r; d++) {
    p.l[0].v[d] = win[d];
    p.l[1].v[d] = stride[d];
    p.l[5].v[d] = wdil[d];
  }
  return p;
}

static void random_windows(void **state) {
  (void)state;
  for (int i = 0; i < 400; i++) {
    int r = 1 + pick(4);
    jx_shape s = {r, {0}};
    int64_t win[JX_MAX_RANK], stride[JX_MAX_RANK], wdil[JX_MAX_RANK];
    for (int d = 0; d < r; d++) {
      s.dims[d] = 1 + pick(r <= 2 ? 9 : 5);
      win[d] = 1 + pick(3);
      stride[d] = 1 + pick(3);
      wdil[d] = 1 + (pick(4) == 0);
    }
    jx_params p = window_params(r, win, stride, wdil);
    if (i % 3) p.l[5].n = 0; /* defaults: no window dilation */
    check((jx_window_op)(i % 3), i % 2 ? JX_F32 : JX_F64, s, &p, 1);
  }
  assert_true(compared > 100); /* most windows fit their operand */
}

/* max_pool 2x2 / 2 over NHWC, large enough for the pool; odd spatial sizes
 * leave the last row and column out. */
static void nhwc_pooling(void **state) {
  (void)state;
  int64_t win[4] = {1, 2, 2, 1}, stride[4] = {1, 2, 2, 1}, one[4] = {1, 1, 1, 1};
  jx_params p = window_params(4, win, stride, one);
  assert_true(check(JX_WINDOW_MAX, JX_F32, (jx_shape){4, {32, 28, 28, 16}}, &p, 1));
  assert_true(check(JX_WINDOW_MAX, JX_F64, (jx_shape){4, {8, 15, 13, 5}}, &p, 1));
  assert_true(check(JX_WINDOW_MIN, JX_F32, (jx_shape){4, {16, 14, 14, 32}}, &p, 1));
  assert_true(check(JX_WINDOW_SUM, JX_F32, (jx_shape){4, {16, 27, 14, 300}}, &p, 1));
}

/* Padding, base dilation and dtypes other than f32/f64 stay on the reference. */
static void others_decline(void **state) {
  (void)state;
  int64_t win[2] = {2, 2}, stride[2] = {1, 2}, one[2] = {1, 1};
  jx_params p = window_params(2, win, stride, one);
  jx_shape s = {2, {6, 7}};
  assert_true(check(JX_WINDOW_MAX, JX_I32, s, &p, 0));
  assert_true(check(JX_WINDOW_MAX, JX_BF16, s, &p, 0));
  assert_true(check(JX_WINDOW_SUM, JX_F16, s, &p, 0));
  p.l[3] = (jx_ilist){2, {0, 1}}; /* padding hi */
  assert_true(check(JX_WINDOW_MAX, JX_F32, s, &p, 0));
  p.l[3].n = 0;
  p.l[4] = (jx_ilist){2, {2, 1}}; /* base dilation */
  assert_true(check(JX_WINDOW_MAX, JX_F64, s, &p, 0));
}

/* One window by hand: NaNs propagate, the first one in window order wins;
 * equal elements keep the first (-0.0 before 0.0 stays -0.0). */
static void semantics(void **state) {
  (void)state;
  uint32_t nan1 = 0x7fc00001u, nan2 = 0x7fc00002u;
  float x[8], got[4];
  memcpy(&x[1], &nan2, 4);
  memcpy(&x[2], &nan1, 4);
  x[0] = 3, x[3] = 7;                   /* window 0: 3, nan2, nan1, 7 */
  x[4] = -0.0f, x[5] = 0.0f, x[6] = -1; /* window 1: -0, 0, -1, -inf */
  x[7] = -INFINITY;
  int64_t win[1] = {4}, stride[1] = {4}, one[1] = {1};
  jx_params p = window_params(1, win, stride, one);
  jx_window_params w;
  jx_aval a = {JX_F32, 0, {1, {8}}, 0};
  assert_int_equal(jx_window_read_params("test", &p, &a, &w), JX_OK);
  jx_tensor tin = {x, JX_F32, {1, {8}}}, tout = {got, JX_F32, {1, {2}}};
  assert_int_equal(jx_reduce_window_fast(JX_WINDOW_MAX, &w, &tin, &tout), 1);
  assert_memory_equal(&got[0], &nan2, 4);
  assert_true(got[1] == 0 && signbit(got[1]));
  assert_int_equal(jx_reduce_window_fast(JX_WINDOW_MIN, &w, &tin, &tout), 1);
  assert_memory_equal(&got[0], &nan2, 4);
  assert_true(got[1] == -INFINITY);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(random_windows),
      cmocka_unit_test(nhwc_pooling),
      cmocka_unit_test(others_decline),
      cmocka_unit_test(semantics),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  printf("%d windows compared with the reference\n", compared);
  jx_shutdown();
  return rc;
}
