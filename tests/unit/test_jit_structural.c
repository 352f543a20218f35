/* pad and slice inside jitted programs (row-copy kernels of
 * src/prims/slicing.c, which fused kernels may take over) against eager
 * calls: bit for bit, for several dtypes (1-8 byte elements), interior
 * padding, negative lo/hi (cropping), strided slices, empty and size-1
 * dims; and max_pool's gradient (slices, pads and selects from
 * reduce_window_max's JVP rule) under jit against eager. Also the windowed
 * max/sum's fast path for windows inside the operand (src/prims/window.c)
 * against the same windows built from strided slices. */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

typedef struct {
  jx_shape lo, hi, interior, start, stop, step;
  double value;
} case_t;

static const case_t *current;

static void body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  const case_t *c = current;
  jx_array *v = jx_astype(jx_full(JX_F64, JX_SHAPE(), c->value), jx_dtype_of(in[0]));
  out[0] = jx_pad_general(in[0], v, c->lo, c->hi, c->interior);
  out[1] = jx_slice(in[0], c->start, c->stop, c->step);
}

static void compare(jx_array *a, jx_array *b) {
  jx_shape s = jx_shape_of(a);
  assert_int_equal(jx_shape_of(b).rank, s.rank);
  for (int d = 0; d < s.rank; d++) assert_int_equal(jx_shape_of(b).dims[d], s.dims[d]);
  size_t n = jx_dtype_size(jx_dtype_of(a));
  for (int d = 0; d < s.rank; d++) n *= (size_t)s.dims[d];
  unsigned char *x = malloc(n + 1), *y = malloc(n + 1);
  assert_int_equal(jx_read(a, x, n), JX_OK);
  assert_int_equal(jx_read(b, y, n), JX_OK);
  assert_memory_equal(x, y, n);
  free(x);
  free(y);
}

static void run_case(const case_t *c, jx_dtype dt, jx_shape s) {
  current = c;
  jx_scope_begin();
  jx_array *x = jx_astype(jx_sub(jx_iota(JX_F32, s, s.rank - 1), jx_scalar(JX_F32, 3.25)), dt);
  if (s.rank > 1) x = jx_add(x, jx_astype(jx_iota(JX_F32, s, 0), dt));
  jx_fn *f = jx_fn_create("pad_slice", 1, 2, body, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *want[2], *got[2];
  if (jx_call(f, &x, want)) fail_msg("%s", jx_last_error());
  assert_int_equal(jx_call(jf, &x, got), JX_OK);
  compare(want[0], got[0]);
  compare(want[1], got[1]);
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_scope_end();
}

static void pad_and_slice_match_eager(void **state) {
  (void)state;
  const case_t cases3[] = {
      {JX_SHAPE(0, 1, 2), JX_SHAPE(1, 0, 3), JX_SHAPE(0, 1, 0), JX_SHAPE(0, 0, 0),
       JX_SHAPE(4, 5, 6), JX_SHAPE(1, 2, 3), 0},
      {JX_SHAPE(-1, 2, -2), JX_SHAPE(2, -1, 1), JX_SHAPE(1, 2, 1), JX_SHAPE(1, 1, 2),
       JX_SHAPE(3, 5, 6), JX_SHAPE(2, 1, 1), 1.5},
      {JX_SHAPE(0, 0, 0), JX_SHAPE(0, 0, 0), JX_SHAPE(0, 0, 0), JX_SHAPE(0, 0, 0),
       JX_SHAPE(4, 5, 6), JX_SHAPE(), -2},
      {JX_SHAPE(-3, 0, 0), JX_SHAPE(-1, 0, -6), JX_SHAPE(0, 0, 0), JX_SHAPE(2, 3, 0),
       JX_SHAPE(2, 3, 6), JX_SHAPE(1, 1, 4), 7}, /* a crop that leaves nothing; empty slices */
  };
  const jx_dtype dts[] = {JX_F32, JX_F64, JX_U8, JX_I16, JX_BOOL};
  for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
    for (size_t i = 0; i < sizeof cases3 / sizeof cases3[0]; i++)
      run_case(&cases3[i], dts[t], JX_SHAPE(4, 5, 6));
  /* size-1 and empty operand dims */
  const case_t c1 = {JX_SHAPE(1, 0),
                     JX_SHAPE(0, 2),
                     JX_SHAPE(0, 3),
                     JX_SHAPE(0, 0),
                     JX_SHAPE(1, 0),
                     JX_SHAPE(),
                     4};
  run_case(&c1, JX_F32, JX_SHAPE(1, 0));
  const case_t c2 = {
      JX_SHAPE(2), JX_SHAPE(1), JX_SHAPE(2), JX_SHAPE(0), JX_SHAPE(1), JX_SHAPE(), 0};
  run_case(&c2, JX_F64, JX_SHAPE(1));
}

/* sum of max_pool(x) * w: its gradient runs reduce_window_max's JVP
 * transposed (strided slices, interior pads, selects) */
static void pool_loss(void *ctx, jx_array *const *in, jx_array **out) {
  const char *padding = ctx;
  jx_array *y = jx_max_pool(in[0], JX_SHAPE(2, 2), JX_SHAPE(2, 2), padding);
  jx_array *w = jx_sin(jx_iota(JX_F32, jx_shape_of(y), 2));
  out[0] = jx_sum(jx_mul(y, w), JX_AXES(), 0);
}

static void max_pool_grad_matches_eager(void **state) {
  (void)state;
  const char *paddings[] = {"VALID", "SAME"};
  for (int k = 0; k < 2; k++) {
    jx_scope_begin();
    jx_shape s = JX_SHAPE(3, 7, 6, 5);
    /* ties inside windows: the first maximum wins, in both */
    jx_array *x = jx_floor(jx_mul(jx_sin(jx_iota(JX_F32, s, 1)), jx_scalar(JX_F32, 3)));
    x = jx_add(x, jx_cos(jx_iota(JX_F32, s, 3)));
    jx_fn *f = jx_fn_create("pool", 1, 1, pool_loss, (void *)paddings[k]);
    jx_fn *g = jx_grad(f, JX_AXES(0));
    jx_fn *jg = jx_jit(g, NULL);
    jx_array *want, *got;
    if (jx_call(g, &x, &want)) fail_msg("%s", jx_last_error());
    assert_int_equal(jx_call(jg, &x, &got), JX_OK);
    compare(want, got);
    jx_fn_release(jg);
    jx_fn_release(g);
    jx_fn_release(f);
    jx_scope_end();
  }
}

/* Windows wholly inside the operand take window.c's fast path: against
 * the same windows built from strided slices (max: jx_maximum, which
 * propagates NaN as the window does; sum: f64 sums in window order, rounded
 * once, as the window kernel sums). */
static void window_fast_path_matches_slices(void **state) {
  (void)state;
  const char *ops[] = {"max", "sum"};
  const jx_dtype dts[] = {JX_F32, JX_F64};
  for (int o = 0; o < 2; o++)
    for (int t = 0; t < 2; t++) {
      jx_scope_begin();
      jx_shape s = JX_SHAPE(2, 9, 8, 3);
      jx_array *x = jx_astype(jx_sin(jx_mul(jx_iota(JX_F32, s, 1), jx_iota(JX_F32, s, 2))), dts[t]);
      if (o == 0) /* a NaN: max propagates it */
        x = jx_where(jx_eq(jx_iota(JX_I32, s, 2), jx_scalar(JX_I32, 5)), jx_full(dts[t], s, NAN),
                     x);
      jx_array *a = jx_reduce_window(x, ops[o], JX_SHAPE(1, 3, 2, 1), JX_SHAPE(1, 2, 2, 1),
                                     JX_SHAPE(0, 0, 0, 0), JX_SHAPE(0, 0, 0, 0));
      jx_array *want = NULL;
      for (int dh = 0; dh < 3; dh++)
        for (int dw = 0; dw < 2; dw++) {
          jx_array *v = jx_slice(x, JX_SHAPE(0, dh, dw, 0), JX_SHAPE(2, dh + 7, dw + 7, 3),
                                 JX_SHAPE(1, 2, 2, 1));
          if (o == 1) v = jx_astype(v, JX_F64);
          want = !want ? v : o == 0 ? jx_maximum(want, v) : jx_add(want, v);
        }
      compare(a, jx_astype(want, dts[t]));
      jx_scope_end();
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pad_and_slice_match_eager),
      cmocka_unit_test(max_pool_grad_matches_eager),
      cmocka_unit_test(window_fast_path_matches_slices),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
