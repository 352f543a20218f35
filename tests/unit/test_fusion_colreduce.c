/* Fused column reductions: a reduce_sum/max/min over the LEADING axes (a
 * bias gradient's sum over the batch) ends a fused group, its producers
 * computed a block of output columns at a time and never materialized. The
 * jit must give the eager kernels' bits (src/prims/reduce.c: the column-wise
 * pairwise tree for sums, the rows in order for max/min, the first NaN
 * wins) for f32 and f64; one row, odd sizes, several levels of the tree,
 * more than one block of columns, rows split over the pool by columns, rank 3 with one or two
 * leading axes reduced, operands broadcast along the reduced or the kept dims, a member stored as
 * well, NaN; the result must not depend on the thread count, and the group must be one compiled
 * kernel. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "base/threadpool.h"
#include "compile/executable.h"
#include "compile/fusion.h"
#include "cuda/nvrtc.h"
#include "compile/render.h"
#include "compile/render_c.h"
#include "compile/render_cuda.h"
#include "trace/fn.h"
#include "test_util.h"

enum { OP_SUM, OP_MAX, OP_MIN };

typedef struct {
  int lead;  /* reduce over axes [0, 1), and [0, 2) too when 2 */
  int store; /* 1: one chain's x * (w + c) is an output too (a member the kernel stores) */
} red_case;

static jx_array *reduce_lead(jx_array *x, int op, int lead) {
  jx_axes ax = lead == 1 ? JX_AXES(0) : JX_AXES(0, 1);
  return op == OP_SUM ? jx_sum(x, ax, 0) : op == OP_MAX ? jx_max(x, ax, 0) : jx_min(x, ax, 0);
}

/* For each op (sum, max, min) and each lead: reduce(x * (w + c) - x + b,
 * axes [0, lead)), a chain of its own (c differs) so that each is a kernel;
 * b (the last dim of x) is broadcast over every other dim. One program, so
 * its kernels compile together. Then relu(x), or the first chain's product. */
static void body(void *ctx, jx_array *const *in, jx_array **out) {
  const red_case *c = ctx;
  jx_shape s = jx_shape_of(in[0]);
  jx_dtype dt = jx_dtype_of(in[0]);
  jx_array *b = jx_broadcast_in_dim(in[2], s, JX_AXES(s.rank - 1));
  jx_array *first = NULL;
  int n = 0;
  for (int op = OP_SUM; op <= OP_MIN; op++)
    for (int lead = 1; lead <= c->lead; lead++) {
      jx_array *xw = jx_mul(in[0], jx_add(in[1], jx_scalar(dt, 0.25 * (double)(n + 1))));
      if (!first) first = xw;
      out[n++] = reduce_lead(jx_add(jx_sub(xw, in[0]), b), op, lead);
    }
  out[n] = c->store ? first : jx_relu(in[0]);
}
/* Large waves with negative zeros, and NaNs when asked. */
typedef struct {
  int seed, nans;
} wave_kind;

static double wave(int64_t i, const void *ctx) {
  const wave_kind *w = ctx;
  if (w->nans && i % 97 == 13) return NAN;
  if (i % 11 == 4) return -0.0;
  return sin(0.37 * (double)i + w->seed) * (1 + (double)(i % 7)) * 1e3;
}

static jx_array *values(jx_dtype dt, jx_shape s, int seed, int nans) {
  wave_kind w = {seed, nans};
  return test_array_of(dt, s, wave, &w);
}

static void expect_same_bits(jx_array *want, jx_array *got, jx_dtype dt, const char *what) {
  jx_shape s = jx_shape_of(want);
  assert_true(jx_shape_equal(s, jx_shape_of(got)));
  size_t bytes = (size_t)jx_shape_numel(s) * (dt == JX_F64 ? 8 : 4);
  char *a = malloc(bytes + 1), *b = malloc(bytes + 1);
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(jx_read(want, a, bytes), JX_OK);
  assert_int_equal(jx_read(got, b, bytes), JX_OK);
  if (memcmp(a, b, bytes) != 0) fail_msg("%s: jit differs from eager", what);
  free(a);
  free(b);
}

/* Runs the case eagerly, jitted, and jitted with the pool off; checks the
 * bits, and that every reduction is a kernel of the program. */
static void check_case(jx_dtype dt, jx_shape s, red_case c, int nans) {
  char what[160];
  const int nred = 3 * c.lead, nout = nred + 1;
  jx_fn *f = jx_fn_create("colreduce", 3, nout, body, &c);
  jx_fn *jf = jx_jit(f, NULL);
  jx_shape bs = {1, {s.dims[s.rank - 1]}};
  jx_array *in[3] = {jx_keep(values(dt, s, 1, nans)), jx_keep(values(dt, s, 2, 0)),
                     jx_keep(values(dt, bs, 3, 0))};
  jx_array *want[8], *got[8], *serial[8];
  assert_int_equal(jx_call(f, in, want), JX_OK);
  assert_int_equal(jx_call(jf, in, got), JX_OK);
  jx_pool_run_inline(1); /* one thread: the same bits */
  assert_int_equal(jx_call(jf, in, serial), JX_OK);
  jx_pool_run_inline(0);
  for (int o = 0; o < nout; o++) {
    snprintf(what, sizeof what, "%s output %d (op %d, lead %d) store %d shape [%lld,%lld%s%lld]",
             dt == JX_F64 ? "f64" : "f32", o, o / c.lead, o % c.lead + 1, c.store,
             (long long)s.dims[0], (long long)s.dims[1], s.rank > 2 ? "," : "",
             s.rank > 2 ? (long long)s.dims[2] : 0LL);
    expect_same_bits(want[o], got[o], dt, what);
    expect_same_bits(want[o], serial[o], dt, what);
  }
  jx_aval av[3] = {{dt, 0, s, 0}, {dt, 0, s, 0}, {dt, 0, bs, 0}};
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  jx_fusion_group *g = NULL;
  int ng = jx_fuse(p, &g), col = 0;
  assert_true(ng >= 0);
  for (int k = 0; k < ng; k++)
    if (g[k].reduces && g[k].lead >= 1 && jx_fusion_group_is_kernel(&g[k])) col++;
  free(g);
  if (col != nred) fail_msg("%s: %d column-reduction kernels, want %d", what, col, nred);
  int fused = 0;
  if (TEST_CPU_ONLY("the CPU executable's kernel count")) {
    assert_true(jx_executable_kernels(jx_program_executable(p), &fused) >= nred);
    assert_true(fused >= 5 * nred); /* add, mul, sub, add and the reduction of each chain */
  }
  jx_program_release(p);
  for (int i = 0; i < 3; i++) jx_release(in[i]);
  jx_fn_release(jf);
  jx_fn_release(f);
}

static void sums_and_extrema_match_eager(void **state) {
  (void)state;
  const jx_shape shapes2[] = {JX_SHAPE(1, 7),    JX_SHAPE(3, 5),    JX_SHAPE(5, 1),
                              JX_SHAPE(8, 3),    JX_SHAPE(129, 3),  JX_SHAPE(300, 70),
                              JX_SHAPE(13, 130), JX_SHAPE(1000, 9), JX_SHAPE(2, 200),
                              JX_SHAPE(5, 600),  JX_SHAPE(2, 40000)};
  const jx_shape shapes3[] = {JX_SHAPE(2, 3, 200), JX_SHAPE(7, 5, 9), JX_SHAPE(20, 30, 17),
                              JX_SHAPE(1, 1, 65)};
  const jx_dtype dts[] = {JX_F32, JX_F64};
  /* the kernels are generic in the shape: one compile per dtype and rank */
  for (size_t d = 0; d < 2; d++) {
    for (size_t k = 0; k < sizeof shapes2 / sizeof shapes2[0]; k++)
      check_case(dts[d], shapes2[k], (red_case){1, 1}, 0);
    for (size_t k = 0; k < sizeof shapes3 / sizeof shapes3[0]; k++)
      check_case(dts[d], shapes3[k], (red_case){2, 0}, 0);
  }
}

static void nan_propagates_as_eager(void **state) {
  (void)state;
  check_case(JX_F32, JX_SHAPE(300, 70), (red_case){1, 1}, 1);
  check_case(JX_F64, JX_SHAPE(6, 5, 40), (red_case){2, 0}, 1);
  /* and a column holding a NaN reduces to NaN (sum, max, min), the others do not */
  red_case c = {1, 0};
  jx_fn *f = jx_fn_create("nan_colmax", 3, 4, body, &c), *jf = jx_jit(f, NULL);
  jx_array *in[3] = {jx_keep(values(JX_F32, JX_SHAPE(20, 50), 1, 1)),
                     jx_keep(values(JX_F32, JX_SHAPE(20, 50), 2, 0)),
                     jx_keep(values(JX_F32, JX_SHAPE(50), 3, 0))};
  jx_array *out[4];
  assert_int_equal(jx_call(jf, in, out), JX_OK);
  for (int o = 0; o < 3; o++) {
    float r[50];
    assert_int_equal(jx_read(out[o], r, sizeof r), JX_OK);
    /* NaNs at flat indices 13, 110, 207, ...: columns 13, 10, 7, ... */
    for (int j = 0; j < 50; j++) {
      int has = 0;
      for (int i = 0; i < 20; i++) has |= (i * 50 + j) % 97 == 13;
      assert_int_equal(isnan(r[j]) != 0, has);
    }
  }
  for (int i = 0; i < 3; i++) jx_release(in[i]);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* relu's gradient times dy summed over the batch (a bias gradient): the
 * mask, the product and the sum are one kernel, dy * mask never stored */
static void bias_grad(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *mask = jx_gt(in[0], jx_scalar(JX_F32, 0.0));
  jx_array *cases[2] = {jx_zeros(JX_F32, jx_shape_of(in[1])), in[1]};
  out[0] = jx_sum(jx_select_n(mask, 2, cases), JX_AXES(0), 0);
}

static void bias_gradient_is_one_kernel(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("bias_grad", 2, 1, bias_grad, NULL), *jf = jx_jit(f, NULL);
  jx_array *in[2] = {jx_keep(values(JX_F32, JX_SHAPE(256, 96), 1, 0)),
                     jx_keep(values(JX_F32, JX_SHAPE(256, 96), 2, 0))};
  jx_array *want[1], *got[1];
  assert_int_equal(jx_call(f, in, want), JX_OK);
  assert_int_equal(jx_call(jf, in, got), JX_OK);
  expect_same_bits(want[0], got[0], JX_F32, "bias gradient");
  jx_aval av[2] = {{JX_F32, 0, {2, {256, 96}}, 0}, {JX_F32, 0, {2, {256, 96}}, 0}};
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  int fused = 0;
  if (TEST_CPU_ONLY("the CPU executable's kernel count"))
    assert_int_equal(jx_executable_kernels(jx_program_executable(p), &fused), 1);
  /* every equation but the constants' broadcasts is in it */
  jx_fusion_group *g = NULL;
  int ng = jx_fuse(p, &g), stores = -1;
  for (int k = 0; k < ng; k++)
    if (jx_fusion_group_is_kernel(&g[k])) {
      assert_int_equal(g[k].lead, 1);
      stores = g[k].nstores;
    }
  free(g);
  assert_int_equal(stores, 1); /* the [96] sum only */
  jx_program_release(p);
  for (int i = 0; i < 2; i++) jx_release(in[i]);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* NumPy's pairwise sum of n terms t(i) (src/prims/reduce.c), in T: the
 * order every column sum must keep, however the work is split. */
#define TREE_SUM(T, NAME)                                                                          \
  static T NAME(const T *t, int64_t n, int64_t stride) {                                           \
    if (n < 8) {                                                                                   \
      T s = 0;                                                                                     \
      for (int64_t i = 0; i < n; i++) s += t[i * stride];                                          \
      return s;                                                                                    \
    }                                                                                              \
    if (n <= 128) {                                                                                \
      T r[8];                                                                                      \
      for (int k = 0; k < 8; k++) r[k] = t[k * stride];                                            \
      int64_t i = 8;                                                                               \
      for (; i < n - n % 8; i += 8)                                                                \
        for (int k = 0; k < 8; k++) r[k] += t[(i + k) * stride];                                   \
      T s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));                     \
      for (; i < n; i++) s += t[i * stride];                                                       \
      return s;                                                                                    \
    }                                                                                              \
    int64_t h = n / 2 - n / 2 % 8;                                                                 \
    return NAME(t, h, stride) + NAME(t + h * stride, n - h, stride);                               \
  }
TREE_SUM(float, tree_sum_f)
TREE_SUM(double, tree_sum_d)

static void product_sum(void *ctx, jx_array *const *in, jx_array **out) {
  const int *lead = ctx;
  out[0] = jx_sum(jx_mul(in[0], in[1]), *lead == 1 ? JX_AXES(0) : JX_AXES(0, 1), 0);
}

static void doubled_sums(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  for (int i = 0; i < 2; i++) out[i] = jx_sum(jx_mul(in[i], jx_scalar(JX_F32, 2)), JX_AXES(0), 0);
}

/* A column of negative zeros sums in a fused kernel as in the eager one:
 * to -0 with leaves of at least 8 rows and their tails (300 rows: the
 * kernel's partial sums start at -0, the identity of +), to +0 in a lone
 * leaf of fewer than 8 (5 rows), which starts at +0. The waves put -0 at
 * every 11th element, so column 4 of 11 is all -0. */
static void negative_zero_columns_as_eager(void **state) {
  (void)state;
  const int64_t rows[2] = {300, 5};
  jx_scope_begin();
  jx_array *x[2] = {values(JX_F32, JX_SHAPE(rows[0], 11), 0, 0),
                    values(JX_F32, JX_SHAPE(rows[1], 11), 0, 0)},
           *got[2];
  jx_fn *f = jx_fn_create("doubled_sums", 2, 2, doubled_sums, NULL), *jf = jx_jit(f, NULL);
  assert_int_equal(jx_call(jf, x, got), JX_OK);
  for (int k = 0; k < 2; k++) {
    jx_array *want = jx_sum(jx_mul(x[k], jx_scalar(JX_F32, 2)), JX_AXES(0), 0);
    expect_same_bits(want, got[k], JX_F32, k ? "-0 column, 5 rows" : "-0 column, 300 rows");
    double c4 = jx_item(jx_slice(got[k], JX_SHAPE(4), JX_SHAPE(5), JX_SHAPE()));
    if (!(c4 == 0 && (signbit(c4) != 0) == (rows[k] >= 8)))
      fail_msg("%lld rows: column 4 sums to %g (sign bit %d)", (long long)rows[k], c4,
               signbit(c4) != 0);
  }
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_scope_end();
}

/* Tall column sums, which the pool shares by subtrees of the rows' pairwise
 * tree (and the eager kernel by subtrees and blocks of columns): the fused
 * sum of x * w and the eager sum of x give, bit for bit, each column's
 * pairwise tree computed here in one piece, f32 and f64, with ragged leaves
 * and one or two reduced axes, and single leaves of every kind. */
static void split_sums_keep_the_tree(void **state) {
  (void)state;
  /* leaves of 8-31 rows (one row a pass), of 32-128 (four rows a pass, then
   * one) and their tails */
  const jx_shape shapes[] = {JX_SHAPE(20000, 13), JX_SHAPE(4099, 37), JX_SHAPE(3, 7001, 5),
                             JX_SHAPE(70000, 2),  JX_SHAPE(27, 9),    JX_SHAPE(45, 33),
                             JX_SHAPE(128, 17)};
  for (int d = 0; d < 2; d++) {
    jx_dtype dt = d ? JX_F64 : JX_F32;
    size_t es = d ? 8 : 4;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
      jx_shape s = shapes[k];
      int lead = s.rank - 1;
      int64_t m = s.dims[s.rank - 1], n = jx_shape_numel(s) / m;
      jx_scope_begin();
      jx_array *x = values(dt, s, 5, 0), *w = values(dt, s, 6, 0);
      jx_fn *f = jx_fn_create("product_sum", 2, 1, product_sum, &lead), *jf = jx_jit(f, NULL);
      jx_array *in[2] = {x, w}, *got[1];
      assert_int_equal(jx_call(jf, in, got), JX_OK);
      jx_array *eager = jx_sum(x, lead == 1 ? JX_AXES(0) : JX_AXES(0, 1), 0);
      char *xs = malloc(es * (size_t)(n * m)), *ws = malloc(es * (size_t)(n * m));
      char *a = malloc(es * (size_t)m), *b = malloc(es * (size_t)m), *want = malloc(es * (size_t)m);
      char *wantx = malloc(es * (size_t)m);
      assert_true(xs && ws && a && b && want && wantx);
      assert_int_equal(jx_read(x, xs, es * (size_t)(n * m)), JX_OK);
      assert_int_equal(jx_read(w, ws, es * (size_t)(n * m)), JX_OK);
      assert_int_equal(jx_read(got[0], a, es * (size_t)m), JX_OK);
      assert_int_equal(jx_read(eager, b, es * (size_t)m), JX_OK);
      for (int64_t j = 0; j < m; j++) {
        if (d) {
          double *p = (double *)ws;
          for (int64_t i = 0; i < n; i++) p[i * m + j] *= ((double *)xs)[i * m + j];
          ((double *)want)[j] = tree_sum_d(p + j, n, m);
          ((double *)wantx)[j] = tree_sum_d((double *)xs + j, n, m);
        } else {
          float *p = (float *)ws;
          for (int64_t i = 0; i < n; i++) p[i * m + j] *= ((float *)xs)[i * m + j];
          ((float *)want)[j] = tree_sum_f(p + j, n, m);
          ((float *)wantx)[j] = tree_sum_f((float *)xs + j, n, m);
        }
      }
      if (memcmp(a, want, es * (size_t)m))
        fail_msg("%s [%lld x %lld]: the fused sum left the tree's bits", d ? "f64" : "f32",
                 (long long)n, (long long)m);
      if (memcmp(b, wantx, es * (size_t)m))
        fail_msg("%s [%lld x %lld]: the eager sum left the tree's bits", d ? "f64" : "f32",
                 (long long)n, (long long)m);
      free(xs);
      free(ws);
      free(a);
      free(b);
      free(want);
      free(wantx);
      jx_fn_release(jf);
      jx_fn_release(f);
      jx_scope_end();
    }
  }
}

/* The CUDA dialect renders the group as tiles of columns shared by a
 * block's threads; with the column-block entries instead (one column per
 * thread, a grid-stride loop over the columns) it renders the C backend's
 * loop shape, which NVRTC compiles where it is available. */
static void cuda_dialect_column_reduction(void **state) {
  (void)state;
  red_case c = {2, 1};
  jx_fn *f = jx_fn_create("colreduce_cuda", 3, 7, body, &c);
  jx_aval av[3] = {
      {JX_F64, 0, {3, {4, 5, 70}}, 0}, {JX_F64, 0, {3, {4, 5, 70}}, 0}, {JX_F64, 0, {1, {70}}, 0}};
  jx_program *p = jx_fn_program(f, av);
  assert_non_null(p);
  jx_dialect cuda = jx_dialect_cuda;
  cuda.col_block = 1;
  cuda.col_block_loop = "for (int64_t c0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; "
                        "c0 < inner;\n"
                        "         c0 += (int64_t)gridDim.x * blockDim.x) {\n"
                        "      const int64_t cw = 1;";
  cuda.vector_hint = NULL;
  char *tu = jx_render_prelude(&cuda);
  assert_non_null(tu);
  jx_fusion_group *g = NULL;
  int ng = jx_fuse(p, &g), nk = 0;
  for (int k = 0; k < ng; k++) {
    if (!g[k].reduces || !g[k].lead || !jx_fusion_group_is_kernel(&g[k])) continue;
    char name[32];
    snprintf(name, sizeof name, "jx_kernel_%d", nk++);
    /* the stock dialect renders it too, as tiles shared by a block's threads */
    char *tiled = jx_render_cuda(p, &g[k], name);
    assert_non_null(tiled);
    assert_non_null(strstr(tiled, "threadIdx.x"));
    free(tiled);
    char *src = jx_render_kernel(&cuda, p, &g[k], name);
    assert_non_null(src);
    assert_non_null(strstr(src, "threadIdx.x"));
    tu = realloc(tu, strlen(tu) + strlen(src) + 1);
    strcat(tu, src);
    free(src);
  }
  free(g);
  assert_int_equal(nk, 6);
  if (!jx_nvrtc_available()) {
    printf("skipped: NVRTC not found (%s)\n", jx_nvrtc_load_error());
  } else {
    char *image = NULL;
    size_t n = 0;
    jx_nvrtc_options opt = {"sm_80", JX_NVRTC_CUBIN, NULL, 0};
    if (jx_nvrtc_compile(tu, "colreduce.cu", &opt, &image, &n)) fail_msg("%s", jx_last_error());
    assert_true(n > 0);
    free(image);
  }
  free(tu);
  jx_program_release(p);
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sums_and_extrema_match_eager),
      cmocka_unit_test(nan_propagates_as_eager),
      cmocka_unit_test(bias_gradient_is_one_kernel),
      cmocka_unit_test(split_sums_keep_the_tree),
      cmocka_unit_test(cuda_dialect_column_reduction),
      cmocka_unit_test(negative_zero_columns_as_eager),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
