/* The hand-written CUDA kernels (src/cuda/kernels_softmax.h,
 * kernels_attention.h), checked without a GPU: NVRTC compiles them for
 * sm_80 and sm_90 (skipped, with a message, without libnvrtc), and the CUDA
 * emulator (tests/cuda_emu) runs them against plain C loops in double on the
 * same inputs (skipped, with a message, without a C++ compiler): row
 * softmax and causal/full attention, f32 and bf16, several shapes including
 * a single row or query, T not a multiple of the tiles, and rows with huge
 * values and -inf (numerical stability). The tensor-core attention
 * (kernels_attention_tc.h) runs in the emulator's mma.sync and ldmatrix
 * with the PTX fragment layouts and its cp.async copies landing only when
 * waited for, and is checked against the f32-arithmetic kernels and the
 * reference within the bound its 16-bit probabilities allow; NVRTC's
 * registers and shared memory for it are printed and held to the design's
 * occupancy. */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>
#include <math.h>

#include "cuda/nvrtc.h"
#include "nvrtc_test_cache.h"
#include "cuda/kernels_attention.h"
#include "cuda/kernels_attention_tc.h"
#include "cuda/kernels_attention_bwd.h"
#include "cuda/kernels_softmax.h"
#include "cuda_emu/cuda_emu_runner.h"
#include "test_util.h"

/* ---- values ---- */

static uint16_t to_bf16(float x) { /* to nearest even, as the kernels and the CPU round */
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float x;
  memcpy(&x, &u, 4);
  return x;
}
/* the element formats the kernels read and write */
enum { F32, BF16, F16 };
static const char *const format_name[] = {"f32", "bf16", "f16"};
static float rounded(float x, int fmt) {
  return fmt == BF16 ? from_bf16(to_bf16(x)) : fmt == F16 ? jx_f16_to_f32(jx_f32_to_f16(x)) : x;
}

/* n deterministic values in [-scale, scale], rounded to fmt, so that the
 * reference sees exactly what the kernel reads */
static float *values(int64_t n, int seed, double scale, int fmt) {
  float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
  assert_non_null(x);
  for (int64_t i = 0; i < n; i++)
    x[i] = rounded(
        (float)(scale * sin(0.37 * (double)i + seed) * cos(0.011 * (double)i * seed + 1.0)), fmt);
  return x;
}

/* host buffer of x in format fmt */
static void *device_layout(const float *x, int64_t n, int fmt) {
  void *h = malloc((size_t)(n ? n : 1) * (fmt == F32 ? 4 : 2));
  assert_non_null(h);
  for (int64_t i = 0; i < n; i++) {
    if (fmt == F32)
      ((float *)h)[i] = x[i];
    else
      ((uint16_t *)h)[i] = fmt == BF16 ? to_bf16(x[i]) : jx_f32_to_f16(x[i]);
  }
  return h;
}

static float element(const void *h, int64_t i, int fmt) {
  return fmt == BF16  ? from_bf16(((const uint16_t *)h)[i])
         : fmt == F16 ? jx_f16_to_f32(((const uint16_t *)h)[i])
                      : ((const float *)h)[i];
}

/* Elements of got beyond atol + rtol |want| (+ bound[i] when bound is not
 * NULL); the largest error seen. */
static int64_t compare_within(const char *what, const void *got, int fmt, const double *want,
                              int64_t n, double rtol, double atol, const double *bound,
                              double *max_err) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double g = element(got, i, fmt), w = want[i], err = fabs(g - w);
    if (err > *max_err || g != g) *max_err = g != g ? INFINITY : err;
    if (!(err <= atol + rtol * fabs(w) + (bound ? bound[i] : 0))) {
      if (bad < 5) fprintf(stderr, "%s[%lld]: %.9g, expected %.9g\n", what, (long long)i, g, w);
      bad++;
    }
  }
  return bad;
}
static int64_t compare(const char *what, const void *got, int fmt, const double *want, int64_t n,
                       double rtol, double atol, double *max_err) {
  return compare_within(what, got, fmt, want, n, rtol, atol, NULL, max_err);
}

/* ---- the emulator ---- */

static cuda_emu_module *softmax_module, *attention_module, *backward_module, *tc_module;
static int emulation_checked; /* kernels run in the emulator and compared */

static cuda_emu_module *emulated(cuda_emu_module **m, const char *src, const char *name) {
  if (!cuda_emu_available()) {
    printf("skipped: CUDA emulation (%s)\n", cuda_emu_missing());
    return NULL;
  }
  if (!*m) {
    char log[4096];
    *m = cuda_emu_compile(src, name, log, sizeof log);
    if (!*m) fprintf(stderr, "%s\n", log);
    assert_non_null(*m);
  }
  return *m;
}

static void call_softmax(void *kernel, void *args) {
  ((void (*)(jx_cuda_softmax_args))kernel)(*(const jx_cuda_softmax_args *)args);
}
static void call_attention_bwd(void *kernel, void *args) {
  ((void (*)(jx_cuda_attention_bwd_args))kernel)(*(const jx_cuda_attention_bwd_args *)args);
}
static void call_attention(void *kernel, void *args) {
  ((void (*)(jx_cuda_attention_args))kernel)(*(const jx_cuda_attention_args *)args);
}

static void launch(cuda_emu_module *m, const char *name, const jx_cuda_launch_dims *d,
                   cuda_emu_call call, void *args) {
  void *kernel = cuda_emu_kernel(m, name);
  assert_non_null(kernel);
  cuda_emu_dim3 grid = {d->grid[0], d->grid[1], d->grid[2]};
  cuda_emu_dim3 block = {d->block[0], d->block[1], d->block[2]};
  assert_int_equal(cuda_emu_launch(m, kernel, grid, block, call, args), 0);
}

/* ---- softmax ---- */

static void softmax_reference(const float *x, int64_t rows, int64_t cols, double *y) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < cols; j++) m = xr[j] > m ? xr[j] : m;
    for (int64_t j = 0; j < cols; j++) s += exp((double)xr[j] - m);
    for (int64_t j = 0; j < cols; j++) y[r * cols + j] = exp((double)xr[j] - m) / s;
  }
}

/* softmax of rows x cols values, with the launch jx_cuda_softmax_geometry
 * gives (or, grid_rows > 0, that many blocks, fewer than the rows) */
static void check_softmax(int64_t rows, int64_t cols, int bf16, unsigned grid_rows) {
  cuda_emu_module *m = emulated(&softmax_module, jx_cuda_softmax_src, "softmax.cu");
  if (!m) return;
  int64_t n = rows * cols;
  float *x = values(n, (int)(rows + cols), 8.0, bf16);
  /* stability: huge values in row 0 (exp overflows without the max), and
   * -inf entries (exp gives 0) in the last row */
  if (cols > 2) {
    x[0] = 3.0e4f;
    x[1] = 2.95e4f;
    x[(rows - 1) * cols + 1] = -INFINITY;
    if (bf16) /* what the kernel reads: 29952 and 29440 */
      for (int i = 0; i < 2; i++) x[i] = from_bf16(to_bf16(x[i]));
  }
  double *want = malloc((size_t)n * sizeof *want);
  assert_non_null(want);
  softmax_reference(x, rows, cols, want);
  void *hx = device_layout(x, n, bf16), *hy = calloc((size_t)n, bf16 ? 2 : 4);
  assert_non_null(hy);
  jx_cuda_softmax_args a = {hx, hy, rows, cols};
  jx_cuda_launch_dims d;
  check_ok(jx_cuda_softmax_geometry(rows, cols, &d));
  assert_true(d.block[0] % 32 == 0 && d.block[0] <= 256);
  if (grid_rows) d.grid[0] = grid_rows;
  launch(m, jx_cuda_softmax_kernel(bf16 ? JX_BF16 : JX_F32), &d, call_softmax, &a);
  double err = 0;
  int64_t bad =
      compare("softmax", hy, bf16, want, n, bf16 ? 1.0 / 128 : 2e-6, bf16 ? 1e-6 : 1e-9, &err);
  printf("softmax %s [%lld, %lld], %u blocks of %u: max error %.3g\n", bf16 ? "bf16" : "f32",
         (long long)rows, (long long)cols, d.grid[0], d.block[0], err);
  assert_int_equal(bad, 0);
  emulation_checked++;
  free(x);
  free(want);
  free(hx);
  free(hy);
}

/* ---- softmax cross-entropy ---- */

static void call_xent(void *kernel, void *args) {
  ((void (*)(jx_cuda_xent_args))kernel)(*(const jx_cuda_xent_args *)args);
}

/* 1 when got equals want as the kernel must: both NaN, the same infinity,
 * or within rtol. */
static int close_to(double got, double want, double rtol) {
  if (want != want || got != got) return want != want && got != got;
  if (isinf(want) || isinf(got)) return got == want;
  return fabs(got - want) <= rtol * fabs(want) + 1e-30;
}

/* The forward, label's logit and backward kernels on rows that take every
 * path, against
 * a double reference of the program's definition: rows longer than the
 * block (the running max grows and rescales), labels in the first and last
 * column and none (-1: picked 0), a row of huge values (exp overflows
 * without the max), a row holding +inf (max not finite: shifted by 0, the
 * sum inf), a row holding a NaN (max 0, sum NaN), a row of -inf (max 0,
 * sum 0). The label's logit and the max are exact; the sum within 4e-6
 * (f32 sums of at most 1000 terms a row, in another order); the gradient
 * within (|x - max| + 4) u relative (the rounded argument of exp, exp's,
 * the product's and the sum's roundings), plus bf16's rounding. */
static void check_xent(int64_t rows, int64_t cols, int bf16) {
  cuda_emu_module *m = emulated(&softmax_module, jx_cuda_softmax_src, "softmax.cu");
  if (!m) return;
  int64_t n = rows * cols;
  float *x = values(n, (int)(rows * 3 + cols), 6.0, bf16);
  float label[8], scale[8], at[8], picked[8], mx[8], sum[8];
  assert_true(rows <= 8 && cols > 8);
  for (int64_t r = 0; r < rows; r++) {
    label[r] = r == 0 ? 0.0f : r == 1 ? (float)(cols - 1) : r == 2 ? -1.0f : (float)(r * 37 % cols);
    scale[r] = 0.01f * (float)(r + 1);
    at[r] = -0.125f * (float)(r + 1);
  }
  if (rows > 3) x[3 * cols + 5] = bf16 ? 29952.0f : 3.0e4f;
  if (rows > 4) x[4 * cols + 7] = INFINITY;
  if (rows > 5) x[5 * cols + 2] = NAN;
  for (int64_t j = 0; rows > 6 && j < cols; j++) x[6 * cols + j] = -INFINITY;
  void *hx = device_layout(x, n, bf16), *hg = calloc((size_t)n, bf16 ? 2 : 4);
  assert_non_null(hg);
  jx_cuda_xent_args a = {hx, label, picked, mx, sum, scale, at, hg, rows, cols};
  jx_cuda_launch_dims d;
  check_ok(jx_cuda_softmax_geometry(rows, cols, &d));
  const jx_dtype dt = bf16 ? JX_BF16 : JX_F32;
  launch(m, jx_cuda_xent_kernel(dt, JX_CUDA_XENT_FORWARD), &d, call_xent, &a);
  launch(m, jx_cuda_xent_kernel(dt, JX_CUDA_XENT_BACKWARD), &d, call_xent, &a);
  jx_cuda_launch_dims dp;
  check_ok(jx_cuda_xent_pick_geometry(rows, &dp));
  launch(m, jx_cuda_xent_kernel(dt, JX_CUDA_XENT_PICK), &dp, call_xent, &a);
  int64_t bad = 0;
  double worst_sum = 0, worst_grad = 0;
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    double m0 = -INFINITY, want_pick = 0, s = 0;
    int nan = 0;
    for (int64_t j = 0; j < cols; j++) {
      nan |= xr[j] != xr[j];
      m0 = xr[j] > m0 ? xr[j] : m0;
      if ((float)j == label[r]) want_pick = xr[j];
    }
    double mq = !nan && isfinite(m0) ? m0 : 0;
    for (int64_t j = 0; j < cols; j++) s += exp((double)xr[j] - mq);
    bad += picked[r] != (float)want_pick || mx[r] != (float)mq || !close_to(sum[r], s, 4e-6);
    if (isfinite(s) && s > 0 && fabs(sum[r] - s) / s > worst_sum) worst_sum = fabs(sum[r] - s) / s;
    for (int64_t j = 0; j < cols; j++) {
      double g = (double)scale[r] * exp((double)xr[j] - mx[r]) + ((float)j == label[r] ? at[r] : 0);
      /* x - max rounded (|x - max| u of exp's argument), exp's and the
       * product's and sum's roundings, then bf16's */
      double u = 1.0 / (1 << 24), arg = isfinite(xr[j] - (double)mx[r]) ? fabs(xr[j] - mx[r]) : 0;
      double got = element(hg, r * cols + j, bf16), tol = (arg + 4) * u + (bf16 ? 1.0 / 256 : 0);
      if (!close_to(got, g, tol)) {
        if (bad < 5)
          fprintf(stderr, "grad[%lld][%lld]: %.9g, expected %.9g\n", (long long)r, (long long)j,
                  got, g);
        bad++;
      }
      if (isfinite(g) && g != 0 && fabs(got - g) / fabs(g) > worst_grad)
        worst_grad = fabs(got - g) / fabs(g);
    }
    if (bad && r < 8)
      fprintf(stderr, "row %lld: picked %.9g (%.9g), max %.9g (%.9g), sum %.9g (%.9g)\n",
              (long long)r, picked[r], want_pick, mx[r], mq, sum[r], s);
  }
  printf("cross-entropy %s [%lld, %lld], blocks of %u: sum within %.3g, gradient within %.3g\n",
         bf16 ? "bf16" : "f32", (long long)rows, (long long)cols, d.block[0], worst_sum,
         worst_grad);
  assert_int_equal(bad, 0);
  emulation_checked++;
  free(x);
  free(hx);
  free(hg);
}

static void xent_matches_reference(void **state) {
  (void)state;
  check_xent(7, 1000, 0);
  check_xent(7, 1000, 1);
  check_xent(3, 37, 0); /* a row shorter than a warp's threads' share */
}

static void softmax_f32_matches_reference(void **state) {
  (void)state;
  check_softmax(1, 1, 0, 0);
  check_softmax(3, 7, 0, 0);
  check_softmax(5, 33, 0, 0);
  check_softmax(2, 1000, 0, 0);
  check_softmax(2, 4099, 0, 0); /* 256 threads, 17 turns of the column loop */
  check_softmax(7, 50, 0, 3);   /* fewer blocks than rows: the grid-stride loop */
}

static void softmax_bf16_matches_reference(void **state) {
  (void)state;
  check_softmax(1, 1, 1, 0);
  check_softmax(4, 129, 1, 0);
  check_softmax(3, 777, 1, 2);
}

/* ---- attention ---- */

/* o and lse for [b, h, t, d] q, k, v, in double */
static void attention_reference(const float *q, const float *k, const float *v, int64_t bh,
                                int64_t t, int64_t d, double scale, int causal, double *o,
                                double *lse) {
  double *s = malloc((size_t)t * sizeof *s);
  assert_non_null(s);
  for (int64_t g = 0; g < bh; g++)
    for (int64_t i = 0; i < t; i++) {
      const float *qi = q + (g * t + i) * d;
      int64_t nj = causal ? i + 1 : t;
      double m = -INFINITY, l = 0;
      for (int64_t j = 0; j < nj; j++) {
        double dot = 0;
        for (int64_t c = 0; c < d; c++) dot += (double)qi[c] * k[(g * t + j) * d + c];
        s[j] = scale * dot;
        m = s[j] > m ? s[j] : m;
      }
      for (int64_t j = 0; j < nj; j++) l += exp(s[j] - m);
      for (int64_t c = 0; c < d; c++) {
        double acc = 0;
        for (int64_t j = 0; j < nj; j++) acc += exp(s[j] - m) * v[(g * t + j) * d + c];
        o[(g * t + i) * d + c] = acc / l;
      }
      lse[g * t + i] = m + log(l);
    }
  free(s);
}

static void check_attention(int64_t b, int64_t h, int64_t t, int64_t d, int causal, int bf16) {
  cuda_emu_module *m = emulated(&attention_module, jx_cuda_attention_src, "attention.cu");
  if (!m) return;
  int64_t n = b * h * t * d, nq = b * h * t;
  float *q = values(n, 1, 1.5, bf16), *k = values(n, 2, 1.5, bf16), *v = values(n, 3, 1.0, bf16);
  double *want = malloc((size_t)n * sizeof *want), *want_lse = malloc((size_t)nq * sizeof *want);
  assert_non_null(want);
  assert_non_null(want_lse);
  const double scale = 1.0 / sqrt((double)d);
  attention_reference(q, k, v, b * h, t, d, scale, causal, want, want_lse);
  void *hq = device_layout(q, n, bf16), *hk = device_layout(k, n, bf16);
  void *hv = device_layout(v, n, bf16), *ho = calloc((size_t)n, bf16 ? 2 : 4);
  float *lse = calloc((size_t)nq, sizeof *lse);
  assert_non_null(ho);
  assert_non_null(lse);
  jx_cuda_attention_args a = {hq, hk, hv, ho, lse, b, h, t, (float)scale, causal};
  jx_cuda_launch_dims dims;
  check_ok(jx_cuda_attention_geometry(b, h, t, d, &dims));
  const char *name = jx_cuda_attention_kernel(bf16 ? JX_BF16 : JX_F32, d);
  assert_non_null(name);
  launch(m, name, &dims, call_attention, &a);
  double err = 0, lse_err = 0;
  int64_t bad = compare("o", ho, bf16, want, n, bf16 ? 1.0 / 128 : 2e-5, bf16 ? 2e-3 : 2e-6, &err);
  bad += compare("lse", lse, 0, want_lse, nq, bf16 ? 1e-5 : 1e-5, 1e-5, &lse_err);
  printf("attention %s %s [%lld, %lld, %lld, %lld]: max error %.3g (o), %.3g (logsumexp)\n",
         bf16 ? "bf16" : "f32", causal ? "causal" : "full", (long long)b, (long long)h,
         (long long)t, (long long)d, err, lse_err);
  assert_int_equal(bad, 0);
  emulation_checked++;
  free(q);
  free(k);
  free(v);
  free(want);
  free(want_lse);
  free(hq);
  free(hk);
  free(hv);
  free(ho);
  free(lse);
}

static void attention_f32_matches_reference(void **state) {
  (void)state;
  check_attention(1, 1, 1, 64, 1, 0);   /* T = 1 */
  check_attention(1, 2, 37, 64, 1, 0);  /* partial query block and key tile */
  check_attention(2, 1, 16, 128, 1, 0); /* one query block exactly */
  check_attention(1, 1, 45, 128, 0, 0); /* full attention, two key tiles */
  check_attention(1, 3, 70, 32, 1, 0);  /* three key tiles */
}

static void attention_bf16_matches_reference(void **state) {
  (void)state;
  check_attention(1, 1, 1, 128, 1, 1);
  check_attention(2, 2, 33, 64, 1, 1);
  check_attention(1, 1, 40, 128, 0, 1);
}

/* ---- attention on tensor cores ---- */

/* The unit roundoff of the 16-bit formats: 8 and 11 significant bits. */
static double unit_roundoff(int fmt) { return fmt == BF16 ? 0x1p-8 : 0x1p-11; }

/* The tensor-core kernel on bf16 or f16 q, k, v against an f32-arithmetic
 * kernel of kernels_attention.h on the same values (bf16: its bf16 kernel;
 * f16: its f32 kernel on the values widened, exactly) and the reference in
 * double. The bound: the probabilities are rounded to 16 bits (unit
 * roundoff u) before they multiply v, so o moves by at most
 * u sum_j p_j |v_j| / l <= u max |v| over the reduction of T keys; the
 * outputs are rounded to 16 bits (u |o| each); the f32 sums' order adds
 * (T + head_dim) 2^-24 relative, far below. The logsumexp sees the same f32
 * scores: only the order of head_dim products differs. */
static void check_attention_tc(int64_t b, int64_t h, int64_t t, int64_t d, int causal, int fmt) {
  cuda_emu_module *tc = emulated(&tc_module, jx_cuda_attention_tc_src, "attention_tc.cu");
  cuda_emu_module *f32 = emulated(&attention_module, jx_cuda_attention_src, "attention.cu");
  if (!tc || !f32) return;
  const int ref_fmt = fmt == BF16 ? BF16 : F32; /* what the f32-arithmetic kernel reads */
  const jx_dtype dt = fmt == BF16 ? JX_BF16 : JX_F16;
  int64_t n = b * h * t * d, nq = b * h * t;
  float *q = values(n, 4, 1.5, fmt), *k = values(n, 5, 1.5, fmt), *v = values(n, 6, 1.0, fmt);
  double *want = malloc((size_t)n * sizeof *want), *want_lse = malloc((size_t)nq * sizeof *want);
  double *f32_o = malloc((size_t)n * sizeof *f32_o), *f32_lse = malloc((size_t)nq * sizeof *f32_o);
  assert_true(want && want_lse && f32_o && f32_lse);
  const double scale = 1.0 / sqrt((double)d);
  attention_reference(q, k, v, b * h, t, d, scale, causal, want, want_lse);
  void *hq = device_layout(q, n, ref_fmt), *hk = device_layout(k, n, ref_fmt);
  void *hv = device_layout(v, n, ref_fmt), *ho = calloc((size_t)n, 4);
  void *tq = device_layout(q, n, fmt), *tk = device_layout(k, n, fmt);
  void *tv = device_layout(v, n, fmt), *ho_tc = calloc((size_t)n, 2);
  float *lse = calloc((size_t)nq, sizeof *lse), *lse_tc = calloc((size_t)nq, sizeof *lse);
  assert_true(ho && ho_tc && lse && lse_tc);
  jx_cuda_attention_args a = {hq, hk, hv, ho, lse, b, h, t, (float)scale, causal};
  jx_cuda_launch_dims dims;
  check_ok(jx_cuda_attention_geometry(b, h, t, d, &dims));
  launch(f32, jx_cuda_attention_kernel(fmt == BF16 ? JX_BF16 : JX_F32, d), &dims, call_attention,
         &a);
  jx_cuda_attention_args at = {tq, tk, tv, ho_tc, lse_tc, b, h, t, (float)scale, causal};
  check_ok(jx_cuda_attention_tc_geometry(b, h, t, d, &dims));
  assert_int_equal(dims.grid[0], (t + 63) / 64);
  const char *name = jx_cuda_attention_tc_kernel(dt, d);
  assert_non_null(name);
  launch(tc, name, &dims, call_attention, &at);
  double vmax = 0;
  for (int64_t i = 0; i < n; i++) vmax = fmax(vmax, fabs(v[i]));
  for (int64_t i = 0; i < n; i++) f32_o[i] = element(ho, i, ref_fmt);
  for (int64_t i = 0; i < nq; i++) f32_lse[i] = lse[i];
  const double u = unit_roundoff(fmt), slack = (double)(t + d) * 0x1p-24;
  double err = 0, err_f32 = 0, lse_err = 0;
  int64_t bad =
      compare("o (vs f32 kernel)", ho_tc, fmt, f32_o, n, 2 * u + slack, u * vmax, &err_f32);
  /* bf16: the f32 kernel's own distance to the reference is its test's */
  bad += compare("o (vs reference)", ho_tc, fmt, want, n, fmt == BF16 ? 1.0 / 128 + u : u + slack,
                 (fmt == BF16 ? 2e-3 : 1e-6) + u * vmax, &err);
  bad += compare("lse (vs f32 kernel)", lse_tc, F32, f32_lse, nq, 1e-6, 1e-5, &lse_err);
  printf("attention tensor cores %s %s [%lld, %lld, %lld, %lld]: max difference %.3g from the f32 "
         "kernel (bound %.3g + %.3g |o|), %.3g from the reference, %.3g (logsumexp)\n",
         format_name[fmt], causal ? "causal" : "full", (long long)b, (long long)h, (long long)t,
         (long long)d, err_f32, u * vmax, 2 * u + slack, err, lse_err);
  assert_int_equal(bad, 0);
  emulation_checked++;
  void *bufs[] = {q,  k,  v,  want, want_lse, f32_o, f32_lse, hq,    hk,
                  hv, ho, tq, tk,   tv,       ho_tc, lse,     lse_tc};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

static void attention_tc_matches_f32_kernel(void **state) {
  (void)state;
  check_attention_tc(1, 1, 1, 64, 1, BF16);   /* T = 1: one key, 63 padded query rows */
  check_attention_tc(1, 2, 37, 64, 1, BF16);  /* partial key tile, causal tiles skipped by warps */
  check_attention_tc(1, 1, 45, 64, 0, BF16);  /* full attention */
  check_attention_tc(1, 1, 70, 128, 1, BF16); /* two query blocks, three key tiles */
  check_attention_tc(2, 1, 33, 128, 0, BF16);
  check_attention_tc(1, 1, 37, 64, 1, F16);
  check_attention_tc(1, 1, 33, 128, 0, F16);
  /* three query blocks and key tiles: K and V fetched while the other is used, over iterations */
  check_attention_tc(1, 1, 140, 64, 1, BF16);
}

static void attention_tc_geometry_rejects_bad_shapes(void **state) {
  (void)state;
  jx_cuda_launch_dims d;
  assert_null(jx_cuda_attention_tc_kernel(JX_F32, 64)); /* f32 keeps kernels_attention.h's */
  assert_null(jx_cuda_attention_tc_kernel(JX_BF16, 32));
  assert_int_equal(jx_cuda_attention_tc_geometry(1, 1, 8, 32, &d), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "head_dim must be 64 or 128"));
  assert_int_equal(jx_cuda_attention_tc_geometry(1, 70000, 8, 64, &d), JX_ERR_INVALID_ARGUMENT);
  assert_int_equal(jx_cuda_attention_tc_geometry(-1, 1, 8, 64, &d), JX_ERR_INVALID_ARGUMENT);
  check_ok(jx_cuda_attention_tc_geometry(2, 3, 0, 128, &d));
  assert_int_equal(d.grid[0], 0);
  check_ok(jx_cuda_attention_tc_geometry(2, 3, 129, 128, &d));
  assert_int_equal(d.grid[0], 3);
  assert_int_equal(d.block[0], 128);
}

/* ---- attention backward ---- */

/* dq, dk, dv for the cotangent dout of o, in double (FlashAttention's
 * equations, from the scores up: an oracle independent of the kernels).
 * With bound (three arrays like dq, dk, dv), also how far kernels that
 * round p and ds to a 16-bit format of unit roundoff u before the second
 * products, and read an o rounded to it, may land from these values
 * (outputs not yet rounded), summed over the products term by term:
 *   ds_ij moves by u |ds_ij| (its rounding) + p_ij e_i, where e_i =
 *     u sum |do_i| |o_i| + (head_dim + 2) 2^-24 (sum |do_i| |v_j| +
 *     sum |do_i| |o_i|) covers the rounded o in delta_i = do_i . o_i and
 *     the f32 dot products of dp_ij - delta_i, which may cancel;
 *   p_ij moves by u p_ij (its rounding) + 1e-6 p_ij (the f32 exp of the
 *     f32 score less the f32 logsumexp);
 *   a sum of T f32 terms adds T 2^-24 times the sum of their magnitudes. */
static void attention_backward_reference(const float *q, const float *k, const float *v,
                                         const float *dout, int64_t bh, int64_t t, int64_t d,
                                         double scale, int causal, double *dq, double *dk,
                                         double *dv, double u, double *bound[3]) {
  double *p = malloc((size_t)(t * t) * sizeof *p), *dp = malloc((size_t)t * sizeof *dp);
  double *dpabs = malloc((size_t)t * sizeof *dpabs);
  assert_true(p && dp && dpabs);
  double *outs[3] = {dq, dk, dv};
  for (int g = 0; g < 3; g++) {
    memset(outs[g], 0, (size_t)(bh * t * d) * sizeof(double));
    if (bound) memset(bound[g], 0, (size_t)(bh * t * d) * sizeof(double));
  }
  const double sum_err = (double)t * 0x1p-24;
  for (int64_t g = 0; g < bh; g++) {
    const int64_t base = g * t * d;
    for (int64_t i = 0; i < t; i++) { /* the softmax's probabilities, row i */
      double m = -INFINITY, l = 0;
      for (int64_t j = 0; j < t; j++) {
        double dot = 0;
        for (int64_t c = 0; c < d; c++) dot += (double)q[base + i * d + c] * k[base + j * d + c];
        p[i * t + j] = causal && j > i ? -INFINITY : scale * dot;
        m = p[i * t + j] > m ? p[i * t + j] : m;
      }
      for (int64_t j = 0; j < t; j++) l += p[i * t + j] = exp(p[i * t + j] - m);
      for (int64_t j = 0; j < t; j++) p[i * t + j] /= l;
    }
    for (int64_t i = 0; i < t; i++) {
      /* dp_ij = dout_i . v_j; ds = p (dp - sum_j p_ij dp_ij) */
      const float *doi = dout + base + i * d;
      double sum = 0, do_o = 0;
      for (int64_t j = 0; j < t; j++) {
        dp[j] = dpabs[j] = 0;
        for (int64_t c = 0; c < d; c++) {
          dp[j] += (double)doi[c] * v[base + j * d + c];
          dpabs[j] += fabs((double)doi[c] * v[base + j * d + c]);
        }
        sum += p[i * t + j] * dp[j];
      }
      for (int64_t c = 0; c < d; c++) { /* sum |do_i| |o_i| */
        double o = 0;
        for (int64_t j = 0; j < t; j++) o += p[i * t + j] * v[base + j * d + c];
        do_o += fabs(doi[c] * o);
      }
      for (int64_t j = 0; j < t; j++) {
        const double pij = p[i * t + j], ds = pij * (dp[j] - sum);
        const double ds_err = u * fabs(ds) + 1e-6 * fabs(ds) +
                              pij * (u * do_o + (double)(d + 2) * 0x1p-24 * (dpabs[j] + do_o));
        for (int64_t c = 0; c < d; c++) {
          const double kc = k[base + j * d + c], qc = q[base + i * d + c];
          dq[base + i * d + c] += scale * ds * kc;
          dk[base + j * d + c] += scale * ds * qc;
          dv[base + j * d + c] += pij * doi[c];
          if (bound) {
            bound[0][base + i * d + c] += scale * (ds_err + sum_err * fabs(ds)) * fabs(kc);
            bound[1][base + j * d + c] += scale * (ds_err + sum_err * fabs(ds)) * fabs(qc);
            bound[2][base + j * d + c] += (u + 1e-6 + sum_err) * pij * fabs(doi[c]);
          }
        }
      }
    }
  }
  free(p);
  free(dp);
  free(dpabs);
}

/* The forward kernel (o and lse), then the three backward kernels, against
 * the reference's dq, dk, dv. */
static void check_attention_backward(int64_t b, int64_t h, int64_t t, int64_t d, int causal,
                                     int bf16) {
  cuda_emu_module *fwd = emulated(&attention_module, jx_cuda_attention_src, "attention.cu");
  cuda_emu_module *bwd =
      fwd ? emulated(&backward_module, jx_cuda_attention_bwd_src, "attention_bwd.cu") : NULL;
  if (!bwd) return;
  const int64_t n = b * h * t * d, nq = b * h * t, es = bf16 ? 2 : 4;
  float *q = values(n, 4, 1.5, bf16), *k = values(n, 5, 1.5, bf16), *v = values(n, 6, 1.0, bf16);
  float *dout = values(n, 7, 1.0, bf16);
  double *want[3];
  for (int g = 0; g < 3; g++) {
    want[g] = malloc((size_t)n * sizeof *want[g]);
    assert_non_null(want[g]);
  }
  const double scale = 1.0 / sqrt((double)d);
  attention_backward_reference(q, k, v, dout, b * h, t, d, scale, causal, want[0], want[1], want[2],
                               0, NULL);
  void *hq = device_layout(q, n, bf16), *hk = device_layout(k, n, bf16);
  void *hv = device_layout(v, n, bf16), *hdo = device_layout(dout, n, bf16);
  void *ho = calloc((size_t)n, (size_t)es), *grads[3];
  float *lse = calloc((size_t)nq, sizeof *lse), *delta = calloc((size_t)nq, sizeof *delta);
  assert_non_null(ho);
  assert_non_null(lse);
  assert_non_null(delta);
  for (int g = 0; g < 3; g++) {
    grads[g] = calloc((size_t)n, (size_t)es);
    assert_non_null(grads[g]);
  }
  jx_cuda_attention_args fa = {hq, hk, hv, ho, lse, b, h, t, (float)scale, causal};
  jx_cuda_launch_dims dims, bdims[3];
  check_ok(jx_cuda_attention_geometry(b, h, t, d, &dims));
  launch(fwd, jx_cuda_attention_kernel(bf16 ? JX_BF16 : JX_F32, d), &dims, call_attention, &fa);
  jx_cuda_attention_bwd_args ba = {hq,       hk,       hv, ho, hdo, lse,          delta, grads[0],
                                   grads[1], grads[2], b,  h,  t,   (float)scale, causal};
  char names[3][48];
  assert_int_equal(jx_cuda_attention_bwd_kernels(bf16 ? JX_BF16 : JX_F32, d, names), 0);
  check_ok(jx_cuda_attention_bwd_geometry(b, h, t, d, bdims));
  for (int s = 0; s < 3; s++) launch(bwd, names[s], &bdims[s], call_attention_bwd, &ba);
  const char *what[3] = {"dq", "dk", "dv"};
  double err[3] = {0, 0, 0};
  int64_t bad = 0;
  for (int g = 0; g < 3; g++)
    bad += compare(what[g], grads[g], bf16, want[g], n, bf16 ? 1.0 / 64 : 1e-4, bf16 ? 1e-2 : 1e-5,
                   &err[g]);
  printf("attention backward %s %s [%lld, %lld, %lld, %lld]: max error %.3g (dq), %.3g (dk), "
         "%.3g (dv)\n",
         bf16 ? "bf16" : "f32", causal ? "causal" : "full", (long long)b, (long long)h,
         (long long)t, (long long)d, err[0], err[1], err[2]);
  assert_int_equal(bad, 0);
  emulation_checked++;
  free(q);
  free(k);
  free(v);
  free(dout);
  free(hq);
  free(hk);
  free(hv);
  free(hdo);
  free(ho);
  free(lse);
  free(delta);
  for (int g = 0; g < 3; g++) {
    free(want[g]);
    free(grads[g]);
  }
}

static void attention_backward_matches_reference(void **state) {
  (void)state;
  check_attention_backward(1, 1, 1, 64, 1, 0);   /* T = 1 */
  check_attention_backward(1, 2, 37, 64, 1, 0);  /* partial tiles on both sides */
  check_attention_backward(1, 1, 45, 128, 0, 0); /* full attention */
  check_attention_backward(2, 1, 20, 32, 1, 0);
  check_attention_backward(1, 2, 33, 64, 1, 1); /* bf16 */
}

/* The tensor-core backward (after the tensor-core forward's o and lse)
 * against the reference within the bound attention_backward_reference
 * derives for the format (plus u |dx| for rounding the output), and against
 * the f32-arithmetic backward of kernels_attention_bwd.h on the same q, k,
 * v, o, lse and do (bf16: its bf16 kernels; f16: its f32 kernels on the
 * values widened) within the same bound plus 2 u |dx| (both outputs
 * rounded in bf16). */
static void check_attention_tc_backward(int64_t b, int64_t h, int64_t t, int64_t d, int causal,
                                        int fmt) {
  cuda_emu_module *tc = emulated(&tc_module, jx_cuda_attention_tc_src, "attention_tc.cu");
  cuda_emu_module *bwd =
      tc ? emulated(&backward_module, jx_cuda_attention_bwd_src, "attention_bwd.cu") : NULL;
  if (!bwd) return;
  const int ref_fmt = fmt == BF16 ? BF16 : F32;
  const jx_dtype dt = fmt == BF16 ? JX_BF16 : JX_F16;
  const int64_t n = b * h * t * d, nq = b * h * t;
  float *x[4] = {values(n, 4, 1.5, fmt), values(n, 5, 1.5, fmt), values(n, 6, 1.0, fmt),
                 values(n, 7, 1.0, fmt)}; /* q, k, v, do */
  double *want[3], *bound[3], *f32_grad[3];
  for (int g = 0; g < 3; g++) {
    want[g] = malloc((size_t)n * sizeof *want[g]);
    bound[g] = malloc((size_t)n * sizeof *bound[g]);
    f32_grad[g] = malloc((size_t)n * sizeof *f32_grad[g]);
    assert_true(want[g] && bound[g] && f32_grad[g]);
  }
  const double scale = 1.0 / sqrt((double)d), u = unit_roundoff(fmt);
  attention_backward_reference(x[0], x[1], x[2], x[3], b * h, t, d, scale, causal, want[0], want[1],
                               want[2], u, bound);
  void *th[4], *fh[5], *tgrad[3], *fgrad[3], *ho = calloc((size_t)n, 2);
  float *lse = calloc((size_t)nq, sizeof *lse), *delta = calloc((size_t)nq, sizeof *delta);
  assert_true(ho && lse && delta);
  for (int i = 0; i < 4; i++) th[i] = device_layout(x[i], n, fmt);
  for (int g = 0; g < 3; g++) {
    tgrad[g] = calloc((size_t)n, 2);
    fgrad[g] = calloc((size_t)n, 4);
    assert_true(tgrad[g] && fgrad[g]);
  }
  jx_cuda_attention_args fa = {th[0], th[1], th[2], ho, lse, b, h, t, (float)scale, causal};
  jx_cuda_launch_dims dims, bdims[3];
  check_ok(jx_cuda_attention_tc_geometry(b, h, t, d, &dims));
  launch(tc, jx_cuda_attention_tc_kernel(dt, d), &dims, call_attention, &fa);
  char names[3][48];
  assert_int_equal(jx_cuda_attention_tc_bwd_kernels(dt, d, names), 0);
  check_ok(jx_cuda_attention_tc_bwd_geometry(b, h, t, d, bdims));
  assert_int_equal(bdims[1].grid[0], (t + 63) / 64);
  jx_cuda_attention_bwd_args ba = {th[0], th[1], th[2],    ho,           th[3],
                                   lse,   delta, tgrad[0], tgrad[1],     tgrad[2],
                                   b,     h,     t,        (float)scale, causal};
  for (int k = 0; k < 3; k++) launch(tc, names[k], &bdims[k], call_attention_bwd, &ba);
  /* the f32-arithmetic kernels on the same values, o included */
  float *o = malloc((size_t)n * sizeof *o);
  assert_non_null(o);
  for (int64_t i = 0; i < n; i++) o[i] = element(ho, i, fmt);
  for (int i = 0; i < 4; i++) fh[i] = device_layout(x[i], n, ref_fmt);
  fh[4] = device_layout(o, n, ref_fmt);
  jx_cuda_attention_bwd_args fb = {fh[0], fh[1], fh[2],    fh[4],        fh[3],
                                   lse,   delta, fgrad[0], fgrad[1],     fgrad[2],
                                   b,     h,     t,        (float)scale, causal};
  assert_int_equal(jx_cuda_attention_bwd_kernels(fmt == BF16 ? JX_BF16 : JX_F32, d, names), 0);
  check_ok(jx_cuda_attention_bwd_geometry(b, h, t, d, bdims));
  for (int k = 0; k < 3; k++) launch(bwd, names[k], &bdims[k], call_attention_bwd, &fb);
  const char *what[3] = {"dq", "dk", "dv"};
  double err[3] = {0, 0, 0}, err_f32[3] = {0, 0, 0}, used = 0;
  int64_t bad = 0;
  for (int g = 0; g < 3; g++) {
    for (int64_t i = 0; i < n; i++) f32_grad[g][i] = element(fgrad[g], i, ref_fmt);
    bad += compare_within(what[g], tgrad[g], fmt, want[g], n, u, 1e-7, bound[g], &err[g]);
    bad +=
        compare_within(what[g], tgrad[g], fmt, f32_grad[g], n, 2 * u, 1e-7, bound[g], &err_f32[g]);
    for (int64_t i = 0; i < n; i++) { /* how much of the bound the reference difference used */
      const double e = fabs(element(tgrad[g], i, fmt) - want[g][i]);
      used = fmax(used, e / (1e-7 + u * fabs(want[g][i]) + bound[g][i]));
    }
  }
  printf("attention backward tensor cores %s %s [%lld, %lld, %lld, %lld]: max error %.3g (dq), "
         "%.3g (dk), %.3g (dv), %.2f of the bound; from the f32 kernels %.3g, %.3g, %.3g\n",
         format_name[fmt], causal ? "causal" : "full", (long long)b, (long long)h, (long long)t,
         (long long)d, err[0], err[1], err[2], used, err_f32[0], err_f32[1], err_f32[2]);
  assert_int_equal(bad, 0);
  emulation_checked++;
  for (int i = 0; i < 4; i++) free(x[i]), free(th[i]);
  for (int i = 0; i < 5; i++) free(fh[i]);
  for (int g = 0; g < 3; g++)
    free(want[g]), free(bound[g]), free(f32_grad[g]), free(tgrad[g]), free(fgrad[g]);
  free(o);
  free(ho);
  free(lse);
  free(delta);
}

static void attention_tc_backward_matches_f32_kernels(void **state) {
  (void)state;
  check_attention_tc_backward(1, 1, 1, 64, 1, BF16);   /* T = 1 */
  check_attention_tc_backward(1, 1, 70, 64, 1, BF16);  /* two blocks each way, causal skips */
  check_attention_tc_backward(1, 1, 33, 128, 0, BF16); /* full attention, partial tiles */
  check_attention_tc_backward(1, 1, 37, 64, 0, F16);
  check_attention_tc_backward(1, 1, 20, 128, 1, F16);
  /* three tiles each way, dq's chunks of 32 keys and dkdv's of 16 queries (T 70 above: the
   * tiles pipelined at head_dim 64) */
  check_attention_tc_backward(1, 1, 140, 128, 1, BF16);
}

static void geometry_rejects_bad_shapes(void **state) {
  (void)state;
  jx_cuda_launch_dims d;
  assert_null(jx_cuda_attention_kernel(JX_F32, 96));
  assert_null(jx_cuda_attention_kernel(JX_F64, 64));
  assert_null(jx_cuda_softmax_kernel(JX_F64));
  assert_int_equal(jx_cuda_attention_geometry(1, 1, 8, 96, &d), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "head_dim must be 32, 64 or 128"));
  jx_clear_error();
  assert_int_equal(jx_cuda_attention_geometry(1, 70000, 8, 64, &d), JX_ERR_INVALID_ARGUMENT);
  jx_clear_error();
  assert_int_equal(jx_cuda_softmax_geometry(-1, 4, &d), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "jx_cuda_softmax_geometry"));
  jx_clear_error();
  check_ok(jx_cuda_softmax_geometry(0, 4, &d)); /* nothing to launch */
  assert_int_equal(d.grid[0], 0);
  check_ok(jx_cuda_attention_geometry(2, 3, 33, 64, &d));
  assert_int_equal(d.grid[0], 3);
  assert_int_equal(d.grid[1], 3);
  assert_int_equal(d.grid[2], 2);
  assert_int_equal(d.block[0], 128);
}

/* ---- NVRTC ---- */

/* The tensor-core source with the kernels of the given 16-bit types and
 * head dims alone (malloc'ed). NVRTC takes about half a second a kernel
 * there: sm_80 compiles bf16 at head_dim 128, sm_90 f16 at 128 and bf16 at
 * 64, so that each arch sees each template with the larger registers and
 * shared memory, sm_90 both mma types and both head dims (the emulator
 * runs all four). */
static char *tensor_core_unit(const char *const *lines, int nlines) {
  const char *src = jx_cuda_attention_tc_src, *cut = strstr(src, "JX_TC_KERNELS(bf16_d64");
  assert_non_null(cut);
  size_t n = (size_t)(cut - src) + 1;
  for (int i = 0; i < nlines; i++) n += strlen(lines[i]);
  char *unit = malloc(n);
  assert_non_null(unit);
  memcpy(unit, src, (size_t)(cut - src));
  unit[cut - src] = 0;
  for (int i = 0; i < nlines; i++) strcat(unit, lines[i]);
  return unit;
}

/* ELF64 section header fields of a cubin (little-endian). */
static uint64_t elf_u64(const char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static uint32_t elf_u32(const char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static uint16_t elf_u16(const char *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

/* Section `name` of the cubin image: its offset and size, or 0. */
static int elf_section(const char *image, size_t n, const char *name, uint64_t *off, uint64_t *size,
                       uint32_t *link) {
  const uint64_t shoff = elf_u64(image + 0x28);
  const uint16_t shentsize = elf_u16(image + 0x3a), shnum = elf_u16(image + 0x3c);
  const uint16_t shstrndx = elf_u16(image + 0x3e);
  assert_true(shoff + (uint64_t)shnum * shentsize <= n);
  const uint64_t names = elf_u64(image + shoff + (uint64_t)shstrndx * shentsize + 0x18);
  for (uint16_t i = 0; i < shnum; i++) {
    const char *sh = image + shoff + (uint64_t)i * shentsize;
    if (strcmp(image + names + elf_u32(sh), name)) continue;
    *off = elf_u64(sh + 0x18);
    *size = elf_u64(sh + 0x20);
    if (link) *link = elf_u32(sh + 0x28);
    assert_true(elf_u32(sh + 4) == 8 /* SHT_NOBITS: no bytes in the file */ || *off + *size <= n);
    return 1;
  }
  return 0;
}

/* What ptxas allotted kernel `name` in the cubin image: registers a thread
 * (EIATTR_REGCOUNT, 0x2f, in .nv.info: the kernel's symbol index and the
 * count), its local-memory frame in bytes (EIATTR_FRAME_SIZE, 0x11: spills
 * and indexed arrays) and its static shared memory (the size of section
 * .nv.shared.<name>, the 1 KB the driver reserves a block on sm_80+
 * included where ptxas puts it there). */
static void kernel_resources(const char *image, size_t n, const char *name, int *regs, int *frame,
                             int *smem) {
  uint64_t off, size, stroff, strsize;
  uint32_t strtab;
  char section[96];
  *regs = *frame = -1;
  *smem = 0;
  snprintf(section, sizeof section, ".nv.shared.%s", name);
  if (elf_section(image, n, section, &off, &size, NULL)) *smem = (int)size;
  assert_true(elf_section(image, n, ".symtab", &off, &size, &strtab));
  const uint64_t shoff = elf_u64(image + 0x28);
  const uint16_t shentsize = elf_u16(image + 0x3a);
  stroff = elf_u64(image + shoff + (uint64_t)strtab * shentsize + 0x18);
  strsize = elf_u64(image + shoff + (uint64_t)strtab * shentsize + 0x20);
  uint32_t sym = 0;
  for (uint64_t s = 0; s < size / 24; s++) { /* Elf64_Sym: st_name first, 24 bytes */
    const uint32_t at = elf_u32(image + off + 24 * s);
    if (at < strsize && !strcmp(image + stroff + at, name)) sym = (uint32_t)s;
  }
  assert_true(sym != 0);
  assert_true(elf_section(image, n, ".nv.info", &off, &size, NULL));
  for (uint64_t p = off; p + 2 <= off + size;) { /* entries: format, attribute, value */
    const unsigned fmt = (unsigned char)image[p], attr = (unsigned char)image[p + 1];
    p += 2;
    if (fmt == 4) { /* a sized value: u16 size, then (symbol, value) for these two */
      const uint16_t len = elf_u16(image + p);
      if (len == 8 && elf_u32(image + p + 2) == sym) {
        if (attr == 0x2f) *regs = (int)elf_u32(image + p + 6);
        if (attr == 0x11) *frame = (int)elf_u32(image + p + 6);
      }
      p += 2 + len;
    } else {
      p += fmt == 3 ? 2 : fmt == 2 ? 1 : 0;
    }
  }
  assert_true(*regs > 0 && *frame >= 0);
}

/* Blocks of 128 threads an sm_90 SM holds: 64K registers allotted 256 a
 * warp at a time, 228 KB of shared memory (227 KB a block), 32 blocks and
 * 64 warps. */
static int sm90_blocks(int regs, int smem) {
  const int warp_regs = (regs * 32 + 255) / 256 * 256;
  int blocks = 65536 / (4 * warp_regs);
  if (smem > 0 && 228 * 1024 / smem < blocks) blocks = 228 * 1024 / smem;
  return blocks < 16 ? blocks : 16;
}

/* The registers, local frame and shared memory of the tensor-core kernels
 * in a cubin, printed (with their occupancy for sm_90's); the design's bounds
 * (docs/cuda.md): static shared memory within 48 KB, no local frame at
 * head_dim 64, two blocks (8 warps) an SM at least. */
static void check_tensor_core_resources(const char *image, size_t n, const char *arch,
                                        const char *const *kernels, int nkernels) {
  for (int k = 0; k < nkernels; k++) {
    int regs, frame, smem;
    kernel_resources(image, n, kernels[k], &regs, &frame, &smem);
    printf("NVRTC %s: %s: %d registers, %d bytes of local frame, %d bytes of shared memory", arch,
           kernels[k], regs, frame, smem);
    assert_true(smem <= 48 * 1024);
    if (strstr(kernels[k], "_d64")) assert_int_equal(frame, 0);
    if (strcmp(arch, "sm_90")) {
      printf("\n");
      continue;
    }
    const int blocks = sm90_blocks(regs, smem);
    printf("; %d blocks (%d warps) an SM\n", blocks, 4 * blocks);
    assert_true(blocks >= 2);
  }
}

static void nvrtc_compiles_both(void **state) {
  (void)state;
  char tc_names[3][3][48];
  if (!jx_nvrtc_available()) {
    printf("skipped: NVRTC not found (%s)\n", jx_nvrtc_load_error());
    return;
  }
  const char *archs[] = {"sm_80", "sm_90"};
  struct {
    const char *src, *file, *kernels[6];
  } units[] = {
      {jx_cuda_attention_bwd_src,
       "attention_bwd.cu",
       {"jx_attention_bwd_delta_f32_d64", "jx_attention_bwd_dq_f32_d128",
        "jx_attention_bwd_dkdv_f32_d128", "jx_attention_bwd_delta_bf16_d32",
        "jx_attention_bwd_dq_bf16_d64", "jx_attention_bwd_dkdv_bf16_d128"}},

      {jx_cuda_softmax_src, "softmax.cu", {"jx_softmax_f32", "jx_softmax_bf16"}},
      {jx_cuda_attention_src,
       "attention.cu",
       {"jx_attention_fwd_f32_d32", "jx_attention_fwd_f32_d64", "jx_attention_fwd_f32_d128",
        "jx_attention_fwd_bf16_d32", "jx_attention_fwd_bf16_d64", "jx_attention_fwd_bf16_d128"}},
      {NULL, "attention_tc.cu", {NULL}}}; /* tensor_core_unit's, below */
  for (size_t a = 0; a < 2; a++)
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
      jx_nvrtc_options opt = {.arch = archs[a], .output = JX_NVRTC_CUBIN};
      char *image = NULL, *tc = NULL;
      size_t n = 0;
      const char *tc_kernels[8];
      int ntc = 0;
      if (!units[u].src) { /* the tensor-core kernels (tensor_core_unit) */
        static const char *const lines[] = {"JX_TC_KERNELS(bf16_d128, 128, 0)\n",
                                            "JX_TC_KERNELS(f16_d128, 128, 1)\n",
                                            "JX_TC_KERNELS(bf16_d64, 64, 0)\n"};
        units[u].src = tc = tensor_core_unit(a ? lines + 1 : lines, a ? 2 : 1);
        const jx_dtype dts[3] = {JX_BF16, JX_F16, JX_BF16};
        const int dims[3] = {128, 128, 64};
        for (int w = a ? 1 : 0; w < (a ? 3 : 1); w++) {
          tc_kernels[ntc++] = jx_cuda_attention_tc_kernel(dts[w], dims[w]);
          assert_int_equal(jx_cuda_attention_tc_bwd_kernels(dts[w], dims[w], tc_names[w]), 0);
          for (int k = 0; k < 3; k++) tc_kernels[ntc++] = tc_names[w][k];
        }
        for (int k = 0; k < 6; k++) units[u].kernels[k] = k < ntc ? tc_kernels[k] : NULL;
      }
      jx_status st = nvrtc_test_compile(units[u].src, units[u].file, &opt, &image, &n);
      if (st) fprintf(stderr, "%s\n", jx_last_error());
      assert_int_equal(st, JX_OK);
      assert_memory_equal(image, "\177ELF", 4);
      for (int k = 0; k < 6 && units[u].kernels[k]; k++)
        assert_non_null(memmem(image, n, units[u].kernels[k], strlen(units[u].kernels[k]) + 1));
      if (tc) check_tensor_core_resources(image, n, archs[a], tc_kernels, ntc);
      free(image);
      if (tc) {
        free(tc);
        units[u].src = NULL;
      }
      printf("NVRTC: %s for %s\n", units[u].file, archs[a]);
    }
}

static int teardown_group(void **state) {
  (void)state;
  cuda_emu_unload(softmax_module);
  cuda_emu_unload(attention_module);
  cuda_emu_unload(backward_module);
  cuda_emu_unload(tc_module);
  printf("%d kernel runs emulated and checked\n", emulation_checked);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(nvrtc_compiles_both, setup, teardown),
      cmocka_unit_test_setup_teardown(geometry_rejects_bad_shapes, setup, teardown),
      cmocka_unit_test_setup_teardown(softmax_f32_matches_reference, setup, teardown),
      cmocka_unit_test_setup_teardown(softmax_bf16_matches_reference, setup, teardown),
      cmocka_unit_test_setup_teardown(xent_matches_reference, setup, teardown),
      cmocka_unit_test_setup_teardown(attention_f32_matches_reference, setup, teardown),
      cmocka_unit_test_setup_teardown(attention_bf16_matches_reference, setup, teardown),
      cmocka_unit_test_setup_teardown(attention_tc_geometry_rejects_bad_shapes, setup, teardown),
      cmocka_unit_test_setup_teardown(attention_tc_matches_f32_kernel, setup, teardown),
      cmocka_unit_test_setup_teardown(attention_backward_matches_reference, setup, teardown),
      cmocka_unit_test_setup_teardown(attention_tc_backward_matches_f32_kernels, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, teardown_group);
  jx_shutdown();
  return failed;
}
