/* dot_general's small f32 path (src/prims/dot_small.c, routed by dot.c):
 * f32 x f32 -> f32 products of fewer than 2^15 multiply-adds (and wide-rowed
 * ones up to 2^18) sum in f32 by FMA chains. Against the f64 oracle (the
 * reference kernel: f64 sums rounded once to f32) each element must lie
 * within the bound of a K-term FMA chain, |s - c| <= gamma_K sum_k |a_k b_k|
 * with gamma_K = K u / (1 - K u), u = 2^-24, plus the oracle's own rounding
 * u |c|; every layout of the operands (packed or read where they lie) is
 * covered, and the path is counted to have run. Each element is exactly one
 * FMA chain over k in order, whichever vector block or tail computed it. */
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
#include "prims/dot_kernels.h"
#include "dot_layouts.h"
#include "prims/dot_small.h"
#include "prims/prims.h"

static int has_avx2_fma(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return 0;
#endif
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 6 - 3); /* [-3, 3) */
}

/* eval of dot_general (the eager path) on random f32 operands, against the
 * reference within the FMA chain's bound. */
static void check(jx_shape ls, jx_shape rs, const jx_params *p) {
  jx_aval in[2] = {{JX_F32, 0, ls, 0}, {JX_F32, 0, rs, 0}}, oa;
  assert_int_equal(
      jx_prim_dot_general.infer(&(jx_rule_ctx){&jx_prim_dot_general, p, 2, 1, 0, NULL}, in, &oa),
      JX_OK);
  int64_t nl = jx_shape_numel(ls), nr = jx_shape_numel(rs), no = jx_shape_numel(oa.shape), K = 1;
  for (int i = 0; i < p->l[JX_DOT_LC].n; i++) K *= ls.dims[p->l[JX_DOT_LC].v[i]];
  float *l = malloc(sizeof(float) * (size_t)(nl + 1)),
        *r = malloc(sizeof(float) * (size_t)(nr + 1));
  float *al = malloc(sizeof(float) * (size_t)(nl + 1)),
        *ar = malloc(sizeof(float) * (size_t)(nr + 1));
  float *got = malloc(sizeof(float) * (size_t)(no + 1)),
        *want = malloc(sizeof(float) * (size_t)(no + 1));
  float *mag = malloc(sizeof(float) * (size_t)(no + 1));
  assert_true(l && r && al && ar && got && want && mag);
  for (int64_t i = 0; i < nl; i++) al[i] = fabsf(l[i] = uniform());
  for (int64_t i = 0; i < nr; i++) ar[i] = fabsf(r[i] = uniform());
  memset(got, 0xA5, sizeof(float) * (size_t)no); /* every element must be written */
  jx_tensor ti[2] = {{l, JX_F32, ls}, {r, JX_F32, rs}},
            ta[2] = {{al, JX_F32, ls}, {ar, JX_F32, rs}};
  jx_tensor tg = {got, JX_F32, oa.shape}, tw = {want, JX_F32, oa.shape},
            tm = {mag, JX_F32, oa.shape};
  jx_prim_dot_general.eval(&(jx_rule_ctx){&jx_prim_dot_general, p, 2, 1, 0, NULL}, ti, &tg);
  jx_dot_reference(p, ti, &tw);
  jx_dot_reference(p, ta, &tm);
  const double u = 0x1p-24, gamma = (double)K * u / (1 - (double)K * u);
  for (int64_t i = 0; i < no; i++) {
    /* mag is sum |a b| rounded to f32: (1 + u) covers that rounding */
    double tol = gamma * mag[i] * (1 + u) + 2 * u * fabs(want[i]);
    if (!(fabs((double)got[i] - want[i]) <= tol))
      print_error("K %lld: out[%lld] = %.9g, f64 oracle %.9g, bound %g\n", (long long)K,
                  (long long)i, got[i], want[i], tol);
    assert_true(fabs((double)got[i] - want[i]) <= tol);
  }
  free(l);
  free(r);
  free(al);
  free(ar);
  free(got);
  free(want);
  free(mag);
}

/* check, counting the small kernel's calls it makes (one per batch entry) */
static void check_layout(jx_shape ls, jx_shape rs, const jx_params *p, void *expected) {
  check(ls, rs, p);
  *(int64_t *)expected += ls.dims[p->l[JX_DOT_LB].v[0]];
}

/* Every placement of one batch and one contracting dim in two rank-3
 * operands, and matrix products in all four transpositions, at sizes with
 * 32-wide blocks, 8-wide ones and scalar tails; then the RNN step's
 * [8, 32] x [32, 64] and [8, 64] x [64, 64], and a wide [64, 64] x [64, 63]
 * just under 2^18. */
static void small_products_within_the_fma_bound(void **state) {
  (void)state;
  int64_t calls = jx_sgemm_small_calls(), expected = 0;
  const int64_t sizes[][4] = {{3, 7, 5, 45}, {2, 33, 4, 1}, {1, 1, 9, 8}, {4, 0, 3, 9}};
  for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
    test_dot_rank3_layouts(sizes[z][0], sizes[z][1], sizes[z][2], sizes[z][3], check_layout,
                           &expected);
  }
  const int64_t mats[][3] = {{8, 32, 64}, {8, 64, 64}, {64, 64, 63}, {5, 100, 3}};
  for (size_t z = 0; z < sizeof mats / sizeof *mats; z++)
    for (int lt = 0; lt < 2; lt++)
      for (int rt = 0; rt < 2; rt++) {
        int64_t M = mats[z][0], K = mats[z][1], N = mats[z][2];
        jx_params p = {0};
        p.l[JX_DOT_LC] = (jx_ilist){1, {lt ? 0 : 1}};
        p.l[JX_DOT_RC] = (jx_ilist){1, {rt ? 1 : 0}};
        check((jx_shape){2, {lt ? K : M, lt ? M : K}}, (jx_shape){2, {rt ? N : K, rt ? K : N}}, &p);
        expected++;
      }
  if (has_avx2_fma()) assert_int_equal(jx_sgemm_small_calls() - calls, expected);
}

/* Every element of C = A x B, whichever block computed it (64- and 16-wide
 * AVX-512 blocks of four, two or one rows, 32- and 8-wide AVX2 blocks, the
 * scalar tail), is bit for bit the FMA chain over k in order written here
 * with fmaf: so a column's bits do not depend on n, m or its position. */
static void every_element_is_one_fma_chain(void **state) {
  (void)state;
  if (!has_avx2_fma()) skip();
  const int sizes[][3] = {{3, 29, 45}, {9, 31, 93}, {8, 64, 64}, {6, 7, 150}, {1, 5, 17}};
  for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
    int M = sizes[z][0], K = sizes[z][1], N = sizes[z][2];
    float *a = malloc(sizeof(float) * (size_t)(M * K)),
          *b = malloc(sizeof(float) * (size_t)(K * N));
    float *c = malloc(sizeof(float) * (size_t)(M * N));
    assert_true(a && b && c);
    for (int i = 0; i < M * K; i++) a[i] = uniform();
    for (int i = 0; i < K * N; i++) b[i] = uniform();
    assert_int_equal(jx_sgemm_small(M, N, K, a, b, c), 1);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        float s = 0;
        for (int k = 0; k < K; k++) s = fmaf(a[i * K + k], b[k * N + j], s);
        if (memcmp(&s, &c[i * N + j], sizeof s))
          print_error("[%d, %d] x [%d, %d]: c[%d][%d] = %.9g, chain %.9g\n", M, K, K, N, i, j,
                      c[i * N + j], s);
        assert_memory_equal(&s, &c[i * N + j], sizeof s);
      }
    free(a);
    free(b);
    free(c);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(small_products_within_the_fma_bound),
      cmocka_unit_test(every_element_is_one_fma_chain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
