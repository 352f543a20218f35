/* The three layouts of conv_general_dilated's BLAS path (src/prims/conv_blas.c)
 * on the convolutions of a small CNN's training step, against the reference
 * kernel: the forward convs (NHWC, one and 16 input channels: rows, written
 * straight into the output), the input gradient (a kernel in [kh, kw, O, I]:
 * packed), the kernel gradients (batch and features swapped, 1 and 16
 * forward channels: the kernel-gradient layout, reading the cotangent in
 * place), the same with an out layout that needs a scatter and a kernel that
 * needs packing, and NCHW (columns). Each element must agree within
 * c * (K + 1) * eps_f32 * sum |l r| (the reference on |lhs| and |rhs|), and the
 * bits must be the same on one thread as on the pool. */
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
#include "prims/conv_kernels.h"
#include "prims/dot_kernels.h"
#include "prims/prims.h"
#include "test_util.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static float uniform(void) { return (float)test_rng_uniform(&rng); }

static jx_params conv_params(int pad, const int64_t *lspec, const int64_t *rspec,
                             const int64_t *ospec) {
  jx_params p = {0};
  p.i[0] = p.i[1] = 1;
  p.l[JX_CONV_PAD_LO] = (jx_ilist){2, {pad, pad}};
  p.l[JX_CONV_PAD_HI] = (jx_ilist){2, {pad, pad}};
  p.l[JX_CONV_LHS_SPEC].n = p.l[JX_CONV_RHS_SPEC].n = p.l[JX_CONV_OUT_SPEC].n = 4;
  for (int d = 0; d < 4; d++) {
    p.l[JX_CONV_LHS_SPEC].v[d] = lspec[d];
    p.l[JX_CONV_RHS_SPEC].v[d] = rspec[d];
    p.l[JX_CONV_OUT_SPEC].v[d] = ospec[d];
  }
  return p;
}

static void check(const jx_params *p, jx_shape ls, jx_shape rs) {
  if (!jx_dot_have_blas) skip();
  jx_aval in[2] = {{JX_F32, 0, ls, 0}, {JX_F32, 0, rs, 0}}, oa;
  assert_int_equal(jx_prim_conv_general_dilated.infer(
                       &(jx_rule_ctx){&jx_prim_conv_general_dilated, p, 2, 1, 0, NULL}, in, &oa),
                   JX_OK);
  int64_t nl = jx_shape_numel(ls), nr = jx_shape_numel(rs), no = jx_shape_numel(oa.shape);
  float *l = malloc(sizeof(float) * (size_t)nl), *r = malloc(sizeof(float) * (size_t)nr);
  float *al = malloc(sizeof(float) * (size_t)nl), *ar = malloc(sizeof(float) * (size_t)nr);
  float *got = malloc(sizeof(float) * (size_t)no), *one = malloc(sizeof(float) * (size_t)no);
  float *want = malloc(sizeof(float) * (size_t)no), *mag = malloc(sizeof(float) * (size_t)no);
  assert_true(l && r && al && ar && got && one && want && mag);
  for (int64_t i = 0; i < nl; i++) al[i] = fabsf(l[i] = uniform());
  for (int64_t i = 0; i < nr; i++) ar[i] = fabsf(r[i] = uniform());
  memset(got, 0xA5, sizeof(float) * (size_t)no); /* garbage: every element must be written */
  jx_tensor ti[2] = {{l, JX_F32, ls}, {r, JX_F32, rs}},
            ta[2] = {{al, JX_F32, ls}, {ar, JX_F32, rs}};
  jx_tensor tg = {got, JX_F32, oa.shape}, t1 = {one, JX_F32, oa.shape},
            tw = {want, JX_F32, oa.shape}, tm = {mag, JX_F32, oa.shape};
  assert_int_equal(jx_conv_blas(p, ti, &tg), 1);
  jx_conv_reference(p, ti, &tw);
  jx_conv_reference(p, ta, &tm);
  int64_t K = rs.dims[p->l[JX_CONV_RHS_SPEC].v[1]];
  for (int d = 2; d < rs.rank; d++) K *= rs.dims[p->l[JX_CONV_RHS_SPEC].v[d]];
  for (int64_t i = 0; i < no; i++) {
    double tol = 2 * (double)(K + 1) * 0x1p-24 * mag[i] + 0x1p-23 * fabs(want[i]) + 1e-30;
    if (!(fabs(got[i] - want[i]) <= tol))
      print_error("conv %s * %s: out[%lld] = %.9g, reference %.9g (tol %g)\n",
                  jx_aval_str(JX_F32, ls, (char[JX_AVAL_STR_CAP]){0}),
                  jx_aval_str(JX_F32, rs, (char[JX_AVAL_STR_CAP]){0}), (long long)i, got[i],
                  want[i], tol);
    assert_true(fabs(got[i] - want[i]) <= tol);
  }
  jx_pool_run_inline(1); /* one thread: the same bits */
  assert_int_equal(jx_conv_blas(p, ti, &t1), 1);
  jx_pool_run_inline(0);
  assert_memory_equal(one, got, sizeof(float) * (size_t)no);
  free(l);
  free(r);
  free(al);
  free(ar);
  free(got);
  free(one);
  free(want);
  free(mag);
}

static const int64_t NHWC[4] = {0, 3, 1, 2}, HWIO[4] = {3, 2, 0, 1}, HWOI[4] = {2, 3, 0, 1},
                     NCHW[4] = {0, 1, 2, 3};
/* the kernel gradient: lhs x [N, H, W, C] as (batch C, features N), rhs the
 * cotangent [N, H, W, O] as (O, I = N), out [kh, kw, C, O] */
static const int64_t KG_L[4] = {3, 0, 1, 2}, KG_OUT[4] = {2, 3, 0, 1};

static void forward(void **state) {
  (void)state;
  jx_params p = conv_params(1, NHWC, HWIO, NHWC);
  check(&p, (jx_shape){4, {16, 28, 28, 1}}, (jx_shape){4, {3, 3, 1, 16}});
  check(&p, (jx_shape){4, {16, 14, 14, 16}}, (jx_shape){4, {3, 3, 16, 32}});
  p = conv_params(0, NHWC, HWIO, NCHW); /* out [N, O, H, W]: scattered */
  check(&p, (jx_shape){4, {5, 9, 11, 3}}, (jx_shape){4, {3, 2, 3, 7}});
}

static void input_gradient(void **state) {
  (void)state;
  jx_params p = conv_params(1, NHWC, HWOI, NHWC);
  check(&p, (jx_shape){4, {16, 14, 14, 32}}, (jx_shape){4, {3, 3, 16, 32}});
}

static void kernel_gradient(void **state) {
  (void)state;
  jx_params p = conv_params(1, KG_L, KG_L, KG_OUT);
  check(&p, (jx_shape){4, {16, 14, 14, 16}}, (jx_shape){4, {16, 14, 14, 32}});
  check(&p, (jx_shape){4, {24, 28, 28, 1}}, (jx_shape){4, {24, 28, 28, 16}});
  /* a cotangent laid out [O, N, H, W] is packed, an out [O, C, kh, kw] scattered */
  const int64_t rspec[4] = {0, 1, 2, 3}, ospec[4] = {1, 0, 2, 3};
  p = conv_params(1, KG_L, rspec, ospec);
  check(&p, (jx_shape){4, {12, 10, 9, 5}}, (jx_shape){4, {7, 12, 10, 9}});
}

static void nchw(void **state) {
  (void)state;
  jx_params p = conv_params(1, NCHW, NCHW, NCHW);
  check(&p, (jx_shape){4, {8, 6, 13, 12}}, (jx_shape){4, {10, 6, 3, 3}});
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(forward),
      cmocka_unit_test(input_gradient),
      cmocka_unit_test(kernel_gradient),
      cmocka_unit_test(nchw),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
