/* pad and concatenate inside fused kernels (docs/compiler.md, "What fuses:
 * views"): each operand is a load through windows, the member a select of
 * the loads (or the padding value). They move data only, so the jitted
 * program must give the eager bits exactly, and a chain of them with
 * elementwise ops and a row reduction is one kernel with no eager step
 * (before, each pad or concatenate ran eagerly and materialized). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"
#include "fusion_check.h"

static jx_array *padv(jx_array *x, double v) { return jx_scalar(jx_dtype_of(x), v); }

/* tanh(pad(x) * y + 1) and the rows' sums of pad(x) * y: lo (1, 2), hi
 * (2, 3), interior (0, 1), on an outer and the last dim */
static void pad_chain(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *p = jx_pad_general(in[0], padv(in[0], -0.75), JX_SHAPE(1, 2), JX_SHAPE(2, 3),
                               JX_SHAPE(0, 1)); /* [5,4] -> [8,12] */
  jx_array *m = jx_mul(p, in[1]);
  out[0] = jx_tanh(jx_add(m, jx_scalar(jx_dtype_of(in[0]), 1)));
}

static void pad_row_sum(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *p =
      jx_pad_general(in[0], padv(in[0], 0.5), JX_SHAPE(1, 2), JX_SHAPE(2, 3), JX_SHAPE(0, 1));
  out[0] = jx_sum(jx_mul(p, in[1]), JX_AXES(1), 0);
}

static void pads_in_chains(void **state) {
  (void)state;
  const jx_dtype dts[3] = {JX_F32, JX_F64, JX_BF16};
  for (int d = 0; d < 3; d++) {
    jx_array *in[2] = {values(dts[d], JX_SHAPE(5, 4), 1), values(dts[d], JX_SHAPE(8, 12), 2)};
    jx_fn *f = jx_fn_create("pad_chain", 2, 1, pad_chain, NULL);
    expect_one_kernel(jit_matches_eager(f, 2, in, 1));
    jx_fn_release(f);
    if (dts[d] != JX_BF16) { /* the fused row reduction takes f32 and f64 */
      f = jx_fn_create("pad_row_sum", 2, 1, pad_row_sum, NULL);
      expect_one_kernel(jit_matches_eager(f, 2, in, 1));
      jx_fn_release(f);
    }
    jx_release(in[0]);
    jx_release(in[1]);
  }
}

/* one pad per case, times y: the last dim only, an outer dim only,
 * cropping (negative lo and hi), interior padding on both dims, rank 1 */
typedef struct {
  jx_shape xs, lo, hi, interior;
} pad_case;

static void pad_times(void *ctx, jx_array *const *in, jx_array **out) {
  const pad_case *c = ctx;
  jx_array *p = jx_pad_general(in[0], padv(in[0], 2), c->lo, c->hi, c->interior);
  out[0] = jx_exp(jx_mul(p, in[1]));
}

static void pad_edge_cases(void **state) {
  (void)state;
  const pad_case cases[] = {
      {JX_SHAPE(6, 9), JX_SHAPE(0, 3), JX_SHAPE(0, 5), JX_SHAPE(0, 0)},   /* last dim */
      {JX_SHAPE(6, 9), JX_SHAPE(2, 0), JX_SHAPE(1, 0), JX_SHAPE(0, 0)},   /* outer dim */
      {JX_SHAPE(6, 9), JX_SHAPE(-2, 1), JX_SHAPE(1, -3), JX_SHAPE(0, 0)}, /* crop */
      {JX_SHAPE(6, 9), JX_SHAPE(-1, -2), JX_SHAPE(0, 1), JX_SHAPE(2, 1)}, /* crop + interior */
      {JX_SHAPE(3, 2, 5), JX_SHAPE(1, 0, 1), JX_SHAPE(0, 2, 1), JX_SHAPE(1, 3, 2)}, /* rank 3 */
      {JX_SHAPE(1, 7), JX_SHAPE(2, 1), JX_SHAPE(1, 0), JX_SHAPE(0, 0)},             /* size-1 dim */
      {JX_SHAPE(17), JX_SHAPE(3), JX_SHAPE(4), JX_SHAPE(1)},                        /* rank 1 */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int d = 0; d < 2; d++) {
      jx_dtype dt = d ? JX_F64 : JX_F32;
      pad_case pc = cases[c];
      jx_shape os = pc.xs;
      for (int k = 0; k < os.rank; k++)
        os.dims[k] = pc.lo.dims[k] + pc.hi.dims[k] + pc.xs.dims[k] +
                     (pc.xs.dims[k] - 1) * pc.interior.dims[k];
      jx_fn *f = jx_fn_create("pad_times", 2, 1, pad_times, &pc);
      jx_array *in[2] = {values(dt, pc.xs, 3 + (int)c), values(dt, os, 4)};
      expect_one_kernel(jit_matches_eager(f, 2, in, 1));
      jx_release(in[0]);
      jx_release(in[1]);
      jx_fn_release(f);
    }
}

/* concatenate of n operands along `axis`, times y, then sqrt(abs(.)); and
 * the rows' sums of the product */
typedef struct {
  int n, axis;
  jx_shape s[3];
} concat_case;

static void concat_times(void *ctx, jx_array *const *in, jx_array **out) {
  const concat_case *c = ctx;
  jx_array *cat = jx_concatenate(c->n, in, c->axis);
  jx_array *m = jx_mul(cat, in[c->n]);
  out[0] = jx_sqrt(jx_abs(m));
  out[1] = jx_sum(m, JX_AXES(jx_shape_of(m).rank - 1), 0);
}

static void concatenates(void **state) {
  (void)state;
  const concat_case cases[] = {
      {2, 1, {JX_SHAPE(4, 5), JX_SHAPE(4, 11)}},                         /* last axis */
      {2, 0, {JX_SHAPE(3, 8), JX_SHAPE(6, 8)}},                          /* outer axis */
      {3, 1, {JX_SHAPE(2, 3, 6), JX_SHAPE(2, 1, 6), JX_SHAPE(2, 4, 6)}}, /* middle, size 1 */
      {3, 1, {JX_SHAPE(5, 1), JX_SHAPE(5, 9), JX_SHAPE(5, 1)}},          /* last, size-1 ends */
  };
  const jx_dtype dts[3] = {JX_F32, JX_F64, JX_BF16};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int d = 0; d < 3; d++) {
      concat_case cc = cases[c];
      jx_shape os = cc.s[0];
      for (int k = 1; k < cc.n; k++) os.dims[cc.axis] += cc.s[k].dims[cc.axis];
      jx_array *in[4];
      for (int k = 0; k < cc.n; k++) in[k] = values(dts[d], cc.s[k], 5 + k + (int)c);
      in[cc.n] = values(dts[d], os, 9);
      jx_fn *f = jx_fn_create("concat_times", cc.n + 1, 2, concat_times, &cc);
      plan r = jit_matches_eager(f, cc.n + 1, in, 2);
      /* bf16's sum is not a fused row reduction: the elementwise part is
       * still one kernel */
      if (r.kernels >= 0 && dts[d] != JX_BF16) expect_one_kernel(r);
      for (int k = 0; k <= cc.n; k++) jx_release(in[k]);
      jx_fn_release(f);
    }
}

/* pad and concatenate mixed: concat(pad(x), y) + pad(y). The concatenate
 * reads the pad's result as an array (a window op's operands come from
 * outside its run), so that pad runs on its own; the rest, y read through
 * two different windows, is one kernel */
static void mixed(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *px = jx_pad_general(in[0], padv(in[0], 0), JX_SHAPE(1, 0), JX_SHAPE(0, 2),
                                JX_SHAPE(0, 0));                   /* [4,6] -> [5,8] */
  jx_array *cat = jx_concatenate(2, (jx_array *[]){px, in[1]}, 1); /* [5,14] */
  jx_array *py = jx_pad_general(in[1], padv(in[1], 1), JX_SHAPE(0, 3), JX_SHAPE(0, 5),
                                JX_SHAPE(0, 0)); /* [5,6] -> [5,14] */
  out[0] = jx_add(cat, py);
}

static void pad_and_concat_mixed(void **state) {
  (void)state;
  for (int d = 0; d < 3; d++) {
    jx_dtype dt = d == 0 ? JX_F32 : d == 1 ? JX_F64 : JX_BF16;
    jx_array *in[2] = {values(dt, JX_SHAPE(4, 6), 11), values(dt, JX_SHAPE(5, 6), 12)};
    jx_fn *f = jx_fn_create("mixed", 2, 1, mixed, NULL);
    plan r = jit_matches_eager(f, 2, in, 1);
    if (r.kernels >= 0) {
      assert_int_equal(r.kernels, 1);
      assert_int_equal(r.eager, 1);
    }
    jx_release(in[0]);
    jx_release(in[1]);
    jx_fn_release(f);
  }
}

/* a column reduction of a pad: not fused into the reduction (its row
 * walk has no windows), still the eager bits */
static void pad_col_sum(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *p =
      jx_pad_general(in[0], padv(in[0], 3), JX_SHAPE(2, 1), JX_SHAPE(1, 2), JX_SHAPE(1, 0));
  out[0] = jx_sum(jx_mul(p, p), JX_AXES(0), 0);
}

static void column_reductions(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("pad_col_sum", 1, 1, pad_col_sum, NULL);
  jx_array *x = values(JX_F32, JX_SHAPE(40, 7), 13);
  jit_matches_eager(f, 1, &x, 1);
  jx_release(x);
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pads_in_chains),    cmocka_unit_test(pad_edge_cases),
      cmocka_unit_test(concatenates),      cmocka_unit_test(pad_and_concat_mixed),
      cmocka_unit_test(column_reductions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
