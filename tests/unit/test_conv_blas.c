/* conv_general_dilated's im2col + sgemm path (src/prims/conv_blas.c)
 * against the reference kernel, its spec: 1-3 spatial dims, random dimension
 * numbers (NCHW, NHWC and any other permutation), strides, padding
 * (negative too), lhs and rhs dilation, empty and size-1 dims. Each element
 * must agree within c * (K + 1) * eps_f32 * sum |l r| (the reference run on
 * |lhs| and |rhs|), K = C * kernel size. Other dtypes and group counts must
 * be left to the reference. */
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
#include "prims/conv_kernels.h"
#include "prims/dot_kernels.h"
#include "prims/prims.h"
#include "test_util.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next(void) { return test_rng_next(&rng); }
static int pick(int n) { return (int)(next() % (uint64_t)n); }
static float uniform(void) { return (float)test_rng_uniform(&rng); }

static void shuffle(int n, int64_t *v) {
  for (int i = 0; i < n; i++) v[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = pick(i + 1);
    int64_t t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
}

static int cases_run;

/* Runs one convolution both ways; 0 when the shape rule rejects it. */
static int check(jx_dtype dt, const jx_params *p, jx_shape ls, jx_shape rs) {
  jx_aval in[2] = {{dt, 0, ls, 0}, {dt, 0, rs, 0}}, oa;
  if (jx_prim_conv_general_dilated.infer(
          &(jx_rule_ctx){&jx_prim_conv_general_dilated, p, 2, 1, 0, NULL}, in, &oa) != JX_OK) {
    jx_clear_error();
    return 0;
  }
  int64_t nl = jx_shape_numel(ls), nr = jx_shape_numel(rs), no = jx_shape_numel(oa.shape);
  size_t es = jx_dtype_size(dt), os = jx_dtype_size(oa.dtype);
  float *l = malloc(es * (size_t)nl + 8), *r = malloc(es * (size_t)nr + 8);
  float *al = malloc(es * (size_t)nl + 8), *ar = malloc(es * (size_t)nr + 8);
  void *got = malloc(os * (size_t)no + 8), *want = malloc(os * (size_t)no + 8),
       *mag = malloc(os * (size_t)no + 8);
  assert_true(l && r && al && ar && got && want && mag);
  for (int64_t i = 0; i < nl; i++) jx_store_f64(l, dt, i, uniform());
  for (int64_t i = 0; i < nr; i++) jx_store_f64(r, dt, i, uniform());
  for (int64_t i = 0; i < nl; i++) jx_store_f64(al, dt, i, fabs(jx_load_f64(l, dt, i)));
  for (int64_t i = 0; i < nr; i++) jx_store_f64(ar, dt, i, fabs(jx_load_f64(r, dt, i)));
  memset(got, 0xA5, os * (size_t)no); /* garbage: every element must be written */
  jx_tensor ti[2] = {{l, dt, ls}, {r, dt, rs}}, ta[2] = {{al, dt, ls}, {ar, dt, rs}};
  jx_tensor tg = {got, oa.dtype, oa.shape}, tw = {want, oa.dtype, oa.shape},
            tm = {mag, oa.dtype, oa.shape};
  int expect =
      jx_dot_have_blas && dt == JX_F32 && oa.dtype == JX_F32 && p->i[0] == 1 && p->i[1] == 1;
  assert_int_equal(jx_conv_blas(p, ti, &tg), expect);
  if (expect) {
    jx_conv_reference(p, ti, &tw);
    jx_conv_reference(p, ta, &tm);
    int64_t K = rs.dims[p->l[JX_CONV_RHS_SPEC].v[1]];
    for (int d = 2; d < rs.rank; d++) K *= rs.dims[p->l[JX_CONV_RHS_SPEC].v[d]];
    for (int64_t i = 0; i < no; i++) {
      double g = ((float *)got)[i], w = ((float *)want)[i], m = ((float *)mag)[i];
      double tol = 2 * (double)(K + 1) * 0x1p-24 * m + 0x1p-23 * fabs(w) + 1e-30;
      if (!(fabs(g - w) <= tol))
        print_error("conv %s * %s: out[%lld] = %.9g, reference %.9g (tol %g)\n",
                    jx_aval_str(dt, ls, (char[JX_AVAL_STR_CAP]){0}),
                    jx_aval_str(dt, rs, (char[JX_AVAL_STR_CAP]){0}), (long long)i, g, w, tol);
      assert_true(fabs(g - w) <= tol);
    }
    cases_run++;
  }
  free(l);
  free(r);
  free(al);
  free(ar);
  free(got);
  free(want);
  free(mag);
  return 1;
}

/* A random valid convolution with nsp spatial dims. */
static void random_case(int nsp, int allow_empty) {
  for (;;) {
    jx_params p = {0};
    p.i[0] = p.i[1] = 1;
    int rank = nsp + 2;
    for (int s = JX_CONV_LHS_SPEC; s <= JX_CONV_OUT_SPEC; s++) {
      p.l[s].n = rank;
      shuffle(rank, p.l[s].v);
    }
    if (pick(2)) { /* the common layouts half of the time: NCHW / OIHW or NHWC / HWIO */
      int nhwc = pick(2);
      for (int d = 0; d < rank; d++) {
        int64_t chw[JX_MAX_RANK] = {0}, hwc[JX_MAX_RANK] = {0};
        chw[d] = d;
        hwc[0] = 0, hwc[1] = rank - 1;
        for (int k = 0; k < nsp; k++) hwc[2 + k] = 1 + k;
        p.l[JX_CONV_LHS_SPEC].v[d] = nhwc ? hwc[d] : chw[d];
        p.l[JX_CONV_OUT_SPEC].v[d] = nhwc ? hwc[d] : chw[d];
      }
      if (nhwc) { /* HWIO: O last, I before it */
        p.l[JX_CONV_RHS_SPEC].v[0] = rank - 1, p.l[JX_CONV_RHS_SPEC].v[1] = rank - 2;
        for (int k = 0; k < nsp; k++) p.l[JX_CONV_RHS_SPEC].v[2 + k] = k;
      } else {
        for (int d = 0; d < rank; d++) p.l[JX_CONV_RHS_SPEC].v[d] = d;
      }
    }
    int64_t N = 1 + pick(3), C = 1 + pick(4), O = 1 + pick(5);
    if (allow_empty && pick(4) == 0) N = 0;
    if (allow_empty && pick(6) == 0) C = 0;
    jx_shape ls = {rank, {0}}, rs = {rank, {0}};
    ls.dims[p.l[JX_CONV_LHS_SPEC].v[0]] = N;
    ls.dims[p.l[JX_CONV_LHS_SPEC].v[1]] = C;
    rs.dims[p.l[JX_CONV_RHS_SPEC].v[0]] = O;
    rs.dims[p.l[JX_CONV_RHS_SPEC].v[1]] = C;
    for (int k = 0; k < 5; k++) p.l[k].n = pick(4) ? nsp : 0; /* empty list: defaults */
    for (int d = 0; d < nsp; d++) {
      ls.dims[p.l[JX_CONV_LHS_SPEC].v[2 + d]] = 1 + pick(nsp == 1 ? 12 : nsp == 2 ? 7 : 4);
      rs.dims[p.l[JX_CONV_RHS_SPEC].v[2 + d]] = 1 + pick(3);
      p.l[JX_CONV_STRIDES].v[d] = 1 + pick(2);
      p.l[JX_CONV_PAD_LO].v[d] = pick(4) - 1;
      p.l[JX_CONV_PAD_HI].v[d] = pick(4) - 1;
      p.l[JX_CONV_LHS_DIL].v[d] = 1 + (pick(4) == 0);
      p.l[JX_CONV_RHS_DIL].v[d] = 1 + (pick(4) == 0);
    }
    if (check(JX_F32, &p, ls, rs)) return;
  }
}

static void random_1d(void **state) {
  (void)state;
  for (int i = 0; i < 150; i++) random_case(1, i % 5 == 0);
}
static void random_2d(void **state) {
  (void)state;
  for (int i = 0; i < 250; i++) random_case(2, i % 5 == 0);
}
static void random_3d(void **state) {
  (void)state;
  for (int i = 0; i < 60; i++) random_case(3, 0);
}

/* A larger NHWC / HWIO 3x3 convolution with SAME padding. */
static void nhwc_3x3(void **state) {
  (void)state;
  jx_params p = {0};
  p.i[0] = p.i[1] = 1;
  p.l[JX_CONV_PAD_LO] = (jx_ilist){2, {1, 1}};
  p.l[JX_CONV_PAD_HI] = (jx_ilist){2, {1, 1}};
  p.l[JX_CONV_LHS_SPEC] = (jx_ilist){4, {0, 3, 1, 2}};
  p.l[JX_CONV_RHS_SPEC] = (jx_ilist){4, {3, 2, 0, 1}};
  p.l[JX_CONV_OUT_SPEC] = (jx_ilist){4, {0, 3, 1, 2}};
  assert_true(check(JX_F32, &p, (jx_shape){4, {4, 20, 18, 16}}, (jx_shape){4, {3, 3, 16, 24}}));
}

/* f64, bf16 and feature groups stay on the reference. */
static void others_stay_on_reference(void **state) {
  (void)state;
  jx_params p = {0};
  p.i[0] = p.i[1] = 1;
  for (int s = JX_CONV_LHS_SPEC; s <= JX_CONV_OUT_SPEC; s++) p.l[s] = (jx_ilist){3, {0, 1, 2}};
  assert_true(check(JX_F64, &p, (jx_shape){3, {2, 3, 9}}, (jx_shape){3, {4, 3, 2}}));
  assert_true(check(JX_BF16, &p, (jx_shape){3, {2, 3, 9}}, (jx_shape){3, {4, 3, 2}}));
  p.i[0] = 3;
  assert_true(check(JX_F32, &p, (jx_shape){3, {2, 3, 9}}, (jx_shape){3, {6, 1, 2}}));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(random_1d),
      cmocka_unit_test(random_2d),
      cmocka_unit_test(random_3d),
      cmocka_unit_test(nhwc_3x3),
      cmocka_unit_test(others_stay_on_reference),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  printf("%d convolutions compared through BLAS\n", cases_run);
  jx_shutdown();
  return rc;
}
