/* dot_general's BLAS path (src/prims/dot_blas.c) against the reference
 * kernel, its spec: every layout of batch, contracting and free dims on
 * both sides, random shapes with empty and size-1 dims, f32 and f64, the
 * 16-bit floats and the float preferred element types. The two sum in
 * different orders (and f32 in f32 rather than f64), so each element must
 * agree within the rounding bound c * (K + 1) * eps * sum_k |a_k b_k| (the
 * sum of magnitudes is the reference kernel run on |a| and |b|) plus one
 * rounding of the result. Integer and bool operands must be left to the
 * reference. */
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
#include "compile/executable.h"
#include "ir/exec.h"
#include "dot_layouts.h"
#include "prims/dot_kernels.h"
#include "prims/dot_skinny.h"
#include "prims/gemm_f32.h"
#include "prims/prims.h"
#include "trace/fn.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}
static int pick(int n) { return (int)(next() % (uint64_t)n); }
static double uniform(void) { return (double)(next() >> 11) / 9007199254740992.0 * 2 - 1; }

static double eps_of(jx_dtype dt) {
  switch (dt) {
  case JX_F64: return 0x1p-53;
  case JX_F32: return 0x1p-24;
  case JX_F16: return 0x1p-11;
  default: return 0x1p-8; /* bf16 */
  }
}

static void fill(void *d, jx_dtype dt, int64_t n) {
  for (int64_t i = 0; i < n; i++) jx_store_f64(d, dt, i, uniform());
}

/* |x| elementwise: clear the sign bit of each float. */
static void *absolute(const void *d, jx_dtype dt, int64_t n) {
  size_t es = jx_dtype_size(dt);
  unsigned char *a = malloc(es * (size_t)n + 8);
  assert_non_null(a);
  memcpy(a, d, es * (size_t)n);
  for (int64_t i = 0; i < n; i++) a[i * (int64_t)es + (int64_t)es - 1] &= 0x7f; /* little-endian */
  return a;
}

static int cases_run, cases_blas;

/* Runs one dot_general both ways and compares; pref < 0: no preferred type. */
static void check(jx_dtype dt, int pref, jx_shape ls, jx_shape rs, const jx_params *p0) {
  jx_params p = *p0;
  if (pref >= 0) p.i[0] = 1, p.dtype = (jx_dtype)pref;
  jx_aval in[2] = {{dt, 0, ls, 0}, {dt, 0, rs, 0}}, oa;
  jx_status st =
      jx_prim_dot_general.infer(&(jx_rule_ctx){&jx_prim_dot_general, &p, 2, 1, 0, NULL}, in, &oa);
  if (st) print_error("infer: %s\n", jx_last_error());
  assert_int_equal(st, JX_OK);
  int64_t nl = jx_shape_numel(ls), nr = jx_shape_numel(rs), no = jx_shape_numel(oa.shape), K = 1;
  for (int i = 0; i < p.l[JX_DOT_LC].n; i++) K *= ls.dims[p.l[JX_DOT_LC].v[i]];
  size_t es = jx_dtype_size(dt), os = jx_dtype_size(oa.dtype);
  void *l = malloc(es * (size_t)nl + 8), *r = malloc(es * (size_t)nr + 8);
  void *got = malloc(os * (size_t)no + 8), *want = malloc(os * (size_t)no + 8),
       *mag = malloc(os * (size_t)no + 8);
  assert_true(l && r && got && want && mag);
  fill(l, dt, nl);
  fill(r, dt, nr);
  memset(got, 0xA5, os * (size_t)no); /* garbage: every element must be written */
  void *al = absolute(l, dt, nl), *ar = absolute(r, dt, nr);
  jx_tensor ti[2] = {{l, dt, ls}, {r, dt, rs}}, ta[2] = {{al, dt, ls}, {ar, dt, rs}};
  jx_tensor tg = {got, oa.dtype, oa.shape}, tw = {want, oa.dtype, oa.shape},
            tm = {mag, oa.dtype, oa.shape};
  int handled = jx_dot_blas(&p, ti, &tg);
  assert_int_equal(handled, jx_dot_have_blas);
  cases_run++;
  cases_blas += handled;
  if (handled) {
    jx_dot_reference(&p, ti, &tw);
    jx_dot_reference(&p, ta, &tm);
    int dbl = dt == JX_F64 || oa.dtype == JX_F64;
    double eps_acc = dbl ? 0x1p-53 : 0x1p-24;
    for (int64_t i = 0; i < no; i++) {
      double g = jx_load_f64(got, oa.dtype, i), w = jx_load_f64(want, oa.dtype, i);
      double m = jx_load_f64(mag, oa.dtype, i);
      double tol = 2 * (double)(K + 1) * eps_acc * m + 2 * eps_of(oa.dtype) * fabs(w) + 1e-300;
      if (!(fabs(g - w) <= tol))
        print_error("%s x %s -> %s, lc=%d rc=%d lb=%d rb=%d: out[%lld] = %.17g, reference "
                    "%.17g (tol %g)\n",
                    jx_dtype_name(dt), jx_dtype_name(dt), jx_dtype_name(oa.dtype),
                    p.l[0].n ? (int)p.l[0].v[0] : -1, p.l[1].n ? (int)p.l[1].v[0] : -1,
                    p.l[2].n ? (int)p.l[2].v[0] : -1, p.l[3].n ? (int)p.l[3].v[0] : -1,
                    (long long)i, g, w, tol);
      assert_true(fabs(g - w) <= tol);
    }
  }
  free(l);
  free(r);
  free(al);
  free(ar);
  free(got);
  free(want);
  free(mag);
}

/* Places nb batch, nc contracting and nf free dims of one operand at random
 * positions; batch[i] / contract[i] get the dim numbers, sizes from bs / cs. */
static jx_shape place(int nb, int nc, int nf, const int64_t *bs, const int64_t *cs,
                      const int64_t *fs, int64_t *batch, int64_t *contract) {
  int rank = nb + nc + nf, pos[JX_MAX_RANK];
  for (int i = 0; i < rank; i++) pos[i] = i;
  for (int i = rank - 1; i > 0; i--) { /* shuffle */
    int j = pick(i + 1), t = pos[i];
    pos[i] = pos[j];
    pos[j] = t;
  }
  jx_shape s = {rank, {0}};
  for (int i = 0; i < nb; i++) s.dims[batch[i] = pos[i]] = bs[i];
  for (int i = 0; i < nc; i++) s.dims[contract[i] = pos[nb + i]] = cs[i];
  for (int i = 0; i < nf; i++) s.dims[pos[nb + nc + i]] = fs[i];
  return s;
}

static int64_t random_size(int allow_empty) {
  static const int64_t sizes[] = {1, 2, 3, 5, 8, 17, 0};
  return sizes[pick(allow_empty ? 7 : 6)];
}

/* One random contraction of the given dtypes with dims at random places. */
static void random_case(jx_dtype dt, int pref, int allow_empty) {
  int nb = pick(3), nc = pick(3), nfl = pick(3), nfr = pick(3);
  int64_t bs[3], cs[3], fl[3], fr[3];
  for (int i = 0; i < 3; i++)
    bs[i] = random_size(allow_empty), cs[i] = random_size(allow_empty),
    fl[i] = random_size(allow_empty), fr[i] = random_size(allow_empty);
  /* keep the work small: halve the largest size until B*M*K*N <= 2^16 */
  int64_t *all[12] = {&bs[0], &bs[1], &bs[2], &cs[0], &cs[1], &cs[2],
                      &fl[0], &fl[1], &fl[2], &fr[0], &fr[1], &fr[2]};
  int used[12] = {nb > 0,  nb > 1,  nb > 2,  nc > 0,  nc > 1,  nc > 2,
                  nfl > 0, nfl > 1, nfl > 2, nfr > 0, nfr > 1, nfr > 2};
  for (;;) {
    int64_t work = 1;
    int big = -1;
    for (int i = 0; i < 12; i++)
      if (used[i]) {
        work *= *all[i];
        if (big < 0 || *all[i] > *all[big]) big = i;
      }
    if (work <= 65536) break;
    *all[big] /= 2;
  }
  jx_params p = {0};
  p.l[JX_DOT_LB].n = p.l[JX_DOT_RB].n = nb;
  p.l[JX_DOT_LC].n = p.l[JX_DOT_RC].n = nc;
  jx_shape ls = place(nb, nc, nfl, bs, cs, fl, p.l[JX_DOT_LB].v, p.l[JX_DOT_LC].v);
  jx_shape rs = place(nb, nc, nfr, bs, cs, fr, p.l[JX_DOT_RB].v, p.l[JX_DOT_RC].v);
  check(dt, pref, ls, rs, &p);
}

static void check_layout(jx_shape ls, jx_shape rs, const jx_params *p, void *dtype) {
  check(*(const jx_dtype *)dtype, -1, ls, rs, p);
}

/* Every placement of one batch and one contracting dim in two rank-3 operands
 * (and of one contracting dim in two matrices), square and non-square. */
static void every_layout(jx_dtype dt) {
  const int64_t sizes[][4] = {{4, 6, 5, 7}, {3, 1, 9, 2}, {2, 33, 40, 1}, {1, 70, 65, 66}};
  for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
    int64_t K = sizes[z][1], M = sizes[z][2], N = sizes[z][3];
    test_dot_rank3_layouts(sizes[z][0], K, M, N, check_layout, &dt);
    for (int lc = 0; lc < 2; lc++)
      for (int rc = 0; rc < 2; rc++) {
        jx_params p = {0};
        p.l[JX_DOT_LC] = (jx_ilist){1, {lc}};
        p.l[JX_DOT_RC] = (jx_ilist){1, {rc}};
        jx_shape ls = {2, {M, M}}, rs = {2, {N, N}};
        ls.dims[lc] = K, rs.dims[rc] = K;
        check(dt, -1, ls, rs, &p);
      }
  }
  /* two contracting dims listed in either order, on transposed operands */
  for (int flip = 0; flip < 4; flip++) {
    jx_params p = {0};
    p.l[JX_DOT_LC] = (jx_ilist){2, {flip & 1 ? 2 : 1, flip & 1 ? 1 : 2}};
    p.l[JX_DOT_RC] = (jx_ilist){2, {flip & 2 ? 0 : 1, flip & 2 ? 1 : 0}};
    int64_t a = 3, b = 4;
    jx_shape ls = {3, {5, flip & 1 ? b : a, flip & 1 ? a : b}};
    jx_shape rs = {3, {flip & 2 ? a : b, flip & 2 ? b : a, 6}};
    /* dims pair up by position in the lists: make their sizes agree */
    ls.dims[p.l[0].v[0]] = rs.dims[p.l[1].v[0]];
    ls.dims[p.l[0].v[1]] = rs.dims[p.l[1].v[1]];
    check(dt, -1, ls, rs, &p);
  }
}

static void layouts_f32(void **state) {
  (void)state;
  every_layout(JX_F32);
}
static void layouts_f64(void **state) {
  (void)state;
  every_layout(JX_F64);
}

static void random_f32_f64(void **state) {
  (void)state;
  for (int i = 0; i < 400; i++) random_case(i & 1 ? JX_F64 : JX_F32, -1, i % 3 == 0);
}

static void half_and_preferred(void **state) {
  (void)state;
  for (int i = 0; i < 60; i++) {
    random_case(JX_F16, -1, i % 4 == 0);
    random_case(JX_BF16, -1, 0);
    random_case(JX_BF16, JX_F32, 0);
    random_case(JX_F16, JX_F64, 0);
    random_case(JX_F32, JX_F64, i % 4 == 0);
    random_case(JX_F64, JX_F32, 0);
    random_case(JX_F32, JX_BF16, 0);
  }
}

/* A matrix product big enough for the blocked gemm kernels and threads. */
static void large_square(void **state) {
  (void)state;
  jx_params p = {0};
  p.l[JX_DOT_LC] = (jx_ilist){1, {1}};
  p.l[JX_DOT_RC] = (jx_ilist){1, {0}};
  check(JX_F32, -1, (jx_shape){2, {300, 257}}, (jx_shape){2, {257, 310}}, &p);
  p.l[JX_DOT_LC] = (jx_ilist){1, {0}};
  p.l[JX_DOT_RC] = (jx_ilist){1, {1}};
  check(JX_F64, -1, (jx_shape){2, {257, 300}}, (jx_shape){2, {310, 257}}, &p);
}

/* A GEMM is split into one row block per thread of the pool, and run whole
 * on a device thread (the pool inline): both equal the f64 sums to f32
 * rounding, and the split one gives the same bits at every call (the MLP's
 * products, both lhs layouts, and one too small to split). */
static void split_gemms_deterministic_and_close_to_one_call(void **state) {
  (void)state;
  const int64_t shapes[][3] = {{256, 784, 512}, {784, 256, 512}, {512, 256, 512}, {40, 30, 20}};
  for (int k = 0; k < 4; k++)
    for (int t = 0; t < 2; t++) {
      int64_t M = shapes[k][0], K = shapes[k][1], N = shapes[k][2];
      float *a = malloc(sizeof(float) * (size_t)(M * K)),
            *b = malloc(sizeof(float) * (size_t)(K * N));
      float *c1 = malloc(sizeof(float) * (size_t)(M * N)),
            *c2 = malloc(sizeof(float) * (size_t)(M * N)),
            *c3 = malloc(sizeof(float) * (size_t)(M * N));
      assert_true(a && b && c1 && c2 && c3);
      for (int64_t i = 0; i < M * K; i++) a[i] = (float)sin(0.37 * (double)i);
      for (int64_t i = 0; i < K * N; i++) b[i] = (float)cos(0.11 * (double)i);
      jx_params p = {0}; /* t = 1: the lhs stored transposed, [K, M] */
      p.l[JX_DOT_LC] = (jx_ilist){1, {t ? 0 : 1}};
      p.l[JX_DOT_RC] = (jx_ilist){1, {0}};
      jx_tensor in[2] = {{a, JX_F32, {2, {t ? K : M, t ? M : K}}}, {b, JX_F32, {2, {K, N}}}};
      jx_tensor o1 = {c1, JX_F32, {2, {M, N}}}, o2 = {c2, JX_F32, {2, {M, N}}},
                o3 = {c3, JX_F32, {2, {M, N}}};
      assert_int_equal(jx_dot_blas(&p, in, &o1), 1);
      assert_int_equal(jx_dot_blas(&p, in, &o3), 1);
      assert_memory_equal(c1, c3, sizeof(float) * (size_t)(M * N));
      jx_pool_run_inline(1);
      assert_int_equal(jx_dot_blas(&p, in, &o2), 1);
      jx_pool_run_inline(0);
      for (int64_t i = 0; i < M; i += 7)
        for (int64_t j = 0; j < N; j += 5) {
          double s = 0, mag = 0;
          for (int64_t q = 0; q < K; q++) {
            double x = a[t ? q * M + i : i * K + q], y = b[q * N + j];
            s += x * y;
            mag += fabs(x * y);
          }
          double tol = 4e-7 * (double)K * (1 + mag / (double)K);
          assert_true(fabs(c1[i * N + j] - s) <= tol);
          assert_true(fabs(c2[i * N + j] - s) <= tol);
        }
      free(a);
      free(b);
      free(c1);
      free(c2);
      free(c3);
    }
}

/* A decode step's products: a few rows times a weight matrix (split by
 * columns over the pool), a single row or column (gemv), and attention over a [B, S, H, dh]
 * key/value cache (a batch of strided gemvs shared out whole), in both layouts of the matrix:
 * within the reference's rounding bound, and the same bits at every call. */
static void decode_shaped_products(void **state) {
  (void)state;
  jx_params mm = {0}, mt = {0}, scores = {0}, values = {0};
  mm.l[JX_DOT_LC] = (jx_ilist){1, {1}}; /* [M, K] x [K, N] */
  mm.l[JX_DOT_RC] = (jx_ilist){1, {0}};
  mt.l[JX_DOT_LC] = (jx_ilist){1, {1}}; /* [M, K] x [N, K] */
  mt.l[JX_DOT_RC] = (jx_ilist){1, {1}};
  check(JX_F32, -1, (jx_shape){2, {16, 300}}, (jx_shape){2, {300, 700}}, &mm);
  check(JX_F32, -1, (jx_shape){2, {16, 300}}, (jx_shape){2, {700, 300}}, &mt);
  check(JX_F32, -1, (jx_shape){2, {1, 777}}, (jx_shape){2, {777, 1000}}, &mm);
  check(JX_F32, -1, (jx_shape){2, {1, 777}}, (jx_shape){2, {1000, 777}}, &mt);
  check(JX_F32, -1, (jx_shape){2, {1000, 777}}, (jx_shape){2, {777, 1}}, &mm);
  check(JX_F64, -1, (jx_shape){2, {1, 777}}, (jx_shape){2, {777, 1000}}, &mm);
  /* q [B, 1, H, dh] . k [B, S, H, dh] -> [B, H, 1, S]; p [B, H, 1, S] . v -> [B, H, 1, dh] */
  scores.l[JX_DOT_LC] = (jx_ilist){1, {3}};
  scores.l[JX_DOT_RC] = (jx_ilist){1, {3}};
  scores.l[JX_DOT_LB] = (jx_ilist){2, {0, 2}};
  scores.l[JX_DOT_RB] = (jx_ilist){2, {0, 2}};
  values.l[JX_DOT_LC] = (jx_ilist){1, {3}};
  values.l[JX_DOT_RC] = (jx_ilist){1, {1}};
  values.l[JX_DOT_LB] = (jx_ilist){2, {0, 1}};
  values.l[JX_DOT_RB] = (jx_ilist){2, {0, 2}};
  check(JX_F32, -1, (jx_shape){4, {16, 1, 4, 64}}, (jx_shape){4, {16, 300, 4, 64}}, &scores);
  check(JX_F32, -1, (jx_shape){4, {16, 4, 1, 300}}, (jx_shape){4, {16, 300, 4, 64}}, &values);
  /* the same bits at every call */
  const int64_t M = 16, K = 300, N = 700;
  float *a = malloc(sizeof(float) * (size_t)(M * K)), *b = malloc(sizeof(float) * (size_t)(K * N));
  float *c1 = malloc(sizeof(float) * (size_t)(M * N)),
        *c2 = malloc(sizeof(float) * (size_t)(M * N));
  assert_true(a && b && c1 && c2);
  for (int64_t i = 0; i < M * K; i++) a[i] = (float)sin(0.37 * (double)i);
  for (int64_t i = 0; i < K * N; i++) b[i] = (float)cos(0.11 * (double)i);
  for (int rows = 1; rows <= M; rows += M - 1) {
    jx_tensor in[2] = {{a, JX_F32, {2, {rows, K}}}, {b, JX_F32, {2, {K, N}}}};
    jx_tensor o1 = {c1, JX_F32, {2, {rows, N}}}, o2 = {c2, JX_F32, {2, {rows, N}}};
    assert_int_equal(jx_dot_blas(&mm, in, &o1), jx_dot_have_blas);
    assert_int_equal(jx_dot_blas(&mm, in, &o2), jx_dot_have_blas);
    assert_memory_equal(c1, c2, sizeof(float) * (size_t)(rows * N));
  }
  free(a);
  free(b);
  free(c1);
  free(c2);
}

/* Products with one narrow side (K or N <= 16, the other >= 64: an MLP's
 * output layer and its gradients) in every layout of both operands, whole
 * vectors and tails on every side, within the rounding bound of the
 * reference; where the CPU has AVX2 + FMA they take the narrow loops
 * (counted), and each row's bits do not depend on where the rows were
 * split (the caller splits them over threads). */
static void skinny_products(void **state) {
  (void)state;
  const int64_t shapes[][3] = {/* M, K, N */
                               {256, 512, 10}, {256, 10, 512}, {512, 256, 10}, {37, 64, 2},
                               {45, 1, 64},    {19, 16, 100},  {70, 77, 16},   {33, 131, 7}};
  int64_t calls = jx_sgemm_skinny_calls();
  int layouts = 0;
  for (size_t z = 0; z < sizeof shapes / sizeof *shapes; z++)
    for (int lt = 0; lt < 2; lt++)
      for (int rt = 0; rt < 2; rt++) {
        int64_t M = shapes[z][0], K = shapes[z][1], N = shapes[z][2];
        jx_params p = {0};
        p.l[JX_DOT_LC] = (jx_ilist){1, {lt ? 0 : 1}};
        p.l[JX_DOT_RC] = (jx_ilist){1, {rt ? 1 : 0}};
        jx_shape ls = {2, {lt ? K : M, lt ? M : K}}, rs = {2, {rt ? N : K, rt ? K : N}};
        check(JX_F32, -1, ls, rs, &p);
        layouts++;
        /* rows [0, r) and [r, M) in two calls: the same bits as one call */
        float *a = malloc(sizeof(float) * (size_t)(M * K)),
              *b = malloc(sizeof(float) * (size_t)(K * N));
        float *c1 = malloc(sizeof(float) * (size_t)(M * N)),
              *c2 = malloc(sizeof(float) * (size_t)(M * N));
        assert_true(a && b && c1 && c2);
        for (int64_t i = 0; i < M * K; i++) a[i] = (float)sin(0.37 * (double)i);
        for (int64_t i = 0; i < K * N; i++) b[i] = (float)cos(0.11 * (double)i);
        int64_t lda = lt ? M : K, ldb = rt ? K : N, r = M / 3 + 1;
        if (jx_sgemm_skinny(lt, rt, M, N, K, a, lda, b, ldb, c1, N)) {
          assert_int_equal(jx_sgemm_skinny(lt, rt, r, N, K, a, lda, b, ldb, c2, N), 1);
          assert_int_equal(jx_sgemm_skinny(lt, rt, M - r, N, K, lt ? a + r : a + r * lda, lda, b,
                                           ldb, c2 + r * N, N),
                           1);
          assert_memory_equal(c1, c2, sizeof(float) * (size_t)(M * N));
        }
        free(a);
        free(b);
        free(c1);
        free(c2);
      }
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    assert_true(jx_sgemm_skinny_calls() - calls >= 3 * layouts);
#else
  (void)calls, (void)layouts;
#endif
  /* not narrow on one side: left to BLAS */
  float x[64 * 64] = {0}, y[64 * 64];
  assert_int_equal(jx_sgemm_skinny(0, 0, 64, 17, 64, x, 64, x, 17, y, 17), 0);
  assert_int_equal(jx_sgemm_skinny(0, 0, 64, 10, 12, x, 12, x, 10, y, 10), 0);
}

/* jx's packed f32 GEMM in every layout of both operands (the AVX2 kernel
 * too where the CPU also has AVX-512: the same bits), with edges on every
 * side (rows, columns and K not multiples of the tiles, K over one
 * panel of 512) and its epilogues: C = A B, C += A B into C's values, and
 * a bias over the rows. Each element is within the FMA-chain bound of the
 * f64 sum, (K + 2) eps sum |terms| plus the result's rounding; the bias is
 * one add after the sums (C_bias == C + bias bit for bit), and so is the
 * accumulation when K fits one panel (C0 + A B rounded once); a product
 * split into row blocks or column blocks gives the same bits as one call. */
static void packed_gemm_epilogues(void **state) {
  (void)state;
  if (!jx_sgemm_packed_usable()) {
    float x = 1, y = 0;
    assert_int_equal(jx_sgemm_packed(0, 0, 1, 1, 1, &x, 1, &x, 1, &y, 1, NULL), 0);
    return;
  }
  const int64_t shapes[][3] = {/* M, K, N */
                               {37, 600, 45}, {130, 77, 70}, {16, 1030, 33},
                               {5, 3, 200},   {1, 40, 1},    {200, 0, 9}};
  for (size_t z = 0; z < sizeof shapes / sizeof *shapes; z++)
    for (int lt = 0; lt < 2; lt++)
      for (int rt = 0; rt < 2; rt++) {
        int64_t M = shapes[z][0], K = shapes[z][1], N = shapes[z][2];
        int64_t lda = lt ? M : K, ldb = rt ? K : N, ldc = N + 3, cn = M * ldc;
        float *a = malloc(sizeof(float) * (size_t)(M * K + 1)),
              *b = malloc(sizeof(float) * (size_t)(K * N + 1)),
              *bias = malloc(sizeof(float) * (size_t)N);
        float *c = malloc(sizeof(float) * (size_t)cn), *c0 = malloc(sizeof(float) * (size_t)cn),
              *cacc = malloc(sizeof(float) * (size_t)cn),
              *cbias = malloc(sizeof(float) * (size_t)cn),
              *split = malloc(sizeof(float) * (size_t)cn);
        assert_true(a && b && bias && c && c0 && cacc && cbias && split);
        for (int64_t i = 0; i < M * K; i++) a[i] = (float)uniform();
        for (int64_t i = 0; i < K * N; i++) b[i] = (float)uniform();
        for (int64_t j = 0; j < N; j++) bias[j] = (float)uniform();
        for (int64_t i = 0; i < cn; i++) c0[i] = (float)uniform();
        memcpy(c, c0, sizeof(float) * (size_t)cn); /* garbage to be overwritten */
        memcpy(cacc, c0, sizeof(float) * (size_t)cn);
        memcpy(cbias, c0, sizeof(float) * (size_t)cn);
        jx_gemm_epilogue acc = {1, NULL}, bi = {0, bias};
        assert_int_equal(jx_sgemm_packed(lt, rt, M, N, K, a, lda, b, ldb, c, ldc, NULL), 1);
        assert_int_equal(jx_sgemm_packed(lt, rt, M, N, K, a, lda, b, ldb, cacc, ldc, &acc), 1);
        assert_int_equal(jx_sgemm_packed(lt, rt, M, N, K, a, lda, b, ldb, cbias, ldc, &bi), 1);
        /* the AVX2 kernel, where the CPU also has AVX-512: the same bits */
        const char *widest = jx_sgemm_packed_kernel();
        if (strcmp(widest, "avx2") && jx_sgemm_packed_use("avx2")) {
          memcpy(split, c0, sizeof(float) * (size_t)cn);
          assert_int_equal(jx_sgemm_packed(lt, rt, M, N, K, a, lda, b, ldb, split, ldc, NULL), 1);
          assert_int_equal(jx_sgemm_packed_use(widest), 1);
          assert_memory_equal(split, c, sizeof(float) * (size_t)cn);
        }
        for (int64_t i = 0; i < M; i++)
          for (int64_t j = 0; j < N; j++) {
            double sum = 0, mag = 0;
            for (int64_t q = 0; q < K; q++) {
              double t = (double)a[lt ? q * M + i : i * K + q] * b[rt ? j * K + q : q * N + j];
              sum += t;
              mag += fabs(t);
            }
            int64_t at = i * ldc + j;
            double x0 = c0[at], bound = (double)(K + 2) * 0x1p-24 * (mag + fabs(x0)) + 1e-30;
            assert_true(fabs(c[at] - sum) <= bound + 0x1p-24 * fabs(sum));
            assert_true(fabs(cacc[at] - (x0 + sum)) <= bound + 0x1p-24 * fabs(x0 + sum));
            assert_true(cbias[at] == c[at] + bias[j]);
            if (K <= 512) assert_true(cacc[at] == c0[at] + c[at]);
          }
        for (int64_t i = 0; i < M; i++) /* the padding between rows is left alone */
          for (int64_t j = N; j < ldc; j++) assert_true(c[i * ldc + j] == c0[i * ldc + j]);
        /* rows [0, r) and [r, M), then columns [0, q) and [q, N), in two calls */
        int64_t r = M / 3 + 1 < M ? M / 3 + 1 : M, q = N / 2 + 1 < N ? N / 2 + 1 : N;
        assert_int_equal(jx_sgemm_packed(lt, rt, r, N, K, a, lda, b, ldb, split, ldc, NULL), 1);
        assert_int_equal(jx_sgemm_packed(lt, rt, M - r, N, K, lt ? a + r : a + r * lda, lda, b, ldb,
                                         split + r * ldc, ldc, NULL),
                         1);
        for (int64_t i = 0; i < M; i++)
          assert_memory_equal(split + i * ldc, c + i * ldc, sizeof(float) * (size_t)N);
        assert_int_equal(jx_sgemm_packed(lt, rt, M, q, K, a, lda, b, ldb, split, ldc, NULL), 1);
        assert_int_equal(jx_sgemm_packed(lt, rt, M, N - q, K, a, lda, rt ? b + q * ldb : b + q, ldb,
                                         split + q, ldc, NULL),
                         1);
        for (int64_t i = 0; i < M; i++)
          assert_memory_equal(split + i * ldc, c + i * ldc, sizeof(float) * (size_t)N);
        free(a);
        free(b);
        free(bias);
        free(c);
        free(c0);
        free(cacc);
        free(cbias);
        free(split);
      }
}

/* A dense layer x W + b; a residual block's r + (x W2 + b2) with r = x W3
 * a temporary that dies there (its buffer takes the sum, bias and residual
 * in one epilogue); the sum of two products x2 W + x2 W3 (a layer's input
 * gradients through q, k and v); q + q W5, whose residual is the product's
 * own operand (never its C). Traced in this order whatever order the
 * compiler evaluates arguments in. */
static void dense_and_residual(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0], *x2 = in[1], *w = in[2], *b = in[3], *w2 = in[4], *b2 = in[5], *w3 = in[6];
  out[0] = jx_add(jx_matmul(x, w), b);
  jx_array *r = jx_matmul(x, w3); /* traced first: one kernel adds b2 and r */
  out[1] = jx_add(r, jx_add(jx_matmul(x, w2), b2));
  jx_array *p = jx_matmul(x2, w);
  out[2] = jx_add(p, jx_matmul(x2, w3));
  jx_array *q = jx_matmul(x, in[7]); /* q + q W4: q is the product's operand, never its C */
  out[3] = jx_add(q, jx_matmul(q, in[8]));
}

/* Jitted, every sum runs as a GEMM's epilogue (counted on the CPU), each
 * result within the FMA-chain bound of its f64 sum: K roundings
 * of the sums, one more for the bias and one more for each product added. */
static void jit_gemm_epilogues(void **state) {
  (void)state;
  enum { M = 96, K = 64, N = 48 }; /* 2^18+ multiply-adds: through jx_dot_blas */
  static float x[M * K], x2[M * K], w[K * N], b[N], w2[K * N], b2[N], w3[K * N], w4[K * K],
      w5[K * K];
  for (int i = 0; i < K * K; i++) w4[i] = sinf((float)i * 0.13f), w5[i] = cosf((float)i * 0.29f);
  for (int i = 0; i < M * K; i++) x[i] = sinf((float)i * 0.37f), x2[i] = cosf((float)i * 0.19f);
  for (int i = 0; i < K * N; i++) {
    w[i] = cosf((float)i * 0.11f);
    w2[i] = sinf((float)i * 0.23f + 1);
    w3[i] = cosf((float)i * 0.07f + 2);
  }
  for (int i = 0; i < N; i++) b[i] = cosf((float)i), b2[i] = sinf((float)i);
  jx_scope_begin();
  const float *host[9] = {x, x2, w, b, w2, b2, w3, w4, w5};
  jx_aval av[9];
  jx_array *in[9];
  for (int i = 0; i < 9; i++) {
    jx_shape sh = i < 2              ? JX_SHAPE(M, K)
                  : i == 3 || i == 5 ? JX_SHAPE(N)
                  : i >= 7           ? JX_SHAPE(K, K)
                                     : JX_SHAPE(K, N);
    av[i] = (jx_aval){JX_F32, 0, sh, 0};
    in[i] = jx_array_from(JX_F32, sh, host[i]);
  }
  jx_fn *f = jx_fn_create("dense_and_residual", 9, 4, dense_and_residual, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *got[4];
  assert_int_equal(jx_call(jf, in, got), JX_OK);
  static float o[3][M * N], qq[M * K], o4[M * K];
  for (int r = 0; r < 3; r++) assert_int_equal(jx_read(got[r], o[r], sizeof o[r]), JX_OK);
  assert_int_equal(jx_read(got[3], o4, sizeof o4), JX_OK);
  for (int i = 0; i < M; i++) /* q = x W4 in f32, then q + q W5 against f64 sums from it */
    for (int j = 0; j < K; j++) {
      float s = 0;
      for (int t = 0; t < K; t++) s = fmaf(x[i * K + t], w4[t * K + j], s);
      qq[i * K + j] = s;
    }
  for (int i = 0; i < M; i++)
    for (int j = 0; j < K; j++) {
      double s = 0, mag = 0;
      for (int t = 0; t < K; t++) {
        s += (double)qq[i * K + t] * w5[t * K + j];
        mag += fabs((double)qq[i * K + t] * w5[t * K + j]);
      }
      /* q's own rounding differs from jx's order by K eps |q|: allow it through W5 */
      assert_true(fabs(o4[i * K + j] - (qq[i * K + j] + s)) <= 1e-3 * (1 + mag));
    }
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s[3] = {b[j], b2[j], 0}, mag[3] = {fabs(b[j]), fabs(b2[j]), 0};
      for (int q = 0; q < K; q++) {
        double t[5] = {(double)x[i * K + q] * w[q * N + j], (double)x[i * K + q] * w2[q * N + j],
                       (double)x[i * K + q] * w3[q * N + j], (double)x2[i * K + q] * w[q * N + j],
                       (double)x2[i * K + q] * w3[q * N + j]};
        s[0] += t[0], s[1] += t[1] + t[2], s[2] += t[3] + t[4];
        mag[0] += fabs(t[0]), mag[1] += fabs(t[1]) + fabs(t[2]), mag[2] += fabs(t[3]) + fabs(t[4]);
      }
      for (int r = 0; r < 3; r++)
        assert_true(fabs(o[r][i * N + j] - s[r]) <= (K + 3) * 0x1p-24 * mag[r]);
    }
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  const jx_executable *ex = jx_program_executable(p);
  /* x W + b; x W2 + b2 + r into r's buffer; x2 W3 into x2 W's; not q + q W5 */
  if (ex && jx_sgemm_packed_usable()) assert_int_equal(jx_executable_epilogues(ex), 3);
  jx_program_release(p);
  jx_scope_end();
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* Integer and bool contractions, and int -> float, stay on the reference. */
static void integers_stay_on_reference(void **state) {
  (void)state;
  int32_t a[6] = {1, 2, 3, 4, 5, 6}, c[4];
  jx_params p = {0};
  p.l[JX_DOT_LC] = (jx_ilist){1, {1}};
  p.l[JX_DOT_RC] = (jx_ilist){1, {0}};
  jx_tensor in[2] = {{a, JX_I32, {2, {2, 3}}}, {a, JX_I32, {2, {3, 2}}}};
  jx_tensor out = {c, JX_I32, {2, {2, 2}}};
  assert_int_equal(jx_dot_blas(&p, in, &out), 0);
  p.i[0] = 1, p.dtype = JX_F32;
  float f[4];
  out = (jx_tensor){f, JX_F32, {2, {2, 2}}};
  assert_int_equal(jx_dot_blas(&p, in, &out), 0);
}

/* The public op takes the fast path and gives the reference's numbers. */
static void matmul_end_to_end(void **state) {
  (void)state;
  jx_scope_begin();
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0.5f, -1, 2, 0.25f, -3, 4}, c[4];
  jx_array *x = jx_array_from(JX_F32, JX_SHAPE(2, 3), a);
  jx_array *y = jx_array_from(JX_F32, JX_SHAPE(3, 2), b);
  assert_int_equal(jx_read(jx_matmul(x, y), c, sizeof c), JX_OK);
  const float want[4] = {1 * 0.5f + 2 * 2 - 3 * 3, -1 + 2 * 0.25f + 3 * 4, 4 * 0.5f + 5 * 2 - 6 * 3,
                         -4 + 5 * 0.25f + 6 * 4};
  for (int i = 0; i < 4; i++) assert_float_equal(c[i], want[i], 0);
  jx_scope_end();
}

/* Two independent GEMMs run side by side only where the calling thread has
 * pool threads to share them with: a thread whose parallel loops run on it
 * alone (a device thread of a mesh with a device per core or more) leaves
 * them to the usual path, which makes each product's output at its own
 * step, so the memory it holds is what the program's liveness counts.
 * Where they run, they give the products' values. */
static void side_by_side_only_with_threads_to_share(void **state) {
  (void)state;
  enum { M = 96, K = 80, N = 72 };
  jx_params p = {0};
  p.l[JX_DOT_LC] = (jx_ilist){1, {1}};
  p.l[JX_DOT_RC] = (jx_ilist){1, {0}};
  const jx_params *params[2] = {&p, &p};
  jx_array *in[4];
  for (int i = 0; i < 4; i++)
    in[i] = jx_sin(jx_mul(jx_arange(JX_F32, 0, (i % 2 ? K * N : M * K), 1),
                          jx_scalar(JX_F32, 0.01f * (float)(i + 1))));
  in[0] = jx_reshape(in[0], JX_SHAPE(M, K)), in[2] = jx_reshape(in[2], JX_SHAPE(M, K));
  in[1] = jx_reshape(in[1], JX_SHAPE(K, N)), in[3] = jx_reshape(in[3], JX_SHAPE(K, N));
  for (int i = 0; i < 4; i++) assert_int_equal(jx_block_until_ready(in[i]), JX_OK);
  jx_aval avals[2] = {{JX_F32, 0, {2, {M, N}}, 0}, {JX_F32, 0, {2, {M, N}}, 0}};
  jx_array *out[2] = {NULL, NULL};
  int ran = -1;
  jx_pool_run_inline(1);
  assert_int_equal(jx_dot_side_by_side(2, params, in, avals, out, &ran), JX_OK);
  jx_pool_run_inline(0);
  assert_int_equal(ran, 0);
  assert_null(out[0]);
  if (jx_pool_threads() < 2) skip(); /* no threads to share: never side by side */
  assert_int_equal(jx_dot_side_by_side(2, params, in, avals, out, &ran), JX_OK);
  assert_int_equal(ran, 1);
  for (int i = 0; i < 2; i++) {
    jx_array *want = jx_matmul(in[2 * i], in[2 * i + 1]);
    jx_array *d = jx_max(jx_abs(jx_sub(out[i], want)), JX_AXES(), 0);
    assert_true(jx_item(d) <= 1e-4);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(side_by_side_only_with_threads_to_share),
      cmocka_unit_test(layouts_f32),
      cmocka_unit_test(layouts_f64),
      cmocka_unit_test(random_f32_f64),
      cmocka_unit_test(half_and_preferred),
      cmocka_unit_test(large_square),
      cmocka_unit_test(integers_stay_on_reference),
      cmocka_unit_test(split_gemms_deterministic_and_close_to_one_call),
      cmocka_unit_test(skinny_products),
      cmocka_unit_test(packed_gemm_epilogues),
      cmocka_unit_test(jit_gemm_epilogues),
      cmocka_unit_test(decode_shaped_products),
      cmocka_unit_test(matmul_end_to_end),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  printf("%d contractions compared, %d through BLAS\n", cases_run, cases_blas);
  jx_shutdown();
  return rc;
}
